"""Report of the quantization accuracy study: CSV, PNG charts and a printed table.

The study (:mod:`coaccel.studies.quant`) returns pure data; this module is the only place that
formats, writes or plots it. Files written into the output folder:

* ``quant_results.csv``: one row per format × data source × tensor kind, the columns of
  :class:`~coaccel.studies.quant.QuantRow` (units in the names: ``sqnr_db`` in dB,
  ``*_bits_per_element`` in bits; ``inf`` for an exact result, an empty cell where a column
  does not apply, e.g. ``cosine_*`` outside ``embedding`` rows).
* ``sqnr_<source>_<data>.png``: SQNR of weights, activations and GEMM outputs per format, with
  a caption giving the data, its shapes, the seed and the partial-sum mode.
* ``cosine_real_minilm.png``: sentence-embedding error (1 − cosine, mean and worst sentence)
  of the real model with every linear layer quantized.
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

from ..studies.quant import REFERENCE_FORMAT, QuantRow, QuantStudyResult
from .files import atomic_open
from .style import OKABE_ITO, new_figure, save_figure

__all__ = [
    "CSV_COLUMNS",
    "CSV_NAME",
    "cosine_figure",
    "format_quant_table",
    "plot_quant_cosine",
    "plot_quant_sqnr",
    "sqnr_figure",
    "write_quant_csv",
    "write_quant_report",
]

CSV_NAME = "quant_results.csv"
CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(QuantRow))
"""Column order of ``quant_results.csv`` (the fields of ``QuantRow``)."""

_KIND_LABELS = {"weight": "weights", "activation": "activations", "gemm": "GEMM output"}


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def write_quant_csv(result: QuantStudyResult, path: str | Path) -> Path:
    """Write every result row as CSV.

    Args:
        result: the study result.
        path: the CSV file to write (parent folders are created).

    Returns:
        The path written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(p) as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for r in result.rows:
            w.writerow([_cell(getattr(r, c)) for c in CSV_COLUMNS])
    return p


def _datasets(result: QuantStudyResult) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for r in result.rows:
        seen[(r.source, r.data)] = None
    return list(seen)


def _formats(result: QuantStudyResult, *, reference: bool) -> list[str]:
    seen: dict[str, None] = {}
    for r in result.rows:
        if reference or r.format != REFERENCE_FORMAT:
            seen[r.format] = None
    return list(seen)


def _bits_label(r: QuantRow) -> str:
    return f"W{r.weight_bits_per_element:.4g}/A{r.activation_bits_per_element:.4g}"


_FORMAT_AXIS = "format (W/A: weight/activation storage bits per element, scales included)"
"""x-axis label of the charts: what the tick labels say."""

_KIND_COLORS = {"weight": OKABE_ITO[0], "activation": OKABE_ITO[1], "gemm": OKABE_ITO[2]}


def _data_caption(result: QuantStudyResult, source: str, data: str) -> str:
    """Where a chart's numbers come from: the data, its shapes, the seed, the settings."""
    cfg = result.config
    if source == "real":
        n = len(result.sentences)
        what = (
            f"Data: all-MiniLM-L6-v2 on the first {n} sentences of the built-in corpus, "
            f"every one of its 36 linear layers quantized (weights and their input "
            f"activations), tensors pooled; unquantized parts in {cfg.real.dtype}; no random "
            "inputs."
        )
    else:
        syn = cfg.synthetic
        what = (
            f"Data: synthetic {data} tensors, activations A {syn.tokens} x {syn.in_features}, "
            f"weights W {syn.out_features} x {syn.in_features} (K = {syn.in_features}, the "
            f"blocked axis), weight std {syn.weight_std:g}"
        )
        if data == "student_t":
            what += (
                f", Student-t df {syn.student_t_df:g} with {syn.outlier_channels} outlier "
                f"channels x{syn.outlier_scale_min:g}-{syn.outlier_scale_max:g}"
            )
        what += f"; seed {cfg.seed} (the config's, with which coaccel quant seeds numpy)."
    return (
        f"Source: coaccel quant (coaccel.studies.quant), {source} / {data}. {what} HBQ partial "
        f"sums: {cfg.psum_mode}. SQNR = 10 log10(sum x^2 / sum (q(x) - x)^2) against float32; "
        "the fp32 reference and exact results (infinite SQNR) have no bar; values in "
        "quant_results.csv."
    )


