"""Yosys synthesis of the RTL blocks: gate, transistor and FPGA resource counts.

Two tables: the HBQ blocks (``rtl/hbq/``, both views below, ``rtl/synth/hbq_area.csv``) and the
DeltaLLM blocks on the KV260 (``rtl/deltallm/``, FPGA view only, ``rtl/synth/deltallm_kv260.csv``,
see "KV260 table" at the end of this module).

Each design point (an RTL top module with HDL parameter overrides) is synthesized twice with
Yosys, using the script templates in ``rtl/synth/``:

* **ASIC view** (``asic.ys``): ``synth -flatten``, every flip-flop lowered to a plain D flip-flop
  (``dfflegalize``), ``abc -g cmos2`` (NAND / NOR / NOT), ``stat -tech cmos`` (generic-cell
  counts and Yosys's CMOS transistor estimate: NAND2/NOR2 4, NOT 2, DFF 16 transistors).
* **FPGA view** (``fpga.ys``): ``synth_xilinx -family xcup`` (UltraScale+, the KV260's family),
  LUT / flip-flop / CARRY / DSP / block-RAM / LUTRAM counts.

The array top (``hbq_array``, group ``array``) is too large to flatten: its ASIC view
(``asic_array.ys``) keeps the PE and the partial-sum unit as hierarchy levels (each synthesized
and mapped once, whatever its instance count), turns the buffers (``hbq_ram_1r1w``) into black-box
SRAM macros whose bits are reported separately (``sram_macros``, ``sram_bits``), and parses the
``design hierarchy`` totals of ``stat -tech cmos``, which Yosys forms by multiplying every
module's counts by its instance count (:func:`parse_asic_hier_log` re-does that sum and rejects a
log where it does not hold).

Every log must end with the statistics that are parsed (Yosys builds whose ABC step dies silently
would otherwise yield truncated numbers, see ``docs/synthesis.md``); a log that does not raises
:class:`SynthError`.

The results are rows of :data:`COLUMNS` (the committed table is ``rtl/synth/hbq_area.csv``;
``coaccel synth`` writes it). :func:`calibration` compares the PE sweeps with the published
TSMC 28 nm per-MAC areas of [R-BQ] / [R-PE] after normalizing both to the μB = 32 point.
"""

from __future__ import annotations

import concurrent.futures
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import cast

from .spine.errors import CoaccelError, MissingDependencyError

__all__ = [
    "COLUMNS",
    "GROUPS",
    "KV260_COLUMNS",
    "KV260_GROUPS",
    "KV260_LIMITS",
    "LUTRAM_LUTS",
    "kv260_use",
    "PUBLISHED_ACT_BITS_L1_UM2_PER_MAC",
    "PUBLISHED_PE_BREAKDOWN_UM2",
    "PUBLISHED_UB_UM2_PER_MAC",
    "SynthError",
    "SynthPoint",
    "asic_script",
    "breakdown",
    "calibration",
    "find_rtl_dir",
    "find_yosys",
    "fpga_script",
    "kv260_rows_to_csv",
    "read_kv260_csv",
    "select_kv260_points",
    "synthesize_kv260",
    "synthesize_kv260_all",
    "merge_rows",
    "parse_asic_hier_log",
    "parse_asic_log",
    "parse_fpga_log",
    "parse_hierarchy",
    "read_area_csv",
    "rows_to_csv",
    "select_points",
    "source_digest",
    "synthesize",
    "synthesize_all",
    "yosys_version",
]


class SynthError(CoaccelError):
    """A Yosys run failed, timed out, or its log lacks the statistics that are parsed."""


