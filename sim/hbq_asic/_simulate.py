"""``simulate``: one workload on one architecture, cycle-approximate or analytical.

The cycle-approximate mode (:func:`simulate_segments`) runs each trace segment in stages:

1. timing (:func:`_time_segment`): the segment's program on the HBQ queues
   (:mod:`coaccel.sim.common`'s engine) and the PE array's cycles split into ``busy`` and
   stall causes (the tile micro-model's causes plus :data:`~.engine.STALL_ATTRIBUTION`'s);
2. traffic (:func:`_dram_traffic`): the DRAM reads and writes of the trace;
3. buffers (:func:`_add_buffer_accesses`): ACT, WGT and PSUM words and bytes;
4. assembly (:func:`_assemble_cycle_stats`): the running totals of all segments (times their
   ``repeat``) and the final drain, as :class:`~.stats.HbqSimStats`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from coaccel.models.hbq import TraceSegment
from coaccel.sim.common import attribute_stalls, table_code
from coaccel.spine.trace import Trace

from ._hw import HwParams, hw_params
from ._result import _notes, _stats
from .analytical import simulate_analytical
from .config import HbqArchConfig, load_arch
from .engine import (
    QUEUE_NONE,
    QUEUE_PE,
    QUEUE_VECTOR,
    STALL_ATTRIBUTION,
    Program,
    TileCycles,
    build_program,
    run_program,
)
from .stats import STALL_CAUSES, BufferAccess, DramAccess, HbqSimStats, KindStats
from .workload import Workload, iter_workload_segments, load_workload

__all__ = ["simulate", "simulate_segments"]

Mode = Literal["cycle", "analytical"]


def simulate(
    arch: HbqArchConfig | str | Path,
    workload: Workload | str | Path,
    *,
    mode: Mode = "cycle",
    engine: Literal["fast", "simpy"] = "fast",
) -> HbqSimStats:
    """Simulate one workload on one architecture.

    Args:
        arch: a loaded :class:`~.config.HbqArchConfig`, a shipped name (``"hbq_e_28nm"``) or a
            YAML path.
        workload: a :class:`~.workload.Workload`, ``"<model>[:<scenario>]"`` (``"llama-3-8b"``,
            ``"llama-3-8b:prefill_16k"``) or a YAML path.
        mode: ``"cycle"``: the reference traces run through the cycle-approximate engine
            (identical layers simulated once and scaled); ``"analytical"``: the closed-form
            model (microseconds to milliseconds, for sweeps).
        engine: cycle mode only: ``"fast"`` (numba) or ``"simpy"`` (the event-driven
            reference; the same results, slower).

    Returns:
        The :class:`~.stats.HbqSimStats`.

    Raises:
        ConfigError: a bad architecture or workload file, or tiles that do not fit.
        ValueError: an unknown mode or engine.
    """
    a = arch if isinstance(arch, HbqArchConfig) else load_arch(arch)
    w = workload if isinstance(workload, Workload) else load_workload(workload)
    if mode == "analytical":
        return simulate_analytical(a, w)
    if mode != "cycle":
        raise ValueError(f"mode={mode!r}; valid choices: 'cycle', 'analytical'")
    if engine not in ("fast", "simpy"):
        raise ValueError(f"engine={engine!r}; valid choices: 'fast', 'simpy'")
    return simulate_segments(a, w, iter_workload_segments(a, w), engine=engine)


_TILE_FIELDS = (
    "ideal",
    "weight_propagation",
    "issue_interval",
    "operand_passes",
    "psum_bank_conflict",
    "pipeline_turnaround",
    "psum_reads",
    "psum_writes",
    "waves",
)
"""Micro-model results (:class:`~.engine.TileCycles` fields) gathered per PE record."""

_TILE_STALL_CAUSES = (
    "weight_propagation",
    "issue_interval",
    "operand_passes",
    "psum_bank_conflict",
    "pipeline_turnaround",
)
"""Stall causes inside a tile, from the micro-model (the others are gaps between tiles)."""


# ---------------------------------------------------------------------------------------------
# 1. Timing


@dataclass(frozen=True)
class _SegmentTiming:
    """One copy of a segment on the timeline.

    Attributes:
        program: the segment's engine program.
        pe_positions: shape (R,) int64: positions of its PE-array records in the program.
        tile_fields: each of :data:`_TILE_FIELDS` -> shape (R,) int64, per PE record.
        stall_cycles: ``busy`` and every cause of :data:`~.stats.STALL_CAUSES` -> the PE
            array's cycles of that kind in this copy (``drain`` stays 0 here).
        elapsed_cycles: their sum: the PE array's time from the end of the previous
            segment's last tile to the end of this segment's last tile.
        last_done_cycle: completion cycle of the segment's last record (0 if it has none).
    """

    program: Program
    pe_positions: npt.NDArray[np.int64]
    tile_fields: dict[str, npt.NDArray[np.int64]]
    stall_cycles: dict[str, float]
    elapsed_cycles: float
    last_done_cycle: int


def _time_segment(
    hw: HwParams,
    trace: Trace,
    tile_cache: dict[tuple[int, int, int, bool, str, str], TileCycles],
    free: npt.NDArray[np.int64],
    engine: Literal["fast", "simpy"],
) -> _SegmentTiming:
    """Run one segment's program, continuing the queue state ``free`` (updated in place), and
    split the PE array's time: ``busy`` (tokens issued) and the micro-model's causes inside
    each tile, and the gaps between tiles by :data:`~.engine.STALL_ATTRIBUTION`."""
    program = build_program(hw, [trace], tile_cache)
    pe_free_before_cycle = int(free[QUEUE_PE])
    start, done = run_program(program, engine=engine, free=free)
    gaps = attribute_stalls(
        program, start, done, STALL_ATTRIBUTION, free_before_cycle=pe_free_before_cycle
    )
    pe = gaps.positions
    tiles = program.tiles
    tile_id = program.tile_id[pe]
    tile_fields = {
        f: (np.asarray([getattr(t, f) for t in tiles], dtype=np.int64)[tile_id] if tiles
            else np.zeros(0, np.int64))
        for f in _TILE_FIELDS
    }  # fmt: skip
    per_cause = {c: int(v.sum()) for c, v in gaps.by_cause.items()}
    stall_cycles: dict[str, float] = {}
    for c in STALL_CAUSES:
        inside = int(tile_fields[c].sum()) if c in _TILE_STALL_CAUSES else 0
        stall_cycles[c] = float(per_cause.pop(c, 0) + inside)
    if per_cause:  # pragma: no cover - STALL_ATTRIBUTION names only STALL_CAUSES
        raise ValueError(f"stall causes {sorted(per_cause)} are not in STALL_CAUSES")
    stall_cycles["busy"] = float(tile_fields["ideal"].sum())
    return _SegmentTiming(
        program=program,
        pe_positions=pe,
        tile_fields=tile_fields,
        stall_cycles=stall_cycles,
        elapsed_cycles=sum(stall_cycles.values()),
        last_done_cycle=int(done.max()) if done.size else 0,
    )


# ---------------------------------------------------------------------------------------------
# 2. DRAM traffic


@dataclass(frozen=True)
class _MemoryRecords:
    """Per memory record of a trace (shape (N_memory,) each): bytes moved (``nbytes * count``,
    int64), whether it is a DRAM record, whether it is a read."""

    nbytes: npt.NDArray[np.int64]
    dram: npt.NDArray[np.bool_]
    read: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, trace: Trace) -> _MemoryRecords:
        """The columns of ``trace.memory``."""
        mem = trace.memory
        return cls(
            nbytes=(mem["nbytes"] * mem["count"]).astype(np.int64),
            dram=mem["space"] == table_code(trace, "space", "DRAM"),
            read=mem["rw"] == 0,
        )


@dataclass(frozen=True)
class _SegmentTraffic:
    """DRAM traffic of one copy of a segment: transfers, bytes, bytes per tensor name."""

    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    bytes_by_tensor: dict[str, int]


def _dram_traffic(trace: Trace, records: _MemoryRecords) -> _SegmentTraffic:
    """The DRAM records of a trace, counted (every transfer, ``nbytes * count`` bytes)."""
    dram, rd, nbytes = records.dram, records.read, records.nbytes
    tensors = trace.table("tensor")
    per_tensor = np.bincount(
        trace.memory["tensor"][dram], weights=nbytes[dram], minlength=len(tensors)
    )
    return _SegmentTraffic(
        reads=int((dram & rd).sum()),
        writes=int((dram & ~rd).sum()),
        read_bytes=int(nbytes[dram & rd].sum()),
        write_bytes=int(nbytes[dram & ~rd].sum()),
        bytes_by_tensor={
            tensors[code]: int(per_tensor[code]) for code in np.flatnonzero(per_tensor).tolist()
        },
    )


# ---------------------------------------------------------------------------------------------
# 3. Buffer accounting


@dataclass
class _BufferTotals:
    """Running access counts of one on-chip buffer: words and bytes read and written."""

    reads: float = 0.0
    writes: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0

    def access(self, word_bits: float) -> BufferAccess:
        """The totals as a :class:`~.stats.BufferAccess`, rounded to whole accesses/bytes."""
        return BufferAccess(
            int(round(self.reads)), int(round(self.writes)), int(round(self.read_bytes)),
            int(round(self.write_bytes)), int(round(word_bits)),
        )  # fmt: skip


def _add_buffer_accesses(
    buffers: dict[str, _BufferTotals],
    hw: HwParams,
    trace: Trace,
    timing: _SegmentTiming,
    records: _MemoryRecords,
    repeat: int,
) -> None:
    """Add one segment's buffer accesses, times ``repeat``, to ``buffers`` (docs/hbq_sim.md,
    "Buffer accounting"): the ACT and WGT fills from DRAM (the record's ``phase`` names the
    buffer), the softmax's PSUM reads and ACT writes (on-chip records after a vector record),
    and the array side of every PE record from its micro-model (token broadcasts, weight
    loads, partial-sum read-modify-writes)."""
    act, wgt, psum = buffers["ACT"], buffers["WGT"], buffers["PSUM"]
    act_word_bytes = hw.act_width_bits / 8
    wgt_word_bytes = hw.wgt_width_bits / 8
    psum_word_bytes = float(hw.psum_word_bits) / 8
    mem = trace.memory
    record_bytes, dram, rd = records.nbytes, records.dram, records.read
    phases = mem["phase"]
    for buf, phase, word_bytes in ((act, "act", act_word_bytes), (wgt, "wgt", wgt_word_bytes)):
        sel = dram & rd & (phases == table_code(trace, "phase", phase))
        buf.writes += float(np.ceil(record_bytes[sel] / word_bytes).sum()) * repeat
        buf.write_bytes += float(record_bytes[sel].sum()) * repeat

    prog = timing.program
    on_chip = np.flatnonzero((prog.kind == 0) & (prog.queue == QUEUE_NONE))
    if on_chip.size:
        dep = prog.dep[on_chip]
        after_vector = (dep >= 0) & (prog.queue[np.maximum(dep, 0)] == QUEUE_VECTOR)
        rows = prog.index[on_chip[after_vector]]
        vec_bytes = record_bytes[rows]
        vec_space = mem["space"][rows]
        vec_read = mem["rw"][rows] == 0
        psum_read = (vec_space == table_code(trace, "space", "PSUM")) & vec_read
        act_write = (vec_space == table_code(trace, "space", "ACT")) & ~vec_read
        psum.reads += float(np.ceil(vec_bytes[psum_read] / psum_word_bytes).sum()) * repeat
        psum.read_bytes += float(vec_bytes[psum_read].sum()) * repeat
        act.writes += float(np.ceil(vec_bytes[act_write] / act_word_bytes).sum()) * repeat
        act.write_bytes += float(vec_bytes[act_write].sum()) * repeat

    rows_pe = prog.index[timing.pe_positions]
    comp = trace.compute
    c_m = comp["m"][rows_pe]
    c_n = comp["n"][rows_pe]
    c_fa = comp["fmt_a"][rows_pe]
    c_fb = comp["fmt_b"][rows_pe]
    fmts = trace.table("fmt")
    act_words = np.asarray([_act_words(hw, f) for f in fmts], dtype=np.int64)[c_fa]
    wgt_words = np.asarray([_wgt_words(hw, f) for f in fmts], dtype=np.int64)[c_fb]
    pass_table = np.asarray([[_passes(hw, a, b) for b in fmts] for a in fmts], dtype=np.int64)
    passes = pass_table[c_fa, c_fb]
    waves = timing.tile_fields["waves"]
    ksteps = waves // np.maximum(1, -(-c_n // hw.n_pes))
    act_reads = float((c_m * waves * passes * act_words).sum()) * repeat
    wgt_reads = float((c_n * ksteps * wgt_words).sum()) * repeat
    act.reads += act_reads
    act.read_bytes += act_reads * act_word_bytes
    wgt.reads += wgt_reads
    wgt.read_bytes += wgt_reads * wgt_word_bytes
    psum_reads = float(timing.tile_fields["psum_reads"].sum()) * repeat
    psum_writes = float(timing.tile_fields["psum_writes"].sum()) * repeat
    psum.reads += psum_reads
    psum.read_bytes += psum_reads * psum_word_bytes
    psum.writes += psum_writes
    psum.write_bytes += psum_writes * psum_word_bytes


# ---------------------------------------------------------------------------------------------
# 4. Assembly


@dataclass
class _NameTotals:
    """Running totals of one segment name (all its copies)."""

    kind: str
    count: int = 0
    cycles: float = 0.0
    macs: float = 0.0
    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0


@dataclass
class _Totals:
    """Running totals of a cycle-mode run, over all segments and their repeats."""

    stall_cycles: dict[str, float] = field(
        default_factory=lambda: {c: 0.0 for c in ("busy", *STALL_CAUSES)}
    )
    cycles: float = 0.0
    macs: float = 0.0
    dram_reads: int = 0
    dram_writes: int = 0
    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0
    dram_bytes_by_tensor: dict[str, int] = field(default_factory=dict)
    buffers: dict[str, _BufferTotals] = field(
        default_factory=lambda: {b: _BufferTotals() for b in ("ACT", "WGT", "PSUM")}
    )
    by_name: dict[str, _NameTotals] = field(default_factory=dict)
    last_name: str = ""
    last_done_cycle: int = 0

    def add(self, segment: TraceSegment, timing: _SegmentTiming, traffic: _SegmentTraffic) -> None:
        """Add one segment's time, work and DRAM traffic, times its ``repeat``."""
        rep = segment.repeat
        for c, v in timing.stall_cycles.items():
            self.stall_cycles[c] += v * rep
        self.cycles += timing.elapsed_cycles * rep
        self.last_done_cycle = max(self.last_done_cycle, timing.last_done_cycle)
        self.dram_read_bytes += traffic.read_bytes * rep
        self.dram_write_bytes += traffic.write_bytes * rep
        self.dram_reads += traffic.reads * rep
        self.dram_writes += traffic.writes * rep
        for tensor, nbytes in traffic.bytes_by_tensor.items():
            self.dram_bytes_by_tensor[tensor] = (
                self.dram_bytes_by_tensor.get(tensor, 0) + nbytes * rep
            )
        macs = segment.trace.total_macs()
        self.macs += macs * rep
        acc = self.by_name.setdefault(segment.name, _NameTotals(segment.kind))
        acc.count += rep
        acc.cycles += timing.elapsed_cycles * rep
        acc.macs += macs * rep
        acc.dram_read_bytes += traffic.read_bytes * rep
        acc.dram_write_bytes += traffic.write_bytes * rep
        self.last_name = segment.name


