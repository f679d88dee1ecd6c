"""The sweep report (coaccel.report.sweep, ``coaccel sweep-report``): one self-contained HTML
page with the plotly library inline and the PNGs as data URIs, Markdown, CSVs, the manifest,
and the command's errors."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from coaccel.arch_configs import path as config_path
from coaccel.cli import main
from coaccel.dse import Store, run_sweep
from coaccel.report.files import MANIFEST

SMALL = config_path("sweeps/small_test.yaml")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_bytes = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_bytes += len(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep_report")
    db = d / "s.sqlite"
    run_sweep(SMALL, db)
    out = d / "out"
    rc = main(["sweep-report", str(db), "--spec", str(SMALL), "--out", str(out), "--quiet"])
    assert rc == 0
    return db, out


def test_html_is_self_contained(report):
    _, out = report
    text = (out / "sweep_report.html").read_text(encoding="utf-8")
    p = _Tags()
    p.feed(text)
    scripts = [a for t, a in p.tags if t == "script"]
    assert scripts and all("src" not in a for a in scripts)  # every script inline
    # the plotly library itself is in the page (megabytes of script), not fetched
    assert p.script_bytes > 1_000_000
    assert "Plotly.newPlot" in text
    imgs = [a for t, a in p.tags if t == "img"]
    assert len(imgs) >= 3
    assert all((a.get("src") or "").startswith("data:image/png;base64,") for a in imgs)
    for t, a in p.tags:
        for k in ("src", "href"):
            v = a.get(k) or ""
            assert not re.match(r"(https?:)?//", v), f"<{t} {k}={v!r}> needs the network"
    assert not [t for t, _ in p.tags if t in ("link", "iframe")]


def test_html_holds_points_breakdowns_and_provenance(report):
    db, out = report
    text = (out / "sweep_report.html").read_text(encoding="utf-8")
    with Store(db) as st:
        rows = list(st.rows())
    for r in rows:
        assert r.point_id[:8] in text
    ok = [r for r in rows if r.status == "ok"]
    for name in ("pe_array.n_pes", "buffers.psum.size_kib"):
        assert name in text
    # provenance: config digest of a broken-down design, the version, the spec's own text
    assert any(r.config_digest in text for r in ok)
    assert "small HBQ-E sweep for tests" in text
    assert "area_mm2 &lt;= 2" in text  # the spec's limit, HTML-escaped
    for word in ("fitted", "predicted", "published", "validation error %", "[R-PM]"):
        assert word in text
    assert "(selected)" in text


def test_csvs_and_manifest(report):
    db, out = report
    with Store(db) as st:
        n = len(st)
        ids = {r.point_id for r in st.rows()}
    with (out / "sweep_points.csv").open() as f:
        pts = list(csv.DictReader(f))
    assert {r["point_id"] for r in pts} == ids and len(pts) == n
    assert {"energy_j [J]", "seconds [s]", "area_mm2 [mm2]", "param.pe_array.n_pes"} <= set(pts[0])
    assert sum(r["selected"] == "True" for r in pts) == 1
    with (out / "sweep_breakdown.csv").open() as f:
        bd = list(csv.DictReader(f))
    assert bd and {r["role"] for r in bd} <= {"fitted", "predicted", "published"}
    assert {r["unit"] for r in bd} == {"um2", "J"}
    assert all(r["source"] for r in bd)
    man = json.loads((out / MANIFEST).read_text())
    assert man["command"] == "coaccel sweep-report"
    listed = {e["file"] for e in man["files"]}
    assert {"sweep_report.html", "sweep_report.md", "sweep_points.csv"} <= listed
    for e in man["files"]:
        assert (out / e["file"]).stat().st_size == e["bytes"]
    assert man["settings"]["spec_digest"]


def test_markdown_links_its_pngs(report):
    _, out = report
    md = (out / "sweep_report.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert links and all((out / x).is_file() for x in links)
    assert "```yaml" in md


def test_json_output_names_the_selected_design(report, tmp_path, capsys):
    db, _ = report
    rc = main(["sweep-report", str(db), "--spec", str(SMALL), "--out", str(tmp_path), "--json",
               "--rule", "best:area_mm2"])  # fmt: skip
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    with Store(db) as st:
        feas = [r for r in st.rows(status="ok") if r.feasible]
    best = min(feas, key=lambda r: r.metrics["area_mm2"][0])
    assert doc["selected"][0]["point_id"] == best.point_id
    assert Path(doc["html"]).is_file()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--objectives", "energy_jj"], "did you mean 'energy_j'"),
        (["--select", "zzzz"], "no evaluated point"),
        (["--rule", "worst"], "selection rule"),
        (["--objectives", "energy_j:up"], "unknown sense"),
    ],
)
def test_errors_are_one_line(report, tmp_path, capsys, extra, message):
    db, _ = report
    rc = main(["sweep-report", str(db), "--spec", str(SMALL), "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_store_and_bad_out(tmp_path, capsys):
    rc = main(["sweep-report", str(tmp_path / "no.sqlite"), "--spec", str(SMALL)])
    assert rc == 2 and "no such file" in capsys.readouterr().err
    db = tmp_path / "s.sqlite"
    Store(db).close()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["sweep-report", str(db), "--spec", str(SMALL), "--out", str(blocker)])
    assert rc == 2 and "is a file" in capsys.readouterr().err


def test_help_texts_tell_the_two_reports_apart(capsys):
    for cmd, other in (("report", "sweep-report"), ("sweep-report", "coaccel report")):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        assert other in capsys.readouterr().out


def test_two_workloads_get_two_interactive_fronts(tmp_path):
    from coaccel.dse.analysis import analyze
    from coaccel.report.sweep import write_sweep_report

    spec = tmp_path / "two.yaml"
    spec.write_text(
        SMALL.read_text().replace(
            "workloads: [llama-3.2-1b:prefill_1024]",
            "workloads: [llama-3.2-1b:prefill_256, llama-3.2-1b:prefill_512]",
        )
    )
    db = tmp_path / "two.sqlite"
    run_sweep(spec, db)
    paths = write_sweep_report(analyze(spec, db, max_breakdowns=1), tmp_path / "out")
    text = paths[-1].read_text(encoding="utf-8")
    assert text.count("Plotly.newPlot") == 2
    assert 'id="front-0"' in text and 'id="front-1"' in text
    for w in ("prefill_256", "prefill_512"):
        assert (tmp_path / "out" / f"breakdown_llama_3_2_1b_{w}.png").is_file()
