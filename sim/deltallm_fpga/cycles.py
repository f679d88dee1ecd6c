"""Cycle model of one query block of the DeltaLLM vector processor ([OURS], docs/deltallm_fpga.md).

For one (layer, KV head, query block) the processor visits key columns in order. Per column
``j`` with sparsity record ``(kind, nnz)`` (``kind`` bits: 1 exact, 2 delta, 4 skipped; the trace
contract's sparsity ``kind``):

* ``qk_j = (ceil(d/M) if exact) + (ceil(nnz_j/M) if delta)``: an exact key streams all ``d``
  elements through the broadcast MAC array, a delta key only its nonzeros; a mixed column (exact
  for some lanes, delta for others) pays both;
* ``pv_j = 0`` if the column is skipped, else ``ceil(dv/M)``;
* ``cycles_j = max(softmax_cycles_per_column, qk_j + pv_j)``: the softmax unit takes one column
  per cycle, overlapped.

The block adds the pipeline fill (:attr:`~.config.PipelineConfig.fill_cycles`, the sum of the
stage latencies), loading its ``L·d`` q values and writing its ``L·dv`` outputs.

:func:`query_block_cycles` is the formula for one block (a pure function of its records and the
configuration); :func:`blocks_cycles` evaluates it for many blocks at once (numba), exactly equal.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from .config import DeltaFpgaConfig

__all__ = [
    "KIND_DELTA",
    "KIND_EXACT",
    "KIND_SKIPPED",
    "block_constants",
    "blocks_cycles",
    "query_block_cycles",
]

KIND_EXACT = 1
"""Sparsity ``kind`` bit: the column is exact for some valid lane."""
KIND_DELTA = 2
"""Sparsity ``kind`` bit: the column is a delta key for some valid lane."""
KIND_SKIPPED = 4
"""Sparsity ``kind`` bit: VSSOS skips the column's PV work."""


def block_constants(
    arch: DeltaFpgaConfig, head_dim: int, value_dim: int | None = None
) -> tuple[int, int, int, int, int]:
    """The per-column and per-block constants of the cycle model.

    Args:
        arch: the design (``datapath``, ``pipeline``).
        head_dim: ``d``, elements of q and k.
        value_dim: ``dv``, elements of v (None: ``d``).

    Returns:
        ``(M, exact_qk, pv, min_column, overhead)``: MACs per lane; ``ceil(d/M)`` cycles of an
        exact key; ``ceil(dv/M)`` cycles of a kept column's PV; the softmax unit's cycles per
        column; the block overhead ``fill + ceil(L·d/q_load) + ceil(L·dv/out_write)`` cycles.
    """
    dv = head_dim if value_dim is None else value_dim
    m = arch.datapath.macs_per_lane
    lanes = arch.datapath.lanes
    p = arch.pipeline
    overhead = (
        p.fill_cycles
        + -(-lanes * head_dim // p.q_load_elems_per_cycle)
        + -(-lanes * dv // p.out_write_elems_per_cycle)
    )
    return m, -(-head_dim // m), -(-dv // m), p.softmax_cycles_per_column, overhead


def query_block_cycles(
    kind: npt.ArrayLike,
    nnz: npt.ArrayLike,
    arch: DeltaFpgaConfig,
    *,
    head_dim: int,
    value_dim: int | None = None,
) -> int:
    """Cycles of one query block from its sparsity records (the module's formula).

    Args:
        kind: ``[C]`` uint8 sparsity kinds of the block's visited columns (bits 1 exact,
            2 delta, 4 skipped; trace contract ``sparsity.kind``).
        nnz: ``[C]`` int nonzeros of each column's delta key (ignored for exact-only columns).
        arch: the design.
        head_dim: ``d``.
        value_dim: ``dv`` (None: ``d``).

    Returns:
        Cycles, including the pipeline fill, the q load and the output write.

    Raises:
        ValueError: ``kind`` and ``nnz`` differ in shape, or a kind sets neither exact nor delta.
    """
    k = np.asarray(kind, dtype=np.int64)
    z = np.asarray(nnz, dtype=np.int64)
    if k.shape != z.shape or k.ndim != 1:
        raise ValueError(f"kind {k.shape} and nnz {z.shape} must be 1-D of one length")
    if k.size and not np.all(k & (KIND_EXACT | KIND_DELTA)):
        raise ValueError("every column's kind must set exact (1) or delta (2)")
    m, exact_qk, pv, min_col, overhead = block_constants(arch, head_dim, value_dim)
    qk = np.where(k & KIND_EXACT, exact_qk, 0) + np.where(k & KIND_DELTA, -(-z // m), 0)
    col = np.maximum(min_col, qk + np.where(k & KIND_SKIPPED, 0, pv))
    return int(overhead + col.sum())


@numba.njit(cache=True)
def _blocks_cycles(
    kind: np.ndarray, nnz: np.ndarray, m: int, exact_qk: int, pv: int, min_col: int, overhead: int
) -> np.ndarray:
    nb, nc = kind.shape
    out = np.empty(nb, dtype=np.int64)
    for b in range(nb):
        tot = 0
        seen = False
        for j in range(nc):
            kd = kind[b, j]
            if kd == 0:
                continue
            seen = True
            c = 0
            if kd & 1:
                c += exact_qk
            if kd & 2:
                c += (nnz[j] + m - 1) // m
            if not kd & 4:
                c += pv
            tot += c if c > min_col else min_col
        out[b] = tot + overhead if seen else 0
    return out


def blocks_cycles(
    kind: npt.NDArray[np.uint8],
    nnz: npt.NDArray[np.integer],
    arch: DeltaFpgaConfig,
    *,
    head_dim: int,
    value_dim: int | None = None,
) -> npt.NDArray[np.int64]:
    """Cycles of every query block of one (layer, KV head); numba, equal to the one-block rule.

    Args:
        kind: ``[nb, T]`` uint8, the sparsity kind of column ``j`` in block ``b`` (0: not
            visited).
        nnz: ``[T]`` nonzeros of each key's delta.
        arch: the design.
        head_dim: ``d``.
        value_dim: ``dv`` (None: ``d``).

    Returns:
        ``[nb]`` int64 cycles per block (0 for a block that visits no column).
    """
    consts = block_constants(arch, head_dim, value_dim)
    return _blocks_cycles(
        np.ascontiguousarray(kind, dtype=np.uint8),
        np.ascontiguousarray(nnz, dtype=np.int64),
        *consts,
    )
