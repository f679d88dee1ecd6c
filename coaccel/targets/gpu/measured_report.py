"""Report of ``coaccel validate gpu --measured``: text, JSON data and the predicted CSV.

* :func:`format_measured` — the fitted parameters with their units, then per GPU and overall
  (rows, MAPE, median, P90 and max absolute percentage error, signed bias, Kendall's tau,
  interval coverage) for the calibration fit in sample, by regime, leave one GPU out and on
  held-out GPUs, then the notes;
* :func:`measured_doc` — the same as JSON data (``--json``);
* :func:`write_measured_predictions` — ``<name>_predicted.csv``: the input rows unchanged with
  :data:`PREDICTED_COLUMNS` appended, written atomically;
* :func:`calibration_yaml` / :func:`write_calibration` — the calibration file the GPU simulator
  applies to decode-attention ops (``--write-calibration``;
  :func:`coaccel.targets.gpu.measured_calibration.derive_calibration`), written atomically.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from coaccel.report.files import atomic_open
from coaccel.targets.gpu.measured import (
    ErrorSummary,
    MeasuredValidation,
    Prediction,
)

__all__ = [
    "PREDICTED_COLUMNS",
    "calibration_yaml",
    "format_measured",
    "measured_doc",
    "predicted_path",
    "write_calibration",
    "write_measured_predictions",
]

PREDICTED_COLUMNS = (
    "predicted_us", "lower_us", "upper_us", "gpu_config", "fit_role", "params", "sim_us",
    "regime", "logo_predicted_us", "logo_lower_us", "logo_upper_us", "logo_params", "launch",
    "num_splits",
)  # fmt: skip
"""Columns appended to the input rows: the prediction and its interval (µs), the config and the
row's role (``calibration``, ``held-out``, ``skipped``), whether its library's own parameters or
the pooled ones were used, the raw simulated time (µs) and regime (``dram`` / ``l2``), the
leave-one-GPU-out prediction, interval and parameters (calibration rows; empty otherwise), and
the launch simulated (:func:`coaccel.targets.gpu.measured.library_launch_kind`) with its split
count."""


def predicted_path(out_dir: str | Path, measured_csv: str | Path) -> Path:
    """``<out_dir>/<stem of the measured CSV>_predicted.csv``."""
    return Path(out_dir) / f"{Path(measured_csv).stem}_predicted.csv"


def _num(x: float) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.6g}"


def _pred_fields(p: Prediction) -> list[str]:
    sim = p.sim
    return [
        _num(p.predicted_us), _num(p.lower_us), _num(p.upper_us), p.gpu_config, p.fit_role,
        p.params, _num(sim.sim_us) if sim is not None else "",
        sim.regime if sim is not None else "", _num(p.logo_us), _num(p.logo_lower_us),
        _num(p.logo_upper_us), p.logo_params, sim.launch if sim is not None else "",
        str(sim.num_splits) if sim is not None else "",
    ]  # fmt: skip


def write_measured_predictions(v: MeasuredValidation, out_dir: str | Path) -> Path:
    """Write the input rows with :data:`PREDICTED_COLUMNS` appended (atomically).

    Args:
        v: the evaluation. out_dir: an existing output folder.

    Returns:
        The path written (:func:`predicted_path`).
    """
    path = predicted_path(out_dir, v.table.path)
    header = list(v.table.header)
    extra = [c for c in PREDICTED_COLUMNS if c in header]
    if extra:  # a CSV that already has our columns (an earlier output read back): replace them
        keep = [i for i, h in enumerate(header) if h not in PREDICTED_COLUMNS]
    else:
        keep = list(range(len(header)))
    with atomic_open(path) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([header[i] for i in keep] + list(PREDICTED_COLUMNS))
        for p in v.predictions:
            vals = [val for _, val in p.row.fields]
            w.writerow([vals[i] for i in keep] + _pred_fields(p))
    return path


_HEAD = f"{'':<16} {'rows':>5} {'MAPE':>7} {'median':>7} {'P90':>7} {'max':>7} {'bias':>7} " \
        f"{'tau':>6} {'cover':>6}"  # fmt: skip


def _line(name: str, s: ErrorSummary) -> str:
    def pct(x: float) -> str:
        return f"{x:6.1f}%" if not math.isnan(x) else f"{'-':>7}"

    cov = f"{s.coverage * 100:5.0f}%" if not math.isnan(s.coverage) else f"{'-':>6}"
    tau = f"{s.kendall_tau:6.3f}" if not math.isnan(s.kendall_tau) else f"{'-':>6}"
    return (f"{name:<16} {s.rows:>5} {pct(s.mape_pct)} {pct(s.median_ape_pct)} "
            f"{pct(s.p90_ape_pct)} {pct(s.max_ape_pct)} {pct(s.bias_pct)} {tau} {cov}")  # fmt: skip


def _table(title: str, groups: dict[Any, ErrorSummary]) -> list[str]:
    if not groups:
        return []
    return ["", title, _HEAD] + [_line(str(g), s) for g, s in groups.items()]


def format_measured(v: MeasuredValidation) -> str:
    """The evaluation as text (module docstring).

    Args:
        v: the evaluation.

    Returns:
        Lines of text.
    """
    roles: dict[str, dict[str, int]] = {}
    for p in v.predictions:
        key = p.gpu_config or p.row.gpu
        roles.setdefault(p.fit_role, {}).setdefault(key, 0)
        roles[p.fit_role][key] += 1
    pct = round(v.coverage * 100)
    out = [
        f"GPU simulator against measured decode attention: {v.table.path} "
        f"({len(v.predictions)} rows)",
    ]
    for role in ("calibration", "held-out", "skipped"):
        if role in roles:
            out.append(f"  {role}: " + ", ".join(f"{g} ({n})" for g, n in roles[role].items()))
    cold = f" (cold L2 on {', '.join(v.cold_l2)})" if v.cold_l2 else ""
    out.append(
        f"  simulator: analytical tier, warm L2 for the replayed ops where the data fits{cold}, "
        f"the CUDA-graph gap between kernels, paged KV of {v.page_tokens} tokens per block"
    )
    launches = sorted({(p.row.library, p.sim.launch) for p in v.predictions
                       if p.sim is not None})  # fmt: skip
    out.append(
        f"  launch: {v.launch} ("
        + ", ".join(f"{lib} {kind}" for lib, kind in launches)
        + f"); efficiency: {v.efficiency_form}"
    )
    cal = v.calibration
    if cal is not None:
        freqs = sorted({(p.gpu_config, p.sim.freq_mhz) for p in v.predictions
                        if p.sim is not None})  # fmt: skip
        fh = " ".join(f"{'us@' + g:>12}" for g, _ in freqs)
        per_regime = v.efficiency_form == "regime"
        eh = f"{'eff. dram':>10} {'eff. l2':>10}" if per_regime else f"{'efficiency':>10}"
        out += [
            "",
            "Fitted per kernel library (t = floor + simulated time / efficiency; floor in "
            "thousands of SM cycles, and in us at each GPU's SM clock):",
            f"  {'library':<34} {'rows':>5} {'floor kcycles':>14} {fh} {eh}",
        ]
        for lp in [*cal.libraries.values(), cal.pooled]:
            us = " ".join(f"{lp.floor_us(f):>12.2f}" for _, f in freqs)
            eff = f"{lp.efficiency:>10.3f}"
            if per_regime:
                eff += f" {lp.efficiency_of('l2'):>10.3f}"
            out.append(f"  {lp.library:<34} {lp.rows:>5} {lp.floor_kcycles:>14.2f} {us} {eff}")
        hw = ", ".join(f"{r} x/÷ {math.exp(q):.3f}" for r, q in v.halfwidths.items())
        out.append(f"  {pct} % intervals (split-conformal, leave-one-out scores by regime): {hw}")
        if v.heldout_halfwidths:
            hh = ", ".join(f"{r} x/÷ {math.exp(q):.3f}" for r, q in v.heldout_halfwidths.items())
            out.append(f"  held-out GPUs' intervals (leave-one-GPU-out scores): {hh}")
    out += _table("(a) calibration fit, in sample (coverage: leave-one-out)", dict(v.in_sample))
    out += _table("(a) by regime (dram: KV streamed from DRAM; l2: served by the warm L2)",
                  {r: s for (k, r), s in v.by_regime.items() if k == "in_sample"})  # fmt: skip
    out += _table("(a) leave-one-out predictions (each row from a fit without it)", dict(v.loo))
    out += _table("(b) leave one GPU out (each GPU predicted from a fit on the others; "
                  "'all': every fold)", dict(v.logo))  # fmt: skip
    out += _table("(b) by regime", {r: s for (k, r), s in v.by_regime.items() if k == "logo"})
    out += _table("held-out GPUs (never fitted)", dict(v.held_out))
    if v.notes:
        out += ["", "notes:"] + [f"  - {n}" for n in v.notes]
    return "\n".join(out)


def _finite(x: Any) -> Any:
    """``x``, or None for a NaN or infinite float (strict JSON has neither)."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _summary_doc(s: ErrorSummary) -> dict[str, Any]:
    return {k: _finite(x) for k, x in s.__dict__.items()}


