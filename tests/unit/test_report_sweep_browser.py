"""The sweep report's HTML page in a real headless browser (Debian's chromium, driven by
playwright): it loads without console errors or network requests, every image and plot renders,
hovering a point of the front shows its parameters, and the axis menus switch objectives.

Skipped on a machine without chromium or playwright; a failure in CI
(``COACCEL_REQUIRE_TOOLS=1``), where ``.ci/run`` installs chromium."""

from __future__ import annotations

import os
import shutil

import pytest
from testkit import require, require_module

from coaccel.arch_configs import path as config_path
from coaccel.cli import main
from coaccel.dse import run_sweep

pytestmark = pytest.mark.browser

DEMO = config_path("sweeps/demo_buffers.yaml")


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    db = d / "s.sqlite"
    run_sweep(DEMO, db)
    out = d / "out"
    assert main(["sweep-report", str(db), "--spec", str(DEMO), "--out", str(out), "--quiet"]) == 0
    return out / "sweep_report.html"


def test_report_renders_and_hovers(page_path):
    exe = _chromium()
    require("program 'chromium'", exe is not None, "apt-get install chromium")
    require_module("playwright", "pip install -e '.[dev]' (never 'playwright install')")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            problems: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
            # every image decoded
            imgs = page.evaluate(
                "Array.from(document.images).map(i => [i.complete, i.naturalWidth])"
            )
            assert len(imgs) >= 3
            assert all(done and width > 0 for done, width in imgs)
            # every plotly plot rendered its SVG and its points
            n_plots = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
            n_svg = page.evaluate(
                "Array.from(document.querySelectorAll('.js-plotly-plot'))"
                ".filter(p => p.querySelector('.main-svg')).length"
            )
            assert n_plots >= 1 and n_svg == n_plots
            # hover a front point: the label shows the design's parameters
            point = page.locator(".js-plotly-plot .scatterlayer .trace .points path").first
            point.scroll_into_view_if_needed()
            box = point.bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
            label = page.locator(".hoverlayer").text_content() or ""
            assert "pe_array.n_pes = " in label and "buffers.psum.size_kib = " in label
            # the x menu puts another objective on the axis
            title = page.locator(".js-plotly-plot .xtitle").first
            before = title.text_content()
            page.locator(".js-plotly-plot .updatemenu-header").first.click()
            page.locator(
                ".js-plotly-plot .updatemenu-dropdown-button", has_text="area_mm2"
            ).first.click()
            page.wait_for_function(
                "document.querySelector('.js-plotly-plot .xtitle').textContent.includes('area')"
            )
            assert title.text_content() != before
            assert not problems, problems
            assert all(u.startswith("file:") or u.startswith("data:") for u in requests), requests
        finally:
            browser.close()
