"""The HBQ ASIC's stages of ``coaccel demo``: the exact datapath and the simulator's two modes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from coaccel.report.files import write_text

__all__ = ["stage_datapath", "stage_simulators"]


def stage_datapath(out: Path, rng: np.random.Generator) -> None:
    """An HBQ-A GEMM through the exact integer datapath in every partial-sum mode, compared
    with float64; its compute/memory trace saved in the contract format."""
    from coaccel.models.formats import quantize
    from coaccel.models.hbq import gemm_trace, hbq_gemm

    m, n, k = 16, 64, 512
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    qa = quantize(a, "hbq-a", role="activation")
    qw = quantize(w, "hbq-a", role="weight")
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    deq = qa.dequantize(np.float64) @ qw.dequantize(np.float64).T
    print(
        f"  GEMM {m}x{k} @ {k}x{n}, HBQ-A W4A5; error vs float64 inputs, and vs exact "
        "dequantized product"
    )
    for psum in ("fp32", "fp16", "mxint8_running", "mxint8_group"):
        y = np.asarray(hbq_gemm(qa, qw, psum_mode=psum).y, dtype=np.float64)
        rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        rel_q = np.linalg.norm(y - deq) / np.linalg.norm(deq)
        print(f"  psum {psum:<15} rel. error {rel:.4e}  (accumulation only: {rel_q:.3e})")
    trace = gemm_trace(m, n, k, qa.spec, qw.spec, tile_m=16, tile_n=32, tile_k=128)
    path = out / "hbq_gemm_trace.npz"
    trace.save(path)
    print(
        f"  trace: {len(trace.compute)} compute + {len(trace.memory)} memory records, "
        f"{trace.total_macs():,} MACs -> {path}"
    )


def stage_simulators(out: Path, rng: np.random.Generator) -> None:
    """The HBQ ASIC simulator on a 1K-token prefill, cycle-approximate and analytical."""
    from coaccel.simulation import simulate

    wl = "llama-3.2-3b:prefill_1k"
    print("  workload llama-3.2-3b:prefill_1k (1024-token prefill); DRAM bytes from the traces")
    print(
        f"  {'arch':<16} {'cycles':>14} {'ms':>9} {'util':>6} {'DRAM GB':>8} {'analytical err':>14}"
    )
    rows = []
    for name in ("hbq_a_28nm", "hbq_e_28nm", "nvfp4_28nm", "mxfp4_28nm", "amove_28nm"):
        cyc = simulate(name, wl, mode="cycle")
        ana = simulate(name, wl, mode="analytical")
        err = (ana.cycles - cyc.cycles) / cyc.cycles
        rows.append(cyc.to_dict())
        print(
            f"  {name:<16} {cyc.cycles:>14,} {cyc.seconds * 1e3:>9.2f} "
            f"{cyc.utilisation:>6.1%} {cyc.dram.total_bytes / 1e9:>8.2f} {err:>+14.3%}"
        )
    path = out / "hbq_sim_stats.json"
    write_text(path, json.dumps(rows, indent=1, default=str))
    print(f"  stats -> {path}")
