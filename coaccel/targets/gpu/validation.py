"""``coaccel validate gpu``: the GPU memory-hierarchy simulator against measured anchors.

Pure computation (no printing, no files): :func:`validate_gpu` returns a
:class:`~coaccel.validate.targets.Validation` of the shared
:class:`~coaccel.validate.targets.Target` rows (the rows of ``coaccel validate hbq``), which
:mod:`coaccel.targets.gpu.validation_report` prints and writes. Each row holds a measured (or
published, or derived) figure with its source, our simulated value, the error, whether the
figure was used to set the shipped config (``fitted``) or not (``predicted``), whether our value
comes from a measured series (``data`` real) or seeded synthetic inputs, and a status. The
figures come from ``arch_configs/validation/gpu.yaml`` (:data:`PUBLISHED`) and the measured
curves from ``arch_configs/gpu/measured/*_gpu_benches.csv`` ([S12] gpu-benches result files),
both shipped with the package.

Groups, each judged by one rule:

* ``stream``, ``l2``, ``l2_knee``, ``latency``, ``pcie``, ``w1``, ``w2``, ``w3``, ``w4`` (the
  anchors): **band** — ``ok`` when the measured figure lies inside our band, the simulated value
  with every bandwidth and efficiency of the config scaled by ``1 -+ BAND_FRACTION`` and every
  latency by ``1 +- BAND_FRACTION`` ([OURS]: unit-to-unit and clock variation are not
  published; 5 % is our allowance). Where the band has no width (a knee on the measured working
  sets, the PCIe shape figure of the nominal link), only exact agreement is ``ok``.

  - streaming-read bandwidth plateaus (H200 3.89 TB/s, A100-80GB 1.73 TB/s), the L2 plateaus
    and the L2 capacity knees, fitted;
  - pointer-chase latency per level (A100-80GB: L1, near and far L2, DRAM), fitted;
  - the shape of the PCIe copy curve (copy size reaching half its plateau, V100 Gen3
    cudaMemcpy of the gpu-benches README), predicted from the config's link model;
  - W1 FlashDecoding split-kernel time of one layer at the longest context on H200 and A100,
    against the bandwidth-bound time of its bytes at the measured plateau ([DERIVED] 512 MiB /
    3.89 TB/s = 138 us at 128K on an H200), predicted;
  - W2 FFD (:mod:`coaccel.targets.gpu.ffd`): speedup over W1 against keep ratio beside the
    traffic bound and the paper's 11.6x at 256K, on seeded keep masks (``w2``) and with the
    keep ratios of a real decoder (``w2_real``, :mod:`coaccel.targets.gpu.ffd_real`); W3 NOSA
    and W4 Specter (:mod:`coaccel.targets.gpu.offload`) against their papers' headline ratios;
    predicted.
* ``e2e``: NOSA's and FFD's headlines on their papers' metric, whole-model decode throughput
  (:mod:`coaccel.targets.gpu.e2e`): the ratio beside the paper's, no band (status ``info``);
  predicted.
* ``w2_error``, ``w3_error``: attention-output error against dense attention on synthetic
  inputs; no published figure (status ``no paper value``).
* ``w2_keep``, ``w2_real_error``, ``w2_ppl``, ``w3_real``: measurements on a real decoder's
  decode steps (:mod:`coaccel.targets.gpu.validation_real`): FFD's keep ratio, selection and
  kernel error, perplexity change; NOSA's recall of the oracle blocks and host fetches per
  step. No published figure: each shows our mean with its standard deviation (status
  ``no paper value``).
* ``curve_mape``: **absolute** — the mean absolute percentage error of our curve against a
  measured (or derived) one, ``ok`` at most :data:`CURVE_MAPE_PCT` points from 0 %.
* ``curve_r``: **absolute** — the Pearson correlation of the same curve, ``ok`` within
  :data:`CURVE_R_TOL` of 1. (MAPE and correlation per curve as LLMCompass and Accel-Sim report
  theirs.)
* ``tier``: **relative** — the cycle tier's time against the analytical tier's on the same
  workload (the ``paper`` column holds the analytical time), ``ok`` within
  :data:`TIER_TOLERANCE_PCT`.
* ``tier_rank``: **absolute** — Kendall's tau between the two tiers' times over a sweep of W1
  decode steps (:data:`RANK_GPUS` x :data:`RANK_SHAPES`), ``ok`` at :data:`RANK_TAU_MIN` or
  above: a sweep run in the analytical tier ranks designs as the cycle tier would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
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
from coaccel.validate.published import PublishedFigure, load_published
from coaccel.validate.targets import Target, Validation

__all__ = [
    "BAND_FRACTION",
    "CURVE_MAPE_PCT",
    "CURVE_R_TOL",
    "PUBLISHED",
    "TIER_TOLERANCE_PCT",
    "W1_FULL_GRID_TOKENS",
    "band_configs",
    "mape_pct",
    "measured_csv",
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

CURVE_MAPE_PCT = 5.0
"""Largest MAPE of a curve that is ``ok``, percent ([OURS]: the decode-attention target of
docs/gpu_decode.md, at most 5 % MAPE against measured points, applied to every curve)."""

CURVE_R_TOL = 0.05
"""Largest distance of a curve's Pearson correlation from 1 that is ``ok`` (r >= 0.95,
[OURS])."""

TIER_TOLERANCE_PCT = 5.0
"""Agreement asked of the cycle tier with the analytical tier, percent (docs/gpu_mem.md: the two
tiers agree within 5 % where both apply)."""

PUBLISHED = "gpu"
"""Name of the published-figure file (``arch_configs/validation/gpu.yaml``)."""

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


def band_configs(arch: Any) -> tuple[Any, Any]:
    """The configs whose results bound a prediction's band.

    Args:
        arch: a GPU config.

    Returns:
        ``(slow, fast)``: every bandwidth and efficiency scaled by ``1 - BAND_FRACTION`` and every
        latency by ``1 + BAND_FRACTION``, and the other way round.
    """

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


_GPUS = ("h200", "a100_80g")
"""The GPUs with measured series: their shipped architecture names."""

_BENCH_FILE = {"h200": "h200.txt", "a100_80g": "a100_80.txt"}
"""[S12] gpu-l2-cache / cuda-latency result file of each GPU's measured series."""


