"""Cycle-approximate and analytical simulator of the DeltaLLM vector processor on the KV260.

``simulate(arch, workload, mode="cycle" | "analytical") -> DeltaFpgaResult``: the architecture
is an ``arch_configs/deltallm_fpga/<name>.yaml`` (:class:`DeltaFpgaConfig`), the workload a
model shape and prefill scenario (``arch_configs/workloads/<model>.yaml``); the reference
(:mod:`coaccel.models.deltallm`) runs on seeded synthetic keys and emits the per-column event
trace that the cycle model (:func:`query_block_cycles`) consumes. See ``docs/deltallm_fpga.md``.
"""

from .config import ARCH_NAMES, KIND, DeltaFpgaConfig, arch_path, load_arch
from .cycles import (
    KIND_DELTA,
    KIND_EXACT,
    KIND_SKIPPED,
    block_constants,
    blocks_cycles,
    query_block_cycles,
)
from .resources import Resources, estimate_resources, fit_problems, mux_luts

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "KIND_DELTA",
    "KIND_EXACT",
    "KIND_SKIPPED",
    "DeltaFpgaConfig",
    "Resources",
    "arch_path",
    "block_constants",
    "blocks_cycles",
    "estimate_resources",
    "fit_problems",
    "load_arch",
    "mux_luts",
    "query_block_cycles",
]
