"""Bit layouts of quantized tensors (the [R-ACC] vector packing), for storage and for the RTL.

A field of ``n`` codes of ``width`` bits is one little-endian bit vector: code ``g`` occupies bits
``[width*g +: width]``, bit ``i`` of the vector is bit ``i % 8`` of byte ``i // 8``, and unused
high bits of the last byte are 0. This is the RTL's vector packing (element ``g`` at
``[X*g +: X]``), so :func:`to_verilog_hex` of a packed row is the ``$readmemh`` word of that
vector. :func:`pack` packs every field of a :class:`~._quantized.QuantizedTensor` per block:
element codes, the block scale, HBQ's L2 codes and its weight scheme bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._quantized import FormatSpec, QuantizedTensor


def _nbytes(n_bits: int) -> int:
    return (n_bits + 7) // 8


def _check_width(width: int) -> int:
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or not 1 <= width <= 16:
        raise ValueError(f"width={width!r}; expected an integer in 1..16")
    return int(width)


def pack_bits(codes: npt.ArrayLike, width: int) -> npt.NDArray[np.uint8]:
    """Pack the last axis of ``codes`` into little-endian bit vectors.

    Args:
        codes: unsigned integer codes ``(..., n)``, each below ``2**width``.
        width: bits per code, 1..16.

    Returns:
        uint8 ``(..., ceil(n * width / 8))``; code ``g`` at bits ``[width*g +: width]``.

    Raises:
        ValueError: a code does not fit in ``width`` bits, or a negative / non-integer code.
    """
    width = _check_width(width)
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise TypeError(f"codes must be an integer array, got dtype {c.dtype}")
    if c.ndim == 0:
        raise ValueError("codes must have at least one dimension (the packed axis)")
    if c.size and (c.min() < 0 or c.max() >= 1 << width):
        bad = int(c[(c < 0) | (c >= 1 << width)].flat[0])
        raise ValueError(f"code {bad} does not fit in {width} bits")
    c = c.astype(np.uint16)
    shifts = np.arange(width, dtype=np.uint16)
    bits = ((c[..., None] >> shifts) & 1).astype(np.uint8)
    bits = bits.reshape(c.shape[:-1] + (c.shape[-1] * width,))
    return np.packbits(bits, axis=-1, bitorder="little")


def unpack_bits(packed: npt.ArrayLike, width: int, n: int) -> npt.NDArray[np.unsignedinteger]:
    """Inverse of :func:`pack_bits`.

    Args:
        packed: uint8 ``(..., n_bytes)`` with ``n_bytes >= ceil(n * width / 8)``.
        width: bits per code, 1..16.
        n: number of codes per vector.

    Returns:
        ``(..., n)`` codes, uint8 (uint16 when ``width > 8``).

    Raises:
        ValueError: too few bytes for ``n`` codes.
    """
    width = _check_width(width)
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise TypeError(f"packed must be a uint8 array, got dtype {p.dtype}")
    if p.ndim == 0 or p.shape[-1] * 8 < n * width:
        have = p.shape[-1] if p.ndim else 0
        raise ValueError(f"{have} byte(s) cannot hold {n} codes of {width} bits")
    bits = np.unpackbits(p, axis=-1, count=n * width, bitorder="little")
    bits = bits.reshape(p.shape[:-1] + (n, width)).astype(np.uint16)
    codes = (bits << np.arange(width, dtype=np.uint16)).sum(axis=-1, dtype=np.uint16)
    return codes.astype(np.uint8 if width <= 8 else np.uint16)


@dataclass(frozen=True, eq=False)
class PackedTensor:
    """A quantized tensor as per-block bit vectors (little-endian bytes, see :func:`pack_bits`).

    Attributes:
        spec: the format spec (block size and field widths).
        shape: the original tensor shape.
        axis: the blocking axis of the original tensor.
        rounding: the rounding mode used.
        elements: uint8 ``(..., n_blocks, ceil(block * element_bits / 8))``.
        scales: uint8 ``(..., n_blocks, ceil(scale_bits / 8))``.
        l2: HBQ L2 codes, uint8 ``(..., n_blocks, ceil(n_ub * l2_bits / 8))``, or None.
        scheme: HBQ weight scheme bit, uint8 ``(..., n_blocks, 1)`` (bit 0), or None.
        tensor_scale: NVFP4's FP32 per-tensor scale, or None.
        block_len: elements per block when it differs from ``spec.block`` (HBQ makes an axis
            shorter than the block one block of the axis length); None means ``spec.block``.
    """

    spec: FormatSpec
    shape: tuple[int, ...]
    axis: int
    rounding: str
    elements: npt.NDArray[np.uint8]
    scales: npt.NDArray[np.uint8]
    l2: npt.NDArray[np.uint8] | None = None
    scheme: npt.NDArray[np.uint8] | None = None
    tensor_scale: np.float32 | None = None
    block_len: int | None = None

    @property
    def n_per_block(self) -> int:
        """Elements per block."""
        return self.spec.block if self.block_len is None else self.block_len

    def nbytes(self) -> int:
        """Bytes of the packed fields (byte-aligned per block; the FP32 tensor scale adds 4)."""
        total = self.elements.nbytes + self.scales.nbytes
        for f in (self.l2, self.scheme):
            total += 0 if f is None else f.nbytes
        return total + (4 if self.tensor_scale is not None else 0)


def _l2_layout(spec: FormatSpec, block_len: int) -> tuple[int, int]:
    """(L2 code width, micro-blocks per block) of an HBQ spec; (0, 0) for other formats."""
    l2_bits = int(getattr(spec, "l2_bits", 0) or 0)
    if not l2_bits:
        return 0, 0
    ub = int(spec.ub)  # type: ignore[attr-defined]
    return l2_bits, block_len // ub


def pack(q: QuantizedTensor) -> PackedTensor:
    """Pack a quantized tensor into per-block bit vectors.

    Uses ``spec.element_bits``, ``spec.scale_bits`` and, for HBQ, ``spec.l2_bits`` and
    ``spec.ub`` (``block // ub`` L2 codes per block) and 1 scheme bit per block.

    Args:
        q: the quantized tensor.

    Returns:
        The :class:`PackedTensor`.

    Raises:
        ValueError: a code that does not fit its field width.
    """
    spec = q.spec
    block_len = int(q.codes.shape[-1])
    elements = pack_bits(q.codes, spec.element_bits)
    scales = pack_bits(np.asarray(q.scales)[..., None], spec.scale_bits)
    l2 = scheme = None
    if q.l2_codes is not None:
        l2_bits, _ = _l2_layout(spec, block_len)
        if not l2_bits:
            raise ValueError(f"format {spec.name!r} has L2 codes but no l2_bits")
        l2 = pack_bits(q.l2_codes, l2_bits)
    if q.scheme is not None:
        scheme = pack_bits(np.asarray(q.scheme)[..., None], 1)
    return PackedTensor(
        spec=spec,
        shape=tuple(q.shape),
        axis=q.axis,
        rounding=q.rounding,
        elements=elements,
        scales=scales,
        l2=l2,
        scheme=scheme,
        tensor_scale=q.tensor_scale,
        block_len=None if block_len == spec.block else block_len,
    )


def unpack(p: PackedTensor) -> QuantizedTensor:
    """Inverse of :func:`pack`: the :class:`~._quantized.QuantizedTensor` with the same codes.

    The result dequantizes through the numpy reference (its ``extra`` is empty).
    """
    spec = p.spec
    codes = unpack_bits(p.elements, spec.element_bits, p.n_per_block)
    scales = unpack_bits(p.scales, spec.scale_bits, 1)[..., 0]
    l2 = scheme = None
    if p.l2 is not None:
        l2_bits, n_ub = _l2_layout(spec, p.n_per_block)
        l2 = unpack_bits(p.l2, l2_bits, n_ub)
    if p.scheme is not None:
        scheme = unpack_bits(p.scheme, 1, 1)[..., 0]
    return QuantizedTensor(
        spec=spec,
        codes=codes,
        scales=scales,
        shape=tuple(p.shape),
        axis=p.axis,
        rounding=p.rounding,
        l2_codes=l2,
        scheme=scheme,
        tensor_scale=p.tensor_scale,
    )


def to_verilog_hex(packed_rows: npt.ArrayLike, width_bits: int) -> list[str]:
    """Hex words for ``$readmemh``, one per row, most significant digit first.

    Args:
        packed_rows: uint8 ``(rows, n_bytes)`` little-endian bit vectors (e.g. a
            :func:`pack_bits` result reshaped to 2-D).
        width_bits: the word width; each word has ``ceil(width_bits / 4)`` hex digits.

    Returns:
        One lower-case hex string per row.

    Raises:
        ValueError: a row with bits set at or above ``width_bits``, or too few bytes.
    """
    rows = np.asarray(packed_rows)
    if rows.dtype != np.uint8 or rows.ndim != 2:
        raise ValueError(f"packed_rows must be a 2-D uint8 array, got {rows.dtype} {rows.shape}")
    if width_bits < 1 or rows.shape[1] < _nbytes(width_bits):
        raise ValueError(f"{rows.shape[1]} byte(s) per row cannot hold a {width_bits}-bit word")
    digits = (width_bits + 3) // 4
    out = []
    for i, row in enumerate(rows):
        v = int.from_bytes(row.tobytes(), "little")
        if v >> width_bits:
            raise ValueError(f"row {i} has bits set above bit {width_bits - 1}")
        out.append(format(v, f"0{digits}x"))
    return out


__all__ = ["PackedTensor", "pack", "pack_bits", "to_verilog_hex", "unpack", "unpack_bits"]