def _anchor(
    group: str,
    name: str,
    paper: float,
    values: Sequence[float],
    unit: str,
    source: str,
    fit: Fit,
    note: str,
    data: Literal["", "real", "synthetic"],
) -> Target:
    """A row judged by the band rule: ``values`` = our value under the nominal config first,
    then under the band's configs."""
    return Target(
        group=group,
        name=name,
        ours=values[0],
        paper=paper,
        unit=unit,
        tolerance_pct=None,
        source=source,
        note=note,
        fit=fit,
        ours_low=min(values),
        ours_high=max(values),
        data=data,
    )


def _curve_rows(
    name: str,
    measured: Sequence[float],
    ours: Sequence[float],
    fit: Fit,
    source: str,
    note: str,
    data: Literal["", "real", "synthetic"],
) -> list[Target]:
    """The ``curve_mape`` and ``curve_r`` rows of one curve (module docstring)."""
    common: dict[str, Any] = dict(source=source, fit=fit, data=data, tolerance_pct=None)
    return [
        Target(group="curve_mape", name=f"{name}: MAPE", ours=mape_pct(measured, ours),
               paper=0.0, unit="%", note=f"{note}; 'paper' 0 % is exact agreement",
               tolerance_abs=CURVE_MAPE_PCT, **common),
        Target(group="curve_r", name=f"{name}: Pearson r", ours=pearson_r(measured, ours),
               paper=1.0, unit="1", note=f"{note}; 'paper' 1 is perfect correlation",
               tolerance_abs=CURVE_R_TOL, **common),
    ]  # fmt: skip


