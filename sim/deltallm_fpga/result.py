"""The DeltaLLM FPGA simulator's result: a SimResult subclass with its own figures."""

from __future__ import annotations

from dataclasses import dataclass

from coaccel.sim.common import Metric, SimResult

from .resources import Resources

__all__ = ["DeltaFpgaResult"]


@dataclass(frozen=True, kw_only=True)
class DeltaFpgaResult(SimResult):
    """One prefill of one model on one FPGA design.

    ``cycles`` / ``seconds`` are the time to first token without the LM head (attention plus
    linear layers, which run one after the other).

    Attributes:
        engine: ``delta_vector`` or ``tellme_v2``.
        tokens: prompt length T.
        layers: the model's layers; layers_simulated: layers the reference ran on (cycles of
            the others are the simulated layers' mean).
        attention_cycles: attention prefill, every layer, cycles.
        linear_cycles: projections and FFN, every layer, cycles.
        attention_compute_cycles: MAC-array busy cycles of the attention, every layer.
        attention_memory_cycles: DDR busy cycles of the attention, every layer.
        delta_sparsity: ρ_K. fine_sparsity: ρ_fine. structured_sparsity: ρ_S (PV MAC reduction).
        qk_mac_reduction: 1 - (exact + delta QK MACs) / dense causal QK MACs.
        skipped_column_fraction: skipped / visited (vector, column) steps.
        fpga_resources: the design's resource estimate (LUT, FF, DSP, BRAM36, URAM).
        mac_operations: lane-MACs the MAC array issued (QK exact and delta, PV), every layer.
        pv_operations: the PV lane-MACs among them (each also rescales its ``o`` by α).
        softmax_columns: (vector, column) steps of the softmax unit (x L lanes each).
        normalized_outputs: output elements the normaliser scaled (``L·d_v`` per query block).
        uram_read_bytes: bytes read from the URAM buffers (Δ bitmasks and values, V), B.
        bram_read_bytes: bytes read from the BRAM buffers (q blocks, key window), B.
    """

    engine: str
    tokens: int
    layers: int
    layers_simulated: int
    attention_cycles: int
    linear_cycles: int
    attention_compute_cycles: int
    attention_memory_cycles: int
    delta_sparsity: float
    fine_sparsity: float
    structured_sparsity: float
    qk_mac_reduction: float
    skipped_column_fraction: float
    fpga_resources: Resources
    mac_operations: int = 0
    pv_operations: int = 0
    softmax_columns: int = 0
    normalized_outputs: int = 0
    uram_read_bytes: int = 0
    bram_read_bytes: int = 0

    def metrics(self) -> dict[str, Metric]:
        """The base metrics plus ``attention.*``, ``linear.cycles``, ``sparsity.*`` (ratio 1),
        ``resource_use.*`` (LUT, FF, DSP, BRAM36, URAM counts) and ``ttft_s``."""
        out = super().metrics()
        f = self.freq_mhz * 1e6
        out["ttft_s"] = (self.seconds, "s")
        out["attention.cycles"] = (self.attention_cycles, "cycle")
        out["attention.seconds"] = (self.attention_cycles / f, "s")
        out["attention.compute_cycles"] = (self.attention_compute_cycles, "cycle")
        out["attention.memory_cycles"] = (self.attention_memory_cycles, "cycle")
        out["linear.cycles"] = (self.linear_cycles, "cycle")
        out["sparsity.delta_key"] = (self.delta_sparsity, "1")
        out["sparsity.fine"] = (self.fine_sparsity, "1")
        out["sparsity.structured"] = (self.structured_sparsity, "1")
        out["sparsity.qk_mac_reduction"] = (self.qk_mac_reduction, "1")
        out["sparsity.skipped_columns"] = (self.skipped_column_fraction, "1")
        r = self.fpga_resources
        out["resource_use.lut"] = (r.luts, "LUT")
        out["resource_use.ff"] = (r.ffs, "FF")
        out["resource_use.dsp"] = (r.dsps, "DSP")
        out["resource_use.bram36"] = (r.bram36, "BRAM36")
        out["resource_use.uram"] = (r.urams, "URAM")
        out["activity.mac_operations"] = (self.mac_operations, "MAC")
        out["activity.softmax_columns"] = (self.softmax_columns, "column")
        out["activity.uram_read_bytes"] = (self.uram_read_bytes, "B")
        out["activity.bram_read_bytes"] = (self.bram_read_bytes, "B")
        return out
