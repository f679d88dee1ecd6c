"""Stages: later stages re-run the previous stage's front (or top k) in their own mode; rows
record stage and mode; each stage resumes on its own. Front-with-margin, Pareto ranks and
top-k selection against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coaccel.dse import (
    Store,
    front_with_margin,
    load_spec,
    pareto_ranks,
    run_sweep,
    top_k_by_rank,
)
from coaccel.spine.config import ConfigError

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_128]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: [400, 600]
strategy: {kind: grid}
stages:
  - {name: screen, mode: analytical}
  - SECOND
objectives:
  - {metric: edp_js, goal: minimize}
  - {metric: area_mm2, goal: minimize}
limits:
  - "area_mm2 <= 2"
"""
FRONT = "{name: fine, mode: cycle, select: front, margin: 0.0}"


def _spec(tmp_path, second=FRONT, name="s.yaml"):
    p = tmp_path / name
    p.write_text(SPEC.replace("SECOND", second))
    return p


def _dominates(q, p):
    return all(a <= b for a, b in zip(q, p, strict=True)) and any(
        a < b for a, b in zip(q, p, strict=True)
    )


def test_two_stages_front_in_cycle_mode_and_resume(tmp_path):
    db = tmp_path / "r.sqlite"
    s = run_sweep(_spec(tmp_path), db)
    with Store(db) as st:
        rows = list(st.rows())
    screen = [r for r in rows if r.stage == "screen"]
    fine = [r for r in rows if r.stage == "fine"]
    assert len(screen) == 12 and all(r.mode == "analytical" for r in screen)
    assert fine and all(r.mode == "cycle" and r.status == "ok" for r in fine)
    # brute-force front of the feasible screen points
    ok = [r for r in screen if r.status == "ok" and r.feasible]
    vals = {r.point_id: (r.metrics["edp_js"][0], r.metrics["area_mm2"][0]) for r in ok}
    front = [r for r in ok if not any(_dominates(vals[q.point_id], vals[r.point_id]) for q in ok)]
    assert sorted(r.params.items() for r in fine) == sorted(r.params.items() for r in front)
    assert {r.point_id for r in fine}.isdisjoint(vals)  # other points: another mode
    assert [x.name for x in s.stages] == ["screen", "fine"]
    assert (s.stages[1].total, s.stages[1].evaluated) == (len(front), len(front))
    # resume per stage: drop half of the second stage and one screen point, rerun
    with Store(db) as st:
        gone = [fine[0].point_id, screen[0].point_id]
        st._db.execute(f"DELETE FROM points WHERE point_id IN ('{gone[0]}', '{gone[1]}')")
    again = run_sweep(_spec(tmp_path), db)
    assert [(x.evaluated, x.skipped) for x in again.stages] == [(1, 11), (1, len(front) - 1)]
    with Store(db) as st:
        assert len(st) == len(rows)


def test_top_k_stage(tmp_path):
    db = tmp_path / "k.sqlite"
    s = run_sweep(_spec(tmp_path, "{name: fine, mode: cycle, select: top_k, top_k: 3}"), db)
    assert s.stages[1].total == 3
    with Store(db) as st:
        rows = list(st.rows())
    ok = [r for r in rows if r.stage == "screen" and r.status == "ok" and r.feasible]
    v = np.array([[r.metrics["edp_js"][0], r.metrics["area_mm2"][0]] for r in ok])
    want = {tuple(sorted(ok[i].params.items())) for i in top_k_by_rank(v, ["min", "min"], 3)}
    got = {tuple(sorted(r.params.items())) for r in rows if r.stage == "fine"}
    assert got == want


@pytest.mark.parametrize(
    ("second", "key", "message"),
    [
        ("{name: screen, mode: cycle}", "stages[1].name", "stage names must differ"),
        ("{name: b, mode: cycle, select: top_k}", "stages[1].top_k", "needs top_k"),
        ("{name: b, mode: cycle, top_k: 2}", "stages[1].top_k", "only select top_k"),
        ("{name: b, mode: cycle, margin: 0.1}", "stages[1].margin", "only select front"),
        ("{name: b, mode: cycle, select: front, margin: -1}", "stages[1].margin", ">= 0"),
        ("{name: b, mode: fast}", "stages[1].mode", "analytical"),
        ("{name: b, mode: cycle, select: best}", "stages[1].select", "front"),
        ("{name: b, mode: cycle, bogus: 1}", "stages[1].bogus", "unknown key"),
    ],
)
def test_bad_stages(tmp_path, second, key, message):
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tmp_path, second))
    assert any(q.key == key and message in str(q) for q in e.value.problems), str(e.value)


def test_bad_first_stage_and_mode(tmp_path):
    p = tmp_path / "b.yaml"
    p.write_text(
        SPEC.replace("  - {name: screen, mode: analytical}\n  - SECOND\n",
                     "  - {name: a, mode: cycle, select: front}\n")
    )  # fmt: skip
    with pytest.raises(ConfigError) as e:
        load_spec(p)
    keys = {q.key for q in e.value.problems}
    assert {"stages[0].select", "stages[0].mode"} <= keys
    p.write_text(SPEC.replace("SECOND", FRONT).split("objectives:")[0])
    with pytest.raises(ConfigError, match=r"stages\[1\]\.select: .*the spec has none"):
        load_spec(p)


def test_front_with_margin_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(20):
        v = rng.integers(1, 20, size=(30, 3)).astype(float)
        senses = ["min", "max", "min"]
        sign = np.array([1.0, -1.0, 1.0])
        for m in (0.0, 0.1, 0.3):
            got = front_with_margin(v, senses, m)
            w = v * sign
            want = []
            for i in range(len(w)):
                better = w[i] - m * np.abs(w[i])
                want.append(not any(_dominates(w[j], better) for j in range(len(w))))
            assert list(got) == want
        assert front_with_margin(v, senses, 0.0).sum() <= front_with_margin(v, senses, 0.3).sum()
    with pytest.raises(ValueError, match="margin must be >= 0"):
        front_with_margin(v, senses, -0.1)


def test_pareto_ranks_and_top_k_brute_force():
    rng = np.random.default_rng(8)
    v = rng.integers(0, 8, size=(25, 2)).astype(float)
    ranks = pareto_ranks(v, ["min", "min"])
    left = set(range(len(v)))
    r = 0
    while left:  # peel fronts by brute force
        front = {i for i in left if not any(_dominates(v[j], v[i]) for j in left)}
        assert {i for i in range(len(v)) if ranks[i] == r} == front
        left -= front
        r += 1
    order = top_k_by_rank(v, ["min", "min"], 7)
    best = sorted(range(len(v)), key=lambda i: (ranks[i], v[i, 0], i))[:7]
    assert order == best
    assert top_k_by_rank(v, ["min", "min"], 100) == sorted(
        range(len(v)), key=lambda i: (ranks[i], v[i, 0], i)
    )
    assert list(itertools.islice(order, 1)) == [best[0]]
