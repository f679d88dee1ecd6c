"""binary16/binary32 rounding and the FP16 adder of the HBQ datapath (specs/hbq.md §2.2, §6 item 7).

Oracles, all independent of the code under test:

* ``oracle_fp16``: nearest binary16 of an exact ``Fraction`` by bisection in the enumerated list
  of all positive normal binary16 values, ties to the even mantissa, then the policy (saturate at
  65504, flush to +0 below 2^-14 after rounding with an unbounded exponent).
* ``oracle_round``: the same rounding computed with ``Fraction`` arithmetic for any precision
  (used for binary32).
* numpy's float16 addition, which is IEEE RNE (computed in float32 and rounded once more:
  innocuous, since 24 >= 2·11 + 2), with subnormals and Inf. It is a valid oracle for our adder
  once the inputs are flushed (DAZ) by the test and the result post-processed: for operands that
  are normal or zero, a nonzero exact sum below 2^-14 is a multiple of 2^-24, hence exact as an
  IEEE subnormal, and our flush maps it to +0; in the normal range IEEE rounding is our rounding;
  an IEEE overflow to ±Inf is our ±65504.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from fractions import Fraction

import numpy as np
import pytest

from coaccel.models.hbq import (
    FP16_MAX_BITS,
    fp16_add,
    fp16_round,
    fp16_value,
    fp32_round,
    fp32_value,
    round_scaled,
)

# All positive normal binary16 values in increasing order: index i has bits 0x0400 + i.
NORMALS16 = [
    Fraction(1024 + m, 1024) * Fraction(2) ** (e - 15) for e in range(1, 31) for m in range(1024)
]
MIN16 = Fraction(1, 2**14)


def oracle_fp16(v: Fraction) -> int:
    """Bits of the binary16 nearest to ``v`` under the HBQ policy (see the module docstring)."""
    if v == 0:
        return 0
    sign = 0x8000 if v < 0 else 0
    a = abs(v)
    if a >= 65504:
        return sign | 0x7BFF
    if a < MIN16:
        # Unbounded-exponent neighbours of the result: 2^-14 - 2^-25 (odd) and 2^-14 (even); the
        # midpoint 2^-14 - 2^-26 ties to 2^-14, which is normal and kept.
        return sign | 0x0400 if a >= MIN16 - Fraction(1, 2**26) else 0
    i = bisect_left(NORMALS16, a)
    if NORMALS16[i] != a:
        lo, hi = NORMALS16[i - 1], NORMALS16[i]
        if a - lo < hi - a or (a - lo == hi - a and (i - 1) % 2 == 0):
            i -= 1
    return sign | (0x0400 + i)


def oracle_round(v: Fraction, p: int, bias: int, emax: int) -> tuple[int, int, int]:
    """``(sign, biased exponent, mantissa)`` of ``v`` rounded RNE to ``p`` bits, HBQ policy."""
    if v == 0:
        return 0, 0, 0
    sign = int(v < 0)
    a = abs(v)
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    scaled = a / Fraction(2) ** (e - p + 1)  # in [2^(p-1), 2^p)
    q = math.floor(scaled)
    frac = scaled - q
    if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and q % 2 == 1):
        q += 1
    if q == 2**p:
        q, e = 2 ** (p - 1), e + 1
    biased = e + bias
    if biased > emax:
        return sign, emax, 2 ** (p - 1) - 1
    if biased < 1:
        return 0, 0, 0
    return sign, biased, q - 2 ** (p - 1)


def fp16_fraction(bits: int) -> Fraction:
    """Exact value of a finite binary16 pattern, decoded from the IEEE definition."""
    s, e, m = bits >> 15, (bits >> 10) & 31, bits & 1023
    mag = (
        Fraction(m, 1024) * Fraction(2) ** -14
        if e == 0
        else (Fraction(1024 + m, 1024) * Fraction(2) ** (e - 15))
    )
    return -mag if s else mag


def daz(bits: np.ndarray) -> np.ndarray:
    """Replace subnormal binary16 patterns by the zero of the same sign."""
    bits = bits.astype(np.uint16)
    sub = ((bits >> 10) & 31) == 0
    return np.where(sub, bits & 0x8000, bits).astype(np.uint16)


def numpy_oracle_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy float16 addition of the flushed operands, post-processed to the HBQ policy."""
    a, b = daz(a), daz(b)
    with np.errstate(over="ignore", invalid="ignore"):
        r = (a.view(np.float16) + b.view(np.float16)).view(np.uint16)
    exp = (r >> 10) & 31
    inf_in = (((a >> 10) & 31) == 31) | (((b >> 10) & 31) == 31)
    r = np.where((exp == 31) & ((r & 1023) != 0), 0x7E00, r)  # canonical NaN
    r = np.where((exp == 31) & ((r & 1023) == 0) & ~inf_in, (r & 0x8000) | FP16_MAX_BITS, r)
    r = np.where((exp == 0) & ((r & 1023) != 0), 0, r)  # subnormal results flush to +0
    return r.astype(np.uint16)


