"""``coaccel validate gpu --measured FILE.csv``: the GPU simulator against measured decode ops.

Pure computation (reading the CSV is the only I/O; :mod:`coaccel.targets.gpu.measured_report`
prints and writes). docs/gpu_measured.md has the model, the fitted values and the results. The
calibration model, the interval helpers and the metrics live in the private
:mod:`coaccel.targets.gpu._measured_fit`, the CSV's columns and reader in
:mod:`coaccel.targets.gpu._measured_csv`; this module re-exports their public names.

**What is measured.** One row per timed decode-attention op: GPU, kernel library, dtype, batch,
query and KV heads, head dimension, context and the measured time in µs
(:data:`MEASURED_COLUMNS`; the shipped set is ``arch_configs/gpu/measured/
decode_attention_measured.csv``, :func:`shipped_measured_csv`, from [AIC-REPO], [VIDUR-REPO] and
[CS378-VIDUR]). The ops were replayed back to back (CUDA graphs, or repeated profiler runs),
and some include more than the attention kernels (KV append, preprocessing).

**Prediction of a row** (:func:`simulate_row`). The CSV's GPU name maps to a shipped config
(:data:`GPU_CONFIGS`, case-insensitive; an unknown GPU is skipped, not an error). The row's
split-K decode trace (:func:`coaccel.models.gpu.split_k_trace`) is launched as the row's kernel
library launches it on that GPU (:func:`library_launch_kind`,
:func:`coaccel.models.gpu.plan_library_launch`: FlashAttention-2's or FlashAttention-3's split
rule, tiles and combine; ``launch="flashdecode"`` or a library not modelled takes the package's
split rule for the config's SMs with ``block_n`` 128 or the largest tile that fits an SM's
shared memory; :data:`LAUNCH_FORMS`), with paged KV of
``page_tokens`` tokens per block: the pages sit in sequence order, which the analytical tier
cannot tell from a shuffled block table, as its hit rule and DRAM runs do not depend on where a
page lies) is marked ``replayed`` (warm L2, :data:`coaccel.sim.gpu_mem.traffic.REPLAYED_KEY`):
when the KV cache, queries and outputs fit the config's effective L2 together, the replays read
them from L2, not DRAM; otherwise nothing changes. It is simulated analytically with the gap
between two kernels of a CUDA graph (:func:`coaccel.targets.gpu.ffd.graph_launch_us`) instead
of the stream launch latency. The simulated time ``T_sim`` uses datasheet and microbenchmark
figures only.

**Calibration** (:func:`fit_library`, :class:`Calibration`): what no datasheet gives, per
kernel library (the ``kernel`` column), never per GPU, so that they transfer to a GPU they
never saw, a floor and an efficiency (one per regime with ``efficiency_form="regime"``, the
default; :data:`EFFICIENCY_FORMS`)::

    t = floor_kcycles * 1000 / f_sm_mhz + T_sim / efficiency[regime]

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

The fitted figures become the calibration file the GPU simulator applies to every
decode-attention op (:mod:`coaccel.targets.gpu.measured_calibration`,
:mod:`coaccel.sim.gpu_mem.intervals`, whose :func:`~coaccel.sim.gpu_mem.intervals.regime_of` is
the regime rule of :func:`simulate_row`).

Public: :data:`MEASURED_COLUMNS`, :data:`GPU_CONFIGS`, :data:`DTYPES`, :data:`NEVER_FITTED`,
:data:`COVERAGE`, :data:`COMPUTE_CAPABILITY`, :data:`LAUNCH_FORMS`, :data:`EFFICIENCY_FORMS`,
:data:`DEFAULT_LAUNCH`, :data:`DEFAULT_EFFICIENCY_FORM`, :func:`library_launch_kind`,
:class:`MeasuredRow`, :class:`MeasuredTable`, :func:`read_measured_csv`,
:func:`shipped_measured_csv`, :func:`gpu_config`, :class:`RowSim`, :func:`decode_trace`,
:func:`simulate_row`, :class:`LibraryParams`, :class:`Calibration`, :func:`fit_library`,
:func:`fit_calibration`, :class:`Prediction`, :func:`conformal_halfwidth`,
:func:`kendall_tau`, :class:`ErrorSummary`, :func:`error_summary`,
:class:`MeasuredValidation`, :func:`evaluate_measured`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from coaccel.models.gpu import COMPUTE_CAPABILITY, library_launch_kind
from coaccel.spine.errors import CoaccelError
from coaccel.targets.gpu._measured_csv import (
    DTYPES,
    GPU_CONFIGS,
    MEASURED_COLUMNS,
    MeasuredRow,
    MeasuredTable,
    gpu_config,
    read_measured_csv,
    shipped_measured_csv,
)
from coaccel.targets.gpu._measured_fit import (
    COVERAGE,
    EFFICIENCY_FORMS,
    MIN_ROWS_PER_LIBRARY,
    REGIMES,
    Calibration,
    EfficiencyForm,
    ErrorSummary,
    LibraryParams,
    Regime,
    conformal_halfwidth,
    error_summary,
    fit_calibration,
    fit_library,
    group_summaries,
    kendall_tau,
    loo_coverage,
    loo_predictions,
    regime_halfwidths,
)

__all__ = [
    "COMPUTE_CAPABILITY",
    "COVERAGE",
    "DEFAULT_EFFICIENCY_FORM",
    "DEFAULT_LAUNCH",
    "DTYPES",
    "EFFICIENCY_FORMS",
    "GPU_CONFIGS",
    "LAUNCH_FORMS",
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
    "library_launch_kind",
    "read_measured_csv",
    "shipped_measured_csv",
    "simulate_row",
]

NEVER_FITTED = frozenset({"h100_sxm", "h200"})
"""Configs whose rows are never fitted (Hopper: predicted from datasheets and microbenchmarks
alone, held out)."""


LaunchForm = Literal["library", "flashdecode"]
LAUNCH_FORMS: tuple[LaunchForm, ...] = ("library", "flashdecode")
"""How a row's op is launched in the simulation: ``library`` what its kernel library launches
on its GPU (:func:`library_launch_kind`), ``flashdecode`` the package's own split rule for every
row (the form before the libraries' plans were modelled; kept for comparison)."""

DEFAULT_LAUNCH: LaunchForm = "library"
DEFAULT_EFFICIENCY_FORM: EfficiencyForm = "regime"
"""The model form selected on the calibration rows' leave-one-out error (docs/gpu_measured.md
§5): every library's own launch, one efficiency per regime and library."""

DEFAULT_PAGE_TOKENS = 64
"""Tokens per paged-KV block when not given ([AIC-REPO] vLLM collector: block 64)."""

MAX_TILES = 2**21
"""Most K/V tiles one row's trace may have (two records each; the shipped rows have at most
131,072): a larger op is refused before any simulation."""

FitRole = Literal["calibration", "held-out", "skipped"]


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
        launch: the launch simulated (:func:`library_launch_kind`).
    """

    sim_us: float
    regime: Regime
    l2_hit_fraction: float
    num_splits: int
    ctas: int
    block_n: int
    bound: str
    freq_mhz: float
    launch: str = "flashdecode"


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
    row: MeasuredRow,
    arch: Any,
    *,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    replayed: bool = True,
    kind: str = "flashdecode",
    compute_capability: int = 80,
) -> Any:
    """The split-K decode trace of a row on a GPU (module docstring).

    Args:
        row: the measured row. arch: the GPU config (its SM count picks the split count).
        page_tokens: tokens per paged-KV block (recorded; see the module docstring).
        replayed: mark the trace as back-to-back replays (warm L2 where the data fits).
        kind: the launch (:func:`library_launch_kind`; ``"flashdecode"``: the package's rule
            with ``block_n`` 128 or the largest tile that fits).
        compute_capability: the GPU's (:data:`COMPUTE_CAPABILITY`), for ``fa3_sm8x``.

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    from coaccel.models.gpu import DecodeShape, plan_library_launch, split_k_trace
    from coaccel.sim.gpu_mem.traffic import REPLAYED_KEY

    shape = DecodeShape(row.batch, row.context_len, row.n_q_heads, row.n_kv_heads, row.head_dim)
    launch = plan_library_launch(shape, kind, n_sms=arch.sm.count,  # type: ignore[arg-type]
                                 compute_capability=compute_capability,
                                 block_n=_block_n(row, arch))  # fmt: skip
    meta = {REPLAYED_KEY: bool(replayed), "kv_page_tokens": int(page_tokens), "dtype": row.dtype,
            "launch": kind}  # fmt: skip
    return split_k_trace(launch.plan, workload=meta, combine=launch.combine,
                         combine_rows_per_cta=launch.combine_rows_per_cta,
                         combine_stages=launch.combine_stages)  # fmt: skip


def simulate_row(
    row: MeasuredRow,
    arch: Any,
    *,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    replayed: bool = True,
    graph_gap_us: float | None = None,
    kind: str = "flashdecode",
    compute_capability: int = 80,
) -> RowSim:
    """Simulate a row's op analytically (module docstring).

    Args:
        row: the measured row. arch: the GPU config.
        page_tokens: tokens per paged-KV block. replayed: warm L2 (back-to-back replays).
        graph_gap_us: gap between two kernels, µs (None: the CUDA-graph gap,
            :func:`coaccel.targets.gpu.ffd.graph_launch_us`).
        kind: the launch (:func:`decode_trace`). compute_capability: the GPU's.

    Returns:
        :class:`RowSim`.
    """
    from coaccel.sim.gpu_mem import simulate
    from coaccel.sim.gpu_mem.intervals import regime_of
    from coaccel.targets.gpu.ffd import graph_launch_us, graph_mode

    gap = graph_launch_us() if graph_gap_us is None else graph_gap_us
    a = graph_mode(arch, gap)
    trace = decode_trace(row, a, page_tokens=page_tokens, replayed=replayed, kind=kind,
                         compute_capability=compute_capability)  # fmt: skip
    res = simulate(a, trace, mode="analytical")
    split = res.kernels[0]
    frac = split.l2_hits / split.sector_requests if split.sector_requests else 0.0
    wl = trace.meta["workload"]
    return RowSim(
        sim_us=res.seconds * 1e6,
        regime=regime_of(split.l2_hits, split.sector_requests),
        l2_hit_fraction=frac,
        num_splits=int(wl["num_splits"]),
        ctas=split.ctas,
        block_n=int(wl["block_n"]),
        bound=split.bound,
        freq_mhz=float(arch.sm.freq_mhz),
        launch=kind,
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
        launch: the launch form simulated (:data:`LAUNCH_FORMS`).
        efficiency_form: one efficiency per library or one per regime
            (:data:`EFFICIENCY_FORMS`).
        cold_l2: configs whose rows were simulated with a cold L2.
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
    launch: LaunchForm = DEFAULT_LAUNCH
    efficiency_form: EfficiencyForm = DEFAULT_EFFICIENCY_FORM
    cold_l2: tuple[str, ...] = ()


SimulateRow = Callable[[MeasuredRow, Any], RowSim]


@dataclass
class _Run:
    """One evaluation in progress (:func:`evaluate_measured`): its inputs, and the per-row
    results that the stages fill in.

    Attributes:
        rows: the table's rows. cfg_of: each row's config (``""``: skipped).
        sims: each row's simulation (None: skipped). coverage: target coverage.
        say: the progress callback. notes: the notes so far, in the order written.
        efficiency_form: of the fits.
        meas: measured times, µs. The per-row results, indexed like ``rows`` (NaN or ``""``
            where a row has none): pred, lo, hi, which (prediction, interval, µs, and
            ``"library"`` / ``"pooled"``); loo_p (leave-one-out prediction, µs) and inside (is
            it inside the other rows' interval); logo_p, logo_lo, logo_hi, logo_which (the same
            for leave one GPU out).
    """

    rows: Sequence[MeasuredRow]
    cfg_of: Sequence[str]
    sims: Sequence[RowSim | None]
    coverage: float
    say: Callable[[str], None]
    notes: list[str]
    efficiency_form: EfficiencyForm = DEFAULT_EFFICIENCY_FORM
    meas: np.ndarray = field(init=False)
    pred: np.ndarray = field(init=False)
    lo: np.ndarray = field(init=False)
    hi: np.ndarray = field(init=False)
    which: list[str] = field(init=False)
    loo_p: np.ndarray = field(init=False)
    inside: np.ndarray = field(init=False)
    logo_p: np.ndarray = field(init=False)
    logo_lo: np.ndarray = field(init=False)
    logo_hi: np.ndarray = field(init=False)
    logo_which: list[str] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.rows)
        self.meas = np.array([r.measured_us for r in self.rows])
        for name in ("pred", "lo", "hi", "loo_p", "logo_p", "logo_lo", "logo_hi"):
            setattr(self, name, np.full(n, math.nan))
        self.which, self.logo_which = [""] * n, [""] * n
        self.inside = np.zeros(n, dtype=bool)

    def sim(self, i: int) -> RowSim:
        """The simulation of row ``i``, which has a config."""
        s = self.sims[i]
        assert s is not None  # every row with a config is simulated
        return s


@dataclass(frozen=True)
class _Fitted:
    """What the calibration stages give :class:`MeasuredValidation` (the defaults: nothing
    fitted); the fields are those of :class:`MeasuredValidation`."""

    calibration: Calibration | None = None
    logo_fits: Mapping[str, Calibration] = field(default_factory=dict)
    halfwidths: Mapping[str, float] = field(default_factory=dict)
    heldout_halfwidths: Mapping[str, float] = field(default_factory=dict)
    in_sample: Mapping[str, ErrorSummary] = field(default_factory=dict)
    loo: Mapping[str, ErrorSummary] = field(default_factory=dict)
    logo: Mapping[str, ErrorSummary] = field(default_factory=dict)
    held_out: Mapping[str, ErrorSummary] = field(default_factory=dict)
    by_regime: Mapping[tuple[str, str], ErrorSummary] = field(default_factory=dict)


def evaluate_measured(
    table: MeasuredTable,
    *,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    coverage: float = COVERAGE,
    simulate: SimulateRow | None = None,
    load_arch: Callable[[str], Any] | None = None,
    progress: Callable[[str], None] | None = None,
    launch: LaunchForm = DEFAULT_LAUNCH,
    efficiency_form: EfficiencyForm = DEFAULT_EFFICIENCY_FORM,
    cold_l2: Sequence[str] = (),
) -> MeasuredValidation:
    """Simulate, calibrate and judge every row of a measured CSV (module docstring).

    Args:
        table: the rows (:func:`read_measured_csv`).
        page_tokens: tokens per paged-KV block of the traces.
        coverage: target coverage of the intervals.
        simulate: ``(row, arch) -> RowSim`` (default :func:`simulate_row` with the row's
            launch; tests may pass a stand-in).
        load_arch: config name -> config (default :func:`coaccel.sim.gpu_mem.load_arch`).
        progress: called with one line now and then (simulating, fitting).
        launch: ``library`` (each row launched as its library launches it,
            :func:`library_launch_kind`) or ``flashdecode`` (the package's rule for every row).
        efficiency_form: ``single`` (one efficiency per library) or ``regime`` (one per
            regime and library).
        cold_l2: configs whose rows are simulated with a cold L2 (as timed after an L2 flush)
            instead of the warm replays; a diagnostic (docs/gpu_measured.md section 4).

    Returns:
        :class:`MeasuredValidation`.

    Raises:
        ValueError: an unknown launch or efficiency form, or a ``cold_l2`` name that is not a
            config of :data:`GPU_CONFIGS`.
    """
    if launch not in LAUNCH_FORMS:
        raise ValueError(f"launch={launch!r}; valid: {', '.join(LAUNCH_FORMS)}")
    if efficiency_form not in EFFICIENCY_FORMS:
        raise ValueError(f"efficiency_form={efficiency_form!r}; valid: "
                         f"{', '.join(EFFICIENCY_FORMS)}")  # fmt: skip
    known = sorted(set(GPU_CONFIGS.values()))
    bad = [c for c in cold_l2 if c not in known]
    if bad:
        raise ValueError(f"cold_l2: {', '.join(bad)} not a GPU config; valid: {', '.join(known)}")
    cold = tuple(sorted(set(cold_l2)))
    say = progress or (lambda _m: None)
    if load_arch is None:
        from coaccel.sim.gpu_mem import load_arch as _load

        load_arch = _load
    cfg_of = [gpu_config(r.gpu) or "" for r in table.rows]
    kind_of = [
        library_launch_kind(r.library, c) if launch == "library" and c else "flashdecode"
        for r, c in zip(table.rows, cfg_of, strict=True)
    ]

    def default_sim(r: MeasuredRow, a: Any, kind: str, cfg: str) -> RowSim:
        return simulate_row(r, a, page_tokens=page_tokens, kind=kind, replayed=cfg not in cold,
                            compute_capability=COMPUTE_CAPABILITY.get(cfg, 80))  # fmt: skip

    sim_fn: Callable[[MeasuredRow, Any, str, str], RowSim] = (
        default_sim if simulate is None else (lambda r, a, _k, _c: simulate(r, a))
    )
    notes = _skipped_notes(table.rows, cfg_of)
    archs = {c: load_arch(c) for c in sorted({c for c in cfg_of if c})}
    if simulate is None:
        _check_sizes(table, cfg_of, archs)
    notes.extend(_launch_notes(table.rows, cfg_of, kind_of))
    sims = _simulate_rows(table.rows, cfg_of, kind_of, archs, sim_fn, say)
    run = _Run(table.rows, cfg_of, sims, coverage, say, notes, efficiency_form)
    todo = [i for i, c in enumerate(cfg_of) if c]
    cal_idx = [i for i in todo if cfg_of[i] not in NEVER_FITTED]
    held_idx = [i for i in todo if cfg_of[i] in NEVER_FITTED]
    if cal_idx:
        fitted = _calibrate(run, cal_idx, held_idx)
    else:
        fitted = _Fitted()
        notes.append("no calibration rows (every mapped GPU is held out): nothing is fitted, "
                     "no prediction is made")  # fmt: skip
    return MeasuredValidation(
        table=table,
        predictions=_predictions(run),
        calibration=fitted.calibration,
        logo_fits=fitted.logo_fits,
        halfwidths=fitted.halfwidths,
        heldout_halfwidths=fitted.heldout_halfwidths,
        in_sample=fitted.in_sample,
        loo=fitted.loo,
        logo=fitted.logo,
        held_out=fitted.held_out,
        by_regime=fitted.by_regime,
        page_tokens=page_tokens,
        coverage=coverage,
        notes=tuple(notes),
        launch=launch,
        efficiency_form=efficiency_form,
        cold_l2=cold,
    )


def _skipped_notes(rows: Sequence[MeasuredRow], cfg_of: Sequence[str]) -> list[str]:
    """A note on the rows skipped for a GPU without a config (none when every GPU has one)."""
    skipped = sorted({r.gpu for r, c in zip(rows, cfg_of, strict=True) if not c})
    if not skipped:
        return []
    n = sum(1 for c in cfg_of if not c)
    return [f"{n} row(s) skipped: no config for GPU {', '.join(repr(g) for g in skipped)} "
            f"(known: {', '.join(sorted(set(GPU_CONFIGS)))})"]  # fmt: skip


def _launch_notes(
    rows: Sequence[MeasuredRow], cfg_of: Sequence[str], kind_of: Sequence[str]
) -> list[str]:
    """A note on each library whose held-out rows are launched otherwise than its calibration
    rows: its fit is applied to another kernel (or, as ``flashdecode``, to the package's
    launch where the library's kernels on that GPU are not modelled)."""
    fitted: dict[str, set[str]] = {}
    held: dict[tuple[str, str], set[str]] = {}
    for r, c, k in zip(rows, cfg_of, kind_of, strict=True):
        if c and c not in NEVER_FITTED:
            fitted.setdefault(r.library, set()).add(k)
        elif c:
            held.setdefault((r.library, c), set()).add(k)
    out = []
    for (lib, c), kinds in sorted(held.items()):
        if lib in fitted and kinds != fitted[lib]:
            how = (
                "the package's rule: its kernels there are not modelled"
                if kinds == {"flashdecode"}
                else "its kernels on that GPU"
            )
            made = ", ".join(sorted(fitted[lib]))
            out.append(f"held-out rows of {lib} on {c}: launch {', '.join(sorted(kinds))} "
                       f"({how}); its fit was made on {made}")  # fmt: skip
    return out


def _check_sizes(table: MeasuredTable, cfg_of: Sequence[str], archs: Mapping[str, Any]) -> None:
    """Refuse, before any simulation, a row whose trace would have over :data:`MAX_TILES`
    K/V tiles (:class:`CoaccelError` naming the file and line)."""
    for r, c in zip(table.rows, cfg_of, strict=True):
        tiles = r.batch * r.n_kv_heads * -(-r.context_len // _block_n(r, archs[c])) if c else 0
        if tiles > MAX_TILES:
            raise CoaccelError(
                f"{table.path}: line {r.line}: {tiles} K/V tiles (batch x n_kv_heads x "
                f"context_len / tile) to simulate; at most {MAX_TILES}"
            )


def _simulate_rows(
    rows: Sequence[MeasuredRow],
    cfg_of: Sequence[str],
    kind_of: Sequence[str],
    archs: Mapping[str, Any],
    sim_fn: Callable[[MeasuredRow, Any, str, str], RowSim],
    say: Callable[[str], None],
) -> list[RowSim | None]:
    """Simulate every row with a config (None for the others), each distinct op once (rows of
    the same config, launch, dtype and shape share a simulation), reporting every 20 rows."""
    sims: list[RowSim | None] = [None] * len(rows)
    cache: dict[tuple[Any, ...], RowSim] = {}
    todo = [i for i, c in enumerate(cfg_of) if c]
    for k, i in enumerate(todo):
        r = rows[i]
        key = (cfg_of[i], kind_of[i], r.dtype, r.batch, r.n_q_heads, r.n_kv_heads,
               r.head_dim, r.context_len)  # fmt: skip
        if key not in cache:
            cache[key] = sim_fn(r, archs[cfg_of[i]], kind_of[i], cfg_of[i])
        sims[i] = cache[key]
        if (k + 1) % 20 == 0 or k + 1 == len(todo):
            say(f"simulated {k + 1}/{len(todo)} rows ({len(cache)} distinct ops)")
    return sims


def _calibrate(run: _Run, cal_idx: Sequence[int], held_idx: Sequence[int]) -> _Fitted:
    """Fit the calibration rows, leave each calibration GPU out, predict the held-out rows,
    and summarize the errors (module docstring); ``cal_idx`` is not empty."""
    calibration, halfw = _fit_in_sample(run, cal_idx)
    logo_fits, held_halfw = _leave_one_gpu_out(run, cal_idx)
    _predict_held_out(run, held_idx, calibration, halfw, held_halfw)
    run.notes.extend(calibration.notes)
    gcal = _groups(cal_idx, run.cfg_of)
    return _Fitted(
        calibration=calibration,
        logo_fits=logo_fits,
        halfwidths=halfw,
        heldout_halfwidths=held_halfw,
        in_sample=group_summaries(gcal, run.meas, run.pred, run.lo, run.hi, run.inside),
        loo=group_summaries(gcal, run.meas, run.loo_p, None, None),
        logo=group_summaries(gcal, run.meas, run.logo_p, run.logo_lo, run.logo_hi)
        if logo_fits
        else {},
        held_out=(
            group_summaries(_groups(held_idx, run.cfg_of), run.meas, run.pred, run.lo, run.hi)
            if held_idx
            else {}
        ),  # fmt: skip
        by_regime=_regime_summaries(run, cal_idx, bool(logo_fits)),
    )


def _predict(run: _Run, fit: Calibration, halfw: Mapping[str, float], idx: Sequence[int],
             *, logo: bool = False) -> None:  # fmt: skip
    """Predict rows ``idx`` with ``fit`` and give each the interval of half-width
    ``halfw[regime]``: into ``pred``, ``lo``, ``hi``, ``which`` (``logo``: the ``logo_``
    ones)."""
    if logo:
        out, lo, hi, which = run.logo_p, run.logo_lo, run.logo_hi, run.logo_which
    else:
        out, lo, hi, which = run.pred, run.lo, run.hi, run.which
    for i in idx:
        p, own = fit.params(run.rows[i].library)
        s = run.sim(i)
        out[i] = p.predict_us(s)
        q = halfw[s.regime]
        lo[i], hi[i] = out[i] * math.exp(-q), out[i] * math.exp(q)
        which[i] = "library" if own else "pooled"


def _fit_in_sample(run: _Run, cal_idx: Sequence[int]) -> tuple[Calibration, dict[str, float]]:
    """Fit every calibration row; the leave-one-out predictions give the interval
    half-widths per regime and each row's coverage; predict the calibration rows.

    Returns:
        The fit and its half-widths (regime -> log ratio).
    """
    crow = [run.rows[i] for i in cal_idx]
    csim = [run.sim(i) for i in cal_idx]
    run.say(f"fitting {len(crow)} calibration rows and their leave-one-out refits")
    form = run.efficiency_form
    calibration = fit_calibration(crow, csim, [run.cfg_of[i] for i in cal_idx],
                                  efficiency_form=form)  # fmt: skip
    loo = loo_predictions(crow, csim, efficiency_form=form)
    run.loo_p[cal_idx] = loo
    scores = np.log(run.meas[cal_idx] / loo)
    regimes = [s.regime for s in csim]
    halfw = regime_halfwidths(regimes, scores, run.coverage)
    run.inside[cal_idx] = loo_coverage(regimes, scores, run.coverage)
    _predict(run, calibration, halfw, cal_idx)
    return calibration, halfw


def _leave_one_gpu_out(
    run: _Run, cal_idx: Sequence[int]
) -> tuple[dict[str, Calibration], dict[str, float]]:
    """Predict each calibration GPU from a fit on the others (:func:`_logo_fold`), with two
    or more calibration GPUs (else a note).

    Returns:
        GPU -> its fold's fit, and the held-out half-widths from the folds' scores (regime ->
        log ratio; empty without folds).
    """
    cal_gpus = sorted({run.cfg_of[i] for i in cal_idx})
    if len(cal_gpus) < 2:
        run.notes.append(f"leave-one-GPU-out needs two calibration GPUs; only {cal_gpus[0]} "
                         "has rows")  # fmt: skip
        return {}, {}
    logo_fits: dict[str, Calibration] = {}
    scores: list[float] = []
    regimes: list[str] = []
    for g in cal_gpus:
        logo_fits[g] = _logo_fold(run, cal_idx, g)
        test = [i for i in cal_idx if run.cfg_of[i] == g]
        scores += [math.log(run.meas[i] / run.logo_p[i]) for i in test]
        regimes += [run.sim(i).regime for i in test]
    held_halfw = regime_halfwidths(regimes, np.array(scores), run.coverage) if scores else {}
    return logo_fits, held_halfw


def _logo_fold(run: _Run, cal_idx: Sequence[int], gpu: str) -> Calibration:
    """Fit the calibration rows of the other GPUs and predict ``gpu``'s rows, with intervals
    from the training rows' leave-one-out scores; note libraries the training rows lack.

    Returns:
        The fold's fit.
    """
    train = [i for i in cal_idx if run.cfg_of[i] != gpu]
    test = [i for i in cal_idx if run.cfg_of[i] == gpu]
    run.say(f"leave {gpu} out: fitting {len(train)} rows, predicting {len(test)}")
    trow = [run.rows[i] for i in train]
    tsim = [run.sim(i) for i in train]
    form = run.efficiency_form
    fit = fit_calibration(trow, tsim, [run.cfg_of[i] for i in train], efficiency_form=form)
    t_loo = loo_predictions(trow, tsim, efficiency_form=form)
    t_scores = np.log(run.meas[train] / t_loo)
    t_half = regime_halfwidths([s.regime for s in tsim], t_scores, run.coverage)
    unseen = sorted({run.rows[i].library for i in test} - set(fit.libraries))
    if unseen:
        run.notes.append(
            f"leave {gpu} out: librar{'ies' if len(unseen) > 1 else 'y'} "
            f"{', '.join(unseen)} not in the training rows: pooled fit"
        )
    _predict(run, fit, t_half, test, logo=True)
    return fit


def _predict_held_out(
    run: _Run,
    held_idx: Sequence[int],
    calibration: Calibration,
    halfw: Mapping[str, float],
    held_halfw: Mapping[str, float],
) -> None:
    """Predict the never-fitted GPUs' rows from the full fit, with the leave-one-GPU-out
    half-widths (the calibration ones without them); note the fallbacks."""
    _predict(run, calibration, held_halfw or halfw, held_idx)
    if held_idx and not held_halfw:
        run.notes.append("held-out rows' intervals use the calibration rows' leave-one-out "
                         "scores (no leave-one-GPU-out scores: one calibration GPU)")  # fmt: skip
    pooled_libs = sorted({run.rows[i].library for i in held_idx if run.which[i] == "pooled"})
    if pooled_libs:
        run.notes.append(f"held-out rows of {', '.join(pooled_libs)}: library not in the "
                         "calibration rows, pooled fit")  # fmt: skip


def _regime_summaries(
    run: _Run, cal_idx: Sequence[int], logo: bool
) -> dict[tuple[str, str], ErrorSummary]:
    """Errors of the calibration rows per regime, over all GPUs: ``("in_sample", regime)``
    and, with leave-one-GPU-out (``logo``), ``("logo", regime)``."""
    by_regime: dict[tuple[str, str], ErrorSummary] = {}
    for regime in REGIMES:
        ri: dict[str, list[int]] = {regime: [i for i in cal_idx if run.sim(i).regime == regime]}
        for r_, s_ in group_summaries(ri, run.meas, run.pred, run.lo, run.hi, run.inside).items():
            by_regime[("in_sample", r_)] = s_
        if logo:
            for r_, s_ in group_summaries(
                ri, run.meas, run.logo_p, run.logo_lo, run.logo_hi
            ).items():
                by_regime[("logo", r_)] = s_
    return by_regime


def _predictions(run: _Run) -> tuple[Prediction, ...]:
    """One :class:`Prediction` per row, in file order, from the run's per-row results."""
    preds = []
    for i, r in enumerate(run.rows):
        c = run.cfg_of[i]
        role: FitRole = "skipped" if not c else "held-out" if c in NEVER_FITTED else "calibration"
        preds.append(Prediction(
            row=r, gpu_config=c, fit_role=role, sim=run.sims[i],
            predicted_us=float(run.pred[i]), lower_us=float(run.lo[i]),
            upper_us=float(run.hi[i]), params=run.which[i], loo_us=float(run.loo_p[i]),
            logo_us=float(run.logo_p[i]), logo_lower_us=float(run.logo_lo[i]),
            logo_upper_us=float(run.logo_hi[i]), logo_params=run.logo_which[i],
        ))  # fmt: skip
    return tuple(preds)


def _groups(idx: Sequence[int], cfg_of: Sequence[str]) -> dict[str, list[int]]:
    """Row indices per config, then ``"all"``."""
    out: dict[str, list[int]] = {}
    for i in idx:
        out.setdefault(cfg_of[i], []).append(i)
    out = dict(sorted(out.items()))
    out["all"] = list(idx)
    return out
