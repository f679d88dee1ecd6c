"""Specter MoE expert offload with a quantised-draft lookahead (W4): routing, planner, trace.

Specter ([S6], the design also described as MoE-SpeQ in [MOE-SPEQ]) decodes an MoE model whose
routed experts do not fit the GPU: a slot cache of ``slots`` experts per layer lives in HBM, the
rest in pinned host memory. A draft (the same model with its routed experts in INT4, all of them
on the GPU) runs ``K`` tokens ahead; the routes it records tell a prefetch planner which experts
the target will need, and their FP16 weights are copied to the GPU on a copy stream while the
draft keeps computing. The target then verifies the ``K + 1`` tokens layer by layer, running on
the resident experts and demand-loading the misses; the accepted prefix is kept.

The real models need tens of GB, so the workload is a seeded **routing-trace generator**
(:class:`SpecterModel`; every knob and where its value comes from is documented there; the
routing knobs fitted to Mixtral's published expert-repetition shares, :data:`ROUTING_PROFILE`,
since no recorded routes of a real MoE could be had: every figure it gives is synthetic) driving
the planner and the slot cache exactly (integers only, so the reference is bit-exact). The
outputs are the routes, the planner's decisions, the demand misses, the accepted lengths, and the
trace in the contract's conventions: draft and verify kernels on stream 0, expert transfers as
``memcpy_h2d`` kernels (reading ``HOST``, writing ``HBM``) on stream 1, ordered by ``record`` /
``wait`` events, so that the simulator overlaps transfers with compute and lets them contend for
HBM.

Per speculation window ([S6] ``predictive_io_orchestrator/prefetch_planner.py`` as summarised by
the artifact's ``docs/design.md``):

1. the draft runs ``K`` steps; each step reads the dense (non-routed) FP16 weights and the INT4
   weights of its routed experts, layer by layer, and adds its routes to per-layer counts;
2. planner boundaries: the first after ``ceil(cold_start x K)`` draft steps, the next ``chunk``
   steps later with ``chunk = ceil(bytes_moved / (bw_est x draft_step_est))``; ``bw_est`` and
   ``draft_step_est`` are exponential moving averages (weights 0.75 old / 0.25 new) of what the
   runtime measures, starting from a 12 GB/s bandwidth guess. At a boundary each layer's top
   ``slots`` experts by count that are not resident are copied in (least recently used slot
   evicted, never an expert copied in this window), at most ``slots`` per layer and window;
3. verify: per layer, the target's routes of the ``K + 1`` tokens; resident experts run first,
   misses are demand-loaded (LRU eviction, protecting the layer's in-use experts) after the
   previous layer finished (the router's output decides them); the layer's kernel waits for the
   copies of every expert it uses;
4. the accepted length is drawn from the acceptance model; the next window starts after it.

:func:`specter_baseline` is the same slot cache without lookahead: one token at a time, misses
demand-loaded, LRU ([OURS] the comparison point of the speedup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder

from ._checks import check_integer_fields
from ._trace import emit_host_copy

__all__ = [
    "ROUTING_PROFILE",
    "MoEShape",
    "SpecterModel",
    "SpecterResult",
    "routing_trace",
    "specter_baseline",
    "specter_decode",
]

PRODUCER = "coaccel.models.gpu.specter"
Mode = Literal["specter", "baseline"]


@dataclass(frozen=True)
class MoEShape:
    """Geometry of the MoE model (defaults: DeepSeek-V2-Lite, [HF-DSV2-LITE] ``config.json``).

    Attributes:
        moe_layers: layers with routed experts (27 layers, the first dense:
            ``first_k_dense_replace`` = 1 -> 26).
        experts: routed experts per layer (``n_routed_experts`` 64).
        top_k: experts per token and layer (``num_experts_per_tok`` 6).
        hidden: model width (``hidden_size`` 2048).
        expert_ffn: expert intermediate width (``moe_intermediate_size`` 1408).
        shared_experts: always-on experts per layer (``n_shared_experts`` 2).
        attn_params: attention weights per layer ([DERIVED] from the MLA dims of the config,
            16 heads, kv_lora_rank 512, q/k nope 128 + rope 64, v 128: 2048x3072 + 2048x576 +
            512x4096 + 2048x2048 = 13.8 M, **unverified**).
        weight_bytes: bytes per target weight (FP16: 2).
        draft_bits: bits per draft expert weight (INT4: 4) plus one FP16 scale per
            ``draft_group`` weights.
        draft_group: weights per draft scale (128, the W4A16 Marlin group size).
    """

    moe_layers: int = 26
    experts: int = 64
    top_k: int = 6
    hidden: int = 2048
    expert_ffn: int = 1408
    shared_experts: int = 2
    attn_params: int = 2048 * 3072 + 2048 * 576 + 512 * 4096 + 2048 * 2048
    weight_bytes: int = 2
    draft_bits: int = 4
    draft_group: int = 128

    def __post_init__(self) -> None:
        check_integer_fields(
            self,
            ("moe_layers", "experts", "top_k", "hidden", "expert_ffn", "weight_bytes",
             "draft_bits", "draft_group"),
        )  # fmt: skip
        if self.top_k > self.experts:
            raise ValueError(f"MoEShape: top_k={self.top_k} exceeds experts={self.experts}")

    @property
    def expert_params(self) -> int:
        """Weights of one expert (gate, up, down): ``3 x hidden x expert_ffn``."""
        return 3 * self.hidden * self.expert_ffn

    @property
    def expert_bytes(self) -> int:
        """Bytes of one FP16 expert, B (DeepSeek-V2-Lite: 17,301,504 = 17.3 MB)."""
        return self.expert_params * self.weight_bytes

    @property
    def draft_expert_bytes(self) -> int:
        """Bytes of one INT4 draft expert with its FP16 group scales, B."""
        p = self.expert_params
        return p * self.draft_bits // 8 + -(-p // self.draft_group) * 2

    @property
    def dense_bytes(self) -> int:
        """FP16 bytes of a layer's non-routed weights (shared experts + attention), B."""
        return (self.shared_experts * self.expert_params + self.attn_params) * self.weight_bytes