def validate_gpu(
    *,
    mode: str = "auto",
    simulate: Simulate | None = None,
    contexts: Sequence[int] = (1024, 4096, 16384, 65536, 131072),
    tiers: bool = True,
    points: int = 24,
    ffd: bool = True,
    ffd_context: int | None = None,
    ffd_error_context: int = 16384,
    offload: bool = True,
    real: bool = True,
    real_sizes: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Validation:
    """Run every anchor, curve and tier comparison.

    Args:
        mode: simulator mode of the anchors and curves; ``"auto"``: the cycle tier for the
            pointer chase (:func:`coaccel.targets.gpu.fit.tier_for`), analytical otherwise.
        simulate: ``simulate(arch, workload, mode)``; default :func:`coaccel.simulate`.
        contexts: contexts of the W1 curve, tokens.
        tiers: also run the cycle tier on W1 and a streaming read and compare the two tiers.
        points: simulated points of each measured curve, evenly spread (0: all).
        ffd: also run the W2 (FFD) rows (:mod:`coaccel.targets.gpu.ffd`).
        ffd_context: context of the W2 speed rows, tokens (None: the paper's, 256K).
        ffd_error_context: context of the W2 accuracy rows, tokens.
        offload: also compare W3 NOSA and W4 Specter with their papers' headline ratios
            (:mod:`coaccel.targets.gpu.offload`).
        real: with ``ffd`` / ``offload``, also run the real-input rows: FFD's keep ratio,
            errors, perplexity change and speedup, and NOSA's recall and misses, on a real
            decoder's decode steps (:mod:`coaccel.targets.gpu.real_inputs`; about two minutes
            on one core at the default sizes). Without the model packages these rows are left
            out and a note says how to install them.
        real_sizes: keyword arguments of
            :func:`~coaccel.targets.gpu.real_inputs.collect_real_decode` (``model``,
            ``contexts``, ``passages``, ``steps``) and ``nosa_contexts`` (contexts of the NOSA
            replay, default the two largest); None: the defaults.
        progress: called with one line as each group of rows starts (and per real-input step).

    Returns:
        The :class:`~coaccel.validate.targets.Validation` (``sim_mode`` = ``mode``; module
        docstring for its groups and their rules).

    Raises:
        CoaccelError: the package data (measured series) is missing.
        ConfigError: the published-figure file is invalid.
    """
    from coaccel.sim.gpu_mem import load_arch

    say = progress or (lambda _msg: None)
    sim = simulate or _default_simulate
    measured_csv("a100_80g")  # fail early, one line, where the package data is missing
    fig = load_published(PUBLISHED)
    rows: list[Target] = []
    notes: list[str] = [
        f"band: bandwidths, efficiencies and latencies of the config -/+ "
        f"{BAND_FRACTION:.0%} ([OURS] allowance for unit and clock variation); an anchor is ok "
        "when the measured figure lies inside it",
        "bandwidth against parallelism (CTAs, bytes in flight): no published H200 or A100 "
        "series was found; benchmarks/gpu_calibration.py measures it (stream_read_ctas)",
        "W1 anchors are derived (bytes / measured plateau), not measured decode times; the "
        "calibration script's decode_attention rows are the measured comparison",
    ]
    archs = {g: load_arch(g) for g in _GPUS}
    bands = {g: (archs[g], *band_configs(archs[g])) for g in _GPUS}
    say("streaming-read bandwidth curves, L2 plateaus and knees (H200, A100)")
    _bandwidth_rows(archs, bands, mode, sim, points, fig, rows)
    say("A100 pointer-chase latencies")
    _latency_rows(archs, bands, mode, sim, points, fig, rows)
    say("PCIe copy curve shape")
    _pcie_rows(archs, mode, sim, rows)
    say(f"W1 FlashDecoding time against context ({len(contexts)} contexts per GPU)")
    _w1_rows(archs, bands, mode, sim, contexts, fig, rows, notes)
    if tiers:
        say("analytical vs cycle tier")
        rows.extend(_tier_rows(archs["h200"], sim))
        say("analytical vs cycle tier: ranking of a W1 sweep")
        rank_archs = {g: archs.get(g) or load_arch(g) for g in RANK_GPUS}
        rows.extend(_rank_rows(rank_archs, sim))
    an_mode = "analytical" if mode == "auto" else mode
    opts = dict(ffd=ffd, real=real, offload=offload, real_sizes=real_sizes)
    _workload_rows(archs, bands, sim, an_mode, fig, opts, (ffd_context, ffd_error_context),
                   rows, notes, say)  # fmt: skip
    return Validation(targets=tuple(rows), sim_mode=mode, notes=tuple(notes))


def _workload_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], sim: Simulate, mode: str,
    fig: Mapping[str, PublishedFigure], opts: Mapping[str, Any], ffd_sizes: tuple[Any, int],
    rows: list[Target], notes: list[str], say: Callable[[str], None],
) -> None:  # fmt: skip
    """The W2 (synthetic), real-input (W2, W3) and W3 / W4 offload rows that ``opts`` asks
    for (the keywords of :func:`validate_gpu` of the same names)."""
    if opts["ffd"]:
        from coaccel.targets.gpu.ffd import ffd_validation

        context = ffd_sizes[0] or int(fig["ffd.context"].value)
        say(f"W2 FFD speedup and error at {context} tokens")
        w2_rows, w2_notes = ffd_validation(
            archs, bands, sim, mode=mode, context=context, error_context=ffd_sizes[1]
        )
        rows.extend(w2_rows)
        notes.extend(w2_notes)
    if opts["real"] and (opts["ffd"] or opts["offload"]):
        from coaccel.targets.gpu.validation_real import real_input_rows

        r_rows, r_notes = real_input_rows(
            archs, bands, sim, mode=mode, ffd=opts["ffd"], nosa=opts["offload"],
            sizes=opts["real_sizes"], progress=say,
        )  # fmt: skip
        rows.extend(r_rows)
        notes.extend(r_notes)
    if opts["offload"]:
        from coaccel.sim.gpu_mem import load_arch
        from coaccel.targets.gpu.offload import offload_anchors

        say("W3 NOSA and W4 Specter offload rows")
        a40 = load_arch("a100_40g")
        off_rows, off_notes = offload_anchors(sim, mode=mode, band=bands["a100_80g"],
                                              w4_band=(a40, *band_configs(a40)))  # fmt: skip
        rows.extend(off_rows)
        notes.extend(off_notes)
    if opts["offload"] and opts["ffd"]:
        from coaccel.targets.gpu.e2e import e2e_rows

        say("whole-model decode throughput: NOSA and FFD on their papers' metric")
        e_rows, e_notes = e2e_rows(fig)
        rows.extend(e_rows)
        notes.extend(e_notes)


