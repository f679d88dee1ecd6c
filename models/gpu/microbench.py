"""Microbenchmark traces for the GPU memory-hierarchy simulator.

Each generator returns a :class:`~coaccel.trace.Trace` (docs/trace.md) of kernels with launch
geometry, strided memory runs and a tensor map: the same shapes as the microbenchmarks the
simulator is validated against (measured anchors in docs/gpu_mem.md, [S12]):

* :func:`streaming_read`: a read-only sweep over a working set by a grid of CTAs, in tiles, for
  a number of passes (pass 1 warms the L2; later passes show the L2 or DRAM plateau);
* :func:`pointer_chase`: one warp following a random cyclic permutation of lines (every load
  depends on the previous one), after an optional warm-up walk: latency per level;
* :func:`host_copy` and :func:`bidirectional_copy`: copy-engine transfers (``memcpy_h2d`` /
  ``memcpy_d2h`` kernels reading ``HOST`` and writing ``HBM`` or back), pinned or pageable;
* :func:`zero_copy_read`: a kernel whose CTAs read pinned host memory in strided rows;
* :func:`copy_compute_overlap`: a streaming kernel on one stream and an H2D copy on another;
* :func:`splitk_decode_traffic`: the memory traffic of split-K decode attention
  (FlashDecoding's grid, K/V tiles token-major, partials and the reduction) without numerics.

No I/O; every random choice takes a seed. :data:`GENERATORS` maps workload-spec names to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from coaccel.spine.trace import Trace, TraceBuilder

from ._trace import CopyDirection, emit_host_copy

__all__ = [
    "GENERATORS",
    "bidirectional_copy",
    "copy_compute_overlap",
    "host_copy",
    "pointer_chase",
    "splitk_decode_traffic",
    "streaming_read",
    "zero_copy_read",
]

PRODUCER = "coaccel.models.gpu.microbench"


def _stream_kernel(
    b: TraceBuilder,
    *,
    tensor: str,
    working_set_bytes: int,
    ctas: int,
    tile_bytes: int,
    threads_per_cta: int,
    name: str,
    stream: int = 0,
    reads: int = 1,
) -> None:
    n_tiles = -(-working_set_bytes // tile_bytes)
    kid = b.begin_kernel(name, stream=stream, ctas=ctas, threads_per_cta=threads_per_cta)
    # ``reads`` sweeps in one grid-stride loop: step j reads tile j % n_tiles
    j = np.arange(n_tiles * reads, dtype=np.int64)
    t = j % n_tiles
    nbytes = np.minimum(tile_bytes, working_set_bytes - t * tile_bytes)
    # grid-stride order: step j is done by CTA j % ctas in its iteration j // ctas
    b.memory_many(
        kernel=kid, cta=j % ctas, space="HBM", rw="r", tensor=tensor, phase="load",
        addr=t * tile_bytes, nbytes=nbytes, stride=nbytes, count=1, stream=stream,
    )  # fmt: skip
    b.end_kernel(kid, name=name, stream=stream)


def streaming_read(
    working_set_bytes: int,
    *,
    ctas: int = 264,
    tile_bytes: int = 16384,
    threads_per_cta: int = 256,
    passes: int = 2,
    reads_per_pass: int = 1,
) -> Trace:
    """A read-only sweep over a working set, ``passes`` times (one kernel per pass).

    Args:
        working_set_bytes: bytes of the buffer, B (>= 1).
        ctas: grid size; CTA ``c`` reads tiles ``c, c + ctas, ...`` (grid-stride loop).
        tile_bytes: bytes one CTA loads per step (one record), B.
        threads_per_cta: threads per CTA.
        passes: sweeps (kernels ``stream_pass0``, ``stream_pass1``, ...).
        reads_per_pass: times each kernel reads the whole set in its grid-stride loop (a
            long kernel over an L2-resident set, as a cache-bandwidth benchmark runs it).

    Returns:
        The trace; tensor ``buf`` in HBM.
    """
    if working_set_bytes < 1 or ctas < 1 or tile_bytes < 1 or passes < 1 or reads_per_pass < 1:
        raise ValueError(
            "working_set_bytes, ctas, tile_bytes, passes and reads_per_pass must be >= 1"
        )
    workload: dict[str, Any] = {
        "microbench": "streaming_read", "working_set_bytes": working_set_bytes, "ctas": ctas,
        "tile_bytes": tile_bytes, "passes": passes,
    }  # fmt: skip
    if reads_per_pass != 1:
        workload["reads_per_pass"] = reads_per_pass
    b = TraceBuilder(producer=PRODUCER, workload=workload, config_digest=None, seed=None)
    b.allocate("buf", space="HBM", nbytes=working_set_bytes)
    for p in range(passes):
        _stream_kernel(
            b, tensor="buf", working_set_bytes=working_set_bytes, ctas=ctas,
            tile_bytes=tile_bytes, threads_per_cta=threads_per_cta, name=f"stream_pass{p}",
            reads=reads_per_pass,
        )  # fmt: skip
    return b.build()


def pointer_chase(
    working_set_bytes: int,
    *,
    steps: int = 4096,
    line_bytes: int = 128,
    warm: bool = True,
    seed: int = 0,
) -> Trace:
    """One warp chasing pointers through a random cyclic permutation of lines.

    Element ``i`` (one 8-B pointer at the start of line ``i``) points to ``perm[i]``; the walk
    visits every line once per cycle. Kernel ``chase_warm`` (when ``warm``) walks one full
    cycle; kernel ``chase`` then makes ``steps`` dependent loads: its time / ``steps`` is the
    latency of the level the working set lives in. A working set that fits an SM's L1 is
    served from L1 only from the measured kernel's second lap on: take ``steps`` well above
    the line count there (the first lap is then a small share).

    Args:
        working_set_bytes: bytes of the buffer, B (>= 2 lines).
        steps: dependent loads of the measured kernel.
        line_bytes: spacing of the pointers, B.
        warm: walk the whole cycle first.
        seed: seed of the permutation.

    Returns:
        The trace; tensor ``chain`` in HBM.
    """
    n = working_set_bytes // line_bytes
    if n < 2 or steps < 1:
        raise ValueError("pointer_chase needs at least 2 lines and 1 step")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)  # the cycle order of lines
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "pointer_chase", "working_set_bytes": working_set_bytes,
                  "steps": steps, "line_bytes": line_bytes, "warm": warm},
        config_digest=None, seed=seed,
    )  # fmt: skip
    b.allocate("chain", space="HBM", nbytes=n * line_bytes)

    def walk(name: str, k: int) -> None:
        kid = b.begin_kernel(name, ctas=1, threads_per_cta=32)
        first = b.next_seq
        idx = order[np.arange(k) % n]
        seq = first + np.arange(k, dtype=np.int64)
        dep = np.concatenate([[-1], seq[:-1]])
        b.memory_many(
            seq=seq, kernel=kid, cta=0, space="HBM", rw="r", tensor="chain", phase="chase",
            addr=idx * line_bytes, nbytes=8, count=1, dep=dep,
        )  # fmt: skip
        b.end_kernel(kid, name=name)

    if warm:
        walk("chase_warm", n)
    walk("chase", steps)
    return b.build()


def _copy_kernel(
    b: TraceBuilder, direction: CopyDirection, nbytes: int, stream: int, pinned: bool
) -> None:
    name = f"memcpy_{direction}" + ("" if pinned else "_pageable")
    with b.kernel(name, stream=stream) as kid:
        emit_host_copy(b, direction, kernel=kid, host_tensor=f"{direction}_buf",
                       device_tensor=f"{direction}_buf", nbytes=nbytes, stream=stream)  # fmt: skip


def host_copy(nbytes: int, *, direction: str = "h2d", pinned: bool = True) -> Trace:
    """One copy-engine transfer of ``nbytes`` between host and device memory.

    Args:
        nbytes: bytes, B (>= 0).
        direction: ``"h2d"`` or ``"d2h"``.
        pinned: pinned host memory (False: pageable).

    Returns:
        A trace with one kernel ``memcpy_<direction>[_pageable]``.
    """
    if direction not in ("h2d", "d2h"):
        raise ValueError(f"direction must be 'h2d' or 'd2h', got {direction!r}")
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "host_copy", "nbytes": nbytes, "direction": direction,
                  "pinned": pinned},
        config_digest=None, seed=None,
    )  # fmt: skip
    _copy_kernel(b, "h2d" if direction == "h2d" else "d2h", nbytes, 0, pinned)
    return b.build()


def bidirectional_copy(nbytes: int, *, pinned: bool = True) -> Trace:
    """An H2D copy on stream 1 and a D2H copy of the same size on stream 2, concurrently."""
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "bidirectional_copy", "nbytes": nbytes, "pinned": pinned},
        config_digest=None, seed=None,
    )  # fmt: skip
    _copy_kernel(b, "h2d", nbytes, 1, pinned)
    _copy_kernel(b, "d2h", nbytes, 2, pinned)
    return b.build()


def zero_copy_read(
    nbytes: int,
    *,
    row_bytes: int = 256,
    stride_bytes: int = 2048,
    ctas: int = 132,
    rows_per_record: int = 64,
) -> Trace:
    """A kernel whose CTAs read pinned host memory directly, in strided rows (NOSI style).

    Args:
        nbytes: bytes read, B (a multiple of ``row_bytes``).
        row_bytes: bytes per row, B.
        stride_bytes: bytes between row starts in host memory, B (>= ``row_bytes``).
        ctas: grid size; records go to CTAs round-robin.
        rows_per_record: rows one CTA loads per step.

    Returns:
        A trace with one kernel ``zero_copy``; tensor ``host_kv`` in HOST.
    """
    rows = nbytes // row_bytes
    if rows < 1 or stride_bytes < row_bytes:
        raise ValueError("zero_copy_read needs nbytes >= row_bytes and stride_bytes >= row_bytes")
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "zero_copy_read", "nbytes": nbytes, "row_bytes": row_bytes,
                  "stride_bytes": stride_bytes, "ctas": ctas},
        config_digest=None, seed=None,
    )  # fmt: skip
    b.allocate("host_kv", space="HOST", nbytes=(rows - 1) * stride_bytes + row_bytes)
    n_rec = -(-rows // rows_per_record)
    r = np.arange(n_rec, dtype=np.int64)
    cnt = np.minimum(rows_per_record, rows - r * rows_per_record)
    with b.kernel("zero_copy", ctas=ctas, threads_per_cta=256) as kid:
        b.memory_many(
            kernel=kid, cta=r % ctas, space="HOST", rw="r", tensor="host_kv", phase="load",
            addr=r * rows_per_record * stride_bytes, nbytes=row_bytes, stride=stride_bytes,
            count=cnt,
        )  # fmt: skip
    return b.build()


def copy_compute_overlap(
    copy_bytes: int, stream_bytes: int, *, ctas: int = 264, tile_bytes: int = 16384
) -> Trace:
    """A streaming HBM read on stream 0 and an H2D copy on stream 1 at the same time."""
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "copy_compute_overlap", "copy_bytes": copy_bytes,
                  "stream_bytes": stream_bytes},
        config_digest=None, seed=None,
    )  # fmt: skip
    b.allocate("buf", space="HBM", nbytes=stream_bytes)
    _stream_kernel(b, tensor="buf", working_set_bytes=stream_bytes, ctas=ctas,
                   tile_bytes=tile_bytes, threads_per_cta=256, name="stream")  # fmt: skip
    _copy_kernel(b, "h2d", copy_bytes, 1, True)
    return b.build()


def splitk_decode_traffic(
    context: int,
    *,
    batch: int = 1,
    splits: int = 0,
    q_heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    block_n: int = 128,
    elem_bytes: int = 2,
    sms: int = 132,
) -> Trace:
    """Memory traffic and tile computes of split-K decode attention, one layer, one step.

    FlashDecoding's shape: grid ``(splits, batch, kv_heads)``; each CTA reads its split's K and
    V tiles (``block_n`` tokens, token-major ``[B, T, Hkv, D]``: rows of ``D x elem_bytes``
    strided by ``Hkv x D x elem_bytes``), does two ``G x block_n x D`` tile products, and writes
    partial outputs (fp32 ``G x D``) and ``(m, l)``; a reduction kernel, grid ``(batch,
    q_heads)``, reads every split's partials and writes the output. Values are not computed.

    Args:
        context: tokens in the KV cache (>= 1).
        batch: sequences.
        splits: split count; 0 picks enough splits for two waves' worth of CTAs on ``sms``
            SMs, capped at 128 and at the tile count.
        q_heads: query heads. kv_heads: KV heads. head_dim: D.
        block_n: tokens per tile. elem_bytes: bytes per K/V element.
        sms: SMs the automatic split count aims at.

    Returns:
        The trace (tensors ``q``, ``K``, ``V``, ``o_part``, ``ml``, ``o`` in HBM).
    """
    G = q_heads // kv_heads
    tiles = -(-context // block_n)
    if splits <= 0:
        splits = max(1, min(128, tiles, -(-2 * sms // (batch * kv_heads))))
    tiles_per_split = -(-tiles // splits)
    splits = -(-tiles // tiles_per_split)
    row = head_dim * elem_bytes
    tok_stride = kv_heads * row
    b = TraceBuilder(
        producer=PRODUCER,
        workload={"microbench": "splitk_decode_traffic", "context": context, "batch": batch,
                  "splits": splits, "q_heads": q_heads, "kv_heads": kv_heads,
                  "head_dim": head_dim, "block_n": block_n},
        config_digest=None, seed=None,
    )  # fmt: skip
    kv_bytes = batch * context * tok_stride
    b.allocate("q", space="HBM", nbytes=batch * q_heads * row)
    b.allocate("K", space="HBM", nbytes=kv_bytes)
    b.allocate("V", space="HBM", nbytes=kv_bytes)
    part = batch * q_heads * splits * head_dim * 4
    b.allocate("o_part", space="HBM", nbytes=part)
    b.allocate("ml", space="HBM", nbytes=batch * q_heads * splits * 8)
    b.allocate("o", space="HBM", nbytes=batch * q_heads * row)
    ctas = splits * batch * kv_heads
    smem = 2 * block_n * row + 16 * row  # two K/V tile stages + the padded query group
    kid = b.begin_kernel("flash_decode_splitk", ctas=ctas, threads_per_cta=128,
                         smem_bytes_per_cta=smem, regs_per_thread=128)  # fmt: skip
    grid = np.meshgrid(np.arange(splits), np.arange(batch), np.arange(kv_heads), indexing="ij")
    s, bb, h = (g.ravel() for g in grid)
    cta = (s * batch + bb) * kv_heads + h
    # per CTA: q read, then per tile K then V, then the partial writes (seq order = issue)
    q_addr = (bb * q_heads + h * G) * row
    b.memory_many(kernel=kid, cta=cta, space="HBM", rw="r", tensor="q", phase="load_q",
                  addr=q_addr, nbytes=G * row)  # fmt: skip
    t_loc = np.arange(tiles_per_split)
    tile = s[:, None] * tiles_per_split + t_loc[None, :]
    ok = tile < tiles
    c2 = np.broadcast_to(cta[:, None], tile.shape)[ok]
    b2 = np.broadcast_to(bb[:, None], tile.shape)[ok]
    h2 = np.broadcast_to(h[:, None], tile.shape)[ok]
    t2 = tile[ok]
    tok0 = t2 * block_n
    cnt = np.minimum(block_n, context - tok0)
    addr = ((b2 * context + tok0) * kv_heads + h2) * row
    n = t2.size
    base = b.next_seq
    # issue order within the kernel: tile by tile (K, QK^T, V, PV) across all CTAs
    order = np.lexsort((c2, t2 - np.repeat(s, ok.sum(axis=1)) * tiles_per_split))
    seq = np.empty((n, 4), dtype=np.int64)
    seq[order] = base + 4 * np.arange(n)[:, None] + np.arange(4)[None, :]
    b.memory_many(seq=seq[:, 0], kernel=kid, cta=c2, space="HBM", rw="r", tensor="K",
                  phase="attend", addr=addr, nbytes=row, stride=tok_stride, count=cnt)  # fmt: skip
    b.compute_many(seq=seq[:, 1], kernel=kid, cta=c2, op="gemm", unit="tensor_core", m=G,
                   n=cnt, k=head_dim, fmt_a="bf16", fmt_b="bf16", dep=seq[:, 0])  # fmt: skip
    b.memory_many(seq=seq[:, 2], kernel=kid, cta=c2, space="HBM", rw="r", tensor="V",
                  phase="attend", addr=addr, nbytes=row, stride=tok_stride, count=cnt)  # fmt: skip
    b.compute_many(seq=seq[:, 3], kernel=kid, cta=c2, op="gemm", unit="tensor_core", m=G,
                   n=head_dim, k=cnt, fmt_a="bf16", fmt_b="bf16", dep=seq[:, 2])  # fmt: skip
    # partial O [B, Hq, splits, D] fp32 and (m, l) [B, Hq, splits, 2] fp32 for the G heads
    hq0 = h * G
    po = ((bb * q_heads + hq0) * splits + s) * head_dim * 4
    b.memory_many(kernel=kid, cta=cta, space="HBM", rw="w", tensor="o_part", phase="store",
                  addr=po, nbytes=head_dim * 4, stride=splits * head_dim * 4, count=G)  # fmt: skip
    pm = ((bb * q_heads + hq0) * splits + s) * 8
    b.memory_many(kernel=kid, cta=cta, space="HBM", rw="w", tensor="ml", phase="store",
                  addr=pm, nbytes=8, stride=splits * 8, count=G)  # fmt: skip
    b.end_kernel(kid, name="flash_decode_splitk")
    rk = b.begin_kernel("flash_decode_reduce", ctas=batch * q_heads, threads_per_cta=128)
    rgrid = np.meshgrid(np.arange(batch), np.arange(q_heads), indexing="ij")
    rb, rh = (g.ravel() for g in rgrid)
    rc = rb * q_heads + rh
    b.memory_many(kernel=rk, cta=rc, space="HBM", rw="r", tensor="ml", phase="merge",
                  addr=(rb * q_heads + rh) * splits * 8, nbytes=splits * 8)  # fmt: skip
    b.memory_many(kernel=rk, cta=rc, space="HBM", rw="r", tensor="o_part", phase="merge",
                  addr=(rb * q_heads + rh) * splits * head_dim * 4,
                  nbytes=splits * head_dim * 4)  # fmt: skip
    b.memory_many(kernel=rk, cta=rc, space="HBM", rw="w", tensor="o", phase="store",
                  addr=(rb * q_heads + rh) * row, nbytes=row)  # fmt: skip
    b.end_kernel(rk, name="flash_decode_reduce")
    return b.build()


def _int(v: str) -> int:
    return int(float(v)) if "e" in v.lower() and not v.lower().startswith("0x") else int(v, 0)


GENERATORS: dict[str, tuple[Callable[..., Trace], dict[str, Callable[[str], Any]]]] = {
    "stream": (
        streaming_read,
        {"working_set_bytes": _int, "ctas": _int, "tile_bytes": _int, "passes": _int},
    ),
    "chase": (
        pointer_chase,
        {
            "working_set_bytes": _int,
            "steps": _int,
            "line_bytes": _int,
            "seed": _int,
            "warm": lambda v: v.lower() in ("1", "true", "yes"),
        },
    ),  # fmt: skip
    "h2d": (
        lambda nbytes, pinned=True: host_copy(nbytes, direction="h2d", pinned=pinned),
        {"nbytes": _int, "pinned": lambda v: v.lower() in ("1", "true", "yes")},
    ),  # fmt: skip
    "d2h": (
        lambda nbytes, pinned=True: host_copy(nbytes, direction="d2h", pinned=pinned),
        {"nbytes": _int, "pinned": lambda v: v.lower() in ("1", "true", "yes")},
    ),  # fmt: skip
    "bidir": (bidirectional_copy, {"nbytes": _int}),
    "zerocopy": (
        zero_copy_read,
        {"nbytes": _int, "row_bytes": _int, "stride_bytes": _int, "ctas": _int},
    ),
    "overlap": (copy_compute_overlap, {"copy_bytes": _int, "stream_bytes": _int}),
    "splitk": (
        splitk_decode_traffic,
        {"context": _int, "batch": _int, "splits": _int, "block_n": _int, "sms": _int},
    ),  # fmt: skip
}
"""Workload-spec name -> (generator, parameter parsers): ``"stream:working_set_bytes=1e9"``."""
