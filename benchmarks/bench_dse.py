"""Speed of analytical sweeps: the batch path beside the per-point path, and the result store.

Usage::

    .venv/bin/python benchmarks/bench_dse.py                 # table
    .venv/bin/python benchmarks/bench_dse.py --points 4000 --gpu-points 3000 --json
    .venv/bin/python benchmarks/bench_dse.py --sweeps hbq_pe_psum.yaml demo_buffers.yaml

What it measures (wall-clock figures swing with the machine's load, which it prints; CPU time
per point much less, so both are given):

* every shipped analytical HBQ and GPU sweep (``arch_configs/sweeps/``), evaluated in this
  process with its workloads loaded: CPU time per point of the batch path
  (:func:`coaccel.dse.batch.evaluate_batch_records`, one task of all the points) and of the
  per-point path (:func:`coaccel.dse.evaluate.evaluate_points`), and the points per second
  of one core each gives. A GPU workload's traffic analysis (once per workload and L2, before
  any point: the part of loading a trace the sweep reuses) is timed apart;
* larger grids of the same kind through the whole driver (spec expansion, the size estimate,
  the process pool, rows written to a fresh SQLite store), with 1 and with 2 workers, batch
  and per-point: HBQ-E on a Llama-3-8B 2K-token prefill, the PE x PSUM x ACT grid of
  ``hbq_pe_psum.yaml`` x a clock range; and the W1 FlashDecoding grid of
  ``gpu_decode_context_batch_splits.yaml`` (15 workloads x 3 HBM systems) x an SM-count range
  x up to 4 kernel launch latencies
  (its per-point run: the shipped 90 points, a full grid would take minutes per point
  thousand; the HBQ per-point run: a grid of ``--per-point-points``). Each run reports its
  wall-clock rate (everything from the spec's loading to the last row stored), its steady
  rate (points stored between the first and the last batch over that time), when the first
  batch was stored (the fixed start: loading the spec, expanding the grid, the size
  estimate's probe, the pool), and the CPU time per point of this process and its workers
  together. The stated target: 10,000 points/s with 2 workers; both rates are compared with
  it;
* the CPU time of one point of the per-point path in this process, split into its parts;
* the Dask executor's overhead per point against the local pool (when ``distributed`` is
  installed);
* the store's overhead per point (a batch of 64 rows written in one transaction, plus the
  lookup of those ids a resumed sweep does) when the store already holds 10 and 100,000 rows.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from coaccel import arch_configs
from coaccel.dse import Row, Store, expand, load_spec, run_sweep
from coaccel.dse import driver as dse_driver

TARGET_POINTS_PER_S = 10_000.0

SHIPPED = (
    "hbq_pe_psum.yaml",
    "hbq_format_block_array_psum.yaml",
    "hbq_two_stage.yaml",
    "hbq_search_space.yaml",
    "demo_buffers.yaml",
    "small_test.yaml",
    "gpu_decode_context_batch_splits.yaml",
    "gpu_ffd_keep_context.yaml",
    "gpu_offload_keep_context_link.yaml",
)
"""The shipped analytical HBQ and GPU sweeps (the search space's grid, not its NSGA-II)."""

HBQ_GRID = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3-8b:prefill_2k]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32, 64, 128]
  buffers.psum.size_kib: {{start: 68, stop: 272, step: 68}}
  buffers.act.size_kib: {{log2: [6, 8]}}
  freq_mhz: {{start: 300, stop: {stop}, step: 1}}
constraints:
  - "buffers.psum.size_kib >= pe_array.n_pes"
  - "buffers.act.size_kib >= 0.6 * buffers.psum.size_kib"
objectives:
  - {{metric: edp_js, goal: minimize}}
  - {{metric: area_mm2, goal: minimize}}
limits:
  - "area_mm2 <= 4"
