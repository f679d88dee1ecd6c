"""GPU workloads: a trace (a file or an object) or a workload string (``"splitk:T=131072"``).

:func:`load_workload` accepts

* a path to a GPU trace file (``.npz``, :meth:`coaccel.trace.Trace.load`; a trace of another
  kind, such as an HBQ ASIC trace, is refused, naming both kinds);
* ``"<name>:<key>=<value>,..."`` naming one of :data:`WORKLOAD_STRINGS` (the microbenchmarks of
  :mod:`coaccel.models.gpu.microbench` and the decode workloads, each declared with its
  parameters' meaning and bounds: :class:`coaccel.spine.workload_string.StringWorkload`), e.g.
  ``"splitk:context=131072,batch=1"``; ``T`` and ``B`` are accepted for ``context`` and
  ``batch``. :func:`coaccel.spine.workload_string.parse_workload_string` checks the string
  (unknown or repeated keys, missing ones, values out of bounds, a build too large) before
  anything is built;
* a :class:`~coaccel.trace.Trace` or a :class:`GpuWorkload`.

A model workload (a shipped model name or a workload YAML file, ``"<model>[:<scenario>]"``) is
refused with the workload string of its attention where there is one: the GPU workloads are one
layer's decode attention, not a model (:func:`_refuse_model_workload`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coaccel.models.gpu import microbench as mb
from coaccel.spine.config import ConfigError, Problem
from coaccel.spine.trace import Trace, is_trace_file
from coaccel.spine.workload import WORKLOAD_NAMES
from coaccel.spine.workload import load_workload as load_model_workload
from coaccel.spine.workload_string import (
    Param,
    Size,
    StringWorkload,
    build_workload_string,
)

__all__ = [
    "TRACE_PRODUCERS",
    "WORKLOAD_GENERATORS",
    "WORKLOAD_STRINGS",
    "GpuWorkload",
    "load_workload",
    "register_generator",
]

TRACE_PRODUCERS = ("coaccel.models.gpu.",)
"""Producers (name prefixes) of the trace files the GPU simulator reads."""

WORKLOAD_STRINGS: dict[str, StringWorkload] = {}
"""Workload-string name -> its declaration (:func:`register_generator`)."""

WORKLOAD_GENERATORS: dict[str, tuple[Callable[..., Trace], dict[str, Callable[[str], Any]]]] = {}
"""Name -> (trace generator, parameter parsers): :data:`WORKLOAD_STRINGS` as earlier versions
listed it."""

_TILES = 2**22
_RECORDS = 2**22
_ELEMENTS = 2**27
_TOKENS = 2**20

# Parameters shared by several workloads: one definition of their meaning and bounds.
CONTEXT = Param("context", "tokens in each sequence's KV cache", lo=1, hi=2**24, unit="tokens",
                aliases=("T",))  # fmt: skip
BATCH = Param("batch", "sequences decoded together", lo=1, hi=2**16, unit="sequences",
              aliases=("B",))  # fmt: skip
Q_HEADS = Param("q_heads", "query heads", lo=1, hi=1024, unit="heads")
KV_HEADS = Param("kv_heads", "KV heads (q_heads a multiple of it)", lo=1, hi=1024, unit="heads")
HEAD_DIM = Param("head_dim", "elements per head", lo=1, hi=2048, unit="elements")
BLOCK_N = Param("block_n", "tokens per K/V tile", lo=1, hi=2**16, unit="tokens")
SPLITS = Param("splits", "split-K count (default: picked for the SMs)", lo=1, hi=2**16)
SMS = Param("sms", "SMs the split count is picked for", lo=1, hi=4096, unit="SMs")
SEED = Param("seed", "seed of the synthetic inputs", lo=0, hi=2**32 - 1)
_BYTES = 2**40


def _bytes(name: str, meaning: str, lo: int = 1) -> Param:
    return Param(name, meaning, lo=lo, hi=_BYTES, unit="B")


def _flag(name: str, meaning: str) -> Param:
    return Param(name, meaning, kind="flag")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _tiles(v: Mapping[str, Any]) -> int:
    return int(v["batch"]) * int(v["kv_heads"]) * _ceil(int(v["context"]), int(v["block_n"]))


TILES = Size("K/V tiles (batch x kv_heads x ceil(context / block_n))", _tiles, _TILES)


def register_generator(workload: StringWorkload) -> None:
    """Make ``"<name>:k=v,..."`` a workload string of the GPU simulator.

    Args:
        workload: its declaration (build function, parameters, sizes).

    Raises:
        ValueError: the name is taken by another declaration.
    """
    have = WORKLOAD_STRINGS.get(workload.name)
    if have is not None and have is not workload:
        raise ValueError(f"GPU workload {workload.name!r} is already registered")
    WORKLOAD_STRINGS[workload.name] = workload
    WORKLOAD_GENERATORS[workload.name] = (
        workload.build,
        {p.name: p.parse for p in workload.params},
    )


def _register_microbenchmarks() -> None:
    """The microbenchmarks of :mod:`coaccel.models.gpu.microbench`."""
    ws = _bytes("working_set_bytes", "bytes of the buffer swept")
    ctas = Param("ctas", "grid size", lo=1, hi=2**20, unit="CTAs")
    tile = Param("tile_bytes", "bytes one CTA loads per step", lo=1, hi=2**30, unit="B")

    def stream_records(v: Mapping[str, Any]) -> int:
        return int(v["passes"]) * _ceil(int(v["working_set_bytes"]), int(v["tile_bytes"]))

    register_generator(StringWorkload(
        "stream", mb.streaming_read,
        (ws, ctas, tile, Param("passes", "sweeps over the buffer", lo=1, hi=1024)),
        summary="a read-only sweep over a working set",
        sizes=(Size("memory records (passes x ceil(working_set_bytes / tile_bytes))",
                    stream_records, _RECORDS),),
    ))  # fmt: skip

    def chase_records(v: Mapping[str, Any]) -> int:
        lines = int(v["working_set_bytes"]) // int(v["line_bytes"])
        return lines * (2 if v["warm"] else 1) + int(v["steps"])

    register_generator(StringWorkload(
        "chase", mb.pointer_chase,
        (_bytes("working_set_bytes", "bytes of the pointer chain"),
         Param("steps", "dependent loads measured", lo=1, hi=_RECORDS),
         Param("line_bytes", "spacing of the pointers", lo=8, hi=2**20, unit="B"),
         SEED, _flag("warm", "walk the whole chain once first")),
        summary="one warp chasing pointers: latency per level",
        sizes=(Size("lines and loads (working_set_bytes / line_bytes, twice when warm, + "
                    "steps)", chase_records, _RECORDS),),
    ))  # fmt: skip

    def h2d(nbytes: int, pinned: bool = True) -> Trace:
        return mb.host_copy(nbytes, direction="h2d", pinned=pinned)

    def d2h(nbytes: int, pinned: bool = True) -> Trace:
        return mb.host_copy(nbytes, direction="d2h", pinned=pinned)

    copied = _bytes("nbytes", "bytes copied", lo=0)
    pinned = _flag("pinned", "pinned host memory (0: pageable)")
    for name, fn in (("h2d", h2d), ("d2h", d2h)):
        register_generator(StringWorkload(name, fn, (copied, pinned),
                                          summary=f"one {name} copy-engine transfer"))  # fmt: skip
    register_generator(
        StringWorkload("bidir", mb.bidirectional_copy, (copied,),
                       summary="an h2d and a d2h copy at the same time")
    )  # fmt: skip

    def zc_records(v: Mapping[str, Any]) -> int:
        return _ceil(int(v["nbytes"]) // int(v["row_bytes"]), 64)

    register_generator(StringWorkload(
        "zerocopy", mb.zero_copy_read,
        (_bytes("nbytes", "bytes read from pinned host memory"),
         Param("row_bytes", "bytes per row", lo=1, hi=2**30, unit="B"),
         Param("stride_bytes", "bytes between row starts (>= row_bytes)", lo=1, hi=2**30,
               unit="B"), ctas),
        summary="CTAs reading pinned host memory in strided rows",
        sizes=(Size("memory records (nbytes / row_bytes / 64 rows each)", zc_records,
                    _RECORDS),),
    ))  # fmt: skip

    def overlap_records(v: Mapping[str, Any]) -> int:
        return _ceil(int(v["stream_bytes"]), 16384)

    register_generator(StringWorkload(
        "overlap", mb.copy_compute_overlap,
        (_bytes("copy_bytes", "bytes of the h2d copy", lo=0),
         _bytes("stream_bytes", "bytes of the streaming read")),
        summary="a streaming read and an h2d copy at the same time",
        sizes=(Size("memory records (stream_bytes / 16384)", overlap_records, _RECORDS),),
    ))  # fmt: skip
    register_generator(StringWorkload(
        "splitk", mb.splitk_decode_traffic,
        (CONTEXT, BATCH, Param("splits", "split-K count (0: picked for the SMs)", lo=0,
                               hi=2**16), BLOCK_N, SMS),
        summary="the memory traffic of split-K decode attention",
        sizes=(Size("K/V tiles (batch x kv_heads x ceil(context / block_n))", _tiles,
                    _TILES),),
    ))  # fmt: skip


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

    shape_params = (CONTEXT, BATCH, Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK_N, SPLITS, SMS)
    register_generator(StringWorkload(
        "flashdecode", flashdecode, shape_params,
        summary="one FlashDecoding step of one layer's attention",
        sizes=(TILES,),
    ))  # fmt: skip

    ffd_decode = getattr(gpu_models, "ffd_decode", None)
    ffd_trace = getattr(gpu_models, "ffd_trace", None)
    if ffd_decode is None or ffd_trace is None:
        return

    def ffd(
        context: int, batch: int = 1, q_heads: int = 32, kv_heads: int = 8, head_dim: int = 128,
        block_n: int = 128, splits: int | None = None, sms: int | None = None,
        keep: float | None = None, delta: float = 5.0, seed: int = 0, ref: bool = True,
    ) -> Trace:  # fmt: skip
        shape = decode_shape(batch, context, q_heads, kv_heads, head_dim)
        plan = dict(block_n=block_n, num_splits=splits, n_sms=sms)
        if ref:
            return ffd_decode(shape, seed=seed, keep_ratio=keep, delta=delta, **plan).trace
        if keep is None:
            raise ValueError("ffd with ref=0 (trace only) needs keep=<ratio>")
        return ffd_trace(shape, keep_ratio=keep, seed=seed, **plan)

    def ffd_elements(v: Mapping[str, Any]) -> int:
        if not v["ref"]:
            return 0
        return int(v["batch"]) * int(v["context"]) * int(v["kv_heads"]) * int(v["head_dim"])

    register_generator(StringWorkload(
        "ffd", ffd,
        (*shape_params,
         Param("keep", "forced keep ratio of the K/V blocks (default: top-delta)", kind="float",
               lo=0, hi=1),
         Param("delta", "threshold offset, log2 units", kind="float", lo=-64, hi=64),
         SEED, _flag("ref", "run the reference numerics (0: the trace only, needs keep)")),
        summary="one FFD (sparse FlashDecoding) step",
        sizes=(TILES, Size("K/V elements the reference computes on (batch x context x "
                           "kv_heads x head_dim, with ref=1)", ffd_elements, _ELEMENTS)),
    ))  # fmt: skip


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

    def nosa_tokens(v: Mapping[str, Any]) -> int:
        return int(v["batch"]) * int(v["context"])

    register_generator(StringWorkload(
        "nosa", nosa,
        (CONTEXT, BATCH,
         Param("slots", "GPU slot budget per sequence and KV head", lo=1, hi=2**16,
               unit="blocks"),
         Param("selector", "block selection", kind="choice", choices=("nosa", "topk")),
         Param("link", "the fetch path", kind="choice", choices=("zero_copy", "dma")),
         Param("steps", "decode steps of the seeded run", lo=1, hi=4096, unit="steps"),
         SEED, SMS),
        summary="a NOSA KV-offload decode run (the trace of its last step)",
        sizes=(Size("K/V tokens the seeded run computes on (batch x context)", nosa_tokens,
                    _TOKENS),),
    ))  # fmt: skip

    from coaccel.models.gpu import specter as sp

    def specter(
        tokens: int = 16, K: int = 16, slots: int = 16, recall: float = 0.75,
        accept: float = 0.9, persistence: float | None = None, zipf: float | None = None,
        mode: str = "specter",
        seed: int = 0,
    ) -> Trace:  # fmt: skip
        model = sp.SpecterModel(draft_depth=K, slots=slots, recall=recall, accept=accept,
                                persistence=persistence, zipf=zipf)  # fmt: skip
        run = sp.specter_decode if mode == "specter" else sp.specter_baseline
        return run(model=model, tokens=tokens, seed=seed).trace

    def share(name: str, meaning: str) -> Param:
        return Param(name, meaning, kind="float", lo=0, hi=1)

    register_generator(StringWorkload(
        "specter", specter,
        (Param("tokens", "tokens decoded", lo=1, hi=4096, unit="tokens"),
         Param("K", "draft depth", lo=1, hi=128, unit="tokens"),
         Param("slots", "resident experts per layer", lo=1, hi=1024, unit="experts"),
         share("recall", "share of the target's routes the draft predicts"),
         share("accept", "probability each draft token is accepted"),
         share("persistence", "probability a token keeps the previous token's expert (default: "
               "per layer, fitted to Mixtral's published repetition shares)"),
         Param("zipf", "exponent of the expert popularity (default: per layer, fitted)",
               kind="float", lo=0, hi=16),
         Param("mode", "Specter or its baseline", kind="choice",
               choices=("specter", "baseline")),
         SEED),
        summary="a Specter MoE expert-offload decode run",
    ))  # fmt: skip


@dataclass(frozen=True, eq=False)
class GpuWorkload:
    """A GPU workload: a label and its trace."""

    label: str
    trace: Trace


def load_workload(workload: Any) -> GpuWorkload:
    """Load a GPU workload.

    Args:
        workload: a GPU trace path, a workload string, a :class:`Trace` or a
            :class:`GpuWorkload`.

    Returns:
        The :class:`GpuWorkload`.

    Raises:
        ConfigError: an unknown workload or key, a bad or out-of-bounds value, a file that is
            not a trace or a trace of another kind.
    """
    if isinstance(workload, GpuWorkload):
        return workload
    if isinstance(workload, Trace):
        label = str(workload.meta.get("workload", {}).get("microbench", "trace"))
        return GpuWorkload(label, workload)
    text = str(workload)
    p = Path(text)
    if p.suffix == ".npz" or is_trace_file(p):
        return GpuWorkload(p.stem, _load_trace(p, text))
    _refuse_model_workload(text)
    if ":" not in text and p.exists():  # a file that is neither a trace nor a workload YAML
        return GpuWorkload(p.stem, _load_trace(p, text))
    return GpuWorkload(
        text, build_workload_string(text, WORKLOAD_STRINGS, otherwise="a GPU trace file (.npz)")
    )


def _load_trace(p: Path, text: str) -> Trace:
    """A GPU trace file; another kind of trace, or a file that is not one, is refused."""
    try:
        return Trace.load(p, producers=TRACE_PRODUCERS, reader="the gpu target")
    except FileNotFoundError:
        raise ConfigError([Problem(text, "", None, "no such trace file")]) from None


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
        "(a trace .npz or a workload string), not a model"
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


_register_microbenchmarks()
_register_decode_workloads()
_register_offload_workloads()