def _assemble_cycle_stats(
    arch: HbqArchConfig,
    workload: Workload,
    hw: HwParams,
    totals: _Totals,
    pe_free_cycle: int,
    engine: str,
) -> HbqSimStats:
    """The final statistics: the drain after the last tile (from the PE array's last
    ``pe_free_cycle`` to the last completion) is counted once, whatever the last segment's
    repeat, and charged to ``drain`` and to the last segment's name."""
    drain_cycles = totals.last_done_cycle - pe_free_cycle
    stall = dict(totals.stall_cycles)
    stall["drain"] += drain_cycles
    cycles = totals.cycles + drain_cycles
    if totals.last_name:
        totals.by_name[totals.last_name].cycles += drain_cycles
    word_bits = {
        "ACT": hw.act_width_bits,
        "WGT": hw.wgt_width_bits,
        "PSUM": float(hw.psum_word_bits),
    }
    buffers = {b: t.access(word_bits[b]) for b, t in totals.buffers.items()}
    kinds = {
        k: KindStats(a.kind, a.count, int(round(a.cycles)), int(round(a.macs)),
                     int(round(a.dram_read_bytes)), int(round(a.dram_write_bytes)))
        for k, a in totals.by_name.items()
    }  # fmt: skip
    dram_stats = DramAccess(
        totals.dram_reads, totals.dram_writes, int(round(totals.dram_read_bytes)),
        int(round(totals.dram_write_bytes)), dict(sorted(totals.dram_bytes_by_tensor.items())),
    )  # fmt: skip
    notes = _notes(workload, engine=f"cycle-approximate, {engine} engine")
    stall_i = {c: int(round(v)) for c, v in stall.items()}
    return _stats(arch, workload, hw, "cycle", int(round(cycles)), int(round(totals.macs)),
                  stall_i, buffers, dram_stats, kinds, notes)  # fmt: skip