"""
HBQ_DESIGNS_PER_CLOCK = 29  # the PE x PSUM x ACT combinations the constraints keep

GPU_GRID_PARAMS = """\
parameters:
  dram: [dram/hbm2e_a100_80g.yaml, dram/hbm3_h100_sxm.yaml, dram/hbm3e_h200.yaml]
  sm.count: {{start: 16, stop: {stop}, step: 1}}
  launch_overhead_us: [{launch}]
"""
GPU_POINTS_PER_LAUNCH = 45 * 117  # 15 workloads x 3 HBM systems x 117 SM counts
GPU_LAUNCH_US = (4.0, 2.0, 6.0, 8.0)  # the base's 4 us launch latency first


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _hbq_grid(tmp: Path, points: int) -> Path:
    spec = tmp / f"hbq_grid_{points}.yaml"
    clocks = max(1, points // HBQ_DESIGNS_PER_CLOCK)
    spec.write_text(HBQ_GRID.format(stop=300 + clocks - 1))
    return spec


def _gpu_grid(tmp: Path, points: int) -> Path:
    """The shipped W1 sweep with the SM count as a range (45 points per SM count) and, past
    5,265 points, up to 4 kernel launch latencies (21,060 points)."""
    text = arch_configs.path("sweeps/gpu_decode_context_batch_splits.yaml").read_text()
    head, _, tail = text.partition("parameters:")
    rest = tail.split("strategy:", 1)[1]
    n_launch = max(1, min(len(GPU_LAUNCH_US), -(-points // GPU_POINTS_PER_LAUNCH)))
    counts = max(1, min(117, points // (45 * n_launch)))
    launch = ", ".join(str(x) for x in GPU_LAUNCH_US[:n_launch])
    spec = tmp / f"gpu_grid_{points}.yaml"
    params = GPU_GRID_PARAMS.format(stop=16 + counts - 1, launch=launch)
    spec.write_text(head + params + "strategy:" + rest)
    return spec


def _driver(spec: Path, tmp: Path, workers: int, *, batch: bool = True,
            scheduler: str | None = None) -> dict:  # fmt: skip
    """One run of the whole driver into a fresh store: rates and CPU per point."""
    name = "dask" if scheduler else f"{'batch' if batch else 'point'}_{workers}_{spec.stem}"
    db = tmp / f"{name}.sqlite"
    db.unlink(missing_ok=True)
    seen: list[tuple[int, float, float]] = []
    kwargs = {"scheduler": scheduler} if scheduler else {}
    with contextlib.ExitStack() as stack:
        if not batch:  # the per-point path: as before the batch path existed
            stack.enter_context(_patched(dse_driver, "supports", lambda *_: False))
        c0, k0, t0 = time.process_time(), _cpu_children(), time.perf_counter()
        s = run_sweep(spec, db, workers=workers, max_points=None,
                      progress=lambda p: seen.append((p.done, p.elapsed_s,
                                                      time.perf_counter() - t0)),
                      **kwargs)  # fmt: skip
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0 + _cpu_children() - k0
    steady = None
    if len(seen) >= 3 and seen[-1][1] > seen[0][1]:
        steady = (seen[-1][0] - seen[0][0]) / (seen[-1][1] - seen[0][1])
    # the first stored batch: the spec, the grid's expansion, the size estimate, the pool
    startup = seen[0][2] if seen else None
    return {
        "path": "batch" if batch else "per-point",
        "executor": "dask" if scheduler else ("pool" if workers > 1 else "inline"),
        "workers": workers,
        "points": s.evaluated,
        "failed": s.failed,
        "wall_s": wall,
        "points_per_s": s.evaluated / wall,
        "steady_points_per_s": steady,
        "first_batch_s": startup,
        "cpu_us_per_point": cpu / max(1, s.evaluated) * 1e6,
    }


@contextlib.contextmanager
def _patched(obj: object, name: str, value: object):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _shipped(name: str) -> dict:
    """One shipped sweep evaluated in this process: CPU per point, batch and per-point."""
    from coaccel.dse.batch import evaluate_batch_records, warm_batch
    from coaccel.dse.evaluate import evaluate_points, warm
    from coaccel.dse.spec import ACCURACY_METRICS

    ls = load_spec(arch_configs.path(f"sweeps/{name}"))
    pts = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    limits = [e.text for e in ls.limits if not set(ACCURACY_METRICS) & set(e.names)]
    args = (ls.base_path, ls.spec.mode, ls.digest, limits)
    clock = time.process_time
    warm(ls.base_path, ls.spec.mode, ls.spec.workloads)  # loading is not a point's cost
    c0 = clock()
    warm_batch(ls.base_path, ls.spec.mode, ls.spec.workloads, ls.spec.values())
    prep = clock() - c0
    c0 = clock()
    recs = evaluate_batch_records(*args, "main", pts)
    c1 = clock()
    rows = evaluate_points(*args, pts)
    c2 = clock()
    n = len(pts)
    return {
        "sweep": name,
        "points": n,
        "failed": sum(r.status == "failed" for r in rows),
        "batch_prepare_s": prep,
        "batch_cpu_us_per_point": (c1 - c0) / n * 1e6,
        "per_point_cpu_us_per_point": (c2 - c1) / n * 1e6,
        "batch_points_per_s_one_core": n / max(c1 - c0, 1e-9),
        "per_point_points_per_s_one_core": n / max(c2 - c1, 1e-9),
        "same_rows": all(
            r[:9] + r[11:-2] == (x := row.record())[:9] + x[11:-2]
            for r, row in zip(recs, rows, strict=True)
        ),
    }


def _cpu_per_point(tmp: Path, points: int) -> dict:
    """CPU time of one point in this process, by part (the same steps as evaluate_points)."""
    from coaccel.cost import evaluate
    from coaccel.dse.evaluate import evaluate_points
    from coaccel.simulation import find_arch
    from coaccel.spine.config import config_digest, override

    ls = load_spec(_hbq_grid(tmp, points))
    pts = expand(ls.spec, ls.constraints, ls.digest, ls.source)[:points]
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
        warm = _driver(_hbq_grid(tmp, 8), tmp, 2, scheduler=cluster.scheduler_address)
        r = _driver(_hbq_grid(tmp, points), tmp, 2, scheduler=cluster.scheduler_address)
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


def _measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every figure of the benchmark (see the module docstring)."""
    hbq, gpu = _hbq_grid(tmp, args.points), _gpu_grid(tmp, args.gpu_points)
    gpu_point = arch_configs.path("sweeps/gpu_decode_context_batch_splits.yaml")
    _driver(_hbq_grid(tmp, 8), tmp, 1)  # warm-up: imports, file loading, numba caches
    _driver(_hbq_grid(tmp, 8), tmp, 1, batch=False)
    shipped = [_shipped(name) for name in args.sweeps]
    # the per-point path on a grid of its own size (at about 1 ms a point, the batch grid's
    # tens of thousands of points would take minutes)
    hbq_pp = _hbq_grid(tmp, min(args.points, args.per_point_points))
    drivers = {
        "hbq": [_driver(hbq, tmp, w) for w in (1, 2)]
        + [_driver(hbq_pp, tmp, w, batch=False) for w in (1, 2)],
        "gpu": [_driver(gpu, tmp, w) for w in (1, 2)]
        + [_driver(gpu_point, tmp, w, batch=False) for w in (1, 2)],
    }
    cpu = _cpu_per_point(tmp, min(args.points, 400))
    dask = _dask(tmp, args.points, drivers["hbq"][1]) if args.dask else {
        "measured": False, "why": "not asked (--dask)"}  # fmt: skip
    store = [_store(tmp, n) for n in (10, 100_000)]
    return {"shipped": shipped, "driver": drivers, "cpu_per_point": cpu, "dask": dask,
            "store": store}  # fmt: skip


