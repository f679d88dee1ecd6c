"""The sweep report: fronts, the selected design and its cost breakdown, as one HTML page.

The analysis lives in :mod:`coaccel.dse.analysis`; this module only plots and writes. Files of
:func:`write_sweep_report` (``coaccel sweep-report``):

* ``sweep_report.html``: one self-contained page (no network needed to open it): per workload,
  the interactive front (plotly, its JavaScript embedded; hover a point for its parameters and
  metrics, pick the objectives on the axes from the dropdowns), the PNG charts embedded as data
  URIs, the front table, every broken-down design's components with units, sources,
  fitted / predicted and validation error, and the provenance (config digests, versions, seed,
  the sweep spec's text).
* ``sweep_report.md``: the same tables, with the PNGs beside it.
* ``sweep_points.csv``: every point of the sweep (parameters, objectives with units, status,
  feasible, on the front, selected).
* ``sweep_breakdown.csv``: every component figure of the broken-down designs.
* PNGs: ``front_<workload>_<x>_vs_<y>.png`` (2-D fronts: dominated points grey, infeasible
  ones hollow, the selected design starred), ``parallel_<workload>.png`` (more than two
  objectives) and ``breakdown_<workload>.png`` (area and energy by component).

An objective with an uncertainty per point (:attr:`~coaccel.dse.analysis.FrontAnalysis.spreads`:
a stored ``<metric>_std``, e.g. the perplexity's spread over text windows, or a
``<metric>_lower`` / ``<metric>_upper`` interval) gets error bars in the 2-D fronts and the
interactive front, ``value ± std`` (or ``value [lower, upper]``) in the points table, its spread
metrics as columns of ``sweep_points.csv`` and a line saying what the bars are; a sweep without
one gets exactly the report it got before.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..dse.analysis import FrontAnalysis, PointBreakdown, Spread, SweepAnalysis
from .files import atomic_open, write_text
from .style import OKABE_ITO, TOL_MUTED, new_figure, save_figure

__all__ = [
    "BREAKDOWN_CSV_COLUMNS",
    "HTML_NAME",
    "MAX_PAIRS",
    "breakdown_rows",
    "interactive_front",
    "plot_breakdown",
    "plot_fronts",
    "plot_parallel",
    "point_rows",
    "write_sweep_report",
]

HTML_NAME = "sweep_report.html"
"""The report page's file name."""

MAX_PAIRS = 6
"""At most this many objective pairs get a 2-D front PNG (the interactive front has them all)."""

BREAKDOWN_CSV_COLUMNS = (
    "point_id",
    "workload",
    "selected",
    "component",
    "quantity",
    "value",
    "unit",
    "sigma",
    "model",
    "role",
    "validation_error_pct",
    "validation",
    "source",
)
"""Columns of ``sweep_breakdown.csv``: ``role`` is ``fitted`` / ``predicted`` / ``published``
(:data:`coaccel.dse.analysis.ROLES`); ``validation_error_pct`` empty where no validation exists;
``sigma`` one sigma in ``unit``."""

_GREY = "#AAAAAA"
_FRONT = OKABE_ITO[0]
_SELECTED = OKABE_ITO[5]


