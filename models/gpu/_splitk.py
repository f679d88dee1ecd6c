"""Split-K decode attention: the launch plan and the numerics shared by the decode references.

One decode step of attention for a batch of sequences with a grouped-query (GQA) KV cache, in
the FlashDecoding scheme ([FLASHDECODING]): the keys and values of every sequence are cut
along the sequence into ``num_splits`` chunks; one CTA per (split, sequence, KV head) runs the
online softmax over its chunk, tile by tile, and writes a partial output with its running max
and sum; a reduction kernel merges the partials of a row by the log-sum-exp rule.

* :class:`DecodeShape` — batch, context and head geometry (the default is Llama-3.1-8B's);
* :func:`choose_num_splits` — the split count rule; :func:`plan_split_k` / :class:`SplitPlan`
  — the grid, split length, tiles per CTA and launch geometry;
* :func:`make_inputs` — seeded bf16 q, K, V (:class:`DecodeInputs`);
* :func:`split_k_partials` — the split kernel's numerics (:class:`SplitPartials`), optionally
  attending only to the tiles a ``tile_keep`` mask selects;
  :func:`split_k_partials_gathered` — the same online softmax on the attended tiles only,
  with the scores supplied by the caller (the block-sparse variants, e.g. FFD, use it);
  :func:`reduce_partials` — the reduction kernel;
* :func:`dense_attention_f64` — the dense float64 reference the split-K result is checked
  against.

Order of operations ([OURS], fixed so that results are bit-exact and reproducible on any
machine): inputs are bf16; every product of two bf16 values is exact in float32; sums run as a
pairwise tree over the reduced axis (zero-padded to a power of two; halves ``x[:n/2] +
x[n/2:]``); scores are ``fl32(fl32(dot) * scale)`` with ``scale = fl32(1/sqrt(D))`` (times
``fl32(log2 e)`` folded into the same float32 constant when ``softmax_base="2"``); ``exp`` /
``exp2`` are evaluated in float64 and rounded once to float32; the online-softmax update per
tile is ``m' = max(m, rowmax s)``, ``a = exp(m - m')``, ``p = exp(s - m')``,
``l' = l * a + sum p``, ``acc' = acc * a + sum p~ v`` with ``p~`` the probabilities rounded to
bf16 (``p_dtype="bf16"``, as FlashAttention kernels feed the P·V tensor-core product) or kept
in float32 (``p_dtype="fp32"``). A split writes ``o = acc / l`` (0 for a split that attended
nothing), ``m`` and ``l`` in float32. The reduction computes ``M = max_s m_s``,
``w_s = l_s * exp(m_s - M)``, ``O = (sum_s w_s o_s) / (sum_s w_s)`` in float32 and rounds
``O`` to bf16.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._bf16 import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ._checks import check_integer_fields

__all__ = [
    "BLOCK_N_CHOICES",
    "DecodeInputs",
    "DecodeShape",
    "SplitPartials",
    "SplitPlan",
    "choose_num_splits",
    "dense_attention_f64",
    "make_inputs",
    "plan_split_k",
    "reduce_partials",
    "TileScores",
    "split_k_partials",
    "split_k_partials_gathered",
]

BLOCK_N_CHOICES = (64, 128, 256)
"""Tokens per K/V tile a CTA loads at a time ([OURS] 128 by default)."""

MAX_SPLITS = 128
"""Upper bound of the split count rule (the cap of FlashDecoding-style kernels)."""

SoftmaxBase = Literal["e", "2"]
PDtype = Literal["bf16", "fp32"]


@dataclass(frozen=True)
class DecodeShape:
    """Geometry of one decode step of attention in one layer.

    Attributes:
        batch: sequences B (>= 1).
        context: tokens T in each sequence's KV cache (>= 1).
        q_heads: query heads Hq (a multiple of ``kv_heads``).
        kv_heads: KV heads Hkv.
        head_dim: D, elements per head.
    """

    batch: int
    context: int
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128

    def __post_init__(self) -> None:
        names = ("batch", "context", "q_heads", "kv_heads", "head_dim")
        check_integer_fields(self, names)
        for name in names:
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.q_heads % self.kv_heads:
            raise ValueError(
                f"DecodeShape: q_heads={self.q_heads} must be a multiple of "
                f"kv_heads={self.kv_heads}"
            )

    @property
    def group(self) -> int:
        """Query heads per KV head, G = Hq / Hkv."""
        return self.q_heads // self.kv_heads

    def kv_bytes(self, elem_bytes: int = 2) -> int:
        """Bytes of the K and V caches together, B: ``2 * B * T * Hkv * D * elem_bytes``."""
        return 2 * self.batch * self.context * self.kv_heads * self.head_dim * elem_bytes


def choose_num_splits(
    batch: int,
    kv_heads: int,
    context: int,
    *,
    n_sms: int,
    block_n: int = 128,
    waves: float = 1.0,
    max_splits: int = MAX_SPLITS,
) -> int:
    """The split count rule: enough CTAs to fill the GPU, no more than there are tiles.

    ``num_splits = ceil(waves * n_sms / (batch * kv_heads))``, clamped to
    ``[1, min(max_splits, ceil(context / block_n))]`` ([OURS] reading of the FlashDecoding
    rule "num_splits x B x Hkv covers the SMs, capped at 128"; ``waves`` = 1 fills every SM
    once, 2 twice).

    Args:
        batch: sequences B. kv_heads: KV heads Hkv. context: tokens T.
        n_sms: streaming multiprocessors of the GPU.
        block_n: tokens per tile. waves: target CTAs per SM (> 0).
        max_splits: cap on the split count.

    Returns:
        The split count (>= 1).
    """
    if n_sms < 1 or batch < 1 or kv_heads < 1 or context < 1 or block_n < 1:
        raise ValueError("batch, kv_heads, context, n_sms and block_n must be positive")
    if not waves > 0:
        raise ValueError(f"waves={waves} must be positive")
    want = math.ceil(waves * n_sms / (batch * kv_heads))
    tiles = -(-context // block_n)
    return max(1, min(want, max_splits, tiles))


@dataclass(frozen=True)
class SplitPlan:
    """Launch plan of a split-K decode step (:func:`plan_split_k`).

    Attributes:
        shape: the decode geometry.
        block_n: tokens per K/V tile.
        num_splits: splits per (sequence, KV head) actually launched (every split non-empty).
        split_tokens: tokens per split S (a multiple of ``block_n``; the last split may hold
            fewer).
        n_stages: K/V tiles in flight per CTA (the cp.async / TMA pipeline depth), which sets
            the shared memory per CTA.
        mma_m: rows of the tensor-core M tile the G query heads of a group are padded to.
        threads_per_cta: threads per split-kernel CTA.
        regs_per_thread: registers per thread of the split kernel.
        reduce_threads_per_cta: threads per reduction-kernel CTA.
        elem_bytes: bytes per element of q, K, V and the output (2 for bf16).
    """

    shape: DecodeShape
    block_n: int
    num_splits: int
    split_tokens: int
    n_stages: int = 1
    mma_m: int = 16
    threads_per_cta: int = 128
    regs_per_thread: int = 128
    reduce_threads_per_cta: int = 128
    elem_bytes: int = 2
    tiles_per_split: npt.NDArray[np.int64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        t = self.shape.context
        starts = np.arange(self.num_splits, dtype=np.int64) * self.split_tokens
        ends = np.minimum(starts + self.split_tokens, t)
        if self.num_splits < 1 or starts[-1] >= t:
            raise ValueError(
                f"SplitPlan: {self.num_splits} splits of {self.split_tokens} tokens leave an "
                f"empty split for context {t}"
            )
        if self.split_tokens % self.block_n or ends[-1] != t:
            raise ValueError("SplitPlan: splits must be whole tiles and cover the context")
        tiles = -(-(ends - starts) // self.block_n)
        tiles.setflags(write=False)
        object.__setattr__(self, "tiles_per_split", tiles)

    @property
    def grid(self) -> tuple[int, int, int]:
        """Split-kernel grid (num_splits, B, Hkv); CTA id = s + splits * (b + B * h)."""
        return (self.num_splits, self.shape.batch, self.shape.kv_heads)

    @property
    def n_ctas(self) -> int:
        """CTAs of the split kernel."""
        return self.num_splits * self.shape.batch * self.shape.kv_heads

    @property
    def max_tiles(self) -> int:
        """Tiles of the longest split, ``split_tokens / block_n``."""
        return self.split_tokens // self.block_n

    @property
    def tile_bytes(self) -> int:
        """Bytes of one K (or V) tile, B: ``block_n * D * elem_bytes``."""
        return self.block_n * self.shape.head_dim * self.elem_bytes

    @property
    def smem_bytes_per_cta(self) -> int:
        """Shared memory per split-kernel CTA, B: the padded q tile plus ``n_stages`` K and V
        tiles ([OURS] layout of one buffer per stage and operand)."""
        q_tile = self.mma_m * self.shape.head_dim * self.elem_bytes
        return q_tile + self.n_stages * 2 * self.tile_bytes

    @property
    def reduce_smem_bytes_per_cta(self) -> int:
        """Shared memory per reduction CTA, B: the (m, l) pairs of all splits in float32."""
        return self.num_splits * 2 * 4


def plan_split_k(
    shape: DecodeShape,
    *,
    block_n: int = 128,
    num_splits: int | None = None,
    n_sms: int | None = None,
    waves: float = 1.0,
    n_stages: int = 1,
    mma_m: int = 16,
    threads_per_cta: int = 128,
    regs_per_thread: int = 128,
) -> SplitPlan:
    """Plan the split kernel: split count, split length and launch geometry.

    The split length is ``S = ceil(ceil(T / num_splits) / block_n) * block_n``; the number of
    splits launched is then ``ceil(T / S)`` (a request that would leave an empty split
    launches fewer, never an idle CTA).

    Args:
        shape: the decode geometry.
        block_n: tokens per K/V tile, one of :data:`BLOCK_N_CHOICES`.
        num_splits: splits requested; None applies :func:`choose_num_splits` with ``n_sms``.
        n_sms: SMs of the GPU (needed when ``num_splits`` is None).
        waves: target waves of the split rule.
        n_stages: K/V tiles in flight per CTA (>= 1).
        mma_m: tensor-core M tile (>= G).
        threads_per_cta: threads per split CTA. regs_per_thread: registers per thread.

    Returns:
        The :class:`SplitPlan`.
    """
    if block_n not in BLOCK_N_CHOICES:
        raise ValueError(
            f"block_n={block_n}; valid choices: {', '.join(map(str, BLOCK_N_CHOICES))}"
        )
    if num_splits is None:
        if n_sms is None:
            raise ValueError("give num_splits, or n_sms to choose it")
        num_splits = choose_num_splits(
            shape.batch,
            shape.kv_heads,
            shape.context,
            n_sms=n_sms,
            block_n=block_n,
            waves=waves,
        )
    if isinstance(num_splits, bool) or not isinstance(num_splits, (int, np.integer)):
        raise ValueError(f"num_splits={num_splits!r} must be an integer")
    if num_splits < 1:
        raise ValueError(f"num_splits={num_splits} must be >= 1")
    if n_stages < 1 or mma_m < shape.group or threads_per_cta < 1 or regs_per_thread < 1:
        raise ValueError(
            f"n_stages={n_stages} must be >= 1, mma_m={mma_m} >= G={shape.group}, "
            "threads and registers positive"
        )
    t = shape.context
    per_split = -(-t // int(num_splits))
    split_tokens = -(-per_split // block_n) * block_n
    return SplitPlan(
        shape=shape,
        block_n=block_n,
        num_splits=-(-t // split_tokens),
        split_tokens=split_tokens,
        n_stages=n_stages,
        mma_m=mma_m,
        threads_per_cta=threads_per_cta,
        regs_per_thread=regs_per_thread,
    )


@dataclass(frozen=True)
class DecodeInputs:
    """bf16 inputs of one decode step (bit patterns, the storage of the tensors).

    Attributes:
        q: ``[B, Hq, D]`` uint16 query of the new token.
        k: ``[B, T, Hkv, D]`` uint16 key cache (token-major).
        v: ``[B, T, Hkv, D]`` uint16 value cache (token-major).
    """

    q: npt.NDArray[np.uint16]
    k: npt.NDArray[np.uint16]
    v: npt.NDArray[np.uint16]


def make_inputs(
    shape: DecodeShape, rng: np.random.Generator | int, *, key_scale: float = 1.0
) -> DecodeInputs:
    """Seeded synthetic inputs: standard-normal q and V, keys ``key_scale`` x standard normal,
    each rounded to bf16 (RNE). A larger ``key_scale`` makes the softmax peakier.

    Args:
        shape: the decode geometry.
        rng: a ``numpy.random.Generator`` or an integer seed.
        key_scale: standard deviation of the keys (> 0).

    Returns:
        :class:`DecodeInputs`.
    """
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    b, t, hq, hkv, d = shape.batch, shape.context, shape.q_heads, shape.kv_heads, shape.head_dim
    q = f32_to_bf16_bits(g.standard_normal((b, hq, d), dtype=np.float32))
    k = f32_to_bf16_bits(g.standard_normal((b, t, hkv, d), dtype=np.float32) * key_scale)
    v = f32_to_bf16_bits(g.standard_normal((b, t, hkv, d), dtype=np.float32))
    return DecodeInputs(q=q, k=k, v=v)


@dataclass(frozen=True)
class SplitPartials:
    """Outputs of the split kernel.

    Attributes:
        o: ``[B, Hq, splits, D]`` float32 normalised partial outputs (0 where a split
            attended nothing).
        m: ``[B, Hq, splits]`` float32 running max of the scores (in the softmax base's
            units: natural for ``"e"``, log2 for ``"2"``); -inf where nothing was attended.
        l: ``[B, Hq, splits]`` float32 running sum of the probabilities (0 where nothing).
        softmax_base: ``"e"`` or ``"2"``.
    """

    o: npt.NDArray[np.float32]
    m: npt.NDArray[np.float32]
    l: npt.NDArray[np.float32]  # noqa: E741  (the name of the running sum in FlashAttention)
    softmax_base: str


def _tree_sum(x: npt.NDArray[np.float32], axis: int) -> npt.NDArray[np.float32]:
    """Pairwise float32 sum over ``axis``: zero-pad to a power of two, then add halves."""
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    if width != n:
        pad = np.zeros((*x.shape[:-1], width - n), dtype=np.float32)
        x = np.concatenate([x, pad], axis=-1)
    while width > 1:
        width //= 2
        x = x[..., :width] + x[..., width:]
    return x[..., 0]


def _exp_f32(x: npt.NDArray[np.float32], base: str) -> npt.NDArray[np.float32]:
    """``exp`` or ``exp2`` of float32 values, computed in float64 and rounded once."""
    x64 = x.astype(np.float64)
    return (np.exp2(x64) if base == "2" else np.exp(x64)).astype(np.float32)


def _score_scale(d: int, base: str) -> np.float32:
    scale = np.float32(1.0 / math.sqrt(d))
    if base == "2":
        scale = np.float32(scale * np.float32(math.log2(math.e)))
    return scale


def _check_inputs(inputs: DecodeInputs, shape: DecodeShape) -> None:
    b, t, hq, hkv, d = shape.batch, shape.context, shape.q_heads, shape.kv_heads, shape.head_dim
    want = {"q": (b, hq, d), "k": (b, t, hkv, d), "v": (b, t, hkv, d)}
    for name, shp in want.items():
        arr = getattr(inputs, name)
        if arr.dtype != np.uint16 or arr.shape != shp:
            raise ValueError(
                f"inputs.{name}: expected uint16 bf16 bits of shape {shp}, got {arr.dtype} "
                f"{arr.shape}"
            )


def split_k_partials(
    inputs: DecodeInputs,
    plan: SplitPlan,
    *,
    softmax_base: SoftmaxBase = "e",
    p_dtype: PDtype = "bf16",
    tile_keep: npt.NDArray[np.bool_] | None = None,
) -> SplitPartials:
    """The split kernel's numerics: online softmax over each split's tiles (module docstring).

    All CTAs advance together, one tile index at a time, so the work is vectorised over
    (sequence, KV head, split, query head of the group).

    Args:
        inputs: bf16 q, K, V of ``plan.shape``.
        plan: the launch plan.
        softmax_base: ``"e"`` (``exp``) or ``"2"`` (``exp2`` of log2-scaled scores).
        p_dtype: ``"bf16"`` (probabilities rounded to bf16 for P·V) or ``"fp32"``.
        tile_keep: optional ``[B, Hkv, ceil(T / block_n)]`` bool: the tiles each (sequence,
            KV head) attends to; None attends to all. A skipped tile is neither loaded nor
            computed.

    Returns:
        :class:`SplitPartials`.
    """
    shape = plan.shape
    _check_inputs(inputs, shape)
    if softmax_base not in ("e", "2"):
        raise ValueError(f"softmax_base={softmax_base!r}; valid choices: e, 2")
    if p_dtype not in ("bf16", "fp32"):
        raise ValueError(f"p_dtype={p_dtype!r}; valid choices: bf16, fp32")
    b, t, hkv, d, g = shape.batch, shape.context, shape.kv_heads, shape.head_dim, shape.group
    ns, bn, nt = plan.num_splits, plan.block_n, plan.max_tiles
    n_tiles = -(-t // bn)
    keep = _tile_keep(tile_keep, b, hkv, n_tiles)
    padded = ns * plan.split_tokens
    # K, V as [B, Hkv, splits, tiles, BN, D] bf16 bits, zero-padded past T.
    kb = _tiles_view(inputs.k, padded, ns, nt, bn)
    vb = _tiles_view(inputs.v, padded, ns, nt, bn)
    q = bf16_bits_to_f32(inputs.q).reshape(b, hkv, 1, g, 1, d)
    scale = _score_scale(d, softmax_base)
    tile_of = np.arange(ns)[:, None] * nt + np.arange(nt)[None, :]  # [splits, tiles]
    exists = tile_of < n_tiles
    keep_pad = np.zeros((b, hkv, ns * nt), dtype=bool)
    keep_pad[:, :, :n_tiles] = keep
    active = keep_pad.reshape(b, hkv, ns, nt) & exists  # [B, Hkv, splits, tiles]
    m = np.full((b, hkv, ns, g), -np.inf, dtype=np.float32)
    l_run = np.zeros((b, hkv, ns, g), dtype=np.float32)
    acc = np.zeros((b, hkv, ns, g, d), dtype=np.float32)
    pos = np.arange(bn)
    for j in range(nt):
        act = active[:, :, :, j]
        if not act.any():
            continue
        kt = bf16_bits_to_f32(kb[:, :, :, j])[:, :, :, None]  # [B, Hkv, ns, 1, BN, D]
        vt = bf16_bits_to_f32(vb[:, :, :, j])  # [B, Hkv, ns, BN, D]
        s = _tree_sum(q * kt, axis=-1) * scale  # [B, Hkv, ns, G, BN]
        tok = (np.arange(ns) * plan.split_tokens + j * bn)[:, None] + pos[None, :]
        s = np.where((tok < t)[None, None, :, None, :], s, np.float32(-np.inf))
        m_new, l_new, acc_new = _online_step(m, l_run, acc, s, vt, softmax_base, p_dtype)
        m = np.where(act[..., None], m_new, m)
        l_run = np.where(act[..., None], l_new, l_run)
        acc = np.where(act[..., None, None], acc_new, acc)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(l_run[..., None] > 0, acc / l_run[..., None], np.float32(0))
    hq = shape.q_heads
    o = o.transpose(0, 1, 3, 2, 4).reshape(b, hq, ns, d).astype(np.float32)
    m_out = m.transpose(0, 1, 3, 2).reshape(b, hq, ns)
    l_out = l_run.transpose(0, 1, 3, 2).reshape(b, hq, ns)
    return SplitPartials(o=o, m=m_out, l=l_out, softmax_base=softmax_base)


def _online_step(
    m: npt.NDArray[np.float32],
    l_run: npt.NDArray[np.float32],
    acc: npt.NDArray[np.float32],
    s: npt.NDArray[np.float32],
    vt: npt.NDArray[np.float32],
    base: str,
    p_dtype: str,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """One online-softmax update of the running max, sum and accumulator by one tile.

    Shapes: ``m``, ``l_run`` ``[..., G]``; ``acc`` ``[..., G, D]``; scores ``s``
    ``[..., G, BN]`` (-inf past the context); ``vt`` ``[..., BN, D]`` float32 V rows.
    """
    m_new = np.maximum(m, s.max(axis=-1))
    safe = np.where(np.isfinite(m_new), m_new, np.float32(0))
    alpha = _exp_f32(m - safe, base)
    p = _exp_f32(s - safe[..., None], base)
    l_new = l_run * alpha + _tree_sum(p, axis=-1)
    pm = round_bf16(p) if p_dtype == "bf16" else p
    pv = _tree_sum(pm[..., None] * vt[..., None, :, :], axis=-2)  # [..., G, D]
    return m_new, l_new, acc * alpha[..., None] + pv


TileScores = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
    npt.NDArray[np.float32],
]
"""``scores(b, h, tile) -> [n, G, BN]`` float32: the scores (in the softmax base's units) of
the G query heads of KV head ``h`` of sequence ``b`` against the ``BN`` tokens of tile
``tile``, -inf for tokens past the context."""


def split_k_partials_gathered(
    v: npt.NDArray[np.uint16],
    plan: SplitPlan,
    tile_keep: npt.NDArray[np.bool_],
    scores: TileScores,
    *,
    softmax_base: SoftmaxBase = "e",
    p_dtype: PDtype = "bf16",
) -> SplitPartials:
    """The split kernel of a block-sparse variant: the same online softmax as
    :func:`split_k_partials`, evaluated on the attended tiles only.

    Every CTA walks its attended tiles in ascending order, exactly as
    :func:`split_k_partials` does with ``tile_keep`` (a skipped tile leaves the running
    state unchanged), so for the same scores the partials are identical; the work is
    proportional to the tiles attended, and the scores come from the caller (a variant
    that scores from compressed keys supplies its own).

    Args:
        v: ``[B, T, Hkv, D]`` uint16 bf16 value cache.
        plan: the launch plan.
        tile_keep: ``[B, Hkv, ceil(T / block_n)]`` bool, the tiles attended.
        scores: :data:`TileScores` of the attended tiles.
        softmax_base: ``"e"`` or ``"2"``. p_dtype: ``"bf16"`` or ``"fp32"``.

    Returns:
        :class:`SplitPartials`.
    """
    shape = plan.shape
    b, t, hkv, d, g = shape.batch, shape.context, shape.kv_heads, shape.head_dim, shape.group
    if v.dtype != np.uint16 or v.shape != (b, t, hkv, d):
        raise ValueError(f"v: expected uint16 bf16 bits of shape {(b, t, hkv, d)}")
    if softmax_base not in ("e", "2"):
        raise ValueError(f"softmax_base={softmax_base!r}; valid choices: e, 2")
    if p_dtype not in ("bf16", "fp32"):
        raise ValueError(f"p_dtype={p_dtype!r}; valid choices: bf16, fp32")
    ns, bn, nt = plan.num_splits, plan.block_n, plan.max_tiles
    keep = _tile_keep(tile_keep, b, hkv, -(-t // bn))
    bi, hi, ti = (x.astype(np.int64) for x in np.nonzero(keep))  # sorted by (b, h, tile)
    cta = (bi * hkv + hi) * ns + ti // nt  # state row of (b, h, split)
    first = np.ones(cta.size, dtype=bool)
    first[1:] = cta[1:] != cta[:-1]
    start = np.flatnonzero(first)
    rank = np.arange(cta.size) - np.repeat(start, np.diff(np.append(start, cta.size)))
    m = np.full((b * hkv * ns, g), -np.inf, dtype=np.float32)
    l_run = np.zeros((b * hkv * ns, g), dtype=np.float32)
    acc = np.zeros((b * hkv * ns, g, d), dtype=np.float32)
    pos = np.arange(bn)
    for r in range(int(rank.max()) + 1 if rank.size else 0):
        sel = np.flatnonzero(rank == r)
        rows = cta[sel]
        s = scores(bi[sel], hi[sel], ti[sel])
        tok = ti[sel, None] * bn + pos[None, :]
        valid = tok < t
        vt = bf16_bits_to_f32(v[bi[sel, None], np.minimum(tok, t - 1), hi[sel, None]])
        vt = np.where(valid[..., None], vt, np.float32(0))
        m[rows], l_run[rows], acc[rows] = _online_step(
            m[rows], l_run[rows], acc[rows], s, vt, softmax_base, p_dtype
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(l_run[..., None] > 0, acc / l_run[..., None], np.float32(0))
    hq = shape.q_heads
    o = o.reshape(b, hkv, ns, g, d).transpose(0, 1, 3, 2, 4).reshape(b, hq, ns, d)
    m_out = m.reshape(b, hkv, ns, g).transpose(0, 1, 3, 2).reshape(b, hq, ns)
    l_out = l_run.reshape(b, hkv, ns, g).transpose(0, 1, 3, 2).reshape(b, hq, ns)
    return SplitPartials(o=o.astype(np.float32), m=m_out, l=l_out, softmax_base=softmax_base)


def _tile_keep(
    tile_keep: npt.NDArray[np.bool_] | None, b: int, hkv: int, n_tiles: int
) -> npt.NDArray[np.bool_]:
    if tile_keep is None:
        return np.ones((b, hkv, n_tiles), dtype=bool)
    keep = np.asarray(tile_keep)
    if keep.dtype != np.bool_ or keep.shape != (b, hkv, n_tiles):
        raise ValueError(
            f"tile_keep must be a bool array of shape {(b, hkv, n_tiles)}, got {keep.dtype} "
            f"{keep.shape}"
        )
    return keep


def _tiles_view(
    x: npt.NDArray[np.uint16], padded: int, ns: int, nt: int, bn: int
) -> npt.NDArray[np.uint16]:
    b, t, hkv, d = x.shape
    if padded != t:
        x = np.concatenate([x, np.zeros((b, padded - t, hkv, d), dtype=np.uint16)], axis=1)
    return x.reshape(b, ns, nt, bn, hkv, d).transpose(0, 4, 1, 2, 3, 5)


def reduce_partials(partials: SplitPartials) -> npt.NDArray[np.uint16]:
    """The reduction kernel: merge the splits of every row by the log-sum-exp rule.

    Args:
        partials: the split kernel's outputs.

    Returns:
        ``[B, Hq, D]`` uint16 bf16 attention output.

    Raises:
        ValueError: a row that attended to no token at all (every split empty).
    """
    m, l_run, o = partials.m, partials.l, partials.o
    if np.any(~(l_run > 0).any(axis=-1)):
        raise ValueError("reduce_partials: a row attended to no token (all its splits empty)")
    big_m = m.max(axis=-1, keepdims=True)
    w = np.where(l_run > 0, l_run * _exp_f32(m - big_m, partials.softmax_base), np.float32(0))
    total = _tree_sum(w, axis=-1)
    num = _tree_sum(w[..., None] * o, axis=-2)
    return f32_to_bf16_bits(num / total[..., None])


def dense_attention_f64(inputs: DecodeInputs, shape: DecodeShape) -> npt.NDArray[np.float64]:
    """Dense softmax attention of the same bf16 inputs in float64 (the accuracy reference).

    Args:
        inputs: bf16 q, K, V.
        shape: their geometry.

    Returns:
        ``[B, Hq, D]`` float64 ``softmax(q K^T / sqrt(D)) V`` per query head (GQA: query head
        ``h * G + g`` reads KV head ``h``).
    """
    _check_inputs(inputs, shape)
    b, hkv, g, d = shape.batch, shape.kv_heads, shape.group, shape.head_dim
    q = bf16_bits_to_f32(inputs.q).astype(np.float64).reshape(b, hkv, g, d)
    k = bf16_bits_to_f32(inputs.k).astype(np.float64)
    v = bf16_bits_to_f32(inputs.v).astype(np.float64)
    s = np.einsum("bhgd,bthd->bhgt", q, k) / math.sqrt(d)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    out = np.einsum("bhgt,bthd->bhgd", p, v) / p.sum(axis=-1)[..., None]
    return out.reshape(b, shape.q_heads, d)
