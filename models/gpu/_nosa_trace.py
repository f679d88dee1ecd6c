"""Trace of one NOSA / NOSI decode step (:func:`.nosa.nosa_decode`, module docstring there, steps
1-7): score, select and diff, fetch of the missed blocks (zero-copy or DMA), attention over the
slot cache, write-back of a filled tail block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._splitk import DecodeShape, SplitPlan, plan_split_k
from ._trace import allocate_split_k_tensors, emit_host_copy, split_k_trace

if TYPE_CHECKING:
    from ._nosa_config import NosaConfig

PRODUCER = "coaccel.models.gpu.nosa"


def _attn_plan(shape: DecodeShape, cfg: NosaConfig, n_sms: int) -> SplitPlan:
    """Split-K plan of the attention over the whole slot cache (``slots x block_tokens``)."""
    cap = cfg.slots * cfg.block_tokens
    ashape = DecodeShape(shape.batch, cap, shape.q_heads, shape.kv_heads, shape.head_dim)
    return plan_split_k(ashape, block_n=cfg.block_tokens, n_sms=n_sms)


def _step_trace(
    shape: DecodeShape,
    cfg: NosaConfig,
    t: int,
    n_ck: int,
    loads: list[list[tuple[int, int]]],
    slot_map: npt.NDArray[np.int64],
    writeback: bool,
    n_sms: int,
) -> Trace:
    """Trace of one step at context ``t``: score, select/diff, fetch, attention, write-back
    (:class:`_StepLayout` has the tensors)."""
    plan = _attn_plan(shape, cfg, n_sms)
    lay = _StepLayout.of(shape, cfg, t)
    tb = TraceBuilder(producer=PRODUCER, workload={"context": t, "batch": shape.batch})
    _allocate_step_tensors(tb, lay, plan)
    tail_slot = np.array(
        [
            int(np.flatnonzero(slot_map[b, h] == lay.nb - 1)[0])
            for b, h in zip(lay.hb, lay.hh, strict=True)
        ]
    )
    _emit_score_kernel(tb, lay, n_ck, tail_slot)
    if writeback:
        _emit_writeback(tb, lay, tail_slot)
    _emit_select_kernel(tb, lay)
    _emit_fetches(tb, lay, loads)
    pre = tb.build()
    # attention over the occupied slots, in slot order (tile j of the cache = slot j)
    keep = np.ascontiguousarray(slot_map >= 0)
    attn = split_k_trace(
        plan, tile_keep=keep, producer=PRODUCER, workload={"context": t, "batch": shape.batch}
    )
    return pre.concat(attn)


@dataclass(frozen=True)
class _StepLayout:
    """Sizes and addresses of one step's trace at context ``t``.

    The GPU slot cache is the attention's ``K`` / ``V`` tensors, token-major over
    ``slots x block_tokens`` positions (slot ``s`` holds positions ``s * block_tokens ..``);
    the host copy ``K_host`` / ``V_host`` is ``[B, T_max, Hkv, D]`` token-major with ``T_max``
    = the run's final context rounded up to a block, so that the steps of one run share one
    tensor map.

    Attributes:
        shape: the run's geometry (final context). cfg: the cache parameters.
        t: the step's context. nb: its blocks.
        row: bytes of one K or V row, B. cap: slot-cache positions per (sequence, KV head).
        nb_max: blocks of the final context. t_host: ``T_max``.
        n_ck_max: compressed keys of the final context.
        heads: ``[B * Hkv]`` (sequence, KV head) ids ``b * Hkv + h``; hb, hh: their sequence
            and KV head.
    """

    shape: DecodeShape
    cfg: NosaConfig
    t: int
    nb: int
    row: int
    cap: int
    nb_max: int
    t_host: int
    n_ck_max: int
    heads: npt.NDArray[np.int64]
    hb: npt.NDArray[np.int64]
    hh: npt.NDArray[np.int64]

    @classmethod
    def of(cls, shape: DecodeShape, cfg: NosaConfig, t: int) -> _StepLayout:
        """The layout of the step at context ``t`` of a run of geometry ``shape``."""
        bt, hkv = cfg.block_tokens, shape.kv_heads
        nb_max = -(-shape.context // bt)
        heads = np.arange(shape.batch * hkv, dtype=np.int64)
        return cls(
            shape=shape,
            cfg=cfg,
            t=t,
            nb=-(-t // bt),
            row=shape.head_dim * 2,
            cap=cfg.slots * bt,
            nb_max=nb_max,
            t_host=nb_max * bt,
            n_ck_max=max(1, (shape.context - cfg.compress_window) // cfg.compress_stride + 1),
            heads=heads,
            hb=heads // hkv,
            hh=heads % hkv,
        )

    def device_addr(self, b: Any, pos: Any, h: Any) -> Any:
        """Byte offset in ``K`` / ``V`` of slot-cache position ``pos`` of (``b``, ``h``)."""
        return ((b * self.cap + pos) * self.shape.kv_heads + h) * self.row

    def host_addr(self, b: Any, tok: Any, h: Any) -> Any:
        """Byte offset in ``K_host`` / ``V_host`` of token ``tok`` of (``b``, ``h``)."""
        return ((b * self.t_host + tok) * self.shape.kv_heads + h) * self.row


def _allocate_step_tensors(tb: TraceBuilder, lay: _StepLayout, plan: SplitPlan) -> None:
    """The attention's tensors first (in :func:`split_k_trace`'s order and sizes, so that it
    concatenates onto the same placement), then the selection state and the host copy."""
    b_, hkv, slots = lay.shape.batch, lay.shape.kv_heads, lay.cfg.slots
    allocate_split_k_tensors(tb, plan)
    tb.allocate("CK", space="HBM", nbytes=b_ * hkv * lay.n_ck_max * lay.row)
    tb.allocate("block_score", space="HBM", nbytes=b_ * hkv * lay.nb_max * 4)
    tb.allocate("cis_block", space="HBM", nbytes=b_ * hkv * lay.nb_max * 4)
    tb.allocate("slot_map", space="HBM", nbytes=b_ * hkv * slots * 4)
    tb.allocate("load_list", space="HBM", nbytes=b_ * hkv * slots * 8)
    tb.allocate("cis_slots", space="HBM", nbytes=b_ * hkv * lay.cap * 2)
    tb.allocate("K_host", space="HOST", nbytes=b_ * lay.t_host * hkv * lay.row)
    tb.allocate("V_host", space="HOST", nbytes=b_ * lay.t_host * hkv * lay.row)
    tb.allocate("cis_host", space="HOST", nbytes=b_ * hkv * lay.t_host * 2)


def _emit_score_kernel(
    tb: TraceBuilder, lay: _StepLayout, n_ck: int, tail_slot: npt.NDArray[np.int64]
) -> None:
    """Kernel ``nosa_score``, one CTA per (sequence, KV head): append the new token's K and V
    rows to their slot, read the query and the ``n_ck`` compressed keys, score, write the
    block scores."""
    s, heads, row = lay.shape, lay.heads, lay.row
    tail_pos = tail_slot * lay.cfg.block_tokens + (lay.t - 1) % lay.cfg.block_tokens
    with tb.kernel(
        "nosa_score",
        ctas=heads.size,
        threads_per_cta=128,
        smem_bytes_per_cta=16 * row,
        regs_per_thread=64,
    ) as k0:
        for name in ("K", "V"):
            tb.memory_many(kernel=k0, cta=heads, phase="append", tensor=name, space="HBM",
                           rw="w", addr=lay.device_addr(lay.hb, tail_pos, lay.hh),
                           nbytes=row)  # fmt: skip
        tb.memory_many(kernel=k0, cta=heads, phase="load_q", tensor="Q", space="HBM", rw="r",
                       addr=(lay.hb * s.q_heads + lay.hh * s.group) * row,
                       nbytes=s.group * row)  # fmt: skip
        if n_ck:
            rd = tb.memory_many(kernel=k0, cta=heads, phase="load_ck", tensor="CK", space="HBM",
                                rw="r", addr=heads * lay.n_ck_max * row,
                                nbytes=n_ck * row)  # fmt: skip
            tb.compute_many(kernel=k0, cta=heads, op="gemm", unit="tensor_core", m=16, n=n_ck,
                            k=s.head_dim, fmt_a="bf16", fmt_b="bf16", dep=rd)  # fmt: skip
        tb.memory_many(kernel=k0, cta=heads, phase="write_score", tensor="block_score",
                       space="HBM", rw="w", addr=heads * lay.nb_max * 4,
                       nbytes=lay.nb * 4)  # fmt: skip


def _emit_writeback(tb: TraceBuilder, lay: _StepLayout, tail_slot: npt.NDArray[np.int64]) -> None:
    """Write-back of the tail block the append just filled: a ``memcpy_d2h`` of its K and V
    rows on copy stream 2, after stream 0's work so far (it overlaps the rest of the step)."""
    bt, hkv, row = lay.cfg.block_tokens, lay.shape.kv_heads, lay.row
    ready = tb.event("record", stream=0)
    tb.event("wait", stream=2, dep=ready)
    with tb.kernel("memcpy_d2h_nosa_tail", stream=2) as kw:
        for dev, host in (("K", "K_host"), ("V", "V_host")):
            emit_host_copy(
                tb,
                "d2h",
                kernel=kw,
                host_tensor=host,
                device_tensor=dev,
                host_addr=lay.host_addr(lay.hb, (lay.nb - 1) * bt, lay.hh),
                device_addr=lay.device_addr(lay.hb, tail_slot * bt, lay.hh),
                nbytes=row,
                stride=hkv * row,
                count=bt,
                cta=lay.heads,
                phase="writeback",
                stream=2,
            )


