"""GPU decode workloads and microbenchmarks (installed as ``coaccel.models.gpu``).

* the split-K skeleton shared by the decode-attention workloads: :class:`DecodeShape`,
  :func:`choose_num_splits`, :func:`plan_split_k` / :class:`SplitPlan`, :func:`make_inputs`,
  :func:`split_k_partials`, :func:`reduce_partials`, :func:`dense_attention_f64`;
* its trace: :func:`split_k_trace`, :func:`tile_activity`;
* what public kernel libraries launch for it (FlashAttention-2 and FlashAttention-3's split
  rules, tiles and combine kernels): :func:`plan_library_launch` / :class:`LibraryLaunch`,
  :func:`fa2_num_splits`, :func:`fa3_num_splits`, :func:`fa3_dynamic_num_splits`,
  :func:`fa3_sm8x_tile`, :func:`fa3_sm90_tile` (:mod:`._libraries`);
* FlashDecoding (W1): :func:`flash_decode` (values + trace), :func:`flash_decode_trace`
  (trace only);
* FFD (W2), 2-bit key scan plus top-delta sparse decode: :func:`ffd_decode` (values, keep
  decisions, error against dense, trace), :func:`ffd_trace` (trace only),
  :func:`quantize_keys` / :class:`FfdCache`, :func:`make_peaked_inputs`;
* NOSA / NOSI bounded KV offload (W3): :func:`nosa_decode` (a seeded decode run: selection,
  slot map, misses, host fetches, write-back, attention and its error against dense, trace),
  :class:`NosaConfig`, :class:`NosaModel`, :class:`NosaResult` (:mod:`.nosa`);
* Specter MoE expert offload (W4): :func:`specter_decode`, :func:`specter_baseline`,
  :func:`routing_trace`, :class:`MoEShape`, :class:`SpecterModel`, :class:`SpecterResult`
  (:mod:`.specter`);
* bf16 storage: :func:`f32_to_bf16_bits`, :func:`bf16_bits_to_f32`, :func:`round_bf16`;
* :mod:`coaccel.models.gpu.microbench`: the microbenchmark traces (streaming reads, pointer
  chases, host copies, zero-copy reads, decode-attention traffic) the simulator is validated
  with (imported on its own).

See ``docs/gpu_decode.md``.
"""

from . import (
    _bf16,
    _ffd_real,
    _libraries,
    _nosa_real,
    _splitk,
    _trace,
    ffd,
    flashdecode,
    nosa,
    specter,
)
from ._bf16 import *  # noqa: F403  (curated by each module's __all__)
from ._ffd_real import *  # noqa: F403
from ._libraries import *  # noqa: F403
from ._nosa_real import *  # noqa: F403
from ._splitk import *  # noqa: F403
from ._trace import *  # noqa: F403
from .ffd import *  # noqa: F403
from .flashdecode import *  # noqa: F403
from .nosa import *  # noqa: F403
from .specter import *  # noqa: F403

__all__ = [
    *_bf16.__all__,
    *_splitk.__all__,
    *_trace.__all__,
    *_libraries.__all__,
    *flashdecode.__all__,
    *ffd.__all__,
    *_ffd_real.__all__,
    *_nosa_real.__all__,
    *nosa.__all__,
    *specter.__all__,
]
