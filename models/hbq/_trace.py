"""Trace of a tiled block-quantized GEMM (the contract of ``coaccel.trace``; docs/trace.md).

:func:`gemm_trace` walks the tiles of ``Y[M, N] = A[M, K] @ W[N, K]^T`` in a chosen loop order and
records, per tile, the operand reads, the GEMM work and the partial-sum traffic, with byte counts
taken from each operand format's effective bits per element (scales and side bits included).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.trace import Trace, TraceBuilder

from ..formats import FormatSpec, resolve
from ._psum import PSUM_MODES

__all__ = ["PLAIN_FORMAT_BITS", "gemm_trace", "psum_bits_per_element"]

PLAIN_FORMAT_BITS: Mapping[str, int] = {"fp32": 32, "fp16": 16, "bf16": 16}
"""Unquantized operand formats (not in the block-format registry) and their bits per element."""

_ORDERS = tuple("".join(p) for p in itertools.permutations("mnk"))


def psum_bits_per_element(psum_mode: str, *, sa_n: int = 16) -> Fraction:
    """Stored bits per partial sum in the PSUM buffer (specs/hbq.md §2.2).

    ``"fp32"`` 32; ``"fp16"`` 16; ``"mxint8_running"`` ``8 + 8 / sa_n`` (one 8-bit shared
    exponent per ``sa_n`` values: 136 bits per 16); ``"mxint8_group"`` 16 (the running
    accumulator of [R-EXT] is FP16; only the per-group contributions are MXINT8).
    """
    if psum_mode not in PSUM_MODES:
        raise ValueError(f"psum_mode={psum_mode!r}; valid choices: {', '.join(PSUM_MODES)}")
    if sa_n < 1:
        raise ValueError(f"sa_n={sa_n} must be positive")
    return {
        "fp32": Fraction(32),
        "fp16": Fraction(16),
        "mxint8_group": Fraction(16),
        "mxint8_running": 8 + Fraction(8, sa_n),
    }[psum_mode]


def _operand_format(fmt: str | FormatSpec, role: str) -> tuple[str, Fraction]:
    """(name, bits per element) of an operand format; HBQ names get the operand's role."""
    if isinstance(fmt, str) and fmt.lower() in PLAIN_FORMAT_BITS:
        return fmt.lower(), Fraction(PLAIN_FORMAT_BITS[fmt.lower()])
    spec = resolve(fmt)
    if isinstance(fmt, str) and getattr(spec, "role", role) != role:
        spec = resolve(fmt, role=role)
    return spec.name, Fraction(spec.bits_per_element())


def _tile_sizes(total: int, tile: int) -> npt.NDArray[np.int64]:
    full, rest = divmod(total, tile)
    return np.array([tile] * full + ([rest] if rest else []), dtype=np.int64)


