"""Accuracy as a sweep objective: each distinct number-format setting scored once, cached.

A point's number formats are its architecture's ``formats.weight`` and ``formats.activation``
(for the HBQ ASIC: format name, element bits, block size, micro-block size, L2 scheme and bits,
scale bits). Only parameters under ``formats.`` change them, so the points of a sweep share a
handful of settings. Each setting is scored by the accuracy study
(:func:`coaccel.studies.quant.study_operand_formats`): ``accuracy_sqnr_db`` is the SQNR of
the quantized GEMM outputs ``Q(A)·Q(W)ᵀ`` against float64 (dB; real data: pooled over
all-MiniLM-L6-v2's 36 linear layers with activations from its float forward pass), and
``accuracy_loss_db`` is how far that falls below the base architecture's formats (dB; positive
is worse). Scores are cached in the store's ``accuracy`` table under a digest of the setting
and the study settings, so a rerun, a resumed or a larger sweep does not run the study again.

With ``measure: perplexity`` (:class:`PerplexityScorer`) a setting is scored on a real LM
instead: SmolLM2-135M or Gemma-3-270M in numpy (:mod:`coaccel.models.nn`) with the weight,
activation and KV-cache formats in its forward pass, on fixed windows of real text, giving
``perplexity`` with its spread over the windows, the increase over the unquantized model and the
top-1 agreement with it; each metric is cached under its own key. :func:`make_scorer` picks
the scorer of a block.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import __version__
from .spec import ACCURACY_METRICS, PERPLEXITY_METRICS, SQNR_METRICS, AccuracySpec
from .store import Store

__all__ = [
    "ACCURACY_METRICS",
    "FORMAT_PREFIX",
    "AccuracyScorer",
    "PerplexityScorer",
    "format_setting",
    "make_scorer",
]

FORMAT_PREFIX = "formats."
"""Parameters under this prefix change a point's number formats."""

_ROLES = ("weight", "activation")


def format_setting(arch: Any) -> dict[str, Any]:
    """An architecture's number-format setting: its weight and activation format fields.

    Args:
        arch: an architecture config with ``formats.weight`` and ``formats.activation``.

    Returns:
        ``{"weight": {...}, "activation": {...}}``, each the format's fields without its
        ``source`` text.
    """
    from ..spine.config import dump_config

    out = {}
    for role in _ROLES:
        d = dump_config(getattr(arch.formats, role))
        d.pop("source", None)
        out[role] = d
    return out


def _study_config(acc: AccuracySpec) -> Any:
    from ..studies.quant import QuantStudyConfig, RealDataConfig, SyntheticDataConfig

    return QuantStudyConfig(
        formats=("fp32",),
        data=(acc.data,),  # type: ignore[arg-type]
        seed=acc.seed,
        psum_mode=acc.psum_mode,
        synthetic=SyntheticDataConfig(
            distributions=(acc.distribution,),
            tokens=acc.tokens,
            in_features=acc.in_features,
            out_features=acc.out_features,
        ),
        real=RealDataConfig(n_sentences=acc.n_sentences),
    )


