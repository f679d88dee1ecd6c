"""Block formats (OCP MX, NVFP4, BFP, INT): hand-worked blocks, the Fraction oracle, idempotence,
bad input and option handling."""

from __future__ import annotations

import numpy as np
import pytest
from testkit import quantize_asserting_range_warning
from vectors import fraction_oracle as orc

from coaccel.models.formats import format_names, quantize, resolve

MX_NAMES = list(orc.MX)
BASE_FORMATS = MX_NAMES + ["nvfp4", "nvfp4_e5m3", "bfp", "int"]
MODES = ("rne", "half_away", "half_up")


def _blocks(rng: np.random.Generator, n_blocks: int, block: int) -> np.ndarray:
    """Blocks of many kinds: normal/laplace/heavy-tailed data at scales 2**-40 .. 2**40, zeros,
    single spikes, exact ties of the E2M1 grid, signed zeros, subnormal float32 values."""
    out = []
    for i in range(n_blocks):
        kind = i % 7
        s = 2.0 ** int(rng.integers(-40, 40))
        if kind == 0:
            b = rng.standard_normal(block) * s
        elif kind == 1:
            b = rng.laplace(size=block) * s
        elif kind == 2:
            b = rng.standard_t(2, size=block) * s
        elif kind == 3:
            b = np.zeros(block)
            b[int(rng.integers(block))] = -s
        elif kind == 4:  # E2M1 ties and values at a power-of-two scale
            b = rng.choice([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 6.0], block) * s
            b *= rng.choice([-1.0, 1.0], block)
        elif kind == 5:
            b = np.where(rng.random(block) < 0.5, -0.0, 0.0)
        else:
            b = rng.standard_normal(block) * 2.0**-140  # float32 subnormals
        out.append(b.astype(np.float32).astype(np.float64))
    return np.stack(out)


def _oracle(fmt: str, x: np.ndarray, mode: str, **opt) -> tuple[np.ndarray, np.ndarray]:
    """(scale codes, element codes) of the rows of x from the Fraction oracle."""
    rows = [list(map(float, r)) for r in x]
    if fmt in orc.MX and opt.get("variant") == "hbq_repo":
        res = [orc.mx_hbq_repo_block(r, fmt, mode) for r in rows]
    elif fmt in orc.MX:
        res = [orc.mx_block(r, fmt, mode) for r in rows]
    elif fmt == "bfp":
        res = [orc.bfp_block(r, opt.get("bits", 8), mode) for r in rows]
    elif fmt == "nvfp4":
        s_t = (
            orc.nvfp4_tensor_scale(float(np.max(np.abs(x))))
            if opt.get("tensor_scale", True)
            else np.float32(1)
        )
        res = [orc.nvfp4_block(r, s_t, mode, opt.get("scale_rounding", "rne")) for r in rows]
    elif fmt == "nvfp4_e5m3":
        res = [orc.nvfp4_e5m3_block(r, mode, opt.get("scale_rounding", "half_up")) for r in rows]
    else:
        res = [
            orc.int_block(r, opt.get("bits", 4), opt.get("scale_format", "fp16"), mode,
                          opt.get("scale_rounding", "rne"))
            for r in rows
        ]  # fmt: skip
    return np.array([r[0] for r in res]), np.array([r[1] for r in res])


CASES = [(f, {}) for f in BASE_FORMATS] + [
    ("mxfp4", {"variant": "hbq_repo"}),
    ("mxint8", {"variant": "hbq_repo"}),
    ("nvfp4", {"scale_rounding": "ceil"}),
    ("nvfp4", {"tensor_scale": False}),
    ("nvfp4_e5m3", {"scale_rounding": "ceil"}),
    ("bfp", {"bits": 4, "block": 8}),
    ("int", {"bits": 8, "scale_format": "e5m3"}),
    ("int", {"bits": 4, "scale_format": "ue4m3", "scale_rounding": "ceil"}),
    ("int", {"bits": 6, "scale_format": "e8m0"}),
]


