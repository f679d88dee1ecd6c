"""numba kernels for the element encoders and the block-format hot loops.

Every kernel returns exactly what its numpy reference in :mod:`coaccel.models.formats` returns
(``tests/unit/test_fast_formats.py`` proves it bit for bit on every input class). The block
kernels never search a table and never divide per element:

* Block maxima are integer maxima of the inputs' bit patterns with the sign cleared (for
  non-negative floats the bit order is the value order; a pattern at or above +Inf's flags
  NaN/Inf), so they vectorize at the full width of the input dtype.
* Power-of-two scales (OCP MX, BFP): an element's code is integer arithmetic on its float64
  bit pattern and the scale's exponent (:func:`_pow2_scaled_index`): the quotient is exact, so
  rounding it is a shift with a mode-dependent bias.
* Other scales (NVFP4, INT with a scale format): the scale code comes from the float64 bits of
  the quotient (the grid point at or below it, :func:`_grid_floor_index`) and the reference's
  exact fix-up against ``midpoint * divisor`` (:func:`_scale_index`). Elements of grids with at
  most :data:`THRESHOLD_MIDS` midpoints (E2M1, INT4) are rounded by counting the exact
  thresholds ``midpoint * scale`` that ``|x|`` reaches, each turned once per scale code into the
  bit pattern of the smallest input-dtype value that passes it (:func:`_fill_thresholds`), so
  that an element costs eight integer compares; larger grids take the candidate from the
  quotient's exponent and mantissa and decide by the same exact comparison
  (:func:`_nearest_index`).

Three things keep LLVM from vectorizing an element loop, and the kernels avoid them: numba
widens narrow integer arithmetic to 64 bits (the loops cast back to the data's integer type,
:func:`_ucast`); an inlined helper that takes an array updates its reference count on every
call (helpers called per element take scalars only); an index computed as ``j0 + j`` keeps
numba's negative-index check (the loops index per-block slices).

The block kernels read rows ``(R, n)`` of the caller's float32/float64 data in place (other
float dtypes are widened to float64, exactly), one block of ``block`` elements at a time (a
ragged tail counts as zero padding), and write codes and scale codes straight into their
outputs; :func:`dequant_kernel` writes the caller's output dtype directly. No full-size
temporary is made.

This module holds kernels only: the reference (:mod:`coaccel.models.formats`) validates the
arguments, derives the kernels' format parameters and imports this module lazily, at its
``backend="numba"`` dispatch points (for example ``encode(..., backend="numba")`` runs
:func:`encode_kernel`). It imports nothing of the reference, so the two packages never import
each other.

Public: :func:`encode_kernel`, :func:`shared_exp_kernel`, :func:`block_amax_kernel`,
:func:`absmax_scale_kernel`, :func:`dequant_kernel`, :data:`MODE_CODES`, the status bits.
Internal (tested on their own): :func:`_nearest_index`, :func:`_exact_quotient_index`,
:func:`_pow2_scaled_index`, :func:`_scale_index`, :func:`_grid_binades`,
:func:`_bits_at_least`, :func:`_bits_above`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit
from numba.extending import overload

MODE_CODES = {"rne": 0, "half_away": 1, "half_up": 2, "ceil": 3, "floor": 4}
"""Integer codes of the rounding modes, as the kernels take them."""

STATUS_NAN = 1
"""Kernel status bit: a NaN input for a format without a NaN code."""
STATUS_OVERFLOW = 2
"""Kernel status bit: a non-saturating overflow for a format without Inf/NaN codes."""

THRESHOLD_MIDS = 8
"""Most element-grid midpoints (virtual overflow point included) for which the absmax kernel
rounds elements by counting thresholds (E2M1 and INT4 have 8)."""

_BITS_DTYPES: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float32): np.dtype(np.uint32),
    np.dtype(np.float64): np.dtype(np.uint64),
}


def _with_bits(x: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.floating], npt.NDArray]:
    """``x`` (float32/float64; other floats widened to float64, exactly) and its bit patterns
    (uint32/uint64, a view)."""
    if x.dtype not in _BITS_DTYPES:
        x = x.astype(np.float64)
    x = np.ascontiguousarray(x)
    return x, x.view(_BITS_DTYPES[x.dtype])


def _layout(xb):  # pragma: no cover - replaced by the overload inside numba
    """(mantissa bits, exponent bias, sign bit position) of the float whose bits ``xb`` holds."""
    raise NotImplementedError


@overload(_layout)
def _layout_impl(xb):
    if xb.dtype.bitwidth == 32:
        return lambda xb: (23, 127, 31)
    return lambda xb: (52, 1023, 63)


def _abs_mask(xb):  # pragma: no cover - replaced by the overload inside numba
    """All bits but the sign, in the integer type of ``xb``."""
    raise NotImplementedError


@overload(_abs_mask)
def _abs_mask_impl(xb):
    t = xb.dtype
    mask = (1 << (xb.dtype.bitwidth - 1)) - 1
    return lambda xb: t(mask)


def _ucast(like, v):  # pragma: no cover - replaced by the overload inside numba
    """``v`` in the integer type of ``like`` (a scalar, or an array's element type): numba
    widens narrower integer arithmetic to 64 bits, which would halve the vector width of
    uint32 loops. Inside element loops pass a scalar (see the module docstring)."""
    raise NotImplementedError


@overload(_ucast)
def _ucast_impl(like, v):
    t = like.dtype if hasattr(like, "dtype") else like
    return lambda like, v: t(v)


# --------------------------------------------------------------------------------------------
# Rounding of one value


@njit(cache=True, inline="always")
def _pow2(e):
    """2.0**e for a normal-range integer e, built from its bit pattern (no libm call)."""
    return np.uint64(np.uint64(1023 + e) << np.uint64(52)).view(np.float64)


@njit(cache=True, inline="always")
def _nearest_index(a, s, q, vtop, n, mode, neg, is_int, emin, mbits):
    """Nearest-rounding magnitude index of the exact real a/s on an element grid.

    ``q`` is a float estimate of a/s (within a few ulps: ``a / s`` or ``a * (1/s)``). The
    candidate ``k = ((e - emin) << mbits) + floor(q / 2**(e - mbits))`` (e = floor(log2 q), at
    least emin; integers: ``floor(q)``) is the grid point at or just below q, and the choice
    between it and the next one is made *exactly*, by comparing ``a`` with the midpoint times
    ``s`` (a product that is exact in float64, as in the reference). A float error in q can
    only move it across a representable value, never across a midpoint as well, so the result
    equals the reference's. ``vtop`` (the virtual value above the maximum) caps q, and the
    index is capped at ``n - 1`` (that virtual point: "overflow").
    """
    q = min(q, vtop)
    if is_int:
        f = np.int64(q)
        ms = (f + 0.5) * s
        klo = f
    else:
        e = max(np.int64((np.float64(q).view(np.uint64) >> 52) & 0x7FF) - 1023, emin)
        f = np.int64(q * _pow2(mbits - e))  # q >= 0: truncation is floor
        ms = (f + 0.5) * _pow2(e - mbits) * s
        klo = ((e - emin) << mbits) + f
    if mode == 0:
        tie = (klo & 1) == 1  # RNE: go up to the even code
    elif mode == 1:
        tie = True
    else:
        tie = not neg
    up = (a > ms) | ((a == ms) & tie)
    return min(klo + np.int64(up), n - 1)


@njit(cache=True, inline="always")
def _shift_round(mant, sh, mode, neg):
    """``mant / 2**sh`` rounded to an integer (``mant >= 0``, ``1 <= sh <= 62``): RNE,
    half away from zero, or half toward +inf for the sign ``neg`` (the magnitude's rounding).

    Half a unit (minus one, plus the kept LSB for RNE; minus one for a negative ``half_up``) is
    added before the shift, so a tie goes the mode's way and a carry needs no extra step.
    """
    half = np.int64(1) << (sh - 1)
    if mode == 0:
        bias = half - 1 + ((mant >> sh) & 1)
    elif mode == 1:
        bias = half
    else:
        bias = half - np.int64(neg)
    return (mant + bias) >> sh


@njit(cache=True, inline="always")
def _exact_quotient_index(q, vtop, mode, neg, is_int, emin, mbits):
    """Nearest-rounding magnitude index of ``q`` on an element grid, for an *exact* quotient
    ``q`` (float64, >= 0; NVFP4's float32 scale ratio on the UE4M3 grid): the rounding of
    :func:`_pow2_scaled_index` on q's bit pattern, with ``vtop`` (the virtual value above the
    maximum) capping q. The caller caps the index."""
    b = np.float64(min(q, vtop)).view(np.int64)
    return _pow2_scaled_index(b, 0, mode, neg, is_int, emin, mbits)


@njit(cache=True, inline="always")
def _pow2_scaled_index(b, scale_exp, mode, neg, is_int, emin, mbits):
    """Nearest-rounding magnitude index of ``|x| / 2**scale_exp`` on an element grid, from the
    float64 bit pattern ``b`` of ``|x|`` (int64; float32 input is widened first, which also
    normalizes its subnormals).

    The quotient is exact, so no float is formed: its significand is ``x``'s (with the implicit
    bit for normal x), its exponent is x's minus ``scale_exp``, and :func:`_shift_round` drops
    the bits below the grid's quantum at that exponent (``52 - mbits``, plus the distance below
    ``emin``; ``52 - e`` for integers). A float64 subnormal x is more than 2**800 below any
    element midpoint at the scales used (|scale_exp| < 200), where the shift is capped at 62
    and the result is 0; far above the grid the index only grows (integers: the shift is at
    least 1), and the caller caps it. Equal to :func:`_nearest_index` on every input class
    (tested).
    """
    ex = b >> 52
    mant = (b & 0xFFFFFFFFFFFFF) | (np.int64(ex != 0) << 52)
    e = ex - 1023 - scale_exp  # the quotient's binade
    if is_int:
        sh = 52 - e
        hi = np.int64(0)
    else:
        sh = 52 - mbits + max(emin - e, 0)
        hi = max(e - emin, 0) << mbits
    return hi + _shift_round(mant, min(max(sh, 1), 62), mode, neg)


@njit(cache=True, inline="always")
def _bits_at_least(t, tmpb, tmpf):
    """Bit pattern (int64) of the smallest value of the input dtype that is ``>= t`` (float64,
    ``t >= 0`` or +inf): for a non-negative input ``a``, ``a >= t`` exactly when
    ``bits(a) >= `` this. ``tmpf`` is a 1-element array of the input dtype, ``tmpb`` its bit
    view: storing rounds to nearest, and one step up fixes a value that rounded down."""
    tmpf[0] = t
    return np.int64(tmpb[0]) + np.int64(np.float64(tmpf[0]) < t)


@njit(cache=True, inline="always")
def _bits_above(t, tmpb, tmpf, inf_bits):
    """Bit pattern (int64) of the smallest value of the input dtype that is ``> t`` (as
    :func:`_bits_at_least`): one step above the largest value ``<= t``; ``inf_bits`` (passed by
    no finite input) when ``t`` is +inf or above the dtype's largest finite value."""
    if t == np.inf:
        return inf_bits
    tmpf[0] = t
    return np.int64(tmpb[0]) - np.int64(np.float64(tmpf[0]) > t) + 1


