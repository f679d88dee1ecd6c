"""The DeltaLLM FPGA simulator's side of a workload: the model layouts it does not model.

The simulator (:mod:`._simulate`) runs each layer's prefill attention per KV head on synthetic
keys and charges the linear layers ``linear_macs_per_token`` (Q, K, V and O projections and a
gated MLP: dense, or a mixture-of-experts layer's router, routed and shared experts).
:func:`deltallm_workload_problems` lists what that does not model, so that such a workload is
refused rather than simulated as something else:

* multi-head latent attention (keys come from a cached latent shared by all heads, not from
  per-head K vectors the Delta-Key encoding compresses);
* an MLP without a gate (two matrices, not three);
* a sliding attention window shorter than the prompt (the reference attends to every earlier
  token).

Public: :func:`deltallm_workload_problems`, :func:`check_deltallm_workload`.
"""

from __future__ import annotations

from coaccel.spine.config import ConfigError, Problem
from coaccel.spine.workload import Workload

__all__ = ["check_deltallm_workload", "deltallm_workload_problems"]

_WHO = "the DeltaLLM FPGA simulator"


def deltallm_workload_problems(workload: Workload) -> list[Problem]:
    """The model-layout problems of ``workload`` for the DeltaLLM FPGA simulator (module
    docstring).

    Args:
        workload: the workload.

    Returns:
        One :class:`~coaccel.config.Problem` per layout it does not model (empty: none).
    """
    m, sc = workload.model, workload.scenario
    where = workload.source or workload.name
    name = repr(workload.name)
    out = []
    if m.is_mla:
        msg = (
            f"{name} uses multi-head latent attention (keys from a latent of kv_lora_rank "
            f"{m.kv_lora_rank} shared by all heads); {_WHO} models per-head keys (GQA) only"
        )
        out.append(Problem(where, "model.attention", m.attention, msg, "gqa"))
    if m.mlp != "gated":
        msg = f"{name} has a {m.mlp} MLP (up and down, no gate); {_WHO} models gated MLPs only"
        out.append(Problem(where, "model.mlp", m.mlp, msg, "gated"))
    window = m.sliding_window_tokens
    if window and sc.tokens > window:
        msg = (
            f"{len(m.sliding_window_layers)} layers of {name} attend within a {window}-token "
            f"window and the prompt has {sc.tokens} tokens; {_WHO} models full causal "
            f"attention only: use a prompt of at most {window} tokens"
        )
        key = f"scenarios.{workload.scenario_name}.tokens"
        out.append(Problem(where, key, sc.tokens, msg, f"at most {window} tokens"))
    return out


def check_deltallm_workload(workload: Workload) -> None:
    """Refuse a workload whose model layout the DeltaLLM FPGA simulator does not model.

    Args:
        workload: the workload.

    Raises:
        ConfigError: every problem of :func:`deltallm_workload_problems`.
    """
    problems = deltallm_workload_problems(workload)
    if problems:
        raise ConfigError(problems)
