"""``coaccel validate gpu --measured FILE.csv``: the GPU simulator against measured decode ops.

Pure computation (reading the CSV is the only I/O; :mod:`coaccel.targets.gpu.measured_report`
prints and writes). docs/gpu_measured.md has the model, the fitted values and the results.

**What is measured.** One row per timed decode-attention op: GPU, kernel library, dtype, batch,
query and KV heads, head dimension, context and the measured time in µs
(:data:`MEASURED_COLUMNS`; the shipped set is ``arch_configs/gpu/measured/
decode_attention_measured.csv``, :func:`shipped_measured_csv`, from [AIC-REPO], [VIDUR-REPO] and
[CS378-VIDUR]). The ops were replayed back to back (CUDA graphs, or repeated profiler runs),
and some include more than the attention kernels (KV append, preprocessing).

**Prediction of a row** (:func:`simulate_row`). The CSV's GPU name maps to a shipped config
(:data:`GPU_CONFIGS`, case-insensitive; an unknown GPU is skipped, not an error). The row's
split-K decode trace (:func:`coaccel.models.gpu.split_k_trace`; the split count chosen for the
config's SMs, ``block_n`` 128 or the largest tile that fits an SM's shared memory, paged KV of
``page_tokens`` tokens per block: the pages sit in sequence order, which the analytical tier
cannot tell from a shuffled block table, as its hit rule and DRAM runs do not depend on where a
page lies) is marked ``replayed`` (warm L2, :data:`coaccel.sim.gpu_mem.traffic.REPLAYED_KEY`):
when the KV cache, queries and outputs fit the config's effective L2 together, the replays read
them from L2, not DRAM; otherwise nothing changes. It is simulated analytically with the gap
between two kernels of a CUDA graph (:func:`coaccel.targets.gpu.ffd.graph_launch_us`) instead
of the stream launch latency. The simulated time ``T_sim`` uses datasheet and microbenchmark
figures only.

**Calibration** (:func:`fit_library`, :class:`Calibration`): what no datasheet gives, two
parameters per kernel library (the ``kernel`` column), never per GPU, so that they transfer to a
GPU they never saw::

    t = floor_kcycles * 1000 / f_sm_mhz + T_sim / efficiency

``floor_kcycles`` is the op's launch-to-finish minimum under replay beyond the simulated kernels
(kernel prologue, KV append, split-K combine, graph gaps), counted in thousands of SM clock
cycles of the GPU's config (the fixed work runs on the SMs, so on a GPU of another clock it
takes the same cycles, not the same µs; docs/gpu_measured.md compares it with a floor in µs);
``efficiency`` is the fraction of the simulated speed the library reaches. Both are fitted by
least squares on the relative error (linear in the floor and ``1 / efficiency``, solved with
non-negative coefficients). A library with fewer than :data:`MIN_ROWS_PER_LIBRARY` rows, or one
never seen, takes the pooled fit of all training rows (:attr:`Prediction.params` says which).
Rows of Hopper GPUs (:data:`NEVER_FITTED`) are never fitted: they are held out, predicted only.

**Intervals** (:func:`conformal_halfwidth`): split-conformal on the log ratio
``log(measured / predicted)``, grouped by regime (the KV streamed from DRAM or served by the warm
L2, :attr:`RowSim.regime`; a regime with too few scores for a finite quantile takes all
scores), at :data:`COVERAGE`: the scores are
leave-one-out residuals (each calibration row predicted by a fit without it), so a row's
interval never uses its own error; the reported coverage is the leave-one-out coverage (each
row's leave-one-out prediction inside the interval of the other rows' scores). Held-out rows
(Hopper) take the leave-one-GPU-out residuals as scores: the error of predicting a GPU no fit
saw.

**Leave one GPU out** (:func:`evaluate_measured`): with two or more calibration GPUs, each is
predicted from a fit on the others (its libraries then usually unseen: the pooled fit), with
intervals from the training rows' leave-one-out scores.

Metrics (:func:`error_summary`): rows, MAPE, median and P90 absolute percentage error, max,
signed bias (mean of ``predicted / measured - 1``), Kendall's tau-b (:func:`kendall_tau`) and
interval coverage.

Public: :data:`MEASURED_COLUMNS`, :data:`GPU_CONFIGS`, :data:`DTYPES`, :data:`NEVER_FITTED`,
:data:`COVERAGE`, :class:`MeasuredRow`, :class:`MeasuredTable`, :func:`read_measured_csv`,
:func:`shipped_measured_csv`, :func:`gpu_config`, :class:`RowSim`, :func:`decode_trace`,
:func:`simulate_row`, :class:`LibraryParams`, :class:`Calibration`, :func:`fit_library`,
:func:`fit_calibration`, :class:`Prediction`, :func:`conformal_halfwidth`,
:func:`kendall_tau`, :class:`ErrorSummary`, :func:`error_summary`,
:class:`MeasuredValidation`, :func:`evaluate_measured`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.errors import CoaccelError

__all__ = [
    "COVERAGE",
    "DTYPES",
    "GPU_CONFIGS",
    "MEASURED_COLUMNS",
    "MIN_ROWS_PER_LIBRARY",
    "NEVER_FITTED",
    "Calibration",
    "ErrorSummary",
    "LibraryParams",
    "MeasuredRow",
    "MeasuredTable",
    "MeasuredValidation",
    "Prediction",
    "RowSim",
    "conformal_halfwidth",
    "decode_trace",
    "error_summary",
    "evaluate_measured",
    "fit_calibration",
    "fit_library",
    "gpu_config",
    "kendall_tau",
    "read_measured_csv",
    "shipped_measured_csv",
    "simulate_row",
]

MEASURED_COLUMNS = (
    "source", "gpu", "kernel", "dtype", "batch", "n_q_heads", "n_kv_heads", "head_dim",
    "context_len", "measured_us", "notes",
)  # fmt: skip
"""Columns a measured CSV must have (others are kept and written back unchanged)."""

_INT_COLUMNS = ("batch", "n_q_heads", "n_kv_heads", "head_dim", "context_len")

DTYPES: Mapping[str, int] = {"bf16": 2, "fp16": 2}
"""dtypes of q and KV the decode trace models -> bytes per element."""

GPU_CONFIGS: Mapping[str, str] = {
    "a100-sxm4-40gb": "a100_40g",
    "a100-sxm4-80gb": "a100_80g",
    "h100-sxm": "h100_sxm",
    "h100-sxm5-80gb": "h100_sxm",
    "h200-sxm": "h200",
    "h200": "h200",
    "l40s": "l40s",
}
"""GPU name of a CSV (lower case) -> shipped config (``arch_configs/gpu/<name>.yaml``)."""

NEVER_FITTED = frozenset({"h100_sxm", "h200"})
"""Configs whose rows are never fitted (Hopper: predicted from datasheets and microbenchmarks
alone, held out)."""

COVERAGE = 0.9
"""Target coverage of the prediction intervals."""

MIN_ROWS_PER_LIBRARY = 3
"""Fewest rows of a library for a fit of its own (else the pooled fit)."""

DEFAULT_PAGE_TOKENS = 64
"""Tokens per paged-KV block when not given ([AIC-REPO] vLLM collector: block 64)."""

MAX_TILES = 2**21
"""Most K/V tiles one row's trace may have (two records each; the shipped rows have at most
131,072): a larger op is refused before any simulation."""

MEASURED_DIR = "gpu/measured"
MEASURED_FILE = "decode_attention_measured.csv"

Regime = Literal["dram", "l2"]
REGIMES: tuple[Regime, ...] = ("dram", "l2")
FitRole = Literal["calibration", "held-out", "skipped"]


# -- the CSV -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredRow:
    """One measured decode-attention op.

    Attributes:
        line: line in the CSV (the header is line 1).
        fields: every column of the row as read (also the extra ones), in file order.
        gpu: GPU name as written. kernel: kernel library as written. dtype: ``bf16``/``fp16``.
        batch: sequences B. n_q_heads: query heads Hq. n_kv_heads: KV heads Hkv.
        head_dim: D. context_len: KV tokens each sequence attends to.
        measured_us: measured time of one op, µs.
    """

    line: int
    fields: tuple[tuple[str, str], ...]
    gpu: str
    kernel: str
    dtype: str
    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    context_len: int
    measured_us: float

    @property
    def library(self) -> str:
        """The kernel library's key: the ``kernel`` column, stripped, lower case."""
        return self.kernel.strip().lower()

    @property
    def kv_bytes(self) -> int:
        """Bytes of the K and V caches the op reads, B."""
        return (
            2 * self.batch * self.context_len * self.n_kv_heads * self.head_dim * DTYPES[self.dtype]
        )


