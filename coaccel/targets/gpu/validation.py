"""``coaccel validate gpu``: the GPU memory-hierarchy simulator against measured anchors.

Pure computation (no printing, no files): :func:`validate_gpu` returns a
:class:`GpuValidation` whose :class:`Anchor` rows hold a measured (or derived) figure with its
source, our simulated value with an uncertainty band, the error and whether the figure was used
to set the shipped config (``fitted``) or not (``predicted``); :class:`Series` rows give MAPE and
Pearson correlation over measured curves, the way LLMCompass (operator error) and Accel-Sim
(correlation) report theirs; :class:`TierError` rows give the analytical vs cycle-tier
difference. :mod:`coaccel.targets.gpu.validation_report` writes it.

Anchors and series ([S12] gpu-benches result files, the same series as
``arch_configs/gpu/measured/*_gpu_benches.csv``, shipped with the package):

* streaming-read bandwidth plateaus: H200 3.89 TB/s, A100-80GB 1.73 TB/s (DRAM), and the L2
  plateaus, fitted; the whole curve against working-set size (MAPE, Pearson) with its L2
  capacity knee;
* pointer-chase latency per level (A100-80GB: L1, near and far L2, DRAM) and the A100 curve;
* the shape of the PCIe copy curve (bandwidth over its plateau against copy size, V100 Gen3
  cudaMemcpy of the gpu-benches README), predicted from the config's link model;
* W1 FlashDecoding decode-attention time of one layer against context on H200 and A100, against
  the bandwidth-bound time of its bytes at the measured plateau ([DERIVED] 512 MiB / 3.89 TB/s
  = 138 us at 128K on an H200), predicted; with the linearity in context once the grid fills
  the GPU;
* W2 FFD (:mod:`coaccel.targets.gpu.ffd`): speedup over W1 against keep ratio beside the
  traffic bound and the paper's 11.6x at 256K, and the output error against dense attention
  at each keep ratio.

The band of a prediction is the simulated value with every bandwidth and efficiency of the
config scaled by ``1 -+ BAND_FRACTION`` and every latency by ``1 +- BAND_FRACTION`` ([OURS]:
unit-to-unit and clock variation are not published; 5 % is our allowance).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from coaccel.spine.config import override
from coaccel.spine.errors import CoaccelError
from coaccel.targets.gpu.fit import (
    CalibrationRow,
    measured_value,
    predict,
    read_calibration_csv,
    select_rows,
)

__all__ = [
    "BAND_FRACTION",
    "W1_FULL_GRID_TOKENS",
    "Anchor",
    "GpuValidation",
    "Series",
    "TierError",
    "mape_pct",
    "pearson_r",
    "validate_gpu",
    "w1_seconds",
]

W1_FULL_GRID_TOKENS = 16384
"""Context from which W1 is compared with the bandwidth-bound line: with B = 1 the split rule
fills the GPU with CTAs of at least 8 tiles from here on; below, launch and latency dominate,
as the FlashDecoding blog reports near-constant time up to long contexts ([FLASHDECODING])."""

W1_SPLIT_KERNEL = "flash_decode_split"
"""Name of W1's split kernel in its trace: the kernel the derived anchors describe."""

BAND_FRACTION = 0.05
"""Relative perturbation of bandwidths and latencies that gives a prediction's band ([OURS])."""

Fit = Literal["fitted", "predicted"]
Simulate = Callable[[Any, Any, str], Any]

MEASURED_DIR = "gpu/measured"
"""Folder of the published measured series under the shipped ``arch_configs``."""


def measured_csv(gpu: str) -> Path:
    """The shipped CSV of published microbenchmark series of a GPU config.

    Args:
        gpu: config name (``"a100_80g"``, ``"h200"``).

    Returns:
        Path of ``arch_configs/gpu/measured/<gpu>_gpu_benches.csv`` (calibration CSV schema,
        docs/gpu_decode.md).

    Raises:
        CoaccelError: no such series is shipped.
    """
    from importlib.resources import files

    p = Path(str(files("coaccel.arch_configs"))) / MEASURED_DIR / f"{gpu}_gpu_benches.csv"
    if not p.is_file():
        raise CoaccelError(f"no published microbenchmark series of {gpu!r} is shipped at {p}")
    return p


