"""FFD (Faster Flash Decoding, W2): 2-bit key scan plus top-delta block-sparse decode.

The decode step of [FFD] / [FFD-REPO] on the split-K skeleton shared with FlashDecoding (W1):

* the key cache (:func:`quantize_keys` / :class:`FfdCache`), built per block of ``BS`` tokens
  when the block fills: per (block, KV head, channel) ``scale = absmax / 1.5`` (float32,
  floored at ``eps``), 2-bit codes ``round(k / scale + 1.5)`` clamped to [0, 3] and packed
  four per byte (channel ``4j + i`` in bits ``2i .. 2i+1`` of byte ``j``: 32 B per token and
  head at D = 128), and the residual ``k - (code - 1.5) * scale`` in OCP FP8 E4M3
  (:data:`coaccel.models.formats.E4M3`, round to nearest even, saturating); the incomplete
  tail block stays bf16. The values ``V`` stay bf16.
* the threshold kernel (:func:`ffd_threshold`): approximate scores of the first
  ``sink_tokens`` and last ``recent_tokens`` quantized tokens, their max per query head, minus
  ``delta`` — in log2 units, because the kernel scales scores by ``log2 e`` and uses ``exp2``,
  so a block is pruned when its best score is below ``2**-delta`` of the reference
  (``delta_base="2"``, the authors' kernel, default); ``delta_base="e"`` reads ``delta`` in
  natural units (``e**-delta``, the README's description);
* the keep rule (top-delta): a block is attended when any query head of its group reaches its
  threshold with the block's approximate scores (no global top-k); or, for sweeps, a forced
  keep ratio (the ``ceil(ratio * blocks)`` blocks of each (sequence, KV head) whose best
  margin over the threshold is largest); the tail block is always attended;
* the split kernel on the attended blocks (:func:`coaccel.models.gpu.split_k_partials_gathered`,
  the skeleton's online softmax in base 2), with exact scores ``approx + q . residual`` (or the
  approximate ones with ``residual=False``), and W1's reduction kernel.

Order of operations ([OURS], following the kernel where it fixes one): q and the scales are
converted to float16 as the kernel does (``q16``, ``s16``); ``qs = fp16(q16 * s16)`` per
(block, channel); the code dot ``sum_d qs * code`` and the zero sum ``sum_d qs`` are exact
(every term is a multiple of 2**-24 below 2**18, so float64 holds every partial sum exactly)
and rounded once to float32; ``sq = fl32(dot + fl32(-1.5 * zero))``; the approximate score is
``fl32(fl32(sq * fl32(1/sqrt D)) * fl32(log2 e))``. The residual dot is the skeleton's
pairwise float32 tree over ``q16 * res`` (exact products); the exact score is
``fl32(fl32(fl32(sq + rdot) * scale) * log2 e)``. The tail's scores use bf16 q and K the same
way (tree dot, then the two scalings).

Traffic model of [FFD]'s cache ([DERIVED], per token and KV head at D = 128, BS = 128): the scan
reads 32 B of codes plus 4 B of amortised scale; each attended token adds 128 B of residual and
256 B of V; dense bf16 reads 512 B. :func:`traffic_bound_speedup` is the bandwidth-bound ratio
``512 / (36 + 384 rho)``. On a real model's queries and keys: :func:`ffd_block_keep`,
:func:`ffd_cache_prefix` and :class:`FfdAttention` (selection in a decoder's decode steps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from coaccel.models.formats import E4M3, decode, encode
from coaccel.spine.trace import Trace

from ._bf16 import bf16_bits_to_f32, f32_to_bf16_bits
from ._ffd_trace import _ffd_trace
from ._splitk import (
    DecodeInputs,
    DecodeShape,
    PDtype,
    SplitPartials,
    SplitPlan,
    TileScores,
    _check_inputs,
    _tree_sum,
    dense_attention_f64,
    make_inputs,
    plan_split_k,
    reduce_partials,
    split_k_partials_gathered,
)

__all__ = [
    "DEFAULT_DELTA",
    "FFD_MAX_SPLITS",
    "RECENT_TOKENS",
    "SINK_TOKENS",
    "FfdCache",
    "FfdResult",
    "ffd_approx_scores",
    "ffd_decode",
    "ffd_keep",
    "ffd_threshold",
    "ffd_trace",
    "make_peaked_inputs",
    "pack_2bit",
    "quantize_keys",
    "synthetic_keep",
    "traffic_bound_speedup",
    "unpack_2bit",
]

QZERO = 1.5
"""Zero point of the symmetric 2-bit code: value = (code - 1.5) * scale."""
QMAX = 3
"""Largest 2-bit code."""
SINK_TOKENS = 16
"""First tokens the threshold kernel scores ([FFD-REPO] ``T_BS``)."""
RECENT_TOKENS = 16
"""Last quantized tokens the threshold kernel scores."""
DEFAULT_DELTA = 5.0
"""Threshold offset of the authors' default ([FFD-REPO] README; 7.0 is their conservative one)."""
FFD_MAX_SPLITS = 128
"""Default split count of the authors' persistent kernel (capped at the number of blocks)."""
SCALE_EPS = 1e-8
"""Floor of a channel scale (an all-zero channel of a block)."""