@dataclass(frozen=True)
class MeasuredTable:
    """A measured CSV: its path, header and rows."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[MeasuredRow, ...]


def shipped_measured_csv() -> Path:
    """The shipped measured set, ``arch_configs/gpu/measured/decode_attention_measured.csv``."""
    from importlib.resources import files

    return Path(str(files("coaccel.arch_configs"))) / MEASURED_DIR / MEASURED_FILE


def read_measured_csv(path: str | Path) -> MeasuredTable:
    """Read and check a measured decode-attention CSV, every row before any work.

    Args:
        path: the CSV file (UTF-8; header row of column names, :data:`MEASURED_COLUMNS` among
            them in any order).

    Returns:
        The :class:`MeasuredTable`.

    Raises:
        CoaccelError: one line naming the file, line, column and value: a missing column, a
            row with too few or too many fields, an integer or number that is not one (or not
            positive, or heads that do not divide), an unknown dtype, an empty gpu or kernel,
            no data rows.
    """
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise CoaccelError(f"{p}: empty file; expected a header with the columns "
                                   f"{', '.join(MEASURED_COLUMNS)}")  # fmt: skip
            header = [h.strip() for h in header]
            missing = [c for c in MEASURED_COLUMNS if c not in header]
            if missing:
                raise CoaccelError(
                    f"{p}: line 1: missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; a measured CSV has the columns "
                    f"{', '.join(MEASURED_COLUMNS)}"
                )
            dup = sorted({h for h in header if header.count(h) > 1})
            if dup:
                raise CoaccelError(f"{p}: line 1: column {dup[0]!r} appears twice")
            rows = []
            for rec in reader:
                lineno = reader.line_num
                if not rec or all(not c.strip() for c in rec):
                    continue
                if len(rec) != len(header):
                    raise CoaccelError(
                        f"{p}: line {lineno}: {len(rec)} fields, expected {len(header)} "
                        f"({', '.join(header)})"
                    )
                rows.append(_parse_row(p, lineno, tuple(zip(header, rec, strict=True))))
    except UnicodeDecodeError as e:
        raise CoaccelError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise CoaccelError(f"{p}: not a readable CSV: {e}") from None
    if not rows:
        raise CoaccelError(f"{p}: no data rows")
    return MeasuredTable(path=p, header=tuple(header), rows=tuple(rows))


def _parse_row(p: Path, lineno: int, fields: tuple[tuple[str, str], ...]) -> MeasuredRow:
    rec = dict(fields)

    def bad(col: str, why: str) -> CoaccelError:
        return CoaccelError(f"{p}: line {lineno}: column {col}: {rec[col]!r} {why}")

    ints: dict[str, int] = {}
    for col in _INT_COLUMNS:
        text = rec[col].strip()
        try:
            v = int(text)
        except ValueError:
            raise bad(col, "is not an integer") from None
        if v < 1:
            raise bad(col, "must be >= 1")
        ints[col] = v
    if ints["n_q_heads"] % ints["n_kv_heads"]:
        raise bad("n_q_heads", f"is not a multiple of n_kv_heads={ints['n_kv_heads']}")
    text = rec["measured_us"].strip()
    try:
        t = float(text)
    except ValueError:
        raise bad("measured_us", "is not a number") from None
    if not math.isfinite(t) or t <= 0:
        raise bad("measured_us", "must be a finite number > 0 (µs)")
    dtype = rec["dtype"].strip().lower()
    if dtype not in DTYPES:
        raise bad("dtype", f"is not a supported dtype; valid: {', '.join(DTYPES)}")
    for col in ("gpu", "kernel"):
        if not rec[col].strip():
            raise bad(col, "is empty")
    return MeasuredRow(
        line=lineno,
        fields=fields,
        gpu=rec["gpu"].strip(),
        kernel=rec["kernel"].strip(),
        dtype=dtype,
        measured_us=t,
        **ints,
    )


def gpu_config(gpu: str) -> str | None:
    """The shipped config of a CSV GPU name (:data:`GPU_CONFIGS`, case-insensitive).

    Args:
        gpu: the name as written (``"A100-SXM4-80GB"``).

    Returns:
        The config name (``"a100_80g"``), or None for a GPU without one (its rows are skipped).
    """
    return GPU_CONFIGS.get(gpu.strip().lower())


# -- simulation of one row ---------------------------------------------------------------------


@dataclass(frozen=True)
class RowSim:
    """The simulator's view of one row (analytical tier, warm L2 where the data fits).

    Attributes:
        sim_us: simulated time of the op (split and reduction kernels with the CUDA-graph gap
            before each), µs.
        regime: ``"l2"`` when the warm L2 serves most of the split kernel's sectors, else
            ``"dram"``.
        l2_hit_fraction: L2 hits / sector requests of the split kernel.
        num_splits: splits per (sequence, KV head). ctas: split-kernel CTAs.
        block_n: tokens per K/V tile. bound: what bounds the split kernel.
        freq_mhz: SM clock of the config, MHz (the floor's cycles count at it).
    """

    sim_us: float
    regime: Regime
    l2_hit_fraction: float
    num_splits: int
    ctas: int
    block_n: int
    bound: str
    freq_mhz: float


def _block_n(row: MeasuredRow, arch: Any) -> int:
    """128, or the largest smaller tile of the package's choices whose CTA (q tile + one K
    and one V tile) fits an SM's shared memory ([OURS])."""
    from coaccel.models.gpu import BLOCK_N_CHOICES

    room = (arch.sm.smem_per_sm_kib - arch.sm.smem_reserved_per_cta_kib) * 1024
    elem = DTYPES[row.dtype]
    for bn in sorted((b for b in BLOCK_N_CHOICES if b <= 128), reverse=True):
        if 16 * row.head_dim * elem + 2 * bn * row.head_dim * elem <= room:
            return bn
    return min(BLOCK_N_CHOICES)


