"""Published figures the validations compare against, read from sourced data files.

Every figure a ``coaccel validate NAME`` compares our models with (a paper's headline ratio, a
measured plateau, a recomputed table entry) lives in ``arch_configs/validation/<name>.yaml``,
shipped with the package, one entry per figure with its value, unit and source (a key of
``docs/references.md`` and the place in it)::

    version: 1
    description: DeltaLLM and TeLLMe-v2 figures of `coaccel validate deltallm`
    figures:
      speedup:
        value: 1.62
        unit: x
        source: "[DELTALLM] hardware co-design version's abstract: 1.62x over TeLLMe-v2"

The files go through the typed config loader (:func:`coaccel.spine.config.load_config`): an
unknown or missing key, a value that is not a number, a unit coaccel does not know or a source
that cites no reference key is an error, and all of a file's problems come as one
:class:`~coaccel.spine.config.ConfigError`. A value the validation computes from these figures
(marked ``[DERIVED]`` where it is shown) is computed in code, not listed.

Public: :class:`PublishedFigure`, :class:`PublishedFigures` (the schema),
:func:`load_published` (a shipped file by name, cached), :func:`read_published` (any file),
:func:`published_names` (the shipped files), :data:`COUNT_UNITS`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..spine.config import load_config, param
from ..spine.errors import CoaccelError
from ..spine.units import parse_unit

__all__ = [
    "COUNT_UNITS",
    "PUBLISHED_DIR",
    "PublishedFigure",
    "PublishedFigures",
    "load_published",
    "published_names",
    "read_published",
]

PUBLISHED_DIR = "validation"
"""Folder of the published-figure files under the shipped ``arch_configs``."""

COUNT_UNITS = frozenset({"1", "x", "%", "cycles", "tokens"})
"""Units of counts and ratios a figure may have besides the physical units of
:func:`coaccel.spine.units.parse_unit`: ``1`` (a fraction), ``x`` (a ratio), ``%`` (a
percentage), ``cycles``, ``tokens``."""


def _cites_a_key(text: str) -> bool:
    """Whether ``text`` holds a reference key: upper-case letters and digits in brackets, in
    hyphen-joined parts, starting with a letter (the keys of ``docs/references.md``)."""
    for part in text.split("[")[1:]:
        key, closed, _ = part.partition("]")
        words = key.split("-")
        well_formed = all(w.isascii() and w.isalnum() and w == w.upper() for w in words)
        if closed and len(key) > 1 and key[0].isalpha() and well_formed:
            return True
    return False


@dataclass(frozen=True)
class PublishedFigure:
    """One published figure.

    Attributes:
        value: the figure, in :attr:`unit`.
        unit: its unit: a physical unit (``B/s``, ``ns``, ``J``, ``um2/MAC``) or one of
            :data:`COUNT_UNITS`.
        source: where it is published: a reference key of ``docs/references.md`` and the place in
            the source (table, file, abstract), or ``[DERIVED]`` and how it was obtained from
            published material.
        note: what the figure is, where its source leaves something open.
    """

    value: float = param(unit="", doc="the published figure, in `unit`")
    unit: str = param(doc="unit of `value`")
    source: str = param(doc="reference key of docs/references.md and the place in the source")
    note: str = param("", doc="what the figure is, where the source leaves it open")

    def validate(self) -> list[str]:
        """A unit coaccel knows and a source that cites a reference key."""
        out = []
        if self.unit not in COUNT_UNITS and parse_unit(self.unit) is None:
            out.append(
                f"unit: unknown unit {self.unit!r}; use a physical unit (B/s, ns, J, um2/MAC, "
                f"...) or one of {', '.join(sorted(COUNT_UNITS))}"
            )
        if not _cites_a_key(self.source):
            out.append(
                f"source: {self.source!r} cites no reference key (a bracketed key of "
                "docs/references.md)"
            )
        return out


@dataclass(frozen=True)
class PublishedFigures:
    """A file of published figures (``arch_configs/validation/<name>.yaml``).

    Attributes:
        description: what the figures are for (one line).
        figures: figure name -> :class:`PublishedFigure`.
    """

    VERSION: ClassVar[int] = 1

    description: str = param(doc="what the figures are for")
    figures: Mapping[str, PublishedFigure] = param(doc="figure name -> figure")


def read_published(path: str | Path) -> Mapping[str, PublishedFigure]:
    """Read a published-figure file.

    Args:
        path: a YAML file in the :class:`PublishedFigures` schema.

    Returns:
        Figure name -> :class:`PublishedFigure` (read-only, in the file's order).

    Raises:
        ConfigError: every problem of the file at once (unknown or missing keys, a value that
            is not a number, an unknown unit, a source that cites no reference key).
    """
    return load_config(path, PublishedFigures).figures


def published_names() -> tuple[str, ...]:
    """Names of the shipped published-figure files (``hbq``, ...), sorted."""
    from importlib.resources import files

    root = Path(str(files("coaccel.arch_configs"))) / PUBLISHED_DIR
    return tuple(sorted(p.stem for p in root.glob("*.yaml")))


@functools.cache
def load_published(name: str) -> Mapping[str, PublishedFigure]:
    """The published figures of one validation set, from the shipped data file.

    Args:
        name: the file's name without ``.yaml`` (a :func:`published_names` entry).

    Returns:
        Figure name -> :class:`PublishedFigure`.

    Raises:
        CoaccelError: no such file is shipped (the message lists those that are).
        ConfigError: the file's problems, all at once.
    """
    from coaccel import arch_configs

    try:
        path = arch_configs.path(f"{PUBLISHED_DIR}/{name}.yaml")
    except FileNotFoundError:
        shipped = ", ".join(published_names()) or "none"
        raise CoaccelError(
            f"no published figures named {name!r} under arch_configs/{PUBLISHED_DIR}; "
            f"shipped: {shipped}"
        ) from None
    return read_published(path)
