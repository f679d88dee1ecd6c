"""HBQ quantizer (specs/hbq.md §1): the numpy reference against independent oracles.

Expected values come from (a) a pure-Fraction oracle written from the spec tables that
enumerates every candidate (element magnitude, E5M3 code, L2 code, scheme), (b) a literal
scalar transcription of the HBQ repository's FP16 code for ``rounding="repo_compat"``, and
(c) hand-worked examples whose arithmetic is written out next to them.
"""

from __future__ import annotations

import warnings
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction as F

import numpy as np
import pytest
from testkit import quantize_asserting_range_warning

from coaccel.models.formats import (
    E2M1,
    E2M2,
    E5M3,
    HBQSpec,
    QuantizedTensor,
    _hbq,
    encode_scale,
    format_names,
    hbq_spec,
    quantize,
    resolve,
)

# ---------------------------------------------------------------------------------------------
# Oracle 1: exact real arithmetic with Fractions, written from the spec's tables (§1.2-§1.4, §1.6)

E2M1_MAGS = [F(0), F(1, 2), F(1), F(3, 2), F(2), F(3), F(4), F(6)]
E2M2_MAGS = [
    F(0),
    F(1, 4),
    F(1, 2),
    F(3, 4),
    F(1),
    F(5, 4),
    F(3, 2),
    F(7, 4),
    F(2),
    F(5, 2),
    F(3),
    F(7, 2),
    F(4),
    F(5),
    F(6),
    F(7),
]
E5M3_VALUE = {
    (e << 3) | m: F(2) ** (e - 15) * (1 + F(m, 8)) for e in range(1, 31) for m in range(8)
}


def sig_table(name: str, bits: int) -> list[F]:
    """§1.4: PoT 2**c, INT c+1, SIG_k 1 + c/2**k; 'none' is the single multiplier 1."""
    n = 1 << bits
    if name == "pot":
        return [F(2) ** c for c in range(n)]
    if name == "int":
        return [F(c + 1) for c in range(n)]
    if name == "none":
        return [F(1)]
    k = int(name[3:])
    return [1 + F(c, 2**k) for c in range(n)]


def nearest_index(a: F, grid: list[F], mode: str) -> int:
    """Index of the grid point nearest to ``a``; a tie goes up (half_away) or to the even index."""
    dist = [abs(a - g) for g in grid]
    best = min(dist)
    idx = [i for i, d in enumerate(dist) if d == best]
    if len(idx) == 1:
        return idx[0]
    return max(idx) if mode == "half_away" else next(i for i in idx if i % 2 == 0)


def oracle_scale_code(amax: F, div: F, mode: str) -> int:
    raw = amax / div
    codes = sorted(E5M3_VALUE)
    if mode == "ceil":
        return next((c for c in codes if E5M3_VALUE[c] >= raw), codes[-1])
    dist = [abs(raw - E5M3_VALUE[c]) for c in codes]
    best = min(dist)
    return max(c for c, d in zip(codes, dist, strict=True) if d == best)  # tie: the larger


def oracle_block(
    xs, role, l2, bits, ub, rounding="half_away", scale_rounding="half_up", select="mse"
):
    """(element codes, scale code, l2 codes, scheme bit) of one L1 block."""
    mags = E2M2_MAGS if role == "activation" else E2M1_MAGS
    sign = 16 if role == "activation" else 8
    tables = (
        [sig_table("sig2", bits), sig_table("sig3", bits)] if l2 == "mix" else [sig_table(l2, bits)]
    )
    if l2 == "none":
        ub = len(xs)
    x = [F(float(v)) for v in xs]
    amax = max(abs(v) for v in x)
    results = []
    for tab in tables:
        sc = oracle_scale_code(amax, mags[-1] * max(tab), scale_rounding)
        s1 = E5M3_VALUE[sc]
        l2c, codes, err = [], [], F(0)
        for j in range(0, len(x), ub):
            seg = x[j : j + ub]
            cands = []
            for c, sig in enumerate(tab):
                m = s1 * sig
                ks = [nearest_index(abs(v) / m, mags, rounding) for v in seg]
                sse = sum((abs(v) - mags[k] * m) ** 2 for v, k in zip(seg, ks, strict=True))
                cc = [k | sign if (v < 0 and k) else k for v, k in zip(seg, ks, strict=True)]
                cands.append((sse, c, cc))
            if select == "threshold":
                pick = cands[1 if max(abs(v) for v in seg) >= F(15, 2) * s1 else 0]
            else:
                pick = cands[0]
                for cand in cands[1:]:
                    if cand[0] < pick[0]:
                        pick = cand
            l2c.append(pick[1])
            codes += pick[2]
            err += pick[0]
        results.append((err, sc, l2c, codes))
    t = 1 if len(results) == 2 and results[1][0] < results[0][0] else 0
    return results[t][3], results[t][1], results[t][2], t


