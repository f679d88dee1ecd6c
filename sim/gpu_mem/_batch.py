"""Analytical mode of the GPU simulator for a batch of designs: a sweep's fast path.

A trace's kernel traffic (:func:`~.traffic.kernel_traffic`, analytical fidelity) is what costs
milliseconds; it is split here by what it depends on, and each part is computed once per batch
for all the designs that share it:

* the records, the L2 first-touch hits, the L1 hits, the stream runs and the FLOP depend on
  the trace, the L2 geometry and the SM's L1 (not on the DRAM, the SM count or the clock);
* the DRAM time per kernel on the DRAM's efficiency curve and bandwidth;
* the chains of dependent loads on the clock and the latencies.

The same helper functions run in the same order as in :func:`~.traffic.kernel_traffic`, so the
kernels equal it exactly (a test compares them). Each design's kernel times, program schedule
and metrics then follow :func:`~._simulate.simulate_kernels` (the schedule's prerequisites, a
property of the trace, are built once per workload); a decode-attention op's calibrated time
and interval (:mod:`.intervals`) are computed for all the designs at once.

Public: :func:`simulate_batch` (same contract as
:func:`coaccel.sim.hbq_asic._batch.simulate_batch`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..common.streams import task_prerequisites
from . import traffic as tr
from ._simulate import _workload_metrics
from .config import GpuArchConfig
from .intervals import (
    calibrated,
    fitted_config,
    is_attention_op,
    load_calibration,
    op_seconds,
    regime_of,
)
from .priced import priced_components
from .timing import KernelDoesNotFit, _items, kernel_time, schedule_kernels
from .workload import GpuWorkload

__all__ = ["simulate_batch"]


def _cache_key(arch: GpuArchConfig) -> tuple[Any, ...]:
    """What the dram-independent part of the traffic reads: the L2 and the SM's L1."""
    return (arch.l2, arch.sm.l1_cache_kib)


@dataclasses.dataclass
class _Base:
    """The DRAM- and latency-independent traffic of a trace on one L2 / L1.

    Attributes:
        kernels, rec, l2: ``kernel_traffic``'s kernel index, records and L2 traffic.
        totals: its per-kernel sums, ``dram_seconds`` and ``chain_seconds`` left at zero.
        by_tensor: DRAM bytes per kernel and tensor.
        nz, bytes_nz: the records that move DRAM bytes, and those bytes (the others add
            exact zeros to the DRAM time).
        runs_u, runs_inv: their distinct stream-run lengths (B) and each one's index.
        dep_pos: position of each record's prerequisite record (-1: none).
    """

    kernels: Any
    rec: Any
    l2: Any
    totals: Any
    by_tensor: list[dict[str, int]]
    nz: Any
    bytes_nz: Any
    runs_u: Any
    runs_inv: Any
    dep_pos: Any


def _base(trace: Any, arch: GpuArchConfig) -> _Base:
    """``kernel_traffic``'s steps that do not depend on the DRAM, clock or latencies."""
    mem = trace.memory
    kernels = tr._KernelIndex.of(trace)
    rec = tr._Records.of(trace, arch, kernels)
    geom = tr.cache_geometry(arch)
    l2 = tr._l2_traffic(trace, arch, geom, kernels, rec, "analytical")
    sb = arch.l2.sector_bytes
    read_fill = np.where(rec.rw == 0, l2.misses, 0)
    dram_bytes_rec = (read_fill + l2.writebacks) * sb
    runs = tr._stream_runs(
        mem, rec.dev, rec.kidx, rec.req * sb, tr.run_bytes(rec.nbytes, rec.stride, rec.count),
        rec.starts,
    )  # fmt: skip
    nz = np.flatnonzero(dram_bytes_rec)
    runs_u, runs_inv = np.unique(np.maximum(runs[nz], 1), return_inverse=True)
    zero = np.zeros(kernels.n)  # DRAM and chain seconds: per design
    totals = tr._kernel_totals(trace, kernels, rec, l2, sb, zero, zero)
    dep_pos = np.zeros(0, dtype=np.int64)
    if mem.size:  # as _chain_seconds finds each record's prerequisite
        dep_pos = np.searchsorted(mem["seq"], mem["dep"])
        dep_ok = (mem["dep"] >= 0) & (dep_pos < mem.size)
        dep_ok[dep_ok] &= mem["seq"][dep_pos[dep_ok]] == mem["dep"][dep_ok]
        dep_pos = np.where(dep_ok, dep_pos, -1).astype(np.int64)
    by_tensor = tr._bytes_by_tensor(trace, rec, dram_bytes_rec, kernels.n)
    return _Base(kernels, rec, l2, totals, by_tensor, nz, dram_bytes_rec[nz], runs_u,
                 runs_inv, dep_pos)  # fmt: skip


