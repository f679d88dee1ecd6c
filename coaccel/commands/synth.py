"""``coaccel synth``: Yosys gate / transistor / FPGA resource counts of the RTL blocks.

``--target hbq`` (default): the HBQ blocks, both views, ``hbq_area.csv``. ``--target deltallm``:
the DeltaLLM blocks on the KV260 (FPGA view, ``synth_xilinx -family xcup -abc9``),
``deltallm_kv260.csv`` (columns :data:`coaccel.synth.KV260_COLUMNS`), printed with the share of
the KV260's resources.

Runs :func:`coaccel.synth.synthesize_all` over the selected block groups, writes the area table
(CSV, columns :data:`coaccel.synth.COLUMNS`, the Yosys version on every row) and prints it, with
the comparison against the published 28 nm per-MAC areas when the PE sweeps are included.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._args import int_in

DEFAULT_TABLE = "hbq_area.csv"
TABLES = {"hbq": DEFAULT_TABLE, "deltallm": "deltallm_kv260.csv"}

EPILOG = """\
examples:
  coaccel synth                                 every block group -> reports/synth/hbq_area.csv
  coaccel synth --update-committed              update the committed rtl/synth/hbq_area.csv
  coaccel synth --blocks fp16_add,psum_unit --out /tmp/area.csv
  coaccel synth --list                          the groups and their design points
  coaccel synth --target deltallm --update-committed   the KV260 table rtl/synth/deltallm_kv260.csv
