"""FFD (W2) reference: the 2-bit and FP8 E4M3 code points, the quantizer, the scan, threshold
and keep rules against scalar oracles, the sparse split kernel against the shared skeleton and
a float64 sparse-attention oracle, the trace's bytes, and the ffd: workload spec."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from coaccel.models.gpu import (
    DecodeShape,
    bf16_bits_to_f32,
    f32_to_bf16_bits,
    ffd_approx_scores,
    ffd_decode,
    ffd_keep,
    ffd_threshold,
    ffd_trace,
    make_inputs,
    make_peaked_inputs,
    pack_2bit,
    plan_split_k,
    quantize_keys,
    split_k_partials,
    split_k_partials_gathered,
    traffic_bound_speedup,
    unpack_2bit,
)
from coaccel.models.gpu._splitk import _score_scale, _tree_sum
from coaccel.models.gpu.ffd import _E4M3_VALUES
from coaccel.spine.config import ConfigError

# -- code points ---------------------------------------------------------------------------


def test_2bit_packing_every_byte_and_every_code_combination() -> None:
    combos = np.array(np.meshgrid(*[np.arange(4)] * 4, indexing="ij")).reshape(4, -1).T
    packed = pack_2bit(combos.astype(np.uint8))[:, 0]
    assert np.array_equal(packed, combos @ np.array([1, 4, 16, 64]))
    assert np.array_equal(np.sort(packed), np.arange(256))
    byte = np.arange(256)
    fields = np.stack([(byte // 4**i) % 4 for i in range(4)], axis=1)  # base-4 digits
    assert np.array_equal(unpack_2bit(byte.astype(np.uint8)[:, None]), fields)
    with pytest.raises(ValueError):
        pack_2bit(np.array([[4, 0, 0, 0]], dtype=np.uint8))


def _ofp8_e4m3(code: int) -> float:
    """OCP OFP8 E4M3 by its definition: bias 7, subnormals at exponent 0, no infinities, NaN
    only at S.1111.111."""
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    v = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def test_e4m3_residual_values_every_code_point() -> None:
    want = np.array([_ofp8_e4m3(c) for c in range(256)])
    nan = np.isnan(want)
    assert nan.sum() == 2 and np.isnan(_E4M3_VALUES[nan]).all()
    assert np.array_equal(_E4M3_VALUES[~nan], want[~nan].astype(np.float32))
    assert np.nanmax(want) == 448.0


def _nearest_e4m3(x: float) -> int:
    """Brute force: the finite E4M3 code nearest to x, ties to the even code, beyond the
    maximum saturated; +0 for a zero result."""
    vals = np.array([_ofp8_e4m3(c) for c in range(256)])
    ok = ~np.isnan(vals)
    codes = np.arange(256)[ok]
    d = np.abs(vals[ok] - x)
    best = codes[d == d.min()]
    if len(best) > 1:
        best = best[(best & 1) == 0]
    c = int(best[0])
    return 0 if vals[c] == 0 else c


def _oracle_quantize(k32: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scalar walk of the documented float32 steps for one block [BS, D]."""
    bs, d = k32.shape
    scale = np.empty(d, dtype=np.float32)
    codes = np.empty((bs, d), dtype=np.int64)
    res = np.empty((bs, d), dtype=np.int64)
    for j in range(d):
        am = max(abs(float(x)) for x in k32[:, j])
        scale[j] = max(np.float32(np.float32(am) / np.float32(1.5)), np.float32(1e-8))
        for i in range(bs):
            y = np.float32(np.float32(k32[i, j] / scale[j]) + np.float32(1.5))
            c = min(3, max(0, int(round(float(y)))))  # Python round: half to even
            codes[i, j] = c
            deq = np.float32(np.float32(c - 1.5) * scale[j])
            res[i, j] = _nearest_e4m3(float(np.float32(k32[i, j] - deq)))
    return scale, codes, res


