"""Occupancy and memory-level parallelism of a kernel from its launch geometry.

* :func:`resident_ctas`: CTAs one SM holds at once, the least of the SM's limits on CTAs,
  threads (in whole warps), shared memory (each CTA's request plus the shared memory the
  system reserves per CTA) and registers (allocated per warp in whole allocation units): the
  occupancy rule of the CUDA programming guide ([CUDA-GUIDE]).
* :func:`wave_sizes`: CTAs of each wave: full waves of ``SMs x resident`` and a partial last
  one.
* :func:`mlp_bytes_per_s`: the bandwidth loads in flight sustain over a latency (Little's law:
  ``bandwidth = bytes in flight / latency``), from the SMs a wave occupies, the CTAs each holds
  and the bytes each CTA keeps outstanding (pipeline stages x tile bytes), capped per SM.

This is what makes split count and batch size matter at short context: a grid that does not
fill the SMs, or CTAs with too few bytes in flight, cannot reach the DRAM plateau.
"""

from __future__ import annotations

import math

from .config import SmConfig

__all__ = ["mlp_bytes_per_s", "resident_ctas", "wave_sizes"]

WARP_THREADS = 32


def resident_ctas(
    sm: SmConfig, threads_per_cta: int, smem_bytes_per_cta: int, regs_per_thread: int
) -> int:
    """CTAs one SM holds at once.

    Args:
        sm: the SM limits.
        threads_per_cta: threads per CTA (0: unknown, not limiting).
        smem_bytes_per_cta: shared memory per CTA, B (0: none or unknown).
        regs_per_thread: registers per thread (0: unknown, not limiting).

    Returns:
        ``min(max_ctas, max_threads // (warps x 32), smem // (smem_per_cta + reserved),
        regs // (warps x ceil(regs x 32 / unit) x unit))``, at least 0 (0: one CTA does not
        fit an SM). The reserved shared memory counts only for a CTA that uses shared memory.
    """
    limits = [sm.max_ctas_per_sm]
    warps = math.ceil(threads_per_cta / WARP_THREADS) if threads_per_cta else 0
    if warps:
        limits.append(sm.max_threads_per_sm // (warps * WARP_THREADS))
    if smem_bytes_per_cta:
        reserved = round(sm.smem_reserved_per_cta_kib * 1024)
        limits.append(round(sm.smem_per_sm_kib * 1024) // (smem_bytes_per_cta + reserved))
    if regs_per_thread and warps:
        unit = sm.regs_alloc_unit_per_warp
        per_warp = math.ceil(regs_per_thread * WARP_THREADS / unit) * unit
        limits.append(sm.regs_per_sm // (warps * per_warp))
    return max(0, min(limits))


def wave_sizes(ctas: int, sms: int, resident: int) -> list[int]:
    """CTAs of each wave of a grid.

    Args:
        ctas: grid size (>= 0).
        sms: SMs.
        resident: CTAs per SM (>= 1).

    Returns:
        Full waves of ``sms x resident`` CTAs, then the partial remainder (no entry for an
        empty grid).
    """
    per = sms * resident
    full, rest = divmod(ctas, per)
    return [per] * full + ([rest] if rest else [])


def mlp_bytes_per_s(
    sm: SmConfig, wave_ctas: int, inflight_bytes_per_cta: float, latency_s: float
) -> float:
    """Bandwidth the loads in flight of one wave sustain (Little's law).

    The wave's CTAs spread over ``min(SMs, wave_ctas)`` SMs; an SM with ``k`` CTAs keeps
    ``min(k x inflight_bytes_per_cta, max_inflight_per_sm)`` bytes outstanding.

    Args:
        sm: the SMs.
        wave_ctas: CTAs in the wave (>= 1).
        inflight_bytes_per_cta: bytes one CTA keeps outstanding, B.
        latency_s: mean load latency, s (> 0).

    Returns:
        B/s (inf for a zero latency).
    """
    if latency_s <= 0:
        return math.inf
    active = min(sm.count, wave_ctas)
    per_sm = math.ceil(wave_ctas / active)
    inflight = min(per_sm * inflight_bytes_per_cta, sm.max_inflight_per_sm_kib * 1024)
    return active * inflight / latency_s
