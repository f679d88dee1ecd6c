"""Architecture configs of the DeltaLLM FPGA simulator (``arch_configs/deltallm_fpga/*.yaml``).

:class:`DeltaFpgaConfig` is the schema of one design point: the engine (the DeltaLLM vector
processor, or the TeLLMe-v2 attention engine it is compared with), the clock, the lane array
(lanes ``L``, MACs per lane ``M``), the pipeline latencies of the cycle model, the on-chip buffers
and the memory each is mapped to (BRAM, URAM, LUTRAM or flip-flops), the Delta-Key / VSSOS
algorithm settings (``theta``, ``window_tokens``, ``tau_log2``, ...), the synthetic key source,
the linear-layer model used for end-to-end TTFT, the DDR4 (the shared
:class:`~coaccel.config.DramConfig` block) and the device's resource limits. It loads through
:func:`coaccel.config.load_config`, so unknown keys, types, units and ranges are reported in one
:class:`~coaccel.config.ConfigError`; a design that does not fit the device is a ``ConfigError``
naming the resource (:mod:`.resources`). See ``docs/deltallm_fpga.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from coaccel.spine.config import (
    DramConfig,
    FrozenMap,
    Problem,
    load_config,
    param,
    source_key_problems,
)

from ..common.target import arch_file

__all__ = [
    "ARCH_NAMES",
    "KIND",
    "AlgorithmConfig",
    "BufferMapping",
    "BuffersConfig",
    "DatapathConfig",
    "DeltaFpgaConfig",
    "DeviceLimits",
    "KeySourceConfig",
    "LinearConfig",
    "PipelineConfig",
    "ResourceModelConfig",
    "TellmeConfig",
    "arch_path",
    "load_arch",
]

KIND = "deltallm_fpga"
"""The ``kind:`` of a DeltaLLM FPGA architecture file (shipped: ``arch_configs/deltallm_fpga/``)."""


def _shipped_arch_names() -> tuple[str, ...]:
    from importlib.resources import files

    folder = files("coaccel.arch_configs").joinpath(KIND)
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


ARCH_NAMES: tuple[str, ...] = _shipped_arch_names()
"""The architectures shipped in ``arch_configs/deltallm_fpga/``, sorted."""

Memory = Literal["bram", "uram", "lutram", "ff"]


@dataclass(frozen=True)
class DatapathConfig:
    """The broadcast MAC array: ``lanes`` x ``macs_per_lane`` multipliers shared by QK and PV.

    Attributes:
        lanes: vector lanes ``L = G·P_q`` (query heads of one KV group x query tokens).
        macs_per_lane: MACs per lane per cycle ``M`` (broadcast (index, value) pairs per cycle).
        macs_per_dsp: MAC products one DSP48E2 computes per cycle (1: one 17 x 9-bit product
            per MAC, shared by QK and PV, the RTL's; 2 packs two INT8 x INT9 QK products sharing
            the broadcast operand, which the RTL does not implement).
        rescale_dsps_per_mac: DSP48E2 of one MAC's output rescale ``o·α`` (40 x 17 bits).
        exp_dsps_per_lane: DSP48E2 of one lane's softmax multipliers (the two exponent
            products and the denominator rescale ``ℓ·α``).
        normalizer_dsps_per_elem: DSP48E2 of one of the normaliser's M output products ``o·r``
            (40 x 42 bits).
    """

    lanes: int = param(ge=1, le=64, doc="vector lanes L")
    macs_per_lane: int = param(ge=1, le=128, doc="MACs per lane per cycle M")
    macs_per_dsp: int = param(default=1, ge=1, le=2, doc="MAC products per DSP48E2")
    rescale_dsps_per_mac: int = param(default=2, ge=0, doc="DSP48E2 per MAC for o·α")
    exp_dsps_per_lane: int = param(default=6, ge=0, doc="DSP48E2 per lane softmax")
    normalizer_dsps_per_elem: int = param(default=6, ge=0, doc="DSP48E2 per normaliser product")


@dataclass(frozen=True)
class PipelineConfig:
    """Latencies of the vector processor's pipeline stages and its per-block overheads.

    The fill/drain of one query block is the sum of the nine stage latencies. Loading a query
    block's ``L·d`` INT8 q values and writing its ``L·d`` outputs take ``L·d /
    q_load_elems_per_cycle`` and ``L·d / out_write_elems_per_cycle`` cycles.

    Attributes:
        bitmask_decode_cycles: bitmask fetch and priority encode.
        operand_mux_cycles: the d:1 operand mux of each MAC.
        multiply_cycles: DSP multiply pipeline.
        adder_tree_cycles: adder tree over M plus accumulate.
        window_select_cycles: exact/delta score select.
        max_exponent_cycles: running max and exponent multiply.
        exp2_cycles: exp2 LUT and shift.
        skip_reduce_cycles: AND-reduction of the lanes' skip flags.
        rescale_issue_cycles: rescale and PV issue.
        softmax_cycles_per_column: initiation interval of the softmax unit, cycles per column;
            a column never takes fewer cycles.
        q_load_elems_per_cycle: q elements loaded into the lanes per cycle.
        out_write_elems_per_cycle: output elements written per cycle.
        normalize_cycles: the final normaliser's reciprocal per lane, overlapped with the next
            block (only the last block of a KV head exposes it).
    """

    bitmask_decode_cycles: int = param(default=2, ge=0, doc="bitmask fetch / priority encode")
    operand_mux_cycles: int = param(default=1, ge=0, doc="operand mux")
    multiply_cycles: int = param(default=3, ge=0, doc="DSP multiply pipeline")
    adder_tree_cycles: int = param(default=5, ge=0, doc="adder tree over M + accumulate")
    window_select_cycles: int = param(default=1, ge=0, doc="window/delta select")
    max_exponent_cycles: int = param(default=4, ge=0, doc="max and E multiply")
    exp2_cycles: int = param(default=2, ge=0, doc="exp2 LUT + shift")
    skip_reduce_cycles: int = param(default=1, ge=0, doc="skip reduce")
    rescale_issue_cycles: int = param(default=2, ge=0, doc="rescale and PV issue")
    softmax_cycles_per_column: int = param(default=1, ge=1, doc="softmax II per column")
    q_load_elems_per_cycle: int = param(default=16, ge=1, doc="q elements loaded per cycle")
    out_write_elems_per_cycle: int = param(default=16, ge=1, doc="outputs written per cycle")
    normalize_cycles: int = param(default=32, ge=0, doc="reciprocal per lane (overlapped)")

    @property
    def fill_cycles(self) -> int:
        """Pipeline fill/drain per query block: the sum of the stage latencies, cycles."""
        return (
            self.bitmask_decode_cycles
            + self.operand_mux_cycles
            + self.multiply_cycles
            + self.adder_tree_cycles
            + self.window_select_cycles
            + self.max_exponent_cycles
            + self.exp2_cycles
            + self.skip_reduce_cycles
            + self.rescale_issue_cycles
        )


@dataclass(frozen=True)
class BufferMapping:
    """Where one on-chip buffer lives and whether it has two slots.

    Attributes:
        memory: ``bram`` (RAMB36/RAMB18), ``uram`` (URAM288), ``lutram`` or ``ff``.
        double_buffered: two slots, so the next KV head (or block) loads while this one runs.
    """

    memory: Memory = param(doc="bram, uram, lutram or ff")
    double_buffered: bool = param(default=True, doc="two slots")


@dataclass(frozen=True)
class BuffersConfig:
    """The on-chip buffers of one (layer, KV head) and the largest problem they are sized for.

    Attributes:
        max_tokens: prompt length the Δ and V buffers hold, tokens.
        max_head_dim: head dimension the buffers are sized for, elements.
        max_window_tokens: largest exact window W the key-window buffer holds, tokens.
        q: the next query block's q values (``L x d`` INT8).
        lane_q: the lanes' own q: ``lutram`` keeps one d-word copy per MAC read port (the
            RTL's, loaded element-major), ``ff`` holds it in registers behind a d:1 mux per MAC.
        delta: Δ bitmasks (``d`` bits per key) and packed 9-bit nonzeros (worst case dense).
        key_window: the exact keys of the window (``(W + P_q - 1) x d`` INT8).
        v: values (``T x d`` INT8).
        out_acc: output accumulators (``L x d x 40`` bits): one ``d/M``-word memory per lane
            (the RTL's LUTRAM has one read port, at the operation's chunk).
        exp_lut: the 256 x 16-bit exp2 table, one read port per lane.
    """

    max_tokens: int = param(ge=1, doc="tokens the Δ and V buffers hold")
    max_head_dim: int = param(ge=1, doc="head dimension the buffers hold")
    max_window_tokens: int = param(ge=1, doc="largest exact window")
    q: BufferMapping = param(doc="next query block")
    lane_q: BufferMapping = param(doc="lane q registers")
    delta: BufferMapping = param(doc="Δ bitmask + values")
    key_window: BufferMapping = param(doc="exact-key window")
    v: BufferMapping = param(doc="values")
    out_acc: BufferMapping = param(doc="output accumulators")
    exp_lut: BufferMapping = param(doc="exp2 LUT")


@dataclass(frozen=True)
class AlgorithmConfig:
    """DeltaLLM's algorithm settings (the reference :func:`coaccel.models.deltallm.attention`).

    Attributes:
        theta: Delta-Key threshold, INT8 key LSBs.
        window_tokens: exact window W (diagonal included), tokens.
        tau_log2: VSSOS skip threshold, log2 units; null never skips.
        n_sink: leading keys stored dense and scored exactly.
        refresh_period_tokens: a dense key row every so many tokens (0: off).
        delta_mode: ``memory`` (default) or ``naive``.
        denom_mode: ``full`` (default) or ``kept``.
        order: column order, ``ascending`` or ``window_first``.
    """

    theta: int = param(ge=0, doc="Delta-Key threshold, key LSBs")
    window_tokens: int = param(ge=1, doc="exact window W")
    tau_log2: float | None = param(gt=0, doc="VSSOS threshold (log2 units); null: no skipping")
    n_sink: int = param(default=1, ge=1, doc="dense leading keys")
    refresh_period_tokens: int = param(default=0, ge=0, doc="dense row period (0: off)")
    delta_mode: Literal["memory", "naive"] = param(default="memory", doc="Delta-Key form")
    denom_mode: Literal["full", "kept"] = param(default="full", doc="VSSOS denominator")
    order: Literal["ascending", "window_first"] = param(default="ascending", doc="column order")


@dataclass(frozen=True)
class KeySourceConfig:
    """Where the simulated queries and keys come from: the seeded LLM-like generator
    :func:`coaccel.models.nn.synthetic_attention` (post-RoPE, the model's GQA group), one draw
    per layer with seed ``[seed, layer]``, quantized to INT8 per head.

    Attributes:
        generator: ``synthetic`` (the only one).
        seed: base seed.
        key_ar: lag-1 autocorrelation of the pre-RoPE keys along the sequence, in [0, 1): the
            knob that sets Delta-Key sparsity.
        query_ar: the same for queries.
        key_mean_std: std of the per-channel key offsets.
        query_mean_std: std of the per-channel query offsets.
        query_group_share: fraction of the query offset variance shared by a KV group's query
            heads (what makes them prefer the same keys, and so lets VSSOS skip columns).
        n_outlier_channels: large-magnitude channels per head.
        layers_simulated: run the reference on this many evenly spaced layers and scale their
            cycles to the model's layer count (0: every layer). The synthetic layers are drawn
            from one law, so a few give the per-layer figures at a fraction of the cost.
    """

    generator: Literal["synthetic"] = param(default="synthetic", doc="key generator")
    seed: int = param(default=0, ge=0, doc="base seed")
    key_ar: float = param(default=0.9, ge=0, lt=1, doc="key lag-1 autocorrelation")
    query_ar: float = param(default=0.5, ge=0, lt=1, doc="query lag-1 autocorrelation")
    key_mean_std: float = param(default=1.0, ge=0, doc="key channel offset std")
    query_mean_std: float = param(default=2.0, ge=0, doc="query channel offset std")
    query_group_share: float = param(default=0.5, ge=0, le=1, doc="shared query offsets")
    n_outlier_channels: int = param(default=4, ge=0, doc="outlier channels per head")
    layers_simulated: int = param(default=0, ge=0, doc="layers run (0: all), evenly spaced")


@dataclass(frozen=True)
class LinearConfig:
    """Throughput of the non-attention work of a prefill (projections, FFN, norms).

    The TLMM ternary engine ([TELLME2]) is modelled as a fixed number of ternary MACs per cycle
    plus a fixed cost per layer; both are fitted to TeLLMe-v2's published TTFT (see
    ``docs/deltallm_fpga.md``).

    Attributes:
        ternary_macs_per_cycle: sustained weight x activation MACs per cycle of the linear layers.
        layer_overhead_cycles: fixed cycles per layer (weight streaming start, norms, sync).
        lm_head: whether the LM head of the last token runs on the accelerator (False: on the
            processing system, as TeLLMe does, and not counted).
    """

    ternary_macs_per_cycle: float = param(gt=0, doc="ternary MACs per cycle")
    layer_overhead_cycles: float = param(default=0.0, ge=0, doc="fixed cycles per layer")
    lm_head: bool = param(default=False, doc="LM head on the accelerator")


@dataclass(frozen=True)
class TellmeConfig:
    """The TeLLMe-v2 prefill attention engine ([TELLME2] code, ``reverse_attention.hpp``).

    Per (query block, key) the engine streams the key across the hidden dimension
    (``hidden / qk_elems_per_cycle`` cycles) and runs the fused online-softmax / PV loop over
    ``query_parallel x heads`` (``softmax_ii_cycles`` each).

    Attributes:
        query_parallel: query tokens processed together.
        qk_elems_per_cycle: FP16 key elements per cycle (one 256-bit AXI word).
        softmax_ii_cycles: cycles per (query, head) of the softmax/PV loop.
        dsps: DSP48E2 of the attention engine (not published: an estimate).
        bram36: BRAM36 of the attention engine (not published: an estimate).
    """

    softmax_ii_cycles: float = param(gt=0, doc="cycles per (query, head)")
    dsps: int = param(ge=0, doc="DSP48E2 of the attention engine")
    bram36: float = param(ge=0, doc="BRAM36 of the attention engine")
    query_parallel: int = param(default=8, ge=1, doc="queries per block")
    qk_elems_per_cycle: int = param(default=16, ge=1, doc="key elements per cycle")


@dataclass(frozen=True)
class ResourceModelConfig:
    """Coefficients of the resource estimate (:mod:`.resources`).

    The per-unit coefficients are the Yosys counts of the RTL's units at the KV260
    configuration divided by their natural size (``rtl/synth/deltallm_kv260.csv``,
    docs/synthesis.md §6.2); the system terms cover what the RTL does not contain.

    Attributes:
        luts_per_mac: logic LUTs per MAC of the broadcast array: operand select, adder tree,
            accumulators, the PV add and the o·α partial-product adds (the priority encoder and
            the LUTRAMs are counted apart).
        ffs_per_mac: pipeline flip-flops per MAC beyond the RTL's registers (each lane's two
            score accumulators and o-word flags, ``2·24 + d/M``, are always counted).
        prio_luts_per_bit: LUTs of the bitmask priority encoder per mask bit and pair
            (``d·M`` bits x pairs: each of the M pairs scans the d-bit mask).
        luts_per_lane_softmax: LUTs of one lane of the (pipelined) softmax unit: max, the
            exponent products' adds, exp2 table, skip, denominator.
        ffs_per_lane_softmax: flip-flops of the same.
        luts_per_lane_normalizer: LUTs of one lane's reciprocal divider.
        ffs_per_lane_normalizer: flip-flops of the same.
        luts_per_elem_normalizer: LUTs of one of the normaliser's M output products and clamps.
        ffs_per_elem_normalizer: flip-flops of the same.
        control_luts: LUTs of the query-block sequencer, the stream handshakes and the lane
            regions (the attention top's control).
        control_ffs: flip-flops of the same.
        system_luts: LUTs outside the attention datapath: AXI/DMA, the Δ/V/q buffer address
            generation and the host interface (not in the RTL).
        system_ffs: flip-flops of the same.
    """

    luts_per_mac: float = param(default=16.0, ge=0, doc="logic LUTs per MAC")
    ffs_per_mac: float = param(default=0.0, ge=0, doc="pipeline flip-flops per MAC")
    prio_luts_per_bit: float = param(default=0.0, ge=0, doc="priority-encoder LUTs per bit")
    luts_per_lane_softmax: float = param(default=400.0, ge=0, doc="LUTs per lane softmax")
    ffs_per_lane_softmax: float = param(default=0.0, ge=0, doc="flip-flops per lane softmax")
    luts_per_lane_normalizer: float = param(default=0.0, ge=0, doc="LUTs per lane divider")
    ffs_per_lane_normalizer: float = param(default=0.0, ge=0, doc="flip-flops per divider")
    luts_per_elem_normalizer: float = param(default=0.0, ge=0, doc="LUTs per output product")
    ffs_per_elem_normalizer: float = param(default=0.0, ge=0, doc="FFs per output product")
    control_luts: int = param(default=0, ge=0, doc="attention-top control LUTs")
    control_ffs: int = param(default=0, ge=0, doc="attention-top control flip-flops")
    system_luts: int = param(default=8000, ge=0, doc="AXI/DMA, buffers' control, host")
    system_ffs: int = param(default=12000, ge=0, doc="AXI/DMA, buffers' control, host")


@dataclass(frozen=True)
class DeviceLimits:
    """Programmable-logic resources of the device ([DS987] K26 resource table).

    Attributes:
        luts: CLB LUTs. ffs: CLB flip-flops. dsps: DSP48E2 slices.
        bram36: 36 Kb block RAMs (an 18 Kb half counts 0.5). urams: 288 Kb UltraRAMs.
    """

    luts: int = param(ge=0, doc="CLB LUTs")
    ffs: int = param(ge=0, doc="CLB flip-flops")
    dsps: int = param(ge=0, doc="DSP48E2")
    bram36: float = param(ge=0, doc="BRAM36 (RAMB18 = 0.5)")
    urams: int = param(ge=0, doc="URAM288")


@dataclass(frozen=True)
class DeltaFpgaConfig:
    """One FPGA design point (``arch_configs/deltallm_fpga/<name>.yaml``; docs/deltallm_fpga.md).

    Attributes:
        kind: ``"deltallm_fpga"``.
        name: short name. description: one line.
        engine: ``delta_vector`` (the DeltaLLM vector processor) or ``tellme_v2`` (the baseline
            attention engine; then ``tellme`` is required and the lane fields only size logic).
        freq_mhz: clock, MHz.
        datapath, pipeline, buffers, algorithm, keys, linear, resource_model, limits: see their
            classes. tellme: the baseline engine (``engine: tellme_v2`` only).
        dram: off-chip DDR4 (the shared block; a file under ``arch_configs/dram/`` or inline).
        sources: provenance of figures, keyed by dotted field path.
    """

    VERSION: ClassVar[int] = 1

    kind: Literal["deltallm_fpga"] = param(doc="simulator kind: deltallm_fpga")
    name: str = param(doc="short name")
    engine: Literal["delta_vector", "tellme_v2"] = param(doc="attention engine")
    freq_mhz: float = param(gt=0, le=1000, doc="clock (at most 1 GHz)")
    datapath: DatapathConfig = param(doc="MAC array")
    pipeline: PipelineConfig = param(doc="pipeline latencies")
    buffers: BuffersConfig = param(doc="on-chip buffers")
    algorithm: AlgorithmConfig = param(doc="Delta-Key / VSSOS settings")
    linear: LinearConfig = param(doc="linear-layer model")
    limits: DeviceLimits = param(doc="device resources")
    dram: DramConfig = param(doc="off-chip DRAM")
    keys: KeySourceConfig = param(default=KeySourceConfig(), doc="synthetic key source")
    resource_model: ResourceModelConfig = param(
        default=ResourceModelConfig(), doc="resource estimate coefficients"
    )
    tellme: TellmeConfig | None = param(default=None, doc="baseline engine (tellme_v2 only)")
    description: str = param(default="", doc="one line")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: the engine's block, window vs buffer, and the device fit."""
        out: list[Problem | str] = []
        if self.engine == "tellme_v2" and self.tellme is None:
            out.append(Problem("", "tellme", None, "engine tellme_v2 needs a tellme block"))
        if self.engine == "delta_vector" and self.tellme is not None:
            out.append(
                Problem("", "tellme", "...", "a tellme block is only valid with engine tellme_v2")
            )
        if self.algorithm.window_tokens > self.buffers.max_window_tokens:
            out.append(
                Problem(
                    "",
                    "algorithm.window_tokens",
                    self.algorithm.window_tokens,
                    f"exceeds buffers.max_window_tokens={self.buffers.max_window_tokens} "
                    "(the key-window buffer is sized for it)",
                )
            )
        out.extend(source_key_problems(self, self.sources))
        if not out:
            from .resources import fit_problems

            out.extend(fit_problems(self))
        return out


def arch_path(name: str | Path) -> Path:
    """The file of an architecture: a shipped name (``"kv260"``) or a path.

    Args:
        name: one of :data:`ARCH_NAMES` (with or without ``.yaml``) or a file path.

    Returns:
        The path (it may not exist if a path was given).
    """
    return arch_file(KIND, ARCH_NAMES, name)


def load_arch(name: str | Path) -> DeltaFpgaConfig:
    """Load an architecture by shipped name or path (:func:`coaccel.config.load_config`).

    Args:
        name: one of :data:`ARCH_NAMES` or a YAML file path.

    Returns:
        The validated :class:`DeltaFpgaConfig`.

    Raises:
        ConfigError: every problem of the file, including a resource the design overuses.
    """
    return load_config(arch_path(name), DeltaFpgaConfig)
