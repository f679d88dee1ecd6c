"""``coaccel cost``: PE area/energy per MAC of any block format, and the cost tables behind it.

Sub-commands:

* ``coaccel cost pe --weight e2m1 --act e2m3 --block 32 --scale pot [--ub 32 --l2 sig1]
  [--node 28|16|7|5] [--json]``: area (µm²/MAC) and energy (fJ/MAC) with one-sigma uncertainty
  (:func:`coaccel.cost.pe_cost`).
* ``coaccel cost table [--json]``: every component-table entry (value, unit, source,
  uncertainty) and the fitted PE-model coefficients.
* ``coaccel cost fit [--json]``: the PE model's calibration and its leave-one-out /
  leave-one-group-out prediction errors.
* ``coaccel cost calibrate --synth-csv rtl/synth/hbq_area.csv``: our Yosys gate counts as
  calibration points (``arch_configs/cost/pe_calibration_synth.yaml``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .args import add_out_file, add_output_flags, int_in

EPILOG = """\
examples:
  coaccel cost pe --weight e2m1 --act e2m3 --block 32 --scale pot
  coaccel cost pe --weight e2m1 --act e2m2 --block 128 --scale e5m3 --ub 32 --l2 sig1
  coaccel cost pe --weight e2m1 --act e2m1 --block 16 --scale e4m3 --node 7 --json
  coaccel cost table
  coaccel cost fit
"""


def register(subparsers: Any) -> None:
    """Add the ``cost`` sub-command (with ``pe``, ``table``, ``fit``).

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "cost",
        help="PE area/energy per MAC of a block format; the cost tables and their sources",
        description=(
            "28 nm energy/area model: PE area and energy per MAC as a model of the number "
            "format (fitted to the published HBQ/BQ figures, with one-sigma uncertainty), "
            "component tables with sources, technology scaling to 16/7/5 nm."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(title="cost commands", metavar="<what>")
    pe = sub.add_parser(
        "pe",
        help="area_um2_per_mac and energy_fj_per_mac of a PE format",
        description="Predict the area and energy per MAC of a PE format (one-sigma uncertainty).",
    )
    pe.add_argument("--weight", default="e2m1", metavar="FMT", help="weight elements (e2m1)")
    pe.add_argument("--act", default="e2m2", metavar="FMT", help="activation elements (e2m2)")
    pe.add_argument("--block", type=int_in(1), default=128, metavar="B", help="L1 block size (128)")
    pe.add_argument(
        "--scale", default="e5m3", metavar="FMT", help="L1 scale: pot, e8m0, e5m3, e4m3 (e5m3)"
    )
    pe.add_argument("--ub", type=int_in(1), default=None, metavar="N", help="L2 micro-block size")
    pe.add_argument(
        "--l2", default=None, metavar="SCHEME", help="activation L2: sig1 (default), int, pot..."
    )
    pe.add_argument(
        "--l2-bits", type=int_in(1, 4), default=2, metavar="N", help="activation L2 bits, 1-4 (2)"
    )
    pe.add_argument(
        "--l2-weight", default=None, metavar="SCHEME", help="weight L2: mix (default), sig2..."
    )
    pe.add_argument(
        "--l2-weight-bits", type=int_in(1, 4), default=2, metavar="N", help="weight L2 bits (2)"
    )
    pe.add_argument("--accum", default="fp16", choices=("fp16", "fp32"), help="accumulator")
    pe.add_argument(
        "--node", type=float, default=28, metavar="NM", help="technology node: 28, 16, 7, 5"
    )
    pe.add_argument(
        "--pe-macs",
        type=int_in(1),
        default=128,
        metavar="N",
        help="MACs per PE: the cross-block reduction spans N / B blocks (128)",
    )
    pe.add_argument("--json", action="store_true", help="machine-readable output")
    pe.set_defaults(func=run_pe, command="cost pe")
    tb = sub.add_parser("table", help="component tables and fitted coefficients, with sources")
    tb.add_argument("--json", action="store_true", help="machine-readable output")
    tb.set_defaults(func=run_table, command="cost table")
    ft = sub.add_parser("fit", help="PE-model calibration and leave-one-out errors")
    ft.add_argument("--json", action="store_true", help="machine-readable output")
    ft.set_defaults(func=run_fit, command="cost fit")
    cal = sub.add_parser(
        "calibrate",
        help="turn our Yosys gate counts into PE calibration points",
        description=(
            "Read rtl/synth/hbq_area.csv (coaccel synth) and write the pseudo area points of "
            "its activation-width sweeps (transistor ratios anchored at the published μB=32 "
            "and L1-only W4A5 areas) to arch_configs/cost/pe_calibration_synth.yaml, which the "
            "PE model merges. See docs/cost_model.md."
        ),
    )
    cal.add_argument("--synth-csv", type=Path, required=True, metavar="CSV", help="area table")
    add_out_file(cal, Path("reports/cost") / "pe_calibration_synth.yaml",
                 what="calibration file to write (YAML)")  # fmt: skip
    cal.add_argument(
        "--update-shipped",
        action="store_true",
        help="write the shipped arch_configs/cost/pe_calibration_synth.yaml that the PE model "
        "merges (instead of --out)",
    )
    cal.add_argument("--weight", type=float, default=0.25, help="fit weight per point (0.25)")
    add_output_flags(cal, "print the calibration points as JSON")
    cal.set_defaults(func=run_calibrate, command="cost calibrate")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1], command="cost")


