"""Seeded LLM-like attention inputs: post-RoPE queries and keys with a set temporal correlation.

The DeltaLLM reference ([DELTALLM]) thresholds the difference between consecutive post-RoPE
keys, so its sparsity depends on how slowly keys change along the sequence. This generator makes
that a parameter. For every head and channel ``c`` the pre-RoPE key is

    k_pre[t, c] = mu[c] + sigma[c] · x[t, c],   x[t] = a · x[t-1] + sqrt(1 - a²) · e[t]

with ``e`` i.i.d. standard normal and ``x[0] ~ N(0, 1)``: a stationary AR(1) process of unit
variance whose lag-1 autocorrelation is ``a`` (``key_ar``). ``a = 0`` gives independent tokens,
``a → 1`` keys that barely move. ``mu`` is a per-channel offset (``N(0, key_mean_std²)``) and
``sigma`` a per-channel scale that is 1 except for ``n_outlier_channels`` channels with a
log-uniform factor in [``outlier_scale_min``, ``outlier_scale_max``]: LLM keys carry a few
channels of much larger magnitude ([KIVI] §3). Queries follow the same law with their own
coefficient ``query_ar`` and their own draws, one process per query head, except that a
fraction ``query_group_share`` of the offset variance is common to the G query heads of a KV
group (so the heads of a group tend to prefer the same keys); values follow ``value_ar``, no
RoPE.

RoPE ([ROPE]) then rotates channel pairs ``(i, i + d/2)`` (the Hugging Face ``rotate_half``
layout) by the angle ``t · ω_i`` with ``ω_i = rope_theta^(-2i/d)``; for Llama 3.x the
``llama3`` frequency scaling of the model file applies ([HF-ROPE]). Dimensions (heads, KV
heads, head width, RoPE base and scaling) come from the shipped workload files
(``arch_configs/workloads/*.yaml``, loaded with :func:`coaccel.workload.load_workload`), so the
GQA group is the model's own (4 for BitNet-b1.58-2B-4T and Llama-3.2-1B).

All values are [OURS] except the model shapes: no public measurement of LLM key
autocorrelation was available, so ``key_ar`` is the knob the studies sweep.

Each tensor is also quantized the way the fixed-point reference expects
(:func:`coaccel.models.deltallm.quantize_int8`: symmetric INT8 per head, scale absmax/127, round
half up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coaccel.spine.workload import ModelShape, RopeScaling, load_workload

from ..deltallm import quantize_int8
from .synthetic import outlier_channels

__all__ = [
    "SYNTHETIC_MODELS",
    "AttentionTensors",
    "SyntheticAttention",
    "apply_rope",
    "ar1_process",
    "rope_frequencies",
    "synthetic_attention",
]

SYNTHETIC_MODELS = ("bitnet-b1.58-2b-4t", "llama-3.2-1b")
"""Shipped workload models whose dimensions the generator is documented for (any shipped
model name or :class:`~coaccel.workload.ModelShape` is accepted)."""


@dataclass(frozen=True, eq=False)
class AttentionTensors:
    """One layer's attention inputs in float and in the INT8 form of the fixed-point reference.

    Attributes:
        source: what produced them, e.g. ``"synthetic:llama-3.2-1b"`` or
            ``"minilm:layer3:passage0"``.
        q: float64 ``[Hq, T, d]`` queries (post-RoPE where :attr:`rope` is True).
        k: float64 ``[Hkv, T, d]`` keys (post-RoPE where :attr:`rope` is True).
        v: float64 ``[Hkv, T, d]`` values.
        q_int8: int8 ``[Hq, T, d]``, ``quantize_int8(q)``.
        k_int8: int8 ``[Hkv, T, d]``.
        v_int8: int8 ``[Hkv, T, d]``.
        q_scale: float64 ``[Hq]``, real ``q ≈ q_int8 · q_scale``.
        k_scale: float64 ``[Hkv]``.
        v_scale: float64 ``[Hkv]``.
        rope: whether RoPE was applied (False for MiniLM, which has absolute positions).
        causal_model: whether the producing model attends causally (False for MiniLM, a
            bidirectional encoder; the DeltaLLM datapath applies its causal mask regardless).
    """

    source: str
    q: npt.NDArray[np.float64]
    k: npt.NDArray[np.float64]
    v: npt.NDArray[np.float64]
    q_int8: npt.NDArray[np.int8]
    k_int8: npt.NDArray[np.int8]
    v_int8: npt.NDArray[np.int8]
    q_scale: npt.NDArray[np.float64]
    k_scale: npt.NDArray[np.float64]
    v_scale: npt.NDArray[np.float64]
    rope: bool
    causal_model: bool

    @property
    def tokens(self) -> int:
        """Sequence length T."""
        return int(self.q.shape[1])

    @property
    def group(self) -> int:
        """Query heads per KV head (the GQA group G)."""
        return int(self.q.shape[0] // self.k.shape[0])

    @classmethod
    def from_float(
        cls,
        source: str,
        q: npt.ArrayLike,
        k: npt.ArrayLike,
        v: npt.ArrayLike,
        *,
        rope: bool,
        causal_model: bool,
    ) -> AttentionTensors:
        """Quantize float tensors per head and bundle them.

        Args:
            source: label for reports.
            q: ``[Hq, T, d]`` float queries.
            k: ``[Hkv, T, d]`` float keys; ``Hq`` a multiple of ``Hkv``.
            v: ``[Hkv, T, d]`` float values.
            rope: whether the keys and queries are post-RoPE.
            causal_model: whether the producing model is causal.

        Returns:
            The bundle, with INT8 tensors from :func:`coaccel.models.deltallm.quantize_int8`.
        """
        qf, kf, vf = (np.ascontiguousarray(x, dtype=np.float64) for x in (q, k, v))
        if qf.ndim != 3 or kf.ndim != 3 or vf.shape != kf.shape:
            raise ValueError(
                f"expected q [Hq, T, d] and k, v [Hkv, T, d]; got {qf.shape}, {kf.shape}, "
                f"{vf.shape}"
            )
        if qf.shape[1:] != kf.shape[1:] or qf.shape[0] % kf.shape[0]:
            raise ValueError(
                f"q {qf.shape} and k {kf.shape} need the same T and d, and Hq a multiple of Hkv"
            )
        q8, qs = quantize_int8(qf)
        k8, ks = quantize_int8(kf)
        v8, vs = quantize_int8(vf)
        return cls(source, qf, kf, vf, q8, k8, v8, qs, ks, vs, rope, causal_model)


@dataclass(frozen=True, eq=False)
class SyntheticAttention:
    """What :func:`synthetic_attention` drew.

    Attributes:
        model: the workload model's name (``"custom"`` for a bare ModelShape).
        tensors: the attention inputs (post-RoPE unless drawn with ``rope=False``).
        q_pre: float64 ``[Hq, T, d]`` queries before RoPE.
        k_pre: float64 ``[Hkv, T, d]`` keys before RoPE.
        freqs: float64 ``[d/2]`` RoPE angular frequencies used (radians per token).
        key_ar: the key AR(1) coefficient.
    """

    model: str
    tensors: AttentionTensors
    q_pre: npt.NDArray[np.float64]
    k_pre: npt.NDArray[np.float64]
    freqs: npt.NDArray[np.float64]
    key_ar: float


def ar1_process(
    rng: np.random.Generator, shape: tuple[int, int, int], coefficient: float
) -> npt.NDArray[np.float64]:
    """Stationary unit-variance AR(1) series along axis 1.

    ``x[:, 0] ~ N(0, 1)`` and ``x[:, t] = a·x[:, t-1] + sqrt(1 - a²)·e[:, t]``, so every
    ``x[:, t]`` is standard normal and ``corr(x[:, t], x[:, t+s]) = a^s``.

    Args:
        rng: random generator (one ``standard_normal(shape)`` draw).
        shape: ``(heads, T, channels)``, all ≥ 1.
        coefficient: ``a`` in ``[0, 1)``.

    Returns:
        float64 array of ``shape``.
    """
    a = float(coefficient)
    if not 0.0 <= a < 1.0:
        raise ValueError(f"AR(1) coefficient must be in [0, 1), got {coefficient!r}")
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"shape must be (heads, T, channels), all >= 1; got {shape}")
    e = rng.standard_normal(shape)
    x = np.empty(shape, dtype=np.float64)
    x[:, 0] = e[:, 0]
    innov = math.sqrt(1.0 - a * a) * e
    # A first-order linear recurrence over T steps; each step is a vector op over heads×channels.
    for t in range(1, shape[1]):
        x[:, t] = a * x[:, t - 1] + innov[:, t]
    return x


def rope_frequencies(
    head_dim: int, rope_theta: float, scaling: RopeScaling | None = None
) -> npt.NDArray[np.float64]:
    """Rotary angular frequencies ``ω_i`` (radians per token) of the ``d/2`` channel pairs.

    ``ω_i = rope_theta^(-2i/d)`` ([ROPE]). With ``llama3`` scaling ([HF-ROPE]): wavelengths
    ``2π/ω`` shorter than ``original_max / high_freq_factor`` keep ``ω``; longer than
    ``original_max / low_freq_factor`` get ``ω / factor``; in between the two are blended
    linearly in ``original_max / wavelength``. Other scaling types are not modelled.

    Args:
        head_dim: ``d``, even.
        rope_theta: RoPE base (> 0).
        scaling: the model's ``rope_scaling`` or None.

    Returns:
        float64 ``[d/2]``, decreasing.
    """
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    inv = float(rope_theta) ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if scaling is None:
        return inv
    if scaling.type != "llama3":
        raise ValueError(f"RoPE scaling {scaling.type!r} is not modelled (only 'llama3')")
    assert scaling.original_max_position_embeddings is not None  # validated by RopeScaling
    assert scaling.low_freq_factor is not None and scaling.high_freq_factor is not None
    orig = float(scaling.original_max_position_embeddings)
    low, high = float(scaling.low_freq_factor), float(scaling.high_freq_factor)
    wavelen = 2.0 * math.pi / inv
    smooth = np.clip((orig / wavelen - low) / (high - low), 0.0, 1.0)
    scaled = (1.0 - smooth) * inv / float(scaling.factor) + smooth * inv
    return np.where(
        wavelen < orig / high, inv, np.where(wavelen > orig / low, inv / scaling.factor, scaled)
    )


def apply_rope(
    x: npt.ArrayLike, freqs: npt.ArrayLike, *, positions: npt.ArrayLike | None = None
) -> npt.NDArray[np.float64]:
    """Rotate channel pairs ``(i, i + d/2)`` by ``position · ω_i`` (``rotate_half`` layout).

    Args:
        x: float ``[H, T, d]``.
        freqs: ``[d/2]`` angular frequencies (:func:`rope_frequencies`); negate them to undo.
        positions: ``[T]`` token positions (default ``0..T-1``).

    Returns:
        float64 ``[H, T, d]``.
    """
    a = np.asarray(x, dtype=np.float64)
    w = np.asarray(freqs, dtype=np.float64)
    if a.ndim != 3 or a.shape[2] != 2 * w.shape[0]:
        raise ValueError(f"x must be [H, T, d] with d = 2·len(freqs); got {a.shape}, {w.shape}")
    pos = np.arange(a.shape[1]) if positions is None else np.asarray(positions)
    ang = pos.astype(np.float64)[:, None] * w[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    half = w.shape[0]
    lo, hi = a[..., :half], a[..., half:]
    return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin], axis=-1)


def _model_shape(model: str | ModelShape) -> tuple[str, ModelShape]:
    if isinstance(model, ModelShape):
        return "custom", model
    wl = load_workload(model)
    return wl.name, wl.model


def _channel_law(
    rng: np.random.Generator,
    heads: int,
    d: int,
    mean_std: float,
    n_outliers: int,
    scale_min: float,
    scale_max: float,
) -> tuple[np.ndarray, np.ndarray]:
    mu = rng.standard_normal((heads, 1, d)) * mean_std
    sigma = np.stack(
        [
            outlier_channels(rng, d, n_outliers, scale_min=scale_min, scale_max=scale_max)
            for _ in range(heads)
        ]
    )[:, None, :]
    return mu, sigma


def synthetic_attention(
    rng: np.random.Generator,
    model: str | ModelShape = "bitnet-b1.58-2b-4t",
    *,
    tokens: int = 256,
    kv_heads: int | None = None,
    key_ar: float = 0.9,
    query_ar: float = 0.5,
    value_ar: float = 0.5,
    key_mean_std: float = 1.0,
    query_mean_std: float = 2.0,
    query_group_share: float = 0.5,
    n_outlier_channels: int = 4,
    outlier_scale_min: float = 2.0,
    outlier_scale_max: float = 8.0,
    rope: bool = True,
) -> SyntheticAttention:
    """Draw one layer's q, k, v with a model's dimensions and a set key autocorrelation.

    Draws happen in a fixed order (keys, queries, values; each: offsets, outlier scales, AR
    series), so one seed gives one set of tensors.

    Args:
        rng: random generator (the only source of randomness).
        model: a shipped workload name (e.g. ``"bitnet-b1.58-2b-4t"``, ``"llama-3.2-1b"``) or a
            :class:`~coaccel.workload.ModelShape`; gives ``Hq``, ``Hkv``, ``d`` and RoPE.
        tokens: sequence length T (≥ 1).
        kv_heads: KV heads to draw (default all of the model's); queries get
            ``kv_heads · G`` heads so the GQA group stays the model's.
        key_ar: lag-1 autocorrelation ``a`` of the pre-RoPE key fluctuation, ``[0, 1)``.
        query_ar: the same for queries.
        value_ar: the same for values.
        key_mean_std: standard deviation of the per-channel key offsets ``mu`` (≥ 0).
        query_mean_std: the same for queries.
        query_group_share: fraction ``c`` in ``[0, 1]`` of the query offset variance shared
            by the G query heads of a KV group: ``mu_q[h] = sqrt(c)·z_group + sqrt(1-c)·z_h``.
            Shared offsets make the heads of a group prefer the same keys, which is what
            lets VSSOS skip whole columns.
        n_outlier_channels: channels per head whose scale ``sigma`` is an outlier factor.
        outlier_scale_min: smallest outlier factor (≥ 1).
        outlier_scale_max: largest outlier factor (log-uniform in between).
        rope: rotate q and k by RoPE (False: pre-RoPE tensors, for ablation).

    Returns:
        :class:`SyntheticAttention`; its ``tensors`` hold q ``[Hkv·G, T, d]`` and k, v
        ``[Hkv, T, d]``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    name, shape = _model_shape(model)
    hkv = shape.kv_heads if kv_heads is None else int(kv_heads)
    if not 1 <= hkv <= shape.kv_heads:
        raise ValueError(f"kv_heads must be in [1, {shape.kv_heads}], got {kv_heads}")
    if int(tokens) < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    for label, val in (("key_mean_std", key_mean_std), ("query_mean_std", query_mean_std)):
        if not val >= 0:
            raise ValueError(f"{label} must be >= 0, got {val}")
    if not 0.0 <= query_group_share <= 1.0:
        raise ValueError(f"query_group_share must be in [0, 1], got {query_group_share}")
    t_n, d, hq = int(tokens), shape.head_dim, hkv * shape.group
    out_args = (n_outlier_channels, outlier_scale_min, outlier_scale_max)

    mu_k, sig_k = _channel_law(rng, hkv, d, key_mean_std, *out_args)
    k_pre = mu_k + sig_k * ar1_process(rng, (hkv, t_n, d), key_ar)
    mu_q, sig_q = _channel_law(rng, hq, d, query_mean_std, *out_args)
    if query_group_share > 0:
        # Offsets shared by the G query heads of a KV group (drawn only when used, so that
        # query_group_share = 0 keeps the random stream of the independent-heads draw).
        shared = np.repeat(rng.standard_normal((hkv, 1, d)) * query_mean_std, shape.group, axis=0)
        c = float(query_group_share)
        mu_q = math.sqrt(c) * shared + math.sqrt(1.0 - c) * mu_q
    q_pre = mu_q + sig_q * ar1_process(rng, (hq, t_n, d), query_ar)
    v = ar1_process(rng, (hkv, t_n, d), value_ar)
    freqs = rope_frequencies(d, shape.rope_theta, shape.rope_scaling)
    q, k = (apply_rope(q_pre, freqs), apply_rope(k_pre, freqs)) if rope else (q_pre, k_pre)
    tensors = AttentionTensors.from_float(
        f"synthetic:{name}", q, k, v, rope=rope, causal_model=True
    )
    return SyntheticAttention(name, tensors, q_pre, k_pre, freqs, float(key_ar))