def structured_b16() -> np.ndarray:
    """Every exponent (incl. 0 and 31) × edge mantissas × both signs."""
    mants = [0, 1, 2, 3, 511, 512, 513, 1021, 1022, 1023]
    pos = [(e << 10) | m for e in range(32) for m in mants]
    return np.array(pos + [p | 0x8000 for p in pos], dtype=np.uint16)


ALL16 = np.arange(1 << 16, dtype=np.uint16)


# ---------------------------------------------------------------- rounding helpers


def test_fp16_round_all_code_points():
    """Every binary16 pattern: normals round-trip, subnormals and -0 flush to +0, Inf/NaN raise."""
    finite = ALL16[((ALL16 >> 10) & 31) != 31]
    got = fp16_round(finite.view(np.float16).astype(np.float64))
    normal = ((finite >> 10) & 31) != 0
    assert np.array_equal(got[normal], finite[normal])
    assert np.array_equal(got[~normal], np.zeros((~normal).sum(), dtype=np.uint16))
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="finite"):
            fp16_round(np.array([1.0, bad]))


def test_fp16_round_matches_fraction_oracle_random_and_ties():
    rng = np.random.default_rng(1)
    mags = 2.0 ** rng.uniform(-27, 17, 3000)
    x = np.concatenate([mags, -mags[:500]])
    # Exact midpoints between neighbouring binary16 values (and their float64 neighbours),
    # including the underflow and overflow boundaries.
    lo = NORMALS16[::97] + [Fraction(65504)]
    mids = [
        float(v + Fraction(1, 2**11) * Fraction(2) ** (math.floor(math.log2(v)) - 0))
        for v in lo[:-1]
    ]
    special = [
        2.0**-14 - 2.0**-26,
        2.0**-14 - 2.0**-26 - 2.0**-60,
        2.0**-14 - 2.0**-25,
        65504.0,
        65519.99,
        65520.0,
        65536.0,
        1e300,
        2.0**-40,
        0.0,
        -0.0,
        1 + 2.0**-11,
        1 + 3 * 2.0**-11,
    ]
    x = np.concatenate([x, mids, np.nextafter(mids, 0), np.nextafter(mids, 1e9), special])
    got = fp16_round(x)
    want = np.array([oracle_fp16(Fraction(float(v))) for v in x], dtype=np.uint16)
    assert np.array_equal(got, want)


def test_fp16_round_hand_cases():
    cases = {
        1.0: 0x3C00,
        -2.0: 0xC000,
        65504.0: 0x7BFF,
        65520.0: 0x7BFF,
        -1e9: 0xFBFF,
        2.0**-14: 0x0400,
        2.0**-15: 0x0000,
        1 + 2.0**-11: 0x3C00,
        1 + 3 * 2.0**-11: 0x3C02,
        2.0**-14 - 2.0**-26: 0x0400,
        2.0**-14 - 2.0**-25: 0x0000,
        -0.0: 0x0000,
    }
    got = fp16_round(np.array(list(cases)))
    assert [int(g) for g in got] == list(cases.values())


def test_fp32_round_matches_oracles():
    rng = np.random.default_rng(2)
    x = np.concatenate(
        [
            rng.standard_normal(2000) * 2.0 ** rng.integers(-140, 130, 2000),
            [
                2.0**-126,
                2.0**-126 * (1 - 2.0**-25),
                2.0**-126 * (1 - 2.0**-24),
                2.0**-130,
                3.4028234663852886e38,
                3.5e38,
                -1e300,
                1 + 2.0**-24,
                1 + 3 * 2.0**-24,
                0.0,
            ],
        ]
    )
    got = fp32_round(x)
    want = []
    for v in x:
        s, e, m = oracle_round(Fraction(float(v)), 24, 127, 254)
        want.append((s << 31) | (e << 23) | m)
    assert np.array_equal(got, np.array(want, dtype=np.uint32))
    # numpy's float64 -> float32 cast is RNE; it is a second oracle in the normal range.
    normal = (np.abs(x) >= 2.0**-126) & (np.abs(x) < 3.4e38)
    assert np.array_equal(got[normal], x[normal].astype(np.float32).view(np.uint32))
    assert np.array_equal(fp32_value(got), got.view(np.float32))


def test_round_scaled_matches_oracle_and_rejects_wide_integers():
    rng = np.random.default_rng(3)
    n = rng.integers(-(2**40), 2**40, 3000) >> rng.integers(0, 40, 3000)
    e = rng.integers(-70, 30, 3000)
    for fmt, (p, bias, emax) in {"fp16": (11, 15, 30), "fp32": (24, 127, 254)}.items():
        got = round_scaled(n, e, fmt=fmt)
        total = 16 if fmt == "fp16" else 32
        want = []
        for ni, ei in zip(n.tolist(), e.tolist(), strict=True):
            s, be, m = oracle_round(Fraction(ni) * Fraction(2) ** ei, p, bias, emax)
            want.append((s << (total - 1)) | (be << (p - 1)) | m)
        assert [int(g) for g in got] == want, fmt
    with pytest.raises(ValueError, match="2\\*\\*53"):
        round_scaled(np.array([2**53]), 0)
    with pytest.raises(ValueError, match="fmt"):
        round_scaled(1, 0, fmt="bf16")


