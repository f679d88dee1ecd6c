"""The calibration model and error statistics of :mod:`coaccel.targets.gpu.measured`.

Private: :mod:`coaccel.targets.gpu.measured` re-exports every public name here, and its module
docstring describes the model (``t = floor_kcycles * 1000 / f_sm_mhz + T_sim / efficiency``,
the efficiency one per library or one per regime and library, fitted per kernel library with a
pooled fallback), the split-conformal intervals and the
metrics. Pure computation, no I/O.

Public (re-exported): :data:`COVERAGE`, :data:`MIN_ROWS_PER_LIBRARY`, :data:`EFFICIENCY_FORMS`,
:class:`LibraryParams`,
:func:`fit_library`, :class:`Calibration`, :func:`fit_calibration`,
:func:`conformal_halfwidth`, :func:`kendall_tau`, :class:`ErrorSummary`,
:func:`error_summary`.

For :func:`coaccel.targets.gpu.measured.evaluate_measured` only: :data:`REGIMES`,
:func:`loo_predictions`, :func:`regime_halfwidths`, :func:`loo_coverage`,
:func:`group_summaries`; :class:`SimulatedOp` and :class:`MeasuredOp`, what the fit reads of a
:class:`~coaccel.targets.gpu.measured.RowSim` and a
:class:`~coaccel.targets.gpu.measured.MeasuredRow`.

Internal: :data:`POOLED`, :func:`_nonneg_lstsq`, :func:`_regime_scores`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "COVERAGE",
    "EFFICIENCY_FORMS",
    "EfficiencyForm",
    "MIN_ROWS_PER_LIBRARY",
    "REGIMES",
    "Calibration",
    "ErrorSummary",
    "LibraryParams",
    "MeasuredOp",
    "SimulatedOp",
    "conformal_halfwidth",
    "error_summary",
    "fit_calibration",
    "fit_library",
    "group_summaries",
    "kendall_tau",
    "loo_coverage",
    "loo_predictions",
    "regime_halfwidths",
]

COVERAGE = 0.9
"""Target coverage of the prediction intervals."""

MIN_ROWS_PER_LIBRARY = 3
"""Fewest rows of a library for a fit of its own (else the pooled fit)."""

EfficiencyForm = Literal["single", "regime"]
EFFICIENCY_FORMS: tuple[EfficiencyForm, ...] = ("single", "regime")
"""One efficiency per library, or one per regime (``dram``, ``l2``) and library."""

Regime = Literal["dram", "l2"]
REGIMES: tuple[Regime, ...] = ("dram", "l2")
"""The regimes intervals are grouped by: the KV streamed from DRAM, or served by the warm L2."""


class SimulatedOp(Protocol):
    """What the fit reads of a row's simulation (:class:`~coaccel.targets.gpu.measured.RowSim`).

    Attributes:
        sim_us: simulated time of the op, µs. freq_mhz: SM clock of the config, MHz.
        regime: ``"dram"`` or ``"l2"`` (read by the per-regime efficiency only).
    """

    @property
    def sim_us(self) -> float: ...

    @property
    def freq_mhz(self) -> float: ...

    @property
    def regime(self) -> str: ...


class MeasuredOp(Protocol):
    """What the fit reads of a measured row (:class:`~coaccel.targets.gpu.measured.MeasuredRow`).

    Attributes:
        measured_us: measured time of one op, µs. library: the kernel library's key.
    """

    @property
    def measured_us(self) -> float: ...

    @property
    def library(self) -> str: ...


# -- the calibration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryParams:
    """Fitted parameters of one kernel library (or the pooled fit).

    Attributes:
        library: the library key (``"(pooled)"`` for the pooled fit).
        floor_kcycles: fixed work per op beyond the simulated kernels, thousands of SM cycles.
        efficiency: fraction of the simulated speed the library reaches (of a ``dram`` op
            when ``efficiency_l2`` is given).
        rows: rows the fit used.
        efficiency_l2: the fraction for an op the warm L2 serves (``l2`` regime), when the
            efficiency is fitted per regime (:data:`EFFICIENCY_FORMS`); None: ``efficiency``.
    """

    library: str
    floor_kcycles: float
    efficiency: float
    rows: int
    efficiency_l2: float | None = None

    def floor_us(self, freq_mhz: float) -> float:
        """The floor on a GPU of SM clock ``freq_mhz``, µs."""
        return self.floor_kcycles * 1000.0 / freq_mhz

    def efficiency_of(self, regime: str) -> float:
        """The efficiency of an op of ``regime``."""
        return self.efficiency_l2 if regime == "l2" and self.efficiency_l2 is not None \
            else self.efficiency  # fmt: skip

    def predict_us(self, sim: SimulatedOp) -> float:
        """``floor_us(f) + sim_us / efficiency``, µs (the efficiency of the op's regime)."""
        eff = self.efficiency if self.efficiency_l2 is None else self.efficiency_of(sim.regime)
        return self.floor_us(sim.freq_mhz) + sim.sim_us / eff


POOLED = "(pooled)"


def _nonneg_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients, by enumerating the active sets (the
    problems here have two columns)."""
    n = x.shape[1]
    best, best_err = np.zeros(n), float(np.sum(y**2))
    for mask in range(1, 2**n):
        cols = [j for j in range(n) if mask >> j & 1]
        sub = x[:, cols]
        if np.linalg.matrix_rank(sub) < len(cols):
            continue
        c, *_ = np.linalg.lstsq(sub, y, rcond=None)
        if np.any(c < 0):
            continue
        err = float(np.sum((sub @ c - y) ** 2))
        if err < best_err - 1e-15:
            best = np.zeros(n)
            best[cols] = c
            best_err = err
    return best


def fit_library(
    library: str,
    measured_us: Sequence[float],
    sims: Sequence[SimulatedOp],
    *,
    efficiency_form: EfficiencyForm = "single",
) -> LibraryParams:
    """Fit ``floor_kcycles`` and ``efficiency`` of one library (or the pool).

    Minimizes ``sum((predicted / measured - 1)^2)`` over the rows with a non-negative floor
    and inverse efficiency (module docstring); with ``efficiency_form="regime"`` one inverse
    efficiency per regime (a regime without rows takes the other's).

    Args:
        library: the key to record. measured_us: measured times, µs. sims: their simulations.
        efficiency_form: one efficiency, or one per regime (:data:`EFFICIENCY_FORMS`).

    Returns:
        :class:`LibraryParams`.

    Raises:
        ValueError: no rows, or no row with simulated time (the efficiency is undefined).
    """
    m = np.asarray(measured_us, dtype=np.float64)
    if not m.size:
        raise ValueError(f"fit_library({library!r}): no rows")
    t = np.array([s.sim_us for s in sims])
    kcyc_us = np.array([1000.0 / s.freq_mhz for s in sims])
    if efficiency_form == "regime":
        is_l2 = np.array([s.regime == "l2" for s in sims])
        if is_l2.any() and not is_l2.all():
            x = np.stack([kcyc_us, np.where(is_l2, 0.0, t), np.where(is_l2, t, 0.0)], axis=1)
            floor, inv_d, inv_l = _nonneg_lstsq(x / m[:, None], np.ones_like(m))
            if inv_d <= 0 or inv_l <= 0:
                raise ValueError(f"fit_library({library!r}): the simulated times of a regime "
                                 "explain nothing")  # fmt: skip
            return LibraryParams(library=library, floor_kcycles=float(floor),
                                 efficiency=float(1 / inv_d), rows=int(m.size),
                                 efficiency_l2=float(1 / inv_l))  # fmt: skip
    elif efficiency_form != "single":
        raise ValueError(f"efficiency_form={efficiency_form!r}; valid: "
                         f"{', '.join(EFFICIENCY_FORMS)}")  # fmt: skip
    x = np.stack([kcyc_us, t], axis=1) / m[:, None]
    floor, inv = _nonneg_lstsq(x, np.ones_like(m))
    if inv <= 0:
        raise ValueError(f"fit_library({library!r}): the simulated times explain nothing")
    eff = float(1 / inv)
    return LibraryParams(library=library, floor_kcycles=float(floor), efficiency=eff,
                         rows=int(m.size),
                         efficiency_l2=eff if efficiency_form == "regime" else None)  # fmt: skip


@dataclass(frozen=True)
class Calibration:
    """Per-library parameters and the pooled fit they fall back to.

    Attributes:
        libraries: library key -> its fit.
        pooled: the fit of all training rows together (for an unseen library).
        gpus: configs of the training rows.
        rows: training rows.
        notes: libraries left to the pooled fit and why.
    """

    libraries: Mapping[str, LibraryParams]
    pooled: LibraryParams
    gpus: tuple[str, ...]
    rows: int
    notes: tuple[str, ...] = ()

    def params(self, library: str) -> tuple[LibraryParams, bool]:
        """The parameters of a library and whether they are its own (False: pooled)."""
        p = self.libraries.get(library)
        return (p, True) if p is not None else (self.pooled, False)


def fit_calibration(
    rows: Sequence[MeasuredOp],
    sims: Sequence[SimulatedOp],
    gpus: Sequence[str] = (),
    *,
    efficiency_form: EfficiencyForm = "single",
) -> Calibration:
    """Fit the pooled parameters, then each library's (module docstring).

    Args:
        rows: the training rows. sims: their simulations (same order).
        gpus: their configs, for the record.
        efficiency_form: one efficiency per library, or one per regime.

    Returns:
        :class:`Calibration`.
    """
    meas = [r.measured_us for r in rows]
    notes: list[str] = []
    form = efficiency_form
    try:
        try:
            pooled = fit_library(POOLED, meas, sims, efficiency_form=form)
        except ValueError:
            if form == "single":
                raise
            pooled = fit_library(POOLED, meas, sims)
            notes.append("the pooled fit has one efficiency: a regime's simulated times "
                         "explain nothing")  # fmt: skip
    except ValueError:
        # the measured times do not grow with the simulated ones: keep the simulator's speed
        # and fit the floor alone
        m = np.asarray(meas)
        t = np.array([s.sim_us for s in sims])
        kc = np.array([1000.0 / s.freq_mhz for s in sims])
        x = (kc / m)[:, None]
        (floor,) = _nonneg_lstsq(x, 1.0 - t / m)
        pooled = LibraryParams(POOLED, float(floor), 1.0, len(rows))
        notes.append("the measured times do not grow with the simulated ones: the pooled "
                     "efficiency is fixed at 1 and only its floor is fitted")  # fmt: skip
    libs: dict[str, LibraryParams] = {}
    for lib in sorted({r.library for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.library == lib]
        if len(idx) < MIN_ROWS_PER_LIBRARY:
            notes.append(f"{lib}: {len(idx)} row(s), fewer than {MIN_ROWS_PER_LIBRARY}: "
                         "pooled fit")  # fmt: skip
            continue
        try:
            libs[lib] = fit_library(lib, [meas[i] for i in idx], [sims[i] for i in idx],
                                    efficiency_form=form)  # fmt: skip
        except ValueError:
            notes.append(f"{lib}: its measured times do not grow with the simulated ones: "
                         "pooled fit")  # fmt: skip
    return Calibration(libraries=libs, pooled=pooled, gpus=tuple(sorted(set(gpus))),
                       rows=len(rows), notes=tuple(notes))  # fmt: skip


# -- intervals and metrics ---------------------------------------------------------------------


def conformal_halfwidth(scores: npt.ArrayLike, coverage: float = COVERAGE) -> float:
    """Split-conformal half-width of a symmetric interval on the log ratio.

    The ``ceil((n + 1) * coverage)``-th smallest of the absolute scores (infinite when
    there are too few scores for that coverage).

    Args:
        scores: residuals ``log(measured / predicted)`` of rows not used for the fit.
        coverage: target coverage in (0, 1).

    Returns:
        The half-width ``q``: the interval is ``[p * exp(-q), p * exp(q)]``.
    """
    s = np.sort(np.abs(np.asarray(scores, dtype=np.float64)))
    k = math.ceil((s.size + 1) * coverage)
    return float(s[k - 1]) if 1 <= k <= s.size else math.inf


def loo_predictions(
    rows: Sequence[MeasuredOp],
    sims: Sequence[SimulatedOp],
    *,
    efficiency_form: EfficiencyForm = "single",
) -> np.ndarray:
    """Leave-one-out predictions of each row from a fit on the others (of the same
    ``efficiency_form``), µs."""
    out = np.empty(len(rows))
    for i in range(len(rows)):
        keep = [j for j in range(len(rows)) if j != i]
        cal = fit_calibration([rows[j] for j in keep], [sims[j] for j in keep],
                              efficiency_form=efficiency_form)  # fmt: skip
        p, _ = cal.params(rows[i].library)
        out[i] = p.predict_us(sims[i])
    return out


def _regime_scores(reg: np.ndarray, scores: np.ndarray, r: str, coverage: float) -> np.ndarray:
    """The scores of regime ``r``; all scores when the regime has too few for a finite
    quantile at ``coverage`` (fewer than ``coverage / (1 - coverage)``)."""
    s = scores[reg == r]
    return s if math.isfinite(conformal_halfwidth(s, coverage)) else scores


def regime_halfwidths(
    regimes: Sequence[str], scores: np.ndarray, coverage: float
) -> dict[str, float]:
    """Conformal half-width per regime, in :data:`REGIMES` order (:func:`_regime_scores`)."""
    reg = np.asarray(regimes)
    return {r: conformal_halfwidth(_regime_scores(reg, scores, r, coverage), coverage)
            for r in REGIMES}  # fmt: skip


def loo_coverage(regimes: Sequence[str], scores: np.ndarray, coverage: float) -> np.ndarray:
    """Per row: is its leave-one-out score inside the half-width of the other rows' scores
    (of its regime, :func:`_regime_scores`)?"""
    reg = np.asarray(regimes)
    inside = np.zeros(scores.size, dtype=bool)
    for i in range(scores.size):
        others = np.arange(scores.size) != i
        q = conformal_halfwidth(_regime_scores(reg[others], scores[others], reg[i], coverage),
                                coverage)  # fmt: skip
        inside[i] = abs(scores[i]) <= q
    return inside


def kendall_tau(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Kendall's tau-b of two sequences (ties counted as in tau-b; NaN for fewer than 2
    points or a constant sequence)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size < 2:
        return math.nan
    i, j = np.triu_indices(a.size, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = i.size
    n1 = int(np.sum(da == 0))
    n2 = int(np.sum(db == 0))
    denom = math.sqrt((n0 - n1) * (n0 - n2))
    return float(np.sum(da * db) / denom) if denom else math.nan


@dataclass(frozen=True)
class ErrorSummary:
    """Errors of a set of predictions against measurements.

    Attributes:
        rows: rows. mape_pct: mean absolute percentage error. median_ape_pct, p90_ape_pct,
        max_ape_pct: median, 90th percentile and largest absolute percentage error.
        bias_pct: mean signed error ``predicted / measured - 1``, percent (positive: slow).
        kendall_tau: Kendall's tau-b of predicted against measured.
        coverage: share of measurements inside their interval (NaN without intervals).
    """

    rows: int
    mape_pct: float
    median_ape_pct: float
    p90_ape_pct: float
    max_ape_pct: float
    bias_pct: float
    kendall_tau: float
    coverage: float


def error_summary(
    measured: npt.ArrayLike,
    predicted: npt.ArrayLike,
    lower: npt.ArrayLike | None = None,
    upper: npt.ArrayLike | None = None,
) -> ErrorSummary:
    """:class:`ErrorSummary` of predictions (intervals optional)."""
    m = np.asarray(measured, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    if not m.size:
        nan = math.nan
        return ErrorSummary(0, nan, nan, nan, nan, nan, nan, nan)
    rel = p / m - 1.0
    ape = np.abs(rel) * 100.0
    cov = math.nan
    if lower is not None and upper is not None:
        lo, hi = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        cov = float(np.mean((lo <= m) & (m <= hi)))
    return ErrorSummary(
        rows=int(m.size),
        mape_pct=float(ape.mean()),
        median_ape_pct=float(np.median(ape)),
        p90_ape_pct=float(np.percentile(ape, 90)),
        max_ape_pct=float(ape.max()),
        bias_pct=float(rel.mean() * 100.0),
        kendall_tau=kendall_tau(p, m),
        coverage=cov,
    )


def group_summaries(
    groups: Mapping[str, Sequence[int]],
    measured: np.ndarray,
    predicted: np.ndarray,
    lower: np.ndarray | None,
    upper: np.ndarray | None,
    inside: np.ndarray | None = None,
) -> dict[str, ErrorSummary]:
    """:func:`error_summary` of each non-empty group of row indices; with ``inside`` (per row:
    inside its leave-one-out interval), the coverage is the share of the group inside."""
    out = {}
    for g, idx in groups.items():
        ix = np.asarray(idx, dtype=np.int64)
        if not ix.size:
            continue
        s = error_summary(measured[ix], predicted[ix],
                          None if lower is None else lower[ix],
                          None if upper is None else upper[ix])  # fmt: skip
        if inside is not None:
            s = ErrorSummary(**{**s.__dict__, "coverage": float(np.mean(inside[ix]))})
        out[g] = s
    return out
