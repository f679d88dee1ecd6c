"""Kendall's tau and the analytical-vs-cycle ranking row of ``coaccel validate gpu``."""

import itertools
import math

import numpy as np
import pytest

from coaccel.sim.gpu_mem import load_arch
from coaccel.targets.gpu.measured import kendall_tau
from coaccel.targets.gpu.validation import RANK_GPUS, RANK_TAU_MIN, _default_simulate, _rank_rows


def _tau_b_by_pairs(x, y):
    """Kendall's tau-b counted pair by pair (the textbook definition)."""
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if sx == 0 and sy == 0:
            continue
        if sx == 0:
            tx += 1
        elif sy == 0:
            ty += 1
        elif sx == sy:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / math.sqrt((conc + disc + tx) * (conc + disc + ty))


def test_kendall_tau_is_tau_b():
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = rng.integers(0, 6, 15).astype(float)  # with ties
        y = x + rng.integers(-2, 3, 15)
        assert kendall_tau(x, y) == pytest.approx(_tau_b_by_pairs(x, y), abs=1e-12)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isnan(kendall_tau([1, 1], [1, 2]))


def test_the_tiers_rank_a_w1_sweep_alike():
    (row,) = _rank_rows({g: load_arch(g) for g in RANK_GPUS}, _default_simulate)
    assert row.group == "tier_rank" and row.status == "ok"
    assert RANK_TAU_MIN <= row.ours <= 1.0
