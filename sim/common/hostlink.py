"""Host link model shared by simulators with a host-memory path (PCIe, NVLink-C2C).

A :class:`HostLinkConfig` (a block of an architecture file) describes one link between host
memory and device memory:

* **Bandwidth per direction.** ``h2d_bw_gb_per_s`` and ``d2h_bw_gb_per_s`` are the raw
  per-direction bandwidths; a copy of ``n`` bytes streams at ``bw x efficiency(n)``, where the
  efficiency is a curve over transfer size (``(transfer_bytes, efficiency)`` points, the same
  shape and interpolation as the DRAM curve of :mod:`coaccel.sim.common.offchip`: piecewise
  linear in ``log2`` of the size, constant beyond its ends).
* **Fixed cost per transfer.** Every copy-engine transfer pays ``copy_fixed_us`` (driver,
  doorbell and completion), so ``seconds(n) = copy_fixed_us + n / (bw x efficiency(n))``:
  small copies are latency-bound, large ones reach the plateau.
* **Copy engines.** ``copy_engines_per_direction`` transfers of one direction can run at once;
  H2D and D2H engines are separate, so copies of opposite directions run concurrently.
* **Pageable memory.** A copy from pageable (not pinned) host memory is staged through a
  pinned bounce buffer: its bandwidth is scaled by ``pageable_efficiency``.
* **Zero-copy loads.** SM-issued loads of pinned host memory cross the link in
  ``zero_copy_granularity_bytes`` requests at ``zero_copy_efficiency`` of the link bandwidth,
  each paying ``zero_copy_latency_ns`` (the latency a kernel must hide with loads in flight).

Public: :class:`HostLinkConfig`, :func:`link_efficiency`, :func:`copy_seconds`,
:func:`zero_copy_bytes`, :func:`zero_copy_seconds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.config import EfficiencyPoint, FrozenMap, Problem, param

__all__ = [
    "HostLinkConfig",
    "copy_seconds",
    "link_efficiency",
    "zero_copy_bytes",
    "zero_copy_seconds",
]

LinkType = Literal["pcie3", "pcie4", "pcie5", "nvlink_c2c"]
Direction = Literal["h2d", "d2h"]


@dataclass(frozen=True)
class HostLinkConfig:
    """A host <-> device link.

    Attributes:
        type: link standard.
        h2d_bw_gb_per_s: raw host-to-device bandwidth, GB/s.
        d2h_bw_gb_per_s: raw device-to-host bandwidth, GB/s.
        efficiency: sustained / raw bandwidth of one copy by its size (strictly increasing
            ``transfer_bytes``), in (0, 1].
        copy_fixed_us: fixed cost of one copy-engine transfer, µs.
        copy_engines_per_direction: copies of one direction that can run concurrently.
        pageable_efficiency: bandwidth factor of copies from pageable host memory, (0, 1].
        zero_copy_granularity_bytes: bytes per SM-issued host load request, B.
        zero_copy_efficiency: sustained / raw bandwidth of zero-copy loads, (0, 1].
        zero_copy_latency_ns: round-trip latency of one zero-copy load, ns.
        d2h_efficiency_factor: device-to-host efficiency relative to host-to-device, (0, 1]
            (1 for a symmetric link; the measured D2H / H2D plateau ratio otherwise).
        sources: provenance of the figures, by field name.
    """

    type: LinkType = param(doc="link standard")
    h2d_bw_gb_per_s: float = param(gt=0, doc="raw host-to-device bandwidth")
    d2h_bw_gb_per_s: float = param(gt=0, doc="raw device-to-host bandwidth")
    efficiency: tuple[EfficiencyPoint, ...] = param(doc="sustained / raw by copy size")
    copy_fixed_us: float = param(ge=0, doc="fixed cost per copy-engine transfer")
    copy_engines_per_direction: int = param(default=1, ge=1, doc="concurrent copies per direction")
    pageable_efficiency: float = param(default=0.5, gt=0, le=1, doc="pageable-memory factor")
    zero_copy_granularity_bytes: int = param(default=128, ge=1, doc="bytes per zero-copy load")
    zero_copy_efficiency: float = param(default=0.8, gt=0, le=1, doc="zero-copy bandwidth factor")
    zero_copy_latency_ns: float = param(default=1000.0, ge=0, doc="zero-copy load latency")
    d2h_efficiency_factor: float = param(
        default=1.0, gt=0, le=1, doc="D2H plateau / H2D plateau (asymmetric links)"
    )
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by field name")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: a non-empty curve with strictly increasing sizes."""
        out: list[Problem | str] = []
        if not self.efficiency:
            out.append(Problem("", "efficiency", [], "the link efficiency curve needs a point"))
        sizes = [p.transfer_bytes for p in self.efficiency]
        for i in range(1, len(sizes)):
            if sizes[i] <= sizes[i - 1]:
                out.append(
                    Problem(
                        "",
                        f"efficiency[{i}].transfer_bytes",
                        sizes[i],
                        f"transfer sizes must increase strictly: {sizes[i]} B after "
                        f"{sizes[i - 1]} B",
                    )
                )
        return out

    def bw_bytes_per_s(self, direction: Direction) -> float:
        """Raw bandwidth of one direction, B/s."""
        gb = self.h2d_bw_gb_per_s if direction == "h2d" else self.d2h_bw_gb_per_s
        return gb * 1e9


