"""Off-chip memory (DRAM) model shared by every simulator: bandwidth by transfer size, channels,
first-access latency and an optional open-row model.

One small model, driven by a :class:`~coaccel.config.DramConfig` (``arch_configs/dram/*.yaml``):

* **Bandwidth.** Sustained bandwidth = peak x efficiency(transfer size). The efficiency is a
  curve of ``(transfer_bytes, efficiency)`` points, interpolated piecewise-linearly in
  ``log2(transfer_bytes)`` and held constant beyond the first and last points (short transfers
  lose bandwidth to the per-burst and row overheads; long streams reach the measured plateau).
  A config with a single number is a flat curve, and then every function here gives exactly
  what ``peak x efficiency`` gives.
* **Channels.** Addresses are interleaved over ``channels`` in units of ``interleave_bytes``:
  address ``a`` lies in channel ``(a // interleave_bytes) % channels``.
* **Latency.** ``latency_ns`` is the first-access latency of a transfer (idle load-to-use).
* **Open rows** (only when ``row_buffer_bytes`` is set). Each channel keeps one row of
  ``row_buffer_bytes`` open; a transfer that starts in its channel's open row pays
  ``row_hit_penalty_ns``, any other pays ``row_miss_penalty_ns`` (precharge + activate).

Public functions (all vectorized over numpy arrays of sizes or addresses):
:func:`efficiency`, :func:`sustained_bytes_per_cycle`, :func:`transfer_cycles`,
:func:`latency_cycles`, :func:`channel_of`, :func:`row_of`, :func:`row_hits` and
:func:`row_penalty_cycles`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from coaccel.spine.config import DramConfig

__all__ = [
    "channel_of",
    "efficiency",
    "latency_cycles",
    "row_hits",
    "row_of",
    "row_penalty_cycles",
    "sustained_bytes_per_cycle",
    "transfer_cycles",
]


def _sizes(transfer_bytes: npt.ArrayLike, what: str = "transfer_bytes") -> npt.NDArray[np.int64]:
    a = np.asarray(transfer_bytes)
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.floor(a))):
        raise ValueError(f"{what} must be whole numbers of bytes, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if np.any(a < 0):
        raise ValueError(f"{what} must be >= 0, got minimum {int(a.min())}")
    return a


def _freq(freq_mhz: float) -> float:
    if not freq_mhz > 0:
        raise ValueError(f"freq_mhz must be > 0, got {freq_mhz!r}")
    return float(freq_mhz)


def efficiency(dram: DramConfig, transfer_bytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Sustained / peak bandwidth of transfers of the given sizes.

    Args:
        dram: the DRAM config.
        transfer_bytes: sizes of single transfers, B; any shape, whole numbers >= 0 (a size of
            0 takes the curve's first point).

    Returns:
        float64 array of the same shape, each in (0, 1]. For a flat curve (``efficiency:`` a
        single number) every entry equals that number exactly.

    Raises:
        ValueError: negative or fractional sizes.
    """
    sizes = _sizes(transfer_bytes)
    curve = dram.efficiency_curve
    if len(curve) == 1:
        return np.full(sizes.shape, curve[0].efficiency, dtype=np.float64)
    xs = np.log2(np.asarray([p.transfer_bytes for p in curve], dtype=np.float64))
    ys = np.asarray([p.efficiency for p in curve], dtype=np.float64)
    x = np.log2(np.maximum(sizes, 1).astype(np.float64))
    # np.interp holds the end values outside [xs[0], xs[-1]], as the curve is defined.
    return np.interp(x, xs, ys)


def sustained_bytes_per_cycle(
    dram: DramConfig, freq_mhz: float, transfer_bytes: npt.ArrayLike | None = None
) -> npt.NDArray[np.float64] | float:
    """Sustained bandwidth in bytes per cycle of the consumer's clock.

    Args:
        dram: the DRAM config.
        freq_mhz: the consumer's clock, MHz (the accelerator or memory-controller clock that
            counts the cycles).
        transfer_bytes: transfer sizes, B (any shape); None for long streaming transfers (the
            curve's last point).

    Returns:
        ``bw_gb_per_s x efficiency x 1e3 / freq_mhz`` B/cycle: a float for None, else a float64
        array of the shape of ``transfer_bytes``. With None the value equals
        :meth:`DramConfig.sustained_bytes_per_cycle` bit for bit.

    Raises:
        ValueError: ``freq_mhz <= 0``, or negative or fractional sizes.
    """
    f = _freq(freq_mhz)
    if transfer_bytes is None:
        return dram.sustained_bytes_per_cycle(f)
    return dram.bw_gb_per_s * efficiency(dram, transfer_bytes) * 1e3 / f


