"""The DeltaLLM FPGA part of ``coaccel report``: KV260 resources, power and energy per token.

:func:`report_part` is the target's report role (:class:`~coaccel.spine.target.ReportRole`
``build``). For DeltaLLM FPGA designs (the vector processor ``kv260`` and the TeLLMe-v2
baseline ``tellme_v2``) it returns a :class:`~coaccel.report.document.ReportPart` with

* **Resource utilization**: LUT, FF, DSP48E2, BRAM36 and URAM288 against the device's totals
  (the configuration's ``limits``, [DS987]), modelled
  (:func:`coaccel.sim.deltallm_fpga.estimate_resources`) and counted by Yosys 0.23 on our RTL's
  attention top (the committed table ``rtl/synth/deltallm_kv260.csv``, [SYNTH]) side by side,
  each with its share of the device. TeLLMe-v2 has no RTL of ours: modelled figures only.
* **Power and energy per token** of a prefill run of each workload: the KV260 board's measured
  idle power as the static term ([SIMFERO-KV260], ``arch_configs/cost/board_power.yaml``) plus
  the cost model's dynamic energy per component (:func:`coaccel.cost.evaluate`), over the
  attention engine's run time and over the whole prefill (TTFT), each with its one-sigma
  uncertainty. The whole-prefill figure is a lower bound: the linear layers' dynamic energy is
  not modelled.

Public: :func:`report_part`, :func:`prefill_energy`, :class:`EnergyScope`,
:class:`PrefillEnergy`, :func:`read_synthesis_rows`, :func:`synthesis_row`, :data:`RESOURCES`,
:data:`BOARD_TABLE`, :data:`SYNTH_TOP`. Internal: table formatting helpers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coaccel.cost import evaluate, shipped_table
from coaccel.report.document import Figure, ReportPart, ReportSettings, Section, Table
from coaccel.sim.deltallm_fpga import estimate_resources
from coaccel.simulation import simulate
from coaccel.spine.config import FrozenMap
from coaccel.spine.errors import CoaccelError

__all__ = [
    "BOARD_TABLE",
    "RESOURCES",
    "SYNTH_TOP",
    "EnergyScope",
    "PrefillEnergy",
    "prefill_energy",
    "read_synthesis_rows",
    "report_part",
    "synthesis_row",
]

KIND = "deltallm_fpga"

RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("LUT", "luts", "fpga_luts"),
    ("FF", "ffs", "fpga_ffs"),
    ("DSP48E2", "dsps", "fpga_dsps"),
    ("BRAM36", "bram36", "fpga_bram36"),
    ("URAM288", "urams", "fpga_uram"),
)
"""The reported resources: (label and unit, ``Resources`` / ``limits`` attribute, column of the
KV260 synthesis table, :data:`coaccel.synth.KV260_COLUMNS`)."""

SYNTH_TOP = "dl_attention_top"
"""The RTL top whose Yosys counts stand beside the modelled processor."""

BOARD_TABLE = "board_power.yaml"
"""The measured board-power table (``arch_configs/cost/``); entry ``kv260_idle_w``."""

_STATIC_COMPONENTS = ("fpga_static", "leakage")
"""Cost-model components that are static power x time: the board's idle power replaces them
(the programmable logic's static power is part of it; the ASIC leakage density is 0 here)."""

_YOSYS_BAND = (
    "Yosys synthesis cell counts, not Vivado post-synthesis or post-route utilization: "
    "docs/synthesis.md §6 expects LUTs up to about 2x Vivado's and rarely below (no LUT "
    "combining, [AMD-AR63514]; adders next to the DSP48E2 stay in the fabric for xcup, "
    "[YOSYS-XILINX-DSP]), flip-flops within a few percent, DSP48E2 exact (the same 27 x 18 "
    "tiles, [UG579]) and BRAM/URAM by the same inference rules; a band from single-design "
    "comparisons and the tools' mechanisms, not a measured calibration"
)


# ---------------------------------------------------------------------------------------------
# Resources


def read_synthesis_rows(path: str | Path | None = None) -> tuple[list[dict[str, str]], str]:
    """The committed KV260 synthesis table of our RTL, if this installation has it.

    Args:
        path: the CSV; default ``rtl/synth/deltallm_kv260.csv`` of the repository
            (:func:`coaccel.synth.find_rtl_dir`).

    Returns:
        ``(rows, where)``: the rows (values as CSV text) and the table read (``path`` as given,
        or ``rtl/synth/<table>``); ``([], reason)`` when the table is not found (the ``rtl/``
        folder ships with the repository, not with the package).
    """
    from coaccel.synth import find_rtl_dir

    from .synthesis import TABLE, read_kv260_csv

    try:
        p = Path(path) if path is not None else find_rtl_dir() / "synth" / TABLE
    except CoaccelError as e:
        return [], f"the synthesis table is not available here ({e})"
    if not p.is_file():
        return [], f"the synthesis table {p} is not available here"
    return read_kv260_csv(p), str(path) if path is not None else f"rtl/synth/{TABLE}"


def _params(row: Mapping[str, str]) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in row["params"].split(";") if kv)}


