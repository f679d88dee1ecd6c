"""Prefill of a model on a DeltaLLM FPGA design: cycle-approximate and analytical modes.

Both modes run the bit-exact reference's event path (:func:`coaccel.models.deltallm.column_events`)
on seeded synthetic q and k (:mod:`.keys`) for the simulated layers, then:

* **cycle**: per (layer, KV head) a DDR load (Q, exact K, Δ bitmask and values, V), the MAC
  array's work (:func:`.cycles.blocks_cycles` over the query blocks' column events, plus the
  exposed final normalisation) and the DDR write of O run on the shared engine
  (:func:`coaccel.sim.common.run_program`) with two buffer slots: the load of head ``k + 2``
  waits until head ``k`` has finished computing;
* **analytical**: the closed form of the same schedule, ``Σ_heads max(compute, memory)``, where
  compute counts each block's exact, delta and mixed columns from the window geometry, charges
  delta columns the measured mean ``ceil(nnz/M)`` and kept columns the PV cost times the
  measured kept-column fraction.

The TeLLMe-v2 engine (``engine: tellme_v2``) is the closed form of [TELLME2]'s prefill attention
loop (no reference run): per (query block, key) pair ``hidden / qk_elems_per_cycle`` cycles plus
``query_parallel · heads · softmax_ii_cycles``.

Linear layers (Q, K, V, O projections and the three FFN matrices) take ``T · MACs /
ternary_macs_per_cycle`` cycles per layer plus a fixed overhead, after the attention.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from coaccel.models.deltallm import ColumnEvents, DeltaEvents, column_events, head_dram_bytes
from coaccel.sim.common import OffchipAccess, QueueProgram, Queues, offchip, run_program
from coaccel.spine.config import ConfigError, Problem, config_digest
from coaccel.spine.workload import ModelShape, Workload

from .config import DeltaFpgaConfig
from .cycles import KIND_DELTA, KIND_EXACT, KIND_SKIPPED, block_constants, blocks_cycles
from .keys import layer_qk
from .resources import estimate_resources
from .result import DeltaFpgaResult
from .workload import deltallm_workload_problems

__all__ = ["MODES", "linear_macs_per_token", "simulate", "simulate_layer_events",
           "tellme_attention_cycles"]  # fmt: skip

MODES = ("analytical", "cycle")
_LOADS = ("Q", "K", "delta_mask", "delta_values", "V")
_QUEUES = Queues(("ddr", "mac_array"))


def linear_macs_per_token(model: ModelShape) -> float:
    """Weight MACs of one token through one layer's linear layers (the mean over layers).

    Args:
        model: the shape.

    Returns:
        ``hidden·(Hq·d) + 2·hidden·(Hkv·d) + (Hq·d)·hidden`` (Q, K, V and O projections) plus
        the MLP: ``3·hidden·intermediate`` for a dense layer (gate, up and down); for a
        mixture-of-experts layer the router (``hidden·experts``), the ``experts_per_token``
        routed experts of width ``expert_intermediate`` and the shared experts of width
        ``shared_expert_intermediate`` a token runs, averaged with the model's dense MLP
        layers (``dense_mlp_layers``) over all layers. MACs (a whole number for a dense
        model).
    """
    h, d = model.hidden, model.head_dim
    q = model.heads * d
    kv = model.kv_heads * d
    attn = h * q + 2 * h * kv + q * h
    dense = 3 * h * model.intermediate
    if not model.experts:
        return attn + dense
    moe = (
        h * model.experts
        + model.experts_per_token * 3 * h * model.expert_intermediate
        + model.shared_experts * 3 * h * model.shared_expert_intermediate
    )
    n_dense = len(model.dense_mlp_layers)
    return attn + (n_dense * dense + (model.layers - n_dense) * moe) / model.layers


def tellme_attention_cycles(arch: DeltaFpgaConfig, model: ModelShape, n_tokens: int) -> int:
    """Prefill attention cycles of one layer on the TeLLMe-v2 engine.

    Args:
        arch: a ``tellme_v2`` design.
        model: the shape.
        n_tokens: ``T``.

    Returns:
        ``ceil(pairs · (hidden / qk_elems_per_cycle + query_parallel · heads ·
        softmax_ii_cycles))`` with ``pairs = Σ_b (T - query_parallel·b)`` over the
        ``ceil(T / query_parallel)`` query blocks (each block streams its causal keys).
    """
    tm = arch.tellme
    if tm is None:
        raise ValueError("tellme_attention_cycles needs a tellme_v2 design")
    qp = tm.query_parallel
    nb = -(-n_tokens // qp)
    pairs = sum(n_tokens - qp * b for b in range(nb))
    per = model.hidden / tm.qk_elems_per_cycle + qp * model.heads * tm.softmax_ii_cycles
    return math.ceil(pairs * per)


def _problems(arch: DeltaFpgaConfig, wl: Workload) -> list[Problem]:
    m, sc = wl.model, wl.scenario
    where = wl.source or wl.label
    out = []
    if sc.phase != "prefill":
        msg = "the DeltaLLM FPGA simulator models prefill only"
        out.append(Problem(where, "scenario.phase", sc.phase, msg, "prefill"))
    out.extend(deltallm_workload_problems(wl))
    if arch.engine == "tellme_v2":
        return out
    g = m.heads // m.kv_heads
    if arch.datapath.lanes % g:
        out.append(Problem(arch.name, "datapath.lanes", arch.datapath.lanes,
                           f"lanes must be a multiple of the GQA group G = {g} of {wl.name} "
                           "(L = G x P_q)"))  # fmt: skip
    if sc.tokens > arch.buffers.max_tokens:
        out.append(Problem(arch.name, "buffers.max_tokens", arch.buffers.max_tokens,
                           f"{wl.label} has {sc.tokens} tokens; the Δ and V buffers hold "
                           f"{arch.buffers.max_tokens}"))  # fmt: skip
    if m.head_dim > arch.buffers.max_head_dim:
        out.append(Problem(arch.name, "buffers.max_head_dim", arch.buffers.max_head_dim,
                           f"{wl.name} has head_dim {m.head_dim}"))  # fmt: skip
    return out


def _simulated_layers(n_layers: int, wanted: int) -> list[int]:
    if wanted <= 0 or wanted >= n_layers:
        return list(range(n_layers))
    return sorted({round(i * (n_layers - 1) / max(wanted - 1, 1)) for i in range(wanted)})


def simulate_layer_events(arch: DeltaFpgaConfig, model: ModelShape, n_tokens: int,
                          layer: int) -> ColumnEvents:  # fmt: skip
    """The reference's column events of one synthetic layer under a design's algorithm.

    Args:
        arch: the design (``algorithm``, ``keys``, ``datapath.lanes``).
        model: the shape.
        n_tokens: ``T``.
        layer: layer index.

    Returns:
        The layer's :class:`~coaccel.models.deltallm.ColumnEvents`.
    """
    a = arch.algorithm
    q, sq, k, sk = layer_qk(model, n_tokens, layer, arch.keys)
    return column_events(
        q, k, theta=a.theta, window=a.window_tokens,
        tau=math.inf if a.tau_log2 is None else a.tau_log2, q_scale=sq, k_scale=sk,
        query_block=arch.datapath.lanes // (model.heads // model.kv_heads), n_sink=a.n_sink,
        delta_mode=a.delta_mode, refresh_period=a.refresh_period_tokens, order=a.order,
        layer=layer,
    )  # fmt: skip


def _head_memory(arch: DeltaFpgaConfig, ev: DeltaEvents) -> tuple[int, int, dict[str, int]]:
    """(load cycles, store cycles, bytes by tensor) of one (layer, KV head)."""
    nbytes = head_dram_bytes(ev)
    f = arch.freq_mhz
    load = int(offchip.transfer_cycles(arch.dram, f, [nbytes[t] for t in _LOADS]).sum())
    store = int(offchip.transfer_cycles(arch.dram, f, [nbytes["O"]]).sum())
    return load, store, nbytes


def _analytical_compute(arch: DeltaFpgaConfig, ev: DeltaEvents) -> int:
    """Closed-form MAC-array cycles of one (layer, KV head) from the window geometry and the
    measured mean delta cost and kept-column fraction (module docstring)."""
    m, exact_qk, pv, _, overhead = block_constants(arch, ev.head_dim, ev.value_dim)
    a = arch.algorithm
    t_n, p_q, w, ns = ev.n_tokens, ev.query_block, a.window_tokens, a.n_sink
    i0 = np.arange(0, t_n, p_q)
    i1 = np.minimum(i0 + p_q, t_n) - 1
    visited = i1 + 1
    lo = np.maximum(i0 - w + 1, ns)  # first non-sink column exact for some lane
    n_exact = np.minimum(ns, visited) + np.maximum(0, i1 - lo + 1)
    n_delta = np.maximum(0, i1 - w - ns + 1)  # columns j >= ns with j <= i1 - W
    keys = ev.nnz[ns:].astype(np.int64)
    mean_delta = float((-(-keys // m)).mean()) if keys.size else 0.0
    kinds = ev.kind
    n_visited = max(1, int(np.count_nonzero(kinds)))
    kept = 1.0 - int(np.count_nonzero(kinds & KIND_SKIPPED)) / n_visited
    per_block = n_exact * exact_qk + n_delta * mean_delta + visited * kept * pv + overhead
    return round(float(per_block.sum())) + arch.pipeline.normalize_cycles


def _activity(ev: DeltaEvents, lanes: int) -> dict[str, int]:
    """On-chip activity of one (layer, KV head): PV lane-MACs, softmax columns, normalised
    output elements (L·d_v per query block, padding lanes included), URAM and BRAM bytes read
    (Δ bitmask + packed 9-bit values of delta columns and V of kept columns from URAM; the q
    block and the exact keys from BRAM)."""
    k = ev.kind
    visited = k > 0
    kept = visited & ((k & KIND_SKIPPED) == 0)
    delta = (k & KIND_DELTA) > 0
    n_delta = delta.sum(axis=0)
    nnz = ev.nnz.astype(np.int64)
    mask_b = -(-ev.head_dim // 8)
    uram = int(n_delta @ (mask_b + (9 * nnz + 7) // 8)) + int(kept.sum()) * ev.value_dim
    bram = ev.n_blocks * lanes * ev.head_dim
    bram += int(np.count_nonzero(k & KIND_EXACT)) * ev.head_dim
    return dict(pv=lanes * ev.value_dim * int(kept.sum()), columns=int(visited.sum()),
                uram=uram, bram=bram, outputs=ev.n_blocks * lanes * ev.value_dim)  # fmt: skip


def _qk_issued(ev: DeltaEvents, lanes: int) -> int:
    """Lane-MACs the array issues for QK in one (layer, KV head): exact columns ``L·d``, delta
    columns ``L·nnz`` (mixed pay both)."""
    k = ev.kind
    exact = int(np.count_nonzero(k & KIND_EXACT)) * ev.head_dim
    delta = int(((k & KIND_DELTA) > 0).sum(axis=0) @ ev.nnz.astype(np.int64))
    return lanes * (exact + delta)


def simulate(arch: DeltaFpgaConfig, workload: Workload, *, mode: str = "cycle",
             engine: str = "fast") -> DeltaFpgaResult:  # fmt: skip
    """Simulate one prefill (module docstring).

    Args:
        arch: the design.
        workload: a prefill scenario of a model shape.
        mode: ``"cycle"`` or ``"analytical"``.
        engine: the cycle mode's event engine, ``"fast"`` (numba) or ``"simpy"``.

    Returns:
        The :class:`~.result.DeltaFpgaResult`.

    Raises:
        ConfigError: a decode scenario, lanes not a multiple of the GQA group, or a prompt or
            head larger than the buffers.
    """
    problems = _problems(arch, workload)
    if mode not in MODES:
        problems.append(Problem("<simulate>", "mode", mode, "unknown mode", ", ".join(MODES)))
    if problems:
        raise ConfigError(problems)
    model, t_n = workload.model, workload.scenario.tokens
    lin = linear_macs_per_token(model) * t_n / arch.linear.ternary_macs_per_cycle
    lin += arch.linear.layer_overhead_cycles
    linear_cycles = math.ceil(lin * model.layers)
    if arch.linear.lm_head:
        linear_cycles += math.ceil(model.hidden * model.vocab / arch.linear.ternary_macs_per_cycle)
    notes: list[str] = []
    if arch.engine == "tellme_v2":
        att = tellme_attention_cycles(arch, model, t_n) * model.layers
        notes.append("TeLLMe-v2 attention: closed form of its prefill loop, compute only "
                     "(DDR traffic assumed hidden)")  # fmt: skip
        return _result(arch, workload, mode, att, linear_cycles, att, 0, None, 0, notes, {})
    layers = _simulated_layers(model.layers, arch.keys.layers_simulated)
    lanes = arch.datapath.lanes
    comp, load, store, qk = [], [], [], 0
    act = dict(pv=0, columns=0, uram=0, bram=0, outputs=0)
    by_tensor: dict[str, int] = {}
    counts = dict(valid=0, fine=0, skipped=0, nz=0, rows=0, visited=0, skip_cols=0)
    for layer in layers:
        ce = simulate_layer_events(arch, model, t_n, layer)
        counts["valid"] += ce.valid_elements
        counts["fine"] += ce.fine_elements
        counts["skipped"] += ce.skipped_elements
        counts["nz"] += ce.delta_nonzeros
        counts["rows"] += (t_n - 1) * model.kv_heads * model.head_dim
        for ev in ce.events:
            if mode == "cycle":
                c = int(blocks_cycles(ev.kind, ev.nnz, arch, head_dim=ev.head_dim,
                                      value_dim=ev.value_dim).sum())  # fmt: skip
                comp.append(c + arch.pipeline.normalize_cycles)
            else:
                comp.append(_analytical_compute(arch, ev))
            ld, st, nbytes = _head_memory(arch, ev)
            load.append(ld)
            store.append(st)
            for key, v in nbytes.items():
                by_tensor[key] = by_tensor.get(key, 0) + v
            qk += _qk_issued(ev, lanes)
            for key, v in _activity(ev, lanes).items():
                act[key] += v
            counts["visited"] += int(np.count_nonzero(ev.kind))
            counts["skip_cols"] += int(np.count_nonzero(ev.kind & KIND_SKIPPED))
    lat = offchip.latency_cycles(arch.dram, arch.freq_mhz)
    if mode == "cycle":
        sim_cycles = double_buffered_cycles(arch, comp, load, store, lat, engine)
        notes.append(f"cycle mode on the shared engine ({engine}); two buffer slots per KV head")
    else:
        sim_cycles = lat + sum(max(c, ld + st) for c, ld, st in zip(comp, load, store,
                                                                    strict=True))  # fmt: skip
        notes.append("analytical mode: sum over KV heads of max(compute, memory)")
    scale = model.layers / len(layers)
    if len(layers) < model.layers:
        notes.append(f"reference run on layers {layers} of {model.layers}; cycles and bytes "
                     "scaled by the layer count")  # fmt: skip
    notes.append("synthetic AR(1) keys with RoPE (keys.*), not real model activations")
    dense_qk = model.heads * t_n * (t_n + 1) // 2 * model.head_dim * len(layers)
    stats = dict(
        delta_sparsity=1.0 - counts["nz"] / counts["rows"] if counts["rows"] else 0.0,
        fine_sparsity=counts["fine"] / counts["valid"],
        structured_sparsity=counts["skipped"] / counts["valid"],
        qk_mac_reduction=1.0 - qk / dense_qk,
        skipped_column_fraction=counts["skip_cols"] / max(1, counts["visited"]),
    )
    att = math.ceil(sim_cycles * scale)
    by_tensor = {k: round(v * scale) for k, v in by_tensor.items()}
    ops = dict(mac_operations=round((qk + act["pv"]) * scale),
               pv_operations=round(act["pv"] * scale),
               softmax_columns=round(act["columns"] * scale),
               normalized_outputs=round(act["outputs"] * scale),
               uram_read_bytes=round(act["uram"] * scale),
               bram_read_bytes=round(act["bram"] * scale))  # fmt: skip
    return _result(arch, workload, mode, att, linear_cycles, math.ceil(sum(comp) * scale),
                   math.ceil((sum(load) + sum(store)) * scale), stats, len(layers), notes,
                   by_tensor, ops)  # fmt: skip


def double_buffered_cycles(
    arch: DeltaFpgaConfig, comp: list[int], load: list[int], store: list[int], lat: int,
    engine: Any,
) -> int:  # fmt: skip
    """Units of work (heads) double-buffered on the DDR and MAC-array queues: unit ``k``'s
    load (``load[k]`` cycles plus the DRAM latency ``lat``), its compute (``comp[k]``) and its
    store (``store[k]``); the load of unit ``k + 2`` waits until unit ``k`` has computed (one
    slot when the Δ or V buffer is not double-buffered). Run on ``engine`` (``"fast"`` or
    ``"simpy"``, :func:`coaccel.sim.common.run_program`); returns the last completion, cycles."""
    n = len(comp)
    slots = 2 if (arch.buffers.delta.double_buffered and arch.buffers.v.double_buffered) else 1
    queue, occ, latency, dep = [], [], [], []
    pos_load, pos_comp = [0] * n, [0] * n

    def add(q: int, o: int, lt: int, d: int) -> int:
        queue.append(q)
        occ.append(o)
        latency.append(lt)
        dep.append(d)
        return len(queue) - 1

    ddr, mac = _QUEUES.index("ddr"), _QUEUES.index("mac_array")
    for k in range(min(slots, n)):
        pos_load[k] = add(ddr, load[k], lat, -1)
    for k in range(n):
        pos_comp[k] = add(mac, comp[k], 0, pos_load[k])
        add(ddr, store[k], 0, pos_comp[k])
        if k + slots < n:
            pos_load[k + slots] = add(ddr, load[k + slots], lat, pos_comp[k])
    prog = QueueProgram(
        queue=np.array(queue, dtype=np.int8),
        occupancy_cycles=np.array(occ, dtype=np.int64),
        latency_cycles=np.array(latency, dtype=np.int64),
        dep=np.array(dep, dtype=np.int64),
    )
    _, done = run_program(prog, queue_names=_QUEUES, engine=engine)
    return int(done.max()) if n else 0


def _result(arch: DeltaFpgaConfig, wl: Workload, mode: str, att: int, linear: int, compute: int,
            memory: int, stats: dict[str, float] | None, n_sim: int, notes: list[str],
            by_tensor: dict[str, int], ops: dict[str, int] | None = None
            ) -> DeltaFpgaResult:  # fmt: skip
    st = stats or dict(delta_sparsity=0.0, fine_sparsity=0.0, structured_sparsity=0.0,
                       qk_mac_reduction=0.0, skipped_column_fraction=0.0)  # fmt: skip
    total = att + linear
    reads = sum(v for k, v in by_tensor.items() if k != "O")
    writes = by_tensor.get("O", 0)
    return DeltaFpgaResult(
        target="deltallm_fpga",
        arch=arch.name,
        workload=wl.label,
        mode=mode,
        config_digest=config_digest(arch),
        freq_mhz=arch.freq_mhz,
        cycles=total,
        seconds=total / (arch.freq_mhz * 1e6),
        resources={"mac_array": {"busy": compute}, "ddr": {"busy": memory}},
        buffers={},
        offchip=OffchipAccess(
            reads=sum(1 for k in by_tensor if k != "O"),
            writes=1 if writes else 0,
            read_bytes=reads,
            write_bytes=writes,
            by_tensor=by_tensor,
        ),
        notes=tuple(notes),
        engine=arch.engine,
        tokens=wl.scenario.tokens,
        layers=wl.model.layers,
        layers_simulated=n_sim,
        attention_cycles=att,
        linear_cycles=linear,
        attention_compute_cycles=compute,
        attention_memory_cycles=memory,
        fpga_resources=estimate_resources(arch),
        delta_sparsity=st["delta_sparsity"],
        fine_sparsity=st["fine_sparsity"],
        structured_sparsity=st["structured_sparsity"],
        qk_mac_reduction=st["qk_mac_reduction"],
        skipped_column_fraction=st["skipped_column_fraction"],
        mac_operations=(ops or {}).get("mac_operations", 0),
        pv_operations=(ops or {}).get("pv_operations", 0),
        softmax_columns=(ops or {}).get("softmax_columns", 0),
        normalized_outputs=(ops or {}).get("normalized_outputs", 0),
        uram_read_bytes=(ops or {}).get("uram_read_bytes", 0),
        bram_read_bytes=(ops or {}).get("bram_read_bytes", 0),
    )
