"""The cycle-approximate engine of the HBQ ASIC simulator (docs/hbq_sim.md).

Two levels:

* **Tile micro-model** (:func:`pe_tile_cycles`): one compute record (a GEMM tile) on the PE array,
  cycle by cycle: weight propagation down the PE chain (``n_pes`` shifts per weight set, hidden
  behind the previous wave with shadow registers), one token broadcast per issue interval (PE,
  ACT-port and accumulate-unit limits, bit-sliced passes for wide operands), the partial-sum
  read-modify-write of every token in the banked PSUM buffer (a read and the write-back of an
  earlier token that land on one single-port bank in the same cycle stall the issue; a read of a
  word whose write-back is still in flight waits for it). The PE and accumulate-unit latencies
  and initiation intervals come from the architecture config, whose shipped values are the RTL's
  measured ones (``rtl/hbq/cycles.csv``; a test checks them).
* **Program engine** (:func:`run_program`): the trace is the accelerator's program. Its records
  run on in-order queues: the DMA queue (DRAM records, in program order, sharing the DRAM's
  sustained bandwidth; a read's data arrives the DRAM latency after its transfer), the PE array
  (``unit == "pe_array"`` compute records, occupancy from the micro-model, results after the
  pipeline latency) and the vector unit (softmax). A record starts when its queue is free and
  its ``dep`` has completed; on-chip memory records (PSUM, ACT) complete with their ``dep``.
  Buffer capacity and double buffering are the programs' buffer-slot dependencies.

The program engine is :mod:`coaccel.sim.common`'s, on the queues :data:`HBQ_QUEUES`; it exists
twice with identical results: a simpy process model (the reference, one process per queue) and a
numba loop over the same recurrence (the default, fast); a test checks that they agree record for
record. :data:`STALL_ATTRIBUTION` configures its stall attribution for the PE array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt

from coaccel.sim.common import (
    QUEUE_NONE,
    QueueProgram,
    Queues,
    RecordView,
    StallAttribution,
    TransferCauses,
    distinct_rows,
    merge_records,
    table_code,
)
from coaccel.sim.common import run_program as common_run_program
from coaccel.spine.trace import Trace

from ._hw import HwParams

__all__ = [
    "HBQ_QUEUES",
    "QUEUE_DMA",
    "QUEUE_NONE",
    "QUEUE_PE",
    "QUEUE_VECTOR",
    "STALL_ATTRIBUTION",
    "Program",
    "TileCycles",
    "build_program",
    "pe_tile_closed_form",
    "pe_tile_cycles",
    "run_program",
]

HBQ_QUEUES = Queues(("dma", "pe_array", "vector"))
"""The accelerator's in-order queues: the DMA engine (DRAM transfers), the PE array and the
vector (softmax) unit."""
QUEUE_DMA = HBQ_QUEUES.index("dma")
"""DRAM record (read or write) on the in-order DMA queue."""
QUEUE_PE = HBQ_QUEUES.index("pe_array")
"""Compute record on the PE array."""
QUEUE_VECTOR = HBQ_QUEUES.index("vector")
"""Compute record on the vector (softmax) unit."""

STALL_ATTRIBUTION = StallAttribution(
    queues=HBQ_QUEUES,
    critical="pe_array",
    wait_causes={"pe_array": "pipeline_latency", "vector": "vector_unit"},
    transfers={"dma": TransferCauses("dram_bandwidth", "dram_bandwidth", "dram_latency")},
    no_dependency="pipeline_latency",
)
"""How the PE array's idle gaps split by cause (docs/hbq_sim.md, "Stalls"): waiting for a
buffer slot the array itself frees is ``pipeline_latency``, for the softmax ``vector_unit``;
waiting for a DRAM transfer is ``dram_bandwidth`` while it is queued behind other transfers or
being transferred and ``dram_latency`` after (a transfer held back by the softmax or the array
charges that part to them)."""


@dataclass(frozen=True)
class TileCycles:
    """Cycles of one compute record (a GEMM tile) on the PE array: the micro-model's answer.

    Times are relative to the cycle the tile starts (the RTL's ``i_start`` cycle 0).
    ``occupancy == ideal + weight_propagation + issue_interval + operand_passes +
    psum_bank_conflict + pipeline_turnaround``.

    Attributes:
        occupancy: cycles until the array can start the next tile (the RTL's tile initiation
            interval: last result + ``fsm_cycles``).
        first_result: cycle of the first result of the last K step (the RTL's first
            ``o_y_valid``).
        last_result: cycle of the last result.
        ideal: tokens issued (``m * waves``).
        weight_propagation: exposed weight-shift cycles.
        issue_interval: extra cycles of an issue interval above 1 (PE, ACT port, accumulate
            unit).
        operand_passes: extra cycles of bit-sliced passes.
        psum_bank_conflict: issue slips from PSUM bank conflicts.
        pipeline_turnaround: state-machine and write-back waits between waves, the tile's start
            and its drain.
        waves: weight sets loaded (``ceil(k / kstep) * ceil(n / n_pes)``).
        psum_reads / psum_writes: PSUM words read / written.
    """

    occupancy: int
    first_result: int
    last_result: int
    ideal: int
    weight_propagation: int
    issue_interval: int
    operand_passes: int
    psum_bank_conflict: int
    pipeline_turnaround: int
    waves: int
    psum_reads: int
    psum_writes: int


@numba.njit(cache=True)
def _pe_tile_kernel(
    m,
    n,
    k,
    has_rd,
    p,
    kstep,
    sa_n,
    prop,
    shadow,
    ii,
    wb_cycles,
    rd_cycles,
    fsm,
    banks,
    ports,
):  # pragma: no cover - compiled; its results are checked against the RTL and the closed form
    ksteps = (k + kstep - 1) // kstep
    groups = (n + p - 1) // p
    r_full = (p + sa_n - 1) // sa_n
    d = wb_cycles - rd_cycles  # a token's write-back lands d issue slots after a later token's read
    cap = (d + 2) * r_full + 1
    w_time = np.full(cap, -1, dtype=np.int64)
    w_bank = np.zeros(cap, dtype=np.int64)
    w_head = 0
    use = np.zeros(banks, dtype=np.int64)
    prop_exposed = 0
    slips = 0
    reads = 0
    writes = 0
    first_issue = 0
    last_issue = 0
    last_first = 0
    for s in range(ksteps):
        for g in range(groups):
            w_index = s * groups + g
            gn = min(p, n - g * p)
            r = (gn + sa_n - 1) // sa_n
            if w_index == 0:
                exposed = prop
                start = fsm + prop
            else:
                # The next weights shift in after the last issue (or during the stream, with
                # shadow registers); issue resumes once the last token has written back.
                exposed = prop
                if shadow:
                    exposed = max(0, prop - (last_issue + 1 - first_issue))
                start = last_issue + fsm + max(exposed, wb_cycles)
            prop_exposed += exposed
            first_issue = start
            if s == ksteps - 1 and g == 0:
                last_first = start
            c_next = start
            do_read = s > 0 or has_rd
            base0 = g * m
            for t in range(m):
                c = c_next
                base = (base0 + t) * r
                while True:
                    for b in range(banks):
                        use[b] = 0
                    for i in range(cap):
                        if w_time[i] == c:
                            use[w_bank[i]] += 1
                    if do_read:
                        for w in range(r):
                            use[(base + w) % banks] += 1
                    ok = True
                    for b in range(banks):
                        if use[b] > ports:
                            ok = False
                    if ok:
                        break
                    c += 1
                    slips += 1
                if do_read:
                    reads += r
                for w in range(r):
                    w_time[w_head] = c + d
                    w_bank[w_head] = (base + w) % banks
                    w_head = (w_head + 1) % cap
                writes += r
                last_issue = c
                c_next = c + ii
    result_stage_cycles = wb_cycles + 1
    occupancy = last_issue + result_stage_cycles + fsm
    return (
        occupancy,
        last_first + result_stage_cycles,
        last_issue + result_stage_cycles,
        prop_exposed,
        slips,
        ksteps * groups,
        reads,
        writes,
    )


def pe_tile_cycles(
    hw: HwParams, m: int, n: int, k: int, *, has_psum_read: bool, fmt_a: str, fmt_b: str
) -> TileCycles:
    """Cycles of one GEMM tile on the PE array, simulated cycle by cycle (module docstring).

    The schedule is the RTL's (``rtl/hbq/hbq_array.v``, README "Schedule and cycle model"),
    generalized to several PE groups and any latencies: waves run K step outer, PE group inner
    (``ceil(k / kstep)`` steps x ``ceil(n / n_pes)`` groups). The first wave issues
    ``fsm_cycles + prop`` cycles after the tile starts (``prop`` = the weight shift); each later
    wave ``fsm_cycles + max(prop, writeback_stage_cycles)`` cycles after the previous wave's
    last issue (its weights shift in while the previous tokens drain, and issue waits until the
    last of them has written back); tokens issue one per ``token_ii``. Every token reads its
    partial-sum words (``ceil(channels / sa_n)``) ``psum_read_stage_cycles`` cycles after its
    issue, unless this is the first K step of an output tile without ``has_psum_read``, and
    writes them back ``writeback_stage_cycles`` cycles after it.
    PSUM words are laid out channel-group major, token, word (``((g * m) + t) * words + w``),
    banks interleave words (``bank = address mod banks``), and a cycle in which a bank would be
    accessed more than ``psum_ports`` times delays the issue. The tile ends (the next one may
    start) ``writeback_stage_cycles + 1 + fsm_cycles`` cycles after the last issue.

    Args:
        hw: hardware constants.
        m: tokens (rows). n: output channels. k: reduction elements.
        has_psum_read: the tile accumulates onto partial sums of an earlier tile.
        fmt_a: A-operand format name. fmt_b: W-operand format name.

    Returns:
        The :class:`TileCycles`.
    """
    ii = hw.token_ii(fmt_a, fmt_b)
    ii_np = hw.issue_ii(fmt_a)
    prop = hw.prop_cycles(fmt_b)
    occupancy_cycles, first, last, prop_x, slips, waves, reads, writes = _pe_tile_kernel(
        int(m), int(n), int(k), bool(has_psum_read), hw.n_pes, hw.kstep, hw.sa_n, prop,
        bool(hw.shadow_regs), ii, hw.writeback_stage_cycles, hw.psum_read_stage_cycles,
        hw.fsm_cycles, hw.psum_banks, hw.psum_ports,
    )  # fmt: skip
    gaps = int(waves) * (int(m) - 1)
    tokens = int(m) * int(waves)
    issue_x = gaps * (ii_np - 1)
    passes_x = gaps * (ii - ii_np)
    return TileCycles(
        occupancy=int(occupancy_cycles),
        first_result=int(first),
        last_result=int(last),
        ideal=tokens,
        weight_propagation=int(prop_x),
        issue_interval=issue_x,
        operand_passes=passes_x,
        psum_bank_conflict=int(slips),
        pipeline_turnaround=int(occupancy_cycles)
        - tokens
        - int(prop_x)
        - issue_x
        - passes_x
        - int(slips),
        waves=int(waves),
        psum_reads=int(reads),
        psum_writes=int(writes),
    )


def pe_tile_closed_form(
    hw: HwParams, m: int, n: int, k: int, *, has_psum_read: bool, fmt_a: str, fmt_b: str
) -> TileCycles:
    """The same tile in closed form, without PSUM bank conflicts (the analytical model).

    With ``W`` waves, stream ``S = 1 + (m - 1) * ii`` cycles per wave and ``e`` the exposed
    weight shift of a later wave (``prop``, or with shadow registers ``max(0, prop - S)``):
    ``occupancy = fsm + prop + W * S + (W - 1) * (fsm + max(e, wb) - 1) + wb + fsm`` with
    ``wb = writeback_stage_cycles``.
    Equal to :func:`pe_tile_cycles` whenever the banking is conflict-free (all shipped
    architectures); a test checks it.

    Args:
        hw, m, n, k, has_psum_read, fmt_a, fmt_b: as :func:`pe_tile_cycles`.

    Returns:
        The :class:`TileCycles` (``psum_bank_conflict = 0``).
    """
    ii = hw.token_ii(fmt_a, fmt_b)
    ii_np = hw.issue_ii(fmt_a)
    prop = hw.prop_cycles(fmt_b)
    ksteps = -(-k // hw.kstep)
    groups = -(-n // hw.n_pes)
    waves = ksteps * groups
    stream = 1 + (m - 1) * ii
    exposed = max(0, prop - stream) if hw.shadow_regs else prop
    fsm, writeback_stage_cycles = hw.fsm_cycles, hw.writeback_stage_cycles
    turn = (
        fsm + max(exposed, writeback_stage_cycles) - 1
    )  # from the cycle after a wave's last issue
    last_issue = fsm + prop + waves * stream - 1 + (waves - 1) * turn
    last_first = fsm + prop + (waves - groups) * (stream + turn)
    occupancy_cycles = last_issue + hw.result_stage_cycles + fsm
    words = (n // hw.n_pes) * (-(-hw.n_pes // hw.sa_n)) + (
        -(-(n % hw.n_pes) // hw.sa_n) if n % hw.n_pes else 0
    )
    tokens = m * waves
    prop_x = prop + (waves - 1) * exposed
    issue_x = waves * (m - 1) * (ii_np - 1)
    passes_x = waves * (m - 1) * (ii - ii_np)
    return TileCycles(
        occupancy=occupancy_cycles,
        first_result=last_first + hw.result_stage_cycles,
        last_result=last_issue + hw.result_stage_cycles,
        ideal=tokens,
        weight_propagation=prop_x,
        issue_interval=issue_x,
        operand_passes=passes_x,
        psum_bank_conflict=0,
        pipeline_turnaround=occupancy_cycles - tokens - prop_x - issue_x - passes_x,
        waves=waves,
        psum_reads=m * words * (ksteps - 1 + (1 if has_psum_read else 0)),
        psum_writes=m * words * ksteps,
    )


# ---------------------------------------------------------------------------------------------
# Programs


@dataclass(frozen=True, eq=False)  # array columns: compare them with numpy
class Program(QueueProgram):
    """A trace (or several, one after the other) as the engine runs it, in program order.

    The engine columns (``queue``, ``occupancy_cycles``, ``latency_cycles``, ``dep``) are those
    of :class:`~coaccel.sim.common.QueueProgram`, on the queues :data:`HBQ_QUEUES`; the other
    columns trace each record back to its trace and its tile model.

    Attributes:
        queue: shape (N,) int8: :data:`QUEUE_DMA`, :data:`QUEUE_PE`, :data:`QUEUE_VECTOR` or
            :data:`QUEUE_NONE`.
        occupancy_cycles: shape (N,) int64: cycles the record holds its queue.
        latency_cycles: shape (N,) int64: cycles from the end of its occupancy to its
            completion.
        dep: shape (N,) int64: index (into these arrays) of the record it waits for, or -1.
        segment: shape (N,) int32: index of the trace each record came from.
        kind: shape (N,) int8: 0 memory, 1 compute.
        index: shape (N,) int64: the record's row in its trace's ``memory`` or ``compute``.
        tile_id: shape (N,) int64: for PE records, the index into ``tiles`` of its micro-model
            result; -1 otherwise.
        tiles: the distinct micro-model results.
    """

    segment: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    index: npt.NDArray[np.int64]
    tile_id: npt.NDArray[np.int64]
    tiles: tuple[TileCycles, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        n = self.n_records
        for name in ("segment", "kind", "index", "tile_id"):
            if np.shape(getattr(self, name)) != (n,):
                raise ValueError(
                    f"Program.{name} has shape {np.shape(getattr(self, name))}; the program "
                    f"has {n} records"
                )


_TileKey = tuple[int, int, int, bool, str, str]
"""Micro-model cache key: ``(m, n, k, has_psum_read, fmt_a, fmt_b)``."""


@dataclass
class _TileTable:
    """The distinct micro-model results of a program, computed once each (through a cache
    shared between programs)."""

    hw: HwParams
    micro: Literal["cycle", "closed_form"]
    cache: dict[_TileKey, TileCycles]
    tiles: list[TileCycles]
    position: dict[_TileKey, int]

    def tile_id(self, key: _TileKey) -> int:
        """Index into :attr:`tiles` of a tile's result, computing it on first use."""
        tc = self.cache.get(key)
        if tc is None:
            model = pe_tile_cycles if self.micro == "cycle" else pe_tile_closed_form
            m, n, k, has_psum_read, fmt_a, fmt_b = key
            tc = model(self.hw, m, n, k, has_psum_read=has_psum_read, fmt_a=fmt_a, fmt_b=fmt_b)
            self.cache[key] = tc
        if key not in self.position:
            self.position[key] = len(self.tiles)
            self.tiles.append(tc)
        return self.position[key]


@dataclass
class _Columns:
    """The engine columns of one trace's records, filled kind by kind."""

    queue: npt.NDArray[np.int8]
    occupancy_cycles: npt.NDArray[np.int64]
    latency_cycles: npt.NDArray[np.int64]
    tile_id: npt.NDArray[np.int64]

    @classmethod
    def empty(cls, n_records: int) -> _Columns:
        """Every record on no queue, zero cycles, no tile."""
        return cls(
            np.full(n_records, QUEUE_NONE, dtype=np.int8),
            np.zeros(n_records, dtype=np.int64),
            np.zeros(n_records, dtype=np.int64),
            np.full(n_records, -1, dtype=np.int64),
        )


def _place_memory(hw: HwParams, trace: Trace, view: RecordView, cols: _Columns) -> None:
    """DRAM records go on the DMA queue: ``ceil(bytes / sustained bytes per cycle)`` of
    occupancy, and a read's data arrives the DRAM latency later. Other memory records (on-chip
    buffers) stay on no queue."""
    pos_m = view.positions("memory")
    rows_m = view.index[pos_m]
    mem = trace.memory
    # Column by column (a gather of whole structured records is much slower).
    is_dram = (mem["space"] == table_code(trace, "space", "DRAM"))[rows_m]
    pos_d = pos_m[is_dram]
    rows_d = rows_m[is_dram]
    nbytes = mem["nbytes"][rows_d] * mem["count"][rows_d]
    cols.queue[pos_d] = QUEUE_DMA
    cols.occupancy_cycles[pos_d] = np.where(
        nbytes > 0, np.ceil(nbytes / hw.dram_bytes_per_cycle).astype(np.int64), 0
    )
    cols.latency_cycles[pos_d] = np.where(mem["rw"][rows_d] == 0, hw.dram_latency_cycles, 0)


def _follows_psum_read(trace: Trace, view: RecordView, pos: npt.NDArray[np.int64]) -> np.ndarray:
    """Whether the record just before each position is a PSUM read: a compute record's
    partial-sum read (``seq - 1``, the convention of :func:`coaccel.models.hbq.gemm_trace`)."""
    prev = pos - 1
    out = np.zeros(pos.size, dtype=bool)
    is_mem = (prev >= 0) & (view.kind[np.maximum(prev, 0)] == view.kinds.index("memory"))
    rows = view.index[prev[is_mem]]
    mem = trace.memory
    is_psum = mem["space"][rows] == table_code(trace, "space", "PSUM")
    out[is_mem] = is_psum & (mem["rw"][rows] == 0)
    return out


def _place_compute(
    hw: HwParams, trace: Trace, view: RecordView, cols: _Columns, tiles: _TileTable, where: str
) -> None:
    """PE-array records go on the PE queue with the micro-model's occupancy (it includes the
    drain: results are out when it ends); vector records on the vector queue,
    ``ceil(m * n / elems per cycle)`` cycles and the unit's latency."""
    pos_c = view.positions("compute")
    rows_c = view.index[pos_c]
    comp = trace.compute
    unit = comp["unit"][rows_c]
    on_pe = unit == table_code(trace, "unit", "pe_array")
    on_vec = unit == table_code(trace, "unit", "vector")
    other = ~(on_pe | on_vec)
    if other.any():
        units = sorted({trace.table("unit")[u] for u in np.unique(unit[other]).tolist()})
        raise ValueError(
            f"{where}: compute unit(s) {units} are not simulated by the HBQ ASIC engine "
            "(pe_array, vector)"
        )
    pos_pe = pos_c[on_pe]
    if pos_pe.size:
        rows_pe = rows_c[on_pe]
        fmts = trace.table("fmt")
        inverse, keys = distinct_rows(
            [comp["m"][rows_pe], comp["n"][rows_pe], comp["k"][rows_pe],
             _follows_psum_read(trace, view, pos_pe).astype(np.int64),
             comp["fmt_a"][rows_pe], comp["fmt_b"][rows_pe]]
        )  # fmt: skip
        key_occupancy = np.zeros(len(keys), dtype=np.int64)
        key_tile = np.zeros(len(keys), dtype=np.int64)
        for i, (m, n, k, has_rd, fmt_a, fmt_b) in enumerate(keys.tolist()):
            tid = tiles.tile_id((m, n, k, bool(has_rd), str(fmts[fmt_a]), str(fmts[fmt_b])))
            key_occupancy[i] = tiles.tiles[tid].occupancy
            key_tile[i] = tid
        cols.queue[pos_pe] = QUEUE_PE
        cols.occupancy_cycles[pos_pe] = key_occupancy[inverse]
        cols.latency_cycles[pos_pe] = 0
        cols.tile_id[pos_pe] = key_tile[inverse]
    pos_vec = pos_c[on_vec]
    rows_vec = rows_c[on_vec]
    elems = comp["m"][rows_vec] * comp["n"][rows_vec]
    cols.queue[pos_vec] = QUEUE_VECTOR
    cols.occupancy_cycles[pos_vec] = -(-elems // hw.vector_elems_per_cycle)
    cols.latency_cycles[pos_vec] = hw.vector_latency_cycles


_PROGRAM_DTYPES = (np.int8, np.int64, np.int64, np.int64, np.int32, np.int8, np.int64, np.int64)


def build_program(
    hw: HwParams,
    traces: Sequence[Trace],
    tile_cycles: dict[_TileKey, TileCycles],
    *,
    micro: Literal["cycle", "closed_form"] = "cycle",
) -> Program:
    """Turn traces into engine records (queues, occupancies, latencies, dependencies).

    Each trace's memory and compute records are merged in issue order
    (:func:`~coaccel.sim.common.merge_records`). DRAM records run on the DMA queue, PE-array
    compute records on the PE queue (occupancy from the tile micro-model, each distinct tile
    computed once), vector compute records on the vector queue; on-chip memory records (PSUM,
    ACT) occupy no queue. A compute record's partial-sum read is the PSUM read record just
    before it (``seq - 1``), the convention of :func:`coaccel.models.hbq.gemm_trace` and
    ``attention_trace``.

    Args:
        hw: hardware constants.
        traces: the traces, run one after the other (dependencies stay within a trace).
        tile_cycles: cache of micro-model results, filled as needed (key ``(m, n, k,
            has_psum_read, fmt_a, fmt_b)``).
        micro: the tile model: ``"cycle"`` (:func:`pe_tile_cycles`) or ``"closed_form"``.

    Returns:
        The :class:`Program`.

    Raises:
        ValueError: a compute record on a unit other than ``pe_array`` and ``vector``.
    """
    tiles = _TileTable(hw, micro, tile_cycles, [], {})
    parts: list[tuple[npt.NDArray[Any], ...]] = []
    offset = 0
    for si, trace in enumerate(traces):
        view = merge_records(trace, ("memory", "compute"))
        n = view.kind.size
        cols = _Columns.empty(n)
        _place_memory(hw, trace, view, cols)
        _place_compute(hw, trace, view, cols, tiles, f"trace {si}")
        parts.append(
            (cols.queue, cols.occupancy_cycles, cols.latency_cycles,
             np.where(view.dep >= 0, view.dep + offset, -1), np.full(n, si, np.int32),
             view.kind, view.index, cols.tile_id)
        )  # fmt: skip
        offset += n
    columns: list[npt.NDArray[Any]]
    if len(parts) == 1:
        columns = [c.astype(t, copy=False) for c, t in zip(parts[0], _PROGRAM_DTYPES, strict=True)]
    elif parts:
        columns = [
            np.concatenate(c).astype(t, copy=False)
            for c, t in zip(zip(*parts, strict=True), _PROGRAM_DTYPES, strict=True)
        ]
    else:
        columns = [np.zeros(0, t) for t in _PROGRAM_DTYPES]
    queue, occupancy, latency, dep, segment, kind, index, tile_id = columns
    return Program(
        queue=queue,
        occupancy_cycles=occupancy,
        latency_cycles=latency,
        dep=dep,
        segment=segment,
        kind=kind,
        index=index,
        tile_id=tile_id,
        tiles=tuple(tiles.tiles),
    )


# ---------------------------------------------------------------------------------------------
# Engine


def run_program(
    prog: Program,
    *,
    engine: Literal["fast", "simpy"] = "fast",
    free: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run a program on the HBQ queues: each record's start and completion cycle.

    :func:`coaccel.sim.common.run_program` on :data:`HBQ_QUEUES`. Semantics (both engines): a
    queued record starts at ``max(queue free, completion of dep)``, holds its queue for
    ``occupancy_cycles`` and completes ``latency_cycles`` later; an on-chip record starts and
    completes when its dependency completes (at 0 without one).

    Args:
        prog: the program.
        engine: ``"fast"`` (numba) or ``"simpy"`` (the event-driven reference).
        free: shape (3,) int64, the cycle each queue (DMA, PE, vector) becomes free, for a
            program that continues earlier ones; updated in place. None: all free at 0.

    Returns:
        ``(start, done)``, shape (N,) int64 each, cycles.
    """
    return common_run_program(prog, queue_names=HBQ_QUEUES, engine=engine, free=free)
