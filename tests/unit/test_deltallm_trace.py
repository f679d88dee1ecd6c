"""DeltaLLM's per-column event trace against a scalar reading of the reference's masks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.models import deltallm as dl
from coaccel.spine.trace import Trace


def _case(seed=0, hq=8, hkv=2, t=37, d=16, theta=3, window=5, tau=2.0, block=4, n_sink=1):
    rng = np.random.default_rng(seed)
    walk = np.cumsum(rng.integers(-3, 4, size=(hkv, t, d)), axis=1)
    k = np.clip(walk, -127, 127).astype(np.int8)
    q = rng.integers(-60, 61, size=(hq, t, d)).astype(np.int8)
    v = rng.integers(-127, 128, size=(hkv, t, d)).astype(np.int8)
    res = dl.attention(q, k, v, theta=theta, window=window, tau=tau, query_block=block,
                       n_sink=n_sink, q_scale=0.1, k_scale=0.1)  # fmt: skip
    return res, dict(hq=hq, hkv=hkv, t=t, d=d, window=window, block=block, n_sink=n_sink)


def _scalar_kind(res, p, h, b, j):
    g_n = p["hq"] // p["hkv"]
    exact = delta = skip = valid_any = False
    for g in range(g_n):
        for lane_tok in range(p["block"]):
            i = b * p["block"] + lane_tok
            if i >= p["t"] or j > i:
                continue
            valid_any = True
            if j < p["n_sink"] or i - j < p["window"]:
                exact = True
            else:
                delta = True
            skip = skip or bool(res.skipped[h * g_n + g, i, j])
    if not valid_any:
        return 0
    return int(exact) | int(delta) << 1 | int(skip) << 2


@pytest.mark.parametrize("seed,block,n_sink", [(0, 4, 1), (1, 1, 1), (2, 3, 2)])
def test_events_match_the_scalar_rule(seed, block, n_sink):
    res, p = _case(seed=seed, block=block, n_sink=n_sink)
    evs = dl.delta_events(res, query_block=block, layer=7)
    assert len(evs) == p["hkv"]
    nb = math.ceil(p["t"] / block)
    for ev in evs:
        assert ev.layer == 7 and ev.kind.shape == (nb, p["t"])
        for b in range(nb):
            for j in range(p["t"]):
                assert ev.kind[b, j] == _scalar_kind(res, p, ev.head, b, j), (ev.head, b, j)
        want_nnz = [int(res.delta_keys.mask[ev.head, j].sum()) for j in range(p["t"])]
        assert ev.nnz.tolist() == want_nnz


def test_events_agree_with_the_reference_statistics():
    res, p = _case(seed=4, tau=2.0)
    evs = dl.delta_events(res, query_block=p["block"])
    assert sum(int(np.count_nonzero(e.kind)) for e in evs) == res.stats.visited_columns
    skipped = sum(int(np.count_nonzero(e.kind & 4)) for e in evs)
    assert skipped == res.stats.skipped_columns > 0


def test_trace_round_trip_and_contract(tmp_path):
    res, p = _case(seed=5)
    evs = dl.delta_events(res, query_block=p["block"], layer=3)
    tr = dl.delta_trace(evs, workload={"T": p["t"]}, seed=5)
    path = tmp_path / "dl.npz"
    tr.save(path)
    again = Trace.load(path)
    assert again.equals(tr)
    kernels = again.events[again.events["kind"] == 0]["kernel"]
    assert len(kernels) == p["hkv"]
    assert set(np.unique(again.sparsity["kernel"])) == set(kernels.tolist())
    back = dl.events_from_trace(again, group=p["hq"] // p["hkv"], query_block=p["block"],
                                n_tokens=p["t"], head_dim=p["d"])  # fmt: skip
    for a, b in zip(evs, back, strict=True):
        assert np.array_equal(a.kind, b.kind)
        has_delta = (a.kind & 2).any(axis=0)
        assert np.array_equal(a.nnz[has_delta], b.nnz[has_delta])
    # lanes: bit g·P_q + p set where token b·P_q + p exists and j <= that token
    ev = evs[0]
    lanes = ev.lanes()
    b, j = 2, 9
    want = 0
    for g in range(ev.group):
        for q in range(ev.query_block):
            i = b * ev.query_block + q
            if i < p["t"] and j <= i:
                want |= 1 << (g * ev.query_block + q)
    assert int(lanes[b, j]) == want
    r = again.sparsity[(again.sparsity["qblock"] == b) & (again.sparsity["column"] == j)]
    assert int(r["lanes"][0]) == want


def test_dram_bytes_by_hand():
    res, p = _case(seed=6)
    ev = dl.delta_events(res, query_block=p["block"])[1]
    got = dl.head_dram_bytes(ev)
    t, d, g = p["t"], p["d"], p["hq"] // p["hkv"]
    nnz = int(res.delta_keys.mask[1].sum())
    want = {"Q": g * t * d, "K": t * d, "delta_mask": t * d // 8}
    want |= {"delta_values": math.ceil(nnz * 9 / 8), "V": t * d, "O": g * t * d * 2}
    assert got == want


@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(order="window_first", tau=1.5),
        dict(delta_mode="naive", refresh_period=7, n_sink=2),
        dict(query_block=3, window=1, theta=0),
        dict(tau=math.inf),
        dict(causal=False, window=3),
    ],
)
def test_column_events_equal_the_reference(opts):
    rng = np.random.default_rng(11)
    hq, hkv, t, d = 8, 2, 41, 16
    k = np.clip(np.cumsum(rng.integers(-3, 4, size=(hkv, t, d)), axis=1), -127, 127)
    k = k.astype(np.int8)
    q = rng.integers(-90, 91, size=(hq, t, d)).astype(np.int8)
    v = rng.integers(-127, 128, size=(hkv, t, d)).astype(np.int8)
    kw = dict(theta=3, window=5, tau=2.0, query_block=4, q_scale=rng.uniform(0.05, 0.2, hq),
              k_scale=rng.uniform(0.05, 0.2, hkv)) | opts  # fmt: skip
    res = dl.attention(q, k, v, **kw)
    want = dl.delta_events(res, query_block=kw["query_block"], layer=2,
                           causal=kw.get("causal", True))  # fmt: skip
    got = dl.column_events(q, k, layer=2, **kw)
    assert len(got.events) == hkv
    for a, b in zip(got.events, want, strict=True):
        assert a.equals(b)
    st = res.stats
    assert got.valid_elements == st.valid_elements
    assert got.fine_elements == st.fine_elements
    assert got.skipped_elements == st.skipped_elements
    assert got.delta_sparsity == st.delta_sparsity
    if opts.get("tau") != math.inf:
        assert st.skipped_elements > 0


@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(order="window_first", tau=1.5),
        dict(denom_mode="kept", tau=1.0),
        dict(delta_mode="naive", refresh_period=7, n_sink=2),
        dict(query_block=3, window=1, theta=0),
        dict(tau=math.inf),
        dict(causal=False, window=3),
    ],
)
def test_numba_attention_equals_the_reference(opts):
    rng = np.random.default_rng(12)
    hq, hkv, t, d, dv = 8, 2, 43, 16, 12
    k = np.clip(np.cumsum(rng.integers(-3, 4, size=(hkv, t, d)), axis=1), -127, 127)
    k = k.astype(np.int8)
    q = rng.integers(-100, 101, size=(hq, t, d)).astype(np.int8)
    v = rng.integers(-127, 128, size=(hkv, t, dv)).astype(np.int8)
    kw = dict(theta=3, window=5, tau=2.0, query_block=4, q_scale=rng.uniform(0.05, 0.2, hq),
              k_scale=rng.uniform(0.05, 0.2, hkv)) | opts  # fmt: skip
    ref = dl.attention(q, k, v, **kw)
    fast = dl.attention_fixed_fast(q, k, v, **kw)
    assert np.array_equal(fast.output, ref.output)
    st = ref.stats
    got = (fast.valid_elements, fast.fine_elements, fast.skipped_elements,
           fast.skipped_columns, fast.visited_columns, fast.delta_sparsity)  # fmt: skip
    assert got == (st.valid_elements, st.fine_elements, st.skipped_elements,
                   st.skipped_columns, st.visited_columns, st.delta_sparsity)  # fmt: skip
