"""Synthesizing design points: one point into one table row, many points in parallel.

A point is synthesized into the view its synthesis set asks for (:data:`~coaccel.synth.VIEWS`):

* ``"asic+fpga"``: the ASIC view (``asic.ys``, or ``asic_array.ys`` for a point that keeps
  hierarchy) and the FPGA view (the point's ``fpga_template``), a row of
  :data:`~coaccel.synth.COLUMNS`;
* ``"fpga"``: the FPGA view only, with UltraRAM and the LUTs of distributed RAM counted, a row
  of :data:`~coaccel.synth.FPGA_COLUMNS`.

Scripts and logs go to ``<work_dir>/<point.slug>/``; with ``reuse_logs`` a finished log of
exactly the same script on sources of the same digest is read instead of running Yosys again.

Public: :func:`synthesize`, :func:`synthesize_all`, :func:`map_points`.
Internal: ``_asic_counts``, ``_fpga_only_counts``.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from ..spine.errors import CoaccelError
from .logs import parse_asic_hier_log, parse_asic_log, parse_fpga_log
from .point import SynthPoint
from .table import VIEWS
from .yosys import (
    asic_script,
    find_yosys,
    fpga_script,
    run_yosys,
    source_digest,
    yosys_version,
)

__all__ = ["map_points", "synthesize", "synthesize_all"]

Progress = Callable[[SynthPoint, dict[str, str], float], None]
"""``progress(point, row, seconds)``, called as each point finishes."""


def _asic_counts(
    point: SynthPoint, rtl_dir: Path, work: Path, yosys: str, timeout_s: float, reuse: bool,
    digest: str,
) -> dict[str, str]:  # fmt: skip
    """The ASIC-view columns of a row (``asic_*``, ``cmos_*``, ``sram_*``)."""
    log = run_yosys(yosys, asic_script(point, rtl_dir), work, "asic", timeout_s,
                    reuse=reuse, sources_key=digest)  # fmt: skip
    if point.hierarchical:
        asic = parse_asic_hier_log(log, point.top, point.macros, f"{point.slug} asic")
    else:
        asic = {
            **parse_asic_log(log, f"{point.slug} asic"),
            "sram_macros": 0,
            "sram_bits": 0,
            "asic_hierarchy": "",
        }
    # Both parsers count cmos_transistors as an int; the hierarchical one's dict also holds text.
    transistors = cast(int, asic["cmos_transistors"])
    per_mac = f"{transistors / point.macs:.2f}" if point.macs else ""
    return {
        "macs": str(point.macs),
        **{k: str(v) for k, v in asic.items()},
        "cmos_transistors_per_mac": per_mac,
    }


def _fpga_only_counts(fpga: dict[str, int]) -> dict[str, str]:
    """The FPGA-only columns from the parsed counts: 18 Kb halves become 36 Kb blocks."""
    half = fpga["fpga_bram18"]
    bram36 = f"{half / 2:g}" if half % 2 else str(half // 2)
    return {**{k: str(v) for k, v in fpga.items() if k != "fpga_bram18"}, "fpga_bram36": bram36}


def synthesize(
    point: SynthPoint,
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str,
    version: str,
    view: str = "asic+fpga",
    timeout_s: float = 3600.0,
    reuse_logs: bool = False,
) -> dict[str, str]:
    """Synthesize one point in a view and return its table row.

    Args:
        point: the design point.
        rtl_dir: the ``rtl/`` folder (sources and script templates).
        work_dir: scratch folder; scripts and logs go to ``work_dir / point.slug``.
        yosys: the Yosys executable (:func:`~coaccel.synth.find_yosys`).
        version: its version line (:func:`~coaccel.synth.yosys_version`), written on the row.
        view: ``"asic+fpga"`` or ``"fpga"`` (:data:`~coaccel.synth.VIEWS`).
        timeout_s: wall-clock limit per Yosys run, seconds.
        reuse_logs: reuse a finished log of exactly the same script run on sources of the same
            digest (:func:`~coaccel.synth.source_digest`, kept beside the log) instead of
            running Yosys again; a log without its digest is rerun.

    Returns:
        The row: a dict over the view's columns, values as CSV text.

    Raises:
        CoaccelError: an unknown view.
        SynthError: a run failed or a log lacks the statistics.
    """
    if view not in VIEWS:
        raise CoaccelError(f"unknown synthesis view {view!r}; valid: {', '.join(VIEWS)}")
    asic = view != "fpga"
    work = Path(work_dir) / point.slug
    # Digest first: a source edited while Yosys runs then leaves a row that reads as stale.
    digest = source_digest(point, rtl_dir, asic=asic)
    counts = (
        _asic_counts(point, rtl_dir, work, yosys, timeout_s, reuse_logs, digest) if asic else {}
    )
    log = run_yosys(yosys, fpga_script(point, rtl_dir), work, "fpga", timeout_s,
                    reuse=reuse_logs, sources_key=digest)  # fmt: skip
    fpga = parse_fpga_log(log, f"{point.slug} fpga", uram=not asic)
    counts.update({k: str(v) for k, v in fpga.items()} if asic else _fpga_only_counts(fpga))
    row = {
        "group": point.group,
        "top": point.top,
        "params": point.param_string,
        **counts,
        "rtl_digest": digest,
        "yosys_version": version,
    }
    return {c: row[c] for c in VIEWS[view]}


def synthesize_all(
    points: Sequence[SynthPoint],
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str | None = None,
    view: str = "asic+fpga",
    jobs: int = 1,
    timeout_s: float = 3600.0,
    reuse_logs: bool = False,
    progress: Progress | None = None,
) -> list[dict[str, str]]:
    """Synthesize several points (``jobs`` Yosys processes at a time), rows in input order.

    A point listed in several groups (same top and parameters) is synthesized once; each of
    its rows carries its own group.

    Args:
        points: the design points (:func:`~coaccel.synth.select_points`).
        rtl_dir: the ``rtl/`` folder.
        work_dir: scratch folder for scripts and logs.
        yosys: the Yosys executable (default :func:`~coaccel.synth.find_yosys`).
        view: ``"asic+fpga"`` or ``"fpga"`` (:func:`synthesize`).
        jobs: parallel Yosys processes.
        timeout_s: wall-clock limit per Yosys run, seconds.
        reuse_logs: reuse finished logs (:func:`synthesize`).
        progress: called as ``progress(point, row, seconds)`` when a point finishes.

    Returns:
        One row per point, in the order of ``points``.
    """
    exe = find_yosys(yosys)
    version = yosys_version(exe)
    unique: dict[tuple[str, tuple[tuple[str, int], ...]], SynthPoint] = {}
    for p in points:
        unique.setdefault((p.top, p.params), p)

    def one(p: SynthPoint) -> dict[str, str]:
        return synthesize(p, rtl_dir=rtl_dir, work_dir=work_dir, yosys=exe, version=version,
                          view=view, timeout_s=timeout_s, reuse_logs=reuse_logs)  # fmt: skip

    rows = map_points(list(unique.values()), one, jobs, progress)
    done = dict(zip(unique, rows, strict=True))
    return [{**done[(p.top, p.params)], "group": p.group} for p in points]


def map_points(
    points: Sequence[SynthPoint],
    run: Callable[[SynthPoint], dict[str, str]],
    jobs: int,
    progress: Progress | None = None,
) -> list[dict[str, str]]:
    """``run`` on every point, ``jobs`` at a time, reporting each finished row with its time.

    Args:
        points: the design points.
        run: ``run(point) -> row``.
        jobs: how many run at once (threads: each waits on its own Yosys process).
        progress: called as ``progress(point, row, seconds)`` when a point finishes.

    Returns:
        The rows, in the order of ``points``.
    """

    def timed(p: SynthPoint) -> dict[str, str]:
        t0 = time.perf_counter()
        row = run(p)
        if progress is not None:
            progress(p, row, time.perf_counter() - t0)
        return row

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(timed, points))
