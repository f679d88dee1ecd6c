"""The quantization accuracy study behind ``coaccel quant`` ([R-CFG], [R-PTQ], [OCP-MX]).

For every block format and every data source it measures how far quantized tensors, quantized
GEMM outputs and (for the real model) sentence embeddings are from their floating-point values:

* **Weights and activations**: SQNR (dB) and MSE of ``dequantize(quantize(x))`` against ``x``,
  weights ``(out, in)`` and activations ``(tokens, in)`` both blocked along ``in``, the
  reduction axis ([R-PTQ]). HBQ formats quantize weights with ``role="weight"`` and activations
  with ``role="activation"``.
* **GEMM**: ``Y = Q(A)·Q(W)ᵀ`` computed by the formats' GEMM (HBQ: the HBQ datapath with the
  configured partial-sum mode, ``"fp32"`` by default as in the paper's accuracy results; other
  block formats: the generic block GEMM) against the float64 product ``A·Wᵀ``.
* **Effective bits per element** of weights and activations (scales and side bits included).
* **Real model** (all-MiniLM-L6-v2 on the hand-written corpus): the same three measurements
  pooled over all 36 linear layers, with activations captured from the floating-point forward
  pass, plus the cosine similarity of the sentence embeddings against the floating-point model
  when *every* linear layer quantizes its weights and its (dynamically quantized, per call)
  activations.

``"fp32"`` is a reference pseudo-format: tensors are rounded to float32 and the GEMM is a
float32 matrix product. It is not a block format, so it takes no ``role``.

This module computes only; :mod:`coaccel.report.quant` formats, writes and plots.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from ..models import formats as fmts
from ..models.hbq import PSUM_MODES, block_gemm, hbq_gemm
from ..models.nn import synthetic as syn
from ..models.nn.sentences import SENTENCES, sentences
from ..spine.config import Problem, param
from ..spine.errors import MissingDependencyError

__all__ = [
    "DATA_SOURCES",
    "DEFAULT_FORMATS",
    "KINDS",
    "REFERENCE_FORMAT",
    "QuantRow",
    "QuantStudyConfig",
    "QuantStudyResult",
    "RealDataConfig",
    "SyntheticDataConfig",
    "error_energy",
    "is_hbq",
    "rows_as_dicts",
    "run_quant_study",
    "sqnr_db",
    "study_operand_formats",
    "valid_formats",
]

REFERENCE_FORMAT = "fp32"
"""The float32 reference row: not a block format, handled by the study itself."""

DEFAULT_FORMATS = (
    REFERENCE_FORMAT,
    "hbq-a",
    "hbq-e",
    "nvfp4",
    "nvfp4_e5m3",
    "mxfp4",
    "mxfp6_e2m3",
    "mxfp8_e4m3",
    "mxint8",
)
"""The formats of the default study (the paper's Table 9 comparison, [R-README], plus wider MX)."""

DATA_SOURCES = ("synthetic", "real")
"""``synthetic``: seeded tensors (:mod:`coaccel.models.nn.synthetic`); ``real``: MiniLM."""

KINDS = ("weight", "activation", "gemm", "embedding")
"""What a result row measures; ``embedding`` rows exist for the real model only."""

REAL_MODEL = "minilm"
"""The ``data`` name of the real-model rows."""

Progress = Callable[[str], None]


def valid_formats() -> tuple[str, ...]:
    """Every format name the study accepts: the registered block formats plus ``"fp32"``."""
    return (REFERENCE_FORMAT, *fmts.format_names())


def is_hbq(fmt: str) -> bool:
    """Whether a format is an HBQ format (the only ones that take ``role=``)."""
    return fmt.lower().startswith("hbq")


# ---------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class SyntheticDataConfig:
    """Synthetic GEMM problems ``A (tokens, in) · Wᵀ (in, out)``, one per distribution.

    Attributes:
        distributions: element distributions (see :mod:`coaccel.models.nn.synthetic`).
        tokens: activation rows.
        in_features: reduction dimension K (the blocking axis).
        out_features: weight rows N.
        student_t_df: Student-t degrees of freedom.
        weight_std: standard deviation of the weights.
        outlier_channels: activation channels scaled up (``student_t`` only).
        outlier_scale_min: smallest outlier factor.
        outlier_scale_max: largest outlier factor.
    """

    distributions: tuple[Literal["gaussian", "laplace", "student_t"], ...] = param(
        default=syn.DISTRIBUTIONS, doc="element distributions, one GEMM problem each"
    )
    tokens: int = param(default=128, ge=1, doc="activation rows")
    in_features: int = param(default=1024, ge=1, doc="reduction dimension K")
    out_features: int = param(default=1024, ge=1, doc="weight rows N")
    student_t_df: float = param(default=4.0, gt=2, doc="Student-t degrees of freedom")
    weight_std: float = param(default=0.02, gt=0, doc="weight standard deviation")
    outlier_channels: int = param(default=8, ge=0, doc="outlier activation channels")
    outlier_scale_min: float = param(default=10.0, ge=1, doc="smallest outlier factor")
    outlier_scale_max: float = param(default=100.0, ge=1, doc="largest outlier factor")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules."""
        out: list[Problem | str] = []
        if not self.distributions:
            out.append(Problem("", "distributions", (), "needs at least one distribution"))
        if len(set(self.distributions)) != len(self.distributions):
            out.append(Problem("", "distributions", self.distributions, "lists a name twice"))
        if self.outlier_channels > self.in_features:
            out.append(
                Problem(
                    "",
                    "outlier_channels",
                    self.outlier_channels,
                    f"must be <= in_features ({self.in_features})",
                )
            )
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
class RealDataConfig:
    """The real-model data: all-MiniLM-L6-v2 on the first ``n_sentences`` of the corpus.

    Attributes:
        n_sentences: sentences of :data:`coaccel.models.nn.SENTENCES` to run.
        dtype: floating-point precision of the unquantized parts of the model (and of the
            reference embeddings).
    """

    n_sentences: int = param(
        default=len(SENTENCES), ge=1, le=len(SENTENCES), doc="sentences of the built-in corpus"
    )
    dtype: Literal["float32", "float64"] = param(
        default="float32", doc="precision of the float parts and of the reference"
    )


@dataclass(frozen=True)
class QuantStudyConfig:
    """Configuration of the quantization accuracy study (``arch_configs/studies/``).

    Attributes:
        formats: formats to compare (see :func:`valid_formats`); ``fp32`` is the reference.
        data: data sources, ``synthetic`` and/or ``real``.
        seed: seed of the synthetic tensors.
        psum_mode: partial-sum accumulation of the HBQ GEMM (``docs/hbq_datapath.md``); the paper's
            accuracy results use ``fp32``.
        synthetic: the synthetic problems.
        real: the real-model run.
    """

    VERSION: ClassVar[int] = 1

    formats: tuple[str, ...] = param(default=DEFAULT_FORMATS, doc="formats to compare")
    data: tuple[Literal["synthetic", "real"], ...] = param(default=DATA_SOURCES, doc="data sources")
    seed: int = param(default=0, ge=0, doc="seed of the synthetic tensors")
    psum_mode: str = param(
        default="fp32", choices=PSUM_MODES, doc="HBQ partial-sum accumulation mode"
    )
    synthetic: SyntheticDataConfig = param(
        default=SyntheticDataConfig(), doc="synthetic GEMM problems"
    )
    real: RealDataConfig = param(default=RealDataConfig(), doc="real-model run")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: known, distinct formats; at least one data source."""
        out: list[Problem | str] = []
        valid = valid_formats()
        if not self.formats:
            out.append(Problem("", "formats", (), "needs at least one format"))
        seen: set[str] = set()
        for i, f in enumerate(self.formats):
            if f.lower() not in valid:
                out.append(
                    Problem(
                        "",
                        f"formats[{i}]",
                        f,
                        f"unknown format {f!r}; valid formats: {', '.join(valid)}",
                        ", ".join(valid),
                    )
                )
            if f.lower() in seen:
                out.append(Problem("", f"formats[{i}]", f, f"format {f!r} is listed twice"))
            seen.add(f.lower())
        if "synthetic" in self.data:
            # The HBQ GEMM needs whole L1 blocks along K (zero padding would change the scales'
            # meaning in hardware); other formats pad the tail as microxcaling does.
            for f in self.formats:
                if is_hbq(f) and f.lower() in valid:
                    block = fmts.resolve(f.lower(), role="weight").block
                    if self.synthetic.in_features % block:
                        out.append(
                            Problem(
                                "",
                                "synthetic.in_features",
                                self.synthetic.in_features,
                                f"must be a multiple of {block} (the L1 block of {f})",
                            )
                        )
                        break
        if not self.data:
            out.append(Problem("", "data", (), "needs at least one of: synthetic, real"))
        if len(set(self.data)) != len(self.data):
            out.append(Problem("", "data", self.data, "lists a source twice"))
        return out


# --------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class QuantRow:
    """One measurement: a format on one data source and one tensor kind.

    Attributes:
        format: format name (``fp32`` = float32 reference).
        source: ``synthetic`` or ``real``.
        data: distribution name (synthetic) or ``minilm`` (real).
        kind: ``weight``, ``activation``, ``gemm`` or ``embedding`` (see :data:`KINDS`).
        weight_bits_per_element: effective storage bits per weight element.
        activation_bits_per_element: effective storage bits per activation element.
        sqnr_db: signal-to-quantization-noise ratio, ``10·log10(Σx² / Σ(x̂−x)²)`` in dB, pooled
            over every element of every tensor (``inf`` when exact).
        sqnr_db_min: the worst single tensor's SQNR in dB (real model: worst of the 36 layers;
            equal to ``sqnr_db`` for one tensor).
        mse: mean squared error over all elements, in the tensor's units squared.
        rel_error: relative Frobenius error ``‖x̂−x‖ / ‖x‖`` (= 10^(−sqnr_db/20)).
        cosine_mean: mean cosine similarity of quantized vs float sentence embeddings
            (``embedding`` rows; NaN elsewhere).
        cosine_min: the worst sentence's cosine similarity (``embedding`` rows; NaN elsewhere).
        n_tensors: tensors pooled (1 for synthetic, 36 for the real model's layers).
        n_elements: elements pooled.
    """

    format: str
    source: str
    data: str
    kind: str
    weight_bits_per_element: float
    activation_bits_per_element: float
    sqnr_db: float
    sqnr_db_min: float
    mse: float
    rel_error: float
    cosine_mean: float
    cosine_min: float
    n_tensors: int
    n_elements: int


@dataclass(frozen=True, eq=False)
class QuantStudyResult:
    """The study's output: pure data.

    Attributes:
        config: the configuration that produced it.
        rows: one :class:`QuantRow` per format × data × kind, in format order, then data
            source, then kind.
        sentences: the sentences of the real-model run (empty without ``real``).
    """

    config: QuantStudyConfig
    rows: tuple[QuantRow, ...]
    sentences: tuple[str, ...] = ()

    def select(
        self,
        *,
        format: str | None = None,
        source: str | None = None,
        data: str | None = None,
        kind: str | None = None,
    ) -> tuple[QuantRow, ...]:
        """Rows matching every given field."""
        want = {"format": format, "source": source, "data": data, "kind": kind}
        return tuple(
            r for r in self.rows if all(v is None or getattr(r, k) == v for k, v in want.items())
        )

    def row(self, format: str, data: str, kind: str) -> QuantRow:
        """The single row of a format, data name and kind (``KeyError`` if absent)."""
        hits = self.select(format=format, data=data, kind=kind)
        if len(hits) != 1:
            raise KeyError(f"no single row for format={format!r}, data={data!r}, kind={kind!r}")
        return hits[0]


# --------------------------------------------------------------------------------- metrics
def error_energy(reference: npt.ArrayLike, approx: npt.ArrayLike) -> tuple[float, float, int]:
    """Signal and noise energies of an approximation, in float64.

    Args:
        reference: the exact values, any shape.
        approx: the approximation, same shape.

    Returns:
        ``(Σ reference², Σ (approx − reference)², number of elements)``.
    """
    r = np.asarray(reference, dtype=np.float64).ravel()
    a = np.asarray(approx, dtype=np.float64).ravel()
    if r.shape != a.shape:
        raise ValueError(f"shapes differ: {np.shape(reference)} vs {np.shape(approx)}")
    d = a - r
    # Pairwise summation in numpy (not BLAS dot): accurate, and free of BLAS thread start-up,
    # which costs more than the sum itself on a loaded machine.
    return float(np.sum(r * r)), float(np.sum(d * d)), int(r.size)


def _sqnr_from_energy(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def sqnr_db(reference: npt.ArrayLike, approx: npt.ArrayLike) -> float:
    """Signal-to-quantization-noise ratio in dB: ``10·log10(Σx² / Σ(x̂ − x)²)``.

    Args:
        reference: exact values ``x``.
        approx: quantized values ``x̂``, same shape.

    Returns:
        SQNR in dB; ``inf`` when ``x̂ == x`` exactly, ``-inf`` for a zero signal with noise.
    """
    signal, noise, _ = error_energy(reference, approx)
    return _sqnr_from_energy(signal, noise)


@dataclass
class _Pool:
    """Accumulates error energies over several tensors."""

    signal: float = 0.0
    noise: float = 0.0
    n: int = 0
    worst_db: float = math.inf
    tensors: int = 0

    def add(self, reference: np.ndarray, approx: np.ndarray) -> None:
        s, e, n = error_energy(reference, approx)
        self.signal += s
        self.noise += e
        self.n += n
        self.tensors += 1
        self.worst_db = min(self.worst_db, _sqnr_from_energy(s, e))

    def fields(self) -> dict[str, Any]:
        return {
            "sqnr_db": _sqnr_from_energy(self.signal, self.noise),
            "sqnr_db_min": self.worst_db,
            "mse": self.noise / self.n,
            "rel_error": math.sqrt(self.noise / self.signal) if self.signal else math.inf,
            "n_tensors": self.tensors,
            "n_elements": self.n,
        }


# ------------------------------------------------------------------------- format adapters
class _Runner:
    """Quantize / dequantize / GEMM for one format (block formats and the fp32 reference)."""

    def __init__(self, fmt: str, psum_mode: str) -> None:
        self.fmt = fmt.lower()
        self.psum_mode = psum_mode
        self.reference = self.fmt == REFERENCE_FORMAT

    def _options(self, role: str) -> dict[str, Any]:
        return {"role": role} if is_hbq(self.fmt) else {}

    def bits(self, role: str) -> float:
        if self.reference:
            return 32.0
        return float(fmts.resolve(self.fmt, **self._options(role)).bits_per_element())

    def quantize(self, x: np.ndarray, role: str) -> Any:
        if self.reference:
            return np.asarray(x, dtype=np.float32)
        return fmts.quantize(x, self.fmt, axis=-1, **self._options(role))

    def dequantize(self, q: Any) -> np.ndarray:
        if self.reference:
            return q.astype(np.float64)
        return q.dequantize(np.float64)

    def gemm(self, qa: Any, qw: Any) -> np.ndarray:
        """``Q(A) · Q(W)ᵀ``: ``(tokens, out)`` float64."""
        if self.reference:
            return (qa @ qw.T).astype(np.float64)
        if is_hbq(self.fmt):
            y = hbq_gemm(qa, qw, psum_mode=self.psum_mode).y
        else:
            y = block_gemm(qa, qw)
        return np.asarray(y, dtype=np.float64)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    num = np.einsum("ij,ij->i", a64, b64)
    return num / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))


