"""Partial-sum accumulation across L1 blocks ([R-ACC] ``accum.sv``, [R-EXT]; docs/hbq_datapath.md).

Each K block of a GEMM produces one scaled partial sum per (token, output channel); this module
adds them up in K order the way the accelerator (or the authors' GPU emulation) does:

* ``"fp32"`` — block results rounded once to binary32, accumulated with IEEE binary32 adds (numpy
  float32 addition is RNE);
* ``"fp16"`` — block results in binary16, accumulated with :func:`~._fp.fp16_add`;
* ``"mxint8_running"`` — hardware-faithful: the running sum of ``sa_n`` consecutive output channels
  of one token is stored as one MXINT8 block; each K block reads it, dequantizes it to FP16, adds
  the new binary16 block results with :func:`~._fp.fp16_add`, requantizes and stores it;
* ``"mxint8_group"`` — the software emulation of [R-EXT]: FP32 within each K group, each group's
  FP32 partial quantized to MXINT8 over ``quant_block`` consecutive output channels of a token,
  dequantized and added into a running FP16 accumulator.

MXINT8 here (the spec's clean choice, not the inconsistent RTL): shared exponent
``X = max_i floor(log2|v_i|) - 6`` stored E8M0-style (``code = X + 127``; an all-zero block gets
the sentinel ``X = -127``, code 0), elements ``q_i = clamp(round(v_i / 2^X), -127, 127)`` with
``rounding="rne"`` (default) or ``"trunc"`` (toward zero on the magnitude, like the RTL), and
dequantized values ``q_i · 2^X`` rounded to binary16 by the HBQ policy (exact for normal results,
flushed to +0 below 2^-14).
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ._fp import bit_length, fp16_add, fp16_bits, round_scaled

__all__ = [
    "MXINT8_ROUNDING",
    "PSUM_MODES",
    "MxInt8",
    "accumulate_psums",
    "mxint8_dequantize",
    "mxint8_group_quantize",
    "mxint8_quantize",
]

PSUM_MODES = ("fp32", "fp16", "mxint8_running", "mxint8_group")
"""Partial-sum accumulation modes (docs/hbq_datapath.md, "Partial sums across K blocks")."""
MXINT8_ROUNDING = ("rne", "trunc")
"""Element rounding of the MXINT8 partial-sum quantizers."""
_ZERO_X = -127


class MxInt8(NamedTuple):
    """One or more MXINT8 blocks.

    Attributes:
        q: int8 elements ``(..., n)`` in ``-127 .. 127``; element ``i`` belongs to block
            ``i // block``.
        x_code: uint8 shared exponents ``(..., n // block)``, E8M0-style: ``X = x_code - 127``;
            code 0 (``X = -127``) marks an all-zero block.
    """

    q: npt.NDArray[np.int8]
    x_code: npt.NDArray[np.uint8]

    @property
    def x(self) -> npt.NDArray[np.int16]:
        """The shared exponents ``X`` as signed integers, ``(..., n // block)``."""
        return self.x_code.astype(np.int16) - 127


def _check_rounding(rounding: str) -> None:
    if rounding not in MXINT8_ROUNDING:
        raise ValueError(f"rounding={rounding!r}; valid choices: {', '.join(MXINT8_ROUNDING)}")


_Scalar = TypeVar("_Scalar", bound=np.generic)


def _blocks(a: npt.NDArray[_Scalar], block: int) -> npt.NDArray[_Scalar]:
    """``a`` with its last axis split into ``(n // block, block)`` (any dtype)."""
    if block < 1 or a.shape[-1] % block:
        raise ValueError(f"the last axis ({a.shape[-1]}) is not a multiple of the block ({block})")
    return a.reshape(a.shape[:-1] + (a.shape[-1] // block, block))


def _shift_round(
    mag: npt.NDArray[np.int64], r: npt.NDArray[np.int64], rounding: str
) -> npt.NDArray[np.int64]:
    """``round(mag / 2^r)`` for non-negative integers (``r`` may be negative: a left shift)."""
    rs = np.clip(r, 0, 62)
    q = mag >> rs
    if rounding == "rne":
        rem = mag & ((np.int64(1) << rs) - 1)
        half = (np.int64(1) << rs) >> 1
        q = q + ((rs > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1))))
    return np.where(r < 0, mag << np.clip(-r, 0, 62), q)


def _encode(
    neg: npt.NDArray[np.bool_],
    sig: npt.NDArray[np.int64],
    exp2: npt.NDArray[np.int64],
    block: int,
    rounding: str,
    zero_x: int,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int64]]:
    """MXINT8-quantize ``±sig · 2^exp2`` (``sig >= 0``) over blocks of the last axis: (q, X)."""
    sb, eb, nb = _blocks(sig, block), _blocks(exp2, block), _blocks(neg, block)
    nonzero = sb > 0
    log2 = np.where(nonzero, bit_length(sb) - 1 + eb, np.iinfo(np.int64).min)
    amax_log2 = log2.max(-1)
    x = np.where(nonzero.any(-1), amax_log2 - 6, zero_x)
    mag = _shift_round(sb, x[..., None] - eb, rounding)
    mag = np.where(nonzero, np.minimum(mag, 127), 0)
    return np.where(nb, -mag, mag).astype(np.int8).reshape(sig.shape), x


def mxint8_quantize(v_bits: npt.ArrayLike, *, block: int = 16, rounding: str = "rne") -> MxInt8:
    """Quantize binary16 values to MXINT8 blocks (the PSUM-buffer format, [R-ACC]).

    ``X = max_i floor(log2|v_i|) - 6`` over each block (so the largest element maps into
    ``[64, 128)`` before rounding), ``q_i = clamp(round(v_i / 2^X), -127, 127)``. Subnormal inputs
    count as zero (the datapath flushes them); an all-zero block gets ``X = -127`` and ``q = 0``.

    Args:
        v_bits: binary16 bit patterns (uint16) or float16 values, ``(..., n)`` with
            ``n % block == 0``; no Inf or NaN.
        block: values per shared exponent (``SA_N``, 16 in the accelerator).
        rounding: ``"rne"`` (default) or ``"trunc"`` (toward zero).

    Returns:
        The :class:`MxInt8` blocks (``q`` shaped like ``v_bits``).
    """
    _check_rounding(rounding)
    b = fp16_bits(v_bits).astype(np.int64)
    e = (b >> 10) & 31
    if b.size and int(e.max()) == 31:
        raise ValueError("MXINT8 quantization got an Inf or NaN binary16 value")
    sig = np.where(e > 0, (b & 1023) | 1024, 0)
    q, x = _encode(b >> 15 == 1, sig, e - 25, block, rounding, _ZERO_X)
    return MxInt8(q=q, x_code=(x + 127).astype(np.uint8))


def mxint8_dequantize(
    q: npt.ArrayLike, x_code: npt.ArrayLike, *, block: int = 16
) -> npt.NDArray[np.uint16]:
    """Dequantize MXINT8 blocks to binary16: ``q_i · 2^X`` (exact, or +0 below 2^-14).

    Args:
        q: int8 elements ``(..., n)``.
        x_code: uint8 shared exponents ``(..., n // block)`` (``X = x_code - 127``).
        block: values per shared exponent.

    Returns:
        uint16 bit patterns ``(..., n)``.
    """
    qa = np.asarray(q)
    if qa.dtype.kind not in "iu":
        raise TypeError(f"MXINT8 elements must be integers, got dtype {qa.dtype}")
    xa = np.asarray(x_code).astype(np.int64) - 127
    qb = _blocks(qa.astype(np.int64), block)
    return round_scaled(qb, xa[..., None], fmt="fp16").reshape(qa.shape)


def mxint8_group_quantize(
    v_fp32: npt.ArrayLike, *, block: int = 32, rounding: str = "rne"
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int16]]:
    """Quantize FP32 group partials as [R-EXT] ``gemm_blockquant_mxint8`` does.

    Per block of the last axis: ``scale = 2^(floor(log2 amax) - 6)``, or 1 when ``amax = 0``;
    ``q = clamp(round(v / scale), -127, 127)``.

    Args:
        v_fp32: finite float32 values ``(..., n)``, ``n % block == 0``.
        block: output channels per scale (``quant_block_size``, 32 in [R-EXT]).
        rounding: ``"rne"`` (default, as [R-EXT]) or ``"trunc"``.

    Returns:
        ``(q, X)``: int8 elements ``(..., n)`` and int16 scale exponents ``(..., n // block)``.
    """
    _check_rounding(rounding)
    v = np.asarray(v_fp32)
    if v.dtype != np.float32:
        raise TypeError(f"expected float32 values, got dtype {v.dtype}")
    if not np.all(np.isfinite(v)):
        raise ValueError("MXINT8 group quantization got a non-finite FP32 value")
    b = v.view(np.uint32).astype(np.int64)
    e = (b >> 23) & 255
    sig = np.where(e > 0, (b & 0x7FFFFF) | 0x800000, b & 0x7FFFFF)
    exp2 = np.where(e > 0, e - 150, -149)
    q, x = _encode(b >> 31 == 1, sig, exp2, block, rounding, 0)
    return q, x.astype(np.int16)