def test_quantizer_equals_a_scalar_oracle_and_hits_every_code_and_tie() -> None:
    rng = np.random.default_rng(3)
    k = f32_to_bf16_bits(rng.standard_normal((1, 64, 2, 8)).astype(np.float32) * 3)
    # channel 0 of head 0: absmax 1.5 so scale = 1; k / scale = -1, 0, 1 are ties (-> codes
    # 0, 2, 2), -1.5 / 1.5 the extremes, -0.5 / 0.5 the interior codes 1 / 2
    col = np.array([1.5, -1.5, -1.0, 0.0, 1.0, -0.5, 0.5, 0.25], dtype=np.float32)
    k[0, : col.size, 0, 0] = f32_to_bf16_bits(col)
    k[0, col.size :, 0, 0] = f32_to_bf16_bits(np.zeros(64 - col.size, np.float32))
    k[0, :, 1, 3] = 0  # an all-zero channel: the eps floor
    cache = quantize_keys(k, 64)
    codes = unpack_2bit(cache.codes)
    assert np.array_equal(codes[0, : col.size, 0, 0], [3, 0, 0, 2, 2, 1, 2, 2])
    for h in range(2):
        scale, oc, orr = _oracle_quantize(bf16_bits_to_f32(k[0, :, h]))
        assert np.array_equal(cache.scale[0, 0, h].view(np.uint32), scale.view(np.uint32))
        assert np.array_equal(codes[0, :, h], oc)
        assert np.array_equal(cache.residual[0, :, h], orr)
    assert set(np.unique(codes)) == {0, 1, 2, 3}
    # dequantised + residual reconstructs k within half an e4m3 step of the residual
    k32 = bf16_bits_to_f32(k)
    back = cache.dequantize()
    r = np.abs(cache.dequantize(residual=False) - k32)
    step = np.where(r < 2.0**-6, 2.0**-9, 2.0 ** (np.floor(np.log2(np.maximum(r, 2.0**-6))) - 3))
    assert np.all(np.abs(back - k32) <= step / 2 + 1e-12)


def test_tail_block_stays_bf16() -> None:
    k = make_inputs(DecodeShape(1, 300, 8, 2, 16), 0).k
    c = quantize_keys(k, 128)
    assert c.n_blocks == 2 and c.quantized_tokens == 256
    assert np.array_equal(c.tail, k[:, 256:]) and c.codes.shape == (1, 256, 2, 4)


# -- scan, threshold, keep ------------------------------------------------------------------


