"""Reports: the only layer that formats, writes files or plots (CSV, PNG, text tables).

* :mod:`.quant`: the quantization accuracy study (``coaccel quant``).
* :mod:`.hbq`: the HBQ validation table and the area/energy report (``coaccel validate hbq``,
  ``coaccel report``).
* :mod:`.sweep`: the sweep report, one self-contained HTML page with the interactive front,
  Markdown, CSV and PNG charts (``coaccel sweep-report``).
"""

from .quant import (
    CSV_COLUMNS,
    CSV_NAME,
    cosine_figure,
    format_quant_table,
    plot_quant_cosine,
    plot_quant_sqnr,
    sqnr_figure,
    write_quant_csv,
    write_quant_report,
)

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
