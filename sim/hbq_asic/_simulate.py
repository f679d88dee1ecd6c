"""``simulate``: one workload on one architecture, cycle-approximate or analytical."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from coaccel.models.hbq import TraceSegment

from ._hw import HwParams, hw_params
from ._result import _notes, _stats
from .analytical import simulate_analytical
from .config import HbqArchConfig, load_arch
from .engine import (
    QUEUE_DMA,
    QUEUE_NONE,
    QUEUE_PE,
    QUEUE_VECTOR,
    Program,
    _code,
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


def _effective_dep(prog: Program) -> npt.NDArray[np.int64]:
    """Dependencies with on-chip records skipped (they complete with their own dependency)."""
    eff = prog.dep.copy()
    for _ in range(64):
        on_chip = (eff >= 0) & (prog.queue[np.maximum(eff, 0)] == QUEUE_NONE)
        if not on_chip.any():
            return eff
        eff[on_chip] = prog.dep[eff[on_chip]]
    raise ValueError("on-chip dependency chains deeper than 64 records")


def _attribute_gaps(
    prog: Program,
    start: npt.NDArray[np.int64],
    done: npt.NDArray[np.int64],
    pe_free: int,
) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]]]:
    """Per PE record: the idle gap before it, split by cause (docs/hbq_sim.md, "Stalls").

    Args:
        prog, start, done: the program and its timing.
        pe_free: when the PE array finished the previous program's last tile.

    Returns:
        The PE records' positions and, per cause, each one's share of its gap.
    """
    pe = np.flatnonzero(prog.queue == QUEUE_PE)
    if pe.size == 0:
        return pe, {c: np.zeros(0, dtype=np.int64) for c in STALL_CAUSES}
    free_after = start[pe] + prog.occ[pe]
    a0 = np.concatenate([[pe_free], free_after[:-1]]).astype(np.int64)
    a1 = start[pe]
    gap = a1 - a0
    eff = _effective_dep(prog)
    d = eff[pe]
    dd = np.maximum(d, 0)
    dq = np.where(d >= 0, prog.queue[dd], -2)
    causes = {c: np.zeros(pe.size, dtype=np.int64) for c in STALL_CAUSES}
    causes["pipeline_latency"] += np.where((dq == QUEUE_PE) | (dq == -2), gap, 0)
    causes["vector_unit"] += np.where(dq == QUEUE_VECTOR, gap, 0)
    is_dma = dq == QUEUE_DMA
    ds = start[dd]
    de = ds + prog.occ[dd]
    # Before the DMA record started: why it started late.
    e = eff[dd]
    ee = np.maximum(e, 0)
    eq = np.where(e >= 0, prog.queue[ee], -2)
    bound = (e >= 0) & (done[ee] >= ds)
    len1 = np.maximum(0, np.minimum(a1, ds) - a0)
    len2 = np.maximum(0, np.minimum(a1, de) - np.maximum(a0, ds))
    len3 = np.maximum(0, a1 - np.maximum(a0, de))
    pre_vec = is_dma & bound & (eq == QUEUE_VECTOR)
    pre_pe = is_dma & bound & (eq == QUEUE_PE)
    pre_bw = is_dma & ~(pre_vec | pre_pe)
    causes["vector_unit"] += np.where(pre_vec, len1, 0)
    causes["pipeline_latency"] += np.where(pre_pe, len1, 0)
    causes["dram_bandwidth"] += np.where(pre_bw, len1, 0) + np.where(is_dma, len2, 0)
    causes["dram_latency"] += np.where(is_dma, len3, 0)
    return pe, causes


@dataclass
class _Acc:
    """Running totals of one segment name (all its copies)."""

    kind: str
    count: int = 0
    cycles: float = 0.0
    macs: float = 0.0
    dram_r: float = 0.0
    dram_w: float = 0.0


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
    cache: dict = {}
    free = np.zeros(3, dtype=np.int64)
    pe_free = 0
    makespan = 0
    stall = {c: 0.0 for c in ("busy", *STALL_CAUSES)}
    cycles = 0.0
    by_name: dict[str, _Acc] = {}
    last_name = ""
    n_r = n_w = 0
    bytes_r = bytes_w = 0.0
    macs_total = 0.0
    by_tensor: dict[str, int] = {}
    buf = dict.fromkeys(
        ("act_r", "act_w", "act_rb", "act_wb", "wgt_r", "wgt_w", "wgt_rb", "wgt_wb", "psum_r",
         "psum_w", "psum_rb", "psum_wb"), 0.0,
    )  # fmt: skip
    act_wb = hw.act_width_bits / 8
    wgt_wb = hw.wgt_width_bits / 8
    psum_wb = float(hw.psum_word_bits) / 8
    for seg in segments:
        tr, rep = seg.trace, seg.repeat
        prog = build_program(hw, [tr], cache)
        start, done = run_program(prog, engine=engine, free=free)
        pe, causes = _attribute_gaps(prog, start, done, pe_free)
        tiles = prog.tiles
        tid = prog.tile_id[pe]
        field = {
            f: (np.asarray([getattr(t, f) for t in tiles], dtype=np.int64)[tid] if tiles
                else np.zeros(0, np.int64))
            for f in _TILE_FIELDS
        }  # fmt: skip
        for c in ("weight_propagation", "issue_interval", "operand_passes",
                  "psum_bank_conflict", "pipeline_turnaround"):  # fmt: skip
            causes[c] = causes[c] + field[c]
        seg_stall = {c: float(v.sum()) for c, v in causes.items()}
        seg_stall["busy"] = float(field["ideal"].sum())
        seg_cycles = sum(seg_stall.values())
        for c, v in seg_stall.items():
            stall[c] += v * rep
        cycles += seg_cycles * rep
        if pe.size:
            pe_free = int(start[pe[-1]] + prog.occ[pe[-1]])
        if done.size:
            makespan = max(makespan, int(done.max()))

        # Work and traffic from the trace.
        mem = tr.memory
        nbytes = (mem["nbytes"] * mem["count"]).astype(np.int64)
        dram = mem["space"] == _code(tr, "space", "DRAM")
        rd = mem["rw"] == 0
        seg_r = int(nbytes[dram & rd].sum())
        seg_w = int(nbytes[dram & ~rd].sum())
        bytes_r += seg_r * rep
        bytes_w += seg_w * rep
        n_r += int((dram & rd).sum()) * rep
        n_w += int((dram & ~rd).sum()) * rep
        tensors = tr.table("tensor")
        tb = np.bincount(mem["tensor"][dram], weights=nbytes[dram], minlength=len(tensors))
        for code in np.flatnonzero(tb).tolist():
            by_tensor[tensors[code]] = by_tensor.get(tensors[code], 0) + int(tb[code]) * rep
        macs = tr.total_macs()
        macs_total += macs * rep
        acc = by_name.setdefault(seg.name, _Acc(seg.kind))
        acc.count += rep
        acc.cycles += seg_cycles * rep
        acc.macs += macs * rep
        acc.dram_r += seg_r * rep
        acc.dram_w += seg_w * rep
        last_name = seg.name

        # Buffer fills from DRAM (phase = the buffer), and the vector unit's on-chip accesses.
        phases = mem["phase"]
        for name, width, key in (("act", act_wb, "act"), ("wgt", wgt_wb, "wgt")):
            sel = dram & rd & (phases == _code(tr, "phase", name))
            buf[f"{key}_w"] += float(np.ceil(nbytes[sel] / width).sum()) * rep
            buf[f"{key}_wb"] += float(nbytes[sel].sum()) * rep
        on_chip = np.flatnonzero((prog.kind == 0) & (prog.queue == QUEUE_NONE))
        if on_chip.size:
            dq = prog.dep[on_chip]
            from_vec = (dq >= 0) & (prog.queue[np.maximum(dq, 0)] == QUEUE_VECTOR)
            rows = prog.index[on_chip[from_vec]]
            vb = nbytes[rows]
            vs = mem["space"][rows]
            vrd = mem["rw"][rows] == 0
            ps = (vs == _code(tr, "space", "PSUM")) & vrd
            aw = (vs == _code(tr, "space", "ACT")) & ~vrd
            buf["psum_r"] += float(np.ceil(vb[ps] / psum_wb).sum()) * rep
            buf["psum_rb"] += float(vb[ps].sum()) * rep
            buf["act_w"] += float(np.ceil(vb[aw] / act_wb).sum()) * rep
            buf["act_wb"] += float(vb[aw].sum()) * rep

        # Array-side accesses from the micro-model of every PE record.
        rows_pe = prog.index[pe]
        c_m = tr.compute["m"][rows_pe]
        c_n = tr.compute["n"][rows_pe]
        c_fa = tr.compute["fmt_a"][rows_pe]
        c_fb = tr.compute["fmt_b"][rows_pe]
        fmts = tr.table("fmt")
        fa = np.asarray([_act_words(hw, f) for f in fmts], dtype=np.int64)[c_fa]
        fb = np.asarray([_wgt_words(hw, f) for f in fmts], dtype=np.int64)[c_fb]
        pp = np.asarray([[_passes(hw, a, b) for b in fmts] for a in fmts], dtype=np.int64)
        passes = pp[c_fa, c_fb]
        ksteps = field["waves"] // np.maximum(1, -(-c_n // hw.n_pes))
        act_reads = float((c_m * field["waves"] * passes * fa).sum()) * rep
        wgt_reads = float((c_n * ksteps * fb).sum()) * rep
        buf["act_r"] += act_reads
        buf["act_rb"] += act_reads * act_wb
        buf["wgt_r"] += wgt_reads
        buf["wgt_rb"] += wgt_reads * wgt_wb
        pr = float(field["psum_reads"].sum()) * rep
        pw = float(field["psum_writes"].sum()) * rep
        buf["psum_r"] += pr
        buf["psum_rb"] += pr * psum_wb
        buf["psum_w"] += pw
        buf["psum_wb"] += pw * psum_wb
        del prog, start, done, tr

    # The drain after the last tile happens once, whatever the last segment's repeat.
    tail = makespan - pe_free
    stall["drain"] += tail
    cycles += tail
    if last_name:
        by_name[last_name].cycles += tail

    def acc_(r: str, w: str, rb: str, wb: str, bits: float) -> BufferAccess:
        return BufferAccess(
            int(round(buf[r])), int(round(buf[w])), int(round(buf[rb])), int(round(buf[wb])),
            int(round(bits)),
        )  # fmt: skip

    buffers = {
        "ACT": acc_("act_r", "act_w", "act_rb", "act_wb", hw.act_width_bits),
        "WGT": acc_("wgt_r", "wgt_w", "wgt_rb", "wgt_wb", hw.wgt_width_bits),
        "PSUM": acc_("psum_r", "psum_w", "psum_rb", "psum_wb", float(hw.psum_word_bits)),
    }
    kinds = {
        k: KindStats(a.kind, a.count, int(round(a.cycles)), int(round(a.macs)),
                     int(round(a.dram_r)), int(round(a.dram_w)))
        for k, a in by_name.items()
    }  # fmt: skip
    dram_stats = DramAccess(
        n_r, n_w, int(round(bytes_r)), int(round(bytes_w)), dict(sorted(by_tensor.items()))
    )
    notes = _notes(workload, engine=f"cycle-approximate, {engine} engine")
    stall_i = {c: int(round(v)) for c, v in stall.items()}
    return _stats(arch, workload, hw, "cycle", int(round(cycles)), int(round(macs_total)),
                  stall_i, buffers, dram_stats, kinds, notes)  # fmt: skip


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
