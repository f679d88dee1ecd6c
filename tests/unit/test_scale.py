"""Scale formats: every code point, exact rounding against the Fraction oracle, clamping."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from vectors import fraction_oracle as orc

from coaccel.models.formats import (
    E5M3,
    E8M0,
    FP16,
    SCALE_FORMATS,
    UE4M3,
    decode_scale,
    encode_scale,
    scale_format,
)

NAMES = list(orc.SCALES)
MODES = ("rne", "half_up", "half_away", "ceil", "floor")


def test_registry_and_lookup():
    assert set(SCALE_FORMATS) == set(NAMES)
    assert scale_format("E5M3") is E5M3
    with pytest.raises(ValueError) as e:
        scale_format("e4m4")
    assert str(e.value) == "unknown scale format 'e4m4'; valid formats: e8m0, ue4m3, e5m3, fp16"


@pytest.mark.parametrize("name", NAMES)
def test_every_code_decodes_or_is_rejected(name):
    fmt = scale_format(name)
    n = 1 << orc.SCALES[name][3]
    valid, reserved = [], []
    for c in range(n):
        try:
            valid.append((c, orc.to_float(orc.scale_code_value(name, c))))
        except ValueError:
            reserved.append(c)
    codes = np.array([c for c, _ in valid])
    got = decode_scale(codes, fmt)
    assert np.array_equal(got, np.array([v for _, v in valid]), equal_nan=True)
    for c in reserved[:: max(1, len(reserved) // 64)]:
        with pytest.raises(ValueError, match=f"{name} scale code {c} is reserved or out of range"):
            decode_scale([c], fmt)


def test_published_values_and_reserved_codes():
    # specs/hbq.md §5.1: E8M0 = 2**(E-127), 0xFF NaN.
    assert decode_scale([0, 127, 254], E8M0).tolist() == [2.0**-127, 1.0, 2.0**127]
    assert np.isnan(decode_scale([255], E8M0)[0])
    # §5.4: UE4M3 subnormal m/8 * 2**-6, max 448 at 0x7E, 0x7F NaN; 1.0 is 0x38.
    assert decode_scale([1, 0x08, 0x38, 0x7E], UE4M3).tolist() == [2.0**-9, 2.0**-6, 1.0, 448.0]
    assert np.isnan(decode_scale([0x7F], UE4M3)[0])
    # §1.3: E5M3 min 2**-14 (0x08), max 61440 (0xF7), E = 0 and E = 31 reserved.
    assert decode_scale([0x08, 0x78, 0xF7], E5M3).tolist() == [2.0**-14, 1.0, 61440.0]
    with pytest.raises(ValueError) as e:
        decode_scale([0x07], E5M3)
    assert str(e.value) == "e5m3 scale code 7 is reserved or out of range (valid: 8..247)"
    with pytest.raises(ValueError) as e:
        decode_scale([0x80], UE4M3)
    want = "ue4m3 scale code 128 is reserved or out of range (valid: 0..126, NaN 127)"
    assert str(e.value) == want
    with pytest.raises(TypeError):
        decode_scale([1.0], E8M0)
    assert E5M3.max_value == 61440 and E5M3.min_value == 2.0**-14
    assert UE4M3.max_value == 448 and UE4M3.min_value == 0 and FP16.max_value == 65504


def test_fp16_codes_are_ieee_binary16_bit_patterns():
    codes = np.arange(0x7C00, dtype=np.uint16)
    assert np.array_equal(decode_scale(codes, FP16), codes.view(np.float16).astype(np.float64))
    # numpy's float64 -> float16 cast rounds to nearest even: an independent RNE encoder.
    rng = np.random.default_rng(7)
    v = np.abs(rng.standard_normal(5000)) * 2.0 ** rng.integers(-26, 16, 5000)
    v = v[v < 65504]  # above, numpy gives Inf where the scale encoder saturates
    want = v.astype(np.float16).view(np.uint16)
    assert np.array_equal(encode_scale(v, FP16), want)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_every_code_reencodes_to_itself(name, mode):
    fmt = scale_format(name)
    c = np.arange(fmt.min_code, fmt.max_code + 1)
    for d in (1.0, 10.5, 3.0 / 1024):
        got = encode_scale(decode_scale(c, fmt) * d, fmt, rounding=mode, divisor=d)
        assert got.dtype == (np.uint16 if name == "fp16" else np.uint8)
        assert np.array_equal(got, c)


def _probes(name):
    pts = sorted(orc.scale_code_value(name, c) for c in orc.SCALES[name][5])
    if name == "fp16":  # 31744 codes: keep every 37th interval plus both ends
        idx = sorted(set(range(0, len(pts) - 1, 37)) | {0, 1, len(pts) - 2})
        pairs = [(pts[i], pts[i + 1]) for i in idx]
    else:
        pairs = list(zip(pts[:-1], pts[1:], strict=True))
    mids = [(a + b) / 2 for a, b in pairs]
    ends = [pts[0] / 2, pts[0] / 3, pts[-1] * 2, pts[-1] + (pts[-1] - pts[-2]) / 2, Fraction(0)]
    return np.array([float(v) for v in mids + [a for a, _ in pairs] + ends])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", MODES)
def test_ties_and_neighbours_match_the_fraction_oracle(name, mode):
    fmt = scale_format(name)
    base = _probes(name)
    for d in (1.0, 10.5, 17.5, 8.25, 3.0 / 1024):  # HBQ's 6*1.75, 7*2.5, 6*1.375
        v = base * d
        v = np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, 0)])
        got = encode_scale(v, fmt, rounding=mode, divisor=d)
        want = np.array([orc.encode_scale(float(x), name, mode, d) for x in v])
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (d, v[bad[:5]], got[bad[:5]], want[bad[:5]])


def test_hand_worked_hbq_scale():
    # HBQ §1.6 step 3 with Emax * max(SIG_2) = 6 * 1.75 = 10.5: amax = 10.5 * 1.5625 gives raw
    # 1.5625 = 2**0 * (1 + 4.5/8): the mantissa tie 4.5 goes up to 5 (half-up) -> code
    # E=15, M=5 -> 0x7D; RNE picks the even M=4 -> 0x7C; floor 0x7C; ceil 0x7D.
    amax = 10.5 * 1.5625
    got = [encode_scale(amax, E5M3, rounding=m, divisor=10.5).item() for m in MODES]
    assert got == [0x7C, 0x7D, 0x7D, 0x7D, 0x7C]
    # Mantissa carry: raw = 1.96875 = 1 + 7.75/8 -> m = 8 -> E + 1, M = 0 -> 2.0 (0x80).
    assert encode_scale(1.96875 * 10.5, E5M3, rounding="half_up", divisor=10.5).item() == 0x80
    # All-zero block: raw 0 clips to 2**-14 (0x08); overflow clips to 61440 (0xF7).
    assert encode_scale([0.0, 1e-30, 1e30, np.inf], E5M3, divisor=10.5).tolist() == [8, 8, 247, 247]


def test_clamping_and_specials():
    got = encode_scale([0.0, 1e-300, 2.0**-128, 1e300, np.inf, np.nan], E8M0)
    assert got.tolist() == [0, 0, 0, 254, 254, 255]
    # 2**-10 is the tie between 0 and the smallest subnormal 2**-9 (code 1): RNE keeps 0.
    got = encode_scale([0.0, 2.0**-11, 2.0**-10, 1.5 * 2.0**-10, 460.0, 1e9, np.nan], UE4M3)
    assert got.tolist() == [0, 0, 0, 1, 0x7E, 0x7E, 0x7F]
    assert encode_scale([2.0**-10], UE4M3, rounding="half_up").tolist() == [1]
    # ceil never rounds a positive value down to zero: 2**-11 -> the smallest subnormal.
    assert encode_scale([2.0**-11], UE4M3, rounding="ceil").tolist() == [1]
    # E8M0 nearest on the linear scale: 1.5 ties between 1 (E=127, odd) and 2 (E=128, even).
    assert encode_scale([1.5, 1.4999, 3.0], E8M0).tolist() == [128, 127, 128]
    assert encode_scale([1.5], E8M0, rounding="half_up").tolist() == [128]
    assert encode_scale([1.5], E8M0, rounding="floor").tolist() == [127]
    with pytest.raises(ValueError) as e:
        encode_scale([1.0, -1.0], E5M3)
    assert str(e.value) == "scale values must be >= 0, got -1.0"
    with pytest.raises(ValueError) as e:
        encode_scale([np.nan], E5M3)
    assert str(e.value) == "NaN scale value, but scale format 'e5m3' has no NaN code"
    with pytest.raises(ValueError) as e:
        encode_scale([1.0], E5M3, rounding="up")
    assert str(e.value) == (
        "rounding='up'; valid choices: 'rne', 'half_up', 'half_away', 'ceil', 'floor'"
    )
    with pytest.raises(ValueError) as e:
        encode_scale([1.0], FP16, divisor=1 + 2.0**-45)
    assert str(e.value) == (
        "divisor 1.0000000000000284 has 46 significant bits; at most 41 keep the rounding exact"
    )


@pytest.mark.parametrize("name", NAMES)
def test_random_values_match_the_oracle(name):
    rng = np.random.default_rng(99)
    fmt = scale_format(name)
    lo, hi = np.log2(max(fmt.min_value, 2.0**-30)) - 2, np.log2(fmt.max_value) + 2
    v = 2.0 ** rng.uniform(lo, hi, 400)
    d = float(Fraction(int(rng.integers(2**30, 2**31)), 2**30))
    for mode in MODES:
        got = encode_scale(v, fmt, rounding=mode, divisor=d)
        want = [orc.encode_scale(float(x), name, mode, d) for x in v]
        assert got.tolist() == want
