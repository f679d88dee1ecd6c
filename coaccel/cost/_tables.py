"""Component tables (ERT/ART style): every figure with its value, unit, source and uncertainty.

A component table is a YAML file under ``arch_configs/cost/`` (schema :class:`ComponentTable`):

.. code-block:: yaml

    version: 1
    description: gate-equivalent weights of the PE datapath model
    entries:
      fa_ge:
        value: 7
        unit: GE
        source: "Weste & Harris, CMOS VLSI Design 4th ed.: 28-transistor mirror adder / 4"
        uncertainty: 0.15

``uncertainty`` is the relative one-sigma uncertainty of ``value`` (0.15 means ±15 %). Tables
are loaded with :func:`coaccel.config.load_config`, so an unknown key, a missing field or a
negative uncertainty is a :class:`~coaccel.config.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..spine.config import Problem, load_config, param
from ..spine.errors import CoaccelError

__all__ = [
    "TABLE_FILES",
    "ComponentTable",
    "Entry",
    "load_table",
    "shipped_table",
    "table_rows",
]


TABLE_FILES = (
    "pe_gates.yaml",
    "tech_scaling.yaml",
    "sram_28nm.yaml",
    "system_28nm.yaml",
    "fpga_ultrascale_plus.yaml",
)
"""The shipped component tables (``arch_configs/cost/``)."""


@dataclass(frozen=True)
class Entry:
    """One figure of a component table.

    Attributes:
        value: the number, in ``unit``.
        unit: its unit, e.g. ``"um2/MAC"``, ``"fJ/bit"``, ``"GE"``, ``"1"`` for a ratio.
        source: where it comes from (paper table, our synthesis, a scaling rule, a fit, or
            ``[OURS]`` for a stated assumption).
        uncertainty: relative one-sigma uncertainty of ``value`` (0.1 = ±10 %).
    """

    value: float = param(doc="the number, in `unit`", unit="")
    unit: str = param(doc="unit of `value`")
    source: str = param(doc="where the figure comes from")
    uncertainty: float = param(ge=0, doc="relative 1-sigma uncertainty (0.1 = ±10%)", unit="")

    def validate(self) -> list[Problem | str]:
        """Provenance must be stated."""
        out: list[Problem | str] = []
        if not self.source.strip():
            out.append(Problem("", "source", self.source, "must say where the figure comes from"))
        if not self.unit.strip():
            out.append(Problem("", "unit", self.unit, "must name the unit ('1' for a ratio)"))
        return out


@dataclass(frozen=True)
class ComponentTable:
    """A named set of :class:`Entry` figures (one YAML file).

    Attributes:
        description: what the table is for.
        node_nm: the technology node the figures hold for (nm); 0 for node-independent tables.
        entries: the figures by name.
    """

    VERSION: ClassVar[int] = 1

    description: str = param(doc="what the table is for")
    entries: Mapping[str, Entry] = param(doc="figures by name")
    node_nm: float = param(default=28.0, ge=0, doc="technology node of the figures", unit="")

    def __getitem__(self, name: str) -> Entry:
        try:
            return self.entries[name]
        except KeyError:
            raise CoaccelError(
                f"component table has no entry {name!r}; entries: {', '.join(self.entries)}"
            ) from None

    def value(self, name: str) -> float:
        """The value of entry ``name`` (in its unit)."""
        return self[name].value


def load_table(path: str | Path) -> ComponentTable:
    """Load a component table file.

    Args:
        path: the YAML file.

    Returns:
        The table.

    Raises:
        ConfigError: every problem of the file, at once.
    """
    return load_config(path, ComponentTable)


@functools.cache
def shipped_table(name: str) -> ComponentTable:
    """A component table shipped in ``arch_configs/cost/`` (cached).

    Args:
        name: file name without folder, e.g. ``"pe_gates.yaml"``.

    Returns:
        The table.
    """
    from ..arch_configs import path

    return load_table(path(f"cost/{name}"))


def table_rows(table: ComponentTable) -> list[dict[str, object]]:
    """The entries as plain rows (``name``, ``value``, ``unit``, ``uncertainty``, ``source``)."""
    return [
        {
            "name": k,
            "value": e.value,
            "unit": e.unit,
            "uncertainty": e.uncertainty,
            "source": e.source,
        }
        for k, e in table.entries.items()
    ]
