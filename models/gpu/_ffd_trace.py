"""Trace of one FFD decode step (:func:`.ffd.ffd_decode`, :func:`.ffd.ffd_trace`): the threshold
kernel, the sparse split kernel over the attended blocks and W1's reduction kernel, on stream 0
(docs/gpu_decode.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._splitk import SplitPlan
from ._trace import (
    KernelRecords,
    emit_partial_writes,
    emit_reduce_kernel,
    split_cta_coords,
    tile_activity,
)


def _ffd_trace(
    plan: SplitPlan,
    tile_keep: npt.NDArray[np.bool_],
    *,
    n_blocks: int,
    sink_tokens: int,
    recent_tokens: int,
    residual: bool,
    seed: int | None,
    workload: Mapping[str, Any],
) -> Trace:
    """Threshold kernel, sparse split kernel and reduction on stream 0 (docs/gpu_decode.md)."""
    s = plan.shape
    n_tiles = -(-s.context // plan.block_n)
    meta = {
        "kernel": "ffd_split_k",
        "batch": s.batch, "context": s.context, "q_heads": s.q_heads, "kv_heads": s.kv_heads,
        "head_dim": s.head_dim, "block_n": plan.block_n, "num_splits": plan.num_splits,
        "split_tokens": plan.split_tokens, "n_stages": plan.n_stages, "mma_m": plan.mma_m,
        "kv_layout": "[B, T, Hkv, D]",
        "k_format": "2-bit codes + per-block fp32 scales + e4m3 residual", "v_format": "bf16",
        "residual": residual, "sink_tokens": sink_tokens, "recent_tokens": recent_tokens,
        "quantized_blocks": n_blocks, "tiles_attended": int(tile_keep.sum()),
        "tiles_total": s.batch * s.kv_heads * n_tiles,
        **dict(workload),
    }  # fmt: skip
    tb = TraceBuilder(producer="coaccel.models.gpu.ffd", workload=meta, seed=seed)
    _allocate_ffd_tensors(tb, plan, n_blocks)
    _emit_threshold_kernel(tb, plan, n_blocks, sink_tokens, recent_tokens)
    _emit_sparse_split_kernel(tb, plan, tile_keep, n_blocks, residual)
    emit_reduce_kernel(tb, plan, "ffd_reduce")
    return tb.build()


def _row_bytes(plan: SplitPlan) -> tuple[int, int, int]:
    """Bytes per token and KV head of the bf16 rows, the packed 2-bit codes and the e4m3
    residual, B."""
    d = plan.shape.head_dim
    return d * plan.elem_bytes, d // 4, d


def _allocate_ffd_tensors(tb: TraceBuilder, plan: SplitPlan, n_blocks: int) -> None:
    """Place the step's tensors in HBM: the query, the key cache (codes, scales, residual and
    the bf16 tail), V, the thresholds, the partials and the output."""
    s = plan.shape
    b_, t_, hq, hkv, d, ns = s.batch, s.context, s.q_heads, s.kv_heads, s.head_dim, plan.num_splits
    row, crow, rrow = _row_bytes(plan)
    tq = n_blocks * plan.block_n
    tail_t = t_ - tq
    tb.allocate("Q", space="HBM", nbytes=b_ * hq * row)
    tb.allocate("K_codes", space="HBM", nbytes=b_ * tq * hkv * crow)
    tb.allocate("K_scale", space="HBM", nbytes=b_ * n_blocks * hkv * d * 4)
    tb.allocate("K_residual", space="HBM", nbytes=max(1, b_ * tq * hkv * rrow))
    if tail_t:
        tb.allocate("K_tail", space="HBM", nbytes=b_ * tail_t * hkv * row)
    tb.allocate("V", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("Threshold", space="HBM", nbytes=b_ * hq * 4)
    tb.allocate("O_partial", space="HBM", nbytes=b_ * hq * ns * d * 4)
    tb.allocate("ML", space="HBM", nbytes=b_ * hq * ns * 2 * 4)
    tb.allocate("O", space="HBM", nbytes=b_ * hq * row)


def _emit_threshold_kernel(
    tb: TraceBuilder, plan: SplitPlan, n_blocks: int, sink_tokens: int, recent_tokens: int
) -> None:
    """Kernel 0, ``ffd_threshold``, grid (B, Hkv), CTA id ``b + B * h``: the query, the scales
    and codes of the sink and recent tokens, their approximate scores, the thresholds."""
    s = plan.shape
    b_, hq, hkv, d, g, bn = s.batch, s.q_heads, s.kv_heads, s.head_dim, s.group, plan.block_n
    _, crow, _ = _row_bytes(plan)
    ntb, tq = n_blocks, n_blocks * bn
    n_th = b_ * hkv
    k0 = tb.begin_kernel(
        "ffd_threshold", ctas=n_th, threads_per_cta=plan.threads_per_cta,
        smem_bytes_per_cta=plan.mma_m * d * plan.elem_bytes, regs_per_thread=64,
    )  # fmt: skip
    cid = np.arange(n_th, dtype=np.int64)
    tbb, thh = cid % b_, cid // b_
    n_sink, rec0 = min(sink_tokens, tq), max(min(sink_tokens, tq), tq - recent_tokens)
    base = tb.next_seq + 7 * cid
    rec = KernelRecords(tb, plan, k0)
    rec.query_reads(cid, base, tbb, thh)
    for j, (blk, t0, cnt) in enumerate(((0, 0, n_sink), ((tq - 1) // bn, rec0, tq - rec0))):
        rec.hbm("r", cid, base + 1 + 2 * j, "load_scale", "K_scale",
                ((tbb * ntb + blk) * hkv + thh) * d * 4, d * 4)  # fmt: skip
        rec.row_reads(cid, base + 2 + 2 * j, "load_codes", "K_codes",
                      ((tbb * tq + t0) * hkv + thh) * crow, crow, max(cnt, 1))  # fmt: skip
    rec.gemm(cid, base + 5, n=n_sink + tq - rec0, k=d, fmt_a="fp16", fmt_b="int2", dep=base + 4)
    rec.hbm("w", cid, base + 6, "write_threshold", "Threshold", (tbb * hq + thh * g) * 4, g * 4,
            dep=base + 5)  # fmt: skip
    tb.end_kernel(k0, name="ffd_threshold")


@dataclass(frozen=True)
class _SlotLayout:
    """The tile slots of the sparse split kernel, ``[n_ctas, max_tiles]`` in CTA-id order.

    Attributes:
        tile: the global tile of each slot.
        exists: the slot holds a tile of the context.
        quantized: its tile is a full block, scanned from the codes.
        kept: its tile is attended.
        records: its records: a quantized slot 3 (scale, codes, scan GEMM); an attended one
            adds its exact scores (residual read and dot: 2 when ``residual``, else 0; the
            bf16 tail: K read and Q·K^T, 2) and 3 (softmax, V read, P·V).
    """

    tile: npt.NDArray[np.int64]
    exists: npt.NDArray[np.bool_]
    quantized: npt.NDArray[np.bool_]
    kept: npt.NDArray[np.bool_]
    records: npt.NDArray[np.int64]


def _slot_layout(
    plan: SplitPlan, tile_keep: npt.NDArray[np.bool_], n_blocks: int, residual: bool
) -> _SlotLayout:
    """The :class:`_SlotLayout` of a launch plan and keep mask."""
    s = plan.shape
    ns, nt, n_ctas = plan.num_splits, plan.max_tiles, plan.n_ctas
    n_tiles = -(-s.context // plan.block_n)
    exists = np.zeros(ns * nt, dtype=bool)
    exists[:n_tiles] = True
    ex = np.broadcast_to(exists.reshape(ns, nt), (s.kv_heads, s.batch, ns, nt)).reshape(n_ctas, nt)
    sp = np.arange(n_ctas, dtype=np.int64) % ns
    gtile = sp[:, None] * nt + np.arange(nt)[None, :]
    quant = ex & (gtile < n_blocks)
    kept = ex & tile_activity(plan, tile_keep)
    per_slot = np.where(quant, 3, 0) + np.where(
        kept, 3 + (np.where(quant, 2 if residual else 0, 2)), 0
    )
    return _SlotLayout(gtile, ex, quant, kept, np.where(ex, per_slot, 0))


def _emit_sparse_split_kernel(
    tb: TraceBuilder,
    plan: SplitPlan,
    tile_keep: npt.NDArray[np.bool_],
    n_blocks: int,
    residual: bool,
) -> None:
    """Kernel 1, ``ffd_split``, grid (splits, B, Hkv), CTA id ``s + splits * (b + B * h)``: per
    CTA the query and threshold reads, the records of the slots of its split
    (:func:`_emit_slots`), then the partial writes."""
    s = plan.shape
    hq, d, g, bn = s.q_heads, s.head_dim, s.group, plan.block_n
    row, crow, rrow = _row_bytes(plan)
    lay = _slot_layout(plan, tile_keep, n_blocks, residual)
    n_ctas = plan.n_ctas
    k1 = tb.begin_kernel(
        "ffd_split", ctas=n_ctas, threads_per_cta=plan.threads_per_cta,
        smem_bytes_per_cta=plan.mma_m * d * plan.elem_bytes
        + plan.n_stages * (bn * (crow + rrow + row) + d * 4),
        regs_per_thread=plan.regs_per_thread,
    )  # fmt: skip
    cta_ids = np.arange(n_ctas, dtype=np.int64)
    _, bb, hh = split_cta_coords(plan, cta_ids)
    size = 2 + lay.records.sum(axis=1) + 2
    cbase = tb.next_seq + np.concatenate([[0], np.cumsum(size)[:-1]])
    rec = KernelRecords(tb, plan, k1)
    rec.query_reads(cta_ids, cbase, bb, hh)
    rec.hbm("r", cta_ids, cbase + 1, "load_threshold", "Threshold", (bb * hq + hh * g) * 4, g * 4)
    last = _emit_slots(rec, lay, cbase + 2, n_blocks, residual)
    emit_partial_writes(tb, plan, k1, cta_ids, cbase + size - 2, last)
    tb.end_kernel(k1, name="ffd_split")


def _emit_slots(
    rec: KernelRecords,
    lay: _SlotLayout,
    first_seq: npt.NDArray[np.int64],
    n_blocks: int,
    residual: bool,
) -> npt.NDArray[np.int64]:
    """The slot records of the sparse split kernel, CTA ``c``'s from ``first_seq[c]`` on: the
    scan of each quantized slot (scale, codes: one 32-B sector per token and head, the
    approximate scores), then for each attended one the exact scores (the residual, or the
    bf16 keys of the tail) and the attention.

    Returns:
        ``[n_ctas]`` seq of each CTA's last P·V product (-1: none).
    """
    plan = rec.plan
    s = plan.shape
    t_, hkv, d, bn = s.context, s.kv_heads, s.head_dim, plan.block_n
    row, crow, rrow = _row_bytes(plan)
    ntb, tq = n_blocks, n_blocks * bn
    tail_t = t_ - tq
    _, bb, hh = split_cta_coords(plan, np.arange(plan.n_ctas, dtype=np.int64))
    slot_off = np.cumsum(lay.records, axis=1) - lay.records  # offset of each slot's first record
    ci, sl = np.nonzero(lay.exists)
    seq0 = first_seq[ci] + slot_off[ci, sl]
    tile = lay.tile[ci, sl]
    tok0 = tile * bn
    rows = np.minimum(bn, t_ - tok0)
    isq = lay.quantized[ci, sl]
    isk = lay.kept[ci, sl]
    cb, ch = bb[ci], hh[ci]
    qi = np.flatnonzero(isq)
    rec.hbm("r", ci[qi], seq0[qi], "load_scale", "K_scale",
            ((cb[qi] * ntb + tile[qi]) * hkv + ch[qi]) * d * 4, d * 4)  # fmt: skip
    rec.row_reads(ci[qi], seq0[qi] + 1, "load_codes", "K_codes",
                  ((cb[qi] * tq + tok0[qi]) * hkv + ch[qi]) * crow, crow, rows[qi])  # fmt: skip
    rec.score_gemm(ci[qi], seq0[qi] + 2, tile[qi], "fp16", "int2")
    kq = np.flatnonzero(isk & isq)
    kt = np.flatnonzero(isk & ~isq)
    e0 = seq0 + np.where(isq, 3, 0)  # first record after the scan
    if residual and kq.size:
        rec.row_reads(ci[kq], e0[kq], "load_residual", "K_residual",
                      ((cb[kq] * tq + tok0[kq]) * hkv + ch[kq]) * rrow, rrow, rows[kq])  # fmt: skip
        rec.score_gemm(ci[kq], e0[kq] + 1, tile[kq], "fp16", "e4m3")
    if kt.size:
        rec.row_reads(ci[kt], e0[kt], "load_k", "K_tail",
                      ((cb[kt] * tail_t + tok0[kt] - tq) * hkv + ch[kt]) * row, row,
                      rows[kt])  # fmt: skip
        rec.score_gemm(ci[kt], e0[kt] + 1, tile[kt])
    ka = np.flatnonzero(isk)
    sc0 = e0[ka] + np.where(isq[ka], 2 if residual else 0, 2)  # softmax record
    v_addr = ((cb[ka] * t_ + tok0[ka]) * hkv + ch[ka]) * row
    rec.softmax_pv(ci[ka], sc0, tile[ka], v_addr, rows[ka])
    last = np.full(plan.n_ctas, -1, dtype=np.int64)
    np.maximum.at(last, ci[ka], sc0 + 2)
    return last