@dataclass(frozen=True)
class Anchor:
    """One measured (or derived) figure and our simulated value.

    Attributes:
        group: ``stream``, ``l2``, ``latency``, ``pcie`` or ``w1``.
        name: what is compared.
        measured: the published figure (NaN where none).
        ours: our simulated value.
        ours_low: lower end of our band. ours_high: upper end.
        unit: unit of all four.
        source: reference key and file/table of the published figure.
        fit: ``fitted`` when the figure set the shipped config, else ``predicted``.
        note: how our value was obtained.
    """

    group: str
    name: str
    measured: float
    ours: float
    ours_low: float
    ours_high: float
    unit: str
    source: str
    fit: Fit
    note: str = ""

    @property
    def error_pct(self) -> float:
        """``100 * (ours / measured - 1)`` (NaN without a measured figure)."""
        if math.isnan(self.measured) or self.measured == 0:
            return math.nan
        return 100.0 * (self.ours / self.measured - 1.0)

    @property
    def within_band(self) -> bool:
        """Whether the measured figure lies inside our band."""
        return bool(self.ours_low <= self.measured <= self.ours_high)


@dataclass(frozen=True)
class Series:
    """Agreement over a measured curve.

    Attributes:
        name: the curve. n: points. mape_pct: mean absolute percentage error, percent.
        pearson_r: Pearson correlation of measured and ours. fit: as in :class:`Anchor`.
        source: where the curve is published.
    """

    name: str
    n: int
    mape_pct: float
    pearson_r: float
    fit: Fit
    source: str


@dataclass(frozen=True)
class TierError:
    """The analytical and cycle tiers on one workload.

    Attributes:
        workload: label. analytical_s: analytical time, s. cycle_s: cycle-tier time, s.
    """

    workload: str
    analytical_s: float
    cycle_s: float

    @property
    def error_pct(self) -> float:
        """``100 * (cycle / analytical - 1)``."""
        return 100.0 * (self.cycle_s / self.analytical_s - 1.0)


@dataclass(frozen=True)
class GpuValidation:
    """All anchors, series and tier comparisons (:func:`validate_gpu`)."""

    anchors: tuple[Anchor, ...]
    series: tuple[Series, ...]
    tiers: tuple[TierError, ...]
    notes: tuple[str, ...]
    mode: str


def mape_pct(measured: Sequence[float], ours: Sequence[float]) -> float:
    """Mean absolute percentage error of ``ours`` against ``measured``, percent."""
    m = np.asarray(measured, dtype=np.float64)
    o = np.asarray(ours, dtype=np.float64)
    return float(np.mean(np.abs(o / m - 1.0)) * 100.0)


def pearson_r(measured: Sequence[float], ours: Sequence[float]) -> float:
    """Pearson correlation coefficient (NaN when either side is constant)."""
    m = np.asarray(measured, dtype=np.float64)
    o = np.asarray(ours, dtype=np.float64)
    if m.size < 2 or np.std(m) == 0 or np.std(o) == 0:
        return math.nan
    return float(np.corrcoef(m, o)[0, 1])


def _default_simulate(arch: Any, workload: Any, mode: str) -> Any:
    from coaccel.simulation import simulate

    return simulate(arch, workload, mode=mode)


