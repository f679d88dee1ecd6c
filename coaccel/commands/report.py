"""``coaccel report ARCH...``: the area/energy report of designs of any target kinds.

For every architecture (a shipped name such as ``hbq_e_28nm``, ``kv260`` or ``h200``, or a YAML
path), the target it belongs to prices it through its report role
(:class:`coaccel.spine.target.ReportRole`): an ASIC's area and energy by component, an FPGA's
resource use and power, a GPU's energy per token. The parts of every kind go into one report
(:func:`coaccel.report.document.write_report`): ``cost_report.html`` (self-contained),
``cost_report.md`` and ``cost_report.csv`` (every figure with unit, one-sigma uncertainty and
source), plus each part's charts, in ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .args import Outputs, add_out, add_output_flags

DEFAULT_OUT = Path("reports") / "cost"

EPILOG = """\
examples:
  coaccel report hbq_e_28nm hbq_a_28nm nvfp4_28nm mxfp_w4a8_28nm amove_28nm
  coaccel report hbq_e_28nm kv260 h200          one design of each kind, one report
  coaccel report arch_configs/hbq_asic/hbq_e_28nm.yaml --workload llama-3-8b --scenario prefill_16k
  coaccel report hbq_e_28nm --node 7 --mode cycle --workload llama-3.2-3b
  coaccel report hbq_e_28nm kv260 --area-only
A sweep's report (Pareto fronts of a coaccel sweep store) is coaccel sweep-report.
"""


def register(subparsers: Any) -> None:
    """Add the ``report`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "report",
        help="area/energy report of designs of any kind (ASIC area and energy, FPGA "
        "resources and power, GPU energy per token)",
        description=(
            "Area, resources and energy of one or more designs, each priced by its target: "
            "charts, tables with units and sources, one CSV, a Markdown and a self-contained "
            "HTML page. Workloads default to each target's own (coaccel report --help lists "
            "them). For the report of a design-space sweep (its Pareto fronts and selected "
            "design), use 'coaccel sweep-report'."
        ),
        epilog=EPILOG + _defaults_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("archs", nargs="+", metavar="ARCH", help="shipped arch name or YAML path")
    p.add_argument(
        "--workload",
        "--workloads",
        dest="workloads",
        default=None,
        metavar="W,W,...",
        help="comma-separated workloads for every design (default: each target's own)",
    )
    p.add_argument("--scenario", default=None, metavar="NAME",
                   help="scenario of the workloads (default: each target's own)")  # fmt: skip
    p.add_argument(
        "--mode",
        default="analytical",
        metavar="MODE",
        help="simulator mode, one every named design's target offers (default analytical: "
        "fast; cycle: cycle-approximate)",
    )
    p.add_argument("--node", type=float, default=28, metavar="NM",
                   help="technology node of ASIC figures: 28, 16, 7 or 5 (default 28)")  # fmt: skip
    p.add_argument("--area-only", action="store_true", help="no workloads: area/resources only")
    add_out(p, DEFAULT_OUT)
    add_output_flags(p, "print every figure (the CSV's rows) as JSON")
    p.set_defaults(func=run, command="report")


def _defaults_text() -> str:
    """Each target's report and default workloads, for the help's epilog."""
    from ..simulation import targets
    from ..spine.errors import CoaccelError

    lines = ["", "targets (default workloads):"]
    try:
        for t in targets():
            if t.report is None:
                lines.append(f"  {t.kind}: no report")
                continue
            wl = ", ".join(t.report.default_workloads) or "-"
            sc = f" ({t.report.default_scenario})" if t.report.default_scenario else ""
            lines.append(f"  {t.kind}: {t.report.summary}; {wl}{sc}")
    except CoaccelError:
        return ""
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Price every design through its target and write one report.

    Args:
        args: the parsed command line.

    Returns:
        0 on success.

    Raises:
        CoaccelError: an architecture whose target has no report, a bad workload list.
    """
    from ..report.document import CSV_COLUMNS, ReportSettings, write_report
    from ..simulation import load_arch
    from ..spine.errors import CoaccelError
    from .args import comma_list

    loaded = [load_arch(a) for a in args.archs]  # every name checked before any work
    by_kind: dict[str, tuple[Any, list[Any]]] = {}
    for t, cfg in loaded:
        if t.report is None:
            raise CoaccelError(f"{cfg.name}: the {t.kind} target has no area/energy report")
        if not args.area_only and args.mode not in t.modes:
            raise CoaccelError(
                f"--mode {args.mode!r}: the {t.kind} target offers {', '.join(t.modes)}"
            )
        by_kind.setdefault(t.kind, (t, []))[1].append(cfg)
    workloads = tuple(comma_list(args.workloads, "--workload")) if args.workloads else ()
    run_ = Outputs(args, "coaccel report")
    settings = ReportSettings(
        workloads=workloads, scenario=args.scenario, mode=args.mode, node_nm=args.node,
        area_only=args.area_only, out_dir=run_.out,
    )  # fmt: skip
    parts = []
    for t, archs in by_kind.values():
        run_.progress(f"{t.kind}: {', '.join(a.name for a in archs)}")
        parts.append(t.report.build(archs, settings))
    paths = write_report(parts, run_.out, notes=_notes(args))
    rows = [
        dict(zip(CSV_COLUMNS, (p.kind, f.arch, f.workload, f.node_nm, f.quantity, f.component,
                               f.value, f.unit, f.sigma, f.source), strict=True))
        for p in parts for f in p.figures
    ]  # fmt: skip
    return run_.finish(paths, doc={"rows": rows})


def _notes(args: argparse.Namespace) -> list[str]:
    notes = [f"simulator mode '{args.mode}'"]
    if args.area_only:
        notes.append("area and resources only (no workload run)")
    return notes
