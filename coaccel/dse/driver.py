"""Running a sweep: expand the space, evaluate the points not stored yet, store the rows.

Each point is :func:`coaccel.simulate` on the base architecture with the point's overrides,
then :func:`coaccel.cost.evaluate`; its row holds every ``metrics()`` entry plus ``energy_j``,
``area_mm2`` and ``edp_js``, each with its unit (and the accuracy metrics when the spec scores
accuracy). Where the target has a batch evaluator for the mode (the analytical modes), a task
evaluates its points together (:func:`coaccel.dse.batch.evaluate_batch`: the same rows, apart
from their timing fields) and sends them back serialized as the store writes them. Points go
to an executor (this process, a local process pool, or Dask) in batches, so that millisecond
points do not drown the workers in messages; each worker process loads the base architecture
and the workloads once. A point that raises is stored as ``failed`` with a
one-line reason and the sweep goes on. Every finished batch is written in one transaction.

Before any point is expanded, the sweep is sized (:func:`estimate_sweep`): its points are
counted without listing them, one design is evaluated on the workloads to time a point (its rows
are kept and stored with the sweep's, not evaluated again), and the time and the store's growth
follow. A sweep over :data:`DEFAULT_MAX_POINTS` points or :data:`DEFAULT_MAX_STORE_BYTES` of
store is refused (:class:`SweepTooLarge`) unless the caller raises or lifts the limit. A sweep
holds the store's writer lock (:func:`~coaccel.dse.store.writer_lock`) while it runs.

A sweep runs stage by stage: the first stage evaluates the strategy's points (a grid, a sample,
or NSGA-II's proposals generation by generation); each later stage re-runs a selection of the
previous stage's points (its Pareto front, widened by a margin, or the top k) in its own mode.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spine.errors import CoaccelError
from .batch import (
    add_records,
    evaluate_batch,
    evaluate_batch_records,
    from_record,
    supports,
    to_record,
    warm_batch,
)
from .evaluate import evaluate_points, failure_reason, warm
from .executors import Executor, PoolExecutor, open_executor
from .space import (
    Point,
    count_combinations,
    count_points,
    expand,
    iter_combinations,
    kept_fraction,
    point_id,
)
from .spec import ACCURACY_METRICS, LoadedSpec, Stage, SweepSpec, load_spec
from .store import Row, Store, not_regular, writer_lock

__all__ = [
    "DEFAULT_MAX_POINTS",
    "DEFAULT_MAX_STORE_BYTES",
    "Progress",
    "StageSummary",
    "SweepEstimate",
    "SweepSummary",
    "SweepTooLarge",
    "estimate_sweep",
    "evaluate_points",
    "run_sweep",
    "size_problem",
]

DEFAULT_MAX_POINTS = 1_000_000
"""The most points (first stage, before constraints, all workloads) a sweep runs by default."""

DEFAULT_MAX_STORE_BYTES = 10**9
"""The most a sweep may grow its store by default (estimated), bytes (1 GB)."""

_PROBE_S = 2.0  # the timing probe stops after the workload that crosses this, s
_ROW_OVERHEAD_BYTES = 120  # SQLite's record, page and primary-key index cost per row (measured)
_STORE_S = 2e-5  # writing one row to the store, s (benchmarks/bench_dse.py: 13 to 18 µs)
_POOL_EFFICIENCY = 0.85  # a pool of 2 ran 1.63 to 1.7 times one process (docs/dse.md, "Speed")
# Points per task on the batch path (coaccel.dse.batch): numpy evaluates a batch at once, so
# tasks are large (about 4 per worker), but a small sweep stays one task (no pool at all).
_BATCH_MIN, _BATCH_MAX = 256, 2048


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
        accuracy_data: what the accuracy study used: ``real`` or ``synthetic`` (GEMM-output
            SQNR), ``perplexity:<model>`` (a real decoder's perplexity), or None.
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


@dataclass(frozen=True)
class SweepEstimate:
    """What a sweep is going to cost, known before its points are expanded.

    Counts and times are of the first stage (later stages re-run a selection of its points in
    their own modes); the accuracy study (a few seconds per number-format setting, run once)
    is not included.

    Attributes:
        points: the first stage's points before constraints, all workloads
            (:func:`~coaccel.dse.space.count_points`): what the size limit counts.
        combinations: parameter combinations before constraints (for ``nsga2``: the space it
            searches).
        workloads: workloads per combination.
        kept: estimated points after constraints.
        stored: rows of the first stage's spec digest the store holds already (an upper bound
            of the points not evaluated again).
        per_point_s: evaluation time of one point in one process, s.
        timed_by: ``"probe"`` (one design timed on the workloads now) or ``"store"`` (the
            evaluation times of the rows stored).
        workers: parallel workers the time assumes (None: a Dask cluster of unknown size).
        seconds: estimated wall time of the points left, s (CPU time when ``workers`` is None).
        store_bytes: estimated growth of the store, bytes.
    """

    points: int
    combinations: int
    workloads: int
    kept: int
    stored: int
    per_point_s: float
    timed_by: str
    workers: int | None
    seconds: float
    store_bytes: int

    @property
    def todo(self) -> int:
        """Points left to evaluate (estimated)."""
        return max(0, self.kept - self.stored)


class SweepTooLarge(CoaccelError):
    """A sweep over its size limits, refused before any work.

    Attributes:
        reason: what is over which limit (without the remedy).
        estimate: the estimate, when the limit was on the store's size (else None).
    """

    def __init__(self, reason: str, estimate: SweepEstimate | None = None) -> None:
        self.reason = reason
        self.estimate = estimate
        super().__init__(
            f"{reason}; narrow the sweep, or raise the limit (run_sweep's max_points= and "
            "max_store_bytes=; None lifts it)"
        )


def _points_problem(spec: SweepSpec, max_points: int | None) -> str | None:
    n = count_points(spec)
    if max_points is None or n <= max_points:
        return None
    combos = (
        int(spec.strategy.population or 0) * int(spec.strategy.generations or 0)
        if spec.strategy.kind == "nsga2"
        else count_combinations(spec)
    )
    what = "proposals" if spec.strategy.kind == "nsga2" else "combinations"
    return (
        f"sweep too large: {n:,} points ({combos:,} {what} x {len(spec.workloads)} workload"
        f"{'s' if len(spec.workloads) != 1 else ''}"
        f"{', before constraints' if spec.constraints else ''}) is over the limit of "
        f"{max_points:,} points"
    )


def size_problem(
    spec: SweepSpec,
    estimate: SweepEstimate | None = None,
    *,
    max_points: int | None = DEFAULT_MAX_POINTS,
    max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES,
) -> str | None:
    """Why a sweep is too large to run without asking, or None.

    Args:
        spec: the sweep (its points are counted, not expanded).
        estimate: its estimate, for the store limit (None: only the points are checked).
        max_points: the most points (None: no limit).
        max_store_bytes: the most store growth, bytes (None: no limit).

    Returns:
        One line: what is over which limit; None when within both.
    """
    problem = _points_problem(spec, max_points)
    if problem is not None or estimate is None:
        return problem
    if max_store_bytes is not None and estimate.store_bytes > max_store_bytes:
        return (
            f"sweep too large: about {estimate.todo:,} points to evaluate would grow the store "
            f"by about {format_bytes(estimate.store_bytes)}, over the limit of "
            f"{format_bytes(max_store_bytes)} (and take about {format_duration(estimate.seconds)})"
        )
    return None


def format_duration(seconds: float) -> str:
    """A duration for people: ``"0.87 ms"``, ``"40 s"``, ``"6 min 48 s"``, ``"3 h 20 min"``,
    ``"4.9 days"``."""
    if seconds < 1:
        return f"{seconds * 1e3:.2g} ms"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        m, s = divmod(int(round(seconds)), 60)
        return f"{m} min {s} s"
    if seconds < 2 * 86400:
        h, m = divmod(int(round(seconds / 60)), 60)
        return f"{h} h {m} min"
    return f"{seconds / 86400:.1f} days"


def format_bytes(n: float) -> str:
    """A size for people, in decimal units: ``"340 MB"``, ``"1.2 GB"``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def _row_bytes(row: Row) -> int:
    """What one row takes in the store, bytes (its fields as stored, plus SQLite's overhead)."""
    return _ROW_OVERHEAD_BYTES + sum(len(str(v)) for v in row.record() if v is not None)


