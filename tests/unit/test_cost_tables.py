"""Component tables, technology scaling and the SRAM model (coaccel.cost).

Expected values are derived by hand from the published figures the tables cite (specs/hbq.md
§2.3, §2.5; Stillmaker & Baas 2017), not from the code under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from coaccel.cost import (
    NODES_NM,
    TABLE_FILES,
    load_table,
    node_factors,
    shipped_table,
    sram_cost,
    sram_model,
    table_rows,
)
from coaccel.spine.config import ConfigError
from coaccel.spine.errors import CoaccelError


@pytest.mark.parametrize("name", TABLE_FILES)
def test_every_shipped_entry_has_value_unit_source_uncertainty(name: str) -> None:
    t = shipped_table(name)
    assert t.entries
    for key, e in t.entries.items():
        assert e.source.strip(), key
        assert e.unit.strip(), key
        assert e.uncertainty >= 0 and math.isfinite(e.value), key
    rows = table_rows(t)
    assert [r["name"] for r in rows] == list(t.entries)


def test_table_loader_reports_every_problem(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(
        "version: 1\n"
        "description: d\n"
        "entries:\n"
        "  b: {value: 1, unit: GE, source: s, uncertainty: -1}\n"
        "  c: {value: 1, unit: GE, source: s, uncertainty: 0.1, sorce: x}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_table(p)
    text = str(info.value)
    assert "entries.b.uncertainty: -1 is out of range" in text
    assert "entries.c.sorce: unknown key 'sorce'" in text


def test_table_entry_needs_a_source(tmp_path: Path) -> None:
    p = tmp_path / "nosource.yaml"
    p.write_text(
        "version: 1\ndescription: d\nentries:\n"
        "  a: {value: 1, unit: GE, source: ' ', uncertainty: 0.1}\n"
        "  b: {value: 1, unit: '', source: s, uncertainty: 0.1}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_table(p)
    text = str(info.value)
    assert "entries.a.source: must say where the figure comes from" in text
    assert "entries.b.unit: must name the unit" in text


def test_table_lookup_error_lists_entries() -> None:
    with pytest.raises(CoaccelError, match="no entry 'nope'; entries: fa_ge"):
        shipped_table("pe_gates.yaml")["nope"]


# ---- technology scaling -----------------------------------------------------------------


def _sb17_anchor() -> tuple[float, float]:
    """28 nm anchor of Stillmaker & Baas: log-log interpolation between 32 and 20 nm."""
    frac = math.log(32 / 28) / math.log(32 / 20)
    area = math.exp(frac * math.log(1 / 2.2))
    e32 = 0.8367 * 0.9**2 - 0.4341 * 0.9 + 0.1701
    e20 = 0.373 * 0.9**2 - 0.1582 * 0.9 + 0.04104
    return area, e32 * math.exp(frac * math.log(e20 / e32))


def test_28nm_factors_are_one() -> None:
    f = node_factors(28)
    assert (f.area, f.energy, f.sram_area, f.sram_energy, f.leakage) == (1, 1, 1, 1, 1)
    assert f.area_uncertainty == 0


def test_scaling_factors_follow_stillmaker_baas() -> None:
    a28, e28 = _sb17_anchor()
    e16 = 0.2958 * 0.85**2 - 0.1241 * 0.85 + 0.03024
    e7 = 0.1776 * 0.7**2 - 0.09097 * 0.7 + 0.02447
    assert node_factors(16).area == pytest.approx((1 / 2.4) / a28, rel=1e-3)
    assert node_factors(7).area == pytest.approx((1 / 7.8) / a28, rel=1e-3)
    assert node_factors(16).energy == pytest.approx(e16 / e28, rel=1e-3)
    assert node_factors(7).energy == pytest.approx(e7 / e28, rel=1e-3)
    # 5 nm: TSMC N5 vs N7, 1.84x density and -30 % power on top of 7 nm.
    assert node_factors(5).area == pytest.approx(node_factors(7).area / 1.84, rel=1e-3)
    assert node_factors(5).energy == pytest.approx(node_factors(7).energy * 0.7, rel=1e-3)
    # SRAM: published bitcells 0.127 (28) / 0.074 / 0.027 / 0.021 um2.
    for node, cell in ((16, 0.074), (7, 0.027), (5, 0.021)):
        assert node_factors(node).sram_area == pytest.approx(cell / 0.127, rel=2e-3)


def test_error_bands_widen_with_distance() -> None:
    bands = [node_factors(n).area_uncertainty for n in (28, 16, 7, 5)]
    assert bands == sorted(bands) and bands[0] == 0
    assert NODES_NM == (28.0, 16.0, 7.0, 5.0)
    with pytest.raises(CoaccelError, match="no scaling factors for 10 nm"):
        node_factors(10)


# ---- SRAM ---------------------------------------------------------------------------------


def test_sram_area_reproduces_the_accelerator_macros() -> None:
    # §2.3: PSUM 238,375 um2 for 8 banks of 256 x 136 b; ACT 72,928 for 4 x 128 x 160 + 128 x 24.
    psum = sram_cost(256, 136, banks=8)
    act = sram_cost(128, 160, banks=4).area_um2 + sram_cost(128, 24).area_um2
    assert psum.area_um2 == pytest.approx(238_375, rel=0.01)
    assert act == pytest.approx(72_928, rel=0.01)
    assert psum.in_calibrated_range


def test_sram_energy_reproduces_the_rpm_figures() -> None:
    # §2.5 [R-PM]: 24.28 pJ per array cycle = one ACT read (4 x 160 b + 24 b, depth 128);
    # 29.2 pJ = two 136-b PSUM words read and written (depth 256).
    act = 4 * sram_cost(128, 160).access_energy_pj + sram_cost(128, 24).access_energy_pj
    psum = 4 * sram_cost(256, 136).access_energy_pj
    assert act == pytest.approx(24.28, rel=1e-9)
    assert psum == pytest.approx(29.2, rel=1e-9)


def test_sram_solved_constants_by_hand() -> None:
    e_act = 24.28e3 / 664  # fJ/bit at depth 128
    e_psum = 29.2e3 / 544  # fJ/bit at depth 256
    e_row = (e_psum - e_act) / 128
    m = sram_model()
    assert m.e_row_fj == pytest.approx(e_row)
    assert m.e_bit_fj == pytest.approx(e_act - 128 * e_row)
    assert m.a_small_um2_per_bit == pytest.approx(0.857, abs=0.001)


def test_sram_large_macros_amortize_periphery_and_cap_bitline_energy() -> None:
    m = sram_model()
    small = sram_cost(256, 136)
    big = sram_cost(4096, 256)
    assert not big.in_calibrated_range
    assert big.area_um2 / (4096 * 256) < small.area_um2 / (256 * 136)
    assert big.area_um2 / (4096 * 256) > m.a_cell_um2_per_bit
    # depth beyond the sub-array cap costs no more per bit than the cap itself
    capped = sram_cost(m.max_subarray_rows, 256).access_energy_pj
    assert big.access_energy_pj == pytest.approx(capped)
    assert big.area_sigma_um2 / big.area_um2 > small.area_sigma_um2 / small.area_um2


def test_sram_node_scaling_and_errors() -> None:
    s28, s7 = sram_cost(256, 136), sram_cost(256, 136, node_nm=7)
    assert s7.area_um2 / s28.area_um2 == pytest.approx(node_factors(7).sram_area)
    with pytest.raises(CoaccelError, match="SRAM sizes must be >= 1"):
        sram_cost(0, 8)