def _band_configs(arch: Any) -> tuple[Any, Any]:
    """(slow, fast) variants: bandwidths and efficiencies -/+ BAND_FRACTION, latencies +/-."""

    def variant(sign: int) -> Any:
        u = BAND_FRACTION
        bw = 1 + sign * u
        lat = 1 - sign * u
        eff = [
            {"transfer_bytes": p.transfer_bytes, "efficiency": min(1.0, p.efficiency * bw)}
            for p in arch.dram.efficiency
        ]
        link_eff = [
            {"transfer_bytes": p.transfer_bytes, "efficiency": min(1.0, p.efficiency * bw)}
            for p in arch.host_link.efficiency
        ]
        return override(
            arch,
            {
                "dram.efficiency": eff,
                "dram.latency_ns": arch.dram.latency_ns * lat,
                "l2.hit_bw_gb_per_s": arch.l2.hit_bw_gb_per_s * bw,
                "l2.near_latency_cycles": round(arch.l2.near_latency_cycles * lat),
                "l2.far_latency_cycles": round(arch.l2.far_latency_cycles * lat),
                "sm.l1_latency_cycles": round(arch.sm.l1_latency_cycles * lat),
                "host_link.efficiency": link_eff,
                "host_link.copy_fixed_us": arch.host_link.copy_fixed_us * lat,
                "launch_overhead_us": arch.launch_overhead_us * lat,
            },
        )

    return variant(-1), variant(+1)


def _band(values: Sequence[float]) -> tuple[float, float]:
    return min(values), max(values)


def w1_seconds(
    arch: Any,
    context: int,
    *,
    batch: int = 1,
    num_splits: int | None = None,
    mode: str = "analytical",
    simulate: Simulate | None = None,
    kernel: str | None = None,
) -> float:
    """Simulated time of one W1 FlashDecoding decode step of one layer, s.

    Args:
        arch: the GPU config (its SM count sets the split rule when ``num_splits`` is None).
        context: tokens T. batch: sequences B. num_splits: splits (None: the split rule).
        mode: simulator mode. simulate: ``simulate(arch, workload, mode)``.
        kernel: None for the whole step; a kernel name (``"flash_decode_split"``,
            ``"flash_decode_reduce"``) for that kernel's standalone time.

    Returns:
        The step's time (split kernel + reduction, launch latencies included), or the named
        kernel's time alone on the GPU (no launch latency), s.
    """
    from coaccel.models.gpu import DecodeShape, flash_decode_trace

    trace = flash_decode_trace(
        DecodeShape(batch=batch, context=context), num_splits=num_splits, n_sms=arch.sm.count
    )
    result = (simulate or _default_simulate)(arch, trace, mode)
    if kernel is None:
        return float(result.seconds)
    ks = [k for k in result.kernels if k.name == kernel]
    if not ks:
        raise CoaccelError(f"the W1 trace has no kernel {kernel!r}")
    return float(ks[-1].standalone_s)


def _series_rows(path: Path, experiment: str) -> list[CalibrationRow]:
    return [r for r in read_calibration_csv(path) if r.experiment == experiment]


def _curve(
    archs: tuple[Any, Any, Any],
    rows: Sequence[CalibrationRow],
    mode: str,
    sim: Simulate,
) -> tuple[list[float], list[float], list[float], list[float]]:
    arch, slow, fast = archs
    meas, ours, lo, hi = [], [], [], []
    for r in rows:
        vals = [predict(a, r, mode=mode, simulate=sim) for a in (arch, slow, fast)]
        meas.append(measured_value(r))
        ours.append(vals[0])
        lo.append(min(vals))
        hi.append(max(vals))
    return meas, ours, lo, hi


def _pcie_shape_rows() -> list[tuple[int, float]]:
    rows = _series_rows(measured_csv("a100_80g"), "h2d_pinned_wall")
    return [(r.size_bytes, r.bw_bytes_per_s) for r in rows]


_PLATEAU_B_PER_S = {"h200": 3.89e12, "a100_80g": 1.73e12}
_PLATEAU_SRC = {
    "h200": "[S12] gpu-l2-cache/h200.txt: DRAM read plateau 3.89 TB/s (81 % of 4.8)",
    "a100_80g": "[S12] gpu-l2-cache/a100_80.txt: DRAM read plateau 1.73 TB/s (85 % of 2.039)",
}
_L2_SRC = {
    "h200": ("[S12] gpu-l2-cache/h200.txt: L2-resident read 9.7-10.2 TB/s (2-40 MB)", 9.7e12),
    "a100_80g": ("[S12] gpu-l2-cache/a100_80.txt: L2-resident read ~5.4 TB/s (2-28 MB)",
                 5.4e12),
}  # fmt: skip
_GPUS = ("h200", "a100_80g")
"""The GPUs with measured series: their shipped architecture names."""


