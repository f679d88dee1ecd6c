"""DeltaLLM prefill attention: Delta-Key encoding, hybrid scores and VSSOS ([DELTALLM]).

Public: :func:`attention`, :class:`AttentionResult`, :class:`AttentionStats`. Internal helpers
validate the inputs and move ``[Hq, T, ...]`` arrays to and from VSSOS lanes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._delta import DeltaKeys, encode_delta_keys
from ._fixed import log2_scale
from ._scores import DELTA_EVALS, hybrid_scores
from ._vssos import COLUMN_ORDERS, DENOM_MODES, _online_softmax, column_order

__all__ = [
    "LANE_LAYOUTS",
    "MODES",
    "AttentionResult",
    "AttentionStats",
    "attention",
    "vector_heads",
]

#: Valid values of ``mode``.
MODES = ("fixed", "float")
#: Valid values of ``lane_layout``: ``"group"`` puts the ``G`` query heads of a KV group and
#: ``P_q`` query tokens in one VSSOS vector (``L = G·P_q`` lanes); ``"head"`` puts ``P_q``
#: query tokens of one query head in a vector (``L = P_q``). [OURS] both.
LANE_LAYOUTS = ("group", "head")


def vector_heads(lane_layout: str, group: int) -> int:
    """Query heads per VSSOS vector: ``G`` for the ``"group"`` layout, 1 for ``"head"``.

    Args:
        lane_layout: one of :data:`LANE_LAYOUTS`.
        group: ``G``, query heads per KV head.

    Returns:
        The heads per vector.

    Raises:
        ValueError: an unknown layout.
    """
    _check_choice("lane_layout", lane_layout, LANE_LAYOUTS)
    return int(group) if lane_layout == "group" else 1


@dataclass(frozen=True)
class AttentionStats:
    """Sparsity counts of one :func:`attention` call (micro-averages over heads and tokens).

    Attributes:
        delta_sparsity: ``ρ_K = 1 - nnz(Δ_1..T-1) / ((T-1)·Hkv·d)``.
        fine_sparsity: ``ρ_fine``, fraction of valid (lane, column) elements with ``E >= τ``.
        structured_sparsity: ``ρ_S``, fraction of valid elements inside skipped columns.
        skipped_columns: (vector, column) steps skipped.
        visited_columns: (vector, column) steps with at least one valid lane.
        valid_elements: causally valid (query head, query, key) elements.
        fine_elements: valid elements with ``E >= τ``.
        skipped_elements: valid elements inside skipped columns (PV MACs saved / d).
    """

    delta_sparsity: float
    fine_sparsity: float
    structured_sparsity: float
    skipped_columns: int
    visited_columns: int
    valid_elements: int
    fine_elements: int
    skipped_elements: int


@dataclass(frozen=True)
class AttentionResult:
    """Output and by-products of :func:`attention`.

    Attributes:
        output: ``[Hq, T, d]``; fixed mode int16 Q7.8 in INT8-v units (real value
            ``output · 2^-8 · s_v``), float mode float64.
        scores: ``[Hq, T, T]`` hybrid scores (int64 / float64, 0 where masked).
        valid: ``[T, T]`` bool, causally valid pairs.
        exact: ``[T, T]`` bool, pairs scored with the full key.
        skipped: ``[Hq, T, T]`` bool, valid elements whose column was skipped.
        fine: ``[Hq, T, T]`` bool, valid elements with ``E >= τ`` at their step.
        delta_keys: the Delta-Key cache of ``k``.
        stats: the :class:`AttentionStats`.
    """

    output: np.ndarray
    scores: np.ndarray
    valid: np.ndarray
    exact: np.ndarray
    skipped: np.ndarray
    fine: np.ndarray
    delta_keys: DeltaKeys
    stats: AttentionStats


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; valid: {', '.join(choices)}")


def _check_int(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")


def _check_tau(tau: float) -> None:
    """Raise ValueError unless ``tau`` is a real number ``>= 1/256`` or ``math.inf``."""
    ok = isinstance(tau, (int, float, np.integer, np.floating)) and not isinstance(tau, bool)
    if not (ok and not math.isnan(tau) and tau >= 1.0 / 256):
        raise ValueError(f"tau: must be a number >= 1/256 (log2 units) or math.inf, got {tau!r}")


def _check_tensors(q: np.ndarray, k: np.ndarray, v: np.ndarray, mode: str) -> None:
    """Raise ValueError/TypeError for bad shapes, dtypes or values."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != 3:
            raise ValueError(f"{name}: expected 3 dims [H, T, d], got shape {x.shape}")
        if x.size == 0:
            raise ValueError(f"{name}: empty array of shape {x.shape}")
        if mode == "fixed" and x.dtype != np.int8:
            raise TypeError(f"{name}: fixed mode needs int8, got dtype {x.dtype}")
        if mode == "float":
            if not np.issubdtype(x.dtype, np.floating):
                raise TypeError(f"{name}: float mode needs a float dtype, got {x.dtype}")
            if not np.all(np.isfinite(x)):
                raise ValueError(f"{name}: holds NaN or Inf")
    if k.shape[:2] != v.shape[:2] or q.shape[1:] != k.shape[1:]:
        raise ValueError(
            f"shape mismatch: q {q.shape}, k {k.shape}, v {v.shape}; need q "
            "[Hq, T, d], k [Hkv, T, d], v [Hkv, T, dv]"
        )
    if q.shape[0] % k.shape[0]:
        raise ValueError(f"Hq={q.shape[0]} is not a multiple of Hkv={k.shape[0]}")


