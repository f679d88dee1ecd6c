"""Accelerator-level area and energy: PE array, buffers, partial-sum logic, DRAM, leakage.

:func:`price` prices the typed description of a design and of a run
(:class:`~coaccel.sim.common.priced.PricedComponents`: MAC arrays by operand format, buffers by
geometry, fixed-function logic by kind, off-chip memory by type) that each simulator target
provides; :func:`arch_area` and :func:`evaluate` ask the architecture's target for that
description (by its ``kind:``) and price it. Every component carries its value, a one-sigma
uncertainty and its source (:class:`CostBreakdown`). The HBQ ASIC's components:

============== ============================================================================
``pe_array``    MACs x PE energy per MAC (PE model, or published figures for Amove and the
                weight-only AxCore PE whose datapaths the model does not derive)
``act_buffer``  bits moved x SRAM energy per bit at the buffer's bank depth
``wgt_buffer``  same, weight buffer
``psum_buffer`` same, partial-sum buffer (read-modify-write)
``psum_logic``  partial-sum updates x the update energy of the design's partial-sum logic
                (MXINT8: quantiser, dequantiser, FP16 adders, [R-ACC] power report; FP16/FP32:
                one FP adder per lane, ``system_28nm.yaml``)
``dram``        bytes moved (from the simulated traces) x ``DramConfig.energy_pj_per_byte``
``leakage``     total area x leakage power density x run time
============== ============================================================================

FPGA designs (:class:`~coaccel.sim.common.priced.FpgaResourceUse` components, e.g. the DeltaLLM
vector processor) are priced in resources, not area: each component's resource count goes to
:attr:`CostBreakdown.resources` (its ``area_um2`` is 0) and its energy is its operations times
the resource's energy per operation in ``arch_configs/cost/fpga_ultrascale_plus.yaml`` (DSP per
MAC, BRAM36 / URAM per byte, LUT / FF per resource-cycle); ``fpga_static`` is the programmable
logic's static power times the run time. A design without a MAC array reports the DSP energy
per MAC as its :attr:`CostBreakdown.pe`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..sim.common.priced import LogicUse, MacArray, PricedComponents
from ..spine.config import FrozenMap
from ..spine.errors import CoaccelError
from ._pe_formats import PeFormat
from ._pe_model import PeCost, pe_model
from ._sram import sram_cost, sram_model
from ._tables import shipped_table
from ._tech import node_factors

__all__ = [
    "FPGA_TABLE",
    "CostBreakdown",
    "PePoint",
    "arch_area",
    "arch_pe",
    "evaluate",
    "mac_point",
    "pe_format_of",
    "price",
]


@dataclass(frozen=True)
class PePoint:
    """PE area and energy per MAC of an architecture, with provenance.

    Attributes:
        area_um2_per_mac: area per MAC, µm².
        area_sigma_um2_per_mac: one-sigma uncertainty, µm².
        energy_fj_per_mac: dynamic energy per MAC, fJ.
        energy_sigma_fj_per_mac: one-sigma uncertainty, fJ.
        source: where the figures come from.
        model: the PE-model prediction (None for published figures).
    """

    area_um2_per_mac: float
    area_sigma_um2_per_mac: float
    energy_fj_per_mac: float
    energy_sigma_fj_per_mac: float
    source: str
    model: PeCost | None = None


def _target_components(arch: Any, result: Any = None) -> PricedComponents:
    """The typed cost input of an architecture of any registered kind (and a run of it)."""
    from pathlib import Path

    from ..simulation import load_arch, target

    if isinstance(arch, (str, Path)):
        arch = load_arch(arch)[1]  # a shipped name or a YAML path
    kind = getattr(arch, "kind", None)
    if not isinstance(kind, str):
        raise CoaccelError(
            f"expected a loaded architecture config with a 'kind', got {type(arch).__name__}"
        )
    t = target(kind)
    if t.priced_components is None:
        raise CoaccelError(f"simulator kind {kind!r} has no cost model")
    return t.priced_components(arch, result)


def pe_format_of(arch: Any) -> PeFormat | None:
    """The PE design point of an architecture, or None when its PE uses published figures.

    Args:
        arch: a loaded architecture config (its ``pe_array.cost_model`` says which).

    Returns:
        The :class:`PeFormat`, or None.
    """
    mac = _target_components(arch).macs[0]
    return _pe_format(mac)


def _pe_format(mac: MacArray) -> PeFormat | None:
    if mac.cost_model != "pe_model":
        return None
    if mac.fmt is None:
        raise CoaccelError(f"{mac.name}: cost_model 'pe_model' needs the operand formats")
    return PeFormat(**dataclasses.asdict(mac.fmt)).check()


def mac_point(mac: MacArray, node_nm: float = 28) -> PePoint:
    """Area and energy per MAC of a MAC array (PE model or published figures).

    Args:
        mac: the MAC array of a :class:`~coaccel.sim.common.priced.PricedComponents`.
        node_nm: technology node.

    Returns:
        The :class:`PePoint`.

    Raises:
        CoaccelError: published figures under a key the cost tables do not have.
    """
    return _mac_point(mac.name, mac.cost_model, mac.fmt, node_nm)


@functools.lru_cache(maxsize=1024)
def _mac_point(name: str, cost_model: str, fmt: Any, node_nm: float) -> PePoint:
    # The per-MAC figures depend on the formats and the node only, not on how many MACs a
    # design has or ran: design points of a sweep share them.
    mac = MacArray(name=name, units=0, macs=0, cost_model=cost_model, fmt=fmt)
    pe = _pe_format(mac)
    nf = node_factors(node_nm)
    if pe is None:
        t = shipped_table("system_28nm.yaml")
        key = mac.cost_model
        try:
            a, e = t[f"{key}_area_um2_per_mac"], t[f"{key}_energy_fj_per_mac"]
        except (KeyError, CoaccelError):
            raise CoaccelError(
                f"{mac.name}: no published per-MAC figures for cost_model {key!r} in "
                "system_28nm.yaml"
            ) from None
        a_rel = math.hypot(a.uncertainty, nf.area_uncertainty)
        e_rel = math.hypot(e.uncertainty, nf.energy_uncertainty)
        return PePoint(
            a.value * nf.area,
            a.value * nf.area * a_rel,
            e.value * nf.energy,
            e.value * nf.energy * e_rel,
            f"published: {a.source} / {e.source}",
        )
    c = pe_model().predict(pe, node_nm)  # one fitted model per process
    return PePoint(
        c.area_um2_per_mac,
        c.area_sigma_um2_per_mac,
        c.energy_fj_per_mac,
        c.energy_sigma_fj_per_mac,
        f"PE model ({pe.label}), arch_configs/cost/pe_calibration_28nm.yaml",
        c,
    )


def arch_pe(arch: Any, node_nm: float = 28) -> PePoint:
    """PE area and energy per MAC of an architecture (model or published).

    Args:
        arch: a loaded architecture config.
        node_nm: technology node.

    Returns:
        The :class:`PePoint` of its (first) MAC array.
    """
    return mac_point(_target_components(arch).macs[0], node_nm)


@dataclass(frozen=True)
class CostBreakdown:
    """Area and energy of one architecture (and, with statistics, one workload run).

    Attributes:
        arch: architecture name.
        workload: workload name ("" for an area-only breakdown).
        node_nm: technology node.
        area_um2: area by component, µm².
        area_sigma_um2: one-sigma uncertainty by component, µm².
        energy_j: energy by component, J (empty for an area-only breakdown).
        energy_sigma_j: one-sigma uncertainty by component, J.
        sources: where each component's figure comes from.
        pe: the PE figures used (None for a design with no MAC array and no FPGA
            resources, e.g. a GPU priced by its memory traffic alone).
        seconds: run time of the workload, s.
        macs: multiply-accumulates of the workload.
        sim_mode: the simulator mode that produced the statistics.
        resources: FPGA resources by kind (``lut``, ``ff``, ``dsp``, ``bram36``, ``uram``),
            summed over the FPGA components; empty for an ASIC.
    """

    arch: str
    workload: str
    node_nm: float
    area_um2: Mapping[str, float]
    area_sigma_um2: Mapping[str, float]
    energy_j: Mapping[str, float]
    energy_sigma_j: Mapping[str, float]
    sources: Mapping[str, str]
    pe: PePoint | None
    seconds: float = 0.0
    macs: int = 0
    sim_mode: str = ""
    resources: Mapping[str, float] = FrozenMap()

    @property
    def mac_pe(self) -> PePoint:
        """The PE figures of a design that has them (an ASIC or FPGA MAC array).

        Raises:
            CoaccelError: the design has no MAC array (``pe`` is None).
        """
        if self.pe is None:
            raise CoaccelError(f"{self.arch}: no MAC array, so no PE figures")
        return self.pe

    @property
    def total_area_um2(self) -> float:
        """Total area, µm²."""
        return float(sum(self.area_um2.values()))

    @property
    def total_area_sigma_um2(self) -> float:
        """One-sigma uncertainty of the total area (components taken as independent), µm²."""
        return math.sqrt(sum(s * s for s in self.area_sigma_um2.values()))

    @property
    def total_energy_j(self) -> float:
        """Total energy, J."""
        return float(sum(self.energy_j.values()))

    @property
    def total_energy_sigma_j(self) -> float:
        """One-sigma uncertainty of the total energy (independent components), J."""
        return math.sqrt(sum(s * s for s in self.energy_sigma_j.values()))


def arch_area(arch: Any, node_nm: float = 28) -> CostBreakdown:
    """Area by component of an architecture (no workload).

    Args:
        arch: a loaded architecture config of a kind with a cost model.
        node_nm: technology node.

    Returns:
        A :class:`CostBreakdown` with empty energy.
    """
    return price(_target_components(arch), node_nm)


def evaluate(stats: Any, arch: Any, node_nm: float = 28) -> CostBreakdown:
    """Energy (and area) of a simulated run.

    Args:
        stats: the simulation result (:func:`coaccel.simulate`).
        arch: the loaded architecture config it ran on.
        node_nm: technology node.

    Returns:
        The :class:`CostBreakdown` with energy per component (J) and area per component (µm²).
    """
    if stats is None:
        raise CoaccelError("evaluate() needs a simulation result; arch_area() prices a design")
    if not hasattr(stats, "buffers") or isinstance(stats, (str, bytes)):
        raise CoaccelError(
            f"evaluate() takes a simulation result first, got {type(stats).__name__}; "
            "call evaluate(coaccel.simulate(arch, workload), arch)"
        )
    return price(_target_components(arch, stats), node_nm)


def _price_area(pc: PricedComponents, node_nm: float) -> tuple[dict, dict, dict, list[PePoint]]:
    """Area, its sigma and sources per component, and each MAC array's per-MAC point."""
    area: dict[str, float] = {}
    sigma: dict[str, float] = {}
    sources: dict[str, str] = {}
    points = [mac_point(m, node_nm) for m in pc.macs]
    for m, pt in zip(pc.macs, points, strict=True):
        area[m.name] = pt.area_um2_per_mac * m.units
        sigma[m.name] = pt.area_sigma_um2_per_mac * m.units
        sources[m.name] = pt.source
    for b in pc.buffers:
        s = sram_cost(b.depth_words, b.bank_width_bits, banks=b.banks, node_nm=node_nm)
        area[b.name] = s.area_um2
        sigma[b.name] = s.area_sigma_um2
        sources[b.name] = (
            f"SRAM model, {b.banks} x {b.depth_words} x {b.bank_width_bits} b"
            + ("" if s.in_calibrated_range else " (beyond the calibrated macro sizes)")
            + "; arch_configs/cost/sram_28nm.yaml"
        )
    t = shipped_table("system_28nm.yaml")
    nf = node_factors(node_nm)
    for g in pc.logic:
        lane = _logic_entry(t, g, "area_um2_per_lane")
        area[g.name] = lane.value * g.lanes * nf.area
        sigma[g.name] = area[g.name] * math.hypot(lane.uncertainty, nf.area_uncertainty)
        sources[g.name] = lane.source
    return area, sigma, sources, points


