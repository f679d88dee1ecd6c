"""FlashDecoding split-K decode attention (W1): values and trace of one decode step of a layer.

:func:`flash_decode` runs the bit-exact numpy reference of the split kernel and the reduction
(``coaccel.models.gpu`` split-K skeleton, see its module docstring for the order of
operations) on seeded bf16 inputs and returns the partials, the bf16 output and the trace.
:func:`flash_decode_trace` builds the same trace without the numerics, for contexts where the
numerics would be slow (the trace of a 128K-token layer takes well under a second).

Both take the decode geometry (batch, context, heads), the split count or the SM count from
which the split rule chooses it, and BLOCK_N; see docs/gpu_decode.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace

from ._splitk import (
    DecodeInputs,
    DecodeShape,
    PDtype,
    SoftmaxBase,
    SplitPartials,
    SplitPlan,
    make_inputs,
    plan_split_k,
    reduce_partials,
    split_k_partials,
)
from ._trace import split_k_trace

__all__ = ["FlashDecodeResult", "flash_decode", "flash_decode_trace"]


@dataclass(frozen=True)
class FlashDecodeResult:
    """Values and trace of one split-K decode step.

    Attributes:
        plan: the launch plan.
        inputs: the bf16 q, K, V.
        partials: the split kernel's partial outputs, maxima and sums (float32).
        out: ``[B, Hq, D]`` uint16 bf16 attention output.
        trace: the trace of the two kernels.
    """

    plan: SplitPlan
    inputs: DecodeInputs
    partials: SplitPartials
    out: npt.NDArray[np.uint16]
    trace: Trace


def flash_decode(
    shape: DecodeShape,
    *,
    seed: int = 0,
    block_n: int = 128,
    num_splits: int | None = None,
    n_sms: int | None = None,
    waves: float = 1.0,
    n_stages: int = 1,
    softmax_base: SoftmaxBase = "e",
    p_dtype: PDtype = "bf16",
    key_scale: float = 1.0,
    inputs: DecodeInputs | None = None,
    tile_keep: npt.NDArray[np.bool_] | None = None,
) -> FlashDecodeResult:
    """One FlashDecoding step: split kernel, reduction and trace.

    Args:
        shape: batch, context and head geometry.
        seed: seed of the synthetic inputs (ignored when ``inputs`` is given).
        block_n: tokens per K/V tile (64, 128 or 256).
        num_splits: splits per (sequence, KV head); None chooses them from ``n_sms``.
        n_sms: SMs of the target GPU for the split rule.
        waves: target waves of the split rule.
        n_stages: K/V tiles in flight per CTA (sets the shared memory per CTA).
        softmax_base: ``"e"`` or ``"2"`` (exp2 of log2-scaled scores).
        p_dtype: ``"bf16"`` or ``"fp32"`` probabilities in the P·V product.
        key_scale: standard deviation of the synthetic keys.
        inputs: bf16 inputs to use instead of synthetic ones.
        tile_keep: optional ``[B, Hkv, ceil(T / block_n)]`` bool mask of attended tiles.

    Returns:
        :class:`FlashDecodeResult`.
    """
    plan = plan_split_k(
        shape, block_n=block_n, num_splits=num_splits, n_sms=n_sms, waves=waves, n_stages=n_stages
    )
    if inputs is None:
        inputs = make_inputs(shape, seed, key_scale=key_scale)
        used_seed: int | None = seed
    else:
        used_seed = None
    partials = split_k_partials(
        inputs, plan, softmax_base=softmax_base, p_dtype=p_dtype, tile_keep=tile_keep
    )
    out = reduce_partials(partials)
    trace = split_k_trace(
        plan,
        tile_keep=tile_keep,
        seed=used_seed,
        workload={"softmax_base": softmax_base, "p_dtype": p_dtype},
    )
    return FlashDecodeResult(plan=plan, inputs=inputs, partials=partials, out=out, trace=trace)


def flash_decode_trace(
    shape: DecodeShape,
    *,
    block_n: int = 128,
    num_splits: int | None = None,
    n_sms: int | None = None,
    waves: float = 1.0,
    n_stages: int = 1,
    tile_keep: npt.NDArray[np.bool_] | None = None,
    workload: Mapping[str, Any] | None = None,
) -> Trace:
    """The trace of one FlashDecoding step without the numerics (same arguments as
    :func:`flash_decode`; the trace equals the one :func:`flash_decode` returns apart from the
    seed and the numerics settings in its metadata).

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    plan = plan_split_k(
        shape, block_n=block_n, num_splits=num_splits, n_sms=n_sms, waves=waves, n_stages=n_stages
    )
    return split_k_trace(plan, tile_keep=tile_keep, workload=workload)
