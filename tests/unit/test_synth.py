"""The Yosys area flow (``coaccel.synth``, ``coaccel synth``) and the HBQ blocks' area table.

* Log parsing rejects cut-off logs and partial estimates (the Yosys failure mode DESIGN.md warns
  about), on hand-written logs; the hierarchical (array) parser re-does Yosys's design-hierarchy
  multiplication and rejects logs whose totals are not the instance-weighted module sums.
* The generic machinery names no target: the sets come from the registry
  (:class:`~coaccel.spine.target.SynthesisSet`), and the HBQ set
  (:mod:`coaccel.targets.hbq_asic.synthesis`) is declared consistently with its points.
* The committed ``rtl/synth/hbq_area.csv`` has the documented columns, covers every design point,
  carries the Yosys version on every row, and its transistor counts equal Yosys's CMOS cost model
  (NAND2 / NOR2 4 transistors, NOT 2, D flip-flop 16) applied to its own cell counts.
* The array rows: total = N_PE x PE + the rest, the PE and partial-sum unit inside the array
  equal their own rows (separate Yosys runs), and the SRAM bits equal the buffer sizes worked
  out by hand from hbq_array.v's port layout.
* The calibration arithmetic against the published 28 nm areas, on hand-made rows.
* ``@pytest.mark.synth``: re-synthesizing one small point (the FP16 adder) reproduces its
  committed row exactly (the flow is deterministic), also through ``coaccel synth
  --update-committed`` on a copy of ``rtl/``, which leaves the table byte for byte as it was.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from testkit import require_program

from coaccel import synth
from coaccel.cli import main
from coaccel.simulation import target, targets
from coaccel.spine.errors import CoaccelError
from coaccel.targets.hbq_asic import synthesis as hbq

ROOT = Path(__file__).resolve().parents[2]
AREA_CSV = ROOT / "rtl" / "synth" / "hbq_area.csv"

ASIC_LOG = """\
4. Printing statistics.

=== hbq_x ===

   Number of wires:                 78
   Number of cells:                 82
     $_DFF_P_                        9
     $_NAND_                        28
     $_NOR_                         34
     $_NOT_                         11

   Estimated number of transistors:        414

End of script. Logfile hash: 06d76dc362, CPU: user 0.06s system 0.00s, MEM: 14.24 MB peak
"""

FPGA_LOG = """\
3. Printing statistics.

=== hbq_x ===

   Number of wires:                 22
   Number of cells:                 27
     CARRY4                          3
     DSP48E2                         1
     FDRE                            9
     INV                             2
     LUT2                            8
     LUT6                            2
     MUXF7                           1
     RAMB36E2                        1

End of script. Logfile hash: 2136e14829
"""

# A hierarchical log as asic_array.ys makes it: the memory statistics after `proc`, then the
# final `stat -tech cmos -top top_x` (a "top_x" with two "$paramod...\\leaf" instances and one
# black-box RAM).
HIER_LOG = """\
3. Printing statistics.

=== $paramod$aa\\ram ===

   Number of memories:               1
   Number of memory bits:           96
   Number of cells:                  2
     $memrd                          1
     $memwr_v2                       1

=== design hierarchy ===

   top_x                             1
     $paramod$aa\\ram                 1

   Number of memories:               1
   Number of memory bits:           96
   Number of cells:                  2
     $memrd                          1
     $memwr_v2                       1

9. Printing statistics.

=== $paramod$bb\\leaf ===

   Number of cells:                 10
     $_DFF_P_                        1
     $_NAND_                         5
     $_NOT_                          4

   Estimated number of transistors:         44

=== top_x ===

   Number of cells:                  6
     $_NAND_                         2
     $_NOR_                          1
     $paramod$aa\\ram                 1
     $paramod$bb\\leaf                2

   Estimated number of transistors:         12+

=== design hierarchy ===

   top_x                             1
     $paramod$bb\\leaf                2

   Number of cells:                 24
     $_DFF_P_                        2
     $_NAND_                        12
     $_NOR_                          1
     $_NOT_                          8
     $paramod$aa\\ram                 1

   Estimated number of transistors:        100+

