"""HBQ ASIC reports: the validation table and the per-component area/energy report.

The computations live in :mod:`coaccel.targets.hbq_asic.validation` and :mod:`coaccel.cost`;
this module only formats, writes and plots. Files:

* :func:`write_validation_report` → ``hbq_validation.csv`` and ``hbq_validation.md`` (every
  target with our value, the paper's, the error, the tolerance, our one-sigma uncertainty, the
  leave-one-out prediction where there is one, the source and the note saying why we differ).
* :func:`write_cost_report` → ``cost_area.{png,svg}``, ``cost_energy.{png,svg}``,
  ``cost_pe.{png,svg}`` (per-component stacked bars), ``cost_report.csv`` (every figure with
  unit, one-sigma uncertainty and source), ``cost_report.md`` and ``cost_report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from coaccel.cost import CostBreakdown
from coaccel.report.document import (
    Chart,
    ReportPart,
    ReportSettings,
    Section,
    Table,
    write_report,
)
from coaccel.report.document import Figure as Number
from coaccel.report.style import OKABE_ITO, TOL_MUTED, display_arch, new_figure, save_figure
from coaccel.report.validation import (
    format_validation_table as _format_table,
)
from coaccel.report.validation import (
    write_validation_report as _write_report,
)
from coaccel.targets.hbq_asic.validation import Validation

__all__ = [
    "COST_CSV_COLUMNS",
    "GROUP_TITLES",
    "cost_part",
    "cost_rows",
    "report_part",
    "format_validation_table",
    "plot_area",
    "plot_energy",
    "plot_pe",
    "write_cost_report",
    "write_validation_report",
]

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

GROUP_TITLES = {
    "pe_area": "PE area per MAC (published rows, ±5 %)",
    "pe_energy": "PE energy per MAC (published rows, ±5 %)",
    "claim": "Headline hardware claims",
    "system_energy": "System energy per 2048-token prefill (±10 %)",
    "speedup": "Iso-area speedup vs Amove (geometric mean of 5 models)",
    "synthesis": "PE model vs our RTL's Yosys gate counts (ratios along sweeps)",
}


"""Section titles of the HBQ validation, in order."""


def format_validation_table(v: Validation) -> str:
    """Readable text of the HBQ validation (what ``coaccel validate hbq`` prints)."""
    return _format_table(v, GROUP_TITLES)


def write_validation_report(v: Validation, out_dir: str | Path) -> list[Path]:
    """Write ``hbq_validation.csv`` and ``hbq_validation.md``.

    Args:
        v: the validation.
        out_dir: output folder (created if needed).

    Returns:
        The two paths.
    """
    return _write_report(
        v,
        out_dir,
        stem="hbq_validation",
        title="HBQ validation: our models vs the paper",
        group_titles=GROUP_TITLES,
        intro=(
            "*fitted*: the PE model was fitted on the paper's figure (or on the points it is "
            "computed from), so agreement is in sample; the leave-one-out columns show the "
            "model refitted without those points. *predicted*: the paper's figure was not used "
            "in any fit.",
        ),
    )


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


def cost_part(
    breakdowns: Sequence[CostBreakdown],
    out_dir: str | Path,
    *,
    title: str = "HBQ ASIC: area and energy",
    notes: Sequence[str] = (),
) -> ReportPart:
    """The HBQ ASIC's part of an area/energy report: charts, tables and every figure.

    Args:
        breakdowns: one :class:`~coaccel.cost.CostBreakdown` per (architecture, workload) run,
            or area-only breakdowns.
        out_dir: folder the charts are written to (PNG + SVG).
        title: the part's heading.
        notes: remarks under the heading (simulator mode, node...).

    Returns:
        The :class:`~coaccel.report.document.ReportPart`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    captions = _captions(breakdowns)
    drawn = [plot_area(breakdowns, out)]
    if any(cb.energy_j for cb in breakdowns):
        drawn.append(plot_energy(breakdowns, out))
    drawn.append(plot_pe(breakdowns, out))
    charts = tuple(
        Chart(png=files[0], caption=captions[files[0].stem], others=tuple(files[1:]))
        for files in drawn
    )
    _, note_list, secs = _sections(breakdowns, title, notes)
    sections = [Section("Charts", charts=charts)]
    sections += [
        Section(
            heading,
            paragraphs=tuple(paras),
            tables=(Table(tuple(headers), tuple(tuple(str(c) for c in r) for r in rows)),),
        )
        for heading, paras, headers, rows in secs
    ]
    figures = tuple(
        Number(
            arch=str(r["arch"]),
            quantity=str(r["quantity"]),
            component=str(r["component"]),
            value=_f(r["value"]),
            unit=str(r["unit"]),
            sigma=_f(r["sigma"]),
            source=str(r["source"]),
            workload=str(r["workload"]),
            node_nm=_f(r["node_nm"]),
        )  # fmt: skip
        for r in cost_rows(breakdowns)
    )
    return ReportPart(
        kind="hbq_asic", title=title, notes=tuple(note_list), sections=tuple(sections),
        figures=figures,
    )  # fmt: skip


