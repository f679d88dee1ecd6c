"""Derived hardware parameters of an architecture, shared by the cycle-approximate engine and the
analytical model (docs/hbq_sim.md, "The hardware model").

Everything here is a pure function of the :class:`~.config.HbqArchConfig`: cycles per weight
propagation, token issue interval, pipeline latency, DRAM bytes per cycle, and the format table
that maps a trace's format names to element widths and storage bits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from coaccel.models.hbq import PLAIN_FORMAT_BITS, operand_storage

from ..common import offchip
from .config import HbqArchConfig, Role, _kstep, operand_format

__all__ = ["FormatInfo", "HwParams", "hw_params"]


@dataclass(frozen=True)
class FormatInfo:
    """What the PE array needs to know about an operand format.

    Attributes:
        name: the format name as traces write it.
        element_bits: bits per element code (for bit-sliced passes).
        bits: effective storage bits per element (scales included).
    """

    name: str
    element_bits: int
    bits: Fraction


@dataclass(frozen=True)
class HwParams:
    """Per-architecture constants of the timing model (all cycles of the array clock).

    Attributes:
        n_pes: PEs. macs_per_pe: MACs per PE per cycle. kstep: reduction elements per PE step.
        sa_n: partial sums per PSUM word.
        native_act_bits / native_wgt_bits: element widths the multipliers take per pass.
        pe_ii_cycles / unit_ii_cycles: PE and accumulate-unit initiation intervals.
        shift_cycles_per_pe: weight shift cycles per PE. shadow_regs: weights shift in while
            computing.
        act_width_bits / wgt_width_bits: bits one full-width access of the ACT / WGT buffer
            delivers per cycle (``banks x bank_width_bits + sideband_bits``).
        psum_banks / psum_ports: PSUM banks and accesses per bank per cycle.
        psum_word_bits: bits per PSUM word (``sa_n`` partial sums + exponent).
        writeback_stage_cycles: cycles from a token's issue to its partial-sum write-back (ACT
            read + broadcast + PE + accumulate unit; 6 in the RTL's hbq_array with MXINT8
            partial sums).
        psum_read_stage_cycles: cycles from a token's issue to its partial-sum read (one cycle
            before the PE result, the synchronous read: 3 in hbq_array).
        fsm_cycles: tile state-machine overhead per transition (2 in hbq_array).
        dram_bytes_per_cycle: sustained streaming DRAM bandwidth, B/cycle (HBQ moves whole
            tiles: the efficiency curve's streaming end). dram_latency_cycles: first-access DRAM
            latency, cycles (both from :mod:`coaccel.sim.common.offchip`).
        vector_elems_per_cycle / vector_latency_cycles: softmax unit.
        act_formats / wgt_formats: format tables for the A and W operand of compute records.
        freq_mhz: clock.
    """

    n_pes: int
    macs_per_pe: int
    kstep: int
    sa_n: int
    native_act_bits: int
    native_wgt_bits: int
    pe_ii_cycles: int
    unit_ii_cycles: int
    shift_cycles_per_pe: int
    shadow_regs: bool
    act_width_bits: int
    wgt_width_bits: int
    psum_banks: int
    psum_ports: int
    psum_word_bits: Fraction
    writeback_stage_cycles: int
    psum_read_stage_cycles: int
    fsm_cycles: int
    dram_bytes_per_cycle: float
    dram_latency_cycles: int
    vector_elems_per_cycle: int
    vector_latency_cycles: int
    act_formats: Mapping[str, FormatInfo]
    wgt_formats: Mapping[str, FormatInfo]
    freq_mhz: float

    @property
    def result_stage_cycles(self) -> int:
        """Cycles from a token's issue to its result leaving the array (write-back + 1)."""
        return self.writeback_stage_cycles + 1

    @property
    def peak_macs_per_cycle(self) -> int:
        """``n_pes * macs_per_pe``."""
        return self.n_pes * self.macs_per_pe

    def act_words(self, fmt_a: str) -> int:
        """ACT-buffer words holding one PE step (``kstep`` elements) of an A operand."""
        return math.ceil(self.kstep * self.act_info(fmt_a).bits / self.act_width_bits)

    def wgt_words(self, fmt_b: str) -> int:
        """WGT-buffer words holding one PE step of a W operand."""
        return math.ceil(self.kstep * self.wgt_info(fmt_b).bits / self.wgt_width_bits)

    def prop_cycles(self, fmt_b: str) -> int:
        """Cycles to shift one set of weights (``kstep`` elements per PE) into all PEs."""
        return self.n_pes * self.shift_cycles_per_pe * self.wgt_words(fmt_b)

    def passes(self, fmt_a: str, fmt_b: str) -> int:
        """Bit-sliced passes for operands wider than the multipliers ([OURS], docs)."""
        a, b = self.act_info(fmt_a), self.wgt_info(fmt_b)
        return math.ceil(a.element_bits / self.native_act_bits) * math.ceil(
            b.element_bits / self.native_wgt_bits
        )

    def issue_ii(self, fmt_a: str) -> int:
        """Token issue interval without bit-sliced passes: PE, ACT port and accumulate unit."""
        return max(self.pe_ii_cycles, self.act_words(fmt_a), self.unit_ii_cycles)

    def token_ii(self, fmt_a: str, fmt_b: str) -> int:
        """Token issue interval: passes x max(PE, ACT port), at least the accumulate unit's."""
        act_ii = self.act_words(fmt_a)
        return max(self.passes(fmt_a, fmt_b) * max(self.pe_ii_cycles, act_ii), self.unit_ii_cycles)

    def dram_cycles(self, nbytes: int) -> int:
        """Cycles the DRAM channel is busy moving ``nbytes`` (sustained bandwidth)."""
        return math.ceil(nbytes / self.dram_bytes_per_cycle) if nbytes > 0 else 0

    def act_info(self, name: str) -> FormatInfo:
        """Format of an A operand (KeyError names the known ones)."""
        return _lookup(self.act_formats, name, "activation")

    def wgt_info(self, name: str) -> FormatInfo:
        """Format of a W operand (weights or KV cache)."""
        return _lookup(self.wgt_formats, name, "weight/kv")


def _lookup(table: Mapping[str, FormatInfo], name: str, role: str) -> FormatInfo:
    info = table.get(name)
    if info is None:
        raise KeyError(
            f"format {name!r} is not a {role} format of this architecture; known: "
            f"{', '.join(sorted(table))}"
        )
    return info


def _plain(name: str) -> FormatInfo:
    bits = PLAIN_FORMAT_BITS[name]
    return FormatInfo(name, bits, Fraction(bits))


def hw_params(arch: HbqArchConfig) -> HwParams:
    """The timing constants of an architecture.

    Args:
        arch: a loaded architecture.

    Returns:
        The :class:`HwParams`.
    """
    pe, bufs, fm = arch.pe_array, arch.buffers, arch.formats
    act_formats = {n: _plain(n) for n in PLAIN_FORMAT_BITS}
    wgt_formats = dict(act_formats)
    roles: tuple[tuple[Role, dict[str, FormatInfo]], ...] = (
        ("activation", act_formats),
        ("weight", wgt_formats),
        ("kv", wgt_formats),
    )
    for role, table in roles:
        cfg = getattr(fm, role)
        name, bits = operand_storage(operand_format(arch, role), role)
        old = table.get(name)
        if old is not None and name not in PLAIN_FORMAT_BITS:
            # Weights and KV cache may share a name (HBQ): keep the larger storage (a
            # conservative propagation time); element widths are equal (validated).
            bits = max(bits, old.bits)
        table[name] = FormatInfo(name, cfg.element_bits, bits)
    return HwParams(
        n_pes=pe.n_pes,
        macs_per_pe=pe.macs_per_pe,
        kstep=_kstep(arch),
        sa_n=arch.psum.block_elems,
        native_act_bits=pe.native_act_bits,
        native_wgt_bits=pe.native_wgt_bits,
        pe_ii_cycles=pe.ii_cycles,
        unit_ii_cycles=arch.psum.unit_ii_cycles,
        shift_cycles_per_pe=pe.wgt_shift_cycles_per_pe,
        shadow_regs=pe.weight_shadow_regs,
        act_width_bits=bufs.act.access_width_bits,
        wgt_width_bits=bufs.wgt.access_width_bits,
        psum_banks=bufs.psum.banks,
        psum_ports=bufs.psum.ports,
        psum_word_bits=arch.psum.bits_per_element * arch.psum.block_elems,
        writeback_stage_cycles=pe.act_read_cycles
        + pe.broadcast_stages
        + pe.latency_cycles
        + arch.psum.unit_latency_cycles,
        psum_read_stage_cycles=max(
            0, pe.act_read_cycles + pe.broadcast_stages + pe.latency_cycles - 1
        ),
        fsm_cycles=pe.fsm_cycles,
        dram_bytes_per_cycle=float(offchip.sustained_bytes_per_cycle(arch.dram, arch.freq_mhz)),
        dram_latency_cycles=offchip.latency_cycles(arch.dram, arch.freq_mhz),
        vector_elems_per_cycle=arch.vector_unit.elems_per_cycle,
        vector_latency_cycles=arch.vector_unit.latency_cycles,
        act_formats=act_formats,
        wgt_formats=wgt_formats,
        freq_mhz=arch.freq_mhz,
    )