def _bandwidth_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate, points: int,
    fig: Mapping[str, PublishedFigure], rows: list[Target],
) -> None:  # fmt: skip
    """Streaming-read curves against working set, DRAM and L2 plateaus, L2 knees."""
    for g in _GPUS:
        txt = _BENCH_FILE[g]
        every = _series_rows(measured_csv(g), "stream_read")
        sel = select_rows(every, points)
        meas, ours, _, _ = _curve(bands[g], sel, mode, sim)
        rows += _curve_rows(
            f"{g} read bandwidth vs working set (1.5 MiB ... 4.7 GiB)", meas, ours, "fitted",
            f"[S12] gpu-l2-cache/{txt}",
            f"{len(sel)} of the {len(every)} measured working sets", "real",
        )  # fmt: skip
        cap = archs[g].l2.capacity_mib * 2**20
        for group, label, lo_b, hi_b, key in (
            ("stream", "DRAM read plateau", 4 * cap, math.inf, "dram_read_plateau"),
            ("l2", "L2 read plateau", 4 * 2**20, 16 * 2**20, "l2_read_plateau"),
        ):
            f = fig[f"{g}.{key}"]
            r = _middle(every, lo_b, hi_b)
            vals = [predict(a, r, mode=mode, simulate=sim) for a in bands[g]]
            rows.append(
                _anchor(group, f"{g} {label}", f.value, vals, f.unit, f.source, "fitted",
                        f"simulated streaming read of {r.size_bytes / 2**20:.1f} MiB", "real")
            )  # fmt: skip
        # the knee needs the curve's points around the L2 capacity, whatever ``points`` is
        knee_rows = [r for r in every if 2 * 2**20 <= r.size_bytes <= 2 * cap]
        km, ko, kl, kh = _curve(bands[g], knee_rows, mode, sim)
        knees = [_knee(knee_rows, x) for x in (ko, kl, kh)]
        rows.append(
            _anchor("l2_knee", f"{g} L2 capacity knee (last set within 90 % of the L2 plateau)",
                    _knee(knee_rows, km), knees, "MiB", f"[S12] gpu-l2-cache/{txt}", "fitted",
                    f"the simulated curve's knee over {len(knee_rows)} working sets of 2 MiB "
                    "... 2 x L2, by the same rule as the measured one", "real")
        )  # fmt: skip


