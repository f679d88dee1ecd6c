"""The PE model's features: the size of each PE component as a function of the format's widths.

The processing element of a block-quantized accelerator ([R-BQ], [R-PE], [R-ACC]) is
decomposed into components whose logic is counted in NAND2 gate equivalents (GE) as a function
of the format's widths:

============== ============================================================== ==========
component       what is counted                                                amortized
============== ============================================================== ==========
``mult``        significand multiplier array, ``sw x sa`` bits                 per MAC
``align``       exponent add, alignment shifter over the product, sign        per MAC
``tree``        adder-tree input of the product word (``pw + 1`` FA bits)      per MAC
``reg``         operand registers (share of the systolic registers)            per MAC
``deep``        cell upsizing of reductions deeper than 2^5 inputs             per MAC
``fx2fp``       fixed-to-float conversion of the block sum (abs, LZC, shift)   per block
``scale``       scale exponent add and scale-significand multiply              per block
``block``       per-block control and registers (a constant)                   per block
``accum``       FP accumulator adder                                           per block
``l2``          L2 (micro-block) scale multiply and L2-tree input              per μB
``fp_depth``    energy growing with the depth of the cross-block reduction     per MAC
``bq_family``   energy offset of the baseline BQ PE vs the HBQ PE flow          per MAC
``datapath``    (energy only) the fitted area of mult + align + tree + deep     per MAC
============== ============================================================== ==========

The GE counts use the textbook cell weights of ``arch_configs/cost/pe_gates.yaml``; the model
turns them into area and energy with one coefficient per component, fitted by :mod:`._pe_fit`
and applied by :mod:`._pe_model`.

Derived widths ([R-ACC] ``FP_mul_vector``): significand ``s = m + (e > 0)``, maximum shift
``2^e - 2``, product word ``pw = sw + sa + shw + sha + 1`` (10 for E2M1 x E2M2, as the RTL's
PRODUCT_WIDTH).

Public: :func:`pe_features` (the feature vector of a design point), :data:`AREA_FEATURES`,
:data:`ENERGY_FEATURES`, :data:`PART_FEATURES` (published breakdown parts); also
:data:`BREAKDOWN` (report components, not re-exported by :mod:`coaccel.cost`).

Internal: :class:`_Gates` (cell weights and the GE of multipliers, shifters, converters and
FP adders) and :func:`_gates` (the shipped weights); :func:`_l2_op` (an L2 scale multiply);
:func:`_with_datapath` (adds the energy model's ``datapath`` feature); :func:`_clog2`;
:data:`_DATAPATH`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..spine.config import FrozenMap
from ..spine.errors import CoaccelError
from ._pe_formats import _ACC_FORMATS, L2_SCHEMES, PeFormat, element_spec, scale_spec
from ._tables import ComponentTable, shipped_table

__all__ = ["AREA_FEATURES", "ENERGY_FEATURES", "PART_FEATURES", "pe_features"]

AREA_FEATURES = (
    "mult",
    "align",
    "tree",
    "reg",
    "deep",
    "fx2fp",
    "scale",
    "block",
    "accum",
    "l2",
)
"""Area components, in the order of the fitted coefficient vector."""

ENERGY_FEATURES = (
    "mult",
    "datapath",
    "reg",
    "fx2fp",
    "scale",
    "accum",
    "l2",
    "fp_depth",
    "bq_family",
)
"""Energy components. ``datapath`` is the fitted *area* (µm²/MAC) of the per-MAC datapath
(``mult + align + tree + deep``): with only the activation mantissa varying in the energy data,
the alignment shifter and the tree cannot be told apart from the multiplier, so they share an
energy density per µm² and the multiplier array gets its own (glitch-heavy) term on top.
``block`` is left out because, for a fixed accumulator, it is the same ``1/B`` column as
``accum``; ``fp_depth`` and ``bq_family`` are energy-only terms (see the module docstring)."""

_DATAPATH = ("mult", "align", "tree", "deep")

PART_FEATURES: Mapping[str, tuple[str, ...]] = FrozenMap(
    {
        "mul": ("mult", "align"),
        "tree": ("tree",),
        "mul_tree": ("mult", "align", "tree", "deep"),
        "dequant": ("fx2fp", "scale", "block"),
        "accumulate": ("accum",),
        "l2": ("l2",),
    }
)
"""Published breakdown parts and the model components they consist of."""

BREAKDOWN = FrozenMap(
    {
        "multiplier": ("mult", "align"),
        "adder_tree": ("tree",),
        "timing_upsizing": ("deep",),
        "mac_datapath": ("datapath",),
        "operand_registers": ("reg",),
        "dequant": ("fx2fp", "scale", "block"),
        "accumulate": ("accum",),
        "l2_scaling": ("l2",),
        "fp_reduction_depth": ("fp_depth",),
        "pe_family_offset": ("bq_family",),
    }
)
"""Report components (what a stacked bar shows) and the model components they sum."""


# ---------------------------------------------------------------------------------------------
# Gate-equivalent counts


@dataclass(frozen=True)
class _Gates:
    fa: float
    ha: float
    and2: float
    xor2: float
    mux2: float
    dff: float
    lzc_per_bit: float
    register_share: float
    out_sig_bits: int
    deep_levels: int

    @classmethod
    def from_table(cls, t: ComponentTable) -> _Gates:
        return cls(
            fa=t.value("fa_ge"),
            ha=t.value("ha_ge"),
            and2=t.value("and2_ge"),
            xor2=t.value("xor2_ge"),
            mux2=t.value("mux2_ge"),
            dff=t.value("dff_ge"),
            lzc_per_bit=t.value("lzc_ge_per_bit"),
            register_share=t.value("register_share"),
            out_sig_bits=int(t.value("dequant_out_sig_bits")),
            deep_levels=int(t.value("deep_tree_log2_depth")),
        )

    def mul(self, a: float, b: float) -> float:
        """Unsigned a x b array multiplier: a*b AND2, (r-1)(c-1) FA and (r-1) HA."""
        if a <= 0 or b <= 0:
            return 0.0
        r, c = min(a, b), max(a, b)
        return self.and2 * a * b + self.fa * (r - 1) * (c - 1) + self.ha * (r - 1)

    def shifter(self, width: float, max_shift: int) -> float:
        """Logarithmic barrel shifter: ceil(log2(max_shift + 1)) stages of 2:1 muxes."""
        return self.mux2 * width * _clog2(max_shift + 1)

    def fx2fp(self, width: float) -> float:
        """Fixed-to-float: absolute value (XOR + increment), LZC, normalizing shifter."""
        return width * (self.xor2 + self.ha + self.lzc_per_bit + self.mux2 * math.log2(width))

    def fp_adder(self, ebits: int, mbits: int) -> float:
        """FP adder + result register: align, add, LZC, normalize, exponent logic, round."""
        w = mbits + 3  # hidden bit + guard/round
        return (
            2 * self.mux2 * w * _clog2(w)  # alignment and normalization shifters
            + self.fa * w
            + self.lzc_per_bit * w
            + 2 * self.fa * ebits  # exponent difference and adjust
            + self.ha * (mbits + 1)  # rounding increment
            + self.dff * (1 + ebits + mbits)  # accumulator register
        )


def _clog2(x: float) -> int:
    return max(0, math.ceil(math.log2(x))) if x > 1 else 0


@functools.cache
def _gates() -> _Gates:
    return _Gates.from_table(shipped_table("pe_gates.yaml"))


def _l2_op(g: _Gates, scheme: str, bits: int, width: float) -> tuple[float, int]:
    """GE of multiplying a ``width``-bit sum by an L2 factor, and the width it adds."""
    if scheme == "none":
        return 0.0, 0
    if scheme == "pot":  # 2^c: c in 0..2^bits-1
        grow = (1 << bits) - 1
        return g.mux2 * (width + grow) * bits, grow
    if scheme == "int":  # x*(c+1) = x*c + x
        return g.mul(width, bits) + g.fa * (width + bits), bits
    if scheme in ("sig1", "sig2", "sig3", "sig4"):  # x*(2^k + c) = (x << k) + x*c, k frac bits
        k = int(scheme[-1])
        return g.mul(width, bits) + g.fa * (width + k), k + 1
    if scheme == "mix":  # SIG-3 datapath + a mux that doubles x*c for SIG-2
        return g.mul(width, bits) + g.fa * (width + 3) + g.mux2 * (width + bits + 1), 4
    raise CoaccelError(f"unknown L2 scheme {scheme!r}; valid: {', '.join(L2_SCHEMES)}")


def pe_features(pe: PeFormat) -> dict[str, float]:
    """Component sizes of a PE design point, per MAC (the model's feature vector).

    Args:
        pe: the design point.

    Returns:
        ``{component: size}``: GE per MAC for the logic components (per-block and per-μB logic
        already divided by B or μB), ``fp_depth`` in reduction levels, ``bq_family`` 0 or 1.
        Keys: the union of :data:`AREA_FEATURES` and :data:`ENERGY_FEATURES`.
    """
    pe.check()
    g = _gates()
    w, a = element_spec(pe.weight), element_spec(pe.act)
    s = scale_spec(pe.scale)
    shift = w.max_shift + a.max_shift
    pw = w.sig_bits + a.sig_bits + shift + 1
    mult = g.mul(w.sig_bits, a.sig_bits)
    align = g.shifter(pw - 1, shift) + g.xor2 * pw
    if w.ebits and a.ebits:
        align += g.fa * max(w.ebits, a.ebits)
    # A multi-operand (carry-save) reduction costs about one full adder per input bit whatever
    # the number of operands: the published mul+tree area is flat over B = 4..32 ([R-BQ], Fig 3).
    tree = g.fa * (pw + 1)
    reg = g.register_share * g.dff * (w.bits + a.bits)
    depth_levels = _clog2(pe.block)
    deep = (mult + align + tree) if depth_levels > g.deep_levels else 0.0
    if pe.ub is not None:
        t_ub = pw + _clog2(pe.ub)
        ga, grow_a = _l2_op(g, pe.l2_act, pe.l2_act_bits, t_ub)
        gw, grow_w = _l2_op(g, pe.l2_weight, pe.l2_weight_bits, t_ub + grow_a)
        fx_width = t_ub + grow_a + grow_w + _clog2(pe.block // pe.ub)
        l2 = (ga + gw + g.fa * fx_width) / pe.ub
    else:
        fx_width = pw + _clog2(pe.block)
        l2 = 0.0
    fx2fp = g.fx2fp(fx_width) / pe.block
    scale = g.fa * (s.ebits + 1)
    if s.mbits:
        scale += g.mul(s.mbits + 1, s.mbits + 1) + g.mul(g.out_sig_bits, 2 * s.mbits + 2)
    ae, am = _ACC_FORMATS[pe.accum]
    n_blocks = pe.pe_macs / pe.block
    return {
        "mult": mult,
        "align": align,
        "tree": tree,
        "reg": reg,
        "deep": deep,
        "fx2fp": fx2fp,
        "scale": scale / pe.block,
        "block": 1.0 / pe.block,
        "accum": g.fp_adder(ae, am) / pe.block,
        "l2": l2,
        "fp_depth": math.log2(n_blocks) if n_blocks > 1 else 0.0,
        "bq_family": 1.0 if pe.ub is None else 0.0,
    }


def _with_datapath(
    f: Mapping[str, float], area_coef: Mapping[str, float] | None
) -> dict[str, float]:
    out = dict(f)
    if area_coef is not None:
        out["datapath"] = sum(f[k] * area_coef[k] for k in _DATAPATH)
    return out
