"""Perplexity as a sweep objective for designs that change attention: the targets' accuracy
hooks (DeltaLLM's datapath on the KV260, FFD's block selection on GPUs), their settings (what
keys the accuracy cache), the scorer's caching and exactness, and the spec's checks."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest

from coaccel import simulation
from coaccel.dse.accuracy import PerplexityScorer, format_variant
from coaccel.dse.spec import AccuracySpec, load_spec
from coaccel.dse.store import Store
from coaccel.spine.config import ConfigError, override
from coaccel.spine.target import AccuracyVariant
from coaccel.targets.deltallm_fpga import accuracy as dl_accuracy
from coaccel.targets.gpu import accuracy as gpu_accuracy

LLAMA = "llama-3.2-1b:prefill_256"


@pytest.fixture(scope="module")
def kv260():
    return simulation.load_arch("kv260")[1]


@pytest.fixture(scope="module")
def h200():
    return simulation.load_arch("gpu/h200")[1]


def _model_installed() -> bool:
    from coaccel.models.nn import locate_model
    from coaccel.spine.errors import CoaccelError

    try:
        locate_model("smollm2-135m")
    except CoaccelError:
        return False
    return True


needs_model_package = pytest.mark.skipif(
    not _model_installed(), reason="the smollm2-135m weight package is not installed"
)


# ------------------------------------------------------------------ the hooks' settings


def test_targets_declare_the_hook():
    assert simulation.target("deltallm_fpga").accuracy_variant is not None
    assert simulation.target("gpu").accuracy_variant is not None
    assert simulation.target("hbq_asic").accuracy_variant is None  # formats: format_variant


def test_deltallm_setting_is_the_delta_setting_and_ignores_hardware(kv260):
    v = dl_accuracy.accuracy_variant(kv260, LLAMA)
    assert v.mode == "prefill"
    assert v.setting == {
        "attention": "deltallm", "numerics": "fixed", "theta": 4, "window": 16, "tau": 8.0,
        "lane_layout": "group", "query_block": 4, "n_sink": 1,
    }  # fmt: skip
    hw = override(kv260, {"datapath.macs_per_lane": 8, "freq_mhz": 200,
                          "buffers.max_tokens": 512, "keys.layers_simulated": 2})  # fmt: skip
    assert dl_accuracy.accuracy_variant(hw, LLAMA).setting == v.setting
    # 8 lanes hold P_q = 2 tokens of Llama's G = 4 query heads: another VSSOS vector
    lanes8 = override(kv260, {"datapath.lanes": 8})
    assert dl_accuracy.accuracy_variant(lanes8, LLAMA).setting["query_block"] == 2
    for key, value, field in (
        ("algorithm.theta", 8, "theta"),
        ("algorithm.window_tokens", 32, "window"),
        ("algorithm.tau_log2", 4.0, "tau"),
        ("algorithm.n_sink", 2, "n_sink"),
    ):
        s = dl_accuracy.accuracy_variant(override(kv260, {key: value}), LLAMA).setting
        assert s[field] == value and s != v.setting
    never = dl_accuracy.accuracy_variant(override(kv260, {"algorithm.tau_log2": None}), LLAMA)
    assert never.setting["tau"] is None  # no skipping: τ = ∞ (JSON has no infinity)
    assert math.isinf(dl_accuracy.delta_setting(override(kv260, {"algorithm.tau_log2": None}),
                                                 LLAMA).tau)  # fmt: skip


def test_deltallm_refuses_what_the_forward_pass_does_not_model(kv260):
    with pytest.raises(ValueError, match=r"algorithm\.denom_mode 'kept' is not modelled"):
        dl_accuracy.accuracy_variant(override(kv260, {"algorithm.denom_mode": "kept"}), LLAMA)
    with pytest.raises(ValueError, match=r"engine 'tellme_v2'"):
        dl_accuracy.accuracy_variant(simulation.load_arch("tellme_v2")[1], LLAMA)
    with pytest.raises(ValueError, match=r"numerics: unknown value 'int4'"):
        dl_accuracy.accuracy_variant(kv260, LLAMA, numerics="int4")


def test_ffd_setting_comes_from_the_workloads_keep_rule_only(h200):
    v = gpu_accuracy.accuracy_variant(h200, "ffd:context=4096,delta=5")
    assert v.mode == "decode" and v.min_prompt_tokens == 128
    assert v.setting == {"attention": "ffd", "block_tokens": 128, "delta_base": "2",
                         "sink_tokens": 16, "recent_tokens": 16, "delta": 5.0}  # fmt: skip
    other_gpu = override(h200, {"sm.count": 108, "dram": "dram/hbm2e_a100_80g.yaml"})
    for arch, wl in (
        (other_gpu, "ffd:context=4096,delta=5"),
        (h200, "ffd:context=16384,delta=5,batch=4,seed=3"),  # time only
        (h200, "ffd:T=65536,delta=5"),
    ):
        assert gpu_accuracy.accuracy_variant(arch, wl).setting == v.setting
    assert gpu_accuracy.accuracy_variant(h200, "ffd:context=4096,delta=7").setting != v.setting
    # a forced keep ratio does not depend on the threshold offset (it shifts every margin)
    keep = gpu_accuracy.accuracy_variant(h200, "ffd:context=4096,keep=0.25,delta=7").setting
    assert keep == gpu_accuracy.accuracy_variant(h200, "ffd:context=16384,keep=0.25").setting
    assert keep["keep"] == 0.25 and "delta" not in keep
    exact = gpu_accuracy.accuracy_variant(h200, "flashdecode:context=8192,batch=8")
    assert exact.setting == {"attention": "exact"} and exact.transform is None
    with pytest.raises(ValueError, match=r"workload 'nosa'"):
        gpu_accuracy.accuracy_variant(h200, "nosa:context=8192")
    with pytest.raises(ValueError, match=r"not a GPU workload string"):
        gpu_accuracy.accuracy_variant(h200, "llama-3.2-1b:decode_4k")


def test_format_variant_keeps_the_earlier_setting_and_adds_the_kv_format():
    hbq = simulation.load_arch("hbq_e_28nm")[1]
    t = simulation.target("hbq_asic")
    v = format_variant(hbq, "llama-3.2-1b:prefill_1024", operand_format=t.operand_format)
    assert set(v.setting) == {"weight", "activation", "kv"} and v.mode == "prefill"
    no_kv = format_variant(hbq, None, operand_format=t.operand_format, kv=False)
    assert set(no_kv.setting) == {"weight", "activation"}
    hw = override(hbq, {"pe_array.n_pes": 64})
    assert format_variant(hw, None, operand_format=t.operand_format).setting == v.setting


def test_the_scorer_maps_points_to_settings_without_loading_the_model(tmp_path):
    acc = AccuracySpec(measure="perplexity", data="real", windows=2, window_tokens=48)
    sc = PerplexityScorer("kv260", acc, Store(tmp_path / "s.sqlite"))
    a = sc.variant({"datapath.macs_per_lane": 8, "algorithm.theta": 2}, LLAMA)
    b = sc.variant({"datapath.macs_per_lane": 16, "algorithm.theta": 2}, LLAMA)
    assert a.setting == b.setting
    assert sc._model is None and sc.studies_run == 0
    # the study settings in a prefill key leave out decode_tokens at its default (old keys)
    assert "decode_tokens" not in sc.study_settings("prefill")
    assert sc.study_settings("decode")["decode_tokens"] == 32


def test_variant_mode_is_checked():
    with pytest.raises(ValueError, match=r"mode: 'chunked'"):
        AccuracyVariant({}, None, mode="chunked")


# ----------------------------------------------------------------------------- the spec


def _spec(tmp_path, text: str):
    p = tmp_path / "s.yaml"
    p.write_text("version: 1\n" + text)
    return p


_GPU = (
    "base: gpu/h200\nworkloads: ['{wl}']\nmode: analytical\n"
    "parameters:\n  sm.count: [108, 132]\naccuracy: {acc}\n"
    "objectives:\n  - {{metric: perplexity, goal: minimize}}\n"
)


def test_spec_refuses_perplexity_on_a_target_without_the_hook(tmp_path, monkeypatch):
    gpu = simulation.target("gpu")
    monkeypatch.setitem(
        simulation._REGISTERED, "gpu", dataclasses.replace(gpu, accuracy_variant=None)
    )
    p = _spec(tmp_path, _GPU.format(wl="flashdecode:context=4096", acc="{measure: perplexity}"))
    with pytest.raises(ConfigError) as e:
        load_spec(p)
    assert [pr.key for pr in e.value.problems] == ["accuracy.measure"]
    assert "declares no accuracy hook (accuracy_variant) and no operand formats" in str(e.value)


@needs_model_package
def test_spec_checks_the_hook_and_the_decode_windows(tmp_path):
    acc = "{measure: perplexity, windows: 2, window_tokens: 256, decode_tokens: 32}"
    ls = load_spec(_spec(tmp_path, _GPU.format(wl="ffd:context=4096,keep=0.5", acc=acc)))
    assert ls.accuracy is not None and ls.accuracy.decode_tokens == 32
    assert ls.metric_units["perplexity"] == "1"
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tmp_path, _GPU.format(
            wl="ffd:context=4096,keep=0.5", acc=acc.replace("256", "32"))))  # fmt: skip
    assert [pr.key for pr in e.value.problems] == ["accuracy.decode_tokens"]
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tmp_path, _GPU.format(
            wl="ffd:context=4096,keep=0.5", acc=acc.replace("256", "128"))))  # fmt: skip
    assert [pr.key for pr in e.value.problems] == ["accuracy.window_tokens"]
    assert "acts only after 128" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tmp_path, _GPU.format(wl="nosa:context=4096", acc=acc)))
    assert [pr.key for pr in e.value.problems] == ["workloads[0]"]


def test_spec_digest_is_unchanged_by_the_added_key():
    """decode_tokens at its default leaves a spec's digest (and so its points' ids) as earlier
    versions computed it."""
    from coaccel.dse.spec import accuracy_digest
    from coaccel.spine.config import config_digest

    acc = AccuracySpec(measure="perplexity", data="real", windows=3)
    # the block as the schema was before decode_tokens
    fields = [(f.name, f.type, dataclasses.field(default=f.default))
              for f in dataclasses.fields(AccuracySpec) if f.name != "decode_tokens"]  # fmt: skip
    before = dataclasses.make_dataclass("AccuracySpec", fields, frozen=True)
    old = before(**{f.name: getattr(acc, f.name) for f in dataclasses.fields(before)})
    assert accuracy_digest(acc) == config_digest(old)
    assert accuracy_digest(dataclasses.replace(acc, decode_tokens=64)) != config_digest(old)


# ------------------------------------------------------------------- scoring (real model)

ACC = AccuracySpec(measure="perplexity", data="real", windows=2, window_tokens=48)


@pytest.mark.realmodel
@pytest.mark.slow
def test_deltallm_sweep_scores_each_setting_once_and_reuses_the_cache(tmp_path):
    pytest.importorskip("gguf")
    from coaccel.dse import run_sweep

    body = (
        "base: kv260\nworkloads: [" + LLAMA + "]\nmode: analytical\nparameters:\n"
        "  algorithm.theta: [2, 8]\n  datapath.macs_per_lane: [MACS]\n"
        "  keys.layers_simulated: [1]\n"
        "accuracy: {measure: perplexity, windows: 2, window_tokens: 48}\n"
        "objectives:\n  - {metric: perplexity, goal: minimize}\n"
        "  - {metric: attention.seconds, goal: minimize}\n"
    )
    store = tmp_path / "s.sqlite"
    first = run_sweep(_spec(tmp_path, body.replace("MACS", "8, 16")), store)
    assert (first.evaluated, first.failed, first.accuracy_studies) == (4, 0, 2)
    rows = {(r.params["algorithm.theta"], r.params["datapath.macs_per_lane"]): r
            for r in Store(store).rows("ok")}  # fmt: skip
    for theta in (2, 8):  # MACs per lane change the time, not the score
        a, b = rows[(theta, 8)].metrics, rows[(theta, 16)].metrics
        assert a["perplexity"] == b["perplexity"]
        assert a["attention.seconds"] != b["attention.seconds"]
    assert rows[(2, 8)].metrics["perplexity"] != rows[(8, 8)].metrics["perplexity"]
    # a larger sweep on the same store: new points, every score from the cache
    second = run_sweep(_spec(tmp_path, body.replace("MACS", "8, 16, 32")), store)
    assert (second.evaluated, second.accuracy_studies) == (2, 0)


@pytest.mark.realmodel
@pytest.mark.slow
def test_deltallm_float_mode_without_approximations_is_exact(tmp_path):
    """θ = 0, W ≥ T and τ = ∞ in the float mode: softmax attention, the model's perplexity."""
    pytest.importorskip("gguf")
    sc = PerplexityScorer(
        "kv260", ACC, Store(tmp_path / "s.sqlite"),
        variant=functools.partial(dl_accuracy.accuracy_variant, numerics="float"),
    )  # fmt: skip
    exact = {"algorithm.theta": 0, "algorithm.window_tokens": 64, "algorithm.tau_log2": None}
    m = sc.metrics(exact, LLAMA)
    f_ppl = float(np.exp(np.mean([np.log(sc._model.perplexity(w).perplexity)
                                  for w in sc._windows])))  # fmt: skip
    assert m["perplexity"][0] == pytest.approx(f_ppl, rel=1e-5)
    assert abs(m["perplexity_increase_pct"][0]) < 1e-3
    assert m["top1_agreement"][0] >= 0.98
    # the INT8 datapath of the same setting costs a little; its approximations more
    fixed = PerplexityScorer("kv260", ACC, Store(tmp_path / "s.sqlite"))
    dense = fixed.metrics(exact, LLAMA)["perplexity_increase_pct"][0]
    approx = fixed.metrics({"algorithm.theta": 8, "algorithm.tau_log2": 4.0}, LLAMA)
    assert dense != 0 and abs(dense) < 5
    assert approx["perplexity_increase_pct"][0] > dense


