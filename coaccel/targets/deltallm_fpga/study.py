"""The DeltaLLM sparsity study behind ``coaccel delta`` ([DELTALLM]).

It runs the DeltaLLM attention reference (:func:`coaccel.models.deltallm.attention`) on real and
synthetic keys and queries over a grid of the Delta-Key threshold θ, the exact window W and the
VSSOS skip threshold τ, and measures for each point (micro-averaged over every tensor of a
data set: all counts are summed before dividing):

* ``ρ_K``, the Delta-Key sparsity ``1 − nnz(Δ_1..T−1) / ((T−1)·d)`` summed over KV heads;
* ``ρ_fine``, the fraction of causally valid (query head, query, key) elements whose log2
  exponent reaches τ;
* ``ρ_S``, the fraction of valid elements inside skipped VSSOS columns (``ρ_S ≤ ρ_fine``);
* the attention-output error against dense attention: the same datapath with θ = 0, W = T and
  τ = ∞ (isolates the DeltaLLM approximation), as the relative L2 error pooled over all
  outputs and the largest absolute error; and the relative L2 error against exact float64
  softmax attention of the unquantized tensors (adds the INT8 and fixed-point error).

It also **finds θ for a target ρ_K** per data set (:func:`find_theta`) and evaluates that θ at
the first W and τ of the grid.

Data sets:

* ``real``: a real causal decoder's post-RoPE queries, keys and values
  (:func:`coaccel.models.nn.decoder_attention`): SmolLM2-135M ([SMOLLM2]; 9 query / 3 KV heads,
  GQA group 3, RoPE) by default, or Gemma-3-270M ([GEMMA3]), on passages of the Python
  documentation topics ([PYDOC]), per layer (:class:`RealDeltaConfig`). These are the inputs the
  DeltaLLM datapath is built for.
* ``minilm``: all-MiniLM-L6-v2 ([MINILM]) on the same kind of passages, per layer and head
  (``coaccel.models.nn.minilm_attention``). MiniLM is a bidirectional **encoder without RoPE**;
  each head is its own KV head (GQA group 1). The reference still applies its causal mask. Kept
  for comparison with a model whose keys do not rotate.
* ``synthetic``: :func:`coaccel.models.nn.synthetic_attention` with the dimensions of the
  configured models, post-RoPE, GQA group 4, key autocorrelation ``key_ar``.

This module computes only; :mod:`coaccel.targets.deltallm_fpga.study_report` formats, writes
and plots.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from coaccel.models import deltallm as dl
from coaccel.models.nn import SYNTHETIC_MODELS, AttentionTensors, synthetic_attention
from coaccel.spine.config import Problem, param
from coaccel.spine.errors import MissingDependencyError

__all__ = [
    "DATA_SOURCES",
    "MINILM_DATASET",
    "DeltaRow",
    "DeltaStudyConfig",
    "DeltaStudyResult",
    "MiniLMDeltaConfig",
    "RealDeltaConfig",
    "SyntheticDeltaConfig",
    "ThetaFit",
    "channel_sparsity",
    "delta_sparsity",
    "dense_float_attention",
    "find_theta",
    "rows_as_dicts",
    "run_delta_study",
]

DATA_SOURCES = ("real", "minilm", "synthetic")
"""``real``: a decoder (SmolLM2-135M) on pydoc passages; ``minilm``: the MiniLM encoder on
pydoc passages; ``synthetic``: the LLM-like generator."""

MINILM_DATASET = "minilm"
"""The ``dataset`` name of the MiniLM rows (a real decoder's rows carry the model's name)."""

REAL_MODELS = ("smollm2-135m", "gemma3-270m")
"""Decoders of the ``real`` data (``coaccel.targets.deltallm_fpga.real.REAL_MODELS``)."""

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class RealDeltaConfig:
    """Real keys: a causal RoPE/GQA decoder on pydoc passages.

    Attributes:
        model: ``smollm2-135m`` (default) or ``gemma3-270m``.
        passages: pydoc passages (one prefill each).
        tokens: tokens per passage, T.
        layers: decoder layers whose q, k, v are used (empty: every layer).
    """

    model: Literal["smollm2-135m", "gemma3-270m"] = param(default="smollm2-135m", doc="decoder")
    passages: int = param(default=2, ge=1, le=40, doc="pydoc passages")
    tokens: int = param(default=256, ge=2, le=8192, doc="tokens per passage")
    layers: tuple[int, ...] = param(default=(), ge=0, doc="decoder layers (empty: all)")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: no layer twice."""
        if len(set(self.layers)) != len(self.layers):
            return [Problem("", "layers", self.layers, "lists a layer twice")]
        return []