def _latency_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate, points: int,
    fig: Mapping[str, PublishedFigure], rows: list[Target],
) -> None:  # fmt: skip
    """The A100 pointer-chase curve and its per-level latencies."""
    a100 = "a100_80g"
    chase_all = _series_rows(measured_csv(a100), "pointer_chase")
    chase = select_rows(chase_all, points)
    meas, ours, _, _ = _curve(bands[a100], chase, mode, sim)
    rows += _curve_rows(
        "a100_80g pointer-chase latency vs working set", meas, ours, "fitted",
        "[S12] cuda-latency/a100_80.txt",
        f"{len(chase)} of the {len(chase_all)} measured working sets", "real",
    )  # fmt: skip
    ghz = archs[a100].sm.freq_mhz / 1e3
    for label, key, lo_b, hi_b in (
        ("L1 hit", "chase_l1_hit", 0, 64 * 2**10),
        ("near L2", "chase_near_l2", 2**20, 12 * 2**20),
        ("far L2", "chase_far_l2", 32 * 2**20, 39 * 2**20),
        ("DRAM", "chase_dram", 100 * 2**20, math.inf),
    ):
        f = fig[f"{a100}.{key}"]
        r = _middle(chase_all, lo_b, hi_b)
        vals = [predict(a, r, mode=mode, simulate=sim) for a in bands[a100]]
        note = f"simulated chase over {r.size_bytes / 2**20:.3g} MiB"
        if key == "chase_far_l2":
            note += (
                "; a one-CTA chase replicates nothing across the two L2 partitions, so it finds "
                "the nominal 40 MiB (far hits past one partition) where streaming kernels find "
                "the effective 28 MiB (coaccel.sim.gpu_mem.traffic, capacity rule)"
            )
        # the published figure is in cycles of the measured run's clock: compare in ns
        rows.append(
            _anchor("latency", f"a100_80g pointer chase, {label}", f.value / ghz, vals, "ns",
                    f.source, "fitted", note, "real")
        )  # fmt: skip


def _pcie_rows(
    archs: Mapping[str, Any], mode: str, sim: Simulate, rows: list[Target]
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
    rows += _curve_rows(
        "PCIe H2D copy: bandwidth / plateau vs size (shape)", meas_shape, ours_shape,
        "predicted", "[S12] README.md cuda-memcpy (V100 PCIe Gen3) vs the a100_80g link model",
        f"{len(shape)} measured copy sizes", "real",
    )  # fmt: skip
    half_ours = _half_size(shape, ours_shape)
    rows.append(
        _anchor("pcie", "copy size reaching half the plateau bandwidth",
                _half_size(shape, meas_shape), [half_ours], "B",
                "[S12] README.md cuda-memcpy (V100 PCIe Gen3)", "predicted",
                "a shape figure: fixed cost x plateau bandwidth sets it (nominal link, no band)",
                "real")
    )  # fmt: skip


def _w1_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Any], mode: str, sim: Simulate,
    contexts: Sequence[int], fig: Mapping[str, PublishedFigure], rows: list[Target],
    notes: list[str],
) -> None:  # fmt: skip
    """W1 split-kernel time against context beside bytes / measured plateau."""
    for g in _GPUS:
        arch = archs[g]
        plateau = fig[f"{g}.dram_read_plateau"]
        t_vals = []
        derived = []
        steps = []
        w1_mode = "analytical" if mode == "auto" else mode
        for t in contexts:
            # the derived anchor is the K/V stream's time at the plateau: the split kernel's
            # own time is what it describes (the step adds launch latencies and the reduction)
            t_vals.append([w1_seconds(a, t, mode=w1_mode, simulate=sim, kernel=W1_SPLIT_KERNEL)
                           for a in bands[g]])  # fmt: skip
            derived.append(4096 * t / plateau.value)
            steps.append(w1_seconds(arch, t, mode=w1_mode, simulate=sim))
        t_ours = [v[0] for v in t_vals]
        full = [k for k, t in enumerate(contexts) if t >= W1_FULL_GRID_TOKENS]
        if full:
            rows += _curve_rows(
                f"{g} W1 split kernel time vs context (T >= {W1_FULL_GRID_TOKENS}), against "
                "bytes / measured plateau", [derived[k] for k in full], [t_ours[k] for k in full],
                "predicted",
                f"[DERIVED] 4 KiB x T / {plateau.value / 1e12:.2f} TB/s ({plateau.source})",
                f"contexts {', '.join(str(contexts[k]) for k in full)}", "",
            )  # fmt: skip
        i = len(contexts) - 1
        rows.append(
            _anchor("w1", f"{g} W1 split kernel, one layer, B=1, T={contexts[i]}", derived[i],
                    t_vals[i], "s",
                    f"[DERIVED] {4096 * contexts[i] / 2**20:.0f} MiB / "
                    f"{plateau.value / 1e12:.2f} TB/s ({plateau.source})",
                    "predicted", f"flash_decode_trace, split rule for {arch.sm.count} SMs", "")
        )  # fmt: skip
        notes.append(
            f"{g} W1 whole step at T={contexts[i]} (split kernel + reduction + "
            f"{2 * arch.launch_overhead_us:g} us of launch latency): {steps[i] * 1e6:.1f} us"
        )
        if len(full) >= 2:
            x = np.array([contexts[k] for k in full], dtype=np.float64)
            y = np.array([t_ours[k] for k in full])
            slope, icpt = np.polyfit(x, y, 1)
            resid = float(np.max(np.abs(y - (slope * x + icpt)) / y) * 100)
            notes.append(
                f"{g} W1: simulated time is linear in context for T >= "
                f"{W1_FULL_GRID_TOKENS} within "
                f"{resid:.2g} % (slope {slope * 1e9:.4g} ns/token, "
                f"{4096 / slope / 1e12:.3g} TB/s effective)"
            )


