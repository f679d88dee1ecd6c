"""The pieces behind DeltaLLM's real-input rows that need no model package.

* the lane-layout option of the reference (numpy), its numba twins and its event trace agree
  bit for bit, and the ``"head"`` layout's skip decisions follow from the layout-free fine-sparse
  flags by an independent grouping written here;
* :func:`sparsity_counts` (one score pass for many τ and layouts) equals the reference's counts;
* the numba decode row equals the reference decode step (and prefill with ``P_q = 1``);
* the spread statistics are ratios of summed counts (micro-averages), not means of ratios;
* TeLLMe-v2's loop model equals a loop-by-loop count of its HLS loops written here;
* the real-key simulator function equals the KV260 simulator on the simulator's own events.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.models import deltallm as dl
from coaccel.models.nn import synthetic_attention
from coaccel.targets.deltallm_fpga.real import spread, t_quantile_975


def _tensors(seed: int, tokens: int, kv_heads: int = 2, model: str = "llama-3.2-1b"):
    rng = np.random.default_rng(seed)
    return synthetic_attention(rng, model, tokens=tokens, kv_heads=kv_heads).tensors


def _blocks_of(x: np.ndarray, block: int) -> list[np.ndarray]:
    return [x[..., i : i + block, :] for i in range(0, x.shape[-2], block)]


# ------------------------------------------------------------------------------ lane layouts
@pytest.mark.parametrize(("tokens", "window", "tau", "block"), [(29, 4, 2.0, 4), (24, 1, 6.0, 3)])
def test_head_layout_reference_fast_and_events_agree(tokens, window, tau, block):
    t = _tensors(1, tokens)
    kw = dict(
        theta=3,
        window=window,
        tau=tau,
        q_scale=t.q_scale,
        k_scale=t.k_scale,
        query_block=block,
        lane_layout="head",
    )
    ref = dl.attention(t.q_int8, t.k_int8, t.v_int8, **kw)
    fast = dl.attention_fixed_fast(t.q_int8, t.k_int8, t.v_int8, **kw)
    np.testing.assert_array_equal(fast.output, ref.output)
    st = ref.stats
    assert (fast.skipped_elements, fast.fine_elements, fast.skipped_columns) == (
        st.skipped_elements,
        st.fine_elements,
        st.skipped_columns,
    )
    ce = dl.column_events(t.q_int8, t.k_int8, **{k: v for k, v in kw.items()})
    ev = dl.delta_events(ref, query_block=block, lane_layout="head")
    assert len(ce.events) == t.q.shape[0] and all(
        a.equals(b) for a, b in zip(ce.events, ev, strict=True)
    )
    assert ce.skipped_elements == st.skipped_elements and ce.fine_elements == st.fine_elements


def test_head_layout_skips_exactly_the_all_fine_head_blocks():
    """A lane's fine flag does not depend on the layout; a head-layout column is skipped when
    every valid token of one head's block is fine (an oracle written here)."""
    t = _tensors(2, 21)
    kw = dict(theta=2, window=3, tau=3.0, q_scale=t.q_scale, k_scale=t.k_scale, query_block=4)
    grp = dl.attention(t.q_int8, t.k_int8, t.v_int8, lane_layout="group", **kw)
    hd = dl.attention(t.q_int8, t.k_int8, t.v_int8, lane_layout="head", **kw)
    np.testing.assert_array_equal(grp.fine, hd.fine)
    want = np.zeros_like(hd.skipped)
    for h in range(hd.fine.shape[0]):
        for b0 in range(0, 21, 4):
            rows = slice(b0, min(b0 + 4, 21))
            valid = hd.valid[rows]
            for j in range(21):
                col = valid[:, j]
                if col.any() and np.all(hd.fine[h, rows, j][col]):
                    want[h, rows, j] = col
    np.testing.assert_array_equal(hd.skipped, want)
    assert hd.stats.skipped_elements >= grp.stats.skipped_elements  # finer groups skip more