def _plotly(module: str) -> Any:
    """Import a plotly module, or say which extra brings it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        from ..spine.errors import MissingDependencyError

        raise MissingDependencyError(
            "the sweep report's interactive front needs plotly: pip install 'coaccel[dse]' "
            "(or pip install plotly)"
        ) from None


def _short(pid: str) -> str:
    return pid[:8]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, (float, np.floating)):
        return "" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)


def _caption(a: SweepAnalysis, fa: FrontAnalysis, what: str) -> str:
    s = a.spec.spec
    strat = s.strategy.kind + (
        f" (seed {s.strategy.seed}, {s.strategy.samples} samples)" if s.strategy.seed is not None
        else ""
    )  # fmt: skip
    n_feas = int(fa.feasible.sum())
    return (
        f"{what} Source: coaccel sweep of {Path(a.spec.source).name} (base "
        f"{Path(a.spec.base_path).stem}, config digest {a.spec.base_digest[:12]}), workload "
        f"{fa.title}, simulator mode {fa.mode}, strategy {strat}; {len(fa.rows)} evaluated "
        f"points ({len(fa.failed)} more failed), {n_feas} feasible"
        + (f" (limits: {'; '.join(s.limits)})" if s.limits else "")
        + f", {int(fa.front.sum())} on the front. Energy and area: coaccel.cost.evaluate "
        "(docs/cost_model.md)."
    )


def _key(fa: FrontAnalysis) -> str:
    """File-name part of a front: the workload, and the stage when there are stages."""
    return _slug(fa.workload if fa.stage is None else f"{fa.workload}_{fa.stage}")


def _sel_label(fa: FrontAnalysis) -> str:
    if fa.selected is None:
        return ""
    return f"selected {_short(fa.rows[fa.selected].point_id)}"


def plot_fronts(a: SweepAnalysis, fa: FrontAnalysis, out_dir: Path) -> list[tuple[Path, str]]:
    """2-D fronts for the objective pairs (at most :data:`MAX_PAIRS`).

    Dominated feasible points are grey, infeasible ones hollow grey, front points blue and
    the selected design a vermillion star. An objective with a spread
    (:attr:`~coaccel.dse.analysis.FrontAnalysis.spreads`) gets error bars in each point's
    colour, said in the axis title, the legend and the caption.

    Args:
        a: the analysis.
        fa: one workload's front.
        out_dir: output folder.

    Returns:
        ``(png path, caption)`` per chart.
    """
    objs = fa.objectives
    out: list[tuple[Path, str]] = []
    pairs = [(i, j) for i in range(len(objs)) for j in range(i + 1, len(objs))][:MAX_PAIRS]
    for i, j in pairs:
        cap = _caption(
            a,
            fa,
            f"Pareto front over {', '.join(o.label for o in objs)} seen in {objs[i].metric} "
            f"vs {objs[j].metric}: front points blue (a front point can look dominated in a "
            "2-D view of more objectives), dominated feasible points grey, infeasible hollow, "
            f"{_sel_label(fa) or 'no selected design'} (star; rule: {fa.selection})."
            + _bars_caption(fa, (i, j)),
        )
        fig = new_figure(6.0, 3.6, cap)
        ax = fig.add_subplot()
        v = fa.values
        infeas = ~fa.feasible & ~np.isnan(v[:, [i, j]]).any(axis=1)
        dom = fa.feasible & ~fa.front
        sx, sy = fa.spread(i), fa.spread(j)
        if sx is not None or sy is not None:
            sel = np.zeros(len(fa.rows), dtype=bool)
            if fa.selected is not None:
                sel[fa.selected] = True
            for mask, color in ((infeas, _GREY), (dom, _GREY), (fa.front & ~sel, _FRONT),
                                (sel, _SELECTED)):  # fmt: skip
                _error_bars(ax, v, i, j, sx, sy, mask, color)
            none: list[float] = []
            for axis, sp in (("x", sx), ("y", sy)):  # legend entries (no data)
                if sp is not None:
                    ax.errorbar(none, none, xerr=none if axis == "x" else None,
                                yerr=none if axis == "y" else None, fmt="none", ecolor="black",
                                elinewidth=0.8, capsize=2,
                                label=f"{axis} error bars: {sp.short}")  # fmt: skip
        if infeas.any():
            ax.scatter(v[infeas, i], v[infeas, j], s=18, facecolors="none",
                       edgecolors=_GREY, label="infeasible (a limit fails)")  # fmt: skip
        if dom.any():
            ax.scatter(v[dom, i], v[dom, j], s=18, color=_GREY, label="dominated")
        if fa.front.any():
            ax.scatter(v[fa.front, i], v[fa.front, j], s=26, color=_FRONT, label="Pareto front")
        if len(objs) == 2 and fa.front.any():
            order = np.argsort(v[fa.front, i])
            ax.plot(v[fa.front, i][order], v[fa.front, j][order], color=_FRONT, lw=0.8)
        if fa.selected is not None:
            k = fa.selected
            ax.scatter(
                [v[k, i]], [v[k, j]], s=140, marker="*", color=_SELECTED, edgecolors="black",
                linewidths=0.5, zorder=5, label=_sel_label(fa),
            )  # fmt: skip
        ax.set_xlabel(objs[i].label + f" ({objs[i].sense}imize)" + _bars_axis(sx), fontsize=8)
        ax.set_ylabel(objs[j].label + f" ({objs[j].sense}imize)" + _bars_axis(sy), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.set_title(fa.title, fontsize=9)
        fig.legend(loc="outside right upper", fontsize=7, frameon=False)
        base = out_dir / f"front_{_key(fa)}_{_slug(objs[i].metric)}_vs_{_slug(objs[j].metric)}"
        out.append((save_figure(fig, base, ("png",))[0], cap))
    return out


def _bars_axis(sp: Spread | None) -> str:
    """What an axis's error bars are, for its title ("" without bars)."""
    return "" if sp is None else f"\nerror bars: {sp.short}"


def _bars_caption(fa: FrontAnalysis, objectives: Sequence[int]) -> str:
    """Caption sentences saying what the error bars of these objectives are."""
    return "".join(
        f" Error bars on {sp.metric}: {sp.what}."
        for j in objectives
        if (sp := fa.spread(j)) is not None
    )