@dataclass(frozen=True)
class MiniLMDeltaConfig:
    """Real keys of an encoder without RoPE: all-MiniLM-L6-v2 on pydoc passages.

    Attributes:
        passages: passages of the Python documentation topics (picked at evenly spaced ranks of
            the topics, sorted by name, whose prose is long enough).
        tokens: tokens per passage including [CLS] and [SEP] (MiniLM's limit is 512).
        layers: encoder layers whose q, k, v are used (0..5).
    """

    passages: int = param(default=1, ge=1, le=30, doc="pydoc passages")
    tokens: int = param(default=128, ge=3, le=512, doc="tokens per passage, [CLS]/[SEP] included")
    layers: tuple[int, ...] = param(default=(0, 2, 4), ge=0, le=5, doc="MiniLM encoder layers")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: at least one layer, none twice."""
        out: list[Problem | str] = []
        if not self.layers:
            out.append(Problem("", "layers", (), "needs at least one layer"))
        if len(set(self.layers)) != len(self.layers):
            out.append(Problem("", "layers", self.layers, "lists a layer twice"))
        return out


@dataclass(frozen=True)
class SyntheticDeltaConfig:
    """Synthetic LLM-like keys (:func:`coaccel.models.nn.synthetic_attention`).

    Attributes:
        models: shipped workload models whose dimensions and RoPE are used.
        tokens: sequence length T.
        kv_heads: KV heads per draw (queries: ``kv_heads · G``).
        layers: independent draws per model (one "layer" each).
        key_ar: lag-1 autocorrelation of the pre-RoPE key fluctuation, ``[0, 1)``.
        query_ar: the same for queries.
        value_ar: the same for values.
        key_mean_std: spread of the per-channel key offsets.
        query_mean_std: spread of the per-channel query offsets.
        query_group_share: fraction of the query offset variance shared by a group's heads.
        outlier_channels: outlier channels per head (keys and queries).
        outlier_scale_min: smallest outlier factor.
        outlier_scale_max: largest outlier factor.
        rope: apply RoPE (False: pre-RoPE keys, for ablation).
    """

    models: tuple[str, ...] = param(default=SYNTHETIC_MODELS, doc="workload models")
    tokens: int = param(default=128, ge=2, doc="sequence length T")
    kv_heads: int = param(default=1, ge=1, doc="KV heads per draw")
    layers: int = param(default=1, ge=1, doc="independent draws per model")
    key_ar: float = param(default=0.9, ge=0, lt=1, doc="key AR(1) coefficient")
    query_ar: float = param(default=0.5, ge=0, lt=1, doc="query AR(1) coefficient")
    value_ar: float = param(default=0.5, ge=0, lt=1, doc="value AR(1) coefficient")
    key_mean_std: float = param(default=1.0, ge=0, doc="per-channel key offset spread")
    query_mean_std: float = param(default=2.0, ge=0, doc="per-channel query offset spread")
    query_group_share: float = param(
        default=0.5, ge=0, le=1, doc="query offset variance shared within a KV group"
    )
    outlier_channels: int = param(default=4, ge=0, doc="outlier channels per head")
    outlier_scale_min: float = param(default=2.0, ge=1, doc="smallest outlier factor")
    outlier_scale_max: float = param(default=8.0, ge=1, doc="largest outlier factor")
    rope: bool = param(default=True, doc="apply RoPE to q and k")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: known, distinct models; ordered outlier factors."""
        from coaccel.spine.workload import WORKLOAD_NAMES, load_workload

        out: list[Problem | str] = []
        if not self.models:
            out.append(Problem("", "models", (), "needs at least one model"))
        for i, m in enumerate(self.models):
            if m not in WORKLOAD_NAMES:
                out.append(
                    Problem(
                        "",
                        f"models[{i}]",
                        m,
                        f"unknown model {m!r}; valid: {', '.join(WORKLOAD_NAMES)}",
                        ", ".join(WORKLOAD_NAMES),
                    )
                )
        if len(set(self.models)) != len(self.models):
            out.append(Problem("", "models", self.models, "lists a model twice"))
        for m in self.models:
            if m in WORKLOAD_NAMES:
                hkv = load_workload(m).model.kv_heads
                if self.kv_heads > hkv:
                    out.append(
                        Problem(
                            "", "kv_heads", self.kv_heads,
                            f"must be <= {hkv}, the KV heads of {m}",
                        )
                    )  # fmt: skip
                    break
        if self.outlier_scale_min > self.outlier_scale_max:
            out.append(
                Problem(
                    "",
                    "outlier_scale_min",
                    self.outlier_scale_min,
                    f"must be <= outlier_scale_max ({self.outlier_scale_max})",
                )
            )
        return out


