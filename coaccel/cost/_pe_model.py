"""PE area and energy per MAC as a model of the number format (28 nm, scalable to other nodes).

The processing element of a block-quantized accelerator ([R-BQ], [R-PE], [R-ACC]) is
decomposed into components whose logic is counted in NAND2 gate equivalents as a function of
the format's widths (:mod:`._pe_features`); one coefficient per component is fitted to
published 28 nm figures (:mod:`._pe_fit`). The model therefore *predicts* formats it was not
fitted on (other activation widths, block sizes, element and scale formats, L2 schemes), with
an uncertainty made of the calibration residual (leave-one-out), the parameter spread
(jackknife) and stated model-form terms for points outside the calibrated domain. See
``docs/cost_model.md``.

Public: :func:`pe_cost` (the Python face of ``coaccel cost pe``), :func:`pe_model` (the model
fitted to the shipped calibration, once per process), :func:`fit_pe_model`, :class:`PeModel`
(coefficients, domain terms, predictions), :class:`PeCost` (one prediction).

Internal: :func:`_parts` (a prediction split into the report components of
:data:`~._pe_features.BREAKDOWN`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..spine.config import FrozenMap
from ..spine.errors import CoaccelError
from ._pe_features import AREA_FEATURES, BREAKDOWN, ENERGY_FEATURES, pe_features
from ._pe_fit import CalibrationPoint, LooResult, _fit_quantity, _QuantityFit, _shipped_calibration
from ._pe_formats import _ACC_FORMATS, L2_SCHEMES, PeFormat, element_spec, scale_spec
from ._tables import shipped_table
from ._tech import NODES_NM, node_factors

__all__ = ["PeCost", "PeModel", "fit_pe_model", "pe_cost", "pe_model"]


@dataclass(frozen=True)
class PeCost:
    """Predicted area and energy per MAC of one PE design point.

    Attributes:
        pe: the design point.
        node_nm: technology node of the figures.
        area_um2_per_mac: area per MAC, µm².
        area_sigma_um2_per_mac: its one-sigma uncertainty, µm².
        energy_fj_per_mac: dynamic energy per MAC, fJ (at the calibration corner).
        energy_sigma_fj_per_mac: its one-sigma uncertainty, fJ.
        area_parts_um2_per_mac: area by report component (:data:`BREAKDOWN`), µm²/MAC.
        energy_parts_fj_per_mac: energy by report component, fJ/MAC.
        area_terms: relative one-sigma terms of the area uncertainty (``fit``, ``parameters``,
            ``domain``, ``node``).
        energy_terms: the same for energy.
        domain_notes: why the point is outside the calibrated domain, if it is.
    """

    pe: PeFormat
    node_nm: float
    area_um2_per_mac: float
    area_sigma_um2_per_mac: float
    energy_fj_per_mac: float
    energy_sigma_fj_per_mac: float
    area_parts_um2_per_mac: Mapping[str, float]
    energy_parts_fj_per_mac: Mapping[str, float]
    area_terms: Mapping[str, float]
    energy_terms: Mapping[str, float]
    domain_notes: tuple[str, ...]

    @property
    def area_uncertainty_pct(self) -> float:
        """Relative one-sigma area uncertainty, percent."""
        return 100.0 * self.area_sigma_um2_per_mac / self.area_um2_per_mac

    @property
    def energy_uncertainty_pct(self) -> float:
        """Relative one-sigma energy uncertainty, percent."""
        return 100.0 * self.energy_sigma_fj_per_mac / self.energy_fj_per_mac

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON (units in the key names)."""
        return {
            "format": dataclasses.asdict(self.pe),
            "node_nm": self.node_nm,
            "area_um2_per_mac": self.area_um2_per_mac,
            "area_um2_per_mac_sigma": self.area_sigma_um2_per_mac,
            "area_uncertainty_pct": self.area_uncertainty_pct,
            "energy_fj_per_mac": self.energy_fj_per_mac,
            "energy_fj_per_mac_sigma": self.energy_sigma_fj_per_mac,
            "energy_uncertainty_pct": self.energy_uncertainty_pct,
            "area_parts_um2_per_mac": dict(self.area_parts_um2_per_mac),
            "energy_parts_fj_per_mac": dict(self.energy_parts_fj_per_mac),
            "area_uncertainty_terms": dict(self.area_terms),
            "energy_uncertainty_terms": dict(self.energy_terms),
            "domain_notes": list(self.domain_notes),
            "uncertainty_is": "one sigma",
        }


