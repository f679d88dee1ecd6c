"""Pareto fronts and hypervolume for any number of objectives.

Objectives are columns of a matrix, one row per design point. Every function takes a ``senses``
sequence (``"min"`` or ``"max"`` per column) and works internally on minimization (maximized
columns are negated), so callers never flip signs themselves.

* :func:`pareto_mask`: which points no other point dominates.
* :func:`hypervolume`: the volume the front dominates up to a reference point (exact: a sweep
  in two dimensions, slicing along the first objective in more).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "front_with_margin",
    "hypervolume",
    "pareto_mask",
    "pareto_ranks",
    "to_minimization",
    "top_k_by_rank",
]


def to_minimization(values: npt.ArrayLike, senses: Sequence[str]) -> npt.NDArray[np.float64]:
    """Objective matrix with maximized columns negated (all columns minimized).

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.

    Returns:
        float64 ``(n_points, n_objectives)``.

    Raises:
        ValueError: a shape mismatch, an unknown sense, or a NaN value.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"objective values must be 2-D (points x objectives), got {v.shape}")
    if len(senses) != v.shape[1]:
        raise ValueError(f"{len(senses)} senses for {v.shape[1]} objectives")
    bad = [s for s in senses if s not in ("min", "max")]
    if bad:
        raise ValueError(f"unknown objective sense(s) {bad}; valid: 'min', 'max'")
    if np.isnan(v).any():
        raise ValueError("objective values contain NaN (failed points must be left out)")
    sign = np.array([1.0 if s == "min" else -1.0 for s in senses])
    return v * sign


def pareto_mask(values: npt.ArrayLike, senses: Sequence[str]) -> npt.NDArray[np.bool_]:
    """Which points are Pareto-optimal (no other point is at least as good in every objective
    and better in one). Duplicate optimal points are all kept.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.

    Returns:
        bool ``(n_points,)``.
    """
    v = to_minimization(values, senses)
    n = v.shape[0]
    keep = np.ones(n, dtype=bool)
    # Sorting lexicographically puts every dominating point before the points it dominates, so
    # each point is compared only with the current front (fast for the usual small fronts).
    order = np.lexsort(v.T[::-1])
    front: list[int] = []
    for i in order:
        p = v[i]
        dominated = False
        for j in front:
            q = v[j]
            if np.all(q <= p) and np.any(q < p):
                dominated = True
                break
        if dominated:
            keep[i] = False
        else:
            front.append(int(i))
    return keep


def hypervolume(values: npt.ArrayLike, senses: Sequence[str], reference: Sequence[float]) -> float:
    """Volume dominated by the points and bounded by a reference point (exact).

    Points that do not strictly dominate the reference in every objective contribute nothing.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.
        reference: the reference point in the objectives' own units and senses (for a
            maximized objective, a value below every point of interest).

    Returns:
        The hypervolume, in the product of the objectives' units.
    """
    v = to_minimization(values, senses)
    ref = to_minimization(np.asarray([reference], dtype=np.float64), senses)[0]
    v = v[np.all(v < ref, axis=1)]
    if v.size == 0:
        return 0.0
    v = v[pareto_mask(v, ["min"] * v.shape[1])]
    return float(_hv(v, ref))


def _hv(v: npt.NDArray[np.float64], ref: npt.NDArray[np.float64]) -> float:
    """Exact hypervolume of mutually non-dominated minimization points below ``ref``."""
    d = v.shape[1]
    if d == 1:
        return float(ref[0] - v[:, 0].min())
    if d == 2:
        order = np.argsort(v[:, 0])
        x, y = v[order, 0], v[order, 1]
        vol = 0.0
        best_y = ref[1]
        for i in range(len(x)):
            if y[i] < best_y:
                vol += (ref[0] - x[i]) * (best_y - y[i])
                best_y = y[i]
        return vol
    # Slice along the first objective: between consecutive first-objective values, the
    # dominated region is the (d-1)-dimensional hypervolume of the points at or before it.
    order = np.argsort(v[:, 0])
    v = v[order]
    vol = 0.0
    for i in range(len(v)):
        upper = v[i + 1, 0] if i + 1 < len(v) else ref[0]
        width = upper - v[i, 0]
        if width <= 0:
            continue
        sub = v[: i + 1, 1:]
        sub = sub[pareto_mask(sub, ["min"] * sub.shape[1])]
        vol += width * _hv(sub, ref[1:])
    return vol


def front_with_margin(
    values: npt.ArrayLike, senses: Sequence[str], margin: float = 0.0
) -> npt.NDArray[np.bool_]:
    """The Pareto front widened by a relative margin.

    A point is kept when no point dominates it once it is improved by ``margin`` in every
    objective (each minimized value ``v`` becomes ``v - margin * |v|``). ``margin = 0`` gives
    :func:`pareto_mask`.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.
        margin: relative improvement, >= 0 (0.05: within 5 % of the front).

    Returns:
        bool ``(n_points,)``.

    Raises:
        ValueError: a negative margin (and as :func:`to_minimization`).
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    v = to_minimization(values, senses)
    if margin == 0:
        return pareto_mask(v, ["min"] * v.shape[1])
    front = v[pareto_mask(v, ["min"] * v.shape[1])]
    better = v - margin * np.abs(v)
    # q dominates p' when q <= p' everywhere and q < p' somewhere.
    le = np.all(front[None, :, :] <= better[:, None, :], axis=2)
    lt = np.any(front[None, :, :] < better[:, None, :], axis=2)
    return np.asarray(~np.any(le & lt, axis=1))


def pareto_ranks(values: npt.ArrayLike, senses: Sequence[str]) -> npt.NDArray[np.int64]:
    """Non-dominated sorting: 0 for the front, 1 for the front of the rest, and so on.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.

    Returns:
        int64 ``(n_points,)``.
    """
    v = to_minimization(values, senses)
    ranks = np.full(v.shape[0], -1, dtype=np.int64)
    left = np.arange(v.shape[0])
    r = 0
    while left.size:
        m = pareto_mask(v[left], ["min"] * v.shape[1])
        ranks[left[m]] = r
        left = left[~m]
        r += 1
    return ranks


def top_k_by_rank(values: npt.ArrayLike, senses: Sequence[str], k: int) -> list[int]:
    """Indices of the ``k`` best points: by Pareto rank, then by the first objective.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.
        k: how many (all when there are fewer points).

    Returns:
        Point indices, best first.
    """
    v = to_minimization(values, senses)
    ranks = pareto_ranks(v, ["min"] * v.shape[1])
    order = np.lexsort((np.arange(v.shape[0]), v[:, 0], ranks))
    return [int(i) for i in order[:k]]
