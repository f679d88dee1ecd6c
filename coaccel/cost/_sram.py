"""On-chip SRAM area and access energy at 28 nm, by depth and width (``sram_28nm.yaml``).

A CACTI-like model with two calibrated regimes (``docs/cost_model.md`` "SRAM"):

* **Area.** The HBQ accelerator's register-file macros ([R-ACC] params.vh and area report:
  256 x 136 b PSUM banks, 128 x 160 b ACT banks, a 128 x 24 b scale RF) all come out at
  0.857 µm²/bit, with no visible size dependence between 3 and 35 kbit. Up to the largest
  calibrated macro the area is that per-bit figure; beyond it, the periphery is amortized
  CACTI-style, the per-bit area falling as ``1/sqrt(bits)`` towards the large-macro limit
  ``a_cell`` (stated assumption).
* **Energy.** ``width x (e_bit + e_row x min(depth, 256))`` fJ per access (bit-line energy grows
  with the rows of a sub-array; deeper memories are banked). ``e_bit`` and ``e_row`` are solved from
  the two SRAM energies of the HBQ system model ([R-PM] ``src/perf_model.py``): an ACT-buffer read
  (664 b at depth 128) and a PSUM read-modify-write (544 b at depth 256). Writes are taken to cost
  the same as reads.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..spine.errors import CoaccelError
from ._tables import shipped_table
from ._tech import node_factors

__all__ = ["SramCost", "SramModel", "sram_cost", "sram_model"]

# Geometry of the calibration figures ([R-ACC] params.vh tiling parameters).
_ACT_MACROS = ((128, 160),) * 4 + ((128, 24),)  # (depth, width) per macro
_ACT_READ_BITS = 4 * 160 + 24
_PSUM_DEPTH, _PSUM_WIDTH = 256, 136
_PSUM_RMW_BITS = 2 * 2 * _PSUM_WIDTH  # two words of 16 psums, read and written, per cycle


@dataclass(frozen=True)
class SramModel:
    """Calibrated SRAM model constants (28 nm).

    Attributes:
        a_small_um2_per_bit: per-bit area of the calibrated register-file macros.
        max_calibrated_bits: largest calibration macro; beyond it the periphery amortizes.
        a_cell_um2_per_bit: large-macro per-bit area limit.
        e_bit_fj: access energy per bit, independent of depth.
        e_row_fj: access energy per bit and sub-array row.
        max_subarray_rows: rows of a sub-array (bit-line length cap).
        area_fit_errors: relative error of the area fit on each calibration figure.
    """

    a_small_um2_per_bit: float
    max_calibrated_bits: int
    a_cell_um2_per_bit: float
    e_bit_fj: float
    e_row_fj: float
    max_subarray_rows: int
    area_fit_errors: tuple[float, float]

    def area_per_bit_um2(self, bits: int) -> float:
        """Per-bit area of one macro of ``bits`` bits, µm²."""
        if bits <= self.max_calibrated_bits:
            return self.a_small_um2_per_bit
        excess = self.a_small_um2_per_bit - self.a_cell_um2_per_bit
        return self.a_cell_um2_per_bit + excess * math.sqrt(self.max_calibrated_bits / bits)

    def access_energy_fj(self, depth_words: int, width_bits: int) -> float:
        """Energy of one read (or write) of a ``width_bits`` word, fJ."""
        rows = min(depth_words, self.max_subarray_rows)
        return width_bits * (self.e_bit_fj + self.e_row_fj * rows)


@functools.cache
def sram_model() -> SramModel:
    """The SRAM model calibrated on ``sram_28nm.yaml`` (computed once)."""
    t = shipped_table("sram_28nm.yaml")
    psum_bits = int(t.value("psum_bank_bits"))
    if psum_bits != _PSUM_DEPTH * _PSUM_WIDTH:
        raise CoaccelError("sram_28nm.yaml: psum_bank_bits disagrees with 256 x 136")
    act_bits = sum(d * w for d, w in _ACT_MACROS)
    per_bit = (t.value("psum_bank_area_um2") / psum_bits, t.value("act_buffer_area_um2") / act_bits)
    # Least squares on relative error of a single per-bit constant = harmonic-style mean.
    a_small = 2.0 / (1.0 / per_bit[0] + 1.0 / per_bit[1])
    errors = (a_small / per_bit[0] - 1.0, a_small / per_bit[1] - 1.0)
    # Two equations, two unknowns (depths 128 and 256 are both below the sub-array cap).
    e_act = t.value("act_read_pj_per_cycle") * 1e3 / _ACT_READ_BITS
    e_psum = t.value("psum_rmw_pj_per_cycle") * 1e3 / _PSUM_RMW_BITS
    e_row = (e_psum - e_act) / (_PSUM_DEPTH - 128)
    e_bit = e_act - 128 * e_row
    return SramModel(
        a_small_um2_per_bit=a_small,
        max_calibrated_bits=max(psum_bits, *(d * w for d, w in _ACT_MACROS)),
        a_cell_um2_per_bit=t.value("a_cell_um2_per_bit"),
        e_bit_fj=e_bit,
        e_row_fj=e_row,
        max_subarray_rows=int(t.value("max_subarray_rows")),
        area_fit_errors=errors,
    )


@dataclass(frozen=True)
class SramCost:
    """Area and access energy of a memory of ``banks`` macros of ``depth x width``.

    Attributes:
        depth_words: words per bank.
        width_bits: bits per word.
        banks: macros.
        area_um2: total area, µm².
        area_sigma_um2: its one-sigma uncertainty, µm².
        access_energy_pj: energy of one word access (read or write) of one bank, pJ.
        access_energy_sigma_pj: its one-sigma uncertainty, pJ.
        node_nm: technology node.
        in_calibrated_range: whether every macro is within the calibrated size range.
    """

    depth_words: int
    width_bits: int
    banks: int
    area_um2: float
    area_sigma_um2: float
    access_energy_pj: float
    access_energy_sigma_pj: float
    node_nm: float
    in_calibrated_range: bool


def sram_cost(
    depth_words: int, width_bits: int, *, banks: int = 1, node_nm: float = 28
) -> SramCost:
    """Area and access energy of an SRAM of ``banks`` macros of ``depth_words x width_bits``.

    Args:
        depth_words: words per macro (>= 1).
        width_bits: bits per word (>= 1).
        banks: number of identical macros.
        node_nm: technology node (28, 16, 7, 5).

    Returns:
        The cost with one-sigma uncertainties: 5 % (area) / 20 % (energy) inside the calibrated
        range, 30 % / 35 % beyond it, plus the node's scaling band.

    Raises:
        CoaccelError: non-positive sizes or an unknown node.
    """
    if depth_words < 1 or width_bits < 1 or banks < 1:
        raise CoaccelError(
            f"SRAM sizes must be >= 1 (depth {depth_words}, width {width_bits}, banks {banks})"
        )
    if type(depth_words) is int and type(width_bits) is int and type(banks) is int:
        return _sram_cost(depth_words, width_bits, banks, node_nm)  # a sweep's few geometries
    return _sram_cost.__wrapped__(depth_words, width_bits, banks, node_nm)


@functools.lru_cache(maxsize=4096)
def _sram_cost(depth_words: int, width_bits: int, banks: int, node_nm: float) -> SramCost:
    m = sram_model()
    nf = node_factors(node_nm)
    bits = depth_words * width_bits
    inside = bits <= m.max_calibrated_bits and depth_words <= m.max_subarray_rows
    area = banks * bits * m.area_per_bit_um2(bits) * nf.sram_area
    energy = m.access_energy_fj(depth_words, width_bits) * 1e-3 * nf.sram_energy
    a_rel = math.hypot(0.05 if inside else 0.3, nf.sram_area_uncertainty)
    e_rel = math.hypot(0.2 if inside else 0.35, nf.sram_energy_uncertainty)
    return SramCost(
        depth_words=depth_words,
        width_bits=width_bits,
        banks=banks,
        area_um2=area,
        area_sigma_um2=area * a_rel,
        access_energy_pj=energy,
        access_energy_sigma_pj=energy * e_rel,
        node_nm=float(node_nm),
        in_calibrated_range=inside,
    )