DeltaBase = Literal["2", "e"]
_RCP_LN2 = np.float32(1.4426950408889634)
_E4M3_VALUES = decode(np.arange(256), E4M3).astype(np.float32)


def pack_2bit(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Pack 2-bit codes four per byte along the last axis (channel ``4j + i`` in bits
    ``2i .. 2i+1`` of byte ``j``).

    Args:
        codes: ``[..., D]`` uint8 in 0..3, D a multiple of 4.

    Returns:
        ``[..., D / 4]`` uint8.
    """
    c = np.asarray(codes)
    if c.shape[-1] % 4 or (c.size and int(c.max()) > QMAX):
        raise ValueError("pack_2bit: codes must be 0..3 with a last axis a multiple of 4")
    c = c.astype(np.uint8).reshape(*c.shape[:-1], -1, 4)
    return (c[..., 0] | (c[..., 1] << 2) | (c[..., 2] << 4) | (c[..., 3] << 6)).astype(np.uint8)


def unpack_2bit(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Inverse of :func:`pack_2bit`: ``[..., D / 4]`` uint8 -> ``[..., D]`` codes 0..3."""
    p = np.asarray(packed, dtype=np.uint8)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8)
    return ((p[..., None] >> shifts) & 3).astype(np.uint8).reshape(*p.shape[:-1], -1)


@dataclass(frozen=True)
class FfdCache:
    """The FFD key cache of one layer (:func:`quantize_keys`).

    Attributes:
        block_tokens: BS, tokens per quantization block.
        codes: ``[B, Tq, Hkv, D / 4]`` uint8 packed 2-bit codes (Tq = full blocks x BS).
        scale: ``[B, NTB, Hkv, D]`` float32 per-block, per-channel scales.
        residual: ``[B, Tq, Hkv, D]`` uint8 FP8 E4M3 codes of ``k - dequant``.
        tail: ``[B, T - Tq, Hkv, D]`` uint16 bf16 keys of the incomplete last block.
    """

    block_tokens: int
    codes: npt.NDArray[np.uint8]
    scale: npt.NDArray[np.float32]
    residual: npt.NDArray[np.uint8]
    tail: npt.NDArray[np.uint16]

    @property
    def n_blocks(self) -> int:
        """Full (quantized) blocks NTB."""
        return int(self.scale.shape[1])

    @property
    def quantized_tokens(self) -> int:
        """Tokens in full blocks, Tq."""
        return self.n_blocks * self.block_tokens

    def dequantize(self, *, residual: bool = True) -> npt.NDArray[np.float32]:
        """``[B, Tq, Hkv, D]`` float32 keys ``(code - 1.5) * scale`` (+ the FP8 residual)."""
        b, tq, hkv, _ = self.residual.shape
        bs = self.block_tokens
        codes = unpack_2bit(self.codes).astype(np.float32)
        sc = np.repeat(self.scale, bs, axis=1)
        k = (codes - np.float32(QZERO)) * sc
        if residual:
            k = k + _E4M3_VALUES[self.residual]
        return k.astype(np.float32)


