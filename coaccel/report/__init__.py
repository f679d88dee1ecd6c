"""Reports: the only layer that formats, writes files or plots (CSV, PNG, text tables).

* :mod:`.quant`: the quantization accuracy study (``coaccel quant``).
* :mod:`.hbq`: the HBQ validation table and the area/energy report (``coaccel validate hbq``,
  ``coaccel report``).
* :mod:`.sweep`: the sweep report, one self-contained HTML page with the interactive front,
  Markdown, CSV and PNG charts (``coaccel sweep-report``).
"""

_LAZY = {
    name: ".quant"
    for name in (
        "CSV_COLUMNS",
        "CSV_NAME",
        "cosine_figure",
        "format_quant_table",
        "plot_quant_cosine",
        "plot_quant_sqnr",
        "sqnr_figure",
        "write_quant_csv",
        "write_quant_report",
    )
}
"""Names re-exported from the quantization study's report, imported on first use: the report
modules pull in matplotlib and the models, which a command that only writes a file must not
pay for at start-up."""

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> object:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod, __name__), name)