@dataclass(frozen=True)
class SynthPoint:
    """One design point: a top module with HDL parameter overrides.

    Attributes:
        group: the sweep group it belongs to (a key of :data:`GROUPS` or :data:`KV260_GROUPS`).
        top: the top module (file ``rtl/<area>/<top>.v``).
        modules: every module the top instantiates, top first (one file per module).
        params: HDL parameter overrides as ``(name, value)`` pairs, in table order.
        macs: multiply-accumulates per cycle (B for a PE), 0 for blocks without MACs.
        keep: modules kept as their own hierarchy level in the ASIC view (non-empty selects the
            hierarchical template ``asic_array.ys``); everything else is flattened into the top.
        macros: modules that become black-box SRAM macros in the ASIC view (their bits are
            counted in ``sram_bits``, their area is not in ``cmos_transistors``).
        area: the RTL folder under ``rtl/`` that holds the module files (``"hbq"``,
            ``"deltallm"``).
        fpga_template: file name of the FPGA-view script template in ``rtl/synth/``.
    """

    group: str
    top: str
    modules: tuple[str, ...]
    params: tuple[tuple[str, int], ...] = ()
    macs: int = 0
    keep: tuple[str, ...] = ()
    macros: tuple[str, ...] = ()
    area: str = "hbq"
    fpga_template: str = "fpga.ys"

    @property
    def hierarchical(self) -> bool:
        """Whether the ASIC view keeps hierarchy (``asic_array.ys``) instead of flattening."""
        return bool(self.keep or self.macros)

    @property
    def asic_template(self) -> str:
        """File name of the ASIC-view script template in ``rtl/synth/``."""
        return "asic_array.ys" if self.hierarchical else "asic.ys"

    @property
    def param_string(self) -> str:
        """The ``params`` column: ``"K1=v1;K2=v2"`` (empty without overrides)."""
        return ";".join(f"{k}={v}" for k, v in self.params)

    @property
    def slug(self) -> str:
        """A file-system-safe unique name, e.g. ``"hbq_pe-B128-UB32"``."""
        return "-".join([self.top, *(f"{k}{v}" for k, v in self.params)])


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
"""Columns of the area table. Every count is a number of cells (or transistors) of the
synthesized netlist; ``cmos_transistors_per_mac`` is ``cmos_transistors / macs`` (empty when
``macs`` is 0); ``sram_macros`` / ``sram_bits`` are the RAM instances left out of the ASIC
count as SRAM macros and their total bits (0 for flattened blocks, which hold no RAM);
``asic_hierarchy`` lists, for a hierarchical point, every module of the design hierarchy as
``module*instances=transistors`` (``;``-separated, transistors of one instance without its
kept submodules, so ``cmos_transistors`` is the sum of instances x transistors), empty for a
flattened point; ``fpga_bram18`` counts 18 Kb block-RAM halves (RAMB36 = 2);
``fpga_lutram_cells`` counts distributed-RAM primitives (``RAM32M16``, ``RAM64M8``, ...), cells
that occupy SLICEM LUTs but are not in ``fpga_luts``; ``rtl_digest`` identifies the sources and
scripts the row was synthesized from (:func:`source_digest`), so a stale row is detected
without running Yosys."""

# ---- the design points --------------------------------------------------------------------

_PE_MODULES = ("hbq_pe", "hbq_mul", "hbq_adder_tree", "hbq_l1_convert")
_PSUM_MODULES = ("hbq_psum_unit", "hbq_mxint8_dequant", "hbq_mxint8_quant", "hbq_fp16_add")
_ACT_MODULES = ("hbq_act_quant", "hbq_act_scale", "hbq_act_elem")
_ARRAY_MODULES = ("hbq_array", "hbq_ram_1r1w", *_PE_MODULES, *_PSUM_MODULES)


def _array(n_pe: int) -> SynthPoint:
    # The paper's 32-PE HBQ-E build ([R-ACC] params.vh): B = 128, μB = 32, SIG-1 x Mix (the
    # hbq_array defaults), MXINT8 running partial sums, a 128-token tile (TILE_TOKEN). The RTL
    # ties the partial-sum buffer depth to the tile (one word of N_PE MXINT8 elements + shared
    # exponent per token), so it holds 128 words, not the paper's 2048 (TILE_PSUM = 256
    # channels in 16-channel words); KB_DEPTH = 4 K blocks make the activation buffer 512 words,
    # the depth of the paper's `rf_sp_w160_d512` macros.
    params = (
        ("N_PE", n_pe),
        ("B", 128),
        ("UB", 32),
        ("PSUM_MODE", 1),
        ("TOK_DEPTH", 128),
        ("KB_DEPTH", 4),
    )
    return SynthPoint(
        "array",
        "hbq_array",
        _ARRAY_MODULES,
        params,
        macs=n_pe * 128,
        keep=("hbq_pe", "hbq_psum_unit"),
        macros=("hbq_ram_1r1w",),
    )


def _pe(group: str, **params: int) -> SynthPoint:
    full = {"B": 128, **params}
    return SynthPoint(group, "hbq_pe", _PE_MODULES, tuple(full.items()), macs=full["B"])