def validate_gpu(
    *,
    mode: str = "auto",
    simulate: Simulate | None = None,
    contexts: Sequence[int] = (1024, 4096, 16384, 65536, 131072),
    tiers: bool = True,
    points: int = 24,
    ffd: bool = True,
    ffd_context: int = 262144,
    ffd_error_context: int = 16384,
    offload: bool = True,
    progress: Callable[[str], None] | None = None,
) -> GpuValidation:
    """Run every anchor, series and tier comparison.

    Args:
        mode: simulator mode of the anchors and series; ``"auto"``: the cycle tier for the
            pointer chase (:func:`coaccel.targets.gpu.fit.tier_for`), analytical otherwise.
        simulate: ``simulate(arch, workload, mode)``; default :func:`coaccel.simulate`.
        contexts: contexts of the W1 series, tokens.
        tiers: also run the cycle tier on W1 and a streaming read and report the difference.
        points: simulated points of each measured curve, evenly spread (0: all).
        ffd: also run the W2 (FFD) rows (:mod:`coaccel.targets.gpu.ffd`).
        ffd_context: context of the W2 speed rows, tokens. ffd_error_context: context of
            the W2 accuracy rows, tokens.
        offload: also compare W3 NOSA and W4 Specter with their papers' headline ratios
            (:mod:`coaccel.targets.gpu.offload`).
        progress: called with one line as each group of rows starts.

    Returns:
        :class:`GpuValidation`.
    """
    from coaccel.sim.gpu_mem import load_arch

    say = progress or (lambda _msg: None)
    sim = simulate or _default_simulate
    measured_csv("a100_80g")  # fail early, one line, where the package data is missing
    anchors: list[Anchor] = []
    series: list[Series] = []
    notes: list[str] = [
        f"band: bandwidths, efficiencies and latencies of the config -/+ "
        f"{BAND_FRACTION:.0%} ([OURS] allowance for unit and clock variation)",
        "bandwidth against parallelism (CTAs, bytes in flight): no published H200 or A100 "
        "series was found; benchmarks/gpu_calibration.py measures it (stream_read_ctas)",
        "W1 anchors are derived (bytes / measured plateau), not measured decode times; the "
        "calibration script's decode_attention rows are the measured comparison",
    ]
    archs = {g: load_arch(g) for g in _GPUS}
    bands = {g: (archs[g], *_band_configs(archs[g])) for g in _GPUS}
    say("streaming-read bandwidth curves, L2 plateaus and knees (H200, A100)")
    _bandwidth_rows(archs, bands, mode, sim, points, anchors, series)
    say("A100 pointer-chase latencies")
    _latency_rows(archs, bands, mode, sim, points, anchors, series)
    say("PCIe copy curve shape")
    _pcie_rows(archs, mode, sim, anchors, series)
    say(f"W1 FlashDecoding time against context ({len(contexts)} contexts per GPU)")
    _w1_rows(archs, bands, mode, sim, contexts, anchors, series, notes)
    if ffd:
        from coaccel.targets.gpu.ffd import ffd_validation

        say(f"W2 FFD speedup and error at {ffd_context} tokens")
        w2_anchors, w2_notes = ffd_validation(
            archs, bands, sim, mode="analytical" if mode == "auto" else mode,
            context=ffd_context, error_context=ffd_error_context,
        )  # fmt: skip
        anchors.extend(Anchor(**dataclasses.asdict(a)) for a in w2_anchors)
        notes.extend(w2_notes)
    tier_rows: list[TierError] = []
    if tiers:
        say("analytical vs cycle tier")
        tier_rows = _tier_rows(archs["h200"], sim)
    if offload:
        from coaccel.targets.gpu.offload import offload_anchors

        say("W3 NOSA and W4 Specter offload rows")
        off_mode = "analytical" if mode == "auto" else mode
        off_anchors, off_notes = offload_anchors(sim, mode=off_mode)
        anchors.extend(Anchor(**vars(a)) for a in off_anchors)
        notes.extend(off_notes)
    return GpuValidation(
        anchors=tuple(anchors), series=tuple(series), tiers=tuple(tier_rows),
        notes=tuple(notes), mode=mode,
    )  # fmt: skip


