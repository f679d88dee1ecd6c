"""What every command shares: argument types, and one way to write outputs.

* Argument types: :func:`int_in` (integers in a range), :func:`comma_list` (no empty entries).
* Input files: :func:`in_file` refuses a path that is not a regular file (a FIFO or a device
  would block or never end) before it is read, with the reason the system gives (no such file,
  a parent that is not a folder, no permission).
* Output files and folders: :func:`out_file` and :func:`out_dir` refuse a FIFO or a device, and
  check the folder can be written before any work, naming the real reason when it cannot (a
  read-only file system, no permission, a virtual file system such as ``/proc``).
* Outputs: :func:`add_out` is the one definition of ``--out``; :func:`add_output_flags` adds
  ``--json`` / ``--quiet``; :class:`Outputs` checks the output folder before any work starts,
  reports progress on stderr, writes the manifest last and prints the result as text or as one
  JSON document. Files themselves are written atomically by :mod:`coaccel.report.files`.

Overwrite rule: a command writes its files into ``--out`` under fixed names, replacing files of
the same names from an earlier run (each atomically) and leaving other files alone; the
manifest, written last, lists exactly the files of the latest complete run.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..report.files import prepare_out_dir
from ..spine.errors import CoaccelError

__all__ = [
    "Outputs",
    "add_out",
    "add_out_file",
    "add_output_flags",
    "comma_list",
    "in_file",
    "int_in",
    "out_dir",
    "out_file",
    "prepare_out_dir",
    "vars_of",
]


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


def in_file(path: Path, flag: str) -> Path:
    """Check, before reading it, that ``path`` is an existing regular file (or a link to one).

    Args:
        path: the input file.
        flag: the option's name (or ``"SPEC"``), for the message.

    Returns:
        The path.

    Raises:
        CoaccelError: it does not exist (or a parent is not a folder, or cannot be searched),
            or is a folder, a FIFO, a device or a socket.
    """
    from ..spine.trace import not_regular

    kind = not_regular(path)
    if kind is not None:
        raise CoaccelError(f"{flag} {str(path)!r} is {kind}, not a regular file")
    try:
        os.stat(path)
    except FileNotFoundError:
        raise CoaccelError(f"{flag} {str(path)!r}: no such file") from None
    except NotADirectoryError:
        raise CoaccelError(
            f"{flag} {str(path)!r}: no such file ({_file_above(path)} is a file, not a folder)"
        ) from None
    except (OSError, ValueError) as e:
        raise CoaccelError(f"{flag} {str(path)!r}: cannot read: {_reason(e)}") from None
    return path


def _file_above(path: Path) -> str:
    """The first parent of ``path`` that exists and is not a folder, quoted (or ``"a parent"``)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return repr(str(parent))
    return "a parent"


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def _mount_of(folder: Path) -> tuple[str, str] | None:
    """``(mount point, file system type)`` of the mount holding ``folder`` (Linux), or None."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    target = str(folder.resolve())
    best: tuple[str, str] | None = None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best[0])):
            best = (point, parts[2])
    return best


# File systems that show the kernel's state: nobody creates files there, whatever the errno.
_VIRTUAL_FS = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
               "configfs", "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc"}  # fmt: skip


def _why_unwritable(folder: Path, e: OSError) -> str:
    """Why a file cannot be created in an existing folder, in the user's terms."""
    code = e.errno
    mount = _mount_of(folder) if folder.is_dir() else None
    if mount is not None and mount[1] in _VIRTUAL_FS:
        return (
            f"it is on the {mount[1]} file system (mounted at {mount[0]}), a view of the "
            "kernel's state where files cannot be created"
        )
    if code == errno.ENOENT and folder.is_dir():
        # The folder exists, yet creating a file in it answers "no such file": a file system
        # that holds only the files something else makes.
        where = f"the {mount[1]} file system (mounted at {mount[0]})" if mount else "a file system"
        return f"it is on {where}, which does not allow creating files"
    return _reason(e)


