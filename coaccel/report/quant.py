"""Report of the quantization accuracy study: CSV, PNG charts and a printed table.

The study (:mod:`coaccel.studies.quant`) returns pure data; this module is the only place that
formats, writes or plots it. Files written into the output folder:

* ``quant_results.csv``: one row per format × data source × tensor kind, the columns of
  :class:`~coaccel.studies.quant.QuantRow` (units in the names: ``sqnr_db`` in dB,
  ``*_bits_per_element`` in bits; ``inf`` for an exact result, an empty cell where a column
  does not apply, e.g. ``cosine_*`` outside ``embedding`` rows).
* ``sqnr_<source>_<data>.png``: SQNR of weights, activations and GEMM outputs per format.
* ``cosine_real_minilm.png``: sentence-embedding error (1 − cosine, mean and worst sentence)
  of the real model with every linear layer quantized.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..studies.quant import REFERENCE_FORMAT, QuantRow, QuantStudyResult

__all__ = [
    "CSV_COLUMNS",
    "CSV_NAME",
    "format_quant_table",
    "plot_quant_cosine",
    "plot_quant_sqnr",
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
    with p.open("w", newline="", encoding="utf-8") as fh:
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


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=110)
    return path


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
    formats = _formats(result, reference=False)
    if not formats:
        return paths
    kinds = list(_KIND_LABELS)
    for source, data in _datasets(result):
        fig = Figure(figsize=(max(6.0, 1.1 * len(formats) + 2), 4.2))
        ax = fig.add_subplot()
        x = np.arange(len(formats))
        width = 0.8 / len(kinds)
        labels = []
        for j, kind in enumerate(kinds):
            vals = []
            for f in formats:
                rows = result.select(format=f, data=data, kind=kind)
                v = rows[0].sqnr_db if rows else math.nan
                # An exact result (inf dB) has no bar height; the table and CSV show it.
                vals.append(v if math.isfinite(v) else math.nan)
            bars = ax.bar(
                x + (j - (len(kinds) - 1) / 2) * width, vals, width, label=_KIND_LABELS[kind]
            )
            ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
        for f in formats:
            row = result.select(format=f, data=data, kind="weight")[0]
            labels.append(f"{f}\n{_bits_label(row)}")
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_ylabel("SQNR (dB), higher is better")
        ax.set_title(f"Quantization SQNR: {source} / {data}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(_save(fig, out / f"sqnr_{source}_{data}.png"))
    return paths


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
        rows = [
            r
            for r in result.select(source=source, data=data, kind="embedding")
            if r.format != REFERENCE_FORMAT
        ]
        if not rows:
            continue
        fig = Figure(figsize=(max(6.0, 1.0 * len(rows) + 2), 4.2))
        ax = fig.add_subplot()
        x = np.arange(len(rows))
        # Floor at 1e-9 so that an exact embedding still shows on the log axis.
        mean_err = [max(1.0 - r.cosine_mean, 1e-9) for r in rows]
        worst_err = [max(1.0 - r.cosine_min, 1e-9) for r in rows]
        b1 = ax.bar(x - 0.2, mean_err, 0.4, label="1 − mean cosine")
        b2 = ax.bar(x + 0.2, worst_err, 0.4, label="1 − worst-sentence cosine")
        ax.bar_label(b1, labels=[f"{r.cosine_mean:.4f}" for r in rows], fontsize=6, padding=1)
        ax.bar_label(b2, labels=[f"{r.cosine_min:.4f}" for r in rows], fontsize=6, padding=1)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{r.format}\n{_bits_label(r)}" for r in rows], fontsize=7)
        ax.set_ylabel("1 − cosine similarity vs float (lower is better)")
        n = len(result.sentences)
        ax.set_title(
            f"{data}: sentence embeddings, all 36 linear layers quantized (W and A), "
            f"{n} sentences\n(bar labels: cosine similarity)",
            fontsize=9,
        )
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
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
