"""Traces of a decoder-only transformer on the HBQ accelerator (the reference produces the GEMM
traces; the simulator consumes only traces; docs/hbq_sim.md).

:func:`transformer_segments` turns a model shape (:class:`coaccel.workload.ModelShape`, the
spine's one description of a model), a phase (prefill of ``tokens`` tokens, or decode steps after
``tokens`` tokens of context) and the tiles an architecture's buffers allow into
:class:`TraceSegment` s: one trace per GEMM of one transformer layer (q, k, v, the fused attention,
o, the fused gate/up with its SwiGLU epilogue, down), each marked to repeat ``layers`` times, plus
the LM head. Every trace is the *double-buffered program* of :func:`~._trace.gemm_trace` (operand
reads issued ahead, buffer-slot dependencies, ``phase`` = the buffer a DRAM record fills).

Attention is fused (flash-style, as a weight-stationary array runs it): per KV head and query tile
(``rows`` = query tokens x the GQA group, token-major), per key tile ``j``: K tile read, ``QK^T``
(K stationary, Q broadcast; scores stay in the PSUM buffer), softmax on the vector unit (online,
scores read from PSUM, probabilities written to the ACT buffer), V tile read, ``PV`` (V stationary,
output partial sums accumulated in the PSUM buffer over key tiles), and at the end one output
write. With two buffer slots, ``QK^T`` of tile ``j + 1`` is issued before ``PV`` of tile ``j`` so
that the softmax overlaps the array. Causal prefill skips the key tiles that lie wholly after a
query tile's last token.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from coaccel.spine.trace import Trace, TraceBuilder
from coaccel.spine.workload import ModelShape

from ..formats import FormatSpec, resolve
from ._trace import (
    PLAIN_FORMAT_BITS,
    OperandStorage,
    _attention_bytes,
    _attention_seqs,
    _attention_tiles,
    _emit_attention,
    act_slab_bits,
    gemm_trace,
    operand_storage,
    psum_bits_per_element,
)

__all__ = [
    "LAYER_GEMMS",
    "TraceSegment",
    "WorkloadTiles",
    "attention_trace",
    "iter_transformer_segments",
    "transformer_segments",
]

Fmt = str | FormatSpec | OperandStorage

LAYER_GEMMS: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "attention",
    "o_proj",
    "gate_up_proj",
    "down_proj",
)
"""Segment names of one transformer layer, in execution order (then ``lm_head`` once)."""


@dataclass(frozen=True)
class WorkloadTiles:
    """Tiles and buffering of the accelerator (from the simulator's architecture config).

    Attributes:
        tile_m: tokens per linear tile. tile_n: output channels. tile_k: reduction elements.
        n_buffers: operand buffer slots (2 = double buffering).
        attn_rows: query rows (tokens x GQA group) per attention tile.
        attn_keys: keys per attention tile.
        psum_mode: partial-sum storage mode. sa_n: values per MXINT8 block.
        act_resident_bits: activation-buffer capacity for resident activation slabs, bits;
            None = activations streamed once per channel tile. When set, a linear layer whose
            ``n_buffers`` slabs (:func:`act_slab_bits`) fit is traced with
            ``a_resident=True``.
    """

    tile_m: int
    tile_n: int
    tile_k: int
    n_buffers: int
    attn_rows: int
    attn_keys: int
    psum_mode: str
    sa_n: int = 16
    act_resident_bits: int | None = None

    def a_resident(self, m: int, k: int, bits: Fraction) -> bool:
        """Whether an ``m x k`` activation operand stays resident (see ``act_resident_bits``).

        Args:
            m: tokens. k: reduction length. bits: activation bits per element.

        Returns:
            True when residency is on and ``n_buffers`` slabs fit.
        """
        if self.act_resident_bits is None:
            return False
        slab = act_slab_bits(m, k, self.tile_m, self.tile_k, bits)
        return self.n_buffers * slab <= self.act_resident_bits


@dataclass(frozen=True)
class TraceSegment:
    """One trace of a workload and how many identical copies it stands for.

    Attributes:
        name: ``q_proj`` ... ``down_proj`` (:data:`LAYER_GEMMS`) or ``lm_head``.
        kind: ``"linear"``, ``"attention"`` or ``"lm_head"``.
        repeat: identical copies (``layers`` for a layer's segments, 1 for the LM head): the
            simulator runs one and scales.
        step: decode step index (0 for prefill).
        trace: the program.
    """

    name: str
    kind: Literal["linear", "attention", "lm_head"]
    repeat: int
    step: int
    trace: Trace


def _with_role(fmt: Fmt, role: str) -> Fmt:
    """A registered format name resolved for a tensor role; other formats unchanged."""
    if not isinstance(fmt, str) or fmt.lower() in PLAIN_FORMAT_BITS:
        return fmt
    spec = resolve(fmt)
    if getattr(spec, "role", role) != role:
        spec = resolve(fmt, role=role)
    return spec


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def attention_trace(
    *,
    kv_heads: int,
    group: int,
    head_dim: int,
    q_tokens: int,
    q_start: int,
    n_keys: int,
    causal: bool,
    fmt_act: Fmt,
    fmt_kv: Fmt,
    tiles: WorkloadTiles,
    workload: Mapping[str, Any] | None = None,
    config_digest: str | None = None,
    seed: int | None = None,
) -> Trace:
    """The fused attention program of one layer (module docstring).

    Query token ``t`` (``q_start <= t < q_start + q_tokens``) attends keys ``0 .. t`` when
    ``causal`` and keys ``0 .. n_keys - 1`` otherwise; the key tiles a query tile computes are
    those holding any key it attends (the whole tile is computed and masked).

    Args:
        kv_heads: KV heads (one independent block of work each).
        group: query heads per KV head; their rows share each K and V tile.
        head_dim: elements per head (the reduction of ``QK^T``, the outputs of ``PV``).
        q_tokens: query tokens. q_start: position of the first one (decode: the context length).
        n_keys: keys in the KV cache (at least ``q_start + q_tokens`` when causal).
        causal: causal mask (prefill and decode of a decoder-only model).
        fmt_act: format of Q, of the softmax output P and of the attention output.
        fmt_kv: format of the K and V caches.
        tiles: the accelerator tiles (``attn_rows``, ``attn_keys``, ``n_buffers``, psum mode).
        workload: extra JSON metadata.
        config_digest: :func:`coaccel.config.config_digest` of the configuration the tiles
            come from, stamped into the trace (None: none).
        seed: the seed of the run, stamped into the trace (None: nothing random).

    Returns:
        The trace: DRAM records ``q``, ``k_cache``, ``v_cache``, ``attn_out`` (phase ``act``,
        ``wgt``, ``wgt``, ``out``); on-chip records of the scores (``S``, PSUM read), the
        probabilities (``P``, ACT write) and the output partial sums (``o_psum``, PSUM); compute
        records ``gemm`` (``QK^T``, ``PV``, unit ``pe_array``) and ``softmax`` (unit ``vector``,
        ``m`` rows x ``n`` keys, no MACs).
    """
    for name, v in (
        ("kv_heads", kv_heads),
        ("group", group),
        ("head_dim", head_dim),
        ("q_tokens", q_tokens),
        ("n_keys", n_keys),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    if causal and n_keys < q_start + q_tokens:
        raise ValueError(f"causal attention needs n_keys >= {q_start + q_tokens}, got {n_keys}")
    rows_t, keys_t, nb = tiles.attn_rows, tiles.attn_keys, tiles.n_buffers
    if rows_t < group or rows_t % group:
        raise ValueError(f"attn_rows={rows_t} must be a positive multiple of group={group}")
    name_a, bits_a = operand_storage(fmt_act, "activation")
    name_kv, bits_kv = operand_storage(fmt_kv, "kv")
    bits_p = psum_bits_per_element(tiles.psum_mode, sa_n=tiles.sa_n)
    shape = dict(q_tokens=q_tokens, q_start=q_start, n_keys=n_keys)
    t = _attention_tiles(
        kv_heads=kv_heads, group=group, causal=causal, rows_per_tile=rows_t,
        keys_per_tile=keys_t, **shape,
    )  # fmt: skip
    by = _attention_bytes(
        t, group=group, head_dim=head_dim, keys_per_tile=keys_t, bits_act=bits_a,
        bits_kv=bits_kv, **shape,
    )  # fmt: skip
    meta = {
        "op": "attention",
        "kv_heads": int(kv_heads),
        "group": int(group),
        "head_dim": int(head_dim),
        "q_tokens": int(q_tokens),
        "q_start": int(q_start),
        "n_keys": int(n_keys),
        "causal": bool(causal),
        "attn_rows": int(rows_t),
        "attn_keys": int(keys_t),
        "n_buffers": int(nb),
        "fmt_act": name_a,
        "fmt_kv": name_kv,
        "bits_act": float(bits_a),
        "bits_kv": float(bits_kv),
        "psum_mode": tiles.psum_mode,
        "psum_bits": float(bits_p),
        **dict(workload or {}),
    }
    b = TraceBuilder(
        producer="coaccel.models.hbq.attention", workload=meta, config_digest=config_digest,
        seed=seed,
    )  # fmt: skip
    _emit_attention(
        b, t, _attention_seqs(t, nb), by, n_buffers=nb, head_dim=head_dim,
        fmt_act=(name_a, bits_a), fmt_kv=name_kv, bits_psum=bits_p,
    )  # fmt: skip
    return b.build()


def iter_transformer_segments(
    shape: ModelShape,
    *,
    phase: Literal["prefill", "decode"],
    tokens: int,
    decode_steps: int = 1,
    fmt_weight: Fmt,
    fmt_act: Fmt,
    fmt_kv: Fmt,
    tiles: WorkloadTiles,
    causal: bool = True,
    lm_head: Literal["all_tokens", "last_token", "none"] = "all_tokens",
    workload: Mapping[str, Any] | None = None,
    config_digest: str | None = None,
) -> Iterator[TraceSegment]:
    """The traces of a prefill pass or of decode steps, one at a time (module docstring).

    Per layer, in order: ``q_proj`` (E -> heads x head_dim), ``k_proj`` and ``v_proj``
    (E -> kv_heads x head_dim, written to the KV cache in ``fmt_kv``), ``attention``
    (:func:`attention_trace`), ``o_proj`` (heads x head_dim -> E), ``gate_up_proj``
    (E -> 2M, gate and up channels interleaved per half tile, the SwiGLU epilogue writes M
    outputs), ``down_proj`` (M -> E); then ``lm_head`` (E -> V, FP16 logits). Linear outputs are
    written in ``fmt_act`` (the output quantizer). Element-wise work outside the attention
    softmax (RMSNorm, residual adds, rotary embedding) is not traced.

    Args:
        shape: the model.
        phase: ``"prefill"`` (``tokens`` prompt tokens) or ``"decode"`` (``decode_steps``
            single-token steps; step ``s`` attends ``tokens + s + 1`` keys).
        tokens: prompt length (prefill) or context already cached (decode).
        decode_steps: decode steps (decode only).
        fmt_weight: weight format. fmt_act: activation format. fmt_kv: KV-cache format.
        tiles: the accelerator tiles.
        causal: skip fully masked attention tiles (prefill).
        lm_head: logits for every token (``"all_tokens"``, the [R-PM] accounting), only the
            last one, or no LM head.
        workload: extra JSON metadata for every trace.
        config_digest: digest of the architecture config the tiles come from, stamped on every
            trace (``Trace.meta["config_digest"]``).

    Yields:
        The segments in execution order; a layer's segments have ``repeat = layers``. Each
        trace is built when it is asked for, so a caller that drops it keeps memory low.
    """
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase={phase!r}; valid choices: 'prefill', 'decode'")
    if lm_head not in ("all_tokens", "last_token", "none"):
        raise ValueError(f"lm_head={lm_head!r}; valid: 'all_tokens', 'last_token', 'none'")
    for name, v in (("tokens", tokens), ("decode_steps", decode_steps)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    return _segments(
        shape, phase, tokens, decode_steps, fmt_weight, fmt_act, fmt_kv, tiles, causal, lm_head,
        workload, config_digest,
    )  # fmt: skip


def _segments(
    shape: ModelShape,
    phase: str,
    tokens: int,
    decode_steps: int,
    fmt_weight: Fmt,
    fmt_act: Fmt,
    fmt_kv: Fmt,
    tiles: WorkloadTiles,
    causal: bool,
    lm_head: str,
    workload: Mapping[str, Any] | None,
    config_digest: str | None,
) -> Iterator[TraceSegment]:
    steps = range(decode_steps) if phase == "decode" else range(1)
    # Format names that depend on the tensor's role (HBQ) are resolved once, with their role,
    # so that e.g. k_proj writes the KV format, not the activation format of the same name.
    fmt_weight = _with_role(fmt_weight, "weight")
    fmt_act = _with_role(fmt_act, "activation")
    fmt_kv = _with_role(fmt_kv, "kv")
    bits_act = operand_storage(fmt_act, "activation")[1]
    e, m, v = shape.hidden, shape.intermediate, shape.vocab
    common: dict[str, Any] = dict(  # the tiling arguments every GEMM of the model shares
        tile_m=tiles.tile_m,
        tile_n=tiles.tile_n,
        tile_k=tiles.tile_k,
        order="mnk",
        psum_mode=tiles.psum_mode,
        sa_n=tiles.sa_n,
        n_buffers=tiles.n_buffers,
        config_digest=config_digest,
    )
    for step in steps:
        n_q = tokens if phase == "prefill" else 1
        q_start = 0 if phase == "prefill" else tokens + step
        meta = {"phase": phase, "tokens": int(tokens), "step": int(step), **dict(workload or {})}

        def lin(
            name: str,
            n: int,
            k: int,
            a: str,
            w: str,
            y: str,
            out_fmt: Fmt,
            *,
            n_q: int = n_q,
            meta: dict[str, Any] = meta,
            step: int = step,
            **kw: Any,
        ) -> TraceSegment:
            t = gemm_trace(
                n_q, n, k, fmt_act, fmt_weight, out=out_fmt,
                tensors=(a, w, f"{name}.psum", y), workload={**meta, "gemm": name},
                a_resident=tiles.a_resident(n_q, k, bits_act), **common, **kw,
            )  # fmt: skip
            return TraceSegment(name, "linear", shape.layers, step, t)

        yield lin("q_proj", shape.q_dim, e, "x", "wq", "q", fmt_act)
        yield lin("k_proj", shape.kv_dim, e, "x", "wk", "k_cache", fmt_kv)
        yield lin("v_proj", shape.kv_dim, e, "x", "wv", "v_cache", fmt_kv)
        att = attention_trace(
            kv_heads=shape.kv_heads,
            group=shape.group,
            head_dim=shape.head_dim,
            q_tokens=n_q,
            q_start=q_start,
            n_keys=q_start + n_q,
            causal=causal,
            fmt_act=fmt_act,
            fmt_kv=fmt_kv,
            tiles=tiles,
            workload={**meta, "gemm": "attention"},
            config_digest=config_digest,
        )
        yield TraceSegment("attention", "attention", shape.layers, step, att)
        yield lin("o_proj", e, shape.q_dim, "attn_out", "wo", "x2", fmt_act)
        yield lin(
            "gate_up_proj", 2 * m, e, "x3", "w_gate_up", "h", fmt_act,
            out_cols_per_n=Fraction(1, 2),
        )  # fmt: skip
        yield lin("down_proj", e, m, "h", "w_down", "x4", fmt_act)
        if lm_head != "none":
            n_lm = n_q if lm_head == "all_tokens" else 1
            t = gemm_trace(
                n_lm, v, e, fmt_act, fmt_weight, out="fp16",
                tensors=("x_final", "w_lm_head", "lm_head.psum", "logits"),
                workload={**meta, "gemm": "lm_head"},
                a_resident=tiles.a_resident(n_lm, e, bits_act), **common,
            )  # fmt: skip
            yield TraceSegment("lm_head", "lm_head", 1, step, t)


def transformer_segments(shape: ModelShape, **kwargs: Any) -> tuple[TraceSegment, ...]:
    """All segments of :func:`iter_transformer_segments` (same arguments), as a tuple.

    Args:
        shape: the model.
        **kwargs: the keyword arguments of :func:`iter_transformer_segments`.

    Returns:
        The segments in execution order.
    """
    return tuple(iter_transformer_segments(shape, **kwargs))
