"""Perplexity as a sweep objective: a real decoder with a design's number formats in its forward
pass, scored once per format setting and cached in the store."""

from __future__ import annotations

import numpy as np
import pytest

from coaccel.dse.accuracy import PerplexityScorer, format_setting
from coaccel.dse.spec import PERPLEXITY_METRICS, AccuracySpec, load_spec
from coaccel.dse.store import Store
from coaccel.spine.config import ConfigError

pytest.importorskip("gguf")
pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

ACC = AccuracySpec(measure="perplexity", data="real", windows=2, window_tokens=48)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("ppl") / "s.sqlite")
    sc = PerplexityScorer("hbq_e_28nm", ACC, store)
    base = sc.metrics({})
    ub16 = sc.metrics({"formats.weight.ub_elems": 16, "formats.activation.ub_elems": 16})
    return store, sc, base, ub16


def test_perplexity_matches_the_decoders_own_evaluation(scored):
    """The scorer's pooled perplexity equals the decoder's perplexity() of the same windows
    with the same numerics (equal-length windows: pooled = exp(mean of window NLLs))."""
    _, sc, base, _ = scored
    m = sc._model.with_numerics(sc._numerics(sc._base))
    nll = [np.log(m.perplexity(w).perplexity) for w in sc._windows]
    # the logits are float32 and perplexity() runs the LM head in chunks of its own, so BLAS
    # may block the sums differently: agreement to a few float32 ulps, not bit for bit
    assert base["perplexity"][0] == pytest.approx(float(np.exp(np.mean(nll))), rel=1e-5)
    spread = np.std(np.exp(nll), ddof=1)
    assert base["perplexity_std"][0] == pytest.approx(float(spread), rel=1e-5)
    f = sc._model
    f_ppl = float(np.exp(np.mean([np.log(f.perplexity(w).perplexity) for w in sc._windows])))
    assert base["perplexity_increase_pct"][0] == pytest.approx(
        (base["perplexity"][0] / f_ppl - 1) * 100, rel=1e-4
    )
    f_nll = [np.log(f.perplexity(w).perplexity) for w in sc._windows]
    paired = np.std([np.exp(a - b) - 1 for a, b in zip(nll, f_nll, strict=True)], ddof=1) * 100
    assert base["perplexity_increase_pct_std"][0] == pytest.approx(float(paired), rel=1e-3)
    assert (
        base["perplexity_increase_pct_std"][0]
        < base["perplexity_std"][0] / base["perplexity"][0] * 100
    )  # paired windows: tighter than the perplexity's own spread
    assert {k: u for k, (_, u) in base.items()} == dict(PERPLEXITY_METRICS)


def test_quantized_formats_cost_perplexity_and_agreement(scored):
    """4-bit weights, activations and KV cost a small model accuracy; the setting matters."""
    _, _, base, ub16 = scored
    for r in (base, ub16):
        assert r["perplexity_increase_pct"][0] > 0
        assert 0 < r["top1_agreement"][0] < 1
    assert base["perplexity"][0] != ub16["perplexity"][0]


def test_scores_are_cached_in_the_store_per_setting(scored):
    store, sc, base, ub16 = scored
    assert sc.studies_run == 2
    again = PerplexityScorer("hbq_e_28nm", ACC, store)
    assert again.metrics({}) == base
    assert again.metrics({"formats.weight.ub_elems": 16, "formats.activation.ub_elems": 16}) == ub16
    assert again.studies_run == 0 and again._model is None  # nothing loaded, nothing rerun
    # another text size is another study: not a cache hit
    other = PerplexityScorer(
        "hbq_e_28nm", AccuracySpec(measure="perplexity", data="real", windows=2,
                                   window_tokens=40), store)  # fmt: skip
    assert other.metrics({})["perplexity"] != base["perplexity"]
    assert other.studies_run == 1


def test_the_setting_ignores_hardware_parameters(scored):
    _, sc, _, _ = scored
    assert format_setting(sc._base)["weight"]["ub_elems"] == 32
    before = sc.studies_run
    sc.metrics({"pe_array.n_pes": 64})  # not a format parameter: the base setting, memoized
    assert sc.studies_run == before


def test_spec_refuses_synthetic_perplexity_and_unknown_metrics(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nbase: hbq_e_28nm\nworkloads: [llama-3.2-1b:prefill_1024]\n"
        "mode: analytical\nparameters:\n  pe_array.n_pes: [16, 32]\n"
        "accuracy: {measure: perplexity, data: synthetic}\n"
        "objectives:\n  - {metric: accuracy_sqnr_db, goal: maximize}\n"
    )
    with pytest.raises(ConfigError, match=r"accuracy\.data: measure perplexity runs a real "):
        load_spec(spec)
    spec.write_text(spec.read_text().replace("data: synthetic", "data: auto"))
    with pytest.raises(ConfigError, match=r"no result computes metric 'accuracy_sqnr_db'"):
        load_spec(spec)
    spec.write_text(spec.read_text().replace("accuracy_sqnr_db", "perplexity"))
    ls = load_spec(spec)
    assert ls.accuracy is not None and ls.accuracy.data == "real"
    assert ls.metric_units["perplexity"] == "1"
    assert "accuracy_sqnr_db" not in ls.metric_units