def _error_bars(
    ax: Any, v: np.ndarray, i: int, j: int, sx: Spread | None, sy: Spread | None,
    mask: np.ndarray, color: str,
) -> None:  # fmt: skip
    """Error bars of the points ``mask`` (x: objective ``i``, y: objective ``j``)."""
    mask = mask & ~np.isnan(v[:, [i, j]]).any(axis=1)
    if not mask.any():
        return

    def err(sp: Spread | None) -> np.ndarray | None:
        if sp is None:
            return None
        # NaN (no bar) where a point has no spread: matplotlib draws nothing for it
        return np.vstack([sp.below[mask], sp.above[mask]])

    ax.errorbar(v[mask, i], v[mask, j], xerr=err(sx), yerr=err(sy), fmt="none", ecolor=color,
                elinewidth=0.8, capsize=2, alpha=0.8, zorder=1)  # fmt: skip


def plot_parallel(a: SweepAnalysis, fa: FrontAnalysis, out_dir: Path) -> tuple[Path, str] | None:
    """Parallel coordinates over the objectives (only for more than two objectives).

    Each objective axis runs from its best value (bottom) to its worst (top) over the feasible
    points, so lower is better on every axis.

    Returns:
        ``(png path, caption)``, or None with two objectives or no feasible point.
    """
    objs = fa.objectives
    if len(objs) <= 2 or not fa.feasible.any():
        return None
    cap = _caption(
        a,
        fa,
        "Parallel coordinates of the feasible points: each axis runs from the best value "
        "(bottom) to the worst (top) of that objective over the feasible points, so lower is "
        "better everywhere; front blue, dominated grey, the selected design vermillion "
        f"(rule: {fa.selection}).",
    )
    fig = new_figure(6.5, 3.4, cap)
    ax = fig.add_subplot()
    v = fa.values[fa.feasible]
    sign = np.array([1.0 if o.sense == "min" else -1.0 for o in objs])
    m = v * sign
    lo, hi = m.min(axis=0), m.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = (m - lo) / span
    front = fa.front[fa.feasible]
    idx = np.flatnonzero(fa.feasible)
    x = np.arange(len(objs))
    for k in range(len(z)):
        if not front[k]:
            ax.plot(x, z[k], color=_GREY, lw=0.7, alpha=0.6)
    for k in range(len(z)):
        if front[k] and idx[k] != fa.selected:
            ax.plot(x, z[k], color=_FRONT, lw=1.0)
    if fa.selected is not None and fa.feasible[fa.selected]:
        k = int(np.flatnonzero(idx == fa.selected)[0])
        ax.plot(x, z[k], color=_SELECTED, lw=2.2, label=_sel_label(fa))
    ax.plot([], [], color=_FRONT, label="Pareto front")
    ax.plot([], [], color=_GREY, label="dominated")
    labels = []
    for j, o in enumerate(objs):
        best, worst = (lo[j], hi[j]) if o.sense == "min" else (-lo[j], -hi[j])
        labels.append(f"{o.label}\nbest {best:.4g}\nworst {worst:.4g}")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_yticks([0, 1], ["best", "worst"], fontsize=7)
    ax.set_ylim(-0.05, 1.05)
    for xi in x:
        ax.axvline(float(xi), color="black", lw=0.5)
    ax.set_title(fa.title, fontsize=9)
    fig.legend(loc="outside right upper", fontsize=7, frameon=False)
    path = save_figure(fig, out_dir / f"parallel_{_key(fa)}", ("png",))[0]
    return path, cap


def _colors(names: Sequence[str]) -> dict[str, str]:
    pal = (*TOL_MUTED[:9], *OKABE_ITO)
    return {n: pal[k % len(pal)] for k, n in enumerate(names)}


