"""Bit-exact numpy reference models (installed as ``coaccel.models``).

Layering rule: this package imports nothing of coaccel except the trace contract
(``coaccel.trace``, a numpy-only leaf module), so the references stay the specification.
"""
