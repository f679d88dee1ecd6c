"""The systolic target's part of ``coaccel report``: area and energy by component.

:func:`report_part` prices every architecture (:func:`coaccel.cost.arch_area`) and, unless the
report is area-only, every run of the requested workloads (:func:`coaccel.cost.evaluate` of
:func:`~.simulate.simulate`), and returns the tables and the flat figures (value, unit, one
sigma, source) of a :class:`coaccel.report.document.ReportPart`. Workloads and scenario
default to the target's report role (:attr:`coaccel.spine.target.ReportRole.default_workloads`).

Public: :func:`report_part`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from coaccel.report.document import Figure, ReportPart, ReportSettings, Section, Table

__all__ = ["report_part"]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def report_part(archs: Sequence[Any], settings: ReportSettings) -> ReportPart:
    """Price systolic-array designs (and runs) for ``coaccel report``.

    Args:
        archs: loaded :class:`~.config.SystolicArchConfig` objects.
        settings: what the report asked for (workloads, scenario, mode, node, area only).

    Returns:
        The part: an area table (µm² by component), an energy table per run (J by component,
        with the run's cycles and time), and every number as a flat figure.
    """
    from coaccel.cost import arch_area, evaluate

    from . import TARGET
    from .simulate import simulate

    role = TARGET.report
    node = settings.node_nm
    workloads = settings.workloads or (role.default_workloads if role else ())
    scenario = settings.scenario or (role.default_scenario if role else None) or "prefill_256"
    figures: list[Figure] = []
    area_rows: list[tuple[str, ...]] = []
    for a in archs:
        cb = arch_area(a, node)
        for comp, v in cb.area_um2.items():
            s = cb.area_sigma_um2[comp]
            area_rows.append((a.name, comp, _fmt(v), _fmt(s), cb.sources[comp]))
            figures.append(
                Figure(a.name, "area", comp, v, "um2", s, cb.sources[comp], node_nm=node)
            )
        total, sigma = cb.total_area_um2, cb.total_area_sigma_um2
        area_rows.append((a.name, "total", _fmt(total), _fmt(sigma), "sum of the components"))
        figures.append(
            Figure(
                a.name, "area", "total", total, "um2", sigma, "sum of the components", node_nm=node
            )
        )
    sections = [
        Section(
            "Area by component",
            paragraphs=(
                "PE array from coaccel's PE model (integer MACs with one FP conversion, scale "
                "and accumulator per column pass), SRAMs from its SRAM model, at "
                f"{node:g} nm.",
            ),
            tables=(
                Table(
                    ("arch", "component", "area (um2)", "sigma (um2)", "source"), tuple(area_rows)
                ),
            ),
        )
    ]
    notes = [f"technology node {node:g} nm"]
    if not settings.area_only:
        energy_rows: list[tuple[str, ...]] = []
        run_rows: list[tuple[str, ...]] = []
        for w in workloads:
            label = w if ":" in w or w.startswith("gemm") else f"{w}:{scenario}"
            for a in archs:
                r = simulate(a, label, mode=settings.mode)
                cb = evaluate(r, a, node)
                run_rows.append(
                    (
                        a.name,
                        r.workload,
                        f"{r.cycles:,}",
                        _fmt(r.seconds),
                        f"{100 * r.utilization:.1f}",
                        _fmt(cb.total_energy_j),
                    )
                )
                for comp, v in cb.energy_j.items():
                    s = cb.energy_sigma_j[comp]
                    energy_rows.append(
                        (a.name, r.workload, comp, _fmt(v), _fmt(s), cb.sources[comp])
                    )
                    figures.append(
                        Figure(
                            a.name,
                            "energy",
                            comp,
                            v,
                            "J",
                            s,
                            cb.sources[comp],
                            workload=r.workload,
                            node_nm=node,
                        )
                    )
                total = cb.total_energy_j
                figures.append(
                    Figure(
                        a.name,
                        "energy",
                        "total",
                        total,
                        "J",
                        cb.total_energy_sigma_j,
                        "sum of the components",
                        workload=r.workload,
                        node_nm=node,
                    )
                )
                figures.append(
                    Figure(
                        a.name,
                        "time",
                        "total",
                        r.seconds,
                        "s",
                        math.nan,
                        f"systolic simulator, {r.mode} mode",
                        workload=r.workload,
                        node_nm=node,
                    )
                )
        sections.append(
            Section(
                "Runs",
                tables=(
                    Table(
                        ("arch", "workload", "cycles", "time (s)", "utilization (%)", "energy (J)"),
                        tuple(run_rows),
                    ),
                ),
            )
        )
        sections.append(
            Section(
                "Energy by component",
                paragraphs=(
                    "MACs, SRAM bytes and DRAM bytes of each simulated run, priced by coaccel's "
                    "cost model; leakage is total area x leakage density x run time.",
                ),
                tables=(
                    Table(
                        ("arch", "workload", "component", "energy (J)", "sigma (J)", "source"),
                        tuple(energy_rows),
                    ),
                ),
            )
        )
        notes.append(f"workloads {', '.join(workloads)}; simulator mode '{settings.mode}'")
    return ReportPart(
        kind="systolic",
        title="Systolic array: area and energy",
        notes=tuple(notes),
        sections=tuple(sections),
        figures=tuple(figures),
    )