def plot_breakdown(a: SweepAnalysis, fa: FrontAnalysis, out_dir: Path) -> tuple[Path, str] | None:
    """Area (mm²) and energy (J) by component of the broken-down designs, stacked bars with the
    total's one-sigma uncertainty.

    Returns:
        ``(png path, caption)``, or None when no design of this workload was broken down.
    """
    bds = [
        a.breakdowns[fa.rows[k].point_id]
        for k in point_order(fa)
        if fa.rows[k].point_id in a.breakdowns
    ]
    if not bds:
        return None
    sel = fa.rows[fa.selected].point_id if fa.selected is not None else None
    cap = _caption(
        a,
        fa,
        "Area and energy by component of the selected design (first, marked *) and the front "
        "points closest to the ideal point, re-evaluated with coaccel.simulate and "
        "coaccel.cost.evaluate; error bars: one sigma of the total (components independent). "
        "Sources per component in the report's tables.",
    )
    fig = new_figure(7.0, 3.4, cap)
    ax_a, ax_e = fig.subplots(1, 2)
    labels = [_short(b.row.point_id) + (" *" if b.row.point_id == sel else "") for b in bds]
    x = np.arange(len(bds))
    for ax, quantity, scale, ylabel in (
        (ax_a, "area", 1e-6, "area [mm2]"),
        (ax_e, "energy", 1.0, "energy per run [J]"),
    ):
        comps = list(dict.fromkeys(
            f.component for b in bds for f in b.figures if f.quantity == quantity
        ))  # fmt: skip
        colors = _colors(comps)
        bottom = np.zeros(len(bds))
        for c in comps:
            vals = np.array([
                sum(f.value for f in b.figures if f.quantity == quantity and f.component == c)
                for b in bds
            ]) * scale  # fmt: skip
            ax.bar(x, vals, 0.6, bottom=bottom, color=colors[c], label=c, edgecolor="white",
                   lw=0.4)  # fmt: skip
            bottom += vals
        # a design without that quantity (a GPU has no priced area) gets no error bar
        err = np.array([next((t.sigma for t in b.totals if t.quantity == quantity), np.nan)
                        for b in bds]) * scale  # fmt: skip
        has = ~np.isnan(err)
        if has.any():
            ax.errorbar(x[has], bottom[has], yerr=err[has], fmt="none", ecolor="black",
                        capsize=3, lw=0.8)  # fmt: skip
        ax.set_xticks(x, labels, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_xlabel("design point (id)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    handles: dict[str, Any] = {}
    for ax in (ax_a, ax_e):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7,
               title="component", title_fontsize=7, frameon=False)  # fmt: skip
    fig.suptitle(fa.title, fontsize=9)
    path = save_figure(fig, out_dir / f"breakdown_{_key(fa)}", ("png",))[0]
    return path, cap


# ---------------------------------------------------------------------------------------------
# Tables


def point_rows(a: SweepAnalysis) -> list[dict[str, Any]]:
    """Every point of the sweep as a flat record (the rows of ``sweep_points.csv``)."""
    out = []
    params = list(a.spec.spec.parameters)
    for fa in a.fronts:
        rows = [(k, r) for k, r in enumerate(fa.rows)] + [(None, r) for r in fa.failed]
        for k, r in rows:
            rec: dict[str, Any] = {
                "point_id": r.point_id,
                "workload": r.workload,
                "stage": fa.stage,
                "status": r.status,
                "feasible": None if k is None else bool(fa.feasible[k]),
                "on_front": False if k is None else bool(fa.front[k]),
                "selected": k is not None and k == fa.selected,
            }
            for p in params:
                rec[f"param.{p}"] = r.params.get(p)
            for j, o in enumerate(fa.objectives):
                rec[o.label] = None if k is None else float(fa.values[k, j])
            for j, o in enumerate(fa.objectives):
                sp = fa.spread(j)
                if sp is None:
                    continue
                stored = (sp.low, sp.high) if sp.kind == "interval" else (sp.low,)
                for name, col in zip(sp.sources, stored, strict=True):
                    label = dataclasses.replace(o, metric=name).label  # the objective's unit
                    rec[label] = None if k is None or math.isnan(col[k]) else float(col[k])
            rec["config_digest"] = r.config_digest
            rec["version"] = r.version
            rec["error"] = (r.error or "").strip().splitlines()[-1] if r.error else None
            out.append(rec)
    return out


def breakdown_rows(a: SweepAnalysis) -> list[dict[str, Any]]:
    """Every component figure of the broken-down designs (rows of ``sweep_breakdown.csv``)."""
    sel = {fa.rows[fa.selected].point_id for fa in a.fronts if fa.selected is not None}
    out = []
    for pid, b in a.breakdowns.items():
        for f in (*b.figures, *b.totals):
            out.append(
                {
                    "point_id": pid,
                    "workload": b.row.workload,
                    "selected": pid in sel,
                    "component": f.component,
                    "quantity": f.quantity,
                    "value": f.value,
                    "unit": f.unit,
                    "sigma": f.sigma,
                    "model": f.model,
                    "role": f.role,
                    "validation_error_pct": None
                    if math.isnan(f.validation_error_pct)
                    else f.validation_error_pct,
                    "validation": f.validation,
                    "source": f.source,
                }
            )
    return out


def _write_csv(path: Path, rows: list[dict[str, Any]], cols: Sequence[str] | None = None) -> Path:
    fields = list(cols) if cols else list(dict.fromkeys(k for r in rows for k in r))
    with atomic_open(path) as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})
    return path


# ---------------------------------------------------------------------------------------------
# The interactive front


