"""Time of one kernel or copy from its traffic, and of a whole program on streams.

:func:`kernel_time` is the per-kernel model both fidelities share ([OURS], docs/gpu_mem.md):

* the grid runs in waves of ``SMs x resident CTAs`` (:mod:`.occupancy`), the last one partial;
* a wave takes its share of the kernel's work at the slowest of: DRAM (the traffic's
  efficiency-curve time, channel balance, open rows), L2 hits at the L2 hit bandwidth, the
  bandwidth its loads in flight sustain over their mean latency (Little's law), zero-copy host
  loads over the link, and compute as a roofline (tensor and FP32 FLOP at the active SMs'
  peak x efficiency), overlapped with memory; plus one load latency to fill the pipeline;
* a kernel takes at least its longest chain of dependent loads (pointer chasing).

:func:`copy_time` is a copy-engine transfer over the host link (fixed cost, size-dependent
efficiency, pinned or pageable, capped by host DRAM where the config has it).
:func:`program_time` puts kernels and copies on their streams and engines with the trace's
events and shares the device-memory bandwidth among what runs at once
(:func:`coaccel.sim.common.streams.schedule`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from coaccel.spine.trace import Trace

from ..common.hostlink import copy_seconds
from ..common.streams import Scheduled, Task, schedule, task_prerequisites
from .config import GpuArchConfig
from .occupancy import mlp_bytes_per_s, resident_ctas
from .traffic import KernelTraffic

__all__ = ["KernelTime", "copy_time", "kernel_time", "program_time", "schedule_kernels"]


@dataclass(frozen=True)
class KernelTime:
    """A kernel's standalone time and what bounds it.

    Attributes:
        seconds: standalone time (without launch latency), s.
        resident_ctas_per_sm: CTAs one SM holds.
        waves: waves of the grid (the last may be partial).
        bound: what bounds most of its time: ``dram``, ``l2``, ``latency`` (bytes in flight),
            ``host_link``, ``compute``, ``chain`` (dependent loads) or ``copy``.
        mean_latency_s: mean load latency of its device traffic, s.
    """

    seconds: float
    resident_ctas_per_sm: int
    waves: int
    bound: str
    mean_latency_s: float


class KernelDoesNotFit(ValueError):
    """A kernel's CTA needs more threads, shared memory or registers than one SM has."""


def _mean_latency(arch: GpuArchConfig, kt: KernelTraffic) -> float:
    f = arch.sm.freq_mhz * 1e6
    n = kt.sector_requests
    if n <= 0:
        return arch.dram.latency_ns * 1e-9
    # L1 hits are L2 hits served earlier; take them out of the near / far shares in proportion
    l2_only = max(kt.l2_hits - kt.l1_hits, 0)
    share = l2_only / kt.l2_hits if kt.l2_hits else 0.0
    near = kt.l2_near_hits * share
    far = (kt.l2_hits - kt.l2_near_hits) * share
    return (
        kt.l1_hits * arch.sm.l1_latency_cycles / f
        + near * arch.l2.near_latency_cycles / f
        + far * arch.l2.far_latency_cycles / f
        + kt.l2_misses * arch.dram.latency_ns * 1e-9
    ) / n


