"""``coaccel quant``: the quantization accuracy study (synthetic tensors and the real MiniLM).

Loads a study config (default: the shipped ``arch_configs/studies/quant_default.yaml``), applies
the command-line overrides, runs :func:`coaccel.studies.quant.run_quant_study` and writes the
report of :mod:`coaccel.report.quant` (CSV + PNG) into ``--out``, printing the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .args import add_out, add_output_flags

DEFAULT_CONFIG = "studies/quant_default.yaml"
DEFAULT_OUT = Path("reports") / "quant"

# Config keys the flags override, for error messages in the user's terms.
_FLAG_OF_KEY = {
    "formats": "--formats",
    "data": "--data",
    "seed": "--seed",
    "real.n_sentences": "--sentences",
}

EPILOG = """\
examples:
  coaccel quant                                   default study (synthetic + real MiniLM)
  coaccel quant --formats hbq-a,hbq-e,nvfp4,mxfp4 --data synthetic
  coaccel quant --data real --sentences 12 --out /tmp/q
  coaccel quant --config my_study.yaml            a study file (see docs/quant_study.md)
"""


def register(subparsers: Any) -> None:
    """Add the ``quant`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "quant",
        help="accuracy of block formats (HBQ, NVFP4, MX, ...) on synthetic and real tensors",
        description=(
            "Quantization accuracy study: SQNR/MSE of weights, activations and GEMM outputs\n"
            "per format, effective bits per element, and the sentence-embedding cosine\n"
            "similarity of the real all-MiniLM-L6-v2 with every linear layer quantized.\n"
            "Writes quant_results.csv and PNG charts into --out and prints the table.\n"
            "Flags override the config file (docs/quant_study.md)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"study YAML (default: the shipped arch_configs/{DEFAULT_CONFIG})",
    )
    p.add_argument(
        "--formats", metavar="A,B,...", help="comma-separated formats (fp32 = reference)"
    )
    p.add_argument("--data", metavar="SRC,...", help="comma-separated: synthetic, real")
    add_out(p, DEFAULT_OUT)
    p.add_argument("--seed", type=int, metavar="N", help="seed of the synthetic tensors")
    p.add_argument(
        "--sentences", type=int, metavar="N", help="number of corpus sentences for the real model"
    )
    add_output_flags(p, "print the result rows as JSON")
    p.set_defaults(func=run, command="quant")


def _split(text: str, flag: str) -> list[str]:
    from .args import comma_list

    return comma_list(text, flag)


def run(args: argparse.Namespace) -> int:
    """Run the study and write its report.

    Args:
        args: the parsed command line.

    Returns:
        0 on success (errors raise ``CoaccelError``; the CLI turns them into exit status 2).
    """
    from ..arch_configs import path as shipped
    from ..report.quant import format_quant_table, write_quant_report
    from ..spine.config import ConfigError, Problem, load_config, override
    from ..studies.quant import QuantStudyConfig, run_quant_study

    cfg_path = args.config if args.config is not None else shipped(DEFAULT_CONFIG)
    cfg = load_config(cfg_path, QuantStudyConfig)
    changes: dict[str, Any] = {}
    if args.formats is not None:
        changes["formats"] = _split(args.formats, "--formats")
    if args.data is not None:
        changes["data"] = _split(args.data, "--data")
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.sentences is not None:
        changes["real.n_sentences"] = args.sentences
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

    from ..studies.quant import rows_as_dicts
    from .args import Outputs

    run_ = Outputs(args, "coaccel quant")
    import numpy as np

    result = run_quant_study(cfg, rng=np.random.default_rng(cfg.seed), progress=run_.progress)
    paths = write_quant_report(result, run_.out)
    return run_.finish(
        paths,
        text=format_quant_table(result),
        doc={"rows": rows_as_dicts(result.rows)},
        settings={"config": str(cfg_path)},
    )
