"""The synthetic LLM-like attention generator: shapes, determinism, AR(1) statistics, RoPE."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.models.deltallm import attention, quantize_int8
from coaccel.models.nn import (
    AttentionTensors,
    apply_rope,
    ar1_process,
    rope_frequencies,
    synthetic_attention,
)
from coaccel.spine.workload import ModelShape, RopeScaling


def _lag_corr(x: np.ndarray, lag: int) -> float:
    """Mean over (head, channel) of the sample autocorrelation at ``lag`` along axis 1."""
    c = x - x.mean(axis=1, keepdims=True)
    num = (c[:, lag:] * c[:, :-lag]).sum(axis=1)
    den = (c * c).sum(axis=1)
    return float((num / den).mean())


@pytest.mark.parametrize(
    ("model", "hq", "hkv", "d"),
    [("bitnet-b1.58-2b-4t", 20, 5, 128), ("llama-3.2-1b", 32, 8, 64)],
)
def test_shapes_follow_the_model_files(model: str, hq: int, hkv: int, d: int) -> None:
    # Dimensions from the models' config.json files (HF-BITNET-2B4T, HF-LLAMA32-1B).
    s = synthetic_attention(np.random.default_rng(0), model, tokens=9)
    t = s.tensors
    assert t.q.shape == (hq, 9, d) and t.k.shape == (hkv, 9, d) and t.v.shape == (hkv, 9, d)
    assert t.group == 4 and t.tokens == 9
    assert t.q_int8.dtype == np.int8 and t.k_int8.dtype == np.int8 and t.v_int8.dtype == np.int8
    assert t.rope and t.causal_model and t.source == f"synthetic:{model}"
    sub = synthetic_attention(np.random.default_rng(0), model, tokens=9, kv_heads=1).tensors
    assert sub.q.shape == (4, 9, d) and sub.k.shape == (1, 9, d)


def test_int8_tensors_are_the_reference_quantizer() -> None:
    t = synthetic_attention(np.random.default_rng(3), "llama-3.2-1b", tokens=17, kv_heads=2)
    t = t.tensors
    for f, q8, s in (
        (t.q, t.q_int8, t.q_scale),
        (t.k, t.k_int8, t.k_scale),
        (t.v, t.v_int8, t.v_scale),
    ):
        ref_q, ref_s = quantize_int8(f)
        np.testing.assert_array_equal(q8, ref_q)
        np.testing.assert_array_equal(s, ref_s)
        # absmax/127 scaling: every head reaches ±127 exactly once rounded.
        assert (np.abs(q8.astype(np.int64)).max(axis=(1, 2)) == 127).all()


def test_same_seed_same_tensors_other_seed_differs() -> None:
    a = synthetic_attention(np.random.default_rng(7), tokens=12, kv_heads=2).tensors
    b = synthetic_attention(np.random.default_rng(7), tokens=12, kv_heads=2).tensors
    c = synthetic_attention(np.random.default_rng(8), tokens=12, kv_heads=2).tensors
    for name in ("q", "k", "v", "q_int8", "k_int8", "v_int8"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert not np.array_equal(getattr(a, name), getattr(c, name))


@pytest.mark.parametrize("a", [0.0, 0.5, 0.9, 0.97])
def test_ar1_process_has_the_set_autocorrelation(a: float) -> None:
    # Closed form of a stationary AR(1): unit variance, corr at lag s = a^s.
    x = ar1_process(np.random.default_rng(11), (4, 4000, 64), a)
    assert abs(float(x.var()) - 1.0) < 0.05
    assert abs(_lag_corr(x, 1) - a) < 0.01
    assert abs(_lag_corr(x, 2) - a * a) < 0.015


def test_pre_rope_keys_carry_the_key_coefficient() -> None:
    s = synthetic_attention(
        np.random.default_rng(5), "bitnet-b1.58-2b-4t", tokens=3000, key_ar=0.8, query_ar=0.3
    )
    # Per-channel offsets and scales do not change a channel's autocorrelation.
    assert abs(_lag_corr(s.k_pre, 1) - 0.8) < 0.01
    assert abs(_lag_corr(s.q_pre, 1) - 0.3) < 0.01
    assert abs(_lag_corr(s.tensors.v, 1) - 0.5) < 0.01
    assert s.key_ar == 0.8


def test_rope_frequencies_closed_form() -> None:
    f = rope_frequencies(128, 500000.0)
    np.testing.assert_allclose(f, 500000.0 ** (-np.arange(64) * 2.0 / 128), rtol=1e-15)
    assert f[0] == 1.0
    # llama3 scaling (factor 32, low 1, high 4, original 8192): wavelengths under 8192/4 tokens keep
    # their frequency, those over 8192/1 are divided by 32, the band between is blended.
    sc = RopeScaling(
        type="llama3",
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    )
    g = rope_frequencies(64, 500000.0, sc)
    base = 500000.0 ** (-np.arange(32) * 2.0 / 64)
    wl = 2 * math.pi / base
    keep, div = wl < 2048, wl > 8192
    assert keep.any() and div.any() and (~keep & ~div).any()
    np.testing.assert_allclose(g[keep], base[keep], rtol=1e-15)
    np.testing.assert_allclose(g[div], base[div] / 32, rtol=1e-15)
    mid = ~keep & ~div
    assert ((g[mid] < base[mid]) & (g[mid] > base[mid] / 32)).all()
    with pytest.raises(ValueError, match="even"):
        rope_frequencies(7, 1e4)


def test_rope_is_a_rotation() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 20, 16))
    y = rng.standard_normal((3, 20, 16))
    f = rope_frequencies(16, 10000.0)
    rx, ry = apply_rope(x, f), apply_rope(y, f)
    # Norm of every rotated pair (i, i + d/2) is kept; position 0 is not moved.
    pair = lambda a: a[..., :8] ** 2 + a[..., 8:] ** 2  # noqa: E731
    np.testing.assert_allclose(pair(rx), pair(x), rtol=1e-12)
    np.testing.assert_array_equal(rx[:, 0], x[:, 0])
    # The inverse rotation (negated frequencies) undoes it.
    np.testing.assert_allclose(apply_rope(rx, -f), x, atol=1e-12)
    # Scores depend only on the relative position: shifting every position changes nothing.
    pos = np.arange(20) + 37
    sx, sy = apply_rope(x, f, positions=pos), apply_rope(y, f, positions=pos)
    np.testing.assert_allclose(
        np.einsum("htd,hsd->hts", sx, sy), np.einsum("htd,hsd->hts", rx, ry), atol=1e-10
    )


def test_generator_applies_rope_to_pre_rope_tensors() -> None:
    s = synthetic_attention(np.random.default_rng(4), "llama-3.2-1b", tokens=30, kv_heads=1)
    np.testing.assert_allclose(s.tensors.k, apply_rope(s.k_pre, s.freqs), rtol=0, atol=0)
    np.testing.assert_allclose(s.tensors.q, apply_rope(s.q_pre, s.freqs), rtol=0, atol=0)
    off = synthetic_attention(
        np.random.default_rng(4), "llama-3.2-1b", tokens=30, kv_heads=1, rope=False
    )
    np.testing.assert_array_equal(off.tensors.k, s.k_pre)
    assert not off.tensors.rope


def test_more_correlated_keys_are_sparser() -> None:
    rho = []
    for a in (0.0, 0.6, 0.95):
        t = synthetic_attention(
            np.random.default_rng(9), "llama-3.2-1b", tokens=48, kv_heads=1, key_ar=a, rope=False
        ).tensors
        r = attention(
            t.q_int8,
            t.k_int8,
            t.v_int8,
            theta=4,
            window=8,
            tau=8.0,
            q_scale=t.q_scale,
            k_scale=t.k_scale,
        )
        rho.append(r.stats.delta_sparsity)
    assert rho[0] < rho[1] < rho[2]


def test_custom_shape_and_errors() -> None:
    shape = ModelShape(
        hidden=64, intermediate=128, layers=1, heads=4, kv_heads=2, head_dim=16, vocab=10,
        max_position_embeddings=64,
    )  # fmt: skip
    s = synthetic_attention(np.random.default_rng(0), shape, tokens=5)
    assert s.model == "custom" and s.tensors.q.shape == (4, 5, 16) and s.tensors.group == 2
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        synthetic_attention(np.random.default_rng(0), key_ar=1.0)
    with pytest.raises(ValueError, match="kv_heads"):
        synthetic_attention(np.random.default_rng(0), kv_heads=6)
    with pytest.raises(TypeError, match="Generator"):
        synthetic_attention(0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same T and d"):
        AttentionTensors.from_float(
            "x", np.zeros((2, 3, 4)), np.zeros((1, 4, 4)), np.zeros((1, 4, 4)), rope=False,
            causal_model=True,
        )  # fmt: skip


@pytest.mark.parametrize("c", [0.0, 0.5, 1.0])
def test_query_offsets_shared_within_a_group(c: float) -> None:
    s = synthetic_attention(
        np.random.default_rng(1), "llama-3.2-1b", tokens=3000, query_group_share=c,
        n_outlier_channels=0, query_mean_std=2.0,
    )  # fmt: skip
    mu = s.q_pre.mean(axis=1)  # [Hq, d]: the per-channel offsets, up to sampling noise
    g = s.tensors.group
    corr = [
        np.corrcoef(mu[h * g + a], mu[h * g + b])[0, 1]
        for h in range(mu.shape[0] // g)
        for a in range(g)
        for b in range(a + 1, g)
    ]
    # Offsets mu_h = sqrt(c)·z_group + sqrt(1-c)·z_h: correlation c between heads of a group.
    assert abs(float(np.mean(corr)) - c) < 0.1


def test_rope_lowers_delta_sparsity_in_the_fast_pairs() -> None:
    from coaccel.targets.deltallm_fpga.study import channel_sparsity

    kw = dict(tokens=256, kv_heads=8, key_ar=0.99, n_outlier_channels=0)
    rot = synthetic_attention(np.random.default_rng(6), "llama-3.2-1b", **kw).tensors
    flat = synthetic_attention(np.random.default_rng(6), "llama-3.2-1b", rope=False, **kw).tensors
    per_rot, per_flat = channel_sparsity([rot], 4), channel_sparsity([flat], 4)
    fast = np.r_[0:4, 32:36]  # pairs 0..3 turn by 1, 0.66, 0.44, 0.29 rad per token
    slow = np.r_[24:32, 56:64]  # wavelengths of thousands of tokens: nearly still over T = 256
    assert per_rot[fast].mean() < 0.5 * per_rot[slow].mean()
    # Without RoPE no channel group stands out (same law everywhere).
    assert abs(per_flat[fast].mean() - per_flat[slow].mean()) < 0.1
