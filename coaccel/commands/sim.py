"""``coaccel sim``: simulate a workload on an architecture of any registered simulator kind
(cycle-approximate or analytical) and print the result (docs/hbq_sim.md for the HBQ ASIC)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EPILOG = """\
examples:
  coaccel sim --list                                            simulator kinds and architectures
  coaccel sim hbq_e_28nm --workload llama-3-8b                  2K-token prefill, cycle mode
  coaccel sim hbq_e_28nm --workload llama-3-8b:prefill_16k --mode analytical
  coaccel sim arch_configs/hbq_asic/nvfp4_28nm.yaml --workload qwen2.5-3b:decode_2k --json
  coaccel sim hbq_e_28nm --workload llama-3-8b --set buffers.psum.size_kib=68 --set freq_mhz=400
An architecture file's kind: key picks the simulator; shipped files are arch_configs/<kind>/*.yaml
and can be named by their stem.
"""


def register(subparsers: Any) -> None:
    """Add the ``sim`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "sim",
        help="simulate an LLM workload on an architecture (cycles, stalls, traffic)",
        description=(
            "Simulate one workload on one architecture. The architecture file's kind: says "
            "which simulator runs it. The reference produces the workload's traces and the "
            "cycle-approximate engine runs them, or --mode analytical evaluates the closed-form "
            "model. Prints cycles, time, busy and stall time per resource, buffer and off-chip "
            "accesses, and the target's own detail."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("arch", metavar="ARCH", nargs="?", help="architecture name or YAML file")
    p.add_argument(
        "--list", action="store_true", help="list the simulator kinds and their architectures"
    )
    p.add_argument(
        "--workload",
        metavar="MODEL[:SCENARIO]",
        help="model name or workload YAML, optionally with a scenario",
    )
    p.add_argument("--scenario", metavar="NAME", help="scenario (default: the file's default)")
    p.add_argument(
        "--mode",
        choices=("cycle", "analytical"),
        default="cycle",
        help="cycle (trace-driven, default) or analytical (closed form)",
    )
    p.add_argument("--analytical", action="store_true", help="same as --mode analytical")
    p.add_argument(
        "--engine",
        choices=("fast", "simpy"),
        default=None,
        help="cycle mode's event engine where the target has a choice (fast: numba, default; "
        "simpy: the slower reference)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an architecture field (dotted key, YAML value), repeatable",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run, command="sim")


def _overrides(items: list[str]) -> dict[str, Any]:
    import yaml

    from ..spine.config import ConfigError, Problem

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


def format_metrics(result: Any) -> str:
    """The target-independent part of a result: its flat metrics with units.

    Args:
        result: a simulation result with ``metrics()``.

    Returns:
        Multi-line text, one metric per line.
    """
    lines = []
    for name, (value, unit) in result.metrics().items():
        shown = f"{value:,}" if isinstance(value, int) else f"{value:.6g}"
        lines.append(f"  {name:<40s} {shown:>20s} {unit}")
    return "\n".join(lines)


FORMATTERS = {"hbq_asic": format_stats}
"""Detailed text per simulator kind; kinds without one print their metrics."""


def format_kinds() -> str:
    """The registered simulator kinds, their modes and shipped architectures."""
    from ..simulation import kinds, target

    lines = []
    for k in kinds():
        t = target(k)
        lines.append(f"{k}: {t.description}")
        lines.append(f"  modes: {', '.join(t.modes)}")
        lines.append(f"  architectures: {' '.join(t.arch_names)}")
        for name, text in t.options:
            lines.append(f"  option {name}: {text}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Simulate and print.

    Args:
        args: the parsed command line.

    Returns:
        0 on success, 2 on a usage error (configuration errors raise ``ConfigError``, reported
        by the CLI).
    """
    from ..simulation import load_arch, simulate

    if args.list:
        print(format_kinds())
        return 0
    if not args.arch or not args.workload:
        print("coaccel sim: error: ARCH and --workload are required (or --list)", file=sys.stderr)
        return 2
    t, arch = load_arch(args.arch, _overrides(args.set))
    workload = args.workload if args.scenario is None else f"{args.workload}:{args.scenario}"
    mode = "analytical" if args.analytical else args.mode
    options = {}
    if args.engine is not None:
        options["engine"] = args.engine
    result = simulate(arch, t.load_workload(workload), mode=mode, **options)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        fmt = FORMATTERS.get(t.kind)
        print(fmt(result) if fmt is not None else format_metrics(result))
    return 0