def _bandwidth_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate, points: int,
    anchors: list[Anchor], series: list[Series],
) -> None:  # fmt: skip
    """Streaming-read curves against working set, DRAM and L2 plateaus, L2 knees."""
    plateau, plateau_src, l2_src = _PLATEAU_B_PER_S, _PLATEAU_SRC, _L2_SRC
    files = {"h200": ("h200", "h200.txt"), "a100_80g": ("a100_80g", "a100_80.txt")}
    for g, (fname, txt) in files.items():
        path = measured_csv(fname)
        every = _series_rows(path, "stream_read")
        rows = select_rows(every, points)
        meas, ours, lo, hi = _curve(bands[g], rows, mode, sim)
        series.append(
            Series(f"{g} read bandwidth vs working set (1.5 MiB ... 4.7 GiB)", len(rows),
                   mape_pct(meas, ours), pearson_r(meas, ours), "fitted",
                   f"[S12] gpu-l2-cache/{txt}")
        )  # fmt: skip
        cap = archs[g].l2.capacity_mib * 2**20
        for label, lo_b, hi_b, val, src, what in (
            ("DRAM read plateau", 4 * cap, math.inf, plateau[g], plateau_src[g], "B/s"),
            ("L2 read plateau", 4 * 2**20, 16 * 2**20, l2_src[g][1], l2_src[g][0], "B/s"),
        ):
            r = _middle(every, lo_b, hi_b)
            vals = [predict(a, r, mode=mode, simulate=sim) for a in bands[g]]
            anchors.append(
                Anchor("stream" if "DRAM" in label else "l2", f"{g} {label}", val, vals[0],
                       min(vals), max(vals), what, src, "fitted",
                       f"simulated streaming read of {r.size_bytes / 2**20:.1f} MiB")
            )  # fmt: skip
        # the knee needs the curve's points around the L2 capacity, whatever ``points`` is
        knee_rows = [r for r in every if 2 * 2**20 <= r.size_bytes <= 2 * cap]
        km, ko, kl, kh = _curve(bands[g], knee_rows, mode, sim)
        knees = [_knee(knee_rows, x) for x in (ko, kl, kh)]
        anchors.append(
            Anchor("l2", f"{g} L2 capacity knee (last set within 90 % of the L2 plateau)",
                   _knee(knee_rows, km), knees[0], min(knees), max(knees), "MiB",
                   f"[S12] gpu-l2-cache/{txt}", "fitted",
                   f"the simulated curve's knee over {len(knee_rows)} working sets of 2 MiB "
                   "... 2 x L2, by the same rule as the measured one")
        )  # fmt: skip


def _latency_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate, points: int,
    anchors: list[Anchor], series: list[Series],
) -> None:  # fmt: skip
    """The A100 pointer-chase series and its per-level latencies."""
    a100 = "a100_80g"
    chase_all = _series_rows(measured_csv("a100_80g"), "pointer_chase")
    chase = select_rows(chase_all, points)
    meas, ours, lo, hi = _curve(bands[a100], chase, mode, sim)
    series.append(
        Series("a100_80g pointer-chase latency vs working set", len(chase), mape_pct(meas, ours),
               pearson_r(meas, ours), "fitted", "[S12] cuda-latency/a100_80.txt")
    )  # fmt: skip
    f = archs[a100].sm.freq_mhz / 1e3
    for label, cycles, lo_b, hi_b in (
        ("L1 hit", 36, 0, 64 * 2**10),
        ("near L2", 211, 2**20, 12 * 2**20),
        ("far L2", 424, 32 * 2**20, 39 * 2**20),
        ("DRAM", 570, 100 * 2**20, math.inf),
    ):
        r = _middle(chase_all, lo_b, hi_b)
        vals = [predict(a, r, mode=mode, simulate=sim) for a in bands[a100]]
        anchors.append(
            Anchor("latency", f"a100_80g pointer chase, {label}", cycles / f, vals[0], min(vals),
                   max(vals), "ns", f"[S12] cuda-latency/a100_80.txt: {cycles} cycles at 1410 MHz",
                   "fitted", f"simulated chase over {r.size_bytes / 2**20:.3g} MiB")
        )  # fmt: skip


