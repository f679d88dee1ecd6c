"""Cost breakdowns with provenance: one stored sweep point re-run and priced by component.

Part of :mod:`coaccel.dse.analysis`, which re-exports every public name here (import them from
there). Pure computation, no files.

Public: :func:`point_breakdown` re-runs :func:`coaccel.simulate` and
:func:`coaccel.cost.evaluate` for one stored point and lists every component's area and energy
(:class:`ComponentFigure`, gathered in a :class:`PointBreakdown`) with unit, one-sigma
uncertainty and source, plus whether the model behind the figure was fitted on that very design,
predicts it or is a published figure used as is (:data:`ROLES`), with the validation error from
:mod:`coaccel.validate.pe` and the target's system-energy validation;
:func:`component_figures` does the listing for a breakdown already computed.

Internal: ``_pe_validation`` / ``_cal_pes`` / ``_cal_pe`` (the PE model's calibration and
leave-one-out errors), ``_pe_figure``, ``_buffer_figure`` and ``_published_figure`` (one figure
of a MAC array, an SRAM buffer, anything else), ``_component_kinds`` (which priced component is
which) and ``_base`` (the spec's base architecture).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from ..spine.errors import CoaccelError
from .spec import LoadedSpec
from .store import Row

__all__ = [
    "ROLES",
    "ComponentFigure",
    "PointBreakdown",
    "component_figures",
    "point_breakdown",
]

ROLES = ("fitted", "predicted", "published")
"""Values of :attr:`ComponentFigure.role`: ``fitted`` (the model was fitted on a published
figure of this very design: agreement is in sample), ``predicted`` (the model computes a design
it was not fitted on), ``published`` (a published figure used as is, times simulated counts)."""

_SRAM_ENERGY_DEPTHS = (128, 256)
"""Bank depths of the two SRAM energies the SRAM model is solved from ([R-PM]
src/perf_model.py: the ACT-buffer read at depth 128 and the PSUM read-modify-write at depth
256): at these depths its per-bit energy reproduces them exactly."""


@dataclass(frozen=True)
class ComponentFigure:
    """One figure of a design's cost breakdown.

    Attributes:
        component: component name (``pe_array``, ``act_buffer``, ``dram``, ``leakage``...).
        quantity: ``"area"`` or ``"energy"``.
        value: the figure (µm² for area, J for energy).
        unit: ``"um2"`` or ``"J"``.
        sigma: one-sigma uncertainty, same unit.
        source: where the figure comes from (model and table, with reference keys).
        model: which model produced it (``PE model``, ``SRAM model``, ``published figure``...).
        role: one of :data:`ROLES`.
        validation_error_pct: the validation error of that model for this figure, percent:
            the leave-one-out error of a fitted design, the RMS leave-one-out error of the
            model for a predicted one; NaN where no validation exists.
        validation: what the validation error is and where it comes from.
    """

    component: str
    quantity: str
    value: float
    unit: str
    sigma: float
    source: str
    model: str
    role: str
    validation_error_pct: float
    validation: str


@dataclass(frozen=True)
class PointBreakdown:
    """A stored point re-evaluated for its cost breakdown.

    Attributes:
        row: the stored row.
        breakdown: the :class:`~coaccel.cost.CostBreakdown` of the re-run.
        figures: every component's area and energy with provenance.
        totals: the whole design's totals, ``area`` (µm²) and ``energy`` (J), as figures (the
            energy's role and validation error from the system-energy validation where the
            simulator has one).
        digest_matches: the re-built architecture's config digest equals the stored one (the
            store was computed from this spec's base architecture).
        energy_matches: the re-run's total energy equals the stored ``energy_j`` exactly.
    """

    row: Row
    breakdown: Any
    figures: tuple[ComponentFigure, ...]
    totals: tuple[ComponentFigure, ...]
    digest_matches: bool
    energy_matches: bool


@functools.cache
def _pe_validation() -> tuple[dict[tuple[str, str], Any], dict[str, tuple[float, int]]]:
    """PE validation rows of :func:`coaccel.validate.pe.pe_targets`.

    Returns:
        ``{(quantity, label): Target}`` for the calibration points, and per quantity the RMS
        leave-one-out error (percent) over the informative whole-PE published points with how
        many there are.
    """
    from ..cost import pe_model
    from ..validate.pe import pe_targets

    by_name = {t.name: t for t in pe_targets()}
    rows: dict[tuple[str, str], Any] = {}
    errs: dict[str, list[float]] = {"area": [], "energy": []}
    for p in pe_model().calibration:
        t = by_name.get(p.label)
        if t is None or not p.whole_pe or not p.published:
            continue
        rows[(p.quantity, p.label)] = t
        if p.loo_informative and not math.isnan(t.loo_error_pct):
            errs[p.quantity].append(t.loo_error_pct)
    rms = {
        q: (math.sqrt(sum(e * e for e in v) / len(v)) if v else math.nan, len(v))
        for q, v in errs.items()
    }
    return rows, rms


def _pe_figure(name: str, quantity: str, value: float, sigma: float, pt: Any) -> ComponentFigure:
    unit = "um2" if quantity == "area" else "J"
    if pt.model is None:
        return ComponentFigure(
            name, quantity, value, unit, sigma, pt.source, "published per-MAC figure",
            "published", math.nan, "a published figure used as is: no model to validate",
        )  # fmt: skip
    rows, rms = _pe_validation()
    pe = pt.model.pe
    hit = next(
        (t for (q, _), t in rows.items() if q == quantity and _cal_pe(q, t.name) == pe), None
    )
    if hit is not None:
        return ComponentFigure(
            name, quantity, value, unit, sigma, pt.source, "PE model", "fitted",
            hit.loo_error_pct,
            f"fitted on the published point '{hit.name}' ({hit.source}): in-sample error "
            f"{hit.error_pct:+.2f} %; the error given is the leave-one-out prediction's "
            "(model refitted without that point; coaccel validate hbq)",
        )  # fmt: skip
    err, n = rms[quantity]
    return ComponentFigure(
        name, quantity, value, unit, sigma, pt.source, "PE model", "predicted",
        err,
        f"not a calibration point: the error given is the PE model's RMS leave-one-out error "
        f"over {n} published whole-PE {quantity} points (coaccel validate hbq, pe_{quantity})",
    )  # fmt: skip


@functools.cache
def _cal_pes() -> dict[tuple[str, str], Any]:
    from ..cost import pe_model

    return {(p.quantity, p.label): p.pe for p in pe_model().calibration}


def _cal_pe(quantity: str, label: str) -> Any:
    return _cal_pes().get((quantity, label))


def component_figures(
    arch: Any, breakdown: Any, priced: Any, node_nm: float = 28
) -> list[ComponentFigure]:
    """Every component's area and energy with unit, sigma, source, model role and validation.

    Args:
        arch: the loaded architecture config.
        breakdown: its :class:`~coaccel.cost.CostBreakdown` for a run.
        priced: the run's :class:`~coaccel.sim.common.priced.PricedComponents` (the target's
            ``priced_components(arch, result)``), which says which component is which.
        node_nm: technology node of the breakdown.

    Returns:
        Area figures (µm²) in breakdown order, then energy figures (J).
    """
    from ..cost import sram_model

    cb = breakdown
    kinds = _component_kinds(priced, node_nm)
    sm = sram_model()
    fit_err = 100.0 * max(abs(e) for e in sm.area_fit_errors)
    out: list[ComponentFigure] = []
    for quantity, values, sigmas in (
        ("area", cb.area_um2, cb.area_sigma_um2),
        ("energy", cb.energy_j, cb.energy_sigma_j),
    ):
        unit = "um2" if quantity == "area" else "J"
        for name, value in values.items():
            sigma = float(sigmas.get(name, math.nan))
            src = " ".join(str(cb.sources.get(name, "")).split())
            kind, obj = kinds.get(name, ("other", None))
            if kind == "mac":
                out.append(_pe_figure(name, quantity, float(value), sigma, obj))
            elif kind == "buffer":
                out.append(
                    _buffer_figure(name, quantity, float(value), unit, sigma, src, obj, fit_err)
                )
            else:
                out.append(_published_figure(name, quantity, float(value), unit, sigma, src, kind))
    return out


def _component_kinds(priced: Any, node_nm: float) -> dict[str, tuple[str, Any]]:
    """Component name -> (``mac``, ``buffer``, ``logic`` or ``offchip``; what prices it)."""
    from ..cost import mac_point

    kinds: dict[str, tuple[str, Any]] = {}
    for m in priced.macs:
        kinds[m.name] = ("mac", mac_point(m, node_nm))
    for b in priced.buffers:
        kinds[b.name] = ("buffer", b)
    for g in priced.logic:
        kinds[g.name] = ("logic", g)
    for d in priced.offchip:
        kinds[d.name] = ("offchip", d)
    return kinds


def _buffer_figure(
    name: str,
    quantity: str,
    value: float,
    unit: str,
    sigma: float,
    src: str,
    buf: Any,
    fit_err: float,
) -> ComponentFigure:
    """A buffer's SRAM area or energy figure, fitted or predicted by the SRAM model.

    Args:
        name: the component.
        quantity: ``area`` or ``energy``.
        value: the figure (µm² or J).
        unit: ``um2`` or ``J``.
        sigma: its one-sigma uncertainty, same unit.
        src: its source.
        buf: the priced buffer (``depth_words``, ``bank_width_bits``, ``banks``).
        fit_err: the SRAM area model's largest in-sample fit error (%).
    """
    from ..cost import sram_cost

    if quantity == "area":
        s = sram_cost(buf.depth_words, buf.bank_width_bits, banks=buf.banks)
        if s.in_calibrated_range:
            role, err = "fitted", fit_err
            note = (
                "within the calibrated macro sizes: the per-bit area fits the two "
                f"[R-ACC] register-file macros within {fit_err:.2f} % (in sample)"
            )
        else:
            role, err = "predicted", math.nan
            note = (
                "beyond the calibrated macro sizes (CACTI-style amortisation, a "
                "stated assumption): no independent check; see the 1-sigma"
            )
    elif buf.depth_words in _SRAM_ENERGY_DEPTHS:
        role, err = "fitted", 0.0
        note = (
            f"bank depth {buf.depth_words} is one of the two [R-PM] SRAM "
            "energies the per-bit energy is solved from (exact there)"
        )
    else:
        role, err = "predicted", math.nan
        note = (
            f"bank depth {buf.depth_words}: interpolated / extrapolated from "
            "the two [R-PM] SRAM energies; no independent check"
        )
    return ComponentFigure(name, quantity, value, unit, sigma, src, "SRAM model", role, err, note)


def _published_figure(
    name: str, quantity: str, value: float, unit: str, sigma: float, src: str, kind: str
) -> ComponentFigure:
    """A logic, off-chip or other component's figure: a published figure used as is."""
    model = {
        "logic": "published per-lane figure",
        "offchip": "published energy per byte x simulated traffic",
    }.get(kind, "published figure x simulated run time")
    return ComponentFigure(
        name, quantity, value, unit, sigma, src, model, "published", math.nan,
        "a published figure used as is: no model to validate",
    )  # fmt: skip


