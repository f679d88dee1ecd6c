"""Workloads: a model's shape and the inference scenarios run on it, one description for all.

A workload file (``arch_configs/workloads/<model>.yaml``, schema :class:`WorkloadConfig`) holds
one decoder-only transformer's shape (:class:`ModelShape`, the fields of its Hugging Face
``config.json``, with the source of every number) and named scenarios (:class:`ScenarioConfig`:
prefill of a prompt, or decode steps after a context). :func:`load_workload` picks one scenario
and returns a :class:`Workload`. The bit-exact references take a :class:`ModelShape`; each
simulator turns a :class:`Workload` into its own traces and refuses, with a
:class:`~coaccel.config.ConfigError`, what it does not model (the HBQ ASIC simulator, for
instance, runs dense models at batch 1).

Public: :class:`ModelShape`, :class:`RopeScaling`, :class:`ScenarioConfig`,
:class:`WorkloadConfig`, :class:`Workload`, :func:`load_workload`, :func:`workload_path`,
:data:`WORKLOAD_NAMES`.

See ``docs/config.md`` ("Workloads") and ``docs/hbq_sim.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from importlib.resources import files
from pathlib import Path
from typing import ClassVar, Literal

from .config import ConfigError, FrozenMap, Problem, config_digest, load_config, param

__all__ = [
    "WORKLOAD_NAMES",
    "ModelShape",
    "RopeScaling",
    "ScenarioConfig",
    "Workload",
    "WorkloadConfig",
    "load_workload",
    "workload_path",
]

_WORKLOAD_DIR = "workloads"


def _shipped_dir() -> Path:
    return Path(str(files("coaccel.arch_configs").joinpath(_WORKLOAD_DIR)))


def _shipped_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in _shipped_dir().glob("*.yaml")))


WORKLOAD_NAMES: tuple[str, ...] = _shipped_names()
"""The workloads shipped in ``arch_configs/workloads/`` (``<name>.yaml``), sorted; read from
that folder when coaccel is imported, so adding a file adds a name."""


# ---------------------------------------------------------------------------------------------
# Model shape

RopeType = Literal["llama3", "linear", "dynamic", "yarn"]


@dataclass(frozen=True)
class RopeScaling:
    """RoPE context extension (``config.json``'s ``rope_scaling``).

    Attributes:
        type: ``rope_type`` (``type`` in older files): ``llama3`` (Llama 3.1/3.2 frequency-band
            rescaling), ``linear`` (position interpolation), ``dynamic`` (dynamic NTK),
            ``yarn``.
        factor: context extension factor (>= 1).
        original_max_position_embeddings: the context the model was pre-trained at, tokens.
        low_freq_factor: ``llama3`` only: wavelengths above
            ``original_max_position_embeddings / low_freq_factor`` are divided by ``factor``.
        high_freq_factor: ``llama3`` only: wavelengths below
            ``original_max_position_embeddings / high_freq_factor`` are kept; those between the
            two bounds are interpolated.
    """

    type: RopeType = param(doc="rope_scaling.rope_type")
    factor: float = param(ge=1, doc="rope_scaling.factor")
    original_max_position_embeddings: int | None = param(
        default=None, ge=1, doc="rope_scaling.original_max_position_embeddings"
    )
    low_freq_factor: float | None = param(default=None, gt=0, doc="rope_scaling.low_freq_factor")
    high_freq_factor: float | None = param(default=None, gt=0, doc="rope_scaling.high_freq_factor")

    def validate(self) -> list[Problem | str]:
        """``llama3`` needs both frequency factors (high above low) and the original context;
        the other types take no frequency factors."""
        out: list[Problem | str] = []
        bands = ("low_freq_factor", "high_freq_factor")
        if self.type == "llama3":
            for key in (*bands, "original_max_position_embeddings"):
                if getattr(self, key) is None:
                    out.append(Problem("", key, None, "required for rope type 'llama3'"))
            low, high = self.low_freq_factor, self.high_freq_factor
            if low is not None and high is not None and not high > low:
                out.append(
                    Problem(
                        "",
                        "high_freq_factor",
                        high,
                        f"high_freq_factor={high} must be above low_freq_factor={low}",
                    )
                )
        else:
            for key in bands:
                if getattr(self, key) is not None:
                    out.append(
                        Problem(
                            "",
                            key,
                            getattr(self, key),
                            f"only rope type 'llama3' has {key} (this one is {self.type!r})",
                        )
                    )
        return out


_POSITIVE_INT = ("hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim", "vocab",
                 "max_position_embeddings")  # fmt: skip
_MOE_FIELDS = ("experts", "experts_per_token", "expert_intermediate", "shared_experts",
               "shared_expert_intermediate")  # fmt: skip
_LAYOUT_INT = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window_tokens")  # fmt: skip
_LAYER_LISTS = ("dense_mlp_layers", "sliding_window_layers")


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's shape, as its Hugging Face ``config.json`` gives it.

    Loaded from a workload file's ``model:`` section, or built directly (the references take
    it). Field ranges are checked when it is built; rules between fields (:meth:`validate`)
    when a file is loaded, and :attr:`group` checks that the heads divide into KV groups.

    Attributes:
        hidden: ``hidden_size``, the model width E.
        intermediate: ``intermediate_size``, the dense MLP width M (gate/up outputs, down
            inputs). For an MoE model, the value ``config.json`` gives (its expert widths are
            ``expert_intermediate`` and ``shared_expert_intermediate``).
        layers: ``num_hidden_layers``.
        heads: ``num_attention_heads`` (query heads).
        kv_heads: ``num_key_value_heads`` (GQA; equal to ``heads`` for multi-head attention).
        head_dim: ``head_dim``, elements per head (``hidden / heads`` where the file has none).
        vocab: ``vocab_size`` (the LM head's output channels).
        max_position_embeddings: the longest sequence the model supports, tokens.
        tie_word_embeddings: the LM head shares the embedding matrix (it is still a GEMM).
        rope_theta: RoPE base.
        rope_scaling: RoPE context extension, or None.
        experts: ``num_experts``, routed experts per MoE layer (0: a dense model).
        experts_per_token: ``num_experts_per_tok``, the router's top-k (0 for dense).
        expert_intermediate: ``moe_intermediate_size``, one routed expert's MLP width.
        shared_experts: experts every token runs besides the routed ones.
        shared_expert_intermediate: one shared expert's MLP width
            (``shared_expert_intermediate_size``).
        attention: ``gqa`` (one K and one V vector of ``head_dim`` per KV head and token;
            multi-head and multi-query attention included) or ``mla`` (DeepSeek's multi-head
            latent attention: the cache holds one latent of ``kv_lora_rank`` plus one shared
            RoPE key of ``qk_rope_head_dim`` per token and layer; ``head_dim`` is then the query
            and key width per head, ``qk_nope_head_dim + qk_rope_head_dim``).
        kv_lora_rank: MLA's compressed KV width (0 for ``gqa``).
        q_lora_rank: MLA's query low-rank width (0: a full-rank query projection).
        qk_rope_head_dim: MLA's decoupled RoPE key width (0 for ``gqa``).
        v_head_dim: MLA's value width per head (0 for ``gqa``).
        mlp: ``gated`` (gate, up and down matrices: SwiGLU / GeGLU) or ``plain`` (up and down
            with an activation between, GPT-NeoX).
        dense_mlp_layers: an MoE model's layers (0-based) whose MLP is dense, of width
            ``intermediate`` (DeepSeek's ``first_k_dense_replace``, Qwen-MoE's
            ``mlp_only_layers``); the others are MoE layers.
        sliding_window_tokens: the sliding attention window, tokens (0: every layer attends
            to all earlier tokens).
        sliding_window_layers: the layers (0-based) that attend within the window.
    """

    # Upper bounds far above any published model (hidden 2^20, 4,096 layers or heads, a
    # 16 M-token vocabulary or context), so that a typo is refused before a simulator sizes
    # its work by it.
    hidden: int = param(ge=1, le=2**20, doc="hidden_size")
    intermediate: int = param(ge=1, le=2**22, doc="intermediate_size")
    layers: int = param(ge=1, le=2**12, doc="num_hidden_layers")
    heads: int = param(ge=1, le=2**12, doc="num_attention_heads")
    kv_heads: int = param(ge=1, le=2**12, doc="num_key_value_heads")
    head_dim: int = param(
        ge=1, le=2**12, doc="head_dim (hidden_size / num_attention_heads if absent)"
    )
    vocab: int = param(ge=1, le=2**24, doc="vocab_size")
    max_position_embeddings: int = param(ge=1, le=2**24, doc="longest supported sequence, tokens")
    tie_word_embeddings: bool = param(default=False, doc="LM head tied to the embeddings")
    rope_theta: float = param(default=10000.0, gt=0, doc="RoPE base")
    rope_scaling: RopeScaling | None = param(default=None, doc="RoPE context extension")
    experts: int = param(default=0, ge=0, le=2**14, doc="num_experts (0: dense)")
    experts_per_token: int = param(default=0, ge=0, le=2**10, doc="num_experts_per_tok (top-k)")
    expert_intermediate: int = param(default=0, ge=0, le=2**22, doc="moe_intermediate_size")
    shared_experts: int = param(default=0, ge=0, le=2**10, doc="shared experts per MoE layer")
    shared_expert_intermediate: int = param(default=0, ge=0, doc="shared_expert_intermediate_size")
    attention: Literal["gqa", "mla"] = param(default="gqa", doc="gqa or mla (latent KV cache)")
    kv_lora_rank: int = param(default=0, ge=0, doc="kv_lora_rank (MLA)")
    q_lora_rank: int = param(default=0, ge=0, doc="q_lora_rank (MLA; 0: full-rank q_proj)")
    qk_rope_head_dim: int = param(default=0, ge=0, doc="qk_rope_head_dim (MLA)")
    v_head_dim: int = param(default=0, ge=0, doc="v_head_dim (MLA)")
    mlp: Literal["gated", "plain"] = param(default="gated", doc="gated or plain MLP")
    dense_mlp_layers: tuple[int, ...] = param(default=(), ge=0, doc="dense MLP layers of an MoE")
    sliding_window_tokens: int = param(default=0, ge=0, doc="sliding_window (0: none)")
    sliding_window_layers: tuple[int, ...] = param(default=(), ge=0, doc="sliding-window layers")

    def __post_init__(self) -> None:
        for name in (*_POSITIVE_INT, *_MOE_FIELDS, *_LAYOUT_INT):
            v = getattr(self, name)
            low = 1 if name in _POSITIVE_INT else 0
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise ValueError(f"ModelShape.{name}={v!r} must be an integer >= {low}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(
                f"ModelShape.tie_word_embeddings={self.tie_word_embeddings!r} must be a bool"
            )
        theta = self.rope_theta
        if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not theta > 0:
            raise ValueError(f"ModelShape.rope_theta={theta!r} must be a number > 0")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            raise ValueError(
                f"ModelShape.rope_scaling={self.rope_scaling!r} must be a RopeScaling or None"
            )
        for name in _LAYER_LISTS:
            v = getattr(self, name)
            if isinstance(v, (str, bytes)) or not all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool) and i >= 0 for i in v
            ):
                raise ValueError(f"ModelShape.{name}={v!r} must be layer indices (integers >= 0)")
            object.__setattr__(self, name, tuple(int(i) for i in v))

    def validate(self) -> list[Problem | str]:
        """Rules between fields: KV groups, MoE consistency, RoPE scaling within the context."""
        out: list[Problem | str] = []
        if self.heads % self.kv_heads:
            out.append(
                Problem(
                    "",
                    "kv_heads",
                    self.kv_heads,
                    f"heads={self.heads} must be a multiple of kv_heads={self.kv_heads}",
                )
            )
        if self.experts == 0:
            for key in _MOE_FIELDS[1:]:
                v = getattr(self, key)
                if v:
                    out.append(
                        Problem("", key, v, f"{key}={v} needs routed experts (experts is 0)")
                    )
        else:
            if not 1 <= self.experts_per_token <= self.experts:
                out.append(
                    Problem(
                        "",
                        "experts_per_token",
                        self.experts_per_token,
                        f"experts_per_token={self.experts_per_token} must be in "
                        f"[1, experts={self.experts}]",
                    )
                )
            if self.expert_intermediate < 1:
                out.append(
                    Problem(
                        "",
                        "expert_intermediate",
                        self.expert_intermediate,
                        "an MoE model needs expert_intermediate >= 1",
                    )
                )
        if bool(self.shared_experts) != bool(self.shared_expert_intermediate):
            out.append(
                Problem(
                    "",
                    "shared_expert_intermediate",
                    self.shared_expert_intermediate,
                    f"shared_experts={self.shared_experts} and shared_expert_intermediate="
                    f"{self.shared_expert_intermediate} must both be 0 or both be positive",
                )
            )
        rs = self.rope_scaling
        if rs is not None and rs.original_max_position_embeddings is not None:
            if rs.original_max_position_embeddings > self.max_position_embeddings:
                out.append(
                    Problem(
                        "",
                        "rope_scaling.original_max_position_embeddings",
                        rs.original_max_position_embeddings,
                        f"the pre-training context {rs.original_max_position_embeddings} "
                        f"exceeds max_position_embeddings={self.max_position_embeddings}",
                    )
                )
        out.extend(self._layout_problems())
        return out

    def _layout_problems(self) -> list[Problem | str]:
        """MLA fields only with ``attention: mla`` (and all of them then); dense MLP layers only
        in an MoE model; window and windowed layers together; layer indices below ``layers``,
        ascending, without repeats."""
        out: list[Problem | str] = []
        mla = ("kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
        if self.attention == "mla":
            for key in mla:
                if getattr(self, key) < 1:
                    out.append(Problem("", key, getattr(self, key), "MLA needs it >= 1"))
            if self.head_dim <= self.qk_rope_head_dim:
                msg = (
                    "MLA's head_dim (qk_nope_head_dim + qk_rope_head_dim) must exceed "
                    f"qk_rope_head_dim={self.qk_rope_head_dim}"
                )
                out.append(Problem("", "head_dim", self.head_dim, msg))
        else:
            for key in (*mla, "q_lora_rank"):
                if getattr(self, key):
                    out.append(Problem("", key, getattr(self, key), "only attention: mla has it"))
        if self.dense_mlp_layers and not self.experts:
            msg = "only an MoE model (experts > 0) has dense MLP layers"
            out.append(Problem("", "dense_mlp_layers", list(self.dense_mlp_layers), msg))
        if bool(self.sliding_window_tokens) != bool(self.sliding_window_layers):
            msg = (
                f"sliding_window_tokens={self.sliding_window_tokens} and sliding_window_layers "
                "must both be set or both be empty"
            )
            out.append(Problem("", "sliding_window_layers", list(self.sliding_window_layers), msg))
        for name in _LAYER_LISTS:
            v = getattr(self, name)
            if any(i >= self.layers for i in v) or list(v) != sorted(set(v)):
                msg = f"layer indices must ascend, without repeats, below layers={self.layers}"
                out.append(Problem("", name, list(v), msg))
        return out

    @property
    def q_dim(self) -> int:
        """Query width, ``heads x head_dim`` elements."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Key (or value) width, ``kv_heads x head_dim`` elements."""
        return self.kv_heads * self.head_dim

    @property
    def group(self) -> int:
        """Query heads per KV head (the GQA group G).

        Raises:
            ValueError: ``heads`` is not a multiple of ``kv_heads``.
        """
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} must be a multiple of kv_heads={self.kv_heads}")
        return self.heads // self.kv_heads

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of experts (``experts > 0``)."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (``attention == "mla"``)."""
        return self.attention == "mla"

    def kv_bytes_per_token_per_layer(self, bits_per_element: int | Fraction = 16) -> Fraction:
        """Bytes of K and V cache one token adds to one layer: ``2 x kv_dim x bits / 8``.

        An MLA model caches its compressed latent and the shared RoPE key instead:
        ``(kv_lora_rank + qk_rope_head_dim) x bits / 8``. A sliding-window layer counts in full
        (the bytes a token adds, not the window's bound on the cache).

        Args:
            bits_per_element: storage bits per cached element (16 for FP16/BF16; a block
                format's effective bits, e.g. ``Fraction(33, 8)``, include its scales).

        Returns:
            Bytes, exact (a :class:`~fractions.Fraction`; ``int()`` of it when whole).

        Raises:
            ValueError: ``bits_per_element`` is not a positive number.
        """
        bits = _positive_fraction(bits_per_element, "bits_per_element")
        if self.is_mla:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * bits / 8
        return 2 * self.kv_dim * bits / 8

    def kv_bytes_per_token(self, bits_per_element: int | Fraction = 16) -> Fraction:
        """Bytes of K and V cache one token adds across all layers.

        Llama-3.1-8B in BF16: ``2 x 8 x 128 x 2 B x 32 layers = 131072`` B (128 KiB).

        Args:
            bits_per_element: storage bits per cached element.

        Returns:
            Bytes, exact.

        Raises:
            ValueError: ``bits_per_element`` is not a positive number.
        """
        return self.layers * self.kv_bytes_per_token_per_layer(bits_per_element)


