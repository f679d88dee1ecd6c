"""Speed of the sweep driver end to end, and the result store's cost per point.

Usage::

    .venv/bin/python benchmarks/bench_dse.py                 # table
    .venv/bin/python benchmarks/bench_dse.py --points 4000 --json

What it measures:

* analytical points per second through the whole driver (spec expansion, the process pool,
  simulate + cost per point, rows written to a fresh SQLite store), with 1 and with 2 workers,
  on HBQ-E and a Llama-3-8B 2K-token prefill (clock x PSUM size x PE count; every point a
  distinct architecture). The stated target is 1000 points/s with 2 workers. Each run reports
  its wall-clock rate (pool start included) and its steady rate (points stored between the
  first and the last batch over that time), and the scaling from 1 to 2 workers;
* the CPU time of one point in this process, split into its parts (override, config digest,
  simulate, cost, the row): wall-clock figures swing with the machine's load, CPU time much
  less;
* the Dask executor's overhead per point: the same sweep on a ``distributed.LocalCluster``
  with 2 single-threaded worker processes, against the local pool (printed when this build's
  ``run_sweep`` takes a ``scheduler`` and ``distributed`` is installed);
* the store's overhead per point (a batch of 64 rows written in one transaction, plus the
  lookup of those ids a resumed sweep does) when the store already holds 10 and 100,000 rows:
  it should stay flat, because the point id is the primary key (a B-tree).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from coaccel.dse import Row, Store, expand, load_spec, run_sweep

TARGET_POINTS_PER_S = 1000.0

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3-8b:prefill_2k]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {{start: 200, stop: {stop}, step: 1}}
"""


