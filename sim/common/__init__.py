"""The simulator core every target is built from (installed as ``coaccel.sim.common``).

* :mod:`~coaccel.sim.common.engine`: a generic event engine with any number of named in-order
  queues (numba fast path, simpy reference) and stall attribution by cause.
* :mod:`~coaccel.sim.common.program`: the program view of a trace (records merged in issue
  order, effective dependencies, string-table codes, distinct tile keys).
* :mod:`~coaccel.sim.common.offchip`: the off-chip memory model (channels, interleave,
  efficiency curve of transfer size, first-access latency, open rows) over a
  :class:`~coaccel.config.DramConfig`.
* :mod:`~coaccel.sim.common.sectors`: coalescing of strided runs into sector transactions.
* :mod:`~coaccel.sim.common.cache`: a sectored, set-associative, partitioned cache (a GPU L2)
  replayed in numba, with the DRAM channels, runs and open rows behind it, and a plain-Python
  reference of it.
* :mod:`~coaccel.sim.common.hostlink`: a host link (PCIe, NVLink-C2C): per-direction bandwidth,
  fixed cost per copy, size-dependent efficiency, pinned / pageable, zero-copy loads.
* :mod:`~coaccel.sim.common.streams`: streams and events, engines and shared DRAM bandwidth.
* :class:`OnChipBuffer`: the on-chip buffer model (capacity, banks, bank width, ports).
* :class:`SimResult`: the base of every target's result, with a flat ``metrics()``.
* :class:`PricedComponents` and its parts (:class:`MacArray`, :class:`BufferUse`,
  :class:`LogicUse`, :class:`OffChipUse`): the typed input of the cost model.
* :class:`SimTarget`: what a simulator target declares about itself (its ``kind:``, config
  schema, loaders, modes and ``simulate``) so that :func:`coaccel.simulate`, ``coaccel sim`` and
  sweeps can run it without knowing it.
"""

from . import cache, hostlink, offchip, sectors, streams
from .buffer import OnChipBuffer
from .engine import (
    QueueProgram,
    Queues,
    StallAttribution,
    StallBreakdown,
    TransferCauses,
    attribute_stalls,
    run_program,
)
from .priced import BufferUse, LogicUse, MacArray, MacFormat, OffChipUse, PricedComponents
from .program import (
    QUEUE_NONE,
    RECORD_KINDS,
    RecordView,
    distinct_rows,
    effective_deps,
    merge_records,
    table_code,
)
from .result import BufferAccess, Metric, OffchipAccess, SimResult
from .target import SimTarget

__all__ = [
    "QUEUE_NONE",
    "RECORD_KINDS",
    "BufferAccess",
    "BufferUse",
    "LogicUse",
    "MacArray",
    "MacFormat",
    "Metric",
    "OffChipUse",
    "OffchipAccess",
    "OnChipBuffer",
    "PricedComponents",
    "QueueProgram",
    "Queues",
    "RecordView",
    "SimResult",
    "SimTarget",
    "StallAttribution",
    "StallBreakdown",
    "TransferCauses",
    "attribute_stalls",
    "cache",
    "distinct_rows",
    "effective_deps",
    "hostlink",
    "merge_records",
    "offchip",
    "run_program",
    "sectors",
    "streams",
    "table_code",
]