def _positive_fraction(x: int | Fraction, name: str) -> Fraction:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name}={x!r} must be a positive number")
    out = Fraction(x)
    if out <= 0:
        raise ValueError(f"{name}={x!r} must be a positive number")
    return out


# ---------------------------------------------------------------------------------------------
# Scenarios and files


@dataclass(frozen=True)
class ScenarioConfig:
    """One inference scenario.

    Attributes:
        phase: ``prefill`` (process ``tokens`` prompt tokens) or ``decode``.
        tokens: prompt tokens (prefill) or tokens already in the KV cache (decode).
        batch: sequences processed together, each with this scenario's tokens.
        decode_steps: decode steps, one token each (decode only; step ``s`` attends
            ``tokens + s + 1`` keys).
        kv_quant: KV cache in the architecture's KV format (True) or FP16.
        causal_tile_skip: skip attention tiles the causal mask hides entirely.
        lm_head: logits for ``all_tokens`` (the [R-PM] accounting), the ``last_token`` only,
            or ``none``.
        beyond_max_positions: the scenario deliberately runs past the model's
            ``max_position_embeddings`` (a shape-only workload, such as [R-PM]'s 16K-token
            speedups of 4K- and 8K-context models): its costs are the hardware's for tensors
            of that size, not a use the model supports. Without it such a scenario is an error.
    """

    phase: Literal["prefill", "decode"] = param(doc="prefill or decode")
    # Upper bounds far above any real use, so that a typo is refused before a simulator
    # sizes traces by it: 2^24 tokens (16 M; Llama 4 Scout's context is 10 M), 2^16 sequences.
    tokens: int = param(ge=1, le=2**24, doc="prompt or context tokens")
    batch: int = param(default=1, ge=1, le=2**16, doc="sequences per batch")
    decode_steps: int = param(default=1, ge=1, le=2**20, doc="decode steps")
    kv_quant: bool = param(default=True, doc="quantized KV cache")
    causal_tile_skip: bool = param(default=True, doc="skip fully masked attention tiles")
    lm_head: Literal["all_tokens", "last_token", "none"] = param(
        default="all_tokens", doc="which logits are computed"
    )
    beyond_max_positions: bool = param(
        default=False, doc="knowingly exceeds the model's max_position_embeddings"
    )

    def validate(self) -> list[Problem | str]:
        """``decode_steps`` only means something for decode."""
        if self.phase == "prefill" and self.decode_steps != 1:
            return [
                Problem("", "decode_steps", self.decode_steps, "prefill has no decode steps (1)")
            ]
        return []

    @property
    def positions(self) -> int:
        """Positions the longest sequence reaches: ``tokens`` (prefill) or
        ``tokens + decode_steps`` (decode)."""
        return self.tokens if self.phase == "prefill" else self.tokens + self.decode_steps