def decode_trace(
    row: MeasuredRow, arch: Any, *, page_tokens: int = DEFAULT_PAGE_TOKENS, replayed: bool = True
) -> Any:
    """The split-K decode trace of a row on a GPU (module docstring).

    Args:
        row: the measured row. arch: the GPU config (its SM count picks the split count).
        page_tokens: tokens per paged-KV block (recorded; see the module docstring).
        replayed: mark the trace as back-to-back replays (warm L2 where the data fits).

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    from coaccel.models.gpu import DecodeShape, plan_split_k, split_k_trace
    from coaccel.sim.gpu_mem.traffic import REPLAYED_KEY

    shape = DecodeShape(row.batch, row.context_len, row.n_q_heads, row.n_kv_heads, row.head_dim)
    plan = plan_split_k(shape, block_n=_block_n(row, arch), n_sms=arch.sm.count)
    meta = {REPLAYED_KEY: bool(replayed), "kv_page_tokens": int(page_tokens), "dtype": row.dtype}
    return split_k_trace(plan, workload=meta)


def simulate_row(
    row: MeasuredRow,
    arch: Any,
    *,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    replayed: bool = True,
    graph_gap_us: float | None = None,
) -> RowSim:
    """Simulate a row's op analytically (module docstring).

    Args:
        row: the measured row. arch: the GPU config.
        page_tokens: tokens per paged-KV block. replayed: warm L2 (back-to-back replays).
        graph_gap_us: gap between two kernels, µs (None: the CUDA-graph gap,
            :func:`coaccel.targets.gpu.ffd.graph_launch_us`).

    Returns:
        :class:`RowSim`.
    """
    from coaccel.sim.gpu_mem import simulate
    from coaccel.targets.gpu.ffd import graph_launch_us, graph_mode

    gap = graph_launch_us() if graph_gap_us is None else graph_gap_us
    a = graph_mode(arch, gap)
    trace = decode_trace(row, a, page_tokens=page_tokens, replayed=replayed)
    res = simulate(a, trace, mode="analytical")
    split = res.kernels[0]
    frac = split.l2_hits / split.sector_requests if split.sector_requests else 0.0
    wl = trace.meta["workload"]
    return RowSim(
        sim_us=res.seconds * 1e6,
        regime="l2" if frac > 0.5 else "dram",
        l2_hit_fraction=frac,
        num_splits=int(wl["num_splits"]),
        ctas=split.ctas,
        block_n=int(wl["block_n"]),
        bound=split.bound,
        freq_mhz=float(arch.sm.freq_mhz),
    )


# -- the calibration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryParams:
    """Fitted parameters of one kernel library (or the pooled fit).

    Attributes:
        library: the library key (``"(pooled)"`` for the pooled fit).
        floor_kcycles: fixed work per op beyond the simulated kernels, thousands of SM cycles.
        efficiency: fraction of the simulated speed the library reaches.
        rows: rows the fit used.
    """

    library: str
    floor_kcycles: float
    efficiency: float
    rows: int

    def floor_us(self, freq_mhz: float) -> float:
        """The floor on a GPU of SM clock ``freq_mhz``, µs."""
        return self.floor_kcycles * 1000.0 / freq_mhz

    def predict_us(self, sim: RowSim) -> float:
        """``floor_us(f) + sim_us / efficiency``, µs."""
        return self.floor_us(sim.freq_mhz) + sim.sim_us / self.efficiency


POOLED = "(pooled)"


def _nonneg_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients, by enumerating the active sets (the
    problems here have two columns)."""
    n = x.shape[1]
    best, best_err = np.zeros(n), float(np.sum(y**2))
    for mask in range(1, 2**n):
        cols = [j for j in range(n) if mask >> j & 1]
        sub = x[:, cols]
        if np.linalg.matrix_rank(sub) < len(cols):
            continue
        c, *_ = np.linalg.lstsq(sub, y, rcond=None)
        if np.any(c < 0):
            continue
        err = float(np.sum((sub @ c - y) ** 2))
        if err < best_err - 1e-15:
            best = np.zeros(n)
            best[cols] = c
            best_err = err
    return best