def quantize_keys(
    k: npt.NDArray[np.uint16], block_tokens: int = 128, *, eps: float = SCALE_EPS
) -> FfdCache:
    """Build the FFD key cache from bf16 keys (module docstring).

    Float32 steps: ``scale = max(fl32(absmax / 1.5), fl32(eps))``; ``code = clip(rne(fl32(
    fl32(k / scale) + 1.5)), 0, 3)``; ``residual = e4m3(fl32(k - fl32((code - 1.5) *
    scale)))``.

    Args:
        k: ``[B, T, Hkv, D]`` uint16 bf16 keys (D a multiple of 4).
        block_tokens: BS (> 0).
        eps: floor of a scale (> 0).

    Returns:
        :class:`FfdCache`.
    """
    k = np.asarray(k)
    if k.dtype != np.uint16 or k.ndim != 4 or k.shape[-1] % 4:
        raise ValueError("quantize_keys: k must be [B, T, Hkv, D] uint16 bf16, D % 4 == 0")
    if block_tokens < 1 or not eps > 0:
        raise ValueError("quantize_keys: block_tokens and eps must be positive")
    b, t, hkv, d = k.shape
    ntb = t // block_tokens
    tq = ntb * block_tokens
    kf = bf16_bits_to_f32(k[:, :tq]).reshape(b, ntb, block_tokens, hkv, d)
    absmax = np.abs(kf).max(axis=2) if ntb else np.zeros((b, 0, hkv, d), np.float32)
    scale = np.maximum(absmax / np.float32(QZERO), np.float32(eps)).astype(np.float32)
    sc = scale[:, :, None]
    codes = np.clip(np.rint(kf / sc + np.float32(QZERO)), 0, QMAX)
    deq = (codes - np.float32(QZERO)) * sc
    res = (kf - deq).astype(np.float32).reshape(b, tq, hkv, d)
    res_codes = encode(res, E4M3, rounding="rne", saturate=True, backend="numba")
    return FfdCache(
        block_tokens=block_tokens,
        codes=pack_2bit(codes.astype(np.uint8).reshape(b, tq, hkv, d)),
        scale=scale,
        residual=res_codes,
        tail=np.ascontiguousarray(k[:, tq:]),
    )


def make_peaked_inputs(
    shape: DecodeShape,
    rng: np.random.Generator | int,
    *,
    key_scale: float = 1.0,
    sink_tokens: int = SINK_TOKENS,
    recent_tokens: int = RECENT_TOKENS,
    peak_score: float = 12.0,
    needle_rate: float = 5e-4,
    needle_score: float = 9.0,
) -> DecodeInputs:
    """Seeded inputs whose attention is peaked the way decode attention is: the first and last
    tokens (attention sinks and the recent window) and a sparse random set of "needle" tokens
    score high, the rest is noise ([OURS] synthetic shape, since real long-context activations
    are not shipped).

    Start from :func:`~coaccel.models.gpu.make_inputs` (standard-normal q and V, keys
    ``key_scale`` x standard normal), then add to the keys of the sink, recent and needle
    tokens a multiple of the unit vector ``u`` along the sum of the group's query heads, sized
    so that the group's mean score (natural units, ``q . k / sqrt(D)``) rises by
    ``peak_score`` (sink and recent) or ``needle_score`` (each token independently a needle
    with probability ``needle_rate``); keys rounded to bf16 again.

    Returns:
        :class:`~coaccel.models.gpu.DecodeInputs`.
    """
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    base = make_inputs(shape, g, key_scale=key_scale)
    b, t, hkv, d, gq = shape.batch, shape.context, shape.kv_heads, shape.head_dim, shape.group
    q = bf16_bits_to_f32(base.q).astype(np.float64).reshape(b, hkv, gq, d)
    u = q.sum(axis=2)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    gain = np.einsum("bhgd,bhd->bh", q, u) / gq / math.sqrt(d)  # score per unit of u
    lift = np.zeros((b, t, hkv))
    lift[g.random((b, t, hkv)) < needle_rate] = needle_score
    lift[:, :sink_tokens] = peak_score
    lift[:, max(0, t - recent_tokens) :] = peak_score
    rows = np.nonzero(lift)
    k = base.k.copy()
    add = (lift[rows] / gain[rows[0], rows[2]])[:, None] * u[rows[0], rows[2]]
    k[rows] = f32_to_bf16_bits((bf16_bits_to_f32(k[rows]) + add).astype(np.float32))
    return DecodeInputs(q=base.q, k=k, v=base.v)


