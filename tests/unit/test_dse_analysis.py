"""Sweep analysis (coaccel.dse.analysis): the selection rule, fronts per workload, and the
per-component cost breakdowns with their fitted / predicted role and validation error."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from coaccel.arch_configs import path as config_path
from coaccel.dse import Store, load_spec, run_sweep
from coaccel.dse.analysis import (
    ROLES,
    analyze,
    group_rows,
    parse_objectives,
    report_objectives,
    select_index,
)
from coaccel.spine.errors import CoaccelError

SMALL = config_path("sweeps/small_test.yaml")

UB_SPEC = """\
version: 1
description: HBQ-E micro-block x PE count, two objectives
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_1024]
mode: analytical
parameters:
  formats.weight.ub_elems: [16, 32]
  formats.activation.ub_elems: [16, 32]
  pe_array.n_pes: [16, 32]
constraints:
  - "formats.weight.ub_elems == formats.activation.ub_elems"
strategy: {kind: grid}
objectives:
  - {metric: edp_js, goal: minimize}
  - {metric: area_mm2, goal: minimize}
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    db = tmp_path_factory.mktemp("small") / "s.sqlite"
    run_sweep(SMALL, db)
    return load_spec(SMALL), db


@pytest.fixture(scope="module")
def ub(tmp_path_factory):
    d = tmp_path_factory.mktemp("ub")
    spec = d / "ub.yaml"
    spec.write_text(UB_SPEC)
    db = d / "ub.sqlite"
    run_sweep(spec, db)
    return load_spec(spec), db


# -- the selection rule ----------------------------------------------------------------------


def test_select_quarter_circle_picks_the_middle():
    # A front on the quarter circle x^2 + y^2 = 1: after scaling both objectives to [0, 1]
    # the point closest to the ideal (0, 0) is at 45 degrees (closed form).
    t = np.linspace(0, np.pi / 2, 91)
    v = np.column_stack([np.cos(t), np.sin(t)])
    v = 1.0 - v  # convex towards the ideal point, still a front
    k = select_index(v, ["min", "min"], np.ones(len(v), dtype=bool))
    assert k == 45


def test_select_respects_senses_and_the_front_mask():
    v = np.array([[0.0, 10.0], [4.0, 6.0], [10.0, 0.0], [5.0, 5.0]])
    front = np.array([True, True, True, False])
    # scaled: (0,1), (0.4,0.4), (1,0); distances 1, 0.566, 1 -> index 1; index 3 is not on
    # the front and is never chosen even though it would be closer
    assert select_index(v, ["min", "min"], front) == 1
    # maximising the second column: negate it; the front order reverses in that column
    w = v.copy()
    w[:, 1] = -w[:, 1]
    assert select_index(w, ["min", "max"], front) == 1
    with pytest.raises(ValueError, match="empty"):
        select_index(v, ["min", "min"], np.zeros(4, dtype=bool))


def test_select_ties_and_constant_objective():
    v = np.array([[1.0, 3.0], [2.0, 3.0], [1.0, 3.0]])
    # the second objective is constant over the front: it scales to 0; the first decides,
    # and of the two equal best points the lower index wins
    assert select_index(v, ["min", "min"], np.array([True, False, True])) == 0


def test_parse_objectives():
    assert parse_objectives("edp_js, area_mm2:min,accuracy_sqnr_db:max") == [
        ("edp_js", "min"),
        ("area_mm2", "min"),
        ("accuracy_sqnr_db", "max"),
    ]
    with pytest.raises(CoaccelError, match="unknown sense"):
        parse_objectives("edp_js:up")
    with pytest.raises(CoaccelError, match="empty entry"):
        parse_objectives("edp_js,,area_mm2")


def test_report_objectives_complete_a_single_objective(small):
    ls, _ = small
    assert ls.spec.objectives[0].metric == "energy_j"  # the spec names one
    assert report_objectives(ls) == [("energy_j", "min"), ("seconds", "min"), ("area_mm2", "min")]
    assert report_objectives(ls, [("edp_js", "min")]) == [("edp_js", "min")]


# -- fronts ----------------------------------------------------------------------------------


def _brute_front(values: np.ndarray) -> np.ndarray:
    n = len(values)
    out = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if j != i and np.all(values[j] <= values[i]) and np.any(values[j] < values[i]):
                out[i] = False
    return out


