"""Cycle-approximate and analytical simulator of the DeltaLLM vector processor on the KV260.

``simulate(arch, workload, mode="cycle" | "analytical") -> DeltaFpgaResult``: the architecture
is an ``arch_configs/deltallm_fpga/<name>.yaml`` (:class:`DeltaFpgaConfig`), the workload a
model shape and prefill scenario (``arch_configs/workloads/<model>.yaml``); the reference
(:mod:`coaccel.models.deltallm`) runs on seeded synthetic keys and emits the per-column event
trace that the cycle model (:func:`query_block_cycles`) consumes. See ``docs/deltallm_fpga.md``.
"""

from coaccel.spine.workload import load_workload

from . import _simulate
from ._simulate import (
    MODES,
    double_buffered_cycles,
    linear_macs_per_token,
    simulate,
    tellme_attention_cycles,
)
from .config import ARCH_NAMES, KIND, DeltaFpgaConfig, arch_path, load_arch
from .cycles import (
    KIND_DELTA,
    KIND_EXACT,
    KIND_SKIPPED,
    block_constants,
    blocks_cycles,
    query_block_cycles,
)
from .keys import layer_qk
from .priced import priced_components
from .resources import (
    Resources,
    dsp48e2_tiles,
    dsp_breakdown,
    estimate_resources,
    fit_problems,
    logic_breakdown,
    mux_luts,
)
from .result import DeltaFpgaResult

__all__ = [
    "load_workload",
    "ARCH_NAMES",
    "KIND",
    "KIND_DELTA",
    "KIND_EXACT",
    "KIND_SKIPPED",
    "MODES",
    "DeltaFpgaConfig",
    "DeltaFpgaResult",
    "Resources",
    "arch_path",
    "block_constants",
    "blocks_cycles",
    "double_buffered_cycles",
    "dsp48e2_tiles",
    "dsp_breakdown",
    "estimate_resources",
    "logic_breakdown",
    "fit_problems",
    "layer_qk",
    "linear_macs_per_token",
    "load_arch",
    "mux_luts",
    "priced_components",
    "query_block_cycles",
    "simulate",
    "tellme_attention_cycles",
]

del _simulate
