"""Statistics the HBQ ASIC simulator returns: frozen dataclasses of plain numbers (no I/O).

:class:`HbqSimStats` is the API result of :func:`~coaccel.sim.hbq_asic.simulate` in both modes. It
builds on the shared :class:`~coaccel.sim.common.result.SimResult` (target-independent
``metrics()`` for sweeps and reports) and adds the HBQ fields; :meth:`HbqSimStats.to_dict` gives
JSON-ready data. See docs/hbq_sim.md for every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..common.result import BufferAccess, Metric, OffchipAccess, SimResult, plain

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


DramAccess = OffchipAccess
"""Off-chip traffic of the HBQ simulator, counted from the simulated trace records (the shared
:class:`~coaccel.sim.common.result.OffchipAccess`: reads, writes, read_bytes, write_bytes,
by_tensor; ``total_bytes``)."""

_TILE_UNITS: Mapping[str, str] = {
    "tile_m": "token",
    "tile_n": "channel",
    "tile_k": "element",
    "attn_rows": "row",
    "attn_keys": "key",
    "n_buffers": "slot",
    "act_resident": "1",
}


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


@dataclass(frozen=True, kw_only=True)
class HbqSimStats(SimResult):
    """The simulation of one workload on one HBQ architecture, as data.

    Builds on the target-independent :class:`~coaccel.sim.common.result.SimResult`: its
    ``resources`` are ``{"pe_array": stall_cycles}`` and its ``offchip`` is ``dram`` (both
    derived when not given), ``target`` is ``"hbq_asic"``. Construct with keywords.

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
            ``attn_keys``, ``n_buffers``, ``act_resident``).
        layers: transformer layers. layers_simulated: layers simulated (1: identical layers are
            simulated once and scaled; DRAM traffic is that of the simulated trace times
            ``layers``).
        notes: how the numbers were obtained (scaling, approximations).
        target: ``"hbq_asic"``.
        resources: ``{"pe_array": stall_cycles}`` (derived when None).
        offchip: the same record as ``dram`` (derived when None).
    """

    mode: Literal["cycle", "analytical"]
    workload_digest: str
    macs: int
    peak_macs_per_cycle: int
    utilisation: float
    stall_cycles: Mapping[str, int]
    dram: DramAccess
    by_name: Mapping[str, KindStats]
    tiles: Mapping[str, int]
    layers: int
    layers_simulated: int
    target: str = "hbq_asic"
    resources: Mapping[str, Mapping[str, int]] = None  # type: ignore[assignment]
    offchip: OffchipAccess = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.resources is None:
            object.__setattr__(self, "resources", {"pe_array": self.stall_cycles})
        if self.offchip is None:
            object.__setattr__(self, "offchip", self.dram)
        elif self.offchip != self.dram:
            raise ValueError("HbqSimStats: offchip and dram must be the same record")

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

    def metrics(self) -> dict[str, Metric]:
        """The shared metrics (:meth:`SimResult.metrics`) plus the HBQ ones.

        Added: ``macs`` (MAC), ``peak_macs_per_cycle`` (MAC/cycle), ``utilisation`` (1),
        ``layers`` and ``layers_simulated`` (layer); per segment ``segment.<name>.count``
        (copy), ``.cycles`` (cycle), ``.macs`` (MAC), ``.offchip.read_bytes`` and
        ``.offchip.write_bytes`` (B); ``tile.<name>`` in its own unit (``tile_m`` token,
        ``tile_n`` channel, ``tile_k`` element, ``attn_rows`` row, ``attn_keys`` key,
        ``n_buffers`` slot, ``act_resident`` 1).

        Returns:
            A new dict.
        """
        out = super().metrics()
        out["macs"] = (self.macs, "MAC")
        out["peak_macs_per_cycle"] = (self.peak_macs_per_cycle, "MAC/cycle")
        out["utilisation"] = (self.utilisation, "1")
        out["layers"] = (self.layers, "layer")
        out["layers_simulated"] = (self.layers_simulated, "layer")
        for name, k in self.by_name.items():
            out[f"segment.{name}.count"] = (k.count, "copy")
            out[f"segment.{name}.cycles"] = (k.cycles, "cycle")
            out[f"segment.{name}.macs"] = (k.macs, "MAC")
            out[f"segment.{name}.offchip.read_bytes"] = (k.dram_read_bytes, "B")
            out[f"segment.{name}.offchip.write_bytes"] = (k.dram_write_bytes, "B")
        for t, v in self.tiles.items():
            out[f"tile.{t}"] = (v, _TILE_UNITS.get(t, "1"))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (dicts, lists, numbers, strings) of every field."""
        return plain(self)
