"""Fit a GPU architecture config to calibration measurements (``coaccel gpu-calibrate``).

The measurements are the CSV that ``benchmarks/gpu_calibration.py`` writes (columns
:data:`CSV_COLUMNS`, schema version :data:`CSV_SCHEMA_VERSION`) or a CSV of the same columns
transcribed from published microbenchmarks (``arch_configs/gpu/measured/``, shipped with the
package). Pure computation: no printing, no files.

* :func:`read_calibration_csv` — parse and check the CSV (one error naming file, line, column,
  value and what is valid);
* :func:`fit_parameters` — closed-form estimates of the config's efficiency, latency and link
  parameters from the rows ([OURS] estimators, docs/gpu_decode.md, Calibration):

  - ``dram.efficiency``: the whole curve scaled so that its last point is the DRAM read plateau
    (median bandwidth of working sets >= 4 x the L2) over the peak;
  - ``l2.hit_bw_gb_per_s``: median bandwidth of working sets from 2 MiB to half the L2;
  - ``l2.effective_capacity_mib``: the largest working set still within 90 % of that plateau;
  - ``sm.l1_latency_cycles``, ``l2.near_latency_cycles``, ``l2.far_latency_cycles``,
    ``dram.latency_ns``: medians of the pointer-chase latency over working sets <= 64 KiB,
    1 MiB ... 0.3 x L2, 0.7 ... 0.95 x L2 and >= 4 x L2 (nanoseconds turned into cycles at the
    config's SM clock, so that the simulated time matches the measured one);
  - ``host_link.copy_fixed_us`` and ``host_link.efficiency``: a least-squares fit of
    ``t = t0 + n / bw`` to the pinned host-to-device copies, weighted by 1/t (relative error);
    the efficiency curve becomes flat at ``bw / raw bandwidth`` (the fixed cost accounts for
    small copies); ``host_link.d2h_efficiency_factor`` and ``host_link.pageable_efficiency``
    from the ratios of the device-to-host and pageable plateaus to it;

* :func:`predict` — the simulator's value for a row (``coaccel.simulate`` on the matching
  microbenchmark of ``coaccel.models.gpu.microbench``);
* :func:`fit_gpu` — both: the fitted config and the error of every row before and after.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from coaccel.spine.config import FrozenMap, override
from coaccel.spine.errors import CoaccelError

__all__ = [
    "CSV_COLUMNS",
    "CSV_SCHEMA_VERSION",
    "EXPERIMENTS",
    "CalibrationFit",
    "CalibrationRow",
    "FittedParam",
    "GroupError",
    "RowError",
    "fit_gpu",
    "fit_parameters",
    "measured_value",
    "predict",
    "read_calibration_csv",
    "PREDICTED",
    "row_fields",
    "select_rows",
    "tier_for",
]

CSV_SCHEMA_VERSION = 1
"""Version of the calibration CSV layout (``benchmarks/gpu_calibration.py``)."""

CSV_COLUMNS = (
    "experiment",
    "device",
    "size_bytes",
    "ctas",
    "batch",
    "context_tokens",
    "block_tokens",
    "keep_ratio",
    "repeats",
    "time_s",
    "bytes_moved",
    "bw_bytes_per_s",
    "latency_ns",
    "sm_clock_mhz",
    "source",
    "note",
)
"""Columns of the calibration CSV, in order (docs/gpu_decode.md has their units)."""

EXPERIMENTS = (
    "stream_read",
    "stream_read_ctas",
    "stream_read_torch",
    "stream_copy",
    "pointer_chase",
    "h2d_pinned",
    "d2h_pinned",
    "h2d_pageable",
    "d2h_pageable",
    "h2d_pinned_wall",
    "bidir_h2d",
    "bidir_d2h",
    "zero_copy_256B",
    "zero_copy_16KiB",
    "decode_attention",
    "block_gather",
    "overlap_kernel_alone",
    "overlap_kernel_with_copy",
    "overlap_copy_alone",
    "overlap_copy_with_kernel",
)
"""Values of the ``experiment`` column."""

_INT = ("size_bytes", "ctas", "batch", "context_tokens", "block_tokens", "repeats", "bytes_moved")
_FLOAT = ("keep_ratio", "time_s", "bw_bytes_per_s", "latency_ns", "sm_clock_mhz")

KIB, MIB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class CalibrationRow:
    """One measured point (the CSV's columns; units in docs/gpu_decode.md).

    Attributes:
        experiment: one of :data:`EXPERIMENTS`. device: the GPU (or published system).
        size_bytes: working set / transfer size / KV bytes, B. ctas: CTAs (0: library's).
        batch: decode batch. context_tokens: decode context. block_tokens: gathered block.
        keep_ratio: kept fraction. repeats: timed repetitions. time_s: median time, s.
        bytes_moved: bytes per repetition, B. bw_bytes_per_s: bandwidth, B/s.
        latency_ns: pointer-chase latency, ns. sm_clock_mhz: SM clock, MHz (0: unknown).
        source: provenance. note: how to read the row. line: line in the file.
    """

    experiment: str
    device: str
    size_bytes: int
    ctas: int
    batch: int
    context_tokens: int
    block_tokens: int
    keep_ratio: float
    repeats: int
    time_s: float
    bytes_moved: int
    bw_bytes_per_s: float
    latency_ns: float
    sm_clock_mhz: float
    source: str
    note: str
    line: int = 0


def read_calibration_csv(path: str | Path) -> tuple[CalibrationRow, ...]:
    """Read and check a calibration CSV.

    Args:
        path: the CSV file.

    Returns:
        Its rows, in file order.

    Raises:
        CoaccelError: a missing file, a header that is not :data:`CSV_COLUMNS`, an unknown
            experiment, a value of the wrong type or sign (file, line, column, value and
            what is valid in the message).
    """
    p = Path(path)
    if not p.is_file():
        raise CoaccelError(f"{p}: no such calibration CSV")
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != CSV_COLUMNS:
            raise CoaccelError(
                f"{p}: line 1: header {header!r} is not the calibration CSV schema "
                f"(version {CSV_SCHEMA_VERSION}): {','.join(CSV_COLUMNS)}"
            )
        rows = []
        for lineno, rec in enumerate(reader, start=2):
            if not rec or all(not c.strip() for c in rec):
                continue
            if len(rec) != len(CSV_COLUMNS):
                raise CoaccelError(
                    f"{p}: line {lineno}: {len(rec)} fields, expected {len(CSV_COLUMNS)}"
                )
            rows.append(_parse_row(p, lineno, dict(zip(CSV_COLUMNS, rec, strict=True))))
    if not rows:
        raise CoaccelError(f"{p}: no data rows")
    return tuple(rows)


def _parse_row(p: Path, lineno: int, rec: dict[str, str]) -> CalibrationRow:
    exp = rec["experiment"].strip()
    if exp not in EXPERIMENTS:
        raise CoaccelError(
            f"{p}: line {lineno}: experiment {exp!r} is unknown; valid: {', '.join(EXPERIMENTS)}"
        )
    out: dict[str, Any] = {"experiment": exp, "line": lineno}
    for col in _INT:
        text = rec[col].strip()
        try:
            v = int(text)
        except ValueError:
            raise CoaccelError(f"{p}: line {lineno}: {col} = {text!r} is not an integer") from None
        if v < 0:
            raise CoaccelError(f"{p}: line {lineno}: {col} = {v} must be >= 0")
        out[col] = v
    for col in _FLOAT:
        text = rec[col].strip()
        try:
            x = float(text)
        except ValueError:
            raise CoaccelError(f"{p}: line {lineno}: {col} = {text!r} is not a number") from None
        if not math.isfinite(x) or x < 0:
            raise CoaccelError(f"{p}: line {lineno}: {col} = {text!r} must be a finite number >= 0")
        out[col] = x
    out["device"] = rec["device"].strip()
    out["source"] = rec["source"].strip()
    out["note"] = rec["note"].strip()
    if not out["source"]:
        raise CoaccelError(f"{p}: line {lineno}: source is empty; every row names its source")
    return CalibrationRow(**out)


# -- closed-form estimates --------------------------------------------------------------------


@dataclass(frozen=True)
class FittedParam:
    """One fitted config value.

    Attributes:
        key: dotted config key. before: the config's value. after: the fitted value.
        unit: unit of both. rows: measured rows it was estimated from. how: the estimator.
    """

    key: str
    before: float
    after: float
    unit: str
    rows: int
    how: str


_BW_ROWS = ("stream_read", "stream_read_torch")


def _bw(r: CalibrationRow) -> float:
    if r.bw_bytes_per_s > 0:
        return r.bw_bytes_per_s
    return r.bytes_moved / r.time_s if r.time_s > 0 else 0.0


def _weighted_link_fit(rows: Sequence[CalibrationRow]) -> tuple[float, float] | None:
    """(t0 s, bandwidth B/s) minimising sum(((t0 + n / bw - t) / t)^2); None if degenerate."""
    pts = [(r.size_bytes, r.time_s) for r in rows if r.size_bytes > 0 and r.time_s > 0]
    if len(pts) < 2:
        return None
    n = np.array([p[0] for p in pts], dtype=np.float64)
    t = np.array([p[1] for p in pts], dtype=np.float64)
    a = np.stack([1.0 / t, n / t], axis=1)  # (t0 + c n) / t = 1
    sol, *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    t0, c = float(sol[0]), float(sol[1])
    if c <= 0:
        return None
    if t0 < 0:  # no fixed cost visible: bandwidth alone, least squares in relative error
        c = float(np.sum(n / t) / np.sum((n / t) ** 2))
        t0 = 0.0
    return t0, 1.0 / c


class _Fit:
    """What :func:`fit_parameters` collects: the changes, one record per changed key, notes."""

    def __init__(self) -> None:
        self.changes: dict[str, Any] = {}
        self.params: list[FittedParam] = []
        self.notes: list[str] = []

    def put(
        self, key: str, before: float, after: float, unit: str, n: int, how: str,
        value: Any = None,
    ) -> None:  # fmt: skip
        self.changes[key] = after if value is None else value
        self.params.append(FittedParam(key, float(before), float(after), unit, n, how))


def fit_parameters(
    arch: Any, rows: Sequence[CalibrationRow]
) -> tuple[dict[str, Any], list[FittedParam], list[str]]:
    """Closed-form estimates of the config's parameters from calibration rows.

    Three independent groups: DRAM efficiency and L2 bandwidth/capacity from streaming reads,
    per-level latencies from pointer chases, and the host link from timed copies.

    Args:
        arch: the GPU config to start from (a ``GpuArchConfig``).
        rows: the measured rows (any experiments; those that inform no parameter are
            ignored).

    Returns:
        ``(changes, params, notes)``: dotted key -> new value for
        :func:`coaccel.config.override`, one :class:`FittedParam` per changed key, and notes
        on what could not be fitted (no rows for it).
    """
    fit = _Fit()
    _fit_bandwidths(arch, rows, fit)
    _fit_latencies(arch, rows, fit)
    _fit_host_link(arch, rows, fit)
    return fit.changes, fit.params, fit.notes


def _fit_bandwidths(arch: Any, rows: Sequence[CalibrationRow], fit: _Fit) -> None:
    """DRAM efficiency from working sets >= 4 x L2; L2 bandwidth and effective capacity."""
    l2_cap = arch.l2.capacity_mib * MIB
    bw_rows = [r for r in rows if r.experiment in _BW_ROWS and _bw(r) > 0]
    dram_rows = [r for r in bw_rows if r.size_bytes >= 4 * l2_cap]
    if dram_rows:
        plateau = statistics.median(_bw(r) for r in dram_rows)
        peak = arch.dram.bw_gb_per_s * 1e9
        last = arch.dram.efficiency[-1].efficiency
        scale = plateau / peak / last
        curve = [
            {"transfer_bytes": p.transfer_bytes, "efficiency": min(1.0, p.efficiency * scale)}
            for p in arch.dram.efficiency
        ]
        fit.put(
            "dram.efficiency",
            last,
            min(1.0, last * scale),
            "",
            len(dram_rows),
            "median read bandwidth of working sets >= 4 x L2 / peak; curve scaled",
            value=curve,
        )
    else:
        fit.notes.append("no streaming rows with a working set >= 4 x L2: DRAM efficiency kept")
    l2_rows = [r for r in bw_rows if 2 * MIB <= r.size_bytes <= 0.5 * l2_cap]
    if l2_rows:
        l2_bw = statistics.median(_bw(r) for r in l2_rows)
        fit.put(
            "l2.hit_bw_gb_per_s",
            arch.l2.hit_bw_gb_per_s,
            l2_bw / 1e9,
            "GB/s",
            len(l2_rows),
            "median read bandwidth of working sets 2 MiB ... L2 / 2",
        )
        inside = [r for r in bw_rows if r.size_bytes <= l2_cap and _bw(r) >= 0.9 * l2_bw]
        if inside:
            cap = min(max(r.size_bytes for r in inside) / MIB, arch.l2.capacity_mib)
            fit.put(
                "l2.effective_capacity_mib",
                arch.l2.effective_capacity_mib,
                cap,
                "MiB",
                len(bw_rows),
                "largest working set within 90 % of the L2 plateau",
            )
    else:
        fit.notes.append("no streaming rows of 2 MiB ... L2/2: L2 bandwidth and capacity kept")


def _fit_latencies(arch: Any, rows: Sequence[CalibrationRow], fit: _Fit) -> None:
    """L1, near/far L2 and DRAM latencies from pointer chases (medians per size range)."""
    l2_cap = arch.l2.capacity_mib * MIB
    chase = [r for r in rows if r.experiment == "pointer_chase" and r.latency_ns > 0]
    f_mhz = arch.sm.freq_mhz

    def lat(lo: float, hi: float) -> tuple[float, int] | None:
        sel = [r.latency_ns for r in chase if lo <= r.size_bytes <= hi]
        return (statistics.median(sel), len(sel)) if sel else None

    levels = (
        ("sm.l1_latency_cycles", arch.sm.l1_latency_cycles, 0, 64 * KIB, "<= 64 KiB"),
        ("l2.near_latency_cycles", arch.l2.near_latency_cycles, MIB, 0.3 * l2_cap,
         "1 MiB ... 0.3 x L2"),
        ("l2.far_latency_cycles", arch.l2.far_latency_cycles, 0.7 * l2_cap, 0.95 * l2_cap,
         "0.7 ... 0.95 x L2"),
    )  # fmt: skip
    fitted_cycles: dict[str, int] = {}
    for key, before, lo, hi, where in levels:
        got = lat(lo, hi)
        if got is None:
            fit.notes.append(f"no pointer-chase rows of {where}: {key} kept")
            continue
        ns, n = got
        cyc = max(0, round(ns * f_mhz / 1e3))
        fitted_cycles[key] = cyc
        fit.put(
            key,
            before,
            cyc,
            "cycles",
            n,
            f"median pointer-chase latency of {where}, ns x {f_mhz:g} MHz",
            value=cyc,
        )
    near = fitted_cycles.get("l2.near_latency_cycles", arch.l2.near_latency_cycles)
    far = fitted_cycles.get("l2.far_latency_cycles", arch.l2.far_latency_cycles)
    if far < near:  # keep the config's rule far >= near
        fit.changes["l2.far_latency_cycles"] = near
        fit.notes.append(f"far-L2 latency {far} < near {near} cycles: set to the near latency")
    got = lat(4 * l2_cap, math.inf)
    if got is None:
        fit.notes.append("no pointer-chase rows >= 4 x L2: dram.latency_ns kept")
    else:
        fit.put(
            "dram.latency_ns",
            arch.dram.latency_ns,
            got[0],
            "ns",
            got[1],
            "median pointer-chase latency of working sets >= 4 x L2",
        )


def _fit_host_link(arch: Any, rows: Sequence[CalibrationRow], fit: _Fit) -> None:
    """Host-link fixed cost and efficiency from pinned H2D copies; D2H and pageable ratios."""
    link = arch.host_link
    h2d = [r for r in rows if r.experiment == "h2d_pinned"] or [
        r for r in rows if r.experiment == "h2d_pinned_wall"
    ]
    fitted = _weighted_link_fit(h2d)
    if fitted is None:
        fit.notes.append("fewer than 2 pinned host-to-device copies: host link kept")
        return
    t0, bw = fitted
    fit.put(
        "host_link.copy_fixed_us",
        link.copy_fixed_us,
        t0 * 1e6,
        "us",
        len(h2d),
        "t = t0 + n / bw, least squares in relative error over pinned H2D copies",
    )
    eff = min(1.0, bw / link.bw_bytes_per_s("h2d"))
    curve = [{"transfer_bytes": p.transfer_bytes, "efficiency": eff} for p in link.efficiency]
    fit.put(
        "host_link.efficiency",
        link.efficiency[-1].efficiency,
        eff,
        "",
        len(h2d),
        f"fitted plateau {bw / 1e9:.4g} GB/s / raw {link.h2d_bw_gb_per_s:g} GB/s (flat curve)",
        value=curve,
    )
    for exp, key, before in (
        ("d2h_pinned", "host_link.d2h_efficiency_factor", link.d2h_efficiency_factor),
        ("h2d_pageable", "host_link.pageable_efficiency", link.pageable_efficiency),
    ):
        other = _weighted_link_fit([r for r in rows if r.experiment == exp])
        if other is None:
            continue
        ratio = min(1.0, other[1] / bw)
        fit.put(
            key,
            before,
            ratio,
            "",
            sum(r.experiment == exp for r in rows),
            f"{exp} plateau / pinned H2D plateau",
        )


# -- predictions ------------------------------------------------------------------------------

Simulate = Callable[..., Any]

PREDICTED = ("stream_read", "stream_read_torch", "pointer_chase", "h2d_pinned",
             "h2d_pinned_wall", "d2h_pinned", "h2d_pageable", "d2h_pageable")  # fmt: skip
"""Experiments :func:`predict` models (the others are not compared)."""

_CHASE_STEPS = 1024
_CHASE_LINE_BYTES = 128  # the pointer spacing of the simulated chase (its default)


def _default_simulate(arch: Any, workload: Any, mode: str) -> Any:
    from coaccel.simulation import simulate

    return simulate(arch, workload, mode=mode)


def _kernel_seconds(result: Any, name: str) -> float:
    ks = [k for k in result.kernels if k.name == name]
    if not ks:
        raise CoaccelError(f"simulated workload {result.workload!r} has no kernel {name!r}")
    return float(ks[-1].end_s - ks[-1].start_s)


def tier_for(experiment: str) -> str:
    """The simulator tier ``mode="auto"`` uses for an experiment: ``cycle`` for the pointer
    chase (only the cycle tier keeps the L2 contents from the warm-up walk to the measured
    one), ``analytical`` for everything else."""
    return "cycle" if experiment == "pointer_chase" else "analytical"


def predict(
    arch: Any, row: CalibrationRow, *, mode: str = "auto", simulate: Simulate | None = None
) -> float:
    """The simulator's value of a row's measured quantity.

    Args:
        arch: the GPU config.
        row: a row whose experiment is in :data:`PREDICTED`.
        mode: simulator mode, or ``"auto"`` (:func:`tier_for`).
        simulate: ``simulate(arch, workload_spec, mode)``; default :func:`coaccel.simulate`.

    Returns:
        Bandwidth, B/s (streaming rows); latency, ns (pointer chase); time, s (copies).
    """
    sim = simulate or _default_simulate
    exp = row.experiment
    if mode == "auto":
        mode = tier_for(exp)
    if exp in _BW_ROWS:
        if row.size_bytes <= 2 * arch.l2.capacity_mib * MIB:
            # a cache-bandwidth benchmark reads a small set many times in one long kernel
            # ([S12] gpu-l2-cache/main.cu: 100000 blocks over the set), so the measured figure
            # carries no per-kernel pipeline fill: take the time of one more read of the
            # (warm) set inside the kernel
            from coaccel.models.gpu.microbench import streaming_read

            kw: dict[str, Any] = {"ctas": row.ctas} if row.ctas > 0 else {}

            def pass_s(reads: int) -> float:
                tr = streaming_read(row.size_bytes, passes=2, reads_per_pass=reads, **kw)
                return _kernel_seconds(sim(arch, tr, mode), "stream_pass1")

            return row.size_bytes / (pass_s(2) - pass_s(1))
        ctas = f",ctas={row.ctas}" if row.ctas > 0 else ""
        res = sim(arch, f"stream:working_set_bytes={row.size_bytes}{ctas},passes=2", mode)
        return row.size_bytes / _kernel_seconds(res, "stream_pass1")
    if exp == "pointer_chase":
        # warm the set only where it can stay cached: beyond 2 x L2 every load misses anyway
        warm = row.size_bytes <= 2 * arch.l2.capacity_mib * MIB

        def chase_s(steps: int) -> float:
            spec = (
                f"chase:working_set_bytes={row.size_bytes},steps={steps},"
                f"warm={'true' if warm else 'false'}"
            )
            return _kernel_seconds(sim(arch, spec, mode), "chase")

        l1 = arch.sm.l1_cache_kib
        if l1 is not None and row.size_bytes <= 2 * l1 * KIB:
            # a set that fits L1 is served there only from the second lap of the measured
            # walk on: the latency is the slope over whole extra laps (a long measured chase
            # makes the first lap negligible), not the mean over a first lap from L2
            s1 = max(_CHASE_STEPS, row.size_bytes // _CHASE_LINE_BYTES)
            return (chase_s(2 * s1) - chase_s(s1)) / s1 * 1e9
        return chase_s(_CHASE_STEPS) / _CHASE_STEPS * 1e9
    if exp in ("h2d_pinned", "h2d_pinned_wall", "d2h_pinned", "h2d_pageable", "d2h_pageable"):
        direction = exp[:3]
        pinned = "pageable" not in exp
        res = sim(arch, f"{direction}:nbytes={row.size_bytes},pinned={str(pinned).lower()}", mode)
        return float(sum(k.end_s - k.start_s for k in res.kernels))
    raise ValueError(f"predict: experiment {exp!r} is not modelled; modelled: {PREDICTED}")


def measured_value(row: CalibrationRow) -> float:
    """The row's measured quantity in :func:`predict`'s unit."""
    if row.experiment in _BW_ROWS:
        return _bw(row)
    if row.experiment == "pointer_chase":
        return row.latency_ns
    return row.time_s


# -- the fit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowError:
    """A row's measured value and the simulator's before and after the fit.

    Attributes:
        row: the measured row. unit: unit of the values.
        measured: measured value. before: predicted with the original config.
        after: predicted with the fitted config.
    """

    row: CalibrationRow
    unit: str
    measured: float
    before: float
    after: float

    @property
    def error_before_pct(self) -> float:
        """``100 * (before / measured - 1)``."""
        return 100.0 * (self.before / self.measured - 1.0)

    @property
    def error_after_pct(self) -> float:
        """``100 * (after / measured - 1)``."""
        return 100.0 * (self.after / self.measured - 1.0)


@dataclass(frozen=True)
class GroupError:
    """MAPE of one experiment before and after the fit.

    Attributes:
        experiment: the experiment. n: rows. unit: unit of the compared values.
        mape_before_pct: mean absolute percentage error before, percent.
        mape_after_pct: the same after, percent.
    """

    experiment: str
    n: int
    unit: str
    mape_before_pct: float
    mape_after_pct: float


@dataclass(frozen=True)
class CalibrationFit:
    """A fitted config and how well the simulator matches the measurements before and after.

    Attributes:
        before: the original config. after: the fitted config.
        params: the fitted values. rows: per-row errors. groups: MAPE per experiment.
        notes: what could not be fitted, and why. mode: simulator mode of the predictions
            (``auto``: :func:`tier_for`).
    """

    before: Any
    after: Any
    params: tuple[FittedParam, ...]
    rows: tuple[RowError, ...]
    groups: tuple[GroupError, ...]
    notes: tuple[str, ...]
    mode: str


_UNIT = {"stream_read": "B/s", "stream_read_torch": "B/s", "pointer_chase": "ns"}


def select_rows(rows: Sequence[CalibrationRow], per_experiment: int) -> list[CalibrationRow]:
    """At most ``per_experiment`` rows of each experiment, spread evenly over its rows in file
    order (its first and last row included); 0 keeps every row."""
    if per_experiment <= 0:
        return list(rows)
    out = []
    for exp in dict.fromkeys(r.experiment for r in rows):
        sel = [r for r in rows if r.experiment == exp]
        if len(sel) > per_experiment:
            idx = np.unique(np.round(np.linspace(0, len(sel) - 1, per_experiment)).astype(int))
            sel = [sel[i] for i in idx]
        out += sel
    return out


def fit_gpu(
    arch: Any,
    rows: Sequence[CalibrationRow],
    *,
    mode: str = "auto",
    simulate: Simulate | None = None,
    compare_per_experiment: int = 0,
) -> CalibrationFit:
    """Fit a GPU config to calibration rows and compare the simulator before and after.

    Args:
        arch: the GPU config to start from.
        rows: calibration rows (:func:`read_calibration_csv`).
        mode: simulator mode of the predictions, or ``"auto"`` (:func:`tier_for`).
        simulate: ``simulate(arch, workload_spec, mode)``; default :func:`coaccel.simulate`.
        compare_per_experiment: simulate at most this many rows of each experiment
            (:func:`select_rows`; 0: all). The fit itself always uses every row.

    Returns:
        :class:`CalibrationFit`.

    Raises:
        ConfigError: the fitted values break a rule of the config (reported with the key).
    """
    changes, params, notes = fit_parameters(arch, rows)
    after = override(arch, changes) if changes else arch
    after = replace(after, sources=_fitted_sources(after.sources, params))
    errs = []
    for r in select_rows(rows, compare_per_experiment):
        if r.experiment not in PREDICTED or measured_value(r) <= 0:
            continue
        errs.append(
            RowError(
                row=r,
                unit=_UNIT.get(r.experiment, "s"),
                measured=measured_value(r),
                before=predict(arch, r, mode=mode, simulate=simulate),
                after=predict(after, r, mode=mode, simulate=simulate),
            )
        )
    groups = []
    for exp in dict.fromkeys(e.row.experiment for e in errs):
        sel = [e for e in errs if e.row.experiment == exp]
        groups.append(
            GroupError(
                experiment=exp,
                n=len(sel),
                unit=sel[0].unit,
                mape_before_pct=float(np.mean([abs(e.error_before_pct) for e in sel])),
                mape_after_pct=float(np.mean([abs(e.error_after_pct) for e in sel])),
            )
        )
    skipped = sorted({r.experiment for r in rows} - set(PREDICTED))
    if skipped:
        notes.append(f"not compared (no microbenchmark model): {', '.join(skipped)}")
    return CalibrationFit(
        before=arch, after=after, params=tuple(params), rows=tuple(errs),
        groups=tuple(groups), notes=tuple(notes), mode=mode,
    )  # fmt: skip


def _fitted_sources(sources: Any, params: Sequence[FittedParam]) -> FrozenMap[str]:
    out = dict(sources)
    for p in params:
        out[p.key] = (
            f"[DERIVED] fitted by coaccel gpu-calibrate to {p.rows} calibration rows: {p.how}"
        )
    return FrozenMap(out)


def row_fields() -> tuple[str, ...]:
    """Field names of :class:`CalibrationRow` that are CSV columns (in column order)."""
    return tuple(f.name for f in fields(CalibrationRow) if f.name != "line")
