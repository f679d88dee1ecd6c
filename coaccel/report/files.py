"""Writing outputs safely: folders checked before work starts, files written atomically, and a
manifest per output folder.

* :func:`prepare_out_dir` checks (and creates) an output folder before any computing, so that a
  read-only or invalid ``--out`` fails at once, not after minutes of work.
* :func:`write_text` / :func:`write_bytes` / :func:`atomic_open` write to a temporary name in the
  same folder and rename it into place: a reader never sees a half-written file.
* :func:`write_manifest` records what a run wrote (names, sizes, SHA-256), with the command and
  settings, last: a folder whose manifest lists a file set is complete; an interrupted run leaves
  the previous manifest, which does not match the new files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ..spine.errors import CoaccelError

__all__ = [
    "MANIFEST",
    "atomic_open",
    "prepare_out_dir",
    "write_bytes",
    "write_manifest",
    "write_text",
]

MANIFEST = "manifest.json"
"""The manifest's file name inside an output folder."""


def prepare_out_dir(path: str | Path, what: str = "--out") -> Path:
    """Create an output folder if needed and check that files can be written into it.

    Args:
        path: the folder.
        what: how the user named it (for the message), e.g. ``"--out"``.

    Returns:
        The folder as a :class:`~pathlib.Path`.

    Raises:
        CoaccelError: it is a file, cannot be created, or is not writable.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CoaccelError(f"{what} {str(p)!r} is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoaccelError(
            f"{what} {str(p)!r}: cannot create the folder: {e.strerror or e}"
        ) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CoaccelError(f"{what} {str(p)!r}: cannot write there: {e.strerror or e}") from None
    return p


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once at import: changing the umask to read it is not thread-safe.
_UMASK = _read_umask()


def _publishable(tmp: str) -> None:
    """Give a finished temporary file the mode an ordinary ``open`` would (0666 less the umask).

    ``mkstemp`` creates files readable by their owner only; reports are meant to be shared.
    """
    os.chmod(tmp, 0o666 & ~_UMASK)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write a file atomically (temporary name in the same folder, then rename).

    Args:
        path: destination.
        data: contents.

    Returns:
        The path.
    """
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        _publishable(tmp)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


@contextlib.contextmanager
def atomic_open(
    path: str | Path, *, newline: str = "", encoding: str = "utf-8"
) -> Iterator[IO[str]]:
    """Open a text file for writing that appears under ``path`` only when the block succeeds.

    Args:
        path: destination.
        newline: passed to ``open`` (``""`` for the csv module).
        encoding: text encoding.

    Yields:
        The open temporary file.
    """
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", newline=newline, encoding=encoding) as f:
            yield f
        _publishable(tmp)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> Path:
    """:func:`write_bytes` of UTF-8 text."""
    return write_bytes(path, text.encode("utf-8"))


def write_manifest(
    out_dir: str | Path,
    files: Iterable[str | Path],
    *,
    command: str,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Record what a run wrote into a folder (written last, atomically).

    Args:
        out_dir: the output folder.
        files: the files the run wrote (inside ``out_dir`` or below).
        command: what produced them (``"coaccel quant"``).
        settings: the run's settings (seed, sizes...), JSON-serializable.

    Returns:
        The manifest's path.
    """
    from .. import __version__

    root = Path(out_dir)
    entries = []
    for f in files:
        fp = Path(f)
        data = fp.read_bytes()
        try:
            name = fp.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            name = str(fp)
        entries.append(
            {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        )
    doc = {
        "command": command,
        "coaccel_version": __version__,
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": dict(settings or {}),
        "files": entries,
    }
    return write_text(root / MANIFEST, json.dumps(doc, indent=1, default=str) + "\n")
