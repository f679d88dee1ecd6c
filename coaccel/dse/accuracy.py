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
instead: SmolLM2-135M or Gemma-3-270M in numpy (:mod:`coaccel.models.nn`) with the point's
numerics in its forward pass, on fixed windows of real text, giving ``perplexity`` with its
spread over the windows, the increase over the float model with exact attention and the top-1
agreement with it; each metric is cached under its own key. What a point changes comes from its
target through one hook, :attr:`coaccel.spine.target.SimTarget.accuracy_variant` (an
:class:`~coaccel.spine.target.AccuracyVariant`: setting, decoder transform, prefill or decode
scoring): the DeltaLLM datapath's attention (:mod:`coaccel.targets.deltallm_fpga.accuracy`), FFD's
block selection in decode steps (:mod:`coaccel.targets.gpu.accuracy`); a target with operand
formats and no hook gets :func:`format_variant` (weight, activation and KV formats through
``Decoder.with_numerics``). :func:`make_scorer` picks the scorer of a block.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .. import __version__
from ..spine.target import AccuracyVariant
from .spec import (
    ACCURACY_ADDED,
    ACCURACY_METRICS,
    PERPLEXITY_METRICS,
    SQNR_METRICS,
    AccuracySpec,
)
from .store import Store

__all__ = [
    "ACCURACY_METRICS",
    "FORMAT_PREFIX",
    "AccuracyScorer",
    "PerplexityScorer",
    "format_setting",
    "format_variant",
    "make_scorer",
]

FORMAT_PREFIX = "formats."
"""Parameters under this prefix change a point's number formats."""

_ROLES = ("weight", "activation")


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Score with one BLAS thread: the same sums in the same order whatever the machine's core
    count, so a cached score does not depend on where it was computed (and on a busy machine
    one thread is also the fastest). Without threadpoolctl installed, BLAS keeps its threads."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


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

    def metrics(
        self, params: Mapping[str, Any], workload: str = ""
    ) -> dict[str, tuple[float, str]]:
        """The accuracy metrics of a point.

        Args:
            params: the point's parameters (dotted key -> value); only ``formats.*`` matter.
            workload: the point's workload (unused: the GEMM study does not depend on it).

        Returns:
            ``{"accuracy_sqnr_db": (dB, "dB"), "accuracy_loss_db": (dB, "dB")}``.
        """
        fmt = {k: v for k, v in params.items() if k.startswith(FORMAT_PREFIX)}
        sqnr = self._score(fmt)
        return {
            "accuracy_sqnr_db": (sqnr, SQNR_METRICS["accuracy_sqnr_db"]),
            "accuracy_loss_db": (self.base_sqnr_db - sqnr, SQNR_METRICS["accuracy_loss_db"]),
        }


def _format_numerics(arch: Any, operand_format: Callable[..., Any], kv: bool) -> Any:
    """The :class:`~coaccel.models.nn.Numerics` of an architecture's weight, activation and
    (with ``kv``, where it has one) KV formats."""
    from ..models.nn import Numerics, OperandFormat

    fmts: dict[str, Any] = {}
    for field, role in _numerics_roles(arch, kv).items():
        spec = operand_format(arch, role)
        if not hasattr(spec, "quantize_blocks"):
            raise ValueError(
                f"accuracy: formats.{role} ({getattr(arch.formats, role).format!r}) is not "
                "a registered block format the decoder can quantize"
            )
        fmts[field] = OperandFormat(spec)
    return Numerics(**fmts)


def _numerics_roles(arch: Any, kv: bool) -> dict[str, str]:
    """Decoder numerics field -> format role of the operands a format variant quantizes."""
    roles = {"weights": "weight", "activations": "activation"}
    if kv and getattr(arch.formats, "kv", None) is not None:
        roles["kv"] = "kv"
    return roles


def format_variant(
    arch: Any,
    workload: str | None = None,
    *,
    operand_format: Callable[..., Any],
    kv: bool = True,
) -> AccuracyVariant:
    """The accuracy variant of a target whose number formats are its only accuracy lever.

    The perplexity scorer uses it for a target that declares operand formats
    (:attr:`~coaccel.spine.target.SimTarget.operand_format`) and no accuracy hook of its own:
    the point's weight, activation and (with ``kv``) KV-cache formats quantize the decoder's
    forward pass (:meth:`~coaccel.models.nn.Decoder.with_numerics`), scored by one prefill per
    window.

    Args:
        arch: the point's architecture (``formats.weight``, ``formats.activation``, optionally
            ``formats.kv``).
        workload: the point's workload (unused: formats do not depend on it).
        operand_format: the target's ``operand_format(arch, role)``.
        kv: also quantize the KV cache in ``formats.kv`` where the architecture has one.

    Returns:
        The variant: setting :func:`format_setting` (with the KV format's fields under
        ``"kv"`` when it is quantized), ``mode="prefill"``.
    """
    del workload
    setting = format_setting(arch)
    if "kv" in _numerics_roles(arch, kv):
        from ..spine.config import dump_config

        d = dump_config(arch.formats.kv)
        d.pop("source", None)
        setting["kv"] = d

    def transform(model: Any) -> Any:
        return model.with_numerics(_format_numerics(arch, operand_format, kv))

    label = ", ".join(f"{r} {getattr(arch.formats, r).format}" for r in setting)
    return AccuracyVariant(setting, transform, mode="prefill", label=label)