def oracle_values(codes, sc, l2c, t, role, l2, bits, ub) -> list[F]:
    """Exact dequantised values elem x SIG x S1 of an oracle result."""
    mags = E2M2_MAGS if role == "activation" else E2M1_MAGS
    sign = 16 if role == "activation" else 8
    tab = sig_table(("sig3" if t else "sig2") if l2 == "mix" else l2, bits)
    out = []
    for i, c in enumerate(codes):
        sig = tab[0] if l2 == "none" else tab[l2c[i // ub]]
        v = mags[c & (sign - 1)] * sig * E5M3_VALUE[sc]
        out.append(-v if c & sign else v)
    return out


def assert_matches_oracle(
    q: QuantizedTensor,
    x2: np.ndarray,
    role,
    l2,
    bits,
    ub,
    rounding,
    scale_rounding="half_up",
    select="mse",
) -> None:
    """Every block of ``q`` (blocks along the last axis of 2-D ``x2``) equals the oracle."""
    deq = q.dequantize_blocks()
    for r in range(x2.shape[0]):
        for b in range(q.codes.shape[1]):
            L = q.codes.shape[-1]
            xs = x2[r, b * L : (b + 1) * L]
            codes, sc, l2c, t = oracle_block(
                xs, role, l2, bits, ub, rounding, scale_rounding, select
            )
            assert q.codes[r, b].tolist() == codes, (r, b, xs)
            assert int(q.scales[r, b]) == sc, (r, b, xs)
            if l2 == "none":
                assert q.l2_codes is None
            else:
                assert q.l2_codes[r, b].tolist() == l2c, (r, b, xs)
            if l2 == "mix":
                assert int(q.scheme[r, b]) == t, (r, b, xs)
            else:
                assert q.scheme is None
            want = oracle_values(codes, sc, l2c, t, role, l2, bits, ub)
            assert [F(float(v)) for v in deq[r, b]] == want


def random_blocks(rng: np.random.Generator, n: int, L: int, dtype) -> np.ndarray:
    """Blocks of several kinds: Gaussian, wide-range Laplace, dyadic grids (exact ties),
    one outlier among small values, quarter steps (ties at E2M1 midpoints). All finite in
    ``dtype`` (the Laplace range shrinks for float16)."""
    lo, hi = (-4, 3) if dtype == np.float16 else (-6, 6)
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            v = rng.standard_normal(L)
        elif kind == 1:
            v = rng.laplace(size=L) * 10.0 ** rng.integers(lo, hi)
        elif kind == 2:
            v = rng.integers(-64, 65, L) / 16.0 * 2.0 ** int(rng.integers(-3, 3))
        elif kind == 3:
            v = rng.standard_normal(L) * 0.01
            v[rng.integers(L)] = 30.0
        else:
            v = rng.integers(-8, 9, L) / 4.0
        out.append(v)
    out = np.array(out).astype(dtype)
    if not np.isfinite(out).all():
        raise AssertionError("random_blocks produced a non-finite value")
    return out


ORACLE_CONFIGS = [
    # role, l2, l2_bits, ub, l2_select
    ("weight", "mix", 2, 4, "mse"),
    ("weight", "mix", 1, 8, "mse"),
    ("weight", "sig2", 2, 4, "mse"),
    ("weight", "pot", 2, 8, "mse"),
    ("weight", "none", 0, 4, "mse"),
    ("activation", "sig1", 2, 4, "mse"),
    ("activation", "sig1", 1, 8, "mse"),
    ("activation", "int", 2, 4, "mse"),
    ("activation", "pot", 1, 8, "threshold"),
    ("activation", "int", 1, 4, "threshold"),
    ("activation", "sig4", 2, 2, "mse"),
    ("kv", "sig1", 2, 4, "mse"),
    ("kv", "sig3", 1, 16, "mse"),
]


# ---------------------------------------------------------------------------------------------
# Presets, attributes, options


def test_registered_presets():
    names = format_names()
    assert "hbq-a" in names and "hbq-e" in names
    a = resolve("hbq-a")
    assert isinstance(a, HBQSpec)
    assert (a.name, a.role, a.elem, a.block, a.ub, a.l2, a.l2_bits, a.l2_select) == (
        "hbq-a",
        "weight",
        E2M1,
        128,
        8,
        "mix",
        2,
        "mse",
    )
    assert (a.element_bits, a.scale_bits, a.default_rounding) == (4, 8, "half_away")
    assert a.rounding_modes == ("half_away", "rne", "repo_compat")
    e = resolve("hbq-e", role="activation")
    assert (e.elem, e.element_bits, e.ub, e.l2, e.l2_bits) == (E2M2, 5, 32, "sig1", 2)
    kv = resolve("hbq-e", role="kv")
    assert (kv.elem, kv.element_bits, kv.l2, kv.l2_bits, kv.ub) == (E2M1, 4, "sig1", 2, 32)


def test_asic_variant_defaults_and_overrides():
    act = hbq_spec("hbq-a", role="activation", variant="asic")
    assert (act.ub, act.l2, act.l2_bits, act.l2_select, act.variant) == (
        32,
        "pot",
        1,
        "mse",
        "asic",
    )
    w = hbq_spec("hbq-e", variant="asic")
    assert (w.ub, w.l2, w.l2_bits) == (32, "mix", 2)
    kv = hbq_spec("hbq-e", role="kv", variant="asic")
    assert (kv.l2, kv.l2_bits) == ("pot", 1)
    over = hbq_spec("hbq-a", role="activation", variant="asic", l2="int", ub=16)
    assert (over.l2, over.l2_bits, over.ub) == ("int", 1, 16)


def test_repo_aliases_and_canonical_names():
    assert hbq_spec("hbq-a", l2="FP-10").l2 == "sig3"
    assert hbq_spec("hbq-a", l2="fp-1").l2 == "sig2"
    assert hbq_spec("hbq-a", role="activation", l2="SIG-1", l2_bits=1).l2 == "sig1"
    assert hbq_spec("hbq-a", l2="none").l2_bits == 0


def test_sig_values_follow_the_spec_formulas():
    w = hbq_spec("hbq-a")
    assert w.sig_values(0).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert w.sig_values(1).tolist() == [1.0, 1.125, 1.25, 1.375]
    assert hbq_spec("hbq-a", role="activation").sig_values().tolist() == [1.0, 1.5, 2.0, 2.5]
    assert hbq_spec("hbq-a", l2="pot").sig_values().tolist() == [1.0, 2.0, 4.0, 8.0]
    assert hbq_spec("hbq-a", l2="int", l2_bits=1).sig_values().tolist() == [1.0, 2.0]
    assert hbq_spec("hbq-a", l2="sig4").sig_values().tolist() == [1.0, 1.0625, 1.125, 1.1875]
    assert hbq_spec("hbq-a", l2="none").sig_values().tolist() == [1.0]
    for l2 in ("pot", "int", "sig1", "sig2", "sig3", "sig4"):
        for bits in (1, 2):
            got = hbq_spec("hbq-a", role="activation", l2=l2, l2_bits=bits).sig_values()
            assert [F(v) for v in got] == sig_table(l2, bits)
    with pytest.raises(ValueError, match=r"scheme_bit=1; l2='sig1' has only scheme 0"):
        hbq_spec("hbq-a", role="activation").sig_values(1)


@pytest.mark.parametrize(
    "preset, options, with_bit, without_bit",
    [
        # §1.5: element bits + (8 + (B/μB) * l2_bits [+1 Mix bit]) / B.
        ("hbq-a", {}, F(4) + F(8 + 16 * 2 + 1, 128), F(4) + F(8 + 16 * 2, 128)),
        ("hbq-e", {}, F(4) + F(8 + 4 * 2 + 1, 128), F(4) + F(8 + 4 * 2, 128)),
        ("hbq-a", {"role": "activation"}, F(5) + F(40, 128), F(5) + F(40, 128)),
        ("hbq-e", {"role": "activation"}, F(5) + F(16, 128), F(5) + F(16, 128)),
        ("hbq-a", {"role": "kv"}, F(4) + F(40, 128), F(4) + F(40, 128)),
        ("hbq-e", {"role": "activation", "variant": "asic"}, F(5) + F(12, 128), F(5) + F(12, 128)),
        ("hbq-a", {"l2": "none"}, F(4) + F(8, 128), F(4) + F(8, 128)),
    ],
)
def test_bits_per_element(preset, options, with_bit, without_bit):
    spec = hbq_spec(preset, **options)
    assert F(spec.bits_per_element()) == with_bit
    assert F(spec.bits_per_element(scheme_bit=False)) == without_bit


def test_readme_effective_bits_leave_out_the_scheme_bit():
    # README: W/A = 4.31/5.31 (HBQ-A) and 4.13/5.13 (HBQ-E), two decimals rounded half up
    # (4.125 -> 4.13; Python's own formatting would round it to even, 4.12).
    def two_dec(v: float) -> str:
        return str(Decimal(v).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

    assert two_dec(hbq_spec("hbq-a").bits_per_element(scheme_bit=False)) == "4.31"
    assert two_dec(hbq_spec("hbq-e").bits_per_element(scheme_bit=False)) == "4.13"
    assert two_dec(hbq_spec("hbq-a", role="activation").bits_per_element()) == "5.31"
    assert two_dec(hbq_spec("hbq-e", role="activation").bits_per_element()) == "5.13"
    # With the Mix bit counted the weights are 4.32 / 4.13 (4.1328).
    assert two_dec(hbq_spec("hbq-a").bits_per_element()) == "4.32"


BAD = "invalid HBQ configuration: "


@pytest.mark.parametrize(
    "preset, options, message",
    [
        (
            "hbq-a",
            {"role": "bias"},
            BAD + "role='bias'; valid choices: weight, activation, kv",
        ),
        ("hbq-a", {"ub": 48}, BAD + "ub=48 must divide block=128"),
        ("hbq-a", {"block": 0}, BAD + "block=0 must be a positive integer"),
        (
            "hbq-a",
            {"l2": "sig9"},
            BAD + "l2='sig9'; valid schemes: mix, sig1, pot, int, sig2, sig3, "
            "sig4, none (repo names 'fp-1', 'fp-10', 'fp-100', 'sig-1' are accepted)",
        ),
        ("hbq-a", {"l2_bits": 3}, BAD + "l2_bits=3; valid choices: 1, 2"),
        (
            "hbq-a",
            {"l2": "none", "l2_bits": 2},
            BAD + "l2='none' stores no L2 codes, so l2_bits must be 0 (got 2)",
        ),
        (
            "hbq-a",
            {"role": "activation", "l2": "mix"},
            BAD + "l2='mix' is the weight scheme (one SIG_2/SIG_3 selector bit "
            "per L1 block); role='activation' takes one of: sig1, pot, int, sig2, sig3, sig4, none",
        ),
        (
            "hbq-a",
            {"role": "activation", "l2_select": "threshold"},
            BAD + "l2_select='threshold' is the hardware activation rule (E2M2 elements, 1-bit "
            "PoT/INT L2 with multipliers {1, 2}); got role='activation', l2='sig1', l2_bits=2",
        ),
        (
            "hbq-a",
            {"role": "kv", "l2": "pot", "l2_bits": 1, "l2_select": "threshold"},
            BAD + "l2_select='threshold' is the hardware activation rule (E2M2 "
            "elements, 1-bit PoT/INT L2 with multipliers {1, 2}); got role='kv', l2='pot', "
            "l2_bits=1",
        ),
        (
            "hbq-a",
            {"l2_select": "max"},
            BAD + "l2_select='max'; valid choices: mse, threshold",
        ),
        (
            "hbq-a",
            {"variant": "fpga"},
            BAD + "variant='fpga'; valid choices: paper, asic",
        ),
        (
            "hbq-a",
            {"scale_rounding": "rne"},
            BAD + "scale_rounding='rne'; valid choices: half_up, ceil",
        ),
        (
            "hbq-a",
            {"short_axis": "drop"},
            BAD + "short_axis='drop'; valid choices: pad, whole",
        ),
        (
            "hbq-a",
            {"l2": "FP-1", "l2_bits": 1},
            BAD + "repo scheme name 'FP-1' means 1 + c/2**(l2_bits+0) in the HBQ repository "
            "and equals 'sig2' only at l2_bits=2; with l2_bits=1 pass 'sig1' instead",
        ),
        (
            "hbq-e",
            {"role": "activation", "variant": "asic", "l2": "fp-10"},
            BAD + "repo scheme name 'fp-10' means 1 + c/2**(l2_bits+1) in the HBQ repository "
            "and equals 'sig3' only at l2_bits=2; with l2_bits=1 pass 'sig2' instead",
        ),
        ("hbq-x", {}, "unknown HBQ preset 'hbq-x'; valid presets: hbq-a, hbq-e"),
    ],
)
def test_invalid_options_raise_with_clear_messages(preset, options, message):
    with pytest.raises(ValueError) as err:
        hbq_spec(preset, **options)
    assert str(err.value) == message


def test_every_problem_is_reported_at_once():
    with pytest.raises(ValueError) as err:
        hbq_spec("hbq-a", role="bias", ub=48, variant="fpga")
    assert str(err.value) == (
        "invalid HBQ configuration: role='bias'; valid choices: weight, activation, kv; "
        "ub=48 must divide block=128; variant='fpga'; valid choices: paper, asic"
    )


def test_unknown_option_is_a_type_error_listing_valid_options():
    with pytest.raises(TypeError) as err:
        quantize(np.ones(128, np.float32), "hbq-a", micro_block=8)
    assert str(err.value) == (
        "hbq-a: unknown option(s) 'micro_block'; valid options: role, block, ub, l2, l2_bits, "
        "l2_select, variant, scale_rounding, short_axis"
    )


def test_every_valid_option_combination_constructs():
    count = 0
    for role in ("weight", "activation", "kv"):
        for l2 in ("mix", "sig1", "pot", "int", "sig2", "sig3", "sig4", "none"):
            for bits in (0,) if l2 == "none" else (1, 2):
                for sel in ("mse", "threshold"):
                    for ub in (1, 8, 32, 128):
                        ok_mix = l2 != "mix" or role == "weight"
                        ok_thr = sel == "mse" or (
                            role == "activation" and l2 in ("pot", "int") and bits == 1
                        )
                        kw = dict(role=role, l2=l2, l2_bits=bits, l2_select=sel, ub=ub)
                        if ok_mix and ok_thr:
                            spec = hbq_spec("hbq-a", **kw)
                            assert (spec.l2, spec.l2_bits, spec.ub) == (l2, bits, ub)
                            count += 1
                        else:
                            with pytest.raises(ValueError):
                                hbq_spec("hbq-a", **kw)
    # Per ub: 3 roles x (7 schemes x 2 widths + "none") with "mse", minus Mix (2 widths) for
    # activation and kv, plus "threshold" for activation PoT/INT at 1 bit.
    assert count == 4 * (3 * (7 * 2 + 1) - 2 * 2 + 2)


def test_rounding_mode_is_checked():
    with pytest.raises(ValueError) as err:
        quantize(np.ones(128, np.float32), "hbq-a", rounding="half_up")
    assert str(err.value) == (
        "rounding='half_up' is not offered by format 'hbq-a'; valid choices: half_away, rne, "
        "repo_compat"
    )


# ---------------------------------------------------------------------------------------------
# The reference against the Fraction oracle


@pytest.mark.parametrize("role, l2, bits, ub, select", ORACLE_CONFIGS)
@pytest.mark.parametrize("rounding", ["half_away", "rne"])
def test_reference_equals_fraction_oracle(role, l2, bits, ub, select, rounding):
    config = (role, l2, bits, ub, select)
    rng = np.random.default_rng(ORACLE_CONFIGS.index(config) * 2 + (rounding == "rne"))
    x = random_blocks(rng, 15, 16, np.float32)
    for scale_rounding in ("half_up", "ceil"):
        q = quantize_asserting_range_warning(
            x,
            "hbq-a",
            backend="numpy",
            rounding=rounding,
            role=role,
            l2=l2,
            l2_bits=bits,
            ub=ub,
            block=16,
            l2_select=select,
            scale_rounding=scale_rounding,
        )
        assert_matches_oracle(q, x, role, l2, bits, ub, rounding, scale_rounding, select)


@pytest.mark.parametrize("role", ["weight", "activation", "kv"])
def test_reference_equals_oracle_on_full_size_blocks(role):
    rng = np.random.default_rng(11)
    x = random_blocks(rng, 5, 128, np.float16).reshape(1, -1)
    q = quantize(x, "hbq-a", backend="numpy", role=role)
    spec = q.spec
    assert_matches_oracle(q, x, role, spec.l2, spec.l2_bits, spec.ub, "half_away")


def test_float64_inputs_and_extreme_magnitudes_are_exact():
    # Values whose squares leave float64's normal range force the exact integer path.
    x = np.array(
        [
            [1e-300, -3e-200, 2.0**-460, 0.0, 5e-310, 1e-320, -2e-308, 7e-301],
            [1e300, -2.5e299, 3.0, 1e-300, 0.0, 2.0**470, -1.0, 4e299],
            [0.1, 0.2, 0.30000000000000004, -0.7, 1 / 3, 2 / 3, -1e-17, 9.999999999999998],
        ]
    )
    for role in ("weight", "activation"):
        l2 = "mix" if role == "weight" else "sig1"
        q = quantize_asserting_range_warning(x, "hbq-a", backend="numpy", role=role, block=8, ub=4)
        assert_matches_oracle(q, x, role, l2, 2, 4, "half_away")


def test_near_ties_in_the_sse_are_decided_exactly():
    # kv role (E2M1, SIG-1 {1, 1.5, 2, 2.5}); the first micro-block holds 15 = 6 * 2.5, so
    # S1 = E5M3(15 / 15) = 1. In the second micro-block x = 2.75 is an exact SSE tie between
    # code 0 (2.75 -> 3, error 0.25; codes 1, 2 give 3 too) and code 3 (2.75/2.5 = 1.1 -> 1,
    # i.e. 2.5, error 0.25), so code 0 wins. Moving x down by 2**-50 makes code 3 better by a
    # relative 2**-46 of the SSE, inside the float64 margin: the exact path must pick code 3.
    base = np.zeros(16)
    base[0] = 15.0
    for x1, want_l2, want_code in ((2.75, 0, 5), (2.75 - 2.0**-50, 3, 2), (2.75 + 2.0**-50, 0, 5)):
        xb = base.copy()
        xb[8] = x1
        q = quantize(xb[None], "hbq-a", backend="numpy", role="kv", block=16, ub=8)
        assert int(q.scales[0, 0]) == 0x78  # 1.0
        assert q.l2_codes[0, 0].tolist() == [3, want_l2]
        # E2M1 code 5 is 3.0 (with SIG 1); code 2 is 1.0 (with SIG 2.5: 2.5).
        assert int(q.codes[0, 0, 8]) == want_code
        assert_matches_oracle(q, xb[None], "kv", "sig1", 2, 8, "half_away")


def test_exact_sse_sign_helper_beats_float_summation():
    rng = np.random.default_rng(5)
    cases = [
        # float64 sums lose the small terms next to 2**60: both sides round to the same value.
        (np.array([2.0**30, 1.0, 0.0]), np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0, 2.0**-40])),
        (np.array([1e-300, 1e300]), np.array([0.0, 1e300]), np.array([2e-300, 1e300])),
        (np.array([2.75 - 2.0**-50]), np.array([3.0]), np.array([2.5])),
    ]
    for _ in range(200):
        x = rng.standard_normal(6) * 2.0 ** rng.integers(-60, 60, 6)
        a = np.round(x * 4) / 4
        b = np.where(rng.random(6) < 0.5, a, np.round(x * 8) / 8)
        cases.append((x, a, b))
    for x, a, b in cases:
        sa = sum((F(p) - F(q)) ** 2 for p, q in zip(x, a, strict=True))
        sb = sum((F(p) - F(q)) ** 2 for p, q in zip(x, b, strict=True))
        assert _hbq._exact_sse_sign(x, a, b) == (sa > sb) - (sa < sb)


# ---------------------------------------------------------------------------------------------
# Hand-worked examples


def test_e2m1_tie_at_a_quarter_goes_up_half_away_and_to_even_with_rne():
    # kv role, S1 = 1 (15 = 6 * 2.5 in the first micro-block). The second micro-block holds
    # only 0.25. Code 0 (SIG 1): 0.25 is the E2M1 midpoint of 0 and 0.5 -> 0.5 (half away),
    # error 0.25; code 1 (SIG 1.5): 0.1667 -> 0, error 0.25; codes 2, 3 also give 0. The SSE tie
    # goes to code 0, so the element is 0.5 = E2M1 code 1. With RNE the tie goes to the even
    # code 0: every code gives 0 and l2 code 0 again.
    xb = np.zeros(16, np.float32)
    xb[0] = 15.0
    xb[8] = 0.25
    xb[9] = -0.25
    qa = quantize(xb, "hbq-a", role="kv", block=16, ub=8, rounding="half_away", backend="numpy")
    assert qa.l2_codes[0].tolist() == [3, 0]
    assert qa.codes[0, 8:10].tolist() == [1, 0b1001]
    qr = quantize(xb, "hbq-a", role="kv", block=16, ub=8, rounding="rne", backend="numpy")
    assert qr.l2_codes[0].tolist() == [3, 0]
    assert qr.codes[0, 8:10].tolist() == [0, 0]  # -0.25 -> +0: the sign of zero is dropped
    assert qr.codes[0, 0] == 0b0111 and qa.codes[0, 0] == 0b0111  # 15 / 2.5 = 6, code 7


@pytest.mark.parametrize("role", ["weight", "activation", "kv"])
def test_all_zero_block(role):
    q = quantize(np.zeros((2, 128), np.float32), "hbq-e", role=role, backend="numpy")
    assert q.scales.tolist() == [[0x08], [0x08]]  # E = 1, M = 0: 2**-14
    assert not q.codes.any() and not q.l2_codes.any()
    assert q.scheme is None or not q.scheme.any()
    assert not q.dequantize(np.float64).any()
    neg = quantize(-np.zeros(128), "hbq-e", role=role, backend="numpy")
    assert not neg.codes.any()


def test_scale_below_raw_saturates_the_largest_element():
    # Activation: divisor 7 * 2.5 = 17.5. amax = 17.5 * 1.0625 * (1 - 2**-20) gives
    # raw = 1.0625 - a little, just below the E5M3 midpoint of 1.0 and 1.125, so half-up
    # keeps S1 = 1.0 < raw. The maximum then needs 18.594 / 2.5 = 7.44 > 7: it saturates to
    # E2M2 7 (code 0b01111) with code 3 (SIG 2.5); code 2 would give 7 * 2 = 14, far worse.
    amax = 17.5 * 1.0625 * (1 - 2.0**-20)
    xb = np.zeros(128)
    xb[5] = amax
    q = quantize(xb, "hbq-a", role="activation", backend="numpy")
    assert int(q.scales[0]) == 0x78
    assert int(q.codes[0, 5]) == 0b01111 and int(q.l2_codes[0, 0]) == 3
    assert q.dequantize(np.float64)[5] == 17.5
    # ceil rounds the scale up to 1.125 instead: 18.594 / (1.125 * 2.5) = 6.61, which rounds
    # (E2M2 steps by 1 in [4, 7]) up to 7 without saturating: 7 * 2.5 * 1.125 = 19.6875 > amax.
    qc = quantize(xb, "hbq-a", role="activation", backend="numpy", scale_rounding="ceil")
    assert int(qc.scales[0]) == 0x79 and int(qc.codes[0, 5]) == 0b01111
    assert int(qc.l2_codes[0, 0]) == 3 and qc.dequantize(np.float64)[5] == 19.6875


def test_e5m3_scale_tie_rounds_half_up():
    # raw = amax / 17.5 exactly on the midpoint 1.0625 of E5M3 1.0 (0x78) and 1.125 (0x79):
    # half-up gives 1.125. raw = 1 + 1/32 is below it: half-up gives 1.0, ceil 1.125.
    for amax, half_up, ceil in ((17.5 * 1.0625, 0x79, 0x79), (17.5 * (1 + 1 / 32), 0x78, 0x79)):
        xb = np.zeros(128)
        xb[0] = amax
        for mode, want in (("half_up", half_up), ("ceil", ceil)):
            q = quantize(xb, "hbq-a", role="activation", scale_rounding=mode, backend="numpy")
            assert int(q.scales[0]) == want


def test_mix_scheme_choice_by_hand():
    # A single nonzero weight 10.5 = 6 * 1.75: scheme 0 (SIG_2, divisor 10.5) gives S1 = 1 and
    # represents it exactly (error 0). Scheme 1 (SIG_3, divisor 8.25): raw 1.2727 -> 1.25, and
    # the best multiplier 1.25 * 1.375 = 1.71875 gives 6 * 1.71875 = 10.3125 (error > 0).
    # So scheme 0, scale 1.0, L2 code 3, element 6 (code 7).
    xb = np.zeros(128)
    xb[3] = 10.5
    q = quantize(xb, "hbq-a", backend="numpy")
    assert (int(q.scheme[0]), int(q.scales[0]), int(q.l2_codes[0, 0]), int(q.codes[0, 3])) == (
        0,
        0x78,
        3,
        7,
    )
    # 8.25 = 6 * 1.375 is exact in scheme 1 (S1 = 1); scheme 0 has raw 0.7857 -> 0.8125 and
    # its best multiplier 0.8125 * 1.75 = 1.421875 gives 8.53 (error > 0): scheme 1 wins.
    xb[3] = 8.25
    q = quantize(xb, "hbq-a", backend="numpy")
    assert (int(q.scheme[0]), int(q.scales[0]), int(q.l2_codes[0, 0]), int(q.codes[0, 3])) == (
        1,
        0x78,
        3,
        7,
    )
    assert q.dequantize(np.float64)[3] == 8.25


def test_threshold_rule_at_the_7p5_boundary():
    # ASIC activation: E2M2, PoT 1-bit {1, 2}, μB 32, divisor 7 * 2 = 14. amax = 14 gives
    # S1 = 1. Micro-block maxima: 14, exactly 7.5, 7.4375, 0.
    xb = np.zeros(128)
    xb[0] = 14.0
    xb[32] = 7.5
    xb[64] = -7.4375
    thr = quantize(
        xb, "hbq-e", role="activation", variant="asic", l2_select="threshold", backend="numpy"
    )
    assert int(thr.scales[0]) == 0x78
    # >= 7.5 takes multiplier 2: 7.5 / 2 = 3.75 is the E2M2 midpoint of 3.5 and 4 -> 4
    # (code 0b01100). 7.4375 < 7.5 keeps multiplier 1 and saturates to 7 (code 0b11111, -).
    assert thr.l2_codes[0].tolist() == [1, 1, 0, 0]
    assert (int(thr.codes[0, 0]), int(thr.codes[0, 32]), int(thr.codes[0, 64])) == (
        0b01111,
        0b01100,
        0b11111,
    )
    # The SSE search sees a tie at 7.5 (7 and 8 are both 0.5 away) and takes the lower code.
    mse = quantize(xb, "hbq-e", role="activation", variant="asic", backend="numpy")
    assert mse.l2_codes[0].tolist() == [1, 0, 0, 0]
    assert int(mse.codes[0, 32]) == 0b01111


# ---------------------------------------------------------------------------------------------
# Idempotence


@pytest.mark.parametrize(
    "options", [{"l2": "none"}, {"role": "activation", "variant": "asic", "l2_select": "threshold"}]
)
@pytest.mark.parametrize("rounding", ["half_away", "rne"])
def test_idempotent_formats(options, rounding):
    # L1 only: the block maximum always becomes Emax * S1 (|x|/S1 >= 6/1.0625 > 5 rounds to 6,
    # larger values saturate to 6), so the re-derived scale is S1 and every x/S1 is on the grid.
    # Threshold: the maximum (|x|/S1 >= 13.1 >= 7.5) takes multiplier 2 and becomes 14 * S1;
    # a micro-block >= 7.5 S1 dequantises to >= 8 S1, one below stays <= 7 S1.
    rng = np.random.default_rng(21)
    x = random_blocks(rng, 40, 128, np.float32)
    q = quantize_asserting_range_warning(x, "hbq-a", rounding=rounding, backend="numpy", **options)
    q2 = quantize(q.dequantize(np.float64), "hbq-a", rounding=rounding, backend="numpy", **options)
    for f in ("codes", "scales", "l2_codes", "scheme"):
        a, b = getattr(q, f), getattr(q2, f)
        assert (a is None and b is None) or np.array_equal(a, b)


@pytest.mark.parametrize("role", ["weight", "activation", "kv"])
def test_requantization_reproduces_codes_when_the_scales_are_unchanged(role):
    # A chosen L2 code c is not representable by any lower code (a lower code would have
    # matched or beaten it), so at an unchanged S1 and scheme the dequantised block has error 0
    # exactly at (scheme, c). The scales can change because amax shrinks when the largest
    # micro-block did not pick the top multiplier: then nothing is claimed.
    rng = np.random.default_rng(22)
    x = random_blocks(rng, 120, 128, np.float32) * np.exp(rng.standard_normal((120, 1)))
    x = x.astype(np.float32)
    for rounding in ("half_away", "rne"):
        q = quantize_asserting_range_warning(
            x, "hbq-a", role=role, rounding=rounding, backend="numpy"
        )
        y = q.dequantize(np.float64)
        q2 = quantize(y, "hbq-a", role=role, rounding=rounding, backend="numpy")
        same = np.ones(x.shape[0], dtype=bool)
        for d in q.spec.scale_divisors():
            s_before = encode_scale(np.abs(x).max(-1), E5M3, rounding="half_up", divisor=d)
            s_after = encode_scale(np.abs(y).max(-1), E5M3, rounding="half_up", divisor=d)
            same &= s_before == s_after
        assert same.sum() >= 10
        for f in ("codes", "scales", "l2_codes", "scheme"):
            a, b = getattr(q, f), getattr(q2, f)
            if a is None:
                assert b is None
            else:
                assert np.array_equal(a[same], b[same])
        assert q.l2_codes[same].any()


def test_requantization_can_change_codes():
    # Weights, B = 4, μB = 2, x = [4.5, -5, 4.25, 4.25], amax 5. Scheme 1 (SIG_3): raw
    # 5/8.25 = 0.606 -> S1 = 0.625. μB 0 picks 1.25 (mult 0.78125: 4.5 -> 6 -> 4.6875,
    # 5 -> 6.4 -> 6 -> 4.6875; SSE 0.1328), not 1.375 (5.156, SSE 0.455); μB 1 picks 1.125
    # (4.25 -> 4.21875, SSE 0.00195); E1 = 0.1348. Scheme 0: S1 = 5/10.5 = 0.476 -> 0.46875,
    # best E0 = 0.184 + 0.00195 > E1. Result: codes [6, -6, 6, 6], S1 0.625, l2 [2, 1], scheme 1.
    # Dequantised amax is 4.6875 < 5: raw 4.6875/8.25 = 0.568 -> S1 = 0.5625, and then μB 0
    # takes 1.375 (6 * 0.7734 = 4.64) and μB 1 takes 1.25 (4.21875 exactly): l2 [3, 2].
    x = np.array([4.5, -5.0, 4.25, 4.25], dtype=np.float32)
    q = quantize(x, "hbq-a", block=4, ub=2, backend="numpy")
    assert (q.codes[0].tolist(), int(q.scales[0]), q.l2_codes[0].tolist(), int(q.scheme[0])) == (
        [7, 15, 7, 7],
        (14 << 3) | 2,
        [2, 1],
        1,
    )
    y = q.dequantize(np.float64)
    assert y.tolist() == [4.6875, -4.6875, 4.21875, 4.21875]
    q2 = quantize(y, "hbq-a", block=4, ub=2, backend="numpy")
    assert (q2.codes[0].tolist(), int(q2.scales[0]), q2.l2_codes[0].tolist()) == (
        [7, 15, 7, 7],
        (14 << 3) | 1,
        [3, 2],
    )
    assert oracle_block(y, "weight", "mix", 2, 2) == ([7, 15, 7, 7], (14 << 3) | 1, [3, 2], 1)


# ---------------------------------------------------------------------------------------------
# Non-finite input, ragged axes, shapes


def test_nan_raises_even_with_propagate():
    x = np.ones(128, np.float32)
    x[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        quantize(x, "hbq-a")
    with pytest.raises(ValueError) as err:
        quantize(x, "hbq-a", nonfinite="propagate")
    assert str(err.value) == "HBQ has no NaN code; NaN input cannot be quantized"


@pytest.mark.parametrize("nonfinite", ["saturate", "propagate"])
def test_inf_saturates_with_scales_from_the_finite_values(nonfinite):
    x = np.linspace(-3, 3, 128).astype(np.float32)
    x[10], x[100] = np.inf, -np.inf
    ref = x.copy()
    ref[10] = ref[100] = 0.0
    for role, pos, neg in (("weight", 7, 15), ("activation", 15, 31)):
        q = quantize(x, "hbq-a", role=role, nonfinite=nonfinite, backend="numpy")
        r = quantize(ref, "hbq-a", role=role, backend="numpy")
        assert int(q.codes[0, 10]) == pos and int(q.codes[0, 100]) == neg
        keep = np.ones(128, bool)
        keep[[10, 100]] = False
        assert np.array_equal(q.codes[0, keep], r.codes[0, keep])
        assert np.array_equal(q.scales, r.scales) and np.array_equal(q.l2_codes, r.l2_codes)
    with pytest.raises(ValueError, match="infinite"):
        quantize(x, "hbq-a", nonfinite="raise")


def test_ragged_axis_is_zero_padded_and_restored():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 200)).astype(np.float32)
    q = quantize(x, "hbq-a", backend="numpy")
    assert q.codes.shape == (3, 2, 128) and q.scales.shape == (3, 2)
    assert q.l2_codes.shape == (3, 2, 16) and q.scheme.shape == (3, 2)
    padded = np.concatenate([x, np.zeros((3, 56), np.float32)], axis=1)
    p = quantize(padded, "hbq-a", backend="numpy")
    for f in ("codes", "scales", "l2_codes", "scheme"):
        assert np.array_equal(getattr(q, f), getattr(p, f))
    assert q.dequantize().shape == (3, 200)
    assert np.array_equal(q.dequantize(np.float64), p.dequantize(np.float64)[:, :200])
    # Blocking along axis 0 gives the same codes as the transposed tensor along axis -1.
    qt = quantize(x.T, "hbq-a", axis=0, backend="numpy")
    assert np.array_equal(qt.codes, q.codes) and qt.dequantize().shape == (200, 3)


