"""GPU memory-hierarchy simulator (``kind: gpu``): sectors, L2, HBM, host link and streams.

``simulate(arch, workload, mode="analytical" | "cycle") -> GpuSimResult``: the architecture is
``arch_configs/gpu/<name>.yaml`` (:class:`GpuArchConfig`), the workload a GPU trace (a file, a
:class:`~coaccel.trace.Trace`, or a generator spec such as ``"splitk:context=131072"``). The
cycle mode replays every device sector through a sectored, partitioned L2 (numba) with DRAM
channels behind it; the analytical mode counts the same sectors in closed form. Both share the
per-kernel model (waves, Little's law, roofline compute) and the stream scheduler. See
``docs/gpu_mem.md``. A dense decode-attention op also gets a time calibrated on measured ops
with a 90 % prediction interval (:mod:`.intervals`, docs/gpu_measured.md).
"""

from . import analytical, config, intervals, occupancy, priced, result, timing, traffic, workload
from ._simulate import simulate
from .config import ARCH_NAMES, KIND, GpuArchConfig, L2Config, SmConfig, arch_path, load_arch
from .priced import priced_components
from .result import CalibratedTime, GpuSimResult, KernelResult, L2Stats, LinkStats
from .traffic import KernelTraffic, kernel_traffic
from .workload import WORKLOAD_GENERATORS, GpuWorkload, load_workload, register_generator

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "WORKLOAD_GENERATORS",
    "analytical",
    "CalibratedTime",
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
    "intervals",
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
