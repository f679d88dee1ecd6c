"""``coaccel gpu-calibrate CSV --gpu NAME --out DIR``: fit a GPU config to calibration data.

Reads the CSV of ``benchmarks/gpu_calibration.py`` (or a transcription of published
microbenchmarks with the same columns), fits the config's DRAM efficiency and latency, L2
bandwidth, capacity and latencies and host-link parameters
(:func:`coaccel.validate.gpu_fit.fit_gpu`), simulates every row before and after, prints the
fitted values and the error per experiment, and writes ``<gpu>_fitted.yaml`` (loadable with
``--arch DIR/<gpu>_fitted.yaml`` anywhere a GPU is taken), ``gpu_calibration_fit.csv`` (every
row's error) and ``gpu_calibration_fit.md``. Not to be confused with ``coaccel cost
calibrate``, which fits the area/energy model to synthesis results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..spine.errors import CoaccelError
from ._args import add_output_flags, int_in, vars_of

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
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: ./{DEFAULT_OUT.as_posix()})",
    )
    add_output_flags(p, "print the fit as JSON (parameters, MAPE per experiment, files)")
    p.set_defaults(func=run, command="gpu-calibrate")


def run(args: argparse.Namespace) -> int:
    """Fit, print and write.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    from ..report.files import write_manifest
    from ..report.gpu import format_calibration, write_calibration_report
    from ..sim.gpu_mem import load_arch
    from ..validate.gpu_fit import fit_gpu, read_calibration_csv
    from ._args import prepare_out_dir

    t0 = time.perf_counter()
    prepare_out_dir(args.out)
    rows = read_calibration_csv(args.csv)
    gpu = str(args.gpu)
    arch = load_arch(gpu)
    if arch.kind != "gpu":  # pragma: no cover - load_arch checks the schema
        raise CoaccelError(f"--gpu {gpu!r} is not a GPU config")
    fit = fit_gpu(arch, rows, mode=args.mode, compare_per_experiment=args.compare)
    paths = write_calibration_report(fit, args.out, args.csv.name)
    write_manifest(args.out, paths, command="coaccel gpu-calibrate", settings=vars_of(args))
    if args.json:
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
            "files": [str(p) for p in paths],
        }  # fmt: skip
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_calibration(fit))
    if not args.quiet:
        print()
        for p in paths:
            print(f"wrote {p}")
        print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0
