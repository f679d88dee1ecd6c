"""Running a sweep: expand the space, evaluate the points not stored yet, store the rows.

Each point is :func:`coaccel.simulate` on the base architecture with the point's overrides,
then :func:`coaccel.cost.evaluate`; its row holds every ``metrics()`` entry plus ``energy_j``,
``area_mm2`` and ``edp_js``, each with its unit. Points go to a local process pool in batches
(so that millisecond points do not drown the pool in messages); each process loads the base
architecture and the workloads once. A point that raises is stored as ``failed`` with its
traceback and the sweep goes on. Every finished batch is written in one transaction.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from .evaluate import evaluate_points
from .space import expand
from .spec import LoadedSpec, load_spec
from .store import Row, Store

__all__ = ["Progress", "SweepSummary", "evaluate_points", "run_sweep"]


@dataclass(frozen=True)
class Progress:
    """Where a running sweep stands (passed to the progress callback after each batch).

    Attributes:
        total: points of the sweep.
        skipped: points found in the store at the start (not recomputed).
        done: points evaluated in this run so far.
        failed: of those, the ones that raised.
        elapsed_s: wall time since evaluation started, s.
    """

    total: int
    skipped: int
    done: int
    failed: int
    elapsed_s: float

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
class SweepSummary:
    """What a sweep run did.

    Attributes:
        total: points of the sweep (after constraints).
        skipped: points already in the store.
        evaluated: points evaluated now.
        failed: of those, the ones that raised.
        elapsed_s: wall time of the evaluation, s.
    """

    total: int
    skipped: int
    evaluated: int
    failed: int
    elapsed_s: float


def run_sweep(
    spec: str | Path | LoadedSpec,
    store: str | Path | Store,
    *,
    workers: int = 1,
    batch_size: int | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> SweepSummary:
    """Run a sweep into a store, skipping the points the store already holds.

    Args:
        spec: a spec file or a :func:`~coaccel.dse.spec.load_spec` result.
        store: the database path or an open :class:`Store`.
        workers: processes; 1 evaluates in this process (no pool). Results do not depend on it.
        batch_size: points per task (default: enough for about 8 tasks per worker, at most
            64 points each).
        progress: called after each stored batch.

    Returns:
        A :class:`SweepSummary`.

    Raises:
        ConfigError: a bad spec.
        ValueError: ``workers`` or ``batch_size`` below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ls = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    st = store if isinstance(store, Store) else Store(store)
    try:
        return _run(ls, st, workers, batch_size, progress)
    finally:
        if not isinstance(store, Store):
            st.close()


def _run(
    ls: LoadedSpec,
    st: Store,
    workers: int,
    batch_size: int | None,
    progress: Callable[[Progress], None] | None,
) -> SweepSummary:
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    done = st.done_ids(p.point_id for p in points)
    todo = [p for p in points if p.point_id not in done]
    n = batch_size or max(1, min(64, -(-len(todo) // (8 * workers))))
    batches = [todo[i : i + n] for i in range(0, len(todo), n)]
    args = (ls.base_path, ls.spec.mode, ls.digest, [e.text for e in ls.limits])
    t0 = time.perf_counter()
    evaluated = failed = 0

    def stored(rows: list[Row]) -> None:
        nonlocal evaluated, failed
        st.add(rows)
        evaluated += len(rows)
        failed += sum(r.status == "failed" for r in rows)
        if progress is not None:
            progress(Progress(len(points), len(done), evaluated, failed, time.perf_counter() - t0))

    if workers == 1 or len(batches) <= 1:
        for b in batches:
            stored(evaluate_points(*args, b))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, os.cpu_count() or workers)) as ex:
            pending: set[Future[list[Row]]] = set()
            it = iter(batches)
            for b in it:  # keep two tasks per worker in flight
                pending.add(ex.submit(evaluate_points, *args, b))
                if len(pending) >= 2 * workers:
                    break
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    stored(f.result())
                    nxt = next(it, None)
                    if nxt is not None:
                        pending.add(ex.submit(evaluate_points, *args, nxt))
    return SweepSummary(len(points), len(done), evaluated, failed, time.perf_counter() - t0)
