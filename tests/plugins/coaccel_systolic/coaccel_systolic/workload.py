"""What the systolic array runs: the dense GEMMs of a workload.

A workload is either one of coaccel's model workloads (``"llama-3.2-1b:prefill_256"``, a
workload YAML; :func:`coaccel.workload.load_workload`), turned into the weight GEMMs of its
decoder layers and LM head by :func:`model_gemms`, or a single GEMM written
``"gemm:M=256,K=2048,N=2048"``. Either way the simulator sees a :class:`GemmWorkload`: a tuple
of :class:`Gemm` (``Y[M, N] = X[M, K] @ W[K, N]``, run ``repeat`` times).

The attention products (``Q K^T`` and ``P V``, activations times activations) and the
element-wise layers do not run on the weight-stationary array and are not counted; neither are
mixture-of-experts models (their routing is not modelled): :func:`model_gemms` refuses them.

Public: :class:`Gemm`, :class:`GemmWorkload`, :func:`load_workload`, :func:`model_gemms`,
:func:`parse_gemm`, :data:`WORKLOAD_KINDS`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from coaccel.spine.config import ConfigError, Problem
from coaccel.spine.workload import Workload
from coaccel.spine.workload import load_workload as load_model_workload

__all__ = [
    "WORKLOAD_KINDS",
    "Gemm",
    "GemmWorkload",
    "load_workload",
    "model_gemms",
    "parse_gemm",
]

WORKLOAD_KINDS = (
    "a model name with an optional :scenario (llama-3.2-1b:prefill_256), a workload YAML file, "
    "or one GEMM as gemm:M=<m>,K=<k>,N=<n>"
)
"""What :func:`load_workload` accepts, in words (``coaccel`` error messages)."""


@dataclass(frozen=True)
class Gemm:
    """One GEMM ``Y[M, N] = X[M, K] @ W[K, N]`` with stationary weights ``W``.

    Attributes:
        name: what it is (``"q_proj"``, ``"lm_head"``, ``"gemm"``).
        m: rows of X and Y (tokens), >= 1.
        k: reduction length, >= 1.
        n: output channels, >= 1.
        repeat: times it runs (decoder layers x decode steps), >= 1.
    """

    name: str
    m: int
    k: int
    n: int
    repeat: int = 1

    def __post_init__(self) -> None:
        for f in ("m", "k", "n", "repeat"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Gemm.{f}={v!r} must be an integer >= 1")

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one run, ``M x K x N``."""
        return self.m * self.k * self.n


@dataclass(frozen=True)
class GemmWorkload:
    """The GEMMs the array runs, in order.

    Attributes:
        label: ``"<model>:<scenario>"`` or the GEMM spec.
        gemms: the GEMMs.
        digest: a digest of the workload's definition (the model file's, or the spec's).
        notes: what the workload leaves out.
    """

    label: str
    gemms: tuple[Gemm, ...]
    digest: str
    notes: tuple[str, ...] = ()


MAX_DIM = 1 << 24
"""Largest M, K or N a ``gemm:`` string may ask for (far above any model's dimension)."""
MAX_MACS = 1 << 40
"""Largest M x K x N a ``gemm:`` string may ask for, so that a typo never runs for hours."""

_GEMM_RE = re.compile(r"^gemm:(.*)$", re.IGNORECASE)


