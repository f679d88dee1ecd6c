"""The calibration file of decode-attention times, derived from ``coaccel validate gpu --measured``.

:func:`derive_calibration` turns an evaluation of a measured CSV
(:func:`coaccel.targets.gpu.measured.evaluate_measured`) into the
:class:`~coaccel.sim.gpu_mem.intervals.MeasuredCalibration` that the GPU simulator applies to
every dense decode-attention op (``seconds_calibrated`` and its interval; ``decode_step``): the
pooled and per-library floor and efficiency, the 90 % log half-widths per regime for a GPU in
the fit and for a held-out one, the coverage of both, the configs in the fit, the CSV's SHA-256
and where each figure comes from. :func:`coaccel.targets.gpu.measured_report.calibration_yaml`
writes it; the shipped file is ``arch_configs/gpu/measured/decode_attention_calibration.yaml``.
Pure computation (reading the CSV's bytes for its digest is the only I/O).

**Held-out coverage.** The held-out half-widths are the conformal quantiles of the
leave-one-GPU-out residuals (each calibration GPU predicted by a fit on the others). Their
coverage is judged the same way: each calibration GPU's leave-one-GPU-out residuals against
the half-widths computed from the other GPUs' residuals alone (:func:`held_out_coverage`).

Public: :func:`derive_calibration`, :func:`check_calibration_table`,
:func:`held_out_coverage`, :func:`csv_sha256`.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from coaccel.sim.gpu_mem.intervals import (
    REGIMES,
    Coverage,
    HalfWidths,
    LibraryFit,
    MeasuredCalibration,
    RegimeCoverage,
    RegimeHalfWidths,
)
from coaccel.spine.config import FrozenMap
from coaccel.spine.errors import CoaccelError

from ._measured_fit import LibraryParams, regime_halfwidths
from .measured import (
    NEVER_FITTED,
    MeasuredTable,
    MeasuredValidation,
    Prediction,
    gpu_config,
    shipped_measured_csv,
)

__all__ = ["check_calibration_table", "csv_sha256", "derive_calibration", "held_out_coverage"]

_SHIPPED_CITES = "[AIC-REPO], [VIDUR-REPO] and [CS378-VIDUR]"
"""The sources of the shipped measured CSV's rows (docs/gpu_measured.md §1)."""


_LAUNCH_SOURCE = {
    "library": "[DERIVED] --launch library: each row simulated as its kernel library launches "
    "it on its GPU ([FA2-REPO], [VLLM-FA], [FA3-REPO], [SGL-KERNEL], [VLLM-REPO], "
    "[SARATHI-REPO]; docs/gpu_measured.md section 2)",
    "flashdecode": "[DERIVED] --launch flashdecode: every row simulated with the package's own "
    "split rule ([OURS], docs/gpu_decode.md)",
}
"""Where the ``launch_form`` of a calibration file comes from, per form."""


def csv_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fit(p: LibraryParams, launch: str) -> LibraryFit:
    return LibraryFit(floor_kcycles=p.floor_kcycles, efficiency=p.efficiency, rows=p.rows,
                      efficiency_l2=p.efficiency_l2, launch=launch)  # fmt: skip


def _launches(rows: list[Prediction], library: str | None) -> str:
    """The launch kinds of a library's calibration rows (None: every row), sorted, joined."""
    kinds = {p.sim.launch for p in rows
             if p.sim is not None and (library is None or p.row.library == library)}  # fmt: skip
    return ", ".join(sorted(kinds))


def _calibration_rows(v: MeasuredValidation) -> list[Prediction]:
    return [p for p in v.predictions if p.fit_role == "calibration"]


