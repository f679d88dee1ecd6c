"""The program view of a trace: its records in issue order, as an engine runs them.

A :class:`~coaccel.trace.Trace` keeps each record kind in its own columnar array and names its
dependencies by sequence number (docs/trace.md). An event engine wants the opposite: one list
of records in issue order whose dependencies are positions in that list. This module builds
that view and the small lookups every simulator needs on top of it.

Public functions:

* :func:`merge_records`: the records of chosen kinds merged in ``seq`` order, with
  dependencies turned into positions (:class:`RecordView`).
* :func:`effective_deps`: dependencies with records that occupy no queue skipped (such a
  record completes with its own dependency, so what a record really waits for is further up).
* :func:`table_code`: a name's index in one of a trace's string tables.
* :func:`distinct_rows`: the distinct rows of a few integer key columns (e.g. the distinct
  GEMM tile shapes of a trace, each simulated once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace

__all__ = [
    "QUEUE_NONE",
    "RECORD_KINDS",
    "RecordView",
    "distinct_columns",
    "distinct_rows",
    "effective_deps",
    "merge_records",
    "table_code",
]

QUEUE_NONE = -1
"""Queue index of a record that occupies no queue (e.g. an on-chip buffer access): it starts and
completes when its dependency completes."""

RECORD_KINDS: tuple[str, ...] = ("memory", "compute", "sparsity", "events")
"""The record kinds of a trace, each one of its columnar arrays."""


@dataclass(frozen=True, eq=False)  # array columns: compare them with numpy
class RecordView:
    """Records of one trace merged in issue (``seq``) order.

    Attributes:
        kinds: the record kinds merged; a record's ``kind`` indexes this tuple.
        kind: shape (N,) int8: index into ``kinds`` of each record's kind.
        index: shape (N,) int64: each record's row in its kind's array
            (``getattr(trace, kinds[kind[i]])[index[i]]``).
        dep: shape (N,) int64: position (in this view) of the record each one waits for, or
            -1. Always smaller than the record's own position.
    """

    kinds: tuple[str, ...]
    kind: npt.NDArray[np.int8]
    index: npt.NDArray[np.int64]
    dep: npt.NDArray[np.int64]

    def positions(self, kind: str) -> npt.NDArray[np.int64]:
        """Positions (shape (N_kind,) int64, increasing) of the records of one kind.

        Raises:
            ValueError: ``kind`` is not one of :attr:`kinds`.
        """
        if kind not in self.kinds:
            raise ValueError(
                f"record kind {kind!r} is not in this view; valid choices: {self.kinds}"
            )
        return np.flatnonzero(self.kind == self.kinds.index(kind))


def merge_records(trace: Trace, kinds: Sequence[str] = ("memory", "compute")) -> RecordView:
    """Merge the records of some kinds of a trace in ``seq`` (issue) order.

    Records of kinds without a ``dep`` column (``sparsity``) depend on nothing.

    Args:
        trace: the trace.
        kinds: record kinds to merge, each at most once, from :data:`RECORD_KINDS`; their order
            gives the kind codes of :attr:`RecordView.kind`.

    Returns:
        The :class:`RecordView` (N = the number of records of those kinds).

    Raises:
        ValueError: an unknown or repeated kind, or a record that depends on a record of a
            kind that is not merged (its dependency would be lost).
    """
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in RECORD_KINDS]
    if bad or not kinds or len(set(kinds)) != len(kinds):
        raise ValueError(
            f"kinds={kinds!r}: give each record kind at most once, at least one; valid choices: "
            f"{RECORD_KINDS}"
        )
    if len(kinds) > 127:  # pragma: no cover - four kinds exist
        raise ValueError("more than 127 record kinds do not fit an int8 kind code")
    arrays = [getattr(trace, k) for k in kinds]
    seq = np.concatenate([a["seq"] for a in arrays])
    kind = np.concatenate([np.full(a.size, i, np.int8) for i, a in enumerate(arrays)])
    index = np.concatenate([np.arange(a.size, dtype=np.int64) for a in arrays])
    dep_seq = np.concatenate(
        [a["dep"] if "dep" in a.dtype.names else np.full(a.size, -1, np.int64) for a in arrays]
    )
    n = seq.size
    if n and int(seq.min()) == 0 and int(seq.max()) == n - 1:
        # Seq numbers 0 .. n-1, unique (the trace contract): a permutation, placed by a
        # scatter; every dependency (an earlier seq) is then one of these records.
        pos = np.empty(n, dtype=np.int64)
        pos[seq] = np.arange(n, dtype=np.int64)
        return RecordView(kinds, kind[pos], index[pos], dep_seq[pos].astype(np.int64))
    order = np.argsort(seq, kind="stable")
    seq, kind, index, dep_seq = seq[order], kind[order], index[order], dep_seq[order]
    dep = np.where(dep_seq >= 0, np.searchsorted(seq, dep_seq), -1).astype(np.int64)
    lost = (dep_seq >= 0) & (seq[np.minimum(np.maximum(dep, 0), max(n - 1, 0))] != dep_seq)
    if lost.any():
        i = int(np.flatnonzero(lost)[0])
        raise ValueError(
            f"{kinds[kind[i]]} record seq {int(seq[i])} depends on seq {int(dep_seq[i])}, which "
            f"is not a record of the merged kinds {kinds}; merge its kind too"
        )
    return RecordView(kinds, kind, index, dep)


def effective_deps(
    queue: npt.NDArray[np.int8],
    dep: npt.NDArray[np.int64],
    positions: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Dependencies with records that occupy no queue skipped.

    A record on no queue (:data:`QUEUE_NONE`) completes exactly when its own dependency does,
    so a record that depends on it really waits for the first queued record up the chain (or
    for nothing). For all records this is computed by pointer doubling (about
    ``log2(chain length)`` vectorized passes); for a few ``positions`` by following their
    chains hop by hop while they are short.

    Args:
        queue: shape (N,) int8: queue index of each record, :data:`QUEUE_NONE` (any negative
            value) for none.
        dep: shape (N,) int64: position of each record's dependency, or -1; dependencies point
            backwards (``dep[i] < i``).
        positions: shape (P,) int64: the records to answer for; None: all N.

    Returns:
        Shape (N,) or (P,) int64: position of the nearest queued record up each record's
        dependency chain, or -1 if there is none.
    """
    dep = np.asarray(dep, dtype=np.int64)
    queued = np.asarray(queue) >= 0
    if positions is not None:
        eff = dep[positions]
        for _ in range(_SHORT_CHAIN_HOPS):
            hop = (eff >= 0) & ~queued[np.maximum(eff, 0)]
            if not hop.any():
                return eff
            eff[hop] = dep[eff[hop]]
        return effective_deps(queue, dep)[positions]
    eff = dep.copy()
    while True:
        hop = (eff >= 0) & ~queued[np.maximum(eff, 0)]
        if not hop.any():
            return eff
        # eff[eff[i]] is already resolved at least as far as eff[i]: chains halve per pass.
        eff[hop] = eff[eff[hop]]


