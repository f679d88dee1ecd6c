"""Accelerator-level area and energy: PE array, buffers, partial-sum logic, DRAM, leakage.

:func:`arch_area` sizes an architecture (``coaccel.sim.hbq_asic.HbqArchConfig``) from the PE
model and the SRAM model; :func:`evaluate` turns the simulator's statistics (``HbqSimStats``)
into energy per component. Every component carries its value, a one-sigma uncertainty and its
source (:class:`CostBreakdown`). Components:

============== ============================================================================
``pe_array``    MACs x PE energy per MAC (PE model, or published figures for Amove and the
                weight-only AxCore PE whose datapaths the model does not derive)
``act_buffer``  bits moved x SRAM energy per bit at the buffer's bank depth
``wgt_buffer``  same, weight buffer
``psum_buffer`` same, partial-sum buffer (read-modify-write)
``psum_logic``  partial-sum updates x the ACCUM logic energy (MXINT8 quantiser, dequantiser,
                FP16 adders; §2.3 power report)
``dram``        bytes moved (from the simulated traces) x ``DramConfig.energy_pj_per_byte``
``leakage``     total area x leakage power density x run time
============== ============================================================================

The paper's system model ([R-PM], specs/hbq.md §2.5) counts ``dram``, ``pe_array`` ("core")
and the ACT and PSUM SRAM; :attr:`CostBreakdown.rpm_components` names those, so that a
comparison with its figures compares like with like.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import FrozenMap
from ..errors import CoaccelError
from ._pe import PeCost, PeFormat, pe_model
from ._sram import sram_cost, sram_model
from ._tables import shipped_table
from ._tech import node_factors

__all__ = [
    "BUFFERS",
    "RPM_COMPONENTS",
    "CostBreakdown",
    "PePoint",
    "arch_area",
    "arch_pe",
    "evaluate",
    "pe_format_of",
]

BUFFERS = ("act", "wgt", "psum")
"""On-chip buffers of the HBQ ASIC simulator's architectures."""

RPM_COMPONENTS = ("pe_array", "act_buffer", "psum_buffer", "dram")
"""The components the paper's system model ([R-PM]) counts: core, SRAM (ACT + PSUM), DRAM."""

_E2_BY_BITS = {4: "e2m1", 5: "e2m2", 6: "e2m3", 7: "e2m4", 8: "e2m5", 16: "fp16", 32: "fp32"}
"""Element format of an operand known only by its width: the paper's baseline PEs use "E2"
element formats E2M(bits-3) (specs/hbq.md §2.4, §3.5), FP16/FP32 for unquantized operands."""


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


def _element_name(spec: Any, bits: int) -> str:
    elem = getattr(spec, "elem", None)
    if elem is not None and getattr(elem, "name", None):
        return str(elem.name)
    if isinstance(spec, str) and spec.lower() in ("fp16", "bf16", "fp32"):
        return spec.lower()
    if bits not in _E2_BY_BITS:
        raise CoaccelError(f"no element format for a {bits}-bit operand; name one in the arch")
    return _E2_BY_BITS[bits]


def _scale_name(spec: Any, fmt_name: str) -> str:
    scale_fmt = getattr(spec, "scale_fmt", None)
    if scale_fmt is not None:
        return str(scale_fmt.name)
    name = fmt_name.lower()
    if name.startswith("mx") or hasattr(spec, "scale_bias"):
        # The baseline BQ PE's "PoT" scale (specs/hbq.md §3.5), as for OCP E8M0 / the repo's MX.
        return "pot"
    return "e5m3"


def pe_format_of(arch: Any) -> PeFormat | None:
    """The PE design point of an architecture, or None when its PE uses published figures.

    Amove and the weight-only (AxCore-like) PE are not derived by the PE model; their
    architectures (names containing ``amove`` / ``woq``) use the published per-MAC figures of
    ``arch_configs/cost/system_28nm.yaml``.

    Args:
        arch: an ``HbqArchConfig``.

    Returns:
        The :class:`PeFormat`, or None.
    """
    from ..sim.hbq_asic.config import operand_format

    name = arch.name.lower()
    if "amove" in name or "woq" in name:
        return None
    w_cfg, a_cfg = arch.formats.weight, arch.formats.activation
    w_spec = operand_format(arch, "weight")
    a_spec = operand_format(arch, "activation")
    ub = a_cfg.ub_elems or None
    return PeFormat(
        weight=_element_name(w_spec, w_cfg.element_bits),
        act=_element_name(a_spec, a_cfg.element_bits),
        block=max(w_cfg.block_elems, a_cfg.block_elems),
        scale=_scale_name(a_spec, a_cfg.format),
        ub=ub,
        l2_act=a_cfg.l2_scheme if ub else "none",
        l2_act_bits=a_cfg.l2_bits if ub else 2,
        l2_weight=w_cfg.l2_scheme if ub else "none",
        l2_weight_bits=w_cfg.l2_bits if ub and w_cfg.l2_bits else 2,
        pe_macs=arch.pe_array.macs_per_pe,
    ).check()