@njit(cache=True, inline="always")
def _grid_floor_index(q, e0, off, mbits, n):
    """Index of the largest value ``<= q`` (float64, finite, >= 0) of a minifloat grid with
    ``mbits`` mantissa bits; -1 below the first value, at most ``n - 1``.

    ``e0`` is the grid's lowest binade: its smallest normal exponent when the grid starts with
    subnormals at 0 (``off = 0``), else the exponent of its first value, which is ``2**e0``
    (``off = 2**mbits``: E5M3, E8M0). In binade ``E >= e0`` the index is
    ``((E - e0) << mbits) + floor(q / 2**(E - mbits)) - off`` (q's own binade, or e0 below it).
    """
    e = np.int64((np.float64(q).view(np.uint64) >> 52) & 0x7FF) - 1023
    big_e = max(e, e0)
    k = ((big_e - e0) << mbits) + np.int64(q * _pow2(mbits - big_e)) - off
    return min(max(k, -1), n - 1)


@njit(cache=True)
def _scale_index(a, d, mode, mids, vals, even, e0, off, mbits):
    """Index of the grid value that the exact real ``a / d`` rounds to: the reference's
    ``_elem._round_grid`` for one value (modes 0..4: rne, half_away, half_up, ceil, floor; the
    value is a positive scale, so half_up is half_away).

    The reference's candidate (``searchsorted`` of the float quotient into the midpoints or
    values) is found from :func:`_grid_floor_index` and one comparison; the exact fix-up against
    ``midpoint * d`` (or ``value * d``) then follows the reference, free of branches: its step up
    and its step down exclude each other.
    """
    n = vals.size
    q = a / d
    klo = _grid_floor_index(min(q, 2.0 * vals[n - 1]), e0, off, mbits, n)
    if mode <= 2:
        # searchsorted(mids, q, side="left"): the first i with mids[i] >= q.
        inside = (klo >= 0) & (klo < n - 1)
        k = max(klo, 0) + np.int64(inside & (q > mids[min(max(klo, 0), n - 2)]))
        if mode == 0:
            up_tie = even[min(k + 1, n - 1)]
            down_tie = even[max(k - 1, 0)]
        else:
            up_tie = True
            down_tie = False
        h = mids[min(k, n - 2)] * d
        low = mids[max(k - 1, 0)] * d
        up = (k < n - 1) & ((a > h) | ((a == h) & up_tie))
        down = (k > 0) & ((a < low) | ((a == low) & down_tie))
        return k + np.int64(up) - np.int64(down)
    if mode == 3:  # ceil: searchsorted(vals, q, side="left"), capped at n - 1
        k = klo + 1 - np.int64((klo >= 0) & (vals[max(klo, 0)] == q))
        k = min(k, n - 1)
        up = (k < n - 1) & (a > vals[k] * d)
        down = (k > 0) & (a <= vals[max(k - 1, 0)] * d)
        return k + np.int64(up) - np.int64(down)
    # floor: searchsorted(vals, q, side="right") - 1, at least 0
    k = max(klo, 0)
    down = (k > 0) & (a < vals[k] * d)
    up = (k < n - 1) & (a >= vals[min(k + 1, n - 1)] * d)
    return k + np.int64(up) - np.int64(down)


