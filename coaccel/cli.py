"""The ``coaccel`` command line: one console script, one sub-command per module.

Each sub-command lives in ``coaccel/commands/<name>.py`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` (a callable taking the parsed namespace and returning an
exit status). This module only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__

# Order here is the order in --help.
COMMANDS = ("demo", "quant", "sim", "cost", "validate", "report", "synth")

DESCRIPTION = """\
coaccel: accelerator co-design for LLM inference.

Bit-exact numpy references (block-quantization formats: HBQ, OCP MX, NVFP4, BFP/INT; the
HBQ integer datapath) produce results and traces; cycle-approximate simulators turn traces into
cycles; cost models turn them into energy and area; the Verilog in rtl/ is checked against the
same references, bit for bit.
"""

EPILOG = """\
examples:
  coaccel demo                         run the whole flow on small problem sizes
  coaccel quant --formats hbq-a,hbq-e,nvfp4,mxfp4 --data synthetic
  coaccel <command> --help             options of one command
"""


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="coaccel",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"coaccel {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="<command>")
    for name in COMMANDS:
        importlib.import_module(f"coaccel.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coaccel`` console script.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        Process exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    from .errors import CoaccelError

    try:
        return int(args.func(args) or 0)
    except CoaccelError as exc:  # user-facing errors: one clear message, no traceback
        print(f"coaccel {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