@dataclass(frozen=True)
class PeModel:
    """The fitted PE model: coefficients, their jackknife spread, and the validation results.

    Attributes:
        calibration: the calibration points used.
        area: area fit (coefficients in µm²/GE).
        energy: energy fit (coefficients in fJ/GE; ``datapath`` in fJ per µm² of datapath,
            ``fp_depth`` in fJ per level, ``bq_family`` in fJ per MAC).
        loo: the leave-one-out / leave-one-group-out result of every calibration point.
    """

    calibration: tuple[CalibrationPoint, ...]
    area: _QuantityFit
    energy: _QuantityFit
    loo: tuple[LooResult, ...]

    def coefficients(self) -> list[dict[str, Any]]:
        """The fitted coefficients with units and jackknife one-sigma spread.

        Returns:
            One row per (quantity, component): ``quantity``, ``component``, ``value``,
            ``unit``, ``sigma`` (jackknife), ``source``.
        """
        rows = []
        units = {"area": "um2/GE", "energy": "fJ/GE"}
        for q, fit in (("area", self.area), ("energy", self.energy)):
            n = len(fit.jack)
            spread = np.sqrt((n - 1) / n * np.sum((fit.jack - fit.jack.mean(0)) ** 2, axis=0))
            for k, c, s in zip(fit.names, fit.coef, spread, strict=True):
                unit = units[q]
                if k == "block":
                    unit = "um2/block"
                elif k == "fp_depth":
                    unit = "fJ/(MAC*level)"
                elif k == "bq_family":
                    unit = "fJ/MAC"
                elif k == "datapath":
                    unit = "fJ/um2"
                rows.append(
                    {
                        "quantity": q,
                        "component": k,
                        "value": float(c),
                        "unit": unit,
                        "sigma": float(s),
                        "source": "NNLS fit to arch_configs/cost/pe_calibration_28nm.yaml "
                        "(relative errors); sigma = jackknife over the points",
                    }
                )
        return rows

    def domain(self, pe: PeFormat) -> tuple[float, float, tuple[str, ...]]:
        """Model-form uncertainty (relative, area and energy) of a design point.

        Returns:
            ``(area_rel, energy_rel, notes)``: quadrature sums of the ``domain_*`` terms of
            ``pe_gates.yaml`` that apply, and a note per term.
        """
        t = shipped_table("pe_gates.yaml")
        w, a = element_spec(pe.weight), element_spec(pe.act)
        s = scale_spec(pe.scale)
        terms: list[tuple[str, str]] = []
        if w.ebits not in (0, 2) or a.ebits not in (0, 2):
            terms.append(("domain_exponent_bits", "element exponent width other than 2"))
        if w.ebits == 0 or a.ebits == 0:
            terms.append(("domain_int_elements", "integer elements"))
        if (w.ebits, w.mbits) != (2, 1):
            terms.append(("domain_weight_format", "weights other than E2M1"))
        if a.ebits == 2 and a.mbits not in (1, 2, 5):
            terms.append(("domain_activation_mantissa", "interpolated activation mantissa"))
        if w.bits > 8 or a.bits > 8:
            terms.append(("domain_wide_elements", "elements wider than 8 bits"))
        if not 4 <= pe.block <= 128:
            terms.append(("domain_block", "block size outside 4..128"))
        if (s.ebits, s.mbits) not in ((5, 0), (5, 3)):
            terms.append(("domain_scale_format", "scale format other than PoT / E5M3"))
        if pe.ub is not None and (
            (pe.l2_act, pe.l2_act_bits) != ("sig1", 2)
            or (pe.l2_weight, pe.l2_weight_bits) != ("mix", 2)
        ):
            terms.append(("domain_l2_scheme", "L2 schemes other than SIG-1 2b x Mix 2b"))
        if pe.accum != "fp16":
            terms.append(("domain_accumulator", "accumulator other than FP16"))
        area = math.sqrt(sum(t.value(k) ** 2 for k, _ in terms))
        e_terms = list(terms)
        if pe.ub is not None:
            e_terms.append(("domain_l2_energy", "L2 energy rests on two published points"))
        energy = math.sqrt(sum(t.value(k) ** 2 for k, _ in e_terms))
        notes = tuple(dict.fromkeys(n for _, n in e_terms))
        return area, energy, notes

    def predict(self, pe: PeFormat, node_nm: float = 28) -> PeCost:
        """Area and energy per MAC of a design point, with one-sigma uncertainty.

        Args:
            pe: the design point.
            node_nm: technology node (28 = the calibration node; see :data:`NODES_NM`).

        Returns:
            The prediction.
        """
        f = pe_features(pe)
        nf = node_factors(node_nm)
        area = self.area.value(f)
        energy = self.energy.value(f)
        dom_a, dom_e, notes = self.domain(pe)
        a_terms = {
            "fit": self.area.rms_loo,
            "parameters": self.area.jack_sigma(f) / area,
            "domain": dom_a,
            "node": nf.area_uncertainty,
        }
        e_terms = {
            "fit": self.energy.rms_loo,
            "parameters": self.energy.jack_sigma(f) / energy,
            "domain": dom_e,
            "node": nf.energy_uncertainty,
        }
        a_rel = math.sqrt(sum(v * v for v in a_terms.values()))
        e_rel = math.sqrt(sum(v * v for v in e_terms.values()))
        a_parts = _parts(f, self.area)
        e_parts = _parts(f, self.energy)
        return PeCost(
            pe=pe,
            node_nm=float(node_nm),
            area_um2_per_mac=area * nf.area,
            area_sigma_um2_per_mac=area * nf.area * a_rel,
            energy_fj_per_mac=energy * nf.energy,
            energy_sigma_fj_per_mac=energy * nf.energy * e_rel,
            area_parts_um2_per_mac=FrozenMap({k: v * nf.area for k, v in a_parts.items()}),
            energy_parts_fj_per_mac=FrozenMap({k: v * nf.energy for k, v in e_parts.items()}),
            area_terms=FrozenMap(a_terms),
            energy_terms=FrozenMap(e_terms),
            domain_notes=notes,
        )


