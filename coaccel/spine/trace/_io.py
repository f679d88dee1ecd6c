"""Trace files: one ``.npz`` archive without pickles, the metadata as JSON text beside the arrays.

Internal (used by :meth:`Trace.save <coaccel.spine.trace.Trace.save>` and
:meth:`Trace.load <coaccel.spine.trace.Trace.load>`; no public functions):

* :func:`_write_npz`: the archive, written under a temporary name and renamed, so that an
  interrupted save never leaves a truncated trace.
* :func:`_read_npz`: the metadata and the four record arrays of an archive (read-only), or a
  :class:`~._records.TraceError` that says what is wrong with the file;
  :func:`_read_meta`: the metadata alone.
* :func:`_upgrade_v1`: the version-2 form of a version-1 trace (docs/trace.md, "Versioning").

Public (exported by :mod:`coaccel.spine.trace`): :func:`not_regular` (what a path is when it is
not a regular file: every reader refuses a FIFO or a device before opening it) and
:func:`is_trace_file` (a zip archive, as every trace file is, judged by its first bytes).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._records import _DTYPES, _KINDS, _V1_DTYPES, TRACE_VERSION, UNITS, TraceError, _field_names

__all__ = ["is_trace_file", "not_regular"]

# Every .npz file is a zip archive: local file header, or the end record of an empty archive.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def not_regular(path: str | Path) -> str | None:
    """What a path is when it exists but is not a regular file (or a link to one).

    Reading a FIFO blocks until someone writes to it and ``/dev/zero`` never ends, so every
    reader refuses such paths before opening them.

    Args:
        path: the path.

    Returns:
        ``"a folder"``, ``"a named pipe (FIFO)"``, ``"a character device"``, ``"a block
        device"``, ``"a socket"`` or ``"not a regular file"``; None for a regular file or a
        path that does not exist.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def is_trace_file(path: str | Path) -> bool:
    """Whether a path is a regular file that starts like a trace file (a zip archive).

    Judged by the first bytes, never by the suffix, and without opening anything but a regular
    file.

    Args:
        path: the path.

    Returns:
        True for a regular file that starts with a zip signature (every ``.npz`` does).
    """
    if not_regular(path) is not None:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) in _ZIP_MAGIC
    except (OSError, ValueError):
        return False


def _check_trace_file(path: str | Path) -> None:
    """Refuse, before numpy opens it, what cannot be a trace file.

    ``numpy.load`` would block on a FIFO, never end on ``/dev/zero``, and answer a short file
    with advice about unpickling: the file is refused here with what it is instead.

    Raises:
        TraceError: a folder, FIFO or device; a file that does not start like a zip archive.
        FileNotFoundError: no such file.
    """
    kind = not_regular(path)
    if kind is not None:
        raise TraceError(f"{path}: not a trace file: it is {kind}")
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    if head not in _ZIP_MAGIC:
        what = (
            "it is empty"
            if not head
            else "it is not an .npz archive: it does not start with the zip signature"
        )
        raise TraceError(f"{path}: not a trace file: {what}")


