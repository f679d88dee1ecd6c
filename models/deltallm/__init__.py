"""DeltaLLM bit-exact reference ([DELTALLM]): Delta-Key sparse attention with VSSOS.

* :func:`encode_delta_keys` / :class:`DeltaKeys` — K-only delta encoding along the sequence
  axis (memory or naive form, threshold ``theta``, optional refresh and sinks);
* :func:`hybrid_scores` — exact scores in the local window and on the sinks, delta scores
  ``q·k̂`` elsewhere, evaluated directly or as the incremental delta chain;
* :func:`attention` — prefill attention with the VSSOS online softmax, in the bit-exact
  fixed-point mode or the float64 algorithmic mode, with sparsity statistics;
* :func:`attention_fixed_fast` — the fixed-point prefill in numba, equal to :func:`attention`;
  :func:`decode_row_fixed_fast` — one decode row in numba, equal to :func:`decode_step`;
* :func:`sparsity_counts` — ρ_K, ρ_fine and ρ_S counts of a layer for several τ and lane
  layouts from one pass over the scores (equal to :func:`column_events`' counts);
* ``lane_layout`` (:data:`LANE_LAYOUTS`): which lanes share a VSSOS column-skip decision, the
  ``G`` query heads of a KV group × ``P_q`` tokens (``"group"``, default) or ``P_q`` tokens of one
  query head (``"head"``);
* :func:`init_decode` / :func:`append_prompt` / :func:`decode_step` — the same per-row
  computation one token at a time;
* :func:`delta_events` / :class:`DeltaEvents` / :func:`delta_trace` — the per-column event
  trace (exact/delta/mixed kind, skip bit, delta nonzeros, valid lanes) the FPGA simulator
  consumes, compact or as trace-contract records;
* the fixed-point units: :data:`EXP2_LUT_Q15`, :func:`exp2_neg_q15`, :func:`log2_scale`,
  :func:`quantize_int8`.

See ``docs/deltallm.md`` for the formats and the order of operations.
"""

from . import _attention, _decode, _delta, _fast, _fixed, _scores, _sparsity, _trace, _vssos
from ._attention import *  # noqa: F403  (curated by each module's __all__)
from ._decode import *  # noqa: F403
from ._delta import *  # noqa: F403
from ._fast import *  # noqa: F403
from ._fixed import *  # noqa: F403
from ._scores import *  # noqa: F403
from ._sparsity import *  # noqa: F403
from ._trace import *  # noqa: F403
from ._vssos import *  # noqa: F403

__all__ = [
    *_attention.__all__,
    *_decode.__all__,
    *_delta.__all__,
    *_fast.__all__,
    *_fixed.__all__,
    *_scores.__all__,
    *_sparsity.__all__,
    *_trace.__all__,
    *_vssos.__all__,
]
