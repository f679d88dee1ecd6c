"""The routing generator fitted to published expert-repetition statistics of a real MoE.

No recorded routes of a real MoE decoder could be had (docs/gpu_real_inputs.md lists the search),
so the Specter routing generator (:class:`coaccel.models.gpu.specter.SpecterModel`) is fitted to
the one published table of consecutive-token routing statistics we could read: Mixtral 8x7B's
"percentage of expert assignment repetitions" ([MIXTRAL] arXiv:2401.04088, Table 5). For layers
0, 15 and 31 of the 32 and eight domains of The Pile it reports

* ``first``: the share of consecutive tokens ``i, i + 1`` whose first-choice expert is the same
  (12.5 % for random assignment of 8 experts);
* ``either``: the share whose top-2 sets share an expert (``1 - 6/8 * 5/7``, about 46 %, for
  random assignment).

The generator has two routing knobs: ``persistence`` (each route slot keeps the previous
token's expert with that probability) and ``zipf`` (per-layer expert popularity ``rank^-zipf``
for the fresh draws). On Mixtral's geometry (8 experts, top-2) its routes are a Markov chain
over the 56 ordered expert pairs; :func:`generator_repetitions` computes both statistics of that
chain exactly (stationary distribution, no sampling), and :func:`fit_mixtral_table5` picks, per
published layer, the knobs that minimise the squared distance to the domain means in units of
the spread over domains (a grid of 0.005 in persistence and 0.02 in Zipf exponent, then a grid
ten times finer around the best point).

What carries over to another model is an assumption ([OURS], stated wherever the fitted values
are used): the per-slot persistence is read as a property of trained routers at a relative
depth, and the popularity skew as that of a load-balanced router, so both are applied unchanged
to DeepSeek-V2-Lite's 64 experts top-6. Published figures for DeepSeek's own routing would
replace them.

Public: :data:`MIXTRAL_TABLE5`, :data:`MIXTRAL_DOMAINS`, :func:`repetition_stats`,
:func:`generator_repetitions`, :func:`fit_mixtral_table5`, :class:`RoutingFit`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .specter import DRAWS_PER_SLOT

__all__ = [
    "MIXTRAL_DOMAINS",
    "MIXTRAL_LAYERS",
    "MIXTRAL_TABLE5",
    "RoutingFit",
    "fit_mixtral_table5",
    "generator_repetitions",
    "repetition_stats",
]

MIXTRAL_LAYERS = 32
"""Decoder layers of Mixtral 8x7B ([MIXTRAL] Table 1)."""

MIXTRAL_DOMAINS = (
    "ArXiv", "DM Mathematics", "Github", "Gutenberg", "PhilPapers", "PubMed Abstracts",
    "StackExchange", "Wikipedia (en)",
)  # fmt: skip
"""The Pile domains of [MIXTRAL] Table 5, in its row order."""

MIXTRAL_TABLE5: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {
    0: ((14.0, 14.1, 14.9, 13.9, 13.6, 14.2, 13.6, 14.4),
        (46.5, 44.9, 49.9, 49.5, 46.9, 48.6, 48.2, 49.8)),
    15: ((27.9, 28.4, 28.1, 26.1, 25.3, 24.6, 27.2, 23.6),
         (62.3, 67.0, 66.9, 63.1, 61.9, 61.6, 64.6, 62.1)),
    31: ((22.7, 19.7, 19.7, 26.3, 22.1, 22.0, 23.6, 25.3),
         (52.9, 44.5, 49.2, 52.2, 51.3, 51.8, 53.6, 51.8)),
}  # fmt: skip
"""[MIXTRAL] Table 5, percent: layer -> (first-choice repetitions, first-or-second-choice
repetitions), one value per domain of :data:`MIXTRAL_DOMAINS`."""


def repetition_stats(routes: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], ...]:
    """Consecutive-token repetition statistics of recorded or generated routes.

    Args:
        routes: ``[tokens, layers, top_k]`` expert ids, slot 0 the first choice.

    Returns:
        ``(first, either)``, each ``[layers]``: the share of consecutive token pairs whose
        first-choice expert is the same, and whose expert sets intersect.

    Raises:
        ValueError: fewer than two tokens, or not three-dimensional.
    """
    r = np.asarray(routes)
    if r.ndim != 3 or r.shape[0] < 2:
        raise ValueError(f"routes must be [tokens >= 2, layers, top_k], got shape {r.shape}")
    a, b = r[:-1], r[1:]
    first = (a[..., 0] == b[..., 0]).mean(axis=0)
    either = (a[..., :, None] == b[..., None, :]).any(axis=(-1, -2)).mean(axis=0)
    return first.astype(np.float64), either.astype(np.float64)


def _popularity(zipf: float, experts: int) -> npt.NDArray[np.float64]:
    base = np.arange(1, experts + 1, dtype=np.float64) ** -zipf
    return base / base.sum()


def _transition(persistence: float, zipf: float, experts: int) -> tuple[np.ndarray, list]:
    """The generator's top-2 routes as a Markov chain: ``(T, states)`` with ``T[s, s']`` the
    probability of ordered pair ``s'`` after ``s``."""
    p, pop = persistence, _popularity(zipf, experts)
    n_draws = DRAWS_PER_SLOT * 2  # the generator's draws per slot at top-2
    by_pop = np.argsort(-pop, kind="stable")
    # D[c, e]: slot 1's fresh draw given slot 0 chose c (first of n_draws draws that is not c,
    # the most popular other expert when all of them are c)
    d = pop[None, :] * ((1 - pop**n_draws) / (1 - pop))[:, None]
    np.fill_diagonal(d, 0.0)
    for c in range(experts):
        top = next(int(e) for e in by_pop if e != c)
        d[c, top] += pop[c] ** n_draws
    states = list(itertools.permutations(range(experts), 2))
    s0 = np.array([s[0] for s in states])
    s1 = np.array([s[1] for s in states])
    # P(e0 | a) and P(e1 | e0, b) for every (a, b) -> (e0, e1)
    p0 = (1 - p) * pop[s0][None, :] + p * (s0[None, :] == s0[:, None])
    keep = p * (s1[None, :] == s1[:, None]) + (1 - p) * d[s0[None, :], s1[None, :]]
    b_taken = s1[:, None] == s0[None, :]  # previous slot-1 expert is the new first choice
    p1 = np.where(b_taken, d[s0[None, :], s1[None, :]], keep)
    return p0 * p1, states


