"""DeltaLLM decode: one token at a time on the Delta-Key cache ([DELTALLM] v1 decode; [OURS]).

For a new token ``t`` the encoder turns ``k_t`` into ``Δ_t`` against the stored memory and
appends it to the delta cache; the full key goes into a ``W``-entry ring buffer (the "partial
key matrix"), the first ``n_sink`` keys are kept as well. Row ``t``'s scores read the ring
buffer and the sinks in the exact region and the incremental delta chain ``Σ q·Δ_s`` elsewhere;
VSSOS then runs with ``P_q = 1`` (``L = G`` lanes) in the same column order as prefill, so the
output row is bit-identical to prefill row ``t`` computed with ``query_block=1``.

Public: :class:`DecodeOptions`, :class:`DecodeState`, :func:`init_decode`,
:func:`append_prompt`, :func:`decode_step`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from ._attention import (
    LANE_LAYOUTS,
    MODES,
    _check_choice,
    _check_int,
    _check_tau,
    _head_scale,
    _lane_scale,
    vector_heads,
)
from ._delta import _check_encoder_args, encode_delta_row
from ._scores import score_regions
from ._vssos import COLUMN_ORDERS, DENOM_MODES, _online_softmax, column_order

__all__ = ["DecodeOptions", "DecodeState", "append_prompt", "decode_step", "init_decode"]


@dataclass(frozen=True)
class DecodeOptions:
    """The scalar options a decode cache runs with (meanings as in ``attention``).

    Attributes:
        mode: ``"fixed"`` or ``"float"``.
        theta: Delta-Key threshold.
        window: exact window ``W``.
        tau: VSSOS skip threshold, log2 units (``math.inf``: never skip).
        delta_mode: ``"memory"`` or ``"naive"``.
        refresh_period: dense key row every ``refresh_period`` tokens (0: off).
        n_sink: leading keys stored dense and scored exactly.
        denom_mode: ``"full"`` or ``"kept"``.
        order: ``"ascending"`` or ``"window_first"``.
        lane_layout: ``"group"`` (the ``G`` query heads share one skip decision) or ``"head"``.
    """

    mode: str
    theta: float
    window: int
    tau: float
    delta_mode: str
    refresh_period: int
    n_sink: int
    denom_mode: str
    order: str
    lane_layout: str = "group"


@dataclass(frozen=True)
class DecodeState:
    """Decode cache of one layer after ``t`` tokens, and the options it runs with.

    Attributes:
        deltas: ``[Hkv, t, d]`` Delta-Key values (zeros where not stored); int32 / float64.
        mask: ``[Hkv, t, d]`` bool bitmask of stored deltas.
        memory: ``[Hkv, d]`` encoder memory ``k̂_{t-1}``.
        prev_key: ``[Hkv, d]`` last raw key (naive form).
        ring_keys: ``[Hkv, W, d]`` full keys, position ``j`` at slot ``j % W``.
        sink_keys: ``[Hkv, n_sink, d]`` the first full keys.
        values: ``[Hkv, t, dv]`` value cache.
        c_head: ``[Hq]`` float64 log2 softmax scale per query head.
        options: the :class:`DecodeOptions`.
    """

    deltas: np.ndarray
    mask: np.ndarray
    memory: np.ndarray
    prev_key: np.ndarray
    ring_keys: np.ndarray
    sink_keys: np.ndarray
    values: np.ndarray
    c_head: np.ndarray
    options: DecodeOptions

    @property
    def n_tokens(self) -> int:
        """Tokens decoded so far."""
        return int(self.deltas.shape[1])


def init_decode(
    n_q_heads: int,
    n_kv_heads: int,
    head_dim: int,
    value_dim: int,
    *,
    theta: float,
    window: int,
    tau: float,
    mode: str = "fixed",
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
    denom_mode: str = "full",
    order: str = "ascending",
    lane_layout: str = "group",
) -> DecodeState:
    """An empty decode cache; the options mean what they mean in :func:`~._attention.attention`.

    Args:
        n_q_heads: ``Hq``, a multiple of ``n_kv_heads``.
        n_kv_heads: ``Hkv``.
        head_dim: ``d``.
        value_dim: ``dv``.
        theta, window, tau, mode, q_scale, k_scale, delta_mode, refresh_period, n_sink,
            denom_mode, order, lane_layout: as in :func:`~._attention.attention`.

    Returns:
        A :class:`DecodeState` holding no tokens.

    Raises:
        ValueError: a bad option or head count.
    """
    for name, val in (
        ("n_q_heads", n_q_heads),
        ("n_kv_heads", n_kv_heads),
        ("head_dim", head_dim),
        ("value_dim", value_dim),
        ("window", window),
    ):
        _check_int(name, val, 1)
    if n_q_heads % n_kv_heads:
        raise ValueError(f"Hq={n_q_heads} is not a multiple of Hkv={n_kv_heads}")
    _check_choice("mode", mode, MODES)
    _check_choice("denom_mode", denom_mode, DENOM_MODES)
    _check_choice("order", order, COLUMN_ORDERS)
    _check_choice("lane_layout", lane_layout, LANE_LAYOUTS)
    _check_encoder_args(theta, delta_mode, refresh_period, n_sink)
    if mode == "fixed" and int(theta) != theta:
        raise TypeError(f"theta: must be an integer in fixed mode, got {theta!r}")
    _check_tau(tau)
    dt = np.int32 if mode == "fixed" else np.float64
    c_head = (
        _head_scale("q_scale", q_scale, n_q_heads)
        * np.repeat(_head_scale("k_scale", k_scale, n_kv_heads), n_q_heads // n_kv_heads)
        * math.log2(math.e)
        / math.sqrt(head_dim)
    )
    opts = DecodeOptions(
        mode=mode,
        theta=theta,
        window=int(window),
        tau=float(tau),
        delta_mode=delta_mode,
        refresh_period=int(refresh_period),
        n_sink=int(n_sink),
        denom_mode=denom_mode,
        order=order,
        lane_layout=lane_layout,
    )
    h, d = n_kv_heads, head_dim
    return DecodeState(
        deltas=np.zeros((h, 0, d), dtype=dt),
        mask=np.zeros((h, 0, d), dtype=bool),
        memory=np.zeros((h, d), dtype=dt),
        prev_key=np.zeros((h, d), dtype=dt),
        ring_keys=np.zeros((h, int(window), d), dtype=dt),
        sink_keys=np.zeros((h, int(n_sink), d), dtype=dt),
        values=np.zeros((h, 0, value_dim), dtype=np.int8 if mode == "fixed" else np.float64),
        c_head=c_head,
        options=opts,
    )


def _check_token(state: DecodeState, name: str, x: np.ndarray, shape: tuple[int, ...]) -> None:
    """Raise TypeError/ValueError for one decode input of the wrong shape, dtype or value."""
    if x.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {x.shape}")
    if state.options.mode == "fixed":
        if x.dtype != np.int8:
            raise TypeError(f"{name}: fixed mode needs int8, got dtype {x.dtype}")
    elif not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name}: float mode needs a float dtype, got {x.dtype}")
    elif not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: holds NaN or Inf")


def _append_token(state: DecodeState, k: np.ndarray, v: np.ndarray) -> DecodeState:
    """Encode key ``k`` ``[Hkv, d]`` as token ``t = state.n_tokens`` and store it with ``v``."""
    o, t = state.options, state.n_tokens
    delta, keep, memory = encode_delta_row(
        k,
        state.memory,
        state.prev_key,
        t=t,
        theta=o.theta,
        delta_mode=o.delta_mode,
        refresh_period=o.refresh_period,
        n_sink=o.n_sink,
    )
    kf = k.astype(state.memory.dtype)
    ring, sinks = state.ring_keys.copy(), state.sink_keys.copy()
    ring[:, t % o.window] = kf
    if t < o.n_sink:
        sinks[:, t] = kf
    return replace(
        state,
        deltas=np.concatenate([state.deltas, delta[:, None]], axis=1),
        mask=np.concatenate([state.mask, keep[:, None]], axis=1),
        memory=memory,
        prev_key=kf,
        ring_keys=ring,
        sink_keys=sinks,
        values=np.concatenate([state.values, v.astype(state.values.dtype)[:, None]], axis=1),
    )


def append_prompt(state: DecodeState, k: npt.ArrayLike, v: npt.ArrayLike) -> DecodeState:
    """Fill the cache with a prompt's keys and values before decoding.

    The prompt's own outputs come from :func:`~._attention.attention`; this only builds the
    cache state that prefill leaves behind (deltas, memory, ring buffer, sinks, values), so
    decoding continues exactly as if every prompt token had been decoded.

    Args:
        state: the cache after ``t`` tokens (usually empty).
        k: ``[Hkv, T, d]`` post-RoPE keys (int8 fixed / float float mode).
        v: ``[Hkv, T, dv]`` values.

    Returns:
        The cache after ``t + T`` tokens.

    Raises:
        TypeError, ValueError: wrong dtype, shape or values.
    """
    ka, va = np.asarray(k), np.asarray(v)
    hkv, d = state.memory.shape
    if ka.ndim != 3 or va.ndim != 3 or ka.shape[1] != va.shape[1]:
        raise ValueError(f"k, v: expected [Hkv, T, d] and [Hkv, T, dv], got {ka.shape}, {va.shape}")
    for t in range(ka.shape[1]):
        _check_token(state, "k", ka[:, t], (hkv, d))
        _check_token(state, "v", va[:, t], (hkv, state.values.shape[2]))
        state = _append_token(state, ka[:, t], va[:, t])
    return state


def decode_step(
    state: DecodeState, q: npt.ArrayLike, k: npt.ArrayLike, v: npt.ArrayLike
) -> tuple[np.ndarray, DecodeState]:
    """Decode one token: encode its key, score it against the cache, run VSSOS with ``P_q = 1``.

    Args:
        state: the cache after ``t`` tokens.
        q: ``[Hq, d]`` query of token ``t`` (int8 fixed / float float mode).
        k: ``[Hkv, d]`` key of token ``t``.
        v: ``[Hkv, dv]`` value of token ``t``.

    Returns:
        ``(y, new_state)``: ``y`` ``[Hq, dv]`` (int16 Q7.8 fixed / float64 float) and the cache
        after ``t + 1`` tokens.
    """
    qa, ka, va = np.asarray(q), np.asarray(k), np.asarray(v)
    hkv, d = state.memory.shape
    _check_token(state, "q", qa, (state.c_head.shape[0], d))
    _check_token(state, "k", ka, (hkv, d))
    _check_token(state, "v", va, (hkv, state.values.shape[2]))
    new = _append_token(state, ka, va)
    o, t, hq = state.options, state.n_tokens, qa.shape[0]
    w, n_sink, ring, sinks = o.window, o.n_sink, new.ring_keys, new.sink_keys
    dt = np.int64 if o.mode == "fixed" else np.float64
    g = hq // hkv
    q64 = qa.astype(dt).reshape(hkv, g, -1)
    stored = np.where(new.mask, new.deltas, 0).astype(dt)
    s = np.cumsum(np.einsum("hgd,hjd->hgj", q64, stored), axis=2)  # delta chain A(j) = q·k̂_j
    _, exact = score_regions([t], t + 1, window=w, n_sink=n_sink)
    for j in np.flatnonzero(exact[0]):  # exact keys come from the sinks and the ring buffer
        kj = sinks[:, j] if j < n_sink else ring[:, j % w]
        s[:, :, j] = np.einsum("hgd,hd->hg", q64, kj.astype(dt))
    hv = vector_heads(o.lane_layout, g)
    nv = hq // hv  # vectors: one per KV group ("group") or per query head ("head")
    s = s.reshape(nv, hv, -1)
    order = column_order([t], t + 1, window=w, n_sink=n_sink, order=o.order)[None].repeat(nv, 0)
    scale = _lane_scale(o.mode, state.c_head, nv, 1, 1)
    res = _online_softmax(
        s,
        np.ones(s.shape, dtype=bool),
        order,
        new.values,
        np.arange(nv) * hv // g,
        scale,
        o.tau,
        o.denom_mode,
    )
    return res.output.reshape(hq, -1), new