def _hover(fa: FrontAnalysis, k: int) -> str:
    r = fa.rows[k]
    tags = []
    if k == fa.selected:
        tags.append("selected")
    tags.append("front" if fa.front[k] else ("dominated" if fa.feasible[k] else "infeasible"))
    lines = [f"<b>{_short(r.point_id)}</b> ({', '.join(tags)})"]
    lines += [f"{html.escape(p)} = {html.escape(str(v))}" for p, v in r.params.items()]
    for j, o in enumerate(fa.objectives):
        sp = fa.spread(j)
        text = _num(fa.values[k, j]) if sp is None else sp.cell(fa.values[k, j], k, _num)
        lines.append(f"{html.escape(o.label)} = {html.escape(text)}")
    return "<br>".join(lines)


def _finite(x: float) -> float | None:
    """A bar length for plotly (None, no bar, where NaN)."""
    return None if math.isnan(x) else float(x)


def interactive_front(fa: FrontAnalysis, div_id: str) -> str:
    """The front as a plotly scatter with x / y objective dropdowns (an HTML ``<div>`` and its
    script; the plotly library itself is embedded once per page by :func:`write_sweep_report`).
    Objectives with a spread get error bars (and their axis title says which), following the
    dropdowns.

    Args:
        fa: one workload's front.
        div_id: the plot's element id.

    Returns:
        HTML text.
    """
    go = _plotly("plotly.graph_objects")

    groups = _front_groups(fa)
    xi, yi = 0, 1 if len(fa.objectives) > 1 else 0
    bars = any(fa.spread(j) is not None for j in range(len(fa.objectives)))
    fig = go.Figure()
    for name, ks in groups.items():
        extra: dict[str, Any] = {}
        if bars:
            extra["error_x"] = _plotly_error_bars(fa, xi, name, ks)
            extra["error_y"] = _plotly_error_bars(fa, yi, name, ks)
        fig.add_trace(
            go.Scatter(
                x=[float(fa.values[k, xi]) for k in ks],
                y=[float(fa.values[k, yi]) for k in ks],
                mode="markers",
                name=name,
                marker=_marker_style(name),
                text=[_hover(fa, k) for k in ks],
                hovertemplate="%{text}<extra></extra>",
                **extra,
            )
        )
    fig.update_layout(
        updatemenus=[
            _axis_menu(fa, groups, bars, "x", xi, 0.05),
            _axis_menu(fa, groups, bars, "y", yi, 0.55),
        ],
        annotations=[
            dict(text="x:", x=0.0, xref="paper", y=1.14, yref="paper", showarrow=False),
            dict(text="y:", x=0.5, xref="paper", y=1.14, yref="paper", showarrow=False),
        ],
        xaxis_title=_axis_title(fa, xi),
        yaxis_title=_axis_title(fa, yi),
        hovermode="closest",
        template="plotly_white",
        height=520,
        margin=dict(t=90),
        legend=dict(orientation="v", x=1.02, y=1.0),
    )
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def _front_groups(fa: FrontAnalysis) -> dict[str, list[int]]:
    """The interactive front's traces: group name -> point indices, in drawing order."""
    n = len(fa.rows)
    return {
        "infeasible": [k for k in range(n) if not fa.feasible[k]],
        "dominated": [k for k in range(n) if fa.feasible[k] and not fa.front[k]],
        "Pareto front": [k for k in range(n) if fa.front[k]],
        "selected": [] if fa.selected is None else [fa.selected],
    }


_GROUP_COLORS = {"infeasible": _GREY, "dominated": _GREY, "Pareto front": _FRONT,
                 "selected": _SELECTED}  # fmt: skip
"""Colour of each interactive-front group's error bars."""


def _marker_style(name: str) -> dict[str, Any]:
    """The plotly marker of an interactive-front group (a new dict each call)."""
    style = {
        "infeasible": dict(color="rgba(0,0,0,0)", size=8, line=dict(color=_GREY, width=1)),
        "dominated": dict(color=_GREY, size=8),
        "Pareto front": dict(color=_FRONT, size=10),
        "selected": dict(
            color=_SELECTED, size=18, symbol="star", line=dict(color="black", width=1)
        ),
    }  # fmt: skip
    return style[name]


def _plotly_error_bars(fa: FrontAnalysis, j: int, name: str, ks: list[int]) -> dict[str, Any]:
    """Plotly error bars of objective ``j`` for a group (invisible without a spread)."""
    sp = fa.spread(j)
    if sp is None:
        return dict(visible=False, array=[])
    return dict(
        type="data", symmetric=False, visible=True, color=_GROUP_COLORS[name], thickness=1,
        width=3, array=[_finite(sp.above[k]) for k in ks],
        arrayminus=[_finite(sp.below[k]) for k in ks],
    )  # fmt: skip


