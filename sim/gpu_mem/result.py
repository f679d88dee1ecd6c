"""The result of a GPU simulation: :class:`GpuSimResult`, a :class:`SimResult` with the memory
hierarchy's counters and every kernel's time."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.result import Metric, SimResult

__all__ = ["CalibratedTime", "GpuSimResult", "KernelResult", "L2Stats", "LinkStats"]


@dataclass(frozen=True)
class KernelResult:
    """One kernel or copy of the program.

    Attributes:
        name: kernel name. stream: stream id.
        start_s: start, s. end_s: end, s (both in the program's schedule).
        standalone_s: its time alone on the GPU, s.
        bound: what bounds it (``dram``, ``l2``, ``latency``, ``compute``, ``host_link``,
            ``chain``, ``copy``).
        ctas: grid size. waves: waves. resident_ctas_per_sm: CTAs per SM.
        sector_requests: device sector transactions, sector.
        l2_hits: L2 sector hits. l2_misses: L2 sector misses (sector).
        dram_bytes: device-memory bytes read + written, B.
        host_bytes: host-link bytes, B.
    """

    name: str
    stream: int
    start_s: float
    end_s: float
    standalone_s: float
    bound: str
    ctas: int
    waves: int
    resident_ctas_per_sm: int
    sector_requests: int
    l2_hits: int
    l2_misses: int
    dram_bytes: int
    host_bytes: int


@dataclass(frozen=True)
class L2Stats:
    """L2 counters of the whole program (sectors of ``sector_bytes``).

    Attributes:
        sector_requests: sector transactions. hits: hits. near_hits: hits in the requester's
        own partition. misses: misses. sector_bytes: B per sector.
    """

    sector_requests: int
    hits: int
    near_hits: int
    misses: int
    sector_bytes: int

    @property
    def hit_rate(self) -> float:
        """hits / requests (0 for none)."""
        return self.hits / self.sector_requests if self.sector_requests else 0.0


@dataclass(frozen=True)
class LinkStats:
    """Host-link traffic, B: copies by direction and SM-issued zero-copy loads."""

    h2d_bytes: int
    d2h_bytes: int
    zero_copy_bytes: int


@dataclass(frozen=True)
class CalibratedTime:
    """A decode-attention op's time calibrated on measured ops, with its 90 % interval
    (:mod:`coaccel.sim.gpu_mem.intervals`; docs/gpu_measured.md).

    Attributes:
        seconds: calibrated time, s. lower_s, upper_s: the prediction interval, s.
        sim_s: ``T_sim``: the simulated op with the CUDA-graph gap before each kernel, s.
        regime: ``"dram"`` or ``"l2"`` (the half-width's group).
        gpu_config: the fitted config the design is (in-fit half-widths), or ``""`` (a GPU the
            fit did not see: held-out half-widths).
        library: the kernel library's fit, ``""`` for the pooled one.
    """

    seconds: float
    lower_s: float
    upper_s: float
    sim_s: float
    regime: str
    gpu_config: str
    library: str = ""


@dataclass(frozen=True, kw_only=True)
class GpuSimResult(SimResult):
    """A GPU simulation: the base result plus L2, link and per-kernel figures.

    Attributes:
        l2: :class:`L2Stats`.
        link: :class:`LinkStats`.
        kernels: one :class:`KernelResult` per kernel or copy, in issue order.
        workload_metrics: figures the workload's reference reported in its trace
            (``metrics`` of the trace's workload metadata, e.g. FFD's ``keep_ratio`` and
            ``attn_out_rel_err``): (name, value, unit).
        calibrated: a dense decode-attention op's calibrated time and interval
            (:class:`CalibratedTime`); None for any other workload.
    """

    l2: L2Stats
    link: LinkStats
    kernels: tuple[KernelResult, ...]
    workload_metrics: tuple[tuple[str, float, str], ...] = ()
    calibrated: CalibratedTime | None = None

    def metrics(self) -> dict[str, Metric]:
        """The base metrics plus ``l2.*`` (sector, 1, B), ``dram.*`` (B, B/s), ``link.*`` (B)
        and ``kernel.<i>.<name>.seconds`` / ``.standalone_s`` (s), ``.dram_bytes`` (B), and
        ``workload.<name>`` for each of :attr:`workload_metrics`."""
        out = super().metrics()
        l2 = self.l2
        sb = l2.sector_bytes
        out["l2.sector_requests"] = (l2.sector_requests, "sector")
        out["l2.hits"] = (l2.hits, "sector")
        out["l2.near_hits"] = (l2.near_hits, "sector")
        out["l2.misses"] = (l2.misses, "sector")
        out["l2.hit_rate"] = (l2.hit_rate, "1")
        out["l2.request_bytes"] = (l2.sector_requests * sb, "B")
        out["l2.hit_bytes"] = (l2.hits * sb, "B")
        out["dram.read_bytes"] = (self.offchip.read_bytes, "B")
        out["dram.write_bytes"] = (self.offchip.write_bytes, "B")
        bw = self.offchip.total_bytes / self.seconds if self.seconds > 0 else 0.0
        out["dram.achieved_bw_bytes_per_s"] = (bw, "B/s")
        out["link.h2d_bytes"] = (self.link.h2d_bytes, "B")
        out["link.d2h_bytes"] = (self.link.d2h_bytes, "B")
        out["link.zero_copy_bytes"] = (self.link.zero_copy_bytes, "B")
        for i, k in enumerate(self.kernels):
            p = f"kernel.{i}.{k.name}"
            out[f"{p}.seconds"] = (k.end_s - k.start_s, "s")
            out[f"{p}.standalone_s"] = (k.standalone_s, "s")
            out[f"{p}.dram_bytes"] = (k.dram_bytes, "B")
        for name, value, unit in self.workload_metrics:
            out[f"workload.{name}"] = (value, unit)
        c = self.calibrated
        if c is not None:
            out["seconds_calibrated"] = (c.seconds, "s")
            out["seconds_calibrated_lower"] = (c.lower_s, "s")
            out["seconds_calibrated_upper"] = (c.upper_s, "s")
        return out
