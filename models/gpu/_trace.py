"""Trace of a split-K decode-attention step (the contract of ``coaccel.trace``; docs/trace.md).

:func:`split_k_trace` emits, for a :class:`~._splitk.SplitPlan`, the two kernels of the step on
stream 0 (docs/gpu_decode.md has the layout):

* kernel 0 ``flash_decode_split``, grid (splits, B, Hkv), CTA id ``s + splits * (b + B * h)``:
  per CTA one read of its G query rows, then per attended tile a K read (a strided run of
  ``count`` token rows of ``D * 2`` B, ``Hkv * D * 2`` B apart: the token-major layout), the
  Q·K^T product, the online-softmax update, a V read and the P·V product; finally the write
  of its partial output rows and of its (m, l) pairs;
* kernel 1 ``flash_decode_reduce``, grid (B, Hq), CTA id ``b + B * hq``: read the row's (m, l)
  pairs and partial outputs of every split, merge them, write the bf16 output row.

All tensors are placed in HBM (the tensor map), so that a simulator can hash addresses to L2
sets and channels; the simulator, not the trace, decides which accesses hit in L2. Every record
is added in bulk with precomputed seq numbers (CTA-major issue order), so the trace of a 128K
context layer builds in well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._splitk import SplitPlan

__all__ = [
    "REDUCE_REGS_PER_THREAD",
    "emit_partial_writes",
    "emit_reduce_kernel",
    "split_k_trace",
    "tile_activity",
]

REDUCE_REGS_PER_THREAD = 32
"""Registers per thread of the reduction kernel ([OURS]: a short loop over the splits)."""

_PER_TILE = 5  # K read, QK, softmax, V read, PV


def tile_activity(
    plan: SplitPlan, tile_keep: npt.NDArray[np.bool_] | None = None
) -> npt.NDArray[np.bool_]:
    """Which tile slots of which CTA are attended.

    Args:
        plan: the launch plan.
        tile_keep: optional ``[B, Hkv, ceil(T / block_n)]`` bool mask (None: every tile).

    Returns:
        ``[n_ctas, max_tiles]`` bool, rows in CTA-id order: True where the CTA loads and
        computes tile slot ``j`` of its split.
    """
    s = plan.shape
    ns, nt = plan.num_splits, plan.max_tiles
    n_tiles = -(-s.context // plan.block_n)
    keep = np.ones((s.batch, s.kv_heads, n_tiles), dtype=bool)
    if tile_keep is not None:
        tk = np.asarray(tile_keep)
        if tk.dtype != np.bool_ or tk.shape != keep.shape:
            raise ValueError(
                f"tile_keep must be a bool array of shape {keep.shape}, got {tk.dtype} {tk.shape}"
            )
        keep = tk
    pad = np.zeros((s.batch, s.kv_heads, ns * nt), dtype=bool)
    pad[:, :, :n_tiles] = keep
    act = pad.reshape(s.batch, s.kv_heads, ns, nt)
    # CTA id s + ns * (b + B * h): order (h, b, s).
    return np.ascontiguousarray(act.transpose(1, 0, 2, 3).reshape(plan.n_ctas, nt))


def split_k_trace(
    plan: SplitPlan,
    *,
    tile_keep: npt.NDArray[np.bool_] | None = None,
    producer: str = "coaccel.models.gpu.flash_decode",
    workload: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> Trace:
    """Build the trace of one split-K decode-attention step (module docstring).

    Args:
        plan: the launch plan.
        tile_keep: optional ``[B, Hkv, ceil(T / block_n)]`` bool mask of attended tiles.
        producer: the trace's producer name.
        workload: extra workload metadata (merged over the plan's own).
        seed: the seed of the inputs, or None.

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    s = plan.shape
    b_, t_, hq, hkv, d = s.batch, s.context, s.q_heads, s.kv_heads, s.head_dim
    g, ns, bn, eb = s.group, plan.num_splits, plan.block_n, plan.elem_bytes
    act = tile_activity(plan, tile_keep)
    meta = {
        "kernel": "flash_decode_split_k",
        "batch": b_,
        "context": t_,
        "q_heads": hq,
        "kv_heads": hkv,
        "head_dim": d,
        "block_n": bn,
        "num_splits": ns,
        "split_tokens": plan.split_tokens,
        "n_stages": plan.n_stages,
        "mma_m": plan.mma_m,
        "kv_layout": "[B, T, Hkv, D]",
        "dtype": "bf16",
        "tiles_attended": int(act.sum()),
        "tiles_total": int(plan.tiles_per_split.sum()) * b_ * hkv,
        **dict(workload or {}),
    }
    tb = TraceBuilder(producer=producer, workload=meta, seed=seed)
    row = d * eb
    tb.allocate("Q", space="HBM", nbytes=b_ * hq * row)
    tb.allocate("K", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("V", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("O_partial", space="HBM", nbytes=b_ * hq * ns * d * 4)
    tb.allocate("ML", space="HBM", nbytes=b_ * hq * ns * 2 * 4)
    tb.allocate("O", space="HBM", nbytes=b_ * hq * row)

    n_ctas = plan.n_ctas
    cta_ids = np.arange(n_ctas, dtype=np.int64)
    sp = cta_ids % ns
    bb = (cta_ids // ns) % b_
    hh = cta_ids // (ns * b_)
    kept = act.sum(axis=1).astype(np.int64)
    size = 3 + _PER_TILE * kept
    k0 = tb.begin_kernel(
        "flash_decode_split",
        ctas=n_ctas,
        threads_per_cta=plan.threads_per_cta,
        smem_bytes_per_cta=plan.smem_bytes_per_cta,
        regs_per_thread=plan.regs_per_thread,
    )
    first = tb.next_seq
    base = first + np.concatenate([[0], np.cumsum(size)[:-1]])

    # q rows of the group: G rows of D * 2 B, contiguous.
    tb.memory_many(
        seq=base,
        kernel=k0,
        cta=cta_ids,
        phase="load_q",
        tensor="Q",
        space="HBM",
        rw="r",
        addr=(bb * hq + hh * g) * row,
        nbytes=g * row,
        count=1,
    )
    cta_t, slot = np.nonzero(act)
    rank = np.arange(cta_t.size, dtype=np.int64) - np.concatenate([[0], np.cumsum(kept)])[cta_t]
    t_seq = base[cta_t] + 1 + _PER_TILE * rank
    tok0 = sp[cta_t] * plan.split_tokens + slot * bn
    rows = np.minimum(bn, t_ - tok0)
    kv_addr = ((bb[cta_t] * t_ + tok0) * hkv + hh[cta_t]) * row
    tile_id = tok0 // bn
    common = dict(kernel=k0, space="HBM", rw="r", nbytes=row, stride=hkv * row)
    tb.memory_many(
        seq=t_seq,
        cta=cta_t,
        phase="load_k",
        tensor="K",
        addr=kv_addr,
        count=rows,
        **common,
    )
    tb.compute_many(
        seq=t_seq + 1,
        kernel=k0,
        cta=cta_t,
        op="gemm",
        unit="tensor_core",
        m=plan.mma_m,
        n=bn,
        k=d,
        fmt_a="bf16",
        fmt_b="bf16",
        tile=tile_id,
        dep=t_seq,
    )
    tb.compute_many(
        seq=t_seq + 2,
        kernel=k0,
        cta=cta_t,
        op="softmax",
        unit="cuda_core",
        m=g,
        n=bn,
        k=0,
        fmt_a="fp32",
        tile=tile_id,
        dep=t_seq + 1,
    )
    tb.memory_many(
        seq=t_seq + 3,
        cta=cta_t,
        phase="load_v",
        tensor="V",
        addr=kv_addr,
        count=rows,
        **common,
    )
    tb.compute_many(
        seq=t_seq + 4,
        kernel=k0,
        cta=cta_t,
        op="gemm",
        unit="tensor_core",
        m=plan.mma_m,
        n=d,
        k=bn,
        fmt_a="bf16",
        fmt_b="bf16",
        tile=tile_id,
        dep=t_seq + 3,
    )
    end_seq = base + 1 + _PER_TILE * kept
    last_pv = np.where(kept > 0, end_seq - 1, -1)
    emit_partial_writes(tb, plan, k0, cta_ids, end_seq, last_pv)
    tb.end_kernel(k0, name="flash_decode_split")
    emit_reduce_kernel(tb, plan, "flash_decode_reduce")
    return tb.build()


def emit_reduce_kernel(tb: TraceBuilder, plan: SplitPlan, name: str) -> int:
    """Append the reduction kernel of a split-K step to ``tb`` (grid (B, Hq), CTA id
    ``b + B * hq``): read the row's (m, l) pairs (tensor ``ML``) and partial outputs
    (``O_partial``) of every split, merge them, write the bf16 output row (``O``).

    Args:
        tb: the trace builder, with the tensors ``ML``, ``O_partial`` and ``O`` allocated.
        plan: the launch plan.
        name: the kernel's name.

    Returns:
        The kernel id.
    """
    s = plan.shape
    b_, hq, d, ns = s.batch, s.q_heads, s.head_dim, plan.num_splits
    row = d * plan.elem_bytes

    n_red = b_ * hq
    k1 = tb.begin_kernel(
        name,
        ctas=n_red,
        threads_per_cta=plan.reduce_threads_per_cta,
        smem_bytes_per_cta=plan.reduce_smem_bytes_per_cta,
        regs_per_thread=REDUCE_REGS_PER_THREAD,
    )
    rid = np.arange(n_red, dtype=np.int64)
    rb, rh = rid % b_, rid // b_
    rbase = tb.next_seq + 4 * rid
    rrow = rb * hq + rh
    tb.memory_many(
        seq=rbase,
        kernel=k1,
        cta=rid,
        phase="load_partial",
        tensor="ML",
        space="HBM",
        rw="r",
        addr=rrow * ns * 8,
        nbytes=ns * 8,
        count=1,
    )
    tb.memory_many(
        seq=rbase + 1,
        kernel=k1,
        cta=rid,
        phase="load_partial",
        tensor="O_partial",
        space="HBM",
        rw="r",
        addr=rrow * ns * d * 4,
        nbytes=ns * d * 4,
        count=1,
    )
    tb.compute_many(
        seq=rbase + 2,
        kernel=k1,
        cta=rid,
        op="lse_merge",
        unit="cuda_core",
        m=1,
        n=d,
        k=ns,
        fmt_a="fp32",
        fmt_b="fp32",
        dep=rbase + 1,
    )
    tb.memory_many(
        seq=rbase + 3,
        kernel=k1,
        cta=rid,
        phase="write_out",
        tensor="O",
        space="HBM",
        rw="w",
        addr=rrow * row,
        nbytes=row,
        count=1,
        dep=rbase + 2,
    )
    tb.end_kernel(k1, name=name)
    return k1


def emit_partial_writes(
    tb: TraceBuilder,
    plan: SplitPlan,
    kernel: int,
    cta_ids: npt.NDArray[np.int64],
    seq: npt.NDArray[np.int64],
    dep: npt.NDArray[np.int64],
) -> None:
    """Append every split CTA's writes of its partial output rows (``O_partial``, G rows of
    ``D * 4`` B, ``splits * D * 4`` B apart) and (m, l) pairs (``ML``) to ``tb``, at seq
    numbers ``seq`` and ``seq + 1``, each depending on ``dep`` (-1: none).

    Args:
        tb: the trace builder. plan: the launch plan. kernel: the split kernel's id.
        cta_ids: ``[n]`` CTA ids ``s + splits * (b + B * h)``.
        seq: ``[n]`` seq number of each CTA's first write. dep: ``[n]`` its dependency.
    """
    s = plan.shape
    b_, hq, d, g, ns = s.batch, s.q_heads, s.head_dim, s.group, plan.num_splits
    sp = cta_ids % ns
    bb = (cta_ids // ns) % b_
    hh = cta_ids // (ns * b_)
    k0, end_seq, last_pv = kernel, seq, dep
    head0 = bb * hq + hh * g
    tb.memory_many(
        seq=end_seq,
        kernel=k0,
        cta=cta_ids,
        phase="write_partial",
        tensor="O_partial",
        space="HBM",
        rw="w",
        addr=(head0 * ns + sp) * d * 4,
        nbytes=d * 4,
        stride=ns * d * 4,
        count=g,
        dep=last_pv,
    )
    tb.memory_many(
        seq=end_seq + 1,
        kernel=k0,
        cta=cta_ids,
        phase="write_partial",
        tensor="ML",
        space="HBM",
        rw="w",
        addr=(head0 * ns + sp) * 8,
        nbytes=8,
        stride=ns * 8,
        count=g,
        dep=last_pv,
    )
