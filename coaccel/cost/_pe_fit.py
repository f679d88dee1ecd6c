"""Fitting the PE model: calibration points, non-negative least squares, leave-one-out.

One coefficient per component (µm² per GE for area, fJ per GE per MAC for energy) is fitted by
non-negative least squares on relative errors to the published 28 nm figures of
``arch_configs/cost/pe_calibration_28nm.yaml`` ([R-BQ] rows and breakdown, [R-ACC] PE
breakdown, [R-PM] PE energies). Each point is also predicted by the fit without it
(leave-one-out) and without its whole sweep (leave-one-group-out); the leave-one-out
coefficient sets give the parameter spread (jackknife).

Public: :class:`CalibrationPoint`, :class:`CalibrationSet` (the calibration file's schema),
:func:`nnls` (Lawson-Hanson), :class:`LooResult` (a point's fitted and held-out predictions).

Internal (used by :mod:`._pe_model`):

* :func:`_shipped_calibration`: the shipped points (published, plus our Yosys-derived ones when
  that file is shipped).
* :func:`_fit_quantity`: the fit of one quantity (area or energy) and every point's
  :class:`LooResult`; :class:`_QuantityFit`: its coefficients, jackknife sets and RMS
  leave-one-out error, which evaluate a design point's value and one-sigma spread.
* :func:`_design` (the design matrix of some points) and :func:`_fit` (NNLS on relative
  errors).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt

from ..spine.config import FrozenMap, Problem, param
from ..spine.errors import CoaccelError
from ._pe_features import PART_FEATURES, _with_datapath, pe_features
from ._pe_formats import PeFormat

__all__ = ["CalibrationPoint", "CalibrationSet", "LooResult", "nnls"]


@dataclass(frozen=True)
class CalibrationPoint:
    """One published figure the model is fitted to.

    Attributes:
        label: a readable name.
        quantity: ``"area"`` (µm²/MAC) or ``"energy"`` (fJ/MAC).
        value: the published value.
        unit: ``"um2/MAC"`` or ``"fJ/MAC"``.
        source: where it comes from.
        uncertainty: relative one-sigma uncertainty of the published value.
        weight: fit weight (breakdown parts count less than whole PEs).
        group: the sweep it belongs to (leave-one-group-out).
        parts: the breakdown parts it covers (keys of :data:`PART_FEATURES`); empty = whole PE.
        pe: the design point it was measured on.
        published: True for a published figure, False for one derived from our own
            synthesis (``coaccel cost calibrate``).
        loo_informative: False when the point alone determines a coefficient (leaving it out
            leaves that coefficient free), or is not published, so its leave-one-out error is
            reported but not used as the fit uncertainty.
    """

    label: str
    quantity: Literal["area", "energy"]
    value: float = param(gt=0, unit="")
    unit: str = param()
    source: str = param()
    uncertainty: float = param(ge=0, unit="")
    pe: PeFormat = param()
    weight: float = param(default=1.0, gt=0, unit="")
    group: str = param(default="")
    parts: tuple[str, ...] = param(default=(), choices=tuple(PART_FEATURES))
    published: bool = param(
        default=True, doc="a published figure (false: derived from our own synthesis)"
    )
    loo_informative: bool = param(
        default=True,
        doc="false when the point alone determines a coefficient, so that leaving it out "
        "says nothing about the model (its uncertainty is a stated domain term instead)",
    )

    def validate(self) -> list[Problem | str]:
        """Units must match the quantity."""
        want = {"area": "um2/MAC", "energy": "fJ/MAC"}[self.quantity]
        if self.unit != want:
            return [Problem("", "unit", self.unit, f"an {self.quantity} point must be in {want}")]
        return []

    @property
    def whole_pe(self) -> bool:
        """True for a whole-PE figure (not a breakdown part)."""
        return not self.parts


@dataclass(frozen=True)
class CalibrationSet:
    """The calibration file (``arch_configs/cost/pe_calibration_28nm.yaml``).

    Attributes:
        description: what it is.
        points: the calibration points.
        sources: shared source strings (YAML anchors), by name.
    """

    VERSION: ClassVar[int] = 1

    description: str
    points: tuple[CalibrationPoint, ...]
    sources: Mapping[str, str] = param(default=FrozenMap())


@functools.cache
def _shipped_calibration() -> CalibrationSet:
    """The published calibration points, plus our Yosys-derived ones when that file is shipped
    (``pe_calibration_synth.yaml``, written by ``coaccel cost calibrate``)."""
    from ..arch_configs import path
    from ..spine.config import load_config

    cal = load_config(path("cost/pe_calibration_28nm.yaml"), CalibrationSet)
    try:
        synth = load_config(path("cost/pe_calibration_synth.yaml"), CalibrationSet)
    except FileNotFoundError:
        return cal
    return dataclasses.replace(cal, points=cal.points + synth.points)


# ---------------------------------------------------------------------------------------------
# Fitting


def nnls(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], *, max_iter: int = 1000
) -> npt.NDArray[np.float64]:
    """Non-negative least squares, ``argmin ||a x - b||`` subject to ``x >= 0``.

    The Lawson-Hanson active-set algorithm (Lawson & Hanson, Solving Least Squares Problems,
    1974, ch. 23).

    Args:
        a: (m, n) float64 matrix.
        b: (m,) float64 vector.
        max_iter: iteration limit of the outer loop.

    Returns:
        (n,) float64 solution, every entry >= 0.

    Raises:
        CoaccelError: no convergence within ``max_iter`` outer iterations.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = a.shape[1]
    passive = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    tol = 1e-10 * max(1.0, float(np.abs(a).max(initial=0.0)) * float(np.abs(b).max(initial=0.0)))
    grad = a.T @ (b - a @ x)
    for _ in range(max_iter):
        if passive.all() or grad[~passive].max() <= tol:
            return x
        j = int(np.argmax(np.where(passive, -np.inf, grad)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            bad = passive & (z <= 0)
            alpha = float(np.min(x[bad] / (x[bad] - z[bad])))
            x = x + alpha * (z - x)
            passive &= x > tol
            if not passive.any():
                x = np.zeros(n)
                break
        grad = a.T @ (b - a @ x)
    raise CoaccelError(f"nnls did not converge in {max_iter} iterations")


def _design(
    points: Sequence[CalibrationPoint],
    names: tuple[str, ...],
    area_coef: Mapping[str, float] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    x = np.zeros((len(points), len(names)))
    for i, p in enumerate(points):
        f = _with_datapath(pe_features(p.pe), area_coef)
        keep = set(names)
        if p.parts:
            keep = {k for part in p.parts for k in PART_FEATURES[part]}
        x[i] = [f[k] if k in keep else 0.0 for k in names]
    y = np.array([p.value for p in points])
    w = np.array([p.weight for p in points])
    return x, y, w


def _fit(x, y, w) -> npt.NDArray[np.float64]:
    # Relative errors: every point counts by its percentage error, not its magnitude.
    return nnls(x * (w / y)[:, None], w.copy())


@dataclass(frozen=True)
class LooResult:
    """Leave-one-out prediction of one calibration point.

    Attributes:
        label: the point.
        quantity: ``"area"`` or ``"energy"``.
        group: its sweep.
        whole_pe: False for a breakdown part.
        published: the published value.
        fitted: the full model's value.
        loo: the value predicted by the model fitted without this point.
        logo: the value predicted by the model fitted without this point's whole group.
        unit: the unit.
        is_published: whether the point is a published figure.
        informative: whether its leave-one-out error counts in the fit statistics.
    """

    label: str
    quantity: str
    group: str
    whole_pe: bool
    published: float
    fitted: float
    loo: float
    logo: float
    unit: str
    is_published: bool = True
    informative: bool = True

    @property
    def fit_error(self) -> float:
        """Relative error of the full fit."""
        return self.fitted / self.published - 1.0

    @property
    def loo_error(self) -> float:
        """Relative leave-one-out prediction error."""
        return self.loo / self.published - 1.0

    @property
    def logo_error(self) -> float:
        """Relative leave-one-group-out prediction error."""
        return self.logo / self.published - 1.0


@dataclass(frozen=True)
class _QuantityFit:
    names: tuple[str, ...]
    coef: npt.NDArray[np.float64]
    jack: npt.NDArray[np.float64]  # (n_informative, n_coef) leave-one-out coefficient sets
    rms_loo: float  # RMS relative LOO error over whole-PE points
    area_coef: Mapping[str, float] | None = None  # for the energy fit's `datapath` feature

    def features(self, f: Mapping[str, float]) -> dict[str, float]:
        return _with_datapath(f, self.area_coef)

    def value(self, f: Mapping[str, float]) -> float:
        g = self.features(f)
        return float(np.array([g[k] for k in self.names]) @ self.coef)

    def jack_sigma(self, f: Mapping[str, float]) -> float:
        g = self.features(f)
        v = np.array([g[k] for k in self.names])
        preds = self.jack @ v
        n = len(preds)
        return float(math.sqrt((n - 1) / n * float(np.sum((preds - preds.mean()) ** 2))))


def _fit_quantity(
    points: Sequence[CalibrationPoint],
    names: tuple[str, ...],
    area_coef: Mapping[str, float] | None = None,
):
    x, y, w = _design(points, names, area_coef)
    coef = _fit(x, y, w)
    n = len(points)
    loo_coef = np.empty((n, len(names)))
    for i in range(n):
        keep = np.arange(n) != i
        loo_coef[i] = _fit(x[keep], y[keep], w[keep])
    # The jackknife spread (parameter uncertainty) runs over the informative points only: a
    # point that alone fixes a coefficient leaves it free when dropped, and that spread is
    # stated as a domain term instead.
    informative = np.array([p.loo_informative for p in points])
    jack = loo_coef[informative] if informative.any() else loo_coef
    groups = [p.group or p.label for p in points]
    logo_coef = {}
    for gname in dict.fromkeys(groups):
        keep = np.array([gg != gname for gg in groups])
        logo_coef[gname] = _fit(x[keep], y[keep], w[keep]) if keep.any() else coef
    loo = []
    for i, p in enumerate(points):
        loo.append(
            LooResult(
                label=p.label,
                quantity=p.quantity,
                group=p.group,
                whole_pe=p.whole_pe,
                published=p.value,
                fitted=float(x[i] @ coef),
                loo=float(x[i] @ loo_coef[i]),
                logo=float(x[i] @ logo_coef[groups[i]]),
                unit=p.unit,
                is_published=p.published,
                informative=p.loo_informative,
            )
        )
    errs = [
        r.loo_error for r, p in zip(loo, points, strict=True) if r.whole_pe and p.loo_informative
    ]
    rms = float(math.sqrt(sum(e * e for e in errs) / len(errs))) if errs else 0.0
    return _QuantityFit(names, coef, jack, rms, area_coef), loo
