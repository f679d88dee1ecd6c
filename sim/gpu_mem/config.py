"""Architecture configs of the GPU memory-hierarchy simulator (``kind: gpu``).

:class:`GpuArchConfig` is the schema of ``arch_configs/gpu/<name>.yaml`` (loaded with
:func:`coaccel.config.load_config`: unknown keys, types, ranges and units are checked and every
problem is reported in one :class:`~coaccel.config.ConfigError`). A GPU is its streaming
multiprocessors (:class:`SmConfig`: count, clock, occupancy limits, bytes in flight, compute
roofline), its L2 (:class:`L2Config`: sectored, set-associative, near and far partitions), its
device memory (the shared :class:`~coaccel.config.DramConfig` block), its host link
(:class:`~coaccel.sim.common.hostlink.HostLinkConfig`) and, where the host memory is part of the
package (GH200's LPDDR5X), the host DRAM. See ``docs/gpu_mem.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from coaccel.spine.config import (
    DramConfig,
    FrozenMap,
    Problem,
    load_config,
    param,
    source_key_problems,
)

from ..common.hostlink import HostLinkConfig
from ..common.target import arch_file

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "GpuArchConfig",
    "L2Config",
    "SmConfig",
    "arch_path",
    "load_arch",
]

KIND = "gpu"
"""The ``kind:`` of a GPU architecture file (shipped ones: ``arch_configs/gpu/``)."""


def _shipped_arch_names() -> tuple[str, ...]:
    from importlib.resources import files

    folder = files("coaccel.arch_configs").joinpath(KIND)
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


ARCH_NAMES: tuple[str, ...] = _shipped_arch_names()
"""The GPUs shipped in ``arch_configs/gpu/`` (``<name>.yaml``), sorted."""


@dataclass(frozen=True)
class SmConfig:
    """The streaming multiprocessors.

    Attributes:
        count: SMs on the chip.
        freq_mhz: SM clock the latencies in cycles count, MHz.
        max_threads_per_sm: resident threads per SM (occupancy limit).
        max_ctas_per_sm: resident CTAs per SM (occupancy limit).
        smem_per_sm_kib: shared memory per SM available to CTAs, KiB (occupancy limit).
        regs_per_sm: 32-bit registers per SM (occupancy limit).
        max_inflight_per_sm_kib: most bytes of loads one SM keeps outstanding (its miss
            tracking), KiB: the ceiling of the Little's-law bandwidth per SM.
        pipeline_stages: tiles a CTA keeps in flight (cp.async / TMA stages): a CTA's bytes in
            flight are ``pipeline_stages`` x its tile bytes.
        tensor_flop_per_cycle_per_sm: dense tensor-core FLOP per cycle per SM (16-bit inputs).
        fp32_flop_per_cycle_per_sm: FP32 (FMA = 2 FLOP) per cycle per SM, for element-wise ops.
        compute_efficiency: sustained / peak compute of a tile, (0, 1].
        l1_latency_cycles: L1 hit (load-to-use) latency, cycles.
        l1_cache_kib: L1 capacity one CTA's loads can reuse, KiB (the measured L1 knee); a
            dependent load that hits in L2 and whose CTA touches no more than this is served
            at ``l1_latency_cycles``. None: no L1 level.
        smem_reserved_per_cta_kib: shared memory the system reserves for each resident CTA on
            top of what the CTA asks for, KiB (1 KiB from compute capability 8.0 on).
        regs_alloc_unit_per_warp: registers are given to a warp in multiples of this many
            (256 on compute capability 8.x and 9.0); 1: no rounding.
    """

    count: int = param(ge=1, doc="SMs")
    freq_mhz: float = param(gt=0, le=10_000, doc="SM clock")
    max_threads_per_sm: int = param(ge=32, doc="resident threads per SM")
    max_ctas_per_sm: int = param(ge=1, doc="resident CTAs per SM")
    smem_per_sm_kib: float = param(gt=0, unit="KiB", doc="shared memory per SM")
    regs_per_sm: int = param(ge=1, doc="registers per SM")
    max_inflight_per_sm_kib: float = param(
        gt=0, unit="KiB", doc="most outstanding load bytes per SM"
    )
    pipeline_stages: int = param(ge=1, le=16, doc="tiles in flight per CTA")
    tensor_flop_per_cycle_per_sm: float = param(gt=0, unit="", doc="dense tensor FLOP/cycle/SM")
    fp32_flop_per_cycle_per_sm: float = param(gt=0, unit="", doc="FP32 FLOP/cycle/SM")
    l1_latency_cycles: int = param(ge=0, unit="", doc="L1 hit latency, cycles")
    compute_efficiency: float = param(default=0.8, gt=0, le=1, doc="sustained / peak compute")
    l1_cache_kib: float | None = param(default=None, gt=0, unit="KiB", doc="L1 reuse capacity")
    smem_reserved_per_cta_kib: float = param(
        default=0.0, ge=0, unit="KiB", doc="system shared memory per resident CTA"
    )
    regs_alloc_unit_per_warp: int = param(
        default=1, ge=1, doc="register allocation granularity per warp"
    )


L2Hash = Literal["xor", "modulo"]


@dataclass(frozen=True)
class L2Config:
    """The L2: sectored, set-associative, split into partitions with near and far latency.

    Attributes:
        capacity_mib: nominal capacity, MiB.
        effective_capacity_mib: capacity the simulated cache has (what a streaming benchmark
            keeps resident before its bandwidth falls: below nominal, as set hashing,
            partition duplication and reserved ways cost), MiB.
        line_bytes: bytes per line (tag granularity), B.
        sector_bytes: bytes per sector (fill and transfer granularity), B.
        ways: associativity.
        partitions: L2 partitions; an access to data homed in the SM's own partition pays
            ``near_latency_cycles``, any other ``far_latency_cycles``.
        near_latency_cycles: hit latency in the SM's own partition, cycles.
        far_latency_cycles: hit latency in another partition, cycles.
        hit_bw_gb_per_s: bandwidth of L2 hits, all partitions together, GB/s.
        set_hash: ``"xor"`` (line address bits folded, as GPUs spread strided streams) or
            ``"modulo"`` (line index modulo sets).
        dram_channel_hash: how L2 misses map to DRAM channels: ``"modulo"`` (chunk modulo
            channels, the shared off-chip model's interleave) or ``"rotate"`` (each group of
            ``channels`` interleave chunks rotated by a hashed offset, so that one strided
            stream alone uses every channel; the DRAM runs are then counted in issue order
            across the rotated groups, which splits the runs of interleaved streams).
    """

    capacity_mib: float = param(gt=0, doc="nominal capacity")
    effective_capacity_mib: float = param(gt=0, doc="simulated (effective) capacity")
    line_bytes: int = param(ge=1, doc="line size")
    sector_bytes: int = param(ge=1, doc="sector size")
    ways: int = param(ge=1, le=64, doc="associativity")
    partitions: int = param(ge=1, le=8, doc="near/far partitions")
    near_latency_cycles: int = param(ge=0, unit="", doc="hit latency, own partition")
    far_latency_cycles: int = param(ge=0, unit="", doc="hit latency, other partition")
    hit_bw_gb_per_s: float = param(gt=0, doc="L2 hit bandwidth")
    set_hash: L2Hash = param(default="xor", doc="address -> set hash")
    dram_channel_hash: Literal["rotate", "modulo"] = param(
        default="modulo", doc="address -> DRAM channel map"
    )

    @property
    def sets(self) -> int:
        """Sets of the simulated cache: ``effective capacity / (line x ways)``, at least 1."""
        return max(1, int(self.effective_capacity_mib * 2**20) // (self.line_bytes * self.ways))


@dataclass(frozen=True)
class GpuArchConfig:
    """One GPU (``arch_configs/gpu/<name>.yaml``; docs/gpu_mem.md).

    Attributes:
        kind: ``"gpu"``.
        name: short name (``h200``).
        sm: the streaming multiprocessors.
        l2: the L2 cache.
        dram: device memory (HBM or GDDR; the shared DRAM block, by file or inline).
        host_link: the host <-> device link (PCIe or NVLink-C2C).
        host_dram: host memory behind the link when the config describes it (GH200's
            LPDDR5X): host-side transfers are then capped by its sustained bandwidth. None
            for a discrete GPU whose host memory is not part of the model.
        launch_overhead_us: time from one kernel's end to the next kernel's start on a
            stream (launch latency), µs.
        description: one line.
        sources: provenance of figures, keyed by dotted field path (``sm.count``).
    """

    VERSION: ClassVar[int] = 1

    kind: Literal["gpu"] = param(doc="simulator kind: gpu")
    name: str = param(doc="short name")
    sm: SmConfig = param(doc="streaming multiprocessors")
    l2: L2Config = param(doc="L2 cache")
    dram: DramConfig = param(doc="device memory")
    host_link: HostLinkConfig = param(doc="host link")
    launch_overhead_us: float = param(ge=0, doc="kernel launch latency")
    host_dram: DramConfig | None = param(default=None, doc="host memory (null: not modelled)")
    description: str = param(default="", doc="one line")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: L2 geometry and partitions, and source keys that name fields."""
        out: list[Problem | str] = []
        l2 = self.l2
        if l2.effective_capacity_mib > l2.capacity_mib:
            out.append(
                Problem(
                    "",
                    "l2.effective_capacity_mib",
                    l2.effective_capacity_mib,
                    f"must be <= l2.capacity_mib={l2.capacity_mib}",
                )
            )
        if l2.line_bytes % l2.sector_bytes or l2.line_bytes // l2.sector_bytes > 32:
            out.append(
                Problem(
                    "",
                    "l2.sector_bytes",
                    l2.sector_bytes,
                    f"must divide l2.line_bytes={l2.line_bytes} into at most 32 sectors",
                )
            )
        if l2.far_latency_cycles < l2.near_latency_cycles:
            out.append(
                Problem(
                    "",
                    "l2.far_latency_cycles",
                    l2.far_latency_cycles,
                    f"must be >= l2.near_latency_cycles={l2.near_latency_cycles}",
                )
            )
        out.extend(source_key_problems(self, self.sources))
        return out

    @property
    def freq_mhz(self) -> float:
        """The SM clock, MHz (the clock of a result's cycles)."""
        return self.sm.freq_mhz


def arch_path(name: str | Path) -> Path:
    """The file of a GPU: a shipped name (``"h200"``) or a path.

    Args:
        name: one of :data:`ARCH_NAMES` (with or without ``.yaml``) or a file path.

    Returns:
        The path (it may not exist if a path was given).
    """
    return arch_file(KIND, ARCH_NAMES, name)


def load_arch(name: str | Path) -> GpuArchConfig:
    """Load a GPU by shipped name or path.

    Args:
        name: one of :data:`ARCH_NAMES` or a YAML file path.

    Returns:
        The validated :class:`GpuArchConfig`.

    Raises:
        ConfigError: every problem of the file.
    """
    return load_config(arch_path(name), GpuArchConfig)