def test_short_axis_whole_is_one_block_with_the_same_codes():
    spec = hbq_spec("hbq-a", short_axis="whole")
    assert spec.block_for_axis(64) == 64 and spec.block_for_axis(300) == 128
    assert hbq_spec("hbq-a").block_for_axis(64) == 128
    with pytest.raises(ValueError) as err:
        spec.block_for_axis(60)
    assert str(err.value) == (
        "short_axis='whole': axis length 60 is shorter than block=128 and becomes one block, "
        "but ub=8 does not divide it"
    )
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 64))
    whole = spec.quantize_blocks(x[:, None, :], "half_away", "numpy")
    pad = quantize(x, "hbq-a", backend="numpy")
    assert whole["codes"].shape == (5, 1, 64) and whole["l2_codes"].shape == (5, 1, 8)
    assert np.array_equal(whole["codes"], pad.codes[..., :64])
    assert np.array_equal(whole["l2_codes"], pad.l2_codes[..., :8])
    assert np.array_equal(whole["scales"], pad.scales)
    assert np.array_equal(whole["scheme"], pad.scheme)
    qt = QuantizedTensor(spec=spec, shape=(5, 64), axis=1, rounding="half_away", **whole)
    assert np.array_equal(qt.dequantize(np.float64), pad.dequantize(np.float64))
    with pytest.raises(ValueError, match="do not fit"):
        hbq_spec("hbq-a").quantize_blocks(x[:, None, :], "half_away", "numpy")


