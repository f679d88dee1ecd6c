"""``coaccel delta``: the DeltaLLM sparsity study (a real decoder's keys, MiniLM's, synthetic ones).

Loads a study config (default: the shipped ``arch_configs/studies/deltallm_default.yaml``),
applies the command-line overrides, runs
:func:`coaccel.targets.deltallm_fpga.study.run_delta_study` and writes the report of
:mod:`coaccel.targets.deltallm_fpga.study_report` (CSV + PNG) into ``--out``, printing the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = "studies/deltallm_default.yaml"
CHOICES_CONFIG = "studies/deltallm_choices.yaml"
DEFAULT_OUT = Path("reports") / "delta"

# Config keys the flags override, for error messages in the user's terms.
_FLAG_OF_KEY = {
    "data": "--data",
    "mode": "--mode",
    "seed": "--seed",
    "thetas": "--thetas",
    "windows": "--windows",
    "taus": "--taus",
    "target_delta_sparsity": "--target",
    "real.tokens": "--tokens",
    "minilm.tokens": "--tokens",
    "synthetic.tokens": "--tokens",
    "real.passages": "--passages",
    "minilm.passages": "--passages",
    "real.layers": "--layers",
    "minilm.layers": "--layers",
    "real.model": "--real-model",
    "lane_layout": "--lane-layout",
    "query_block": "--query-block",
    "synthetic.models": "--models",
    "synthetic.key_ar": "--key-ar",
}

EPILOG = """\
examples:
  coaccel delta                                   default study (SmolLM2 + synthetic keys)
  coaccel delta --data real --thetas 0,8,16,32 --taus 4,8,12
  coaccel delta --data real --real-model gemma3-270m --tokens 512
  coaccel delta --data minilm --layers 0,2,4      the MiniLM encoder (no RoPE) for comparison
  coaccel delta --data real --lane-layout head    per-head VSSOS vectors
  coaccel delta --data synthetic --models llama-3.2-1b --key-ar 0.95 --tokens 256
  coaccel delta --target 0.5 --windows 1,16,64 --out /tmp/delta
  coaccel delta --config my_study.yaml            a study file (see docs/deltallm_study.md)
  coaccel delta --choices                         lane layout, tau, theta on SmolLM2 keys:
                                                  rho_K, rho_S, attention error, perplexity
                                                  change (prefill, decode); minutes
