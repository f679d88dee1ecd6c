"""Validation rows shared by every `coaccel validate <paper>`: Target and Validation.

A :class:`Target` is one published figure beside our value, its unit, the agreement asked for,
the error, whether the figure was used in a fit (``fitted``) or not (``predicted``), whether our
value comes from real or synthetic inputs, and a note saying how our value was obtained and what
drives a difference. A :class:`Validation` is the rows plus notes; the report layer prints and
writes it.

Each row is judged by one rule (:attr:`Target.rule`), and every row of a group by the same one:

* ``relative``: ``|ours / paper - 1| <= tolerance_pct`` (a stated percentage);
* ``absolute``: ``|ours - paper| <= tolerance_abs`` in the row's unit (a curve's MAPE against
  0 %, a correlation against 1);
* ``band``: the published figure lies inside our band ``[ours_low, ours_high]`` (our value
  under the stated perturbation of the model's inputs);
* none: an information row (``info``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["DATA_KINDS", "FIT_ROLES", "RULES", "ErrorSummary", "Target", "Validation"]

FIT_ROLES = ("predicted", "fitted")
"""Values of :attr:`Target.fit`: ``predicted`` (the paper's figure was not used in any fit),
``fitted`` (it is, or is computed from, a point a model was fitted on)."""

DATA_KINDS = ("", "real", "synthetic")
"""Values of :attr:`Target.data`: the inputs behind our value are ``real`` (a real model's
activations, a measured curve) or ``synthetic`` (a seeded generator); empty where our value does
not depend on input data."""

RULES = ("relative", "absolute", "band", "")
"""Values of :attr:`Target.rule` (module docstring); empty: no rule, an information row."""


@dataclass(frozen=True)
class Target:
    """One validation target.

    Attributes:
        group: ``pe_area``, ``pe_energy``, ``claim``, ``system_energy`` or ``speedup``.
        name: what is compared.
        ours: our value.
        paper: the paper's value (NaN when the sources give none); for a measured figure, the
            measurement.
        unit: the unit of both.
        tolerance_pct: the agreement asked for, percent of the paper's value (None: none
            stated).
        ours_sigma: one-sigma uncertainty of our value (NaN if not stated).
        ours_loo: our value predicted without this point in the fit (NaN if not a fit point).
        ours_as_paper: our simulated value counted the way the paper's model counts (NaN
            where not applicable): system energy without the DRAM traffic [R-PM] has no term
            for, speedups without the weight-loading cycles [R-PM] does not model. It
            attributes a difference; :attr:`status` is always judged on :attr:`ours`.
        source: where the paper's value comes from.
        note: how our value was obtained and, where we differ, why.
        fit: ``"fitted"`` when the paper's figure is, or is computed from, a point the PE
            model was fitted on (agreement is in sample: read :attr:`ours_loo` for how well
            the model predicts it), ``"predicted"`` when it was not used in any fit.
    """

    group: str
    name: str
    ours: float
    paper: float
    unit: str
    tolerance_pct: float | None
    source: str
    note: str = ""
    ours_sigma: float = math.nan
    ours_loo: float = math.nan
    ours_as_paper: float = math.nan
    fit: Literal["fitted", "predicted"] = "predicted"
    ours_low: float = math.nan
    ours_high: float = math.nan
    tolerance_abs: float | None = None
    data: Literal["", "real", "synthetic"] = ""

    def __post_init__(self) -> None:
        where = f"Target {self.name!r}"
        if self.fit not in FIT_ROLES:
            raise ValueError(
                f"{where}: fit must be one of {', '.join(FIT_ROLES)}, got {self.fit!r}"
            )
        if self.data not in DATA_KINDS:
            valid = ", ".join(repr(d) for d in DATA_KINDS)
            raise ValueError(f"{where}: data must be one of {valid}, got {self.data!r}")
        if math.isnan(self.ours_low) != math.isnan(self.ours_high):
            raise ValueError(f"{where}: a band needs both ours_low and ours_high")
        if self.ours_low > self.ours_high:
            raise ValueError(
                f"{where}: band [{self.ours_low:g}, {self.ours_high:g}] is out of order"
            )
        rules = [
            name
            for name, given in (
                ("a band", self.has_band),
                ("tolerance_pct", self.tolerance_pct is not None),
                ("tolerance_abs", self.tolerance_abs is not None),
            )
            if given
        ]
        if len(rules) > 1:
            raise ValueError(f"{where}: one rule per row, got {' and '.join(rules)}")

    @property
    def has_band(self) -> bool:
        """Whether the row carries a band (:attr:`ours_low`, :attr:`ours_high`)."""
        return not math.isnan(self.ours_low)

    @property
    def rule(self) -> Literal["relative", "absolute", "band", ""]:
        """How the row is judged (:data:`RULES`, module docstring)."""
        if self.has_band:
            return "band"
        if self.tolerance_pct is not None:
            return "relative"
        if self.tolerance_abs is not None:
            return "absolute"
        return ""

    @property
    def error_pct(self) -> float:
        """``100 * (ours / paper - 1)`` (NaN without a paper value)."""
        if math.isnan(self.paper) or self.paper == 0:
            return math.nan
        return 100.0 * (self.ours / self.paper - 1.0)

    @property
    def loo_error_pct(self) -> float:
        """Error of the leave-one-out prediction, percent."""
        if math.isnan(self.ours_loo) or math.isnan(self.paper):
            return math.nan
        return 100.0 * (self.ours_loo / self.paper - 1.0)

    @property
    def as_paper_error_pct(self) -> float:
        """Error of :attr:`ours_as_paper`, percent."""
        if math.isnan(self.ours_as_paper) or math.isnan(self.paper):
            return math.nan
        return 100.0 * (self.ours_as_paper / self.paper - 1.0)

    @property
    def status(self) -> Literal["ok", "differs", "no paper value", "baseline missing", "info"]:
        """``ok`` when the row's rule (:attr:`rule`) holds, ``differs`` when it does not,
        ``info`` without a rule, ``no paper value`` without a published figure, ``baseline
        missing`` when our side cannot be computed (a figure the sources lack)."""
        if math.isnan(self.ours):
            return "baseline missing"
        if math.isnan(self.paper):
            return "no paper value"
        rule = self.rule
        if rule == "band":
            # inside means inside: the band's ends are computed like our value
            return "ok" if self.ours_low <= self.paper <= self.ours_high else "differs"
        if rule == "relative":
            # 1e-9 points of slack: 110 vs 100 at ±10 % is within, whatever the float rounding.
            tol = self.tolerance_pct or 0.0
            return "ok" if abs(self.error_pct) <= tol + 1e-9 else "differs"
        if rule == "absolute":
            tol = self.tolerance_abs or 0.0
            return "ok" if abs(self.ours - self.paper) <= tol * (1 + 1e-12) else "differs"
        return "info"

    @property
    def loo_status(self) -> Literal["ok", "differs", ""]:
        """The leave-one-out prediction judged against the same tolerance: ``ok`` or
        ``differs``; empty without a leave-one-out value or a tolerance."""
        if self.tolerance_pct is None or math.isnan(self.loo_error_pct):
            return ""
        return "ok" if abs(self.loo_error_pct) <= self.tolerance_pct + 1e-9 else "differs"


@dataclass(frozen=True)
class ErrorSummary:
    """The error of like rows taken together: the judged rows of one group, in one unit.

    Attributes:
        group: the rows' group.
        unit: the unit every row shares.
        n: how many rows.
        rms_pct: root mean square of their errors, percent.
        max_abs_pct: largest absolute error, percent.
        fit: ``"fitted"``, ``"predicted"`` or ``"mixed"``.
    """

    group: str
    unit: str
    n: int
    rms_pct: float
    max_abs_pct: float
    fit: str


@dataclass(frozen=True)
class Validation:
    """All validation targets plus the context needed to read them.

    Attributes:
        targets: the rows.
        breakdowns: cost breakdowns behind some rows (HBQ: system energy), keyed ``(model, arch)``.
        sim_mode: simulator mode of the system rows (``cycle`` / ``analytical``).
        notes: general remarks (what was simulated how, what is missing).
    """

    targets: tuple[Target, ...]
    breakdowns: Mapping[tuple[str, str], Any] = field(default_factory=lambda: MappingProxyType({}))
    sim_mode: str = ""
    notes: tuple[str, ...] = ()

    def select(self, group: str) -> list[Target]:
        """The targets of one group."""
        return [t for t in self.targets if t.group == group]

    def counts(self) -> dict[str, int]:
        """Number of targets per status."""
        out: dict[str, int] = {}
        for t in self.targets:
            out[t.status] = out.get(t.status, 0) + 1
        return out

    def counts_by_fit(self) -> dict[str, dict[str, int]]:
        """Number of targets per status, separately for ``predicted`` and ``fitted`` rows.

        Returns:
            ``{"predicted": {status: n}, "fitted": {status: n}}`` (a role without rows is left
            out).
        """
        out: dict[str, dict[str, int]] = {}
        for role in ("predicted", "fitted"):
            for t in self.targets:
                if t.fit == role:
                    c = out.setdefault(role, {})
                    c[t.status] = c.get(t.status, 0) + 1
        return out

    def error_summary(self, group: str) -> ErrorSummary:
        """RMS and largest error over the like rows of a group.

        Only rows that are judged (a paper value, our value and a rule: status ``ok`` or
        ``differs``) and have a relative error (not a MAPE against 0 %) are taken; information
        rows (no rule: breakdowns, terms in other units) never enter an average.

        Args:
            group: the group (``"system_energy"``).

        Returns:
            The :class:`ErrorSummary` (``n`` 0 and NaN errors when no row is judged).

        Raises:
            ValueError: the judged rows of the group do not share one unit, so their errors
                are not alike.
        """
        rows = [
            t
            for t in self.select(group)
            if t.status in ("ok", "differs") and not math.isnan(t.error_pct)
        ]
        units = sorted({t.unit for t in rows})
        if len(units) > 1:
            raise ValueError(
                f"validation group {group!r}: judged rows in several units ({', '.join(units)}) "
                "cannot be averaged together"
            )
        errs = [t.error_pct for t in rows]
        fits = {t.fit for t in rows}
        return ErrorSummary(
            group=group,
            unit=units[0] if units else "",
            n=len(errs),
            rms_pct=math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else math.nan,
            max_abs_pct=max((abs(e) for e in errs), default=math.nan),
            fit=fits.pop() if len(fits) == 1 else ("mixed" if fits else ""),
        )

    def loo_outside(self) -> list[Target]:
        """Fitted rows whose leave-one-out prediction is outside the row's tolerance."""
        return [t for t in self.targets if t.fit == "fitted" and t.loo_status == "differs"]

    def loo_max_abs_error_pct(self, within: bool = True) -> float:
        """Largest leave-one-out error (absolute, percent) of the fitted rows with a
        tolerance: over those within it (``within=True``) or over all of them.

        Returns:
            The error, or NaN when no fitted row has a leave-one-out value.
        """
        errs = [
            abs(t.loo_error_pct)
            for t in self.targets
            if t.fit == "fitted" and t.loo_status and (not within or t.loo_status == "ok")
        ]
        return max(errs) if errs else math.nan
