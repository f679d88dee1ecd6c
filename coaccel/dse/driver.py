"""Running a sweep: expand the space, evaluate the points not stored yet, store the rows.

Each point is :func:`coaccel.simulate` on the base architecture with the point's overrides,
then :func:`coaccel.cost.evaluate`; its row holds every ``metrics()`` entry plus ``energy_j``,
``area_mm2`` and ``edp_js``, each with its unit (and the accuracy metrics when the spec scores
accuracy). Points go to an executor (this process, a local process pool, or Dask) in batches,
so that millisecond points do not drown the workers in messages; each worker process loads the
base architecture and the workloads once. A point that raises is stored as ``failed`` with its
traceback and the sweep goes on. Every finished batch is written in one transaction.

A sweep runs stage by stage: the first stage evaluates the strategy's points (a grid, a sample,
or NSGA-II's proposals generation by generation); each later stage re-runs a selection of the
previous stage's points (its Pareto front, widened by a margin, or the top k) in its own mode.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .evaluate import evaluate_points, warm
from .executors import Executor, PoolExecutor, open_executor
from .space import Point, expand, point_id
from .spec import ACCURACY_METRICS, LoadedSpec, Stage, load_spec
from .store import Row, Store

__all__ = ["Progress", "StageSummary", "SweepSummary", "evaluate_points", "run_sweep"]


@dataclass(frozen=True)
class Progress:
    """Where a running sweep stands (passed to the progress callback after each batch).

    Attributes:
        total: points of the sweep.
        skipped: points found in the store at the start (not recomputed).
        done: points evaluated in this run so far.
        failed: of those, the ones that raised.
        elapsed_s: wall time since evaluation started, s.
        stage: the stage running (its name).
    """

    total: int
    skipped: int
    done: int
    failed: int
    elapsed_s: float
    stage: str = ""

    @property
    def rate_per_s(self) -> float:
        """Points evaluated per second in this run."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Estimated seconds left (None before the first batch)."""
        left = self.total - self.skipped - self.done
        return left / self.rate_per_s if self.rate_per_s > 0 else None