def held_out_coverage(
    v: MeasuredValidation,
) -> tuple[dict[str, float | None], dict[str, float]]:
    """Coverage of held-out intervals, each calibration GPU judged by half-widths from the
    other GPUs' leave-one-GPU-out residuals (module docstring).

    Args:
        v: an evaluation with leave-one-GPU-out predictions (two or more calibration GPUs).

    Returns:
        ``({"dram": ..., "l2": ..., "all": ...}, {gpu config: ...})``: shares of rows inside
        (None for a regime without rows).
    """
    rows = _calibration_rows(v)
    s = np.array([math.log(p.row.measured_us / p.logo_us) for p in rows])
    gpu = np.array([p.gpu_config for p in rows])
    reg = np.array([p.sim.regime if p.sim is not None else "" for p in rows])
    inside = np.zeros(len(rows), dtype=bool)
    per_gpu: dict[str, float] = {}
    for g in sorted(set(gpu.tolist())):
        mine = gpu == g
        q = regime_halfwidths(reg[~mine].tolist(), s[~mine], v.coverage)
        inside[mine] = np.abs(s[mine]) <= np.array([q[r] for r in reg[mine]])
        per_gpu[g] = float(inside[mine].mean())
    out: dict[str, float | None] = {
        r: float(inside[reg == r].mean()) if np.any(reg == r) else None for r in REGIMES
    }
    out["all"] = float(inside.mean())
    return out, per_gpu


def check_calibration_table(table: MeasuredTable) -> None:
    """Refuse, before any simulation, a CSV whose calibration rows come from fewer than two
    GPUs: the held-out half-widths need leave-one-GPU-out.

    Raises:
        CoaccelError: one line naming the file and the GPUs it has.
    """
    gpus = sorted({c for c in (gpu_config(r.gpu) for r in table.rows)
                   if c and c not in NEVER_FITTED})  # fmt: skip
    if len(gpus) < 2:
        have = ", ".join(gpus) if gpus else "none"
        raise CoaccelError(
            f"--write-calibration: {table.path}: calibration rows of {len(gpus)} GPU(s) "
            f"({have}); the held-out half-widths need two (leave one GPU out)"
        )


def _check(v: MeasuredValidation) -> None:
    """Refuse an evaluation a calibration file cannot be derived from (one line)."""
    name = v.table.path.name
    if v.calibration is None:
        raise CoaccelError(f"--write-calibration: {name} has no calibration rows (every mapped "
                           "GPU is held out): nothing is fitted")  # fmt: skip
    if not v.heldout_halfwidths:
        raise CoaccelError(
            f"--write-calibration: {name} has calibration rows of one GPU "
            f"({', '.join(v.calibration.gpus)}); the held-out half-widths need two (leave one "
            "GPU out)"
        )
    for which, hw in (("in-fit", v.halfwidths), ("held-out", v.heldout_halfwidths)):
        bad = [r for r in REGIMES if not math.isfinite(hw[r])]
        if bad:
            raise CoaccelError(
                f"--write-calibration: {name}: too few rows for a finite {which} 90 % "
                f"half-width of regime {bad[0]} (a conformal quantile at coverage "
                f"{v.coverage} needs at least {math.ceil(v.coverage / (1 - v.coverage))} rows)"
            )


def _sources(v: MeasuredValidation, shipped: bool) -> dict[str, str]:
    """Where each figure comes from (cited through docs/references.md keys)."""
    rows = (f"the shipped set of published timings, {_SHIPPED_CITES} (docs/gpu_measured.md "
            "section 1)" if shipped else "the CSV's timings, each row naming its own source in "
            "the source column")  # fmt: skip
    fit = ("[DERIVED] fitted on the rows of measured_csv: least squares on the relative error "
           "t / measured - 1 with a non-negative floor and inverse efficiency (per regime with "
           "efficiency_form regime); a library with fewer than 3 rows takes the pooled fit "
           "(docs/gpu_measured.md section 2)")  # fmt: skip
    return {
        "measured_csv": f"[DERIVED] the CSV every figure was fitted on: {rows}",
        "page_tokens": "[DERIVED] --page-tokens of the run (64: the [AIC-REPO] vLLM "
        "collector's block)",
        "graph_gap_us": "[DERIVED] from [CUDAJL-GRAPHS] (arch_configs/validation/gpu.yaml "
        "cuda_graph.kernel_gap): the gap before each simulated kernel of T_sim",
        "fitted_configs": "[DERIVED] the shipped configs of the calibration rows' GPUs "
        "(Hopper rows are never fitted)",
        "pooled": fit,
        "libraries": fit,
        "launch_form": _LAUNCH_SOURCE[v.launch],
        "efficiency_form": "[DERIVED] --efficiency of the run, the form selected on the "
        "leave-one-out error (docs/gpu_measured.md section 5)",
        "log_half_width.in_fit": f"[DERIVED] split-conformal on the rows of measured_csv: the "
        f"ceil((n + 1) x {v.coverage})-th smallest |log(measured / predicted)| of the "
        "calibration rows' leave-one-out predictions, per regime (docs/gpu_measured.md "
        "section 2)",
        "log_half_width.held_out": "[DERIVED] split-conformal as in_fit, on the "
        "leave-one-GPU-out residuals (each calibration GPU predicted by a fit on the others)",
        "coverage.in_fit": "[DERIVED] each calibration row's leave-one-out prediction inside "
        "the half-width of the other rows' scores",
        "coverage.held_out": "[DERIVED] each calibration GPU's leave-one-GPU-out predictions "
        "inside the half-widths of the other GPUs' leave-one-GPU-out residuals",
    }


