"""Report of the DeltaLLM sparsity study: CSV files, PNG charts and a printed table.

The study (:mod:`coaccel.targets.deltallm_fpga.study`) returns pure data; this module formats,
writes and plots it. Files written into the output folder:

* ``delta_results.csv``: one row per data set × (θ, W, τ), plus each data set's row at the θ
  found for the target ρ_K (``theta_from_target`` true); the columns of
  :class:`~coaccel.targets.deltallm_fpga.study.DeltaRow` (sparsities as fractions, errors in the
  units of v except the relative ones).
* ``delta_theta_fits.csv``: the θ found per data set, with ρ_K on both sides of the target.
* ``delta_layers.csv``: ρ_K per layer (real models) or draw (synthetic) and θ.
* ``delta_channels.csv``: ρ_K per head dimension at the found θ.
* ``delta_sparsity_vs_theta.png``: ρ_K, ρ_S and the output error against θ per data set.
* ``delta_vs_tau.png`` / ``delta_vs_window.png``: ρ_fine, ρ_S and the error against τ or W,
  when the grid has more than one value of it.
* ``delta_channels.png``: ρ_K per head dimension (RoPE rotates the low-index pairs fastest, so
  their Delta-Key sparsity is lowest).

The choice table (``coaccel delta --choices``, :mod:`coaccel.targets.deltallm_fpga.choices`)
writes ``delta_choices.csv`` (:data:`CHOICE_CSV_COLUMNS`) and ``delta_choices.md``.
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
from coaccel.targets.deltallm_fpga.study import DeltaRow, DeltaStudyResult, ThetaFit

__all__ = [
    "CHOICE_CSV_COLUMNS",
    "CSV_COLUMNS",
    "CSV_NAME",
    "channel_figure",
    "choice_rows_text",
    "format_choice_table",
    "format_delta_table",
    "sweep_figure",
    "theta_figure",
    "write_choice_report",
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
        f"mode {c.mode}, lanes {c.lane_layout} x P_q {c.query_block}, delta_mode "
        f"{c.delta_mode}, denom_mode "
        f"{c.denom_mode}, order {c.order}, n_sink {c.n_sink}, refresh {c.refresh_period}"
    )


def _data_caption(result: DeltaStudyResult) -> str:
    """Where the numbers come from: data sets, their shapes, the seed, the settings."""
    c = result.config
    parts = []
    if any(r.source == "real" for r in result.rows):
        r = c.real
        topics = ", ".join(t for ds, t, _ in result.passages if ds == r.model)
        layers = list(r.layers) if r.layers else "all"
        parts.append(
            f"{r.model}: post-RoPE q/k/v of layers {layers} on {r.passages} passage(s) of "
            f"{r.tokens} tokens of the Python documentation topics (pydoc_data: {topics}); a "
            "causal GQA decoder"
        )
    if any(r.source == "minilm" for r in result.rows):
        m = c.minilm
        topics = ", ".join(t for ds, t, _ in result.passages if ds == "minilm")
        parts.append(
            f"minilm: all-MiniLM-L6-v2 q/k/v of layers {list(m.layers)} on "
            f"{m.passages} passage(s) of {m.tokens} tokens of the Python "
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
            what = "draw" if f.dataset.startswith("synthetic:") else "layer"
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


# ------------------------------------------------------------------------------ choice table
CHOICE_CSV_COLUMNS = (
    "choice", "setting", "lanes", "rho_k", "rho_k_passage_std", "rho_k_ci95_low",
    "rho_k_ci95_high", "rho_s", "rho_s_passage_std", "rho_s_ci95_low", "rho_s_ci95_high",
    "rho_s_layer_min", "rho_s_layer_max", "rho_fine", "rel_l2_error_vs_dense",
    "rel_l2_error_vs_exact", "d_ppl_prefill_pct", "d_ppl_prefill_sd", "d_ppl_decode_pct",
    "d_ppl_decode_sd", "ppl_prefill", "ppl_decode",
)  # fmt: skip
"""Columns of ``delta_choices.csv`` (sparsities as fractions, perplexity changes in percent)."""


def _choice_cells(r: Any) -> list[object]:
    nan = math.nan
    k, s = r.rho_k, r.rho_s
    return [
        r.choice, r.label, r.lanes or "",
        k.mean if k else nan, k.passage_std if k else nan, k.ci95[0] if k else nan,
        k.ci95[1] if k else nan, s.mean if s else nan, s.passage_std if s else nan,
        s.ci95[0] if s else nan, s.ci95[1] if s else nan, s.layer_min if s else nan,
        s.layer_max if s else nan, r.rho_fine, r.rel_l2_dense, r.rel_l2_exact,
        r.d_ppl_prefill_pct, r.d_ppl_prefill_sd, r.d_ppl_decode_pct, r.d_ppl_decode_sd,
        " ".join(f"{x:.4f}" for x in r.ppl_prefill), " ".join(f"{x:.4f}" for x in r.ppl_decode),
    ]  # fmt: skip


def _pm(s: Any) -> str:
    if s is None:
        return ""
    ci = "" if math.isnan(s.ci95[0]) else f" [{s.ci95[0]:.3f}, {s.ci95[1]:.3f}]"
    return f"{s.mean:.3f} ±{s.passage_std:.3f}{ci}"


def _dppl(mean: float, sd: float) -> str:
    return f"{mean:+.2f}" + ("" if math.isnan(sd) else f" ±{sd:.2f}")


def _num3(x: float, fmt: str = ".3f") -> str:
    return "" if math.isnan(x) else format(x, fmt)


def choice_rows_text(table: Any) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the choice table (text and Markdown share them)."""
    headers = ["choice", "setting", "lanes", "ρ_K ±σ [95 % CI]", "ρ_S ±σ [95 % CI]", "ρ_fine",
               "err vs dense", "err vs exact", "ΔPPL prefill % ±σ", "ΔPPL decode % ±σ"]  # fmt: skip
    body = [
        [r.choice, r.label, str(r.lanes or ""), _pm(r.rho_k), _pm(r.rho_s), _num3(r.rho_fine),
         _num3(r.rel_l2_dense, ".2e"), _num3(r.rel_l2_exact, ".2e"),
         _dppl(r.d_ppl_prefill_pct, r.d_ppl_prefill_sd),
         _dppl(r.d_ppl_decode_pct, r.d_ppl_decode_sd)]
        for r in table.rows
    ]  # fmt: skip
    return headers, body