def test_front_matches_brute_force_and_counts_failures(small):
    ls, db = small
    a = analyze(ls, db)
    assert len(a.fronts) == 1
    fa = a.fronts[0]
    with Store(db) as st:
        stored = list(st.rows())
    assert len(fa.rows) + len(fa.failed) == len(stored)
    assert len(fa.failed) == sum(r.status == "failed" for r in stored)
    keys = ["energy_j", "seconds", "area_mm2"]
    vals = np.array([[float(r.metrics[k][0]) for k in keys] for r in fa.rows])
    np.testing.assert_array_equal(fa.values, vals)
    feas = np.array([r.feasible for r in fa.rows], dtype=bool)
    np.testing.assert_array_equal(fa.feasible, feas)
    expect = np.zeros(len(vals), dtype=bool)
    expect[feas] = _brute_front(vals[feas])
    np.testing.assert_array_equal(fa.front, expect)
    assert fa.selected is not None and fa.front[fa.selected]
    assert fa.hypervolume > 0


def test_rule_best_and_user_selection(ub):
    ls, db = ub
    a = analyze(ls, db, rule="best:area_mm2")
    fa = a.fronts[0]
    areas = [float(r.metrics["area_mm2"][0]) for r in fa.rows]
    feas_areas = [x for x, f in zip(areas, fa.feasible, strict=True) if f]
    assert areas[fa.selected] == min(feas_areas)
    assert "best area_mm2" in fa.selection
    # a user choice (a unique id prefix) wins over the rule, even off the front
    off = [k for k in range(len(fa.rows)) if not fa.front[k]]
    pick = off[0] if off else 0
    pid = fa.rows[pick].point_id
    b = analyze(ls, db, select=pid[:10], max_breakdowns=1)
    assert b.fronts[0].selected == pick
    assert "chosen by the user" in b.fronts[0].selection
    assert pid in b.breakdowns  # the selected design is always broken down
    with pytest.raises(CoaccelError, match="no evaluated point"):
        analyze(ls, db, select="zzzz")
    with pytest.raises(CoaccelError, match="selection rule"):
        analyze(ls, db, rule="best:cycles")  # not an objective
    with pytest.raises(CoaccelError, match="did you mean 'edp_js'"):
        analyze(ls, db, objectives=[("edp_jss", "min")])


def test_other_sweeps_rows_are_left_out(small, ub, tmp_path):
    # One store holding both sweeps: each report keeps only its own points.
    ls_s, db_s = small
    ls_u, db_u = ub
    db = tmp_path / "both.sqlite"
    with Store(db) as st, Store(db_s) as a, Store(db_u) as b:
        st.add(list(a.rows()))
        st.add(list(b.rows()))
        n_s, n_u = len(a), len(b)
    r = analyze(ls_s, db)
    assert r.n_rows == n_s + n_u and r.n_foreign == n_u
    assert sum(len(f.rows) + len(f.failed) for f in r.fronts) == n_s
    with pytest.raises(CoaccelError, match="holds no point"):
        analyze(ls_u, db_s)


# -- breakdowns ------------------------------------------------------------------------------


def test_breakdowns_reproduce_the_stored_point(small):
    ls, db = small
    a = analyze(ls, db, max_breakdowns=100)
    fa = a.fronts[0]
    assert set(a.breakdowns) == {fa.rows[k].point_id for k in np.flatnonzero(fa.front)}
    for b in a.breakdowns.values():
        assert b.digest_matches and b.energy_matches
        energy = [f.value for f in b.figures if f.quantity == "energy"]
        area = [f.value for f in b.figures if f.quantity == "area"]
        # the components add up to the stored totals exactly (same terms, same order)
        assert sum(energy) == float(b.row.metrics["energy_j"][0])
        assert sum(area) / 1e6 == float(b.row.metrics["area_mm2"][0])
        for f in (*b.figures, *b.totals):
            assert f.role in ROLES
            assert f.unit == {"area": "um2", "energy": "J"}[f.quantity]
            assert f.source and f.validation
            assert f.sigma >= 0
        comps = {f.component for f in b.figures if f.quantity == "energy"}
        assert {"pe_array", "dram", "leakage"} <= comps


def _fig(b, component, quantity):
    return next(f for f in b.figures if f.component == component and f.quantity == quantity)


