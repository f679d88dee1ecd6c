"""HBQ reports (coaccel.targets.hbq_asic.report) and the ``validate`` / ``report`` commands:
files, columns, escaping, units and sources, speed."""

from __future__ import annotations

import csv
import math
import re
import time
from pathlib import Path

import pytest

from coaccel.cli import main
from coaccel.cost import arch_area, evaluate
from coaccel.report.document import CSV_COLUMNS
from coaccel.report.validation import VALIDATION_CSV_COLUMNS
from coaccel.sim.hbq_asic import load_arch
from coaccel.sim.hbq_asic.stats import BufferAccess, DramAccess, HbqSimStats
from coaccel.targets.hbq_asic.report import (
    format_validation_table,
    write_cost_report,
    write_validation_report,
)
from coaccel.targets.hbq_asic.validation import Target, Validation


def _validation() -> Validation:
    return Validation(
        (
            Target(
                "pe_area",
                "row | with pipe",
                101.0,
                100.0,
                "um2/MAC",
                5.0,
                "spec §3.5",
                "fit",
                0.5,
                100.5,
                fit="fitted",
            ),
            Target(
                "system_energy",
                "model / HBQ-E",
                3.45,
                3.0,
                "J",
                10.0,
                "spec §3.6",
                "DRAM higher: simulated tiles",
                0.2,
                ours_as_paper=3.06,
            ),
            Target("claim", "missing", math.nan, 4.6, "x", None, "spec §3.1", "no baseline"),
        ),
        notes=("a note",),
    )


def test_validation_csv_and_markdown(tmp_path: Path) -> None:
    paths = write_validation_report(_validation(), tmp_path / "v")
    assert [p.name for p in paths] == ["hbq_validation.csv", "hbq_validation.md"]
    rows = list(csv.DictReader(paths[0].open()))
    assert tuple(rows[0]) == VALIDATION_CSV_COLUMNS
    assert rows[0]["error_pct"] == "1" and rows[0]["status"] == "ok"
    assert rows[0]["ours_loo"] == "100.5" and rows[0]["loo_error_pct"] == "0.5"
    assert rows[0]["fit"] == "fitted" and rows[0]["loo_status"] == "ok"
    assert rows[1]["fit"] == "predicted" and rows[1]["loo_status"] == ""
    assert rows[1]["status"] == "differs" and rows[1]["error_pct"] == "15"
    assert rows[1]["ours_as_paper"] == "3.06" and rows[1]["as_paper_error_pct"] == "2"
    assert rows[0]["ours_as_paper"] == "" and rows[0]["as_paper_error_pct"] == ""
    assert rows[2]["ours"] == "" and rows[2]["status"] == "baseline missing"
    md = paths[1].read_text()
    assert "row \\| with pipe" in md
    assert "## System energy per 2048-token prefill" in md
    assert "DRAM higher: simulated tiles" in md and "Sources: spec §3.6" in md
    assert "| fitted / predicted |" in md and "| LOO status |" in md
    assert "Targets: predicted: 1 baseline missing, 1 differs; fitted (in sample): 1 ok" in md


def test_validation_text_says_why_it_differs() -> None:
    text = format_validation_table(_validation())
    assert "why (model / HBQ-E): DRAM higher: simulated tiles" in text
    assert "why (missing): no baseline" in text
    assert (
        "targets: predicted: 1 baseline missing, 1 differs; fitted (in sample): 1 ok; "
        "leave-one-out of the fitted rows: 1 within tolerance (largest |error| 0.5 %)"
    ) in text
    pe_rows = text.split("PE area per MAC")[1].split("\n\n")[0]
    assert "fitted" in pe_rows and "100.5 (+0.5%) ok" in pe_rows
    # the [R-PM]-accounting column appears for the group that has it: 3.06 vs 3.0 = +2.0 %
    sys_block = text.split("System energy")[1].split("\n\n")[0]
    assert "ours as [R-PM] counts (error)" in sys_block and "3.06 (+2.0%)" in sys_block
    pe_block = text.split("PE area per MAC")[1].split("\n\n")[0]
    assert "[R-PM] counts" not in pe_block


