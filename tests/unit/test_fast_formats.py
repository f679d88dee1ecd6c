"""The numba paths equal the numpy references bit for bit, on every input class."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from testkit import quantize_asserting_range_warning
from vectors import fraction_oracle as orc

from coaccel.models.fast import formats as fast
from coaccel.models.formats import ELEMENT_FORMATS, decode_scale, encode, quantize, resolve


def _numba_encode(*args, **kwargs):
    """The numba path of :func:`encode` (its kernels live in ``coaccel.models.fast``)."""
    return encode(*args, backend="numba", **kwargs)


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
                    _numba_encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
                assert str(got.value) == str(e)
                x = x[np.abs(x) <= fmt.max_value * s]  # in range: must then agree
                want = encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
            got = _numba_encode(x, fmt, rounding=mode, scale=s, saturate=saturate)
            assert got.dtype == np.uint8 and np.array_equal(got, want), (s, saturate)
    # One value per call too (array sizes must not leak into the kernel's arithmetic).
    for v in base[::17]:
        assert _numba_encode([v], fmt, rounding=mode) == encode([v], fmt, rounding=mode), v


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_element_encoder_specials_and_per_element_scales(name):
    fmt = ELEMENT_FORMATS[name]
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e6, -1e6, 3.0, -0.0])
    for saturate in (True, False):
        want = encode(x, fmt, saturate=saturate)
        assert np.array_equal(_numba_encode(x, fmt, saturate=saturate), want)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 9))
    s = 2.0 ** rng.integers(-10, 10, (7, 1)) * 3
    for mode in MODES:
        assert np.array_equal(_numba_encode(x, fmt, rounding=mode, scale=s),
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
            call(_numba_encode)
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
        a = quantize_asserting_range_warning(x, fmt, rounding=mode, backend="numpy", **opt, **kw)
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
    # float32 input: most ties are not float32 values, so the kernel's thresholds (float32
    # bit patterns) fall between two inputs; the nearest float32 values and their neighbours
    # must still round as in the reference. The block maxima stay as they are (same scales).
    keep = np.zeros(xb.shape, bool)
    np.put_along_axis(keep, amax_pos, True, -1)
    keep = keep.reshape(x.shape)
    t32 = x2.astype(np.float32)
    for step in (0, np.inf, -np.inf):
        v = t32 if step == 0 else np.where(keep, t32, np.nextafter(t32, np.float32(step)))
        _assert_same(v, fmt, opt)


def test_dequantize_kernel_equals_numpy():
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 256, (50, 32)).astype(np.uint8)
    table = ELEMENT_FORMATS["e4m3"].values()
    scale = 2.0 ** rng.integers(-20, 20, 50) * 3
    want = table[codes] * scale[:, None]
    out = np.empty(codes.shape)
    fast.dequant_kernel(codes, table, scale, codes.shape[1], out)
    assert np.array_equal(out, want, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# The fused row kernels (quantize reads the caller's rows in place, dequantize writes the output
# dtype directly) against the numpy reference.

FUSED_CASES = [c for c in ALL_CASES if c[0] in ("mxfp4", "mxfp8_e4m3", "nvfp4", "mxint8")] + [
    ("mxfp6_e2m3", {}),
    ("mxfp6_e3m2", {}),
    ("mxfp8_e5m2", {}),
    ("nvfp4_e5m3", {}),
    ("int", {"bits": 8, "scale_format": "e5m3"}),
    ("bfp", {"bits": 3, "block": 8}),
]


def _fused_inputs(rng: np.random.Generator, n_cols: int) -> np.ndarray:
    """Rows of random data at many magnitudes with zero, negative-zero, float32-subnormal,
    tie-heavy and spike blocks mixed in (finite: the fused path handles those itself)."""
    rows = [rng.standard_normal(n_cols) * 2.0 ** float(rng.integers(-140, 120)) for _ in range(5)]
    rows.append(rng.laplace(size=n_cols))
    rows.append(np.zeros(n_cols))
    rows.append(np.full(n_cols, -0.0))
    rows.append(rng.standard_normal(n_cols) * 1e-40)  # float32 subnormals
    rows.append(rng.standard_normal(n_cols) * 1e-310)  # float64 subnormals (0 in float32)
    rows.append(rng.choice([0.25, 0.75, 1.25, 2.5, 3.5, 5.0], n_cols) * rng.choice([-1, 1], n_cols))
    spike = rng.standard_normal(n_cols) * 1e-3
    spike[::37] = 3e4
    rows.append(spike)
    return np.stack(rows)


def _assert_fused_equal(x, fmt, opt, rounding, **kw):
    a = quantize_asserting_range_warning(x, fmt, rounding=rounding, backend="numpy", **opt, **kw)
    b = quantize(x, fmt, rounding=rounding, backend="numba", **opt, **kw)
    assert np.array_equal(a.codes, b.codes) and a.codes.shape == b.codes.shape
    assert np.array_equal(a.scales, b.scales) and a.scales.dtype == b.scales.dtype
    assert a.tensor_scale == b.tensor_scale
    for dtype in (np.float32, np.float64, np.float16):
        with np.errstate(over="ignore"):  # float16 output: large values become Inf
            da, db = a.dequantize(dtype), b.dequantize(dtype)
        assert da.dtype == db.dtype and da.shape == db.shape == x.shape
        assert np.array_equal(da, db, equal_nan=True), dtype


@pytest.mark.parametrize(("fmt", "opt"), FUSED_CASES, ids=[f"{f}-{o}" for f, o in FUSED_CASES])
def test_fused_row_kernels_equal_the_reference(fmt, opt):
    rng = np.random.default_rng(sum(map(ord, fmt + repr(opt))) + 7)
    spec = resolve(fmt, **opt)
    # A ragged tail (3 blocks and a bit), in every input dtype the fused path reads.
    x = _fused_inputs(rng, 3 * spec.block + 5)
    for dtype in (np.float32, np.float64, np.float16):
        with np.errstate(over="ignore", under="ignore"):
            xd = x.astype(dtype)
        xd = np.where(np.isfinite(xd), xd, 0).astype(dtype)
        for rounding in MODES:
            _assert_fused_equal(xd, fmt, opt, rounding)
    x32 = x.astype(np.float32)
    _assert_fused_equal(x32[0], fmt, opt, "rne")  # 1-D
    _assert_fused_equal(x32.reshape(2, 6, -1), fmt, opt, "rne")  # 3-D
    _assert_fused_equal(x32.T.copy(), fmt, opt, "rne", axis=0)  # blocks along axis 0
    _assert_fused_equal(x32[:, ::2], fmt, opt, "rne")  # non-contiguous rows
    _assert_fused_equal(x32.astype(">f4"), fmt, opt, "rne")  # non-native byte order
    if np.dtype(np.longdouble).itemsize > 8:  # wider than float64: the general path
        _assert_fused_equal(x.astype(np.longdouble), fmt, opt, "rne")


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "nvfp4", "int"])
def test_fused_path_non_finite_input_follows_the_general_rules(fmt):
    """NaN/Inf blocks: the fused kernels decline and the general path applies ``nonfinite``
    (same codes, same errors as the reference)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 70)).astype(np.float32)
    x[1, 3] = np.inf
    x[2, 40] = -np.inf
    spec = resolve(fmt)
    assert spec.quantize_rows(np.ascontiguousarray(x), "rne") is None
    _assert_fused_equal(x, fmt, {}, "rne")  # nonfinite="saturate": Inf takes ±max
    x[3, 0] = np.nan
    for nonfinite in ("saturate", "raise", "propagate"):
        try:
            want = quantize(x, fmt, backend="numpy", nonfinite=nonfinite)
        except ValueError as e:
            with pytest.raises(ValueError) as got:
                quantize(x, fmt, backend="numba", nonfinite=nonfinite)
            assert str(got.value) == str(e)
            continue
        got = quantize(x, fmt, backend="numba", nonfinite=nonfinite)
        assert np.array_equal(got.codes, want.codes) and np.array_equal(got.scales, want.scales)
        assert np.array_equal(got.dequantize(), want.dequantize(), equal_nan=True)


