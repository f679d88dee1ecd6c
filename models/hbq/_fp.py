"""IEEE-754 binary16 / binary32 helpers with the HBQ datapath's rounding policy ([OURS]: one
exact rounding, RNE; the RTL-compatible FX2FP of [R-ACC] ``FX2FP_Scale_NV`` is an option).

Every function works on **bit patterns** (``uint16`` for binary16, ``uint32`` for binary32) and is
vectorized over any shape. The policy, shared by the L1 conversion, the FP16 adder and the
partial-sum dequantizers:

* one rounding, round-to-nearest-even (RNE), of the exact real result to the format's precision
  (11 significant bits for binary16, 24 for binary32) with an unbounded exponent range;
* **saturation**: a rounded result above the largest finite value becomes ±max (``0x7BFF`` /
  ``0xFBFF`` for binary16, ±FLT_MAX for binary32), never ±Inf;
* **flush to zero after rounding**: a rounded result whose magnitude is below the smallest normal
  (2^-14, resp. 2^-126) becomes +0. A value that *rounds up* to the smallest normal counts as
  normal and is kept (the hardware normalizes and rounds first, then tests the exponent);
* an exact zero result is +0 (the only -0 result is the IEEE case ``(-0) + (-0)`` of the adder).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "FP16_MAX_BITS",
    "FP16_MIN_NORMAL",
    "FP16_NAN_BITS",
    "FP32_MAX_BITS",
    "fp16_add",
    "fp16_bits",
    "fp16_round",
    "fp16_value",
    "fp32_round",
    "fp32_value",
    "round_scaled",
]

FP16_MAX_BITS = 0x7BFF
"""Bit pattern of +65504, the largest finite binary16 value (the saturation value)."""
FP16_NAN_BITS = 0x7E00
"""The canonical quiet NaN that :func:`fp16_add` returns for NaN results."""
FP16_MIN_NORMAL = 2.0**-14
"""Smallest normal binary16 magnitude; anything smaller is flushed to +0."""
FP32_MAX_BITS = 0x7F7FFFFF
"""Bit pattern of +FLT_MAX (the binary32 saturation value)."""

# (significant bits p, exponent bias, largest biased exponent, total bits, output dtype)
_FORMATS = {
    "fp16": (11, 15, 30, 16, np.uint16),
    "fp32": (24, 127, 254, 32, np.uint32),
}
_INT_LIMIT = 1 << 53


def _format(fmt: str) -> tuple[int, int, int, int, type]:
    if fmt not in _FORMATS:
        raise ValueError(f"fmt={fmt!r}; valid choices: {', '.join(_FORMATS)}")
    return _FORMATS[fmt]


def bit_length(a: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Number of significant bits of non-negative integers below 2^53 (0 for 0), int64.

    ``frexp`` of the (exact) float64 conversion returns exactly the bit length.
    """
    return np.frexp(a.astype(np.float64))[1].astype(np.int64)