def _chains(arch: GpuArchConfig, b: _Base, n_records: int) -> Any:
    """Longest chain of dependent loads per kernel, s (``_chain_seconds``)."""
    f = arch.sm.freq_mhz * 1e6
    rec, l2 = b.rec, b.l2
    dev = rec.dev
    lat = np.zeros(n_records)
    far = l2.hits - l2.near
    lat = np.where(dev & (l2.near > 0), arch.l2.near_latency_cycles / f, lat)
    lat = np.where(dev & (far > 0), arch.l2.far_latency_cycles / f, lat)
    lat = np.where(dev & (l2.misses > 0), arch.dram.latency_ns * 1e-9, lat)
    lat = np.where(l2.l1, arch.sm.l1_latency_cycles / f, lat)
    lat = np.where(rec.zero_copy, arch.host_link.zero_copy_latency_ns * 1e-9, lat)
    if not n_records:
        return np.zeros(b.kernels.n)
    return tr._chains(b.dep_pos, lat, rec.kidx, b.kernels.n)


def _kernels(trace: Any, arch: GpuArchConfig, b: _Base) -> list[tr.KernelTraffic]:
    """The rest of ``kernel_traffic`` (analytical) on a design: DRAM time, chains, records."""
    eff = tr.offchip.efficiency(arch.dram, b.runs_u)[b.runs_inv]
    w = b.bytes_nz / (arch.dram.bw_gb_per_s * 1e9 * eff)
    kidx = b.rec.kidx[b.nz]
    dram_s = np.bincount(kidx, weights=w, minlength=b.kernels.n).astype(np.float64)
    totals = dataclasses.replace(
        b.totals, dram_seconds=dram_s, chain_seconds=_chains(arch, b, trace.memory.size)
    )
    out = [tr._kernel_record(trace, b.kernels, b.rec, totals, b.by_tensor, i)
           for i in range(b.kernels.n)]  # fmt: skip
    out.sort(key=lambda kt: (kt.seq, kt.kernel))
    return out


# Per process, across batches: the traffic of the traces this process has seen. Keys hold the
# objects' ids and entries the objects themselves (a reused id never matches a dead one).
_BASES: dict[tuple[Any, ...], tuple[Any, Any, _Base]] = {}
_KERNELS: dict[tuple[Any, ...], tuple[Any, Any, list[tr.KernelTraffic]]] = {}
_MAX_BASES, _MAX_KERNELS = 64, 4096


def _cached_base(trace: Any, arch: GpuArchConfig) -> _Base:
    """:func:`_base`, kept per trace and L2 / L1 (by value) in this process."""
    key = (id(trace), arch.l2, arch.sm.l1_cache_kib)
    hit = _BASES.get(key)
    if hit is None or hit[0] is not trace:
        if len(_BASES) >= _MAX_BASES:
            _BASES.clear()
        hit = _BASES[key] = (trace, None, _base(trace, arch))
    return hit[2]


