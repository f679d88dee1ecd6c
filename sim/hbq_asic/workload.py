"""Workloads of the HBQ ASIC simulator: model shapes and scenarios, turned into reference traces.

A workload file (``arch_configs/workloads/<model>.yaml``, schema :class:`WorkloadConfig`) holds
one model's shape (with the source of every number) and its scenarios (prefill at 1K/2K/4K/16K
tokens, decode steps). :func:`load_workload` picks one scenario and returns a :class:`Workload`;
:func:`workload_segments` asks the reference (:func:`coaccel.models.hbq.transformer_segments`)
for the traces of that workload on an architecture's tiles. The simulator consumes only those
traces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from coaccel.config import ConfigError, FrozenMap, Problem, config_digest, load_config, param
from coaccel.models.hbq import (
    TraceSegment,
    TransformerShape,
    WorkloadTiles,
    iter_transformer_segments,
)

from .config import HbqArchConfig, attention_tiles, operand_format, tile_plan

__all__ = [
    "WORKLOAD_NAMES",
    "ModelShapeConfig",
    "ScenarioConfig",
    "Workload",
    "WorkloadConfig",
    "iter_workload_segments",
    "load_workload",
    "workload_path",
    "workload_segments",
    "workload_tiles",
]

WORKLOAD_NAMES: tuple[str, ...] = (
    "llama-2-7b",
    "llama-3-8b",
    "llama-3.2-3b",
    "qwen2.5-3b",
    "qwen2.5-7b",
)
"""The models shipped in ``arch_configs/workloads/`` (``<name>.yaml``)."""


@dataclass(frozen=True)
class ModelShapeConfig:
    """A decoder-only transformer's shape (the fields of its Hugging Face ``config.json``).

    Attributes:
        hidden: ``hidden_size``. intermediate: ``intermediate_size``.
        layers: ``num_hidden_layers``. heads: ``num_attention_heads``.
        kv_heads: ``num_key_value_heads``. head_dim: ``head_dim`` (or hidden / heads).
        vocab: ``vocab_size``. max_position_embeddings: trained context length.
        tie_word_embeddings: the LM head shares the embedding matrix (it is still a GEMM).
    """

    hidden: int = param(ge=1, doc="hidden_size")
    intermediate: int = param(ge=1, doc="intermediate_size")
    layers: int = param(ge=1, doc="num_hidden_layers")
    heads: int = param(ge=1, doc="num_attention_heads")
    kv_heads: int = param(ge=1, doc="num_key_value_heads")
    head_dim: int = param(ge=1, doc="head_dim")
    vocab: int = param(ge=1, doc="vocab_size")
    max_position_embeddings: int = param(ge=1, doc="trained context length")
    tie_word_embeddings: bool = param(default=False, doc="LM head tied to the embeddings")

    def validate(self) -> list[Problem | str]:
        """Heads divide into KV groups."""
        if self.heads % self.kv_heads:
            return [
                Problem(
                    "",
                    "kv_heads",
                    self.kv_heads,
                    f"heads={self.heads} must be a multiple of kv_heads={self.kv_heads}",
                )
            ]
        return []

    def shape(self) -> TransformerShape:
        """The reference's :class:`~coaccel.models.hbq.TransformerShape`."""
        return TransformerShape(
            self.hidden,
            self.intermediate,
            self.layers,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.vocab,
        )


@dataclass(frozen=True)
class ScenarioConfig:
    """One inference scenario (batch 1).

    Attributes:
        phase: ``prefill`` (process ``tokens`` prompt tokens) or ``decode``.
        tokens: prompt tokens (prefill) or tokens already in the KV cache (decode).
        decode_steps: decode steps, one token each (decode only; step ``s`` attends
            ``tokens + s + 1`` keys).
        kv_quant: KV cache in the architecture's KV format (True) or FP16.
        causal_tile_skip: skip attention tiles the causal mask hides entirely.
        lm_head: logits for ``all_tokens`` (the [R-PM] accounting), the ``last_token`` only,
            or ``none``.
    """

    phase: Literal["prefill", "decode"] = param(doc="prefill or decode")
    tokens: int = param(ge=1, doc="prompt or context tokens")
    decode_steps: int = param(default=1, ge=1, doc="decode steps")
    kv_quant: bool = param(default=True, doc="quantized KV cache")
    causal_tile_skip: bool = param(default=True, doc="skip fully masked attention tiles")
    lm_head: Literal["all_tokens", "last_token", "none"] = param(
        default="all_tokens", doc="which logits are computed"
    )

    def validate(self) -> list[Problem | str]:
        """``decode_steps`` only means something for decode."""
        if self.phase == "prefill" and self.decode_steps != 1:
            return [
                Problem("", "decode_steps", self.decode_steps, "prefill has no decode steps (1)")
            ]
        return []


