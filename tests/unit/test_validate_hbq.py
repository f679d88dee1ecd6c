"""HBQ validation targets (coaccel.targets.hbq_asic.validation): PE rows, claims, system energy,
speedups, and the shared row model's rules.

Paper values come from arch_configs/validation/hbq.yaml (transcribed from specs/hbq.md §3);
expected ours-values are worked out by hand or come from a fake simulator whose statistics are
chosen here.
"""

from __future__ import annotations

import math

import pytest

from coaccel.cost import arch_pe, evaluate, pe_cost
from coaccel.sim.hbq_asic import load_arch, load_workload, simulate
from coaccel.sim.hbq_asic.stats import BufferAccess, DramAccess, HbqSimStats
from coaccel.targets.hbq_asic._rpm import rpm_energy_j
from coaccel.targets.hbq_asic.validation import (
    ARCHS,
    MODELS,
    SPEEDUP_SEQS,
    Target,
    claim_targets,
    nvfp_w4a8_variant,
    pe_targets,
    published_figure,
    rpm_energy,
    rpm_macs,
    sim_dram_terms,
    speedup_targets,
    system_energy_targets,
    validate_hbq,
)


def _system_energy(model: str) -> tuple[float, ...]:
    return tuple(published_figure(f"system_energy.{model}.{a}").value for a in ARCHS)


def _speedups(arch: str) -> tuple[float, ...]:
    return tuple(published_figure(f"speedup.{arch}.{n}_tokens").value for n in SPEEDUP_SEQS)


def test_spec_tables_are_transcribed() -> None:
    # specs/hbq.md §3.6, now in arch_configs/validation/hbq.yaml
    assert _system_energy("llama-2-7b") == (9.367, 4.915, 4.539, 3.555, 2.846)
    assert _system_energy("qwen2.5-7b")[4] == 2.946
    assert _speedups("hbq_e_28nm") == (3.01, 3.00, 2.98)
    assert ARCHS[0] == "amove_28nm" and ARCHS[-1] == "hbq_e_28nm"
    assert published_figure("system_energy.llama-2-7b.hbq_e_28nm").unit == "J"
    assert published_figure("claim.hbq_e_vs_hbq_a_area").value == -17.0


def test_every_published_pe_row_is_within_5_percent() -> None:
    rows = pe_targets()
    assert len(rows) == 40  # 36 whole-PE calibration points + 4 README areas
    for t in rows:
        assert t.status == "ok", (t.name, t.ours, t.paper)
    readme = {t.name: t for t in rows if t.name.startswith("README")}
    assert readme["README HBQ-E area"].paper == 72.0
    # a fit point carries its leave-one-out prediction
    b4 = next(t for t in rows if t.name == "BQ E5M3 W4A8 B4 area")
    assert not math.isnan(b4.ours_loo) and abs(b4.loo_error_pct) < 5


def test_claims() -> None:
    rows = {t.name: t for t in claim_targets()}
    red = rows["HBQ-E vs HBQ-A hardware cost (area per MAC)"]
    e = pe_cost("e2m1", "e2m2", 128, ub=32).area_um2_per_mac
    a = pe_cost("e2m1", "e2m2", 128, ub=8).area_um2_per_mac
    assert red.ours == pytest.approx(100 * (e / a - 1))
    assert red.paper == -17.0 and red.status == "ok"
    eff = rows["Area efficiency vs weight-only (AxCore 200 um2/MAC / HBQ-A)"]
    assert eff.ours == pytest.approx(200 / a) and eff.status == "ok"
    missing = rows["Energy efficiency vs weight-only, paper's WoQ figure"]
    assert missing.status == "baseline missing" and "401" in missing.note
    fig6 = rows["Energy efficiency vs weight-only (Fig 6 WoQ 280 fJ/MAC / HBQ-E)"]
    assert fig6.ours == pytest.approx(280 / pe_cost("e2m1", "e2m2", 128, ub=32).energy_fj_per_mac)


