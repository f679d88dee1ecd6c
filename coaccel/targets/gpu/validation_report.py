"""Reports of the GPU memory-hierarchy model: the calibration fit (``coaccel gpu-calibrate``)
and the validation table (``coaccel validate gpu``), as text, CSV, Markdown and YAML.

* :func:`format_calibration`, :func:`calibration_rows`, :func:`write_calibration_report` —
  fitted parameters (before, after, estimator), MAPE per experiment before and after, every
  row's error, and the fitted config as a loadable YAML file;
* :func:`format_gpu_validation`, :func:`gpu_validation_rows`,
  :func:`write_gpu_validation_report` — every anchor with its source, our prediction and its
  band, fitted or predicted, the series' MAPE and Pearson correlation, and the analytical vs
  cycle tier error.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from coaccel.report.files import write_text
from coaccel.spine.config import dump_config
from coaccel.targets.gpu.fit import CalibrationFit
from coaccel.targets.gpu.validation import GpuValidation

__all__ = [
    "calibration_rows",
    "format_calibration",
    "format_gpu_validation",
    "gpu_validation_rows",
    "write_calibration_report",
    "write_gpu_validation_report",
]


def _g(x: float, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}g}"


def _csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines)


def _text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(str(r[i])) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]  # fmt: skip
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


# -- calibration -----------------------------------------------------------------------------


def calibration_rows(fit: CalibrationFit) -> list[dict[str, Any]]:
    """One dict per compared row: experiment, size, measured, before, after, errors, source."""
    return [
        {
            "experiment": e.row.experiment,
            "device": e.row.device,
            "size_bytes": e.row.size_bytes,
            "unit": e.unit,
            "measured": _g(e.measured, 6),
            "before": _g(e.before, 6),
            "after": _g(e.after, 6),
            "error_before_pct": _g(e.error_before_pct, 3),
            "error_after_pct": _g(e.error_after_pct, 3),
            "source": e.row.source,
        }
        for e in fit.rows
    ]


def _param_cells(fit: CalibrationFit) -> list[list[str]]:
    return [[p.key, _g(p.before, 5), _g(p.after, 5), p.unit, str(p.rows), p.how]
            for p in fit.params]  # fmt: skip


def _group_cells(fit: CalibrationFit) -> list[list[str]]:
    return [[g.experiment, str(g.n), g.unit, _g(g.mape_before_pct, 3), _g(g.mape_after_pct, 3)]
            for g in fit.groups]  # fmt: skip


_PARAM_HEAD = ("key", "before", "after", "unit", "rows", "estimator")
_GROUP_HEAD = ("experiment", "rows", "unit", "MAPE before %", "MAPE after %")


def format_calibration(fit: CalibrationFit) -> str:
    """The fit as plain text: fitted parameters, then MAPE per experiment."""
    parts = [
        f"GPU calibration of {fit.before.name} ({fit.mode} simulator)",
        "",
        _text_table(_PARAM_HEAD, _param_cells(fit)) if fit.params else "no parameter fitted",
        "",
        _text_table(_GROUP_HEAD, _group_cells(fit)) if fit.groups else "no row compared",
    ]
    parts += [f"note: {n}" for n in fit.notes]
    return "\n".join(parts)


def fitted_config_yaml(fit: CalibrationFit, csv_name: str) -> str:
    """The fitted config as YAML that ``coaccel.sim.gpu_mem.load_arch`` loads back."""
    head = (
        f"# {fit.after.name} fitted by coaccel gpu-calibrate to {csv_name}: every fitted key "
        "names its estimator\n# in sources; the other values are those of the original config.\n"
    )
    return head + yaml.safe_dump(dump_config(fit.after), sort_keys=False, allow_unicode=True)


def write_calibration_report(fit: CalibrationFit, out_dir: str | Path, csv_name: str) -> list[Path]:
    """Write ``<gpu>_fitted.yaml``, ``gpu_calibration_fit.csv`` and ``.md`` into ``out_dir``.

    Args:
        fit: the fit. out_dir: an existing, writable folder. csv_name: the input's name.

    Returns:
        The paths written.
    """
    out = Path(out_dir)
    paths = [
        write_text(out / f"{fit.after.name}_fitted.yaml", fitted_config_yaml(fit, csv_name)),
        write_text(out / "gpu_calibration_fit.csv", _csv(calibration_rows(fit))),
    ]
    md = [
        f"# GPU calibration of {fit.before.name}",
        "",
        f"Input: `{csv_name}`; predictions by the {fit.mode} simulator.",
        "",
        "## Fitted parameters",
        "",
        _md_table(_PARAM_HEAD, _param_cells(fit)),
        "",
        "## Error before and after the fit",
        "",
        _md_table(_GROUP_HEAD, _group_cells(fit)),
        "",
    ]
    md += [f"- {n}" for n in fit.notes]
    paths.append(write_text(out / "gpu_calibration_fit.md", "\n".join(md) + "\n"))
    return paths


# -- validation ------------------------------------------------------------------------------

_VAL_HEAD = ("group", "anchor", "measured", "ours", "band", "unit", "error %", "fit", "source")


def gpu_validation_rows(v: GpuValidation) -> list[dict[str, Any]]:
    """One dict per anchor (the CSV's columns)."""
    return [
        {
            "group": a.group,
            "name": a.name,
            "measured": _g(a.measured, 6),
            "ours": _g(a.ours, 6),
            "ours_low": _g(a.ours_low, 6),
            "ours_high": _g(a.ours_high, 6),
            "unit": a.unit,
            "error_pct": _g(a.error_pct, 3),
            "within_band": "" if math.isnan(a.measured) else str(a.within_band).lower(),
            "fit": a.fit,
            "source": a.source,
            "note": a.note,
        }
        for a in v.anchors
    ]


def _val_cells(v: GpuValidation) -> list[list[str]]:
    return [
        [a.group, a.name, _g(a.measured), _g(a.ours), f"{_g(a.ours_low)}..{_g(a.ours_high)}",
         a.unit, _g(a.error_pct, 3), a.fit, a.source]
        for a in v.anchors
    ]  # fmt: skip


_SERIES_HEAD = ("series", "points", "MAPE %", "Pearson r", "fit", "source")


def _series_cells(v: GpuValidation) -> list[list[str]]:
    return [[s.name, str(s.n), _g(s.mape_pct, 3), _g(s.pearson_r, 4), s.fit, s.source]
            for s in v.series]  # fmt: skip


_TIER_HEAD = ("workload", "analytical s", "cycle s", "cycle / analytical - 1 %")


def _tier_cells(v: GpuValidation) -> list[list[str]]:
    return [[t.workload, _g(t.analytical_s, 5), _g(t.cycle_s, 5), _g(t.error_pct, 3)]
            for t in v.tiers]  # fmt: skip


def format_gpu_validation(v: GpuValidation) -> str:
    """The validation as plain text: anchors, series statistics, tier errors, notes."""
    parts = [
        f"GPU memory-hierarchy validation ({v.mode} simulator)",
        "",
        _text_table(_VAL_HEAD, _val_cells(v)),
        "",
        _text_table(_SERIES_HEAD, _series_cells(v)) if v.series else "no series",
        "",
        _text_table(_TIER_HEAD, _tier_cells(v)) if v.tiers else "no tier comparison",
    ]
    parts += [f"note: {n}" for n in v.notes]
    return "\n".join(parts)


def write_gpu_validation_report(v: GpuValidation, out_dir: str | Path) -> list[Path]:
    """Write ``gpu_validation.csv``, ``gpu_series.csv`` and ``gpu_validation.md``.

    Args:
        v: the validation. out_dir: an existing, writable folder.

    Returns:
        The paths written.
    """
    out = Path(out_dir)
    series = [
        {"series": s.name, "points": s.n, "mape_pct": _g(s.mape_pct, 4),
         "pearson_r": _g(s.pearson_r, 5), "fit": s.fit, "source": s.source}
        for s in v.series
    ]  # fmt: skip
    paths = [
        write_text(out / "gpu_validation.csv", _csv(gpu_validation_rows(v))),
        write_text(out / "gpu_series.csv", _csv(series)),
    ]
    md = [
        "# GPU memory-hierarchy validation",
        "",
        f"Simulator mode: {v.mode}. `fit` says whether a measured figure was used to set the "
        "config (`fitted`) or is a prediction (`predicted`); `band` is our prediction's range "
        "over the config's stated uncertainty.",
        "",
        "## Anchors",
        "",
        _md_table(_VAL_HEAD, _val_cells(v)),
        "",
        "## Series",
        "",
        _md_table(_SERIES_HEAD, _series_cells(v)),
        "",
        "## Analytical vs cycle tier",
        "",
        _md_table(_TIER_HEAD, _tier_cells(v)),
        "",
    ]
    md += [f"- {n}" for n in v.notes]
    paths.append(write_text(out / "gpu_validation.md", "\n".join(md) + "\n"))
    return paths
