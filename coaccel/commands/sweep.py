"""``coaccel sweep``: run a design-space sweep spec into a resumable SQLite store (docs/dse.md)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .args import add_output_flags, in_file, int_in, out_file

EPILOG = """\
examples:
  coaccel sweep arch_configs/sweeps/hbq_pe_psum.yaml --store hbq.sqlite
  coaccel sweep my_sweep.yaml --store runs.sqlite --workers 2 --export csv runs.csv
  coaccel sweep my_sweep.yaml --store runs.sqlite --scheduler tcp://scheduler-host:8786
Rerunning a spec on the same store evaluates only the points it does not hold yet, so an
interrupted sweep resumes where it stopped (stage by stage, for a spec with stages). Before any
work the sweep is sized: one over --max-points points (default 1,000,000) or estimated to grow
the store by more than 1 GB is refused unless --yes-large is given; the estimate is printed
when the sweep should take more than a few seconds. One sweep at a time writes to a store. Then
'coaccel sweep-report STORE --spec SPEC' writes the sweep's report (Pareto fronts, the selected
design's cost breakdown, one HTML page); 'coaccel report' is the area/energy report of named
architectures. 'coaccel sweep --knobs' lists the configuration keys each target suggests
sweeping.
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
            "Expand a sweep spec (architecture parameters x workloads; grid, random, Latin "
            "hypercube or an NSGA-II search; filtered by constraints; optionally in stages of "
            "rising fidelity and with accuracy scored per number format), simulate and cost "
            "every point not yet in the store on a local process pool or a Dask cluster, and "
            "write the rows to an SQLite store as each batch finishes."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "spec", metavar="SPEC", nargs="?", help="sweep spec YAML (arch_configs/sweeps/*.yaml)"
    )
    p.add_argument("--store", metavar="PATH", type=Path, help="SQLite result store (required)")
    p.add_argument(
        "--knobs",
        metavar="KIND",
        nargs="?",
        const="",
        default=None,
        help="list the configuration keys worth sweeping, of every target or of one kind, and exit",
    )
    p.add_argument(
        "--workers",
        metavar="N",
        type=int_in(1, 1024),
        default=1,
        help="local processes (default 1; ignored with a Dask scheduler)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="evaluate on the Dask cluster of this scheduler (tcp://host:port); overrides the "
        "spec's scheduler: key",
    )
    p.add_argument(
        "--batch-size",
        metavar="N",
        type=int_in(1, 100000),
        default=None,
        help="points per task (default: about 8 tasks per worker, at most 64 points each)",
    )
    p.add_argument(
        "--max-points",
        metavar="N",
        type=int_in(1, None),
        default=None,
        help="refuse a sweep of more points (first stage, before constraints, every workload; "
        "default 1,000,000)",
    )
    p.add_argument(
        "--yes-large",
        action="store_true",
        help="run the sweep whatever its size (no point or store-size limit)",
    )
    p.add_argument(
        "--export",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        help="after the sweep, export every stored row: FORMAT is csv or parquet",
    )
    add_output_flags(p, json_help="print the sweep's summary as JSON")
    p.set_defaults(func=run, command="sweep")


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressBar:
    """A one-line live progress bar on a terminal: stage, bar, points done and failed, rate, ETA.

    Redraws at most ``fps`` times a second (and always on a batch that ends a stage).

    Args:
        stream: the terminal (stderr).
        fps: redraws per second at most.
    """

    def __init__(self, stream: TextIO, fps: float = 10.0) -> None:
        self.stream = stream
        self.min_dt = 1.0 / fps
        self._last = 0.0
        self._drawn = False
        self._stage = ""

    def line(self, p: Any, width: int) -> str:
        """The bar's text for a :class:`~coaccel.dse.Progress`, fitted to ``width`` columns."""
        done = p.done + p.skipped
        frac = min(1.0, done / p.total) if p.total else 1.0
        eta = "--:--" if p.eta_s is None else _clock(p.eta_s)
        stage = f"{p.stage} " if p.stage else ""
        tail = (
            f" {done}/{p.total} ({p.failed} failed, {p.skipped} stored) "
            f"{p.rate_per_s:.1f} pts/s ETA {eta}"
        )
        room = max(10, min(40, width - len(stage) - len(tail) - 3))
        fill = int(round(frac * room))
        return f"{stage}[{'#' * fill}{'.' * (room - fill)}]{tail}"[: max(20, width - 1)]

    def __call__(self, p: Any) -> None:
        now = time.monotonic()
        new_stage = p.stage != self._stage
        finished = p.done + p.skipped >= p.total
        if new_stage and self._drawn:
            self.stream.write("\n")
        self._stage = p.stage
        if not (finished or new_stage) and now - self._last < self.min_dt:
            return
        self._last = now
        width = shutil.get_terminal_size((100, 20)).columns
        self.stream.write("\r" + self.line(p, width).ljust(width - 1))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the bar's line."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


class ProgressLog:
    """Plain progress lines for a stream that is not a terminal (a log file, a pipe).

    Writes one line every ``interval_s`` seconds (none for a sweep that ends sooner): stage,
    points done and failed, points stored before, rate and ETA.

    Args:
        stream: where to write (stderr).
        interval_s: seconds between lines.
    """

    def __init__(self, stream: TextIO, interval_s: float = 30.0) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self._next = time.monotonic() + interval_s

    def __call__(self, p: Any) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval_s
        eta = "--:--" if p.eta_s is None else _clock(p.eta_s)
        stage = f" {p.stage}:" if p.stage else ""
        self.stream.write(
            f"coaccel sweep:{stage} {p.done + p.skipped}/{p.total} points ({p.failed} failed, "
            f"{p.skipped} stored), {p.rate_per_s:.1f} points/s, ETA {eta}\n"
        )
        self.stream.flush()

    def close(self) -> None:
        """Nothing to end (every line is complete)."""


def estimate_line(est: Any) -> str:
    """The estimate of a sweep (:class:`~coaccel.dse.SweepEstimate`) as one line."""
    from ..dse.driver import format_bytes, format_duration

    kept = f", about {est.kept:,} after constraints" if est.kept != est.points else ""
    stored = f", {est.stored:,} stored" if est.stored else ""
    timed = "a probe" if est.timed_by == "probe" else "the rows stored"
    if est.workers is None:
        when = f"about {format_duration(est.seconds)} of CPU time, shared by the cluster"
    else:
        s = "s" if est.workers > 1 else ""
        when = f"about {format_duration(est.seconds)} on {est.workers} worker{s}"
    return (
        f"about {est.todo:,} points to evaluate ({est.points:,} in the sweep{kept}{stored}) at "
        f"{format_duration(est.per_point_s)} a point (timed on {timed}): {when}; the store "
        f"grows by about {format_bytes(est.store_bytes)}"
    )


def format_knobs(kind: str = "") -> str:
    """The knobs of every target (or of one kind): key, what it changes, example values.

    Raises:
        ConfigError: an unknown kind.
    """
    from ..simulation import kinds, target

    lines = []
    for k in [kind] if kind else list(kinds()):
        t = target(k)
        lines.append(f"{t.kind}: {t.description}")
        if not t.knobs:
            lines.append("  (no knobs declared: any key of its architecture files can be swept)")
        w = max((len(n.key) for n in t.knobs), default=0)
        for n in t.knobs:
            lines.append(f"  {n.key:<{w}}  {n.help}" + (f"; e.g. {n.example}" if n.example else ""))
    return "\n".join(lines)


def _too_large(reason: str, spec: Any, *, store_limit: bool = False) -> str:
    """The refusal of a sweep over a size limit, with the options that run it anyway."""
    from ..dse import count_points

    narrow = "narrow the parameters (or sample them: strategy random or lhs)"
    if store_limit:
        return f"{reason}; {narrow}, or run it anyway with --yes-large (no size limit)"
    return (
        f"{reason}; {narrow}, or run it anyway with --max-points {count_points(spec)} (the "
        "point limit) or --yes-large (no size limit)"
    )


def _check_store(store: Path) -> None:
    """Check, before any work, that ``--store`` is a sweep store this command may write.

    Raises:
        CoaccelError: anything but a sweep store (left untouched), or a store or folder that
            cannot be written.
    """
    from ..dse.store import check_writable, inspect_store

    kind = inspect_store(store)  # anything but a sweep store is refused, untouched
    if kind in ("missing", "empty"):
        out_file(store, "--store")
    else:
        check_writable(store)


def _export_target(export: Sequence[str] | None, store: Path) -> tuple[str, Path] | None:
    """Check ``--export FORMAT PATH`` before any work.

    Args:
        export: the option's two values (None: no export).
        store: the ``--store`` path, which the export must not overwrite.

    Returns:
        ``(format, path)``, or None without ``--export``.

    Raises:
        CoaccelError: an unknown format, parquet without pyarrow, a path that is not a regular
            file (or cannot be written), or the store itself.
    """
    from ..dse.store import not_regular
    from ..spine.errors import CoaccelError

    if not export:
        return None
    fmt, path = export
    if fmt not in ("csv", "parquet"):
        raise CoaccelError(f"--export {fmt!r}: valid formats: csv, parquet")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CoaccelError("--export parquet needs pyarrow: pip install pyarrow") from None
    export_path = Path(path)
    what = not_regular(export_path)
    if what is not None and what != "a folder":
        raise CoaccelError(f"--export {path!r} is {what}, not a regular file")
    if export_path.resolve() == store.resolve():
        raise CoaccelError(f"--export {path!r} is the store itself; give another file")
    return fmt, out_file(export_path, "--export")


def _sized_spec(spec_path: Path, max_points: int | None) -> Any:
    """Load the spec once its size is known to be within ``max_points`` (None: no limit).

    Returns:
        The loaded spec (:func:`coaccel.dse.load_spec`).

    Raises:
        CoaccelError: a sweep over the limit (with the options that run it anyway), or a bad
            spec.
    """
    from ..dse import SweepSpec, load_spec
    from ..dse.driver import size_problem
    from ..spine.config import load_config
    from ..spine.errors import CoaccelError

    # Counted from the schema alone, before the spec's checks list every value of a range.
    raw = load_config(spec_path, SweepSpec)
    problem = size_problem(raw, max_points=max_points)
    if problem is not None:
        raise CoaccelError(_too_large(problem, raw))
    return load_spec(spec_path)


def _estimate_printer(store: Path, quiet: bool) -> Callable[[Any], None]:
    """The sweep's ``on_estimate`` callback: the estimate line and a disk-space warning.

    Args:
        store: the store, whose file system's free space the estimate is checked against.
        quiet: print nothing.

    Returns:
        A callback taking a :class:`~coaccel.dse.SweepEstimate`; it prints on stderr the
        estimate of a sweep that should take 5 s or more, and a warning when the store would
        outgrow its file system's free space.
    """

    def on_estimate(est: Any) -> None:
        if quiet:
            return
        if est.seconds >= 5.0:
            print(f"coaccel sweep: {estimate_line(est)}", file=sys.stderr, flush=True)
        free = shutil.disk_usage(store.absolute().parent).free
        if est.store_bytes > free:
            from ..dse.driver import format_bytes

            print(
                f"coaccel sweep: warning: the store grows by about "
                f"{format_bytes(est.store_bytes)} but its file system has "
                f"{format_bytes(free)} free; the sweep stops when it is full (the rows stored "
                "stay; rerun to resume once there is room)",
                file=sys.stderr,
                flush=True,
            )

    return on_estimate


def _print_json(s: Any, store: Path, exported: Path | None) -> None:
    """Print the sweep's summary (:class:`~coaccel.dse.SweepSummary`) as one JSON document."""
    doc = dataclasses.asdict(s) | {
        "store": str(store),
        "export": None if exported is None else str(exported),
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _print_summary(s: Any, store: Any, store_path: Path, exported: Path | None, say: bool) -> None:
    """Print the sweep's summary: the point counts, then (unless ``say`` is False) each stage's,
    the accuracy study's data and the export.

    Args:
        s: the sweep's :class:`~coaccel.dse.SweepSummary`.
        store: the open :class:`~coaccel.dse.Store` (its row count is the export's).
        store_path: its path, as given.
        exported: the exported file (None: no export).
        say: print the informational lines after the first.
    """
    print(
        f"{s.total} points: {s.skipped} already stored, {s.evaluated} evaluated "
        f"({s.failed} failed) in {s.elapsed_s:.1f} s -> {store_path}"
    )
    if say and len(s.stages) > 1:
        for st in s.stages:
            print(
                f"  stage {st.name} ({st.mode}): {st.total} points, {st.skipped} stored, "
                f"{st.evaluated} evaluated ({st.failed} failed)"
            )
    if say and s.accuracy_data is not None:
        if s.accuracy_data.startswith("perplexity:"):
            what = f"{s.accuracy_data.partition(':')[2]} perplexity on real text"
        elif s.accuracy_data == "real":
            what = "GEMM-output SQNR on all-MiniLM-L6-v2 weights and activations"
        else:
            what = "GEMM-output SQNR on a seeded synthetic GEMM problem"
        print(
            f"  accuracy: {what}; {s.accuracy_studies} format "
            "setting(s) scored now, the others from the store's cache"
        )
    if say and exported is not None:
        print(f"exported {len(store)} rows -> {exported}")


def _sweep(
    spec: Any,
    args: argparse.Namespace,
    max_points: int | None,
    max_store_bytes: int | None,
    export: tuple[str, Path] | None,
) -> Any:
    """Run the sweep into the store, export the rows and print the summary.

    Args:
        spec: the loaded spec. args: the command's options.
        max_points: the point limit (None: none). max_store_bytes: the store-size limit.
        export: ``(format, path)`` of ``--export`` (None: no export).

    Returns:
        The sweep's :class:`~coaccel.dse.SweepSummary`.

    Raises:
        CoaccelError: the sweep is over a size limit (found once the points are counted).
    """
    from ..dse import Store, SweepTooLarge, run_sweep
    from ..spine.errors import CoaccelError

    bar: ProgressBar | ProgressLog | None = None
    if not args.quiet:
        bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else ProgressLog(sys.stderr)
    with Store(args.store) as store:
        try:
            s = run_sweep(
                spec,
                store,
                workers=args.workers,
                batch_size=args.batch_size,
                progress=bar,
                scheduler=args.scheduler,
                max_points=max_points,
                max_store_bytes=max_store_bytes,
                on_estimate=_estimate_printer(args.store, args.quiet),
            )
        except SweepTooLarge as e:
            store_limit = e.estimate is not None
            raise CoaccelError(_too_large(e.reason, spec.spec, store_limit=store_limit)) from None
        finally:
            if bar is not None:
                bar.close()
        exported = None
        if export is not None:
            fmt, path = export
            exported = (store.to_csv if fmt == "csv" else store.to_parquet)(path)
        if args.json:
            _print_json(s, args.store, exported)
        else:
            _print_summary(s, store, args.store, exported, say=not args.quiet)
    return s


def run(args: argparse.Namespace) -> int:
    """Run the sweep; returns 0 when points were evaluated (failed points are recorded in the
    store), or ``--knobs``.

    Raises:
        CoaccelError: bad options, or every point evaluated failed (with ``--json`` the summary
            is printed first, so a script reads it and the exit status both).
    """
    from ..dse import DEFAULT_MAX_POINTS, DEFAULT_MAX_STORE_BYTES
    from ..dse.spec import is_scheduler_address
    from ..spine.errors import CoaccelError

    if args.knobs is not None:
        print(format_knobs(args.knobs))
        return 0
    if args.spec is None or args.store is None:
        raise CoaccelError("SPEC and --store are required (or --knobs)")

    spec_path = in_file(Path(args.spec), "SPEC")
    _check_store(args.store)
    export = _export_target(args.export, args.store)
    if args.scheduler is not None and not is_scheduler_address(args.scheduler):
        raise CoaccelError(
            f"--scheduler {args.scheduler!r}: not a Dask scheduler address; give tcp://host:port"
        )
    max_points = None if args.yes_large else (args.max_points or DEFAULT_MAX_POINTS)
    max_store_bytes = None if args.yes_large else DEFAULT_MAX_STORE_BYTES
    spec = _sized_spec(spec_path, max_points)
    s = _sweep(spec, args, max_points, max_store_bytes, export)
    if s.evaluated and s.failed == s.evaluated:
        raise CoaccelError(
            f"every one of the {s.evaluated} points evaluated failed (their reasons are in "
            f"{args.store}; coaccel sweep-report {args.store} --spec {args.spec} lists them)"
        )
    return 0
