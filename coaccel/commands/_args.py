"""Argument types and checks shared by the sub-commands: numbers in range, comma lists without
empty entries, output locations checked before any work starts."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..report.files import prepare_out_dir
from ..spine.errors import CoaccelError

__all__ = ["vars_of", "add_output_flags", "comma_list", "int_in", "out_file", "prepare_out_dir"]


def int_in(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer within ``[lo, hi]`` (either bound may be open).

    Args:
        lo: smallest accepted value, or None.
        hi: largest accepted value, or None.

    Returns:
        The converter; it raises ``argparse.ArgumentTypeError`` with the valid range.
    """

    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            lo_s = "" if lo is None else f"{lo} <= "
            hi_s = "" if hi is None else f" <= {hi}"
            raise argparse.ArgumentTypeError(f"{v} is out of range: must be {lo_s}N{hi_s}")
        return v

    conv.__name__ = "integer"
    return conv


def comma_list(text: str, flag: str) -> list[str]:
    """Split ``"a,b,c"``; an empty entry (``"a,,b"``, a trailing comma) is an error.

    Args:
        text: the option's value.
        flag: the option's name, for the message.

    Returns:
        The stripped entries.

    Raises:
        CoaccelError: an empty entry or an empty list.
    """
    parts = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise CoaccelError(f"{flag} {text!r}: empty entry in the comma-separated list")
    return parts


def out_file(path: Path, flag: str = "--out") -> Path:
    """Check, before any work, that a file can be written at ``path`` (its folder is created).

    Args:
        path: the output file.
        flag: the option's name, for the message.

    Returns:
        The path.

    Raises:
        CoaccelError: it is a folder, or its folder cannot be created or written.
    """
    if path.is_dir():
        raise CoaccelError(f"{flag} {str(path)!r} is a folder; give a file name")
    prepare_out_dir(path.parent if str(path.parent) else Path("."), flag)
    return path


def add_output_flags(
    p: argparse.ArgumentParser, json_help: str = "print the result as JSON"
) -> None:
    """Add the ``--json`` and ``--quiet`` flags every printing command has.

    ``--json`` prints the result as one JSON document on stdout (nothing else goes to stdout);
    ``--quiet`` drops progress and informational lines (timings, "wrote ..." lines).
    """
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--quiet", action="store_true", help="no progress or informational lines")


def vars_of(args: argparse.Namespace) -> dict[str, object]:
    """The parsed options as plain JSON data, for a manifest (the handler function dropped)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"}