def _write_npz(
    path: str | Path, meta: dict[str, Any], arrays: Mapping[str, Any], *, compress: bool
) -> None:
    """Write ``meta`` (as JSON text) and the record arrays (by kind) to one ``.npz`` file,
    exactly at ``path``."""
    text = json.dumps(meta, sort_keys=True, allow_nan=False)
    save = np.savez_compressed if compress else np.savez
    # Written under a temporary name in the same folder, then renamed: an interrupted save
    # never leaves a truncated trace at ``path``.
    dest = Path(path)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            save(f, meta=np.asarray(text), **arrays)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read_npz(path: str | Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The metadata (parsed JSON, not yet checked) and the record arrays of a trace file.

    Raises:
        TraceError: not a trace archive, unexpected arrays, or metadata that is not JSON.
        FileNotFoundError: no such file.
    """
    meta, arrays = _read(path, records=True)
    return meta, arrays


def _read_meta(path: str | Path) -> Any:
    """The metadata of a trace file (parsed JSON, not yet checked), without reading the records.

    Raises:
        TraceError: not a trace archive, or metadata that is not JSON text.
        FileNotFoundError: no such file.
    """
    return _read(path, records=False)[0]


def _read(path: str | Path, *, records: bool) -> tuple[Any, dict[str, np.ndarray]]:
    _check_trace_file(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            expected = {"meta", *_KINDS}
            if keys != expected and (records or "meta" not in keys):
                raise TraceError(
                    f"{path}: arrays {sorted(keys)} in the file, expected {sorted(expected)}"
                )
            raw = _member(z, "meta", path)
            if raw.dtype.kind != "U" or raw.ndim != 0:
                raise TraceError(f"{path}: 'meta' must be a 0-d unicode array (JSON text)")
            meta = json.loads(str(raw))
            arrays = {k: _member(z, k, path) for k in _KINDS} if records else {}
            for a in arrays.values():
                a.flags.writeable = False  # ours alone: no defensive copy needed
    except (FileNotFoundError, TraceError):
        raise
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: metadata is not valid JSON: {e}") from None
    except RecursionError:
        raise TraceError(f"{path}: metadata is nested too deeply to be a trace's") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as e:
        raise TraceError(f"{path}: not a trace file: a damaged zip archive ({e})") from None
    except (ValueError, OSError, EOFError, KeyError, TypeError) as e:
        # A truncated or damaged member: numpy's words, on one line, after what the file is.
        raise TraceError(f"{path}: not a trace file: {_one_line(e)}") from None
    return meta, arrays


def _member(z: Any, name: str, path: str | Path) -> np.ndarray:
    """One array of an archive; a member numpy cannot read without unpickling is refused."""
    try:
        return np.asarray(z[name])
    except ValueError as e:
        if "pickle" in str(e):
            raise TraceError(
                f"{path}: not a trace file: array {name!r} holds Python objects, which coaccel "
                "never loads (a trace holds plain numeric arrays)"
            ) from None
        raise TraceError(
            f"{path}: not a trace file: array {name!r} is not a readable .npy array "
            f"({_one_line(e)})"
        ) from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:200] or type(e).__name__


def _upgrade_v1(
    meta: dict[str, Any], arrays: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The version-2 form of a version-1 trace.

    New columns get their defaults: ``compute.cta`` -1 (no CTAs), ``sparsity.kernel`` 0,
    the ``kernel_begin`` geometry beyond ``ctas`` 0 (unknown). The metadata gets an empty
    tensor map and the units of the new columns, and a ``config_digest`` of ``""`` (version
    1's "none") becomes null, in the ``parts`` of a concatenation too. Every other field and
    value is kept.
    """
    out = {}
    for kind, a in arrays.items():
        if a.ndim != 1 or a.dtype != _V1_DTYPES[kind]:
            raise TraceError(
                f"{kind}: expected a 1-D array of the version-1 dtype {_V1_DTYPES[kind]}, got "
                f"{a.dtype} with shape {a.shape}"
            )
        new = np.zeros(a.size, dtype=_DTYPES[kind])
        for name in _field_names(a.dtype):
            new[name] = a[name]
        if kind == "compute":
            new["cta"] = -1
        new.flags.writeable = False
        out[kind] = new
    meta = dict(meta, version=TRACE_VERSION, tensors={})
    if isinstance(meta.get("units"), dict):
        meta["units"] = {
            **meta["units"],
            **{k: u for k, u in UNITS.items() if k not in meta["units"]},
        }

    def digest(d: Any) -> Any:
        return None if d == "" else d

    if "config_digest" in meta:
        meta["config_digest"] = digest(meta["config_digest"])
    if isinstance(meta.get("parts"), list):
        meta["parts"] = [
            dict(p, config_digest=digest(p.get("config_digest"))) if isinstance(p, dict) else p
            for p in meta["parts"]
        ]
    return meta, out
