"""A design point (a top module with HDL parameter overrides) and the error of the flow.

Public: :class:`SynthPoint`, :class:`SynthError`, :func:`select_points`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..spine.errors import CoaccelError

__all__ = ["SynthError", "SynthPoint", "select_points"]


class SynthError(CoaccelError):
    """A Yosys run failed, timed out, or its log lacks the statistics that are parsed."""


@dataclass(frozen=True)
class SynthPoint:
    """One design point: a top module with HDL parameter overrides.

    Attributes:
        group: the sweep group it belongs to (a key of its synthesis set's groups).
        top: the top module (file ``rtl/<area>/<top>.v``).
        modules: every module the top instantiates, top first (one file per module).
        params: HDL parameter overrides as ``(name, value)`` pairs, in table order.
        macs: multiply-accumulates per cycle, 0 for blocks without MACs.
        keep: modules kept as their own hierarchy level in the ASIC view (non-empty selects the
            hierarchical template ``asic_array.ys``); everything else is flattened into the top.
        macros: modules that become black-box SRAM macros in the ASIC view (their bits are
            counted in ``sram_bits``, their area is not in ``cmos_transistors``).
        area: the folder under ``rtl/`` that holds the module files (the synthesis set's
            ``rtl_folder``; empty: ``rtl/`` itself).
        fpga_template: file name of the FPGA-view script template in ``rtl/synth/``.
    """

    group: str
    top: str
    modules: tuple[str, ...]
    params: tuple[tuple[str, int], ...] = ()
    macs: int = 0
    keep: tuple[str, ...] = ()
    macros: tuple[str, ...] = ()
    area: str = ""
    fpga_template: str = "fpga.ys"

    @property
    def hierarchical(self) -> bool:
        """Whether the ASIC view keeps hierarchy (``asic_array.ys``) instead of flattening."""
        return bool(self.keep or self.macros)

    @property
    def asic_template(self) -> str:
        """File name of the ASIC-view script template in ``rtl/synth/``."""
        return "asic_array.ys" if self.hierarchical else "asic.ys"

    @property
    def param_string(self) -> str:
        """The ``params`` column: ``"K1=v1;K2=v2"`` (empty without overrides)."""
        return ";".join(f"{k}={v}" for k, v in self.params)

    @property
    def slug(self) -> str:
        """A file-system-safe unique name, e.g. ``"mul-N8-W4"`` (top ``mul``, N = 8, W = 4)."""
        return "-".join([self.top, *(f"{k}{v}" for k, v in self.params)])


def select_points(
    groups: Mapping[str, Sequence[SynthPoint]], names: Iterable[str] | None = None
) -> list[SynthPoint]:
    """The design points of the named groups (all groups by default), in table order.

    Args:
        groups: every design point by group (a synthesis set's ``groups()``).
        names: the groups to take (``coaccel synth --blocks``); None: all of them.

    Returns:
        The points of those groups, group by group in the order of ``names``.

    Raises:
        CoaccelError: an unknown group name (the message lists the valid ones).
    """
    chosen = list(groups) if names is None else list(names)
    unknown = [g for g in chosen if g not in groups]
    if unknown:
        raise CoaccelError(
            f"unknown block group(s) {', '.join(unknown)}; valid: {', '.join(groups)}"
        )
    return [p for g in chosen for p in groups[g]]