@dataclass(frozen=True)
class DeltaStudyConfig:
    """Configuration of the DeltaLLM sparsity study (``arch_configs/studies/``).

    Attributes:
        data: data sources, ``real``, ``minilm`` and/or ``synthetic``.
        seed: seed of the synthetic tensors.
        mode: ``fixed`` (bit-exact INT8 datapath; θ in key LSBs) or ``float`` (float64
            algorithmic mode on the unquantized tensors; θ in key units).
        thetas: Delta-Key thresholds of the grid (integers in fixed mode).
        windows: exact windows W of the grid (diagonal included).
        taus: VSSOS skip thresholds of the grid, log2 units (``.inf``: never skip).
        target_delta_sparsity: the ρ_K that :func:`find_theta` aims for (0: no search).
        query_block: consecutive query tokens per VSSOS vector (``P_q``).
        lane_layout: ``group`` (the G query heads of a KV group × ``P_q`` tokens per vector,
            the default) or ``head`` (``P_q`` tokens of one query head).
        delta_mode: ``memory`` or ``naive`` Delta-Key form.
        denom_mode: ``full`` (skipped columns still add to the denominator) or ``kept``.
        order: VSSOS column order, ``ascending`` or ``window_first``.
        n_sink: leading keys stored dense and scored exactly.
        refresh_period: dense key row every this many tokens (0: off).
        engine: fixed mode only: ``fast`` runs
            :func:`coaccel.models.deltallm.attention_fixed_fast` (numba, bit-exact with the
            reference: same outputs and counts), ``reference`` the numpy reference itself.
        real: the real decoder data.
        minilm: the MiniLM encoder data.
        synthetic: the synthetic data.
    """

    VERSION: ClassVar[int] = 1

    data: tuple[Literal["real", "minilm", "synthetic"], ...] = param(
        default=("real", "synthetic"), doc="sources"
    )
    seed: int = param(default=0, ge=0, doc="seed of the synthetic tensors")
    mode: Literal["fixed", "float"] = param(default="fixed", doc="reference mode")
    thetas: tuple[float, ...] = param(default=(0, 4, 8, 16), ge=0, doc="θ grid")
    windows: tuple[int, ...] = param(default=(16,), ge=1, doc="W grid, tokens")
    taus: tuple[float, ...] = param(default=(8.0,), ge=1 / 256, doc="τ grid, log2 units")
    target_delta_sparsity: float = param(default=0.6, ge=0, lt=1, doc="ρ_K target of the θ search")
    query_block: int = param(default=4, ge=1, doc="query tokens per VSSOS vector")
    delta_mode: Literal["memory", "naive"] = param(default="memory", doc="Delta-Key form")
    denom_mode: Literal["full", "kept"] = param(default="full", doc="VSSOS denominator")
    order: Literal["ascending", "window_first"] = param(default="ascending", doc="column order")
    n_sink: int = param(default=1, ge=1, doc="dense leading keys")
    refresh_period: int = param(default=0, ge=0, doc="dense row period (0: off)")
    engine: Literal["fast", "reference"] = param(
        default="fast", doc="fixed mode: numba twin of the reference, or the reference itself"
    )
    lane_layout: Literal["group", "head"] = param(
        default="group", doc="VSSOS vector: G heads x P_q tokens, or P_q tokens of one head"
    )
    real: RealDeltaConfig = param(default=RealDeltaConfig(), doc="real decoder data")
    minilm: MiniLMDeltaConfig = param(default=MiniLMDeltaConfig(), doc="MiniLM encoder data")
    synthetic: SyntheticDeltaConfig = param(default=SyntheticDeltaConfig(), doc="synthetic data")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: non-empty, distinct grids; integer θ in fixed mode."""
        out: list[Problem | str] = []
        if not self.data:
            out.append(Problem("", "data", (), "needs at least one of: real, minilm, synthetic"))
        if len(set(self.data)) != len(self.data):
            out.append(Problem("", "data", self.data, "lists a source twice"))
        for key in ("thetas", "windows", "taus"):
            vals = getattr(self, key)
            if not vals:
                out.append(Problem("", key, (), "needs at least one value"))
            if len(set(vals)) != len(vals):
                out.append(Problem("", key, vals, "lists a value twice"))
        if self.mode == "fixed":
            for i, th in enumerate(self.thetas):
                if th != int(th):
                    out.append(
                        Problem(
                            "",
                            f"thetas[{i}]",
                            th,
                            "must be a whole number of key LSBs in fixed mode",
                            "an integer",
                        )
                    )
        return out


# --------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class DeltaRow:
    """One grid point on one data set (micro-averaged over its tensors).

    Attributes:
        source: ``real``, ``minilm`` or ``synthetic``.
        dataset: the decoder's name (``smollm2-135m``), ``minilm`` or ``synthetic:<model>``.
        mode: ``fixed`` or ``float``.
        theta: Delta-Key threshold (key LSBs in fixed mode, key units in float mode).
        window: exact window W.
        tau: VSSOS threshold, log2 units.
        theta_from_target: True for the row of the θ found for ``target_delta_sparsity``.
        delta_sparsity: ``ρ_K``.
        fine_sparsity: ``ρ_fine``.
        structured_sparsity: ``ρ_S``.
        skipped_column_fraction: skipped (vector, column) steps / visited steps.
        rel_l2_error: ``‖y − y_dense‖ / ‖y_dense‖`` pooled over all outputs, against the same
            datapath with θ = 0, W = T, τ = ∞.
        max_abs_error: ``max |y − y_dense|``, in the units of v.
        rel_l2_error_float: ``‖y − y_exact‖ / ‖y_exact‖`` against exact float64 softmax
            attention of the unquantized q, k, v (causal).
        tensors: tensors (layers × passages or draws) pooled.
        kv_heads: KV heads per tensor.
        query_heads: query heads per tensor.
        tokens: sequence length T.
        head_dim: d.
    """

    source: str
    dataset: str
    mode: str
    theta: float
    window: int
    tau: float
    theta_from_target: bool
    delta_sparsity: float
    fine_sparsity: float
    structured_sparsity: float
    skipped_column_fraction: float
    rel_l2_error: float
    max_abs_error: float
    rel_l2_error_float: float
    tensors: int
    kv_heads: int
    query_heads: int
    tokens: int
    head_dim: int


@dataclass(frozen=True)
class ThetaFit:
    """The θ found for a target ρ_K on one data set.

    Attributes:
        dataset: the data set.
        target: the target ρ_K.
        theta: the found threshold: ``ρ_K(theta) >= target`` and ``ρ_K(theta_below) < target``.
        delta_sparsity: ``ρ_K(theta)``.
        theta_below: the largest threshold the search saw below the target (integer mode:
            ``theta − 1``; float mode: within the search tolerance of ``theta``).
        delta_sparsity_below: ``ρ_K(theta_below)``.
        evaluations: ρ_K evaluations the bisection used.
    """

    dataset: str
    target: float
    theta: float
    delta_sparsity: float
    theta_below: float
    delta_sparsity_below: float
    evaluations: int


@dataclass(frozen=True, eq=False)
class DeltaStudyResult:
    """The study's output: pure data.

    Attributes:
        config: the configuration that produced it.
        rows: one :class:`DeltaRow` per data set × grid point (θ, then W, then τ), followed by
            each data set's row at the found θ.
        fits: one :class:`ThetaFit` per data set (empty when the target is 0).
        layer_sparsity: ``(dataset, layer, theta, ρ_K)`` for every grid θ (and the found θ)
            and every layer (real models, pooled over passages) or draw (synthetic).
        channel_sparsity: per data set, float64 ``[d]`` ρ_K per head dimension at the found θ
            (or the largest grid θ without a target), pooled over heads and layers.
        passages: ``(dataset, topic, tokens)`` of the real passages (decoder and MiniLM).
        notes: plain statements about the data (e.g. that MiniLM has no RoPE).
    """

    config: DeltaStudyConfig
    rows: tuple[DeltaRow, ...]
    fits: tuple[ThetaFit, ...]
    layer_sparsity: tuple[tuple[str, int, float, float], ...]
    channel_sparsity: dict[str, npt.NDArray[np.float64]]
    passages: tuple[tuple[str, str, int], ...] = ()
    notes: tuple[str, ...] = ()

    def datasets(self) -> tuple[str, ...]:
        """Data-set names in row order."""
        return tuple(dict.fromkeys(r.dataset for r in self.rows))

    def select(self, **fields: Any) -> tuple[DeltaRow, ...]:
        """Rows whose fields equal every given value (e.g. ``dataset="minilm", tau=8.0``)."""
        return tuple(r for r in self.rows if all(getattr(r, k) == v for k, v in fields.items()))


# ------------------------------------------------------------------------------ statistics
def _keys(t: AttentionTensors, mode: str) -> np.ndarray:
    return t.k_int8 if mode == "fixed" else t.k


def _nnz(
    tensors: Sequence[AttentionTensors], theta: float, mode: str, opts: dict[str, Any]
) -> tuple[int, int]:
    nnz = size = 0
    for t in tensors:
        dk = dl.encode_delta_keys(_keys(t, mode), theta=_theta_arg(theta, mode), **opts)
        rest = dk.mask[:, 1:, :]
        nnz += int(np.count_nonzero(rest))
        size += rest.size
    return nnz, size


def _theta_arg(theta: float, mode: str) -> float:
    return int(theta) if mode == "fixed" else float(theta)


def delta_sparsity(
    tensors: Sequence[AttentionTensors],
    theta: float,
    *,
    mode: str = "fixed",
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
) -> float:
    """Micro-averaged Delta-Key sparsity ``ρ_K`` of several tensors' keys at one θ.

    Args:
        tensors: the data set.
        theta: threshold (key LSBs in fixed mode, key units in float mode).
        mode: ``fixed`` (INT8 keys) or ``float`` (float keys).
        delta_mode: Delta-Key form.
        refresh_period: dense row period (0: off).
        n_sink: dense leading rows.

    Returns:
        ``1 − Σ nnz(Δ_1..T−1) / Σ (T−1)·Hkv·d``; 0.0 when no tensor has two tokens.
    """
    opts = {"delta_mode": delta_mode, "refresh_period": refresh_period, "n_sink": n_sink}
    nnz, size = _nnz(tensors, theta, mode, opts)
    return 1.0 - nnz / size if size else 0.0


def find_theta(
    tensors: Sequence[AttentionTensors],
    target: float,
    *,
    mode: str = "fixed",
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
    dataset: str = "",
    rel_tol: float = 1e-3,
) -> ThetaFit:
    """Find θ for a target Delta-Key sparsity by bisection.

    ``ρ_K(θ)`` rises with θ on real key sequences, but it is not monotone in general (a larger
    θ lets the memory lag, and a later difference may then cross the threshold where it would
    not have), so the search keeps the bisection invariant instead of assuming monotonicity:
    ``ρ_K(lo) < target <= ρ_K(hi)``. It returns ``hi``: a θ meeting the target whose lower
    neighbour does not. Where ``ρ_K`` is monotone this is the smallest θ meeting the target.

    Fixed mode searches the integers ``0 .. 255`` (at θ = 255 every INT8 difference, at most
    254 in magnitude, is dropped, so ``ρ_K = 1``). Float mode searches ``[0, 2·max|k| + 1]``
    until ``hi − lo <= rel_tol · hi``.

    Args:
        tensors: the data set (keys are taken in the form of ``mode``).
        target: ρ_K to reach, ``0 < target < 1``.
        mode: ``fixed`` or ``float``.
        delta_mode: Delta-Key form.
        refresh_period: dense row period.
        n_sink: dense leading rows.
        dataset: name recorded in the result.
        rel_tol: float-mode stopping tolerance.

    Returns:
        The :class:`ThetaFit`.
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1), got {target}")
    if not tensors:
        raise ValueError("find_theta needs at least one tensor")
    opts = {"delta_mode": delta_mode, "refresh_period": refresh_period, "n_sink": n_sink}
    evals = 0

    @functools.cache
    def rho(th: float) -> float:
        nonlocal evals
        evals += 1
        nnz, size = _nnz(tensors, th, mode, opts)
        return 1.0 - nnz / size if size else 0.0

    lo: float
    hi: float
    if mode == "fixed":
        lo, hi = 0, 255
        if rho(lo) >= target:
            return ThetaFit(dataset, target, 0, rho(0), -1, math.nan, evals)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if rho(mid) >= target:
                hi = mid
            else:
                lo = mid
    else:
        lo = 0.0
        hi = 2.0 * max(float(np.abs(t.k).max()) for t in tensors) + 1.0
        if rho(lo) >= target:
            return ThetaFit(dataset, target, 0.0, rho(0.0), math.nan, math.nan, evals)
        while hi - lo > rel_tol * hi:
            half = 0.5 * (lo + hi)
            if rho(half) >= target:
                hi = half
            else:
                lo = half
    return ThetaFit(dataset, target, hi, rho(hi), lo, rho(lo), evals)