_LOGIC_KEYS = {
    "psum_mxint8_running": "psum_mxint8",
    "psum_mxint8_group": "psum_mxint8",
    "psum_mxint8": "psum_mxint8",
    "psum_fp16": "psum_fp16",
    "psum_fp32": "psum_fp32",
}
"""Logic kind -> the prefix of its figures in ``system_28nm.yaml``
(``<prefix>_area_um2_per_lane``, ``<prefix>_update_energy_pj``). Partial-sum logic is named
by the partial-sum mode it serves: both MXINT8 modes use the same quantiser, dequantiser and
FP16 adders; ``fp16`` / ``fp32`` accumulate with one FP adder per lane."""


def _logic_entry(t: Any, g: LogicUse, what: str) -> Any:
    prefix = _LOGIC_KEYS.get(g.logic)
    if prefix is None:
        raise CoaccelError(
            f"{g.name}: no cost figures for logic {g.logic!r}; known: {', '.join(_LOGIC_KEYS)}"
        )
    return t[f"{prefix}_{what}"]


def price(pc: PricedComponents, node_nm: float = 28) -> CostBreakdown:
    """Area and, for a run, energy per component of the cost model's typed input.

    Args:
        pc: what the design contains and, if :attr:`~PricedComponents.has_run`, what the run did
            (a target's ``priced_components``).
        node_nm: technology node (28, 16, 7 or 5).

    Returns:
        The :class:`CostBreakdown`: area (µm²) for every component; energy (J) for every
        component plus leakage when the input describes a run.
    """
    area, area_sigma, sources, points = _price_area(pc, node_nm)
    resources: dict[str, float] = {}
    for f in pc.fpga:
        area[f.name] = 0.0
        area_sigma[f.name] = 0.0
        resources[f.resource] = resources.get(f.resource, 0.0) + f.count
        sources[f.name] = f"{f.count:g} {f.resource}; arch_configs/cost/{FPGA_TABLE}"
    pe = points[0] if points else _fpga_pe_point() if pc.fpga else None
    if not pc.has_run:
        return CostBreakdown(
            arch=pc.arch,
            workload="",
            node_nm=float(node_nm),
            area_um2=FrozenMap(area),
            area_sigma_um2=FrozenMap(area_sigma),
            energy_j=FrozenMap(),
            energy_sigma_j=FrozenMap(),
            sources=FrozenMap(sources),
            pe=pe,
            resources=FrozenMap(resources),
        )
    nf = node_factors(node_nm)
    sm = sram_model()
    t = shipped_table("system_28nm.yaml")
    energy: dict[str, float] = {}
    sigma: dict[str, float] = {}
    for m, pt in zip(pc.macs, points, strict=True):
        energy[m.name] = m.macs * pt.energy_fj_per_mac * 1e-15
        sigma[m.name] = m.macs * pt.energy_sigma_fj_per_mac * 1e-15
    for b in pc.buffers:
        bits = 8 * (b.read_bytes + b.write_bytes)
        e_bit_fj = sm.access_energy_fj(b.depth_words, 1) * nf.sram_energy
        energy[b.name] = bits * e_bit_fj * 1e-15
        inside = b.depth_words <= sm.max_subarray_rows
        rel = math.hypot(0.2 if inside else 0.35, nf.sram_energy_uncertainty)
        sigma[b.name] = energy[b.name] * rel
        sources[b.name] += (
            f"; energy: bytes moved (simulated) x {e_bit_fj:.1f} fJ/bit at bank depth "
            f"{b.depth_words}"
        )
    for g in pc.logic:
        upd = _logic_entry(t, g, "update_energy_pj")
        energy[g.name] = g.operations * upd.value * 1e-12 * nf.energy
        sigma[g.name] = energy[g.name] * math.hypot(upd.uncertainty, nf.energy_uncertainty)
        sources[g.name] += f"; energy: {upd.source}"
    for d in pc.offchip:
        energy[d.name] = (d.read_bytes + d.write_bytes) * d.energy_pj_per_byte * 1e-12
        sigma[d.name] = energy[d.name] * d.uncertainty_pct / 100.0
        sources[d.name] = (
            f"bytes moved in the simulated traces x {d.energy_pj_per_byte:g} pJ/B "
            f"({d.memory_type}): {d.source}"
        )
    if pc.fpga:
        ft = shipped_table(FPGA_TABLE)
        for f in pc.fpga:
            e = ft[_FPGA_ENERGY[f.resource]]
            energy[f.name] = f.operations * e.value * 1e-12
            sigma[f.name] = energy[f.name] * e.uncertainty
            sources[f.name] += f"; energy: operations x {e.value:g} {e.unit}: {e.source}"
        st = ft["pl_static_w"]
        energy["fpga_static"] = st.value * pc.seconds
        sigma["fpga_static"] = energy["fpga_static"] * st.uncertainty
        sources["fpga_static"] = f"{st.source}; x run time"
    if pc.macs or pc.buffers or pc.logic or pc.fpga:
        # the ASIC leakage density applies to a design built of priced silicon; a design
        # priced by its off-chip traffic alone (a GPU) has no area here to leak
        leak = t["leakage_mw_per_mm2"]
        p_w = leak.value * 1e-3 * sum(area.values()) * 1e-6 * nf.leakage
        energy["leakage"] = p_w * pc.seconds
        sigma["leakage"] = energy["leakage"] * math.hypot(leak.uncertainty, nf.leakage_uncertainty)
        sources["leakage"] = f"{leak.source}; x total area x run time"
    return CostBreakdown(
        arch=pc.arch,
        workload=pc.workload,
        node_nm=float(node_nm),
        area_um2=FrozenMap(area),
        area_sigma_um2=FrozenMap(area_sigma),
        energy_j=FrozenMap(energy),
        energy_sigma_j=FrozenMap(sigma),
        sources=FrozenMap(sources),
        pe=pe,
        seconds=pc.seconds,
        macs=sum(m.macs for m in pc.macs),
        sim_mode=pc.mode,
        resources=FrozenMap(resources),
    )


FPGA_TABLE = "fpga_ultrascale_plus.yaml"
"""The FPGA resource energy table (``arch_configs/cost/``)."""

_FPGA_ENERGY = {
    "dsp": "dsp_energy_pj_per_op",
    "bram36": "bram36_energy_pj_per_byte",
    "uram": "uram_energy_pj_per_byte",
    "lut": "lut_energy_pj_per_cycle",
    "ff": "ff_energy_pj_per_cycle",
}
"""FPGA resource -> its energy entry in :data:`FPGA_TABLE`."""


def _fpga_pe_point() -> PePoint:
    """The DSP48E2's energy per MAC as the per-MAC point of an FPGA design (no area)."""
    e = shipped_table(FPGA_TABLE)["dsp_energy_pj_per_op"]
    return PePoint(0.0, 0.0, e.value * 1e3, e.value * 1e3 * e.uncertainty,
                   f"FPGA DSP48E2: {e.source}")  # fmt: skip