def _to_f16(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float16]:
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def _scan_sq(
    q16: npt.NDArray[np.float16], cache: FfdCache, chunk_blocks: int = 64
) -> npt.NDArray[np.float32]:
    """``[B, Hkv, G, Tq]`` float32 ``sq`` (code dot with the zero point folded in); a cache of
    batch 1 serves every query of ``q16``'s batch (decode steps over one key prefix)."""
    b, hkv, g, d = q16.shape
    ntb, bs, cb = cache.n_blocks, cache.block_tokens, cache.codes.shape[0]
    out = np.empty((b, hkv, g, cache.quantized_tokens), dtype=np.float32)
    s16 = _to_f16(cache.scale)  # [B, NTB, Hkv, D]
    for c0 in range(0, ntb, chunk_blocks):
        c1 = min(ntb, c0 + chunk_blocks)
        qs = (q16[:, None] * s16[:, c0:c1, :, None, :]).astype(np.float64)  # [B,n,Hkv,G,D]
        codes = unpack_2bit(cache.codes[:, c0 * bs : c1 * bs]).reshape(cb, c1 - c0, bs, hkv, d)
        cf = codes.transpose(0, 1, 3, 4, 2).astype(np.float64)  # [B, n, Hkv, D, BS]
        dot = np.matmul(qs, cf).astype(np.float32)  # exact, then one rounding
        zero = qs.sum(axis=-1).astype(np.float32)  # exact, then one rounding
        sq = dot + (zero * np.float32(-QZERO))[..., None]  # [B, n, Hkv, G, BS]
        out[:, :, :, c0 * bs : c1 * bs] = sq.transpose(0, 2, 3, 1, 4).reshape(b, hkv, g, -1)
    return out


def _scaled(x: npt.NDArray[np.float32], d: int) -> npt.NDArray[np.float32]:
    return (x * np.float32(1.0 / math.sqrt(d))) * _RCP_LN2