def arch_pe(arch: Any, node_nm: float = 28) -> PePoint:
    """PE area and energy per MAC of an architecture (model or published).

    Args:
        arch: an ``HbqArchConfig``.
        node_nm: technology node.

    Returns:
        The :class:`PePoint`.
    """
    pe = pe_format_of(arch)
    nf = node_factors(node_nm)
    if pe is None:
        t = shipped_table("system_28nm.yaml")
        key = "amove" if "amove" in arch.name.lower() else "woq"
        a, e = t[f"{key}_area_um2_per_mac"], t[f"{key}_energy_fj_per_mac"]
        a_rel = math.hypot(a.uncertainty, nf.area_uncertainty)
        e_rel = math.hypot(e.uncertainty, nf.energy_uncertainty)
        return PePoint(
            a.value * nf.area,
            a.value * nf.area * a_rel,
            e.value * nf.energy,
            e.value * nf.energy * e_rel,
            f"published: {a.source} / {e.source}",
        )
    c = pe_model().predict(pe, node_nm)
    return PePoint(
        c.area_um2_per_mac,
        c.area_sigma_um2_per_mac,
        c.energy_fj_per_mac,
        c.energy_sigma_fj_per_mac,
        f"PE model ({pe.label}), arch_configs/cost/pe_calibration_28nm.yaml",
        c,
    )


