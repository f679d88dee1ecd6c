"""The weight-stationary schedule of one GEMM: tiles, transfers and SRAM accesses.

Both fidelities run the same schedule; this module is what they share. For ``Y[M, N] =
X[M, K] @ W[K, N]`` on an array of ``R x C`` PEs:

* **Tiles.** A token tile of ``m_t`` rows, ``m_t = min(M, floor(act / (2 K a)),
  floor(out / (2 C o)))`` (two activation slabs of ``m_t x K`` and two output tiles of
  ``m_t x C`` fit their SRAMs; ``a``, ``o`` bits per element, SRAM sizes in bits). Loops, outer
  to inner: token tile ``i < T_m = ceil(M / m_t)``, output tile ``j < T_n = ceil(N / C)``,
  reduction tile ``l < T_k = ceil(K / R)``. Each (i, j, l) is one *array tile*: the weight tile
  ``W[lR:(l+1)R, jC:(j+1)C]`` sits in the PEs while the ``m_i`` activation rows of token tile
  ``i`` stream through; its last output leaves the array ``m_i + R + C - 2`` cycles after its
  first activation enters (the skew: ``R - 1`` rows down and ``C - 1`` columns across).
  Partial sums are accumulated in the output SRAM across ``l``.
* **Transfers** (one DMA engine, in order, at the DRAM's sustained bandwidth, each completing
  the DRAM's first-access latency after it leaves the queue): the activation slab of a token
  tile (``m_i x K``, once per token tile, read into one of two slab slots), every weight tile
  (once per token tile, into one of ``S_w = floor(weight SRAM / (R C w))`` slots, prefetched
  ``S_w - 1`` tiles ahead), and every finished output tile (``m_i x C``, written from one of
  two output slots).
* **SRAM accesses** (the same in both modes): the activation SRAM is read one row of ``R``
  activations per streamed row per array tile, the weight SRAM one row of ``C`` weights per PE
  row loaded, the output SRAM read and written one row of ``C`` partial sums per streamed row
  per array tile (plus one read per output row for the write to DRAM).

Public: :class:`GemmPlan`, :func:`plan_gemm`, :func:`transfer_cycles_of`,
:func:`latency_cycles_of`, :class:`DmaCycles` and :func:`dma_cycles` (the DMA occupancy of
each transfer size), :func:`buffer_accesses`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coaccel.sim.common import offchip
from coaccel.sim.common.result import BufferAccess
from coaccel.spine.config import ConfigError, Problem

from .config import SystolicArchConfig
from .workload import Gemm

__all__ = [
    "DmaCycles",
    "GemmPlan",
    "buffer_accesses",
    "dma_cycles",
    "latency_cycles_of",
    "plan_gemm",
    "transfer_cycles_of",
]


def _bytes(elements: int, bits: int) -> int:
    return -(-elements * bits // 8)


@dataclass(frozen=True)
class GemmPlan:
    """The tiles of one GEMM on one architecture and the sizes of its transfers.

    Attributes:
        gemm: the GEMM.
        rows: PE rows R. cols: PE columns C.
        m_tile: rows of a full token tile ``m_t``.
        t_m: token tiles. t_n: output tiles per token tile. t_k: reduction tiles.
        m_last: rows of the last token tile.
        n_last: output channels of the last output tile. k_last: reduction elements of the
            last reduction tile.
        weight_slots: weight tiles the weight SRAM holds ``S_w`` (>= 2).
        act_bytes: bytes of a full and of the last activation slab, B.
        weight_bytes: bytes of a weight tile: ``[[full, last n], [last k, last k and n]]``, B.
        out_bytes: bytes of an output tile: ``[[full, last n], [last m, last m and n]]``, B.
        skew_cycles: fill and drain of one array tile, ``R + C - 2`` cycles.
    """

    gemm: Gemm
    rows: int
    cols: int
    m_tile: int
    t_m: int
    t_n: int
    t_k: int
    m_last: int
    n_last: int
    k_last: int
    weight_slots: int
    act_bytes: tuple[int, int]
    weight_bytes: tuple[tuple[int, int], tuple[int, int]]
    out_bytes: tuple[tuple[int, int], tuple[int, int]]
    skew_cycles: int

    @property
    def tiles(self) -> int:
        """Array tiles ``T_m x T_n x T_k``."""
        return self.t_m * self.t_n * self.t_k

    @property
    def compute_cycles(self) -> int:
        """Cycles of every array tile back to back: ``T_n T_k (M + T_m (R + C - 2))``."""
        return self.t_n * self.t_k * (self.gemm.m + self.t_m * self.skew_cycles)

    @property
    def streaming_cycles(self) -> int:
        """Cycles activation rows stream (the useful part of the compute), ``T_n T_k M``."""
        return self.t_n * self.t_k * self.gemm.m

    def dram_read_bytes(self) -> tuple[int, int]:
        """Activation and weight bytes read from DRAM, B."""
        acts = (self.t_m - 1) * self.act_bytes[0] + self.act_bytes[1]
        wb = self.weight_bytes
        per_m = (
            (self.t_k - 1) * ((self.t_n - 1) * wb[0][0] + wb[0][1])
            + (self.t_n - 1) * wb[1][0]
            + wb[1][1]
        )
        return acts, self.t_m * per_m

    def dram_write_bytes(self) -> int:
        """Output bytes written to DRAM, B."""
        ob = self.out_bytes
        full_m = (self.t_n - 1) * ob[0][0] + ob[0][1]
        last_m = (self.t_n - 1) * ob[1][0] + ob[1][1]
        return (self.t_m - 1) * full_m + last_m


def plan_gemm(arch: SystolicArchConfig, gemm: Gemm) -> GemmPlan:
    """Tile a GEMM for an architecture (module docstring).

    Args:
        arch: the architecture.
        gemm: the GEMM.

    Returns:
        The :class:`GemmPlan`.

    Raises:
        ConfigError: the activation SRAM cannot hold two rows of K activations.
    """
    R, C = arch.array.rows, arch.array.cols
    op = arch.operands
    act_bits_cap = int(arch.sram.act_kib * 8192)
    out_bits_cap = int(arch.sram.out_kib * 8192)
    w_bits_cap = int(arch.sram.weight_kib * 8192)
    m_act = act_bits_cap // (2 * gemm.k * op.act_bits)
    if m_act < 1:
        need_kib = 2 * gemm.k * op.act_bits / 8192
        raise ConfigError(
            [
                Problem(
                    arch.name,
                    "sram.act_kib",
                    arch.sram.act_kib,
                    f"{gemm.name} (K={gemm.k}) needs two rows of {gemm.k} activations at "
                    f"{op.act_bits} bits in the activation SRAM: at least {need_kib:g} KiB",
                )
            ]
        )
    m_out = out_bits_cap // (2 * C * op.out_bits)
    m_t = min(gemm.m, m_act, m_out)
    t_m, t_n, t_k = -(-gemm.m // m_t), -(-gemm.n // C), -(-gemm.k // R)
    m_last = gemm.m - (t_m - 1) * m_t
    n_last = gemm.n - (t_n - 1) * C
    k_last = gemm.k - (t_k - 1) * R
    wb = op.weight_bits
    ob = op.out_bits
    return GemmPlan(
        gemm=gemm,
        rows=R,
        cols=C,
        m_tile=m_t,
        t_m=t_m,
        t_n=t_n,
        t_k=t_k,
        m_last=m_last,
        n_last=n_last,
        k_last=k_last,
        weight_slots=max(2, w_bits_cap // (R * C * wb)),
        act_bytes=(_bytes(m_t * gemm.k, op.act_bits), _bytes(m_last * gemm.k, op.act_bits)),
        weight_bytes=(
            (_bytes(R * C, wb), _bytes(R * n_last, wb)),
            (_bytes(k_last * C, wb), _bytes(k_last * n_last, wb)),
        ),
        out_bytes=(
            (_bytes(m_t * C, ob), _bytes(m_t * n_last, ob)),
            (_bytes(m_last * C, ob), _bytes(m_last * n_last, ob)),
        ),
        skew_cycles=R + C - 2,
    )


def transfer_cycles_of(arch: SystolicArchConfig, nbytes: object) -> np.ndarray:
    """Cycles the DMA engine is busy moving each transfer (coaccel's off-chip model).

    Args:
        arch: the architecture (its DRAM and clock).
        nbytes: transfer sizes, B (any shape).

    Returns:
        int64 array of the same shape (:func:`coaccel.sim.common.offchip.transfer_cycles`).
    """
    return offchip.transfer_cycles(arch.dram, arch.freq_mhz, np.asarray(nbytes, dtype=np.int64))


def latency_cycles_of(arch: SystolicArchConfig) -> int:
    """The DRAM's first-access latency in cycles of the array's clock."""
    return offchip.latency_cycles(arch.dram, arch.freq_mhz)


def buffer_accesses(arch: SystolicArchConfig, plan: GemmPlan) -> dict[str, BufferAccess]:
    """SRAM accesses of one run of a planned GEMM (module docstring).

    Args:
        arch: the architecture.
        plan: the GEMM's plan.

    Returns:
        ``{"ACT", "WGT", "OUT"}`` -> :class:`~coaccel.sim.common.result.BufferAccess`; an access
        is one row of the array's edge (R activations, C weights, C partial sums).
    """
    g, op = plan.gemm, arch.operands
    R, C = plan.rows, plan.cols
    act_word, wgt_word, out_word = R * op.act_bits, C * op.weight_bits, C * op.out_bits
    act_w_bytes, w_bytes = plan.dram_read_bytes()
    out_rows = plan.t_n * plan.t_k * g.m  # rows streamed, one partial-sum row each
    act = BufferAccess(
        reads=out_rows,
        writes=-(-act_w_bytes * 8 // act_word),
        read_bytes=_bytes(plan.t_n * g.m * g.k, op.act_bits),
        write_bytes=act_w_bytes,
        word_bits=act_word,
    )
    wgt = BufferAccess(
        reads=plan.t_m * plan.t_n * g.k,
        writes=plan.t_m * plan.t_n * g.k,
        read_bytes=w_bytes,
        write_bytes=w_bytes,
        word_bits=wgt_word,
    )
    # Every streamed row writes a row of partial sums; all but the first reduction tile read
    # the row first (accumulate), and each finished row is read once more for the DRAM write.
    # Reads: (T_k - 1) T_n M accumulations + T_n M final rows = T_k T_n M, as many as writes.
    out = BufferAccess(
        reads=out_rows,
        writes=out_rows,
        read_bytes=_bytes(plan.t_k * g.m * g.n, op.out_bits),
        write_bytes=_bytes(plan.t_k * g.m * g.n, op.out_bits),
        word_bits=out_word,
    )
    return {"ACT": act, "WGT": wgt, "OUT": out}


@dataclass(frozen=True)
class DmaCycles:
    """The DMA engine's occupancy of each transfer size of a plan, and the DRAM latency.

    Attributes:
        act: a full and the last activation slab, cycles.
        weight: a weight tile, indexed like :attr:`GemmPlan.weight_bytes`, cycles.
        out: an output tile, indexed like :attr:`GemmPlan.out_bytes`, cycles.
        latency: first-access latency added to every transfer's completion, cycles.
    """

    act: tuple[int, int]
    weight: tuple[tuple[int, int], tuple[int, int]]
    out: tuple[tuple[int, int], tuple[int, int]]
    latency: int

    def total(self, plan: GemmPlan) -> int:
        """Cycles the DMA engine is busy over the whole GEMM (every transfer once), cycles."""
        a, w, o = self.act, self.weight, self.out
        t_m, t_n, t_k = plan.t_m, plan.t_n, plan.t_k
        acts = (t_m - 1) * a[0] + a[1]
        weights = t_m * (
            (t_k - 1) * (t_n - 1) * w[0][0] + (t_k - 1) * w[0][1] + (t_n - 1) * w[1][0] + w[1][1]
        )
        outs = (t_m - 1) * ((t_n - 1) * o[0][0] + o[0][1]) + (t_n - 1) * o[1][0] + o[1][1]
        return acts + weights + outs

    def first_weight(self, plan: GemmPlan) -> int:
        """Occupancy of the first weight tile (a last tile too when T_k or T_n is 1)."""
        return self.weight[int(plan.t_k == 1)][int(plan.t_n == 1)]

    def first_act(self, plan: GemmPlan) -> int:
        """Occupancy of the first activation slab (the last one too when T_m is 1)."""
        return self.act[int(plan.t_m == 1)]


def dma_cycles(arch: SystolicArchConfig, plan: GemmPlan) -> DmaCycles:
    """The DMA occupancy of every transfer size of a plan (:func:`transfer_cycles_of`).

    Args:
        arch: the architecture.
        plan: the GEMM's plan.

    Returns:
        The :class:`DmaCycles`.
    """
    sizes = [
        *plan.act_bytes,
        *plan.weight_bytes[0],
        *plan.weight_bytes[1],
        *plan.out_bytes[0],
        *plan.out_bytes[1],
    ]
    c = [int(x) for x in transfer_cycles_of(arch, sizes)]
    return DmaCycles(
        act=(c[0], c[1]),
        weight=((c[2], c[3]), (c[4], c[5])),
        out=((c[6], c[7]), (c[8], c[9])),
        latency=latency_cycles_of(arch),
    )