def round_scaled(
    n: npt.ArrayLike, exp2: npt.ArrayLike, *, fmt: str = "fp16"
) -> npt.NDArray[np.unsignedinteger]:
    """Round the exact value ``n * 2**exp2`` once to binary16/binary32 (RNE, saturate, FTZ).

    This is the single rounding of the exact-mode L1 conversion and of the FP16 adder.

    Algorithm (integers only): with ``p`` the format's significant bits and ``L`` the bit length of
    ``|n|``, keep ``q = |n| >> (L - p)`` and round to nearest, ties to even, on the dropped bits
    (or shift left when ``L < p``); a carry out of ``p`` bits renormalizes. The biased exponent is
    ``exp2 + (L - p) + (p - 1) + bias``; above the largest finite exponent the result saturates to
    ±max, below 1 it is flushed to +0. ``n == 0`` gives +0.

    Args:
        n: signed integers, ``|n| < 2**53`` (any integer dtype; broadcast with ``exp2``).
        exp2: integer power-of-two exponents (units of ``n`` are ``2**exp2``).
        fmt: ``"fp16"`` (binary16) or ``"fp32"`` (binary32).

    Returns:
        Bit patterns, ``uint16`` (fp16) or ``uint32`` (fp32), of the broadcast shape.

    Raises:
        ValueError: an ``|n|`` of 2^53 or more, or an unknown ``fmt``.
    """
    p, bias, emax, total, dtype = _format(fmt)
    n64, e64 = np.broadcast_arrays(np.asarray(n, dtype=np.int64), np.asarray(exp2, dtype=np.int64))
    a = np.abs(n64)
    if a.size and int(a.max()) >= _INT_LIMIT:
        raise ValueError("round_scaled needs |n| < 2**53 (exactly representable in float64)")
    shift = bit_length(a) - p
    s = np.clip(shift, 0, 62)
    q = a >> s
    rem = a & ((np.int64(1) << s) - 1)
    half = (np.int64(1) << s) >> 1
    up = (s > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    q = np.where(shift < 0, a << np.clip(-shift, 0, 62), q + up)
    carry = q >> p  # 1 when rounding carried out of the p-bit significand
    q = q >> carry
    biased = e64 + shift + carry + (p - 1) + bias
    sign = (n64 < 0).astype(np.int64) << (total - 1)
    mant = q - (np.int64(1) << (p - 1))
    bits = sign | (biased << (p - 1)) | mant
    max_bits = (np.int64(emax) << (p - 1)) | ((np.int64(1) << (p - 1)) - 1)
    bits = np.where(biased > emax, sign | max_bits, bits)
    bits = np.where((biased < 1) | (a == 0), 0, bits)
    return bits.astype(dtype)


def _decompose_float64(x: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Exact ``x = n * 2**e`` with integer ``|n| < 2**53`` for finite float64 ``x``."""
    xf = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(xf)):
        raise ValueError("rounding needs finite inputs (the datapath never produces Inf or NaN)")
    m, e = np.frexp(xf)
    return (m * 2.0**53).astype(np.int64), e.astype(np.int64) - 53


def fp16_round(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Round finite float64 values (taken as exact reals) once to binary16 with the HBQ policy.

    Args:
        x: finite values, any shape (converted to float64 exactly; float16/32/64 inputs).

    Returns:
        uint16 bit patterns: RNE, saturation to ±65504, flush to +0 below 2^-14.

    Raises:
        ValueError: a NaN or infinite input.
    """
    n, e = _decompose_float64(x)
    return round_scaled(n, e, fmt="fp16")


def fp32_round(x: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """Round finite float64 values once to binary32 with the HBQ policy.

    Args:
        x: finite values, any shape.

    Returns:
        uint32 bit patterns: RNE, saturation to ±FLT_MAX, flush to +0 below 2^-126.

    Raises:
        ValueError: a NaN or infinite input.
    """
    n, e = _decompose_float64(x)
    return round_scaled(n, e, fmt="fp32")


def fp16_bits(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Normalize binary16 operands to ``uint16`` bit patterns.

    Args:
        x: a float16 array (reinterpreted, not converted) or integers in ``0 .. 0xFFFF``.

    Returns:
        uint16 array of the same shape.

    Raises:
        TypeError: any other dtype. ValueError: integers outside 16 bits.
    """
    a = np.asarray(x)
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype.kind not in "iu":
        raise TypeError(f"expected float16 values or uint16 bit patterns, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFF):
        raise ValueError("binary16 bit patterns must lie in 0 .. 0xFFFF")
    return a.astype(np.uint16)


def fp16_value(bits: npt.ArrayLike) -> npt.NDArray[np.float16]:
    """The float16 values of binary16 bit patterns (a reinterpretation, exact)."""
    return fp16_bits(bits).view(np.float16)


def fp32_value(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The float32 values of binary32 bit patterns (a reinterpretation, exact).

    Args:
        bits: integers in ``0 .. 0xFFFFFFFF``.

    Returns:
        float32 array of the same shape.
    """
    a = np.asarray(bits)
    if a.dtype.kind not in "iu":
        raise TypeError(f"expected uint32 bit patterns, got dtype {a.dtype}")
    return a.astype(np.uint32).view(np.float32)


def fp16_add(a_bits: npt.ArrayLike, b_bits: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """IEEE-754 binary16 addition with the HBQ accumulator policy ([OURS], docs/hbq_datapath.md).

    * Subnormal inputs are read as zero of the same sign (denormals-are-zero).
    * The exact sum is rounded once, RNE; a rounded result above 65504 saturates to ±65504 and one
      below 2^-14 is flushed to +0 (see the module docstring).
    * An exact zero sum is +0, except ``(-0) + (-0) = -0`` (IEEE RNE rule).
    * Inf and NaN inputs follow IEEE (Inf + x = Inf, Inf + (-Inf) = NaN, NaN in gives NaN); NaN
      results are the canonical ``0x7E00``. The HBQ datapath never produces Inf or NaN.

    Exact sum: both significands (hidden bit included) are aligned to the smaller exponent, at most
    29 positions apart, so the sum is an integer below 2^41 in units of ``2**(e_min - 25)``; it is
    then rounded by :func:`round_scaled`.

    Args:
        a_bits: binary16 operands (uint16 bit patterns or float16 values), any shape.
        b_bits: binary16 operands, broadcast against ``a_bits``.

    Returns:
        uint16 bit patterns of the sums, broadcast shape.
    """
    a, b = np.broadcast_arrays(
        fp16_bits(a_bits).astype(np.int64), fp16_bits(b_bits).astype(np.int64)
    )
    sa, ea, ma = a >> 15, (a >> 10) & 31, a & 1023
    sb, eb, mb = b >> 15, (b >> 10) & 31, b & 1023
    fin_a, fin_b = ea < 31, eb < 31
    # Finite operands: exponent-0 codes (zero, subnormal) contribute 0; their exponent is
    # clamped to 1 so that the alignment shift stays small.
    siga = np.where(fin_a & (ea > 0), ma | 1024, 0)
    sigb = np.where(fin_b & (eb > 0), mb | 1024, 0)
    ea1 = np.clip(ea, 1, 30)
    eb1 = np.clip(eb, 1, 30)
    emin = np.minimum(ea1, eb1)
    va = siga << (ea1 - emin)
    vb = sigb << (eb1 - emin)
    total = np.where(sa == 1, -va, va) + np.where(sb == 1, -vb, vb)
    out = round_scaled(total, emin - 25, fmt="fp16").astype(np.int64)
    both_neg_zero = (siga == 0) & (sigb == 0) & (sa == 1) & (sb == 1)
    out = np.where(both_neg_zero, 0x8000, out)
    # IEEE specials.
    nan_a = ~fin_a & (ma != 0)
    nan_b = ~fin_b & (mb != 0)
    inf_a = ~fin_a & (ma == 0)
    inf_b = ~fin_b & (mb == 0)
    out = np.where(inf_a, a, out)
    out = np.where(inf_b, b, out)
    nan = nan_a | nan_b | (inf_a & inf_b & (sa != sb))
    out = np.where(nan, FP16_NAN_BITS, out)
    return out.astype(np.uint16)