# The random blocks span extreme magnitudes on purpose (codes at both ends of every scale
# range), so some are out of range and quantize warns about them; that is checked elsewhere.
@pytest.mark.filterwarnings("ignore::coaccel.models.formats.QuantizationRangeWarning")
@pytest.mark.parametrize(("fmt", "opt"), CASES, ids=[f"{f}-{o}" for f, o in CASES])
def test_reference_matches_the_fraction_oracle(fmt, opt):
    rng = np.random.default_rng(sum(map(ord, fmt + repr(opt))))
    spec = resolve(fmt, **opt)
    x = _blocks(rng, 21, spec.block)
    if fmt == "nvfp4" and opt.get("tensor_scale", True):
        x = x[:, :] * 2.0 ** -int(np.log2(np.max(np.abs(x))) - 10)  # keep amax in float32
    for mode in MODES:
        q = quantize(x, fmt, rounding=mode, backend="numpy", **opt)
        scales, codes = _oracle(fmt, x, mode, **opt)
        assert np.array_equal(q.scales.reshape(-1), scales), mode
        assert np.array_equal(q.codes.reshape(len(x), -1), codes), mode


def test_hand_worked_mxfp4_block():
    # amax = 20 -> floor(log2 20) = 4 -> X = 4 - emax(E2M1) = 2 -> E8M0 code 127 + 2 = 129.
    # v = x / 4 = [0.75, -0.175, 3.0, 0.065, -5.0, 1.375, 0, ...].
    # RNE: 0.75 ties 0.5 (code 1) / 1.0 (code 2) -> even code 2; -0.175 < 0.25 -> 0;
    # 3.0 -> code 5; 0.065 -> 0; -5.0 ties -4 (0b1110) / -6 (0b1111) -> even 14;
    # 1.375 > 1.25 (midpoint of 1.0 and 1.5) -> 1.5, code 3.
    x = np.zeros(32, dtype=np.float32)
    x[:6] = [3.0, -0.7, 12.0, 0.26, -20.0, 5.5]
    q = quantize(x, "mxfp4", backend="numpy")
    assert q.scales.tolist() == [129]
    assert q.codes[0, :7].tolist() == [2, 0, 5, 0, 14, 3, 0]
    assert q.dequantize()[:6].tolist() == [4.0, 0.0, 12.0, 0.0, -16.0, 6.0]
    # microxcaling's default "nearest" (half away): 0.75 -> 1.0 (code 2), -5 -> -6 (code 15).
    q = quantize(x, "mxfp4", rounding="half_away", backend="numpy")
    assert q.codes[0, :7].tolist() == [2, 0, 5, 0, 15, 3, 0]
    # All-zero block: amax -> 2**-126, X = -128 clamps to -127 -> code 0; codes 0.
    assert quantize(np.zeros(32), "mxfp4").scales.tolist() == [0]
    # MXINT8: X = floor(log2 20) = 4, q = round(64 x / 16): 3.0 -> 12, -20 -> -80 (0xB0),
    # 5.5 -> 22, -0.7 -> -2.8 -> -3 (0xFD), 0.26 -> 1.04 -> 1; scale code 131.
    q = quantize(x, "mxint8", backend="numpy")
    assert q.scales.tolist() == [131]
    assert q.codes[0, :6].tolist() == [12, 0xFD, 48, 1, 0xB0, 22]


def test_hand_worked_nvfp4_blocks():
    # Tensor amax 2688 -> s_t = 2688 / (6 * 448) = 1.0 exactly.
    x = np.zeros(64, dtype=np.float32)
    # Block 0: amax 2688 -> s_b = UE4M3(2688 / 6) = 448 (0x7E); x / 448 = 6 -> 7,
    # -3 -> 0b1101, 700/448 = 1.5625 < 1.75 -> 1.5 (3).
    x[0:3] = [2688.0, -1344.0, 700.0]
    # Block 1: amax 12 -> s_b = 2 (E=8, M=0: 0x40); 12/2 = 6 -> 7, -1.5 -> 0b1011, 0.5 -> 1.
    x[16:19] = [12.0, -3.0, 1.0]
    # Block 2: amax 0.1 -> 0.1/6 = 0.01667 lies above the midpoint 0.016602 of 2**-6 (0x08)
    # and 2**-6 * 1.125 (0x09) -> 0x09; 0.1 / 0.017578125 = 5.69 -> 6 (code 7).
    x[32] = 0.1
    # Block 3: zeros -> scale code 0 -> replaced by 1.0 (0x38).
    q = quantize(x, "nvfp4", backend="numpy")
    assert q.tensor_scale == np.float32(1.0)
    assert q.scales.tolist() == [0x7E, 0x40, 0x09, 0x38]
    assert q.codes[0, :3].tolist() == [7, 13, 3]
    assert q.codes[1, :3].tolist() == [7, 11, 1]
    assert q.codes[2, 0] == 7 and not q.codes[3].any()
    assert q.dequantize(np.float64)[[0, 1, 2, 16, 32]].tolist() == [
        2688.0, -1344.0, 672.0, 12.0, 6 * 0.017578125]  # fmt: skip


