"""The cycle-approximate fidelity: the schedule of a GEMM tile by tile, transfer by transfer.

Two queues run in order: the DMA engine (transfers, each holding the engine for its
occupancy at the DRAM's sustained bandwidth and completing the first-access latency later) and
the PE array (array tiles of ``m_i + R + C - 2`` cycles). In program order, before the array
tile ``t`` of token tile ``i``, output tile ``g`` and reduction tile ``l``:

1. the DMA engine prefetches weight tile ``t + S_w - 1`` into the slot weight tile ``t - 1``
   used, once array tile ``t - 1`` is done;
2. at the first array tile of token tile ``i``, it prefetches the activation slab of token
   tile ``i + 1`` into the slot of slab ``i - 1``, once the last array tile of token tile
   ``i - 1`` is done;
3. array tile ``t`` starts when the array is free, its weight tile and its slab have arrived,
   and (for ``l = 0``) output tile ``g - 2`` has left its output slot;
4. after the last reduction tile of output tile ``g``, the DMA engine writes it out.

The run ends when the last output tile is written. The prologue loads slab 0 and weight tiles
``0 .. S_w - 2``.

Two engines give the same cycles, tile for tile: ``"fast"``, a numba loop over the tiles that
keeps only the state the schedule needs (memory independent of the GEMM's size), and
``"simpy"``, the same schedule as records on coaccel's event engine
(:func:`coaccel.sim.common.run_program` with its simpy reference): a record per transfer and
per array tile, and zero-length records on the PE queue that make an array tile also wait
for its slab and its output slot (each record names one dependency; the in-order PE queue
joins them). The simpy engine holds every record in memory: use it on small GEMMs.

Public: :func:`gemm_timing`, :func:`queue_program`, :data:`QUEUES`, :data:`ENGINES`.
"""

from __future__ import annotations

from typing import Literal

import numba
import numpy as np
import numpy.typing as npt

from coaccel.sim.common import QueueProgram, Queues, run_program

from .config import SystolicArchConfig
from .schedule import DmaCycles, GemmPlan, dma_cycles
from .timing import GemmTiming

__all__ = ["ENGINES", "QUEUES", "gemm_timing", "queue_program"]

QUEUES = Queues(("dma", "pe_array"))
"""The queues of the simpy engine's program."""

ENGINES = ("fast", "simpy")
"""Engines of the cycle mode."""

Engine = Literal["fast", "simpy"]


