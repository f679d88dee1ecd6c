"""Exact ``Fraction`` oracles for binary floating-point rounding, shared by the datapath tests.

Written independently of ``coaccel.models.hbq._fp`` (no numpy, no bit tricks): the nearest
representable value is found with exact rational arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

HALF = Fraction(1, 2)


def floor_log2(a: Fraction) -> int:
    """``floor(log2(a))`` of a positive rational, exactly."""
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def oracle_round(v: Fraction, p: int, bias: int, emax: int) -> int:
    """Bits of ``v`` rounded RNE to ``p`` significant bits; saturate; flush below min normal.

    This is the HBQ datapath's policy (specs/hbq.md §2.1 exact mode): overflow saturates to the
    largest finite value, results below the smallest normal flush to +0, zero gives +0.
    ``p = 11, bias = 15, emax = 30`` is binary16; ``p = 24, bias = 127, emax = 254`` binary32.
    """
    if v == 0:
        return 0
    total = 16 if p == 11 else 32
    sign = int(v < 0) << (total - 1)
    a = abs(v)
    e = floor_log2(a)
    scaled = a / Fraction(2) ** (e - p + 1)
    q = math.floor(scaled)
    if scaled - q > HALF or (scaled - q == HALF and q % 2):
        q += 1
    if q == 2**p:
        q, e = 2 ** (p - 1), e + 1
    if e + bias > emax:
        return sign | (emax << (p - 1)) | (2 ** (p - 1) - 1)
    if e + bias < 1:
        return 0
    return sign | ((e + bias) << (p - 1)) | (q - 2 ** (p - 1))
