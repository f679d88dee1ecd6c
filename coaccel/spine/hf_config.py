"""Hugging Face ``config.json``: a workload's model shape, parameter counts, KV and weight bytes.

:func:`read_hf_config` reads a model's ``config.json`` (with its SHA-256) and
:func:`parse_hf_config` turns it into an :class:`HfModel`: the
:class:`~coaccel.spine.workload.ModelShape` the simulators take, plus what only the parameter
count needs (biases, norms, QK-norms, routers, the MTP module), with the source of every number.
The families of :data:`SUPPORTED_FAMILIES` are read the way Hugging Face ``transformers`` builds
their modules (``configuration_<family>.py`` for the defaults of keys a file leaves out,
``modeling_<family>.py`` for the tensors); an unknown ``model_type`` or a missing shape key is
one :class:`~coaccel.config.ConfigError` naming the file, the key and the supported families.

:func:`parameter_tensors` lists every parameter tensor (embeddings, every linear with its bias,
RMSNorm weights, LayerNorm weights and biases, QK-norms, MoE routers and DeepSeek-V3's
``e_score_correction_bias``, MLA's low-rank projections and norms, the untied LM head) with how
many copies the model holds and how many one token uses; :func:`parameter_counts` sums them
(:class:`ParamCounts`) and :func:`weight_bytes` prices them in the formats of
:data:`WEIGHT_FORMATS`. :func:`hf_workload` builds the workload file's data (model, the usual
scenarios, sources) and checks it with the workload schema.

Public: :data:`SUPPORTED_FAMILIES`, :data:`WEIGHT_FORMATS`, :class:`HfModel`,
:class:`ParamTensor`, :class:`ParamCounts`, :func:`read_hf_config`, :func:`parse_hf_config`,
:func:`load_hf_model`, :func:`parameter_tensors`, :func:`mtp_tensors`, :func:`parameter_counts`,
:func:`weight_bytes`, :func:`hf_workload`, :func:`default_name`.

See ``docs/workloads.md``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .config import ConfigError, Problem, load_config_dict
from .workload import ModelShape, RopeScaling, WorkloadConfig

__all__ = [
    "SUPPORTED_FAMILIES",
    "WEIGHT_FORMATS",
    "HfModel",
    "ParamCounts",
    "ParamTensor",
    "default_name",
    "hf_workload",
    "load_hf_model",
    "mtp_tensors",
    "parameter_counts",
    "parameter_tensors",
    "parse_hf_config",
    "read_hf_config",
    "weight_bytes",
]

_MISSING: Any = object()
_TRANSFORMERS = "[HF-TRANSFORMERS-CONFIGS]"


# ---------------------------------------------------------------------------------------------
# Families


@dataclass(frozen=True)
class _Family:
    """How ``transformers`` builds one ``model_type`` (the parts the parameter count and the
    shape depend on).

    Attributes:
        config_class: the ``transformers`` configuration class (named in sources).
        tie: ``tie_word_embeddings`` when the file has none.
        attn_bias: ``never``; ``qkv`` (q, k and v always carry a bias, Qwen2); ``flag`` (q, k,
            v and o carry one when ``attention_bias`` is true, default false); ``neox`` (the
            fused qkv and the output dense carry one unless ``attention_bias`` is false).
        mlp_bias: ``never``; ``flag`` (``mlp_bias``, default false); ``always``.
        qk_norm: ``none``; ``head`` (an RMSNorm of ``head_dim`` on q and on k); ``full`` (an
            RMSNorm over all query channels and one over all key channels, OLMoE).
        norms: norms per layer (2: before attention and MLP; 4: Gemma 2/3 add post-norms).
        norm: ``rms`` (a weight) or ``layer`` (a weight and a bias).
        mlp: ``gated`` or ``plain``.
        head_dim: ``head_dim`` when the file has none (None: ``hidden_size / heads``).
        rope_theta: the RoPE base when the file has none.
        moe: the MoE layout: None, ``mixtral``, ``olmoe``, ``qwen2_moe``, ``qwen3_moe`` or
            ``deepseek``.
        window: ``none``, ``all`` (``sliding_window`` on every layer), ``qwen``
            (``use_sliding_window`` from ``max_window_layers`` on), ``alternate`` (Gemma 2:
            even layers), ``pattern`` (Gemma 3: all but every ``sliding_window_pattern``-th).
        defaults: shape keys the configuration class fills when the file leaves them out
            (Gemma 3's multimodal files name few keys of their ``text_config``).
    """

    config_class: str
    tie: bool = False
    attn_bias: str = "flag"
    mlp_bias: str = "never"
    qk_norm: str = "none"
    norms: int = 2
    norm: str = "rms"
    mlp: str = "gated"
    head_dim: int | None = None
    rope_theta: float = 10000.0
    moe: str | None = None
    window: str = "none"
    defaults: Mapping[str, Any] = field(default_factory=dict)


_GEMMA3_DEFAULTS = {
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "vocab_size": 262208,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
"""``Gemma3TextConfig``'s defaults of the shape keys (``configuration_gemma3.py``)."""

_FAMILIES: dict[str, _Family] = {
    "llama": _Family("LlamaConfig", mlp_bias="flag"),
    "mistral": _Family("MistralConfig", attn_bias="never", window="all"),
    "mixtral": _Family("MixtralConfig", attn_bias="never", rope_theta=1e6, moe="mixtral",
                       window="all"),
    "qwen2": _Family("Qwen2Config", attn_bias="qkv", window="qwen"),
    "qwen2_moe": _Family("Qwen2MoeConfig", attn_bias="qkv", moe="qwen2_moe", window="qwen"),
    "qwen3": _Family("Qwen3Config", qk_norm="head", head_dim=128, window="qwen"),
    "qwen3_moe": _Family("Qwen3MoeConfig", qk_norm="head", head_dim=128, moe="qwen3_moe",
                         window="qwen"),
    "gemma": _Family("GemmaConfig", tie=True, head_dim=256),
    "gemma2": _Family("Gemma2Config", tie=True, norms=4, head_dim=256, window="alternate"),
    "gemma3_text": _Family("Gemma3TextConfig", tie=True, qk_norm="head", norms=4, head_dim=256,
                           rope_theta=1e6, window="pattern", defaults=_GEMMA3_DEFAULTS),
    "phi3": _Family("Phi3Config", attn_bias="never", window="all"),
    "deepseek_v2": _Family("DeepseekV2Config", moe="deepseek"),
    "deepseek_v3": _Family("DeepseekV3Config", moe="deepseek"),
    "olmoe": _Family("OlmoeConfig", qk_norm="full", moe="olmoe"),
    "gpt_neox": _Family("GPTNeoXConfig", attn_bias="neox", mlp_bias="always", norm="layer",
                        mlp="plain"),
}  # fmt: skip

SUPPORTED_FAMILIES: tuple[str, ...] = tuple(
    f for name in _FAMILIES for f in ((name, "gemma3") if name == "gemma3_text" else (name,))
)
"""The ``model_type`` values :func:`parse_hf_config` reads (``gemma3``: a multimodal file whose
``text_config`` is a ``gemma3_text`` model; its vision tower is not counted)."""

_MLA_FAMILIES = ("deepseek_v2", "deepseek_v3")


# ---------------------------------------------------------------------------------------------
# The parsed model


@dataclass(frozen=True)
class HfModel:
    """A Hugging Face model read from its ``config.json``.

    Attributes:
        family: the ``model_type`` whose modules are counted (``gemma3_text`` for a ``gemma3``
            file).
        shape: the model shape (what the simulators take).
        sources: provenance of every shape field, keyed like a workload file's ``sources``
            (``model.hidden``).
        attn_bias: q, k and v carry biases.
        o_bias: the attention output projection carries a bias.
        mlp_bias: the MLP matrices carry biases.
        qk_norm: ``none``, ``head`` or ``full`` (:class:`_Family`).
        norms_per_layer: norms per decoder layer (2 or 4).
        norm: ``rms`` or ``layer``.
        shared_expert_gate: Qwen2-MoE's sigmoid gate on the shared expert (a ``1 x hidden``
            linear).
        router_bias: DeepSeek-V3's ``e_score_correction_bias`` (one per routed expert and MoE
            layer, ``topk_method: noaux_tc``).
        mtp_layers: DeepSeek-V3's multi-token-prediction modules (``num_nextn_predict_layers``),
            counted apart (:func:`mtp_tensors`), never in the main model's totals.
        notes: what the import left out or assumed, one sentence each.
        source: the file's path (as given) and SHA-256 (``"<path> (sha256 <hex>)"``).
        sha256: the file's SHA-256, 64 hex digits.
    """

    family: str
    shape: ModelShape
    sources: Mapping[str, str]
    attn_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: str = "none"
    norms_per_layer: int = 2
    norm: str = "rms"
    shared_expert_gate: bool = False
    router_bias: bool = False
    mtp_layers: int = 0
    notes: tuple[str, ...] = ()
    source: str = ""
    sha256: str = ""


class _Keys:
    """Reads keys of one config object, collecting every problem (one ConfigError at the end)
    and the source of every value."""

    def __init__(self, data: Mapping[str, Any], where: str, label: str, family: str) -> None:
        self.data, self.where, self.label, self.family = data, where, label, family
        self.fam = _FAMILIES[family]
        self.problems: list[Problem] = []
        self.cited: dict[str, str] = {}  # config key -> source text
        self.field_keys: dict[str, tuple[str, ...]] = {}  # shape field -> config keys

    def of(self, name: str, *config_keys: str) -> None:
        """Record that shape field ``name`` comes from ``config_keys``."""
        self.field_keys[name] = config_keys

    def _missing(self, key: str) -> None:
        self.problems.append(
            Problem(
                self.where,
                key,
                None,
                f"missing key {key!r} (model_type {self.family!r}); supported families: "
                f"{', '.join(SUPPORTED_FAMILIES)}",
                ", ".join(SUPPORTED_FAMILIES),
            )
        )

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value of ``key`` (None counts as absent), else the family's or the given
        default, else a missing-key problem (and None)."""
        v = self.data.get(key)
        if v is not None:
            self.cited[key] = f"[HF-CONFIG] {self.label}: {key}"
            return v
        if key in self.fam.defaults:
            self.cited[key] = (
                f"{_TRANSFORMERS} {self.fam.config_class} default "
                f"{self.fam.defaults[key]!r} ({key} absent from {self.label})"
            )
            return self.fam.defaults[key]
        if default is _MISSING:
            self._missing(key)
            return None
        self.cited[key] = (
            f"{_TRANSFORMERS} {self.fam.config_class} default {default!r} "
            f"({key} absent from {self.label})"
        )
        return default

    def int_(self, key: str, default: Any = _MISSING, *, low: int = 1) -> int:
        """An integer >= ``low`` (a problem and ``low`` otherwise)."""
        v = self.get(key, default)
        if v is None:
            return low
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            self.problems.append(
                Problem(self.where, key, v, f"{key}={v!r} must be an integer >= {low}")
            )
            return low
        return int(v)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean (a problem and ``default`` otherwise)."""
        v = self.get(key, default)
        if not isinstance(v, bool):
            self.problems.append(Problem(self.where, key, v, f"{key}={v!r} must be true or false"))
            return default
        return v

    def number(self, key: str, default: Any = _MISSING) -> float:
        """A finite positive number (a problem and 1.0 otherwise)."""
        v = self.get(key, default)
        if v is None:
            return 1.0
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < float(v) < math.inf:
            self.problems.append(Problem(self.where, key, v, f"{key}={v!r} must be a number > 0"))
            return 1.0
        return float(v)


# ---------------------------------------------------------------------------------------------
# Reading


def read_hf_config(path: str | Path) -> tuple[dict[str, Any], str]:
    """Read a ``config.json``.

    Args:
        path: the file.

    Returns:
        ``(data, sha256)``: the JSON object and the SHA-256 of the file's bytes (64 hex digits).

    Raises:
        ConfigError: the file cannot be read, is not JSON, or is not a JSON object.
    """
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError([Problem(where, "", None, f"cannot read: {e.strerror or e}")]) from None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError([Problem(where, "", None, f"not a JSON file: {e}")]) from None
    if not isinstance(data, dict):
        msg = f"a config.json holds a JSON object, not a {type(data).__name__}"
        raise ConfigError([Problem(where, "", None, msg)])
    return data, hashlib.sha256(raw).hexdigest()


def load_hf_model(path: str | Path) -> HfModel:
    """:func:`read_hf_config` then :func:`parse_hf_config` of one file.

    Raises:
        ConfigError: as both.
    """
    data, digest = read_hf_config(path)
    return parse_hf_config(data, source=str(path), sha256=digest)


def _family_of(data: Mapping[str, Any], where: str) -> tuple[str, Mapping[str, Any], str]:
    """``(family, the object holding the decoder's keys, its key prefix)``; a ``gemma3`` file's
    decoder is its ``text_config``."""
    mt = data.get("model_type")
    valid = ", ".join(SUPPORTED_FAMILIES)
    if mt is None:
        raise ConfigError(
            [
                Problem(
                    where,
                    "model_type",
                    None,
                    f"missing key 'model_type'; supported families: {valid}",
                    valid,
                )
            ]
        )
    if mt == "gemma3":
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise ConfigError(
                [
                    Problem(
                        where,
                        "text_config",
                        text,
                        f"a gemma3 file needs its text_config object; supported families: {valid}",
                        valid,
                    )
                ]
            )
        return "gemma3_text", text, "text_config."
    if mt not in _FAMILIES:
        msg = f"unknown model_type {mt!r}; supported families: {valid}"
        close = difflib.get_close_matches(str(mt), SUPPORTED_FAMILIES, n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
        raise ConfigError([Problem(where, "model_type", mt, msg, valid)])
    return str(mt), data, ""


def parse_hf_config(
    data: Mapping[str, Any], *, source: str = "<config>", sha256: str = ""
) -> HfModel:
    """Turn a ``config.json`` object into an :class:`HfModel`.

    Args:
        data: the JSON object.
        source: the file's path (problems and sources name it).
        sha256: the file's SHA-256 (sources cite it).

    Returns:
        The model.

    Raises:
        ConfigError: an unknown ``model_type``, missing shape keys, values of the wrong type,
            or a shape the workload schema rejects; every problem, one per line.
    """
    family, obj, prefix = _family_of(data, source)
    label = f"{source} (sha256 {sha256})" if sha256 else source
    keys = _Keys(obj, f"{source}{': ' + prefix[:-1] if prefix else ''}", label, family)
    fam = keys.fam
    fields = _core_fields(keys)
    fields.update(_moe_fields(keys, fields["layers"], fields["intermediate"]))
    if family in _MLA_FAMILIES:
        fields.update(_mla_fields(keys))
    fields.update(_window_fields(keys, fields["layers"], fields["max_position_embeddings"]))
    theta, scaling, rope_notes = _rope(keys)
    fields.update(rope_theta=theta, rope_scaling=scaling)
    if fam.mlp == "plain":
        fields["mlp"] = "plain"
    attn_bias, o_bias = _attention_biases(keys)
    mlp_bias = fam.mlp_bias == "always" or (fam.mlp_bias == "flag" and keys.flag("mlp_bias", False))
    mtp = keys.int_("num_nextn_predict_layers", 0, low=0) if family == "deepseek_v3" else 0
    if keys.problems:
        raise ConfigError(keys.problems)
    try:
        shape = ModelShape(**fields)
    except ValueError as e:
        raise ConfigError([Problem(source, "", None, str(e))]) from None
    return HfModel(
        family=family,
        shape=shape,
        sources=_field_sources(keys, fields),
        attn_bias=attn_bias,
        o_bias=o_bias,
        mlp_bias=mlp_bias,
        qk_norm=fam.qk_norm,
        norms_per_layer=fam.norms,
        norm=fam.norm,
        shared_expert_gate=fam.moe == "qwen2_moe" and fields.get("shared_experts", 0) > 0,
        router_bias=fam.moe == "deepseek"
        and obj.get("topk_method", _topk_default(family)) == "noaux_tc",
        mtp_layers=mtp,
        notes=tuple(rope_notes + _family_notes(data, obj, family, prefix)),
        source=label,
        sha256=sha256,
    )


def _topk_default(family: str) -> str:
    """``topk_method`` when the file has none (``DeepseekV3Config``: ``noaux_tc``)."""
    return "noaux_tc" if family == "deepseek_v3" else "greedy"


_FIELD_KEYS = {
    "hidden": "hidden_size", "intermediate": "intermediate_size", "layers": "num_hidden_layers",
    "heads": "num_attention_heads", "kv_heads": "num_key_value_heads", "head_dim": "head_dim",
    "vocab": "vocab_size", "max_position_embeddings": "max_position_embeddings",
    "tie_word_embeddings": "tie_word_embeddings",
}  # fmt: skip
"""Shape fields read from one key of the same name in every family."""


def _core_fields(keys: _Keys) -> dict[str, Any]:
    """The dense shape: widths, layers, heads, vocabulary, context, tied head."""
    fam = keys.fam
    out: dict[str, Any] = {}
    for name, key in _FIELD_KEYS.items():
        if name not in ("kv_heads", "head_dim", "tie_word_embeddings"):
            out[name] = keys.int_(key)
            keys.of(name, key)
    out["tie_word_embeddings"] = keys.flag("tie_word_embeddings", fam.tie)
    keys.of("tie_word_embeddings", "tie_word_embeddings")
    keys.of("kv_heads", "num_key_value_heads")
    if keys.data.get("num_key_value_heads") is None and "num_key_value_heads" not in fam.defaults:
        out["kv_heads"] = out["heads"]
        keys.cited["num_key_value_heads"] = (
            f"{_TRANSFORMERS} {fam.config_class}: num_key_value_heads absent from {keys.label}: "
            "multi-head attention, one KV head per query head"
        )
    else:
        out["kv_heads"] = keys.int_("num_key_value_heads")
    keys.of("head_dim", "head_dim")
    if keys.family in _MLA_FAMILIES:
        out["head_dim"] = 1  # _mla_fields sets it
    elif (
        keys.data.get("head_dim") is None
        and "head_dim" not in fam.defaults
        and fam.head_dim is None
    ):
        out["head_dim"] = max(1, out["hidden"] // out["heads"])
        keys.cited["head_dim"] = (
            f"[DERIVED] hidden_size / num_attention_heads = "
            f"{out['hidden']} / {out['heads']} ({keys.label} has no "
            "head_dim)"
        )
    else:
        out["head_dim"] = keys.int_("head_dim", fam.head_dim)
    return out


def _moe_fields(keys: _Keys, layers: int, intermediate: int) -> dict[str, Any]:
    """Routed and shared experts and the dense layers of an MoE model (none for a dense one)."""
    style = keys.fam.moe
    if style is None:
        return {}
    keys.of("experts_per_token", "num_experts_per_tok")
    if style in ("mixtral", "olmoe"):
        key = "num_local_experts" if style == "mixtral" else "num_experts"
        keys.of("experts", key)
        keys.of("expert_intermediate", "intermediate_size")
        return dict(
            experts=keys.int_(key),
            experts_per_token=keys.int_("num_experts_per_tok"),
            expert_intermediate=intermediate,
        )
    keys.of("expert_intermediate", "moe_intermediate_size")
    if style == "deepseek":
        n = keys.int_("n_routed_experts")
        shared = keys.int_("n_shared_experts", 0, low=0)
        first = keys.int_("first_k_dense_replace", 0, low=0)
        freq = keys.int_("moe_layer_freq", 1)
        dense = tuple(i for i in range(layers) if not (i >= first and i % freq == 0))
        keys.of("experts", "n_routed_experts")
        keys.of("shared_experts", "n_shared_experts")
        keys.of("shared_expert_intermediate", "moe_intermediate_size")
        keys.of("dense_mlp_layers", "first_k_dense_replace", "moe_layer_freq")
    else:  # qwen2_moe, qwen3_moe
        n = keys.int_("num_experts")
        step = keys.int_("decoder_sparse_step", 1)
        keys.of("experts", "num_experts")
        keys.of("dense_mlp_layers", "decoder_sparse_step", "mlp_only_layers")
        keys.of("shared_experts", "shared_expert_intermediate_size")
        keys.of("shared_expert_intermediate", "shared_expert_intermediate_size")
        only = keys.get("mlp_only_layers", [])
        if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
            keys.problems.append(
                Problem(
                    keys.where,
                    "mlp_only_layers",
                    only,
                    "mlp_only_layers must be a list of layer indices",
                )
            )
            only = []
        dense = tuple(i for i in range(layers) if i in only or (i + 1) % step)
        shared = 0
        if style == "qwen2_moe":
            shared = 1 if keys.int_("shared_expert_intermediate_size", 0, low=0) else 0
    moe_width = keys.int_("moe_intermediate_size")
    out = dict(
        experts=n,
        experts_per_token=keys.int_("num_experts_per_tok"),
        expert_intermediate=moe_width,
        dense_mlp_layers=dense,
    )
    if shared:
        width = moe_width
        if style == "qwen2_moe":
            width = keys.int_("shared_expert_intermediate_size", 0, low=0)
        out.update(shared_experts=shared, shared_expert_intermediate=width)
    return out


def _mla_fields(keys: _Keys) -> dict[str, Any]:
    """Multi-head latent attention: latent ranks and per-head widths."""
    nope = keys.int_("qk_nope_head_dim")
    rope = keys.int_("qk_rope_head_dim")
    keys.of("head_dim", "qk_nope_head_dim", "qk_rope_head_dim")
    for name in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim"):
        keys.of(name, name)
    keys.of("attention", "kv_lora_rank")
    return dict(
        attention="mla",
        head_dim=nope + rope,
        qk_rope_head_dim=rope,
        kv_lora_rank=keys.int_("kv_lora_rank"),
        q_lora_rank=keys.int_("q_lora_rank", 0, low=0),
        v_head_dim=keys.int_("v_head_dim"),
    )


def _window_fields(keys: _Keys, layers: int, max_positions: int) -> dict[str, Any]:
    """The sliding window and the layers that use it (none when the window spans the whole
    context)."""
    style = keys.fam.window
    if style == "none":
        return {}
    if style == "qwen" and not keys.flag("use_sliding_window", False):
        return {}
    if keys.data.get("sliding_window", keys.fam.defaults.get("sliding_window")) is None:
        return {}
    window = keys.int_("sliding_window")
    keys.of("sliding_window_tokens", "sliding_window")
    types = keys.data.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
        keys.get("layer_types")
        keys.of("sliding_window_layers", "layer_types")
    elif style == "alternate":
        sliding = tuple(range(0, layers, 2))
        keys.cited["sliding_window_layers"] = (
            f"{_TRANSFORMERS} {keys.fam.config_class}: the "
            "even layers (0, 2, ...) attend within the window"
        )
        keys.of("sliding_window_layers", "sliding_window_layers")
    elif style == "pattern":
        pattern = keys.int_("sliding_window_pattern")
        sliding = tuple(i for i in range(layers) if (i + 1) % pattern)
        keys.of("sliding_window_layers", "sliding_window_pattern")
    elif style == "qwen":
        start = keys.int_("max_window_layers", layers, low=0)
        sliding = tuple(range(start, layers))
        keys.of("sliding_window_layers", "use_sliding_window", "max_window_layers")
    else:
        sliding = tuple(range(layers))
        keys.of("sliding_window_layers", "sliding_window")
    if window >= max_positions or not sliding:
        return {}
    return dict(sliding_window_tokens=window, sliding_window_layers=sliding)


_ROPE_TYPES = ("llama3", "linear", "dynamic", "yarn")


def _rope(keys: _Keys) -> tuple[float, RopeScaling | None, list[str]]:
    """The RoPE base and context extension (``rope_scaling``, or transformers 5's
    ``rope_parameters``)."""
    params = keys.data.get("rope_parameters")
    params = params if isinstance(params, dict) else {}
    base_key = "rotary_emb_base" if keys.family == "gpt_neox" else "rope_theta"
    if keys.data.get(base_key) is None and params.get("rope_theta") is not None:
        theta = float(params["rope_theta"])
        keys.cited[base_key] = f"[HF-CONFIG] {keys.label}: rope_parameters.rope_theta"
    else:
        theta = keys.number(base_key, keys.fam.rope_theta)
    keys.of("rope_theta", base_key)
    keys.of("rope_scaling", "rope_scaling")
    rs = keys.data.get("rope_scaling")
    rs = rs if isinstance(rs, dict) else params
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return theta, None, []
    if kind not in _ROPE_TYPES:
        return (
            theta,
            None,
            [
                f"rope_scaling of type {kind!r} is not represented: the workload "
                f"keeps the base RoPE (theta {theta:g})"
            ],
        )
    try:
        scaling = RopeScaling(
            type=kind,
            factor=float(rs["factor"]),
            original_max_position_embeddings=rs.get("original_max_position_embeddings"),
            low_freq_factor=rs.get("low_freq_factor") if kind == "llama3" else None,
            high_freq_factor=rs.get("high_freq_factor") if kind == "llama3" else None,
        )
    except (KeyError, TypeError, ValueError):
        keys.problems.append(
            Problem(
                keys.where,
                "rope_scaling",
                rs,
                f"rope_scaling of type {kind!r} needs a numeric factor",
            )
        )
        return theta, None, []
    extra = sorted(
        set(rs)
        - {
            "rope_type",
            "type",
            "factor",
            "original_max_position_embeddings",
            "low_freq_factor",
            "high_freq_factor",
            "rope_theta",
        }
    )
    notes = [f"rope_scaling keys {', '.join(extra)} are not represented"] if extra else []
    keys.cited["rope_scaling"] = f"[HF-CONFIG] {keys.label}: rope_scaling"
    return theta, scaling, notes


def _attention_biases(keys: _Keys) -> tuple[bool, bool]:
    """(q/k/v biases, output projection bias)."""
    style = keys.fam.attn_bias
    if style == "qkv":
        return True, False
    if style == "neox":
        flag = keys.flag("attention_bias", True)
        return flag, flag
    if style == "flag":
        flag = keys.flag("attention_bias", False)
        return flag, flag
    return False, False


def _family_notes(
    data: Mapping[str, Any], obj: Mapping[str, Any], family: str, prefix: str
) -> list[str]:
    """What the workload and the counts leave out, in words."""
    notes = []
    if prefix:
        notes.append(
            "a multimodal file: only its text decoder (text_config) is imported and "
            "counted; the vision tower and the multimodal projector are not"
        )
    if "quantization_config" in data:
        notes.append(
            "the file's quantization_config is not used: counts are per parameter; "
            "weight bytes are given per format"
        )
    pr = obj.get("partial_rotary_factor", obj.get("rotary_pct"))
    if isinstance(pr, numbers.Real) and pr != 1:
        notes.append(f"RoPE rotates {pr:g} of each head's channels (not represented in the shape)")
    if family == "gemma3_text":
        notes.append(
            "local (sliding-window) layers use RoPE base "
            f"{obj.get('rope_local_base_freq', 10000.0):g}; the shape keeps the global "
            "layers' base"
        )
    return notes


def _field_sources(keys: _Keys, fields: Mapping[str, Any]) -> dict[str, str]:
    """``model.<field>`` -> the source of its value."""
    out = {}
    for name in fields:
        cited = [keys.cited[k] for k in keys.field_keys.get(name, ()) if k in keys.cited]
        if cited:
            out[f"model.{name}"] = "; ".join(dict.fromkeys(cited))
    if "mlp" in fields:
        out["model.mlp"] = (
            f"{_TRANSFORMERS} {keys.fam.config_class}: an up and a down "
            "projection with an activation between (no gate)"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Parameters


Role = Literal["embedding", "lm_head", "linear", "router", "norm", "bias"]


@dataclass(frozen=True)
class ParamTensor:
    """One parameter tensor of a model, with its copies.

    Attributes:
        name: ``transformers``' module path without the layer index
            (``layers.self_attn.q_proj.weight``, ``layers.mlp.experts.down_proj.weight``).
        out_features: rows (output channels; vocabulary rows of an embedding).
        in_features: columns (input channels; 1 for a vector: norms, biases).
        copies: how many the model holds (layers x experts).
        active_copies: how many one token's forward pass uses (``experts_per_token`` of the
            routed experts of each MoE layer; all of the others).
        role: ``embedding``, ``lm_head``, ``linear``, ``router``, ``norm`` or ``bias``.
    """

    name: str
    out_features: int
    in_features: int
    copies: int
    active_copies: int
    role: Role

    @property
    def params(self) -> int:
        """Parameters of all copies."""
        return self.out_features * self.in_features * self.copies

    @property
    def active_params(self) -> int:
        """Parameters of the copies one token uses."""
        return self.out_features * self.in_features * self.active_copies


def _t(
    name: str, out_f: int, in_f: int, copies: int, role: Role, active: int | None = None
) -> ParamTensor:
    return ParamTensor(name, out_f, in_f, copies, copies if active is None else active, role)


def _linear(
    name: str, out_f: int, in_f: int, copies: int, bias: bool, active: int | None = None
) -> list[ParamTensor]:
    """A linear layer's weight (and bias)."""
    out = [_t(f"{name}.weight", out_f, in_f, copies, "linear", active)]
    if bias:
        out.append(_t(f"{name}.bias", out_f, 1, copies, "bias", active))
    return out


def _norm(name: str, width: int, copies: int, kind: str) -> list[ParamTensor]:
    """An RMSNorm's weight, or a LayerNorm's weight and bias."""
    out = [_t(f"{name}.weight", width, 1, copies, "norm")]
    if kind == "layer":
        out.append(_t(f"{name}.bias", width, 1, copies, "norm"))
    return out


def _attention(m: HfModel, copies: int, prefix: str = "layers") -> list[ParamTensor]:
    """The attention block's tensors (GQA with optional biases and QK-norms, or MLA)."""
    s = m.shape
    p = f"{prefix}.self_attn"
    if s.is_mla:
        qk = s.heads * s.head_dim
        out: list[ParamTensor] = []
        if s.q_lora_rank:
            out += _linear(f"{p}.q_a_proj", s.q_lora_rank, s.hidden, copies, m.attn_bias)
            out += _norm(f"{p}.q_a_layernorm", s.q_lora_rank, copies, "rms")
            out += _linear(f"{p}.q_b_proj", qk, s.q_lora_rank, copies, False)
        else:
            out += _linear(f"{p}.q_proj", qk, s.hidden, copies, False)
        out += _linear(
            f"{p}.kv_a_proj_with_mqa",
            s.kv_lora_rank + s.qk_rope_head_dim,
            s.hidden,
            copies,
            m.attn_bias,
        )
        out += _norm(f"{p}.kv_a_layernorm", s.kv_lora_rank, copies, "rms")
        nope = s.head_dim - s.qk_rope_head_dim
        out += _linear(
            f"{p}.kv_b_proj", s.heads * (nope + s.v_head_dim), s.kv_lora_rank, copies, False
        )
        out += _linear(f"{p}.o_proj", s.hidden, s.heads * s.v_head_dim, copies, m.o_bias)
        return out
    out = _linear(f"{p}.q_proj", s.q_dim, s.hidden, copies, m.attn_bias)
    out += _linear(f"{p}.k_proj", s.kv_dim, s.hidden, copies, m.attn_bias)
    out += _linear(f"{p}.v_proj", s.kv_dim, s.hidden, copies, m.attn_bias)
    out += _linear(f"{p}.o_proj", s.hidden, s.q_dim, copies, m.o_bias)
    if m.qk_norm == "head":
        out += _norm(f"{p}.q_norm", s.head_dim, copies, "rms")
        out += _norm(f"{p}.k_norm", s.head_dim, copies, "rms")
    elif m.qk_norm == "full":
        out += _norm(f"{p}.q_norm", s.q_dim, copies, "rms")
        out += _norm(f"{p}.k_norm", s.kv_dim, copies, "rms")
    return out


def _mlp(
    m: HfModel, name: str, width: int, copies: int, active: int | None = None
) -> list[ParamTensor]:
    """One MLP (gated: gate, up, down; plain: up, down) of ``width`` channels."""
    s = m.shape
    out: list[ParamTensor] = []
    if s.mlp == "gated":
        out += _linear(f"{name}.gate_proj", width, s.hidden, copies, m.mlp_bias, active)
    out += _linear(f"{name}.up_proj", width, s.hidden, copies, m.mlp_bias, active)
    out += _linear(f"{name}.down_proj", s.hidden, width, copies, m.mlp_bias, active)
    return out


def _moe(m: HfModel, n_moe: int, prefix: str = "layers") -> list[ParamTensor]:
    """The MoE blocks of ``n_moe`` layers: router (and its bias), routed and shared experts."""
    s = m.shape
    p = f"{prefix}.mlp"
    out = [_t(f"{p}.gate.weight", s.experts, s.hidden, n_moe, "router")]
    if m.router_bias:
        out.append(_t(f"{p}.gate.e_score_correction_bias", s.experts, 1, n_moe, "router"))
    out += _mlp(
        m, f"{p}.experts", s.expert_intermediate, s.experts * n_moe, s.experts_per_token * n_moe
    )
    if s.shared_experts:
        width = s.shared_experts * s.shared_expert_intermediate
        out += _mlp(m, f"{p}.shared_experts", width, n_moe)
        if m.shared_expert_gate:
            out += _linear(f"{p}.shared_expert_gate", 1, s.hidden, n_moe, False)
    return out


def _layer_norms(m: HfModel, copies: int, prefix: str = "layers") -> list[ParamTensor]:
    """The per-layer norms (input and post-attention; Gemma 2/3 also pre- and
    post-feedforward)."""
    names = ["input_layernorm", "post_attention_layernorm"]
    if m.norms_per_layer == 4:
        names += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    out: list[ParamTensor] = []
    for n in names:
        out += _norm(f"{prefix}.{n}", m.shape.hidden, copies, m.norm)
    return out


def parameter_tensors(model: HfModel) -> tuple[ParamTensor, ...]:
    """Every parameter tensor of the main model (the MTP module apart: :func:`mtp_tensors`).

    Args:
        model: the model.

    Returns:
        The tensors: the embedding, each layer's attention, norms and MLP or MoE block, the
        final norm and the LM head when it is not tied to the embedding.
    """
    s = model.shape
    n_moe = s.layers - len(s.dense_mlp_layers) if s.is_moe else 0
    out = [_t("embed_tokens.weight", s.vocab, s.hidden, 1, "embedding")]
    out += _attention(model, s.layers)
    out += _layer_norms(model, s.layers)
    if s.layers - n_moe:
        out += _mlp(model, "layers.mlp", s.intermediate, s.layers - n_moe)
    if n_moe:
        out += _moe(model, n_moe)
    out += _norm("norm", s.hidden, 1, model.norm)
    if not s.tie_word_embeddings:
        out.append(_t("lm_head.weight", s.vocab, s.hidden, 1, "lm_head"))
    return tuple(out)


def mtp_tensors(model: HfModel) -> tuple[ParamTensor, ...]:
    """DeepSeek-V3's multi-token-prediction modules (``num_nextn_predict_layers``), apart.

    Each module is one more decoder layer (an MoE layer), two RMSNorms (``enorm``, ``hnorm``),
    the ``eh_proj`` projection (``2 x hidden -> hidden``) and the shared head's norm; its
    embedding and output head are the main model's (shared, not counted again).

    Returns:
        The tensors (empty for a model without MTP modules).
    """
    n = model.mtp_layers
    if not n:
        return ()
    h = model.shape.hidden
    p = "mtp"
    out = _attention(model, n, p) + _layer_norms(model, n, p) + _moe(model, n, p)
    out += _norm(f"{p}.enorm", h, n, "rms") + _norm(f"{p}.hnorm", h, n, "rms")
    out += _linear(f"{p}.eh_proj", h, 2 * h, n, False)
    out += _norm(f"{p}.shared_head.norm", h, n, "rms")
    return tuple(out)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a model.

    Attributes:
        total: every parameter of the main model.
        active: the parameters one token's forward pass uses: all but the routed experts it
            does not select; the input embedding table counts in full (the convention of
            Mistral's, Qwen's and OLMoE's "active" figures).
        active_without_input_embedding: ``active`` less the input embedding table (a lookup,
            not a product; DeepSeek's "activated parameters" count this way). A tied embedding
            stays in: it is the LM head's matrix too.
        embedding: the input embedding table, ``vocab x hidden``.
        lm_head: the untied LM head, ``vocab x hidden`` (0 when tied).
        non_embedding: ``total`` less the embedding and the untied LM head (the "non-embedding
            parameters" of Qwen's and Gemma's model cards).
        mtp: DeepSeek-V3's MTP modules (not in ``total``; 0 for other models).
    """

    total: int
    active: int
    active_without_input_embedding: int
    embedding: int
    lm_head: int
    non_embedding: int
    mtp: int


def parameter_counts(model: HfModel) -> ParamCounts:
    """Sum :func:`parameter_tensors` (:class:`ParamCounts`)."""
    ts = parameter_tensors(model)
    total = sum(t.params for t in ts)
    active = sum(t.active_params for t in ts)
    emb = sum(t.params for t in ts if t.role == "embedding")
    head = sum(t.params for t in ts if t.role == "lm_head")
    lookup = 0 if model.shape.tie_word_embeddings else emb
    return ParamCounts(
        total=total,
        active=active,
        active_without_input_embedding=active - lookup,
        embedding=emb,
        lm_head=head,
        non_embedding=total - emb - head,
        mtp=sum(t.params for t in mtp_tensors(model)),
    )


# ---------------------------------------------------------------------------------------------
# Weight bytes


WEIGHT_FORMATS: dict[str, str] = {
    "bf16": "every parameter in BF16, 2 B each",
    "fp8": "linear weights in FP8 E4M3 (1 B) with one FP32 scale per 128 x 128 block "
           "(ceil(out/128) x ceil(in/128) x 4 B per matrix); the rest in BF16",
    "int4": "linear weights in 4-bit integers (two per byte along each row) with one FP16 "
            "scale per 128 inputs of each row (symmetric, no zero point); the rest in BF16",
    "mxfp4": "linear weights in OCP MXFP4: E2M1 elements (two per byte) with one E8M0 scale "
             "(1 B) per 32 inputs of each row; the rest in BF16",
    "nvfp4": "linear weights in NVFP4: E2M1 elements (two per byte) with one FP8 E4M3 scale "
             "(1 B) per 16 inputs of each row and one FP32 scale per matrix; the rest in BF16",
}  # fmt: skip
"""Weight formats of :func:`weight_bytes` and how each is counted. "Linear weights" are the
weight matrices of the decoder layers (attention, MLP, experts, shared experts, MLA projections);
the embedding, the LM head, norms, biases and routers stay in BF16 in every format."""


def _quantized_bytes(fmt: str, rows: int, cols: int) -> int:
    """Bytes of one ``rows x cols`` weight matrix in a format of :data:`WEIGHT_FORMATS`."""
    packed = rows * ((cols + 1) // 2)
    if fmt == "fp8":
        return rows * cols + 4 * (-(-rows // 128)) * (-(-cols // 128))
    if fmt == "int4":
        return packed + 2 * rows * (-(-cols // 128))
    if fmt == "mxfp4":
        return packed + rows * (-(-cols // 32))
    if fmt == "nvfp4":
        return packed + rows * (-(-cols // 16)) + 4
    raise ValueError(f"unknown weight format {fmt!r}; valid: {', '.join(WEIGHT_FORMATS)}")


def weight_bytes(tensors: tuple[ParamTensor, ...]) -> dict[str, int]:
    """Bytes of ``tensors`` in every format of :data:`WEIGHT_FORMATS`.

    Args:
        tensors: :func:`parameter_tensors` (or :func:`mtp_tensors`).

    Returns:
        Format name -> bytes (exact integers).
    """
    out = {"bf16": 2 * sum(t.params for t in tensors)}
    for fmt in WEIGHT_FORMATS:
        if fmt == "bf16":
            continue
        total = 0
        for t in tensors:
            if t.role == "linear":
                total += t.copies * _quantized_bytes(fmt, t.out_features, t.in_features)
            else:
                total += 2 * t.params
        out[fmt] = total
    return out


# ---------------------------------------------------------------------------------------------
# The workload


_SCENARIOS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("prefill_1k", {"phase": "prefill", "tokens": 1024}),
    ("prefill_2k", {"phase": "prefill", "tokens": 2048}),
    ("prefill_4k", {"phase": "prefill", "tokens": 4096}),
    ("prefill_16k", {"phase": "prefill", "tokens": 16384}),
    ("decode_2k", {"phase": "decode", "tokens": 2048, "decode_steps": 4}),
    ("decode_16k", {"phase": "decode", "tokens": 16384, "decode_steps": 4}),
)
"""The shipped workloads' scenarios (batch 1), of which an import keeps those that fit the
model's context."""


def _scenarios(max_positions: int) -> tuple[dict[str, dict[str, Any]], str]:
    """The scenarios within ``max_positions`` and the default one (``prefill_2k``, else the
    longest prefill that fits; a model of under 1024 positions gets one prefill of its whole
    context)."""
    out = {}
    for name, sc in _SCENARIOS:
        steps = sc.get("decode_steps", 0)
        if sc["tokens"] + steps <= max_positions:
            out[name] = dict(sc)
    if not out:
        out[f"prefill_{max_positions}"] = {"phase": "prefill", "tokens": max_positions}
    prefills = [n for n in out if n.startswith("prefill")]
    return out, "prefill_2k" if "prefill_2k" in out else prefills[-1]


_OPTIONAL = (
    "rope_scaling",
    "experts",
    "experts_per_token",
    "expert_intermediate",
    "shared_experts",
    "shared_expert_intermediate",
    "attention",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
    "mlp",
    "dense_mlp_layers",
    "sliding_window_tokens",
    "sliding_window_layers",
)


def _model_doc(shape: ModelShape) -> dict[str, Any]:
    """The ``model:`` section: every required field, optional ones where they differ from
    the default."""
    defaults = ModelShape(
        hidden=1,
        intermediate=1,
        layers=1,
        heads=1,
        kv_heads=1,
        head_dim=1,
        vocab=1,
        max_position_embeddings=1,
    )
    doc: dict[str, Any] = {}
    for name in (
        "hidden",
        "intermediate",
        "layers",
        "heads",
        "kv_heads",
        "head_dim",
        "vocab",
        "max_position_embeddings",
        "tie_word_embeddings",
        "rope_theta",
    ):
        doc[name] = getattr(shape, name)
    for name in _OPTIONAL:
        v = getattr(shape, name)
        if v == getattr(defaults, name):
            continue
        if isinstance(v, RopeScaling):
            v = {k: x for k, x in vars(v).items() if x is not None}
        doc[name] = list(v) if isinstance(v, tuple) else v
    return doc


def default_name(path: str | Path) -> str:
    """A workload name from a config file's path: its folder's name for ``config.json``
    (``.../Meta-Llama-3-8B/config.json`` -> ``meta-llama-3-8b``), else the file's stem;
    lower case, characters other than letters, digits, ``.``, ``_`` and ``-`` as ``-``."""
    p = Path(path)
    stem = p.resolve().parent.name if p.name == "config.json" else p.stem
    name = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-.")
    return name or "model"


def hf_workload(model: HfModel, name: str) -> tuple[dict[str, Any], WorkloadConfig]:
    """The workload file of an imported model: its data and the checked config.

    Args:
        model: the model.
        name: the workload's name.

    Returns:
        ``(document, config)``: the YAML document as plain data (``version``, ``name``,
        ``model``, ``default_scenario``, ``scenarios``, ``sources``) and the
        :class:`~coaccel.spine.workload.WorkloadConfig` the workload loader makes of it.

    Raises:
        ConfigError: the workload schema rejects the document (naming the config file).
    """
    scenarios, default = _scenarios(model.shape.max_position_embeddings)
    model_doc = _model_doc(model.shape)
    sources = {k: v for k, v in model.sources.items() if k.split(".", 1)[1] in model_doc}
    doc = {
        "version": WorkloadConfig.VERSION,
        "name": name,
        "model": model_doc,
        "default_scenario": default,
        "scenarios": scenarios,
        "sources": sources,
    }
    return doc, load_config_dict(doc, WorkloadConfig, source=model.source or name)
