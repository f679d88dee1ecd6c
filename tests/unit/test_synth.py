"""The Yosys area flow (``coaccel.synth``, ``coaccel synth``) and the committed area table.

* Log parsing rejects cut-off logs and partial estimates (the Yosys failure mode DESIGN.md warns
  about), on hand-written logs.
* The committed ``rtl/synth/hbq_area.csv`` has the documented columns, covers every design point,
  carries the Yosys version on every row, and its transistor counts equal Yosys's CMOS cost model
  (NAND2 / NOR2 4 transistors, NOT 2, D flip-flop 16) applied to its own cell counts.
* The calibration arithmetic against the published 28 nm areas, on hand-made rows.
* ``@pytest.mark.synth``: re-synthesizing one small point (the FP16 adder) reproduces its
  committed row exactly (the flow is deterministic).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit import require_program

from coaccel import synth
from coaccel.cli import main
from coaccel.errors import CoaccelError

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
    }
    with pytest.raises(synth.SynthError, match="unexpected Xilinx cell type 'URAM288'"):
        synth.parse_fpga_log(FPGA_LOG.replace("MUXF7  ", "URAM288"))


def test_unknown_group_lists_the_valid_ones():
    with pytest.raises(CoaccelError, match="unknown block group.*nosuch; valid: fp16_add, "):
        synth.select_points(["fp16_add", "nosuch"])


def test_cli_lists_groups_and_rejects_unknown_ones(capsys):
    assert main(["synth", "--list"]) == 0
    out = capsys.readouterr().out
    for group in synth.GROUPS:
        assert f"{group}:" in out
    assert main(["synth", "--blocks", "nosuch", "--out", "unused.csv"]) == 2
    assert "unknown block group(s) nosuch" in capsys.readouterr().err


def test_scripts_fill_the_templates():
    (pt,) = [p for p in synth.GROUPS["pe_ub"] if dict(p.params)["UB"] == 8]
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


# ---- calibration ------------------------------------------------------------------------


def test_calibration_ratios_by_hand():
    rows = [
        _row("pe_ub", "hbq_pe", "B=128;UB=8;ACT_BITS=5", 128, 2400.0),
        _row("pe_ub", "hbq_pe", "B=128;UB=32;ACT_BITS=5", 128, 2000.0),
        _row("pe_l1", "hbq_pe", "B=128;UB=32;ACT_BITS=5;ACT_L2=0;W_L2=0", 128, 1000.0),
        _row("pe_l1", "hbq_pe", "B=128;UB=32;ACT_BITS=8;ACT_L2=0;W_L2=0", 128, 1500.0),
    ]
    cal = {(c["sweep"].split(",")[0], c["point"]): c for c in synth.calibration(rows)}
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
    got = {p["part"]: p for p in synth.breakdown(rows)}
    # 500 + 4 * 100 + 20 + 80 = 1000 transistors; published 4284 + 2656 + 128 + 394 = 7462 µm².
    assert got["ub_trees"]["transistors"] == 400
    assert got["ub_trees"]["share"] == pytest.approx(0.4)
    assert got["multipliers"]["share"] == pytest.approx(0.5)
    assert got["l1_convert"]["published_share"] == pytest.approx(394 / 7462)
    assert synth.breakdown(rows[:3]) == []


# ---- the committed table --------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed() -> list[dict[str, str]]:
    return synth.read_area_csv(AREA_CSV)


def test_committed_table_columns_and_units(committed):
    assert AREA_CSV.read_text().splitlines()[0] == ",".join(synth.COLUMNS)
    count_columns = [
        c for c in synth.COLUMNS if c.startswith(("asic_", "fpga_")) or c == "cmos_transistors"
    ]
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


def test_committed_rows_match_the_current_rtl(committed):
    """A row is stale when its Verilog files or the scripts changed since it was synthesized."""
    points = {(p.top, p.param_string): p for p in synth.select_points()}
    stale = [
        f"{r['top']} {r['params']}"
        for r in committed
        if r["rtl_digest"] != synth.source_digest(points[(r["top"], r["params"])], ROOT / "rtl")
    ]
    assert not stale, f"rerun `coaccel synth`: rows older than their RTL: {', '.join(stale)}"


def test_committed_table_covers_every_design_point(committed):
    have = [(r["group"], r["top"], r["params"]) for r in committed]
    want = [(p.group, p.top, p.param_string) for p in synth.select_points()]
    assert have == want


@pytest.mark.synth
def test_resynthesis_reproduces_the_committed_row(committed, tmp_path):
    yosys = require_program("yosys", "apt-get install yosys")
    (point,) = synth.GROUPS["fp16_add"]
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