# prompts of 264 tokens (2 full FFD blocks) before 8 decoded ones
FFD_ACC = AccuracySpec(measure="perplexity", data="real", windows=2, window_tokens=272,
                       decode_tokens=8)  # fmt: skip


@pytest.fixture(scope="module")
def ffd_scorer(tmp_path_factory):
    pytest.importorskip("gguf")
    store = Store(tmp_path_factory.mktemp("ffd") / "s.sqlite")
    return PerplexityScorer("gpu/h200", FFD_ACC, store)


@pytest.mark.realmodel
@pytest.mark.slow
def test_ffd_keep_all_blocks_is_exact_decode(ffd_scorer):
    sc = ffd_scorer
    exact = sc.metrics({}, "flashdecode:context=4096")  # the decoder unchanged
    assert exact["perplexity_increase_pct"][0] == 0 and exact["top1_agreement"][0] == 1
    # the reference is the model's teacher-forced decode of each window's last tokens
    from coaccel.targets.deltallm_fpga.forward import decode_perplexity

    p = FFD_ACC.window_tokens - FFD_ACC.decode_tokens
    nll = [decode_perplexity(sc._model, w, p, None).mean_nll for w in sc._windows]
    assert exact["perplexity"][0] == pytest.approx(math.exp(np.mean(nll)), rel=1e-5)
    keep_all = sc.metrics({"sm.count": 108}, "ffd:context=16384,keep=1")
    assert keep_all["perplexity"][0] == pytest.approx(exact["perplexity"][0], rel=1e-5)
    assert abs(keep_all["perplexity_increase_pct"][0]) < 1e-3


@pytest.mark.realmodel
@pytest.mark.slow
def test_ffd_selection_changes_the_score_and_each_window_starts_afresh(ffd_scorer):
    sc = ffd_scorer
    half = sc.metrics({}, "ffd:context=4096,keep=0.5")
    assert half["perplexity_increase_pct"][0] != 0
    before = sc.studies_run
    assert sc.metrics({"sm.count": 108}, "ffd:context=16384,keep=0.5,delta=7") == half
    assert sc.studies_run == before
    # one transform scores both windows: the same as a fresh one per window
    v = sc.variant({}, "ffd:context=4096,keep=0.5")
    together, _ = sc._decode(v.transform(sc._model))
    windows = sc._windows
    try:
        apart = []
        for w in windows:
            sc._windows = [w]
            apart.append(sc._decode(v.transform(sc._model))[0][0])
    finally:
        sc._windows = windows
    np.testing.assert_array_equal(together, np.asarray(apart))
    # a rerun on the same store scores nothing
    again = PerplexityScorer("gpu/h200", FFD_ACC, sc._store)
    assert again.metrics({}, "ffd:context=4096,keep=0.5") == half
    assert again.studies_run == 0 and again._model is None
