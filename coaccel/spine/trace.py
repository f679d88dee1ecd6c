"""The trace contract between the bit-exact references (``models/``) and the simulators (``sim/``).

A :class:`Trace` is four columnar numpy structured arrays plus a JSON metadata header:

* ``compute``: operations (GEMM tiles, dot products, quantize, softmax, exp, ...) with shapes
  and the CTA that runs them;
* ``memory``: logical accesses, each possibly a strided run (``count`` rows of ``nbytes``
  spaced ``stride`` bytes) in a named memory space (DRAM, HBM, HOST, L2, SMEM, REG, ACT,
  PSUM, WGT, URAM, ...);
* ``sparsity``: DeltaLLM per-column events (exact / delta / mixed, skipped or not), each in
  the kernel that does its work;
* ``events``: kernel begin/end (with the launch geometry), stream record/wait, sync.

Every record has a ``seq`` number, unique across the four arrays and increasing in issue order;
``dep`` names the ``seq`` of an earlier record (or -1). Name-valued fields (``op``, ``space``,
``tensor`` ...) are int32 indices into string tables kept in the metadata; index 0 of every
table is ``""`` (none); the builder lists names in order of first use. The metadata also carries
a tensor map (tensor name -> memory space, base address, bytes) that places the tensors in
their address spaces, and the config digest and seed of the run.

:class:`TraceBuilder` interns names as records are added, one at a time or in bulk from arrays;
bulk adds may give their own seq numbers, in any order, and the builder sorts at the end.
``Trace.save`` / ``Trace.load`` use one ``.npz`` file without pickles; ``load`` also reads
version-1 files and upgrades them. :func:`storage_bytes` is the one byte count of elements
stored at a fractional number of bits. The exact dtypes and conventions are in
``docs/trace.md``.

This module depends on numpy only: ``coaccel.models`` imports it.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "COMPUTE_DTYPE",
    "EVENT_DTYPE",
    "EVENT_KINDS",
    "MEMORY_DTYPE",
    "SPARSITY_DTYPE",
    "SPARSITY_KIND_BITS",
    "TABLE_FIELDS",
    "TRACE_VERSION",
    "UNITS",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "storage_bytes",
]

TRACE_VERSION = 2
"""Schema version written into every trace; :meth:`Trace.load` reads this version and
upgrades version 1 (docs/trace.md, "Versioning")."""

_FORMAT = "coaccel.trace"

COMPUTE_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("kernel", "<i4"),
        ("cta", "<i4"),
        ("unit", "<i4"),
        ("op", "<i4"),
        ("m", "<i8"),
        ("n", "<i8"),
        ("k", "<i8"),
        ("macs", "<i8"),
        ("fmt_a", "<i4"),
        ("fmt_b", "<i4"),
        ("tile", "<i8"),
        ("dep", "<i8"),
        ("stream", "<i4"),
    ]
)
"""One operation: ``m x k`` by ``k x n`` shape, ``macs`` multiply-accumulates, run by CTA
``cta`` of kernel ``kernel`` (-1: no CTAs, e.g. an ASIC or FPGA unit)."""

MEMORY_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("kernel", "<i4"),
        ("cta", "<i4"),
        ("phase", "<i4"),
        ("tensor", "<i4"),
        ("space", "<i4"),
        ("rw", "u1"),
        ("addr", "<i8"),
        ("nbytes", "<i8"),
        ("stride", "<i8"),
        ("count", "<i8"),
        ("dep", "<i8"),
        ("stream", "<i4"),
    ]
)
"""One logical access: ``count`` rows of ``nbytes`` bytes, row ``i`` at ``addr + i*stride``."""

SPARSITY_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("kernel", "<i4"),
        ("layer", "<i4"),
        ("head", "<i4"),
        ("qblock", "<i4"),
        ("column", "<i8"),
        ("kind", "u1"),
        ("nnz", "<i4"),
        ("lanes", "<u8"),
    ]
)
"""One DeltaLLM key column of one query block ([OURS] cycle model, docs/trace.md), in ``kernel``."""

EVENT_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("kind", "u1"),
        ("kernel", "<i4"),
        ("name", "<i4"),
        ("stream", "<i4"),
        ("dep", "<i8"),
        ("ctas", "<i8"),
        ("threads_per_cta", "<i4"),
        ("smem_bytes_per_cta", "<i8"),
        ("regs_per_thread", "<i4"),
    ]
)
"""One control event: kernel begin/end, stream record/wait, device sync. A ``kernel_begin``
carries the launch geometry (``ctas``, ``threads_per_cta``, ``smem_bytes_per_cta``,
``regs_per_thread``; 0 = unknown); on every other event these are 0."""


def _field_names(dtype: np.dtype) -> tuple[str, ...]:
    """The field names of a structured dtype, in record order.

    numpy types ``dtype.names`` as optional (None for a plain dtype). Every record layout
    here is structured and arrays are checked against those layouts first, so None means a
    bug in this module, not bad input.

    Raises:
        TypeError: ``dtype`` is not structured.
    """
    names = dtype.names
    if names is None:
        raise TypeError(f"expected a structured record dtype, got {dtype}")
    return names


# Version-1 record layouts, read by Trace.load and upgraded (see _upgrade_v1).
_V1_DTYPES = {
    "compute": np.dtype([(n, COMPUTE_DTYPE[n]) for n in _field_names(COMPUTE_DTYPE) if n != "cta"]),
    "memory": MEMORY_DTYPE,
    "sparsity": np.dtype(
        [(n, SPARSITY_DTYPE[n]) for n in _field_names(SPARSITY_DTYPE) if n != "kernel"]
    ),
    "events": np.dtype([(n, EVENT_DTYPE[n]) for n in _field_names(EVENT_DTYPE)[:7]]),
}

_DTYPES = {
    "compute": COMPUTE_DTYPE,
    "memory": MEMORY_DTYPE,
    "sparsity": SPARSITY_DTYPE,
    "events": EVENT_DTYPE,
}
_KINDS = tuple(_DTYPES)
# Field names per kind, in record order (seq first).
_FIELDS = {kind: _field_names(dt) for kind, dt in _DTYPES.items()}

TABLE_FIELDS: Mapping[tuple[str, str], str] = {
    ("compute", "unit"): "unit",
    ("compute", "op"): "op",
    ("compute", "fmt_a"): "fmt",
    ("compute", "fmt_b"): "fmt",
    ("memory", "phase"): "phase",
    ("memory", "tensor"): "tensor",
    ("memory", "space"): "space",
    ("events", "name"): "kernel_name",
}
"""(record kind, field) -> the string table its int32 values index."""

_TABLES = ("unit", "op", "fmt", "phase", "tensor", "space", "kernel_name")

SPARSITY_KIND_BITS: Mapping[str, int] = {"exact": 1, "delta": 2, "mixed": 3, "skipped": 4}
"""``sparsity.kind`` is a bit set: exact (1) and/or delta (2) for the QK work of the column
(both = mixed, 3), plus skipped (4) when its PV work is skipped; e.g. a skipped delta column is
6. At least one of exact/delta is set."""

EVENT_KINDS: tuple[str, ...] = ("kernel_begin", "kernel_end", "record", "wait", "sync")
"""``events.kind`` values, by index."""

UNITS: Mapping[str, str] = {
    "compute.m": "elements",
    "compute.n": "elements",
    "compute.k": "elements",
    "compute.macs": "MAC",
    "memory.addr": "B",
    "memory.nbytes": "B",
    "memory.stride": "B",
    "memory.count": "rows",
    "sparsity.nnz": "elements",
    "sparsity.lanes": "bitmask (bit i = lane i)",
    "events.ctas": "CTAs",
    "events.threads_per_cta": "threads",
    "events.smem_bytes_per_cta": "B",
    "events.regs_per_thread": "registers",
}
"""Units of the numeric columns, stored in every trace's ``meta["units"]``."""