def _probe_points(ls: LoadedSpec, digest: str) -> list[list[Point]]:
    """Designs to time, each as its points on every workload: the first combinations the
    sweep itself evaluates (grid, random, LHS), or the grid's first (NSGA-II)."""
    kind = ls.spec.strategy.kind
    combos: Any = iter_combinations(ls.spec, ls.source)
    if kind == "nsga2":
        combos = itertools.islice(combos, 10_000)  # its first proposals are not known yet
    picked: list[dict[str, Any]] = []
    for combo in combos:
        if all(e(combo) for e in ls.constraints):
            picked.append(combo)
            if len(picked) == 3:
                break
    return [
        [Point(point_id(c, w, digest), w, tuple(c.items())) for w in ls.spec.workloads]
        for c in picked
    ]


def _parallel(workers: int | None) -> float:
    """How many one-process rates a pool of ``workers`` achieves."""
    if workers is None or workers <= 1:
        return 1.0
    return workers * _POOL_EFFICIENCY


def estimate_sweep(
    spec: str | Path | LoadedSpec,
    store: Store | None = None,
    *,
    workers: int = 1,
    scheduler: str | None = None,
) -> SweepEstimate:
    """Size a sweep before running it: points, time and store growth.

    The points are counted, not expanded. A point's time comes from the store's rows of the
    same first-stage digest when it holds at least 20, else from a probe: the first design
    the sweep evaluates is run on its workloads (one after another, stopping after the
    workload that passes 2 s; on the batch path of :mod:`coaccel.dse.batch`, on all of them
    at once, as the sweep will; the next design when every point of the first failed, three
    at most).

    Args:
        spec: the spec file or its :func:`~coaccel.dse.spec.load_spec` result.
        store: the store the sweep writes to (for the rows it holds), or None.
        workers: local processes.
        scheduler: a Dask scheduler address (the time is then CPU time).

    Returns:
        A :class:`SweepEstimate`.
    """
    ls = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    return _estimate(ls, store, workers, scheduler)[0]