def measured_doc(v: MeasuredValidation) -> dict[str, Any]:
    """The evaluation as JSON data: parameters, error summaries, notes."""
    cal = v.calibration
    params = []
    if cal is not None:
        params = [
            {"library": p.library, "rows": p.rows, "floor_kcycles": p.floor_kcycles,
             "efficiency": p.efficiency, "efficiency_l2": p.efficiency_l2}
            for p in [*cal.libraries.values(), cal.pooled]
        ]  # fmt: skip
    return {
        "measured_csv": str(v.table.path),
        "rows": len(v.predictions),
        "page_tokens": v.page_tokens,
        "launch": v.launch,
        "efficiency_form": v.efficiency_form,
        "cold_l2": list(v.cold_l2),
        "coverage_target": v.coverage,
        "params": params,
        "halfwidths_log": {r: _finite(q) for r, q in v.halfwidths.items()},
        "heldout_halfwidths_log": {r: _finite(q) for r, q in v.heldout_halfwidths.items()},
        "in_sample": {g: _summary_doc(s) for g, s in v.in_sample.items()},
        "loo": {g: _summary_doc(s) for g, s in v.loo.items()},
        "logo": {g: _summary_doc(s) for g, s in v.logo.items()},
        "held_out": {g: _summary_doc(s) for g, s in v.held_out.items()},
        "by_regime": {f"{k}:{r}": _summary_doc(s) for (k, r), s in v.by_regime.items()},
        "notes": list(v.notes),
    }


