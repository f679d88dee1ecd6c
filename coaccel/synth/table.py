"""The tables ``coaccel synth`` writes: their columns, CSV text, reading back, merging.

Two layouts, one per view (:data:`VIEWS`):

* ``"asic+fpga"``, :data:`COLUMNS`: generic CMOS gates with Yosys's transistor estimate, SRAM
  macros of a hierarchical point, and UltraScale+ cells;
* ``"fpga"``, :data:`FPGA_COLUMNS`: UltraScale+ cells only, with 36 Kb block RAM, UltraRAM and
  the LUTs of distributed RAM.

Every row carries ``group``, ``top``, ``params`` (the point), the digest of the sources and
scripts it came from (``rtl_digest``, so a stale row is found without running Yosys) and the
Yosys version line. Values are CSV text.

Public: :data:`COLUMNS`, :data:`FPGA_COLUMNS`, :data:`VIEWS`, :func:`rows_to_csv`,
:func:`read_table`, :func:`read_area_csv`, :func:`merge_rows`, :func:`param_values`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from ..spine.errors import CoaccelError
from .point import SynthPoint

__all__ = [
    "COLUMNS",
    "FPGA_COLUMNS",
    "VIEWS",
    "merge_rows",
    "param_values",
    "read_area_csv",
    "read_table",
    "rows_to_csv",
]

COLUMNS = (
    "group",
    "top",
    "params",
    "macs",
    "asic_cells",
    "asic_dff_cells",
    "asic_nand_cells",
    "asic_nor_cells",
    "asic_not_cells",
    "cmos_transistors",
    "cmos_transistors_per_mac",
    "sram_macros",
    "sram_bits",
    "asic_hierarchy",
    "fpga_luts",
    "fpga_ffs",
    "fpga_carry_cells",
    "fpga_dsps",
    "fpga_bram18",
    "fpga_lutram_cells",
    "rtl_digest",
    "yosys_version",
)
"""Columns of the two-view (``"asic+fpga"``) table. Every count is a number of cells (or
transistors) of the synthesized netlist; ``cmos_transistors_per_mac`` is
``cmos_transistors / macs`` (empty when ``macs`` is 0); ``sram_macros`` / ``sram_bits`` are the
RAM instances left out of the ASIC count as SRAM macros and their total bits (0 for flattened
blocks, which hold no RAM); ``asic_hierarchy`` lists, for a hierarchical point, every module of
the design hierarchy as ``module*instances=transistors`` (``;``-separated, transistors of one
instance without its kept submodules, so ``cmos_transistors`` is the sum of instances x
transistors), empty for a flattened point; ``fpga_bram18`` counts 18 Kb block-RAM halves
(RAMB36 = 2); ``fpga_lutram_cells`` counts distributed-RAM primitives (``RAM32M16``,
``RAM64M8``, ...), cells that occupy SLICEM LUTs but are not in ``fpga_luts``; ``rtl_digest``
identifies the sources and scripts the row was synthesized from
(:func:`~coaccel.synth.source_digest`), so a stale row is detected without running Yosys."""

FPGA_COLUMNS = (
    "group",
    "top",
    "params",
    "fpga_luts",
    "fpga_ffs",
    "fpga_carry_cells",
    "fpga_dsps",
    "fpga_bram36",
    "fpga_uram",
    "fpga_lutram_cells",
    "fpga_lutram_luts",
    "rtl_digest",
    "yosys_version",
)
"""Columns of the FPGA-only (``"fpga"``) table: Yosys ``synth_xilinx -family xcup`` cell counts
(synthesis, not place and route); ``fpga_bram36`` counts 36 Kb block RAMs (two RAMB18 halves =
one, so it may end in ``.5``), ``fpga_uram`` 288 Kb UltraRAMs; ``fpga_luts`` the logic LUTs and
``fpga_lutram_luts`` the LUTs the distributed-RAM cells occupy
(:data:`~coaccel.synth.LUTRAM_LUTS`), so a design's LUT use is their sum. The digest covers the
sources and the FPGA template only."""

VIEWS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"asic+fpga": COLUMNS, "fpga": FPGA_COLUMNS}
)
"""The columns of each view a synthesis set may ask for
(:attr:`coaccel.spine.target.SynthesisSet.view`)."""


def rows_to_csv(rows: Iterable[Mapping[str, str]], columns: Sequence[str] = COLUMNS) -> str:
    """CSV text (header ``columns``, ``\\n`` line ends) of table rows.

    Args:
        rows: the rows (values as CSV text); each holds at least ``columns``.
        columns: the table's columns (:data:`COLUMNS` or :data:`FPGA_COLUMNS`).

    Returns:
        The CSV text.
    """
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: r[c] for c in columns})
    return buf.getvalue()


def read_table(path: str | Path, columns: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a table written by ``coaccel synth``, its header checked.

    Args:
        path: the CSV file.
        columns: the columns it must have, in order.

    Returns:
        The rows (values as CSV text).

    Raises:
        CoaccelError: the header is not ``columns``.
    """
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != tuple(columns):
            raise CoaccelError(f"{path}: header {reader.fieldnames}, expected {list(columns)}")
        return list(reader)


def read_area_csv(path: str | Path) -> list[dict[str, str]]:
    """Rows of a two-view area table (columns :data:`COLUMNS`).

    Raises:
        CoaccelError: the header is not :data:`COLUMNS`.
    """
    return read_table(path, COLUMNS)


def merge_rows(
    old: Iterable[Mapping[str, str]],
    new: Iterable[Mapping[str, str]],
    points: Iterable[SynthPoint],
) -> list[dict[str, str]]:
    """A table updated with newly synthesized rows (e.g. of one ``--blocks`` group).

    Args:
        old: the rows of the existing table.
        new: fresh rows; each replaces the old row of the same ``(group, top, params)``.
        points: every design point of the table, in table order.

    Returns:
        The rows of both, a new one winning, in the order of ``points``; rows of points that
        are no longer defined are dropped.
    """
    by_key = {(r["group"], r["top"], r["params"]): dict(r) for r in old}
    by_key.update({(r["group"], r["top"], r["params"]): dict(r) for r in new})
    order = [(p.group, p.top, p.param_string) for p in points]
    return [by_key[k] for k in order if k in by_key]


def param_values(row: Mapping[str, str]) -> dict[str, int]:
    """The ``params`` column of a row as HDL parameter name -> value (``"B=8;W=4"``)."""
    return {k: int(v) for k, v in (kv.split("=") for kv in row["params"].split(";") if kv)}