GROUPS: Mapping[str, tuple[SynthPoint, ...]] = MappingProxyType(
    {
        "fp16_add": (SynthPoint("fp16_add", "hbq_fp16_add", ("hbq_fp16_add",)),),
        "mxint8": tuple(
            SynthPoint("mxint8", top, (top,), (("N", n),))
            for n in (16, 32)
            for top in ("hbq_mxint8_quant", "hbq_mxint8_dequant")
        ),
        "psum_unit": tuple(
            SynthPoint("psum_unit", "hbq_psum_unit", _PSUM_MODULES, (("SA_N", n),))
            for n in (16, 32)
        ),
        "act_quant": (
            SynthPoint("act_quant", "hbq_act_quant", _ACT_MODULES, (("B", 128), ("UB", 32))),
        ),
        # HBQ PE (SIG-1 2-bit activations x Mix weights, exact FP16 conversion) over the micro-block
        # size: the published 28 nm sweep of [R-PE] HBQ_uB_area_results.tsv.
        "pe_ub": tuple(_pe("pe_ub", UB=ub, ACT_BITS=5) for ub in (4, 8, 16, 32, 64)),
        # The same PE at μB = 32 over the activation element width E2M(ACT_BITS-3).
        "pe_act": tuple(_pe("pe_act", UB=32, ACT_BITS=a) for a in (4, 5, 6, 7, 8)),
        # Other PE configurations: the accelerator's 1-bit PoT activations (F = 6), and the
        # rtl_compat FP16 conversion.
        "pe_variants": (
            _pe("pe_variants", UB=32, ACT_BITS=5, ACT_L2=1, ACT_L2_BITS=1),
            _pe("pe_variants", UB=32, ACT_BITS=5, OUT_MODE=1),
        ),
        # L1-only block-quantization PE (no L2 on either operand), B = 128: the published baseline
        # BQ PE (FP8 E5M3 scale) has public points at A4, A5 (the Fig 10 reference) and A8.
        "pe_l1": tuple(_pe("pe_l1", UB=32, ACT_BITS=a, ACT_L2=0, W_L2=0) for a in (4, 5, 6, 7, 8)),
        # Parts of the μB = 32 HBQ-E PE for the [R-ACC] area breakdown: the 128 multiplier lanes,
        # one micro-block tree, the L2 tree, the L1 conversion (widths as hbq_pe derives them for
        # B=128, UB=32, SIG-1 x Mix).
        "pe_parts": (
            SynthPoint(
                "pe_parts", "hbq_mul", ("hbq_mul",), (("N", 128), ("ACT_BITS", 5), ("PW", 10))
            ),
            SynthPoint(
                "pe_parts",
                "hbq_adder_tree",
                ("hbq_adder_tree",),
                (("N", 32), ("IW", 10), ("OW", 15)),
            ),
            SynthPoint(
                "pe_parts",
                "hbq_adder_tree",
                ("hbq_adder_tree",),
                (("N", 4), ("IW", 22), ("OW", 24)),
            ),
            SynthPoint("pe_parts", "hbq_l1_convert", ("hbq_l1_convert",), (("PTW", 24), ("F", 7))),
        ),
        # The array top with hierarchy kept (PEs and partial-sum unit mapped once each, buffers
        # as SRAM macros): the 32-PE synthesis build and an 8-PE point for scaling.
        "array": (_array(32), _array(8)),
    }
)
"""Every design point, by sweep group (``coaccel synth --blocks`` selects groups)."""

# ---- published reference numbers ([R-BQ], [R-PE], [R-ACC] area report; TSMC 28 nm) -------

PUBLISHED_UB_UM2_PER_MAC: Mapping[int, float] = MappingProxyType(
    {4: 103.51, 8: 86.60, 16: 77.30, 32: 72.27, 64: 70.28}
)
"""HBQ PE (B = 128, W4A5) area per MAC vs μB, µm² (``HBQ_uB_area_results.tsv``, Fig 10)."""

PUBLISHED_ACT_BITS_L1_UM2_PER_MAC: Mapping[int, float] = MappingProxyType(
    {4: 57.84, 5: 67.97, 8: 94.19}
)
"""L1-only block-quantization PE with an FP8 (E5M3) scale, B = 128, W4 x A(bits), µm²/MAC:
A4 and A8 from the baseline sweep table ([R-BQ]), A5 from the Fig 10 L1-only reference (the same
table's FP8 A5 B128 row). The A6/A7 rows are held back as a validation set ([OURS]) and are not
used here."""

PUBLISHED_PE_BREAKDOWN_UM2: Mapping[str, float] = MappingProxyType(
    {"multipliers": 4 * 1071.0, "ub_trees": 4 * 664.0, "l2_tree": 128.0, "l1_convert": 394.0}
)
"""One HBQ-E PE of the 32-PE accelerator (B = 128, μB = 32), µm² ([R-ACC] area breakdown):
4 x FP_mul_vector(32), 4 x ADDER_TREE_32, the L2 adder tree, FX2FP + Scale_NV."""


# ---- locating tools and sources ---------------------------------------------------------


def find_yosys(yosys: str | None = None) -> str:
    """Path of the Yosys executable.

    Args:
        yosys: an explicit path or name; default ``$COACCEL_YOSYS`` or ``yosys`` on ``PATH``.

    Returns:
        The resolved path.

    Raises:
        MissingDependencyError: Yosys is not found.
    """
    name = yosys or os.environ.get("COACCEL_YOSYS") or "yosys"
    path = shutil.which(name)
    if path is None:
        raise MissingDependencyError(
            f"Yosys ({name!r}) is not on PATH; install it (Debian/Ubuntu: apt-get install yosys)"
        )
    return path


