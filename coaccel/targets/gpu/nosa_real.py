"""W3 (NOSA) on real decode activations: selection recall and host misses per decode step.

:func:`nosa_real_stats` replays NOSA's locality-constrained selection and the unconstrained
top-k selection (InfLLMv2-like) over a real decoder's decode steps
(:func:`coaccel.models.gpu.nosa_replay`; every layer of a window is one "sequence" of the
replay) and scores both against the oracle top-k blocks by exact attention probability.

Two stand-ins, both [OURS]:

* the GPU budget scales with the context: NOSI keeps 64 blocks of 64 tokens (4096 tokens) of a
  16K-token input ([NOSA-CODE]), a quarter; a small model's contexts (at most 8K for
  SmolLM2-135M) would fit the whole budget, so :func:`scaled_config` keeps the same quarter
  (``keep_fraction``) with NOSI's proportions (1 init block, a quarter of the slots each for the
  window and the query-aware blocks, the rest by eviction score);
* NOSA ranks the non-query-aware blocks by a trained eviction head's score; SmolLM2 has none, so
  the per-token score is the mean attention the token received from the prefill's earlier
  queries (:class:`~coaccel.targets.gpu.real_inputs.RealPassage` ``received``), frozen at the
  first decode step as NOSA's scores of old tokens never change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.targets.gpu.real_inputs import RealDecodeSample

__all__ = [
    "KEEP_FRACTION",
    "NosaRealStats",
    "nosa_real_rows",
    "nosa_real_stats",
    "scaled_config",
]

KEEP_FRACTION = 0.25
"""Share of the context's blocks the GPU holds ([DERIVED] NOSI's 4096 of 16384 tokens,
[NOSA-CODE])."""


def scaled_config(context: int, keep_fraction: float = KEEP_FRACTION) -> Any:
    """A :class:`~coaccel.models.gpu.nosa.NosaConfig` holding ``keep_fraction`` of a context's
    64-token blocks with NOSI's proportions (module docstring).

    Args:
        context: tokens (at least 8 blocks' worth at ``keep_fraction``).
        keep_fraction: share of the blocks on the GPU, in (0, 1].

    Returns:
        The config (64-token blocks, NOSI's compression).
    """
    from coaccel.models.gpu.nosa import NosaConfig

    slots = round(keep_fraction * -(-context // 64))
    if not 0 < keep_fraction <= 1 or slots < 4:
        raise ValueError(f"scaled_config: {keep_fraction} of {context} tokens is under 4 blocks")
    quarter = max(1, round(slots / 4))
    return NosaConfig(slots=slots, init_blocks=1, window_blocks=quarter, topk_q_blocks=quarter)


@dataclass(frozen=True)
class NosaRealStats:
    """NOSA's selection on a real decoder (:func:`nosa_real_stats`).

    Attributes:
        contexts: the contexts replayed.
        configs: the config of each context (:func:`scaled_config`).
        replays: ``[context][window]`` :class:`~coaccel.models.gpu.nosa.NosaReplay`.
        eviction_score: what ranked the non-query-aware blocks.
    """

    contexts: tuple[int, ...]
    configs: tuple[Any, ...]
    replays: tuple[tuple[Any, ...], ...]
    eviction_score: str

    def per_step(self, ci: int, name: str, *, cold: bool = False) -> npt.NDArray[np.float64]:
        """A field's mean over layers and KV heads for each (window, step) of context ``ci``;
        the cold-start step is left out unless ``cold`` (it fetches every selected block)."""
        rows = []
        for r in self.replays[ci]:
            x = np.asarray(getattr(r, name), dtype=np.float64).mean(axis=(1, 2))
            rows.append(x if cold else x[1:])
        return np.concatenate(rows)


def nosa_real_stats(
    sample: RealDecodeSample,
    contexts: Sequence[int] | None = None,
    *,
    keep_fraction: float = KEEP_FRACTION,
    progress: Callable[[str], None] | None = None,
) -> NosaRealStats:
    """Replay NOSA and top-k over every window's decode steps at each context.

    Args:
        sample: prefilled windows whose ``received`` scores cover ``contexts``.
        contexts: contexts to replay (None: those with received scores).
        keep_fraction: share of the blocks on the GPU (:func:`scaled_config`).
        progress: called with one line per context.

    Returns:
        :class:`NosaRealStats`.
    """
    from coaccel.models.gpu import f32_to_bf16_bits, nosa_replay

    say = progress or (lambda _m: None)
    ctx = tuple(contexts) if contexts is not None else tuple(sample.passages[0].received)
    layers = sample.global_layers()
    configs, replays = [], []
    for c in ctx:
        ci = sample.contexts.index(c)
        cfg = scaled_config(c, keep_fraction)
        say(f"NOSA replay at {c} tokens: {cfg.slots} of {-(-c // 64)} blocks on the GPU")
        per = []
        for p, ps in enumerate(sample.passages):
            q = f32_to_bf16_bits(ps.queries[ci][:, layers])  # [steps, L, Hq, D]
            k = f32_to_bf16_bits(
                np.stack([sample.keys(p, i).transpose(1, 0, 2) for i in layers])
            )  # [L, T, Hkv, D]
            cis = np.zeros((len(layers), k.shape[2], k.shape[1]))
            cis[:, :, :c] = ps.received[c][layers]
            per.append(nosa_replay(q, k, cis, c, cfg))
        configs.append(cfg)
        replays.append(tuple(per))
    return NosaRealStats(
        ctx, tuple(configs), tuple(replays),
        "mean attention received from the prefill's earlier queries (H2O-style stand-in)",
    )  # fmt: skip


_SRC = (
    "no published figure (NOSA reports task accuracy and throughput); [SMOLLM2] decode steps "
    "on [PYDOC] text, [NOSA-CODE] selection"
)


def _row(name: str, values: npt.ArrayLike, unit: str, note: str) -> Any:
    """An information row of real measurements: mean, sample sd, N in the note."""
    from coaccel.targets.gpu.real_inputs import spread
    from coaccel.validate.targets import Target

    m, sd, n = spread(values)
    return Target(group="w3_real", name=name, ours=m, paper=float("nan"), unit=unit,
                  tolerance_pct=None, source=_SRC, note=f"{note}; mean ± sd over N={n}",
                  ours_sigma=sd, fit="predicted", data="real")  # fmt: skip


def nosa_real_rows(stats: NosaRealStats, model: str) -> tuple[list[Any], list[str]]:
    """The ``w3_real`` rows: per context, each selector's recall of the oracle blocks and the
    attention mass it holds, per (window, step), and the host fetches per decode step and
    (layer, KV head), cold start excluded.

    Args:
        stats: :func:`nosa_real_stats`'s replays. model: the decoder's name.

    Returns:
        (rows, notes).
    """
    rows, notes = [], []
    per = "per (window, step), mean over layers x KV heads"
    for ci, c in enumerate(stats.contexts):
        cfg = stats.configs[ci]
        tag = f"{model}, T={c}, {cfg.slots} of {-(-c // 64)} blocks"
        for sel, suffix in (("NOSA", ""), ("top-k (InfLLMv2-like)", "_topk")):
            rows.append(
                _row(
                    f"{sel} recall of the oracle top-{cfg.slots} blocks, {tag}",
                    stats.per_step(ci, "recall" + suffix, cold=True),
                    "1",
                    f"share of the blocks with the most exact attention selected; {per}",
                )
            )
            rows.append(
                _row(
                    f"{sel} attention mass held, {tag}",
                    stats.per_step(ci, "mass" + suffix, cold=True),
                    "1",
                    f"exact attention probability on the selected blocks; {per}",
                )
            )
        rows.append(
            _row(
                f"oracle attention mass held, {tag}",
                stats.per_step(ci, "mass_oracle", cold=True),
                "1",
                f"the most any {cfg.slots} blocks hold; {per}",
            )
        )
        for sel, suffix in (("NOSA", ""), ("top-k (InfLLMv2-like)", "_topk")):
            rows.append(
                _row(
                    f"{sel} host fetches per decode step and (layer, KV head), {tag}",
                    stats.per_step(ci, "misses" + suffix),
                    "block",
                    f"64-token blocks fetched from the host per step, cold start excluded; {per}",
                )
            )
        mn = stats.per_step(ci, "misses").mean()
        mk = stats.per_step(ci, "misses_topk").mean()
        notes.append(
            f"W3 on {model} at T={c}: NOSA fetches {mn:.3f} blocks per step and (layer, KV "
            f"head), unconstrained top-k {mk:.3f} ({mk / mn if mn else float('inf'):.1f}x the "
            f"host traffic); budget {cfg.slots} blocks ({cfg.init_blocks} init, "
            f"{cfg.window_blocks} window, {cfg.topk_q_blocks} query-aware), eviction score: "
            f"{stats.eviction_score}"
        )  # fmt: skip
    return rows, notes
