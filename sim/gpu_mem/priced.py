"""The GPU's priced components: device-memory (and host-memory) traffic energy.

Only off-chip traffic is priced: the device DRAM's bytes at its ``energy_pj_per_byte`` (the
sourced figure of its ``arch_configs/dram/`` file) and, on a GPU whose config describes the host
memory (GH200's LPDDR5X), the host bytes the link moved at that memory's figure. The SMs, the L2
and the link itself carry no component: no sourced per-byte energy of an L2 access or of a
PCIe / NVLink-C2C transfer is at hand, and guessing one would pass a number without a source.
"""

from __future__ import annotations

from ..common.priced import OffChipUse, PricedComponents
from .config import GpuArchConfig
from .result import GpuSimResult

__all__ = ["priced_components"]


def priced_components(arch: GpuArchConfig, result: GpuSimResult | None) -> PricedComponents:
    """Off-chip memories of a GPU and, given a result, the bytes the run moved.

    Args:
        arch: the GPU.
        result: a simulation of it, or None for the design alone.

    Returns:
        :class:`PricedComponents` with one :class:`OffChipUse` for the device DRAM and one for
        the host DRAM where the config has it; no MAC arrays, buffers or logic.
    """
    d = arch.dram
    rd = result.offchip.read_bytes if result else 0
    wr = result.offchip.write_bytes if result else 0
    off = [
        OffChipUse(
            name="dram",
            memory_type=d.type,
            energy_pj_per_byte=d.energy_pj_per_byte,
            uncertainty_pct=d.uncertainty_pct,
            source=d.source,
            read_bytes=rd,
            write_bytes=wr,
        )  # fmt: skip
    ]
    if arch.host_dram is not None:
        h = arch.host_dram
        link = result.link if result else None
        off.append(
            OffChipUse(
                name="host_dram",
                memory_type=h.type,
                energy_pj_per_byte=h.energy_pj_per_byte,
                uncertainty_pct=h.uncertainty_pct,
                source=h.source,
                read_bytes=(link.h2d_bytes + link.zero_copy_bytes) if link else 0,
                write_bytes=link.d2h_bytes if link else 0,
            )  # fmt: skip
        )
    return PricedComponents(
        arch=arch.name,
        kind="gpu",
        workload=result.workload if result else "",
        mode=result.mode if result else "",
        seconds=result.seconds if result else 0.0,
        macs=(),
        buffers=(),
        logic=(),
        offchip=tuple(off),
    )
