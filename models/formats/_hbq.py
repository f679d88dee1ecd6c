"""HBQ (hierarchical block quantization), [HBQ]; algorithm of [R-Q] ``HBQQuantizer.q``.

Two levels of scaling along the reduction axis: an L1 block of ``block`` elements shares one
unsigned E5M3 scale ``S1``; each micro-block of ``ub`` elements carries an L2 code ``c`` that picks
a significand multiplier ``SIG[c]`` from a small table. Element ``i`` of micro-block ``j`` of L1
block ``k`` decodes to ``elem(code_i) * SIG(c_j) * S1_k``. Weights use E2M1 elements and the
"Mix" tables (SIG_2 or SIG_3, one scheme bit per L1 block); activations use E2M2 elements and
SIG-1; the KV cache uses E2M1 elements with the activation L2 settings ([R-CFG], [R-PTQ]).

The quantizer (:meth:`HBQSpec.quantize_blocks`) is [R-Q] ``HBQQuantizer.q`` with *exact* real-number
semantics ([OURS]):

* L1 scale per candidate scheme ``t``: ``amax / (Emax * max(T_t))`` rounded to E5M3 half-up
  (or up, ``scale_rounding="ceil"``) on the exact quotient, clipped to ``[2**-14, 61440]``.
* Elements: the exact real ``x / (S1 * SIG[c])`` rounded into the element format (half away
  from zero by default, ``rne`` for ablation), saturating at ±max.
* L2 code per micro-block: the minimum sum of squared errors, ties to the lowest code; Mix:
  the scheme with the smaller block error, ties to scheme 0 (SIG_2).

**Exact SSE comparison.** Every SSE is computed in float64 and compared with a relative margin
``tol = 4 * (L + 4) * 2**-53`` (``L`` = L1 block length). A squared residual has relative error
at most ``(1 + 2**-53)**3 - 1`` (the subtraction's rounding enters the square twice) and a sum of
``n`` non-negative terms adds at most ``(n - 1) * 2**-53``, so a float64 SSE is within
``(L + 3) * 2**-53`` (relative) of the real one and a difference larger than ``tol`` times the
larger value has the real sign. Inside the margin, two candidates whose dequantised
values are identical are an exact tie; otherwise the two SSEs are recomputed exactly with Python
integers (every value is a dyadic rational). Rows holding a nonzero ``|x|`` outside
``[2**-450, 2**450]`` (only possible with float64 input) are always compared exactly, because
their squares could leave float64's normal range. Every decision is therefore that of exact
real arithmetic for every finite float16, float32 and float64 input.

``rounding="repo_compat"`` instead reproduces the HBQ repository's FP16 arithmetic
(``docs/hbq_format.md`` lists exactly what is emulated).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from ._elem import E2M1, E2M2, FPFormat, _encode_checked, _fp_magnitude
from ._elem import saturation_codes as _elem_saturation_codes
from ._quantized import BACKENDS, QuantizedTensor, register
from ._scale import E5M3, decode_scale, encode_scale

L2_TABLES = MappingProxyType(
    {
        # name: (integer multipliers for codes 0..3, fractional bits); value = int / 2**frac.
        # [R-Q] ``L2_SCHEME``. Repo names: PoT, INT, SIG-1, FP-1 (= SIG_2), FP-10 (= SIG_3), FP-100.
        "pot": ((1, 2, 4, 8), 0),
        "int": ((1, 2, 3, 4), 0),
        "sig1": ((2, 3, 4, 5), 1),
        "sig2": ((4, 5, 6, 7), 2),
        "sig3": ((8, 9, 10, 11), 3),
        "sig4": ((16, 17, 18, 19), 4),
    }
)
"""Level-2 multiplier tables. With ``l2_bits = n`` only codes ``0 .. 2**n - 1`` are used.
``"mix"`` (weights) is SIG_2 or SIG_3 chosen per L1 block by one scheme bit (0 = SIG_2)."""

L2_ALIASES = MappingProxyType({"fp-1": "sig2", "fp-10": "sig3", "fp-100": "sig4", "sig-1": "sig1"})
"""The HBQ repository's scheme names mapped to ours."""

HBQ_ROLES = ("weight", "activation", "kv")
"""Tensor roles: weights (E2M1, Mix), activations (E2M2, SIG-1), KV cache (E2M1, act L2)."""

HBQ_L2_SCHEMES = ("mix", "sig1", "pot", "int", "sig2", "sig3", "sig4", "none")
"""Canonical L2 scheme names (``"none"`` = L1 scale only, no L2 codes)."""

HBQ_ROUNDING_MODES = ("half_away", "rne", "repo_compat")
"""Element rounding modes HBQ offers (``half_away`` is the default; see the module docstring)."""

HBQ_PRESETS = MappingProxyType({"hbq-a": 8, "hbq-e": 32})
"""Registered preset names and their default micro-block size (paper variant)."""

_OPTIONS = (
    "role",
    "block",
    "ub",
    "l2",
    "l2_bits",
    "l2_select",
    "variant",
    "scale_rounding",
    "short_axis",
)
_VARIANTS = ("paper", "asic")
_SELECTS = ("mse", "threshold")
_SCALE_ROUNDINGS = ("half_up", "ceil")
_SHORT_AXIS = ("pad", "whole")
_REPO_FP_NAMES = MappingProxyType({"fp-1": 0, "fp-10": 1, "fp-100": 2})

