"""Seeded synthetic weight- and activation-like tensors for quantization studies.

Three element distributions, each normalized to unit variance before scaling:

* ``gaussian``: N(0, 1).
* ``laplace``: Laplace(0, 1/√2) — heavier tails, as trained weights often have.
* ``student_t``: Student-t with ``df`` degrees of freedom (3–5 is LLM-like), rescaled by
  √((df−2)/df). Its *activations* also get **outlier channels**: a few input channels (columns,
  i.e. positions along the reduction axis) multiplied by a log-uniform factor in
  [``outlier_scale_min``, ``outlier_scale_max``] (×10–×100), as in LLM activations, where a
  handful of hidden dimensions carry values tens of times larger than the rest.

Weights are ``(out_features, in_features)`` (blocked along ``in``), activations
``(tokens, in_features)``; both are float64. Weights are scaled to a standard deviation of
``weight_std`` (0.02, a typical LLM initialization scale), activations to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "DISTRIBUTIONS",
    "SyntheticPair",
    "outlier_channels",
    "synthetic_pair",
    "synthetic_tensor",
]

DISTRIBUTIONS = ("gaussian", "laplace", "student_t")
"""Names accepted by :func:`synthetic_tensor` and :func:`synthetic_pair`."""


def synthetic_tensor(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    distribution: str,
    *,
    df: float = 4.0,
    std: float = 1.0,
) -> npt.NDArray[np.float64]:
    """Draw i.i.d. elements of one distribution with the given standard deviation.

    Args:
        rng: random generator (the only source of randomness).
        shape: output shape (every dimension ≥ 1).
        distribution: one of :data:`DISTRIBUTIONS`.
        df: Student-t degrees of freedom (> 2, so the variance exists).
        std: standard deviation of the result (> 0).

    Returns:
        float64 array of ``shape``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    shp = tuple(int(s) for s in shape)
    if not shp or min(shp) < 1:
        raise ValueError(f"shape must have at least one dimension, all >= 1; got {shape}")
    if not std > 0:
        raise ValueError(f"std must be > 0, got {std}")
    if distribution == "gaussian":
        x = rng.standard_normal(shp)
    elif distribution == "laplace":
        x = rng.laplace(0.0, 1.0 / np.sqrt(2.0), shp)
    elif distribution == "student_t":
        if not df > 2:
            raise ValueError(f"Student-t needs df > 2 for a finite variance, got {df}")
        x = rng.standard_t(df, shp) * np.sqrt((df - 2.0) / df)
    else:
        raise ValueError(
            f"unknown distribution {distribution!r}; valid: {', '.join(DISTRIBUTIONS)}"
        )
    return x * std


def outlier_channels(
    rng: np.random.Generator,
    n_channels: int,
    n_outliers: int,
    *,
    scale_min: float = 10.0,
    scale_max: float = 100.0,
) -> npt.NDArray[np.float64]:
    """Per-channel multipliers with a few outlier channels.

    Args:
        rng: random generator.
        n_channels: number of channels.
        n_outliers: how many channels become outliers (0 .. n_channels), chosen without
            replacement.
        scale_min: smallest outlier factor (≥ 1).
        scale_max: largest outlier factor (≥ scale_min); factors are log-uniform in between.

    Returns:
        float64 ``(n_channels,)``: 1 for ordinary channels, the factor for outliers.
    """
    if not 0 <= n_outliers <= n_channels:
        raise ValueError(f"n_outliers must be in [0, {n_channels}], got {n_outliers}")
    if not 1.0 <= scale_min <= scale_max:
        raise ValueError(f"need 1 <= scale_min <= scale_max, got {scale_min}, {scale_max}")
    mult = np.ones(n_channels, dtype=np.float64)
    idx = rng.choice(n_channels, size=n_outliers, replace=False)
    mult[idx] = np.exp(rng.uniform(np.log(scale_min), np.log(scale_max), size=n_outliers))
    return mult


@dataclass(frozen=True, eq=False)
class SyntheticPair:
    """One synthetic GEMM problem ``Y = A · Wᵀ``.

    Attributes:
        distribution: the element distribution's name.
        activations: float64 ``(tokens, in_features)``.
        weights: float64 ``(out_features, in_features)``.
        channel_scale: float64 ``(in_features,)``, the activation channel multipliers (all 1
            when there are no outlier channels).
    """

    distribution: str
    activations: npt.NDArray[np.float64]
    weights: npt.NDArray[np.float64]
    channel_scale: npt.NDArray[np.float64]


def synthetic_pair(
    rng: np.random.Generator,
    distribution: str,
    *,
    tokens: int = 128,
    in_features: int = 1024,
    out_features: int = 1024,
    df: float = 4.0,
    weight_std: float = 0.02,
    n_outlier_channels: int = 8,
    outlier_scale_min: float = 10.0,
    outlier_scale_max: float = 100.0,
) -> SyntheticPair:
    """Draw activations and weights of one distribution.

    Outlier channels are applied to the activations of ``student_t`` only (the heavy-tailed,
    LLM-like case); ``gaussian`` and ``laplace`` stay pure so that they show the plain
    distribution's behaviour.

    Args:
        rng: random generator; draws happen in a fixed order (activations, weights, outlier
            channels), so the same seed gives the same tensors.
        distribution: one of :data:`DISTRIBUTIONS`.
        tokens: activation rows.
        in_features: the reduction dimension K.
        out_features: weight rows N.
        df: Student-t degrees of freedom.
        weight_std: standard deviation of the weights.
        n_outlier_channels: outlier channels of ``student_t`` activations.
        outlier_scale_min: smallest outlier factor.
        outlier_scale_max: largest outlier factor.

    Returns:
        The :class:`SyntheticPair`.
    """
    a = synthetic_tensor(rng, (tokens, in_features), distribution, df=df)
    w = synthetic_tensor(rng, (out_features, in_features), distribution, df=df, std=weight_std)
    if distribution == "student_t":
        mult = outlier_channels(
            rng,
            in_features,
            n_outlier_channels,
            scale_min=outlier_scale_min,
            scale_max=outlier_scale_max,
        )
    else:
        mult = np.ones(in_features, dtype=np.float64)
    return SyntheticPair(distribution, a * mult, w, mult)
