"""Technology scaling of 28 nm cost figures to 16, 7 and 5 nm (``tech_scaling.yaml``).

Factors multiply a 28 nm figure; each carries a relative one-sigma error band that the cost
model adds in quadrature to the uncertainty of the figure it scales. Sources: Stillmaker & Baas
2017 for logic area and energy (28 nm interpolated between their 32 and 20 nm nodes), published
foundry bitcell areas for SRAM, TSMC's N5-vs-N7 figures for 5 nm (details in the YAML file and
``docs/cost_model.md``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..spine.errors import CoaccelError
from ._tables import shipped_table

__all__ = ["NODES_NM", "NodeFactors", "node_factors"]

NODES_NM = (28.0, 16.0, 7.0, 5.0)
"""Nodes the scaling table covers (28 nm is the calibration node, factor 1)."""


@dataclass(frozen=True)
class NodeFactors:
    """Multipliers from 28 nm to one node, with relative one-sigma error bands.

    Attributes:
        node_nm: the target node.
        area: logic area factor.
        energy: logic dynamic-energy factor.
        sram_area: SRAM area factor.
        sram_energy: SRAM access-energy factor.
        leakage: leakage-power factor.
        area_uncertainty: relative one-sigma band of ``area`` (the same names follow).
        energy_uncertainty: band of ``energy``.
        sram_area_uncertainty: band of ``sram_area``.
        sram_energy_uncertainty: band of ``sram_energy``.
        leakage_uncertainty: band of ``leakage``.
    """

    node_nm: float
    area: float = 1.0
    energy: float = 1.0
    sram_area: float = 1.0
    sram_energy: float = 1.0
    leakage: float = 1.0
    area_uncertainty: float = 0.0
    energy_uncertainty: float = 0.0
    sram_area_uncertainty: float = 0.0
    sram_energy_uncertainty: float = 0.0
    leakage_uncertainty: float = 0.0


@functools.cache
def node_factors(node_nm: float) -> NodeFactors:
    """The scaling factors from 28 nm to ``node_nm``.

    Args:
        node_nm: target node, one of :data:`NODES_NM` (28 returns factors of 1).

    Returns:
        The factors and their error bands.

    Raises:
        CoaccelError: a node the table does not cover.
    """
    node = float(node_nm)
    if node not in NODES_NM:
        raise CoaccelError(
            f"no scaling factors for {node_nm:g} nm; nodes: {', '.join(f'{n:g}' for n in NODES_NM)}"
        )
    if node == 28.0:
        return NodeFactors(28.0)
    t = shipped_table("tech_scaling.yaml")
    n = f"{node:g}nm"
    kinds = {
        "area": "logic_area",
        "energy": "logic_energy",
        "sram_area": "sram_area",
        "sram_energy": "sram_energy",
        "leakage": "leakage",
    }
    kw: dict[str, float] = {}
    for field, key in kinds.items():
        e = t[f"{key}_{n}"]
        kw[field] = e.value
        kw[f"{field}_uncertainty"] = e.uncertainty
    return NodeFactors(node, **kw)