def test_target_status_and_error() -> None:
    t = Target("g", "n", 110.0, 100.0, "J", 10.0, "s")
    assert t.error_pct == pytest.approx(10.0) and t.status == "ok"
    assert Target("g", "n", 111.0, 100.0, "J", 10.0, "s").status == "differs"
    assert Target("g", "n", 111.0, 100.0, "J", None, "s").status == "info"
    assert Target("g", "n", 1.0, math.nan, "J", 10.0, "s").status == "no paper value"


def test_target_rules_band_absolute_and_one_per_row() -> None:
    band = Target("g", "n", 1.0, 1.04, "x", None, "s", ours_low=0.95, ours_high=1.05)
    assert band.rule == "band" and band.status == "ok"
    outside = Target("g", "n", 1.0, 1.06, "x", None, "s", ours_low=0.95, ours_high=1.05)
    assert outside.status == "differs" and outside.error_pct == pytest.approx(100 / 1.06 - 100)
    # a curve's MAPE against exact agreement, in percentage points
    assert Target("g", "n", 4.0, 0.0, "%", None, "s", tolerance_abs=5.0).status == "ok"
    assert Target("g", "n", 6.0, 0.0, "%", None, "s", tolerance_abs=5.0).status == "differs"
    assert Target("g", "n", 1.0, 1.0, "x", None, "s").rule == ""
    with pytest.raises(ValueError, match="one rule per row, got a band and tolerance_pct"):
        Target("g", "n", 1.0, 1.0, "x", 5.0, "s", ours_low=0.9, ours_high=1.1)
    with pytest.raises(ValueError, match="a band needs both"):
        Target("g", "n", 1.0, 1.0, "x", None, "s", ours_low=0.9)
    with pytest.raises(ValueError, match="out of order"):
        Target("g", "n", 1.0, 1.0, "x", None, "s", ours_low=1.1, ours_high=0.9)
    with pytest.raises(ValueError, match="data must be one of"):
        Target("g", "n", 1.0, 1.0, "x", None, "s", data="measured")  # type: ignore[arg-type]


def test_rpm_macs_reproduce_the_papers_core_energy() -> None:
    # §2.5 formula by hand for Llama-2-7B (L 32, E 4096, MHA q = kv = 4096, M 11008, V 32000)
    n = 2048
    linear = 32 * n * (4096 * 4096 + 2 * 4096 * 4096 + 4096 * 4096 + 3 * 4096 * 11008)
    linear += n * 4096 * 32000
    attention = 32 * n * n * (4096 + 4096)
    from coaccel.sim.hbq_asic import load_workload

    got = rpm_macs(load_workload("llama-2-7b:prefill_2k").model, n)
    assert got == (linear, attention)
    # §3.6 example: HBQ-E core 1.276 J = 8.72e-14 J/MAC x MACs
    assert 8.72e-14 * (linear + attention) == pytest.approx(1.276, rel=1e-3)


def test_restated_rpm_model_reproduces_every_section_3_6_total() -> None:
    # the §3.6 table is printed to 3 decimals: the restatement must land within rounding
    for model in MODELS:
        row = _system_energy(model)
        shape = load_workload(f"{model}:prefill_2k").model
        for arch, paper in zip(ARCHS, row, strict=True):
            assert rpm_energy(shape, arch)["total"] == pytest.approx(paper, abs=5e-4), (model, arch)
    e = rpm_energy(load_workload("llama-2-7b:prefill_2k").model, "hbq_e_28nm")
    assert (e["dram"], e["core"], e["sram"]) == pytest.approx((1.380, 1.276, 0.191), abs=5e-4)


def test_sim_dram_terms_split_a_real_simulation() -> None:
    stats = simulate(load_arch("hbq_e_28nm"), "llama-3.2-3b:prefill_2k", mode="analytical")
    terms = sim_dram_terms(stats)
    assert sum(terms.values()) == stats.dram.total_bytes and terms["other"] == 0
    # by hand: the down projection reads h (2048 x 8192 at 5.125 b: E2M2 + 8-b scale per 128 +
    # 2-b L2 code per 32) once per 256-channel tile of E = 3072 (12 tiles), in 28 layers
    assert terms["down_proj_input"] == 28 * 12 * 2048 * 8192 * 5.125 / 8
    # every weight once per 512-token tile (4 tiles) at 4.125 b (+ the Mix selector bit / 128)
    elems = 28 * (3072 * 3072 * 2 + 2 * 3072 * 1024 + 3 * 3072 * 8192) + 3072 * 128256
    assert terms["weights"] == pytest.approx(4 * elems * (4 + 8 / 128 + 2 / 32 + 1 / 128) / 8)


