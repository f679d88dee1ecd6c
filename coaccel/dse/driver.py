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
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from .space import Point, expand
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


# Per-process cache: (base path, mode) -> (target, base config, {workload: loaded workload}).
_CONTEXT: dict[tuple[str, str], tuple[Any, Any, dict[str, Any]]] = {}


# Per-process cache of the latest designs: (base path, params) -> (config, its digest). Points
# are ordered by combination, then workload, so one design's workloads share one override.
_ARCHS: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Any, str]] = {}


def _context(base_path: str, mode: str, workload: str) -> tuple[Any, Any, Any]:
    from ..simulation import find_arch

    key = (base_path, mode)
    if key not in _CONTEXT:
        t, path = find_arch(base_path)
        _CONTEXT[key] = (t, t.load_arch(path), {})
    t, base, wls = _CONTEXT[key]
    if workload not in wls:
        wls[workload] = t.load_workload(workload)
    return t, base, wls[workload]


def _evaluate_one(base_path: str, mode: str, digest: str, limits: Sequence[str], pt: Point) -> Row:
    from ..config import config_digest, override
    from ..cost import evaluate
    from .spec import parse_expr

    started = time.time()
    t0 = time.perf_counter()
    cfg_digest = None
    try:
        t, base, wl = _context(base_path, mode, pt.workload)
        key = (base_path, pt.params)
        if key in _ARCHS:  # the same design on the next workload: validated already
            arch, cfg_digest = _ARCHS[key]
        else:
            arch = override(base, pt.overrides)
            cfg_digest = config_digest(arch)
            if len(_ARCHS) >= 256:
                _ARCHS.pop(next(iter(_ARCHS)))
            _ARCHS[key] = (arch, cfg_digest)
        result = t.simulate(arch, wl, mode=mode)
        metrics = {k: (v, u) for k, (v, u) in result.metrics().items()}
        if t.priced_components is not None:
            cb = evaluate(result, arch)
            seconds = float(metrics["seconds"][0])
            metrics["energy_j"] = (cb.total_energy_j, "J")
            metrics["area_mm2"] = (cb.total_area_um2 / 1e6, "mm2")
            metrics["edp_js"] = (cb.total_energy_j * seconds, "J*s")
        env = {k: v for k, (v, _) in metrics.items()}
        feasible = all(parse_expr(lim)(env) for lim in limits)
        return Row(
            pt.point_id,
            pt.workload,
            dict(pt.params),
            cfg_digest,
            digest,
            metrics,
            feasible,
            "ok",
            None,
            started,
            time.perf_counter() - t0,
            __version__,
        )
    except Exception:  # noqa: BLE001 - a failing point is recorded and the sweep goes on
        return Row(
            pt.point_id,
            pt.workload,
            dict(pt.params),
            cfg_digest,
            digest,
            {},
            None,
            "failed",
            traceback.format_exc(),
            started,
            time.perf_counter() - t0,
            __version__,
        )


def evaluate_points(
    base_path: str, mode: str, digest: str, limits: Sequence[str], points: Sequence[Point]
) -> list[Row]:
    """Evaluate a batch of points in this process (what each pool worker runs).

    Args:
        base_path: the base architecture (resolved file or shipped name).
        mode: simulator mode.
        digest: the spec digest recorded in each row.
        limits: limit expressions; a row is feasible when all hold.
        points: the batch.

    Returns:
        One row per point, in order; a point that raised is a ``failed`` row with its
        traceback.
    """
    return [_evaluate_one(base_path, mode, digest, limits, p) for p in points]


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
