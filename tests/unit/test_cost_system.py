"""Accelerator-level cost (coaccel.cost.arch_area / evaluate) on the shipped architectures.

Expected values are worked out by hand from the cited figures (specs/hbq.md §2.3, §2.5) and the
arch files' buffer geometry, not read back from the code under test.
"""

from __future__ import annotations

import math

import pytest

from coaccel.cost import PeFormat, arch_area, evaluate, pe_cost, pe_format_of
from coaccel.sim.hbq_asic import load_arch
from coaccel.sim.hbq_asic.stats import BufferAccess, DramAccess, HbqSimStats
from coaccel.spine.config import override
from coaccel.targets.hbq_asic._rpm import rpm_energy_j

HBQ_E = PeFormat(
    weight="e2m1", act="e2m2", block=128, scale="e5m3", ub=32, l2_act="sig1", l2_weight="mix"
)


@pytest.mark.parametrize(
    ("arch", "want"),
    [
        ("hbq_e_28nm", HBQ_E),
        (
            "hbq_a_28nm",
            PeFormat(
                weight="e2m1",
                act="e2m2",
                block=128,
                scale="e5m3",
                ub=8,
                l2_act="sig1",
                l2_weight="mix",
            ),
        ),
        # MXFP W4A8: E2M1 x E2M5 with the PoT scale per 32 (§3.5: the 151 fJ row = [R-PM] MXFP)
        ("mxfp_w4a8_28nm", PeFormat(weight="e2m1", act="e2m5", block=32, scale="pot")),
        ("mxfp4_28nm", PeFormat(weight="e2m1", act="e2m1", block=32, scale="pot")),
        # the repo's NVFP4: E2M1, E5M3 scale per 16 (§5.4)
        ("nvfp4_28nm", PeFormat(weight="e2m1", act="e2m1", block=16, scale="e5m3")),
        ("amove_28nm", None),
        ("woq_w4a16_28nm", None),
    ],
)
def test_pe_format_of_shipped_archs(arch: str, want: PeFormat | None) -> None:
    assert pe_format_of(load_arch(arch)) == want


def test_hbq_e_array_area_matches_the_synthesised_array() -> None:
    # §2.3: systolic array of 32 PEs = 296,812 um2.
    b = arch_area(load_arch("hbq_e_28nm"))
    assert b.area_um2["pe_array"] == pytest.approx(
        4096 * pe_cost("e2m1", "e2m2", 128, "e5m3", ub=32).area_um2_per_mac
    )
    assert b.area_um2["pe_array"] == pytest.approx(296_812, rel=0.02)
    # ACCUM logic: 253,368 - 240,218 = 13,150 um2 for the 32 lanes.
    assert b.area_um2["psum_logic"] == pytest.approx(13_150, rel=0.001)
    assert b.total_area_um2 == pytest.approx(sum(b.area_um2.values()))
    assert b.total_area_sigma_um2 == pytest.approx(
        math.sqrt(sum(s * s for s in b.area_sigma_um2.values()))
    )
    assert set(b.sources) == set(b.area_um2)


def test_published_pe_for_amove() -> None:
    b = arch_area(load_arch("amove_28nm"))
    assert b.pe.area_um2_per_mac == 217 and b.pe.energy_fj_per_mac == 504
    assert b.area_um2["pe_array"] == pytest.approx(217 * 4096)
    assert "published" in b.pe.source


def test_node_scaling_of_arch_area() -> None:
    a = load_arch("hbq_e_28nm")
    b28, b7 = arch_area(a), arch_area(a, 7)
    assert b7.area_um2["pe_array"] / b28.area_um2["pe_array"] == pytest.approx(0.1604)
    assert b7.area_um2["psum_buffer"] / b28.area_um2["psum_buffer"] == pytest.approx(0.2126)