class _FakeSim:
    """Statistics chosen by the test: cycles per (arch, workload), fixed traffic."""

    def __init__(
        self,
        cycles: dict[tuple[str, str], int] | None = None,
        wprop: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self.cycles = cycles or {}
        self.wprop = wprop or {}
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, arch, workload: str, mode: str) -> HbqSimStats:
        name = arch.name
        self.calls.append((name, workload, mode))
        return HbqSimStats(
            arch=name,
            workload=workload,
            mode=mode,  # type: ignore[arg-type]
            config_digest="0" * 64,
            workload_digest="0" * 64,
            freq_mhz=500.0,
            cycles=self.cycles.get((name, workload), 1_000_000),
            seconds=1.0,
            macs=10**12,
            peak_macs_per_cycle=4096,
            utilisation=0.5,
            stall_cycles={"weight_propagation": self.wprop.get((name, workload), 0)},
            buffers={
                "ACT": BufferAccess(1, 1, 10**9, 0, 664),
                "WGT": BufferAccess(1, 1, 10**8, 0, 544),
                "PSUM": BufferAccess(1, 1, 10**9, 10**9, 136),
            },
            dram=DramAccess(1, 1, 2 * 10**10, 10**9, {}),
            by_name={},
            tiles={},
            layers=1,
            layers_simulated=1,
            notes=(),
        )


def test_system_energy_rows_use_evaluate_on_the_simulated_stats() -> None:
    sim = _FakeSim()
    rows, bds = system_energy_targets("cycle", sim, models=("llama-2-7b",))
    assert {c[2] for c in sim.calls} == {"cycle"}
    assert {c[1] for c in sim.calls} == {"llama-2-7b:prefill_2k"}
    by_arch = {r.name.split(" / ")[1].split(":")[0]: r for r in rows if "J per" in r.name}
    assert set(by_arch) == {"Amove", "MXFP", "NVFP4", "HBQ-A", "HBQ-E"}
    for arch_name in ARCHS:
        cb = bds[("llama-2-7b", arch_name)]
        ref = evaluate(
            sim(load_arch(arch_name), "llama-2-7b:prefill_2k", "cycle"), load_arch(arch_name)
        )
        assert rpm_energy_j(cb) == pytest.approx(rpm_energy_j(ref))
    hbq_e = by_arch["HBQ-E"]
    assert hbq_e.paper == 2.846 and hbq_e.tolerance_pct == 10.0
    # DRAM = 2.1e10 B x 32 pJ/B, counted from the (fake) simulated traffic
    assert bds[("llama-2-7b", "hbq_e_28nm")].energy_j["dram"] == pytest.approx(0.672)
    assert "DRAM 0.672" in hbq_e.note
    parts = [r for r in rows if "breakdown" in r.name]
    assert [r.paper for r in parts] == [1.380, 1.276, 0.191]


def test_speedup_geomean_by_hand() -> None:
    models = ("llama-2-7b", "qwen2.5-3b")
    cycles = {}
    for m, amove in zip(models, (4_000_000, 9_000_000), strict=True):
        for n in ("prefill_1k", "prefill_4k", "prefill_16k"):
            cycles[("amove_28nm", f"{m}:{n}")] = amove
            cycles[("hbq_e_28nm", f"{m}:{n}")] = 1_000_000
    rows = speedup_targets("analytical", _FakeSim(cycles), models=models)
    hbq_e = [r for r in rows if r.name.startswith("HBQ-E")]
    area = pe_cost("e2m1", "e2m2", 128, ub=32).area_um2_per_mac
    # geometric mean of 4x and 9x = 6x, times the area ratio
    for r, paper in zip(hbq_e, _speedups("hbq_e_28nm"), strict=True):
        assert r.ours == pytest.approx(6.0 * 217 / area)
        assert r.paper == paper
    nvfp = [r for r in rows if r.name.startswith("NVFP")]
    assert "W4A8 variant" in nvfp[0].note
    assert hbq_e[0].ours_as_paper == pytest.approx(hbq_e[0].ours)  # no weight loading