def _base(ls: LoadedSpec) -> tuple[Any, Any]:
    from ..simulation import find_arch

    t, path = find_arch(ls.base_path)
    return t, t.load_arch(path)


def point_breakdown(spec: LoadedSpec, row: Row) -> PointBreakdown:
    """Re-run one stored point and break its cost down by component.

    Args:
        spec: the sweep's loaded spec (its base architecture and mode).
        row: a stored ``ok`` row of that sweep.

    Returns:
        The :class:`PointBreakdown`.

    Raises:
        CoaccelError: the point's architecture has no cost model.
    """
    from ..cost import evaluate
    from ..spine.config import config_digest, override

    t, base = _base(spec)
    if t.priced_components is None:
        raise CoaccelError(f"simulator kind {t.kind!r} has no cost model: no breakdown")
    arch = override(base, dict(row.params))
    mode = getattr(row, "mode", None) or spec.spec.mode  # a staged row records its own
    result = t.simulate(arch, t.load_workload(row.workload), mode=mode)
    cb = evaluate(result, arch)
    priced = t.priced_components(arch, result)
    figures = component_figures(arch, cb, priced, cb.node_nm)
    # a design priced by its memory traffic alone (a GPU) has no area: no area total
    totals = [
        ComponentFigure(
            "total", "area", cb.total_area_um2, "um2", cb.total_area_sigma_um2,
            "sum of the components' areas", "sum", "predicted", math.nan,
            "the components' roles are listed per component",
        ),
    ] if cb.area_um2 else []  # fmt: skip
    if t.energy_validation is not None:
        role, err, note = t.energy_validation()
    else:
        role, err, note = (
            "predicted",
            math.nan,
            f"no system-level validation for target kind {t.kind!r}",
        )
    totals.append(
        ComponentFigure(
            "total",
            "energy",
            cb.total_energy_j,
            "J",
            cb.total_energy_sigma_j,
            "sum of the components' energies",
            "system energy",
            role,
            err,
            note,
        )  # fmt: skip
    )
    stored = row.metrics.get("energy_j")
    return PointBreakdown(
        row=row,
        breakdown=cb,
        figures=tuple(figures),
        totals=tuple(totals),
        digest_matches=config_digest(arch) == row.config_digest,
        energy_matches=stored is not None and float(stored[0]) == cb.total_energy_j,
    )
