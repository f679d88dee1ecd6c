"""Where the cycles of one GEMM go, as both fidelities report them.

:class:`GemmTiming` splits a GEMM's cycles on the PE array into the states of
:data:`PE_STATES` (they sum to the GEMM's cycles) and gives the DMA engine's busy cycles.

Public: :class:`GemmTiming`, :data:`PE_STATES`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PE_STATES", "GemmTiming"]

PE_STATES = ("prologue", "busy", "fill_drain", "dram_stall", "epilogue")
"""The PE array's states, in the order they sum up to the cycles of a GEMM:

* ``prologue``: waiting for the first activation slab and weight tile (and their latency);
* ``busy``: activation rows streaming through the array (one row per cycle);
* ``fill_drain``: the ``R + C - 2`` cycles of skew of every array tile;
* ``dram_stall``: waiting for a transfer between tiles, or for the DMA engine to be free for
  the last output tile;
* ``epilogue``: writing the last output tile (and its latency)."""


@dataclass(frozen=True)
class GemmTiming:
    """Cycles of one run of one GEMM.

    Attributes:
        cycles: total cycles, first transfer to the last output written.
        prologue: see :data:`PE_STATES`; the same in both fidelities.
        busy: rows streamed, ``T_n T_k M``.
        fill_drain: skew cycles, ``T_m T_n T_k (R + C - 2)``.
        dram_stall: cycles the PE array waited for the DMA engine after the prologue.
        epilogue: the last output tile's transfer and latency.
        dma_busy: cycles the DMA engine was busy (every transfer's occupancy).
    """

    cycles: int
    prologue: int
    busy: int
    fill_drain: int
    dram_stall: int
    epilogue: int
    dma_busy: int

    def __post_init__(self) -> None:
        parts = self.prologue + self.busy + self.fill_drain + self.dram_stall + self.epilogue
        if parts != self.cycles or self.dram_stall < 0 or self.dma_busy > self.cycles:
            raise ValueError(f"inconsistent GEMM timing: {self}")
