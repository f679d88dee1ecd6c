"""The typed input of the cost model: what a design contains and what a run did with it.

A simulator target turns its architecture (and, optionally, a simulation result) into
:class:`PricedComponents`; ``coaccel.cost.price`` turns that into area and energy per component
with sources and uncertainties. The cost model reads nothing else: it never sees a target's
config classes or result types, and it never guesses a design from its name. Component kinds:

* :class:`MacArray` — multiply-accumulate units by operand format (a PE-model design point, or
  published per-MAC figures named by a key in the architecture file);
* :class:`BufferUse` — an on-chip SRAM by geometry (banks x depth x bank width) and the bytes
  read and written;
* :class:`LogicUse` — fixed-function logic priced per lane and per operation (for example the
  partial-sum accumulate unit, by its number format);
* :class:`OffChipUse` — off-chip memory by type, with its energy per byte, and the bytes moved;
* :class:`FpgaResourceUse` — programmable-logic resources of an FPGA design (LUT, FF, DSP,
  BRAM36, URAM) by count, and the operations the run performed on them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FPGA_RESOURCES",
    "BufferUse",
    "FpgaResourceUse",
    "LogicUse",
    "MacArray",
    "MacFormat",
    "OffChipUse",
    "PricedComponents",
]

FPGA_RESOURCES = ("lut", "ff", "dsp", "bram36", "uram")
"""Resource kinds of :class:`FpgaResourceUse`."""


@dataclass(frozen=True)
class MacFormat:
    """The number formats a MAC array multiplies: the PE model's design point.

    Attributes:
        weight: weight element format (``"e2m1"``, ``"int4"``, ``"fp16"``...).
        act: activation element format.
        block: L1 block size (elements sharing one scale).
        scale: L1 scale format (``"e5m3"``, ``"pot"``...).
        ub: L2 micro-block size, or None without L2 scales.
        l2_act: activation L2 scheme (``"none"`` without).
        l2_act_bits: bits of an activation L2 code.
        l2_weight: weight L2 scheme.
        l2_weight_bits: bits of a weight L2 code.
        accum: accumulator format (``"fp16"`` or ``"fp32"``).
        pe_macs: MACs per PE (the cross-block reduction spans ``pe_macs / block`` blocks).
    """

    weight: str
    act: str
    block: int
    scale: str
    ub: int | None
    l2_act: str
    l2_act_bits: int
    l2_weight: str
    l2_weight_bits: int
    accum: str
    pe_macs: int


@dataclass(frozen=True)
class MacArray:
    """A MAC array.

    Attributes:
        name: component name in the breakdown (``"pe_array"``).
        units: physical MAC units (area).
        macs: MACs the run executed (0 for an area-only description).
        cost_model: ``"pe_model"`` (priced from :attr:`fmt` by the PE model) or the key of a
            published per-MAC figure pair in the cost tables (``"amove"``, ``"woq"``: the
            table's ``<key>_area_um2_per_mac`` and ``<key>_energy_fj_per_mac``).
        fmt: the formats (required for ``"pe_model"``).
        label: a short human description of the datapath.
    """

    name: str
    units: int
    macs: int
    cost_model: str
    fmt: MacFormat | None
    label: str = ""


@dataclass(frozen=True)
class BufferUse:
    """An on-chip SRAM buffer.

    Attributes:
        name: component name (``"act_buffer"``).
        banks: banks.
        depth_words: words per bank.
        bank_width_bits: bits per word of one bank.
        read_bytes: bytes read in the run.
        write_bytes: bytes written in the run.
    """

    name: str
    banks: int
    depth_words: int
    bank_width_bits: int
    read_bytes: int = 0
    write_bytes: int = 0


@dataclass(frozen=True)
class LogicUse:
    """Fixed-function logic priced per lane (area) and per operation (energy).

    Attributes:
        name: component name (``"psum_logic"``).
        logic: what the logic is, the key of its figures in the cost tables
            (``"psum_mxint8"``: the MXINT8 partial-sum quantizer/dequantizer and adders).
        lanes: parallel lanes (area scales with it).
        operations: operations the run performed (energy scales with it; a count, kept as a
            float because a target may derive it from bytes and bits per element).
    """

    name: str
    logic: str
    lanes: int
    operations: float = 0.0


@dataclass(frozen=True)
class OffChipUse:
    """Off-chip memory traffic.

    Attributes:
        name: component name (``"dram"``).
        memory_type: the memory standard (``"lpddr4"``, ``"hbm3e"``...).
        energy_pj_per_byte: access energy per byte moved, pJ/B.
        uncertainty_pct: relative uncertainty of the energy figure, percent.
        source: where the energy figure comes from.
        read_bytes: bytes read.
        write_bytes: bytes written.
    """

    name: str
    memory_type: str
    energy_pj_per_byte: float
    uncertainty_pct: float
    source: str
    read_bytes: int = 0
    write_bytes: int = 0


@dataclass(frozen=True)
class FpgaResourceUse:
    """Programmable-logic resources of an FPGA design and what a run did with them.

    Attributes:
        name: component name (``"mac_dsp"``, ``"delta_v_uram"``).
        resource: one of :data:`FPGA_RESOURCES`.
        count: resources used (BRAM36 may be fractional: a RAMB18 is 0.5).
        operations: what the run did, in the resource's energy unit of the cost table: MACs for
            ``dsp``, bytes moved for ``bram36`` / ``uram``, resource-cycles (used resources x
            busy cycles) for ``lut`` / ``ff``.
    """

    name: str
    resource: str
    count: float
    operations: float = 0.0

    def __post_init__(self) -> None:
        if self.resource not in FPGA_RESOURCES:
            raise ValueError(
                f"{self.name}: resource {self.resource!r}; valid: {', '.join(FPGA_RESOURCES)}"
            )


@dataclass(frozen=True)
class PricedComponents:
    """Everything the cost model prices for one design (and one run of it).

    Attributes:
        arch: architecture name.
        kind: simulator kind.
        workload: workload label (``""`` for an area-only description).
        mode: simulator mode of the run (``""`` without one).
        seconds: run time, s (0 without a run; leakage energy scales with it).
        macs: MAC arrays.
        buffers: on-chip buffers.
        logic: fixed-function logic.
        offchip: off-chip memories.
        fpga: programmable-logic resources of an FPGA design (empty for an ASIC).
    """

    arch: str
    kind: str
    workload: str
    mode: str
    seconds: float
    macs: tuple[MacArray, ...]
    buffers: tuple[BufferUse, ...]
    logic: tuple[LogicUse, ...]
    offchip: tuple[OffChipUse, ...]
    fpga: tuple[FpgaResourceUse, ...] = ()

    @property
    def has_run(self) -> bool:
        """True when the components describe a simulated run, not just the design."""
        return bool(self.workload)