def channel_sparsity(
    tensors: Sequence[AttentionTensors],
    theta: float,
    *,
    mode: str = "fixed",
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
) -> npt.NDArray[np.float64]:
    """ρ_K per head dimension, pooled over tensors, KV heads and rows 1..T−1.

    Args:
        tensors: the data set (all of one head width d).
        theta: threshold.
        mode: ``fixed`` or ``float``.
        delta_mode: Delta-Key form.
        refresh_period: dense row period.
        n_sink: dense leading rows.

    Returns:
        float64 ``[d]``.
    """
    nnz: np.ndarray | None = None
    count = 0
    for t in tensors:
        dk = dl.encode_delta_keys(
            _keys(t, mode),
            theta=_theta_arg(theta, mode),
            delta_mode=delta_mode,
            refresh_period=refresh_period,
            n_sink=n_sink,
        )
        per = np.count_nonzero(dk.mask[:, 1:, :], axis=(0, 1))
        nnz = per if nnz is None else nnz + per
        count += dk.mask.shape[0] * (dk.mask.shape[1] - 1)
    assert nnz is not None
    return 1.0 - nnz / count if count else np.zeros(nnz.shape)


def dense_float_attention(
    q: npt.ArrayLike, k: npt.ArrayLike, v: npt.ArrayLike, *, causal: bool = True
) -> npt.NDArray[np.float64]:
    """Exact softmax attention in float64: ``softmax(q·kᵀ/√d + mask)·v`` per query head.

    Args:
        q: ``[Hq, T, d]``.
        k: ``[Hkv, T, d]``; query head ``h`` reads KV head ``h // (Hq/Hkv)``.
        v: ``[Hkv, T, dv]``.
        causal: mask keys after the query.

    Returns:
        float64 ``[Hq, T, dv]``.
    """
    qa, ka, va = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    g = qa.shape[0] // ka.shape[0]
    kk, vv = np.repeat(ka, g, axis=0), np.repeat(va, g, axis=0)
    s = qa @ kk.transpose(0, 2, 1) / math.sqrt(qa.shape[2])
    if causal:
        t_n = qa.shape[1]
        s = np.where(np.tril(np.ones((t_n, t_n), dtype=bool)), s, -np.inf)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ vv


