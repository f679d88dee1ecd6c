"""The checks every trace passes: metadata, columns, the tensor map, placement and kernels.

:class:`~._trace.Trace` runs them on construction, so a trace built, concatenated or loaded
from a file holds to the contract (docs/trace.md); the builder runs :func:`_check_columns` on a
bulk add that may break it, to name the offending record at once.

Internal (no public functions):

* :func:`_normalize_json`: metadata as JSON data (numpy scalars and arrays turned into plain
  values; NaN refused), so that a saved and reloaded trace has an equal ``meta``
  (:func:`_json_default`).
* :func:`_check_meta`: format, version, string tables, producer, workload, units, digest, seed
  and the tensor map (:func:`_check_tensor_map`: entries well formed, no overlap in a space).
* :func:`_check_columns`: every field of one record kind in range (seq order, deps, table
  indices, non-negative sizes, kind codes, launch geometry only on ``kernel_begin``).
* :func:`_check_placement`: memory records of a mapped tensor stay inside its allocation;
  :func:`_check_kernels`: sparsity records name a kernel that has a ``kernel_begin``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._records import (
    _FORMAT,
    _GEOMETRY,
    _MAX_I8,
    _NONNEG,
    _TABLES,
    EVENT_KINDS,
    TABLE_FIELDS,
    TRACE_VERSION,
    TraceError,
    _field_names,
)

__all__: list[str] = []


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


def _normalize_json(obj: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(obj, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TraceError(f"{what} must be JSON data (no NaN): {e}") from None


def _check_columns(
    kind: str, a: np.ndarray, tables: Mapping[str, Sequence[str]], *, seq_sorted: bool = True
) -> None:
    def bad(mask: np.ndarray, what: str, field: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise TraceError(
                f"{kind}: {int(mask.sum())} record(s) with {what} "
                f"(first: index {i}, seq {int(a['seq'][i])}, {field}={a[field][i].item()!r})"
            )

    seq = a["seq"]
    bad(seq < 0, "a negative seq", "seq")
    if seq_sorted and a.size > 1:
        bad(np.diff(seq) <= 0, "seq not strictly increasing", "seq")
    if "dep" in _field_names(a.dtype):
        dep = a["dep"]
        bad((dep < -1) | (dep >= seq), "dep not -1 or an earlier seq", "dep")
    for (k, field), table in TABLE_FIELDS.items():
        if k == kind:
            n = len(tables[table])
            bad((a[field] < 0) | (a[field] >= n), f"{field} outside its table ({n} names)", field)
    for f in _NONNEG[kind]:
        bad(a[f] < 0, f"negative {f}", f)
    if kind == "compute":
        bad(a["cta"] < -1, "cta below -1 (-1 = no CTAs)", "cta")
    elif kind == "memory":
        bad(a["space"] == 0, "no space (index 0)", "space")
        bad(a["rw"] > 1, "rw not 0 (read) or 1 (write)", "rw")
    elif kind == "sparsity":
        bad((a["kind"] > 7) | ((a["kind"] & 3) == 0), "kind not a valid bit set", "kind")
    elif kind == "events":
        bad(a["kind"] >= len(EVENT_KINDS), "kind not an event kind", "kind")
        for f in _GEOMETRY:
            bad((a[f] != 0) & (a["kind"] != 0), f"{f} set on an event other than kernel_begin", f)


def _check_meta(meta: Any) -> None:
    if not isinstance(meta, dict):
        raise TraceError(f"metadata must be a JSON object, got {type(meta).__name__}")
    if meta.get("format") != _FORMAT:
        raise TraceError(f"metadata format is {meta.get('format')!r}, expected {_FORMAT!r}")
    version = meta.get("version")
    if version != TRACE_VERSION:
        raise TraceError(
            f"unsupported trace version {version!r}; this coaccel reads version {TRACE_VERSION} "
            f"(and version-1 files, which Trace.load upgrades)"
        )
    tables = meta.get("tables")
    if not isinstance(tables, dict) or set(tables) != set(_TABLES):
        got = sorted(tables) if isinstance(tables, dict) else type(tables).__name__
        raise TraceError(f"metadata tables must be exactly {sorted(_TABLES)}, got {got}")
    for name, names in tables.items():
        if not (isinstance(names, list) and all(isinstance(s, str) for s in names)):
            raise TraceError(f"table {name!r} must be a list of strings")
        if not names or names[0] != "":
            raise TraceError(f"table {name!r} must start with '' (index 0 = none)")
        if len(set(names)) != len(names):
            raise TraceError(f"table {name!r} has duplicate names")
    for key in ("producer", "coaccel_version"):
        if not isinstance(meta.get(key), str):
            raise TraceError(f"metadata {key!r} must be a string")
    for key in ("workload", "units", "tensors"):
        if not isinstance(meta.get(key), dict):
            raise TraceError(f"metadata {key!r} must be a JSON object")
    for key in ("config_digest", "seed"):
        if key not in meta:
            raise TraceError(f"metadata {key!r} is missing (null when there is none)")
    digest = meta["config_digest"]
    if digest is not None and (not isinstance(digest, str) or not digest):
        raise TraceError(
            f"metadata 'config_digest' must be a non-empty string or null, got {digest!r}"
        )
    seed = meta["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TraceError(f"metadata 'seed' must be an integer or null, got {seed!r}")
    _check_tensor_map(meta["tensors"])


_TENSOR_KEYS = ("space", "base_addr", "nbytes")


def _check_tensor_map(tensors: dict[str, Any]) -> None:
    """Entries are {space, base_addr, nbytes}; tensors of one space must not overlap."""
    by_space: dict[str, list[tuple[int, int, str]]] = {}
    for name, entry in tensors.items():
        if not name:
            raise TraceError("tensor map: tensor names must be non-empty")
        if not isinstance(entry, dict) or set(entry) != set(_TENSOR_KEYS):
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise TraceError(
                f"tensor map: {name!r} must have exactly the keys {list(_TENSOR_KEYS)}, got {got}"
            )
        space, base, size = entry["space"], entry["base_addr"], entry["nbytes"]
        if not isinstance(space, str) or not space:
            raise TraceError(f"tensor map: {name!r} space must be a non-empty name, got {space!r}")
        for key, v in (("base_addr", base), ("nbytes", size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TraceError(f"tensor map: {name!r} {key} must be an integer >= 0, got {v!r}")
        if base + size > _MAX_I8:
            raise TraceError(f"tensor map: {name!r} ends past 2**63 - 1 (base_addr + nbytes)")
        if size:
            by_space.setdefault(space, []).append((base, base + size, name))
    for space, spans in by_space.items():
        spans.sort()
        for (lo0, hi0, n0), (lo1, hi1, n1) in zip(spans, spans[1:]):  # noqa: B905
            if lo1 < hi0:
                raise TraceError(
                    f"tensor map: {n0!r} [{lo0}, {hi0}) and {n1!r} [{lo1}, {hi1}) overlap in "
                    f"{space} (byte ranges, base_addr to base_addr + nbytes)"
                )


def _check_placement(memory: np.ndarray, meta: dict[str, Any]) -> None:
    """Memory records of a mapped tensor, in its space, stay inside its allocation."""
    tensors = meta["tensors"]
    if not tensors or not memory.size:
        return
    t_names, s_names = meta["tables"]["tensor"], meta["tables"]["space"]
    t_code = {s: i for i, s in enumerate(t_names)}
    s_code = {s: i for i, s in enumerate(s_names)}
    for name, entry in tensors.items():
        t, sp = t_code.get(name), s_code.get(entry["space"])
        if t is None or sp is None:
            continue  # no record touches the tensor in its space
        idx = np.flatnonzero((memory["tensor"] == t) & (memory["space"] == sp))
        r = memory[idx]
        live = (r["count"] > 0) & (r["nbytes"] > 0)
        last_row = r["addr"] + (r["count"] - 1) * r["stride"]
        lo = np.minimum(r["addr"], last_row)
        hi = np.maximum(r["addr"], last_row) + r["nbytes"]
        out = live & ((lo < 0) | (hi > entry["nbytes"]))
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise TraceError(
                f"memory: {int(out.sum())} record(s) of tensor {name!r} in {entry['space']} "
                f"reach outside its {entry['nbytes']} B allocation (first: index {int(idx[i])}, "
                f"seq {int(r['seq'][i])}, bytes [{int(lo[i])}, {int(hi[i])}))"
            )


def _check_kernels(sparsity: np.ndarray, events: np.ndarray) -> None:
    """Where a trace has kernels, every sparsity record names one of them."""
    begun = events["kernel"][events["kind"] == 0]
    if not begun.size or not sparsity.size:
        return
    orphan = ~np.isin(sparsity["kernel"], begun)
    if orphan.any():
        i = int(np.flatnonzero(orphan)[0])
        raise TraceError(
            f"sparsity: {int(orphan.sum())} record(s) name a kernel without a kernel_begin "
            f"(first: index {i}, seq {int(sparsity['seq'][i])}, "
            f"kernel={int(sparsity['kernel'][i])})"
        )
