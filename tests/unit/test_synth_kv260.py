"""The KV260 table of the DeltaLLM blocks (``coaccel synth --target deltallm``).

* The FPGA-log parser counts UltraRAM only when asked (the HBQ table keeps rejecting it).
* The KV260 design points read their sources from ``rtl/deltallm/`` and the ``-abc9`` template;
  their digest covers exactly those files.
* A finished log of the same script on sources of the same digest is reused (no Yosys run);
  a different script, other sources or a log without its digest are not.
* The committed ``rtl/synth/deltallm_kv260.csv`` has the documented columns, covers every point,
  is not older than its RTL, carries the Yosys version, and fits the KV260.
* The set is declared in the target (:mod:`coaccel.targets.deltallm_fpga.synthesis`), and
  ``coaccel synth --target deltallm --reuse-logs`` writes its table from finished logs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import require_program

from coaccel import synth
from coaccel.cli import main
from coaccel.simulation import target
from coaccel.spine.errors import CoaccelError
from coaccel.targets.deltallm_fpga import synthesis as dl

ROOT = Path(__file__).resolve().parents[2]
KV260_CSV = ROOT / "rtl" / "synth" / "deltallm_kv260.csv"
LOG = """\
3. Printing statistics.

=== dl_x ===

   Number of wires:                 22
   Number of cells:                 20
     CARRY8                          2
     DSP48E2                         3
     FDRE                            5
     LUT6                            6
     RAMB18E2                        1
     RAMB36E2                        1
     URAM288                         2

