"""``coaccel sweep``: run a design-space sweep spec into a resumable SQLite store (docs/dse.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._args import int_in, out_file

EPILOG = """\
examples:
  coaccel sweep arch_configs/sweeps/hbq_pe_psum.yaml --store hbq.sqlite
  coaccel sweep my_sweep.yaml --store runs.sqlite --workers 2 --export csv runs.csv
Rerunning a spec on the same store evaluates only the points it does not hold yet, so an
interrupted sweep resumes where it stopped. Then 'coaccel sweep-report STORE --spec SPEC'
writes the sweep's report (Pareto fronts, the selected design's cost breakdown, one HTML page);
'coaccel report' is the area/energy report of named HBQ ASIC architectures.
"""


def register(subparsers: Any) -> None:
    """Add the ``sweep`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "sweep",
        help="run a design-space sweep (simulate + cost every point) into a result store",
        description=(
            "Expand a sweep spec (architecture parameters x workloads; grid, random or Latin "
            "hypercube; filtered by constraints), simulate and cost every point not yet in the "
            "store on a local process pool, and write the rows to an SQLite store as each batch "
            "finishes."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", metavar="SPEC", help="sweep spec YAML (arch_configs/sweeps/*.yaml)")
    p.add_argument("--store", metavar="PATH", required=True, type=Path, help="SQLite result store")
    p.add_argument(
        "--workers", metavar="N", type=int_in(1, 1024), default=1, help="processes (default 1)"
    )
    p.add_argument(
        "--batch-size",
        metavar="N",
        type=int_in(1, 100000),
        default=None,
        help="points per task (default: about 8 tasks per worker, at most 64 points each)",
    )
    p.add_argument(
        "--export",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        help="after the sweep, export every stored row: FORMAT is csv or parquet",
    )
    p.set_defaults(func=run, command="sweep")


def _progress_line(p: Any) -> None:
    eta = "?" if p.eta_s is None else f"{p.eta_s:.0f} s"
    print(
        f"\r  {p.done + p.skipped}/{p.total} points ({p.failed} failed, {p.skipped} stored "
        f"before), {p.rate_per_s:.1f} points/s, ETA {eta}   ",
        end="",
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    """Run the sweep; returns 0 (failed points are recorded in the store, not an error)."""
    from ..dse import Store, load_spec, run_sweep
    from ..errors import CoaccelError

    export = None
    if args.export:
        fmt, path = args.export
        if fmt not in ("csv", "parquet"):
            raise CoaccelError(f"--export {fmt!r}: valid formats: csv, parquet")
        if fmt == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise CoaccelError("--export parquet needs pyarrow: pip install pyarrow") from None
        export = (fmt, out_file(Path(path), "--export"))
    out_file(args.store, "--store")
    spec = load_spec(args.spec)
    tty = sys.stderr.isatty()
    with Store(args.store) as store:
        s = run_sweep(
            spec,
            store,
            workers=args.workers,
            batch_size=args.batch_size,
            progress=_progress_line if tty else None,
        )
        if tty:
            print(file=sys.stderr)
        print(
            f"{s.total} points: {s.skipped} already stored, {s.evaluated} evaluated "
            f"({s.failed} failed) in {s.elapsed_s:.1f} s -> {args.store}"
        )
        if export is not None:
            fmt, path = export
            (store.to_csv if fmt == "csv" else store.to_parquet)(path)
            print(f"exported {len(store)} rows -> {path}")
    return 0
