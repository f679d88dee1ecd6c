"""The exact integer HBQ dot-product datapath of one PE ([R-ACC] ``LP_vector.sv``, ``MAC.sv``).

One L1 block of ``B`` weight and activation elements goes through five stages; every stage is a
public function so that the RTL can be checked against each intermediate:

1. :func:`products` — element products ``P = ±(Mw·Ma) << (shw + sha)``, integers in units of
   2^-3 for E2M1 × E2M2 (``|P| <= 336``).
2. :func:`microblock_sums` — exact sums per micro-block (μB) of ``ub`` products.
3. :func:`l2_scale` — the micro-block sums times the two level-2 multipliers in their hardware
   integer form, which adds ``F - 3`` fractional bits.
4. :func:`l2_sum` — the sum over the micro-blocks: ``P_total``, a signed integer in units of
   2^-F (it fits a 24-bit signed accumulator for B = 128, see :func:`p_total_bound`).
5. :func:`l1_convert` — ``P_total × S1w × S1a`` converted to binary16/binary32, either exactly
   rounded once (``mode="exact"``) or as the authors' FX2FP unit does it (``mode="rtl_compat"``).

:func:`block_dot` chains them and returns every intermediate in a :class:`DotResult`.
All functions take raw integer code arrays and are vectorized over leading batch dimensions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..formats import L2_ALIASES, L2_TABLES
from ._fp import bit_length, round_scaled

__all__ = [
    "DotResult",
    "block_dot",
    "element_int",
    "l1_convert",
    "l2_multipliers",
    "l2_scale",
    "l2_sum",
    "microblock_sums",
    "p_total_bound",
    "product_frac_bits",
    "products",
    "scale_fields",
]

ELEM_BITS = (4, 5)
"""Supported element widths: 4 = E2M1 ``{s, e1, e0, m0}``, 5 = E2M2 ``{s, e1, e0, m1, m0}``."""

# Hardware integer form of the SIG_2 table: ×(8 + 2c) with 3 fractional bits ({01,c,0} in the RTL)
# rather than L2_TABLES' ×(4 + c) with 2, so that "sig2" equals "mix" with scheme bit 0 exactly.
_SIG2_HW = ((8, 10, 12, 14), 3)


def _check_codes(codes: npt.ArrayLike, bits: int, what: str) -> npt.NDArray[np.int64]:
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64)
    if c.size and (int(c.min()) < 0 or int(c.max()) >= 1 << bits):
        raise ValueError(f"{what} must lie in 0 .. {(1 << bits) - 1} ({bits}-bit codes)")
    return c


def element_int(
    codes: npt.ArrayLike, elem_bits: int
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """Integer view of HBQ element codes ([R-ACC] ``FP_mul_vector``).

    A code ``{s, e[1:0], m[mb-1:0]}`` (``mb = elem_bits - 3`` mantissa bits) has the significand
    integer ``M = {e != 0, m}`` and the shift ``sh = (e == 0) ? 0 : e - 1``; its value is
    ``(-1)^s · M · 2^(sh - mb)``. The returned ``M`` carries the sign, so ``-0`` gives 0.

    Args:
        codes: element codes, any shape, integers in ``0 .. 2**elem_bits - 1``.
        elem_bits: 4 (E2M1: ``|M| <= 3``) or 5 (E2M2: ``|M| <= 7``).

    Returns:
        ``(M, sh)``: signed significand integers (int8) and shifts in ``{0, 1, 2}`` (int8),
        both of the shape of ``codes``.
    """
    if elem_bits not in ELEM_BITS:
        raise ValueError(f"elem_bits={elem_bits}; valid choices: 4 (E2M1), 5 (E2M2)")
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise TypeError(f"element codes must be an integer array, got dtype {c.dtype}")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= 1 << elem_bits):
        raise ValueError(
            f"element codes must lie in 0 .. {(1 << elem_bits) - 1} ({elem_bits}-bit codes)"
        )
    m_lut, sh_lut = _element_luts(elem_bits)
    idx = c.astype(np.intp, copy=False)
    return m_lut[idx], sh_lut[idx]


@functools.cache
def _element_luts(elem_bits: int) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """``(M, sh)`` of every code, from the [R-ACC] ``FP_mul_vector`` bit fields (a lookup table)."""
    c = np.arange(1 << elem_bits, dtype=np.int64)
    mb = elem_bits - 3
    sign = c >> (elem_bits - 1)
    e = (c >> mb) & 3
    m = c & ((1 << mb) - 1)
    mag = ((e != 0).astype(np.int64) << mb) | m
    sh = np.where(e == 0, 0, e - 1)
    m_lut = np.where(sign == 1, -mag, mag).astype(np.int8)
    sh_lut = sh.astype(np.int8)
    m_lut.flags.writeable = False
    sh_lut.flags.writeable = False
    return m_lut, sh_lut


def product_frac_bits(w_elem_bits: int = 4, a_elem_bits: int = 5) -> int:
    """Fractional bits of the products: the two mantissa widths added (3 for E2M1 × E2M2)."""
    return (w_elem_bits - 3) + (a_elem_bits - 3)


def products(
    w_codes: npt.ArrayLike,
    a_codes: npt.ArrayLike,
    *,
    w_elem_bits: int = 4,
    a_elem_bits: int = 5,
) -> npt.NDArray[np.int16]:
    """Element products ``P = ±(Mw·Ma) << (shw + sha)`` ([R-ACC] ``FP_mul_vector``).

    Args:
        w_codes: weight element codes, ``(..., block)``.
        a_codes: activation element codes, broadcast against ``w_codes``.
        w_elem_bits: weight element width (4 = E2M1, the HBQ weight format).
        a_elem_bits: activation element width (5 = E2M2; 4 for E2M1 KV operands).

    Returns:
        int16 products in units of ``2**-product_frac_bits(w_elem_bits, a_elem_bits)``
        (2^-3 for E2M1 × E2M2, where ``|P| <= 3·7·16 = 336``).
    """
    mw, shw = element_int(w_codes, w_elem_bits)
    ma, sha = element_int(a_codes, a_elem_bits)
    p = (mw.astype(np.int16) * ma.astype(np.int16)) << (shw.astype(np.int16) + sha)
    return p.astype(np.int16)


def microblock_sums(p: npt.ArrayLike, ub: int) -> npt.NDArray[np.int32]:
    """Exact sums of the products over each micro-block ([R-ACC] sub-block adder trees).

    Args:
        p: products, ``(..., block)`` integers.
        ub: micro-block length; must divide ``block``.

    Returns:
        int32 sums, ``(..., block // ub)``; micro-block ``j`` covers elements ``j*ub .. j*ub+ub-1``.
    """
    pa = np.asarray(p)
    if pa.dtype.kind not in "iu":
        raise TypeError(f"products must be integers, got dtype {pa.dtype}")
    block = pa.shape[-1]
    if ub < 1 or block % ub:
        raise ValueError(f"micro-block length {ub} does not divide the block length {block}")
    return pa.astype(np.int64).reshape(pa.shape[:-1] + (block // ub, ub)).sum(-1).astype(np.int32)


def _l2_name(name: str | None) -> str | None:
    if name is None:
        return None
    key = L2_ALIASES.get(name.lower(), name.lower())
    if key == "none":
        return None
    if key != "mix" and key not in L2_TABLES:
        valid = ", ".join(["mix", *L2_TABLES, *L2_ALIASES, "None"])
        raise ValueError(f"unknown L2 scheme {name!r}; valid choices: {valid}")
    return key


def l2_multipliers(scheme: str) -> tuple[tuple[int, ...], int]:
    """Hardware integer form of a level-2 table: ``SIG(c) = ints[c] / 2**frac`` ([R-ACC]).

    PoT ``2^c`` (a left shift by c), INT ``c+1`` and SIG-1 ``c+2`` (1 fractional bit) come from
    ``L2_TABLES``; SIG_2 uses the RTL's ``{01,c,0} = 8+2c`` with 3 fractional bits and SIG_3
    ``{010,c} = 8+c`` with 3, so that both Mix tables share F.

    Args:
        scheme: a table name of ``L2_TABLES`` or an alias of ``L2_ALIASES`` (not ``"mix"``).

    Returns:
        ``(ints, frac)`` for codes ``0 .. len(ints) - 1``.
    """
    key = _l2_name(scheme)
    if key is None or key == "mix":
        raise ValueError(f"{scheme!r} is not a single L2 table")
    if key == "sig2":
        return _SIG2_HW
    return L2_TABLES[key]


def _l2_factor(
    codes: npt.ArrayLike | None,
    scheme: str | None,
    bits: int,
    mix_select: npt.ArrayLike | None,
    what: str,
) -> tuple[npt.NDArray[np.int64] | int, int]:
    """Per-micro-block integer multipliers and their fractional bits for one operand."""
    key = _l2_name(scheme)
    if key is None:
        return 1, 0
    if codes is None:
        raise ValueError(f"{what} L2 codes are required for L2 scheme {scheme!r}")
    if bits not in (1, 2):
        raise ValueError(f"{what} L2 code width {bits}; valid choices: 1, 2")
    c = _check_codes(codes, bits, f"{what} L2 codes")
    if key == "mix":
        if mix_select is None:
            raise ValueError("the Mix weight scheme needs the per-block scheme bits (w_scheme)")
        sel = _check_codes(mix_select, 1, "weight scheme bits")[..., None]
        t2 = np.asarray(_SIG2_HW[0], dtype=np.int64)
        t3 = np.asarray(L2_TABLES["sig3"][0], dtype=np.int64)
        return np.where(sel == 1, t3[c], t2[c]), 3
    ints, frac = l2_multipliers(key)
    return np.asarray(ints, dtype=np.int64)[c], frac


def l2_scale(
    ub_sums: npt.ArrayLike,
    w_l2: npt.ArrayLike | None,
    w_scheme: npt.ArrayLike | None,
    a_l2: npt.ArrayLike | None,
    *,
    act_l2: str | None,
    act_l2_bits: int,
    weight_l2: str | None = "mix",
    weight_l2_bits: int = 2,
    product_frac: int = 3,
) -> tuple[npt.NDArray[np.int32], int]:
    """Scale the micro-block sums by the level-2 multipliers in integer form ([R-ACC]).

    ``scaled[..., j] = ub_sums[..., j] · A(a_l2[..., j]) · W(w_l2[..., j])`` with the activation
    factor ``A``: PoT ``1 << c`` (F += 0), INT ``c + 1`` (F += 0), SIG-1 ``c + 2`` (F += 1); and
    the weight factor ``W``: Mix / SIG_2 ``8 + 2c`` and SIG_3 ``8 + c`` (F += 3). Any single table
    of ``L2_TABLES`` may be used on either side (its own fractional bits). ``None`` on a side means
    no L2 on that side (factor 1, F += 0); both ``None`` is the L1-only mode (F = 3).

    Args:
        ub_sums: micro-block sums, ``(..., n_ub)`` integers in units of ``2**-product_frac``.
        w_l2: weight L2 codes, ``(..., n_ub)`` (ignored when ``weight_l2`` is None).
        w_scheme: Mix selector per L1 block, ``(...)``, 0 = SIG_2, 1 = SIG_3 (only for Mix).
        a_l2: activation L2 codes, ``(..., n_ub)`` (ignored when ``act_l2`` is None).
        act_l2: ``"pot"``, ``"int"``, ``"sig1"`` (or any table / alias) or None.
        act_l2_bits: activation L2 code width (1 or 2).
        weight_l2: ``"mix"`` (default), any table / alias, or None.
        weight_l2_bits: weight L2 code width (1 or 2).
        product_frac: fractional bits of ``ub_sums`` (3 for E2M1 × E2M2 products).

    Returns:
        ``(scaled, F)``: int32 scaled sums ``(..., n_ub)`` in units of ``2**-F``, and ``F``
        (7 for SIG-1 × Mix, 6 for PoT/INT × Mix, 3 for L1-only).
    """
    s = np.asarray(ub_sums)
    if s.dtype.kind not in "iu":
        raise TypeError(f"micro-block sums must be integers, got dtype {s.dtype}")
    fa, frac_a = _l2_factor(a_l2, act_l2, act_l2_bits, None, "activation")
    fw, frac_w = _l2_factor(w_l2, weight_l2, weight_l2_bits, w_scheme, "weight")
    scaled = s.astype(np.int64) * fa * fw
    if scaled.size and int(np.abs(scaled).max()) >= 1 << 31:
        raise OverflowError("scaled micro-block sums exceed 32 bits")
    return scaled.astype(np.int32), product_frac + frac_a + frac_w


def l2_sum(scaled: npt.ArrayLike) -> npt.NDArray[np.int32]:
    """Sum the scaled micro-block sums of each L1 block ([R-ACC] L2 adder tree).

    Args:
        scaled: ``(..., n_ub)`` integers from :func:`l2_scale`.

    Returns:
        ``P_total``, int32 ``(...)``, in units of ``2**-F``. For B = 128 with the spec's
        activation schemes (PoT, INT, SIG-1) and any weight scheme up to SIG_3 (Mix included),
        ``|P_total| <= 4 816 896 < 2**23``: a 24-bit signed accumulator suffices (3 010 560 for
        SIG-1 × Mix). Finer tables on both sides need up to 25 bits; see :func:`p_total_bound`.
    """
    s = np.asarray(scaled)
    if s.dtype.kind not in "iu":
        raise TypeError(f"scaled sums must be integers, got dtype {s.dtype}")
    total = s.astype(np.int64).sum(-1)
    if total.size and int(np.abs(total).max()) >= 1 << 31:
        raise OverflowError("P_total exceeds 32 bits")
    return total.astype(np.int32)


def p_total_bound(
    block: int,
    *,
    act_l2: str | None,
    act_l2_bits: int,
    weight_l2: str | None = "mix",
    weight_l2_bits: int = 2,
    w_elem_bits: int = 4,
    a_elem_bits: int = 5,
) -> int:
    """Largest ``|P_total|`` the formats allow (all elements at ±max, all L2 codes at max).

    Useful to size the RTL accumulator: it needs ``bit_length(bound) + 1`` signed bits.

    Returns:
        ``block · max|P| · max A · max W`` (for B = 128, SIG-1 × Mix: 128·336·5·14 = 3 010 560).
    """
    max_p = 1
    for bits in (w_elem_bits, a_elem_bits):
        mb = bits - 3
        max_p *= ((1 << (mb + 1)) - 1) << 2  # M = {1, m = all ones} shifted by sh = 2
    factors = []
    for scheme, bits in ((act_l2, act_l2_bits), (weight_l2, weight_l2_bits)):
        key = _l2_name(scheme)
        if key is None:
            factors.append(1)
        elif key == "mix":
            factors.append(max(_SIG2_HW[0][(1 << bits) - 1], L2_TABLES["sig3"][0][(1 << bits) - 1]))
        else:
            factors.append(l2_multipliers(key)[0][(1 << bits) - 1])
    return block * max_p * factors[0] * factors[1]


def scale_fields(
    scale_codes: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Split E5M3 L1 scale codes ``{E[4:0], M[2:0]}`` into ``(E, M)`` ([R-Q] E5M3).

    The value is ``2^(E-15) · (1 + M/8) = (8 + M) · 2^(E-18)``.

    Args:
        scale_codes: uint8 codes, any shape.

    Returns:
        ``(E, M)`` as int64 arrays.

    Raises:
        ValueError: an exponent field of 0 (no subnormal scales) or 31 (reserved).
    """
    c = _check_codes(scale_codes, 8, "E5M3 scale codes")
    e, m = c >> 3, c & 7
    if c.size and (int(e.min()) < 1 or int(e.max()) > 30):
        raise ValueError(
            "E5M3 scale codes need an exponent field in 1 .. 30 (0 and 31 are invalid)"
        )
    return e, m


def _out_format(out: str) -> None:
    if out not in ("fp16", "fp32"):
        raise ValueError(f"out={out!r}; valid choices: 'fp16', 'fp32'")


def _bits_to_values(bits: npt.NDArray[np.unsignedinteger], out: str) -> npt.NDArray[np.floating]:
    return bits.view(np.float16) if out == "fp16" else bits.view(np.float32)


def l1_convert(
    p_total: npt.ArrayLike,
    F: int | npt.ArrayLike,  # the spec's name
    w_scale_codes: npt.ArrayLike,
    a_scale_codes: npt.ArrayLike,
    *,
    out: str = "fp16",
    mode: str = "exact",
) -> tuple[npt.NDArray[np.unsignedinteger], npt.NDArray[np.floating]]:
    """Apply the two E5M3 L1 scales and convert to floating point ([R-ACC] ``FX2FP_Scale_NV``).

    The exact real result is ``P_total · 2^-F · S1w · S1a
    = P_total · (8+Mx)(8+Mw) · 2^(Ex+Ew-36-F)`` (x = activation, w = weight scale).

    ``mode="exact"`` rounds that value **once**, RNE, to ``out`` (:func:`round_scaled`):
    overflow saturates to ±max (±65504 / ±FLT_MAX), a rounded result below the smallest normal is
    flushed to +0 (a value that rounds *up* to the smallest normal is kept), zero gives +0.

    ``mode="rtl_compat"`` (fp16 only) is the authors' FX2FP + Scale_NV unit, bit by bit:

    1. ``sign = P_total < 0``; ``a = |P_total|``; ``a == 0`` → ``0x0000``.
    2. ``k`` = index of the leading one of ``a`` (``k = W - 1 - lzc(a)`` for a W-bit word).
    3. ``sig11`` = the top 11 significant bits of ``a``: ``a >> (k - 10)`` if ``k >= 10`` (the
       lower ``k - 10`` bits are **truncated**), else ``a << (10 - k)``; ``1024 <= sig11 < 2048``.
    4. ``s = (8 + Mx) · (8 + Mw)`` — the 8-bit product (1.Mx)(1.Mw) with 6 fractional bits,
       ``64 <= s <= 225``.
    5. ``prod = sig11 · s`` (19 bits, ``2^16 <= prod < 2^19``); ``n`` = 0, 1 or 2 such that bit
       ``16 + n`` is the leading one (normalize ×1/×2/×4).
    6. ``sig = prod >> (6 + n)`` (11 bits), ``guard = (prod >> (5 + n)) & 1``,
       ``sig = sig + guard`` (round half up, one guard bit, no sticky). If ``sig == 2048``:
       ``sig = 1024``, ``n = n + 1``.
    7. Biased exponent ``E = Ex + Ew + (k + n - F) - 15``.
    8. ``E > 30`` → ``sign ? 0xFBFF : 0x7BFF`` (±65504); ``E < 1`` → ``0x0000`` (+0); else
       ``bits = sign << 15 | E << 10 | (sig - 1024)``.

    Because the 11 × 8-bit multiply is exact and half-up needs no sticky bit, this equals
    "truncate |P_total| to 11 significant bits, multiply exactly by S1w·S1a·2^-F, round half
    away from zero to 11 bits, saturate, flush" (the unit tests check it that way).

    Args:
        p_total: ``P_total`` integers, any shape (``|P_total| < 2**44``), units ``2**-F``.
        F: fractional bits of ``P_total`` (int, or integers broadcast with ``p_total``).
        w_scale_codes: weight E5M3 codes, broadcast against ``p_total``.
        a_scale_codes: activation E5M3 codes, broadcast against ``p_total``.
        out: ``"fp16"`` or ``"fp32"``.
        mode: ``"exact"`` or ``"rtl_compat"`` (fp16 only).

    Returns:
        ``(bits, values)``: uint16 (fp16) or uint32 (fp32) bit patterns and the same numbers as
        float16 / float32 values, of the broadcast shape.
    """
    _out_format(out)
    if mode not in ("exact", "rtl_compat"):
        raise ValueError(f"mode={mode!r}; valid choices: 'exact', 'rtl_compat'")
    p = np.asarray(p_total)
    if p.dtype.kind not in "iu":
        raise TypeError(f"P_total must be integers, got dtype {p.dtype}")
    ew, mw = scale_fields(w_scale_codes)
    ex, mx = scale_fields(a_scale_codes)
    f = np.asarray(F, dtype=np.int64)
    p, ew, mw, ex, mx, f = np.broadcast_arrays(p.astype(np.int64), ew, mw, ex, mx, f)
    if p.size and int(np.abs(p).max()) >= 1 << 44:
        raise ValueError("l1_convert needs |P_total| < 2**44")
    s = (8 + mx) * (8 + mw)
    if mode == "exact":
        bits = round_scaled(p * s, ex + ew - 36 - f, fmt=out)
        return bits, _bits_to_values(bits, out)
    if out != "fp16":
        raise ValueError("mode='rtl_compat' is defined for out='fp16' only")
    a = np.abs(p)
    k = bit_length(a) - 1
    sig11 = np.where(k >= 10, a >> np.clip(k - 10, 0, 62), a << np.clip(10 - k, 0, 62))
    prod = sig11 * s
    n = bit_length(prod) - 17
    sh = np.clip(6 + n, 6, 8)
    sig = (prod >> sh) + ((prod >> (sh - 1)) & 1)
    carry = sig >> 11
    sig = sig >> carry
    e_biased = ex + ew + (k + n + carry - f) - 15
    sign = (p < 0).astype(np.int64) << 15
    bits = sign | (e_biased << 10) | (sig - 1024)
    bits = np.where(e_biased > 30, sign | 0x7BFF, bits)
    bits = np.where((e_biased < 1) | (a == 0), 0, bits).astype(np.uint16)
    return bits, _bits_to_values(bits, out)


@dataclass(frozen=True, eq=False)
class DotResult:
    """Every intermediate of :func:`block_dot` (shapes for blocks ``(..., block)``).

    Attributes:
        products: int16 element products ``(..., block)`` (only with ``keep_products=True``).
        ub_sums: int32 micro-block sums ``(..., n_ub)``, units ``2**-3``.
        scaled: int32 L2-scaled sums ``(..., n_ub)``, units ``2**-F``.
        p_total: int32 block sums ``(...)``, units ``2**-F``.
        F: fractional bits of ``scaled`` and ``p_total``.
        bits: output bit patterns ``(...)``, uint16 (fp16) or uint32 (fp32).
        value: the outputs as float16 / float32 ``(...)``.
    """

    products: npt.NDArray[np.int16] | None
    ub_sums: npt.NDArray[np.int32]
    scaled: npt.NDArray[np.int32]
    p_total: npt.NDArray[np.int32]
    F: int  # the spec's name for the fractional bits
    bits: npt.NDArray[np.unsignedinteger]
    value: npt.NDArray[np.floating]


def block_dot(
    w_codes: npt.ArrayLike,
    w_scale: npt.ArrayLike,
    w_l2: npt.ArrayLike | None,
    w_scheme: npt.ArrayLike | None,
    a_codes: npt.ArrayLike,
    a_scale: npt.ArrayLike,
    a_l2: npt.ArrayLike | None,
    *,
    ub: int,
    act_l2: str | None,
    act_l2_bits: int,
    weight_l2: str | None = "mix",
    weight_l2_bits: int = 2,
    w_elem_bits: int = 4,
    a_elem_bits: int = 5,
    out: str = "fp16",
    mode: str = "exact",
    keep_products: bool = False,
) -> DotResult:
    """HBQ dot product of weight and activation L1 blocks, with every datapath intermediate.

    Leading dimensions broadcast (numpy rules) between the two operands.

    Args:
        w_codes: weight element codes ``(..., block)`` (E2M1 by default).
        w_scale: weight E5M3 codes ``(...)``.
        w_l2: weight L2 codes ``(..., block // ub)`` (None without weight L2).
        w_scheme: weight Mix selectors ``(...)`` (0 = SIG_2, 1 = SIG_3; None unless Mix).
        a_codes: activation element codes ``(..., block)`` (E2M2 by default).
        a_scale: activation E5M3 codes ``(...)``.
        a_l2: activation L2 codes ``(..., block // ub)`` (None without activation L2).
        ub: micro-block length.
        act_l2: activation L2 scheme (``"sig1"``, ``"pot"``, ``"int"``, any table, or None).
        act_l2_bits: activation L2 code width.
        weight_l2: weight L2 scheme (``"mix"``, any table, or None).
        weight_l2_bits: weight L2 code width.
        w_elem_bits: weight element width (4 = E2M1, 5 = E2M2).
        a_elem_bits: activation element width.
        out: ``"fp16"`` or ``"fp32"``.
        mode: ``"exact"`` or ``"rtl_compat"`` (see :func:`l1_convert`).
        keep_products: also return the element products (``block`` times bigger than the rest).

    Returns:
        The :class:`DotResult`.
    """
    p = products(w_codes, a_codes, w_elem_bits=w_elem_bits, a_elem_bits=a_elem_bits)
    sums = microblock_sums(p, ub)
    scaled, f = l2_scale(
        sums,
        w_l2,
        w_scheme,
        a_l2,
        act_l2=act_l2,
        act_l2_bits=act_l2_bits,
        weight_l2=weight_l2,
        weight_l2_bits=weight_l2_bits,
        product_frac=product_frac_bits(w_elem_bits, a_elem_bits),
    )
    p_total = l2_sum(scaled)
    bits, value = l1_convert(p_total, f, w_scale, a_scale, out=out, mode=mode)
    return DotResult(
        products=p if keep_products else None,
        ub_sums=sums,
        scaled=scaled,
        p_total=p_total,
        F=f,
        bits=bits,
        value=value,
    )
