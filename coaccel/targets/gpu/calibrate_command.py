"""``coaccel gpu-calibrate CSV --gpu NAME --out DIR``: fit a GPU config to calibration data.

Reads the CSV of ``benchmarks/gpu_calibration.py`` (or a transcription of published
microbenchmarks with the same columns), fits the config's DRAM efficiency and latency, L2
bandwidth, capacity and latencies and host-link parameters
(:func:`coaccel.targets.gpu.fit.fit_gpu`), simulates every row before and after, prints the
fitted values and the error per experiment, and writes ``<gpu>_fitted.yaml`` (loadable with
``--arch DIR/<gpu>_fitted.yaml`` anywhere a GPU is taken), ``gpu_calibration_fit.csv`` (every
row's error) and ``gpu_calibration_fit.md``. Not to be confused with ``coaccel cost
calibrate``, which fits the area/energy model to synthesis results.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coaccel.commands.args import add_out, add_output_flags, int_in

DEFAULT_OUT = Path("reports") / "gpu_calibration"

EPILOG = """\
examples:
  coaccel gpu-calibrate arch_configs/gpu/measured/a100_80g_gpu_benches.csv --gpu a100_80g
  coaccel gpu-calibrate OUT/gpu_calibration.csv --gpu h200 --out fitted/ --compare 0
  coaccel sim --arch fitted/h200_fitted.yaml --workload splitk:context=131072
"""


def register(subparsers: Any) -> None:
    """Add the ``gpu-calibrate`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "gpu-calibrate",
        help="fit a GPU config (efficiency, latency, link) to calibration measurements",
        description=(
            "Fit a GPU architecture config to the CSV of benchmarks/gpu_calibration.py: DRAM "
            "efficiency and latency, L2 bandwidth, effective capacity and latencies, host-link "
            "fixed cost and efficiency; report the simulator's error before and after and "
            "write the fitted config."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("csv", type=Path, help="calibration CSV (benchmarks/gpu_calibration.py)")
    p.add_argument(
        "--gpu", required=True, help="config to start from: a shipped GPU name or a YAML path"
    )
    p.add_argument(
        "--mode",
        choices=("auto", "analytical", "cycle"),
        default="auto",
        help="simulator tier of the before/after comparison (default auto: cycle for the "
        "pointer chase, whose warm-up only the cycle tier remembers; analytical otherwise)",
    )
    p.add_argument(
        "--compare",
        type=int_in(0),
        default=16,
        metavar="N",
        help="simulate at most N rows per experiment, evenly spread (default 16; 0: all)",
    )
    add_out(p, DEFAULT_OUT)
    add_output_flags(p, "print the fit as JSON (parameters, MAPE per experiment, files)")
    p.set_defaults(func=run, command="gpu-calibrate")


def run(args: argparse.Namespace) -> int:
    """Fit, print and write.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    from coaccel.commands.args import Outputs, in_file
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.targets.gpu.fit import fit_gpu, read_calibration_csv
    from coaccel.targets.gpu.validation_report import format_calibration, write_calibration_report

    in_file(Path(args.csv), "CSV")
    run_ = Outputs(args, "coaccel gpu-calibrate")
    rows = read_calibration_csv(args.csv)
    gpu = str(args.gpu)
    arch = load_arch(gpu)
    run_.progress(f"fitting {arch.name} to {len(rows)} measured rows ({args.mode} mode)")
    fit = fit_gpu(arch, rows, mode=args.mode, compare_per_experiment=args.compare)
    paths = write_calibration_report(fit, run_.out, args.csv.name)
    doc = {
        "gpu": arch.name,
        "params": [
            {"key": p.key, "before": p.before, "after": p.after, "unit": p.unit,
             "rows": p.rows, "how": p.how}
            for p in fit.params
        ],
        "groups": [
            {"experiment": g.experiment, "rows": g.n, "unit": g.unit,
             "mape_before_pct": g.mape_before_pct, "mape_after_pct": g.mape_after_pct}
            for g in fit.groups
        ],
        "notes": list(fit.notes),
    }  # fmt: skip
    return run_.finish(paths, text=format_calibration(fit), doc=doc)
