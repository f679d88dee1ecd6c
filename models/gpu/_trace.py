"""Trace of a split-K decode-attention step (the contract of ``coaccel.trace``; docs/trace.md).

:func:`split_k_trace` emits, for a :class:`~._splitk.SplitPlan`, the two kernels of the step on
stream 0 (docs/gpu_decode.md has the layout):

* kernel 0 ``flash_decode_split``, grid (splits, B, Hkv), CTA id ``s + splits * (b + B * h)``:
  per CTA one read of its G query rows, then per attended tile a K read (a strided run of
  ``count`` token rows of ``D * 2`` B, ``Hkv * D * 2`` B apart: the token-major layout), the
  Q·K^T product, the online-softmax update, a V read and the P·V product; finally the write
  of its partial output rows and of its (m, l) pairs;
* kernel 1 ``flash_decode_reduce``, grid (B, Hq), CTA id ``b + B * hq``: read the row's (m, l)
  pairs and partial outputs of every split, merge them, write the bf16 output row. A launch
  plan of a kernel library (:mod:`._libraries`) may instead end with FlashAttention-2's
  combine (``combine="serial"``, :func:`emit_serial_combine_kernel`: a CTA per few rows that
  loads the splits one after the other), with FlashAttention-3's (``combine="pipelined"``: the
  same walk with a few loads in flight) or with no combine kernel (one split).

All tensors are placed in HBM (the tensor map), so that a simulator can hash addresses to L2
sets and channels; the simulator, not the trace, decides which accesses hit in L2. Every record
is added in bulk with precomputed seq numbers (CTA-major issue order), so the trace of a 128K
context layer builds in well under a second.

The pieces the package's other trace producers (FFD, NOSA, Specter, the microbenchmarks) share:

* :func:`allocate_split_k_tensors`, :func:`split_cta_coords`, :class:`KernelRecords`,
  :func:`emit_partial_writes`, :func:`emit_reduce_kernel` and
  :func:`emit_serial_combine_kernel`: the tensors, CTA layout and
  records of the split-K skeleton;
* :func:`emit_host_copy`: the records of copies over the host link, h2d or d2h, whether a
  copy engine (a ``memcpy_h2d*`` / ``memcpy_d2h*`` kernel) or the SMs (zero-copy loads in a
  compute kernel) move them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._splitk import SplitPlan

__all__ = [
    "REDUCE_REGS_PER_THREAD",
    "emit_partial_writes",
    "emit_reduce_kernel",
    "emit_serial_combine_kernel",
    "split_k_trace",
    "tile_activity",
]

REDUCE_REGS_PER_THREAD = 32
"""Registers per thread of the reduction kernel ([OURS]: a short loop over the splits)."""

_PER_TILE = 5  # K read, QK, softmax, V read, PV

CombineKind = Literal["rows", "serial", "pipelined", "none"]
"""The kernel that merges a split-K step's partials (:func:`split_k_trace`)."""

CopyDirection = Literal["h2d", "d2h"]
"""Direction of a copy over the host link: host to device or device to host."""


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
    combine: CombineKind = "rows",
    combine_rows_per_cta: int = 4,
    combine_stages: int = 4,
) -> Trace:
    """Build the trace of one split-K decode-attention step (module docstring).

    Args:
        plan: the launch plan.
        tile_keep: optional ``[B, Hkv, ceil(T / block_n)]`` bool mask of attended tiles.
        producer: the trace's producer name.
        workload: extra workload metadata (merged over the plan's own).
        seed: the seed of the inputs, or None.
        combine: the kernel that merges the partials: ``"rows"`` the reduction kernel 1 of the
            module docstring, ``"serial"`` FlashAttention-2's combine
            (:func:`emit_serial_combine_kernel`), ``"pipelined"`` FlashAttention-3's (the same
            walk with ``combine_stages`` loads in flight), ``"none"`` none (a launch of one
            split).
        combine_rows_per_cta: query rows per CTA of the ``"serial"`` / ``"pipelined"`` combine
            (>= 1).
        combine_stages: buffers of the ``"pipelined"`` combine's load pipeline (>= 1).

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    if combine not in ("rows", "serial", "pipelined", "none"):
        raise ValueError(f"combine={combine!r}; valid: rows, serial, pipelined, none")
    if combine == "none" and plan.num_splits != 1:
        raise ValueError(f"combine='none' needs one split, not {plan.num_splits}")
    act = tile_activity(plan, tile_keep)
    meta = _split_k_meta(plan, act, workload)
    if combine != "rows":  # the default trace stays as it was (digests, golden files)
        meta["combine"] = combine
    if combine == "pipelined":
        meta["combine_stages"] = int(combine_stages)
    tb = TraceBuilder(producer=producer, workload=meta, seed=seed)
    allocate_split_k_tensors(tb, plan)
    _emit_split_kernel(tb, plan, act)
    if combine == "rows":
        emit_reduce_kernel(tb, plan, "flash_decode_reduce")
    elif combine == "serial":
        emit_serial_combine_kernel(tb, plan, "flash_decode_combine", combine_rows_per_cta)
    elif combine == "pipelined":
        emit_serial_combine_kernel(tb, plan, "flash_decode_combine", combine_rows_per_cta,
                                   stages=combine_stages)  # fmt: skip
    return tb.build()


def _split_k_meta(
    plan: SplitPlan, act: npt.NDArray[np.bool_], workload: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Workload metadata of a split-K trace: geometry, plan and attended tiles."""
    s = plan.shape
    return {
        "kernel": "flash_decode_split_k",
        "batch": s.batch,
        "context": s.context,
        "q_heads": s.q_heads,
        "kv_heads": s.kv_heads,
        "head_dim": s.head_dim,
        "block_n": plan.block_n,
        "num_splits": plan.num_splits,
        "split_tokens": plan.split_tokens,
        "n_stages": plan.n_stages,
        "mma_m": plan.mma_m,
        "kv_layout": "[B, T, Hkv, D]",
        "dtype": "bf16",
        "tiles_attended": int(act.sum()),
        "tiles_total": int(plan.tiles_per_split.sum()) * s.batch * s.kv_heads,
        **dict(workload or {}),
    }