def _source_keys() -> tuple[str, ...]:
    keys = [f"model.{f.name}" for f in dataclasses.fields(ModelShape)]
    keys += [f"model.rope_scaling.{f.name}" for f in dataclasses.fields(RopeScaling)]
    return tuple(keys)


@dataclass(frozen=True)
class WorkloadConfig:
    """A model and its scenarios (``arch_configs/workloads/<name>.yaml``).

    Attributes:
        name: model name (``llama-3-8b``).
        model: the shape.
        scenarios: scenario name -> scenario.
        default_scenario: the scenario used when none is named.
        sources: provenance of the shape, keyed by dotted field (``model.hidden``,
            ``model.rope_scaling.factor``).
    """

    VERSION: ClassVar[int] = 1

    name: str = param(doc="model name")
    model: ModelShape = param(doc="model shape")
    scenarios: Mapping[str, ScenarioConfig] = param(doc="scenarios by name")
    default_scenario: str = param(doc="scenario used by default")
    sources: Mapping[str, str] = param(default=FrozenMap(), doc="provenance by dotted key")

    def validate(self) -> list[Problem | str]:
        """The default scenario exists; scenarios fit the model's positions; sources name model
        fields."""
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
        limit = self.model.max_position_embeddings
        for name, sc in self.scenarios.items():
            out.extend(_position_problems(name, sc, limit))
        fields = _source_keys()
        for key in self.sources:
            if key not in fields:
                msg = f"not a model field; fields: {', '.join(fields)}"
                close = difflib.get_close_matches(key, fields, n=1)
                if close:
                    msg += f" (did you mean {close[0]!r}?)"
                out.append(Problem("", f"sources.{key}", key, msg, ", ".join(fields)))
        return out


