"""``coaccel synth``: Yosys gate / transistor / FPGA resource counts of the targets' RTL blocks.

Every registered target may offer synthesis sets
(:class:`~coaccel.spine.target.SynthesisSet`): ``--target NAME`` picks one (default: the set
marked as the default), ``--list`` shows them with their groups and design points. The command
synthesizes the selected groups (``--blocks``) in the set's view with
:func:`coaccel.synth.synthesize_all`, writes the table (columns of the view, the Yosys version on
every row) into ``--out`` with its manifest, or with ``--update-committed`` into the committed
``rtl/synth/<table>`` (its other rows kept), and prints it followed by the set's summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from ..spine.target import SimTarget, SynthesisSet
from .args import Outputs, add_out, add_output_flags, int_in

DEFAULT_OUT = Path("reports") / "synth"

_DISPLAY: dict[str, tuple[tuple[str, str], ...]] = {
    "asic+fpga": (
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
    ),
    "fpga": (
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
    ),
}
"""The columns printed of each view: (header, table column)."""

_PROGRESS: dict[str, tuple[tuple[str, str], ...]] = {
    "asic+fpga": (("cmos_transistors", "transistors"), ("fpga_luts", "LUTs")),
    "fpga": (("fpga_luts", "LUTs"), ("fpga_dsps", "DSPs")),
}
"""The counts a progress line shows of each view: (table column, unit)."""

EPILOG = """\
examples:
  coaccel synth --list                          every synthesis set, its groups and points
  coaccel synth                                 every group of the default set
  coaccel synth --target NAME --update-committed   update the committed rtl/synth/<table>
  coaccel synth --blocks G1,G2 --out /tmp/synth   some groups, into another folder
  coaccel synth --work-dir /tmp/ys --reuse-logs   run Yosys only where script or sources changed
needs Yosys with a working ABC (Debian/Ubuntu: apt-get install yosys); see docs/synthesis.md
"""


def _sets() -> list[tuple[SimTarget, SynthesisSet]]:
    """(target, synthesis set) of every registered target's sets, the default set first."""
    from ..simulation import targets

    found = [(t, s) for t in targets() for s in t.synthesis]
    defaults = [ts for ts in found if ts[1].default]
    if defaults:
        found.remove(defaults[0])
        found.insert(0, defaults[0])
    return found


