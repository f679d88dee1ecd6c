"""HBQ ASIC reports: the validation table and the per-component area/energy report.

The computations live in :mod:`coaccel.validate.hbq` and :mod:`coaccel.cost`; this module only
formats, writes and plots. Files:

* :func:`write_validation_report` → ``hbq_validation.csv`` and ``hbq_validation.md`` (every
  target with our value, the paper's, the error, the tolerance, our one-sigma uncertainty, the
  leave-one-out prediction where there is one, the source and the note saying why we differ).
* :func:`write_cost_report` → ``cost_area.{png,svg}``, ``cost_energy.{png,svg}``,
  ``cost_pe.{png,svg}`` (per-component stacked bars), ``cost_report.csv`` (every figure with
  unit, one-sigma uncertainty and source), ``cost_report.md`` and ``cost_report.html``.
"""

from __future__ import annotations

import base64
import csv
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..cost import CostBreakdown
from ..validate.hbq import Target, Validation
from ._style import OKABE_ITO, TOL_MUTED, display_arch, new_figure, save_figure
from .files import atomic_open, write_text

__all__ = [
    "COST_CSV_COLUMNS",
    "VALIDATION_CSV_COLUMNS",
    "cost_rows",
    "format_validation_table",
    "plot_area",
    "plot_energy",
    "plot_pe",
    "validation_rows",
    "validation_summary",
    "write_cost_report",
    "write_validation_report",
]

VALIDATION_CSV_COLUMNS = (
    "group",
    "target",
    "fit",
    "ours",
    "ours_sigma",
    "ours_loo",
    "paper",
    "unit",
    "error_pct",
    "loo_error_pct",
    "ours_as_paper",
    "as_paper_error_pct",
    "tolerance_pct",
    "status",
    "loo_status",
    "source",
    "note",
)
"""Columns of ``hbq_validation.csv``: ``fit`` is ``fitted`` (the PE model was fitted on the
paper's figure, or on the points it is computed from: agreement is in sample) or ``predicted``
(not used in any fit); ``ours_sigma`` one sigma; ``ours_loo`` the leave-one-out prediction of a
fitted row (the model refitted without its points) and ``loo_status`` that prediction judged
against the same tolerance; empty cells where a column does not apply."""

COST_CSV_COLUMNS = (
    "arch",
    "workload",
    "node_nm",
    "quantity",
    "component",
    "value",
    "unit",
    "sigma",
    "source",
)
"""Columns of ``cost_report.csv``: ``quantity`` is ``area`` (µm²), ``energy`` (J) or
``pe_area`` / ``pe_energy`` (per MAC); ``sigma`` is one sigma in the same unit."""

_GROUP_TITLES = {
    "pe_area": "PE area per MAC (published rows, ±5 %)",
    "pe_energy": "PE energy per MAC (published rows, ±5 %)",
    "claim": "Headline hardware claims",
    "system_energy": "System energy per 2048-token prefill (±10 %)",
    "speedup": "Iso-area speedup vs Amove (geometric mean of 5 models)",
    "synthesis": "PE model vs our RTL's Yosys gate counts (ratios along sweeps)",
}


def _num(v: float, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.{digits}g}"


def validation_rows(v: Validation) -> list[dict[str, str]]:
    """The validation targets as rows keyed by the CSV's columns (for JSON output)."""
    return [dict(zip(VALIDATION_CSV_COLUMNS, _target_cells(t), strict=True)) for t in v.targets]


def _target_cells(t: Target) -> list[str]:
    return [
        t.group,
        t.name,
        t.fit,
        _num(t.ours),
        _num(t.ours_sigma, 2),
        _num(t.ours_loo),
        _num(t.paper),
        t.unit,
        _num(t.error_pct, 3),
        _num(t.loo_error_pct, 3),
        _num(t.ours_as_paper),
        _num(t.as_paper_error_pct, 3),
        "" if t.tolerance_pct is None else f"{t.tolerance_pct:g}",
        t.status,
        t.loo_status,
        " ".join(t.source.split()),
        " ".join(t.note.split()),
    ]