def _position_problems(name: str, sc: ScenarioConfig, limit: int) -> list[Problem]:
    """A scenario past ``limit`` positions without ``beyond_max_positions``, or the flag set on
    a scenario that fits."""
    n = sc.positions
    if n > limit and not sc.beyond_max_positions:
        if sc.phase == "prefill":
            what = f"{sc.tokens} prompt tokens"
        else:
            what = f"{sc.tokens} context tokens + {sc.decode_steps} decode steps = {n} positions"
        return [
            Problem(
                "",
                f"scenarios.{name}.tokens",
                sc.tokens,
                f"{what} exceed model.max_position_embeddings = {limit}; shorten the scenario "
                "or mark it 'beyond_max_positions: true' (a shape-only workload)",
                f"at most {limit} positions",
            )
        ]
    if n <= limit and sc.beyond_max_positions:
        return [
            Problem(
                "",
                f"scenarios.{name}.beyond_max_positions",
                True,
                f"the scenario reaches {n} positions, within model.max_position_embeddings = "
                f"{limit}; remove the flag",
            )
        ]
    return []


@dataclass(frozen=True)
class Workload:
    """One scenario of one model: what a simulator takes.

    Attributes:
        name: model name.
        scenario_name: scenario name.
        model: the shape.
        scenario: the scenario.
        digest: :func:`coaccel.config.config_digest` of the whole workload file.
        source: the file it came from (or the model name for an in-memory
            :class:`WorkloadConfig`); errors about the workload name it.
    """

    name: str
    scenario_name: str
    model: ModelShape
    scenario: ScenarioConfig
    digest: str
    source: str = ""

    @property
    def label(self) -> str:
        """``"<model>:<scenario>"``."""
        return f"{self.name}:{self.scenario_name}"


