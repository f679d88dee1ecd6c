"""One area/energy report for designs of any target kinds: HTML, Markdown and CSV.

Each target's report role (:class:`coaccel.spine.target.ReportRole`) turns its designs into a
:class:`ReportPart`: titled sections of tables and figures, and flat :class:`Figure` rows (a
value with its unit, one-sigma uncertainty and source). :func:`write_report` puts the parts of
every kind into one self-contained HTML page (images inline), one Markdown page and one CSV
(:data:`CSV_COLUMNS`), so ``coaccel report hbq_e_28nm kv260 h200`` gives one report.

* :class:`ReportSettings`: what the command asked for (workloads, scenario, mode, node, area
  only, the folder figures go to).
* :class:`ReportPart`, :class:`Section`, :class:`Table`, :class:`Chart`, :class:`Figure`.
* :func:`write_report`: the three files.
"""

from __future__ import annotations

import base64
import csv
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .files import atomic_open, write_text

__all__ = [
    "CSV_COLUMNS",
    "Chart",
    "Figure",
    "ReportPart",
    "ReportSettings",
    "Section",
    "Table",
    "write_report",
]

CSV_COLUMNS = (
    "kind",
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
"""Columns of ``cost_report.csv``: one figure per row. ``quantity`` says what it is (``area``,
``energy``, ``power``, ``energy_per_token``, ``resource``, ...), ``unit`` its unit, ``sigma``
one standard uncertainty in the same unit (empty where none is stated) and ``source`` where the
number comes from (a reference key of docs/references.md and the place in it, or how it was
derived)."""


@dataclass(frozen=True)
class ReportSettings:
    """What ``coaccel report`` was asked for; a target's report role reads what applies.

    Attributes:
        workloads: workload names (empty: the target's defaults).
        scenario: scenario name (None: the target's default).
        mode: simulator mode (``"analytical"`` or ``"cycle"``).
        node_nm: technology node of an ASIC's area and energy, nm.
        area_only: price the designs without running a workload.
        out_dir: folder for the part's figure files (PNG/SVG).
    """

    workloads: tuple[str, ...] = ()
    scenario: str | None = None
    mode: str = "analytical"
    node_nm: float = 28.0
    area_only: bool = False
    out_dir: Path = Path(".")


@dataclass(frozen=True)
class Figure:
    """One reported number with its unit, uncertainty and source (one CSV row).

    Attributes:
        arch: architecture name.
        quantity: what the number is (``"area"``, ``"energy"``, ``"power"``, ...).
        component: which part of the design (``"total"`` for the whole).
        value: the number, in ``unit``.
        unit: its unit (``"um2"``, ``"J"``, ``"W"``, ``"LUT"``...).
        sigma: one standard uncertainty in ``unit`` (NaN: none stated).
        source: where it comes from.
        workload: the workload it was measured on (empty for a design property).
        node_nm: technology node (NaN where it does not apply: an FPGA, a GPU).
    """

    arch: str
    quantity: str
    component: str
    value: float
    unit: str
    sigma: float
    source: str
    workload: str = ""
    node_nm: float = math.nan


@dataclass(frozen=True)
class Table:
    """A table of a section: headers (units in them) and rows of text cells.

    Attributes:
        headers: column headers, each with its unit where it has one (``"area (um2)"``).
        rows: the cells, already formatted.
    """

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Chart:
    """A static chart a part drew (a PNG file, embedded in the HTML page).

    Attributes:
        png: the PNG file (written by the part into :attr:`ReportSettings.out_dir`).
        caption: what the chart shows and where its numbers come from. The chart draws it
            under its axes (so the PNG and SVG files stand alone); the pages use it as the
            image's text alternative rather than print it a second time.
        others: other files of the same chart (an SVG), listed in the manifest.
    """

    png: Path
    caption: str
    others: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Section:
    """A titled section: paragraphs, charts, then tables.

    Attributes:
        title: the heading.
        paragraphs: text before the charts and tables.
        charts: charts.
        tables: tables.
    """

    title: str
    paragraphs: tuple[str, ...] = ()
    charts: tuple[Chart, ...] = ()
    tables: tuple[Table, ...] = ()


@dataclass(frozen=True)
class ReportPart:
    """What one target contributes to a report.

    Attributes:
        kind: the target kind.
        title: the part's heading (``"HBQ ASIC: area and energy"``).
        notes: remarks under the heading (simulator mode, node, models used).
        sections: its sections.
        figures: every number of the part as a flat row (the CSV).
    """

    kind: str
    title: str
    notes: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    figures: tuple[Figure, ...] = field(default=())

    def files(self) -> list[Path]:
        """Every chart file of the part (PNG and the others)."""
        out: list[Path] = []
        for s in self.sections:
            for c in s.charts:
                out += [c.png, *c.others]
        return out


def _cell(v: float) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.12g}"


