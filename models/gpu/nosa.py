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
with ``seed``, in a fixed order, so a run is bit-exact. :func:`nosa_replay` runs the same
selection over a real model's recorded queries and keys (:mod:`._nosa_real`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace

from ._bf16 import bf16_bits_to_f32, f32_to_bf16_bits
from ._nosa_config import NosaConfig
from ._nosa_fast import bf16_to_f64, chunk_sums, keys_bf16, lookup_bf16
from ._nosa_trace import _attn_plan, _step_trace
from ._splitk import (
    DecodeInputs,
    DecodeShape,
    plan_split_k,
    reduce_partials,
    split_k_partials,
)

__all__ = [
    "NosaConfig",
    "NosaModel",
    "NosaResult",
    "nosa_decode",
]


_GEN_CHUNK_TOKENS = 8192  # tokens drawn per generator call (fixed: part of the seeded order)


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