def workload_path(name: str | Path) -> Path:
    """The file of a workload.

    Args:
        name: a shipped name (:data:`WORKLOAD_NAMES`, with or without ``.yaml``) or a path.
            An existing file of that name wins over a shipped workload.

    Returns:
        The YAML file's path (not checked for existence when ``name`` is a path).
    """
    text = str(name)
    stem = text[:-5] if text.endswith(".yaml") else text
    if stem in WORKLOAD_NAMES and not Path(text).exists():
        return _shipped_dir() / f"{stem}.yaml"
    return Path(text)


_ACCEPTS = "a model name with an optional :scenario, or a workload YAML file"


def _check_workload_file(path: Path, text: str) -> None:
    """Refuse, before it is opened, a path that cannot be a workload file.

    A FIFO would block the read and a device never end; a trace file (found by its first
    bytes, or its ``.npz`` suffix) would be read as YAML and fail on its binary bytes.

    Raises:
        ConfigError: a folder, FIFO, device or socket; a trace file (naming its kind).
    """
    from .trace import TraceError, is_trace_file, not_regular, read_trace_meta, trace_kind

    kind = not_regular(path)
    if kind is not None:
        raise ConfigError([Problem(text, "", None, f"not a workload file: it is {kind}")])
    if not path.exists() or not (is_trace_file(path) or path.suffix == ".npz"):
        return
    give = f"give {_ACCEPTS} (shipped models: {', '.join(WORKLOAD_NAMES)})"
    try:
        producer = str(read_trace_meta(path).get("producer", ""))
    except (TraceError, OSError) as e:
        why = getattr(e, "strerror", None) or str(e).removeprefix(f"{path}: ")
        why = why.removeprefix("not a trace file: ")
        msg = f"neither a workload file nor a trace file ({why}); {give}"
    else:
        msg = (
            f"a {trace_kind(producer)!r} trace file (producer {producer!r}), not a workload: "
            f"this simulator builds its own traces from a model and scenario; {give}"
        )
    raise ConfigError([Problem(text, "", None, msg, _ACCEPTS)])