def test_speedup_as_paper_leaves_out_weight_loading() -> None:
    models = ("llama-2-7b",)
    cycles, wprop = {}, {}
    for n in ("prefill_1k", "prefill_4k", "prefill_16k"):
        cycles[("amove_28nm", f"llama-2-7b:{n}")] = 5_000_000
        wprop[("amove_28nm", f"llama-2-7b:{n}")] = 1_000_000
        cycles[("hbq_e_28nm", f"llama-2-7b:{n}")] = 1_250_000
        wprop[("hbq_e_28nm", f"llama-2-7b:{n}")] = 50_000
    rows = speedup_targets("analytical", _FakeSim(cycles, wprop), models=models)
    r = next(r for r in rows if r.name.startswith("HBQ-E"))
    area = 217 / pe_cost("e2m1", "e2m2", 128, ub=32).area_um2_per_mac
    assert r.ours == pytest.approx(4.0 * area)
    assert r.ours_as_paper == pytest.approx(4_000_000 / 1_200_000 * area)
    assert "20.0 % of Amove's cycles and 4.0 % of HBQ-E's" in r.note
    assert "token tiles 256 vs 512: MXINT8 partial sums" in r.note


def test_nvfp_w4a8_variant_is_the_papers_nvfp() -> None:
    v = nvfp_w4a8_variant(load_arch("nvfp4_28nm"))
    assert v.formats.activation.element_bits == 8 and v.pe_array.native_act_bits == 8
    assert float(v.formats.activation.bits_per_element()) == 8.5  # §2.5 "NVFP 8.5"
    # §3.5: FP8-scale W4A8 B16 = 129.27 um2/MAC; [R-PM] uses 130.2
    assert arch_pe(v).area_um2_per_mac == pytest.approx(129.27, rel=0.01)


def test_validate_without_simulator() -> None:
    v = validate_hbq(system=False)
    # ("synthesis" rows appear when rtl/synth/hbq_area.csv is present)
    assert {t.group for t in v.targets} - {"synthesis"} == {"pe_area", "pe_energy", "claim"}
    assert v.counts().get("differs", 0) == 0
    assert v.sim_mode == ""


def test_validate_with_the_analytical_simulator_one_model() -> None:
    v = validate_hbq(mode="analytical", models=("llama-3.2-3b",))
    sys_rows = v.select("system_energy")
    assert len([r for r in sys_rows if "J per" in r.name]) == 5
    for r in sys_rows:
        assert math.isfinite(r.ours) and r.ours > 0
    assert len(v.select("speedup")) == 12
    cb = v.breakdowns[("llama-3.2-3b", "hbq_e_28nm")]
    assert cb.sim_mode == "analytical" and cb.macs > 0


def test_synthesis_rows_compare_ratios(tmp_path) -> None:
    from coaccel.synth import COLUMNS
    from coaccel.targets.hbq_asic.validation import synthesis_targets

    p = tmp_path / "hbq_area.csv"
    lines = [",".join(COLUMNS)]
    for group, params, tpm in (
        ("pe_ub", "B=128;UB=32;ACT_BITS=5", 1000.0),
        ("pe_ub", "B=128;UB=8;ACT_BITS=5", 1250.0),
    ):
        row = {c: "" for c in COLUMNS} | {
            "group": group,
            "params": params,
            "cmos_transistors_per_mac": str(tpm),
        }
        lines.append(",".join(row[c] for c in COLUMNS))
    p.write_text("\n".join(lines) + "\n")
    rows, note = synthesis_targets(p)
    assert len(rows) == 1 and "hbq_area.csv" in note
    (t,) = rows
    assert t.paper == pytest.approx(1.25)
    e = pe_cost("e2m1", "e2m2", 128, ub=32).area_um2_per_mac
    a = pe_cost("e2m1", "e2m2", 128, ub=8).area_um2_per_mac
    assert t.ours == pytest.approx(a / e) and t.status == "info"
    missing, note = synthesis_targets(tmp_path / "nope.csv")
    assert missing == [] and "absent" in note


# ---------------------------------------------------------------------------------------------
# Fitted vs predicted rows


