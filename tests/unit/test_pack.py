"""Bit packing: layouts against an independent big-integer packer, round trips, RTL hex words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from coaccel.models.formats import (
    PackedTensor,
    QuantizedTensor,
    format_names,
    pack,
    pack_bits,
    quantize,
    to_verilog_hex,
    unpack,
    unpack_bits,
)


def _bigint_pack(codes: list[int], width: int) -> bytes:
    """Reference packer: code g at bits [width*g +: width] of one integer, little-endian bytes."""
    v = sum(int(c) << (width * g) for g, c in enumerate(codes))
    return v.to_bytes((len(codes) * width + 7) // 8, "little")


def test_hand_worked_layouts():
    # E2M1 codes 1, 2, 3: code 0 in bits [3:0], code 1 in [7:4] -> byte 0x21; code 2 -> 0x03.
    assert pack_bits([1, 2, 3], 4).tolist() == [0x21, 0x03]
    # E2M2 (5-bit) codes 0x1F, 0x01: bits [4:0] = 11111, [9:5] = 00001 -> 0x3F, 0x00.
    assert pack_bits([0x1F, 0x01], 5).tolist() == [0x3F, 0x00]
    # A 16-bit FP16 scale code is stored little-endian.
    assert pack_bits([0x1234], 16).tolist() == [0x34, 0x12]
    # HBQ L2 codes (2 bits) 3, 0, 1, 2 -> 0b10_01_00_11 = 0x93.
    assert pack_bits([3, 0, 1, 2], 2).tolist() == [0x93]


@pytest.mark.parametrize("width", range(1, 17))
def test_random_codes_match_the_bigint_packer(width):
    rng = np.random.default_rng(width)
    for n in (1, 3, 8, 13, 32):
        codes = rng.integers(0, 1 << width, (4, n))
        got = pack_bits(codes, width)
        assert got.dtype == np.uint8 and got.shape == (4, (n * width + 7) // 8)
        for row, c in zip(got, codes, strict=True):
            assert row.tobytes() == _bigint_pack(list(c), width)
        back = unpack_bits(got, width, n)
        assert back.dtype == (np.uint8 if width <= 8 else np.uint16)
        assert np.array_equal(back, codes)


def test_errors():
    with pytest.raises(ValueError) as e:
        pack_bits([16], 4)
    assert str(e.value) == "code 16 does not fit in 4 bits"
    with pytest.raises(ValueError) as e:
        pack_bits([1], 17)
    assert str(e.value) == "width=17; expected an integer in 1..16"
    with pytest.raises(TypeError):
        pack_bits([1.0], 4)
    with pytest.raises(ValueError) as e:
        unpack_bits(np.zeros(2, np.uint8), 4, 5)
    assert str(e.value) == "2 byte(s) cannot hold 5 codes of 4 bits"
    with pytest.raises(ValueError) as e:
        to_verilog_hex(np.array([[0x21, 0x13]], np.uint8), 12)
    assert str(e.value) == "row 0 has bits set above bit 11"


def test_verilog_hex_words():
    rows = pack_bits(np.array([[1, 2, 3], [15, 0, 10]]), 4)
    assert to_verilog_hex(rows, 12) == ["321", "a0f"]
    assert to_verilog_hex(pack_bits(np.array([[0x1F, 0x01]]), 5), 10) == ["03f"]
    # A 32-element MXFP4 block is one 128-bit word: element 31 in the top digit.
    codes = np.zeros((1, 32), np.uint8)
    codes[0, 31] = 0xF
    codes[0, 0] = 0x1
    assert to_verilog_hex(pack_bits(codes, 4), 128) == ["f" + "0" * 30 + "1"]


def _options(name: str) -> list[dict]:
    if name.startswith("hbq"):
        return [{"role": "weight"}, {"role": "activation"}]
    if name in ("int",):
        return [{}, {"scale_format": "e5m3", "bits": 8}]
    return [{}]


@pytest.mark.parametrize("name", format_names())
def test_pack_unpack_round_trip_for_every_format(name):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    for opt in _options(name):
        q = quantize(x, name, backend="numpy", **opt)
        p = pack(q)
        assert isinstance(p, PackedTensor)
        assert p.elements.shape[-1] == (q.codes.shape[-1] * q.spec.element_bits + 7) // 8
        assert p.scales.shape[-1] == (q.spec.scale_bits + 7) // 8
        r = unpack(p)
        assert np.array_equal(r.codes, q.codes) and r.codes.dtype == np.uint8
        assert np.array_equal(r.scales, q.scales) and r.scales.dtype == q.scales.dtype
        for field in ("l2_codes", "scheme"):
            a, b = getattr(q, field), getattr(r, field)
            assert (a is None) == (b is None)
            if a is not None:
                assert np.array_equal(a, b)
        assert r.tensor_scale == q.tensor_scale
        assert np.array_equal(r.dequantize(np.float64), q.dequantize(np.float64))


@dataclass(frozen=True)
class _TwoLevelSpec:
    """A stand-in two-level spec (HBQ-like fields) for the generic packer."""

    name: str = "two_level_test"
    block: int = 16
    element_bits: int = 5
    scale_bits: int = 8
    l2_bits: int = 2
    ub: int = 4
    default_rounding: str = "rne"
    rounding_modes: tuple[str, ...] = ("rne",)


def test_l2_codes_and_scheme_bits_are_packed_per_block():
    spec = _TwoLevelSpec()
    rng = np.random.default_rng(9)
    codes = rng.integers(0, 32, (2, 3, 16)).astype(np.uint8)
    scales = rng.integers(8, 248, (2, 3)).astype(np.uint8)
    l2 = rng.integers(0, 4, (2, 3, 4)).astype(np.uint8)
    scheme = rng.integers(0, 2, (2, 3)).astype(np.uint8)
    q = QuantizedTensor(spec=spec, codes=codes, scales=scales, shape=(2, 48), axis=1,
                        rounding="rne", l2_codes=l2, scheme=scheme)  # fmt: skip
    p = pack(q)
    assert p.l2.shape == (2, 3, 1) and p.scheme.shape == (2, 3, 1)
    assert p.l2[1, 2, 0] == l2[1, 2, 0] | l2[1, 2, 1] << 2 | l2[1, 2, 2] << 4 | l2[1, 2, 3] << 6
    assert p.nbytes() == 2 * 3 * (10 + 1 + 1 + 1)
    r = unpack(p)
    for a, b in ((r.codes, codes), (r.scales, scales), (r.l2_codes, l2), (r.scheme, scheme)):
        assert np.array_equal(a, b)
    # A block shorter than spec.block (HBQ's short axis) keeps its own length.
    q = QuantizedTensor(spec=spec, codes=codes[..., :8], scales=scales, shape=(2, 24), axis=1,
                        rounding="rne", l2_codes=l2[..., :2], scheme=scheme)  # fmt: skip
    p = pack(q)
    assert p.n_per_block == 8
    r = unpack(p)
    assert np.array_equal(r.codes, codes[..., :8]) and np.array_equal(r.l2_codes, l2[..., :2])
