"""Parsers of Yosys logs: the statistics that become a table row, each log checked first.

Every log must end with the statistics that are parsed (Yosys builds whose ABC step dies silently
would otherwise yield truncated numbers, see ``docs/synthesis.md``); a log that does not raises
:class:`~coaccel.synth.SynthError`.

* ASIC view, flattened: :func:`parse_asic_log` (the final ``stat -tech cmos``).
* ASIC view, hierarchy kept: :func:`parse_asic_hier_log` reads the ``design hierarchy`` totals
  of ``stat -tech cmos -top``, which Yosys forms by multiplying every module's counts by its
  instance count, re-does that sum and rejects a log where it does not hold;
  :func:`parse_hierarchy` decodes the ``asic_hierarchy`` column it produces.
* FPGA view: :func:`parse_fpga_log` (the final ``stat`` after ``synth_xilinx``), with
  :data:`LUTRAM_LUTS`, the LUTs of each distributed-RAM primitive.

Public: :func:`parse_asic_log`, :func:`parse_asic_hier_log`, :func:`parse_hierarchy`,
:func:`parse_fpga_log`, :data:`LUTRAM_LUTS`.
Internal: ``_last_stat_block``, ``_stat_sections``, ``_cells``, ``_hierarchy_instances``,
``_module_name``, ``_CMOS_PRICE`` (Yosys's transistor price per cell), ``_FPGA_KINDS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from ..spine.errors import CoaccelError
from .point import SynthError

__all__ = [
    "LUTRAM_LUTS",
    "parse_asic_hier_log",
    "parse_asic_log",
    "parse_fpga_log",
    "parse_hierarchy",
]

_CELL_LINE = re.compile(r"^\s+(\S+)\s+(\d+)\s*$")


def _last_stat_block(log: str, what: str) -> tuple[str, dict[str, int]]:
    """The text after the last ``Printing statistics.`` and its per-cell-type counts."""
    if "End of script." not in log:
        raise SynthError(f"{what}: the Yosys log does not reach 'End of script.' (cut off?)")
    pos = log.rfind("Printing statistics.")
    if pos < 0:
        raise SynthError(f"{what}: the Yosys log has no 'Printing statistics.' section")
    block = log[pos : log.rfind("End of script.")]
    m = re.search(r"Number of cells:\s+(\d+)\n((?:\s+\S+\s+\d+\n)*)", block)
    if m is None:
        raise SynthError(f"{what}: no cell list in the statistics")
    cells = {}
    for line in m.group(2).splitlines():
        cm = _CELL_LINE.match(line)
        if cm:
            cells[cm.group(1)] = int(cm.group(2))
    if sum(cells.values()) != int(m.group(1)):
        raise SynthError(f"{what}: cell types do not add up to 'Number of cells'")
    return block, cells


def parse_asic_log(log: str, what: str = "asic") -> dict[str, int]:
    """Counts from an ASIC-view log (the final ``stat -tech cmos``).

    Args:
        log: the complete Yosys log text.
        what: a label for error messages.

    Returns:
        ``asic_cells``, ``asic_dff_cells``, ``asic_nand_cells``, ``asic_nor_cells``,
        ``asic_not_cells`` and ``cmos_transistors``.

    Raises:
        SynthError: the log is cut off, lacks the statistics, holds cells outside NAND / NOR /
            NOT / DFF, or the transistor estimate is partial (``N+``).
    """
    block, cells = _last_stat_block(log, what)
    m = re.search(r"Estimated number of transistors:\s+(\d+)(\+?)", block)
    if m is None:
        raise SynthError(f"{what}: no 'Estimated number of transistors' in the statistics")
    if m.group(2):
        raise SynthError(f"{what}: partial transistor estimate {m.group(0)!r} (unpriced cells)")
    known = {"$_NAND_", "$_NOR_", "$_NOT_", "$_DFF_P_"}
    extra = sorted(set(cells) - known)
    if extra:
        raise SynthError(f"{what}: unexpected cell types after abc -g cmos2: {', '.join(extra)}")
    return {
        "asic_cells": sum(cells.values()),
        "asic_dff_cells": cells.get("$_DFF_P_", 0),
        "asic_nand_cells": cells.get("$_NAND_", 0),
        "asic_nor_cells": cells.get("$_NOR_", 0),
        "asic_not_cells": cells.get("$_NOT_", 0),
        "cmos_transistors": int(m.group(1)),
    }


_CMOS_PRICE = {"$_NAND_": 4, "$_NOR_": 4, "$_NOT_": 2, "$_DFF_P_": 16}
"""Yosys's ``stat -tech cmos`` transistor price of the cells ``abc -g cmos2`` leaves."""

