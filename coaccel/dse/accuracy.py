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
from .spec import ACCURACY_METRICS, AccuracySpec
from .store import Store

__all__ = ["ACCURACY_METRICS", "FORMAT_PREFIX", "AccuracyScorer", "format_setting"]

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
            "accuracy_sqnr_db": (sqnr, ACCURACY_METRICS["accuracy_sqnr_db"]),
            "accuracy_loss_db": (self.base_sqnr_db - sqnr, ACCURACY_METRICS["accuracy_loss_db"]),
        }
