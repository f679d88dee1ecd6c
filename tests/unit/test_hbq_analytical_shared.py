"""What the analytical HBQ model shares between design points is what it may share: its byte
count is :func:`coaccel.trace.storage_bytes` exactly, and tile occupancies (kept across designs
by their PE-side constants) do not depend on the clock or the DRAM."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from coaccel.sim.hbq_asic import load_arch
from coaccel.sim.hbq_asic._hw import hw_params
from coaccel.sim.hbq_asic.analytical import _CLOCK_SIDE, _nbytes
from coaccel.sim.hbq_asic.engine import pe_tile_closed_form
from coaccel.spine.trace import storage_bytes


def test_nbytes_equals_storage_bytes() -> None:
    rng = np.random.default_rng(7)
    bits = [Fraction(16), Fraction(33, 8), Fraction(17, 2), Fraction(4321, 1000), 4, 1]
    bits += [Fraction(int(rng.integers(1, 200)), int(rng.integers(1, 64))) for _ in range(50)]
    for b in bits:
        for elems in [0, 1, 7, 8, 9, *map(int, rng.integers(0, 10**12, size=40))]:
            assert _nbytes(elems, Fraction(b)) == storage_bytes(elems, b), (elems, b)


@pytest.mark.parametrize("name", ["hbq_e_28nm", "hbq_a_28nm", "woq_w4a16_28nm"])
def test_tile_occupancy_ignores_the_clock_and_the_dram(name: str) -> None:
    hw = hw_params(load_arch(name))
    assert set(_CLOCK_SIDE) <= {f.name for f in dataclasses.fields(hw)}
    other = dataclasses.replace(hw, dram_bytes_per_cycle=hw.dram_bytes_per_cycle * 3.7 + 1,
                                dram_latency_cycles=hw.dram_latency_cycles * 5 + 11,
                                freq_mhz=hw.freq_mhz * 2.5)  # fmt: skip
    fa, fb = next(iter(hw.act_formats)), next(iter(hw.wgt_formats))
    rng = np.random.default_rng(3)
    for _ in range(200):
        m, n, k = (int(x) for x in rng.integers(1, 700, size=3))
        rd = bool(rng.integers(0, 2))
        kw = {"has_psum_read": rd, "fmt_a": fa, "fmt_b": fb}
        assert pe_tile_closed_form(hw, m, n, k, **kw) == pe_tile_closed_form(other, m, n, k, **kw)
