"""Real decode activations for the GPU validation: a small decoder's queries and keys.

:func:`collect_real_decode` loads a decoder shipped in a PyPI package (default SmolLM2-135M,
[SMOLLM2]; :func:`coaccel.models.nn.load_decoder`), cuts ``passages`` windows of
``max(contexts) + steps`` tokens out of the Python documentation prose ([PYDOC],
:func:`coaccel.models.nn.pydoc_text`; where: below), and prefills
each window into a KV cache in chunks. During the prefill a replacement attention
(:class:`_PrefillTap`, exact softmax attention, the model's own computation) keeps

* the post-RoPE query of every **decode position**: for each context ``C`` and step
  ``j < steps`` the query of the token at position ``C - 1 + j``, which attends the keys
  ``0 .. C - 1 + j`` (``C + j`` keys). With the text's own next tokens fed in (teacher forcing),
  a prefill computes exactly the queries a decode step would (the model is causal), so one
  prefill per window gives every context's decode queries;
* for the contexts of ``received_contexts``, the mean attention each key received from the
  queries before the first decode position (a query-agnostic importance per token, H2O-style,
  frozen at that point): the stand-in for NOSA's trained eviction score.

The windows are centred on ``passages`` equal slices of the first
``max(TEXT_MIN_CHARS, CHARS_PER_TOKEN x window x passages)`` characters of the prose (the whole
prose when those hold too few tokens), so they do not overlap.

The prefilled cache holds every key and value; :func:`decode_nll` runs real decode steps from it
(with the model's attention or a replacement such as
:class:`coaccel.models.gpu.FfdAttention`) and returns the next-token negative
log-likelihoods. Without the model packages :func:`collect_real_decode` raises
:class:`~coaccel.spine.errors.MissingDependencyError` whose message gives the install command.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_CONTEXTS",
    "DEFAULT_MODEL",
    "DEFAULT_PASSAGES",
    "DEFAULT_STEPS",
    "RealDecodeSample",
    "RealPassage",
    "collect_real_decode",
    "decode_nll",
    "spread",
]

DEFAULT_MODEL = "smollm2-135m"
"""The decoder of the real-input rows (SmolLM2-135M: 30 layers, 9 / 3 heads of 64, 8K context)."""
DEFAULT_CONTEXTS = (512, 1024, 2048, 4096)
"""Contexts of the real-input rows, tokens ([OURS]: a 4K prefill of SmolLM2-135M takes about
30 s on one core; 8K, the model's limit, about four times that)."""
DEFAULT_PASSAGES = 2
"""Text windows (one prefill each) of the real-input rows ([OURS], for the run time)."""
DEFAULT_STEPS = 16
"""Decode steps per context and window ([OURS])."""
TEXT_MIN_CHARS = 20000
"""Characters of prose tokenized at least (module docstring)."""
CHARS_PER_TOKEN = 6
"""Characters of prose taken per needed token (English prose runs about 4-5 per token; the
whole text, 229K characters in Python 3.11, when that is too little)."""
PREFILL_CHUNK = 512
"""Tokens per prefill call (bounds the score matrix: heads x chunk x context)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RealPassage:
    """One prefilled text window.

    Attributes:
        label: where the window sits in the text (``pydoc tokens a..b``).
        ids: ``[T]`` int64 token ids, ``T = max(contexts) + steps``.
        cache: the model's KV cache after the prefill of all ``T`` tokens.
        queries: ``[n_contexts, steps, layers, Hq, D]`` float32 post-RoPE decode queries
            (before the attention scale); ``[c, j]`` is the query of position
            ``contexts[c] - 1 + j``.
        received: context ``C`` -> ``[layers, Hkv, C]`` float64 mean attention each key
            received (summed over the group's heads) from the queries at positions
            ``< C - 1``; 0 for keys no such query saw.
    """

    label: str
    ids: npt.NDArray[np.int64]
    cache: Any
    queries: npt.NDArray[np.float32]
    received: dict[int, npt.NDArray[np.float64]]


@dataclass(frozen=True)
class RealDecodeSample:
    """Decode activations of a real decoder (:func:`collect_real_decode`).

    Attributes:
        model: the :class:`coaccel.models.nn.Decoder`.
        contexts: decode contexts, tokens (ascending).
        steps: decode steps per context and window.
        passages: the windows.
        seconds: wall time of loading and prefilling, s.
    """

    model: Any
    contexts: tuple[int, ...]
    steps: int
    passages: tuple[RealPassage, ...]
    seconds: float

    @property
    def layers(self) -> int:
        """Decoder layers."""
        return int(self.model.config.num_layers)

    def keys(self, p: int, layer: int) -> npt.NDArray[np.float32]:
        """``[Hkv, T, D]`` post-RoPE keys of window ``p``, layer ``layer`` (a view)."""
        return self.passages[p].cache.keys(layer)

    def values(self, p: int, layer: int) -> npt.NDArray[np.float32]:
        """``[Hkv, T, D]`` values of window ``p``, layer ``layer`` (a view)."""
        return self.passages[p].cache.values(layer)

    def global_layers(self) -> list[int]:
        """Layers with global attention (all of SmolLM2's; Gemma 3's non-sliding ones)."""
        cfg = self.model.config
        return [i for i in range(self.layers) if not cfg.sliding_layers[i]]


def spread(x: npt.ArrayLike) -> tuple[float, float, int]:
    """(mean, sample standard deviation, N) of the finite values of ``x``."""
    a = np.asarray(x, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        return math.nan, math.nan, 0
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0, int(a.size)


def collect_real_decode(
    model: str = DEFAULT_MODEL,
    *,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
    passages: int = DEFAULT_PASSAGES,
    steps: int = DEFAULT_STEPS,
    received_contexts: Sequence[int] = (),
    progress: Progress | None = None,
) -> RealDecodeSample:
    """Prefill ``passages`` windows of real text and keep their decode queries (module docstring).

    Args:
        model: a :data:`coaccel.models.nn.MODELS` name.
        contexts: decode contexts, tokens (each >= 1; the largest plus ``steps`` at most the
            model's context length).
        passages: windows (>= 1). steps: decode steps per context (>= 1).
        received_contexts: contexts (of ``contexts``) whose attention-received scores to keep.
        progress: called with one line per prefilled window.

    Returns:
        :class:`RealDecodeSample`.

    Raises:
        MissingDependencyError: the model package (or ``gguf``) is not installed.
        ValueError: sizes out of range, or the text too short for the windows.
    """
    from coaccel.models.nn import load_decoder, pydoc_text

    t0 = time.perf_counter()
    say = progress or (lambda _m: None)
    ctx = tuple(sorted({int(c) for c in contexts}))
    recv = tuple(sorted({int(c) for c in received_contexts}))
    if not ctx or ctx[0] < 1 or passages < 1 or steps < 1 or not set(recv) <= set(ctx):
        raise ValueError("contexts, passages and steps must be positive; received in contexts")
    m = load_decoder(model)
    total = ctx[-1] + steps
    if total > m.config.context_tokens:
        raise ValueError(
            f"{ctx[-1]} tokens + {steps} steps exceed {m.name}'s {m.config.context_tokens}"
        )
    bos = m.tokenize("a")[:1]
    lead = 1 if bos.size and int(bos[0]) == m.config.bos_id else 0
    need = total - lead
    text_ids = m.tokenize(pydoc_text(max(TEXT_MIN_CHARS, CHARS_PER_TOKEN * need * passages)),
                          add_bos=False)  # fmt: skip
    if text_ids.size < need * passages:
        text_ids = m.tokenize(pydoc_text(10**7), add_bos=False)
    if text_ids.size < need:
        raise ValueError(f"the text holds {text_ids.size} tokens; one window needs {need}")
    out = []
    for i in range(passages):
        start = max(0, min(text_ids.size - need, (2 * i + 1) * text_ids.size // (2 * passages)
                                                 - need // 2))  # fmt: skip
        ids = np.concatenate([bos[:lead], text_ids[start : start + need]]).astype(np.int64)
        say(f"prefill {i + 1}/{passages}: {total} tokens of {m.name}")
        out.append(_prefill(m, ids, ctx, steps, recv, f"pydoc tokens {start}..{start + need}"))
    return RealDecodeSample(m, ctx, int(steps), tuple(out), time.perf_counter() - t0)


def _prefill(
    m: Any, ids: npt.NDArray[np.int64], ctx: tuple[int, ...], steps: int, recv: tuple[int, ...],
    label: str,
) -> RealPassage:  # fmt: skip
    """Prefill one window with :class:`_PrefillTap` and package what it kept."""
    cfg = m.config
    want = np.array([c - 1 + j for c in ctx for j in range(steps)], dtype=np.int64)
    tap = _PrefillTap(cfg, want, recv)
    mt = m.with_attention(tap)
    cache = m.new_cache(ids.size)
    for a in range(0, ids.size, PREFILL_CHUNK):
        mt.forward(ids[a : a + PREFILL_CHUNK], cache, last_only=True)
    q = tap.queries[tap.slot_of(want)].reshape(len(ctx), steps, *tap.queries.shape[1:])
    return RealPassage(label, ids, cache, q, tap.received())


class _PrefillTap:
    """Exact attention for ``Decoder.with_attention`` that also keeps the queries of chosen
    positions and, per context ``C`` of ``recv``, the attention each key receives from the
    queries at positions ``< C - 1`` (summed over the group's heads)."""

    def __init__(self, cfg: Any, want: npt.NDArray[np.int64], recv: tuple[int, ...]) -> None:
        self.cfg = cfg
        self.want = np.unique(want)
        self.queries = np.zeros(
            (self.want.size, cfg.num_layers, cfg.num_heads, cfg.head_dim), dtype=np.float32
        )
        self._recv = {c: np.zeros((cfg.num_layers, cfg.num_kv_heads, c)) for c in recv}

    def slot_of(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of :attr:`queries` holding each position."""
        return np.searchsorted(self.want, pos)

    def received(self) -> dict[int, npt.NDArray[np.float64]]:
        """Context -> ``[layers, Hkv, C]`` mean attention received (class docstring)."""
        g = self.cfg.num_heads // self.cfg.num_kv_heads
        out = {}
        for c, acc in self._recv.items():
            seen = np.maximum(0, c - 1 - np.arange(c)) * g  # queries j .. C - 2, G heads each
            out[c] = np.where(seen > 0, acc / np.maximum(seen, 1), 0.0)
        return out

    def __call__(
        self, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, q_pos: np.ndarray,
        k_pos: np.ndarray, window: int | None,
    ) -> np.ndarray:  # fmt: skip
        """Exact attention ``[Hq, T, D]``; keeps what the class docstring says."""
        cfg = self.cfg
        hq, t, d = q.shape
        hkv, s, _ = k.shape
        g = hq // hkv
        sc = (q.reshape(hkv, g * t, d) @ k.transpose(0, 2, 1)).reshape(hkv, g, t, s)
        sc = sc * sc.dtype.type(cfg.attention_scale)
        if cfg.attn_logit_softcap:
            c = sc.dtype.type(cfg.attn_logit_softcap)
            sc = c * np.tanh(sc / c)
        allowed = k_pos[None, :] <= q_pos[:, None]
        if window is not None:
            allowed &= (q_pos[:, None] - k_pos[None, :]) < window
        sc = np.where(allowed, sc, sc.dtype.type(-np.inf))
        sc -= sc.max(axis=-1, keepdims=True)
        p = np.exp(sc)
        p /= p.sum(axis=-1, keepdims=True)
        ctx = (p.reshape(hkv, g * t, s) @ v).reshape(hq, t, d)
        i = np.searchsorted(self.want, q_pos)
        hit = (i < self.want.size) & (self.want[np.minimum(i, self.want.size - 1)] == q_pos)
        self.queries[i[hit], layer] = q[:, hit].transpose(1, 0, 2)
        if self._recv:
            col = p.sum(axis=1)  # [Hkv, T, S]
            for c, acc in self._recv.items():
                n = int((q_pos < c - 1).sum())  # positions ascend: a prefix of the rows
                w = min(s, c)
                if n:
                    acc[layer, :, :w] += col[:, :n, :w].sum(axis=1)
        return ctx


def decode_nll(
    sample: RealDecodeSample,
    p: int,
    context: int,
    steps: int,
    attention: Callable[..., Any] | None = None,
) -> npt.NDArray[np.float64]:
    """Negative log-likelihood of the next token over ``steps`` real decode steps.

    Step ``j`` feeds the window's token at position ``context - 1 + j`` to
    ``Decoder.decode_step`` on a copy of the prefilled cache cut to ``context - 1`` tokens (so
    the step attends ``context + j`` keys) and scores the window's next token.

    Args:
        sample: the prefilled windows. p: the window. context: keys at step 0.
        steps: decode steps (``context - 1 + steps`` at most the window's length - 1).
        attention: a replacement attention (``Decoder.with_attention``), None: exact.

    Returns:
        ``[steps]`` float64 nats.
    """
    ps = sample.passages[p]
    if context < 1 or context - 1 + steps >= ps.ids.size:
        raise ValueError(f"decode_nll: context {context} + {steps} steps pass the window")
    m = sample.model if attention is None else sample.model.with_attention(attention)
    cache = copy.deepcopy(ps.cache)
    cache.length = context - 1
    nll = np.empty(steps)
    for j in range(steps):
        pos = context - 1 + j
        lg = np.asarray(m.decode_step(int(ps.ids[pos]), cache), dtype=np.float64)
        mx = lg.max()
        nll[j] = mx + math.log(float(np.exp(lg - mx).sum())) - lg[int(ps.ids[pos + 1])]
    return nll