def _loo(label: str) -> float:
    from coaccel.cost import pe_model

    return next(r.loo for r in pe_model().loo if r.label == label)


def test_pe_rows_are_fitted_and_show_their_leave_one_out_error() -> None:
    rows = {t.name: t for t in pe_targets()}
    assert {t.fit for t in rows.values()} == {"fitted"}
    # HBQ-A energy: in sample it reproduces 133.6, but refitted without it the model is far off
    hbq_a = rows["HBQ-A PE energy"]
    assert hbq_a.paper == 133.6 and abs(hbq_a.error_pct) < 0.5 and hbq_a.status == "ok"
    assert hbq_a.ours_loo == pytest.approx(_loo("HBQ-A PE energy"))
    assert hbq_a.loo_error_pct == pytest.approx(100 * (hbq_a.ours_loo / 133.6 - 1))
    assert hbq_a.loo_error_pct < -20 and hbq_a.loo_status == "differs"
    assert "in sample" in hbq_a.note
    b4 = rows["BQ E5M3 W4A8 B4 area"]
    assert b4.loo_status == "ok"
    # a README figure is the rounded calibration point: fitted, with that point's LOO value
    readme = rows["README HBQ-A area"]
    assert readme.ours_loo == pytest.approx(_loo("HBQ W4A5 B128 ub8 area"))
    assert readme.loo_error_pct == pytest.approx(100 * (readme.ours_loo / 87.0 - 1))


def test_claims_from_fit_points_are_fitted_with_leave_one_out_ratios() -> None:
    rows = {t.name: t for t in claim_targets()}
    red = rows["HBQ-E vs HBQ-A hardware cost (area per MAC)"]
    assert red.fit == "fitted"
    e, a = _loo("HBQ W4A5 B128 ub32 area"), _loo("HBQ W4A5 B128 ub8 area")
    assert red.ours_loo == pytest.approx(100 * (e / a - 1))
    eff = rows["Area efficiency vs weight-only (AxCore 200 um2/MAC / HBQ-A)"]
    assert eff.fit == "fitted" and eff.ours_loo == pytest.approx(200 / a)
    fig6 = rows["Energy efficiency vs weight-only (Fig 6 WoQ 280 fJ/MAC / HBQ-E)"]
    assert fig6.ours_loo == pytest.approx(280 / _loo("HBQ-E PE energy"))
    assert fig6.loo_status == ""  # no tolerance: information only


def test_target_fit_role_is_checked() -> None:
    assert Target("g", "n", 1.0, 1.0, "J", 5.0, "s").fit == "predicted"
    with pytest.raises(ValueError, match="fit must be one of"):
        Target("g", "n", 1.0, 1.0, "J", 5.0, "s", fit="in-sample")  # type: ignore[arg-type]


def test_counts_separate_predicted_and_fitted_rows() -> None:
    from coaccel.targets.hbq_asic.validation import Validation

    v = Validation(
        (
            Target("pe_area", "a", 100.0, 100.0, "u", 5.0, "s", ours_loo=103.0, fit="fitted"),
            Target("pe_area", "b", 100.0, 100.0, "u", 5.0, "s", ours_loo=80.0, fit="fitted"),
            Target("system_energy", "c", 1.05, 1.0, "J", 10.0, "s"),
            Target("system_energy", "d", 1.2, 1.0, "J", 10.0, "s"),
            Target("system_energy", "e", 1.0, 1.0, "J", None, "s"),
        )
    )
    assert v.counts_by_fit() == {
        "predicted": {"ok": 1, "differs": 1, "info": 1},
        "fitted": {"ok": 2},
    }
    assert [t.name for t in v.loo_outside()] == ["b"]
    assert v.loo_max_abs_error_pct() == pytest.approx(3.0)
    assert v.loo_max_abs_error_pct(within=False) == pytest.approx(20.0)