@njit(cache=True, inline="always")
def _signed_code(k, neg, is_int, bits):
    """Code of magnitude index k (already within range) with the sign ``neg`` (branch-free:
    signs of real data are random, and a mispredicted branch costs more than the arithmetic)."""
    n = np.int64(neg)
    if is_int:
        return (k - 2 * k * n) & ((1 << bits) - 1)
    return k | ((n & np.int64(k != 0)) << (bits - 1))


@njit(cache=True, inline="always")
def _signed_code_narrow(abs_mask, k, neg, kpos, kneg, is_int, bits):
    """:func:`_signed_code` of ``min(k, kneg if neg else kpos)`` in the integer type of
    ``abs_mask`` (uint32 for float32 input: numba's 64-bit widening would halve the vector
    width), free of branches."""
    n = _ucast(abs_mask, neg)
    k = min(_ucast(abs_mask, k), _ucast(abs_mask, kpos + (kneg - kpos) * n))
    if is_int:
        return np.uint8(_ucast(abs_mask, k - _ucast(abs_mask, 2 * k * n)) & ((1 << bits) - 1))
    return np.uint8(k | (_ucast(abs_mask, n & (k != 0)) << (bits - 1)))


# --------------------------------------------------------------------------------------------
# Element encoder


@njit(cache=True)
def encode_kernel(x, s, vtop, n, mode, is_int, bits, kpos, kneg, emin, mbits, saturate,
                  ovf_code, nan_pos, nan_neg):  # fmt: skip
    """Element codes of x/s (flat float64 arrays; ``s`` has size 1 or ``x.size``).

    Returns:
        (uint8 codes, status bits :data:`STATUS_NAN` | :data:`STATUS_OVERFLOW`).
    """
    size = x.size
    out = np.zeros(size, dtype=np.uint8)
    status = 0
    scalar = s.size == 1
    sign_bit = 1 << (bits - 1)
    for i in range(size):
        xi = x[i]
        si = s[0] if scalar else s[i]
        neg = math.copysign(1.0, xi) < 0.0
        if math.isnan(xi):
            if nan_pos < 0:
                status |= STATUS_NAN
            else:
                out[i] = nan_neg if neg else nan_pos
            continue
        a = abs(xi)
        kmax = kneg if neg else kpos
        if math.isinf(a):
            k = kmax + 1
        else:
            k = _nearest_index(a, si, a / si, vtop, n, mode, neg, is_int, emin, mbits)
        if k > kmax:
            if not saturate:
                if ovf_code < 0:
                    status |= STATUS_OVERFLOW
                else:
                    out[i] = (ovf_code | sign_bit) if neg else ovf_code
                    continue
            k = kmax
        out[i] = _signed_code(k, neg, is_int, bits)
    return out, status


