"""The shared on-chip buffer model (coaccel.sim.common.buffer) and the HBQ buffers built on it."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from coaccel.sim.common import OnChipBuffer
from coaccel.sim.hbq_asic import ARCH_NAMES, load_arch
from coaccel.sim.hbq_asic._hw import hw_params
from coaccel.spine.config import ConfigError, override

# Access widths of the shipped HBQ architectures as their files gave them before the buffers had
# one meaning of width (ACT and WGT: all banks together; PSUM: one bank word). The HBQ results
# depend on them, so they must not move.
OLD_WIDTHS = {
    "hbq_a_28nm": (680, 576, 136),
    "hbq_e_28nm": (664, 544, 136),
    "nvfp4_28nm": (576, 576, 256),
    "mxfp4_28nm": (544, 544, 256),
    "mxfp_w4a8_28nm": (1056, 544, 256),
    "amove_28nm": (544, 544, 256),
    "woq_w4a16_28nm": (2048, 544, 256),
}


def test_every_shipped_arch_is_covered():
    assert sorted(OLD_WIDTHS) == sorted(ARCH_NAMES)


@pytest.mark.parametrize("name", sorted(OLD_WIDTHS))
def test_hbq_buffers_keep_their_access_widths(name):
    arch = load_arch(name)
    act, wgt, psum = OLD_WIDTHS[name]
    b = arch.buffers
    assert (b.act.access_width_bits, b.wgt.access_width_bits) == (act, wgt)
    assert b.psum.bank_width_bits == psum
    hw = hw_params(arch)
    assert (hw.act_width_bits, hw.wgt_width_bits) == (act, wgt)
    assert hw.psum_word_bits <= b.psum.bank_width_bits


def test_hbq_e_act_is_four_banks_plus_the_scale_register_file():
    act = load_arch("hbq_e_28nm").buffers.act
    assert (act.banks, act.bank_width_bits, act.sideband_bits) == (4, 160, 24)
    assert act.access_width_bits == 4 * 160 + 24 == 664
    assert act.size_bytes == 96 * 1024


def test_old_width_key_is_rejected_with_the_new_names():
    arch = load_arch("hbq_e_28nm")
    with pytest.raises(ConfigError) as e:
        override(arch, {"buffers.act.width_bits": 664})
    (line,) = [str(p) for p in e.value.problems]
    assert line == (
        "<override of HbqArchConfig>: buffers.act.width_bits: unknown key 'width_bits'; valid "
        "keys: size_kib, banks, bank_width_bits, sideband_bits, ports, double_buffered "
        "(did you mean 'bank_width_bits'?)"
    )


def test_psum_bank_word_must_hold_a_block():
    arch = load_arch("hbq_e_28nm")
    with pytest.raises(ConfigError) as e:
        override(arch, {"buffers.psum.bank_width_bits": 128})
    assert [str(p) for p in e.value.problems] == [
        "<override of HbqArchConfig>: buffers.psum.bank_width_bits: a PSUM bank word must hold "
        "16 partial sums in mxint8_running: 136 bits"
    ]


# ---- the model -----------------------------------------------------------------------------

BUF = OnChipBuffer(size_kib=10, banks=4, bank_width_bits=160, sideband_bits=24, ports=1)


def test_words_per_access():
    # 83 B = 664 bits: one full-width access; 84 B: two
    assert BUF.accesses_for_bytes([0, 1, 83, 84, 166, 167]).tolist() == [0, 1, 1, 2, 2, 3]
    # bank words ignore the side band: 20 B = 160 bits
    assert BUF.bank_words_for_bytes([0, 20, 21, 80]).tolist() == [0, 1, 2, 4]
    # exact storage bits: 128 elements at 41/8 bits = 656 bits, one 664-bit access
    assert BUF.accesses_for_bits(128 * Fraction(41, 8)) == 1
    assert BUF.accesses_for_bits(665) == 2
    with pytest.raises(ValueError, match="bits must be >= 0"):
        BUF.accesses_for_bits(-1)
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        BUF.accesses_for_bytes([-8])
    with pytest.raises(ValueError, match="whole numbers"):
        BUF.bank_words_for_bytes([1.5])


def test_bank_of_word_addresses():
    assert BUF.bank_of([0, 1, 2, 3, 4, 7, 8, 1001]).tolist() == [0, 1, 2, 3, 0, 3, 0, 1]
    with pytest.raises(ValueError, match="word_addresses must be >= 0"):
        BUF.bank_of([-1])


def test_conflicts_in_one_cycle():
    assert BUF.conflict_cycles([0, 1, 2, 3]) == 0  # one word per bank
    assert BUF.conflict_cycles([0, 4]) == 1  # two words in bank 0
    assert BUF.conflict_cycles([0, 4, 8, 1]) == 2  # three in bank 0
    assert BUF.conflict_cycles([5, 5]) == 1  # a read and a write of one word: two accesses
    assert BUF.conflict_cycles([]) == 0
    dual = OnChipBuffer(size_kib=10, banks=4, bank_width_bits=160, ports=2)
    assert dual.conflict_cycles([0, 4]) == 0
    assert dual.conflict_cycles([0, 4, 8]) == 1
    assert dual.conflict_cycles([0, 4, 8, 12, 16]) == 2


def test_conflicts_over_many_cycles_with_unused_slots():
    cycles = np.array([[0, 1, 2, 3], [0, 4, -1, -1], [-1, -1, -1, -1], [2, 6, 10, 3]])
    got = BUF.conflict_cycles(cycles)
    assert got.tolist() == [0, 1, 0, 2]
    # each row equals the one-cycle answer on its used slots
    for row, want in zip(cycles, got, strict=True):
        assert BUF.conflict_cycles(row[row >= 0]) == want
    with pytest.raises(ValueError, match="1-D or 2-D"):
        BUF.conflict_cycles(np.zeros((2, 2, 2), dtype=np.int64))


def test_capacity_checks():
    assert BUF.size_bytes == 10240
    assert BUF.fits(10240) and not BUF.fits(10241)
    assert BUF.fits(5120, slots=2) and not BUF.fits(5121, slots=2)
    assert BUF.fits([0, 10240, 10241]).tolist() == [True, True, False]
    BUF.check_fits(5120, slots=2, what="a 2-slot tile")
    with pytest.raises(ValueError) as e:
        BUF.check_fits(6000, slots=2, what="a 128 x 48 ACT tile")
    assert str(e.value) == (
        "a 128 x 48 ACT tile needs 2 x 6000 B = 12000 B, more than the buffer's 10240 B (10 KiB)"
    )
    with pytest.raises(ValueError, match="slots must be >= 1"):
        BUF.fits(1, slots=0)
