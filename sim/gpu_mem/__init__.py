"""GPU memory-hierarchy simulator (``kind: gpu``): sectors, L2, HBM, host link and streams.

See ``docs/gpu_mem.md``.
"""

from . import config
from .config import ARCH_NAMES, KIND, GpuArchConfig, L2Config, SmConfig, arch_path, load_arch

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "GpuArchConfig",
    "L2Config",
    "SmConfig",
    "arch_path",
    "config",
    "load_arch",
]
