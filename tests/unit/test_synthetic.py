"""Seeded synthetic tensors: determinism, distribution moments, outlier channels, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.models.nn import (
    DISTRIBUTIONS,
    outlier_channels,
    synthetic_pair,
    synthetic_tensor,
)

N = 200_000


def test_same_seed_same_tensors_and_seed_matters():
    for dist in DISTRIBUTIONS:
        p1 = synthetic_pair(
            np.random.default_rng(7), dist, tokens=8, in_features=64, out_features=16
        )
        p2 = synthetic_pair(
            np.random.default_rng(7), dist, tokens=8, in_features=64, out_features=16
        )
        p3 = synthetic_pair(
            np.random.default_rng(8), dist, tokens=8, in_features=64, out_features=16
        )
        assert np.array_equal(p1.activations, p2.activations)
        assert np.array_equal(p1.weights, p2.weights)
        assert np.array_equal(p1.channel_scale, p2.channel_scale)
        assert not np.array_equal(p1.activations, p3.activations)


def test_default_shapes_and_dtypes():
    p = synthetic_pair(np.random.default_rng(0), "gaussian")
    assert p.activations.shape == (128, 1024) and p.activations.dtype == np.float64
    assert p.weights.shape == (1024, 1024) and p.weights.dtype == np.float64
    assert p.channel_scale.shape == (1024,)


def _std_err_bound(p: float) -> float:
    """Five standard errors of an empirical probability over N samples."""
    return 5 * math.sqrt(p * (1 - p) / N)


def test_gaussian_and_laplace_match_their_laws():
    rng = np.random.default_rng(1)
    g = synthetic_tensor(rng, (N,), "gaussian")
    lap = synthetic_tensor(rng, (N,), "laplace")
    # Unit variance; standard error of a sample variance is sqrt(2/N) (Gaussian) and
    # sqrt(5/N) (Laplace, kurtosis 6): 5 sigma bounds.
    assert abs(g.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs(lap.var() - 1) < 5 * math.sqrt(5 / N)
    # Mean absolute value: sqrt(2/pi) for N(0,1), b = 1/sqrt(2) for unit-variance Laplace.
    assert abs(np.abs(g).mean() - math.sqrt(2 / math.pi)) < 5 * math.sqrt((1 - 2 / math.pi) / N)
    assert abs(np.abs(lap).mean() - 1 / math.sqrt(2)) < 5 * math.sqrt(0.5 / N)
    # Tail mass beyond 3 standard deviations: 2*(1 - Phi(3)) vs exp(-3*sqrt(2)).
    p_g = math.erfc(3 / math.sqrt(2))
    p_l = math.exp(-3 * math.sqrt(2))
    assert abs((np.abs(g) > 3).mean() - p_g) < _std_err_bound(p_g)
    assert abs((np.abs(lap) > 3).mean() - p_l) < _std_err_bound(p_l)


def _t4_cdf(t: float) -> float:
    """Closed-form CDF of Student-t with 4 degrees of freedom."""
    return 0.5 + t * (t * t + 6) / (2 * (t * t + 4) ** 1.5)


def test_student_t_follows_t4_and_has_unit_variance_scaling():
    x = synthetic_tensor(np.random.default_rng(2), (N,), "student_t", df=4.0)
    t = x / math.sqrt((4 - 2) / 4)  # undo the unit-variance scaling
    for point in (0.5, 1.0, 2.0, 4.0, 8.0):
        p = _t4_cdf(point)
        assert abs((t <= point).mean() - p) < _std_err_bound(p), point
    # df=5 has a finite fourth moment, so its sample variance converges: check unit variance.
    y = synthetic_tensor(np.random.default_rng(3), (N,), "student_t", df=5.0)
    assert abs(y.var() - 1) < 0.05


def test_std_scales_the_tensor():
    a = synthetic_tensor(np.random.default_rng(4), (N,), "gaussian")
    b = synthetic_tensor(np.random.default_rng(4), (N,), "gaussian", std=0.02)
    np.testing.assert_allclose(b, a * 0.02, rtol=0, atol=0)


def test_outlier_channels():
    mult = outlier_channels(np.random.default_rng(5), 1024, 8)
    big = mult != 1
    assert big.sum() == 8
    assert np.all((mult[big] >= 10) & (mult[big] <= 100))
    assert np.array_equal(outlier_channels(np.random.default_rng(5), 1024, 8), mult)
    assert np.all(outlier_channels(np.random.default_rng(5), 16, 0) == 1)


def test_student_t_pair_has_outlier_activation_channels_only():
    p = synthetic_pair(
        np.random.default_rng(6),
        "student_t",
        tokens=512,
        in_features=256,
        out_features=64,
        n_outlier_channels=4,
    )
    cols = p.channel_scale != 1
    assert cols.sum() == 4
    col_std = p.activations.std(axis=0)
    # Outlier columns are >= 10x the others (std ~1, sampling noise of 512 rows well below 2x).
    assert col_std[cols].min() > 5 * col_std[~cols].max()
    np.testing.assert_allclose(col_std[cols] / p.channel_scale[cols], 1.0, rtol=0.3)
    assert abs(p.weights.std() - 0.02) < 0.002
    for dist in ("gaussian", "laplace"):
        q = synthetic_pair(np.random.default_rng(6), dist, tokens=4, in_features=32, out_features=4)
        assert np.all(q.channel_scale == 1)


def test_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown distribution 'cauchy'; valid: gaussian"):
        synthetic_tensor(rng, (4,), "cauchy")
    with pytest.raises(ValueError, match="df > 2"):
        synthetic_tensor(rng, (4,), "student_t", df=2.0)
    with pytest.raises(ValueError, match="std must be > 0"):
        synthetic_tensor(rng, (4,), "gaussian", std=0.0)
    with pytest.raises(ValueError, match="all >= 1"):
        synthetic_tensor(rng, (0, 4), "gaussian")
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        synthetic_tensor(np.random.RandomState(0), (4,), "gaussian")
    with pytest.raises(ValueError, match="n_outliers must be in"):
        outlier_channels(rng, 4, 5)
    with pytest.raises(ValueError, match="scale_min <= scale_max"):
        outlier_channels(rng, 4, 1, scale_min=50, scale_max=10)
