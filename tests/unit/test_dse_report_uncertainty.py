"""The sweep report draws an objective with its uncertainty: a stored ``<metric>_std`` (the
perplexity's spread over text windows) as symmetric error bars and ``value ± std``, a
``<metric>_lower`` / ``<metric>_upper`` pair as asymmetric bars and ``value [lower, upper]``;
a sweep without such metrics gets the report it got before. Synthetic stores: no model runs."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from coaccel import arch_configs
from coaccel.dse import Row, Store, expand, load_spec
from coaccel.dse.analysis import SPREAD_METRICS, analyze, objective_spreads
from coaccel.dse.spec import AccuracySpec

ACC = AccuracySpec(measure="perplexity", windows=4, window_tokens=128)

SPEC = """\
version: 1
description: synthetic uncertainty sweep
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_1024]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32]
  buffers.psum.size_kib: [68, 136]
strategy: {kind: grid}
objectives:
  - {metric: seconds, goal: minimize}
"""
# perplexity: from the stored rows; energy_j: an objective without a spread
OBJECTIVES = [("perplexity", "min"), ("seconds", "min"), ("energy_j", "min")]


def _row(point_id: str, metrics: dict, workload: str = "m:s", params=None) -> Row:
    return Row(point_id, workload, dict(params or {}), "d" * 64, "s" * 64, metrics, True, "ok",
               None, 0.0, 0.0, "0")  # fmt: skip


# ------------------------------------------------------------------------ the pure rule


def test_spreads_std_interval_and_none():
    rows = [
        _row("a", {"perplexity": (20.0, "1"), "perplexity_std": (1.5, "1"),
                   "seconds": (2.0, "s"), "seconds_lower": (1.5, "s"),
                   "seconds_upper": (3.0, "s"), "energy_j": (1.0, "J")}),
        _row("b", {"perplexity": (18.0, "1"), "seconds": (1.0, "s"),
                   "energy_j": (2.0, "J")}),  # no spread stored for this point
        _row("c", {"perplexity": (19.0, "1"), "perplexity_std": (float("inf"), "1"),
                   "seconds": (1.2, "s"), "seconds_lower": (1.4, "s"),  # lower above value
                   "seconds_upper": (1.3, "s"), "energy_j": (3.0, "J")}),
    ]  # fmt: skip
    metrics = ["perplexity", "seconds", "energy_j"]
    values = np.array([[r.metrics[m][0] for m in metrics] for r in rows])
    ppl, sec, energy = objective_spreads(rows, metrics, values)
    assert energy is None
    assert (ppl.kind, ppl.sources) == ("std", ("perplexity_std",))
    np.testing.assert_array_equal(ppl.below, [1.5, np.nan, np.nan])  # inf: no bar
    np.testing.assert_array_equal(ppl.above, ppl.below)
    np.testing.assert_array_equal(ppl.low, [1.5, np.nan, np.inf])  # the table keeps it
    assert (sec.kind, sec.sources) == ("interval", ("seconds_lower", "seconds_upper"))
    np.testing.assert_allclose(sec.below, [0.5, np.nan, np.nan])  # an inconsistent interval
    np.testing.assert_allclose(sec.above, [1.0, np.nan, 0.1])  # draws no bar on that side
    fmt = lambda x: f"{x:.4g}"  # noqa: E731
    assert ppl.cell(20.0, 0, fmt) == "20 ± 1.5"
    assert ppl.cell(18.0, 1, fmt) == "18"
    assert sec.cell(2.0, 0, fmt) == "2 [1.5, 3]"
    assert sec.cell(1.0, 1, fmt) == "1"
    # without a spec the note cannot say over how many windows
    assert "windows" in ppl.short and "4" not in ppl.short


def test_spread_note_counts_the_windows_of_the_spec():
    rows = [_row("a", {"perplexity": (20.0, "1"), "perplexity_std": (1.5, "1")})]
    (sp,) = objective_spreads(rows, ["perplexity"], [[20.0]], SimpleNamespace(accuracy=ACC))
    assert sp.short == "±1 σ over 4 windows"
    assert "over the 4 text windows of 128 tokens that smollm2-135m scores" in sp.what


def test_generic_std_rule_and_the_registry():
    assert SPREAD_METRICS["perplexity"] == "perplexity_std"
    rows = [_row("a", {"edp_js": (3.0, "J*s"), "edp_js_std": (0.25, "J*s"),
                       "edp_js_lower": (1.0, "J*s"), "edp_js_upper": (9.0, "J*s")})]  # fmt: skip
    (sp,) = objective_spreads(rows, ["edp_js"], [[3.0]])
    assert sp.kind == "std" and sp.sources == ("edp_js_std",)  # std wins over an interval
    assert sp.short == "±1 σ" and "edp_js_std" in sp.what


# ------------------------------------------------------------------------ the report


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A store of synthetic rows (perplexity ± std over windows, seconds in an interval), its
    analysis (with the spec's accuracy block set as a perplexity sweep's) and its report, with
    every front chart's matplotlib figure kept."""
    from coaccel.report import sweep as rep

    tmp = tmp_path_factory.mktemp("unc")
    spec_path = tmp / "unc.yaml"
    spec_path.write_text(SPEC)
    ls = load_spec(spec_path)
    ls = dataclasses.replace(ls, accuracy=ACC)
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    rows = []
    for n, p in enumerate(points):
        ppl, sec = 20.0 - n, 1.0 + 0.5 * n  # a trade-off: every point on the front
        rows.append(Row(
            p.point_id, p.workload, dict(p.params), "d" * 64, ls.digest,
            {"perplexity": (ppl, "1"), "perplexity_std": (0.1 * (n + 1), "1"),
             "seconds": (sec, "s"), "seconds_lower": (sec - 0.1, "s"),
             "seconds_upper": (sec + 0.3, "s"), "energy_j": (1e-3, "J"),
             "area_mm2": (1.0, "mm2")},
            True, "ok", None, 0.0, 0.0, "0",
        ))  # fmt: skip
    with Store(tmp / "s.sqlite") as st:
        st.add(rows)
    a = analyze(ls, tmp / "s.sqlite", objectives=OBJECTIVES, max_breakdowns=1)
    figs = []
    save = rep.save_figure

    def keep(fig, base, formats):
        figs.append((Path(base).name, fig))
        return save(fig, base, formats)

    mp = pytest.MonkeyPatch()
    mp.setattr(rep, "save_figure", keep)
    try:
        paths = rep.write_sweep_report(a, tmp / "rep")
    finally:
        mp.undo()
    return a, rows, {p.name: p for p in paths}, dict(figs)