def parse_gemm(text: str) -> GemmWorkload:
    """Parse ``"gemm:M=<m>,K=<k>,N=<n>"`` (keys in any order and case, all three required).

    Args:
        text: the spec.

    Returns:
        A workload of that one GEMM, labelled ``"gemm:M=<m>,K=<k>,N=<n>"``.

    Raises:
        ConfigError: a missing, repeated or unknown key, or a size that is not an integer
            >= 1.
    """
    m = _GEMM_RE.match(text.strip())
    body = m.group(1) if m else ""
    problems: list[Problem] = []
    sizes: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().upper()
        if not sep or key not in ("M", "K", "N"):
            problems.append(
                Problem(
                    text, "gemm", item, f"expected M=<m>, K=<k> or N=<n>, got {item!r}", "M, K, N"
                )
            )
            continue
        if key in sizes:
            problems.append(Problem(text, f"gemm.{key}", value, f"{key} given twice"))
            continue
        try:
            v = int(value.strip())
        except ValueError:
            v = 0
        if not 1 <= v <= MAX_DIM:
            problems.append(
                Problem(text, f"gemm.{key}", value, f"must be an integer in 1..{MAX_DIM:,}",
                        f"an integer in 1..{MAX_DIM:,}")
            )  # fmt: skip
            continue
        sizes[key] = v
    missing = [k for k in ("M", "K", "N") if k not in sizes]
    if missing and not problems:
        problems.append(
            Problem(
                text,
                "gemm",
                body,
                f"missing {', '.join(missing)}: write gemm:M=..,K=..,N=..",
                "M, K, N",
            )
        )
    if not problems and sizes["M"] * sizes["K"] * sizes["N"] > MAX_MACS:
        macs = sizes["M"] * sizes["K"] * sizes["N"]
        problems.append(
            Problem(text, "gemm", body, f"M x K x N = {macs:,} MACs is above the limit of "
                    f"{MAX_MACS:,} (2^40): split the GEMM")
        )  # fmt: skip
    if problems:
        raise ConfigError(problems)
    label = f"gemm:M={sizes['M']},K={sizes['K']},N={sizes['N']}"
    digest = hashlib.sha256(label.encode()).hexdigest()[:16]
    return GemmWorkload(label, (Gemm("gemm", sizes["M"], sizes["K"], sizes["N"]),), digest)


def model_gemms(workload: Workload) -> GemmWorkload:
    """The weight GEMMs of a model workload, per decoder layer and the LM head.

    Prefill runs ``tokens x batch`` rows through each GEMM once per layer; decode runs
    ``batch`` rows per step, once per layer and step. Per layer: ``q_proj`` (N = heads x
    head_dim), ``k_proj`` and ``v_proj`` (N = kv_heads x head_dim), ``o_proj``,
    ``gate_up_proj`` (N = 2 x intermediate) and ``down_proj``; the LM head (N = vocab) runs
    on every token (``lm_head: all_tokens``), the last one of each sequence, or not at all.

    Args:
        workload: a model workload (:func:`coaccel.workload.load_workload`).

    Returns:
        The :class:`GemmWorkload`.

    Raises:
        ConfigError: a mixture-of-experts model.
    """
    sh, sc = workload.model, workload.scenario
    if sh.is_moe:
        raise ConfigError(
            [
                Problem(
                    workload.source or workload.name,
                    "model.experts",
                    sh.experts,
                    "the systolic target runs dense models only (expert routing is not modelled)",
                )
            ]
        )
    if sc.phase == "prefill":
        m, steps, m_lm = sc.tokens * sc.batch, 1, sc.tokens * sc.batch
        if sc.lm_head == "last_token":
            m_lm = sc.batch
    else:
        m, steps, m_lm = sc.batch, sc.decode_steps, sc.batch
    e, inter, L = sh.hidden, sh.intermediate, sh.layers
    r = L * steps
    gemms = [
        Gemm("q_proj", m, e, sh.q_dim, r),
        Gemm("k_proj", m, e, sh.kv_dim, r),
        Gemm("v_proj", m, e, sh.kv_dim, r),
        Gemm("o_proj", m, sh.q_dim, e, r),
        Gemm("gate_up_proj", m, e, 2 * inter, r),
        Gemm("down_proj", m, inter, e, r),
    ]
    if sc.lm_head != "none":
        gemms.append(Gemm("lm_head", m_lm, e, sh.vocab, steps))
    notes = (
        "attention score and value products (activations x activations) and element-wise "
        "layers are not run on the array and not counted",
    )
    return GemmWorkload(workload.label, tuple(gemms), workload.digest, notes)


def load_workload(name: str | Path | Workload | GemmWorkload) -> GemmWorkload:
    """Load a workload (:data:`WORKLOAD_KINDS`).

    Args:
        name: ``"gemm:M=..,K=..,N=.."``, a model name with an optional scenario, a workload
            YAML path, or an already loaded :class:`~coaccel.workload.Workload` or
            :class:`GemmWorkload`.

    Returns:
        The :class:`GemmWorkload`.

    Raises:
        ConfigError: an unknown model or scenario, a bad GEMM spec, an MoE model.
    """
    if isinstance(name, GemmWorkload):
        return name
    if isinstance(name, Workload):
        return model_gemms(name)
    text = str(name)
    if _GEMM_RE.match(text.strip()):
        return parse_gemm(text)
    return model_gemms(load_model_workload(text))
