"""The validation table every ``coaccel validate NAME`` prints and writes.

The rows are :class:`~coaccel.validate.targets.Target` records (our value with its one sigma
or its band, the published one, unit, the rule it is judged by, error, status, fitted or
predicted, inputs real or synthetic, source, note); this module formats them for the terminal
and writes them as CSV and Markdown, one section per group, for every ``coaccel validate NAME``:

* :func:`validation_rows` / :data:`VALIDATION_CSV_COLUMNS`: flat rows (CSV and JSON);
* :func:`format_validation_table`: the terminal text, one block per group (optionally the
  validation's notes), then the summary line;
* :func:`validation_summary`: status counts, predicted and fitted rows apart;
* :func:`write_validation_report`: ``<stem>.csv`` and ``<stem>.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..validate.targets import Target, Validation
from .files import atomic_open, write_text

__all__ = [
    "VALIDATION_CSV_COLUMNS",
    "format_validation_table",
    "md_table",
    "validation_rows",
    "validation_summary",
    "write_validation_report",
]

VALIDATION_CSV_COLUMNS = (
    "group",
    "target",
    "fit",
    "data",
    "ours",
    "ours_sigma",
    "ours_low",
    "ours_high",
    "ours_loo",
    "paper",
    "unit",
    "error_pct",
    "loo_error_pct",
    "ours_as_paper",
    "as_paper_error_pct",
    "tolerance_pct",
    "tolerance_abs",
    "status",
    "loo_status",
    "source",
    "note",
)
"""Columns of every ``<set>_validation.csv``: ``fit`` is ``fitted`` (a model was fitted on the
paper's figure, or on the points it is computed from: agreement is in sample) or ``predicted``
(not used in any fit); ``data`` says whether our value comes from ``real`` or ``synthetic``
inputs; ``ours_sigma`` one sigma; ``ours_low`` / ``ours_high`` our band, for rows judged by
whether the published figure lies inside it; ``tolerance_pct`` the agreement asked for in
percent, ``tolerance_abs`` in the row's unit; ``ours_loo`` the leave-one-out prediction of a
fitted row (the model refitted without its points) and ``loo_status`` that prediction judged
against the same tolerance; empty cells where a column does not apply."""


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
        t.data,
        _num(t.ours),
        _num(t.ours_sigma, 2),
        _num(t.ours_low),
        _num(t.ours_high),
        _num(t.ours_loo),
        _num(t.paper),
        t.unit,
        _num(t.error_pct, 3),
        _num(t.loo_error_pct, 3),
        _num(t.ours_as_paper),
        _num(t.as_paper_error_pct, 3),
        "" if t.tolerance_pct is None else f"{t.tolerance_pct:g}",
        "" if t.tolerance_abs is None else f"{t.tolerance_abs:g}",
        t.status,
        t.loo_status,
        " ".join(t.source.split()),
        " ".join(t.note.split()),
    ]


_MD_HEADERS = {
    "target": "target",
    "fit": "fitted / predicted",
    "data": "data",
    "ours": "ours",
    "ours_sigma": "1 sigma",
    "ours_low": "band low",
    "ours_high": "band high",
    "ours_loo": "ours LOO",
    "paper": "paper",
    "unit": "unit",
    "error_pct": "error %",
    "loo_error_pct": "LOO error %",
    "ours_as_paper": "ours as [R-PM] counts",
    "as_paper_error_pct": "error %, as [R-PM] counts",
    "tolerance_pct": "tol. %",
    "tolerance_abs": "tol.",
    "status": "status",
    "loo_status": "LOO status",
    "note": "note",
}
"""Markdown header of each CSV column the Markdown tables show (not group and source)."""

_OPTIONAL_COLUMNS = {
    "data": lambda t: bool(t.data),
    "ours_sigma": lambda t: not math.isnan(t.ours_sigma),
    "ours_low": lambda t: t.has_band,
    "ours_high": lambda t: t.has_band,
    "ours_loo": lambda t: not math.isnan(t.ours_loo),
    "loo_error_pct": lambda t: not math.isnan(t.ours_loo),
    "loo_status": lambda t: not math.isnan(t.ours_loo),
    "ours_as_paper": lambda t: not math.isnan(t.ours_as_paper),
    "as_paper_error_pct": lambda t: not math.isnan(t.ours_as_paper),
    "tolerance_pct": lambda t: t.tolerance_pct is not None,
    "tolerance_abs": lambda t: t.tolerance_abs is not None,
}
"""Markdown columns shown in a group's table only where one of its rows has them (the [R-PM]
accounting, leave-one-out, band, tolerance columns...)."""


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


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _ours_cell(t: Target) -> str:
    """Our value with its one sigma (``1.2 ±0.1``) or its band (``1.2 (1.1..1.3)``)."""
    if t.has_band:
        return f"{_num(t.ours)} ({_num(t.ours_low)}..{_num(t.ours_high)})"
    sig = "" if math.isnan(t.ours_sigma) else f"±{_num(t.ours_sigma, 2)}"
    return f"{_num(t.ours)} {sig}".strip()


def _ours_header(rows: Sequence[Target]) -> str:
    band = any(t.has_band for t in rows)
    sigma = any(not math.isnan(t.ours_sigma) for t in rows)
    spread = [w for w, has in (("1 sigma", sigma), ("band", band)) if has]
    return f"ours ({' | '.join(spread)})" if spread else "ours"


def format_validation_table(
    v: Validation, group_titles: Mapping[str, str], *, notes: bool = False
) -> str:
    """Readable text of a validation (what ``coaccel validate NAME`` prints).

    Args:
        v: the validation.
        group_titles: group -> section title, in the order to print (groups not named are
            printed last under their own name).
        notes: also print the validation's notes (``note: ...``) before the summary.

    Returns:
        One block per target group (its rows, then why the rows that are not ``ok`` differ),
        the notes if asked, then the summary line ``targets: predicted: ...; fitted (in
        sample): ...`` (no trailing newline).
    """
    blocks = []
    for group, title in _titles(v, group_titles).items():
        rows = v.select(group)
        if not rows:
            continue
        body = []
        as_paper = any(not math.isnan(t.ours_as_paper) for t in rows)
        has_loo = any(not math.isnan(t.ours_loo) for t in rows)
        has_data = any(t.data for t in rows)
        for t in rows:
            err = "" if math.isnan(t.error_pct) else f"{t.error_pct:+.1f}%"
            row = [t.name, t.fit]
            if has_data:
                row.append(t.data)
            row += [_ours_cell(t), _num(t.paper), t.unit, err, t.status]
            if has_loo:
                e3 = "" if math.isnan(t.loo_error_pct) else f" ({t.loo_error_pct:+.1f}%)"
                row.append(f"{_num(t.ours_loo)}{e3} {t.loo_status}".strip())
            if as_paper:
                e2 = "" if math.isnan(t.as_paper_error_pct) else f" ({t.as_paper_error_pct:+.1f}%)"
                row.append(f"{_num(t.ours_as_paper)}{e2}")
            body.append(row)
        headers = ["target", "fit"] + (["data"] if has_data else [])
        headers += [_ours_header(rows), "paper", "unit", "error", "status"]
        if has_loo:
            headers.append("leave-one-out (error) status")
        if as_paper:
            headers.append("ours as [R-PM] counts (error)")
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
        lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
        explained = ("differs", "baseline missing", "info", "no paper value")
        by_note: dict[str, list[str]] = {}
        for t in rows:
            if t.status in explained and t.note.strip():
                by_note.setdefault(" ".join(t.note.split()), []).append(t.name)
        for note, names in by_note.items():
            who = names[0] if len(names) == 1 else f"{len(names)} rows above"
            lines.append(f"  why ({who}): {note}")
        blocks.append("\n".join(lines))
    if notes and v.notes:
        blocks.append("\n".join(f"note: {n}" for n in v.notes))
    blocks.append(f"targets: {validation_summary(v)}")
    return "\n\n".join(blocks)


def write_validation_report(
    v: Validation,
    out_dir: str | Path,
    *,
    stem: str,
    title: str,
    group_titles: Mapping[str, str],
    intro: Sequence[str] = (),
) -> list[Path]:
    """Write ``<stem>.csv`` and ``<stem>.md``.

    Args:
        v: the validation.
        out_dir: output folder (created if needed).
        stem: file name without suffix (``"hbq_validation"``).
        title: the Markdown page's title.
        group_titles: group -> section title, in order.
        intro: paragraphs after the summary (what fitted / predicted mean here...).

    Returns:
        The two paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{stem}.csv"
    with atomic_open(csv_path) as fh:
        w = csv.writer(fh)
        w.writerow(VALIDATION_CSV_COLUMNS)
        for t in v.targets:
            w.writerow(_target_cells(t))
    md = [f"# {title}", ""]
    md += [f"- {n}" for n in v.notes]
    md += ["", f"Targets: {validation_summary(v)}.", ""]
    for para in intro:
        md += [para, ""]
    for group, heading in _titles(v, group_titles).items():
        rows = v.select(group)
        if not rows:
            continue
        md += [f"## {heading}", ""]
        cols = [
            c
            for c in _MD_HEADERS
            if c not in _OPTIONAL_COLUMNS or any(_OPTIONAL_COLUMNS[c](t) for t in rows)
        ]
        keep = [VALIDATION_CSV_COLUMNS.index(c) for c in cols]
        md.append(
            md_table(
                [_MD_HEADERS[c] for c in cols],
                [[_target_cells(t)[i] for i in keep] for t in rows],
            )
        )
        sources = sorted({" ".join(t.source.split()) for t in rows})
        md += ["", "Sources: " + "; ".join(sources), ""]
    md_path = out / f"{stem}.md"
    write_text(md_path, "\n".join(md) + "\n")
    return [csv_path, md_path]


def _titles(v: Validation, group_titles: Mapping[str, str]) -> dict[str, str]:
    """The given titles in order, then any group of ``v`` they do not name."""
    out = dict(group_titles)
    for t in v.targets:
        out.setdefault(t.group, t.group)
    return out