"""


def register(subparsers: Any) -> None:
    """Add the ``delta`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    from coaccel.commands.args import add_out, add_output_flags, int_in

    p = subparsers.add_parser(
        "delta",
        help="DeltaLLM Delta-Key and VSSOS sparsity on real (SmolLM2, MiniLM) and synthetic keys",
        description=(
            "DeltaLLM sparsity study: sweeps the Delta-Key threshold theta, the exact window W\n"
            "and the VSSOS skip threshold tau over a real decoder's post-RoPE keys\n"
            "(SmolLM2-135M on Python documentation passages), all-MiniLM-L6-v2's (an encoder\n"
            "without RoPE) and synthetic LLM-like post-RoPE keys; prints the\n"
            "Delta-Key sparsity rho_K, the fine and structured score sparsities rho_fine and\n"
            "rho_S, the attention-output error against dense attention, and the theta that\n"
            "reaches a target rho_K. Writes CSV files and PNG charts into --out.\n"
            "Flags override the config file (docs/deltallm_study.md)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"study YAML (default: the shipped arch_configs/{DEFAULT_CONFIG}; with --choices "
        f"arch_configs/{CHOICES_CONFIG})",
    )
    p.add_argument("--choices", action="store_true",
                   help="the choice table: lane layout, tau and theta with their accuracy cost "
                   "on real keys (its own config; other flags do not apply)")  # fmt: skip
    p.add_argument("--data", metavar="SRC,...", help="comma-separated: real, minilm, synthetic")
    p.add_argument(
        "--real-model", choices=("smollm2-135m", "gemma3-270m"), help="decoder of the real data"
    )
    p.add_argument(
        "--lane-layout",
        choices=("group", "head"),
        help="VSSOS vector: G heads x P_q tokens (group) or P_q tokens of one head",
    )
    p.add_argument("--query-block", type=int_in(1, 64), metavar="P", help="P_q, tokens per vector")
    p.add_argument("--mode", choices=("fixed", "float"), help="reference mode")
    p.add_argument("--thetas", metavar="A,B,...", help="Delta-Key thresholds (fixed: key LSBs)")
    p.add_argument("--windows", metavar="A,B,...", help="exact windows W, tokens")
    p.add_argument("--taus", metavar="A,B,...", help="VSSOS thresholds, log2 units (inf: none)")
    p.add_argument(
        "--target", type=float, metavar="RHO", help="rho_K the theta search aims for (0: none)"
    )
    p.add_argument("--tokens", type=int_in(2, None), metavar="T", help="tokens per sequence")
    p.add_argument("--passages", type=int_in(1, None), metavar="N", help="pydoc passages")
    p.add_argument(
        "--layers", metavar="A,B,...", help="layers of the real decoder and/or MiniLM (0..5)"
    )
    p.add_argument("--models", metavar="M,...", help="workload models of the synthetic keys")
    p.add_argument("--key-ar", type=float, metavar="A", help="synthetic key AR(1) coefficient")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the synthetic tensors")
    add_out(p, DEFAULT_OUT)
    add_output_flags(p, "print the result rows and fits as JSON")
    p.set_defaults(func=run, command="delta")


def _numbers(text: str, flag: str, kind: type) -> list[Any]:
    from coaccel.commands.args import comma_list
    from coaccel.spine.errors import CoaccelError

    out = []
    for item in comma_list(text, flag):
        try:
            out.append(kind(item) if kind is int else float(item))
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise CoaccelError(f"{flag} {text!r}: {item!r} is not {what}") from None
    return out


def _changes(args: argparse.Namespace, data: tuple[str, ...]) -> dict[str, Any]:
    from coaccel.commands.args import comma_list

    ch: dict[str, Any] = {}
    if args.data is not None:
        ch["data"] = comma_list(args.data, "--data")
    if args.mode is not None:
        ch["mode"] = args.mode
    if args.thetas is not None:
        ch["thetas"] = _numbers(args.thetas, "--thetas", float)
    if args.windows is not None:
        ch["windows"] = _numbers(args.windows, "--windows", int)
    if args.taus is not None:
        ch["taus"] = _numbers(args.taus, "--taus", float)
    if args.target is not None:
        ch["target_delta_sparsity"] = args.target
    data = tuple(ch.get("data", data))
    real = [src for src in ("real", "minilm") if src in data]
    if args.tokens is not None:
        ch.update({f"{src}.tokens": args.tokens for src in real})
        ch["synthetic.tokens"] = args.tokens
    if args.passages is not None:
        ch.update({f"{src}.passages": args.passages for src in real})
    if args.layers is not None:
        ch.update({f"{src}.layers": _numbers(args.layers, "--layers", int) for src in real})
    if args.real_model is not None:
        ch["real.model"] = args.real_model
    if args.lane_layout is not None:
        ch["lane_layout"] = args.lane_layout
    if args.query_block is not None:
        ch["query_block"] = args.query_block
    if args.models is not None:
        ch["synthetic.models"] = comma_list(args.models, "--models")
    if args.key_ar is not None:
        ch["synthetic.key_ar"] = args.key_ar
    if args.seed is not None:
        ch["seed"] = args.seed
    return ch


def run(args: argparse.Namespace) -> int:
    """Run the study and write its report.

    Args:
        args: the parsed command line.

    Returns:
        0 on success (errors raise ``CoaccelError``; the CLI turns them into exit status 2).
    """
    from coaccel.arch_configs import path as shipped
    from coaccel.commands.args import Outputs
    from coaccel.spine.config import ConfigError, Problem, dump_config, load_config, override
    from coaccel.targets.deltallm_fpga.study import DeltaStudyConfig, rows_as_dicts, run_delta_study
    from coaccel.targets.deltallm_fpga.study_report import format_delta_table, write_delta_report

    if args.choices:
        return _run_choices(args)
    cfg_path = args.config if args.config is not None else shipped(DEFAULT_CONFIG)
    cfg = load_config(cfg_path, DeltaStudyConfig)
    changes = _changes(args, cfg.data)
    if changes:
        try:
            cfg = override(cfg, changes)
        except ConfigError as exc:
            problems = []
            for p in exc.problems:
                key = p.key
                for k, flag in _FLAG_OF_KEY.items():
                    if key == k or key.startswith(k + "["):
                        key = flag + key[len(k) :]
                        break
                problems.append(Problem("command line", key, p.value, p.message, p.valid))
            raise ConfigError(problems) from None

    run_ = Outputs(args, "coaccel delta")
    import numpy as np

    result = run_delta_study(cfg, rng=np.random.default_rng(cfg.seed), progress=run_.progress)
    paths = write_delta_report(result, run_.out)
    doc = {
        "rows": rows_as_dicts(result.rows),
        "fits": rows_as_dicts(result.fits),
        "passages": [list(p) for p in result.passages],
        "notes": list(result.notes),
    }
    return run_.finish(
        paths,
        text=format_delta_table(result),
        doc=doc,
        settings={"config": str(cfg_path), "study": dump_config(cfg)},
    )


def _run_choices(args: argparse.Namespace) -> int:
    """``coaccel delta --choices``: the choice table (:mod:`.choices`)."""
    from coaccel.arch_configs import path as shipped
    from coaccel.commands.args import Outputs
    from coaccel.spine.config import dump_config, load_config
    from coaccel.targets.deltallm_fpga.choices import ChoiceConfig, run_choice_table
    from coaccel.targets.deltallm_fpga.study_report import (
        format_choice_table,
        write_choice_report,
    )

    cfg_path = args.config if args.config is not None else shipped(CHOICES_CONFIG)
    cfg = load_config(cfg_path, ChoiceConfig)
    run_ = Outputs(args, "coaccel delta --choices")
    table = run_choice_table(cfg, progress=run_.progress)
    paths = write_choice_report(table, run_.out)
    doc = {"rows": [_choice_doc(r) for r in table.rows], "notes": list(table.notes)}
    return run_.finish(paths, text=format_choice_table(table), doc=doc,
                       settings={"config": str(cfg_path), "choices": dump_config(cfg)})  # fmt: skip


def _choice_doc(row: Any) -> dict[str, Any]:
    import dataclasses

    d = dataclasses.asdict(row)
    d["setting"] = row.label
    return d