# ---------------------------------------------------------------- the FP16 adder


def test_fp16_add_hand_cases():
    cases = [
        (0x3C00, 0x3C00, 0x4000),  # 1 + 1 = 2
        (0x3C00, 0x1000, 0x3C00),  # 1 + 2^-11: tie, to even (1)
        (0x3C00, 0x1600, 0x3C02),  # 1 + 3·2^-11: tie, to even (1 + 2^-9)
        (0x7BFF, 0x7BFF, 0x7BFF),  # overflow saturates
        (0x7BFF, 0x4C00, 0x7BFF),  # 65504 + 16 = 65520 rounds to 65536: saturates
        (0xFBFF, 0xFBFF, 0xFBFF),
        (0x3C00, 0xBC00, 0x0000),  # x + (-x) = +0
        (0x8000, 0x8000, 0x8000),  # (-0) + (-0) = -0
        (0x0000, 0x8000, 0x0000),
        (0x0401, 0x8400, 0x0000),  # exact 2^-24: below min normal, flushed to +0
        (0x0400, 0x0001, 0x0400),  # a subnormal operand reads as 0 (IEEE would give 0x0401)
        (0x8001, 0x8001, 0x8000),  # two flushed negative subnormals: (-0) + (-0)
        (0x7C00, 0x3C00, 0x7C00),  # Inf + 1 = Inf
        (0x7C00, 0xFC00, 0x7E00),  # Inf - Inf = NaN
        (0x7D00, 0x3C00, 0x7E00),  # NaN in, canonical NaN out
    ]
    a, b, want = (np.array(c, dtype=np.uint16) for c in zip(*cases, strict=True))
    assert [hex(v) for v in fp16_add(a, b)] == [hex(v) for v in want]
    assert [hex(v) for v in fp16_add(b, a)] == [hex(v) for v in want]


def _check_against_numpy(bs: np.ndarray, chunk: int = 32) -> None:
    for i in range(0, len(bs), chunk):
        b = bs[i : i + chunk]
        a = np.broadcast_to(ALL16[:, None], (ALL16.size, b.size))
        got = fp16_add(a, b[None, :])
        want = numpy_oracle_add(a, np.broadcast_to(b[None, :], a.shape))
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[0]
            x, y = int(a[tuple(bad)]), int(b[bad[1]])
            raise AssertionError(
                f"fp16_add({x:#06x}, {y:#06x}) = {int(got[tuple(bad)]):#06x}, "
                f"oracle {int(want[tuple(bad)]):#06x}"
            )


def test_fp16_add_all_a_against_structured_b():
    """All 2^16 values of ``a`` against a structured sample of ``b`` plus random ones."""
    rng = np.random.default_rng(4)
    bs = np.concatenate([structured_b16()[::5], rng.integers(0, 1 << 16, 16).astype(np.uint16)])
    _check_against_numpy(bs)


@pytest.mark.slow
def test_fp16_add_all_a_against_large_b_sample():
    rng = np.random.default_rng(5)
    bs = np.concatenate([structured_b16(), rng.integers(0, 1 << 16, 320).astype(np.uint16)])
    _check_against_numpy(bs)


def test_fp16_add_matches_exact_fraction_oracle():
    rng = np.random.default_rng(6)
    a = rng.integers(0, 1 << 16, 6000).astype(np.uint16)
    # Same-magnitude pairs and near-cancellations exercise the long alignments and renormalization.
    b = np.concatenate(
        [rng.integers(0, 1 << 16, 4000), a[4000:] ^ 0x8000 ^ rng.integers(0, 4, 2000)]
    )
    b = b.astype(np.uint16)
    finite = (((a >> 10) & 31) != 31) & (((b >> 10) & 31) != 31)
    a, b = a[finite], b[finite]
    got = fp16_add(a, b)
    fa, fb = daz(a), daz(b)
    want = []
    for x, y in zip(fa.tolist(), fb.tolist(), strict=True):
        s = fp16_fraction(x) + fp16_fraction(y)
        want.append(0x8000 if (x == 0x8000 and y == 0x8000) else oracle_fp16(s))
    assert [int(g) for g in got] == want


def test_fp16_add_accepts_float16_and_checks_input():
    x = np.array([1.5, -2.25], dtype=np.float16)
    assert np.array_equal(fp16_value(fp16_add(x, x)), np.array([3.0, -4.5], dtype=np.float16))
    with pytest.raises(TypeError, match="float16 values or uint16"):
        fp16_add(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="0 .. 0xFFFF"):
        fp16_add(np.array([70000]), np.array([1]))