def test_fused_path_errors_equal_the_reference():
    x = np.ones((2, 33), np.float32)
    for kw in ({"pad": False}, {"rounding": "up"}):
        with pytest.raises(ValueError) as a:
            quantize(x, "mxfp4", backend="numpy", **kw)
        with pytest.raises(ValueError) as b:
            quantize(x, "mxfp4", backend="numba", **kw)
        assert str(a.value) == str(b.value)
    big = np.full((1, 32), 1e300)  # needs a shared exponent above E8M0's range
    with pytest.raises(ValueError) as a:
        quantize(big, "mxfp4", backend="numpy")
    with pytest.raises(ValueError) as b:
        quantize(big, "mxfp4", backend="numba")
    assert str(a.value) == str(b.value)


# ---------------------------------------------------------------------------------------------
# Import structure: the reference never imports the fast path at module level, and the fast
# path uses only public names of the reference.


def _imports(path):
    import ast

    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node, id(node) in top


def _private_uses_of_fast(path):
    """``fast._x`` / ``_fast()._x`` attribute uses in a reference module."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            v = node.value
            if (isinstance(v, ast.Name) and v.id == "fast") or (
                isinstance(v, ast.Call) and getattr(v.func, "id", "") == "_fast"
            ):
                yield node.attr


def test_reference_and_fast_paths_have_no_import_cycle():
    from pathlib import Path

    import coaccel.models.formats as formats_pkg

    root = Path(formats_pkg.__file__).parent.parent
    for path in sorted((root / "formats").glob("*.py")):
        for node, top_level in _imports(path):
            mod = node.module or ""
            if "fast" in mod.split("."):
                assert not top_level, f"{path.name}: module-level import of {mod}"
                assert not any(a.name.startswith("_") for a in node.names), path.name
        assert list(_private_uses_of_fast(path)) == [], path.name
    for path in sorted((root / "fast").glob("*.py")):
        for node, _ in _imports(path):
            mod = node.module or ""
            if "formats" in mod.split("."):
                parts = mod.split(".")
                assert not any(p.startswith("_") for p in parts), f"{path.name}: {mod}"
                assert not any(a.name.startswith("_") for a in node.names), f"{path.name}: {mod}"


def test_importing_the_reference_does_not_import_the_fast_path():
    import subprocess
    import sys

    code = (
        "import sys, coaccel.models.formats as f; "
        "assert not any(m.startswith('coaccel.models.fast') for m in sys.modules); "
        "assert 'numba' not in sys.modules; "
        "import coaccel.models.fast.formats, coaccel.models.fast.hbq"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", [*ELEMENT_FORMATS, "int8_full"])
def test_exact_quotient_index_equals_the_fix_up_rounding(name):
    """The shared-exponent kernels round exact quotients by integer arithmetic on their bits;
    it must equal the exact fix-up rounding on every grid value, midpoint and neighbour, on
    float64 subnormals, past the maximum and on random values, for every mode and sign."""
    from coaccel.models.formats import IntFormat
    from coaccel.models.formats._elem import _kernel_params

    fmt = IntFormat("int8_full", 8, symmetric=False) if name == "int8_full" else (
        ELEMENT_FORMATS[name])  # fmt: skip
    vtop, n, is_int, _, _, _, emin, mbits = _kernel_params(fmt)
    vals = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())]))
    mids = (vals[:-1] + vals[1:]) / 2
    pts = np.concatenate([vals, mids, [vtop, vtop * 3, 1e300]])
    rng = np.random.default_rng(11)
    q = np.concatenate([
        pts, np.nextafter(pts, 0), np.nextafter(pts, np.inf), [0.0, 5e-324, 1e-310, 2.0**-1022],
        rng.uniform(0, vtop * 1.2, 2000), 2.0 ** rng.uniform(-40, 2, 500),
    ])  # fmt: skip
    for mode in range(3):
        for neg in (False, True):
            got = [fast._exact_quotient_index(v, vtop, mode, neg, is_int, emin, mbits) for v in q]
            want = [
                fast._nearest_index(v, 1.0, v, vtop, n, mode, neg, is_int, emin, mbits) for v in q
            ]
            assert got == want, (mode, neg)
    # The shared-exponent kernels: |x| at a power-of-two scale 2**S, from x's float64 bits
    # (float32 subnormals, widened, included).
    sub32 = np.array([1e-40, 3e-39, 1.4e-45, 1.17e-38], np.float32).astype(np.float64)
    for scale_exp in (-133, -127, -126, -20, 0, 5, 100):
        with np.errstate(over="ignore"):  # 1e300 * 2**100 is +inf: index n - 1 either way
            a = np.concatenate([q * 2.0**scale_exp, sub32])
        b = a.view(np.int64)
        for mode in range(3):
            for neg in (False, True):
                got = [fast._pow2_scaled_index(v, scale_exp, mode, neg, is_int, emin, mbits)
                       for v in b]  # fmt: skip
                want = [
                    fast._nearest_index(v, 2.0**scale_exp, v * 2.0**-scale_exp, vtop, n, mode,
                                        neg, is_int, emin, mbits)
                    for v in a
                ]  # fmt: skip
                assert [min(k, n - 1) for k in got] == want, (scale_exp, mode, neg)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threshold_bit_patterns_decide_like_the_exact_comparisons(dtype):
    """Element thresholds become the bit pattern of the smallest input-dtype value that passes
    ``|x| >= t`` or ``|x| > t``: exact for a representable t, for one between two values, for
    one above the dtype's largest finite value, below its smallest subnormal, and +inf."""
    bits_dt = np.uint32 if dtype == np.float32 else np.uint64
    tmpb = np.zeros(1, bits_dt)
    tmpf = tmpb.view(dtype)
    fin = np.finfo(dtype)
    inf_bits = int(np.array(np.inf, dtype).view(bits_dt))
    rng = np.random.default_rng(14)
    third = float(np.float32(1 / 3))
    ts = [0.75, 1.25 * third, 3.5 * third * 448.0 * 1.125, float(fin.max) * 1.5,
          float(fin.max), float(fin.smallest_subnormal) * 0.3, float(fin.smallest_subnormal) * 2.5,
          float(fin.smallest_normal) * 1.1, 2.0**-1074, 1e300, np.inf]  # fmt: skip
    ts += list(rng.uniform(0, 10, 50) * third)
    for t in ts:
        at_least = fast._bits_at_least(t, tmpb, tmpf)
        above = fast._bits_above(t, tmpb, tmpf, inf_bits)
        with np.errstate(over="ignore"):  # t above the dtype's maximum
            near = np.array([t], dtype=dtype)
            vals = np.concatenate([
                near, np.nextafter(near, np.inf), np.nextafter(near, 0),
                np.nextafter(np.nextafter(near, np.inf), np.inf),
                [0, fin.smallest_subnormal, fin.max],
            ]).astype(dtype)  # fmt: skip
        vals = vals[np.isfinite(vals)]
        b = vals.view(bits_dt).astype(np.int64)
        assert np.array_equal(b >= at_least, vals.astype(np.float64) >= t), t
        assert np.array_equal(b >= above, vals.astype(np.float64) > t), t