def test_dtypes_and_shapes():
    x = np.random.default_rng(9).standard_normal((2, 3, 256)).astype(np.float16)
    for role, l2_none in (("weight", False), ("activation", False), ("kv", True)):
        opts = {"l2": "none"} if l2_none else {}
        q = quantize(x, "hbq-e", role=role, **opts)
        assert q.codes.dtype == np.uint8 and q.codes.shape == (2, 3, 2, 128)
        assert q.scales.dtype == np.uint8 and q.scales.shape == (2, 3, 2)
        if l2_none:
            assert q.l2_codes is None
        else:
            assert q.l2_codes.dtype == np.uint8 and q.l2_codes.shape == (2, 3, 2, 4)
        assert (q.scheme is not None) == (role == "weight")
        assert q.bits_per_element() == q.spec.bits_per_element()


def test_dequantize_rejects_inconsistent_fields():
    q = quantize(np.ones(128, np.float32), "hbq-a")
    with pytest.raises(ValueError, match="needs the per-block scheme bits"):
        QuantizedTensor(
            q.spec, q.codes, q.scales, q.shape, q.axis, q.rounding, q.l2_codes
        ).dequantize()
    bad = q.l2_codes.copy()
    bad[0, 0] = 4
    with pytest.raises(ValueError, match="l2 code out of range 0..3"):
        QuantizedTensor(
            q.spec, q.codes, q.scales, q.shape, q.axis, q.rounding, bad, q.scheme
        ).dequantize()


