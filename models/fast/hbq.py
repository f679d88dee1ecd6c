"""numba kernels for the HBQ quantizer (reference: ``coaccel.models.formats._hbq``).

Two kernels, one per arithmetic:

* :func:`quantize_exact` — exact real-number semantics. Element rounding compares ``|x|`` with
  ``midpoint * S1 * SIG`` (exact float64 products), L1 scales compare ``amax`` with
  ``E5M3 midpoint * divisor``, and SSE comparisons are decided in float64 outside a relative
  margin ``tol``. Inside the margin, candidates with identical dequantised values are an exact
  tie (lowest code / scheme 0 wins); any other near-tie, and any row with a nonzero
  ``|x|`` outside ``[2**-450, 2**450]``, is flagged ``unresolved`` and the caller re-decides that
  row with the numpy reference (exact integer arithmetic). Every decision taken here is
  therefore the exact one, and the result equals the reference bit for bit.
* :func:`quantize_repo` — the HBQ repository's FP16 arithmetic (``rounding="repo_compat"``),
  with FP16 rounding done by :func:`f16_round` on float64 values.

All arrays are C-contiguous float64 / uint8; the Python wrappers allocate the outputs.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from numba import njit

_EXTREME_LO = 2.0**-450
_EXTREME_HI = 2.0**450
_REPO_ADD = float(np.float32(0.5004))
_INV_POW2 = np.array([1.0, 0.5, 0.25])


@njit(cache=True)
def _count_below(thr: npt.NDArray[np.float64], a: float) -> int:
    """Number of entries of the increasing array ``thr`` that are ``< a``."""
    lo = 0
    hi = thr.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if thr[mid] < a:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _count_at_most(thr: npt.NDArray[np.float64], a: float) -> int:
    """Number of entries of the increasing array ``thr`` that are ``<= a``."""
    lo = 0
    hi = thr.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if thr[mid] <= a:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _elem_index(a: float, thr: npt.NDArray[np.float64], rne: bool) -> int:
    """Magnitude index of ``a`` on a grid whose scaled midpoints are ``thr`` (saturating)."""
    n = thr.shape[0]
    if rne:
        k = 0
        for m in range(n):
            k += thr[m] < a
        # Exact tie between indices k and k+1 goes to the even index (the magnitude index is
        # the magnitude code, so its parity is the mantissa LSB).
        if k < n and (k & 1) == 1 and a == thr[k]:
            k += 1
        return k
    k = 0
    for m in range(n):
        k += thr[m] <= a  # ties go up: half away from zero on the magnitude
    return k


@njit(cache=True)
def _elem_index_fast(a, rinv, thr, bucket, q, ycap, rne) -> int:
    """:func:`_elem_index` via a bucket estimate from the float quotient, then an exact fix-up.

    ``bucket[b]`` is the index of every quotient in ``[b/q, (b+1)/q)`` (all midpoints are
    multiples of ``1/q``); the float quotient ``a * rinv`` can only straddle a bucket edge when it
    is within rounding of a midpoint, and the comparisons with the exact products ``thr`` then
    move the index to the exact one.
    """
    y = a * rinv
    if y > ycap:
        y = ycap
    k = bucket[int(y * q)]
    n = thr.shape[0]
    while k > 0 and a < thr[k - 1]:
        k -= 1
    while k < n and thr[k] <= a:
        k += 1
    # Here thr[k-1] <= a < thr[k] (ties went up: half away). RNE: a tie at thr[k-1] goes to the
    # even one of k-1 and k.
    if rne and (k & 1) == 1 and a == thr[k - 1]:
        k -= 1
    return k


@njit(cache=True)
def _steps(thr_c, val_c, rne, tge_c, dval_c):
    """Step tables of one candidate grid, for :func:`_step_index` and :func:`_row_sse_all`.

    Args:
        thr_c: float64 ``(K-1,)`` scaled midpoints ``mid * S1 * SIG`` (increasing, exact).
        val_c: float64 ``(K,)`` scaled magnitudes ``elem * S1 * SIG`` (exact).
        rne: ties to the even code (True) or away from zero (False).
        tge_c: float64 ``(K-1,)`` output: ``|x|`` takes step ``m`` iff ``|x| >= tge_c[m]``.
        dval_c: float64 ``(K-1,)`` output: step sizes ``val_c[m+1] - val_c[m]`` (exact).

    Half away from zero steps at ``|x| >= thr``. Under RNE a tie at midpoint ``m`` goes to the
    even one of codes ``m`` and ``m+1``: up when ``m`` is odd (``>=``), down when ``m`` is even
    (``>``, written ``>= nextafter(thr, inf)``, the same test on float64 values).
    """
    for m in range(thr_c.shape[0]):
        dval_c[m] = val_c[m + 1] - val_c[m]
        tge_c[m] = thr_c[m]
        if rne and (m & 1) == 0:
            tge_c[m] = np.nextafter(thr_c[m], np.inf)


@njit(cache=True)
def _step_index(a: float, tge_c: npt.NDArray[np.float64]) -> int:
    """Magnitude code of ``a = |x|`` on a candidate grid: the number of steps it takes."""
    k = 0
    for m in range(tge_c.shape[0]):
        k += a >= tge_c[m]
    return k


@njit(cache=True)
def _row_sse_all(absr, ub, tge_t, dval_t, hat, sse):
    """SSE of every micro-block of one row for every L2 code of one scheme.

    Args:
        absr: float64 ``(L,)`` magnitudes ``|x|`` of the row.
        ub: micro-block length.
        tge_t: float64 ``(C, K-1)`` step thresholds of the scheme (see below).
        dval_t: float64 ``(C, K-1)`` steps ``val[m+1] - val[m]`` between grid magnitudes.
        hat: float64 ``(L,)`` scratch.
        sse: float64 ``(C, L // ub)`` output, SSE per L2 code and micro-block.

    Branch-free element rounding: the dequantised magnitude is the sum of the steps whose
    threshold ``tge_t[c, m]`` is ``<= |x|``. A step taken on a strict comparison (``|x| > thr``)
    has its threshold moved to the next float64 up, so ``>=`` decides every step. Every partial
    sum is a grid value ``elem * S1 * SIG`` (exact in float64), so each ``|x| - hat`` equals that
    of the indexed grid lookup, and each micro-block SSE is summed in element order as before.
    The loop over elements has no data-dependent branch and vectorises.
    """
    C = tge_t.shape[0]
    n = tge_t.shape[1]
    L = absr.shape[0]
    n_ub = L // ub
    for c in range(C):
        for i in range(L):
            hat[i] = 0.0
        for m in range(n):
            tg = tge_t[c, m]
            dv = dval_t[c, m]
            for i in range(L):
                hat[i] += dv if absr[i] >= tg else 0.0
        for i in range(L):
            d = absr[i] - hat[i]
            hat[i] = d * d
        for j in range(n_ub):
            acc = 0.0
            for i in range(j * ub, (j + 1) * ub):
                acc += hat[i]
            sse[c, j] = acc


@njit(cache=True)
def _same_hat(row, start, ub, thr_a, val_a, thr_b, val_b, rne) -> bool:
    """Whether two candidates dequantise every element of ``row[start:start+ub]`` identically."""
    for i in range(start, start + ub):
        a = abs(row[i])
        if val_a[_elem_index(a, thr_a, rne)] != val_b[_elem_index(a, thr_b, rne)]:
            return False
    return True


# The per-row steps of :func:`_exact_kernel`, inlined into it (numba IR inlining) except the
# rarely reached near-tie check :func:`_same_choices`: called as separate functions they cost
# the kernel about a tenth of its throughput, inlined about 1 % (paired timings of the kernel
# before and after the split).


@njit(cache=True, inline="always")
def _row_magnitudes(row, absr):
    """``|x|`` of one row into ``absr``; returns ``(amax, extreme)``.

    Args:
        row: float64 ``(L,)`` the row.
        absr: float64 ``(L,)`` output, ``|row|``.

    Returns:
        The row's largest magnitude, and whether any nonzero magnitude lies outside
        ``[2**-450, 2**450]`` (where the float64 products of the thresholds could round).
    """
    amax = 0.0
    extreme = False
    for i in range(row.shape[0]):
        a = abs(row[i])
        absr[i] = a
        if a > amax:
            amax = a
        if a != 0.0 and (a < _EXTREME_LO or a > _EXTREME_HI):
            extreme = True
    return amax, extreme


@njit(cache=True, inline="always")
def _scale_index(scale_thr_t, amax, ceil, n_scales) -> int:
    """Index into ``scale_vals`` of one scheme's L1 scale for a block whose ``max |x|`` is ``amax``.

    Args:
        scale_thr_t: float64 ``(n,)`` the scheme's row of ``scale_thr`` (increasing).
        amax: the block's largest magnitude.
        ceil: round the scale up (the first grid value at or above) instead of half-up.
        n_scales: the number of E5M3 values ``G`` (a rounded-up scale saturates at ``G - 1``).
    """
    if ceil:
        return min(_count_below(scale_thr_t, amax), n_scales - 1)
    return _count_at_most(scale_thr_t, amax)


@njit(cache=True, inline="always")
def _scheme_grids(s1, tables_t, elem_mids, elem_vals, rne, thr_t, val_t, tge_t, dval_t):
    """Scaled grids of every L2 code of one scheme at L1 scale ``s1``.

    Args:
        s1: the L1 scale value.
        tables_t: float64 ``(C,)`` the scheme's SIG multipliers.
        elem_mids: float64 ``(K-1,)`` element midpoints. elem_vals: float64 ``(K,)`` magnitudes.
        rne: ties to the even code (True) or away from zero (False).
        thr_t: float64 ``(C, K-1)`` output, midpoints ``mid * S1 * SIG`` (exact).
        val_t: float64 ``(C, K)`` output, magnitudes ``elem * S1 * SIG`` (exact).
        tge_t: float64 ``(C, K-1)`` output, step thresholds (:func:`_steps`).
        dval_t: float64 ``(C, K-1)`` output, step sizes (:func:`_steps`).
    """
    for c in range(tables_t.shape[0]):
        mult = s1 * tables_t[c]
        for k in range(elem_mids.shape[0]):
            thr_t[c, k] = elem_mids[k] * mult
        for k in range(elem_vals.shape[0]):
            val_t[c, k] = elem_vals[k] * mult
        _steps(thr_t[c], val_t[c], rne, tge_t[c], dval_t[c])


@njit(cache=True, inline="always")
def _threshold_l2(row, ub, limit, choice_t):
    """L2 code per micro-block by the threshold rule: 1 iff ``max |x| >= limit`` (``level * S1``).

    Args:
        row: float64 ``(L,)`` the row. ub: micro-block length.
        limit: the threshold, ``level * S1``.
        choice_t: int64 ``(L // ub,)`` output, the L2 code of each micro-block.
    """
    for j in range(choice_t.shape[0]):
        mx = 0.0
        for i in range(j * ub, (j + 1) * ub):
            mx = max(mx, abs(row[i]))
        choice_t[j] = 1 if mx >= limit else 0


@njit(cache=True, inline="always")
def _best_l2(row, ub, sse, thr_t, val_t, rne, tol, choice_t):
    """SSE-optimal L2 code per micro-block of one scheme; returns ``(block SSE, unresolved)``.

    Args:
        row: float64 ``(L,)`` the row. ub: micro-block length.
        sse: float64 ``(C, L // ub)`` SSE per L2 code and micro-block (:func:`_row_sse_all`).
        thr_t: float64 ``(C, K-1)`` scaled midpoints. val_t: float64 ``(C, K)`` scaled
            magnitudes (:func:`_scheme_grids`).
        rne: ties to the even code (True) or away from zero (False).
        tol: relative SSE margin inside which a comparison is not decided in float64.
        choice_t: int64 ``(L // ub,)`` output, the chosen L2 code of each micro-block.

    Returns:
        The sum of the chosen micro-block SSEs, and True when a near-tie between candidates
        that dequantise differently leaves the choice undecided (the row then goes to the
        reference; ``choice_t`` is partly written).
    """
    e = 0.0
    for j in range(choice_t.shape[0]):
        start = j * ub
        best = 0
        fbest = sse[0, j]
        for c in range(1, sse.shape[0]):
            fc = sse[c, j]
            big = max(fc, fbest)
            if big > 0.0 and abs(fc - fbest) <= tol * big:
                # Inside the margin only identical dequantised values are a decided (exact) tie.
                if not _same_hat(row, start, ub, thr_t[c], val_t[c], thr_t[best], val_t[best], rne):
                    return e, True
            elif fc < fbest:
                best = c
                fbest = fc
        choice_t[j] = best
        e += fbest
    return e, False


@njit(cache=True)
def _same_choices(row, ub, choice, thr, val, rne) -> bool:
    """Whether the two schemes' chosen candidates dequantise the whole row identically.

    Args:
        row: float64 ``(L,)`` the row. ub: micro-block length.
        choice: int64 ``(2, L // ub)`` each scheme's L2 codes.
        thr: float64 ``(2, C, K-1)`` scaled midpoints. val: float64 ``(2, C, K)`` magnitudes.
        rne: ties to the even code (True) or away from zero (False).
    """
    for j in range(choice.shape[1]):
        c0 = choice[0, j]
        c1 = choice[1, j]
        if not _same_hat(row, j * ub, ub, thr[0, c0], val[0, c0], thr[1, c1], val[1, c1], rne):
            return False
    return True


@njit(cache=True, inline="always")
def _write_codes(row, absr, ub, choice_w, tge_w, sign_bit, codes_r, l2_r):
    """Element codes and L2 codes of one row under the chosen scheme.

    Args:
        row: float64 ``(L,)`` the row. absr: float64 ``(L,)`` its magnitudes.
        ub: micro-block length.
        choice_w: int64 ``(L // ub,)`` the scheme's L2 code per micro-block.
        tge_w: float64 ``(C, K-1)`` the scheme's step thresholds.
        sign_bit: the element code's sign bit (set for negative nonzero codes).
        codes_r: uint8 ``(L,)`` output, element codes. l2_r: uint8 ``(L // ub,)`` output.
    """
    for j in range(l2_r.shape[0]):
        c = choice_w[j]
        l2_r[j] = c
        tg = tge_w[c]
        for i in range(j * ub, (j + 1) * ub):
            k = _step_index(absr[i], tg)
            if row[i] < 0.0 and k > 0:
                k |= sign_bit
            codes_r[i] = k


@njit(cache=True)
def _exact_kernel(
    x,
    elem_mids,
    elem_vals,
    sign_bit,
    rne,
    tables,
    scale_thr,
    scale_vals,
    ceil,
    ub,
    threshold_rule,
    level,
    tol,
    codes,
    scale_idx,
    l2,
    scheme,
    unresolved,
):
    """Row by row: L1 scale and L2 codes per scheme, the scheme, then the element codes.

    Arguments as :func:`quantize_exact`'s, with its outputs preallocated: ``codes``,
    ``scale_idx`` (int64 index into ``scale_vals``), ``l2``, ``scheme`` and ``unresolved``.
    """
    R, L = x.shape
    T, C = tables.shape
    K = elem_vals.shape[0]
    n_ub = L // ub
    thr = np.empty((T, C, K - 1))
    val = np.empty((T, C, K))
    dval = np.empty((T, C, K - 1))
    tge = np.empty((T, C, K - 1))
    choice = np.zeros((T, n_ub), dtype=np.int64)
    sidx = np.zeros(T, dtype=np.int64)
    s1 = np.zeros(T)
    err = np.zeros(T)
    sse = np.zeros((C, n_ub))
    absr = np.empty(L)
    hat = np.empty(L)
    for r in range(R):
        row = x[r]
        amax, extreme = _row_magnitudes(row, absr)
        if extreme:
            unresolved[r] = True
            continue
        bad = False
        for t in range(T):
            sidx[t] = _scale_index(scale_thr[t], amax, ceil, scale_vals.shape[0])
            s1[t] = scale_vals[sidx[t]]
            _scheme_grids(
                s1[t], tables[t], elem_mids, elem_vals, rne, thr[t], val[t], tge[t], dval[t]
            )
            if threshold_rule:
                _threshold_l2(row, ub, level * s1[t], choice[t])
                err[t] = 0.0
                continue
            _row_sse_all(absr, ub, tge[t], dval[t], hat, sse)
            e, bad = _best_l2(row, ub, sse, thr[t], val[t], rne, tol, choice[t])
            if bad:
                break
            err[t] = e
        if bad:
            unresolved[r] = True
            continue
        win = 0
        if T == 2:
            big = max(err[0], err[1])
            if big > 0.0 and abs(err[1] - err[0]) <= tol * big:
                # Inside the margin only identical dequantised rows are a decided (exact) tie.
                if not _same_choices(row, ub, choice, thr, val, rne):
                    unresolved[r] = True
                    continue
            elif err[1] < err[0]:
                win = 1
        scheme[r] = win
        scale_idx[r] = sidx[win]
        _write_codes(row, absr, ub, choice[win], tge[win], sign_bit, codes[r], l2[r])


def _buckets(mids: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], float]:
    """Bucket table of :func:`_elem_index_fast`: index of each ``[b/q, (b+1)/q)``, and ``q``."""
    q = 1.0
    while np.any(mids * q != np.floor(mids * q)):
        q *= 2.0
    n_b = int(q * (mids[-1] + 1.0)) + 1
    edges = np.arange(n_b, dtype=np.float64) / q
    return np.searchsorted(mids, edges, side="right").astype(np.int64), q


def quantize_exact(
    x: npt.NDArray[np.float64],
    elem_mids: npt.NDArray[np.float64],
    elem_vals: npt.NDArray[np.float64],
    sign_bit: int,
    rne: bool,
    tables: npt.NDArray[np.float64],
    scale_thr: npt.NDArray[np.float64],
    scale_vals: npt.NDArray[np.float64],
    ceil: bool,
    scale_min_code: int,
    ub: int,
    threshold_rule: bool,
    level: float,
    tol: float,
) -> tuple[npt.NDArray, ...]:
    """Exact HBQ quantization of rows, deferring near-ties to the caller.

    Args:
        x: float64 ``(R, L)`` finite values, one L1 block per row.
        elem_mids: float64 ``(K-1,)`` midpoints between consecutive element magnitudes.
        elem_vals: float64 ``(K,)`` element magnitudes, indexed by magnitude code.
        sign_bit: the element code's sign bit (8 for E2M1, 16 for E2M2).
        rne: ties to the even code (True) or away from zero (False).
        tables: float64 ``(T, C)`` SIG multipliers per candidate scheme and L2 code.
        scale_thr: float64 ``(T, n)``: E5M3 midpoints (half-up) or grid values (ceil) times
            each scheme's divisor ``Emax * max(T_t)``.
        scale_vals: float64 ``(G,)`` E5M3 values from the smallest valid code up.
        ceil: round the L1 scale up instead of half-up.
        scale_min_code: E5M3 code of ``scale_vals[0]``.
        ub: micro-block length (``L`` when there is no L2 level).
        threshold_rule: pick L2 code 1 iff ``max |x| >= level * S1`` (single scheme, C == 2).
        level: the threshold level (7.5).
        tol: relative SSE margin inside which a comparison is not decided in float64.

    Returns:
        ``codes`` uint8 ``(R, L)``, ``scales`` uint8 ``(R,)`` E5M3 codes, ``l2`` uint8
        ``(R, L // ub)``, ``scheme`` uint8 ``(R,)``, ``unresolved`` bool ``(R,)`` (rows whose
        outputs are not set and must be recomputed exactly).
    """
    R, L = x.shape
    codes = np.zeros((R, L), dtype=np.uint8)
    scale_idx = np.zeros(R, dtype=np.int64)
    l2 = np.zeros((R, L // ub), dtype=np.uint8)
    scheme = np.zeros(R, dtype=np.uint8)
    unresolved = np.zeros(R, dtype=np.bool_)
    mids = np.ascontiguousarray(elem_mids, dtype=np.float64)
    _exact_kernel(
        np.ascontiguousarray(x, dtype=np.float64),
        mids,
        np.ascontiguousarray(elem_vals, dtype=np.float64),
        np.int64(sign_bit),
        bool(rne),
        np.ascontiguousarray(tables, dtype=np.float64),
        np.ascontiguousarray(scale_thr, dtype=np.float64),
        np.ascontiguousarray(scale_vals, dtype=np.float64),
        bool(ceil),
        np.int64(ub),
        bool(threshold_rule),
        float(level),
        float(tol),
        codes,
        scale_idx,
        l2,
        scheme,
        unresolved,
    )
    scales = (scale_idx + scale_min_code).astype(np.uint8)
    return codes, scales, l2, scheme, unresolved


# -------------------------------------------------------------------------------------------
# repo_compat


@njit(cache=True)
def f16_round(v: float) -> float:
    """Round a float64 to the nearest IEEE binary16 value (ties to even), as float64.

    Subnormals are kept (quantum ``2**-24``); magnitudes ``>= 65520`` become ±Inf; ±0, ±Inf and
    NaN pass through. One rounding of an exact (or float64-rounded) result equals the correctly
    rounded FP16 operation for +, -, *, / of FP16 operands (53 >= 2 * 11 + 2).

    The rounding works on the float64 bit pattern: keep the top 10 fraction bits (fewer for FP16
    subnormals), add half a unit of the dropped part minus one plus the kept LSB (ties to even),
    and let a carry run into the exponent.
    """
    if v == 0.0 or not math.isfinite(v):
        return v
    a = abs(v)
    if a >= 65520.0:
        return math.copysign(math.inf, v)
    bits = np.float64(a).view(np.int64)
    e = (bits >> 52) - 1023
    if e < -24:
        # Below the smallest FP16 subnormal: 0 or 2**-24 (2**-25 itself ties to the even 0).
        return math.copysign(2.0**-24 if a > 2.0**-25 else 0.0, v)
    shift = 42 if e >= -14 else 28 - e  # dropped bits; 28 - e = 42 + (-14 - e)
    # At e = -24 (shift 52) the kept LSB read here is the exponent field's LSB, which is 1 as the
    # implicit bit is: the FP16 value 2**-24 is odd, so a tie rounds up to 2**-23 as RNE wants.
    r = bits + ((np.int64(1) << (shift - 1)) - 1) + ((bits >> shift) & 1)
    r = (r >> shift) << shift
    return math.copysign(np.int64(r).view(np.float64), v)


@njit(cache=True)
def _repo_scale_code(raw: float, ceil: bool) -> int:
    """E5M3 code of the repo's ``quant_scale`` on an FP16 value (clip, then ``fp_quant(5, 3)``)."""
    raw = min(max(raw, 2.0**-14), 61440.0)
    # torch.log2 on FP16 rounds the logarithm to FP16 before the floor.
    ex = np.floor(f16_round(math.log2(raw)))
    ex = min(max(ex, -14.0), 15.0)
    mant = abs((raw / 2.0**ex - 1.0) * 8.0)
    m = np.ceil(mant) if ceil else np.floor(mant + 0.5)
    if m > 7.0 and ex != 15.0:
        ex += 1.0
        m = 0.0
    m = min(m, 7.0)
    return (int(ex) + 15) * 8 + int(m)


@njit(cache=True)
def _repo_elem_mag(v: float, mbits: int) -> int:
    """Magnitude code of the repo's compiled E2M``mbits`` quantiser on an FP16 value.

    The mantissa is rounded as the compiled kernel does it: ``floor(float32(|mant| + 0.5004f))``
    (``|mant| + _REPO_ADD`` is exact in float64, so the cast is the float32 addition).
    """
    a = abs(v)
    if a == 0.0:
        return 0
    shift = float(1 << mbits)
    mant_max = (1 << mbits) - 1
    sub_thr = 1.0 - 2.0 ** -(mbits + 1)
    if a < sub_thr:
        m = int(math.floor(np.float32(a * shift + _REPO_ADD)))
        if m > mant_max:
            return 0  # the repo zeroes an overflowing subnormal mantissa: value 0
        return m
    if a < 1.0:
        return 1 << mbits  # promoted to the smallest normal, 1.0
    e = min((np.float64(a).view(np.int64) >> 52) - 1023, 2)  # floor(log2 a), a >= 1
    mant = (a * _INV_POW2[e] - 1.0) * shift
    m = int(math.floor(np.float32(mant + _REPO_ADD)))
    if m > mant_max and e != 2:
        return (e + 2) << mbits
    return ((e + 1) << mbits) + min(m, mant_max)


@njit(cache=True)
def _repo_kernel(
    x, mbits, mags, sign_bit, tables, divisors, ceil, ub, codes, scale_codes, l2, scheme
):
    R, L = x.shape
    T, C = tables.shape
    n_ub = L // ub
    acc = np.zeros((T, C, n_ub))
    best = np.zeros((T, n_ub), dtype=np.int64)
    sc = np.zeros(T, dtype=np.int64)
    s1 = np.zeros(T)
    err = np.zeros(T)
    for r in range(R):
        row = x[r]
        amax = 0.0
        for i in range(L):
            amax = max(amax, abs(row[i]))
        for t in range(T):
            code = _repo_scale_code(f16_round(amax / divisors[t]), ceil)
            sc[t] = code
            s1[t] = 2.0 ** ((code >> 3) - 15) * (1.0 + (code & 7) / 8.0)
            for c in range(C):
                sig = tables[t, c]
                for j in range(n_ub):
                    s = 0.0
                    for i in range(j * ub, (j + 1) * ub):
                        xi = row[i]
                        v = f16_round(f16_round(xi / s1[t]) / sig)
                        hat = f16_round(f16_round(mags[_repo_elem_mag(v, mbits)] * sig) * s1[t])
                        if xi < 0.0:
                            hat = -hat
                        d = f16_round(xi - hat)
                        s += f16_round(d * d)  # exact: a short sum of FP16 values
                    acc[t, c, j] = s
            e = 0.0
            for j in range(n_ub):
                b = 0
                fb = f16_round(acc[t, 0, j])
                for c in range(1, C):
                    fc = f16_round(acc[t, c, j])
                    if fc < fb:
                        b = c
                        fb = fc
                best[t, j] = b
                e += acc[t, b, j]
            err[t] = f16_round(e)
        win = 1 if T == 2 and err[1] < err[0] else 0
        scheme[r] = win
        scale_codes[r] = sc[win]
        for j in range(n_ub):
            c = best[win, j]
            l2[r, j] = c
            sig = tables[win, c]
            for i in range(j * ub, (j + 1) * ub):
                xi = row[i]
                k = _repo_elem_mag(f16_round(f16_round(xi / s1[win]) / sig), mbits)
                if xi < 0.0 and k > 0:
                    k |= sign_bit
                codes[r, i] = k


def quantize_repo(
    x16: npt.NDArray[np.float64],
    mbits: int,
    mags: npt.NDArray[np.float64],
    sign_bit: int,
    tables: npt.NDArray[np.float64],
    divisors: npt.NDArray[np.float64],
    ceil: bool,
    ub: int,
) -> tuple[npt.NDArray[np.uint8], ...]:
    """HBQ quantization in the HBQ repository's FP16 arithmetic (``rounding="repo_compat"``).

    Args:
        x16: float64 ``(R, L)`` holding FP16 values, one L1 block per row.
        mbits: element mantissa bits (1 for E2M1, 2 for E2M2).
        mags: float64 element magnitudes indexed by magnitude code.
        sign_bit: the element code's sign bit.
        tables: float64 ``(T, C)`` SIG multipliers.
        divisors: float64 ``(T,)`` ``Emax * max(T_t)`` (exact in FP16).
        ceil: the repo's ``use_ceil`` for the L1 scale.
        ub: micro-block length.

    Returns:
        ``codes`` uint8 ``(R, L)``, ``scales`` uint8 ``(R,)`` E5M3 codes, ``l2`` uint8
        ``(R, L // ub)``, ``scheme`` uint8 ``(R,)``.
    """
    R, L = x16.shape
    codes = np.zeros((R, L), dtype=np.uint8)
    scales = np.zeros(R, dtype=np.uint8)
    l2 = np.zeros((R, L // ub), dtype=np.uint8)
    scheme = np.zeros(R, dtype=np.uint8)
    _repo_kernel(
        np.ascontiguousarray(x16, dtype=np.float64),
        np.int64(mbits),
        np.ascontiguousarray(mags, dtype=np.float64),
        np.int64(sign_bit),
        np.ascontiguousarray(tables, dtype=np.float64),
        np.ascontiguousarray(divisors, dtype=np.float64),
        bool(ceil),
        np.int64(ub),
        codes,
        scales,
        l2,
        scheme,
    )
    return codes, scales, l2, scheme


__all__ = ["f16_round", "quantize_exact", "quantize_repo"]
