"""Architecture configs of the HBQ ASIC simulator and the tile sizes their buffers allow.

:class:`HbqArchConfig` is the schema of ``arch_configs/hbq_asic/<arch>.yaml`` (loaded with
:func:`coaccel.config.load_config`, so unknown keys, types, ranges and units are checked and every
problem is reported in one :class:`~coaccel.config.ConfigError`). Everything an architect sweeps is
a field with its unit in its name: PE count, MACs per PE, operand formats (element widths, block
size, μB, L2 scheme), partial-sum mode, buffer sizes (KiB), banks, bank widths and ports, clock
(MHz), DRAM (the shared :class:`~coaccel.config.DramConfig` block, by file or inline) and tile
sizes.

:func:`tile_plan` derives the tiles from the buffers ([R-PM] Tk 512 vs 256: storing partial sums in
MXINT8 instead of FP16 doubles the token depth of a tile) and :func:`attention_tiles` the
attention tiles for a model's head size. See ``docs/hbq_sim.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Literal

from coaccel.models.formats import HBQ_PRESETS, format_names, resolve
from coaccel.models.hbq import PLAIN_FORMAT_BITS, OperandStorage, psum_bits_per_element
from coaccel.spine.config import (
    ConfigError,
    DramConfig,
    FrozenMap,
    Problem,
    load_config,
    param,
    source_key_problems,
)

from ..common.buffer import OnChipBuffer
from ..common.target import arch_file

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "BufferConfig",
    "BuffersConfig",
    "FormatsConfig",
    "HbqArchConfig",
    "OperandFormatConfig",
    "PeArrayConfig",
    "PsumConfig",
    "TilePlan",
    "TilingConfig",
    "VectorUnitConfig",
    "arch_path",
    "attention_tiles",
    "load_arch",
    "operand_format",
    "tile_plan",
]

KIND = "hbq_asic"
"""The ``kind:`` of an HBQ ASIC architecture file (shipped ones: ``arch_configs/hbq_asic/``)."""


def _shipped_arch_names() -> tuple[str, ...]:
    from importlib.resources import files

    folder = files("coaccel.arch_configs").joinpath(KIND)
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


ARCH_NAMES: tuple[str, ...] = _shipped_arch_names()
"""The architectures shipped in ``arch_configs/hbq_asic/`` (``<name>.yaml``), sorted."""

L2Scheme = Literal["none", "pot", "int", "sig1", "sig2", "sig3", "sig4", "mix"]
PsumMode = Literal["fp32", "fp16", "mxint8_running", "mxint8_group"]
Role = Literal["weight", "activation", "kv"]


@functools.lru_cache(maxsize=4096)
def _bits_per_element(
    element_bits: int, block_elems: int, side_bits: int, ub_elems: int, l2_bits: int
) -> Fraction:
    # Exact arithmetic on a handful of small ints, asked for many times per simulation: kept.
    side = Fraction(side_bits)
    if ub_elems:
        side += Fraction(block_elems, ub_elems) * l2_bits
    return element_bits + side / block_elems


@functools.lru_cache(maxsize=256)
def _psum_bits(mode: str, block_elems: int) -> Fraction:
    return psum_bits_per_element(mode, sa_n=block_elems)


@dataclass(frozen=True)
class OperandFormatConfig:
    """Storage format of one operand (weights, activations or the KV cache).

    Bits per element = ``element_bits + (scale_bits + (block_elems / ub_elems) * l2_bits +
    selector_bits_per_block) / block_elems`` ([R-README] effective bits). When ``format`` names a
    format of :mod:`coaccel.models.formats` (or ``fp16``/``bf16``/``fp32``), the fields must
    describe that format (the loader checks it) and the traces take the format from the
    registry; any other name is a label for a format known only by these fields.

    Attributes:
        format: format name (``hbq-e``, ``nvfp4_e5m3``, ``mxfp4``, ``fp16``, or a label).
        element_bits: bits per element code.
        block_elems: L1 block size (elements sharing one L1 scale); 1 for unscaled formats.
        scale_bits: bits of the L1 scale per block.
        ub_elems: micro-block μB (elements per L2 code); 0 when there is no L2 level.
        l2_bits: bits per L2 code.
        l2_scheme: L2 scale table ([R-Q] ``L2_SCHEME``); ``none`` without an L2 level.
        selector_bits_per_block: extra bits per L1 block (the Mix scheme's selector bit).
        source: where the format's definition comes from.
    """

    format: str = param(doc="format name (registry name, fp16/bf16/fp32, or a label)")
    element_bits: int = param(ge=1, le=32, doc="bits per element code")
    block_elems: int = param(default=1, ge=1, doc="L1 block size")
    scale_bits: int = param(default=0, ge=0, le=32, doc="L1 scale bits per block")
    ub_elems: int = param(default=0, ge=0, doc="micro-block size; 0 = no L2 level")
    l2_bits: int = param(default=0, ge=0, le=4, doc="bits per L2 code")
    l2_scheme: L2Scheme = param(default="none", doc="L2 scale table")
    selector_bits_per_block: int = param(default=0, ge=0, le=8, doc="extra bits per block")
    source: str = param(default="", doc="provenance of the format")

    def bits_per_element(self) -> Fraction:
        """Effective storage bits per element (exact), side information included."""
        return _bits_per_element(
            self.element_bits,
            self.block_elems,
            self.scale_bits + self.selector_bits_per_block,
            self.ub_elems,
            self.l2_bits,
        )

    def validate(self) -> list[Problem | str]:
        """μB divides the block; an L2 level has a scheme and code bits, and vice versa."""
        out: list[Problem | str] = []
        if self.ub_elems:
            if self.block_elems % self.ub_elems:
                out.append(
                    Problem(
                        "",
                        "ub_elems",
                        self.ub_elems,
                        f"μB={self.ub_elems} must divide block_elems={self.block_elems}",
                    )
                )
            if self.l2_scheme == "none" or self.l2_bits == 0:
                out.append(
                    Problem(
                        "",
                        "l2_scheme",
                        self.l2_scheme,
                        f"an L2 level (ub_elems={self.ub_elems}) needs an l2_scheme other than "
                        f"'none' and l2_bits >= 1 (got {self.l2_scheme!r}, {self.l2_bits})",
                    )
                )
        elif self.l2_scheme != "none" or self.l2_bits:
            out.append(
                Problem(
                    "",
                    "ub_elems",
                    self.ub_elems,
                    f"l2_scheme={self.l2_scheme!r} with l2_bits={self.l2_bits} needs ub_elems > 0",
                )
            )
        return out


@dataclass(frozen=True)
class FormatsConfig:
    """The three operand formats of the datapath.

    Attributes:
        weight: weight format (the stationary operand).
        activation: activation format (the broadcast operand; also Q and the softmax output P).
        kv: KV-cache format (K and V are the stationary operand of QK^T and PV) when the
            workload quantizes the KV cache; FP16 otherwise.
    """

    weight: OperandFormatConfig
    activation: OperandFormatConfig
    kv: OperandFormatConfig

    def validate(self) -> list[Problem | str]:
        """Registry formats must match their fields; one name, one element width."""
        out: list[Problem | str] = []
        for role in ("weight", "activation", "kv"):
            _, problems = _registry_check(getattr(self, role), role)
            out.extend(Problem("", f"{role}.{key}", value, msg) for key, value, msg in problems)
        if (
            self.weight.format == self.kv.format
            and self.weight.element_bits != self.kv.element_bits
        ):
            out.append(
                Problem(
                    "",
                    "kv.element_bits",
                    self.kv.element_bits,
                    f"weight and kv share the format name {self.kv.format!r} but differ in "
                    f"element_bits ({self.weight.element_bits} vs {self.kv.element_bits}); "
                    "give them different names",
                )
            )
        return out


@dataclass(frozen=True)
class PeArrayConfig:
    """The 1-D weight-stationary PE array ([R-ACC] accelerator RTL).

    Each PE holds the weights of one output channel for ``macs_per_pe`` reduction elements and
    takes one token's activations per cycle (broadcast to all PEs).

    Attributes:
        n_pes: PEs (output channels computed at once).
        macs_per_pe: multiply-accumulates per PE per cycle (reduction elements per PE pass).
        native_act_bits: activation element width the multipliers take in one pass.
        native_wgt_bits: weight element width the multipliers take in one pass.
        latency_cycles: PE pipeline latency, input to scaled partial sum (RTL: rtl/hbq/cycles.csv).
        ii_cycles: PE initiation interval (RTL: rtl/hbq/cycles.csv).
        act_read_cycles: synchronous ACT-buffer read, token issue to data (RTL hbq_array: 1).
        broadcast_stages: pipeline registers between the ACT buffer and the PEs (SA_PP_STAGE).
        fsm_cycles: control overhead of the tile state machine per transition pair: command to
            weight load, weight load to issue, last result to idle (RTL hbq_array: 2).
        weight_shadow_regs: the next weights shift in while the current ones compute.
        wgt_shift_cycles_per_pe: cycles to shift one PE's weights one PE down the chain.
        cost_model: how the cost model prices the PE: ``pe_model`` (derived from the operand
            formats by the PE model) or the key of published per-MAC figures in
            ``arch_configs/cost/system_28nm.yaml`` (``amove``, ``woq``) for datapaths the PE
            model does not derive.
    """

    n_pes: int = param(ge=1, doc="PEs in the array")
    macs_per_pe: int = param(ge=1, doc="MACs per PE per cycle")
    native_act_bits: int = param(ge=1, le=32, doc="activation element bits per pass")
    native_wgt_bits: int = param(ge=1, le=32, doc="weight element bits per pass")
    latency_cycles: int = param(ge=0, doc="PE pipeline latency")
    ii_cycles: int = param(default=1, ge=1, doc="PE initiation interval")
    act_read_cycles: int = param(default=1, ge=0, doc="ACT read, issue to data")
    broadcast_stages: int = param(default=2, ge=0, doc="ACT-to-PE pipeline registers")
    fsm_cycles: int = param(default=2, ge=0, doc="tile state machine overhead per transition")
    weight_shadow_regs: bool = param(default=False, doc="weights shift in while computing")
    wgt_shift_cycles_per_pe: int = param(default=1, ge=1, doc="cycles per PE of weight shift")
    cost_model: Literal["pe_model", "amove", "woq"] = param(
        default="pe_model", doc="PE pricing: the PE model, or published figures by key"
    )


@dataclass(frozen=True)
class PsumConfig:
    """Partial-sum storage and the accumulate (read-modify-write) unit ([R-ACC] ``accum.sv``).

    Attributes:
        mode: ``mxint8_running`` (HBQ: 8-bit values + one shared exponent per block),
            ``mxint8_group``, ``fp16`` or ``fp32``.
        block_elems: partial sums per MXINT8 block = per PSUM word (SA_N).
        unit_latency_cycles: accumulate unit, PE result to write-back (RTL: 2 for MXINT8
            through hbq_psum_unit, 1 for FP16: the combinational adder and its register).
        unit_ii_cycles: accumulate unit initiation interval (RTL).
    """

    mode: PsumMode = param(doc="partial-sum storage mode")
    block_elems: int = param(default=16, ge=1, doc="partial sums per MXINT8 block / word")
    unit_latency_cycles: int = param(default=2, ge=0, doc="accumulate unit latency")
    unit_ii_cycles: int = param(default=1, ge=1, doc="accumulate unit initiation interval")

    @property
    def bits_per_element(self) -> Fraction:
        """Stored bits per partial sum (exponent share included)."""
        return _psum_bits(self.mode, self.block_elems)


@dataclass(frozen=True)
class BufferConfig(OnChipBuffer):
    """One on-chip SRAM buffer of the HBQ accelerator: the shared
    :class:`~coaccel.sim.common.buffer.OnChipBuffer` plus double buffering.

    Widths mean the same in every buffer: ``bank_width_bits`` is one bank's word; a full-width
    access reads all banks plus the ``sideband_bits`` register file (``access_width_bits``).
    The PE array reads ACT and WGT a full-width access at a time (one token's, or one PE's,
    PE step per access) and PSUM a bank word at a time (one MXINT8 block or 16 FP16 partial sums
    per word, ``n_pes / psum.block_elems`` words in distinct banks per cycle).

    Attributes:
        size_kib: capacity, KiB.
        banks: independently addressed banks.
        bank_width_bits: bits of one bank word.
        sideband_bits: bits of the scale register file read with every full-width access
            (the ACT buffer's per-block scales and L2 codes); 0 when there is none.
        ports: accesses per bank per cycle (1 = single-port macro: a read and a write to one
            bank conflict; 2 = one read and one write, as the RTL's 1R1W RAM).
        double_buffered: ACT/WGT: two tile slots (load the next tile while computing);
            PSUM: two output tiles (halves the tile depth).
    """

    double_buffered: bool = param(default=True, doc="two slots")


@dataclass(frozen=True)
class BuffersConfig:
    """The three on-chip buffers: activations, weights, partial sums."""

    act: BufferConfig
    wgt: BufferConfig
    psum: BufferConfig


@dataclass(frozen=True)
class TilingConfig:
    """Tile sizes; unset ones follow the buffers (:func:`tile_plan`).

    Attributes:
        tile_n_channels: output channels per tile (TILE_PSUM); a multiple of ``n_pes``.
        tile_m_tokens: tokens per tile; None = as many as the PSUM buffer holds, rounded down
            to a multiple of ``token_granule``.
        tile_k_elems: reduction elements per tile; None = as many as the ACT and WGT buffer
            slots hold, a multiple of the PE pass.
        token_granule: tile_m rounding (TILE_TOKEN, the ACT buffer depth of the RTL).
        attention_key_tile: keys per attention tile; None = the largest multiple of
            ``n_pes`` up to ``tile_n_channels`` whose K and V tiles fit the WGT buffer slots.
        act_resident: keep a token tile's whole activation slab (``tile_m x K``, every K tile)
            in the ACT buffer across the output-channel tiles, so each activation is read from
            DRAM once per token tile instead of once per channel tile; applies to each linear
            layer whose slabs (one per ACT slot) fit the ACT buffer, the others stream.
            Default off: the RTL's ACT buffer holds one 128-token tile.
    """

    tile_n_channels: int = param(ge=1, doc="output channels per tile")
    tile_m_tokens: int | None = param(default=None, ge=1, doc="tokens per tile (None: auto)")
    tile_k_elems: int | None = param(default=None, ge=1, doc="K per tile (None: auto)")
    token_granule: int = param(default=128, ge=1, doc="tile_m rounding")
    attention_key_tile: int | None = param(default=None, ge=1, doc="keys per tile (None: auto)")
    act_resident: bool = param(default=False, doc="activation slab stays in the ACT buffer")


@dataclass(frozen=True)
class VectorUnitConfig:
    """The element-wise unit that computes the attention softmax (online, per key tile).

    Attributes:
        elems_per_cycle: score elements processed per cycle.
        latency_cycles: pipeline latency.
    """

    elems_per_cycle: int = param(ge=1, doc="elements per cycle")
    latency_cycles: int = param(default=8, ge=0, doc="pipeline latency")


@dataclass(frozen=True)
class HbqArchConfig:
    """One accelerator design point (``arch_configs/hbq_asic/<name>.yaml``; docs/hbq_sim.md).

    Attributes:
        kind: ``"hbq_asic"``: which simulator the file is for (:func:`coaccel.simulate`
            dispatches on it).
        name: short name (``hbq_e_28nm``).
        description: one line.
        freq_mhz: clock, MHz.
        pe_array: the PE array.
        formats: operand formats.
        psum: partial-sum mode and accumulate unit.
        buffers: ACT, WGT and PSUM buffers.
        tiling: tile sizes.
        vector_unit: softmax unit.
        dram: off-chip DRAM (the shared block; a file under ``arch_configs/dram/`` or inline).
        sources: provenance of figures, keyed by dotted field path (``pe_array.n_pes``).
    """

    VERSION: ClassVar[int] = 1
    VALIDATE_READS: ClassVar[tuple[str, ...]] = (
        "pe_array", "formats", "psum", "buffers", "tiling", "sources",
    )  # fmt: skip
    """The fields :meth:`validate` reads: designs that share them share its result (a sweep
    over the clock or the DRAM checks each combination of the other sections once)."""

    kind: Literal["hbq_asic"] = param(doc="simulator kind: hbq_asic")
    name: str = param(doc="short name")
    freq_mhz: float = param(gt=0, le=10_000, doc="clock (at most 10 GHz)")
    pe_array: PeArrayConfig = param(doc="PE array")
    formats: FormatsConfig = param(doc="operand formats")
    psum: PsumConfig = param(doc="partial sums")
    buffers: BuffersConfig = param(doc="on-chip buffers")
    tiling: TilingConfig = param(doc="tile sizes")
    vector_unit: VectorUnitConfig = param(doc="softmax unit")
    dram: DramConfig = param(doc="off-chip DRAM")
    description: str = param(default="", doc="one line")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: PE pass vs blocks, PSUM words, tiles that fit the buffers."""
        out: list[Problem | str] = []
        pe = self.pe_array
        for role in ("weight", "activation", "kv"):
            f: OperandFormatConfig = getattr(self.formats, role)
            b = f.block_elems
            if b > 1 and pe.macs_per_pe % b and b % pe.macs_per_pe:
                out.append(
                    Problem(
                        "",
                        f"formats.{role}.block_elems",
                        b,
                        f"block_elems={b} and pe_array.macs_per_pe={pe.macs_per_pe}: one must "
                        "divide the other (a PE pass covers whole blocks, or a block whole passes)",
                    )
                )
        sa_n = self.psum.block_elems
        if pe.n_pes % sa_n:
            out.append(
                Problem(
                    "",
                    "psum.block_elems",
                    sa_n,
                    f"pe_array.n_pes={pe.n_pes} must be a multiple of psum.block_elems={sa_n} "
                    "(each cycle the array writes whole PSUM words)",
                )
            )
        words = -(-pe.n_pes // sa_n)
        if self.buffers.psum.banks < words:
            out.append(
                Problem(
                    "",
                    "buffers.psum.banks",
                    self.buffers.psum.banks,
                    f"each cycle the array reads and writes back {words} PSUM words (n_pes / "
                    f"block_elems); they must lie in distinct banks: banks >= {words}",
                )
            )
        word = self.psum.bits_per_element * sa_n
        if self.buffers.psum.bank_width_bits < word:
            out.append(
                Problem(
                    "",
                    "buffers.psum.bank_width_bits",
                    self.buffers.psum.bank_width_bits,
                    f"a PSUM bank word must hold {sa_n} partial sums in {self.psum.mode}: "
                    f"{word} bits",
                )
            )
        if self.tiling.tile_n_channels % pe.n_pes:
            out.append(
                Problem(
                    "",
                    "tiling.tile_n_channels",
                    self.tiling.tile_n_channels,
                    f"must be a multiple of pe_array.n_pes={pe.n_pes}",
                )
            )
        if not out:
            out.extend(Problem("", k, v, m) for k, v, m in _plan_problems(self))
        out.extend(source_key_problems(self, self.sources))
        return out


# ---------------------------------------------------------------------------------------------
# Formats


def _registry_check(f: OperandFormatConfig, role: str) -> tuple[Any, list[tuple[str, Any, str]]]:
    """(trace format, problems): the format the traces use, and mismatches with the registry."""
    registered = tuple(format_names())
    spec, problems = _registry_check_of(f, role, registered)
    if problems:  # messages show the values as given (equal blocks may spell them 1 or 1.0)
        return _registry_check_uncached(f, role, registered)
    return spec, []


@functools.lru_cache(maxsize=1024)
def _registry_check_of(
    f: OperandFormatConfig, role: str, registered: tuple[str, ...]
) -> tuple[Any, tuple[tuple[str, Any, str], ...]]:
    # A pure function of the (frozen) operand config and the registered format names; sweeps
    # ask it for the same few formats on every design point.
    spec, problems = _registry_check_uncached(f, role, registered)
    return spec, tuple(problems)


def _registry_check_uncached(
    f: OperandFormatConfig, role: str, registered: tuple[str, ...]
) -> tuple[Any, list[tuple[str, Any, str]]]:
    name = f.format.lower()
    bits = f.bits_per_element()
    problems: list[tuple[str, Any, str]] = []
    if name in PLAIN_FORMAT_BITS:
        want = PLAIN_FORMAT_BITS[name]
        if bits != want or f.element_bits != want:
            problems.append(
                (
                    "element_bits",
                    f.element_bits,
                    f"{name} is {want} bits per element with no scales (fields give {bits})",
                )
            )
        return name, problems
    if name not in registered:
        return OperandStorage(f.format, bits), problems
    try:
        if name in HBQ_PRESETS:
            opts: dict[str, Any] = dict(
                role=role, block=f.block_elems, ub=f.ub_elems or f.block_elems, l2=f.l2_scheme
            )
            opts["l2_bits"] = f.l2_bits
            spec = resolve(name, **opts)
        else:
            try:
                spec = resolve(name, block=f.block_elems)
            except (TypeError, ValueError):
                spec = resolve(name)
    except (TypeError, ValueError) as e:
        problems.append(("format", f.format, f"{f.format!r} with these fields: {e}"))
        return None, problems
    reg_bits = Fraction(spec.bits_per_element())
    reg_block = getattr(spec, "block", None)
    reg_elem = getattr(spec, "element_bits", f.element_bits)
    if reg_elem != f.element_bits:
        problems.append(
            (
                "element_bits",
                f.element_bits,
                f"the registered format {f.format!r} has {reg_elem}-bit elements",
            )
        )
    elif reg_bits != bits or (reg_block is not None and reg_block != f.block_elems):
        problems.append(
            (
                "format",
                f.format,
                f"the fields give {float(bits):g} bits per element (block {f.block_elems}) but "
                f"the registered format {f.format!r} has {float(reg_bits):g} (block "
                f"{reg_block}); fix the fields, or use another name to describe a format by "
                "its fields alone",
            )
        )
    return spec, problems


def operand_format(arch: HbqArchConfig, role: Role, *, quantized: bool = True) -> Any:
    """The format object the traces use for an operand.

    Args:
        arch: the architecture.
        role: ``"weight"``, ``"activation"`` or ``"kv"``.
        quantized: for ``"kv"``: False gives ``"fp16"`` (an unquantized KV cache).

    Returns:
        A registry :class:`~coaccel.models.formats.FormatSpec`, an
        :class:`~coaccel.models.hbq.OperandStorage`, or a plain format name (``"fp16"``).
    """
    if role == "kv" and not quantized:
        return "fp16"
    spec, problems = _registry_check(getattr(arch.formats, role), role)
    if problems:  # unreachable for a loaded config (validate() reported them)
        raise ValueError("; ".join(m for _, _, m in problems))
    return spec


# ---------------------------------------------------------------------------------------------
# Tiles


@dataclass(frozen=True)
class TilePlan:
    """The tiles an architecture's buffers allow (linear layers).

    Attributes:
        tile_m: tokens per tile (the PSUM buffer's depth).
        tile_n: output channels per tile.
        tile_k: reduction elements per tile.
        kstep_elems: reduction elements per PE pass step (``macs_per_pe`` or a whole block).
        n_buffers: operand buffer slots (2 = double buffering).
        psum_bits: stored bits per partial sum.
        psum_capacity_elems: partial sums the PSUM buffer holds per output tile.
    """

    tile_m: int
    tile_n: int
    tile_k: int
    kstep_elems: int
    n_buffers: int
    psum_bits: Fraction
    psum_capacity_elems: int


def _kstep(arch: HbqArchConfig) -> int:
    return _kstep_of(arch.formats, arch.pe_array.macs_per_pe)


def _kstep_of(formats: FormatsConfig, macs_per_pe: int) -> int:
    blocks = [getattr(formats, r).block_elems for r in ("weight", "activation", "kv")]
    step = macs_per_pe
    for b in blocks:
        if b > 1:
            step = math.lcm(step, b)
    return step


def _plan(arch: HbqArchConfig) -> tuple[TilePlan | None, list[tuple[str, Any, str]]]:
    parts = (arch.tiling, arch.buffers, arch.psum, arch.formats, arch.pe_array.macs_per_pe)
    plan, problems = _plan_of(*parts)
    if problems:  # messages show the values as given (equal blocks may spell them 1 or 1.0)
        return _plan_uncached(*parts)
    return plan, []


@functools.lru_cache(maxsize=1024)
def _plan_of(
    t: TilingConfig, bufs: BuffersConfig, psum: PsumConfig, formats: FormatsConfig, macs_per_pe: int
) -> tuple[TilePlan | None, tuple[tuple[str, Any, str], ...]]:
    # The tiles depend on these blocks only (not on the clock, DRAM or PE count), so design
    # points that differ elsewhere share one plan.
    plan, problems = _plan_uncached(t, bufs, psum, formats, macs_per_pe)
    return plan, tuple(problems)


def _plan_uncached(
    t: TilingConfig, bufs: BuffersConfig, psum: PsumConfig, formats: FormatsConfig, macs_per_pe: int
) -> tuple[TilePlan | None, list[tuple[str, Any, str]]]:
    problems: list[tuple[str, Any, str]] = []
    psum_bits = psum.bits_per_element
    cap = int(Fraction(bufs.psum.size_bytes * 8) / psum_bits)
    if bufs.psum.double_buffered:
        cap //= 2
    tile_n = t.tile_n_channels
    if t.tile_m_tokens is None:
        tile_m = cap // tile_n // t.token_granule * t.token_granule
        if tile_m < 1:
            problems.append(
                (
                    "buffers.psum.size_kib",
                    bufs.psum.size_kib,
                    f"the PSUM buffer holds {cap} partial sums per output tile: not one token "
                    f"granule ({t.token_granule} tokens) x tile_n_channels={tile_n}",
                )
            )
            return None, problems
    else:
        tile_m = t.tile_m_tokens
        if tile_m * tile_n > cap:
            problems.append(
                (
                    "tiling.tile_m_tokens",
                    tile_m,
                    f"{tile_m} tokens x {tile_n} channels = {tile_m * tile_n} partial sums do "
                    f"not fit the PSUM buffer ({cap} at {float(psum_bits):g} bits)",
                )
            )
            return None, problems
    nb = 2 if (bufs.act.double_buffered and bufs.wgt.double_buffered) else 1
    kstep = _kstep_of(formats, macs_per_pe)
    act_bits = formats.activation.bits_per_element()
    wgt_bits = formats.weight.bits_per_element()
    act_slot = Fraction(bufs.act.size_bytes * 8, nb)
    wgt_slot = Fraction(bufs.wgt.size_bytes * 8, nb)
    k_act = act_slot / (tile_m * act_bits)
    k_wgt = wgt_slot / (tile_n * wgt_bits)
    if t.tile_k_elems is None:
        tile_k = int(min(k_act, k_wgt)) // kstep * kstep
        if tile_k < 1:
            which = "act" if k_act < k_wgt else "wgt"
            need = kstep * (tile_m * act_bits if which == "act" else tile_n * wgt_bits) * nb
            problems.append(
                (
                    f"buffers.{which}.size_kib",
                    getattr(bufs, which).size_kib,
                    f"one {'ACT' if which == 'act' else 'WGT'} buffer slot (of {nb}) does not "
                    f"hold one PE step of {kstep} elements for a {tile_m} x {tile_n} tile "
                    f"(needs {_kib(need)} KiB)",
                )
            )
            return None, problems
    else:
        tile_k = t.tile_k_elems
        if tile_k % kstep:
            problems.append(
                ("tiling.tile_k_elems", tile_k, f"must be a multiple of the PE step {kstep}")
            )
        for which, lim, bits, rows in (
            ("act", k_act, act_bits, tile_m),
            ("wgt", k_wgt, wgt_bits, tile_n),
        ):
            if tile_k > lim:
                problems.append(
                    (
                        "tiling.tile_k_elems",
                        tile_k,
                        f"a {rows} x {tile_k} tile at {float(bits):g} bits needs "
                        f"{_kib(rows * tile_k * bits * nb)} KiB of {which.upper()} buffer "
                        f"({nb} slots), more than buffers.{which}.size_kib="
                        f"{getattr(bufs, which).size_kib:g}",
                    )
                )
        if problems:
            return None, problems
    plan = TilePlan(tile_m, tile_n, tile_k, kstep, nb, psum_bits, cap)
    return plan, problems


def _kib(bits: Fraction | int) -> str:
    return f"{float(Fraction(bits) / 8 / 1024):.4g}"


def _plan_problems(arch: HbqArchConfig) -> list[tuple[str, Any, str]]:
    return _plan(arch)[1]


def tile_plan(arch: HbqArchConfig) -> TilePlan:
    """The linear-layer tiles of an architecture (docs/hbq_sim.md, "Tiles").

    ``tile_m`` = tokens whose ``tile_n`` partial sums fit the PSUM buffer (rounded down to
    ``token_granule``): 512 for HBQ's 8.5-bit MXINT8 partial sums in 136 KiB, 256 for FP16.
    ``tile_k`` = the largest multiple of the PE step whose ``tile_m x tile_k`` activations and
    ``tile_n x tile_k`` weights fit one ACT and one WGT buffer slot.

    Args:
        arch: a loaded (validated) architecture.

    Returns:
        The :class:`TilePlan`.

    Raises:
        ConfigError: the tiles do not fit (only for configs built without validation).
    """
    plan, problems = _plan(arch)
    if plan is None:
        raise ConfigError([Problem(arch.name, k, v, m) for k, v, m in problems])
    return plan


def attention_tiles(
    arch: HbqArchConfig, *, head_dim: int, group: int, kv_quantized: bool = True
) -> tuple[int, int]:
    """Query rows and keys per attention tile.

    Keys: ``tiling.attention_key_tile`` or the largest multiple of ``n_pes`` (at most
    ``tile_n_channels``) whose K and V tiles, ``n_buffers`` slots each, fit the WGT buffer.
    Rows (query tokens x the ``group`` query heads that share a KV head, token-major): the
    largest multiple of ``group`` such that the score tile and the output accumulator
    (``rows x (keys + head_dim)`` partial sums) fit the PSUM buffer and the Q tile plus
    ``n_buffers`` softmax-output tiles fit the ACT buffer.

    Args:
        arch: the architecture.
        head_dim: elements per head.
        group: query heads per KV head (GQA group size).
        kv_quantized: KV cache in ``formats.kv`` (True) or FP16 (False).

    Returns:
        ``(rows, keys)``.

    Raises:
        ConfigError: not even one key block or one group of rows fits.
    """
    plan = tile_plan(arch)
    bufs = arch.buffers
    nb = plan.n_buffers
    p = arch.pe_array.n_pes
    kv_bits = arch.formats.kv.bits_per_element() if kv_quantized else Fraction(16)
    act_bits = arch.formats.activation.bits_per_element()
    problems = []
    if arch.tiling.attention_key_tile is not None:
        keys = arch.tiling.attention_key_tile
    else:
        fit = Fraction(bufs.wgt.size_bytes * 8) / (2 * nb * head_dim * kv_bits)
        keys = min(int(fit), plan.tile_n) // p * p
    if keys < 1 or 2 * nb * keys * head_dim * kv_bits > bufs.wgt.size_bytes * 8:
        problems.append(
            (
                "buffers.wgt.size_kib",
                bufs.wgt.size_kib,
                f"the WGT buffer does not hold {2 * nb} K/V tiles of "
                f"{max(keys, p)} keys x {head_dim} at {float(kv_bits):g} bits",
            )
        )
    else:
        rows_psum = plan.psum_capacity_elems // (keys + head_dim)
        rows_act = int(Fraction(bufs.act.size_bytes * 8) / ((head_dim + nb * keys) * act_bits))
        rows = min(rows_psum, rows_act) // group * group
        if rows < group:
            problems.append(
                (
                    "buffers.act.size_kib",
                    bufs.act.size_kib,
                    f"the PSUM/ACT buffers do not hold one attention tile of {group} rows "
                    f"(GQA group) x {keys} keys (head_dim {head_dim})",
                )
            )
        else:
            return rows, keys
    raise ConfigError([Problem(arch.name, k, v, m) for k, v, m in problems])


# ---------------------------------------------------------------------------------------------
# Loading


def arch_path(name: str | Path) -> Path:
    """The file of an architecture: a shipped name (``"hbq_e_28nm"``) or a path.

    Args:
        name: one of :data:`ARCH_NAMES` (with or without ``.yaml``) or a file path.

    Returns:
        The path (it may not exist if a path was given).
    """
    return arch_file(KIND, ARCH_NAMES, name)


def load_arch(name: str | Path) -> HbqArchConfig:
    """Load an architecture by shipped name or path (:func:`coaccel.config.load_config`).

    Args:
        name: one of :data:`ARCH_NAMES` or a YAML file path.

    Returns:
        The validated :class:`HbqArchConfig`.

    Raises:
        ConfigError: every problem of the file.
    """
    return load_config(arch_path(name), HbqArchConfig)
