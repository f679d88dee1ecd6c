"""Trace files: one ``.npz`` archive without pickles, the metadata as JSON text beside the arrays.

Internal (used by :meth:`Trace.save <coaccel.spine.trace.Trace.save>` and
:meth:`Trace.load <coaccel.spine.trace.Trace.load>`; no public functions):

* :func:`_write_npz`: the archive, written under a temporary name and renamed, so that an
  interrupted save never leaves a truncated trace.
* :func:`_read_npz`: the metadata and the four record arrays of an archive (read-only), or a
  :class:`~._records.TraceError` that says what is wrong with the file.
* :func:`_upgrade_v1`: the version-2 form of a version-1 trace (docs/trace.md, "Versioning").
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._records import _DTYPES, _KINDS, _V1_DTYPES, TRACE_VERSION, UNITS, TraceError, _field_names

__all__: list[str] = []


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
    try:
        with contextlib.ExitStack() as stack:
            z = np.load(path, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise TraceError(f"{path}: not an .npz archive")
            stack.enter_context(z)
            keys = set(z.files)
            expected = {"meta", *_KINDS}
            if keys != expected:
                raise TraceError(
                    f"{path}: arrays {sorted(keys)} in the file, expected {sorted(expected)}"
                )
            raw = z["meta"]
            if raw.dtype.kind != "U" or raw.ndim != 0:
                raise TraceError(f"{path}: 'meta' must be a 0-d unicode array (JSON text)")
            meta = json.loads(str(raw))
            arrays = {k: z[k] for k in _KINDS}
            for a in arrays.values():
                a.flags.writeable = False  # ours alone: no defensive copy needed
    except FileNotFoundError:
        raise
    except TraceError:
        raise
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: metadata is not valid JSON: {e}") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise TraceError(f"{path}: not a readable trace file: {e}") from None
    return meta, arrays


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