def _md_table(t: Table) -> list[str]:
    esc = [tuple(c.replace("|", "\\|") for c in r) for r in t.rows]
    out = ["| " + " | ".join(t.headers) + " |", "|" + "|".join("---" for _ in t.headers) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in esc]


def write_report(
    parts: Sequence[ReportPart],
    out_dir: str | Path,
    *,
    title: str = "Area and energy report",
    notes: Sequence[str] = (),
    stem: str = "cost_report",
) -> list[Path]:
    """Write the parts as one report: ``<stem>.html`` (self-contained), ``.md`` and ``.csv``.

    Args:
        parts: one part per target kind, in the order to show.
        out_dir: output folder (the parts' charts are already in it).
        title: the page title.
        notes: remarks under the title.
        stem: file name without suffix.

    Returns:
        Every file of the report: the parts' chart files, then CSV, Markdown and HTML.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = [p for part in parts for p in part.files()]
    csv_path = out / f"{stem}.csv"
    with atomic_open(csv_path) as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for part in parts:
            for f in part.figures:
                w.writerow(
                    [part.kind, f.arch, f.workload, _cell(f.node_nm), f.quantity, f.component,
                     _cell(f.value), f.unit, _cell(f.sigma), " ".join(f.source.split())]
                )  # fmt: skip
    paths.append(csv_path)
    md = [f"# {title}", ""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    for part in parts:
        md += [f"## {part.title}", ""] + [f"- {n}" for n in part.notes]
        md += [""] if part.notes else []
        for s in part.sections:
            md += [f"### {s.title}", ""]
            for p in s.paragraphs:
                md += [p, ""]
            for c in s.charts:
                alt = " ".join(c.caption.split()).replace("]", ")").replace("[", "(")
                md += [f"![{alt}]({c.png.name})", ""]
            for t in s.tables:
                md += [*_md_table(t), ""]
    md += [
        f"Every figure with its unit, one-sigma uncertainty and source: `{csv_path.name}`.",
        "",
    ]
    md_path = out / f"{stem}.md"
    write_text(md_path, "\n".join(md))
    paths.append(md_path)
    html_path = out / f"{stem}.html"
    write_text(html_path, _html(parts, title, notes, csv_path.name))
    paths.append(html_path)
    return paths


_CSS = (
    "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:12px;margin-bottom:1em}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"
    "img{max-width:100%}figure{margin:1em 0}figcaption{font-size:12px;color:#333}"
)


def _html(parts: Sequence[ReportPart], title: str, notes: Sequence[str], csv_name: str) -> str:
    e = html.escape
    h = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    if notes:
        h += ["<ul>", *[f"<li>{e(n)}</li>" for n in notes], "</ul>"]
    for part in parts:
        h.append(f"<h2>{e(part.title)}</h2>")
        if part.notes:
            h += ["<ul>", *[f"<li>{e(n)}</li>" for n in part.notes], "</ul>"]
        for s in part.sections:
            h.append(f"<h3>{e(s.title)}</h3>")
            h += [f"<p>{e(p)}</p>" for p in s.paragraphs]
            for c in s.charts:
                # embedded: the page is one self-contained file
                data = base64.b64encode(c.png.read_bytes()).decode("ascii")
                alt = e(" ".join(c.caption.split()), quote=True)
                h += [f"<figure><img src='data:image/png;base64,{data}' alt=\"{alt}\"></figure>"]
            for t in s.tables:
                h.append("<table><tr>" + "".join(f"<th>{e(x)}</th>" for x in t.headers) + "</tr>")
                h += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in t.rows]
                h.append("</table>")
    h += [
        f"<p>Every figure with its unit, one-sigma uncertainty and source: {e(csv_name)}.</p>",
        "</body></html>",
    ]
    return "\n".join(h)
