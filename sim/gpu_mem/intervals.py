"""Calibrated decode-attention times with 90 % prediction intervals, from measured ops.

``coaccel validate gpu --measured`` (docs/gpu_measured.md) fits, on published timings of one
decode-attention op ([AIC-REPO], [VIDUR-REPO], [CS378-VIDUR]), what no datasheet gives: per
kernel library a fixed cost ``floor_kcycles`` (thousands of SM cycles) and an ``efficiency``
(the fraction of the simulated speed the library reaches; with
``efficiency_form: regime`` one for an op streamed from DRAM and ``efficiency_l2`` for one the
warm L2 serves), and split-conformal half-widths of ``log(measured / predicted)`` per regime.
``--write-calibration FILE`` writes them to a YAML file; the shipped one is
``arch_configs/gpu/measured/decode_attention_calibration.yaml`` (:data:`CALIBRATION_FILE`,
schema :class:`MeasuredCalibration`). This module applies it::

    t = floor_kcycles * 1000 / f_sm_mhz [us] + T_sim / efficiency[regime]
    interval = [t * exp(-q), t * exp(q)]

* ``T_sim`` is the simulated op as the fit saw it: its kernels on the analytical tier with the
  gap between two kernels of a CUDA graph (:attr:`MeasuredCalibration.graph_gap_us`) before
  each, not the config's stream launch latency (:func:`op_seconds` converts), launched as the
  fit launched it (``launch_form: library``: each library's own launch plan, recorded as
  :attr:`LibraryFit.launch`; :func:`coaccel.targets.gpu.measured.library_launch_kind`). The
  pooled fit was fitted on every library's rows, each in its own launch; the simulator's own
  ``flashdecode:`` op (the package's split rule) takes it as the best estimate for a library
  the calibration does not know;
* ``q`` is the half-width of the op's regime (:func:`regime_of`: ``l2`` when the L2 serves
  most of the split kernel's sectors, ``dram`` otherwise) for a GPU the fit saw
  (``log_half_width.in_fit``) or for one it did not (``log_half_width.held_out``, the
  leave-one-GPU-out errors). A design is one the fit saw only when its SMs, L2 and DRAM equal
  those of a config in :attr:`MeasuredCalibration.fitted_configs` (:func:`fitted_config`): a
  sweep variant of a fitted GPU is another GPU;
* only dense split-K decode attention is calibrated (:func:`is_attention_op`): the measured ops
  are FlashAttention-style kernels, not sparse (FFD), offloading (NOSA) or MoE (Specter) runs
  and not microbenchmarks.

The arithmetic uses only ``+``, ``*`` and ``/`` on float64 (the exponentials are taken once per
file), so a scalar and an array of designs give the same bits: the GPU simulator's batch path
(:mod:`._batch`) equals its per-point path.

Public: :data:`CALIBRATION_FILE`, :data:`REGIMES`, :data:`ATTENTION_PRODUCER`,
:class:`LibraryFit`, :class:`RegimeHalfWidths`, :class:`HalfWidths`, :class:`RegimeCoverage`,
:class:`Coverage`, :class:`MeasuredCalibration`, :func:`load_calibration`,
:func:`calibration_path`, :func:`library_key`, :func:`regime_of`, :func:`op_seconds`,
:func:`is_attention_op`, :func:`fitted_config`, :func:`calibrated`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.config import FrozenMap, Problem, load_config, param, source_key_problems

from .config import GpuArchConfig, load_arch

__all__ = [
    "ATTENTION_PRODUCER",
    "CALIBRATION_FILE",
    "REGIMES",
    "Coverage",
    "HalfWidths",
    "LibraryFit",
    "MeasuredCalibration",
    "RegimeCoverage",
    "RegimeHalfWidths",
    "calibrated",
    "calibration_path",
    "fitted_config",
    "is_attention_op",
    "library_key",
    "load_calibration",
    "op_seconds",
    "regime_of",
]

CALIBRATION_FILE = "gpu/measured/decode_attention_calibration.yaml"
"""The shipped calibration, relative to ``arch_configs/``."""

Regime = Literal["dram", "l2"]
REGIMES: tuple[Regime, ...] = ("dram", "l2")
"""The regimes the half-widths are grouped by: the KV streamed from DRAM, or served by L2."""

ATTENTION_PRODUCER = "coaccel.models.gpu.flash_decode"
"""Producer of the dense split-K decode-attention traces (:func:`is_attention_op`)."""
_ATTENTION_KERNEL = "flash_decode_split_k"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


# -- the file ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryFit:
    """The fitted parameters of one kernel library (or of all rows pooled).

    Attributes:
        floor_kcycles: fixed work per op beyond the simulated kernels, thousands of SM cycles.
        efficiency: fraction of the simulated speed the library reaches (1); of an op
            streamed from DRAM when ``efficiency_l2`` is given.
        rows: measured rows of the fit.
        efficiency_l2: fraction of the simulated speed of an op the warm L2 serves (the
            ``l2`` regime); None: ``efficiency`` for both regimes.
        launch: the launch plan(s) the fit's ``T_sim`` simulated (comma-separated kinds of
            :data:`coaccel.models.gpu.LaunchKind`).
    """

    floor_kcycles: float = param(ge=0, doc="fixed work per op, thousands of SM cycles")
    efficiency: float = param(gt=0, doc="fraction of the simulated speed reached")
    rows: int = param(ge=1, doc="measured rows of the fit")
    efficiency_l2: float | None = param(default=None, gt=0,
                                        doc="fraction reached in the l2 regime")  # fmt: skip
    launch: str = param(default="flashdecode", doc="launch plan(s) of T_sim")

    def efficiency_of(self, regime: str) -> float:
        """The efficiency of an op of ``regime``."""
        if regime == "l2" and self.efficiency_l2 is not None:
            return self.efficiency_l2
        return self.efficiency


@dataclass(frozen=True)
class RegimeHalfWidths:
    """Half-widths ``q`` of ``log(measured / predicted)`` at the target coverage, per regime
    (the interval is ``[t e^-q, t e^q]``; natural log, dimensionless).

    Attributes:
        dram: the KV streamed from DRAM. l2: the KV served by the (warm) L2.
    """

    dram: float = param(ge=0, doc="log half-width, KV from DRAM")
    l2: float = param(ge=0, doc="log half-width, KV from L2")


@dataclass(frozen=True)
class HalfWidths:
    """Half-widths for a GPU the fit saw and for one it did not.

    Attributes:
        in_fit: from the calibration rows' leave-one-out residuals.
        held_out: from the leave-one-GPU-out residuals (each calibration GPU predicted by a
            fit on the others).
    """

    in_fit: RegimeHalfWidths = param(doc="a GPU in the fit")
    held_out: RegimeHalfWidths = param(doc="a GPU no fit saw")


@dataclass(frozen=True)
class RegimeCoverage:
    """Share of measured rows inside their interval (0..1), per regime and over all rows.

    Attributes:
        dram, l2: rows of that regime (None: the CSV has none). all: every row.
    """

    dram: float | None = param(ge=0, le=1, doc="coverage of the dram rows")
    l2: float | None = param(ge=0, le=1, doc="coverage of the l2 rows")
    all: float = param(ge=0, le=1, doc="coverage of every row")


@dataclass(frozen=True)
class Coverage:
    """How often the intervals held, each row judged by an interval built without it.

    Attributes:
        in_fit: each calibration row's leave-one-out prediction against the ``in_fit``
            half-width of the other rows' scores.
        held_out: each calibration GPU's leave-one-GPU-out predictions against the
            ``held_out`` half-width computed from the other GPUs' leave-one-GPU-out residuals.
    """

    in_fit: RegimeCoverage = param(doc="leave-one-out coverage")
    held_out: RegimeCoverage = param(doc="coverage on a GPU left out of the half-widths")


@dataclass(frozen=True)
class MeasuredCalibration:
    """The calibration of decode-attention times (``decode_attention_calibration.yaml``).

    Attributes:
        description: one line.
        measured_csv: name of the measured CSV it was derived from.
        measured_csv_sha256: SHA-256 of that file's bytes (hex).
        measured_rows: rows of the CSV. calibration_rows: rows fitted (non-Hopper GPUs).
        page_tokens: tokens per paged-KV block of the simulated rows.
        graph_gap_us: gap between two kernels before each kernel of ``T_sim``, µs.
        target_coverage: the intervals' target coverage (0.9).
        fitted_configs: shipped GPU configs of the calibration rows.
        pooled: the fit of every calibration row (a library not in ``libraries``).
        libraries: library key (:func:`library_key`) -> its own fit.
        launch_form: how the rows were launched in the simulation: ``library`` (each as its
            library launches it) or ``flashdecode`` (the package's split rule for every row).
        efficiency_form: ``single`` (one efficiency per library) or ``regime`` (one per
            regime and library).
        log_half_width: :class:`HalfWidths`. coverage: :class:`Coverage`.
        sources: where each figure comes from, keyed by dotted field path.
    """

    VERSION: ClassVar[int] = 1

    description: str = param(doc="one line")
    measured_csv: str = param(doc="the measured CSV's file name")
    measured_csv_sha256: str = param(doc="SHA-256 of the measured CSV (hex)")
    measured_rows: int = param(ge=1, doc="rows of the measured CSV")
    calibration_rows: int = param(ge=1, doc="rows fitted")
    page_tokens: int = param(ge=1, doc="tokens per paged-KV block of the simulated rows")
    graph_gap_us: float = param(ge=0, doc="gap before each kernel of T_sim")
    target_coverage: float = param(gt=0, lt=1, doc="target coverage of the intervals")
    fitted_configs: tuple[str, ...] = param(doc="shipped configs of the calibration rows")
    pooled: LibraryFit = param(doc="fit of every calibration row")
    libraries: Mapping[str, LibraryFit] = param(doc="fit per kernel library")
    log_half_width: HalfWidths = param(doc="conformal half-widths of log(measured/predicted)")
    coverage: Coverage = param(doc="coverage of the intervals")
    launch_form: Literal["library", "flashdecode"] = param(
        default="flashdecode", doc="launch plans of the simulated rows"
    )
    efficiency_form: Literal["single", "regime"] = param(
        default="single", doc="one efficiency per library, or one per regime"
    )
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: the digest's form, lower-case library keys, known configs, an
        ``efficiency_l2`` exactly with the per-regime form, and source keys that name
        fields."""
        from .config import ARCH_NAMES

        out: list[Problem | str] = []
        if not _SHA256.match(self.measured_csv_sha256):
            out.append(Problem("", "measured_csv_sha256", self.measured_csv_sha256,
                               "must be 64 lower-case hex digits"))  # fmt: skip
        for k in self.libraries:
            if k != library_key(k):
                out.append(Problem("", f"libraries.{k}", k, "library keys are stripped and "
                                   f"lower case: {library_key(k)!r}"))  # fmt: skip
        for c in self.fitted_configs:
            if c not in ARCH_NAMES:
                out.append(Problem("", "fitted_configs", c, "not a shipped GPU config",
                                   ", ".join(ARCH_NAMES)))  # fmt: skip
        for k, fit in (
            ("pooled", self.pooled),
            *((f"libraries.{n}", f) for n, f in self.libraries.items()),
        ):
            if (fit.efficiency_l2 is not None) != (self.efficiency_form == "regime"):
                out.append(Problem("", f"{k}.efficiency_l2", fit.efficiency_l2,
                                   "given exactly when efficiency_form is 'regime' (it is "
                                   f"{self.efficiency_form!r})"))  # fmt: skip
        if self.calibration_rows > self.measured_rows:
            out.append(Problem("", "calibration_rows", self.calibration_rows,
                               f"must be <= measured_rows={self.measured_rows}"))  # fmt: skip
        out.extend(source_key_problems(self, self.sources))
        return out

    def fit(self, library: str | None = None) -> LibraryFit:
        """The parameters of ``library`` (None: the pooled fit).

        Raises:
            ValueError: a library the file has no fit of (naming the ones it has).
        """
        if library is None:
            return self.pooled
        got = self.libraries.get(library_key(library))
        if got is None:
            raise ValueError(f"no calibrated kernel library {library!r}; the calibration has "
                             f"{', '.join(sorted(self.libraries))} (or None: pooled)")  # fmt: skip
        return got

    @functools.cached_property
    def _factors(self) -> dict[tuple[bool, str], tuple[float, float]]:
        """(in fit, regime) -> ``(e^-q, e^q)``: taken once, so every call multiplies by the
        same two numbers."""
        out: dict[tuple[bool, str], tuple[float, float]] = {}
        for in_fit, hw in ((True, self.log_half_width.in_fit),
                           (False, self.log_half_width.held_out)):  # fmt: skip
            for r in REGIMES:
                q = float(getattr(hw, r))
                out[(in_fit, r)] = (math.exp(-q), math.exp(q))
        return out

    @functools.cached_property
    def _fitted_archs(self) -> tuple[tuple[str, GpuArchConfig], ...]:
        return tuple((c, load_arch(c)) for c in self.fitted_configs)


def calibration_path() -> Path:
    """The shipped calibration file (:data:`CALIBRATION_FILE`)."""
    from importlib.resources import files

    return Path(str(files("coaccel.arch_configs"))) / CALIBRATION_FILE


@functools.lru_cache(maxsize=8)
def _load(path: str) -> MeasuredCalibration:
    return load_config(path, MeasuredCalibration)


def load_calibration(path: str | Path | None = None) -> MeasuredCalibration:
    """Load a calibration file (kept per path in this process).

    Args:
        path: a file written by ``coaccel validate gpu --measured ... --write-calibration``
            (None: the shipped one, :func:`calibration_path`).

    Returns:
        The :class:`MeasuredCalibration`.

    Raises:
        ConfigError: every problem of the file.
    """
    return _shipped() if path is None else _load(str(Path(path)))


@functools.cache
def _shipped() -> MeasuredCalibration:
    """The shipped calibration (looked up once: every simulated attention op reads it)."""
    return _load(str(calibration_path()))


def library_key(name: str) -> str:
    """A kernel library's key: the measured CSV's ``kernel`` column, stripped, lower case."""
    return name.strip().lower()


# -- what an op is -----------------------------------------------------------------------------


def regime_of(l2_hits: int, sector_requests: int) -> Regime:
    """The regime of a decode-attention op from its split kernel's L2 counters: ``"l2"`` when
    hits are more than half of the sector requests, else ``"dram"`` (a cold trace streams its
    KV from DRAM; a replayed one whose KV fits the L2 hits)."""
    return "l2" if sector_requests and l2_hits / sector_requests > 0.5 else "dram"


def op_seconds(
    seconds: npt.ArrayLike, kernels: npt.ArrayLike, gap_us: npt.ArrayLike, graph_gap_us: float
) -> Any:
    """``T_sim`` of an op simulated with ``gap_us`` before each of its kernels: the same kernels
    with the calibration's CUDA-graph gap before each instead.

    Exact for kernels run one after another on one stream (a split-K op: split, then reduce):
    each kernel starts a gap after the previous one ends.

    Args:
        seconds: the simulated time, s (float64, any shape).
        kernels: compute kernels of the op (broadcast with ``seconds``).
        gap_us: the gap the simulation used before each kernel (the config's
            ``launch_overhead_us``; 0 for kernel times without gaps), µs.
        graph_gap_us: :attr:`MeasuredCalibration.graph_gap_us`, µs.

    Returns:
        ``seconds + kernels * (graph_gap_us - gap_us) * 1e-6``, s (a float for scalar inputs).
    """
    out = np.asarray(seconds, dtype=np.float64) + np.asarray(kernels, dtype=np.float64) * (
        (graph_gap_us - np.asarray(gap_us, dtype=np.float64)) * 1e-6
    )
    return float(out) if out.ndim == 0 else out


def is_attention_op(trace: Any) -> bool:
    """Is the trace one dense split-K decode-attention op (the kind the calibration measured)?

    True for the traces of :func:`coaccel.models.gpu.flash_decode_trace` and
    :func:`coaccel.models.gpu.split_k_trace` (``flashdecode:`` workloads, measured rows) with
    every K/V tile attended; False for FFD (sparse), NOSA (offloaded), Specter (MoE experts)
    and the microbenchmarks.
    """
    meta = getattr(trace, "meta", None) or {}
    wl = meta.get("workload", {})
    return (
        meta.get("producer") == ATTENTION_PRODUCER
        and isinstance(wl, Mapping)
        and wl.get("kernel") == _ATTENTION_KERNEL
        and wl.get("tiles_attended") == wl.get("tiles_total")
    )


def fitted_config(arch: GpuArchConfig, calibration: MeasuredCalibration | None = None) -> str:
    """The fitted config a design is, or ``""`` for a GPU the fit did not see.

    A design is a fitted config when its SMs, L2 and DRAM (what the op's simulated time
    reads) equal that config's; its name, host link and launch latency do not matter
    (``T_sim`` uses the calibration's graph gap).

    Args:
        arch: the design. calibration: the calibration (None: the shipped one).

    Returns:
        The config name (``"a100_80g"``) or ``""``.
    """
    cal = calibration or load_calibration()
    sm, l2, dram = arch.sm, arch.l2, arch.dram
    for name, a in cal._fitted_archs:
        # cheap rejections first: a sweep asks this of every design
        if sm.count != a.sm.count or sm.freq_mhz != a.sm.freq_mhz:
            continue
        if dram.bw_gb_per_s != a.dram.bw_gb_per_s or l2.capacity_mib != a.l2.capacity_mib:
            continue
        if (
            (sm is a.sm or sm == a.sm)
            and (l2 is a.l2 or l2 == a.l2)
            and (dram is a.dram or dram == a.dram)
        ):
            return name
    return ""


# -- the prediction ----------------------------------------------------------------------------


def calibrated(
    sim_seconds: npt.ArrayLike,
    sm_mhz: npt.ArrayLike,
    regime: npt.ArrayLike,
    gpu_config_name: npt.ArrayLike,
    library: str | None = None,
    *,
    calibration: MeasuredCalibration | None = None,
) -> tuple[Any, Any, Any]:
    """The calibrated time of decode-attention ops and its 90 % prediction interval
    (module docstring: the efficiency is the op's regime's).

    Args:
        sim_seconds: ``T_sim``, the simulated op with the CUDA-graph gap before each kernel
            (:func:`op_seconds`), s; float64, any shape.
        sm_mhz: the GPU's SM clock, MHz (broadcast).
        regime: ``"dram"`` or ``"l2"`` per op (:func:`regime_of`; broadcast).
        gpu_config_name: a config in the fit (in-fit half-widths) or anything else, e.g.
            ``""`` or ``"h200"`` (held-out half-widths); pass a fitted config's name only for
            that very GPU (:func:`fitted_config`). Broadcast.
        library: a kernel library of the calibration (:func:`library_key` of the measured
            CSV's ``kernel`` column, e.g. ``"vllm-0.14.0:vllm_flash_attn"``), or None for the
            pooled fit.
        calibration: the calibration (None: the shipped file).

    Returns:
        ``(seconds, lower, upper)``, s: float64 arrays of the broadcast shape, floats when
        every input is a scalar.

    Raises:
        ValueError: an unknown regime or library.
    """
    cal = calibration or load_calibration()
    p = cal.fit(library)
    t = np.asarray(sim_seconds, dtype=np.float64)
    f = np.asarray(sm_mhz, dtype=np.float64)
    reg = np.asarray(regime)
    bad = sorted(set(np.unique(reg).tolist()) - set(REGIMES))
    if bad:
        raise ValueError(f"regime {bad[0]!r}; valid: {', '.join(REGIMES)}")
    in_fit = np.isin(np.asarray(gpu_config_name), cal.fitted_configs)
    t, f, reg, in_fit = np.broadcast_arrays(t, f, reg, in_fit)
    # the regime's efficiency is selected, not computed: the same bits for scalar and array
    eff = np.where(reg == "l2", p.efficiency_of("l2"), p.efficiency_of("dram"))
    sec = p.floor_kcycles * 1000.0 / f * 1e-6 + t / eff
    lo_f = np.empty(sec.shape)
    hi_f = np.empty(sec.shape)
    for (fit, r), (down, up) in cal._factors.items():
        m = (in_fit == fit) & (reg == r)
        lo_f[m], hi_f[m] = down, up
    lower, upper = sec * lo_f, sec * hi_f
    if sec.ndim == 0:
        return float(sec), float(lower), float(upper)
    return sec, lower, upper