def yosys_version(yosys: str) -> str:
    """The version line of a Yosys executable, e.g. ``"Yosys 0.23 (git sha1 7ce5011c24b)"``."""
    out = subprocess.run([yosys, "-V"], capture_output=True, text=True, check=True)
    line = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    if not line.startswith("Yosys"):
        raise SynthError(f"{yosys} -V printed {out.stdout!r}, not a Yosys version")
    return line


def find_rtl_dir(start: Path | None = None) -> Path:
    """The repository's ``rtl/`` folder (it is not part of the installed package).

    Looks in ``start`` (default: the working directory) and its parents, then next to the
    source tree of this package (editable installs).

    Returns:
        The ``rtl`` directory (it contains ``hbq/`` and ``synth/``).

    Raises:
        CoaccelError: no such directory is found.
    """
    here = (start or Path.cwd()).resolve()
    candidates = [p / "rtl" for p in (here, *here.parents)]
    candidates.append(Path(__file__).resolve().parents[1] / "rtl")
    for c in candidates:
        if (c / "hbq").is_dir() and (c / "synth").is_dir():
            return c
    raise CoaccelError(
        "cannot find the rtl/ folder (with hbq/ and synth/); run from a coaccel checkout or "
        "pass --rtl-dir"
    )


def select_points(groups: Iterable[str] | None = None) -> list[SynthPoint]:
    """The design points of the named groups (all groups by default), in table order.

    Raises:
        CoaccelError: an unknown group name (the message lists the valid ones).
    """
    names = list(GROUPS) if groups is None else list(groups)
    unknown = [g for g in names if g not in GROUPS]
    if unknown:
        raise CoaccelError(
            f"unknown block group(s) {', '.join(unknown)}; valid: {', '.join(GROUPS)}"
        )
    return [p for g in names for p in GROUPS[g]]


# ---- scripts ------------------------------------------------------------------------------


def _fill(template: str, point: SynthPoint, rtl_dir: Path) -> str:
    sources = []
    for m in point.modules:
        path = Path(rtl_dir).resolve() / point.area / f"{m}.v"
        if not path.is_file():
            raise SynthError(f"{point.slug}: source {path} does not exist")
        sources.append(str(path))
    chparams = " ".join(f"-chparam {k} {v}" for k, v in point.params)
    # Derived (parameterized) modules are named "$paramod...\\<module>": match by the suffix.
    keep = " ".join(f"*{m}" for m in point.keep)
    macros = " ".join(f"*{m}" for m in point.macros)
    return (
        template.replace("@SOURCES@", " ".join(sources))
        .replace("@TOP@", point.top)
        .replace("@CHPARAMS@", chparams)
        .replace("@KEEP@", keep)
        .replace("@MACROS@", macros)
    )


def source_digest(point: SynthPoint, rtl_dir: Path, *, asic: bool = True) -> str:
    """A short digest of what a point's row depends on: its Verilog files and its scripts.

    Args:
        point: the design point.
        rtl_dir: the ``rtl/`` folder.
        asic: include the ASIC-view template (False for the FPGA-only KV260 table).

    Returns:
        The first 16 hex digits of the SHA-256 over the module files (in ``point.modules``
        order) and the point's script templates (ASIC, then the FPGA view), each prefixed by
        its name.
    """
    root = Path(rtl_dir).resolve()
    h = hashlib.sha256()
    files = [root / point.area / f"{m}.v" for m in point.modules]
    if asic:
        files.append(root / "synth" / point.asic_template)
    files.append(root / "synth" / point.fpga_template)
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def asic_script(point: SynthPoint, rtl_dir: Path) -> str:
    """The ASIC-view Yosys script of a point (``rtl/synth/<point.asic_template>`` filled in)."""
    return _fill((rtl_dir / "synth" / point.asic_template).read_text(), point, rtl_dir)


def fpga_script(point: SynthPoint, rtl_dir: Path) -> str:
    """The FPGA-view Yosys script of a point (``rtl/synth/<point.fpga_template>`` filled in)."""
    return _fill((rtl_dir / "synth" / point.fpga_template).read_text(), point, rtl_dir)


# ---- log parsing --------------------------------------------------------------------------

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
    """``"$paramod$<hash>\\hbq_pe"`` or ``"$paramod\\hbq_pe\\B=..."`` -> ``"hbq_pe"``."""
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
        uram: the KV260 table's counts: also count UltraRAM blocks (``URAM288``) as
            ``fpga_uram`` and the LUTs of the distributed-RAM cells (:data:`LUTRAM_LUTS`) as
            ``fpga_lutram_luts``; without it a URAM cell is an unexpected cell type (the HBQ
            table has neither column).

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


# ---- running Yosys --------------------------------------------------------------------------