def test_analysis_carries_the_spreads(report):
    a, rows, _, _ = report
    (fa,) = a.fronts
    ppl, sec, energy = fa.spreads
    assert energy is None
    k = [r.point_id for r in fa.rows].index(rows[2].point_id)
    assert ppl.below[k] == ppl.above[k] == pytest.approx(0.3)
    assert (sec.below[k], sec.above[k]) == pytest.approx((0.1, 0.3))


def test_front_chart_draws_the_bars(report):
    a, rows, _, figs = report
    (fa,) = a.fronts
    fig = figs["front_llama_3_2_1b_prefill_1024_perplexity_vs_seconds"]
    (ax,) = [x for x in fig.axes if x.get_xlabel()]
    assert ax.get_xlabel().endswith("error bars: ±1 σ over 4 windows")
    assert ax.get_ylabel().endswith("error bars: lower .. upper interval")
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert {"x error bars: ±1 σ over 4 windows", "y error bars: lower .. upper interval"} <= set(
        legend
    )
    # every point's bars span exactly value ± std (x) and lower .. upper (y)
    from matplotlib.container import ErrorbarContainer

    xs, ys = set(), set()
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer) and c.lines[2]:
            for coll in c.lines[2]:
                for seg in coll.get_segments():
                    (x0, y0), (x1, y1) = seg
                    if y0 == y1:
                        xs.add((round(x0, 9), round(x1, 9), round(y0, 9)))
                    else:
                        ys.add((round(y0, 9), round(y1, 9), round(x0, 9)))
    want_x = {(round(r.metrics["perplexity"][0] - r.metrics["perplexity_std"][0], 9),
               round(r.metrics["perplexity"][0] + r.metrics["perplexity_std"][0], 9),
               round(r.metrics["seconds"][0], 9)) for r in rows}  # fmt: skip
    want_y = {(round(r.metrics["seconds_lower"][0], 9), round(r.metrics["seconds_upper"][0], 9),
               round(r.metrics["perplexity"][0], 9)) for r in rows}  # fmt: skip
    assert xs == want_x and ys == want_y


