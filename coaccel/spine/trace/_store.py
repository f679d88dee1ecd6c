"""The record store behind :class:`~._builder.TraceBuilder`: names interned, records in seq order.

Records added one at a time are kept as Python rows (cheap per record) and turned into arrays
in chunks; bulk adds come as arrays already. Names are interned into the string tables as they
come, and the first use of each name is remembered, so that when records were added out of seq
order :meth:`_RecordStore._finish` can sort them and list each table's names in order of first
use, exactly as adding the records one at a time in seq order would.

Internal (no public functions):

* :class:`_RecordStore`: the builder's state and the steps of adding records:
  :meth:`~_RecordStore._add_one` (one record, checked field by field),
  :meth:`~_RecordStore._add_many` (columns, checked in bulk; :meth:`~_RecordStore._fill`,
  :meth:`~_RecordStore._note_uses`), :meth:`~_RecordStore._intern` and
  :meth:`~_RecordStore._intern_many` (names to table codes, undone for a record that fails:
  :meth:`~_RecordStore._tables_kept_on_error`), :meth:`~_RecordStore._finish` (every kind's
  records as one array in seq order; :meth:`~_RecordStore._renumber_tables`).
* :func:`_sorted_by_seq`: each kind's records in seq order (by counting when seq numbers are
  dense), refusing a seq used twice.
* :data:`_DEFAULTS`: the value of every field a record may leave out.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import _check_columns
from ._records import (
    _DTYPES,
    _FIELDS,
    _GEOMETRY,
    _KINDS,
    _LIMITS,
    _MAX_I8,
    _NONNEG,
    _TABLES,
    TABLE_FIELDS,
    TraceError,
)

__all__: list[str] = []

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


class _RecordStore:
    """Records of the four kinds and the string tables their names are interned into."""

    def __init__(self) -> None:
        self._tables: dict[str, list[str]] = {t: [""] for t in _TABLES}
        self._index: dict[str, dict[str, int]] = {t: {"": 0} for t in _TABLES}
        self._rows: dict[str, list[tuple]] = {k: [] for k in _KINDS}
        self._chunks: dict[str, list[np.ndarray]] = {k: [] for k in _KINDS}
        self._seq = 0  # one past the largest seq so far
        self._count = 0
        self._in_order = True  # every record added so far came after all earlier ones
        # Per table: code -> seq * 32 + field position of its first use.
        self._first_use: dict[str, dict[int, int]] = {t: {} for t in _TABLES}

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

    def _finish(self) -> dict[str, np.ndarray]:
        """Every kind's records as one read-only array in seq order (the store stays usable).

        Records added out of order are sorted here and the tables renumbered to first use.

        Raises:
            TraceError: a seq number used twice.
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
            # The store never writes to a finished chunk, so the trace can share it.
            arrays[kind].flags.writeable = False
            self._chunks[kind] = [arrays[kind]] if arrays[kind].size else []
        return arrays


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
