"""What a decoder's forward pass keeps: recorded attention tensors and the KV cache (see
:mod:`coaccel.models.nn.decoder`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from ._decoder_config import DecoderConfig

# ---------------------------------------------------------------------------------- recorder
RECORD_FIELDS = ("hidden", "attn_in", "q_pre", "k_pre", "q", "k", "v", "probs")
"""What :class:`AttentionRecorder` can keep per layer, with shapes for a call of T new tokens
after ``P`` cached ones (S = P + T keys):

* ``hidden``: ``(T, d)`` residual stream entering the layer;
* ``attn_in``: ``(T, d)`` its RMSNorm, the input of the q/k/v projections;
* ``q_pre``, ``k_pre``: ``(heads, T, head_dim)`` / ``(kv_heads, T, head_dim)`` projections (after
  QK-norm where the model has it), before RoPE;
* ``q``, ``k``: the same after RoPE (q not yet multiplied by the attention scale);
* ``v``: ``(kv_heads, T, head_dim)``;
* ``probs``: ``(heads, T, S)`` attention probabilities (exact zeros at masked keys).

q, k and v are in the Hugging Face layout (rotary pairs ``(i, i + head_dim/2)``) and are the
values before any KV number format is applied."""


AttentionFn = Callable[
    [int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, "int | None"],
    "np.ndarray | None",
]
"""A replacement attention for :meth:`Decoder.with_attention`."""


class AttentionRecorder:
    """Keeps per-layer attention tensors of forward passes (pass it as ``record=``).

    Recording copies only what is asked for; a forward pass without a recorder does no
    recording work at all.

    Args:
        fields: which of :data:`RECORD_FIELDS` to keep (default all).
        layers: which layers (default all).

    Example:
        >>> rec = AttentionRecorder(fields=("q", "k"), layers=[0])  # doctest: +SKIP
        >>> model.logits(ids, record=rec)  # doctest: +SKIP
        >>> rec.get(0, "k").shape  # (kv_heads, T, head_dim)  # doctest: +SKIP
    """

    def __init__(
        self, fields: Iterable[str] = RECORD_FIELDS, layers: Iterable[int] | None = None
    ) -> None:
        self.fields = tuple(fields)
        bad = [f for f in self.fields if f not in RECORD_FIELDS]
        if bad:
            raise ValueError(f"unknown fields {bad}; valid: {', '.join(RECORD_FIELDS)}")
        self.layers = None if layers is None else frozenset(int(i) for i in layers)
        self._data: dict[tuple[int, str], list[np.ndarray]] = {}
        self.positions: list[npt.NDArray[np.int64]] = []
        """Query positions of each recorded call, int64 ``(T,)``."""

    def wants(self, layer: int) -> bool:
        """Whether ``layer`` is recorded."""
        return self.layers is None or layer in self.layers

    def _put(self, layer: int, name: str, value: np.ndarray) -> None:
        if name in self.fields:
            self._data.setdefault((layer, name), []).append(np.array(value, copy=True))

    def chunks(self, layer: int, name: str) -> list[np.ndarray]:
        """The arrays of each recorded call, in call order (see :data:`RECORD_FIELDS`)."""
        return list(self._data.get((layer, name), []))

    def get(self, layer: int, name: str) -> np.ndarray:
        """All recorded calls joined along the token axis.

        Args:
            layer: layer index.
            name: one of the recorder's fields.

        Returns:
            ``hidden``/``attn_in``: ``(T_total, d)``; per-head fields:
            ``(heads, T_total, head_dim)``; ``probs``: ``(heads, T_total, S_max)``, rows of
            earlier calls zero-padded on the right.
        """
        parts = self._data.get((layer, name))
        if not parts:
            raise KeyError(f"nothing recorded for layer {layer}, field {name!r}")
        if name in ("hidden", "attn_in"):
            return np.concatenate(parts, axis=0)
        if name != "probs":
            return np.concatenate(parts, axis=1)
        width = max(p.shape[-1] for p in parts)
        padded = [np.pad(p, ((0, 0), (0, 0), (0, width - p.shape[-1]))) for p in parts]
        return np.concatenate(padded, axis=1)

    def clear(self) -> None:
        """Forget everything recorded."""
        self._data.clear()
        self.positions.clear()


# ---------------------------------------------------------------------------------- KV cache
class KVCache:
    """Keys (after RoPE) and values of the tokens processed so far, per layer.

    Storage grows by doubling up to ``capacity_tokens``. Keys and values are stored after the
    model's KV number format, if any.

    Attributes:
        length: tokens held (the position of the next token).
        capacity_tokens: the most tokens it may hold.
    """

    def __init__(
        self, config: DecoderConfig, dtype: npt.DTypeLike, capacity_tokens: int | None = None
    ) -> None:
        cap = config.context_tokens if capacity_tokens is None else int(capacity_tokens)
        if not 1 <= cap <= config.context_tokens:
            raise ValueError(
                f"capacity_tokens must be in [1, {config.context_tokens}], got {capacity_tokens}"
            )
        self.capacity_tokens = cap
        self.length = 0
        self._shape = (config.num_kv_heads, config.head_dim)
        self._dtype = np.dtype(dtype)
        self._k: list[np.ndarray] = [self._alloc(0) for _ in range(config.num_layers)]
        self._v: list[np.ndarray] = [self._alloc(0) for _ in range(config.num_layers)]

    def _alloc(self, n: int) -> np.ndarray:
        return np.zeros((self._shape[0], n, self._shape[1]), dtype=self._dtype)

    def _store(
        self, layer: int, start: int, k: np.ndarray, v: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        end = start + k.shape[1]
        if end > self._k[layer].shape[1]:
            size = min(self.capacity_tokens, max(end, 2 * self._k[layer].shape[1], 64))
            for buf in (self._k, self._v):
                grown = self._alloc(size)
                grown[:, :start] = buf[layer][:, :start]
                buf[layer] = grown
        self._k[layer][:, start:end] = k
        self._v[layer][:, start:end] = v
        return self._k[layer][:, :end], self._v[layer][:, :end]

    def keys(self, layer: int) -> np.ndarray:
        """``(kv_heads, length, head_dim)`` keys of ``layer`` (a view)."""
        return self._k[layer][:, : self.length]

    def values(self, layer: int) -> np.ndarray:
        """``(kv_heads, length, head_dim)`` values of ``layer`` (a view)."""
        return self._v[layer][:, : self.length]
