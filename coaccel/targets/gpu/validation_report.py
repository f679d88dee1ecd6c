"""Reports of the GPU memory-hierarchy model: the calibration fit (``coaccel gpu-calibrate``)
and the validation table (``coaccel validate gpu``), as text, CSV, Markdown and YAML.

* :func:`format_calibration`, :func:`calibration_rows`, :func:`write_calibration_report` —
  fitted parameters (before, after, estimator), MAPE per experiment before and after, every
  row's error, and the fitted config as a loadable YAML file;
* :func:`format_gpu_validation`, :func:`write_gpu_validation_report` — the shared validation
  table (:mod:`coaccel.report.validation`, the rows and columns of ``coaccel validate hbq``):
  every anchor with its source, our prediction and its band, the curves' MAPE and Pearson
  correlation and the analytical vs cycle tier error, each with its status, then the summary
  line; :data:`GROUP_TITLES` names each group's rule.
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
from coaccel.report.validation import format_validation_table, write_validation_report
from coaccel.spine.config import dump_config
from coaccel.targets.gpu.fit import CalibrationFit
from coaccel.targets.gpu.validation import (
    BAND_FRACTION,
    CURVE_MAPE_PCT,
    CURVE_R_TOL,
    TIER_TOLERANCE_PCT,
)
from coaccel.validate.targets import Validation

__all__ = [
    "GROUP_TITLES",
    "calibration_rows",
    "format_calibration",
    "format_gpu_validation",
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

_BAND = "ok: measured inside our band"

GROUP_TITLES = {
    "stream": f"DRAM streaming-read plateaus ({_BAND})",
    "l2": f"L2-resident read plateaus ({_BAND})",
    "l2_knee": f"L2 capacity knees ({_BAND})",
    "latency": f"A100-80GB pointer-chase latency per level ({_BAND})",
    "pcie": f"PCIe copy curve shape ({_BAND})",
    "w1": f"W1 FlashDecoding split kernel vs bytes / measured plateau ({_BAND})",
    "w2": f"W2 FFD speedup over W1 vs the traffic bound and the paper ({_BAND})",
    "w2_error": "W2 output error vs dense attention, synthetic inputs (no published figure)",
    "w2_real": f"W2 FFD speedup with a real decoder's keep ratios vs the bound and the paper "
    f"({_BAND})",
    "w2_keep": "W2 keep ratio on a real decoder's decode steps (no published figure)",
    "w2_real_error": "W2 output error on a real decoder's decode steps (no published figure)",
    "w2_ppl": "W2 perplexity change with FFD's selection in the decode steps (no published figure)",
    "w3": f"W3 NOSA offload speedups vs the paper ({_BAND})",
    "w3_error": "W3 output error vs dense attention, synthetic inputs (no published figure)",
    "w3_real": "W3 NOSA selection on a real decoder's decode steps: recall, attention mass, "
    "host fetches (no published figure)",
    "w4": f"W4 Specter expert-offload TPOT speedup vs the paper ({_BAND})",
    "e2e": "Whole-model decode throughput ratios on the papers' own metric (NOSA, FFD; "
    "predicted, no band)",
    "curve_mape": f"Curves: MAPE against the measured (or derived) curve (ok: <= "
    f"{CURVE_MAPE_PCT:g} %)",
    "curve_r": f"Curves: Pearson r against the same curve (ok: r >= {1 - CURVE_R_TOL:g})",
    "tier": f"Cycle vs analytical tier, same simulator (ok: within ±{TIER_TOLERANCE_PCT:g} %)",
    "tier_rank": "Cycle vs analytical tier: Kendall tau over a sweep (ok: tau >= 0.95)",
}
"""Section titles of the GPU validation, in order; each states the group's rule."""

_INTRO = (
    "*band*: our value with every bandwidth and efficiency of the config scaled by 1 -/+ "
    f"{BAND_FRACTION:.0%} and every latency by 1 +/- {BAND_FRACTION:.0%} ([OURS] allowance for "
    "unit and clock variation); an anchor is *ok* when the measured figure lies inside it. "
    "*fitted*: the figure set the shipped config; *predicted*: it did not. *data*: `real` for "
    "rows against a measured series or on a real model's activations, `synthetic` for seeded "
    "inputs. Rows without a published figure show our mean and its standard deviation over "
    "the N the note gives.",
)


def format_gpu_validation(v: Validation) -> str:
    """The validation as plain text: one block per group with each row's status, the notes,
    then the summary line (status counts, predicted and fitted apart)."""
    head = f"GPU memory-hierarchy validation ({v.sim_mode} simulator)"
    return head + "\n\n" + format_validation_table(v, GROUP_TITLES, notes=True)


def write_gpu_validation_report(v: Validation, out_dir: str | Path) -> list[Path]:
    """Write ``gpu_validation.csv`` and ``gpu_validation.md``.

    Args:
        v: the validation. out_dir: output folder (created if needed).

    Returns:
        The paths written.
    """
    return write_validation_report(
        v,
        out_dir,
        stem="gpu_validation",
        title=f"GPU memory-hierarchy validation ({v.sim_mode} simulator)",
        group_titles=GROUP_TITLES,
        intro=_INTRO,
    )
