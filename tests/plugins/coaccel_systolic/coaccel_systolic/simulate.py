"""``simulate``: a workload's GEMMs on a systolic array, analytical or cycle-approximate.

Every GEMM is planned once (:func:`~.schedule.plan_gemm`), timed by the chosen fidelity
(:mod:`.analytical` or :mod:`.cycle`) and counted ``repeat`` times; GEMMs run one after the
other, each with its own prologue and epilogue. SRAM accesses and DRAM bytes follow from the
plan and are the same in both modes.

Public: :func:`simulate`, :data:`MODES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from coaccel.sim.common import OffchipAccess
from coaccel.sim.common.result import BufferAccess
from coaccel.spine.config import ConfigError, FrozenMap, Problem, config_digest
from coaccel.spine.workload import Workload

from . import analytical, cycle
from .config import KIND, SystolicArchConfig, load_arch
from .result import GemmStats, SystolicResult
from .schedule import buffer_accesses, plan_gemm
from .timing import PE_STATES
from .workload import GemmWorkload, load_workload

__all__ = ["MODES", "SIMPY_MAX_TILES", "simulate"]

MODES = ("analytical", "cycle")
"""The fidelities, fastest first."""

SIMPY_MAX_TILES = 100_000
"""Most array tiles per GEMM the simpy engine takes (it holds every record in memory)."""


def simulate(
    arch: SystolicArchConfig | str | Path,
    workload: GemmWorkload | Workload | str | Path,
    *,
    mode: Literal["analytical", "cycle"] = "cycle",
    engine: Literal["fast", "simpy"] = "fast",
) -> SystolicResult:
    """Simulate a workload on a systolic array.

    Args:
        arch: a loaded config, a shipped name (``"systolic_32x32"``) or a YAML path.
        workload: a :class:`~.workload.GemmWorkload`, a model workload, or a name
            (:data:`~.workload.WORKLOAD_KINDS`).
        mode: ``"analytical"`` (closed form) or ``"cycle"`` (tile by tile).
        engine: the cycle mode's engine, ``"fast"`` (numba) or ``"simpy"`` (coaccel's event
            engine; GEMMs of at most :data:`SIMPY_MAX_TILES` array tiles).

    Returns:
        The :class:`~.result.SystolicResult`.

    Raises:
        ConfigError: a bad architecture, workload, mode or engine (or a GEMM too large for the
            simpy engine), or an activation SRAM too small for a GEMM's reduction length.
    """
    cfg = arch if isinstance(arch, SystolicArchConfig) else load_arch(arch)
    wl = load_workload(workload)
    problems = []
    if mode not in MODES:
        problems.append(Problem("<simulate>", "mode", mode, "unknown mode", ", ".join(MODES)))
    if engine not in cycle.ENGINES:
        problems.append(
            Problem("<simulate>", "engine", engine, "unknown engine", ", ".join(cycle.ENGINES))
        )
    if problems:
        raise ConfigError(problems)
    states = dict.fromkeys(PE_STATES, 0)
    dma_busy = cycles = macs = 0
    bufs = {k: [0, 0, 0, 0, 0] for k in ("ACT", "WGT", "OUT")}
    x_bytes = w_bytes = y_bytes = reads = writes = 0
    gemms = []
    for g in wl.gemms:
        plan = plan_gemm(cfg, g)
        if mode == "cycle" and engine == "simpy" and plan.tiles > SIMPY_MAX_TILES:
            raise ConfigError(
                [
                    Problem(
                        "<simulate>",
                        "engine",
                        engine,
                        f"{g.name} has {plan.tiles:,} array tiles; the simpy engine holds every "
                        f"record in memory and takes at most {SIMPY_MAX_TILES:,}: use 'fast'",
                        ", ".join(cycle.ENGINES),
                    )
                ]
            )
        if mode == "analytical":
            t = analytical.gemm_timing(cfg, plan)
        else:
            t = cycle.gemm_timing(cfg, plan, engine=engine)
        r = g.repeat
        for s in PE_STATES:
            states[s] += getattr(t, s) * r
        cycles += t.cycles * r
        dma_busy += t.dma_busy * r
        macs += g.macs * r
        for name, acc in buffer_accesses(cfg, plan).items():
            b = bufs[name]
            b[0] += acc.reads * r
            b[1] += acc.writes * r
            b[2] += acc.read_bytes * r
            b[3] += acc.write_bytes * r
            b[4] = acc.word_bits
        a_b, w_b = plan.dram_read_bytes()
        x_bytes += a_b * r
        w_bytes += w_b * r
        y_bytes += plan.dram_write_bytes() * r
        reads += (plan.t_m + plan.tiles) * r
        writes += plan.t_m * plan.t_n * r
        gemms.append(
            GemmStats(
                g.name,
                g.m,
                g.k,
                g.n,
                r,
                plan.m_tile,
                plan.tiles,
                t.cycles * r,
                t.dram_stall * r,
                g.macs * r,
            )
        )
    notes = [
        "weight-stationary schedule: token tiles x output tiles x reduction tiles, "
        "R + C - 2 cycles of fill and drain per array tile; GEMMs run one after the other",
    ]
    if mode == "analytical":
        notes.append("analytical: max(prologue + compute + epilogue, DMA busy + latency)")
    else:
        notes.append(f"cycle: tile by tile ({engine} engine), one in-order DMA engine")
    return SystolicResult(
        target=KIND,
        arch=cfg.name,
        workload=wl.label,
        mode=mode,
        config_digest=config_digest(cfg),
        freq_mhz=cfg.freq_mhz,
        cycles=cycles,
        seconds=cycles / (cfg.freq_mhz * 1e6),
        resources=FrozenMap(
            {
                "pe_array": FrozenMap(states),
                "dram": FrozenMap({"busy": dma_busy, "idle": cycles - dma_busy}),
            }
        ),
        buffers=FrozenMap({k: BufferAccess(*v) for k, v in bufs.items()}),
        offchip=OffchipAccess(
            reads=reads,
            writes=writes,
            read_bytes=x_bytes + w_bytes,
            write_bytes=y_bytes,
            by_tensor=FrozenMap({"activations": x_bytes, "weights": w_bytes, "outputs": y_bytes}),
        ),
        notes=(*notes, *wl.notes),
        macs=macs,
        rows=cfg.array.rows,
        cols=cfg.array.cols,
        gemms=tuple(gemms),
    )
