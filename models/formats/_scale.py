"""Scale formats: unsigned E8M0 (OCP MX), UE4M3 (NVFP4), E5M3 (HBQ L1) and an FP16 scale.

A scale code is ``{E[ebits-1:0], M[mbits-1:0]}`` (no sign bit, except that UE4M3 and FP16 keep
their sign bit position, always 0). Values are ``2**(E - bias) * (1 + M / 2**mbits)``, or
``M / 2**mbits * 2**(1 - bias)`` for ``E == 0`` where the format has subnormals.
:func:`encode_scale` rounds the exact real ``value / divisor`` into the format, with the same
exact midpoint fix-up as the element encoder (:mod:`._elem`). Sources: [R-Q]
``get_max_norm`` (E5M3), [OCP-MX] (E8M0), [NV] (UE4M3).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from ._elem import _as_float_input, _check_rounding, _check_scale, _Grid, _make_grid, _round_grid

SCALE_ROUNDING_MODES = ("rne", "half_up", "half_away", "ceil", "floor")
"""Rounding modes of :func:`encode_scale`. Scales are positive, so ``half_up`` (HBQ's
``floor(8f + 0.5)``) and ``half_away`` are the same rule; ``ceil`` is cuDNN's round-up."""


@dataclass(frozen=True)
class ScaleFormat:
    """An unsigned floating-point scale format.

    Attributes:
        name: lower-case name, e.g. ``"e8m0"``.
        ebits: exponent bits.
        mbits: mantissa bits.
        bias: exponent bias.
        bits: code width in bits (storage; UE4M3 and FP16 include an always-zero sign bit).
        subnormals: whether ``E == 0`` codes are subnormal (then code 0 is the value 0).
        min_code: smallest valid code (the smallest value: encoding clamps up to it).
        max_code: largest finite code (encoding saturates to it).
        nan_code: the NaN code, or None. Codes outside ``min_code .. max_code`` other than
            ``nan_code`` are reserved: :func:`decode_scale` raises on them.
    """

    name: str
    ebits: int
    mbits: int
    bias: int
    bits: int
    subnormals: bool
    min_code: int
    max_code: int
    nan_code: int | None = None

    @property
    def n_codes(self) -> int:
        """Number of code patterns, ``2**bits``."""
        return 1 << self.bits

    @property
    def max_value(self) -> float:
        """Largest value."""
        return float(_scale_values(self, np.array([self.max_code]))[0])

    @property
    def min_value(self) -> float:
        """Smallest value (0.0 for formats with subnormals)."""
        return float(_scale_values(self, np.array([self.min_code]))[0])

    def values(self) -> npt.NDArray[np.float64]:
        """Value of every valid code ``min_code .. max_code`` (index i: code ``min_code + i``)."""
        return _scale_values(self, np.arange(self.min_code, self.max_code + 1))


E8M0 = ScaleFormat("e8m0", 8, 0, 127, 8, subnormals=False, min_code=0, max_code=254, nan_code=255)
"""OCP MX shared scale: ``2**(E-127)``, E in 0..254; 0xFF is NaN; no zero, no sign."""
UE4M3 = ScaleFormat("ue4m3", 4, 3, 7, 8, subnormals=True, min_code=0, max_code=0x7E, nan_code=0x7F)
"""NVFP4 block scale: E4M3 with the sign bit 0; max 448 (0x7E); 0x7F is NaN; 0x80.. invalid."""
E5M3 = ScaleFormat("e5m3", 5, 3, 15, 8, subnormals=False, min_code=0x08, max_code=0xF7)
"""HBQ L1 scale: ``2**(E-15) * (1 + M/8)``, E in 1..30, no subnormals, range [2**-14, 61440];
E = 0 and E = 31 codes are reserved."""
FP16 = ScaleFormat("fp16", 5, 10, 15, 16, subnormals=True, min_code=0, max_code=0x7BFF)
"""A positive IEEE binary16 scale (the ``int`` block format's default); codes are the binary16
bit patterns, 0 .. 0x7BFF (max 65504). Inf, NaN and negative patterns are never produced and
:func:`decode_scale` rejects them."""

SCALE_FORMATS: Mapping[str, ScaleFormat] = MappingProxyType(
    {f.name: f for f in (E8M0, UE4M3, E5M3, FP16)}
)
"""All named scale formats."""


def scale_format(name: str) -> ScaleFormat:
    """Look up a scale format by name (case-insensitive).

    Raises:
        ValueError: unknown name (the message lists the valid ones).
    """
    fmt = SCALE_FORMATS.get(str(name).lower())
    if fmt is None:
        raise ValueError(
            f"unknown scale format {name!r}; valid formats: {', '.join(SCALE_FORMATS)}"
        )
    return fmt