def test_fitted_and_predicted_pe_figures_carry_the_validation_errors(ub):
    from coaccel.dse.analysis import point_breakdown
    from coaccel.targets.hbq_asic.validation import pe_targets

    ls, db = ub
    a = analyze(ls, db, max_breakdowns=100)
    fa = a.fronts[0]
    rows = {r.params["formats.weight.ub_elems"]: r for r in fa.rows}

    targets = {t.name: t for t in pe_targets()}
    # uB = 32 is HBQ-E: both its area and its energy are published calibration points.
    b32 = point_breakdown(ls, rows[32])
    area32 = _fig(b32, "pe_array", "area")
    assert area32.role == "fitted"
    assert area32.validation_error_pct == targets["HBQ W4A5 B128 ub32 area"].loo_error_pct
    assert _fig(b32, "pe_array", "energy").role == "fitted"
    # uB = 16: its area is a calibration point, its energy is not (a prediction).
    b16 = point_breakdown(ls, rows[16])
    assert _fig(b16, "pe_array", "area").role == "fitted"
    e16 = _fig(b16, "pe_array", "energy")
    assert e16.role == "predicted"
    # The validation rows' RMS leave-one-out error equals the model's own stated fit term.
    assert b16.breakdown.pe.model.pe.ub == 16
    stated = 100.0 * b16.breakdown.pe.model.energy_terms["fit"]
    assert e16.validation_error_pct == pytest.approx(stated, rel=1e-9)
    # DRAM, logic and leakage figures are published numbers used as they are.
    assert _fig(b16, "dram", "energy").role == "published"
    assert math.isnan(_fig(b16, "dram", "energy").validation_error_pct)
    # The total energy carries the system-energy validation against [R-PM].
    tot = next(t for t in b16.totals if t.quantity == "energy")
    assert tot.role == "predicted" and tot.validation_error_pct > 0
    assert "[R-PM]" in tot.validation


def test_analyze_needs_rows_of_the_spec(tmp_path):
    ls = load_spec(SMALL)
    db = tmp_path / "empty.sqlite"
    Store(db).close()
    with pytest.raises(CoaccelError, match="holds no point"):
        analyze(ls, db)
    assert Path(db).exists()


TWO_WORKLOADS = """\
version: 1
description: two workloads, one front each
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_256, llama-3.2-1b:decode_1k]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32, 64]
strategy: {kind: grid}
objectives:
  - {metric: seconds, goal: minimize}
  - {metric: area_mm2, goal: minimize}
"""


def test_one_front_per_workload(tmp_path):
    spec = tmp_path / "two.yaml"
    spec.write_text(TWO_WORKLOADS)
    db = tmp_path / "two.sqlite"
    run_sweep(spec, db)
    a = analyze(spec, db, max_breakdowns=1)
    assert [f.workload for f in a.fronts] == ["llama-3.2-1b:prefill_256", "llama-3.2-1b:decode_1k"]
    for fa in a.fronts:
        assert {r.workload for r in fa.rows} == {fa.workload} and len(fa.rows) == 3
        vals = np.array([[r.metrics[m][0] for m in ("seconds", "area_mm2")] for r in fa.rows])
        expect = _brute_front(vals)
        np.testing.assert_array_equal(fa.front, expect)
        assert fa.front[fa.selected]
        # one breakdown per workload (max_breakdowns=1): the selected design's
        assert fa.rows[fa.selected].point_id in a.breakdowns
    assert len(a.breakdowns) == 2


def test_demo_spec_shows_every_kind_of_point(tmp_path):
    # The demo's sweep is chosen so that its report has front, dominated, infeasible and failed
    # points (its header says so); this keeps the claim true.
    spec = config_path("sweeps/demo_buffers.yaml")
    db = tmp_path / "demo.sqlite"
    s = run_sweep(spec, db)
    assert s.total == 18
    fa = analyze(spec, db, max_breakdowns=1).fronts[0]
    assert fa.front.any() and (fa.feasible & ~fa.front).any()
    assert (~fa.feasible).any() and len(fa.failed) > 0
    assert all(not fa.feasible[k] for k, r in enumerate(fa.rows) if r.metrics["area_mm2"][0] > 2)


