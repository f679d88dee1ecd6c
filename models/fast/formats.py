"""numba kernels for the element encoders and the block-format hot loops.

Every kernel returns exactly what its numpy reference in :mod:`coaccel.models.formats` returns
(``tests/unit/test_fast_formats.py`` proves it bit for bit on every input class):

* Scale rounding (once per block) repeats :func:`~coaccel.models.formats._elem._round_grid`
  step by step: a binary search on the float quotient, then the exact fix-up against
  ``midpoint * divisor``.
* Element rounding (the hot loop) takes the candidate straight from the float64 exponent and
  mantissa of the quotient (no search, no table), then decides between it and the next code by
  the same exact comparison of ``|x|`` with ``midpoint * scale``. The float32 steps of NVFP4 are
  the same float32 operations.

The block kernels read rows ``(R, n)`` of the caller's float16/32/64 data in place, one block
of ``block`` elements at a time (a ragged tail counts as zero padding), and write codes and
scale codes straight into their outputs; :func:`dequant_kernel` writes the caller's output
dtype directly. No full-size temporary is made, which keeps large tensors from being bound by
memory traffic.

This module holds kernels only: the reference (:mod:`coaccel.models.formats`) validates the
arguments, derives the kernels' format parameters and imports this module lazily, at its
``backend="numba"`` dispatch points (for example ``encode(..., backend="numba")`` runs
:func:`encode_kernel`). It imports nothing of the reference, so the two packages never import
each other.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

MODE_CODES = {"rne": 0, "half_away": 1, "half_up": 2, "ceil": 3, "floor": 4}
"""Integer codes of the rounding modes, as the kernels take them."""

_FLOAT64_MAX = float(np.finfo(np.float64).max)

STATUS_NAN = 1
"""Kernel status bit: a NaN input for a format without a NaN code."""
STATUS_OVERFLOW = 2
"""Kernel status bit: a non-saturating overflow for a format without Inf/NaN codes."""


@njit(cache=True, inline="always")
def _round_index(a, s, mids, vals, even, mode, neg):
    """Index of the grid value that the exact real a/s rounds to: ``_elem._round_grid`` for one
    value (modes 0..4: rne, half_away, half_up, ceil, floor)."""
    n = vals.size
    q = a / s
    if mode <= 2:
        # searchsorted(mids, q, side="left"): the first i with mids[i] >= q.
        lo = 0
        hi = n - 1
        while lo < hi:
            m = (lo + hi) >> 1
            if mids[m] < q:
                lo = m + 1
            else:
                hi = m
        k = lo
        if mode == 0:
            up_tie = even[min(k + 1, n - 1)]
            down_tie = even[max(k - 1, 0)]
        elif mode == 1:
            up_tie = True
            down_tie = False
        else:
            up_tie = not neg
            down_tie = neg
        if k < n - 1:
            h = mids[k] * s
            if a > h or (a == h and up_tie):
                return k + 1
        if k > 0:
            low = mids[k - 1] * s
            if a < low or (a == low and down_tie):
                return k - 1
        return k
    if mode == 3:  # ceil: searchsorted(vals, q, side="left"), capped at n - 1
        lo = 0
        hi = n
        while lo < hi:
            m = (lo + hi) >> 1
            if vals[m] < q:
                lo = m + 1
            else:
                hi = m
        k = min(lo, n - 1)
        if k < n - 1 and a > vals[k] * s:
            return k + 1
        if k > 0 and a <= vals[k - 1] * s:
            return k - 1
        return k
    # floor: searchsorted(vals, q, side="right") - 1, at least 0
    lo = 0
    hi = n
    while lo < hi:
        m = (lo + hi) >> 1
        if vals[m] <= q:
            lo = m + 1
        else:
            hi = m
    k = max(lo - 1, 0)
    if k > 0 and a < vals[k] * s:
        return k - 1
    if k < n - 1 and a >= vals[k + 1] * s:
        return k + 1
    return k


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
def _exact_quotient_index(q, vtop, mode, neg, is_int, emin, mbits):
    """Nearest-rounding magnitude index of ``q`` on an element grid, for an *exact* quotient.

    Used where the scale is a power of two, so that ``q = |x| * 2**-X`` is exact (a quotient
    that underflows float64 is far below the smallest element midpoint and gives 0 either way).
    The rounding is integer arithmetic on q's float64 bit pattern: the significand (with its
    implicit bit) is shifted right by the number of bits below the element grid's quantum at
    q's exponent (``52 - mbits``, plus the distance below ``emin`` in the subnormal range;
    ``52 - e`` for integers), after adding half a quantum (minus one plus the kept LSB for RNE,
    minus one for a negative ``half_up``). A carry runs into the next binade by itself. Equal to
    :func:`_nearest_index` on exact quotients (tested on every input class); about 30% faster.
    """
    q = min(q, vtop)
    b = np.float64(q).view(np.int64)  # q >= 0: the sign bit is 0
    ex = b >> 52
    mant = (b & 0xFFFFFFFFFFFFF) | (np.int64(ex != 0) << 52)
    e = ex - 1023
    if is_int:
        sh = 52 - e
        hi = np.int64(0)
    else:
        sh = 52 - mbits + max(emin - e, 0)
        hi = max(e - emin, 0) << mbits
    # Beyond 62 dropped bits q is below half the smallest quantum: the result is 0 either way,
    # and the cap keeps the shifts and the sum inside int64.
    sh = min(sh, 62)
    half = np.int64(1) << (sh - 1)
    if mode == 0:
        bias = half - 1 + ((mant >> sh) & 1)
    elif mode == 1:
        bias = half
    else:
        bias = half - np.int64(neg)
    return hi + ((mant + bias) >> sh)


THRESHOLD_MIDS = 8
"""Most element-grid midpoints (virtual overflow point included) for which
:func:`absmax_scale_kernel` rounds elements by counting thresholds (E2M1 and INT4 have 8)."""


@njit(cache=True, inline="always")
def _threshold_index(a, t0, t1, t2, t3, t4, t5, t6, t7, mode, neg):
    """Nearest-rounding magnitude index of ``a`` on a grid whose scaled midpoints are the
    increasing thresholds ``t0..t7`` (exact products ``midpoint * scale``; unused ones +inf).

    The index is the number of thresholds that ``a`` passes. At most one threshold can equal
    ``a``; threshold ``t_m`` lies between indices ``m`` and ``m + 1``, so a tie there goes up
    when ``a >= t_m`` counts and down when ``a > t_m`` does: RNE counts ``>=`` at odd ``m``
    (up to the even index), half_away counts ``>=`` everywhere, half_up counts ``>=`` for a
    positive value and ``>`` for a negative one. These are exactly the decisions of
    :func:`_nearest_index`, as eight straight-line compares (sixteen for half_up).
    """
    if mode == 0:
        return (
            np.int32(a > t0)
            + np.int32(a >= t1)
            + np.int32(a > t2)
            + np.int32(a >= t3)
            + np.int32(a > t4)
            + np.int32(a >= t5)
            + np.int32(a > t6)
            + np.int32(a >= t7)
        )
    ge = (
        np.int32(a >= t0)
        + np.int32(a >= t1)
        + np.int32(a >= t2)
        + np.int32(a >= t3)
        + np.int32(a >= t4)
        + np.int32(a >= t5)
        + np.int32(a >= t6)
        + np.int32(a >= t7)
    )
    if mode == 1:
        return ge
    gt = (
        np.int32(a > t0)
        + np.int32(a > t1)
        + np.int32(a > t2)
        + np.int32(a > t3)
        + np.int32(a > t4)
        + np.int32(a > t5)
        + np.int32(a > t6)
        + np.int32(a > t7)
    )
    return gt if neg else ge  # fmt: skip


@njit(cache=True, inline="always")
def _signed_code(k, neg, is_int, bits):
    """Code of magnitude index k (already within range) with the sign ``neg`` (branch-free:
    signs of real data are random, and a mispredicted branch costs more than the arithmetic)."""
    n = np.int64(neg)
    if is_int:
        return (k - 2 * k * n) & ((1 << bits) - 1)
    return k | ((n & np.int64(k != 0)) << (bits - 1))


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


@njit(cache=True)
def shared_exp_kernel(x, block, emax, x_lo, x_hi, clip_hi, elem_shift, vtop, n, mode, is_int,
                      bits, kpos, kneg, emin, mbits):  # fmt: skip
    """Shared-exponent block quantization (OCP MX, BFP, the HBQ repo's MX variants).

    Args:
        x: float16/32/64 rows, shape (R, L), C-contiguous; each row is split into
            ``nb = ceil(L / block)`` blocks, the last one zero-padded.
        block: elements per block.
        emax: subtracted from floor(log2 amax) to give the stored exponent X.
        x_lo, x_hi: the range of X; below x_lo clamps, above x_hi clamps if ``clip_hi`` else the
            block gets status 2.
        elem_shift: elements are encoded at scale 2**(X + elem_shift).
        vtop, n, mode, is_int, bits, kpos, kneg, emin, mbits: the element format (the
            reference's kernel parameters) and the rounding mode code.

    Returns:
        (uint8 codes (R, nb * block), int64 X (R * nb), uint8 status (R * nb): 0 ok, 1 the
        block holds NaN/Inf, 2 X above x_hi for finite input). Codes are 0 in the padding and
        in blocks with a non-zero status.
    """
    R, L = x.shape
    nb = (L + block - 1) // block
    codes = np.zeros((R, nb * block), dtype=np.uint8)
    xs = np.zeros(R * nb, dtype=np.int64)
    status = np.zeros(R * nb, dtype=np.uint8)
    for r in range(R):
        for bi in range(nb):
            b = r * nb + bi
            j0 = bi * block
            j1 = min(j0 + block, L)
            # Per-block slices keep the loops simple enough for LLVM to optimize them well
            # (indexing the 2-D arrays directly runs about three times slower).
            xseg = x[r, j0:j1]
            cseg = codes[r, j0:j1]
            amax = 0.0
            finite = True
            for j in range(xseg.size):  # branch-free, so that LLVM vectorizes it
                av = abs(np.float64(xseg[j]))
                finite &= av <= _FLOAT64_MAX  # False for Inf and NaN
                amax = av if av > amax else amax
            if not finite:
                status[b] = 1
                continue
            if amax == 0.0:
                amax = 2.0**-126  # FP32_MIN_NORMAL, as microxcaling does
            e = math.frexp(amax)[1] - 1 - emax
            if e > x_hi:
                if clip_hi:
                    e = x_hi
                else:
                    xs[b] = e
                    status[b] = 2
                    continue
            if e < x_lo:
                e = x_lo
            xs[b] = e
            s = math.ldexp(1.0, e + elem_shift)
            inv = 1.0 / s  # exact: s is a power of two, and so is every quotient a * inv
            for j in range(xseg.size):
                v = np.float64(xseg[j])
                neg = v.view(np.int64) < 0  # the sign bit (-0.0 included)
                a = abs(v)
                k = _exact_quotient_index(a * inv, vtop, mode, neg, is_int, emin, mbits)
                k = min(k, kneg if neg else kpos)
                cseg[j] = _signed_code(k, neg, is_int, bits)
    return codes, xs, status


@njit(cache=True)
def block_amax_kernel(x, block):
    """Per-block ``max |x|`` of float16/32/64 rows (R, L) split into blocks of ``block``
    (float64, R * ceil(L / block)), and whether every value is finite."""
    R, L = x.shape
    nb = (L + block - 1) // block
    amax = np.zeros(R * nb, dtype=np.float64)
    finite = True
    for r in range(R):
        for bi in range(nb):
            m = 0.0
            xseg = x[r, bi * block : min(bi * block + block, L)]
            for j in range(xseg.size):  # branch-free, so that LLVM vectorizes it
                av = abs(np.float64(xseg[j]))
                finite &= av <= _FLOAT64_MAX  # False for Inf and NaN
                m = av if av > m else m
            amax[r * nb + bi] = m
    return amax, finite


@njit(cache=True)
def absmax_scale_kernel(x, block, amax_b, ratio_f32, den_f32, divisor, smids, svals, seven, smode,
                        smin_code, zero_code, t_scale, s_bits, s_vtop, s_emin, s_mbits, emids, vtop,
                        n, mode, is_int, bits, kpos, kneg, emin, mbits):  # fmt: skip
    """Absmax-scaled block quantization (NVFP4, the HBQ repo's NVFP4, INT with a scale format).

    Rows ``x`` (R, L) are split into blocks of ``block`` as in :func:`shared_exp_kernel`. Per
    block (``amax_b`` from :func:`block_amax_kernel`): the scale code is the rounding
    (``smode``) into the scale grid of ``float32(amax) / den_f32`` computed in float32
    (``ratio_f32``) or of the exact ``amax / divisor``; a code 0 becomes ``zero_code`` when
    that is >= 0 (NVFP4's scale 1.0); the elements are the rounding of
    ``x / (scale value * t_scale)``, or all 0 when that scale is 0.

    ``s_bits`` (NVFP4's float32 ratio into UE4M3 with a nearest rounding): the ratio is an exact
    value on a minifloat grid (``s_vtop``, ``s_emin``, ``s_mbits``, code = index), so it is
    rounded by :func:`_exact_quotient_index` instead of the binary search.

    ``emids`` (float64, the ``n - 1`` midpoints of the element grid, or empty): when it holds
    at most :data:`THRESHOLD_MIDS` midpoints (E2M1, INT4), each block's scale turns them into
    exact thresholds ``emids * s`` once, and every element is rounded by counting the
    thresholds below ``|x|`` (:func:`_threshold_index`) instead of :func:`_nearest_index`:
    branch-free compares that LLVM vectorizes, with the same exact comparisons.

    Returns:
        (uint8 element codes (R, nb * block), int64 scale codes (R * nb)).
    """
    R, L = x.shape
    nb = (L + block - 1) // block
    codes = np.zeros((R, nb * block), dtype=np.uint8)
    scodes = np.zeros(R * nb, dtype=np.int64)
    nm = emids.size
    use_thr = 0 < nm <= THRESHOLD_MIDS and mode <= 2
    # Per row: every block's thresholds (row of +inf: all thresholds unused, codes 0).
    thr = np.full((nb if use_thr else 0, THRESHOLD_MIDS), np.inf)
    for r in range(R):
        if use_thr and ratio_f32 and s_bits:
            # NVFP4: a small loop of its own for the scales, which LLVM compiles tighter
            # (several times faster) than the general block loop below.
            _ratio_scales_row(amax_b[r * nb : (r + 1) * nb], den_f32, s_vtop, smode, s_emin,
                              s_mbits, svals, smin_code, zero_code, t_scale, emids,
                              scodes[r * nb : (r + 1) * nb], thr)  # fmt: skip
            _threshold_row(x[r], codes[r], thr, block, mode, is_int, bits, kpos, kneg)
            continue
        for bi in range(nb):
            b = r * nb + bi
            amax = amax_b[b]
            if ratio_f32:
                q = np.float64(np.float32(amax) / den_f32)
                d = 1.0
            else:
                q = amax
                d = divisor
            if s_bits:
                k = _exact_quotient_index(q, s_vtop, smode, False, False, s_emin, s_mbits)
                code = min(k, svals.size - 1) + smin_code
            else:
                code = _round_index(q, d, smids, svals, seven, smode, False) + smin_code
            if code == 0 and zero_code >= 0:
                code = zero_code
            scodes[b] = code
            s = svals[code - smin_code] * t_scale
            if use_thr:
                # Exact products (a midpoint has few significant bits, as in the reference).
                # A zero scale keeps +inf everywhere, so that every code is 0.
                for m in range(nm):
                    thr[bi, m] = emids[m] * s if s != 0.0 else np.inf
                continue
            if s == 0.0:
                continue
            j0 = bi * block
            xseg = x[r, j0 : min(j0 + block, L)]
            cseg = codes[r, j0 : j0 + xseg.size]
            inv = 1.0 / s  # an estimate when s is not a power of two: the fix-up makes it exact
            for j in range(xseg.size):
                v = np.float64(xseg[j])
                neg = v.view(np.int64) < 0  # the sign bit (-0.0 included)
                a = abs(v)
                k = _nearest_index(a, s, a * inv, vtop, n, mode, neg, is_int, emin, mbits)
                k = min(k, kneg if neg else kpos)
                cseg[j] = _signed_code(k, neg, is_int, bits)
        if use_thr:
            _threshold_row(x[r], codes[r], thr, block, mode, is_int, bits, kpos, kneg)
    return codes, scodes


@njit(cache=True)
def _ratio_scales_row(amax, den_f32, s_vtop, smode, s_emin, s_mbits, svals, smin_code,
                      zero_code, t_scale, emids, scodes, thr):  # fmt: skip
    """NVFP4's scale codes of one row's blocks (``scodes``) and their element thresholds
    (``thr``), as in :func:`absmax_scale_kernel`: the float32 ratio ``amax / den_f32`` rounded
    on the scale's minifloat grid by :func:`_exact_quotient_index`, code 0 replaced by
    ``zero_code`` when that is >= 0, thresholds ``emids * s`` (+inf for a zero scale)."""
    nm = emids.size
    for bi in range(amax.size):
        q = np.float64(np.float32(amax[bi]) / den_f32)
        k = _exact_quotient_index(q, s_vtop, smode, False, False, s_emin, s_mbits)
        code = min(k, svals.size - 1) + smin_code
        if code == 0 and zero_code >= 0:
            code = zero_code
        scodes[bi] = code
        s = svals[code - smin_code] * t_scale
        sx = s if s != 0.0 else np.inf  # a zero scale: no threshold counts, every code is 0
        for m in range(nm):
            thr[bi, m] = emids[m] * sx


@njit(cache=True)
def _threshold_row(xrow, crow, thr, block, mode, is_int, bits, kpos, kneg):
    """Element codes of one row by :func:`_threshold_index`, block ``bi`` against the exact
    thresholds ``thr[bi]`` (one loop per element kind and mode, each free of branches, so that
    LLVM vectorizes it)."""
    L = xrow.size
    for bi in range(thr.shape[0]):
        j0 = bi * block
        xseg = xrow[j0 : min(j0 + block, L)]
        cseg = crow[j0 : j0 + xseg.size]
        t0, t1, t2, t3 = thr[bi, 0], thr[bi, 1], thr[bi, 2], thr[bi, 3]
        t4, t5, t6, t7 = thr[bi, 4], thr[bi, 5], thr[bi, 6], thr[bi, 7]
        if is_int:
            for j in range(xseg.size):
                v = np.float64(xseg[j])
                neg = v < 0.0  # -0.0 needs no sign: its code is 0 either way
                k = _threshold_index(abs(v), t0, t1, t2, t3, t4, t5, t6, t7, mode, neg)
                k = min(k, kpos + (kneg - kpos) * np.int64(neg))
                cseg[j] = _signed_code(k, neg, True, bits)
        elif mode == 0:
            for j in range(xseg.size):
                v = np.float64(xseg[j])
                neg = v < 0.0
                k = _threshold_index(abs(v), t0, t1, t2, t3, t4, t5, t6, t7, 0, neg)
                cseg[j] = _signed_code(min(k, kpos), neg, False, bits)
        else:
            for j in range(xseg.size):
                v = np.float64(xseg[j])
                neg = v < 0.0
                k = _threshold_index(abs(v), t0, t1, t2, t3, t4, t5, t6, t7, mode, neg)
                cseg[j] = _signed_code(min(k, kpos), neg, False, bits)


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
    "absmax_scale_kernel",
    "block_amax_kernel",
    "dequant_kernel",
    "encode_kernel",
    "shared_exp_kernel",
]