def test_hand_worked_hbq_repo_nvfp4():
    # E5M3(amax / 6) with half-up: amax 10.5 -> 1.75 = 2**0 (1 + 6/8): code E=15, M=6 = 0x7E;
    # elements half away: 10.5 / 1.75 = 6 -> 7, 2.625 / 1.75 = 1.5 -> 3, 0.4375/1.75 = 0.25
    # ties 0 / 0.5 -> away: code 1.
    x = np.zeros(16)
    x[:3] = [10.5, 2.625, -0.4375]
    q = quantize(x, "nvfp4_e5m3", backend="numpy")
    assert q.scales.tolist() == [0x7E] and q.codes[0, :3].tolist() == [7, 3, 9]
    assert q.tensor_scale is None


IDEMPOTENT = [(f, {}) for f in BASE_FORMATS] + [
    ("mxfp4", {"variant": "hbq_repo"}),
    ("nvfp4", {"tensor_scale": False}),
    ("bfp", {"bits": 4}),
    ("int", {"bits": 8}),
    ("int", {"bits": 4, "scale_format": "e5m3"}),
    ("int", {"bits": 4, "scale_format": "ue4m3"}),
]


@pytest.mark.parametrize(("fmt", "opt"), IDEMPOTENT, ids=[f"{f}-{o}" for f, o in IDEMPOTENT])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_quantize_of_dequantize_reproduces_the_codes(fmt, opt, backend):
    rng = np.random.default_rng(3)
    for trial in range(8):
        # Magnitudes keep every scale normal (subnormal scales are too coarse to come back).
        x = (rng.standard_normal((6, 96)) * 2.0 ** (2 * trial - 6)).astype(np.float32)
        x[0, :5] = 0.0
        q = quantize(x, fmt, backend=backend, **opt)
        q2 = quantize(q.dequantize(np.float64), fmt, backend=backend, rounding=q.rounding, **opt)
        assert np.array_equal(q.codes, q2.codes)
        assert np.array_equal(q.scales, q2.scales)


def test_documented_non_idempotent_cases():
    # A scale format much coarser than the element grid cannot come back: INT4 with an E8M0
    # (power of two) scale. amax 5.3 -> 5.3/7 = 0.757 rounds to 1.0, elements 5.3 -> 5;
    # re-quantizing amax 5 gives 5/7 = 0.714 < 0.75 -> 0.5: another scale.
    x = np.zeros(32)
    x[0] = 5.3
    q = quantize(x, "int", scale_format="e8m0")
    assert q.scales.tolist() == [127] and q.codes[0, 0] == 5
    assert quantize(q.dequantize(np.float64), "int", scale_format="e8m0").scales.tolist() == [126]
    # The HBQ repo's MXINT8 allows -128: -127.6 * 2**X becomes -128 * 2**X, whose exponent is
    # one higher.
    x = np.zeros(32)
    x[:2] = [-127.6, 1.0]
    q = quantize(x, "mxint8", variant="hbq_repo")
    assert q.scales.tolist() == [15] and q.codes[0, 0] == 0x80
    assert quantize(q.dequantize(np.float64), "mxint8", variant="hbq_repo").scales.tolist() == [16]
    # NVFP4 with the round-up (cuDNN) block scale: the float32 ratio float32(6 s_b s_t) /
    # float32(6 s_t) can come out one ulp above s_b, and ceil then takes the next code up.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 96)) * 2.0**-6).astype(np.float32)
    q = quantize(x, "nvfp4", scale_rounding="ceil")
    q2 = quantize(q.dequantize(np.float64), "nvfp4", scale_rounding="ceil")
    step = q2.scales.astype(int) - q.scales.astype(int)
    assert set(np.unique(step)) == {0, 1}