def test_maximized_objective(small):
    # utilisation is maximized: the front is the brute-force front of (energy, -utilisation)
    ls, db = small
    fa = analyze(ls, db, objectives=[("energy_j", "min"), ("utilisation", "max")]).fronts[0]
    assert [o.sense for o in fa.objectives] == ["min", "max"]
    feas = fa.feasible
    v = fa.values[feas] * np.array([1.0, -1.0])
    expect = np.zeros(len(fa.rows), dtype=bool)
    expect[feas] = _brute_front(v)
    np.testing.assert_array_equal(fa.front, expect)
    # the reference is worse than every point in its own sense: above in energy, below in
    # utilisation
    assert fa.reference[0] > fa.values[feas, 0].max()
    assert fa.reference[1] < fa.values[feas, 1].min()
    assert fa.hypervolume > 0


def test_no_feasible_point_still_reports(tmp_path):
    from coaccel.report.sweep import write_sweep_report

    spec = tmp_path / "none.yaml"
    spec.write_text(SMALL.read_text().replace('"area_mm2 <= 2"', '"area_mm2 <= 0.001"'))
    db = tmp_path / "none.sqlite"
    run_sweep(spec, db)
    a = analyze(spec, db)
    fa = a.fronts[0]
    assert not fa.feasible.any() and not fa.front.any()
    assert fa.selected is None and math.isnan(fa.hypervolume) and not a.breakdowns
    paths = write_sweep_report(a, tmp_path / "out")
    assert paths[-1].name == "sweep_report.html"
    assert "no feasible point: no front and no selected design" in paths[-1].read_text()
    assert not [p for p in paths if p.name.startswith(("parallel_", "breakdown_"))]


def _staged_row_type():
    # Rows of sweeps with stages also record the stage and the simulator mode.
    import dataclasses

    from coaccel.dse import Row

    if {"stage", "mode"} <= {f.name for f in dataclasses.fields(Row)}:
        return Row

    @dataclasses.dataclass(frozen=True)
    class StagedRow(Row):
        stage: str | None = None
        mode: str | None = None

    return StagedRow


def test_group_rows_by_workload_then_stage(small):
    import dataclasses

    ls, db = small
    with Store(db) as st:
        rows = list(st.rows())
    staged = _staged_row_type()
    base = [
        staged(**{**{f.name: getattr(r, f.name) for f in dataclasses.fields(r)}, "stage": None})
        for r in rows
    ]
    mixed = [dataclasses.replace(r, stage="front", mode="cycle") for r in base[:2]]
    mixed += [dataclasses.replace(r, stage="screen", mode="analytical") for r in base]
    other = dataclasses.replace(base[0], workload="x:y", stage="screen")
    groups = group_rows([other, *mixed], ls.spec.workloads, ["screen", "front"])
    w = ls.spec.workloads[0]
    assert list(groups) == [(w, "screen"), (w, "front"), ("x:y", "screen")]
    assert [r.point_id for r in groups[(w, "front")]] == [r.point_id for r in base[:2]]
    assert len(groups[(w, "screen")]) == len(base)
    # rows of one stage only (or of a sweep without stages): one group per workload
    plain = group_rows(rows, ls.spec.workloads)
    assert list(plain) == [(w, None)]


def test_breakdown_reruns_a_staged_row_in_its_own_mode(small):
    import dataclasses

    from coaccel.dse.analysis import point_breakdown

    ls, db = small
    with Store(db) as st:
        r = next(st.rows(status="ok"))
    staged = _staged_row_type()
    fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    row = staged(**{**fields, "stage": "front", "mode": "cycle"})
    b = point_breakdown(ls, row)
    assert b.breakdown.sim_mode == "cycle"
    assert b.digest_matches


def test_analysis_reads_the_store_without_writing_it(small, tmp_path):
    """Analysis opens the store read-only: it reads while another process holds the store's
    write lock (a sweep still running), and the file's bytes are unchanged afterwards."""
    import shutil
    import sqlite3

    ls, db = small
    copy = tmp_path / "busy.sqlite"
    shutil.copyfile(db, copy)
    writer = sqlite3.connect(copy, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    writer.execute("BEGIN IMMEDIATE")
    before = copy.read_bytes()
    try:
        a = analyze(ls, copy)
        assert a.fronts and a.fronts[0].rows
        assert copy.read_bytes() == before
    finally:
        writer.execute("ROLLBACK")
        writer.close()
