"""Hybrid exact/delta attention scores ([DELTALLM]; rules [OURS]).

For query token ``i`` and key ``j`` (causal): ``j > i`` is masked; ``j < n_sink`` or
``i - j < window`` is *exact* (``S = q_i·k_j``); every other key is *delta*
(``S = q_i·k̂_j``). The window counts the diagonal, so ``window >= T`` is dense attention.
Without the causal mask, the window is ``|i - j| < window``.

The delta score can be evaluated directly from ``K̂`` or incrementally along the key axis,
``A_i(j) = A_i(j-1) + q_i·Δ_j`` (``nnz(Δ_j)`` MACs per step); with integer inputs both give the
same integers. Query heads share their KV head's deltas (GQA: head ``h`` reads KV head
``h // G``).

Public: :func:`score_regions`, :func:`delta_chain_scores`, :func:`hybrid_scores`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ._delta import DeltaKeys

__all__ = ["DELTA_EVALS", "delta_chain_scores", "hybrid_scores", "score_regions"]

#: Valid values of ``delta_eval``.
DELTA_EVALS = ("direct", "chain")


def score_regions(
    query_index: npt.ArrayLike, n_keys: int, *, window: int, n_sink: int = 1, causal: bool = True
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Classify (query, key) pairs into masked, exact and delta.

    Args:
        query_index: ``[Tq]`` int token indices of the queries.
        n_keys: number of keys ``T`` (indices ``0..T-1``).
        window: exact window ``W >= 1`` (diagonal included).
        n_sink: leading keys always exact (``>= 1``).
        causal: mask keys after the query.

    Returns:
        ``(valid, exact)``: bool ``[Tq, T]``; ``exact`` implies ``valid``; delta pairs are
        ``valid & ~exact``.
    """
    i = np.asarray(query_index, dtype=np.int64)[:, None]
    j = np.arange(n_keys, dtype=np.int64)[None, :]
    valid = j <= i if causal else np.ones((i.shape[0], n_keys), dtype=bool)
    near = (i - j < window) if causal else (np.abs(i - j) < window)
    exact = valid & ((j < n_sink) | near)
    return valid, exact


def _group_heads(x: np.ndarray, n_q_heads: int) -> np.ndarray:
    """Repeat ``[Hkv, ...]`` along axis 0 to ``[Hq, ...]`` (head ``h`` reads ``h // G``)."""
    return np.repeat(x, n_q_heads // x.shape[0], axis=0)


def delta_chain_scores(q: npt.ArrayLike, delta_keys: DeltaKeys) -> np.ndarray:
    """Incremental delta-chain scores ``A_i(j) = Σ_{s<=j} q_i·Δ_s`` for every query and key.

    Args:
        q: ``[Hq, Tq, d]`` queries (int8 fixed / float64 float); ``Hq`` a multiple of ``Hkv``.
        delta_keys: the encoded keys, ``deltas`` ``[Hkv, T, d]``.

    Returns:
        ``[Hq, Tq, T]`` scores ``q_i·k̂_j``; int64 (fixed) or float64 (float).
    """
    qa = np.asarray(q)
    dt = np.int64 if np.issubdtype(delta_keys.deltas.dtype, np.integer) else np.float64
    deltas = _group_heads(np.where(delta_keys.mask, delta_keys.deltas, 0).astype(dt), qa.shape[0])
    step = np.matmul(qa.astype(dt), np.swapaxes(deltas, 1, 2))  # q_i·Δ_j over the stored nonzeros
    return np.cumsum(step, axis=2)


def hybrid_scores(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    delta_keys: DeltaKeys,
    *,
    window: int,
    causal: bool = True,
    query_index: npt.ArrayLike | None = None,
    delta_eval: str = "direct",
) -> tuple[np.ndarray, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Hybrid exact/delta scores.

    Args:
        q: ``[Hq, Tq, d]`` queries (int8 fixed / float float mode).
        k: ``[Hkv, T, d]`` the full keys (read only inside the exact region).
        delta_keys: :func:`~._delta.encode_delta_keys` of ``k``.
        window: exact window ``W >= 1``.
        causal: apply the causal mask.
        query_index: ``[Tq]`` token indices of the queries (default ``0..Tq-1``).
        delta_eval: ``"direct"`` (``q·K̂``) or ``"chain"`` (incremental delta accumulation).

    Returns:
        ``(S, valid, exact)``: scores ``[Hq, Tq, T]`` (int64 fixed / float64 float, 0 where
        masked) and bool masks ``[Tq, T]`` from :func:`score_regions`.

    Raises:
        ValueError: unknown ``delta_eval``.
    """
    if delta_eval not in DELTA_EVALS:
        raise ValueError(
            f"delta_eval: unknown value {delta_eval!r}; valid: {', '.join(DELTA_EVALS)}"
        )
    qa, ka = np.asarray(q), np.asarray(k)
    dt = np.int64 if np.issubdtype(delta_keys.deltas.dtype, np.integer) else np.float64
    qi = np.arange(qa.shape[1]) if query_index is None else np.asarray(query_index)
    valid, exact = score_regions(
        qi, ka.shape[1], window=window, n_sink=delta_keys.n_sink, causal=causal
    )
    q64 = qa.astype(dt)
    s_exact = np.matmul(q64, np.swapaxes(_group_heads(ka.astype(dt), qa.shape[0]), 1, 2))
    if delta_eval == "chain":
        s_delta = delta_chain_scores(qa, delta_keys)
    else:
        k_hat = _group_heads(delta_keys.keys_hat.astype(dt), qa.shape[0])
        s_delta = np.matmul(q64, np.swapaxes(k_hat, 1, 2))
    s = np.where(exact, s_exact, np.where(valid, s_delta, 0)).astype(dt)
    return s, valid, exact
