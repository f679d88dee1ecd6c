"""Fast evaluation of the analytical model: kernels' traffic -> decode-step time.

:func:`kernel_traffic(trace, arch, fidelity="analytical")` reads a trace once (vectorized, a
few milliseconds); :func:`step_seconds` then evaluates the per-kernel model (waves, Little's
law, DRAM efficiency, L2 hits, roofline compute) and runs the kernels in issue order with their
launch latency, in tens of microseconds, so that sweeps over context, batch, split count and GPU
re-evaluate only what changed. :func:`scale_traffic` derives the traffic of a kernel at another
size of a linearly scaling dimension (e.g. context length of a streaming kernel) without a
trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .config import GpuArchConfig
from .timing import kernel_time
from .traffic import KernelTraffic

__all__ = ["scale_traffic", "step_seconds"]


def step_seconds(arch: GpuArchConfig, kernels: Sequence[KernelTraffic]) -> float:
    """Time of kernels run back to back on one stream (copies on their engines in between).

    Each compute kernel pays the launch latency before it starts; copies pay their own fixed
    cost. Streams and events are not honoured here (use :func:`coaccel.simulate` for programs
    that overlap copies and kernels).

    Args:
        arch: the GPU.
        kernels: their traffic, in issue order.

    Returns:
        Seconds.
    """
    gap = arch.launch_overhead_us * 1e-6
    total = 0.0
    for kt in kernels:
        total += kernel_time(arch, kt).seconds + (gap if kt.kind == "compute" else 0.0)
    return total


def scale_traffic(kt: KernelTraffic, factor: float, *, ctas_factor: float = 1.0) -> KernelTraffic:
    """The traffic of a kernel whose bytes, FLOP and chains scale by ``factor``.

    For a streaming kernel (W1's split-K attention at a fixed split count, a streaming read),
    the sectors, DRAM bytes and time, host bytes and FLOP all grow with the context; the tile
    bytes (per record) stay; the grid grows by ``ctas_factor``.

    Args:
        kt: the traffic at the reference size.
        factor: size ratio (> 0).
        ctas_factor: grid-size ratio (> 0).

    Returns:
        A new :class:`KernelTraffic`.
    """
    if factor <= 0 or ctas_factor <= 0:
        raise ValueError("factor and ctas_factor must be > 0")

    def s(x: int) -> int:
        return round(x * factor)

    return dataclasses.replace(
        kt,
        ctas=max(1, round(kt.ctas * ctas_factor)),
        sector_requests=s(kt.sector_requests),
        l2_hits=s(kt.l2_hits),
        l2_near_hits=s(kt.l2_near_hits),
        l2_misses=s(kt.l2_misses),
        dram_read_bytes=s(kt.dram_read_bytes),
        dram_write_bytes=s(kt.dram_write_bytes),
        dram_seconds=kt.dram_seconds * factor,
        host_bytes=s(kt.host_bytes),
        tensor_flop=kt.tensor_flop * factor,
        fp32_flop=kt.fp32_flop * factor,
        chain_seconds=kt.chain_seconds * factor,
        l1_hits=s(kt.l1_hits),
    )