def _run_yosys(
    yosys: str,
    script: str,
    work: Path,
    name: str,
    timeout_s: float,
    *,
    reuse: bool = False,
    sources_key: str = "",
) -> str:
    work.mkdir(parents=True, exist_ok=True)
    ys = work / f"{name}.ys"
    log = work / f"{name}.log"
    key = work / f"{name}.sources"
    if (
        reuse
        and ys.is_file()
        and log.is_file()
        and key.is_file()
        and ys.read_text() == script
        and key.read_text() == sources_key
    ):
        text = log.read_text()
        # a finished run of exactly this script on exactly these sources: the cache
        if "End of script." in text:
            return text
    key.unlink(missing_ok=True)
    ys.write_text(script)
    try:
        proc = subprocess.run(
            [yosys, "-q", "-l", str(log), "-s", str(ys)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=work,
        )
    except subprocess.TimeoutExpired as exc:
        raise SynthError(f"{work.name}/{name}: Yosys ran past {timeout_s:.0f} s") from exc
    text = log.read_text() if log.is_file() else ""
    if proc.returncode != 0:
        tail = (proc.stderr or text)[-2000:]
        raise SynthError(f"{work.name}/{name}: Yosys exited with {proc.returncode}:\n{tail}")
    key.write_text(sources_key)
    return text


def synthesize(
    point: SynthPoint,
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str,
    version: str,
    timeout_s: float = 3600.0,
) -> dict[str, str]:
    """Synthesize one point in both views and return its table row.

    Args:
        point: the design point.
        rtl_dir: the ``rtl/`` folder (sources and script templates).
        work_dir: scratch folder; scripts and logs go to ``work_dir / point.slug``.
        yosys: the Yosys executable (:func:`find_yosys`).
        version: its version line (:func:`yosys_version`), written on the row.
        timeout_s: wall-clock limit per Yosys run, seconds.

    Returns:
        The row: a dict over :data:`COLUMNS`, values as CSV text.

    Raises:
        SynthError: a run failed or a log lacks the statistics.
    """
    work = Path(work_dir) / point.slug
    # Digest first: a source edited while Yosys runs then leaves a row that reads as stale.
    digest = source_digest(point, rtl_dir)
    asic_log = _run_yosys(yosys, asic_script(point, rtl_dir), work, "asic", timeout_s)
    if point.hierarchical:
        asic = parse_asic_hier_log(asic_log, point.top, point.macros, f"{point.slug} asic")
    else:
        asic = {
            **parse_asic_log(asic_log, f"{point.slug} asic"),
            "sram_macros": 0,
            "sram_bits": 0,
            "asic_hierarchy": "",
        }
    fpga = parse_fpga_log(
        _run_yosys(yosys, fpga_script(point, rtl_dir), work, "fpga", timeout_s),
        f"{point.slug} fpga",
    )
    # Both parsers count cmos_transistors as an int; the hierarchical one's dict also holds text.
    transistors = cast(int, asic["cmos_transistors"])
    per_mac = f"{transistors / point.macs:.2f}" if point.macs else ""
    row = {
        "group": point.group,
        "top": point.top,
        "params": point.param_string,
        "macs": str(point.macs),
        **{k: str(v) for k, v in asic.items()},
        "cmos_transistors_per_mac": per_mac,
        **{k: str(v) for k, v in fpga.items()},
        "rtl_digest": digest,
        "yosys_version": version,
    }
    return {c: row[c] for c in COLUMNS}


def synthesize_all(
    points: Sequence[SynthPoint],
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str | None = None,
    jobs: int = 1,
    timeout_s: float = 3600.0,
    progress: Callable[[SynthPoint, dict[str, str], float], None] | None = None,
) -> list[dict[str, str]]:
    """Synthesize several points (``jobs`` Yosys processes at a time), rows in input order.

    Args:
        points: the design points (:func:`select_points`).
        rtl_dir: the ``rtl/`` folder.
        work_dir: scratch folder for scripts and logs.
        yosys: the Yosys executable (default :func:`find_yosys`).
        jobs: parallel Yosys processes.
        timeout_s: wall-clock limit per Yosys run, seconds.
        progress: called as ``progress(point, row, seconds)`` when a point finishes.

    Returns:
        One row per point, in the order of ``points``.
    """
    exe = find_yosys(yosys)
    version = yosys_version(exe)
    # A point listed in several groups (e.g. the μB = 32, A5 PE) is synthesized once.
    unique: dict[tuple[str, tuple[tuple[str, int], ...]], SynthPoint] = {}
    for p in points:
        unique.setdefault((p.top, p.params), p)

    def one(p: SynthPoint) -> dict[str, str]:
        return synthesize(
            p, rtl_dir=rtl_dir, work_dir=work_dir, yosys=exe, version=version, timeout_s=timeout_s
        )

    rows = _map_points(list(unique.values()), one, jobs, progress)
    done = dict(zip(unique, rows, strict=True))
    return [{**done[(p.top, p.params)], "group": p.group} for p in points]


def _map_points(
    points: list[SynthPoint],
    run: Callable[[SynthPoint], dict[str, str]],
    jobs: int,
    progress: Callable[[SynthPoint, dict[str, str], float], None] | None,
) -> list[dict[str, str]]:
    """``run`` on every point, ``jobs`` at a time, reporting each finished row with its seconds;
    rows in the order of ``points``."""

    def timed(p: SynthPoint) -> dict[str, str]:
        t0 = time.perf_counter()
        row = run(p)
        if progress is not None:
            progress(p, row, time.perf_counter() - t0)
        return row

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(timed, points))