# --------------------------------------------------------------------------------------------
# Block kernels
#
# Each kernel is a few passes, each a simple loop: block maxima over the data, then per-block
# scales over the maxima, then codes over the data.


@njit(cache=True)
def _block_max_bits(xb, block):
    """Largest ``|x|`` bit pattern of each block of the rows ``xb`` (R, L) of float bit
    patterns: integer maxima, which vectorize at the full width of the data; a result at or
    above +Inf's pattern flags a block holding NaN or Inf. Shape (R * ceil(L / block))."""
    abs_mask = _abs_mask(xb)
    R, L = xb.shape
    nb = (L + block - 1) // block
    out = np.empty(R * nb, dtype=xb.dtype)
    for r in range(R):
        row = xb[r]
        for bi in range(nb):
            seg = row[bi * block : min(bi * block + block, L)]
            m = _ucast(abs_mask, 0)
            for j in range(seg.size):
                m = max(m, _ucast(abs_mask, seg[j] & abs_mask))
            out[r * nb + bi] = m
    return out


def _float_layout(xb: npt.NDArray) -> tuple[int, int]:
    """(mantissa bits, exponent bias) of the floats whose bit patterns ``xb`` holds."""
    return (23, 127) if xb.dtype.itemsize == 4 else (52, 1023)