def _legend(fig: Figure, ax: Any) -> None:
    fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=7)


def sqnr_figure(result: QuantStudyResult, source: str, data: str) -> Figure | None:
    """The SQNR chart of one data source: weights, activations and GEMM output per format.

    Args:
        result: the study result.
        source: ``synthetic`` or ``real``.
        data: the distribution (synthetic) or ``minilm`` (real).

    Returns:
        The figure (caption, axis labels, legend beside the axes), or None when the study has
        no format besides the ``fp32`` reference.
    """
    formats = _formats(result, reference=False)
    if not formats:
        return None
    kinds = list(_KIND_LABELS)
    fig = new_figure(max(7.0, 1.1 * len(formats) + 3.5), 4.2, _data_caption(result, source, data))
    ax = fig.add_subplot()
    x = np.arange(len(formats))
    width = 0.8 / len(kinds)
    for j, kind in enumerate(kinds):
        vals = []
        for f in formats:
            rows = result.select(format=f, source=source, data=data, kind=kind)
            v = rows[0].sqnr_db if rows else math.nan
            # An exact result (inf dB) has no bar height; the table and CSV show it.
            vals.append(v if math.isfinite(v) else math.nan)
        bars = ax.bar(
            x + (j - (len(kinds) - 1) / 2) * width,
            vals,
            width,
            label=_KIND_LABELS[kind],
            color=_KIND_COLORS[kind],
        )
        ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
    labels = []
    for f in formats:
        row = result.select(format=f, source=source, data=data, kind="weight")[0]
        labels.append(f"{f}\n{_bits_label(row)}")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlabel(_FORMAT_AXIS, fontsize=8)
    ax.set_ylabel("SQNR (dB), higher is better")
    ax.set_title(f"Quantization SQNR: {source} / {data}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    _legend(fig, ax)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    return save_figure(fig, path.with_suffix(""), ("png",))[0]


def plot_quant_sqnr(result: QuantStudyResult, out_dir: str | Path) -> list[Path]:
    """One grouped bar chart of SQNR per data source (weights, activations, GEMM output).

    The ``fp32`` reference is left out of the charts (its SQNR is ~150 dB or infinite); the
    CSV and the table keep it.

    Args:
        result: the study result.
        out_dir: output folder (created if needed).

    Returns:
        The PNG paths written, ``sqnr_<source>_<data>.png``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for source, data in _datasets(result):
        fig = sqnr_figure(result, source, data)
        if fig is not None:
            paths.append(_save(fig, out / f"sqnr_{source}_{data}.png"))
    return paths


def cosine_figure(result: QuantStudyResult, source: str, data: str) -> Figure | None:
    """The real model's embedding error chart, 1 − cosine (mean and worst), log scale.

    Args:
        result: the study result.
        source: the data source (``real``).
        data: its name (``minilm``).

    Returns:
        The figure, or None without embedding rows for that data.
    """
    rows = [
        r
        for r in result.select(source=source, data=data, kind="embedding")
        if r.format != REFERENCE_FORMAT
    ]
    if not rows:
        return None
    n = len(result.sentences)
    caption = (
        f"Source: coaccel quant (coaccel.studies.quant), {source} / {data}: all-MiniLM-L6-v2 "
        f"sentence embeddings of the first {n} sentences of the built-in corpus with all 36 "
        "linear layers quantized (weights and activations) vs the unquantized model "
        f"({result.config.real.dtype}); HBQ partial sums: {result.config.psum_mode}; no random "
        "inputs. Bars floored at 1e-9 so that an exact embedding shows on the log axis; bar "
        "labels: the cosine similarity itself."
    )
    fig = new_figure(max(7.0, 1.0 * len(rows) + 3.5), 4.2, caption)
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    # Floor at 1e-9 so that an exact embedding still shows on the log axis.
    mean_err = [max(1.0 - r.cosine_mean, 1e-9) for r in rows]
    worst_err = [max(1.0 - r.cosine_min, 1e-9) for r in rows]
    b1 = ax.bar(x - 0.2, mean_err, 0.4, label="1 − mean cosine", color=OKABE_ITO[0])
    b2 = ax.bar(x + 0.2, worst_err, 0.4, label="1 − worst-sentence cosine", color=OKABE_ITO[5])
    ax.bar_label(b1, labels=[f"{r.cosine_mean:.4f}" for r in rows], fontsize=6, padding=1)
    ax.bar_label(b2, labels=[f"{r.cosine_min:.4f}" for r in rows], fontsize=6, padding=1)
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{r.format}\n{_bits_label(r)}" for r in rows], fontsize=7)
    ax.set_xlabel(_FORMAT_AXIS, fontsize=8)
    ax.set_ylabel("1 − cosine similarity vs float (lower is better)")
    ax.set_title(f"{data}: sentence-embedding error, {n} sentences", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    _legend(fig, ax)
    return fig


def plot_quant_cosine(result: QuantStudyResult, out_dir: str | Path) -> list[Path]:
    """Bar chart of the real model's embedding error, 1 − cosine (mean and worst), log scale.

    Args:
        result: the study result.
        out_dir: output folder (created if needed).

    Returns:
        The PNG paths written (none when the study had no real-model rows).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for source, data in _datasets(result):
        fig = cosine_figure(result, source, data)
        if fig is not None:
            paths.append(_save(fig, out / f"cosine_{source}_{data}.png"))
    return paths


def _db(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.2f}"


def _table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        # First column left-aligned (names), the numbers right-aligned.
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, body)])


