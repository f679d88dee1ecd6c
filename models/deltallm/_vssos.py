"""VSSOS: vectorized structured sparse online softmax, score × value ([DELTALLM]; rule [OURS]).

One vector is ``L = G·P_q`` lanes: the ``G`` query heads of a KV group times ``P_q`` consecutive
query tokens. All lanes see the same key/value column ``j`` at each step. Per lane the online
softmax keeps a running max ``m``, denominator ``ℓ`` and output ``o[d]``:

1. if ``S > m`` the max grows and ``ℓ``, ``o`` are rescaled by ``α = 2^-((m_new - m_old)·c)``;
2. ``E = (m - S)·c`` (log2 units, ``>= 0``) and ``p = 2^-E``;
3. the column is *skipped* for the whole vector when every causally valid lane has ``E >= τ``;
4. ``ℓ += p`` always (``denom_mode="full"``) or only for kept columns (``"kept"``);
5. kept columns add ``p·v_j`` to ``o``; skipped columns never read ``v_j``.

Fixed mode follows the integer formats of docs/deltallm.md exactly (exponent with 8 fractional
bits saturated at ``16·256 - 1``, exp2 LUT, ``>> 15`` rescales with floor, ``floor(2^40 / ℓ)``
normalisation to Q7.8); float mode runs the same steps in float64 with exact ``exp2``.

Public: :func:`column_order`. Internal: :func:`_online_softmax` (the lane-parallel kernel shared
by prefill and decode) and its fixed/float arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._fixed import EXP_MAX_Q8, P_FRAC_BITS, exp2_neg_q15
from ._scores import score_regions

__all__ = ["COLUMN_ORDERS", "DENOM_MODES", "column_order"]

#: Valid values of ``order``.
COLUMN_ORDERS = ("ascending", "window_first")
#: Valid values of ``denom_mode``.
DENOM_MODES = ("full", "kept")


def column_order(
    query_index: npt.ArrayLike,
    n_keys: int,
    *,
    window: int,
    n_sink: int = 1,
    order: str = "ascending",
    causal: bool = True,
) -> npt.NDArray[np.int64]:
    """The key columns one VSSOS vector visits, in processing order.

    ``"ascending"`` visits every column some lane may attend, ``0, 1, ...``. ``"window_first"``
    visits the sink columns, then the columns exact for some lane (the window), then the delta
    region, each ascending. The order changes the fixed-point bit pattern.

    Args:
        query_index: ``[P]`` token indices of the vector's queries (padding lanes excluded).
        n_keys: number of keys ``T``.
        window: exact window ``W >= 1``.
        n_sink: number of always-exact leading keys.
        order: ``"ascending"`` or ``"window_first"``.
        causal: apply the causal mask.

    Returns:
        ``[T]`` int64 column indices, padded with ``-1`` after the last visited column.
    """
    valid, exact = score_regions(query_index, n_keys, window=window, n_sink=n_sink, causal=causal)
    cols = np.arange(n_keys, dtype=np.int64)
    v_any, e_any = valid.any(axis=0), exact.any(axis=0)
    if order == "ascending":
        seq = cols[v_any]
    else:
        sink = cols < n_sink
        seq = np.concatenate([cols[v_any & sink], cols[e_any & ~sink], cols[v_any & ~e_any]])
    out = np.full(n_keys, -1, dtype=np.int64)
    out[: seq.size] = seq
    return out


@dataclass(frozen=True)
class _SoftmaxOut:
    """Kernel result: normalised output ``[B, L, d]``, per-column skip flags ``[B, T]`` (bool,
    column-indexed), fine-sparse element flags ``[B, L, T]`` and visited-column flags ``[B, T]``."""

    output: np.ndarray
    skipped: np.ndarray
    fine: np.ndarray
    visited: np.ndarray


class _Arithmetic(NamedTuple):
    """The four operations that differ between the fixed and the float datapath."""

    expo: Callable[[np.ndarray], np.ndarray]  # score difference -> log2 exponent E
    exp2: Callable[[np.ndarray], np.ndarray]  # E -> p = 2^-E
    mul: Callable[[np.ndarray, np.ndarray], np.ndarray]  # rescale x by a factor alpha
    tau_e: float | None  # skip threshold on E; None never skips


def _arithmetic(scale: tuple[np.ndarray, np.ndarray] | np.ndarray, tau: float) -> _Arithmetic:
    """Fixed: saturating ``((diff·C) >> sh)``, the LUT exp2 unit and ``>> 15`` rescales with
    ``τ_E = floor(256·τ + 0.5)``. Float: ``diff·c``, exact ``2^-E`` and plain products."""
    inf = bool(np.isinf(tau))
    if isinstance(scale, tuple):
        mant, sh = scale
        return _Arithmetic(
            expo=lambda diff: np.minimum((diff * mant) >> sh, EXP_MAX_Q8),
            exp2=exp2_neg_q15,
            mul=lambda x, f: (x * f) >> P_FRAC_BITS,
            tau_e=None if inf else math.floor(tau * 256 + 0.5),
        )
    return _Arithmetic(
        expo=lambda diff: diff * scale,
        exp2=lambda e: np.exp2(-e),
        mul=lambda x, f: x * f,
        tau_e=None if inf else tau,
    )


def _normalise(o: np.ndarray, den: np.ndarray, started: np.ndarray, fixed: bool) -> np.ndarray:
    """Final division ``o / ℓ``: fixed ``clamp_int16((o·floor(2^40/ℓ)) >> 32)`` (Q7.8), float
    exact; lanes that saw no valid column (padding) give 0."""
    if fixed:
        recip = np.where(started, (np.int64(1) << 40) // np.maximum(den, 1), 0)
        return np.clip((o * recip[:, :, None]) >> 32, -32768, 32767).astype(np.int16)
    return np.where(started[:, :, None], o / np.where(started, den, 1.0)[:, :, None], 0.0)


def _online_softmax(
    scores: np.ndarray,
    valid: np.ndarray,
    order: np.ndarray,
    v: np.ndarray,
    vector_head: np.ndarray,
    scale: tuple[np.ndarray, np.ndarray] | np.ndarray,
    tau: float,
    denom_mode: str,
) -> _SoftmaxOut:
    """Run VSSOS over ``B`` vectors of ``L`` lanes.

    Args:
        scores: ``[B, L, T]`` scores, int64 (fixed) or float64 (float).
        valid: ``[B, L, T]`` bool, causally valid (lane, column) pairs.
        order: ``[B, T]`` int64 column per step, ``-1`` = no column.
        v: ``[Hkv, T, d]`` values (int8 fixed / float64 float).
        vector_head: ``[B]`` KV head of each vector.
        scale: fixed: ``(C, sh)`` int64 ``[B, L]`` each; float: ``c`` float64 ``[B, L]``.
        tau: skip threshold in log2 units (``math.inf`` disables skipping).
        denom_mode: ``"full"`` or ``"kept"``.

    Returns:
        :class:`_SoftmaxOut`; fixed output is int16 Q7.8, float output float64.
    """
    fixed = isinstance(scale, tuple)
    b_n, l_n, t_n = scores.shape
    dt = np.int64 if fixed else np.float64
    expo, exp2, mul, tau_e = _arithmetic(scale, tau)
    m: np.ndarray = np.zeros((b_n, l_n), dtype=dt)
    den: np.ndarray = np.zeros((b_n, l_n), dtype=dt)
    o: np.ndarray = np.zeros((b_n, l_n, v.shape[2]), dtype=dt)
    started = np.zeros((b_n, l_n), dtype=bool)
    skipped = np.zeros((b_n, t_n), dtype=bool)
    visited = np.zeros((b_n, t_n), dtype=bool)
    fine = np.zeros((b_n, l_n, t_n), dtype=bool)
    rows = np.arange(b_n)
    for step in range(order.shape[1]):
        j = order[:, step]
        jj = np.maximum(j, 0)
        s = scores[rows, :, jj]
        val = valid[rows, :, jj] & (j >= 0)[:, None]
        m_new = np.where(val, np.where(started, np.maximum(m, s), s), m)
        grow = val & started & (m_new > m)
        alpha = exp2(np.where(grow, expo(m_new - m), 0))
        den = np.where(grow, mul(den, alpha), den)
        o = np.where(grow[:, :, None], mul(o, alpha[:, :, None]), o)
        m, started = m_new, started | val
        e = np.where(val, expo(m - s), 0)
        p = np.where(val, exp2(e), 0)
        small = val & (e >= tau_e) if tau_e is not None else np.zeros_like(val)
        skip = (j >= 0) & val.any(axis=1) & np.all(small | ~val, axis=1)
        keep = val & ~skip[:, None]
        den = den + (p if denom_mode == "full" else np.where(keep, p, 0))
        vj = v[vector_head, jj].astype(dt)
        o = o + np.where(keep[:, :, None], p[:, :, None] * vj[:, None, :], 0)
        skipped[rows, jj] |= skip
        visited[rows, jj] |= (j >= 0) & val.any(axis=1)
        fine[rows, :, jj] |= small
    y = _normalise(o, den, started, fixed)
    return _SoftmaxOut(output=y, skipped=skipped, fine=fine, visited=visited)