def _pcie_rows(
    archs: Mapping[str, Any], mode: str, sim: Simulate, anchors: list[Anchor],
    series: list[Series],
) -> None:  # fmt: skip
    """PCIe copy curve shape: bandwidth / plateau against size, V100 Gen3 measured vs our
    link."""
    shape = _pcie_shape_rows()
    plateau_meas = shape[-1][1]
    link_arch = archs["a100_80g"]
    ours_bw = []
    for n, _ in shape:
        row = CalibrationRow("h2d_pinned", "", n, 0, 0, 0, 0, 1.0, 0, 1.0, n, 0.0, 0.0, 0.0,
                             "-", "")  # fmt: skip
        ours_bw.append(n / predict(link_arch, row, mode=mode, simulate=sim))
    ours_shape = [b / ours_bw[-1] for b in ours_bw]
    meas_shape = [b / plateau_meas for _, b in shape]
    series.append(
        Series("PCIe H2D copy: bandwidth / plateau vs size (shape)", len(shape),
               mape_pct(meas_shape, ours_shape), pearson_r(meas_shape, ours_shape), "predicted",
               "[S12] README.md cuda-memcpy (V100 PCIe Gen3) vs the a100_80g link model")
    )  # fmt: skip
    half_meas = _half_size(shape, meas_shape)
    half_ours = _half_size(shape, ours_shape)
    anchors.append(
        Anchor("pcie", "copy size reaching half the plateau bandwidth", half_meas, half_ours,
               half_ours, half_ours, "B", "[S12] README.md cuda-memcpy (V100 PCIe Gen3)",
               "predicted", "a shape figure: fixed cost x plateau bandwidth sets it")
    )  # fmt: skip


