"""``coaccel sim``: simulate a workload on an HBQ ASIC architecture (cycle-approximate or
analytical) and print the statistics (docs/hbq_sim.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EPILOG = """\
examples:
  coaccel sim hbq_e_28nm --workload llama-3-8b                  2K-token prefill, cycle mode
  coaccel sim hbq_e_28nm --workload llama-3-8b:prefill_16k --analytical
  coaccel sim arch_configs/nvfp4_28nm.yaml --workload qwen2.5-3b --scenario decode_2k --json
  coaccel sim hbq_e_28nm --workload llama-3-8b --set buffers.psum.size_kib=68 --set freq_mhz=400
architectures: hbq_a_28nm hbq_e_28nm nvfp4_28nm mxfp4_28nm mxfp_w4a8_28nm amove_28nm
               woq_w4a16_28nm (or a YAML path)
workloads:     llama-2-7b llama-3-8b llama-3.2-3b qwen2.5-3b qwen2.5-7b (or a YAML path);
               scenarios prefill_1k prefill_2k prefill_4k prefill_16k decode_2k decode_16k
"""


def register(subparsers: Any) -> None:
    """Add the ``sim`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "sim",
        help="simulate an LLM workload on an HBQ ASIC architecture (cycles, stalls, traffic)",
        description=(
            "Simulate one workload on one HBQ ASIC architecture. The reference produces the "
            "GEMM and attention traces for the architecture's tiles; the cycle-approximate "
            "engine runs them (identical layers once, scaled), or --analytical evaluates the "
            "closed-form model. Prints cycles, time, utilisation, the stall breakdown, buffer "
            "and DRAM accesses and a per-GEMM table."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("arch", metavar="ARCH", help="architecture name or YAML file")
    p.add_argument(
        "--workload",
        required=True,
        metavar="MODEL[:SCENARIO]",
        help="model name or workload YAML, optionally with a scenario",
    )
    p.add_argument("--scenario", metavar="NAME", help="scenario (default: the file's default)")
    p.add_argument(
        "--analytical", action="store_true", help="closed-form model instead of the trace engine"
    )
    p.add_argument(
        "--engine",
        choices=("fast", "simpy"),
        default="fast",
        help="cycle-mode event engine (default fast; simpy is the slower reference)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an architecture field (dotted key, YAML value), repeatable",
    )
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=run, command="sim")


def _overrides(items: list[str]) -> dict[str, Any]:
    import yaml

    from ..config import ConfigError, Problem

    out: dict[str, Any] = {}
    problems = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(
                Problem("command line", "--set", item, f"expected KEY=VALUE, got {item!r}")
            )
            continue
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            problems.append(Problem("command line", key, value, f"not a YAML value: {e}"))
    if problems:
        raise ConfigError(problems)
    return out


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


def run(args: argparse.Namespace) -> int:
    """Simulate and print.

    Args:
        args: the parsed command line.

    Returns:
        0 on success (configuration errors raise ``ConfigError``, reported by the CLI).
    """
    from ..config import override
    from ..sim.hbq_asic import load_arch, load_workload, simulate

    arch = load_arch(args.arch)
    changes = _overrides(args.set)
    if changes:
        arch = override(arch, changes)
    workload = load_workload(args.workload, args.scenario)
    stats = simulate(
        arch, workload, mode="analytical" if args.analytical else "cycle", engine=args.engine
    )
    if args.json:
        json.dump(stats.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_stats(stats))
    return 0
