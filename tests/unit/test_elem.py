"""Element formats: every code point, exact rounding against the Fraction oracle, corner cases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from vectors import fraction_oracle as orc

from coaccel.models.formats import (
    E2M1,
    E2M2,
    E4M3,
    E5M2,
    ELEMENT_FORMATS,
    INT8,
    IntFormat,
    decode,
    element_format,
    encode,
)
from coaccel.models.formats import _elem as el

FP_NAMES = list(orc.FP_ELEMENTS)
ALL_NAMES = FP_NAMES + list(orc.INT_ELEMENTS)
MODES = ("rne", "half_away", "half_up")
# Scales with few significant bits, including non powers of two (3, 5/4096, 41- and 45-bit ones).
SCALES = (
    1.0,
    2.0**-20,
    3.0,
    5.0 / 4096,
    float(1 + Fraction(1, 2**40)),
    float(Fraction(round(2**44 / 3), 2**44)),
)


def test_registry_names_and_lookup():
    assert set(ELEMENT_FORMATS) == set(ALL_NAMES)
    assert element_format("E2M1") is E2M1
    with pytest.raises(ValueError) as e:
        element_format("e9m9")
    assert str(e.value) == (
        "unknown element format 'e9m9'; valid formats: e2m1, e2m2, e2m3, e3m2, e4m3, e5m2, "
        "int4, int8"
    )


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_code_decodes_to_the_bit_field_value(name):
    fmt = element_format(name)
    n = orc.elem_n_codes(name)
    got = decode(np.arange(n, dtype=np.uint16), fmt)
    want = np.array([orc.to_float(orc.elem_code_value(name, c)) for c in range(n)])
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(fmt.values(), want, equal_nan=True)
    # Negative zero codes decode to +0.0 (documented), not -0.0.
    assert not np.any(np.signbit(got[got == 0]))


def test_published_values():
    # specs/hbq.md §1.2 tables and §5.3 maxima, typed in from the spec.
    e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert E2M1.values()[:8].tolist() == e2m1
    assert E2M1.values()[8:].tolist() == [0.0] + [-v for v in e2m1[1:]]
    e2m2 = [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7]
    assert E2M2.values()[:16].tolist() == e2m2
    maxima = {"e2m1": 6, "e2m2": 7, "e2m3": 7.5, "e3m2": 28, "e4m3": 448, "e5m2": 57344}
    for name, mx in maxima.items():
        assert element_format(name).max_value == mx
    assert E4M3.min_normal == 2.0**-6 and E4M3.min_subnormal == 2.0**-9
    assert element_format("e3m2").min_normal == 0.25
    assert element_format("e3m2").min_subnormal == 0.0625
    assert element_format("e2m3").min_subnormal == 0.125
    assert E5M2.min_subnormal == 2.0**-16
    assert np.isnan(E4M3.values()[0x7F]) and np.isnan(E4M3.values()[0xFF])
    assert E4M3.values()[0x7E] == 448 and E5M2.values()[0x7B] == 57344
    assert E5M2.values()[0x7C] == math.inf and E5M2.values()[0xFC] == -math.inf
    assert np.isnan(E5M2.values()[[0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]]).all()
    assert INT8.values()[0x81] == -127 and INT8.values()[0x80] == -128
    assert E2M1.bits == 4 and E4M3.n_codes == 256 and E2M2.bits == 5


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_every_finite_code_reencodes_to_itself(name, mode):
    fmt = element_format(name)
    codes = np.arange(orc.elem_n_codes(name))
    vals = decode(codes, fmt)
    keep = np.isfinite(vals)
    if isinstance(fmt, IntFormat):
        keep &= vals >= -fmt.max_value  # the symmetric format never produces -2**(bits-1)
    want = np.where(vals[keep] == 0, 0, codes[keep])  # -0 codes re-encode to +0
    for s in SCALES:
        got = encode(vals[keep] * s, fmt, rounding=mode, scale=s)
        assert got.dtype == np.uint8
        assert np.array_equal(got, want), s


def _probes(name: str) -> np.ndarray:
    """Real values x/scale = every midpoint (tie) of the format, the overflow midpoint, values
    just above and below each, every representable value, and a few beyond the range."""
    pts = [p[0] for p in orc._nonneg_points(name)]
    if name in orc.INT_ELEMENTS:
        pts = [Fraction(i) for i in range(0, int(pts[-1]) + 3)]
    mids = [(a + b) / 2 for a, b in zip(pts[:-1], pts[1:], strict=True)]
    top_step = pts[-1] - pts[-2]
    mids.append(pts[-1] + top_step / 2)  # overflow threshold region
    extra = [pts[-1] * 2, pts[-1] * 1024, pts[1] / 4, pts[1] * 3 / 8]
    return np.array([float(v) for v in mids + pts + extra])


def _oracle_codes(xs, name, mode, scale, saturate=True):
    return np.array([orc.encode_elem(float(x), name, mode, scale, saturate) for x in xs])


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_ties_and_neighbours_match_the_fraction_oracle(name, mode):
    fmt = element_format(name)
    base = _probes(name)
    for s in SCALES:
        x = base * s  # exact: every probe has few bits and s at most 45
        assert all(Fraction(v) == Fraction(b) * Fraction(s) for v, b in zip(x, base, strict=True))
        x = np.concatenate([x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
        x = np.concatenate([x, -x])
        got = encode(x, fmt, rounding=mode, scale=s)
        want = _oracle_codes(x, name, mode, s)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (s, x[bad[:5]], got[bad[:5]], want[bad[:5]])


@pytest.mark.parametrize("name", ALL_NAMES)
def test_random_values_at_non_pot_scales_match_the_oracle(name):
    rng = np.random.default_rng(1234)
    fmt = element_format(name)
    for trial in range(6):
        s = float(
            Fraction(int(rng.integers(2**39, 2**40)), 2**40) * 2 ** int(rng.integers(-30, 30))
        )
        x = rng.standard_normal(300) * s * fmt.max_value / 3 * 2.0 ** (trial - 3)
        mode = MODES[trial % 3]
        got = encode(x, fmt, rounding=mode, scale=s)
        assert np.array_equal(got, _oracle_codes(x, name, mode, s))


def test_wide_scales_are_rejected_because_the_float_quotient_can_land_on_a_tie():
    """With a 52-bit scale (1.1) the float64 quotient of a non-tie lands exactly on an E2M1
    midpoint, so no float method decides it; encode refuses such scales. With the accepted
    widths every ``midpoint * scale`` is exact and the tie decision is exact."""
    name, s = "e2m1", 1.1
    pts = [p[0] for p in orc._nonneg_points(name)]
    mids = [float((a + b) / 2) for a, b in zip(pts[:-1], pts[1:], strict=True)]
    x = np.array(mids) * s
    x = np.concatenate([np.nextafter(x, np.inf), np.nextafter(x, -np.inf), x])
    tricky = [v for v in x if (v / s) in mids and Fraction(v) / Fraction(s) != Fraction(v / s)]
    assert tricky
    with pytest.raises(ValueError, match="has 52 significant bits; at most 50 keep"):
        encode(tricky, E2M1, scale=s)


def test_hand_worked_e2m1_ties():
    # specs/hbq.md §5.4: RNE ties 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4;
    # codes: 0->0, 0.5->1, 1->2, 1.5->3, 2->4, 3->5, 4->6, 6->7.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    assert encode(ties, E2M1, rounding="rne").tolist() == [0, 2, 2, 4, 4, 6, 6]
    assert encode(ties, E2M1, rounding="half_away").tolist() == [1, 2, 3, 4, 5, 6, 7]
    neg = [-t for t in ties]
    # half_away on negatives: -0.5 is 0x9, -1 is 0xA, ...; half_up goes toward +inf.
    assert encode(neg, E2M1, rounding="half_away").tolist() == [9, 10, 11, 12, 13, 14, 15]
    assert encode(neg, E2M1, rounding="half_up").tolist() == [0, 9, 10, 11, 12, 13, 14]
    # HBQ §1.7: E2M2 subnormal ties at 0.125 go up to 0.25 under half-away; 0.875 -> 1.0.
    assert encode([0.125, 0.875, 7.4, 100.0], E2M2, rounding="half_away").tolist() == [1, 4, 15, 15]


def test_zero_and_negative_zero():
    for fmt in ELEMENT_FORMATS.values():
        got = encode([0.0, -0.0, -1e-300, 1e-300], fmt)
        assert got.tolist() == [0, 0, 0, 0], fmt.name


def test_saturation_and_infinities():
    assert encode([1e9, -1e9, np.inf, -np.inf], E2M1).tolist() == [7, 15, 7, 15]
    assert encode([np.inf, -np.inf], E4M3).tolist() == [0x7E, 0xFE]
    assert encode([np.inf, -np.inf], E5M2).tolist() == [0x7B, 0xFB]
    assert encode([np.inf, -np.inf, 200.0], INT8).tolist() == [127, 129, 127]
    # Non-saturating: E5M2 overflows to ±Inf (IEEE RNE: 61440 is the tie between 57344 and the
    # next binade's 65536, and 57344's code 0x7B is odd, so the tie overflows), E4M3 to NaN
    # (464 is the tie between 448 (0x7E, even) and 480, so it stays; above it is NaN).
    got = encode([61439.0, 61440.0, -61440.0, np.inf, -np.inf], E5M2, saturate=False)
    assert got.tolist() == [0x7B, 0x7C, 0xFC, 0x7C, 0xFC]
    got = encode([464.0, 464.0001, -500.0, np.inf], E4M3, saturate=False)
    assert got.tolist() == [0x7E, 0x7F, 0xFF, 0x7F]
    assert encode([6.9999], E2M1, saturate=False).tolist() == [7]
    with pytest.raises(ValueError) as e:
        encode([7.0], E2M1, saturate=False)  # tie at 7: RNE goes to the (virtual) 8
    assert str(e.value) == (
        "a value overflows element format 'e2m1' (max 6), which has no Inf or NaN code; "
        "pass saturate=True to clamp to ±max"
    )
    # INT8: 127.5 ties between 127 and 128; RNE (128 is even) and half-away both pick 128,
    # which overflows; half-up on -127.5 goes toward +inf, to -127.
    for mode in ("rne", "half_away"):
        with pytest.raises(ValueError):
            encode([127.5], INT8, saturate=False, rounding=mode)
    assert encode([127.49, -127.5], INT8, saturate=False, rounding="half_up").tolist() == [127, 129]


def test_nan_input():
    got = encode([np.nan, -np.nan, 1.0], E4M3)
    assert got.tolist() == [0x7F, 0xFF, 0x38]
    got = encode([np.nan, 1.0], E5M2)
    assert got.tolist() == [0x7E, 0x3C]
    for fmt in (E2M1, INT8):
        with pytest.raises(ValueError) as e:
            encode([1.0, np.nan], fmt)
        assert str(e.value) == f"NaN input, but element format {fmt.name!r} has no NaN code"


def test_int_formats():
    xs = [2.5, -2.5, 3.5, -3.5, 126.7, -128.4, 0.5, -0.5]
    assert encode(xs, INT8, rounding="rne").tolist() == [2, 254, 4, 252, 127, 129, 0, 0]
    assert encode(xs, INT8, rounding="half_away").tolist() == [3, 253, 4, 252, 127, 129, 1, 255]
    assert encode(xs, INT8, rounding="half_up").tolist() == [3, 254, 4, 253, 127, 129, 1, 0]
    asym = IntFormat("int8a", 8, symmetric=False)
    assert encode([-128.4, -200.0, 128.0], asym).tolist() == [128, 128, 127]
    assert asym.min_value == -128 and INT8.min_value == -127
    assert encode([7.6, -7.6], "int4").tolist() == [7, 9]


def test_scale_validation_messages():
    with pytest.raises(ValueError) as e:
        encode([1.0], E2M1, scale=0.0)
    assert str(e.value) == "scale must be finite and > 0, got 0.0"
    with pytest.raises(ValueError) as e:
        encode([1.0], E2M1, scale=[1.0, -2.0])
    assert str(e.value) == "scale must be finite and > 0, got -2.0"
    with pytest.raises(ValueError) as e:
        encode([1.0], E2M1, scale=np.inf)
    assert str(e.value) == "scale must be finite and > 0, got inf"
    with pytest.raises(ValueError) as e:
        encode([1.0], INT8, scale=0.1)  # 0x3FB999999999999A: 52 significant bits
    assert str(e.value) == ("scale 0.1 has 52 significant bits; at most 45 keep the rounding exact")
    with pytest.raises(ValueError) as e:
        encode([1.0], E2M1, scale=2.0**-1000)
    assert str(e.value) == "scale 9.332636185032189e-302 is outside [2**-960, 2**960]"
    with pytest.raises(ValueError) as e:
        encode([1.0], E2M1, rounding="nearest")
    assert str(e.value) == "rounding='nearest'; valid choices: 'rne', 'half_away', 'half_up'"
    with pytest.raises(TypeError):
        encode(["a"], E2M1)
    # 45 significant bits are accepted for INT8 (its widest midpoint, 127.5, has 8 bits).
    s45 = float(Fraction(2**45 - 1, 2**45))
    assert encode([1.0], INT8, scale=s45).tolist() == [1]


def test_decode_validation():
    with pytest.raises(ValueError) as e:
        decode([16], E2M1)
    assert str(e.value) == "e2m1 code 16 is outside 0..15"
    with pytest.raises(TypeError) as e:
        decode([1.0], E2M1)
    assert str(e.value) == "e2m1 codes must be an integer array, got dtype float64"


def test_shapes_and_broadcasting():
    s = np.array([1.0, 3.0, 4.0, 0.375])
    k = np.arange(-12, 12).reshape(2, 3, 4)  # E4M3 holds every integer up to 16 exactly
    got = encode(k * s, E4M3, scale=s)
    assert got.shape == (2, 3, 4)
    assert np.array_equal(decode(got, E4M3), k)
    assert encode(1.5, E4M3, scale=s).shape == (4,)
    assert encode(np.zeros((0, 3)), E2M1).shape == (0, 3)


def test_codes_constants():
    assert el.saturation_codes(E2M1) == (7, 15)
    assert el.saturation_codes(INT8) == (127, 129)
    assert el.nan_code(E4M3) == 0x7F and el.nan_code(E4M3, negative=True) == 0xFF
    assert el.nan_code(E5M2) == 0x7E and el.inf_code(E5M2, negative=True) == 0xFC
    assert el.nan_code(E2M1) is None and el.inf_code(E4M3) is None