def kernel_time(arch: GpuArchConfig, kt: KernelTraffic) -> KernelTime:
    """Standalone time of a compute kernel.

    Args:
        arch: the GPU.
        kt: its traffic (:func:`~coaccel.sim.gpu_mem.traffic.kernel_traffic`).

    Returns:
        :class:`KernelTime`.

    Raises:
        KernelDoesNotFit: one CTA exceeds an SM's threads, shared memory or registers.
    """
    if kt.kind != "compute":
        return copy_time(arch, kt)
    sm = arch.sm
    res = resident_ctas(sm, kt.threads_per_cta, kt.smem_bytes_per_cta, kt.regs_per_thread)
    if res < 1:
        raise KernelDoesNotFit(
            f"kernel {kt.name!r}: a CTA of {kt.threads_per_cta} threads, "
            f"{kt.smem_bytes_per_cta} B shared memory and {kt.regs_per_thread} registers per "
            f"thread does not fit one SM of {arch.name}"
        )
    ctas = max(kt.ctas, 1)
    lat = _mean_latency(arch, kt)
    hit_bytes = kt.l2_hits * arch.l2.sector_bytes
    dev_bytes = kt.dram_read_bytes + kt.dram_write_bytes + hit_bytes
    inflight_cta = sm.pipeline_stages * max(kt.tile_bytes, arch.l2.sector_bytes)
    f = sm.freq_mhz * 1e6
    link = arch.host_link
    host = bool(kt.host_bytes)
    zc_bw_link = 0.0
    if host:
        zc_bw_link = link.bw_bytes_per_s("h2d") * link.zero_copy_efficiency
        if arch.host_dram is not None:
            zc_bw_link = min(zc_bw_link, arch.host_dram.sustained_bw_gb_per_s * 1e9)
    # the waves of wave_sizes(ctas, sm.count, res): full ones of sm.count x res CTAs, then
    # the remainder; equal-sized waves are timed once
    per = sm.count * res
    full, rest = divmod(ctas, per)
    n_waves = full + (1 if rest else 0)
    first = per if full else rest
    groups: tuple[tuple[int, int], ...] = ((first, n_waves),)
    if rest and full:
        groups = ((first, n_waves - 1), (rest, 1))
    l2_bw = arch.l2.hit_bw_gb_per_s * 1e9
    total = 0.0
    s_dram = s_l2 = s_lat = s_comp = s_host = 0.0
    for w, reps in groups:
        frac = w / ctas
        active = min(sm.count, w)
        t_dram = frac * kt.dram_seconds
        t_l2 = frac * hit_bytes / l2_bw
        t_lat = frac * dev_bytes / mlp_bytes_per_s(sm, w, inflight_cta, lat)
        t_comp = (
            frac
            * (
                kt.tensor_flop / (active * sm.tensor_flop_per_cycle_per_sm * f)
                + kt.fp32_flop / (active * sm.fp32_flop_per_cycle_per_sm * f)
            )
            / sm.compute_efficiency
        )
        wave_lat = lat if dev_bytes else 0.0
        if host:
            zl = link.zero_copy_latency_ns * 1e-9
            zbw = zc_bw_link
            if zl > 0:
                per_sm = min(
                    math.ceil(w / active) * inflight_cta, sm.max_inflight_per_sm_kib * 1024
                )
                zbw = min(zbw, active * per_sm / zl)
            t_host = frac * kt.host_bytes / zbw
            t = max(t_dram, t_l2, t_lat, t_comp, t_host)
            s_host = s_host + t_host * reps
            wave_lat = max(wave_lat, link.zero_copy_latency_ns * 1e-9)
        else:
            t = max(t_dram, t_l2, t_lat, t_comp)
        total += (t + wave_lat) * reps
        s_dram = s_dram + t_dram * reps
        s_l2 = s_l2 + t_l2 * reps
        s_lat = s_lat + t_lat * reps
        s_comp = s_comp + t_comp * reps
    # the largest summed term names the bound (the first of equals, in this order)
    sums = {"dram": s_dram, "l2": s_l2, "latency": s_lat, "compute": s_comp}
    if host:
        sums["host_link"] = s_host
    bound = max(sums, key=sums.__getitem__)
    if kt.chain_seconds > total:
        total, bound = kt.chain_seconds, "chain"
    return KernelTime(total, res, n_waves, bound, lat)