# --------------------------------------------------------------------------------- the study
@dataclass
class _Acc:
    """Pooled counts of one grid point over a data set's tensors."""

    nnz: int = 0
    size: int = 0
    fine: int = 0
    skipped: int = 0
    valid: int = 0
    cols_skipped: int = 0
    cols_visited: int = 0
    sig: float = 0.0
    noise: float = 0.0
    max_abs: float = 0.0
    sig_f: float = 0.0
    noise_f: float = 0.0


@dataclass(frozen=True)
class _Run:
    """One attention call's counts and its output in the units of v, ``[Hq, T, d]``."""

    nnz: int
    size: int
    fine: int
    skipped: int
    valid: int
    cols_skipped: int
    cols_visited: int
    output: np.ndarray


class _Dataset:
    """A data set's tensors with their dense references, computed once."""

    def __init__(
        self,
        source: str,
        name: str,
        tensors: list[AttentionTensors],
        mode: str,
        layers: list[int],
    ) -> None:
        self.source, self.name, self.tensors, self.mode = source, name, tensors, mode
        self.layers = layers  # layer (or draw) of each tensor
        self.dense: list[np.ndarray] = []
        self.exact: list[np.ndarray] = []

    def run(
        self, cfg: DeltaStudyConfig, t: AttentionTensors, theta: float, window: int, tau: float
    ) -> _Run:
        """Run the reference (or its bit-exact numba twin in fixed mode) on one tensor."""
        opts: dict[str, Any] = dict(
            theta=_theta_arg(theta, self.mode), window=window, tau=tau,
            query_block=cfg.query_block, denom_mode=cfg.denom_mode, order=cfg.order,
            n_sink=cfg.n_sink, delta_mode=cfg.delta_mode, refresh_period=cfg.refresh_period,
            lane_layout=cfg.lane_layout,
        )  # fmt: skip
        size = t.k.shape[0] * (t.tokens - 1) * t.k.shape[2]
        st: dl.AttentionStats | dl.FastResult
        if self.mode == "float":
            res = dl.attention(t.q, t.k, t.v, mode="float", **opts)
            st = res.stats
            nnz = int(np.count_nonzero(res.delta_keys.mask[:, 1:, :]))
            y = res.output
        else:
            sc: dict[str, Any] = {"q_scale": t.q_scale, "k_scale": t.k_scale}
            if cfg.engine == "fast":
                fast = dl.attention_fixed_fast(t.q_int8, t.k_int8, t.v_int8, **opts, **sc)
                st, out = fast, fast.output
                # rho_K = 1 - nnz/size in float64: rounding recovers nnz exactly (size < 2^50).
                nnz = round((1.0 - fast.delta_sparsity) * size)
            else:
                res = dl.attention(t.q_int8, t.k_int8, t.v_int8, mode="fixed", **opts, **sc)
                st, out = res.stats, res.output
                nnz = int(np.count_nonzero(res.delta_keys.mask[:, 1:, :]))
            # Q7.8 in INT8-v units -> the units of v.
            y = out.astype(np.float64) * 2.0**-8 * np.repeat(t.v_scale, t.group)[:, None, None]
        return _Run(
            nnz, size, st.fine_elements, st.skipped_elements, st.valid_elements,
            st.skipped_columns, st.visited_columns, y,
        )  # fmt: skip

    def prepare(self, cfg: DeltaStudyConfig) -> None:
        for t in self.tensors:
            self.dense.append(self.run(cfg, t, 0, t.tokens, math.inf).output)
            self.exact.append(dense_float_attention(t.q, t.k, t.v))

    def point(
        self, cfg: DeltaStudyConfig, theta: float, window: int, tau: float, from_target: bool
    ) -> DeltaRow:
        acc = _Acc()
        for t, y_dense, y_exact in zip(self.tensors, self.dense, self.exact, strict=True):
            r = self.run(cfg, t, theta, window, tau)
            acc.nnz += r.nnz
            acc.size += r.size
            acc.fine += r.fine
            acc.skipped += r.skipped
            acc.valid += r.valid
            acc.cols_skipped += r.cols_skipped
            acc.cols_visited += r.cols_visited
            y = r.output
            acc.sig += float(np.sum(y_dense * y_dense))
            acc.noise += float(np.sum((y - y_dense) ** 2))
            acc.max_abs = max(acc.max_abs, float(np.abs(y - y_dense).max()))
            acc.sig_f += float(np.sum(y_exact * y_exact))
            acc.noise_f += float(np.sum((y - y_exact) ** 2))
        t0 = self.tensors[0]
        return DeltaRow(
            source=self.source,
            dataset=self.name,
            mode=self.mode,
            theta=float(theta),
            window=int(window),
            tau=float(tau),
            theta_from_target=from_target,
            delta_sparsity=1.0 - acc.nnz / acc.size if acc.size else 0.0,
            fine_sparsity=acc.fine / acc.valid,
            structured_sparsity=acc.skipped / acc.valid,
            skipped_column_fraction=acc.cols_skipped / acc.cols_visited,
            rel_l2_error=math.sqrt(acc.noise / acc.sig) if acc.sig else math.inf,
            max_abs_error=acc.max_abs,
            rel_l2_error_float=math.sqrt(acc.noise_f / acc.sig_f) if acc.sig_f else math.inf,
            tensors=len(self.tensors),
            kv_heads=int(t0.k.shape[0]),
            query_heads=int(t0.q.shape[0]),
            tokens=t0.tokens,
            head_dim=int(t0.q.shape[2]),
        )