RANK_GPUS = ("a100_80g", "h100_sxm", "h200")
"""GPUs of the tier-ranking sweep."""
RANK_SHAPES = ((1, 1024), (1, 16384), (4, 4096), (8, 2048), (16, 1024), (16, 8192))
"""``(batch, context)`` of the tier-ranking sweep's W1 decode steps ([OURS]: a spread of
bytes and grid sizes small enough for the cycle tier)."""
RANK_TAU_MIN = 0.95
"""Kendall's tau the two tiers must reach over the ranking sweep."""


def _rank_rows(archs: Mapping[str, Any], sim: Simulate) -> list[Target]:
    """Do the analytical and cycle tiers rank designs alike? Kendall's tau over a sweep of W1
    decode steps (GPU x batch x context)."""
    from coaccel.targets.gpu.measured import kendall_tau

    an, cy = [], []
    for g in RANK_GPUS:
        for b, t in RANK_SHAPES:
            spec = f"flashdecode:T={t},B={b}"
            an.append(float(sim(archs[g], spec, "analytical").seconds))
            cy.append(float(sim(archs[g], spec, "cycle").seconds))
    tau = kendall_tau(an, cy)
    return [
        Target(group="tier_rank",
               name=f"Kendall tau, analytical vs cycle tier, {len(an)} W1 decode steps",
               ours=tau, paper=1.0, unit="1", tolerance_pct=None,
               tolerance_abs=1.0 - RANK_TAU_MIN,
               source="[OURS] the two tiers of the same simulator (docs/gpu_mem.md)",
               note=f"{', '.join(RANK_GPUS)} x (batch, context) {RANK_SHAPES}; 'paper' 1 is "
               f"the same order; times {min(an) * 1e6:.1f} .. {max(an) * 1e6:.1f} us")
    ]  # fmt: skip


def _tier_rows(arch: Any, sim: Simulate) -> list[Target]:
    """Cycle against analytical tier on W1 and on streaming reads (H200)."""
    runs: list[tuple[str, float, float]] = []
    for t in (4096, 32768):
        runs.append(
            (f"h200 W1 B=1 T={t}",
             w1_seconds(arch, t, mode="analytical", simulate=sim),
             w1_seconds(arch, t, mode="cycle", simulate=sim))
        )  # fmt: skip
    for ws in (16 * 2**20, 256 * 2**20):
        spec = f"stream:working_set_bytes={ws},passes=2"
        runs.append(
            (f"h200 stream read {ws // 2**20} MiB x 2",
             float(sim(arch, spec, "analytical").seconds),
             float(sim(arch, spec, "cycle").seconds))
        )  # fmt: skip
    return [
        Target(group="tier", name=f"{label}: cycle vs analytical tier", ours=cycle_s,
               paper=analytical_s, unit="s", tolerance_pct=TIER_TOLERANCE_PCT,
               source="[OURS] the analytical tier of the same simulator (docs/gpu_mem.md)",
               note="'paper' here is the analytical tier's time; both tiers count the same "
               "sectors and share the kernel model, the cycle tier adds queueing")
        for label, analytical_s, cycle_s in runs
    ]  # fmt: skip


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