def _cached_kernels(trace: Any, arch: GpuArchConfig) -> list[tr.KernelTraffic]:
    """The design's kernel traffic (``kernel_traffic``, analytical), kept per trace, L2 / L1,
    DRAM and latencies in this process."""
    key = (id(trace), arch.l2, arch.sm.l1_cache_kib, id(arch.dram), _chain_key(arch))
    hit = _KERNELS.get(key)
    if hit is None or hit[0] is not trace or hit[1] is not arch.dram:
        if len(_KERNELS) >= _MAX_KERNELS:
            _KERNELS.clear()
        hit = _KERNELS[key] = (trace, arch.dram, _kernels(trace, arch, _cached_base(trace, arch)))
    return hit[2]


def _chain_key(arch: GpuArchConfig) -> tuple[Any, ...]:
    """What the chains of dependent loads read besides the trace and the L2 traffic."""
    return (
        arch.sm.freq_mhz, arch.l2.near_latency_cycles, arch.l2.far_latency_cycles,
        arch.dram.latency_ns, arch.sm.l1_latency_cycles, arch.host_link.zero_copy_latency_ns,
    )  # fmt: skip


def _schedule(arch: GpuArchConfig, kernels: list[tr.KernelTraffic], prereq: Any) -> Any:
    """Kernel times and the program schedule of one design (``simulate_kernels``' steps)."""
    times = [kernel_time(arch, kt) for kt in kernels]
    sched = schedule_kernels(arch, kernels, times, prereq)
    return times, sched