@functools.lru_cache(maxsize=1)
def _minilm() -> Any:
    from coaccel.models.nn.minilm import load_minilm

    try:
        return load_minilm()
    except ModuleNotFoundError as exc:
        raise MissingDependencyError(str(exc)) from None


def _minilm_dataset(cfg: DeltaStudyConfig) -> tuple[_Dataset, list[tuple[str, str, int]]]:
    from coaccel.models.nn.real_attention import minilm_attention, pydoc_passages
    from coaccel.spine.config import ConfigError

    model = _minilm()
    try:
        passages = pydoc_passages(model, cfg.minilm.passages, cfg.minilm.tokens)
    except ValueError as exc:
        raise ConfigError([Problem("", "minilm.passages", cfg.minilm.passages, str(exc))]) from None
    tensors = minilm_attention(model, passages, layers=cfg.minilm.layers)
    layer_of = [li for _ in passages for li in cfg.minilm.layers]
    ds = _Dataset("minilm", MINILM_DATASET, tensors, cfg.mode, layer_of)
    return ds, [(MINILM_DATASET, p.topic, p.tokens) for p in passages]


def _real_dataset(cfg: DeltaStudyConfig) -> tuple[_Dataset, list[tuple[str, str, int]]]:
    """The decoder's q, k, v of every configured layer of every passage."""
    from coaccel.models.nn import decoder_attention, decoder_passages
    from coaccel.spine.config import ConfigError

    from .real import load_real_model

    r = cfg.real
    model = load_real_model(r.model)
    n_layers = int(model.config.num_layers)
    layers = r.layers or tuple(range(n_layers))
    bad = [x for x in layers if x >= n_layers]
    if bad:
        raise ConfigError([Problem("", "real.layers", r.layers,
                                   f"{r.model} has layers 0..{n_layers - 1}")])  # fmt: skip
    try:
        passages = decoder_passages(model, r.passages, r.tokens)
    except ValueError as exc:
        raise ConfigError([Problem("", "real.passages", r.passages, str(exc))]) from None
    tensors = decoder_attention(model, passages, layers=layers)
    layer_of = [li for _ in passages for li in layers]
    ds = _Dataset("real", r.model, tensors, cfg.mode, layer_of)
    return ds, [(r.model, p.topic, p.tokens) for p in passages]


