"""Seeded synthetic queries and keys for the DeltaLLM FPGA simulator ([OURS], for real keys).

``ar1`` (:class:`~.config.KeySourceConfig`): per layer and head, every pre-RoPE dimension is a
first-order autoregressive sequence over the tokens, ``x_t = rho·x_{t-1} + sqrt(1 - rho²)·e_t``
(stationary, unit variance), plus a per-dimension offset (the persistent channel bias of real
keys). RoPE with the model's base (and its ``llama3`` frequency rescaling) rotates q and k; the
queries are scaled so that the logits ``q·k/sqrt(d)`` have the configured standard deviation;
q and k are quantized to INT8 per head with :func:`coaccel.models.deltallm.quantize_int8`.

The temporal correlation ``rho`` is the parameter that sets Delta-Key sparsity: neighbouring
keys differ by ``sqrt(2(1 - rho))`` standard deviations per dimension before RoPE.

Public: :func:`rope_frequencies`, :func:`apply_rope`, :func:`layer_qk`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from coaccel.models.deltallm import quantize_int8
from coaccel.workload import ModelShape

from .config import KeySourceConfig

__all__ = ["apply_rope", "layer_qk", "rope_frequencies"]


def rope_frequencies(model: ModelShape) -> npt.NDArray[np.float64]:
    """Rotary angular frequencies of a model, radians per token.

    Args:
        model: the shape (``head_dim``, ``rope_theta``, ``rope_scaling``).

    Returns:
        ``[head_dim / 2]`` float64 ``theta^(-2i/d)``, with the ``llama3`` band rescaling
        (wavelengths above ``original / low_freq_factor`` divided by ``factor``, below
        ``original / high_freq_factor`` kept, interpolated between) or ``linear`` scaling
        (all divided by ``factor``) where the model has it.
    """
    d = model.head_dim
    inv = model.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    sc = model.rope_scaling
    if sc is None:
        return inv
    if sc.type == "linear":
        return inv / sc.factor
    if sc.type != "llama3":
        return inv
    orig = float(sc.original_max_position_embeddings or 1)
    low, high = float(sc.low_freq_factor or 1), float(sc.high_freq_factor or 1)
    wavelen = 2 * math.pi / inv
    smooth = (orig / wavelen - low) / (high - low)
    mid = (1 - smooth) * inv / sc.factor + smooth * inv
    out = np.where(wavelen > orig / low, inv / sc.factor, inv)
    between = (wavelen <= orig / low) & (wavelen >= orig / high)
    return np.where(between, mid, out)


def apply_rope(x: npt.NDArray[np.float64], freq: npt.NDArray[np.float64]) -> np.ndarray:
    """Rotate ``[H, T, d]`` by position (the rotate-half pairing ``(i, i + d/2)``).

    Args:
        x: ``[H, T, d]`` float64, token ``t`` at position ``t``.
        freq: ``[d/2]`` angular frequencies (:func:`rope_frequencies`).

    Returns:
        ``[H, T, d]`` float64.
    """
    t = np.arange(x.shape[1], dtype=np.float64)[:, None] * freq[None, :]
    cos, sin = np.cos(t), np.sin(t)
    h = x.shape[2] // 2
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _ar1(rng: np.random.Generator, shape: tuple[int, int, int], rho: float) -> np.ndarray:
    e = rng.standard_normal(shape)
    x = np.empty(shape)
    x[:, 0] = e[:, 0]
    c = math.sqrt(1 - rho * rho)
    for t in range(1, shape[1]):
        x[:, t] = rho * x[:, t - 1] + c * e[:, t]
    return x


def layer_qk(
    model: ModelShape, n_tokens: int, layer: int, keys: KeySourceConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """INT8 post-RoPE queries and keys of one synthetic layer.

    Args:
        model: the shape (heads, KV heads, head_dim, RoPE).
        n_tokens: ``T``.
        layer: the layer index (seeds ``[keys.seed, layer]``).
        keys: the generator settings.

    Returns:
        ``(q, q_scale, k, k_scale)``: int8 ``[Hq, T, d]``, float64 ``[Hq]``, int8
        ``[Hkv, T, d]``, float64 ``[Hkv]`` (real value = int · scale).
    """
    rng = np.random.default_rng([keys.seed, layer])
    hq, hkv, d = model.heads, model.kv_heads, model.head_dim
    k = _ar1(rng, (hkv, n_tokens, d), keys.correlation)
    k += keys.offset_std * rng.standard_normal((hkv, 1, d))
    q = _ar1(rng, (hq, n_tokens, d), keys.correlation)
    q += keys.offset_std * rng.standard_normal((hq, 1, d))
    # logits q·k/sqrt(d) of unit-variance-per-dimension vectors (offset included) have a std of
    # about 1 + offset_std²; scale q to the configured logit std
    q *= keys.logit_std / (1.0 + keys.offset_std**2)
    freq = rope_frequencies(model)
    qi, sq = quantize_int8(apply_rope(q, freq))
    ki, sk = quantize_int8(apply_rope(k, freq))
    return qi, sq, ki, sk