def _buffer_geometry(arch: Any, which: str) -> tuple[int, int, int]:
    """(banks, depth_words, width_bits per bank) of a buffer."""
    b = getattr(arch.buffers, which)
    bits = b.size_bytes * 8
    width = max(1, b.access_width_bits // b.banks)  # a bank word + its share of the side band
    depth = max(1, bits // (b.banks * width))
    return b.banks, depth, width


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
        pe: the PE figures used.
        seconds: run time of the workload, s.
        macs: multiply-accumulates of the workload.
        sim_mode: the simulator mode that produced the statistics.
    """

    arch: str
    workload: str
    node_nm: float
    area_um2: Mapping[str, float]
    area_sigma_um2: Mapping[str, float]
    energy_j: Mapping[str, float]
    energy_sigma_j: Mapping[str, float]
    sources: Mapping[str, str]
    pe: PePoint
    seconds: float = 0.0
    macs: int = 0
    sim_mode: str = ""

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

    @property
    def rpm_energy_j(self) -> float:
        """Energy of the components the paper's system model counts (:data:`RPM_COMPONENTS`)."""
        return float(sum(self.energy_j.get(k, 0.0) for k in RPM_COMPONENTS))

    @property
    def rpm_energy_sigma_j(self) -> float:
        """One-sigma uncertainty of :attr:`rpm_energy_j`."""
        return math.sqrt(sum(self.energy_sigma_j.get(k, 0.0) ** 2 for k in RPM_COMPONENTS))


def arch_area(arch: Any, node_nm: float = 28) -> CostBreakdown:
    """Area by component of an architecture (no workload).

    Args:
        arch: an ``HbqArchConfig``.
        node_nm: technology node.

    Returns:
        A :class:`CostBreakdown` with empty energy.
    """
    pe = arch_pe(arch, node_nm)
    n_macs = arch.pe_array.n_pes * arch.pe_array.macs_per_pe
    area = {"pe_array": pe.area_um2_per_mac * n_macs}
    sigma = {"pe_array": pe.area_sigma_um2_per_mac * n_macs}
    sources = {"pe_array": pe.source}
    for which in BUFFERS:
        banks, depth, width = _buffer_geometry(arch, which)
        s = sram_cost(depth, width, banks=banks, node_nm=node_nm)
        area[f"{which}_buffer"] = s.area_um2
        sigma[f"{which}_buffer"] = s.area_sigma_um2
        sources[f"{which}_buffer"] = (
            f"SRAM model, {banks} x {depth} x {width} b"
            + ("" if s.in_calibrated_range else " (beyond the calibrated macro sizes)")
            + "; arch_configs/cost/sram_28nm.yaml"
        )
    t = shipped_table("system_28nm.yaml")
    nf = node_factors(node_nm)
    lane = t["psum_logic_area_um2_per_lane"]
    area["psum_logic"] = lane.value * arch.pe_array.n_pes * nf.area
    sigma["psum_logic"] = area["psum_logic"] * math.hypot(lane.uncertainty, nf.area_uncertainty)
    sources["psum_logic"] = lane.source
    return CostBreakdown(
        arch=arch.name,
        workload="",
        node_nm=float(node_nm),
        area_um2=FrozenMap(area),
        area_sigma_um2=FrozenMap(sigma),
        energy_j=FrozenMap(),
        energy_sigma_j=FrozenMap(),
        sources=FrozenMap(sources),
        pe=pe,
    )


def evaluate(stats: Any, arch: Any, node_nm: float = 28) -> CostBreakdown:
    """Energy (and area) of a simulated run.

    Args:
        stats: the simulator's ``HbqSimStats`` (``coaccel.sim.hbq_asic.simulate``).
        arch: the ``HbqArchConfig`` it ran on.
        node_nm: technology node.

    Returns:
        The :class:`CostBreakdown` with energy per component (J) and area per component (µm²).
    """
    base = arch_area(arch, node_nm)
    nf = node_factors(node_nm)
    sm = sram_model()
    energy: dict[str, float] = {}
    sigma: dict[str, float] = {}
    sources = dict(base.sources)
    macs = int(stats.macs)
    seconds = float(stats.seconds)
    pe = base.pe
    energy["pe_array"] = macs * pe.energy_fj_per_mac * 1e-15
    sigma["pe_array"] = macs * pe.energy_sigma_fj_per_mac * 1e-15
    for which in BUFFERS:
        b = stats.buffers[which.upper()]
        bits = 8 * (int(b.read_bytes) + int(b.write_bytes))
        _, depth, _ = _buffer_geometry(arch, which)
        e_bit_fj = sm.access_energy_fj(depth, 1) * nf.sram_energy
        key = f"{which}_buffer"
        energy[key] = bits * e_bit_fj * 1e-15
        inside = depth <= sm.max_subarray_rows
        rel = math.hypot(0.2 if inside else 0.35, nf.sram_energy_uncertainty)
        sigma[key] = energy[key] * rel
        sources[key] += (
            f"; energy: bytes moved (simulated) x {e_bit_fj:.1f} fJ/bit at bank depth {depth}"
        )
    t = shipped_table("system_28nm.yaml")
    upd = t["psum_update_energy_pj"]
    # Every partial sum written back to the PSUM buffer went through the accumulate unit once.
    psum_bits = float(arch.psum.bits_per_element)
    updates = 8 * int(stats.buffers["PSUM"].write_bytes) / psum_bits
    energy["psum_logic"] = updates * upd.value * 1e-12 * nf.energy
    sigma["psum_logic"] = energy["psum_logic"] * math.hypot(upd.uncertainty, nf.energy_uncertainty)
    sources["psum_logic"] += f"; energy: {upd.source}"
    dram_bytes = int(stats.dram.read_bytes) + int(stats.dram.write_bytes)
    energy["dram"] = dram_bytes * arch.dram.energy_pj_per_byte * 1e-12
    sigma["dram"] = energy["dram"] * arch.dram.uncertainty_pct / 100.0
    sources["dram"] = (
        f"bytes moved in the simulated traces x {arch.dram.energy_pj_per_byte:g} pJ/B "
        f"({arch.dram.type}): {arch.dram.source}"
    )
    leak = t["leakage_mw_per_mm2"]
    p_w = leak.value * 1e-3 * base.total_area_um2 * 1e-6 * nf.leakage
    energy["leakage"] = p_w * seconds
    sigma["leakage"] = energy["leakage"] * math.hypot(leak.uncertainty, nf.leakage_uncertainty)
    sources["leakage"] = f"{leak.source}; x total area x run time"
    return CostBreakdown(
        arch=arch.name,
        workload=str(stats.workload),
        node_nm=float(node_nm),
        area_um2=base.area_um2,
        area_sigma_um2=base.area_sigma_um2,
        energy_j=FrozenMap(energy),
        energy_sigma_j=FrozenMap(sigma),
        sources=FrozenMap(sources),
        pe=pe,
        seconds=seconds,
        macs=macs,
        sim_mode=str(stats.mode),
    )
