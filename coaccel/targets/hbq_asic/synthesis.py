"""The HBQ blocks' synthesis set (``coaccel synth --target hbq``): points, table, comparisons.

The RTL blocks of ``rtl/hbq/`` are synthesized in both views of :mod:`coaccel.synth` (generic
CMOS gates with Yosys's transistor estimate, and UltraScale+ cells) into the committed table
``rtl/synth/hbq_area.csv`` (columns :data:`coaccel.synth.COLUMNS`). The array top
(``hbq_array``, group ``array``) is too large to flatten: its ASIC view keeps the PE and the
partial-sum unit as hierarchy levels and turns the buffers (``hbq_ram_1r1w``) into black-box
SRAM macros.

:func:`calibration` compares the PE sweeps with the published TSMC 28 nm per-MAC areas of
[R-BQ] / [R-PE] after normalizing both to the μB = 32 point; :func:`breakdown` the parts of the
μB = 32 PE with the published [R-ACC] area breakdown; :func:`summary` is both as the text
``coaccel synth`` prints after the table.

Public: :data:`RTL_FOLDER`, :data:`TABLE`, :data:`GROUPS`, :func:`groups`,
:func:`select_points`, :data:`PUBLISHED_UB_UM2_PER_MAC`,
:data:`PUBLISHED_ACT_BITS_L1_UM2_PER_MAC`, :data:`PUBLISHED_PE_BREAKDOWN_UM2`,
:func:`calibration`, :func:`breakdown`, :func:`summary`.
Internal: ``_point``, ``_pe``, ``_array`` (point builders), ``_PART_ROWS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from coaccel import synth
from coaccel.synth import SynthPoint, param_values

__all__ = [
    "GROUPS",
    "PUBLISHED_ACT_BITS_L1_UM2_PER_MAC",
    "PUBLISHED_PE_BREAKDOWN_UM2",
    "PUBLISHED_UB_UM2_PER_MAC",
    "RTL_FOLDER",
    "TABLE",
    "breakdown",
    "calibration",
    "groups",
    "select_points",
    "summary",
]

RTL_FOLDER = "hbq"
"""The folder under ``rtl/`` holding the HBQ blocks' Verilog."""

TABLE = "hbq_area.csv"
"""The table's file name (committed as ``rtl/synth/hbq_area.csv``)."""

# ---- the design points --------------------------------------------------------------------

_PE_MODULES = ("hbq_pe", "hbq_mul", "hbq_adder_tree", "hbq_l1_convert")
_PSUM_MODULES = ("hbq_psum_unit", "hbq_mxint8_dequant", "hbq_mxint8_quant", "hbq_fp16_add")
_ACT_MODULES = ("hbq_act_quant", "hbq_act_scale", "hbq_act_elem")
_ARRAY_MODULES = ("hbq_array", "hbq_ram_1r1w", *_PE_MODULES, *_PSUM_MODULES)


def _point(
    group: str,
    top: str,
    modules: tuple[str, ...],
    params: tuple[tuple[str, int], ...] = (),
    *,
    macs: int = 0,
    keep: tuple[str, ...] = (),
    macros: tuple[str, ...] = (),
) -> SynthPoint:
    return SynthPoint(group, top, modules, params, macs=macs, keep=keep, macros=macros,
                      area=RTL_FOLDER)  # fmt: skip


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
    return _point("array", "hbq_array", _ARRAY_MODULES, params, macs=n_pe * 128,
                  keep=("hbq_pe", "hbq_psum_unit"), macros=("hbq_ram_1r1w",))  # fmt: skip


def _pe(group: str, **params: int) -> SynthPoint:
    full = {"B": 128, **params}
    return _point(group, "hbq_pe", _PE_MODULES, tuple(full.items()), macs=full["B"])


