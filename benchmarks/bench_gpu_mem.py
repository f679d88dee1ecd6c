"""Speed of the GPU memory-hierarchy simulator.

Usage::

    .venv/bin/python benchmarks/bench_gpu_mem.py            # table
    .venv/bin/python benchmarks/bench_gpu_mem.py --json     # machine-readable
    .venv/bin/python benchmarks/bench_gpu_mem.py --quick    # smaller sizes (seconds)

What it measures (best of ``--repeat`` runs, one core; numba compiled before timing):

* **replay throughput**: sector requests per second of the numba L2 replay
  (:func:`coaccel.sim.common.cache.replay`) on the K/V stream of split-K decode attention
  (256-B rows strided by 2 KiB, every CTA's tile in turn) through the H200's L2; target >= 5 M/s;
* **one W1 decode layer at 128K context** (batch 1, FlashDecoding split-K traffic of
  :func:`coaccel.models.gpu.microbench.splitk_decode_traffic`, 512 MiB of K/V): trace build,
  cycle-mode simulation, and the two together; target < 5 s;
* **analytical decode-step evaluations per second**
  (:func:`coaccel.sim.gpu_mem.analytical.step_seconds` on the kernels' traffic read once);
  target >= 10,000;
* **scaling against context**: cycle-mode wall time and sector requests per second for
  8K .. 128K tokens (linear in the sectors replayed);
* **one W2 (FFD) decode layer at 128K context** (batch 1, seeded peaked inputs): the decode
  step of the reference (:func:`coaccel.models.gpu.ffd_decode` on a prepared key cache:
  threshold, 2-bit scan, keep decisions, sparse split kernel on the kept blocks, reduction,
  trace) plus its cycle-mode simulation; target < 5 s. Building the inputs and the key cache
  (prefill-time work, not part of a decode step) is timed apart; with the scaling against
  context (8K .. 128K).
* **W3 NOSA, one decode step of one layer at 128K** (batch 1): the reference's seeded decode
  run (:data:`W3_STEPS` steps for the selection dynamics, the attention and its dense error)
  plus the cycle-mode simulation of its last step, target < 5 s, with the scaling against
  context;
* **W4 Specter**: the reference (routing generator, planner, slot cache) for
  :data:`W4_TOKENS` output tokens of DeepSeek-V2-Lite plus the analytical simulation of its
  trace, and the same for the baseline without lookahead.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

from coaccel.models.gpu import DecodeShape, ffd_decode, make_peaked_inputs, quantize_keys
from coaccel.models.gpu.microbench import splitk_decode_traffic
from coaccel.models.gpu.nosa import nosa_decode
from coaccel.models.gpu.specter import specter_baseline, specter_decode
from coaccel.sim.common.cache import CacheState, replay
from coaccel.sim.gpu_mem import kernel_traffic, load_arch, simulate
from coaccel.sim.gpu_mem.analytical import step_seconds
from coaccel.sim.gpu_mem.traffic import cache_geometry

TARGET_REPLAY_PER_S = 5e6
TARGET_W1_S = 5.0
TARGET_EVALS_PER_S = 1e4
TARGET_W2_S = 5.0
TARGET_W3_S = 5.0
W3_STEPS = 8
W4_TOKENS = 16


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_replay(tokens: int, repeat: int) -> dict:
    arch = load_arch("h200")
    g = cache_geometry(arch)
    kv_heads, row = 8, 256
    tiles = tokens // 128
    t, h = np.meshgrid(np.arange(tiles), np.arange(kv_heads), indexing="ij")
    starts = ((t * 128) * kv_heads + h).ravel().astype(np.int64) * row
    req = np.arange(starts.size) % arch.sm.count
    n_sectors = starts.size * 128 * (row // 32)

    def run() -> None:
        replay(g, CacheState.empty(g), starts, row, kv_heads * row, 128, 0, req)

    run()  # compile
    s = _best(run, repeat)
    return {"sector_requests": n_sectors, "seconds": s, "sector_requests_per_s": n_sectors / s}


def bench_w1(tokens: int, repeat: int) -> dict:
    arch = load_arch("h200")
    simulate(arch, splitk_decode_traffic(1024), mode="cycle")  # compile
    build = _best(lambda: splitk_decode_traffic(tokens), repeat)
    tr = splitk_decode_traffic(tokens)
    res = {}

    def run() -> None:
        res["r"] = simulate(arch, tr, mode="cycle")

    sim = _best(run, repeat)
    r = res["r"]
    return {
        "context": tokens,
        "trace_build_s": build,
        "simulate_cycle_s": sim,
        "total_s": build + sim,
        "sector_requests": r.l2.sector_requests,
        "sector_requests_per_s": r.l2.sector_requests / sim,
        "simulated_kernel_us": (r.kernels[0].end_s - r.kernels[0].start_s) * 1e6,
    }


def bench_w2(tokens: int, repeat: int) -> dict:
    arch = load_arch("h200")
    shape = DecodeShape(batch=1, context=tokens)
    t0 = time.perf_counter()
    inputs = make_peaked_inputs(shape, 0)
    cache = quantize_keys(inputs.k, 128)
    setup = time.perf_counter() - t0
    res: dict = {}

    def ref() -> None:
        res["r"] = ffd_decode(shape, inputs=inputs, cache=cache, dense=False)

    ref_s = _best(ref, repeat)
    tr = res["r"].trace
    simulate(arch, tr, mode="cycle")  # compile

    def run() -> None:
        res["s"] = simulate(arch, tr, mode="cycle")

    sim = _best(run, repeat)
    r = res["s"]
    return {
        "context": tokens,
        "setup_inputs_and_cache_s": setup,
        "reference_step_s": ref_s,
        "simulate_cycle_s": sim,
        "total_s": ref_s + sim,
        "keep_ratio": res["r"].keep_ratio,
        "sector_requests": r.l2.sector_requests,
        "simulated_step_us": r.seconds * 1e6,
    }


def bench_analytical(repeat: int, n: int = 5000) -> dict:
    out = {}
    for name in ("h200", "a100_80g"):
        arch = load_arch(name)
        ks = kernel_traffic(splitk_decode_traffic(32768), arch, fidelity="analytical")
        s = _best(lambda arch=arch, ks=ks: [step_seconds(arch, ks) for _ in range(n)], repeat)
        out[name] = n / s
    return {"decode_step_evaluations_per_s": out}


def bench_w3(tokens: int, repeat: int) -> dict:
    """W3 NOSA: reference decode run plus the cycle-mode simulation of its last step."""
    arch = load_arch("h200")
    shape = DecodeShape(1, tokens)
    simulate(arch, nosa_decode(DecodeShape(1, 4096), steps=2).trace, mode="cycle")  # compile
    res = {}

    def ref() -> None:
        res["r"] = nosa_decode(shape, steps=W3_STEPS)

    ref_s = _best(ref, repeat)
    no_err_s = _best(lambda: nosa_decode(shape, steps=W3_STEPS, error=False), repeat)

    def sim() -> None:
        res["s"] = simulate(arch, res["r"].trace, mode="cycle")

    sim_s = _best(sim, repeat)
    r, sr = res["r"], res["s"]
    return {
        "context": tokens,
        "reference_s": ref_s,
        "reference_without_error_s": no_err_s,
        "simulate_cycle_s": sim_s,
        "total_s": ref_s + sim_s,
        "misses_per_step": r.misses_per_step,
        "attn_out_rel_err": r.rel_err,
        "simulated_step_us": sr.seconds * 1e6,
    }


def bench_w4(repeat: int) -> dict:
    """W4 Specter and its baseline: reference plus analytical simulation."""
    arch = load_arch("a100_80g")
    out = {}
    for name, run in (("specter", specter_decode), ("baseline", specter_baseline)):
        res = {}

        def ref(run=run, res=res) -> None:
            res["r"] = run(tokens=W4_TOKENS)

        ref_s = _best(ref, repeat)

        def sim(res=res) -> None:
            res["s"] = simulate(arch, res["r"].trace, mode="analytical")

        sim_s = _best(sim, repeat)
        r, sr = res["r"], res["s"]
        out[name] = {
            "tokens": r.tokens,
            "reference_s": ref_s,
            "simulate_analytical_s": sim_s,
            "kernels": len(sr.kernels),
            "tpot_ms": sr.seconds / r.tokens * 1e3,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    a = ap.parse_args(argv)
    big = 32768 if a.quick else 131072
    out = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
        "replay": bench_replay(big, a.repeat),
        "w1": bench_w1(big, a.repeat),
        "analytical": bench_analytical(a.repeat),
        "scaling": [bench_w1(t, 1) for t in (8192, 32768, big)],
        "w2_scaling": [bench_w2(t, 1 if t < big else a.repeat) for t in (8192, 32768, big)],
        "w3": [bench_w3(t, 1) for t in (8192, 32768, big)],
        "w4": bench_w4(1),
        "targets": {
            "replay_sector_requests_per_s": TARGET_REPLAY_PER_S,
            "w1_128k_total_s": TARGET_W1_S,
            "analytical_evaluations_per_s": TARGET_EVALS_PER_S,
            "w2_128k_total_s": TARGET_W2_S,
            "w3_128k_total_s": TARGET_W3_S,
        },
    }
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    rp, w1 = out["replay"], out["w1"]
    print(f"L2 replay: {rp['sector_requests_per_s'] / 1e6:.1f} M sector requests/s "
          f"({rp['sector_requests']:,} in {rp['seconds']:.2f} s; target >= 5 M/s)")  # fmt: skip
    print(f"W1 layer, {w1['context']} tokens, batch 1: trace {w1['trace_build_s']:.2f} s + "
          f"cycle simulation {w1['simulate_cycle_s']:.2f} s = {w1['total_s']:.2f} s "
          f"(target < 5 s); simulated kernel {w1['simulated_kernel_us']:.1f} us")  # fmt: skip
    for k, v in out["analytical"]["decode_step_evaluations_per_s"].items():
        print(f"analytical decode-step evaluations on {k}: {v:,.0f}/s (target >= 10,000)")
    print("scaling with context (cycle mode):")
    for s in out["scaling"]:
        print(f"  {s['context']:>7} tokens: {s['simulate_cycle_s']:.2f} s, "
              f"{s['sector_requests_per_s'] / 1e6:.1f} M sectors/s, "
              f"simulated {s['simulated_kernel_us']:.1f} us")  # fmt: skip
    print("W2 (FFD) layer, batch 1: reference decode step + cycle simulation (target < 5 s at "
          "128K); inputs and key cache built apart:")  # fmt: skip
    for s in out["w2_scaling"]:
        print(f"  {s['context']:>7} tokens: reference {s['reference_step_s']:.2f} s + simulation "
              f"{s['simulate_cycle_s']:.2f} s = {s['total_s']:.2f} s (keep "
              f"{s['keep_ratio']:.3f}, simulated {s['simulated_step_us']:.1f} us; setup "
              f"{s['setup_inputs_and_cache_s']:.1f} s)")  # fmt: skip
    print(f"W3 NOSA, one layer, batch 1 ({W3_STEPS}-step decode run + cycle simulation of the "
          "last step; target < 5 s at 128K):")  # fmt: skip
    for s in out["w3"]:
        print(f"  {s['context']:>7} tokens: reference {s['reference_s']:.2f} s + simulation "
              f"{s['simulate_cycle_s']:.2f} s = {s['total_s']:.2f} s (reference without the "
              f"dense error {s['reference_without_error_s']:.2f} s); simulated step "
              f"{s['simulated_step_us']:.1f} us, {s['misses_per_step']:.2f} misses/step, "
              f"error {s['attn_out_rel_err']:.3g}")  # fmt: skip
    for k, v in out["w4"].items():
        print(f"W4 {k}, {v['tokens']} tokens: reference {v['reference_s']:.2f} s + analytical "
              f"simulation {v['simulate_analytical_s']:.2f} s ({v['kernels']} kernels); "
              f"TPOT {v['tpot_ms']:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
