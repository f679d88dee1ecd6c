"""The exact integer HBQ dot-product datapath (specs/hbq.md §1.2, §1.4, §1.8, §2.1).

Expected values come from the spec's tables written out by hand below and from exact ``Fraction``
arithmetic on the dequantized operands, never from the code under test.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from fractions import Fraction

import numpy as np
import pytest

from coaccel.models.hbq import (
    block_dot,
    element_int,
    l1_convert,
    l2_multipliers,
    l2_scale,
    l2_sum,
    microblock_sums,
    p_total_bound,
    products,
)

# specs/hbq.md §1.2, magnitudes of codes 0..7 (E2M1) and 0..15 (E2M2); the sign is the MSB.
E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
E2M2 = [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7]


def elem_value(code: int, bits: int) -> Fraction:
    table = E2M1 if bits == 4 else E2M2
    half = 1 << (bits - 1)
    mag = Fraction(table[code % half])
    return -mag if code >= half else mag


# specs/hbq.md §1.4: SIG value of code c per table.
SIG = {
    "pot": lambda c: Fraction(2) ** c,
    "int": lambda c: Fraction(c + 1),
    "sig1": lambda c: 1 + Fraction(c, 2),
    "sig2": lambda c: 1 + Fraction(c, 4),
    "sig3": lambda c: 1 + Fraction(c, 8),
    "sig4": lambda c: 1 + Fraction(c, 16),
}


def e5m3_value(code: int) -> Fraction:
    """§1.3: value = 2^(E-15) · (1 + M/8)."""
    return Fraction(2) ** ((code >> 3) - 15) * (1 + Fraction(code & 7, 8))


NORMALS16 = [
    Fraction(1024 + m, 1024) * Fraction(2) ** (e - 15) for e in range(1, 31) for m in range(1024)
]


def oracle_fp16(v: Fraction) -> int:
    """Nearest binary16 (ties to even) by enumeration, saturate at 65504, flush below 2^-14."""
    if v == 0:
        return 0
    sign = 0x8000 if v < 0 else 0
    a = abs(v)
    if a >= 65504:
        return sign | 0x7BFF
    if a < Fraction(1, 2**14):
        return sign | 0x0400 if a >= Fraction(1, 2**14) - Fraction(1, 2**26) else 0
    i = bisect_left(NORMALS16, a)
    if NORMALS16[i] != a:
        lo, hi = NORMALS16[i - 1], NORMALS16[i]
        if a - lo < hi - a or (a - lo == hi - a and (i - 1) % 2 == 0):
            i -= 1
    return sign | (0x0400 + i)


def oracle_fp32(v: Fraction) -> int:
    """RNE to 24 bits (exponents here never leave the binary32 normal range)."""
    if v == 0:
        return 0
    sign = int(v < 0) << 31
    a = abs(v)
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    scaled = a / Fraction(2) ** (e - 23)
    q = math.floor(scaled)
    r = scaled - q
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2):
        q += 1
    if q == 2**24:
        q, e = 2**23, e + 1
    return sign | ((e + 127) << 23) | (q - 2**23)


def oracle_rtl_compat(p: int, f: int, w_scale: int, a_scale: int) -> int:
    """The FX2FP + Scale_NV unit restated: truncate |P| to 11 significant bits, multiply exactly,
    round half away from zero to 11 bits, saturate, flush (see l1_convert's docstring)."""
    if p == 0:
        return 0
    a = abs(p)
    drop = max(a.bit_length() - 11, 0)
    t = (a >> drop) << drop
    v = Fraction(t) * Fraction(2) ** -f * e5m3_value(w_scale) * e5m3_value(a_scale)
    e = math.floor(math.log2(v))
    while Fraction(2) ** e > v:
        e -= 1
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    sig = math.floor(v / Fraction(2) ** (e - 10) + Fraction(1, 2))
    if sig == 2048:
        sig, e = 1024, e + 1
    sign = 0x8000 if p < 0 else 0
    if e + 15 > 30:
        return sign | 0x7BFF
    if e + 15 < 1:
        return 0
    return sign | ((e + 15) << 10) | (sig - 1024)


# ---------------------------------------------------------------- elements and products


def test_element_int_all_code_points():
    for bits, mb in ((4, 1), (5, 2)):
        codes = np.arange(1 << bits, dtype=np.uint8)
        m, sh = element_int(codes, bits)
        assert m.dtype == np.int8 and sh.dtype == np.int8
        for c in range(1 << bits):
            assert Fraction(int(m[c])) * Fraction(2) ** (int(sh[c]) - mb) == elem_value(c, bits)
        assert set(sh.tolist()) == {0, 1, 2}
        assert int(np.abs(m).max()) == (3 if bits == 4 else 7)
    # Spot checks of the §1.2 integer view: E2M1 0b0111 = 6 = 3/2·2^2; E2M2 0b01111 = 7 = 7/4·2^2.
    assert [int(v) for v in element_int(np.array([7, 15]), 4)[0]] == [3, -3]
    assert [int(v) for v in element_int(np.array([15, 9, 3]), 5)[1]] == [2, 1, 0]


def test_products_all_code_pairs():
    w = np.repeat(np.arange(16, dtype=np.uint8), 32)
    a = np.tile(np.arange(32, dtype=np.uint8), 16)
    p = products(w, a)
    assert p.dtype == np.int16
    want = [
        8 * elem_value(x, 4) * elem_value(y, 5) for x, y in zip(w.tolist(), a.tolist(), strict=True)
    ]
    assert all(Fraction(int(g)) == v for g, v in zip(p.tolist(), want, strict=True))
    assert int(np.abs(p).max()) == 336
    # E2M1 × E2M1 (KV operands): units of 2^-2.
    x4, y4 = np.repeat(np.arange(16), 16), np.tile(np.arange(16), 16)
    p44 = products(x4, y4, a_elem_bits=4)
    assert [Fraction(int(g), 4) for g in p44] == [
        elem_value(x, 4) * elem_value(y, 4) for x, y in zip(x4.tolist(), y4.tolist(), strict=True)
    ]


def test_element_codes_are_checked():
    with pytest.raises(ValueError, match="0 .. 15"):
        products(np.array([16]), np.array([1]))
    with pytest.raises(ValueError, match="elem_bits"):
        element_int(np.array([1]), 6)
    with pytest.raises(TypeError, match="integer"):
        products(np.array([1.0]), np.array([1]))


def test_l2_tables_hardware_forms():
    for name, sig in SIG.items():
        ints, frac = l2_multipliers(name)
        assert [Fraction(i, 2**frac) for i in ints] == [sig(c) for c in range(4)], name
    # §2.1 integer forms: PoT shift, INT c+1, SIG-1 c+2 (1 frac bit), SIG_2 {01,c,0}, SIG_3 {010,c}.
    assert l2_multipliers("pot") == ((1, 2, 4, 8), 0)
    assert l2_multipliers("int") == ((1, 2, 3, 4), 0)
    assert l2_multipliers("SIG-1") == ((2, 3, 4, 5), 1)
    assert l2_multipliers("fp-1") == ((8, 10, 12, 14), 3)
    assert l2_multipliers("fp-10") == ((8, 9, 10, 11), 3)
    with pytest.raises(ValueError, match="unknown L2 scheme 'sig9'"):
        l2_multipliers("sig9")


@pytest.mark.parametrize(
    ("act_l2", "weight_l2", "F"),
    [
        ("sig1", "mix", 7),
        ("pot", "mix", 6),
        ("int", "mix", 6),
        (None, None, 3),
        (None, "mix", 6),
        ("sig1", None, 4),
        ("pot", "sig3", 6),
        ("sig1", "sig4", 8),
    ],
)
def test_fractional_bits(act_l2, weight_l2, F):
    sums = np.ones((2, 4), dtype=np.int32)
    codes = np.zeros((2, 4), dtype=np.uint8)
    scheme = np.zeros(2, dtype=np.uint8)
    _, f = l2_scale(sums, codes, scheme, codes, act_l2=act_l2, act_l2_bits=2, weight_l2=weight_l2)
    assert f == F


def test_microblock_sums_and_l2_sum():
    p = np.arange(-8, 8, dtype=np.int16).reshape(2, 8)
    assert microblock_sums(p, 4).tolist() == [[-26, -10], [6, 22]]
    assert l2_sum(np.array([[1, 2, 3], [-4, 5, -6]])).tolist() == [6, -5]
    with pytest.raises(ValueError, match="does not divide"):
        microblock_sums(p, 3)


# ---------------------------------------------------------------- exact Fraction oracle

CONFIGS = [  # (act_l2, act_l2_bits, weight_l2, weight_l2_bits)
    ("sig1", 2, "mix", 2),  # HBQ-A / HBQ-E paper configs
    ("pot", 1, "mix", 2),  # the accelerator RTL
    ("int", 2, "mix", 2),
    ("int", 1, "mix", 2),
    ("pot", 2, "sig2", 2),
    ("sig1", 1, "sig3", 2),
    ("sig2", 2, "sig4", 2),
    ("sig1", 2, "pot", 1),
    ("sig3", 2, "int", 2),
    (None, 2, "mix", 2),
    ("sig1", 2, None, 2),
    (None, 2, None, 2),  # L1-only
]


def random_blocks(rng: np.random.Generator, n: int, kind: str):
    """Element codes of one operand pair, ``(n, 128)``, drawn by class."""
    if kind == "uniform":
        return rng.integers(0, 16, (n, 128)), rng.integers(0, 32, (n, 128))
    if kind == "zero":  # all-zero blocks, +0 and -0 codes
        return rng.choice([0, 8], (n, 128)), rng.choice([0, 16], (n, 128))
    if kind == "outlier":  # mostly zero/subnormal, a few ±max
        w = rng.choice([0, 1, 8, 9], (n, 128))
        a = rng.choice([0, 1, 2, 17, 18], (n, 128))
        hit = rng.random((n, 128)) < 0.03
        w = np.where(hit, rng.choice([7, 15], (n, 128)), w)
        a = np.where(hit, rng.choice([15, 31], (n, 128)), a)
        return w, a
    # "max": every element at ±max with one sign per block (the accumulator's worst case).
    sign = rng.integers(0, 2, (n, 1))
    return np.broadcast_to(7 + 8 * sign, (n, 128)), np.broadcast_to(15 + 16 * (1 - sign), (n, 128))


@pytest.mark.parametrize("ub", [4, 8, 16, 32, 64])
def test_block_dot_equals_fraction_oracle(ub):
    rng = np.random.default_rng(100 + ub)
    n_ub = 128 // ub
    for cfg_i, (act_l2, a_bits, weight_l2, w_bits) in enumerate(CONFIGS):
        for kind, n in (("uniform", 24), ("zero", 2), ("outlier", 10), ("max", 4)):
            wc, ac = random_blocks(rng, n, kind)
            wc, ac = wc.astype(np.uint8), ac.astype(np.uint8)
            wl = rng.integers(0, 1 << w_bits, (n, n_ub)).astype(np.uint8)
            al = rng.integers(0, 1 << a_bits, (n, n_ub)).astype(np.uint8)
            if kind == "max":
                wl[:], al[:] = (1 << w_bits) - 1, (1 << a_bits) - 1
            scheme = rng.integers(0, 2, n).astype(np.uint8)
            # Scales kept in a range where no output saturates or flushes (tested separately).
            ws = (rng.integers(8, 19, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
            as_ = (rng.integers(8, 19, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
            res = {
                out: block_dot(
                    wc,
                    ws,
                    wl,
                    scheme,
                    ac,
                    as_,
                    al,
                    ub=ub,
                    act_l2=act_l2,
                    act_l2_bits=a_bits,
                    weight_l2=weight_l2,
                    weight_l2_bits=w_bits,
                    out=out,
                )
                for out in ("fp16", "fp32")
            }
            r16 = res["fp16"]
            assert np.array_equal(r16.p_total, res["fp32"].p_total)
            for b in range(n):
                s1w, s1a = e5m3_value(int(ws[b])), e5m3_value(int(as_[b]))
                total = Fraction(0)
                for j in range(n_ub):
                    if weight_l2 is None:
                        gw = Fraction(1)
                    elif weight_l2 == "mix":
                        gw = SIG["sig3" if scheme[b] else "sig2"](int(wl[b, j]))
                    else:
                        gw = SIG[weight_l2](int(wl[b, j]))
                    ga = Fraction(1) if act_l2 is None else SIG[act_l2](int(al[b, j]))
                    for i in range(j * ub, (j + 1) * ub):
                        w_hat = elem_value(int(wc[b, i]), 4) * gw * s1w
                        a_hat = elem_value(int(ac[b, i]), 5) * ga * s1a
                        total += w_hat * a_hat
                got = Fraction(int(r16.p_total[b])) * Fraction(2) ** -r16.F * s1w * s1a
                assert got == total, (cfg_i, kind, b)
                assert int(r16.bits[b]) == oracle_fp16(total), (cfg_i, kind, b)
                assert int(res["fp32"].bits[b]) == oracle_fp32(total), (cfg_i, kind, b)
            assert r16.value.dtype == np.float16
            assert np.array_equal(r16.value.view(np.uint16), r16.bits)


def test_worst_case_fits_24_bit_accumulator():
    """|P_total| for B = 128 from the formats: 128 · (6·7·8) · maxSIG_a · maxSIG_w · 2^F."""
    assert 128 * 336 * 5 * 14 == 3_010_560  # SIG-1 × Mix, the spec's "about 3.0e6"
    worst = worst_spec = 0
    for act_l2 in ("pot", "int", "sig1", "sig2", "sig3", "sig4", None):
        for weight_l2 in ("mix", "pot", "int", "sig1", "sig2", "sig3", "sig4", None):
            for bits in (1, 2):
                wc = np.full((2, 128), 7, dtype=np.uint8)
                wc[1] = 15  # -6
                ac = np.full((2, 128), 15, dtype=np.uint8)
                top = (1 << bits) - 1
                codes = np.full((2, 32), top, dtype=np.uint8)
                scheme = np.zeros(2, dtype=np.uint8)  # SIG_2 has the larger maximum (1.75)
                r = block_dot(
                    wc,
                    np.full(2, 0x78),
                    codes,
                    scheme,
                    ac,
                    np.full(2, 0x78),
                    codes,
                    ub=4,
                    act_l2=act_l2,
                    act_l2_bits=bits,
                    weight_l2=weight_l2,
                    weight_l2_bits=bits,
                )
                sig_a = 1 if act_l2 is None else SIG[act_l2](top)
                sig_w = (
                    1
                    if weight_l2 is None
                    else SIG["sig2" if weight_l2 == "mix" else weight_l2](top)
                )
                want = 128 * 6 * 7 * sig_a * sig_w * 2**r.F
                assert r.p_total.tolist() == [want, -want]
                bound = p_total_bound(
                    128, act_l2=act_l2, act_l2_bits=bits, weight_l2=weight_l2, weight_l2_bits=bits
                )
                assert bound == want
                worst = max(worst, int(want))
                if act_l2 in ("pot", "int", "sig1", None) and weight_l2 != "sig4":
                    worst_spec = max(worst_spec, int(want))
    # The spec's activation schemes (§1.5: PoT, INT, SIG-1) with any weight table up to SIG_3:
    # PoT 2-bit (×8) × SIG_2 (×14 = 1.75·2^3) is the largest, and fits a 24-bit signed word.
    assert worst_spec == 128 * 336 * 8 * 14 == 4_816_896 < 2**23
    # Fine tables on both sides (SIG_4 × SIG_4: ×19 · ×19) need 25 bits.
    assert worst == 128 * 336 * 19 * 19 == 15_525_888 < 2**24


# ---------------------------------------------------------------- L1 conversion


def test_l1_convert_hand_cases():
    one = 15 << 3  # E5M3 1.0
    p = np.array([1, 4099, 1028, -1028])
    a_scale = np.array([one, one, one | 1, one | 1])  # 1.0, 1.0, 1.125, 1.125
    exact, _ = l1_convert(p, 3, one, a_scale, mode="exact")
    rtl, _ = l1_convert(p, 3, one, a_scale, mode="rtl_compat")
    # 1/8 = 0x3000 in both; 4099/8 = 512.375: exact RNE 512.5 (0x6001), RTL truncates P to
    # 4096 -> 512 (0x6000); 1028/8·1.125 = 144.5625: a tie at 11 bits, RNE 144.5 (0x5884),
    # RTL half-up 144.625 (0x5885).
    assert [hex(v) for v in exact] == ["0x3000", "0x6001", "0x5884", "0xd884"]
    assert [hex(v) for v in rtl] == ["0x3000", "0x6000", "0x5885", "0xd885"]
    big = (30 << 3) | 7  # 61440
    tiny = 1 << 3  # 2^-14
    for mode in ("exact", "rtl_compat"):
        b, v = l1_convert(
            np.array([3_000_000, -3_000_000, 1, 0]),
            7,
            np.array([big, big, tiny, big]),
            np.array([big, big, tiny, big]),
            mode=mode,
        )
        assert [hex(x) for x in b] == ["0x7bff", "0xfbff", "0x0", "0x0"]
        assert v.dtype == np.float16
    b32, v32 = l1_convert(np.array([5, -5]), 3, one, one, out="fp32")
    assert [hex(x) for x in b32] == ["0x3f200000", "0xbf200000"] and v32.tolist() == [0.625, -0.625]


def test_l1_convert_matches_oracles():
    rng = np.random.default_rng(7)
    n = 4000
    p = rng.integers(-(2**23), 2**23, n) >> rng.integers(0, 23, n)
    f = rng.choice([3, 6, 7], n)
    ws = (rng.integers(1, 31, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
    as_ = (rng.integers(1, 31, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
    exact16, _ = l1_convert(p, f, ws, as_)
    exact32, _ = l1_convert(p, f, ws, as_, out="fp32")
    rtl, _ = l1_convert(p, f, ws, as_, mode="rtl_compat")
    sat = flush = 0
    for i in range(n):
        pi, fi, w, a = int(p[i]), int(f[i]), int(ws[i]), int(as_[i])
        v = Fraction(pi) * Fraction(2) ** -fi * e5m3_value(w) * e5m3_value(a)
        assert int(exact16[i]) == oracle_fp16(v), i
        assert int(rtl[i]) == oracle_rtl_compat(pi, fi, w, a), i
        if v != 0:
            assert int(exact32[i]) == oracle_fp32(v), i
        sat += int(exact16[i]) & 0x7FFF == 0x7BFF
        flush += int(exact16[i]) == 0 and pi != 0
    assert sat > 100 and flush > 100  # both policy branches were exercised


def test_l1_convert_rtl_compat_within_two_ulp_of_exact():
    """docs/hbq_datapath.md §2: exact - rtl_compat lies in [-1, 2] ULP (same-sign bit patterns
    are monotone, so their integer difference counts ULPs)."""
    rng = np.random.default_rng(9)
    n = 200_000
    p = rng.integers(1, 2**23, n) >> rng.integers(0, 23, n)
    f = rng.choice([3, 6, 7], n)
    ws = (rng.integers(10, 20, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
    as_ = (rng.integers(10, 20, n) << 3 | rng.integers(0, 8, n)).astype(np.uint8)
    exact, _ = l1_convert(p, f, ws, as_)
    rtl, _ = l1_convert(p, f, ws, as_, mode="rtl_compat")
    d = exact.astype(np.int64) - rtl.astype(np.int64)
    assert d.min() >= -1 and d.max() <= 2 and (d == 2).any() and (d == -1).any()


def test_l1_convert_rtl_compat_rounding_carry_and_boundaries():
    """Cases built to hit the half-up carry to 2048, the ×4 normalization and the flush edge."""
    one = 15 << 3
    cases = []
    for p in (2047, 2046, 4095, 4094, 2**23 - 1, 1023, 1):
        for ma, mw in ((0, 0), (7, 7), (1, 0), (7, 0)):
            for ea, ew in ((15, 15), (1, 1), (30, 30), (2, 9), (29, 10)):
                cases.append((p, 7, (ew << 3) | mw, (ea << 3) | ma))
    p, f, ws, as_ = (np.array(c) for c in zip(*cases, strict=True))
    for sign in (1, -1):
        rtl, _ = l1_convert(sign * p, f, ws, as_, mode="rtl_compat")
        want = [
            oracle_rtl_compat(sign * int(pi), int(fi), int(w), int(a)) for pi, fi, w, a in cases
        ]
        assert [int(x) for x in rtl] == want
    assert l1_convert(np.array([1]), 3, one, one, mode="rtl_compat")[0].tolist() == [0x3000]


def test_l1_convert_input_checks():
    with pytest.raises(ValueError, match="exponent field in 1 .. 30"):
        l1_convert(np.array([1]), 3, np.array([0x07]), np.array([0x78]))
    with pytest.raises(ValueError, match="exponent field in 1 .. 30"):
        l1_convert(np.array([1]), 3, np.array([0x78]), np.array([0xF8]))
    with pytest.raises(ValueError, match="out='fp16' only"):
        l1_convert(np.array([1]), 3, 0x78, 0x78, out="fp32", mode="rtl_compat")
    with pytest.raises(ValueError, match="mode="):
        l1_convert(np.array([1]), 3, 0x78, 0x78, mode="nearest")
    with pytest.raises(TypeError, match="integers"):
        l1_convert(np.array([1.5]), 3, 0x78, 0x78)


# ---------------------------------------------------------------- block_dot plumbing


def test_block_dot_intermediates_and_broadcasting():
    rng = np.random.default_rng(8)
    wc = rng.integers(0, 16, (3, 1, 128)).astype(np.uint8)
    ac = rng.integers(0, 32, (1, 5, 128)).astype(np.uint8)
    wl = rng.integers(0, 4, (3, 1, 16)).astype(np.uint8)
    al = rng.integers(0, 4, (1, 5, 16)).astype(np.uint8)
    sch = rng.integers(0, 2, (3, 1)).astype(np.uint8)
    r = block_dot(
        wc,
        np.full((3, 1), 0x70),
        wl,
        sch,
        ac,
        np.full((1, 5), 0x71),
        al,
        ub=8,
        act_l2="sig1",
        act_l2_bits=2,
        keep_products=True,
    )
    assert r.products.shape == (3, 5, 128) and r.ub_sums.shape == (3, 5, 16)
    assert r.p_total.shape == r.bits.shape == (3, 5) and r.F == 7
    assert np.array_equal(r.ub_sums, microblock_sums(r.products, 8))
    assert np.array_equal(r.p_total, l2_sum(r.scaled))
    for i in range(3):
        for j in range(5):
            one = block_dot(
                wc[i, 0],
                0x70,
                wl[i, 0],
                sch[i, 0],
                ac[0, j],
                0x71,
                al[0, j],
                ub=8,
                act_l2="sig1",
                act_l2_bits=2,
                mode="rtl_compat",
            )
            assert int(one.p_total) == int(r.p_total[i, j])
    assert (
        block_dot(wc, 0x70, wl, sch, ac, 0x71, al, ub=8, act_l2="sig1", act_l2_bits=2).products
        is None
    )


def test_block_dot_input_checks():
    wc = np.zeros(128, dtype=np.uint8)
    l2 = np.zeros(16, dtype=np.uint8)
    with pytest.raises(ValueError, match="scheme bits"):
        block_dot(wc, 0x78, l2, None, wc, 0x78, l2, ub=8, act_l2="sig1", act_l2_bits=2)
    with pytest.raises(ValueError, match="activation L2 codes must lie in 0 .. 1"):
        block_dot(wc, 0x78, l2, 0, wc, 0x78, l2 + 2, ub=8, act_l2="pot", act_l2_bits=1)
    with pytest.raises(ValueError, match="L2 codes are required"):
        block_dot(wc, 0x78, l2, 0, wc, 0x78, None, ub=8, act_l2="pot", act_l2_bits=1)
    with pytest.raises(ValueError, match="unknown L2 scheme 'sig-2'"):
        block_dot(wc, 0x78, l2, 0, wc, 0x78, l2, ub=8, act_l2="sig-2", act_l2_bits=1)
