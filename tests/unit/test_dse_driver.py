"""Sweep driver and result store: round trip, failures recorded, workers agree (resuming after
SIGKILL, several times, is in test_dse_robust_procs.py)."""

from __future__ import annotations

import csv
import sys

import pytest

from coaccel import arch_configs
from coaccel.cli import main
from coaccel.dse import Row, Store, run_sweep
from coaccel.spine.errors import CoaccelError

SMALL = arch_configs.path("sweeps/small_test.yaml")


def _row(i: int, status: str = "ok") -> Row:
    return Row(
        point_id=f"{i:032x}",
        workload="m:s",
        params={"a.b": i, "c": 0.5},
        config_digest="d" * 64,
        spec_digest="s" * 64,
        metrics={}
        if status == "failed"
        else {"cycles": (10 * i, "cycle"), "energy_j": (0.25, "J")},
        feasible=None if status == "failed" else True,
        status=status,
        error="Traceback ...\nValueError: boom" if status == "failed" else None,
        started_at=1000.0 + i,
        elapsed_s=0.001,
        version="0.1.0",
    )


def test_store_round_trip(tmp_path):
    path = tmp_path / "r.sqlite"
    rows = [_row(1), _row(2), _row(3, "failed")]
    with Store(path) as st:
        assert st.add(rows) == 3
        assert st.add([_row(2), _row(4)]) == 1  # known id skipped, new one written
    with Store(path) as st:
        assert len(st) == 4
        assert list(st.rows())[:3] == rows
        assert [r.point_id for r in st.rows("failed")] == [_row(3).point_id]
        assert st.get(_row(2).point_id) == _row(2) and st.get("x") is None
        assert st.done_ids([_row(1).point_id, "nope"]) == {_row(1).point_id}
        assert st._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        out = st.to_csv(tmp_path / "r.csv")
        recs = list(csv.DictReader(out.open()))
        assert len(recs) == 4 and recs[0]["param.a.b"] == "1" and recs[1]["cycles [cycle]"] == "20"
        assert recs[2]["status"] == "failed" and recs[2]["error"] == "ValueError: boom"


def test_store_dataframe_and_parquet(tmp_path):
    from testkit import require_module

    require_module("pandas", 'pip install -e ".[dse]"')
    require_module("pyarrow", 'pip install -e ".[dse]"')
    import pandas as pd

    with Store(tmp_path / "r.sqlite") as st:
        st.add([_row(1), _row(2), _row(3, "failed")])
        df = st.to_dataframe()
        assert list(df["energy_j [J]"])[:2] == [0.25, 0.25] and len(df) == 3
        assert list(df["param.a.b"]) == [1, 2, 3]
        back = pd.read_parquet(st.to_parquet(tmp_path / "r.parquet"))
    assert list(back.columns) == list(df.columns)
    assert list(back["cycles [cycle]"])[:2] == [10, 20] and list(back["status"]) == [
        "ok",
        "ok",
        "failed",
    ]


def test_store_exports_need_their_packages(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with Store(tmp_path / "r.sqlite") as st:
        with pytest.raises(CoaccelError, match="needs pyarrow"):
            st.to_parquet(tmp_path / "r.parquet")
        with pytest.raises(CoaccelError, match="needs pandas"):
            st.to_dataframe()


def test_store_refuses_other_files(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("not a database, just text " * 100)
    with pytest.raises(CoaccelError, match="not a sweep store"):
        Store(bad)
    with pytest.raises(CoaccelError, match="is a folder"):
        Store(tmp_path)


def test_failing_point_recorded_others_complete(tmp_path):
    # PSUM 204 KiB with the base's 96 KiB ACT buffer is refused by the architecture check.
    s = run_sweep(SMALL, tmp_path / "r.sqlite")
    assert (s.total, s.evaluated, s.failed, s.skipped) == (6, 6, 2, 0)
    with Store(tmp_path / "r.sqlite") as st:
        failed = list(st.rows("failed"))
        ok = list(st.rows("ok"))
    assert {r.params["buffers.psum.size_kib"] for r in failed} == {204}
    # one line: the exception's type and message, no traceback
    assert all(r.error.startswith("ConfigError: <override of HbqArchConfig>: ") for r in failed)
    assert all("\n" not in r.error and "Traceback" not in r.error for r in failed)
    assert all("one ACT buffer slot (of 2) does not hold" in r.error for r in failed)
    assert all(r.metrics == {} and r.feasible is None for r in failed)
    assert len(ok) == 4
    for r in ok:
        assert r.metrics["edp_js"][0] == pytest.approx(
            r.metrics["energy_j"][0] * r.metrics["seconds"][0]
        )
        assert r.metrics["area_mm2"][1] == "mm2" and r.feasible == (r.metrics["area_mm2"][0] <= 2)
        assert len(r.config_digest) == 64 and r.error is None


def test_two_workers_equal_one(tmp_path):
    a = run_sweep(SMALL, tmp_path / "a.sqlite", workers=1)
    b = run_sweep(SMALL, tmp_path / "b.sqlite", workers=2, batch_size=1)
    assert a.evaluated == b.evaluated == 6
    with Store(tmp_path / "a.sqlite") as sa, Store(tmp_path / "b.sqlite") as sb:
        ra = {r.point_id: r for r in sa.rows()}
        rb = {r.point_id: r for r in sb.rows()}
    assert ra.keys() == rb.keys()
    for k in ra:
        x, y = ra[k], rb[k]
        assert (x.status, x.params, x.config_digest, x.metrics, x.feasible) == (
            y.status,
            y.params,
            y.config_digest,
            y.metrics,
            y.feasible,
        )
        if x.error:
            assert x.error.splitlines()[-1] == y.error.splitlines()[-1]


def test_cli(tmp_path, capsys):
    db = tmp_path / "c.sqlite"
    rc = main(
        [
            "sweep",
            str(SMALL),
            "--store",
            str(db),
            "--workers",
            "2",
            "--export",
            "csv",
            str(tmp_path / "c.csv"),
        ]
    )
    out = capsys.readouterr()
    assert rc == 0 and out.err == ""  # not a terminal: no progress line
    assert "6 points: 0 already stored, 6 evaluated (2 failed)" in out.out
    assert len(list(csv.DictReader((tmp_path / "c.csv").open()))) == 6
    rc = main(["sweep", str(SMALL), "--store", str(db)])
    assert rc == 0 and "6 already stored, 0 evaluated" in capsys.readouterr().out
    rc = main(["sweep", str(SMALL), "--store", str(tmp_path), "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "is a folder" in err and len(err.splitlines()) == 1
    rc = main(["sweep", str(SMALL), "--store", str(db), "--export", "xlsx", "o.xlsx"])
    assert rc == 2 and "valid formats: csv, parquet" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.read_text().replace("pe_array.n_pes", "pe_array.npes"))
    rc = main(["sweep", str(bad), "--store", str(tmp_path / "d.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and "parameters.pe_array.npes: pe_array.npes: unknown key 'npes'" in err


def test_progress_callback(tmp_path):
    seen = []
    run_sweep(SMALL, tmp_path / "p.sqlite", batch_size=2, progress=seen.append)
    assert [p.done for p in seen] == [2, 4, 6]
    assert seen[-1].total == 6 and seen[-1].failed == 2 and seen[-1].skipped == 0
    assert seen[-1].eta_s == 0 and seen[-1].rate_per_s > 0
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(seen, seen[1:], strict=False))


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_sweep(SMALL, tmp_path / "x.sqlite", workers=0)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        run_sweep(SMALL, tmp_path / "x.sqlite", batch_size=0)
