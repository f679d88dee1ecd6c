"""What a DeltaLLM design point changes in a real decoder: its accuracy variant for sweeps.

A sweep with ``accuracy: {measure: perplexity}`` on a ``deltallm_fpga`` architecture scores each
point's attention numerics on a real decoder (:class:`coaccel.dse.accuracy.PerplexityScorer`).
:func:`accuracy_variant` is the target's hook (:attr:`coaccel.spine.target.SimTarget
.accuracy_variant`): the decoder's every attention layer runs the DeltaLLM datapath
(:class:`~.forward.DeltaAttention`, the bit-exact INT8 mode by default) in one prefill per text
window, with the :class:`~.forward.DeltaSetting` the simulator runs the point with
(:func:`coaccel.sim.deltallm_fpga.simulate_layer_events`):

* ``theta`` = ``algorithm.theta``, ``window`` = ``algorithm.window_tokens``, ``tau`` =
  ``algorithm.tau_log2`` (``null``: never skip, τ = ∞), ``n_sink`` = ``algorithm.n_sink``;
* ``lane_layout`` = ``group`` and ``query_block`` ``P_q`` = ``datapath.lanes`` / ``G``, with
  ``G`` the GQA group of the *timing* workload (Llama-3.2-1B: 4), the query tokens one VSSOS
  vector holds: VSSOS shares one running maximum and one skip decision per column across a
  vector's lanes, so ``P_q`` changes the numerics. The decoder fills the vector's group
  dimension with its own ``G`` (SmolLM2-135M: 3).

Nothing else of the architecture (MACs per lane, pipeline, buffers, clock, DRAM, resources)
enters the setting, so sweeping it reuses the scores. ``algorithm.delta_mode``,
``refresh_period_tokens``, ``denom_mode`` and ``order`` other than their defaults are not
modelled by :class:`~.forward.DeltaAttention` and are refused, as is the TeLLMe-v2 baseline
engine.

Public: :func:`accuracy_variant`, :func:`delta_setting`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from coaccel.spine.target import AccuracyVariant

__all__ = ["accuracy_variant", "delta_setting"]

_DEFAULTS = {
    "delta_mode": "memory",
    "refresh_period_tokens": 0,
    "denom_mode": "full",
    "order": "ascending",
}
"""Algorithm keys :class:`~.forward.DeltaAttention` runs only at these values."""


@functools.lru_cache(maxsize=64)
def _gqa_group(workload: str) -> int:
    from coaccel.sim.deltallm_fpga import load_workload

    m = load_workload(workload).model
    return int(m.heads) // int(m.kv_heads)


def delta_setting(arch: Any, workload: str) -> Any:
    """The datapath setting of a design point (module docstring).

    Args:
        arch: a :class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`.
        workload: the point's workload string (its GQA group sets ``P_q``).

    Returns:
        The :class:`~.forward.DeltaSetting`.

    Raises:
        ValueError: the TeLLMe-v2 engine, an algorithm key the forward pass does not model, or
            lanes that are not a multiple of the workload's GQA group.
    """
    from .forward import DeltaSetting

    if arch.engine != "delta_vector":
        raise ValueError(
            f"accuracy: engine {arch.engine!r} (the TeLLMe-v2 baseline) has no DeltaLLM "
            "attention to score; the perplexity objective models engine delta_vector"
        )
    a = arch.algorithm
    for key, default in _DEFAULTS.items():
        if getattr(a, key) != default:
            raise ValueError(
                f"accuracy: algorithm.{key} {getattr(a, key)!r} is not modelled by the "
                f"forward-pass attention (coaccel.targets.deltallm_fpga.forward); it runs "
                f"{default!r} only"
            )
    g = _gqa_group(workload)
    lanes = int(arch.datapath.lanes)
    if lanes % g:
        raise ValueError(
            f"accuracy: datapath.lanes {lanes} is not a multiple of the GQA group G = {g} of "
            f"{workload} (L = G x P_q)"
        )
    return DeltaSetting(
        theta=int(a.theta),
        window=int(a.window_tokens),
        tau=math.inf if a.tau_log2 is None else float(a.tau_log2),
        lane_layout="group",
        query_block=lanes // g,
        n_sink=int(a.n_sink),
    )


def accuracy_variant(arch: Any, workload: str, *, numerics: str = "fixed") -> AccuracyVariant:
    """The target's accuracy hook: DeltaLLM attention in every layer of a prefill.

    Args:
        arch: a :class:`~coaccel.sim.deltallm_fpga.DeltaFpgaConfig`.
        workload: the point's workload string.
        numerics: ``fixed`` (the bit-exact INT8 datapath, the hardware's) or ``float`` (the
            reference's float64 algorithmic mode, θ then in key units; with θ = 0, W ≥ T and
            τ = ∞ it is exact attention).

    Returns:
        The :class:`~coaccel.spine.target.AccuracyVariant` (``mode="prefill"``).

    Raises:
        ValueError: see :func:`delta_setting`; an unknown ``numerics``.
    """
    from .forward import MODES, DeltaAttention

    if numerics not in MODES:
        raise ValueError(f"numerics: unknown value {numerics!r}; valid: {', '.join(MODES)}")
    st = delta_setting(arch, workload)
    setting = {
        "attention": "deltallm",
        "numerics": numerics,
        "theta": st.theta,
        "window": st.window,
        "tau": None if math.isinf(st.tau) else st.tau,
        "lane_layout": st.lane_layout,
        "query_block": st.query_block,
        "n_sink": st.n_sink,
    }

    def transform(model: Any) -> Any:
        # DeltaAttention starts a new sequence at every prefill from position 0.
        return model.with_attention(DeltaAttention.for_model(model, st, numerics))

    return AccuracyVariant(setting, transform, mode="prefill", label=f"DeltaLLM {st.label}")
