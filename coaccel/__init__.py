"""coaccel: accelerator co-design for LLM inference.

Bit-exact numpy references (``coaccel.models``) produce values and traces (``coaccel.trace``);
cycle-approximate simulators (``coaccel.sim``) turn traces into cycles; ``coaccel.cost`` turns
statistics into energy and area; the RTL in ``rtl/`` is checked against the same references.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "simulate"]


def simulate(
    arch: Any,
    workload: Any,
    *,
    mode: str = "analytical",
    overrides: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Simulate a workload on an architecture of any registered kind.

    See :func:`coaccel.simulation.simulate` (imported on first call, so ``import coaccel``
    stays light).
    """
    from .simulation import simulate as _simulate

    return _simulate(arch, workload, mode=mode, overrides=overrides, **options)
