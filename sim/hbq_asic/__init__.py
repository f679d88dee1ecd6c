"""Cycle-approximate and analytical simulator of the HBQ ASIC accelerator ([R-ACC], [R-PM]).

``simulate(arch, workload, mode="cycle" | "analytical") -> HbqSimStats``: the architecture is an
``arch_configs/<name>.yaml`` (:class:`HbqArchConfig`), the workload a model shape and scenario
(``arch_configs/workloads/<model>.yaml``); the reference (:mod:`coaccel.models.hbq`) produces the
traces, the simulator consumes them and returns statistics as data. See ``docs/hbq_sim.md``.
"""

from . import _simulate, config, engine, priced, stats, workload
from ._simulate import simulate, simulate_segments
from .config import (
    ARCH_NAMES,
    KIND,
    HbqArchConfig,
    TilePlan,
    arch_path,
    attention_tiles,
    load_arch,
    tile_plan,
)
from .priced import priced_components
from .stats import STALL_CAUSES, BufferAccess, DramAccess, HbqSimStats, KindStats
from .workload import (
    WORKLOAD_NAMES,
    Workload,
    WorkloadConfig,
    iter_workload_segments,
    load_workload,
    workload_path,
    workload_segments,
    workload_tiles,
)

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "STALL_CAUSES",
    "WORKLOAD_NAMES",
    "BufferAccess",
    "DramAccess",
    "HbqArchConfig",
    "HbqSimStats",
    "KindStats",
    "TilePlan",
    "Workload",
    "WorkloadConfig",
    "arch_path",
    "attention_tiles",
    "config",
    "engine",
    "iter_workload_segments",
    "load_arch",
    "load_workload",
    "priced",
    "priced_components",
    "simulate",
    "simulate_segments",
    "stats",
    "tile_plan",
    "workload",
    "workload_path",
    "workload_segments",
    "workload_tiles",
]

del _simulate