def _spec(tmp: Path, points: int) -> Path:
    spec = tmp / f"bench_{points}.yaml"
    spec.write_text(SPEC.format(stop=200 + max(1, points // 4) - 1))
    return spec


def _driver(tmp: Path, points: int, workers: int, scheduler: str | None = None) -> dict:
    ls = load_spec(_spec(tmp, points))
    name = "dask" if scheduler else f"driver_{workers}"
    db = tmp / f"{name}.sqlite"
    db.unlink(missing_ok=True)
    seen: list[tuple[int, float]] = []
    kwargs = {"scheduler": scheduler} if scheduler else {}
    t0 = time.perf_counter()
    s = run_sweep(ls, db, workers=workers, progress=lambda p: seen.append((p.done, p.elapsed_s)),
                  **kwargs)  # fmt: skip
    wall = time.perf_counter() - t0
    steady = None
    if len(seen) >= 3 and seen[-1][1] > seen[0][1]:
        steady = (seen[-1][0] - seen[0][0]) / (seen[-1][1] - seen[0][1])
    return {
        "executor": "dask" if scheduler else ("pool" if workers > 1 else "inline"),
        "workers": workers,
        "points": s.evaluated,
        "failed": s.failed,
        "wall_s": wall,
        "points_per_s": s.evaluated / wall,
        "steady_points_per_s": steady,
    }


def _cpu_per_point(tmp: Path, points: int) -> dict:
    """CPU time of one point in this process, by part (the same steps as evaluate_points)."""
    from coaccel.cost import evaluate
    from coaccel.dse.evaluate import evaluate_points
    from coaccel.simulation import find_arch
    from coaccel.spine.config import config_digest, override

    ls = load_spec(_spec(tmp, points))
    pts = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    args = (ls.base_path, ls.spec.mode, ls.digest, [e.text for e in ls.limits])
    t, path = find_arch(ls.base_path)
    base, wl = t.load_arch(path), t.load_workload(pts[0].workload)
    parts = {"override": 0.0, "config_digest": 0.0, "simulate": 0.0, "cost": 0.0}
    clock = time.process_time
    for p in pts:
        c0 = clock()
        arch = override(base, p.overrides)
        c1 = clock()
        config_digest(arch)
        c2 = clock()
        res = t.simulate(arch, wl, mode=ls.spec.mode)
        c3 = clock()
        evaluate(res, arch)
        c4 = clock()
        for k, dt in zip(parts, (c1 - c0, c2 - c1, c3 - c2, c4 - c3), strict=True):
            parts[k] += dt
    c0 = clock()
    evaluate_points(*args, pts)
    total = (clock() - c0) / len(pts)
    out = {k: v / len(pts) * 1e3 for k, v in parts.items()}
    out["row_and_rest"] = max(0.0, total * 1e3 - sum(out.values()))
    return {"points": len(pts), "ms_per_point": total * 1e3, "parts_ms": out}


def _dask_available() -> str | None:
    """Why the Dask figure cannot be measured here, or None when it can."""
    if "scheduler" not in inspect.signature(run_sweep).parameters:
        return "this build's run_sweep has no Dask executor (no scheduler argument)"
    if importlib.util.find_spec("distributed") is None:
        return "the distributed package is not installed"
    return None


def _dask(tmp: Path, points: int, pool: dict) -> dict:
    """The sweep on a 2-worker LocalCluster; its overhead per point against the local pool."""
    why = _dask_available()
    if why is not None:
        return {"measured": False, "why": why}
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:  # fmt: skip
        # A first small sweep starts the workers (imports, the base architecture, the cost
        # model's fit), as the pool's workers inherit them from this process.
        warm = _driver(tmp, 8, 2, scheduler=cluster.scheduler_address)
        r = _driver(tmp, points, 2, scheduler=cluster.scheduler_address)
    r["measured"] = True
    r["worker_start_s"] = warm["wall_s"]
    r["overhead_us_per_point"] = (r["wall_s"] - pool["wall_s"]) / r["points"] * 1e6
    if r["steady_points_per_s"] and pool["steady_points_per_s"]:
        r["steady_overhead_us_per_point"] = 1e6 * (
            1 / r["steady_points_per_s"] - 1 / pool["steady_points_per_s"]
        )
    return r


def _row(i: int) -> Row:
    return Row(f"{i:032x}", "llama-3-8b:prefill_2k", {"pe_array.n_pes": 32, "freq_mhz": i},
               "d" * 64, "s" * 64, {"cycles": (i, "cycle"), "energy_j": (0.5, "J")}, True, "ok",
               None, 0.0, 0.001, "0")  # fmt: skip


def _store(tmp: Path, prefill: int, batches: int = 30, batch: int = 64) -> dict:
    db = tmp / f"store_{prefill}.sqlite"
    with Store(db) as st:
        for i in range(0, prefill, 5000):
            st.add(_row(j) for j in range(i, min(prefill, i + 5000)))
        base = prefill + 10**9
        t0 = time.perf_counter()
        for b in range(batches):
            rows = [_row(base + b * batch + k) for k in range(batch)]
            st.done_ids(r.point_id for r in rows)
            st.add(rows)
        per_point = (time.perf_counter() - t0) / (batches * batch)
        return {"stored_rows": prefill, "us_per_point": per_point * 1e6, "rows_after": len(st)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=1000, help="points per driver run")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _driver(tmp, 8, 1)  # warm-up: imports, file loading, numba caches
        cpu = _cpu_per_point(tmp, min(args.points, 400))
        driver = [_driver(tmp, args.points, w) for w in (1, 2)]
        dask = _dask(tmp, args.points, driver[1])
        store = [_store(tmp, n) for n in (10, 100_000)]
    scaling = driver[1]["points_per_s"] / driver[0]["points_per_s"]
    doc = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "target_points_per_s": TARGET_POINTS_PER_S,
        "cpu_per_point": cpu,
        "driver": driver,
        "scaling_1_to_2_workers": scaling,
        "dask": dask,
        "store": store,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    load = ", ".join(f"{x:.1f}" for x in doc["load_average"])
    print(f"sweep driver, analytical, HBQ-E llama-3-8b prefill_2k ({os.cpu_count()} CPUs, "
          f"load average {load})")  # fmt: skip
    parts = ", ".join(f"{k} {v:.3f}" for k, v in cpu["parts_ms"].items())
    print(f"  CPU per point in one process: {cpu['ms_per_point']:.3f} ms ({parts} ms)")
    for r in driver:
        ok = "meets" if r["points_per_s"] >= TARGET_POINTS_PER_S else "below"
        steady = r["steady_points_per_s"]
        st = f", steady {steady:.0f} points/s" if steady else ""
        print(
            f"  {r['workers']} worker(s): {r['points']} points in {r['wall_s']:.2f} s = "
            f"{r['points_per_s']:.0f} points/s{st} ({ok} the {TARGET_POINTS_PER_S:.0f}/s target)"
        )
    print(f"  scaling from 1 to 2 workers: x{scaling:.2f}")
    if dask["measured"]:
        steady_over = dask.get("steady_overhead_us_per_point")
        so = f", steady {steady_over:.0f} us/point" if steady_over is not None else ""
        print(
            f"  Dask LocalCluster, 2 workers (started: {dask['worker_start_s']:.1f} s): "
            f"{dask['points']} points in {dask['wall_s']:.2f} s = {dask['points_per_s']:.0f} "
            f"points/s; overhead over the local pool {dask['overhead_us_per_point']:.0f} "
            f"us/point{so}"
        )
    else:
        print(f"  Dask executor: not measured ({dask['why']})")
    print("result store, per point (64-row transactions + id lookup)")
    for r in store:
        print(f"  {r['stored_rows']:>7} rows stored: {r['us_per_point']:.1f} us/point")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
