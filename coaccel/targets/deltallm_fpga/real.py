"""Real decoder inputs for the DeltaLLM study and validation, and their sparsity statistics.

The inputs are a real RoPE/GQA decoder's post-RoPE queries and keys
(:func:`coaccel.models.nn.decoder_attention`): SmolLM2-135M by default ([SMOLLM2]: 30 layers, 9
query and 3 KV heads of 64, RoPE), or Gemma-3-270M ([GEMMA3]: 18 layers, 4 query and 1 KV head
of 256, sliding-window and global layers), on deterministic passages of the Python
documentation ([PYDOC], :func:`coaccel.models.nn.decoder_passages`), every layer and every KV
head, INT8-quantized per (layer, head, passage) as the datapath takes them.

:func:`measure_real_sparsity` runs one prefill per passage and, per (passage, layer), the
counts of :func:`coaccel.models.deltallm.sparsity_counts` for a grid of θ, τ and lane layouts
at one exact window W. The statistics are **micro-averages** (``docs/deltallm.md`` §5: counts
summed over passages, layers and heads before one division, never a mean of ratios), with their
spread (:class:`Spread`): the per-passage and per-layer micro-averages, their standard
deviations and a 95 % t-interval of the mean across passages.

Without the model packages :func:`load_real_model` raises
:class:`~coaccel.spine.errors.MissingDependencyError` whose message is the pip command.

Public: :data:`REAL_MODELS`, :func:`load_real_model`, :func:`model_shape`, :class:`Spread`,
:func:`spread`, :class:`RealCounts`, :func:`measure_real_sparsity`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .real_inputs import REAL_MODELS

__all__ = [
    "DEFAULT_LAYOUTS",
    "REAL_MODELS",
    "RealCounts",
    "Spread",
    "load_real_model",
    "measure_real_sparsity",
    "model_shape",
    "spread",
    "t_quantile_975",
]


DEFAULT_LAYOUTS: tuple[tuple[str, int], ...] = (("group", 4), ("group", 1), ("head", 4))
"""Lane layouts of the study: today's (the G heads of a KV group × 4 query tokens), one query per
vector (G heads × 1 token), per-head lanes (4 tokens of one head)."""

Progress = Callable[[str], None]

# Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_quantile_975(dof: int) -> float:
    """The 97.5 % quantile of Student's t (the half-width factor of a 95 % interval).

    Args:
        dof: degrees of freedom, ``>= 1``.

    Returns:
        The table value up to 30 degrees of freedom, beyond it the Cornish-Fisher expansion
        ``z + (z³ + z)/(4ν) + (5z⁵ + 16z³ + 3z)/(96ν²)`` (error below 1e-4).
    """
    if dof < 1:
        raise ValueError(f"dof must be >= 1, got {dof}")
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


@functools.lru_cache(maxsize=2)
def load_real_model(name: str = REAL_MODELS[0]) -> Any:
    """Load (once per process) a decoder of :data:`REAL_MODELS`.

    Args:
        name: the model's short name.

    Returns:
        The :class:`coaccel.models.nn.Decoder` (float32).

    Raises:
        ValueError: not one of :data:`REAL_MODELS`.
        MissingDependencyError: the model package or ``gguf`` is missing; the message carries
            the pip command that installs it.
    """
    if name not in REAL_MODELS:
        raise ValueError(f"unknown real model {name!r}; valid: {', '.join(REAL_MODELS)}")
    from coaccel.models.nn import load_decoder

    return load_decoder(name)


def model_shape(model: Any) -> Any:
    """The :class:`~coaccel.spine.workload.ModelShape` of a loaded decoder (from its GGUF file).

    Args:
        model: a loaded decoder.

    Returns:
        The shape (hidden, MLP width, layers, heads, KV heads, head_dim, vocabulary, context).
    """
    from coaccel.spine.workload import ModelShape

    c = model.config
    return ModelShape(
        hidden=int(c.hidden_size), intermediate=int(c.intermediate_size),
        layers=int(c.num_layers), heads=int(c.num_heads), kv_heads=int(c.num_kv_heads),
        head_dim=int(c.head_dim), vocab=int(c.vocab_size),
        max_position_embeddings=int(c.context_tokens),
        tie_word_embeddings=bool(c.tied_embeddings), rope_theta=float(c.rope_base),
    )  # fmt: skip


@dataclass(frozen=True)
class Spread:
    """A micro-averaged statistic over passages × layers and its spread.

    Attributes:
        mean: ``Σ numerator / Σ denominator`` over every passage, layer and head.
        passages: passages pooled (``n``).
        layers: layers pooled per passage.
        passage_std: sample standard deviation (ddof 1) of the per-passage micro-averages
            (NaN for one passage).
        ci95: 95 % t-interval of the mean across passages, ``mean ± t·std/√n`` (NaN for one).
        layer_std: standard deviation (ddof 0) of the per-layer micro-averages (pooled over
            passages).
        layer_min: smallest per-layer micro-average. layer_max: largest.
        per_passage: the per-passage micro-averages.
        per_layer: the per-layer micro-averages.
    """

    mean: float
    passages: int
    layers: int
    passage_std: float
    ci95: tuple[float, float]
    layer_std: float
    layer_min: float
    layer_max: float
    per_passage: tuple[float, ...]
    per_layer: tuple[float, ...]

    @property
    def samples(self) -> int:
        """(passage, layer) tensors pooled."""
        return self.passages * self.layers


def spread(numerator: npt.ArrayLike, denominator: npt.ArrayLike) -> Spread:
    """Micro-average and spread of counts ``[passages, layers]``.

    Args:
        numerator: counts ``[P, L]`` (e.g. kept Δ elements, skipped score elements).
        denominator: counts ``[P, L]`` (all Δ elements, all valid score elements).

    Returns:
        The :class:`Spread`.

    Raises:
        ValueError: shapes differ, are not 2-D, or a denominator sum is 0.
    """
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 2 or num.size == 0:
        raise ValueError(f"need two [passages, layers] arrays of one shape, got {num.shape}, "
                         f"{den.shape}")  # fmt: skip
    if np.any(den.sum(axis=1) == 0) or np.any(den.sum(axis=0) == 0):
        raise ValueError("a passage or layer has no elements")
    per_p = num.sum(axis=1) / den.sum(axis=1)
    per_l = num.sum(axis=0) / den.sum(axis=0)
    mean = float(num.sum() / den.sum())
    n = per_p.size
    if n > 1:
        sd = float(per_p.std(ddof=1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        ci = (mean - half, mean + half)
    else:
        sd, ci = math.nan, (math.nan, math.nan)
    return Spread(
        mean=mean, passages=n, layers=int(per_l.size), passage_std=sd, ci95=ci,
        layer_std=float(per_l.std()), layer_min=float(per_l.min()),
        layer_max=float(per_l.max()), per_passage=tuple(float(x) for x in per_p),
        per_layer=tuple(float(x) for x in per_l),
    )  # fmt: skip


@dataclass(frozen=True, eq=False)
class RealCounts:
    """Sparsity counts of a decoder's real inputs, per (passage, layer).

    Attributes:
        model: decoder name. tokens: T per passage. topics: the passages' pydoc topics.
        layers: decoder layers measured. window: exact window W. n_sink: dense leading keys.
        thetas, taus, layouts: the grid (layouts: ``(lane_layout, query_block)``).
        key_thetas: further thresholds at which only ``ρ_K`` was counted.
        kv_heads, query_heads, head_dim: the model's attention shape.
        delta_nonzeros: int64 ``[P, L, nθ + n_key_thetas]`` kept Δ elements (rows 1..T−1).
        delta_elements: int64 ``[P, L]`` all Δ elements of rows 1..T−1.
        valid: int64 ``[P, L]`` causally valid (query head, query, key) elements.
        fine: int64 ``[P, L, nθ, nτ]`` valid elements with ``E >= τ``.
        skipped: int64 ``[P, L, nθ, nτ, nlayouts]`` valid elements in skipped columns.
    """

    model: str
    tokens: int
    topics: tuple[str, ...]
    layers: tuple[int, ...]
    window: int
    n_sink: int
    thetas: tuple[int, ...]
    taus: tuple[float, ...]
    layouts: tuple[tuple[str, int], ...]
    key_thetas: tuple[int, ...]
    kv_heads: int
    query_heads: int
    head_dim: int
    delta_nonzeros: npt.NDArray[np.int64]
    delta_elements: npt.NDArray[np.int64]
    valid: npt.NDArray[np.int64]
    fine: npt.NDArray[np.int64]
    skipped: npt.NDArray[np.int64]

    def rho_k(self, theta: int) -> Spread:
        """Delta-Key sparsity ``ρ_K`` at a grid θ or a key θ."""
        i = (*self.thetas, *self.key_thetas).index(theta)
        nz = self.delta_nonzeros[:, :, i]
        return spread(self.delta_elements - nz, self.delta_elements)

    def rho_fine(self, theta: int, tau: float) -> Spread:
        """Fine score sparsity ``ρ_fine`` at a grid (θ, τ)."""
        return spread(self.fine[:, :, self.thetas.index(theta), self.taus.index(tau)], self.valid)

    def rho_s(self, theta: int, tau: float, layout: tuple[str, int]) -> Spread:
        """Structured score sparsity ``ρ_S`` at a grid (θ, τ, layout)."""
        i, j, k = self.thetas.index(theta), self.taus.index(tau), self.layouts.index(layout)
        return spread(self.skipped[:, :, i, j, k], self.valid)


def measure_real_sparsity(
    model_name: str = REAL_MODELS[0],
    *,
    passages: int = 4,
    tokens: int = 512,
    thetas: Sequence[int] = (4,),
    window: int = 16,
    taus: Sequence[float] = (8.0,),
    layouts: Sequence[tuple[str, int]] = DEFAULT_LAYOUTS[:1],
    key_thetas: Sequence[int] = (),
    layers: Sequence[int] | None = None,
    n_sink: int = 1,
    events_at: tuple[int, int, int] | None = None,
    on_events: Callable[[int, int, tuple[Any, ...]], None] | None = None,
    progress: Progress | None = None,
) -> RealCounts:
    """ρ_K, ρ_fine and ρ_S counts of a real decoder's keys and queries (module docstring).

    Args:
        model_name: one of :data:`REAL_MODELS`.
        passages: pydoc passages (one prefill each).
        tokens: tokens per passage, T.
        thetas: Delta-Key thresholds, key LSBs.
        window: exact window W.
        taus: VSSOS thresholds, log2 units.
        layouts: ``(lane_layout, query_block)`` pairs.
        key_thetas: further thresholds at which only ``ρ_K`` is counted (no score pass).
        layers: decoder layers (default all).
        n_sink: dense leading keys.
        events_at: ``(θ index, τ index, layout index)`` whose column events go to
            ``on_events`` (for the simulator), or None.
        on_events: called with ``(passage index, layer, events)`` per (passage, layer).
        progress: receives one line per passage.

    Returns:
        The :class:`RealCounts`.

    Raises:
        MissingDependencyError: the model package is not installed (the message says how).
        ValueError: a bad size (e.g. fewer long-enough passages than asked for).
    """
    from coaccel.models import deltallm as dl
    from coaccel.models.nn import decoder_attention, decoder_passages

    say = progress or (lambda _m: None)
    model = load_real_model(model_name)
    n_layers = int(model.config.num_layers)
    keep = tuple(range(n_layers)) if layers is None else tuple(int(x) for x in layers)
    picked = decoder_passages(model, passages, tokens)
    shape = (len(picked), len(keep))
    nth, nta, nla = len(thetas), len(taus), len(layouts)
    nnz = np.zeros((*shape, nth + len(key_thetas)), dtype=np.int64)
    size = np.zeros(shape, dtype=np.int64)
    valid = np.zeros(shape, dtype=np.int64)
    fine = np.zeros((*shape, nth, nta), dtype=np.int64)
    skipped = np.zeros((*shape, nth, nta, nla), dtype=np.int64)
    t0 = None
    for pi, p in enumerate(picked):
        say(f"{model_name}: passage {pi + 1}/{len(picked)} ({p.topic}, {p.tokens} tokens): "
            f"prefill and {len(keep)} layers x {nth} theta")  # fmt: skip
        for li, t in enumerate(decoder_attention(model, [p], layers=keep)):
            t0 = t
            for ti, th in enumerate(thetas):
                ev = None if events_at is None or events_at[0] != ti else events_at[1:]
                c = dl.sparsity_counts(
                    t.q_int8, t.k_int8, theta=int(th), window=window, taus=taus,
                    layouts=layouts, q_scale=t.q_scale, k_scale=t.k_scale, n_sink=n_sink,
                    events=ev, layer=keep[li],
                )  # fmt: skip
                nnz[pi, li, ti] = c.delta_nonzeros
                size[pi, li], valid[pi, li] = c.delta_elements, c.valid_elements
                fine[pi, li, ti] = c.fine_elements
                skipped[pi, li, ti] = c.skipped_elements
                if ev is not None and on_events is not None:
                    on_events(pi, keep[li], c.events)
            for ki, th in enumerate(key_thetas):
                mask = dl.encode_delta_keys(t.k_int8, theta=int(th), n_sink=n_sink).mask
                nnz[pi, li, nth + ki] = int(np.count_nonzero(mask[:, 1:, :]))
    if t0 is None:
        raise ValueError(f"no layers measured: layers={keep}")
    return RealCounts(
        model=model_name, tokens=int(tokens), topics=tuple(p.topic for p in picked),
        layers=keep, window=int(window), n_sink=int(n_sink),
        thetas=tuple(int(x) for x in thetas), taus=tuple(float(x) for x in taus),
        layouts=tuple((str(a), int(b)) for a, b in layouts),
        key_thetas=tuple(int(x) for x in key_thetas), kv_heads=int(t0.k.shape[0]),
        query_heads=int(t0.q.shape[0]), head_dim=int(t0.q.shape[2]), delta_nonzeros=nnz,
        delta_elements=size, valid=valid, fine=fine, skipped=skipped,
    )  # fmt: skip