def _print_shipped(shipped: list[dict]) -> None:
    print("shipped analytical sweeps, evaluated in one process (workloads loaded), CPU per point")
    print(f"  {'sweep':<40} {'points':>6} {'batch us':>9} {'per-point us':>12} "
          f"{'batch pts/s/core':>16} {'x':>5}  prepare")  # fmt: skip
    for r in shipped:
        speed = r["per_point_cpu_us_per_point"] / r["batch_cpu_us_per_point"]
        same = "" if r["same_rows"] else "  ROWS DIFFER"
        print(f"  {r['sweep']:<40} {r['points']:>6} {r['batch_cpu_us_per_point']:>9.0f} "
              f"{r['per_point_cpu_us_per_point']:>12.0f} "
              f"{r['batch_points_per_s_one_core']:>16.0f} {speed:>5.1f}  "
              f"{r['batch_prepare_s']:.2f} s{same}")  # fmt: skip


def _print_driver(name: str, runs: list[dict]) -> None:
    print(f"  {name}")
    for r in runs:
        steady = r["steady_points_per_s"]
        st = f", steady {steady:.0f}/s" if steady else ""
        first = r.get("first_batch_s")
        fb = f", first batch stored at {first:.2f} s" if first is not None else ""
        wall_ok = "meets" if r["points_per_s"] >= TARGET_POINTS_PER_S else "below"
        steady_ok = "meets" if (steady or 0.0) >= TARGET_POINTS_PER_S else "below"
        print(f"    {r['path']:<9} {r['workers']} worker(s): {r['points']} points in "
              f"{r['wall_s']:.2f} s = {r['points_per_s']:.0f} points/s{st}{fb}; CPU "
              f"{r['cpu_us_per_point']:.0f} us/point (the {TARGET_POINTS_PER_S:.0f}/s target: "
              f"wall {wall_ok}, steady {steady_ok})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=50000, help="points of the HBQ grid")
    p.add_argument(
        "--per-point-points",
        type=int,
        default=4000,
        help="points of the HBQ grid on the per-point path (at most --points)",
    )
    p.add_argument("--gpu-points", type=int, default=21060,
                   help="points of the GPU grid (at most 21,060: 117 SM counts x 4 launch "
                   "latencies)")  # fmt: skip
    p.add_argument("--sweeps", nargs="*", default=list(SHIPPED), help="shipped sweeps to time")
    p.add_argument("--dask", action="store_true", help="also time a Dask LocalCluster")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        doc = _measure(args, Path(d))
    doc = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "target_points_per_s": TARGET_POINTS_PER_S,
        **doc,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"analytical sweeps ({os.cpu_count()} CPUs, load average before "
          f"{', '.join(f'{x:.1f}' for x in load_before)}, after {_load()})")  # fmt: skip
    _print_shipped(doc["shipped"])
    print("the whole driver (fresh store, pool start included)")
    _print_driver("HBQ-E llama-3-8b prefill_2k, PE x PSUM x ACT x clock", doc["driver"]["hbq"])
    _print_driver("GPU W1 decode, 15 workloads x HBM x SM count x launch latency "
                  "(per-point: the shipped 90)", doc["driver"]["gpu"])  # fmt: skip
    cpu = doc["cpu_per_point"]
    parts = ", ".join(f"{k} {v:.3f}" for k, v in cpu["parts_ms"].items())
    print(f"per-point path, CPU per point in one process: {cpu['ms_per_point']:.3f} ms "
          f"({parts} ms)")  # fmt: skip
    dask = doc["dask"]
    if dask["measured"]:
        print(f"Dask LocalCluster, 2 workers: {dask['points']} points = "
              f"{dask['points_per_s']:.0f} points/s; overhead over the local pool "
              f"{dask['overhead_us_per_point']:.0f} us/point")  # fmt: skip
    else:
        print(f"Dask executor: not measured ({dask['why']})")
    print("result store, per point (64-row transactions + id lookup)")
    for r in doc["store"]:
        print(f"  {r['stored_rows']:>7} rows stored: {r['us_per_point']:.1f} us/point")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
