"""``coaccel validate hbq`` / ``deltallm`` / ``gpu``: published targets beside our values.

``hbq`` runs :func:`coaccel.validate.hbq.validate_hbq` (PE model rows, headline claims, system
energy per 2048-token prefill and iso-area speedups from the HBQ ASIC simulator), prints the
table and writes ``hbq_validation.csv`` and ``hbq_validation.md`` (:mod:`coaccel.report.hbq`)
into ``--out``. ``deltallm`` runs :func:`coaccel.validate.deltallm.validate_deltallm` (TeLLMe-v2
calibration, sparsity, speedups and resources of the KV260 vector processor) and writes
``deltallm_validation.csv`` / ``.md``. ``gpu`` runs :func:`coaccel.validate.gpu.validate_gpu`
(the GPU simulator against measured bandwidth, latency, link and decode-time anchors).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ._args import add_output_flags, int_in, vars_of

DEFAULT_OUT = Path("reports") / "validate"

EPILOG = """\
examples:
  coaccel validate hbq                        all targets (energy: cycle mode, speedups: analytical)
  coaccel validate hbq --speedup-mode cycle   speedups from the cycle-approximate mode too (slower)
  coaccel validate hbq --no-system            PE and claim rows only (no simulator runs)
  coaccel validate hbq --out /tmp/v
  coaccel validate deltallm                   DeltaLLM on the KV260 vs TeLLMe-v2, T = 64 ... 1024
  coaccel validate deltallm --tokens 64 128 --layers 1   a quick subset
"""


GPU_EPILOG = """\
examples:
  coaccel validate gpu                        every anchor, 24 points per curve
  coaccel validate gpu --points 0 --out /tmp/v
"""


def register(subparsers: Any) -> None:
    """Add the ``validate`` sub-command (``validate hbq``, ``deltallm``, ``gpu``).

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "validate",
        help="compare the models with published numbers (coaccel validate hbq | deltallm | gpu)",
        description="Validation of coaccel's models against the published numbers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(title="targets", metavar="<paper>")
    h = sub.add_parser(
        "hbq",
        help="HBQ (MICRO 2026): PE area/energy, claims, system energy, iso-area speedups",
        description=(
            "Every HBQ target (docs/references.md): per-MAC area/energy of the published rows "
            "(±5 %), HBQ-E vs HBQ-A (-17 %), area and energy efficiency vs weight-only (2.3x, "
            "4.6x), system energy per 2048-token prefill for 5 models x 5 architectures "
            "(±10 %, DRAM traffic from the simulated traces) and iso-area speedups at 1K/4K/16K."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    h.add_argument(
        "--mode",
        choices=("analytical", "cycle"),
        default="cycle",
        help="simulator mode of the system-energy rows (default cycle)",
    )
    h.add_argument(
        "--speedup-mode",
        choices=("analytical", "cycle"),
        default="analytical",
        help="simulator mode of the speedup rows, 75 runs up to 16K tokens (default analytical)",
    )
    h.add_argument("--no-system", action="store_true", help="skip the simulated rows")
    h.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: ./{DEFAULT_OUT.as_posix()})",
    )
    add_output_flags(h, "print the targets as JSON (one object per row, the CSV's columns)")
    h.set_defaults(func=run_hbq, command="validate hbq")
    d = sub.add_parser(
        "deltallm",
        help="DeltaLLM on the KV260: sparsity, speedup over TeLLMe-v2, resources",
        description=(
            "Every DeltaLLM target: Delta-Key sparsity (up to 60 %), structured score sparsity "
            "(63 %), the 1.62x prefill speedup over TeLLMe-v2 (attention-only and end-to-end) "
            "and fewer DSPs/BRAMs, for BitNet-b1.58-2B-4T and Llama-3.2-1B at T = 64 ... 1024, "
            "plus the TeLLMe-v2 baseline's calibration to its published TTFT."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--mode", choices=("analytical", "cycle"), default="analytical",
                   help="simulator mode of the DeltaLLM runs (default analytical)")  # fmt: skip
    d.add_argument("--tokens", type=int, nargs="+", default=None, metavar="T",
                   help="prefill lengths (default 64 128 256 512 1024)")  # fmt: skip
    d.add_argument("--layers", type=int, default=2, metavar="N",
                   help="layers per model through the reference, 0 = all (default 2)")  # fmt: skip
    d.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                   help=f"output folder (default: ./{DEFAULT_OUT.as_posix()})")  # fmt: skip
    add_output_flags(d, "print the targets as JSON (one object per row, the CSV's columns)")
    d.set_defaults(func=run_deltallm, command="validate deltallm")
    g = sub.add_parser(
        "gpu",
        help="GPU memory hierarchy: bandwidth plateaus and curves, L2 knees, latencies, PCIe "
        "copy shape, W1 decode time vs context",
        description=(
            "The GPU simulator against measured anchors (docs/gpu_decode.md): H200 and "
            "A100-80GB streaming-bandwidth plateaus and curves against working-set size, L2 "
            "plateaus and capacity knees, A100 pointer-chase latencies per level, the PCIe "
            "copy curve's shape and W1 FlashDecoding time against context; MAPE and Pearson "
            "correlation per series, fitted vs predicted, a band on every prediction and the "
            "analytical vs cycle tier error."
        ),
        epilog=GPU_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument(
        "--mode",
        choices=("auto", "analytical", "cycle"),
        default="auto",
        help="simulator tier of the anchors (default auto: cycle for the pointer chase, "
        "analytical otherwise)",
    )
    g.add_argument("--no-tiers", action="store_true", help="skip the cycle-tier comparison")
    g.add_argument(
        "--no-ffd",
        action="store_true",
        help="skip the W2 FFD rows (speedup over W1 against keep ratio at 256K, output error)",
    )
    g.add_argument(
        "--no-offload",
        action="store_true",
        help="skip the W3 NOSA and W4 Specter rows (offload speedups, W3 output error)",
    )
    g.add_argument(
        "--points",
        type=int_in(0),
        default=24,
        metavar="N",
        help="simulate at most N points of each measured curve (default 24; 0: all)",
    )
    g.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder (default: ./{DEFAULT_OUT.as_posix()})",
    )
    add_output_flags(g, "print the anchors as JSON (one object per row, the CSV's columns)")
    g.set_defaults(func=run_gpu, command="validate gpu")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1], command="validate")


