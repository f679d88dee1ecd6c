"""Energy and area with provenance: PE model, SRAM, DRAM, leakage, technology scaling.

* :func:`pe_cost` / :class:`PeModel`: PE area and energy per MAC as a model of the number
  format, fitted to the published 28 nm figures, with leave-one-out validation and a stated
  one-sigma uncertainty (``docs/cost_model.md``).
* :func:`node_factors`: 28 nm -> 16 / 7 / 5 nm scaling with error bands.
* :func:`sram_cost`: SRAM area / access energy by depth and width; :func:`arch_area` and
  :func:`evaluate`: accelerator area and the energy of a simulated run, per component.
* component tables (:class:`ComponentTable`): every figure with value, unit, source and
  uncertainty (``arch_configs/cost/*.yaml``).
"""

from . import (
    _pe_features,
    _pe_fit,
    _pe_formats,
    _pe_model,
    _sram,
    _synthcal,
    _system,
    _tables,
    _tech,
)
from ._pe_features import *  # noqa: F403
from ._pe_fit import *  # noqa: F403
from ._pe_formats import *  # noqa: F403
from ._pe_model import *  # noqa: F403
from ._sram import *  # noqa: F403
from ._synthcal import *  # noqa: F403
from ._system import *  # noqa: F403
from ._tables import *  # noqa: F403
from ._tech import *  # noqa: F403

__all__ = [
    *_pe_features.__all__,
    *_pe_fit.__all__,
    *_pe_formats.__all__,
    *_pe_model.__all__,
    *_sram.__all__,
    *_synthcal.__all__,
    *_system.__all__,
    *_tables.__all__,
    *_tech.__all__,
]