def test_tables_csv_and_page_show_the_spread(report):
    a, rows, paths, _ = report
    md = paths["sweep_report.md"].read_text()
    assert "uncertainty of perplexity: error bars in the charts and value ± spread in the " \
           "points table are one standard deviation of the per-window perplexities over " \
           "the 4 text windows of 128 tokens" in md  # fmt: skip
    assert "uncertainty of seconds: error bars in the charts and value [lower, upper]" in md
    r0 = rows[0]
    assert "| 20 ± 0.1 | 1 [0.9, 1.3] |" in md.replace(f"| {r0.point_id[:8]} ", "")
    with paths["sweep_points.csv"].open() as f:
        recs = {r["point_id"]: r for r in csv.DictReader(f)}
    got = recs[r0.point_id]
    assert float(got["perplexity_std"]) == pytest.approx(0.1)
    assert (float(got["seconds_lower [s]"]), float(got["seconds_upper [s]"])) == pytest.approx(
        (0.9, 1.3)
    )
    page = paths["sweep_report.html"].read_text()
    # the interactive front's data (JSON: non-ASCII escaped) and the HTML table
    assert '"arrayminus":[0.1' in page
    assert "perplexity (error bars: \\u00b11 \\u03c3 over 4 windows)" in page
    assert "<td>20 ± 0.1</td>" in page


def test_report_without_a_spread_has_no_bars(tmp_path):
    """small_test's metrics have no spread: no bar, no ± and no extra column."""
    from coaccel.report.sweep import point_rows

    ls = load_spec(arch_configs.path("sweeps/small_test.yaml"))
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)[:2]
    rows = [Row(p.point_id, p.workload, dict(p.params), "d" * 64, ls.digest,
                {"energy_j": (1e-3 * (n + 1), "J"), "seconds": (1.0 / (n + 1), "s"),
                 "area_mm2": (1.0, "mm2")}, True, "ok", None, 0.0, 0.0, "0")
            for n, p in enumerate(points)]  # fmt: skip
    with Store(tmp_path / "s.sqlite") as st:
        st.add(rows)
    a = analyze(ls, tmp_path / "s.sqlite", objectives=[("energy_j", "min"), ("seconds", "min")],
                max_breakdowns=1)  # fmt: skip
    (fa,) = a.fronts
    assert fa.spreads == (None, None)
    assert set(point_rows(a)[0]) >= {"energy_j [J]", "seconds [s]"}
    assert not any(k.endswith(("_std", "_lower", "_upper")) for k in point_rows(a)[0])
    assert all(not math.isnan(x) for x in fa.values.ravel())


@pytest.mark.browser
def test_interactive_front_bars_follow_the_menus(report):
    """In a headless browser: the perplexity bars are drawn on the x axis; putting seconds on
    x swaps in its interval's bars, putting energy (no spread) there removes them; no console
    error."""
    import os
    import shutil

    from testkit import require, require_module

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None and os.path.exists("/usr/bin/chromium"):
        exe = "/usr/bin/chromium"
    require("program 'chromium'", exe is not None, "apt-get install chromium")
    require_module("playwright", "pip install -e '.[dev]' (never 'playwright install')")
    from playwright.sync_api import sync_playwright

    _, _, paths, _ = report
    bars = (
        "Array.from(document.querySelector('.js-plotly-plot').querySelectorAll('g.errorbar'))"
        ".filter(g => g.querySelector('path.xerror')).length"
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(paths["sweep_report.html"].as_uri(), wait_until="load")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
            assert page.evaluate(bars) == 5  # the 4 front points and the selected one again
            data = "document.querySelector('.js-plotly-plot').data"
            assert page.evaluate(f"{data}.map(t => t.error_x.visible)") == [True] * 4
            for metric, visible in (("seconds", True), ("energy_j", False)):
                page.locator(".js-plotly-plot .updatemenu-header").first.click()
                page.locator(
                    ".js-plotly-plot .updatemenu-dropdown-button", has_text=metric
                ).first.click()
                page.wait_for_function(
                    "document.querySelector('.js-plotly-plot .xtitle').textContent"
                    f".startsWith('{metric}')"
                )
                got = page.evaluate(f"{data}.map(t => t.error_x.visible)")
                assert got == [visible] * 4, (metric, got)
            assert page.evaluate(bars) == 0
            assert not problems, problems
        finally:
            browser.close()