def _emit_select_kernel(tb: TraceBuilder, lay: _StepLayout) -> None:
    """Kernel ``nosa_select``, one CTA per (sequence, KV head): read the block scores and
    eviction scores, select, diff against the slot map, rewrite it and the load list."""
    heads, slots, nb = lay.heads, lay.cfg.slots, lay.nb
    with tb.kernel("nosa_select", ctas=heads.size, threads_per_cta=256, regs_per_thread=32) as k1:
        for name in ("block_score", "cis_block"):
            tb.memory_many(kernel=k1, cta=heads, phase="load_score", tensor=name, space="HBM",
                           rw="r", addr=heads * lay.nb_max * 4, nbytes=nb * 4)  # fmt: skip
        tb.compute_many(
            kernel=k1, cta=heads, op="topk", unit="cuda_core", m=1, n=nb, k=0, fmt_a="fp32"
        )
        for rw in ("r", "w"):  # the slot map is read, diffed against the selection, rewritten
            tb.memory_many(kernel=k1, cta=heads, phase="slot_map", tensor="slot_map",
                           space="HBM", rw=rw, addr=heads * slots * 4,
                           nbytes=slots * 4)  # fmt: skip
        tb.memory_many(kernel=k1, cta=heads, phase="load_list", tensor="load_list", space="HBM",
                       rw="w", addr=heads * slots * 8, nbytes=slots * 8)  # fmt: skip


