"""The analytical fidelity: the cycles of a GEMM in closed form.

For the schedule of :mod:`.schedule` (``T_m x T_n x T_k`` array tiles of ``m_i + R + C - 2``
cycles each, one in-order DMA engine)::

    P        = dma(A_0) + dma(W_0) + L                  prologue: first slab and weight tile
    C_total  = T_n T_k (M + T_m (R + C - 2))            every array tile back to back
    E        = dma(O_last) + L                          epilogue: last output tile
    D_total  = sum of dma(x) over every transfer x      the DMA engine's busy cycles
    cycles   = max(P + C_total + E,  D_total + L)

``dma(x)`` is the DMA occupancy of a transfer of ``x`` bytes at the DRAM's sustained bandwidth
(:func:`coaccel.sim.common.offchip.transfer_cycles`) and ``L`` the DRAM's first-access latency.
Both terms are lower bounds of the cycle-approximate schedule (:mod:`.cycle`): the PE array
cannot start before the prologue nor finish before every tile ran, and the DMA engine cannot
finish before it moved every byte. So ``analytical <= cycle`` always, with equality whenever
the cycle-approximate schedule never stalls the array on a transfer (``dram_stall == 0``): a
compute-bound GEMM whose weight prefetch keeps up tile by tile.

Public: :func:`gemm_timing`.
"""

from __future__ import annotations

from .config import SystolicArchConfig
from .schedule import GemmPlan, dma_cycles
from .timing import GemmTiming

__all__ = ["gemm_timing"]


def gemm_timing(arch: SystolicArchConfig, plan: GemmPlan) -> GemmTiming:
    """The closed-form cycles of one run of a planned GEMM (module docstring).

    Args:
        arch: the architecture.
        plan: the GEMM's plan (:func:`~.schedule.plan_gemm`).

    Returns:
        The :class:`~.timing.GemmTiming`; its ``dram_stall`` is what the DRAM bound adds to
        the compute path (0 when compute-bound).
    """
    d = dma_cycles(arch, plan)
    prologue = d.first_act(plan) + d.first_weight(plan) + d.latency
    epilogue = d.out[1][1] + d.latency
    compute = plan.compute_cycles
    dma_busy = d.total(plan)
    cycles = max(prologue + compute + epilogue, dma_busy + d.latency)
    return GemmTiming(
        cycles=cycles,
        prologue=prologue,
        busy=plan.streaming_cycles,
        fill_drain=compute - plan.streaming_cycles,
        dram_stall=cycles - (prologue + compute + epilogue),
        epilogue=epilogue,
        dma_busy=dma_busy,
    )