# ---- the table --------------------------------------------------------------------------


def rows_to_csv(rows: Iterable[Mapping[str, str]]) -> str:
    """CSV text (header :data:`COLUMNS`, ``\\n`` line ends) of table rows."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: r[c] for c in COLUMNS})
    return buf.getvalue()


def merge_rows(
    old: Iterable[Mapping[str, str]], new: Iterable[Mapping[str, str]]
) -> list[dict[str, str]]:
    """An area table updated with newly synthesized rows (e.g. of one ``--blocks`` group).

    Args:
        old: the rows of the existing table.
        new: fresh rows; each replaces the old row of the same ``(group, top, params)``.

    Returns:
        The rows of both, a new one winning, in :data:`GROUPS` order; rows of points that are
        no longer defined are dropped.
    """
    by_key = {(r["group"], r["top"], r["params"]): dict(r) for r in old}
    by_key.update({(r["group"], r["top"], r["params"]): dict(r) for r in new})
    order = [(p.group, p.top, p.param_string) for p in select_points()]
    return [by_key[k] for k in order if k in by_key]


def read_area_csv(path: Path) -> list[dict[str, str]]:
    """Rows of an area table written by ``coaccel synth``.

    Raises:
        CoaccelError: the header is not :data:`COLUMNS`.
    """
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise CoaccelError(f"{path}: header {reader.fieldnames}, expected {list(COLUMNS)}")
        return list(reader)


def _params(row: Mapping[str, str]) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in row["params"].split(";") if kv)}


def calibration(rows: Iterable[Mapping[str, str]]) -> list[dict[str, object]]:
    """Compare transistor-count scaling with the published 28 nm per-MAC areas.

    Both sides are normalized to a reference point of their sweep (μB = 32 for the μB sweep,
    ACT_BITS = 5 for the L1-only activation-width sweep) and compared as ratios; the
    ``ratio_error`` is ``transistor_ratio / published_ratio - 1``. The HBQ-E vs HBQ-A row
    (μB 32 vs 8) is included as its own line.

    Args:
        rows: area-table rows (need the ``pe_ub`` and/or ``pe_l1`` groups).

    Returns:
        One dict per compared point: ``sweep``, ``point``, ``transistors_per_mac``,
        ``published_um2_per_mac``, ``transistor_ratio``, ``published_ratio``, ``ratio_error``.
    """
    rows = list(rows)
    out: list[dict[str, object]] = []

    def sweep(group: str, key: str, published: Mapping[int, float], ref: int, label: str):
        tpm = {
            _params(r)[key]: float(r["cmos_transistors_per_mac"])
            for r in rows
            if r["group"] == group
        }
        if ref not in tpm:
            return
        for x in sorted(published):
            if x not in tpm:
                continue
            t_ratio = tpm[x] / tpm[ref]
            p_ratio = published[x] / published[ref]
            out.append(
                {
                    "sweep": label,
                    "point": f"{key}={x}",
                    "transistors_per_mac": tpm[x],
                    "published_um2_per_mac": published[x],
                    "transistor_ratio": t_ratio,
                    "published_ratio": p_ratio,
                    "ratio_error": t_ratio / p_ratio - 1.0,
                }
            )

    sweep("pe_ub", "UB", PUBLISHED_UB_UM2_PER_MAC, 32, "HBQ PE, μB sweep (ref μB=32)")
    sweep(
        "pe_l1",
        "ACT_BITS",
        PUBLISHED_ACT_BITS_L1_UM2_PER_MAC,
        5,
        "L1-only PE, activation bits (ref A5)",
    )
    return out


_PART_ROWS = {
    "multipliers": ("hbq_mul", "N=128;ACT_BITS=5;PW=10", 1),
    "ub_trees": ("hbq_adder_tree", "N=32;IW=10;OW=15", 4),  # B / μB = 4 trees
    "l2_tree": ("hbq_adder_tree", "N=4;IW=22;OW=24", 1),
    "l1_convert": ("hbq_l1_convert", "PTW=24;F=7", 1),
}


def breakdown(rows: Iterable[Mapping[str, str]]) -> list[dict[str, object]]:
    """Shares of the μB = 32 PE's datapath parts vs the published [R-ACC] breakdown.

    Both sides are reduced to the four parts of :data:`PUBLISHED_PE_BREAKDOWN_UM2` (128
    multipliers, the B/μB = 4 micro-block trees, the L2 tree, the L1 conversion) and each part is
    given as a share of their sum (registers and local logic are counted differently on the two
    sides, so they are left out).

    Args:
        rows: area-table rows (need the ``pe_parts`` group).

    Returns:
        One dict per part: ``part``, ``transistors``, ``share``, ``published_um2``,
        ``published_share``; empty if a part row is missing.
    """
    t = {(r["top"], r["params"]): int(r["cmos_transistors"]) for r in rows}
    ours = {}
    for part, (top, params, count) in _PART_ROWS.items():
        if (top, params) not in t:
            return []
        ours[part] = count * t[(top, params)]
    total = sum(ours.values())
    pub_total = sum(PUBLISHED_PE_BREAKDOWN_UM2.values())
    return [
        {
            "part": part,
            "transistors": ours[part],
            "share": ours[part] / total,
            "published_um2": PUBLISHED_PE_BREAKDOWN_UM2[part],
            "published_share": PUBLISHED_PE_BREAKDOWN_UM2[part] / pub_total,
        }
        for part in ours
    ]


# ---- KV260 table: the DeltaLLM blocks ---------------------------------------------------------

_DL_TOP_MODULES = (
    "dl_attention_top",
    "dl_mac_lanes",
    "dl_prio_enc",
    "dl_softmax_state",
    "dl_exp2",
    "dl_normalizer",
)
_KV260 = (("D", 128), ("L", 16), ("M", 16))


def _dl(group: str, top: str, modules: tuple[str, ...], params: tuple[tuple[str, int], ...]):
    return SynthPoint(group, top, modules, params, area="deltallm", fpga_template="fpga_kv260.ys")


KV260_GROUPS: Mapping[str, tuple[SynthPoint, ...]] = MappingProxyType(
    {
        # The DeltaLLM blocks at the KV260 configuration (BitNet-2B-4T head dimension d = 128,
        # L = 16 lanes = G 4 x P_q 4, M = 16 MACs per lane).
        "dl_blocks": (
            _dl("dl_blocks", "dl_exp2", ("dl_exp2",), (("EW", 12),)),
            _dl(
                "dl_blocks",
                "dl_delta_encoder",
                ("dl_delta_encoder", "dl_pack"),
                (("D", 128), ("DW", 9), ("MW", 8), ("TW", 9)),
            ),
            _dl(
                "dl_blocks",
                "dl_softmax_state",
                ("dl_softmax_state", "dl_exp2"),
                (("PIPE", 1), ("L", 16)),
            ),
            _dl("dl_blocks", "dl_normalizer", ("dl_normalizer",), (("L", 16), ("M", 16))),
            _dl("dl_blocks", "dl_prio_enc", ("dl_prio_enc",), (("D", 128), ("M", 16))),
            _dl("dl_blocks", "dl_mac_lanes", ("dl_mac_lanes", "dl_prio_enc"), _KV260),
        ),
        "dl_top": (_dl("dl_top", "dl_attention_top", _DL_TOP_MODULES, (*_KV260, ("PQ", 4))),),
        # Smaller MAC arrays and softmax units: how the counts scale with L, M and d (the
        # simulator's resource estimate is checked against them, docs/synthesis.md §6.2).
        "dl_scale": (
            _dl(
                "dl_scale",
                "dl_mac_lanes",
                ("dl_mac_lanes", "dl_prio_enc"),
                (("D", 128), ("L", 4), ("M", 16)),
            ),
            _dl(
                "dl_scale",
                "dl_mac_lanes",
                ("dl_mac_lanes", "dl_prio_enc"),
                (("D", 64), ("L", 8), ("M", 8)),
            ),
            _dl(
                "dl_scale",
                "dl_softmax_state",
                ("dl_softmax_state", "dl_exp2"),
                (("PIPE", 1), ("L", 4)),
            ),
            _dl("dl_scale", "dl_normalizer", ("dl_normalizer",), (("L", 4), ("M", 8))),
            _dl("dl_scale", "dl_normalizer", ("dl_normalizer",), (("L", 8), ("M", 16))),
        ),  # fmt: skip
    }
)
"""The DeltaLLM design points of the KV260 table (``coaccel synth --target deltallm``)."""

KV260_COLUMNS = (
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
"""Columns of the KV260 table: Yosys ``synth_xilinx -family xcup -abc9`` cell counts (synthesis,
not place and route); ``fpga_bram36`` counts 36 Kb block RAMs (two RAMB18 halves = one),
``fpga_uram`` 288 Kb UltraRAMs; ``fpga_luts`` the logic LUTs and ``fpga_lutram_luts`` the LUTs
the distributed-RAM cells occupy (:data:`LUTRAM_LUTS`), so a design's LUT use is their sum."""

