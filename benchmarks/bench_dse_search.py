"""Search quality of the NSGA-II strategy against the exhaustive front, and Dask's overhead.

Usage::

    .venv/bin/python benchmarks/bench_dse_search.py                  # table
    .venv/bin/python benchmarks/bench_dse_search.py --seeds 1 2 3 --json
    .venv/bin/python benchmarks/bench_dse_search.py --grid-store grid.sqlite   # reuse a sweep
    .venv/bin/python benchmarks/bench_dse_search.py --dask            # + Dask overhead per point

What it measures, on ``arch_configs/sweeps/hbq_search_space.yaml`` (HBQ-E, Llama-3-8B 2K-token
prefill, a few thousand real analytical points, objectives EDP and area, limit area <= 4 mm²):

* the exhaustive front: the grid over the whole space (every point evaluated through the
  driver, 2 workers), its hypervolume over the feasible points;
* for each seed: the spec's NSGA-II search run through the same driver into a fresh store,
  its hypervolume (same reference point: 1.1 x the worst value of each objective over the
  exhaustive feasible points) as a fraction of the exhaustive one, and the evaluations it used
  as a fraction of the space. The target is a ratio >= 0.98 with at most 5 % of the
  evaluations;
* with ``--dask``: the same batches of points evaluated on the warm 2-process local pool and
  on a warm 2-worker ``distributed.LocalCluster``, and the difference in wall time per point
  (Dask's overhead), with the driver's batching and with one task per point.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coaccel import arch_configs
from coaccel.dse import Store, Strategy, hypervolume, load_spec, run_sweep

SPACE = arch_configs.path("sweeps/hbq_search_space.yaml")
HV_TARGET = 0.98
EVAL_FRACTION_TARGET = 0.05


def _objective_matrix(st: Store, ls, ids: set[str] | None = None) -> np.ndarray:
    names = [o.metric for o in ls.spec.objectives]
    rows = [
        r
        for r in st.rows("ok")
        if r.feasible and (ids is None or r.point_id in ids) and r.spec_digest == ls.digest
    ]
    return np.array([[float(r.metrics[n][0]) for n in names] for r in rows], dtype=np.float64)


def _grid(ls, db: Path, workers: int) -> dict:
    grid = dataclasses.replace(ls, spec=dataclasses.replace(ls.spec, strategy=Strategy()))
    t0 = time.perf_counter()
    s = run_sweep(grid, db, workers=workers)
    return {"total": s.total, "evaluated_now": s.evaluated, "wall_s": time.perf_counter() - t0}


def _search(ls, seed: int, db: Path, workers: int) -> dict:
    strat = dataclasses.replace(ls.spec.strategy, seed=seed)
    search = dataclasses.replace(ls, spec=dataclasses.replace(ls.spec, strategy=strat))
    t0 = time.perf_counter()
    s = run_sweep(search, db, workers=workers)
    return {"seed": seed, "evaluations": s.evaluated, "wall_s": time.perf_counter() - t0}


def _dask_overhead(ls, n_points: int) -> dict:
    """Wall time of the same batches on the warm 2-process pool and a warm 2-worker Dask
    LocalCluster; the difference per point is what Dask adds (scheduling, serialization)."""
    from distributed import LocalCluster

    from coaccel.dse import DaskExecutor, PoolExecutor, evaluate_points, expand

    sample = Strategy(kind="random", seed=7, samples=min(2 * n_points, 3000))
    spec = dataclasses.replace(ls.spec, strategy=sample)
    pts = expand(spec, ls.constraints, ls.digest)
    warm, timed = pts[: len(pts) // 2], pts[len(pts) // 2 :]
    args = (ls.base_path, ls.spec.mode, ls.digest, [e.text for e in ls.limits])

    def batches(p: list, size: int) -> list:
        return [p[i : i + size] for i in range(0, len(p), size)]

    size = max(1, min(64, -(-len(timed) // 16)))  # the driver's default for 2 workers
    out: dict = {"points": len(timed), "batch_size": size}
    with PoolExecutor(2) as pool:
        list(pool.run(evaluate_points, args, batches(warm, size)))
        t0 = time.perf_counter()
        list(pool.run(evaluate_points, args, batches(timed, size)))
        out["pool_s"] = time.perf_counter() - t0
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        DaskExecutor(cluster.scheduler_address) as dask,
    ):
        list(dask.run(evaluate_points, args, batches(warm, size)))
        t0 = time.perf_counter()
        list(dask.run(evaluate_points, args, batches(timed, size)))
        out["dask_s"] = time.perf_counter() - t0
        # without batching: one task per point
        t0 = time.perf_counter()
        list(dask.run(evaluate_points, args, batches(timed, 1)))
        out["dask_unbatched_s"] = time.perf_counter() - t0
    n = len(timed)
    out["overhead_per_point_ms"] = (out["dask_s"] - out["pool_s"]) / n * 1e3
    out["unbatched_overhead_per_point_ms"] = (out["dask_unbatched_s"] - out["pool_s"]) / n * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--grid-store", type=Path, default=None, help="reuse/keep the exhaustive sweep")
    ap.add_argument("--dask", action="store_true", help="also measure Dask's overhead per point")
    ap.add_argument("--dask-points", type=int, default=600)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    ls = load_spec(SPACE)
    names = [o.metric for o in ls.spec.objectives]
    senses = ["min" if o.goal == "minimize" else "max" for o in ls.spec.objectives]
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        gdb = args.grid_store or tmp / "grid.sqlite"
        grid = _grid(ls, gdb, args.workers)
        with Store(gdb) as st:
            full = _objective_matrix(st, ls)
        ref = [1.1 * float(full[:, j].max()) for j in range(full.shape[1])]
        hv_full = hypervolume(full, senses, ref)
        results = []
        for seed in args.seeds:
            db = tmp / f"nsga2_{seed}.sqlite"
            r = _search(ls, seed, db, args.workers)
            with Store(db) as st:
                found = _objective_matrix(st, ls)
            r["hv_ratio"] = hypervolume(found, senses, ref) / hv_full if found.size else 0.0
            r["eval_fraction"] = r["evaluations"] / grid["total"]
            r["meets_target"] = bool(
                r["hv_ratio"] >= HV_TARGET and r["eval_fraction"] <= EVAL_FRACTION_TARGET
            )
            results.append(r)
        dask = _dask_overhead(ls, args.dask_points) if args.dask else None
    st_ = ls.spec.strategy
    doc = {
        "space": str(SPACE),
        "objectives": names,
        "strategy": {"population": st_.population, "generations": st_.generations},
        "grid": grid,
        "hv_exhaustive": hv_full,
        "reference": ref,
        "search": results,
        "dask": dask,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"space: {grid['total']} points ({SPACE.name}); exhaustive sweep {grid['wall_s']:.1f} s "
        f"({grid['evaluated_now']} evaluated now); objectives {', '.join(names)}"
    )
    print(
        f"NSGA-II population {st_.population} x {st_.generations} generations; targets: "
        f"HV ratio >= {HV_TARGET}, evaluations <= {EVAL_FRACTION_TARGET:.0%}"
    )
    print(" seed  evaluations used/total   HV ratio   wall s  target")
    for r in results:
        ok = "met" if r["meets_target"] else "MISSED"
        print(
            f" {r['seed']:>4}  {r['evaluations']:>5}/{grid['total']:<5} ({r['eval_fraction']:5.1%})"
            f"   {r['hv_ratio']:.4f}   {r['wall_s']:6.1f}  {ok}"
        )
    ratios = [r["hv_ratio"] for r in results]
    print(f" HV ratio: min {min(ratios):.4f}, mean {np.mean(ratios):.4f}")
    if dask is not None:
        print(
            f"Dask LocalCluster (2 workers) vs local pool (2 processes), both warm, "
            f"{dask['points']} points in batches of {dask['batch_size']}: {dask['dask_s']:.2f} s "
            f"vs {dask['pool_s']:.2f} s, Dask overhead {dask['overhead_per_point_ms']:.3f} ms "
            f"per point; one task per point: {dask['dask_unbatched_s']:.2f} s, "
            f"{dask['unbatched_overhead_per_point_ms']:.3f} ms per point"
        )
    print("(timings on a shared machine are noisy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
