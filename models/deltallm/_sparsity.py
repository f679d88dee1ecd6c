"""Sparsity counts of one layer's fixed-point prefill for several τ and lane layouts at once.

The Delta-Key sparsity ``ρ_K`` depends on θ only; the fine score sparsity ``ρ_fine`` on θ, W and
τ; the structured score sparsity ``ρ_S`` also on the lane layout (which lanes share a column-skip
decision, :data:`~._attention.LANE_LAYOUTS`, and ``P_q``). A lane's skip flag, ``E >= τ``
against its own running maximum in ascending column order, never depends on the other lanes, so
one pass over the scores gives every τ and every layout: :func:`sparsity_counts` computes the
scores and the log2 exponents ``E`` once and then only compares and AND-reduces. Its counts equal
those of :func:`~._trace.column_events` and of :func:`~._attention.attention` for each (τ,
layout) (tested); they are integer counts, so micro-averages over many tensors are ratios of
sums.

Public: :class:`SparsityCounts`, :func:`sparsity_counts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._attention import LANE_LAYOUTS, _check_tau, vector_heads
from ._delta import encode_delta_keys
from ._fixed import EXP_MAX_Q8
from ._scores import score_regions
from ._trace import _NEG, DeltaEvents, _blocks, _check_column_args, _score_scales

__all__ = ["SparsityCounts", "sparsity_counts"]


@dataclass(frozen=True)
class SparsityCounts:
    """Integer counts of one layer (all KV heads) under one θ and W.

    Attributes:
        taus: the τ values, log2 units.
        layouts: the ``(lane_layout, query_block)`` pairs.
        delta_nonzeros: ``nnz(Δ_1..T-1)`` summed over KV heads.
        delta_elements: ``(T - 1)·Hkv·d``.
        valid_elements: causally valid (query head, query, key) elements.
        fine_elements: int64 ``[len(taus)]`` valid elements with ``E >= τ``.
        skipped_elements: int64 ``[len(taus), len(layouts)]`` valid elements inside skipped
            columns.
        skipped_columns: int64 ``[len(taus), len(layouts)]`` skipped (vector, column) steps.
        visited_columns: int64 ``[len(layouts)]`` (vector, column) steps with a valid lane.
        events: the column events of one (τ, layout) (``events=`` of :func:`sparsity_counts`;
            equal to :func:`~._trace.column_events`' events), or ``()``.
    """

    taus: tuple[float, ...]
    layouts: tuple[tuple[str, int], ...]
    delta_nonzeros: int
    delta_elements: int
    valid_elements: int
    fine_elements: npt.NDArray[np.int64]
    skipped_elements: npt.NDArray[np.int64]
    skipped_columns: npt.NDArray[np.int64]
    visited_columns: npt.NDArray[np.int64]
    events: tuple[DeltaEvents, ...] = ()


def _check_layouts(layouts: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    out = []
    for lay, pq in layouts:
        if lay not in LANE_LAYOUTS:
            raise ValueError(
                f"lane_layout: unknown value {lay!r}; valid: {', '.join(LANE_LAYOUTS)}"
            )
        if isinstance(pq, bool) or int(pq) != pq or pq < 1:
            raise ValueError(f"query_block: must be an integer >= 1, got {pq!r}")
        out.append((str(lay), int(pq)))
    if not out:
        raise ValueError("layouts: needs at least one (lane_layout, query_block) pair")
    return tuple(out)


def sparsity_counts(
    q: npt.NDArray[np.int8],
    k: npt.NDArray[np.int8],
    *,
    theta: int,
    window: int,
    taus: Sequence[float],
    layouts: Sequence[tuple[str, int]] = (("group", 4),),
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    n_sink: int = 1,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    events: tuple[int, int] | None = None,
    layer: int = 0,
) -> SparsityCounts:
    """ρ_K, ρ_fine and ρ_S counts of one causal prefill layer for every τ and lane layout.

    The column order is ascending (the reference's default); arguments mean what they mean in
    :func:`~._attention.attention` (fixed mode).

    Args:
        q: ``[Hq, T, d]`` int8 post-RoPE queries.
        k: ``[Hkv, T, d]`` int8 post-RoPE keys.
        theta: Delta-Key threshold, key LSBs.
        window: exact window ``W``.
        taus: VSSOS thresholds, log2 units (``math.inf``: never skip).
        layouts: ``(lane_layout, query_block)`` pairs.
        q_scale: ``[Hq]`` or scalar. k_scale: ``[Hkv]`` or scalar.
        n_sink: dense leading keys. delta_mode, refresh_period: the encoder's options.
        events: ``(tau index, layout index)`` whose column events to return as well (for the
            simulator), or None.
        layer: layer index recorded in those events.

    Returns:
        The :class:`SparsityCounts`.

    Raises:
        TypeError: q or k not int8. ValueError: bad shapes or options.
    """
    qa, ka = np.asarray(q), np.asarray(k)
    _check_column_args(qa, ka, math.inf, "ascending")
    for tau in taus:
        _check_tau(tau)
    lays = _check_layouts(layouts)
    hq, t_n, d = qa.shape
    hkv = ka.shape[0]
    g = hq // hkv
    dk = encode_delta_keys(
        ka, theta=theta, delta_mode=delta_mode, refresh_period=refresh_period, n_sink=n_sink
    )
    valid, exact = score_regions(np.arange(t_n), t_n, window=window, n_sink=n_sink)
    mant, shift = _score_scales(q_scale, k_scale, hq, hkv, d)
    tau_e = [None if math.isinf(t) else math.floor(t * 256 + 0.5) for t in taus]
    geo = {pq: _geometry(valid, pq) for pq in {pq for _, pq in lays}}
    fine = np.zeros(len(taus), dtype=np.int64)
    skipped = np.zeros((len(taus), len(lays)), dtype=np.int64)
    skip_cols = np.zeros((len(taus), len(lays)), dtype=np.int64)
    evs: list[DeltaEvents] = []
    for h in range(hkv):
        heads = slice(h * g, (h + 1) * g)
        sc = _hybrid_scores(qa[heads], ka[h], dk.keys_hat[h], valid, window, n_sink)
        run = np.maximum.accumulate(np.where(valid, sc, _NEG), axis=2)
        diff = np.where(valid, run - sc, 0)
        e = np.minimum((diff * mant[heads, None, None]) >> shift[heads, None, None], EXP_MAX_Q8)
        for ti, te in enumerate(tau_e):
            if te is None:
                continue
            small = valid & (e >= te)
            fine[ti] += int(np.count_nonzero(small))
            for li, (lay, pq) in enumerate(lays):
                hv = vector_heads(lay, g)
                valid_b, visited, n_valid_col = geo[pq]
                small_b = _blocks(small, pq)  # [G, nb, P, T]
                nb = small_b.shape[1]
                grouped = (small_b | ~valid_b[None]).reshape(g // hv, hv, nb, pq, t_n)
                skip = np.all(grouped, axis=(1, 3)) & visited[None]  # [G/hv, nb, T]
                skipped[ti, li] += int((skip * n_valid_col[None]).sum()) * hv
                skip_cols[ti, li] += int(np.count_nonzero(skip))
                if events == (ti, li):
                    nnz = np.count_nonzero(dk.mask[h], axis=1).astype(np.int16)
                    kind0 = _kind0(valid_b, _blocks(exact, pq), visited)
                    evs += _events(skip, kind0, nnz, h=h, g=g, hv=hv, pq=pq, d=d, layer=layer)
    visited_cols = np.array(
        [int(geo[pq][1].sum()) * (hq // vector_heads(lay, g)) for lay, pq in lays], dtype=np.int64
    )
    rest = dk.mask[:, 1:, :]
    return SparsityCounts(
        taus=tuple(float(t) for t in taus),
        layouts=lays,
        delta_nonzeros=int(np.count_nonzero(rest)),
        delta_elements=int(rest.size),
        valid_elements=int(np.count_nonzero(valid)) * hq,
        fine_elements=fine,
        skipped_elements=skipped,
        skipped_columns=skip_cols,
        visited_columns=visited_cols,
        events=tuple(evs),
    )


def _hybrid_scores(
    q: np.ndarray, k: np.ndarray, k_hat: np.ndarray, valid: np.ndarray, window: int, n_sink: int
) -> npt.NDArray[np.int64]:
    """``[G, T, T]`` int64 hybrid scores of one KV group: ``q·k̂`` everywhere valid, then ``q·k``
    on the sinks and the window's band. Products are float32 BLAS, exact because every partial
    sum is an integer below ``d·127·127 < 2^24`` (float64 for wider heads)."""
    g, t_n, d = q.shape
    ft = np.float32 if d * 127 * 127 < 2**24 else np.float64
    qf = q.astype(ft)
    kf = k.astype(ft)
    sc = np.where(valid, qf @ k_hat.astype(ft).T, 0).astype(np.int64)
    for o in range(min(window, t_n)):  # exact band: key i - o of query i
        sc[:, np.arange(o, t_n), np.arange(t_n - o)] = np.einsum(
            "gtd,td->gt", qf[:, o:], kf[: t_n - o]
        ).astype(np.int64)
    ns = min(n_sink, t_n)
    sink = (qf @ kf[:ns].T).astype(np.int64)  # [G, T, ns]
    sc[:, :, :ns] = np.where(valid[:, :ns], sink, 0)
    return sc


def _events(skip: np.ndarray, kind0: np.ndarray, nnz: np.ndarray, *, h: int, g: int, hv: int,
            pq: int, d: int, layer: int) -> list[DeltaEvents]:  # fmt: skip
    """The events of KV head ``h``'s vector groups from their skip flags ``[G/hv, nb, T]``."""
    return [
        DeltaEvents(layer=layer, head=h if hv == g else h * g + a, group=hv, query_block=pq,
                    n_tokens=int(skip.shape[2]), causal=True,
                    kind=(kind0 | sk.astype(np.uint8) << 2).astype(np.uint8), nnz=nnz,
                    head_dim=d, value_dim=d)
        for a, sk in zip(range(0, g, hv), skip, strict=True)
    ]  # fmt: skip


def _kind0(valid_b: np.ndarray, exact_b: np.ndarray, visited: np.ndarray) -> np.ndarray:
    """``[nb, T]`` uint8 event kind without the skip bit: 1 exact, 2 delta for some lane."""
    return (
        (valid_b & exact_b).any(axis=1).astype(np.uint8)
        | ((valid_b & ~exact_b).any(axis=1).astype(np.uint8) << 1)
    ) * visited


def _geometry(valid: np.ndarray, pq: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(valid_b [nb, P, T], visited [nb, T], valid tokens per (block, column) [nb, T])``."""
    valid_b = _blocks(valid, pq)
    return valid_b, np.asarray(valid_b.any(axis=1)), np.asarray(valid_b.sum(axis=1))
