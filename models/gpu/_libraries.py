"""Launch plans of decode attention as public kernel libraries launch it.

The package's own split rule (:func:`~._splitk.choose_num_splits`, [OURS]) picks enough CTAs to
fill the SMs once. The libraries whose timings ``coaccel validate gpu --measured`` fits launch
something else, and the difference is what their measured times show (docs/gpu_measured.md §4).
This module re-expresses, from the libraries' public sources, what each one launches for one
decode step (one query token per sequence, no causal mask, no sliding window, no dropout):

* **FlashAttention-2, split-KV kernel** ([FA2-REPO] ``csrc/flash_attn/flash_api.cpp``,
  ``src/flash_fwd_launch_template.h``, ``src/flash_fwd_kernel.h``; the vLLM fork [VLLM-FA] the
  same files). With more query than KV heads the G query heads of a KV head are moved into the
  query-length axis ("seqlenq_ngroups_swapped"), so one CTA of ``kBlockM = 64`` rows serves a
  (split, sequence, KV head); ``kBlockN`` is 256 tokens for head dimensions up to 64, 128 up to
  128, else 64; 4 warps. The split count is :func:`fa2_num_splits` over twice the SM count (the
  source's stand-in for 128-thread CTAs). Two entry points differ in when they split:
  ``mha_varlen_fwd`` (vLLM's ``flash_attn_varlen_func``) splits only in the swapped (GQA) case
  and otherwise runs the split kernel with one split; ``mha_fwd_kvcache`` (sarathi's
  ``flash_attn_with_kvcache``) always applies the heuristic. With more than one split a combine
  kernel follows: one 128-thread CTA per ``4`` rows of ``batch x heads x query rows`` (8 when
  the head dimension is a multiple of 64 only, else 16), which walks the splits one after the
  other, each iteration loading that split's ``rows x D`` float32 partials and accumulating
  them before the next load ([OURS] reading of ``combine_attn_seqk_parallel``: a loop with a
  run-time bound whose body consumes its load, so each split costs one load latency).
* **FlashAttention-3 built for Ampere/Ada** ([FA3-REPO] ``hopper/``: ``heuristics.h``,
  ``tile_size.h``, ``flash_api.cpp``, ``flash_prepare_scheduler.cu``), which SGLang's
  ``flash_attention`` backend runs on sm80/sm86/sm89 through sgl-kernel ([SGL-KERNEL]). The G
  query heads of a KV head are always packed into one ``kBlockM = 128``-row tile (PackGQA);
  the tile (:func:`fa3_sm8x_tile`) depends on whether the launch splits. A varlen call (SGLang
  passes the sequence lengths per sequence) splits dynamically: :func:`fa3_num_splits` with
  the batch taken as 1 gives an upper bound, and a small scheduling kernel then gives each
  sequence :func:`fa3_dynamic_num_splits`. Its combine kernel (``flash_fwd_combine_kernel.h``,
  launched whenever the static bound exceeds 1) gives a CTA ``kBlockM`` = 8 rows (16 for a head
  dimension that is a multiple of 64 only, else 32) and walks the splits in order with
  ``kStages = 4`` loads in flight (``combine="pipelined"``); a sequence given one split leaves
  its CTAs nothing to do, and the kernel is then not simulated.
* **FlashAttention-3's Hopper kernels** ([FA3-REPO] ``hopper/tile_size.h``
  ``tile_size_fwd_sm90``, ``flash_api.cpp`` ``get_pagedkv_tma`` / ``get_pack_gqa``), which vLLM
  ([VLLM-REPO]) and SGLang ([SGL-KERNEL]) run on compute capability 9.0. A decode step's G query
  rows never exceed the query tile, so the paged cache is read without TMA and the G rows are
  packed into one tile (:func:`fa3_sm90_tile`: 128 rows x 128 tokens for D = 128, one
  producer warpgroup and one MMA warpgroup per 64 rows, two K/V stages); the split count and the
  per-sequence splits and combine are those of the Ampere/Ada build above. Not modelled: the
  warp specialisation and TMA pipelining themselves (the simulator sees the tiles, their bytes
  and their MMAs), and the one-MMA-warpgroup tile some builds choose for short query tiles.

:func:`plan_library_launch` returns the :class:`LibraryLaunch` (the split kernel's
:class:`~._splitk.SplitPlan` and the combine kernel's form) of a :data:`LaunchKind`;
:func:`sequence_launches` the launch of each request of a batch of mixed contexts
(:func:`with_context`: a launch for one sequence of another length);
:func:`library_launch_kind` what a library launches on a GPU config;
``"flashdecode"`` is the package's own rule. Not modelled: TensorRT-LLM's decode kernels (XQA,
masked MHA with multi-block mode) and the libraries' kernel-side KV append and prologue kernels
(a fixed cost per op, which the calibration's floor carries).

Public: :data:`LAUNCH_KINDS`, :data:`LaunchKind`, :data:`COMPUTE_CAPABILITY`,
:func:`library_launch_kind`, :func:`sequence_launches`, :func:`with_context`,
:func:`fa2_num_splits`,
:func:`fa3_num_splits`, :func:`fa3_dynamic_num_splits`, :func:`fa3_sm8x_tile`,
:func:`fa3_sm90_tile`,
:class:`LibraryLaunch`, :func:`plan_library_launch`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from ._splitk import DecodeShape, SplitPlan, plan_split_k
from ._trace import CombineKind

__all__ = [
    "COMPUTE_CAPABILITY",
    "LAUNCH_KINDS",
    "LaunchKind",
    "LibraryLaunch",
    "fa2_num_splits",
    "fa3_dynamic_num_splits",
    "fa3_num_splits",
    "fa3_sm8x_tile",
    "fa3_sm90_tile",
    "library_launch_kind",
    "plan_library_launch",
    "sequence_launches",
    "with_context",
]

LaunchKind = Literal["flashdecode", "fa2_varlen", "fa2_kvcache", "fa3_sm8x", "fa3_sm90"]
LAUNCH_KINDS: tuple[LaunchKind, ...] = get_args(LaunchKind)
"""The launch plans: the package's rule and the libraries' (module docstring)."""

COMPUTE_CAPABILITY: Mapping[str, int] = {
    "a100_40g": 80,
    "a100_80g": 80,
    "h100_sxm": 90,
    "h200": 90,
    "l40s": 89,
}
"""GPU config -> CUDA compute capability, major x 10 + minor ([CUDA-GUIDE]: 8.0 A100, 9.0
H100/H200; [NV-ADA]: 8.9 Ada, the L40S): the kernels a library runs depend on it."""

MAX_SPLITS = 128
"""The cap both FlashAttention heuristics take ([FA2-REPO], [FA3-REPO]: ``max_splits`` 128)."""

FA2_BLOCK_M = 64
"""Rows of the FlashAttention-2 split-KV kernel's query tile ([FA2-REPO]
``run_mha_fwd_splitkv_dispatch``: kBlockM 64 for every head dimension)."""

FA3_COMBINE_STAGES = 4
"""Loads in flight in FlashAttention-3's combine kernel ([FA3-REPO]
``hopper/flash_fwd_combine_kernel.h``: ``kStages = 4``)."""

FA2_THREADS = 128
"""Threads of a FlashAttention-2 split-KV CTA ([FA2-REPO]: 4 warps)."""

_FA3_SPLIT_MARGIN = np.float32(1.1)
"""The 10 % margin of FlashAttention-3's per-sequence split rule ([FA3-REPO]
``flash_prepare_scheduler.cu``), a float32 constant as in the source."""


def fa2_num_splits(
    batch_nheads_mblocks: int, num_sms: int, num_n_blocks: int, max_splits: int = MAX_SPLITS
) -> int:
    """FlashAttention-2's split count (``num_splits_heuristic``, [FA2-REPO] ``flash_api.cpp``).

    One split when the CTAs without splitting almost fill the GPU (at least 0.8 x
    ``num_sms``). Otherwise, over ``s = 1 .. min(max_splits, num_sms, num_n_blocks)``, the
    wave efficiency ``w / ceil(w)`` of ``w = batch_nheads_mblocks x s / num_sms`` waves, with
    ``s`` counted only when it changes the tiles per split (``ceil(n / s) != ceil(n / (s - 1))``;
    others score 0); the smallest counted ``s`` within 85 % of the best efficiency. The
    efficiencies are float32, as in the source.

    Args:
        batch_nheads_mblocks: CTAs of one split (batch x heads x query tiles).
        num_sms: the SM count the rule is given (the library passes twice the GPU's).
        num_n_blocks: K/V tiles of one sequence. max_splits: cap.

    Returns:
        The split count (>= 1).
    """
    if min(batch_nheads_mblocks, num_sms, num_n_blocks, max_splits) < 1:
        raise ValueError("fa2_num_splits: every argument must be >= 1")
    if batch_nheads_mblocks >= np.float32(0.8) * np.float32(num_sms):
        return 1
    top = min(max_splits, num_sms, num_n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or -(-num_n_blocks // s) != -(-num_n_blocks // (s - 1))

    ok = np.array([eligible(s) for s in range(1, top + 1)])
    eff = np.where(ok, _wave_efficiency(batch_nheads_mblocks, num_sms, top), np.float32(0))
    hit = np.flatnonzero(ok & _within_85(eff))
    return int(hit[0]) + 1 if hit.size else 1


def _wave_efficiency(ctas_per_split: int, num_sms: int, top: int) -> np.ndarray:
    """``w / ceil(w)`` of ``w = ctas_per_split x s / num_sms`` waves for ``s = 1 .. top``: the
    waves in float32 (``float(a * s) / n`` in the sources), the ratio stored as float32."""
    waves = np.arange(1, top + 1, dtype=np.float64) * ctas_per_split
    waves = waves.astype(np.float32) / np.float32(num_sms)
    w64 = waves.astype(np.float64)
    return (w64 / np.ceil(w64)).astype(np.float32)


def _within_85(eff: np.ndarray) -> np.ndarray:
    """``eff >= 0.85 * max(eff)`` with the float32 efficiencies widened to double, as the
    sources compare them with the double constant 0.85."""
    e = eff.astype(np.float64)
    return e >= 0.85 * e.max()


def fa3_num_splits(
    total_mblocks: int,
    num_sms: int,
    num_n_blocks: int,
    num_m_blocks: int,
    size_one_kv_head_bytes: int,
    *,
    max_splits: int = MAX_SPLITS,
    causal_or_local: bool = False,
) -> int:
    """FlashAttention-3's static split count (``num_splits_heuristic``, [FA3-REPO]
    ``hopper/heuristics.h``).

    When the CTAs without splitting almost fill the GPU (at least 0.8 x ``num_sms``): one
    split, unless one KV head is larger than 50 MiB and there are at least ``2 x num_sms``
    query tiles (and no causal or local mask), then ``ceil(size / 50 MiB)``. Otherwise one
    split for at most 4 K/V tiles; else, over ``s = 1 .. min(max_splits, num_sms,
    num_n_blocks)``, the smallest ``s`` whose wave efficiency ``w / ceil(w)`` (``w =
    total_mblocks x s / num_sms``) is within 85 % of the best (float32, as in the source).

    Args:
        total_mblocks: CTAs of one split. num_sms: SMs. num_n_blocks: K/V tiles of a sequence.
        num_m_blocks: query tiles of a sequence and head. size_one_kv_head_bytes: K and V
            bytes of one KV head of one sequence. max_splits: cap.
        causal_or_local: a causal or local mask (never split past the L2 rule).

    Returns:
        The split count (>= 1).
    """
    if min(total_mblocks, num_sms, num_n_blocks, num_m_blocks, max_splits) < 1:
        raise ValueError("fa3_num_splits: counts must be >= 1")
    if total_mblocks >= np.float32(0.8) * np.float32(num_sms):
        size_l2 = 50 * 1024 * 1024
        if size_one_kv_head_bytes > size_l2 and num_m_blocks >= 2 * num_sms and not causal_or_local:
            return min(-(-size_one_kv_head_bytes // size_l2), max_splits)
        return 1
    if num_n_blocks <= 4:
        return 1
    top = min(max_splits, num_sms, num_n_blocks)
    ok = np.flatnonzero(_within_85(_wave_efficiency(total_mblocks, num_sms, top)))
    return int(ok[0]) + 1 if ok.size else 1


def fa3_dynamic_num_splits(
    num_n_blocks: int, total_blocks: int, num_heads: int, num_sms: int, num_splits_static: int
) -> int:
    """FlashAttention-3's split count of one sequence in a varlen call ([FA3-REPO]
    ``flash_prepare_scheduler.cu``, ``prepare_varlen_num_blocks_kernel``).

    ``blocks_per_sm = ceil(total_blocks x 1.1 x num_heads / num_sms)`` (float32), then
    ``max(min(ceil(num_n_blocks / blocks_per_sm), num_splits_static), 1)``.

    Args:
        num_n_blocks: K/V tiles of this sequence. total_blocks: query tiles x K/V tiles summed
            over the batch. num_heads: heads of the grid (KV heads when the query heads are
            packed). num_sms: SMs. num_splits_static: :func:`fa3_num_splits`'s bound.

    Returns:
        The sequence's split count (>= 1).
    """
    bps = int(np.ceil(np.float32(total_blocks) * _FA3_SPLIT_MARGIN * np.float32(num_heads)
                      / np.float32(num_sms)))  # fmt: skip
    if bps < 1:
        return 1
    return max(min(-(-num_n_blocks // bps), num_splits_static), 1)


def fa3_sm8x_tile(
    head_dim: int, *, sm86_or_89: bool, varlen_and_split: bool
) -> tuple[int, int, int, int]:
    """FlashAttention-3's Ampere/Ada tile for 2-byte elements without causal or local mask,
    on a paged cache without appended KV ([FA3-REPO] ``hopper/tile_size.h``,
    ``tile_size_fwd_sm8x``).

    Args:
        head_dim: D (rounded up by the library to 64, 96, 128, 192 or 256).
        sm86_or_89: compute capability 8.6 or 8.9 (less shared memory than 8.0).
        varlen_and_split: a varlen call that splits.

    Returns:
        ``(kBlockM, kBlockN, warps, stages)``.
    """
    if head_dim <= 64:
        return 128, 80 if varlen_and_split else 112, 4, 1
    if head_dim <= 96:
        return 128, 48 if varlen_and_split else 64, 4, 1
    if head_dim <= 128:
        wide = sm86_or_89 or varlen_and_split
        return 128, (112 if varlen_and_split else 128) if wide else 64, 8 if wide else 4, 1
    if head_dim <= 192:
        return 128, 64, 8, 1 if sm86_or_89 else 2
    if sm86_or_89:
        return 128, 48 if varlen_and_split else 64, 8, 1
    return 128, 64 if varlen_and_split else 96, 8, 1


def fa3_sm90_tile(head_dim: int) -> tuple[int, int, int, int]:
    """FlashAttention-3's Hopper tile for 2-byte elements without causal or local mask, on a
    paged cache read without TMA, as a decode step reads it ([FA3-REPO] ``hopper/tile_size.h``
    ``tile_size_fwd_sm90`` with ``paged_kv_non_TMA``: ``get_pagedkv_tma`` is false while the
    packed query rows fit the tile; the main loop's ``kStages`` is 2 on Hopper).

    Args:
        head_dim: D (rounded up by the library to 64, 96, 128, 192 or 256).

    Returns:
        ``(kBlockM, kBlockN, threads, stages)``: one producer warpgroup plus one MMA
        warpgroup per 64 query rows.
    """
    if head_dim <= 64:
        bm, bn = 192, 160
    elif head_dim <= 96:
        bm, bn = 192, 128
    elif head_dim <= 128:
        bm, bn = 128, 128
    elif head_dim <= 192:
        bm, bn = 128, 96
    else:
        bm, bn = 128, 80
    return bm, bn, (bm // 64 + 1) * 128, 2


@dataclass(frozen=True)
class LibraryLaunch:
    """What a library launches for one decode step.

    Attributes:
        kind: the :data:`LaunchKind`.
        plan: the split kernel (splits, tile, CTA size; ``mma_m`` the query tile's rows).
        combine: the kernel that merges the partials (:data:`~._trace.CombineKind`: ``rows``
            the package's row-parallel reduction, ``serial`` FlashAttention-2's combine,
            ``pipelined`` FlashAttention-3's, ``none`` none).
        combine_rows_per_cta: query rows per combine CTA (``serial``, ``pipelined``; 1
            otherwise).
        combine_stages: loads in flight in a ``pipelined`` combine (1 otherwise).
        static_splits: the split count the library's heuristic returned before any per-sequence
            rule (equal to ``plan.num_splits`` but for ``fa3_sm8x``).
    """

    kind: LaunchKind
    plan: SplitPlan
    combine: CombineKind
    combine_rows_per_cta: int = 1
    static_splits: int = 1
    combine_stages: int = 1


def _plan(
    shape: DecodeShape, block_n: int, num_splits: int, mma_m: int, threads: int, n_stages: int
) -> SplitPlan:
    """A :class:`SplitPlan` of ``num_splits`` splits of whole ``block_n`` tiles (a tile the
    package's own rule does not use, e.g. 112, is allowed here)."""
    t = shape.context
    per_split = -(-t // num_splits)
    split_tokens = -(-per_split // block_n) * block_n
    return SplitPlan(shape=shape, block_n=block_n, num_splits=-(-t // split_tokens),
                     split_tokens=split_tokens, n_stages=n_stages, mma_m=mma_m,
                     threads_per_cta=threads)  # fmt: skip


def _fa2(shape: DecodeShape, n_sms: int, *, varlen: bool) -> LibraryLaunch:
    d, g = shape.head_dim, shape.group
    block_n = 256 if d <= 64 else 128 if d <= 128 else 64
    swapped = g > 1
    rows = g if swapped else 1
    m_blocks = -(-rows // FA2_BLOCK_M)
    n_blocks = -(-shape.context // block_n)
    if varlen and not swapped:
        splits = 1
    else:
        # the grid's heads: KV heads when swapped, else query heads (= KV heads for G = 1)
        splits = fa2_num_splits(shape.batch * shape.kv_heads * m_blocks, 2 * n_sms, n_blocks)
    plan = _plan(shape, block_n, splits, FA2_BLOCK_M * m_blocks, FA2_THREADS, 1)
    if plan.num_splits == 1:
        return LibraryLaunch("fa2_varlen" if varlen else "fa2_kvcache", plan, "none", 1, splits)
    rows_per_cta = 4 if d % 128 == 0 else 8 if d % 64 == 0 else 16
    return LibraryLaunch("fa2_varlen" if varlen else "fa2_kvcache", plan, "serial",
                         rows_per_cta, splits)  # fmt: skip


def _fa3_sm8x(shape: DecodeShape, n_sms: int, *, sm86_or_89: bool) -> LibraryLaunch:
    d = shape.head_dim
    bm_h, bn_h, _, _ = fa3_sm8x_tile(d, sm86_or_89=sm86_or_89, varlen_and_split=True)
    static = _fa3_static(shape, n_sms, bm_h, bn_h)
    bm, bn, warps, stages = fa3_sm8x_tile(d, sm86_or_89=sm86_or_89, varlen_and_split=static > 1)
    (splits,) = _fa3_dynamic([shape.context] * shape.batch, shape, n_sms, bm, bn, static).values()
    plan = _plan(shape, bn, splits, bm * -(-shape.group // bm), 32 * warps, stages)
    return _fa3_launch("fa3_sm8x", shape, plan, static)


def _fa3_static(shape: DecodeShape, n_sms: int, bm: int, bn: int) -> int:
    """FlashAttention-3's static split bound of a varlen call (the batch taken as 1, the
    longest context ``shape.context``) over the ``bm x bn`` tile the heuristic assumes."""
    m_blocks = -(-shape.group // bm)
    size_one_kv_head = shape.context * 2 * shape.head_dim * 2
    return fa3_num_splits(shape.kv_heads * m_blocks, n_sms, -(-shape.context // bn), m_blocks,
                          size_one_kv_head)  # fmt: skip


def _fa3_dynamic(
    contexts: Sequence[int], shape: DecodeShape, n_sms: int, bm: int, bn: int, static: int
) -> dict[int, int]:
    """Each distinct context's split count in a varlen call over the ``bm x bn`` tile the
    kernel runs (:func:`fa3_dynamic_num_splits` over the batch's tiles; 1 without splitting).
    ``shape`` gives the heads."""
    if static == 1:
        return dict.fromkeys(contexts, 1)
    m_blocks = -(-shape.group // bm)
    total = sum(m_blocks * -(-c // bn) for c in contexts)
    return {c: fa3_dynamic_num_splits(-(-c // bn), total, shape.kv_heads, n_sms, static)
            for c in set(contexts)}  # fmt: skip


def _fa3_launch(
    kind: LaunchKind, shape: DecodeShape, plan: SplitPlan, static: int
) -> LibraryLaunch:
    """A FlashAttention-3 launch: its split kernel and, with more than one split, its
    pipelined combine (``kBlockM`` rows per CTA by the head dimension)."""
    if plan.num_splits == 1:
        return LibraryLaunch(kind, plan, "none", 1, static)
    d = shape.head_dim
    rows_per_cta = 8 if d % 128 == 0 else 16 if d % 64 == 0 else 32
    return LibraryLaunch(kind, plan, "pipelined", rows_per_cta, static, FA3_COMBINE_STAGES)


def _fa3_sm90(shape: DecodeShape, n_sms: int) -> LibraryLaunch:
    bm, bn, threads, stages = fa3_sm90_tile(shape.head_dim)
    static = _fa3_static(shape, n_sms, bm, bn)
    (splits,) = _fa3_dynamic([shape.context] * shape.batch, shape, n_sms, bm, bn, static).values()
    plan = _plan(shape, bn, splits, bm * -(-shape.group // bm), threads, stages)
    return _fa3_launch("fa3_sm90", shape, plan, static)


def plan_library_launch(
    shape: DecodeShape,
    kind: LaunchKind,
    *,
    n_sms: int,
    compute_capability: int = 80,
    block_n: int = 128,
) -> LibraryLaunch:
    """The launch of one decode step by a library (module docstring).

    Args:
        shape: the decode geometry.
        kind: the :data:`LaunchKind`.
        n_sms: SMs of the GPU.
        compute_capability: major x 10 + minor (80 A100, 89 L40S, 90 H100); ``fa3_sm8x``
            needs 80..89, ``fa3_sm90`` 90.
        block_n: the tile of ``"flashdecode"`` (the libraries fix their own).

    Returns:
        :class:`LibraryLaunch`.

    Raises:
        ValueError: an unknown kind, ``fa3_sm8x`` outside compute capability 8.x or
            ``fa3_sm90`` outside 9.0.
    """
    if kind == "flashdecode":
        plan = plan_split_k(shape, block_n=block_n, n_sms=n_sms)
        return LibraryLaunch(kind, plan, "rows", 1, plan.num_splits)
    if kind in ("fa2_varlen", "fa2_kvcache"):
        return _fa2(shape, n_sms, varlen=kind == "fa2_varlen")
    if kind == "fa3_sm8x":
        if not 80 <= compute_capability < 90:
            raise ValueError(f"fa3_sm8x: compute capability {compute_capability} is not 8.x")
        return _fa3_sm8x(shape, n_sms, sm86_or_89=compute_capability in (86, 89))
    if kind == "fa3_sm90":
        if compute_capability != 90:
            raise ValueError(f"fa3_sm90: compute capability {compute_capability} is not 9.0")
        return _fa3_sm90(shape, n_sms)
    raise ValueError(f"launch kind {kind!r}; valid: {', '.join(LAUNCH_KINDS)}")


def sequence_launches(
    kind: LaunchKind,
    contexts: Sequence[int],
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    n_sms: int,
    compute_capability: int = 80,
) -> dict[int, LibraryLaunch]:
    """The launch of one request of each distinct context in a batch of mixed contexts.

    The batch's launch is :func:`plan_library_launch` at the longest context (a varlen call
    sizes its grid and static split bound by ``max_seqlen_k``). FlashAttention-2 gives every
    sequence the batch's split count over its own tiles (a shorter one fills fewer splits, and
    its combine walks those: [OURS], the source's combine also visits the empty ones);
    FlashAttention-3 gives each its own :func:`fa3_dynamic_num_splits` over the batch's tiles.
    The package's rule (``flashdecode``) gives every sequence the batch's split count and
    always ends with its reduction kernel.

    Args:
        kind: the :data:`LaunchKind`. contexts: each request's KV length (tokens).
        q_heads, kv_heads, head_dim: the attention's geometry.
        n_sms: SMs. compute_capability: the GPU's (:data:`COMPUTE_CAPABILITY`).

    Returns:
        context -> the :class:`LibraryLaunch` of one sequence of that context (batch 1).
    """
    if not contexts or min(contexts) < 1:
        raise ValueError("sequence_launches needs at least one context, each >= 1")
    batch = plan_library_launch(
        DecodeShape(len(contexts), max(contexts), q_heads, kv_heads, head_dim), kind,
        n_sms=n_sms, compute_capability=compute_capability,
    )  # fmt: skip
    p = batch.plan
    splits = dict.fromkeys(contexts, p.num_splits)
    if kind in ("fa3_sm8x", "fa3_sm90"):
        # every FlashAttention-3 tile of the sm8x table has 128 query rows
        bm = fa3_sm90_tile(head_dim)[0] if kind == "fa3_sm90" else 128
        splits = _fa3_dynamic(contexts, p.shape, n_sms, bm, p.block_n, batch.static_splits)
    return {c: with_context(batch, c, splits[c]) for c in sorted(set(contexts))}


def with_context(
    launch: LibraryLaunch, context: int, num_splits: int | None = None
) -> LibraryLaunch:
    """``launch`` for one sequence of ``context`` tokens: the same tile, CTA and combine form,
    ``num_splits`` splits of whole tiles (None: the launch's own count; fewer where the
    context has fewer tiles), and no combine kernel where that leaves one split (but for the
    package's rule, which always ends with its reduction).

    Args:
        launch: a :class:`LibraryLaunch`. context: tokens (>= 1). num_splits: splits (>= 1).

    Returns:
        The :class:`LibraryLaunch` of batch 1.
    """
    p = launch.plan
    s = p.shape
    one = DecodeShape(1, context, s.q_heads, s.kv_heads, s.head_dim)
    plan = _plan(one, p.block_n, num_splits or p.num_splits, p.mma_m, p.threads_per_cta,
                 p.n_stages)  # fmt: skip
    if launch.combine == "none" or (plan.num_splits == 1 and launch.kind != "flashdecode"):
        return LibraryLaunch(launch.kind, plan, "none", 1, launch.static_splits)
    return dataclasses.replace(launch, plan=plan)


def library_launch_kind(library: str, config: str) -> LaunchKind:
    """What a kernel library launches for a decode step on a GPU config (a
    :data:`LaunchKind`), by what the library is:

    * vLLM's ``vllm_flash_attn`` runs FlashAttention-2 except on Hopper, where it runs
      FlashAttention-3 ([VLLM-REPO] ``vllm/attention/utils/fa_utils.py``), through
      ``flash_attn_varlen_func``: ``fa2_varlen`` on compute capability 8.x, ``fa3_sm90`` on
      9.0;
    * SGLang's ``flash_attention`` backend runs sgl-kernel's FlashAttention-3, built for
      sm80/sm86/sm89 and sm90a ([SGL-KERNEL]): ``fa3_sm8x`` on 8.x, ``fa3_sm90`` on 9.0;
    * vidur's sarathi ``FLASH_ATTENTION`` wrapper calls ``vllm_flash_attn``'s
      ``flash_attn_with_kvcache`` ([SARATHI-REPO]), FlashAttention-2: ``fa2_kvcache`` on 8.x
      and 9.0 (FlashAttention-2 runs its Ampere kernels on Hopper);
    * anything else takes the package's own rule, ``flashdecode`` (TensorRT-LLM's decode
      kernels are not modelled), as does a library on a GPU outside these.

    Args:
        library: the library key (the measured CSV's ``kernel`` column, lower case).
        config: the GPU's config name (:data:`COMPUTE_CAPABILITY`).

    Returns:
        The launch kind.
    """
    cc = COMPUTE_CAPABILITY.get(config, 0)
    ampere_ada, hopper = 80 <= cc < 90, cc == 90
    if library.startswith("vllm-") and library.endswith(":vllm_flash_attn"):
        return "fa2_varlen" if ampere_ada else "fa3_sm90" if hopper else "flashdecode"
    if library.startswith("sglang-") and library.endswith(":flash_attention"):
        return "fa3_sm8x" if ampere_ada else "fa3_sm90" if hopper else "flashdecode"
    if library.startswith("vidur-") and library.endswith("flash_attention"):
        return "fa2_kvcache" if ampere_ada or hopper else "flashdecode"
    return "flashdecode"