@dataclass(frozen=True)
class StageSummary:
    """What one stage of a sweep run did.

    Attributes:
        name: the stage's name.
        mode: its simulator mode.
        total: its points.
        skipped: of those, the ones already in the store.
        evaluated: the ones evaluated now.
        failed: of those, the ones that raised.
    """

    name: str
    mode: str
    total: int
    skipped: int
    evaluated: int
    failed: int


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep run did (summed over its stages).

    Attributes:
        total: points of the sweep (after constraints; NSGA-II: the distinct points it
            proposed).
        skipped: points already in the store.
        evaluated: points evaluated now.
        failed: of those, the ones that raised.
        elapsed_s: wall time of the evaluation, s.
        stages: one summary per stage.
        accuracy_data: the data the accuracy study used (``real``, ``synthetic``), or None.
        accuracy_studies: format settings the accuracy study scored now (not from the cache).
    """

    total: int
    skipped: int
    evaluated: int
    failed: int
    elapsed_s: float
    stages: tuple[StageSummary, ...] = ()
    accuracy_data: str | None = None
    accuracy_studies: int = 0


def run_sweep(
    spec: str | Path | LoadedSpec,
    store: str | Path | Store,
    *,
    workers: int = 1,
    batch_size: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    scheduler: str | None = None,
) -> SweepSummary:
    """Run a sweep into a store, skipping the points the store already holds.

    Args:
        spec: a spec file or a :func:`~coaccel.dse.spec.load_spec` result.
        store: the database path or an open :class:`Store`.
        workers: local processes; 1 evaluates in this process (no pool). Results do not
            depend on it.
        batch_size: points per task (default: enough for about 8 tasks per worker, at most
            64 points each, whatever the executor).
        progress: called after each stored batch.
        scheduler: a Dask scheduler address (``tcp://host:port``) to evaluate on, overriding
            the spec's ``scheduler:``; the results equal the local pool's.

    Returns:
        A :class:`SweepSummary`.

    Raises:
        ConfigError: a bad spec.
        CoaccelError: the executor cannot start (a missing package, no scheduler there).
        ValueError: ``workers`` or ``batch_size`` below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ls = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    st = store if isinstance(store, Store) else Store(store)
    try:
        with open_executor(ls.spec, workers, scheduler) as ex:
            return _run(ls, st, ex, batch_size, progress)
    finally:
        if not isinstance(store, Store):
            st.close()


class _Sweep:
    """One run of a sweep: evaluates points stage by stage through an executor into a store."""

    def __init__(
        self,
        ls: LoadedSpec,
        st: Store,
        ex: Executor,
        batch_size: int | None,
        progress: Callable[[Progress], None] | None,
    ) -> None:
        self.ls, self.st, self.ex = ls, st, ex
        self.batch_size = batch_size
        self.progress = progress
        acc_names = set(ACCURACY_METRICS)
        # Limits on accuracy metrics are checked here, after the accuracy metrics are added.
        self.sim_limits = [e.text for e in ls.limits if not acc_names & set(e.names)]
        self.acc_limits = [e for e in ls.limits if acc_names & set(e.names)]
        self.scorer: Any = None
        if ls.accuracy is not None:
            from .accuracy import AccuracyScorer

            self.scorer = AccuracyScorer(ls.base_path, ls.accuracy, st)
        self.t0 = time.perf_counter()
        self.begin(0)

    def begin(self, total: int) -> None:
        self.stage_total, self.stage_skipped, self.stage_done, self.stage_failed = total, 0, 0, 0
        self.seen: set[str] = set()  # ids of this stage looked up or evaluated so far

    def evaluate(self, points: Sequence[Point], stage: Stage) -> dict[str, Row]:
        """Rows of ``points``: stored ones looked up, the others evaluated and stored."""
        unique = list({p.point_id: p for p in points}.values())
        have = self.st.get_many(p.point_id for p in unique)
        todo = [p for p in unique if p.point_id not in have]
        # Stored before this run: counted once, however often a search proposes them again.
        self.stage_skipped += sum(pid not in self.seen for pid in have)
        self.seen.update(p.point_id for p in unique)
        n = self.batch_size or max(1, min(64, -(-len(todo) // (8 * self.ex.workers))))
        batches = [todo[i : i + n] for i in range(0, len(todo), n)]
        args = (self.ls.base_path, stage.mode, self.ls.stage_digest(stage), self.sim_limits)
        if isinstance(self.ex, PoolExecutor) and len(batches) > 1:
            # Before the pool forks its workers: they inherit the loaded base and workloads.
            warm(self.ls.base_path, stage.mode, self.ls.spec.workloads)

        for rows in self.ex.run(evaluate_points, args, batches):
            rows = [self._finish(r, stage) for r in rows]
            self.st.add(rows)
            self.stage_done += len(rows)
            self.stage_failed += sum(r.status == "failed" for r in rows)
            have.update((r.point_id, r) for r in rows)
            if self.progress is not None:
                self.progress(
                    Progress(
                        self.stage_total,
                        self.stage_skipped,
                        self.stage_done,
                        self.stage_failed,
                        time.perf_counter() - self.t0,
                        stage.name,
                    )
                )
        return have

    def _finish(self, row: Row, stage: Stage) -> Row:
        """Add the stage, the mode and the accuracy metrics; check the accuracy limits."""
        row = dataclasses.replace(row, stage=stage.name, mode=stage.mode)
        if self.scorer is None or row.status != "ok":
            return row
        try:
            metrics = dict(row.metrics) | self.scorer.metrics(row.params)
        except Exception:  # noqa: BLE001 - a point whose formats cannot be scored fails alone
            return dataclasses.replace(
                row, metrics={}, feasible=None, status="failed", error=traceback.format_exc()
            )
        env = {k: v for k, (v, _) in metrics.items()}
        feasible = bool(row.feasible) and all(e(env) for e in self.acc_limits)
        return dataclasses.replace(row, metrics=metrics, feasible=feasible)


def _run(
    ls: LoadedSpec,
    st: Store,
    ex: Executor,
    batch_size: int | None,
    progress: Callable[[Progress], None] | None,
) -> SweepSummary:
    sw = _Sweep(ls, st, ex, batch_size, progress)
    stages = ls.stages or (Stage(name="main", mode=ls.spec.mode),)
    summaries: list[StageSummary] = []
    prev_points: list[Point] = []
    prev_rows: Mapping[str, Row] = {}
    for i, stage in enumerate(stages):
        digest = ls.stage_digest(stage)
        if i == 0 and ls.spec.strategy.kind == "nsga2":
            from .search import nsga2_points

            st0 = ls.spec.strategy
            sw.begin(int(st0.population or 0) * int(st0.generations or 0) * len(ls.spec.workloads))
            found: dict[str, Row] = {}

            def run_batch(
                pts: Sequence[Point], _stage: Stage = stage, _found: dict[str, Row] = found
            ) -> Mapping[str, Row]:
                got = sw.evaluate(pts, _stage)
                _found.update(got)
                return got

            points = nsga2_points(ls, digest, run_batch)
            rows = found
            sw.stage_total = len(points)  # the distinct points proposed: the bar ends full
            if progress is not None:
                progress(
                    Progress(
                        len(points),
                        sw.stage_skipped,
                        sw.stage_done,
                        sw.stage_failed,
                        time.perf_counter() - sw.t0,
                        stage.name,
                    )
                )
        else:
            if i == 0:
                points = expand(ls.spec, ls.constraints, digest, ls.source)
            else:
                points = _select(ls, stage, prev_points, prev_rows, digest)
            sw.begin(len(points))
            rows = sw.evaluate(points, stage)
        summaries.append(
            StageSummary(
                stage.name,
                stage.mode,
                len(points),
                sw.stage_skipped,
                sw.stage_done,
                sw.stage_failed,
            )
        )
        prev_points, prev_rows = points, rows
    return SweepSummary(
        sum(s.total for s in summaries),
        sum(s.skipped for s in summaries),
        sum(s.evaluated for s in summaries),
        sum(s.failed for s in summaries),
        time.perf_counter() - sw.t0,
        tuple(summaries),
        None if ls.accuracy is None else ls.accuracy.data,
        0 if sw.scorer is None else sw.scorer.studies_run,
    )


def _select(
    ls: LoadedSpec,
    stage: Stage,
    points: Sequence[Point],
    rows: Mapping[str, Row],
    digest: str,
) -> list[Point]:
    """The previous stage's points a later stage re-runs, as points of this stage."""
    from .pareto import front_with_margin, top_k_by_rank

    keep: list[Point] = []
    by_workload: dict[str, list[Point]] = {}
    for p in points:
        r = rows.get(p.point_id)
        if r is not None and r.status == "ok" and r.feasible:
            by_workload.setdefault(p.workload, []).append(p)
    objectives = ls.spec.objectives
    senses = ["min" if o.goal == "minimize" else "max" for o in objectives]
    for w in ls.spec.workloads:
        cand = by_workload.get(w, [])
        if not cand:
            continue
        if stage.select == "all":
            keep += cand
            continue
        vals = [[float(rows[p.point_id].metrics[o.metric][0]) for o in objectives] for p in cand]
        if stage.select == "front":
            mask = front_with_margin(vals, senses, stage.margin)
            keep += [p for p, m in zip(cand, mask, strict=True) if m]
        else:
            order = top_k_by_rank(vals, senses, int(stage.top_k or 0))
            keep += [cand[j] for j in sorted(order)]
    return [Point(point_id(dict(p.params), p.workload, digest), p.workload, p.params) for p in keep]
