"""Fixed-point units of the DeltaLLM reference: exp2 LUT, exp2 unit, log2 scale, INT8 quantizer."""

from fractions import Fraction

import numpy as np
import pytest

from coaccel.models import deltallm as dl


def _lut_oracle(f: int) -> int:
    """round_half_up(32768 · 2^(-f/256)), with the tie decided on a 60-digit value."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    x = Decimal(32768) * (Decimal(2) ** (Decimal(-f) / Decimal(256)))
    return int((x + Decimal("0.5")).to_integral_value(rounding="ROUND_FLOOR"))


def test_lut_check_values():
    assert dl.EXP2_LUT_Q15[0] == 32768
    assert dl.EXP2_LUT_Q15[128] == 23170
    assert dl.EXP2_LUT_Q15[255] == 16428


def test_lut_every_entry():
    assert [int(x) for x in dl.EXP2_LUT_Q15] == [_lut_oracle(f) for f in range(256)]
    assert not dl.EXP2_LUT_Q15.flags.writeable


def test_exp2_unit_every_code_point():
    e = np.arange(0, 18 * 256, dtype=np.int64)
    want = [0 if (x >> 8) >= 16 else _lut_oracle(x & 255) >> (x >> 8) for x in range(e.size)]
    got = dl.exp2_neg_q15(e)
    assert got.dtype == np.int64
    assert got.tolist() == want
    assert dl.exp2_neg_q15(np.array([dl.EXP_MAX_Q8]))[0] == 16428 >> 15


def test_exp2_unit_rejects_bad_input():
    with pytest.raises(ValueError, match="must be >= 0"):
        dl.exp2_neg_q15(np.array([3, -1]))
    with pytest.raises(TypeError, match="integer array"):
        dl.exp2_neg_q15(np.array([0.5]))


@pytest.mark.parametrize("c", [1e-6, 3.7e-4, 0.0125, 0.5, 1.0, 2.0, 1.5, 1000.0, 65535.0])
def test_log2_scale(c):
    mant, sh = dl.log2_scale(c)
    assert 2**23 <= mant < 2**24 and sh >= 0
    exact = Fraction(c) * 2 ** (sh + 8)
    assert abs(Fraction(mant) - exact) <= Fraction(1, 2)


@pytest.mark.parametrize("c", [0.0, -1.0, float("inf"), float("nan"), 2.0**16])
def test_log2_scale_rejects(c):
    with pytest.raises(ValueError, match="log2_scale"):
        dl.log2_scale(c)


def test_quantize_int8_rounds_half_up_and_clamps():
    x = np.array([[[127.0, 0.5, 1.5, -0.5, -1.5, 2.5, -126.5]]])
    q, s = dl.quantize_int8(x)
    assert s.tolist() == [1.0]
    assert q.dtype == np.int8
    assert q[0, 0].tolist() == [127, 1, 2, 0, -1, 3, -126]


def test_quantize_int8_per_head_scale_and_zero_head():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 4, 8))
    x[1] = 0.0
    q, s = dl.quantize_int8(x)
    assert s[1] == 1.0 and not q[1].any()
    for h in (0, 2):
        assert s[h] == np.abs(x[h]).max() / 127.0
        assert np.abs(q[h]).max() == 127
        assert np.all(np.abs(q[h] * s[h] - x[h]) <= s[h] / 2 + 1e-12)


def test_quantize_int8_rejects():
    with pytest.raises(ValueError, match="shape"):
        dl.quantize_int8(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        dl.quantize_int8(np.full((1, 1, 1), np.nan))