def test_scale_exponent_limits():
    big = np.zeros(32)
    big[0] = 2.0**130  # X = 130 - 2 = 128 > 127
    with pytest.raises(ValueError) as e:
        quantize(big, "mxfp4")
    assert str(e.value) == (
        "format 'mxfp4': block 0 needs the shared exponent 128, above the scale's maximum 127 "
        "(its values exceed the format's range)"
    )
    big[0] = 2.0**129  # X = 127: fine, scale code 254
    assert quantize(big, "mxfp4").scales.tolist() == [254]
    tiny = np.full(32, 2.0**-149)  # X = -149 - 2 -> clamps to -127 (code 0); elements underflow
    q = quantize_asserting_range_warning(tiny, "mxfp4")  # flushed to zero: a range warning
    assert q.scales.tolist() == [0] and not q.codes.any()
    # HBQ repo variant: the 5-bit exponent clips to [-14, 15] instead of failing.
    q = quantize(big, "mxfp4", variant="hbq_repo")
    assert q.scales.tolist() == [30] and q.codes[0, 0] == 7


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "bfp"])
def test_nonfinite_modes_for_shared_exponent_formats(fmt):
    spec = resolve(fmt)
    x = np.ones((2, spec.block), dtype=np.float32)
    x[0, 3] = np.inf
    x[0, 4] = -np.inf
    pos, neg = spec.saturation_codes()
    q = quantize(x, fmt)  # saturate: scale from the finite values, Inf -> ±max code
    ref = quantize(np.where(np.isinf(x), 0, x), fmt)
    assert np.array_equal(q.scales, ref.scales)
    assert q.codes[0, 0, 3] == pos and q.codes[0, 0, 4] == neg
    with pytest.raises(ValueError) as e:
        quantize(x, fmt, nonfinite="raise")
    assert str(e.value) == "input holds 2 infinite value(s), first at (0, 3)"
    x[1, 7] = np.nan
    with pytest.raises(ValueError) as e:
        quantize(x, fmt)
    assert str(e.value) == (
        "input holds 1 NaN value(s), first at index (1, 7); pass nonfinite='propagate' to apply "
        "the format's NaN rule instead"
    )
    q = quantize(x, fmt, nonfinite="propagate")  # both blocks hold NaN/Inf: NaN scale 0xFF
    assert q.scales.tolist() == [[0xFF], [0xFF]] and not q.codes.any()
    assert np.isnan(q.dequantize()).all()


@pytest.mark.parametrize("fmt", ["nvfp4", "nvfp4_e5m3", "int"])
def test_nonfinite_for_absmax_formats(fmt):
    x = np.ones(64, dtype=np.float32)
    x[5] = -np.inf
    q = quantize(x, fmt)
    assert q.codes.reshape(-1)[5] == resolve(fmt).saturation_codes()[1]
    with pytest.raises(ValueError) as e:
        quantize(x, fmt, nonfinite="propagate")
    assert str(e.value) == (
        f"format {fmt!r} has no NaN/Inf encoding: use nonfinite='saturate' or 'raise'"
    )


def test_hbq_repo_mx_has_no_nan_scale():
    x = np.ones(32)
    x[0] = np.nan
    with pytest.raises(ValueError) as e:
        quantize(x, "mxfp4", variant="hbq_repo", nonfinite="propagate")
    assert str(e.value) == (
        "format 'mxfp4' has no NaN scale code: NaN/Inf input cannot be propagated (use "
        "nonfinite='saturate' or 'raise')"
    )


