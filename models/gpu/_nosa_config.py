"""NOSA's selection and cache parameters (:class:`NosaConfig`), shared by the decode model
(:mod:`.nosa`), its trace (:mod:`._nosa_trace`) and the replay on recorded queries
(:mod:`._nosa_real`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._checks import check_integer_fields

__all__ = ["Fetch", "NosaConfig", "Selector"]

Selector = Literal["nosa", "topk"]
Fetch = Literal["zero_copy", "dma"]


@dataclass(frozen=True)
class NosaConfig:
    """NOSA selection and cache parameters (defaults: NOSI's, [NOSA-CODE]).

    Attributes:
        block_tokens: tokens per KV block (64).
        slots: GPU slot budget per (sequence, KV head), blocks (64; NOSI asserts 64).
        topk_q_blocks: query-aware blocks chosen by block score (16).
        init_blocks: first blocks always kept (1).
        window_blocks: most recent blocks always kept (16).
        compress_window: tokens averaged into one compressed key (32).
        compress_stride: tokens between compressed keys (16).
        cis_gain: ``A`` of the eviction score ``A * softplus(.)`` ([OURS] 1).
        selector: ``"nosa"`` (locality-constrained) or ``"topk"`` (unconstrained top-k).
        fetch: ``"zero_copy"`` (SM loads of host rows, NOSI's path) or ``"dma"`` (copy engine).
    """

    block_tokens: int = 64
    slots: int = 64
    topk_q_blocks: int = 16
    init_blocks: int = 1
    window_blocks: int = 16
    compress_window: int = 32
    compress_stride: int = 16
    cis_gain: float = 1.0
    selector: Selector = "nosa"
    fetch: Fetch = "zero_copy"

    def __post_init__(self) -> None:
        check_integer_fields(self, ("block_tokens", "slots", "compress_window", "compress_stride"))
        check_integer_fields(self, ("topk_q_blocks", "init_blocks", "window_blocks"), minimum=0)
        if self.init_blocks + self.window_blocks + self.topk_q_blocks > self.slots:
            raise ValueError(
                f"NosaConfig: init_blocks + window_blocks + topk_q_blocks = "
                f"{self.init_blocks + self.window_blocks + self.topk_q_blocks} exceeds "
                f"slots={self.slots}"
            )
        if self.block_tokens not in (64, 128, 256):
            raise ValueError(f"NosaConfig.block_tokens={self.block_tokens}; valid: 64, 128, 256")
        if self.block_tokens % self.compress_stride or self.compress_window % self.compress_stride:
            raise ValueError(
                "NosaConfig: block_tokens and compress_window must be multiples of compress_stride"
            )
        if self.selector not in ("nosa", "topk"):
            raise ValueError(f"NosaConfig.selector={self.selector!r}; valid: nosa, topk")
        if self.fetch not in ("zero_copy", "dma"):
            raise ValueError(f"NosaConfig.fetch={self.fetch!r}; valid: zero_copy, dma")
        if not self.cis_gain > 0:
            raise ValueError(f"NosaConfig.cis_gain={self.cis_gain} must be positive")
