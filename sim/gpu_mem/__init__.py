"""GPU memory-hierarchy simulator (``kind: gpu``): sectors, L2, HBM, host link and streams.

``simulate(arch, workload, mode="analytical" | "cycle") -> GpuSimResult``: the architecture is
``arch_configs/gpu/<name>.yaml`` (:class:`GpuArchConfig`), the workload a GPU trace (a file, a
:class:`~coaccel.trace.Trace`, or a generator spec such as ``"splitk:context=131072"``). The
cycle mode replays every device sector through a sectored, partitioned L2 (numba) with DRAM
channels behind it; the analytical mode counts the same sectors in closed form. Both share the
per-kernel model (waves, Little's law, roofline compute) and the stream scheduler. See
``docs/gpu_mem.md``.
"""

from coaccel.sim.common import SimTarget

from . import analytical, config, occupancy, priced, result, timing, traffic, workload
from ._simulate import simulate
from .config import ARCH_NAMES, KIND, GpuArchConfig, L2Config, SmConfig, arch_path, load_arch
from .priced import priced_components
from .result import GpuSimResult, KernelResult, L2Stats, LinkStats
from .traffic import KernelTraffic, kernel_traffic
from .workload import WORKLOAD_GENERATORS, GpuWorkload, load_workload, register_generator

TARGET = SimTarget(
    kind=KIND,
    description="GPU memory hierarchy: sectored near/far L2, HBM channels, host link, streams",
    config_type=GpuArchConfig,
    modes=("analytical", "cycle"),
    arch_names=ARCH_NAMES,
    load_arch=load_arch,
    load_workload=load_workload,
    simulate=simulate,
    priced_components=priced_components,
    options=(),
)
"""This simulator as :func:`coaccel.simulate` and ``coaccel sim`` see it."""

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "TARGET",
    "WORKLOAD_GENERATORS",
    "analytical",
    "GpuArchConfig",
    "GpuSimResult",
    "GpuWorkload",
    "KernelResult",
    "KernelTraffic",
    "L2Config",
    "L2Stats",
    "LinkStats",
    "SmConfig",
    "arch_path",
    "config",
    "kernel_traffic",
    "load_arch",
    "load_workload",
    "occupancy",
    "priced",
    "priced_components",
    "register_generator",
    "result",
    "simulate",
    "timing",
    "traffic",
    "workload",
]
