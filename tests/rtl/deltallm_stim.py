"""DeltaLLM stimulus and reference accessors shared by the ``tb_dl_*`` testbenches.

Everything here is seeded and pure (no cocotb): key/query/value sequences of the classes the
testbenches cover (random walks that give realistic delta sparsity, uniform noise, constant rows
whose deltas are all zero, saturating ±127/−128 rows), and :func:`vssos_steps`, a step-by-step
view of the reference's VSSOS kernel (``coaccel.models.deltallm._vssos``) that exposes the
per-column intermediates the RTL produces (running max, exponent, p, α, ℓ, skip). It is built from
the reference's own units (``exp2_neg_q15``, ``EXP_MAX_Q8``) and checked against the reference's
final outputs by ``tests/unit/test_deltallm_rtl_stim.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from coaccel.models.deltallm import EXP_MAX_Q8, exp2_neg_q15

KEY_CLASSES = ("walk", "uniform", "constant", "saturate", "sparse_steps")
"""Key-sequence classes: random walk (step ±0..3), uniform int8, one constant row repeated
(every delta after row 0 is zero), rows at the int8 extremes, rare large jumps."""


def key_sequence(rng: np.random.Generator, kind: str, t_n: int, d: int) -> np.ndarray:
    """One key sequence ``[t_n, d]`` int8 of a class in :data:`KEY_CLASSES`."""
    if kind == "walk":
        steps = rng.integers(-3, 4, (t_n, d))
        k = np.cumsum(steps, axis=0) + rng.integers(-60, 61, d)
        return np.clip(k, -128, 127).astype(np.int8)
    if kind == "uniform":
        return rng.integers(-128, 128, (t_n, d)).astype(np.int8)
    if kind == "constant":
        return np.repeat(rng.integers(-128, 128, (1, d)), t_n, axis=0).astype(np.int8)
    if kind == "saturate":
        return rng.choice(np.array([-128, -127, 127], dtype=np.int8), (t_n, d))
    if kind == "sparse_steps":
        jump = rng.random((t_n, d)) < 0.1
        k = np.cumsum(np.where(jump, rng.integers(-100, 101, (t_n, d)), 0), axis=0)
        return np.clip(k, -128, 127).astype(np.int8)
    raise ValueError(f"kind={kind!r}; valid: {', '.join(KEY_CLASSES)}")


@dataclass(frozen=True)
class VssosSteps:
    """Per-step intermediates of one VSSOS vector (``n`` steps, ``L`` lanes, ``dv`` columns).

    Attributes:
        m: ``[n, L]`` running max after the step (int64).
        alpha: ``[n, L]`` rescale factor of the step (32768 where the max did not grow).
        e: ``[n, L]`` exponent ``E`` (0 on invalid lanes).
        p: ``[n, L]`` probability ``p`` (0 on invalid lanes).
        small: ``[n, L]`` bool, ``E >= τ_E`` on a valid lane.
        skip: ``[n]`` bool, the column skip decision.
        den: ``[n, L]`` denominator ``ℓ`` after the step.
        o: ``[L, dv]`` output accumulator after the last step.
        started: ``[L]`` bool, the lane saw a valid column.
    """

    m: np.ndarray
    alpha: np.ndarray
    e: np.ndarray
    p: np.ndarray
    small: np.ndarray
    skip: np.ndarray
    den: np.ndarray
    o: np.ndarray
    started: np.ndarray


def vssos_steps(
    scores: np.ndarray,
    valid: np.ndarray,
    v: np.ndarray,
    mant: np.ndarray,
    sh: np.ndarray,
    tau_e: int | None,
    denom_mode: str = "full",
) -> VssosSteps:
    """The fixed-point VSSOS recurrence of one vector, step by step.

    Same operations, in the same order, as ``_online_softmax`` in fixed mode for one vector.

    Args:
        scores: ``[n, L]`` int64 scores of the visited columns, in processing order.
        valid: ``[n, L]`` bool valid (lane, step) pairs.
        v: ``[n, dv]`` int8 value rows of the visited columns.
        mant: ``[L]`` int64 log2-scale mantissas ``C``.
        sh: ``[L]`` int64 shifts.
        tau_e: skip threshold on ``E`` (None: never skip).
        denom_mode: ``"full"`` or ``"kept"``.

    Returns:
        The :class:`VssosSteps`.
    """
    n, lanes = scores.shape
    dv = v.shape[1]

    def expo(diff: np.ndarray) -> np.ndarray:
        return np.minimum((diff * mant) >> sh, EXP_MAX_Q8)

    m = np.zeros(lanes, dtype=np.int64)
    den = np.zeros(lanes, dtype=np.int64)
    o = np.zeros((lanes, dv), dtype=np.int64)
    started = np.zeros(lanes, dtype=bool)
    out = {k: np.zeros((n, lanes), dtype=np.int64) for k in ("m", "alpha", "e", "p", "den")}
    small_all = np.zeros((n, lanes), dtype=bool)
    skip_all = np.zeros(n, dtype=bool)
    for t in range(n):
        s, val = scores[t].astype(np.int64), valid[t]
        m_new = np.where(val, np.where(started, np.maximum(m, s), s), m)
        grow = val & started & (m_new > m)
        alpha = exp2_neg_q15(np.where(grow, expo(m_new - m), 0))
        den = np.where(grow, (den * alpha) >> 15, den)
        o = np.where(grow[:, None], (o * alpha[:, None]) >> 15, o)
        m, started = m_new, started | val
        e = np.where(val, expo(m - s), 0)
        p = np.where(val, exp2_neg_q15(e), 0)
        small = val & (e >= tau_e) if tau_e is not None else np.zeros(lanes, dtype=bool)
        skip = bool(val.any() and np.all(small | ~val))
        keep = val & (not skip)
        den = den + (p if denom_mode == "full" else np.where(keep, p, 0))
        o = o + np.where(keep[:, None], p[:, None] * v[t].astype(np.int64)[None, :], 0)
        for key, arr in (("m", m), ("alpha", alpha), ("e", e), ("p", p), ("den", den)):
            out[key][t] = arr
        small_all[t], skip_all[t] = small, skip
    return VssosSteps(
        m=out["m"],
        alpha=out["alpha"],
        e=out["e"],
        p=out["p"],
        small=small_all,
        skip=skip_all,
        den=out["den"],
        o=o,
        started=started,
    )


def normalise(o: np.ndarray, den: np.ndarray, started: np.ndarray) -> np.ndarray:
    """The reference's final scaling: ``clamp_int16((o·floor(2^40/ℓ)) >> 32)``; 0 for lanes
    that never started. ``o`` ``[L, dv]``, ``den`` ``[L]`` → int16 ``[L, dv]``."""
    recip = np.where(started, (np.int64(1) << 40) // np.maximum(den, 1), 0)
    return np.clip((o * recip[:, None]) >> 32, -32768, 32767).astype(np.int16)


def tau_q8(tau: float) -> int | None:
    """``τ_E = floor(256·τ + 0.5)`` as the reference computes it (None for ``math.inf``)."""
    return None if math.isinf(tau) else math.floor(tau * 256 + 0.5)


@dataclass(frozen=True)
class BlockCase:
    """One query block of one KV head, as the hardware sees it, with the reference's results.

    Lane ``g·P_q + p`` is query head ``g`` of the group and token ``i0 + p`` (lanes past the
    last token are padding and never valid). Columns are ``0 .. i_last`` ascending.

    Attributes:
        q: ``[L, d]`` int8 lane queries (zeros on padding lanes).
        k: ``[T, d]`` int8 keys, ``v``: ``[T, dv]`` int8 values.
        i0: first query token; ``tokens``: ``[L]`` token of each lane (-1 = padding).
        scores: ``[n_col, L]`` int64 hybrid scores, ``valid`` / ``exact``: ``[n_col, L]`` bool.
        mant, sh: ``[L]`` int64 log2 scale per lane; ``tau_e``: int or None; ``denom_mode``.
        theta, window: Delta-Key threshold and exact window; ``delta_mode``.
        mask: ``[T, d]`` bool Delta-Key bitmask, ``deltas``: ``[T, d]`` int64.
        skipped: ``[n_col]`` bool, the reference's column skip decisions.
        output: ``[L, dv]`` int16 Q7.8, the reference's attention output of every lane.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    i0: int
    tokens: np.ndarray
    scores: np.ndarray
    valid: np.ndarray
    exact: np.ndarray
    mant: np.ndarray
    sh: np.ndarray
    tau_e: int | None
    denom_mode: str
    theta: int
    window: int
    delta_mode: str
    mask: np.ndarray
    deltas: np.ndarray
    skipped: np.ndarray
    output: np.ndarray


