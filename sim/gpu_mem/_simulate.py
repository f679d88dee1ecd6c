"""``simulate(arch, workload, mode)``: a GPU trace through the memory-hierarchy model."""

from __future__ import annotations

from typing import Any

from coaccel.spine.config import ConfigError, Problem, config_digest

from ..common.result import OffchipAccess
from .config import GpuArchConfig
from .intervals import (
    calibrated,
    fitted_config,
    is_attention_op,
    load_calibration,
    op_seconds,
    regime_of,
)
from .result import CalibratedTime, GpuSimResult, KernelResult, L2Stats, LinkStats
from .timing import KernelDoesNotFit, kernel_time, program_time
from .traffic import KernelTraffic, kernel_traffic
from .workload import GpuWorkload, load_workload

MODES = ("analytical", "cycle")


def simulate_kernels(
    arch: GpuArchConfig, workload: GpuWorkload, kernels: list[KernelTraffic], mode: str
) -> GpuSimResult:
    """Time kernels already read from the workload's trace and build the result."""
    try:
        times = [kernel_time(arch, kt) for kt in kernels]
    except KernelDoesNotFit as e:
        raise ConfigError([Problem("<simulate>", "workload", workload.label, str(e))]) from None
    sched = program_time(arch, workload.trace, kernels, times)
    seconds = sched.makespan
    f = arch.sm.freq_mhz
    res = [
        KernelResult(
            name=kt.name,
            stream=kt.stream,
            start_s=s0,
            end_s=s1,
            standalone_s=t.seconds,
            bound=t.bound,
            ctas=kt.ctas,
            waves=t.waves,
            resident_ctas_per_sm=t.resident_ctas_per_sm,
            sector_requests=kt.sector_requests,
            l2_hits=kt.l2_hits,
            l2_misses=kt.l2_misses,
            dram_bytes=kt.dram_read_bytes + kt.dram_write_bytes,
            host_bytes=kt.host_bytes,
        )  # fmt: skip
        for kt, t, s0, s1 in zip(kernels, times, sched.start, sched.end, strict=True)
    ]
    by_tensor: dict[str, int] = {}
    for kt in kernels:
        for k, v in kt.by_tensor.items():
            by_tensor[k] = by_tensor.get(k, 0) + v
    sb = arch.l2.sector_bytes
    rd = sum(kt.dram_read_bytes for kt in kernels)
    wr = sum(kt.dram_write_bytes for kt in kernels)
    cyc = lambda s: round(s * f * 1e6)  # noqa: E731
    busy = {"sm": 0.0, "h2d": 0.0, "d2h": 0.0}
    for r, kt in zip(res, kernels, strict=True):
        busy["sm" if kt.kind == "compute" else kt.kind] += r.end_s - r.start_s
    resources = {
        k: {"busy": cyc(v), "idle": max(0, cyc(seconds) - cyc(v))} for k, v in busy.items()
    }
    notes = (
        f"{mode} mode: " + (
            "every device sector replayed through the sectored L2 (numba)"
            if mode == "cycle" else
            "sectors by closed form; a tensor that fits the effective L2 misses on first touch only"
        ),
        "kernels run one at a time on the SMs; copies on per-direction copy engines; running "
        "tasks share the DRAM bandwidth",
    )  # fmt: skip
    return GpuSimResult(
        target="gpu",
        arch=arch.name,
        workload=workload.label,
        mode=mode,
        config_digest=config_digest(arch),
        freq_mhz=f,
        cycles=cyc(seconds),
        seconds=seconds,
        resources=resources,
        buffers={},
        offchip=OffchipAccess(
            reads=rd // sb, writes=wr // sb, read_bytes=rd, write_bytes=wr, by_tensor=by_tensor
        ),
        notes=notes,
        l2=L2Stats(
            sector_requests=sum(kt.sector_requests for kt in kernels),
            hits=sum(kt.l2_hits for kt in kernels),
            near_hits=sum(kt.l2_near_hits for kt in kernels),
            misses=sum(kt.l2_misses for kt in kernels),
            sector_bytes=sb,
        ),
        link=LinkStats(
            h2d_bytes=sum(kt.host_bytes for kt in kernels if kt.kind == "h2d"),
            d2h_bytes=sum(kt.host_bytes for kt in kernels if kt.kind == "d2h"),
            zero_copy_bytes=sum(kt.host_bytes for kt in kernels if kt.kind == "compute"),
        ),
        kernels=tuple(res),
        workload_metrics=_workload_metrics(workload),
        calibrated=_calibrated(arch, workload, kernels, seconds),
    )


def _calibrated(
    arch: GpuArchConfig, workload: GpuWorkload, kernels: list[KernelTraffic], seconds: float
) -> CalibratedTime | None:
    """The calibrated time of a dense decode-attention op (None for another workload): the
    simulated time with the CUDA-graph gap before each kernel, the split kernel's regime, the
    fitted config the design is (:mod:`.intervals`; the batch path computes the same numbers
    for many designs at once)."""
    if not kernels or not is_attention_op(workload.trace):
        return None
    cal = load_calibration()
    n = sum(1 for kt in kernels if kt.kind == "compute")
    t = op_seconds(seconds, n, arch.launch_overhead_us, cal.graph_gap_us)
    reg = regime_of(kernels[0].l2_hits, kernels[0].sector_requests)
    cfg = fitted_config(arch, cal)
    s, lo, hi = calibrated(t, arch.sm.freq_mhz, reg, cfg, calibration=cal)
    return CalibratedTime(seconds=s, lower_s=lo, upper_s=hi, sim_s=t, regime=reg, gpu_config=cfg)


def _workload_metrics(workload: GpuWorkload) -> tuple[tuple[str, float, str], ...]:
    """``metrics`` of the trace's workload metadata: name -> [value, unit]."""
    raw = workload.trace.meta.get("workload", {}).get("metrics", {})
    if not isinstance(raw, dict):
        return ()
    out = []
    for k, v in sorted(raw.items()):
        if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], (int, float)):
            out.append((str(k), float(v[0]), str(v[1])))
    return tuple(out)


def simulate(arch: GpuArchConfig, workload: Any, *, mode: str = "analytical") -> GpuSimResult:
    """Simulate a GPU workload.

    Args:
        arch: the GPU (:func:`~coaccel.sim.gpu_mem.load_arch`).
        workload: a trace, trace path, generator spec or :class:`GpuWorkload`
            (:func:`~coaccel.sim.gpu_mem.load_workload`).
        mode: ``"analytical"`` (closed-form traffic per kernel) or ``"cycle"`` (every sector
            through the L2 model).

    Returns:
        :class:`~coaccel.sim.gpu_mem.result.GpuSimResult`.

    Raises:
        ConfigError: a bad mode or workload, or a kernel that does not fit an SM.
    """
    if mode not in MODES:
        raise ConfigError(
            [Problem("<simulate>", "mode", mode, f"gpu offers modes {', '.join(MODES)}",
                     ", ".join(MODES))]
        )  # fmt: skip
    wl = load_workload(workload)
    kernels = kernel_traffic(wl.trace, arch, fidelity=mode)  # type: ignore[arg-type]
    return simulate_kernels(arch, wl, kernels, mode)
