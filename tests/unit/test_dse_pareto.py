"""Pareto extraction and hypervolume, checked against brute force and hand-computed volumes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coaccel.dse.pareto import hypervolume, pareto_mask


def _brute_mask(v: np.ndarray) -> np.ndarray:
    n = len(v)
    return np.array(
        [not any(np.all(v[j] <= v[i]) and np.any(v[j] < v[i]) for j in range(n)) for i in range(n)]
    )


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_pareto_mask_equals_brute_force(d: int) -> None:
    rng = np.random.default_rng(d)
    for _ in range(20):
        v = rng.integers(0, 6, size=(30, d)).astype(float)  # many ties and duplicates
        assert np.array_equal(pareto_mask(v, ["min"] * d), _brute_mask(v))


def test_maximized_objectives() -> None:
    v = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 5.0]])
    # minimize the first, maximize the second: (1,10) and (2,20) are optimal, (3,5) is not.
    assert pareto_mask(v, ["min", "max"]).tolist() == [True, True, False]


def test_hypervolume_by_hand_2d() -> None:
    v = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.0, 3.0]])
    # staircase below (4, 4): 3x1 + 2x1 + 1x1 = 6
    assert hypervolume(v, ["min", "min"], [4.0, 4.0]) == 6.0


def _grid_volume(v: np.ndarray, ref: np.ndarray, step: float) -> float:
    """Volume by counting cells of a grid whose cell size divides every coordinate."""
    axes = [np.arange(0.0, r, step) + step / 2 for r in ref]
    count = 0
    for cell in itertools.product(*axes):
        c = np.asarray(cell)
        if np.any(np.all(v <= c, axis=1)):
            count += 1
    return count * step ** len(ref)


@pytest.mark.parametrize("d", [3, 4])
def test_hypervolume_equals_cell_counting(d: int) -> None:
    rng = np.random.default_rng(10 + d)
    v = rng.integers(0, 5, size=(8, d)).astype(float)
    ref = np.full(d, 5.0)
    assert hypervolume(v, ["min"] * d, ref) == pytest.approx(_grid_volume(v, ref, 1.0))


def test_points_beyond_the_reference_add_nothing() -> None:
    v = np.array([[1.0, 1.0], [5.0, 0.0]])
    assert hypervolume(v, ["min", "min"], [2.0, 2.0]) == 1.0
    assert hypervolume(np.array([[3.0, 3.0]]), ["min", "min"], [2.0, 2.0]) == 0.0


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="NaN"):
        pareto_mask([[np.nan, 1.0]], ["min", "min"])
    with pytest.raises(ValueError, match="senses"):
        pareto_mask([[1.0, 1.0]], ["min"])
    with pytest.raises(ValueError, match="unknown objective sense"):
        pareto_mask([[1.0]], ["up"])
