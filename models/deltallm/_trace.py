"""DeltaLLM's per-column event trace: what the vector processor's cycle model consumes.

For each (layer, KV head) one :class:`DeltaEvents` holds, per query block ``b`` (``P_q``
consecutive query tokens, all ``G`` query heads of the group: ``L = G·P_q`` lanes) and key column
``j``, the column's kind as the trace contract's sparsity ``kind`` bits (1 exact for some valid
lane, 2 delta for some valid lane, both = mixed, +4 skipped by VSSOS; 0 = not visited), and per
key the nonzeros of its delta ``nnz(Δ_j)``. That is everything the cycle model needs, in a
compact form: ``nb·T`` bytes of kinds plus ``2·T`` bytes of counts per (layer, KV head) (about
40 MB for 30 layers x 5 KV heads at T = 1024, against 0.9 GB as 45-byte sparsity records).

:func:`delta_trace` expands events into a :class:`coaccel.trace.Trace` of the contract: one
kernel per (layer, KV head), its sparsity records (one per visited (block, column), with the
valid-lane bitmask) and its DRAM records (Q, the exact keys, the Δ bitmask and the packed 9-bit
Δ values, V, and the output written back). A simulator accepts either form.

:func:`column_events` computes the same events straight from the INT8 q and k, without the
score x value half of the datapath: VSSOS's skip decision needs only the scores and each lane's
running max, never the outputs. It equals :func:`delta_events` of
:func:`~coaccel.models.deltallm.attention` exactly (tested) and is what the simulator runs per
layer (scores by float64 BLAS products, exact because ``|S| < 2^53``).

Public: :class:`DeltaEvents`, :func:`delta_events`, :func:`column_events`,
:class:`ColumnEvents`, :func:`delta_trace`, :func:`events_from_trace`, :func:`head_dram_bytes`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder, storage_bytes

from ._attention import LANE_LAYOUTS, AttentionResult, _check_tau, _head_scale, vector_heads
from ._delta import encode_delta_keys
from ._fixed import EXP_MAX_Q8, log2_scale
from ._scores import score_regions
from ._vssos import column_order

__all__ = [
    "DELTA_VALUE_BITS",
    "ColumnEvents",
    "DeltaEvents",
    "column_events",
    "delta_events",
    "delta_trace",
    "events_from_trace",
    "head_dram_bytes",
]

#: Stored bits per Δ value (9-bit signed, the memory form's range [-254, 254]).
DELTA_VALUE_BITS = 9
#: Bytes per output element written back (int16 Q7.8).
OUTPUT_BYTES = 2
_KERNEL_NAME = "deltallm_attention"


@dataclass(frozen=True, eq=False)
class DeltaEvents:
    """The column events of one (layer, KV head) of a DeltaLLM prefill.

    Attributes:
        layer: layer index.
        head: KV head index (``"group"`` lane layout), or query head index (``"head"``
            layout, where each vector holds one query head: ``group`` is then 1).
        group: query heads per vector: ``G`` (``"group"`` layout) or 1 (``"head"``).
        query_block: ``P_q``, query tokens per block (``L = group·P_q`` lanes).
        n_tokens: ``T``.
        causal: whether the causal mask applied (lane validity).
        kind: ``[nb, T]`` uint8 sparsity kind of column ``j`` in block ``b``; 0 = not visited.
        nnz: ``[T]`` int16 nonzeros of ``Δ_j`` (``d`` for dense rows).
        head_dim: ``d``. value_dim: ``dv``.
    """

    layer: int
    head: int
    group: int
    query_block: int
    n_tokens: int
    causal: bool
    kind: npt.NDArray[np.uint8]
    nnz: npt.NDArray[np.int16]
    head_dim: int
    value_dim: int

    @property
    def n_blocks(self) -> int:
        """Query blocks ``nb = ceil(T / P_q)``."""
        return int(self.kind.shape[0])

    def lanes(self) -> npt.NDArray[np.uint64]:
        """``[nb, T]`` uint64 bitmask of valid lanes (bit ``g·P_q + p``: head g, token p)."""
        p_q, t_n = self.query_block, self.n_tokens
        tok = np.arange(self.n_blocks * p_q).reshape(self.n_blocks, p_q)
        cols = np.arange(t_n)
        ok = tok[:, :, None] < t_n
        if self.causal:
            ok = ok & (cols[None, None, :] <= tok[:, :, None])
        bits = np.zeros((self.n_blocks, t_n), dtype=np.uint64)
        for g in range(self.group):
            for p in range(p_q):
                bits |= ok[:, p, :].astype(np.uint64) << np.uint64(g * p_q + p)
        return np.where(self.kind > 0, bits, np.uint64(0))

    def equals(self, other: DeltaEvents) -> bool:
        """Same fields and same arrays."""
        return (
            (self.layer, self.head, self.group, self.query_block, self.n_tokens, self.causal)
            == (
                other.layer,
                other.head,
                other.group,
                other.query_block,
                other.n_tokens,
                other.causal,
            )  # fmt: skip
            and (self.head_dim, self.value_dim) == (other.head_dim, other.value_dim)
            and np.array_equal(self.kind, other.kind)
            and np.array_equal(self.nnz, other.nnz)
        )


def _blocks(x: np.ndarray, block: int) -> np.ndarray:
    """``[..., T, T]`` -> ``[..., nb, P_q, T]``, query rows padded with False."""
    t_n = x.shape[-2]
    nb = -(-t_n // block)
    pad = np.zeros((*x.shape[:-2], nb * block - t_n, x.shape[-1]), dtype=bool)
    return np.concatenate([x, pad], axis=-2).reshape(*x.shape[:-2], nb, block, x.shape[-1])


def delta_events(
    result: AttentionResult,
    *,
    query_block: int,
    layer: int = 0,
    causal: bool = True,
    lane_layout: str = "group",
) -> tuple[DeltaEvents, ...]:
    """The column events of one :func:`~coaccel.models.deltallm.attention` call, per vector
    group (KV head, or query head in the ``"head"`` lane layout).

    Args:
        result: the attention result (its ``valid``, ``exact``, ``skipped`` masks and Delta-Key
            bitmask).
        query_block: the ``query_block`` (``P_q``) the call used.
        layer: layer index recorded in the events.
        causal: the ``causal`` the call used.
        lane_layout: the ``lane_layout`` the call used.

    Returns:
        One :class:`DeltaEvents` per KV head (``"group"``) or query head (``"head"``), in order.
    """
    mask = result.delta_keys.mask
    hkv, t_n, d = mask.shape
    hq = result.skipped.shape[0]
    g = hq // hkv
    dv = result.output.shape[2]
    valid = _blocks(result.valid, query_block)  # [nb, P, T]
    exact = _blocks(result.exact, query_block)
    visited = valid.any(axis=1)
    kind0 = (
        (valid & exact).any(axis=1).astype(np.uint8)
        | ((valid & ~exact).any(axis=1).astype(np.uint8) << 1)
    ) * visited
    hv = vector_heads(lane_layout, g)
    skip_el = _blocks(result.skipped, query_block)  # [Hq, nb, P, T]
    skip = np.asarray(skip_el.reshape(hq // hv, hv, *skip_el.shape[1:]).any(axis=(1, 3)))
    nnz = np.count_nonzero(mask, axis=2).astype(np.int16)  # [Hkv, T]
    return tuple(
        DeltaEvents(
            layer=layer,
            head=h,
            group=hv,
            query_block=query_block,
            n_tokens=t_n,
            causal=causal,
            kind=(kind0 | (skip[h] & visited).astype(np.uint8) << 2).astype(np.uint8),
            nnz=nnz[h * hv // g],
            head_dim=d,
            value_dim=dv,
        )
        for h in range(hq // hv)
    )


def head_dram_bytes(ev: DeltaEvents) -> dict[str, int]:
    """DRAM bytes one (layer, KV head) moves, by tensor ([OURS] memory layout).

    Reads: the ``G`` heads' INT8 queries ``Q``, the exact keys ``K`` (each key once as the
    window slides; full keys are not kept outside it), the Δ bitmask (``d`` bits per key), the
    packed 9-bit Δ values (row 0 dense), the INT8 values ``V``. Write: the int16 output ``O``.

    Args:
        ev: the events.

    Returns:
        ``{"Q", "K", "delta_mask", "delta_values", "V", "O"} -> bytes``.
    """
    t_n, d, dv, g = ev.n_tokens, ev.head_dim, ev.value_dim, ev.group
    return {
        "Q": g * t_n * d,
        "K": t_n * d,
        "delta_mask": t_n * (-(-d // 8)),
        "delta_values": int(storage_bytes(int(ev.nnz.astype(np.int64).sum()), DELTA_VALUE_BITS)),
        "V": t_n * dv,
        "O": g * t_n * dv * OUTPUT_BYTES,
    }


def delta_trace(
    events: Iterable[DeltaEvents],
    *,
    workload: dict | None = None,
    config_digest: str | None = None,
    seed: int | None = None,
) -> Trace:
    """Expand column events into a trace of the contract (``docs/trace.md``).

    One kernel ``deltallm_attention`` per (layer, KV head), in the order given. Inside it: the
    DRAM reads (phase ``load``: ``Q``, ``K``, ``delta_mask``, ``delta_values``, ``V``), one
    sparsity record per visited (block, column) in block-then-column order (``kind``,
    ``nnz`` for columns with a delta part, ``lanes``), and the DRAM write of ``O`` (phase
    ``store``).

    Args:
        events: the events (:func:`delta_events`).
        workload: workload metadata for the trace header.
        config_digest: digest of the config used, or None.
        seed: the seed of the data, or None.

    Returns:
        The :class:`~coaccel.trace.Trace`.
    """
    b = TraceBuilder(
        producer="coaccel.models.deltallm.delta_trace",
        workload=workload or {},
        config_digest=config_digest,
        seed=seed,
    )
    for ev in events:
        kid = b.begin_kernel(_KERNEL_NAME)
        nbytes = head_dram_bytes(ev)
        for tensor in ("Q", "K", "delta_mask", "delta_values", "V"):
            b.memory(kernel=kid, phase="load", tensor=tensor, space="DRAM", rw="r",
                     nbytes=nbytes[tensor], count=1)  # fmt: skip
        bb, jj = np.nonzero(ev.kind)
        kinds = ev.kind[bb, jj]
        b.sparsity_many(
            kernel=kid,
            layer=ev.layer,
            head=ev.head,
            qblock=bb.astype(np.int32),
            column=jj.astype(np.int64),
            kind=kinds,
            nnz=np.where(kinds & 2, ev.nnz[jj], 0).astype(np.int32),
            lanes=ev.lanes()[bb, jj],
        )
        b.memory(kernel=kid, phase="store", tensor="O", space="DRAM", rw="w",
                 nbytes=nbytes["O"], count=1)  # fmt: skip
        b.end_kernel(kid, name=_KERNEL_NAME)
    return b.build()


def events_from_trace(
    trace: Trace, *, group: int, query_block: int, n_tokens: int, head_dim: int,
    value_dim: int | None = None, causal: bool = True,
) -> tuple[DeltaEvents, ...]:  # fmt: skip
    """Rebuild the column events from a trace's sparsity records (inverse of :func:`delta_trace`).

    Args:
        trace: a trace with DeltaLLM sparsity records.
        group: ``G``. query_block: ``P_q``. n_tokens: ``T``. head_dim: ``d``.
        value_dim: ``dv`` (None: ``d``).
        causal: whether the causal mask applied.

    Returns:
        One :class:`DeltaEvents` per (layer, head) present, sorted by (layer, head). Key
        columns without a delta record keep ``nnz = 0`` (their delta count is never paid).
    """
    sp = trace.sparsity
    nb = -(-n_tokens // query_block)
    out = []
    pairs: Sequence[tuple[int, int]] = sorted(
        {(int(a), int(h)) for a, h in zip(sp["layer"], sp["head"], strict=True)}
    )
    for layer, head in pairs:
        r = sp[(sp["layer"] == layer) & (sp["head"] == head)]
        kind = np.zeros((nb, n_tokens), dtype=np.uint8)
        kind[r["qblock"], r["column"]] = r["kind"]
        nnz = np.zeros(n_tokens, dtype=np.int16)
        has = (r["kind"] & 2) > 0
        nnz[r["column"][has]] = r["nnz"][has]
        out.append(
            DeltaEvents(layer=layer, head=head, group=group, query_block=query_block,
                        n_tokens=n_tokens, causal=causal, kind=kind, nnz=nnz,
                        head_dim=head_dim, value_dim=head_dim if value_dim is None else value_dim)
        )  # fmt: skip
    return tuple(out)


@dataclass(frozen=True)
class ColumnEvents:
    """Events and sparsity counts of one layer (:func:`column_events`).

    Attributes:
        events: one :class:`DeltaEvents` per KV head.
        delta_sparsity: ``ρ_K = 1 - nnz(Δ_1..T-1) / ((T-1)·Hkv·d)``.
        valid_elements: causally valid (query head, query, key) elements.
        fine_elements: valid elements with ``E >= τ`` at their step.
        skipped_elements: valid elements inside skipped columns.
        delta_nonzeros: ``nnz(Δ_1..T-1)`` over the KV heads.
    """

    events: tuple[DeltaEvents, ...]
    delta_sparsity: float
    valid_elements: int
    fine_elements: int
    skipped_elements: int
    delta_nonzeros: int

    @property
    def fine_sparsity(self) -> float:
        """``ρ_fine``: fraction of valid elements with ``E >= τ``."""
        return self.fine_elements / self.valid_elements

    @property
    def structured_sparsity(self) -> float:
        """``ρ_S``: fraction of valid elements inside skipped columns."""
        return self.skipped_elements / self.valid_elements


_NEG = np.int64(-(1 << 62))


def column_events(
    q: npt.NDArray[np.int8],
    k: npt.NDArray[np.int8],
    *,
    theta: int,
    window: int,
    tau: float,
    q_scale: npt.ArrayLike = 1.0,
    k_scale: npt.ArrayLike = 1.0,
    query_block: int = 4,
    n_sink: int = 1,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    order: str = "ascending",
    causal: bool = True,
    layer: int = 0,
    value_dim: int | None = None,
    lane_layout: str = "group",
) -> ColumnEvents:
    """The column events of one layer's fixed-point prefill, from q and k alone.

    Same arguments and meaning as :func:`~coaccel.models.deltallm.attention` (fixed mode);
    ``denom_mode`` and ``delta_eval`` do not change the events. Each lane's skip flag
    (``E >= τ`` against its own running maximum) does not depend on the other lanes, so the
    lane layout only decides which flags are AND-ed into one column skip.

    Args:
        q: ``[Hq, T, d]`` int8 post-RoPE queries.
        k: ``[Hkv, T, d]`` int8 post-RoPE keys.
        theta: Delta-Key threshold, key LSBs.
        window: exact window ``W``.
        tau: VSSOS threshold, log2 units (``math.inf``: no skipping).
        q_scale: ``[Hq]`` or scalar INT8 scale of q. k_scale: ``[Hkv]`` or scalar.
        query_block: ``P_q``.
        n_sink: dense leading keys. delta_mode, refresh_period: the encoder's options.
        order: ``"ascending"`` or ``"window_first"``.
        causal: apply the causal mask.
        layer: layer index recorded in the events.
        value_dim: ``dv`` recorded in the events (None: ``d``).
        lane_layout: ``"group"`` (default) or ``"head"`` (:data:`LANE_LAYOUTS`).

    Returns:
        :class:`ColumnEvents`, one event per KV head (``"group"``) or query head (``"head"``).

    Raises:
        TypeError: q or k not int8. ValueError: bad shapes or options.
    """
    qa, ka = np.asarray(q), np.asarray(k)
    _check_column_args(qa, ka, tau, order, lane_layout)
    hq, t_n, d = qa.shape
    hkv = ka.shape[0]
    g = hq // hkv
    hv = vector_heads(lane_layout, g)
    dk = encode_delta_keys(
        ka, theta=theta, delta_mode=delta_mode, refresh_period=refresh_period, n_sink=n_sink
    )
    valid, exact = score_regions(np.arange(t_n), t_n, window=window, n_sink=n_sink, causal=causal)
    mant, shift = _score_scales(q_scale, k_scale, hq, hkv, d)
    tau_e = None if math.isinf(tau) else math.floor(tau * 256 + 0.5)
    nb = -(-t_n // query_block)
    valid_b = _blocks(valid, query_block)
    exact_b = _blocks(exact, query_block)
    visited = valid_b.any(axis=1)
    kind0 = (
        (valid_b & exact_b).any(axis=1).astype(np.uint8)
        | ((valid_b & ~exact_b).any(axis=1).astype(np.uint8) << 1)
    ) * visited
    n_valid_col = valid_b.sum(axis=1)  # [nb, T] valid tokens per (block, column)
    orders = None
    if order == "window_first":
        tok = np.arange(nb * query_block).reshape(nb, query_block)
        orders = [column_order(tk[tk < t_n], t_n, window=window, n_sink=n_sink, order=order,
                               causal=causal) for tk in tok]  # fmt: skip
    events = []
    fine = skipped = 0
    for h in range(hkv):
        heads = slice(h * g, (h + 1) * g)
        qh = qa[heads].astype(np.float64)
        s_exact = qh @ ka[h].astype(np.float64).T
        s_delta = qh @ dk.keys_hat[h].astype(np.float64).T
        sc = np.where(exact, s_exact, np.where(valid, s_delta, 0.0)).astype(np.int64)
        small = _small_scores(sc, valid, orders, query_block, mant[heads], shift[heads], tau_e)
        fine += int(np.count_nonzero(small))
        small_b = _blocks(small, query_block)  # [G, nb, P, T]
        nnz_h = np.count_nonzero(dk.mask[h], axis=1).astype(np.int16)
        for a in range(0, g, hv):  # the vector groups of this KV head
            hide = np.all(small_b[a : a + hv] | ~valid_b[None], axis=(0, 2))
            skip = hide & visited
            skipped += int((skip * n_valid_col).sum()) * hv
            events.append(DeltaEvents(
                layer=layer, head=h if hv == g else h * g + a, group=hv,
                query_block=query_block, n_tokens=t_n, causal=causal,
                kind=(kind0 | skip.astype(np.uint8) << 2).astype(np.uint8), nnz=nnz_h,
                head_dim=d, value_dim=d if value_dim is None else value_dim,
            ))  # fmt: skip
    rest = dk.mask[:, 1:, :]
    nz = int(np.count_nonzero(rest))
    return ColumnEvents(
        events=tuple(events),
        delta_sparsity=1.0 - nz / rest.size if rest.size else 0.0,
        valid_elements=int(np.count_nonzero(valid)) * hq,
        fine_elements=fine,
        skipped_elements=skipped,
        delta_nonzeros=nz,
    )


def _check_column_args(
    qa: np.ndarray, ka: np.ndarray, tau: float, order: str, lane_layout: str = "group"
) -> None:
    """Raise TypeError for q or k not int8, ValueError for bad shapes, ``tau``, ``order`` or
    ``lane_layout``."""
    if lane_layout not in LANE_LAYOUTS:
        raise ValueError(f"lane_layout: unknown value {lane_layout!r}; valid: group, head")
    if qa.dtype != np.int8 or ka.dtype != np.int8:
        raise TypeError(f"q, k: need int8, got {qa.dtype}, {ka.dtype}")
    if qa.ndim != 3 or ka.ndim != 3 or qa.shape[1:] != ka.shape[1:] or qa.shape[0] % ka.shape[0]:
        raise ValueError(f"need q [Hq, T, d] and k [Hkv, T, d] with Hkv | Hq; got {qa.shape}, "
                         f"{ka.shape}")  # fmt: skip
    _check_tau(tau)
    if order not in ("ascending", "window_first"):
        raise ValueError(f"order: unknown value {order!r}; valid: ascending, window_first")


def _score_scales(
    q_scale: npt.ArrayLike, k_scale: npt.ArrayLike, hq: int, hkv: int, d: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per query head, the fixed-point factor ``mant >> shift`` (:func:`log2_scale`) that turns
    an integer score difference into log2 units: ``q_scale * k_scale * log2(e) / sqrt(d)``."""
    c_head = (
        _head_scale("q_scale", q_scale, hq)
        * np.repeat(_head_scale("k_scale", k_scale, hkv), hq // hkv)
        * math.log2(math.e)
        / math.sqrt(d)
    )
    enc = [log2_scale(float(c)) for c in c_head]
    mant = np.array([m for m, _ in enc], dtype=np.int64)
    shift = np.array([s for _, s in enc], dtype=np.int64)
    return mant, shift


def _small_scores(
    sc: npt.NDArray[np.int64],
    valid: npt.NDArray[np.bool_],
    orders: list[np.ndarray] | None,
    query_block: int,
    mant: npt.NDArray[np.int64],
    shift: npt.NDArray[np.int64],
    tau_e: int | None,
) -> npt.NDArray[np.bool_]:
    """``[G, T, T]``: the valid elements whose score lies ``tau`` or more (log2 units, Q8
    ``tau_e``; None: none) below the running maximum of their row, taken in column order
    (ascending, or each query block's ``orders``)."""
    t_n = sc.shape[1]
    run = np.where(valid, sc, _NEG)
    if orders is None:
        run = np.maximum.accumulate(run, axis=2)
    else:
        for b, cols in enumerate(orders):
            cols = cols[cols >= 0]
            rows = slice(b * query_block, min((b + 1) * query_block, t_n))
            blk = np.maximum.accumulate(run[:, rows][:, :, cols], axis=2)
            run[:, rows, :] = _scatter_cols(run[:, rows], blk, cols)
    if tau_e is None:
        return np.zeros(sc.shape, dtype=bool)
    diff = np.where(valid, run - sc, 0)
    e = np.minimum((diff * mant[:, None, None]) >> shift[:, None, None], EXP_MAX_Q8)
    return valid & (e >= tau_e)


def _scatter_cols(base: np.ndarray, blk: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``base`` with ``base[..., cols] = blk`` (running maxima in a block's column order)."""
    out = base.copy()
    out[..., cols] = blk
    return out
