"""``coaccel sweep-report STORE --spec SPEC``: the report of a finished design-space sweep.

Reads the rows of a sweep (``coaccel sweep``) from its SQLite store, extracts each workload's
Pareto front over the objectives, selects one design (closest to the ideal point, the best of
one objective, or the user's ``--select``), re-evaluates the selected and front designs for
their cost breakdown, and writes one self-contained HTML page (interactive front), Markdown,
CSV and PNG charts (:mod:`coaccel.report.sweep`). ``coaccel report`` is a different command:
the area/energy report of named HBQ ASIC architectures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .args import add_out, add_output_flags, in_file, int_in

DEFAULT_OUT = Path("reports") / "sweep"

EPILOG = """\
examples:
  coaccel sweep arch_configs/sweeps/small_test.yaml --store runs.sqlite
  coaccel sweep-report runs.sqlite --spec arch_configs/sweeps/small_test.yaml --out reports/sweep
  coaccel sweep-report runs.sqlite --spec my.yaml --objectives edp_js,area_mm2 --rule best:edp_js
  coaccel sweep-report runs.sqlite --spec my.yaml --select 3fa2b1c0
Open reports/sweep/sweep_report.html in a browser (no network needed).
For the area/energy report of named HBQ ASIC architectures (no sweep), use coaccel report.
"""


def register(subparsers: Any) -> None:
    """Add the ``sweep-report`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "sweep-report",
        help="report of a finished sweep: Pareto fronts, selected design, cost breakdown (HTML)",
        description=(
            "Read a sweep's result store (coaccel sweep), extract each workload's Pareto front "
            "over the objectives, select a design, re-evaluate the selected and front designs "
            "for their area and energy by component (units, sources, fitted or predicted and "
            "validation error), and write one self-contained HTML page with an interactive "
            "front, plus Markdown, CSV and PNG charts. Not to be confused with 'coaccel "
            "report', the area/energy report of named HBQ ASIC architectures."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("store", metavar="STORE", type=Path, help="the sweep's SQLite store")
    p.add_argument(
        "--spec", required=True, metavar="SPEC", type=Path, help="the sweep spec YAML it ran"
    )
    add_out(p, DEFAULT_OUT)
    p.add_argument(
        "--objectives",
        metavar="M[:min|max],...",
        default=None,
        help="objectives of the fronts (default: the spec's; completed with energy_j, seconds "
        "and area_mm2 when it names fewer than two)",
    )
    p.add_argument(
        "--rule",
        default="ideal",
        metavar="RULE",
        help="how the design is selected: 'ideal' (default: the front point closest to the "
        "ideal point, objectives scaled to [0, 1] over the front) or 'best:<objective>'",
    )
    p.add_argument(
        "--select",
        default=None,
        metavar="POINT_ID",
        help="select this design instead (a point id or a unique prefix of one)",
    )
    p.add_argument(
        "--breakdowns",
        type=int_in(1, 1000),
        default=6,
        metavar="N",
        help="designs per workload re-evaluated for their cost breakdown: the selected one and "
        "the front points closest to the ideal point (default 6)",
    )
    add_output_flags(p, "print the selected designs and the files written as JSON")
    p.set_defaults(func=run, command="sweep-report")


def run(args: argparse.Namespace) -> int:
    """Analyse the store and write the report.

    Args:
        args: the parsed command line.

    Returns:
        0 on success.
    """
    from ..dse import Store, load_spec
    from ..dse.analysis import analyze, parse_objectives
    from ..report.sweep import write_sweep_report
    from ..spine.errors import CoaccelError
    from .args import Outputs

    if args.store.is_dir():
        raise CoaccelError(f"STORE {str(args.store)!r} is a folder: give the sweep's SQLite file")
    if not args.store.exists():
        raise CoaccelError(f"STORE {str(args.store)!r}: no such file (run coaccel sweep first)")
    in_file(args.store, "STORE")
    in_file(args.spec, "--spec")
    objectives = parse_objectives(args.objectives) if args.objectives else None
    # Read-only: the report never writes to the store it reads (a foreign file is refused
    # untouched, a store of an earlier coaccel is read as it is).
    store = Store(args.store, readonly=True)
    try:
        run_ = Outputs(args, "coaccel sweep-report")
        spec = load_spec(args.spec)
        a = analyze(
            spec,
            store,
            objectives=objectives,
            select=args.select,
            rule=args.rule,
            max_breakdowns=args.breakdowns,
        )
    finally:
        store.close()
    run_.progress(f"{len(a.fronts)} front(s) analysed; writing the report")
    paths = write_sweep_report(a, run_.out)
    html_path = paths[-1]
    lines = []
    for fa in a.fronts:
        if fa.selected is not None:
            r = fa.rows[fa.selected]
            lines.append(
                f"{fa.title}: {int(fa.front.sum())} front points of {len(fa.rows)}; "
                f"selected {r.point_id[:8]} {json.dumps(r.params, sort_keys=True)}"
            )
        else:
            lines.append(f"{fa.title}: no feasible point")
    lines.append(f"report: {html_path}")
    doc = {
        "selected": [
            {
                "workload": fa.workload,
                "stage": fa.stage,
                "point_id": fa.rows[fa.selected].point_id,
                "params": fa.rows[fa.selected].params,
                "selection": fa.selection,
            }
            for fa in a.fronts
            if fa.selected is not None
        ],
        "html": str(html_path),
    }
    settings = {
        "spec_digest": spec.digest,
        "base_config_digest": spec.base_digest,
        "seed": spec.spec.strategy.seed,
    }
    return run_.finish(paths, text="\n".join(lines), doc=doc, settings=settings)
