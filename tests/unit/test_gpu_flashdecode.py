"""FlashDecoding split-K reference (coaccel.models.gpu): bf16 storage, split rule, numerics
against an independent scalar walk of the documented order and against dense float64
attention, and the trace layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.models.gpu import (
    DecodeShape,
    bf16_bits_to_f32,
    choose_num_splits,
    dense_attention_f64,
    f32_to_bf16_bits,
    flash_decode,
    flash_decode_trace,
    make_inputs,
    plan_split_k,
    reduce_partials,
    split_k_partials,
)
from coaccel.spine.trace import Trace

# -- bf16 ----------------------------------------------------------------------------------


def _positive_bf16_table() -> np.ndarray:
    """Values of the non-negative finite bf16 patterns 0 .. 0x7F7F as float64 (exact), built
    from exponent and fraction fields, not by bit reinterpretation; increasing with the
    pattern."""
    bits = np.arange(0x7F80, dtype=np.int64)
    exp, frac = bits >> 7, bits & 0x7F
    return np.where(
        exp == 0, frac * 2.0**-133, (1.0 + frac / 128.0) * np.exp2(exp.astype(float) - 127)
    )


def _oracle_bf16(x: np.ndarray) -> np.ndarray:
    """Nearest bf16 of |x| by table search, ties to the even pattern, at or beyond
    max + half ulp -> inf; the sign bit copied."""
    vals = _positive_bf16_table()
    assert np.all(np.diff(vals) > 0)
    a = np.abs(x.astype(np.float64))
    j = np.clip(np.searchsorted(vals, a), 1, vals.size - 1)
    lo, hi = vals[j - 1], vals[j]
    pick_hi = (hi - a < a - lo) | ((hi - a == a - lo) & (j % 2 == 0))
    out = np.where(a >= vals[j], j, np.where(pick_hi, j, j - 1))
    half_ulp_top = 2.0**127 / 256
    out = np.where(a >= vals[-1] + half_ulp_top, 0x7F80, out)
    return out | np.where(np.signbit(x), 0x8000, 0)


def test_bf16_every_code_point_round_trips() -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    back = f32_to_bf16_bits(bf16_bits_to_f32(bits))
    nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
    assert np.array_equal(back[~nan], bits[~nan])
    assert np.all(np.isnan(bf16_bits_to_f32(back[nan])))


def test_bf16_rounding_matches_nearest_even_oracle() -> None:
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 1 << 32, size=3000, dtype=np.uint64).astype(np.uint32)
    raw = raw[((raw >> 23) & 0xFF) != 0xFF]  # finite
    # exact ties (dropped half = 0x8000) with odd and even kept halves, and near-ties
    ties = (raw[:400] & 0xFFFF0000) | 0x8000
    near = (raw[400:800] & 0xFFFF0000) | np.uint32(0x7FFF)
    top = np.array(
        [0x7F7F8000, 0x7F7F7FFF, 0xFF7F8000, 0x7F7FFFFF, 0x00008000, 0x80018000], dtype=np.uint32
    )
    x = np.concatenate([raw, ties, near, top]).view(np.float32)
    got = f32_to_bf16_bits(x).astype(np.int64)
    assert np.array_equal(got, _oracle_bf16(x))


# -- split rule and plan ---------------------------------------------------------------------


def test_split_rule_fills_the_sms_and_respects_caps() -> None:
    # ceil(132 / (1 * 8)) = 17 CTAs per (b, h) fill 132 SMs once
    assert choose_num_splits(1, 8, 131072, n_sms=132) == 17
    assert choose_num_splits(1, 8, 131072, n_sms=132, waves=2) == 33
    assert choose_num_splits(64, 8, 131072, n_sms=132) == 1
    assert choose_num_splits(1, 1, 10**7, n_sms=10_000) == 128  # the cap
    assert choose_num_splits(1, 8, 300, n_sms=132) == 3  # only 3 tiles of 128


def test_plan_splits_are_whole_tiles_and_cover_the_context() -> None:
    plan = plan_split_k(DecodeShape(batch=1, context=1000), block_n=128, num_splits=7)
    # ceil(1000 / 7) = 143 -> 256 tokens per split -> 4 splits (3 full, one of 232)
    assert (plan.num_splits, plan.split_tokens) == (4, 256)
    assert list(plan.tiles_per_split) == [2, 2, 2, 2]
    plan = plan_split_k(DecodeShape(batch=2, context=131072), n_sms=132)
    assert plan.grid == (9, 2, 8)  # ceil(132 / 16) = 9
    assert plan.split_tokens == 14592 and plan.num_splits * plan.split_tokens >= 131072
    assert plan.smem_bytes_per_cta == 16 * 128 * 2 + 2 * 128 * 128 * 2  # q + one K, one V tile
    with pytest.raises(ValueError, match="block_n=96; valid choices: 64, 128, 256"):
        plan_split_k(DecodeShape(batch=1, context=64), block_n=96, num_splits=1)


# -- numerics: an independent scalar walk of the documented order --------------------------


def _pairwise(vals: list[np.float32]) -> np.float32:
    n = 1
    while n < len(vals):
        n *= 2
    xs = list(vals) + [np.float32(0)] * (n - len(vals))
    while len(xs) > 1:
        h = len(xs) // 2
        xs = [np.float32(xs[i] + xs[i + h]) for i in range(h)]
    return xs[0]


def _exp(x: np.float32, base: str) -> np.float32:
    return np.float32(2.0 ** float(x) if base == "2" else math.exp(float(x)))


def _bf16_scalar(x: np.float32) -> np.float32:
    return bf16_bits_to_f32(f32_to_bf16_bits(np.array([x], dtype=np.float32)))[0]


def _scalar_split_k(inputs, plan, base, p_dtype):  # noqa: ANN001, ANN202
    s = plan.shape
    q, k, v = (bf16_bits_to_f32(a) for a in (inputs.q, inputs.k, inputs.v))
    d, g, bn = s.head_dim, s.group, plan.block_n
    scale = np.float32(1 / math.sqrt(d))
    if base == "2":
        scale = np.float32(scale * np.float32(math.log2(math.e)))
    ns = plan.num_splits
    o = np.zeros((s.batch, s.q_heads, ns, d), np.float32)
    mm = np.zeros((s.batch, s.q_heads, ns), np.float32)
    ll = np.zeros((s.batch, s.q_heads, ns), np.float32)
    for b in range(s.batch):
        for hq in range(s.q_heads):
            h = hq // g
            for sp in range(ns):
                m, lr = np.float32(-np.inf), np.float32(0)
                acc = [np.float32(0)] * d
                lo = sp * plan.split_tokens
                hi = min(lo + plan.split_tokens, s.context)
                for t0 in range(lo, hi, bn):
                    toks = range(t0, t0 + bn)
                    sc = []
                    for t in toks:
                        if t < s.context:
                            dot = _pairwise(
                                [np.float32(q[b, hq, i] * k[b, t, h, i]) for i in range(d)]
                            )
                            sc.append(np.float32(dot * scale))
                        else:
                            sc.append(np.float32(-np.inf))
                    m_new = max(m, max(sc))
                    alpha = _exp(np.float32(m - m_new), base)
                    p = [_exp(np.float32(x - m_new), base) for x in sc]
                    lr = np.float32(np.float32(lr * alpha) + _pairwise(p))
                    pm = [_bf16_scalar(x) for x in p] if p_dtype == "bf16" else p
                    for i in range(d):
                        pv = _pairwise(
                            [
                                np.float32(pm[j] * (v[b, t, h, i] if t < s.context else 0))
                                for j, t in enumerate(toks)
                            ]
                        )
                        acc[i] = np.float32(np.float32(acc[i] * alpha) + pv)
                    m = m_new
                mm[b, hq, sp], ll[b, hq, sp] = m, lr
                o[b, hq, sp] = [np.float32(a / lr) for a in acc]
    return o, mm, ll


@pytest.mark.parametrize(("base", "p_dtype"), [("e", "bf16"), ("2", "fp32")])
def test_vectorised_numerics_equal_a_scalar_walk_bit_for_bit(base: str, p_dtype: str) -> None:
    shape = DecodeShape(batch=1, context=150, q_heads=4, kv_heads=2, head_dim=8)
    plan = plan_split_k(shape, block_n=64, num_splits=2)
    assert (plan.num_splits, plan.split_tokens) == (2, 128)
    inputs = make_inputs(shape, 3, key_scale=2.0)
    part = split_k_partials(inputs, plan, softmax_base=base, p_dtype=p_dtype)
    o, m, lr = _scalar_split_k(inputs, plan, base, p_dtype)
    assert np.array_equal(part.m.view(np.uint32), m.view(np.uint32))
    assert np.array_equal(part.l.view(np.uint32), lr.view(np.uint32))
    assert np.array_equal(part.o.view(np.uint32), o.view(np.uint32))
    # reduction, scalar: M, w_s = l_s exp(m_s - M), O = sum w o / sum w, RNE to bf16
    out = reduce_partials(part)
    for b in range(1):
        for hq in range(4):
            big = max(m[b, hq])
            w = [
                np.float32(lr[b, hq, s] * _exp(np.float32(m[b, hq, s] - big), base))
                for s in range(2)
            ]
            tot = _pairwise(w)
            for i in range(8):
                num = _pairwise([np.float32(w[s] * o[b, hq, s, i]) for s in range(2)])
                want = f32_to_bf16_bits(np.array([np.float32(num / tot)], np.float32))[0]
                assert out[b, hq, i] == want


def test_same_seed_same_bits() -> None:
    shape = DecodeShape(batch=2, context=700)
    a = flash_decode(shape, seed=11, n_sms=132)
    b = flash_decode(shape, seed=11, n_sms=132)
    assert np.array_equal(a.out, b.out) and a.trace.equals(b.trace)
    c = flash_decode(shape, seed=12, n_sms=132)
    assert not np.array_equal(a.out, c.out)


# -- numerics against dense float64 attention ----------------------------------------------


def _error_bound(inputs, shape, ref, p_bf16: bool) -> np.ndarray:  # noqa: ANN001
    """Elementwise bound on |O - O64| (docs/gpu_decode.md, Accuracy): 2^-8 |O64| for the final
    RNE to bf16 (unit roundoff of an 8-bit significand), 2^-8 * A for P rounded to bf16 before
    P·V (each p has relative error <= 2^-8 while l sums the float32 p), and 2^-16 * A for the
    float32 arithmetic (tree sums of <= 2^12 terms, exp rounding, per-tile rescaling), with
    A = sum_t p_t |v_t| / sum_t p_t computed in float64."""
    b, hkv, g, d = shape.batch, shape.kv_heads, shape.group, shape.head_dim
    q = bf16_bits_to_f32(inputs.q).astype(float).reshape(b, hkv, g, d)
    k = bf16_bits_to_f32(inputs.k).astype(float)
    v = np.abs(bf16_bits_to_f32(inputs.v).astype(float))
    s = np.einsum("bhgd,bthd->bhgt", q, k) / math.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    a = (np.einsum("bhgt,bthd->bhgd", p, v) / p.sum(-1)[..., None]).reshape(ref.shape)
    return 2.0**-8 * np.abs(ref) + ((2.0**-8 if p_bf16 else 0.0) + 2.0**-16) * a


@pytest.mark.parametrize(
    ("context", "num_splits", "block_n", "base"),
    [(1, 1, 128, "e"), (1000, 4, 128, "e"), (2048, 16, 64, "2"), (777, 1, 256, "e")],
)
def test_output_within_the_derived_bound_of_dense_f64(
    context: int, num_splits: int, block_n: int, base: str
) -> None:
    shape = DecodeShape(batch=2, context=context)
    inputs = make_inputs(shape, context, key_scale=3.0)
    ref = dense_attention_f64(inputs, shape)
    errs = {}
    for p_dtype in ("bf16", "fp32"):
        r = flash_decode(
            shape,
            inputs=inputs,
            num_splits=num_splits,
            block_n=block_n,
            softmax_base=base,
            p_dtype=p_dtype,
        )
        out = bf16_bits_to_f32(r.out).astype(float)
        bound = _error_bound(inputs, shape, ref, p_dtype == "bf16")
        assert np.all(np.abs(out - ref) <= bound), p_dtype
        errs[p_dtype] = r.partials
    if context > 1:  # rounding P to bf16 changes the partial outputs
        assert not np.array_equal(errs["bf16"].o, errs["fp32"].o)


def test_tile_keep_attends_only_the_kept_tiles() -> None:
    shape = DecodeShape(batch=1, context=1000, q_heads=8, kv_heads=2)
    inputs = make_inputs(shape, 4)
    n_tiles = 8
    keep = np.zeros((1, 2, n_tiles), dtype=bool)
    keep[0, 0, [0, 3, 7]] = True
    keep[0, 1, [2]] = True
    r = flash_decode(shape, inputs=inputs, num_splits=4, tile_keep=keep, p_dtype="fp32")
    # dense reference over the kept tokens only, per KV head
    for h in range(2):
        toks = np.concatenate(
            [np.arange(j * 128, min(j * 128 + 128, 1000)) for j in np.nonzero(keep[0, h])[0]]
        )
        sub = type(inputs)(
            q=inputs.q[:, h * 4 : (h + 1) * 4],
            k=inputs.k[:, toks, h : h + 1],
            v=inputs.v[:, toks, h : h + 1],
        )
        sub_shape = DecodeShape(batch=1, context=toks.size, q_heads=4, kv_heads=1)
        ref = dense_attention_f64(sub, sub_shape)
        out = bf16_bits_to_f32(r.out[:, h * 4 : (h + 1) * 4]).astype(float)
        assert np.all(np.abs(out - ref) <= _error_bound(sub, sub_shape, ref, False))
    k_bytes = r.trace.total_bytes(space="HBM", rw="r")
    q_bytes = r.plan.n_ctas * 4 * 128 * 2  # every CTA reads its G = 4 query rows
    # kept tokens: head 0: 128 + 128 + (1000 - 896) = 360, head 1: 128; K and V rows of 256 B
    kv = 2 * (360 + 128) * 256
    ml_o = 8 * 4 * (8 + 128 * 4)  # reduce reads (m, l) and O_partial of 4 splits per row
    assert k_bytes == q_bytes + kv + ml_o


# -- trace ---------------------------------------------------------------------------------


def test_trace_reads_every_token_row_once_in_token_major_layout() -> None:
    shape = DecodeShape(batch=2, context=300, q_heads=4, kv_heads=2, head_dim=16)
    r = flash_decode(shape, num_splits=2, block_n=64)
    tr = r.trace
    mem = tr.memory
    tens = tr.decode("memory", "tensor")
    row = 16 * 2
    for name in ("K", "V"):
        sel = mem[tens == name]
        starts = np.concatenate(
            [
                a + np.arange(c) * st
                for a, c, st in zip(sel["addr"], sel["count"], sel["stride"], strict=True)
            ]
        )
        # token-major [B, T, Hkv, D]: row (b, t, h) at ((b * T + t) * Hkv + h) * D * 2
        want = np.arange(2 * 300 * 2) * row
        assert np.array_equal(np.sort(starts), want)
        assert np.all(sel["nbytes"] == row) and np.all(sel["stride"] == 2 * row)
    assert tr.meta["tensors"]["K"]["nbytes"] == 2 * 300 * 2 * row
    ev = tr.events
    begins = ev[ev["kind"] == 0]
    assert list(begins["ctas"]) == [r.plan.n_ctas, 2 * 4]
    assert begins["smem_bytes_per_cta"][0] == r.plan.smem_bytes_per_cta
    assert begins["threads_per_cta"][0] == 128 and begins["regs_per_thread"][0] == 128
    # every split-kernel CTA reads its q once and writes G partial rows of D fp32
    split = mem[mem["kernel"] == 0]
    ph = tr.decode("memory", "phase")[mem["kernel"] == 0]
    assert np.array_equal(np.sort(split["cta"][ph == "load_q"]), np.arange(r.plan.n_ctas))
    w = split[
        (ph == "write_partial") & (tr.decode("memory", "tensor")[mem["kernel"] == 0] == "O_partial")
    ]
    assert np.all(w["count"] == 2) and np.all(w["nbytes"] == 16 * 4)


def test_trace_only_path_equals_the_full_trace(tmp_path) -> None:  # noqa: ANN001
    shape = DecodeShape(batch=3, context=513)
    full = flash_decode(shape, n_sms=132, seed=0).trace
    fast = flash_decode_trace(shape, n_sms=132)
    for kind in ("memory", "compute", "events"):
        assert np.array_equal(getattr(full, kind), getattr(fast, kind)), kind
    full.save(tmp_path / "w1.npz")
    assert Trace.load(tmp_path / "w1.npz").equals(full)


def test_trace_at_128k_is_small_and_moves_the_whole_cache() -> None:
    shape = DecodeShape(batch=1, context=131072)
    tr = flash_decode_trace(shape, n_sms=132)
    kv = shape.kv_bytes()
    assert kv == 512 * 2**20
    tens = tr.decode("memory", "tensor")
    mem = tr.memory
    kv_read = int((mem["nbytes"] * mem["count"])[(tens == "K") | (tens == "V")].sum())
    assert kv_read == kv
    # one K and one V record per tile per (b, h): 1024 tiles x 8 heads
    assert int(((tens == "K") | (tens == "V")).sum()) == 2 * 1024 * 8