def run_calibrate(args: argparse.Namespace) -> int:
    """Write the Yosys-derived calibration file."""
    from ..cost import SYNTH_CALIBRATION_FILE, synth_points, write_synth_calibration
    from ..synth import read_area_csv
    from .args import in_file, out_file

    synth_csv = in_file(Path(args.synth_csv), "--synth-csv")
    if args.update_shipped:
        from .. import arch_configs

        out = Path(arch_configs.__file__).resolve().parent / "cost" / SYNTH_CALIBRATION_FILE
    else:
        out = args.out
    out_file(out)
    pts = synth_points(read_area_csv(synth_csv), weight=args.weight)
    path = write_synth_calibration(pts, out)
    if args.json:
        doc = {"points": [{"label": p.label, "um2_per_mac": p.value} for p in pts]}
        json.dump({**doc, "file": str(path)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for p in pts:
        print(f"{p.label}: {p.value:.2f} um2/MAC")
    if not args.quiet:
        print(f"wrote {path} ({len(pts)} points)")
    return 0


def run_pe(args: argparse.Namespace) -> int:
    """Print the PE prediction.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors raise ``CoaccelError``, which the CLI reports).
    """
    from ..cost import pe_cost

    c = pe_cost(
        args.weight,
        args.act,
        args.block,
        args.scale,
        ub=args.ub,
        l2=args.l2,
        l2_bits=args.l2_bits,
        l2_weight=args.l2_weight,
        l2_weight_bits=args.l2_weight_bits,
        accum=args.accum,
        node_nm=args.node,
        pe_macs=args.pe_macs,
    )
    if args.json:
        json.dump(c.as_dict(), sys.stdout, indent=2)
        print()
        return 0
    print(format_pe_cost(c))
    return 0


def format_pe_cost(c: Any) -> str:
    """Text of a :class:`~coaccel.cost.PeCost` (what ``coaccel cost pe`` prints)."""
    lines = [
        f"PE: {c.pe.label}, {c.pe.pe_macs} MACs/PE, {c.node_nm:g} nm",
        f"area_um2_per_mac   {c.area_um2_per_mac:9.2f} ± {c.area_sigma_um2_per_mac:.2f}"
        f"  (±{c.area_uncertainty_pct:.1f} %, 1 sigma)",
        f"energy_fj_per_mac  {c.energy_fj_per_mac:9.2f} ± {c.energy_sigma_fj_per_mac:.2f}"
        f"  (±{c.energy_uncertainty_pct:.1f} %, 1 sigma)",
        "",
        f"{'component':22s} {'um2/MAC':>9s} {'fJ/MAC':>9s}",
    ]
    names = list(dict.fromkeys([*c.area_parts_um2_per_mac, *c.energy_parts_fj_per_mac]))
    for k in names:
        a = c.area_parts_um2_per_mac.get(k)
        e = c.energy_parts_fj_per_mac.get(k)
        if (a or 0.0) == 0.0 and (e or 0.0) == 0.0:
            continue
        a_s = f"{a:9.2f}" if a is not None else f"{'-':>9s}"
        e_s = f"{e:9.2f}" if e is not None else f"{'-':>9s}"
        lines.append(f"{k:22s} {a_s} {e_s}")

    def terms(t: Any) -> str:
        return ", ".join(f"{k} {100 * v:.1f} %" for k, v in t.items())

    lines += [
        "",
        f"area uncertainty terms (1 sigma, in quadrature): {terms(c.area_terms)}",
        f"energy uncertainty terms (1 sigma, in quadrature): {terms(c.energy_terms)}",
    ]
    if c.domain_notes:
        lines.append("outside the calibrated domain: " + "; ".join(c.domain_notes))
    lines.append(
        "source: PE model fitted to arch_configs/cost/pe_calibration_28nm.yaml "
        "([R-BQ], [R-PE], [R-ACC], [R-PM]); energy is dynamic energy at the calibration corner; "
        "see docs/cost_model.md"
    )
    return "\n".join(lines)


def _table_text(rows: list[dict[str, Any]], cols: list[str]) -> str:
    cells = [[_fmt(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    out = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return " ".join(str(v).split())


def run_table(args: argparse.Namespace) -> int:
    """Print every component table and the fitted PE coefficients."""
    from ..cost import TABLE_FILES, pe_model, shipped_table, table_rows

    data: dict[str, Any] = {}
    for name in TABLE_FILES:
        data[name] = table_rows(shipped_table(name))
    data["pe_model_coefficients"] = pe_model().coefficients()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        print()
        return 0
    for name, rows in data.items():
        print(f"== {name}")
        cols = list(rows[0]) if rows else []
        print(_table_text(rows, cols))
        print()
    return 0


def run_fit(args: argparse.Namespace) -> int:
    """Print the PE model's calibration points with fit, LOO and LOGO errors."""
    from ..cost import pe_model

    m = pe_model()
    rows = [
        {
            "label": r.label,
            "quantity": r.quantity,
            "group": r.group,
            "published": r.published,
            "unit": r.unit,
            "fitted": r.fitted,
            "fit_error_pct": 100 * r.fit_error,
            "loo_error_pct": 100 * r.loo_error,
            "logo_error_pct": 100 * r.logo_error,
        }
        for r in m.loo
    ]
    if args.json:
        json.dump(
            {
                "points": rows,
                "rms_loo_area": m.area.rms_loo,
                "rms_loo_energy": m.energy.rms_loo,
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    print(_table_text(rows, list(rows[0])))
    print()
    print(
        f"RMS leave-one-out error over whole-PE points: area {100 * m.area.rms_loo:.2f} %, "
        f"energy {100 * m.energy.rms_loo:.2f} % (points whose LOO is not informative excluded)"
    )
    return 0
