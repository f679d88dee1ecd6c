"""Every citation in a shipped file resolves to an entry of docs/references.md.

The keys are parsed from ``docs/references.md`` (one ``### [KEY]`` heading per entry). The tests
fail on a ``source:`` / ``sources:`` value of a shipped YAML that names no key, on a ``[TAG]`` in
YAML, Markdown, Python or notebook text that is not a key, on any mention of the internal working
notes (``specs/``) in a shipped file, and on a source entry without a URL, DOI, arXiv id or
repository.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "docs" / "references.md"

# Shipped trees and files (what a user of the package or of the repository reads).
SHIPPED_DIRS = (
    "arch_configs",
    "coaccel",
    "models",
    "sim",
    "docs",
    "rtl",
    "benchmarks",
    "notebooks",
)
SHIPPED_FILES = ("README.md",)
# Verilog (rtl/**/*.v) is not scanned: its bytes are part of the ``rtl_digest`` column of
# rtl/synth/hbq_area.csv, so even a comment edit there needs a Yosys rerun (coaccel synth).
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".ipynb"}

# A citation tag: upper-case letters and digits, optionally in hyphen-joined parts ("R-PM",
# "S12", "HF-LLAMA31-8B"). One-letter brackets are type variables ("Optional[T]").
TAG_RE = re.compile(r"\[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]")
KEY_HEADING_RE = re.compile(r"^### \[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]\s*$", re.MULTILINE)

# Bracketed upper-case words that are not citations: tokenizer special tokens of the MiniLM
# reference and regular-expression character classes of Xilinx cell names (coaccel/synth.py,
# docs/synthesis.md).
NOT_CITATIONS = frozenset({"CLS", "SEP", "PAD", "SD", "RSCP"})

# Section of references.md whose entries are tags, not sources (no link required).
NON_SOURCE_SECTION = "## Tags that are not sources"
LINK_RE = re.compile(r"https?://|\bDOI\b|arXiv:\d{4}\.\d{4,5}|Repository:", re.IGNORECASE)


def _entries() -> dict[str, tuple[str, bool]]:
    """Parse references.md into ``{key: (entry text, is_source)}``."""
    text = REFERENCES.read_text(encoding="utf-8")
    cut = text.find(NON_SOURCE_SECTION)
    assert cut >= 0, f"{REFERENCES}: missing section {NON_SOURCE_SECTION!r}"
    heads = list(KEY_HEADING_RE.finditer(text))
    entries: dict[str, tuple[str, bool]] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end() : end].split("\n## ", 1)[0]
        assert m.group(1) not in entries, f"{REFERENCES}: key [{m.group(1)}] defined twice"
        entries[m.group(1)] = (body, m.start() < cut)
    return entries


KEYS = frozenset(_entries())


def _shipped_files() -> Iterator[Path]:
    for d in SHIPPED_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts:
                yield p
    for f in SHIPPED_FILES:
        yield ROOT / f


def _text(path: Path) -> str:
    """The readable text of a file; for notebooks, the sources of all cells."""
    raw = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return raw
    nb = json.loads(raw)
    return "\n".join("".join(cell.get("source", [])) for cell in nb.get("cells", []))


def _source_values(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """Yield ``(dotted key, text)`` for every value under a ``source`` or ``sources`` key."""
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{where}.{k}" if where else str(k)
            if k in ("source", "sources"):
                yield from _leaves(v, here)
            else:
                yield from _source_values(v, here)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _source_values(v, f"{where}[{i}]")


def _leaves(node: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, f"{where}[{i}]")
    else:
        yield where, str(node)


def test_references_define_the_non_source_tags() -> None:
    for tag in ("OURS", "DERIVED", "RTL", "SYNTH"):
        assert tag in KEYS, f"{REFERENCES}: no entry for [{tag}]"


def test_every_source_entry_has_a_link() -> None:
    bad = [k for k, (body, src) in _entries().items() if src and not LINK_RE.search(body)]
    assert not bad, f"{REFERENCES}: entries without URL, DOI, arXiv id or repository: {bad}"


def test_yaml_source_values_name_a_key() -> None:
    bad = []
    for path in sorted((ROOT / "arch_configs").rglob("*.y*ml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for where, value in _source_values(data, ""):
            tags = {t for t in TAG_RE.findall(value) if t in KEYS}
            if not tags:
                bad.append(f"{path.relative_to(ROOT)}: {where} = {value[:80]!r}")
    assert not bad, "source values citing no key of docs/references.md:\n" + "\n".join(bad)


def test_every_tag_is_a_key() -> None:
    bad = []
    for path in _shipped_files():
        for lineno, line in enumerate(_text(path).splitlines(), 1):
            for tag in TAG_RE.findall(line):
                if len(tag) > 1 and tag not in KEYS and tag not in NOT_CITATIONS:
                    bad.append(f"{path.relative_to(ROOT)}:{lineno}: [{tag}]")
    assert not bad, "tags that are not keys of docs/references.md:\n" + "\n".join(bad)


def test_no_shipped_file_cites_the_internal_notes() -> None:
    bad = []
    for path in _shipped_files():
        for lineno, line in enumerate(_text(path).splitlines(), 1):
            if "specs/" in line:
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()[:100]}")
    assert not bad, "shipped files citing specs/ (not available to users):\n" + "\n".join(bad)
