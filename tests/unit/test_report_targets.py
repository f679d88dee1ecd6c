"""The DeltaLLM FPGA and GPU parts of ``coaccel report``, built by their report roles directly.

* DeltaLLM FPGA (:mod:`coaccel.targets.deltallm_fpga.report`): a resource row per LUT, FF,
  DSP48E2, BRAM36 and URAM288 with the device total, the modelled figure equal to
  ``estimate_resources`` and the Yosys figure equal to the committed synthesis table; TeLLMe-v2
  modelled only; energy per scope with static + dynamic = total and energy per token = total /
  tokens exactly.
* GPU (:mod:`coaccel.targets.gpu.report`): board energy = base + traffic, per token = step /
  batch, per request = per token x the output length, exactly; the fitted board-power model
  reproduces the published measurements it was fitted to; the device-memory view everywhere.
* Both: every figure has a unit, a source and a finite value; ``write_report`` writes HTML,
  Markdown and CSV holding them.

Small workloads keep every test within a few seconds: one simulated layer of Llama-3.2-1B at
64 prefill tokens for the FPGA designs, the default one-layer decode step for the GPUs.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from coaccel.cost import shipped_table
from coaccel.report.document import ReportSettings, write_report
from coaccel.sim.deltallm_fpga import estimate_resources
from coaccel.simulation import load_arch
from coaccel.targets.deltallm_fpga import report as fpga_report
from coaccel.targets.gpu import report as gpu_report

ROOT = Path(__file__).resolve().parents[2]
KV260_CSV = ROOT / "rtl" / "synth" / "deltallm_kv260.csv"
FPGA_ARCHS = ("kv260", "tellme_v2")
GPU_ARCHS = ("h200", "a100_80g", "h100_sxm", "gh200", "rtx_a6000")
LABELS = ("LUT", "FF", "DSP48E2", "BRAM36", "URAM288")
FPGA_WORKLOAD = "llama-3.2-1b:prefill_64"


def _fpga_cfgs(**overrides):
    # one simulated layer (evenly spaced layers stand for all of them) keeps the run short
    return [load_arch(a, {"keys.layers_simulated": 1, **overrides})[1] for a in FPGA_ARCHS]


@pytest.fixture(scope="module")
def fpga_part():
    settings = ReportSettings(workloads=("llama-3.2-1b",), scenario="prefill_64")
    return fpga_report.report_part(_fpga_cfgs(), settings)


@pytest.fixture(scope="module")
def gpu_part():
    return gpu_report.report_part([load_arch(a)[1] for a in GPU_ARCHS], ReportSettings())


def _fig(part, arch, quantity, component, workload=None):
    hits = [
        f
        for f in part.figures
        if (f.arch, f.quantity, f.component) == (arch, quantity, component)
        and (workload is None or f.workload == workload)
    ]
    assert len(hits) == 1, f"{arch} {quantity} {component}: {len(hits)} figures"
    return hits[0]


def _has(part, arch, quantity, component):
    return any(
        (f.arch, f.quantity, f.component) == (arch, quantity, component) for f in part.figures
    )


def _committed_top():
    with KV260_CSV.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["top"] == fpga_report.SYNTH_TOP]
    assert len(rows) == 1
    return rows[0]


# ---------------------------------------------------------------------------------------------
# DeltaLLM FPGA: resources


def test_fpga_resource_rows_have_device_totals(fpga_part):
    for cfg in _fpga_cfgs():
        for label, attr, _ in fpga_report.RESOURCES:
            f = _fig(fpga_part, cfg.name, "resource_device", label)
            assert f.value == getattr(cfg.limits, attr) and f.unit == label
            assert "[DS987]" in f.source
    kv = {label: _fig(fpga_part, "kv260", "resource_device", label).value for label in LABELS}
    assert kv == {"LUT": 117120, "FF": 234240, "DSP48E2": 1248, "BRAM36": 144, "URAM288": 64}


def test_fpga_modelled_column_is_the_estimate(fpga_part):
    cfg = _fpga_cfgs()[0]
    est = estimate_resources(cfg)
    for label, attr, _ in fpga_report.RESOURCES:
        f = _fig(fpga_part, "kv260", "resource_modelled", label)
        assert f.value == getattr(est, attr)
        share = _fig(fpga_part, "kv260", "resource_share_modelled", label)
        assert share.value == pytest.approx(100 * f.value / getattr(cfg.limits, attr))


def test_fpga_yosys_column_equals_the_committed_csv(fpga_part):
    row = _committed_top()
    want = {
        "LUT": int(row["fpga_luts"]) + int(row["fpga_lutram_luts"]),
        "FF": int(row["fpga_ffs"]),
        "DSP48E2": int(row["fpga_dsps"]),
        "BRAM36": float(row["fpga_bram36"]),
        "URAM288": int(row["fpga_uram"]),
    }
    for label, n in want.items():
        f = _fig(fpga_part, "kv260", "resource_yosys", label)
        assert f.value == n
        assert "[SYNTH]" in f.source and "Yosys 0.23" in f.source and "not Vivado" in f.source
    assert want["DSP48E2"] == 960 and want["LUT"] == 92758


def test_tellme_is_modelled_only(fpga_part):
    assert not any(
        f.arch == "tellme_v2" and f.quantity == "resource_yosys" for f in fpga_part.figures
    )
    modelled = {
        f.component
        for f in fpga_part.figures
        if f.arch == "tellme_v2" and f.quantity == "resource_modelled"
    }
    assert modelled == {"DSP48E2", "BRAM36"}
    table = fpga_part.sections[0].tables[0]
    tellme_rows = [r for r in table.rows if r[0] == "tellme_v2"]
    assert len(tellme_rows) == 5 and all("no RTL of ours" in r for r in tellme_rows)
    assert any("TeLLMe-v2 has no RTL of ours" in p for p in fpga_part.sections[0].paragraphs)


def test_yosys_band_is_stated(fpga_part):
    text = " ".join(fpga_part.sections[0].paragraphs)
    assert "Yosys 0.23" in text and "not Vivado" in text and "2x Vivado" in text


def test_unsynthesized_configuration_has_no_yosys_column():
    cfg = load_arch("kv260", {"datapath.lanes": 8})[1]
    rows, _ = fpga_report.read_synthesis_rows(KV260_CSV)
    assert fpga_report.synthesis_row(cfg, rows) is None
    assert fpga_report.synthesis_row(load_arch("kv260")[1], rows) == _committed_top()
    part = fpga_report.report_part([cfg], ReportSettings(area_only=True))
    assert not any(f.quantity == "resource_yosys" for f in part.figures)
    assert all(r[5] == "not synthesized" for r in part.sections[0].tables[0].rows)


def test_area_only_prices_resources_without_a_run():
    part = fpga_report.report_part(_fpga_cfgs(), ReportSettings(area_only=True))
    assert len(part.sections) == 1
    assert {f.quantity for f in part.figures} <= {
        "resource_device",
        "resource_modelled",
        "resource_share_modelled",
        "resource_yosys",
        "resource_share_yosys",
    }


# ---------------------------------------------------------------------------------------------
# DeltaLLM FPGA: power and energy


def test_fpga_energy_adds_up_exactly(fpga_part):
    idle = shipped_table(fpga_report.BOARD_TABLE)["kv260_idle_w"]
    for arch in FPGA_ARCHS:
        tokens = _fig(fpga_part, arch, "tokens", "prefill").value
        assert tokens == 64
        for scope in ("attention", "prefill"):
            t = _fig(fpga_part, arch, "time", scope)
            static = _fig(fpga_part, arch, "energy", f"{scope}.static")
            total = _fig(fpga_part, arch, "energy", f"{scope}.total")
            assert t.unit == "s" and static.unit == total.unit == "J"
            assert static.value == idle.value * t.value
            assert static.sigma == pytest.approx(idle.uncertainty * static.value)
            if _has(fpga_part, arch, "energy", f"{scope}.dynamic"):
                dyn = _fig(fpga_part, arch, "energy", f"{scope}.dynamic")
                assert total.value == static.value + dyn.value
                assert total.sigma == pytest.approx(math.hypot(static.sigma, dyn.sigma))
            else:
                assert total.value == static.value  # not modelled: a lower bound
                assert "lower bound" in total.source
            per_token = _fig(fpga_part, arch, "energy_per_token", scope)
            assert per_token.unit == "J/token"
            assert per_token.value == total.value / tokens
            assert per_token.sigma == total.sigma / tokens
            power = _fig(fpga_part, arch, "power", f"{scope}.average")
            assert power.unit == "W" and power.value == total.value / t.value


def test_fpga_dynamic_is_the_cost_models_components(fpga_part):
    comps = [
        f
        for f in fpga_part.figures
        if f.arch == "kv260" and f.component.startswith("attention.dynamic.")
    ]
    names = {f.component.removeprefix("attention.dynamic.") for f in comps}
    assert {"mac_dsp", "rescale_dsp", "exp_dsp", "norm_dsp", "lut", "ff", "dram"} <= names
    assert not names & {"fpga_static", "leakage"}  # the board idle power contains them
    dyn = _fig(fpga_part, "kv260", "energy", "attention.dynamic")
    assert dyn.value == pytest.approx(sum(f.value for f in comps), rel=1e-12)
    # the prefill scope adds linear-layer time at idle power, no dynamic energy of its own
    assert _fig(fpga_part, "kv260", "energy", "prefill.dynamic").value == dyn.value
    assert (
        _fig(fpga_part, "kv260", "time", "prefill").value
        > _fig(fpga_part, "kv260", "time", "attention").value
    )
    assert not _has(fpga_part, "tellme_v2", "energy", "attention.dynamic")


def test_prefill_energy_function_matches_the_figures(fpga_part):
    import coaccel

    cfg = _fpga_cfgs()[0]
    e = fpga_report.prefill_energy(cfg, coaccel.simulate(cfg, FPGA_WORKLOAD))
    assert e.attention.total_j == _fig(fpga_part, "kv260", "energy", "attention.total").value
    assert e.attention.energy_per_token_j == e.attention.total_j / e.tokens
    assert e.prefill.lower_bound and not e.attention.lower_bound


# ---------------------------------------------------------------------------------------------
# GPU


def test_gpu_energy_adds_up_exactly(gpu_part):
    for arch in ("h200", "a100_80g", "h100_sxm", "gh200"):
        t = _fig(gpu_part, arch, "time", "decode_step").value
        nbytes = _fig(gpu_part, arch, "dram_bytes", "decode_step").value
        batch = _fig(gpu_part, arch, "tokens", "per_step").value
        assert batch == 8
        base = _fig(gpu_part, arch, "energy", "board.base")
        traffic = _fig(gpu_part, arch, "energy", "board.dram_traffic")
        total = _fig(gpu_part, arch, "energy", "board.total")
        assert total.value == base.value + traffic.value
        assert base.value == _fig(gpu_part, arch, "power", "board.base").value * t
        slope = _fig(gpu_part, arch, "energy_per_byte", "board.dram_traffic")
        assert slope.unit == "pJ/B"
        assert traffic.value == pytest.approx(slope.value * 1e-12 * nbytes, rel=1e-12)
        per_token = _fig(gpu_part, arch, "energy_per_token", "board")
        assert per_token.value == total.value / batch and per_token.unit == "J/token"
        per_req = _fig(gpu_part, arch, "energy_per_request", "board")
        assert per_req.value == per_token.value * gpu_report.OUTPUT_TOKENS
        assert per_req.unit == "J/request"
        power = _fig(gpu_part, arch, "power", "board.average")
        assert power.value == pytest.approx(total.value / t, rel=1e-12)
        util = _fig(gpu_part, arch, "utilization", "dram")
        cfg = load_arch(arch)[1]
        assert util.value == pytest.approx(100 * nbytes / t / (cfg.dram.bw_gb_per_s * 1e9))
        assert 0 < util.value <= 100


def test_gpu_uncertainty_grows_for_a_board_of_the_same_die(gpu_part):
    def rel(arch):
        f = _fig(gpu_part, arch, "energy", "board.total")
        return f.sigma / f.value

    assert 0.10 < rel("h200") < 0.15
    assert rel("h100_sxm") > rel("h200") + 0.05 and rel("a100_80g") > 0.15


def test_gpu_without_a_fit_keeps_the_device_memory_view(gpu_part):
    assert not _has(gpu_part, "rtx_a6000", "energy", "board.total")
    dev = _fig(gpu_part, "rtx_a6000", "energy", "dram_device")
    nbytes = _fig(gpu_part, "rtx_a6000", "dram_bytes", "decode_step").value
    cfg = load_arch("rtx_a6000")[1]
    assert dev.value == pytest.approx(nbytes * cfg.dram.energy_pj_per_byte * 1e-12)
    assert _fig(gpu_part, "rtx_a6000", "energy_per_token", "dram_device").value == dev.value / 8
    assert any("No board-power fit for rtx_a6000" in p for p in gpu_part.sections[0].paragraphs)


def test_gpu_device_view_is_a_share_of_the_board_traffic(gpu_part):
    dev = _fig(gpu_part, "h200", "energy", "dram_device").value
    traffic = _fig(gpu_part, "h200", "energy", "board.dram_traffic").value
    assert 0.1 < dev / traffic < 0.5  # a device figure without PHY, controllers, L2 and NoC


@pytest.mark.parametrize(
    ("board", "bw_tb_per_s", "tflop_per_s", "watts", "tolerance_w"),
    [
        # first and last points of each published series ([GPU-BENCHES-ROOFLINE])
        ("h200", 3.759, 0.940, 572.0, 10.0),
        ("h200", 0.415, 42.442, 396.0, 10.0),
        ("a100_40g", 1.372, 0.343, 230.25, 7.0),  # mean of the 8 boards
        ("a100_40g", 0.149, 19.050, 185.375, 7.0),
    ],
)
def test_board_power_fit_reproduces_the_measurements(
    board, bw_tb_per_s, tflop_per_s, watts, tolerance_w
):
    t = shipped_table(gpu_report.BOARD_TABLE)
    p = (
        t[f"{board}_base_w"].value
        + t[f"{board}_w_per_tb_per_s"].value * bw_tb_per_s
        + t[f"{board}_w_per_tflop_per_s"].value * tflop_per_s
    )
    assert p == pytest.approx(watts, abs=tolerance_w)


def test_gpu_area_only_prices_nothing():
    part = gpu_report.report_part([load_arch("h200")[1]], ReportSettings(area_only=True))
    assert part.figures == () and part.sections == ()


def test_batch_is_read_from_the_trace():
    from coaccel.targets.gpu import TARGET

    assert gpu_report._batch(TARGET.load_workload("flashdecode:B=2,T=1024")) == 2
    assert gpu_report._batch(object()) is None


# ---------------------------------------------------------------------------------------------
# Both parts


@pytest.mark.parametrize("which", ["fpga", "gpu"])
def test_every_figure_has_unit_source_and_finite_value(which, fpga_part, gpu_part):
    part = fpga_part if which == "fpga" else gpu_part
    assert part.figures
    for f in part.figures:
        assert f.unit.strip() and f.source.strip(), f
        assert math.isfinite(f.value), f
        assert math.isnan(f.sigma) or f.sigma >= 0, f


def test_units_present(fpga_part, gpu_part):
    fpga_units = {f.unit for f in fpga_part.figures}
    assert {
        "LUT",
        "FF",
        "DSP48E2",
        "BRAM36",
        "URAM288",
        "%",
        "s",
        "J",
        "W",
        "J/token",
        "token",
    } <= fpga_units
    gpu_units = {f.unit for f in gpu_part.figures}
    assert {"s", "B", "B/s", "%", "W", "J", "pJ/B", "J/token", "J/request", "token"} <= gpu_units
    for part in (fpga_part, gpu_part):
        for s in part.sections:
            for t in s.tables:
                assert all(len(r) == len(t.headers) for r in t.rows)


def test_write_report_holds_both_parts(fpga_part, gpu_part, tmp_path):
    paths = write_report([fpga_part, gpu_part], tmp_path)
    names = {p.name for p in paths}
    assert {"cost_report.csv", "cost_report.md", "cost_report.html"} <= names
    md = (tmp_path / "cost_report.md").read_text(encoding="utf-8")
    html = (tmp_path / "cost_report.html").read_text(encoding="utf-8")
    for text in (md, html):
        for s in (
            "Resource utilization",
            "Yosys on our RTL",
            "not Vivado",
            "no RTL of ours",
            "energy per token (mJ/token)",
            "Decode energy per token",
            "per token (mJ/token)",
            "[SIMFERO-KV260]",
            "[GPU-BENCHES-ROOFLINE]",
        ):
            assert s in text, s
    with (tmp_path / "cost_report.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(fpga_part.figures) + len(gpu_part.figures)
    assert {r["kind"] for r in rows} == {"deltallm_fpga", "gpu"}
    lut = [
        r
        for r in rows
        if (r["arch"], r["quantity"], r["component"]) == ("kv260", "resource_yosys", "LUT")
    ]
    assert len(lut) == 1 and float(lut[0]["value"]) == 92758
    tok = [
        r
        for r in rows
        if (r["arch"], r["quantity"], r["component"]) == ("h200", "energy_per_token", "board")
    ]
    assert len(tok) == 1 and tok[0]["unit"] == "J/token" and tok[0]["sigma"] and tok[0]["source"]
