"""Pieces every simulator shares: off-chip memory, on-chip buffers and the result base."""

from . import offchip as offchip
from .buffer import OnChipBuffer as OnChipBuffer
from .result import BufferAccess as BufferAccess
from .result import Metric as Metric
from .result import OffchipAccess as OffchipAccess
from .result import SimResult as SimResult