def _static(
    arch: GpuArchConfig, kernels: list[tr.KernelTraffic], wm: Any
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
    """What ``GpuSimResult.metrics()`` of a design holds that its kernels' traffic decides
    (the same for every design sharing the traffic, whose clock and sector size it fixes):
    the names and units in order, the values after the busy / idle cycles up to the achieved
    bandwidth, those after it up to the kernels, and each kernel's DRAM bytes."""
    sb = arch.l2.sector_bytes
    by_tensor: dict[str, int] = {}
    for kt in kernels:
        for k, v in kt.by_tensor.items():
            by_tensor[k] = by_tensor.get(k, 0) + v
    rd = sum(kt.dram_read_bytes for kt in kernels)
    wr = sum(kt.dram_write_bytes for kt in kernels)
    req = sum(kt.sector_requests for kt in kernels)
    hits = sum(kt.l2_hits for kt in kernels)
    h2d = sum(kt.host_bytes for kt in kernels if kt.kind == "h2d")
    d2h = sum(kt.host_bytes for kt in kernels if kt.kind == "d2h")
    zc = sum(kt.host_bytes for kt in kernels if kt.kind == "compute")
    head = [("cycles", "cycle"), ("seconds", "s"), ("freq_mhz", "MHz")]
    for k in _ENGINES:
        head += [(f"resource.{k}.busy", "cycle"), (f"resource.{k}.idle", "cycle")]
    mid: list[tuple[str, Any, str]] = [
        ("offchip.reads", rd // sb, "transfer"), ("offchip.writes", wr // sb, "transfer"),
        ("offchip.read_bytes", rd, "B"), ("offchip.write_bytes", wr, "B"),
        ("offchip.total_bytes", rd + wr, "B"),
        *((f"offchip.tensor.{t}", b, "B") for t, b in by_tensor.items()),
        ("l2.sector_requests", req, "sector"), ("l2.hits", hits, "sector"),
        ("l2.near_hits", sum(kt.l2_near_hits for kt in kernels), "sector"),
        ("l2.misses", sum(kt.l2_misses for kt in kernels), "sector"),
        ("l2.hit_rate", hits / req if req else 0.0, "1"),
        ("l2.request_bytes", req * sb, "B"), ("l2.hit_bytes", hits * sb, "B"),
        ("dram.read_bytes", rd, "B"), ("dram.write_bytes", wr, "B"),
    ]  # fmt: skip
    tail = [("link.h2d_bytes", h2d, "B"), ("link.d2h_bytes", d2h, "B"),
            ("link.zero_copy_bytes", zc, "B")]  # fmt: skip
    per_kernel: list[tuple[str, str]] = []
    for i, kt in enumerate(kernels):
        p = f"kernel.{i}.{kt.name}"
        per_kernel += [(f"{p}.seconds", "s"), (f"{p}.standalone_s", "s"), (f"{p}.dram_bytes", "B")]
    after = [(f"workload.{name}", unit) for name, _, unit in wm]
    pairs = [*head, *((n, u) for n, _, u in mid), ("dram.achieved_bw_bytes_per_s", "B/s"),
             *((n, u) for n, _, u in tail), *per_kernel, *after]  # fmt: skip
    return (
        tuple(n for n, _ in pairs),
        tuple(u for _, u in pairs),
        tuple(v for _, v, _ in mid),
        tuple(v for _, v, _ in tail),
        tuple(kt.dram_read_bytes + kt.dram_write_bytes for kt in kernels),
    )


_ENGINES = ("sm", "h2d", "d2h")


def _values(
    arch: GpuArchConfig, kernels: list[tr.KernelTraffic], times: Any, sched: Any,
    static: Any, wm: Any,
) -> tuple[Any, ...]:  # fmt: skip
    """The design's ``GpuSimResult.metrics()`` values in the order of :func:`_static`'s names:
    the schedule's figures around the shared ones."""
    seconds = sched.makespan
    f = arch.sm.freq_mhz

    def cyc(s: float) -> int:
        return round(s * f * 1e6)

    busy = dict.fromkeys(_ENGINES, 0.0)
    for kt, s0, s1 in zip(kernels, sched.start, sched.end, strict=True):
        busy["sm" if kt.kind == "compute" else kt.kind] += s1 - s0
    total = cyc(seconds)
    head: list[Any] = [total, seconds, f]
    for k in _ENGINES:
        b = cyc(busy[k])
        head += [b, max(0, total - b)]
    _, _, mid, tail, dram = static
    rd, wr = mid[2], mid[3]
    per_kernel: list[Any] = []
    for t, s0, s1, db in zip(times, sched.start, sched.end, dram, strict=True):
        per_kernel += [s1 - s0, t.seconds, db]
    bw = (rd + wr) / seconds if seconds > 0 else 0.0
    return (*head, *mid, bw, *tail, *per_kernel, *(v for _, v, _ in wm))


def _priced(
    archs: Sequence[GpuArchConfig], usage: dict[int, tuple[Any, ...]], label: str
) -> list[tuple[Any, list[int]]]:
    """The cost model's input per set of designs with the same memories, run counts as
    arrays (``priced_components`` with a result, for many designs at once)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in usage:
        a = archs[i]
        groups.setdefault((id(a.dram), id(a.host_dram), a.name), []).append(i)
    out = []
    for ids in groups.values():
        pc0 = priced_components(archs[ids[0]], None)
        u = np.array([usage[i][:5] for i in ids], dtype=np.int64).T
        rd, wr, h2d, d2h, zc = u
        seconds = np.array([usage[i][5] for i in ids], dtype=np.float64)
        off = [dataclasses.replace(pc0.offchip[0], read_bytes=rd, write_bytes=wr)]
        if len(pc0.offchip) > 1:
            off.append(dataclasses.replace(pc0.offchip[1], read_bytes=h2d + zc, write_bytes=d2h))
        # run counts as arrays over the designs: coaccel.cost.price prices them all at once
        pc = dataclasses.replace(pc0, workload=label, mode="analytical",
                                 seconds=seconds,  # type: ignore[arg-type]
                                 offchip=tuple(off))  # fmt: skip
        out.append((pc, ids))
    return out


def simulate_batch(
    archs: Sequence[GpuArchConfig], workload: GpuWorkload, *, mode: str = "analytical"
) -> dict[str, Any] | None:
    """Analytical results of one workload on many GPUs (module docstring).

    Args:
        archs: the designs (loaded, validated configs).
        workload: the workload (:func:`~.workload.load_workload`).
        mode: only ``"analytical"`` is batched.

    Returns:
        None for another mode; else ``values`` (per design ``(names, units, values)`` of
        :meth:`~.result.GpuSimResult.metrics`, or None for a design to evaluate alone, e.g.
        a kernel that does not fit its SMs) and ``priced`` (``(PricedComponents with array
        run counts, design indices)`` pairs).
    """
    if mode != "analytical" or not archs:
        return None
    trace = workload.trace
    prereqs: dict[tuple[Any, ...], Any] = {}
    statics: dict[int, tuple[Any, Any]] = {}  # id(kernels) -> (kernels, _static of them)
    wm = _workload_metrics(workload)
    metrics: dict[int, tuple[Any, tuple[Any, ...]]] = {}  # design -> (its static, values)
    usage: dict[int, tuple[Any, ...]] = {}
    attention = is_attention_op(trace)
    ops: dict[int, tuple[float, float, float, str, str]] = {}
    n_compute = 0
    for i, a in enumerate(archs):
        try:
            kernels = _cached_kernels(trace, a)
            pk = tuple((kt.kernel, kt.seq, kt.stream, kt.kind) for kt in kernels)
            if pk not in prereqs:
                prereqs[pk] = task_prerequisites(_items(trace, kernels))
            times, sched = _schedule(a, kernels, prereqs[pk])
        except (KernelDoesNotFit, ValueError):
            continue  # evaluated alone, it fails with the per-design path's reason
        hit = statics.get(id(kernels))
        if hit is None or hit[0] is not kernels:
            hit = statics[id(kernels)] = (kernels, _static(a, kernels, wm))
        st = hit[1]
        vals = _values(a, kernels, times, sched, st, wm)
        metrics[i] = (st, vals)
        seconds = vals[1]  # the schedule's makespan
        mid, tail = st[2], st[3]
        usage[i] = (mid[2], mid[3], tail[0], tail[1], tail[2], seconds)
        if attention and kernels:
            k0 = kernels[0]  # the split kernel
            ops[i] = (seconds, a.launch_overhead_us, a.sm.freq_mhz,
                      regime_of(k0.l2_hits, k0.sector_requests), fitted_config(a))  # fmt: skip
            if not n_compute:  # a property of the trace: the same for every design
                n_compute = sum(1 for kt in kernels if kt.kind == "compute")
    if ops:
        _add_calibrated(metrics, ops, n_compute)
    values: list[Any] = [None] * len(archs)
    for i, (st, vals) in metrics.items():
        values[i] = (st[0], st[1], vals)
    return {"values": values, "priced": _priced(archs, usage, workload.label)}


def _add_calibrated(
    metrics: dict[int, tuple[Any, tuple[Any, ...]]], ops: dict[int, tuple[Any, ...]], n: int
) -> None:
    """Append ``seconds_calibrated`` and its interval to the metrics of every design in
    ``ops``, computed for all of them at once (``_simulate._calibrated`` for one design).

    Args:
        metrics: design index -> (its :func:`_static`, its values so far).
        ops: design index -> (seconds, launch gap µs, SM clock MHz, regime, fitted config).
        n: compute kernels of the op (a property of the trace).
    """
    cal = load_calibration()
    sec, gap, mhz, reg, cfg = (np.array(c) for c in zip(*ops.values(), strict=True))
    t = op_seconds(sec.astype(np.float64), n, gap.astype(np.float64), cal.graph_gap_us)
    s, lo, hi = calibrated(t, mhz.astype(np.float64), reg, cfg, calibration=cal)
    extended: dict[int, Any] = {}  # id(static) -> the static with the three names added
    for i, v, v_lo, v_hi in zip(ops, s.tolist(), lo.tolist(), hi.tolist(), strict=True):
        st, vals = metrics[i]
        ext = extended.get(id(st))
        if ext is None:
            ext = extended[id(st)] = (
                (*st[0], *_CALIBRATED),
                (*st[1], "s", "s", "s"),
                *st[2:],
            )
        metrics[i] = (ext, (*vals, v, v_lo, v_hi))


_CALIBRATED = ("seconds_calibrated", "seconds_calibrated_lower", "seconds_calibrated_upper")
