"""coaccel: accelerator co-design for LLM inference.

Bit-exact numpy references (``coaccel.models``) produce values and traces (``coaccel.trace``);
cycle-approximate simulators (``coaccel.sim``) turn traces into cycles; ``coaccel.cost`` turns
statistics into energy and area; the RTL in ``rtl/`` is checked against the same references.
"""

__version__ = "0.1.0"