def test_validation_band_and_data_columns(tmp_path: Path) -> None:
    """A row judged by a band shows the band, the ``data`` column says real or synthetic, and
    the Markdown shows only the columns a group uses."""
    v = Validation(
        (
            Target("w1", "inside", 1.0, 1.02, "s", None, "[S12] f", "n", ours_low=0.95,
                   ours_high=1.05, data="real"),
            Target("w1", "outside", 1.0, 1.2, "s", None, "[S12] f", "too slow", ours_low=0.95,
                   ours_high=1.05, data="synthetic", fit="fitted"),
            Target("curve_mape", "curve: MAPE", 3.0, 0.0, "%", None, "[S12] f", "n",
                   tolerance_abs=5.0),
        )
    )  # fmt: skip
    text = format_validation_table(v)
    assert "ours (band)" in text and "1 (0.95..1.05)" in text
    assert "why (outside): too slow" in text
    assert text.splitlines()[-1] == "targets: predicted: 2 ok; fitted (in sample): 1 differs"
    csv_path, md_path = write_validation_report(v, tmp_path)
    rows = list(csv.DictReader(csv_path.open()))
    assert [(r["data"], r["ours_low"], r["ours_high"], r["status"]) for r in rows[:2]] == [
        ("real", "0.95", "1.05", "ok"),
        ("synthetic", "0.95", "1.05", "differs"),
    ]
    assert rows[2]["tolerance_abs"] == "5" and rows[2]["tolerance_pct"] == ""
    assert rows[2]["status"] == "ok" and rows[2]["error_pct"] == ""
    w1, curve = md_path.read_text().split("## curve_mape")
    assert "| band low | band high |" in w1 and "| data |" in w1 and "| tol. |" not in w1
    assert "| tol. |" in curve and "| band low |" not in curve and "| 1 sigma |" not in curve


def _stats(arch: str, workload: str) -> HbqSimStats:
    return HbqSimStats(
        arch=arch, workload=workload, mode="analytical", config_digest="0" * 64,
        workload_digest="0" * 64, freq_mhz=500.0, cycles=10**6, seconds=2e-3, macs=10**10,
        peak_macs_per_cycle=4096, utilisation=0.5, stall_cycles={},
        buffers={"ACT": BufferAccess(1, 1, 10**7, 0, 664),
                 "WGT": BufferAccess(1, 1, 10**6, 10**6, 544),
                 "PSUM": BufferAccess(1, 1, 10**7, 10**7, 136)},
        dram=DramAccess(1, 1, 10**8, 10**7, {}), by_name={}, tiles={}, layers=1,
        layers_simulated=1, notes=(),
    )  # fmt: skip