def _axis_title(fa: FrontAnalysis, j: int) -> str:
    """Objective ``j``'s axis title, naming its error bars when it has a spread."""
    sp = fa.spread(j)
    return fa.objectives[j].label + ("" if sp is None else f" (error bars: {sp.short})")


def _axis_menu(
    fa: FrontAnalysis,
    groups: Mapping[str, list[int]],
    bars: bool,
    axis: str,
    active: int,
    x_pos: float,
) -> dict[str, Any]:
    """The dropdown that puts an objective on ``axis`` (``x`` or ``y``): each button restyles
    every group's coordinates (and error bars, when any objective has a spread) and retitles
    the axis."""

    def restyle(j: int) -> dict[str, Any]:
        column = [[float(fa.values[k, j]) for k in ks] for ks in groups.values()]
        out: dict[str, Any] = {axis: column}
        if bars:
            out[f"error_{axis}"] = [
                _plotly_error_bars(fa, j, name, ks) for name, ks in groups.items()
            ]
        return out

    return dict(
        buttons=[
            dict(
                label=o.label,
                method="update",
                args=[restyle(j), {f"{axis}axis.title.text": _axis_title(fa, j)}],
            )
            for j, o in enumerate(fa.objectives)
        ],
        direction="down",
        active=active,
        showactive=True,
        x=x_pos,
        xanchor="left",
        y=1.16,
        yanchor="top",
    )


# ---------------------------------------------------------------------------------------------
# The report


def point_order(fa: FrontAnalysis) -> list[int]:
    """The order the report shows a workload's points in, everywhere (points table, design
    sections, breakdown chart): the selected design, then the rest of the front by distance to
    the ideal point, then the other points as stored."""
    order = [] if fa.selected is None else [fa.selected]
    order += [k for k in fa.ranked_front() if k not in order]
    seen = set(order)
    return order + [k for k in range(len(fa.rows)) if k not in seen]


_POINTS_HEADING = "Points (selected first, then the front by distance to the ideal point)"


def _front_table(fa: FrontAnalysis, params: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    headers = ["point", "on front", "selected", *params, *(o.label for o in fa.objectives)]
    rows = []
    for k in point_order(fa):
        r = fa.rows[k]
        rows.append(
            [
                _short(r.point_id),
                _num(bool(fa.front[k])) if fa.feasible[k] else "infeasible",
                "*" if k == fa.selected else "",
                *(_num(r.params.get(p)) for p in params),
                *(
                    _num(fa.values[k, j])
                    if (sp := fa.spread(j)) is None
                    else sp.cell(fa.values[k, j], k, _num)
                    for j in range(len(fa.objectives))
                ),
            ]  # fmt: skip
        )
    return headers, rows


_FIG_HEADERS = ["component", "quantity", "value", "unit", "1 sigma", "model", "fitted / predicted",
                "validation error %", "validation", "source"]  # fmt: skip


def _fig_rows(b: PointBreakdown) -> list[list[str]]:
    return [
        [
            f.component,
            f.quantity,
            _num(f.value),
            f.unit,
            _num(f.sigma, 2),
            f.model,
            f.role,
            _num(f.validation_error_pct, 3),
            f.validation,
            f.source,
        ]  # fmt: skip
        for f in (*b.figures, *b.totals)
    ]


def _provenance(a: SweepAnalysis, b: PointBreakdown) -> list[tuple[str, str]]:
    from .. import __version__

    r = b.row
    return [
        ("point id", r.point_id),
        ("workload", r.workload),
        ("parameters", json.dumps(r.params, sort_keys=True)),
        ("config digest (stored)", r.config_digest or ""),
        ("config digest matches the re-built design", _num(b.digest_matches)),
        ("re-run total energy equals the stored energy_j", _num(b.energy_matches)),
        ("spec digest", r.spec_digest),
        ("base architecture config digest", a.spec.base_digest),
        (
            "sampling",
            a.spec.spec.strategy.kind
            + ("" if a.spec.spec.strategy.seed is None else f", seed {a.spec.spec.strategy.seed}"),
        ),
        ("computed by coaccel", r.version),
        ("re-evaluated by coaccel", __version__),
        ("evaluation time (s)", _num(r.elapsed_s)),
        ("simulator mode", getattr(r, "mode", None) or a.spec.spec.mode),
        ("sweep stage", getattr(r, "stage", None) or ""),
        ("technology node (nm)", _num(b.breakdown.node_nm)),
    ]


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in headers) + " |",
             "|" + "---|" * len(headers)]  # fmt: skip
    lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _summary(a: SweepAnalysis) -> list[str]:
    s = a.spec.spec
    lines = [
        f"spec {a.spec.source}" + (f": {s.description}" if s.description else ""),
        f"base architecture {a.spec.base_path} (kind {a.spec.kind}, config digest "
        f"{a.spec.base_digest}); spec digest {a.spec.digest}",
        f"strategy {s.strategy.kind}"
        + (
            f", seed {s.strategy.seed}, {s.strategy.samples} samples"
            if s.strategy.seed is not None
            else " (no random choice)"
        )
        + f"; simulator mode {s.mode}",  # fmt: skip
        f"store {a.store_path}: {a.n_rows} rows"
        + (f" ({a.n_foreign} of other sweeps left out)" if a.n_foreign else "")
        + f"; computed by coaccel {', '.join(a.versions)}",
        "objectives: " + ", ".join(f"{o.label} ({o.sense}imize)" for o in a.fronts[0].objectives)
        if a.fronts
        else "objectives: none",
    ]
    if s.limits:
        lines.append("limits (a point outside is infeasible): " + "; ".join(s.limits))
    if s.constraints:
        lines.append("constraints on the parameters: " + "; ".join(s.constraints))
    return lines


