"""The text ``coaccel sim`` prints for an HBQ ASIC run."""

from __future__ import annotations

from typing import Any

__all__ = ["format_stats"]


def format_stats(stats: Any) -> str:
    """The human-readable report of one :class:`~coaccel.sim.hbq_asic.HbqSimStats`.

    Args:
        stats: the statistics.

    Returns:
        Multi-line text.
    """
    s = stats
    lines = [
        f"{s.arch} | {s.workload} | {s.mode} mode",
        f"  cycles        {s.cycles:,} ({s.seconds:.6g} s at {s.freq_mhz:g} MHz)",
        f"  MACs          {s.macs:,}  (peak {s.peak_macs_per_cycle} / cycle)",
        f"  utilisation   {100 * s.utilisation:.2f} %",
        "  tiles         " + ", ".join(f"{k}={v}" for k, v in s.tiles.items()),
        "  cycles by cause:",
    ]
    for cause, c in s.stall_cycles.items():
        if c:
            lines.append(f"    {cause:<20s} {c:>18,}  {100 * c / max(1, s.cycles):6.2f} %")
    lines.append("  on-chip buffers (accesses; bytes):")
    for name, b in s.buffers.items():
        lines.append(
            f"    {name:<5s} reads {b.reads:>16,} ({b.read_bytes:,} B)   "
            f"writes {b.writes:>16,} ({b.write_bytes:,} B)   word {b.word_bits} bits"
        )
    d = s.dram
    lines.append(
        f"  DRAM          read {d.read_bytes:,} B in {d.reads:,} transfers, "
        f"write {d.write_bytes:,} B in {d.writes:,}"
    )
    lines.append(
        f"  {'segment':<14s} {'kind':<10s} {'copies':>6s} {'cycles':>18s} {'MACs':>20s} "
        f"{'DRAM read B':>16s} {'DRAM write B':>14s}"
    )
    for name, k in s.by_name.items():
        lines.append(
            f"  {name:<14s} {k.kind:<10s} {k.count:>6d} {k.cycles:>18,} {k.macs:>20,} "
            f"{k.dram_read_bytes:>16,} {k.dram_write_bytes:>14,}"
        )
    lines.append(f"  layers        {s.layers} (simulated: {s.layers_simulated})")
    for note in s.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