GROUPS: Mapping[str, tuple[SynthPoint, ...]] = MappingProxyType(
    {
        "fp16_add": (_point("fp16_add", "hbq_fp16_add", ("hbq_fp16_add",)),),
        "mxint8": tuple(
            _point("mxint8", top, (top,), (("N", n),))
            for n in (16, 32)
            for top in ("hbq_mxint8_quant", "hbq_mxint8_dequant")
        ),
        "psum_unit": tuple(
            _point("psum_unit", "hbq_psum_unit", _PSUM_MODULES, (("SA_N", n),)) for n in (16, 32)
        ),
        "act_quant": (
            _point("act_quant", "hbq_act_quant", _ACT_MODULES, (("B", 128), ("UB", 32))),
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
            _point("pe_parts", "hbq_mul", ("hbq_mul",), (("N", 128), ("ACT_BITS", 5), ("PW", 10))),
            _point(
                "pe_parts",
                "hbq_adder_tree",
                ("hbq_adder_tree",),
                (("N", 32), ("IW", 10), ("OW", 15)),
            ),
            _point(
                "pe_parts",
                "hbq_adder_tree",
                ("hbq_adder_tree",),
                (("N", 4), ("IW", 22), ("OW", 24)),
            ),
            _point("pe_parts", "hbq_l1_convert", ("hbq_l1_convert",), (("PTW", 24), ("F", 7))),
        ),
        # The array top with hierarchy kept (PEs and partial-sum unit mapped once each, buffers
        # as SRAM macros): the 32-PE synthesis build and an 8-PE point for scaling.
        "array": (_array(32), _array(8)),
    }
)
"""Every design point, by sweep group (``coaccel synth --blocks`` selects groups)."""


def groups() -> Mapping[str, tuple[SynthPoint, ...]]:
    """:data:`GROUPS` (the synthesis set's ``groups``)."""
    return GROUPS


def select_points(names: Iterable[str] | None = None) -> list[SynthPoint]:
    """The design points of the named groups (all groups by default), in table order.

    Raises:
        CoaccelError: an unknown group name (the message lists the valid ones).
    """
    return synth.select_points(GROUPS, names)


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

    def sweep(group: str, key: str, published: Mapping[int, float], ref: int, label: str) -> None:
        tpm = {
            param_values(r)[key]: float(r["cmos_transistors_per_mac"])
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
    sweep("pe_l1", "ACT_BITS", PUBLISHED_ACT_BITS_L1_UM2_PER_MAC, 5,
          "L1-only PE, activation bits (ref A5)")  # fmt: skip
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


def summary(rows: Iterable[Mapping[str, str]]) -> str:
    """The comparisons ``coaccel synth --target hbq`` prints after the table.

    Args:
        rows: area-table rows (values as CSV text).

    Returns:
        The :func:`calibration` against the published per-MAC areas and the :func:`breakdown`
        of the PE's parts, as text (empty when the rows hold neither).
    """
    rows = list(rows)
    parts = []
    cal = calibration(rows)
    if cal:
        lines = [
            "transistors/MAC vs published 28 nm µm²/MAC, both normalized to the reference point:",
            f"{'sweep':40s} {'point':12s} {'T/MAC':>8s} {'µm²/MAC':>8s} {'T ratio':>8s} "
            f"{'pub ratio':>9s} {'error':>7s}",
        ]
        lines += [
            f"{c['sweep']!s:40s} {c['point']!s:12s} {c['transistors_per_mac']:8.1f} "
            f"{c['published_um2_per_mac']:8.2f} {c['transistor_ratio']:8.3f} "
            f"{c['published_ratio']:9.3f} {c['ratio_error']:+7.1%}"
            for c in cal
        ]
        parts.append("\n".join(lines))
    shares = breakdown(rows)
    if shares:
        head = "μB = 32 PE datapath parts, share of their sum vs the published [R-ACC] breakdown:"
        lines = [head]
        lines += [
            f"  {p['part']:12s} {p['transistors']:8d} T {p['share']:6.1%}   "
            f"published {p['published_um2']:7.1f} µm² {p['published_share']:6.1%}"
            for p in shares
        ]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