def test_cost_report_files(tmp_path: Path) -> None:
    archs = [load_arch(a) for a in ("hbq_e_28nm", "amove_28nm")]
    bds = [evaluate(_stats(a.name, w), a) for w in ("m1:p", "m2:p") for a in archs]
    paths = write_cost_report(bds, tmp_path, notes=["note <b>"])
    names = {p.name for p in paths}
    for stem in ("cost_area", "cost_energy", "cost_pe"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names
        assert (tmp_path / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (tmp_path / f"{stem}.svg").read_bytes()[:2000]
    rows = list(csv.DictReader((tmp_path / "cost_report.csv").open()))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert {r["kind"] for r in rows} == {"hbq_asic"}
    for r in rows:
        assert r["source"] and r["unit"] in ("um2", "J", "um2/MAC", "fJ/MAC")
    # area once per arch (5 components + 2 PE rows), energy per run (7 components)
    assert len(rows) == 2 * 7 + 4 * 7
    dram = [r for r in rows if r["component"] == "dram"]
    assert float(dram[0]["value"]) == pytest.approx(1.1e8 * 32e-12)
    md = (tmp_path / "cost_report.md").read_text()
    assert "### Area by component" in md and "(cost_area.png)" in md
    html = (tmp_path / "cost_report.html").read_text()
    assert "note &lt;b&gt;" in html and "<img src='data:image/png;base64," in html
    # one self-contained page: no image loaded from another file
    assert not re.search(r"""(src|href)\s*=\s*['"](?!data:)""", html)
    # each chart's caption is drawn in the image and given once more, as its text alternative
    assert html.count("<img ") == 3 and "<figcaption>" not in html
    assert "![Energy by component per workload run. Source: coaccel cost model" in md


def test_area_only_report(tmp_path: Path) -> None:
    paths = write_cost_report([arch_area(load_arch("hbq_a_28nm"))], tmp_path)
    assert not any(p.name.startswith("cost_energy") for p in paths)
    assert "Energy by component" not in (tmp_path / "cost_report.md").read_text()


def test_cli_validate_no_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "hbq", "--no-system", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "PE area per MAC (published rows, ±5 %)" in out
    assert (tmp_path / "hbq_validation.csv").is_file()


def test_cli_report_area_only_and_one_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "hbq_e_28nm", "--area-only", "--out", str(tmp_path / "a")]) == 0
    assert (
        main(
            [
                "report",
                "hbq_e_28nm",
                "nvfp4_28nm",
                "--workloads",
                "llama-3.2-3b",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader((tmp_path / "b" / "cost_report.csv").open()))
    assert {r["workload"] for r in rows if r["quantity"] == "energy"} == {"llama-3.2-3b:prefill_2k"}
    assert main(["report", "no_such_arch"]) == 2


@pytest.mark.slow
def test_full_five_by_five_report_under_a_minute(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    rc = main(
        [
            "report",
            "hbq_e_28nm",
            "hbq_a_28nm",
            "nvfp4_28nm",
            "mxfp_w4a8_28nm",
            "amove_28nm",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    assert time.perf_counter() - t0 < 60.0
    rows = list(csv.DictReader((tmp_path / "cost_report.csv").open()))
    runs = {(r["arch"], r["workload"]) for r in rows if r["quantity"] == "energy"}
    assert len(runs) == 25


# ---------------------------------------------------------------------------------------------
# Figures a reader understands


def _svg_text(path: Path) -> str:
    """The text elements of an SVG written with text kept as text."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    return "\n".join("".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text"))


def _srgb_to_lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour with channels in 0..1."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _check_figure_layout(fig) -> None:
    """Legend beside the axes (overlapping none), distinct series colours, labelled axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Rectangle

    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    assert fig.legends, "the figure legend"
    axes = fig.get_axes()
    for ax in axes:
        assert ax.get_legend() is None  # no legend inside an axes
        assert ax.get_ylabel() or ax is not axes[0]
        assert ax.get_xlabel()
    for leg in fig.legends:
        box = leg.get_window_extent(r)
        for ax in axes:
            assert not box.overlaps(ax.get_window_extent(r)), "legend covers the data"
    colors: dict[str, tuple[float, float, float]] = {}
    for ax in axes:
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_label() and patch.get_label()[0] != "_":
                colors.setdefault(patch.get_label(), to_rgb(patch.get_facecolor()))
        for cont in ax.containers:
            lab = cont.get_label()
            if lab and lab[0] != "_" and getattr(cont, "patches", None):
                colors.setdefault(lab, to_rgb(cont.patches[0].get_facecolor()))
    labs = list(colors)
    assert len(labs) >= 2
    for i, a in enumerate(labs):
        for b in labs[i + 1 :]:
            la, lb = _srgb_to_lab(colors[a]), _srgb_to_lab(colors[b])
            d = math.dist(la, lb)
            assert d > 20, f"{a} and {b} look alike (Delta E {d:.1f})"


def _breakdowns(node: float = 28):
    archs = [load_arch(a) for a in ("hbq_e_28nm", "hbq_a_28nm", "nvfp4_28nm", "amove_28nm")]
    return [evaluate(_stats(a.name, w), a, node) for w in ("m1:p", "m2:p") for a in archs]


@pytest.mark.parametrize("plot", ["plot_area", "plot_energy", "plot_pe"])
def test_cost_charts_are_readable(plot: str, tmp_path: Path, monkeypatch) -> None:
    import coaccel.targets.hbq_asic.report as rep

    figs = []
    real = rep.save_figure

    def keep(fig, base, formats=("png", "svg")):
        figs.append(fig)
        return real(fig, base, formats)

    monkeypatch.setattr(rep, "save_figure", keep)
    paths = getattr(rep, plot)(_breakdowns(), tmp_path)
    (fig,) = figs
    _check_figure_layout(fig)
    svg = _svg_text(next(p for p in paths if p.suffix == ".svg"))
    ylabel = {"plot_area": "area (mm²)", "plot_energy": "energy per run (J)"}.get(
        plot, "PE area per MAC (µm²/MAC)"
    )
    assert ylabel in svg and "architecture" in svg
    # the caption: source, seed and settings
    assert "Source: coaccel cost model" in svg and "no random seed" in svg
    assert "pe_calibration_28nm.yaml" in svg and "28 nm" in svg
    if plot == "plot_energy":
        assert "mode analytical" in svg and "m1:p" in svg


def test_cost_charts_for_another_node_speak_of_that_node(tmp_path: Path) -> None:
    write_cost_report(_breakdowns(7), tmp_path)
    for stem in ("cost_area", "cost_energy", "cost_pe"):
        svg = _svg_text(tmp_path / f"{stem}.svg")
        assert "7 nm" in svg
        assert "unless stated" not in svg
        # bar names without the config's node suffix (the 28 nm tables it names stay)
        assert "hbq_e\n" in svg and "amove\n" in svg
        assert not re.search(r"(hbq_e|hbq_a|nvfp4|amove)_28nm", svg)