def fit_library(
    library: str, measured_us: Sequence[float], sims: Sequence[RowSim]
) -> LibraryParams:
    """Fit ``floor_kcycles`` and ``efficiency`` of one library (or the pool).

    Minimizes ``sum((predicted / measured - 1)^2)`` over the rows with a non-negative floor
    and inverse efficiency (module docstring).

    Args:
        library: the key to record. measured_us: measured times, µs. sims: their simulations.

    Returns:
        :class:`LibraryParams`.

    Raises:
        ValueError: no rows, or no row with simulated time (the efficiency is undefined).
    """
    m = np.asarray(measured_us, dtype=np.float64)
    if not m.size:
        raise ValueError(f"fit_library({library!r}): no rows")
    t = np.array([s.sim_us for s in sims])
    kcyc_us = np.array([1000.0 / s.freq_mhz for s in sims])
    x = np.stack([kcyc_us, t], axis=1) / m[:, None]
    floor, inv = _nonneg_lstsq(x, np.ones_like(m))
    if inv <= 0:
        raise ValueError(f"fit_library({library!r}): the simulated times explain nothing")
    return LibraryParams(library=library, floor_kcycles=float(floor), efficiency=float(1 / inv),
                         rows=int(m.size))  # fmt: skip


@dataclass(frozen=True)
class Calibration:
    """Per-library parameters and the pooled fit they fall back to.

    Attributes:
        libraries: library key -> its fit.
        pooled: the fit of all training rows together (for an unseen library).
        gpus: configs of the training rows.
        rows: training rows.
        notes: libraries left to the pooled fit and why.
    """

    libraries: Mapping[str, LibraryParams]
    pooled: LibraryParams
    gpus: tuple[str, ...]
    rows: int
    notes: tuple[str, ...] = ()

    def params(self, library: str) -> tuple[LibraryParams, bool]:
        """The parameters of a library and whether they are its own (False: pooled)."""
        p = self.libraries.get(library)
        return (p, True) if p is not None else (self.pooled, False)