def test_head_layout_equals_group_layout_for_multi_head_attention():
    t = _tensors(3, 20, model="bitnet-b1.58-large", kv_heads=2)  # MHA: group 1
    kw = dict(theta=2, window=4, tau=4.0, q_scale=t.q_scale, k_scale=t.k_scale)
    a = dl.attention(t.q_int8, t.k_int8, t.v_int8, lane_layout="group", **kw)
    b = dl.attention(t.q_int8, t.k_int8, t.v_int8, lane_layout="head", **kw)
    np.testing.assert_array_equal(a.output, b.output)
    assert a.stats == b.stats


def test_unknown_layout_is_refused():
    t = _tensors(4, 8)
    with pytest.raises(ValueError, match="lane_layout: unknown value 'row'; valid: group, head"):
        dl.attention(t.q_int8, t.k_int8, t.v_int8, theta=1, window=2, tau=8, lane_layout="row")


# ------------------------------------------------------------------------- sparsity_counts
@pytest.mark.parametrize(("tokens", "window", "n_sink"), [(37, 4, 1), (30, 1, 2), (26, 64, 1)])
def test_sparsity_counts_equal_the_reference_for_every_tau_and_layout(tokens, window, n_sink):
    t = _tensors(5, tokens, kv_heads=2)
    taus = (2.0, 5.5, 8.0, math.inf)
    layouts = (("group", 4), ("group", 1), ("head", 3))
    c = dl.sparsity_counts(
        t.q_int8,
        t.k_int8,
        theta=3,
        window=window,
        taus=taus,
        layouts=layouts,
        q_scale=t.q_scale,
        k_scale=t.k_scale,
        n_sink=n_sink,
        events=(1, 2),
    )
    for ti, tau in enumerate(taus):
        for li, (lay, pq) in enumerate(layouts):
            r = dl.attention(
                t.q_int8,
                t.k_int8,
                t.v_int8,
                theta=3,
                window=window,
                tau=tau,
                q_scale=t.q_scale,
                k_scale=t.k_scale,
                query_block=pq,
                lane_layout=lay,
                n_sink=n_sink,
            ).stats
            assert c.fine_elements[ti] == r.fine_elements
            assert c.skipped_elements[ti, li] == r.skipped_elements
            assert c.skipped_columns[ti, li] == r.skipped_columns
            assert c.visited_columns[li] == r.visited_columns
            assert c.valid_elements == r.valid_elements
            assert c.delta_elements - c.delta_nonzeros == round(r.delta_sparsity * c.delta_elements)
    ce = dl.column_events(
        t.q_int8,
        t.k_int8,
        theta=3,
        window=window,
        tau=5.5,
        q_scale=t.q_scale,
        k_scale=t.k_scale,
        query_block=3,
        lane_layout="head",
        n_sink=n_sink,
    )
    assert all(a.equals(b) for a, b in zip(c.events, ce.events, strict=True))


# ---------------------------------------------------------------------------------- decode
@pytest.mark.parametrize("layout", ["group", "head"])
def test_decode_row_fast_equals_the_reference_decode_step(layout):
    t = _tensors(6, 26)
    opts = dict(window=5, tau=3.0, n_sink=2, lane_layout=layout)
    st = dl.init_decode(
        t.q.shape[0],
        t.k.shape[0],
        t.q.shape[2],
        t.v.shape[2],
        theta=2,
        q_scale=t.q_scale,
        k_scale=t.k_scale,
        **opts,
    )
    st = dl.append_prompt(st, t.k_int8[:, :20], t.v_int8[:, :20])
    pre = dl.attention(
        t.q_int8,
        t.k_int8,
        t.v_int8,
        theta=2,
        q_scale=t.q_scale,
        k_scale=t.k_scale,
        query_block=1,
        **opts,
    )
    for i in range(20, 26):
        y_ref, st = dl.decode_step(st, t.q_int8[:, i], t.k_int8[:, i], t.v_int8[:, i])
        kh = dl.encode_delta_keys(t.k_int8[:, : i + 1], theta=2, n_sink=2).keys_hat
        y, _ = dl.decode_row_fixed_fast(
            t.q_int8[:, i],
            t.k_int8[:, : i + 1],
            kh,
            t.v_int8[:, : i + 1],
            q_scale=t.q_scale,
            k_scale=t.k_scale,
            **opts,
        )
        np.testing.assert_array_equal(y, y_ref)
        np.testing.assert_array_equal(y, pre.output[:, i])