def _stats(arch: str, **over: object) -> HbqSimStats:
    fields = dict(
        arch=arch,
        workload="toy:prefill",
        mode="analytical",
        config_digest="0" * 64,
        workload_digest="0" * 64,
        freq_mhz=500.0,
        cycles=1_000_000,
        seconds=2e-3,
        macs=3_000_000_000,
        peak_macs_per_cycle=4096,
        utilisation=0.73,
        stall_cycles={"busy": 1_000_000},
        buffers={
            "ACT": BufferAccess(10, 5, 1_000_000, 200_000, 664),
            "WGT": BufferAccess(10, 5, 300_000, 300_000, 544),
            "PSUM": BufferAccess(10, 5, 2_000_000, 1_700_000, 136),
        },
        dram=DramAccess(3, 1, 50_000_000, 5_000_000, {}),
        by_name={},
        tiles={},
        layers=1,
        layers_simulated=1,
        notes=(),
    )
    fields.update(over)
    return HbqSimStats(**fields)  # type: ignore[arg-type]


def test_evaluate_by_hand_on_hbq_e() -> None:
    arch = load_arch("hbq_e_28nm")
    cb = evaluate(_stats("hbq_e_28nm"), arch)
    e = cb.energy_j
    pe = pe_cost("e2m1", "e2m2", 128, "e5m3", ub=32)
    assert e["pe_array"] == pytest.approx(3e9 * pe.energy_fj_per_mac * 1e-15)
    # SRAM energy per bit from [R-PM] (§2.5): ACT 24.28 pJ / 664 b at depth 128, PSUM
    # 29.2 pJ / 544 b at depth 256; linear in depth, capped at 256 rows.
    e128, e256 = 24.28e3 / 664, 29.2e3 / 544
    # hbq_e_28nm: ACT 96 KiB in 4 banks of 166 b -> 1184 rows; PSUM 136 KiB, 8 x 136 b -> 1024;
    # WGT 40 KiB, 4 x 136 b -> 602 rows: all beyond the 256-row sub-array, so e256 per bit.
    assert e["act_buffer"] == pytest.approx(8 * 1_200_000 * e256 * 1e-15)
    assert e["psum_buffer"] == pytest.approx(8 * 3_700_000 * e256 * 1e-15)
    assert e["wgt_buffer"] == pytest.approx(8 * 600_000 * e256 * 1e-15)
    assert e256 > e128
    # each MXINT8 partial sum is 8 bits + 8/16 of the shared exponent = 8.5 bits (§2.2)
    assert e["psum_logic"] == pytest.approx(8 * 1_700_000 / 8.5 * 1.314e-12)
    assert e["dram"] == pytest.approx(55_000_000 * 32e-12)
    assert e["leakage"] == pytest.approx(21e-3 * cb.total_area_um2 * 1e-6 * 2e-3)
    assert rpm_energy_j(cb) == pytest.approx(
        e["pe_array"] + e["act_buffer"] + e["psum_buffer"] + e["dram"]
    )
    assert cb.total_energy_j == pytest.approx(sum(e.values()))
    assert cb.energy_sigma_j["dram"] == pytest.approx(e["dram"] * 0.25)
    assert "simulated traces" in cb.sources["dram"]


def test_evaluate_shallow_buffers_use_depth_dependent_energy() -> None:
    # A 128-row ACT bank costs the [R-PM] ACT figure per bit exactly.
    arch = override(
        load_arch("hbq_e_28nm"), {"buffers.act.size_kib": 10.375, "tiling.tile_m_tokens": 64}
    )
    # 10.375 KiB = 84,992 b = 4 banks x 166 b x 128 rows
    cb = evaluate(_stats("hbq_e_28nm"), arch)
    assert cb.energy_j["act_buffer"] == pytest.approx(8 * 1_200_000 * 24.28e3 / 664 * 1e-15)


def test_evaluate_scales_with_node() -> None:
    arch = load_arch("nvfp4_28nm")
    s = _stats("nvfp4_28nm")
    c28, c16 = evaluate(s, arch), evaluate(s, arch, 16)
    assert c16.energy_j["pe_array"] / c28.energy_j["pe_array"] == pytest.approx(0.3827)
    assert c16.energy_j["dram"] == c28.energy_j["dram"]  # DRAM is off-chip: not scaled