def fit_calibration(
    rows: Sequence[MeasuredRow], sims: Sequence[RowSim], gpus: Sequence[str] = ()
) -> Calibration:
    """Fit the pooled parameters, then each library's (module docstring).

    Args:
        rows: the training rows. sims: their simulations (same order).
        gpus: their configs, for the record.

    Returns:
        :class:`Calibration`.
    """
    meas = [r.measured_us for r in rows]
    notes: list[str] = []
    try:
        pooled = fit_library(POOLED, meas, sims)
    except ValueError:
        # the measured times do not grow with the simulated ones: keep the simulator's speed
        # and fit the floor alone
        m = np.asarray(meas)
        t = np.array([s.sim_us for s in sims])
        kc = np.array([1000.0 / s.freq_mhz for s in sims])
        x = (kc / m)[:, None]
        (floor,) = _nonneg_lstsq(x, 1.0 - t / m)
        pooled = LibraryParams(POOLED, float(floor), 1.0, len(rows))
        notes.append("the measured times do not grow with the simulated ones: the pooled "
                     "efficiency is fixed at 1 and only its floor is fitted")  # fmt: skip
    libs: dict[str, LibraryParams] = {}
    for lib in sorted({r.library for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.library == lib]
        if len(idx) < MIN_ROWS_PER_LIBRARY:
            notes.append(f"{lib}: {len(idx)} row(s), fewer than {MIN_ROWS_PER_LIBRARY}: "
                         "pooled fit")  # fmt: skip
            continue
        try:
            libs[lib] = fit_library(lib, [meas[i] for i in idx], [sims[i] for i in idx])
        except ValueError:
            notes.append(f"{lib}: its measured times do not grow with the simulated ones: "
                         "pooled fit")  # fmt: skip
    return Calibration(libraries=libs, pooled=pooled, gpus=tuple(sorted(set(gpus))),
                       rows=len(rows), notes=tuple(notes))  # fmt: skip


# -- intervals and metrics ---------------------------------------------------------------------


def conformal_halfwidth(scores: npt.ArrayLike, coverage: float = COVERAGE) -> float:
    """Split-conformal half-width of a symmetric interval on the log ratio.

    The ``ceil((n + 1) * coverage)``-th smallest of the absolute scores (infinite when
    there are too few scores for that coverage).

    Args:
        scores: residuals ``log(measured / predicted)`` of rows not used for the fit.
        coverage: target coverage in (0, 1).

    Returns:
        The half-width ``q``: the interval is ``[p * exp(-q), p * exp(q)]``.
    """
    s = np.sort(np.abs(np.asarray(scores, dtype=np.float64)))
    k = math.ceil((s.size + 1) * coverage)
    return float(s[k - 1]) if 1 <= k <= s.size else math.inf


def kendall_tau(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Kendall's tau-b of two sequences (ties counted as in tau-b; NaN for fewer than 2
    points or a constant sequence)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size < 2:
        return math.nan
    i, j = np.triu_indices(a.size, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = i.size
    n1 = int(np.sum(da == 0))
    n2 = int(np.sum(db == 0))
    denom = math.sqrt((n0 - n1) * (n0 - n2))
    return float(np.sum(da * db) / denom) if denom else math.nan


@dataclass(frozen=True)
class ErrorSummary:
    """Errors of a set of predictions against measurements.

    Attributes:
        rows: rows. mape_pct: mean absolute percentage error. median_ape_pct, p90_ape_pct,
        max_ape_pct: median, 90th percentile and largest absolute percentage error.
        bias_pct: mean signed error ``predicted / measured - 1``, percent (positive: slow).
        kendall_tau: Kendall's tau-b of predicted against measured.
        coverage: share of measurements inside their interval (NaN without intervals).
    """

    rows: int
    mape_pct: float
    median_ape_pct: float
    p90_ape_pct: float
    max_ape_pct: float
    bias_pct: float
    kendall_tau: float
    coverage: float


def error_summary(
    measured: npt.ArrayLike,
    predicted: npt.ArrayLike,
    lower: npt.ArrayLike | None = None,
    upper: npt.ArrayLike | None = None,
) -> ErrorSummary:
    """:class:`ErrorSummary` of predictions (intervals optional)."""
    m = np.asarray(measured, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    if not m.size:
        nan = math.nan
        return ErrorSummary(0, nan, nan, nan, nan, nan, nan, nan)
    rel = p / m - 1.0
    ape = np.abs(rel) * 100.0
    cov = math.nan
    if lower is not None and upper is not None:
        lo, hi = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        cov = float(np.mean((lo <= m) & (m <= hi)))
    return ErrorSummary(
        rows=int(m.size),
        mape_pct=float(ape.mean()),
        median_ape_pct=float(np.median(ape)),
        p90_ape_pct=float(np.percentile(ape, 90)),
        max_ape_pct=float(ape.max()),
        bias_pct=float(rel.mean() * 100.0),
        kendall_tau=kendall_tau(p, m),
        coverage=cov,
    )


# -- the whole evaluation ----------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """The prediction of one row.

    Attributes:
        row: the measured row. gpu_config: its config (empty when skipped).
        fit_role: ``calibration`` (its GPU is fitted), ``held-out`` (never fitted) or
            ``skipped`` (no config for its GPU).
        sim: the simulation (None when skipped).
        predicted_us, lower_us, upper_us: prediction and 90 % interval, µs (NaN: skipped).
        params: ``"library"`` (its library's own fit) or ``"pooled"``.
        loo_us: the calibration row's leave-one-out prediction, µs (NaN otherwise).
        logo_us, logo_lower_us, logo_upper_us: leave-one-GPU-out prediction and interval, µs
            (NaN where not computed).
        logo_params: ``"library"`` or ``"pooled"`` in the leave-one-GPU-out fit.
    """

    row: MeasuredRow
    gpu_config: str
    fit_role: FitRole
    sim: RowSim | None
    predicted_us: float = math.nan
    lower_us: float = math.nan
    upper_us: float = math.nan
    params: str = ""
    loo_us: float = math.nan
    logo_us: float = math.nan
    logo_lower_us: float = math.nan
    logo_upper_us: float = math.nan
    logo_params: str = ""


@dataclass(frozen=True)
class MeasuredValidation:
    """Result of :func:`evaluate_measured`.

    Attributes:
        table: the CSV read. predictions: one per row, in file order.
        calibration: the fit on every calibration row (None without calibration rows).
        logo_fits: held-out config -> the fit on the other calibration GPUs.
        halfwidths: regime -> conformal half-width (log ratio) of calibration predictions.
        heldout_halfwidths: regime -> half-width of held-out (never fitted) GPUs' predictions
            (leave-one-GPU-out scores; empty without leave-one-GPU-out).
        in_sample: group (config name, or ``"all"``) -> errors of the calibration fit (interval
            coverage: leave-one-out).
        loo: group -> errors of the leave-one-out predictions.
        logo: group -> errors of the leave-one-GPU-out predictions.
        held_out: group -> errors on never-fitted GPUs' rows.
        by_regime: (``in_sample`` | ``logo``, regime) -> errors, over all GPUs.
        page_tokens: paged-KV block of the traces. coverage: target coverage.
        notes: what the reader should know (skipped rows, pooled fallbacks, ...).
    """

    table: MeasuredTable
    predictions: tuple[Prediction, ...]
    calibration: Calibration | None
    logo_fits: Mapping[str, Calibration]
    halfwidths: Mapping[str, float]
    heldout_halfwidths: Mapping[str, float]
    in_sample: Mapping[str, ErrorSummary]
    loo: Mapping[str, ErrorSummary]
    logo: Mapping[str, ErrorSummary]
    held_out: Mapping[str, ErrorSummary]
    by_regime: Mapping[tuple[str, str], ErrorSummary]
    page_tokens: int
    coverage: float
    notes: tuple[str, ...] = field(default_factory=tuple)


SimulateRow = Callable[[MeasuredRow, Any], RowSim]


def _loo(rows: Sequence[MeasuredRow], sims: Sequence[RowSim]) -> np.ndarray:
    """Leave-one-out predictions of each row from a fit on the others, µs."""
    out = np.empty(len(rows))
    for i in range(len(rows)):
        keep = [j for j in range(len(rows)) if j != i]
        cal = fit_calibration([rows[j] for j in keep], [sims[j] for j in keep])
        p, _ = cal.params(rows[i].library)
        out[i] = p.predict_us(sims[i])
    return out


def _regime_scores(reg: np.ndarray, scores: np.ndarray, r: str, coverage: float) -> np.ndarray:
    """The scores of regime ``r``; all scores when the regime has too few for a finite
    quantile at ``coverage`` (fewer than ``coverage / (1 - coverage)``)."""
    s = scores[reg == r]
    return s if math.isfinite(conformal_halfwidth(s, coverage)) else scores


def _halfwidths(regimes: Sequence[str], scores: np.ndarray, coverage: float) -> dict[str, float]:
    """Conformal half-width per regime (:func:`_regime_scores`)."""
    reg = np.asarray(regimes)
    return {r: conformal_halfwidth(_regime_scores(reg, scores, r, coverage), coverage)
            for r in REGIMES}  # fmt: skip


def _loo_coverage(regimes: Sequence[str], scores: np.ndarray, coverage: float) -> np.ndarray:
    """Per row: is its leave-one-out score inside the half-width of the other rows' scores
    (of its regime, :func:`_regime_scores`)?"""
    reg = np.asarray(regimes)
    inside = np.zeros(scores.size, dtype=bool)
    for i in range(scores.size):
        others = np.arange(scores.size) != i
        q = conformal_halfwidth(_regime_scores(reg[others], scores[others], reg[i], coverage),
                                coverage)  # fmt: skip
        inside[i] = abs(scores[i]) <= q
    return inside


def _summaries(
    groups: Mapping[str, Sequence[int]],
    measured: np.ndarray,
    predicted: np.ndarray,
    lower: np.ndarray | None,
    upper: np.ndarray | None,
    inside: np.ndarray | None = None,
) -> dict[str, ErrorSummary]:
    out = {}
    for g, idx in groups.items():
        ix = np.asarray(idx, dtype=np.int64)
        if not ix.size:
            continue
        s = error_summary(measured[ix], predicted[ix],
                          None if lower is None else lower[ix],
                          None if upper is None else upper[ix])  # fmt: skip
        if inside is not None:
            s = ErrorSummary(**{**s.__dict__, "coverage": float(np.mean(inside[ix]))})
        out[g] = s
    return out


def evaluate_measured(
    table: MeasuredTable,
    *,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    coverage: float = COVERAGE,
    simulate: SimulateRow | None = None,
    load_arch: Callable[[str], Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> MeasuredValidation:
    """Simulate, calibrate and judge every row of a measured CSV (module docstring).

    Args:
        table: the rows (:func:`read_measured_csv`).
        page_tokens: tokens per paged-KV block of the traces.
        coverage: target coverage of the intervals.
        simulate: ``(row, arch) -> RowSim`` (default :func:`simulate_row`; tests may pass a
            stand-in).
        load_arch: config name -> config (default :func:`coaccel.sim.gpu_mem.load_arch`).
        progress: called with one line now and then (simulating, fitting).

    Returns:
        :class:`MeasuredValidation`.
    """
    say = progress or (lambda _m: None)
    if load_arch is None:
        from coaccel.sim.gpu_mem import load_arch as _load

        load_arch = _load
    sim_fn = simulate or (lambda r, a: simulate_row(r, a, page_tokens=page_tokens))
    notes: list[str] = []
    cfg_of = [gpu_config(r.gpu) or "" for r in table.rows]
    skipped = sorted({r.gpu for r, c in zip(table.rows, cfg_of, strict=True) if not c})
    if skipped:
        n = sum(1 for c in cfg_of if not c)
        notes.append(
            f"{n} row(s) skipped: no config for GPU {', '.join(repr(g) for g in skipped)} "
            f"(known: {', '.join(sorted(set(GPU_CONFIGS)))})"
        )
    archs = {c: load_arch(c) for c in sorted({c for c in cfg_of if c})}
    if simulate is None:
        for r, c in zip(table.rows, cfg_of, strict=True):
            tiles = r.batch * r.n_kv_heads * -(-r.context_len // _block_n(r, archs[c])) if c else 0
            if tiles > MAX_TILES:
                raise CoaccelError(
                    f"{table.path}: line {r.line}: {tiles} K/V tiles (batch x n_kv_heads x "
                    f"context_len / tile) to simulate; at most {MAX_TILES}"
                )
    sims: list[RowSim | None] = [None] * len(table.rows)
    cache: dict[tuple[Any, ...], RowSim] = {}
    todo = [i for i, c in enumerate(cfg_of) if c]
    for k, i in enumerate(todo):
        r = table.rows[i]
        key = (cfg_of[i], r.dtype, r.batch, r.n_q_heads, r.n_kv_heads, r.head_dim,
               r.context_len)  # fmt: skip
        if key not in cache:
            cache[key] = sim_fn(r, archs[cfg_of[i]])
        sims[i] = cache[key]
        if (k + 1) % 20 == 0 or k + 1 == len(todo):
            say(f"simulated {k + 1}/{len(todo)} rows ({len(cache)} distinct ops)")
    cal_idx = [i for i in todo if cfg_of[i] not in NEVER_FITTED]
    held_idx = [i for i in todo if cfg_of[i] in NEVER_FITTED]
    rows = table.rows
    meas = np.array([r.measured_us for r in rows])
    n = len(rows)
    pred, lo, hi = np.full(n, math.nan), np.full(n, math.nan), np.full(n, math.nan)
    loo_p = np.full(n, math.nan)
    logo_p, logo_lo, logo_hi = np.full(n, math.nan), np.full(n, math.nan), np.full(n, math.nan)
    which = [""] * n
    logo_which = [""] * n
    calibration: Calibration | None = None
    halfw: dict[str, float] = {}
    held_halfw: dict[str, float] = {}
    logo_fits: dict[str, Calibration] = {}
    in_sample: dict[str, ErrorSummary] = {}
    loo_sum: dict[str, ErrorSummary] = {}
    logo_sum: dict[str, ErrorSummary] = {}
    held_sum: dict[str, ErrorSummary] = {}
    by_regime: dict[tuple[str, str], ErrorSummary] = {}
    inside = np.zeros(n, dtype=bool)
    if not cal_idx:
        notes.append("no calibration rows (every mapped GPU is held out): nothing is fitted, "
                     "no prediction is made")  # fmt: skip
    else:
        crow = [rows[i] for i in cal_idx]
        csim = [sims[i] for i in cal_idx]
        assert all(s is not None for s in csim)
        say(f"fitting {len(crow)} calibration rows and their leave-one-out refits")
        calibration = fit_calibration(crow, csim, [cfg_of[i] for i in cal_idx])  # type: ignore[arg-type]
        loo = _loo(crow, csim)  # type: ignore[arg-type]
        loo_p[cal_idx] = loo
        scores = np.log(meas[cal_idx] / loo)
        regimes = [s.regime for s in csim]  # type: ignore[union-attr]
        halfw = _halfwidths(regimes, scores, coverage)
        inside[cal_idx] = _loo_coverage(regimes, scores, coverage)
        for i in cal_idx:
            p, own = calibration.params(rows[i].library)
            s = sims[i]
            assert s is not None
            pred[i] = p.predict_us(s)
            q = halfw[s.regime]
            lo[i], hi[i] = pred[i] * math.exp(-q), pred[i] * math.exp(q)
            which[i] = "library" if own else "pooled"
        # leave one GPU out
        cal_gpus = sorted({cfg_of[i] for i in cal_idx})
        logo_scores: list[float] = []
        logo_regimes: list[str] = []
        if len(cal_gpus) < 2:
            notes.append(f"leave-one-GPU-out needs two calibration GPUs; only {cal_gpus[0]} "
                         "has rows")  # fmt: skip
        for g in cal_gpus if len(cal_gpus) >= 2 else []:
            train = [i for i in cal_idx if cfg_of[i] != g]
            test = [i for i in cal_idx if cfg_of[i] == g]
            say(f"leave {g} out: fitting {len(train)} rows, predicting {len(test)}")
            trow = [rows[i] for i in train]
            tsim = [sims[i] for i in train]
            fit = fit_calibration(trow, tsim, [cfg_of[i] for i in train])  # type: ignore[arg-type]
            logo_fits[g] = fit
            t_loo = _loo(trow, tsim)  # type: ignore[arg-type]
            t_scores = np.log(meas[train] / t_loo)
            t_half = _halfwidths([s.regime for s in tsim], t_scores, coverage)  # type: ignore[union-attr]
            unseen = sorted({rows[i].library for i in test} - set(fit.libraries))
            if unseen:
                notes.append(
                    f"leave {g} out: librar{'ies' if len(unseen) > 1 else 'y'} "
                    f"{', '.join(unseen)} not in the training rows: pooled fit"
                )
            for i in test:
                p, own = fit.params(rows[i].library)
                s = sims[i]
                assert s is not None
                logo_p[i] = p.predict_us(s)
                q = t_half[s.regime]
                logo_lo[i], logo_hi[i] = logo_p[i] * math.exp(-q), logo_p[i] * math.exp(q)
                logo_which[i] = "library" if own else "pooled"
                logo_scores.append(math.log(meas[i] / logo_p[i]))
                logo_regimes.append(s.regime)
        if logo_scores:
            held_halfw = _halfwidths(logo_regimes, np.array(logo_scores), coverage)
        # held-out (never fitted) GPUs
        for i in held_idx:
            p, own = calibration.params(rows[i].library)
            s = sims[i]
            assert s is not None
            pred[i] = p.predict_us(s)
            q = (held_halfw or halfw)[s.regime]
            lo[i], hi[i] = pred[i] * math.exp(-q), pred[i] * math.exp(q)
            which[i] = "library" if own else "pooled"
        if held_idx and not held_halfw:
            notes.append("held-out rows' intervals use the calibration rows' leave-one-out "
                         "scores (no leave-one-GPU-out scores: one calibration GPU)")  # fmt: skip
        pooled_libs = sorted({rows[i].library for i in held_idx if which[i] == "pooled"})
        if pooled_libs:
            notes.append(f"held-out rows of {', '.join(pooled_libs)}: library not in the "
                         "calibration rows, pooled fit")  # fmt: skip
        notes.extend(calibration.notes)
        gcal = _groups(cal_idx, cfg_of)
        in_sample = _summaries(gcal, meas, pred, lo, hi, inside)
        loo_sum = _summaries(gcal, meas, loo_p, None, None)
        if logo_fits:
            logo_sum = _summaries(gcal, meas, logo_p, logo_lo, logo_hi)
        if held_idx:
            held_sum = _summaries(_groups(held_idx, cfg_of), meas, pred, lo, hi)
        for regime in REGIMES:
            ri: dict[str, list[int]] = {
                regime: [i for i in cal_idx if sims[i].regime == regime]  # type: ignore[union-attr]
            }
            for r_, s_ in _summaries(ri, meas, pred, lo, hi, inside).items():
                by_regime[("in_sample", r_)] = s_
            if logo_fits:
                for r_, s_ in _summaries(ri, meas, logo_p, logo_lo, logo_hi).items():
                    by_regime[("logo", r_)] = s_
    preds = []
    for i, r in enumerate(rows):
        role: FitRole = (
            "skipped" if not cfg_of[i] else "held-out" if cfg_of[i] in NEVER_FITTED
            else "calibration"
        )  # fmt: skip
        preds.append(Prediction(
            row=r, gpu_config=cfg_of[i], fit_role=role, sim=sims[i],
            predicted_us=float(pred[i]), lower_us=float(lo[i]), upper_us=float(hi[i]),
            params=which[i], loo_us=float(loo_p[i]), logo_us=float(logo_p[i]),
            logo_lower_us=float(logo_lo[i]), logo_upper_us=float(logo_hi[i]),
            logo_params=logo_which[i],
        ))  # fmt: skip
    return MeasuredValidation(
        table=table,
        predictions=tuple(preds),
        calibration=calibration,
        logo_fits=logo_fits,
        halfwidths=halfw,
        heldout_halfwidths=held_halfw,
        in_sample=in_sample,
        loo=loo_sum,
        logo=logo_sum,
        held_out=held_sum,
        by_regime=by_regime,
        page_tokens=page_tokens,
        coverage=coverage,
        notes=tuple(notes),
    )


def _groups(idx: Sequence[int], cfg_of: Sequence[str]) -> dict[str, list[int]]:
    """Row indices per config, then ``"all"``."""
    out: dict[str, list[int]] = {}
    for i in idx:
        out.setdefault(cfg_of[i], []).append(i)
    out = dict(sorted(out.items()))
    out["all"] = list(idx)
    return out
