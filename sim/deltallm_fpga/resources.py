"""Resource estimate of a DeltaLLM FPGA design (DSP48E2, BRAM36, URAM288, LUT, FF).

The estimate follows the datapath and buffers of the configuration ([OURS] architecture,
docs/deltallm_fpga.md):

* **DSP48E2**: ``L·M / macs_per_dsp`` for the MAC array plus ``exp_dsps_per_lane·L`` for the
  exponent multipliers.
* **LUT**: each MAC selects its lane's q element through a ``d:1`` mux of 8-bit operands. An
  UltraScale+ LUT6 is a 4:1 mux and a CLB's F7/F8/F9 muxes join its eight LUTs into a 32:1 mux
  ([UG574] CLB multiplexers), so an ``n:1`` mux costs ``ceil(n/4)`` LUTs up to 32 inputs, plus a
  tree of 4:1 LUTs over the 32:1 groups beyond that. Per-MAC, per-lane and control LUTs are
  configuration coefficients, and so are LUTRAM buffers (a LUT6 is a 64 x 1 RAM).
* **BRAM36**: a buffer of ``depth`` words of ``width`` bits takes the cheapest RAMB18 aspect ratio
  (16K x 1 ... 512 x 36) or RAMB36 in 512 x 72 ([UG573] block RAM configurations), counted in
  BRAM36 (a RAMB18 is 0.5), the unit of the device's resource table ([DS987]).
* **URAM288**: 4K x 72 bits each ([UG573]), ``ceil(width/72)·ceil(depth/4096)``.
* **FF**: pipeline registers per MAC, control, and buffers mapped to flip-flops.

Double-buffered buffers count twice. :func:`estimate_resources` returns the figures and
:func:`fit_problems` the resources a design overuses (one :class:`~coaccel.config.Problem` each,
naming the resource; the config loader raises them as a ``ConfigError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from coaccel.spine.config import Problem

# The estimate reads a DeltaFpgaConfig by attribute; it does not import .config, whose
# validate() calls fit_problems (an import either way round would be a cycle).
DeltaFpgaConfig = Any
BufferMapping = Any

__all__ = ["BufferGeometry", "Resources", "buffer_geometries", "dsp48e2_tiles", "dsp_breakdown",
           "estimate_resources", "fit_problems", "logic_breakdown", "memory_cost",
           "mux_luts"]  # fmt: skip

# (width bits, depth words) of one RAMB18 ([UG573]); a RAMB36 in simple dual port is 72 x 512.
_RAMB18_SHAPES = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))
_RAMB36_SDP = (72, 512)
_URAM = (72, 4096)
_LUTRAM_DEPTH = 64
_LUTRAM_SHALLOW = 32
_SCORE_BITS = 24  # the RTL's score accumulators (SW)


@dataclass(frozen=True)
class Resources:
    """Programmable-logic resources of a design.

    Attributes:
        luts: CLB LUTs (logic and LUTRAM).
        ffs: flip-flops.
        dsps: DSP48E2 slices.
        bram36: 36 Kb block RAMs (a RAMB18 is 0.5).
        urams: 288 Kb UltraRAMs.
    """

    luts: int
    ffs: int
    dsps: int
    bram36: float
    urams: int


@dataclass(frozen=True)
class BufferGeometry:
    """One physical memory of a buffer: ``copies`` memories of ``depth`` x ``width_bits``.

    Attributes:
        name: ``<buffer>`` or ``<buffer>.<part>``.
        width_bits: bits per word. depth: words. copies: identical memories (double
            buffering, read ports).
    """

    name: str
    width_bits: int
    depth: int
    copies: int


def mux_luts(n_inputs: int) -> int:
    """LUT6 count of one 1-bit ``n:1`` multiplexer on UltraScale+ ([UG574]).

    Args:
        n_inputs: mux inputs, >= 1.

    Returns:
        ``ceil(n/4)`` LUTs (F7/F8/F9 join eight LUTs into a 32:1 mux), plus
        ``ceil((g - 1)/3)`` LUTs of 4:1 muxes over the ``g = ceil(n/32)`` groups; 0 for ``n = 1``.
    """
    if n_inputs <= 1:
        return 0
    base = -(-n_inputs // 4)
    groups = -(-n_inputs // 32)
    # each further LUT6 4:1 mux turns four signals into one: ceil((groups - 1) / 3) LUTs
    return base + -(-(groups - 1) // 3)


def memory_cost(memory: str, width_bits: int, depth: int) -> tuple[float, int, int, int]:
    """Resources of one ``depth`` x ``width_bits`` memory.

    Args:
        memory: ``bram``, ``uram``, ``lutram`` or ``ff``.
        width_bits: bits per word, >= 1.
        depth: words, >= 1.

    Returns:
        ``(bram36, urams, luts, ffs)``.
    """
    if memory == "bram":
        halves = min(math.ceil(width_bits / w) * math.ceil(depth / dp) for w, dp in _RAMB18_SHAPES)
        full = 2 * math.ceil(width_bits / _RAMB36_SDP[0]) * math.ceil(depth / _RAMB36_SDP[1])
        return min(halves, full) / 2, 0, 0, 0
    if memory == "uram":
        return 0.0, math.ceil(width_bits / _URAM[0]) * math.ceil(depth / _URAM[1]), 0, 0
    if memory == "lutram":
        if depth <= _LUTRAM_SHALLOW:
            # RAM32M16 / RAM32M: two bits per LUT at 32 words
            return 0.0, 0, math.ceil(width_bits / 2), 0
        return 0.0, 0, width_bits * math.ceil(depth / _LUTRAM_DEPTH), 0
    return 0.0, 0, 0, width_bits * depth


def buffer_geometries(cfg: DeltaFpgaConfig) -> list[tuple[BufferGeometry, BufferMapping]]:
    """The physical memories of the vector processor's buffers (sized by ``cfg.buffers``).

    Args:
        cfg: the design.

    Returns:
        ``(geometry, mapping)`` per memory: the q block, the lane q registers, Δ bitmask and
        values (worst case dense), key window, V, output accumulators and exp2 LUT copies.
    """
    b, dp = cfg.buffers, cfg.datapath
    lanes, m, d, t = dp.lanes, dp.macs_per_lane, b.max_head_dim, b.max_tokens
    ql = cfg.pipeline.q_load_elems_per_cycle
    dbl = {name: 2 if getattr(b, name).double_buffered else 1 for name in
           ("q", "lane_q", "delta", "key_window", "v", "out_acc", "exp_lut")}  # fmt: skip
    words = -(-d // m)
    rows = [
        (BufferGeometry("q", 8 * ql, -(-lanes * d // ql), dbl["q"]), b.q),
        # LUTRAM: one d-word copy per MAC read port; registers: one row per lane (d:1 muxes)
        (
            BufferGeometry("lane_q", 8, d, lanes * m * dbl["lane_q"])
            if b.lane_q.memory == "lutram"
            else BufferGeometry("lane_q", 8 * d, 1, lanes * dbl["lane_q"]),
            b.lane_q,
        ),
        (BufferGeometry("delta.mask", d, t, dbl["delta"]), b.delta),
        (BufferGeometry("delta.values", 9 * m, t * words, dbl["delta"]), b.delta),
        (
            BufferGeometry(
                "key_window", 8 * m, (b.max_window_tokens + lanes - 1) * words, dbl["key_window"]
            ),
            b.key_window,
        ),  # fmt: skip
        (BufferGeometry("v", 8 * m, t * words, dbl["v"]), b.v),
        (BufferGeometry("out_acc", 40 * m, words, lanes * dbl["out_acc"]), b.out_acc),
    ]
    # one exp2 read per lane per cycle: a true dual-port BRAM serves two lanes, LUTRAM one
    ports = 2 if b.exp_lut.memory == "bram" else 1
    rows.append(
        (BufferGeometry("exp_lut", 16, 256, -(-lanes // ports) * dbl["exp_lut"]), b.exp_lut)
    )
    return rows


def dsp48e2_tiles(a_bits: int, b_bits: int) -> int:
    """DSP48E2 slices of one signed ``a_bits x b_bits`` product split into 27 x 18 tiles.

    A DSP48E2 multiplies a 27-bit by an 18-bit two's-complement operand ([UG579]); a wider
    operand is cut into a signed top part of 27 (18) bits and unsigned lower parts of 26 (17)
    bits, the tiles' partial products added in the fabric. The operands may be swapped; the
    cheaper order counts. This is how Yosys's ``synth_xilinx`` splits the RTL's products (the
    KV260 table: 40 x 17 -> 2, 25 x 24 -> 2, 33 x 17 -> 2, 40 x 42 -> 6, 17 x 9 -> 1).

    Args:
        a_bits, b_bits: signed operand widths, >= 2.

    Returns:
        The tile count.
    """

    def parts(n: int, top: int) -> int:
        return 1 if n <= top else 1 + -(-(n - top) // (top - 1))

    return min(parts(a_bits, 27) * parts(b_bits, 18), parts(b_bits, 27) * parts(a_bits, 18))


def dsp_breakdown(cfg: DeltaFpgaConfig) -> dict[str, int]:
    """DSP48E2 slices per unit of the vector processor (their sum is ``Resources.dsps``).

    Args:
        cfg: a ``delta_vector`` design.

    Returns:
        ``mac`` (the L x M broadcast multipliers, ``ceil(L·M / macs_per_dsp)``), ``rescale``
        (``L·M·rescale_dsps_per_mac``, the PV step's ``o·α``), ``softmax``
        (``L·exp_dsps_per_lane``) and ``normalizer`` (``M·normalizer_dsps_per_elem``).
    """
    dp = cfg.datapath
    macs = dp.lanes * dp.macs_per_lane
    return {
        "mac": -(-macs // dp.macs_per_dsp),
        "rescale": macs * dp.rescale_dsps_per_mac,
        "softmax": dp.lanes * dp.exp_dsps_per_lane,
        "normalizer": dp.macs_per_lane * dp.normalizer_dsps_per_elem,
    }


def logic_breakdown(cfg: DeltaFpgaConfig, what: str) -> dict[str, int]:
    """Logic LUTs or flip-flops per unit of the vector processor, buffers not included.

    Args:
        cfg: a ``delta_vector`` design.
        what: ``"luts"`` or ``"ffs"``.

    Returns:
        ``mac`` (``L·M·luts_per_mac``, plus ``8·mux(d)`` per MAC when q is held in registers;
        flip-flops ``L·(2·24 + d/M)`` plus ``L·M·ffs_per_mac``), ``prio``
        (``prio_luts_per_bit·d·M``; no flip-flops), ``softmax`` (per lane), ``normalizer`` (per
        lane and per output product), ``control`` (the attention top's sequencer) and
        ``system`` (outside the RTL). With the buffers (:func:`buffer_geometries`) they make
        ``Resources.luts`` / ``Resources.ffs``.

    Raises:
        ValueError: ``what`` is neither.
    """
    if what not in ("luts", "ffs"):
        raise ValueError(f"what: {what!r}; valid: luts, ffs")
    dp, rm = cfg.datapath, cfg.resource_model
    macs = dp.lanes * dp.macs_per_lane
    d = cfg.buffers.max_head_dim
    if what == "luts":
        mac = round(macs * rm.luts_per_mac)
        if cfg.buffers.lane_q.memory != "lutram":
            # q in registers: each MAC selects its 8-bit operand through a d:1 mux
            mac += macs * 8 * mux_luts(d)
        return {
            "mac": mac,
            "prio": round(rm.prio_luts_per_bit * d * dp.macs_per_lane),
            "softmax": round(dp.lanes * rm.luts_per_lane_softmax),
            "normalizer": round(
                dp.lanes * rm.luts_per_lane_normalizer
                + dp.macs_per_lane * rm.luts_per_elem_normalizer
            ),
            "control": rm.control_luts,
            "system": rm.system_luts,
        }
    return {
        # per lane the exact and chain score accumulators (24 bits each) and the o-word flags
        "mac": dp.lanes * (2 * _SCORE_BITS + -(-d // dp.macs_per_lane))
        + round(macs * rm.ffs_per_mac),
        "prio": 0,
        "softmax": round(dp.lanes * rm.ffs_per_lane_softmax),
        "normalizer": round(
            dp.lanes * rm.ffs_per_lane_normalizer + dp.macs_per_lane * rm.ffs_per_elem_normalizer
        ),
        "control": rm.control_ffs,
        "system": rm.system_ffs,
    }


def estimate_resources(cfg: DeltaFpgaConfig) -> Resources:
    """Resource estimate of a design (module docstring).

    Args:
        cfg: the design. For ``engine: tellme_v2`` the DSP and BRAM figures are the configured
            ``tellme.dsps`` / ``tellme.bram36`` and the other resources are not estimated (0).

    Returns:
        The :class:`Resources`.
    """
    if cfg.engine == "tellme_v2" and cfg.tellme is not None:
        return Resources(luts=0, ffs=0, dsps=cfg.tellme.dsps, bram36=cfg.tellme.bram36, urams=0)
    dsps = sum(dsp_breakdown(cfg).values())
    luts = sum(logic_breakdown(cfg, "luts").values())
    ffs = sum(logic_breakdown(cfg, "ffs").values())
    bram, uram = 0.0, 0
    for geo, mapping in buffer_geometries(cfg):
        b36, u, lut, ff = memory_cost(mapping.memory, geo.width_bits, geo.depth)
        bram += b36 * geo.copies
        uram += u * geo.copies
        luts += lut * geo.copies
        ffs += ff * geo.copies
    return Resources(luts=luts, ffs=ffs, dsps=dsps, bram36=bram, urams=uram)


_NAMES = {
    "luts": "LUT",
    "ffs": "FF",
    "dsps": "DSP48E2",
    "bram36": "BRAM36",
    "urams": "URAM288",
}


def fit_problems(cfg: DeltaFpgaConfig) -> list[Problem | str]:
    """The resources a design needs beyond the device's limits.

    Args:
        cfg: the design.

    Returns:
        One :class:`~coaccel.config.Problem` per overused resource, keyed ``limits.<resource>``
        and naming it (``"DSP48E2: the design needs 1312, the device has 1248"``); empty when
        it fits.
    """
    need = estimate_resources(cfg)
    out: list[Problem | str] = []
    for key, label in _NAMES.items():
        have, want = getattr(cfg.limits, key), getattr(need, key)
        if want > have:
            out.append(
                Problem(
                    "",
                    f"limits.{key}",
                    have,
                    f"{label}: the design needs {want:g}, the device has {have:g} (reduce "
                    "datapath.lanes / macs_per_lane, buffers.max_tokens, or remap a buffer)",
                )
            )
    return out