# ---------------------------------------------------------------------------------------------
# repo_compat against a literal transcription of the repository's FP16 arithmetic

_H, _F32 = np.float16, np.float32


def repo_scale(amax16, div, ceil):
    """HBQQuantizer.quant_scale: clip, then the eager FP16 fp_quant(5, 3)."""
    raw = _H(amax16) / _H(div)
    raw = min(max(raw, _H(2.0**-14)), _H(61440.0))
    exp = float(np.floor(np.log2(_H(raw))))  # torch.log2 of a half tensor is half
    exp = min(max(exp, -14.0), 15.0)
    mant = (_H(raw) / _H(2.0**exp) - _H(1.0)) * _H(8.0)
    mant = float(np.ceil(abs(mant))) if ceil else float(np.floor(_H(abs(mant)) + _H(0.5)))
    if mant > 7 and exp != 15:
        exp, mant = exp + 1, 0.0
    mant = min(mant, 7.0)
    val = (mant / 8 + 1) * 2.0**exp
    return next(c for c, v in E5M3_VALUE.items() if v == val), val


def repo_elem(v16, mbit):
    """make_fp_quant(2, mbit) as torch.compile runs it: float32 math, the +0.5004 constant, and
    the float32 sum floored directly (the fused kernel drops the FP16 cast before the floor)."""
    a = _F32(abs(v16))
    if a == 0:
        return 0.0
    thr = 1 - 2.0 ** -(mbit + 1)
    promote = thr <= a < 1
    sub = a < thr
    exp = min(max(float(np.floor(np.log2(a))), 0.0), 2.0)
    if sub:
        mant = a / _F32(2.0**exp) * _F32(2.0**mbit)
    else:
        mant = (a / _F32(2.0**exp) - _F32(1.0)) * _F32(2.0**mbit)
    mant = float(np.floor(_F32(_F32(abs(mant)) + _F32(0.5004))))
    over = mant > 2**mbit - 1 and exp != 2
    mant = min(mant, 2**mbit - 1)
    if over or promote:
        mant = 0.0
    if over:
        exp += 1
    return mant / 2**mbit * 2**exp if sub else (mant / 2**mbit + 1) * 2**exp