def ffd_approx_scores(q: npt.NDArray[np.uint16], cache: FfdCache) -> npt.NDArray[np.float32]:
    """Approximate scores of every quantized token, log2 units (module docstring).

    Args:
        q: ``[B, Hq, D]`` uint16 bf16 query. cache: the key cache.

    Returns:
        ``[B, Hkv, G, Tq]`` float32 (query head ``h * G + g`` at ``[b, h, g]``).
    """
    b, hq, d = q.shape
    hkv = cache.scale.shape[2]
    q16 = _to_f16(bf16_bits_to_f32(q)).reshape(b, hkv, hq // hkv, d)
    return _scaled(_scan_sq(q16, cache), d)


def ffd_threshold(
    approx: npt.NDArray[np.float32],
    *,
    delta: float = DEFAULT_DELTA,
    delta_base: DeltaBase = "2",
    sink_tokens: int = SINK_TOKENS,
    recent_tokens: int = RECENT_TOKENS,
) -> npt.NDArray[np.float32]:
    """The threshold kernel: max approximate score of the sink and recent tokens minus delta.

    Args:
        approx: ``[B, Hkv, G, Tq]`` approximate scores (log2 units), Tq >= 1.
        delta: offset (>= 0), in log2 units for ``delta_base="2"``, natural for ``"e"``.
        delta_base: ``"2"`` (the kernel's rule, prune below ``2**-delta``) or ``"e"``.
        sink_tokens: first tokens scored. recent_tokens: last tokens scored.

    Returns:
        ``[B, Hkv, G]`` float32 thresholds, log2 units.
    """
    if delta_base not in ("2", "e"):
        raise ValueError(f"delta_base={delta_base!r}; valid choices: 2, e")
    if not delta >= 0 or sink_tokens < 0 or recent_tokens < 0 or sink_tokens + recent_tokens < 1:
        raise ValueError("delta must be >= 0 and sink_tokens + recent_tokens >= 1")
    tq = approx.shape[-1]
    if tq < 1:
        raise ValueError("ffd_threshold: no quantized token")
    idx = np.unique(
        np.r_[np.arange(min(sink_tokens, tq)), np.arange(max(0, tq - recent_tokens), tq)]
    )
    d_log2 = np.float32(delta if delta_base == "2" else delta * math.log2(math.e))
    return (approx[..., idx].max(axis=-1) - d_log2).astype(np.float32)


def ffd_keep(
    approx: npt.NDArray[np.float32],
    threshold: npt.NDArray[np.float32],
    block_tokens: int,
    *,
    keep_ratio: float | None = None,
) -> npt.NDArray[np.bool_]:
    """Which quantized blocks each (sequence, KV head) attends to.

    Args:
        approx: ``[B, Hkv, G, Tq]`` approximate scores. threshold: ``[B, Hkv, G]``.
        block_tokens: BS.
        keep_ratio: None for the top-delta rule (any head's block max >= its threshold);
            else in (0, 1]: the ``ceil(ratio * NTB)`` blocks with the largest margin
            ``max_g(block max - threshold)`` (ties to the earlier block).

    Returns:
        ``[B, Hkv, NTB]`` bool.
    """
    b, hkv, g, tq = approx.shape
    ntb = tq // block_tokens
    bmax = approx.reshape(b, hkv, g, ntb, block_tokens).max(axis=-1)
    margin = (bmax - threshold[..., None]).max(axis=2)  # [B, Hkv, NTB]
    if keep_ratio is None:
        return margin >= 0
    if not 0 < keep_ratio <= 1:
        raise ValueError(f"keep_ratio={keep_ratio} must be in (0, 1]")
    n = min(ntb, max(1, math.ceil(keep_ratio * ntb)))
    order = np.argsort(-margin, axis=-1, kind="stable")[..., :n]
    keep = np.zeros_like(margin, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    return keep


def synthetic_keep(
    batch: int, kv_heads: int, n_blocks: int, keep_ratio: float, rng: np.random.Generator | int
) -> npt.NDArray[np.bool_]:
    """A keep mask without the numerics, for trace-only sweeps: per (sequence, KV head) the
    first and last block (the sink and recent tokens set the threshold, so their blocks pass
    it) and seeded uniformly random others, ``ceil(ratio * NTB)`` blocks in all.

    Returns:
        ``[B, Hkv, NTB]`` bool.
    """
    if not 0 < keep_ratio <= 1 or n_blocks < 1:
        raise ValueError(f"keep_ratio={keep_ratio} must be in (0, 1], n_blocks >= 1")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = min(n_blocks, max(1, math.ceil(keep_ratio * n_blocks)))
    pri = g.random((batch, kv_heads, n_blocks))
    pri[..., 0] = 2.0
    pri[..., -1] = np.where(n >= 2, 2.0, pri[..., -1])
    order = np.argsort(-pri, axis=-1, kind="stable")[..., :n]
    keep = np.zeros((batch, kv_heads, n_blocks), dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    return keep


def traffic_bound_speedup(
    keep_ratio: float, *, head_dim: int = 128, block_tokens: int = 128
) -> float:
    """Bandwidth-bound speedup of FFD over dense bf16 decode ([DERIVED] from the cache format):
    ``2 D * 2 / (D / 4 + 4 D / BS + rho * (D + 2 D))`` — ``512 / (36 + 384 rho)`` at D = BS =
    128."""
    scan = head_dim / 4 + 4 * head_dim / block_tokens
    return 4 * head_dim / (scan + keep_ratio * 3 * head_dim)


@dataclass(frozen=True)
class FfdResult:
    """Values, decisions, error and trace of one FFD decode step.

    Attributes:
        plan: the split launch plan (tiles = quantization blocks).
        inputs: bf16 q, K, V. cache: the key cache.
        threshold: ``[B, Hq]`` float32 thresholds (log2 units).
        tile_keep: ``[B, Hkv, ceil(T / BS)]`` bool attended blocks (the tail included).
        keep_ratio: attended quantized blocks / quantized blocks (the tail not counted).
        partials: split-kernel outputs. out: ``[B, Hq, D]`` uint16 bf16 output.
        dense: ``[B, Hq, D]`` float64 dense attention of the same inputs, or None.
        rel_error: ``||out - dense|| / ||dense||`` (Frobenius over all rows), or NaN.
        max_abs_error: ``max |out - dense|``, or NaN.
        trace: the trace of the three kernels.
    """

    plan: SplitPlan
    inputs: DecodeInputs
    cache: FfdCache
    threshold: npt.NDArray[np.float32]
    tile_keep: npt.NDArray[np.bool_]
    keep_ratio: float
    partials: SplitPartials
    out: npt.NDArray[np.uint16]
    dense: npt.NDArray[np.float64] | None
    rel_error: float
    max_abs_error: float
    trace: Trace


def _plan(
    shape: DecodeShape,
    block_n: int,
    num_splits: int | None,
    n_sms: int | None,
    waves: float,
    n_stages: int,
) -> SplitPlan:
    if num_splits is None and n_sms is None:
        num_splits = FFD_MAX_SPLITS
    return plan_split_k(
        shape, block_n=block_n, num_splits=num_splits, n_sms=n_sms, waves=waves, n_stages=n_stages
    )


def ffd_decode(
    shape: DecodeShape,
    *,
    seed: int = 0,
    block_n: int = 128,
    num_splits: int | None = None,
    n_sms: int | None = None,
    waves: float = 1.0,
    n_stages: int = 1,
    delta: float = DEFAULT_DELTA,
    delta_base: DeltaBase = "2",
    keep_ratio: float | None = None,
    residual: bool = True,
    sink_tokens: int = SINK_TOKENS,
    recent_tokens: int = RECENT_TOKENS,
    p_dtype: PDtype = "bf16",
    key_scale: float = 1.0,
    inputs: DecodeInputs | None = None,
    cache: FfdCache | None = None,
    dense: bool = True,
) -> FfdResult:
    """One FFD decode step: cache (unless given), threshold, keep decisions, sparse split
    kernel, reduction, error against dense attention and trace.

    Args:
        shape: batch, context and heads (at least one full block: T >= block_n).
        seed: seed of the synthetic inputs (ignored when ``inputs`` is given).
        block_n: BS, tokens per quantization block and tile (64, 128 or 256).
        num_splits: splits per (sequence, KV head); None: ``n_sms``'s split rule, or the
            authors' 128 when ``n_sms`` is None too (capped at the blocks).
        n_sms: SMs for the split rule. waves: its target waves. n_stages: pipeline depth.
        delta: threshold offset. delta_base: ``"2"`` (kernel) or ``"e"`` (README).
        keep_ratio: None (top-delta) or a forced ratio in (0, 1].
        residual: add the FP8 residual to the scores of attended blocks.
        sink_tokens: first tokens of the threshold. recent_tokens: last tokens.
        p_dtype: probabilities in P.V, ``"bf16"`` or ``"fp32"``.
        key_scale: standard deviation of the synthetic keys.
        inputs: bf16 inputs instead of synthetic ones. cache: a cache of ``inputs.k``.
        dense: compute the dense float64 reference and the error.

    Returns:
        :class:`FfdResult`.
    """
    plan = _plan(shape, block_n, num_splits, n_sms, waves, n_stages)
    used_seed: int | None = None
    if inputs is None:
        inputs = make_peaked_inputs(shape, seed, key_scale=key_scale)
        used_seed = seed
    _check_inputs(inputs, shape)
    if cache is None:
        cache = quantize_keys(inputs.k, block_n)
    _check_cache(cache, shape, block_n)
    b, hq, hkv, d, g = shape.batch, shape.q_heads, shape.kv_heads, shape.head_dim, shape.group
    q16 = _to_f16(bf16_bits_to_f32(inputs.q)).reshape(b, hkv, g, d)
    sq = _scan_sq(q16, cache)
    approx = _scaled(sq, d)
    thr = ffd_threshold(
        approx, delta=delta, delta_base=delta_base, sink_tokens=sink_tokens,
        recent_tokens=recent_tokens,
    )  # fmt: skip
    keep_q = ffd_keep(approx, thr, block_n, keep_ratio=keep_ratio)
    tile_keep = np.ones((b, hkv, -(-shape.context // block_n)), dtype=bool)
    tile_keep[:, :, : cache.n_blocks] = keep_q
    scores = _exact_scores(inputs.q, sq, cache, residual=residual)
    partials = split_k_partials_gathered(
        inputs.v, plan, tile_keep, scores, softmax_base="2", p_dtype=p_dtype
    )
    out = reduce_partials(partials)
    ratio = float(keep_q.mean())
    ref = dense_attention_f64(inputs, shape) if dense else None
    rel, mx = _errors(out, ref)
    metrics: dict[str, Any] = {"keep_ratio": [ratio, "1"]}
    if ref is not None:
        metrics["attn_out_rel_err"] = [rel, "1"]
        metrics["attn_out_max_abs_err"] = [mx, "1"]
    trace = _ffd_trace(
        plan, tile_keep, n_blocks=cache.n_blocks, sink_tokens=sink_tokens,
        recent_tokens=recent_tokens, residual=residual, seed=used_seed,
        workload={"delta": delta, "delta_base": delta_base, "keep_rule":
                  "top-delta" if keep_ratio is None else "forced", "p_dtype": p_dtype,
                  "metrics": metrics},
    )  # fmt: skip
    return FfdResult(
        plan=plan, inputs=inputs, cache=cache, threshold=thr.reshape(b, hq),
        tile_keep=tile_keep, keep_ratio=ratio, partials=partials, out=out, dense=ref,
        rel_error=rel, max_abs_error=mx, trace=trace,
    )  # fmt: skip


def _check_cache(cache: FfdCache, shape: DecodeShape, block_n: int) -> None:
    """Raise ValueError unless ``cache`` holds the context of ``shape`` in blocks of
    ``block_n`` tokens, at least one of them full."""
    if (
        cache.block_tokens != block_n
        or cache.quantized_tokens + cache.tail.shape[1] != shape.context
    ):
        raise ValueError("ffd_decode: the cache does not match block_n and the context")
    if cache.n_blocks < 1:
        raise ValueError(f"ffd_decode: context {shape.context} holds no full block of {block_n}")


def _exact_scores(
    q: npt.NDArray[np.uint16], sq: npt.NDArray[np.float32], cache: FfdCache, *, residual: bool
) -> TileScores:
    """The score callback of :func:`~._splitk.split_k_partials_gathered` (module docstring,
    order of operations): for tiles ``(b, h, tile)`` the ``[n, G, BS]`` float32 log2-unit
    scores, ``sq`` plus the residual dot for a quantized block (``sq`` alone without
    ``residual``), the bf16 dot for the tail block, -inf past the context.

    Args:
        q: ``[B, Hq, D]`` bf16 query. sq: ``[B, Hkv, G, Tq]`` code dots (:func:`_scan_sq`).
        cache: the key cache.
        residual: add the FP8 residual's dot.
    """
    b, hkv, g, _ = sq.shape
    d = q.shape[-1]
    bs, ntb, tq = cache.block_tokens, cache.n_blocks, cache.quantized_tokens
    t = tq + cache.tail.shape[1]
    q32 = bf16_bits_to_f32(q).reshape(b, hkv, g, d)
    q16f = _to_f16(q32).astype(np.float32)
    pos = np.arange(bs)

    def scores(
        bi: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], ti: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        tok = ti[:, None] * bs + pos[None, :]  # [n, BS]
        out = np.full((bi.size, g, bs), -np.inf, dtype=np.float32)
        full = ti < ntb
        if full.any():
            f = np.flatnonzero(full)
            s = sq[
                bi[f, None, None], hi[f, None, None], np.arange(g)[None, :, None], tok[f, None, :]
            ]
            if residual:
                r = _E4M3_VALUES[cache.residual[bi[f, None], tok[f], hi[f, None]]]  # [n, BS, D]
                rdot = _tree_sum(q16f[bi[f], hi[f]][:, :, None, :] * r[:, None], axis=-1)
                s = s + rdot
            out[f] = _scaled(s, d)
        if (~full).any():
            f = np.flatnonzero(~full)
            valid = tok[f] < t
            kk = cache.tail[bi[f, None], np.clip(tok[f] - tq, 0, t - tq - 1), hi[f, None]]
            kt = bf16_bits_to_f32(kk)  # [n, BS, D]
            s = _scaled(_tree_sum(q32[bi[f], hi[f]][:, :, None, :] * kt[:, None], axis=-1), d)
            out[f] = np.where(valid[:, None, :], s, np.float32(-np.inf))
        return out

    return scores


def _errors(
    out: npt.NDArray[np.uint16], ref: npt.NDArray[np.float64] | None
) -> tuple[float, float]:
    """Relative Frobenius error and max absolute error of the bf16 output against the dense
    reference (NaN, NaN without one)."""
    if ref is None:
        return math.nan, math.nan
    err = bf16_bits_to_f32(out).astype(np.float64) - ref
    return float(np.linalg.norm(err) / np.linalg.norm(ref)), float(np.abs(err).max())


def ffd_trace(
    shape: DecodeShape,
    *,
    keep_ratio: float | None = None,
    tile_keep: npt.NDArray[np.bool_] | None = None,
    seed: int = 0,
    block_n: int = 128,
    num_splits: int | None = None,
    n_sms: int | None = None,
    waves: float = 1.0,
    n_stages: int = 1,
    residual: bool = True,
    sink_tokens: int = SINK_TOKENS,
    recent_tokens: int = RECENT_TOKENS,
    workload: Mapping[str, Any] | None = None,
) -> Trace:
    """The trace of one FFD step without the numerics: the attended blocks are ``tile_keep``
    (``[B, Hkv, ceil(T / BS)]``, e.g. an :class:`FfdResult`'s) or :func:`synthetic_keep` of
    ``keep_ratio`` with ``seed`` (the tail block always attended).

    Returns:
        The :class:`~coaccel.trace.Trace` (equal to :func:`ffd_decode`'s for the same mask,
        apart from the seed and numerics settings in its metadata).
    """
    plan = _plan(shape, block_n, num_splits, n_sms, waves, n_stages)
    ntb = shape.context // block_n
    if ntb < 1:
        raise ValueError(f"ffd_trace: context {shape.context} holds no full block of {block_n}")
    n_tiles = -(-shape.context // block_n)
    if tile_keep is None:
        if keep_ratio is None:
            raise ValueError("ffd_trace: give keep_ratio or tile_keep")
        tile_keep = np.ones((shape.batch, shape.kv_heads, n_tiles), dtype=bool)
        tile_keep[:, :, :ntb] = synthetic_keep(shape.batch, shape.kv_heads, ntb, keep_ratio, seed)
        meta: dict[str, Any] = {"keep_rule": "synthetic", "keep_seed": seed}
    else:
        meta = {"keep_rule": "given"}
    tk = np.asarray(tile_keep)
    if tk.dtype != np.bool_ or tk.shape != (shape.batch, shape.kv_heads, n_tiles):
        raise ValueError(
            f"tile_keep must be bool of shape {(shape.batch, shape.kv_heads, n_tiles)}"
        )
    ratio = float(tk[:, :, :ntb].mean())
    meta["metrics"] = {"keep_ratio": [ratio, "1"]}
    return _ffd_trace(
        plan, tk, n_blocks=ntb, sink_tokens=sink_tokens, recent_tokens=recent_tokens,
        residual=residual, seed=None, workload={**meta, **dict(workload or {})},
    )  # fmt: skip
