"""The ``coaccel`` command line: one console script, one sub-command per module.

Each sub-command lives in ``coaccel/commands/<name>.py`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` (a callable taking the parsed namespace and returning an
exit status). A target may add commands of its own (its ``commands``, registered the same way,
after coaccel's). This module only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__

# Order here is the order in --help.
COMMANDS = (
    "demo", "quant", "sim", "cost", "sweep", "sweep_report", "validate", "report", "synth",
    "workload",
)  # fmt: skip

DESCRIPTION = """\
coaccel: accelerator co-design for LLM inference.

Bit-exact numpy references (block-quantization formats: HBQ, OCP MX, NVFP4, BFP/INT and the HBQ
integer datapath; DeltaLLM sparse attention in fixed point; GPU decode attention) produce results
and traces; cycle-approximate simulators (an HBQ ASIC, a DeltaLLM vector processor on the KV260, GPU
memory hierarchies) turn traces into cycles; cost models turn them into energy and area; sweeps
explore designs and end in Pareto fronts; the Verilog in rtl/ is checked against the same
references, bit for bit.
"""

EPILOG = """\
examples:
  coaccel demo                         run the whole flow on small problem sizes
  coaccel quant --formats hbq-a,hbq-e,nvfp4,mxfp4 --data synthetic
  coaccel <command> --help             options of one command
"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every sub-command registered."""
    parser = _Parser(
        prog="coaccel",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"coaccel {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="<command>")
    for name in COMMANDS:
        importlib.import_module(f"coaccel.commands.{name}").register(sub)
    from .simulation import targets

    for t in targets():
        for register in t.commands:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coaccel`` console script.

    Every failure ends in one line on stderr, never a traceback: a configuration or usage
    problem, an unwritable output, a missing file or an unexpected error exits with status 2,
    Ctrl-C with 130; output cut short by a closed pipe (``coaccel sim ... | head``) ends quietly.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        Process exit status.
    """
    from .simulation import broken

    parser = build_parser()
    for kind, why in broken().items():  # the other targets and commands still work
        print(f"coaccel: warning: target {kind!r} left out: {why}", file=sys.stderr)
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    from .spine.errors import CoaccelError

    command = getattr(args, "command", "coaccel")
    try:
        return int(args.func(args) or 0)
    except CoaccelError as exc:  # user-facing errors: one clear message, no traceback
        _error(command, str(exc))
        return 2
    except KeyboardInterrupt:
        _error(command, "interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop writing, say nothing.
        _silence_stdout()
        return 0
    except OSError as exc:
        where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
        _error(command, f"{exc.strerror or exc}{where}")
        return 2
    except Exception as exc:  # noqa: BLE001 - the command line never ends in a traceback
        if os.environ.get("COACCEL_DEBUG"):
            raise
        text = str(exc).splitlines()[0] if str(exc) else ""
        _error(
            command,
            f"internal error ({type(exc).__name__}: {text}); set COACCEL_DEBUG=1 for the traceback",
        )
        return 2


def _error(command: str, message: str) -> None:
    lines = message.splitlines() or [""]
    # ConfigError lists one problem per line; keep them, prefixed, each on its own line.
    for line in lines:
        try:
            where = f"coaccel {command}" if command else "coaccel"
            print(f"{where}: error: {line}", file=sys.stderr, flush=True)
        except (BrokenPipeError, OSError):
            return


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status (Ctrl-C during start-up too)."""
    try:
        status = main()
    except KeyboardInterrupt:
        print("coaccel: error: interrupted", file=sys.stderr)
        status = 130
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