def repo_block(xs, role, l2, bits, ub, ceil=False):
    """HBQQuantizer.q on one block of FP16 values: (codes, scale code, l2 codes, scheme)."""
    mbit = 2 if role == "activation" else 1
    mags = E2M2_MAGS if role == "activation" else E2M1_MAGS
    sign = 16 if role == "activation" else 8
    tables = (
        [sig_table("sig2", bits), sig_table("sig3", bits)] if l2 == "mix" else [sig_table(l2, bits)]
    )
    if l2 == "none":
        ub = len(xs)
    x = [_H(v) for v in xs]
    amax = max(abs(v) for v in x)
    res = []
    for tab in tables:
        tab = [float(t) for t in tab]
        sc, s1 = repo_scale(amax, float(mags[-1]) * max(tab), ceil)
        s1 = _H(s1)
        l2c, codes, sqs = [], [], []
        for j in range(0, len(x), ub):
            seg = x[j : j + ub]
            cands = []
            for c, sig in enumerate(tab):
                sig = _H(sig)
                qs = [repo_elem((v / s1) / sig, mbit) for v in seg]
                sq = []
                for v, qv in zip(seg, qs, strict=True):
                    r = abs(v - (_H(qv if v >= 0 else -qv) * sig) * s1)
                    sq.append(r * r)  # FP16 pow(2)
                acc = _F32(0)
                for s in sq:
                    acc = _F32(acc + _F32(s))  # torch sums half tensors in float32
                kk = [mags.index(F(float(qv))) for qv in qs]
                cc = [k | sign if (v < 0 and k) else k for v, k in zip(seg, kk, strict=True)]
                cands.append((_H(acc), c, cc, sq))
            pick = cands[0]
            for cand in cands[1:]:
                if cand[0] < pick[0]:  # torch.min: the first minimum
                    pick = cand
            l2c.append(pick[1])
            codes += pick[2]
            sqs += pick[3]
        acc = _F32(0)
        for s in sqs:
            acc = _F32(acc + _F32(s))
        res.append((_H(acc), sc, l2c, codes))
    t = 1 if len(res) == 2 and res[1][0] < res[0][0] else 0
    return res[t][3], res[t][1], res[t][2], t


