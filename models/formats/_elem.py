"""Element formats: sign-magnitude minifloats (E2M1 ... E5M2) and two's-complement integers.

Every format is exact over all of its code points (:func:`decode`), and :func:`encode` rounds the
*exact real number* ``x / scale`` to the nearest representable value: a candidate code is taken
from the float64 quotient and then fixed up by comparing ``|x|`` with ``midpoint * scale``, a
product that is exact in float64 because both factors have few significant bits. Sources:
[R-Q] ``make_fp_quant`` (E2M1, E2M2, the HBQ element quantiser), [OCP-MX] and [MX]
``mx/elemwise_ops.py`` (OCP MX elements).

Zero: every result whose magnitude rounds to zero (including ``-0.0`` input and tiny negative
values) is the code 0 (+0). Negative-zero codes (sign bit set, magnitude 0) decode to ``0.0`` and
re-encode to +0.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

ELEMENT_ROUNDING_MODES = ("rne", "half_away", "half_up")
"""Rounding modes of :func:`encode`, on the signed value: ``rne`` ties to the even code,
``half_away`` ties away from zero, ``half_up`` ties toward +inf."""

_SCALE_RANGE_LOG2 = 960
"""Scales must lie in [2**-960, 2**960] so that ``midpoint * scale`` is a normal float64."""


@dataclass(frozen=True)
class FPFormat:
    """A sign-magnitude minifloat element format.

    The code is ``{s, e[ebits-1:0], m[mbits-1:0]}``, MSB first. ``e == 0`` is subnormal
    (``m / 2**mbits * 2**(1 - bias)``); otherwise the value is
    ``2**(e - bias) * (1 + m / 2**mbits)`` unless the code is an Inf/NaN code.

    Attributes:
        name: lower-case name, e.g. ``"e2m1"``.
        ebits: exponent bits.
        mbits: mantissa (fraction) bits.
        bias: exponent bias.
        inf: whether the format has ±Inf codes (exponent all ones, mantissa 0; E5M2).
        nan: ``"none"``, ``"ieee"`` (exponent all ones, mantissa != 0) or ``"all_ones"``
            (only ``S.1...1.1...1`` is NaN; E4M3).
    """

    name: str
    ebits: int
    mbits: int
    bias: int
    inf: bool = False
    nan: str = "none"

    def __post_init__(self) -> None:
        if self.nan not in ("none", "ieee", "all_ones"):
            raise ValueError(f"nan={self.nan!r}; valid choices: 'none', 'ieee', 'all_ones'")
        if self.inf and self.nan != "ieee":
            raise ValueError("a format with Inf codes must use nan='ieee'")
        if self.ebits < 1 or self.mbits < 0 or self.bits > 8:
            raise ValueError(f"unsupported minifloat layout E{self.ebits}M{self.mbits}")

    @property
    def bits(self) -> int:
        """Code width in bits (sign included)."""
        return 1 + self.ebits + self.mbits

    @property
    def n_codes(self) -> int:
        """Number of codes, ``2**bits``."""
        return 1 << self.bits

    @property
    def max_code(self) -> int:
        """Magnitude code (sign bit clear) of the largest finite value."""
        top = (1 << (self.bits - 1)) - 1
        if self.nan == "ieee":
            return top - (1 << self.mbits)  # the whole top binade is Inf/NaN
        if self.nan == "all_ones":
            return top - 1
        return top

    @property
    def max_value(self) -> float:
        """Largest finite value."""
        return float(_fp_magnitude(self, self.max_code))

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value, ``2**(1 - bias)``."""
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value, ``2**(1 - bias - mbits)``."""
        return 2.0 ** (1 - self.bias - self.mbits)

    def values(self) -> npt.NDArray[np.float64]:
        """Value of every code, indexed by code (NaN / ±Inf where the format defines them)."""
        return decode(np.arange(self.n_codes, dtype=np.uint16), self)


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement integer element format; ``code = value & (2**bits - 1)``.

    Attributes:
        name: lower-case name, e.g. ``"int8"``.
        bits: code width (2..8).
        symmetric: if True the most negative code (``-2**(bits-1)``) is never produced by
            :func:`encode` (it still decodes to its two's-complement value).
    """

    name: str
    bits: int
    symmetric: bool = True

    def __post_init__(self) -> None:
        if not 2 <= self.bits <= 8:
            raise ValueError(f"integer element width {self.bits} is outside 2..8")

    @property
    def n_codes(self) -> int:
        """Number of codes, ``2**bits``."""
        return 1 << self.bits

    @property
    def max_value(self) -> float:
        """Largest value, ``2**(bits-1) - 1``."""
        return float((1 << (self.bits - 1)) - 1)

    @property
    def min_value(self) -> float:
        """Most negative value :func:`encode` produces."""
        return -float((1 << (self.bits - 1)) - (1 if self.symmetric else 0))

    def values(self) -> npt.NDArray[np.float64]:
        """Value of every code, indexed by code."""
        return decode(np.arange(self.n_codes, dtype=np.uint16), self)


