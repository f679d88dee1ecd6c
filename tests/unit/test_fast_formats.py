"""The numba paths equal the numpy references bit for bit, on every input class."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from vectors import fraction_oracle as orc

from coaccel.models.fast import formats as fast
from coaccel.models.formats import ELEMENT_FORMATS, decode_scale, encode, quantize, resolve

MODES = ("rne", "half_away", "half_up")
SCALES = (1.0, 2.0**-30, 3.0, 5.0 / 4096, 0.3125, float(Fraction(round(2**44 / 3), 2**44)))


def _element_inputs(name: str, rng: np.random.Generator) -> np.ndarray:
    """Every representable value, every midpoint (tie), their float64 neighbours, values past
    the maximum, zeros and -0, tiny values, random data at many scales (in units of x/scale)."""
    pts = [p[0] for p in orc._nonneg_points(name)]
    if name in orc.INT_ELEMENTS:
        pts = [Fraction(i) for i in range(int(pts[-1]) + 3)]
    mids = [(a + b) / 2 for a, b in zip(pts[:-1], pts[1:], strict=True)]
    exact = np.array([float(v) for v in pts + mids] + [float(pts[-1]) * 1.5, float(pts[-1]) * 9])
    near = np.concatenate([exact, np.nextafter(exact, np.inf), np.nextafter(exact, -np.inf)])
    rand = np.concatenate([
        rng.standard_normal(300) * 2.0 ** rng.integers(-12, 8, 300),
        rng.laplace(size=200),
        rng.standard_t(2, size=200) * float(pts[-1]) / 4,
    ])  # fmt: skip
    special = np.array([0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e300, -1e300])
    v = np.concatenate([near, rand, special])
    return np.concatenate([v, -v])


@pytest.mark.parametrize("name", list(ELEMENT_FORMATS))
@pytest.mark.parametrize("mode", MODES)
def test_element_encoder_equals_the_reference(name, mode):
    rng = np.random.default_rng(len(name) * 7 + len(mode))
    fmt = ELEMENT_FORMATS[name]
    base = _element_inputs(name, rng)
    for s in SCALES:
        x = base * s
        for saturate in (True, False):
            try:
                want = encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
            except ValueError as e:
                with pytest.raises(ValueError) as got:
                    fast.encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
                assert str(got.value) == str(e)
                x = x[np.abs(x) <= fmt.max_value * s]  # in range: must then agree
                want = encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
            got = fast.encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
            assert got.dtype == np.uint8 and np.array_equal(got, want), (s, saturate)
    # One value per call too (array sizes must not leak into the kernel's arithmetic).
    for v in base[::17]:
        assert fast.encode([v], fmt, rounding=mode) == encode([v], fmt, rounding=mode), v


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_element_encoder_specials_and_per_element_scales(name):
    fmt = ELEMENT_FORMATS[name]
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e6, -1e6, 3.0, -0.0])
    for saturate in (True, False):
        want = encode(x, fmt, saturate=saturate)
        assert np.array_equal(fast.encode(x, fmt, saturate=saturate), want)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 9))
    s = 2.0 ** rng.integers(-10, 10, (7, 1)) * 3
    for mode in MODES:
        assert np.array_equal(fast.encode(x, fmt, rounding=mode, scale=s),
                              encode(x, fmt, rounding=mode, scale=s))  # fmt: skip


def test_element_encoder_errors_match():
    for call in (
        lambda f: f([np.nan], "e2m1"),
        lambda f: f([1.0], "e2m1", scale=0.1),
        lambda f: f([1.0], "e2m1", rounding="up"),
        lambda f: f([100.0], "int8", saturate=False, scale=0.5),
    ):
        with pytest.raises(ValueError) as a:
            call(encode)
        with pytest.raises(ValueError) as b:
            call(fast.encode)
        assert str(a.value) == str(b.value)


ALL_CASES = [(f, {}) for f in orc.MX] + [
    ("mxfp4", {"variant": "hbq_repo"}),
    ("mxint8", {"variant": "hbq_repo"}),
    ("mxfp8_e4m3", {"block": 16}),
    ("nvfp4", {}),
    ("nvfp4", {"scale_rounding": "ceil"}),
    ("nvfp4", {"tensor_scale": False}),
    ("nvfp4_e5m3", {}),
    ("nvfp4_e5m3", {"scale_rounding": "ceil"}),
    ("bfp", {}),
    ("bfp", {"bits": 3, "block": 8}),
    ("int", {}),
    ("int", {"bits": 8, "scale_format": "e5m3"}),
    ("int", {"bits": 5, "scale_format": "ue4m3"}),
    ("int", {"bits": 4, "scale_format": "e8m0"}),
]


def _block_inputs(rng: np.random.Generator, block: int) -> np.ndarray:
    rows = []
    for scale in (2.0**-130, 2.0**-60, 1e-6, 1.0, 3.0, 1e4, 2.0**100):
        rows.append(rng.standard_normal(4 * block) * scale)
        rows.append(rng.laplace(size=4 * block) * scale)
        rows.append(rng.standard_t(2, size=4 * block) * scale)
    z = np.zeros(4 * block)
    z[block : 2 * block] = -0.0
    z[2 * block + 3] = 1e-40  # float32 subnormal spike
    rows.append(z)
    ties = rng.choice([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 0.5, 127.5], 4 * block)
    rows.append(ties * rng.choice([-1.0, 1.0], 4 * block) * 2.0**-3)
    return np.stack(rows).astype(np.float32)


def _assert_same(x, fmt, opt, **kw):
    for mode in MODES:
        a = quantize(x, fmt, rounding=mode, backend="numpy", **opt, **kw)
        b = quantize(x, fmt, rounding=mode, backend="numba", **opt, **kw)
        assert np.array_equal(a.codes, b.codes), mode
        assert np.array_equal(a.scales, b.scales) and a.scales.dtype == b.scales.dtype, mode
        assert (a.tensor_scale is None) == (b.tensor_scale is None)
        if a.tensor_scale is not None:
            assert a.tensor_scale == b.tensor_scale
        da, db = a.dequantize(np.float64), b.dequantize(np.float64)
        assert np.array_equal(da, db, equal_nan=True), mode


@pytest.mark.parametrize(("fmt", "opt"), ALL_CASES, ids=[f"{f}-{o}" for f, o in ALL_CASES])
def test_block_quantizer_equals_the_reference(fmt, opt):
    rng = np.random.default_rng(sum(map(ord, fmt + repr(opt))))
    spec = resolve(fmt, **opt)
    x = _block_inputs(rng, spec.block)
    if fmt == "nvfp4":  # one tensor scale per call: quantize each row on its own as well
        for row in x:
            _assert_same(row, fmt, opt)
    _assert_same(x, fmt, opt)


@pytest.mark.parametrize(("fmt", "opt"), [("nvfp4", {}), ("int", {}), ("nvfp4_e5m3", {})])
def test_ties_at_non_power_of_two_scales(fmt, opt):
    """Element ties at the block's own (non power of two) scale S: every element but the block
    maximum becomes (midpoint) * S exactly, so amax and hence S are unchanged."""
    rng = np.random.default_rng(5)
    spec = resolve(fmt, **opt)
    x = (rng.standard_normal((16, 4 * spec.block)) * 3.7).astype(np.float32)
    q = quantize(x, fmt, backend="numpy", **opt)
    s_t = 1.0 if q.tensor_scale is None else float(q.tensor_scale)
    s_block = decode_scale(q.scales, spec.scale_fmt) * s_t  # S of each block, exact
    mags = np.unique(np.abs(spec.elem.values()))
    mids = (mags[:-1] + mags[1:]) / 2
    mids = mids[mids < mags[-1] * 0.8]  # stay below every block's amax / S
    xb = x.reshape(s_block.shape + (spec.block,)).astype(np.float64)
    amax_pos = np.argmax(np.abs(xb), axis=-1)[..., None]
    keep = np.take_along_axis(xb, amax_pos, -1)
    ties = rng.choice(mids, xb.shape) * rng.choice([-1.0, 1.0], xb.shape) * s_block[..., None]
    np.put_along_axis(ties, amax_pos, keep, -1)
    x2 = ties.reshape(x.shape)
    q2 = quantize(x2, fmt, backend="numpy", **opt)
    assert np.array_equal(q2.scales, q.scales)  # same S, so these are real ties
    assert q2.tensor_scale == q.tensor_scale
    frac, _ = np.frexp(s_block)
    assert np.mean(frac != 0.5) > 0.75  # most scales are not powers of two
    r = [Fraction(float(v)) / Fraction(float(s_block[0, 0])) for v in ties[0, 0, :8]]
    assert sum(abs(v) in {Fraction(float(m)) for m in mids} for v in r) >= 7
    _assert_same(x2, fmt, opt)


def test_dequantize_kernel_equals_numpy():
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 256, (50, 32)).astype(np.uint8)
    table = ELEMENT_FORMATS["e4m3"].values()
    scale = 2.0 ** rng.integers(-20, 20, 50) * 3
    want = table[codes] * scale[:, None]
    out = np.empty(codes.shape)
    fast.dequant_kernel(codes, table, scale, codes.shape[1], out)
    assert np.array_equal(out, want, equal_nan=True)