_SHORT_CHAIN_HOPS = 8
"""Hops followed record by record for :func:`effective_deps` of a few positions; longer chains
are resolved for all records at once."""


def table_code(trace: Trace, table: str, name: str) -> int:
    """Index of a name in one of a trace's string tables, or -1 if no record uses it.

    Comparing a table-indexed column with this code selects the records of that name
    (``trace.memory["space"] == table_code(trace, "space", "DRAM")``); -1 selects none.

    Args:
        trace: the trace.
        table: the string table (``"space"``, ``"unit"``, ``"phase"``, ``"fmt"``...; see
            :data:`coaccel.trace.TABLE_FIELDS`).
        name: the name to look up.

    Returns:
        The int32 code used in the trace's columns, or -1.
    """
    names = trace.table(table)
    return names.index(name) if name in names else -1


def distinct_rows(
    cols: Sequence[npt.NDArray[np.integer]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of integer key columns, and which one each row is.

    When the columns are non-negative and their values fit 62 bits together they are packed
    into one int64 key per row, which is much faster than ``np.unique(axis=0)``; the answer is
    the same either way.

    Args:
        cols: one or more 1-D integer arrays of equal length N (the key columns).

    Returns:
        ``(inverse, rows)``: shape (N,) int64, the index into ``rows`` of each row; and shape
        (U, len(cols)) int64, the U distinct rows in lexicographic order.

    Raises:
        ValueError: no columns, or columns that are not 1-D integer arrays of one length.
    """
    if not cols:
        raise ValueError("distinct_rows needs at least one key column")
    arrs = [np.asarray(c) for c in cols]
    n = arrs[0].shape[0] if arrs[0].ndim == 1 else -1
    for i, c in enumerate(arrs):
        if c.ndim != 1 or c.shape[0] != n or not np.issubdtype(c.dtype, np.integer):
            raise ValueError(
                f"key column {i}: expected a 1-D integer array of length {n}, got dtype "
                f"{c.dtype} with shape {c.shape}"
            )
    arrs = [c.astype(np.int64, copy=False) for c in arrs]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros((0, len(arrs)), np.int64)
    first, inv = distinct_columns(arrs)
    rows = np.stack([c[first] for c in arrs], axis=1)
    return inv, rows


def distinct_columns(
    cols: Sequence[npt.NDArray[np.integer]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``np.unique(np.stack(cols), axis=1, return_index=True, return_inverse=True)``'s index
    and inverse, without sorting records of several fields.

    Each column, less its minimum, is packed into one int64 code per row beside the columns
    before it; when the code would pass 62 bits it is first replaced by its dense rank (and a
    column wider than that by its own rank). Ranks and offsets keep the order, so the codes
    sort as the rows do lexicographically; one stable 1-D ``np.unique`` of the codes then gives
    the same distinct rows, in the same order, with the same first occurrences.

    Args:
        cols: one or more 1-D integer arrays of equal length N, N >= 1 (the key columns).

    Returns:
        ``(first, inverse)``: shape (U,) int64, the index of each distinct row's first
        occurrence, distinct rows in lexicographic order; and shape (N,) int64, the distinct
        row of each row.
    """

    def rank(a: npt.NDArray[np.integer]) -> tuple[npt.NDArray[np.int64], int]:
        _, r = np.unique(a, return_inverse=True)
        r = r.reshape(-1).astype(np.int64, copy=False)
        return r, max(1, int(r.max()).bit_length())

    code = np.zeros(np.asarray(cols[0]).shape[0], dtype=np.int64)
    bits = 0
    for c in cols:
        c = np.asarray(c).astype(np.int64, copy=False)
        lo = int(c.min())
        width = max(1, (int(c.max()) - lo).bit_length())
        if bits + width > 62:  # the code so far, then if need be the column: dense ranks
            code, bits = rank(code)
            if bits + width > 62:
                c, width = rank(c)
                lo = 0
        code = (code << width) | (c - lo)
        bits += width
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return first.astype(np.int64, copy=False), inv.reshape(-1).astype(np.int64, copy=False)
