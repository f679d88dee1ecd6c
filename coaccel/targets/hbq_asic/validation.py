"""``coaccel validate hbq``: our cost model and simulator against the HBQ paper's numbers.

Pure computation (no printing, no files): :func:`validate_hbq` returns a :class:`Validation`
whose :class:`Target` rows hold our value, the paper's value, the error and a note saying how our
value was obtained and, where we differ, why. :mod:`coaccel.targets.hbq_asic.report` writes it as
CSV and Markdown. Targets (keys of ``docs/references.md``):

* ``pe_area`` / ``pe_energy``: per-MAC area and energy of every published PE row ([R-BQ] baseline
  sweep rows, [R-PE] HBQ μB sweep, [R-BQ] L1-only reference, [R-PM] PE energies, [R-README] area
  column), ±5 %. Each row also shows the leave-one-out prediction (the model refitted without that
  point), so the table tells fit from prediction.
* ``claim``: HBQ-E vs HBQ-A hardware cost (−17 %), area efficiency vs weight-only (2.3×),
  energy efficiency vs weight-only (4.6×, whose baseline figure the sources do not give).
* ``system_energy``: J per 2048-token prefill, five models × five architectures ([R-PM]),
  ±10 %, with DRAM traffic counted from the simulated traces.
* ``speedup``: iso-area speedup vs Amove at 1K / 4K / 16K tokens, geometric mean over the five
  models ([R-PM]), from simulated cycles and PE area per MAC.
* ``synthesis``: the PE model's area ratios along the activation-width and μB sweeps vs our own
  RTL's Yosys transistor ratios (``rtl/synth/hbq_area.csv``, when present).

The published figures (claims, README areas, the recomputed system energies and speedups) come
from ``arch_configs/validation/hbq.yaml`` (:func:`published_figure`); the PE rows' figures from
the PE model's calibration files.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from coaccel.cost import CostBreakdown, PeFormat, evaluate, pe_cost, pe_model, shipped_table
from coaccel.targets.hbq_asic._rpm import (
    RPM_PARAMS,
    RPM_TERMS,
    rpm_energy,
    rpm_energy_j,
    rpm_energy_sigma_j,
    rpm_macs,
    sim_dram_terms,
)
from coaccel.validate.pe import loo_of, pe_targets
from coaccel.validate.published import PublishedFigure, load_published
from coaccel.validate.targets import FIT_ROLES, Target, Validation

__all__ = [
    "ARCHS",
    "FIT_ROLES",
    "MODELS",
    "PUBLISHED",
    "RPM_PARAMS",
    "SPEEDUP_SEQS",
    "Target",
    "Validation",
    "claim_targets",
    "pe_targets",
    "published_figure",
    "rpm_energy",
    "rpm_macs",
    "sim_dram_terms",
    "nvfp_w4a8_variant",
    "speedup_targets",
    "synthesis_targets",
    "system_energy_targets",
    "validate_hbq",
]

MODELS = ("llama-2-7b", "llama-3-8b", "llama-3.2-3b", "qwen2.5-3b", "qwen2.5-7b")
"""The five models of [R-PM] ``src/perf_model.py`` (``arch_configs/workloads/``)."""

ARCHS = ("amove_28nm", "mxfp_w4a8_28nm", "nvfp4_28nm", "hbq_a_28nm", "hbq_e_28nm")
"""The five architectures of [R-PM], in the paper's column order (Amove, MXFP, NVFP4, HBQ-A,
HBQ-E)."""

_ARCH_LABEL = {
    "amove_28nm": "Amove",
    "mxfp_w4a8_28nm": "MXFP",
    "nvfp4_28nm": "NVFP4",
    "hbq_a_28nm": "HBQ-A",
    "hbq_e_28nm": "HBQ-E",
}

SPEEDUP_SEQS = (1024, 4096, 16384)
"""Sequence lengths of the [R-PM] iso-area speedups ([HBQ] Fig 18)."""

PUBLISHED = "hbq"
"""Name of the published-figure file (``arch_configs/validation/hbq.yaml``): the claims
(``claim.*``), the README's PE areas (``readme_area.*``) and, recomputed with [R-PM], the J per
2048-token prefill (``system_energy.<model>.<arch>``), the Llama-2-7B HBQ-E breakdown
(``breakdown.llama-2-7b.hbq_e_28nm.<dram|core|sram>``) and the iso-area speedups vs Amove
(``speedup.<arch>.<tokens>_tokens``, geometric mean over the five models)."""


def published_figure(key: str) -> PublishedFigure:
    """One published figure of the HBQ validation (:data:`PUBLISHED`).

    Args:
        key: the figure's name in ``arch_configs/validation/hbq.yaml``.

    Returns:
        The figure (value, unit, source, note).

    Raises:
        KeyError: no such figure.
    """
    return load_published(PUBLISHED)[key]


# ---------------------------------------------------------------------------------------------
# Claims


_HBQ_E_AREA = "HBQ W4A5 B128 ub32 area"
_HBQ_A_AREA = "HBQ W4A5 B128 ub8 area"
_HBQ_E_ENERGY = "HBQ-E PE energy"
"""Calibration points (``pe_calibration_28nm.yaml`` labels) the claims are computed from."""


def claim_targets() -> list[Target]:
    """The abstract's hardware claims ([HBQ] abstract): −17 %, 2.3×, 4.6×.

    Returns:
        The ``claim`` targets.
    """
    hbq_e = pe_cost("e2m1", "e2m2", 128, "e5m3", ub=32)
    hbq_a = pe_cost("e2m1", "e2m2", 128, "e5m3", ub=8)
    # The claims are ratios of published points the PE model was fitted on: their
    # leave-one-out value takes each point's leave-one-out prediction instead.
    e_area_loo, a_area_loo = loo_of(_HBQ_E_AREA), loo_of(_HBQ_A_AREA)
    e_energy_loo = loo_of(_HBQ_E_ENERGY)
    t = shipped_table("system_28nm.yaml")
    woq_area = t["woq_area_um2_per_mac"]
    woq_e = t["woq_energy_fj_per_mac"]
    woq_model = pe_cost("e2m1", "fp16", 128, "e5m3")
    cost_claim = published_figure("claim.hbq_e_vs_hbq_a_area")
    area_claim = published_figure("claim.area_efficiency_vs_woq")
    energy_claim = published_figure("claim.energy_efficiency_vs_woq")
    red = 100.0 * (hbq_e.area_um2_per_mac / hbq_a.area_um2_per_mac - 1.0)
    red_sigma = (
        100.0
        * hbq_e.area_um2_per_mac
        / hbq_a.area_um2_per_mac
        * math.hypot(hbq_e.area_uncertainty_pct / 100, hbq_a.area_uncertainty_pct / 100)
    )
    out = [
        Target(
            "claim",
            "HBQ-E vs HBQ-A hardware cost (area per MAC)",
            red,
            cost_claim.value,
            cost_claim.unit,
            10.0,
            cost_claim.source,
            "PE model, μB 32 vs 8; the paper's -17 % uses the rounded 72/87, the TSV "
            "values 72.27/86.60 give -16.5 %. Error = relative error of the percentage "
            "(tolerance ±10 %, i.e. ±1.7 points: the two published readings differ by 0.7). "
            "Fitted: both areas are PE model calibration points; ours_loo uses each one's "
            "leave-one-out prediction",
            red_sigma,
            ours_loo=100.0 * (e_area_loo / a_area_loo - 1.0),
            fit="fitted",
        ),
        Target(
            "claim",
            "Area efficiency vs weight-only (AxCore 200 um2/MAC / HBQ-A)",
            woq_area.value / hbq_a.area_um2_per_mac,
            area_claim.value,
            area_claim.unit,
            5.0,
            area_claim.source,
            f"published AxCore area ({woq_area.source.split(':')[0]}) over our HBQ-A PE area. "
            "Fitted: the HBQ-A area is a PE model calibration point; ours_loo uses its "
            "leave-one-out prediction",
            woq_area.value / hbq_a.area_um2_per_mac * hbq_a.area_uncertainty_pct / 100,
            ours_loo=woq_area.value / a_area_loo,
            fit="fitted",
        ),
        Target(
            "claim",
            "Energy efficiency vs weight-only, paper's WoQ figure",
            math.nan,
            energy_claim.value,
            energy_claim.unit,
            None,
            f"{energy_claim.source}; the underlying WoQ energy is not in the repo",
            "The baseline figure is missing: the 4.6x implies ~401 fJ/MAC against HBQ-E "
            "(87.2 fJ) or ~615 fJ against HBQ-A; the rows below show what the available "
            "figures give",
            fit="fitted",
        ),
        Target(
            "claim",
            "Energy efficiency vs weight-only (Fig 6 WoQ 280 fJ/MAC / HBQ-E)",
            woq_e.value / hbq_e.energy_fj_per_mac,
            energy_claim.value,
            energy_claim.unit,
            None,
            f"{energy_claim.source} and [R-SCR] script/plot_fig6.py (280 fJ/MAC)",
            "differs because the paper's WoQ energy baseline is not the Fig 6 plot value; "
            "with 280 fJ the gain is ~3.2x. Fitted: the HBQ-E energy is a PE model calibration "
            "point; ours_loo uses its leave-one-out prediction",
            woq_e.value
            / hbq_e.energy_fj_per_mac
            * math.hypot(woq_e.uncertainty, hbq_e.energy_uncertainty_pct / 100),
            ours_loo=woq_e.value / e_energy_loo,
            fit="fitted",
        ),
        Target(
            "claim",
            "Energy efficiency vs weight-only (our model's E2M1 x FP16 PE / HBQ-E)",
            woq_model.energy_fj_per_mac / hbq_e.energy_fj_per_mac,
            energy_claim.value,
            energy_claim.unit,
            None,
            energy_claim.source,
            "the PE model's prediction for a W4A16 (E2M1 x FP16, B128) block PE, far outside "
            f"its calibrated domain (±{woq_model.energy_uncertainty_pct:.0f} %); AxCore's "
            "approximate FP arithmetic is not modelled. Fitted: the HBQ-E energy is a PE model "
            "calibration point; ours_loo uses its leave-one-out prediction",
            woq_model.energy_fj_per_mac
            / hbq_e.energy_fj_per_mac
            * math.hypot(woq_model.energy_uncertainty_pct, hbq_e.energy_uncertainty_pct)
            / 100,
            ours_loo=woq_model.energy_fj_per_mac / e_energy_loo,
            fit="fitted",
        ),
    ]
    return out


# ---------------------------------------------------------------------------------------------
# System energy and speedups (simulated)


Simulate = Callable[[Any, str, str], Any]
"""``(arch, "<model>:<scenario>", mode) -> HbqSimStats``; ``arch`` is a loaded
``HbqArchConfig``."""


def _default_simulate(arch: Any, workload: str, mode: str) -> Any:
    from coaccel.sim.hbq_asic import simulate

    return simulate(arch, workload, mode=mode)  # type: ignore[arg-type]


def nvfp_w4a8_variant(arch: Any) -> Any:
    """The NVFP W4A8 design the paper's iso-area model calls "NVFP" ([R-PM]: 130.2 um2/MAC,
    8.5-bit attention operands): ``nvfp4_28nm`` with E2M5 activations and KV cache (8 bits +
    an E5M3 scale per 16) and 8-bit activation multipliers.

    Args:
        arch: the loaded ``nvfp4_28nm`` architecture.

    Returns:
        The variant (validated by :func:`coaccel.config.override`).
    """
    from coaccel.spine.config import override

    return override(
        arch,
        {
            "name": "nvfp_w4a8_28nm",
            "description": "NVFP W4A8 (E2M1 x E2M5, E5M3 scale per 16): the [R-PM] NVFP",
            "formats.activation.format": "nvfp_e2m5",
            "formats.activation.element_bits": 8,
            "formats.kv.format": "nvfp_e2m5",
            "formats.kv.element_bits": 8,
            "pe_array.native_act_bits": 8,
            # one 128-element block per cycle: 128 x 8 b elements + 8 E5M3 scales of 8 b,
            # over the 4 banks
            "buffers.act.bank_width_bits": (128 * 8 + 8 * 8) // 4,
        },
    )


def system_energy_targets(
    mode: str = "analytical",
    simulate: Simulate | None = None,
    models: Sequence[str] = MODELS,
    archs: Sequence[str] = ARCHS,
) -> tuple[list[Target], dict[tuple[str, str], CostBreakdown]]:
    """J per 2048-token prefill, our simulated value vs [R-PM] (±10 %).

    Ours = PE array + ACT + PSUM SRAM + DRAM of :func:`coaccel.cost.evaluate` on the simulated
    statistics (DRAM bytes counted from the simulated traces): the components [R-PM] counts.
    The note splits the difference into core, SRAM and DRAM against the restated [R-PM] model
    (:func:`~coaccel.targets.hbq_asic._rpm.rpm_energy`), and the DRAM part term by term
    (:func:`~coaccel.targets.hbq_asic._rpm.sim_dram_terms`). ``ours_as_paper`` leaves out the
    simulated DRAM traffic [R-PM] has no term for (the down projection's input re-reads, the LM
    head's activations). For Llama-2-7B on HBQ-E, info rows compare the [R-PM] example breakdown and
    each [R-PM] DRAM term.

    Args:
        mode: simulator mode (``"cycle"`` or ``"analytical"``).
        simulate: ``(arch, "<model>:<scenario>", mode) -> HbqSimStats`` (default: the HBQ ASIC
            simulator).
        models: models to run.
        archs: architectures to run.

    Returns:
        The targets and the cost breakdowns by ``(model, arch)``.
    """
    from coaccel.sim.hbq_asic import load_arch, load_workload

    sim = simulate or _default_simulate
    targets: list[Target] = []
    breakdowns: dict[tuple[str, str], CostBreakdown] = {}
    loaded = {a: load_arch(a) for a in archs}
    example: tuple[CostBreakdown, dict[str, int], dict[str, Any]] | None = None
    for model in models:
        shape = load_workload(f"{model}:prefill_2k").model
        for arch_name in archs:
            arch = loaded[arch_name]
            stats = sim(arch, f"{model}:prefill_2k", mode)
            cb = evaluate(stats, arch)
            breakdowns[(model, arch_name)] = cb
            paper = published_figure(f"system_energy.{model}.{arch_name}")
            rpm = rpm_energy(shape, arch_name, 2048)
            core = cb.energy_j["pe_array"]
            sram = cb.energy_j["act_buffer"] + cb.energy_j["psum_buffer"]
            dram = cb.energy_j["dram"]
            terms = sim_dram_terms(stats)
            total_bytes = stats.dram.total_bytes
            j_per_byte = dram / total_bytes if total_bytes else 0.0
            unmodelled = terms["down_proj_input"] + terms["lm_head_acts"]
            gaps = {
                "DRAM (simulated traffic vs the [R-PM] formula's)": dram - rpm["dram"],
                "SRAM (bits moved at the simulated buffers' depths vs [R-PM]'s fixed per-MAC "
                "figure)": sram - rpm["sram"],
                "core (PE model x simulated MACs vs [R-PM] J/MAC x formula MACs)": core
                - rpm["core"],
            }
            main_gap = max(gaps, key=lambda k: abs(gaps[k]))
            gb = ", ".join(
                f"{k} {terms[k] / 1e9:.2f} vs {rpm['dram_bytes'][k] / 1e9:.2f}" for k in RPM_TERMS
            )
            note = (
                f"largest gap: {main_gap} {gaps[main_gap]:+.3f} J. "
                f"core {core:.3f} vs [R-PM] {rpm['core']:.3f} J (MACs {stats.macs / 1e12:.3f}T "
                f"simulated vs {rpm['macs'] / 1e12:.3f}T formula); SRAM {sram:.3f} vs "
                f"{rpm['sram']:.3f} J; DRAM {dram:.3f} vs {rpm['dram']:.3f} J "
                f"({total_bytes / 1e9:.2f} vs {sum(rpm['dram_bytes'].values()) / 1e9:.2f} GB). "
                f"DRAM GB simulated vs [R-PM] by its terms: {gb}; with no [R-PM] term: "
                f"down_proj input re-reads {terms['down_proj_input'] / 1e9:.2f}, LM head "
                f"activations {terms['lm_head_acts'] / 1e9:.2f} "
                f"(= {unmodelled * j_per_byte:.3f} J, left out of ours_as_paper). Not in "
                f"[R-PM] nor in ours: partial-sum logic {cb.energy_j['psum_logic']:.3f} J "
                f"({arch.psum.mode} accumulate), leakage {cb.energy_j['leakage']:.3f} J"
            )
            targets.append(
                Target(
                    "system_energy",
                    f"{model} / {_ARCH_LABEL[arch_name]}: J per 2048-token prefill",
                    rpm_energy_j(cb),
                    paper.value,
                    paper.unit,
                    10.0,
                    paper.source,
                    note,
                    rpm_energy_sigma_j(cb),
                    ours_as_paper=rpm_energy_j(cb) - unmodelled * j_per_byte,
                )
            )
            if (model, arch_name) == ("llama-2-7b", "hbq_e_28nm"):
                example = (cb, terms, rpm)
    if example is not None:
        targets += _example_breakdown(*example)
    return targets, breakdowns


def _example_breakdown(
    cb: CostBreakdown, terms: Mapping[str, int], rpm: Mapping[str, Any]
) -> list[Target]:
    """Info rows: the [R-PM] Llama-2-7B HBQ-E breakdown and [R-PM]'s DRAM terms, ours vs paper."""
    why = {
        "dram": "DRAM bytes of the simulated traces x 32 pJ/B; the simulated tiles move more "
        "bytes than the [R-PM] formula (see the DRAM term rows)",
        "core": "PE model energy per MAC (87.2 fJ, a fit point) x simulated MACs (the "
        "simulator counts fewer attention MACs than the [R-PM] formula: causal key tiles "
        "after the query tile are skipped)",
        "sram": "ACT + PSUM bits moved (simulated) x SRAM energy per bit at the simulated "
        "buffers' bank depths: the ACT buffer holds 512-token tiles (256-row sub-arrays) where "
        "[R-PM]'s per-cycle figure is for the RTL's 128-row banks",
    }
    out = []
    for comp, ours, sig in (
        ("dram", cb.energy_j["dram"], cb.energy_sigma_j["dram"]),
        ("core", cb.energy_j["pe_array"], cb.energy_sigma_j["pe_array"]),
        (
            "sram",
            cb.energy_j["act_buffer"] + cb.energy_j["psum_buffer"],
            math.hypot(cb.energy_sigma_j["act_buffer"], cb.energy_sigma_j["psum_buffer"]),
        ),
    ):
        paper = published_figure(f"breakdown.llama-2-7b.hbq_e_28nm.{comp}")
        out.append(
            Target(
                "system_energy",
                f"llama-2-7b / HBQ-E breakdown: {comp}",
                ours,
                paper.value,
                paper.unit,
                None,
                paper.source,
                why[comp],
                sig,
            )
        )
    term_why = {
        "weights": "every weight streamed once per 512-token tile in both",
        "qkvo": "ours: the projections' inputs re-read once per 256-channel tile, their "
        "outputs written once, Q read and the attention output written once; [R-PM]'s "
        "head-share formula",
        "kv": "ours: K/V written once and read once per 512-token query tile (causal: only "
        "key tiles up to the query tile); [R-PM] counts 4 (1024/To) passes over all of it",
        "mlp": "ours: gate/up inputs re-read once per 256-channel tile, h and the down "
        "output written once; [R-PM]'s E/(2E+M) x M/To x (2E+3M) term",
    }
    for term in RPM_TERMS:
        out.append(
            Target(
                "system_energy",
                f"llama-2-7b / HBQ-E DRAM term: {term}",
                terms[term] / 1e9,
                rpm["dram_bytes"][term] / 1e9,
                "GB",
                None,
                "[R-PM] src/perf_model.py DRAM terms, restated in "
                "coaccel/targets/hbq_asic/_rpm.py; "
                "the restatement reproduces all 25 recomputed system-energy totals",
                term_why[term],
            )
        )
    for term, what in (
        (
            "down_proj_input",
            "the down projection's n x M input, re-read once per 256-channel "
            "output tile (E/To times)",
        ),
        ("lm_head_acts", "the LM head's input reads and FP16 logit writes"),
    ):
        out.append(
            Target(
                "system_energy",
                f"llama-2-7b / HBQ-E DRAM, no [R-PM] term: {term}",
                terms[term] / 1e9,
                0.0,
                "GB",
                None,
                "[R-PM] src/perf_model.py DRAM terms",
                f"simulated traffic the [R-PM] formula does not count: {what}",
            )
        )
    return out


def _geomean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def speedup_targets(
    mode: str = "analytical",
    simulate: Simulate | None = None,
    models: Sequence[str] = MODELS,
) -> list[Target]:
    """Iso-area speedup vs Amove at 1K/4K/16K tokens (geometric mean over models), vs [R-PM].

    Speedup = (cycles_Amove x area_Amove) / (cycles_X x area_X): throughput per PE-array area,
    i.e. the speedup when both arrays are scaled to the same area. Cycles are simulated
    (attention on operands wider than the multipliers takes extra passes, the simulator's
    ``operand_passes``); area per MAC is the PE model's (Amove: published 217 um2/MAC).

    Args:
        mode: simulator mode.
        simulate: as for :func:`system_energy_targets`.
        models: models in the geometric mean.

    Returns:
        The ``speedup`` targets.
    """
    from coaccel.cost import arch_pe
    from coaccel.sim.hbq_asic import load_arch, tile_plan

    sim = simulate or _default_simulate
    scen = {1024: "prefill_1k", 4096: "prefill_4k", 16384: "prefill_16k"}
    designs = {a: load_arch(a) for a in ARCHS}
    designs["nvfp4_28nm"] = nvfp_w4a8_variant(designs["nvfp4_28nm"])
    area = {a: arch_pe(d).area_um2_per_mac for a, d in designs.items()}
    token_tile = {a: tile_plan(d).tile_m for a, d in designs.items()}
    out = []
    for n in SPEEDUP_SEQS:
        runs = {(m, a): sim(designs[a], f"{m}:{scen[n]}", mode) for m in models for a in ARCHS}
        cycles = {k: r.cycles for k, r in runs.items()}
        wprop = {k: r.stall_cycles.get("weight_propagation", 0) for k, r in runs.items()}
        for a in ARCHS[1:]:
            c_ratio = [cycles[(m, "amove_28nm")] / cycles[(m, a)] for m in models]
            ratios = [c * area["amove_28nm"] / area[a] for c in c_ratio]
            # [R-PM] counts MAC time only: the same ratio without the weight-loading cycles
            no_wp = [
                (cycles[(m, "amove_28nm")] - wprop[(m, "amove_28nm")])
                / (cycles[(m, a)] - wprop[(m, a)])
                * area["amove_28nm"]
                / area[a]
                for m in models
            ]
            tiles_a, tiles_x = token_tile["amove_28nm"], token_tile[a]
            share = {
                d: sum(wprop[(m, d)] for m in models) / sum(cycles[(m, d)] for m in models)
                for d in ("amove_28nm", a)
            }
            label = _ARCH_LABEL[a] if a != "nvfp4_28nm" else "NVFP (W4A8)"
            note = (
                f"{designs[a].name}: area/MAC {area[a]:.1f} vs Amove {area['amove_28nm']:.0f} "
                f"um2 (ratio {area['amove_28nm'] / area[a]:.3f}) x simulated cycle ratio "
                f"(Amove / {label}, geo-mean {_geomean(c_ratio):.3f}); per model "
                + ", ".join(f"{m} {r:.2f}" for m, r in zip(models, ratios, strict=True))
            )
            note += (
                "; [R-PM] instead takes cycles as linear MACs + attention MACs x act-bits/4 "
                "(Amove 1), so differences come from the simulated cycle ratio. Weight "
                "loading (weights shift down the PE chain, not double-buffered, once per token "
                f"tile) takes {100 * share['amove_28nm']:.1f} % of Amove's cycles and "
                f"{100 * share[a]:.1f} % of {label}'s (token tiles {tiles_a} vs {tiles_x}"
                + (
                    ": MXINT8 partial sums fit more tokens in the PSUM buffer"
                    if tiles_x > tiles_a
                    else ""
                )
                + "); [R-PM] does not model it. ours_as_paper = the same ratio without those "
                "cycles"
            )
            if a == "nvfp4_28nm":
                note += (
                    "; NVFP here is the W4A8 variant the paper's iso-area model uses "
                    "(130.2 um2/MAC, 8.5-bit attention), not the W4A4 nvfp4_28nm"
                )
            paper = published_figure(f"speedup.{a}.{n}_tokens")
            out.append(
                Target(
                    "speedup",
                    f"{label} vs Amove, iso-area, {n // 1024}K tokens",
                    _geomean(ratios),
                    paper.value,
                    paper.unit,
                    10.0,
                    paper.source,
                    note,
                    ours_as_paper=_geomean(no_wp),
                )
            )
    return out


def synthesis_targets(csv_path: str | Path | None = None) -> tuple[list[Target], str]:
    """Our Yosys gate counts (``rtl/synth/hbq_area.csv``) against the PE model (info rows).

    For each activation-width and μB sweep point: the PE model's area ratio to the sweep's
    reference point (A5, μB 32) vs the Yosys transistor ratio of our RTL.

    Args:
        csv_path: the area table (default: ``rtl/synth/hbq_area.csv`` of the checkout).

    Returns:
        ``(targets, note)``; no targets and a note saying so when the table is absent.
    """
    from coaccel.spine.errors import CoaccelError
    from coaccel.synth import find_rtl_dir, read_area_csv

    try:
        path = Path(csv_path) if csv_path else find_rtl_dir() / "synth" / "hbq_area.csv"
    except CoaccelError:
        return [], "Yosys rows: no rtl/ folder here, so no comparison with our gate counts."
    try:
        shown = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = path
    if not path.is_file():
        return [], f"Yosys rows: {shown} is absent (run `coaccel synth`)."
    rows = read_area_csv(path)
    sweeps: dict[str, tuple[str, int, Callable[[int], dict[str, Any]]]] = {
        "pe_act": (
            "ACT_BITS",
            5,
            lambda v: dict(act=f"e2m{v - 3}", ub=32, l2_act="sig1", l2_weight="mix"),
        ),
        "pe_l1": ("ACT_BITS", 5, lambda v: dict(act=f"e2m{v - 3}")),
        "pe_ub": ("UB", 32, lambda v: dict(act="e2m2", ub=v, l2_act="sig1", l2_weight="mix")),
    }
    # Sweeps whose Yosys ratios the PE model was fitted on (pseudo points of
    # pe_calibration_synth.yaml, group "yosys_<sweep>"): those rows are in sample.
    model = pe_model()
    loo = {r.label: r.loo for r in model.loo}
    pseudo = {
        (p.group, p.pe): p.label
        for p in model.calibration
        if not p.published and p.quantity == "area" and p.whole_pe
    }
    out = []
    for group, (key, ref, kw) in sweeps.items():
        tpm = {}
        for r in rows:
            if r.get("group") == group:
                params = dict(kv.split("=") for kv in r["params"].split(";") if kv)
                tpm[int(params[key])] = float(r["cmos_transistors_per_mac"])
        if ref not in tpm:
            continue

        def design(v: int, kw: Callable[[int], dict[str, Any]] = kw) -> PeFormat:
            return PeFormat(weight="e2m1", block=128, scale="e5m3", **kw(v)).check()

        def area(v: int) -> float:
            return model.predict(design(v)).area_um2_per_mac

        for v in sorted(tpm):
            if v == ref:
                continue
            label = pseudo.get((f"yosys_{group}", design(v)))
            note = (
                "PE model area ratio vs our RTL's transistor ratio (generic gates, no timing "
                "optimisation, so only the trend is comparable); the 'paper' column is the "
                "Yosys ratio"
            )
            if label is not None:
                note += (
                    ". Fitted: the model was fitted on this ratio (a pseudo point of "
                    "pe_calibration_synth.yaml, weight 0.25); ours_loo = the ratio predicted "
                    "without that point"
                )
            out.append(
                Target(
                    "synthesis",
                    f"{group} {key}={v} vs {key}={ref}: area ratio",
                    area(v) / area(ref),
                    tpm[v] / tpm[ref],
                    "x",
                    None,
                    f"[OURS] {path.name}: Yosys CMOS transistors per MAC of our RTL",
                    note,
                    ours_loo=loo[label] / area(ref) if label is not None else math.nan,
                    fit="fitted" if label is not None else "predicted",
                )
            )
    return out, f"Yosys rows: PE model vs our gate counts in {shown}."


def validate_hbq(
    *,
    mode: str = "cycle",
    speedup_mode: str = "analytical",
    system: bool = True,
    simulate: Simulate | None = None,
    models: Sequence[str] = MODELS,
    progress: Callable[[str], None] | None = None,
) -> Validation:
    """Every HBQ validation target.

    Args:
        mode: simulator mode of the system-energy rows (default ``"cycle"``: the reference
            traces through the cycle-approximate engine, about 0.3 s per 2K-token run).
        speedup_mode: simulator mode of the speedup rows (default ``"analytical"``: 75 runs up
            to 16K tokens; on the prefills of these five architectures the analytical mode's
            cycles are within 0.1 % of the cycle mode's, docs/hbq_sim.md).
        system: include the simulated rows (False: PE and claim rows only, no simulator).
        simulate: simulator override (tests).
        models: models of the simulated rows.
        progress: called with one line as each group of rows starts.

    Returns:
        The :class:`Validation`.
    """
    say = progress or (lambda _msg: None)
    say("PE model, claims and synthesis rows")
    syn_rows, syn_note = synthesis_targets()
    targets = pe_targets() + claim_targets() + syn_rows
    breakdowns: dict[tuple[str, str], CostBreakdown] = {}
    notes = [
        syn_note,
        "Fitted rows are in sample: the PE model was fitted on the paper's figure (every PE "
        "row) or on the points it is computed from (the claims, the Yosys activation-width "
        "ratios); ours_loo is the model refitted without those points and loo_status judges "
        "it against the same tolerance (docs/cost_model.md). Predicted rows (system energy, "
        "speedups, the Yosys μB ratios) were not used in any fit, though the HBQ-A/E PE "
        "energies per MAC inside the system rows are fit points.",
        "Energies are dynamic energy at the calibration corner; leakage and the partial-sum "
        "logic (priced by each architecture's partial-sum mode) are not in the paper's system "
        "model nor in ours: each system row's note gives both.",
    ]
    if system:
        say(f"system energy: {len(models)} models x 5 architectures, {mode} mode")
        st, breakdowns = system_energy_targets(mode, simulate, models)
        targets += st
        say(f"iso-area speedups: {len(models)} models, {speedup_mode} mode")
        targets += speedup_targets(speedup_mode, simulate, models)
        notes.append(
            f"System-energy rows: simulator mode '{mode}'; DRAM traffic counted from the "
            "simulated traces; ours = PE array + ACT/PSUM SRAM + DRAM (the components [R-PM] "
            f"counts). Speedup rows: simulator mode '{speedup_mode}'.",
        )
        notes.append(
            "'ours as [R-PM] counts' attributes the differences, it does not replace our value: "
            "system energy without the simulated DRAM traffic the [R-PM] formula has no term "
            "for (the down projection's input re-reads and the LM head's activations; "
            "coaccel/targets/hbq_asic/_rpm.py restates the formula, which reproduces all 25 "
            "recomputed totals); speedups without the weight-loading cycles, which [R-PM]'s "
            "MAC-count model leaves out. Status is judged on our value."
        )
    return Validation(
        tuple(targets), MappingProxyType(dict(breakdowns)), mode if system else "", tuple(notes)
    )


@functools.cache
def system_energy_validation() -> tuple[str, float, str]:
    """How well the HBQ ASIC's total energy is validated, for a sweep report's totals.

    The judged system-energy rows of :func:`system_energy_targets` (analytical mode): the
    2048-token prefills of 5 models on 5 architectures against [R-PM] src/perf_model.py. The
    information rows (an energy breakdown in J, DRAM-traffic terms in GB) are not errors of the
    total and are left out (:meth:`Validation.error_summary`).

    Returns:
        ``(role, rms_error_pct, note)``: ``fitted`` or ``predicted``, the RMS error in percent
        and a sentence saying what it is.
    """
    targets, _ = system_energy_targets(mode="analytical")
    s = Validation(tuple(targets)).error_summary("system_energy")
    role = "fitted" if s.fit == "fitted" else "predicted"
    return (
        role,
        s.rms_pct,
        f"RMS error of the system energy over {s.n} runs (5 models x 5 architectures, "
        f"2048-token prefill, analytical) against [R-PM] src/perf_model.py, max |error| "
        f"{s.max_abs_pct:.1f} % (coaccel validate hbq, system_energy)",
    )
