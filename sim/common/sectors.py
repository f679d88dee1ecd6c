"""Coalescing of strided memory runs into sector transactions (vectorized).

A trace's memory record is a strided run: ``count`` rows of ``nbytes`` bytes, row ``i`` at
``start + i * stride`` (docs/trace.md). A GPU moves memory in sectors (32 B on NVIDIA GPUs) and
tags it in lines (128 B): what costs bandwidth is the number of distinct sectors a request
touches, not its bytes. This module turns records into those counts.

Public functions (all vectorized over records):

* :func:`absolute_starts`: each record's start address, the tensor map's ``base_addr`` added
  for tensors placed in the record's space.
* :func:`sector_counts`: distinct sectors each record touches (rows overlapping or sharing a
  sector are counted once).
* :func:`run_bytes`: bytes of each record's contiguous runs (the transfer size a DRAM
  efficiency curve is read at).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace

__all__ = ["absolute_starts", "run_bytes", "sector_counts"]


def absolute_starts(trace: Trace) -> npt.NDArray[np.int64]:
    """Start address of every memory record of a trace.

    A record of a tensor placed in the tensor map *in the record's space* starts at
    ``base_addr + addr``; other records (tensors not in the map, or on-chip copies in another
    space) start at ``addr``.

    Args:
        trace: the trace.

    Returns:
        int64 array, shape (N_memory,), B.
    """
    mem = trace.memory
    base = np.zeros(mem.size, dtype=np.int64)
    tensors = trace.meta.get("tensors", {})
    if tensors and mem.size:
        names = trace.table("tensor")
        spaces = trace.table("space")
        for t, entry in tensors.items():
            if t not in names or entry["space"] not in spaces:
                continue
            sel = (mem["tensor"] == names.index(t)) & (mem["space"] == spaces.index(entry["space"]))
            base[sel] = int(entry["base_addr"])
    return base + mem["addr"].astype(np.int64)


def sector_counts(
    starts: npt.ArrayLike,
    nbytes: npt.ArrayLike,
    strides: npt.ArrayLike,
    counts: npt.ArrayLike,
    sector_bytes: int = 32,
) -> npt.NDArray[np.int64]:
    """Distinct sectors touched by each strided run.

    Row ``i`` of a record covers sectors ``floor(s_i / S) .. floor((s_i + n - 1) / S)`` with
    ``s_i = start + i * stride``; a sector shared by consecutive rows (a stride below the row
    size, or rows packed inside one sector) is one transaction. Strides that are multiples of
    the sector size use the closed form ``k + (count - 1) * min(k, stride / S)`` (``k`` sectors
    per row); other strides are expanded row by row (still vectorized).

    Args:
        starts: start addresses, B, shape (N,), >= 0.
        nbytes: bytes per row, shape (N,), >= 0.
        strides: bytes between row starts, shape (N,), >= 0.
        counts: rows, shape (N,), >= 0.
        sector_bytes: sector size, B (> 0).

    Returns:
        int64 array, shape (N,): sector transactions (0 for empty records).
    """
    s = np.asarray(starts, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.int64)
    st = np.asarray(strides, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    S = int(sector_bytes)
    out = np.zeros(s.shape, dtype=np.int64)
    live = (n > 0) & (c > 0)
    aligned = live & (st % S == 0)
    if np.any(aligned):
        k = (s[aligned] + n[aligned] - 1) // S - s[aligned] // S + 1
        d = st[aligned] // S
        out[aligned] = k + (c[aligned] - 1) * np.minimum(k, d)
    rest = np.flatnonzero(live & ~aligned)
    if rest.size:
        reps = c[rest]
        rec = np.repeat(np.arange(rest.size), reps)
        first_row = np.cumsum(reps) - reps
        i = np.arange(rec.size) - np.repeat(first_row, reps)
        row_s = s[rest][rec] + i * st[rest][rec]
        first = row_s // S
        last = (row_s + n[rest][rec] - 1) // S
        prev_last = np.empty_like(last)
        prev_last[0] = -1
        prev_last[1:] = last[:-1]
        prev_last[first_row] = -1  # each record starts fresh
        new = np.maximum(last - np.maximum(first, prev_last + 1) + 1, 0)
        out[rest] = np.bincount(rec, weights=new, minlength=rest.size).astype(np.int64)
    return out


def run_bytes(
    nbytes: npt.ArrayLike, strides: npt.ArrayLike, counts: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Bytes of one contiguous run of each record.

    Rows that follow each other without a gap (``stride == nbytes``) form one run of
    ``nbytes * count``; otherwise each row is its own run of ``nbytes``.

    Args:
        nbytes: bytes per row, shape (N,).
        strides: bytes between row starts, shape (N,).
        counts: rows, shape (N,).

    Returns:
        int64 array, shape (N,), B.
    """
    n = np.asarray(nbytes, dtype=np.int64)
    st = np.asarray(strides, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    return np.where(st == n, n * c, n)
