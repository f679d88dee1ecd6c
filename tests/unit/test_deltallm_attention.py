"""DeltaLLM attention: hybrid scores, VSSOS and decode against oracles written here."""

import math

import numpy as np
import pytest

from coaccel.models import deltallm as dl

LOG2E = math.log2(math.e)


def _data(seed, hq=4, hkv=2, t=21, d=8, dv=8, step=8):
    """Seeded int8 q/k/v; keys drift along the sequence like neighbouring post-RoPE keys."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-127, 128, size=(hq, t, d), dtype=np.int8)
    walk = np.cumsum(rng.integers(-step, step + 1, size=(hkv, t, d)), axis=1)
    k = np.clip(walk + rng.integers(-60, 61, size=(hkv, 1, d)), -127, 127).astype(np.int8)
    v = rng.integers(-127, 128, size=(hkv, t, dv), dtype=np.int8)
    return q, k, v


def _k_hat(keys, theta):
    """Memory-form reconstruction, one token at a time over all (head, channel) elements."""
    mem = keys[:, 0].astype(np.int64)
    out = [mem]
    for t in range(1, keys.shape[1]):
        e = keys[:, t].astype(np.int64) - mem
        mem = np.where(np.abs(e) >= theta, keys[:, t], mem)
        out.append(mem)
    return np.stack(out, axis=1)


def _scores_oracle(q, k, theta, window, n_sink=1):
    """Scalar hybrid-score rule: exact for j < n_sink or i - j < W, else q·k̂; 0 if masked."""
    hq, t_n, _ = q.shape
    g = hq // k.shape[0]
    kh = _k_hat(k, theta)
    s = np.zeros((hq, t_n, t_n), dtype=np.int64)
    for h in range(hq):
        for i in range(t_n):
            for j in range(i + 1):
                key = k[h // g, j] if (j < n_sink or i - j < window) else kh[h // g, j]
                s[h, i, j] = int(np.dot(q[h, i].astype(np.int64), key.astype(np.int64)))
    return s


def _lut(f):
    return math.floor(32768 * 2 ** (-f / 256) + 0.5)


LUT = [_lut(f) for f in range(256)]


def _exp2(e):
    return 0 if e >> 8 >= 16 else LUT[e & 255] >> (e >> 8)


def _mant_shift(c):
    for sh in range(0, 200):
        mant = math.floor(c * 2 ** (sh + 8) + 0.5)
        if 2**23 <= mant < 2**24:
            return mant, sh
    raise AssertionError(c)


def _columns(tokens, window, n_sink, order):
    last = max(tokens)
    if order == "ascending":
        return list(range(last + 1))
    sinks = [j for j in range(min(n_sink, last + 1))]
    near = [j for j in range(n_sink, last + 1) if any(0 <= i - j < window for i in tokens)]
    return sinks + near + [j for j in range(n_sink, last + 1) if j not in near]


def _vssos_oracle(s, v, c_head, hkv, block, tau, denom, order, window, n_sink=1):
    """Scalar fixed-point VSSOS (Python ints): returns int16 output [Hq, T, dv] and skip mask."""
    hq, t_n, _ = s.shape
    g = hq // hkv
    tau_e = None if math.isinf(tau) else math.floor(tau * 256 + 0.5)
    y = np.zeros((hq, t_n, v.shape[2]), dtype=np.int64)
    skipped = np.zeros(s.shape, dtype=bool)
    for hk in range(hkv):
        for b0 in range(0, t_n, block):
            tokens = list(range(b0, min(t_n, b0 + block)))
            lanes = [(hk * g + gg, i) for gg in range(g) for i in tokens]
            st = {ln: [None, 0, [0] * v.shape[2]] for ln in lanes}
            for j in _columns(tokens, window, n_sink, order):
                live = [ln for ln in lanes if j <= ln[1]]
                es = {}
                for h, i in live:
                    m, den, o = st[(h, i)]
                    mant, sh = _mant_shift(c_head[h])
                    sc = int(s[h, i, j])
                    if m is None:
                        m = sc
                    elif sc > m:
                        a = _exp2(min(((sc - m) * mant) >> sh, 4095))
                        den, o, m = (den * a) >> 15, [(x * a) >> 15 for x in o], sc
                    es[(h, i)] = min(((m - sc) * mant) >> sh, 4095)
                    st[(h, i)] = [m, den, o]
                skip = bool(live) and tau_e is not None and all(e >= tau_e for e in es.values())
                for h, i in live:
                    m, den, o = st[(h, i)]
                    p = _exp2(es[(h, i)])
                    if denom == "full" or not skip:
                        den += p
                    if not skip:
                        o = [x + p * int(v[hk, j, c]) for c, x in enumerate(o)]
                    st[(h, i)] = [m, den, o]
                    skipped[h, i, j] = skip
            for (h, i), (_, den, o) in st.items():
                r = (1 << 40) // den
                y[h, i] = [min(max((x * r) >> 32, -32768), 32767) for x in o]
    return y.astype(np.int16), skipped


def _dense_float(q, k, v, c_nat, causal=True):
    """Dense float64 softmax attention with GQA; c_nat multiplies the scores before exp."""
    g = q.shape[0] // k.shape[0]
    kk, vv = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    s = np.einsum("htd,hsd->hts", q, kk) * np.asarray(c_nat).reshape(-1, 1, 1)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=2, keepdims=True))
    return np.einsum("hts,hsd->htd", w / w.sum(axis=2, keepdims=True), vv)


SCALES = dict(q_scale=np.array([0.093, 0.129, 0.111, 0.156]), k_scale=np.array([0.02, 0.025]))


def _c_head(d=8):
    ks = np.repeat(SCALES["k_scale"], 2)
    return [float(x) for x in SCALES["q_scale"] * ks * LOG2E / math.sqrt(d)]


# ---------------------------------------------------------------- scores


@pytest.mark.parametrize("theta,window", [(0, 1), (3, 1), (6, 4), (12, 3), (6, 30)])
def test_hybrid_scores_match_oracle_and_chain(theta, window):
    q, k, _ = _data(theta + window)
    dk = dl.encode_delta_keys(k, theta=theta)
    direct, valid, exact = dl.hybrid_scores(q, k, dk, window=window)
    chain, _, _ = dl.hybrid_scores(q, k, dk, window=window, delta_eval="chain")
    assert direct.dtype == np.int64
    assert np.array_equal(direct, _scores_oracle(q, k, theta, window))
    assert np.array_equal(chain, direct)
    assert np.array_equal(valid, np.tril(np.ones((21, 21), dtype=bool)))
    delta_pairs = valid & ~exact
    assert not delta_pairs[:, 0].any() and not np.diagonal(delta_pairs).any()


def test_delta_chain_equals_q_dot_k_hat_everywhere():
    q, k, _ = _data(8, t=30)
    dk = dl.encode_delta_keys(k, theta=9)
    want = np.einsum("htd,hsd->hts", q.astype(np.int64), np.repeat(_k_hat(k, 9), 2, axis=0))
    assert np.array_equal(dl.delta_chain_scores(q, dk), want)


def test_score_regions_with_sinks_and_noncausal():
    valid, exact = dl.score_regions(np.arange(6), 6, window=2, n_sink=2)
    for i in range(6):
        for j in range(6):
            assert valid[i, j] == (j <= i)
            assert exact[i, j] == (j <= i and (j < 2 or i - j < 2))
    valid, exact = dl.score_regions(np.arange(6), 6, window=2, causal=False)
    assert valid.all()
    assert exact[1, 2] and exact[3, 2] and not exact[4, 2] and exact[4, 0]


# ---------------------------------------------------------------- fixed-point VSSOS


@pytest.mark.parametrize("theta", [0, 1])
@pytest.mark.parametrize("window", [1, 5])
def test_exact_keys_no_skip_equal_dense_integer_attention(theta, window):
    q, k, v = _data(20 + theta)
    res = dl.attention(q, k, v, theta=theta, window=window, tau=math.inf, **SCALES)
    dense = np.einsum("htd,hsd->hts", q.astype(np.int64), np.repeat(k, 2, axis=0).astype(np.int64))
    dense = np.where(np.tril(np.ones((21, 21), dtype=bool)), dense, 0)
    want, skipped = _vssos_oracle(dense, v, _c_head(), 2, 4, math.inf, "full", "ascending", 21)
    assert res.output.dtype == np.int16
    assert np.array_equal(res.output, want)
    assert not skipped.any() and res.stats.skipped_columns == 0


@pytest.mark.parametrize("theta", [3, 10, 40])
def test_window_covering_the_prompt_equals_dense(theta):
    q, k, v = _data(30 + theta)
    res = dl.attention(q, k, v, theta=theta, window=21, tau=2, **SCALES)
    dense = np.einsum("htd,hsd->hts", q.astype(np.int64), np.repeat(k, 2, axis=0).astype(np.int64))
    dense = np.where(np.tril(np.ones((21, 21), dtype=bool)), dense, 0)
    want, skipped = _vssos_oracle(dense, v, _c_head(), 2, 4, 2, "full", "ascending", 21)
    assert res.delta_keys.sparsity > 0 and skipped.any()
    assert np.array_equal(res.output, want)
    assert np.array_equal(res.skipped, skipped)


@pytest.mark.parametrize(
    "theta,window,tau,denom,order,block",
    [
        (4, 3, 2.0, "full", "ascending", 4),
        (4, 3, 2.0, "kept", "ascending", 4),
        (8, 2, 1.5, "full", "window_first", 4),
        (8, 5, 3.0, "kept", "window_first", 3),
        (2, 1, 2.5, "full", "ascending", 1),
        (6, 4, 1.0, "kept", "window_first", 2),
    ],
)
def test_vssos_matches_scalar_oracle(theta, window, tau, denom, order, block):
    q, k, v = _data(theta * 10 + window)
    res = dl.attention(
        q, k, v, theta=theta, window=window, tau=tau, denom_mode=denom, order=order,
        query_block=block, **SCALES,
    )  # fmt: skip
    s = _scores_oracle(q, k, theta, window)
    want, skipped = _vssos_oracle(s, v, _c_head(), 2, block, tau, denom, order, window)
    assert np.array_equal(res.output, want)
    assert np.array_equal(res.skipped, skipped)
    assert skipped.any() and not skipped.all()
    assert res.stats.skipped_elements == int(skipped.sum())


def test_skipping_happens_and_is_structured():
    q, k, v = _data(3, t=32)
    res = dl.attention(q, k, v, theta=4, window=2, tau=1.0, **SCALES)
    st = res.stats
    assert st.skipped_columns > 0 and st.structured_sparsity > 0
    # every skipped element was also fine-grained sparse: ρ_S <= ρ_fine
    assert not (res.skipped & ~res.fine).any()
    assert st.structured_sparsity <= st.fine_sparsity
    assert st.valid_elements == 4 * 32 * 33 // 2
    assert st.fine_elements == int(res.fine.sum())
    assert st.structured_sparsity == st.skipped_elements / st.valid_elements
    assert st.fine_sparsity == st.fine_elements / st.valid_elements
    # a skipped column is skipped for every lane of its vector (query heads of a group)
    assert np.array_equal(res.skipped[0], res.skipped[1])


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("order", ["ascending", "window_first"])
def test_skipped_elements_are_below_tau_of_final_max(tau, order):
    q, k, v = _data(int(tau * 8), t=28)
    res = dl.attention(q, k, v, theta=5, window=3, tau=tau, order=order, **SCALES)
    s = np.where(res.valid, res.scores, np.iinfo(np.int64).min)
    row_max = s.max(axis=2)
    tau_e = math.floor(tau * 256 + 0.5)
    c = _c_head()
    for h, i, j in zip(*np.nonzero(res.skipped), strict=True):
        mant, sh = _mant_shift(c[h])
        e_final = min(((int(row_max[h, i]) - int(res.scores[h, i, j])) * mant) >> sh, 4095)
        assert e_final >= tau_e
        assert _exp2(e_final) <= _exp2(tau_e)
        assert (row_max[h, i] - res.scores[h, i, j]) * c[h] >= tau - 1 / 256


# ---------------------------------------------------------------- float mode


def test_float_mode_no_delta_no_skip_equals_dense_softmax():
    rng = np.random.default_rng(9)
    q, k, v = rng.normal(size=(4, 19, 8)), rng.normal(size=(2, 19, 8)), rng.normal(size=(2, 19, 6))
    res = dl.attention(q, k, v, theta=0.0, window=1, tau=math.inf, mode="float")
    want = _dense_float(q, k, v, 1 / math.sqrt(8))
    assert res.output.dtype == np.float64
    np.testing.assert_allclose(res.output, want, rtol=1e-12, atol=1e-12)
    res = dl.attention(q, k, v, theta=0.7, window=19, tau=math.inf, mode="float", causal=False)
    np.testing.assert_allclose(res.output, _dense_float(q, k, v, 1 / math.sqrt(8), False),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


def test_float_mode_skips_below_tau_of_final_max():
    rng = np.random.default_rng(10)
    q, k, v = (
        rng.normal(size=(4, 30, 8)) * 3,
        rng.normal(size=(2, 30, 8)),
        rng.normal(size=(2, 30, 8)),
    )
    res = dl.attention(q, k, v, theta=0.4, window=2, tau=3.0, mode="float")
    assert res.stats.skipped_elements > 0
    s = np.where(res.valid, res.scores, -np.inf)
    ratio = np.exp((s - s.max(axis=2, keepdims=True)) / math.sqrt(8))
    assert np.all(ratio[res.skipped] <= 2.0**-3)
    assert res.stats.structured_sparsity <= res.stats.fine_sparsity


def test_float_mode_tracks_fixed_mode_structure():
    q, k, v = _data(41)
    fixed = dl.attention(q, k, v, theta=4, window=3, tau=math.inf, **SCALES)
    flt = dl.attention(q.astype(float), k.astype(float), v.astype(float), theta=4.0, window=3,
                       tau=math.inf, mode="float", **SCALES)  # fmt: skip
    assert np.array_equal(flt.scores, fixed.scores.astype(float))
    assert flt.stats.delta_sparsity == fixed.stats.delta_sparsity


# ---------------------------------------------------------------- GQA and decode


def test_gqa_equals_repeated_kv_heads_without_skipping():
    q, k, v = _data(50)
    kw = dict(theta=5, window=3, tau=math.inf, q_scale=0.01, k_scale=0.02)
    gqa = dl.attention(q, k, v, **kw)
    mha = dl.attention(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0), **kw)
    assert np.array_equal(gqa.output, mha.output)


def _decode_all(q, k, v, **kw):
    hq, t_n, d = q.shape
    state = dl.init_decode(hq, k.shape[0], d, v.shape[2], **kw)
    rows = []
    for t in range(t_n):
        y, state = dl.decode_step(state, q[:, t], k[:, t], v[:, t])
        rows.append(y)
    return np.stack(rows, axis=1), state


@pytest.mark.parametrize(
    "opts",
    [
        dict(theta=4, window=3, tau=1.5),
        dict(theta=7, window=2, tau=1.0, denom_mode="kept", order="window_first"),
        dict(theta=3, window=4, tau=2.0, delta_mode="naive", refresh_period=6, n_sink=2),
        dict(theta=0, window=1, tau=math.inf),
    ],
)
def test_decode_row_equals_prefill_row(opts):
    q, k, v = _data(60, t=23)
    pre = dl.attention(q, k, v, query_block=1, **opts, **SCALES)
    dec, state = _decode_all(q, k, v, **opts, **SCALES)
    assert np.array_equal(dec, pre.output)
    assert np.array_equal(state.deltas, pre.delta_keys.deltas)
    assert np.array_equal(state.mask, pre.delta_keys.mask)
    assert np.array_equal(state.memory, pre.delta_keys.memory)


@pytest.mark.parametrize("prompt", [1, 6, 13])
def test_decode_after_prompt_equals_prefill_rows(prompt):
    q, k, v = _data(63, t=20)
    opts = dict(theta=5, window=4, tau=1.5, n_sink=2, refresh_period=7, **SCALES)
    pre = dl.attention(q, k, v, query_block=1, **opts)
    state = dl.append_prompt(dl.init_decode(4, 2, 8, 8, **opts), k[:, :prompt], v[:, :prompt])
    assert state.n_tokens == prompt
    for t in range(prompt, 20):
        y, state = dl.decode_step(state, q[:, t], k[:, t], v[:, t])
        assert np.array_equal(y, pre.output[:, t])
    assert np.array_equal(state.deltas, pre.delta_keys.deltas)


def test_decode_equals_blocked_prefill_without_skipping():
    q, k, v = _data(61, t=19)
    pre = dl.attention(q, k, v, theta=5, window=3, tau=math.inf, query_block=4, **SCALES)
    dec, _ = _decode_all(q, k, v, theta=5, window=3, tau=math.inf, **SCALES)
    assert np.array_equal(dec, pre.output)


def test_decode_float_mode_equals_prefill():
    rng = np.random.default_rng(62)
    q, k, v = rng.normal(size=(4, 15, 8)), rng.normal(size=(2, 15, 8)), rng.normal(size=(2, 15, 8))
    pre = dl.attention(q, k, v, theta=0.3, window=3, tau=2.0, mode="float", query_block=1)
    dec, _ = _decode_all(q, k, v, theta=0.3, window=3, tau=2.0, mode="float")
    np.testing.assert_allclose(dec, pre.output, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- bad input


def test_attention_rejects_bad_input():
    q, k, v = _data(70, t=5)
    kw = dict(theta=1, window=2, tau=4)
    with pytest.raises(ValueError, match="shape mismatch"):
        dl.attention(q[:, :4], k, v, **kw)
    with pytest.raises(ValueError, match="Hq=3 is not a multiple of Hkv=2"):
        dl.attention(q[:3], k, v, **kw)
    with pytest.raises(TypeError, match="q: fixed mode needs int8, got dtype int16"):
        dl.attention(q.astype(np.int16), k, v, **kw)
    with pytest.raises(TypeError, match="float mode needs a float dtype"):
        dl.attention(q, k, v, mode="float", **kw)
    bad = q.astype(float)
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="q: holds NaN or Inf"):
        dl.attention(bad, k.astype(float), v.astype(float), mode="float", **kw)
    with pytest.raises(ValueError, match="empty"):
        dl.attention(q[:, :0], k[:, :0], v[:, :0], **kw)
    with pytest.raises(ValueError, match="expected 3 dims"):
        dl.attention(q[0], k, v, **kw)
    with pytest.raises(ValueError, match="mode: unknown value 'int'; valid: fixed, float"):
        dl.attention(q, k, v, mode="int", **kw)
    with pytest.raises(ValueError, match="denom_mode: unknown value"):
        dl.attention(q, k, v, denom_mode="none", **kw)
    with pytest.raises(ValueError, match="order: unknown value"):
        dl.attention(q, k, v, order="descending", **kw)
    with pytest.raises(ValueError, match="window: must be an integer >= 1"):
        dl.attention(q, k, v, theta=1, window=0, tau=4)
    with pytest.raises(ValueError, match="tau"):
        dl.attention(q, k, v, theta=1, window=2, tau=0)
    with pytest.raises(ValueError, match="tau"):
        dl.attention(q, k, v, theta=1, window=2, tau=True)
    same = dl.attention(q, k, v, theta=1, window=2, tau=np.float64(4.0))
    assert np.array_equal(same.output, dl.attention(q, k, v, **kw).output)
    with pytest.raises(ValueError, match="k_scale"):
        dl.attention(q, k, v, k_scale=[1.0, -1.0], **kw)
    with pytest.raises(TypeError, match="theta"):
        dl.attention(q, k, v, theta=0.5, window=2, tau=4)


def test_decode_rejects_bad_input():
    with pytest.raises(ValueError, match="Hq=3 is not a multiple of Hkv=2"):
        dl.init_decode(3, 2, 8, 8, theta=1, window=2, tau=4)
    with pytest.raises(ValueError, match="tau"):
        dl.init_decode(4, 2, 8, 8, theta=1, window=2, tau=float("nan"))
    with pytest.raises(TypeError, match="theta"):
        dl.init_decode(4, 2, 8, 8, theta=1.5, window=2, tau=4)
    state = dl.init_decode(4, 2, 8, 8, theta=1, window=2, tau=4)
    z = np.zeros((2, 8), dtype=np.int8)
    with pytest.raises(ValueError, match=r"q: expected shape \(4, 8\)"):
        dl.decode_step(state, z, z, z)
    with pytest.raises(TypeError, match="int8"):
        dl.decode_step(state, np.zeros((4, 8)), z, z)
    with pytest.raises(ValueError, match="expected"):
        dl.append_prompt(state, np.zeros((2, 3, 8), dtype=np.int8), np.zeros((2, 4, 8), np.int8))
    with pytest.raises(TypeError, match="k: fixed mode needs int8"):
        dl.append_prompt(state, np.zeros((2, 3, 8)), np.zeros((2, 3, 8), dtype=np.int8))
    fstate = dl.init_decode(4, 2, 8, 8, theta=0.5, window=2, tau=4, mode="float")
    with pytest.raises(ValueError, match="v: holds NaN or Inf"):
        dl.decode_step(fstate, np.zeros((4, 8)), np.zeros((2, 8)), np.full((2, 8), np.inf))
