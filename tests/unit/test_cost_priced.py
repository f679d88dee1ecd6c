"""The cost model's typed input (coaccel.sim.common.priced) and coaccel.cost.price."""

from __future__ import annotations

import dataclasses

import pytest

from coaccel.cost import arch_area, evaluate, pe_format_of, price, shipped_table
from coaccel.sim.common import BufferUse, LogicUse, MacArray, OffChipUse, PricedComponents
from coaccel.sim.hbq_asic import load_arch, priced_components
from coaccel.spine.config import override
from coaccel.spine.errors import CoaccelError


def _design(**kw: object) -> PricedComponents:
    base = dict(
        arch="toy",
        kind="test",
        workload="w:1",
        mode="analytical",
        seconds=0.0,
        macs=(MacArray("pe_array", units=8, macs=1000, cost_model="amove", fmt=None),),
        buffers=(),
        logic=(),
        offchip=(OffChipUse("dram", "lpddr4", 32.0, 25.0, "a test figure", 3000, 1000),),
    )
    base.update(kw)
    return PricedComponents(**base)  # type: ignore[arg-type]


def test_price_published_mac_and_dram_by_hand() -> None:
    t = shipped_table("system_28nm.yaml")
    a, e = t["amove_area_um2_per_mac"].value, t["amove_energy_fj_per_mac"].value
    cb = price(_design())
    assert cb.area_um2["pe_array"] == pytest.approx(8 * a, rel=1e-12)
    assert cb.energy_j["pe_array"] == pytest.approx(1000 * e * 1e-15, rel=1e-12)
    assert cb.energy_j["dram"] == pytest.approx(4000 * 32.0e-12, rel=1e-12)
    assert cb.energy_sigma_j["dram"] == pytest.approx(0.25 * 4000 * 32.0e-12, rel=1e-12)
    assert cb.energy_j["leakage"] == 0.0  # zero run time
    assert "lpddr4" in cb.sources["dram"]


def test_price_area_only_has_no_energy() -> None:
    cb = price(_design(workload="", mode=""))
    assert not cb.energy_j and cb.area_um2["pe_array"] > 0


def test_price_unknown_keys_are_errors() -> None:
    bad_mac = MacArray("pe_array", units=1, macs=0, cost_model="nope", fmt=None)
    with pytest.raises(CoaccelError, match="no published per-MAC figures for cost_model 'nope'"):
        price(_design(macs=(bad_mac,)))
    with pytest.raises(CoaccelError, match="no cost figures for logic 'fp8_adder'"):
        price(_design(logic=(LogicUse("psum_logic", "fp8_adder", 4, 10.0),)))
    with pytest.raises(CoaccelError, match="needs the operand formats"):
        price(_design(macs=(MacArray("pe_array", 1, 0, "pe_model", None),)))


def test_price_buffer_energy_scales_with_bytes() -> None:
    b1 = BufferUse("act_buffer", banks=4, depth_words=256, bank_width_bits=128, read_bytes=100)
    b2 = dataclasses.replace(b1, read_bytes=300)
    e1 = price(_design(buffers=(b1,))).energy_j["act_buffer"]
    e2 = price(_design(buffers=(b2,))).energy_j["act_buffer"]
    assert e2 == pytest.approx(3 * e1, rel=1e-12) and e1 > 0


def test_pe_pricing_comes_from_the_config_key_not_the_name() -> None:
    amove = load_arch("amove_28nm")
    assert amove.pe_array.cost_model == "amove" and pe_format_of(amove) is None
    renamed = override(load_arch("hbq_e_28nm"), {"name": "my_amove_woq_variant"})
    assert pe_format_of(renamed) is not None
    published = override(load_arch("hbq_e_28nm"), {"pe_array.cost_model": "woq"})
    assert pe_format_of(published) is None
    assert arch_area(published).pe.source.startswith("published")


def test_hbq_priced_components_area_only_and_run() -> None:
    from coaccel.simulation import simulate

    arch = load_arch("hbq_e_28nm")
    pc = priced_components(arch)
    assert not pc.has_run and [b.name for b in pc.buffers] == [
        "act_buffer", "wgt_buffer", "psum_buffer"
    ]  # fmt: skip
    assert pc.macs[0].units == 32 * 128
    st = simulate(arch, "llama-3.2-3b:decode_2k", mode="analytical")
    run = priced_components(arch, st)
    assert run.macs[0].macs == st.macs
    assert run.offchip[0].read_bytes == st.dram.read_bytes
    assert run.buffers[2].write_bytes == st.buffers["PSUM"].write_bytes
    assert evaluate(st, arch).total_energy_j == price(run).total_energy_j


def test_evaluate_takes_an_architecture_name() -> None:
    from coaccel.simulation import simulate

    arch = load_arch("hbq_e_28nm")
    st = simulate(arch, "llama-3.2-3b:decode_2k", mode="analytical")
    assert evaluate(st, "hbq_e_28nm").total_energy_j == evaluate(st, arch).total_energy_j
    with pytest.raises(CoaccelError, match="no shipped architecture"):
        evaluate(st, "hbq_e_28")


def test_evaluate_rejects_swapped_arguments() -> None:
    arch = load_arch("hbq_e_28nm")
    with pytest.raises(CoaccelError, match="takes a simulation result first"):
        evaluate("hbq_e_28nm", arch)