KV260_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        "fpga_luts": 117120,
        "fpga_ffs": 234240,
        "fpga_dsps": 1248,
        "fpga_bram36": 144,
        "fpga_uram": 64,
    }
)
"""Resources of the KV260's XCK26 ([DS987] K26 resource table; flip-flops = 2 x LUTs, the
UltraScale+ CLB ratio, [DERIVED])."""


def kv260_use(row: Mapping[str, str]) -> dict[str, float]:
    """A KV260-table row's use of each resource of :data:`KV260_LIMITS`.

    Args:
        row: a row (values as CSV text).

    Returns:
        Per limit key the count used; ``fpga_luts`` is the logic LUTs plus the LUTs the
        distributed RAMs occupy (``fpga_lutram_luts``), the device's LUT budget covering both.
    """
    use = {key: float(row[key]) for key in KV260_LIMITS}
    use["fpga_luts"] += float(row.get("fpga_lutram_luts") or 0)
    return use


def select_kv260_points(groups: Iterable[str] | None = None) -> list[SynthPoint]:
    """The KV260-table points of the named groups (all by default), in table order.

    Raises:
        CoaccelError: an unknown group name (the message lists the valid ones).
    """
    names = list(KV260_GROUPS) if groups is None else list(groups)
    unknown = [g for g in names if g not in KV260_GROUPS]
    if unknown:
        raise CoaccelError(
            f"unknown block group(s) {', '.join(unknown)}; valid: {', '.join(KV260_GROUPS)}"
        )
    return [p for g in names for p in KV260_GROUPS[g]]