def allocate_split_k_tensors(tb: TraceBuilder, plan: SplitPlan) -> None:
    """Place the tensors of a split-K step in HBM, in this order: ``Q`` ``[B, Hq, D]``, ``K``
    and ``V`` ``[B, T, Hkv, D]`` (bf16), ``O_partial`` ``[B, Hq, splits, D]`` and ``ML``
    ``[B, Hq, splits, 2]`` (float32), ``O`` ``[B, Hq, D]`` (bf16).

    Args:
        tb: the trace builder. plan: the launch plan.
    """
    s = plan.shape
    b_, t_, hq, hkv, d, ns = s.batch, s.context, s.q_heads, s.kv_heads, s.head_dim, plan.num_splits
    row = d * plan.elem_bytes
    tb.allocate("Q", space="HBM", nbytes=b_ * hq * row)
    tb.allocate("K", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("V", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("O_partial", space="HBM", nbytes=b_ * hq * ns * d * 4)
    tb.allocate("ML", space="HBM", nbytes=b_ * hq * ns * 2 * 4)
    tb.allocate("O", space="HBM", nbytes=b_ * hq * row)


def split_cta_coords(
    plan: SplitPlan, cta_ids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Split, sequence and KV head of split-kernel CTAs (CTA id ``s + splits * (b + B * h)``).

    Args:
        plan: the launch plan. cta_ids: ``[n]`` CTA ids.

    Returns:
        ``(s, b, h)``, each ``[n]`` int64.
    """
    ns, b_ = plan.num_splits, plan.shape.batch
    return cta_ids % ns, (cta_ids // ns) % b_, cta_ids // (ns * b_)


def _emit_split_kernel(tb: TraceBuilder, plan: SplitPlan, act: npt.NDArray[np.bool_]) -> None:
    """Kernel 0, ``flash_decode_split``: per CTA the query read, then per attended tile slot
    (``act``, :func:`tile_activity`) K read, Q·K^T, softmax, V read and P·V, then the partial
    writes; seq numbers CTA-major."""
    s = plan.shape
    t_, hkv, bn, row = s.context, s.kv_heads, plan.block_n, s.head_dim * plan.elem_bytes
    cta_ids = np.arange(plan.n_ctas, dtype=np.int64)
    sp, bb, hh = split_cta_coords(plan, cta_ids)
    kept = act.sum(axis=1).astype(np.int64)
    k0 = tb.begin_kernel(
        "flash_decode_split",
        ctas=plan.n_ctas,
        threads_per_cta=plan.threads_per_cta,
        smem_bytes_per_cta=plan.smem_bytes_per_cta,
        regs_per_thread=plan.regs_per_thread,
    )
    base = tb.next_seq + np.concatenate([[0], np.cumsum(3 + _PER_TILE * kept)[:-1]])
    rec = KernelRecords(tb, plan, k0)
    rec.query_reads(cta_ids, base, bb, hh)
    cta_t, slot = np.nonzero(act)
    rank = np.arange(cta_t.size, dtype=np.int64) - np.concatenate([[0], np.cumsum(kept)])[cta_t]
    t_seq = base[cta_t] + 1 + _PER_TILE * rank
    tok0 = sp[cta_t] * plan.split_tokens + slot * bn
    rows = np.minimum(bn, t_ - tok0)
    kv_addr = ((bb[cta_t] * t_ + tok0) * hkv + hh[cta_t]) * row
    tile_id = tok0 // bn
    rec.row_reads(cta_t, t_seq, "load_k", "K", kv_addr, row, rows)
    rec.score_gemm(cta_t, t_seq + 1, tile_id)
    rec.softmax_pv(cta_t, t_seq + 2, tile_id, kv_addr, rows)
    end_seq = base + 1 + _PER_TILE * kept
    last_pv = np.where(kept > 0, end_seq - 1, -1)
    emit_partial_writes(tb, plan, k0, cta_ids, end_seq, last_pv)
    tb.end_kernel(k0, name="flash_decode_split")


@dataclass(frozen=True)
class KernelRecords:
    """Adds records of a kernel of a split-K step (id ``kernel``, launched for ``plan``) to
    ``tb``.

    Each method adds ``n`` records at once: ``cta`` and ``seq`` are their CTA ids and seq
    numbers, shape (n,) int64; other per-record arguments are scalars or shape (n,) arrays.
    """

    tb: TraceBuilder
    plan: SplitPlan
    kernel: int

    def hbm(
        self,
        rw: str,
        cta: npt.ArrayLike,
        seq: npt.ArrayLike,
        phase: str,
        tensor: str,
        addr: npt.ArrayLike,
        nbytes: npt.ArrayLike,
        *,
        stride: npt.ArrayLike | None = None,
        count: npt.ArrayLike = 1,
        dep: npt.ArrayLike = -1,
    ) -> None:
        """Reads (``rw="r"``) or writes (``"w"``) of ``tensor`` in HBM: ``count`` rows of
        ``nbytes`` B, ``stride`` B apart (None: contiguous), from byte offset ``addr``, each
        waiting for ``dep`` (-1: nothing)."""
        self.tb.memory_many(seq=seq, kernel=self.kernel, cta=cta, phase=phase, tensor=tensor,
                            space="HBM", rw=rw, addr=addr, nbytes=nbytes,
                            stride=nbytes if stride is None else stride, count=count,
                            dep=dep)  # fmt: skip

    def query_reads(
        self, cta: npt.ArrayLike, seq: npt.ArrayLike, b: npt.ArrayLike, h: npt.ArrayLike
    ) -> None:
        """The G contiguous query rows (``D * 2`` B each) of KV head ``h`` of sequence ``b``."""
        s = self.plan.shape
        row = s.head_dim * self.plan.elem_bytes
        addr = (np.asarray(b) * s.q_heads + np.asarray(h) * s.group) * row
        self.hbm("r", cta, seq, "load_q", "Q", addr, s.group * row)

    def row_reads(
        self,
        cta: npt.ArrayLike,
        seq: npt.ArrayLike,
        phase: str,
        tensor: str,
        addr: npt.ArrayLike,
        row_bytes: int,
        count: npt.ArrayLike,
    ) -> None:
        """Tile reads of a token-major ``[B, T, Hkv, ...]`` HBM tensor: ``count`` rows of
        ``row_bytes`` B, ``Hkv * row_bytes`` B apart, from byte offset ``addr``."""
        stride = self.plan.shape.kv_heads * row_bytes
        self.hbm("r", cta, seq, phase, tensor, addr, row_bytes, stride=stride, count=count)

    def gemm(
        self,
        cta: npt.ArrayLike,
        seq: npt.ArrayLike,
        *,
        n: npt.ArrayLike,
        k: npt.ArrayLike,
        fmt_a: str,
        fmt_b: str,
        dep: npt.ArrayLike,
        tile: npt.ArrayLike = -1,
    ) -> None:
        """Tensor-core products ``mma_m x n x k`` (the group's query rows padded to the MMA
        tile), each waiting for ``dep``."""
        self.tb.compute_many(seq=seq, kernel=self.kernel, cta=cta, op="gemm", unit="tensor_core",
                             m=self.plan.mma_m, n=n, k=k, fmt_a=fmt_a, fmt_b=fmt_b, tile=tile,
                             dep=dep)  # fmt: skip

    def score_gemm(
        self,
        cta: npt.ArrayLike,
        seq: npt.NDArray[np.int64],
        tile: npt.ArrayLike,
        fmt_a: str = "bf16",
        fmt_b: str = "bf16",
    ) -> None:
        """The score products of tiles, ``mma_m x block_n x D``, each waiting for the record
        just before it (the read of its key operand)."""
        d, bn = self.plan.shape.head_dim, self.plan.block_n
        self.gemm(cta, seq, n=bn, k=d, fmt_a=fmt_a, fmt_b=fmt_b, dep=seq - 1, tile=tile)

    def softmax_pv(
        self,
        cta: npt.ArrayLike,
        seq: npt.NDArray[np.int64],
        tile: npt.ArrayLike,
        v_addr: npt.ArrayLike,
        rows: npt.ArrayLike,
    ) -> None:
        """The rest of an attended tile: the online-softmax update at ``seq`` (after the score
        product at ``seq - 1``), the read of the tile's ``rows`` V rows (bf16, token-major,
        from byte offset ``v_addr``) at ``seq + 1`` and the P·V product at ``seq + 2``."""
        s, bn = self.plan.shape, self.plan.block_n
        self.tb.compute_many(seq=seq, kernel=self.kernel, cta=cta, op="softmax",
                             unit="cuda_core", m=s.group, n=bn, k=0, fmt_a="fp32", tile=tile,
                             dep=seq - 1)  # fmt: skip
        self.row_reads(cta, seq + 1, "load_v", "V", v_addr, s.head_dim * self.plan.elem_bytes, rows)
        self.gemm(cta, seq + 2, n=s.head_dim, k=bn, fmt_a="bf16", fmt_b="bf16", dep=seq + 1,
                  tile=tile)  # fmt: skip


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
    rec = KernelRecords(tb, plan, k1)
    rec.hbm("r", rid, rbase, "load_partial", "ML", rrow * ns * 8, ns * 8)
    rec.hbm("r", rid, rbase + 1, "load_partial", "O_partial", rrow * ns * d * 4, ns * d * 4)
    tb.compute_many(seq=rbase + 2, kernel=k1, cta=rid, op="lse_merge", unit="cuda_core", m=1,
                    n=d, k=ns, fmt_a="fp32", fmt_b="fp32", dep=rbase + 1)  # fmt: skip
    rec.hbm("w", rid, rbase + 3, "write_out", "O", rrow * row, row, dep=rbase + 2)
    tb.end_kernel(k1, name=name)
    return k1


def emit_serial_combine_kernel(
    tb: TraceBuilder, plan: SplitPlan, name: str, rows_per_cta: int, *, stages: int = 1
) -> int:
    """Append a combine kernel that walks the splits in order to ``tb``: CTA ``c`` merges query
    rows ``c * rows_per_cta ..`` of the ``B x Hq`` rows. It reads the rows' (m, l) pairs of
    every split at once (tensor ``ML``), then the rows' partial outputs (``O_partial``) split
    after split, merges them and writes the bf16 rows (``O``).

    ``stages`` is how many partial loads are in flight:

    * 1, FlashAttention-2's combine ([FA2-REPO] ``combine_attn_seqk_parallel``): the loop
      consumes each split's values before it issues the next load, so load ``s`` waits for load
      ``s - 1`` (load 0 for the (m, l) read): one load latency per split.
    * ``k`` > 1, FlashAttention-3's ([FA3-REPO] ``hopper/flash_fwd_combine_kernel.h``,
      ``kStages = 4``): loads ``0 .. k - 2`` are issued with the (m, l) read; iteration ``s``
      issues load ``s + k - 1`` and then waits for load ``s``, so load ``s`` waits for load
      ``s - k`` (load ``k - 1`` for the (m, l) read): about ``splits / k`` latencies.

    Args:
        tb: the trace builder, with the tensors ``ML``, ``O_partial`` and ``O`` allocated.
        plan: the launch plan. name: the kernel's name. rows_per_cta: rows per CTA (>= 1).
        stages: loads in flight (>= 1).

    Returns:
        The kernel id.
    """
    if rows_per_cta < 1:
        raise ValueError(f"rows_per_cta={rows_per_cta} must be >= 1")
    if stages < 1:
        raise ValueError(f"stages={stages} must be >= 1")
    s = plan.shape
    n_rows, d, ns = s.batch * s.q_heads, s.head_dim, plan.num_splits
    n_cta = -(-n_rows // rows_per_cta)
    k1 = tb.begin_kernel(name, ctas=n_cta, threads_per_cta=plan.reduce_threads_per_cta,
                         smem_bytes_per_cta=plan.reduce_smem_bytes_per_cta,
                         regs_per_thread=REDUCE_REGS_PER_THREAD)  # fmt: skip
    per = 3 + ns
    cid = np.arange(n_cta, dtype=np.int64)
    r0 = cid * rows_per_cta
    nrows = np.minimum(rows_per_cta, n_rows - r0)
    base = tb.next_seq + per * cid
    rec = KernelRecords(tb, plan, k1)
    rec.hbm("r", cid, base, "load_partial", "ML", r0 * ns * 8, nrows * ns * 8)
    sp = np.arange(ns, dtype=np.int64)
    c2 = np.repeat(cid, ns)
    seq = (base[:, None] + 1 + sp[None, :]).ravel()
    addr = ((r0[:, None] * ns + sp[None, :]) * d * 4).ravel()
    # load s waits for load s - stages (seq - stages); the (m, l) read is load -1 (seq base)
    lag = np.tile(sp, n_cta) - stages
    dep = np.where(lag >= -1, seq - stages, -1)
    rec.hbm("r", c2, seq, "load_partial", "O_partial", addr, d * 4, stride=ns * d * 4,
            count=np.repeat(nrows, ns), dep=dep)  # fmt: skip
    tb.compute_many(seq=base + 1 + ns, kernel=k1, cta=cid, op="lse_merge", unit="cuda_core",
                    m=nrows, n=d, k=ns, fmt_a="fp32", fmt_b="fp32", dep=base + ns)  # fmt: skip
    rec.hbm("w", cid, base + 2 + ns, "write_out", "O", r0 * d * plan.elem_bytes,
            nrows * d * plan.elem_bytes, dep=base + 1 + ns)  # fmt: skip
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
    hq, d, g, ns = s.q_heads, s.head_dim, s.group, plan.num_splits
    sp, bb, hh = split_cta_coords(plan, cta_ids)
    head0 = bb * hq + hh * g
    rec = KernelRecords(tb, plan, kernel)
    rec.hbm("w", cta_ids, seq, "write_partial", "O_partial", (head0 * ns + sp) * d * 4, d * 4,
            stride=ns * d * 4, count=g, dep=dep)  # fmt: skip
    rec.hbm("w", cta_ids, seq + 1, "write_partial", "ML", (head0 * ns + sp) * 8, 8,
            stride=ns * 8, count=g, dep=dep)  # fmt: skip


def emit_host_copy(
    tb: TraceBuilder,
    direction: CopyDirection,
    *,
    kernel: int,
    host_tensor: str,
    device_tensor: str,
    nbytes: Any,
    host_addr: Any = 0,
    device_addr: Any = 0,
    stride: Any = None,
    count: Any = 1,
    cta: Any = 0,
    phase: str = "",
    stream: int = 0,
) -> npt.NDArray[np.int64]:
    """Append copies between host memory (``HOST``) and device memory (``HBM``) to ``tb``:
    per copy a read of its source, then a write of its destination that depends on the read
    (``"h2d"``: reads ``host_tensor``, writes ``device_tensor``; ``"d2h"``: the reverse).

    Each copy is ``count`` rows of ``nbytes`` B, ``stride`` B apart on both sides. The
    simulator reads the host bytes of a ``memcpy_h2d*`` / ``memcpy_d2h*`` kernel as a
    copy-engine transfer and those of any other kernel as zero-copy loads by its CTAs.
    Every argument after ``host_tensor`` may be a scalar or a shape (N,) array (N copies, all
    reads first, then all writes).

    Args:
        tb: the trace builder, with both tensors allocated.
        direction: ``"h2d"`` or ``"d2h"``.
        kernel: the kernel id. host_tensor: the ``HOST`` tensor. device_tensor: the ``HBM``
            tensor.
        nbytes: bytes per row, B. host_addr: byte offset in ``host_tensor``, B.
        device_addr: byte offset in ``device_tensor``, B.
        stride: bytes between row starts, B (None: ``nbytes``). count: rows per copy.
        cta: the CTA ids. phase: phase name. stream: stream id.

    Returns:
        Shape (N,) int64 seq numbers of the writes.
    """
    if direction not in ("h2d", "d2h"):
        raise ValueError(f"direction must be 'h2d' or 'd2h', got {direction!r}")
    host = ("HOST", host_tensor, host_addr)
    device = ("HBM", device_tensor, device_addr)
    src, dst = (host, device) if direction == "h2d" else (device, host)
    rows = dict(
        kernel=kernel,
        cta=cta,
        phase=phase,
        nbytes=nbytes,
        stride=nbytes if stride is None else stride,
        count=count,
        stream=stream,
    )
    read = tb.memory_many(space=src[0], tensor=src[1], addr=src[2], rw="r", **rows)
    return tb.memory_many(space=dst[0], tensor=dst[1], addr=dst[2], rw="w", dep=read, **rows)