ElementFormat = FPFormat | IntFormat

E2M1 = FPFormat("e2m1", 2, 1, 1)
"""FP4 (OCP MXFP4 / NVFP4 / HBQ weights): max 6, no Inf/NaN."""
E2M2 = FPFormat("e2m2", 2, 2, 1)
"""FP5 (HBQ activations): max 7, no Inf/NaN."""
E2M3 = FPFormat("e2m3", 2, 3, 1)
"""FP6 (OCP MXFP6): max 7.5, no Inf/NaN."""
E3M2 = FPFormat("e3m2", 3, 2, 3)
"""FP6 (OCP MXFP6): max 28, no Inf/NaN."""
E4M3 = FPFormat("e4m3", 4, 3, 7, inf=False, nan="all_ones")
"""OFP8 E4M3: max 448, NaN only at S.1111.111, no Inf."""
E5M2 = FPFormat("e5m2", 5, 2, 15, inf=True, nan="ieee")
"""OFP8 E5M2 (IEEE-like): max 57344, ±Inf and NaN."""
INT4 = IntFormat("int4", 4)
"""Symmetric 4-bit integer, -7..7."""
INT8 = IntFormat("int8", 8)
"""Symmetric 8-bit integer, -127..127."""

ELEMENT_FORMATS: Mapping[str, ElementFormat] = MappingProxyType(
    {f.name: f for f in (E2M1, E2M2, E2M3, E3M2, E4M3, E5M2, INT4, INT8)}
)
"""All named element formats."""


def element_format(name: str) -> ElementFormat:
    """Look up an element format by name (case-insensitive).

    Args:
        name: e.g. ``"e2m1"``, ``"int8"``.

    Returns:
        The format constant.

    Raises:
        ValueError: unknown name (the message lists the valid ones).
    """
    fmt = ELEMENT_FORMATS.get(str(name).lower())
    if fmt is None:
        raise ValueError(
            f"unknown element format {name!r}; valid formats: {', '.join(ELEMENT_FORMATS)}"
        )
    return fmt


# --------------------------------------------------------------------------------------------
# Decoding


