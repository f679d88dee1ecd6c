"""NOSA / NOSI bounded KV offload (W3): selection dynamics over a decode run, values and trace.

NOSA ([NOSA]) keeps the whole KV cache of a sequence in pinned host memory and a fixed budget of
it on the GPU: ``slots`` blocks of ``block_tokens`` tokens per (sequence, KV head), 64 x 64 by
default as in the NOSI inference engine ([NOSA-CODE] ``nosi/nosi/cache_engine.py``). Every decode
step selects the blocks to attend to, fetches the selected ones the GPU does not hold from the
host, attends over the resident blocks and, when the tail block fills, writes it back. The
locality constraint bounds the host traffic: only ``topk_q_blocks`` of the selection follow the
query; the rest follow a query-independent per-token score that never changes for old tokens.

:func:`nosa_decode` runs a seeded decode run of ``steps`` steps ending at context ``T`` and
returns, for its last step, the attention output, its error against dense attention, and the
trace; and for the whole run the misses per step (so the miss rate comes from the selection
dynamics, not from a constant). Per step and (sequence, KV head):

1. compressed keys: the mean of every 32-token window of keys at stride 16, stored bf16 (NOSI's
   defaults); block score = max-pool, over the windows overlapping a 64-token block, of
   ``max_g q_g . ck / sqrt(D)`` over the group's query heads (float64: products and sums of
   bf16 values are exact there, so the scores do not depend on the summation order);
2. eviction score ``cis = A * softplus(w . v / sqrt(D))`` per token (query-agnostic; ``w`` a
   seeded projection per KV head stands in for the trained one), block cis = its max;
3. selection (``selector="nosa"``): the ``init_blocks`` first and ``window_blocks`` most recent
   blocks, the ``topk_q_blocks`` best other blocks by block score, then the highest block cis
   among the rest up to ``slots``; ``selector="topk"``: the forced blocks plus the best others
   by block score up to ``slots`` (unconstrained, InfLLMv2-like);
4. slot map diff: selected blocks already resident keep their slot; new ones take freed slots in
   slot order; a new block is a *miss* (a host fetch) unless it was created on the GPU this
   step (the new tail block);
5. fetch of every miss: 64 K rows and 64 V rows of ``D x 2`` B strided ``Hkv x D x 2`` B in the
   host's token-major ``[B, T, Hkv, D]`` layout plus 64 x 2 B of cis, either as zero-copy loads
   issued by the SMs (``fetch="zero_copy"``, what NOSI does) or as one copy-engine transfer per
   missed block on a copy stream the attention waits for (``fetch="dma"``);
6. attention over the resident blocks in block order with the split-K skeleton
   (:func:`~._splitk.split_k_partials` on the gathered blocks, ``block_n`` = 64, then
   :func:`~._splitk.reduce_partials`). The trained cis logit bias of NOSA is not modelled: the
   synthetic inputs have no trained eviction head, so the attention is plain softmax over the
   selected tokens and its error against dense is the selection's error alone;
7. write-back: when the step fills the tail block, its K and V (32 KiB per (sequence, KV head))
   go to the host on a second copy stream.

The synthetic attention model (every knob [OURS]; NOSA's own runs use recorded PG19 inputs): keys
are ``key_scale`` x noise plus a per-block centroid (``block_spread`` x standard
normal), so blocks differ; values are noise; the noise is a discretised standard normal (one
random byte per element selects one of 256 normal quantiles); the query of head ``hq`` at
step ``s`` is
``focus_gain`` x the mean centroid of the sequence's ``focus_blocks`` focus blocks (for its KV
head) plus a residual that is an AR(1) process of persistence ``query_persistence`` and standard
deviation ``query_noise``; each focus block is replaced by a uniformly drawn existing block with
probability ``focus_switch`` per step. Everything is drawn from one ``numpy`` generator seeded
with ``seed``, in a fixed order, so a run is bit-exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._bf16 import bf16_bits_to_f32, f32_to_bf16_bits
from ._checks import check_integer_fields
from ._nosa_fast import bf16_to_f64, chunk_sums, keys_bf16, lookup_bf16
from ._splitk import (
    DecodeInputs,
    DecodeShape,
    SplitPlan,
    plan_split_k,
    reduce_partials,
    split_k_partials,
)
from ._trace import allocate_split_k_tensors, emit_host_copy, split_k_trace

__all__ = [
    "NosaConfig",
    "NosaModel",
    "NosaResult",
    "nosa_decode",
]

Selector = Literal["nosa", "topk"]
Fetch = Literal["zero_copy", "dma"]

PRODUCER = "coaccel.models.gpu.nosa"
_GEN_CHUNK_TOKENS = 8192  # tokens drawn per generator call (fixed: part of the seeded order)


@dataclass(frozen=True)
class NosaConfig:
    """NOSA selection and cache parameters (defaults: NOSI's, [NOSA-CODE]).

    Attributes:
        block_tokens: tokens per KV block (64).
        slots: GPU slot budget per (sequence, KV head), blocks (64; NOSI asserts 64).
        topk_q_blocks: query-aware blocks chosen by block score (16).
        init_blocks: first blocks always kept (1).
        window_blocks: most recent blocks always kept (16).
        compress_window: tokens averaged into one compressed key (32).
        compress_stride: tokens between compressed keys (16).
        cis_gain: ``A`` of the eviction score ``A * softplus(.)`` ([OURS] 1).
        selector: ``"nosa"`` (locality-constrained) or ``"topk"`` (unconstrained top-k).
        fetch: ``"zero_copy"`` (SM loads of host rows, NOSI's path) or ``"dma"`` (copy engine).
    """

    block_tokens: int = 64
    slots: int = 64
    topk_q_blocks: int = 16
    init_blocks: int = 1
    window_blocks: int = 16
    compress_window: int = 32
    compress_stride: int = 16
    cis_gain: float = 1.0
    selector: Selector = "nosa"
    fetch: Fetch = "zero_copy"

    def __post_init__(self) -> None:
        check_integer_fields(self, ("block_tokens", "slots", "compress_window", "compress_stride"))
        check_integer_fields(self, ("topk_q_blocks", "init_blocks", "window_blocks"), minimum=0)
        if self.init_blocks + self.window_blocks + self.topk_q_blocks > self.slots:
            raise ValueError(
                f"NosaConfig: init_blocks + window_blocks + topk_q_blocks = "
                f"{self.init_blocks + self.window_blocks + self.topk_q_blocks} exceeds "
                f"slots={self.slots}"
            )
        if self.block_tokens not in (64, 128, 256):
            raise ValueError(f"NosaConfig.block_tokens={self.block_tokens}; valid: 64, 128, 256")
        if self.block_tokens % self.compress_stride or self.compress_window % self.compress_stride:
            raise ValueError(
                "NosaConfig: block_tokens and compress_window must be multiples of compress_stride"
            )
        if self.selector not in ("nosa", "topk"):
            raise ValueError(f"NosaConfig.selector={self.selector!r}; valid: nosa, topk")
        if self.fetch not in ("zero_copy", "dma"):
            raise ValueError(f"NosaConfig.fetch={self.fetch!r}; valid: zero_copy, dma")
        if not self.cis_gain > 0:
            raise ValueError(f"NosaConfig.cis_gain={self.cis_gain} must be positive")


@dataclass(frozen=True)
class NosaModel:
    """The synthetic attention model of the decode run (module docstring; all [OURS]).

    Attributes:
        key_scale: standard deviation of the per-token key noise.
        block_spread: standard deviation of the per-block key centroids.
        focus_blocks: focus blocks per sequence the query follows.
        focus_gain: weight of the mean focus centroid in the query.
        focus_switch: probability per step and focus block of moving to a random block.
        query_noise: standard deviation of the query residual.
        query_persistence: AR(1) coefficient of the query residual between steps, in [0, 1).
    """

    key_scale: float = 0.5
    block_spread: float = 1.0
    focus_blocks: int = 4
    focus_gain: float = 3.0
    focus_switch: float = 0.05
    query_noise: float = 0.5
    query_persistence: float = 0.9

    def __post_init__(self) -> None:
        if not (
            self.key_scale > 0
            and self.block_spread >= 0
            and self.focus_gain >= 0
            and self.query_noise >= 0
        ):
            raise ValueError("NosaModel: key_scale > 0; block_spread, focus_gain, query_noise >= 0")
        if not 0 <= self.focus_switch <= 1 or not 0 <= self.query_persistence < 1:
            raise ValueError("NosaModel: focus_switch in [0, 1], query_persistence in [0, 1)")
        if isinstance(self.focus_blocks, bool) or self.focus_blocks < 1:
            raise ValueError(f"NosaModel.focus_blocks={self.focus_blocks} must be >= 1")


@dataclass(frozen=True)
class NosaResult:
    """A NOSA decode run (:func:`nosa_decode`).

    Attributes:
        shape: geometry of the last step (context = ``T``).
        config: the selection and cache parameters.
        steps: decode steps run (the first is the cold start).
        selected: ``[B, Hkv, n_sel]`` int64 blocks attended at the last step, ascending.
        slot_map: ``[B, Hkv, slots]`` int64 block held by each slot after the last step (-1
            empty).
        misses: ``[steps, B, Hkv]`` int64 host fetches per step.
        writebacks: ``[steps]`` bool, True where the step filled its tail block.
        out: ``[B, Hq, D]`` uint16 bf16 attention output of the last step.
        dense: ``[B, Hq, D]`` float64 dense attention of the last step's query over all ``T``
            tokens (``[B, Hq, 0]`` when the run skipped it).
        rel_err: ``||out - dense|| / ||dense||`` over the whole output (Frobenius).
        trace: the trace of the last ``trace_steps`` steps.
        inputs: the last step's bf16 query and the whole bf16 K / V cache ``[B, T, Hkv, D]``.
    """

    shape: DecodeShape
    config: NosaConfig
    steps: int
    selected: npt.NDArray[np.int64]
    slot_map: npt.NDArray[np.int64]
    misses: npt.NDArray[np.int64]
    writebacks: npt.NDArray[np.bool_]
    out: npt.NDArray[np.uint16]
    dense: npt.NDArray[np.float64]
    rel_err: float
    trace: Trace
    inputs: DecodeInputs

    @property
    def keep_ratio(self) -> float:
        """Tokens attended at the last step over ``T``."""
        return min(1.0, self.selected.shape[-1] * self.config.block_tokens / self.shape.context)

    @property
    def misses_per_step(self) -> float:
        """Mean host fetches per step and (sequence, KV head), cold start excluded."""
        m = self.misses[1:] if self.steps > 1 else self.misses
        return float(m.mean())

    @property
    def miss_rate(self) -> float:
        """Mean fraction of the selected blocks fetched per step, cold start excluded."""
        return self.misses_per_step / self.selected.shape[-1]


def _normal_table() -> npt.NDArray[np.float32]:
    """256 standard-normal quantiles ``Phi^-1((i + 1/2) / 256)`` as float32 (the noise
    alphabet of the synthetic cache: one random byte per element)."""
    nd = NormalDist()
    return np.array([nd.inv_cdf((i + 0.5) / 256) for i in range(256)], dtype=np.float32)


_TABLE = _normal_table()
_TABLE_BF16 = f32_to_bf16_bits(_TABLE)


def _kv_tokens(
    rng: np.random.Generator, cent: npt.NDArray[np.float32], t: int, bt: int, model: NosaModel
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """bf16 K and V ``[B, T, Hkv, D]``: K = centroid of the token's block plus ``key_scale`` x
    noise, V = noise, the noise drawn as one random byte per element indexing 256 normal
    quantiles (a discretised standard normal, [OURS]: far cheaper to draw at 128K tokens)."""
    b, _, hkv, d = cent.shape
    k = np.empty((b, t, hkv, d), dtype=np.uint16)
    v = np.empty((b, t, hkv, d), dtype=np.uint16)
    scaled = _TABLE * np.float32(model.key_scale)
    for t0 in range(0, t, _GEN_CHUNK_TOKENS):
        t1 = min(t, t0 + _GEN_CHUNK_TOKENS)
        zk = rng.integers(0, 256, size=(b, t1 - t0, hkv, d), dtype=np.uint8)
        keys_bf16(zk, scaled, cent, t0, bt, k[:, t0:t1])
        zv = rng.integers(0, 256, size=(b, t1 - t0, hkv, d), dtype=np.uint8)
        v[:, t0:t1] = lookup_bf16(zv, _TABLE_BF16)
    return k, v


def _compressed_keys(k: npt.NDArray[np.uint16], cfg: NosaConfig) -> npt.NDArray[np.float64]:
    """``[B, Hkv, n_ck, D]`` bf16-rounded window means as float64 (exact sums of bf16)."""
    b, t, hkv, d = k.shape
    st, win = cfg.compress_stride, cfg.compress_window
    chunk = chunk_sums(k, st)  # exact in float64, whatever the order
    per = win // st
    n_ck = max(0, (t - win) // st + 1)
    tot = np.zeros((b, n_ck, hkv, d), dtype=np.float64)
    for i in range(per):
        tot += chunk[:, i : i + n_ck]
    mean = (tot / win).astype(np.float32)
    ck = bf16_bits_to_f32(f32_to_bf16_bits(mean)).astype(np.float64)
    return np.ascontiguousarray(ck.transpose(0, 2, 1, 3))


def _cis(v: npt.NDArray[np.uint16], w: npt.NDArray[np.float64], gain: float) -> np.ndarray:
    """``[B, Hkv, T]`` float64 eviction score ``gain * softplus(w_h . v / sqrt(D))``."""
    b, t, hkv, d = v.shape
    x = np.empty((b, hkv, t), dtype=np.float64)
    for t0 in range(0, t, _GEN_CHUNK_TOKENS):
        vf = bf16_to_f64(v[:, t0 : t0 + _GEN_CHUNK_TOKENS])
        x[:, :, t0 : t0 + _GEN_CHUNK_TOKENS] = np.einsum("bthd,hd->bht", vf, w)
    return gain * np.logaddexp(0.0, x / math.sqrt(d))


def _block_max(x: npt.NDArray[np.float64], width: int, n_blocks: int) -> npt.NDArray[np.float64]:
    """Max over consecutive groups of ``width`` along the last axis (-inf padded)."""
    pad = n_blocks * width - x.shape[-1]
    if pad > 0:
        x = np.concatenate([x, np.full((*x.shape[:-1], pad), -np.inf)], axis=-1)
    return x[..., : n_blocks * width].reshape(*x.shape[:-1], n_blocks, width).max(axis=-1)


def _top(score: npt.NDArray[np.float64], eligible: npt.NDArray[np.bool_], k: int) -> np.ndarray:
    """Bool mask of the ``k`` best eligible entries per row (ties: lower index first)."""
    out = np.zeros(score.shape, dtype=bool)
    if k <= 0:
        return out
    s = np.where(eligible, score, -np.inf)
    order = np.argsort(-s, axis=-1, kind="stable")[..., :k]
    np.put_along_axis(out, order, True, axis=-1)
    return out & eligible


def _select(
    q_score: npt.NDArray[np.float64],
    cis_blk: npt.NDArray[np.float64],
    n_blocks: int,
    cfg: NosaConfig,
) -> npt.NDArray[np.bool_]:
    """``[B, Hkv, n_blocks]`` selection mask of one step (module docstring, step 3)."""
    shape = q_score.shape[:-1] + (n_blocks,)
    if n_blocks <= cfg.slots:
        return np.ones(shape, dtype=bool)
    forced = np.zeros(n_blocks, dtype=bool)
    forced[: cfg.init_blocks] = True
    if cfg.window_blocks:
        forced[-cfg.window_blocks :] = True
    forced_b = np.broadcast_to(forced, shape)
    rest = cfg.slots - int(forced.sum())
    if cfg.selector == "topk":
        return forced_b | _top(q_score, ~forced_b, rest)
    qa = _top(q_score, ~forced_b, cfg.topk_q_blocks)
    sel = forced_b | qa
    return sel | _top(cis_blk, ~sel, rest - cfg.topk_q_blocks)


def _update_slots(
    slot_map: npt.NDArray[np.int64], sel: npt.NDArray[np.bool_], created: int
) -> tuple[npt.NDArray[np.int64], list[list[tuple[int, int]]], npt.NDArray[np.int64]]:
    """Diff a selection against the slot map (module docstring, step 4).

    Returns:
        The new slot map, per (b, h) (flattened ``b * Hkv + h``) the (block, slot) pairs
        fetched from the host, and ``[B, Hkv]`` miss counts.
    """
    b_, hkv, ns = slot_map.shape
    new = slot_map.copy()
    loads: list[list[tuple[int, int]]] = []
    misses = np.zeros((b_, hkv), dtype=np.int64)
    for b in range(b_):
        for h in range(hkv):
            want = np.flatnonzero(sel[b, h])
            cur = slot_map[b, h]
            keep = np.isin(cur, want) & (cur >= 0)
            free = np.flatnonzero(~keep)
            incoming = want[~np.isin(want, cur[keep])]
            row = np.full(ns, -1, dtype=np.int64)
            row[keep] = cur[keep]
            row[free[: incoming.size]] = incoming
            new[b, h] = row
            pairs = [
                (int(blk), int(s))
                for blk, s in zip(incoming, free[: incoming.size], strict=True)
                if blk != created
            ]
            misses[b, h] = len(pairs)
            loads.append(pairs)
    return new, loads, misses


def _gather_blocks(
    x: npt.NDArray[np.uint16], sel_blocks: npt.NDArray[np.int64], bt: int, t: int
) -> npt.NDArray[np.uint16]:
    """``[B, Tg, Hkv, D]``: the selected blocks of every (b, h) in block order, concatenated
    (only the last selected block, the tail, may be partial)."""
    b_, _, hkv, d = x.shape
    n_sel = sel_blocks.shape[-1]
    tok = sel_blocks[..., None] * bt + np.arange(bt)  # [B, Hkv, n_sel, bt]
    tok = tok.reshape(b_, hkv, n_sel * bt)
    tg = int((tok[0, 0] < t).sum())
    tok = tok[:, :, :tg]
    bi = np.arange(b_)[:, None, None]
    hi = np.arange(hkv)[None, :, None]
    g = x[bi, tok, hi]  # [B, Hkv, Tg, D]
    return np.ascontiguousarray(g.transpose(0, 2, 1, 3))


def _dense_f64(
    q: npt.NDArray[np.uint16], k: npt.NDArray[np.uint16], v: npt.NDArray[np.uint16], g: int
) -> npt.NDArray[np.float64]:
    """Dense softmax attention in float64, streamed over chunks of tokens (``[B, Hq, D]``)."""
    b, t, hkv, d = k.shape
    qf = bf16_bits_to_f32(q).astype(np.float64).reshape(b, hkv, g, d)
    m = np.full((b, hkv, g), -np.inf)
    den = np.zeros((b, hkv, g))
    num = np.zeros((b, hkv, g, d))
    for t0 in range(0, t, _GEN_CHUNK_TOKENS):
        kc = bf16_to_f64(k[:, t0 : t0 + _GEN_CHUNK_TOKENS])
        vc = bf16_to_f64(v[:, t0 : t0 + _GEN_CHUNK_TOKENS])
        s = np.einsum("bhgd,bthd->bhgt", qf, kc) / math.sqrt(d)
        m_new = np.maximum(m, s.max(axis=-1))
        a = np.exp(m - m_new)
        p = np.exp(s - m_new[..., None])
        den = den * a + p.sum(axis=-1)
        num = num * a[..., None] + np.einsum("bhgt,bthd->bhgd", p, vc)
        m = m_new
    return (num / den[..., None]).reshape(b, hkv * g, d)


def nosa_decode(
    shape: DecodeShape,
    *,
    config: NosaConfig | None = None,
    model: NosaModel | None = None,
    steps: int = 32,
    seed: int = 0,
    trace_steps: int = 1,
    n_sms: int = 132,
    error: bool = True,
) -> NosaResult:
    """A seeded NOSA decode run ending at ``shape.context`` tokens (module docstring).

    The run starts with ``shape.context - steps + 1`` tokens and appends one per step; step 0 is
    the cold start (every selected block is fetched) and is left out of the miss statistics.

    Args:
        shape: batch, final context ``T`` and head geometry.
        config: selection and cache parameters (default :class:`NosaConfig`).
        model: the synthetic attention model (default :class:`NosaModel`).
        steps: decode steps (>= 1, < ``T``).
        seed: seed of every random draw.
        trace_steps: last steps the trace covers (1 .. ``steps``).
        n_sms: SMs the attention's split rule fills.
        error: compute the dense float64 attention and the error against it (False: ``dense``
            is empty and ``rel_err`` NaN; the dense pass is the costliest part at long context).

    Returns:
        :class:`NosaResult`.
    """
    cfg = config or NosaConfig()
    mdl = model or NosaModel()
    b_, t_final, hkv, bt = shape.batch, shape.context, shape.kv_heads, cfg.block_tokens
    if isinstance(steps, bool) or not 1 <= steps < t_final:
        raise ValueError(f"steps={steps} must be in [1, context)")
    if not 1 <= trace_steps <= steps:
        raise ValueError(f"trace_steps={trace_steps} must be in [1, steps={steps}]")
    rng = np.random.default_rng(seed)
    cache = _SyntheticCache.draw(rng, shape, cfg, mdl)
    t0 = t_final - steps + 1
    query = _QueryProcess(rng, shape, mdl, cache.centroids, t0, bt)
    slot_map = np.full((b_, hkv, cfg.slots), -1, dtype=np.int64)
    misses = np.zeros((steps, b_, hkv), dtype=np.int64)
    wbs = np.zeros(steps, dtype=bool)
    parts: list[Trace] = []
    q_bits = np.zeros((b_, shape.q_heads, shape.head_dim), dtype=np.uint16)
    sel_blocks = np.zeros((b_, hkv, 0), dtype=np.int64)
    for s in range(steps):
        t = t0 + s
        nb = -(-t // bt)
        if s:
            query.advance(rng, t)
        q_bits = query.bits()
        n_ck = max(0, (t - cfg.compress_window) // cfg.compress_stride + 1)
        q_score = _block_scores(q_bits, cache.compressed_keys[:, :, :n_ck], nb, cfg)
        cis_blk = _block_max(cache.cis[:, :, :t], bt, nb)
        sel = _select(q_score, cis_blk, nb, cfg)
        # the partial tail block lives on the GPU from its first token: never fetched
        slot_map, loads, misses[s] = _update_slots(slot_map, sel, nb - 1)
        wbs[s] = t % bt == 0
        n_sel = int(sel[0, 0].sum())
        sel_blocks = np.nonzero(sel)[2].reshape(b_, hkv, n_sel)
        if s >= steps - trace_steps:
            parts.append(_step_trace(shape, cfg, t, n_ck, loads, slot_map, bool(wbs[s]), n_sms))
    out, dense, err = _attend_selected(
        q_bits, cache.k, cache.v, sel_blocks, shape, cfg, n_sms, error=error
    )
    trace = parts[0]
    for p in parts[1:]:
        trace = trace.concat(p)
    result = NosaResult(
        shape=DecodeShape(b_, t_final, shape.q_heads, hkv, shape.head_dim),
        config=cfg,
        steps=steps,
        selected=sel_blocks,
        slot_map=slot_map,
        misses=misses,
        writebacks=wbs,
        out=out,
        dense=dense,
        rel_err=err,
        trace=trace,
        inputs=DecodeInputs(q_bits, cache.k, cache.v),
    )
    return _with_metrics(result, seed, mdl)


@dataclass(frozen=True)
class _SyntheticCache:
    """The synthetic KV cache of a run at its final context (module docstring).

    Attributes:
        centroids: ``[B, n_blocks, Hkv, D]`` float64 per-block key centroids.
        k: ``[B, T, Hkv, D]`` bf16 keys. v: ``[B, T, Hkv, D]`` bf16 values.
        compressed_keys: ``[B, Hkv, n_ck, D]`` float64 compressed keys.
        cis: ``[B, Hkv, T]`` float64 eviction scores.
    """

    centroids: npt.NDArray[np.float64]
    k: npt.NDArray[np.uint16]
    v: npt.NDArray[np.uint16]
    compressed_keys: npt.NDArray[np.float64]
    cis: npt.NDArray[np.float64]

    @classmethod
    def draw(
        cls, rng: np.random.Generator, shape: DecodeShape, cfg: NosaConfig, mdl: NosaModel
    ) -> _SyntheticCache:
        """Draw the centroids, the eviction projection and the tokens, in that order."""
        b_, t, hkv, d, bt = (
            shape.batch, shape.context, shape.kv_heads, shape.head_dim, cfg.block_tokens,
        )  # fmt: skip
        cent = rng.standard_normal((b_, -(-t // bt), hkv, d), dtype=np.float32) * np.float32(
            mdl.block_spread
        )
        w = rng.standard_normal((hkv, d))
        k, v = _kv_tokens(rng, cent, t, bt, mdl)
        return cls(
            cent.astype(np.float64), k, v, _compressed_keys(k, cfg), _cis(v, w, cfg.cis_gain)
        )


class _QueryProcess:
    """The synthetic query of a run (module docstring): ``focus_gain`` x the mean centroid of
    the focus blocks plus an AR(1) residual; draws from ``rng`` at construction (the first
    focus blocks and residual) and at each :meth:`advance`."""

    def __init__(
        self,
        rng: np.random.Generator,
        shape: DecodeShape,
        mdl: NosaModel,
        centroids: npt.NDArray[np.float64],
        t0: int,
        block_tokens: int,
    ) -> None:
        self.shape, self.mdl, self.centroids, self.bt = shape, mdl, centroids, block_tokens
        b_, n_f = shape.batch, mdl.focus_blocks
        self.focus = rng.integers(0, max(1, (t0 - 1) // block_tokens), size=(b_, n_f))
        self.resid = rng.standard_normal((b_, shape.q_heads, shape.head_dim)) * mdl.query_noise

    def advance(self, rng: np.random.Generator, t: int) -> None:
        """Move to the step at context ``t``: focus switches, then the residual's AR(1) step."""
        mdl, b_, rho = self.mdl, self.shape.batch, self.mdl.query_persistence
        swap = rng.random((b_, mdl.focus_blocks)) < mdl.focus_switch
        draw = rng.integers(0, max(1, (t - 1) // self.bt), size=(b_, mdl.focus_blocks))
        self.focus = np.where(swap, draw, self.focus)
        self.resid = rho * self.resid + math.sqrt(1 - rho * rho) * mdl.query_noise * (
            rng.standard_normal((b_, self.shape.q_heads, self.shape.head_dim))
        )

    def bits(self) -> npt.NDArray[np.uint16]:
        """``[B, Hq, D]`` bf16 query of the current step."""
        b_ = self.shape.batch
        fc = self.centroids[np.arange(b_)[:, None], self.focus].mean(axis=1)  # [B, Hkv, D]
        qf = self.mdl.focus_gain * np.repeat(fc, self.shape.group, axis=1) + self.resid
        return f32_to_bf16_bits(qf.astype(np.float32))


def _block_scores(
    q_bits: npt.NDArray[np.uint16], ck: npt.NDArray[np.float64], nb: int, cfg: NosaConfig
) -> npt.NDArray[np.float64]:
    """``[B, Hkv, nb]`` block scores (module docstring, step 1): the max-pool, over the
    compressed keys ``ck`` (``[B, Hkv, n_ck, D]``) whose window overlaps a block, of the best
    query head's scaled score."""
    b_, hkv, n_ck, d = ck.shape
    q64 = bf16_bits_to_f32(q_bits).astype(np.float64).reshape(b_, hkv, -1, d)
    cs = np.einsum("bhgd,bhnd->bhgn", q64, ck).max(axis=2) * (1.0 / math.sqrt(d))
    per_blk = cfg.block_tokens // cfg.compress_stride
    # windows j overlapping block i: per_blk*i - (win/st - 1) <= j < per_blk*(i+1)
    over = cfg.compress_window // cfg.compress_stride - 1
    padded = np.concatenate(
        [
            np.full((b_, hkv, over), -np.inf),
            cs,
            np.full((b_, hkv, nb * per_blk - n_ck), -np.inf),
        ],
        axis=-1,
    )
    win = np.lib.stride_tricks.sliding_window_view(padded, per_blk + over, axis=-1)
    return win[:, :, ::per_blk][:, :, :nb].max(axis=-1)


def _attend_selected(
    q_bits: npt.NDArray[np.uint16],
    k: npt.NDArray[np.uint16],
    v: npt.NDArray[np.uint16],
    sel_blocks: npt.NDArray[np.int64],
    shape: DecodeShape,
    cfg: NosaConfig,
    n_sms: int,
    *,
    error: bool,
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.float64], float]:
    """Attention of the last step over its selected blocks (module docstring, step 6), and,
    with ``error``, the dense float64 attention and the relative error against it.

    Returns:
        ``[B, Hq, D]`` bf16 output, the dense attention (``[B, Hq, 0]`` without ``error``)
        and the error (NaN without ``error``).
    """
    b_, t, hq, hkv, d = shape.batch, shape.context, shape.q_heads, shape.kv_heads, shape.head_dim
    bt = cfg.block_tokens
    kg = _gather_blocks(k, sel_blocks, bt, t)
    vg = _gather_blocks(v, sel_blocks, bt, t)
    gshape = DecodeShape(b_, kg.shape[1], hq, hkv, d)
    splits = _attn_plan(DecodeShape(b_, t, hq, hkv, d), cfg, n_sms).num_splits
    plan = plan_split_k(gshape, block_n=bt, num_splits=splits)
    out = reduce_partials(split_k_partials(DecodeInputs(q_bits, kg, vg), plan))
    if not error:
        return out, np.zeros((b_, hq, 0)), math.nan
    dense = _dense_f64(q_bits, k, v, shape.group)
    err = float(np.linalg.norm(bf16_bits_to_f32(out) - dense) / np.linalg.norm(dense))
    return out, dense, err


def _with_metrics(r: NosaResult, seed: int, model: NosaModel) -> NosaResult:
    """Put the run's figures in the trace's workload metadata (``metrics``: [value, unit])."""
    cfg = r.config
    row = r.shape.head_dim * 2
    fetch_bytes = (
        r.misses_per_step
        * r.shape.batch
        * r.shape.kv_heads
        * (2 * cfg.block_tokens * row + cfg.block_tokens * 2)
    )
    metrics = {
        "keep_ratio": [r.keep_ratio, "1"],
        "misses_per_step": [r.misses_per_step, "block"],
        "miss_rate": [r.miss_rate, "1"],
        "host_fetch_bytes_per_step": [fetch_bytes, "B"],
    }
    if not math.isnan(r.rel_err):
        metrics["attn_out_rel_err"] = [r.rel_err, "1"]
    meta = dict(r.trace.meta)
    wl = dict(meta.get("workload", {}))
    wl.update(
        kernel="nosa_decode",
        batch=r.shape.batch,
        context=r.shape.context,
        q_heads=r.shape.q_heads,
        kv_heads=r.shape.kv_heads,
        head_dim=r.shape.head_dim,
        kv_layout="[B, T, Hkv, D]",
        dtype="bf16",
        nosa={
            "selector": cfg.selector,
            "fetch": cfg.fetch,
            "slots": cfg.slots,
            "block_tokens": cfg.block_tokens,
            "topk_q_blocks": cfg.topk_q_blocks,
            "init_blocks": cfg.init_blocks,
            "window_blocks": cfg.window_blocks,
            "steps": r.steps,
            "seed": seed,
            "model": model.__dict__,
        },
        metrics=metrics,
    )
    meta["workload"] = wl
    tr = Trace(
        meta, **{k: getattr(r.trace, k) for k in ("compute", "memory", "sparsity", "events")}
    )
    return NosaResult(**{**r.__dict__, "trace": tr})


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
