"""The DeltaLLM blocks on the KV260 (``coaccel synth --target deltallm``): points and table.

The blocks of ``rtl/deltallm/`` are synthesized in the FPGA view only of :mod:`coaccel.synth`
(``rtl/synth/fpga_kv260.ys``: ``synth_xilinx -family xcup -abc9``; synthesis, not place and
route) into the committed table ``rtl/synth/deltallm_kv260.csv`` (columns
:data:`KV260_COLUMNS`), at the KV260 configuration and at smaller sizes that show how the counts
scale. :func:`kv260_use` and :data:`KV260_LIMITS` give a row's share of the XCK26;
:func:`summary` prints it after the table.

Public: :data:`RTL_FOLDER`, :data:`TABLE`, :data:`KV260_GROUPS`, :func:`groups`,
:func:`select_kv260_points`, :data:`KV260_COLUMNS`, :data:`KV260_LIMITS`, :func:`kv260_use`,
:func:`synthesize_kv260`, :func:`synthesize_kv260_all`, :func:`kv260_rows_to_csv`,
:func:`read_kv260_csv`, :func:`summary`.
Internal: ``_dl`` (point builder), ``_KV260`` (the KV260 configuration's parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from coaccel import synth
from coaccel.synth import FPGA_COLUMNS, SynthPoint

__all__ = [
    "KV260_COLUMNS",
    "KV260_GROUPS",
    "KV260_LIMITS",
    "RTL_FOLDER",
    "TABLE",
    "groups",
    "kv260_rows_to_csv",
    "kv260_use",
    "read_kv260_csv",
    "select_kv260_points",
    "summary",
    "synthesize_kv260",
    "synthesize_kv260_all",
]

RTL_FOLDER = "deltallm"
"""The folder under ``rtl/`` holding the DeltaLLM blocks' Verilog."""

TABLE = "deltallm_kv260.csv"
"""The table's file name (committed as ``rtl/synth/deltallm_kv260.csv``)."""

_DL_TOP_MODULES = (
    "dl_attention_top",
    "dl_mac_lanes",
    "dl_prio_enc",
    "dl_softmax_state",
    "dl_exp2",
    "dl_normalizer",
)
_KV260 = (("D", 128), ("L", 16), ("M", 16))


def _dl(
    group: str, top: str, modules: tuple[str, ...], params: tuple[tuple[str, int], ...]
) -> SynthPoint:
    return SynthPoint(group, top, modules, params, area=RTL_FOLDER, fpga_template="fpga_kv260.ys")


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
"""The DeltaLLM design points of the KV260 table, by group."""


def groups() -> Mapping[str, tuple[SynthPoint, ...]]:
    """:data:`KV260_GROUPS` (the synthesis set's ``groups``)."""
    return KV260_GROUPS


def select_kv260_points(names: Iterable[str] | None = None) -> list[SynthPoint]:
    """The KV260-table points of the named groups (all by default), in table order.

    Raises:
        CoaccelError: an unknown group name (the message lists the valid ones).
    """
    return synth.select_points(KV260_GROUPS, names)


KV260_COLUMNS = FPGA_COLUMNS
"""Columns of the KV260 table: those of the FPGA-only view
(:data:`coaccel.synth.FPGA_COLUMNS`; a design's LUT use is ``fpga_luts + fpga_lutram_luts``)."""

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
    """One point's KV260 row: :func:`coaccel.synth.synthesize` in the ``"fpga"`` view.

    Args:
        point: a point of :data:`KV260_GROUPS`.
        rtl_dir: the ``rtl/`` folder.
        work_dir: scratch folder; the script and log go to ``work_dir / point.slug``.
        yosys: the Yosys executable; ``version`` its version line.
        timeout_s: wall-clock limit of the run, seconds.
        reuse_logs: reuse a finished log of exactly the same script run on sources of the same
            digest instead of running Yosys again (the top takes long on a small machine).

    Returns:
        The row: a dict over :data:`KV260_COLUMNS`, values as CSV text.

    Raises:
        SynthError: the run failed or its log lacks the statistics.
    """
    return synth.synthesize(point, rtl_dir=rtl_dir, work_dir=work_dir, yosys=yosys,
                            version=version, view="fpga", timeout_s=timeout_s,
                            reuse_logs=reuse_logs)  # fmt: skip


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
    return synth.synthesize_all(points, rtl_dir=rtl_dir, work_dir=work_dir, yosys=yosys,
                                view="fpga", jobs=jobs, timeout_s=timeout_s,
                                reuse_logs=reuse_logs, progress=progress)  # fmt: skip


def kv260_rows_to_csv(rows: Iterable[Mapping[str, str]]) -> str:
    """CSV text (header :data:`KV260_COLUMNS`, ``\\n`` line ends) of KV260-table rows."""
    return synth.rows_to_csv(rows, KV260_COLUMNS)


def read_kv260_csv(path: str | Path) -> list[dict[str, str]]:
    """Rows of a KV260 table written by ``coaccel synth --target deltallm``.

    Raises:
        CoaccelError: the header is not :data:`KV260_COLUMNS`.
    """
    return synth.read_table(path, KV260_COLUMNS)


def summary(rows: Iterable[Mapping[str, str]]) -> str:
    """Each row's share of the KV260, as ``coaccel synth --target deltallm`` prints it.

    Args:
        rows: KV260-table rows (values as CSV text).

    Returns:
        One line per row: its share of every resource of :data:`KV260_LIMITS` (LUTs: logic
        plus LUTRAM LUTs); empty without rows.
    """
    lines = []
    for r in rows:
        use = kv260_use(r)
        shares = ", ".join(
            f"{key.removeprefix('fpga_')} {use[key] / lim:.1%}" for key, lim in KV260_LIMITS.items()
        )
        lines.append(f"  {r['top']}: {shares}")
    if not lines:
        return ""
    head = (
        "share of the KV260 (XCK26) [DS987] (luts: logic + LUTRAM LUTs; Yosys synthesis, "
        "not place and route):"
    )
    return "\n".join([head, *lines])
