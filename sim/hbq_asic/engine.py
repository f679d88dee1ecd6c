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

The engine exists twice with identical results: a simpy process model (the reference, one process
per queue) and a numba loop over the same recurrence (the default, fast); a test checks that they
agree record for record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numba
import numpy as np
import numpy.typing as npt

from coaccel.trace import Trace

from ._hw import HwParams

__all__ = [
    "QUEUE_DMA",
    "QUEUE_NONE",
    "QUEUE_PE",
    "QUEUE_VECTOR",
    "Program",
    "TileCycles",
    "build_program",
    "pe_tile_closed_form",
    "pe_tile_cycles",
    "run_program",
]

QUEUE_NONE = -1
"""On-chip memory record: no queue, completes with its dependency."""
QUEUE_DMA = 0
"""DRAM record (read or write) on the in-order DMA queue."""
QUEUE_PE = 1
"""Compute record on the PE array."""
QUEUE_VECTOR = 2
"""Compute record on the vector (softmax) unit."""


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
    m, n, k, has_rd, p, kstep, sa_n, prop, shadow, ii, s_wb, s_rd, fsm, banks, ports
):  # pragma: no cover - compiled; its results are checked against the RTL and the closed form
    ksteps = (k + kstep - 1) // kstep
    groups = (n + p - 1) // p
    r_full = (p + sa_n - 1) // sa_n
    d = s_wb - s_rd  # a token's write-back lands d issue slots after a later token's read
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
                start = last_issue + fsm + max(exposed, s_wb)
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
    s_out = s_wb + 1
    occupancy = last_issue + s_out + fsm
    return (
        occupancy,
        last_first + s_out,
        last_issue + s_out,
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
    wave ``fsm_cycles + max(prop, s_wb)`` cycles after the previous wave's last issue (its
    weights shift in while the previous tokens drain, and issue waits until the last of them has
    written back); tokens issue one per ``token_ii``. Every token reads its partial-sum words
    (``ceil(channels / sa_n)``) ``s_rd`` cycles after its issue, unless this is the first K step
    of an output tile without ``has_psum_read``, and writes them back ``s_wb`` cycles after it.
    PSUM words are laid out channel-group major, token, word (``((g * m) + t) * words + w``),
    banks interleave words (``bank = address mod banks``), and a cycle in which a bank would be
    accessed more than ``psum_ports`` times delays the issue. The tile ends (the next one may
    start) ``s_wb + 1 + fsm_cycles`` cycles after the last issue.

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
    occ, first, last, prop_x, slips, waves, reads, writes = _pe_tile_kernel(
        int(m), int(n), int(k), bool(has_psum_read), hw.n_pes, hw.kstep, hw.sa_n, prop,
        bool(hw.shadow_regs), ii, hw.s_wb, hw.s_rd, hw.fsm_cycles, hw.psum_banks, hw.psum_ports,
    )  # fmt: skip
    gaps = int(waves) * (int(m) - 1)
    tokens = int(m) * int(waves)
    issue_x = gaps * (ii_np - 1)
    passes_x = gaps * (ii - ii_np)
    return TileCycles(
        occupancy=int(occ),
        first_result=int(first),
        last_result=int(last),
        ideal=tokens,
        weight_propagation=int(prop_x),
        issue_interval=issue_x,
        operand_passes=passes_x,
        psum_bank_conflict=int(slips),
        pipeline_turnaround=int(occ) - tokens - int(prop_x) - issue_x - passes_x - int(slips),
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
    ``occupancy = fsm + prop + W * S + (W - 1) * (fsm + max(e, s_wb) - 1) + s_wb + fsm``.
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
    fsm, s_wb = hw.fsm_cycles, hw.s_wb
    turn = fsm + max(exposed, s_wb) - 1  # from the cycle after a wave's last issue
    last_issue = fsm + prop + waves * stream - 1 + (waves - 1) * turn
    last_first = fsm + prop + (waves - groups) * (stream + turn)
    occ = last_issue + hw.s_out + fsm
    words = (n // hw.n_pes) * (-(-hw.n_pes // hw.sa_n)) + (
        -(-(n % hw.n_pes) // hw.sa_n) if n % hw.n_pes else 0
    )
    tokens = m * waves
    prop_x = prop + (waves - 1) * exposed
    issue_x = waves * (m - 1) * (ii_np - 1)
    passes_x = waves * (m - 1) * (ii - ii_np)
    return TileCycles(
        occupancy=occ,
        first_result=last_first + hw.s_out,
        last_result=last_issue + hw.s_out,
        ideal=tokens,
        weight_propagation=prop_x,
        issue_interval=issue_x,
        operand_passes=passes_x,
        psum_bank_conflict=0,
        pipeline_turnaround=occ - tokens - prop_x - issue_x - passes_x,
        waves=waves,
        psum_reads=m * words * (ksteps - 1 + (1 if has_psum_read else 0)),
        psum_writes=m * words * ksteps,
    )


# ---------------------------------------------------------------------------------------------
# Programs


@dataclass(frozen=True)
class Program:
    """A trace (or several, one after the other) as the engine runs it, in program order.

    Attributes:
        queue: shape (N,) int8: :data:`QUEUE_DMA`, :data:`QUEUE_PE`, :data:`QUEUE_VECTOR` or
            :data:`QUEUE_NONE`.
        occ: shape (N,) int64: cycles the record holds its queue.
        lat: shape (N,) int64: cycles from the end of its occupancy to its completion.
        dep: shape (N,) int64: index (into these arrays) of the record it waits for, or -1.
        segment: shape (N,) int32: index of the trace each record came from.
        kind: shape (N,) int8: 0 memory, 1 compute.
        index: shape (N,) int64: the record's row in its trace's ``memory`` or ``compute``.
        tile_id: shape (N,) int64: for PE records, the index into ``tiles`` of its micro-model
            result; -1 otherwise.
        tiles: the distinct micro-model results.
    """

    queue: npt.NDArray[np.int8]
    occ: npt.NDArray[np.int64]
    lat: npt.NDArray[np.int64]
    dep: npt.NDArray[np.int64]
    segment: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    index: npt.NDArray[np.int64]
    tile_id: npt.NDArray[np.int64]
    tiles: tuple[TileCycles, ...]


@dataclass(frozen=True)
class _TraceView:
    """One trace's records merged in seq order, with the columns the engine needs."""

    kind: npt.NDArray[np.int8]
    index: npt.NDArray[np.int64]
    dep: npt.NDArray[np.int64]


def _merge(trace: Trace) -> _TraceView:
    mem, comp = trace.memory, trace.compute
    seq = np.concatenate([mem["seq"], comp["seq"]])
    kind = np.concatenate([np.zeros(mem.size, np.int8), np.ones(comp.size, np.int8)])
    index = np.concatenate([np.arange(mem.size), np.arange(comp.size)]).astype(np.int64)
    dep_seq = np.concatenate([mem["dep"], comp["dep"]])
    n = seq.size
    if n and int(seq.min()) == 0 and int(seq.max()) == n - 1:
        # Seq numbers 0 .. n-1 (unique: the trace contract): positions by scatter.
        pos = np.empty(n, dtype=np.int64)
        pos[seq] = np.arange(n, dtype=np.int64)
        kind, index, dep_seq = kind[pos], index[pos], dep_seq[pos]
        dep = dep_seq.astype(np.int64)
    else:
        order = np.argsort(seq, kind="stable")
        seq, kind, index, dep_seq = seq[order], kind[order], index[order], dep_seq[order]
        dep = np.where(dep_seq >= 0, np.searchsorted(seq, dep_seq), -1).astype(np.int64)
    return _TraceView(kind, index, dep)


def _code(trace: Trace, table: str, name: str) -> int:
    """Index of a name in a trace's string table, or -1 if no record uses it."""
    names = trace.table(table)
    return names.index(name) if name in names else -1


def _tile_keys(cols: list[npt.NDArray[np.int64]]) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """Distinct rows of the key columns: (inverse, unique rows), packing into one int64 when
    the columns fit (much faster than ``np.unique(axis=0)``)."""
    widths = [max(1, int(c.max()).bit_length()) if c.size else 1 for c in cols]
    if sum(widths) <= 62 and all(int(c.min()) >= 0 for c in cols if c.size):
        packed = np.zeros(cols[0].size, dtype=np.int64)
        for c, w in zip(cols, widths, strict=True):
            packed = (packed << w) | c
        uniq, first, inv = np.unique(packed, return_index=True, return_inverse=True)
        rows = np.stack([c[first] for c in cols], axis=1)
        return inv.reshape(-1), rows
    keys = np.stack(cols, axis=1)
    rows, inv = np.unique(keys, axis=0, return_inverse=True)
    return inv.reshape(-1), rows


def build_program(
    hw: HwParams,
    traces: Sequence[Trace],
    tile_cycles: dict[tuple[int, int, int, bool, str, str], TileCycles],
    *,
    micro: Literal["cycle", "closed_form"] = "cycle",
) -> Program:
    """Turn traces into engine records (queues, occupancies, latencies, dependencies).

    A compute record's partial-sum read is the PSUM read record just before it (``seq - 1``),
    the convention of :func:`coaccel.models.hbq.gemm_trace` and ``attention_trace``.

    Args:
        hw: hardware constants.
        traces: the traces, run one after the other (dependencies stay within a trace).
        tile_cycles: cache of micro-model results, filled as needed (key ``(m, n, k,
            has_psum_read, fmt_a, fmt_b)``).
        micro: the tile model: ``"cycle"`` (:func:`pe_tile_cycles`) or ``"closed_form"``.

    Returns:
        The :class:`Program`.
    """
    parts = []
    offset = 0
    tile_fn = pe_tile_cycles if micro == "cycle" else pe_tile_closed_form
    tile_list: list[TileCycles] = []
    tile_pos: dict[tuple[int, int, int, bool, str, str], int] = {}
    for si, tr in enumerate(traces):
        v = _merge(tr)
        n = v.kind.size
        queue = np.full(n, QUEUE_NONE, dtype=np.int8)
        occ = np.zeros(n, dtype=np.int64)
        lat = np.zeros(n, dtype=np.int64)
        # Column by column (a gather of whole structured records is much slower).
        pos_m = np.flatnonzero(v.kind == 0)
        rows_m = v.index[pos_m]
        mem = tr.memory
        dram_rows = mem["space"] == _code(tr, "space", "DRAM")
        is_dram = dram_rows[rows_m]
        pos_d = pos_m[is_dram]
        rows_d = rows_m[is_dram]
        nbytes = mem["nbytes"][rows_d] * mem["count"][rows_d]
        queue[pos_d] = QUEUE_DMA
        occ[pos_d] = np.where(
            nbytes > 0, np.ceil(nbytes / hw.dram_bytes_per_cycle).astype(np.int64), 0
        )
        lat[pos_d] = np.where(mem["rw"][rows_d] == 0, hw.dram_latency, 0)

        pos_c = np.flatnonzero(v.kind == 1)
        rows_c = v.index[pos_c]
        ctab = tr.compute
        fmts = tr.table("fmt")
        unit = ctab["unit"][rows_c]
        on_pe = unit == _code(tr, "unit", "pe_array")
        on_vec = unit == _code(tr, "unit", "vector")
        other = ~(on_pe | on_vec)
        if other.any():
            units = sorted({tr.table("unit")[u] for u in np.unique(unit[other]).tolist()})
            raise ValueError(
                f"trace {si}: compute unit(s) {units} are not simulated by the HBQ ASIC engine "
                "(pe_array, vector)"
            )
        # Partial-sum read right before a PE record?
        prev = np.maximum(pos_c - 1, 0)
        prev_rows = v.index[prev]
        prev_psum = (
            (pos_c >= 1)
            & (v.kind[prev] == 0)
            & (tr.memory["space"][prev_rows] == _code(tr, "space", "PSUM"))
            & (tr.memory["rw"][prev_rows] == 0)
        )
        pe_pos = pos_c[on_pe]
        rows_pe = rows_c[on_pe]
        keys = [
            ctab["m"][rows_pe].astype(np.int64),
            ctab["n"][rows_pe].astype(np.int64),
            ctab["k"][rows_pe].astype(np.int64),
            prev_psum[on_pe].astype(np.int64),
            ctab["fmt_a"][rows_pe].astype(np.int64),
            ctab["fmt_b"][rows_pe].astype(np.int64),
        ]
        tile_id = np.full(n, -1, dtype=np.int64)
        if pe_pos.size:
            inv, uniq = _tile_keys(keys)
            u_occ = np.zeros(len(uniq), dtype=np.int64)
            u_id = np.zeros(len(uniq), dtype=np.int64)
            for i, (um, un, uk, rd, fa, fb) in enumerate(uniq.tolist()):
                key = (um, un, uk, bool(rd), str(fmts[fa]), str(fmts[fb]))
                tc = tile_cycles.get(key)
                if tc is None:
                    tc = tile_fn(hw, um, un, uk, has_psum_read=bool(rd), fmt_a=key[4], fmt_b=key[5])
                    tile_cycles[key] = tc
                if key not in tile_pos:
                    tile_pos[key] = len(tile_list)
                    tile_list.append(tc)
                u_occ[i] = tc.occupancy
                u_id[i] = tile_pos[key]
            queue[pe_pos] = QUEUE_PE
            occ[pe_pos] = u_occ[inv]
            lat[pe_pos] = 0  # the occupancy includes the drain: results are out
            tile_id[pe_pos] = u_id[inv]
        vec_pos = pos_c[on_vec]
        rows_v = rows_c[on_vec]
        elems = ctab["m"][rows_v] * ctab["n"][rows_v]
        queue[vec_pos] = QUEUE_VECTOR
        occ[vec_pos] = (elems + hw.vector_elems_per_cycle - 1) // hw.vector_elems_per_cycle
        lat[vec_pos] = hw.vector_latency
        parts.append(
            (queue, occ, lat, np.where(v.dep >= 0, v.dep + offset, -1), np.full(n, si, np.int32),
             v.kind, v.index, tile_id)
        )  # fmt: skip
        offset += n
    dtypes = (np.int8, np.int64, np.int64, np.int64, np.int32, np.int8, np.int64, np.int64)
    if len(parts) == 1:
        cols = [c.astype(t, copy=False) for c, t in zip(parts[0], dtypes, strict=True)]
    elif parts:
        cols = [
            np.concatenate(c).astype(t, copy=False)
            for c, t in zip(zip(*parts, strict=True), dtypes, strict=True)
        ]
    else:
        cols = [np.zeros(0, t) for t in dtypes]
    return Program(*cols, tiles=tuple(tile_list))


# ---------------------------------------------------------------------------------------------
# Engines


@numba.njit(cache=True)
def _run_fast(queue, occ, lat, dep, free):  # pragma: no cover - compiled; equal to simpy (tested)
    n = queue.size
    start = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    for i in range(n):
        ready = done[dep[i]] if dep[i] >= 0 else 0
        q = queue[i]
        if q < 0:
            start[i] = ready
            done[i] = ready
            continue
        s = max(free[q], ready)
        start[i] = s
        free[q] = s + occ[i]
        done[i] = s + occ[i] + lat[i]
    return start, done


def _run_simpy(
    prog: Program, free: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    import simpy

    env = simpy.Environment()
    n = prog.queue.size
    start = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    finished = [env.event() for _ in range(n)]
    queue, occ, lat, dep = (a.tolist() for a in (prog.queue, prog.occ, prog.lat, prog.dep))

    def complete_later(i: int, delay: int):
        yield env.timeout(delay)
        done[i] = int(env.now)
        finished[i].succeed()

    def on_chip(i: int):
        if dep[i] >= 0:
            yield finished[dep[i]]
        start[i] = done[i] = int(env.now)
        finished[i].succeed()

    def run_queue(q: int):
        # The queue is busy until `free[q]` with work of earlier programs.
        yield env.timeout(int(free[q]))
        for i in range(n):
            if queue[i] != q:
                continue
            if dep[i] >= 0:
                yield finished[dep[i]]
            start[i] = int(env.now)
            yield env.timeout(occ[i])
            env.process(complete_later(i, lat[i]))
        free[q] = int(env.now)

    for i in range(n):
        if queue[i] == QUEUE_NONE:
            env.process(on_chip(i))
    for q in (QUEUE_DMA, QUEUE_PE, QUEUE_VECTOR):
        env.process(run_queue(q))
    env.run()
    return start, done


def run_program(
    prog: Program,
    *,
    engine: Literal["fast", "simpy"] = "fast",
    free: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run a program: each record's start and completion cycle.

    Semantics (both engines): a queued record starts at ``max(queue free, completion of dep)``,
    holds its queue for ``occ`` cycles and completes ``lat`` cycles later; an on-chip record
    starts and completes when its dependency completes (at 0 without one).

    Args:
        prog: the program.
        engine: ``"fast"`` (numba) or ``"simpy"`` (the event-driven reference).
        free: shape (3,) int64, the cycle each queue (DMA, PE, vector) becomes free, for a
            program that continues earlier ones; updated in place. None: all free at 0.

    Returns:
        ``(start, done)``, shape (N,) int64 each, cycles.
    """
    state = np.zeros(3, dtype=np.int64) if free is None else free
    if state.shape != (3,) or state.dtype != np.int64:
        raise ValueError("free must be a shape (3,) int64 array")
    if engine == "fast":
        return _run_fast(prog.queue, prog.occ, prog.lat, prog.dep, state)
    if engine == "simpy":
        return _run_simpy(prog, state)
    raise ValueError(f"engine={engine!r}; valid choices: 'fast', 'simpy'")
