"""Sweep sizes are checked before any work: points counted without expanding the grid, time and
store growth estimated from a probe whose rows are stored (not evaluated again), refusals over
the limits with the options that lift them; failed points store a one-line reason."""

from __future__ import annotations

import dataclasses
import time

import pytest

import coaccel.dse.driver as driver
from coaccel import arch_configs
from coaccel.cli import main
from coaccel.commands.sweep import estimate_line
from coaccel.dse import (
    ParamRange,
    Store,
    SweepEstimate,
    SweepTooLarge,
    count_points,
    estimate_sweep,
    expand,
    failure_reason,
    kept_fraction,
    load_spec,
    run_sweep,
)
from coaccel.dse.evaluate import REASON_CHARS
from coaccel.dse.space import _n_values
from coaccel.spine.config import ConfigError, Problem

SMALL = arch_configs.path("sweeps/small_test.yaml")

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_64, llama-3.2-1b:prefill_128]
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {start: 300, stop: 700, step: 100}
STRATEGY
"""


def _spec(tmp_path, strategy="", params=None):
    text = SPEC.replace("STRATEGY", strategy)
    if params is not None:
        text = text.replace("  freq_mhz: {start: 300, stop: 700, step: 100}", params)
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "strategy",
    [
        "",
        "strategy: {kind: random, seed: 3, samples: 7}",
        "strategy: {kind: lhs, seed: 3, samples: 40}",
        "constraints: ['buffers.psum.size_kib >= 2 * pe_array.n_pes']",
    ],
)
def test_count_points_equals_the_expansion(tmp_path, strategy):
    ls = load_spec(_spec(tmp_path, strategy))
    n = len(expand(ls.spec, ls.constraints, ls.digest))
    if ls.constraints:  # the count is before constraints; the kept fraction is exact here
        assert count_points(ls.spec) == 3 * 2 * 5 * 2
        assert round(count_points(ls.spec) * kept_fraction(ls.spec, ls.constraints)) == n
    else:
        # lhs keeps repeated rows once: the count is an upper bound
        assert count_points(ls.spec) >= n
        assert count_points(ls.spec) == n or "lhs" in strategy


def test_range_counts_match_their_values():
    ranges = [
        ParamRange(start=68, stop=272, step=68),
        ParamRange(start=0.1, stop=0.7, step=0.1),
        ParamRange(start=1, stop=10, step=4),
        ParamRange(start=0.0, stop=1.0, step=1 / 3),
        ParamRange(log2=(3, 9)),
    ]
    for r in ranges:
        assert _n_values(r) == len(r.values()), r


def test_kept_fraction_sampled_without_listing_the_grid(tmp_path):
    spec = _spec(tmp_path, params="  freq_mhz: {start: 1, stop: 1000000000, step: 1}")
    from coaccel.dse import SweepSpec
    from coaccel.spine.config import load_config

    raw = load_config(spec, SweepSpec)
    t0 = time.perf_counter()
    assert count_points(raw) == 3 * 2 * 10**9 * 2
    assert time.perf_counter() - t0 < 0.5  # counted, not listed


def test_huge_sweep_refused_before_any_work(tmp_path, capsys):
    spec = _spec(tmp_path, params="  freq_mhz: {start: 1, stop: 100000000, step: 1}")
    db = tmp_path / "h.sqlite"
    t0 = time.perf_counter()
    rc = main(["sweep", str(spec), "--store", str(db)])
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 5
    assert rc == 2 and len(err.splitlines()) == 1
    assert "sweep too large: 1,200,000,000 points (600,000,000 combinations x 2 workloads)" in err
    assert "over the limit of 1,000,000 points" in err
    assert "--max-points 1200000000" in err and "--yes-large" in err
    assert not db.exists()
    with pytest.raises(SweepTooLarge, match="max_points="):  # the library refuses the same
        run_sweep(spec, db)
    assert not db.exists()


def test_max_points_option(tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    rc = main(["sweep", str(SMALL), "--store", str(db), "--max-points", "5"])
    err = capsys.readouterr().err
    assert rc == 2 and "6 points (6 combinations x 1 workload)" in err
    assert "over the limit of 5 points" in err and "--max-points 6" in err
    assert not db.exists()
    assert main(["sweep", str(SMALL), "--store", str(db), "--max-points", "6"]) == 0
    assert "6 evaluated" in capsys.readouterr().out


def test_store_size_limit(tmp_path, capsys, monkeypatch):
    db = tmp_path / "s.sqlite"
    with pytest.raises(SweepTooLarge, match="grow the store by about") as e:
        run_sweep(SMALL, db, max_store_bytes=10_000)
    assert e.value.estimate is not None and e.value.estimate.todo == 6
    with Store(db) as st:
        assert len(st) == 0  # refused before any point was stored
    import coaccel.dse

    monkeypatch.setattr(coaccel.dse, "DEFAULT_MAX_STORE_BYTES", 10_000)
    rc = main(["sweep", str(SMALL), "--store", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1
    assert "over the limit of 10 kB" in err and "run it anyway with --yes-large" in err
    assert "--max-points" not in err  # raising the point limit would not help
    assert main(["sweep", str(SMALL), "--store", str(db), "--yes-large"]) == 0
    assert "6 evaluated" in capsys.readouterr().out


def test_estimate_from_a_probe_then_from_the_store(tmp_path):
    spec = _spec(tmp_path, "constraints: ['buffers.psum.size_kib >= 2 * pe_array.n_pes']")
    ls = load_spec(spec)
    db = tmp_path / "e.sqlite"
    with Store(db) as st:
        est = estimate_sweep(ls, st, workers=2)
    assert (est.points, est.combinations, est.workloads) == (60, 30, 2)
    assert est.kept == len(expand(ls.spec, ls.constraints, ls.digest)) == 50
    assert est.timed_by == "probe" and 0 < est.per_point_s < 1 and est.workers == 2
    assert 2000 < est.store_bytes / est.todo < 20000  # an HBQ row: about 5 kB
    run_sweep(ls, db)
    size = db.stat().st_size
    assert 0.5 < size / est.store_bytes < 2.0  # the store's growth was about right
    with Store(db) as st:
        again = estimate_sweep(ls, st)
    assert again.timed_by == "store" and again.stored == 50 and again.todo == 0
    assert again.seconds == 0 and again.store_bytes == 0


def test_probe_rows_are_stored_not_evaluated_again(tmp_path, monkeypatch):
    # The per-point path (the batch path's probe reuse is tested in test_dse_batch.py).
    monkeypatch.setattr(driver, "supports", lambda *_: False)
    evaluated = []
    real = driver.evaluate_points

    def counting(*args):
        evaluated.extend(p.point_id for p in args[-1])
        return real(*args)

    monkeypatch.setattr(driver, "evaluate_points", counting)
    seen = []
    s = run_sweep(SMALL, tmp_path / "p.sqlite", batch_size=2, progress=seen.append)
    assert s.evaluated == 6 and len(evaluated) == len(set(evaluated)) == 6
    assert [p.done for p in seen] == [2, 4, 6]  # the probe's row joined its batch
    with Store(tmp_path / "p.sqlite") as st:
        assert len(st) == 6 and all(r.stage == "main" for r in st.rows())


def test_estimate_printed_above_a_few_seconds(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(driver, "_STORE_S", 2.0)  # every point now looks 2 s long
    assert main(["sweep", str(SMALL), "--store", str(tmp_path / "a.sqlite")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("coaccel sweep: about 6 points to evaluate")
    assert "on 1 worker;" in err[0] and "the store grows by about" in err[0]
    rc = main(["sweep", str(SMALL), "--store", str(tmp_path / "b.sqlite"), "--quiet"])
    assert rc == 0 and capsys.readouterr().err == ""


def test_estimate_line():
    est = SweepEstimate(
        points=1_200_000, combinations=600_000, workloads=2, kept=900_000, stored=100_000,
        per_point_s=0.00068, timed_by="probe", workers=2, seconds=272.0,
        store_bytes=340_000_000,
    )  # fmt: skip
    assert estimate_line(est) == (
        "about 800,000 points to evaluate (1,200,000 in the sweep, about 900,000 after "
        "constraints, 100,000 stored) at 0.68 ms a point (timed on a probe): about 4 min 32 s "
        "on 2 workers; the store grows by about 340 MB"
    )
    dask = dataclasses.replace(est, workers=None, timed_by="store", seconds=4.9 * 86400)
    assert "about 4.9 days of CPU time, shared by the cluster" in estimate_line(dask)
    assert "timed on the rows stored" in estimate_line(dask)


def test_failure_reason_is_one_line():
    err = ConfigError([Problem("<override>", "a.b", 1, "too small"), Problem("f", "c", 2, "bad")])
    assert failure_reason(err) == "ConfigError: <override>: a.b: too small; f: c: bad"
    assert failure_reason(ZeroDivisionError()) == "ZeroDivisionError"
    assert failure_reason(KeyError("x")) == "KeyError: 'x'"
    assert failure_reason(ValueError("tab\there\x00nul")) == "ValueError: tab here\\x00nul"
    long = failure_reason(ValueError("key part " + "x" * 5000 + " the end"))
    assert long.startswith("ValueError: key part xxx") and long.endswith("xxx the end")
    assert "characters ...]" in long and len(long) < REASON_CHARS + 40
    assert "\n" not in long


def test_failed_rows_are_small(tmp_path):
    run_sweep(SMALL, tmp_path / "f.sqlite")
    with Store(tmp_path / "f.sqlite") as st:
        failed = list(st.rows("failed"))
    assert len(failed) == 2
    for r in failed:
        assert r.error == r.reason and len(r.error) < 300 and r.error.startswith("ConfigError: ")
    # the report's failure table and CSV show the whole reason
    from coaccel.dse.analysis import analyze
    from coaccel.report.sweep import point_rows

    with Store(tmp_path / "f.sqlite", readonly=True) as st:
        shown = {rec["point_id"]: rec["error"] for rec in point_rows(analyze(SMALL, st))}
    assert {r.point_id: r.error for r in failed}.items() <= shown.items()
