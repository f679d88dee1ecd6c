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
* with ``--dask``: the same points evaluated on a 2-worker ``distributed.LocalCluster`` and on
  the 2-process local pool, and the difference in wall time per point (Dask's overhead).
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


def _dask_overhead(ls, tmp: Path, n_points: int) -> dict:
    from distributed import LocalCluster

    grid = dataclasses.replace(
        ls,
        spec=dataclasses.replace(
            ls.spec, strategy=Strategy(kind="random", seed=7, samples=n_points)
        ),
    )
    t0 = time.perf_counter()
    a = run_sweep(grid, tmp / "pool.sqlite", workers=2)
    pool_s = time.perf_counter() - t0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        # warm the workers (imports, architecture and workload loaded once per process)
        run_sweep(grid, tmp / "warm.sqlite", scheduler=cluster.scheduler_address)
        t0 = time.perf_counter()
        b = run_sweep(grid, tmp / "dask.sqlite", scheduler=cluster.scheduler_address)
        dask_s = time.perf_counter() - t0
    return {
        "points": a.evaluated,
        "pool_s": pool_s,
        "dask_s": dask_s,
        "overhead_per_point_ms": (dask_s - pool_s) / max(1, b.evaluated) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--grid-store", type=Path, default=None, help="reuse/keep the exhaustive sweep")
    ap.add_argument("--dask", action="store_true", help="also measure Dask's overhead per point")
    ap.add_argument("--dask-points", type=int, default=400)
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
        dask = _dask_overhead(ls, tmp, args.dask_points) if args.dask else None
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
            f"Dask (LocalCluster, 2 workers) vs local pool (2 processes), {dask['points']} points: "
            f"{dask['dask_s']:.2f} s vs {dask['pool_s']:.2f} s, overhead "
            f"{dask['overhead_per_point_ms']:.2f} ms per point"
        )
    print("(timings on a shared machine are noisy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