_HIER_LINE = re.compile(r"^( +)(\S+)\s+(\d+)\s*$")


def _module_name(yosys_name: str) -> str:
    """``"$paramod$<hash>\\pe"`` or ``"$paramod\\pe\\B=..."`` -> ``"pe"``."""
    if yosys_name.startswith("$paramod"):
        parts = yosys_name.split("\\")
        if len(parts) >= 2:
            return parts[1]
    return yosys_name.lstrip("\\")


def _stat_sections(block: str, what: str) -> dict[str, str]:
    """The ``=== name ===`` sections of one ``Printing statistics.`` block, by name."""
    heads = list(re.finditer(r"^=== (.+) ===$", block, flags=re.M))
    if not heads:
        raise SynthError(f"{what}: no '=== module ===' sections in the statistics")
    out = {}
    for h, nxt in zip(heads, [*heads[1:], None], strict=True):
        out[h.group(1)] = block[h.end() : nxt.start() if nxt else len(block)]
    return out


def _cells(section: str, what: str) -> dict[str, int]:
    m = re.search(r"Number of cells:\s+(\d+)\n((?:\s+\S+\s+\d+\n)*)", section)
    if m is None:
        raise SynthError(f"{what}: no cell list")
    cells: dict[str, int] = {}
    for line in m.group(2).splitlines():
        cm = _CELL_LINE.match(line)
        if cm:
            cells[cm.group(1)] = int(cm.group(2))
    if sum(cells.values()) != int(m.group(1)):
        raise SynthError(f"{what}: cell types do not add up to 'Number of cells'")
    return cells


def _hierarchy_instances(section: str, what: str) -> dict[str, int]:
    """Total instances of every module in a ``design hierarchy`` tree (products along paths)."""
    lines = section.strip("\n").split("\n\n")[0].splitlines()
    total: dict[str, int] = {}
    stack: list[tuple[int, int]] = []  # (indent, instances of that level in the whole design)
    for line in lines:
        m = _HIER_LINE.match(line)
        if m is None:
            raise SynthError(f"{what}: unreadable design-hierarchy line {line!r}")
        indent, name, count = len(m.group(1)), m.group(2), int(m.group(3))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        n = count * (stack[-1][1] if stack else 1)
        total[name] = total.get(name, 0) + n
        stack.append((indent, n))
    return total