def _estimate(
    ls: LoadedSpec, store: Store | None, workers: int, scheduler: str | None
) -> tuple[SweepEstimate, dict[str, Row]]:
    """The estimate, and the probe's rows by point id (stored with the sweep's)."""
    spec = ls.spec
    stage = (ls.stages or (Stage(name="main", mode=spec.mode),))[0]
    digest = ls.stage_digest(stage)
    points = count_points(spec)
    combos = count_combinations(spec)
    kept = int(round(points * kept_fraction(spec, ls.constraints)))
    stored = store.count(digest) if store is not None else 0
    times = store.elapsed(digest) if store is not None else []
    probe: dict[str, Row] = {}  # rows evaluated now, stored with the sweep's
    timed: list[Row] = []  # rows that time a point (evaluated now or stored before)
    if len(times) >= 20:
        per_point_s, timed_by = statistics.median(times), "store"
    else:
        limits = [e.text for e in ls.limits if not set(ACCURACY_METRICS) & set(e.names)]
        warm(ls.base_path, stage.mode, spec.workloads)  # loading is not a point's cost
        batched = supports(ls.base_path, stage.mode)
        t0 = time.perf_counter()
        for design in _probe_points(ls, digest):
            have = store.get_many(p.point_id for p in design) if store is not None else {}
            timed += [have[p.point_id] for p in design if p.point_id in have]
            left = [p for p in design if p.point_id not in have]
            if batched:  # the design on every workload at once, as the sweep evaluates it
                got = evaluate_batch(ls.base_path, stage.mode, digest, limits, left)
                probe.update((r.point_id, r) for r in got)
                timed += got
            for p in left if not batched else ():
                (row,) = evaluate_points(ls.base_path, stage.mode, digest, limits, [p])
                probe[p.point_id] = row
                timed.append(row)
                if time.perf_counter() - t0 > _PROBE_S:
                    break
            if time.perf_counter() - t0 > _PROBE_S or any(r.status == "ok" for r in timed):
                break
        ok = [r.elapsed_s for r in timed if r.status == "ok"]
        per_point_s = statistics.mean(ok or [r.elapsed_s for r in timed] or [0.0])
        timed_by = "probe"
    sizes = [_row_bytes(r) for r in timed if r.status == "ok"]
    if not sizes and store is not None:
        sizes = [_row_bytes(r) for r in itertools.islice(store.rows("ok"), 20)]
    row_bytes = statistics.mean(sizes) if sizes else 1000.0
    n_workers: int | None
    if scheduler or spec.scheduler:
        n_workers = None
    elif spec.executor.kind == "slurm":
        n_workers = int(spec.executor.jobs or 1) * int(spec.executor.cores or 1)
    else:
        n_workers = max(1, min(workers, os.cpu_count() or workers))
    todo = max(0, kept - stored)
    est = SweepEstimate(
        points=points,
        combinations=combos,
        workloads=len(spec.workloads),
        kept=kept,
        stored=stored,
        per_point_s=per_point_s,
        timed_by=timed_by,
        workers=n_workers,
        seconds=todo * (per_point_s + _STORE_S) / _parallel(n_workers),
        store_bytes=int(todo * row_bytes),
    )
    return est, probe


