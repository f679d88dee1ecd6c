"""Assembly of the HBQ simulator's result, shared by the cycle-approximate and analytical modes.

:func:`_stats` builds the :class:`~.stats.HbqSimStats` from the totals either mode computes and
:func:`_notes` says how the numbers were obtained.
"""

from __future__ import annotations

from typing import Literal

from coaccel.models.hbq import WorkloadTiles
from coaccel.spine.config import config_digest

from ._hw import HwParams
from .config import HbqArchConfig
from .stats import BufferAccess, DramAccess, HbqSimStats, KindStats
from .workload import Workload, workload_tiles

Mode = Literal["cycle", "analytical"]


def _notes(workload: Workload, *, engine: str) -> tuple[str, ...]:
    sc = workload.scenario
    notes = [
        engine,
        f"identical transformer layers simulated once and scaled by {workload.model.layers}; "
        "DRAM traffic is the simulated trace's, times the layer count",
    ]
    if sc.phase == "decode":
        notes.append(f"{sc.decode_steps} decode step(s), each simulated")
    if sc.causal_tile_skip:
        notes.append("attention tiles wholly hidden by the causal mask are skipped")
    notes.append("RMSNorm, residual adds and rotary embeddings are not traced")
    return tuple(notes)


def _stats(
    arch: HbqArchConfig,
    workload: Workload,
    hw: HwParams,
    mode: Mode,
    cycles: int,
    macs: int,
    stall: dict[str, int],
    buffers: dict[str, BufferAccess],
    dram: DramAccess,
    by_name: dict[str, KindStats],
    notes: tuple[str, ...],
    tiles: WorkloadTiles | None = None,
) -> HbqSimStats:
    if tiles is None:
        tiles = workload_tiles(arch, workload)
    peak = hw.peak_macs_per_cycle
    return HbqSimStats(
        arch=arch.name,
        workload=workload.label,
        mode=mode,
        config_digest=config_digest(arch),
        workload_digest=workload.digest,
        freq_mhz=arch.freq_mhz,
        cycles=cycles,
        seconds=cycles / (arch.freq_mhz * 1e6),
        macs=macs,
        peak_macs_per_cycle=peak,
        utilisation=macs / (cycles * peak) if cycles else 0.0,
        stall_cycles=stall,
        buffers=buffers,
        dram=dram,
        by_name=by_name,
        tiles={
            "tile_m": tiles.tile_m,
            "tile_n": tiles.tile_n,
            "tile_k": tiles.tile_k,
            "attn_rows": tiles.attn_rows,
            "attn_keys": tiles.attn_keys,
            "n_buffers": tiles.n_buffers,
            "act_resident": int(tiles.act_resident_bits is not None),
        },
        layers=workload.model.layers,
        layers_simulated=1,
        notes=notes,
    )
