"""The HBQ ASIC's command-line pieces: ``coaccel validate hbq``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coaccel.commands.args import Outputs, add_out, add_output_flags

DEFAULT_OUT = Path("reports") / "validate"

EPILOG = """\
examples:
  coaccel validate hbq                        all targets (energy: cycle mode, speedups: analytical)
  coaccel validate hbq --speedup-mode cycle   speedups from the cycle-approximate mode too (slower)
  coaccel validate hbq --no-system            PE and claim rows only (no simulator runs)
  coaccel validate hbq --out /tmp/v
"""


def register_validate(sub: Any) -> None:
    """Add ``coaccel validate hbq``.

    Args:
        sub: the ``add_subparsers()`` object of ``coaccel validate``.
    """
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
    add_out(h, DEFAULT_OUT)
    add_output_flags(h, "print the targets as JSON (one object per row, the CSV's columns)")
    h.set_defaults(func=run_validate, command="validate hbq")


def run_validate(args: argparse.Namespace) -> int:
    """Run the HBQ validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (targets outside their tolerance are reported, not an error).
    """
    from coaccel.report.validation import validation_rows

    from .report import format_validation_table, write_validation_report
    from .validation import validate_hbq

    run = Outputs(args, "coaccel validate hbq")
    v = validate_hbq(
        mode=args.mode,
        speedup_mode=args.speedup_mode,
        system=not args.no_system,
        progress=run.progress,
    )
    paths = write_validation_report(v, run.out)
    return run.finish(paths, text=format_validation_table(v), doc={"targets": validation_rows(v)})
