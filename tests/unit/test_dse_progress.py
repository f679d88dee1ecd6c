"""The sweep command's live progress bar (terminal only), --json and --quiet."""

from __future__ import annotations

import io
import json
import sys

from coaccel import arch_configs
from coaccel.cli import main
from coaccel.commands.sweep import ProgressBar
from coaccel.dse import Progress

SMALL = arch_configs.path("sweeps/small_test.yaml")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_line():
    bar = ProgressBar(io.StringIO())
    p = Progress(total=200, skipped=20, done=80, failed=3, elapsed_s=4.0, stage="screen")
    line = bar.line(p, 120)
    assert line.startswith("screen [")
    inside = line[line.index("[") + 1 : line.index("]")]
    assert set(inside) <= {"#", "."} and inside.count("#") == round(0.5 * len(inside))
    assert "100/200 (3 failed, 20 stored)" in line
    assert "20.0 pts/s" in line and "ETA 0:05" in line  # 100 left at 20 points/s
    assert len(bar.line(p, 60)) <= 59
    first = Progress(total=10, skipped=0, done=0, failed=0, elapsed_s=0.0)
    assert "ETA --:--" in bar.line(first, 120)


def test_bar_throttles_and_ends_lines():
    out = io.StringIO()
    bar = ProgressBar(out, fps=1e-6)  # at most one redraw per stage, plus the finishing one
    for done in range(1, 10):
        bar(Progress(10, 0, done, 0, float(done), "a"))
    assert out.getvalue().count("\r") == 1
    bar(Progress(10, 0, 10, 0, 10.0, "a"))  # finished: drawn
    bar(Progress(5, 0, 1, 0, 11.0, "b"))  # new stage: new line, drawn
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.count("\n") == 2
    assert "10/10" in text.split("\n")[0] and text.split("\n")[1].lstrip("\r").startswith("b [")


def test_cli_bar_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    rc = main(["sweep", str(SMALL), "--store", str(tmp_path / "a.sqlite"), "--batch-size", "2"])
    assert rc == 0
    err = tty.getvalue()
    assert "\r" in err and "6/6 (2 failed, 0 stored)" in err and err.endswith("\n")
    tty2 = _Tty()
    monkeypatch.setattr(sys, "stderr", tty2)
    rc = main(["sweep", str(SMALL), "--store", str(tmp_path / "b.sqlite"), "--quiet"])
    assert rc == 0 and tty2.getvalue() == ""
    out = capsys.readouterr().out
    assert "6 points: 0 already stored, 6 evaluated (2 failed)" in out


def test_cli_json(tmp_path, capsys):
    rc = main(["sweep", str(SMALL), "--store", str(tmp_path / "j.sqlite"), "--json"])
    cap = capsys.readouterr()
    assert rc == 0 and cap.err == ""
    doc = json.loads(cap.out)
    assert (doc["total"], doc["evaluated"], doc["failed"], doc["skipped"]) == (6, 6, 2, 0)
    assert doc["stages"] == [
        {"name": "main", "mode": "analytical", "total": 6, "skipped": 0, "evaluated": 6,
         "failed": 2}
    ]  # fmt: skip
    assert doc["store"] == str(tmp_path / "j.sqlite")