_MD_HEADERS = {
    "target": "target",
    "fit": "fitted / predicted",
    "ours": "ours",
    "ours_sigma": "1 sigma",
    "ours_loo": "ours LOO",
    "paper": "paper",
    "unit": "unit",
    "error_pct": "error %",
    "loo_error_pct": "LOO error %",
    "ours_as_paper": "ours as [R-PM] counts",
    "as_paper_error_pct": "error %, as [R-PM] counts",
    "tolerance_pct": "tol. %",
    "status": "status",
    "loo_status": "LOO status",
    "note": "note",
}
"""Markdown header of each CSV column the Markdown tables show (not group and source)."""

_AS_PAPER_COLUMNS = ("ours_as_paper", "as_paper_error_pct")
_LOO_COLUMNS = ("ours_loo", "loo_error_pct", "loo_status")


def _status_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def validation_summary(v: Validation) -> str:
    """The status counts, predicted and fitted rows apart, and how the fitted rows fare
    when the model is refitted without them (leave-one-out).

    Args:
        v: the validation.

    Returns:
        One line, e.g. ``predicted: 20 ok, 13 differs; fitted (in sample): 40 ok;
        leave-one-out of the fitted rows: 38 within tolerance (largest |error| 3.0 %), 2 outside
        (HBQ-A PE energy -23.9 %, ...)``.
    """
    by_fit = v.counts_by_fit()
    parts = []
    if "predicted" in by_fit:
        parts.append(f"predicted: {_status_counts(by_fit['predicted'])}")
    if "fitted" in by_fit:
        parts.append(f"fitted (in sample): {_status_counts(by_fit['fitted'])}")
    judged = [t for t in v.targets if t.fit == "fitted" and t.loo_status]
    if judged:
        outside = v.loo_outside()
        within = len(judged) - len(outside)
        text = f"leave-one-out of the fitted rows: {within} within tolerance"
        if within:
            text += f" (largest |error| {v.loo_max_abs_error_pct():.1f} %)"
        if outside:
            text += (
                f", {len(outside)} outside ("
                + ", ".join(f"{t.name} {t.loo_error_pct:+.1f} %" for t in outside)
                + ")"
            )
        parts.append(text)
    return "; ".join(parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def format_validation_table(v: Validation) -> str:
    """Readable text of the validation (what ``coaccel validate hbq`` prints).

    Args:
        v: the validation.

    Returns:
        One block per target group, then the status counts (no trailing newline).
    """
    blocks = []
    for group, title in _GROUP_TITLES.items():
        rows = v.select(group)
        if not rows:
            continue
        body = []
        as_paper = any(not math.isnan(t.ours_as_paper) for t in rows)
        has_loo = any(not math.isnan(t.ours_loo) for t in rows)
        for t in rows:
            err = "" if math.isnan(t.error_pct) else f"{t.error_pct:+.1f}%"
            sig = "" if math.isnan(t.ours_sigma) else f"±{_num(t.ours_sigma, 2)}"
            row = [
                t.name,
                t.fit,
                f"{_num(t.ours)} {sig}".strip(),
                _num(t.paper),
                t.unit,
                err,
                t.status,
            ]
            if has_loo:
                e3 = "" if math.isnan(t.loo_error_pct) else f" ({t.loo_error_pct:+.1f}%)"
                row.append(f"{_num(t.ours_loo)}{e3} {t.loo_status}".strip())
            if as_paper:
                e2 = "" if math.isnan(t.as_paper_error_pct) else f" ({t.as_paper_error_pct:+.1f}%)"
                row.append(f"{_num(t.ours_as_paper)}{e2}")
            body.append(row)
        headers = ["target", "fit", "ours (1 sigma)", "paper", "unit", "error", "status"]
        if has_loo:
            headers.append("leave-one-out (error) status")
        if as_paper:
            headers.append("ours as [R-PM] counts (error)")
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
        lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
        differs = [t for t in rows if t.status in ("differs", "baseline missing", "info")]
        by_note: dict[str, list[str]] = {}
        for t in differs:
            by_note.setdefault(" ".join(t.note.split()), []).append(t.name)
        for note, names in by_note.items():
            who = names[0] if len(names) == 1 else f"{len(names)} rows above"
            lines.append(f"  why ({who}): {note}")
        blocks.append("\n".join(lines))
    blocks.append(f"targets: {validation_summary(v)}")
    return "\n\n".join(blocks)


def write_validation_report(v: Validation, out_dir: str | Path) -> list[Path]:
    """Write ``hbq_validation.csv`` and ``hbq_validation.md``.

    Args:
        v: the validation.
        out_dir: output folder (created if needed).

    Returns:
        The two paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "hbq_validation.csv"
    with atomic_open(csv_path) as fh:
        w = csv.writer(fh)
        w.writerow(VALIDATION_CSV_COLUMNS)
        for t in v.targets:
            w.writerow(_target_cells(t))
    md = ["# HBQ validation: our models vs the paper", ""]
    md += [f"- {n}" for n in v.notes]
    md += [
        "",
        f"Targets: {validation_summary(v)}.",
        "",
        "*fitted*: the PE model was fitted on the paper's figure (or on the points it is "
        "computed from), so agreement is in sample; the leave-one-out columns show the model "
        "refitted without those points. *predicted*: the paper's figure was not used in any "
        "fit.",
        "",
    ]
    for group, title in _GROUP_TITLES.items():
        rows = v.select(group)
        if not rows:
            continue
        md += [f"## {title}", ""]
        # the [R-PM]-accounting pair only where the group has it
        has_as_paper = any(not math.isnan(t.ours_as_paper) for t in rows)
        has_loo = any(not math.isnan(t.ours_loo) for t in rows)
        cols = [
            c
            for c in _MD_HEADERS
            if (has_as_paper or c not in _AS_PAPER_COLUMNS) and (has_loo or c not in _LOO_COLUMNS)
        ]
        keep = [VALIDATION_CSV_COLUMNS.index(c) for c in cols]
        md.append(
            _md_table(
                [_MD_HEADERS[c] for c in cols],
                [[_target_cells(t)[i] for i in keep] for t in rows],
            )
        )
        sources = sorted({" ".join(t.source.split()) for t in rows})
        md += ["", "Sources: " + "; ".join(sources), ""]
    md_path = out / "hbq_validation.md"
    write_text(md_path, "\n".join(md) + "\n")
    return [csv_path, md_path]


# ---------------------------------------------------------------------------------------------
# Cost report


def cost_rows(breakdowns: Sequence[CostBreakdown]) -> list[dict[str, object]]:
    """Every figure of the breakdowns as flat rows (columns :data:`COST_CSV_COLUMNS`).

    Area rows appear once per architecture; energy rows once per (architecture, workload).
    """
    rows: list[dict[str, object]] = []
    seen_area: set[str] = set()
    for cb in breakdowns:
        if cb.arch not in seen_area:
            seen_area.add(cb.arch)
            for comp, val in cb.area_um2.items():
                rows.append(
                    dict(
                        arch=cb.arch,
                        workload="",
                        node_nm=cb.node_nm,
                        quantity="area",
                        component=comp,
                        value=val,
                        unit="um2",
                        sigma=cb.area_sigma_um2[comp],
                        source=cb.sources[comp],
                    )
                )
            pe = cb.mac_pe
            rows.append(
                dict(
                    arch=cb.arch,
                    workload="",
                    node_nm=cb.node_nm,
                    quantity="pe_area",
                    component="pe_per_mac",
                    value=pe.area_um2_per_mac,
                    unit="um2/MAC",
                    sigma=pe.area_sigma_um2_per_mac,
                    source=pe.source,
                )
            )
            rows.append(
                dict(
                    arch=cb.arch,
                    workload="",
                    node_nm=cb.node_nm,
                    quantity="pe_energy",
                    component="pe_per_mac",
                    value=pe.energy_fj_per_mac,
                    unit="fJ/MAC",
                    sigma=pe.energy_sigma_fj_per_mac,
                    source=pe.source,
                )
            )
        for comp, val in cb.energy_j.items():
            rows.append(
                dict(
                    arch=cb.arch,
                    workload=cb.workload,
                    node_nm=cb.node_nm,
                    quantity="energy",
                    component=comp,
                    value=val,
                    unit="J",
                    sigma=cb.energy_sigma_j[comp],
                    source=cb.sources[comp],
                )
            )
    return rows


_SYSTEM_COLORS = {
    "pe_array": OKABE_ITO[0],  # blue
    "act_buffer": OKABE_ITO[4],  # sky blue
    "wgt_buffer": OKABE_ITO[2],  # bluish green
    "psum_buffer": OKABE_ITO[6],  # yellow
    "psum_logic": OKABE_ITO[5],  # vermillion
    "dram": OKABE_ITO[3],  # reddish purple
    "leakage": "#999999",  # grey: an overhead, not a unit
}
"""Accelerator components (area and energy charts): the Okabe-Ito colours."""

_PE_COLORS = dict(
    zip(
        (
            "multiplier",
            "adder_tree",
            "mac_datapath",
            "timing_upsizing",
            "operand_registers",
            "dequant",
            "accumulate",
            "l2_scaling",
            "fp_reduction_depth",
            "pe_family_offset",
        ),
        TOL_MUTED,
        strict=True,
    )
) | {"published PE": "#666666"}
"""PE-model parts (PE chart): Paul Tol's muted colours; a published whole-PE figure in grey."""

_COMPONENT_ORDER = (*_SYSTEM_COLORS, *_PE_COLORS)


def _color(name: str) -> str:
    """One colour per component name in every chart."""
    if name in _SYSTEM_COLORS:
        return _SYSTEM_COLORS[name]
    if name in _PE_COLORS:
        return _PE_COLORS[name]
    return "#BBBBBB"


_SIGMA_LABEL = "1 sigma (total)"


def _stacked(ax, labels: list[str], parts: dict[str, list[float]], errs: list[float]) -> None:
    x = np.arange(len(labels))
    bottom = np.zeros(len(labels))
    for comp, vals in parts.items():
        v = np.asarray(vals, dtype=np.float64)
        if not v.any():
            continue
        ax.bar(x, v, 0.6, bottom=bottom, label=comp, color=_color(comp), edgecolor="white", lw=0.4)
        bottom += v
    ax.errorbar(
        x, bottom, yerr=errs, fmt="none", ecolor="black", capsize=3, lw=0.8, label=_SIGMA_LABEL
    )
    ax.set_xticks(x, labels, fontsize=7, rotation=30, ha="right")
    ax.set_xlabel("architecture", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _legend(fig: Figure, axes: Sequence[Any]) -> None:
    """One legend for the whole figure, to the right of the axes (it covers no data)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    # components in stacking order, the error bar last
    handles = dict(sorted(handles.items(), key=lambda kv: kv[0] == _SIGMA_LABEL))
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside right upper",
        fontsize=7,
        title="component",
        title_fontsize=7,
        frameon=False,
    )


def _archs(breakdowns: Sequence[CostBreakdown]) -> list[CostBreakdown]:
    seen: dict[str, CostBreakdown] = {}
    for cb in breakdowns:
        seen.setdefault(cb.arch, cb)
    return list(seen.values())


def _node(breakdowns: Sequence[CostBreakdown]) -> float:
    nodes = {cb.node_nm for cb in breakdowns}
    if len(nodes) != 1:
        raise ValueError(
            "one report is for one technology node; got breakdowns at "
            + ", ".join(f"{n:g} nm" for n in sorted(nodes))
        )
    return nodes.pop()


def _cost_caption(breakdowns: Sequence[CostBreakdown], what: str, runs: bool) -> str:
    """Where a cost chart's numbers come from: model files, node, workloads, simulator mode."""
    node = _node(breakdowns)
    archs = ", ".join(display_arch(cb.arch) for cb in _archs(breakdowns))
    text = (
        f"{what}. Source: coaccel cost model (docs/cost_model.md): PE model fitted to "
        "arch_configs/cost/pe_calibration_28nm.yaml, SRAM model sram_28nm.yaml, accelerator "
        f"figures system_28nm.yaml; {node:g} nm"
        + (" (28 nm figures scaled with tech_scaling.yaml)" if node != 28 else "")
        + f". Architectures: {archs} (arch_configs/hbq_asic/)."
    )
    if runs:
        sel = [cb for cb in breakdowns if cb.energy_j]
        workloads = ", ".join(dict.fromkeys(cb.workload for cb in sel))
        modes = ", ".join(sorted({cb.sim_mode for cb in sel if cb.sim_mode}))
        text += (
            f" Workloads: {workloads}; HBQ ASIC simulator, mode {modes or 'n/a'}; DRAM bytes "
            "from the simulated traces."
        )
    return text + (
        " Error bars: one sigma of the total (components independent). Deterministic: no "
        "random seed."
    )


def _captions(breakdowns: Sequence[CostBreakdown]) -> dict[str, str]:
    """The caption of each cost chart, by file stem (the charts and the pages use them)."""
    published = [display_arch(cb.arch) for cb in _archs(breakdowns) if cb.mac_pe.model is None]
    return {
        "cost_area": _cost_caption(breakdowns, "Accelerator area by component", runs=False),
        "cost_energy": _cost_caption(breakdowns, "Energy by component per workload run", runs=True),
        "cost_pe": _cost_caption(breakdowns, "PE area and energy per MAC by part", runs=False)
        + (
            f" {', '.join(published)}: published per-MAC figures (system_28nm.yaml), one segment."
            if published
            else ""
        ),
    }


def plot_area(breakdowns: Sequence[CostBreakdown], out_dir: str | Path) -> list[Path]:
    """Stacked bars of area by component, one bar per architecture (``cost_area``)."""
    archs = _archs(breakdowns)
    node = _node(breakdowns)
    comps = list(dict.fromkeys(k for cb in archs for k in cb.area_um2))
    fig = new_figure(max(7.0, 1.0 * len(archs) + 4.5), 4.2, _captions(breakdowns)["cost_area"])
    ax = fig.add_subplot()
    _stacked(
        ax,
        [display_arch(cb.arch) for cb in archs],
        {c: [cb.area_um2.get(c, 0.0) / 1e6 for cb in archs] for c in comps},
        [cb.total_area_sigma_um2 / 1e6 for cb in archs],
    )
    ax.set_ylabel("area (mm²)")
    ax.set_title(f"Accelerator area by component, {node:g} nm", fontsize=9)
    _legend(fig, [ax])
    return save_figure(fig, Path(out_dir) / "cost_area")


def plot_energy(breakdowns: Sequence[CostBreakdown], out_dir: str | Path) -> list[Path]:
    """Stacked bars of energy by component: one panel per workload, one bar per architecture
    (``cost_energy``)."""
    runs = [cb for cb in breakdowns if cb.energy_j]
    if not runs:
        return []
    node = _node(runs)
    comps = list(dict.fromkeys(k for cb in runs for k in cb.energy_j))
    workloads = list(dict.fromkeys(cb.workload for cb in runs))
    n_arch = max(sum(1 for cb in runs if cb.workload == w) for w in workloads)
    fig = new_figure(
        max(7.0, len(workloads) * (0.55 * n_arch + 1.0) + 3.0),
        4.6,
        _captions(breakdowns)["cost_energy"],
    )
    axes = fig.subplots(1, len(workloads), sharey=True, squeeze=False)[0]
    for ax, w in zip(axes, workloads, strict=True):
        sel = [cb for cb in runs if cb.workload == w]
        _stacked(
            ax,
            [display_arch(cb.arch) for cb in sel],
            {c: [cb.energy_j.get(c, 0.0) for cb in sel] for c in comps},
            [cb.total_energy_sigma_j for cb in sel],
        )
        ax.set_title(w, fontsize=8)
    axes[0].set_ylabel("energy per run (J)")
    fig.suptitle(f"Energy by component per workload run, {node:g} nm", fontsize=9)
    _legend(fig, axes)
    return save_figure(fig, Path(out_dir) / "cost_energy")


def plot_pe(breakdowns: Sequence[CostBreakdown], out_dir: str | Path) -> list[Path]:
    """Per-MAC PE area and energy by PE component (PE-model architectures; published PEs as
    one bar segment)."""
    archs = _archs(breakdowns)
    node = _node(breakdowns)
    fig = new_figure(max(9.0, 2.0 * len(archs) + 5.0), 4.4, _captions(breakdowns)["cost_pe"])
    axes = []
    for j, (attr, unit) in enumerate((("area", "µm²/MAC"), ("energy", "fJ/MAC"))):
        ax = fig.add_subplot(1, 2, j + 1)
        axes.append(ax)
        parts: dict[str, list[float]] = {}
        for i, cb in enumerate(archs):
            m = cb.mac_pe.model
            got = (
                dict(m.area_parts_um2_per_mac if attr == "area" else m.energy_parts_fj_per_mac)
                if m is not None
                else {
                    "published PE": cb.mac_pe.area_um2_per_mac
                    if attr == "area"
                    else cb.mac_pe.energy_fj_per_mac
                }
            )
            for k, v in got.items():
                parts.setdefault(k, [0.0] * len(archs))[i] = v
        errs = [
            (
                cb.mac_pe.area_sigma_um2_per_mac
                if attr == "area"
                else cb.mac_pe.energy_sigma_fj_per_mac
            )
            for cb in archs
        ]
        _stacked(ax, [display_arch(cb.arch) for cb in archs], parts, errs)
        ax.set_ylabel(f"PE {attr} per MAC ({unit})")
        ax.set_title(f"PE {attr}", fontsize=8)
    fig.suptitle(f"PE per MAC by part, {node:g} nm", fontsize=9)
    _legend(fig, axes)
    return save_figure(fig, Path(out_dir) / "cost_pe")


def _fmt_val(v: float, sigma: float) -> tuple[str, str]:
    return f"{v:.4g}", f"{sigma:.2g}"


def _sections(breakdowns: Sequence[CostBreakdown], title: str, notes: Sequence[str]):
    """(heading, paragraphs, table headers, table rows) sections shared by MD and HTML."""
    archs = _archs(breakdowns)
    secs: list[Any] = []
    pe_rows = []
    for cb in archs:
        pe = cb.mac_pe
        pe_rows.append(
            [
                cb.arch,
                *_fmt_val(pe.area_um2_per_mac, pe.area_sigma_um2_per_mac),
                *_fmt_val(pe.energy_fj_per_mac, pe.energy_sigma_fj_per_mac),
                pe.source,
            ]
        )
    secs.append(
        (
            "PE per MAC",
            [],
            ["arch", "area (um2/MAC)", "1 sigma", "energy (fJ/MAC)", "1 sigma", "source"],
            pe_rows,
        )
    )
    area_rows = []
    for cb in archs:
        for comp, v in cb.area_um2.items():
            area_rows.append(
                [
                    cb.arch,
                    comp,
                    *_fmt_val(v, cb.area_sigma_um2[comp]),
                    " ".join(cb.sources[comp].split()),
                ]
            )
        area_rows.append(
            [cb.arch, "total", *_fmt_val(cb.total_area_um2, cb.total_area_sigma_um2), ""]
        )
    secs.append(
        (
            "Area by component",
            [],
            ["arch", "component", "area (um2)", "1 sigma", "source"],
            area_rows,
        )
    )
    runs = [cb for cb in breakdowns if cb.energy_j]
    if runs:
        comps = list(dict.fromkeys(k for cb in runs for k in cb.energy_j))
        rows = []
        for cb in runs:
            rows.append(
                [
                    cb.workload,
                    cb.arch,
                    cb.sim_mode,
                    *[f"{cb.energy_j.get(c, 0.0):.4g}" for c in comps],
                    f"{cb.total_energy_j:.4g}",
                    f"{cb.total_energy_sigma_j:.2g}",
                    f"{cb.seconds * 1e3:.4g}",
                ]
            )
        secs.append(
            (
                "Energy by component (J per run)",
                [
                    "Components as in `coaccel.cost.evaluate`; totals include leakage and "
                    "partial-sum logic, which the paper's system model leaves out."
                ],
                [
                    "workload",
                    "arch",
                    "sim mode",
                    *comps,
                    "total (J)",
                    "1 sigma (J)",
                    "run time (ms)",
                ],
                rows,
            )
        )
        src_rows = []
        for cb in archs:
            for comp in comps:
                for r in runs:
                    if r.arch == cb.arch and comp in r.sources:
                        src_rows.append([cb.arch, comp, " ".join(r.sources[comp].split())])
                        break
        secs.append(("Energy sources", [], ["arch", "component", "source"], src_rows))
    return title, list(notes), secs


def write_cost_report(
    breakdowns: Sequence[CostBreakdown],
    out_dir: str | Path,
    *,
    title: str = "HBQ ASIC area and energy report",
    notes: Sequence[str] = (),
) -> list[Path]:
    """Write the per-component area/energy report: charts, CSV, Markdown and HTML.

    Args:
        breakdowns: one :class:`~coaccel.cost.CostBreakdown` per (architecture, workload) run,
            or area-only breakdowns.
        out_dir: output folder (created if needed).
        title: page title.
        notes: remarks printed under the title (simulator mode, node...).

    Returns:
        Every path written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    paths += plot_area(breakdowns, out)
    paths += plot_energy(breakdowns, out)
    paths += plot_pe(breakdowns, out)
    csv_path = out / "cost_report.csv"
    with atomic_open(csv_path) as fh:
        w = csv.DictWriter(fh, fieldnames=COST_CSV_COLUMNS)
        w.writeheader()
        for r in cost_rows(breakdowns):
            w.writerow(
                {k: (" ".join(str(v).split()) if k == "source" else v) for k, v in r.items()}
            )
    paths.append(csv_path)
    title, note_list, secs = _sections(breakdowns, title, notes)
    captions = _captions(breakdowns)
    pngs = [p for p in paths if p.suffix == ".png"]
    md = [f"# {title}", ""] + [f"- {n}" for n in note_list] + [""]
    for png in pngs:
        md += [f"![{png.stem}]({png.name})", "", f"*{captions[png.stem]}*", ""]
    for heading, paras, headers, rows in secs:
        md += [f"## {heading}", ""] + paras + ([""] if paras else [])
        md += [_md_table(headers, rows), ""]
    md += [
        "Every figure: value, one-sigma uncertainty and source (`cost_report.csv`); the "
        "model and its calibration are described in docs/cost_model.md.",
        "",
    ]
    md_path = out / "cost_report.md"
    write_text(md_path, "\n".join(md))
    paths.append(md_path)
    e = html.escape
    h = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
        "padding:2px 6px}th{background:#eee}img{max-width:100%}"
        "figcaption{font-size:12px;color:#333}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        "<ul>",
    ]
    h += [f"<li>{e(n)}</li>" for n in note_list] + ["</ul>"]
    # The images are embedded (base64 PNG): the page is one self-contained file.
    for png in pngs:
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        h += [
            "<figure>",
            f"<img src='data:image/png;base64,{data}' alt='{e(png.stem)}'>",
            f"<figcaption>{e(captions[png.stem])}</figcaption>",
            "</figure>",
        ]
    for heading, paras, headers, rows in secs:
        h.append(f"<h2>{e(heading)}</h2>")
        h += [f"<p>{e(p)}</p>" for p in paras]
        h.append("<table><tr>" + "".join(f"<th>{e(x)}</th>" for x in headers) + "</tr>")
        h += ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows]
        h.append("</table>")
    h += [
        "<p>Every figure: value, one-sigma uncertainty and source (cost_report.csv); see "
        "docs/cost_model.md.</p>",
        "</body></html>",
    ]
    html_path = out / "cost_report.html"
    write_text(html_path, "\n".join(h))
    paths.append(html_path)
    return paths