def run_hbq(args: argparse.Namespace) -> int:
    """Run the HBQ validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (targets outside their tolerance are reported, not an error).
    """
    from ..report.files import write_manifest
    from ..report.hbq import format_validation_table, validation_rows, write_validation_report
    from ..validate.hbq import validate_hbq
    from ._args import prepare_out_dir

    t0 = time.perf_counter()
    prepare_out_dir(args.out)
    v = validate_hbq(mode=args.mode, speedup_mode=args.speedup_mode, system=not args.no_system)
    paths = write_validation_report(v, args.out)
    write_manifest(args.out, paths, command="coaccel validate hbq", settings=vars_of(args))
    if args.json:
        doc = {"targets": validation_rows(v), "files": [str(p) for p in paths]}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_validation_table(v))
    if not args.quiet:
        print()
        for p in paths:
            print(f"wrote {p}")
        print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


def run_deltallm(args: argparse.Namespace) -> int:
    """Run the DeltaLLM validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (targets outside their tolerance are reported, not an error); 2 for bad arguments.
    """
    from ..report.deltallm_validation import format_deltallm_validation, write_deltallm_validation
    from ..report.files import write_manifest
    from ..report.hbq import validation_rows
    from ..validate.deltallm import TOKENS, validate_deltallm
    from ._args import prepare_out_dir

    tokens = tuple(args.tokens) if args.tokens else TOKENS
    bad = [t for t in tokens if t not in TOKENS]
    if bad or args.layers < 0:
        what = f"--tokens {bad[0]}" if bad else f"--layers {args.layers}"
        valid = " ".join(map(str, TOKENS)) if bad else "an integer >= 0"
        print(f"coaccel validate deltallm: {what}: valid: {valid}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    prepare_out_dir(args.out)
    v = validate_deltallm(mode=args.mode, tokens=tokens, layers_simulated=args.layers)
    paths = write_deltallm_validation(v, args.out)
    write_manifest(args.out, paths, command="coaccel validate deltallm", settings=vars_of(args))
    if args.json:
        doc = {"targets": validation_rows(v), "files": [str(p) for p in paths]}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_deltallm_validation(v))
    if not args.quiet:
        print()
        for p in paths:
            print(f"wrote {p}")
        print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


def run_gpu(args: argparse.Namespace) -> int:
    """Run the GPU validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (anchors outside their band are reported, not an error).
    """
    from ..report.files import write_manifest
    from ..report.gpu import format_gpu_validation, gpu_validation_rows, write_gpu_validation_report
    from ..validate.gpu import validate_gpu
    from ._args import prepare_out_dir

    t0 = time.perf_counter()
    prepare_out_dir(args.out)
    v = validate_gpu(
        mode=args.mode,
        tiers=not args.no_tiers,
        points=args.points,
        ffd=not args.no_ffd,
        offload=not args.no_offload,
    )
    paths = write_gpu_validation_report(v, args.out)
    write_manifest(args.out, paths, command="coaccel validate gpu", settings=vars_of(args))
    if args.json:
        doc = {
            "anchors": gpu_validation_rows(v),
            "series": [
                {"series": s.name, "points": s.n, "mape_pct": s.mape_pct,
                 "pearson_r": s.pearson_r, "fit": s.fit, "source": s.source}
                for s in v.series
            ],
            "tiers": [
                {"workload": t.workload, "analytical_s": t.analytical_s, "cycle_s": t.cycle_s,
                 "error_pct": t.error_pct}
                for t in v.tiers
            ],
            "notes": list(v.notes),
            "files": [str(p) for p in paths],
        }  # fmt: skip
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_gpu_validation(v))
    if not args.quiet:
        print()
        for p in paths:
            print(f"wrote {p}")
        print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0
