"""Seeded synthetic queries and keys of one layer for the DeltaLLM FPGA simulator.

The draws come from :func:`coaccel.models.nn.synthetic_attention` (post-RoPE AR(1) queries and
keys with per-channel offsets and outlier channels, the model's own GQA group and RoPE), one
generator per layer seeded with ``[keys.seed, layer]``, INT8-quantized per head. These are
[OURS] stand-ins for real activations: their key autocorrelation ``key_ar`` sets the Delta-Key
sparsity and ``query_group_share`` the structured score sparsity.

Public: :func:`layer_qk`.
"""

from __future__ import annotations

import numpy as np

from coaccel.models.nn import synthetic_attention
from coaccel.spine.workload import ModelShape

from .config import KeySourceConfig

__all__ = ["layer_qk"]


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
    t = synthetic_attention(
        rng,
        model,
        tokens=n_tokens,
        key_ar=keys.key_ar,
        query_ar=keys.query_ar,
        key_mean_std=keys.key_mean_std,
        query_mean_std=keys.query_mean_std,
        query_group_share=keys.query_group_share,
        n_outlier_channels=keys.n_outlier_channels,
    ).tensors
    return t.q_int8, t.q_scale, t.k_int8, t.k_scale
