"""Bit-exact block-quantization formats: element formats, scale formats, block formats.

Public entry point: :func:`quantize` (returns a :class:`QuantizedTensor` holding integer codes
and scale codes, with ``.dequantize()``), plus :func:`pack` / :func:`unpack` to the bit layouts of
``docs/formats.md`` ("Bit packing"). Formats are selected by name (:func:`format_names`); see
``docs/formats.md`` for each format's semantics, rounding default and corner-case rules.
"""

from . import _block, _elem, _hbq, _pack, _scale
from ._block import *  # noqa: F403
from ._elem import *  # noqa: F403  (element formats; curated by _elem.__all__)
from ._hbq import *  # noqa: F403
from ._pack import *  # noqa: F403
from ._quantized import (
    ROUNDING_MODES,
    FormatSpec,
    QuantizationRangeWarning,
    QuantizedTensor,
    block_axis,
    format_names,
    quantize,
    register,
    resolve,
    unblock,
)
from ._scale import *  # noqa: F403

__all__ = [
    "ROUNDING_MODES",
    "FormatSpec",
    "QuantizationRangeWarning",
    "QuantizedTensor",
    "block_axis",
    "format_names",
    "quantize",
    "register",
    "resolve",
    "unblock",
    *_elem.__all__,
    *_scale.__all__,
    *_block.__all__,
    *_hbq.__all__,
    *_pack.__all__,
]