def link_efficiency(link: HostLinkConfig, transfer_bytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Sustained / raw bandwidth of copies of the given sizes.

    Args:
        link: the link.
        transfer_bytes: copy sizes, B, any shape (>= 0; 0 takes the first point).

    Returns:
        float64 array of the same shape, in (0, 1].
    """
    x = np.log2(np.maximum(np.asarray(transfer_bytes, dtype=np.float64), 1.0))
    xs = np.log2(np.asarray([p.transfer_bytes for p in link.efficiency], dtype=np.float64))
    ys = np.asarray([p.efficiency for p in link.efficiency], dtype=np.float64)
    return np.interp(x, xs, ys)


def copy_seconds(
    link: HostLinkConfig,
    transfer_bytes: npt.ArrayLike,
    direction: Direction,
    *,
    pinned: bool = True,
) -> npt.NDArray[np.float64]:
    """Time of copy-engine transfers, each alone on the link.

    ``copy_fixed_us x 1e-6 + n / (bw x efficiency(n) [x pageable_efficiency])``; an empty copy
    still pays the fixed cost (the call is made).

    Args:
        link: the link.
        transfer_bytes: copy sizes, B, any shape.
        direction: ``"h2d"`` or ``"d2h"``.
        pinned: False for pageable host memory.

    Returns:
        float64 array of the shape of ``transfer_bytes``, s.
    """
    n = np.asarray(transfer_bytes, dtype=np.float64)
    if np.any(n < 0):
        raise ValueError("transfer_bytes must be >= 0")
    bw = link.bw_bytes_per_s(direction) * link_efficiency(link, n)
    if direction == "d2h":
        bw = bw * link.d2h_efficiency_factor
    if not pinned:
        bw = bw * link.pageable_efficiency
    return link.copy_fixed_us * 1e-6 + n / bw


def zero_copy_bytes(link: HostLinkConfig, sectors_bytes: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Bytes that cross the link for zero-copy loads of given requested bytes.

    Each load moves whole requests of ``zero_copy_granularity_bytes``.

    Args:
        link: the link.
        sectors_bytes: bytes each load needs (already sector-rounded), B, any shape.

    Returns:
        int64 array: the bytes rounded up to whole requests.
    """
    g = link.zero_copy_granularity_bytes
    n = np.asarray(sectors_bytes, dtype=np.int64)
    return -(-n // g) * g


def zero_copy_seconds(link: HostLinkConfig, link_bytes: float, bytes_in_flight: float) -> float:
    """Time for SM-issued zero-copy loads of ``link_bytes`` over an otherwise idle link.

    The loads reach the lesser of the link's zero-copy bandwidth and what the bytes in flight
    sustain over the round trip (Little's law: ``bytes_in_flight / zero_copy_latency``), and
    the last load's latency is exposed.

    Args:
        link: the link.
        link_bytes: bytes crossing the link (:func:`zero_copy_bytes`), B.
        bytes_in_flight: host-load bytes the kernel keeps outstanding, B (> 0).

    Returns:
        Seconds (0 for no bytes).
    """
    if link_bytes <= 0:
        return 0.0
    lat = link.zero_copy_latency_ns * 1e-9
    bw = link.bw_bytes_per_s("h2d") * link.zero_copy_efficiency
    if lat > 0 and bytes_in_flight > 0:
        bw = min(bw, bytes_in_flight / lat)
    return link_bytes / bw + lat