THRESHOLD_LEVEL = 7.5
"""Hardware activation rule ([R-QNT]): a micro-block takes L2 code 1 (multiplier 2) iff
its largest ``|x| / S1`` is at least 7.5, the point where E2M2 (max 7) would round past 7."""

_EXTREME_LO = 2.0**-450
_EXTREME_HI = 2.0**450
_CHUNK_ELEMENTS = 1 << 16


def _sse_tolerance(block_len: int) -> float:
    """Relative margin inside which a float64 SSE comparison is re-decided exactly."""
    return 4.0 * (block_len + 4) * 2.0**-53


@dataclass(frozen=True)
class HBQSpec:
    """An HBQ format configuration (implements ``FormatSpec``; build it with :func:`hbq_spec`).

    Attributes:
        name: registered name, ``"hbq-a"`` or ``"hbq-e"``.
        role: ``"weight"``, ``"activation"`` or ``"kv"``.
        block: L1 block length B (elements per E5M3 scale).
        ub: micro-block length μB (elements per L2 code); divides ``block``.
        l2: canonical L2 scheme (:data:`HBQ_L2_SCHEMES`).
        l2_bits: L2 code width (1 or 2; 0 for ``l2="none"``).
        l2_select: ``"mse"`` (min-SSE search) or ``"threshold"`` (hardware activation rule).
        variant: ``"paper"`` or ``"asic"`` (which defaults were applied).
        scale_rounding: E5M3 rounding of the L1 scale, ``"half_up"`` or ``"ceil"``.
        short_axis: ``"pad"`` (zero-pad a ragged axis) or ``"whole"`` (an axis shorter than
            ``block`` is one block of its own length; see :meth:`block_for_axis`).
        elem: element format (E2M1 for weight/kv, E2M2 for activation).
        element_bits: element code width (4 or 5).
        scale_bits: L1 scale code width (8, E5M3).
        default_rounding: ``"half_away"``.
        rounding_modes: :data:`HBQ_ROUNDING_MODES`.
    """

    name: str
    role: str
    block: int
    ub: int
    l2: str
    l2_bits: int
    l2_select: str = "mse"
    variant: str = "paper"
    scale_rounding: str = "half_up"
    short_axis: str = "pad"
    elem: FPFormat = field(init=False)
    element_bits: int = field(init=False)
    scale_bits: int = field(init=False, default=8)
    default_rounding: str = field(init=False, default="half_away")
    rounding_modes: tuple[str, ...] = field(init=False, default=HBQ_ROUNDING_MODES)

    def __post_init__(self) -> None:
        problems = _validate(self)
        if problems:
            raise ValueError("invalid HBQ configuration: " + "; ".join(problems))
        elem = E2M2 if self.role == "activation" else E2M1
        object.__setattr__(self, "elem", elem)
        object.__setattr__(self, "element_bits", elem.bits)

    # ---------------------------------------------------------------- tables and sizes

    @property
    def n_schemes(self) -> int:
        """Candidate L2 tables per L1 block (2 for Mix, else 1)."""
        return 2 if self.l2 == "mix" else 1

    @property
    def n_l2_codes(self) -> int:
        """Codes per L2 table, ``2**l2_bits`` (1 for ``l2="none"``)."""
        return 1 << self.l2_bits

    def sig_values(self, scheme_bit: int = 0) -> npt.NDArray[np.float64]:
        """SIG multipliers of one L2 table, indexed by L2 code.

        Args:
            scheme_bit: the Mix selector (0 = SIG_2, 1 = SIG_3); must be 0 for other schemes.

        Returns:
            float64 array of length ``2**l2_bits`` (``[1.0]`` for ``l2="none"``); exact.
        """
        if scheme_bit not in range(self.n_schemes):
            raise ValueError(
                f"scheme_bit={scheme_bit!r}; l2={self.l2!r} has "
                + ("scheme bits 0 (SIG_2) and 1 (SIG_3)" if self.l2 == "mix" else "only scheme 0")
            )
        return _tables(self.l2, self.l2_bits)[scheme_bit].copy()

    def scale_divisors(self) -> npt.NDArray[np.float64]:
        """``Emax * max(T_t)`` per candidate scheme (10.5 and 8.25 for Mix, 17.5 for SIG-1)."""
        return self.elem.max_value * _tables(self.l2, self.l2_bits).max(axis=1)

    def bits_per_element(self, *, scheme_bit: bool = True) -> float:
        """Storage bits per element ([R-README]): ``element_bits + (8 + (B/μB)*l2_bits [+1]) / B``.

        Args:
            scheme_bit: count the Mix selector bit (True, the real storage cost). The README's
                4.31 / 4.13 (HBQ-A / HBQ-E weights) leave it out: pass False to get those.

        Returns:
            Bits per element (e.g. 4.3203125 for HBQ-A weights, 4.3125 without the scheme bit).
        """
        side = self.scale_bits + (self.block // self.ub) * self.l2_bits
        if scheme_bit and self.l2 == "mix":
            side += 1
        return self.element_bits + side / self.block

    def saturation_codes(self) -> tuple[int, int]:
        """Element codes of ``+max`` and ``-max`` (E2M1: 7 and 15; E2M2: 15 and 31)."""
        return _elem_saturation_codes(self.elem)

    def block_for_axis(self, axis_len: int) -> int:
        """The L1 block length used for an axis of ``axis_len`` elements.

        ``short_axis="pad"``: always ``block`` (a ragged tail is zero-padded). ``"whole"``: an axis
        shorter than ``block`` is one block of its own length, which must then be a multiple of
        ``ub`` (the HBQ repository's reshape quirk, [R-Q]). Zero padding never changes a
        code (zeros do not change ``amax`` and add no error), so the two differ only in the
        block length of the stored codes.

        Raises:
            ValueError: ``"whole"`` with an axis length that ``ub`` does not divide.
        """
        if axis_len < 1:
            raise ValueError(f"axis length must be >= 1, got {axis_len}")
        if self.short_axis == "pad" or axis_len >= self.block:
            return self.block
        if self.l2 != "none" and axis_len % self.ub:
            raise ValueError(
                f"short_axis='whole': axis length {axis_len} is shorter than block={self.block} "
                f"and becomes one block, but ub={self.ub} does not divide it"
            )
        return axis_len

    # ---------------------------------------------------------------- quantize / dequantize

    def quantize_blocks(
        self, xb: npt.NDArray[np.float64], rounding: str, backend: str
    ) -> dict[str, Any]:
        """Quantize float64 blocks.

        Args:
            xb: float64 ``(..., n_blocks, L)`` with ``L == block`` (or, with
                ``short_axis="whole"``, a multiple of ``ub`` below ``block``). ±Inf saturates to
                the ±max element code (the scale comes from the finite values); NaN raises.
            rounding: one of :data:`HBQ_ROUNDING_MODES`.
            backend: ``"numpy"`` (reference) or ``"numba"`` (equal bit for bit).

        Returns:
            ``codes`` uint8 ``(..., n_blocks, L)``; ``scales`` uint8 E5M3 codes
            ``(..., n_blocks)``; ``l2_codes`` uint8 ``(..., n_blocks, L // ub)`` (None for
            ``l2="none"``); ``scheme`` uint8 ``(..., n_blocks)`` for Mix, else None.

        Raises:
            ValueError: bad rounding/backend/block length, NaN input, or an option combination
                that ``repo_compat`` does not emulate.
        """
        if rounding not in self.rounding_modes:
            raise ValueError(
                f"rounding={rounding!r} is not offered by format {self.name!r}; valid choices: "
                f"{', '.join(self.rounding_modes)}"
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; valid choices: {', '.join(BACKENDS)}")
        x = np.asarray(xb, dtype=np.float64)
        if x.ndim < 2:
            raise ValueError(f"expected blocks of shape (..., n_blocks, L), got shape {x.shape}")
        L = x.shape[-1]
        self._check_block_len(L)
        if rounding == "repo_compat" and self.l2_select == "threshold":
            raise ValueError(
                "rounding='repo_compat' emulates the HBQ repository's min-SSE search; the "
                "repository has no l2_select='threshold' rule"
            )
        has_inf = False
        if not np.isfinite(x).all():
            if np.isnan(x).any():
                raise ValueError("HBQ has no NaN code; NaN input cannot be quantized")
            inf = np.isinf(x)
            has_inf = True
            neg = x < 0
            x = np.where(inf, 0.0, x)
        lead = x.shape[:-1]
        x2 = np.ascontiguousarray(x.reshape(-1, L))
        if rounding == "repo_compat":
            x2 = _to_fp16_checked(x2)
            if backend == "numba":
                out = _repo_numba(self, x2)
            else:
                out = _repo_numpy(self, x2)
        elif backend == "numba":
            out = _exact_numba(self, x2, rounding)
        else:
            out = _exact_numpy(self, x2, rounding)
        codes, scales, l2c, scheme = out
        codes = codes.reshape(lead + (L,))
        if has_inf:
            pos_code, neg_code = self.saturation_codes()
            codes[inf & ~neg] = pos_code
            codes[inf & neg] = neg_code
        return {
            "codes": codes,
            "scales": scales.reshape(lead),
            "l2_codes": None if self.l2 == "none" else l2c.reshape(lead + (L // self.ub,)),
            "scheme": scheme.reshape(lead) if self.l2 == "mix" else None,
            "extra": {"backend": backend},
        }

    def dequantize_blocks(self, q: QuantizedTensor) -> npt.NDArray[np.float64]:
        """Exact values ``elem(code) * SIG(l2 code) * S1`` of the blocks, float64, codes' shape."""
        codes = np.asarray(q.codes)
        mult, ub = self._multipliers(q)
        # Table lookup (the table is decode() over every code point) keeps this fast.
        vals = self.elem.values()[codes]
        shape = codes.shape[:-1] + (codes.shape[-1] // ub, ub)
        return (vals.reshape(shape) * mult[..., None]).reshape(codes.shape)

    def dequantize_rows(
        self, q: QuantizedTensor, n: int, dtype: npt.DTypeLike
    ) -> npt.NDArray[np.floating]:
        """Fused numba dequantization: rows ``(R, n)`` of ``dtype`` (float32/float64), equal to
        :meth:`dequantize_blocks` with the padding dropped and cast once to ``dtype``."""
        from ..fast import formats as fast

        codes = np.asarray(q.codes)
        mult, ub = self._multipliers(q)
        c2 = np.ascontiguousarray(codes, dtype=np.uint8).reshape(
            -1, codes.shape[-2] * codes.shape[-1]
        )
        out = np.empty((c2.shape[0], n), dtype=dtype)
        mult_flat = np.ascontiguousarray(mult, dtype=np.float64).reshape(-1)
        fast.dequant_kernel(c2, self.elem.values(), mult_flat, ub, out)
        return out

    def _multipliers(self, q: QuantizedTensor) -> tuple[npt.NDArray[np.float64], int]:
        """Validated ``SIG * S1`` per micro-block ``(..., n_blocks, L // ub)`` (exact) and the
        micro-block length (``L`` without an L2 level)."""
        codes = np.asarray(q.codes)
        L = codes.shape[-1]
        self._check_block_len(L)
        if codes.dtype.kind not in "iu":
            raise TypeError(f"element codes must be integers, got dtype {codes.dtype}")
        if codes.size and (codes.min() < 0 or codes.max() >= self.elem.n_codes):
            raise ValueError(f"{self.elem.name} code out of range 0..{self.elem.n_codes - 1}")
        s1 = decode_scale(q.scales, E5M3)
        if self.l2 == "none":
            return s1[..., None], L
        if q.l2_codes is None:
            raise ValueError(f"l2={self.l2!r} needs l2_codes, got None")
        l2 = np.asarray(q.l2_codes).astype(np.int64)
        tables = _tables(self.l2, self.l2_bits)
        if l2.shape != codes.shape[:-1] + (L // self.ub,):
            raise ValueError(
                f"l2_codes shape {l2.shape} does not match codes {codes.shape} with ub={self.ub}"
            )
        if l2.size and (l2.min() < 0 or l2.max() >= tables.shape[1]):
            raise ValueError(f"l2 code out of range 0..{tables.shape[1] - 1}")
        if self.l2 == "mix":
            if q.scheme is None:
                raise ValueError("l2='mix' needs the per-block scheme bits, got None")
            sch = np.asarray(q.scheme).astype(np.int64)
            if sch.size and (sch.min() < 0 or sch.max() > 1):
                raise ValueError("Mix scheme bits must be 0 or 1")
            sig = tables[sch[..., None], l2]
        else:
            sig = tables[0][l2]
        return s1[..., None] * sig, self.ub  # (..., n_blocks, L // ub), exact

    def _check_block_len(self, L: int) -> None:
        ok = L == self.block or (
            self.short_axis == "whole"
            and 1 <= L < self.block
            and (self.l2 == "none" or L % self.ub == 0)
        )
        if not ok:
            raise ValueError(
                f"blocks of length {L} do not fit {self.name!r} with block={self.block}, "
                f"ub={self.ub}, short_axis={self.short_axis!r}"
            )


# -------------------------------------------------------------------------------------------
# Construction and validation


def _canonical_l2(l2: Any, l2_bits: Any) -> tuple[str | None, str | None]:
    """(canonical name, problem) for a user-supplied scheme name."""
    if not isinstance(l2, str):
        return None, f"l2={l2!r} must be a scheme name"
    key = l2.lower()
    if key in _REPO_FP_NAMES and l2_bits is not None and l2_bits != 2:
        k = _REPO_FP_NAMES[key]
        return None, (
            f"repo scheme name {l2!r} means 1 + c/2**(l2_bits+{k}) in the HBQ repository and "
            f"equals {L2_ALIASES[key]!r} only at l2_bits=2; with l2_bits={l2_bits} pass "
            f"'sig{l2_bits + k}' instead"
        )
    key = L2_ALIASES.get(key, key)
    if key not in HBQ_L2_SCHEMES:
        return None, (
            f"l2={l2!r}; valid schemes: {', '.join(HBQ_L2_SCHEMES)} (repo names "
            f"{', '.join(repr(a) for a in L2_ALIASES)} are accepted)"
        )
    return key, None


def _validate(s: HBQSpec) -> list[str]:
    """Every problem with a spec's fields (empty when valid)."""
    p: list[str] = []
    if s.name not in HBQ_PRESETS:
        p.append(f"name={s.name!r}; valid names: {', '.join(HBQ_PRESETS)}")
    if s.role not in HBQ_ROLES:
        p.append(f"role={s.role!r}; valid choices: {', '.join(HBQ_ROLES)}")
    for what, v in (("block", s.block), ("ub", s.ub)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            p.append(f"{what}={v!r} must be a positive integer")
    ints_ok = not any(
        isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1 for v in (s.block, s.ub)
    )
    if ints_ok and s.block % s.ub:
        p.append(f"ub={s.ub} must divide block={s.block}")
    if s.l2 not in HBQ_L2_SCHEMES:
        p.append(f"l2={s.l2!r}; valid schemes: {', '.join(HBQ_L2_SCHEMES)}")
    elif s.l2 == "none":
        if s.l2_bits != 0:
            p.append(f"l2='none' stores no L2 codes, so l2_bits must be 0 (got {s.l2_bits!r})")
    elif s.l2_bits not in (1, 2) or isinstance(s.l2_bits, bool):
        p.append(f"l2_bits={s.l2_bits!r}; valid choices: 1, 2")
    role_ok = s.role in HBQ_ROLES  # role-dependent rules only once the role itself is valid
    if s.l2 == "mix" and role_ok and s.role != "weight":
        p.append(
            f"l2='mix' is the weight scheme (one SIG_2/SIG_3 selector bit per L1 block); "
            f"role={s.role!r} takes one of: {', '.join(x for x in HBQ_L2_SCHEMES if x != 'mix')}"
        )
    if s.l2_select not in _SELECTS:
        p.append(f"l2_select={s.l2_select!r}; valid choices: {', '.join(_SELECTS)}")
    elif (
        s.l2_select == "threshold"
        and role_ok
        and not (s.role == "activation" and s.l2 in ("pot", "int") and s.l2_bits == 1)
    ):
        p.append(
            "l2_select='threshold' is the hardware activation rule (E2M2 elements, 1-bit PoT/INT "
            f"L2 with multipliers {{1, 2}}); got role={s.role!r}, l2={s.l2!r}, "
            f"l2_bits={s.l2_bits!r}"
        )
    if s.variant not in _VARIANTS:
        p.append(f"variant={s.variant!r}; valid choices: {', '.join(_VARIANTS)}")
    if s.scale_rounding not in _SCALE_ROUNDINGS:
        p.append(f"scale_rounding={s.scale_rounding!r}; valid choices: half_up, ceil")
    if s.short_axis not in _SHORT_AXIS:
        p.append(f"short_axis={s.short_axis!r}; valid choices: pad, whole")
    return p


def hbq_spec(preset: str = "hbq-a", **options: Any) -> HBQSpec:
    """Build an HBQ spec from a preset and options (the registered ``hbq-a`` / ``hbq-e`` factory).

    Args:
        preset: ``"hbq-a"`` (μB 8) or ``"hbq-e"`` (μB 32).
        **options: ``role`` ("weight" default, "activation", "kv"); ``block`` (128);
            ``ub`` (preset's; 32 for ``variant="asic"``); ``l2`` (weights "mix"; activation/kv
            "sig1", or "pot" for ``variant="asic"``; repo names via :data:`L2_ALIASES`);
            ``l2_bits`` (2; 1 for asic activation/kv; 0 for "none"); ``l2_select`` ("mse");
            ``variant`` ("paper" or "asic"); ``scale_rounding`` ("half_up" or "ceil");
            ``short_axis`` ("pad" or "whole"). Explicit options override the variant's defaults.

    Returns:
        The validated :class:`HBQSpec`.

    Raises:
        TypeError: an unknown option (the message lists the valid ones).
        ValueError: every invalid value or combination, in one message.
    """
    key = str(preset).lower()
    if key not in HBQ_PRESETS:
        raise ValueError(f"unknown HBQ preset {preset!r}; valid presets: {', '.join(HBQ_PRESETS)}")
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(
            f"{key}: unknown option(s) {', '.join(repr(u) for u in unknown)}; valid options: "
            f"{', '.join(_OPTIONS)}"
        )
    variant = options.get("variant", "paper")
    role = options.get("role", "weight")
    act_like = role in ("activation", "kv")
    asic = variant == "asic"
    ub = options.get("ub", 32 if asic else HBQ_PRESETS[key])
    default_bits = 1 if asic and act_like else 2
    if "l2" in options:
        canonical, problem = _canonical_l2(options["l2"], options.get("l2_bits", default_bits))
        if canonical is None:
            raise ValueError(f"invalid HBQ configuration: {problem}")
        l2 = canonical
    else:
        l2 = ("pot" if asic else "sig1") if act_like else "mix"
    if "l2_bits" in options:
        l2_bits = options["l2_bits"]
        if l2 == "none" and l2_bits is None:
            l2_bits = 0
    else:
        l2_bits = 0 if l2 == "none" else default_bits
    return HBQSpec(
        name=key,
        role=role,
        block=options.get("block", 128),
        ub=ub,
        l2=l2,
        l2_bits=l2_bits,
        l2_select=options.get("l2_select", "mse"),
        variant=variant,
        scale_rounding=options.get("scale_rounding", "half_up"),
        short_axis=options.get("short_axis", "pad"),
    )


@functools.cache
def _tables(l2: str, l2_bits: int) -> npt.NDArray[np.float64]:
    """Candidate SIG tables ``(n_schemes, 2**l2_bits)``, float64, exact, read-only."""
    if l2 == "none":
        t = np.ones((1, 1))
    else:
        names = ("sig2", "sig3") if l2 == "mix" else (l2,)
        n = 1 << l2_bits
        t = np.array([[m / 2.0 ** L2_TABLES[k][1] for m in L2_TABLES[k][0][:n]] for k in names])
    t.setflags(write=False)
    return t


for _preset in HBQ_PRESETS:
    register(_preset, functools.partial(hbq_spec, _preset))


# -------------------------------------------------------------------------------------------
# Exact reference (numpy)


def _scale_codes(spec: HBQSpec, amax: npt.NDArray[np.float64]) -> npt.NDArray[np.uint8]:
    """E5M3 codes ``(T, R)`` of every candidate scheme's L1 scale."""
    return np.stack(
        [
            encode_scale(amax, E5M3, rounding=spec.scale_rounding, divisor=d)
            for d in spec.scale_divisors()
        ]
    )


def _eff_ub(spec: HBQSpec, L: int) -> int:
    """Micro-block length of the search: ``ub``, or the whole block when there is no L2 level."""
    return L if spec.l2 == "none" else spec.ub


def _extreme_rows(x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    a = np.abs(x)
    return ((a != 0) & ((a < _EXTREME_LO) | (a > _EXTREME_HI))).any(axis=1)


def _exact_sse_sign(
    x: npt.NDArray[np.float64], a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
) -> int:
    """Sign of ``sum((x-a)**2) - sum((x-b)**2)``, exactly (Python integers)."""
    vals = np.concatenate([x, a, b])
    frac, exp = np.frexp(vals)
    mant = (frac * 2.0**53).astype(np.int64)  # exact: |frac| < 1 has at most 53 bits
    exp = exp.astype(np.int64) - 53
    nz = mant != 0
    if not nz.any():
        return 0
    base = int(exp[nz].min())
    ints = [int(m) << (int(e) - base) if m else 0 for m, e in zip(mant, exp, strict=True)]
    n = x.size
    xi, ai, bi = ints[:n], ints[n : 2 * n], ints[2 * n :]
    sa = sum((p - q) * (p - q) for p, q in zip(xi, ai, strict=True))
    sb = sum((p - q) * (p - q) for p, q in zip(xi, bi, strict=True))
    return (sa > sb) - (sa < sb)


def _exact_numpy(
    spec: HBQSpec, x2: npt.NDArray[np.float64], rounding: str
) -> tuple[npt.NDArray[np.uint8], ...]:
    """Reference quantizer on rows ``(R, L)``: (codes, scale codes, l2 codes, scheme)."""
    R, L = x2.shape
    codes = np.zeros((R, L), dtype=np.uint8)
    scales = np.zeros(R, dtype=np.uint8)
    l2 = np.zeros((R, L // _eff_ub(spec, L)), dtype=np.uint8)
    scheme = np.zeros(R, dtype=np.uint8)
    step = max(1, _CHUNK_ELEMENTS // L)
    for r0 in range(0, R, step):
        sl = slice(r0, min(R, r0 + step))
        codes[sl], scales[sl], l2[sl], scheme[sl] = _exact_chunk(spec, x2[sl], rounding)
    return codes, scales, l2, scheme


def _exact_chunk(
    spec: HBQSpec, x: npt.NDArray[np.float64], rounding: str
) -> tuple[npt.NDArray[np.uint8], ...]:
    # Rows with extreme magnitudes can overflow the float64 SSEs (to Inf, then NaN in the
    # differences); those rows are always decided exactly, so the warnings carry no meaning.
    with np.errstate(over="ignore", invalid="ignore"):
        return _exact_chunk_body(spec, x, rounding)


def _exact_chunk_body(
    spec: HBQSpec, x: npt.NDArray[np.float64], rounding: str
) -> tuple[npt.NDArray[np.uint8], ...]:
    R, L = x.shape
    ub = _eff_ub(spec, L)
    n_ub = L // ub
    tables = _tables(spec.l2, spec.l2_bits)
    T, C = tables.shape
    elem_vals = spec.elem.values()
    amax = np.abs(x).max(axis=1)
    s_codes = _scale_codes(spec, amax)  # (T, R)
    s1 = decode_scale(s_codes, E5M3)
    force = _extreme_rows(x)
    tol = _sse_tolerance(L)
    q = np.empty((T, C, R, L), dtype=np.uint8)
    xh = np.empty((T, C, R, L))
    sse = np.empty((T, C, R, n_ub))
    for t in range(T):
        for c in range(C):
            mult = s1[t] * tables[t, c]
            q[t, c] = _encode_checked(x, mult[:, None], spec.elem, rounding, True)
            xh[t, c] = elem_vals[q[t, c]] * mult[:, None]
            sse[t, c] = ((x - xh[t, c]) ** 2).reshape(R, n_ub, ub).sum(axis=-1)
    xs = x.reshape(R, n_ub, ub)
    xh4 = xh.reshape(T, C, R, n_ub, ub)
    rows = np.arange(R)[:, None]
    cols = np.arange(n_ub)[None, :]
    best = np.zeros((T, R, n_ub), dtype=np.int64)
    for t in range(T):
        if spec.l2_select == "threshold":
            # Hardware rule: multiplier 2 iff max |x| >= 7.5 * S1 (exact product, exact compare).
            best[t] = np.abs(xs).max(axis=-1) >= THRESHOLD_LEVEL * s1[t][:, None]
            continue
        fbest = sse[t, 0].copy()
        for c in range(1, C):
            fc = sse[t, c]
            big = np.maximum(fc, fbest)
            near = ((np.abs(fc - fbest) <= tol * big) & (big > 0)) | force[:, None]
            better = (fc < fbest) & ~near
            if near.any():
                rr, jj = np.nonzero(near)
                a_hat = xh4[t, c, rr, jj]
                b_hat = xh4[t, best[t, rr, jj], rr, jj]
                differ = ~(a_hat == b_hat).all(axis=-1)
                for r, j in zip(rr[differ], jj[differ], strict=True):
                    sign = _exact_sse_sign(xs[r, j], xh4[t, c, r, j], xh4[t, best[t, r, j], r, j])
                    better[r, j] = sign < 0
            best[t] = np.where(better, c, best[t])
            fbest = np.where(better, fc, fbest)
    win = np.zeros(R, dtype=np.int64)
    if T == 2:
        # Block error per scheme from the chosen micro-block SSEs; ties go to scheme 0.
        e = np.stack([sse[t, best[t], rows, cols].sum(axis=1) for t in range(2)])
        big = np.maximum(e[0], e[1])
        near = ((np.abs(e[1] - e[0]) <= tol * big) & (big > 0)) | force
        win = np.where((e[1] < e[0]) & ~near, 1, 0)
        for r in np.nonzero(near)[0]:
            ha = xh4[1, best[1, r], r, np.arange(n_ub)].reshape(L)
            hb = xh4[0, best[0, r], r, np.arange(n_ub)].reshape(L)
            if not np.array_equal(ha, hb):
                win[r] = int(_exact_sse_sign(x[r], ha, hb) < 0)
    chosen = best[win[:, None], rows, cols]  # (R, n_ub)
    q5 = q.reshape(T, C, R, n_ub, ub)
    out_codes = q5[win[:, None], chosen, rows, cols].reshape(R, L)
    out_scales = s_codes[win, np.arange(R)].astype(np.uint8)
    return out_codes, out_scales, chosen.astype(np.uint8), win.astype(np.uint8)


def _numba_params(spec: HBQSpec) -> dict[str, Any]:
    """Exact threshold tables for the numba kernels (products of few-bit numbers: exact)."""
    mags = _fp_magnitude(spec.elem, np.arange(spec.elem.max_code + 1))
    grid = E5M3.values()
    mids = (grid[:-1] + grid[1:]) / 2
    div = spec.scale_divisors()
    return {
        "elem_mids": (mags[:-1] + mags[1:]) / 2,
        "elem_vals": mags,
        "sign_bit": 1 << (spec.elem.bits - 1),
        "tables": np.ascontiguousarray(_tables(spec.l2, spec.l2_bits)),
        "scale_thr": np.ascontiguousarray(
            (grid[None, :] if spec.scale_rounding == "ceil" else mids[None, :]) * div[:, None]
        ),
        "scale_vals": grid,
        "ceil": spec.scale_rounding == "ceil",
    }


def _exact_numba(
    spec: HBQSpec, x2: npt.NDArray[np.float64], rounding: str
) -> tuple[npt.NDArray[np.uint8], ...]:
    from ..fast import hbq as fast

    p = _numba_params(spec)
    R, L = x2.shape
    ub = _eff_ub(spec, L)
    codes, scales, l2, scheme, unresolved = fast.quantize_exact(
        x2,
        p["elem_mids"],
        p["elem_vals"],
        p["sign_bit"],
        rounding == "rne",
        p["tables"],
        p["scale_thr"],
        p["scale_vals"],
        p["ceil"],
        E5M3.min_code,
        ub,
        spec.l2_select == "threshold",
        THRESHOLD_LEVEL,
        _sse_tolerance(L),
    )
    if unresolved.any():
        # Near-ties that need exact integer arithmetic: the reference decides those rows.
        idx = np.nonzero(unresolved)[0]
        c, s, l, m = _exact_numpy(spec, np.ascontiguousarray(x2[idx]), rounding)
        codes[idx], scales[idx], l2[idx], scheme[idx] = c, s, l, m
    return codes, scales, l2, scheme


# -------------------------------------------------------------------------------------------
# repo_compat: the HBQ repository's FP16 arithmetic


REPO_ADD = float(np.float32(0.5004))
"""The repository's element rounding constant, as the float32 its compiled kernel adds.

The compiled element quantiser (``torch.compile`` of ``make_fp_quant``, the path the authors'
PTQ runs) computes ``|mant| + 0.5004`` in float32 and floors that float32 sum; the FP16 cast
written between the two in the source is dropped by the fused kernel."""


def _to_fp16_checked(x2: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The input as FP16 values (RNE), as float64; raises where FP16 overflows."""
    with np.errstate(over="ignore"):
        h = x2.astype(np.float16)
    if np.isinf(h).any():
        bad = float(x2[np.isinf(h)].flat[0])
        raise ValueError(
            f"rounding='repo_compat' emulates FP16 tensors, and {bad!r} overflows FP16 (|x| >= "
            "65520)"
        )
    return h.astype(np.float64)


def _repo_scale_codes(raw16: npt.NDArray[np.float16], ceil: bool) -> npt.NDArray[np.uint8]:
    """E5M3 codes of the repo's ``quant_scale`` on FP16 scales (vectorized ``fp_quant(5, 3)``)."""
    raw16 = np.clip(raw16, np.float16(2.0**-14), np.float16(61440.0))
    raw = raw16.astype(np.float64)
    # torch.log2 on an FP16 tensor rounds the logarithm to FP16 before the floor.
    exp = np.floor(np.log2(raw).astype(np.float16).astype(np.float64))
    exp = np.clip(exp, -14, 15)
    mant = np.abs((raw / np.exp2(exp) - 1.0) * 8.0)  # exact in FP16 (and float64)
    m = np.ceil(mant) if ceil else np.floor(mant + 0.5)  # |mant| + 0.5 is exact in FP16
    over = (m > 7) & (exp != 15)
    m = np.where(over, 0.0, np.minimum(m, 7.0))
    exp = np.where(over, exp + 1, exp)
    return ((exp.astype(np.int64) + 15) * 8 + m.astype(np.int64)).astype(np.uint8)


def _repo_elem_mag(v: npt.NDArray[np.float64], mbits: int) -> npt.NDArray[np.int64]:
    """Magnitude codes of the repo's compiled ``make_fp_quant(2, mbits)`` on FP16 values ``v``."""
    a = np.abs(v)
    shift = float(1 << mbits)
    mant_max = (1 << mbits) - 1
    sub_thr = 1.0 - 2.0 ** -(mbits + 1)
    sub = a < sub_thr
    promote = (a >= sub_thr) & (a < 1.0)
    with np.errstate(divide="ignore"):
        e = np.frexp(a)[1].astype(np.float64) - 1.0  # floor(log2 a) for a > 0
    e = np.clip(e, 0.0, 2.0)
    mant = np.where(sub, a * shift, (a / np.exp2(e) - 1.0) * shift)
    # Compiled path: float32 |mant| + 0.5004f, floored as a float32 (no FP16 rounding of the
    # sum). ``mant + REPO_ADD`` is exact in float64 (both have few bits), so one cast to float32
    # is the correctly rounded float32 addition.
    m = np.floor((mant + REPO_ADD).astype(np.float32)).astype(np.float64)
    over = (m > mant_max) & (e != 2.0)
    m = np.minimum(m, mant_max)
    mag_norm = np.where(over, (e + 2.0) * shift, (e + 1.0) * shift + m)
    # A subnormal that rounds past the top mantissa becomes 0 in the repo (its mantissa is
    # zeroed and the subnormal formula has no implicit 1).
    mag_sub = np.where(over, 0.0, m)
    mag = np.where(sub, mag_sub, np.where(promote, shift, mag_norm))
    return np.where(a == 0, 0, mag).astype(np.int64)


def _repo_numpy(spec: HBQSpec, x2: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint8], ...]:
    """repo_compat on FP16-valued rows ``(R, L)`` (vectorized numpy float16 arithmetic)."""
    R, L = x2.shape
    ub = _eff_ub(spec, L)
    n_ub = L // ub
    tables = _tables(spec.l2, spec.l2_bits)
    T, C = tables.shape
    mags = _fp_magnitude(spec.elem, np.arange(spec.elem.max_code + 1))
    mags16 = mags.astype(np.float16)
    x16 = x2.astype(np.float16)
    neg = x16 < 0
    amax16 = np.abs(x16).max(axis=1)
    rows = np.arange(R)[:, None]
    cols = np.arange(n_ub)[None, :]
    s_codes = np.empty((T, R), dtype=np.uint8)
    mag = np.empty((T, C, R, L), dtype=np.int64)
    acc = np.empty((T, C, R, n_ub))
    best = np.zeros((T, R, n_ub), dtype=np.int64)
    err16 = np.empty((T, R), dtype=np.float16)
    with np.errstate(over="ignore", under="ignore"):
        for t in range(T):
            div16 = np.float16(spec.scale_divisors()[t])
            s_codes[t] = _repo_scale_codes(amax16 / div16, spec.scale_rounding == "ceil")
            s16 = decode_scale(s_codes[t], E5M3).astype(np.float16)[:, None]
            for c in range(C):
                sig16 = np.float16(tables[t, c])
                v = (x16 / s16) / sig16
                mag[t, c] = _repo_elem_mag(v.astype(np.float64), spec.elem.mbits)
                hat = (mags16[mag[t, c]] * sig16) * s16
                hat = np.where(neg, -hat, hat)
                r = x16 - hat
                sq = (r * r).astype(np.float64)
                acc[t, c] = sq.reshape(R, n_ub, ub).sum(axis=-1)  # exact sum of FP16 squares
            # torch.min over the codes: the first minimal FP16 SSE.
            best[t] = np.argmin(acc[t].astype(np.float16), axis=0)
            err16[t] = acc[t, best[t], rows, cols].sum(axis=1).astype(np.float16)
    win = (err16[1] < err16[0]).astype(np.int64) if T == 2 else np.zeros(R, dtype=np.int64)
    chosen = best[win[:, None], rows, cols]
    m4 = mag.reshape(T, C, R, n_ub, ub)[win[:, None], chosen, rows, cols].reshape(R, L)
    sign_bit = 1 << (spec.elem.bits - 1)
    codes = np.where(neg & (m4 != 0), m4 | sign_bit, m4).astype(np.uint8)
    return codes, s_codes[win, np.arange(R)], chosen.astype(np.uint8), win.astype(np.uint8)


def _repo_numba(spec: HBQSpec, x2: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint8], ...]:
    from ..fast import hbq as fast

    mags = _fp_magnitude(spec.elem, np.arange(spec.elem.max_code + 1))
    ub = _eff_ub(spec, x2.shape[1])
    return fast.quantize_repo(
        x2,
        spec.elem.mbits,
        mags,
        1 << (spec.elem.bits - 1),
        np.ascontiguousarray(_tables(spec.l2, spec.l2_bits)),
        np.ascontiguousarray(spec.scale_divisors()),
        spec.scale_rounding == "ceil",
        ub,
    )


__all__ = [
    "HBQ_L2_SCHEMES",
    "HBQ_PRESETS",
    "HBQ_ROLES",
    "HBQ_ROUNDING_MODES",
    "L2_ALIASES",
    "L2_TABLES",
    "THRESHOLD_LEVEL",
    "HBQSpec",
    "hbq_spec",
]
