"""What a systolic array contains and what a run did with it, as coaccel's cost-model input.

:func:`priced_components` describes:

* ``pe_array``: ``rows x cols`` MACs priced by coaccel's PE model
  (:func:`coaccel.cost.pe_cost`) at the design point :func:`mac_format` states: integer weights
  and activations of the configured widths; each column reduces ``rows`` products, then the
  column sum is converted to floating point, scaled by a power of two and accumulated at
  ``out_bits`` (FP16 or FP32) once per column pass. That is the PE model's block-scaled PE with
  one block of ``rows`` elements per pass (``block = pe_macs = rows``, scale ``pot``): the
  conversion, scaling and accumulator are shared by a column, the multiplier, product
  alignment and reduction input are per MAC. The PE model was fitted on block-scaled
  floating-point PEs; its prediction for integer elements carries the wider uncertainty it
  states for points outside its calibrated domain.
* ``act_sram``, ``weight_sram``, ``out_sram``: each SRAM as macros of at most 256 words of at
  most 128 bits (inside the macro sizes coaccel's SRAM model is calibrated on), as many side by
  side as one array-edge row needs (``rows x act_bits``, ``cols x weight_bits``,
  ``cols x out_bits``), with the bytes the run read and wrote;
* ``dram``: the bytes moved, at the DRAM block's energy per byte.

Leakage is added by the cost model (total area x run time).

Public: :func:`priced_components`, :func:`mac_format`, :func:`sram_geometry`.
"""

from __future__ import annotations

from coaccel.sim.common import (
    BufferUse,
    MacArray,
    MacFormat,
    OffChipUse,
    PricedComponents,
)

from .config import KIND, SystolicArchConfig
from .result import SystolicResult

__all__ = ["mac_format", "priced_components", "sram_geometry"]

MACRO_MAX_DEPTH_WORDS = 256
"""Deepest SRAM macro the geometry uses (the SRAM model's sub-array row cap)."""

MACRO_MAX_WIDTH_BITS = 128
"""Widest SRAM macro word the geometry uses."""

_SRAMS = (("act", "ACT"), ("weight", "WGT"), ("out", "OUT"))


def mac_format(arch: SystolicArchConfig) -> MacFormat:
    """The array's PE as a PE-model design point (module docstring).

    Args:
        arch: the architecture.

    Returns:
        The :class:`~coaccel.sim.common.MacFormat`: ``int<weight_bits>`` x
        ``int<act_bits>``, block and PE width ``rows``, scale ``pot``, FP16 or FP32
        accumulation.
    """
    op, rows = arch.operands, arch.array.rows
    return MacFormat(
        weight=f"int{op.weight_bits}",
        act=f"int{op.act_bits}",
        block=rows,
        scale="pot",
        ub=None,
        l2_act="none",
        l2_act_bits=2,
        l2_weight="none",
        l2_weight_bits=2,
        accum="fp32" if op.out_bits == 32 else "fp16",
        pe_macs=rows,
    )


def sram_geometry(arch: SystolicArchConfig, which: str) -> tuple[int, int, int]:
    """``(banks, depth_words, bank_width_bits)`` of the ``act``, ``weight`` or ``out`` SRAM.

    An access is one row of the array's edge, spread over macros of at most
    :data:`MACRO_MAX_WIDTH_BITS` bits side by side; the capacity is split into the fewest such
    macros of at most :data:`MACRO_MAX_DEPTH_WORDS` words.

    Args:
        arch: the architecture.
        which: ``"act"``, ``"weight"`` or ``"out"``.

    Returns:
        The geometry.
    """
    a, op = arch.array, arch.operands
    row = {
        "act": a.rows * op.act_bits,
        "weight": a.cols * op.weight_bits,
        "out": a.cols * op.out_bits,
    }[which]
    side = -(-row // MACRO_MAX_WIDTH_BITS)  # macros read together for one row
    width = -(-row // side)
    bits = int(getattr(arch.sram, f"{which}_kib") * 8192)
    words = max(1, -(-bits // row))
    stacks = -(-words // MACRO_MAX_DEPTH_WORDS)
    return side * stacks, -(-words // stacks), width


def priced_components(
    arch: SystolicArchConfig, result: SystolicResult | None = None
) -> PricedComponents:
    """The cost model's input for a systolic array, and for a run of it.

    Args:
        arch: the architecture.
        result: a simulation of a workload on ``arch``, or None for the design alone (area).

    Returns:
        The :class:`~coaccel.sim.common.PricedComponents`: ``pe_array``, ``act_sram``,
        ``weight_sram``, ``out_sram`` and ``dram``.
    """
    fmt = mac_format(arch)
    mac = MacArray(
        name="pe_array",
        units=arch.array.rows * arch.array.cols,
        macs=int(result.macs) if result is not None else 0,
        cost_model="pe_model",
        fmt=fmt,
        label=f"{fmt.weight} x {fmt.act}, column of {fmt.block}, {fmt.accum} accumulation",
    )
    buffers = []
    for which, stat in _SRAMS:
        banks, depth, width = sram_geometry(arch, which)
        use = result.buffers[stat] if result is not None else None
        buffers.append(
            BufferUse(
                name=f"{which}_sram",
                banks=banks,
                depth_words=depth,
                bank_width_bits=width,
                read_bytes=int(use.read_bytes) if use is not None else 0,
                write_bytes=int(use.write_bytes) if use is not None else 0,
            )
        )
    d = arch.dram
    dram = OffChipUse(
        name="dram",
        memory_type=d.type,
        energy_pj_per_byte=d.energy_pj_per_byte,
        uncertainty_pct=d.uncertainty_pct,
        source=d.source,
        read_bytes=int(result.offchip.read_bytes) if result is not None else 0,
        write_bytes=int(result.offchip.write_bytes) if result is not None else 0,
    )
    return PricedComponents(
        arch=arch.name,
        kind=KIND,
        workload=str(result.workload) if result is not None else "",
        mode=str(result.mode) if result is not None else "",
        seconds=float(result.seconds) if result is not None else 0.0,
        macs=(mac,),
        buffers=tuple(buffers),
        logic=(),
        offchip=(dram,),
    )
