"""Calibration points from our own Yosys gate counts (``rtl/synth/hbq_area.csv``).

Yosys's generic-gate transistor counts are not TSMC 28 nm areas, but their *ratios* across a
sweep of one RTL module follow the logic the format needs. Each synthesized point of the
activation-width sweeps becomes a pseudo area point: the published area of the sweep's
reference point ([R-PE]) times the transistor ratio to that reference,

* ``pe_act`` (HBQ PE, μB = 32, SIG-1 2b x Mix, A = E2M(ACT_BITS-3)): 72.27 µm²/MAC x T(A)/T(A5);
* ``pe_l1`` (the same PE without L2 scales): 67.97 µm²/MAC x T(A)/T(A5).

They enter the PE fit with a low weight (default 0.25) and ``loo_informative: false``, so they
inform the fit between the published activation widths (A6, A7) without counting in the
published fit-error statistics. ``coaccel cost calibrate --synth-csv rtl/synth/hbq_area.csv``
writes them to ``arch_configs/cost/pe_calibration_synth.yaml``, which the PE model merges when
present (the file is shipped, so the fit does not depend on the rtl/ folder).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..spine.errors import CoaccelError
from ._pe_fit import CalibrationPoint
from ._pe_formats import PeFormat

__all__ = ["SYNTH_CALIBRATION_FILE", "synth_points", "write_synth_calibration"]

SYNTH_CALIBRATION_FILE = "pe_calibration_synth.yaml"
"""File name (under ``arch_configs/cost/``) of the Yosys-derived calibration points."""

_REFS = {
    # group: (published reference um2/MAC at ACT_BITS = 5, its source, L2 on)
    "pe_act": (72.27, "[R-PE] HBQ_uB_area_results.tsv: HBQ PE μB=32 W4A5 72.27 um2/MAC", True),
    "pe_l1": (67.97, "[R-BQ] FP8 A5 B128 row: L1-only B=128 W4A5 reference 67.97 um2/MAC", False),
}


def _params(row: Mapping[str, str]) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in row["params"].split(";") if kv)}


def synth_points(
    rows: Iterable[Mapping[str, str]], *, weight: float = 0.25
) -> tuple[CalibrationPoint, ...]:
    """Pseudo area points from the area table's activation-width sweeps.

    Args:
        rows: rows of ``rtl/synth/hbq_area.csv`` (:func:`coaccel.synth.read_area_csv`).
        weight: fit weight of each point.

    Returns:
        One point per synthesized ACT_BITS other than the reference 5, per sweep group
        (``pe_act``, ``pe_l1``), in table order; empty if the groups are absent.

    Raises:
        CoaccelError: a group lacks its ACT_BITS = 5 reference point or has a non-positive
            transistor count.
    """
    rows = list(rows)
    out: list[CalibrationPoint] = []
    for group, (ref_um2, ref_src, l2) in _REFS.items():
        tpm: dict[int, float] = {}
        for r in rows:
            if r.get("group") != group:
                continue
            p = _params(r)
            t = float(r["cmos_transistors_per_mac"])
            if t <= 0:
                raise CoaccelError(f"hbq_area.csv: {group} {r['params']}: transistors {t}")
            tpm[p["ACT_BITS"]] = t
        if not tpm:
            continue
        if 5 not in tpm:
            raise CoaccelError(f"hbq_area.csv: group {group} has no ACT_BITS=5 reference point")
        for bits in sorted(tpm):
            if bits == 5:
                continue
            ratio = tpm[bits] / tpm[5]
            pe = PeFormat(
                weight="e2m1",
                act=f"e2m{bits - 3}",
                block=128,
                scale="e5m3",
                ub=32 if l2 else None,
                l2_act="sig1" if l2 else "none",
                l2_weight="mix" if l2 else "none",
            )
            out.append(
                CalibrationPoint(
                    label=f"Yosys {group} A{bits} (ratio {ratio:.4f} x {ref_um2})",
                    quantity="area",
                    value=round(ref_um2 * ratio, 4),
                    unit="um2/MAC",
                    source=(
                        f"[SYNTH] rtl/synth/hbq_area.csv {group}: Yosys CMOS transistors per MAC "
                        f"{tpm[bits]:g} / {tpm[5]:g} (ACT_BITS=5) x {ref_src}"
                    ),
                    uncertainty=0.1,
                    pe=pe,
                    weight=weight,
                    group=f"yosys_{group}",
                    published=False,
                    loo_informative=False,
                )
            )
    return tuple(out)


def write_synth_calibration(points: Iterable[CalibrationPoint], path: str | Path) -> Path:
    """Write Yosys-derived points as a calibration file (schema ``CalibrationSet``).

    Args:
        points: from :func:`synth_points`.
        path: the YAML file to write.

    Returns:
        The path written.
    """
    import yaml

    from ..spine.config import dump_config

    pts = [dump_config(p) for p in points]
    doc = {
        "version": 1,
        "description": "Pseudo area points from our Yosys gate counts (coaccel cost calibrate)",
        "points": pts,
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Generated by `coaccel cost calibrate --synth-csv rtl/synth/hbq_area.csv` "
        "(coaccel/cost/_synthcal.py).\n# Transistor ratios of our RTL sweeps anchored at the "
        "published reference points; do not edit by hand.\n"
    )
    p.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100))
    return p
