"""DeltaLLM attention inside a real decoder's forward pass: its accuracy cost as perplexity.

:class:`DeltaAttention` is a replacement attention for
:meth:`coaccel.models.nn.Decoder.with_attention`. Every layer's attention then runs the DeltaLLM
datapath of :mod:`coaccel.models.deltallm` ([DELTALLM]): Delta-Key scores outside the exact window,
VSSOS column skipping, in one of two modes:

* ``fixed`` (default): the bit-exact INT8 datapath. A prefill from position 0 quantizes q, k
  and v per head (absmax / 127 over the call's tokens,
  :func:`~coaccel.models.deltallm.quantize_int8`) and runs
  :func:`~coaccel.models.deltallm.attention_fixed_fast` (equal to the reference). The k and v
  scales of the prompt stay fixed for the decode steps that follow, as a KV cache's would
  (later keys and values saturate at ±127); each decode step quantizes its own query, encodes
  its key against the encoder memory (:func:`~coaccel.models.deltallm.encode_delta_row`) and runs
  :func:`~coaccel.models.deltallm.decode_row_fixed_fast` (``P_q = 1``, equal to
  :func:`~coaccel.models.deltallm.decode_step`).
* ``float``: the float64 algorithmic mode of the reference (``attention(mode="float")``,
  :func:`~coaccel.models.deltallm.decode_step`); θ is then in key units. With θ = 0, W ≥ T and
  τ = ∞ it is exact softmax attention.

The model's attention scale is honoured by scaling q by ``attention_scale·sqrt(d)`` before the
datapath, which applies ``1/sqrt(d)``. A layer whose sliding window would hide a key the call
attends falls back to the model's exact attention and is counted in
:attr:`DeltaAttention.fallback_layers`.

:func:`prefill_perplexity` and :func:`decode_perplexity` score a token sequence with such an
attention: in one prefill, or by prefilling a prompt and then decoding the rest one token at a
time (teacher forcing), the DeltaLLM v1 "prefill + decode" setting.

Public: :class:`DeltaSetting`, :class:`DeltaAttention`, :class:`DecodeScore`,
:func:`prefill_perplexity`, :func:`decode_perplexity`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.models import deltallm as dl

__all__ = [
    "DecodeScore",
    "DeltaAttention",
    "DeltaSetting",
    "decode_perplexity",
    "prefill_perplexity",
]

MODES = ("fixed", "float")


@dataclass(frozen=True)
class DeltaSetting:
    """The open choices of the DeltaLLM datapath ([OURS] defaults; the paper gives none).

    Attributes:
        theta: Delta-Key threshold (key LSBs in fixed mode, key units in float mode).
        window: exact window W, tokens (diagonal included).
        tau: VSSOS skip threshold, log2 units (``math.inf``: never skip).
        lane_layout: ``group`` (G query heads × P_q tokens per vector) or ``head``.
        query_block: ``P_q``, query tokens per vector in prefill (decode uses 1).
        n_sink: leading keys kept dense and scored exactly.
    """

    theta: float = 4
    window: int = 16
    tau: float = 8.0
    lane_layout: str = "group"
    query_block: int = 4
    n_sink: int = 1

    @property
    def label(self) -> str:
        """Short text, e.g. ``θ=4 W=16 τ=8 group×4``."""
        tau = "∞" if math.isinf(self.tau) else f"{self.tau:g}"
        return (f"θ={self.theta:g} W={self.window} τ={tau} "
                f"{self.lane_layout}×{self.query_block}")  # fmt: skip

    @classmethod
    def dense(cls, window: int = 8192) -> DeltaSetting:
        """θ = 0, τ = ∞ and a window of ``window`` tokens (at least the sequence): the datapath
        without its approximations."""
        return cls(theta=0, window=window, tau=math.inf)


@dataclass
class _LayerCache:
    """The fixed-point decode cache of one layer (grows by doubling)."""

    k_scale: np.ndarray
    v_scale: np.ndarray
    keys: np.ndarray  # [Hkv, cap, d] int8
    keys_hat: np.ndarray  # [Hkv, cap, d] int32
    values: np.ndarray  # [Hkv, cap, dv] int8
    memory: np.ndarray  # [Hkv, d] int32
    prev_key: np.ndarray  # [Hkv, d] int32
    n: int

    def append(self, k8: np.ndarray, kh: np.ndarray, v8: np.ndarray) -> None:
        if self.n == self.keys.shape[1]:
            for name in ("keys", "keys_hat", "values"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate([a, np.zeros_like(a)], axis=1))
        self.keys[:, self.n], self.keys_hat[:, self.n], self.values[:, self.n] = k8, kh, v8
        self.n += 1


def _quantize_with(x: np.ndarray, scale: np.ndarray) -> npt.NDArray[np.int8]:
    """``[H, ...]`` -> int8 with fixed per-head scales: ``clamp(floor(x / s + 0.5), ±127)``."""
    s = scale.reshape(-1, *([1] * (x.ndim - 1)))
    return np.clip(np.floor(x / s + 0.5), -127, 127).astype(np.int8)


@dataclass
class DeltaAttention:
    """A replacement attention (``Decoder.with_attention``) running the DeltaLLM datapath.

    Call :meth:`reset` before each new sequence (prefill from position 0 does it as well).

    Attributes:
        setting: the datapath choices.
        attention_scale: the model's factor on q·k (``config.attention_scale``).
        mode: ``fixed`` or ``float`` (module docstring).
        fallback_layers: layers that used exact attention (a sliding window hid keys).
        counts: summed counts over every call: ``valid``, ``fine``, ``skipped`` elements.
    """

    setting: DeltaSetting
    attention_scale: float
    mode: str = "fixed"
    fallback_layers: set[int] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: {"valid": 0, "fine": 0, "skipped": 0})
    _fixed: dict[int, _LayerCache] = field(default_factory=dict, repr=False)
    _float: dict[int, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode: unknown value {self.mode!r}; valid: {', '.join(MODES)}")
        if self.mode == "fixed" and int(self.setting.theta) != self.setting.theta:
            raise ValueError(f"theta must be a whole number of key LSBs, got {self.setting.theta}")

    @classmethod
    def for_model(cls, model: Any, setting: DeltaSetting, mode: str = "fixed") -> DeltaAttention:
        """The attention for a loaded decoder (its attention scale; no logit soft-cap; the window
        capped at the context length).

        Raises:
            ValueError: the model soft-caps its attention logits (not in the datapath).
        """
        if getattr(model.config, "attn_logit_softcap", None):
            raise ValueError(f"{model.name}: attention-logit soft-capping is not modelled")
        ctx = int(model.config.context_tokens)  # a window past the context changes nothing
        st = dataclasses.replace(setting, window=min(setting.window, ctx))
        return cls(st, float(model.config.attention_scale), mode)

    def reset(self) -> None:
        """Forget the decode caches (a new sequence starts)."""
        self._fixed.clear()
        self._float.clear()

    def __call__(
        self,
        layer: int,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        q_pos: np.ndarray,
        k_pos: np.ndarray,
        window: int | None,
    ) -> np.ndarray | None:
        """One layer's attention output ``[H, T, d]`` (float64), or None for exact attention."""
        if window is not None and int(q_pos.max()) - int(k_pos.min()) >= window:
            self.fallback_layers.add(layer)
            return None
        qs = np.asarray(q, dtype=np.float64) * (self.attention_scale * math.sqrt(q.shape[2]))
        if int(q_pos[0]) == 0:
            if self.mode == "fixed":
                return self._prefill_fixed(layer, qs, k, v)
            return self._prefill_float(layer, qs, k, v)
        cache = self._fixed.get(layer) if self.mode == "fixed" else self._float.get(layer)
        have = cache.n if isinstance(cache, _LayerCache) else getattr(cache, "n_tokens", -1)
        if q.shape[1] != 1 or have != int(q_pos[0]) or k.shape[1] != have + 1:
            raise ValueError(
                "DeltaAttention runs a prefill from position 0 followed by one-token decode "
                f"steps; layer {layer} got {q.shape[1]} queries at position {int(q_pos[0])} "
                f"with {have} tokens cached"
            )
        if self.mode == "fixed":
            return self._decode_fixed(layer, qs, k, v)
        return self._decode_float(layer, qs, k, v)

    # ------------------------------------------------------------------------- fixed point
    def _prefill_fixed(
        self, layer: int, qs: np.ndarray, k: np.ndarray, v: np.ndarray
    ) -> np.ndarray:
        st = self.setting
        q8, sq = dl.quantize_int8(qs)
        k8, sk = dl.quantize_int8(k)
        v8, sv = dl.quantize_int8(v)
        r = dl.attention_fixed_fast(
            q8, k8, v8, theta=int(st.theta), window=st.window, tau=st.tau, q_scale=sq,
            k_scale=sk, query_block=st.query_block, lane_layout=st.lane_layout,
            n_sink=st.n_sink,
        )  # fmt: skip
        self._count(r.valid_elements, r.fine_elements, r.skipped_elements)
        dk = dl.encode_delta_keys(k8, theta=int(st.theta), n_sink=st.n_sink)
        self._fixed[layer] = _LayerCache(
            sk, sv, k8.copy(), dk.keys_hat.copy(), v8.copy(), dk.memory.copy(),
            dk.prev_key.copy(), int(k8.shape[1]),
        )  # fmt: skip
        g = q8.shape[0] // k8.shape[0]
        return r.output * 2.0**-8 * np.repeat(sv, g)[:, None, None]

    def _decode_fixed(self, layer: int, qs: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        st, c = self.setting, self._fixed[layer]
        k8 = _quantize_with(np.asarray(k[:, -1], dtype=np.float64), c.k_scale)
        v8 = _quantize_with(np.asarray(v[:, -1], dtype=np.float64), c.v_scale)
        _, _, memory = dl.encode_delta_row(
            k8, c.memory, c.prev_key, t=c.n, theta=int(st.theta), n_sink=st.n_sink
        )
        c.memory, c.prev_key = memory, k8.astype(np.int32)
        c.append(k8, memory, v8)
        q8, sq = dl.quantize_int8(qs)
        n = c.n
        y, cnt = dl.decode_row_fixed_fast(
            q8[:, 0], c.keys[:, :n], c.keys_hat[:, :n], c.values[:, :n], window=st.window,
            tau=st.tau, q_scale=sq, k_scale=c.k_scale, n_sink=st.n_sink,
            lane_layout=st.lane_layout,
        )  # fmt: skip
        self._count(n * q8.shape[0], int(cnt[0]), int(cnt[1]))
        g = q8.shape[0] // c.keys.shape[0]
        return (y * 2.0**-8 * np.repeat(c.v_scale, g)[:, None])[:, None, :]

    # ------------------------------------------------------------------------------- float
    def _prefill_float(
        self, layer: int, qs: np.ndarray, k: np.ndarray, v: np.ndarray
    ) -> np.ndarray:
        st = self.setting
        k64, v64 = (np.asarray(x, dtype=np.float64) for x in (k, v))
        r = dl.attention(
            qs, k64, v64, theta=float(st.theta), window=st.window, tau=st.tau, mode="float",
            query_block=st.query_block, lane_layout=st.lane_layout, n_sink=st.n_sink,
        )  # fmt: skip
        s = r.stats
        self._count(s.valid_elements, s.fine_elements, s.skipped_elements)
        state = dl.init_decode(
            qs.shape[0], k64.shape[0], k64.shape[2], v64.shape[2], theta=float(st.theta),
            window=st.window, tau=st.tau, mode="float", n_sink=st.n_sink,
            lane_layout=st.lane_layout,
        )  # fmt: skip
        self._float[layer] = dl.append_prompt(state, k64, v64)
        return r.output

    def _decode_float(self, layer: int, qs: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        k64, v64 = (np.asarray(x[:, -1], dtype=np.float64) for x in (k, v))
        y, self._float[layer] = dl.decode_step(self._float[layer], qs[:, 0], k64, v64)
        return y[:, None, :]

    def _count(self, valid: int, fine: int, skipped: int) -> None:
        self.counts["valid"] += int(valid)
        self.counts["fine"] += int(fine)
        self.counts["skipped"] += int(skipped)


@dataclass(frozen=True)
class DecodeScore:
    """Teacher-forced next-token scores of the decoded part of a sequence.

    Attributes:
        perplexity: ``exp(mean NLL)`` over the decoded positions.
        mean_nll: mean negative log-likelihood, nats per token.
        top1: fraction of positions whose arg-max logit is the next token.
        tokens: positions scored (``len(ids) - prompt_tokens``).
    """

    perplexity: float
    mean_nll: float
    top1: float
    tokens: int


def prefill_perplexity(model: Any, ids: npt.ArrayLike, attn: DeltaAttention | None) -> Any:
    """Perplexity of a token sequence in one prefill, with DeltaLLM attention or exact (None).

    Args:
        model: a loaded :class:`coaccel.models.nn.Decoder`.
        ids: int ``(T,)`` token ids.
        attn: the replacement attention (reset here), or None.

    Returns:
        The model's :class:`~coaccel.models.nn.PerplexityResult` (``T - 1`` positions).
    """
    if attn is None:
        return model.perplexity(np.asarray(ids))
    attn.reset()
    return model.with_attention(attn).perplexity(np.asarray(ids))


def decode_perplexity(
    model: Any, ids: npt.ArrayLike, prompt_tokens: int, attn: DeltaAttention | None
) -> DecodeScore:
    """Score ``ids[prompt_tokens:]`` by decoding them one token at a time after a prefill.

    The prompt ``ids[:prompt_tokens]`` is prefilled into a KV cache (with the same attention);
    each later token is fed by :meth:`~coaccel.models.nn.Decoder.decode_step` and the logits
    before it score it (teacher forcing).

    Args:
        model: a loaded decoder.
        ids: int ``(T,)`` token ids.
        prompt_tokens: tokens prefilled, ``1 <= prompt_tokens < T``.
        attn: the replacement attention (reset here), or None for exact attention.

    Returns:
        The :class:`DecodeScore` over ``T - prompt_tokens`` positions.
    """
    arr = np.asarray(ids, dtype=np.int64)
    if not 1 <= prompt_tokens < arr.size:
        raise ValueError(f"prompt_tokens must be in [1, {arr.size - 1}], got {prompt_tokens}")
    m = model
    if attn is not None:
        attn.reset()
        m = model.with_attention(attn)
    cache = m.new_cache(int(arr.size))
    logits = m.forward(arr[:prompt_tokens], cache, last_only=True)
    nll, hits = 0.0, 0
    for t in range(prompt_tokens, arr.size):
        lg = np.asarray(logits, dtype=np.float64)
        mx = lg.max()
        nll += float(mx + math.log(np.exp(lg - mx).sum()) - lg[arr[t]])
        hits += int(lg.argmax() == arr[t])
        if t + 1 < arr.size:
            logits = m.decode_step(int(arr[t]), cache)
    n = int(arr.size - prompt_tokens)
    return DecodeScore(math.exp(nll / n), nll / n, hits / n, n)