def _head_scale(name: str, value: npt.ArrayLike, n_heads: int) -> np.ndarray:
    """Broadcast a scalar or ``[n_heads]`` scale to float64 ``[n_heads]``; must be > 0, finite."""
    a = np.asarray(value, dtype=np.float64)
    if a.ndim > 1 or (a.ndim == 1 and a.shape[0] != n_heads):
        raise ValueError(f"{name}: expected a scalar or shape [{n_heads}], got shape {a.shape}")
    a = np.broadcast_to(a, (n_heads,)).copy()
    if not np.all(np.isfinite(a) & (a > 0)):
        raise ValueError(f"{name}: scales must be positive and finite, got {a}")
    return a


def _to_lanes(x: np.ndarray, n_kv: int, block: int) -> np.ndarray:
    """``[Hq, T, ...]`` → ``[n_kv·nb, (Hq/n_kv)·P_q, ...]`` (query tokens padded with zeros to
    nb·P_q). ``n_kv`` is the number of vector groups: ``Hkv`` for the ``"group"`` lane layout,
    ``Hq`` for ``"head"``."""
    hq, t_n = x.shape[:2]
    nb = -(-t_n // block)
    pad = np.zeros((hq, nb * block - t_n, *x.shape[2:]), dtype=x.dtype)
    y = np.concatenate([x, pad], axis=1).reshape(n_kv, hq // n_kv, nb, block, *x.shape[2:])
    y = np.moveaxis(y, 2, 1)
    return y.reshape(n_kv * nb, hq // n_kv * block, *x.shape[2:])


def _from_lanes(y: np.ndarray, n_q: int, n_kv: int, t_n: int) -> np.ndarray:
    """Inverse of :func:`_to_lanes`, dropping the padding tokens."""
    nb, g = y.shape[0] // n_kv, n_q // n_kv
    z = y.reshape(n_kv, nb, g, y.shape[1] // g, *y.shape[2:])
    z = np.moveaxis(z, 1, 2).reshape(n_q, nb * (y.shape[1] // g), *y.shape[2:])
    return z[:, :t_n]


def _lane_scale(mode: str, c_head: np.ndarray, n_kv: int, nb: int, block: int):
    """Per-lane log2 scale: ``(C, sh)`` int64 ``[B, L]`` (fixed) or float64 ``[B, L]``."""

    def lane(a: np.ndarray) -> np.ndarray:
        # lane g·P_q + p reads head g's value; the nb vectors of one KV head are contiguous
        return np.repeat(np.repeat(a.reshape(n_kv, -1), block, axis=1), nb, axis=0)

    if mode == "float":
        return lane(c_head)
    enc = [log2_scale(float(c)) for c in c_head]
    return lane(np.array([m for m, _ in enc], dtype=np.int64)), lane(
        np.array([s for _, s in enc], dtype=np.int64)
    )


def _check_options(opts: dict[str, Any]) -> None:
    """Raise ValueError for a bad scalar option of :func:`attention`."""
    _check_choice("mode", opts["mode"], MODES)
    _check_choice("denom_mode", opts["denom_mode"], DENOM_MODES)
    _check_choice("order", opts["order"], COLUMN_ORDERS)
    _check_choice("delta_eval", opts["delta_eval"], DELTA_EVALS)
    _check_int("window", opts["window"], 1)
    _check_int("query_block", opts["query_block"], 1)
    _check_choice("lane_layout", opts["lane_layout"], LANE_LAYOUTS)
    _check_tau(opts["tau"])


def _stats(
    dk: DeltaKeys,
    valid: np.ndarray,
    skipped: np.ndarray,
    fine: np.ndarray,
    visited_cols: np.ndarray,
    skipped_cols: np.ndarray,
) -> AttentionStats:
    """Collect the sparsity counts; element masks are ``[Hq, T, T]``, column flags ``[B, T]``."""
    n_valid = int(np.count_nonzero(valid)) * skipped.shape[0]
    n_fine, n_skip = int(np.count_nonzero(fine)), int(np.count_nonzero(skipped))
    return AttentionStats(
        delta_sparsity=dk.sparsity,
        fine_sparsity=n_fine / n_valid,
        structured_sparsity=n_skip / n_valid,
        skipped_columns=int(np.count_nonzero(skipped_cols & visited_cols)),
        visited_columns=int(np.count_nonzero(visited_cols)),
        valid_elements=n_valid,
        fine_elements=n_fine,
        skipped_elements=n_skip,
    )


def _run_vectors(
    s: np.ndarray,
    valid_full: np.ndarray,
    orders: np.ndarray,
    va: np.ndarray,
    c_head: np.ndarray,
    hkv: int,
    block: int,
    mode: str,
    tau: float,
    denom_mode: str,
    lane_layout: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """VSSOS over the layout's vectors: ``(output, skipped, fine, kernel result)``, the element
    masks ``[Hq, T, T]`` restricted to valid elements."""
    hq, t_n = s.shape[:2]
    nb = -(-t_n // block)
    hv = vector_heads(lane_layout, hq // hkv)
    nv = hq // hv  # vector groups: KV heads ("group") or query heads ("head")
    res = _online_softmax(
        _to_lanes(s, nv, block),
        _to_lanes(np.ascontiguousarray(valid_full), nv, block),
        np.tile(orders, (nv, 1)),
        va,
        np.repeat(np.arange(nv) * hv // (hq // hkv), nb),
        _lane_scale(mode, c_head, nv, nb, block),
        tau,
        denom_mode,
    )
    skipped_el = _from_lanes(np.broadcast_to(res.skipped[:, None, :], res.fine.shape), hq, nv, t_n)
    fine_el = _from_lanes(res.fine, hq, nv, t_n) & valid_full
    return _from_lanes(res.output, hq, nv, t_n), skipped_el & valid_full, fine_el, res


def attention(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    *,
    theta: float,
    window: int,
    tau: float,
    mode: str = "fixed",
    causal: bool = True,
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
    query_block: int = 4,
    denom_mode: str = "full",
    order: str = "ascending",
    delta_eval: str = "direct",
    lane_layout: str = "group",
) -> AttentionResult:
    """DeltaLLM prefill attention of one layer: Delta-Key scores and VSSOS softmax × value.

    Args:
        q: ``[Hq, T, d]`` post-RoPE queries; int8 in fixed mode, float in float mode.
        k: ``[Hkv, T, d]`` post-RoPE keys, same dtype rule; ``Hq`` a multiple of ``Hkv``.
        v: ``[Hkv, T, dv]`` values, same dtype rule.
        theta: Delta-Key threshold (key LSBs, integer, in fixed mode; key units in float mode).
        window: exact window ``W >= 1`` (diagonal included); ``W >= T`` is dense attention.
        tau: VSSOS skip threshold in log2 units, ``>= 1/256``; ``math.inf`` never skips.
            Fixed mode compares ``E >= floor(256·tau + 0.5)``.
        mode: ``"fixed"`` (bit-exact integer datapath) or ``"float"`` (float64, same structure).
        causal: apply the causal mask (decode equivalence needs it).
        q_scale: INT8 scale of ``q``, scalar or ``[Hq]`` (real q = ``q · q_scale``).
        k_scale: INT8 scale of ``k``, scalar or ``[Hkv]``.
        delta_mode: ``"memory"`` (default) or ``"naive"`` Delta-Key form.
        refresh_period: dense key row every ``refresh_period`` tokens (0: off).
        n_sink: leading keys stored dense and scored exactly.
        query_block: ``P_q``, consecutive query tokens per VSSOS vector (``L = G·P_q`` lanes).
        denom_mode: ``"full"`` (skipped columns still add to ``ℓ``) or ``"kept"``.
        order: column order, ``"ascending"`` or ``"window_first"``.
        delta_eval: ``"direct"`` (``q·K̂``) or ``"chain"`` (incremental); same integers.
        lane_layout: ``"group"`` (default: ``G`` heads × ``P_q`` tokens per vector) or
            ``"head"`` (``P_q`` tokens of one query head per vector); see
            :data:`LANE_LAYOUTS`. The layout decides which lanes share a column-skip decision.

    Returns:
        :class:`AttentionResult`. The softmax uses ``c_h = q_scale_h·k_scale·log2(e)/sqrt(d)``.

    Raises:
        TypeError: wrong dtype for the mode, or a non-integer ``theta`` in fixed mode.
        ValueError: shape mismatch, ``Hq`` not a multiple of ``Hkv``, empty input, NaN/Inf in
            float mode, or a bad option.
    """
    qa, ka, va = np.asarray(q), np.asarray(k), np.asarray(v)
    _check_options(
        dict(
            mode=mode,
            denom_mode=denom_mode,
            order=order,
            delta_eval=delta_eval,
            window=window,
            query_block=query_block,
            tau=tau,
            lane_layout=lane_layout,
        )
    )
    _check_tensors(qa, ka, va, mode)
    if mode == "float":
        qa, ka, va = (x.astype(np.float64) for x in (qa, ka, va))
    hq, t_n, d = qa.shape
    hkv, block = ka.shape[0], int(query_block)
    dk = encode_delta_keys(
        ka, theta=theta, delta_mode=delta_mode, refresh_period=refresh_period, n_sink=n_sink
    )
    s, valid, exact = hybrid_scores(qa, ka, dk, window=window, causal=causal, delta_eval=delta_eval)
    c_head = (
        _head_scale("q_scale", q_scale, hq)
        * np.repeat(_head_scale("k_scale", k_scale, hkv), hq // hkv)
        * math.log2(math.e)
        / math.sqrt(d)
    )
    nb = -(-t_n // block)
    tok = np.arange(nb * block).reshape(nb, block)
    orders = np.stack(
        [
            column_order(
                tk[tk < t_n], t_n, window=window, n_sink=n_sink, order=order, causal=causal
            )
            for tk in tok
        ]
    )
    valid_full = np.broadcast_to(valid, (hq, t_n, t_n))
    output, skipped_el, fine_el, res = _run_vectors(
        s, valid_full, orders, va, c_head, hkv, block, mode, float(tau), denom_mode, lane_layout
    )
    return AttentionResult(
        output=output,
        scores=s,
        valid=valid,
        exact=exact,
        skipped=skipped_el,
        fine=fine_el,
        delta_keys=dk,
        stats=_stats(dk, valid, skipped_el, fine_el, res.visited, res.skipped),
    )