def test_validation_rows_say_fitted_or_predicted() -> None:
    v = validate_hbq(system=False)
    by_fit = v.counts_by_fit()
    # every PE row and the claims computed from PE fit points are in sample
    assert by_fit["fitted"]["ok"] >= 42
    assert {t.name for t in v.loo_outside()} == {"HBQ-E PE energy", "HBQ-A PE energy"}
    syn = v.select("synthesis")
    if syn:  # the Yosys ratios of the swept activation widths are fit (pseudo) points
        assert {t.fit for t in syn if t.name.startswith("pe_act")} == {"fitted"}
        assert {t.fit for t in syn if t.name.startswith("pe_ub")} == {"predicted"}


# ---------------------------------------------------------------------------------------------
# Partial-sum logic by partial-sum mode


def _table(key: str) -> float:
    from coaccel.cost import shipped_table

    return shipped_table("system_28nm.yaml")[key].value


def test_psum_logic_is_priced_by_the_partial_sum_mode() -> None:
    from coaccel.cost import arch_area
    from coaccel.spine.config import override

    hbq_e, amove = load_arch("hbq_e_28nm"), load_arch("amove_28nm")
    assert (hbq_e.psum.mode, amove.psum.mode) == ("mxint8_running", "fp16")
    mx, fp16 = arch_area(hbq_e), arch_area(amove)
    # by hand: 32 PE lanes x the table's figure per lane
    assert mx.area_um2["psum_logic"] == pytest.approx(32 * 410.9)
    assert fp16.area_um2["psum_logic"] == pytest.approx(32 * 229.2)
    assert _table("psum_fp16_area_um2_per_lane") == 229.2
    assert "hbq_fp16_add" in fp16.sources["psum_logic"]
    assert "MXINT8 quantiser" in mx.sources["psum_logic"]
    # the same design with another partial-sum mode (PSUM words widened to fit)
    group = override(amove, {"psum.mode": "mxint8_group", "buffers.psum.bank_width_bits": 256})
    fp32 = override(amove, {"psum.mode": "fp32", "buffers.psum.bank_width_bits": 512})
    assert arch_area(group).area_um2["psum_logic"] == pytest.approx(32 * 410.9)
    assert arch_area(fp32).area_um2["psum_logic"] == pytest.approx(32 * 705.1)


def test_psum_logic_energy_differs_between_fp16_and_mxint8() -> None:
    sim = _FakeSim()
    e = {}
    for name in ("hbq_e_28nm", "amove_28nm"):
        arch = load_arch(name)
        e[name] = evaluate(sim(arch, "llama-2-7b:prefill_2k", "cycle"), arch).energy_j
    # the fake run writes 1e9 PSUM bytes: MXINT8 partial sums are 8.5 bits, FP16 16 bits
    assert e["hbq_e_28nm"]["psum_logic"] == pytest.approx(8e9 / 8.5 * 1.314e-12)
    assert e["amove_28nm"]["psum_logic"] == pytest.approx(8e9 / 16 * 0.733e-12)
    assert _table("psum_fp16_update_energy_pj") == 0.733
    assert _table("psum_mxint8_update_energy_pj") == 1.314


def test_system_rows_state_the_psum_logic_they_leave_out() -> None:
    sim = _FakeSim()
    rows, bds = system_energy_targets("cycle", sim, models=("llama-2-7b",))
    by_arch = {r.name.split(" / ")[1].split(":")[0]: r for r in rows if "J per" in r.name}
    for label, arch, mode in (
        ("HBQ-E", "hbq_e_28nm", "mxint8_running"),
        ("Amove", "amove_28nm", "fp16"),
    ):
        psum = bds[("llama-2-7b", arch)].energy_j["psum_logic"]
        assert f"partial-sum logic {psum:.3f} J ({mode} accumulate)" in by_arch[label].note
        assert by_arch[label].fit == "predicted"


def test_analytical_speedup_cycles_agree_with_the_cycle_mode_within_a_tenth_of_a_percent() -> None:
    # The speedup rows run the analytical mode; docs/hbq_sim.md states that on the prefills of
    # the five §3.6 architectures its cycles are within 0.1 % of the cycle-approximate mode's.
    for name in ARCHS:
        arch = load_arch(name)
        cyc = simulate(arch, "llama-3.2-3b:prefill_1k", mode="cycle").cycles
        ana = simulate(arch, "llama-3.2-3b:prefill_1k", mode="analytical").cycles
        assert abs(ana / cyc - 1) <= 1e-3, (name, cyc, ana)