def block_amax_kernel(
    x: npt.NDArray[np.floating], block: int
) -> tuple[npt.NDArray[np.float64], bool]:
    """Per-block ``max |x|`` of float rows (R, L) split into blocks of ``block``.

    Returns:
        (float64 maxima, shape (R * ceil(L / block)), whether every value is finite).
    """
    xf, xb = _with_bits(x)
    mb = _block_max_bits(xb, block)
    fm, fb = _float_layout(xb)
    finite = mb.size == 0 or int(mb.max()) < (2 * fb + 1) << fm
    return mb.view(xf.dtype).astype(np.float64), bool(finite)


@njit(cache=True)
def _shared_exponents(mb, fm, fb, emax, x_lo, x_hi, clip_hi):
    """Shared exponent X and status of each block from its largest ``|x|`` bit pattern ``mb``
    (floats with ``fm`` mantissa bits and exponent bias ``fb``): see :func:`shared_exp_kernel`."""
    xs = np.zeros(mb.size, dtype=np.int64)
    status = np.zeros(mb.size, dtype=np.uint8)
    inf_bits = np.int64(2 * fb + 1) << fm
    for b in range(mb.size):
        m = np.int64(mb[b])
        if m >= inf_bits:  # NaN or Inf in the block
            status[b] = 1
            continue
        # floor(log2 amax), an all-zero block counting as 2**-126 (FP32_MIN_NORMAL, as
        # microxcaling does); a subnormal amax is normal in float64.
        if m == 0:
            fl = -126
        elif (m >> fm) != 0:
            fl = (m >> fm) - fb
        else:
            fl = ((np.float64(m).view(np.int64) >> 52) - 1023) - (fb - 1 + fm)
        e = fl - emax
        if e > x_hi:
            if clip_hi:
                e = x_hi
            else:
                xs[b] = e
                status[b] = 2
                continue
        xs[b] = max(e, x_lo)
    return xs, status


@njit(cache=True)
def _pow2_codes(x, block, xs, status, elem_shift, mode, is_int, bits, kpos, kneg, emin, mbits):
    """Element codes (uint8, (R, nb * block)) of the float rows ``x`` at the scales
    ``2**(xs + elem_shift)``, 0 where ``status`` is not 0 and in the padding."""
    R, L = x.shape
    nb = (L + block - 1) // block
    codes = np.empty((R, nb * block), dtype=np.uint8)
    kdiff = kneg - kpos
    for r in range(R):
        row = x[r]
        crow = codes[r]
        for bi in range(nb):
            b = r * nb + bi
            j0 = bi * block
            j1 = min(j0 + block, L)
            seg = row[j0:j1]
            cseg = crow[j0:j1]
            if j1 - j0 < block:
                crow[j1 : j0 + block] = 0  # padding
            if status[b] != 0:
                cseg[:] = 0
                continue
            scale_exp = xs[b] + elem_shift
            for j in range(seg.size):
                u = np.float64(seg[j]).view(np.int64)
                neg = np.int64(u < 0)  # the sign bit (-0.0 included)
                a = u & 0x7FFFFFFFFFFFFFFF
                k = _pow2_scaled_index(a, scale_exp, mode, neg, is_int, emin, mbits)
                k = min(k, kpos + kdiff * neg)
                cseg[j] = _signed_code(k, neg, is_int, bits)
    return codes


def shared_exp_kernel(x, block, emax, x_lo, x_hi, clip_hi, elem_shift, vtop, n, mode, is_int,
                      bits, kpos, kneg, emin, mbits):  # fmt: skip
    """Shared-exponent block quantization (OCP MX, BFP, the HBQ repo's MX variants).

    Args:
        x: float rows, shape (R, L), C-contiguous (float32 and float64 are read in place);
            each row is split into ``nb = ceil(L / block)`` blocks, the last one zero-padded.
        block: elements per block.
        emax: subtracted from floor(log2 amax) to give the stored exponent X.
        x_lo, x_hi: the range of X; below x_lo clamps, above x_hi clamps if ``clip_hi`` else the
            block gets status 2.
        elem_shift: elements are encoded at scale 2**(X + elem_shift).
        vtop, n, mode, is_int, bits, kpos, kneg, emin, mbits: the element format (the
            reference's kernel parameters; the exact rounding needs neither ``vtop`` nor ``n``)
            and the rounding mode code.

    Returns:
        (uint8 codes (R, nb * block), int64 X (R * nb), uint8 status (R * nb): 0 ok, 1 the
        block holds NaN/Inf, 2 X above x_hi for finite input). Codes are 0 in the padding and
        in blocks with a non-zero status.
    """
    xf, xb = _with_bits(x)
    fm, fb = _float_layout(xb)
    xs, status = _shared_exponents(_block_max_bits(xb, block), fm, fb, emax, x_lo, x_hi,
                                   clip_hi)  # fmt: skip
    codes = _pow2_codes(xf, block, xs, status, elem_shift, mode, is_int, bits, kpos, kneg, emin,
                        mbits)  # fmt: skip
    return codes, xs, status


