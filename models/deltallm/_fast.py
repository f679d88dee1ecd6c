"""A numba path of the fixed-point DeltaLLM prefill, equal to :func:`~._attention.attention`.

:func:`attention_fixed_fast` returns the same int16 outputs and the same sparsity counts as the
numpy reference in fixed mode, for every column order and denominator mode (tested): the
Delta-Key encoder is the reference's, the hybrid scores are float64 BLAS products (exact, since
``|S| <= d·127·254 < 2^53``), and the VSSOS online softmax runs lane by lane in one numba loop
per KV head with the reference's integer rules (saturating exponent, exp2 LUT, ``>> 15``
rescales with floor, ``floor(2^40 / ℓ)`` normalisation).

Public: :func:`attention_fixed_fast`, :class:`FastResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt

from ._attention import LANE_LAYOUTS, _check_tau, _head_scale, vector_heads
from ._delta import encode_delta_keys
from ._fixed import EXP2_LUT_Q15, EXP_MAX_Q8, log2_scale
from ._scores import score_regions
from ._vssos import column_order

__all__ = ["FastResult", "attention_fixed_fast", "decode_row_fixed_fast"]


@dataclass(frozen=True)
class FastResult:
    """Output and counts of :func:`attention_fixed_fast`.

    Attributes:
        output: ``[Hq, T, dv]`` int16 Q7.8, as :attr:`AttentionResult.output`.
        delta_sparsity: ρ_K.
        valid_elements, fine_elements, skipped_elements: as :class:`AttentionStats`.
        skipped_columns, visited_columns: (vector, column) steps.
    """

    output: npt.NDArray[np.int16]
    delta_sparsity: float
    valid_elements: int
    fine_elements: int
    skipped_elements: int
    skipped_columns: int
    visited_columns: int


@numba.njit(cache=True)
def _vssos_head(s, valid, order, v, mant, sh, tau_e, full, block, lut, emax, out):  # noqa: PLR0913
    g_n, t_n, _ = s.shape
    dv = v.shape[1]
    nb = order.shape[0]
    lanes = g_n * block
    m = np.zeros(lanes, np.int64)
    den = np.zeros(lanes, np.int64)
    o = np.zeros((lanes, dv), np.int64)
    started = np.zeros(lanes, np.bool_)
    val = np.zeros(lanes, np.bool_)
    p = np.zeros(lanes, np.int64)
    counts = np.zeros(4, np.int64)  # fine, skipped elements, skipped cols, visited cols
    for b in range(nb):
        m[:] = 0
        den[:] = 0
        o[:, :] = 0
        started[:] = False
        for step in range(order.shape[1]):
            j = order[b, step]
            if j < 0:
                break
            any_val = False
            all_small = True
            n_val = 0
            for ln in range(lanes):
                g = ln // block
                i = b * block + ln % block
                ok = i < t_n and valid[i, j]
                val[ln] = ok
                p[ln] = 0
                if not ok:
                    continue
                any_val = True
                n_val += 1
                sc = s[g, i, j]
                if started[ln]:
                    if sc > m[ln]:
                        e = min(((sc - m[ln]) * mant[g]) >> sh[g], emax)
                        n = e >> 8
                        alpha = 0 if n >= 16 else lut[e & 255] >> n
                        den[ln] = (den[ln] * alpha) >> 15
                        for c in range(dv):
                            o[ln, c] = (o[ln, c] * alpha) >> 15
                        m[ln] = sc
                else:
                    m[ln] = sc
                    started[ln] = True
                e = min(((m[ln] - sc) * mant[g]) >> sh[g], emax)
                n = e >> 8
                p[ln] = 0 if n >= 16 else lut[e & 255] >> n
                small = tau_e >= 0 and e >= tau_e
                if small:
                    counts[0] += 1
                else:
                    all_small = False
            if not any_val:
                continue
            counts[3] += 1
            skip = all_small
            if skip:
                counts[1] += n_val
                counts[2] += 1
            for ln in range(lanes):
                if not val[ln]:
                    continue
                if full or not skip:
                    den[ln] += p[ln]
                if not skip:
                    for c in range(dv):
                        o[ln, c] += p[ln] * v[j, c]
        for ln in range(lanes):
            g = ln // block
            i = b * block + ln % block
            if i >= t_n:
                continue
            r = (np.int64(1) << 40) // max(den[ln], 1) if started[ln] else 0
            for c in range(dv):
                y = (o[ln, c] * r) >> 32
                out[g, i, c] = min(max(y, -32768), 32767)
    return counts


def attention_fixed_fast(
    q: npt.NDArray[np.int8],
    k: npt.NDArray[np.int8],
    v: npt.NDArray[np.int8],
    *,
    theta: int,
    window: int,
    tau: float,
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
    query_block: int = 4,
    denom_mode: str = "full",
    order: str = "ascending",
    causal: bool = True,
    lane_layout: str = "group",
) -> FastResult:
    """Fixed-point DeltaLLM prefill (same arguments and outputs as ``attention(mode="fixed")``).

    Args:
        q: ``[Hq, T, d]`` int8. k: ``[Hkv, T, d]`` int8. v: ``[Hkv, T, dv]`` int8.
        theta, window, tau, q_scale, k_scale, delta_mode, refresh_period, n_sink, query_block,
        denom_mode, order, causal, lane_layout: as :func:`~._attention.attention`.

    Returns:
        :class:`FastResult`.

    Raises:
        TypeError: inputs not int8. ValueError: bad shapes or options.
    """
    qa, ka, va = (np.asarray(x) for x in (q, k, v))
    if any(x.dtype != np.int8 or x.ndim != 3 for x in (qa, ka, va)):
        raise TypeError("q, k, v: need 3-D int8 arrays")
    if qa.shape[1:] != ka.shape[1:] or ka.shape[:2] != va.shape[:2] or qa.shape[0] % ka.shape[0]:
        raise ValueError(f"shape mismatch: q {qa.shape}, k {ka.shape}, v {va.shape}")
    _check_tau(tau)
    if denom_mode not in ("full", "kept") or order not in ("ascending", "window_first"):
        raise ValueError(f"denom_mode {denom_mode!r} / order {order!r}: unknown")
    if lane_layout not in LANE_LAYOUTS:
        raise ValueError(f"lane_layout: unknown value {lane_layout!r}; valid: group, head")
    hq, t_n, d = qa.shape
    hkv = ka.shape[0]
    g = hq // hkv
    dk = encode_delta_keys(
        ka, theta=theta, delta_mode=delta_mode, refresh_period=refresh_period, n_sink=n_sink
    )
    valid, exact = score_regions(np.arange(t_n), t_n, window=window, n_sink=n_sink, causal=causal)
    c_head = (
        _head_scale("q_scale", q_scale, hq)
        * np.repeat(_head_scale("k_scale", k_scale, hkv), g)
        * math.log2(math.e)
        / math.sqrt(d)
    )
    enc = [log2_scale(float(c)) for c in c_head]
    mant = np.array([mm for mm, _ in enc], dtype=np.int64)
    shift = np.array([ss for _, ss in enc], dtype=np.int64)
    tau_e = -1 if math.isinf(tau) else math.floor(tau * 256 + 0.5)
    nb = -(-t_n // query_block)
    tok = np.arange(nb * query_block).reshape(nb, query_block)
    orders = np.stack([column_order(tk[tk < t_n], t_n, window=window, n_sink=n_sink,
                                    order=order, causal=causal) for tk in tok])  # fmt: skip
    out = np.zeros((hq, t_n, va.shape[2]), dtype=np.int16)
    lut = np.ascontiguousarray(EXP2_LUT_Q15, dtype=np.int64)
    tot = np.zeros(4, dtype=np.int64)
    hv = vector_heads(lane_layout, g)
    for h in range(hkv):
        qh = qa[h * g : (h + 1) * g].astype(np.float64)
        s_exact = qh @ ka[h].astype(np.float64).T
        s_delta = qh @ dk.keys_hat[h].astype(np.float64).T
        sc = np.where(exact, s_exact, np.where(valid, s_delta, 0.0)).astype(np.int64)
        vh = np.ascontiguousarray(va[h])
        for a in range(0, g, hv):  # one vector group: the KV group, or one query head
            heads = slice(h * g + a, h * g + a + hv)
            tot += _vssos_head(np.ascontiguousarray(sc[a : a + hv]), valid, orders, vh,
                               mant[heads], shift[heads], tau_e, denom_mode == "full",
                               query_block, lut, EXP_MAX_Q8, out[heads])  # fmt: skip
    rest = dk.mask[:, 1:, :]
    return FastResult(
        output=out,
        delta_sparsity=1.0 - float(np.count_nonzero(rest)) / rest.size if rest.size else 0.0,
        valid_elements=int(np.count_nonzero(valid)) * hq,
        fine_elements=int(tot[0]),
        skipped_elements=int(tot[1]),
        skipped_columns=int(tot[2]),
        visited_columns=int(tot[3]),
    )


def decode_row_fixed_fast(
    q: npt.NDArray[np.int8],
    keys: npt.NDArray[np.int8],
    keys_hat: npt.ArrayLike,
    v: npt.NDArray[np.int8],
    *,
    window: int,
    tau: float,
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    n_sink: int = 1,
    denom_mode: str = "full",
    order: str = "ascending",
    lane_layout: str = "group",
) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64]]:
    """One decode row in numba: the newest token ``t = S - 1`` against its ``S`` cached keys.

    The row equals :func:`~._decode.decode_step`'s output for the same cache (and so prefill row
    ``t`` computed with ``query_block=1``): exact scores ``q·k_j`` on the sinks and the window,
    delta scores ``q·k̂_j`` elsewhere, VSSOS with ``P_q = 1`` (``L = G`` lanes in the
    ``"group"`` layout, one lane per vector in ``"head"``), in the same column order.

    Args:
        q: ``[Hq, d]`` int8 query of token ``t``.
        keys: ``[Hkv, S, d]`` int8 full keys (only the sinks and the window are read).
        keys_hat: ``[Hkv, S, d]`` integer Delta-Key reconstructions ``k̂_j``
            (:attr:`~._delta.DeltaKeys.keys_hat` of the cache).
        v: ``[Hkv, S, dv]`` int8 values.
        window, tau, q_scale, k_scale, n_sink, denom_mode, order, lane_layout: as
            :func:`~._attention.attention`.

    Returns:
        ``(y, counts)``: ``y`` ``[Hq, dv]`` int16 Q7.8 and int64 ``[4]`` counts (fine
        elements, skipped elements, skipped columns, visited columns) of the row.

    Raises:
        TypeError: inputs not int8. ValueError: bad shapes or options.
    """
    qa, ka, va = (np.asarray(x) for x in (q, keys, v))
    kh = np.asarray(keys_hat)
    if any(x.dtype != np.int8 for x in (qa, ka, va)) or qa.ndim != 2 or ka.ndim != 3:
        raise TypeError("q [Hq, d], keys and v [Hkv, S, .]: need int8 arrays")
    hq, d = qa.shape
    hkv, s_n, _ = ka.shape
    if kh.shape != ka.shape or va.shape[:2] != ka.shape[:2] or ka.shape[2] != d or hq % hkv:
        raise ValueError(f"shape mismatch: q {qa.shape}, keys {ka.shape}, keys_hat {kh.shape}, "
                         f"v {va.shape}")  # fmt: skip
    _check_tau(tau)
    if lane_layout not in LANE_LAYOUTS or denom_mode not in ("full", "kept"):
        raise ValueError(f"lane_layout {lane_layout!r} / denom_mode {denom_mode!r}: unknown")
    g, t = hq // hkv, s_n - 1
    valid, exact = score_regions([t], s_n, window=window, n_sink=n_sink)
    cols = column_order([t], s_n, window=window, n_sink=n_sink, order=order)[None]
    k_head = np.repeat(_head_scale("k_scale", k_scale, hkv), g)
    c_head = _head_scale("q_scale", q_scale, hq) * k_head * math.log2(math.e) / math.sqrt(d)
    enc = [log2_scale(float(c)) for c in c_head]
    mant = np.array([mm for mm, _ in enc], dtype=np.int64)
    shift = np.array([ss for _, ss in enc], dtype=np.int64)
    tau_e = -1 if math.isinf(tau) else math.floor(tau * 256 + 0.5)
    lut = np.ascontiguousarray(EXP2_LUT_Q15, dtype=np.int64)
    out = np.zeros((hq, 1, va.shape[2]), dtype=np.int16)
    tot = np.zeros(4, dtype=np.int64)
    hv = vector_heads(lane_layout, g)
    for h in range(hkv):
        qh = qa[h * g : (h + 1) * g].astype(np.float64)
        s_ex = qh @ ka[h].astype(np.float64).T
        s_dl = qh @ kh[h].astype(np.float64).T
        sc = np.where(exact, s_ex, s_dl).astype(np.int64)[:, None, :]  # [G, 1, S]
        vh = np.ascontiguousarray(va[h])
        for a in range(0, g, hv):
            heads = slice(h * g + a, h * g + a + hv)
            tot += _vssos_head(np.ascontiguousarray(sc[a : a + hv]), valid, cols, vh,
                               mant[heads], shift[heads], tau_e, denom_mode == "full", 1, lut,
                               EXP_MAX_Q8, out[heads])  # fmt: skip
    return out[:, 0], tot
