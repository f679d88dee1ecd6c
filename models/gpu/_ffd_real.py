"""FFD's block selection on a real model's decode activations (exported by :mod:`.ffd`).

The W2 reference (:mod:`.ffd`) decides which 128-token blocks a decode query attends to from a
2-bit scan of the keys. Here the same decisions are taken on queries and keys recorded from a
real decoder (:mod:`coaccel.models.nn`), in three forms:

* :func:`ffd_cache_prefix`: the key cache of the first ``t`` tokens cut from the cache of a
  longer sequence. Quantization is per block (scale, codes and residual of a full block depend
  on its own 128 keys only), so the first ``t // BS`` blocks of the long cache are the short
  cache's blocks bit for bit, and only the bf16 tail is taken from the keys;
* :func:`ffd_block_keep`: the threshold kernel and the top-delta rule for many queries that
  share one key prefix (decode steps of one sequence and layer), vectorized over the queries;
* :class:`FfdAttention`: a replacement attention for ``Decoder.with_attention`` that applies
  FFD's selection in every decode step (one new token; prefill and sliding-window layers stay
  exact): softmax over the attended blocks and the bf16 tail only, in float64 on the model's own
  keys and values, so that the perplexity change measures the selection alone (the 2-bit +
  FP8 residual numerics of the kernel are measured separately by
  :func:`~.ffd.ffd_decode` on the same inputs).

Keys and queries enter the selection rounded to bf16, the cache format of [FFD-REPO]; the model's
attention scale must be ``1 / sqrt(D)`` (the kernel's), checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ._bf16 import bf16_bits_to_f32, f32_to_bf16_bits

if TYPE_CHECKING:
    from .ffd import DeltaBase, FfdCache

__all__ = [
    "FfdAttention",
    "FfdSelection",
    "ffd_block_keep",
    "ffd_cache_prefix",
    "masked_attention",
]


@dataclass(frozen=True)
class FfdSelection:
    """Keep decisions of queries over one key prefix (:func:`ffd_block_keep`).

    Attributes:
        keep: ``[N, Hkv, NTB]`` bool, attended quantized blocks per query and KV head.
        threshold: ``[N, Hkv, G]`` float32 thresholds (log2 units).
        approx_block_max: ``[N, Hkv, G, NTB]`` float32 best approximate score of each block.
    """

    keep: npt.NDArray[np.bool_]
    threshold: npt.NDArray[np.float32]
    approx_block_max: npt.NDArray[np.float32]

    @property
    def keep_ratio(self) -> npt.NDArray[np.float64]:
        """``[N, Hkv]`` attended blocks / quantized blocks."""
        return self.keep.mean(axis=-1)


def ffd_cache_prefix(cache: FfdCache, k_bits: npt.NDArray[np.uint16], tokens: int) -> FfdCache:
    """The FFD key cache of the first ``tokens`` tokens, cut from ``cache`` (module docstring).

    Args:
        cache: an :class:`~.ffd.FfdCache` of the keys ``k_bits`` (or of a longer prefix of
            them) whose full blocks cover at least ``tokens // BS`` blocks.
        k_bits: ``[B, T, Hkv, D]`` uint16 bf16 keys, ``T >= tokens``.
        tokens: prefix length (>= 1).

    Returns:
        :class:`~.ffd.FfdCache` equal to ``quantize_keys(k_bits[:, :tokens], BS)``.
    """
    from .ffd import FfdCache

    bs = cache.block_tokens
    ntb = int(tokens) // bs
    if not 1 <= tokens <= k_bits.shape[1] or ntb > cache.n_blocks:
        raise ValueError(
            f"ffd_cache_prefix: {tokens} tokens need 1..{k_bits.shape[1]} keys and at most "
            f"{cache.n_blocks} cached blocks"
        )
    tq = ntb * bs
    return FfdCache(
        block_tokens=bs,
        codes=cache.codes[:, :tq],
        scale=cache.scale[:, :ntb],
        residual=cache.residual[:, :tq],
        tail=np.ascontiguousarray(k_bits[:, tq:tokens]),
    )


def ffd_block_keep(
    q_bits: npt.NDArray[np.uint16],
    cache: FfdCache,
    *,
    delta: float = 5.0,
    delta_base: DeltaBase = "2",
    sink_tokens: int = 16,
    recent_tokens: int = 16,
    keep_ratio: float | None = None,
) -> FfdSelection:
    """FFD's threshold kernel and top-delta keep rule for ``N`` queries over one key cache.

    Each query is scored against the quantized blocks exactly as :func:`~.ffd.ffd_decode`
    scores its own (same order of operations), so each row equals a one-query ``ffd_decode``'s
    ``tile_keep`` over the quantized blocks.

    Args:
        q_bits: ``[N, Hq, D]`` uint16 bf16 queries (before the attention scale).
        cache: an :class:`~.ffd.FfdCache` of batch 1 (at least one full block).
        delta: threshold offset. delta_base: ``"2"`` (kernel) or ``"e"`` (README).
        sink_tokens: first tokens of the threshold. recent_tokens: last quantized tokens.
        keep_ratio: None for the top-delta rule; else the forced ratio of
            :func:`~.ffd.ffd_keep` (the ``ceil(ratio * NTB)`` blocks of largest margin).

    Returns:
        :class:`FfdSelection`.
    """
    from .ffd import _scaled, _scan_sq, _to_f16, ffd_keep, ffd_threshold

    if cache.codes.shape[0] != 1 or cache.n_blocks < 1:
        raise ValueError("ffd_block_keep: the cache must hold one sequence and a full block")
    n, hq, d = q_bits.shape
    hkv = cache.scale.shape[2]
    q16 = _to_f16(bf16_bits_to_f32(q_bits)).reshape(n, hkv, hq // hkv, d)
    approx = _scaled(_scan_sq(q16, cache), d)
    thr = ffd_threshold(
        approx, delta=delta, delta_base=delta_base,
        sink_tokens=sink_tokens, recent_tokens=recent_tokens,
    )  # fmt: skip
    bs = cache.block_tokens
    keep = ffd_keep(approx, thr, bs, keep_ratio=keep_ratio)
    bmax = approx.reshape(n, hkv, hq // hkv, cache.n_blocks, bs).max(axis=-1)
    return FfdSelection(keep=keep, threshold=thr, approx_block_max=bmax)


def masked_attention(
    q: npt.NDArray[np.floating],
    k: npt.NDArray[np.floating],
    v: npt.NDArray[np.floating],
    allowed: npt.NDArray[np.bool_] | None,
    scale: float,
) -> npt.NDArray[np.float64]:
    """Softmax attention of queries over the allowed keys, float64.

    Args:
        q: ``[Hq, T, D]`` queries (before the scale). k, v: ``[Hkv, S, D]``.
        allowed: ``[Hkv, T, S]`` (or broadcastable) bool, keys each query may see (None: all);
            every query must see at least one key.
        scale: the score scale.

    Returns:
        ``[Hq, T, D]`` float64 (query head ``h * G + g`` reads KV head ``h``).
    """
    hq, t, d = q.shape
    hkv, s, _ = k.shape
    g = hq // hkv
    q64 = np.asarray(q, dtype=np.float64).reshape(hkv, g * t, d)
    sc = (q64 @ np.asarray(k, dtype=np.float64).transpose(0, 2, 1)).reshape(hkv, g, t, s) * scale
    if allowed is not None:
        sc = np.where(np.asarray(allowed)[:, None], sc, -np.inf)
    sc -= sc.max(axis=-1, keepdims=True)
    p = np.exp(sc)
    p /= p.sum(axis=-1, keepdims=True)
    out = p.reshape(hkv, g * t, s) @ np.asarray(v, dtype=np.float64)
    return out.reshape(hq, t, d)


@dataclass
class FfdAttention:
    """FFD's block selection in a decoder's decode steps (``Decoder.with_attention``).

    A call with one new query (a decode step) in a global-attention layer keeps the blocks
    :func:`ffd_block_keep` keeps (and the bf16 tail) and returns the softmax attention over them
    (:func:`masked_attention`); any other call (a prefill chunk, a sliding-window layer, fewer
    than one full block) returns None, so the model attends exactly. The key cache of each layer
    is quantized once per number of full blocks (the model's cache does not change old keys).

    Attributes:
        scale: the model's attention scale (must be ``1 / sqrt(D)``).
        block_tokens: BS. delta, delta_base, sink_tokens, recent_tokens: the keep rule.
        keep_ratio: None (the top-delta rule) or a forced keep ratio in (0, 1]
            (:func:`ffd_block_keep`).
        keep_log: ``(layer, keep ratio over the group's KV heads)`` of every decode call.
    """

    scale: float
    block_tokens: int = 128
    delta: float = 5.0
    delta_base: DeltaBase = "2"
    sink_tokens: int = 16
    recent_tokens: int = 16
    keep_ratio: float | None = None
    keep_log: list[tuple[int, float]] = field(default_factory=list)
    _caches: dict[int, FfdCache] = field(default_factory=dict, repr=False)

    def __call__(
        self,
        layer: int,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        q_pos: np.ndarray,
        k_pos: np.ndarray,
        window: int | None,
    ) -> np.ndarray | None:
        """The attention output ``[Hq, 1, D]`` of a decode step, or None (exact)."""
        from .ffd import quantize_keys

        hq, t, d = q.shape
        s, bs = k.shape[1], self.block_tokens
        ntb = s // bs
        if t != 1 or window is not None or ntb < 1:
            return None
        if not math.isclose(self.scale, 1 / math.sqrt(d), rel_tol=1e-6):
            raise ValueError(f"FfdAttention: scale {self.scale} is not 1/sqrt({d})")
        k_bits = f32_to_bf16_bits(np.asarray(k, dtype=np.float32).transpose(1, 0, 2)[None])
        full = self._caches.get(layer)
        if full is None or full.n_blocks != ntb:
            full = quantize_keys(k_bits[:, : ntb * bs], bs)
            self._caches[layer] = full
        cache = ffd_cache_prefix(full, k_bits, s)
        sel = ffd_block_keep(
            f32_to_bf16_bits(np.asarray(q, dtype=np.float32).transpose(1, 0, 2)), cache,
            delta=self.delta, delta_base=self.delta_base, sink_tokens=self.sink_tokens,
            recent_tokens=self.recent_tokens, keep_ratio=self.keep_ratio,
        )  # fmt: skip
        self.keep_log.append((int(layer), float(sel.keep.mean())))
        allowed = np.ones((k.shape[0], 1, s), dtype=bool)
        allowed[:, 0, : ntb * bs] = np.repeat(sel.keep[0], bs, axis=-1)
        return masked_attention(q, k, v, allowed, self.scale)


def to_bf16_tokens(x: npt.NDArray[np.floating]) -> npt.NDArray[np.uint16]:
    """``[H, T, D]`` float (a model's per-head layout) -> ``[1, T, H, D]`` bf16 bits (the
    decode references' token-major layout)."""
    return f32_to_bf16_bits(np.asarray(x, dtype=np.float32).transpose(1, 0, 2)[None])
