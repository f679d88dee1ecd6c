"""Imported workloads in the simulators: the same results as a shipped file where the shapes
agree, and a clear refusal of what a simulator does not model.

The configs are those of ``tests/data/hf_configs`` (``test_hf_import.py`` names where each came
from): ``meta-llama-3-8b`` (aijianiula0601/Qwen2-Audio ``meta-llama/Meta-Llama-3-8B/config.json``),
``deepseek-v2-lite`` (mlc-ai/mlc-llm ``model_preset.py``, ``"deepseek_v2_lite"``),
``gemma-3-1b-it`` (mlc-llm, ``"gemma3_1b_it"``), ``phi-3-mini-4k-instruct`` (mlc-llm, the
commented ``"phi-3"`` entry), ``gpt-neox-20b`` (QiushengSong/Mamba_for_Named_Entity_Recoginition
``EleutherAI/gpt-neox-20b/config.json``) and ``mixtral-8x7b-v0.1`` (NVIDIA/TensorRT-LLM
``tests/unittest/_torch/modeling/test_modeling_mixtral.py``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from coaccel.cli import main
from coaccel.config import ConfigError, override
from coaccel.spine.workload import ScenarioConfig, Workload, load_workload

DATA = Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def _imported(tmp_path: Path, model: str, name: str | None = None) -> Path:
    out = tmp_path / f"{name or model}.yaml"
    args = ["workload", "import", str(DATA / model / "config.json"), "--out", str(out), "--quiet"]
    assert main([*args, *(["--name", name] if name else [])]) == 0
    return out


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _imported(tmp_path_factory.mktemp("wl"), "meta-llama-3-8b", "llama-3-8b")


def test_imported_llama_3_8b_is_the_shipped_shape(llama: Path) -> None:
    """Every scenario the import makes is one of the shipped file's (which adds two beyond the
    8K context), with the same shape and settings."""
    mine = load_workload(llama)
    shipped = load_workload("llama-3-8b")
    assert mine.model == shipped.model
    for scen in ("prefill_1k", "prefill_2k", "prefill_4k", "decode_2k"):
        assert load_workload(llama, scen).scenario == load_workload("llama-3-8b", scen).scenario


def _same_metrics(a: object, b: object) -> None:
    ma, mb = a.metrics(), b.metrics()  # type: ignore[attr-defined]
    assert ma == mb
    assert a.workload == b.workload  # type: ignore[attr-defined]


@pytest.mark.parametrize("scenario", ["prefill_1k", "decode_2k"])
def test_hbq_asic_same_results(llama: Path, scenario: str) -> None:
    from coaccel.sim.hbq_asic import simulate

    mine = simulate("hbq_e_28nm", f"{llama}:{scenario}", mode="analytical")
    shipped = simulate("hbq_e_28nm", f"llama-3-8b:{scenario}", mode="analytical")
    _same_metrics(mine, shipped)
    assert mine.workload_digest != shipped.workload_digest  # the files differ (sources)


def test_deltallm_fpga_same_results(llama: Path) -> None:
    """A 64-token prompt, one simulated layer (the reference's synthetic keys cost seconds per
    layer), both workloads alike."""
    from coaccel.sim.deltallm_fpga import load_arch, simulate

    arch = override(load_arch("kv260"), {"keys.layers_simulated": 1})
    short = ScenarioConfig(phase="prefill", tokens=64)
    runs = []
    for src in (llama, "llama-3-8b"):
        wl = dataclasses.replace(load_workload(src), scenario=short, scenario_name="p64")
        runs.append(simulate(arch, wl, mode="analytical"))
    _same_metrics(*runs)


def test_hbq_asic_accepts_a_window_it_does_not_reach(tmp_path: Path) -> None:
    """Phi-3-mini attends within 2047 tokens on every layer: a 1K prefill never reaches the
    window (accepted), a 2K one does (refused, naming the window)."""
    from coaccel.sim.hbq_asic import simulate

    path = _imported(tmp_path, "phi-3-mini-4k-instruct")
    assert simulate("hbq_e_28nm", f"{path}:prefill_1k", mode="analytical").cycles > 0
    with pytest.raises(ConfigError, match="2047-token window and the scenario reaches 2048"):
        simulate("hbq_e_28nm", f"{path}:prefill_2k", mode="analytical")


@pytest.mark.parametrize(
    ("model", "scenario", "needles"),
    [
        ("deepseek-v2-lite", "prefill_1k",
         ["model.experts: 'deepseek-v2-lite' is a mixture-of-experts model",
          "model.attention: 'deepseek-v2-lite' uses multi-head latent attention"]),
        ("gpt-neox-20b", "prefill_1k", ["model.mlp: 'gpt-neox-20b' has a plain MLP"]),
        ("gemma-3-1b-it", "prefill_1k", ["within a 512-token window"]),
    ],
)  # fmt: skip
def test_hbq_asic_refuses_what_it_does_not_model(tmp_path: Path, model: str, scenario: str,
                                                 needles: list[str]) -> None:  # fmt: skip
    from coaccel.sim.hbq_asic import simulate

    path = _imported(tmp_path, model)
    with pytest.raises(ConfigError) as e:
        simulate("hbq_e_28nm", f"{path}:{scenario}", mode="analytical")
    assert all(n in str(e.value) for n in needles), str(e.value)
    assert str(e.value).startswith(str(path))


def test_gpu_refuses_mla_and_names_the_attention_of_a_gqa_model(tmp_path: Path,
                                                                llama: Path) -> None:  # fmt: skip
    """The GPU workloads are one layer's decode attention over per-KV-head caches: an MLA model
    is refused as such (never treated as GQA); a GQA model's decode scenario is refused with
    the flashdecode spec of its attention, which runs."""
    from coaccel.sim.gpu_mem import load_workload as gpu_workload

    path = _imported(tmp_path, "deepseek-v2-lite")
    with pytest.raises(ConfigError, match=r"kv_lora_rank \+ qk_rope_head_dim = 576 elements"):
        gpu_workload(f"{path}:decode_2k")
    with pytest.raises(ConfigError) as e:
        gpu_workload(f"{llama}:decode_2k")
    spec = "flashdecode:context=2048,batch=1,q_heads=32,kv_heads=8,head_dim=128"
    assert str(e.value).endswith(f"its attention is {spec}")
    assert gpu_workload(spec).trace is not None
    with pytest.raises(ConfigError, match="the scenario is a prefill"):
        gpu_workload("llama-3-8b:prefill_2k")


def _workload(tmp_path: Path, model: str, scenario: str) -> Workload:
    return load_workload(_imported(tmp_path, model), scenario)


def test_deltallm_workload_check(tmp_path: Path, llama: Path) -> None:
    """:func:`coaccel.sim.deltallm_fpga.workload.check_deltallm_workload` lists what the DeltaLLM
    simulator does not model (MLA, an ungated MLP, a window shorter than the prompt)."""
    from coaccel.sim.deltallm_fpga.workload import (
        check_deltallm_workload,
        deltallm_workload_problems,
    )

    assert deltallm_workload_problems(load_workload(llama, "prefill_1k")) == []
    keys = {
        "mixtral-8x7b-v0.1": [],
        "deepseek-v2-lite": ["model.attention"],
        "gpt-neox-20b": ["model.mlp"],
        "gemma-3-1b-it": ["scenarios.prefill_1k.tokens"],
    }
    for model, want in keys.items():
        wl = _workload(tmp_path, model, "prefill_1k")
        assert [p.key for p in deltallm_workload_problems(wl)] == want, model
        if want:
            with pytest.raises(ConfigError):
                check_deltallm_workload(wl)


def test_deltallm_charges_an_moe_token_its_active_weights(tmp_path: Path) -> None:
    """A mixture-of-experts layer's linear MACs per token are its active weights: Mixtral's
    per-token active parameters (the model card's 12.9B, which the import reproduces) less the
    embedding, the LM head and the norms, spread over its 32 layers."""
    from coaccel.sim.deltallm_fpga import linear_macs_per_token

    m = _workload(tmp_path, "mixtral-8x7b-v0.1", "prefill_1k").model
    active = 12_879_925_248
    others = 2 * m.vocab * m.hidden + (2 * m.layers + 1) * m.hidden
    assert linear_macs_per_token(m) * m.layers == active - others
