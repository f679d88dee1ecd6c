"""Speed of the whole-decode-step model (coaccel.sim.gpu_mem.decode_step, ``coaccel gpu-step``).

Usage::

    .venv/bin/python benchmarks/bench_gpu_step.py            # table
    .venv/bin/python benchmarks/bench_gpu_step.py --json     # machine-readable
    .venv/bin/python benchmarks/bench_gpu_step.py --quick    # 200 sweep points

What it measures:

* **one decode step** of Llama-3.1-8B at batch 16 with 16K-token contexts on the H200,
  analytical, CUDA-graph mode: the first evaluation (builds and caches the attention traffic of
  a request) and the mean of later ones with a new context each time (new attention traffic,
  the caches of the projections reused); target < 50 ms;
* **a sweep** over GPU (A100-80GB, H100, H200, L40S where shipped) x batch (1 .. 64) x context
  (1K .. 32K) x model (Llama-3.1-8B, Llama-3.2-1B, Qwen2.5-7B, Qwen1.5-MoE-A2.7B), one
  decode step per point, on 2 worker processes; points/s and the wall time of 1,000 points;
  target < 2 minutes;
* **scaling** of one step's evaluation time against batch at 16K context.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import product

MODELS = ("llama-3.1-8b", "llama-3.2-1b", "qwen2.5-7b", "qwen1.5-moe-a2.7b")
GPUS = ("a100_80g", "h100_sxm", "h200", "l40s")
BATCHES = (1, 2, 4, 8, 16, 32, 64)
CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768)


def _gpus() -> tuple[str, ...]:
    from coaccel.sim.gpu_mem.config import _shipped_arch_names

    have = set(_shipped_arch_names())
    return tuple(g for g in GPUS if g in have)


def _points(n: int) -> list[tuple[str, str, int, int]]:
    grid = list(product(_gpus(), MODELS, BATCHES, CONTEXTS))
    step = max(1, len(grid) // n) if len(grid) > n else 1
    pts = grid[::step]
    while len(pts) < n:  # repeat the grid with shifted contexts to reach n points
        pts += [(g, m, b, c + len(pts)) for g, m, b, c in grid][: n - len(pts)]
    return pts[:n]


def _work(chunk: list[tuple[str, str, int, int]]) -> list[float]:
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.sim.gpu_mem.decode_step import decode_step
    from coaccel.spine.workload import load_workload

    archs: dict[str, object] = {}
    models: dict[str, object] = {}
    out = []
    for g, m, b, c in chunk:
        a = archs.setdefault(g, load_arch(g))
        s = models.setdefault(m, load_workload(m).model)
        out.append(decode_step(a, s, c, b).step_s)  # type: ignore[arg-type]
    return out


def bench_step() -> dict[str, float]:
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.sim.gpu_mem.decode_step import decode_step
    from coaccel.spine.workload import load_workload

    a = load_arch("h200")
    m = load_workload("llama-3.1-8b").model
    t0 = time.perf_counter()
    first = decode_step(a, m, 16384, 16)
    t_first = time.perf_counter() - t0
    times = []
    for i in range(1, 11):
        t0 = time.perf_counter()
        decode_step(a, m, 16384 + 128 * i, 16)
        times.append(time.perf_counter() - t0)
    scaling = {}
    for b in (1, 4, 16, 64):
        t0 = time.perf_counter()
        decode_step(a, m, 16384 + 7, b)
        scaling[b] = time.perf_counter() - t0
    return {
        "tpot_ms": first.step_s * 1e3,
        "first_eval_ms": t_first * 1e3,
        "eval_ms_mean": statistics.mean(times) * 1e3,
        "eval_ms_std": statistics.stdev(times) * 1e3,
        **{f"eval_ms_batch_{b}": v * 1e3 for b, v in scaling.items()},
    }


def bench_sweep(n: int, workers: int = 2) -> dict[str, float]:
    pts = _points(n)
    chunks = [pts[i::workers] for i in range(workers)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        res = [x for part in ex.map(_work, chunks) for x in part]
    wall = time.perf_counter() - t0
    assert len(res) == n
    return {"points": n, "workers": workers, "wall_s": wall, "points_per_s": n / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="200 sweep points instead of 1,000")
    args = ap.parse_args()
    step = bench_step()
    sweep = bench_sweep(200 if args.quick else 1000)
    if args.json:
        print(json.dumps({"step": step, "sweep": sweep}, indent=1))
        return
    print("one decode step, Llama-3.1-8B, batch 16, 16K contexts, H200, graph mode")
    print(f"  TPOT {step['tpot_ms']:.2f} ms (simulated)")
    mean, std = step["eval_ms_mean"], step["eval_ms_std"]
    print(f"  first evaluation {step['first_eval_ms']:.1f} ms; later ones {mean:.1f} +- "
          f"{std:.1f} ms (target < 50 ms)")  # fmt: skip
    print("  scaling against batch: " + ", ".join(
        f"B={k.rsplit('_', 1)[1]}: {v:.1f} ms" for k, v in step.items()
        if k.startswith("eval_ms_batch_")))  # fmt: skip
    print(f"sweep of {sweep['points']} decode steps (GPU x model x batch x context) on "
          f"{sweep['workers']} processes: {sweep['wall_s']:.1f} s, "
          f"{sweep['points_per_s']:.0f} points/s (target: 1,000 points < 120 s)")  # fmt: skip


if __name__ == "__main__":
    main()