def _row(runner: _Runner, source: str, data: str, kind: str, fields: dict[str, Any]) -> QuantRow:
    base: dict[str, Any] = {
        "format": runner.fmt,
        "source": source,
        "data": data,
        "kind": kind,
        "weight_bits_per_element": runner.bits("weight"),
        "activation_bits_per_element": runner.bits("activation"),
        "cosine_mean": math.nan,
        "cosine_min": math.nan,
    }
    base.update(fields)
    return QuantRow(**base)


# --------------------------------------------------------------------------------- the study
def _synthetic_rows(
    cfg: QuantStudyConfig, runners: list[_Runner], rng: np.random.Generator, progress: Progress
) -> list[QuantRow]:
    s = cfg.synthetic
    rows: list[QuantRow] = []
    for dist in s.distributions:
        pair = syn.synthetic_pair(
            rng,
            dist,
            tokens=s.tokens,
            in_features=s.in_features,
            out_features=s.out_features,
            df=s.student_t_df,
            weight_std=s.weight_std,
            n_outlier_channels=s.outlier_channels if dist == "student_t" else 0,
            outlier_scale_min=s.outlier_scale_min,
            outlier_scale_max=s.outlier_scale_max,
        )
        a, w = pair.activations, pair.weights
        y_ref = a @ w.T
        for r in runners:
            progress(f"synthetic/{dist}: {r.fmt}")
            qw = r.quantize(w, "weight")
            qa = r.quantize(a, "activation")
            pools = {k: _Pool() for k in ("weight", "activation", "gemm")}
            pools["weight"].add(w, r.dequantize(qw))
            pools["activation"].add(a, r.dequantize(qa))
            pools["gemm"].add(y_ref, r.gemm(qa, qw))
            rows += [_row(r, "synthetic", dist, k, p.fields()) for k, p in pools.items()]
    return rows


