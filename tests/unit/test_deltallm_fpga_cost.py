"""FPGA designs through the typed cost interface: resource counts and energy per resource."""

from __future__ import annotations

import pytest

import coaccel
from coaccel.cost import FPGA_TABLE, arch_area, evaluate, shipped_table
from coaccel.sim.common import FpgaResourceUse
from coaccel.sim.deltallm_fpga import estimate_resources
from coaccel.simulation import load_arch
from coaccel.spine.config import override


@pytest.fixture(scope="module")
def run():
    _, arch = load_arch("kv260")
    arch = override(arch, {"keys.layers_simulated": 1})
    return arch, coaccel.simulate(arch, "llama-3.2-1b:prefill_64", mode="analytical")


def test_resources_are_the_estimate(run):
    arch, _ = run
    r = estimate_resources(arch)
    cb = arch_area(arch)
    assert dict(cb.resources) == {"dsp": r.dsps, "bram36": r.bram36, "uram": r.urams,
                                  "lut": r.luts, "ff": r.ffs}  # fmt: skip
    assert cb.energy_j == {} and cb.total_area_um2 == 0


def test_energy_is_operations_times_the_table(run):
    arch, res = run
    cb = evaluate(res, arch)
    t = shipped_table(FPGA_TABLE)
    r = estimate_resources(arch)
    busy = res.attention_compute_cycles
    want = {
        "mac_dsp": res.mac_operations * t.value("dsp_energy_pj_per_op") * 1e-12,
        # each PV MAC also rescales o (a 40 x 17 product: 2 DSP tiles)
        "rescale_dsp": res.pv_operations * 2 * t.value("dsp_energy_pj_per_op") * 1e-12,
        # 16 lanes x 6 DSP tiles (two exponents, the l rescale) per softmax column
        "exp_dsp": res.softmax_columns * 16 * 6 * t.value("dsp_energy_pj_per_op") * 1e-12,
        # the normaliser's o * r (40 x 42 bits: 6 tiles) per output element
        "norm_dsp": res.normalized_outputs * 6 * t.value("dsp_energy_pj_per_op") * 1e-12,
        "bram": res.bram_read_bytes * t.value("bram36_energy_pj_per_byte") * 1e-12,
        "uram": res.uram_read_bytes * t.value("uram_energy_pj_per_byte") * 1e-12,
        "lut": r.luts * busy * t.value("lut_energy_pj_per_cycle") * 1e-12,
        "ff": r.ffs * busy * t.value("ff_energy_pj_per_cycle") * 1e-12,
        "fpga_static": t.value("pl_static_w") * res.attention_cycles / 250e6,
        "dram": res.offchip.total_bytes * arch.dram.energy_pj_per_byte * 1e-12,
    }
    for k, v in want.items():
        assert cb.energy_j[k] == pytest.approx(v, rel=1e-12), k
        assert cb.sources[k]
    assert res.mac_operations > 0 and res.uram_read_bytes > 0
    assert 0 < res.pv_operations < res.mac_operations


def test_activity_by_hand_on_a_dense_prefill(run):
    """θ = 0, τ = ∞: every key dense, nothing skipped. Per (layer, KV head) with T = 64,
    P_q = 4 (16 blocks), d = 64, L = 16: QK issues L·d per (block, column) and once more for
    each mixed column, PV L·d per visited column."""
    arch, _ = run
    dense = override(arch, {"algorithm.theta": 0, "algorithm.tau_log2": None})
    res = coaccel.simulate(dense, "llama-3.2-1b:prefill_64", mode="analytical")
    w, t, p = 16, 64, 4
    visited = sum(min(t, (b + 1) * p) for b in range(t // p))
    # mixed columns: exact for the block's last lane window and delta for an earlier lane
    mixed = sum(max(0, min(b * p + p - 1 - w, t) - max(b * p - w + 1, 1) + 1)
                for b in range(t // p))  # fmt: skip
    per_head = 16 * 64 * (visited + mixed) + 16 * 64 * visited
    assert res.mac_operations == per_head * 8 * 16  # 8 KV heads, 16 layers
    assert res.pv_operations == 16 * 64 * visited * 8 * 16
    # the normaliser scales L·d outputs per query block
    assert res.normalized_outputs == (t // p) * 16 * 64 * 8 * 16


def test_bad_resource_kind():
    with pytest.raises(ValueError, match="valid: lut, ff, dsp, bram36, uram"):
        FpgaResourceUse("x", "carry", 1)


def test_tellme_priced_by_its_counts():
    _, arch = load_arch("tellme_v2")
    cb = arch_area(arch)
    assert dict(cb.resources) == {"dsp": arch.tellme.dsps, "bram36": arch.tellme.bram36}