def _parts(f: Mapping[str, float], fit: _QuantityFit) -> dict[str, float]:
    f = fit.features(f)
    out = {}
    for name, comps in BREAKDOWN.items():
        v = sum(f[k] * c for k, c in zip(fit.names, fit.coef, strict=True) if k in comps)
        if any(k in fit.names for k in comps):
            out[name] = float(v)
    return out


def fit_pe_model(points: Sequence[CalibrationPoint] | None = None) -> PeModel:
    """Fit the PE model (area and energy) and validate it by leave-one-out.

    Args:
        points: calibration points (default: the shipped
            ``arch_configs/cost/pe_calibration_28nm.yaml``).

    Returns:
        The fitted model.
    """
    pts = tuple(points) if points is not None else _shipped_calibration().points
    area_pts = [p for p in pts if p.quantity == "area"]
    energy_pts = [p for p in pts if p.quantity == "energy"]
    if not area_pts or not energy_pts:
        raise CoaccelError("the PE model needs both area and energy calibration points")
    area_fit, area_loo = _fit_quantity(area_pts, AREA_FEATURES)
    area_coef = FrozenMap(dict(zip(AREA_FEATURES, map(float, area_fit.coef), strict=True)))
    energy_fit, energy_loo = _fit_quantity(energy_pts, ENERGY_FEATURES, area_coef)
    return PeModel(pts, area_fit, energy_fit, tuple(area_loo + energy_loo))


