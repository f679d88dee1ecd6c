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
from ._nosa_fast import bf16_to_f64, chunk_sums, keys_bf16, lookup_bf16
from ._splitk import (
    DecodeInputs,
    DecodeShape,
    plan_split_k,
    reduce_partials,
    split_k_partials,
)
from ._trace import split_k_trace

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
        for name in ("block_tokens", "slots", "compress_window", "compress_stride"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"NosaConfig.{name}={v!r} must be a positive integer")
        for name in ("topk_q_blocks", "init_blocks", "window_blocks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"NosaConfig.{name}={v!r} must be a non-negative integer")
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
    b_, t_final, hq, hkv, d = (
        shape.batch,
        shape.context,
        shape.q_heads,
        shape.kv_heads,
        shape.head_dim,
    )
    g, bt = shape.group, cfg.block_tokens
    if isinstance(steps, bool) or not 1 <= steps < t_final:
        raise ValueError(f"steps={steps} must be in [1, context)")
    if not 1 <= trace_steps <= steps:
        raise ValueError(f"trace_steps={trace_steps} must be in [1, steps={steps}]")
    rng = np.random.default_rng(seed)
    nb_final = -(-t_final // bt)
    cent = rng.standard_normal((b_, nb_final, hkv, d), dtype=np.float32) * np.float32(
        mdl.block_spread
    )
    w = rng.standard_normal((hkv, d))
    k, v = _kv_tokens(rng, cent, t_final, bt, mdl)
    ck_all = _compressed_keys(k, cfg)
    cis_all = _cis(v, w, cfg.cis_gain)
    cent64 = cent.astype(np.float64)
    t0 = t_final - steps + 1
    focus = rng.integers(0, max(1, (t0 - 1) // bt), size=(b_, mdl.focus_blocks))
    resid = rng.standard_normal((b_, hq, d)) * mdl.query_noise
    slot_map = np.full((b_, hkv, cfg.slots), -1, dtype=np.int64)
    misses = np.zeros((steps, b_, hkv), dtype=np.int64)
    wbs = np.zeros(steps, dtype=bool)
    parts: list[Trace] = []
    scale = 1.0 / math.sqrt(d)
    rho = mdl.query_persistence
    q_bits = np.zeros((b_, hq, d), dtype=np.uint16)
    sel_blocks = np.zeros((b_, hkv, 0), dtype=np.int64)
    for s in range(steps):
        t = t0 + s
        nb = -(-t // bt)
        if s:
            swap = rng.random((b_, mdl.focus_blocks)) < mdl.focus_switch
            draw = rng.integers(0, max(1, (t - 1) // bt), size=(b_, mdl.focus_blocks))
            focus = np.where(swap, draw, focus)
            resid = rho * resid + math.sqrt(1 - rho * rho) * mdl.query_noise * (
                rng.standard_normal((b_, hq, d))
            )
        fc = cent64[np.arange(b_)[:, None], focus].mean(axis=1)  # [B, Hkv, D]
        qf = mdl.focus_gain * np.repeat(fc, g, axis=1) + resid
        q_bits = f32_to_bf16_bits(qf.astype(np.float32))
        q64 = bf16_bits_to_f32(q_bits).astype(np.float64).reshape(b_, hkv, g, d)
        n_ck = max(0, (t - cfg.compress_window) // cfg.compress_stride + 1)
        cs = np.einsum("bhgd,bhnd->bhgn", q64, ck_all[:, :, :n_ck]).max(axis=2) * scale
        per_blk = bt // cfg.compress_stride
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
        q_score = win[:, :, ::per_blk][:, :, :nb].max(axis=-1)
        cis_blk = _block_max(cis_all[:, :, :t], bt, nb)
        sel = _select(q_score, cis_blk, nb, cfg)
        # the partial tail block lives on the GPU from its first token: never fetched
        slot_map, loads, misses[s] = _update_slots(slot_map, sel, nb - 1)
        wbs[s] = t % bt == 0
        n_sel = int(sel[0, 0].sum())
        sel_blocks = np.nonzero(sel)[2].reshape(b_, hkv, n_sel)
        if s >= steps - trace_steps:
            parts.append(_step_trace(shape, cfg, t, n_ck, loads, slot_map, bool(wbs[s]), n_sms))
    step_shape = DecodeShape(b_, t_final, hq, hkv, d)
    kg = _gather_blocks(k, sel_blocks, bt, t_final)
    vg = _gather_blocks(v, sel_blocks, bt, t_final)
    gshape = DecodeShape(b_, kg.shape[1], hq, hkv, d)
    splits = _attn_plan(DecodeShape(b_, t_final, hq, hkv, d), cfg, n_sms).num_splits
    plan = plan_split_k(gshape, block_n=bt, num_splits=splits)
    out = reduce_partials(split_k_partials(DecodeInputs(q_bits, kg, vg), plan))
    if error:
        dense = _dense_f64(q_bits, k, v, g)
        err = float(np.linalg.norm(bf16_bits_to_f32(out) - dense) / np.linalg.norm(dense))
    else:
        dense, err = np.zeros((b_, hq, 0)), math.nan
    trace = parts[0]
    for p in parts[1:]:
        trace = trace.concat(p)
    result = NosaResult(
        shape=step_shape,
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
        inputs=DecodeInputs(q_bits, k, v),
    )
    return _with_metrics(result, seed, mdl)


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


def _attn_tensors(tb: TraceBuilder, shape: DecodeShape, plan: Any) -> None:
    """Allocate the split-K trace's tensors first, in its order and sizes, so that the
    attention part (:func:`split_k_trace`) concatenates onto the same placement."""
    b_, t_, hq, hkv, d = shape.batch, shape.context, shape.q_heads, shape.kv_heads, shape.head_dim
    row, ns = d * 2, plan.num_splits
    tb.allocate("Q", space="HBM", nbytes=b_ * hq * row)
    tb.allocate("K", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("V", space="HBM", nbytes=b_ * t_ * hkv * row)
    tb.allocate("O_partial", space="HBM", nbytes=b_ * hq * ns * d * 4)
    tb.allocate("ML", space="HBM", nbytes=b_ * hq * ns * 2 * 4)
    tb.allocate("O", space="HBM", nbytes=b_ * hq * row)


def _attn_plan(shape: DecodeShape, cfg: NosaConfig, n_sms: int) -> Any:
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
    """Trace of one step at context ``t``: score, select/diff, fetch, attention, write-back.

    The GPU slot cache is the attention's ``K`` / ``V`` tensors, token-major over
    ``slots x block_tokens`` positions (slot ``s`` holds positions ``s * block_tokens ..``);
    the host copy ``K_host`` / ``V_host`` is ``[B, T_max, Hkv, D]`` token-major with
    ``T_max`` = the step's context rounded up to a block.
    """
    b_, hq, hkv, d = shape.batch, shape.q_heads, shape.kv_heads, shape.head_dim
    g, bt, row = shape.group, cfg.block_tokens, d * 2
    cap = cfg.slots * bt
    plan = _attn_plan(shape, cfg, n_sms)
    ashape = plan.shape
    nb = -(-t // bt)
    # sizes of the final context, so that the steps of one run share one tensor map
    nb_max = -(-shape.context // bt)
    t_host = nb_max * bt
    n_ck_max = max(1, (shape.context - cfg.compress_window) // cfg.compress_stride + 1)
    tb = TraceBuilder(producer=PRODUCER, workload={"context": t, "batch": b_})
    _attn_tensors(tb, ashape, plan)
    tb.allocate("CK", space="HBM", nbytes=b_ * hkv * n_ck_max * row)
    tb.allocate("block_score", space="HBM", nbytes=b_ * hkv * nb_max * 4)
    tb.allocate("cis_block", space="HBM", nbytes=b_ * hkv * nb_max * 4)
    tb.allocate("slot_map", space="HBM", nbytes=b_ * hkv * cfg.slots * 4)
    tb.allocate("load_list", space="HBM", nbytes=b_ * hkv * cfg.slots * 8)
    tb.allocate("cis_slots", space="HBM", nbytes=b_ * hkv * cap * 2)
    tb.allocate("K_host", space="HOST", nbytes=b_ * t_host * hkv * row)
    tb.allocate("V_host", space="HOST", nbytes=b_ * t_host * hkv * row)
    tb.allocate("cis_host", space="HOST", nbytes=b_ * hkv * t_host * 2)

    heads = np.arange(b_ * hkv, dtype=np.int64)
    hb, hh = heads // hkv, heads % hkv
    # 1. score kernel: append the new token's K/V row to its slot, read q, compressed keys
    tail_slot = np.array(
        [int(np.flatnonzero(slot_map[b, h] == nb - 1)[0]) for b, h in zip(hb, hh, strict=True)]
    )
    tail_pos = tail_slot * bt + (t - 1) % bt
    with tb.kernel(
        "nosa_score",
        ctas=b_ * hkv,
        threads_per_cta=128,
        smem_bytes_per_cta=16 * row,
        regs_per_thread=64,
    ) as k0:
        for name in ("K", "V"):
            tb.memory_many(
                kernel=k0,
                cta=heads,
                phase="append",
                tensor=name,
                space="HBM",
                rw="w",
                addr=((hb * cap + tail_pos) * hkv + hh) * row,
                nbytes=row,
            )
        tb.memory_many(
            kernel=k0,
            cta=heads,
            phase="load_q",
            tensor="Q",
            space="HBM",
            rw="r",
            addr=(hb * hq + hh * g) * row,
            nbytes=g * row,
        )
        if n_ck:
            rd = tb.memory_many(
                kernel=k0,
                cta=heads,
                phase="load_ck",
                tensor="CK",
                space="HBM",
                rw="r",
                addr=heads * n_ck_max * row,
                nbytes=n_ck * row,
            )
            tb.compute_many(
                kernel=k0,
                cta=heads,
                op="gemm",
                unit="tensor_core",
                m=16,
                n=n_ck,
                k=d,
                fmt_a="bf16",
                fmt_b="bf16",
                dep=rd,
            )
        tb.memory_many(
            kernel=k0,
            cta=heads,
            phase="write_score",
            tensor="block_score",
            space="HBM",
            rw="w",
            addr=heads * nb_max * 4,
            nbytes=nb * 4,
        )
    # write-back of a tail block the append just filled, on copy stream 2 (overlaps the rest)
    if writeback:
        ready = tb.event("record", stream=0)
        tb.event("wait", stream=2, dep=ready)
        dev = ((hb * cap + tail_slot * bt) * hkv + hh) * row
        host = ((hb * t_host + (nb - 1) * bt) * hkv + hh) * row
        with tb.kernel("memcpy_d2h_nosa_tail", stream=2) as kw:
            for src, dst in (("K", "K_host"), ("V", "V_host")):
                r = tb.memory_many(
                    kernel=kw,
                    cta=heads,
                    phase="writeback",
                    tensor=src,
                    space="HBM",
                    rw="r",
                    addr=dev,
                    nbytes=row,
                    stride=hkv * row,
                    count=bt,
                    stream=2,
                )
                tb.memory_many(
                    kernel=kw,
                    cta=heads,
                    phase="writeback",
                    tensor=dst,
                    space="HOST",
                    rw="w",
                    addr=host,
                    nbytes=row,
                    stride=hkv * row,
                    count=bt,
                    stream=2,
                    dep=r,
                )
    # 2. selection and slot-map diff
    with tb.kernel("nosa_select", ctas=b_ * hkv, threads_per_cta=256, regs_per_thread=32) as k1:
        for name in ("block_score", "cis_block"):
            tb.memory_many(
                kernel=k1,
                cta=heads,
                phase="load_score",
                tensor=name,
                space="HBM",
                rw="r",
                addr=heads * nb_max * 4,
                nbytes=nb * 4,
            )
        tb.compute_many(
            kernel=k1, cta=heads, op="topk", unit="cuda_core", m=1, n=nb, k=0, fmt_a="fp32"
        )
        for rw in ("r", "w"):  # the slot map is read, diffed against the selection, rewritten
            tb.memory_many(
                kernel=k1,
                cta=heads,
                phase="slot_map",
                tensor="slot_map",
                space="HBM",
                rw=rw,
                addr=heads * cfg.slots * 4,
                nbytes=cfg.slots * 4,
            )
        tb.memory_many(
            kernel=k1,
            cta=heads,
            phase="load_list",
            tensor="load_list",
            space="HBM",
            rw="w",
            addr=heads * cfg.slots * 8,
            nbytes=cfg.slots * 8,
        )
    # 3. fetch of the misses
    fl = [(i, blk, s) for i, pairs in enumerate(loads) for blk, s in pairs]
    if fl:
        fi = np.array([x[0] for x in fl], dtype=np.int64)
        fblk = np.array([x[1] for x in fl], dtype=np.int64)
        fslot = np.array([x[2] for x in fl], dtype=np.int64)
        fb, fh = fi // hkv, fi % hkv
        host_addr = ((fb * t_host + fblk * bt) * hkv + fh) * row
        dev_addr = ((fb * cap + fslot * bt) * hkv + fh) * row
        cis_h = (fi * t_host + fblk * bt) * 2
        cis_d = (fi * cap + fslot * bt) * 2

        def fetch_records(kid: int, cta: Any, stream: int) -> None:
            for src, dst in (("K_host", "K"), ("V_host", "V")):
                r = tb.memory_many(
                    kernel=kid,
                    cta=cta,
                    phase="fetch",
                    tensor=src,
                    space="HOST",
                    rw="r",
                    addr=host_addr,
                    nbytes=row,
                    stride=hkv * row,
                    count=bt,
                    stream=stream,
                )
                tb.memory_many(
                    kernel=kid,
                    cta=cta,
                    phase="fetch",
                    tensor=dst,
                    space="HBM",
                    rw="w",
                    addr=dev_addr,
                    nbytes=row,
                    stride=hkv * row,
                    count=bt,
                    dep=r,
                    stream=stream,
                )
            r = tb.memory_many(
                kernel=kid,
                cta=cta,
                phase="fetch",
                tensor="cis_host",
                space="HOST",
                rw="r",
                addr=cis_h,
                nbytes=bt * 2,
                stream=stream,
            )
            tb.memory_many(
                kernel=kid,
                cta=cta,
                phase="fetch",
                tensor="cis_slots",
                space="HBM",
                rw="w",
                addr=cis_d,
                nbytes=bt * 2,
                dep=r,
                stream=stream,
            )

        if cfg.fetch == "zero_copy":
            with tb.kernel(
                "nosa_fetch_zero_copy", ctas=len(fl), threads_per_cta=256, regs_per_thread=32
            ) as k2:
                fetch_records(k2, np.arange(len(fl), dtype=np.int64), 0)
        else:
            ready = tb.event("record", stream=0)
            tb.event("wait", stream=1, dep=ready)
            for j in range(len(fl)):
                with tb.kernel("memcpy_h2d_nosa_block", stream=1) as kc:
                    sl = slice(j, j + 1)
                    for src, dst in (("K_host", "K"), ("V_host", "V")):
                        rc = tb.memory(
                            kernel=kc,
                            space="HOST",
                            rw="r",
                            tensor=src,
                            addr=int(host_addr[sl][0]),
                            nbytes=row,
                            stride=hkv * row,
                            count=bt,
                            stream=1,
                        )
                        tb.memory(
                            kernel=kc,
                            space="HBM",
                            rw="w",
                            tensor=dst,
                            addr=int(dev_addr[sl][0]),
                            nbytes=row,
                            stride=hkv * row,
                            count=bt,
                            stream=1,
                            dep=rc,
                        )
                    rc = tb.memory(
                        kernel=kc,
                        space="HOST",
                        rw="r",
                        tensor="cis_host",
                        addr=int(cis_h[j]),
                        nbytes=bt * 2,
                        stream=1,
                    )
                    tb.memory(
                        kernel=kc,
                        space="HBM",
                        rw="w",
                        tensor="cis_slots",
                        addr=int(cis_d[j]),
                        nbytes=bt * 2,
                        stream=1,
                        dep=rc,
                    )
            done = tb.event("record", stream=1)
            tb.event("wait", stream=0, dep=done)
    pre = tb.build()
    # attention over the occupied slots, in slot order (tile j of the cache = slot j)
    keep = np.ascontiguousarray(slot_map >= 0)
    attn = split_k_trace(
        plan, tile_keep=keep, producer=PRODUCER, workload={"context": t, "batch": b_}
    )
    return pre.concat(attn)