def _check_writable_dir(folder: Path, what: str, failing: str = "cannot write there") -> None:
    """Create and remove a file in an existing folder; raise the real reason when it fails."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CoaccelError(f"{what}: {failing}: {_why_unwritable(folder, e)}") from None


def out_dir(path: Path, flag: str = "--out") -> Path:
    """Check (and create) an output folder before any work, with the real reason when it cannot
    be used.

    Args:
        path: the folder.
        flag: the option's name, for the message.

    Returns:
        The folder.

    Raises:
        CoaccelError: it is a file, a FIFO or a device; it cannot be created; files cannot be
            written in it (a read-only or virtual file system, no permission).
    """
    return _out_dir(Path(path), flag, f"{flag} {str(path)!r}")


def _out_dir(p: Path, flag: str, label: str) -> Path:
    from ..spine.trace import not_regular

    kind = not_regular(p)
    if kind is not None and kind != "a folder":
        raise CoaccelError(f"{label} is {kind}, not a folder")
    if p.is_dir():
        _check_writable_dir(p, label)
    else:
        existing = next((q for q in p.parents if q.exists()), None)
        if existing is not None and not existing.is_dir():
            raise CoaccelError(f"{label}: cannot create the folder: {str(existing)!r} is a file")
        if existing is not None:
            _check_writable_dir(existing, label, "cannot create the folder")
    return prepare_out_dir(p, flag)


def out_file(path: Path, flag: str = "--out") -> Path:
    """Check, before any work, that a file can be written at ``path`` (its folder is created).

    Args:
        path: the output file.
        flag: the option's name, for the message.

    Returns:
        The path.

    Raises:
        CoaccelError: it is a folder, a FIFO or a device (never opened, so nothing blocks), or
            its folder cannot be created or written (with the reason).
    """
    from ..spine.trace import not_regular

    kind = not_regular(path)
    if kind == "a folder":
        raise CoaccelError(f"{flag} {str(path)!r} is a folder; give a file name")
    if kind is not None:
        raise CoaccelError(f"{flag} {str(path)!r} is {kind}, not a regular file")
    folder = path.parent if str(path.parent) else Path(".")
    _out_dir(folder, flag, f"{flag} {str(folder)!r}")
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


def add_out(
    p: argparse.ArgumentParser,
    default: str | Path | None,
    *,
    what: str = "output folder",
) -> None:
    """Add ``--out DIR``, the output folder of a command (checked before any work starts).

    Args:
        p: the command's parser.
        default: the folder when ``--out`` is not given (None: the option is required).
        what: what the folder holds, for the help text.
    """
    if default is None:
        p.add_argument("--out", type=Path, required=True, metavar="DIR", help=what)
        return
    d = Path(default)
    p.add_argument(
        "--out",
        type=Path,
        default=d,
        metavar="DIR",
        help=f"{what} (default: ./{d.as_posix()}); files of the same names are replaced",
    )


def add_out_file(p: argparse.ArgumentParser, default: str | Path, *, what: str) -> None:
    """Add ``--out FILE`` for a command whose output is one file (checked before any work by
    :func:`out_file`, written atomically).

    Args:
        p: the command's parser.
        default: the file when ``--out`` is not given.
        what: what the file holds, for the help text.
    """
    d = Path(default)
    p.add_argument("--out", type=Path, default=d, metavar="FILE",
                   help=f"{what} (default: ./{d.as_posix()})")  # fmt: skip


class Outputs:
    """One run of a command that writes files: checks first, progress, manifest, result.

    Create it before the work: it checks (and creates) ``args.out`` so that an unwritable
    folder fails at once. Call :meth:`progress` as the work goes, then :meth:`finish` with the
    files written: it writes the manifest and prints the result (text on stdout, "wrote" lines
    and the run time on stderr unless ``--quiet``; with ``--json`` only the JSON document on
    stdout).

    Args:
        args: the parsed command line (``out``, and ``json`` / ``quiet`` when the command has
            them).
        command: the command as the user typed it (``"coaccel validate hbq"``), for the
            manifest and messages.
        out: the output folder; default ``args.out``.
    """

    def __init__(self, args: argparse.Namespace, command: str, out: Path | None = None) -> None:
        self.args = args
        self.command = command
        self.out = out_dir(out if out is not None else args.out)
        self.json = bool(getattr(args, "json", False))
        self.quiet = bool(getattr(args, "quiet", False)) or self.json
        self.t0 = time.perf_counter()

    def progress(self, message: str) -> None:
        """One progress line on stderr (silent with ``--quiet`` or ``--json``)."""
        if not self.quiet:
            print(f"{self.command}: {message}", file=sys.stderr, flush=True)

    def finish(
        self,
        paths: Iterable[str | Path],
        *,
        text: str | None = None,
        doc: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> int:
        """Write the manifest and print the result.

        Args:
            paths: every file the run wrote.
            text: the result as text (stdout), unless ``--json``.
            doc: the result as JSON data (``--json``); ``files`` is added.
            settings: extra settings for the manifest (beside the parsed options).

        Returns:
            0 (the exit status).
        """
        from ..report.files import write_manifest

        files = [Path(p) for p in paths]
        recorded = vars_of(self.args)
        recorded.update(settings or {})
        write_manifest(self.out, files, command=self.command, settings=recorded)
        if self.json:
            json.dump({**dict(doc or {}), "files": [str(p) for p in files]}, sys.stdout,
                      indent=1, default=str)  # fmt: skip
            sys.stdout.write("\n")
            return 0
        if text:
            print(text)
        if not self.quiet:
            for f in files:
                print(f"wrote {f}")
            print(f"({time.perf_counter() - self.t0:.1f} s)", file=sys.stderr)
        return 0