def generator_repetitions(persistence: float, zipf: float, experts: int = 8) -> tuple[float, float]:
    """Exact ``(first, either)`` repetition shares of the generator's top-2 routes.

    The stationary distribution of the chain of :func:`_transition`; no sampling. Equal in
    expectation to :func:`repetition_stats` of
    :func:`coaccel.models.gpu.specter.routing_trace` on a top-2 shape (a test checks it).

    Args:
        persistence: per-slot probability of keeping the previous token's expert.
        zipf: popularity exponent.
        experts: routed experts per layer (the chain has ``experts * (experts - 1)`` states).
    """
    t, states = _transition(persistence, zipf, experts)
    n = len(states)
    a = np.vstack([t.T - np.eye(n), np.ones((1, n))])
    rhs = np.zeros(n + 1)
    rhs[-1] = 1.0
    pi = np.linalg.lstsq(a, rhs, rcond=None)[0]
    s0 = np.array([s[0] for s in states])
    s1 = np.array([s[1] for s in states])
    same_first = s0[:, None] == s0[None, :]
    shared = (
        (s0[:, None] == s0[None, :]) | (s0[:, None] == s1[None, :])
        | (s1[:, None] == s0[None, :]) | (s1[:, None] == s1[None, :])
    )  # fmt: skip
    flow = pi[:, None] * t
    return float(flow[same_first].sum()), float(flow[shared].sum())


@dataclass(frozen=True)
class RoutingFit:
    """The generator's knobs fitted to one published layer.

    Attributes:
        layer: the Mixtral layer (0, 15 or 31).
        depth: its relative depth ``layer / (layers - 1)``.
        persistence, zipf: the fitted knobs.
        published: ``(first, either)`` domain means, as fractions.
        spread: ``(first, either)`` standard deviations over the domains.
        fitted: ``(first, either)`` of the generator at the fitted knobs.
    """

    layer: int
    depth: float
    persistence: float
    zipf: float
    published: tuple[float, float]
    spread: tuple[float, float]
    fitted: tuple[float, float]


def _loss(p: float, z: float, mean: np.ndarray, sd: np.ndarray) -> float:
    got = np.asarray(generator_repetitions(p, z))
    return float((((got - mean) / sd) ** 2).sum())


def _grid_best(ps: np.ndarray, zs: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> tuple:
    best = min((_loss(p, z, mean, sd), p, z) for p in ps for z in zs)
    return best[1], best[2]


def fit_mixtral_table5() -> list[RoutingFit]:
    """Fit ``persistence`` and ``zipf`` to each layer of :data:`MIXTRAL_TABLE5`.

    Returns:
        One :class:`RoutingFit` per published layer, in layer order.
    """
    out = []
    for layer, (first, either) in sorted(MIXTRAL_TABLE5.items()):
        obs = np.array([first, either]) / 100.0
        mean, sd = obs.mean(axis=1), obs.std(axis=1, ddof=1)
        p, z = _grid_best(np.arange(0.0, 0.6001, 0.01), np.arange(0.0, 1.2001, 0.04), mean, sd)
        p, z = _grid_best(
            np.clip(np.arange(p - 0.01, p + 0.01001, 0.001), 0.0, 1.0),
            np.clip(np.arange(z - 0.04, z + 0.04001, 0.004), 0.0, None), mean, sd,
        )  # fmt: skip
        p, z = round(float(p), 3), round(float(z), 3)
        out.append(RoutingFit(
            layer=layer, depth=layer / (MIXTRAL_LAYERS - 1), persistence=p, zipf=z,
            published=(float(mean[0]), float(mean[1])), spread=(float(sd[0]), float(sd[1])),
            fitted=generator_repetitions(p, z),
        ))  # fmt: skip
    return out
