"""The GPU part of ``coaccel report``: decode energy per token and per request.

:func:`report_part` is the target's report role (:class:`~coaccel.spine.target.ReportRole`
``build``). For each GPU and decode workload (default ``flashdecode:B=8,T=4096``: one
FlashDecoding split-K step of one layer's attention, batch 8, 4096-token context) it simulates
the step and prices it two ways:

* **Board power against utilization** (:func:`decode_energy`): board power
  ``P = P_base + k_bw x B`` at the step's achieved DRAM bandwidth ``B`` (DRAM bytes / step
  time; its utilization is ``B`` over the configuration's peak), where ``P_base`` and ``k_bw``
  are least-squares fits to published board-power measurements of streaming kernels on an H200
  and on eight A100s ([GPU-BENCHES-ROOFLINE], ``arch_configs/cost/board_power.yaml``). So the
  step's energy is ``P_base x t + k_bw x bytes``; per token it is divided by the batch (tokens
  generated per step) and per request multiplied by :data:`OUTPUT_TOKENS`. GPUs without a
  measurement of their own take the fit of the same die (:data:`BOARD_FITS`) with a wider
  uncertainty; a GPU with neither gets no board view.
* **Device-memory energy per byte** (the cost model, :func:`coaccel.cost.evaluate`): DRAM bytes
  x the configuration's HBM/GDDR energy per byte, beside the board's per-byte slope ``k_bw``.

Public: :func:`report_part`, :func:`decode_energy`, :class:`DecodeEnergy`, :class:`BoardFit`,
:data:`BOARD_FITS`, :data:`OUTPUT_TOKENS`, :data:`BOARD_TABLE`. Internal: formatting helpers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coaccel.cost import evaluate, shipped_table
from coaccel.report.document import Figure, ReportPart, ReportSettings, Section, Table
from coaccel.simulation import simulate

__all__ = [
    "BOARD_FITS",
    "BOARD_TABLE",
    "OUTPUT_TOKENS",
    "BoardFit",
    "DecodeEnergy",
    "decode_energy",
    "report_part",
]

KIND = "gpu"

OUTPUT_TOKENS = 256
"""Output tokens of one request (energy per request = energy per token x this), [OURS]: a
typical chat answer's length; every step is priced at the workload's context (its growth over
the request is not modelled)."""

BOARD_TABLE = "board_power.yaml"
"""The measured board-power table (``arch_configs/cost/``)."""


@dataclass(frozen=True)
class BoardFit:
    """Which measured board-power fit prices a GPU.

    Attributes:
        measured: prefix of the fit's entries in :data:`BOARD_TABLE` (``"h200"``:
            ``h200_base_w``, ``h200_w_per_tb_per_s``).
        board: the measured board, in words.
        analog: empty when the GPU itself was measured; else why the fit of another board of
            the same die stands in (its uncertainty adds ``gpu_analog_rel_sigma``).
    """

    measured: str
    board: str
    analog: str = ""


BOARD_FITS: Mapping[str, BoardFit] = {
    "h200": BoardFit("h200", "NVIDIA H200 at 1980 MHz"),
    "h100_sxm": BoardFit(
        "h200",
        "NVIDIA H200 at 1980 MHz",
        "the H100 SXM has the same GH100 die and clock with 80 GB HBM3 (5 stacks) instead of "
        "141 GB HBM3e (6)",
    ),
    "gh200": BoardFit(
        "h200",
        "NVIDIA H200 at 1980 MHz",
        "the GH200's GPU has the same GH100 die with 96 GB HBM3; the Grace CPU and its LPDDR5X "
        "are not included",
    ),
    "a100_80g": BoardFit(
        "a100_40g",
        "8 x A100-SXM4-40GB at 1410 MHz",
        "the A100 80 GB has the same GA100 die and clock with HBM2e (80 GB) instead of HBM2 "
        "(40 GB)",
    ),
}
"""Shipped GPU architecture name -> its board-power fit. The RTX A6000 has none: the one GA102
series at hand (eight A40s, [GPU-BENCHES-ROOFLINE] ``alex_a40.txt``) holds its bandwidth
constant while the power reaches its 300 W limit, so it cannot separate the bandwidth term from
the base power."""


@dataclass(frozen=True)
class DecodeEnergy:
    """Energy of one simulated decode step, from board power and from device-memory traffic.

    Attributes:
        arch: GPU name. workload: workload spec. mode: simulator mode.
        seconds: step time, s. dram_bytes: device-memory bytes read + written, B.
        peak_bw_bytes_per_s: the configuration's peak DRAM bandwidth, B/s.
        batch: tokens generated per step (the workload's batch); None when it names none.
        fit: the board-power fit (None: no board view).
        base_w: fitted base power, W. base_sigma_w: its standard error, W.
        k_j_per_byte: fitted bandwidth slope, J/B. k_sigma_j_per_byte: its standard error.
        rel_sigma: relative one sigma added to the board energy (sensor, kernel mix, analog
            board), combined in quadrature.
        board_source: where the fit's numbers come from.
        device_j: the cost model's device-DRAM energy of the step, J.
        device_sigma_j: its one sigma, J. device_pj_per_byte: its energy per byte, pJ/B.
        device_rel_sigma: the relative one sigma of that figure.
        device_source: where that figure comes from.
    """

    arch: str
    workload: str
    mode: str
    seconds: float
    dram_bytes: int
    peak_bw_bytes_per_s: float
    batch: int | None
    fit: BoardFit | None
    base_w: float
    base_sigma_w: float
    k_j_per_byte: float
    k_sigma_j_per_byte: float
    rel_sigma: float
    board_source: str
    device_j: float
    device_sigma_j: float
    device_pj_per_byte: float
    device_rel_sigma: float
    device_source: str

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Achieved DRAM bandwidth over the step, B/s: bytes / step time."""
        return self.dram_bytes / self.seconds

    @property
    def utilization(self) -> float:
        """Achieved DRAM bandwidth over the configuration's peak (0..1)."""
        return self.bandwidth_bytes_per_s / self.peak_bw_bytes_per_s

    @property
    def base_j(self) -> float:
        """Base power x step time, J."""
        return self.base_w * self.seconds

    @property
    def traffic_j(self) -> float:
        """Bandwidth slope x DRAM bytes, J."""
        return self.k_j_per_byte * self.dram_bytes

    @property
    def board_j(self) -> float:
        """Board energy of the step, J: :attr:`base_j` + :attr:`traffic_j`."""
        return self.base_j + self.traffic_j

    def _sigma(self, fit_part: float, value: float) -> float:
        return math.hypot(fit_part, self.rel_sigma * value)

    @property
    def base_sigma_j(self) -> float:
        """One sigma of :attr:`base_j`, J."""
        return self._sigma(self.base_sigma_w * self.seconds, self.base_j)

    @property
    def traffic_sigma_j(self) -> float:
        """One sigma of :attr:`traffic_j`, J."""
        return self._sigma(self.k_sigma_j_per_byte * self.dram_bytes, self.traffic_j)

    @property
    def board_sigma_j(self) -> float:
        """One sigma of :attr:`board_j`, J: the fit's two standard errors taken as independent
        (conservative: they are negatively correlated) plus the relative terms on the total."""
        fit = math.hypot(
            self.base_sigma_w * self.seconds, self.k_sigma_j_per_byte * self.dram_bytes
        )
        return self._sigma(fit, self.board_j)

    @property
    def power_w(self) -> float:
        """Average board power over the step, W."""
        return self.board_j / self.seconds


def decode_energy(cfg: Any, result: Any, batch: int | None, breakdown: Any = None) -> DecodeEnergy:
    """Board and device-memory energy of a simulated decode step.

    Args:
        cfg: the GPU (:class:`~coaccel.sim.gpu_mem.GpuArchConfig`).
        result: its simulation (:class:`~coaccel.sim.gpu_mem.GpuSimResult`).
        batch: tokens generated per step (None: unknown).
        breakdown: ``coaccel.cost.evaluate(result, cfg)`` (computed when None).

    Returns:
        The :class:`DecodeEnergy`; without a board-power fit for ``cfg.name``
        (:data:`BOARD_FITS`) its board fields are NaN and ``fit`` is None.
    """
    t = shipped_table(BOARD_TABLE)
    cb = breakdown if breakdown is not None else evaluate(result, cfg)
    fit = BOARD_FITS.get(cfg.name)
    nan = math.nan
    base = base_s = k = k_s = rel = nan
    src = ""
    if fit is not None:
        b = t[f"{fit.measured}_base_w"]
        s = t[f"{fit.measured}_w_per_tb_per_s"]
        terms = [t["gpu_sensor_rel_sigma"].value, t["gpu_kernel_mix_rel_sigma"].value]
        if fit.analog:
            terms.append(t["gpu_analog_rel_sigma"].value)
        base, base_s = b.value, b.value * b.uncertainty
        k, k_s = s.value * 1e-12, s.value * s.uncertainty * 1e-12  # W/(TB/s) = pJ/B
        rel = math.sqrt(sum(x * x for x in terms))
        src = f"{fit.measured}_base_w: {b.source}; {fit.measured}_w_per_tb_per_s: {s.source}"
    d = cfg.dram
    return DecodeEnergy(
        arch=cfg.name,
        workload=result.workload,
        mode=result.mode,
        seconds=result.seconds,
        dram_bytes=int(result.offchip.read_bytes + result.offchip.write_bytes),
        peak_bw_bytes_per_s=d.bw_gb_per_s * 1e9,
        batch=batch,
        fit=fit,
        base_w=base,
        base_sigma_w=base_s,
        k_j_per_byte=k,
        k_sigma_j_per_byte=k_s,
        rel_sigma=rel,
        board_source=src,
        device_j=cb.energy_j["dram"],
        device_sigma_j=cb.energy_sigma_j["dram"],
        device_pj_per_byte=d.energy_pj_per_byte,
        device_rel_sigma=d.uncertainty_pct / 100.0,
        device_source=cb.sources["dram"],
    )


def _rel_source(fit: BoardFit) -> str:
    t = shipped_table(BOARD_TABLE)
    parts = [
        f"sensor {100 * t['gpu_sensor_rel_sigma'].value:g} % ([NVML])",
        f"kernel mix {100 * t['gpu_kernel_mix_rel_sigma'].value:g} % ([OURS])",
    ]
    if fit.analog:
        parts.append(
            f"analog board {100 * t['gpu_analog_rel_sigma'].value:g} % ([OURS]: {fit.analog})"
        )
    return "one sigma: the fit's standard errors and " + ", ".join(parts) + " (board_power.yaml)"


def _step_figures(e: DecodeEnergy) -> list[Figure]:
    """Figures of the simulated step and its device-memory energy (every GPU has them).

    Args:
        e: the step's energy.

    Returns:
        Step time (s), DRAM bytes (B), achieved bandwidth (B/s), utilization (%), the cost
        model's device-DRAM energy (J) and energy per byte (pJ/B).
    """
    w, a, nan = e.workload, e.arch, math.nan
    sim = f"simulated ({e.mode} mode), coaccel.sim.gpu_mem"
    return [
        Figure(
            a,
            "time",
            "decode_step",
            e.seconds,
            "s",
            nan,
            f"{sim}: the step's kernels with launch gaps; the simulator's own error is not "
            "propagated",
            w,
        ),
        Figure(
            a,
            "dram_bytes",
            "decode_step",
            float(e.dram_bytes),
            "B",
            nan,
            f"{sim}: device-memory bytes read + written",
            w,
        ),
        Figure(
            a,
            "bandwidth",
            "dram.achieved",
            e.bandwidth_bytes_per_s,
            "B/s",
            nan,
            "[DERIVED] DRAM bytes / step time",
            w,
        ),
        Figure(
            a,
            "utilization",
            "dram",
            100.0 * e.utilization,
            "%",
            nan,
            f"[DERIVED] achieved / peak DRAM bandwidth ({e.peak_bw_bytes_per_s / 1e12:g} TB/s,"
            " the configuration's dram.bw_gb_per_s)",
            w,
        ),
        Figure(
            a,
            "energy",
            "dram_device",
            e.device_j,
            "J",
            e.device_sigma_j,
            f"cost model (coaccel.cost.evaluate): {e.device_source}",
            w,
        ),
        Figure(
            a,
            "energy_per_byte",
            "dram_device",
            e.device_pj_per_byte,
            "pJ/B",
            e.device_pj_per_byte * e.device_rel_sigma,
            f"the configuration's DRAM file: {e.device_source}",
            w,
        ),
    ]


def _device_token_figures(e: DecodeEnergy, batch: int) -> list[Figure]:
    """Tokens per step and the device-DRAM energy per token and per request.

    Args:
        e: the step's energy.
        batch: tokens generated per step (``e.batch``, known and nonzero).

    Returns:
        Tokens per step (token), device-DRAM energy per token (J/token) and per request of
        :data:`OUTPUT_TOKENS` tokens (J/request).
    """
    w, a = e.workload, e.arch
    dev_tok = e.device_j / batch
    return [
        Figure(
            a,
            "tokens",
            "per_step",
            float(batch),
            "token",
            0.0,
            "the workload's batch: one token per sequence per step",
            w,
        ),
        Figure(
            a,
            "energy_per_token",
            "dram_device",
            dev_tok,
            "J/token",
            e.device_sigma_j / batch,
            "[DERIVED] device-DRAM energy of the step / batch",
            w,
        ),
        Figure(
            a,
            "energy_per_request",
            "dram_device",
            dev_tok * OUTPUT_TOKENS,
            "J/request",
            e.device_sigma_j / batch * OUTPUT_TOKENS,
            f"[DERIVED] per token x {OUTPUT_TOKENS} output tokens ([OURS] request length;"
            " context held at the workload's)",
            w,
        ),
    ]


def _board_figures(e: DecodeEnergy, fit: BoardFit) -> list[Figure]:
    """Figures of the board-power view of a step.

    Args:
        e: the step's energy.
        fit: its board-power fit (``e.fit``, not None).

    Returns:
        The fitted base power (W) and bandwidth slope (pJ/B), the step's base, traffic and
        total board energy (J) and its average board power (W).
    """
    w, a = e.workload, e.arch
    rel = _rel_source(fit)
    return [
        Figure(
            a,
            "power",
            "board.base",
            e.base_w,
            "W",
            math.hypot(e.base_sigma_w, e.rel_sigma * e.base_w),
            f"{e.board_source}; {rel}",
            w,
        ),
        Figure(
            a,
            "energy_per_byte",
            "board.dram_traffic",
            e.k_j_per_byte * 1e12,
            "pJ/B",
            math.hypot(e.k_sigma_j_per_byte, e.rel_sigma * e.k_j_per_byte) * 1e12,
            f"{e.board_source}; {rel}",
            w,
        ),
        Figure(
            a,
            "energy",
            "board.base",
            e.base_j,
            "J",
            e.base_sigma_j,
            "[DERIVED] base power x step time",
            w,
        ),
        Figure(
            a,
            "energy",
            "board.dram_traffic",
            e.traffic_j,
            "J",
            e.traffic_sigma_j,
            "[DERIVED] bandwidth slope x DRAM bytes",
            w,
        ),
        Figure(
            a,
            "energy",
            "board.total",
            e.board_j,
            "J",
            e.board_sigma_j,
            f"board.base + board.dram_traffic; {rel}",
            w,
        ),
        Figure(
            a,
            "power",
            "board.average",
            e.power_w,
            "W",
            e.board_sigma_j / e.seconds,
            "[DERIVED] board energy / step time = base + slope x achieved bandwidth",
            w,
        ),
    ]


def _board_token_figures(e: DecodeEnergy, batch: int) -> list[Figure]:
    """The board energy per token and per request.

    Args:
        e: the step's energy, with a board-power fit.
        batch: tokens generated per step (``e.batch``, known and nonzero).

    Returns:
        Board energy per token (J/token) and per request of :data:`OUTPUT_TOKENS` tokens
        (J/request).
    """
    w, a = e.workload, e.arch
    tok = e.board_j / batch
    tok_s = e.board_sigma_j / batch
    return [
        Figure(
            a,
            "energy_per_token",
            "board",
            tok,
            "J/token",
            tok_s,
            "[DERIVED] board energy of the step / batch",
            w,
        ),
        Figure(
            a,
            "energy_per_request",
            "board",
            tok * OUTPUT_TOKENS,
            "J/request",
            tok_s * OUTPUT_TOKENS,
            f"[DERIVED] per token x {OUTPUT_TOKENS} output tokens ([OURS] request length;"
            " context held at the workload's)",
            w,
        ),
    ]


def _figures(e: DecodeEnergy) -> list[Figure]:
    """Every figure of one decode step, in the CSV's order.

    Args:
        e: the step's energy.

    Returns:
        The step and device-memory figures, per token and per request where the batch is
        known, then the board-power view where the GPU has a fit.
    """
    out = _step_figures(e)
    if e.batch:
        out += _device_token_figures(e, e.batch)
    if e.fit is None:
        return out
    out += _board_figures(e, e.fit)
    if e.batch:
        out += _board_token_figures(e, e.batch)
    return out


def _pm(v: float, s: float, scale: float = 1.0) -> str:
    if math.isnan(v):
        return "—"
    return f"{v * scale:.4g} ± {s * scale:.2g}"


def _board_row(e: DecodeEnergy) -> tuple[str, ...]:
    """One row of the board-power table (the columns of :func:`_board_section`)."""
    per_tok = per_req = "—"
    if e.batch and e.fit is not None:
        per_tok = _pm(e.board_j / e.batch, e.board_sigma_j / e.batch, 1e3)
        per_req = _pm(
            e.board_j / e.batch * OUTPUT_TOKENS, e.board_sigma_j / e.batch * OUTPUT_TOKENS
        )
    measured = "—" if e.fit is None else e.fit.board + (" (same die)" if e.fit.analog else "")
    return (
        e.arch,
        e.workload,
        measured,
        f"{e.seconds * 1e6:.4g}",
        f"{e.dram_bytes / 1e6:.4g}",
        f"{e.bandwidth_bytes_per_s / 1e12:.3g}",
        f"{100 * e.utilization:.1f}",
        _pm(e.base_w, math.hypot(e.base_sigma_w, e.rel_sigma * e.base_w)),
        _pm(e.power_w, e.board_sigma_j / e.seconds),
        _pm(e.board_j, e.board_sigma_j, 1e3),
        per_tok,
        per_req,
    )


def _byte_row(e: DecodeEnergy) -> tuple[str, ...]:
    """One row of the device-memory table (the columns of :func:`_byte_section`)."""
    dev_tok = "—" if not e.batch else _pm(e.device_j / e.batch, e.device_sigma_j / e.batch, 1e3)
    ratio = "—" if e.fit is None else f"{e.device_j / e.traffic_j:.2f}"
    return (
        e.arch,
        _pm(
            e.k_j_per_byte * 1e12,
            math.hypot(e.k_sigma_j_per_byte, e.rel_sigma * e.k_j_per_byte) * 1e12,
        ),
        f"{e.device_pj_per_byte:g}",
        _pm(e.traffic_j, e.traffic_sigma_j, 1e3),
        _pm(e.device_j, e.device_sigma_j, 1e3),
        dev_tok,
        ratio,
    )


def _board_paragraphs(missing: Sequence[str]) -> list[str]:
    """The board-power section's text: the power model, the workload's scope, the uncertainties.

    Args:
        missing: GPUs without a board-power fit, in table order (named in a last paragraph).

    Returns:
        The paragraphs, with the fits' numbers read from :data:`BOARD_TABLE`.
    """
    t = shipped_table(BOARD_TABLE)
    h2 = t["h200_base_w"].value, t["h200_w_per_tb_per_s"].value
    a1 = t["a100_40g_base_w"].value, t["a100_40g_w_per_tb_per_s"].value
    paras = [
        "Power model: board power P = P_base + k_bw x B, with B the step's achieved DRAM "
        "bandwidth (DRAM bytes / step time; utilization = B / the configuration's peak). "
        f"P_base and k_bw are least-squares fits of P = P_base + k_bw x B + k_flop x F to "
        "published board-power measurements of a streaming kernel with 0 to several hundred "
        "FP32 FMAs per element pair ([GPU-BENCHES-ROOFLINE]; NVML board power, [NVML]): "
        "H200 at 1980 MHz, "
        f"P_base {h2[0]:g} W and k_bw {h2[1]:g} W per TB/s (55 points, residual rms 3.9 W); "
        f"eight A100-SXM4-40GB at 1410 MHz, {a1[0]:g} W and {a1[1]:g} W per TB/s (43 points, "
        "rms 2.3 W). P_base is the board with its clocks up and no DRAM traffic or FP32 work "
        "(an extrapolation of the fit, not the idle power); k_bw is the energy per byte moved "
        "at the board. The step's energy is P_base x t + k_bw x bytes; per token it is "
        "divided by the batch (one token per sequence per step), per request multiplied by "
        f"{OUTPUT_TOKENS} output tokens ([OURS] request length, every step at the workload's "
        "context).",
        "The flashdecode workload is one decode step of one layer's attention (the split-K "
        "kernel and its reduction): its energy per token is that layer's attention per "
        "generated token, not a whole model's (weights, other layers and the host are "
        "outside).",
        "Uncertainties are one sigma: the fit's standard errors (taken as independent, which "
        "overstates them: intercept and slope are negatively correlated), "
        f"{100 * t['gpu_sensor_rel_sigma'].value:g} % for the power sensor ([NVML] states 5 % "
        f"for older boards), {100 * t['gpu_kernel_mix_rel_sigma'].value:g} % [OURS] for a "
        "decode step's kernel mix (bf16 MMAs, exponentials and launch gaps, not the fit's FP32 "
        f"FMAs), and {100 * t['gpu_analog_rel_sigma'].value:g} % [OURS] more where the fit is "
        "of another board of the same die (H100 SXM and GH200 priced with the H200's, A100 "
        "80 GB with the A100 40 GB's). The simulated step time carries no stated uncertainty.",
    ]
    if missing:
        paras.append(
            f"No board-power fit for {', '.join(missing)}: no published series at hand "
            "separates its bandwidth term (the GA102 series, eight A40s, holds the bandwidth "
            "constant while the power sits at its 300 W limit), so only the device-memory view "
            "is given."
        )
    return paras


def _board_section(energies: Sequence[DecodeEnergy]) -> Section:
    """The section of decode energy per token from board power against utilization.

    Args:
        energies: the priced steps, one table row each.

    Returns:
        The :class:`~coaccel.report.document.Section`: text and one table.
    """
    missing = [e.arch for e in energies if e.fit is None]
    return Section(
        "Decode energy per token from board power against utilization",
        tuple(_board_paragraphs(missing)),
        tables=(
            Table(
                (
                    "GPU",
                    "workload",
                    "fit measured on",
                    "step time (µs)",
                    "DRAM (MB)",
                    "achieved (TB/s)",
                    "utilization (% of peak)",
                    "P_base (W)",
                    "board power (W)",
                    "energy per step (mJ)",
                    "per token (mJ/token)",
                    f"per request of {OUTPUT_TOKENS} tokens (J)",
                ),
                tuple(_board_row(e) for e in energies),
            ),
        ),
    )


def _byte_section(energies: Sequence[DecodeEnergy]) -> Section:
    """The section comparing the cost model's device-memory energy with the board's slope.

    Args:
        energies: the priced steps, one table row each.

    Returns:
        The :class:`~coaccel.report.document.Section`: one paragraph and one table.
    """
    byte_para = (
        "Device-memory view: the cost model prices the step's DRAM bytes at the "
        "configuration's energy per byte ('device DRAM'; each GPU's arch_configs/dram/ file, "
        "its source and uncertainty in the CSV: for the HBM GPUs Samsung's HBM3E device figure, "
        "3.9 pJ/bit [SAMSUNG-HBM3E]). A device figure leaves out what the board's slope k_bw "
        "(about 15 pJ/bit) also holds: the PHY, the memory controllers, the L2, the on-chip "
        "network and the SMs' load path; 'device / board' is its share of the board's traffic "
        "energy."
    )
    return Section(
        "Device-memory energy per byte (cost model) against the board's slope",
        (byte_para,),
        tables=(
            Table(
                (
                    "GPU",
                    "board slope (pJ/B)",
                    "device DRAM (pJ/B)",
                    "board traffic energy (mJ)",
                    "device DRAM energy (mJ)",
                    "device DRAM per token (mJ/token)",
                    "device / board",
                ),
                tuple(_byte_row(e) for e in energies),
            ),
        ),
    )


def _sections(energies: Sequence[DecodeEnergy]) -> list[Section]:
    """The part's sections: the board-power view, then the device-memory view.

    Args:
        energies: the priced steps (every GPU of every workload).

    Returns:
        The two :class:`~coaccel.report.document.Section`.
    """
    return [_board_section(energies), _byte_section(energies)]


def _workload_specs(settings: ReportSettings) -> list[str]:
    from coaccel.targets.gpu import TARGET

    role = TARGET.report
    return list(settings.workloads) or list(role.default_workloads if role else ())


def _batch(workload: Any) -> int | None:
    meta = getattr(getattr(workload, "trace", None), "meta", {}) or {}
    batch = (meta.get("workload") or {}).get("batch")
    return int(batch) if batch else None


def report_part(archs: Sequence[Any], settings: ReportSettings) -> ReportPart:
    """Decode energy per token and per request of GPUs (module docstring).

    Args:
        archs: loaded ``gpu`` configurations.
        settings: what the report asks for: workloads (GPU workload specs; default the
            target's ``flashdecode:B=8,T=4096``) and the simulator mode. A GPU has no area or
            resource table: with ``settings.area_only`` the part says so and prices nothing.

    Returns:
        The :class:`~coaccel.report.document.ReportPart`: the board-power section and the
        device-memory section; every number also as a
        :class:`~coaccel.report.document.Figure` (unit, one sigma where one is stated,
        source).
    """
    from coaccel.targets.gpu import TARGET

    archs = list(archs)
    title = "GPUs: decode energy per token and per request"
    if settings.area_only:
        return ReportPart(
            kind=KIND,
            title=title,
            notes=("Area only: a GPU has no area or resource model here; nothing is priced.",),
        )
    specs = _workload_specs(settings)
    energies: list[DecodeEnergy] = []
    figures: list[Figure] = []
    for spec in specs:
        wl = TARGET.load_workload(spec)
        batch = _batch(wl)
        for cfg in archs:
            result = simulate(cfg, wl, mode=settings.mode)
            e = decode_energy(cfg, result, batch)
            energies.append(e)
            figures += _figures(e)
    notes = (
        f"Workloads: {', '.join(specs)}; simulator mode {settings.mode}.",
        "Board energy = fitted base power x step time + fitted energy per byte x DRAM bytes "
        "(published board-power measurements); device-memory energy = the cost model's DRAM "
        "figure.",
        f"Per request: {OUTPUT_TOKENS} output tokens at the workload's context.",
    )
    return ReportPart(
        kind=KIND,
        title=title,
        notes=notes,
        sections=tuple(_sections(energies)),
        figures=tuple(figures),
    )
