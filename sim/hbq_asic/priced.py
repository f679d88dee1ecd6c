"""What an HBQ ASIC design contains and what a run did, as the cost model's typed input.

:func:`priced_components` describes the PE array (its operand formats as a PE-model design
point, or the published figures its ``pe_array.cost_model`` names), the ACT, WGT and PSUM
buffers by geometry, the partial-sum logic and the DRAM; given a simulation result it adds the
MACs, bytes and operations of the run. ``coaccel.cost.price`` prices it.
"""

from __future__ import annotations

from typing import Any

from coaccel.sim.common.priced import (
    BufferUse,
    LogicUse,
    MacArray,
    MacFormat,
    OffChipUse,
    PricedComponents,
)

from .config import KIND, HbqArchConfig, operand_format
from .stats import HbqSimStats

__all__ = ["buffer_geometry", "mac_format", "priced_components"]

_E2_BY_BITS = {4: "e2m1", 5: "e2m2", 6: "e2m3", 7: "e2m4", 8: "e2m5", 16: "fp16", 32: "fp32"}
"""Element format of an operand known only by its width: the HBQ paper's baseline PEs use "E2"
element formats E2M(bits-3), FP16/FP32 for unquantized operands."""

_BUFFERS = (("act", "ACT"), ("wgt", "WGT"), ("psum", "PSUM"))


def _element_name(spec: Any, bits: int, role: str) -> str:
    elem = getattr(spec, "elem", None)
    if elem is not None and getattr(elem, "name", None):
        return str(elem.name)
    if isinstance(spec, str) and spec.lower() in ("fp16", "bf16", "fp32"):
        return spec.lower()
    if bits not in _E2_BY_BITS:
        from coaccel.spine.config import ConfigError, Problem

        raise ConfigError(
            [Problem("", f"formats.{role}.element_bits", bits,
                     "no element format of this width for the PE model; use pe_array.cost_model "
                     "with published figures", ", ".join(map(str, _E2_BY_BITS)))]
        )  # fmt: skip
    return _E2_BY_BITS[bits]


def _scale_name(spec: Any, fmt_name: str) -> str:
    scale_fmt = getattr(spec, "scale_fmt", None)
    if scale_fmt is not None:
        return str(scale_fmt.name)
    name = fmt_name.lower()
    if name.startswith("mx") or hasattr(spec, "scale_bias"):
        # The baseline BQ PE's power-of-two scale, as OCP E8M0.
        return "pot"
    return "e5m3"


def mac_format(arch: HbqArchConfig) -> MacFormat:
    """The PE array's operand formats as a PE-model design point.

    Args:
        arch: the architecture.

    Returns:
        The :class:`~coaccel.sim.common.priced.MacFormat`.
    """
    w_cfg, a_cfg = arch.formats.weight, arch.formats.activation
    w_spec = operand_format(arch, "weight")
    a_spec = operand_format(arch, "activation")
    ub = a_cfg.ub_elems or None
    return MacFormat(
        weight=_element_name(w_spec, w_cfg.element_bits, "weight"),
        act=_element_name(a_spec, a_cfg.element_bits, "activation"),
        block=max(w_cfg.block_elems, a_cfg.block_elems),
        scale=_scale_name(a_spec, a_cfg.format),
        ub=ub,
        l2_act=a_cfg.l2_scheme if ub else "none",
        l2_act_bits=a_cfg.l2_bits if ub else 2,
        l2_weight=w_cfg.l2_scheme if ub else "none",
        l2_weight_bits=w_cfg.l2_bits if ub and w_cfg.l2_bits else 2,
        accum="fp16",
        pe_macs=arch.pe_array.macs_per_pe,
    )


def buffer_geometry(arch: HbqArchConfig, which: str) -> tuple[int, int, int]:
    """``(banks, depth_words, bank_width_bits)`` of the ``act``, ``wgt`` or ``psum`` buffer."""
    b = getattr(arch.buffers, which)
    bits = b.size_bytes * 8
    # A bank word plus its share of the side band (the ACT scale register file), so that the
    # SRAM model prices the bits actually read per access.
    width = max(1, b.access_width_bits // b.banks)
    depth = max(1, bits // (b.banks * width))
    return b.banks, depth, width


def priced_components(arch: HbqArchConfig, result: HbqSimStats | None = None) -> PricedComponents:
    """The cost model's input for an HBQ ASIC design, and for a run of it.

    Args:
        arch: the architecture.
        result: a simulation of a workload on ``arch``, or None for the design alone (area).

    Returns:
        The :class:`~coaccel.sim.common.priced.PricedComponents`: ``pe_array``,
        ``act_buffer`` / ``wgt_buffer`` / ``psum_buffer``, ``psum_logic`` and ``dram``.
    """
    pe = arch.pe_array
    model = pe.cost_model
    fmt = mac_format(arch) if model == "pe_model" else None
    label = f"{fmt.weight} x {fmt.act}, B={fmt.block}, {fmt.scale}" if fmt is not None else model
    macs = MacArray(
        name="pe_array",
        units=pe.n_pes * pe.macs_per_pe,
        macs=int(result.macs) if result is not None else 0,
        cost_model=model,
        fmt=fmt,
        label=label,
    )
    buffers = []
    for which, stat_name in _BUFFERS:
        banks, depth, width = buffer_geometry(arch, which)
        use = result.buffers[stat_name] if result is not None else None
        buffers.append(
            BufferUse(
                name=f"{which}_buffer",
                banks=banks,
                depth_words=depth,
                bank_width_bits=width,
                read_bytes=int(use.read_bytes) if use is not None else 0,
                write_bytes=int(use.write_bytes) if use is not None else 0,
            )
        )
    # Every partial sum written back to the PSUM buffer went through the accumulate unit once.
    updates = 0.0
    if result is not None:
        psum_bits = float(arch.psum.bits_per_element)
        updates = 8 * int(result.buffers["PSUM"].write_bytes) / psum_bits
    # The accumulate logic depends on the partial-sum mode (psum_fp16, psum_mxint8_running...).
    logic = LogicUse(
        name="psum_logic", logic=f"psum_{arch.psum.mode}", lanes=pe.n_pes, operations=updates
    )
    d = arch.dram
    dram = OffChipUse(
        name="dram",
        memory_type=d.type,
        energy_pj_per_byte=d.energy_pj_per_byte,
        uncertainty_pct=d.uncertainty_pct,
        source=d.source,
        read_bytes=int(result.dram.read_bytes) if result is not None else 0,
        write_bytes=int(result.dram.write_bytes) if result is not None else 0,
    )
    return PricedComponents(
        arch=arch.name,
        kind=KIND,
        workload=str(result.workload) if result is not None else "",
        mode=str(result.mode) if result is not None else "",
        seconds=float(result.seconds) if result is not None else 0.0,
        macs=(macs,),
        buffers=tuple(buffers),
        logic=(logic,),
        offchip=(dram,),
    )