@pytest.mark.parametrize("scale_name", ["e8m0", "ue4m3", "e5m3", "fp16"])
@pytest.mark.parametrize("mode", ["rne", "half_away", "half_up", "ceil", "floor"])
def test_scale_index_equals_the_reference_rounding(scale_name, mode):
    """Block scales are rounded from the quotient's bits plus the exact fix-up: equal to the
    reference on every scale value, midpoint and their neighbours (times the divisor), below
    the smallest and above the largest value, at 0, and on random amaxes."""
    from coaccel.models.formats import scale_format
    from coaccel.models.formats._elem import _round_grid
    from coaccel.models.formats._scale import _scale_grid

    sf = scale_format(scale_name)
    grid = _scale_grid(sf)
    e0, off = fast._grid_binades(grid.values, 1 - sf.bias, sf.mbits)
    rng = np.random.default_rng(15)
    pts = np.concatenate([grid.values, grid.mids])
    if pts.size > 2000:  # FP16: its subnormal and lowest normal binades, its top, and a sample
        pts = np.concatenate([grid.values[:600], grid.mids[:600], pts[-600:], pts[::97]])
    pts = np.concatenate([pts, [grid.values[-1] * 4, grid.values[1] / 3]])
    for d in (1.0, 6.0, 7.0, 3.0, 0.375):
        a = np.concatenate([
            pts * d, np.nextafter(pts * d, 0), np.nextafter(pts * d, np.inf), [0.0, 5e-324],
            2.0 ** rng.uniform(np.log2(grid.values[1]) - 3, np.log2(grid.values[-1]) + 2, 1000),
        ])  # fmt: skip
        want = _round_grid(a, d, grid, mode)
        m = fast.MODE_CODES[mode]
        got = [fast._scale_index(v, d, m, grid.mids, grid.values, grid.even, e0, off, sf.mbits)
               for v in a]  # fmt: skip
        assert np.array_equal(got, want), d


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nvfp4_threshold_path_ragged_zero_and_subnormal_blocks(dtype):
    """The NVFP4 fused kernel on ragged rows, all-zero and -0 blocks, float32 subnormals and
    a block of ties at its own scale equals the reference for every mode."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 53)) * 2.0 ** rng.integers(-20, 20, (6, 1))
    x[1, :16] = 0.0
    x[1, 16:32] = -0.0
    x[2, 5] = 1e-40
    x[3, :16] = 1e-41 * rng.choice([-1.0, 1.0], 16)
    x[4, :16] = np.array([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 2) * 2.0**-3
    _assert_same(x.astype(dtype), "nvfp4", {})
    for row in x.astype(dtype):
        _assert_same(row, "nvfp4", {})


def _clamped_by_full_scan(q, x, axis):
    """The clamped-block count from every block of the tensor (what ``quantize`` reports
    from the edge blocks alone)."""
    from coaccel.models.formats import block_axis
    from coaccel.models.formats._quantized import _scale_code_range

    lo, hi = _scale_code_range(q.spec)
    edge = (q.scales == lo) | (q.scales == hi)
    xb = block_axis(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), axis, q.codes.shape[-1])
    amax = np.abs(xb[edge]).max(axis=-1)
    dmax = np.abs(q.dequantize_blocks()[edge]).max(axis=-1)
    return int(((amax > 1.5 * dmax) | ((amax > 0) & (dmax == 0))).sum())


@pytest.mark.parametrize("fmt", ["nvfp4", "nvfp4_e5m3", "mxfp4", "hbq-a", "hbq-e"])
def test_clamped_blocks_from_the_edge_blocks_equal_a_full_scan(fmt):
    """``quantize`` gathers and decodes only the blocks whose scale sits at either end of the
    scale range (NVFP4's largest block always does); its count equals a scan of every block,
    on ragged, transposed and 3-D tensors, float16 input and ±Inf (saturated) values."""
    import warnings

    from coaccel.models.formats import QuantizationRangeWarning

    rng = np.random.default_rng(16)
    x = rng.standard_normal((6, 300)) * 2.0 ** rng.integers(-30, 30, (6, 1))
    x[1, :40] *= 1e12
    x[2, 100:140] *= 1e-12
    x[3, 7] = np.inf
    x[4, 9] = -np.inf
    cases = [(x, -1), (x.T, 0), (x.reshape(2, 3, 300), -1), (x[:, :129], -1)]
    with np.errstate(over="ignore"):  # float16: the largest values become Inf
        cases.append((np.nan_to_num(x, posinf=0, neginf=0).astype(np.float16), -1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizationRangeWarning)
        for xc, axis in cases:
            q = quantize(xc, fmt, axis=axis)
            assert q.clamped_blocks == _clamped_by_full_scan(q, xc, axis % xc.ndim)
