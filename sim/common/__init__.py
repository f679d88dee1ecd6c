"""Pieces every simulator builds on (installed as ``coaccel.sim.common``).

* :mod:`~coaccel.sim.common.engine`: a generic event engine with any number of named in-order
  queues (numba fast path, simpy reference) and stall attribution by cause.
* :mod:`~coaccel.sim.common.program`: the program view of a trace (records merged in issue
  order, effective dependencies, string-table codes, distinct tile keys).
"""

from .engine import (
    QueueProgram,
    Queues,
    StallAttribution,
    StallBreakdown,
    TransferCauses,
    attribute_stalls,
    run_program,
)
from .program import (
    QUEUE_NONE,
    RECORD_KINDS,
    RecordView,
    distinct_rows,
    effective_deps,
    merge_records,
    table_code,
)

__all__ = [
    "QUEUE_NONE",
    "RECORD_KINDS",
    "QueueProgram",
    "Queues",
    "RecordView",
    "StallAttribution",
    "StallBreakdown",
    "TransferCauses",
    "attribute_stalls",
    "distinct_rows",
    "effective_deps",
    "merge_records",
    "run_program",
    "table_code",
]
