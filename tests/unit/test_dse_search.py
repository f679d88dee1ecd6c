"""NSGA-II search: deterministic for a seed, inside the space and its constraints, resumes from
the store without recomputing, and needs optuna only when used."""

from __future__ import annotations

import dataclasses
import sys
import textwrap

import pytest
from testkit import require_module

from coaccel.dse import Store, Strategy, combinations, expand, load_spec, run_sweep
from coaccel.spine.errors import CoaccelError

require_module("optuna", "pip install -e '.[dse]'")

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_1024]
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {start: 300, stop: 700, step: 50}
constraints:
  - "freq_mhz != 450"
  - "pe_array.n_pes * freq_mhz <= 32000"
strategy: {kind: nsga2, seed: 3, population: 6, generations: GEN}
objectives:
  - {metric: edp_js, goal: minimize}
  - {metric: area_mm2, goal: minimize}
limits:
  - "area_mm2 <= 1.2"
"""


def _spec(tmp_path, generations=4, seed=3):
    p = tmp_path / f"s_{generations}_{seed}.yaml"
    p.write_text(SPEC.replace("GEN", str(generations)).replace("seed: 3", f"seed: {seed}"))
    return load_spec(p)


def _rows(db):
    with Store(db) as st:
        return {r.point_id: r for r in st.rows()}


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        assert (x.params, x.metrics, x.feasible, x.status, x.stage, x.mode) == (
            y.params,
            y.metrics,
            y.feasible,
            y.status,
            y.stage,
            y.mode,
        )


def test_nsga2_deterministic_and_in_space(tmp_path):
    ls = _spec(tmp_path)
    a = run_sweep(ls, tmp_path / "a.sqlite")
    b = run_sweep(ls, tmp_path / "b.sqlite", workers=2)
    ra, rb = _rows(tmp_path / "a.sqlite"), _rows(tmp_path / "b.sqlite")
    _same(ra, rb)
    assert a.evaluated == b.evaluated == len(ra) == a.total
    # at most population x generations proposals, each a point of the grid satisfying the
    # constraints (same ids as the grid's points)
    assert 6 <= len(ra) <= 24
    grid = {p.point_id for p in expand(ls.spec, ls.constraints, ls.digest)}
    assert set(ra) <= grid
    for r in ra.values():
        assert r.params["freq_mhz"] != 450
        assert r.params["pe_array.n_pes"] * r.params["freq_mhz"] <= 32000
        assert r.stage == "main" and r.mode == "analytical"
    other = run_sweep(_spec(tmp_path, seed=4), tmp_path / "c.sqlite")
    assert set(_rows(tmp_path / "c.sqlite")) != set(ra) or other.total != a.total


def test_nsga2_improves_on_its_first_generation(tmp_path):
    # The search must steer: the later generations' points are better (lower EDP at equal
    # area constraints) than the random first generation's, on average over the front.
    import numpy as np

    from coaccel.dse import hypervolume

    ls = _spec(tmp_path, generations=1)
    run_sweep(ls, tmp_path / "g1.sqlite")
    ls8 = _spec(tmp_path, generations=8)
    run_sweep(ls8, tmp_path / "g8.sqlite")

    def hv(db):
        rows = [r for r in _rows(db).values() if r.status == "ok" and r.feasible]
        v = np.array([[r.metrics["edp_js"][0], r.metrics["area_mm2"][0]] for r in rows])
        return hypervolume(v, ["min", "min"], [1.0, 1.2])

    assert hv(tmp_path / "g8.sqlite") > hv(tmp_path / "g1.sqlite")


def test_nsga2_resumes_from_the_store(tmp_path):
    db = tmp_path / "r.sqlite"
    short = run_sweep(_spec(tmp_path, generations=2), db)
    first = _rows(db)
    # A longer search with the same seed proposes the same first generations: their points
    # come from the store (skipped, not recomputed), and the end result equals a fresh run.
    long = run_sweep(_spec(tmp_path, generations=5), db)
    assert long.skipped == short.total and long.evaluated == long.total - short.total
    fresh = tmp_path / "fresh.sqlite"
    run_sweep(_spec(tmp_path, generations=5), fresh)
    after, ref = _rows(db), _rows(fresh)
    _same(after, ref)
    for pid, r in first.items():
        assert after[pid] == r  # not recomputed: the very same row (timings included)
    again = run_sweep(_spec(tmp_path, generations=5), db)
    assert (again.evaluated, again.skipped) == (0, long.total)


def test_nsga2_reuses_grid_points(tmp_path):
    ls = _spec(tmp_path)
    db = tmp_path / "g.sqlite"
    grid = dataclasses.replace(ls, spec=dataclasses.replace(ls.spec, strategy=Strategy()))
    g = run_sweep(grid, db)
    assert g.total == len([c for c in combinations(grid.spec) if all(e(c) for e in ls.constraints)])
    s = run_sweep(ls, db)
    assert s.evaluated == 0 and s.skipped == s.total > 0


def test_nsga2_needs_optuna(tmp_path, monkeypatch):
    ls = _spec(tmp_path)
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(CoaccelError, match=r"strategy nsga2 needs optuna: pip install"):
        run_sweep(ls, tmp_path / "x.sqlite")


@pytest.mark.parametrize(
    ("strategy", "key", "message"),
    [
        ("{kind: nsga2, seed: 1, population: 4}", "strategy.generations", "nsga2 needs"),
        ("{kind: nsga2, population: 4, generations: 2}", "strategy.seed", "nsga2 needs"),
        ("{kind: nsga2, seed: 1, population: 1, generations: 2}", "strategy.population", ">= 2"),
        ("{kind: nsga2, seed: 1, population: 4, generations: 2, samples: 3}", "strategy.samples",
         "takes no"),
        ("{kind: grid, population: 4}", "strategy.population", "grid takes no"),
        ("{kind: random, seed: 1, samples: 3, generations: 2}", "strategy.generations",
         "takes no"),
    ],
)  # fmt: skip
def test_bad_nsga2_strategies(tmp_path, strategy, key, message):
    from coaccel.spine.config import ConfigError

    p = tmp_path / "bad.yaml"
    p.write_text(SPEC.replace("{kind: nsga2, seed: 3, population: 6, generations: GEN}", strategy))
    with pytest.raises(ConfigError) as e:
        load_spec(p)
    assert any(q.key == key and message in q.message for q in e.value.problems), str(e.value)


def test_nsga2_needs_objectives(tmp_path):
    from coaccel.spine.config import ConfigError

    p = tmp_path / "bad.yaml"
    text = SPEC.replace("GEN", "2")
    text = text[: text.index("objectives:")]
    p.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError, match=r"objectives: .*strategy nsga2 needs at least one"):
        load_spec(p)


KILL_SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_128, llama-3.2-1b:prefill_256, llama-3.2-1b:prefill_512]
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {start: 300, stop: 700, step: 25}
strategy: {kind: nsga2, seed: 5, population: 8, generations: 6}
objectives:
  - {metric: edp_js, goal: minimize}
  - {metric: area_mm2, goal: minimize}
"""


@pytest.mark.slow
def test_nsga2_killed_then_resumed(tmp_path):
    import signal
    import sqlite3
    import subprocess
    import time

    spec = tmp_path / "k.yaml"
    spec.write_text(KILL_SPEC)
    db = tmp_path / "k.sqlite"
    cmd = [sys.executable, "-m", "coaccel.cli", "sweep", str(spec), "--store", str(db),
           "--batch-size", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def count() -> int:
        try:
            con = sqlite3.connect(db, timeout=5)
            try:
                return int(con.execute("SELECT COUNT(*) FROM points").fetchone()[0])
            finally:
                con.close()
        except sqlite3.OperationalError:
            return 0

    deadline = time.monotonic() + 120
    while count() < 30 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the search finished before it could be killed"
    before = _rows(db)
    s = run_sweep(spec, db)
    assert s.skipped == len(before) and s.evaluated == s.total - len(before) > 0
    fresh = tmp_path / "f.sqlite"
    run_sweep(spec, fresh)
    _same(_rows(db), _rows(fresh))  # the resumed search ends where an uninterrupted one does