@njit(cache=True, inline="always")
def _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                           smode, smin_code, zero_code, s_e0, s_off, s_mbits):  # fmt: skip
    """Scale codes by :func:`_scale_index`, with ``smode`` a constant at the call site: its
    branches out of the loop, the loop runs about twice as fast."""
    for b in range(amax_b.size):
        amax = amax_b[b]
        if ratio_f32:
            q = np.float64(np.float32(amax) / den_f32)  # NVFP4: float32 division
            k = _scale_index(q, 1.0, smode, smids, svals, seven, s_e0, s_off, s_mbits)
        else:
            k = _scale_index(amax, divisor, smode, smids, svals, seven, s_e0, s_off, s_mbits)
        code = k + smin_code
        scodes[b] = zero_code if code == 0 and zero_code >= 0 else code


@njit(cache=True)
def _absmax_scale_codes(amax_b, ratio_f32, den_f32, divisor, smids, svals, seven, smode,
                        smin_code, zero_code, s_bits, s_vtop, s_emin, s_mbits, s_e0,
                        s_off):  # fmt: skip
    """Scale code of each block from its amax: see :func:`absmax_scale_kernel`."""
    scodes = np.empty(amax_b.size, dtype=np.int64)
    if ratio_f32 and s_bits:  # NVFP4: the exact float32 ratio rounded on the UE4M3 grid
        ns = svals.size
        for b in range(amax_b.size):
            q = np.float64(np.float32(amax_b[b]) / den_f32)
            k = _exact_quotient_index(q, s_vtop, smode, False, False, s_emin, s_mbits)
            code = min(k, ns - 1) + smin_code
            scodes[b] = zero_code if code == 0 and zero_code >= 0 else code
    elif smode == 0:
        _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                               0, smin_code, zero_code, s_e0, s_off, s_mbits)  # fmt: skip
    elif smode == 1:
        _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                               1, smin_code, zero_code, s_e0, s_off, s_mbits)  # fmt: skip
    elif smode == 2:
        _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                               2, smin_code, zero_code, s_e0, s_off, s_mbits)  # fmt: skip
    elif smode == 3:
        _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                               3, smin_code, zero_code, s_e0, s_off, s_mbits)  # fmt: skip
    else:
        _grid_scale_codes_loop(scodes, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven,
                               4, smin_code, zero_code, s_e0, s_off, s_mbits)  # fmt: skip
    return scodes


@njit(cache=True, inline="always")
def _fill_thresholds(s, emids, mode, tmpb, tmpf, inf_bits, thr):
    """The element thresholds of a block with scale ``s``, as bit patterns of ``|x|``.

    ``thr[m]`` (a positive element) and ``thr[8 + m]`` (a negative one) are the smallest
    ``|x|`` bits that pass midpoint ``m``: ``|x| >= emids[m] * s`` where a tie there goes up
    (RNE at odd ``m``, up to the even index; half_away; half_up for a positive element),
    ``|x| > emids[m] * s`` where it goes down. Unused slots, and all of them for a zero scale
    (every code 0), hold ``inf_bits``, which no finite element reaches.
    """
    for m in range(THRESHOLD_MIDS):
        if m >= emids.size or s == 0.0:
            thr[m] = inf_bits
            thr[THRESHOLD_MIDS + m] = inf_bits
            continue
        t = emids[m] * s  # exact, as in the reference
        ge = _bits_at_least(t, tmpb, tmpf)
        gt = _bits_above(t, tmpb, tmpf, inf_bits)
        if mode == 0:
            thr[m] = ge if m % 2 == 1 else gt
            thr[THRESHOLD_MIDS + m] = thr[m]
        elif mode == 1:
            thr[m] = ge
            thr[THRESHOLD_MIDS + m] = ge
        else:
            thr[m] = ge
            thr[THRESHOLD_MIDS + m] = gt


@njit(cache=True)
def _threshold_table(x, xb, scodes, smin_code, svals, t_scale, emids, mode):
    """:func:`_fill_thresholds` for every scale code that ``scodes`` uses (a block's
    thresholds depend on its scale code alone): shape (number of codes, 16)."""
    fm, fb, _ = _layout(xb)
    inf_bits = np.int64(2 * fb + 1) << fm
    tmpb = np.empty(1, dtype=xb.dtype)
    tmpf = tmpb.view(x.dtype)
    thr = np.empty((svals.size, 2 * THRESHOLD_MIDS), dtype=xb.dtype)
    have = np.zeros(svals.size, dtype=np.bool_)
    for b in range(scodes.size):
        c = scodes[b] - smin_code
        if not have[c]:
            _fill_thresholds(svals[c] * t_scale, emids, mode, tmpb, tmpf, inf_bits, thr[c])
            have[c] = True
    return thr


