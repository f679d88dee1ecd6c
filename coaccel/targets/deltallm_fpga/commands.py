"""DeltaLLM's command-line pieces: ``coaccel validate deltallm``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coaccel.commands.args import Outputs, add_out, add_output_flags, int_in

DEFAULT_OUT = Path("reports") / "validate"

EPILOG = """\
examples:
  coaccel validate deltallm                   DeltaLLM on the KV260 vs TeLLMe-v2, T = 64 ... 1024
  coaccel validate deltallm --tokens 64 128 --layers 1   a quick subset
"""


def register_validate(sub: Any) -> None:
    """Add ``coaccel validate deltallm``.

    Args:
        sub: the ``add_subparsers()`` object of ``coaccel validate``.
    """
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
    d.add_argument("--layers", type=int_in(0), default=2, metavar="N",
                   help="layers per model through the reference, 0 = all (default 2)")  # fmt: skip
    add_out(d, DEFAULT_OUT)
    add_output_flags(d, "print the targets as JSON (one object per row, the CSV's columns)")
    d.set_defaults(func=run_validate, command="validate deltallm")


def run_validate(args: argparse.Namespace) -> int:
    """Run the DeltaLLM validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (targets outside their tolerance are reported, not an error).

    Raises:
        CoaccelError: a prefill length the validation has no published figure for.
    """
    from coaccel.report.validation import validation_rows
    from coaccel.spine.errors import CoaccelError

    from .validation import TOKENS, validate_deltallm
    from .validation_report import format_deltallm_validation, write_deltallm_validation

    tokens = tuple(args.tokens) if args.tokens else TOKENS
    bad = [t for t in tokens if t not in TOKENS]
    if bad:
        valid = " ".join(map(str, TOKENS))
        raise CoaccelError(f"--tokens {bad[0]}: no published figure at that length; valid: {valid}")
    run = Outputs(args, "coaccel validate deltallm")
    run.progress(f"{len(tokens)} prefill lengths, {args.mode} mode")
    v = validate_deltallm(mode=args.mode, tokens=tokens, layers_simulated=args.layers)
    paths = write_deltallm_validation(v, run.out)
    return run.finish(
        paths, text=format_deltallm_validation(v), doc={"targets": validation_rows(v)}
    )
