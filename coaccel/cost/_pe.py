"""PE area and energy per MAC as a model of the number format (28 nm, scalable to other nodes).

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

The GE counts use the textbook cell weights of ``arch_configs/cost/pe_gates.yaml``; one
coefficient per component (µm² per GE for area, fJ per GE per MAC for energy) is then fitted by
non-negative least squares on relative errors to the published 28 nm figures of
``arch_configs/cost/pe_calibration_28nm.yaml`` ([R-BQ] rows and breakdown, [R-ACC] PE
breakdown, [R-PM] PE energies). The model therefore *predicts* formats it was not fitted on
(other activation widths, block sizes, element and scale formats, L2 schemes), with an
uncertainty made of the calibration residual (leave-one-out), the parameter spread (jackknife)
and stated model-form terms for points outside the calibrated domain. See
``docs/cost_model.md``.

Derived widths ([R-ACC] ``FP_mul_vector``): significand ``s = m + (e > 0)``, maximum shift
``2^e - 2``, product word ``pw = sw + sa + shw + sha + 1`` (10 for E2M1 x E2M2, as the RTL's
PRODUCT_WIDTH).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from ..spine.config import FrozenMap, Problem, param
from ..spine.errors import CoaccelError
from ._tables import ComponentTable, shipped_table
from ._tech import NODES_NM, node_factors

__all__ = [
    "AREA_FEATURES",
    "ENERGY_FEATURES",
    "L2_SCHEMES",
    "PART_FEATURES",
    "CalibrationPoint",
    "CalibrationSet",
    "ElementSpec",
    "LooResult",
    "PeCost",
    "PeFormat",
    "PeModel",
    "ScaleSpec",
    "element_spec",
    "fit_pe_model",
    "nnls",
    "pe_cost",
    "pe_features",
    "pe_model",
    "scale_spec",
]

L2_SCHEMES = ("none", "pot", "int", "sig1", "sig2", "sig3", "sig4", "mix")
"""L2 (micro-block) scale schemes ([R-Q] ``HBQQuantizer.L2_SCHEME``): multiplier ``2^c``, ``c+1``,
``1 + c/2^k`` (SIG-k), and ``mix`` = SIG-2 or SIG-3 chosen per L1 block (weights only)."""

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
# Formats


@dataclass(frozen=True)
class ElementSpec:
    """Widths of an element format as the PE datapath sees them.

    Attributes:
        name: e.g. ``"e2m1"``, ``"int8"``, ``"fp16"``.
        ebits: exponent bits (0 for integers).
        mbits: mantissa bits (magnitude bits for integers: ``bits - 1``).
        bits: storage bits including the sign.
    """

    name: str
    ebits: int
    mbits: int
    bits: int

    @property
    def sig_bits(self) -> int:
        """Significand width of the integer view (hidden bit included for ``ebits > 0``)."""
        return self.mbits + (1 if self.ebits > 0 else 0)

    @property
    def max_shift(self) -> int:
        """Largest left shift of the significand in the product, ``2^e - 2`` (0 for e <= 1)."""
        return (1 << self.ebits) - 2 if self.ebits > 0 else 0


_ALIASES = {
    "fp4": "e2m1",
    "fp5": "e2m2",
    "fp6": "e2m3",
    "fp8": "e4m3",
    "fp16": "e5m10",
    "bf16": "e8m7",
    "fp32": "e8m23",
}


def element_spec(name: str) -> ElementSpec:
    """Parse an element format name.

    Args:
        name: ``"eXmY"`` (sign + X exponent + Y mantissa bits, X in 1..8, Y in 0..23),
            ``"intN"`` (N in 2..16, two's complement) or an alias (``fp4``, ``fp16``, ``bf16``...).

    Returns:
        The widths.

    Raises:
        CoaccelError: an unparsable name.
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    m = re.fullmatch(r"e(\d+)m(\d+)", key)
    if m:
        e, mm = int(m.group(1)), int(m.group(2))
        if 1 <= e <= 8 and 0 <= mm <= 23:
            return ElementSpec(str(name).lower(), e, mm, 1 + e + mm)
    m = re.fullmatch(r"int(\d+)", key)
    if m and 2 <= int(m.group(1)) <= 16:
        n = int(m.group(1))
        return ElementSpec(key, 0, n - 1, n)
    raise CoaccelError(
        f"unknown element format {name!r}; use eXmY (X in 1..8, Y in 0..23, e.g. e2m1, e2m3, "
        "e4m3), intN (N in 2..16) or fp4, fp5, fp6, fp8, fp16, bf16, fp32"
    )


@dataclass(frozen=True)
class ScaleSpec:
    """Widths of a block scale format.

    Attributes:
        name: as given.
        ebits: exponent bits.
        mbits: significand fraction bits (0 for a power-of-two scale).
    """

    name: str
    ebits: int
    mbits: int


_SCALE_ALIASES = {
    "pot": (5, 0),
    "e8m0": (8, 0),
    "ue8m0": (8, 0),
    "ue4m3": (4, 3),
    "ue5m3": (5, 3),
    "fp8": (5, 3),
}


def scale_spec(name: str) -> ScaleSpec:
    """Parse a scale format name.

    Args:
        name: ``"pot"`` (power of two, 5-bit exponent as the HBQ repo's MX variant, [R-Q]
            ``MXFPQuantizer``), ``"e8m0"`` (OCP MX), ``"e5m3"`` (HBQ L1 / repo NVFP4, also ``fp8``),
            ``"e4m3"``/``"ue4m3"`` (NVFP4), or any ``"eXmY"``.

    Returns:
        The widths.

    Raises:
        CoaccelError: an unparsable name.
    """
    key = str(name).strip().lower()
    if key in _SCALE_ALIASES:
        e, m = _SCALE_ALIASES[key]
        return ScaleSpec(key, e, m)
    mm = re.fullmatch(r"u?e(\d+)m(\d+)", key)
    if mm and 1 <= int(mm.group(1)) <= 8 and 0 <= int(mm.group(2)) <= 10:
        return ScaleSpec(key, int(mm.group(1)), int(mm.group(2)))
    raise CoaccelError(f"unknown scale format {name!r}; use pot, e8m0, e5m3, e4m3 (ue4m3) or eXmY")


@dataclass(frozen=True)
class PeFormat:
    """A PE design point: element formats, block, scale, L2 scheme and accumulator.

    Also a config schema (the ``pe:`` mapping of calibration points and arch files).

    Attributes:
        weight: weight element format (``"e2m1"``, ``"int4"``...).
        act: activation element format.
        block: L1 block size B (elements sharing one scale), >= 1.
        scale: L1 scale format of both operands (``"pot"``, ``"e5m3"``...).
        ub: micro-block size of the L2 scales (None: no L2, an L1-only BQ PE).
        l2_act: activation L2 scheme (one of :data:`L2_SCHEMES`; ``"mix"`` is weights-only).
        l2_act_bits: bits of an activation L2 code.
        l2_weight: weight L2 scheme.
        l2_weight_bits: bits of a weight L2 code (the Mix selector bit is extra).
        accum: accumulator format (``"fp16"`` as calibrated, or ``"fp32"``).
        pe_macs: MACs per PE (the cross-block reduction spans ``pe_macs / block`` blocks).
    """

    weight: str = param(doc="weight element format (eXmY, intN, fp16...)")
    act: str = param(doc="activation element format")
    block: int = param(ge=1, doc="L1 block size B")
    scale: str = param(default="e5m3", doc="L1 scale format (pot, e8m0, e5m3, e4m3...)")
    ub: int | None = param(default=None, ge=1, doc="L2 micro-block size (null: no L2)")
    l2_act: str = param(default="none", choices=L2_SCHEMES, doc="activation L2 scheme")
    l2_act_bits: int = param(default=2, ge=1, le=4, doc="activation L2 code bits")
    l2_weight: str = param(default="none", choices=L2_SCHEMES, doc="weight L2 scheme")
    l2_weight_bits: int = param(default=2, ge=1, le=4, doc="weight L2 code bits")
    accum: Literal["fp16", "fp32"] = param(default="fp16", doc="accumulator format")
    pe_macs: int = param(default=128, ge=1, doc="MACs per PE")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: parsable formats, μB divides B, L2 schemes only with a μB."""
        out: list[Problem | str] = []
        for key in ("weight", "act"):
            try:
                element_spec(getattr(self, key))
            except CoaccelError as exc:
                out.append(Problem("", key, getattr(self, key), str(exc)))
        try:
            scale_spec(self.scale)
        except CoaccelError as exc:
            out.append(Problem("", "scale", self.scale, str(exc)))
        if self.ub is None:
            for key in ("l2_act", "l2_weight"):
                if getattr(self, key) != "none":
                    out.append(Problem("", key, getattr(self, key), "an L2 scheme needs ub"))
        else:
            if self.block % self.ub:
                out.append(Problem("", "ub", self.ub, f"must divide block ({self.block})"))
            if self.l2_act == "none" and self.l2_weight == "none":
                out.append(Problem("", "ub", self.ub, "ub without an L2 scheme (l2_act/l2_weight)"))
        if self.l2_act == "mix":
            out.append(Problem("", "l2_act", "mix", "the Mix scheme is for weights only"))
        return out

    def check(self) -> PeFormat:
        """Raise :class:`CoaccelError` listing every :meth:`validate` problem; else self."""
        problems = self.validate()
        if problems:
            raise CoaccelError(
                "; ".join(
                    str(p) if isinstance(p, str) else f"{p.key}: {p.message}" for p in problems
                )
            )
        return self

    @property
    def label(self) -> str:
        """A short readable name, e.g. ``"W e2m1 x A e2m2, B128 e5m3, μB32 L2 sig1:2b/mix:2b"``."""
        s = f"W {self.weight} x A {self.act}, B{self.block} {self.scale}"
        if self.ub is not None:
            s += f", μB{self.ub} L2 {self.l2_act}:{self.l2_act_bits}b/{self.l2_weight}:"
            s += f"{self.l2_weight_bits}b"
        if self.accum != "fp16":
            s += f", {self.accum} acc"
        return s


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


_ACC_FORMATS = {"fp16": (5, 10), "fp32": (8, 23)}


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


# ---------------------------------------------------------------------------------------------
# Calibration data


@dataclass(frozen=True)
class CalibrationPoint:
    """One published figure the model is fitted to.

    Attributes:
        label: a readable name.
        quantity: ``"area"`` (µm²/MAC) or ``"energy"`` (fJ/MAC).
        value: the published value.
        unit: ``"um2/MAC"`` or ``"fJ/MAC"``.
        source: where it comes from.
        uncertainty: relative one-sigma uncertainty of the published value.
        weight: fit weight (breakdown parts count less than whole PEs).
        group: the sweep it belongs to (leave-one-group-out).
        parts: the breakdown parts it covers (keys of :data:`PART_FEATURES`); empty = whole PE.
        pe: the design point it was measured on.
        published: True for a published figure, False for one derived from our own
            synthesis (``coaccel cost calibrate``).
        loo_informative: False when the point alone determines a coefficient (leaving it out
            leaves that coefficient free), or is not published, so its leave-one-out error is
            reported but not used as the fit uncertainty.
    """

    label: str
    quantity: Literal["area", "energy"]
    value: float = param(gt=0, unit="")
    unit: str = param()
    source: str = param()
    uncertainty: float = param(ge=0, unit="")
    pe: PeFormat = param()
    weight: float = param(default=1.0, gt=0, unit="")
    group: str = param(default="")
    parts: tuple[str, ...] = param(default=(), choices=tuple(PART_FEATURES))
    published: bool = param(
        default=True, doc="a published figure (false: derived from our own synthesis)"
    )
    loo_informative: bool = param(
        default=True,
        doc="false when the point alone determines a coefficient, so that leaving it out "
        "says nothing about the model (its uncertainty is a stated domain term instead)",
    )

    def validate(self) -> list[Problem | str]:
        """Units must match the quantity."""
        want = {"area": "um2/MAC", "energy": "fJ/MAC"}[self.quantity]
        if self.unit != want:
            return [Problem("", "unit", self.unit, f"an {self.quantity} point must be in {want}")]
        return []

    @property
    def whole_pe(self) -> bool:
        """True for a whole-PE figure (not a breakdown part)."""
        return not self.parts


@dataclass(frozen=True)
class CalibrationSet:
    """The calibration file (``arch_configs/cost/pe_calibration_28nm.yaml``).

    Attributes:
        description: what it is.
        points: the calibration points.
        sources: shared source strings (YAML anchors), by name.
    """

    VERSION: ClassVar[int] = 1

    description: str
    points: tuple[CalibrationPoint, ...]
    sources: Mapping[str, str] = param(default=FrozenMap())


@functools.cache
def _shipped_calibration() -> CalibrationSet:
    """The published calibration points, plus our Yosys-derived ones when that file is shipped
    (``pe_calibration_synth.yaml``, written by ``coaccel cost calibrate``)."""
    from ..arch_configs import path
    from ..spine.config import load_config

    cal = load_config(path("cost/pe_calibration_28nm.yaml"), CalibrationSet)
    try:
        synth = load_config(path("cost/pe_calibration_synth.yaml"), CalibrationSet)
    except FileNotFoundError:
        return cal
    return dataclasses.replace(cal, points=cal.points + synth.points)


# ---------------------------------------------------------------------------------------------
# Fitting


def nnls(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], *, max_iter: int = 1000
) -> npt.NDArray[np.float64]:
    """Non-negative least squares, ``argmin ||a x - b||`` subject to ``x >= 0``.

    The Lawson-Hanson active-set algorithm (Lawson & Hanson, Solving Least Squares Problems,
    1974, ch. 23).

    Args:
        a: (m, n) float64 matrix.
        b: (m,) float64 vector.
        max_iter: iteration limit of the outer loop.

    Returns:
        (n,) float64 solution, every entry >= 0.

    Raises:
        CoaccelError: no convergence within ``max_iter`` outer iterations.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = a.shape[1]
    passive = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    tol = 1e-10 * max(1.0, float(np.abs(a).max(initial=0.0)) * float(np.abs(b).max(initial=0.0)))
    grad = a.T @ (b - a @ x)
    for _ in range(max_iter):
        if passive.all() or grad[~passive].max() <= tol:
            return x
        j = int(np.argmax(np.where(passive, -np.inf, grad)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            bad = passive & (z <= 0)
            alpha = float(np.min(x[bad] / (x[bad] - z[bad])))
            x = x + alpha * (z - x)
            passive &= x > tol
            if not passive.any():
                x = np.zeros(n)
                break
        grad = a.T @ (b - a @ x)
    raise CoaccelError(f"nnls did not converge in {max_iter} iterations")


def _with_datapath(
    f: Mapping[str, float], area_coef: Mapping[str, float] | None
) -> dict[str, float]:
    out = dict(f)
    if area_coef is not None:
        out["datapath"] = sum(f[k] * area_coef[k] for k in _DATAPATH)
    return out


def _design(
    points: Sequence[CalibrationPoint],
    names: tuple[str, ...],
    area_coef: Mapping[str, float] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    x = np.zeros((len(points), len(names)))
    for i, p in enumerate(points):
        f = _with_datapath(pe_features(p.pe), area_coef)
        keep = set(names)
        if p.parts:
            keep = {k for part in p.parts for k in PART_FEATURES[part]}
        x[i] = [f[k] if k in keep else 0.0 for k in names]
    y = np.array([p.value for p in points])
    w = np.array([p.weight for p in points])
    return x, y, w


def _fit(x, y, w) -> npt.NDArray[np.float64]:
    # Relative errors: every point counts by its percentage error, not its magnitude.
    return nnls(x * (w / y)[:, None], w.copy())


@dataclass(frozen=True)
class LooResult:
    """Leave-one-out prediction of one calibration point.

    Attributes:
        label: the point.
        quantity: ``"area"`` or ``"energy"``.
        group: its sweep.
        whole_pe: False for a breakdown part.
        published: the published value.
        fitted: the full model's value.
        loo: the value predicted by the model fitted without this point.
        logo: the value predicted by the model fitted without this point's whole group.
        unit: the unit.
        is_published: whether the point is a published figure.
        informative: whether its leave-one-out error counts in the fit statistics.
    """

    label: str
    quantity: str
    group: str
    whole_pe: bool
    published: float
    fitted: float
    loo: float
    logo: float
    unit: str
    is_published: bool = True
    informative: bool = True

    @property
    def fit_error(self) -> float:
        """Relative error of the full fit."""
        return self.fitted / self.published - 1.0

    @property
    def loo_error(self) -> float:
        """Relative leave-one-out prediction error."""
        return self.loo / self.published - 1.0

    @property
    def logo_error(self) -> float:
        """Relative leave-one-group-out prediction error."""
        return self.logo / self.published - 1.0


@dataclass(frozen=True)
class _QuantityFit:
    names: tuple[str, ...]
    coef: npt.NDArray[np.float64]
    jack: npt.NDArray[np.float64]  # (n_informative, n_coef) leave-one-out coefficient sets
    rms_loo: float  # RMS relative LOO error over whole-PE points
    area_coef: Mapping[str, float] | None = None  # for the energy fit's `datapath` feature

    def features(self, f: Mapping[str, float]) -> dict[str, float]:
        return _with_datapath(f, self.area_coef)

    def value(self, f: Mapping[str, float]) -> float:
        g = self.features(f)
        return float(np.array([g[k] for k in self.names]) @ self.coef)

    def jack_sigma(self, f: Mapping[str, float]) -> float:
        g = self.features(f)
        v = np.array([g[k] for k in self.names])
        preds = self.jack @ v
        n = len(preds)
        return float(math.sqrt((n - 1) / n * float(np.sum((preds - preds.mean()) ** 2))))


def _fit_quantity(
    points: Sequence[CalibrationPoint],
    names: tuple[str, ...],
    area_coef: Mapping[str, float] | None = None,
):
    x, y, w = _design(points, names, area_coef)
    coef = _fit(x, y, w)
    n = len(points)
    loo_coef = np.empty((n, len(names)))
    for i in range(n):
        keep = np.arange(n) != i
        loo_coef[i] = _fit(x[keep], y[keep], w[keep])
    # The jackknife spread (parameter uncertainty) runs over the informative points only: a
    # point that alone fixes a coefficient leaves it free when dropped, and that spread is
    # stated as a domain term instead.
    informative = np.array([p.loo_informative for p in points])
    jack = loo_coef[informative] if informative.any() else loo_coef
    groups = [p.group or p.label for p in points]
    logo_coef = {}
    for gname in dict.fromkeys(groups):
        keep = np.array([gg != gname for gg in groups])
        logo_coef[gname] = _fit(x[keep], y[keep], w[keep]) if keep.any() else coef
    loo = []
    for i, p in enumerate(points):
        loo.append(
            LooResult(
                label=p.label,
                quantity=p.quantity,
                group=p.group,
                whole_pe=p.whole_pe,
                published=p.value,
                fitted=float(x[i] @ coef),
                loo=float(x[i] @ loo_coef[i]),
                logo=float(x[i] @ logo_coef[groups[i]]),
                unit=p.unit,
                is_published=p.published,
                informative=p.loo_informative,
            )
        )
    errs = [
        r.loo_error for r, p in zip(loo, points, strict=True) if r.whole_pe and p.loo_informative
    ]
    rms = float(math.sqrt(sum(e * e for e in errs) / len(errs))) if errs else 0.0
    return _QuantityFit(names, coef, jack, rms, area_coef), loo


@dataclass(frozen=True)
class PeCost:
    """Predicted area and energy per MAC of one PE design point.

    Attributes:
        pe: the design point.
        node_nm: technology node of the figures.
        area_um2_per_mac: area per MAC, µm².
        area_sigma_um2_per_mac: its one-sigma uncertainty, µm².
        energy_fj_per_mac: dynamic energy per MAC, fJ (at the calibration corner).
        energy_sigma_fj_per_mac: its one-sigma uncertainty, fJ.
        area_parts_um2_per_mac: area by report component (:data:`BREAKDOWN`), µm²/MAC.
        energy_parts_fj_per_mac: energy by report component, fJ/MAC.
        area_terms: relative one-sigma terms of the area uncertainty (``fit``, ``parameters``,
            ``domain``, ``node``).
        energy_terms: the same for energy.
        domain_notes: why the point is outside the calibrated domain, if it is.
    """

    pe: PeFormat
    node_nm: float
    area_um2_per_mac: float
    area_sigma_um2_per_mac: float
    energy_fj_per_mac: float
    energy_sigma_fj_per_mac: float
    area_parts_um2_per_mac: Mapping[str, float]
    energy_parts_fj_per_mac: Mapping[str, float]
    area_terms: Mapping[str, float]
    energy_terms: Mapping[str, float]
    domain_notes: tuple[str, ...]

    @property
    def area_uncertainty_pct(self) -> float:
        """Relative one-sigma area uncertainty, percent."""
        return 100.0 * self.area_sigma_um2_per_mac / self.area_um2_per_mac

    @property
    def energy_uncertainty_pct(self) -> float:
        """Relative one-sigma energy uncertainty, percent."""
        return 100.0 * self.energy_sigma_fj_per_mac / self.energy_fj_per_mac

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON (units in the key names)."""
        return {
            "format": dataclasses.asdict(self.pe),
            "node_nm": self.node_nm,
            "area_um2_per_mac": self.area_um2_per_mac,
            "area_um2_per_mac_sigma": self.area_sigma_um2_per_mac,
            "area_uncertainty_pct": self.area_uncertainty_pct,
            "energy_fj_per_mac": self.energy_fj_per_mac,
            "energy_fj_per_mac_sigma": self.energy_sigma_fj_per_mac,
            "energy_uncertainty_pct": self.energy_uncertainty_pct,
            "area_parts_um2_per_mac": dict(self.area_parts_um2_per_mac),
            "energy_parts_fj_per_mac": dict(self.energy_parts_fj_per_mac),
            "area_uncertainty_terms": dict(self.area_terms),
            "energy_uncertainty_terms": dict(self.energy_terms),
            "domain_notes": list(self.domain_notes),
            "uncertainty_is": "one sigma",
        }


@dataclass(frozen=True)
class PeModel:
    """The fitted PE model: coefficients, their jackknife spread, and the validation results.

    Attributes:
        calibration: the calibration points used.
        area: area fit (coefficients in µm²/GE).
        energy: energy fit (coefficients in fJ/GE; ``datapath`` in fJ per µm² of datapath,
            ``fp_depth`` in fJ per level, ``bq_family`` in fJ per MAC).
        loo: the leave-one-out / leave-one-group-out result of every calibration point.
    """

    calibration: tuple[CalibrationPoint, ...]
    area: _QuantityFit
    energy: _QuantityFit
    loo: tuple[LooResult, ...]

    def coefficients(self) -> list[dict[str, Any]]:
        """The fitted coefficients with units and jackknife one-sigma spread.

        Returns:
            One row per (quantity, component): ``quantity``, ``component``, ``value``,
            ``unit``, ``sigma`` (jackknife), ``source``.
        """
        rows = []
        units = {"area": "um2/GE", "energy": "fJ/GE"}
        for q, fit in (("area", self.area), ("energy", self.energy)):
            n = len(fit.jack)
            spread = np.sqrt((n - 1) / n * np.sum((fit.jack - fit.jack.mean(0)) ** 2, axis=0))
            for k, c, s in zip(fit.names, fit.coef, spread, strict=True):
                unit = units[q]
                if k == "block":
                    unit = "um2/block"
                elif k == "fp_depth":
                    unit = "fJ/(MAC*level)"
                elif k == "bq_family":
                    unit = "fJ/MAC"
                elif k == "datapath":
                    unit = "fJ/um2"
                rows.append(
                    {
                        "quantity": q,
                        "component": k,
                        "value": float(c),
                        "unit": unit,
                        "sigma": float(s),
                        "source": "NNLS fit to arch_configs/cost/pe_calibration_28nm.yaml "
                        "(relative errors); sigma = jackknife over the points",
                    }
                )
        return rows

    def domain(self, pe: PeFormat) -> tuple[float, float, tuple[str, ...]]:
        """Model-form uncertainty (relative, area and energy) of a design point.

        Returns:
            ``(area_rel, energy_rel, notes)``: quadrature sums of the ``domain_*`` terms of
            ``pe_gates.yaml`` that apply, and a note per term.
        """
        t = shipped_table("pe_gates.yaml")
        w, a = element_spec(pe.weight), element_spec(pe.act)
        s = scale_spec(pe.scale)
        terms: list[tuple[str, str]] = []
        if w.ebits not in (0, 2) or a.ebits not in (0, 2):
            terms.append(("domain_exponent_bits", "element exponent width other than 2"))
        if w.ebits == 0 or a.ebits == 0:
            terms.append(("domain_int_elements", "integer elements"))
        if (w.ebits, w.mbits) != (2, 1):
            terms.append(("domain_weight_format", "weights other than E2M1"))
        if a.ebits == 2 and a.mbits not in (1, 2, 5):
            terms.append(("domain_activation_mantissa", "interpolated activation mantissa"))
        if w.bits > 8 or a.bits > 8:
            terms.append(("domain_wide_elements", "elements wider than 8 bits"))
        if not 4 <= pe.block <= 128:
            terms.append(("domain_block", "block size outside 4..128"))
        if (s.ebits, s.mbits) not in ((5, 0), (5, 3)):
            terms.append(("domain_scale_format", "scale format other than PoT / E5M3"))
        if pe.ub is not None and (
            (pe.l2_act, pe.l2_act_bits) != ("sig1", 2)
            or (pe.l2_weight, pe.l2_weight_bits) != ("mix", 2)
        ):
            terms.append(("domain_l2_scheme", "L2 schemes other than SIG-1 2b x Mix 2b"))
        if pe.accum != "fp16":
            terms.append(("domain_accumulator", "accumulator other than FP16"))
        area = math.sqrt(sum(t.value(k) ** 2 for k, _ in terms))
        e_terms = list(terms)
        if pe.ub is not None:
            e_terms.append(("domain_l2_energy", "L2 energy rests on two published points"))
        energy = math.sqrt(sum(t.value(k) ** 2 for k, _ in e_terms))
        notes = tuple(dict.fromkeys(n for _, n in e_terms))
        return area, energy, notes

    def predict(self, pe: PeFormat, node_nm: float = 28) -> PeCost:
        """Area and energy per MAC of a design point, with one-sigma uncertainty.

        Args:
            pe: the design point.
            node_nm: technology node (28 = the calibration node; see :data:`NODES_NM`).

        Returns:
            The prediction.
        """
        f = pe_features(pe)
        nf = node_factors(node_nm)
        area = self.area.value(f)
        energy = self.energy.value(f)
        dom_a, dom_e, notes = self.domain(pe)
        a_terms = {
            "fit": self.area.rms_loo,
            "parameters": self.area.jack_sigma(f) / area,
            "domain": dom_a,
            "node": nf.area_uncertainty,
        }
        e_terms = {
            "fit": self.energy.rms_loo,
            "parameters": self.energy.jack_sigma(f) / energy,
            "domain": dom_e,
            "node": nf.energy_uncertainty,
        }
        a_rel = math.sqrt(sum(v * v for v in a_terms.values()))
        e_rel = math.sqrt(sum(v * v for v in e_terms.values()))
        a_parts = _parts(f, self.area)
        e_parts = _parts(f, self.energy)
        return PeCost(
            pe=pe,
            node_nm=float(node_nm),
            area_um2_per_mac=area * nf.area,
            area_sigma_um2_per_mac=area * nf.area * a_rel,
            energy_fj_per_mac=energy * nf.energy,
            energy_sigma_fj_per_mac=energy * nf.energy * e_rel,
            area_parts_um2_per_mac=FrozenMap({k: v * nf.area for k, v in a_parts.items()}),
            energy_parts_fj_per_mac=FrozenMap({k: v * nf.energy for k, v in e_parts.items()}),
            area_terms=FrozenMap(a_terms),
            energy_terms=FrozenMap(e_terms),
            domain_notes=notes,
        )


def _parts(f: Mapping[str, float], fit: _QuantityFit) -> dict[str, float]:
    f = fit.features(f)
    out = {}
    for name, comps in BREAKDOWN.items():
        v = sum(f[k] * c for k, c in zip(fit.names, fit.coef, strict=True) if k in comps)
        if any(k in fit.names for k in comps):
            out[name] = float(v)
    return out


def fit_pe_model(points: Sequence[CalibrationPoint] | None = None) -> PeModel:
    """Fit the PE model (area and energy) and validate it by leave-one-out.

    Args:
        points: calibration points (default: the shipped
            ``arch_configs/cost/pe_calibration_28nm.yaml``).

    Returns:
        The fitted model.
    """
    pts = tuple(points) if points is not None else _shipped_calibration().points
    area_pts = [p for p in pts if p.quantity == "area"]
    energy_pts = [p for p in pts if p.quantity == "energy"]
    if not area_pts or not energy_pts:
        raise CoaccelError("the PE model needs both area and energy calibration points")
    area_fit, area_loo = _fit_quantity(area_pts, AREA_FEATURES)
    area_coef = FrozenMap(dict(zip(AREA_FEATURES, map(float, area_fit.coef), strict=True)))
    energy_fit, energy_loo = _fit_quantity(energy_pts, ENERGY_FEATURES, area_coef)
    return PeModel(pts, area_fit, energy_fit, tuple(area_loo + energy_loo))


@functools.cache
def pe_model() -> PeModel:
    """The PE model fitted to the shipped calibration (computed once per process)."""
    return fit_pe_model()


def pe_cost(
    weight: str = "e2m1",
    act: str = "e2m2",
    block: int = 128,
    scale: str = "e5m3",
    *,
    ub: int | None = None,
    l2: str | None = None,
    l2_bits: int = 2,
    l2_weight: str | None = None,
    l2_weight_bits: int = 2,
    accum: str = "fp16",
    node_nm: float = 28,
    pe_macs: int = 128,
) -> PeCost:
    """Area and energy per MAC of a PE format (the Python face of ``coaccel cost pe``).

    Args:
        weight: weight element format (``"e2m1"``, ``"int4"``, ...).
        act: activation element format (``"e2m3"``, ``"fp16"``, ...).
        block: L1 block size B.
        scale: L1 scale format (``"pot"``, ``"e5m3"``, ``"e4m3"``, ...).
        ub: L2 micro-block size (None: an L1-only PE).
        l2: activation L2 scheme (default with ``ub``: ``"sig1"``, the final HBQ config).
        l2_bits: activation L2 code bits.
        l2_weight: weight L2 scheme (default with ``ub``: ``"mix"``).
        l2_weight_bits: weight L2 code bits.
        accum: ``"fp16"`` or ``"fp32"``.
        node_nm: technology node, one of :data:`NODES_NM`.
        pe_macs: MACs per PE.

    Returns:
        The prediction (``area_um2_per_mac``, ``energy_fj_per_mac`` and their one-sigma
        uncertainties, per-component parts).

    Raises:
        CoaccelError: an invalid format combination.

    Example:
        >>> c = pe_cost("e2m1", "e2m2", 128, "e5m3", ub=32)
        >>> round(c.area_um2_per_mac)  # HBQ-E PE, published 72.27 um2/MAC
        73
    """
    if ub is None and (l2 not in (None, "none") or l2_weight not in (None, "none")):
        raise CoaccelError("an L2 scheme (--l2/--l2-weight) needs a micro-block size (--ub)")
    pe = PeFormat(
        weight=weight,
        act=act,
        block=int(block),
        scale=scale,
        ub=ub,
        l2_act=(l2 or "sig1") if ub is not None else "none",
        l2_act_bits=int(l2_bits),
        l2_weight=(l2_weight or "mix") if ub is not None else "none",
        l2_weight_bits=int(l2_weight_bits),
        accum=accum,  # type: ignore[arg-type]
        pe_macs=int(pe_macs),
    )
    if pe.accum not in _ACC_FORMATS:
        raise CoaccelError(f"unknown accumulator {accum!r}; valid: {', '.join(_ACC_FORMATS)}")
    for name in (pe.l2_act, pe.l2_weight):
        if name not in L2_SCHEMES:
            raise CoaccelError(f"unknown L2 scheme {name!r}; valid: {', '.join(L2_SCHEMES)}")
    if block < 1:
        raise CoaccelError(f"block {block} must be >= 1")
    if ub is not None and (ub < 1 or block % ub):
        raise CoaccelError(f"block {block} must be a multiple of ub {ub} (ub >= 1)")
    if node_nm not in NODES_NM:
        raise CoaccelError(
            f"unknown node {node_nm} nm; valid: {', '.join(f'{n:g}' for n in NODES_NM)}"
        )
    return pe_model().predict(pe.check(), node_nm)
