"""Block formats: OCP MX (MXFP4/6/8, MXINT8), NVFP4 (standard and the HBQ repo's E5M3 variant),
block floating point (BFP) and INT with an absmax scale.

Each format is a frozen dataclass implementing :class:`~._quantized.FormatSpec`, registered
under its name. ``quantize_blocks`` takes float64 blocks ``(..., n_blocks, block)`` (padding and
axis handling happen in :func:`~._quantized.quantize`) and returns integer codes; the numpy path
is the reference and ``backend="numba"`` calls :mod:`coaccel.models.fast.formats`, which returns
identical arrays. Semantics follow [OCP-MX], [MX], [NV] and [R-Q] (see ``docs/formats.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _elem as el
from . import _scale as sc
from ._quantized import ROUNDING_MODES, QuantizedTensor, register

FP32_MIN_NORMAL_EXP = -126
"""An all-zero block's amax is replaced by FP32_MIN_NORMAL = 2**-126 (microxcaling)."""


@functools.cache
def _value_table(fmt: el.ElementFormat) -> npt.NDArray[np.float64]:
    t = fmt.values()
    t.setflags(write=False)
    return t


def _flat_blocks(xb: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``(..., n_blocks, block)`` -> C-contiguous ``(N, block)`` float64."""
    return np.ascontiguousarray(xb, dtype=np.float64).reshape(-1, xb.shape[-1])


def _fast():
    """The numba kernels (imported on first use: numba's import and JIT cost stay optional)."""
    from ..fast import formats as fast

    return fast


def _dequant(
    codes: npt.NDArray[np.uint8],
    table: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64],
    backend: str,
) -> npt.NDArray[np.float64]:
    """``table[codes] * scale[..., None]`` (exact: every product here fits float64)."""
    if backend == "numba":
        c2 = np.ascontiguousarray(codes).reshape(-1, codes.shape[-1])
        out = np.empty(c2.shape, dtype=np.float64)
        scale_flat = np.ascontiguousarray(scale, dtype=np.float64).reshape(-1)
        _fast().dequant_kernel(c2, table, scale_flat, c2.shape[1], out)
        return out.reshape(codes.shape)
    return table[codes] * scale[..., None]


def _dequant_rows(
    codes: npt.NDArray[np.uint8],
    table: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64],
    n: int,
    dtype: npt.DTypeLike,
) -> npt.NDArray[np.floating]:
    """Rows ``(R, n)`` of ``dtype`` from codes ``(..., n_blocks, block)``: the exact float64
    ``table[code] * scale`` rounded once to ``dtype``, the padding past ``n`` dropped."""
    block = codes.shape[-1]
    c2 = np.ascontiguousarray(codes).reshape(-1, codes.shape[-2] * block)
    out = np.empty((c2.shape[0], n), dtype=dtype)
    scale_flat = np.ascontiguousarray(scale, dtype=np.float64).reshape(-1)
    _fast().dequant_kernel(c2, table, scale_flat, block, out)
    return out


