"""Fixed-point building blocks of the DeltaLLM attention datapath ([DELTALLM], formats [OURS]).

Public:

* :data:`EXP2_LUT_Q15` — the 256-entry table of ``2^(-f/256)`` in UQ1.15;
* :func:`exp2_neg_q15` — the exp2 unit: ``p = 2^(-E/256)`` in UQ1.15 for an unsigned log2-domain
  exponent ``E`` with 8 fractional bits;
* :func:`log2_scale` — the per-head softmax scale ``c`` as a 24-bit mantissa and a right shift;
* :func:`quantize_int8` — symmetric per-head INT8 quantizer (round half up, clamp to ±127).

Internal: :func:`_round_half_up` (scalar parameters only; the datapath itself never rounds floats).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = [
    "EXP2_FRAC_BITS",
    "EXP2_LUT_Q15",
    "EXP_MAX_Q8",
    "P_FRAC_BITS",
    "exp2_neg_q15",
    "log2_scale",
    "quantize_int8",
]

#: Fractional bits of the log2-domain exponent ``E`` (``F_e``).
EXP2_FRAC_BITS = 8
#: Fractional bits of a probability ``p`` and of the rescale factor ``alpha`` (UQ1.15).
P_FRAC_BITS = 15
#: Saturation value of the exponent: 16 integer log2 units minus one LSB (``16*256 - 1``).
EXP_MAX_Q8 = 16 * 256 - 1


def _round_half_up(x: float) -> int:
    """Round a scalar to the nearest integer, ties toward +inf (``floor(x + 0.5)``)."""
    return math.floor(x + 0.5)


#: ``LUT[f] = round_half_up(32768 * 2^(-f/256))`` for ``f = 0..255``; dtype int64, UQ1.15 values
#: (``LUT[0] = 32768``, ``LUT[128] = 23170``, ``LUT[255] = 16428``).
EXP2_LUT_Q15: npt.NDArray[np.int64] = np.array(
    [_round_half_up(32768.0 * 2.0 ** (-f / 256.0)) for f in range(256)], dtype=np.int64
)
EXP2_LUT_Q15.setflags(write=False)


def exp2_neg_q15(exponent_q8: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The exp2 unit: ``p = 2^(-E/256)`` as UQ1.15 integers.

    ``n = E >> 8`` and ``f = E & 255``; ``p = LUT[f] >> n``, and ``p = 0`` when ``n >= 16``. The
    shift truncates (floor), so ``p`` never exceeds the exact value by more than the LUT's half-LSB.

    Args:
        exponent_q8: unsigned exponent ``E`` in log2 units with 8 fractional bits, any shape,
            integer dtype, every element ``>= 0``.

    Returns:
        ``p`` with the shape of ``exponent_q8``, int64, in ``[0, 32768]``.

    Raises:
        TypeError: ``exponent_q8`` is not an integer array.
        ValueError: an exponent is negative.
    """
    e = np.asarray(exponent_q8)
    if not np.issubdtype(e.dtype, np.integer):
        raise TypeError(f"exp2_neg_q15: exponent must be an integer array, got dtype {e.dtype}")
    e = e.astype(np.int64)
    if e.size and int(e.min()) < 0:
        raise ValueError(f"exp2_neg_q15: exponent must be >= 0, got minimum {int(e.min())}")
    n = e >> EXP2_FRAC_BITS
    f = e & 255
    return np.where(n >= 16, 0, EXP2_LUT_Q15[f] >> np.minimum(n, 16)).astype(np.int64)


def log2_scale(c: float) -> tuple[int, int]:
    """Encode the log2-domain softmax scale ``c`` as a mantissa and a shift.

    ``c = s_q * s_k * log2(e) / sqrt(d)`` converts an integer score difference into log2 units.
    The datapath multiplies by ``C = round_half_up(c * 2^(sh + 8))`` with ``C`` in
    ``[2^23, 2^24)`` and shifts right by ``sh``, leaving 8 fractional bits.

    Args:
        c: positive finite scale, log2 units per integer score LSB; below ``2^16``.

    Returns:
        ``(C, sh)``: 24-bit mantissa and right shift, both non-negative ints.

    Raises:
        ValueError: ``c`` is not positive and finite, or so large that ``sh`` would be negative.
    """
    if not (math.isfinite(c) and c > 0.0):
        raise ValueError(f"log2_scale: scale c must be positive and finite, got {c!r}")
    sh = 15 - math.floor(math.log2(c))
    mant = _round_half_up(c * 2.0 ** (sh + 8))
    while mant >= 1 << 24:  # log2 rounding at a power of two, or the mantissa rounded up
        sh -= 1
        mant = _round_half_up(c * 2.0 ** (sh + 8))
    while mant < 1 << 23:
        sh += 1
        mant = _round_half_up(c * 2.0 ** (sh + 8))
    if sh < 0:
        raise ValueError(f"log2_scale: scale c={c!r} is too large (needs c < 2^16)")
    return mant, sh


def quantize_int8(x: npt.ArrayLike) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """Symmetric INT8 quantization per head: ``q = clamp(floor(x / s + 0.5), -127, 127)``.

    The scale is ``s = absmax / 127`` over each head (all tokens and channels); an all-zero head
    gets ``s = 1``. This is the software quantizer that feeds :func:`~._attention.attention` in
    fixed mode.

    Args:
        x: float array ``[H, T, d]``, finite.

    Returns:
        ``(q, s)``: ``q`` int8 ``[H, T, d]`` and per-head scales float64 ``[H]``.

    Raises:
        ValueError: ``x`` is not 3-D or holds NaN/Inf.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 3:
        raise ValueError(f"quantize_int8: expected shape [H, T, d], got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("quantize_int8: input holds NaN or Inf")
    absmax = np.abs(a).max(axis=(1, 2)) if a.size else np.zeros(a.shape[0])
    scale = np.where(absmax > 0, absmax / 127.0, 1.0)
    q = np.clip(np.floor(a / scale[:, None, None] + 0.5), -127, 127).astype(np.int8)
    return q, scale