def synthesis_row(cfg: Any, rows: Sequence[Mapping[str, str]]) -> Mapping[str, str] | None:
    """The Yosys row of our RTL's attention top synthesized at a design's configuration.

    Args:
        cfg: a DeltaLLM FPGA design (:class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`).
        rows: rows of the KV260 synthesis table (:func:`read_synthesis_rows`).

    Returns:
        The :data:`SYNTH_TOP` row whose head dimension ``D``, lanes ``L`` and MACs per lane
        ``M`` equal the design's (``buffers.max_head_dim``, ``datapath.lanes``,
        ``datapath.macs_per_lane``); None for the TeLLMe-v2 engine (no RTL of ours) or a
        configuration that was not synthesized.
    """
    if cfg.engine != "delta_vector":
        return None
    want = {
        "D": cfg.buffers.max_head_dim,
        "L": cfg.datapath.lanes,
        "M": cfg.datapath.macs_per_lane,
    }
    for row in rows:
        if row["top"] != SYNTH_TOP:
            continue
        p = _params(row)
        if all(p.get(k) == v for k, v in want.items()):
            return row
    return None


def _yosys_use(row: Mapping[str, str]) -> dict[str, float]:
    from .synthesis import kv260_use

    return kv260_use(row)


def _modelled_source(cfg: Any, label: str) -> str:
    if cfg.engine == "tellme_v2":
        key = {"DSP48E2": "tellme.dsps", "BRAM36": "tellme.bram36"}[label]
        return f"configured {key}: {cfg.sources.get(key, '[OURS] estimate')}"
    rm = cfg.resource_model
    what = {
        "LUT": "MAC, priority-encoder, softmax and normaliser LUTs per unit with [SYNTH] "
        "coefficients from rtl/synth/deltallm_kv260.csv, LUTRAM buffers ([UG574]) and "
        f"[OURS] {rm.system_luts:,} LUTs of system logic (AXI/DMA, host interface) that the "
        "RTL does not contain",
        "FF": "the RTL's registers per unit ([SYNTH] coefficients) and "
        f"[OURS] {rm.system_ffs:,} flip-flops of system logic",
        "DSP48E2": "the RTL's product widths split into 27 x 18 tiles ([UG579]): MAC array, "
        "output rescale, softmax, normaliser",
        "BRAM36": "the buffers' geometries in the cheapest RAMB18/RAMB36 shapes ([UG573]); "
        "buffer sizes and memory mapping [OURS]",
        "URAM288": "the Δ and V buffers in 4K x 72 URAM288 ([UG573]); sizes [OURS]",
    }[label]
    return f"coaccel.sim.deltallm_fpga.estimate_resources (docs/deltallm_fpga.md §4): {what}"