def parse_asic_hier_log(
    log: str, top: str, macros: Sequence[str], what: str = "asic"
) -> dict[str, int | str]:
    """Counts from a hierarchical ASIC-view log (``asic_array.ys``).

    Reads the final ``stat -tech cmos -top``: every module's own cells and the ``design
    hierarchy`` totals, which must be the last section of the log. The totals are checked
    against an independent sum (each module's own gate counts times its instance count in the
    hierarchy tree) and the transistor estimate against the CMOS prices; the only unpriced
    cells allowed are the black-box RAMs (``macros``). The SRAM bits come from the first
    ``stat`` (before the RAMs are emptied): its ``design hierarchy`` memory bits.

    Args:
        log: the complete Yosys log text.
        top: the top module.
        macros: the module names that are black-box SRAM macros.
        what: a label for error messages.

    Returns:
        The ``asic_*`` counts and ``cmos_transistors`` of the whole design (as
        :func:`parse_asic_log`), ``sram_macros``, ``sram_bits`` and ``asic_hierarchy``
        (``"module*instances=transistors;..."``, top first, then by module name).

    Raises:
        SynthError: the log is cut off, lacks the hierarchy totals or the memory statistics,
            holds unexpected cell types, or its totals are not the instance-weighted sum.
    """
    block, _ = _last_stat_block(log, what)
    sections = _stat_sections(block, what)
    last = list(sections)[-1]
    if last != "design hierarchy":
        raise SynthError(f"{what}: the statistics do not end with the design-hierarchy totals")
    hier_text = sections.pop("design hierarchy")
    instances = _hierarchy_instances(hier_text, f"{what} design hierarchy")
    if instances.get(top) != 1:
        raise SynthError(f"{what}: {top} is not the root of the design hierarchy")
    totals = _cells(hier_text, f"{what} design hierarchy")
    m = re.search(r"Estimated number of transistors:\s+(\d+)(\+?)", hier_text)
    if m is None:
        raise SynthError(f"{what}: no 'Estimated number of transistors' in the totals")

    def is_macro(cell: str) -> bool:
        return _module_name(cell) in macros

    own: dict[str, dict[str, int]] = {}
    for name in instances:
        if name not in sections:
            raise SynthError(f"{what}: no statistics for hierarchy module {name}")
        cells = _cells(sections[name], f"{what} {name}")
        own[name] = {c: k for c, k in cells.items() if c not in instances and not is_macro(c)}
        extra = sorted(set(own[name]) - set(_CMOS_PRICE))
        if extra:
            raise SynthError(f"{what}: unexpected cell types in {name}: {', '.join(extra)}")
    macro_cells = {c: k for c, k in totals.items() if is_macro(c)}
    gates = {c: k for c, k in totals.items() if not is_macro(c)}
    if set(gates) - set(_CMOS_PRICE):
        unpriced = ", ".join(sorted(set(gates) - set(_CMOS_PRICE)))
        raise SynthError(f"{what}: unexpected cell types after abc -g cmos2: {unpriced}")
    for cell in _CMOS_PRICE:
        weighted = sum(n * own[name].get(cell, 0) for name, n in instances.items())
        if weighted != gates.get(cell, 0):
            raise SynthError(
                f"{what}: design-hierarchy total of {cell} is {gates.get(cell, 0)}, but the "
                f"modules times their instances give {weighted}"
            )
    transistors = sum(_CMOS_PRICE[c] * k for c, k in gates.items())
    if int(m.group(1)) != transistors:
        raise SynthError(f"{what}: transistor estimate {m.group(1)} != CMOS price {transistors}")
    if m.group(2) and not macro_cells:
        raise SynthError(f"{what}: partial transistor estimate {m.group(0)!r} (unpriced cells)")

    first = log.find("Printing statistics.")
    mem_block = log[first : log.find("Printing statistics.", first + 1)]
    mem_sections = _stat_sections(mem_block, f"{what} memory statistics")
    mem = re.search(
        r"Number of memories:\s+(\d+)\n\s+Number of memory bits:\s+(\d+)",
        mem_sections.get("design hierarchy", ""),
    )
    if first == log.rfind("Printing statistics.") or mem is None:
        raise SynthError(f"{what}: no memory statistics before the RAMs were made black boxes")
    if int(mem.group(1)) != sum(macro_cells.values()):
        raise SynthError(
            f"{what}: {mem.group(1)} memories before synthesis, "
            f"{sum(macro_cells.values())} SRAM macro cells after"
        )

    def t_own(name: str) -> int:
        return sum(_CMOS_PRICE[c] * k for c, k in own[name].items())

    order = [top, *sorted((n for n in instances if n != top), key=_module_name)]
    hierarchy = ";".join(f"{_module_name(n)}*{instances[n]}={t_own(n)}" for n in order)
    return {
        "asic_cells": sum(gates.values()),
        "asic_dff_cells": gates.get("$_DFF_P_", 0),
        "asic_nand_cells": gates.get("$_NAND_", 0),
        "asic_nor_cells": gates.get("$_NOR_", 0),
        "asic_not_cells": gates.get("$_NOT_", 0),
        "cmos_transistors": transistors,
        "sram_macros": sum(macro_cells.values()),
        "sram_bits": int(mem.group(2)),
        "asic_hierarchy": hierarchy,
    }


