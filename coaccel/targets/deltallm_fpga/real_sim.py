"""The KV260 simulator's cycle mode on column events from any keys (here: a real decoder's).

:func:`coaccel.sim.deltallm_fpga.simulate` draws its keys from the seeded synthetic generator.
:func:`attention_cycles` runs the same cycle-mode schedule on events the caller brings (the
events of :func:`coaccel.models.deltallm.sparsity_counts` or
:func:`~coaccel.models.deltallm.column_events` on real post-RoPE keys), using the simulator's
public pieces: per (layer, KV head) the MAC array's cycles
(:func:`~coaccel.sim.deltallm_fpga.blocks_cycles` over its query blocks plus the exposed final
normalisation), the DDR load of Q, the exact keys, the Δ bitmask and 9-bit values and V, and
the store of O (:mod:`coaccel.sim.common.offchip`), scheduled by the simulator's own
:func:`~coaccel.sim.deltallm_fpga.double_buffered_cycles` (two buffer slots: the load of head
``k + 2`` waits until head ``k`` has computed). On the same events it gives exactly the
simulator's attention cycles (tested against :func:`~coaccel.sim.deltallm_fpga.simulate` on
synthetic keys).

For the ``"head"`` lane layout (one event per query head) the events of one KV head run one
after the other on the array and share its single K, Δ and V load.

Public: :class:`EventTiming`, :func:`attention_cycles`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from coaccel.models.deltallm import DeltaEvents, head_dram_bytes
from coaccel.sim.common import offchip
from coaccel.sim.deltallm_fpga import blocks_cycles, double_buffered_cycles

__all__ = ["EventTiming", "attention_cycles"]

_LOADS = ("Q", "K", "delta_mask", "delta_values", "V")
_SHARED = ("K", "delta_mask", "delta_values", "V")


@dataclass(frozen=True)
class EventTiming:
    """Attention time of the events' layers on a design.

    Attributes:
        cycles: the schedule's completion, cycles.
        compute_cycles: MAC-array cycles summed over (layer, KV head).
        memory_cycles: DDR load and store cycles summed.
        kv_heads: (layer, KV head) units scheduled.
    """

    cycles: int
    compute_cycles: int
    memory_cycles: int
    kv_heads: int


def _units(events: Sequence[DeltaEvents], group: int) -> list[list[DeltaEvents]]:
    """Events grouped per (layer, KV head), in order of first appearance."""
    out: dict[tuple[int, int], list[DeltaEvents]] = {}
    for ev in events:
        kv = ev.head if ev.group == group else ev.head // group
        out.setdefault((ev.layer, kv), []).append(ev)
    return list(out.values())


def attention_cycles(
    arch: Any,
    events: Sequence[DeltaEvents],
    *,
    group: int,
    engine: Literal["fast", "simpy"] = "fast",
) -> EventTiming:
    """Cycle-mode attention cycles of the events' (layer, KV head) units (module docstring).

    Args:
        arch: a ``delta_vector`` :class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`.
        events: the column events, in (layer, head) order.
        group: ``G`` of the model (query heads per KV head).
        engine: the shared engine, ``"fast"`` (numba) or ``"simpy"``.

    Returns:
        The :class:`EventTiming`.
    """
    f = arch.freq_mhz
    comp, load, store = [], [], []
    for unit in _units(events, group):
        c = sum(int(blocks_cycles(ev.kind, ev.nnz, arch, head_dim=ev.head_dim,
                                  value_dim=ev.value_dim).sum()) for ev in unit)  # fmt: skip
        comp.append(c + arch.pipeline.normalize_cycles)
        nbytes = {k: 0 for k in (*_LOADS, "O")}
        for i, ev in enumerate(unit):
            for k, v in head_dram_bytes(ev).items():
                if i == 0 or k not in _SHARED:
                    nbytes[k] += v
        load.append(int(offchip.transfer_cycles(arch.dram, f, [nbytes[t] for t in _LOADS]).sum()))
        store.append(int(offchip.transfer_cycles(arch.dram, f, [nbytes["O"]]).sum()))
    lat = offchip.latency_cycles(arch.dram, f)
    done = double_buffered_cycles(arch, comp, load, store, lat, engine)
    return EventTiming(done, sum(comp), sum(load) + sum(store), len(comp))
