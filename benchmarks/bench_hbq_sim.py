"""Speed of the HBQ ASIC simulator: cycle-approximate and analytical modes (single thread).

Usage::

    .venv/bin/python benchmarks/bench_hbq_sim.py                    # table
    .venv/bin/python benchmarks/bench_hbq_sim.py --json             # one JSON document
    .venv/bin/python benchmarks/bench_hbq_sim.py --arch nvfp4_28nm --skip-16k

What it measures (after one warm-up run that excludes numba compilation and file loading):

* the cycle-approximate mode on the issue's target case, Llama-3-8B 2048-token prefill on
  ``--arch`` (target < 10 s on one core): trace generation by the reference + the engine, the
  best of ``--repeat`` runs, wall clock and process CPU time;
* the analytical mode per design point (target < 5 ms): the median over a sweep of distinct
  design points (PSUM buffer size x clock x PE count, each a new config from
  ``coaccel.config.override``), so nothing is cached between points;
* the scaling of both with sequence length (prefill 1K, 2K, 4K, 16K; decode after 2K and 16K).

numba runs on one thread (``NUMBA_NUM_THREADS=1`` is set before numba is imported).
"""

from __future__ import annotations

import os

os.environ["NUMBA_NUM_THREADS"] = "1"  # before numba is imported (through coaccel)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from coaccel.sim.hbq_asic import load_arch, load_workload, simulate  # noqa: E402
from coaccel.spine.config import override  # noqa: E402

TARGET_CYCLE_S = 10.0
"""Llama-3-8B 2048-token prefill, cycle-approximate, one core."""
TARGET_ANALYTICAL_S = 5e-3
"""Analytical mode, per design point."""


def _time(fn, repeat: int) -> dict[str, float]:
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return {"wall_s": best_wall, "cpu_s": best_cpu}


def _design_points(arch, n: int) -> list:
    points = []
    for psum_kib in (68, 136, 272):
        for freq in (400, 500, 800):
            for n_pes in (16, 32, 64):
                points.append(
                    override(
                        arch,
                        {
                            "buffers.psum.size_kib": psum_kib,
                            # The ACT buffer grows with the token tile the PSUM buffer allows.
                            "buffers.act.size_kib": max(96, 96 * psum_kib // 136),
                            "freq_mhz": freq,
                            "pe_array.n_pes": n_pes,
                            "tiling.tile_n_channels": max(256, n_pes * 4),
                        },
                    )
                )
    return points[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="HBQ ASIC simulator speed")
    ap.add_argument("--arch", default="hbq_e_28nm", help="architecture (default hbq_e_28nm)")
    ap.add_argument("--model", default="llama-3-8b", help="workload model (default llama-3-8b)")
    ap.add_argument("--repeat", type=int, default=3, help="cycle-mode runs; the best is kept")
    ap.add_argument("--points", type=int, default=27, help="analytical design points (<= 27)")
    ap.add_argument("--skip-16k", action="store_true", help="leave the 16K prefill out")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)

    arch = load_arch(args.arch)
    target = load_workload(args.model, "prefill_2k")
    simulate(arch, target)  # warm-up: numba compilation (cached on disk), imports
    cycle = _time(lambda: simulate(arch, target), args.repeat)
    stats = simulate(arch, target)

    points = _design_points(arch, args.points)
    simulate(points[0], target, mode="analytical")
    per_point = []
    for p in points:
        t0 = time.perf_counter()
        simulate(p, target, mode="analytical")
        per_point.append(time.perf_counter() - t0)
    analytical = {
        "points": len(points),
        "median_s": statistics.median(per_point),
        "max_s": max(per_point),
    }

    scenarios = ["prefill_1k", "prefill_2k", "prefill_4k", "prefill_16k", "decode_2k",
                 "decode_16k"]  # fmt: skip
    if args.skip_16k:
        scenarios.remove("prefill_16k")
    scaling = []
    for sc in scenarios:
        w = load_workload(args.model, sc)
        c = _time(lambda w=w: simulate(arch, w), 1)
        a = _time(lambda w=w: simulate(arch, w, mode="analytical"), 5)
        sc_c = simulate(arch, w)
        sc_a = simulate(arch, w, mode="analytical")
        scaling.append(
            {
                "scenario": sc,
                "tokens": w.scenario.tokens,
                "cycle_wall_s": c["wall_s"],
                "cycle_cpu_s": c["cpu_s"],
                "analytical_wall_s": a["wall_s"],
                "cycles": sc_c.cycles,
                "analytical_cycles": sc_a.cycles,
                "analytical_error": sc_a.cycles / sc_c.cycles - 1,
            }
        )
    doc = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "numba_num_threads": os.environ["NUMBA_NUM_THREADS"],
        "arch": args.arch,
        "workload": target.label,
        "cycle_mode": {
            **cycle,
            "target_s": TARGET_CYCLE_S,
            "cycles": stats.cycles,
            "ok": cycle["wall_s"] < TARGET_CYCLE_S,
        },  # fmt: skip
        "analytical_mode": {
            **analytical,
            "target_s": TARGET_ANALYTICAL_S,
            "ok": analytical["median_s"] < TARGET_ANALYTICAL_S,
        },  # fmt: skip
        "scaling": scaling,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    ok = {True: "ok", False: "ABOVE TARGET"}
    print(f"HBQ ASIC simulator on {args.arch}, numba on 1 thread, {os.cpu_count()} CPUs")
    print(
        f"cycle-approximate, {target.label}: {cycle['wall_s']:.2f} s wall, "
        f"{cycle['cpu_s']:.2f} s CPU (target < {TARGET_CYCLE_S:g} s: "
        f"{ok[doc['cycle_mode']['ok']]}); {stats.cycles:,} cycles"
    )
    print(
        f"analytical, {len(points)} design points: median {analytical['median_s'] * 1e3:.2f} ms, "
        f"max {analytical['max_s'] * 1e3:.2f} ms per point (target < "
        f"{TARGET_ANALYTICAL_S * 1e3:g} ms: {ok[doc['analytical_mode']['ok']]})"
    )
    print("\nscaling with sequence length")
    print(f"{'scenario':<13}{'tokens':>7}{'cycle s':>9}{'CPU s':>8}{'analyt. ms':>12}"
          f"{'cycles':>17}{'analyt. err':>12}")  # fmt: skip
    for r in scaling:
        print(
            f"{r['scenario']:<13}{r['tokens']:>7}{r['cycle_wall_s']:>9.2f}{r['cycle_cpu_s']:>8.2f}"
            f"{r['analytical_wall_s'] * 1e3:>12.2f}{r['cycles']:>17,}"
            f"{100 * r['analytical_error']:>+11.2f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
