"""TeLLMe-v2's prefill time from the loop structure of its HLS code, with no fitted parameter.

TeLLMe-v2 ([TELLME2]) publishes its code; its prefill is a sequence of pipelined HLS loops whose
trip counts follow from the model shape and a few constants of ``src/config`` (the figures
``tellme_v2.code.*`` of ``arch_configs/validation/deltallm.yaml``). With every
``#pragma HLS PIPELINE`` loop at an initiation interval of 1 and no fill or drain, this gives a
lower bound on the cycles of each part:

* **attention** (``src/reverse_attention.hpp``, ``fuse_qkv_pe_bundle_block_stream``): per
  query block of ``P = ATTN_MATMUL_PARALLEL`` tokens and each key from the block's first token
  to the end (``pairs = Σ_b (T − P·b)``): ``VEC_COMPUTE`` streams the key over the query width
  ``Hq·d`` in ``HIDDEN_BLOCK_SIZE``-wide words (``ceil(Hq·d / 16)`` cycles), ``VEC_REDUCE``
  loops over the heads (``Hq``), ``PARTIAL_SOFT_MAX`` over ``P × Hq`` (flattened, pipelined);
  then ``OUTPUT`` writes ``P·ceil(Hq·d / 16)`` words per block. A GQA model's keys are streamed
  at the query width, as the MHA-only code would after repeating them (how DeltaLLM ported
  TeLLMe-v2 to GQA is not published).
* **linear layers** (``src/linear.hpp``, ``compute_linear_on_stream_block``): per token and
  per matrix, each input chunk of ``TMAC_TABLE_NUM·TMAC_GROUP_SIZE`` (= 84) activations is read
  one per cycle (``READ_A``) and then swept over the outputs ``HIDDEN2_BLOCK`` (= 16) at a time
  (``LUT_HIDDEN_LOOP``): ``ceil(in / 84) · (84 + ceil(out / 16))`` cycles. The seven matrices
  are Q, K, V, O and the FFN's gate, up and down.

The published TTFT (0.45 s at 64 and 0.96 s at 128 prompt tokens on BitNet-b1.58-large) is then
a **check** of this model, not a fit: ``coaccel validate deltallm`` prints the error. What the
loops leave out (pipeline fill/drain per loop entry, achieved II above 1, DDR weight streaming,
element-wise units, the host) is the residual.

Public: :class:`TellmeLoops`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TellmeLoops"]

_FIGURES = {
    "freq_mhz": "tellme_v2.clock",
    "query_parallel": "tellme_v2.code.attn_matmul_parallel",
    "qk_elems_per_cycle": "tellme_v2.code.hidden_block_size",
    "tmac_tables": "tellme_v2.code.tmac_table_num",
    "tmac_group": "tellme_v2.code.tmac_group_size",
    "out_block": "tellme_v2.code.hidden2_block",
}


@dataclass(frozen=True)
class TellmeLoops:
    """The constants of TeLLMe-v2's HLS code that set its loop trip counts.

    Attributes:
        freq_mhz: clock, MHz.
        query_parallel: ``ATTN_MATMUL_PARALLEL``, query tokens per attention block.
        qk_elems_per_cycle: ``HIDDEN_BLOCK_SIZE``, FP16 elements per 256-bit word.
        tmac_tables: ``TMAC_TABLE_NUM``, lookup tables used in parallel.
        tmac_group: ``TMAC_GROUP_SIZE``, ternary weights per table index.
        out_block: ``HIDDEN2_BLOCK``, outputs per ``LUT_HIDDEN_LOOP`` iteration.
    """

    freq_mhz: float
    query_parallel: int
    qk_elems_per_cycle: int
    tmac_tables: int
    tmac_group: int
    out_block: int

    @classmethod
    def from_published(cls, figures: Mapping[str, Any]) -> TellmeLoops:
        """Read the constants from the published figures (``load_published("deltallm")``)."""
        vals = {k: figures[key].value for k, key in _FIGURES.items()}
        return cls(
            freq_mhz=float(vals["freq_mhz"]),
            **{k: int(v) for k, v in vals.items() if k != "freq_mhz"},
        )

    @staticmethod
    def sources(figures: Mapping[str, Any]) -> str:
        """The published figures' sources, one per constant, for notes."""
        return "; ".join(f"{k}: {figures[key].source}" for k, key in _FIGURES.items())

    def attention_cycles(self, model: Any, n_tokens: int) -> int:
        """Prefill attention cycles of one layer (module docstring), II = 1.

        Args:
            model: a :class:`~coaccel.spine.workload.ModelShape`.
            n_tokens: prompt tokens, T.

        Returns:
            ``pairs·(ceil(Hq·d/16) + Hq + P·Hq) + nb·P·ceil(Hq·d/16)`` cycles.
        """
        p = self.query_parallel
        words = -(-model.heads * model.head_dim // self.qk_elems_per_cycle)
        nb = -(-n_tokens // p)
        pairs = sum(n_tokens - p * b for b in range(nb))
        per_pair = words + model.heads + p * model.heads
        return pairs * per_pair + nb * p * words

    def linear_cycles_per_token(self, model: Any) -> int:
        """Cycles of one token through one layer's seven matrices (module docstring), II = 1.

        Args:
            model: a :class:`~coaccel.spine.workload.ModelShape`.

        Returns:
            ``Σ_matrices ceil(in / 84) · (84 + ceil(out / 16))`` cycles.
        """
        k = self.tmac_tables * self.tmac_group
        q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
        h, f = model.hidden, model.intermediate
        mats = ((h, q), (h, kv), (h, kv), (q, h), (h, f), (h, f), (f, h))
        return sum(-(-n_in // k) * (k + -(-n_out // self.out_block)) for n_in, n_out in mats)

    def prefill_cycles(self, model: Any, n_tokens: int) -> tuple[int, int]:
        """``(attention, linear)`` cycles of a whole prefill (every layer).

        Args:
            model: the shape.
            n_tokens: T.

        Returns:
            Attention and linear-layer cycles over ``model.layers`` layers.
        """
        att = self.attention_cycles(model, n_tokens) * model.layers
        lin = self.linear_cycles_per_token(model) * n_tokens * model.layers
        return att, lin

    def seconds(self, cycles: float) -> float:
        """Cycles at the clock, in seconds."""
        return float(cycles) / (self.freq_mhz * 1e6)

    def ternary_macs_per_cycle(self, model: Any) -> float:
        """The linear engine's effective weight MACs per cycle on a model (for comparison with a
        fitted rate): weight MACs per token and layer over :meth:`linear_cycles_per_token`."""
        from coaccel.sim.deltallm_fpga import linear_macs_per_token

        return linear_macs_per_token(model) / self.linear_cycles_per_token(model)