def _emit_fetches(tb: TraceBuilder, lay: _StepLayout, loads: list[list[tuple[int, int]]]) -> None:
    """Fetch of the missed blocks (``loads``: per (sequence, KV head) the (block, slot) pairs):
    their K and V rows and cis from the host copy into their slots, as zero-copy loads of one
    kernel (one CTA per block) or as one ``memcpy_h2d`` per block on copy stream 1, which
    stream 0 waits for."""
    fl = [(i, blk, s) for i, pairs in enumerate(loads) for blk, s in pairs]
    if not fl:
        return
    fi = np.array([x[0] for x in fl], dtype=np.int64)
    fblk = np.array([x[1] for x in fl], dtype=np.int64)
    fslot = np.array([x[2] for x in fl], dtype=np.int64)
    bt, hkv = lay.cfg.block_tokens, lay.shape.kv_heads
    fetch = _BlockFetch(
        host=lay.host_addr(fi // hkv, fblk * bt, fi % hkv),
        device=lay.device_addr(fi // hkv, fslot * bt, fi % hkv),
        cis_host=(fi * lay.t_host + fblk * bt) * 2,
        cis_device=(fi * lay.cap + fslot * bt) * 2,
    )
    if lay.cfg.fetch == "zero_copy":
        with tb.kernel(
            "nosa_fetch_zero_copy", ctas=len(fl), threads_per_cta=256, regs_per_thread=32
        ) as k2:
            fetch.emit(tb, lay, k2, slice(None), cta=np.arange(len(fl), dtype=np.int64),
                       phase="fetch", stream=0)  # fmt: skip
        return
    ready = tb.event("record", stream=0)
    tb.event("wait", stream=1, dep=ready)
    for j in range(len(fl)):
        with tb.kernel("memcpy_h2d_nosa_block", stream=1) as kc:
            fetch.emit(tb, lay, kc, slice(j, j + 1), cta=0, phase="", stream=1)
    done = tb.event("record", stream=1)
    tb.event("wait", stream=0, dep=done)


@dataclass(frozen=True)
class _BlockFetch:
    """Byte offsets of the missed blocks' copies: K / V rows in the host copy and the slot
    cache, and their cis in ``cis_host`` and ``cis_slots`` (each ``[n_missed]``)."""

    host: npt.NDArray[np.int64]
    device: npt.NDArray[np.int64]
    cis_host: npt.NDArray[np.int64]
    cis_device: npt.NDArray[np.int64]

    def emit(
        self, tb: TraceBuilder, lay: _StepLayout, kernel: int, sel: slice, **where: Any
    ) -> None:
        """The copies of blocks ``sel`` in ``kernel``: K, then V, then the cis (``where``:
        the ``cta``, ``phase`` and ``stream`` of :func:`~._trace.emit_host_copy`)."""
        bt, hkv, row = lay.cfg.block_tokens, lay.shape.kv_heads, lay.row
        for host, dev in (("K_host", "K"), ("V_host", "V")):
            emit_host_copy(tb, "h2d", kernel=kernel, host_tensor=host, device_tensor=dev,
                           host_addr=self.host[sel], device_addr=self.device[sel], nbytes=row,
                           stride=hkv * row, count=bt, **where)  # fmt: skip
        emit_host_copy(tb, "h2d", kernel=kernel, host_tensor="cis_host",
                       device_tensor="cis_slots", host_addr=self.cis_host[sel],
                       device_addr=self.cis_device[sel], nbytes=bt * 2, **where)  # fmt: skip
