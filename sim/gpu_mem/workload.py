"""GPU workloads: a trace (a file or an object) or a generator spec (``"splitk:T=131072"``).

:func:`load_workload` accepts

* a path to a trace file (``.npz``, :meth:`coaccel.trace.Trace.load`);
* ``"<generator>:<key>=<value>,..."`` naming one of :data:`WORKLOAD_GENERATORS` (the
  microbenchmarks of :mod:`coaccel.models.gpu.microbench` and the decode workloads registered
  with :func:`register_generator`), e.g. ``"splitk:context=131072,batch=1"``; ``T`` and ``B``
  are accepted for ``context`` and ``batch``;
* a :class:`~coaccel.trace.Trace` or a :class:`GpuWorkload`.

A model workload (a shipped model name or a workload YAML file, ``"<model>[:<scenario>]"``) is
refused with the generator spec of its attention where there is one: the GPU workloads are one
layer's decode attention, not a model (:func:`_refuse_model_workload`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coaccel.models.gpu.microbench import GENERATORS
from coaccel.spine.config import ConfigError, Problem
from coaccel.spine.trace import Trace, TraceError
from coaccel.spine.workload import WORKLOAD_NAMES
from coaccel.spine.workload import load_workload as load_model_workload

__all__ = ["WORKLOAD_GENERATORS", "GpuWorkload", "load_workload", "register_generator"]

ALIASES = {"T": "context", "B": "batch"}
"""Short parameter names of workload specs."""

WORKLOAD_GENERATORS: dict[str, tuple[Callable[..., Trace], dict[str, Callable[[str], Any]]]] = dict(
    GENERATORS
)
"""Spec name -> (trace generator, parameter parsers)."""


def _register_decode_workloads() -> None:
    """Register the decode references of :mod:`coaccel.models.gpu` that this install has.

    ``flashdecode`` (W1) is :func:`coaccel.models.gpu.flash_decode_trace` of a
    :class:`coaccel.models.gpu.DecodeShape`: keys ``context`` (``T``), ``batch`` (``B``),
    ``q_heads``, ``kv_heads``, ``head_dim``, ``block_n``, ``splits`` and ``sms`` (the SM count
    the reference picks the split count for when ``splits`` is not given; 132 as on H100/H200).
    """
    import coaccel.models.gpu as gpu_models

    decode_shape = getattr(gpu_models, "DecodeShape", None)
    flash_decode_trace = getattr(gpu_models, "flash_decode_trace", None)
    if decode_shape is None or flash_decode_trace is None:
        return  # an install without the decode references: microbenchmarks only

    def flashdecode(
        context: int, batch: int = 1, q_heads: int = 32, kv_heads: int = 8, head_dim: int = 128,
        block_n: int = 128, splits: int | None = None, sms: int = 132,
    ) -> Trace:  # fmt: skip
        shape = decode_shape(batch, context, q_heads, kv_heads, head_dim)
        return flash_decode_trace(shape, block_n=block_n, num_splits=splits, n_sms=sms)

    keys = ("context", "batch", "q_heads", "kv_heads", "head_dim", "block_n", "splits", "sms")
    register_generator("flashdecode", flashdecode, dict.fromkeys(keys, int))

    ffd_decode = getattr(gpu_models, "ffd_decode", None)
    ffd_trace = getattr(gpu_models, "ffd_trace", None)
    if ffd_decode is None or ffd_trace is None:
        return

    def ffd(
        context: int, batch: int = 1, q_heads: int = 32, kv_heads: int = 8, head_dim: int = 128,
        block_n: int = 128, splits: int | None = None, sms: int | None = None,
        keep: float | None = None, delta: float = 5.0, seed: int = 0, ref: int = 1,
    ) -> Trace:  # fmt: skip
        shape = decode_shape(batch, context, q_heads, kv_heads, head_dim)
        plan = dict(block_n=block_n, num_splits=splits, n_sms=sms)
        if ref:
            return ffd_decode(shape, seed=seed, keep_ratio=keep, delta=delta, **plan).trace
        if keep is None:
            raise ValueError("ffd with ref=0 (trace only) needs keep=<ratio>")
        return ffd_trace(shape, keep_ratio=keep, seed=seed, **plan)

    parsers: dict[str, Callable[[str], Any]] = dict.fromkeys(keys, int)
    parsers.update(keep=float, delta=float, seed=int, ref=_flag)
    register_generator("ffd", ffd, parsers)


def _flag(text: str) -> int:
    if text not in ("0", "1"):
        raise ValueError(text)
    return int(text)


def _register_offload_workloads() -> None:
    """Register the KV and expert offload references (W3 NOSA, W4 Specter) this install has.

    ``nosa`` is :func:`coaccel.models.gpu.nosa.nosa_decode` (a seeded decode run; the trace is
    its last step): keys ``context`` (``T``), ``batch`` (``B``), ``slots`` (GPU blocks per
    sequence and KV head), ``selector`` (``nosa`` or ``topk``), ``link`` (the fetch path:
    ``zero_copy`` or ``dma``), ``steps``, ``seed`` and ``sms``. ``specter`` is
    :func:`coaccel.models.gpu.specter.specter_decode` (``mode=specter``) or
    :func:`~coaccel.models.gpu.specter.specter_baseline` (``mode=baseline``): keys ``tokens``,
    ``K`` (draft depth), ``slots``, ``recall``, ``accept``, ``persistence``, ``zipf``, ``seed``
    (:class:`~coaccel.models.gpu.specter.SpecterModel` documents each).
    """
    try:
        from coaccel.models.gpu import nosa as nosa_mod
    except ImportError:  # an install without the offload references
        return

    def nosa(
        context: int, batch: int = 1, slots: int = 64, selector: str = "nosa",
        link: str = "zero_copy", steps: int = 32, seed: int = 0, sms: int = 132,
    ) -> Trace:  # fmt: skip
        shape = nosa_mod.DecodeShape(batch, context)
        cfg = nosa_mod.NosaConfig(slots=slots, selector=selector, fetch=link)  # type: ignore[arg-type]
        return nosa_mod.nosa_decode(shape, config=cfg, steps=steps, seed=seed, n_sms=sms).trace

    nosa_parsers: dict[str, Callable[[str], Any]] = dict.fromkeys(
        ("context", "batch", "slots", "steps", "seed", "sms"), int
    )
    nosa_parsers.update(selector=_choice("nosa", "topk"), link=_choice("zero_copy", "dma"))
    register_generator("nosa", nosa, nosa_parsers)

    from coaccel.models.gpu import specter as sp

    def specter(
        tokens: int = 16, K: int = 16, slots: int = 16, recall: float = 0.75,
        accept: float = 0.9, persistence: float = 0.7, zipf: float = 1.0, mode: str = "specter",
        seed: int = 0,
    ) -> Trace:  # fmt: skip
        model = sp.SpecterModel(draft_depth=K, slots=slots, recall=recall, accept=accept,
                                persistence=persistence, zipf=zipf)  # fmt: skip
        run = sp.specter_decode if mode == "specter" else sp.specter_baseline
        return run(model=model, tokens=tokens, seed=seed).trace

    sp_parsers: dict[str, Callable[[str], Any]] = dict.fromkeys(
        ("tokens", "K", "slots", "seed"), int
    )
    sp_parsers.update(dict.fromkeys(("recall", "accept", "persistence", "zipf"), float))
    sp_parsers.update(mode=_choice("specter", "baseline"))
    register_generator("specter", specter, sp_parsers)


def _choice(*valid: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in valid:
            raise ValueError(f"{text!r}; valid: {', '.join(valid)}")
        return text

    return parse


def register_generator(
    name: str, generator: Callable[..., Trace], parsers: dict[str, Callable[[str], Any]]
) -> None:
    """Make ``"<name>:k=v,..."`` a workload spec of the GPU simulator.

    Args:
        name: spec name (``"flashdecode"``).
        generator: ``generator(**params) -> Trace``.
        parsers: parameter name -> function parsing its text value.

    Raises:
        ValueError: the name is taken by another generator.
    """
    have = WORKLOAD_GENERATORS.get(name)
    if have is not None and have[0] is not generator:
        raise ValueError(f"GPU workload generator {name!r} is already registered")
    WORKLOAD_GENERATORS[name] = (generator, dict(parsers))


@dataclass(frozen=True, eq=False)
class GpuWorkload:
    """A GPU workload: a label and its trace."""

    label: str
    trace: Trace


def _spec(text: str) -> GpuWorkload:
    name, _, rest = text.partition(":")
    where = "<workload>"
    if name not in WORKLOAD_GENERATORS:
        valid = ", ".join(sorted(WORKLOAD_GENERATORS))
        msg = f"unknown GPU workload {name!r}; valid: {valid} or a trace file (.npz)"
        close = difflib.get_close_matches(name, list(WORKLOAD_GENERATORS), n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
        raise ConfigError([Problem(where, "workload", text, msg, valid)])
    gen, parsers = WORKLOAD_GENERATORS[name]
    kwargs: dict[str, Any] = {}
    problems = []
    for item in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = item.partition("=")
        k = ALIASES.get(k.strip(), k.strip())
        if not eq or k not in parsers:
            valid = ", ".join(sorted(parsers))
            problems.append(
                Problem(where, f"workload.{k}", item, f"{name} takes key=value with keys {valid}",
                        valid)
            )  # fmt: skip
            continue
        try:
            kwargs[k] = parsers[k](v.strip())
        except ValueError:
            problems.append(
                Problem(where, f"workload.{k}", v, f"{v.strip()!r} is not a valid value for {k}")
            )
    if problems:
        raise ConfigError(problems)
    try:
        trace = gen(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError([Problem(where, "workload", text, str(e))]) from None
    return GpuWorkload(text, trace)


def load_workload(workload: Any) -> GpuWorkload:
    """Load a GPU workload.

    Args:
        workload: a trace path, a generator spec, a :class:`Trace` or a :class:`GpuWorkload`.

    Returns:
        The :class:`GpuWorkload`.

    Raises:
        ConfigError: an unknown generator or key, a bad value, or a file that is not a trace.
    """
    if isinstance(workload, GpuWorkload):
        return workload
    if isinstance(workload, Trace):
        label = str(workload.meta.get("workload", {}).get("microbench", "trace"))
        return GpuWorkload(label, workload)
    text = str(workload)
    p = Path(text)
    if p.suffix == ".npz":
        try:
            return GpuWorkload(p.stem, Trace.load(p))
        except (OSError, TraceError) as e:
            raise ConfigError([Problem(text, "", None, f"cannot load trace: {e}")]) from None
    _refuse_model_workload(text)
    return _spec(text)


def _refuse_model_workload(text: str) -> None:
    """Refuse a model workload (``"<model>[:<scenario>]"``, a shipped name or a YAML file).

    The GPU workloads are one layer's decode attention over a cache of K and V per KV head
    (flashdecode, ffd, nosa) or a synthetic expert-offload run (specter); a model is none of
    them. For a GQA model's decode scenario the message gives the equivalent ``flashdecode``
    spec; multi-head latent attention (one cached latent per token and layer, shared by all
    heads) is refused as such, never treated as GQA.

    Raises:
        ConfigError: ``text`` names a model workload (or a bad one: the workload loader's
            problems).
    """
    head, sep, tail = text.rpartition(":")
    base = head if sep and "=" not in tail else text
    if not (base.endswith((".yaml", ".yml")) or base in WORKLOAD_NAMES):
        return
    wl = load_model_workload(text)
    m, sc = wl.model, wl.scenario
    if m.is_mla:
        msg = (
            f"{wl.label} uses multi-head latent attention: its cache holds one latent of "
            f"kv_lora_rank + qk_rope_head_dim = {m.kv_lora_rank + m.qk_rope_head_dim} elements "
            f"per token and layer, shared by all {m.heads} heads; the GPU decode workloads "
            "(flashdecode, ffd, nosa) model K and V caches per KV head (GQA) and do not model MLA"
        )
        raise ConfigError([Problem(wl.source or text, "model.attention", m.attention, msg, "gqa")])
    spec = (
        f"flashdecode:context={sc.tokens},batch={sc.batch},q_heads={m.heads},"
        f"kv_heads={m.kv_heads},head_dim={m.head_dim}"
    )
    msg = (
        f"{wl.label} is a model workload; the GPU simulator runs one layer's decode attention "
        "(a trace .npz or a generator spec), not a model"
    )
    if sc.phase != "decode":
        msg += f" (and the scenario is a {sc.phase}, the GPU workloads are decode steps)"
    else:
        msg += f": its attention is {spec}"
        if m.sliding_window_tokens:
            msg += (
                f" (its {len(m.sliding_window_layers)} sliding-window layers: context at most "
                f"{m.sliding_window_tokens})"
            )
    raise ConfigError([Problem(wl.source or text, "workload", text, msg)])


_register_decode_workloads()
_register_offload_workloads()
