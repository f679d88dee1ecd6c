"""Real attention inputs: all-MiniLM-L6-v2's queries, keys and values on long English passages.

Corpus: the Python documentation topics that ship with CPython in the standard library module
``pydoc_data.topics`` ([PYDOC]; the text of ``help("assert")`` and friends, one entry per
statement, type or concept of the language reference). It needs no download, and its long
entries reach MiniLM's 512-position limit. Only its prose is used: :func:`prose` drops the
indented code and grammar blocks and the heading underlines, and joins the remaining
paragraphs. The text is that of the running Python version, so token counts can differ slightly
between versions (reports record the version).

Passages are picked deterministically: the topics are sorted by name, those whose prose reaches
the requested token count are kept, and ``n`` of them are taken at evenly spaced ranks (the
centres of ``n`` equal slices of that list).

MiniLM ([MINILM]) is a bidirectional BERT encoder with absolute position embeddings: its keys
carry **no RoPE**, and each of its 12 heads has its own keys and values, so each head is its own
KV head (a GQA group of 1). The DeltaLLM datapath still applies its causal mask; the keys' token
to token changes, which the Delta-Key threshold acts on, are the model's own.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ._text import prose
from .minilm import MiniLM
from .synthetic_attention import AttentionTensors

if TYPE_CHECKING:
    from .decoder import Decoder

__all__ = [
    "Passage",
    "decoder_attention",
    "decoder_passages",
    "minilm_attention",
    "prose",
    "pydoc_passages",
]


@dataclass(frozen=True)
class Passage:
    """One corpus passage.

    Attributes:
        topic: the ``pydoc_data.topics`` key (e.g. ``"assert"``).
        text: its prose (see :func:`prose`).
        ids: int64 ``(T,)`` token ids of the model that picked the passage (MiniLM: word
            pieces [CLS] … [SEP]; a decoder: its own tokenizer's ids), truncated to the request.
        available_tokens: tokens of the whole prose (MiniLM: with [CLS]/[SEP], capped at its
            512 positions; a decoder: capped at its context length).
    """

    topic: str
    text: str
    ids: npt.NDArray[np.int64]
    available_tokens: int

    @property
    def tokens(self) -> int:
        """Tokens used, T."""
        return int(self.ids.shape[0])


def pydoc_passages(model: MiniLM, n: int = 2, tokens: int = 512) -> list[Passage]:
    """Pick ``n`` passages of ``tokens`` MiniLM tokens from the Python documentation topics.

    Args:
        model: the loaded MiniLM (its tokenizer is used).
        n: passages wanted (≥ 1).
        tokens: tokens per passage including [CLS] and [SEP], ``3..512``.

    Returns:
        ``n`` passages in topic-name order, each exactly ``tokens`` long.

    Raises:
        ValueError: fewer than ``n`` topics are long enough.
    """
    from pydoc_data.topics import topics

    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    eligible: list[Passage] = []
    for name in sorted(topics):
        text = prose(topics[name])
        if not text:
            continue
        avail = int(model.tokenize_long(text).shape[0])
        if avail >= tokens:
            eligible.append(Passage(name, text, model.tokenize_long(text, tokens), avail))
    return _evenly_spaced(eligible, n, f"{tokens} tokens")


def _evenly_spaced(eligible: list[Passage], n: int, what: str) -> list[Passage]:
    """``n`` of the eligible passages at the centres of ``n`` equal slices of the list (rank
    ``floor((i + 1/2)·N / n)``), or a ValueError saying how many topics have ``what``."""
    if len(eligible) < n:
        raise ValueError(
            f"only {len(eligible)} pydoc topics of Python {sys.version.split()[0]} have "
            f"{what} of prose; asked for {n}"
        )
    picks = [(2 * i + 1) * len(eligible) // (2 * int(n)) for i in range(int(n))]
    return [eligible[i] for i in picks]


def minilm_attention(
    model: MiniLM,
    passages: Sequence[Passage],
    layers: Sequence[int] | None = None,
) -> list[AttentionTensors]:
    """MiniLM's per-head q, k, v for each passage and layer, in float and INT8.

    Args:
        model: the loaded MiniLM.
        passages: from :func:`pydoc_passages`.
        layers: encoder layers to keep (default all 6).

    Returns:
        One :class:`AttentionTensors` per (passage, layer), passage-major, each with q, k, v
        ``[12, T, 32]`` (``rope=False``, ``causal_model=False``, group 1). The queries are the
        model's before the ``1/sqrt(32)`` softmax scale, which the attention reference applies.
    """
    n_layers = model.config.num_layers
    keep = list(range(n_layers)) if layers is None else [int(i) for i in layers]
    bad = [i for i in keep if not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"layers must be in [0, {n_layers}); got {bad}")
    out: list[AttentionTensors] = []
    for p in passages:
        ids = p.ids[None, :]
        qkv = model.attention_qkv(ids, np.ones_like(ids))
        for li in keep:
            q, k, v = (x[0] for x in qkv[li])
            out.append(
                AttentionTensors.from_float(
                    f"minilm:layer{li}:{p.topic}", q, k, v, rope=False, causal_model=False
                )
            )
    return out


def decoder_passages(model: Decoder, n: int = 4, tokens: int = 512) -> list[Passage]:
    """Pick ``n`` passages of ``tokens`` decoder tokens from the Python documentation topics.

    The same deterministic rule as :func:`pydoc_passages` (topics in name order, those long
    enough kept, ``n`` taken at the centres of ``n`` equal slices), with the decoder's own
    tokenizer (BOS as the model's file says).

    Args:
        model: a loaded decoder (:func:`coaccel.models.nn.load_decoder`).
        n: passages wanted (≥ 1).
        tokens: tokens per passage, ``2 ..`` the model's context length.

    Returns:
        ``n`` passages in topic-name order, each exactly ``tokens`` long.

    Raises:
        ValueError: ``n`` or ``tokens`` out of range, or fewer than ``n`` topics long enough.
    """
    from pydoc_data.topics import topics

    ctx = int(model.config.context_tokens)
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 2 <= int(tokens) <= ctx:
        raise ValueError(f"tokens must be in [2, {ctx}] for {model.name}, got {tokens}")
    eligible: list[Passage] = []
    for name in sorted(topics):
        text = prose(topics[name])
        # A topic needs at least about one character per token to possibly be long enough.
        if len(text) < tokens:
            continue
        ids = model.tokenize(text)
        if ids.shape[0] >= tokens:
            eligible.append(Passage(name, text, ids[:tokens].copy(), min(int(ids.shape[0]), ctx)))
    return _evenly_spaced(eligible, n, f"{tokens} {model.name} tokens")


def decoder_attention(
    model: Decoder,
    passages: Sequence[Passage],
    layers: Sequence[int] | None = None,
) -> list[AttentionTensors]:
    """A decoder's post-RoPE q, k and its v for each passage and layer, in float and INT8.

    One causal prefill per passage, recorded with
    :class:`coaccel.models.nn.AttentionRecorder`; the model's numerics apply (use
    ``model.with_numerics()`` for quantized weights or activations).

    Args:
        model: a loaded decoder.
        passages: from :func:`decoder_passages`.
        layers: decoder layers to keep (default all).

    Returns:
        One :class:`AttentionTensors` per (passage, layer), passage-major, with q
        ``[heads, T, head_dim]`` and k, v ``[kv_heads, T, head_dim]`` (``rope=True``,
        ``causal_model=True``); q is before the attention scale, which the attention references
        apply. The source label is ``"<model name>:layer<i>:<topic>"``.
    """
    from ._decoder_state import AttentionRecorder

    n_layers = int(model.config.num_layers)
    keep = list(range(n_layers)) if layers is None else [int(i) for i in layers]
    bad = [i for i in keep if not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"layers must be in [0, {n_layers}); got {bad}")
    out: list[AttentionTensors] = []
    for p in passages:
        rec = AttentionRecorder(fields=("q", "k", "v"), layers=keep)
        model.forward(p.ids, None, record=rec, last_only=True)
        for li in keep:
            q, k, v = (rec.get(li, f) for f in ("q", "k", "v"))
            out.append(
                AttentionTensors.from_float(
                    f"{model.name}:layer{li}:{p.topic}",
                    q,
                    k,
                    v,
                    rope=True,
                    causal_model=True,
                )
            )
    return out