@functools.cache
def pe_model() -> PeModel:
    """The PE model fitted to the shipped calibration (computed once per process)."""
    return fit_pe_model()


def pe_cost(
    weight: str = "e2m1",
    act: str = "e2m2",
    block: int = 128,
    scale: str = "e5m3",
    *,
    ub: int | None = None,
    l2: str | None = None,
    l2_bits: int = 2,
    l2_weight: str | None = None,
    l2_weight_bits: int = 2,
    accum: str = "fp16",
    node_nm: float = 28,
    pe_macs: int = 128,
) -> PeCost:
    """Area and energy per MAC of a PE format (the Python face of ``coaccel cost pe``).

    Args:
        weight: weight element format (``"e2m1"``, ``"int4"``, ...).
        act: activation element format (``"e2m3"``, ``"fp16"``, ...).
        block: L1 block size B.
        scale: L1 scale format (``"pot"``, ``"e5m3"``, ``"e4m3"``, ...).
        ub: L2 micro-block size (None: an L1-only PE).
        l2: activation L2 scheme (default with ``ub``: ``"sig1"``, the final HBQ config).
        l2_bits: activation L2 code bits.
        l2_weight: weight L2 scheme (default with ``ub``: ``"mix"``).
        l2_weight_bits: weight L2 code bits.
        accum: ``"fp16"`` or ``"fp32"``.
        node_nm: technology node, one of :data:`NODES_NM`.
        pe_macs: MACs per PE.

    Returns:
        The prediction (``area_um2_per_mac``, ``energy_fj_per_mac`` and their one-sigma
        uncertainties, per-component parts).

    Raises:
        CoaccelError: an invalid format combination.

    Example:
        >>> c = pe_cost("e2m1", "e2m2", 128, "e5m3", ub=32)
        >>> round(c.area_um2_per_mac)  # HBQ-E PE, published 72.27 um2/MAC
        73
    """
    if ub is None and (l2 not in (None, "none") or l2_weight not in (None, "none")):
        raise CoaccelError("an L2 scheme (--l2/--l2-weight) needs a micro-block size (--ub)")
    pe = PeFormat(
        weight=weight,
        act=act,
        block=int(block),
        scale=scale,
        ub=ub,
        l2_act=(l2 or "sig1") if ub is not None else "none",
        l2_act_bits=int(l2_bits),
        l2_weight=(l2_weight or "mix") if ub is not None else "none",
        l2_weight_bits=int(l2_weight_bits),
        accum=accum,  # type: ignore[arg-type]
        pe_macs=int(pe_macs),
    )
    if pe.accum not in _ACC_FORMATS:
        raise CoaccelError(f"unknown accumulator {accum!r}; valid: {', '.join(_ACC_FORMATS)}")
    for name in (pe.l2_act, pe.l2_weight):
        if name not in L2_SCHEMES:
            raise CoaccelError(f"unknown L2 scheme {name!r}; valid: {', '.join(L2_SCHEMES)}")
    if block < 1:
        raise CoaccelError(f"block {block} must be >= 1")
    if ub is not None and (ub < 1 or block % ub):
        raise CoaccelError(f"block {block} must be a multiple of ub {ub} (ub >= 1)")
    if node_nm not in NODES_NM:
        raise CoaccelError(
            f"unknown node {node_nm} nm; valid: {', '.join(f'{n:g}' for n in NODES_NM)}"
        )
    return pe_model().predict(pe.check(), node_nm)
