"""Problems found in a config, the error that lists them, and the wording of their messages.

Every check of the loader records a :class:`Problem` in a :class:`_Ctx` instead of raising, so
that one :class:`ConfigError` can list them all, one per line.

Public: :class:`Problem`, :class:`ConfigError`.

Internal (shared by the modules of :mod:`coaccel.spine.config`):

* :class:`_Ctx`: where the problems of one load are collected (file, folder for includes,
  files being included, configs already validated); :data:`_BAD` (a :class:`_Bad`) marks a
  value whose problem is already recorded.
* :func:`_show`: a value as a message shows it (shortened, ``null`` for None);
  :func:`_kind`: the YAML kind of a value (``int``, ``list``, ``mapping``...); :func:`_got`:
  both, for "expected X, got Y"; :func:`_join`: a dotted key; :func:`_one_line`: whitespace
  folded to one line; :func:`_printable`: control characters escaped.
"""

from __future__ import annotations

import dataclasses
import datetime
import numbers
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CoaccelError

__all__ = ["ConfigError", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config.

    Attributes:
        file: the file (or ``"<dict>"`` / ``"<override of X>"``) the value came from.
        key: dotted path of the key, e.g. ``"pe_array.macs_per_pe"`` or ``"sizes[2]"``;
            ``""`` for problems with the whole document (YAML syntax, not a mapping).
        value: the offending value as given (None when the key is missing).
        message: what is wrong, one line.
        valid: what would be accepted (valid keys, bounds, choices, units, type), if known.
    """

    file: str
    key: str
    value: Any
    message: str
    valid: str | None = None

    def __str__(self) -> str:
        parts = [_printable(p) for p in (self.file, self.key) if p]
        return ": ".join([*parts, _printable(self.message)])


def _printable(text: str) -> str:
    # One problem, one line: a key such as "a\nb" is shown escaped.
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ConfigError(CoaccelError):
    """A config has problems; ``str()`` lists every one, one per line.

    Attributes:
        problems: every problem found, in document order.
    """

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __reduce__(self):  # keeps .problems across process pools (pickle)
        return (type(self), (self.problems,))


# ---------------------------------------------------------------------------------------------
# Collecting problems


class _Bad:
    """Marker for a value that produced a problem (the problem is already recorded)."""


_BAD = _Bad()


@dataclass
class _Ctx:
    file: str
    base_dir: Path | None
    problems: list[Problem]
    includes: tuple[str, ...] = ()
    validated: set[int] = dataclasses.field(default_factory=set)

    def add(self, key: str, value: Any, message: str, valid: str | None = None) -> _Bad:
        self.problems.append(Problem(self.file, key, value, message, valid))
        return _BAD


# ---------------------------------------------------------------------------------------------
# Messages

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = 6
_repr.maxtuple = 6
_repr.maxdict = 6
_repr.maxlevel = 3


def _show(value: Any) -> str:
    if value is None:
        return "null"
    return _repr.repr(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return "date"
    if isinstance(value, bytes):
        return "binary"
    return type(value).__name__


def _got(value: Any) -> str:
    return "null" if value is None else f"{_kind(value)} {_show(value)}"


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _one_line(text: str) -> str:
    return " ".join(text.split())