@dataclass(frozen=True)
class SpecterModel:
    """Knobs of the routing-trace generator and of the speculation (all seeded).

    Attributes:
        draft_depth: ``K`` draft tokens per window ([S6] ``benchmarks/protocol.json``:
            DeepSeek-V2-Lite 16, Qwen1.5-MoE 8, Phi-3.5-MoE 16).
        slots: resident experts per layer ([S6] protocol: DeepSeek-V2-Lite 16 "high" or 8 "low"
            of 64).
        zipf: exponent of the per-layer expert popularity ``p(rank) ~ rank^-zipf``; ``None``
            (default) takes it per layer from :data:`ROUTING_PROFILE`.
        persistence: probability that a token keeps the expert the previous token used in the
            same route slot; ``None`` (default) takes it per layer from
            :data:`ROUTING_PROFILE`. A number sets every layer alike.
        recall: fraction of the target's routes the draft predicts ([OURS] 0.75; Specter's
            oracle study replaces 0/25/50/75 % of recorded target routes [S6], so 0.25 .. 1.0
            spans it).
        accept: probability each draft token is accepted, independently, stopping at the first
            rejection ([OURS] 0.9: the draft is the target itself with INT4 experts; acceptance
            length ~ truncated geometric).
        cold_start: share of the draft steps before the first planner boundary ([S6]: 20 %).
        bw_guess_gb_per_s: the planner's initial bandwidth estimate ([S6]: 12 GB/s).
        ema_old: weight of the old value in the planner's moving averages ([S6]: 0.75).
        link_gb_per_s: the H2D bandwidth the runtime measures for the planner's EMA ([OURS] 25,
            typical pinned PCIe Gen4; the simulator times the real copies from its own config).
        draft_step_us: the draft step time the runtime measures for the EMA ([OURS] 1500 us:
            about 2.3 GB of weights per step at A100-40GB's 1.56 TB/s, [DERIVED]).
    """

    draft_depth: int = 16
    slots: int = 16
    zipf: float | None = None
    persistence: float | None = None
    recall: float = 0.75
    accept: float = 0.9
    cold_start: float = 0.2
    bw_guess_gb_per_s: float = 12.0
    ema_old: float = 0.75
    link_gb_per_s: float = 25.0
    draft_step_us: float = 1500.0

    def __post_init__(self) -> None:
        if isinstance(self.draft_depth, bool) or self.draft_depth < 1:
            raise ValueError(f"SpecterModel.draft_depth={self.draft_depth} must be >= 1")
        if isinstance(self.slots, bool) or self.slots < 1:
            raise ValueError(f"SpecterModel.slots={self.slots} must be >= 1")
        for name in ("persistence", "recall", "accept", "cold_start", "ema_old"):
            v = getattr(self, name)
            if v is not None and not 0 <= v <= 1:
                raise ValueError(f"SpecterModel.{name}={v} must be in [0, 1]")
        if self.zipf is not None and self.zipf < 0:
            raise ValueError(f"SpecterModel.zipf={self.zipf} must be >= 0")
        for name in ("bw_guess_gb_per_s", "link_gb_per_s", "draft_step_us"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SpecterModel.{name} must be positive")

    @property
    def routing_fitted(self) -> bool:
        """Whether the routing knobs come from :data:`ROUTING_PROFILE` (both left ``None``)."""
        return self.persistence is None and self.zipf is None

    def layer_knobs(self, layers: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per-layer ``(persistence, zipf)``, ``[layers]`` each.

        A knob left ``None`` is :data:`ROUTING_PROFILE` interpolated linearly at the layer's
        relative depth ``i / (layers - 1)`` among the routed layers.
        """
        depth = np.arange(layers) / max(1, layers - 1)
        at = np.array([a[0] for a in ROUTING_PROFILE])

        def knob(v: float | None, col: int) -> npt.NDArray[np.float64]:
            if v is not None:
                return np.full(layers, float(v))
            return np.interp(depth, at, np.array([a[col] for a in ROUTING_PROFILE]))

        return knob(self.persistence, 1), knob(self.zipf, 2)


ROUTING_PROFILE: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.018, 0.0),
    (15 / 31, 0.143, 0.488),
    (1.0, 0.082, 0.0),
)
"""``(relative depth, persistence, zipf)`` anchors of the default routing: the generator fitted
to Mixtral 8x7B's expert-repetition shares at layers 0, 15 and 31 of 32 ([MIXTRAL] Table 5,
:func:`coaccel.models.gpu._routing_fit.fit_mixtral_table5`; a test re-derives these values).
Applied to another MoE at the same relative depth ([OURS] transfer: no routing statistics of
DeepSeek-V2-Lite, Qwen1.5-MoE or Phi-3.5-MoE were found)."""


@dataclass(frozen=True)
class SpecterResult:
    """A Specter (or baseline) decode run.

    Attributes:
        shape: the MoE geometry. model: the knobs. mode: ``"specter"`` or ``"baseline"``.
        tokens: output tokens produced.
        forward_tokens: target forward positions run (``K + 1`` per window; 1 per token in
            the baseline).
        accepted: ``[windows]`` accepted draft tokens per window (empty for the baseline).
        prefetched: expert copies the planner issued.
        prefetch_used: of those, copies whose expert the verify of the same window used.
        demand_misses: expert copies the target demand-loaded.
        expert_uses: (layer, expert) uses by the target (distinct per window or token).
        trace: the trace of the whole run.
    """

    shape: MoEShape
    model: SpecterModel
    mode: str
    tokens: int
    forward_tokens: int
    accepted: npt.NDArray[np.int64]
    prefetched: int
    prefetch_used: int
    demand_misses: int
    expert_uses: int
    trace: Trace

    @property
    def h2d_bytes(self) -> int:
        """Expert bytes copied to the GPU, B."""
        return (self.prefetched + self.demand_misses) * self.shape.expert_bytes


DRAWS_PER_SLOT = 4
"""Popularity draws per route slot and expert of the route (``4 * top_k`` per slot): a fresh
slot takes the first draw not chosen yet, the most popular unchosen expert when all are."""


class _Router:
    """The routing-trace generator's state: per-layer popularity and the last routes."""

    def __init__(self, shape: MoEShape, model: SpecterModel, rng: np.random.Generator) -> None:
        n_e = shape.experts
        self.persistence, zipf = model.layer_knobs(shape.moe_layers)
        self.pop = np.empty((shape.moe_layers, n_e))
        for layer in range(shape.moe_layers):
            base = np.arange(1, n_e + 1, dtype=np.float64) ** -zipf[layer]
            self.pop[layer, rng.permutation(n_e)] = base / base.sum()
        self.cdf = np.cumsum(self.pop, axis=1)
        self.by_pop = np.argsort(-self.pop, axis=1, kind="stable")
        self.shape, self.model, self.rng = shape, model, rng
        self.prev: npt.NDArray[np.int64] | None = None

    def next(self, n: int) -> npt.NDArray[np.int64]:
        """The next ``n`` positions' routes, ``[n, layers, top_k]`` int64."""
        n_l, k, n_e = self.shape.moe_layers, self.shape.top_k, self.shape.experts
        out = np.empty((n, n_l, k), dtype=np.int64)
        for t in range(n):
            keep = self.rng.random((n_l, k)) < self.persistence[:, None]
            u = self.rng.random((n_l, k, DRAWS_PER_SLOT * k))
            row = np.empty((n_l, k), dtype=np.int64)
            for layer in range(n_l):
                cdf = self.cdf[layer]
                draws = np.minimum(np.searchsorted(cdf, u[layer] * cdf[-1], side="right"), n_e - 1)
                chosen: list[int] = []
                for j in range(k):
                    p = self.prev
                    if p is not None and keep[layer, j] and int(p[layer, j]) not in chosen:
                        chosen.append(int(p[layer, j]))
                        continue
                    for e in draws[j].tolist():
                        if e not in chosen:
                            chosen.append(e)
                            break
                    else:  # every draw taken: the most popular expert not chosen yet
                        chosen.append(next(int(e) for e in self.by_pop[layer] if e not in chosen))
                row[layer] = chosen
            out[t] = row
            self.prev = row
        return out


def routing_trace(
    shape: MoEShape, model: SpecterModel, n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """``n`` positions of target routes, ``[n, layers, top_k]`` int64 (distinct per row).

    Per layer the popularity is Zipf over a seeded permutation of the experts; route slot ``j``
    of a position keeps the previous position's expert with probability ``persistence`` (when
    still distinct), otherwise draws by popularity among the experts not yet chosen.

    Returns:
        The routes and the ``[layers, experts]`` popularity.
    """
    router = _Router(shape, model, rng)
    return router.next(n), router.pop


def _draft_routes(
    target: npt.NDArray[np.int64],
    pop: npt.NDArray[np.float64],
    recall: float,
    rng: np.random.Generator,
) -> npt.NDArray[np.int64]:
    """The draft's routes: each target route kept with probability ``recall``, otherwise
    replaced by a popularity draw of an expert the row does not hold."""
    out = target.copy()
    n, n_l, k = target.shape
    n_e = pop.shape[1]
    miss = rng.random(target.shape) >= recall
    u = rng.random(target.shape)
    for t, layer, j in zip(*np.nonzero(miss), strict=True):
        row = out[t, layer]
        free = np.setdiff1d(np.arange(n_e), row)
        w = pop[layer, free] / pop[layer, free].sum()
        e = free[
            min(int(np.searchsorted(np.cumsum(w), u[t, layer, j], side="right")), free.size - 1)
        ]
        row[j] = e
    return out


@dataclass
class _Cache:
    """Per-layer LRU slot cache of experts (host-side bookkeeping of the runtime)."""

    slots: int
    resident: list[dict[int, int]] = field(default_factory=list)  # expert -> slot
    last_use: list[dict[int, int]] = field(default_factory=list)
    clock: int = 0

    def touch(self, layer: int, e: int) -> None:
        self.clock += 1
        self.last_use[layer][e] = self.clock

    def insert(self, layer: int, e: int, protect: set[int]) -> int:
        """Place expert ``e``; returns its slot (evicting the LRU expert not protected)."""
        res = self.resident[layer]
        if len(res) < self.slots:
            slot = len(res)
        else:
            cand = [x for x in res if x not in protect] or list(res)
            victim = min(cand, key=lambda x: (self.last_use[layer].get(x, 0), x))
            slot = res.pop(victim)
            self.last_use[layer].pop(victim, None)
        res[e] = slot
        self.touch(layer, e)
        return slot


class _Emitter:
    """Trace records of the run: tensors, kernels, copies and the events between them."""

    def __init__(self, shape: MoEShape, model: SpecterModel, workload: dict) -> None:
        self.s, self.m = shape, model
        self.tb = TraceBuilder(producer=PRODUCER, workload=workload, seed=workload.get("seed"))
        n_l, n_e = shape.moe_layers, shape.experts
        self.tb.allocate("experts_host", space="HOST", nbytes=n_l * n_e * shape.expert_bytes)
        self.tb.allocate("expert_slots", space="HBM", nbytes=n_l * model.slots * shape.expert_bytes)
        self.tb.allocate("dense_w", space="HBM", nbytes=n_l * shape.dense_bytes)
        self.tb.allocate("draft_experts", space="HBM", nbytes=n_l * n_e * shape.draft_expert_bytes)
        self.tb.allocate("act", space="HBM", nbytes=(model.draft_depth + 1) * shape.hidden * 2)
        self.copy_record: dict[tuple[int, int], int] = {}  # (layer, expert) -> record seq
        self.last_record0 = -1

    def record0(self) -> int:
        self.last_record0 = self.tb.event("record", stream=0)
        return self.last_record0

    def copy(self, items: list[tuple[int, int, int]], after: int, name: str) -> None:
        """H2D copies of experts ``(layer, expert, slot)`` on stream 1 as one copy-engine
        launch (one ``memcpy_h2d`` kernel, a record per expert), after stream 0's record
        ``after`` (-1: none)."""
        if not items:
            return
        s, tb = self.s, self.tb
        if after >= 0:
            tb.event("wait", stream=1, dep=after)
        eb = s.expert_bytes
        with tb.kernel(name, stream=1) as k:
            for layer, e, slot in items:
                emit_host_copy(
                    tb,
                    "h2d",
                    kernel=k,
                    host_tensor="experts_host",
                    device_tensor="expert_slots",
                    host_addr=(layer * s.experts + e) * eb,
                    device_addr=(layer * self.m.slots + slot) * eb,
                    nbytes=eb,
                    stream=1,
                )
        done = tb.event("record", stream=1)
        for layer, e, _ in items:
            self.copy_record[(layer, e)] = done

    def layer_reads(self, k: int, layer: int, experts: list[tuple[str, int]], m: int) -> None:
        """Dense weights plus the given experts of one layer, each with its GEMM."""
        s, tb = self.s, self.tb
        r = tb.memory(
            kernel=k,
            space="HBM",
            rw="r",
            tensor="dense_w",
            phase=f"L{layer}",
            addr=layer * s.dense_bytes,
            nbytes=s.dense_bytes,
        )
        tb.compute(
            kernel=k,
            op="gemm",
            unit="tensor_core",
            m=m,
            n=s.dense_bytes // 2 // s.hidden,
            k=s.hidden,
            fmt_a="bf16",
            fmt_b="bf16",
            dep=r,
        )
        for tensor, idx in experts:
            nb = s.draft_expert_bytes if tensor == "draft_experts" else s.expert_bytes
            r = tb.memory(
                kernel=k,
                space="HBM",
                rw="r",
                tensor=tensor,
                phase=f"L{layer}",
                addr=idx * nb,
                nbytes=nb,
            )
            tb.compute(
                kernel=k,
                op="gemm",
                unit="tensor_core",
                m=m,
                n=3 * s.expert_ffn,
                k=s.hidden,
                fmt_a="bf16",
                fmt_b="int4" if tensor == "draft_experts" else "bf16",
                dep=r,
            )

    def kernel_ctas(self) -> dict[str, int]:
        return {"ctas": 132, "threads_per_cta": 256, "regs_per_thread": 64}


def _verify_layer(
    em: _Emitter,
    cache: _Cache,
    layer: int,
    needed: list[int],
    m: int,
    name: str,
    prefetched_now: set[tuple[int, int]],
    used: set[tuple[int, int]],
) -> int:
    """One layer of the target: resident experts first, then the misses, each demand-loaded
    into the least recently used slot (the experts that already ran are the oldest uses once a
    layer needs more experts than it has slots); the layer's kernel waits for the copies.

    Returns:
        The layer's demand misses.
    """
    res = cache.resident[layer]
    hits = [e for e in needed if e in res]
    misses = [e for e in needed if e not in res]
    slot_of: dict[int, int] = {}
    for e in hits:
        cache.touch(layer, e)
        slot_of[e] = res[e]
        if (layer, e) in prefetched_now:
            used.add((layer, e))
    for e in misses:
        slot_of[e] = cache.insert(layer, e, set())
    em.copy([(layer, e, slot_of[e]) for e in misses], em.last_record0, "memcpy_h2d_expert_demand")
    waits = {em.copy_record[(layer, e)] for e in needed if (layer, e) in em.copy_record}
    for w in sorted(waits):
        em.tb.event("wait", stream=0, dep=w)
    with em.tb.kernel(name, **em.kernel_ctas()) as k:
        ex = [("expert_slots", layer * cache.slots + slot_of[e]) for e in hits + misses]
        em.layer_reads(k, layer, ex, m)
    em.record0()
    return len(misses)


def _new_cache(shape: MoEShape, model: SpecterModel, pop: npt.NDArray[np.float64]) -> _Cache:
    """Slot caches warmed with each layer's ``slots`` most popular experts, the less popular
    counting as less recently used ([OURS])."""
    cache = _Cache(model.slots)
    for layer in range(shape.moe_layers):
        top = np.argsort(-pop[layer], kind="stable")[: model.slots]
        cache.resident.append({int(e): i for i, e in enumerate(top)})
        cache.last_use.append({int(e): -i for i, e in enumerate(top)})
    return cache


def _resolve(
    shape: MoEShape | None, model: SpecterModel | None, tokens: int
) -> tuple[MoEShape, SpecterModel]:
    """The geometry and knobs of a run (defaults for None), checked with its token count."""
    s, m = shape or MoEShape(), model or SpecterModel()
    if isinstance(tokens, bool) or tokens < 1:
        raise ValueError(f"tokens={tokens} must be >= 1")
    if m.slots > s.experts:
        raise ValueError(f"slots={m.slots} exceeds experts={s.experts}")
    return s, m


def _plan_prefetch(
    cache: _Cache,
    counts: npt.NDArray[np.int64],
    per_layer: npt.NDArray[np.int64],
    now: set[tuple[int, int]],
    slots: int,
) -> list[tuple[int, int, int]]:
    """The planner at a boundary (module docstring, step 2): per layer, the experts the draft
    routed to most (``counts``, ``[layers, experts]``) that are not resident, at most
    ``slots`` per layer and window (``per_layer`` counts the window's copies so far), each
    placed in the cache without evicting an expert copied in this window (``now``).

    Returns:
        The copies ``(layer, expert, slot)``; ``per_layer`` and ``now`` are updated.
    """
    batch: list[tuple[int, int, int]] = []
    for layer in range(counts.shape[0]):
        order = np.argsort(-counts[layer], kind="stable")[:slots]
        for e in (int(x) for x in order if counts[layer, x] > 0):
            if per_layer[layer] >= slots:
                break
            if e in cache.resident[layer]:
                continue
            protect = {x for (lx, x) in now if lx == layer}
            batch.append((layer, e, cache.insert(layer, e, protect)))
            now.add((layer, e))
            per_layer[layer] += 1
    return batch


def specter_decode(
    shape: MoEShape | None = None,
    model: SpecterModel | None = None,
    *,
    tokens: int = 32,
    seed: int = 0,
) -> SpecterResult:
    """A Specter decode run of at least ``tokens`` output tokens (module docstring).

    Args:
        shape: the MoE geometry (default DeepSeek-V2-Lite).
        model: generator and speculation knobs (default :class:`SpecterModel`).
        tokens: output tokens to produce (>= 1).
        seed: seed of every random draw (routes, draft errors, acceptance).

    Returns:
        :class:`SpecterResult`.
    """
    s, m = _resolve(shape, model, tokens)
    rng = np.random.default_rng(seed)
    k_d = m.draft_depth
    router = _Router(s, m, rng)
    pop = router.pop
    em = _Emitter(s, m, _workload(s, m, "specter", tokens, seed))
    cache = _new_cache(s, m, pop)
    bw_est, step_est = m.bw_guess_gb_per_s * 1e9, m.draft_step_us * 1e-6
    made = fwd = prefetched = demand = uses = 0
    used: set[tuple[int, int]] = set()
    accepted: list[int] = []
    while made < tokens:
        target = router.next(k_d + 1)
        draft = _draft_routes(target[:k_d], pop, m.recall, rng)
        counts = np.zeros((s.moe_layers, s.experts), dtype=np.int64)
        per_layer = np.zeros(s.moe_layers, dtype=np.int64)
        now: set[tuple[int, int]] = set()
        boundary = max(1, math.ceil(m.cold_start * k_d))
        for j in range(k_d):
            with em.tb.kernel("specter_draft_step", **em.kernel_ctas()) as kid:
                for layer in range(s.moe_layers):
                    ex = [("draft_experts", layer * s.experts + int(e)) for e in draft[j, layer]]
                    em.layer_reads(kid, layer, ex, 1)
            rec = em.record0()
            np.add.at(counts, (np.arange(s.moe_layers)[:, None], draft[j]), 1)
            if j + 1 != boundary or j + 1 == k_d:
                continue
            batch = _plan_prefetch(cache, counts, per_layer, now, m.slots)
            em.copy(batch, rec, "memcpy_h2d_expert_prefetch")
            moved = len(batch) * s.expert_bytes
            prefetched += len(batch)
            # EMA of what the runtime measures, then the next chunk of draft steps
            bw_est = m.ema_old * bw_est + (1 - m.ema_old) * m.link_gb_per_s * 1e9
            step_est = m.ema_old * step_est + (1 - m.ema_old) * m.draft_step_us * 1e-6
            boundary = j + 1 + max(1, math.ceil(moved / (bw_est * step_est)))
        for layer in range(s.moe_layers):
            needed = sorted({int(e) for e in target[:, layer].ravel()})
            uses += len(needed)
            demand += _verify_layer(
                em, cache, layer, needed, k_d + 1, "specter_verify_layer", now, used
            )
        n_acc = 0
        while n_acc < k_d and rng.random() < m.accept:
            n_acc += 1
        accepted.append(n_acc)
        made += n_acc + 1
        fwd += k_d + 1
    return SpecterResult(
        shape=s,
        model=m,
        mode="specter",
        tokens=made,
        forward_tokens=fwd,
        accepted=np.asarray(accepted, dtype=np.int64),
        prefetched=prefetched,
        prefetch_used=len(used),
        demand_misses=demand,
        expert_uses=uses,
        trace=_finish(em, made, prefetched, len(used), demand, uses, accepted),
    )


def specter_baseline(
    shape: MoEShape | None = None,
    model: SpecterModel | None = None,
    *,
    tokens: int = 32,
    seed: int = 0,
) -> SpecterResult:
    """The same slot cache without lookahead: one target token at a time, misses demand-loaded
    (LRU), from the same routing generator (``draft_depth``, ``recall`` and ``accept`` unused).

    Args:
        shape: the MoE geometry. model: the knobs. tokens: output tokens (>= 1). seed: seed.

    Returns:
        :class:`SpecterResult` (``accepted`` empty, ``prefetched`` 0).
    """
    s, m = _resolve(shape, model, tokens)
    rng = np.random.default_rng(seed)
    routes, pop = routing_trace(s, m, tokens, rng)
    em = _Emitter(s, m, _workload(s, m, "baseline", tokens, seed))
    cache = _new_cache(s, m, pop)
    demand = uses = 0
    for t in range(tokens):
        for layer in range(s.moe_layers):
            needed = sorted(int(e) for e in routes[t, layer])
            uses += len(needed)
            demand += _verify_layer(em, cache, layer, needed, 1, "moe_decode_layer", set(), set())
    return SpecterResult(
        shape=s,
        model=m,
        mode="baseline",
        tokens=tokens,
        forward_tokens=tokens,
        accepted=np.zeros(0, dtype=np.int64),
        prefetched=0,
        prefetch_used=0,
        demand_misses=demand,
        expert_uses=uses,
        trace=_finish(em, tokens, 0, 0, demand, uses, []),
    )


def _workload(s: MoEShape, m: SpecterModel, mode: str, tokens: int, seed: int) -> dict:
    return {
        "kernel": f"specter_{mode}",
        "mode": mode,
        "tokens_requested": tokens,
        "seed": seed,
        "moe": {k: getattr(s, k) for k in s.__dataclass_fields__},
        "expert_bytes": s.expert_bytes,
        "draft_expert_bytes": s.draft_expert_bytes,
        "specter": m.__dict__,
    }


def _finish(
    em: _Emitter,
    made: int,
    prefetched: int,
    used: int,
    demand: int,
    uses: int,
    accepted: list[int],
) -> Trace:
    """Build the trace with the run's figures as ``metrics`` ([value, unit])."""
    tr = em.tb.build()
    meta = dict(tr.meta)
    wl = dict(meta["workload"])
    wl["metrics"] = {
        "tokens": [made, "token"],
        "prefetched_experts": [prefetched, "expert"],
        "prefetch_precision": [used / prefetched if prefetched else 0.0, "1"],
        "demand_misses": [demand, "expert"],
        "demand_miss_rate": [demand / uses if uses else 0.0, "1"],
        "mean_accepted": [float(np.mean(accepted)) if accepted else 0.0, "token"],
    }
    meta["workload"] = wl
    return Trace(meta, compute=tr.compute, memory=tr.memory, sparsity=tr.sparsity, events=tr.events)
