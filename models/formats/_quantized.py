"""The quantized-tensor container, the format registry and the public ``quantize`` entry point.

Every block format is a *spec object* (a frozen dataclass implementing :class:`FormatSpec`)
registered under one or more names. ``quantize`` validates the input, moves the blocking axis
last, zero-pads it to a whole number of blocks, and hands float64 blocks of shape
``(..., n_blocks, block)`` to the spec. The spec returns integer codes; the container keeps them
together with everything needed to dequantize and to pack them into the bit layouts of the spec.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

ROUNDING_MODES = ("rne", "half_away", "half_up")
"""Rounding modes on the *signed* real value: ``rne`` ties to even, ``half_away`` ties away
from zero, ``half_up`` ties toward +inf. For sign-magnitude formats HBQ's "half-up on magnitude"
is ``half_away``."""

BACKENDS = ("numpy", "numba")

ROWS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""Dtypes the fused row kernels read (input) and write (dequantized output) directly."""


class FormatSpec(Protocol):
    """What every block format provides (implemented by frozen dataclasses).

    The attributes are read-only: a spec is an immutable value (frozen dataclass fields or
    properties both qualify); variants come from ``dataclasses.replace``.
    """

    @property
    def name(self) -> str:
        """Format name."""
        ...

    @property
    def block(self) -> int:
        """Elements per block (sharing one scale)."""
        ...

    @property
    def element_bits(self) -> int:
        """Element code width, bits."""
        ...

    @property
    def scale_bits(self) -> int:
        """Block scale code width, bits."""
        ...

    @property
    def default_rounding(self) -> str:
        """Element rounding used when the caller passes None."""
        ...

    @property
    def rounding_modes(self) -> tuple[str, ...]:
        """Element rounding modes the format accepts."""
        ...

    def quantize_blocks(
        self, xb: npt.NDArray[np.float64], rounding: str, backend: str
    ) -> dict[str, Any]:
        """Quantize float64 blocks ``(..., n_blocks, block)``.

        Returns a dict with at least ``codes`` (``(..., n_blocks, block)`` unsigned integers) and
        ``scales`` (``(..., n_blocks)`` unsigned integers); optional keys are the other
        :class:`QuantizedTensor` fields (``l2_codes``, ``scheme``, ``tensor_scale``).
        """
        ...

    def dequantize_blocks(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        """Exact float64 values of the blocks, shape ``(..., n_blocks, block)``."""
        ...

    def bits_per_element(self) -> float:
        """Effective storage bits per element, scales and side information included."""
        ...

    def saturation_codes(self) -> tuple[int, int]:
        """Element codes of +max and -max (used for ±Inf inputs under ``nonfinite="saturate"``)."""
        ...


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """A block-quantized tensor: integer codes plus what is needed to decode them.

    Attributes:
        spec: the resolved format spec (carries block size, element/scale formats, options).
        codes: element codes, ``(..., n_blocks, block)``, dtype uint8; the blocking axis is moved
            last and zero-padded to a multiple of ``spec.block``.
        scales: block scale codes, ``(..., n_blocks)``, unsigned integer (uint8 for E8M0, UE4M3,
            E5M3; uint16 where a scale is wider).
        shape: the original tensor shape.
        axis: the blocking axis of the original tensor (non-negative).
        rounding: the rounding mode used.
        l2_codes: HBQ level-2 codes, ``(..., n_blocks, block // ub)``, uint8; else None.
        scheme: HBQ weight Mix selector per L1 block (0 = SIG_2, 1 = SIG_3), uint8; else None.
        tensor_scale: NVFP4's FP32 per-tensor scale (a float32 scalar); else None.
        extra: format-specific details (e.g. the backend that produced the codes).
        clamped_blocks: blocks whose scale hit the end of the scale format's range, so that
            their values could not be represented: the block's largest magnitude is more than
            1.5x the largest it decodes to (scale too small), or its non-zero values all
            decode to zero (scale too large). :func:`quantize` warns once per format when it
            finds any.
    """

    spec: FormatSpec
    codes: npt.NDArray[np.uint8]
    scales: npt.NDArray[np.unsignedinteger]
    shape: tuple[int, ...]
    axis: int
    rounding: str
    l2_codes: npt.NDArray[np.uint8] | None = None
    scheme: npt.NDArray[np.uint8] | None = None
    tensor_scale: np.float32 | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    clamped_blocks: int = 0

    @property
    def format(self) -> str:
        """The format's registered name."""
        return self.spec.name

    @property
    def n_blocks(self) -> int:
        """Number of blocks (over all leading dimensions)."""
        return int(np.prod(self.scales.shape))

    def dequantize_blocks(self) -> npt.NDArray[np.float64]:
        """Exact dequantized values in blocked layout ``(..., n_blocks, block)``, float64."""
        return self.spec.dequantize_blocks(self)

    def dequantize(self, dtype: npt.DTypeLike = np.float32) -> npt.NDArray[np.floating]:
        """Dequantized tensor in the original shape and axis order.

        Values are computed exactly in float64 and then cast once to ``dtype`` (pass
        ``np.float64`` for the exact values; every format here is exact in float64).

        Args:
            dtype: output dtype.

        Returns:
            Array of ``self.shape``.
        """
        dt = np.dtype(dtype)
        rows = getattr(self.spec, "dequantize_rows", None)
        if (
            rows is not None
            and self.extra.get("backend") == "numba"
            and dt in ROWS_DTYPES
            and self.axis == len(self.shape) - 1
        ):
            # Fused path: one pass from codes to the output dtype, no float64 temporary.
            return rows(self, self.shape[-1], dt).reshape(self.shape)
        xb = self.dequantize_blocks()
        return unblock(xb, self.shape, self.axis).astype(dtype, copy=False)

    def bits_per_element(self) -> float:
        """Effective bits per element of the format."""
        return self.spec.bits_per_element()


_REGISTRY: dict[str, Callable[..., FormatSpec]] = {}


def register(name: str, factory: Callable[..., FormatSpec]) -> None:
    """Register a format factory under ``name`` (lower case).

    ``factory(**options)`` must return a spec; unknown options must raise ``TypeError`` or
    ``ValueError`` naming the valid ones.
    """
    key = name.lower()
    if key in _REGISTRY:
        raise ValueError(f"format {name!r} is already registered")
    _REGISTRY[key] = factory


def format_names() -> tuple[str, ...]:
    """All registered format names, sorted."""
    return tuple(sorted(_REGISTRY))


def resolve(fmt: str | FormatSpec, **options: Any) -> FormatSpec:
    """Turn a format name plus options into a spec object (a spec passes through unchanged)."""
    if fmt is None or not (isinstance(fmt, str) or hasattr(fmt, "quantize_blocks")):
        raise TypeError(
            f"fmt must be a format name or a format spec, got {type(fmt).__name__}; valid "
            f"formats: {', '.join(format_names())}"
        )
    if not isinstance(fmt, str):
        if options:
            raise TypeError("options cannot be combined with an already-resolved format spec")
        return fmt
    key = fmt.lower()
    if key not in _REGISTRY:
        raise ValueError(f"unknown format {fmt!r}; valid formats: {', '.join(format_names())}")
    return _REGISTRY[key](**options)


def block_axis(
    x: npt.NDArray[np.floating], axis: int, block: int, *, pad: bool = True
) -> npt.NDArray[np.float64]:
    """Move ``axis`` last, zero-pad it to a multiple of ``block`` and split it into blocks.

    Args:
        x: input array (any float dtype; converted exactly to float64).
        axis: blocking axis.
        block: block length.
        pad: zero-pad a ragged tail (True) or raise ``ValueError`` (False).

    Returns:
        float64 array ``(*other_dims, n_blocks, block)``.
    """
    xm = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = xm.shape[-1]
    rem = (-n) % block
    if rem:
        if not pad:
            raise ValueError(
                f"axis length {n} is not a multiple of the block size {block} (pass pad=True "
                "to zero-pad the tail, as microxcaling does)"
            )
        xm = np.concatenate([xm, np.zeros(xm.shape[:-1] + (rem,), dtype=np.float64)], axis=-1)
    return xm.reshape(xm.shape[:-1] + (xm.shape[-1] // block, block))


def unblock(xb: npt.NDArray[Any], shape: tuple[int, ...], axis: int) -> npt.NDArray[Any]:
    """Inverse of :func:`block_axis`: merge blocks, drop the padding, restore the axis order."""
    flat = xb.reshape(xb.shape[:-2] + (xb.shape[-2] * xb.shape[-1],))
    n = shape[axis]
    return np.moveaxis(flat[..., :n], -1, axis)


def check_input(x: Any, *, axis: int, nonfinite: str) -> tuple[npt.NDArray[np.floating], int]:
    """Validate a tensor handed to :func:`quantize`.

    Rules (documented in ``docs/formats.md``): the dtype must be a real floating type (float16,
    float32, float64); integer, bool and complex inputs raise ``TypeError``. Empty arrays and
    0-d arrays raise ``ValueError``. NaN raises ``ValueError`` unless ``nonfinite="propagate"``
    (then the format's NaN rule applies); ±Inf saturates (see :func:`quantize`) unless
    ``nonfinite="raise"``.

    Returns:
        The array and the normalized (non-negative) axis.
    """
    a, ax = _check_layout(x, axis=axis, nonfinite=nonfinite)
    if nonfinite != "propagate":
        nan = np.isnan(a)
        if nan.any():
            idx = tuple(int(i) for i in np.argwhere(nan)[0])
            raise ValueError(
                f"input holds {int(nan.sum())} NaN value(s), first at index {idx}; pass "
                "nonfinite='propagate' to apply the format's NaN rule instead"
            )
        if nonfinite == "raise":
            inf = np.isinf(a)
            if inf.any():
                idx = tuple(int(i) for i in np.argwhere(inf)[0])
                raise ValueError(f"input holds {int(inf.sum())} infinite value(s), first at {idx}")
    return a, ax


def _check_layout(x: Any, *, axis: int, nonfinite: str) -> tuple[npt.NDArray[np.floating], int]:
    """:func:`check_input` without the scan for NaN/Inf (dtype, shape, axis and option only)."""
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise TypeError(
            "quantize expects a floating-point array (float16/float32/float64), "
            f"got dtype {a.dtype}"
        )
    if a.ndim == 0:
        raise ValueError("quantize expects an array with at least one dimension, got a 0-d array")
    if a.size == 0:
        raise ValueError(f"quantize got an empty array of shape {a.shape}")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {a.ndim} dimensions")
    if nonfinite not in ("raise", "saturate", "propagate"):
        raise ValueError(
            f"nonfinite={nonfinite!r}; valid choices: 'saturate' (default), 'raise', 'propagate'"
        )
    return a, axis % a.ndim


def quantize(
    x: npt.ArrayLike,
    fmt: str | FormatSpec,
    *,
    axis: int = -1,
    rounding: str | None = None,
    backend: str = "numba",
    pad: bool = True,
    nonfinite: str = "saturate",
    **options: Any,
) -> QuantizedTensor:
    """Block-quantize a tensor.

    Args:
        x: float16/float32/float64 array.
        fmt: format name (see :func:`format_names`) or a resolved spec.
        axis: the axis along which blocks are formed (the dot-product reduction axis).
        rounding: ``"rne"``, ``"half_away"`` or ``"half_up"`` (see :data:`ROUNDING_MODES`);
            None picks the format's documented default. HBQ also accepts ``"repo_compat"``.
        backend: ``"numba"`` (fast path, equal to numpy bit for bit) or ``"numpy"``
            (the reference).
        pad: zero-pad a ragged tail (True, microxcaling's behaviour) or raise (False).
        nonfinite: ``"saturate"`` (default: NaN raises; scales are computed from the finite
            values and each ±Inf takes the element's ±max code), ``"raise"`` (NaN and Inf
            raise), ``"propagate"`` (NaN/Inf follow the format's own rules, e.g. an MX block
            holding NaN or Inf gets the NaN scale 0xFF; formats without such rules raise).
        **options: format options (e.g. ``role="weight"`` for HBQ, ``block=64`` for ``bfp``).

    Returns:
        The :class:`QuantizedTensor`.
    """
    a, ax = _check_layout(x, axis=axis, nonfinite=nonfinite)
    spec = resolve(fmt, **options)
    if rounding is None:
        rounding = spec.default_rounding
    if rounding not in spec.rounding_modes:
        raise ValueError(
            f"rounding={rounding!r} is not offered by format {spec.name!r}; valid choices: "
            f"{', '.join(spec.rounding_modes)}"
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; valid choices: {', '.join(BACKENDS)}")
    fused = getattr(spec, "quantize_rows", None)
    n = a.shape[ax]
    # float16 is widened to float32 and a non-native byte order swapped, both exactly; wider
    # floats take the general path.
    native = {2: np.float32, 4: np.float32, 8: np.float64}.get(a.dtype.itemsize)
    if backend == "numba" and fused is not None and native and (pad or n % spec.block == 0):
        # Fused path: the kernels read the caller's rows in place and pad the last block
        # implicitly. They decline (None) when the input holds NaN/Inf, which the general path
        # below handles.
        moved = np.moveaxis(a if a.dtype == np.dtype(native) else a.astype(native), ax, -1)
        fields = fused(np.ascontiguousarray(moved).reshape(-1, n), rounding)
        if fields is not None:
            lead = moved.shape[:-1]
            fields["codes"] = fields["codes"].reshape(lead + fields["codes"].shape[-2:])
            fields["scales"] = fields["scales"].reshape(lead + fields["scales"].shape[-1:])
            q = QuantizedTensor(
                spec=spec, shape=tuple(a.shape), axis=ax, rounding=rounding, **fields
            )
            return _flag_clamped(q, a, ax)
    a, ax = check_input(a, axis=ax, nonfinite=nonfinite)
    # A spec may block a short axis differently (HBQ's repo quirk short_axis="whole").
    block = spec.block_for_axis(a.shape[ax]) if hasattr(spec, "block_for_axis") else spec.block
    xb = block_axis(a, ax, block, pad=pad)
    inf = np.isinf(xb) if nonfinite == "saturate" else None
    if inf is not None and inf.any():
        # Scales come from the finite values only; each ±Inf then takes the element format's
        # ±max code at that scale (documented in docs/formats.md).
        neg = xb < 0
        xb = np.where(inf, 0.0, xb)
        fields = spec.quantize_blocks(xb, rounding, backend)
        pos_code, neg_code = spec.saturation_codes()
        codes = fields["codes"].copy()
        codes[inf & ~neg] = pos_code
        codes[inf & neg] = neg_code
        fields["codes"] = codes
    else:
        fields = spec.quantize_blocks(xb, rounding, backend)
    q = QuantizedTensor(spec=spec, shape=tuple(a.shape), axis=ax, rounding=rounding, **fields)
    return _flag_clamped(q, a, ax)


class QuantizationRangeWarning(UserWarning):
    """Some blocks lie outside the range a format's scale can represent (see
    :attr:`QuantizedTensor.clamped_blocks`)."""


_WARNED: set[str] = set()


def _scale_code_range(spec: FormatSpec) -> tuple[int, int] | None:
    """The smallest and largest block-scale code a spec can store, or None if unknown."""
    sf = getattr(spec, "scale_fmt", None)
    if sf is not None:
        return int(sf.min_code), int(sf.max_code)
    x_min, x_max = getattr(spec, "x_min", None), getattr(spec, "x_max", None)
    bias = getattr(spec, "scale_bias", None)
    if x_min is not None and x_max is not None and bias is not None:
        return int(x_min) + int(bias), int(x_max) + int(bias)
    if getattr(spec, "name", "").startswith("hbq"):
        from ._scale import E5M3

        return int(E5M3.min_code), int(E5M3.max_code)
    return None


def _flag_clamped(q: QuantizedTensor, a: npt.NDArray[Any], ax: int) -> QuantizedTensor:
    """Count the blocks the scale range could not represent; warn once per format.

    Only blocks whose scale code is at either end of the scale format's range can be clamped,
    so the exact check (input magnitudes against decoded magnitudes) gathers and decodes those
    blocks alone: it costs nothing for in-range data, and little for a tensor with a few edge
    blocks (NVFP4's block holding the tensor's amax always has the largest scale).
    """
    rng = _scale_code_range(q.spec)
    if rng is None or q.scales.size == 0:
        return q
    s = q.scales
    edge = (s == rng[0]) | (s == rng[1])
    if not edge.any():
        return q
    block = q.codes.shape[-1]
    # The input elements of the edge blocks, (n_edge, block), zero past the end of the axis
    # (block_axis's padding).
    idx = np.nonzero(edge)
    moved = np.moveaxis(np.asarray(a), ax, -1)
    n = moved.shape[-1]
    cols = idx[-1][:, None] * block + np.arange(block)
    lead = tuple(i[:, None] for i in idx[:-1])
    xe = np.nan_to_num(moved[lead + (np.minimum(cols, n - 1),)], nan=0.0, posinf=0.0, neginf=0.0)
    xe = np.where(cols < n, xe.astype(np.float64), 0.0)
    amax = np.abs(xe).max(axis=-1)
    # The same blocks decoded: every per-block field of the container restricted to them.
    sub = dataclasses.replace(
        q, codes=q.codes[edge], scales=s[edge],
        l2_codes=None if q.l2_codes is None else q.l2_codes[edge],
        scheme=None if q.scheme is None else q.scheme[edge],
    )  # fmt: skip
    dmax = np.abs(sub.dequantize_blocks()).max(axis=-1)
    clamped = int(((amax > 1.5 * dmax) | ((amax > 0) & (dmax == 0))).sum())
    if not clamped:
        return q
    if q.spec.name not in _WARNED:
        _WARNED.add(q.spec.name)
        warnings.warn(
            f"{q.spec.name}: {clamped} of {q.n_blocks} blocks are outside the range its block "
            "scale can represent (values saturate or flush to zero); see "
            "QuantizedTensor.clamped_blocks",
            QuantizationRangeWarning,
            stacklevel=3,
        )
    return dataclasses.replace(q, clamped_blocks=clamped)