def _front_lines(fa: FrontAnalysis) -> list[str]:
    out = [
        f"{len(fa.rows)} evaluated points, {int(fa.feasible.sum())} feasible, "
        f"{int(fa.front.sum())} on the Pareto front, {len(fa.failed)} failed"
    ]
    if fa.selected is None:
        out.append("no feasible point: no front and no selected design (see the limits)")
    else:
        r = fa.rows[fa.selected]
        out.append(
            f"selected design {_short(r.point_id)} ({json.dumps(r.params, sort_keys=True)}): "
            + fa.selection
        )
    if not math.isnan(fa.hypervolume):
        units = " x ".join(o.unit or "1" for o in fa.objectives)
        ref = ", ".join(f"{o.metric} {x:.4g}" for o, x in zip(fa.objectives, fa.reference,
                                                               strict=True))  # fmt: skip
        out.append(
            f"hypervolume {fa.hypervolume:.4g} ({units}) up to the reference point ({ref}): "
            "the worst feasible value of each objective plus 10 % of its range"
        )
    for j, o in enumerate(fa.objectives):
        sp = fa.spread(j)
        if sp is not None:
            shown = "value ± spread" if sp.kind == "std" else "value [lower, upper]"
            out.append(f"uncertainty of {o.metric}: error bars in the charts and {shown} in "
                       f"the points table are {sp.what}")  # fmt: skip
    return out


def write_sweep_report(a: SweepAnalysis, out_dir: str | Path) -> list[Path]:
    """Write the sweep report: HTML page, Markdown, two CSVs and the PNG charts.

    Args:
        a: the :func:`~coaccel.dse.analysis.analyze` result.
        out_dir: output folder (created if needed).

    Returns:
        Every path written (the HTML page last).
    """
    plotly_offline = _plotly("plotly.offline")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    params = list(a.spec.spec.parameters)
    charts: dict[str, list[tuple[Path, str]]] = {}
    paths: list[Path] = []
    for fa in a.fronts:
        cs = plot_fronts(a, fa, out)
        for extra in (plot_parallel(a, fa, out), plot_breakdown(a, fa, out)):
            if extra is not None:
                cs.append(extra)
        charts[fa.title] = cs
        paths += [p for p, _ in cs]
    paths.append(_write_csv(out / "sweep_points.csv", point_rows(a)))
    paths.append(_write_csv(out / "sweep_breakdown.csv", breakdown_rows(a), BREAKDOWN_CSV_COLUMNS))
    title = f"Sweep report: {a.spec.spec.description or Path(a.spec.source).stem}"
    summary = _summary(a)

    md_path = write_text(out / "sweep_report.md", _markdown(a, title, summary, charts, params))
    paths.append(md_path)
    h = _html(a, title, summary, charts, params, plotly_offline.get_plotlyjs())
    html_path = write_text(out / HTML_NAME, h)
    paths.append(html_path)
    return paths


def _alt(caption: str) -> str:
    """A chart's caption as one line of text alternative."""
    return " ".join(caption.split()).replace("[", "(").replace("]", ")")


