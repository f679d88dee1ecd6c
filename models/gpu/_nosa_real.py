"""NOSA's selection dynamics replayed on a real model's decode activations (exported by
:mod:`.nosa`).

:func:`nosa_replay` runs the selection, slot-map diff and miss count of :func:`.nosa.nosa_decode`
(module docstring there, steps 1-4, same functions) over recorded queries and keys instead of
the synthetic attention model, for both selectors at once (``nosa``, locality-constrained, and
``topk``, unconstrained top-k by block score, InfLLMv2-like), and scores each step's selection
against the **oracle**: the ``n_sel`` blocks that hold the most exact attention probability of
the step's query (softmax of ``q . k / sqrt(D)`` over every key, the mass of a block averaged
over the group's query heads), with ``n_sel`` the size of NOSA's selection. Per step and
(sequence, KV head) it returns

* ``recall``: the share of the oracle's blocks the selector selected (1 when every block fits
  the slots);
* ``mass``: the attention probability the selected blocks hold (the oracle's is the most any
  selection of that size can hold);
* ``misses``: host fetches (new selected blocks other than the tail created on the GPU).

The query-agnostic part of NOSA's ranking, the per-token eviction score ``cis``, comes from the
caller (NOSA trains an eviction head; a real model without one needs a stand-in, e.g. the mean
attention each token received from earlier queries, frozen as in NOSA where old tokens' scores
never change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ._bf16 import bf16_bits_to_f32

if TYPE_CHECKING:
    from ._nosa_config import NosaConfig

__all__ = ["NosaReplay", "nosa_replay", "oracle_block_mass"]


@dataclass(frozen=True)
class NosaReplay:
    """Selection quality and host traffic of both selectors over a decode run
    (:func:`nosa_replay`); arrays ``[steps, B, Hkv]``, step 0 the cold start.

    Attributes:
        contexts: ``[steps]`` keys attended at each step (the query is the last token's).
        recall, recall_topk: share of the oracle's blocks NOSA / top-k selected.
        mass, mass_topk, mass_oracle: attention probability the selected blocks hold.
        misses, misses_topk: host fetches per step.
        selected: ``[steps]`` blocks each selector selects (the same for both).
    """

    contexts: npt.NDArray[np.int64]
    recall: npt.NDArray[np.float64]
    recall_topk: npt.NDArray[np.float64]
    mass: npt.NDArray[np.float64]
    mass_topk: npt.NDArray[np.float64]
    mass_oracle: npt.NDArray[np.float64]
    misses: npt.NDArray[np.int64]
    misses_topk: npt.NDArray[np.int64]
    selected: npt.NDArray[np.int64]

    def per_step(self, name: str) -> npt.NDArray[np.float64]:
        """``[steps - 1]`` mean of a field over (sequence, KV head), cold start excluded."""
        x = np.asarray(getattr(self, name), dtype=np.float64)
        return x[1:].mean(axis=(1, 2)) if x.shape[0] > 1 else x.mean(axis=(1, 2))


def oracle_block_mass(
    q_bits: npt.NDArray[np.uint16], k_bits: npt.NDArray[np.uint16], block_tokens: int
) -> npt.NDArray[np.float64]:
    """Exact attention probability per block, averaged over each group's query heads.

    Args:
        q_bits: ``[B, Hq, D]`` bf16 queries. k_bits: ``[B, t, Hkv, D]`` bf16 keys.
        block_tokens: tokens per block.

    Returns:
        ``[B, Hkv, ceil(t / block_tokens)]`` float64, each row summing to 1.
    """
    b, hq, d = q_bits.shape
    _, t, hkv, _ = k_bits.shape
    q = bf16_bits_to_f32(q_bits).astype(np.float64).reshape(b, hkv, hq // hkv, d)
    k = bf16_bits_to_f32(k_bits).astype(np.float64)
    s = np.einsum("bhgd,bthd->bhgt", q, k) / math.sqrt(d)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    nb = -(-t // block_tokens)
    p = np.concatenate([p, np.zeros((*p.shape[:-1], nb * block_tokens - t))], axis=-1)
    return p.reshape(b, hkv, hq // hkv, nb, block_tokens).sum(axis=-1).mean(axis=2)


def _scores(
    sel: npt.NDArray[np.bool_], mass: npt.NDArray[np.float64], oracle: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(recall against the oracle mask, mass held) of a selection mask."""
    n_or = oracle.sum(axis=-1)
    rec = (sel & oracle).sum(axis=-1) / np.maximum(n_or, 1)
    return rec, (mass * sel).sum(axis=-1)


def nosa_replay(
    q_bits: npt.NDArray[np.uint16],
    k_bits: npt.NDArray[np.uint16],
    cis: npt.NDArray[np.float64],
    first_context: int,
    config: NosaConfig | None = None,
) -> NosaReplay:
    """Replay NOSA's and top-k's selection over recorded decode steps (module docstring).

    Args:
        q_bits: ``[steps, B, Hq, D]`` bf16 queries; step ``s`` is the query of the token at
            position ``first_context - 1 + s``, attending keys ``0 .. first_context - 1 + s``.
        k_bits: ``[B, T, Hkv, D]`` bf16 keys, ``T >= first_context + steps - 1``.
        cis: ``[B, Hkv, T]`` per-token eviction scores (query-agnostic).
        first_context: keys attended at step 0 (>= 1).
        config: a :class:`~.nosa.NosaConfig` (its ``selector`` is ignored: both run).

    Returns:
        :class:`NosaReplay`.
    """
    from .nosa import (
        NosaConfig,
        _block_max,
        _block_scores,
        _compressed_keys,
        _select,
        _top,
        _update_slots,
    )

    cfg = config or NosaConfig()
    steps, b, _, _ = q_bits.shape
    _, t_all, hkv, _ = k_bits.shape
    if first_context < 1 or first_context + steps - 1 > t_all or cis.shape != (b, hkv, t_all):
        raise ValueError("nosa_replay: the keys and scores must cover every step's context")
    bt = cfg.block_tokens
    ck = _compressed_keys(k_bits, cfg)
    cfg_k = replace(cfg, selector="topk")
    slots = {"nosa": np.full((b, hkv, cfg.slots), -1, np.int64)}
    slots["topk"] = slots["nosa"].copy()
    out: dict[str, list[np.ndarray]] = {k: [] for k in NosaReplay.__dataclass_fields__}
    for s in range(steps):
        t = first_context + s
        nb = -(-t // bt)
        n_ck = max(0, (t - cfg.compress_window) // cfg.compress_stride + 1)
        q_score = _block_scores(q_bits[s], ck[:, :, :n_ck], nb, cfg)
        cis_blk = _block_max(cis[:, :, :t], bt, nb)
        mass = oracle_block_mass(q_bits[s], k_bits[:, :t], bt)
        n_sel = min(cfg.slots, nb)
        oracle = _top(mass, np.ones(mass.shape, dtype=bool), n_sel)
        for name, c in (("nosa", cfg), ("topk", cfg_k)):
            sel = _select(q_score, cis_blk, nb, c)
            slots[name], _, miss = _update_slots(slots[name], sel, nb - 1)
            rec, held = _scores(sel, mass, oracle)
            suffix = "" if name == "nosa" else "_topk"
            out["recall" + suffix].append(rec)
            out["mass" + suffix].append(held)
            out["misses" + suffix].append(miss)
        out["mass_oracle"].append((mass * oracle).sum(axis=-1))
        out["contexts"].append(np.int64(t))
        out["selected"].append(np.int64(n_sel))
    return NosaReplay(**{k: np.asarray(v) for k, v in out.items()})