@dataclass(frozen=True)
class WorkloadConfig:
    """A model and its scenarios (``arch_configs/workloads/<name>.yaml``).

    Attributes:
        name: model name (``llama-3-8b``).
        model: the shape.
        scenarios: scenario name -> scenario.
        default_scenario: the scenario used when none is named.
        sources: provenance of the shape, keyed by field (``model.hidden``).
    """

    VERSION: ClassVar[int] = 1

    name: str = param(doc="model name")
    model: ModelShapeConfig = param(doc="model shape")
    scenarios: Mapping[str, ScenarioConfig] = param(doc="scenarios by name")
    default_scenario: str = param(doc="scenario used by default")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """The default scenario exists; sources name model fields."""
        out: list[Problem | str] = []
        if self.default_scenario not in self.scenarios:
            out.append(
                Problem(
                    "",
                    "default_scenario",
                    self.default_scenario,
                    f"no scenario {self.default_scenario!r}; scenarios: "
                    f"{', '.join(self.scenarios)}",
                )
            )
        fields = {f"model.{f}" for f in ModelShapeConfig.__dataclass_fields__}
        for key in self.sources:
            if key not in fields:
                out.append(
                    Problem("", f"sources.{key}", key, f"not a model field; fields: "
                            f"{', '.join(sorted(fields))}")
                )  # fmt: skip
        return out


@dataclass(frozen=True)
class Workload:
    """One scenario of one model: what :func:`~coaccel.sim.hbq_asic.simulate` takes.

    Attributes:
        name: model name. scenario_name: scenario name.
        model: the shape. scenario: the scenario.
        digest: :func:`coaccel.config.config_digest` of the workload file.
    """

    name: str
    scenario_name: str
    model: ModelShapeConfig
    scenario: ScenarioConfig
    digest: str

    @property
    def label(self) -> str:
        """``"<model>:<scenario>"``."""
        return f"{self.name}:{self.scenario_name}"


def workload_path(name: str | Path) -> Path:
    """The file of a workload: a shipped model name (``"llama-3-8b"``) or a path."""
    from coaccel.arch_configs import path as shipped

    text = str(name)
    stem = text[:-5] if text.endswith(".yaml") else text
    if stem in WORKLOAD_NAMES and not Path(text).exists():
        return shipped(f"workloads/{stem}.yaml")
    return Path(text)


def load_workload(name: str | Path | WorkloadConfig, scenario: str | None = None) -> Workload:
    """Load a workload and pick a scenario.

    Args:
        name: a shipped model name (:data:`WORKLOAD_NAMES`), ``"<model>:<scenario>"``, a YAML
            path, or an already loaded :class:`WorkloadConfig`.
        scenario: scenario name (default: the one after ``:`` in ``name``, else the file's
            ``default_scenario``).

    Returns:
        The :class:`Workload`.

    Raises:
        ConfigError: problems of the file, or an unknown scenario.
    """
    if isinstance(name, WorkloadConfig):
        cfg = name
        source = cfg.name
    else:
        text = str(name)
        if scenario is None and ":" in text and not Path(text).exists():
            text, scenario = text.rsplit(":", 1)
        path = workload_path(text)
        cfg = load_config(path, WorkloadConfig)
        source = str(path)
    scen = scenario if scenario is not None else cfg.default_scenario
    if scen not in cfg.scenarios:
        raise ConfigError(
            [
                Problem(
                    source,
                    "scenarios",
                    scen,
                    f"no scenario {scen!r} in workload {cfg.name!r}; scenarios: "
                    f"{', '.join(cfg.scenarios)}",
                )
            ]
        )
    return Workload(cfg.name, scen, cfg.model, cfg.scenarios[scen], config_digest(cfg))


def workload_tiles(arch: HbqArchConfig, workload: Workload) -> WorkloadTiles:
    """The tiles of ``workload`` on ``arch`` (linear tiles from the buffers, attention tiles
    from the buffers and the head size).

    Raises:
        ConfigError: the attention tiles do not fit.
    """
    plan = tile_plan(arch)
    m = workload.model
    rows, keys = attention_tiles(
        arch,
        head_dim=m.head_dim,
        group=m.heads // m.kv_heads,
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
    """
    sc = workload.scenario
    return iter_transformer_segments(
        workload.model.shape(),
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
    )


def workload_segments(arch: HbqArchConfig, workload: Workload) -> tuple[TraceSegment, ...]:
    """All segments of :func:`iter_workload_segments`, as a tuple (every trace in memory)."""
    return tuple(iter_workload_segments(arch, workload))