needs Yosys with a working ABC (Debian/Ubuntu: apt-get install yosys); see docs/synthesis.md
"""


def register(subparsers: Any) -> None:
    """Add the ``synth`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "synth",
        help="Yosys gate, transistor and FPGA resource counts of the RTL blocks",
        description=(
            "Synthesize the HBQ RTL blocks with Yosys: generic CMOS gates and transistor "
            "estimate (synth; abc -g cmos2; stat -tech cmos) and UltraScale+ LUT/FF/CARRY/DSP "
            "counts (synth_xilinx -family xcup), one CSV row per design point, plus the "
            "comparison of the PE sweeps with the published 28 nm per-MAC areas. With --target "
            "deltallm: the DeltaLLM blocks' KV260 LUT/FF/DSP/BRAM/URAM counts "
            "(synth_xilinx -family xcup -abc9; synthesis, not place and route)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--target",
        choices=sorted(TABLES),
        default="hbq",
        help="which RTL and table: hbq (default) or deltallm (the KV260 table)",
    )
    p.add_argument(
        "--reuse-logs",
        action="store_true",
        help=(
            "with --work-dir and --target deltallm: reuse finished logs of the same script "
            "run on the same sources"
        ),
    )
    p.add_argument(
        "--blocks",
        metavar="G1,G2,...",
        help="comma-separated block groups (default: all; see --list)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="CSV",
        help=f"area table to write (default: reports/synth/{DEFAULT_TABLE}, or the target's)",
    )
    p.add_argument(
        "--update-committed",
        action="store_true",
        help="update the committed table <rtl dir>/synth/<target table> (its other rows kept)",
    )
    p.add_argument(
        "--jobs", type=int_in(1, 64), default=2, metavar="N", help="parallel Yosys runs (2)"
    )
    p.add_argument(
        "--rtl-dir", type=Path, default=None, metavar="DIR", help="the rtl/ folder (auto)"
    )
    p.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the Yosys scripts and logs here (default: a temporary folder)",
    )
    p.add_argument("--yosys", default=None, metavar="EXE", help="Yosys executable (yosys)")
    p.add_argument(
        "--timeout", type=float, default=3600.0, metavar="S", help="limit per Yosys run (3600 s)"
    )
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true", help="print the area rows as JSON")
    p.set_defaults(func=run, command="synth")


def run(args: argparse.Namespace) -> int:
    """Execute ``coaccel synth``.

    Args:
        args: the parsed command line.

    Returns:
        Exit status 0.
    """
    from coaccel import synth

    from ..report.files import write_text
    from ..spine.errors import CoaccelError
    from ._args import comma_list, out_file

    if args.target == "deltallm":
        return _run_kv260(args)
    if args.reuse_logs:
        raise CoaccelError("--reuse-logs applies to --target deltallm")
    if args.list:
        for group, group_points in synth.GROUPS.items():
            print(f"{group}:")
            for pt in group_points:
                print(f"  {pt.top} {pt.param_string}".rstrip())
        return 0
    groups = comma_list(args.blocks, "--blocks") if args.blocks else None
    points = synth.select_points(groups)
    rtl_dir = args.rtl_dir.resolve() if args.rtl_dir else synth.find_rtl_dir()
    if args.update_committed and args.out is not None:
        raise CoaccelError("--out and --update-committed exclude each other")
    committed = rtl_dir / "synth" / DEFAULT_TABLE
    out = (
        committed if args.update_committed else (args.out or Path("reports/synth") / DEFAULT_TABLE)
    )
    out_file(out)

    def progress(point: Any, row: dict[str, str], seconds: float) -> None:
        if not args.quiet:
            print(
                f"synth: {point.slug}: {row['cmos_transistors']} transistors, "
                f"{row['fpga_luts']} LUTs ({seconds:.0f} s)",
                file=sys.stderr,
            )

    with tempfile.TemporaryDirectory(prefix="coaccel-synth-") as tmp:
        work = args.work_dir if args.work_dir is not None else Path(tmp)
        rows = synth.synthesize_all(
            points,
            rtl_dir=rtl_dir,
            work_dir=work,
            yosys=args.yosys,
            jobs=args.jobs,
            timeout_s=args.timeout,
            progress=progress,
        )
    if args.update_committed and out.exists():
        # A partial run (--blocks) updates its rows of the committed table and keeps the others.
        rows = synth.merge_rows(synth.read_area_csv(out), rows)
    write_text(out, synth.rows_to_csv(rows))
    if args.json:
        import json

        json.dump({"rows": rows, "file": str(out)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    _print_table(rows)
    cal = synth.calibration(rows)
    if cal:
        print()
        _print_calibration(cal)
    parts = synth.breakdown(rows)
    if parts:
        print("\nμB = 32 PE datapath parts, share of their sum vs the published [R-ACC] breakdown:")
        for p in parts:
            print(
                f"  {p['part']:12s} {p['transistors']:8d} T {p['share']:6.1%}   "
                f"published {p['published_um2']:7.1f} µm² {p['published_share']:6.1%}"
            )
    print(f"\nwrote {out}")
    return 0


def _print_table(rows: list[dict[str, str]]) -> None:
    cols = (
        ("top", "top"),
        ("params", "params"),
        ("cells", "asic_cells"),
        ("DFF", "asic_dff_cells"),
        ("transistors", "cmos_transistors"),
        ("T/MAC", "cmos_transistors_per_mac"),
        ("LUT", "fpga_luts"),
        ("FF", "fpga_ffs"),
        ("CARRY", "fpga_carry_cells"),
        ("DSP", "fpga_dsps"),
    )
    widths = [max(len(h), *(len(r[k]) for r in rows)) for h, k in cols]
    print("  ".join(h.ljust(w) for (h, _), w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(r[k].ljust(w) for (_, k), w in zip(cols, widths, strict=True)))
    print(f"({rows[0]['yosys_version']})" if rows else "")


def _print_calibration(cal: list[dict[str, object]]) -> None:
    print("transistors/MAC vs published 28 nm µm²/MAC, both normalized to the reference point:")
    print(
        f"{'sweep':40s} {'point':12s} {'T/MAC':>8s} {'µm²/MAC':>8s} {'T ratio':>8s} "
        f"{'pub ratio':>9s} {'error':>7s}"
    )
    for c in cal:
        print(
            f"{c['sweep']!s:40s} {c['point']!s:12s} {c['transistors_per_mac']:8.1f} "
            f"{c['published_um2_per_mac']:8.2f} {c['transistor_ratio']:8.3f} "
            f"{c['published_ratio']:9.3f} {c['ratio_error']:+7.1%}"
        )


def _run_kv260(args: argparse.Namespace) -> int:
    """``coaccel synth --target deltallm``: the KV260 table of the DeltaLLM blocks."""
    from coaccel import synth

    from ..report.files import write_text
    from ..spine.errors import CoaccelError
    from ._args import comma_list, out_file

    if args.list:
        for group, group_points in synth.KV260_GROUPS.items():
            print(f"{group}:")
            for pt in group_points:
                print(f"  {pt.top} {pt.param_string}".rstrip())
        return 0
    if args.reuse_logs and args.work_dir is None:
        raise CoaccelError("--reuse-logs needs --work-dir (where the earlier logs are)")
    groups = comma_list(args.blocks, "--blocks") if args.blocks else None
    points = synth.select_kv260_points(groups)
    rtl_dir = args.rtl_dir.resolve() if args.rtl_dir else synth.find_rtl_dir()
    if args.update_committed and args.out is not None:
        raise CoaccelError("--out and --update-committed exclude each other")
    table = TABLES["deltallm"]
    committed = rtl_dir / "synth" / table
    out = committed if args.update_committed else (args.out or Path("reports/synth") / table)
    out_file(out)

    def progress(point: Any, row: dict[str, str], seconds: float) -> None:
        if not args.quiet:
            print(
                f"synth: {point.slug}: {row['fpga_luts']} LUTs, {row['fpga_dsps']} DSPs "
                f"({seconds:.0f} s)",
                file=sys.stderr,
            )

    with tempfile.TemporaryDirectory(prefix="coaccel-synth-") as tmp:
        work = args.work_dir if args.work_dir is not None else Path(tmp)
        rows = synth.synthesize_kv260_all(
            points,
            rtl_dir=rtl_dir,
            work_dir=work,
            yosys=args.yosys,
            jobs=args.jobs,
            timeout_s=args.timeout,
            reuse_logs=args.reuse_logs,
            progress=progress,
        )
    if args.update_committed and out.exists():
        old = {(r["group"], r["top"], r["params"]): r for r in synth.read_kv260_csv(out)}
        old.update({(r["group"], r["top"], r["params"]): r for r in rows})
        order = [(p.group, p.top, p.param_string) for p in synth.select_kv260_points()]
        rows = [old[k] for k in order if k in old]
    write_text(out, synth.kv260_rows_to_csv(rows))
    if args.json:
        import json

        json.dump({"rows": rows, "file": str(out)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    cols = (
        ("top", "top"),
        ("params", "params"),
        ("LUT", "fpga_luts"),
        ("FF", "fpga_ffs"),
        ("CARRY", "fpga_carry_cells"),
        ("DSP48E2", "fpga_dsps"),
        ("BRAM36", "fpga_bram36"),
        ("URAM", "fpga_uram"),
        ("LUTRAM cells", "fpga_lutram_cells"),
        ("LUTRAM LUTs", "fpga_lutram_luts"),
    )
    widths = [max(len(h), *(len(r[k]) for r in rows)) for h, k in cols]
    print("  ".join(h.ljust(w) for (h, _), w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(r[k].ljust(w) for (_, k), w in zip(cols, widths, strict=True)))
    limits = synth.KV260_LIMITS
    print("\nshare of the KV260 (XCK26) [DS987] (luts: logic + LUTRAM LUTs):")
    for r in rows:
        use = synth.kv260_use(r)
        shares = ", ".join(
            f"{key.removeprefix('fpga_')} {use[key] / lim:.1%}" for key, lim in limits.items()
        )
        print(f"  {r['top']}: {shares}")
    print(f"({rows[0]['yosys_version']}; Yosys synthesis, not place and route)" if rows else "")
    print(f"\nwrote {out}")
    return 0