@numba.njit(cache=True)
def _run_tiles(
    t_m, t_n, t_k, m_tile, m_last, skew, slots, occ_a, occ_w, occ_o, lat, c_done_out
):  # pragma: no cover - compiled; equal to the simpy engine (tested)
    n_tiles = t_m * t_n * t_k
    d = slots - 1
    w_done = np.zeros(slots, dtype=np.int64)
    a_done = np.zeros(2, dtype=np.int64)
    o_done = np.zeros(2, dtype=np.int64)
    record = c_done_out.size > 0
    # prologue: slab 0, then weight tiles 0 .. d - 1
    dma_free = np.int64(occ_a[1 if t_m == 1 else 0])
    a_done[0] = dma_free + lat
    for u in range(min(d, n_tiles)):
        lk = 1 if u % t_k == t_k - 1 else 0
        ln = 1 if (u // t_k) % t_n == t_n - 1 else 0
        dma_free = dma_free + occ_w[lk, ln]
        w_done[u % slots] = dma_free + lat
    pe_free = np.int64(0)
    c_prev = np.int64(0)
    first_start = np.int64(0)
    end = np.int64(0)
    t = 0
    for i in range(t_m):
        rows = m_last if i == t_m - 1 else m_tile
        for j in range(t_n):
            g = i * t_n + j
            for ell in range(t_k):
                u = t + d
                if u < n_tiles:  # 1. weight prefetch into the slot of tile t - 1
                    lk = 1 if u % t_k == t_k - 1 else 0
                    ln = 1 if (u // t_k) % t_n == t_n - 1 else 0
                    s = max(dma_free, c_prev)
                    dma_free = s + occ_w[lk, ln]
                    w_done[u % slots] = dma_free + lat
                if j == 0 and ell == 0 and i + 1 < t_m:  # 2. next slab into slab i - 1's slot
                    s = max(dma_free, c_prev)
                    dma_free = s + occ_a[1 if i + 1 == t_m - 1 else 0]
                    a_done[(i + 1) % 2] = dma_free + lat
                ready = max(w_done[t % slots], a_done[i % 2])  # 3. the array tile
                if ell == 0 and g >= 2:
                    ready = max(ready, o_done[g % 2])
                start = max(pe_free, ready)
                if t == 0:
                    first_start = start
                pe_free = start + rows + skew
                c_prev = pe_free
                if record:
                    c_done_out[t] = pe_free
                if ell == t_k - 1:  # 4. write the output tile
                    s = max(dma_free, pe_free)
                    dma_free = s + occ_o[1 if i == t_m - 1 else 0, 1 if j == t_n - 1 else 0]
                    o_done[g % 2] = dma_free + lat
                    end = dma_free + lat
                t += 1
    return end, first_start


def _tables(d: DmaCycles) -> tuple[npt.NDArray[np.int64], ...]:
    return (
        np.asarray(d.act, dtype=np.int64),
        np.asarray(d.weight, dtype=np.int64),
        np.asarray(d.out, dtype=np.int64),
    )


def _fast(
    arch: SystolicArchConfig, plan: GemmPlan, c_done_out: npt.NDArray[np.int64]
) -> tuple[int, int]:
    d = dma_cycles(arch, plan)
    occ_a, occ_w, occ_o = _tables(d)
    end, first = _run_tiles(
        plan.t_m,
        plan.t_n,
        plan.t_k,
        plan.m_tile,
        plan.m_last,
        plan.skew_cycles,
        plan.weight_slots,
        occ_a,
        occ_w,
        occ_o,
        d.latency,
        c_done_out,
    )
    return int(end), int(first)


def queue_program(arch: SystolicArchConfig, plan: GemmPlan) -> tuple[QueueProgram, np.ndarray]:
    """The schedule of a GEMM as records on coaccel's event engine (module docstring).

    Args:
        arch: the architecture.
        plan: the GEMM's plan.

    Returns:
        ``(program, tile_records)``: the :class:`~coaccel.sim.common.QueueProgram` on
        :data:`QUEUES`, and the position of each array tile's record in it (int64, shape
        ``(T_m T_n T_k,)``).
    """
    d = dma_cycles(arch, plan)
    dma, pe = QUEUES.index("dma"), QUEUES.index("pe_array")
    q: list[int] = []
    occ: list[int] = []
    lat: list[int] = []
    dep: list[int] = []

    def add(queue: int, occupancy: int, latency: int, depends: int) -> int:
        q.append(queue)
        occ.append(occupancy)
        lat.append(latency)
        dep.append(depends)
        return len(q) - 1

    t_m, t_n, t_k, slots = plan.t_m, plan.t_n, plan.t_k, plan.weight_slots
    n_tiles = plan.tiles
    w_size = [
        d.weight[int(u % t_k == t_k - 1)][int((u // t_k) % t_n == t_n - 1)] for u in range(n_tiles)
    ]
    a_pos = [0] * t_m
    w_pos = [0] * n_tiles
    o_pos = [0] * (t_m * t_n)
    c_pos = np.zeros(n_tiles, dtype=np.int64)
    a_pos[0] = add(dma, d.first_act(plan), d.latency, -1)
    for u in range(min(slots - 1, n_tiles)):
        w_pos[u] = add(dma, w_size[u], d.latency, -1)
    t = 0
    for i in range(t_m):
        rows = plan.m_last if i == t_m - 1 else plan.m_tile
        for j in range(t_n):
            g = i * t_n + j
            for ell in range(t_k):
                prev = int(c_pos[t - 1]) if t else -1
                u = t + slots - 1
                if u < n_tiles:
                    w_pos[u] = add(dma, w_size[u], d.latency, prev)
                if j == 0 and ell == 0 and i + 1 < t_m:
                    a_pos[i + 1] = add(dma, d.act[int(i + 1 == t_m - 1)], d.latency, prev)
                if j == 0 and ell == 0:
                    add(pe, 0, 0, a_pos[i])  # wait for the slab
                if ell == 0 and g >= 2:
                    add(pe, 0, 0, o_pos[g - 2])  # wait for the output slot
                c_pos[t] = add(pe, rows + plan.skew_cycles, 0, w_pos[t])
                if ell == t_k - 1:
                    last = (int(i == t_m - 1), int(j == t_n - 1))
                    o_pos[g] = add(dma, d.out[last[0]][last[1]], d.latency, int(c_pos[t]))
                t += 1
    prog = QueueProgram(
        queue=np.asarray(q, dtype=np.int8),
        occupancy_cycles=np.asarray(occ, dtype=np.int64),
        latency_cycles=np.asarray(lat, dtype=np.int64),
        dep=np.asarray(dep, dtype=np.int64),
    )
    return prog, c_pos


def gemm_timing(
    arch: SystolicArchConfig,
    plan: GemmPlan,
    *,
    engine: Engine = "fast",
    tile_done: npt.NDArray[np.int64] | None = None,
) -> GemmTiming:
    """Run one GEMM tile by tile (module docstring).

    Args:
        arch: the architecture.
        plan: the GEMM's plan (:func:`~.schedule.plan_gemm`).
        engine: ``"fast"`` (numba tile loop) or ``"simpy"`` (records on coaccel's event
            engine, its simpy reference).
        tile_done: optional int64 array of shape ``(T_m T_n T_k,)``, filled with the cycle
            each array tile finishes.

    Returns:
        The :class:`~.timing.GemmTiming`.

    Raises:
        ValueError: an unknown engine, or a ``tile_done`` of the wrong shape.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}; valid: {', '.join(ENGINES)}")
    n = plan.tiles
    if tile_done is not None and (tile_done.shape != (n,) or tile_done.dtype != np.int64):
        raise ValueError(f"tile_done must be an int64 array of shape ({n},)")
    out = np.zeros(0, dtype=np.int64) if tile_done is None else tile_done
    d = dma_cycles(arch, plan)
    if engine == "fast":
        end, first = _fast(arch, plan, out)
    else:
        prog, c_pos = queue_program(arch, plan)
        start, done = run_program(prog, queue_names=QUEUES, engine="simpy")
        end, first = int(done.max()), int(start[c_pos[0]])
        if tile_done is not None:
            tile_done[:] = done[c_pos]
    prologue = first
    epilogue = d.out[1][1] + d.latency
    compute = plan.compute_cycles
    return GemmTiming(
        cycles=end,
        prologue=prologue,
        busy=plan.streaming_cycles,
        fill_drain=compute - plan.streaming_cycles,
        dram_stall=end - prologue - compute - epilogue,
        epilogue=epilogue,
        dma_busy=d.total(plan),
    )
