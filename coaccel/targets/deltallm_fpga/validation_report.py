"""Tables of ``coaccel validate deltallm``: text for the terminal, CSV and Markdown files.

The rows are the shared :class:`~coaccel.validate.targets.Target` rows, printed and written by the
shared validation table (:mod:`coaccel.report.validation`: the columns of
:data:`~coaccel.report.validation.VALIDATION_CSV_COLUMNS`, a status per row, the summary line).
"""

from __future__ import annotations

from pathlib import Path

from coaccel.report.validation import format_validation_table, write_validation_report
from coaccel.validate.targets import Validation

__all__ = ["GROUP_TITLES", "format_deltallm_validation", "write_deltallm_validation"]

GROUP_TITLES = {
    "baseline": "TeLLMe-v2 baseline vs its published TTFT: from its HLS loops (predicted, "
    "±10 %) and the calibrated design (fitted to both points, ±1 %)",
    "sparsity": "Sparsity: Delta-Key ρ_K (paper: up to 60 %) and structured score ρ_S (63 %), "
    "±10 %; data real (a decoder's keys, mean ±1 sigma over passages) or synthetic",
    "speedup": "Prefill speedup over TeLLMe-v2 on the KV260 (paper: 1.62x), ±10 %",
    "resources": "Resources against TeLLMe-v2 (paper: fewer DSPs and BRAMs)",
}
"""Section titles by target group."""


def format_deltallm_validation(v: Validation) -> str:
    """Readable text of the validation: one block per group, the notes, then the summary line.

    Args:
        v: the validation.

    Returns:
        The text (no trailing newline).
    """
    return format_validation_table(v, GROUP_TITLES, notes=True)


def write_deltallm_validation(v: Validation, out_dir: str | Path) -> list[Path]:
    """Write ``deltallm_validation.csv`` and ``deltallm_validation.md``.

    Args:
        v: the validation.
        out_dir: output folder (created if needed).

    Returns:
        The two paths.
    """
    return write_validation_report(
        v,
        out_dir,
        stem="deltallm_validation",
        title="DeltaLLM validation: the FPGA simulator vs the published figures",
        group_titles=GROUP_TITLES,
        intro=(
            "*fitted*: the calibrated TeLLMe-v2 design was fitted on the figure (agreement is "
            "in sample); *predicted*: the figure was used in no fit. *data*: the keys behind a "
            "row, `real` (a real decoder's post-RoPE keys: mean and one sigma over passages) "
            "or `synthetic` (the seeded LLM-like generator).",
        ),
    )
