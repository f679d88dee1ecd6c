"""``coaccel validate NAME``: a target's models beside the published figures.

Every registered target may offer validation sets (``coaccel validate --list``); each is a
sub-command that prints its table (our value, the published one, the error, fitted or predicted,
the verdict) and writes CSV + Markdown into ``--out``.
"""

from __future__ import annotations

import argparse
from typing import Any

EPILOG = """\
examples:
  coaccel validate --list                     every validation set and the target it belongs to
  coaccel validate NAME --help                the options of one set
"""


def register(subparsers: Any) -> None:
    """Add the ``validate`` sub-command and one sub-command per validation set.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    from ..simulation import targets

    sets = [(t, v) for t in targets() for v in t.validations]
    names = " | ".join(v.name for _, v in sets)
    p = subparsers.add_parser(
        "validate",
        help=f"compare the models with published numbers (coaccel validate {names})",
        description="Validation of coaccel's models against the published numbers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list", action="store_true", help="list the validation sets and exit")
    sub = p.add_subparsers(title="validation sets", metavar="<set>")
    for _, v in sets:
        v.register(sub)
    p.set_defaults(func=run_list, command="validate")


def format_sets() -> str:
    """Every validation set: its name, target kind and one-line help."""
    from ..simulation import targets

    rows = [(v.name, t.kind, v.help) for t in targets() for v in t.validations]
    if not rows:
        return "no validation sets are registered"
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return "\n".join(f"{n:<{w0}}  {k:<{w1}}  {h}" for n, k, h in rows)


def run_list(args: argparse.Namespace) -> int:
    """``coaccel validate --list``.

    Args:
        args: the parsed command line.

    Returns:
        0.

    Raises:
        CoaccelError: no set was named (``coaccel validate`` alone).
    """
    from ..simulation import targets
    from ..spine.errors import CoaccelError

    if not args.list:
        names = ", ".join(v.name for t in targets() for v in t.validations)
        raise CoaccelError(f"name a validation set: {names} (coaccel validate --list)")
    print(format_sets())
    return 0
