"""Physical units for config values: the unit a key's name implies, and quantity strings.

Units live in key names (``freq_mhz``, ``sram_kib``, ``bw_gb_per_s``, ``energy_pj_per_byte``).
A config value is either a plain number in that unit or a string with its own unit
(``"0.5 GHz"``), which :func:`convert_quantity` turns into the key's unit with exact rational
arithmetic (``fractions.Fraction``), so ``"19.2 GB/s"`` gives exactly ``19.2`` and
``"3.2e-11 J/B"`` exactly ``32.0`` pJ/B.

This module is private; :mod:`coaccel.config` re-exports what users need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Quantity",
    "UnitError",
    "accepted_units",
    "accepted_units_text",
    "convert_quantity",
    "dimension_name",
    "parse_unit",
    "unit_for_name",
]

_K = Fraction(10) ** 3

# Base units: symbol -> (dimension, factor to the dimension's SI base, name-suffix spelling or
# None for aliases that never name a key). Factors are exact Fractions.
_BASE: dict[str, tuple[str, Fraction, str | None]] = {
    # time (s)
    "s": ("time", Fraction(1), "s"),
    "ms": ("time", Fraction(1, 10**3), "ms"),
    "us": ("time", Fraction(1, 10**6), "us"),
    "µs": ("time", Fraction(1, 10**6), None),
    "ns": ("time", Fraction(1, 10**9), "ns"),
    "ps": ("time", Fraction(1, 10**12), "ps"),
    # frequency (Hz)
    "Hz": ("frequency", Fraction(1), "hz"),
    "kHz": ("frequency", _K, "khz"),
    "MHz": ("frequency", _K**2, "mhz"),
    "GHz": ("frequency", _K**3, "ghz"),
    # data size (byte); decimal and binary prefixes, bits
    "B": ("data size", Fraction(1), "bytes"),
    "byte": ("data size", Fraction(1), None),
    "bytes": ("data size", Fraction(1), None),
    "kB": ("data size", _K, "kb"),
    "MB": ("data size", _K**2, "mb"),
    "GB": ("data size", _K**3, "gb"),
    "TB": ("data size", _K**4, "tb"),
    "KiB": ("data size", Fraction(2**10), "kib"),
    "MiB": ("data size", Fraction(2**20), "mib"),
    "GiB": ("data size", Fraction(2**30), "gib"),
    "TiB": ("data size", Fraction(2**40), "tib"),
    "bit": ("data size", Fraction(1, 8), "bits"),
    "bits": ("data size", Fraction(1, 8), None),
    "kbit": ("data size", _K / 8, "kbit"),
    "Mbit": ("data size", _K**2 / 8, "mbit"),
    "Gbit": ("data size", _K**3 / 8, "gbit"),
    "Kibit": ("data size", Fraction(2**10, 8), "kibit"),
    "Mibit": ("data size", Fraction(2**20, 8), "mibit"),
    # energy (J)
    "J": ("energy", Fraction(1), "j"),
    "mJ": ("energy", Fraction(1, 10**3), "mj"),
    "uJ": ("energy", Fraction(1, 10**6), "uj"),
    "µJ": ("energy", Fraction(1, 10**6), None),
    "nJ": ("energy", Fraction(1, 10**9), "nj"),
    "pJ": ("energy", Fraction(1, 10**12), "pj"),
    "fJ": ("energy", Fraction(1, 10**15), "fj"),
    # area (m^2)
    "mm2": ("area", Fraction(1, 10**6), "mm2"),
    "mm^2": ("area", Fraction(1, 10**6), None),
    "mm²": ("area", Fraction(1, 10**6), None),
    "um2": ("area", Fraction(1, 10**12), "um2"),
    "um^2": ("area", Fraction(1, 10**12), None),
    "µm2": ("area", Fraction(1, 10**12), None),
    "µm²": ("area", Fraction(1, 10**12), None),
    "nm2": ("area", Fraction(1, 10**18), "nm2"),
    # power (W)
    "W": ("power", Fraction(1), "w"),
    "kW": ("power", _K, "kw"),
    "mW": ("power", Fraction(1, 10**3), "mw"),
    "uW": ("power", Fraction(1, 10**6), "uw"),
    "µW": ("power", Fraction(1, 10**6), None),
    # a counted operation, for energy or area per MAC
    "MAC": ("MAC count", Fraction(1), "mac"),
}

# Spelling of a unit as the denominator of a key name: "_pj_per_byte", "_gb_per_s".
_DEN_SUFFIX = {"B": "byte", "bit": "bit"}

_COMPOUND_NAMES = {
    ("data size", "time"): "bandwidth",
    ("energy", "data size"): "energy per data size",
    ("energy", "MAC count"): "energy per MAC",
    ("area", "MAC count"): "area per MAC",
}


@dataclass(frozen=True)
class Quantity:
    """A parsed unit: its dimension (numerator, denominator) and exact factor to SI.

    Attributes:
        symbol: canonical spelling, e.g. ``"GB/s"``.
        dim: ``(numerator dimension, denominator dimension or None)``.
        factor: exact factor from one of this unit to the SI base of its dimension.
    """

    symbol: str
    dim: tuple[str, str | None]
    factor: Fraction


class UnitError(ValueError):
    """A quantity string that cannot be read in the requested unit (message is user-facing).

    Attributes:
        kind: ``"syntax"`` (not a number with a unit), ``"no_unit"``, ``"unknown"`` (unknown
            unit) or ``"dimension"`` (a unit of another dimension).
        accepted: the accepted units, as text.
    """

    def __init__(self, message: str, kind: str, accepted: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.accepted = accepted


def parse_unit(symbol: str) -> Quantity | None:
    """Parse a unit symbol such as ``"MHz"``, ``"GB/s"`` or ``"pJ/B"``.

    Args:
        symbol: the unit; at most one ``/``; spaces around ``/`` are ignored.

    Returns:
        The unit, or None if it is not known.
    """
    parts = [p.strip() for p in symbol.split("/")]
    if len(parts) == 1:
        base = _BASE.get(parts[0])
        if base is None:
            return None
        return Quantity(parts[0], (base[0], None), base[1])
    if len(parts) == 2:
        num, den = _BASE.get(parts[0]), _BASE.get(parts[1])
        if num is None or den is None:
            return None
        return Quantity(f"{parts[0]}/{parts[1]}", (num[0], den[0]), num[1] / den[1])
    return None


def dimension_name(dim: tuple[str, str | None]) -> str:
    """Human name of a dimension, e.g. ``("data size", "time")`` -> ``"bandwidth"``."""
    if dim[1] is None:
        return dim[0]
    return _COMPOUND_NAMES.get((dim[0], dim[1]), f"{dim[0]} per {dim[1]}")


def _canonical_symbols(dimension: str) -> list[str]:
    # Symbols that name keys come first (they are the canonical ones), aliases after.
    named = [s for s, b in _BASE.items() if b[0] == dimension and b[2] is not None]
    aliases = [s for s, b in _BASE.items() if b[0] == dimension and b[2] is None]
    return named + aliases


def accepted_units(dim: tuple[str, str | None]) -> list[str]:
    """Every unit symbol of a dimension, canonical spellings first.

    Args:
        dim: ``(numerator dimension, denominator dimension or None)``.

    Returns:
        Symbols such as ``["B/s", "kB/s", ...]``.
    """
    nums = [s for s in _canonical_symbols(dim[0]) if _BASE[s][2] is not None]
    if dim[1] is None:
        return _canonical_symbols(dim[0])
    dens = [s for s in _canonical_symbols(dim[1]) if _BASE[s][2] is not None]
    return [f"{n}/{d}" for n in nums for d in dens]


def accepted_units_text(dim: tuple[str, str | None]) -> str:
    """:func:`accepted_units` for a message: a list, or ``X/Y`` with the two lists for a ratio.

    Args:
        dim: ``(numerator dimension, denominator dimension or None)``.

    Returns:
        e.g. ``"s, ms, us, ns, ps, µs"`` or
        ``"X/Y with X one of B, kB, ... and Y one of s, ms, ..."``.
    """
    if dim[1] is None:
        return ", ".join(_canonical_symbols(dim[0]))
    nums = ", ".join(s for s in _canonical_symbols(dim[0]) if _BASE[s][2] is not None)
    dens = ", ".join(s for s in _canonical_symbols(dim[1]) if _BASE[s][2] is not None)
    return f"X/Y with X one of {nums} and Y one of {dens}"


def _build_suffix_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for sym, (_, _, suffix) in _BASE.items():
        if suffix is not None:
            table["_" + suffix] = sym
    for num, (_, _, nsuf) in _BASE.items():
        if nsuf is None:
            continue
        for den, (_, _, dsuf) in _BASE.items():
            if dsuf is None:
                continue
            table[f"_{nsuf}_per_{_DEN_SUFFIX.get(den, dsuf)}"] = f"{num}/{den}"
    return table


_SUFFIXES = _build_suffix_table()


def unit_for_name(name: str) -> str | None:
    """The unit a key's name implies, from its suffix.

    ``freq_mhz`` -> ``"MHz"``, ``sram_kib`` -> ``"KiB"``, ``bw_gb_per_s`` -> ``"GB/s"``,
    ``energy_pj_per_byte`` -> ``"pJ/B"``. A name with ``_per_`` whose compound suffix is not a
    known rate (``tokens_per_s``, ``macs_per_pe``) implies no unit, so ``_s`` alone never
    turns a rate into a time.

    Args:
        name: a key name (lower case).

    Returns:
        The unit symbol, or None when the name implies no physical unit.
    """
    has_per = "_per_" in name
    best: str | None = None
    for suffix, sym in _SUFFIXES.items():
        if not name.endswith(suffix) or len(name) == len(suffix):
            continue
        if has_per and "/" not in sym:
            continue
        if best is None or len(suffix) > len(best):
            best = suffix
    return None if best is None else _SUFFIXES[best]


# A decimal number (optionally with exponent) followed by an optional unit. Exponents are limited
# so that exact rational arithmetic stays cheap on hostile input.
_QUANTITY_RE = re.compile(
    r"^\s*(?P<num>[-+]?(?:\d{1,60}(?:\.\d{0,60})?|\.\d{1,60})(?:[eE][-+]?\d{1,4})?)"
    r"\s*(?P<unit>[^\s\d.+-].*?)?\s*$"
)


def convert_quantity(text: str, unit: str) -> Fraction:
    """Read a quantity string in a given unit, exactly.

    Args:
        text: e.g. ``"0.5 GHz"``, ``"64 KiB"``, ``"19.2 GB/s"``, ``"3.2e-11 J/B"``.
        unit: the target unit symbol (from :func:`unit_for_name`), e.g. ``"MHz"``.

    Returns:
        The value in ``unit`` as an exact Fraction (``"0.5 GHz"`` in MHz -> 500).

    Raises:
        UnitError: not a number with a unit, an unknown unit, or a unit of another dimension;
            the message names the accepted units.
    """
    target = parse_unit(unit)
    if target is None:
        raise ValueError(f"unknown target unit {unit!r}")
    accepted = accepted_units_text(target.dim)
    m = _QUANTITY_RE.match(text)
    if m is None:
        raise UnitError(
            f"{text!r} is not a number with a unit (e.g. '1 {unit}'); accepted units: {accepted}",
            "syntax",
            accepted,
        )
    if m.group("unit") is None:
        raise UnitError(
            f"{text!r} has no unit: write a plain number (in {unit}) or add a unit; "
            f"accepted units: {accepted}",
            "no_unit",
            accepted,
        )
    given_sym = m.group("unit")
    given = parse_unit(given_sym)
    if given is None:
        raise UnitError(
            f"unknown unit {given_sym!r} in {text!r}; accepted units: {accepted}",
            "unknown",
            accepted,
        )
    if given.dim != target.dim:
        raise UnitError(
            f"unit {given_sym!r} in {text!r} is a {dimension_name(given.dim)}, but this key is a "
            f"{dimension_name(target.dim)} in {unit}; accepted units: {accepted}",
            "dimension",
            accepted,
        )
    # Exponent sizes are bounded by the regex, so this Fraction is small.
    return Fraction(m.group("num")) * given.factor / target.factor
