"""The GPU target's stage of ``coaccel demo``: FlashDecoding, W1 time, W3 offload, and FFD's keep
decisions on a real decoder's decode steps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from coaccel.report.files import atomic_open

__all__ = ["stage_gpu"]


def stage_gpu(out: Path, rng: np.random.Generator) -> None:
    """The FlashDecoding split-K reference (bf16, checked against float64), the trace of a
    128K-token layer and its simulated time on an H200 and an A100; W3 NOSA offload."""
    import csv

    from coaccel.models.gpu import (
        DecodeShape,
        bf16_bits_to_f32,
        dense_attention_f64,
        flash_decode,
        flash_decode_trace,
    )
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.simulation import simulate

    h200, a100 = load_arch("h200"), load_arch("a100_80g")
    shape = DecodeShape(batch=2, context=4096)
    r = flash_decode(shape, seed=int(rng.integers(2**31)), n_sms=h200.sm.count)
    ref = dense_attention_f64(r.inputs, shape)
    err = np.abs(bf16_bits_to_f32(r.out).astype(np.float64) - ref)
    rel = float(err.max() / np.abs(ref).max())
    print(
        f"  split-K FlashDecoding, B=2 T=4096 (Llama-3.1-8B GQA 32/8x128, bf16): "
        f"{r.plan.num_splits} splits of {r.plan.split_tokens} tokens for {h200.sm.count} SMs; "
        f"bf16 output vs float64: max |err| {err.max():.2e} = {rel:.1e} x max |O|"
    )
    t0 = time.perf_counter()
    big = flash_decode_trace(DecodeShape(batch=1, context=131072), n_sms=h200.sm.count)
    dt = time.perf_counter() - t0
    n = len(big.memory) + len(big.compute) + len(big.events)
    print(
        f"  trace of one layer at T=128K: {n} records, "
        f"{big.total_bytes(space='HBM', rw='r') / 2**20:.0f} MiB read, built in {dt * 1e3:.0f} ms"
    )
    (out / "gpu").mkdir(exist_ok=True)
    r.trace.save(out / "gpu" / "w1_b2_t4096.npz")
    print(f"  {'GPU':<9} {'T':>7} {'time us':>9} {'eff. TB/s':>9}")
    path = out / "gpu" / "w1_context.csv"
    with atomic_open(path) as f:
        w = csv.writer(f)
        w.writerow(["gpu", "context_tokens", "seconds", "kv_bytes", "effective_bw_bytes_per_s"])
        for arch in (h200, a100):
            for t in (4096, 32768, 131072):
                tr = flash_decode_trace(DecodeShape(batch=1, context=t), n_sms=arch.sm.count)
                sec = simulate(arch, tr, mode="analytical").seconds
                kv = DecodeShape(batch=1, context=t).kv_bytes()
                w.writerow([arch.name, t, f"{sec:.6g}", kv, f"{kv / sec:.6g}"])
                print(f"  {arch.name:<9} {t:>7} {sec * 1e6:>9.1f} {kv / sec / 1e12:>9.2f}")
    print(f"  wrote {path}")
    _gpu_offload(out, rng, h200)
    _gpu_real_ffd()


def _gpu_offload(out: Path, rng: np.random.Generator, h200: Any) -> None:
    """W3 NOSA at T=32K: the KV cache in host memory, 64 blocks of 64 tokens on the GPU,
    simulated behind PCIe (H200) and NVLink-C2C (GH200), against W1 with the cache in HBM."""
    import csv

    from coaccel.models.gpu import DecodeShape, flash_decode_trace
    from coaccel.models.gpu.nosa import NosaConfig, nosa_decode
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.simulation import simulate

    gh200 = load_arch("gh200")
    shape = DecodeShape(batch=1, context=32768)
    seed = int(rng.integers(2**31))
    runs = {
        link: nosa_decode(
            shape, config=NosaConfig(fetch=link), steps=8, seed=seed, n_sms=h200.sm.count,
            error=link == "zero_copy",
        )
        for link in ("zero_copy", "dma")
    }  # fmt: skip
    r = runs["zero_copy"]
    print(
        f"  W3 NOSA offload, B=1 T=32K (8-step run): keep {r.keep_ratio:.3f}, "
        f"{r.misses_per_step:.2f} block fetches per step and KV head, "
        f"output vs dense float64: rel. err {r.rel_err:.3f}"
    )
    print(f"  {'GPU':<9} {'host link':<11} {'W1 in HBM us':>12} {'zero-copy us':>12} {'DMA us':>8}")
    path = out / "gpu" / "w3_offload_t32768.csv"
    with atomic_open(path) as f:
        w = csv.writer(f)
        w.writerow(["gpu", "host_link", "context_tokens", "path", "seconds"])
        for arch in (h200, gh200):
            w1 = flash_decode_trace(shape, n_sms=arch.sm.count)
            sec = {"hbm_w1": simulate(arch, w1, mode="analytical").seconds}
            for link, run in runs.items():
                sec[link] = simulate(arch, run.trace, mode="analytical").seconds
            for k, v in sec.items():
                w.writerow([arch.name, arch.host_link.type, shape.context, k, f"{v:.6g}"])
            print(
                f"  {arch.name:<9} {arch.host_link.type:<11} {sec['hbm_w1'] * 1e6:>12.1f} "
                f"{sec['zero_copy'] * 1e6:>12.1f} {sec['dma'] * 1e6:>8.1f}"
            )
    print(f"  wrote {path}")


def _gpu_real_ffd() -> None:
    """One real-input row: FFD's keep ratio and selection error on SmolLM2-135M's decode steps
    at 512 tokens (one short window of Python documentation prose, a few seconds), or the
    install command when the model package is missing."""
    from coaccel.spine.errors import MissingDependencyError
    from coaccel.targets.gpu.ffd_real import ffd_real_stats
    from coaccel.targets.gpu.real_inputs import collect_real_decode, spread

    t0 = time.perf_counter()
    try:
        sample = collect_real_decode(contexts=(512,), passages=1, steps=4)
    except MissingDependencyError as e:
        print(f"  W2 FFD on a real decoder: skipped ({e})")
        return
    st = ffd_real_stats(sample, ppl_steps=0, kernel_error=False)
    keep, sd, n = spread(st.keep_per_step(0))
    err = float(np.median(st.sel_error[:, 0]))
    print(
        f"  W2 FFD keep decisions on {sample.model.name} decode steps at T=512 (real data, "
        f"delta=5): keep ratio {keep:.3f} ± {sd:.3f} (N={n} steps x {len(st.layers)} layers), "
        f"median selection error {err:.3g}; {time.perf_counter() - t0:.1f} s "
        "(coaccel validate gpu runs 512 ... 4096 tokens)"
    )