End of script. Logfile hash: 0123456789
"""


def _row(group: str, top: str, params: str, macs: int, t_per_mac: float) -> dict[str, str]:
    row = {c: "0" for c in synth.COLUMNS}
    row.update(
        group=group,
        top=top,
        params=params,
        macs=str(macs),
        cmos_transistors_per_mac=f"{t_per_mac:.2f}",
        yosys_version="Yosys test",
    )
    return row


# ---- log parsing ----------------------------------------------------------------------------


def test_parse_asic_log_counts_cells_and_transistors():
    got = synth.parse_asic_log(ASIC_LOG)
    assert got == {
        "asic_cells": 82,
        "asic_dff_cells": 9,
        "asic_nand_cells": 28,
        "asic_nor_cells": 34,
        "asic_not_cells": 11,
        "cmos_transistors": 414,
    }
    # Yosys's cmos cost: 4 per NAND2/NOR2, 2 per NOT, 16 per DFF.
    assert 4 * 28 + 4 * 34 + 2 * 11 + 16 * 9 == 414


def test_parse_asic_log_rejects_cut_off_and_partial_logs():
    cut = ASIC_LOG.split("End of script.")[0]
    with pytest.raises(synth.SynthError, match="does not reach 'End of script.'"):
        synth.parse_asic_log(cut)
    with pytest.raises(synth.SynthError, match="partial transistor estimate"):
        synth.parse_asic_log(ASIC_LOG.replace("414", "414+"))
    with pytest.raises(synth.SynthError, match=r"unexpected cell types .*\$_SDFF_PP0_"):
        synth.parse_asic_log(ASIC_LOG.replace("$_DFF_P_ ", "$_SDFF_PP0_"))
    no_abc = "Executing ABC.\nEnd of script.\n"
    with pytest.raises(synth.SynthError, match="no 'Printing statistics.'"):
        synth.parse_asic_log(no_abc)


def test_parse_fpga_log_groups_xilinx_cells():
    got = synth.parse_fpga_log(FPGA_LOG)
    assert got == {
        "fpga_luts": 12,  # LUT2 8 + LUT6 2 + INV 2
        "fpga_ffs": 9,
        "fpga_carry_cells": 3,
        "fpga_dsps": 1,
        "fpga_bram18": 2,  # one RAMB36 = two 18 Kb halves
        "fpga_lutram_cells": 0,
    }
    with pytest.raises(synth.SynthError, match="unexpected Xilinx cell type 'URAM288'"):
        synth.parse_fpga_log(FPGA_LOG.replace("MUXF7  ", "URAM288"))
    lutram = FPGA_LOG.replace("Number of cells:                 27", "Number of cells: 30")
    lutram = lutram.replace(
        "     RAMB36E2", "     RAM64M8                         3\n     RAMB36E2"
    )
    assert synth.parse_fpga_log(lutram)["fpga_lutram_cells"] == 3


def test_parse_asic_hier_log_multiplies_instances():
    got = synth.parse_asic_hier_log(HIER_LOG, "top_x", ("ram",))
    # leaf: 4*5 + 2*4 + 16*1 = 44 transistors; top_x's own gates: 4*2 + 4*1 = 12;
    # whole design 12 + 2 * 44 = 100, the RAM (96 bits) priced at nothing.
    assert got == {
        "asic_cells": 23,
        "asic_dff_cells": 2,
        "asic_nand_cells": 12,
        "asic_nor_cells": 1,
        "asic_not_cells": 8,
        "cmos_transistors": 100,
        "sram_macros": 1,
        "sram_bits": 96,
        "asic_hierarchy": "top_x*1=12;leaf*2=44",
    }
    assert synth.parse_hierarchy(got["asic_hierarchy"]) == [("top_x", 1, 12), ("leaf", 2, 44)]


def test_parse_asic_hier_log_rejects_inconsistent_logs():
    # Totals that are not top + 2 x leaf (as if the multiplication were skipped).
    bad = HIER_LOG.replace(
        "     $_NAND_                        12", "     $_NAND_                         7"
    )
    bad = bad.replace("Number of cells:                 24", "Number of cells:                 19")
    with pytest.raises(synth.SynthError, match=r"total of \$_NAND_ is 7.* give 12"):
        synth.parse_asic_hier_log(bad, "top_x", ("ram",))
    # The log must end with the design-hierarchy totals, not a module's statistics.
    cut = HIER_LOG.rsplit("=== design hierarchy ===", 1)[0] + "End of script.\n"
    with pytest.raises(synth.SynthError, match="do not end with the design-hierarchy totals"):
        synth.parse_asic_hier_log(cut, "top_x", ("ram",))
    # An unpriced cell that is not a declared SRAM macro.
    with pytest.raises(synth.SynthError, match=r"unexpected cell types in top_x: .*\\ram"):
        synth.parse_asic_hier_log(HIER_LOG, "top_x", ("rom",))
    # A wrong estimate.
    with pytest.raises(synth.SynthError, match="estimate 101 != CMOS price 100"):
        synth.parse_asic_hier_log(HIER_LOG.replace("100+", "101+"), "top_x", ("ram",))
    # Without the memory statistics of the first `stat`.
    only_final = HIER_LOG[HIER_LOG.index("9. Printing statistics.") :]
    with pytest.raises(synth.SynthError, match="no memory statistics"):
        synth.parse_asic_hier_log(only_final, "top_x", ("ram",))


def test_unknown_group_lists_the_valid_ones():
    with pytest.raises(CoaccelError, match="unknown block group.*nosuch; valid: fp16_add, "):
        hbq.select_points(["fp16_add", "nosuch"])


def test_cli_lists_groups_and_rejects_unknown_ones(capsys):
    assert main(["synth", "--list"]) == 0
    out = capsys.readouterr().out
    for group in hbq.GROUPS:
        assert f"{group}:" in out
    assert main(["synth", "--blocks", "nosuch", "--out", "unused.csv"]) == 2
    assert "unknown block group(s) nosuch" in capsys.readouterr().err


def test_scripts_fill_the_templates():
    (pt,) = [p for p in hbq.GROUPS["pe_ub"] if dict(p.params)["UB"] == 8]
    rtl = ROOT / "rtl"
    asic = synth.asic_script(pt, rtl)
    fpga = synth.fpga_script(pt, rtl)
    for text in (asic, fpga):
        assert "@" not in text
        assert (
            "hierarchy -check -top hbq_pe -chparam B 128 -chparam UB 8 -chparam ACT_BITS 5" in text
        )
        assert str(rtl / "hbq" / "hbq_adder_tree.v") in text
    assert "abc -g cmos2" in asic and "stat -tech cmos" in asic
    assert "synth_xilinx -family xcup" in fpga
    (arr,) = [p for p in hbq.GROUPS["array"] if dict(p.params)["N_PE"] == 32]
    text = synth.asic_script(arr, rtl)
    assert "@" not in text
    assert "blackbox *hbq_ram_1r1w" in text
    assert "setattr -mod -set keep_hierarchy 1 *hbq_pe *hbq_psum_unit" in text
    assert "stat -tech cmos -top hbq_array" in text
    assert "-chparam N_PE 32 -chparam B 128 -chparam UB 32" in text


def test_hbq_set_is_declared_with_its_points():
    (s,) = target("hbq_asic").synthesis
    assert (s.name, s.table, s.rtl_folder, s.view) == (
        "hbq",
        hbq.TABLE,
        hbq.RTL_FOLDER,
        "asic+fpga",
    )
    assert s.default and s.groups() is hbq.GROUPS
    assert {p.area for p in hbq.select_points()} == {hbq.RTL_FOLDER}
    assert "HBQ PE, μB sweep" in s.summary(synth.read_area_csv(AREA_CSV))


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_generic_synthesis_code_names_no_target():
    """``coaccel.synth`` and the command reach targets only through the registry."""
    files = [*(ROOT / "coaccel" / "synth").glob("*.py"), ROOT / "coaccel" / "commands" / "synth.py"]
    names: set[str] = set()
    for t in targets():
        names.add(t.kind)
        for s in t.synthesis:
            names |= {s.name, s.rtl_folder, s.table}
            names |= {p.top for pts in s.groups().values() for p in pts}
    found = [
        (f.name, text, name)
        for f in files
        for text in _string_constants(f)
        for name in names
        if text == name or re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)
    ]
    assert not found, found


def test_find_rtl_dir_needs_synth_and_the_subfolder(tmp_path):
    (tmp_path / "rtl" / "synth").mkdir(parents=True)
    assert synth.find_rtl_dir(tmp_path) == tmp_path / "rtl"
    (tmp_path / "rtl" / "blocks").mkdir()
    assert synth.find_rtl_dir(tmp_path, "blocks") == tmp_path / "rtl"
    with pytest.raises(CoaccelError, match=r"with synth/ and nosuch/"):
        synth.find_rtl_dir(tmp_path, "nosuch")


def test_cli_lists_every_set(capsys):
    assert main(["synth", "--list"]) == 0
    out = capsys.readouterr().out
    for t in targets():
        for s in t.synthesis:
            assert f"{s.name} (target {t.kind}, {s.view}, rtl/synth/{s.table})" in out
    assert main(["synth", "--update-committed", "--out", "x"]) == 2
    assert "--out and --update-committed exclude each other" in capsys.readouterr().err


# ---- calibration ------------------------------------------------------------------------


def test_calibration_ratios_by_hand():
    rows = [
        _row("pe_ub", "hbq_pe", "B=128;UB=8;ACT_BITS=5", 128, 2400.0),
        _row("pe_ub", "hbq_pe", "B=128;UB=32;ACT_BITS=5", 128, 2000.0),
        _row("pe_l1", "hbq_pe", "B=128;UB=32;ACT_BITS=5;ACT_L2=0;W_L2=0", 128, 1000.0),
        _row("pe_l1", "hbq_pe", "B=128;UB=32;ACT_BITS=8;ACT_L2=0;W_L2=0", 128, 1500.0),
    ]
    cal = {(c["sweep"].split(",")[0], c["point"]): c for c in hbq.calibration(rows)}
    ub8 = cal[("HBQ PE", "UB=8")]
    assert ub8["transistor_ratio"] == pytest.approx(1.2)
    assert ub8["published_ratio"] == pytest.approx(86.60 / 72.27)
    assert ub8["ratio_error"] == pytest.approx(1.2 / (86.60 / 72.27) - 1)
    assert cal[("HBQ PE", "UB=32")]["ratio_error"] == pytest.approx(0.0)
    a8 = cal[("L1-only PE", "ACT_BITS=8")]
    assert a8["transistor_ratio"] == pytest.approx(1.5)
    assert a8["published_ratio"] == pytest.approx(94.19 / 67.97)
    assert ("HBQ PE", "UB=4") not in cal  # no synthesized row for it


def test_breakdown_shares_by_hand():
    rows = [
        {"top": "hbq_mul", "params": "N=128;ACT_BITS=5;PW=10", "cmos_transistors": "500"},
        {"top": "hbq_adder_tree", "params": "N=32;IW=10;OW=15", "cmos_transistors": "100"},
        {"top": "hbq_adder_tree", "params": "N=4;IW=22;OW=24", "cmos_transistors": "20"},
        {"top": "hbq_l1_convert", "params": "PTW=24;F=7", "cmos_transistors": "80"},
    ]
    got = {p["part"]: p for p in hbq.breakdown(rows)}
    # 500 + 4 * 100 + 20 + 80 = 1000 transistors; published 4284 + 2656 + 128 + 394 = 7462 µm².
    assert got["ub_trees"]["transistors"] == 400
    assert got["ub_trees"]["share"] == pytest.approx(0.4)
    assert got["multipliers"]["share"] == pytest.approx(0.5)
    assert got["l1_convert"]["published_share"] == pytest.approx(394 / 7462)
    assert hbq.breakdown(rows[:3]) == []


def test_merge_rows_replaces_by_point_in_table_order():
    old = [
        _row("pe_ub", "hbq_pe", "B=128;UB=8;ACT_BITS=5", 128, 1.0),
        _row("fp16_add", "hbq_fp16_add", "", 0, 0.0),
        _row("gone", "hbq_x", "", 0, 0.0),
    ]
    new = [
        _row("pe_ub", "hbq_pe", "B=128;UB=8;ACT_BITS=5", 128, 2.0),
        _row("pe_ub", "hbq_pe", "B=128;UB=4;ACT_BITS=5", 128, 3.0),
    ]
    got = synth.merge_rows(old, new, hbq.select_points())
    # fp16_add comes first in GROUPS, then μB 4 before μB 8; the undefined point is dropped.
    assert [(r["top"], r["params"], r["cmos_transistors_per_mac"]) for r in got] == [
        ("hbq_fp16_add", "", "0.00"),
        ("hbq_pe", "B=128;UB=4;ACT_BITS=5", "3.00"),
        ("hbq_pe", "B=128;UB=8;ACT_BITS=5", "2.00"),
    ]


# ---- the committed table --------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed() -> list[dict[str, str]]:
    return synth.read_area_csv(AREA_CSV)


def test_committed_table_columns_and_units(committed):
    assert AREA_CSV.read_text().splitlines()[0] == ",".join(synth.COLUMNS)
    count_columns = [
        c
        for c in synth.COLUMNS
        if c.startswith(("asic_", "fpga_", "sram_")) and c != "asic_hierarchy"
    ]
    count_columns.append("cmos_transistors")
    for r in committed:
        assert r["yosys_version"].startswith("Yosys "), r
        assert len(r["rtl_digest"]) == 16 and int(r["rtl_digest"], 16) >= 0
        for c in [*count_columns, "macs"]:
            assert r[c].isdigit(), (c, r[c])
        nand, nor, inv, dff = (int(r[f"asic_{k}_cells"]) for k in ("nand", "nor", "not", "dff"))
        assert int(r["asic_cells"]) == nand + nor + inv + dff
        assert int(r["cmos_transistors"]) == 4 * nand + 4 * nor + 2 * inv + 16 * dff
        if int(r["macs"]):
            per_mac = int(r["cmos_transistors"]) / int(r["macs"])
            assert r["cmos_transistors_per_mac"] == f"{per_mac:.2f}"
        else:
            assert r["cmos_transistors_per_mac"] == ""


def _row_of(committed, group: str, top: str, params: str) -> dict[str, str]:
    (row,) = [r for r in committed if (r["group"], r["top"], r["params"]) == (group, top, params)]
    return row


@pytest.mark.parametrize("n_pe", [32, 8])
def test_committed_array_rows_are_pes_plus_the_rest(committed, n_pe):
    """Hierarchical totals: N_PE x PE + the rest, and the kept modules equal their own rows."""
    params = f"N_PE={n_pe};B=128;UB=32;PSUM_MODE=1;TOK_DEPTH=128;KB_DEPTH=4"
    row = _row_of(committed, "array", "hbq_array", params)
    levels = {m: (n, t) for m, n, t in synth.parse_hierarchy(row["asic_hierarchy"])}
    assert set(levels) == {"hbq_array", "hbq_pe", "hbq_psum_unit"}
    assert levels["hbq_array"][0] == 1 and levels["hbq_psum_unit"][0] == 1
    assert levels["hbq_pe"][0] == n_pe
    assert int(row["cmos_transistors"]) == sum(n * t for n, t in levels.values())
    assert int(row["macs"]) == n_pe * 128
    # The PE inside the array is the standalone PE row's module (B 128, μB 32, A5, SIG-1 x
    # Mix) through the same passes, in a separate Yosys run. Not bit-identical: a module
    # derived from an instance and a top given -chparam take different paths through Yosys's
    # generic optimization (the submodules come out identical, the PE's own logic does not),
    # which moves ABC's result by about 1 %; anything beyond 2 % means the flows diverged.
    pe = _row_of(committed, "pe_ub", "hbq_pe", "B=128;UB=32;ACT_BITS=5")
    assert levels["hbq_pe"][1] == pytest.approx(int(pe["cmos_transistors"]), rel=0.02)
    if n_pe == 32:
        psum = _row_of(committed, "psum_unit", "hbq_psum_unit", "SA_N=32")
        assert levels["hbq_psum_unit"][1] == pytest.approx(int(psum["cmos_transistors"]), rel=0.02)
    # SRAM macros: the activation buffer holds TOK_DEPTH x KB_DEPTH = 512 words of one token's
    # block (128 x 5-bit codes) + E5M3 scale (8) + 4 micro-block L2 codes (4 x 2); the
    # partial-sum buffer TOK_DEPTH = 128 words of N_PE MXINT8 elements + an 8-bit exponent.
    act_bits = 512 * (128 * 5 + 8 + 4 * 2)
    psum_bits = 128 * (8 * n_pe + 8)
    assert int(row["sram_macros"]) == 2
    assert int(row["sram_bits"]) == act_bits + psum_bits
    assert int(row["fpga_dsps"]) >= n_pe * 9  # every PE keeps its 2 * B/μB + 1 multipliers


def test_committed_rows_match_the_current_rtl(committed):
    """A row is stale when its Verilog files or the scripts changed since it was synthesized."""
    points = {(p.top, p.param_string): p for p in hbq.select_points()}
    stale = [
        f"{r['top']} {r['params']}"
        for r in committed
        if r["rtl_digest"] != synth.source_digest(points[(r["top"], r["params"])], ROOT / "rtl")
    ]
    assert not stale, f"rerun `coaccel synth`: rows older than their RTL: {', '.join(stale)}"


def test_committed_table_covers_every_design_point(committed):
    have = [(r["group"], r["top"], r["params"]) for r in committed]
    want = [(p.group, p.top, p.param_string) for p in hbq.select_points()]
    assert have == want


@pytest.mark.synth
def test_resynthesis_reproduces_the_committed_row(committed, tmp_path):
    yosys = require_program("yosys", "apt-get install yosys")
    (point,) = hbq.GROUPS["fp16_add"]
    rows = synth.synthesize_all([point], rtl_dir=ROOT / "rtl", work_dir=tmp_path, yosys=yosys)
    (row,) = rows
    (old,) = [r for r in committed if r["top"] == point.top and r["params"] == ""]
    assert row["yosys_version"] == old["yosys_version"], (
        "the committed table was made with another Yosys; regenerate it with `coaccel synth`"
    )
    assert row == old
    log = (tmp_path / point.slug / "asic.log").read_text()
    assert log.rstrip().splitlines()[-1].startswith("Time spent")
    assert "Estimated number of transistors" in log


@pytest.mark.synth
def test_small_array_keeps_hierarchy_and_rams_out(tmp_path):
    """A 2-PE array through the real flow: hierarchy totals last, PEs x 2 + rest, RAMs as SRAM."""
    yosys = require_program("yosys", "apt-get install yosys")
    (big,) = [p for p in hbq.GROUPS["array"] if dict(p.params)["N_PE"] == 8]
    params = (("N_PE", 2), ("B", 8), ("UB", 4), ("PSUM_MODE", 1), ("TOK_DEPTH", 8), ("KB_DEPTH", 2))
    small = dataclasses.replace(big, params=params, macs=2 * 8)
    (row,) = synth.synthesize_all([small], rtl_dir=ROOT / "rtl", work_dir=tmp_path, yosys=yosys)
    log = (tmp_path / small.slug / "asic.log").read_text()
    final = log[log.rfind("Printing statistics.") : log.rfind("End of script.")]
    sections = re.findall(r"^=== (.+) ===$", final, flags=re.M)
    assert sections[-1] == "design hierarchy"
    levels = {m: (n, t) for m, n, t in synth.parse_hierarchy(row["asic_hierarchy"])}
    assert levels["hbq_pe"][0] == 2
    assert int(row["cmos_transistors"]) == sum(n * t for n, t in levels.values())
    # Activation buffer: 16 words (TOK_DEPTH x KB_DEPTH) of 8 x 5-bit codes + 8-bit scale +
    # 2 micro-blocks x 2-bit L2 codes = 52 bits; partial-sum buffer: 8 words of 2 x 8 + 8 bits.
    assert int(row["sram_macros"]) == 2
    assert int(row["sram_bits"]) == 16 * 52 + 8 * 24
    # Had the 1,024 RAM bits become flip-flops, they alone would outnumber every register here.
    assert int(row["asic_dff_cells"]) < 16 * 52 + 8 * 24


@pytest.mark.synth
def test_cli_update_committed_rewrites_the_same_table(tmp_path, capsys):
    """``coaccel synth --blocks fp16_add --update-committed`` on a copy of rtl/: same bytes,
    no manifest among the committed tables; with --out: the table and its manifest."""
    require_program("yosys", "apt-get install yosys")
    rtl = tmp_path / "rtl"
    shutil.copytree(ROOT / "rtl", rtl)
    work = tmp_path / "work"
    args = ["synth", "--blocks", "fp16_add", "--rtl-dir", str(rtl), "--work-dir", str(work)]
    assert main([*args, "--update-committed", "--quiet"]) == 0
    assert (rtl / "synth" / hbq.TABLE).read_bytes() == AREA_CSV.read_bytes()
    assert sorted(p.name for p in (rtl / "synth").glob("*.json")) == []
    capsys.readouterr()
    # the logs of the first run answer the second (same scripts, same sources)
    out = tmp_path / "out"
    assert main([*args, "--reuse-logs", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["file"] == str(out / hbq.TABLE) and len(doc["rows"]) == 1
    assert (out / "manifest.json").is_file()
    (row,) = synth.read_area_csv(out / hbq.TABLE)
    assert row == _row_of(synth.read_area_csv(AREA_CSV), "fp16_add", "hbq_fp16_add", "")
