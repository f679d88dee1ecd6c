"""The GPU target's command-line pieces: ``coaccel validate gpu``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coaccel.commands.args import Outputs, add_out, add_output_flags, int_in

DEFAULT_OUT = Path("reports") / "validate"

EPILOG = """\
examples:
  coaccel validate gpu                        every anchor, 24 points per curve
  coaccel validate gpu --points 0 --out /tmp/v
  coaccel validate gpu --no-real              leave out the real-input (SmolLM2) rows
  coaccel validate gpu --real-contexts 1024,2048 --real-passages 1
  coaccel validate gpu --measured arch_configs/gpu/measured/decode_attention_measured.csv
                                              measured decode-attention ops: calibrated
                                              predictions with 90 % intervals, leave one GPU out
  coaccel validate gpu --measured ops.csv --write-calibration ops_calibration.yaml
                                              also write the calibration file the simulator
                                              can apply (docs/gpu_measured.md section 7)
"""


def register_validate(sub: Any) -> None:
    """Add ``coaccel validate gpu``.

    Args:
        sub: the ``add_subparsers()`` object of ``coaccel validate``.
    """
    g = sub.add_parser(
        "gpu",
        help="GPU memory hierarchy: bandwidth plateaus and curves, L2 knees, latencies, PCIe "
        "copy shape, W1 decode time vs context",
        description=(
            "The GPU simulator against measured anchors (docs/gpu_decode.md): H200 and "
            "A100-80GB streaming-bandwidth plateaus and curves against working-set size, L2 "
            "plateaus and capacity knees, A100 pointer-chase latencies per level, the PCIe "
            "copy curve's shape and W1 FlashDecoding time against context; MAPE and Pearson "
            "correlation per curve, fitted vs predicted, a band on every prediction (ok when "
            "the measured figure lies inside it) and the analytical vs cycle tier error; the "
            "rows and summary line of coaccel validate hbq."
        ),
        epilog=EPILOG,
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
        "--no-real",
        action="store_true",
        help="skip the real-input rows (FFD keep ratio, errors, perplexity and speedup, NOSA "
        "recall and misses on SmolLM2-135M decode steps; a few minutes of CPU at the defaults)",
    )
    g.add_argument(
        "--real-contexts",
        type=_contexts,
        default=None,
        metavar="T,T,...",
        help="contexts of the real-input rows, tokens, 128..8192, the two largest at least 1024 "
        "(default 512,1024,2048,4096)",
    )
    g.add_argument(
        "--real-passages",
        type=int_in(1),
        default=None,
        metavar="N",
        help="text windows of the real-input rows (default 2)",
    )
    g.add_argument(
        "--points",
        type=int_in(0),
        default=24,
        metavar="N",
        help="simulate at most N points of each measured curve (default 24; 0: all)",
    )
    _add_measured_options(g)
    add_out(g, DEFAULT_OUT)
    add_output_flags(g, "print the rows as JSON (one object per row, the CSV's columns)")
    g.set_defaults(func=run_validate, command="validate gpu")


def _add_measured_options(g: Any) -> None:
    """The options of ``coaccel validate gpu --measured`` (docs/gpu_measured.md)."""
    g.add_argument(
        "--measured",
        type=Path,
        default=None,
        metavar="FILE.csv",
        help="instead of the anchors: predict the measured decode-attention ops of FILE.csv "
        "(columns source, gpu, kernel, dtype, batch, n_q_heads, n_kv_heads, head_dim, "
        "context_len, measured_us, notes; the shipped set is "
        "arch_configs/gpu/measured/decode_attention_measured.csv), fit each kernel library's "
        "floor and efficiency on the non-Hopper GPUs, give 90 %% intervals, leave one GPU out, "
        "and write DIR/<name>_predicted.csv (docs/gpu_measured.md)",
    )
    g.add_argument(
        "--page-tokens",
        type=int_in(1, 1 << 20),
        default=64,
        metavar="N",
        help="with --measured: tokens per paged-KV block of the simulated ops (default 64)",
    )
    g.add_argument(
        "--launch",
        choices=("library", "flashdecode"),
        default="library",
        help="with --measured: simulate each op as its kernel library launches it (library, "
        "the default: FlashAttention-2's or -3's split rule, tile and combine) or with the "
        "package's own split rule for every library (flashdecode, the earlier form; "
        "docs/gpu_measured.md section 5)",
    )
    g.add_argument(
        "--efficiency",
        choices=("single", "regime"),
        default="regime",
        help="with --measured: one efficiency per library (single) or one per regime and "
        "library (regime, the default: the form selected on the leave-one-out error, "
        "docs/gpu_measured.md section 5)",
    )
    g.add_argument(
        "--cold-l2",
        type=_gpu_configs,
        default=(),
        metavar="CONFIGS",
        help="with --measured: simulate the rows of these GPU configs (comma-separated, e.g. "
        "a100_80g) with a cold L2, as timed after an L2 flush, instead of warm replays; a "
        "diagnostic of how the L2 behaved when they were measured (docs/gpu_measured.md "
        "section 4); not with --write-calibration",
    )
    g.add_argument(
        "--write-calibration",
        type=Path,
        default=None,
        metavar="FILE.yaml",
        help="with --measured: also write the fitted floors and efficiencies, the 90 %% "
        "half-widths per regime (in the fit and held out), their coverage and the CSV's "
        "SHA-256 to FILE.yaml, the form of the shipped "
        "arch_configs/gpu/measured/decode_attention_calibration.yaml (needs calibration rows "
        "of two GPUs; docs/gpu_measured.md section 7)",
    )


def run_validate(args: argparse.Namespace) -> int:
    """Run the GPU validation, print it and write CSV + Markdown.

    Args:
        args: the parsed command line.

    Returns:
        0 (rows outside their band or tolerance are reported, not an error).
    """
    if args.measured is not None:
        return run_measured(args)
    if args.write_calibration is not None:
        from coaccel.spine.errors import CoaccelError

        raise CoaccelError("--write-calibration needs --measured FILE.csv (the calibration is "
                           "fitted on measured decode-attention ops)")  # fmt: skip
    from coaccel.report.validation import validation_rows

    from .validation import validate_gpu
    from .validation_report import format_gpu_validation, write_gpu_validation_report

    run = Outputs(args, "coaccel validate gpu")
    v = validate_gpu(
        mode=args.mode,
        tiers=not args.no_tiers,
        points=args.points,
        ffd=not args.no_ffd,
        offload=not args.no_offload,
        real=not args.no_real,
        real_sizes=_real_sizes(args),
        progress=run.progress,
    )
    paths = write_gpu_validation_report(v, run.out)
    doc = {"targets": validation_rows(v), "notes": list(v.notes)}
    return run.finish(paths, text=format_gpu_validation(v), doc=doc)


def run_measured(args: argparse.Namespace) -> int:
    """``coaccel validate gpu --measured FILE.csv``: check the CSV, then simulate, calibrate,
    print and write ``<name>_predicted.csv`` (:mod:`coaccel.targets.gpu.measured`) and, with
    ``--write-calibration FILE.yaml``, the calibration file
    (:mod:`coaccel.targets.gpu.measured_calibration`).

    Args:
        args: the parsed command line.

    Returns:
        0.

    Raises:
        CoaccelError: the CSV is not a readable regular file or has a bad row (one line naming
            file, line, column and value), the output folder or calibration file cannot be
            written, an output file would be the input itself, or the CSV cannot give a
            calibration file (calibration rows of fewer than two GPUs, too few rows).
    """
    import os

    from coaccel.commands.args import in_file, out_file
    from coaccel.spine.errors import CoaccelError

    from .measured import evaluate_measured, read_measured_csv
    from .measured_calibration import check_calibration_table, derive_calibration
    from .measured_report import (
        format_measured,
        measured_doc,
        predicted_path,
        write_calibration,
        write_measured_predictions,
    )

    if args.cold_l2 and args.write_calibration is not None:
        raise CoaccelError("--cold-l2 is a diagnostic of the measured rows; the calibration "
                           "file is fitted with warm replays: drop one of the two")  # fmt: skip
    src = in_file(Path(args.measured), "--measured")
    cal_dest = None
    if args.write_calibration is not None:
        cal_dest = out_file(Path(args.write_calibration), "--write-calibration")
        if cal_dest.exists() and os.path.samefile(cal_dest, src):
            raise CoaccelError(
                f"--write-calibration {str(cal_dest)!r} is the --measured file itself; a "
                "command never writes to a file it was given to read"
            )
    table = read_measured_csv(src)
    if cal_dest is not None:
        check_calibration_table(table)
    run = Outputs(args, "coaccel validate gpu")
    dest = predicted_path(run.out, src)
    if dest.exists() and os.path.samefile(dest, src):
        raise CoaccelError(
            f"--out {str(run.out)!r}: {str(dest)!r} is the --measured file itself; a command "
            "never writes to a file it was given to read"
        )
    run.progress(f"{len(table.rows)} measured rows from {src}")
    v = evaluate_measured(table, page_tokens=args.page_tokens, progress=run.progress,
                          launch=args.launch, efficiency_form=args.efficiency,
                          cold_l2=args.cold_l2)  # fmt: skip
    cal = derive_calibration(v) if cal_dest is not None else None
    paths = [write_measured_predictions(v, run.out)]
    if cal_dest is not None:
        paths.append(write_calibration(cal, cal_dest))
    return run.finish(paths, text=format_measured(v), doc=measured_doc(v))


def _gpu_configs(text: str) -> tuple[str, ...]:
    """``--cold-l2``: comma-separated GPU configs of the measured CSVs' GPUs."""
    from .measured import GPU_CONFIGS

    known = sorted(set(GPU_CONFIGS.values()))
    names = tuple(t.strip() for t in text.split(","))
    bad = [n for n in names if n not in known]
    if not text.strip() or bad:
        raise argparse.ArgumentTypeError(
            f"{', '.join(bad) or repr(text)} not a GPU config; valid: {', '.join(known)}"
        )
    return names


def _contexts(text: str) -> tuple[int, ...]:
    """``--real-contexts``: comma-separated token counts, each 16 .. 8192 (SmolLM2's context)."""
    try:
        values = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 512,1024; got {text!r}") from None
    bad = [v for v in values if not 128 <= v <= 8192]
    if not values or bad:
        raise argparse.ArgumentTypeError(
            f"contexts must be in 128..8192 tokens (one FFD block to SmolLM2-135M's context); "
            f"got {text!r}"
        )
    ctx = tuple(sorted(set(values)))
    if min(ctx[-2:]) < 1024:
        raise argparse.ArgumentTypeError(
            "the two largest contexts must be at least 1024 tokens: NOSA's replay runs on them "
            f"and keeps a quarter of the context, at least 4 blocks of 64 tokens; got {text!r}"
        )
    return ctx


def _real_sizes(args: argparse.Namespace) -> dict[str, Any] | None:
    sizes: dict[str, Any] = {}
    if args.real_contexts is not None:
        sizes["contexts"] = args.real_contexts
    if args.real_passages is not None:
        sizes["passages"] = args.real_passages
    return sizes or None