class PerplexityScorer:
    """Scores what design points change in a real decoder by its perplexity, through the
    store's cache.

    What a point changes comes from its target: the target's accuracy hook
    (:attr:`~coaccel.spine.target.SimTarget.accuracy_variant`, e.g. the DeltaLLM datapath's
    attention or FFD's block selection) or, for a target with operand formats and no hook,
    :func:`format_variant`. Each gives a setting (the cache key: only what changes the
    numerics), a transform of the decoder and a scoring mode. The decoder (``accuracy.model``)
    is loaded once; the text is :func:`coaccel.models.nn.pydoc_text`, tokenized and cut into
    ``accuracy.windows`` consecutive windows of ``accuracy.window_tokens`` tokens. In
    ``prefill`` mode each window is scored by one prefill (its first token by none); in
    ``decode`` mode its last ``accuracy.decode_tokens`` tokens are scored by teacher-forced
    decode steps after a prefill of the rest. The reference is the float model with exact
    attention on the same positions (one prefill per window). Each metric of each setting is
    cached in the store under its own key, so a rerun, a resumed or a larger sweep scores
    nothing twice; a setting that fails is not retried within the run.

    Args:
        base_path: the base architecture (file or shipped name).
        accuracy: the study settings (``measure: perplexity``).
        store: the store holding the cache.
        variant: ``variant(arch, workload) -> AccuracyVariant`` to use instead of the target's
            (a study of another numerics mode, a test); None: the target's.

    Raises:
        ValueError: the target has neither an accuracy hook nor operand formats.
    """

    def __init__(
        self,
        base_path: str,
        accuracy: AccuracySpec,
        store: Store,
        *,
        variant: Callable[..., AccuracyVariant] | None = None,
    ) -> None:
        from ..simulation import find_arch

        self.accuracy = accuracy
        self._store = store
        t, path = find_arch(base_path)
        self._operand_format = t.operand_format
        if variant is None and t.accuracy_variant is not None:
            variant = t.accuracy_variant
        if variant is None:
            if t.operand_format is None:
                raise ValueError(
                    f"target kind {t.kind!r} has no accuracy hook and no operand formats to score"
                )
            variant = functools.partial(
                format_variant, operand_format=t.operand_format, kv=accuracy.kv
            )
        self._variant = variant
        self._base = t.load_arch(path)
        self._settings = dataclasses.asdict(accuracy)
        self._points: dict[str, str] = {}  # point (params, workload) -> setting id
        self._point_failed: dict[str, Exception] = {}
        self._variants: dict[str, AccuracyVariant] = {}
        self._memo: dict[str, dict[str, float]] = {}
        self._failed: dict[str, Exception] = {}
        self._model: Any = None
        self._windows: list[np.ndarray] = []
        self._float: tuple[np.ndarray, np.ndarray] | None = None
        self.studies_run = 0

    def _numerics(self, arch: Any) -> Any:
        """The decoder numerics of an architecture's formats (the format variant's)."""
        if self._operand_format is None:
            raise ValueError("the target has no operand formats")
        return _format_numerics(arch, self._operand_format, self.accuracy.kv)

    def variant(self, params: Mapping[str, Any], workload: str = "") -> AccuracyVariant:
        """The accuracy variant of a point (its setting, transform and mode).

        Args:
            params: the point's parameters (dotted key -> value).
            workload: the point's workload string.

        Returns:
            The :class:`~coaccel.spine.target.AccuracyVariant`.

        Raises:
            Exception: what applying the parameters or the hook raised.
        """
        from ..spine.config import override

        arch = override(self._base, dict(params)) if params else self._base
        return self._variant(arch, workload)

    def study_settings(self, mode: str) -> dict[str, Any]:
        """The study settings a setting's cache keys include in a scoring mode: the accuracy
        block, without the keys of :data:`~coaccel.dse.spec.ACCURACY_ADDED` the mode does not
        use while they hold their default (so earlier stores' keys stay valid)."""
        out = dict(self._settings)
        if mode == "prefill":
            for key, default in ACCURACY_ADDED.items():
                if out.get(key) == default:
                    del out[key]
        return out

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

    def _scored(self, mode: str) -> slice:
        """The positions of a window's next-token scores (``T - 1`` of them) a mode scores."""
        if mode == "decode":
            return slice(self.accuracy.window_tokens - 1 - self.accuracy.decode_tokens, None)
        return slice(None)

    def _prefill(self, model: Any) -> tuple[np.ndarray, np.ndarray]:
        """``[windows, T - 1]`` NLL (nats) and top-1 prediction of every position, one prefill
        per window."""
        nll, top = [], []
        for w in self._windows:
            logits = np.asarray(model.logits(w), dtype=np.float64)[:-1]
            mx = logits.max(axis=-1)
            lse = mx + np.log(np.exp(logits - mx[:, None]).sum(axis=-1))
            nll.append(lse - logits[np.arange(len(w) - 1), w[1:]])
            top.append(logits.argmax(axis=-1))
        return np.asarray(nll), np.asarray(top)

    def _decode(self, model: Any) -> tuple[np.ndarray, np.ndarray]:
        """``[windows, decode_tokens]`` NLL and top-1 prediction of each window's last tokens,
        each scored by the logits of a teacher-forced decode step (a prefill of the rest
        first)."""
        d = self.accuracy.decode_tokens
        nll, top = [], []
        for w in self._windows:
            t = len(w)
            cache = model.new_cache(t)
            lg = model.forward(w[: t - d], cache, last_only=True)
            row_nll, row_top = [], []
            for i in range(t - d, t):
                x = np.asarray(lg, dtype=np.float64)
                mx = x.max()
                row_nll.append(float(mx + np.log(np.exp(x - mx).sum()) - x[w[i]]))
                row_top.append(int(x.argmax()))
                if i + 1 < t:
                    lg = model.decode_step(int(w[i]), cache)
            nll.append(row_nll)
            top.append(row_top)
        return np.asarray(nll), np.asarray(top)

    def _compute(self, v: AccuracyVariant) -> dict[str, float]:
        settings = self.study_settings(v.mode)
        keys = {
            m: hashlib.sha256(
                json.dumps(
                    {"formats": v.setting, "study": settings, "metric": m}, sort_keys=True
                ).encode()
            ).hexdigest()
            for m in PERPLEXITY_METRICS
        }
        hits = {m: self._store.accuracy(k) for m, k in keys.items()}
        if all(h is not None for h in hits.values()):
            return {m: h[0] for m, h in hits.items() if h is not None}
        t0 = time.perf_counter()
        with _one_blas_thread():
            if self._model is None:
                self._load()
            if self._float is None:
                self._float = self._prefill(self._model)
            scored = self._scored(v.mode)
            f_nll, f_top = (x[:, scored] for x in self._float)
            if v.transform is None:
                nll, top = f_nll, f_top
            else:
                model = v.transform(self._model)
                nll, top = self._decode(model) if v.mode == "decode" else self._prefill(model)
        win, f_win = nll.mean(axis=1), f_nll.mean(axis=1)
        ppl = float(np.exp(win.mean()))
        values = {
            "perplexity": ppl,
            "perplexity_std": float(np.std(np.exp(win), ddof=1)),
            "perplexity_increase_pct": (ppl / float(np.exp(f_win.mean())) - 1.0) * 100.0,
            # the same text windows under both models: the paired per-window increase varies
            # far less between windows than the perplexity itself
            "perplexity_increase_pct_std": float(np.std(np.expm1(win - f_win), ddof=1) * 100.0),
            "top1_agreement": float(np.mean(top == f_top)),
        }
        self.studies_run += 1
        elapsed = time.perf_counter() - t0
        for m, k in keys.items():
            self._store.add_accuracy(
                k, dict(v.setting), {**settings, "metric": m}, "real", values[m], elapsed,
                __version__,
            )  # fmt: skip
        return values

    def metrics(
        self, params: Mapping[str, Any], workload: str = ""
    ) -> dict[str, tuple[float, str]]:
        """The perplexity metrics of a point (:data:`PERPLEXITY_METRICS`).

        Args:
            params: the point's parameters (dotted key -> value); only those that change its
                accuracy setting matter.
            workload: the point's workload string (a target's hook may read its accuracy
                setting from it: the GPU target's FFD keep rule).

        Returns:
            metric -> (value, unit).

        Raises:
            Exception: what finding or scoring the point's setting raised (the same for every
                point of that setting; it is not rerun).
        """
        pkey = json.dumps([params, workload], sort_keys=True, default=str)
        if pkey in self._point_failed:
            raise self._point_failed[pkey]
        skey = self._points.get(pkey)
        if skey is None:
            try:
                v = self.variant(params, workload)
            except Exception as e:
                self._point_failed[pkey] = e
                raise
            skey = json.dumps([v.setting, v.mode], sort_keys=True, default=str)
            self._points[pkey] = skey
            self._variants.setdefault(skey, v)
        if skey in self._failed:
            raise self._failed[skey]
        if skey not in self._memo:
            try:
                self._memo[skey] = self._compute(self._variants[skey])
            except Exception as e:
                self._failed[skey] = e
                raise
        return {m: (v_, PERPLEXITY_METRICS[m]) for m, v_ in self._memo[skey].items()}


def make_scorer(base_path: str, accuracy: AccuracySpec, store: Store) -> Any:
    """The scorer of an accuracy block: :class:`AccuracyScorer` (SQNR) or
    :class:`PerplexityScorer`.

    Args:
        base_path: the base architecture (file or shipped name).
        accuracy: the block, ``data`` resolved.
        store: the store holding the cache.

    Returns:
        An object with ``metrics(params, workload) -> {metric: (value, unit)}``.
    """
    if accuracy.measure == "perplexity":
        return PerplexityScorer(base_path, accuracy, store)
    return AccuracyScorer(base_path, accuracy, store)