# -------------------------------------------------------------------------------- statistics
def test_spread_is_the_ratio_of_summed_counts_not_the_mean_of_ratios():
    num = np.array([[1, 90], [3, 40]])
    den = np.array([[10, 100], [10, 50]])
    s = spread(num, den)
    assert s.mean == (1 + 90 + 3 + 40) / (10 + 100 + 10 + 50)
    assert s.mean != pytest.approx(np.mean(num / den))
    assert s.per_passage == pytest.approx((91 / 110, 43 / 60))
    assert s.per_layer == pytest.approx((4 / 20, 130 / 150))
    sd = np.std([91 / 110, 43 / 60], ddof=1)
    assert s.passage_std == pytest.approx(sd)
    half = 12.706 * sd / math.sqrt(2)
    assert s.ci95 == pytest.approx((s.mean - half, s.mean + half))
    with pytest.raises(ValueError, match="no elements"):
        spread([[1, 0]], [[1, 0]])


def test_t_quantile_continues_the_table():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(30) == 2.042
    assert abs(t_quantile_975(31) - 2.040) < 2e-3 and abs(t_quantile_975(10**6) - 1.96) < 1e-3
    assert t_quantile_975(60) < t_quantile_975(31)


# ----------------------------------------------------------------------- TeLLMe-v2 loop model
def test_tellme_loop_model_counts_the_hls_loops():
    """Trip counts walked loop by loop as src/reverse_attention.hpp and src/linear.hpp write
    them (BitNet-b1.58-large: the constants of src/config; padded widths 1596 and 4116)."""
    from coaccel.spine.workload import load_workload
    from coaccel.targets.deltallm_fpga.tellme_loops import TellmeLoops
    from coaccel.validate.published import load_published

    loops = TellmeLoops.from_published(load_published("deltallm"))
    m = load_workload("bitnet-b1.58-large").model
    hidden, heads, par = 1536, 16, 8
    for t_n in (5, 64, 70):
        cyc = 0
        for q0 in range(0, t_n, par):  # Q_DIM
            for _kv in range(q0, t_n):  # KV_DIM
                cyc += len(range(0, hidden, 16))  # VEC_COMPUTE
                cyc += heads  # VEC_REDUCE
                cyc += par * heads  # PARTIAL_SOFT_MAX
            cyc += par * (hidden // 16)  # OUTPUT
        assert loops.attention_cycles(m, t_n) == cyc

    def linear(in_padded: int, out_stop: int) -> int:
        c = 0
        for _j in range(0, in_padded, 28 * 3):  # HIDDEN1_BLOCK_LOOP
            c += 28 * 3  # READ_A
            c += len(range(0, out_stop, 16))  # LUT_HIDDEN_LOOP
        return c

    per_token = 4 * linear(1596, 1536) + 2 * linear(1596, 4096) + linear(4116, 1536)
    assert loops.linear_cycles_per_token(m) == per_token


def test_real_key_simulator_equals_the_kv260_simulator_on_its_own_events():
    from coaccel.sim.deltallm_fpga import layer_qk
    from coaccel.simulation import load_arch, simulate
    from coaccel.spine.workload import load_workload
    from coaccel.targets.deltallm_fpga.real_sim import attention_cycles

    _, arch = load_arch("kv260")
    wl = load_workload("llama-3.2-1b", "prefill_64")
    r = simulate(arch, wl, mode="cycle")
    a, m = arch.algorithm, wl.model
    g = m.heads // m.kv_heads
    events = []
    for layer in range(m.layers):
        q, sq, k, sk = layer_qk(m, 64, layer, arch.keys)
        c = dl.sparsity_counts(
            q,
            k,
            theta=a.theta,
            window=a.window_tokens,
            taus=(a.tau_log2,),
            layouts=(("group", arch.datapath.lanes // g),),
            q_scale=sq,
            k_scale=sk,
            events=(0, 0),
            layer=layer,
        )
        events += c.events
    t = attention_cycles(arch, events, group=g)
    assert t.cycles == r.attention_cycles
    assert t.compute_cycles == r.attention_compute_cycles
    assert t.memory_cycles == r.attention_memory_cycles