class TraceError(ValueError):
    """A trace that breaks the contract: bad dtype, version, table index, field value or file."""


def storage_bytes(elems: Any, bits_per_element: Fraction | int) -> Any:
    """Bytes that ``elems`` elements take at a fractional number of bits each, rounded up.

    ``ceil(elems * bits_per_element / 8)`` in exact integer arithmetic (no float rounding):
    the byte count of a block-quantized tensor or tile whose side information (scales,
    selector bits) makes the bits per element a fraction, e.g. ``Fraction(33, 8)``.

    Args:
        elems: element count: a Python or numpy integer, or an integer array of any shape.
        bits_per_element: exact bits per element (``Fraction`` or int), > 0.

    Returns:
        Bytes: a Python int for a scalar count, else an int64 array of ``elems``'s shape.

    Raises:
        TraceError: a non-positive or non-rational bit count, negative or non-integer
            counts, or a product that overflows int64.
    """
    if isinstance(bits_per_element, bool) or not isinstance(bits_per_element, (int, Fraction)):
        raise TraceError(f"bits_per_element must be an int or Fraction, got {bits_per_element!r}")
    num = bits_per_element.numerator
    den = 8 * bits_per_element.denominator
    if num <= 0:
        raise TraceError(f"bits_per_element must be positive, got {bits_per_element}")
    if isinstance(elems, int) and not isinstance(elems, bool):
        if elems < 0:
            raise TraceError(f"elems must be >= 0, got {elems}")
        return -(-elems * num // den)
    arr = np.asarray(elems)
    if arr.dtype.kind not in "iu":
        raise TraceError(f"elems must be integers, got {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        if arr.min() < 0:
            raise TraceError(f"elems must be >= 0, got {int(arr.min())}")
        if int(arr.max()) * num + den > _MAX_I8:
            raise TraceError(f"elems * bits overflows int64 (up to {int(arr.max())} elements)")
    out = (arr * num + (den - 1)) // den
    return int(out) if out.ndim == 0 else out


def _coaccel_version() -> str:
    try:
        return _metadata.version("coaccel")
    except _metadata.PackageNotFoundError:
        return "unknown"


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


# ---------------------------------------------------------------------------------------------
# Validation shared by Trace() and Trace.load()


# Launch geometry of a kernel_begin event (0 = unknown; 0 on every other event).
_GEOMETRY = ("ctas", "threads_per_cta", "smem_bytes_per_cta", "regs_per_thread")

# Fields that must be >= 0, per kind (seq too, everywhere).
_NONNEG: dict[str, tuple[str, ...]] = {
    "compute": ("m", "n", "k", "macs"),
    "memory": ("cta", "addr", "nbytes", "count"),
    "sparsity": ("layer", "head", "qblock", "column", "nnz"),
    "events": _GEOMETRY,
}

_LIMITS = {
    kind: {name: np.iinfo(dt[name]) for name in _FIELDS[kind]} for kind, dt in _DTYPES.items()
}


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
_MAX_I8 = int(np.iinfo(np.int64).max)


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


# ---------------------------------------------------------------------------------------------
# Trace


@dataclass(frozen=True, eq=False)
class Trace:
    """An immutable trace: metadata plus four read-only structured arrays.

    Construct with :class:`TraceBuilder`, :meth:`load` or :meth:`concat`; the constructor
    validates everything (dtypes, versions, table indices, field ranges, seq/dep order).

    Attributes:
        meta: JSON metadata: ``format``, ``version``, ``coaccel_version``, ``producer``,
            ``workload``, ``config_digest`` (str or None), ``seed`` (int or None), ``units``,
            ``tables``, ``tensors`` (name -> ``{"space", "base_addr", "nbytes"}``) (+
            ``parts`` after :meth:`concat`). Treat as read-only.
        compute: shape (N_c,), dtype :data:`COMPUTE_DTYPE`.
        memory: shape (N_m,), dtype :data:`MEMORY_DTYPE`.
        sparsity: shape (N_s,), dtype :data:`SPARSITY_DTYPE`.
        events: shape (N_e,), dtype :data:`EVENT_DTYPE`.
    """

    meta: dict[str, Any]
    compute: np.ndarray
    memory: np.ndarray
    sparsity: np.ndarray
    events: np.ndarray

    def __post_init__(self) -> None:
        # JSON-normalized, so that a saved and reloaded trace has an equal meta.
        object.__setattr__(self, "meta", _normalize_json(self.meta, "metadata"))
        _check_meta(self.meta)
        seqs = []
        for kind in _KINDS:
            a = getattr(self, kind)
            if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != _DTYPES[kind]:
                got = getattr(a, "dtype", type(a).__name__)
                raise TraceError(
                    f"{kind}: expected a 1-D array of dtype {_DTYPES[kind]}, got {got} "
                    f"with shape {getattr(a, 'shape', None)}"
                )
            _check_columns(kind, a, self.meta["tables"])
            if a.flags.writeable:
                a = a.copy()
                a.flags.writeable = False
                object.__setattr__(self, kind, a)
            seqs.append(a["seq"])
        if sum(1 for q in seqs if q.size) > 1:
            # Each kind is strictly increasing already; a stable sort (timsort, which finds
            # the sorted runs) of their concatenation shows any seq shared between kinds.
            merged = np.sort(np.concatenate(seqs), kind="stable")
            if np.any(merged[1:] == merged[:-1]):
                raise TraceError("seq numbers are not unique across compute/memory/sparsity/events")
        _check_placement(self.memory, self.meta)
        _check_kernels(self.sparsity, self.events)

    # -- tables ---------------------------------------------------------------------------

    def table(self, name: str) -> tuple[str, ...]:
        """A string table, e.g. ``trace.table("space") == ("", "DRAM", "ACT")``."""
        return tuple(self.meta["tables"][name])

    def decode(self, kind: str, field: str) -> npt.NDArray[np.str_]:
        """The names of a table-indexed column.

        Args:
            kind: ``"compute"``, ``"memory"`` or ``"events"``.
            field: a table-indexed field of that kind (see :data:`TABLE_FIELDS`).

        Returns:
            Shape (N,) array of str.
        """
        table = np.asarray(self.meta["tables"][TABLE_FIELDS[(kind, field)]], dtype=np.str_)
        return table[getattr(self, kind)[field]]

    def _codes(self, table: str, names: str | Sequence[str]) -> np.ndarray:
        wanted = [names] if isinstance(names, str) else list(names)
        t = self.meta["tables"][table]
        return np.asarray([t.index(n) for n in wanted if n in t], dtype=np.int32)

    # -- summaries ------------------------------------------------------------------------

    def total_bytes(
        self,
        space: str | Sequence[str] | None = None,
        rw: int | str | None = None,
        tensor: str | Sequence[str] | None = None,
    ) -> int:
        """Bytes moved by memory records (``nbytes * count`` summed), optionally filtered.

        Args:
            space: a space name or names (e.g. ``"DRAM"``); None for all.
            rw: 0/``"r"``/``"read"`` or 1/``"w"``/``"write"``; None for both.
            tensor: a tensor name or names; None for all.

        Returns:
            Total bytes (a name that no record uses contributes 0).
        """
        a = self.memory
        mask = np.ones(a.size, dtype=bool)
        if space is not None:
            mask &= np.isin(a["space"], self._codes("space", space))
        if tensor is not None:
            mask &= np.isin(a["tensor"], self._codes("tensor", tensor))
        if rw is not None:
            mask &= a["rw"] == _rw_code(rw)
        return int(np.sum(a["nbytes"][mask] * a["count"][mask], dtype=np.int64))

    def total_macs(self, op: str | Sequence[str] | None = None) -> int:
        """MACs of compute records, optionally only those of some ops.

        Args:
            op: an op name or names (e.g. ``"gemm"``); None for all.

        Returns:
            Total multiply-accumulates.
        """
        a = self.compute
        if op is not None:
            a = a[np.isin(a["op"], self._codes("op", op))]
        return int(np.sum(a["macs"], dtype=np.int64))

    def summary(self) -> dict[str, Any]:
        """Record counts, total MACs and bytes per (space, read/write), as plain data."""
        out: dict[str, Any] = {f"n_{k}": int(getattr(self, k).size) for k in _KINDS}
        out["macs"] = self.total_macs()
        by: dict[str, int] = {}
        m = self.memory
        if m.size:
            key = m["space"].astype(np.int64) * 2 + m["rw"]
            uniq, inv = np.unique(key, return_inverse=True)
            sums = np.zeros(uniq.size, dtype=np.int64)
            np.add.at(sums, inv, m["nbytes"] * m["count"])
            spaces = self.meta["tables"]["space"]
            for u, s in zip(uniq.tolist(), sums.tolist(), strict=True):
                by[f"{spaces[u >> 1]}.{'write' if u & 1 else 'read'}"] = s
        out["bytes"] = by
        return out

    # -- combination ----------------------------------------------------------------------

    def concat(self, other: Trace) -> Trace:
        """This trace followed by another.

        ``other``'s seq (and dep) numbers are shifted past this trace's, its kernel ids past
        this trace's largest, and its table indices remapped into merged tables (this trace's
        names keep their indices). Streams, CTAs, tiles and addresses are kept. The tensor maps
        are merged (a tensor in both must have the same placement). Metadata fields that
        differ between the two become a ``parts`` list (producer, workload, config_digest,
        seed and offsets of each part); equal fields stay as they are.

        Args:
            other: the trace to append.

        Returns:
            A new trace.

        Raises:
            TraceError: a tensor placed differently in the two traces, or a merged tensor
                map with overlapping tensors.
        """
        tensors = dict(self.meta["tensors"])
        for name, entry in other.meta["tensors"].items():
            if tensors.setdefault(name, entry) != entry:
                raise TraceError(
                    f"concat: tensor {name!r} is placed differently in the two traces "
                    f"({tensors[name]} and {entry})"
                )
        tables = {name: list(t) for name, t in self.meta["tables"].items()}
        remap = {}
        for name, names in other.meta["tables"].items():
            merged = tables[name]
            pos = {s: i for i, s in enumerate(merged)}
            for s in names:
                if s not in pos:
                    pos[s] = len(merged)
                    merged.append(s)
            remap[name] = np.asarray([pos[s] for s in names], dtype=np.int32)
        seq_off = _max_seq(self) + 1
        kern_off = _max_kernel(self) + 1
        arrays = {}
        for kind in _KINDS:
            b = getattr(other, kind).copy()
            b["seq"] += seq_off
            if "dep" in b.dtype.names:
                b["dep"] = np.where(b["dep"] >= 0, b["dep"] + seq_off, -1)
            if "kernel" in b.dtype.names:
                b["kernel"] += kern_off
            for (k, field), table in TABLE_FIELDS.items():
                if k == kind:
                    b[field] = remap[table][b[field]]
            arrays[kind] = np.concatenate([getattr(self, kind), b])
        parts = _parts(self, 0, 0) + _parts(other, seq_off, kern_off)
        meta = dict(self.meta, tables=tables, tensors=tensors, parts=parts)
        # A field the parts disagree on gets a neutral value; the parts keep each one.
        neutral: dict[str, Any] = {"workload": {}, "config_digest": None, "seed": None}
        for key in ("producer", "workload", "config_digest", "seed"):
            if any(p[key] != parts[0][key] for p in parts[1:]):
                if key == "producer":
                    meta[key] = "+".join(dict.fromkeys(p["producer"] for p in parts))
                else:
                    meta[key] = neutral[key]
        return Trace(meta, **arrays)

    # -- files ----------------------------------------------------------------------------

    def save(self, path: str | Path, *, compress: bool = False) -> None:
        """Write the trace to one ``.npz`` file (no pickles), exactly at ``path``.

        Args:
            path: destination (no suffix is added).
            compress: zip-deflate the arrays (smaller, slower).
        """
        text = json.dumps(self.meta, sort_keys=True, allow_nan=False)
        save = np.savez_compressed if compress else np.savez
        # Written under a temporary name in the same folder, then renamed: an interrupted save
        # never leaves a truncated trace at ``path``.
        dest = Path(path)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                save(f, meta=np.asarray(text), **{k: getattr(self, k) for k in _KINDS})
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read and validate a trace written by :meth:`save`.

        Args:
            path: the ``.npz`` file.

        Returns:
            The trace, bit-identical to the one saved. A version-1 file comes back as the
            version-2 trace it stands for (:func:`_upgrade_v1`; docs/trace.md).

        Raises:
            TraceError: not a trace file, unsupported version, wrong dtypes, out-of-table
                indices or invalid field values (the message says which).
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
        try:
            if isinstance(meta, dict) and meta.get("version") == 1:
                meta, arrays = _upgrade_v1(meta, arrays)
            return cls(meta, **arrays)
        except TraceError as e:
            raise TraceError(f"{path}: {e}") from None

    def equals(self, other: Trace) -> bool:
        """True when metadata and every array are bit-identical (dtype and bytes)."""
        return self.meta == other.meta and all(
            getattr(self, k).dtype == getattr(other, k).dtype
            and getattr(self, k).tobytes() == getattr(other, k).tobytes()
            for k in _KINDS
        )


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


def _max_seq(t: Trace) -> int:
    m = [int(getattr(t, k)["seq"].max()) for k in _KINDS if getattr(t, k).size]
    return max(m, default=-1)


def _max_kernel(t: Trace) -> int:
    kinds = [k for k in _KINDS if getattr(t, k).size]
    return max((int(getattr(t, k)["kernel"].max()) for k in kinds), default=-1)


def _parts(t: Trace, seq_off: int, kern_off: int) -> list[dict[str, Any]]:
    if "parts" in t.meta:
        return [
            {
                **p,
                "seq_offset": p["seq_offset"] + seq_off,
                "kernel_offset": p["kernel_offset"] + kern_off,
            }
            for p in t.meta["parts"]
        ]
    return [
        {
            "producer": t.meta["producer"],
            "workload": t.meta["workload"],
            "config_digest": t.meta["config_digest"],
            "seed": t.meta["seed"],
            "seq_offset": seq_off,
            "kernel_offset": kern_off,
        }
    ]


# ---------------------------------------------------------------------------------------------
# Builder


def _rw_code(rw: int | str) -> int:
    if isinstance(rw, str):
        code = {"r": 0, "read": 0, "w": 1, "write": 1}.get(rw)
    elif isinstance(rw, (int, np.integer)) and not isinstance(rw, bool):
        code = int(rw) if int(rw) in (0, 1) else None
    else:
        code = None
    if code is None:
        raise TraceError(f"rw must be 0/'r'/'read' or 1/'w'/'write', got {rw!r}")
    return code


def _sparsity_kind_code(kind: int | str) -> int:
    if isinstance(kind, str):
        code = 0
        for part in kind.split("+"):
            bit = SPARSITY_KIND_BITS.get(part.strip())
            if bit is None:
                raise TraceError(
                    f"unknown sparsity kind {part!r} in {kind!r}; "
                    f"kinds: {', '.join(SPARSITY_KIND_BITS)} (combine with '+')"
                )
            code |= bit
    elif isinstance(kind, (int, np.integer)) and not isinstance(kind, bool):
        code = int(kind)
    else:
        raise TraceError(f"sparsity kind must be a name or an int, got {kind!r}")
    if not (0 < code < 8 and code & 3):
        raise TraceError(f"sparsity kind {kind!r} must include 'exact' and/or 'delta'")
    return code


def _event_kind_code(kind: int | str) -> int:
    if isinstance(kind, str):
        if kind not in EVENT_KINDS:
            raise TraceError(f"unknown event kind {kind!r}; kinds: {', '.join(EVENT_KINDS)}")
        return EVENT_KINDS.index(kind)
    if isinstance(kind, (int, np.integer)) and not isinstance(kind, bool):
        if 0 <= int(kind) < len(EVENT_KINDS):
            return int(kind)
    raise TraceError(f"event kind must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")


# Default value of every field when a record does not give it; "seq" is assigned, and
# fields without a default are required.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "compute": {
        "kernel": 0,
        "cta": -1,
        "unit": "",
        "m": 0,
        "n": 0,
        "k": 0,
        "fmt_a": "",
        "fmt_b": "",
        "tile": -1,
        "dep": -1,
        "stream": 0,
    },
    "memory": {
        "kernel": 0,
        "cta": 0,
        "phase": "",
        "tensor": "",
        "addr": 0,
        "count": 1,
        "dep": -1,
        "stream": 0,
    },
    "sparsity": {"kernel": 0, "nnz": 0},
    "events": {
        "kernel": 0,
        "name": "",
        "stream": 0,
        "dep": -1,
        "ctas": 0,
        "threads_per_cta": 0,
        "smem_bytes_per_cta": 0,
        "regs_per_thread": 0,
    },
}


