"""The systolic target's result: coaccel's :class:`~coaccel.sim.common.SimResult` plus its GEMMs.

:class:`SystolicResult` adds the MACs, the array's shape and one :class:`GemmStats` per GEMM;
its :meth:`~SystolicResult.metrics` adds ``macs`` (MAC), ``utilization`` (1) and per GEMM
``gemm.<name>.cycles`` (cycle) and ``gemm.<name>.dram_stall`` (cycle). :func:`format_result` is
the text ``coaccel sim`` prints.

Public: :class:`GemmStats`, :class:`SystolicResult`, :func:`format_result`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coaccel.sim.common import Metric, SimResult

__all__ = ["GemmStats", "SystolicResult", "format_result"]


@dataclass(frozen=True)
class GemmStats:
    """One GEMM of the workload, all its runs together.

    Attributes:
        name: the GEMM (``"q_proj"``).
        m: rows. k: reduction length. n: output channels.
        repeat: runs (layers x decode steps).
        m_tile: rows of a token tile.
        tiles: array tiles of one run.
        cycles: cycles of all runs, cycle.
        dram_stall: cycles the array waited for transfers in all runs, cycle.
        macs: MACs of all runs.
    """

    name: str
    m: int
    k: int
    n: int
    repeat: int
    m_tile: int
    tiles: int
    cycles: int
    dram_stall: int
    macs: int


@dataclass(frozen=True, kw_only=True)
class SystolicResult(SimResult):
    """A workload on a systolic array.

    Attributes:
        macs: multiply-accumulates of the workload.
        rows: PE rows. cols: PE columns.
        gemms: per GEMM, in workload order.
    """

    macs: int
    rows: int
    cols: int
    gemms: tuple[GemmStats, ...]

    @property
    def utilization(self) -> float:
        """MACs over what the array could do in the run's cycles, ``macs / (R C cycles)``."""
        return self.macs / (self.rows * self.cols * self.cycles) if self.cycles else 0.0

    def metrics(self) -> dict[str, Metric]:
        """coaccel's metrics plus ``macs`` (MAC), ``utilization`` (1) and, per GEMM,
        ``gemm.<name>.cycles`` and ``gemm.<name>.dram_stall`` (cycle)."""
        out = super().metrics()
        out["macs"] = (self.macs, "MAC")
        out["utilization"] = (self.utilization, "1")
        for g in self.gemms:
            out[f"gemm.{g.name}.cycles"] = (g.cycles, "cycle")
            out[f"gemm.{g.name}.dram_stall"] = (g.dram_stall, "cycle")
        return out


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f} %" if whole else "    - "


def format_result(r: SystolicResult) -> str:
    """What ``coaccel sim`` prints for a systolic result: a header, totals, states, GEMMs.

    Args:
        r: the result.

    Returns:
        Multi-line text.
    """
    lines = [f"{r.target} | {r.arch} | {r.workload} | {r.mode} mode"]
    lines.append(
        f"  {r.rows} x {r.cols} PEs at {r.freq_mhz:g} MHz: {r.cycles:,} cycles = "
        f"{r.seconds * 1e3:.4g} ms, {r.macs:,} MACs, utilization {100 * r.utilization:.1f} %"
    )
    o = r.offchip
    lines.append(
        f"  DRAM: {o.read_bytes:,} B read, {o.write_bytes:,} B written "
        f"(DMA busy {_pct(r.resources['dram']['busy'], r.cycles).strip()} of the time)"
    )
    pe: Mapping[str, int] = r.resources["pe_array"]
    lines.append(
        "  PE array: " + ", ".join(f"{s} {_pct(c, r.cycles).strip()}" for s, c in pe.items())
    )
    head = f"  {'GEMM':<14s}{'M':>7s}{'K':>7s}{'N':>8s}{'runs':>6s}{'m_tile':>8s}"
    lines.append(head + f"{'tiles/run':>11s}{'cycles':>16s}{'DRAM stall':>12s}")
    for g in r.gemms:
        lines.append(
            f"  {g.name:<14s}{g.m:>7d}{g.k:>7d}{g.n:>8d}{g.repeat:>6d}{g.m_tile:>8d}"
            f"{g.tiles:>11,d}{g.cycles:>16,d}{_pct(g.dram_stall, g.cycles):>12s}"
        )
    for b, acc in r.buffers.items():
        lines.append(
            f"  SRAM {b}: {acc.reads:,} reads, {acc.writes:,} writes of {acc.word_bits} bits "
            f"({acc.read_bytes:,} B read, {acc.write_bytes:,} B written)"
        )
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)