def _count(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def _share(v: float, total: float) -> float:
    return 100.0 * v / total if total else math.nan


_RESOURCE_COLUMNS = (
    "design",
    "resource",
    "device total",
    "modelled",
    "modelled (% of device)",
    "Yosys on our RTL",
    "Yosys (% of device)",
)
"""Columns of the resource table, one row per design and resource."""


def _modelled_cells(
    cfg: Any, label: str, modelled: float, total: float
) -> tuple[list[str], list[Figure]]:
    """The modelled count of one resource: its table cells and figures.

    Args:
        cfg: the design. label: the resource (:data:`RESOURCES`).
        modelled: its modelled count. total: the device's total of it.

    Returns:
        ``(cells, figures)``: the modelled count and its share of the device (%).
    """
    figures = [
        Figure(
            cfg.name,
            "resource_modelled",
            label,
            modelled,
            label,
            math.nan,
            _modelled_source(cfg, label),
        ),
        Figure(
            cfg.name,
            "resource_share_modelled",
            label,
            _share(modelled, total),
            "%",
            math.nan,
            f"[DERIVED] modelled / device total ({label})",
        ),
    ]
    return [_count(modelled), f"{_share(modelled, total):.1f}"], figures


def _yosys_cells(
    cfg: Any, label: str, n: float, total: float, row: Mapping[str, str], where: str
) -> tuple[list[str], list[Figure]]:
    """The Yosys count of one resource of our RTL: its table cells and figures.

    Args:
        cfg: the design. label: the resource (:data:`RESOURCES`).
        n: its Yosys count. total: the device's total of it.
        row: the design's synthesis row (:func:`synthesis_row`). where: the table it was read
            from.

    Returns:
        ``(cells, figures)``: the count and its share of the device (%).
    """
    src = (
        f"[SYNTH] {where}: {row['top']} {row['params']}, {row['yosys_version']} "
        "synth_xilinx -family xcup -abc9 cell counts (not Vivado)"
    )
    if label == "LUT":
        src += (
            f"; logic {_count(float(row['fpga_luts']))} + LUTRAM "
            f"{_count(float(row['fpga_lutram_luts']))} LUTs"
        )
    figures = [
        Figure(cfg.name, "resource_yosys", label, n, label, math.nan, src),
        Figure(
            cfg.name,
            "resource_share_yosys",
            label,
            _share(n, total),
            "%",
            math.nan,
            f"[DERIVED] Yosys count / device total ({label})",
        ),
    ]
    return [_count(n), f"{_share(n, total):.1f}"], figures


def _design_resources(
    cfg: Any, row: Mapping[str, str] | None, where: str
) -> tuple[list[tuple[str, ...]], list[Figure]]:
    """Device total, modelled and Yosys counts of every resource of one design.

    Args:
        cfg: the design (:class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`).
        row: its synthesis row (:func:`synthesis_row`; None: not synthesized or no RTL).
        where: the synthesis table the row was read from.

    Returns:
        ``(rows, figures)``: one table row per resource (:data:`_RESOURCE_COLUMNS`) and the
        figures, per resource the device total, then modelled, then Yosys.
    """
    mod = estimate_resources(cfg)
    use = _yosys_use(row) if row is not None else None
    tellme = cfg.engine == "tellme_v2"
    limits_src = cfg.sources.get("limits", "device resources of the configuration")
    figures: list[Figure] = []
    table: list[tuple[str, ...]] = []
    for label, attr, col in RESOURCES:
        total = float(getattr(cfg.limits, attr))
        figures.append(
            Figure(
                cfg.name,
                "resource_device",
                label,
                total,
                label,
                0.0,
                f"limits.{attr}: {limits_src}",
            )
        )
        modelled: float | None = float(getattr(mod, attr))
        if tellme and label not in ("DSP48E2", "BRAM36"):
            modelled = None  # the baseline's model estimates DSP and BRAM only
        cells = [cfg.name, label, _count(total)]
        if modelled is None:
            cells += ["not estimated", ""]
        else:
            more, figs = _modelled_cells(cfg, label, modelled, total)
            cells += more
            figures += figs
        if use is None or row is None:
            cells += ["no RTL of ours" if tellme else "not synthesized", ""]
        else:
            more, figs = _yosys_cells(cfg, label, use[col], total, row, where)
            cells += more
            figures += figs
        table.append(tuple(cells))
    return table, figures


def _resource_paragraphs(
    archs: Sequence[Any],
    rows: Sequence[Mapping[str, str]],
    where: str,
    versions: set[str],
    synthesized: Sequence[str],
) -> list[str]:
    """The resource section's text: device totals, the model, the Yosys rows and their band.

    Args:
        archs: the designs. rows: the synthesis table's rows (empty: not available).
        where: the table read, or why it is not available.
        versions: the Yosys versions of the designs' rows.
        synthesized: one ``"<design>: <top> <params>"`` per design with a row.

    Returns:
        The paragraphs.
    """
    paras = [
        "Device totals are the configuration's limits: the KV260's XCK26 has 117,120 LUTs, "
        "234,240 flip-flops, 1,248 DSP48E2, 144 BRAM36 and 64 URAM288 ([DS987] K26 resource "
        "table; flip-flops [DERIVED] 2 per LUT, [UG574]).",
        "Modelled: coaccel.sim.deltallm_fpga.estimate_resources, the whole vector processor "
        "(its units with coefficients taken from the Yosys rows of our RTL, its buffers mapped "
        "to BRAM/URAM/LUTRAM, and [OURS] system logic for AXI/DMA and the host interface).",
    ]
    if rows:
        paras.append(
            "Yosys on our RTL: "
            + ", ".join(sorted(versions) or ["Yosys 0.23"])
            + f" `synth_xilinx -family xcup -abc9` on rtl/deltallm/ ({where}, [SYNTH]); "
            + (("rows: " + "; ".join(synthesized) + ". ") if synthesized else "")
            + "The synthesized top is the attention datapath only: no AXI/DMA or host "
            "interface, and its Δ, V and q buffers are the testbench's memory model (no "
            "BRAM/URAM), so it sits below the modelled processor by construction. LUT = logic "
            f"LUTs + LUTs of the LUTRAM cells. These are {_YOSYS_BAND}."
        )
    else:
        paras.append(f"Yosys on our RTL: {where}; modelled figures only.")
    if any(c.engine == "tellme_v2" for c in archs):
        paras.append(
            "TeLLMe-v2 has no RTL of ours, so there is no Yosys column for it; its DSP48E2 and "
            "BRAM36 figures are our unverified estimates of its attention engine (the "
            "configuration's sources) and its other resources are not estimated."
        )
    return paras


def _resources(
    archs: Sequence[Any], rows: Sequence[Mapping[str, str]], where: str
) -> tuple[Section, list[Figure]]:
    """The resource utilization section and its figures.

    Args:
        archs: the designs.
        rows: the synthesis table's rows (:func:`read_synthesis_rows`; empty: not available).
        where: the table read, or why it is not available.

    Returns:
        ``(section, figures)``: the section (text and one table) and every design's resource
        figures, design by design.
    """
    figures: list[Figure] = []
    table: list[tuple[str, ...]] = []
    versions: set[str] = set()
    synthesized: list[str] = []
    for cfg in archs:
        row = synthesis_row(cfg, rows)
        if row is not None:
            versions.add(row["yosys_version"])
            synthesized.append(f"{cfg.name}: {row['top']} {row['params'].replace(';', ', ')}")
        design_rows, design_figures = _design_resources(cfg, row, where)
        table += design_rows
        figures += design_figures
    section = Section(
        "Resource utilization (KV260, XCK26)",
        tuple(_resource_paragraphs(archs, rows, where, versions, synthesized)),
        tables=(Table(_RESOURCE_COLUMNS, tuple(table)),),
    )
    return section, figures


# ---------------------------------------------------------------------------------------------
# Power and energy


@dataclass(frozen=True)
class EnergyScope:
    """Energy of one scope of a prefill run, static plus dynamic.

    Attributes:
        name: ``"attention"`` (the attention engine's run) or ``"prefill"`` (the whole TTFT).
        seconds: run time of the scope, s.
        static_j: board idle power x ``seconds``, J. static_sigma_j: its one sigma, J.
        dynamic_j: dynamic energy, J; None where it is not modelled.
        dynamic_sigma_j: its one sigma, J (0 where not modelled).
        total_j: ``static_j + dynamic_j`` (``static_j`` alone where dynamic is not modelled).
        total_sigma_j: one sigma of the total (static and dynamic independent), J.
        tokens: prefill tokens.
        lower_bound: True when part of the scope's dynamic energy is not modelled.
    """

    name: str
    seconds: float
    static_j: float
    static_sigma_j: float
    dynamic_j: float | None
    dynamic_sigma_j: float
    total_j: float
    total_sigma_j: float
    tokens: int
    lower_bound: bool

    @property
    def power_w(self) -> float:
        """Average power, W: total energy / run time."""
        return self.total_j / self.seconds

    @property
    def power_sigma_w(self) -> float:
        """One sigma of :attr:`power_w`, W (the simulated time taken as exact)."""
        return self.total_sigma_j / self.seconds

    @property
    def energy_per_token_j(self) -> float:
        """Energy per prefill token, J/token: total energy / tokens."""
        return self.total_j / self.tokens

    @property
    def energy_per_token_sigma_j(self) -> float:
        """One sigma of :attr:`energy_per_token_j`, J/token."""
        return self.total_sigma_j / self.tokens


def _scope(
    name: str,
    seconds: float,
    static_w: float,
    static_rel: float,
    dyn: float | None,
    dyn_sigma: float,
    tokens: int,
    lower_bound: bool,
) -> EnergyScope:
    static = static_w * seconds
    static_sigma = static * static_rel
    total = static if dyn is None else static + dyn
    return EnergyScope(
        name=name,
        seconds=seconds,
        static_j=static,
        static_sigma_j=static_sigma,
        dynamic_j=dyn,
        dynamic_sigma_j=dyn_sigma if dyn is not None else 0.0,
        total_j=total,
        total_sigma_j=math.hypot(static_sigma, dyn_sigma if dyn is not None else 0.0),
        tokens=tokens,
        lower_bound=lower_bound,
    )


@dataclass(frozen=True)
class PrefillEnergy:
    """Power and energy of one prefill run of a DeltaLLM FPGA design.

    Attributes:
        arch: design name. workload: ``"<model>:<scenario>"``. mode: simulator mode.
        tokens: prefill tokens T.
        static_w: the board's idle power, W. static_sigma_w: its one sigma, W.
        static_source: where it comes from.
        components_j: dynamic energy per cost-model component, J (empty: not modelled).
        components_sigma_j: their one sigma, J. component_sources: their sources.
        attention: the attention engine's scope (:class:`EnergyScope`).
        prefill: the whole prefill (TTFT); its dynamic energy is the attention engine's only.
    """

    arch: str
    workload: str
    mode: str
    tokens: int
    static_w: float
    static_sigma_w: float
    static_source: str
    components_j: Mapping[str, float]
    components_sigma_j: Mapping[str, float]
    component_sources: Mapping[str, str]
    attention: EnergyScope
    prefill: EnergyScope


def prefill_energy(cfg: Any, result: Any, breakdown: Any = None) -> PrefillEnergy:
    """Static and dynamic energy of a simulated prefill, per scope.

    Static: the KV260 board's idle power (``kv260_idle_w`` of :data:`BOARD_TABLE`) x the
    scope's run time. Dynamic: the cost model's components (:func:`coaccel.cost.evaluate`)
    except the static ones (``fpga_static``, ``leakage``), which the board's idle power
    contains. The dynamic energy covers the attention engine and its DDR traffic; the linear
    layers' is not modelled, so the whole-prefill scope is a lower bound. The TeLLMe-v2 engine
    has no activity model: its dynamic energy is not modelled at all (None).

    Args:
        cfg: the design (:class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`).
        result: its prefill simulation (:class:`~coaccel.sim.deltallm_fpga.DeltaFpgaResult`).
        breakdown: ``coaccel.cost.evaluate(result, cfg)`` (computed when None).

    Returns:
        The :class:`PrefillEnergy`.
    """
    board = shipped_table(BOARD_TABLE)["kv260_idle_w"]
    cb = breakdown if breakdown is not None else evaluate(result, cfg)
    modelled = cfg.engine == "delta_vector"
    comps = {}
    if modelled:
        comps = {k: v for k, v in cb.energy_j.items() if k not in _STATIC_COMPONENTS}
    sig = {k: cb.energy_sigma_j[k] for k in comps}
    srcs = {k: cb.sources[k] for k in comps}
    dyn = float(sum(comps.values())) if modelled else None
    dyn_sigma = math.sqrt(sum(s * s for s in sig.values()))
    f_hz = cfg.freq_mhz * 1e6
    t_att = result.attention_cycles / f_hz
    t_pre = result.seconds
    tokens = int(result.tokens)
    return PrefillEnergy(
        arch=cfg.name,
        workload=result.workload,
        mode=result.mode,
        tokens=tokens,
        static_w=board.value,
        static_sigma_w=board.value * board.uncertainty,
        static_source=f"{board.source} (kv260_idle_w, arch_configs/cost/{BOARD_TABLE})",
        components_j=FrozenMap(comps),
        components_sigma_j=FrozenMap(sig),
        component_sources=FrozenMap(srcs),
        attention=_scope(
            "attention",
            t_att,
            board.value,
            board.uncertainty,
            dyn,
            dyn_sigma,
            tokens,
            lower_bound=not modelled,
        ),
        prefill=_scope(
            "prefill",
            t_pre,
            board.value,
            board.uncertainty,
            dyn,
            dyn_sigma,
            tokens,
            lower_bound=True,
        ),
    )


def _time_source(cfg: Any, e: PrefillEnergy, s: EnergyScope) -> str:
    """Where a scope's run time comes from (the attention engine's, or the whole TTFT)."""
    if s.name == "attention":
        return (
            f"simulated ({e.mode} mode): attention cycles / {cfg.freq_mhz:g} MHz; the "
            "simulator's own error is not propagated"
        )
    return (
        f"simulated ({e.mode} mode): TTFT, attention + linear-layer cycles / "
        f"{cfg.freq_mhz:g} MHz (linear layers: "
        f"{cfg.sources.get('linear.ternary_macs_per_cycle', 'the TLMM engine model')})"
    )


def _scope_figures(cfg: Any, e: PrefillEnergy, s: EnergyScope) -> list[Figure]:
    """Figures of one scope of a prefill run.

    Args:
        cfg: the design. e: the run's energy. s: the scope (``e.attention`` or ``e.prefill``).

    Returns:
        Run time (s), static energy (J), dynamic energy (J, where modelled), total energy (J),
        average power (W) and energy per prefill token (J/token).
    """
    w = e.workload
    out = [
        Figure(e.arch, "time", s.name, s.seconds, "s", math.nan, _time_source(cfg, e, s), w),
        Figure(
            e.arch,
            "energy",
            f"{s.name}.static",
            s.static_j,
            "J",
            s.static_sigma_j,
            f"board idle power x {s.name} time: {e.static_source}",
            w,
        ),
    ]
    if s.dynamic_j is not None:
        d_src = (
            "sum of the attention.dynamic.* components (coaccel.cost.evaluate; "
            "arch_configs/cost/fpga_ultrascale_plus.yaml, the DDR4 figure of the "
            "configuration); the PL static power of that table is part of the board's "
            "idle power and not added"
        )
        if s.name == "prefill":
            d_src += "; the linear layers' dynamic energy is not modelled"
        out.append(
            Figure(
                e.arch, "energy", f"{s.name}.dynamic", s.dynamic_j, "J", s.dynamic_sigma_j, d_src, w
            )
        )
        total_src = "static + dynamic"
    else:
        total_src = (
            "static only: the TeLLMe-v2 engine has no activity model, its dynamic energy "
            "is not modelled"
        )
    if s.lower_bound:
        total_src += " (a lower bound)"
    out += [
        Figure(e.arch, "energy", f"{s.name}.total", s.total_j, "J", s.total_sigma_j, total_src, w),
        Figure(
            e.arch,
            "power",
            f"{s.name}.average",
            s.power_w,
            "W",
            s.power_sigma_w,
            f"[DERIVED] {s.name} total energy / {s.name} time",
            w,
        ),
        Figure(
            e.arch,
            "energy_per_token",
            s.name,
            s.energy_per_token_j,
            "J/token",
            s.energy_per_token_sigma_j,
            f"[DERIVED] {s.name} total energy / {e.tokens} prefill tokens",
            w,
        ),
    ]
    return out


def _energy_figures(cfg: Any, e: PrefillEnergy) -> list[Figure]:
    """Every figure of one prefill run: tokens, static power, dynamic components, scopes.

    Args:
        cfg: the design. e: the run's energy (:func:`prefill_energy`).

    Returns:
        The prefill tokens, the static power (W), each dynamic component's energy (J), then
        the attention scope's and the whole prefill's figures (:func:`_scope_figures`).
    """
    w = e.workload
    out = [
        Figure(
            e.arch,
            "tokens",
            "prefill",
            float(e.tokens),
            "token",
            0.0,
            f"the workload's prefill length ({w})",
            w,
        ),
        Figure(e.arch, "power", "static", e.static_w, "W", e.static_sigma_w, e.static_source, w),
    ]
    for name, j in e.components_j.items():
        out.append(
            Figure(
                e.arch,
                "energy",
                f"attention.dynamic.{name}",
                j,
                "J",
                e.components_sigma_j[name],
                e.component_sources[name],
                w,
            )
        )
    for s in (e.attention, e.prefill):
        out += _scope_figures(cfg, e, s)
    return out


def _pm(v: float | None, s: float, scale: float = 1.0) -> str:
    if v is None:
        return "not modelled"
    return f"{v * scale:.4g} ± {s * scale:.2g}"


def _energy_section(energies: Sequence[PrefillEnergy]) -> Section:
    rows: list[tuple[str, ...]] = []
    comp_rows: list[tuple[str, ...]] = []
    for e in energies:
        for s in (e.attention, e.prefill):
            label = "attention engine" if s.name == "attention" else "whole prefill (TTFT)"
            if s.lower_bound:
                label += ", lower bound"
            rows.append(
                (
                    e.arch,
                    e.workload,
                    label,
                    f"{s.seconds:.4g}",
                    _pm(s.static_j, s.static_sigma_j),
                    _pm(s.dynamic_j, s.dynamic_sigma_j),
                    _pm(s.total_j, s.total_sigma_j),
                    _pm(s.power_w, s.power_sigma_w),
                    _pm(s.energy_per_token_j, s.energy_per_token_sigma_j, 1e3),
                )
            )
        for name, j in e.components_j.items():
            comp_rows.append(
                (
                    e.arch,
                    e.workload,
                    name,
                    _pm(j, e.components_sigma_j[name], 1e3),
                    " ".join(e.component_sources[name].split()),
                )
            )
    board = shipped_table(BOARD_TABLE)["kv260_idle_w"]
    paras = (
        "Power model: P = P_static + P_dynamic. P_static is the KV260 starter kit's idle power "
        f"at its 12 V input, {board.value:g} W ± {100 * board.uncertainty:.0f} % "
        "([SIMFERO-KV260]; the SOM with its processing system, the carrier card, the fan and "
        "the power conversion), charged for the whole run time. The dynamic energy is the cost "
        "model's (coaccel.cost.evaluate): DSP48E2 operations, BRAM/URAM bytes read and "
        "LUT/FF-cycles of the attention engine at the per-operation energies of "
        "arch_configs/cost/fpga_ultrascale_plus.yaml, and the DDR4 bytes at the "
        "configuration's DDR4 figure; these are [OURS] order-of-magnitude estimates "
        "(uncertainty 50-100 %), no XPE run ([UG440]) or board measurement of this design. The "
        "programmable logic's static power of that table (fpga_static) is part of the board's "
        "idle power and is not added a second time.",
        "Scopes: 'attention engine' is the attention's run time, the part of the prefill the "
        "cost model prices; 'whole prefill (TTFT)' adds the linear layers' time at the board's "
        "idle power only, because the TLMM engine's dynamic energy is not modelled: a lower "
        "bound. Energy per token is the scope's total energy over the prefill tokens. For "
        "TeLLMe-v2 no activity model exists: its figures are the static term alone (lower "
        "bounds). For scale: the same article attributes 0.98 W to a DPU running on the board "
        "([SIMFERO-KV260]).",
        "Uncertainties are one sigma: the static term's from the board measurement ([OURS] "
        "10 %: one board, one setup), each dynamic component's from the cost table; components "
        "are taken as independent. Simulated run times carry no stated uncertainty (the "
        "simulator's own error is not propagated).",
    )
    return Section(
        "Power and energy per token (prefill)",
        paras,
        tables=(
            Table(
                (
                    "design",
                    "workload",
                    "scope",
                    "run time (s)",
                    "static (J)",
                    "dynamic (J)",
                    "total (J)",
                    "average power (W)",
                    "energy per token (mJ/token)",
                ),
                tuple(rows),
            ),
            Table(
                ("design", "workload", "dynamic component", "energy (mJ)", "source"),
                tuple(comp_rows),
            ),
        ),
    )


# ---------------------------------------------------------------------------------------------
# The part


def _workload_specs(settings: ReportSettings) -> list[str]:
    from coaccel.targets.deltallm_fpga import TARGET

    role = TARGET.report
    names = list(settings.workloads) or list(role.default_workloads if role else ())
    scenario = settings.scenario or (role.default_scenario if role else None)
    out = []
    for w in names:
        if ":" in w or w.endswith((".yaml", ".yml")) or scenario is None:
            out.append(w)
        else:
            out.append(f"{w}:{scenario}")
    return out


def report_part(archs: Sequence[Any], settings: ReportSettings) -> ReportPart:
    """Resources, power and energy per token of DeltaLLM FPGA designs (module docstring).

    Args:
        archs: loaded ``deltallm_fpga`` configurations (``kv260``, ``tellme_v2``, or files of
            that kind).
        settings: what the report asks for: workloads (model names; default the target's
            ``llama-3.2-1b``) and scenario (default ``prefill_256``), simulator mode, area only
            (resources without a run).

    Returns:
        The :class:`~coaccel.report.document.ReportPart`: a resource section and, unless
        ``settings.area_only``, a power/energy section; every number also as a
        :class:`~coaccel.report.document.Figure` (unit, one sigma where one is stated, source).
    """
    archs = list(archs)
    rows, where = read_synthesis_rows()
    res_section, figures = _resources(archs, rows, where)
    sections = [res_section]
    notes = ["Resources: modelled and, for designs we have RTL of, Yosys 0.23 on our RTL."]
    if not settings.area_only:
        energies: list[PrefillEnergy] = []
        specs = _workload_specs(settings)
        for cfg in archs:
            for spec in specs:
                result = simulate(cfg, spec, mode=settings.mode)
                e = prefill_energy(cfg, result)
                energies.append(e)
                figures += _energy_figures(cfg, e)
        sections.append(_energy_section(energies))
        notes.append(
            f"Energy: prefill of {', '.join(specs)}, simulator mode {settings.mode}; static "
            "term = the KV260 board's measured idle power, dynamic = the cost model's "
            "attention-engine components."
        )
    else:
        notes.append("Area only: resources without a workload run.")
    return ReportPart(
        kind=KIND,
        title="DeltaLLM on the KV260: resources, power and energy per token",
        notes=tuple(notes),
        sections=tuple(sections),
        figures=tuple(figures),
    )
