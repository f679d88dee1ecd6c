"""W3 NOSA / NOSI: selection dynamics, slot map, misses, fetch traffic, attention numerics."""

import math

import numpy as np
import pytest

from coaccel.models.gpu import DecodeShape, bf16_bits_to_f32
from coaccel.models.gpu.nosa import NosaConfig, NosaModel, nosa_decode
from coaccel.sim.gpu_mem import load_arch, load_workload, simulate
from coaccel.spine.config import ConfigError

ROW = 128 * 2  # D x bf16, B
BLOCK_FETCH = 2 * 64 * ROW + 64 * 2  # K + V rows and cis of one block, B


@pytest.fixture(scope="module")
def runs():
    shape = DecodeShape(1, 8192, 8, 2, 128)
    out = {}
    for sel in ("nosa", "topk"):
        out[sel] = nosa_decode(shape, config=NosaConfig(selector=sel), steps=48, seed=3)
    return out


def test_bit_exact_and_seeded(runs):
    shape = DecodeShape(1, 8192, 8, 2, 128)
    again = nosa_decode(shape, config=NosaConfig(), steps=48, seed=3)
    r = runs["nosa"]
    assert np.array_equal(again.out, r.out)
    assert np.array_equal(again.misses, r.misses)
    assert again.trace.equals(r.trace)
    other = nosa_decode(shape, config=NosaConfig(), steps=48, seed=4)
    assert not np.array_equal(other.out, r.out)


def test_slot_map_holds_exactly_the_selection(runs):
    for r in runs.values():
        cfg = r.config
        b_, hkv, n_sel = r.selected.shape
        assert n_sel == cfg.slots
        nb = -(-r.shape.context // cfg.block_tokens)
        for b in range(b_):
            for h in range(hkv):
                sel = r.selected[b, h]
                assert np.all(np.diff(sel) > 0)
                held = r.slot_map[b, h]
                assert sorted(held[held >= 0].tolist()) == sel.tolist()
                # init block and the recent window are always selected
                assert 0 in sel
                assert set(range(nb - cfg.window_blocks, nb)) <= set(sel.tolist())


def test_locality_bounds_the_misses(runs):
    nosa, topk = runs["nosa"], runs["topk"]
    q = nosa.config.topk_q_blocks
    # a miss of NOSA is a new query-aware block or the cis fill's replacement of one
    assert nosa.misses[1:].max() <= 2 * q
    assert nosa.misses_per_step < topk.misses_per_step
    # the cold start fetches every selected block but the partial tail
    assert np.all(nosa.misses[0] == nosa.config.slots - 1)


def test_static_query_never_misses_after_the_cold_start():
    still = NosaModel(focus_switch=0.0, query_noise=0.0)
    shape = DecodeShape(1, 8192, 8, 2, 128)
    for sel in ("nosa", "topk"):
        r = nosa_decode(shape, config=NosaConfig(selector=sel), model=still, steps=40)
        # old blocks' scores never change: a block leaving the window can only be evicted
        assert r.misses[1:].sum() == 0


def test_attention_matches_float64_over_the_selected_blocks(runs):
    r = runs["nosa"]
    q = bf16_bits_to_f32(r.inputs.q).astype(np.float64)
    k = bf16_bits_to_f32(r.inputs.k).astype(np.float64)
    v = bf16_bits_to_f32(r.inputs.v).astype(np.float64)
    b_, hq, d = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    t = r.shape.context
    for h in range(hkv):
        tok = (r.selected[0, h][:, None] * 64 + np.arange(64)).ravel()
        tok = tok[tok < t]
        for j in range(g):
            s = k[0, tok, h] @ q[0, h * g + j] / math.sqrt(d)
            p = np.exp(s - s.max())
            want = p @ v[0, tok, h] / p.sum()
            got = bf16_bits_to_f32(r.out[0, h * g + j]).astype(np.float64)
            assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)


def test_keep_all_equals_dense():
    # slots cover the whole context: the selection is everything, the output is dense
    shape = DecodeShape(1, 2048, 8, 2, 128)
    r = nosa_decode(shape, config=NosaConfig(slots=64), steps=8)
    assert r.keep_ratio == 1.0
    assert r.rel_err < 2**-7
    assert r.misses[1:].sum() == 0


@pytest.mark.parametrize("link", ["zero_copy", "dma"])
def test_simulated_link_bytes_are_the_misses(link):
    shape = DecodeShape(1, 8192, 8, 2, 128)
    r = nosa_decode(shape, config=NosaConfig(fetch=link), steps=64, seed=1, trace_steps=3)
    res = simulate(load_arch("h200"), r.trace)
    fetched = int(r.misses[-3:].sum()) * BLOCK_FETCH
    got = res.link.zero_copy_bytes if link == "zero_copy" else res.link.h2d_bytes
    assert got == fetched
    assert res.link.d2h_bytes == int(r.writebacks[-3:].sum()) * 2 * 64 * ROW * 2
    names = [k.name for k in res.kernels]
    if link == "dma" and fetched:
        assert names.count("memcpy_h2d_nosa_block") == int(r.misses[-3:].sum())