def _f(v: object) -> float:
    """A cost row's number as a float."""
    return float(v) if isinstance(v, (int, float, str)) else float("nan")


def report_part(archs: Sequence[Any], settings: ReportSettings) -> ReportPart:
    """Simulate and price HBQ ASIC architectures for ``coaccel report``.

    Every architecture runs every workload (``settings.workloads``, default the five models of
    [R-PM] src/perf_model.py) at ``settings.scenario`` (default ``prefill_2k``) in
    ``settings.mode``; :func:`coaccel.cost.evaluate` prices each run at ``settings.node_nm``.
    With ``settings.area_only`` the designs are priced without a run.

    Args:
        archs: loaded HBQ ASIC configs.
        settings: the report's settings.

    Returns:
        The part (charts written into ``settings.out_dir``).
    """
    from coaccel.cost import arch_area, evaluate
    from coaccel.sim.hbq_asic import simulate

    from . import TARGET

    node = settings.node_nm
    role = TARGET.report
    workloads = settings.workloads or (role.default_workloads if role else ())
    scenario = settings.scenario or (role.default_scenario if role else None) or "prefill_2k"
    if settings.area_only:
        breakdowns = [arch_area(a, node) for a in archs]
    else:
        breakdowns = [
            evaluate(simulate(a, f"{w}:{scenario}", mode=settings.mode), a, node)  # type: ignore[arg-type]
            for w in workloads
            for a in archs
        ]
    notes = [
        f"technology node {node:g} nm"
        + (" (scaled from 28 nm, docs/cost_model.md)" if node != 28 else ""),
    ]
    if not settings.area_only:
        notes.append(
            f"workloads {', '.join(workloads)} ({scenario}); simulator mode '{settings.mode}'"
            + (
                " (closed form; its cycles differ from the cycle-approximate mode's by "
                "-0.69 to +0.002 % over the 154 shipped architecture x workload runs measured, "
                "docs/hbq_sim.md)"
                if settings.mode == "analytical"
                else ""
            )
        )
    return cost_part(breakdowns, settings.out_dir, notes=notes)


def write_cost_report(
    breakdowns: Sequence[CostBreakdown],
    out_dir: str | Path,
    *,
    title: str = "HBQ ASIC area and energy report",
    notes: Sequence[str] = (),
) -> list[Path]:
    """Write the per-component area/energy report of HBQ ASIC runs: charts, CSV, Markdown
    and HTML (:func:`coaccel.report.document.write_report` of :func:`cost_part`).

    Args:
        breakdowns: one :class:`~coaccel.cost.CostBreakdown` per (architecture, workload) run,
            or area-only breakdowns.
        out_dir: output folder (created if needed).
        title: page title.
        notes: remarks printed under the title (simulator mode, node...).

    Returns:
        Every path written.
    """
    part = cost_part(breakdowns, out_dir, title="HBQ ASIC", notes=())
    return write_report([part], out_dir, title=title, notes=notes)