def parse_hierarchy(text: str) -> list[tuple[str, int, int]]:
    """The ``asic_hierarchy`` column of a row, decoded.

    Args:
        text: the column, ``"module*instances=transistors;..."`` (empty for a flat row).

    Returns:
        ``(module, instances, transistors_each)`` per hierarchy level, in column order.

    Raises:
        CoaccelError: an entry is not ``module*instances=transistors``.
    """
    out = []
    for item in filter(None, text.split(";")):
        m = re.fullmatch(r"(\w+)\*(\d+)=(\d+)", item)
        if m is None:
            raise CoaccelError(f"malformed asic_hierarchy entry {item!r}")
        out.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return out


_FPGA_KINDS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("fpga_luts", re.compile(r"^(LUT[1-6](_2)?|INV)$"), 1),
    ("fpga_ffs", re.compile(r"^FD[RSCP]E(_1)?$"), 1),
    ("fpga_carry_cells", re.compile(r"^CARRY(4|8)$"), 1),
    ("fpga_dsps", re.compile(r"^DSP48E[12]$"), 1),
    ("fpga_bram18", re.compile(r"^RAMB18E[12]$"), 1),
    ("fpga_bram18", re.compile(r"^RAMB36E[12]$"), 2),
    ("fpga_lutram_cells", re.compile(r"^RAM\d+(X\d+[SD]|M\d*)$"), 1),
)
_FPGA_IGNORED = re.compile(r"^(MUXF[789]|BUFG|IBUF|OBUF|GND|VCC|SRL\w+)$")


_URAM_KIND = ("fpga_uram", re.compile(r"^URAM288(_BASE)?$"), 1)

LUTRAM_LUTS: Mapping[str, int] = MappingProxyType(
    {
        "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8,
        "RAM64X1S": 1, "RAM64X1D": 2, "RAM64M": 4, "RAM64M8": 8,
        "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8, "RAM512X1S": 8,
    }
)  # fmt: skip
"""SLICEM LUTs one UltraScale+ distributed-RAM primitive occupies ([UG574] distributed RAM
configurations: a LUT6 is a 64 x 1 RAM; the multi-port ``RAM32M16`` / ``RAM64M8`` take the eight
LUTs of a SLICEM)."""


def parse_fpga_log(log: str, what: str = "fpga", *, uram: bool = False) -> dict[str, int]:
    """Counts from an FPGA-view log (the final ``stat`` after ``synth_xilinx``).

    Args:
        log: the complete Yosys log text.
        what: a label for error messages.
        uram: the counts of the FPGA-only view (:data:`~coaccel.synth.FPGA_COLUMNS`): also
            count UltraRAM blocks (``URAM288``) as ``fpga_uram`` and the LUTs of the
            distributed-RAM cells (:data:`LUTRAM_LUTS`) as ``fpga_lutram_luts``; without it a
            URAM cell is an unexpected cell type (the two-view table,
            :data:`~coaccel.synth.COLUMNS`, has neither column).

    Returns:
        ``fpga_luts``, ``fpga_ffs``, ``fpga_carry_cells``, ``fpga_dsps``, ``fpga_bram18``,
        ``fpga_lutram_cells`` (and ``fpga_uram``, ``fpga_lutram_luts`` with ``uram``).

    Raises:
        SynthError: the log is cut off or lacks the statistics, or holds a cell type that is
            neither counted nor known to be free of LUT/FF cost (so nothing is silently lost).
    """
    _, cells = _last_stat_block(log, what)
    kinds = (*_FPGA_KINDS, _URAM_KIND) if uram else _FPGA_KINDS
    out = {key: 0 for key, _, _ in kinds}
    for name, count in cells.items():
        for key, pattern, weight in kinds:
            if pattern.match(name):
                out[key] += weight * count
                break
        else:
            if not _FPGA_IGNORED.match(name):
                raise SynthError(f"{what}: unexpected Xilinx cell type {name!r}")
    if uram:
        lutram = {n: c for n, c in cells.items() if _FPGA_KINDS[-1][1].match(n)}
        unknown = sorted(set(lutram) - set(LUTRAM_LUTS))
        if unknown:
            raise SynthError(f"{what}: distributed-RAM cell of unknown LUT cost {unknown[0]!r}")
        out["fpga_lutram_luts"] = sum(LUTRAM_LUTS[n] * c for n, c in lutram.items())
    return out