def format_choice_table(table: Any) -> str:
    """The choice table as text, with the exact-attention perplexities and the notes.

    Args:
        table: a :class:`~coaccel.targets.deltallm_fpga.choices.ChoiceTable`.

    Returns:
        The text (no trailing newline).
    """
    headers, body = choice_rows_text(table)
    ex = table.rows[0]
    lines = [
        "DeltaLLM open choices on real keys: sparsity and accuracy cost (one choice varied at a "
        "time around the first lane-layout row)",
        _table(headers, body),
        f"exact-attention perplexity per passage: prefill {list(map(_r2, ex.ppl_prefill))}, "
        f"decoded tokens {list(map(_r2, ex.ppl_decode))}",
        "ρ: micro-averages (counts summed over passages, layers, heads) ±σ over passages; err: "
        "relative L2 error of the attention output; ΔPPL: mean ±σ over passages of "
        "100·(ppl / ppl_exact − 1)",
        *(f"- {n}" for n in table.notes),
    ]
    return "\n".join(lines)


def _r2(x: float) -> str:
    return f"{x:.2f}"


def write_choice_report(table: Any, out_dir: str | Path) -> list[Path]:
    """Write ``delta_choices.csv`` and ``delta_choices.md``.

    Args:
        table: the :class:`~coaccel.targets.deltallm_fpga.choices.ChoiceTable`.
        out_dir: output folder (created if needed).

    Returns:
        The two paths.
    """
    from coaccel.report.files import write_text
    from coaccel.report.validation import md_table

    out = Path(out_dir)
    csv_path = _write_csv(out / "delta_choices.csv", CHOICE_CSV_COLUMNS,
                          [_choice_cells(r) for r in table.rows])  # fmt: skip
    headers, body = choice_rows_text(table)
    md = "\n\n".join([
        "# DeltaLLM open choices on real keys",
        md_table(headers, body),
        "\n".join(f"* {n}" for n in table.notes),
    ]) + "\n"  # fmt: skip
    md_path = out / "delta_choices.md"
    write_text(md_path, md)
    return [csv_path, md_path]
