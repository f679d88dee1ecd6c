"""bfloat16 storage emulated exactly in numpy.

A bf16 value is the upper half of a binary32 pattern (1 sign, 8 exponent, 7 fraction bits), so
every bf16 value is exactly a float32. The reference keeps bf16 tensors as their ``uint16``
bit patterns (their storage) and computes on the float32 values they stand for.

* :func:`f32_to_bf16_bits` — binary32 -> bf16 bits, round to nearest, ties to even (the IEEE
  default and what ``__float2bfloat16_rn`` does); overflow rounds to infinity, NaN stays NaN;
* :func:`bf16_bits_to_f32` — bf16 bits -> the float32 they stand for (exact);
* :func:`round_bf16` — float32 -> float32 holding the bf16-rounded value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["bf16_bits_to_f32", "f32_to_bf16_bits", "round_bf16"]


def f32_to_bf16_bits(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Round binary32 values to bfloat16, to nearest with ties to even.

    Args:
        x: values of any shape; converted to float32 first (float64 input is rounded to
            float32 before the bf16 rounding, so pass float32 for a single rounding).

    Returns:
        uint16 bf16 bit patterns, same shape. Finite values beyond the bf16 range round to
        +-inf by the RNE rule; NaN gives a quiet NaN of the same sign.
    """
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    # Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the
    # dropped half is above the halfway point, or at it with an odd kept half.
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    out = np.where(nan, (bits >> 16) | 0x0040, rounded)
    return out.astype(np.uint16)


def bf16_bits_to_f32(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The float32 values of bf16 bit patterns (exact: a bf16 is a truncated binary32).

    Args:
        bits: uint16 bf16 patterns of any shape.

    Returns:
        float32 values, same shape.
    """
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_bf16(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Round float32 values to bf16 (RNE) and return them as float32 (same shape)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))
