"""Prose of the Python documentation topics that ship with CPython (``pydoc_data.topics``,
[PYDOC]): the real English text the accuracy studies and the decoders' evaluations read."""

from __future__ import annotations

import re

__all__ = ["prose"]

_UNDERLINE = re.compile(r"^[*=\-~^\"']{3,}\s*$")


def prose(text: str) -> str:
    """The English prose of a pydoc topic: paragraphs that are not code, grammar or headings.

    A paragraph is a run of non-blank lines. It is dropped when its first line is indented (the
    topics indent code examples, grammar productions and tables) or when it is only a heading
    and its underline. Whitespace inside a paragraph is collapsed.

    Args:
        text: one ``pydoc_data.topics.topics`` value.

    Returns:
        The kept paragraphs joined by blank lines.
    """
    kept: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        lines = [ln for ln in para.split("\n") if ln.strip()]
        if not lines or lines[0][:1].isspace() or any(_UNDERLINE.match(ln) for ln in lines):
            continue
        kept.append(" ".join(" ".join(ln.split()) for ln in lines))
    return "\n\n".join(kept)
