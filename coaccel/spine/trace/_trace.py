"""The trace: metadata plus four read-only columnar record arrays, checked on construction.

Public: :class:`Trace` (string tables and decoding, byte and MAC totals, a summary,
concatenation, save / load, bit-exact comparison), :func:`trace_kind` (the kind of trace a
producer makes) and :func:`read_trace_meta` (a file's metadata, without its records).

Internal: :func:`_max_seq`, :func:`_max_kernel` and :func:`_parts` (the offsets and
per-part metadata of :meth:`Trace.concat`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import _check_columns, _check_kernels, _check_meta, _check_placement, _normalize_json
from ._io import _read_meta, _read_npz, _upgrade_v1, _write_npz
from ._records import _DTYPES, _KINDS, TABLE_FIELDS, TraceError, _rw_code

__all__ = ["Trace", "read_trace_meta", "trace_kind"]

_MODELS = "coaccel.models."


def trace_kind(producer: str) -> str:
    """The kind of trace a producer makes: the reference family that wrote it.

    ``"coaccel.models.gpu.flashdecode"`` -> ``"gpu"``, ``"coaccel.models.hbq.gemm"`` ->
    ``"hbq"``; a producer outside coaccel's references is its own first dotted name (a plug-in
    package's). A concatenation of producers (``"a+b"``) is the ``+`` of their kinds.

    Args:
        producer: a trace's ``meta["producer"]``.

    Returns:
        The kind (``""`` for an empty producer).
    """
    kinds = []
    for one in str(producer).split("+"):
        one = one.strip()
        family = one[len(_MODELS) :] if one.startswith(_MODELS) else one
        kinds.append(family.split(".", 1)[0])
    return "+".join(dict.fromkeys(kinds))


def _producers(meta: Mapping[str, Any]) -> list[str]:
    parts = meta.get("parts")
    if isinstance(parts, list) and parts:
        return [str(p.get("producer", "")) for p in parts if isinstance(p, Mapping)]
    return [str(meta.get("producer", ""))]


def read_trace_meta(path: str | Path) -> dict[str, Any]:
    """The metadata of a trace file, without reading its records (a cheap look at a file).

    Args:
        path: the ``.npz`` file.

    Returns:
        The metadata as stored (``producer``, ``workload``, ... as :class:`Trace` documents);
        only its being a JSON object is checked.

    Raises:
        TraceError: not a trace file (a FIFO, a device, not a zip archive, no metadata).
        FileNotFoundError: no such file.
    """
    meta = _read_meta(path)
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: metadata must be a JSON object, got {type(meta).__name__}")
    return meta


def _check_producer(
    meta: Mapping[str, Any], path: str | Path, producers: Sequence[str], reader: str
) -> None:
    """Refuse a trace none of whose producers ``producers`` (name prefixes) accepts."""
    got = _producers(meta)
    if all(any(p.startswith(ok) for ok in producers) for p in got):
        return
    producer = "+".join(got)
    wanted = sorted({trace_kind(ok.rstrip(".")) for ok in producers})
    names = ", ".join(f"{ok.rstrip('.')}.*" if ok.endswith(".") else ok for ok in producers)
    raise TraceError(
        f"{path}: a {trace_kind(producer)!r} trace (producer {producer!r}); {reader} reads "
        f"only {' or '.join(repr(w) for w in wanted)} traces (producer {names})"
    )


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
        _write_npz(path, self.meta, {k: getattr(self, k) for k in _KINDS}, compress=compress)

    @property
    def kind(self) -> str:
        """The kind of trace (:func:`trace_kind` of its producer): ``"gpu"``, ``"hbq"``, ..."""
        return trace_kind(self.meta["producer"])

    @classmethod
    def load(
        cls, path: str | Path, *, producers: Sequence[str] | None = None, reader: str = ""
    ) -> Trace:
        """Read and validate a trace written by :meth:`save`.

        The file is refused before numpy opens it when it is not a regular file (a FIFO, a
        device) or does not start like a zip archive; nothing in it is ever unpickled.

        Args:
            path: the ``.npz`` file.
            producers: the producers (names, or prefixes ending in ``.``: ``"coaccel.models.gpu."``)
                whose traces the caller can read; None: any. Checked on the metadata, before
                the records are.
            reader: who reads it, for the message (``"the gpu target"``).

        Returns:
            The trace, bit-identical to the one saved. A version-1 file comes back as the
            version-2 trace it stands for (:func:`~._io._upgrade_v1`; docs/trace.md).

        Raises:
            TraceError: not a trace file, a trace of a producer ``producers`` does not name,
                unsupported version, wrong dtypes, out-of-table indices or invalid field values
                (the message says which).
            FileNotFoundError: no such file.
        """
        meta, arrays = _read_npz(path)
        if producers is not None and isinstance(meta, dict):
            _check_producer(meta, path, producers, reader or "the reader")
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
