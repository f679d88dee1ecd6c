"""Yosys synthesis of RTL blocks: gate, transistor and FPGA resource counts, as tables.

This package is the generic machinery; the design points, their tables and what is compared
with them belong to the targets, each declaring its sets
(:class:`~coaccel.spine.target.SynthesisSet`: a name for ``coaccel synth --target``, the RTL
folder under ``rtl/``, the design points by group, the view and the committed table under
``rtl/synth/``).

Each design point (:class:`SynthPoint`: an RTL top module with HDL parameter overrides) is
synthesized with the script templates in ``rtl/synth/`` into one of two views
(:data:`VIEWS`):

* ``"asic+fpga"``, rows of :data:`COLUMNS`: the **ASIC view** (``asic.ys``): ``synth``, every
  flip-flop lowered to a plain D flip-flop, ``abc -g cmos2`` (NAND / NOR / NOT),
  ``stat -tech cmos`` (generic-cell counts and Yosys's CMOS transistor estimate: NAND2/NOR2 4,
  NOT 2, DFF 16 transistors); a point too large to flatten keeps chosen modules as hierarchy
  levels and turns its RAMs into black-box SRAM macros (``asic_array.ys``,
  :func:`parse_asic_hier_log`); and the **FPGA view** (``synth_xilinx -family xcup``,
  UltraScale+): LUT / flip-flop / CARRY / DSP / block-RAM / LUTRAM counts.
* ``"fpga"``, rows of :data:`FPGA_COLUMNS`: the FPGA view only, with UltraRAM, 36 Kb block RAM
  and the LUTs distributed RAM occupies.

Every log must end with the statistics that are parsed; a log that does not raises
:class:`SynthError`. Every row records the digest of the sources and scripts it came from
(:func:`source_digest`) and the Yosys version.

Modules:

* :mod:`.point`: :class:`SynthPoint`, :class:`SynthError`, :func:`select_points`;
* :mod:`.yosys`: :func:`find_yosys`, :func:`yosys_version`, :func:`find_rtl_dir`,
  :func:`asic_script`, :func:`fpga_script`, :func:`source_digest`, :func:`run_yosys`;
* :mod:`.logs`: :func:`parse_asic_log`, :func:`parse_asic_hier_log`, :func:`parse_hierarchy`,
  :func:`parse_fpga_log`, :data:`LUTRAM_LUTS`;
* :mod:`.run`: :func:`synthesize`, :func:`synthesize_all`, :func:`map_points`;
* :mod:`.table`: :data:`COLUMNS`, :data:`FPGA_COLUMNS`, :data:`VIEWS`, :func:`rows_to_csv`,
  :func:`read_table`, :func:`read_area_csv`, :func:`merge_rows`, :func:`param_values`.
"""

from .logs import LUTRAM_LUTS, parse_asic_hier_log, parse_asic_log, parse_fpga_log, parse_hierarchy
from .point import SynthError, SynthPoint, select_points
from .run import map_points, synthesize, synthesize_all
from .table import (
    COLUMNS,
    FPGA_COLUMNS,
    VIEWS,
    merge_rows,
    param_values,
    read_area_csv,
    read_table,
    rows_to_csv,
)
from .yosys import (
    asic_script,
    find_rtl_dir,
    find_yosys,
    fpga_script,
    run_yosys,
    source_digest,
    yosys_version,
)

__all__ = [
    "COLUMNS",
    "FPGA_COLUMNS",
    "LUTRAM_LUTS",
    "VIEWS",
    "SynthError",
    "SynthPoint",
    "asic_script",
    "find_rtl_dir",
    "find_yosys",
    "fpga_script",
    "map_points",
    "merge_rows",
    "param_values",
    "parse_asic_hier_log",
    "parse_asic_log",
    "parse_fpga_log",
    "parse_hierarchy",
    "read_area_csv",
    "read_table",
    "rows_to_csv",
    "run_yosys",
    "select_points",
    "source_digest",
    "synthesize",
    "synthesize_all",
    "yosys_version",
]
