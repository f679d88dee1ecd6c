"""Calibration measurements for coaccel's GPU memory-hierarchy model, in one PyTorch script.

Run it on the GPU to calibrate (a few minutes; every section has a time budget so that the
whole run stays under about 6 minutes)::

    python benchmarks/gpu_calibration.py --out DIR          # or: OUT=DIR python ...
    coaccel gpu-calibrate DIR/gpu_calibration.csv --gpu h200 --out FITTED_DIR

It needs PyTorch with CUDA; Triton (shipped with PyTorch's Linux wheels) adds the measurements
that need a hand-written kernel: bandwidth against working-set size and against the number of
CTAs, the pointer chase and zero-copy reads of pinned host memory. Nothing else is imported, so
the script runs on a bare machine without coaccel.

Sections (docs/gpu_decode.md, Calibration):

1. ``stream_read`` — read-only kernel over a working set of 1 MiB ... 4 GiB, each CTA re-reading
   its chunk (L1 bypassed), so small sets stream from L2 and large ones from DRAM;
   ``stream_read_ctas`` — a 1 GiB read with 1 ... 8 x SMs CTAs and two tile sizes (bytes in
   flight per CTA); ``stream_read_torch`` and ``stream_copy`` — ``sum`` and ``copy_`` of
   large tensors (no Triton needed).
2. ``pointer_chase`` — one warp follows a random cyclic permutation of 128-B lines over
   16 KiB ... 1 GiB: latency per load, per level.
3. ``h2d_pinned``, ``d2h_pinned``, ``h2d_pageable``, ``d2h_pageable`` (4 KiB ... 256 MiB, GPU
   time from CUDA events), ``h2d_pinned_wall`` (host wall time of a synchronous copy),
   ``bidir_h2d`` / ``bidir_d2h`` (both directions at once), ``zero_copy_256B`` /
   ``zero_copy_16KiB`` (a kernel reading pinned host memory in 256-B rows 2 KiB apart, or in
   16-KiB blocks).
4. ``decode_attention`` — FlashDecoding-shaped attention (32 query heads, 8 KV heads of 128,
   bf16, token-major ``[B, T, Hkv, D]`` cache) for B = 1 and 8, T = 1K ... 256K, L2 flushed
   before every run (flash-attn's ``flash_attn_with_kvcache`` when installed, else
   ``scaled_dot_product_attention`` with the G query heads of a group packed as query rows);
   ``block_gather`` — gathering 64- and 128-token blocks of K and V at keep ratios
   2/5/10/25 % (the access pattern of block-sparse decode).
5. ``overlap_*`` — a bandwidth-bound kernel and 17 MB host-to-device copies, alone and
   concurrently on two streams.

Outputs in the output folder (written atomically): ``gpu_calibration.csv`` (the columns of
:data:`CSV_COLUMNS`, one measured point per row), ``gpu_calibration_info.json`` (GPU, driver,
CUDA, PyTorch/Triton versions, PCIe link generation and width, clocks, power, skipped
sections and why) and ``nvidia_smi_q.txt`` (``nvidia-smi -q``).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CSV_SCHEMA_VERSION = 1
"""Version of the CSV layout; ``coaccel gpu-calibrate`` checks the header against it."""

CSV_COLUMNS = (
    "experiment",  # one of EXPERIMENTS
    "device",  # GPU name as the driver reports it (or the published system of a cited row)
    "size_bytes",  # working set / transfer size / KV-cache bytes of the point, B
    "ctas",  # CTAs launched by the kernel (0: chosen by the library)
    "batch",  # decode batch B (0: not a decode row)
    "context_tokens",  # decode context T (0: not a decode row)
    "block_tokens",  # tokens per gathered block (0: not a gather row)
    "keep_ratio",  # fraction of blocks kept by a gather row (1: everything)
    "repeats",  # timed repetitions behind the median
    "time_s",  # median time of one repetition, s
    "bytes_moved",  # bytes one repetition reads + writes, B
    "bw_bytes_per_s",  # bytes_moved / time_s, B/s (0 where not meaningful)
    "latency_ns",  # pointer chase: time per dependent load, ns (0 otherwise)
    "sm_clock_mhz",  # SM clock of the run (the maximum nvidia-smi reports), MHz (0: unknown)
    "source",  # where the row comes from: "measured <date> <script>" or a reference key
    "note",  # backend, kernel settings, anything a reader needs to interpret the row
)
"""The CSV columns, in order (schema version :data:`CSV_SCHEMA_VERSION`)."""

EXPERIMENTS = (
    "stream_read",
    "stream_read_ctas",
    "stream_read_torch",
    "stream_copy",
    "pointer_chase",
    "h2d_pinned",
    "d2h_pinned",
    "h2d_pageable",
    "d2h_pageable",
    "h2d_pinned_wall",
    "bidir_h2d",
    "bidir_d2h",
    "zero_copy_256B",
    "zero_copy_16KiB",
    "decode_attention",
    "block_gather",
    "overlap_kernel_alone",
    "overlap_kernel_with_copy",
    "overlap_copy_alone",
    "overlap_copy_with_kernel",
)
"""Every value the ``experiment`` column takes."""

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
TOTAL_BUDGET_S = 330.0
SECTION_BUDGET_S = {"stream": 60.0, "latency": 60.0, "host": 90.0, "decode": 120.0, "overlap": 40.0}
EXPERT_BYTES = 17_301_504  # 3 x 2048 x 1408 x 2 B: one DeepSeek-V2-Lite expert in FP16


class CalibrationError(Exception):
    """A condition that stops the run (reported as one line, exit status 2)."""


# -- small helpers -------------------------------------------------------------------------


def _log_sizes(lo: int, hi: int, per_octave: int) -> list[int]:
    """Sizes from lo to hi (B), ``per_octave`` points per doubling, rounded to 4 KiB."""
    n = round(math.log2(hi / lo) * per_octave)
    out = sorted(
        {max(4 * KIB, int(round(lo * 2 ** (i / per_octave) / 4096)) * 4096) for i in range(n + 1)}
    )
    return out


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mhz(text: str) -> float:
    """``"1980 MHz"`` -> 1980.0; 0.0 when nvidia-smi gave no number."""
    try:
        return float(str(text).split()[0])
    except (ValueError, IndexError):
        return 0.0


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"


class Recorder:
    """Collects rows and enforces the section and total time budgets."""

    def __init__(self, device: str, source: str, budget_s: float) -> None:
        self.rows: list[dict[str, Any]] = []
        self.device = device
        self.source = source
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.skipped: list[str] = []
        self._section_end = math.inf
        self._section = ""
        self.clock_mhz = 0.0

    def section(self, name: str, budget_s: float) -> None:
        self._section = name
        left = self.budget_s - (time.monotonic() - self.t0)
        self._section_end = time.monotonic() + min(budget_s, max(0.0, left))

    def time_left(self) -> bool:
        """False (and noted once per section) when the section's budget is spent."""
        if time.monotonic() < self._section_end:
            return True
        note = f"{self._section}: time budget reached, remaining points skipped"
        if note not in self.skipped:
            self.skipped.append(note)
        return False

    def add(
        self,
        experiment: str,
        *,
        time_s: float,
        bytes_moved: int,
        repeats: int,
        size_bytes: int = 0,
        ctas: int = 0,
        batch: int = 0,
        context_tokens: int = 0,
        block_tokens: int = 0,
        keep_ratio: float = 1.0,
        latency_ns: float = 0.0,
        note: str = "",
        bandwidth: bool = True,
    ) -> None:
        assert experiment in EXPERIMENTS, experiment
        bw = bytes_moved / time_s if bandwidth and time_s > 0 else 0.0
        self.rows.append(
            {
                "experiment": experiment,
                "device": self.device,
                "size_bytes": int(size_bytes),
                "ctas": int(ctas),
                "batch": int(batch),
                "context_tokens": int(context_tokens),
                "block_tokens": int(block_tokens),
                "keep_ratio": f"{keep_ratio:.6g}",
                "repeats": int(repeats),
                "time_s": f"{time_s:.9g}",
                "bytes_moved": int(bytes_moved),
                "bw_bytes_per_s": f"{bw:.9g}",
                "latency_ns": f"{latency_ns:.6g}",
                "sm_clock_mhz": f"{self.clock_mhz:g}",
                "source": self.source,
                "note": note,
            }
        )

    def csv_text(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(self.rows)
        return buf.getvalue()


# -- timing --------------------------------------------------------------------------------


def _time_gpu(
    torch: Any,
    fn: Callable[[], Any],
    repeats: int,
    *,
    before: Callable[[], Any] | None = None,
    warmup: int = 1,
) -> float:
    """Median GPU time of ``fn`` (s) from CUDA events; ``before`` runs untimed each time."""
    for _ in range(warmup):
        if before is not None:
            before()
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


# -- Triton kernels (built only when Triton imports) ----------------------------------------


def _triton_kernels() -> dict[str, Any] | None:
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001  (any import failure means: no Triton sections)
        return None

    @triton.jit
    def read_chunks(x_ptr, out_ptr, chunk_elems, reps, BLOCK: tl.constexpr):
        # Each CTA re-reads its own chunk `reps` times; .cg keeps the loads out of L1.
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * chunk_elems
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for _ in range(reps):
            for start in range(0, chunk_elems, BLOCK):
                acc += tl.load(x_ptr + base + start + offs, cache_modifier=".cg")
        tl.store(out_ptr + pid * BLOCK + offs, acc)

    @triton.jit
    def chase(next_ptr, out_ptr, start, steps):
        idx = start.to(tl.int64)
        for _ in range(steps):
            idx = tl.load(next_ptr + idx).to(tl.int64)
        tl.store(out_ptr, idx)

    @triton.jit
    def read_rows(x_ptr, out_ptr, rows_per_cta, row_stride, ROW: tl.constexpr):
        # int32 units: row i of CTA p starts at element (p * rows_per_cta + i) * row_stride.
        pid = tl.program_id(0)
        offs = tl.arange(0, ROW)
        acc = tl.zeros((ROW,), dtype=tl.int32)
        for i in range(rows_per_cta):
            row = pid.to(tl.int64) * rows_per_cta + i
            acc += tl.load(x_ptr + row * row_stride + offs)
        tl.store(out_ptr + pid * ROW + offs, acc)

    return {"triton": triton, "read_chunks": read_chunks, "chase": chase, "read_rows": read_rows}


# -- sections ------------------------------------------------------------------------------


def stream_section(torch: Any, rec: Recorder, kernels: dict[str, Any] | None, n_sms: int) -> None:
    """Bandwidth against working-set size and against CTAs; torch-only plateaus."""
    max_ws = 4 * GIB
    x = torch.ones(max_ws // 4, dtype=torch.float32, device="cuda")
    if kernels is not None:
        read_chunks = kernels["read_chunks"]
        block = 1024  # fp32 elements per load step: 4 KiB in flight per CTA
        ctas = 4 * n_sms
        out = torch.empty(ctas * 4096, dtype=torch.float32, device="cuda")
        for ws in _log_sizes(MIB, max_ws, 4):
            if not rec.time_left():
                break
            chunk = max(block, (ws // 4 // ctas) // block * block)
            ws_eff = chunk * ctas * 4
            reps = max(1, min(256, (2 * GIB) // ws_eff))

            def run(chunk: int = chunk, reps: int = reps) -> None:
                read_chunks[(ctas,)](x, out, chunk, reps, BLOCK=block)

            t = _time_gpu(torch, run, 5)
            rec.add(
                "stream_read",
                time_s=t,
                bytes_moved=ws_eff * reps,
                repeats=5,
                size_bytes=ws_eff,
                ctas=ctas,
                note=f"triton read, {reps} passes over the set, 4 KiB per CTA load step, .cg",
            )
        ws = GIB
        for block in (1024, 4096):
            for mult in (
                1 / 132,
                2 / 132,
                4 / 132,
                8 / 132,
                16 / 132,
                33 / 132,
                0.25,
                0.5,
                1,
                2,
                4,
                8,
            ):
                if not rec.time_left():
                    break
                n = max(1, round(mult * n_sms))
                chunk = (ws // 4 // n) // block * block
                out_c = torch.empty(n * block, dtype=torch.float32, device="cuda")

                def run_c(
                    n: int = n, chunk: int = chunk, block: int = block, out_c: Any = out_c
                ) -> None:
                    read_chunks[(n,)](x, out_c, chunk, 1, BLOCK=block)

                t = _time_gpu(torch, run_c, 3)
                rec.add(
                    "stream_read_ctas",
                    time_s=t,
                    bytes_moved=chunk * n * 4,
                    repeats=3,
                    size_bytes=chunk * n * 4,
                    ctas=n,
                    note=f"triton read, {block * 4} B per CTA load step",
                )
    else:
        rec.skipped.append("stream_read, stream_read_ctas: Triton is not available")
    for ws in (256 * MIB, GIB, 4 * GIB):
        if not rec.time_left():
            break
        v = x[: ws // 4]
        t = _time_gpu(torch, lambda v=v: v.sum(), 5)
        rec.add(
            "stream_read_torch",
            time_s=t,
            bytes_moved=ws,
            repeats=5,
            size_bytes=ws,
            note="torch.sum over fp32",
        )
    for ws in (256 * MIB, GIB):
        if not rec.time_left():
            break
        a = torch.empty(ws, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        t = _time_gpu(torch, lambda a=a, b=b: b.copy_(a), 5)
        rec.add(
            "stream_copy",
            time_s=t,
            bytes_moved=2 * ws,
            repeats=5,
            size_bytes=ws,
            note="torch copy_, read + write",
        )
        del a, b
    torch.cuda.empty_cache()


def latency_section(torch: Any, rec: Recorder, kernels: dict[str, Any] | None, seed: int) -> None:
    """Pointer chase: one warp, random cyclic permutation of 128-B lines."""
    if kernels is None:
        rec.skipped.append("pointer_chase: Triton is not available")
        return
    chase = kernels["chase"]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = torch.empty(1, dtype=torch.int64, device="cuda")
    steps = 20_000
    for ws in _log_sizes(16 * KIB, GIB, 3):
        if not rec.time_left():
            break
        n_lines = ws // 128
        perm = torch.randperm(n_lines, generator=gen).to("cuda")
        nxt = torch.zeros(n_lines * 32, dtype=torch.int32, device="cuda")
        nxt[perm * 32] = (torch.roll(perm, -1) * 32).to(torch.int32)
        start = int(perm[0].item()) * 32
        warm = min(n_lines, 400_000)
        chase[(1,)](nxt, out, start, warm, num_warps=1)  # bring the set into the caches
        torch.cuda.synchronize()
        t = _time_gpu(
            torch,
            lambda nxt=nxt, start=start: chase[(1,)](nxt, out, start, steps, num_warps=1),
            3,
            warmup=0,
        )
        # the same launch with one load: what the kernel costs apart from the chain
        t1 = _time_gpu(
            torch,
            lambda nxt=nxt, start=start: chase[(1,)](nxt, out, start, 1, num_warps=1),
            3,
            warmup=0,
        )
        rec.add(
            "pointer_chase",
            time_s=t,
            bytes_moved=0,
            repeats=3,
            size_bytes=ws,
            ctas=1,
            latency_ns=max(t - t1, 0.0) / (steps - 1) * 1e9,
            bandwidth=False,
            note=f"triton, 1 warp, {steps} dependent 4-B loads, one per 128-B line; "
            "latency = (t(steps) - t(1)) / (steps - 1)",
        )
        del nxt, perm
    torch.cuda.empty_cache()


def host_section(torch: Any, rec: Recorder, kernels: dict[str, Any] | None, n_sms: int) -> None:
    """Copies over the host link (pinned, pageable, both directions) and zero-copy reads."""
    sizes = _log_sizes(4 * KIB, 256 * MIB, 2)
    big = sizes[-1]
    h_pin = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    h_page = torch.empty(big, dtype=torch.uint8)
    d = torch.empty(big, dtype=torch.uint8, device="cuda")
    h_pin.fill_(1)
    h_page.fill_(1)
    for size in sizes:
        if not rec.time_left():
            break
        reps = 20 if size <= 4 * MIB else 5
        hp, hg, dv = h_pin[:size], h_page[:size], d[:size]
        for name, fn in (
            ("h2d_pinned", lambda dv=dv, hp=hp: dv.copy_(hp, non_blocking=True)),
            ("d2h_pinned", lambda dv=dv, hp=hp: hp.copy_(dv, non_blocking=True)),
            ("h2d_pageable", lambda dv=dv, hg=hg: dv.copy_(hg)),
            ("d2h_pageable", lambda dv=dv, hg=hg: hg.copy_(dv)),
        ):
            t = _time_gpu(torch, fn, reps)
            rec.add(
                name,
                time_s=t,
                bytes_moved=size,
                repeats=reps,
                size_bytes=size,
                note="copy_, CUDA-event time",
            )
        walls = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dv.copy_(hp)
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t0)
        rec.add(
            "h2d_pinned_wall",
            time_s=statistics.median(walls),
            bytes_moved=size,
            repeats=reps,
            size_bytes=size,
            note="synchronous copy_, host wall time",
        )
    # both directions at once on two streams
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    d2 = torch.empty(big, dtype=torch.uint8, device="cuda")
    h2 = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    for size in (16 * MIB, 64 * MIB, 256 * MIB):
        if not rec.time_left():
            break
        t_h2d, t_d2h = [], []
        for _ in range(5):
            torch.cuda.synchronize()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            with torch.cuda.stream(s1):
                ev[0].record()
                d[:size].copy_(h_pin[:size], non_blocking=True)
                ev[1].record()
            with torch.cuda.stream(s2):
                ev[2].record()
                h2[:size].copy_(d2[:size], non_blocking=True)
                ev[3].record()
            torch.cuda.synchronize()
            t_h2d.append(ev[0].elapsed_time(ev[1]) * 1e-3)
            t_d2h.append(ev[2].elapsed_time(ev[3]) * 1e-3)
        for name, ts in (("bidir_h2d", t_h2d), ("bidir_d2h", t_d2h)):
            rec.add(
                name,
                time_s=statistics.median(ts),
                bytes_moved=size,
                repeats=5,
                size_bytes=size,
                note="H2D and D2H on two streams at once",
            )
    del d2, h2
    if kernels is None:
        rec.skipped.append("zero_copy: Triton is not available")
    else:
        read_rows = kernels["read_rows"]
        ctas = 4 * n_sms
        words = h_pin.view(torch.int32)
        row = 64  # int32 per row: 256 B
        # 256-B rows 2 KiB apart (one token-head of a [T, 8, 128] bf16 cache), or 16-KiB
        # blocks (64 consecutive rows per CTA step)
        for name, stride, rows_per_cta in (
            ("zero_copy_256B", 512, 128),
            ("zero_copy_16KiB", 64, 64 * 8),
        ):
            if not rec.time_left():
                break
            span = (ctas * rows_per_cta - 1) * stride + row
            if span > words.numel():
                rows_per_cta = max(1, (words.numel() - row) // stride // ctas)
                span = (ctas * rows_per_cta - 1) * stride + row
            src = words[:span]
            out = torch.empty(ctas * row, dtype=torch.int32, device="cuda")
            try:
                t = _time_gpu(
                    torch,
                    lambda src=src, out=out, rpc=rows_per_cta, st=stride: read_rows[(ctas,)](
                        src, out, rpc, st, ROW=row
                    ),
                    3,
                )
            except Exception as e:  # noqa: BLE001  (Triton may refuse host pointers)
                rec.skipped.append(f"{name}: kernel on pinned host memory failed: {e!s:.200}")
                continue
            moved = ctas * rows_per_cta * row * 4
            rec.add(
                name,
                time_s=t,
                bytes_moved=moved,
                repeats=3,
                size_bytes=moved,
                ctas=ctas,
                note=f"triton kernel reading pinned host memory, 256-B rows {stride * 4} B apart",
            )
    del h_pin, h_page, d
    torch.cuda.empty_cache()


def _attention_backend(torch: Any) -> tuple[str, Callable[..., Any]]:
    """The decode-attention call: flash-attn's kvcache kernel, or SDPA with packed GQA."""
    try:
        from flash_attn import flash_attn_with_kvcache  # type: ignore[import-not-found]

        def fa(q: Any, k: Any, v: Any, t: int) -> Any:
            # q [B, 1, Hq, D]; k, v [B, Tmax, Hkv, D]; attend to the first t tokens
            seqlens = torch.full((q.shape[0],), t, dtype=torch.int32, device=q.device)
            return flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens)

        return "flash_attn.flash_attn_with_kvcache", fa
    except Exception:  # noqa: BLE001
        pass
    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]

        def ctx() -> Any:
            return sdpa_kernel(backends)
    except Exception:  # noqa: BLE001  (older PyTorch)

        def ctx() -> Any:
            return torch.backends.cuda.sdp_kernel(enable_math=False)

    def sdpa(q: Any, k: Any, v: Any, t: int) -> Any:
        b, _, hq, d = q.shape
        hkv = k.shape[2]
        qg = q.reshape(b, hkv, hq // hkv, d)  # the G heads of a group as G query rows
        kt = k[:, :t].transpose(1, 2)  # [B, Hkv, t, D], token-major storage kept
        vt = v[:, :t].transpose(1, 2)
        with ctx():
            return F.scaled_dot_product_attention(qg, kt, vt)

    return "torch scaled_dot_product_attention (flash/efficient), GQA packed as query rows", sdpa


def decode_section(torch: Any, rec: Recorder, l2_bytes: int, seed: int) -> None:
    """W1-shaped decode attention against context, and block gathers."""
    hq, hkv, d = 32, 8, 128
    name, attend = _attention_backend(torch)
    flush = torch.empty(max(4 * l2_bytes, 256 * MIB) // 4, dtype=torch.float32, device="cuda")

    def flush_l2() -> None:
        flush.sum()  # reads only: no dirty lines left to write back during the kernel

    gen = torch.Generator(device="cuda").manual_seed(seed)
    for b in (1, 8):
        t_max = 256 * 1024
        k = torch.randn((b, t_max, hkv, d), generator=gen, device="cuda", dtype=torch.bfloat16)
        v = torch.randn((b, t_max, hkv, d), generator=gen, device="cuda", dtype=torch.bfloat16)
        q = torch.randn((b, 1, hq, d), generator=gen, device="cuda", dtype=torch.bfloat16)
        for t in (1024 * 2**i for i in range(9)):
            if not rec.time_left():
                break

            def step(t: int = t, q: Any = q, k: Any = k, v: Any = v) -> Any:
                return attend(q, k, v, t)

            t_s = _time_gpu(torch, step, 10, before=flush_l2)
            kv = 2 * b * t * hkv * d * 2
            rec.add(
                "decode_attention",
                time_s=t_s,
                bytes_moved=kv + 2 * b * hq * d * 2,
                repeats=10,
                size_bytes=kv,
                batch=b,
                context_tokens=t,
                note=f"{name}; bf16; L2 flushed before each run",
            )
        torch.cuda.empty_cache()
    b, t = 1, 128 * 1024
    k = torch.randn((b, t, hkv, d), generator=gen, device="cuda", dtype=torch.bfloat16)
    v = torch.randn((b, t, hkv, d), generator=gen, device="cuda", dtype=torch.bfloat16)
    for blk in (64, 128):
        n_blk = t // blk
        kb = k.view(b, n_blk, blk, hkv, d)
        vb = v.view(b, n_blk, blk, hkv, d)
        for keep in (0.02, 0.05, 0.10, 0.25):
            if not rec.time_left():
                break
            n_keep = max(1, round(keep * n_blk))
            idx = torch.randperm(n_blk, generator=gen, device="cuda")[:n_keep].sort().values

            def gather(idx: Any = idx, kb: Any = kb, vb: Any = vb) -> None:
                kb.index_select(1, idx)
                vb.index_select(1, idx)

            t_s = _time_gpu(torch, gather, 10, before=flush_l2)
            kept = 2 * b * n_keep * blk * hkv * d * 2
            rec.add(
                "block_gather",
                time_s=t_s,
                bytes_moved=2 * kept,
                repeats=10,
                size_bytes=kept,
                batch=b,
                context_tokens=t,
                block_tokens=blk,
                keep_ratio=n_keep / n_blk,
                note="index_select of K and V blocks (read + write); L2 flushed",
            )
    torch.cuda.empty_cache()


def overlap_section(torch: Any, rec: Recorder) -> None:
    """A bandwidth-bound kernel and 17 MB H2D copies, alone and on two streams at once."""
    x = torch.ones(GIB // 4, dtype=torch.float32, device="cuda")
    h = torch.empty(EXPERT_BYTES, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(EXPERT_BYTES, dtype=torch.uint8, device="cuda")
    n_k, n_c = 20, 20
    s_k, s_c = torch.cuda.Stream(), torch.cuda.Stream()

    def kernels() -> None:
        with torch.cuda.stream(s_k):
            for _ in range(n_k):
                x.sum()

    def copies() -> None:
        with torch.cuda.stream(s_c):
            for _ in range(n_c):
                dst.copy_(h, non_blocking=True)

    def timed(run_k: bool, run_c: bool) -> tuple[float, float]:
        torch.cuda.synchronize()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        if run_k:
            s_k.record_event(ev[0])
            kernels()
            s_k.record_event(ev[1])
        if run_c:
            s_c.record_event(ev[2])
            copies()
            s_c.record_event(ev[3])
        torch.cuda.synchronize()
        tk = ev[0].elapsed_time(ev[1]) * 1e-3 if run_k else 0.0
        tc = ev[2].elapsed_time(ev[3]) * 1e-3 if run_c else 0.0
        return tk, tc

    timed(True, True)  # warm-up
    res = {}
    for mode in ("alone", "both"):
        if not rec.time_left():
            return
        if mode == "alone":
            tk = statistics.median(timed(True, False)[0] for _ in range(3))
            tc = statistics.median(timed(False, True)[1] for _ in range(3))
        else:
            pairs = [timed(True, True) for _ in range(3)]
            tk = statistics.median(p[0] for p in pairs)
            tc = statistics.median(p[1] for p in pairs)
        res[mode] = (tk, tc)
    for mode, (tk, tc) in res.items():
        k_name = "overlap_kernel_alone" if mode == "alone" else "overlap_kernel_with_copy"
        c_name = "overlap_copy_alone" if mode == "alone" else "overlap_copy_with_kernel"
        rec.add(
            k_name,
            time_s=tk / n_k,
            bytes_moved=GIB,
            repeats=3 * n_k,
            size_bytes=GIB,
            note="torch.sum over 1 GiB fp32, per kernel",
        )
        rec.add(
            c_name,
            time_s=tc / n_c,
            bytes_moved=EXPERT_BYTES,
            repeats=3 * n_c,
            size_bytes=EXPERT_BYTES,
            note="pinned H2D copy of one 17.3 MB expert",
        )
    torch.cuda.empty_cache()


# -- info ----------------------------------------------------------------------------------


def collect_info(torch: Any, kernels: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """GPU, driver, CUDA, link and clock information; and the full ``nvidia-smi -q`` text."""
    props = torch.cuda.get_device_properties(0)
    fields = (
        "name,driver_version,pcie.link.gen.current,pcie.link.gen.max,"
        "pcie.link.width.current,pcie.link.width.max,clocks.sm,clocks.max.sm,"
        "clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu"
    )
    smi = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"])
    values = [s.strip() for s in smi.splitlines()[0].split(",")] if smi.strip() else []
    query = (
        dict(zip(fields.split(","), values, strict=False))
        if len(values) > 1
        else {"error": smi.strip()}
    )
    info = {
        "csv_schema_version": CSV_SCHEMA_VERSION,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu_name": props.name,
        "sm_count": props.multi_processor_count,
        "total_memory_bytes": props.total_memory,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "compute_capability": f"{props.major}.{props.minor}",
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
        "triton_version": getattr(kernels["triton"], "__version__", None) if kernels else None,
        "python": sys.version.split()[0],
        "nvidia_smi": query,
    }
    return info, _run(["nvidia-smi", "-q"])


# -- main ----------------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_calibration.py",
        description="Measure HBM/L2 bandwidth, load latencies, the host link and decode "
        "attention on a CUDA GPU; write gpu_calibration.csv for coaccel gpu-calibrate.",
    )
    p.add_argument("--out", help="output folder (default: $OUT, else ./gpu_calibration_out)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random permutations/data")
    p.add_argument(
        "--budget-s",
        type=float,
        default=TOTAL_BUDGET_S,
        help=f"total time budget, s (default {TOTAL_BUDGET_S:g})",
    )
    p.add_argument(
        "--sections",
        default="stream,latency,host,decode,overlap",
        help="comma-separated sections to run (default: all)",
    )
    return p.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    """Run the calibration; returns the exit status (0 ok, 2 error)."""
    args = _parse(argv)
    try:
        return _main(args)
    except CalibrationError as e:
        print(f"gpu_calibration: error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTION_BUDGET_S))
    if unknown:
        raise CalibrationError(
            f"unknown section(s) {', '.join(unknown)}; valid: {', '.join(SECTION_BUDGET_S)}"
        )
    out_dir = Path(args.out or os.environ.get("OUT") or "gpu_calibration_out")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise CalibrationError(f"cannot write to output folder {out_dir}: {e}") from None
    try:
        import torch
    except ImportError:
        raise CalibrationError(
            "PyTorch is not installed; install a CUDA build of torch (pip install torch)"
        ) from None
    if not torch.cuda.is_available():
        raise CalibrationError(
            f"no CUDA device is visible to PyTorch {torch.__version__} "
            f"(torch.version.cuda={torch.version.cuda}); run this on the GPU to calibrate"
        )
    kernels = _triton_kernels()
    info, smi_text = collect_info(torch, kernels)
    _atomic_write(out_dir / "nvidia_smi_q.txt", smi_text)
    date = info["date_utc"][:10]
    rec = Recorder(
        info["gpu_name"], f"measured {date} benchmarks/gpu_calibration.py", args.budget_s
    )
    n_sms = int(info["sm_count"])
    rec.clock_mhz = _mhz(info["nvidia_smi"].get("clocks.max.sm", ""))
    l2 = int(info["l2_cache_bytes"] or 50 * MIB)
    t_start = time.monotonic()
    steps = {
        "stream": lambda: stream_section(torch, rec, kernels, n_sms),
        "latency": lambda: latency_section(torch, rec, kernels, args.seed),
        "host": lambda: host_section(torch, rec, kernels, n_sms),
        "decode": lambda: decode_section(torch, rec, l2, args.seed),
        "overlap": lambda: overlap_section(torch, rec),
    }
    for name in sections:
        rec.section(name, SECTION_BUDGET_S[name])
        t0 = time.monotonic()
        try:
            steps[name]()
        except Exception as e:  # noqa: BLE001  (keep what the other sections measured)
            rec.skipped.append(f"{name}: failed: {type(e).__name__}: {e!s:.300}")
        print(
            f"gpu_calibration: {name} done in {time.monotonic() - t0:.1f} s, "
            f"{len(rec.rows)} rows so far",
            file=sys.stderr,
        )
        _atomic_write(out_dir / "gpu_calibration.csv", rec.csv_text())
    info["wall_s"] = round(time.monotonic() - t_start, 1)
    info["skipped"] = rec.skipped
    info["nvidia_smi_after"] = _run(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader"]
    ).strip()
    _atomic_write(out_dir / "gpu_calibration_info.json", json.dumps(info, indent=2) + "\n")
    _atomic_write(out_dir / "gpu_calibration.csv", rec.csv_text())
    print(
        f"gpu_calibration: wrote {len(rec.rows)} rows to {out_dir / 'gpu_calibration.csv'} "
        f"in {info['wall_s']} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run())