def calibration_yaml(c: Any) -> str:
    """The calibration file's text: a header comment, then the config as YAML.

    Args:
        c: the :class:`~coaccel.sim.gpu_mem.intervals.MeasuredCalibration`
            (:func:`~coaccel.targets.gpu.measured_calibration.derive_calibration`).

    Returns:
        YAML text that :func:`coaccel.sim.gpu_mem.intervals.load_calibration` reads back to
        ``c`` (floats as their shortest round-trip form).
    """
    import yaml

    from coaccel.spine.config import dump_config

    head = (
        "# Decode-attention times calibrated on measured ops (docs/gpu_measured.md, section 7),\n"
        f"# derived from {c.measured_csv} by: coaccel validate gpu --measured FILE.csv\n"
        "# --write-calibration FILE.yaml. Regenerate it rather than edit it. Units:\n"
        "# floor_kcycles in thousands of SM cycles; efficiency and coverage as fractions;\n"
        "# log_half_width q as the natural log of the ratio (interval [t e^-q, t e^q]);\n"
        "# graph_gap_us in us.\n"
    )
    body = yaml.safe_dump(dump_config(c), sort_keys=False, allow_unicode=True, width=100)
    return head + body


def write_calibration(c: Any, path: str | Path) -> Path:
    """Write :func:`calibration_yaml` of ``c`` to ``path`` atomically.

    Args:
        c: the calibration. path: the file (its folder exists).

    Returns:
        The path written.
    """
    p = Path(path)
    with atomic_open(p, newline="\n") as f:
        f.write(calibration_yaml(c))
    return p
