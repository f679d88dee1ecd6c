"""Tables of ``coaccel validate deltallm``: text for the terminal, CSV and Markdown files.

The rows are the shared :class:`~coaccel.validate.targets.Target` rows, in the columns of
``validate hbq`` (:data:`~coaccel.report.validation.VALIDATION_CSV_COLUMNS`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from coaccel.report.files import atomic_open, write_text
from coaccel.report.validation import VALIDATION_CSV_COLUMNS, validation_rows
from coaccel.validate.targets import Validation

__all__ = ["GROUP_TITLES", "format_deltallm_validation", "write_deltallm_validation"]

GROUP_TITLES = {
    "calibration": "TeLLMe-v2 baseline calibration (fitted to its published TTFT)",
    "sparsity": "Sparsity: Delta-Key ρ_K (paper: up to 60 %) and structured score ρ_S (63 %)",
    "speedup": "Prefill speedup over TeLLMe-v2 on the KV260 (paper: 1.62x)",
    "resources": "Resources against TeLLMe-v2 (paper: fewer DSPs and BRAMs)",
}
"""Section titles by target group."""

_SHOWN = ("target", "fit", "ours", "paper", "unit", "error_pct", "status")


def _counts(v: Validation) -> str:
    parts = []
    for role, counts in v.counts_by_fit().items():
        parts.append(f"{role}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return "; ".join(parts)


def format_deltallm_validation(v: Validation) -> str:
    """Readable text of the validation: one block per group, its notes, then the counts.

    Args:
        v: the validation.

    Returns:
        The text (no trailing newline).
    """
    rows = validation_rows(v)
    blocks = []
    for group, title in GROUP_TITLES.items():
        body = [[r[c] for c in _SHOWN] for r in rows if r["group"] == group]
        if not body:
            continue
        widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(_SHOWN)]
        lines = [title, "  ".join(h.ljust(w) for h, w in zip(_SHOWN, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
        seen: list[str] = []
        for r in rows:
            if r["group"] == group and r["note"] not in seen:
                seen.append(r["note"])
        lines += [f"  why: {n}" for n in seen]
        blocks.append("\n".join(lines))
    blocks.append("\n".join(f"note: {n}" for n in v.notes))
    blocks.append(f"targets: {_counts(v)}")
    return "\n\n".join(blocks)


def write_deltallm_validation(v: Validation, out_dir: str | Path) -> list[Path]:
    """Write ``deltallm_validation.csv`` and ``deltallm_validation.md``.

    Args:
        v: the validation.
        out_dir: output folder (created if needed).

    Returns:
        The two paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "deltallm_validation.csv"
    rows = validation_rows(v)
    with atomic_open(csv_path) as fh:
        w = csv.writer(fh)
        w.writerow(VALIDATION_CSV_COLUMNS)
        for r in rows:
            w.writerow([r[c] for c in VALIDATION_CSV_COLUMNS])
    md = ["# DeltaLLM validation: the FPGA simulator vs the published figures", ""]
    md += [f"- {n}" for n in v.notes] + ["", f"Targets: {_counts(v)}.", ""]
    for group, title in GROUP_TITLES.items():
        sel = [r for r in rows if r["group"] == group]
        if not sel:
            continue
        cols = [*_SHOWN, "note"]
        md += [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        md += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in sel]
        md.append("")
    md_path = out / "deltallm_validation.md"
    write_text(md_path, "\n".join(md))
    return [csv_path, md_path]