def synthesize_kv260(
    point: SynthPoint,
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str,
    version: str,
    timeout_s: float = 3600.0,
    reuse_logs: bool = False,
) -> dict[str, str]:
    """Synthesize one point for the KV260 (FPGA view only) and return its table row.

    Args:
        point: a point of :data:`KV260_GROUPS`.
        rtl_dir: the ``rtl/`` folder.
        work_dir: scratch folder; the script and log go to ``work_dir / point.slug``.
        yosys: the Yosys executable; ``version`` its version line.
        timeout_s: wall-clock limit of the run, seconds.
        reuse_logs: reuse a finished log of exactly the same script run on sources of the same
            digest (:func:`source_digest`, kept beside the log) instead of running Yosys again
            (the top takes long on a small machine); a log without its digest is rerun.

    Returns:
        The row: a dict over :data:`KV260_COLUMNS`, values as CSV text.

    Raises:
        SynthError: the run failed or its log lacks the statistics.
    """
    work = Path(work_dir) / point.slug
    digest = source_digest(point, rtl_dir, asic=False)
    log = _run_yosys(yosys, fpga_script(point, rtl_dir), work, "fpga", timeout_s,
                     reuse=reuse_logs, sources_key=digest)  # fmt: skip
    fpga = parse_fpga_log(log, f"{point.slug} fpga", uram=True)
    if fpga["fpga_bram18"] % 2:
        bram36 = f"{fpga['fpga_bram18'] / 2:g}"
    else:
        bram36 = str(fpga["fpga_bram18"] // 2)
    row = {
        "group": point.group,
        "top": point.top,
        "params": point.param_string,
        **{k: str(v) for k, v in fpga.items() if k != "fpga_bram18"},
        "fpga_bram36": bram36,
        "rtl_digest": digest,
        "yosys_version": version,
    }
    return {c: row[c] for c in KV260_COLUMNS}


def synthesize_kv260_all(
    points: Sequence[SynthPoint],
    *,
    rtl_dir: Path,
    work_dir: Path,
    yosys: str | None = None,
    jobs: int = 1,
    timeout_s: float = 3600.0,
    reuse_logs: bool = False,
    progress: Callable[[SynthPoint, dict[str, str], float], None] | None = None,
) -> list[dict[str, str]]:
    """:func:`synthesize_kv260` over several points (``jobs`` at a time), rows in input order."""
    exe = find_yosys(yosys)
    version = yosys_version(exe)

    def one(p: SynthPoint) -> dict[str, str]:
        return synthesize_kv260(p, rtl_dir=rtl_dir, work_dir=work_dir, yosys=exe,
                                version=version, timeout_s=timeout_s,
                                reuse_logs=reuse_logs)  # fmt: skip

    return _map_points(list(points), one, jobs, progress)


def kv260_rows_to_csv(rows: Iterable[Mapping[str, str]]) -> str:
    """CSV text (header :data:`KV260_COLUMNS`, ``\\n`` line ends) of KV260-table rows."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=KV260_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: r[c] for c in KV260_COLUMNS})
    return buf.getvalue()


def read_kv260_csv(path: Path) -> list[dict[str, str]]:
    """Rows of a KV260 table written by ``coaccel synth --target deltallm``.

    Raises:
        CoaccelError: the header is not :data:`KV260_COLUMNS`.
    """
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != KV260_COLUMNS:
            raise CoaccelError(
                f"{path}: header {reader.fieldnames}, expected {list(KV260_COLUMNS)}"
            )
        return list(reader)
