"""coaccel.workload: model shapes, scenarios and workload files, shared by every target.

Expected values: the models' published config.json numbers, derived quantities worked by hand
(query / KV widths, GQA group, KV-cache bytes per token), the exact wording of the loader's
errors, and the HBQ ASIC simulator's MAC count against the closed-form formula of a decoder-only
transformer.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import pytest

from coaccel.sim.hbq_asic import simulate
from coaccel.spine.config import (
    ConfigError,
    config_digest,
    dump_config,
    load_config,
    load_config_dict,
)
from coaccel.spine.workload import (
    WORKLOAD_NAMES,
    ModelShape,
    RopeScaling,
    ScenarioConfig,
    Workload,
    WorkloadConfig,
    load_workload,
    workload_path,
)

ROOT = Path(__file__).resolve().parents[2]

MODEL = """\
version: 1
name: tiny
model:
  hidden: 256
  intermediate: 512
  layers: 2
  heads: 4
  kv_heads: 2
  head_dim: 64
  vocab: 1000
  max_position_embeddings: 4096
{extra}default_scenario: short
scenarios:
  short: {{phase: prefill, tokens: 128}}
{scenarios}"""


def _config(name: str) -> WorkloadConfig:
    return load_config(workload_path(name), WorkloadConfig)


def _write(tmp_path: Path, extra: str = "", scenarios: str = "") -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(MODEL.format(extra=extra, scenarios=scenarios))
    return path


def _errors(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_workload(path)
    return str(e.value).splitlines()


# ------------------------------------------------------------------ shipped files


def test_shipped_names_are_the_files_in_the_workloads_folder():
    on_disk = sorted(p.stem for p in (ROOT / "arch_configs" / "workloads").glob("*.yaml"))
    assert list(WORKLOAD_NAMES) == on_disk
    for new in ("bitnet-b1.58-2b-4t", "llama-3.2-1b", "llama-3.1-8b", "qwen1.5-moe-a2.7b"):
        assert new in WORKLOAD_NAMES


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_every_shipped_workload_loads_with_every_scenario_and_sources(name):
    w = load_workload(name)
    assert isinstance(w, Workload) and isinstance(w.model, ModelShape)
    assert w.name == name and w.label == f"{name}:{w.scenario_name}"
    assert w.source == str(workload_path(name)) and len(w.digest) == 64
    cfg = _config(name)
    assert load_config_dict(dump_config(cfg), WorkloadConfig) == cfg
    for scen in cfg.scenarios:
        s = load_workload(f"{name}:{scen}")
        assert s.scenario.positions <= s.model.max_position_embeddings or (
            s.scenario.beyond_max_positions
        )
    # Every figure the file sets (all but the defaults) says where it comes from.
    m = w.model
    sources = cfg.sources
    for f in dataclasses.fields(ModelShape):
        v = getattr(m, f.name)
        if f.name == "rope_scaling" and v is not None:
            for g in dataclasses.fields(RopeScaling):
                if getattr(v, g.name) is not None:
                    assert sources.get(f"model.rope_scaling.{g.name}"), (name, g.name)
        elif v != f.default or f.name in ("tie_word_embeddings", "rope_theta"):
            assert sources.get(f"model.{f.name}"), (name, f.name)


# Published config.json values (the Hugging Face repos named in each file's sources):
# hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max positions, tied, theta.
PUBLISHED = {
    "bitnet-b1.58-2b-4t": (2560, 6912, 30, 20, 5, 128, 128256, 4096, True, 500000.0),
    "bitnet-b1.58-large": (1536, 4096, 24, 16, 16, 96, 32002, 2048, False, 10000.0),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 64, 128256, 131072, True, 500000.0),
    "llama-3.1-8b": (4096, 14336, 32, 32, 8, 128, 128256, 131072, False, 500000.0),
    "qwen1.5-moe-a2.7b": (2048, 5632, 24, 16, 16, 128, 151936, 8192, False, 1e6),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_new_workloads_have_the_published_shapes(name):
    m = load_workload(name).model
    got = (m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.head_dim, m.vocab,
           m.max_position_embeddings, m.tie_word_embeddings, m.rope_theta)  # fmt: skip
    assert got == PUBLISHED[name]


def test_llama3_rope_scaling():
    for name, factor in (("llama-3.2-1b", 32.0), ("llama-3.1-8b", 8.0), ("llama-3.2-3b", 32.0)):
        rs = load_workload(name).model.rope_scaling
        assert rs == RopeScaling("llama3", factor, 8192, 1.0, 4.0), name
    assert load_workload("bitnet-b1.58-2b-4t").model.rope_scaling is None


def test_deltallm_prefill_lengths_and_long_decode():
    for name in ("bitnet-b1.58-2b-4t", "llama-3.2-1b"):
        for n in (64, 128, 256, 512, 1024):
            s = load_workload(name, f"prefill_{n}").scenario
            assert (s.phase, s.tokens, s.batch) == ("prefill", n, 1)
    # The last decode step of decode_128k attends the full 131072-token context.
    d = load_workload("llama-3.1-8b:decode_128k").scenario
    assert d.tokens + d.decode_steps == 131072 == d.positions
    assert load_workload("llama-3.1-8b:decode_8k_b16").scenario.batch == 16


# ------------------------------------------------------------------ derived quantities by hand


def test_derived_quantities_llama_3_1_8b():
    m = load_workload("llama-3.1-8b").model
    assert (m.q_dim, m.kv_dim, m.group, m.is_moe) == (32 * 128, 8 * 128, 32 // 8, False)
    # BF16: K and V of 8 heads x 128 = 2 x 1024 x 2 B = 4 KiB per layer, 128 KiB per token.
    assert m.kv_bytes_per_token_per_layer(16) == 4096
    assert m.kv_bytes_per_token() == 32 * 4096 == 131072
    # 128K tokens of context: 16 GiB of KV cache.
    assert m.kv_bytes_per_token() * 131072 == 16 * 2**30


def test_derived_quantities_bitnet():
    m = load_workload("bitnet-b1.58-2b-4t").model
    assert (m.q_dim, m.kv_dim, m.group) == (2560, 640, 4)
    # 8-bit KV: 2 x 640 x 1 B x 30 layers.
    assert m.kv_bytes_per_token(8) == 38400
    # A 4.125-bit block format (4-bit elements + an 8-bit scale per 64): 1280 x 33/64 B per
    # layer = 660 B, 19800 B per token; exact, not rounded.
    assert m.kv_bytes_per_token_per_layer(Fraction(33, 8)) == 660
    assert m.kv_bytes_per_token(Fraction(33, 8)) == 19800
    # HBQ-E's KV format, 4 + 17/128 bits: 1280 x 529/128 / 8 = 661.25 B per layer.
    assert m.kv_bytes_per_token_per_layer(Fraction(529, 128)) == Fraction(2645, 4)
    with pytest.raises(ValueError, match="bits_per_element=0 must be a positive number"):
        m.kv_bytes_per_token(0)


def test_moe_fields():
    m = load_workload("qwen1.5-moe-a2.7b").model
    assert m.is_moe and m.group == 1
    assert (m.experts, m.experts_per_token, m.expert_intermediate) == (60, 4, 1408)
    assert (m.shared_experts, m.shared_expert_intermediate) == (1, 5632)
    dense = load_workload("llama-3.1-8b").model
    assert not dense.is_moe
    assert (dense.experts, dense.experts_per_token, dense.expert_intermediate) == (0, 0, 0)
    assert (dense.shared_experts, dense.shared_expert_intermediate) == (0, 0)


def test_moe_rules(tmp_path):
    bad = "  experts: 8\n  experts_per_token: 9\n  expert_intermediate: 128\n"
    lines = _errors(_write(tmp_path, extra=bad))
    assert lines == [
        f"{tmp_path / 'tiny.yaml'}: model.experts_per_token: experts_per_token=9 must be in "
        "[1, experts=8]"
    ]
    lines = _errors(_write(tmp_path, extra="  experts_per_token: 2\n  shared_experts: 1\n"))
    assert lines == [
        f"{tmp_path / 'tiny.yaml'}: model.experts_per_token: experts_per_token=2 needs routed "
        "experts (experts is 0)",
        f"{tmp_path / 'tiny.yaml'}: model.shared_experts: shared_experts=1 needs routed experts "
        "(experts is 0)",
        f"{tmp_path / 'tiny.yaml'}: model.shared_expert_intermediate: shared_experts=1 and "
        "shared_expert_intermediate=0 must both be 0 or both be positive",
    ]
    ok = "  experts: 8\n  experts_per_token: 2\n  expert_intermediate: 128\n"
    assert load_workload(_write(tmp_path, extra=ok)).model.is_moe


def test_rope_rules(tmp_path):
    lines = _errors(_write(tmp_path, extra="  rope_scaling: {type: llama3, factor: 8.0}\n"))
    f = tmp_path / "tiny.yaml"
    assert lines == [
        f"{f}: model.rope_scaling.low_freq_factor: required for rope type 'llama3'",
        f"{f}: model.rope_scaling.high_freq_factor: required for rope type 'llama3'",
        f"{f}: model.rope_scaling.original_max_position_embeddings: required for rope type "
        "'llama3'",
    ]
    lines = _errors(
        _write(tmp_path, extra="  rope_scaling: {type: linear, factor: 2.0, low_freq_factor: 1}\n")
    )
    assert lines == [
        f"{f}: model.rope_scaling.low_freq_factor: only rope type 'llama3' has low_freq_factor "
        "(this one is 'linear')"
    ]
    swapped = (
        "  rope_scaling: {type: llama3, factor: 8.0, low_freq_factor: 4.0, high_freq_factor: 1.0,\n"
        "                 original_max_position_embeddings: 8192}\n"
    )
    assert _errors(_write(tmp_path, extra=swapped)) == [
        f"{f}: model.rope_scaling.high_freq_factor: high_freq_factor=1.0 must be above "
        "low_freq_factor=4.0",
        f"{f}: model.rope_scaling.original_max_position_embeddings: the pre-training context "
        "8192 exceeds max_position_embeddings=4096",
    ]
    lines = _errors(_write(tmp_path, extra="  rope_theta: 0\n"))
    assert lines == [f"{f}: model.rope_theta: 0 is out of range: must be > 0"]


# ------------------------------------------------------------------ errors


def test_prefill_past_max_positions_names_file_key_value_and_limit(tmp_path):
    path = _write(tmp_path, scenarios="  long: {phase: prefill, tokens: 5000}\n")
    assert _errors(path) == [
        f"{path}: scenarios.long.tokens: 5000 prompt tokens exceed "
        "model.max_position_embeddings = 4096; shorten the scenario or mark it "
        "'beyond_max_positions: true' (a shape-only workload)"
    ]


def test_decode_past_max_positions_counts_the_decode_steps(tmp_path):
    # 4092 + 4 = 4096 positions fit exactly; 4093 + 4 do not.
    fits = _write(tmp_path, scenarios="  d: {phase: decode, tokens: 4092, decode_steps: 4}\n")
    assert load_workload(fits, "d").scenario.positions == 4096
    path = _write(tmp_path, scenarios="  d: {phase: decode, tokens: 4093, decode_steps: 4}\n")
    assert _errors(path) == [
        f"{path}: scenarios.d.tokens: 4093 context tokens + 4 decode steps = 4097 positions "
        "exceed model.max_position_embeddings = 4096; shorten the scenario or mark it "
        "'beyond_max_positions: true' (a shape-only workload)"
    ]
    with pytest.raises(ConfigError) as e:
        load_workload(path)
    (p,) = e.value.problems
    assert (p.file, p.key, p.value, p.valid) == (str(path), "scenarios.d.tokens", 4093,
                                                  "at most 4096 positions")  # fmt: skip


def test_beyond_max_positions_is_explicit_and_only_where_needed(tmp_path):
    long = "  long: {phase: prefill, tokens: 16384, beyond_max_positions: true}\n"
    w = load_workload(_write(tmp_path, scenarios=long), "long")
    assert w.scenario.tokens == 16384 and w.scenario.beyond_max_positions
    stale = "  s: {phase: prefill, tokens: 4096, beyond_max_positions: true}\n"
    path = _write(tmp_path, scenarios=stale)
    assert _errors(path) == [
        f"{path}: scenarios.s.beyond_max_positions: the scenario reaches 4096 positions, within "
        "model.max_position_embeddings = 4096; remove the flag"
    ]
    # The [R-PM] 16K runs of the 4K- and 8K-context models are marked as such.
    for name in ("llama-2-7b", "llama-3-8b"):
        for scen in ("prefill_16k", "decode_16k"):
            assert load_workload(name, scen).scenario.beyond_max_positions


def test_unknown_keys_and_wrong_types_are_reported_together(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        MODEL.format(extra="", scenarios="  b: {phase: train, tokens: 8, batch: 1.5, step: 1}\n")
        .replace("hidden: 256", "hiden: 256")
        .replace("layers: 2", "layers: two")
    )  # fmt: skip
    lines = _errors(path)
    assert lines == [
        f"{path}: model.hiden: unknown key 'hiden'; valid keys: hidden, intermediate, layers, "
        "heads, kv_heads, head_dim, vocab, max_position_embeddings, tie_word_embeddings, "
        "rope_theta, rope_scaling, experts, experts_per_token, expert_intermediate, "
        "shared_experts, shared_expert_intermediate, attention, kv_lora_rank, q_lora_rank, "
        "qk_rope_head_dim, v_head_dim, mlp, dense_mlp_layers, sliding_window_tokens, "
        "sliding_window_layers (did you mean 'hidden'?)",
        f"{path}: model.layers: expected int, got str 'two'",
        f"{path}: model.hidden: missing required key",
        f"{path}: scenarios.b.phase: 'train' is not a valid choice; choices: prefill, decode",
        f"{path}: scenarios.b.batch: expected int, got float 1.5",
        f"{path}: scenarios.b.step: unknown key 'step'; valid keys: phase, tokens, batch, "
        "decode_steps, kv_quant, causal_tile_skip, lm_head, beyond_max_positions",
    ]


def test_sources_name_model_fields(tmp_path):
    path = _write(tmp_path, scenarios='sources:\n  model.hiden: "a config.json"\n')
    (line,) = _errors(path)
    assert line.startswith(f"{path}: sources.model.hiden: not a model field; fields: model.hidden")
    assert line.endswith("(did you mean 'model.hidden'?)")


def test_unknown_model_and_scenario():
    with pytest.raises(ConfigError, match=r"no workload named 'llama-3.1-9b'; shipped: .*"
                       r"\(did you mean 'llama-3.1-8b'\?\)"):  # fmt: skip
        load_workload("llama-3.1-9b")
    with pytest.raises(ConfigError, match="no scenario 'prefill_3k' in workload 'llama-3-8b'"):
        load_workload("llama-3-8b", "prefill_3k")


def test_path_with_scenario_and_in_memory_config(tmp_path):
    path = _write(tmp_path, scenarios="  d: {phase: decode, tokens: 100, decode_steps: 2}\n")
    w = load_workload(f"{path}:d")
    assert (w.scenario_name, w.scenario.decode_steps, w.source) == ("d", 2, str(path))
    cfg = _config("llama-3.2-1b")
    m = load_workload(cfg, "decode_1k")
    assert m.digest == config_digest(cfg) == load_workload("llama-3.2-1b").digest
    assert m.source == "llama-3.2-1b"


def test_scenario_defaults_are_unchanged():
    s = ScenarioConfig(phase="prefill", tokens=10)
    assert (s.batch, s.decode_steps, s.kv_quant, s.causal_tile_skip, s.lm_head) == (
        1, 1, True, True, "all_tokens"
    )  # fmt: skip
    assert not s.beyond_max_positions


def test_model_shape_built_directly_checks_its_fields():
    with pytest.raises(ValueError, match=r"ModelShape.hidden=0 must be an integer >= 1"):
        ModelShape(0, 64, 1, 4, 2, 16, 10, 128)
    with pytest.raises(ValueError, match=r"ModelShape.experts=-1 must be an integer >= 0"):
        ModelShape(64, 64, 1, 4, 2, 16, 10, 128, experts=-1)
    with pytest.raises(ValueError, match=r"ModelShape.rope_theta=0 must be a number > 0"):
        ModelShape(64, 64, 1, 4, 2, 16, 10, 128, rope_theta=0)
    with pytest.raises(ValueError, match="heads=6 must be a multiple of kv_heads=4"):
        assert ModelShape(64, 64, 1, 6, 4, 16, 10, 128).group
    m = ModelShape(64, 64, 1, 4, 2, 16, 10, 128)
    assert dataclasses.replace(m, layers=3).layers == 3
    with pytest.raises(ValueError, match="ModelShape.layers=0"):
        dataclasses.replace(m, layers=0)


# ------------------------------------------------------------------ the HBQ ASIC simulator


def _batch1_scenarios(name):
    cfg = _config(name)
    return [s for s, sc in cfg.scenarios.items() if sc.batch == 1]


DENSE = [n for n in WORKLOAD_NAMES if not _config(n).model.is_moe]


@pytest.mark.parametrize("name", DENSE)
def test_hbq_simulator_runs_every_dense_workload_analytically(name):
    for scen in _batch1_scenarios(name):
        w = load_workload(name, scen)
        s = simulate("hbq_e_28nm", w, mode="analytical")
        assert s.workload == w.label and s.cycles > 0
        # MACs of the linear layers and the LM head: per token and layer E*q + 2E*kv (q, k, v)
        # + q*E (o) + 3E*M (gate, up, down); the LM head E*V per token (all prompt tokens).
        m, sc = w.model, w.scenario
        e = m.hidden
        n = sc.tokens if sc.phase == "prefill" else sc.decode_steps
        per_token = e * m.q_dim + 2 * e * m.kv_dim + m.q_dim * e + 3 * e * m.intermediate
        assert s.by_kind("linear").macs == m.layers * n * per_token, (name, scen)
        assert s.by_kind("lm_head").macs == n * e * m.vocab, (name, scen)


def test_hbq_simulator_refuses_moe_models():
    path = workload_path("qwen1.5-moe-a2.7b")
    for mode in ("analytical", "cycle"):
        with pytest.raises(ConfigError) as e:
            simulate("hbq_e_28nm", "qwen1.5-moe-a2.7b:prefill_512", mode=mode)
        assert str(e.value) == (
            f"{path}: model.experts: 'qwen1.5-moe-a2.7b' is a mixture-of-experts model (60 "
            "experts, top-4); the HBQ ASIC simulator models dense MLPs only"
        )


def test_hbq_simulator_refuses_batches():
    path = workload_path("llama-3.1-8b")
    for mode in ("analytical", "cycle"):
        with pytest.raises(ConfigError) as e:
            simulate("hbq_e_28nm", "llama-3.1-8b:decode_8k_b16", mode=mode)
        assert str(e.value) == (
            f"{path}: scenarios.decode_8k_b16.batch: the HBQ ASIC simulator runs batch 1 only "
            "(got batch 16); use a scenario with batch 1"
        )
