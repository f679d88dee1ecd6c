"""What a GPU workload changes in a real decoder: its accuracy variant for sweeps.

A sweep with ``accuracy: {measure: perplexity}`` on a ``gpu`` architecture scores each point's
decode attention on a real decoder (:class:`coaccel.dse.accuracy.PerplexityScorer`).
:func:`accuracy_variant` is the target's hook (:attr:`coaccel.spine.target.SimTarget
.accuracy_variant`). On the GPU the approximation is in the *workload*, not the architecture:
the memory system, SM count, L2 or host link change the time, never the numbers, so the
architecture does not enter the setting at all.

* ``ffd:...`` (W2, [FFD] / [FFD-REPO]): FFD's 2-bit key scan and block selection in every
  global-attention layer's decode step (:class:`coaccel.models.gpu.FfdAttention`: softmax in
  float64 over the kept 128-token blocks and the bf16 tail, on the model's own keys and
  values), scored as teacher-forced decode steps (``mode="decode"``), as
  :mod:`coaccel.targets.gpu.ffd_real` measures it. The setting is the keep rule: ``keep=<r>``
  (the ``ceil(r * NTB)`` blocks of largest margin; the threshold offset then only shifts every
  margin of a head group alike, so ``delta`` is left out) or ``delta=<d>`` (top-delta, log2
  units), with ``block_n``. The workload's ``context``, ``batch``, heads, splits, SMs and seed
  size the simulated kernel only: the decoder is scored at the evaluation context of the
  ``accuracy:`` block (its windows), which a CPU can afford, not at the workload's context.
* ``flashdecode:...``, ``splitk:...`` (W1): exact attention; the decoder unchanged.
* every other workload (NOSA, Specter, the microbenchmarks, trace files) is refused: their
  effect on a decoder's numerics is not modelled here.

Public: :func:`accuracy_variant`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coaccel.spine.target import AccuracyVariant

__all__ = ["accuracy_variant"]

_EXACT = ("flashdecode", "splitk")
"""Workloads whose attention is exact (FlashDecoding, split-K)."""


@dataclass
class _PerSequence:
    """An :class:`~coaccel.models.gpu.FfdAttention` per layer, started afresh at each call
    from position 0 (a new text window): FFD's quantized key cache belongs to one sequence."""

    options: dict[str, Any]
    _layers: dict[int, Any] = field(default_factory=dict, repr=False)

    def __call__(
        self, layer: int, q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, window: int | None
    ) -> Any:
        from coaccel.models.gpu import FfdAttention

        if int(q_pos[0]) == 0 or layer not in self._layers:
            self._layers[layer] = FfdAttention(**self.options)
        return self._layers[layer](layer, q, k, v, q_pos, k_pos, window)


def _values(workload: str) -> tuple[str, dict[str, Any]]:
    from coaccel.sim.gpu_mem.workload import WORKLOAD_STRINGS
    from coaccel.spine.config import ConfigError
    from coaccel.spine.workload_string import parse_workload_string

    try:
        decl, given = parse_workload_string(str(workload), WORKLOAD_STRINGS)
    except ConfigError:
        raise ValueError(
            f"accuracy: workload {workload!r} is not a GPU workload string; the perplexity "
            f"objective models ffd (approximate) and {', '.join(_EXACT)} (exact) only"
        ) from None
    return decl.name, {**decl.defaults(), **given}


def accuracy_variant(arch: Any, workload: str) -> AccuracyVariant:
    """The target's accuracy hook (module docstring).

    Args:
        arch: the GPU architecture (unused: it changes no numerics).
        workload: the point's workload string.

    Returns:
        The :class:`~coaccel.spine.target.AccuracyVariant`: FFD's selection in decode steps
        (``mode="decode"``), or the decoder unchanged for W1.

    Raises:
        ValueError: a workload whose numerics are not modelled.
    """
    del arch  # the memory system and SMs change the time only
    name, v = _values(workload)
    if name in _EXACT:
        return AccuracyVariant({"attention": "exact"}, None, mode="decode", label="exact")
    if name != "ffd":
        raise ValueError(
            f"accuracy: workload {name!r} ({workload}) changes a decoder's attention in a way "
            f"the perplexity objective does not model; it models ffd (approximate) and "
            f"{', '.join(_EXACT)} (exact)"
        )
    bs = int(v["block_n"])
    rule: dict[str, Any]
    if v["keep"] is not None:
        rule = {"keep": float(v["keep"])}
        label = f"FFD keep={v['keep']:g}"
    else:
        rule = {"delta": float(v["delta"])}
        label = f"FFD delta={v['delta']:g}"
    setting = {
        "attention": "ffd",
        "block_tokens": bs,
        "delta_base": "2",
        "sink_tokens": 16,
        "recent_tokens": 16,
        **rule,
    }
    options = {
        "block_tokens": bs,
        "delta": float(v["delta"]),
        "keep_ratio": rule.get("keep"),
    }

    def transform(model: Any) -> Any:
        scale = float(model.config.attention_scale)
        return model.with_attention(_PerSequence({**options, "scale": scale}))

    return AccuracyVariant(setting, transform, mode="decode", label=label, min_prompt_tokens=bs)