@njit(cache=True)
def _threshold_codes(xb, block, scodes, smin_code, thr, by_sign, is_int, bits, kpos, kneg):
    """Element codes (uint8, (R, nb * block)) by counting the thresholds ``thr[scode]`` that
    each ``|x|`` (bit patterns ``xb``) reaches: the first eight for every element, or
    (``by_sign``: half_up) those for a positive element and the last eight for a negative
    one."""
    _, _, sgn = _layout(xb)
    abs_mask = _abs_mask(xb)
    R, L = xb.shape
    nb = (L + block - 1) // block
    codes = np.empty((R, nb * block), dtype=np.uint8)
    for r in range(R):
        row = xb[r]
        crow = codes[r]
        for bi in range(nb):
            j0 = bi * block
            j1 = min(j0 + block, L)
            seg = row[j0:j1]
            cseg = crow[j0:j1]
            if j1 - j0 < block:
                crow[j1 : j0 + block] = 0  # padding
            c = scodes[r * nb + bi] - smin_code
            p0, p1, p2, p3 = thr[c, 0], thr[c, 1], thr[c, 2], thr[c, 3]
            p4, p5, p6, p7 = thr[c, 4], thr[c, 5], thr[c, 6], thr[c, 7]
            n0, n1, n2, n3 = thr[c, 8], thr[c, 9], thr[c, 10], thr[c, 11]
            n4, n5, n6, n7 = thr[c, 12], thr[c, 13], thr[c, 14], thr[c, 15]
            if not by_sign:
                for j in range(seg.size):
                    u = seg[j]
                    neg = _ucast(abs_mask, u >> sgn)
                    a = _ucast(abs_mask, u & abs_mask)
                    k = _ucast(abs_mask,
                        _ucast(abs_mask, a >= p0) + _ucast(abs_mask, a >= p1)
                        + _ucast(abs_mask, a >= p2) + _ucast(abs_mask, a >= p3)
                        + _ucast(abs_mask, a >= p4) + _ucast(abs_mask, a >= p5)
                        + _ucast(abs_mask, a >= p6) + _ucast(abs_mask, a >= p7)
                    )  # fmt: skip
                    cseg[j] = _signed_code_narrow(abs_mask, k, neg, kpos, kneg, is_int, bits)
                continue
            for j in range(seg.size):
                u = seg[j]
                neg = _ucast(abs_mask, u >> sgn)
                a = _ucast(abs_mask, u & abs_mask)
                ng = neg != 0
                k = _ucast(abs_mask,
                    _ucast(abs_mask, a >= (n0 if ng else p0))
                    + _ucast(abs_mask, a >= (n1 if ng else p1))
                    + _ucast(abs_mask, a >= (n2 if ng else p2))
                    + _ucast(abs_mask, a >= (n3 if ng else p3))
                    + _ucast(abs_mask, a >= (n4 if ng else p4))
                    + _ucast(abs_mask, a >= (n5 if ng else p5))
                    + _ucast(abs_mask, a >= (n6 if ng else p6))
                    + _ucast(abs_mask, a >= (n7 if ng else p7))
                )  # fmt: skip
                cseg[j] = _signed_code_narrow(abs_mask, k, neg, kpos, kneg, is_int, bits)
    return codes


@njit(cache=True)
def _nearest_codes(x, xb, block, scodes, smin_code, svals, t_scale, vtop, n, mode, is_int, bits,
                   kpos, kneg, emin, mbits):  # fmt: skip
    """Element codes by :func:`_nearest_index` at each block's scale (any element grid)."""
    _, _, sgn = _layout(xb)
    R, L = xb.shape
    nb = (L + block - 1) // block
    codes = np.zeros((R, nb * block), dtype=np.uint8)
    kdiff = kneg - kpos
    for r in range(R):
        for bi in range(nb):
            s = svals[scodes[r * nb + bi] - smin_code] * t_scale
            if s == 0.0:
                continue  # every code 0
            j0 = bi * block
            j1 = min(j0 + block, L)
            xseg = x[r, j0:j1]
            seg = xb[r, j0:j1]
            cseg = codes[r, j0:j1]
            inv = 1.0 / s  # an estimate when s is not a power of two: the fix-up makes it exact
            for j in range(seg.size):
                neg = np.int64(seg[j] >> sgn)  # the sign bit (-0.0 included)
                a = abs(np.float64(xseg[j]))
                k = _nearest_index(a, s, a * inv, vtop, n, mode, neg != 0, is_int, emin, mbits)
                k = min(k, kpos + kdiff * neg)
                cseg[j] = _signed_code(k, neg, is_int, bits)
    return codes


