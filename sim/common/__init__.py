"""The simulator core every target is built from (``coaccel.sim.common``).

Public names:

* :class:`SimTarget` — what a simulator target declares about itself (its ``kind:``, config
  schema, loaders, modes and ``simulate``) so that :func:`coaccel.simulate`, ``coaccel sim`` and
  sweeps can run it without knowing it.
* :mod:`offchip` — the off-chip memory model (channels, interleave, efficiency curve of transfer
  size, first-access latency, open rows) over a :class:`~coaccel.config.DramConfig`.
* :class:`OnChipBuffer` — the on-chip buffer model (capacity, banks, bank width, ports).
* :class:`SimResult` — the base of every target's result, with a flat ``metrics()``.
* :class:`PricedComponents` and its parts (:class:`MacArray`, :class:`BufferUse`,
  :class:`LogicUse`, :class:`OffChipUse`) — the typed input of the cost model.
"""

from . import offchip
from .buffer import OnChipBuffer
from .priced import BufferUse, LogicUse, MacArray, MacFormat, OffChipUse, PricedComponents
from .result import BufferAccess, Metric, OffchipAccess, SimResult
from .target import SimTarget

__all__ = [
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
    "SimResult",
    "SimTarget",
    "offchip",
]