def run_sweep(
    spec: str | Path | LoadedSpec,
    store: str | Path | Store,
    *,
    workers: int = 1,
    batch_size: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    scheduler: str | None = None,
    max_points: int | None = DEFAULT_MAX_POINTS,
    max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES,
    on_estimate: Callable[[SweepEstimate], None] | None = None,
) -> SweepSummary:
    """Run a sweep into a store, skipping the points the store already holds.

    Before any point is expanded the sweep is counted and, once the store is open and locked,
    estimated (:func:`estimate_sweep`); the probe's rows are stored with the others.

    Args:
        spec: a spec file or a :func:`~coaccel.dse.spec.load_spec` result.
        store: the database path or an open :class:`Store`.
        workers: local processes; 1 evaluates in this process (no pool). Results do not
            depend on it.
        batch_size: points per task (default: enough for about 8 tasks per worker, at most
            64 points each, whatever the executor; on the batch path of an analytical mode
            (:mod:`coaccel.dse.batch`) about 4 tasks per worker of 256 to 2048 points).
        progress: called after each stored batch.
        scheduler: a Dask scheduler address (``tcp://host:port``) to evaluate on, overriding
            the spec's ``scheduler:``; the results equal the local pool's.
        max_points: refuse a sweep of more points (first stage, before constraints, all
            workloads); None: no limit.
        max_store_bytes: refuse a sweep estimated to grow the store by more bytes; None: no
            limit.
        on_estimate: called with the estimate before the points are evaluated.

    Returns:
        A :class:`SweepSummary`.

    Raises:
        ConfigError: a bad spec.
        SweepTooLarge: over ``max_points`` or ``max_store_bytes`` (nothing was evaluated).
        CoaccelError: the store is not a sweep store, cannot be written, or another sweep is
            writing to it; the executor cannot start (a missing package, no scheduler there).
        ValueError: ``workers`` or ``batch_size`` below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(spec, LoadedSpec):
        ls = spec
        problem = _points_problem(ls.spec, max_points)
    else:
        from ..spine.config import load_config

        kind = not_regular(spec)
        if kind is not None:
            raise CoaccelError(f"spec {str(spec)!r} is {kind}, not a regular file")
        # The schema alone is enough to count: a huge range is refused before it is listed.
        problem = _points_problem(load_config(spec, SweepSpec), max_points)
        if problem is None:
            ls = load_spec(spec)
    if problem is not None:
        raise SweepTooLarge(problem)
    st = store if isinstance(store, Store) else Store(store)
    try:
        with writer_lock(st.path):
            est, probe = _estimate(ls, st, workers, scheduler)
            problem = size_problem(
                ls.spec, est, max_points=max_points, max_store_bytes=max_store_bytes
            )
            if problem is not None:
                raise SweepTooLarge(problem, est)
            if on_estimate is not None:
                on_estimate(est)
            with open_executor(ls.spec, workers, scheduler) as ex:
                return _run(ls, st, ex, batch_size, progress, probe)
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
        ready: Mapping[str, Row] | None = None,
    ) -> None:
        self.ls, self.st, self.ex = ls, st, ex
        self.batch_size = batch_size
        self.progress = progress
        self.ready = dict(ready or {})  # rows evaluated already (the estimate's probe)
        self.batched: dict[str, bool] = {}  # mode -> on the batch path
        acc_names = set(ACCURACY_METRICS)
        # Limits on accuracy metrics are checked here, after the accuracy metrics are added.
        self.sim_limits = [e.text for e in ls.limits if not acc_names & set(e.names)]
        self.acc_limits = [e for e in ls.limits if acc_names & set(e.names)]
        self.scorer: Any = None
        if ls.accuracy is not None:
            from .accuracy import make_scorer

            self.scorer = make_scorer(ls.base_path, ls.accuracy, st)
        self.t0 = time.perf_counter()
        self.begin(0)

    def begin(self, total: int) -> None:
        self.stage_total, self.stage_skipped, self.stage_done, self.stage_failed = total, 0, 0, 0
        self.seen: set[str] = set()  # ids of this stage looked up or evaluated so far

    def evaluate(
        self, points: Sequence[Point], stage: Stage, keep_rows: bool = True
    ) -> dict[str, Row]:
        """Rows of ``points``: stored ones looked up, the others evaluated and stored.

        Args:
            points: the points (repeats are evaluated once).
            stage: the stage they belong to.
            keep_rows: return the rows evaluated now too (a later stage or a search reads
                them); False returns the stored ones only.

        Returns:
            point id -> row.
        """
        unique = list({p.point_id: p for p in points}.values())
        have = self.st.get_many(p.point_id for p in unique)
        todo = [p for p in unique if p.point_id not in have]
        # Stored before this run: counted once, however often a search proposes them again.
        self.stage_skipped += sum(pid not in self.seen for pid in have)
        self.seen.update(p.point_id for p in unique)
        batched = self._batched(stage.mode)
        # On the batch path, workers send the store's records (serialized where evaluated);
        # the accuracy metrics are added here, to rows.
        records = batched and self.scorer is None
        ready, send, whole = self._batches(todo, batched)
        digest = self.ls.stage_digest(stage)
        args: tuple[Any, ...] = (self.ls.base_path, stage.mode, digest, self.sim_limits)
        fn: Any = evaluate_points
        if records:
            fn, args = evaluate_batch_records, (*args, stage.name)
        elif batched:
            fn = evaluate_batch
        if isinstance(self.ex, PoolExecutor) and len(send) > 1:
            # Before the pool forks its workers: they inherit the loaded base and workloads.
            warm(self.ls.base_path, stage.mode, self.ls.spec.workloads)
            if batched:
                warm_batch(self.ls.base_path, stage.mode, self.ls.spec.workloads,
                           self.ls.spec.values())  # fmt: skip
        for got in itertools.chain(ready, self.ex.run(fn, args, send)):
            recs, rows = self._complete(got, whole, stage)
            add_records(self.st, recs)
            self.stage_done += len(recs)
            self.stage_failed += sum(r[7] == "failed" for r in recs)
            if keep_rows:
                have.update(
                    (r[0], row if row is not None else from_record(r))
                    for r, row in zip(recs, rows, strict=True)
                )
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

    def _batched(self, mode: str) -> bool:
        """Whether points of this mode take the batch path (asked once per mode)."""
        if mode not in self.batched:
            self.batched[mode] = supports(self.ls.base_path, mode)
        return self.batched[mode]

    def _batches(
        self, todo: Sequence[Point], batched: bool
    ) -> tuple[list[list[Row]], list[list[Point]], dict[str, Sequence[Point]]]:
        """The batches to send, the batches the estimate's probe evaluated entirely, and for
        a batch sent without the points the probe did: its first point sent -> the whole
        batch (so that batches, and the order of the stored rows, stay the same)."""
        if self.batch_size:
            n = self.batch_size
        elif batched:
            n = max(_BATCH_MIN, min(_BATCH_MAX, -(-len(todo) // (4 * self.ex.workers))))
        else:
            n = max(1, min(64, -(-len(todo) // (8 * self.ex.workers))))
        whole: dict[str, Sequence[Point]] = {}
        ready: list[list[Row]] = []
        send: list[list[Point]] = []
        for b in (todo[i : i + n] for i in range(0, len(todo), n)):
            rest = [p for p in b if p.point_id not in self.ready]
            if not rest:
                ready.append([self.ready.pop(p.point_id) for p in b])
                continue
            if len(rest) < len(b):
                whole[rest[0].point_id] = b
            send.append(rest)
        return ready, send, whole

    def _complete(
        self, got: Sequence[Any], whole: dict[str, Sequence[Point]], stage: Stage
    ) -> tuple[list[tuple[Any, ...]], list[Row | None]]:
        """A finished batch as the store's records of ``stage``, and its rows where they are
        at hand: the probe's rows put back in their places, stage and mode set, the accuracy
        metrics added (``got``: rows of the per-point path and of the estimate's probe, or
        records of the batch path)."""

        def pid(x: Any) -> str:
            return x.point_id if isinstance(x, Row) else x[0]

        batch = whole.pop(pid(got[0]), None) if got else None
        if batch is not None:
            by_id = {pid(x): x for x in got}
            # None: the estimate's probe evaluated it
            got = [by_id.get(p.point_id) or self.ready.pop(p.point_id) for p in batch]
        recs: list[tuple[Any, ...]] = []
        rows: list[Row | None] = []
        for x in got:
            row = self._finish(x, stage) if isinstance(x, Row) else None
            recs.append(to_record(row) if row is not None else x)
            rows.append(row)
        return recs, rows

    def _finish(self, row: Row, stage: Stage) -> Row:
        """Add the stage, the mode and the accuracy metrics; check the accuracy limits."""
        row = dataclasses.replace(row, stage=stage.name, mode=stage.mode)
        if self.scorer is None or row.status != "ok":
            return row
        try:
            metrics = dict(row.metrics) | self.scorer.metrics(row.params, row.workload)
        except Exception as exc:  # noqa: BLE001 - a point whose formats cannot be scored fails
            return dataclasses.replace(
                row, metrics={}, feasible=None, status="failed", error=failure_reason(exc)
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
    ready: Mapping[str, Row] | None = None,
) -> SweepSummary:
    sw = _Sweep(ls, st, ex, batch_size, progress, ready)
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
            rows = sw.evaluate(points, stage, keep_rows=i < len(stages) - 1)
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
        _accuracy_data(ls),
        0 if sw.scorer is None else sw.scorer.studies_run,
    )


def _accuracy_data(ls: LoadedSpec) -> str | None:
    acc = ls.accuracy
    if acc is None:
        return None
    return f"perplexity:{acc.model}" if acc.measure == "perplexity" else acc.data


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