@functools.lru_cache(maxsize=2)
def _model(dtype: str) -> Any:
    from ..models.nn.minilm import load_minilm

    try:
        return load_minilm(np.dtype(dtype))
    except ModuleNotFoundError as exc:
        raise MissingDependencyError(str(exc)) from None


def _quantized_embeddings(
    r: _Runner,
    model: Any,
    ids: np.ndarray,
    mask: np.ndarray,
    qweights: dict[str, Any],
) -> np.ndarray:
    """Sentence embeddings with every linear layer quantized (weights and activations)."""
    valid = mask.astype(bool)
    # Activations are quantized dynamically at each call, real tokens only: padding must not
    # influence per-tensor scales such as NVFP4's. q/k/v share one input: quantize it once.
    last: list[Any] = [None, None]

    def qlinear(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        if last[0] is not x:
            last[0], last[1] = x, r.quantize(x[valid], "activation")
        y = np.zeros(x.shape[:-1] + (w.shape[0],), dtype=x.dtype)
        y[valid] = r.gemm(last[1], qweights[name]) + b
        return y

    return model.pool(model.forward(ids, mask, linear=qlinear), mask)


def _real_rows(
    cfg: QuantStudyConfig, runners: list[_Runner], progress: Progress
) -> tuple[list[QuantRow], tuple[str, ...]]:
    model = _model(cfg.real.dtype)
    sents = sentences(cfg.real.n_sentences)
    ids, mask = model.tokenize(sents)
    valid = mask.astype(bool)
    # Float forward pass: capture every linear layer's real-token inputs and its parameters.
    captured: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def capture(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        captured[name] = (x[valid], w)
        return x @ w.T + b

    ref_emb = model.pool(model.forward(ids, mask, linear=capture), mask)
    # The float64 references, computed once for all formats.
    y_ref = {
        name: x.astype(np.float64) @ w.astype(np.float64).T for name, (x, w) in captured.items()
    }
    rows: list[QuantRow] = []
    for r in runners:
        progress(f"real/{REAL_MODEL}: {r.fmt}")
        pools = {k: _Pool() for k in ("weight", "activation", "gemm")}
        qweights: dict[str, Any] = {}
        for name, (x, w) in captured.items():
            qw = qweights[name] = r.quantize(w, "weight")
            qa = r.quantize(x, "activation")
            pools["weight"].add(w, r.dequantize(qw))
            pools["activation"].add(x, r.dequantize(qa))
            pools["gemm"].add(y_ref[name], r.gemm(qa, qw))
        rows += [_row(r, "real", REAL_MODEL, k, p.fields()) for k, p in pools.items()]

        emb = _quantized_embeddings(r, model, ids, mask, qweights)
        cos = _cosine(emb, ref_emb)
        pool = _Pool()
        pool.add(ref_emb, emb)
        fields = pool.fields() | {
            "cosine_mean": float(cos.mean()),
            "cosine_min": float(cos.min()),
        }
        rows.append(_row(r, "real", REAL_MODEL, "embedding", fields))
    return rows, sents


def run_quant_study(
    cfg: QuantStudyConfig,
    *,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> QuantStudyResult:
    """Run the quantization accuracy study.

    Args:
        cfg: the study configuration (validated again here, so hand-built configs are safe).
        rng: random generator for the synthetic tensors (the CLI seeds it with ``cfg.seed``).
        progress: optional callback receiving one short line per step (the CLI prints them).

    Returns:
        The :class:`QuantStudyResult` (rows in format order, then synthetic distributions,
        then the real model; kinds weight, activation, gemm[, embedding]).

    Raises:
        ConfigError: the configuration breaks a rule (unknown format, ...).
        MissingDependencyError: ``real`` was asked for and the model package is missing.
    """
    from ..spine.config import override

    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    cfg = override(cfg, {})  # re-validates, including cfg.validate()
    say = progress or (lambda _msg: None)
    runners = [_Runner(f, cfg.psum_mode) for f in cfg.formats]
    rows: list[QuantRow] = []
    sents: tuple[str, ...] = ()
    if "synthetic" in cfg.data:
        rows += _synthetic_rows(cfg, runners, rng, say)
    if "real" in cfg.data:
        real_rows, sents = _real_rows(cfg, runners, say)
        rows += real_rows
    order = {f.lower(): i for i, f in enumerate(cfg.formats)}
    rows.sort(key=lambda r: order[r.format])  # stable: keeps data and kind order
    return QuantStudyResult(config=cfg, rows=tuple(rows), sentences=sents)


def rows_as_dicts(rows: Iterable[QuantRow]) -> list[dict[str, Any]]:
    """Rows as plain dicts in field order (for reports and notebooks)."""
    return [dataclasses.asdict(r) for r in rows]


class _SpecRunner(_Runner):
    """A :class:`_Runner` for one weight / activation pair of resolved format specs."""

    def __init__(self, label: str, weight: Any, activation: Any, psum_mode: str) -> None:
        super().__init__(label, psum_mode)
        self.fmt = label
        self.reference = False
        self._specs = {"weight": weight, "activation": activation}
        names = [str(getattr(s, "name", "")).lower() for s in (weight, activation)]
        self._hbq = all(is_hbq(n) for n in names)

    def bits(self, role: str) -> float:
        return float(self._specs[role].bits_per_element())

    def quantize(self, x: np.ndarray, role: str) -> Any:
        return fmts.quantize(x, self._specs[role], axis=-1)

    def gemm(self, qa: Any, qw: Any) -> np.ndarray:
        if self._hbq:
            y = hbq_gemm(qa, qw, psum_mode=self.psum_mode).y
        else:
            y = block_gemm(qa, qw)
        return np.asarray(y, dtype=np.float64)


def study_operand_formats(
    label: str,
    weight: Any,
    activation: Any,
    cfg: QuantStudyConfig,
    *,
    rng: np.random.Generator,
) -> QuantStudyResult:
    """The study for one weight / activation format pair given as resolved format specs.

    This is how a design sweep scores an architecture's formats (block size, micro-block,
    L2 scheme, ... as configured, not only the registered presets): the same data, the same
    measurements and the same pooling as :func:`run_quant_study`; ``cfg.formats`` is not used.

    Args:
        label: the ``format`` name written in the rows.
        weight: the weight format (a :class:`~coaccel.models.formats.FormatSpec`).
        activation: the activation format.
        cfg: data sources, sizes, seed and partial-sum mode.
        rng: random generator for the synthetic tensors.

    Returns:
        The :class:`QuantStudyResult` of that one pair.

    Raises:
        MissingDependencyError: ``real`` was asked for and the model package is missing.
    """
    runner = _SpecRunner(label, weight, activation, cfg.psum_mode)
    say: Progress = lambda _msg: None  # noqa: E731
    rows: list[QuantRow] = []
    sents: tuple[str, ...] = ()
    if "synthetic" in cfg.data:
        rows += _synthetic_rows(cfg, [runner], rng, say)
    if "real" in cfg.data:
        real_rows, sents = _real_rows(cfg, [runner], say)
        rows += real_rows
    return QuantStudyResult(config=cfg, rows=tuple(rows), sentences=sents)
