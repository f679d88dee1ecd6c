"""``coaccel validate hbq`` / ``coaccel validate deltallm``: published targets beside our values.

``hbq`` runs :func:`coaccel.validate.hbq.validate_hbq` (PE model rows, headline claims, system
energy per 2048-token prefill and iso-area speedups from the HBQ ASIC simulator), prints the
table and writes ``hbq_validation.csv`` and ``hbq_validation.md`` (:mod:`coaccel.report.hbq`)
into ``--out``. ``deltallm`` runs :func:`coaccel.validate.deltallm.validate_deltallm` (TeLLMe-v2
calibration, sparsity, speedups and resources of the KV260 vector processor) and writes
``deltallm_validation.csv`` / ``.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ._args import add_output_flags, vars_of

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


def register(subparsers: Any) -> None:
    """Add the ``validate`` sub-command (``validate hbq``).

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "validate",
        help="compare the models with published numbers (coaccel validate hbq | deltallm)",
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