class TraceBuilder:
    """Collects records and builds a :class:`Trace`.

    Name-valued fields take strings, interned into the trace's tables. Records get increasing
    ``seq`` numbers in the order they are added, across all kinds; the ``add`` methods return
    them so that later records can name them in ``dep``.

    The bulk methods (``*_many``) may instead take the seq numbers of their records
    (``seq=``, one per record, unique across the whole trace, in any order): a program that
    knows its issue order can then add all reads, all computes and all writes as one column
    each. :meth:`build` puts every kind in seq order and lists each table's names in order of
    first use (by seq, then field), exactly as adding the records one at a time in seq order
    would; records added later without ``seq`` continue after the largest seq so far.

    Args:
        producer: what made the trace, e.g. ``"coaccel.models.hbq.gemm"``.
        workload: JSON data describing the workload (model shape, tokens, ...).
        config_digest: :func:`coaccel.config.config_digest` of the config used, or None.
        seed: the seed of the run, or None if nothing was random.
    """

    def __init__(
        self,
        *,
        producer: str,
        workload: Mapping[str, Any] | None = None,
        config_digest: str | None = None,
        seed: int | None = None,
    ) -> None:
        if not isinstance(producer, str) or not producer:
            raise TraceError("producer must be a non-empty string")
        if config_digest is not None and (not isinstance(config_digest, str) or not config_digest):
            raise TraceError(
                f"config_digest must be a non-empty string, or None when there is no config; "
                f"got {config_digest!r}"
            )
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TraceError(f"seed must be an integer or None, got {seed!r}")
            seed = int(seed)
        self._meta = {
            "format": _FORMAT,
            "version": TRACE_VERSION,
            "coaccel_version": _coaccel_version(),
            "producer": producer,
            "workload": _normalize_json(dict(workload or {}), "workload"),
            "config_digest": config_digest,
            "seed": seed,
            "units": dict(UNITS),
        }
        self._tensors: dict[str, dict[str, Any]] = {}
        self._tables: dict[str, list[str]] = {t: [""] for t in _TABLES}
        self._index: dict[str, dict[str, int]] = {t: {"": 0} for t in _TABLES}
        self._rows: dict[str, list[tuple]] = {k: [] for k in _KINDS}
        self._chunks: dict[str, list[np.ndarray]] = {k: [] for k in _KINDS}
        self._seq = 0  # one past the largest seq so far
        self._count = 0
        self._in_order = True  # every record added so far came after all earlier ones
        # Per table: code -> seq * 32 + field position of its first use.
        self._first_use: dict[str, dict[int, int]] = {t: {} for t in _TABLES}
        self._next_kernel = 0

    # -- tensor map -----------------------------------------------------------------------

    def allocate(
        self,
        tensor: str,
        *,
        space: str,
        nbytes: int,
        base_addr: int | None = None,
        align_bytes: int = 256,
    ) -> int:
        """Place a tensor in a memory space (an entry of the trace's tensor map).

        Memory records of ``tensor`` in ``space`` then address bytes ``0 .. nbytes - 1`` of
        it (``addr`` is relative to the tensor); a simulator adds ``base_addr`` to hash an
        access to cache sets and memory channels. The trace checks that the tensors of one
        space do not overlap and that those records stay inside their tensor.

        Args:
            tensor: tensor name (as in the memory records).
            space: memory space of the allocation (``"HBM"``, ``"DRAM"``, ``"HOST"``, ...).
            nbytes: allocation size, B.
            base_addr: first byte address in ``space``, B; None places the tensor after the
                highest allocation of the space so far, rounded up to ``align_bytes``.
            align_bytes: alignment of an automatic ``base_addr``, B (>= 1).

        Returns:
            The tensor's base address, B.

        Raises:
            TraceError: a tensor allocated twice, bad sizes, or an overlap.
        """
        if not isinstance(tensor, str) or not tensor:
            raise TraceError(f"tensor must be a non-empty name, got {tensor!r}")
        if tensor in self._tensors:
            raise TraceError(f"tensor {tensor!r} is already allocated: {self._tensors[tensor]}")
        if isinstance(align_bytes, bool) or not isinstance(align_bytes, int) or align_bytes < 1:
            raise TraceError(f"align_bytes must be a positive integer, got {align_bytes!r}")
        if base_addr is None:
            same_space = (e for e in self._tensors.values() if e["space"] == space)
            end = max((e["base_addr"] + e["nbytes"] for e in same_space), default=0)
            base_addr = -(-end // align_bytes) * align_bytes
        entry: dict[str, Any] = {"space": space, "base_addr": base_addr, "nbytes": nbytes}
        for key in ("base_addr", "nbytes"):
            if isinstance(entry[key], np.integer):
                entry[key] = int(entry[key])
        _check_tensor_map({**self._tensors, tensor: entry})
        self._tensors[tensor] = entry
        return entry["base_addr"]

    # -- helpers --------------------------------------------------------------------------

    def _intern(self, table: str, name: str) -> int:
        idx = self._index[table].get(name)
        if idx is None:
            if not isinstance(name, str):
                raise TraceError(f"{table} names must be strings, got {name!r}")
            idx = len(self._tables[table])
            self._tables[table].append(name)
            self._index[table][name] = idx
        return idx

    def _intern_many(self, table: str, names: Any, n: int) -> np.ndarray:
        if n == 0:
            return np.zeros(0, dtype=np.int32)  # no record uses the name: not interned
        if isinstance(names, str):
            return np.full(n, self._intern(table, names), dtype=np.int32)
        arr = np.asarray(names)
        if arr.dtype.kind != "U":
            raise TraceError(f"{table} names must be strings, got an array of {arr.dtype}")
        uniq, first, inv = np.unique(arr.ravel(), return_index=True, return_inverse=True)
        codes = np.zeros(uniq.size, dtype=np.int32)
        # Intern in order of first appearance, as record-by-record adding would.
        for i in np.argsort(first, kind="stable").tolist():
            codes[i] = self._intern(table, str(uniq[i]))
        return np.broadcast_to(codes[inv].reshape(arr.shape), (n,))

    @contextlib.contextmanager
    def _tables_kept_on_error(self) -> Iterator[None]:
        # A record that fails validation must not leave its names in the tables.
        sizes = {t: len(v) for t, v in self._tables.items()}
        try:
            yield
        except BaseException:
            for t, size in sizes.items():
                for name in self._tables[t][size:]:
                    del self._index[t][name]
                del self._tables[t][size:]
            raise

    def _flush(self, kind: str) -> None:
        rows = self._rows[kind]
        if rows:
            self._chunks[kind].append(np.array(rows, dtype=_DTYPES[kind]))
            rows.clear()

    def _check_dep(self, dep: Any, seq: int) -> None:
        if isinstance(dep, bool) or not isinstance(dep, (int, np.integer)):
            raise TraceError(f"dep must be an integer seq, got {dep!r}")
        if not (dep == -1 or 0 <= dep < seq):
            raise TraceError(f"dep must be -1 or the seq of an earlier record, got {dep}")

    def _add_one(self, kind: str, fields: dict[str, Any]) -> int:
        # Per-field checks in plain Python: this path is for small traces and must stay cheap.
        seq = self._seq
        if "dep" in fields:
            self._check_dep(fields["dep"], seq)
        dtype = _DTYPES[kind]
        limits = _LIMITS[kind]
        row: list[Any] = [seq]
        names: list[tuple[int, str, str]] = []  # interned once the whole record is valid
        for name in _FIELDS[kind][1:]:
            value = fields[name]
            table = TABLE_FIELDS.get((kind, name))
            if table is not None:
                if not isinstance(value, str):
                    raise TraceError(f"{kind}.{name} takes a name (str), got {value!r}")
                names.append((len(row), table, value))
                row.append(0)
                continue
            try:
                v = operator.index(value)
            except TypeError:
                raise TraceError(f"{kind}.{name} must be an integer, got {value!r}") from None
            if not limits[name].min <= v <= limits[name].max:
                raise TraceError(f"{kind}.{name}={v} does not fit {dtype[name]}")
            if v < 0 and name in _NONNEG[kind]:
                raise TraceError(f"{kind}.{name} must be >= 0, got {v}")
            row.append(v)
        if kind == "compute" and fields["cta"] < -1:
            raise TraceError(f"compute.cta={fields['cta']}: cta below -1 (-1 = no CTAs)")
        if kind == "events" and fields["kind"] != 0 and any(fields[f] for f in _GEOMETRY):
            raise TraceError("launch geometry (ctas, threads_per_cta, ...): kernel_begin only")
        for pos, table, value in names:
            code = row[pos] = self._intern(table, value)
            if code and code not in self._first_use[table]:
                # Later records have larger seqs: the first record to use a code is its first use.
                self._first_use[table][code] = seq * 32 + pos
        self._rows[kind].append(tuple(row))
        self._seq += 1
        self._count += 1
        return seq

    def _fill(
        self, kind: str, columns: dict[str, Any], seq: npt.NDArray[np.int64], n: int
    ) -> tuple[np.ndarray, bool, list[tuple[str, int, Any]]]:
        """The records of a bulk add; whether a value may break the contract (a negative
        size, a missing space, a cta below -1); and the table codes it uses."""
        dtype = _DTYPES[kind]
        defaults = _DEFAULTS[kind]
        out = np.empty(n, dtype=dtype)
        out["seq"] = seq
        suspect = False
        uses: list[tuple[str, int, Any]] = []
        for pos, name in enumerate(_FIELDS[kind][1:], start=1):
            value = columns.get(name, defaults.get(name))
            table = TABLE_FIELDS.get((kind, name))
            if table is not None:
                # Interned codes are in their table by construction.
                codes = self._intern_many(table, value, n)
                scalar = isinstance(value, str)
                uses.append((table, pos, int(codes[0]) if scalar and n else codes))
                suspect |= kind == "memory" and name == "space" and n > 0 and codes.min() == 0
                out[name] = codes
                continue
            value = np.asarray(value)
            if value.dtype.kind not in "iu":
                raise TraceError(f"{kind}.{name}: expected integers, got {value.dtype}")
            if value.size:
                info = _LIMITS[kind][name]
                lo, hi = value.min(), value.max()
                if lo < info.min or hi > info.max:
                    raise TraceError(f"{kind}.{name}: values outside the range of {dtype[name]}")
                suspect |= bool(lo < 0 and name in _NONNEG[kind])
                suspect |= bool(kind == "compute" and name == "cta" and lo < -1)
            out[name] = value
        return out, suspect, uses

    def _note_uses(
        self, table: str, pos: int, codes: Any, seq: npt.NDArray[np.int64], first_seq: int
    ) -> None:
        """Remember the first use (by seq, then field position) of each code."""
        first = self._first_use[table]
        if isinstance(codes, int):
            if codes:
                first[codes] = min(first.get(codes, _MAX_I8), first_seq * 32 + pos)
            return
        uniq, inv = np.unique(codes, return_inverse=True)
        earliest = np.full(uniq.size, _MAX_I8, dtype=np.int64)
        np.minimum.at(earliest, inv.ravel(), seq)
        for c, e in zip(uniq.tolist(), earliest.tolist(), strict=True):
            if c:
                first[c] = min(first.get(c, _MAX_I8), e * 32 + pos)

    def _add_many(
        self, kind: str, columns: dict[str, Any], seq: Any = None
    ) -> npt.NDArray[np.int64]:
        names = _FIELDS[kind]
        unknown = set(columns) - set(names) | ({"seq"} & set(columns))
        if unknown:
            valid = ", ".join(n for n in names if n != "seq")
            raise TraceError(f"{kind}: unknown column(s) {sorted(unknown)}; columns: {valid}")
        defaults = _DEFAULTS[kind]
        missing = [n for n in names[1:] if n not in columns and n not in defaults]
        if missing:
            raise TraceError(f"{kind}: missing column(s) {missing}")
        shapes = [np.shape(v) for k, v in columns.items() if not isinstance(v, str)]
        if seq is not None:
            seq = np.asarray(seq)
            if seq.ndim != 1 or seq.dtype.kind not in "iu":
                raise TraceError(f"{kind}: seq must be a 1-D array of integers, got {seq!r:.80}")
            shapes.append(seq.shape)
        try:
            shape = np.broadcast_shapes(*shapes) if shapes else ()
        except ValueError as e:
            raise TraceError(f"{kind}: columns do not broadcast: {e}") from None
        if len(shape) > 1:
            raise TraceError(f"{kind}: columns must be scalars or 1-D arrays, got shape {shape}")
        n = shape[0] if shape else 1
        if seq is None:
            seq = np.arange(self._seq, self._seq + n, dtype=np.int64)
        elif n and (seq.min() < 0 or seq.max() >= _MAX_I8):
            raise TraceError(f"{kind}: seq numbers must be in [0, 2**63 - 1)")
        with self._tables_kept_on_error():
            out, suspect, uses = self._fill(kind, columns, seq, n)
            seq = out["seq"]
            increasing = n < 2 or bool(np.all(seq[1:] > seq[:-1]))
            if not increasing:
                uniq, counts = np.unique(seq, return_counts=True)
                if uniq.size != n:
                    dup = int(uniq[np.argmax(counts > 1)])
                    raise TraceError(f"{kind}: seq {dup} is used by more than one record")
            in_order = not n or (increasing and int(seq[0]) >= self._seq)
            if "dep" in columns:
                dep = out["dep"]
                suspect |= bool(np.any(dep < -1) or np.any(dep >= seq))
            if suspect:  # find the offending records and name them
                _check_columns(kind, out, self._tables, seq_sorted=in_order)
            if kind == "events":
                begin = out["kind"] == 0
                for f in _GEOMETRY:
                    if np.any((out[f] != 0) & ~begin):
                        raise TraceError(f"events.{f}: launch geometry is for kernel_begin only")
        if n:
            self._flush(kind)
            self._chunks[kind].append(out)
            self._in_order &= in_order
            self._seq = max(self._seq, int(seq.max()) + 1)
            self._count += n
            first_seq = int(seq.min())
            for table, pos, codes in uses:
                self._note_uses(table, pos, codes, seq, first_seq)
        return seq.copy()

    # -- single records -------------------------------------------------------------------

    def compute(
        self,
        *,
        op: str,
        m: int = 0,
        n: int = 0,
        k: int = 0,
        macs: int | None = None,
        kernel: int = 0,
        cta: int = -1,
        unit: str = "",
        fmt_a: str = "",
        fmt_b: str = "",
        tile: int = -1,
        dep: int = -1,
        stream: int = 0,
    ) -> int:
        """Add one operation.

        Args:
            op: operation name (``"gemm"``, ``"dot"``, ``"quantize"``, ``"softmax"``, ...).
            m: rows of the ``m x k`` operand / output, elements.
            n: columns of the ``k x n`` operand / output, elements.
            k: reduction length, elements (0 for element-wise ops).
            macs: multiply-accumulates; default ``m * n * k``.
            kernel: kernel (launch) id.
            cta: CTA / thread block of the kernel that runs the operation, -1 for none
                (hardware without CTAs).
            unit: hardware unit name (``"pe_array"``, ``"softmax"``, ``"tensor_core"``).
            fmt_a: number format of the A operand (``"e2m1"``, ``"hbq-e"``, ``"int8"``).
            fmt_b: number format of the B operand.
            tile: tile index, -1 for none.
            dep: seq of a record this one waits for, -1 for none.
            stream: stream id.

        Returns:
            The record's seq.
        """
        if macs is None:
            macs = m * n * k
        if not op:
            raise TraceError("compute records need an op name")
        return self._add_one(
            "compute",
            dict(
                kernel=kernel,
                cta=cta,
                unit=unit,
                op=op,
                m=m,
                n=n,
                k=k,
                macs=macs,
                fmt_a=fmt_a,
                fmt_b=fmt_b,
                tile=tile,
                dep=dep,
                stream=stream,
            ),
        )

    def memory(
        self,
        *,
        space: str,
        rw: int | str,
        nbytes: int,
        tensor: str = "",
        addr: int = 0,
        stride: int | None = None,
        count: int = 1,
        kernel: int = 0,
        cta: int = 0,
        phase: str = "",
        dep: int = -1,
        stream: int = 0,
    ) -> int:
        """Add one logical access (or a strided run of ``count`` rows).

        Args:
            space: memory space name (``"DRAM"``, ``"HBM"``, ``"HOST"``, ``"L2"``, ``"SMEM"``,
                ``"REG"``, ``"ACT"``, ``"PSUM"``, ``"WGT"``, ``"URAM"``, ...).
            rw: 0 / ``"r"`` / ``"read"`` or 1 / ``"w"`` / ``"write"``.
            nbytes: bytes per row.
            tensor: tensor name (``"K"``, ``"V"``, ``"wq"``, ...).
            addr: byte offset of the first row within the tensor's allocation (B).
            stride: bytes between row starts; default ``nbytes`` (contiguous rows).
            count: number of rows.
            kernel: kernel (launch) id.
            cta: CTA / thread-block id within the kernel (0 where not applicable).
            phase: phase name within the kernel (``"load_q"``, ``"scan"``, ...).
            dep: seq of a record this one waits for, -1 for none.
            stream: stream id.

        Returns:
            The record's seq.
        """
        if not space:
            raise TraceError("memory records need a space name")
        return self._add_one(
            "memory",
            dict(
                kernel=kernel,
                cta=cta,
                phase=phase,
                tensor=tensor,
                space=space,
                rw=_rw_code(rw),
                addr=addr,
                nbytes=nbytes,
                stride=nbytes if stride is None else stride,
                count=count,
                dep=dep,
                stream=stream,
            ),
        )

    def sparsity(
        self,
        *,
        layer: int,
        head: int,
        qblock: int,
        column: int,
        kind: int | str,
        lanes: int,
        nnz: int = 0,
        kernel: int = 0,
    ) -> int:
        """Add one DeltaLLM column event.

        Args:
            layer: layer index.
            head: KV head index.
            qblock: query block index.
            column: key column j.
            kind: ``"exact"``, ``"delta"``, ``"mixed"``, optionally ``"+skipped"``
                (e.g. ``"delta+skipped"``), or the bit set (see :data:`SPARSITY_KIND_BITS`).
            lanes: bitmask of the valid lanes (bit i = lane i), < 2**64.
            nnz: nonzeros of the delta key (elements; 0 for exact-only columns).
            kernel: the kernel that does the column's work (0 where there are no kernels).

        Returns:
            The record's seq.
        """
        return self._add_one(
            "sparsity",
            dict(
                kernel=kernel,
                layer=layer,
                head=head,
                qblock=qblock,
                column=column,
                kind=_sparsity_kind_code(kind),
                nnz=nnz,
                lanes=lanes,
            ),
        )

    def event(
        self,
        kind: int | str,
        *,
        kernel: int = 0,
        name: str = "",
        stream: int = 0,
        dep: int = -1,
        ctas: int = 0,
        threads_per_cta: int = 0,
        smem_bytes_per_cta: int = 0,
        regs_per_thread: int = 0,
    ) -> int:
        """Add one control event.

        Args:
            kind: ``"kernel_begin"``, ``"kernel_end"``, ``"record"`` (mark a point in a stream),
                ``"wait"`` (``stream`` waits for the record ``dep``) or ``"sync"`` (all streams).
            kernel: kernel (launch) id.
            name: kernel name for begin/end (``"flash_decode"``, ``"memcpy_h2d"``).
            stream: stream id.
            dep: seq of the awaited record for ``"wait"``; -1 otherwise.
            ctas: grid size for ``"kernel_begin"``, CTAs (0 if unknown).
            threads_per_cta: threads per CTA for ``"kernel_begin"`` (0 if unknown).
            smem_bytes_per_cta: shared memory per CTA for ``"kernel_begin"``, B (0 if unknown).
            regs_per_thread: registers per thread for ``"kernel_begin"`` (0 if unknown).

        Returns:
            The record's seq.

        Raises:
            TraceError: launch geometry on an event other than ``"kernel_begin"``, or a bad
                value.
        """
        return self._add_one(
            "events",
            dict(
                kind=_event_kind_code(kind),
                kernel=kernel,
                name=name,
                stream=stream,
                dep=dep,
                ctas=ctas,
                threads_per_cta=threads_per_cta,
                smem_bytes_per_cta=smem_bytes_per_cta,
                regs_per_thread=regs_per_thread,
            ),
        )

    def begin_kernel(
        self,
        name: str,
        *,
        stream: int = 0,
        ctas: int = 0,
        threads_per_cta: int = 0,
        smem_bytes_per_cta: int = 0,
        regs_per_thread: int = 0,
    ) -> int:
        """Allocate the next kernel id and add its ``kernel_begin`` event.

        Args:
            name: kernel name.
            stream: stream the kernel runs on.
            ctas: grid size, CTAs (0 if unknown).
            threads_per_cta: threads per CTA (0 if unknown).
            smem_bytes_per_cta: shared memory per CTA, B (0 if unknown).
            regs_per_thread: registers per thread (0 if unknown).

        Returns:
            The new kernel id.
        """
        kid = self._next_kernel
        self.event(
            "kernel_begin",
            kernel=kid,
            name=name,
            stream=stream,
            ctas=ctas,
            threads_per_cta=threads_per_cta,
            smem_bytes_per_cta=smem_bytes_per_cta,
            regs_per_thread=regs_per_thread,
        )
        self._next_kernel += 1
        return kid

    def end_kernel(self, kernel: int, *, name: str = "", stream: int = 0) -> int:
        """Add a ``kernel_end`` event; returns its seq."""
        return self.event("kernel_end", kernel=kernel, name=name, stream=stream)

    @contextlib.contextmanager
    def kernel(self, name: str, *, stream: int = 0, **geometry: int) -> Iterator[int]:
        """``with builder.kernel("attn", stream=1, ctas=64) as kid:`` begin ... end around a
        block; ``geometry`` is the launch geometry of :meth:`begin_kernel`."""
        kid = self.begin_kernel(name, stream=stream, **geometry)
        yield kid
        self.end_kernel(kid, name=name, stream=stream)

    # -- bulk records ---------------------------------------------------------------------

    def compute_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N operations from columns (scalars broadcast; names as str or arrays of str).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: the fields of :meth:`compute` (``op`` required), each a scalar or a
                shape (N,) array; ``macs`` defaults to ``m * n * k``.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "macs" not in columns:
            columns["macs"] = (
                np.asarray(columns.get("m", 0), dtype=np.int64)
                * np.asarray(columns.get("n", 0), dtype=np.int64)
                * np.asarray(columns.get("k", 0), dtype=np.int64)
            )
        return self._add_many("compute", columns, seq)

    def memory_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N memory records from columns (the vectorized :meth:`memory`).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: the fields of :meth:`memory` (``space``, ``rw``, ``nbytes`` required),
                each a scalar or a shape (N,) array; ``rw`` may be names; ``stride`` defaults
                to ``nbytes``.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "rw" in columns:
            columns["rw"] = _codes_of(columns["rw"], _rw_code)
        if "stride" not in columns and "nbytes" in columns:
            columns["stride"] = columns["nbytes"]
        return self._add_many("memory", columns, seq)

    def sparsity_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N sparsity records from columns (the vectorized :meth:`sparsity`).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: ``layer, head, qblock, column, kind, lanes`` (+ ``nnz``, ``kernel``),
                scalars or shape (N,) arrays; ``kind`` as bit sets or names; ``lanes`` as
                uint64.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "kind" in columns:
            columns["kind"] = _codes_of(columns["kind"], _sparsity_kind_code)
        return self._add_many("sparsity", columns, seq)

    def event_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N events from columns (the vectorized :meth:`event`; ``kind`` required).

        Kernel ids given here are the caller's: :meth:`begin_kernel` keeps counting from
        its own next id. ``seq`` as in :meth:`compute_many`.
        """
        if "kind" in columns:
            columns["kind"] = _codes_of(columns["kind"], _event_kind_code)
        return self._add_many("events", columns, seq)

    # -- result ---------------------------------------------------------------------------

    @property
    def n_records(self) -> int:
        """Records added so far (all kinds)."""
        return self._count

    @property
    def next_seq(self) -> int:
        """One past the largest seq so far: the seq the next record gets unless given."""
        return self._seq

    def _renumber_tables(self, arrays: dict[str, np.ndarray]) -> None:
        """List each table's names in order of first use (seq, then field) and rewrite the
        codes in ``arrays`` (records in seq order, not shared) to match."""
        for table, names in self._tables.items():
            first = self._first_use[table]
            ordered = sorted(first, key=first.__getitem__)
            if ordered == list(range(1, len(names))):
                continue  # already in first-use order, nothing unused
            remap = np.zeros(len(names), dtype=np.int32)
            remap[ordered] = np.arange(1, len(ordered) + 1, dtype=np.int32)
            for (kind, field), t in TABLE_FIELDS.items():
                if t == table and arrays[kind].size:
                    arrays[kind][field] = remap[arrays[kind][field]]
            self._tables[table] = ["", *(names[c] for c in ordered)]
            self._index[table] = {s: i for i, s in enumerate(self._tables[table])}
            self._first_use[table] = {int(remap[c]): k for c, k in first.items()}

    def build(self) -> Trace:
        """The trace of every record added so far (the builder stays usable).

        Raises:
            TraceError: seq numbers used twice, a ``dep`` on a later record, or a memory record
                outside its tensor's allocation (checked here, once all records are known).
        """
        arrays = {}
        for kind in _KINDS:
            self._flush(kind)
            chunks = self._chunks[kind]
            if len(chunks) == 1:
                arrays[kind] = chunks[0]
            else:
                arrays[kind] = (
                    np.concatenate(chunks) if chunks else np.zeros(0, dtype=_DTYPES[kind])
                )
        if not self._in_order:
            arrays = _sorted_by_seq(arrays)
            self._renumber_tables(arrays)
            self._in_order = True
        for kind in _KINDS:
            # The builder never writes to a finished chunk, so the trace can share it.
            arrays[kind].flags.writeable = False
            self._chunks[kind] = [arrays[kind]] if arrays[kind].size else []
        meta = dict(
            self._meta,
            tables={t: list(v) for t, v in self._tables.items()},
            tensors={t: dict(e) for t, e in self._tensors.items()},
        )
        return Trace(meta, **arrays)


def _sorted_by_seq(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each kind's records in seq order; seq numbers used twice raise TraceError."""
    seqs = [a["seq"] for a in arrays.values() if a.size]
    total = sum(q.size for q in seqs)
    top = max((int(q.max()) for q in seqs), default=-1)
    if top >= 4 * total + 1024:
        # Sparse seq numbers: sort (Trace() reports a seq used twice).
        return {kind: a.take(np.argsort(a["seq"], kind="stable")) for kind, a in arrays.items()}
    # Dense seq numbers: place the records by counting, without a sort.
    taken = np.zeros(top + 1, dtype=bool)
    out = {}
    for kind, a in arrays.items():
        if not a.size:
            out[kind] = a
            continue
        seq = a["seq"]
        slot = np.full(top + 1, -1, dtype=np.int64)
        slot[seq] = np.arange(a.size, dtype=np.int64)
        order = slot[slot >= 0]
        clash = taken[seq]
        if clash.any() or order.size != a.size:
            dup = int(seq[clash][0]) if clash.any() else int(np.argmax(np.bincount(seq)))
            raise TraceError(f"seq {dup} is used by more than one record")
        taken[seq] = True
        out[kind] = a.take(order)  # take: much faster than a[order] on records
    return out


def _codes_of(values: Any, one: Any) -> Any:
    """Map names (or ints) to codes: scalars through ``one``, arrays by unique value."""
    if isinstance(values, (str, int, np.integer)):
        return one(values)
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        uniq = np.unique(arr)
        for u in uniq.tolist():
            one(u)
        return arr
    if arr.dtype.kind != "U":
        raise TraceError(f"expected names or integers, got an array of {arr.dtype}")
    uniq, inv = np.unique(arr, return_inverse=True)
    codes = np.asarray([one(str(u)) for u in uniq], dtype=np.int64)
    return codes[inv.reshape(arr.shape)]
