"""The numba HBQ kernels equal the numpy reference bit for bit (``models/fast/hbq.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from testkit import quantize_asserting_range_warning

from coaccel.models.fast import hbq as fast
from coaccel.models.formats import E2M1, E2M2, _hbq, encode, hbq_spec, quantize

FIELDS = ("codes", "scales", "l2_codes", "scheme")


def input_classes(rng: np.random.Generator, L: int, dtype, spec) -> np.ndarray:
    """Blocks of every input class, as rows of ``L`` values of ``dtype`` (finite unless noted)."""
    fin = np.finfo(dtype)
    top = 6e4 if dtype == np.float16 else 1e9
    d = float(spec.scale_divisors()[0])
    huge = min(61440.0 * d * 0.999, 0.99 * float(fin.max))
    rows = [
        rng.standard_normal((3, L)),  # Gaussian
        rng.laplace(size=(3, L)),  # Laplace
        rng.standard_t(1.5, (3, L)),  # heavy tail
        np.zeros((2, L)),  # all-zero blocks
        -np.zeros((1, L)),  # signed zeros
    ]
    outl = rng.standard_normal((2, L)) * 0.01
    outl[:, 5] = [300.0, -2000.0]  # one outlier among small values: many zero micro-blocks
    rows.append(outl)
    # Exact ties: amax = divisor * 2**e makes S1 = 2**e, and steps of 2**(e-6) put many
    # elements on midpoint * SIG * S1 products and give SSE ties.
    for e in (-3, 0, 4):
        v = rng.integers(-96, 97, (2, L)) * 2.0 ** (e - 6)
        v[:, 0] = d * 2.0**e
        rows.append(v)
    rows.append(rng.integers(-8, 9, (2, L)) / 4.0)  # quarter steps: E2M1 midpoints
    # Tiny: the L1 scale clips at 2**-14 (float16 keeps its subnormals).
    tiny = max(float(fin.smallest_subnormal) * 64, 1e-9)
    rows.append(rng.standard_normal((2, L)) * tiny)
    # Huge: near and above the 61440 clip, saturating everything.
    rows.append(np.clip(rng.standard_normal((2, L)) * top, -top, top))
    rows.append(np.full((1, L), huge))
    # Saturation: raw just below an E5M3 midpoint so S1 < raw and the maximum saturates.
    sat = rng.standard_normal((2, L))
    sat[:, 3] = d * 1.0625 * (1 - 2.0**-9)
    rows.append(sat)
    x = np.concatenate(rows).astype(dtype)
    if not np.isfinite(x).all():
        raise AssertionError("input_classes must stay finite in its dtype")
    if dtype == np.float64:
        # Values whose squares leave the normal range: always decided exactly (deferred).
        ext = rng.standard_normal((2, L)) * 1e-200
        ext[1, ::7] = 1e250
        near = np.zeros((1, L))
        near[0, 0] = d  # S1 = 1
        near[0, 9] = 2.75 - 2.0**-50  # an SSE near-tie for SIG-1 tables (see test_hbq_quant)
        x = np.concatenate([x, ext, near])
    return x


def assert_backends_equal(x, fmt_options, rounding, **quant_kw):
    a = quantize_asserting_range_warning(
        x, "hbq-a", backend="numpy", rounding=rounding, **quant_kw, **fmt_options
    )
    b = quantize(x, "hbq-a", backend="numba", rounding=rounding, **quant_kw, **fmt_options)
    for f in FIELDS:
        fa, fb = getattr(a, f), getattr(b, f)
        if fa is None:
            assert fb is None, f
        else:
            assert fa.dtype == fb.dtype and np.array_equal(fa, fb), (f, fmt_options, rounding)


def all_configs():
    """Every role x scheme x width x selection rule, with ub alternating 8 / 32."""
    out = []
    for role in ("weight", "activation", "kv"):
        for l2 in ("mix", "sig1", "pot", "int", "sig2", "sig3", "sig4", "none"):
            if l2 == "mix" and role != "weight":
                continue
            for bits in (0,) if l2 == "none" else (1, 2):
                sels = ["mse"]
                if role == "activation" and l2 in ("pot", "int") and bits == 1:
                    sels.append("threshold")
                for sel in sels:
                    out.append(dict(role=role, l2=l2, l2_bits=bits, l2_select=sel))
    for i, cfg in enumerate(out):
        cfg["ub"] = (8, 32)[i % 2]
        cfg["scale_rounding"] = ("half_up", "ceil")[(i // 2) % 2]
    return out


CONFIGS = all_configs()
# repo_compat has no threshold rule (it raises; see test_hbq_quant), so that pair is left out.
CASES = [
    pytest.param(
        i,
        cfg,
        rounding,
        id=(
            f"{rounding}-{cfg['role']}-{cfg['l2']}{cfg['l2_bits']}-{cfg['l2_select']}-ub{cfg['ub']}-"
            f"{cfg['scale_rounding']}"
        ),
    )
    for i, cfg in enumerate(CONFIGS)
    for rounding in ("half_away", "rne", "repo_compat")
    if not (rounding == "repo_compat" and cfg["l2_select"] == "threshold")
]


@pytest.mark.parametrize("seed, cfg, rounding", CASES)
def test_numba_equals_numpy_on_every_input_class(seed, cfg, rounding):
    spec = hbq_spec("hbq-a", **cfg)
    rng = np.random.default_rng(seed)
    for dtype in (np.float16, np.float32, np.float64):
        x = input_classes(rng, 128, dtype, spec)
        if rounding == "repo_compat":
            x = np.clip(x, -65504, 65504)  # FP16 emulation: overflowing inputs raise
        assert_backends_equal(x, cfg, rounding)


@pytest.mark.parametrize("rounding", ["half_away", "rne", "repo_compat"])
def test_numba_equals_numpy_with_inf_saturation(rounding):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    x[0, 3], x[1, 200], x[2, 0] = np.inf, -np.inf, np.inf
    for opts in ({}, {"role": "activation"}, {"role": "kv"}):
        assert_backends_equal(x, opts, rounding)


@pytest.mark.slow
@pytest.mark.parametrize("role", ["weight", "activation", "kv"])
def test_numba_equals_numpy_full_product(role):
    rng = np.random.default_rng(99)
    schemes = ("mix", "sig1", "pot", "int", "sig2", "sig3", "sig4", "none")
    for l2, ub, sr, rounding in itertools.product(
        schemes, (1, 4, 8, 32, 128), ("half_up", "ceil"), ("half_away", "rne", "repo_compat")
    ):
        if l2 == "mix" and role != "weight":
            continue
        for bits in (0,) if l2 == "none" else (1, 2):
            sels = ["mse"]
            if role == "activation" and l2 in ("pot", "int") and bits == 1:
                sels.append("threshold")
            for sel in sels:
                if rounding == "repo_compat" and sel == "threshold":
                    continue
                cfg = dict(role=role, l2=l2, l2_bits=bits, ub=ub, l2_select=sel, scale_rounding=sr)
                spec = hbq_spec("hbq-a", **cfg)
                for dtype in (np.float16, np.float32, np.float64):
                    x = input_classes(rng, 128, dtype, spec)
                    if rounding == "repo_compat":
                        x = np.clip(x, -65504, 65504)
                    assert_backends_equal(x, cfg, rounding)


def test_near_ties_are_deferred_and_identical_ties_are_not():
    spec = hbq_spec("hbq-a", role="kv", block=16, ub=8)
    p = _hbq._numba_params(spec)

    def run(x):
        return fast.quantize_exact(
            x,
            p["elem_mids"],
            p["elem_vals"],
            p["sign_bit"],
            False,
            p["tables"],
            p["scale_thr"],
            p["scale_vals"],
            p["ceil"],
            8,
            8,
            False,
            7.5,
            _hbq._sse_tolerance(16),
        )

    x = np.zeros((4, 16))
    x[:, 0] = 15.0  # S1 = 1 (kv divisor 6 * 2.5)
    x[1, 8] = 2.75  # SSE tie between different dequantised values (3 vs 2.5): deferred
    x[2, 8] = 1e-200  # extreme magnitude: deferred
    x[3, 8] = 0.1  # rounds to 0 for every code: identical values, an exact tie kept here
    *_, unresolved = run(x)
    assert unresolved.tolist() == [False, True, True, False]
    # The deferred rows still come out equal to the reference through quantize().
    assert_backends_equal(x, dict(role="kv", block=16, ub=8), "half_away")


def test_elem_index_fast_matches_encode_around_every_threshold():
    # For several multipliers, probe |x| at every scaled midpoint and one float64 ulp on each
    # side: the bucket estimate plus fix-up must land where the exact encoder does.
    for fmt in (E2M1, E2M2):
        mags = E2M1.values()[:8] if fmt is E2M1 else E2M2.values()[:16]
        mids = (mags[:-1] + mags[1:]) / 2
        bucket, q = fast._buckets(mids)
        ycap = (bucket.size - 1) / q
        for mult in (2.0**-14, 0.8125 * 1.375, 1.0, 1.1875 * 3.0, 61440.0 * 2.5):
            thr = mids * mult
            probes = np.concatenate(
                [
                    thr,
                    np.nextafter(thr, 0),
                    np.nextafter(thr, np.inf),
                    [0.0, mags[-1] * mult * 10, 1e300],
                ]
            )
            for rne, mode in ((False, "half_away"), (True, "rne")):
                want = encode(probes, fmt, rounding=mode, scale=mult)
                got = [
                    fast._elem_index_fast(a, 1.0 / mult, thr, bucket, q, ycap, rne) for a in probes
                ]
                slow = [fast._elem_index(a, thr, rne) for a in probes]
                assert got == want.tolist() == slow, (fmt.name, mult, mode)


def test_step_index_and_row_sse_match_indexed_rounding_around_every_threshold():
    # The branch-free search kernel: the step count equals the exact encoder at every scaled
    # midpoint and one ulp on each side (both tie rules), and each micro-block SSE equals the
    # in-order sum of (|x| - grid value)**2 of the indexed lookup, bit for bit.
    rng = np.random.default_rng(7)
    for fmt in (E2M1, E2M2):
        mags = E2M1.values()[:8] if fmt is E2M1 else E2M2.values()[:16]
        mids = (mags[:-1] + mags[1:]) / 2
        mults = (2.0**-14, 0.8125 * 1.375, 1.0, 1.1875 * 3.0, 61440.0 * 2.5)
        for rne, mode in ((False, "half_away"), (True, "rne")):
            tge = np.empty((len(mults), mids.size))
            dval = np.empty((len(mults), mids.size))
            for c, mult in enumerate(mults):
                fast._steps(mids * mult, mags * mult, rne, tge[c], dval[c])
            for c, mult in enumerate(mults):
                thr = mids * mult
                probes = np.concatenate(
                    [
                        thr,
                        np.nextafter(thr, 0),
                        np.nextafter(thr, np.inf),
                        [0.0, mags[-1] * mult * 10, 1e300],
                    ]
                )
                want = encode(probes, fmt, rounding=mode, scale=mult)
                got = [fast._step_index(a, tge[c]) for a in probes]
                assert got == want.tolist(), (fmt.name, mult, mode)
            # Rows mixing threshold hits, their neighbours and random values, for every grid.
            ub = 8
            for mult in mults:
                thr = mids * mult
                pool = np.concatenate([thr, np.nextafter(thr, 0), np.nextafter(thr, np.inf)])
                absr = np.concatenate(
                    [rng.choice(pool, 48), np.abs(rng.standard_normal(16)) * mult * 3]
                )
                rng.shuffle(absr)
                sse = np.empty((len(mults), absr.size // ub))
                fast._row_sse_all(absr, ub, tge, dval, np.empty(absr.size), sse)
                for cc, m2 in enumerate(mults):
                    idx = [fast._elem_index(a, mids * m2, rne) for a in absr]
                    d = absr - mags[idx] * m2
                    for j in range(absr.size // ub):
                        acc = 0.0
                        for v in d[j * ub : (j + 1) * ub]:
                            acc += float(v) * float(v)
                        assert sse[cc, j] == acc, (fmt.name, m2, mode, j)


# ---------------------------------------------------------------------------------------------
# FP16 helpers of repo_compat, over every FP16 value


def _all_fp16() -> np.ndarray:
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    return h[np.isfinite(h)].astype(np.float64)


def test_f16_round_equals_numpy_float16_casts():
    v = _all_fp16()
    pos = np.unique(np.abs(v))
    mids = (pos[:-1] + pos[1:]) / 2  # ties: must go to the even neighbour
    rng = np.random.default_rng(4)
    probes = np.concatenate(
        [
            v,
            mids,
            -mids,
            np.nextafter(mids, 0),
            np.nextafter(mids, np.inf),
            [65504.0, 65519.99, 65520.0, 70000.0, -65520.0, 2.0**-25, 2.0**-25 * 1.0000001, 1e-30],
            rng.standard_normal(5000) * 10.0 ** rng.integers(-9, 6, 5000),
        ]
    )
    with np.errstate(over="ignore"):
        want = probes.astype(np.float16).astype(np.float64)  # overflow to Inf is expected
    got = np.array([fast.f16_round(a) for a in probes])
    assert np.array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("mbits", [1, 2])
def test_repo_element_quantiser_numba_equals_numpy_on_every_fp16_value(mbits):
    v = _all_fp16()
    want = _hbq._repo_elem_mag(v, mbits)
    got = np.array([fast._repo_elem_mag(a, mbits) for a in v])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("ceil", [False, True])
def test_repo_scale_numba_equals_numpy_on_every_fp16_value(ceil):
    v = _all_fp16()
    v = v[v > 0]
    want = _hbq._repo_scale_codes(v.astype(np.float16), ceil)
    got = np.array([fast._repo_scale_code(a, ceil) for a in v])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("preset", ["hbq-a", "hbq-e"])
@pytest.mark.parametrize("role", ["weight", "activation", "kv"])
def test_fused_dequantization_equals_the_reference(preset, role):
    """``dequantize()`` of a numba-quantized tensor runs the fused kernel; it must equal the
    reference's exact float64 values cast once, for every output dtype, ragged axis and axis."""
    rng = np.random.default_rng(len(preset) + len(role))
    x = (rng.standard_t(3, (6, 300)) * 2.0 ** rng.integers(-20, 20, (6, 1))).astype(np.float32)
    for axis in (-1, 0):
        xa = x if axis == -1 else x.T.copy()
        a = quantize_asserting_range_warning(xa, preset, role=role, backend="numpy", axis=axis)
        b = quantize(xa, preset, role=role, backend="numba", axis=axis)
        assert np.array_equal(a.codes, b.codes) and b.extra["backend"] == "numba"
        for dtype in (np.float32, np.float64, np.float16):
            with np.errstate(over="ignore"):  # float16 output: large values become Inf
                da, db = a.dequantize(dtype), b.dequantize(dtype)
            assert da.dtype == db.dtype and da.shape == db.shape == xa.shape
            assert np.array_equal(da, db)