def transfer_cycles(
    dram: DramConfig, freq_mhz: float, transfer_bytes: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Cycles the memory system is busy moving each transfer at its size's bandwidth.

    The data time only: add :func:`latency_cycles` for the first access and
    :func:`row_penalty_cycles` for the open-row model where the simulator needs them.

    Args:
        dram: the DRAM config.
        freq_mhz: the consumer's clock, MHz.
        transfer_bytes: transfer sizes, B (any shape, whole numbers >= 0).

    Returns:
        int64 array of the same shape: ``ceil(bytes / sustained_bytes_per_cycle(bytes))``,
        0 for an empty transfer. For a flat curve this is ``ceil(bytes / (peak x efficiency
        x 1e3 / freq_mhz))``, as the HBQ simulator counts DMA cycles.

    Raises:
        ValueError: ``freq_mhz <= 0``, or negative or fractional sizes.
    """
    sizes = _sizes(transfer_bytes)
    bpc = sustained_bytes_per_cycle(dram, freq_mhz, sizes)
    out = np.ceil(sizes / bpc).astype(np.int64)
    return np.where(sizes > 0, out, 0)


def latency_cycles(dram: DramConfig, freq_mhz: float) -> int:
    """First-access latency in whole cycles of the consumer's clock (rounded up).

    Args:
        dram: the DRAM config.
        freq_mhz: the consumer's clock, MHz.

    Returns:
        ``ceil(latency_ns x freq_mhz / 1000)`` cycles.

    Raises:
        ValueError: ``freq_mhz <= 0``.
    """
    return math.ceil(dram.latency_ns * _freq(freq_mhz) / 1000.0)


def channel_of(dram: DramConfig, addresses: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The channel each byte address maps to.

    Args:
        dram: the DRAM config.
        addresses: byte addresses (any shape, whole numbers >= 0).

    Returns:
        int64 array of the same shape: ``(address // interleave_bytes) % channels``.

    Raises:
        ValueError: negative or fractional addresses.
    """
    a = _sizes(addresses, "addresses")
    return (a // dram.interleave_bytes) % dram.channels


def _require_rows(dram: DramConfig) -> int:
    if dram.row_buffer_bytes is None:
        raise ValueError(
            "the open-row model is off for this DRAM config: set row_buffer_bytes (and the "
            "row_hit_penalty_ns / row_miss_penalty_ns figures) to use it"
        )
    return dram.row_buffer_bytes


def row_of(dram: DramConfig, addresses: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The row (within its channel) each byte address lies in.

    The channel-local address keeps the bytes a channel owns contiguous: ``(a //
    (interleave_bytes x channels)) x interleave_bytes + a % interleave_bytes``; its row is that
    address ``// row_buffer_bytes``.

    Args:
        dram: the DRAM config; needs ``row_buffer_bytes``.
        addresses: byte addresses (any shape, whole numbers >= 0).

    Returns:
        int64 array of the same shape.

    Raises:
        ValueError: the open-row model is off, or negative or fractional addresses.
    """
    row_bytes = _require_rows(dram)
    a = _sizes(addresses, "addresses")
    il = dram.interleave_bytes
    local = (a // (il * dram.channels)) * il + a % il
    return local // row_bytes


def row_hits(dram: DramConfig, addresses: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Which of a sequence of transfers start in the row their channel has open.

    Transfers are served in the given order; each opens the row of its start address in its
    channel (the row stays open until another row of that channel is needed). The first
    transfer to a channel is a miss (no row open).

    Args:
        dram: the DRAM config; needs ``row_buffer_bytes``.
        addresses: start byte addresses of the transfers, in service order, shape (n,).

    Returns:
        bool array, shape (n,): True for a row hit.

    Raises:
        ValueError: the open-row model is off, ``addresses`` is not 1-D, or negative or
            fractional addresses.
    """
    a = _sizes(addresses, "addresses")
    if a.ndim != 1:
        raise ValueError(f"addresses must be 1-D (a sequence of transfers), got shape {a.shape}")
    rows = row_of(dram, a)
    ch = channel_of(dram, a)
    order = np.argsort(ch, kind="stable")  # service order kept within each channel
    ch_s, rows_s = ch[order], rows[order]
    hit_s = np.zeros(a.shape, dtype=np.bool_)
    if a.size > 1:
        hit_s[1:] = (ch_s[1:] == ch_s[:-1]) & (rows_s[1:] == rows_s[:-1])
    hits = np.empty_like(hit_s)
    hits[order] = hit_s
    return hits


def row_penalty_cycles(
    dram: DramConfig, freq_mhz: float, addresses: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Extra cycles of each transfer of a sequence from the open-row model.

    Args:
        dram: the DRAM config; needs ``row_buffer_bytes``.
        freq_mhz: the consumer's clock, MHz.
        addresses: start byte addresses of the transfers, in service order, shape (n,).

    Returns:
        int64 array, shape (n,): ``ceil(penalty_ns x freq_mhz / 1000)`` with the row-hit or
        row-miss penalty of each transfer (:func:`row_hits`).

    Raises:
        ValueError: the open-row model is off, ``freq_mhz <= 0``, or bad addresses.
    """
    f = _freq(freq_mhz)
    hits = row_hits(dram, addresses)
    hit_c = math.ceil(dram.row_hit_penalty_ns * f / 1000.0)
    miss_c = math.ceil(dram.row_miss_penalty_ns * f / 1000.0)
    return np.where(hits, hit_c, miss_c).astype(np.int64)