def register(subparsers: Any) -> None:
    """Add the ``synth`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    sets = _sets()
    names = [s.name for _, s in sets]
    default = sets[0][1] if sets else None
    where = (
        f" (default: {DEFAULT_OUT.as_posix()}/{default.table} for --target {default.name})"
        if default
        else ""
    )
    p = subparsers.add_parser(
        "synth",
        help="Yosys gate, transistor and FPGA resource counts of the RTL blocks",
        description=textwrap.fill(
            "Synthesize a target's RTL blocks with Yosys, one CSV row per design point: "
            "generic CMOS gates and a transistor estimate (synth; abc -g cmos2; "
            "stat -tech cmos) and/or UltraScale+ LUT/FF/CARRY/DSP/RAM counts "
            "(synth_xilinx -family xcup; synthesis, not place and route), as the synthesis set "
            f"asks. The table goes into the --out folder{where} or, with --update-committed, "
            "to rtl/synth/<table>; the set's comparisons are printed after it.",
            width=79,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--target",
        choices=names,
        default=None,
        help=f"the synthesis set: {', '.join(names) or 'none registered'} "
        f"(default {default.name if default else '-'}; see --list)",
    )
    p.add_argument(
        "--reuse-logs",
        action="store_true",
        help="with --work-dir: reuse finished logs of the same script run on the same sources",
    )
    p.add_argument(
        "--blocks",
        metavar="G1,G2,...",
        help="comma-separated block groups (default: all; see --list)",
    )
    add_out(p, DEFAULT_OUT, what="folder of the table and its manifest")
    # None tells an --out given on the command line from the default (--update-committed).
    p.set_defaults(out=None)
    p.add_argument(
        "--update-committed",
        action="store_true",
        help="update the committed table <rtl dir>/synth/<set's table> (its other rows kept)",
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
    p.add_argument(
        "--list", action="store_true", help="list the synthesis sets (or --target's) and exit"
    )
    add_output_flags(p, "print the table's rows as JSON")
    p.set_defaults(func=run, command="synth")


def format_sets(sets: list[tuple[SimTarget, SynthesisSet]]) -> str:
    """The synthesis sets with their groups and design points, as ``--list`` prints them.

    Args:
        sets: ``(target, synthesis set)`` pairs.

    Returns:
        Per set a header line (name, target kind, view, table, help), then each group and its
        points (top module and HDL parameters).
    """
    if not sets:
        return "no synthesis sets are registered"
    lines = []
    for t, s in sets:
        lines.append(f"{s.name} (target {t.kind}, {s.view}, rtl/synth/{s.table}): {s.help}")
        for group, points in s.groups().items():
            lines.append(f"  {group}:")
            lines += [f"    {pt.top} {pt.param_string}".rstrip() for pt in points]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Execute ``coaccel synth``.

    Args:
        args: the parsed command line.

    Returns:
        Exit status 0.

    Raises:
        CoaccelError: no such set, an unknown group, or exclusive options.
    """
    from .. import synth
    from ..report.files import write_text
    from ..spine.errors import CoaccelError
    from .args import comma_list

    sets = _sets()
    chosen = [ts for ts in sets if args.target is None or ts[1].name == args.target][:1]
    if args.list:
        print(format_sets(chosen if args.target else sets))
        return 0
    if not chosen:
        raise CoaccelError("no synthesis set is registered (coaccel synth --list)")
    s = chosen[0][1]
    if args.reuse_logs and args.work_dir is None:
        raise CoaccelError("--reuse-logs needs --work-dir (where the earlier logs are)")
    if args.update_committed and args.out is not None:
        raise CoaccelError("--out and --update-committed exclude each other")
    groups = s.groups()
    names = comma_list(args.blocks, "--blocks") if args.blocks else None
    points = synth.select_points(groups, names)
    if args.rtl_dir is not None:
        rtl_dir = args.rtl_dir.resolve()
    else:
        rtl_dir = synth.find_rtl_dir(subfolder=s.rtl_folder)
    columns = synth.VIEWS[s.view]
    if args.update_committed:
        folder = rtl_dir / "synth"
    else:
        folder = args.out = args.out if args.out is not None else DEFAULT_OUT
    out = Outputs(args, "coaccel synth", out=folder)
    table = out.out / s.table
    shown = _PROGRESS[s.view]

    def progress(point: Any, row: dict[str, str], seconds: float) -> None:
        counts = ", ".join(f"{row[c]} {unit}" for c, unit in shown)
        out.progress(f"{point.slug}: {counts} ({seconds:.0f} s)")

    with tempfile.TemporaryDirectory(prefix="coaccel-synth-") as tmp:
        rows = synth.synthesize_all(
            points,
            rtl_dir=rtl_dir,
            work_dir=args.work_dir if args.work_dir is not None else Path(tmp),
            yosys=args.yosys,
            view=s.view,
            jobs=args.jobs,
            timeout_s=args.timeout,
            reuse_logs=args.reuse_logs,
            progress=progress,
        )
    if args.update_committed and table.exists():
        # A partial run (--blocks) updates its rows of the committed table and keeps the others.
        rows = synth.merge_rows(synth.read_table(table, columns), rows, synth.select_points(groups))
    write_text(table, synth.rows_to_csv(rows, columns))
    text = _format_table(rows, _DISPLAY[s.view])
    extra = s.summary(rows) if s.summary is not None else ""
    if extra:
        text += "\n\n" + extra
    doc = {"rows": rows, "file": str(table)}
    if args.update_committed:
        # The committed folder holds the tables only: no manifest there.
        return _print_result(out, [table], text, doc)
    return out.finish([table], text=text, doc=doc)


def _format_table(rows: list[dict[str, str]], cols: tuple[tuple[str, str], ...]) -> str:
    """The rows as aligned text columns, then the Yosys version line."""
    if not rows:
        return ""
    widths = [max(len(h), *(len(r[k]) for r in rows)) for h, k in cols]
    lines = ["  ".join(h.ljust(w) for (h, _), w in zip(cols, widths, strict=True))]
    for r in rows:
        lines.append("  ".join(r[k].ljust(w) for (_, k), w in zip(cols, widths, strict=True)))
    lines.append(f"({rows[0]['yosys_version']})")
    return "\n".join(lines)


def _print_result(out: Outputs, files: list[Path], text: str, doc: dict[str, Any]) -> int:
    """Print the result as :meth:`Outputs.finish` does, without writing a manifest."""
    if out.json:
        json.dump({**doc, "files": [str(f) for f in files]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(text)
    if not out.quiet:
        for f in files:
            print(f"wrote {f}")
    return 0
