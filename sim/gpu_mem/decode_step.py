"""One whole decode step of a model on a GPU: every kernel, its time, and the host that feeds it.

Users time a model, not one attention kernel: time per output token (TPOT) and tokens/s at a
batch size. :func:`decode_step` builds the kernels of one decode step of a
:class:`~coaccel.spine.workload.ModelShape` for a batch of requests, each with its own context
length, times each one with the analytical kernel model of :mod:`.timing` (waves of CTAs over
the SMs, DRAM at its efficiency curve, L2 hits, Little's law, roofline compute), and runs them
on one stream behind the host that launches them (:class:`ExecMode`).

The kernels of one step, per layer ([OURS] the fused set a serving engine such as vLLM or
SGLang launches; ``python`` mode the unfused operators of a Hugging Face ``generate`` loop):

* ``norm``: RMSNorm fused with the residual add (twice per layer);
* ``gemm``: QKV projection, output projection, gate+up and down projections (or, for MoE, the
  router, the routed experts the batch touches, the shared experts), tile-level (below);
* ``rope_kv``: RoPE on q and k and the KV-cache append into pages of ``block_size`` tokens
  (the keys and values written at the page layout's contiguous run);
* ``attention``: the split-K decode attention of :mod:`coaccel.models.gpu.flashdecode`, its
  traffic from the same analytical traffic model as the ``flashdecode`` workload, one split
  count for the whole batch (from the longest context) and every request's KV read at its own
  context; MLA models read one latent of ``kv_lora_rank + qk_rope_head_dim`` elements per
  token shared by all heads (a single-KV-head cache moving the latent's bytes once; its FLOP
  are those of that cache, about half of MLA's, which only matters where MLA attention is
  compute-bound, at large batches);
* ``act``: the gated activation (SiLU(gate) x up) where not fused;
* then the final norm, the LM head GEMM and sampling (a pass over the batch's logits).

**GEMM tile model** ([OURS]): a ``BM x BN`` output tile per CTA (``BM`` = 16 rows, the
tensor-core M, padded up to the batch; ``BN`` = 128 columns; ``BK`` = 64), split-K so that the
grid covers the SMs when the output has fewer tiles than SMs (at most ``K / 256`` ways). The
weights are read once from DRAM, contiguous runs of a row's split; the activations are read from
DRAM once and then hit in L2 for every other column tile; split-K partials go through L2. The
tensor FLOP count the padded tile (``2 * ceil(M/BM)*BM * N * K``), so small batches pay the
tensor-core waste they pay on the hardware.

Layers of one kind are timed once and counted (a Llama-3.1-8B step times 3 layer kinds, not 32
layers), so a step takes milliseconds to evaluate.

**Calibrated attention** (:class:`CalibratedStep`, :mod:`.intervals`; docs/gpu_step.md): the
dense split-K attention of a GQA/MHA model is the op the measured decode-attention timings
calibrate (docs/gpu_measured.md). Each layer kind's attention op (split and reduce kernels with
the CUDA-graph gap before each, ``T_sim``) gets the calibrated time and its 90 % interval; the
step is then run again with each attention op at its calibrated time, its lower and its upper
bound (the op's kernels scaled alike, the mode's own gaps kept), so the TPOT interval sums
attention's bounds over every layer: the same library on the same GPU, fully correlated errors.
The other kernels (GEMMs, norms, RoPE and KV append, sampling) and the host stay point estimates:
no measured data covers them. With a library named, its attention is launched as that library
launches it (:func:`library_attention`), so its fit is applied to the kernel it was fitted on;
with the pooled fit, the package's own launch. A custom ``attention`` (FFD, NOSA) and MLA are
not calibrated.

Public: :class:`ExecMode`, :data:`EXEC_MODES`, :class:`StepKernel`, :class:`DecodeStep`,
:class:`CalibratedAttention`, :class:`CalibratedStep`, :data:`CALIBRATION_NOTE`,
:func:`decode_step`, :func:`flash_attention`, :func:`library_attention`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from coaccel.spine.workload import ModelShape

from ..common import offchip
from .analytical import scale_traffic
from .config import GpuArchConfig
from .intervals import (
    calibrated,
    fitted_config,
    library_key,
    load_calibration,
    op_seconds,
    regime_of,
)
from .timing import kernel_time
from .traffic import KernelTraffic

if TYPE_CHECKING:
    from coaccel.models.gpu import LaunchKind, LibraryLaunch

__all__ = ["CALIBRATION_NOTE", "EXEC_MODES", "AttentionFn", "CalibratedAttention",
           "CalibratedStep", "DecodeStep", "ExecMode", "StepKernel", "decode_step",
           "flash_attention", "library_attention"]  # fmt: skip

AttentionFn = Callable[[GpuArchConfig, int, int, int, tuple[int, ...]], Sequence[KernelTraffic]]
"""One layer's attention for a step: ``fn(arch, q_heads, kv_heads, head_dim, contexts)`` ->
the traffic of its kernels, in issue order (contexts include the new token).
:func:`flash_attention` is the default; FFD and NOSA supply their own
(:mod:`coaccel.targets.gpu.e2e`)."""

KernelClass = Literal["gemm", "attention", "norm", "rope_kv", "act", "moe_route", "sample",
                      "embed"]  # fmt: skip

GEMM_BM = 16
"""Output rows per GEMM tile: the tensor-core M of an mma.sync tile ([OURS])."""
GEMM_BN = 128
"""Output columns per GEMM tile ([OURS])."""
GEMM_BK = 64
"""K elements per pipeline stage of a GEMM tile ([OURS])."""
GEMM_STAGES = 3
"""Pipeline stages of a GEMM tile (shared memory = stages x (BM + BN) x BK x 2 B, [OURS])."""
MIN_SPLIT_K = 256
"""Shortest K range one split-K CTA reduces, elements ([OURS])."""


@dataclass(frozen=True)
class ExecMode:
    """How the host launches a step's kernels (none of the figures is fitted to a measurement:
    graph gap and eager launch cost from [CUDAJL-GRAPHS], the rest [OURS]).

    Attributes:
        name: ``graph`` (CUDA-graph replay, as vLLM and SGLang decode), ``eager`` (a framework
            launching each fused kernel from C++/Python) or ``python`` (Hugging Face
            ``generate`` style: every operator dispatched from Python, unfused).
        host_us_per_kernel: host time to issue one kernel, us.
        gap_us: device idle time between consecutive kernels, us (a graph's node-to-node gap;
            in the other modes the launch latency of the config).
        step_host_us: host time per step outside the kernels (scheduling, sampling
            bookkeeping, the synchronisation that reads the sampled tokens), us.
        fused: whether norms, RoPE+KV append and the gated activation are single kernels.
    """

    name: str
    host_us_per_kernel: float
    gap_us: float | None
    step_host_us: float
    fused: bool = True


EXEC_MODES: dict[str, ExecMode] = {
    # One graph launch per step; 80 small kernels ran in 70 us as one graph and in 260 us
    # launched one by one ([CUDAJL-GRAPHS], [DERIVED] 0.875 and 3.25 us per kernel, upper
    # bounds that include each kernel's own run time).
    "graph": ExecMode("graph", host_us_per_kernel=0.0, gap_us=0.875, step_host_us=60.0),
    "eager": ExecMode("eager", host_us_per_kernel=3.25, gap_us=None, step_host_us=60.0),
    # PyTorch eager from Python: about 20 us per operator, unfused operators.
    "python": ExecMode("python", host_us_per_kernel=20.0, gap_us=None, step_host_us=200.0,
                       fused=False),
}  # fmt: skip
"""The execution modes (:class:`ExecMode`); ``decode_step(mode=...)`` takes a name or a mode."""


@dataclass(frozen=True)
class StepKernel:
    """One kernel of the step (a layer kind's kernel counted ``count`` times).

    Attributes:
        name: kernel name (``"l.qkv_proj"``; ``l`` the layer kind).
        cls: class (:data:`KernelClass`).
        count: how many times the step runs it.
        seconds: device time of one run, s (without gaps).
        dram_bytes: DRAM bytes of one run (read + written), B.
        l2_bytes: bytes of one run served by L2 hits, B.
        flop: tensor + FP32 FLOP of one run.
        host_bytes: bytes of one run over the host link (zero-copy loads or copies), B.
        ctas: grid size.
        bound: what bounds it (:class:`~coaccel.sim.gpu_mem.timing.KernelTime`).
    """

    name: str
    cls: str
    count: int
    seconds: float
    dram_bytes: int
    l2_bytes: int
    flop: float
    host_bytes: int
    ctas: int
    bound: str


CALIBRATION_NOTE = (
    "Only attention is calibrated, on measured decode-attention ops (docs/gpu_measured.md); "
    "the interval sums its 90 % bounds over every layer (the same library on the same GPU: "
    "fully correlated errors). GEMMs, norms, RoPE and KV append, sampling and the host are the "
    "simulator's point estimates: no measured data covers them."
)
"""What the calibrated TPOT and its interval cover (printed with them)."""


@dataclass(frozen=True)
class CalibratedAttention:
    """One layer kind's attention op calibrated on measured ops (:mod:`.intervals`).

    Attributes:
        layers: the layer kind (``dense``, ``swa_dense``, ``moe``, ...).
        count: layers of that kind in the step.
        sim_s: ``T_sim`` of one layer's op: its kernels with the CUDA-graph gap before each, s.
        seconds: calibrated time of one layer's op, s.
        lower_s, upper_s: its 90 % prediction interval, s.
        regime: ``"dram"`` or ``"l2"`` (the split kernel's L2 hits; a step's KV is cold).
    """

    layers: str
    count: int
    sim_s: float
    seconds: float
    lower_s: float
    upper_s: float
    regime: str


@dataclass(frozen=True)
class CalibratedStep:
    """The step with its attention calibrated on measured ops (module docstring).

    Attributes:
        batch: requests (output tokens per step).
        library: the kernel library whose fit is used (``""``: the pooled fit).
        launch: the attention's launch (:data:`coaccel.models.gpu.LaunchKind`: the library's
            own, or ``flashdecode``, the package's).
        gpu_config: the fitted config the GPU is (in-fit half-widths), or ``""`` (a GPU the
            fit did not see: held-out half-widths).
        attention: one :class:`CalibratedAttention` per layer kind.
        step_s: TPOT with every attention op at its calibrated time, s.
        step_lower_s, step_upper_s: TPOT with every attention op at its lower / upper bound,
            the other kernels and the host unchanged, s.
    """

    batch: int
    library: str
    launch: str
    gpu_config: str
    attention: tuple[CalibratedAttention, ...]
    step_s: float
    step_lower_s: float
    step_upper_s: float

    @property
    def attention_s(self) -> tuple[float, float, float]:
        """Calibrated attention time of the step and its bounds (every layer), s."""
        s, lo, hi = (sum(a.count * getattr(a, f) for a in self.attention)
                     for f in ("seconds", "lower_s", "upper_s"))  # fmt: skip
        return s, lo, hi

    @property
    def tokens_per_s(self) -> tuple[float, float, float]:
        """Output tokens per second and its interval: ``batch / (step_s, step_upper_s,
        step_lower_s)``."""
        return (self.batch / self.step_s, self.batch / self.step_upper_s,
                self.batch / self.step_lower_s)  # fmt: skip


@dataclass(frozen=True)
class DecodeStep:
    """A decode step's time, traffic and kernels.

    Attributes:
        arch: the GPU config name. mode: the execution mode.
        batch: requests. contexts: their KV lengths, tokens.
        kernels: the kernels (:class:`StepKernel`), in issue order of one layer kind each.
        device_s: the kernels' device time, gaps included, s.
        host_s: the host's issue time, s.
        step_s: the step's wall time (TPOT), s.
        dram_bytes, l2_bytes, host_bytes: the step's DRAM, L2-hit and host-link bytes, B.
        energy_j: DRAM energy of the step at the config's pJ/B, J.
        calibrated: the step with its attention calibrated on measured ops, with the TPOT's
            90 % interval (:class:`CalibratedStep`); None where the attention is not the
            measured kind (a custom ``attention``, MLA).
        calibration_note: what the calibrated TPOT covers (:data:`CALIBRATION_NOTE`), or why
            there is none.
    """

    arch: str
    mode: str
    batch: int
    contexts: tuple[int, ...]
    kernels: tuple[StepKernel, ...]
    device_s: float
    host_s: float
    step_s: float
    dram_bytes: int
    l2_bytes: int
    host_bytes: int
    energy_j: float
    calibrated: CalibratedStep | None = None
    calibration_note: str = ""

    @property
    def tpot_s(self) -> float:
        """Time per output token of each request, s (one step)."""
        return self.step_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over the batch."""
        return self.batch / self.step_s

    @property
    def energy_j_per_token(self) -> float:
        """DRAM energy per output token, J."""
        return self.energy_j / self.batch

    def by_class(self) -> dict[str, tuple[float, int]]:
        """Device seconds and DRAM bytes per kernel class (gaps not included)."""
        out: dict[str, tuple[float, int]] = {}
        for k in self.kernels:
            s, b = out.get(k.cls, (0.0, 0))
            out[k.cls] = (s + k.seconds * k.count, b + k.dram_bytes * k.count)
        return out


def _traffic(
    arch: GpuArchConfig, name: str, *, ctas: int, dram_read: int, dram_write: int,
    l2_hit_bytes: int, run_bytes: int, tile_bytes: int, tensor_flop: float = 0.0,
    fp32_flop: float = 0.0, threads: int = 256, smem: int = 0, regs: int = 64,
) -> KernelTraffic:  # fmt: skip
    """A kernel's traffic from its byte counts (streams of ``run_bytes`` contiguous runs)."""
    sector = arch.l2.sector_bytes
    dram = dram_read + dram_write
    eff = float(offchip.efficiency(arch.dram, np.asarray([max(1, run_bytes)]))[0])
    misses = -(-dram_read // sector)
    hits = -(-l2_hit_bytes // sector)
    return KernelTraffic(
        kernel=0, name=name, stream=0, seq=0, kind="compute", pinned=True, ctas=max(1, ctas),
        threads_per_cta=threads, smem_bytes_per_cta=smem, regs_per_thread=regs,
        sector_requests=misses + hits, l2_hits=hits, l2_near_hits=hits // 2, l2_misses=misses,
        dram_read_bytes=dram_read, dram_write_bytes=dram_write,
        dram_seconds=dram / (arch.dram.bw_gb_per_s * 1e9 * eff) if dram else 0.0,
        host_bytes=0, tensor_flop=tensor_flop, fp32_flop=fp32_flop,
        tile_bytes=float(max(tile_bytes, sector)), chain_seconds=0.0,
    )  # fmt: skip


def _gemm(arch: GpuArchConfig, name: str, m: int, n: int, k: int, wbytes: float) -> KernelTraffic:
    """Tile-level traffic of ``[m, k] x [k, n]`` with ``wbytes`` bytes per weight element."""
    bm = GEMM_BM * -(-min(m, 128) // GEMM_BM)
    tiles = -(-m // bm) * -(-n // GEMM_BN)
    split = 1
    if tiles < arch.sm.count:
        split = max(1, min(-(-arch.sm.count // tiles), k // MIN_SPLIT_K))
    w = int(n * k * wbytes)
    a = m * k * 2
    out = m * n * 2
    n_tiles_n = -(-n // GEMM_BN)
    partials = m * n * 4 * split if split > 1 else 0
    return _traffic(
        arch, name, ctas=tiles * split, dram_read=w + a, dram_write=out,
        l2_hit_bytes=a * max(0, n_tiles_n - 1) + 2 * partials,
        run_bytes=int(k / split * wbytes), tile_bytes=int(GEMM_BN * GEMM_BK * wbytes),
        tensor_flop=2.0 * -(-m // bm) * bm * n * k, threads=128,
        smem=GEMM_STAGES * (bm + GEMM_BN) * GEMM_BK * 2, regs=128,
    )  # fmt: skip


def _elementwise(
    arch: GpuArchConfig, name: str, read: int, write: int, elems: int, run: int = 0
) -> KernelTraffic:
    """A memory-bound pass: ``read`` and ``write`` bytes, ``elems`` elements (8 per thread)."""
    return _traffic(
        arch, name, ctas=-(-elems // (256 * 8)), dram_read=read, dram_write=write,
        l2_hit_bytes=0, run_bytes=run or max(read, write), tile_bytes=16 * 256,
        fp32_flop=4.0 * elems,
    )  # fmt: skip


@lru_cache(maxsize=512)
def _attention_ref(
    arch: GpuArchConfig, q_heads: int, kv_heads: int, head_dim: int, context: int, splits: int
) -> tuple[KernelTraffic, ...]:
    """The split-K attention traffic of one request at ``context`` tokens (cached)."""
    from coaccel.models.gpu import DecodeShape, plan_split_k, split_k_trace

    from .traffic import kernel_traffic

    shape = DecodeShape(batch=1, context=context, q_heads=q_heads, kv_heads=kv_heads,
                        head_dim=head_dim)  # fmt: skip
    plan = plan_split_k(shape, num_splits=splits, mma_m=16 * -(-shape.group // 16))
    return tuple(kernel_traffic(split_k_trace(plan), arch, fidelity="analytical"))


_REF_TOKENS = 2048
"""Longest context traced per request; longer ones scale its traffic linearly ([OURS]: the
split kernel streams its split's tiles, so its bytes, FLOP and DRAM time grow with the
tokens at a fixed split count)."""


def flash_attention(
    arch: GpuArchConfig, q_heads: int, kv_heads: int, head_dim: int, contexts: Sequence[int]
) -> list[KernelTraffic]:
    """Split and reduce kernels of the batch's dense split-K attention (:data:`AttentionFn`):
    one split count from the longest context, each request's traffic at its own context."""
    from coaccel.models.gpu import choose_num_splits

    splits = choose_num_splits(len(contexts), kv_heads, max(contexts), n_sms=arch.sm.count,
                               block_n=128)  # fmt: skip
    parts = []
    for c, n in sorted(Counter(contexts).items()):
        ref = min(c, max(_REF_TOKENS, 128 * splits))
        parts.append((_attention_ref(arch, q_heads, kv_heads, head_dim, ref, splits), n, c / ref))
    return _batch_launch(parts)


def _batch_launch(
    parts: Sequence[tuple[Sequence[KernelTraffic], int, float]],
) -> list[KernelTraffic]:
    """One launch of each attention kernel for the whole batch, from ``(kernels traced for
    one request, requests, length ratio)`` per context: the split kernel (first) scaled by
    the ratio, the others not; a request without a later kernel adds nothing to it."""
    merged: list[KernelTraffic] = []
    for per, n, length in parts:
        for i, k in enumerate(per):
            scaled = _requests(k, n, length if i == 0 else 1.0)
            if i < len(merged):
                merged[i] = _add(merged[i], scaled)
            else:
                merged.append(scaled)
    return [dataclasses.replace(k, name=f"attention_{k.name}") for k in merged]


@lru_cache(maxsize=512)
def _library_ref(arch: GpuArchConfig, launch: LibraryLaunch) -> tuple[KernelTraffic, ...]:
    """The traffic of one request's library launch (cached)."""
    from coaccel.models.gpu import split_k_trace

    from .traffic import kernel_traffic

    trace = split_k_trace(launch.plan, combine=launch.combine,
                          combine_rows_per_cta=launch.combine_rows_per_cta,
                          combine_stages=max(launch.combine_stages, 1))  # fmt: skip
    return tuple(kernel_traffic(trace, arch, fidelity="analytical"))


def library_attention(kind: str, compute_capability: int) -> AttentionFn:
    """Each layer's attention launched as a kernel library launches it
    (:func:`coaccel.models.gpu.sequence_launches`: FlashAttention-2's or -3's split count,
    tile, CTA and combine kernel for each request of the batch), an :data:`AttentionFn`.

    A request longer than ``max(2048, block_n x its splits)`` tokens is traced at that length and
    its split kernel's traffic scaled to its context, as :func:`flash_attention` does. The
    requests' split kernels are one launch, and so are their combine kernels (a request with
    one split adds none).

    Args:
        kind: a :data:`coaccel.models.gpu.LaunchKind` other than ``flashdecode``.
        compute_capability: the GPU's (major x 10 + minor).

    Returns:
        The attention function.
    """
    from coaccel.models.gpu import LAUNCH_KINDS

    valid = [k for k in LAUNCH_KINDS if k != "flashdecode"]
    if kind not in valid:
        raise ValueError(f"kind={kind!r}; valid: {', '.join(valid)}")
    lk = cast("LaunchKind", kind)

    def attention(arch: GpuArchConfig, q_heads: int, kv_heads: int, head_dim: int,
                  contexts: tuple[int, ...]) -> list[KernelTraffic]:  # fmt: skip
        return _library_attention(arch, lk, compute_capability, q_heads, kv_heads, head_dim,
                                  contexts)  # fmt: skip

    return attention


def _library_attention(
    arch: GpuArchConfig,
    kind: LaunchKind,
    cc: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    contexts: Sequence[int],
) -> list[KernelTraffic]:
    from coaccel.models.gpu import sequence_launches, with_context

    launches = sequence_launches(kind, list(contexts), q_heads, kv_heads, head_dim,
                                 n_sms=arch.sm.count, compute_capability=cc)  # fmt: skip
    parts = []
    for c, n in sorted(Counter(contexts).items()):
        launch = launches[c]
        p = launch.plan
        ref = min(c, max(_REF_TOKENS, p.block_n * p.num_splits))
        if ref < c:  # the same splits over fewer tokens (ref >= block_n x splits)
            launch = with_context(launch, ref)
        parts.append((_library_ref(arch, launch), n, c / ref))
    return _batch_launch(parts)


def _requests(kt: KernelTraffic, n: int, length: float) -> KernelTraffic:
    """``n`` requests' launch of a kernel traced for one, each ``length`` times as long: the
    grid and traffic grow by ``n x length``, a CTA's chain of dependent loads by ``length`` only
    (the requests' CTAs run side by side)."""
    out = scale_traffic(kt, n * length, ctas_factor=n)
    return dataclasses.replace(out, chain_seconds=kt.chain_seconds * length)


def _add(a: KernelTraffic, b: KernelTraffic) -> KernelTraffic:
    """Two launches of the same kernel as one (their grids and traffic added)."""
    return dataclasses.replace(
        a, ctas=a.ctas + b.ctas, sector_requests=a.sector_requests + b.sector_requests,
        l2_hits=a.l2_hits + b.l2_hits, l2_near_hits=a.l2_near_hits + b.l2_near_hits,
        l2_misses=a.l2_misses + b.l2_misses, dram_read_bytes=a.dram_read_bytes + b.dram_read_bytes,
        dram_write_bytes=a.dram_write_bytes + b.dram_write_bytes,
        dram_seconds=a.dram_seconds + b.dram_seconds, tensor_flop=a.tensor_flop + b.tensor_flop,
        fp32_flop=a.fp32_flop + b.fp32_flop, chain_seconds=max(a.chain_seconds, b.chain_seconds),
        l1_hits=a.l1_hits + b.l1_hits,
    )  # fmt: skip


def _attention_geometry(m: ModelShape) -> tuple[int, int, int]:
    """``(q_heads, kv_heads, head_dim)`` of the attention's cache reads."""
    if m.is_mla:
        width = m.kv_lora_rank + m.qk_rope_head_dim
        # one latent per token read once for K and once for V by the split kernel model:
        # a single KV head of half the width moves the latent's bytes
        return m.heads, 1, max(8, width // 2)
    return m.heads, m.kv_heads, m.head_dim


def _layer_kinds(m: ModelShape, contexts: Sequence[int]) -> list[tuple[str, int, bool, list[int]]]:
    """``(kind, layers, moe, contexts)``: layers grouped by MLP kind and attention window."""
    win = set(m.sliding_window_layers) if m.sliding_window_tokens else set()
    dense = set(m.dense_mlp_layers)
    kinds: Counter[tuple[bool, bool]] = Counter()
    for layer in range(m.layers):
        kinds[(layer in win, m.experts > 0 and layer not in dense)] += 1
    out = []
    for (windowed, moe), n in sorted(kinds.items()):
        ctx = [min(c, m.sliding_window_tokens) if windowed else c for c in contexts]
        out.append((("swa_" if windowed else "") + ("moe" if moe else "dense"), n, moe, ctx))
    return out


def _mlp(arch: GpuArchConfig, m: ModelShape, b: int, moe: bool, wb: float, fused: bool,
         p: str) -> list[tuple[str, KernelTraffic]]:  # fmt: skip
    """The MLP (or MoE) kernels of one layer for ``b`` tokens."""
    e = m.hidden
    gate = 2 if m.mlp == "gated" else 1
    ks: list[tuple[str, KernelTraffic]] = []

    def ffn(name: str, rows: int, width: int, times: int = 1) -> None:
        up = _gemm(arch, f"{p}.{name}_up", rows, gate * width, e, wb)
        down = _gemm(arch, f"{p}.{name}_down", rows, e, width, wb)
        if times > 1:
            up = scale_traffic(up, times, ctas_factor=times)
            down = scale_traffic(down, times, ctas_factor=times)
        ks.append(("gemm", up))
        if gate == 2 and not fused:
            ks.append(
                (
                    "act",
                    _elementwise(
                        arch,
                        f"{p}.{name}_act",
                        rows * width * 2 * 2 * times,
                        rows * width * 2 * times,
                        rows * width * times,
                    ),
                )
            )
        ks.append(("gemm", down))

    if not moe:
        ffn("mlp", b, m.intermediate)
        return ks
    ks.append(("moe_route", _gemm(arch, f"{p}.router", b, m.experts, e, 2)))
    ks.append(
        (
            "moe_route",
            _elementwise(
                arch, f"{p}.topk", b * m.experts * 4, b * m.experts_per_token * 8, b * m.experts
            ),
        )
    )
    # distinct experts the batch touches, uniform routing ([OURS]): E (1 - (1 - k/E)^b)
    touched = max(1, round(m.experts * (1 - (1 - m.experts_per_token / m.experts) ** b)))
    rows = max(1, round(b * m.experts_per_token / touched))
    ffn("experts", rows, m.expert_intermediate, touched)
    if m.shared_experts:
        width = (m.shared_expert_intermediate or m.expert_intermediate) * m.shared_experts
        ffn("shared", b, width)
    return ks


def _layer(arch: GpuArchConfig, m: ModelShape, kind: str, moe: bool, ctx: Sequence[int],
           wb: float, fused: bool, attention: AttentionFn
           ) -> list[tuple[str, KernelTraffic]]:  # fmt: skip
    b, e = len(ctx), m.hidden
    hq, hkv, d = _attention_geometry(m)
    act = b * e * 2
    norm_ops = 1 if fused else 5  # add, pow, mean, rsqrt, mul (and weight mul) unfused
    ks: list[tuple[str, KernelTraffic]] = []
    for i in range(norm_ops):
        ks.append(("norm", _elementwise(arch, f"{kind}.attn_norm{i}", 2 * act, 2 * act if i == 0
                                        else act, b * e)))  # fmt: skip
    if m.is_mla:
        # MLA with the up-projections absorbed ([DSV2] decode form): q (optionally through
        # its low-rank pair), the latent + rope key, q_nope times W_UK per head, and after
        # attention the latent output times W_UV per head; together they read kv_b_proj
        q_out, nope = m.heads * m.head_dim, m.head_dim - m.qk_rope_head_dim
        kv_out = m.kv_lora_rank + m.qk_rope_head_dim
        if m.q_lora_rank:
            ks.append(("gemm", _gemm(arch, f"{kind}.q_a_proj", b, m.q_lora_rank, e, wb)))
            ks.append(("gemm", _gemm(arch, f"{kind}.q_b_proj", b, q_out, m.q_lora_rank, wb)))
        else:
            ks.append(("gemm", _gemm(arch, f"{kind}.q_proj", b, q_out, e, wb)))
        ks.append(("gemm", _gemm(arch, f"{kind}.kv_a_proj", b, kv_out, e, wb)))
        ks.append(("gemm", _gemm(arch, f"{kind}.q_absorb", b, m.heads * m.kv_lora_rank, nope,
                                 wb)))  # fmt: skip
        o_in = m.heads * m.v_head_dim
        kv_tok = kv_out * 2
    else:
        ks.append(("gemm", _gemm(arch, f"{kind}.qkv_proj", b, (hq + 2 * hkv) * d, e, wb)))
        o_in = hq * d
        kv_tok = 2 * hkv * d * 2
    rope_ops = 1 if fused else 8
    page_run = kv_tok // 2 if not m.is_mla else kv_tok
    qk = b * (hq + hkv) * d * 2
    for i in range(rope_ops):
        # unfused: the rotation's operators pass q and k around; the last one appends to the
        # paged cache, at the page layout's contiguous run
        last = i == rope_ops - 1
        ks.append(
            (
                "rope_kv",
                _elementwise(
                    arch,
                    f"{kind}.rope_kv{i}",
                    qk,
                    b * kv_tok if last else qk,
                    qk // 2,
                    run=page_run if last else qk,
                ),
            )
        )
    ks.extend(("attention", k) for k in attention(arch, hq, hkv, d, tuple(ctx)))
    if m.is_mla:
        ks.append(("gemm", _gemm(arch, f"{kind}.v_absorb", b, o_in, m.kv_lora_rank, wb)))
    ks.append(("gemm", _gemm(arch, f"{kind}.o_proj", b, e, o_in, wb)))
    for i in range(norm_ops):
        ks.append(("norm", _elementwise(arch, f"{kind}.mlp_norm{i}", 2 * act, 2 * act if i == 0
                                        else act, b * e)))  # fmt: skip
    ks.extend(_mlp(arch, m, b, moe, wb, fused, kind))
    return ks


def _run(kts: Sequence[tuple[int, float]], host_us: float, gap_s: float, step_host_s: float
         ) -> tuple[float, float, float]:  # fmt: skip
    """Kernels behind a host that issues one every ``host_us``: ``(device, host, wall)`` s.

    Kernel ``i`` starts when the host has issued it and kernel ``i - 1`` has finished plus the
    gap; the step ends when the last kernel ends and the host's per-step work is done.
    """
    host = step_host_s
    issue, end, busy = step_host_s, 0.0, 0.0
    h = host_us * 1e-6
    for count, sec in kts:
        if h == 0.0:
            busy += count * (sec + gap_s)
            end += count * (sec + gap_s)
            continue
        for _ in range(count):
            issue += h
            end = max(issue, end + gap_s) + sec
            busy += sec + gap_s
        host += count * h
    if h == 0.0:
        end += step_host_s
    return busy, host, max(end, host)


def _attention_of(
    arch: GpuArchConfig, model: ModelShape, attention: AttentionFn | None, library: str | None
) -> tuple[AttentionFn, str]:
    """The step's attention and its launch kind: a given ``attention``; else the library's own
    launch on this GPU where it is modelled (dense attention only); else the package's."""
    if attention is not None:
        return attention, "flashdecode"
    if library is not None and not model.is_mla:
        from coaccel.models.gpu import COMPUTE_CAPABILITY, library_launch_kind

        name = fitted_config(arch) or arch.name
        launch = library_launch_kind(library_key(library), name)
        if launch != "flashdecode":
            return library_attention(launch, COMPUTE_CAPABILITY[name]), launch
    return flash_attention, "flashdecode"


def decode_step(
    arch: GpuArchConfig,
    model: ModelShape,
    contexts: Sequence[int] | int,
    batch: int | None = None,
    *,
    mode: str | ExecMode = "graph",
    weight_bytes: float = 2.0,
    attention: AttentionFn | None = None,
    library: str | None = None,
) -> DecodeStep:
    """One decode step of ``model`` on ``arch`` for a batch of requests.

    Args:
        arch: the GPU.
        model: the model's shape.
        contexts: each request's KV length (tokens), or one length for all of ``batch``.
        batch: requests, when ``contexts`` is one length.
        mode: the execution mode, a name of :data:`EXEC_MODES` or an :class:`ExecMode`.
        weight_bytes: bytes per weight element (2: bf16; 1: FP8; 0.5625: 4-bit with group
            scales).
        attention: each layer's attention (:data:`AttentionFn`; default
            :func:`flash_attention`, the only one calibrated).
        library: the kernel library whose fit calibrates the attention (a key of the
            calibration's ``libraries``, e.g. ``"vllm-0.14.0:vllm_flash_attn"``; None: the
            pooled fit). Without ``attention``, the attention is also launched as that library
            launches it on this GPU (:func:`library_attention`, by
            :func:`coaccel.models.gpu.library_launch_kind` of the GPU's config name), the launch
            its fit was made with; the package's launch where the library's kernels on this GPU
            are not modelled.

    Returns:
        :class:`DecodeStep` (with :attr:`DecodeStep.calibrated`).

    Raises:
        ValueError: an empty batch, a context below 1, an unknown mode or library.
    """
    if library is not None:
        load_calibration().fit(library)
    attention_fn, launch = _attention_of(arch, model, attention, library)
    if isinstance(contexts, int | np.integer):
        ctx = [int(contexts)] * (1 if batch is None else int(batch))
    else:
        ctx = [int(c) for c in contexts]
        if batch is not None and batch != len(ctx):
            raise ValueError(f"batch={batch} but {len(ctx)} contexts given")
    if not ctx or min(ctx) < 1:
        raise ValueError("decode_step needs at least one request, each with context >= 1")
    if isinstance(mode, str):
        if mode not in EXEC_MODES:
            raise ValueError(f"mode={mode!r}; valid choices: {', '.join(EXEC_MODES)}")
        mode = EXEC_MODES[mode]
    # a decode step attends the new token too
    ctx = [c + 1 for c in ctx]
    b, e = len(ctx), model.hidden
    items: list[tuple[str, KernelTraffic, int]] = [
        ("embed", _elementwise(arch, "embed", b * e * 2, b * e * 2, b * e, run=e * 2), 1)
    ]
    ops: list[tuple[str, int, list[int]]] = []  # (layer kind, layers, its attention kernels)
    for kind, n, moe, c in _layer_kinds(model, ctx):
        layer = _layer(arch, model, kind, moe, c, weight_bytes, mode.fused, attention_fn)
        ops.append((kind, n, [len(items) + i for i, (cls, _) in enumerate(layer)
                              if cls == "attention"]))  # fmt: skip
        items.extend((cls, kt, n) for cls, kt in layer)
    items.append(("norm", _elementwise(arch, "final_norm", b * e * 2, b * e * 2, b * e), 1))
    items.append(("gemm", _gemm(arch, "lm_head", b, model.vocab, e, weight_bytes), 1))
    items.append(("sample", _elementwise(arch, "sample", b * model.vocab * 2, b * 8,
                                         b * model.vocab), 1))  # fmt: skip
    kernels = []
    for cls, kt, n in items:
        t = kernel_time(arch, kt)
        kernels.append(StepKernel(
            name=kt.name, cls=cls, count=n, seconds=t.seconds,
            dram_bytes=kt.dram_read_bytes + kt.dram_write_bytes,
            l2_bytes=kt.l2_hits * arch.l2.sector_bytes, flop=kt.tensor_flop + kt.fp32_flop,
            host_bytes=kt.host_bytes, ctas=kt.ctas, bound=t.bound,
        ))  # fmt: skip
    gap = (mode.gap_us if mode.gap_us is not None else arch.launch_overhead_us) * 1e-6
    device, host, wall = _run([(k.count, k.seconds) for k in kernels], mode.host_us_per_kernel,
                              gap, mode.step_host_us * 1e-6)  # fmt: skip
    dram = sum(k.dram_bytes * k.count for k in kernels)
    if attention is not None:
        cal, note = None, "no calibrated interval: a custom attention is not the measured kind"
    elif model.is_mla:
        cal, note = None, ("no calibrated interval: MLA attention is not among the measured "
                           "decode-attention kernels")  # fmt: skip
    else:
        cal = _calibrate(arch, mode, gap, items, kernels, ops, library, b, launch)
        note = CALIBRATION_NOTE
    return DecodeStep(
        arch=arch.name, mode=mode.name, batch=b, contexts=tuple(c - 1 for c in ctx),
        kernels=tuple(kernels), device_s=device, host_s=host, step_s=wall, dram_bytes=dram,
        l2_bytes=sum(k.l2_bytes * k.count for k in kernels),
        host_bytes=sum(k.host_bytes * k.count for k in kernels),
        energy_j=dram * arch.dram.energy_pj_per_byte * 1e-12, calibrated=cal,
        calibration_note=note,
    )  # fmt: skip


def _calibrate(
    arch: GpuArchConfig,
    mode: ExecMode,
    gap_s: float,
    items: Sequence[tuple[str, KernelTraffic, int]],
    kernels: Sequence[StepKernel],
    ops: Sequence[tuple[str, int, list[int]]],
    library: str | None,
    batch: int,
    launch: str,
) -> CalibratedStep:
    """Calibrate each layer kind's attention op and run the step with every op at its
    calibrated time, its lower and its upper bound (module docstring).

    Each op's kernels are scaled alike so that, with the CUDA-graph gap before each, they take
    the calibrated time; the mode's own gaps and host are then applied as for the point step.
    """
    cal = load_calibration()
    cfg = fitted_config(arch, cal)
    gg = cal.graph_gap_us * 1e-6
    runs = [[k.seconds for k in kernels] for _ in range(3)]  # calibrated, lower, upper
    out = []
    for kind, n, idx in ops:
        if not idx:
            continue
        raw = sum(kernels[i].seconds for i in idx)
        t = op_seconds(raw, len(idx), 0.0, cal.graph_gap_us)
        first = items[idx[0]][1]  # the split kernel
        reg = regime_of(first.l2_hits, first.sector_requests)
        s, lo, hi = calibrated(t, arch.sm.freq_mhz, reg, cfg, library, calibration=cal)
        out.append(CalibratedAttention(kind, n, t, s, lo, hi, reg))
        for secs, x in zip(runs, (s, lo, hi), strict=True):
            busy = max(0.0, x - len(idx) * gg)
            for i in idx:
                secs[i] = kernels[i].seconds * busy / raw if raw > 0 else busy / len(idx)
    walls = [
        _run([(k.count, sec) for k, sec in zip(kernels, secs, strict=True)],
             mode.host_us_per_kernel, gap_s, mode.step_host_us * 1e-6)[2]
        for secs in runs
    ]  # fmt: skip
    return CalibratedStep(
        batch=batch, library=library_key(library) if library else "", launch=launch,
        gpu_config=cfg, attention=tuple(out), step_s=walls[0], step_lower_s=walls[1],
        step_upper_s=walls[2],
    )  # fmt: skip