class AccuracyScorer:
    """Scores the format settings of a sweep's points, through the store's cache.

    Args:
        base_path: the base architecture (file or shipped name).
        accuracy: the study settings (``data`` resolved to ``real`` or ``synthetic``).
        store: the store holding the cache.
    """

    def __init__(self, base_path: str, accuracy: AccuracySpec, store: Store) -> None:
        from ..simulation import find_arch

        if accuracy.data not in ("real", "synthetic"):
            raise ValueError(f"accuracy.data must be resolved, got {accuracy.data!r}")
        self.accuracy = accuracy
        self._store = store
        t, path = find_arch(base_path)
        if t.operand_format is None:
            raise ValueError(f"target kind {t.kind!r} has no operand formats to score")
        self._operand_format = t.operand_format
        self._base = t.load_arch(path)
        self._memo: dict[tuple[tuple[str, Any], ...], float] = {}
        self._failed: dict[tuple[tuple[str, Any], ...], Exception] = {}
        self._settings = dataclasses.asdict(accuracy)
        self.studies_run = 0
        self.base_sqnr_db = self._score({})

    def key(self, setting: Mapping[str, Any]) -> str:
        """Cache key of a format setting under these study settings (64 hex digits)."""
        text = json.dumps({"formats": setting, "study": self._settings}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def _score(self, fmt_params: Mapping[str, Any]) -> float:
        memo_key = tuple(sorted(fmt_params.items()))
        if memo_key in self._memo:
            return self._memo[memo_key]
        if memo_key in self._failed:  # the same setting fails the same way: do not rerun
            raise self._failed[memo_key]
        try:
            value = self._compute(fmt_params)
        except Exception as e:
            self._failed[memo_key] = e
            raise
        self._memo[memo_key] = value
        return value

    def _compute(self, fmt_params: Mapping[str, Any]) -> float:
        from ..spine.config import override
        from ..studies.quant import study_operand_formats

        arch = override(self._base, dict(fmt_params)) if fmt_params else self._base
        setting = format_setting(arch)
        key = self.key(setting)
        hit = self._store.accuracy(key)
        if hit is not None:
            value = hit[0]
        else:
            t0 = time.perf_counter()
            w, a = (self._operand_format(arch, r) for r in _ROLES)
            for role, spec in zip(_ROLES, (w, a), strict=True):
                if not hasattr(spec, "quantize_blocks"):
                    raise ValueError(
                        f"accuracy: formats.{role} ({getattr(arch.formats, role).format!r}) is "
                        "not a registered block format the study can quantize"
                    )
            cfg = _study_config(self.accuracy)
            res = study_operand_formats(
                "point", w, a, cfg, rng=np.random.default_rng(self.accuracy.seed)
            )
            data = "minilm" if self.accuracy.data == "real" else self.accuracy.distribution
            value = float(res.row("point", data, "gemm").sqnr_db)
            self.studies_run += 1
            self._store.add_accuracy(
                key,
                setting,
                self._settings,
                self.accuracy.data,
                value,
                time.perf_counter() - t0,
                __version__,
            )
        return value

    def metrics(self, params: Mapping[str, Any]) -> dict[str, tuple[float, str]]:
        """The accuracy metrics of a point.

        Args:
            params: the point's parameters (dotted key -> value); only ``formats.*`` matter.

        Returns:
            ``{"accuracy_sqnr_db": (dB, "dB"), "accuracy_loss_db": (dB, "dB")}``.
        """
        fmt = {k: v for k, v in params.items() if k.startswith(FORMAT_PREFIX)}
        sqnr = self._score(fmt)
        return {
            "accuracy_sqnr_db": (sqnr, SQNR_METRICS["accuracy_sqnr_db"]),
            "accuracy_loss_db": (self.base_sqnr_db - sqnr, SQNR_METRICS["accuracy_loss_db"]),
        }


class PerplexityScorer:
    """Scores format settings by a real decoder's perplexity, through the store's cache.

    The decoder (``accuracy.model``) is loaded once; the text is
    :func:`coaccel.models.nn.pydoc_text`, tokenized and cut into ``accuracy.windows``
    consecutive windows of ``accuracy.window_tokens`` tokens, each scored by one prefill (a
    window's first token is scored by none, as in any prefill). A setting's weight, activation
    and (with ``accuracy.kv``) KV formats go into the forward pass through
    :meth:`~coaccel.models.nn.Decoder.with_numerics`. Each metric of each setting is cached in
    the store under its own key, so a rerun, a resumed or a larger sweep scores nothing twice.

    Args:
        base_path: the base architecture (file or shipped name).
        accuracy: the study settings (``measure: perplexity``).
        store: the store holding the cache.
    """

    def __init__(self, base_path: str, accuracy: AccuracySpec, store: Store) -> None:
        from ..simulation import find_arch

        self.accuracy = accuracy
        self._store = store
        t, path = find_arch(base_path)
        if t.operand_format is None:
            raise ValueError(f"target kind {t.kind!r} has no operand formats to score")
        self._operand_format = t.operand_format
        self._base = t.load_arch(path)
        self._settings = dataclasses.asdict(accuracy)
        self._memo: dict[tuple[tuple[str, Any], ...], dict[str, float]] = {}
        self._failed: dict[tuple[tuple[str, Any], ...], Exception] = {}
        self._model: Any = None
        self._windows: list[np.ndarray] = []
        self._float: tuple[float, np.ndarray] | None = None
        self.studies_run = 0

    def _load(self) -> None:
        from ..models.nn import load_decoder, pydoc_text

        acc = self.accuracy
        need = acc.windows * acc.window_tokens
        self._model = load_decoder(acc.model)
        ids = self._model.tokenize(pydoc_text(max_chars=8 * need + 1000))
        if ids.shape[0] < need:
            raise ValueError(
                f"accuracy: the text has {ids.shape[0]} {acc.model} tokens; windows x "
                f"window_tokens asks for {need}"
            )
        self._windows = [ids[i * acc.window_tokens : (i + 1) * acc.window_tokens]
                         for i in range(acc.windows)]  # fmt: skip

    def _evaluate(self, model: Any) -> tuple[np.ndarray, np.ndarray]:
        """Per-window mean NLL (nats) and the top-1 predictions of every scored position."""
        nll, top = [], []
        for w in self._windows:
            logits = np.asarray(model.logits(w), dtype=np.float64)[:-1]
            mx = logits.max(axis=-1)
            lse = mx + np.log(np.exp(logits - mx[:, None]).sum(axis=-1))
            nll.append(float(np.mean(lse - logits[np.arange(len(w) - 1), w[1:]])))
            top.append(logits.argmax(axis=-1))
        return np.asarray(nll), np.concatenate(top)

    def _numerics(self, arch: Any) -> Any:
        from ..models.nn import Numerics, OperandFormat

        roles = {"weights": "weight", "activations": "activation"}
        if self.accuracy.kv and getattr(arch.formats, "kv", None) is not None:
            roles["kv"] = "kv"
        fmts: dict[str, Any] = {}
        for field, role in roles.items():
            spec = self._operand_format(arch, role)
            if not hasattr(spec, "quantize_blocks"):
                raise ValueError(
                    f"accuracy: formats.{role} ({getattr(arch.formats, role).format!r}) is not "
                    "a registered block format the decoder can quantize"
                )
            fmts[field] = OperandFormat(spec)
        return Numerics(**fmts)

    def _compute(self, fmt_params: Mapping[str, Any]) -> dict[str, float]:
        from ..spine.config import override

        arch = override(self._base, dict(fmt_params)) if fmt_params else self._base
        setting = format_setting(arch)
        keys = {
            m: hashlib.sha256(
                json.dumps(
                    {"formats": setting, "study": self._settings, "metric": m}, sort_keys=True
                ).encode()
            ).hexdigest()
            for m in PERPLEXITY_METRICS
        }
        hits = {m: self._store.accuracy(k) for m, k in keys.items()}
        if all(h is not None for h in hits.values()):
            return {m: h[0] for m, h in hits.items() if h is not None}
        t0 = time.perf_counter()
        if self._model is None:
            self._load()
        if self._float is None:
            f_nll, f_top = self._evaluate(self._model)
            self._float = (float(np.exp(f_nll.mean())), f_top)
        nll, top = self._evaluate(self._model.with_numerics(self._numerics(arch)))
        ppl = float(np.exp(nll.mean()))
        values = {
            "perplexity": ppl,
            "perplexity_std": float(np.std(np.exp(nll), ddof=1)),
            "perplexity_increase_pct": (ppl / self._float[0] - 1.0) * 100.0,
            "top1_agreement": float(np.mean(top == self._float[1])),
        }
        self.studies_run += 1
        elapsed = time.perf_counter() - t0
        for m, k in keys.items():
            self._store.add_accuracy(
                k, setting, {**self._settings, "metric": m}, "real", values[m], elapsed,
                __version__,
            )  # fmt: skip
        return values

    def metrics(self, params: Mapping[str, Any]) -> dict[str, tuple[float, str]]:
        """The perplexity metrics of a point (:data:`PERPLEXITY_METRICS`).

        Args:
            params: the point's parameters (dotted key -> value); only ``formats.*`` matter.

        Returns:
            metric -> (value, unit).

        Raises:
            Exception: what scoring the point's setting raised (the same for every point of
                that setting; it is not rerun).
        """
        fmt = {k: v for k, v in params.items() if k.startswith(FORMAT_PREFIX)}
        memo_key = tuple(sorted(fmt.items()))
        if memo_key in self._failed:
            raise self._failed[memo_key]
        if memo_key not in self._memo:
            try:
                self._memo[memo_key] = self._compute(fmt)
            except Exception as e:
                self._failed[memo_key] = e
                raise
        return {m: (v, PERPLEXITY_METRICS[m]) for m, v in self._memo[memo_key].items()}


def make_scorer(base_path: str, accuracy: AccuracySpec, store: Store) -> Any:
    """The scorer of an accuracy block: :class:`AccuracyScorer` (SQNR) or
    :class:`PerplexityScorer`.

    Args:
        base_path: the base architecture (file or shipped name).
        accuracy: the block, ``data`` resolved.
        store: the store holding the cache.

    Returns:
        An object with ``metrics(params) -> {metric: (value, unit)}``.
    """
    if accuracy.measure == "perplexity":
        return PerplexityScorer(base_path, accuracy, store)
    return AccuracyScorer(base_path, accuracy, store)