@functools.cache
def _scale_code_table(
    fmt: sc.ScaleFormat,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """:func:`~._scale.decode_scale` of every code pattern, and which patterns are valid."""
    codes = np.arange(fmt.n_codes)
    valid = ((codes >= fmt.min_code) & (codes <= fmt.max_code)) | (codes == fmt.nan_code)
    values = np.full(fmt.n_codes, np.nan)
    values[valid] = sc.decode_scale(codes[valid], fmt)
    for a in (values, valid):
        a.setflags(write=False)
    return values, valid


def _kernel_elem_args(fmt: el.ElementFormat, mode: str) -> tuple:
    vtop, n, is_int, bits, kpos, kneg, emin, mbits = el._kernel_params(fmt)
    return vtop, n, _fast().MODE_CODES[mode], is_int, bits, kpos, kneg, emin, mbits


def _check_options(fmt: str, options: dict[str, Any], valid: dict[str, Any]) -> dict[str, Any]:
    """Merge ``options`` over the defaults ``valid``; unknown keys raise ``TypeError``."""
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(
            f"format {fmt!r}: unknown option {unknown[0]!r}; valid options: "
            f"{', '.join(sorted(valid)) if valid else '(none)'}"
        )
    return {**valid, **options}


def _check_choice(fmt: str, key: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(
            f"format {fmt!r}: {key}={value!r}; valid choices: {', '.join(repr(c) for c in choices)}"
        )


def _check_int(fmt: str, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"format {fmt!r}: {key}={value!r}; expected an integer in {lo}..{hi}")
    return int(value)


# --------------------------------------------------------------------------------------------
# Shared-exponent formats: OCP MX, BFP, the HBQ repo's MX variants


@dataclass(frozen=True)
class SharedExpSpec:
    """A block of elements sharing one power-of-two scale ``2**X`` (OCP MX, BFP).

    ``X = floor(log2 amax) - emax`` (an all-zero block uses amax = 2**-126), clamped below to
    ``x_min``; above ``x_max`` it clamps when ``clip_high`` is set (HBQ repo) and otherwise a
    finite block raises and a block holding NaN/Inf gets the NaN scale (``nonfinite=
    "propagate"``). Elements are ``elem`` codes of ``x / 2**(X + elem_shift)`` with saturation.
    The stored scale code is ``X + scale_bias`` (E8M0: bias 127, 0xFF = NaN).

    Attributes:
        name: registered name.
        block: elements per block.
        elem: element format.
        emax: subtracted from floor(log2 amax).
        elem_shift: extra exponent of the element grid (MXINT8: -6, the implicit 2**-6).
        x_min, x_max: range of X.
        clip_high: clamp X above ``x_max`` instead of raising / NaN.
        scale_bias: scale code = X + scale_bias.
        scale_bits: scale code width.
        nan_scale: the scale code of a NaN block, or -1 if the format has none.
        default_rounding: rounding when the caller passes None.
        variant: ``"ocp"`` or ``"hbq_repo"`` (or ``"bfp"``), for display.
    """

    name: str
    block: int
    elem: el.ElementFormat
    emax: int
    elem_shift: int = 0
    x_min: int = -127
    x_max: int = 127
    clip_high: bool = False
    scale_bias: int = 127
    scale_bits: int = 8
    nan_scale: int = 0xFF
    default_rounding: str = "rne"
    variant: str = "ocp"
    rounding_modes: tuple[str, ...] = ROUNDING_MODES

    @property
    def element_bits(self) -> int:
        """Bits per element code."""
        return self.elem.bits

    def bits_per_element(self) -> float:
        """Element bits plus the shared scale spread over the block."""
        return self.element_bits + self.scale_bits / self.block

    def saturation_codes(self) -> tuple[int, int]:
        """Element codes of +max and -max."""
        return el.saturation_codes(self.elem)

    def _finish(
        self, x_exp: npt.NDArray[np.int64], status: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.uint8]:
        """Scale codes from the exponents; raises for out-of-range finite blocks."""
        if np.any(status == 2):
            i = int(np.flatnonzero(status.ravel() == 2)[0])
            raise ValueError(
                f"format {self.name!r}: block {i} needs the shared exponent "
                f"{int(x_exp.ravel()[i])}, above the scale's maximum {self.x_max} (its values "
                "exceed the format's range)"
            )
        if np.any(status == 1) and self.nan_scale < 0:
            raise ValueError(
                f"format {self.name!r} has no NaN scale code: NaN/Inf input cannot be propagated "
                "(use nonfinite='saturate' or 'raise')"
            )
        codes = (x_exp + self.scale_bias).astype(np.uint8)
        return np.where(status == 1, np.uint8(max(self.nan_scale, 0)), codes).astype(np.uint8)

    def quantize_blocks(
        self, xb: npt.NDArray[np.float64], rounding: str, backend: str
    ) -> dict[str, Any]:
        """Quantize float64 blocks ``(..., n_blocks, block)``.

        Returns:
            ``codes`` uint8 ``(..., n_blocks, block)``; ``scales`` uint8 ``(..., n_blocks)``
            (``X + scale_bias``; NaN blocks get ``nan_scale`` and element codes 0).
        """
        if backend == "numba":
            codes, x_exp, status = self._kernel(_flat_blocks(xb), xb.shape[-1], rounding)
            codes = codes.reshape(xb.shape)
            x_exp = x_exp.reshape(xb.shape[:-1])
            status = status.reshape(xb.shape[:-1])
        else:
            codes, x_exp, status = self._reference(xb, rounding)
        scales = self._finish(x_exp, status)
        return {"codes": codes, "scales": scales, "extra": {"backend": backend}}

    def _kernel(
        self, x2: npt.NDArray[np.floating], block: int, rounding: str
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        return _fast().shared_exp_kernel(
            x2, block, self.emax, self.x_min, self.x_max, self.clip_high, self.elem_shift,
            *_kernel_elem_args(self.elem, rounding),
        )  # fmt: skip

    def quantize_rows(self, x2: npt.NDArray[np.floating], rounding: str) -> dict[str, Any] | None:
        """Fused numba quantization of rows, the blocking axis last (no float64 copy, no padded
        copy): equal to :meth:`quantize_blocks` on the zero-padded blocks of ``x2``.

        Args:
            x2: float32 or float64 ``(R, n)``, C-contiguous; the last block of each row is
                zero-padded to ``block`` elements.
            rounding: element rounding mode.

        Returns:
            ``codes`` uint8 ``(R, n_blocks, block)``, ``scales`` uint8 ``(R, n_blocks)`` and
            ``extra``; or None when ``x2`` holds NaN or Inf (the caller then applies its
            non-finite rule on the general path).

        Raises:
            ValueError: a finite block beyond the scale's range (as :meth:`quantize_blocks`).
        """
        codes, x_exp, status = self._kernel(x2, self.block, rounding)
        if np.any(status == 1):
            return None
        nb = codes.shape[1] // self.block
        return {
            "codes": codes.reshape(x2.shape[0], nb, self.block),
            "scales": self._finish(x_exp, status).reshape(x2.shape[0], nb),
            "extra": {"backend": "numba"},
        }

    def _reference(
        self, xb: npt.NDArray[np.float64], rounding: str
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        finite = np.isfinite(xb).all(axis=-1)
        xf = np.where(np.expand_dims(finite, -1), xb, 0.0)
        amax = np.max(np.abs(xf), axis=-1)
        amax = np.where(amax == 0, 2.0**FP32_MIN_NORMAL_EXP, amax)
        x_exp = np.frexp(amax)[1].astype(np.int64) - 1 - self.emax  # floor(log2 amax) - emax
        over = finite & (x_exp > self.x_max)
        if self.clip_high:
            x_exp = np.minimum(x_exp, self.x_max)
            over[...] = False
        x_exp = np.where(over, x_exp, np.maximum(x_exp, self.x_min))
        status = np.where(~finite, 1, np.where(over, 2, 0)).astype(np.uint8)
        ok = status == 0
        scale = np.ldexp(1.0, np.where(ok, x_exp, 0) + self.elem_shift)
        codes = el._encode_checked(
            np.where(ok[..., None], xf, 0.0), scale[..., None], self.elem, rounding, True
        )
        codes = np.where(ok[..., None], codes, 0).astype(np.uint8)
        return codes, np.where(status == 1, 0, x_exp), status

    def _block_scales(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        s = q.scales.astype(np.int64)
        scale = np.ldexp(1.0, s - self.scale_bias + self.elem_shift)
        if self.nan_scale >= 0:
            scale = np.where(s == self.nan_scale, np.nan, scale)
        return scale

    def dequantize_blocks(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        """Exact values ``elem(code) * 2**(X + elem_shift)``; NaN-scale blocks are all NaN."""
        scale = self._block_scales(q)
        return _dequant(q.codes, _value_table(self.elem), scale, q.extra.get("backend", "numpy"))

    def dequantize_rows(
        self, q: QuantizedTensor, n: int, dtype: npt.DTypeLike
    ) -> npt.NDArray[np.floating]:
        """Fused numba dequantization: rows ``(R, n)`` of ``dtype`` (float32/float64), equal to
        :meth:`dequantize_blocks` with the padding dropped and cast once to ``dtype``."""
        return _dequant_rows(q.codes, _value_table(self.elem), self._block_scales(q), n, dtype)


_MX_ELEMENTS = {
    # name: (element format, emax_elem) -- [MX] mx/mx_ops.py ``_quantize_mx``.
    "mxfp4": (el.E2M1, 2),
    "mxfp6_e2m3": (el.E2M3, 2),
    "mxfp6_e3m2": (el.E3M2, 4),
    "mxfp8_e4m3": (el.E4M3, 8),
    "mxfp8_e5m2": (el.E5M2, 15),
}


def _mx_factory(name: str) -> Callable[..., SharedExpSpec]:
    variants = ("ocp", "hbq_repo") if name in ("mxfp4", "mxint8") else ("ocp",)

    def factory(**options: Any) -> SharedExpSpec:
        opt = _check_options(name, options, {"block": 32, "variant": "ocp"})
        block = _check_int(name, "block", opt["block"], 1, 1 << 16)
        _check_choice(name, "variant", opt["variant"], variants)
        if name == "mxint8":
            if opt["variant"] == "ocp":
                # [MX]: X = floor(log2 amax); q = round(64 v) clamped to ±127; value q*2**(X-6).
                return SharedExpSpec(name, block, el.INT8, emax=0, elem_shift=-6)
            # [R-Q] MXINTQuantizer: X = floor(log2 amax) - 6 clipped to [-14, 15]; INT8 clip
            # [-128, 127]; half away from zero; a 5-bit exponent code X + 15.
            return SharedExpSpec(
                name, block, el.IntFormat("int8_full", 8, symmetric=False), emax=6,
                x_min=-14, x_max=15, clip_high=True, scale_bias=15, scale_bits=5, nan_scale=-1,
                default_rounding="half_away", variant="hbq_repo",
            )  # fmt: skip
        fmt, emax = _MX_ELEMENTS[name]
        if opt["variant"] == "hbq_repo":
            # [R-Q] MXFPQuantizer: X = floor(log2 amax) - 2 clipped to [-14, 15], elements
            # half-up on magnitude (= half away from zero) with saturation.
            return SharedExpSpec(
                name, block, fmt, emax=emax, x_min=-14, x_max=15, clip_high=True, scale_bias=15,
                scale_bits=5, nan_scale=-1, default_rounding="half_away", variant="hbq_repo",
            )  # fmt: skip
        return SharedExpSpec(name, block, fmt, emax=emax)

    return factory


def _bfp_factory(**options: Any) -> SharedExpSpec:
    """BFP: E8M0 shared exponent X = floor(log2 amax) - (bits - 2), INT``bits`` elements."""
    opt = _check_options("bfp", options, {"block": 16, "bits": 8})
    block = _check_int("bfp", "block", opt["block"], 1, 1 << 16)
    bits = _check_int("bfp", "bits", opt["bits"], 2, 8)
    return SharedExpSpec(
        "bfp", block, el.IntFormat(f"int{bits}", bits), emax=bits - 2, variant="bfp"
    )


# --------------------------------------------------------------------------------------------
# Absmax-scaled formats: NVFP4, NVFP4 with an E5M3 scale, INT with a scale format


@dataclass(frozen=True)
class AbsmaxSpec:
    """A block of elements with one scale from a scale format, set from the block's amax.

    Attributes:
        name: registered name.
        block: elements per block.
        elem: element format.
        scale_fmt: scale format.
        scale_rounding: rounding of the scale (:data:`._scale.SCALE_ROUNDING_MODES`).
        kind: ``"nvfp4"`` (scale = UE4M3 of ``float32(amax) / float32(6 * s_t)`` computed in
            float32, with a per-tensor FP32 scale ``s_t``), or ``"exact"`` (scale = the exact
            ``amax / divisor`` rounded into ``scale_fmt``).
        divisor: the exact divisor (``"exact"`` kind): element max (6) or ``qmax``.
        use_tensor_scale: NVFP4's per-tensor FP32 scale on (True) or s_t = 1 (False).
        zero_code: a scale code 0 is replaced by this code (NVFP4: 0x38 = 1.0), or -1.
        default_rounding: element rounding when the caller passes None.
    """

    name: str
    block: int
    elem: el.ElementFormat
    scale_fmt: sc.ScaleFormat
    scale_rounding: str
    kind: str
    divisor: float = 1.0
    use_tensor_scale: bool = False
    zero_code: int = -1
    default_rounding: str = "rne"
    rounding_modes: tuple[str, ...] = ROUNDING_MODES

    @property
    def element_bits(self) -> int:
        """Bits per element code."""
        return self.elem.bits

    @property
    def scale_bits(self) -> int:
        """Bits per block scale code."""
        return self.scale_fmt.bits

    def bits_per_element(self) -> float:
        """Element bits plus the block scale spread over the block (NVFP4's one 32-bit tensor
        scale per tensor is not included)."""
        return self.element_bits + self.scale_bits / self.block

    def saturation_codes(self) -> tuple[int, int]:
        """Element codes of +max and -max."""
        return el.saturation_codes(self.elem)

    def _tensor_scale(self, amax_t: float) -> np.float32:
        """NVFP4's s_t = float32(amax_tensor) / float32(6 * 448) in float32 (1 if amax is 0)."""
        if not self.use_tensor_scale:
            return np.float32(1.0)
        amax = np.float32(amax_t)
        if not np.isfinite(amax):
            raise ValueError(
                f"format {self.name!r}: the tensor's amax {amax_t!r} overflows float32"
            )
        s_t = amax / np.float32(6 * 448)
        # A zero tensor, or one so small that s_t underflows float32, uses s_t = 1.
        return s_t if s_t > 0 else np.float32(1.0)

    def quantize_blocks(
        self, xb: npt.NDArray[np.float64], rounding: str, backend: str
    ) -> dict[str, Any]:
        """Quantize float64 blocks ``(..., n_blocks, block)``.

        Returns:
            ``codes`` uint8 ``(..., n_blocks, block)``, ``scales`` (uint8, uint16 for FP16)
            ``(..., n_blocks)``, and for NVFP4 ``tensor_scale`` (float32).
        """
        if backend == "numba":
            res = self._numba(_flat_blocks(xb), xb.shape[-1], rounding)
            if res is None:
                raise self._nonfinite_error()
            codes, scodes, s_t = res
            codes = codes.reshape(xb.shape)
            scodes = scodes.reshape(xb.shape[:-1])
            return self._fields(codes, scodes, s_t, backend)
        # max and min propagate NaN: two reductions give finiteness and amax.
        hi, lo = (float(xb.max()), float(xb.min())) if xb.size else (0.0, 0.0)
        if not (np.isfinite(hi) and np.isfinite(lo)):
            raise self._nonfinite_error()
        s_t = self._tensor_scale(max(hi, -lo))
        codes, scodes = self._reference(xb, rounding, np.float32(6) * s_t, s_t)
        return self._fields(codes, scodes, s_t, backend)

    def _nonfinite_error(self) -> ValueError:
        return ValueError(
            f"format {self.name!r} has no NaN/Inf encoding: use nonfinite='saturate' or 'raise'"
        )

    def _numba(
        self, x2: npt.NDArray[np.floating], block: int, rounding: str
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], np.float32] | None:
        """Codes ``(R, nb * block)``, scale codes ``(R * nb)`` and ``s_t`` of rows ``x2`` split
        into blocks of ``block``; None if ``x2`` holds NaN or Inf."""
        fast = _fast()
        amax_b, finite = fast.block_amax_kernel(x2, block)
        if not finite:
            return None
        s_t = self._tensor_scale(float(amax_b.max()) if amax_b.size else 0.0)
        den = np.float32(6) * s_t
        grid = sc._scale_grid(self.scale_fmt)
        sf = self.scale_fmt
        # NVFP4's ratio is an exact float32 value; UE4M3 is a minifloat grid (code = index) with
        # subnormals, so a nearest rounding of it can use the element kernels' bit arithmetic.
        s_bits = (
            self.kind == "nvfp4"
            and sf.subnormals
            and sf.min_code == 0
            and self.scale_rounding in el.ELEMENT_ROUNDING_MODES
        )
        s_vtop = float(2 * grid.values[-1] - grid.values[-2])  # one step above the maximum
        codes, scodes = fast.absmax_scale_kernel(
            x2, block, amax_b, self.kind == "nvfp4", den, float(self.divisor),
            grid.mids, grid.values, grid.even, fast.MODE_CODES[self.scale_rounding],
            sf.min_code, self.zero_code, float(s_t), s_bits, s_vtop, 1 - sf.bias, sf.mbits,
            el._elem_grid(self.elem).mids, *_kernel_elem_args(self.elem, rounding),
        )  # fmt: skip
        return codes, scodes, s_t

    def quantize_rows(self, x2: npt.NDArray[np.floating], rounding: str) -> dict[str, Any] | None:
        """Fused numba quantization of rows, the blocking axis last (no float64 copy, no padded
        copy): equal to :meth:`quantize_blocks` on the zero-padded blocks of ``x2``.

        Args:
            x2: float32 or float64 ``(R, n)``, C-contiguous; the last block of each row is
                zero-padded to ``block`` elements.
            rounding: element rounding mode.

        Returns:
            ``codes`` uint8 ``(R, n_blocks, block)``, ``scales`` ``(R, n_blocks)``, ``extra``
            and for NVFP4 ``tensor_scale``; or None when ``x2`` holds NaN or Inf (the caller
            then applies its non-finite rule on the general path).
        """
        res = self._numba(x2, self.block, rounding)
        if res is None:
            return None
        codes, scodes, s_t = res
        nb = codes.shape[1] // self.block
        return self._fields(
            codes.reshape(x2.shape[0], nb, self.block), scodes.reshape(x2.shape[0], nb), s_t,
            "numba",
        )  # fmt: skip

    def _fields(
        self, codes: npt.NDArray[np.uint8], scodes: npt.NDArray[np.int64], s_t: np.float32,
        backend: str,
    ) -> dict[str, Any]:  # fmt: skip
        out: dict[str, Any] = {
            "codes": codes,
            "scales": scodes.astype(sc.scale_dtype(self.scale_fmt)),
            "extra": {"backend": backend},
        }
        if self.use_tensor_scale:
            out["tensor_scale"] = s_t
        return out

    def _reference(
        self, xb: npt.NDArray[np.float64], rounding: str, den: np.float32, s_t: np.float32
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        amax = np.max(np.abs(xb), axis=-1)
        grid = sc._scale_grid(self.scale_fmt)
        if self.kind == "nvfp4":
            ratio = (amax.astype(np.float32) / den).astype(np.float64)  # float32 division
            k = el._round_grid(ratio, 1.0, grid, self.scale_rounding)
        else:
            k = el._round_grid(amax, self.divisor, grid, self.scale_rounding)
        scodes = k + self.scale_fmt.min_code
        if self.zero_code >= 0:
            scodes = np.where(scodes == 0, self.zero_code, scodes)
        s = grid.values[scodes - self.scale_fmt.min_code] * np.float64(s_t)
        zero = s == 0
        codes = el._encode_checked(xb, np.where(zero, 1.0, s)[..., None], self.elem, rounding, True)
        return np.where(zero[..., None], 0, codes).astype(np.uint8), scodes

    def _block_scales(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        values, valid = _scale_code_table(self.scale_fmt)
        c = np.asarray(q.scales)
        if c.dtype.kind == "u" and c.dtype.itemsize <= 2 and valid[c].all():
            s = values[c]  # a table lookup: decode_scale of every code, computed once
        else:
            s = sc.decode_scale(c, self.scale_fmt)  # raises the reference's error
        if q.tensor_scale is not None:
            s = s * np.float64(q.tensor_scale)
        return s

    def dequantize_blocks(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        """Exact values ``elem(code) * scale * s_t`` (the product is exact in float64)."""
        s = self._block_scales(q)
        return _dequant(q.codes, _value_table(self.elem), s, q.extra.get("backend", "numpy"))

    def dequantize_rows(
        self, q: QuantizedTensor, n: int, dtype: npt.DTypeLike
    ) -> npt.NDArray[np.floating]:
        """Fused numba dequantization: rows ``(R, n)`` of ``dtype`` (float32/float64), equal to
        :meth:`dequantize_blocks` with the padding dropped and cast once to ``dtype``."""
        return _dequant_rows(q.codes, _value_table(self.elem), self._block_scales(q), n, dtype)


def _nvfp4_factory(**options: Any) -> AbsmaxSpec:
    """NVFP4 ([NV]: NVIDIA ModelOpt ``nvfp4_tensor.py`` / cuDNN block scaling)."""
    opt = _check_options("nvfp4", options, {"tensor_scale": True, "scale_rounding": "rne"})
    _check_choice("nvfp4", "scale_rounding", opt["scale_rounding"], sc.SCALE_ROUNDING_MODES)
    _check_choice("nvfp4", "tensor_scale", opt["tensor_scale"], (True, False))
    return AbsmaxSpec(
        "nvfp4", 16, el.E2M1, sc.UE4M3, opt["scale_rounding"], "nvfp4",
        use_tensor_scale=bool(opt["tensor_scale"]), zero_code=0x38,
    )  # fmt: skip


def _nvfp4_e5m3_factory(**options: Any) -> AbsmaxSpec:
    """The HBQ repo's "NVFP4": E5M3(amax / 6), no tensor scale, half-away elements ([R-Q])."""
    opt = _check_options("nvfp4_e5m3", options, {"scale_rounding": "half_up"})
    _check_choice("nvfp4_e5m3", "scale_rounding", opt["scale_rounding"], sc.SCALE_ROUNDING_MODES)
    return AbsmaxSpec(
        "nvfp4_e5m3", 16, el.E2M1, sc.E5M3, opt["scale_rounding"], "exact", divisor=6.0,
        default_rounding="half_away",
    )  # fmt: skip


def _int_factory(**options: Any) -> AbsmaxSpec:
    """INT``bits`` elements, scale = amax / qmax rounded into a scale format ([VSQ])."""
    opt = _check_options(
        "int", options, {"block": 32, "bits": 4, "scale_format": "fp16", "scale_rounding": "rne"}
    )
    block = _check_int("int", "block", opt["block"], 1, 1 << 16)
    bits = _check_int("int", "bits", opt["bits"], 2, 8)
    _check_choice("int", "scale_format", opt["scale_format"], ("fp16", "e5m3", "ue4m3", "e8m0"))
    _check_choice("int", "scale_rounding", opt["scale_rounding"], sc.SCALE_ROUNDING_MODES)
    qmax = (1 << (bits - 1)) - 1
    return AbsmaxSpec(
        "int", block, el.IntFormat(f"int{bits}", bits), sc.scale_format(opt["scale_format"]),
        opt["scale_rounding"], "exact", divisor=float(qmax),
    )  # fmt: skip


for _name in _MX_ELEMENTS:
    register(_name, _mx_factory(_name))
register("mxint8", _mx_factory("mxint8"))
register("nvfp4", _nvfp4_factory)
register("nvfp4_e5m3", _nvfp4_e5m3_factory)
register("bfp", _bfp_factory)
register("int", _int_factory)

__all__ = ["AbsmaxSpec", "SharedExpSpec"]