def test_workload_spec():
    w = load_workload("nosa:T=4096,B=1,link=dma,selector=topk,steps=8,slots=48")
    m = w.trace.meta["workload"]["metrics"]
    assert m["keep_ratio"][0] == pytest.approx(48 * 64 / 4096)
    assert w.trace.meta["workload"]["nosa"]["fetch"] == "dma"
    res = simulate(load_arch("gh200"), w)
    assert res.metrics()["workload.attn_out_rel_err"][0] == m["attn_out_rel_err"][0]
    for bad in ("nosa:T=4096,link=pcie", "nosa:T=4096,slots=8", "nosa:T=4096,colour=1"):
        with pytest.raises(ConfigError):
            load_workload(bad)


def test_bad_config():
    with pytest.raises(ValueError, match="exceeds"):
        NosaConfig(slots=32)
    with pytest.raises(ValueError, match="selector"):
        NosaConfig(selector="lru")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steps"):
        nosa_decode(DecodeShape(1, 128, 8, 2, 128), steps=0)


@pytest.mark.slow  # load_spec runs every workload's reference (about 20 s)
def test_offload_sweep_spec_and_link_effect():
    from coaccel.arch_configs import path as shipped
    from coaccel.dse import load_spec
    from coaccel.spine.config import override

    loaded = load_spec(shipped("sweeps/gpu_offload_keep_context_link.yaml"))
    spec = loaded.spec
    assert loaded.kind == "gpu"
    assert all(w.startswith("nosa:") for w in spec.workloads)
    slots = {w.split("slots=")[1].split(",")[0] for w in spec.workloads}
    assert slots == {"64", "128", "256"}
    assert {o.metric for o in spec.objectives} == {"seconds", "workload.attn_out_rel_err"}
    # the fetches cross the host link: a PCIe-class link makes the same step slower than C2C
    r = nosa_decode(DecodeShape(1, 16384, 8, 2, 128), steps=24, seed=2)
    assert r.misses[-1].sum() > 0
    c2c = load_arch("gh200")
    pcie = override(c2c, {"host_link.h2d_bw_gb_per_s": 64, "host_link.d2h_bw_gb_per_s": 64})
    assert simulate(pcie, r.trace).seconds > simulate(c2c, r.trace).seconds


def test_without_error_same_selection_and_output(runs):
    shape = DecodeShape(1, 8192, 8, 2, 128)
    fast = nosa_decode(shape, config=NosaConfig(), steps=48, seed=3, error=False)
    r = runs["nosa"]
    assert np.array_equal(fast.out, r.out) and np.array_equal(fast.misses, r.misses)
    assert math.isnan(fast.rel_err) and fast.dense.size == 0
    assert "attn_out_rel_err" not in fast.trace.meta["workload"]["metrics"]


def test_fast_kernels_equal_their_numpy_forms():
    from coaccel.models.gpu._bf16 import f32_to_bf16_bits
    from coaccel.models.gpu._nosa_fast import bf16_to_f64, chunk_sums, keys_bf16, lookup_bf16

    rng = np.random.default_rng(11)
    b_, n, hkv, d, bt, t0 = 2, 96, 3, 8, 64, 40
    table = rng.standard_normal(256).astype(np.float32)
    # NaN, infinities, overflow to inf and exact bf16 ties (odd and even kept halves)
    table[:6] = np.array(
        [np.nan, np.inf, -np.inf, 3.4e38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8], dtype=np.float32
    )
    cent = rng.standard_normal((b_, 4, hkv, d)).astype(np.float32)
    cent[:, :, 0, 0] = 0.0
    z = rng.integers(0, 256, size=(b_, n, hkv, d), dtype=np.uint8)
    out = np.empty(z.shape, dtype=np.uint16)
    keys_bf16(z, table, cent, t0, bt, out)
    blk = np.arange(t0, t0 + n) // bt
    assert np.array_equal(out, f32_to_bf16_bits(table[z] + cent[:, blk]))
    bits = rng.integers(0, 2**16, size=(b_, n, hkv, d), dtype=np.uint16)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns convert quietly
        assert np.array_equal(
            bf16_to_f64(bits[:, ::2]).view(np.uint64),
            bf16_bits_to_f32(bits[:, ::2]).astype(np.float64).view(np.uint64),
        )
    tab16 = rng.integers(0, 2**16, size=256, dtype=np.uint16)
    assert np.array_equal(lookup_bf16(z, tab16), tab16[z])
    small = (bits & np.uint16(0x80FF)) | np.uint16(0x3F00)  # |x| in [0.5, 2): exact sums
    ref = bf16_bits_to_f32(small).astype(np.float64).reshape(b_, n // 16, 16, hkv, d).sum(2)
    assert np.array_equal(chunk_sums(small, 16), ref)
