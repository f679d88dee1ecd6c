"""DeltaLLM's command-line pieces: ``coaccel validate deltallm``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coaccel.commands.args import Outputs, add_out, add_output_flags, int_in

DEFAULT_OUT = Path("reports") / "validate"

EPILOG = """\
examples:
  coaccel validate deltallm                   real SmolLM2 keys (8 passages x 512 tokens, all
                                              30 layers) and synthetic keys at T = 64 ... 1024;
                                              about a minute of CPU on one core
  coaccel validate deltallm --tokens 64 128 --layers 1 --real-passages 2 --real-tokens 128
                                              a quick subset
  coaccel validate deltallm --no-real         synthetic keys only (no model package needed)
  coaccel validate deltallm --real-model gemma3-270m
"""


def register_validate(sub: Any) -> None:
    """Add ``coaccel validate deltallm``.

    Args:
        sub: the ``add_subparsers()`` object of ``coaccel validate``.
    """
    from .real_inputs import REAL_MODELS, RealInputs

    d0 = RealInputs()
    d = sub.add_parser(
        "deltallm",
        help="DeltaLLM on the KV260: sparsity, speedup over TeLLMe-v2, resources",
        description=(
            "Every DeltaLLM target: Delta-Key sparsity (up to 60 %), structured score sparsity "
            "(63 %), the 1.62x prefill speedup over TeLLMe-v2 (attention-only and end-to-end) "
            "and fewer DSPs/BRAMs; on a real decoder's post-RoPE keys (SmolLM2-135M on Python "
            "documentation passages: mean and spread over passages) and on synthetic keys of "
            "BitNet-b1.58-2B-4T and Llama-3.2-1B at T = 64 ... 1024; plus TeLLMe-v2's TTFT from "
            "the loop structure of its HLS code against its published TTFT."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument(
        "--mode",
        choices=("analytical", "cycle"),
        default="analytical",
        help="simulator mode of the synthetic DeltaLLM runs (default analytical)",
    )
    d.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=None,
        metavar="T",
        help="synthetic prefill lengths (default 64 128 256 512 1024)",
    )
    d.add_argument(
        "--layers",
        type=int_in(0),
        default=2,
        metavar="N",
        help="synthetic layers per model through the reference, 0 = all (default 2)",
    )
    d.add_argument(
        "--real-model",
        choices=REAL_MODELS,
        default=d0.model,
        help=f"decoder of the real inputs (default {d0.model})",
    )
    d.add_argument(
        "--real-passages",
        type=int_in(2, 40),
        default=d0.passages,
        metavar="N",
        help=f"pydoc passages of the real inputs (default {d0.passages})",
    )
    d.add_argument(
        "--real-tokens",
        type=int_in(16, 1024),
        default=d0.tokens,
        metavar="T",
        help=f"tokens per real passage (default {d0.tokens})",
    )
    d.add_argument("--no-real", action="store_true", help="leave out the real-input rows")
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
    import time

    from coaccel.report.validation import validation_rows
    from coaccel.spine.errors import CoaccelError

    from .validation import TOKENS, RealInputs, validate_deltallm
    from .validation_report import format_deltallm_validation, write_deltallm_validation

    tokens = tuple(args.tokens) if args.tokens else TOKENS
    bad = [t for t in tokens if t not in TOKENS]
    if bad:
        valid = " ".join(map(str, TOKENS))
        raise CoaccelError(f"--tokens {bad[0]}: no published figure at that length; valid: {valid}")
    real = None if args.no_real else RealInputs(
        model=args.real_model, passages=args.real_passages, tokens=args.real_tokens
    )  # fmt: skip
    run = Outputs(args, "coaccel validate deltallm")
    start = time.perf_counter()
    v = validate_deltallm(mode=args.mode, tokens=tokens, layers_simulated=args.layers, real=real,
                          progress=run.progress)  # fmt: skip
    run.progress(f"done in {time.perf_counter() - start:.0f} s")
    paths = write_deltallm_validation(v, run.out)
    return run.finish(
        paths, text=format_deltallm_validation(v), doc={"targets": validation_rows(v)}
    )