def _oracle_approx(q: np.ndarray, cache, b: int, h: int, g: int, t: int, hkv: int) -> np.float32:  # noqa: ANN001
    """Approximate score of one token by exact rational sums (Fraction), the documented
    roundings applied once each."""
    d = q.shape[-1]
    qh = bf16_bits_to_f32(q[b, h * (q.shape[1] // hkv) + g]).astype(np.float16)
    s16 = cache.scale[b, t // cache.block_tokens, h].astype(np.float16)
    qs = (qh * s16).astype(np.float16)
    code = unpack_2bit(cache.codes[b, t, h])
    dot = np.float32(float(sum(Fraction(float(a)) * int(c) for a, c in zip(qs, code, strict=True))))
    zero = np.float32(float(sum(Fraction(float(a)) for a in qs)))
    sq = np.float32(dot + np.float32(zero * np.float32(-1.5)))
    return np.float32(
        np.float32(sq * np.float32(1 / math.sqrt(d))) * np.float32(1.4426950408889634)
    )


def test_scan_scores_equal_exact_rational_oracle() -> None:
    shape = DecodeShape(1, 256, 8, 2, 32)
    inp = make_peaked_inputs(shape, 5)
    cache = quantize_keys(inp.k, 64)
    approx = ffd_approx_scores(inp.q, cache)
    rng = np.random.default_rng(0)
    for _ in range(40):
        h, g, t = int(rng.integers(2)), int(rng.integers(4)), int(rng.integers(256))
        want = _oracle_approx(inp.q, cache, 0, h, g, t, 2)
        assert approx[0, h, g, t].view(np.uint32) == want.view(np.uint32)


def test_threshold_and_keep_rules_against_brute_force() -> None:
    rng = np.random.default_rng(1)
    approx = rng.standard_normal((2, 3, 4, 8 * 16)).astype(np.float32) * 4
    for base, dlog2 in (("2", 5.0), ("e", 5.0 * math.log2(math.e))):
        thr = ffd_threshold(approx, delta=5.0, delta_base=base)
        keep = ffd_keep(approx, thr, 16)
        for b in range(2):
            for h in range(3):
                for g in range(4):
                    ref = max(approx[b, h, g, list(range(16)) + list(range(112, 128))])
                    assert thr[b, h, g] == np.float32(ref - np.float32(dlog2))
                for j in range(8):
                    blk = approx[b, h, :, j * 16 : (j + 1) * 16]
                    assert keep[b, h, j] == any(blk[g].max() >= thr[b, h, g] for g in range(4))
    forced = ffd_keep(approx, thr, 16, keep_ratio=0.3)
    assert np.all(forced.sum(-1) == 3)  # ceil(0.3 * 8)
    margin = (approx.reshape(2, 3, 4, 8, 16).max(-1) - thr[..., None]).max(2)
    for b in range(2):
        for h in range(3):
            best = sorted(range(8), key=lambda j: (-float(margin[b, h, j]), j))[:3]  # ties: earlier
            assert set(np.nonzero(forced[b, h])[0]) == set(best)
    with pytest.raises(ValueError):
        ffd_keep(approx, thr, 16, keep_ratio=0.0)
    with pytest.raises(ValueError):
        ffd_threshold(approx, delta_base="10")  # type: ignore[arg-type]


def test_delta_base_2_prunes_more_than_base_e() -> None:
    shape = DecodeShape(1, 4096)
    inp = make_peaked_inputs(shape, 2)
    r2 = ffd_decode(shape, inputs=inp, delta_base="2", dense=False)
    re = ffd_decode(shape, inputs=inp, delta_base="e", dense=False)
    assert r2.keep_ratio < re.keep_ratio
    assert np.all(r2.tile_keep <= re.tile_keep)


# -- sparse split kernel ----------------------------------------------------------------------


@pytest.mark.parametrize(("base", "p_dtype"), [("e", "bf16"), ("2", "fp32")])
def test_gathered_split_kernel_equals_the_skeleton_bit_for_bit(base: str, p_dtype: str) -> None:
    shape = DecodeShape(2, 1000, 8, 2, 64)
    inp = make_inputs(shape, 9, key_scale=2.0)
    plan = plan_split_k(shape, block_n=128, num_splits=3)
    keep = np.random.default_rng(4).random((2, 2, 8)) < 0.6
    keep[:, :, 0] = True
    want = split_k_partials(inp, plan, softmax_base=base, p_dtype=p_dtype, tile_keep=keep)
    q = bf16_bits_to_f32(inp.q).reshape(2, 2, 4, 64)
    kf = bf16_bits_to_f32(inp.k)
    scale = _score_scale(64, base)

    def scores(bi, hi, ti):  # noqa: ANN001, ANN202
        tok = ti[:, None] * 128 + np.arange(128)
        kk = kf[bi[:, None], np.minimum(tok, 999), hi[:, None]]
        s = _tree_sum(q[bi, hi][:, :, None, :] * kk[:, None], axis=-1) * scale
        return np.where((tok < 1000)[:, None, :], s, np.float32(-np.inf))

    got = split_k_partials_gathered(inp.v, plan, keep, scores, softmax_base=base, p_dtype=p_dtype)
    for name in ("o", "m", "l"):
        assert np.array_equal(getattr(got, name), getattr(want, name), equal_nan=True), name


def _sparse_oracle(r) -> np.ndarray:  # noqa: ANN001
    """float64 attention over the attended tokens with the cache's scores: codes, fp16-rounded
    q * scale, the e4m3 residual against fp16 q, the bf16 tail."""
    s = r.plan.shape
    b, hkv, g, d, t = s.batch, s.kv_heads, s.group, s.head_dim, s.context
    c = r.cache
    bs, tq = c.block_tokens, c.quantized_tokens
    q16 = bf16_bits_to_f32(r.inputs.q).astype(np.float16).reshape(b, hkv, g, d)
    s16 = np.repeat(c.scale.astype(np.float16), bs, axis=1)  # [B, Tq, Hkv, D]
    codes = unpack_2bit(c.codes).astype(np.float64) - 1.5
    res = _E4M3_VALUES[c.residual].astype(np.float64)
    out = np.zeros((b, hkv, g, d))
    v = bf16_bits_to_f32(r.inputs.v).astype(np.float64)
    for bi in range(b):
        for h in range(hkv):
            toks = np.concatenate(
                [np.arange(j * bs, min(t, (j + 1) * bs)) for j in np.nonzero(r.tile_keep[bi, h])[0]]
            )
            qt = toks[toks < tq]
            qs = (q16[bi, h][:, None, :] * s16[bi, qt, h][None]).astype(np.float16)  # [G, n, D]
            sc = (qs.astype(np.float64) * codes[bi, qt, h][None]).sum(-1)
            sc += q16[bi, h].astype(np.float64) @ res[bi, qt, h].T
            kt = bf16_bits_to_f32(c.tail[bi, :, h]).astype(np.float64)
            st = bf16_bits_to_f32(r.inputs.q[bi]).reshape(hkv, g, d)[h].astype(np.float64) @ kt.T
            sc = np.concatenate([sc, st[:, : toks[toks >= tq].size]], axis=1) / math.sqrt(d)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            out[bi, h] = p @ v[bi, toks, h] / p.sum(-1)[:, None]
    return out.reshape(b, s.q_heads, d)


@pytest.mark.parametrize(("context", "keep"), [(1000, None), (2048, 0.25), (700, 1.0)])
def test_ffd_output_within_the_derived_bound_of_a_float64_sparse_oracle(
    context: int, keep: float | None
) -> None:
    shape = DecodeShape(2, context, 8, 2, 64)
    r = ffd_decode(shape, seed=context, keep_ratio=keep, num_splits=3)
    ref = _sparse_oracle(r)
    out = bf16_bits_to_f32(r.out).astype(np.float64)
    v = np.abs(bf16_bits_to_f32(r.inputs.v).astype(np.float64))
    # |v|-weighted mean under the oracle's p, as in the W1 bound; float32 scores add <= 2^-14
    # relative to every p (|s log2 e| < 2^6, four float32 roundings, exp2)
    a = np.abs(ref) + v.mean()
    bound = 2.0**-8 * np.abs(ref) + (2.0**-8 + 2.0**-14) * a
    assert np.all(np.abs(out - ref) <= bound)
    assert r.tile_keep[:, :, -1].all() or context % 128 == 0  # the tail is always attended


def test_keep_ratio_comes_from_the_math_and_error_shrinks_with_keep() -> None:
    shape = DecodeShape(1, 8192)
    inp = make_peaked_inputs(shape, 7)
    cache = quantize_keys(inp.k, 128)
    top = ffd_decode(shape, inputs=inp, cache=cache)
    assert 0 < top.keep_ratio < 0.5  # peaked inputs: most blocks below the threshold
    assert top.tile_keep[:, :, 0].all() and top.tile_keep[:, :, -1].all()  # sink, recent
    lo = ffd_decode(shape, inputs=inp, cache=cache, keep_ratio=1 / 64)
    full = ffd_decode(shape, inputs=inp, cache=cache, keep_ratio=1.0)
    assert full.keep_ratio == 1.0 and lo.keep_ratio == 1 / 64
    assert full.rel_error < top.rel_error < lo.rel_error
    # dense keep: the error is the cache's (2-bit + e4m3 residual keys), a few per cent
    assert full.rel_error < 0.05
    meta = top.trace.meta["workload"]["metrics"]
    assert meta["keep_ratio"][0] == top.keep_ratio and meta["attn_out_rel_err"][0] == top.rel_error


def test_same_seed_same_bits() -> None:
    shape = DecodeShape(1, 1024)
    a, b = ffd_decode(shape, seed=1, dense=False), ffd_decode(shape, seed=1, dense=False)
    assert np.array_equal(a.out, b.out) and a.trace.equals(b.trace)


# -- trace ---------------------------------------------------------------------------------------


def test_trace_bytes_follow_the_cache_format() -> None:
    shape = DecodeShape(1, 4096 + 40)
    r = ffd_decode(shape, seed=3, keep_ratio=0.25, dense=False)
    tr = r.trace
    ntb, tq, hkv = 32, 4096, 8
    kept = int(r.tile_keep[:, :, :ntb].sum())
    assert kept == 8 * 8
    thr_codes = hkv * 32 * 32  # 16 sink + 16 recent tokens of 32 B per head
    assert tr.total_bytes(tensor="K_codes") == tq * hkv * 32 + thr_codes
    assert tr.total_bytes(tensor="K_scale") == ntb * hkv * 512 + hkv * 2 * 512
    assert tr.total_bytes(tensor="K_residual") == kept * 128 * 128
    assert tr.total_bytes(tensor="K_tail") == hkv * 40 * 256
    assert tr.total_bytes(tensor="V") == (kept * 128 + hkv * 40) * 256
    codes = tr.memory[tr.memory["tensor"] == tr.table("tensor").index("K_codes")]
    assert set(codes["nbytes"]) == {32} and set(codes["stride"]) == {hkv * 32}
    again = ffd_trace(shape, tile_keep=r.tile_keep)
    for kind in ("memory", "compute", "events"):
        assert np.array_equal(getattr(again, kind), getattr(tr, kind)), kind


def test_dram_traffic_ratio_matches_the_traffic_bound() -> None:
    from coaccel.sim.gpu_mem import load_arch, simulate

    arch = load_arch("h200")
    shape = DecodeShape(1, 65536)
    w1 = simulate(arch, "flashdecode:T=65536,splits=128", mode="analytical")
    for rho in (0.02, 0.1):
        w2 = simulate(arch, ffd_trace(shape, keep_ratio=rho, seed=0), mode="analytical")
        ratio = w1.offchip.read_bytes / w2.offchip.read_bytes
        bound = traffic_bound_speedup(w2.metrics()["workload.keep_ratio"][0])
        assert abs(ratio / bound - 1) < 0.02, (rho, ratio, bound)
        assert w2.seconds < w1.seconds
    assert traffic_bound_speedup(0.0) == pytest.approx(512 / 36)
    assert traffic_bound_speedup(0.1) == pytest.approx(512 / (36 + 38.4))


def test_workload_spec_and_metrics() -> None:
    from coaccel.sim.gpu_mem import load_arch, load_workload, simulate

    w = load_workload("ffd:T=2048,B=1,keep=0.25,ref=0")
    assert w.trace.meta["workload"]["keep_rule"] == "synthetic"
    res = simulate(load_arch("h200"), "ffd:T=2048,delta=7", mode="analytical")
    m = res.metrics()
    assert 0 < m["workload.keep_ratio"][0] <= 1 and m["workload.attn_out_rel_err"][1] == "1"
    for bad in ("ffd:T=2048,ref=0", "ffd:T=2048,keep=x", "ffd:T=2048,kep=0.1", "ffd:T=64,ref=2"):
        with pytest.raises(ConfigError):
            load_workload(bad)


def test_validation_rows_speedup_below_bound_and_error_against_keep() -> None:
    from coaccel.sim.gpu_mem import load_arch, simulate
    from coaccel.targets.gpu.ffd import ffd_validation, keep_for_speedup, paper_speedup

    paper = paper_speedup().value  # 11.6x, arch_configs/validation/gpu.yaml
    assert traffic_bound_speedup(keep_for_speedup(paper)) == pytest.approx(paper)
    arch = load_arch("h200")
    anchors, notes = ffd_validation(
        {"h200": arch}, {"h200": (arch,)}, lambda a, w, m: simulate(a, w, mode=m),
        context=65536, keep_ratios=(0.02, 0.1, 0.5), error_context=4096,
        error_keep_ratios=(1 / 32, 0.25, 1.0),
    )  # fmt: skip
    speed = [a for a in anchors if a.group == "w2"]
    err = [a for a in anchors if a.group == "w2_error"]
    assert len(speed) == 4 and len(err) == 5 and len(notes) == 3
    sp = [a.ours for a in speed[:3]]
    assert sp[0] > sp[1] > sp[2] > 1  # fewer kept blocks, faster
    assert all(a.ours <= a.paper for a in speed[:3])  # never past the bandwidth bound
    assert speed[3].paper == paper and speed[3].fit == "predicted"
    forced = [a.ours for a in err[2:]]
    assert forced[0] > forced[1] > forced[2] > 0
