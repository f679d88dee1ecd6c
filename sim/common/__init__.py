"""The simulator core every target is built from (``coaccel.sim.common``).

Public names:

* :class:`SimTarget` — what a simulator target declares about itself (its ``kind:``, config
  schema, loaders, modes and ``simulate``) so that :func:`coaccel.simulate`, ``coaccel sim`` and
  sweeps can run it without knowing it.
* :class:`PricedComponents` and its parts (:class:`MacArray`, :class:`BufferUse`,
  :class:`LogicUse`, :class:`OffChipUse`) — the typed input of the cost model.
"""

from .priced import BufferUse, LogicUse, MacArray, MacFormat, OffChipUse, PricedComponents
from .target import SimTarget

__all__ = [
    "BufferUse",
    "LogicUse",
    "MacArray",
    "MacFormat",
    "OffChipUse",
    "PricedComponents",
    "SimTarget",
]