def _grid_binades(vals: npt.NDArray[np.float64], emin: int, mbits: int) -> tuple[int, int]:
    """``(e0, off)`` of :func:`_grid_floor_index` for a minifloat scale grid ``vals`` (smallest
    normal exponent ``emin``, ``mbits`` mantissa bits): a grid that starts with subnormals at 0
    counts from the normal binade ``emin``; one without (E5M3, E8M0) starts at its first value,
    a power of two."""
    if vals[0] == 0.0:
        return emin, 0
    return math.frexp(float(vals[0]))[1] - 1, 1 << mbits


def absmax_scale_kernel(x, block, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven, smode,
                        smin_code, zero_code, t_scale, s_bits, s_vtop, s_emin, s_mbits, emids, vtop,
                        n, mode, is_int, bits, kpos, kneg, emin, mbits):  # fmt: skip
    """Absmax-scaled block quantization (NVFP4, the HBQ repo's NVFP4, INT with a scale format).

    Rows ``x`` (R, L) are split into blocks of ``block`` as in :func:`shared_exp_kernel`. Per
    block (``amax_b`` from :func:`block_amax_kernel`): the scale code is the rounding
    (``smode``) into the scale grid (``smids``, ``svals``, ``seven``; code = index +
    ``smin_code``; a minifloat grid with ``s_mbits`` mantissa bits and smallest normal exponent
    ``s_emin``) of ``float32(amax) / den_f32`` computed in float32 (``ratio_f32``) or of the
    exact ``amax / divisor``; a code 0 becomes ``zero_code`` when that is >= 0 (NVFP4's scale
    1.0); the elements are the rounding of ``x / (scale value * t_scale)``, or all 0 when that
    scale is 0.

    ``s_bits`` (NVFP4's float32 ratio into UE4M3 with a nearest rounding): the ratio is an exact
    value on a minifloat grid (``s_vtop`` the virtual point above its maximum), so it is rounded
    by :func:`_exact_quotient_index`; every other scale by :func:`_scale_index`.

    ``emids`` (float64, the ``n - 1`` midpoints of the element grid, or empty): when it holds
    at most :data:`THRESHOLD_MIDS` midpoints (E2M1, INT4) and the mode is a nearest one, each
    scale code's midpoints become exact thresholds once (:func:`_threshold_table`) and every
    element is rounded by counting the thresholds its ``|x|`` bits reach (branch-free integer
    compares that vectorize). Otherwise :func:`_nearest_index` rounds each element.

    Returns:
        (uint8 element codes (R, nb * block), int64 scale codes (R * nb)).
    """
    xf, xb = _with_bits(x)
    s_e0, s_off = _grid_binades(svals, s_emin, s_mbits)
    scodes = _absmax_scale_codes(amax_b, ratio_f32, den_f32, divisor, smids, svals, seven, smode,
                                 smin_code, zero_code, s_bits, s_vtop, s_emin, s_mbits, s_e0,
                                 s_off)  # fmt: skip
    if 0 < emids.size <= THRESHOLD_MIDS and mode <= 2:
        thr = _threshold_table(xf, xb, scodes, smin_code, svals, t_scale, emids, mode)
        codes = _threshold_codes(xb, block, scodes, smin_code, thr, mode == 2, is_int, bits, kpos,
                                 kneg)  # fmt: skip
    else:
        codes = _nearest_codes(xf, xb, block, scodes, smin_code, svals, t_scale, vtop, n, mode,
                               is_int, bits, kpos, kneg, emin, mbits)  # fmt: skip
    return codes, scodes


@njit(cache=True)
def dequant_kernel(codes, table, scale, block, out):
    """``out[r, j] = table[codes[r, j]] * scale[r * nb + j // block]`` for ``j < out.shape[1]``.

    Args:
        codes: uint8 (R, nb * block).
        table: float64 value of every code.
        scale: float64 (R * nb), one scale per block.
        block: elements per block.
        out: (R, L) output with L <= nb * block (the padding is dropped); float32 or float64.
            The float64 product is exact and is rounded once on the store, as numpy's cast.
    """
    R, L = out.shape
    nb = codes.shape[1] // block
    for r in range(R):
        for bi in range(nb):
            s = scale[r * nb + bi]
            j0 = bi * block
            oseg = out[r, j0 : min(j0 + block, L)]
            cseg = codes[r, j0 : j0 + oseg.size]
            for j in range(oseg.size):
                oseg[j] = table[cseg[j]] * s


__all__ = [
    "MODE_CODES",
    "STATUS_NAN",
    "STATUS_OVERFLOW",
    "THRESHOLD_MIDS",
    "absmax_scale_kernel",
    "block_amax_kernel",
    "dequant_kernel",
    "encode_kernel",
    "shared_exp_kernel",
]
