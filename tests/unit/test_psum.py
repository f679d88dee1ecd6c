"""Partial-sum MXINT8 quantizers and accumulation modes (specs/hbq.md §2.2, §6 item 6).

Oracles are scalar ``Fraction`` restatements of the spec: exact sums, RNE by comparison with the
exact half, shared exponents from ``floor(log2 amax)``. None of them calls the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from fp_oracle import HALF, floor_log2, oracle_round

from coaccel.models.hbq import (
    PSUM_MODES,
    accumulate_psums,
    mxint8_dequantize,
    mxint8_group_quantize,
    mxint8_quantize,
)


def to16(v: Fraction) -> int:
    return oracle_round(v, 11, 15, 30)


def to32(v: Fraction) -> int:
    return oracle_round(v, 24, 127, 254)


def val16(bits: int) -> Fraction:
    """Value of a binary16 pattern with subnormals read as zero (the datapath's DAZ)."""
    e, m = (bits >> 10) & 31, bits & 1023
    if e == 0:
        return Fraction(0)
    mag = Fraction(1024 + m, 1024) * Fraction(2) ** (e - 15)
    return -mag if bits >> 15 else mag


def val32(bits: int) -> Fraction:
    e, m = (bits >> 23) & 255, bits & 0x7FFFFF
    mag = (
        Fraction(m, 2**23) * Fraction(2) ** -126
        if e == 0
        else (Fraction(2**23 + m, 2**23) * Fraction(2) ** (e - 127))
    )
    return -mag if bits >> 31 else mag


def add16(a: int, b: int) -> int:
    """Scalar FP16 add (exact sum, then the policy); -0 only for (-0) + (-0)."""
    if val16(a) == 0 and val16(b) == 0 and a >> 15 and b >> 15:
        return 0x8000
    return to16(val16(a) + val16(b))


def round_int(x: Fraction, rounding: str) -> int:
    if rounding == "trunc":
        return math.trunc(x)
    q = math.floor(x)
    if x - q > HALF or (x - q == HALF and q % 2):
        q += 1
    return q


def oracle_mx(vals: list[Fraction], rounding: str, zero_x: int) -> tuple[list[int], int]:
    """MXINT8 of one block: X = max floor(log2|v|) - 6, q = clamp(round(v / 2^X), ±127)."""
    nz = [abs(v) for v in vals if v != 0]
    if not nz:
        return [0] * len(vals), zero_x
    x = max(floor_log2(a) for a in nz) - 6
    return [max(-127, min(127, round_int(v / Fraction(2) ** x, rounding))) for v in vals], x


# ---------------------------------------------------------------- MXINT8 quantizer


def test_mxint8_quantize_hand_cases():
    v = np.zeros(16, dtype=np.float16)
    v[:6] = [1.0, 1 + 2**-7, 1 + 3 * 2**-7, -(1 + 3 * 2**-7), 0.5, 2**-20]  # 2^-20: subnormal
    rne = mxint8_quantize(v)
    trunc = mxint8_quantize(v, rounding="trunc")
    # X = floor(log2 1.0...) - 6 = -6 (code 121); 64.5 ties to 64, 65.5 to 66 (even).
    assert rne.x.tolist() == [-6] and rne.x_code.tolist() == [121]
    assert rne.q[:6].tolist() == [64, 64, 66, -66, 32, 0]
    assert trunc.q[:6].tolist() == [64, 64, 65, -65, 32, 0]
    top = mxint8_quantize(np.full(16, 1.9990234375, dtype=np.float16))  # 127.9375 -> 128 -> 127
    assert top.q.tolist() == [127] * 16
    zero = mxint8_quantize(np.zeros((2, 32), dtype=np.uint16))
    assert zero.x_code.tolist() == [[0, 0], [0, 0]] and not zero.q.any()
    assert zero.x.tolist() == [[-127, -127], [-127, -127]]
    with pytest.raises(ValueError, match="Inf or NaN"):
        mxint8_quantize(np.full(16, 0x7C00, dtype=np.uint16))
    with pytest.raises(ValueError, match="multiple of the block"):
        mxint8_quantize(np.zeros(20, dtype=np.uint16))


@pytest.mark.parametrize("rounding", ["rne", "trunc"])
def test_mxint8_quantize_every_fp16_code_point(rounding):
    """Each finite binary16 value v in a block with 15 copies of a companion c."""
    codes = np.arange(1 << 16, dtype=np.uint16)
    codes = codes[((codes >> 10) & 31) != 31]
    vals = codes.view(np.float16).astype(np.float64)
    vals = np.where(((codes >> 10) & 31) == 0, 0.0, vals)  # subnormals read as zero
    for companion in (0x0000, 0x3C00, 0x7BFF, 0x0400):
        blocks = np.full((codes.size, 16), companion, dtype=np.uint16)
        blocks[:, 3] = codes
        got = mxint8_quantize(blocks, rounding=rounding)
        c = val16(companion)
        # Scalar Fraction oracle on a sample covering all exponents and both signs.
        for i in range(0, codes.size, 97):
            q, x = oracle_mx([c, c, c, val16(int(codes[i]))], rounding, -127)
            assert int(got.x[i, 0]) == x, hex(int(codes[i]))
            assert int(got.q[i, 3]) == q[3] and int(got.q[i, 0]) == q[0], hex(int(codes[i]))
        # Every code point, vectorized: frexp gives floor(log2|v|) + 1 exactly.
        pair = np.stack([np.abs(vals), np.full(vals.size, float(abs(c)))])
        e = np.where(pair > 0, np.frexp(pair)[1] - 1, -10_000).max(0)
        x = np.where(e > -10_000, e - 6, -127)
        ratio = vals / 2.0**x  # exact: a power-of-two scaling of a float16 value
        mag = np.abs(ratio)
        rounded = np.floor(mag) if rounding == "trunc" else np.round(mag)  # RNE is meant here
        want = np.sign(ratio) * np.minimum(rounded, 127)
        assert np.array_equal(got.x[:, 0], x)
        assert np.array_equal(got.q[:, 3].astype(np.float64), want)


def test_mxint8_dequantize_all_codes():
    q = np.arange(-127, 128, dtype=np.int8)
    for x in (-127, -30, -21, -20, -14, -6, 0, 9):
        got = mxint8_dequantize(q, np.array([x + 127], dtype=np.uint8), block=q.size)
        want = [to16(Fraction(int(k)) * Fraction(2) ** x) for k in q.tolist()]
        assert got.tolist() == want, x
    # 1·2^-20 lies below 2^-14: flushed to +0; 127·2^-20 is normal and exact.
    got = mxint8_dequantize(np.array([1, 127] + [0] * 14, dtype=np.int8), np.array([107]))
    assert got[:2].tolist() == [0, to16(Fraction(127, 2**20))]


def test_mxint8_group_quantize():
    v = np.array([0.0] * 31 + [3.0] + [1.0, -1.0 - 2**-7, 70.0, 0.0] + [0.0] * 28, dtype=np.float32)
    q, x = mxint8_group_quantize(v, block=32)
    # Block 0: amax 3 -> scale 2^(1-6); 3 -> 96. Block 1: amax 70 -> 2^(6-6) = 1: 1 -> 1,
    # -1.0078125 -> -1, 70 -> 70. An all-zero block would get scale 1 (X = 0).
    assert x.tolist() == [-5, 0] and q[31] == 96 and q[32:35].tolist() == [1, -1, 70]
    q0, x0 = mxint8_group_quantize(np.zeros(32, dtype=np.float32))
    assert x0.tolist() == [0] and not q0.any()
    with pytest.raises(TypeError, match="float32"):
        mxint8_group_quantize(np.zeros(32))


# ---------------------------------------------------------------- accumulation modes


def random_block_results(rng, n_k, m, n, wide):
    """Block results with a wide spread of magnitudes, zeros and sign changes."""
    x = rng.standard_normal((n_k, m, n)) * 2.0 ** rng.integers(-8, 9, (n_k, m, n))
    x[rng.random(x.shape) < 0.1] = 0.0
    if wide:
        return x.astype(np.float32).view(np.uint32)
    return x.astype(np.float16).view(np.uint16)


def test_fp32_and_fp16_modes_match_scalar_loops():
    rng = np.random.default_rng(10)
    b32 = random_block_results(rng, 7, 3, 5, wide=True)
    got = accumulate_psums(b32, psum_mode="fp32")
    b16 = random_block_results(rng, 7, 3, 5, wide=False)
    got16 = accumulate_psums(b16, psum_mode="fp16")
    for i in range(3):
        for j in range(5):
            acc = int(b32[0, i, j])
            acc16 = 0
            for k in range(7):
                if k:
                    acc = to32(val32(acc) + val32(int(b32[k, i, j])))
                acc16 = add16(acc16, int(b16[k, i, j]))
            assert int(got[i, j]) == acc and int(got16[i, j]) == acc16


@pytest.mark.parametrize("rounding", ["rne", "trunc"])
def test_mxint8_running_matches_scalar_loop(rounding):
    rng = np.random.default_rng(11)
    n_k, m, n, sa_n = 6, 3, 40, 16  # 40 channels: the last MXINT8 block is zero-padded
    b16 = random_block_results(rng, n_k, m, n, wide=False)
    got = accumulate_psums(b16, psum_mode="mxint8_running", sa_n=sa_n, rounding=rounding)
    assert got.shape == (m, n) and got.dtype == np.uint16
    for i in range(m):
        stored: list[Fraction] = [Fraction(0)] * 48
        for k in range(n_k):
            sums = [add16(to16(stored[j]), int(b16[k, i, j]) if j < n else 0) for j in range(48)]
            for j0 in range(0, 48, sa_n):
                q, x = oracle_mx([val16(s) for s in sums[j0 : j0 + sa_n]], rounding, -127)
                stored[j0 : j0 + sa_n] = [Fraction(qq) * Fraction(2) ** x for qq in q]
        assert got[i].tolist() == [to16(s) for s in stored[:n]]


@pytest.mark.parametrize("rounding", ["rne", "trunc"])
def test_mxint8_group_matches_scalar_loop(rounding):
    rng = np.random.default_rng(12)
    n_k, m, n, qb, gb = 5, 2, 70, 32, 2  # the last K group holds one block only
    b32 = random_block_results(rng, n_k, m, n, wide=True)
    got = accumulate_psums(
        b32, psum_mode="mxint8_group", group_blocks=gb, quant_block=qb, rounding=rounding
    )
    for i in range(m):
        acc = [0] * n
        for g0 in range(0, n_k, gb):
            part = [int(b32[g0, i, j]) for j in range(n)]
            for k in range(g0 + 1, min(g0 + gb, n_k)):
                part = [to32(val32(part[j]) + val32(int(b32[k, i, j]))) for j in range(n)]
            vals = [val32(p) for p in part] + [Fraction(0)] * (96 - n)
            for j0 in range(0, 96, qb):
                q, x = oracle_mx(vals[j0 : j0 + qb], rounding, 0)
                for jj, qq in enumerate(q):
                    if j0 + jj < n:
                        acc[j0 + jj] = add16(acc[j0 + jj], to16(Fraction(qq) * Fraction(2) ** x))
        assert got[i].tolist() == acc


def test_accumulate_checks_inputs():
    b16 = np.zeros((2, 3, 16), dtype=np.uint16)
    with pytest.raises(ValueError, match="psum_mode='int8'; valid choices: fp32, fp16"):
        accumulate_psums(b16, psum_mode="int8")
    with pytest.raises(TypeError, match="takes uint32 bit patterns"):
        accumulate_psums(b16, psum_mode="fp32")
    with pytest.raises(TypeError, match="takes uint16 bit patterns"):
        accumulate_psums(b16.astype(np.uint32), psum_mode="mxint8_running")
    with pytest.raises(ValueError, match="rounding='rna'"):
        accumulate_psums(b16, psum_mode="fp16", rounding="rna")
    assert PSUM_MODES == ("fp32", "fp16", "mxint8_running", "mxint8_group")
