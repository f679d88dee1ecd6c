"""numba kernels of the NOSA reference's token-wide passes, equal to their numpy forms bit for bit.

* :func:`keys_bf16` — ``f32_to_bf16_bits(table[z] + cent[block])`` in one pass: a float32 add
  and the round-to-nearest-even of :func:`~._bf16.f32_to_bf16_bits` (NaN kept quiet), without
  the float32 and uint32 temporaries of the numpy form;
* :func:`chunk_sums` — float64 sums of ``stride`` consecutive bf16 rows: every partial sum of
  bf16 values is exact in float64, so the result does not depend on the summation order.

Both are plain IEEE float32 / float64 arithmetic (no fastmath), so they equal the numpy forms.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["bf16_to_f64", "chunk_sums", "keys_bf16", "lookup_bf16"]


@numba.njit(cache=True)
def _keys_bf16(z, table, cent, t0, bt, out):  # pragma: no cover - compiled
    b_, n, hkv, d = z.shape
    u = np.empty(1, dtype=np.float32)
    ub = u.view(np.uint32)
    for b in range(b_):
        for i in range(n):
            blk = (t0 + i) // bt
            for h in range(hkv):
                for j in range(d):
                    u[0] = table[z[b, i, h, j]] + cent[b, blk, h, j]
                    bits = ub[0]
                    if (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
                        out[b, i, h, j] = np.uint16((bits >> np.uint32(16)) | np.uint32(0x0040))
                    else:
                        lsb = (bits >> np.uint32(16)) & np.uint32(1)
                        out[b, i, h, j] = np.uint16(
                            (bits + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
                        )


def keys_bf16(
    z: npt.NDArray[np.uint8],
    table: npt.NDArray[np.float32],
    cent: npt.NDArray[np.float32],
    t0: int,
    block_tokens: int,
    out: npt.NDArray[np.uint16],
) -> None:
    """Write ``f32_to_bf16_bits(table[z] + cent[:, (t0 + i) // block_tokens])`` into ``out``.

    Args:
        z: ``[B, n, Hkv, D]`` uint8 noise codes of tokens ``t0 .. t0 + n``.
        table: ``[256]`` float32 scaled noise alphabet.
        cent: ``[B, n_blocks, Hkv, D]`` float32 block centroids.
        t0: first token of the chunk.
        block_tokens: tokens per block.
        out: ``[B, n, Hkv, D]`` uint16 bf16 bit patterns, written in place.
    """
    _keys_bf16(z, table, cent, t0, block_tokens, out)


@numba.njit(cache=True)
def _chunk_sums(k, stride, out):  # pragma: no cover - compiled
    b_, n_chunks, hkv, d = out.shape
    u = np.empty(1, dtype=np.uint32)
    f = u.view(np.float32)
    for b in range(b_):
        for c in range(n_chunks):
            for h in range(hkv):
                for j in range(d):
                    acc = 0.0
                    for i in range(stride):
                        u[0] = np.uint32(k[b, c * stride + i, h, j]) << np.uint32(16)
                        acc += np.float64(f[0])
                    out[b, c, h, j] = acc


def chunk_sums(k: npt.NDArray[np.uint16], stride: int) -> npt.NDArray[np.float64]:
    """``[B, T // stride, Hkv, D]`` float64 sums of ``stride`` consecutive bf16 tokens of ``k``.

    Args:
        k: ``[B, T, Hkv, D]`` uint16 bf16 keys.
        stride: tokens per sum.
    """
    b_, t, hkv, d = k.shape
    out = np.empty((b_, t // stride, hkv, d), dtype=np.float64)
    _chunk_sums(k, stride, out)
    return out


@numba.njit(cache=True)
def _lookup(z, table, out):  # pragma: no cover - compiled
    zf = z.reshape(-1)
    of = out.reshape(-1)
    for i in range(zf.size):
        of[i] = table[zf[i]]


def lookup_bf16(z: npt.NDArray[np.uint8], table: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint16]:
    """``table[z]`` (any shape; ``z`` C-contiguous) as a new uint16 array."""
    out = np.empty(z.shape, dtype=np.uint16)
    _lookup(z, table, out)
    return out


@numba.njit(cache=True)
def _to_f64(x, out):  # pragma: no cover - compiled
    xf = x.reshape(-1)
    of = out.reshape(-1)
    u = np.empty(1, dtype=np.uint32)
    f = u.view(np.float32)
    for i in range(xf.size):
        u[0] = np.uint32(xf[i]) << np.uint32(16)
        of[i] = np.float64(f[0])


def bf16_to_f64(x: npt.NDArray[np.uint16]) -> npt.NDArray[np.float64]:
    """The float64 values of bf16 bit patterns (exact), in one pass.

    Args:
        x: uint16 bf16 patterns of any shape (copied first when not C-contiguous).

    Returns:
        float64 values, same shape.
    """
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, dtype=np.float64)
    _to_f64(x, out)
    return out