def load_workload(name: str | Path | WorkloadConfig, scenario: str | None = None) -> Workload:
    """Load a workload and pick a scenario.

    Args:
        name: a shipped model name (:data:`WORKLOAD_NAMES`), ``"<model>:<scenario>"``, a YAML
            path (``"<path>:<scenario>"`` too), or an already loaded :class:`WorkloadConfig`.
        scenario: scenario name (default: the one after ``:`` in ``name``, else the file's
            ``default_scenario``).

    Returns:
        The :class:`Workload`.

    Raises:
        ConfigError: problems of the file (unknown keys, types, ranges, a scenario past the
            model's ``max_position_embeddings``, ...), an unknown scenario, or a path that is
            not a workload file (a FIFO or a device, refused before it is opened; a trace file).
    """
    if isinstance(name, WorkloadConfig):
        cfg = name
        source = cfg.name
    else:
        text = str(name)
        if scenario is None and ":" in text and not Path(text).exists():
            text, scenario = text.rsplit(":", 1)
        path = workload_path(text)
        _check_workload_file(path, text)
        if not path.exists() and not text.endswith(".yaml") and "/" not in text:
            msg = f"no workload named {text!r}; shipped: {', '.join(WORKLOAD_NAMES)}"
            close = difflib.get_close_matches(text, WORKLOAD_NAMES, n=1)
            if close:
                msg += f" (did you mean {close[0]!r}?)"
            raise ConfigError([Problem(text, "", text, msg, ", ".join(WORKLOAD_NAMES))])
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
                    ", ".join(cfg.scenarios),
                )
            ]
        )
    return Workload(cfg.name, scen, cfg.model, cfg.scenarios[scen], config_digest(cfg), source)