def _markdown(
    a: SweepAnalysis, title: str, summary: Sequence[str],
    charts: Mapping[str, list[tuple[Path, str]]], params: Sequence[str],
) -> str:  # fmt: skip
    """The report as Markdown (charts by file name beside it)."""
    md = [f"# {title}", ""] + [f"- {x}" for x in summary] + [""]
    for fa in a.fronts:
        md += [f"## Workload {fa.title}", ""] + [f"- {x}" for x in _front_lines(fa)] + [""]
        for p, cap in charts[fa.title]:  # the caption is drawn in the chart: alt text here
            md += [f"![{_alt(cap)}]({p.name})", ""]
        h, rows = _front_table(fa, params)
        md += [f"### {_POINTS_HEADING}", "", _md_table(h, rows)]
        md.append("")
        for k in point_order(fa):
            r = fa.rows[k]
            b = a.breakdowns.get(r.point_id)
            if b is None:
                continue
            md += [f"### Design {_short(r.point_id)}"
                   + (" (selected)" if fa.selected is not None
                      and fa.rows[fa.selected].point_id == r.point_id else ""), ""]  # fmt: skip
            md += [_md_table(_FIG_HEADERS, _fig_rows(b)), ""]
            md += [_md_table(["provenance", ""], _provenance(a, b)), ""]
        if fa.failed:
            md += ["### Failed points", ""]
            md += [_md_table(["point", "parameters", "error"], [
                [_short(r.point_id), json.dumps(r.params, sort_keys=True),
                 (r.error or "").strip().splitlines()[-1] if r.error else ""]
                for r in fa.failed
            ]), ""]  # fmt: skip
    md += ["## Sweep spec", "", "```yaml", a.spec_text.rstrip(), "```", ""]
    return "\n".join(md)


def _html(
    a: SweepAnalysis, title: str, summary: Sequence[str],
    charts: Mapping[str, list[tuple[Path, str]]], params: Sequence[str], plotly_js: str,
) -> str:  # fmt: skip
    """The report as one self-contained HTML page (plotly's JavaScript and the PNGs inline)."""
    e = html.escape
    h = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1250px;margin:auto;padding:0 12px}"
        "table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #ccc;"
        "padding:2px 6px;vertical-align:top}th{background:#eee}img{max-width:100%}"
        "figcaption{font-size:12px;color:#333}pre{background:#f6f6f6;padding:8px;"
        "overflow-x:auto}details{margin:8px 0}</style>",
        "<script type='text/javascript'>" + plotly_js + "</script>",
        "</head><body>",
        f"<h1>{e(title)}</h1>",
        "<ul>" + "".join(f"<li>{e(x)}</li>" for x in summary) + "</ul>",
        "<p>fitted: the model was fitted on a published figure of this very design (agreement "
        "is in sample; the validation error given is the leave-one-out one); predicted: the "
        "model computes a design it was not fitted on; published: a published figure used as "
        "is. Validation errors from coaccel validate hbq (docs/cost_model.md).</p>",
    ]
    for n, fa in enumerate(a.fronts):
        h.append(f"<h2>Workload {e(fa.title)}</h2>")
        h.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in _front_lines(fa)) + "</ul>")
        if len(fa.rows):
            h.append("<p>Interactive front: hover a point for its parameters and metrics; "
                     "choose the objective on each axis with the x / y menus.</p>")  # fmt: skip
            h.append(interactive_front(fa, f"front-{n}"))
        for p, cap in charts[fa.title]:  # the caption is drawn in the chart: alt text here
            data = base64.b64encode(p.read_bytes()).decode("ascii")
            h.append(f"<figure><img src='data:image/png;base64,{data}' "
                     f"alt=\"{e(_alt(cap), quote=True)}\"></figure>")  # fmt: skip
        headers, rows = _front_table(fa, params)
        h.append(f"<h3>{e(_POINTS_HEADING)}</h3>")
        h.append(_html_table(headers, rows))
        for k in point_order(fa):
            r = fa.rows[k]
            b = a.breakdowns.get(r.point_id)
            if b is None:
                continue
            is_sel = fa.selected is not None and fa.rows[fa.selected].point_id == r.point_id
            h.append(f"<h3 id='design-{e(r.point_id)}'>Design {e(_short(r.point_id))}"
                     + (" (selected)" if is_sel else "") + "</h3>")  # fmt: skip
            h.append(_html_table(_FIG_HEADERS, _fig_rows(b)))
            h.append("<details><summary>provenance</summary>"
                     + _html_table(["", ""], _provenance(a, b)) + "</details>")  # fmt: skip
        if fa.failed:
            h.append("<h3>Failed points</h3>")
            h.append(_html_table(["point", "parameters", "error"], [
                [_short(r.point_id), json.dumps(r.params, sort_keys=True),
                 (r.error or "").strip().splitlines()[-1] if r.error else ""]
                for r in fa.failed
            ]))  # fmt: skip
    h += [
        "<h2>Sweep spec</h2>",
        f"<pre>{e(a.spec_text)}</pre>",
        "<p>Tables as CSV beside this page: sweep_points.csv, sweep_breakdown.csv.</p>",
        "</body></html>",
    ]
    return "\n".join(h)


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    e = html.escape
    out = ["<table><tr>" + "".join(f"<th>{e(str(x))}</th>" for x in headers) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows]
    out.append("</table>")
    return "\n".join(out)