def _tile_bytes(
    rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64], bits: Fraction
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Bytes of each (row tile, col tile) block, rounded up, and their tile-major offsets."""
    nbytes = np.array(
        [[math.ceil(int(r) * int(c) * bits / 8) for c in cols] for r in rows], dtype=np.int64
    )
    offsets = (np.cumsum(nbytes.ravel()) - nbytes.ravel()).reshape(nbytes.shape)
    return nbytes, offsets


def gemm_trace(
    m: int,
    n: int,
    k: int,
    fmt_a: str | FormatSpec,
    fmt_w: str | FormatSpec,
    *,
    tile_m: int,
    tile_n: int,
    tile_k: int,
    order: str = "nkm",
    psum_mode: str = "fp32",
    sa_n: int = 16,
    out: str = "fp32",
    a_space: str = "DRAM",
    w_space: str = "DRAM",
    psum_space: str = "PSUM",
    out_space: str = "DRAM",
    unit: str = "pe_array",
    workload: Mapping[str, Any] | None = None,
) -> Trace:
    """Trace of the tiled GEMM ``Y[M, N] = A[M, K] @ W[N, K]^T``.

    The loops run over tiles in ``order`` (outermost first; default ``"nkm"``, the
    weight-stationary order of the HBQ accelerator: output-channel tile, K tile, token tile).
    Per tile, in issue order:

    1. a read of the A tile (``tensor="A"``) unless the previous tile used the same A tile, and
       likewise for the W tile (``tensor="W"``): a one-tile operand buffer, so the operand that
       the innermost loop does not index is read once per pass;
    2. a ``"gemm"`` compute record (``m, n, k`` of the tile, ``macs = m·n·k``, the two format
       names, ``tile`` = ``(mi·n_tiles_n + ni)·n_tiles_k + ki``), depending on the latest
       operand read;
    3. a read of the partial-sum tile (``tensor="psum"``) for every K tile but the first, and a
       write of it for every K tile but the last, or else a write of the output tile
       (``tensor="Y"``).

    Bytes: A and W tiles use the formats' effective bits per element
    (``FormatSpec.bits_per_element()``, side information included; HBQ names are resolved with
    ``role="activation"`` for A and ``"weight"`` for W), PSUM tiles
    :func:`psum_bits_per_element`, Y tiles 16 or 32 bits. Each tensor is stored tile-major (every
    tile contiguous, tiles in row-major tile order), so each tile access is one contiguous record
    of ``ceil(elements · bits / 8)`` bytes at its tile's byte offset. Edge tiles are smaller
    when a dimension is not a multiple of its tile size.

    Args:
        m: rows of A and Y (tokens). n: rows of W, columns of Y (output channels).
        k: the reduction length.
        fmt_a: activation format: a registered format name or spec, or ``"fp16"``, ``"bf16"``,
            ``"fp32"`` (see :data:`PLAIN_FORMAT_BITS`).
        fmt_w: weight format, likewise.
        tile_m: tile size along M. tile_n: along N. tile_k: along K.
        order: loop order, a permutation of ``"mnk"`` (outermost first).
        psum_mode: partial-sum storage (:data:`~._psum.PSUM_MODES`).
        sa_n: values per MXINT8 block (``"mxint8_running"``).
        out: output format, ``"fp32"`` or ``"fp16"``.
        a_space: memory space of A. w_space: of W. psum_space: of the partial sums.
        out_space: memory space of Y.
        unit: the compute unit name of the compute records.
        workload: extra JSON metadata merged into the trace's ``workload``.

    Returns:
        The :class:`coaccel.trace.Trace` (no kernels or events: ``kernel`` stays 0, the
        docs/trace.md convention for the ASIC).
    """
    for name, v in (
        ("m", m),
        ("n", n),
        ("k", k),
        ("tile_m", tile_m),
        ("tile_n", tile_n),
        ("tile_k", tile_k),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    if order not in _ORDERS:
        raise ValueError(f"order={order!r}; valid choices: {', '.join(_ORDERS)}")
    if out not in ("fp16", "fp32"):
        raise ValueError(f"out={out!r}; valid choices: 'fp16', 'fp32'")
    name_a, bits_a = _operand_format(fmt_a, "activation")
    name_w, bits_w = _operand_format(fmt_w, "weight")
    bits_p = psum_bits_per_element(psum_mode, sa_n=sa_n)
    bits_y = Fraction(16 if out == "fp16" else 32)

    sizes = {"m": _tile_sizes(m, tile_m), "n": _tile_sizes(n, tile_n), "k": _tile_sizes(k, tile_k)}
    n_tiles = {d: len(s) for d, s in sizes.items()}
    a_bytes, a_addr = _tile_bytes(sizes["m"], sizes["k"], bits_a)
    w_bytes, w_addr = _tile_bytes(sizes["n"], sizes["k"], bits_w)
    p_bytes, p_addr = _tile_bytes(sizes["m"], sizes["n"], bits_p)
    y_bytes, y_addr = _tile_bytes(sizes["m"], sizes["n"], bits_y)

    meta = {
        "op": "gemm",
        "m": int(m),
        "n": int(n),
        "k": int(k),
        "tile_m": int(tile_m),
        "tile_n": int(tile_n),
        "tile_k": int(tile_k),
        "order": order,
        "fmt_a": name_a,
        "fmt_w": name_w,
        "bits_a": float(bits_a),
        "bits_w": float(bits_w),
        "psum_mode": psum_mode,
        "psum_bits": float(bits_p),
        "out": out,
        **dict(workload or {}),
    }
    b = TraceBuilder(producer="coaccel.models.hbq.gemm", workload=meta)
    last_k = n_tiles["k"] - 1
    prev_a = prev_w = None
    read_seq = -1
    ranges = [range(n_tiles[d]) for d in order]
    for idx in itertools.product(*ranges):
        t = dict(zip(order, idx, strict=True))
        mi, ni, ki = t["m"], t["n"], t["k"]
        if (mi, ki) != prev_a:
            read_seq = b.memory(
                space=a_space,
                rw="read",
                tensor="A",
                nbytes=int(a_bytes[mi, ki]),
                addr=int(a_addr[mi, ki]),
            )
            prev_a = (mi, ki)
        if (ni, ki) != prev_w:
            read_seq = b.memory(
                space=w_space,
                rw="read",
                tensor="W",
                nbytes=int(w_bytes[ni, ki]),
                addr=int(w_addr[ni, ki]),
            )
            prev_w = (ni, ki)
        if ki > 0:
            read_seq = b.memory(
                space=psum_space,
                rw="read",
                tensor="psum",
                nbytes=int(p_bytes[mi, ni]),
                addr=int(p_addr[mi, ni]),
            )
        tile = (mi * n_tiles["n"] + ni) * n_tiles["k"] + ki
        cseq = b.compute(
            op="gemm",
            unit=unit,
            m=int(sizes["m"][mi]),
            n=int(sizes["n"][ni]),
            k=int(sizes["k"][ki]),
            fmt_a=name_a,
            fmt_b=name_w,
            tile=tile,
            dep=read_seq,
        )
        if ki < last_k:
            b.memory(
                space=psum_space,
                rw="write",
                tensor="psum",
                dep=cseq,
                nbytes=int(p_bytes[mi, ni]),
                addr=int(p_addr[mi, ni]),
            )
        else:
            b.memory(
                space=out_space,
                rw="write",
                tensor="Y",
                dep=cseq,
                nbytes=int(y_bytes[mi, ni]),
                addr=int(y_addr[mi, ni]),
            )
    return b.build()
