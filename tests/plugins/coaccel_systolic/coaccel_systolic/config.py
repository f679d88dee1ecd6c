"""Architecture files of the systolic-array target: schema, loader and shipped names.

:class:`SystolicArchConfig` is the schema of ``arch_configs/systolic/<name>.yaml`` of this
package, loaded with :func:`coaccel.config.load_config` (unknown keys, types, ranges and units
are checked, and every problem is reported in one :class:`~coaccel.config.ConfigError`). The
off-chip memory is coaccel's shared :class:`~coaccel.config.DramConfig` block, named by a
preset file (``dram: dram/lpddr4_28nm_asic.yaml``, found among coaccel's shipped configs).

Public: :data:`KIND`, :data:`ARCH_NAMES`, :class:`SystolicArchConfig`, :class:`ArrayConfig`,
:class:`OperandsConfig`, :class:`SramConfig`, :func:`arch_file`, :func:`load_arch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import ClassVar, Literal

from coaccel.spine.config import (
    DramConfig,
    FrozenMap,
    Problem,
    load_config,
    param,
    source_key_problems,
)
from coaccel.spine.target import shipped_arch_names

__all__ = [
    "ARCH_NAMES",
    "DATA_PACKAGE",
    "KIND",
    "ArrayConfig",
    "OperandsConfig",
    "SramConfig",
    "SystolicArchConfig",
    "arch_file",
    "load_arch",
]

KIND = "systolic"
"""The ``kind:`` of a systolic-array architecture file."""

DATA_PACKAGE = "coaccel_systolic.arch_configs"
"""The data package whose ``systolic/`` folder holds the shipped architectures."""

ARCH_NAMES: tuple[str, ...] = shipped_arch_names(KIND, package=DATA_PACKAGE)
"""The shipped architecture names (file stems), sorted."""


@dataclass(frozen=True)
class ArrayConfig:
    """The weight-stationary PE array: ``rows x cols`` PEs of one MAC each.

    A weight tile of ``rows`` reduction elements (K) by ``cols`` output channels (N) stays in
    the PEs while the activation rows of a token tile stream through, skewed by one cycle per
    row and column.

    Attributes:
        rows: PE rows (reduction elements per weight tile).
        cols: PE columns (output channels per weight tile).
    """

    rows: int = param(ge=2, le=1024, doc="PE rows (K per weight tile)")
    cols: int = param(ge=2, le=1024, doc="PE columns (N per weight tile)")


@dataclass(frozen=True)
class OperandsConfig:
    """Operand widths: integer weights and activations, outputs accumulated at ``out_bits``.

    Attributes:
        weight_bits: bits per weight (two's-complement integer).
        act_bits: bits per activation (two's-complement integer).
        out_bits: bits per output element, as accumulated in the output SRAM and written to
            DRAM (16: FP16 accumulation, 32: FP32).
    """

    weight_bits: int = param(ge=2, le=16, doc="bits per weight (integer)")
    act_bits: int = param(ge=2, le=16, doc="bits per activation (integer)")
    out_bits: Literal[16, 32] = param(default=32, doc="bits per output / partial sum")


@dataclass(frozen=True)
class SramConfig:
    """The three on-chip SRAMs.

    Attributes:
        weight_kib: weight tiles (at least two: one in use, one loading), KiB.
        act_kib: activation slabs (two token tiles x the whole reduction K), KiB.
        out_kib: output tiles (two token tiles x ``cols`` outputs), KiB.
    """

    weight_kib: float = param(gt=0, doc="weight SRAM")
    act_kib: float = param(gt=0, doc="activation SRAM")
    out_kib: float = param(gt=0, doc="output SRAM")


@dataclass(frozen=True)
class SystolicArchConfig:
    """One systolic-array design point (``arch_configs/systolic/<name>.yaml``).

    Attributes:
        kind: ``"systolic"``.
        name: short name (``systolic_32x32``).
        freq_mhz: clock, MHz.
        array: the PE array.
        operands: operand widths.
        sram: on-chip SRAM sizes.
        dram: off-chip DRAM (coaccel's shared block, a preset file or inline).
        description: one line.
        sources: provenance of the figures, keyed by dotted field path (``array.rows``).
    """

    VERSION: ClassVar[int] = 1

    kind: Literal["systolic"] = param(doc="simulator kind: systolic")
    name: str = param(doc="short name")
    freq_mhz: float = param(gt=0, le=10_000, doc="clock")
    array: ArrayConfig = param(doc="PE array")
    operands: OperandsConfig = param(doc="operand widths")
    sram: SramConfig = param(doc="on-chip SRAMs")
    dram: DramConfig = param(doc="off-chip DRAM")
    description: str = param(default="", doc="one line")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: the SRAMs hold the double-buffered tiles the array needs.

        The weight SRAM holds at least two ``rows x cols`` weight tiles and the output SRAM
        two rows of ``cols`` outputs; the activation SRAM's need depends on a GEMM's K and is
        checked when a workload is simulated.
        """
        out: list[Problem | str] = []
        a, op = self.array, self.operands
        tile_bits = a.rows * a.cols * op.weight_bits
        if self.sram.weight_kib * 8192 < 2 * tile_bits:
            out.append(
                Problem(
                    "",
                    "sram.weight_kib",
                    self.sram.weight_kib,
                    f"must hold two {a.rows} x {a.cols} weight tiles at {op.weight_bits} bits "
                    f"(double buffering): at least {2 * tile_bits / 8192:g} KiB",
                )
            )
        row_bits = a.cols * op.out_bits
        if self.sram.out_kib * 8192 < 2 * row_bits:
            out.append(
                Problem(
                    "",
                    "sram.out_kib",
                    self.sram.out_kib,
                    f"must hold two rows of {a.cols} outputs at {op.out_bits} bits: at least "
                    f"{2 * row_bits / 8192:g} KiB",
                )
            )
        out.extend(source_key_problems(self, self.sources))
        return out


def arch_file(name: str | Path) -> Path:
    """The file of an architecture: a shipped name of this package, or a path.

    Args:
        name: a shipped name (:data:`ARCH_NAMES`, with or without ``.yaml``) or a file path;
            an existing file of that name wins over a shipped one.

    Returns:
        The path (not checked for existence when a path was given).
    """
    text = str(name)
    stem = text[:-5] if text.endswith(".yaml") else text
    if stem in ARCH_NAMES and not Path(text).exists():
        return Path(str(files(DATA_PACKAGE).joinpath(KIND, f"{stem}.yaml")))
    return Path(text)


def load_arch(name: str | Path) -> SystolicArchConfig:
    """Load and validate an architecture by shipped name or path.

    Args:
        name: one of :data:`ARCH_NAMES` or a YAML file path.

    Returns:
        The :class:`SystolicArchConfig`.

    Raises:
        ConfigError: every problem of the file.
    """
    return load_config(arch_file(name), SystolicArchConfig)