def format_quant_table(result: QuantStudyResult) -> str:
    """A readable text table per data source.

    Columns: format, weight/activation bits per element, SQNR (dB) of weights, activations and
    GEMM output, GEMM relative error; for the real model also the worst layer's GEMM SQNR and
    the embedding cosine similarity (mean, worst sentence).

    Args:
        result: the study result.

    Returns:
        The table text (no trailing newline).
    """
    blocks = []
    for source, data in _datasets(result):
        real = bool(result.select(source=source, data=data, kind="embedding"))
        headers = [
            "format",
            "W bits",
            "A bits",
            "W SQNR dB",
            "A SQNR dB",
            "GEMM SQNR dB",
            "GEMM rel err",
        ]
        if real:
            headers += ["GEMM worst layer dB", "emb cos mean", "emb cos min"]
        body = []
        for f in _formats(result, reference=True):
            got = {r.kind: r for r in result.select(format=f, source=source, data=data)}
            if not got:
                continue
            w, a, g = got["weight"], got["activation"], got["gemm"]
            cells = [
                f,
                f"{w.weight_bits_per_element:.3f}",
                f"{w.activation_bits_per_element:.3f}",
                _db(w.sqnr_db),
                _db(a.sqnr_db),
                _db(g.sqnr_db),
                f"{g.rel_error:.3e}",
            ]
            if real:
                e = got["embedding"]
                cells += [_db(g.sqnr_db_min), f"{e.cosine_mean:.6f}", f"{e.cosine_min:.6f}"]
            body.append(cells)
        title = f"{source} / {data}"
        if real:
            title += f" ({len(result.sentences)} sentences, 36 linear layers pooled)"
        else:
            s = result.config.synthetic
            title += (
                f" (A {s.tokens}x{s.in_features}, W {s.out_features}x{s.in_features}, "
                f"seed {result.config.seed})"
            )
        blocks.append(f"{title}\n{_table(headers, body)}")
    return "\n\n".join(blocks)


def write_quant_report(result: QuantStudyResult, out_dir: str | Path) -> list[Path]:
    """Write the CSV and every chart.

    Args:
        result: the study result.
        out_dir: output folder (created if needed).

    Returns:
        Every path written: the CSV first, then the PNGs.
    """
    out = Path(out_dir)
    paths = [write_quant_csv(result, out / CSV_NAME)]
    paths += plot_quant_sqnr(result, out)
    paths += plot_quant_cosine(result, out)
    return paths