def copy_time(arch: GpuArchConfig, kt: KernelTraffic) -> KernelTime:
    """Time of a copy-engine transfer of ``kt.host_bytes`` (``kind`` h2d or d2h), alone.

    ``copy_fixed_us + n / (bw x efficiency(n) ...)`` (:func:`copy_seconds`), at least the
    host DRAM's streaming time of ``n`` where the config has a host DRAM.
    """
    if kt.kind == "compute":
        raise ValueError(f"{kt.name!r} is a compute kernel, not a copy")
    n = kt.host_bytes
    s = float(copy_seconds(arch.host_link, n, kt.kind, pinned=kt.pinned))
    if arch.host_dram is not None and n:
        s = max(
            s,
            arch.host_link.copy_fixed_us * 1e-6 + n / (arch.host_dram.sustained_bw_gb_per_s * 1e9),
        )
    return KernelTime(s, 0, 0, "copy", 0.0)


def _items(trace: Trace, kernels: list[KernelTraffic]) -> list[tuple[str, int, int]]:
    """Issue-ordered tasks and events of a trace for :func:`task_prerequisites`."""
    ev = trace.events
    by_seq: list[tuple[int, tuple[str, int, int]]] = []
    task_of = {kt.kernel: i for i, kt in enumerate(kernels)}
    for kt in kernels:
        by_seq.append((kt.seq, ("task", kt.stream, kt.kernel)))
    records = set(ev["seq"][ev["kind"] == 2].tolist())
    kind_name = {2: "record", 3: "wait", 4: "sync"}
    for e in ev:
        k = int(e["kind"])
        if k not in kind_name:
            continue
        seq, stream, dep = int(e["seq"]), int(e["stream"]), int(e["dep"])
        if k == 3 and dep not in records:
            # a wait on an ordinary record: wait for the kernel that issues it
            kid = _kernel_of_record(trace, dep)
            if kid in task_of:
                by_seq.append((seq, ("wait_task", stream, task_of[kid])))
            continue
        by_seq.append((seq, (kind_name[k], stream, seq if k == 2 else dep)))
    by_seq.sort(key=lambda x: x[0])
    return [it for _, it in by_seq]


def _kernel_of_record(trace: Trace, seq: int) -> int:
    """Kernel id of the memory or compute record with this seq (-1 if none)."""
    for arr in (trace.memory, trace.compute):
        i = int(np.searchsorted(arr["seq"], seq))
        if i < arr.size and int(arr["seq"][i]) == seq:
            return int(arr["kernel"][i])
    return -1


def program_time(
    arch: GpuArchConfig, trace: Trace, kernels: list[KernelTraffic], times: list[KernelTime]
) -> Scheduled:
    """Schedule kernels and copies on streams, engines and shared device memory.

    Args:
        arch: the GPU.
        trace: the trace (its events order the streams).
        kernels: its kernels in issue order (:func:`kernel_traffic`).
        times: their standalone times.

    Returns:
        Start and end of each kernel, s.
    """
    return schedule_kernels(arch, kernels, times, task_prerequisites(_items(trace, kernels)))


def schedule_kernels(
    arch: GpuArchConfig, kernels: list[KernelTraffic], times: list[KernelTime], prereq: Any
) -> Scheduled:
    """Schedule kernels whose stream prerequisites are known (:func:`program_time`'s second
    half; a batch of designs sharing one trace computes ``prereq`` once).

    Args:
        arch: the GPU.
        kernels: the kernels in issue order.
        times: their standalone times.
        prereq: each kernel's prerequisites (``task_prerequisites`` of the trace's items).

    Returns:
        Start and end of each kernel, s.
    """
    gap = arch.launch_overhead_us * 1e-6
    tasks = [
        Task(
            name=kt.name,
            stream=kt.stream,
            engine="sm" if kt.kind == "compute" else kt.kind,
            seconds=kt_t.seconds,
            mem_bytes=float(kt.dram_read_bytes + kt.dram_write_bytes),
            after=prereq[i],
            gap_seconds=gap if kt.kind == "compute" else 0.0,
        )
        for i, (kt, kt_t) in enumerate(zip(kernels, times, strict=True))
    ]
    n_ce = arch.host_link.copy_engines_per_direction
    return schedule(
        tasks,
        mem_bytes_per_s=arch.dram.sustained_bw_gb_per_s * 1e9,
        engines={"sm": 1, "h2d": n_ce, "d2h": n_ce},
    )