End of script. Logfile hash: 06d76dc362, CPU: user 0.06s system 0.00s, MEM: 14.24 MB peak
"""


def test_parse_fpga_log_counts_uram_only_when_asked():
    got = synth.parse_fpga_log(LOG, uram=True)
    assert got == {
        "fpga_luts": 6,
        "fpga_ffs": 5,
        "fpga_carry_cells": 2,
        "fpga_dsps": 3,
        "fpga_bram18": 3,  # RAMB18 + RAMB36 (two halves)
        "fpga_lutram_cells": 0,
        "fpga_uram": 2,
        "fpga_lutram_luts": 0,
    }
    with pytest.raises(synth.SynthError, match="unexpected Xilinx cell type 'URAM288'"):
        synth.parse_fpga_log(LOG)


def test_points_use_the_deltallm_folder_and_the_abc9_template():
    points = dl.select_kv260_points()
    assert {p.area for p in points} == {"deltallm"}
    assert [p.top for p in dl.KV260_GROUPS["dl_top"]] == ["dl_attention_top"]
    top = dl.KV260_GROUPS["dl_top"][0]
    assert top.param_string == "D=128;L=16;M=16;PQ=4"
    script = synth.fpga_script(top, ROOT / "rtl")
    assert "synth_xilinx -family xcup -abc9" in script
    for m in top.modules:
        assert str(ROOT / "rtl" / "deltallm" / f"{m}.v") in script
    assert "-chparam PQ 4" in script
    with pytest.raises(CoaccelError, match="valid: dl_blocks, dl_top"):
        dl.select_kv260_points(["pe_ub"])


def test_digest_covers_the_sources_and_the_template(tmp_path):
    rtl = tmp_path / "rtl"
    shutil.copytree(ROOT / "rtl", rtl)
    (point,) = dl.KV260_GROUPS["dl_top"]
    base = synth.source_digest(point, rtl, asic=False)
    with (rtl / "synth" / "asic.ys").open("a") as f:
        f.write("# not read by the FPGA-only table\n")
    assert synth.source_digest(point, rtl, asic=False) == base
    with (rtl / "synth" / "fpga_kv260.ys").open("a") as f:
        f.write("# changed\n")
    changed = synth.source_digest(point, rtl, asic=False)
    assert changed != base
    with (rtl / "deltallm" / "dl_exp2.v").open("a") as f:
        f.write("// changed\n")
    assert synth.source_digest(point, rtl, asic=False) != changed


def test_a_finished_log_of_the_same_script_is_reused(tmp_path):
    (point,) = [p for p in dl.KV260_GROUPS["dl_blocks"] if p.top == "dl_exp2"]
    work = tmp_path / point.slug
    work.mkdir()
    digest = synth.source_digest(point, ROOT / "rtl", asic=False)

    def run(script: str, sources: str | None) -> dict[str, str]:
        (work / "fpga.ys").write_text(script)
        (work / "fpga.log").write_text(LOG)
        (work / "fpga.sources").unlink(missing_ok=True)
        if sources is not None:
            (work / "fpga.sources").write_text(sources)
        return dl.synthesize_kv260(
            point,
            rtl_dir=ROOT / "rtl",
            work_dir=tmp_path,
            yosys="/nonexistent/yosys",  # a run that is not answered by the log fails
            version="Yosys test",
            reuse_logs=True,
        )

    script = synth.fpga_script(point, ROOT / "rtl")
    row = run(script, digest)
    assert (row["fpga_luts"], row["fpga_uram"], row["fpga_bram36"]) == ("6", "2", "1.5")
    assert row["rtl_digest"] == digest
    # the same script on other sources (an edited Verilog file), a log whose sources are not
    # recorded, and another script are all run again
    for other_script, sources in ((script, "0123456789abcdef"), (script, None),
                                  ("# another script\n", digest)):  # fmt: skip
        with pytest.raises(FileNotFoundError):
            run(other_script, sources)


def test_csv_round_trip_and_header_check(tmp_path):
    row = {c: str(i) for i, c in enumerate(dl.KV260_COLUMNS)}
    path = tmp_path / "t.csv"
    path.write_text(dl.kv260_rows_to_csv([row]))
    assert dl.read_kv260_csv(path) == [row]
    path.write_text("group,top\n")
    with pytest.raises(CoaccelError, match="header"):
        dl.read_kv260_csv(path)


def test_deltallm_set_is_declared_with_its_points():
    (s,) = target("deltallm_fpga").synthesis
    assert (s.name, s.table, s.rtl_folder, s.view) == ("deltallm", dl.TABLE, dl.RTL_FOLDER, "fpga")
    assert not s.default and s.groups() is dl.KV260_GROUPS
    assert synth.VIEWS[s.view] == dl.KV260_COLUMNS
    assert {p.area for p in dl.select_kv260_points()} == {dl.RTL_FOLDER}
    rows = dl.read_kv260_csv(KV260_CSV)
    assert s.summary(rows).count("\n") == len(rows)  # a header, then one line per row


@pytest.mark.synth
def test_cli_writes_the_table_from_finished_logs(tmp_path, capsys):
    """--reuse-logs: a finished log of the same script on the same sources answers the run."""
    require_program("yosys", "apt-get install yosys")
    work = tmp_path / "work"
    (point,) = dl.KV260_GROUPS["dl_top"]
    (work / point.slug).mkdir(parents=True)
    (work / point.slug / "fpga.ys").write_text(synth.fpga_script(point, ROOT / "rtl"))
    (work / point.slug / "fpga.log").write_text(LOG)
    digest = synth.source_digest(point, ROOT / "rtl", asic=False)
    (work / point.slug / "fpga.sources").write_text(digest)
    out = tmp_path / "out"
    argv = ["synth", "--target", "deltallm", "--blocks", "dl_top", "--reuse-logs",
            "--work-dir", str(work), "--rtl-dir", str(ROOT / "rtl"), "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "share of the KV260" in text and f"wrote {out / dl.TABLE}" in text
    (row,) = dl.read_kv260_csv(out / dl.TABLE)
    assert (row["fpga_luts"], row["fpga_bram36"], row["rtl_digest"]) == ("6", "1.5", digest)
    assert (out / "manifest.json").is_file()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coaccel.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_lists_the_kv260_groups_and_rejects_bad_options():
    r = _cli("synth", "--target", "deltallm", "--list")
    assert r.returncode == 0 and "dl_top:" in r.stdout and "dl_attention_top" in r.stdout
    r = _cli("synth", "--target", "deltallm", "--reuse-logs")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--reuse-logs needs --work-dir" in r.stderr
    r = _cli("synth", "--target", "deltallm", "--update-committed", "--out", "x")
    assert r.returncode == 2 and "--out and --update-committed exclude each other" in r.stderr


@pytest.fixture(scope="module")
def committed():
    return dl.read_kv260_csv(KV260_CSV)


def test_committed_table_covers_every_point(committed):
    have = [(r["group"], r["top"], r["params"]) for r in committed]
    want = [(p.group, p.top, p.param_string) for p in dl.select_kv260_points()]
    assert have == want
    assert all(r["yosys_version"].startswith("Yosys ") for r in committed)


def test_committed_rows_match_the_current_rtl(committed):
    """A row is stale when its Verilog files or the template changed since it was synthesized."""
    points = {(p.top, p.param_string): p for p in dl.select_kv260_points()}
    stale = [
        f"{r['top']} {r['params']}"
        for r in committed
        if r["rtl_digest"]
        != synth.source_digest(points[(r["top"], r["params"])], ROOT / "rtl", asic=False)
    ]
    assert not stale, f"rerun `coaccel synth --target deltallm`: stale rows {', '.join(stale)}"


def test_committed_counts_are_consistent(committed):
    rows = {r["top"]: r for r in committed if r["group"] != "dl_scale"}
    # the exp2 unit is a 256 x 16 bit table and a shifter: logic only
    assert int(rows["dl_exp2"]["fpga_dsps"]) == 0 and int(rows["dl_exp2"]["fpga_ffs"]) == 0
    # the encoder registers its outputs and memory: D x (1 + 9 + 8 + 9) output bits (mask, deltas,
    # k-hat, packed row), the D x 8 bit memory and previous key, the valid bit and the nnz count
    # (8 bits at D = 128)
    assert int(rows["dl_delta_encoder"]["fpga_ffs"]) <= 128 * (1 + 9 + 8 + 9 + 8 + 8) + 1 + 8
    # every lane of the softmax unit multiplies (two exponents and the l rescale): DSPs
    assert int(rows["dl_softmax_state"]["fpga_dsps"]) >= 16 * 2
    # the attention top holds the MAC array, the softmax unit and the normaliser
    top = rows["dl_attention_top"]
    for unit in ("dl_mac_lanes", "dl_normalizer"):
        assert int(top["fpga_dsps"]) >= int(rows[unit]["fpga_dsps"])
        assert int(top["fpga_luts"]) > int(rows[unit]["fpga_luts"])
    assert int(top["fpga_lutram_luts"]) == int(rows["dl_mac_lanes"]["fpga_lutram_luts"])


def test_lutram_cells_count_their_luts():
    extra = "".join(f"     {name:<32}{n}\n" for name, n in
                    (("RAM32M16", 3), ("RAM64M8", 1), ("RAM128X1D", 2)))  # fmt: skip
    uram = "     URAM288                         2\n"
    log = LOG.replace(uram, uram + extra)
    log = log.replace("Number of cells:                 20", "Number of cells:                 26")
    got = synth.parse_fpga_log(log, uram=True)
    # [UG574]: RAM32M16 and RAM64M8 take a SLICEM's 8 LUTs, RAM128X1D 4
    assert got["fpga_lutram_cells"] == 6 and got["fpga_lutram_luts"] == 3 * 8 + 8 + 2 * 4
    with pytest.raises(synth.SynthError, match="unknown LUT cost 'RAM999M'"):
        synth.parse_fpga_log(log.replace("RAM128X1D", "RAM999M  "), uram=True)


def test_kv260_use_adds_the_lutram_luts_to_the_lut_budget():
    row = {"fpga_luts": "100", "fpga_lutram_luts": "40", "fpga_ffs": "7", "fpga_dsps": "3",
           "fpga_bram36": "1.5", "fpga_uram": "2"}  # fmt: skip
    assert dl.kv260_use(row) == {"fpga_luts": 140.0, "fpga_ffs": 7.0, "fpga_dsps": 3.0,
                                    "fpga_bram36": 1.5, "fpga_uram": 2.0}  # fmt: skip


def test_committed_top_fits_the_kv260(committed):
    """The attention top at the KV260 configuration inside the XCK26's resources ([DS987])."""
    (top,) = [r for r in committed if r["top"] == "dl_attention_top"]
    use = dl.kv260_use(top)
    over = {k: (v, dl.KV260_LIMITS[k]) for k, v in use.items() if v > dl.KV260_LIMITS[k]}
    assert not over, f"the attention top overuses the KV260: {over}"