def _fp_magnitude(fmt: FPFormat, mag: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Value of magnitude codes (sign bit clear), ignoring Inf/NaN rules."""
    mag = np.asarray(mag, dtype=np.int64)
    e = mag >> fmt.mbits
    m = (mag & ((1 << fmt.mbits) - 1)).astype(np.float64)
    sub = m * 2.0 ** (1 - fmt.bias - fmt.mbits)
    norm = np.ldexp(1.0 + m / (1 << fmt.mbits), (e - fmt.bias).astype(np.int32))
    return np.where(e == 0, sub, norm)


def _integer_codes(codes: npt.ArrayLike, n_codes: int, what: str) -> npt.NDArray[np.int64]:
    """Validate an array of integer codes in ``0 .. n_codes - 1``; returns it as int64."""
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise TypeError(f"{what} codes must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64)
    if c.size and (c.min() < 0 or c.max() >= n_codes):
        bad = c[(c < 0) | (c >= n_codes)].flat[0]
        raise ValueError(f"{what} code {int(bad)} is outside 0..{n_codes - 1}")
    return c


def decode(codes: npt.ArrayLike, fmt: ElementFormat) -> npt.NDArray[np.float64]:
    """Exact value of element codes.

    Args:
        codes: integer array of codes, any shape, each in ``0 .. fmt.n_codes - 1``.
        fmt: the element format.

    Returns:
        float64 array of the same shape. Negative-zero codes give ``0.0``; Inf/NaN codes give
        ±Inf/NaN where the format defines them.

    Raises:
        TypeError: non-integer codes.
        ValueError: a code out of range.
    """
    c = _integer_codes(codes, fmt.n_codes, fmt.name)
    if isinstance(fmt, IntFormat):
        half = 1 << (fmt.bits - 1)
        return np.where(c >= half, c - (1 << fmt.bits), c).astype(np.float64)
    sign_bit = 1 << (fmt.bits - 1)
    neg = (c & sign_bit) != 0
    mag = c & (sign_bit - 1)
    val = _fp_magnitude(fmt, mag)
    if fmt.nan == "ieee":
        top = (mag >> fmt.mbits) == (1 << fmt.ebits) - 1
        frac = mag & ((1 << fmt.mbits) - 1)
        val = np.where(top & (frac == 0), np.inf, val)
        val = np.where(top & (frac != 0), np.nan, val)
    elif fmt.nan == "all_ones":
        val = np.where(mag == sign_bit - 1, np.nan, val)
    # val >= 0 here, so -val of a zero magnitude would be -0.0; keep +0.0 instead.
    return np.where(neg & (val != 0), -val, val)


# --------------------------------------------------------------------------------------------
# Exact rounding onto a grid of non-negative values (shared with the scale formats)


@dataclass(frozen=True, eq=False)
class _Grid:
    """Increasing non-negative representable magnitudes, plus what the rounding needs.

    Attributes:
        values: the magnitudes, float64, increasing (exact).
        mids: midpoints ``(values[i] + values[i+1]) / 2`` (exact in float64).
        even: whether the code at each index is even (the RNE tie rule).
        cmp_bits: the widest significand (in bits) among the comparison points ``values`` and
            ``mids``; a scale with at most ``53 - cmp_bits`` significant bits keeps every
            ``point * scale`` product exact.
    """

    values: npt.NDArray[np.float64]
    mids: npt.NDArray[np.float64]
    even: npt.NDArray[np.bool_]
    cmp_bits: int


def _significand_bits(v: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Number of significant bits of each positive finite float64 (0 for zero)."""
    v = np.abs(np.asarray(v, dtype=np.float64))
    frac, _ = np.frexp(v)
    mant = (frac * 2.0**53).astype(np.uint64)  # exact: frac has at most 53 bits
    low = mant & (~mant + np.uint64(1))  # lowest set bit
    tz = np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(v == 0, 0, 53 - tz)


def _make_grid(values: npt.ArrayLike, codes: npt.ArrayLike) -> _Grid:
    vals = np.asarray(values, dtype=np.float64)
    if np.any(np.diff(vals) <= 0):
        raise ValueError("grid values must be strictly increasing")
    mids = (vals[:-1] + vals[1:]) / 2
    if np.any(mids * 2 != vals[:-1] + vals[1:]):
        raise ValueError("grid midpoints are not exact in float64")
    cmp_bits = int(max(_significand_bits(vals).max(), _significand_bits(mids).max()))
    even = (np.asarray(codes, dtype=np.int64) % 2) == 0
    for a in (vals, mids, even):
        a.setflags(write=False)
    return _Grid(vals, mids, even, cmp_bits)


@functools.cache
def _elem_grid(fmt: ElementFormat) -> _Grid:
    """Magnitude grid of an element format, with one virtual point above the top.

    The virtual point (``max + ulp`` for minifloats, ``2**(bits-1) + 1`` for integers) lets the
    rounding detect overflow: an index past the last real magnitude means "overflow".
    """
    if isinstance(fmt, IntFormat):
        kneg = (1 << (fmt.bits - 1)) - (1 if fmt.symmetric else 0)
        mags = np.arange(kneg + 2, dtype=np.int64)
        return _make_grid(mags.astype(np.float64), mags)
    mags = np.arange(fmt.max_code + 1, dtype=np.int64)
    vals = _fp_magnitude(fmt, mags)
    top_exp = (fmt.max_code >> fmt.mbits) - fmt.bias
    virtual = vals[-1] + 2.0 ** (top_exp - fmt.mbits)
    return _make_grid(np.append(vals, virtual), np.append(mags, fmt.max_code + 1))


def _check_rounding(rounding: str, valid: tuple[str, ...]) -> None:
    if rounding not in valid:
        raise ValueError(
            f"rounding={rounding!r}; valid choices: {', '.join(repr(r) for r in valid)}"
        )


def _check_scale(scale: npt.ArrayLike, max_bits: int, what: str) -> npt.NDArray[np.float64]:
    """Validate scales for exact rounding; returns them as float64.

    Raises:
        ValueError: a scale that is not finite, not positive, outside ``[2**-960, 2**960]`` or
            wider than ``max_bits`` significant bits.
    """
    s = np.asarray(scale)
    if s.dtype.kind not in "iuf":
        raise TypeError(f"{what} must be a real number or array, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        bad = float(s[~(np.isfinite(s) & (s > 0))].flat[0])
        raise ValueError(f"{what} must be finite and > 0, got {bad!r}")
    lo, hi = 2.0**-_SCALE_RANGE_LOG2, 2.0**_SCALE_RANGE_LOG2
    if np.any((s < lo) | (s > hi)):
        bad = float(s[(s < lo) | (s > hi)].flat[0])
        raise ValueError(
            f"{what} {bad!r} is outside [2**-{_SCALE_RANGE_LOG2}, 2**{_SCALE_RANGE_LOG2}]"
        )
    width = _significand_bits(s)
    if np.any(width > max_bits):
        i = np.flatnonzero(width.ravel() > max_bits)[0]
        raise ValueError(
            f"{what} {float(s.flat[i])!r} has {int(width.flat[i])} significant bits; at most "
            f"{max_bits} keep the rounding exact"
        )
    return s


def _tie_rules(
    grid: _Grid, k: npt.NDArray[np.int64], mode: str, neg: npt.NDArray[np.bool_] | bool
) -> tuple[Any, Any]:
    """For candidate ``k``: (tie at the upper midpoint goes up, tie at the lower one goes down)."""
    n = grid.values.size
    if mode == "rne":
        return grid.even[np.minimum(k + 1, n - 1)], grid.even[np.maximum(k - 1, 0)]
    if mode == "half_away":
        return True, False
    return ~np.asarray(neg), np.asarray(neg)  # half_up: toward +inf on the signed value


def _round_grid(
    a: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64] | float,
    grid: _Grid,
    mode: str,
    neg: npt.NDArray[np.bool_] | bool = False,
) -> npt.NDArray[np.int64]:
    """Index of the grid value that the exact real ``a / scale`` rounds to.

    Args:
        a: magnitudes, float64 >= 0, finite.
        scale: float64 > 0, broadcastable to ``a``, validated by :func:`_check_scale`.
        grid: the target grid; values below the first point give index 0, values above the last
            give the last index.
        mode: ``rne``, ``half_away``, ``half_up`` (``neg`` gives the sign of the signed value),
            ``ceil`` or ``floor`` (on the magnitude).
        neg: sign of the signed value (only ``half_up`` reads it).

    Returns:
        int64 indices, the broadcast shape of ``a`` and ``scale``.
    """
    vals, mids = grid.values, grid.mids
    n = vals.size
    q = a / scale
    if mode in ELEMENT_ROUNDING_MODES:
        # Candidate k: mids[k-1] < q <= mids[k]. The float quotient is within half an ulp of
        # the real one and midpoints are far apart, so the real value is at most one step off.
        k = np.searchsorted(mids, q, side="left").astype(np.int64)
        hi = mids[np.minimum(k, n - 2)] * scale
        lo = mids[np.maximum(k - 1, 0)] * scale
        up_tie, down_tie = _tie_rules(grid, k, mode, neg)
        up = (k < n - 1) & ((a > hi) | ((a == hi) & up_tie))
        down = (k > 0) & ((a < lo) | ((a == lo) & down_tie))
        return k + up - down
    if mode == "ceil":
        k = np.minimum(np.searchsorted(vals, q, side="left"), n - 1).astype(np.int64)
        up = (k < n - 1) & (a > vals[k] * scale)
        down = (k > 0) & (a <= vals[np.maximum(k - 1, 0)] * scale)
        return k + up - down
    if mode == "floor":
        k = np.maximum(np.searchsorted(vals, q, side="right") - 1, 0).astype(np.int64)
        down = (k > 0) & (a < vals[k] * scale)
        up = (k < n - 1) & (a >= vals[np.minimum(k + 1, n - 1)] * scale)
        return k + up - down
    raise ValueError(f"unknown grid rounding mode {mode!r}")


# --------------------------------------------------------------------------------------------
# Encoding


def _as_float_input(x: npt.ArrayLike, what: str = "x") -> npt.NDArray[np.float64]:
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{what} must be a real numeric array, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def nan_code(fmt: ElementFormat, negative: bool = False) -> int | None:
    """The code :func:`encode` gives a NaN input, or None if the format has no NaN.

    E4M3: ``0x7F`` (``0xFF`` for a NaN with the sign bit set). E5M2: the quiet NaN ``0x7E``
    (``0xFE``), which is IEEE binary16's canonical NaN ``0x7E00`` cut to 8 bits.
    """
    if isinstance(fmt, IntFormat) or fmt.nan == "none":
        return None
    sign = (1 << (fmt.bits - 1)) if negative else 0
    if fmt.nan == "all_ones":
        return sign | ((1 << (fmt.bits - 1)) - 1)
    top_exp = ((1 << fmt.ebits) - 1) << fmt.mbits
    return sign | top_exp | (1 << (fmt.mbits - 1))


def inf_code(fmt: ElementFormat, negative: bool = False) -> int | None:
    """Code of ±Inf (E5M2: ``0x7C`` / ``0xFC``), or None if the format has no Inf."""
    if isinstance(fmt, IntFormat) or not fmt.inf:
        return None
    sign = (1 << (fmt.bits - 1)) if negative else 0
    return sign | (((1 << fmt.ebits) - 1) << fmt.mbits)


def saturation_codes(fmt: ElementFormat) -> tuple[int, int]:
    """Codes of the largest and the most negative value :func:`encode` produces.

    Minifloats: ``+max`` and ``-max``. Integers: ``2**(bits-1) - 1`` and ``-(2**(bits-1) - 1)``,
    or ``-2**(bits-1)`` when the format is not symmetric.
    """
    if isinstance(fmt, IntFormat):
        kmax = (1 << (fmt.bits - 1)) - 1
        kneg = kmax + (0 if fmt.symmetric else 1)
        return kmax, (-kneg) & (fmt.n_codes - 1)
    return fmt.max_code, (1 << (fmt.bits - 1)) | fmt.max_code


def _codes_from_index(
    fmt: ElementFormat, k: npt.NDArray[np.int64], neg: npt.NDArray[np.bool_]
) -> npt.NDArray[np.uint8]:
    """Signed codes from magnitude indices that are already in range."""
    if isinstance(fmt, IntFormat):
        return (np.where(neg, -k, k) & (fmt.n_codes - 1)).astype(np.uint8)
    sign = np.where(neg & (k != 0), 1 << (fmt.bits - 1), 0)
    return (sign | k).astype(np.uint8)


def _max_index(fmt: ElementFormat, neg: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Largest magnitude index allowed for each sign."""
    if isinstance(fmt, IntFormat):
        kpos = (1 << (fmt.bits - 1)) - 1
        kneg = kpos + (0 if fmt.symmetric else 1)
        return np.where(neg, kneg, kpos)
    return np.full(neg.shape, fmt.max_code, dtype=np.int64)


def _has_nonsat_code(fmt: ElementFormat) -> bool:
    return isinstance(fmt, FPFormat) and fmt.nan != "none"


def _overflow_error(fmt: ElementFormat) -> ValueError:
    return ValueError(
        f"a value overflows element format {fmt.name!r} (max {fmt.max_value:g}), which has no "
        "Inf or NaN code; pass saturate=True to clamp to ±max"
    )


def _nan_error(fmt: ElementFormat) -> ValueError:
    return ValueError(f"NaN input, but element format {fmt.name!r} has no NaN code")


def _kernel_params(fmt: ElementFormat) -> tuple:
    """An element format as the numba kernels take it.

    Returns:
        ``(vtop, n, is_int, bits, kpos, kneg, emin, mbits)``: the virtual grid value above the
        maximum, the grid size (index ``n - 1`` means overflow), integer format or not, code
        width, largest positive and negative magnitude index, and for minifloats the smallest
        normal exponent and the mantissa width (0 and 0 for integers).
    """
    grid = _elem_grid(fmt)
    is_int = isinstance(fmt, IntFormat)
    if isinstance(fmt, IntFormat):
        kpos = (1 << (fmt.bits - 1)) - 1
        kneg = kpos + (0 if fmt.symmetric else 1)
        emin = mbits = 0
    else:
        kpos = kneg = fmt.max_code
        emin, mbits = 1 - fmt.bias, fmt.mbits
    return float(grid.values[-1]), grid.values.size, is_int, fmt.bits, kpos, kneg, emin, mbits


_ENCODE_BACKENDS = ("numpy", "numba")


def _encode_numba(
    xa: npt.NDArray[np.float64],
    s: npt.NDArray[np.float64],
    fmt: ElementFormat,
    rounding: str,
    saturate: bool,
) -> npt.NDArray[np.uint8]:
    """:func:`encode` on validated input through the numba kernel (imported on first use)."""
    from ..fast import formats as fast

    shape = np.broadcast_shapes(xa.shape, s.shape)
    xf = np.ascontiguousarray(np.broadcast_to(xa, shape)).ravel()
    sf = np.ascontiguousarray(s).ravel() if s.size == 1 else (
        np.ascontiguousarray(np.broadcast_to(s, shape)).ravel())  # fmt: skip
    ovf = -1  # the kernel's "no such code"
    if isinstance(fmt, FPFormat) and fmt.nan != "none":
        special = inf_code(fmt) if fmt.inf else nan_code(fmt)
        ovf = -1 if special is None else special
    nan_pos, nan_neg = nan_code(fmt), nan_code(fmt, negative=True)
    vtop, n, is_int, bits, kpos, kneg, emin, mbits = _kernel_params(fmt)
    codes, status = fast.encode_kernel(
        xf, sf, vtop, n, fast.MODE_CODES[rounding], is_int, bits, kpos, kneg, emin, mbits,
        bool(saturate), ovf, -1 if nan_pos is None else nan_pos,
        -1 if nan_neg is None else nan_neg,
    )  # fmt: skip
    if status & fast.STATUS_NAN:
        raise _nan_error(fmt)
    if status & fast.STATUS_OVERFLOW:
        raise _overflow_error(fmt)
    return codes.reshape(shape)


def encode(
    x: npt.ArrayLike,
    fmt: ElementFormat | str,
    *,
    rounding: str = "rne",
    scale: npt.ArrayLike = 1.0,
    saturate: bool = True,
    backend: str = "numpy",
) -> npt.NDArray[np.uint8]:
    """Round the exact real numbers ``x / scale`` into an element format.

    Args:
        x: real values, any shape (float or integer dtype; converted to float64).
        fmt: element format or its name.
        rounding: ``"rne"`` (ties to the even code), ``"half_away"`` (ties away from zero) or
            ``"half_up"`` (ties toward +inf).
        scale: float64 > 0, broadcastable to ``x``. It must lie in ``[2**-960, 2**960]`` and have
            few enough significant bits that ``midpoint * scale`` is exact (at most 53 minus the
            widest midpoint of the format: 50 for E2M1, 45 for INT8).
        saturate: True clamps magnitudes above the maximum to ±max (and ±Inf to ±max). False
            gives ±Inf (E5M2) or NaN (E4M3) for values that round past the maximum, and raises
            for formats with neither.
        backend: ``"numpy"`` (the reference) or ``"numba"`` (the fast path; identical codes and
            errors).

    Returns:
        uint8 codes, the broadcast shape of ``x`` and ``scale``. A result of magnitude zero is
        always code 0 (+0). NaN input gives the format's NaN code (:func:`nan_code`).

    Raises:
        ValueError: bad rounding name, scale or backend, NaN input for a format without NaN, or
            overflow with ``saturate=False`` for a format without Inf/NaN.
    """
    if isinstance(fmt, str):
        fmt = element_format(fmt)
    _check_rounding(rounding, ELEMENT_ROUNDING_MODES)
    if backend not in _ENCODE_BACKENDS:
        raise ValueError(f"backend={backend!r}; valid choices: {', '.join(_ENCODE_BACKENDS)}")
    xa = _as_float_input(x)
    grid = _elem_grid(fmt)
    s = _check_scale(scale, 53 - grid.cmp_bits, "scale")
    if backend == "numba":
        return _encode_numba(xa, s, fmt, rounding, saturate)
    xa, s = np.broadcast_arrays(xa, s)
    return _encode_checked(xa, s, fmt, rounding, saturate)


def _encode_checked(
    xa: npt.NDArray[np.float64],
    s: npt.NDArray[np.float64] | float,
    fmt: ElementFormat,
    rounding: str,
    saturate: bool,
) -> npt.NDArray[np.uint8]:
    """:func:`encode` after validation (the block formats call this directly)."""
    nan = np.isnan(xa)
    nan_codes = None  # (positive, negative) NaN code, where the input has a NaN
    if nan.any():
        pos_nan, neg_nan = nan_code(fmt), nan_code(fmt, negative=True)
        if pos_nan is None or neg_nan is None:
            raise _nan_error(fmt)
        nan_codes = pos_nan, neg_nan
    neg = np.signbit(xa)
    a = np.abs(xa)
    inf = np.isinf(a)
    a = np.where(nan | inf, 0.0, a)
    k = _round_grid(a, s, _elem_grid(fmt), rounding, neg)
    kmax = _max_index(fmt, neg)
    k = np.where(inf, kmax + 1, k)  # ±Inf input overflows like a huge finite value
    over = k > kmax
    codes = _codes_from_index(fmt, np.minimum(k, kmax), neg)
    if over.any() and not saturate:
        if not _has_nonsat_code(fmt):
            raise _overflow_error(fmt)
        special = inf_code(fmt) if isinstance(fmt, FPFormat) and fmt.inf else nan_code(fmt)
        sign = (1 << (fmt.bits - 1)) * neg
        codes = np.where(over, (special | sign).astype(np.uint8), codes).astype(np.uint8)
    if nan_codes is not None:
        pos_nan, neg_nan = nan_codes
        codes = np.where(nan, np.where(neg, neg_nan, pos_nan), codes).astype(np.uint8)
    return codes


__all__ = [
    "ELEMENT_FORMATS",
    "ELEMENT_ROUNDING_MODES",
    "E2M1",
    "E2M2",
    "E2M3",
    "E3M2",
    "E4M3",
    "E5M2",
    "INT4",
    "INT8",
    "ElementFormat",
    "FPFormat",
    "IntFormat",
    "decode",
    "element_format",
    "encode",
    "inf_code",
    "nan_code",
    "saturation_codes",
]