def _synthetic_datasets(cfg: DeltaStudyConfig, rng: np.random.Generator) -> list[_Dataset]:
    s = cfg.synthetic
    out = []
    for model in s.models:
        tensors = [
            synthetic_attention(
                rng, model, tokens=s.tokens, kv_heads=s.kv_heads, key_ar=s.key_ar,
                query_ar=s.query_ar, value_ar=s.value_ar, key_mean_std=s.key_mean_std,
                query_mean_std=s.query_mean_std, query_group_share=s.query_group_share,
                n_outlier_channels=s.outlier_channels,
                outlier_scale_min=s.outlier_scale_min, outlier_scale_max=s.outlier_scale_max,
                rope=s.rope,
            ).tensors
            for _ in range(s.layers)
        ]  # fmt: skip
        out.append(
            _Dataset("synthetic", f"synthetic:{model}", tensors, cfg.mode, list(range(s.layers)))
        )
    return out


def run_delta_study(
    cfg: DeltaStudyConfig,
    *,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> DeltaStudyResult:
    """Run the DeltaLLM sparsity study.

    Args:
        cfg: the study configuration (validated again here, so hand-built configs are safe).
        rng: random generator for the synthetic tensors (the CLI seeds it with ``cfg.seed``).
        progress: optional callback receiving one short line per step.

    Returns:
        The :class:`DeltaStudyResult`.

    Raises:
        ConfigError: the configuration breaks a rule.
        MissingDependencyError: ``real`` or ``minilm`` was asked for and the model package is
            missing (the message gives the pip command).
    """
    from coaccel.spine.config import override

    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    cfg = override(cfg, {})
    say = progress or (lambda _msg: None)
    datasets, passages, notes = _datasets(cfg, rng, say)
    enc: dict[str, Any] = {
        "delta_mode": cfg.delta_mode,
        "refresh_period": cfg.refresh_period,
        "n_sink": cfg.n_sink,
    }
    rows: list[DeltaRow] = []
    fits: list[ThetaFit] = []
    layers: list[tuple[str, int, float, float]] = []
    channels: dict[str, np.ndarray] = {}
    for ds in datasets:
        say(f"{ds.name}: dense references of {len(ds.tensors)} tensor(s)")
        ds.prepare(cfg)
        for theta in cfg.thetas:
            for w in cfg.windows:
                for tau in cfg.taus:
                    say(f"{ds.name}: theta={theta:g} W={w} tau={tau:g}")
                    rows.append(ds.point(cfg, theta, w, tau, False))
        thetas = [float(x) for x in cfg.thetas]
        if cfg.target_delta_sparsity > 0:
            fit = find_theta(
                ds.tensors, cfg.target_delta_sparsity, mode=cfg.mode, dataset=ds.name, **enc
            )
            fits.append(fit)
            say(f"{ds.name}: theta={fit.theta:g} reaches rho_K={fit.delta_sparsity:.3f}")
            rows.append(ds.point(cfg, fit.theta, cfg.windows[0], cfg.taus[0], True))
            thetas.append(float(fit.theta))
            probe = fit.theta
        else:
            probe = max(cfg.thetas)
        for li in dict.fromkeys(ds.layers):
            group = [t for t, x in zip(ds.tensors, ds.layers, strict=True) if x == li]
            for th in thetas:
                layers.append((ds.name, li, th, delta_sparsity(group, th, mode=cfg.mode, **enc)))
        channels[ds.name] = channel_sparsity(ds.tensors, probe, mode=cfg.mode, **enc)
    return DeltaStudyResult(
        config=cfg,
        rows=tuple(rows),
        fits=tuple(fits),
        layer_sparsity=tuple(layers),
        channel_sparsity=channels,
        passages=tuple(passages),
        notes=tuple(notes),
    )


def _datasets(
    cfg: DeltaStudyConfig, rng: np.random.Generator, say: Progress
) -> tuple[list[_Dataset], list[tuple[str, str, int]], list[str]]:
    """The configured data sets, their passages and the notes that describe them."""
    datasets: list[_Dataset] = []
    passages: list[tuple[str, str, int]] = []
    notes: list[str] = []
    py = sys.version.split()[0]
    if "real" in cfg.data:
        r = cfg.real
        say(f"real: {r.model} q, k, v on {r.passages} pydoc passage(s) of {r.tokens} tokens")
        ds, ps = _real_dataset(cfg)
        datasets.append(ds)
        passages += ps
        t0 = ds.tensors[0]
        notes.append(
            f"{r.model}: a causal decoder's post-RoPE keys and queries ({t0.q.shape[0]} query / "
            f"{t0.k.shape[0]} KV heads of {t0.q.shape[2]}, GQA group {t0.group}), layers "
            f"{sorted(set(ds.layers))}, INT8 per (layer, head, passage)"
        )
        notes.append(f"{r.model}: passages from pydoc_data.topics of Python {py}: "
                     + ", ".join(f"{t} ({n} tokens)" for _, t, n in ps))  # fmt: skip
    if "minilm" in cfg.data:
        m = cfg.minilm
        say(f"minilm: MiniLM q, k, v on {m.passages} pydoc passage(s) of {m.tokens}")
        ds, ps = _minilm_dataset(cfg)
        datasets.append(ds)
        passages += ps
        notes.append(
            "minilm: all-MiniLM-L6-v2 is a bidirectional encoder with absolute positions: no "
            "RoPE; each of its 12 heads is its own KV head (GQA group 1); the DeltaLLM "
            "datapath applies its causal mask to it"
        )
        notes.append(f"minilm: passages from pydoc_data.topics of Python {py}: "
                     + ", ".join(f"{t} ({n} tokens)" for _, t, n in ps))  # fmt: skip
    if "synthetic" in cfg.data:
        datasets += _synthetic_datasets(cfg, rng)
        s = cfg.synthetic
        notes.append(
            f"synthetic: {'post' if s.rope else 'pre'}-RoPE keys, key AR(1) coefficient "
            f"{s.key_ar}, query {s.query_ar}, value {s.value_ar}, {s.outlier_channels} outlier "
            f"channels x[{s.outlier_scale_min}, {s.outlier_scale_max}], seed {cfg.seed}"
        )
    return datasets, passages, notes


def rows_as_dicts(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Dataclass rows (:class:`DeltaRow`, :class:`ThetaFit`) as plain dicts in field order."""
    return [dataclasses.asdict(r) for r in rows]
