"""Bytes of elements stored at a fractional number of bits each (block-quantized tensors).

Public: :func:`storage_bytes`, the one byte count every reference and simulator uses.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ._records import _MAX_I8, TraceError

__all__ = ["storage_bytes"]


def storage_bytes(elems: Any, bits_per_element: Fraction | int) -> Any:
    """Bytes that ``elems`` elements take at a fractional number of bits each, rounded up.

    ``ceil(elems * bits_per_element / 8)`` in exact integer arithmetic (no float rounding):
    the byte count of a block-quantized tensor or tile whose side information (scales,
    selector bits) makes the bits per element a fraction, e.g. ``Fraction(33, 8)``.

    Args:
        elems: element count: a Python or numpy integer, or an integer array of any shape.
        bits_per_element: exact bits per element (``Fraction`` or int), > 0.

    Returns:
        Bytes: a Python int for a scalar count, else an int64 array of ``elems``'s shape.

    Raises:
        TraceError: a non-positive or non-rational bit count, negative or non-integer
            counts, or a product that overflows int64.
    """
    if isinstance(bits_per_element, bool) or not isinstance(bits_per_element, (int, Fraction)):
        raise TraceError(f"bits_per_element must be an int or Fraction, got {bits_per_element!r}")
    num = bits_per_element.numerator
    den = 8 * bits_per_element.denominator
    if num <= 0:
        raise TraceError(f"bits_per_element must be positive, got {bits_per_element}")
    if isinstance(elems, int) and not isinstance(elems, bool):
        if elems < 0:
            raise TraceError(f"elems must be >= 0, got {elems}")
        return -(-elems * num // den)
    arr = np.asarray(elems)
    if arr.dtype.kind not in "iu":
        raise TraceError(f"elems must be integers, got {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        if arr.min() < 0:
            raise TraceError(f"elems must be >= 0, got {int(arr.min())}")
        if int(arr.max()) * num + den > _MAX_I8:
            raise TraceError(f"elems * bits overflows int64 (up to {int(arr.max())} elements)")
    out = (arr * num + (den - 1)) // den
    return int(out) if out.ndim == 0 else out