def test_bad_inputs_and_names():
    with pytest.raises(ValueError) as e:
        quantize(np.zeros((0, 32), dtype=np.float32), "mxfp4")
    assert str(e.value) == "quantize got an empty array of shape (0, 32)"
    with pytest.raises(TypeError) as e:
        quantize(np.arange(32), "mxfp4")
    assert str(e.value) == (
        "quantize expects a floating-point array (float16/float32/float64), got dtype int64"
    )
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(40), "mxfp4", pad=False)
    assert str(e.value) == (
        "axis length 40 is not a multiple of the block size 32 (pass pad=True to zero-pad the "
        "tail, as microxcaling does)"
    )
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "mxfp5")
    assert str(e.value).startswith("unknown format 'mxfp5'; valid formats: bfp, ")
    with pytest.raises(TypeError) as e:
        quantize(np.zeros(32), "mxfp4", blok=16)
    assert str(e.value) == "format 'mxfp4': unknown option 'blok'; valid options: block, variant"
    with pytest.raises(TypeError) as e:
        quantize(np.zeros(32), "nvfp4", block=32)
    assert str(e.value) == (
        "format 'nvfp4': unknown option 'block'; valid options: scale_rounding, tensor_scale"
    )
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "mxfp6_e2m3", variant="hbq_repo")
    assert str(e.value) == "format 'mxfp6_e2m3': variant='hbq_repo'; valid choices: 'ocp'"
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "int", scale_format="bf16")
    assert str(e.value) == (
        "format 'int': scale_format='bf16'; valid choices: 'fp16', 'e5m3', 'ue4m3', 'e8m0'"
    )
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "bfp", bits=9)
    assert str(e.value) == "format 'bfp': bits=9; expected an integer in 2..8"
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "mxfp4", rounding="even")
    assert str(e.value) == (
        "rounding='even' is not offered by format 'mxfp4'; valid choices: rne, half_away, half_up"
    )
    with pytest.raises(ValueError) as e:
        quantize(np.zeros(32), "mxfp4", backend="cuda")
    assert str(e.value) == "backend='cuda'; valid choices: numpy, numba"


def test_padding_axis_and_shapes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 50, 4)).astype(np.float32)
    q = quantize(x, "mxfp4", axis=1)
    assert q.codes.shape == (3, 4, 2, 32) and q.scales.shape == (3, 4, 2)
    d = q.dequantize()
    assert d.shape == x.shape and d.dtype == np.float32
    # Same as quantizing the moved, zero-padded axis by hand.
    xm = np.concatenate([np.moveaxis(x, 1, -1), np.zeros((3, 4, 14), np.float32)], axis=-1)
    q2 = quantize(xm, "mxfp4")
    assert np.array_equal(q.codes, q2.codes)
    assert np.array_equal(np.moveaxis(d, 1, -1), q2.dequantize()[..., :50])
    # float16 input is accepted and converted exactly.
    assert np.array_equal(
        quantize(x.astype(np.float16), "mxfp4", axis=1).codes.shape, q.codes.shape
    )


def test_bits_per_element_and_fields():
    want = {
        "mxfp4": 4.25, "mxfp6_e2m3": 6.25, "mxfp6_e3m2": 6.25, "mxfp8_e4m3": 8.25,
        "mxfp8_e5m2": 8.25, "mxint8": 8.25, "nvfp4": 4.5, "nvfp4_e5m3": 4.5, "bfp": 8.5,
        "int": 4.5,
    }  # fmt: skip
    for name, bpe in want.items():
        spec = resolve(name)
        assert spec.bits_per_element() == bpe, name
        assert spec.default_rounding in spec.rounding_modes
    assert resolve("mxfp4", block=64).bits_per_element() == 4 + 8 / 64
    assert resolve("mxfp4", variant="hbq_repo").bits_per_element() == 4 + 5 / 32
    assert resolve("int", bits=8, scale_format="e5m3").bits_per_element() == 8.25
    assert resolve("nvfp4_e5m3").default_rounding == "half_away"
    assert resolve("mxfp4", variant="hbq_repo").default_rounding == "half_away"
    assert set(BASE_FORMATS) <= set(format_names())


def test_bfp8_is_mxint8_with_the_exponent_moved():
    # BFP8 stores X - 6 where MXINT8 stores X (and scales its INT8 grid by 2**-6).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    a = quantize(x, "bfp", block=16)
    b = quantize(x, "mxint8", block=16)
    assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(a.scales.astype(int), b.scales.astype(int) - 6)
    assert np.array_equal(a.dequantize(), b.dequantize())


def test_nvfp4_tensor_scale_is_float32_arithmetic():
    x = np.array([1.0] + [0.1] * 15, dtype=np.float32)
    q = quantize(x, "nvfp4")
    s_t = np.float32(1.0) / np.float32(2688)
    assert q.tensor_scale.dtype == np.float32 and q.tensor_scale == s_t
    # Block scale: float32(1) / (float32(6) * s_t) in float32 is 447.99997, RNE into UE4M3
    # -> 448 (0x7E).
    assert np.float32(1.0) / (np.float32(6) * s_t) != 448
    assert q.scales.tolist() == [0x7E]
    # Dequantized values are e2m1 * s_b * s_t exactly.
    assert q.dequantize(np.float64)[0] == 6 * 448 * float(s_t)
