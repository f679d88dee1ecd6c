"""Speed of the DeltaLLM path: bit-exact events of one layer, the FPGA cycle model, trace volume.

Usage::

    .venv/bin/python benchmarks/bench_deltallm.py            # table
    .venv/bin/python benchmarks/bench_deltallm.py --json
    .venv/bin/python benchmarks/bench_deltallm.py --tokens 256 512 1024 --full-reference

What it measures, for one BitNet-b1.58-2B-4T layer (20 query heads, 5 KV heads, d = 128) on
the seeded synthetic keys, at each prompt length T:

* ``events_s``: the fixed-point event path the simulator runs per layer
  (:func:`coaccel.models.deltallm.column_events`: Delta-Key encoding, hybrid scores, VSSOS
  running maxima and skip decisions; equal to the reference's events, tested);
* ``cycle_s``: the cycle model on those events (numba block cycles);
* ``fast_reference_s``: :func:`coaccel.models.deltallm.attention_fixed_fast`, the whole
  fixed-point prefill with its int16 outputs in numba (equal to the numpy reference, tested);
* ``full_reference_s`` (with ``--full-reference``): :func:`coaccel.models.deltallm.attention`,
  the whole fixed-point reference including the score x value outputs;
* ``events_bytes`` / ``trace_records_bytes``: the compact column events of one layer and the
  same as trace-contract sparsity records (45 B each), and both scaled to 30 layers.

The stated target: one layer at T = 1024, fixed-point reference + simulator, under 10 s on one
core (``fast_reference_plus_sim_s``).
Timings on a shared machine are noisy; rerun on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from coaccel.models import deltallm as dl
from coaccel.sim.deltallm_fpga import blocks_cycles, layer_qk, load_arch
from coaccel.spine.trace import SPARSITY_DTYPE
from coaccel.spine.workload import load_workload

TARGET_S = 10.0
MODEL = "bitnet-b1.58-2b-4t"


def _one(tokens: int, full: bool) -> dict:
    arch = load_arch("kv260")
    model = load_workload(MODEL).model
    a = arch.algorithm
    q, sq, k, sk = layer_qk(model, tokens, 0, arch.keys)
    t0 = time.perf_counter()
    ce = dl.column_events(q, k, theta=a.theta, window=a.window_tokens, tau=a.tau_log2,
                          q_scale=sq, k_scale=sk, query_block=arch.datapath.lanes // 4)  # fmt: skip
    t1 = time.perf_counter()
    cycles = sum(int(blocks_cycles(e.kind, e.nnz, arch, head_dim=e.head_dim).sum())
                 for e in ce.events)  # fmt: skip
    t2 = time.perf_counter()
    v = k.copy()
    t3 = time.perf_counter()
    opts = dict(theta=a.theta, window=a.window_tokens, tau=a.tau_log2, q_scale=sq, k_scale=sk,
                query_block=arch.datapath.lanes // 4)  # fmt: skip
    dl.attention_fixed_fast(q, k, v, **opts)
    fast_s = time.perf_counter() - t3
    ev_bytes = sum(e.kind.nbytes + e.nnz.nbytes for e in ce.events)
    records = sum(int(np.count_nonzero(e.kind)) for e in ce.events)
    row = {
        "tokens": tokens,
        "events_s": t1 - t0,
        "cycle_s": t2 - t1,
        "total_s": t2 - t0,
        "fast_reference_s": fast_s,
        "fast_reference_plus_sim_s": fast_s + (t2 - t1),
        "mac_array_cycles": cycles,
        "delta_sparsity": ce.delta_sparsity,
        "structured_sparsity": ce.structured_sparsity,
        "events_bytes": ev_bytes,
        "events_bytes_30_layers": 30 * ev_bytes,
        "trace_records_bytes": records * SPARSITY_DTYPE.itemsize,
        "trace_records_bytes_30_layers": 30 * records * SPARSITY_DTYPE.itemsize,
    }
    if full:
        t3 = time.perf_counter()
        dl.attention(q, k, v, theta=a.theta, window=a.window_tokens, tau=a.tau_log2,
                     q_scale=sq, k_scale=sk, query_block=arch.datapath.lanes // 4)  # fmt: skip
        row["full_reference_s"] = time.perf_counter() - t3
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[128, 256, 512, 1024])
    p.add_argument("--full-reference", action="store_true",
                   help="also time the whole fixed-point reference (slow)")  # fmt: skip
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    _one(64, False)  # compile the numba kernels outside the timings
    rows = [_one(t, args.full_reference) for t in args.tokens]
    doc = {
        "benchmark": "deltallm",
        "model": MODEL,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },  # fmt: skip
        "target_s_at_1024": TARGET_S,
        "rows": rows,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"one {MODEL} layer, DeltaLLM events + FPGA cycle model (target < {TARGET_S:g} s at "
          "T = 1024)")  # fmt: skip
    head = f"{'T':>6} {'events s':>9} {'cycles s':>9} {'total s':>8} {'rho_K':>6} {'rho_S':>6}"
    head += f" {'fast ref s':>10} {'events MB/30 layers':>20} {'records MB/30 layers':>21}"
    if args.full_reference:
        head += f" {'full ref s':>10}"
    print(head)
    for r in rows:
        line = (f"{r['tokens']:>6} {r['events_s']:>9.2f} {r['cycle_s']:>9.3f} "
                f"{r['total_s']:>8.2f} {r['delta_sparsity']:>6.3f} "
                f"{r['structured_sparsity']:>6.3f} {r['fast_reference_s']:>10.2f} "
                f"{r['events_bytes_30_layers'] / 1e6:>20.1f} "
                f"{r['trace_records_bytes_30_layers'] / 1e6:>21.1f}")  # fmt: skip
        if args.full_reference:
            line += f" {r['full_reference_s']:>10.2f}"
        print(line)
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        e = np.log(b["total_s"] / a["total_s"]) / np.log(b["tokens"] / a["tokens"])
        print(f"scaling: time ~ T^{e:.2f} between T = {a['tokens']} and {b['tokens']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