def simulate_segments(
    arch: HbqArchConfig,
    workload: Workload,
    segments: Iterable[TraceSegment],
    *,
    engine: Literal["fast", "simpy"] = "fast",
) -> HbqSimStats:
    """Run reference trace segments through the cycle-approximate engine.

    Segments run one after the other on one timeline (each continues the queues' state of the
    previous one); each contributes its elapsed PE-array time (from the end of the previous
    segment's last tile to the end of its own) times its ``repeat``; the drain after the very
    last tile is counted once. Segments are consumed one at a time (an iterator keeps memory
    low).

    Args:
        arch: the architecture.
        workload: the workload the segments belong to (names and digests in the stats).
        segments: :func:`~.workload.iter_workload_segments` (or any traces of this accelerator).
        engine: ``"fast"`` or ``"simpy"``.

    Returns:
        The :class:`~.stats.HbqSimStats` (``mode="cycle"``).
    """
    hw = hw_params(arch)
    tile_cache: dict[tuple[int, int, int, bool, str, str], TileCycles] = {}
    free = np.zeros(3, dtype=np.int64)
    totals = _Totals()
    for seg in segments:
        timing = _time_segment(hw, seg.trace, tile_cache, free, engine)
        records = _MemoryRecords.of(seg.trace)
        totals.add(seg, timing, _dram_traffic(seg.trace, records))
        _add_buffer_accesses(totals.buffers, hw, seg.trace, timing, records, seg.repeat)
        del timing, records  # before the next segment's trace is generated
    return _assemble_cycle_stats(arch, workload, hw, totals, int(free[QUEUE_PE]), engine)


def _act_words(hw: HwParams, name: str) -> int:
    try:
        return hw.act_words(name)
    except KeyError:
        return 0


def _wgt_words(hw: HwParams, name: str) -> int:
    try:
        return hw.wgt_words(name)
    except KeyError:
        return 0


def _passes(hw: HwParams, a: str, b: str) -> int:
    try:
        return hw.passes(a, b)
    except KeyError:
        return 0