def _scale_values(fmt: ScaleFormat, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Values of codes known to be in ``min_code .. max_code``."""
    c = np.asarray(codes, dtype=np.int64)
    e = c >> fmt.mbits
    m = (c & ((1 << fmt.mbits) - 1)).astype(np.float64)
    norm = np.ldexp(1.0 + m / (1 << fmt.mbits), (e - fmt.bias).astype(np.int32))
    if not fmt.subnormals:
        return norm
    sub = m * 2.0 ** (1 - fmt.bias - fmt.mbits)
    return np.where(e == 0, sub, norm)


def scale_dtype(fmt: ScaleFormat) -> type[np.unsignedinteger]:
    """Code dtype: uint8 for 8-bit scales, uint16 for FP16."""
    return np.uint8 if fmt.bits <= 8 else np.uint16


def decode_scale(codes: npt.ArrayLike, fmt: ScaleFormat | str) -> npt.NDArray[np.float64]:
    """Exact value of scale codes.

    Args:
        codes: integer array of codes, any shape.
        fmt: the scale format or its name.

    Returns:
        float64 array of the same shape; the NaN code (E8M0 0xFF, UE4M3 0x7F) gives NaN.

    Raises:
        TypeError: non-integer codes.
        ValueError: a reserved or out-of-range code (E5M3 with E = 0 or E = 31, UE4M3 with the
            sign bit set, FP16 Inf/NaN/negative patterns).
    """
    if isinstance(fmt, str):
        fmt = scale_format(fmt)
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise TypeError(f"{fmt.name} scale codes must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64)
    nan = (c == fmt.nan_code) if fmt.nan_code is not None else np.zeros(c.shape, dtype=bool)
    bad = ~nan & ((c < fmt.min_code) | (c > fmt.max_code))
    if bad.any():
        raise ValueError(
            f"{fmt.name} scale code {int(c[bad].flat[0])} is reserved or out of range (valid: "
            f"{fmt.min_code}..{fmt.max_code}"
            + (f", NaN {fmt.nan_code}" if fmt.nan_code is not None else "")
            + ")"
        )
    val = _scale_values(fmt, np.where(nan, fmt.min_code, c))
    return np.where(nan, np.nan, val)


@functools.cache
def _scale_grid(fmt: ScaleFormat) -> _Grid:
    codes = np.arange(fmt.min_code, fmt.max_code + 1, dtype=np.int64)
    return _make_grid(_scale_values(fmt, codes), codes)


def encode_scale(
    value: npt.ArrayLike,
    fmt: ScaleFormat | str,
    *,
    rounding: str = "rne",
    divisor: npt.ArrayLike = 1.0,
) -> npt.NDArray[np.unsignedinteger]:
    """Round the exact real ``value / divisor`` into a scale format.

    Values below the smallest code clamp up to it (E8M0: 2**-127, E5M3: 2**-14; UE4M3 and FP16
    reach 0), values above the largest finite code saturate to it (E8M0 2**127, UE4M3 448, E5M3
    61440, FP16 65504), ``+Inf`` saturates too. Value 0 gives the smallest code.

    Args:
        value: non-negative reals, any shape.
        fmt: the scale format or its name.
        rounding: one of :data:`SCALE_ROUNDING_MODES`.
        divisor: float64 > 0 broadcastable to ``value`` (e.g. HBQ's ``10.5``); at most
            ``53 - w`` significant bits, where ``w`` is the widest midpoint of the format
            (2 for E8M0, 5 for UE4M3 and E5M3, 12 for FP16), and within ``[2**-960, 2**960]``.

    Returns:
        Codes (uint8; uint16 for FP16), the broadcast shape of ``value`` and ``divisor``. NaN
        gives the NaN code where the format has one.

    Raises:
        ValueError: negative value, NaN for a format without NaN, bad divisor or rounding name.
    """
    if isinstance(fmt, str):
        fmt = scale_format(fmt)
    _check_rounding(rounding, SCALE_ROUNDING_MODES)
    v = _as_float_input(value, "value")
    grid = _scale_grid(fmt)
    d = _check_scale(divisor, 53 - grid.cmp_bits, "divisor")
    v, d = np.broadcast_arrays(v, d)
    nan = np.isnan(v)
    if nan.any() and fmt.nan_code is None:
        raise ValueError(f"NaN scale value, but scale format {fmt.name!r} has no NaN code")
    if np.any(v < 0):
        raise ValueError(f"scale values must be >= 0, got {float(v[v < 0].flat[0])!r}")
    inf = np.isinf(v)
    k = _round_grid(np.where(nan | inf, 0.0, v), d, grid, rounding)
    k = np.where(inf, grid.values.size - 1, k)
    codes = (k + fmt.min_code).astype(scale_dtype(fmt))
    if nan.any() and fmt.nan_code is not None:  # a NaN without a NaN code raised above
        codes = np.where(nan, fmt.nan_code, codes).astype(scale_dtype(fmt))
    return codes


__all__ = [
    "E5M3",
    "E8M0",
    "FP16",
    "SCALE_FORMATS",
    "SCALE_ROUNDING_MODES",
    "UE4M3",
    "ScaleFormat",
    "decode_scale",
    "encode_scale",
    "scale_dtype",
    "scale_format",
]
