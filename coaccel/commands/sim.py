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
        default="cycle",
        metavar="MODE",
        help="a mode the target offers (coaccel sim --list): cycle (trace-driven, default) or "
        "analytical (closed form) for coaccel's targets",
    )
    p.add_argument("--analytical", action="store_true", help="same as --mode analytical")
    p.add_argument(
        "--engine",
        default=None,
        metavar="NAME",
        help="same as --option engine=NAME: the cycle mode's event engine where the target has "
        "a choice (fast: numba, default; simpy: the slower reference)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a target's own simulation option (coaccel sim --list names them), repeatable",
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


def format_header(result: Any) -> str:
    """The first line of every result: target kind, architecture, workload and mode."""
    parts = [getattr(result, "target", ""), getattr(result, "arch", ""),
             getattr(result, "workload", ""), f"{getattr(result, 'mode', '')} mode"]  # fmt: skip
    return " | ".join(str(p) for p in parts if p and p != " mode")


def format_metrics(result: Any) -> str:
    """The target-independent part of a result: a header and its flat metrics with units.

    Args:
        result: a simulation result with ``metrics()``.

    Returns:
        Multi-line text: the header line, then one metric per line (a dimensionless value
        has no unit).
    """
    lines = [format_header(result)]
    for name, (value, unit) in result.metrics().items():
        shown = f"{value:,}" if isinstance(value, int) else f"{value:.6g}"
        lines.append(f"  {name:<40s} {shown:>20s} {'' if unit == '1' else unit}".rstrip())
    return "\n".join(lines)


def format_kinds() -> str:
    """The registered simulator kinds, their modes and shipped architectures."""
    from ..simulation import provider, targets

    lines = []
    for t in targets():
        k = t.kind
        origin = provider(k)
        lines.append(f"{k}: {t.description}" + (f" [{origin}]" if origin != "coaccel" else ""))
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
        0 on success (usage and configuration errors raise ``CoaccelError`` / ``ConfigError``,
        reported by the CLI as one line with status 2).
    """
    from ..simulation import load_arch, load_workload, parse_overrides, simulate

    if args.list:
        print(format_kinds())
        return 0
    if not args.arch or not args.workload:
        from ..spine.errors import CoaccelError

        raise CoaccelError("ARCH and --workload are required (or --list)")
    t, arch = load_arch(args.arch, parse_overrides(args.set, "--set", "command line"))
    workload = args.workload if args.scenario is None else f"{args.workload}:{args.scenario}"
    mode = "analytical" if args.analytical else args.mode
    options = parse_overrides(args.option, "--option", "command line")
    if args.engine is not None:
        options["engine"] = args.engine
    result = simulate(arch, load_workload(t, workload), mode=mode, **options)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(t.format_result(result) if t.format_result is not None else format_metrics(result))
    return 0
