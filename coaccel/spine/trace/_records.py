"""Record layouts of the trace contract: dtypes, string tables, kinds, units and field codes.

Public: :data:`TRACE_VERSION`, the four record dtypes (:data:`COMPUTE_DTYPE`,
:data:`MEMORY_DTYPE`, :data:`SPARSITY_DTYPE`, :data:`EVENT_DTYPE`), :data:`TABLE_FIELDS`,
:data:`SPARSITY_KIND_BITS`, :data:`EVENT_KINDS`, :data:`UNITS`, :class:`TraceError`.

Internal (shared by the modules of :mod:`coaccel.spine.trace`):

* :data:`_FORMAT` (the ``format`` every trace's metadata names), :data:`_DTYPES`,
  :data:`_KINDS`, :data:`_FIELDS` (per record kind), :data:`_V1_DTYPES` (version-1 layouts),
  :data:`_TABLES` (the string tables), :data:`_GEOMETRY` (launch geometry of a
  ``kernel_begin``), :data:`_NONNEG` (fields that must be >= 0), :data:`_LIMITS` (integer range
  of every field), :data:`_MAX_I8`; :func:`_field_names` (of a structured dtype).
* :func:`_rw_code`, :func:`_sparsity_kind_code`, :func:`_event_kind_code`: a name (or an int)
  as the code its field stores; :func:`_codes_of`: the same over an array of names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import CoaccelError

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
    "TraceError",
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


class TraceError(CoaccelError, ValueError):
    """A trace that breaks the contract: bad dtype, version, table index, field value or file.

    A :class:`~coaccel.errors.CoaccelError` (the command line reports it as one line), and a
    ``ValueError`` as it always was."""


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

_MAX_I8 = int(np.iinfo(np.int64).max)


# ---------------------------------------------------------------------------------------------
# Field codes


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