def derive_calibration(
    v: MeasuredValidation, *, graph_gap_us: float | None = None
) -> MeasuredCalibration:
    """The calibration file's contents from an evaluation of a measured CSV.

    Args:
        v: :func:`~coaccel.targets.gpu.measured.evaluate_measured` of the CSV (its
            ``table.path`` is read for the SHA-256).
        graph_gap_us: the gap before each kernel the rows were simulated with, µs (None: the
            CUDA-graph gap :func:`coaccel.targets.gpu.ffd.graph_launch_us`, what
            :func:`~coaccel.targets.gpu.measured.simulate_row` uses).

    Returns:
        The :class:`~coaccel.sim.gpu_mem.intervals.MeasuredCalibration`.

    Raises:
        CoaccelError: no calibration rows, calibration rows of one GPU only (no held-out
            half-widths), or a half-width that is not finite (too few rows); one line.
    """
    from .ffd import graph_launch_us

    _check(v)
    cal = v.calibration
    assert cal is not None  # _check
    sha = csv_sha256(v.table.path)
    shipped = sha == csv_sha256(shipped_measured_csv())
    in_fit = {r: v.by_regime[("in_sample", r)].coverage if ("in_sample", r) in v.by_regime
              else None for r in REGIMES}  # fmt: skip
    held, _ = held_out_coverage(v)
    rows = _calibration_rows(v)
    return MeasuredCalibration(
        description=(
            "Decode-attention times calibrated on measured ops: floor and efficiency per kernel "
            "library, 90 % log half-widths per regime (docs/gpu_measured.md)"
        ),
        measured_csv=v.table.path.name,
        measured_csv_sha256=sha,
        measured_rows=len(v.table.rows),
        calibration_rows=len(rows),
        page_tokens=v.page_tokens,
        graph_gap_us=graph_launch_us() if graph_gap_us is None else graph_gap_us,
        target_coverage=v.coverage,
        fitted_configs=tuple(cal.gpus),
        pooled=_fit(cal.pooled, _launches(rows, None)),
        libraries=FrozenMap(
            {k: _fit(p, _launches(rows, k)) for k, p in sorted(cal.libraries.items())}
        ),  # fmt: skip
        launch_form=v.launch,
        efficiency_form=v.efficiency_form,
        log_half_width=HalfWidths(
            in_fit=RegimeHalfWidths(**{r: v.halfwidths[r] for r in REGIMES}),
            held_out=RegimeHalfWidths(**{r: v.heldout_halfwidths[r] for r in REGIMES}),
        ),
        coverage=Coverage(
            in_fit=RegimeCoverage(**in_fit, all=v.in_sample["all"].coverage),
            held_out=RegimeCoverage(
                dram=held["dram"], l2=held["l2"], all=float(held["all"] or 0.0)
            ),
        ),
        sources=FrozenMap(_sources(v, shipped)),
    )
