"""The DRAM block every simulator shares: :class:`DramConfig` (presets in ``arch_configs/dram/``).

Public: :class:`DramConfig` (standard, channels, peak bandwidth, efficiency, latency, energy
per byte with its source, channel interleave, open-row timing), :class:`EfficiencyPoint` (one
point of an efficiency curve over transfer size), ``DramType`` (the DRAM standards).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from ._problems import Problem
from ._schema import FrozenMap, param

__all__ = ["DramConfig", "DramType", "EfficiencyPoint"]

DramType = Literal[
    "ddr4", "lpddr4", "lpddr5", "lpddr5x", "gddr6", "gddr6x", "hbm2", "hbm2e", "hbm3", "hbm3e"
]


@dataclass(frozen=True)
class EfficiencyPoint:
    """One point of a DRAM efficiency curve: sustained / peak bandwidth at one transfer size.

    Attributes:
        transfer_bytes: bytes moved by one transfer (one request stream of that size), B.
        efficiency: sustained / peak bandwidth for transfers of that size, in (0, 1].
    """

    transfer_bytes: int = param(ge=1, doc="bytes per transfer")
    efficiency: float = param(gt=0, le=1, doc="sustained / peak bandwidth at that size")


@dataclass(frozen=True)
class DramConfig:
    """Off-chip DRAM as the HBQ ASIC, DeltaLLM FPGA and GPU simulators see it.

    Shipped presets: ``arch_configs/dram/*.yaml``. The model that turns these figures into
    cycles is :mod:`coaccel.sim.common.offchip` (docs/config.md, "DRAM").

    Attributes:
        type: DRAM standard.
        channels: independent channels (pseudo-channels for HBM) the simulator may interleave.
        bw_gb_per_s: peak bandwidth, all channels together, GB/s (1e9 B/s).
        efficiency: sustained / peak bandwidth, in (0, 1]: one number for every transfer size
            (a flat curve), or a curve of :class:`EfficiencyPoint` (strictly increasing
            ``transfer_bytes``) interpolated piecewise-linearly in log2 of the transfer size
            and held constant beyond its first and last points.
        latency_ns: first-access (idle load-to-use) latency seen by the accelerator, ns.
        energy_pj_per_byte: access energy per byte moved (device + interface), pJ/B.
        uncertainty_pct: relative uncertainty of ``energy_pj_per_byte``, percent.
        source: where ``energy_pj_per_byte`` comes from (and its uncertainty).
        interleave_bytes: bytes of consecutive addresses mapped to one channel before the next
            channel takes over (address interleave granularity), B.
        row_buffer_bytes: bytes of one open row per channel (page size); None (the default)
            turns the open-row model off, so every transfer costs only its bandwidth time.
        row_hit_penalty_ns: extra time of a transfer that starts in the row its channel has
            open, ns (used only with ``row_buffer_bytes``).
        row_miss_penalty_ns: extra time of a transfer that must open another row first
            (precharge + activate), ns (used only with ``row_buffer_bytes``).
        sources: where each other figure comes from, keyed by field name.
    """

    VERSION: ClassVar[int] = 1

    type: DramType = param(doc="DRAM standard")
    channels: int = param(ge=1, doc="independent channels / pseudo-channels")
    bw_gb_per_s: float = param(gt=0, doc="peak bandwidth, all channels")
    efficiency: float | tuple[EfficiencyPoint, ...] = param(
        gt=0, le=1, doc="sustained / peak bandwidth: a number, or a curve over transfer size"
    )
    latency_ns: float = param(ge=0, doc="first-access (idle load-to-use) latency")
    energy_pj_per_byte: float = param(gt=0, doc="access energy per byte moved")
    uncertainty_pct: float = param(ge=0, doc="relative uncertainty of the energy figure")
    source: str = param(doc="provenance of energy_pj_per_byte")
    interleave_bytes: int = param(default=256, ge=1, doc="channel interleave granularity")
    row_buffer_bytes: int | None = param(
        default=None, ge=1, doc="open row per channel; null = no open-row model"
    )
    row_hit_penalty_ns: float = param(default=0.0, ge=0, doc="extra time of a row hit")
    row_miss_penalty_ns: float = param(default=0.0, ge=0, doc="extra time of a row miss")
    sources: Mapping[str, str] = param(
        default=FrozenMap(), doc="provenance of the other figures, by field name"
    )

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: provenance for known fields only; a well-formed curve; row model.

        A curve has at least one point and strictly increasing transfer sizes; row penalties
        need ``row_buffer_bytes``.
        """
        out: list[Problem | str] = []
        if not self.source.strip():
            out.append(Problem("", "source", self.source, "must say where the energy comes from"))
        figures = [f.name for f in dataclasses.fields(self) if f.name not in ("source", "sources")]
        for k in self.sources:
            if k not in figures:
                msg = f"unknown figure {k!r}; figures: {', '.join(figures)}"
                close = difflib.get_close_matches(k, figures, n=1)
                if close:
                    msg += f" (did you mean {close[0]!r}?)"
                out.append(Problem("", f"sources.{k}", k, msg, ", ".join(figures)))
        if isinstance(self.efficiency, tuple):
            if not self.efficiency:
                out.append(
                    Problem(
                        "",
                        "efficiency",
                        [],
                        "an efficiency curve needs at least one point",
                        "a number in (0, 1] or a list of {transfer_bytes, efficiency}",
                    )
                )
            sizes = [p.transfer_bytes for p in self.efficiency]
            for i in range(1, len(sizes)):
                if sizes[i] <= sizes[i - 1]:
                    out.append(
                        Problem(
                            "",
                            f"efficiency[{i}].transfer_bytes",
                            sizes[i],
                            f"transfer sizes must increase strictly: {sizes[i]} B after "
                            f"{sizes[i - 1]} B",
                        )
                    )
        if self.row_buffer_bytes is None:
            for k in ("row_hit_penalty_ns", "row_miss_penalty_ns"):
                if getattr(self, k):
                    out.append(
                        Problem(
                            "",
                            k,
                            getattr(self, k),
                            f"{k} needs row_buffer_bytes (the open-row model is off without it)",
                        )
                    )
        return out

    @property
    def efficiency_curve(self) -> tuple[EfficiencyPoint, ...]:
        """The efficiency as a curve (a single number is one point at 1 B: a flat curve)."""
        if isinstance(self.efficiency, tuple):
            return self.efficiency
        return (EfficiencyPoint(1, self.efficiency),)

    @property
    def streaming_efficiency(self) -> float:
        """Efficiency of long streaming transfers: the curve's last point (or the number)."""
        if isinstance(self.efficiency, tuple):
            return self.efficiency[-1].efficiency
        return self.efficiency

    @property
    def sustained_bw_gb_per_s(self) -> float:
        """Peak bandwidth times the streaming efficiency, GB/s."""
        return self.bw_gb_per_s * self.streaming_efficiency

    def sustained_bytes_per_cycle(self, freq_mhz: float) -> float:
        """Sustained streaming bandwidth in bytes per cycle of a clock.

        Per transfer size, see :func:`coaccel.sim.common.offchip.sustained_bytes_per_cycle`.

        Args:
            freq_mhz: the consumer's clock, MHz (e.g. 250 for the KV260 design).

        Returns:
            Bytes per cycle (19.2 GB/s at 250 MHz is 76.8 B/cycle peak, times the streaming
            efficiency).
        """
        return self.bw_gb_per_s * self.streaming_efficiency * 1e3 / freq_mhz
