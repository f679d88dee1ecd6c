"""The HBQ ASIC simulator's side of a workload: its tiles and reference traces on an architecture.

The workload itself (model shape, scenarios, the files in ``arch_configs/workloads/``,
:func:`load_workload`) lives in :mod:`coaccel.workload`, shared by every simulator; the names
re-exported here (:class:`Workload`, :class:`WorkloadConfig`, :func:`load_workload`,
:func:`workload_path`, :data:`WORKLOAD_NAMES`) are the same objects. :func:`workload_segments`
asks the reference (:func:`coaccel.models.hbq.iter_transformer_segments`) for the traces of a
workload on an architecture's tiles; the simulator consumes only those traces. It models dense
decoder-only transformers at batch 1 and refuses other workloads (:func:`check_hbq_workload`).
"""

from __future__ import annotations

from collections.abc import Iterator

from coaccel.models.hbq import TraceSegment, WorkloadTiles, iter_transformer_segments
from coaccel.spine.config import ConfigError, Problem, config_digest
from coaccel.spine.workload import (
    WORKLOAD_NAMES,
    Workload,
    WorkloadConfig,
    load_workload,
    workload_path,
)

from .config import HbqArchConfig, attention_tiles, operand_format, tile_plan

__all__ = [
    "WORKLOAD_NAMES",
    "Workload",
    "WorkloadConfig",
    "check_hbq_workload",
    "iter_workload_segments",
    "load_workload",
    "workload_path",
    "workload_segments",
    "workload_tiles",
]


def check_hbq_workload(workload: Workload) -> None:
    """Refuse a workload the HBQ ASIC simulator does not model.

    It models one dense decoder-only transformer at batch 1. A mixture-of-experts model would
    need expert routing (which experts' weights each token reads), and a batch would change
    every GEMM's token count and the KV cache traffic; neither is simulated, and treating such
    a workload as dense batch 1 would report wrong numbers.

    Args:
        workload: the workload.

    Raises:
        ConfigError: batch above 1 or an MoE model, naming the workload file and key; also
            multi-head latent attention, an MLP without a gate, or a scenario longer than a
            sliding attention window (:func:`_layout_problems`).
    """
    problems = []
    sc = workload.scenario
    where = workload.source or workload.name
    if sc.batch != 1:
        problems.append(
            Problem(
                where,
                f"scenarios.{workload.scenario_name}.batch",
                sc.batch,
                f"the HBQ ASIC simulator runs batch 1 only (got batch {sc.batch}); use a "
                "scenario with batch 1",
                "1",
            )
        )
    m = workload.model
    if m.is_moe:
        problems.append(
            Problem(
                where,
                "model.experts",
                m.experts,
                f"{workload.name!r} is a mixture-of-experts model ({m.experts} experts, top-"
                f"{m.experts_per_token}); the HBQ ASIC simulator models dense MLPs only",
                "0",
            )
        )
    problems += _layout_problems(workload, where)
    if problems:
        raise ConfigError(problems)


def _layout_problems(workload: Workload, where: str) -> list[Problem]:
    """What the transformer trace (:func:`coaccel.models.hbq.iter_transformer_segments`) does
    not model: multi-head latent attention (it caches and reads K and V per KV head), an MLP
    without a gate (its MLP is a fused gate/up GEMM with a SwiGLU epilogue), and attention
    windows shorter than the scenario (it attends to every earlier token)."""
    m, sc = workload.model, workload.scenario
    out = []
    if m.is_mla:
        msg = (
            f"{workload.name!r} uses multi-head latent attention (a cached latent of "
            f"kv_lora_rank {m.kv_lora_rank} per token and layer); the HBQ ASIC simulator models "
            "K and V caches per KV head (GQA) only"
        )
        out.append(Problem(where, "model.attention", m.attention, msg, "gqa"))
    if m.mlp != "gated":
        msg = (
            f"{workload.name!r} has a {m.mlp} MLP (up and down, no gate); the HBQ ASIC "
            "simulator models gated MLPs (gate/up with SwiGLU, then down) only"
        )
        out.append(Problem(where, "model.mlp", m.mlp, msg, "gated"))
    window = m.sliding_window_tokens
    if window and sc.positions > window:
        msg = (
            f"{len(m.sliding_window_layers)} layers of {workload.name!r} attend within a "
            f"{window}-token window and the scenario reaches {sc.positions} positions; the HBQ "
            f"ASIC simulator models full causal attention only: use a scenario of at most "
            f"{window} positions"
        )
        key = f"scenarios.{workload.scenario_name}.tokens"
        out.append(Problem(where, key, sc.tokens, msg, f"at most {window} positions"))
    return out


def workload_tiles(arch: HbqArchConfig, workload: Workload) -> WorkloadTiles:
    """The tiles of ``workload`` on ``arch`` (linear tiles from the buffers, attention tiles
    from the buffers and the head size).

    Raises:
        ConfigError: the attention tiles do not fit, or the simulator does not model the
            workload (:func:`check_hbq_workload`).
    """
    check_hbq_workload(workload)
    plan = tile_plan(arch)
    m = workload.model
    rows, keys = attention_tiles(
        arch,
        head_dim=m.head_dim,
        group=m.group,
        kv_quantized=workload.scenario.kv_quant,
    )
    return WorkloadTiles(
        tile_m=plan.tile_m,
        tile_n=plan.tile_n,
        tile_k=plan.tile_k,
        n_buffers=plan.n_buffers,
        attn_rows=rows,
        attn_keys=keys,
        psum_mode=arch.psum.mode,
        sa_n=arch.psum.block_elems,
        act_resident_bits=arch.buffers.act.size_bytes * 8 if arch.tiling.act_resident else None,
    )


def iter_workload_segments(arch: HbqArchConfig, workload: Workload) -> Iterator[TraceSegment]:
    """The reference traces of ``workload`` on ``arch``, one segment at a time (one layer's
    GEMMs and attention, marked to repeat ``layers`` times, then the LM head; per decode step).

    Args:
        arch: the architecture (formats and tiles).
        workload: the workload.

    Returns:
        An iterator over the segments of
        :func:`coaccel.models.hbq.iter_transformer_segments`; each trace is built on demand.

    Raises:
        ConfigError: as :func:`workload_tiles`.
    """
    sc = workload.scenario
    return iter_transformer_segments(
        workload.model,
        phase=sc.phase,
        tokens=sc.tokens,
        decode_steps=sc.decode_steps,
        fmt_weight=operand_format(arch, "weight"),
        fmt_act=operand_format(arch, "activation"),
        fmt_kv=operand_format(arch, "kv", quantized=sc.kv_quant),
        tiles=workload_tiles(arch, workload),
        causal=sc.causal_tile_skip,
        lm_head=sc.lm_head,
        workload={"model": workload.name, "scenario": workload.scenario_name, "arch": arch.name},
        config_digest=config_digest(arch),
    )


def workload_segments(arch: HbqArchConfig, workload: Workload) -> tuple[TraceSegment, ...]:
    """All segments of :func:`iter_workload_segments`, as a tuple (every trace in memory)."""
    return tuple(iter_workload_segments(arch, workload))
