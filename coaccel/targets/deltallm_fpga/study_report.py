"""Report of the DeltaLLM sparsity study: CSV files, PNG charts and a printed table.

The study (:mod:`coaccel.targets.deltallm_fpga.study`) returns pure data; this module formats,
writes and plots it. Files written into the output folder:

* ``delta_results.csv``: one row per data set × (θ, W, τ), plus each data set's row at the θ
  found for the target ρ_K (``theta_from_target`` true); the columns of
  :class:`~coaccel.targets.deltallm_fpga.study.DeltaRow` (sparsities as fractions, errors in the
  units of v except the relative ones).
* ``delta_theta_fits.csv``: the θ found per data set, with ρ_K on both sides of the target.
* ``delta_layers.csv``: ρ_K per layer (MiniLM) or draw (synthetic) and θ.
* ``delta_channels.csv``: ρ_K per head dimension at the found θ.
* ``delta_sparsity_vs_theta.png``: ρ_K, ρ_S and the output error against θ per data set.
* ``delta_vs_tau.png`` / ``delta_vs_window.png``: ρ_fine, ρ_S and the error against τ or W,
  when the grid has more than one value of it.
* ``delta_channels.png``: ρ_K per head dimension (RoPE rotates the low-index pairs fastest, so
  their Delta-Key sparsity is lowest).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from coaccel.report.files import atomic_open
from coaccel.report.style import OKABE_ITO, new_figure, save_figure
from coaccel.targets.deltallm_fpga.study import REAL_DATASET, DeltaRow, DeltaStudyResult, ThetaFit

__all__ = [
    "CSV_COLUMNS",
    "CSV_NAME",
    "channel_figure",
    "format_delta_table",
    "sweep_figure",
    "theta_figure",
    "write_delta_report",
]

CSV_NAME = "delta_results.csv"
CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(DeltaRow))
"""Column order of ``delta_results.csv`` (the fields of ``DeltaRow``)."""
FIT_COLUMNS = tuple(f.name for f in dataclasses.fields(ThetaFit))


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([_cell(c) for c in r])
    return path


def _settings(result: DeltaStudyResult) -> str:
    c = result.config
    return (
        f"mode {c.mode}, P_q {c.query_block}, delta_mode {c.delta_mode}, denom_mode "
        f"{c.denom_mode}, order {c.order}, n_sink {c.n_sink}, refresh {c.refresh_period}"
    )


def _data_caption(result: DeltaStudyResult) -> str:
    """Where the numbers come from: data sets, their shapes, the seed, the settings."""
    c = result.config
    parts = []
    if any(r.dataset == REAL_DATASET for r in result.rows):
        topics = ", ".join(t for t, _ in result.passages)
        parts.append(
            f"minilm: all-MiniLM-L6-v2 q/k/v of layers {list(c.real.layers)} on "
            f"{len(result.passages)} passage(s) of {c.real.tokens} tokens of the Python "
            f"documentation topics (pydoc_data: {topics}); bidirectional, no RoPE, each head "
            "its own KV head; the causal mask is applied"
        )
    s = c.synthetic
    if any(r.source == "synthetic" for r in result.rows):
        parts.append(
            f"synthetic: {s.layers} draw(s) per model of {s.kv_heads} KV head(s), T {s.tokens}, "
            f"{'post' if s.rope else 'pre'}-RoPE, key AR(1) {s.key_ar:g}, query AR(1) "
            f"{s.query_ar:g}, group-shared query offsets {s.query_group_share:g}, seed {c.seed}"
        )
    return (
        "Source: coaccel delta (coaccel.targets.deltallm_fpga.study) on "
        "coaccel.models.deltallm.attention. "
        + "; ".join(parts)
        + f". Settings: {_settings(result)}. Sparsities micro-averaged; error against the same "
        "datapath with theta 0, W = T, tau = inf. Values in delta_results.csv."
    )


def _legend(fig: Figure, ax: Any) -> None:
    fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=7)


def _colors(result: DeltaStudyResult) -> dict[str, str]:
    return {d: OKABE_ITO[i % len(OKABE_ITO)] for i, d in enumerate(result.datasets())}


def theta_figure(result: DeltaStudyResult) -> Figure:
    """ρ_K, ρ_S and the relative output error against θ, one line per data set.

    At the first W and τ of the grid; the θ found for the target ρ_K is marked with a star.

    Args:
        result: the study result.

    Returns:
        The figure.
    """
    c = result.config
    w0, tau0 = c.windows[0], c.taus[0]
    cap = (
        f"{_data_caption(result)} Here W = {w0}, tau = {tau0:g}; star: the theta found for "
        f"rho_K = {c.target_delta_sparsity:g}."
    )
    fig = new_figure(10.0, 3.6, cap)
    axes = fig.subplots(1, 3)
    colors = _colors(result)
    panels = (
        ("delta_sparsity", "Delta-Key sparsity ρ_K"),
        ("structured_sparsity", "structured score sparsity ρ_S"),
        ("rel_l2_error", "output rel. L2 error vs dense"),
    )
    for ax, (field, label) in zip(axes, panels, strict=True):
        for ds in result.datasets():
            pts = sorted(
                (r.theta, getattr(r, field)) for r in result.select(dataset=ds, window=w0, tau=tau0)
            )
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", ms=3, color=colors[ds], label=ds)
            for r in result.select(dataset=ds, window=w0, tau=tau0, theta_from_target=True):
                ax.plot([r.theta], [getattr(r, field)], marker="*", ms=10, color=colors[ds])
        if field == "delta_sparsity" and c.target_delta_sparsity > 0:
            ax.axhline(c.target_delta_sparsity, color="#777777", lw=0.8, ls="--")
        unit = "key LSBs" if c.mode == "fixed" else "key units"
        ax.set_xlabel(f"θ ({unit})", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title("DeltaLLM sparsity and error vs θ", fontsize=9, loc="left")
    _legend(fig, axes[0])
    return fig


def _finite_x(x: float, values: Sequence[float]) -> float:
    """Plot position of a grid value: ``τ = ∞`` sits 2 past the largest finite value."""
    if math.isfinite(x):
        return float(x)
    finite = [float(v) for v in values if math.isfinite(v)]
    return (max(finite) if finite else 0.0) + 2.0


def sweep_figure(result: DeltaStudyResult, axis: str) -> Figure | None:
    """ρ_fine, ρ_S and the relative error against τ or W (the others at their first value).

    Args:
        result: the study result.
        axis: ``"tau"`` or ``"window"``.

    Returns:
        The figure, or None when the grid has one value on that axis.
    """
    c = result.config
    values = c.taus if axis == "tau" else c.windows
    if len(values) < 2:
        return None
    fixed = {"theta": float(c.thetas[0])}
    if axis == "tau":
        fixed["window"] = c.windows[0]
        xlabel = "τ (log2 units)"
    else:
        fixed["tau"] = float(c.taus[0])
        xlabel = "W (tokens)"
    shown = ", ".join(f"{k} = {v:g}" for k, v in fixed.items())
    if axis == "tau" and not all(math.isfinite(v) for v in values):
        shown += "; tau = inf (no skipping) is drawn 2 past the largest finite tau"
    fig = new_figure(10.0, 3.6, f"{_data_caption(result)} Here {shown}.")
    axes = fig.subplots(1, 3)
    colors = _colors(result)
    panels = (
        ("fine_sparsity", "fine score sparsity ρ_fine"),
        ("structured_sparsity", "structured score sparsity ρ_S"),
        ("rel_l2_error", "output rel. L2 error vs dense"),
    )
    for ax, (field, label) in zip(axes, panels, strict=True):
        for ds in result.datasets():
            rows = result.select(dataset=ds, theta_from_target=False, **fixed)
            pts = sorted((getattr(r, axis), getattr(r, field)) for r in rows)
            ax.plot(
                [_finite_x(x, values) for x, _ in pts],
                [y for _, y in pts],
                marker="o",
                ms=3,
                color=colors[ds],
                label=ds,
            )
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title(f"DeltaLLM sparsity and error vs {axis}", fontsize=9, loc="left")
    _legend(fig, axes[0])
    return fig


def channel_figure(result: DeltaStudyResult) -> Figure:
    """ρ_K per head dimension, one line per data set.

    Args:
        result: the study result.

    Returns:
        The figure.
    """
    c = result.config
    fits = {f.dataset: f.theta for f in result.fits}
    at = ", ".join(f"{d}: theta {fits.get(d, max(c.thetas)):g}" for d in result.channel_sparsity)
    cap = (
        f"{_data_caption(result)} Per head dimension at {at}. RoPE pairs dimension i with "
        "i + d/2 and rotates low i fastest."
    )
    fig = new_figure(8.0, 3.4, cap)
    ax = fig.add_subplot()
    colors = _colors(result)
    for ds, rho in result.channel_sparsity.items():
        ax.plot(np.arange(rho.shape[0]), rho, lw=1, color=colors.get(ds, OKABE_ITO[0]), label=ds)
    ax.set_xlabel("head dimension (channel index)", fontsize=8)
    ax.set_ylabel("Delta-Key sparsity ρ_K", fontsize=8)
    ax.set_title("Delta-Key sparsity per head dimension", fontsize=9, loc="left")
    ax.grid(alpha=0.3)
    _legend(fig, ax)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    return save_figure(fig, path.with_suffix(""), ("png",))[0]


def _table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, body)])


def format_delta_table(result: DeltaStudyResult) -> str:
    """A readable text table per data set, then the θ fits and the notes.

    Args:
        result: the study result.

    Returns:
        The table text (no trailing newline).
    """
    headers = [
        "theta", "W", "tau", "rho_K", "rho_fine", "rho_S", "rel L2", "max abs", "rel L2 vs float",
    ]  # fmt: skip
    blocks = []
    for ds in result.datasets():
        rows = result.select(dataset=ds)
        body = [
            [
                f"{r.theta:g}" + ("*" if r.theta_from_target else ""),
                str(r.window),
                f"{r.tau:g}",
                f"{r.delta_sparsity:.3f}",
                f"{r.fine_sparsity:.3f}",
                f"{r.structured_sparsity:.3f}",
                f"{r.rel_l2_error:.2e}",
                f"{r.max_abs_error:.2e}",
                f"{r.rel_l2_error_float:.2e}",
            ]
            for r in rows
        ]
        r0 = rows[0]
        title = (
            f"{ds} ({r0.tensors} tensor(s), Hq {r0.query_heads}, Hkv {r0.kv_heads}, "
            f"T {r0.tokens}, d {r0.head_dim}, mode {r0.mode})"
        )
        blocks.append(f"{title}\n{_table(headers, body)}")
    if result.fits:
        lines = [
            f"{f.dataset}: theta {f.theta:g} gives rho_K {f.delta_sparsity:.3f} >= "
            f"{f.target:g} (theta {f.theta_below:g}: {f.delta_sparsity_below:.3f}; "
            f"{f.evaluations} evaluations)"
            for f in result.fits
        ]
        blocks.append("theta for the target rho_K (row marked *):\n" + "\n".join(lines))
        per = []
        for f in result.fits:
            vals = [
                f"{li}: {v:.3f}"
                for ds, li, th, v in result.layer_sparsity
                if ds == f.dataset and th == f.theta
            ]
            what = "layer" if f.dataset == REAL_DATASET else "draw"
            per.append(f"{f.dataset} (by {what}): " + ", ".join(vals))
        blocks.append("rho_K per layer at that theta:\n" + "\n".join(per))
    if result.notes:
        blocks.append("notes:\n" + "\n".join(f"- {n}" for n in result.notes))
    return "\n\n".join(blocks)


def write_delta_report(result: DeltaStudyResult, out_dir: str | Path) -> list[Path]:
    """Write the CSVs and every chart.

    Args:
        result: the study result.
        out_dir: output folder (created if needed).

    Returns:
        Every path written: the CSVs first, then the PNGs.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        _write_csv(
            out / CSV_NAME,
            CSV_COLUMNS,
            [[getattr(r, c) for c in CSV_COLUMNS] for r in result.rows],
        ),
        _write_csv(
            out / "delta_theta_fits.csv",
            FIT_COLUMNS,
            [[getattr(f, c) for c in FIT_COLUMNS] for f in result.fits],
        ),
        _write_csv(
            out / "delta_layers.csv",
            ("dataset", "layer", "theta", "delta_sparsity"),
            result.layer_sparsity,
        ),
        _write_csv(
            out / "delta_channels.csv",
            ("dataset", "channel", "delta_sparsity"),
            [
                (ds, i, float(v))
                for ds, rho in result.channel_sparsity.items()
                for i, v in enumerate(rho)
            ],
        ),
    ]
    paths.append(_save(theta_figure(result), out / "delta_sparsity_vs_theta.png"))
    for axis in ("tau", "window"):
        fig = sweep_figure(result, axis)
        if fig is not None:
            paths.append(_save(fig, out / f"delta_vs_{axis}.png"))
    if result.channel_sparsity:
        paths.append(_save(channel_figure(result), out / "delta_channels.png"))
    return paths
