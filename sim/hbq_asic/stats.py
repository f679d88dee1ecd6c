"""Statistics the HBQ ASIC simulator returns: frozen dataclasses of plain numbers (no I/O).

:class:`HbqSimStats` is the API result of :func:`~coaccel.sim.hbq_asic.simulate` in both modes;
:meth:`HbqSimStats.to_dict` gives JSON-ready data. See docs/hbq_sim.md for every field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BUFFERS",
    "STALL_CAUSES",
    "BufferAccess",
    "DramAccess",
    "HbqSimStats",
    "KindStats",
]

BUFFERS: tuple[str, ...] = ("ACT", "WGT", "PSUM")
"""On-chip buffers reported in :attr:`HbqSimStats.buffers`."""

STALL_CAUSES: tuple[str, ...] = (
    "weight_propagation",
    "issue_interval",
    "operand_passes",
    "psum_bank_conflict",
    "pipeline_turnaround",
    "dram_bandwidth",
    "dram_latency",
    "vector_unit",
    "pipeline_latency",
    "drain",
)
"""Why the PE array is not issuing a token, cycle by cycle (docs/hbq_sim.md, "Stalls"):

``weight_propagation`` weights shifting into the PE chain; ``issue_interval`` an issue interval
above 1 (PE, ACT-buffer port, accumulate unit); ``operand_passes`` extra bit-sliced passes of
operands wider than the multipliers; ``psum_bank_conflict`` PSUM bank conflicts between a read
and a write-back; ``pipeline_turnaround`` the tile state machine: between waves (control cycles
and the wait for the last token's write-back) and each tile's start and drain (the RTL's
schedule); ``dram_bandwidth`` waiting for operand data queued behind other DRAM transfers (or
being transferred); ``dram_latency`` the DRAM latency of an operand read; ``vector_unit``
waiting for the softmax; ``pipeline_latency`` waiting for a buffer slot or result of the array
itself; ``drain`` after the last tile (the last writes)."""


@dataclass(frozen=True)
class BufferAccess:
    """Accesses of one on-chip buffer.

    Attributes:
        reads: read accesses (words of the buffer's width).
        writes: write accesses (words).
        read_bytes: bytes read.
        write_bytes: bytes written.
        word_bits: bits per access (the ACT/WGT read width, the PSUM word).
    """

    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    word_bits: int


@dataclass(frozen=True)
class DramAccess:
    """Off-chip traffic, counted from the simulated trace records.

    Attributes:
        reads: read transfers (trace records). writes: write transfers.
        read_bytes: bytes read. write_bytes: bytes written.
        by_tensor: bytes per trace tensor name (``wq``, ``x``, ``k_cache``, ...), read + write.
    """

    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    by_tensor: Mapping[str, int]

    @property
    def total_bytes(self) -> int:
        """Read + write bytes."""
        return self.read_bytes + self.write_bytes


@dataclass(frozen=True)
class KindStats:
    """One kind of work (a GEMM of the layer, the attention, the LM head), all copies.

    Attributes:
        kind: ``"linear"``, ``"attention"`` or ``"lm_head"``.
        count: copies (layers x decode steps).
        cycles: PE-array cycles attributed to it (its share of :attr:`HbqSimStats.cycles`).
        macs: multiply-accumulates.
        dram_read_bytes: DRAM bytes read. dram_write_bytes: DRAM bytes written.
    """

    kind: str
    count: int
    cycles: int
    macs: int
    dram_read_bytes: int
    dram_write_bytes: int


@dataclass(frozen=True)
class HbqSimStats:
    """The simulation of one workload on one architecture, as data.

    Attributes:
        arch: architecture name. workload: ``"<model>:<scenario>"``.
        mode: ``"cycle"`` (trace-driven, cycle-approximate) or ``"analytical"``.
        config_digest: :func:`coaccel.config.config_digest` of the architecture.
        workload_digest: digest of the workload file.
        freq_mhz: clock.
        cycles: total cycles. seconds: ``cycles / freq``.
        macs: multiply-accumulates (incl. masked attention tiles that are computed).
        peak_macs_per_cycle: ``n_pes * macs_per_pe``.
        utilisation: ``macs / (cycles * peak_macs_per_cycle)``.
        stall_cycles: cycles by cause (:data:`STALL_CAUSES`) plus ``busy`` (one token issued);
            they sum to ``cycles``.
        buffers: ``"ACT"``, ``"WGT"``, ``"PSUM"`` -> :class:`BufferAccess`.
        dram: :class:`DramAccess`.
        by_name: per segment name (``q_proj`` ... ``down_proj``, ``attention``, ``lm_head``).
        tiles: tile sizes used (``tile_m``, ``tile_n``, ``tile_k``, ``attn_rows``,
            ``attn_keys``, ``n_buffers``).
        layers: transformer layers. layers_simulated: layers simulated (1: identical layers are
            simulated once and scaled; DRAM traffic is that of the simulated trace times
            ``layers``).
        notes: how the numbers were obtained (scaling, approximations).
    """

    arch: str
    workload: str
    mode: Literal["cycle", "analytical"]
    config_digest: str
    workload_digest: str
    freq_mhz: float
    cycles: int
    seconds: float
    macs: int
    peak_macs_per_cycle: int
    utilisation: float
    stall_cycles: Mapping[str, int]
    buffers: Mapping[str, BufferAccess]
    dram: DramAccess
    by_name: Mapping[str, KindStats]
    tiles: Mapping[str, int]
    layers: int
    layers_simulated: int
    notes: tuple[str, ...]

    def by_kind(self, kind: str) -> KindStats:
        """Sum of the segments of one kind (``"linear"``, ``"attention"``, ``"lm_head"``).

        Args:
            kind: the kind.

        Returns:
            A :class:`KindStats` (count = copies of the first segment of that kind).
        """
        rows = [s for s in self.by_name.values() if s.kind == kind]
        return KindStats(
            kind,
            rows[0].count if rows else 0,
            sum(r.cycles for r in rows),
            sum(r.macs for r in rows),
            sum(r.dram_read_bytes for r in rows),
            sum(r.dram_write_bytes for r in rows),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (dicts, lists, numbers, strings)."""
        return _plain(self)


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v