def _w1_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate,
    contexts: Sequence[int], anchors: list[Anchor], series: list[Series], notes: list[str],
) -> None:  # fmt: skip
    """W1 split-kernel time against context beside bytes / measured plateau."""
    plateau, plateau_src = _PLATEAU_B_PER_S, _PLATEAU_SRC
    for g in _GPUS:
        arch = archs[g]
        t_ours = []
        t_band = []
        derived = []
        steps = []
        w1_mode = "analytical" if mode == "auto" else mode
        for t in contexts:
            # the derived anchor is the K/V stream's time at the plateau: the split kernel's
            # own time is what it describes (the step adds launch latencies and the reduction)
            vals = [w1_seconds(a, t, mode=w1_mode, simulate=sim, kernel=W1_SPLIT_KERNEL)
                    for a in bands[g]]  # fmt: skip
            t_ours.append(vals[0])
            t_band.append(_band(vals))
            derived.append(4096 * t / plateau[g])
            steps.append(w1_seconds(arch, t, mode=w1_mode, simulate=sim))
        full = [k for k, t in enumerate(contexts) if t >= W1_FULL_GRID_TOKENS]
        if full:
            d_sel = [derived[k] for k in full]
            o_sel = [t_ours[k] for k in full]
            series.append(
                Series(f"{g} W1 split kernel time vs context (T >= {W1_FULL_GRID_TOKENS}), "
                       "against bytes / measured plateau", len(full), mape_pct(d_sel, o_sel),
                       pearson_r(d_sel, o_sel), "predicted",
                       f"[DERIVED] 4 KiB x T / {plateau[g] / 1e12:.2f} TB/s ({plateau_src[g]})")
            )  # fmt: skip
        i = len(contexts) - 1
        anchors.append(
            Anchor("w1", f"{g} W1 split kernel, one layer, B=1, T={contexts[i]}", derived[i],
                   t_ours[i],
                   t_band[i][0], t_band[i][1], "s",
                   f"[DERIVED] {4096 * contexts[i] / 2**20:.0f} MiB / "
                   f"{plateau[g] / 1e12:.2f} TB/s ({plateau_src[g]})",
                   "predicted", f"flash_decode_trace, split rule for {arch.sm.count} SMs")
        )  # fmt: skip
        notes.append(
            f"{g} W1 whole step at T={contexts[i]} (split kernel + reduction + "
            f"{2 * arch.launch_overhead_us:g} us of launch latency): {steps[i] * 1e6:.1f} us"
        )
        long = [k for k, t in enumerate(contexts) if t >= W1_FULL_GRID_TOKENS]
        if len(long) >= 2:
            x = np.array([contexts[k] for k in long], dtype=np.float64)
            y = np.array([t_ours[k] for k in long])
            slope, icpt = np.polyfit(x, y, 1)
            resid = float(np.max(np.abs(y - (slope * x + icpt)) / y) * 100)
            notes.append(
                f"{g} W1: simulated time is linear in context for T >= "
                f"{W1_FULL_GRID_TOKENS} within "
                f"{resid:.2g} % (slope {slope * 1e9:.4g} ns/token, "
                f"{4096 / slope / 1e12:.3g} TB/s effective)"
            )


def _tier_rows(arch: Any, sim: Simulate) -> list[TierError]:
    """Analytical against cycle tier on W1 and on streaming reads (H200)."""
    tier_rows: list[TierError] = []
    for t in (4096, 32768):
        tier_rows.append(
            TierError(f"h200 W1 B=1 T={t}",
                      w1_seconds(arch, t, mode="analytical", simulate=sim),
                      w1_seconds(arch, t, mode="cycle", simulate=sim))
        )  # fmt: skip
    for ws in (16 * 2**20, 256 * 2**20):
        spec = f"stream:working_set_bytes={ws},passes=2"
        tier_rows.append(
            TierError(f"h200 stream read {ws // 2**20} MiB x 2",
                      float(sim(arch, spec, "analytical").seconds),
                      float(sim(arch, spec, "cycle").seconds))
        )  # fmt: skip
    return tier_rows


def _middle(rows: Sequence[CalibrationRow], lo: float, hi: float) -> CalibrationRow:
    """The middle row (in file order) of those with ``lo <= size_bytes <= hi``."""
    sel = [r for r in rows if lo <= r.size_bytes <= hi]
    if not sel:
        raise ValueError(f"no measured row between {lo} and {hi} B")
    return sel[len(sel) // 2]


def _knee(rows: Sequence[CalibrationRow], bw: Sequence[float]) -> float:
    """Largest working set (MiB) within 90 % of the median bandwidth of 2 MiB ... 16 MiB."""
    ref = [b for r, b in zip(rows, bw, strict=True) if 2 * 2**20 <= r.size_bytes <= 16 * 2**20]
    level = 0.9 * float(np.median(ref))
    inside = [r.size_bytes for r, b in zip(rows, bw, strict=True) if b >= level]
    return max(inside) / 2**20 if inside else math.nan


def _half_size(shape: Sequence[tuple[int, float]], rel: Sequence[float]) -> float:
    """Copy size where the bandwidth curve first reaches half its plateau (log interpolation)."""
    for k in range(1, len(rel)):
        if rel[k] >= 0.5 > rel[k - 1]:
            x0, x1 = math.log2(shape[k - 1][0]), math.log2(shape[k][0])
            w = (0.5 - rel[k - 1]) / (rel[k] - rel[k - 1])
            return 2 ** (x0 + w * (x1 - x0))
    return math.nan