def _pad_channels(a: npt.NDArray[np.int64], block: int) -> npt.NDArray[np.int64]:
    """Zero-pad the channel axis to a whole number of blocks (zeros never change a block max)."""
    rem = (-a.shape[-1]) % block
    if not rem:
        return a
    return np.concatenate([a, np.zeros(a.shape[:-1] + (rem,), dtype=a.dtype)], axis=-1)


def accumulate_psums(
    block_bits: npt.ArrayLike,
    *,
    psum_mode: str,
    sa_n: int = 16,
    group_blocks: int = 1,
    quant_block: int = 32,
    rounding: str = "rne",
) -> npt.NDArray[np.unsignedinteger]:
    """Accumulate per-K-block results in K order under a partial-sum mode.

    Args:
        block_bits: block results, ``(n_k, ..., n_out)`` with the K-block axis first and the output
            channels last: uint32 binary32 bit patterns for ``"fp32"`` and ``"mxint8_group"``,
            uint16 binary16 bit patterns for ``"fp16"`` and ``"mxint8_running"``.
        psum_mode: one of :data:`PSUM_MODES`.
        sa_n: output channels per MXINT8 block in ``"mxint8_running"`` (the PE column height).
        group_blocks: K blocks per FP32 group in ``"mxint8_group"`` (``group_size / B``); a
            shorter last group is allowed.
        quant_block: output channels per scale in ``"mxint8_group"``.
        rounding: MXINT8 element rounding, ``"rne"`` or ``"trunc"``.

    Returns:
        The accumulated outputs ``(..., n_out)``: uint32 (``"fp32"``) or uint16 bit patterns.
        In ``"mxint8_running"`` they are the dequantized final buffer contents (drain mode).
    """
    if psum_mode not in PSUM_MODES:
        raise ValueError(f"psum_mode={psum_mode!r}; valid choices: {', '.join(PSUM_MODES)}")
    _check_rounding(rounding)
    blocks = np.asarray(block_bits)
    if blocks.ndim < 2 or blocks.shape[0] < 1:
        raise ValueError("block_bits needs shape (n_k, ..., n_out) with n_k >= 1")
    wide = psum_mode in ("fp32", "mxint8_group")
    want = np.uint32 if wide else np.uint16
    if blocks.dtype != want:
        raise TypeError(
            f"psum_mode={psum_mode!r} takes {np.dtype(want).name} bit patterns, "
            f"got dtype {blocks.dtype}"
        )
    n_k, n_out = blocks.shape[0], blocks.shape[-1]
    if psum_mode == "fp32":
        vals = blocks.view(np.float32)
        acc = vals[0].copy()
        for k in range(1, n_k):
            acc = acc + vals[k]
        return acc.view(np.uint32)
    if psum_mode == "fp16":
        acc16 = np.zeros(blocks.shape[1:], dtype=np.uint16)
        for k in range(n_k):
            acc16 = fp16_add(acc16, blocks[k])
        return acc16
    if psum_mode == "mxint8_running":
        if sa_n < 1:
            raise ValueError(f"sa_n={sa_n} must be positive")
        # First pass: the buffer has never been written, so the old value is forced to 0.
        old = np.zeros(blocks.shape[1:-1] + (n_out + (-n_out) % sa_n,), dtype=np.uint16)
        for k in range(n_k):
            new = _pad_channels(blocks[k].astype(np.int64), sa_n).astype(np.uint16)
            stored = mxint8_quantize(fp16_add(old, new), block=sa_n, rounding=rounding)
            old = mxint8_dequantize(stored.q, stored.x_code, block=sa_n)
        return old[..., :n_out]
    if group_blocks < 1 or quant_block < 1:
        raise ValueError("group_blocks and quant_block must be positive")
    vals = blocks.view(np.float32)
    acc16 = np.zeros(blocks.shape[1:], dtype=np.uint16)
    for g0 in range(0, n_k, group_blocks):
        part = vals[g0].copy()
        for k in range(g0 + 1, min(g0 + group_blocks, n_k)):
            part = part + vals[k]
        padded = _pad_channels(part.view(np.uint32).astype(np.int64), quant_block)
        q, x = mxint8_group_quantize(
            padded.astype(np.uint32).view(np.float32), block=quant_block, rounding=rounding
        )
        qb = _blocks(q.astype(np.int64), quant_block)
        deq = round_scaled(qb, x.astype(np.int64)[..., None], fmt="fp16").reshape(q.shape)
        acc16 = fp16_add(acc16, deq[..., :n_out])
    return acc16