REPO_CONFIGS = [
    ("weight", "mix", 2, 4, False),
    ("weight", "mix", 2, 8, True),
    ("activation", "sig1", 2, 4, False),
    ("activation", "pot", 1, 8, True),
    ("activation", "int", 2, 8, False),
    ("kv", "sig1", 2, 4, False),
    ("weight", "none", 0, 16, False),
]


@pytest.mark.parametrize("role, l2, bits, ub, ceil", REPO_CONFIGS)
def test_repo_compat_equals_literal_fp16_transcription(role, l2, bits, ub, ceil):
    rng = np.random.default_rng(100 + REPO_CONFIGS.index((role, l2, bits, ub, ceil)))
    blocks = [random_blocks(rng, 10, 16, np.float16)]
    # Full FP16 range: dequantised values and squared errors overflow to Inf in FP16.
    blocks.append(rng.uniform(-65504, 65504, (3, 16)).astype(np.float16))
    # Quarter steps plus FP16 crumbs: values a few FP16 ulps below element midpoints.
    crumbs = rng.integers(-8, 9, (3, 16)) / 4.0 + 2.0**-12 * rng.integers(-3, 4, (3, 16))
    blocks.append(crumbs.astype(np.float16))
    x = np.concatenate(blocks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # FP16 overflow in the transcription
        q = quantize(
            x,
            "hbq-a",
            rounding="repo_compat",
            backend="numpy",
            role=role,
            l2=l2,
            l2_bits=bits,
            ub=ub,
            block=16,
            scale_rounding="ceil" if ceil else "half_up",
        )
        for b in range(x.shape[0]):
            codes, sc, l2c, t = repo_block(list(x[b]), role, l2, bits, ub, ceil)
            assert q.codes[b, 0].tolist() == codes, (b, x[b])
            assert int(q.scales[b, 0]) == sc, (b, x[b])
            if l2 != "none":
                assert q.l2_codes[b, 0].tolist() == l2c, (b, x[b])
            if l2 == "mix":
                assert int(q.scheme[b, 0]) == t, (b, x[b])


def compiled_elem_values(v: np.ndarray, mbit: int, fp16_sum: bool = False) -> np.ndarray:
    """Independent oracle of the compiled element quantiser, vectorized over FP16 magnitudes.

    It follows the fused kernel's arithmetic step by step in float32: exponent
    ``floor(log2 |v|)`` clipped to [0, 2], mantissa ``|v| / 2**e * 2**m`` (subnormal, below
    ``1 - 2**-(m+1)``) or ``(|v| / 2**e - 1) * 2**m``, then ``floor(float32(|mant| + 0.5004f))``,
    the overflow to the next binade below ``emax``, the promotion to 1.0, and the value. With
    ``fp16_sum=True`` the sum is rounded to FP16 before the floor instead (the eager-style rule),
    to show where the two differ. Returns float64 values (exact).
    """
    a = np.abs(v).astype(np.float32)
    shift = np.float32(2.0**mbit)
    thr = np.float32(1 - 2.0 ** -(mbit + 1))
    sub = (a < thr) & (a != 0)
    promote = (a >= thr) & (a < 1)
    with np.errstate(divide="ignore"):
        e = np.clip(np.floor(np.log2(np.where(a == 0, np.float32(1), a))), 0, 2).astype(np.float32)
    p2 = np.exp2(e).astype(np.float32)
    mant = np.where(sub, a / p2 * shift, (a / p2 - np.float32(1)) * shift).astype(np.float32)
    total = np.abs(mant) + np.float32(0.5004)
    assert total.dtype == np.float32
    if fp16_sum:
        total = total.astype(np.float16)
    m = np.floor(total).astype(np.float64)
    over = (m > shift - 1) & (e != 2)
    m = np.minimum(m, float(shift) - 1)
    m = np.where(over | promote, 0.0, m)
    e = np.where(over, e + 1.0, e).astype(np.float64)
    val = np.where(sub, m / float(shift) * 2.0**e, (m / float(shift) + 1) * 2.0**e)
    return np.where(a == 0, 0.0, val)


def _fp16_magnitudes() -> np.ndarray:
    """Every finite non-negative FP16 value (31744 of them), as float64."""
    h = np.arange(0x7C00, dtype=np.uint16).view(np.float16)
    return h.astype(np.float64)


@pytest.mark.parametrize("mbit, fmt", [(1, E2M1), (2, E2M2)])
def test_repo_compat_element_rounding_equals_the_compiled_kernel_on_every_fp16_magnitude(mbit, fmt):
    from coaccel.models.fast import hbq as fast_hbq

    v = _fp16_magnitudes()
    want = compiled_elem_values(v, mbit)
    mags = fmt.values()
    got_numpy = mags[_hbq._repo_elem_mag(v, mbit)]
    got_numba = mags[np.array([fast_hbq._repo_elem_mag(a, mbit) for a in v])]
    assert np.array_equal(got_numpy, want)
    assert np.array_equal(got_numba, want)
    # Rounding the float32 sum to FP16 before the floor would change exactly one magnitude per
    # format: a value just below the first subnormal midpoint, which FP16 rounds up to 1.0.
    differ = v[compiled_elem_values(v, mbit, fp16_sum=True) != want]
    assert differ.tolist() == [0.25 - 2.0**-12 if mbit == 1 else 0.125 - 2.0**-13]
    assert float(want[v == differ[0]][0]) == 0.0


@pytest.mark.parametrize("role, fmt, mbit", [("weight", E2M1, 1), ("activation", E2M2, 2)])
@pytest.mark.parametrize("k", [0, 5, -3])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_repo_compat_elements_at_power_of_two_scales(role, fmt, mbit, k, backend):
    """Through ``quantize``: L1 only, each block holds ``Emax * 2**k`` so that S1 = 2**k exactly
    and every other element ``v * 2**k`` reaches the element quantiser as the FP16 value ``v``;
    all FP16 magnitudes ``v <= Emax`` whose scaled value is an FP16 number are covered."""
    emax = fmt.max_value
    v = _fp16_magnitudes()
    v = v[v <= emax]
    x = v * 2.0**k
    x = x[x.astype(np.float16).astype(np.float64) == x]
    v = x / 2.0**k
    n_rows = -(-x.size // 127)
    rows = np.zeros((n_rows, 128))
    rows[:, 0] = emax * 2.0**k
    body = np.zeros(n_rows * 127)
    body[: x.size] = x
    rows[:, 1:] = body.reshape(n_rows, 127)
    signs = np.where(np.arange(rows.size).reshape(rows.shape) % 2, -1.0, 1.0)
    q = quantize(
        (rows * signs).astype(np.float16),
        "hbq-a",
        role=role,
        l2="none",
        rounding="repo_compat",
        backend=backend,
    )
    assert np.all(q.scales == (k + 15) << 3)  # S1 = 2**k
    got = q.dequantize_blocks()[:, 0, 1:].reshape(-1)[: x.size]
    want = compiled_elem_values(v, mbit) * 2.0**k
    assert np.array_equal(np.abs(got), want)
    assert np.array_equal(np.signbit(got), (signs[:, 1:].reshape(-1)[: x.size] < 0) & (want != 0))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_repo_compat_paper_default_activation_reproducer(backend):
    # HBQ-A activations (E2M2, SIG-1, μB 8): S1 = E5M3(3.8613 / 17.5) = 0.21875, and with the
    # chosen multiplier 2.5 the second element reaches the element quantiser as the FP16 value
    # FP16(FP16(0.0683 / 0.21875) / 2.5) = 0.125 - 2**-13, just below E2M2's first subnormal
    # midpoint. Its mantissa is 4v = 0.49951; the compiled kernel floors the float32 sum
    # 0.49951 + 0.5004 = 0.99991 to 0, as exact rounding does (an FP16 sum would be 1.0).
    x = np.zeros((1, 128), np.float16)
    x[0, 0] = 3.861328125
    x[0, 1] = 0.06829833984375
    rc = quantize(x, "hbq-a", role="activation", rounding="repo_compat", backend=backend)
    exact = quantize(x, "hbq-a", role="activation", backend=backend)
    assert rc.dequantize()[0, 1] == 0.0
    assert exact.dequantize()[0, 1] == 0.0
    assert rc.dequantize()[0, 0] == exact.dequantize()[0, 0]


def test_repo_compat_ceil_scale_uses_the_fp16_logarithm():
    # L1 only, divisor 6: amax = 95.9375 gives raw = FP16(95.9375 / 6) = 15.9921875, the FP16
    # value just below 16. log2 = 3.9993 rounds to FP16 4.0, so the repo's exponent is 4 and
    # ceil(|(15.992/16 - 1) * 8|) = 1 gives 18.0 (E = 19, M = 1); exact ceil gives 16.0.
    xb = np.zeros(128, np.float16)
    xb[0] = 95.9375
    rc = quantize(xb, "hbq-a", l2="none", scale_rounding="ceil", rounding="repo_compat")
    ex = quantize(xb, "hbq-a", l2="none", scale_rounding="ceil")
    assert int(rc.scales[0]) == (19 << 3) | 1 and int(ex.scales[0]) == 19 << 3
    # Half-up is not affected: mantissa |-0.0039| + 0.5 floors to 0, giving 16 either way.
    rh = quantize(xb, "hbq-a", l2="none", rounding="repo_compat")
    assert int(rh.scales[0]) == 19 << 3


def test_repo_compat_rejects_fp16_overflow_and_threshold():
    with pytest.raises(ValueError) as err:
        quantize(np.full(128, 70000.0, np.float32), "hbq-a", rounding="repo_compat")
    assert str(err.value) == (
        "rounding='repo_compat' emulates FP16 tensors, and 70000.0 overflows FP16 (|x| >= 65520)"
    )
    with pytest.raises(ValueError, match="has no l2_select='threshold' rule"):
        quantize(
            np.ones(128, np.float32),
            "hbq-e",
            role="activation",
            variant="asic",
            l2_select="threshold",
            rounding="repo_compat",
        )
