"""PE design points: element, scale and accumulator formats as the PE datapath sees them.

Public: :class:`PeFormat` (a design point, also the ``pe:`` schema of calibration points),
:func:`element_spec` / :class:`ElementSpec` (widths of ``eXmY`` / ``intN`` elements),
:func:`scale_spec` / :class:`ScaleSpec` (widths of a block scale), :data:`L2_SCHEMES`.

Internal: :data:`_ACC_FORMATS` (exponent and mantissa bits of the accumulators);
:data:`_ALIASES` and :data:`_SCALE_ALIASES` (format names such as ``fp4``, ``pot``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..spine.config import Problem, param
from ..spine.errors import CoaccelError

__all__ = ["L2_SCHEMES", "ElementSpec", "PeFormat", "ScaleSpec", "element_spec", "scale_spec"]

L2_SCHEMES = ("none", "pot", "int", "sig1", "sig2", "sig3", "sig4", "mix")
"""L2 (micro-block) scale schemes ([R-Q] ``HBQQuantizer.L2_SCHEME``): multiplier ``2^c``, ``c+1``,
``1 + c/2^k`` (SIG-k), and ``mix`` = SIG-2 or SIG-3 chosen per L1 block (weights only)."""

_ACC_FORMATS = {"fp16": (5, 10), "fp32": (8, 23)}


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