def attention_blocks(
    rng: np.random.Generator,
    *,
    d: int,
    t_n: int,
    g: int,
    p_q: int,
    theta: int,
    window: int,
    tau: float,
    key_kind: str = "walk",
    denom_mode: str = "full",
    delta_mode: str = "memory",
    q_scale: float | None = None,
) -> list[BlockCase]:
    """Run ``coaccel.models.deltallm.attention`` on one seeded KV head and cut it into blocks.

    Args:
        rng: seeded generator.
        d: head dimension (q, k and v).
        t_n: tokens.
        g: query heads per KV head (GQA group).
        p_q: query tokens per block; ``L = g·p_q`` lanes.
        theta, window, tau: the DeltaLLM parameters.
        key_kind: key class of :data:`KEY_CLASSES`.
        denom_mode, delta_mode: reference options.
        q_scale: the query scale (default: random, a spread of softmax sharpness).

    Returns:
        One :class:`BlockCase` per query block.
    """
    from coaccel.models.deltallm import attention, log2_scale

    k = key_sequence(rng, key_kind, t_n, d)
    q = rng.integers(-127, 128, (g, t_n, d)).astype(np.int8)
    v = rng.integers(-128, 128, (1, t_n, d)).astype(np.int8)
    qs = q_scale if q_scale is not None else float(rng.choice([0.002, 0.01, 0.03, 0.1]))
    res = attention(
        q,
        k[None],
        v,
        theta=theta,
        window=window,
        tau=tau,
        q_scale=qs * (1 + np.arange(g)) / g,
        k_scale=0.05,
        query_block=p_q,
        denom_mode=denom_mode,
        delta_mode=delta_mode,
    )
    c_head = qs * (1 + np.arange(g)) / g * 0.05 * math.log2(math.e) / math.sqrt(d)
    enc = [log2_scale(float(c)) for c in c_head]
    lanes = g * p_q
    out = []
    for i0 in range(0, t_n, p_q):
        tokens = np.array([i0 + p if i0 + p < t_n else -1 for _ in range(g) for p in range(p_q)])
        heads = np.repeat(np.arange(g), p_q)
        i_last = int(tokens.max())
        n_col = i_last + 1
        tk = np.maximum(tokens, 0)
        cols = np.arange(n_col)
        valid = (cols[:, None] <= tokens[None, :]) & (tokens[None, :] >= 0)
        scores = np.where(valid, res.scores[heads[None, :], tk[None, :], cols[:, None]], 0)
        exact = valid & res.exact[tk[None, :], cols[:, None]]
        skipped = (res.skipped[heads[None, :], tk[None, :], cols[:, None]] & valid).any(axis=1)
        output = np.where(tokens[:, None] >= 0, res.output[heads, tk], 0).astype(np.int16)
        qa = np.where(tokens[:, None] >= 0, q[heads, tk], 0).astype(np.int8)
        out.append(
            BlockCase(
                q=qa,
                k=k,
                v=v[0],
                i0=i0,
                tokens=tokens,
                scores=scores.astype(np.int64),
                valid=valid,
                exact=exact,
                mant=np.array([enc[h][0] for h in heads], dtype=np.int64),
                sh=np.array([enc[h][1] for h in heads], dtype=np.int64),
                tau_e=tau_q8(tau),
                denom_mode=denom_mode,
                theta=theta,
                window=window,
                delta_mode=delta_mode,
                mask=res.delta_keys.mask[0],
                deltas=res.delta_keys.deltas[0].astype(np.int64),
                skipped=skipped,
                output=output,
            )
        )
        assert lanes == len(tokens)
    return out
