"""W2 (FFD) on real decode activations: keep ratio, output error and perplexity change.

:func:`ffd_real_stats` takes a :class:`~coaccel.targets.gpu.real_inputs.RealDecodeSample` (a real
decoder's decode queries, keys and values at several contexts) and measures, per window, context,
decode step, layer and KV head:

* the **keep ratio** of FFD's top-delta rule ([FFD-REPO] threshold kernel over the 16 sink and 16
  recent quantized tokens, delta in log2 units by default: the kernel's rule;
  :func:`coaccel.models.gpu.ffd_block_keep`) over the 128-token blocks;
* the **selection error**: relative L2 distance (over the heads of the layer) between the
  attention output over the kept blocks plus the bf16 tail and the exact output, both float64 on
  the model's own keys and values (what the selection alone costs);
* the **kernel error** at each context's first step: the bf16 output of the whole FFD kernel
  (2-bit scan, FP8 residual rescoring, bf16 V, split-K; :func:`coaccel.models.gpu.ffd_decode`)
  against float64 dense attention of the same bf16 inputs, per layer;
* the **perplexity change** at the largest context: the mean next-token negative log-likelihood
  over real decode steps with FFD's selection in every layer's decode attention
  (:class:`coaccel.models.gpu.FfdAttention`) minus that of exact decode steps from the same
  cache, and its ratio of perplexities ``exp(mean difference)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.targets.gpu.real_inputs import RealDecodeSample, decode_nll, spread
from coaccel.validate.published import load_published
from coaccel.validate.targets import Target

__all__ = ["FfdRealStats", "extrapolate_keep", "ffd_real_rows", "ffd_real_stats"]


@dataclass(frozen=True)
class FfdRealStats:
    """FFD measured on a real decoder's decode steps (module docstring).

    Attributes:
        contexts: ``[n_ctx]`` contexts (keys at step 0).
        layers: the layers measured (global attention).
        keep: ``[P, n_ctx, steps, len(layers), Hkv]`` keep ratios.
        sel_error: ``[P, n_ctx, steps, len(layers)]`` selection error.
        threshold_excess: ``[P, n_ctx, steps, len(layers)]`` how far the threshold's reference
            (the best approximate score of the sink and recent tokens) lies above their best
            exact score, log2 units, averaged over the query heads.
        kernel_error: ``[P, n_ctx, len(layers)]`` kernel error at step 0.
        nll_exact, nll_ffd: ``[P, ppl_steps]`` nats per token at the largest context.
        ffd_run_keep: mean keep ratio of the FFD decode runs (their own activations).
        delta: the threshold offset. delta_base: its base.
    """

    contexts: tuple[int, ...]
    layers: tuple[int, ...]
    keep: npt.NDArray[np.float64]
    sel_error: npt.NDArray[np.float64]
    threshold_excess: npt.NDArray[np.float64]
    kernel_error: npt.NDArray[np.float64]
    nll_exact: npt.NDArray[np.float64]
    nll_ffd: npt.NDArray[np.float64]
    ffd_run_keep: float
    delta: float
    delta_base: str

    def keep_per_step(self, ci: int) -> npt.NDArray[np.float64]:
        """``[P * steps]`` keep ratio of each (window, step) at context ``ci``, averaged over
        layers and KV heads."""
        return self.keep[:, ci].mean(axis=(2, 3)).ravel()

    @property
    def nll_delta(self) -> npt.NDArray[np.float64]:
        """``[P, ppl_steps]`` FFD minus exact, nats per token."""
        return self.nll_ffd - self.nll_exact


def ffd_real_stats(
    sample: RealDecodeSample,
    *,
    delta: float = 5.0,
    delta_base: str = "2",
    ppl_steps: int | None = None,
    kernel_error: bool = True,
    progress: Callable[[str], None] | None = None,
) -> FfdRealStats:
    """Measure FFD on real decode activations (module docstring).

    Args:
        sample: the prefilled windows (:func:`~coaccel.targets.gpu.real_inputs
            .collect_real_decode`).
        delta: threshold offset. delta_base: ``"2"`` (kernel) or ``"e"`` (README).
        ppl_steps: decode steps of each perplexity run (None: the sample's steps; 0: none).
        kernel_error: also run the whole FFD kernel numerics at each context's first step.
        progress: called with one line per window and per perplexity run.

    Returns:
        :class:`FfdRealStats`.
    """
    from coaccel.models.gpu import FfdAttention

    say = progress or (lambda _m: None)
    layers = tuple(sample.global_layers())
    n_ctx, steps, n_p = len(sample.contexts), sample.steps, len(sample.passages)
    hkv = sample.model.config.num_kv_heads
    keep = np.zeros((n_p, n_ctx, steps, len(layers), hkv))
    sel_err = np.zeros((n_p, n_ctx, steps, len(layers)))
    excess = np.zeros((n_p, n_ctx, steps, len(layers)))
    kern = np.full((n_p, n_ctx, len(layers)), np.nan)
    for p in range(n_p):
        say(f"FFD keep decisions and errors, window {p + 1}/{n_p}")
        for li, layer in enumerate(layers):
            k, s, x = _layer_keep(sample, p, layer, delta, delta_base)
            keep[p, :, :, li], sel_err[p, :, :, li], excess[p, :, :, li] = k, s, x
        if kernel_error:
            for ci in range(n_ctx):
                kern[p, ci] = _kernel_error(sample, p, ci, layers)
    n_ppl = steps if ppl_steps is None else int(ppl_steps)
    nll_e = np.zeros((n_p, n_ppl))
    nll_f = np.zeros((n_p, n_ppl))
    run_keep: list[float] = []
    c_max = sample.contexts[-1]
    for p in range(n_p if n_ppl else 0):
        say(f"perplexity: {n_ppl} exact and {n_ppl} FFD decode steps, window {p + 1}/{n_p}")
        attn = FfdAttention(
            scale=float(sample.model.config.attention_scale), delta=delta,
            delta_base=delta_base,  # type: ignore[arg-type]
        )  # fmt: skip
        nll_e[p] = decode_nll(sample, p, c_max, n_ppl)
        nll_f[p] = decode_nll(sample, p, c_max, n_ppl, attention=attn)
        run_keep += [r for _, r in attn.keep_log]
    return FfdRealStats(
        contexts=sample.contexts, layers=layers, keep=keep, sel_error=sel_err,
        threshold_excess=excess,
        kernel_error=kern, nll_exact=nll_e, nll_ffd=nll_f,
        ffd_run_keep=float(np.mean(run_keep)) if run_keep else float("nan"),
        delta=delta, delta_base=delta_base,
    )  # fmt: skip


def _layer_keep(
    sample: RealDecodeSample, p: int, layer: int, delta: float, delta_base: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Keep ratios ``[n_ctx, steps, Hkv]``, selection errors and threshold excesses
    ``[n_ctx, steps]`` of one window and layer (module docstring); the key cache is quantized
    once, at the longest context, and cut per context
    (:func:`~coaccel.models.gpu.ffd_cache_prefix`)."""
    from coaccel.models.gpu import f32_to_bf16_bits, ffd_block_keep, ffd_cache_prefix, quantize_keys

    bs, steps = 128, sample.steps
    k, v = sample.keys(p, layer), sample.values(p, layer)
    hkv, _, d = k.shape
    scale = float(sample.model.config.attention_scale)
    kb = f32_to_bf16_bits(k.transpose(1, 0, 2)[None])  # [1, T, Hkv, D]
    full = quantize_keys(kb[:, : (kb.shape[1] // bs) * bs], bs)
    d_log2 = delta if delta_base == "2" else delta * math.log2(math.e)
    keep = np.ones((len(sample.contexts), steps, hkv))
    err = np.zeros((len(sample.contexts), steps))
    excess = np.full((len(sample.contexts), steps), np.nan)
    for ci, c in enumerate(sample.contexts):
        q = sample.passages[p].queries[ci, :, layer]  # [steps, Hq, D]
        qb = f32_to_bf16_bits(q)
        s_all = c + steps - 1
        causal = np.arange(s_all)[None, :] <= (c - 1 + np.arange(steps))[:, None]
        exact_mask = np.broadcast_to(causal, (hkv, steps, s_all))
        sel_mask = exact_mask.copy()
        for j in range(steps):
            tq = (c + j) // bs * bs
            if tq < bs:
                continue
            sel = ffd_block_keep(
                qb[j : j + 1], ffd_cache_prefix(full, kb, c + j), delta=delta,
                delta_base=delta_base,  # type: ignore[arg-type]
            )  # fmt: skip
            keep[ci, j] = sel.keep_ratio[0]
            sel_mask[:, j, :tq] &= np.repeat(sel.keep[0], bs, axis=-1)
            ref = np.unique(np.r_[np.arange(min(16, tq)), np.arange(max(0, tq - 16), tq)])
            qg = q[j].reshape(hkv, -1, d).astype(np.float64)
            ex_ref = np.einsum("hgd,htd->hgt", qg, k[:, ref]).max(axis=-1) * scale / math.log(2)
            excess[ci, j] = float((sel.threshold[0] + d_log2 - ex_ref).mean())
        qh = q.transpose(1, 0, 2)  # [Hq, steps, D]
        ex = _attend(qh, k[:, :s_all], v[:, :s_all], exact_mask, scale)
        ap = _attend(qh, k[:, :s_all], v[:, :s_all], sel_mask, scale)
        err[ci] = np.linalg.norm(ap - ex, axis=(0, 2)) / np.linalg.norm(ex, axis=(0, 2))
    return keep, err, excess


def _attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray, scale: float
) -> npt.NDArray[np.float64]:
    from coaccel.models.gpu import masked_attention

    return masked_attention(q, k, v, allowed, scale)


def _kernel_error(
    sample: RealDecodeSample, p: int, ci: int, layers: tuple[int, ...]
) -> npt.NDArray[np.float64]:
    """``[len(layers)]`` relative error of the FFD kernel's bf16 output against float64 dense
    attention, at the first decode step of context ``ci`` (the layers batched as sequences)."""
    from coaccel.models.gpu import (
        DecodeInputs,
        DecodeShape,
        bf16_bits_to_f32,
        dense_attention_f64,
        f32_to_bf16_bits,
        ffd_decode,
    )

    c = sample.contexts[ci]
    if c < 128:
        return np.full(len(layers), np.nan)
    cfg = sample.model.config
    q = np.stack([sample.passages[p].queries[ci, 0, layer] for layer in layers])
    k = np.stack([sample.keys(p, layer)[:, :c].transpose(1, 0, 2) for layer in layers])
    v = np.stack([sample.values(p, layer)[:, :c].transpose(1, 0, 2) for layer in layers])
    shape = DecodeShape(len(layers), c, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
    inputs = DecodeInputs(f32_to_bf16_bits(q), f32_to_bf16_bits(k), f32_to_bf16_bits(v))
    r = ffd_decode(shape, inputs=inputs)
    dense = dense_attention_f64(inputs, shape) if r.dense is None else r.dense
    diff = bf16_bits_to_f32(r.out).astype(np.float64) - dense
    return np.linalg.norm(diff, axis=(1, 2)) / np.linalg.norm(dense, axis=(1, 2))


def extrapolate_keep(
    contexts: Sequence[int], keeps: Sequence[float], target: int
) -> tuple[float, float]:
    """Power-law extrapolation of the keep ratio: least squares of ``log rho`` on ``log T``.

    Args:
        contexts: measured contexts (at least two). keeps: mean keep ratio at each.
        target: context to extrapolate to.

    Returns:
        (keep ratio at ``target``, clipped to (0, 1]; the exponent ``b`` of ``rho ~ T^b``).
    """
    x = np.log(np.asarray(contexts, dtype=np.float64))
    y = np.log(np.clip(np.asarray(keeps, dtype=np.float64), 1e-9, 1.0))
    b, a = np.polyfit(x, y, 1)
    return float(min(1.0, math.exp(a + b * math.log(target)))), float(b)


def ffd_real_rows(
    stats: FfdRealStats,
    archs: Mapping[str, Any],
    bands: Mapping[str, Sequence[Any]],
    simulate: Callable[[Any, Any, str], Any],
    *,
    model: str,
    mode: str = "analytical",
    launch_us: float | None = None,
    speed_gpus: Sequence[str] = ("h200",),
) -> tuple[list[Target], list[str]]:
    """The real-input W2 rows (``w2_keep``, ``w2_real_error``, ``w2_ppl``, ``w2_real``).

    Args:
        stats: :func:`ffd_real_stats`'s measurements. model: the decoder's name.
        archs, bands: GPU configs and their band configs. simulate: the simulator.
        mode: simulator mode. launch_us: gap between two kernels of the CUDA graph, us (None:
            :func:`~coaccel.targets.gpu.ffd.graph_launch_us`).
        speed_gpus: GPUs of the speed rows.

    Returns:
        (rows, notes); every row's ``data`` is ``real`` (the 256K row's keep ratio is
        extrapolated from the real ones, and says so).
    """
    rows = _keep_rows(stats, model) + _error_rows(stats, model) + _ppl_rows(stats, model)
    speed, notes = _speed_rows(stats, archs, bands, simulate, model, mode, launch_us, speed_gpus)
    return rows + speed, notes + _worst_layer_notes(stats)


_REAL_SRC = "no published figure; [SMOLLM2] decode steps on [PYDOC] text, [FFD-REPO] keep rule"


def _row(group: str, name: str, values: npt.ArrayLike, unit: str, note: str) -> Target:
    """An information row of real measurements: mean, sample sd, N in the note."""
    m, sd, n = spread(values)
    return Target(group=group, name=name, ours=m, paper=math.nan, unit=unit, tolerance_pct=None,
                  source=_REAL_SRC, note=f"{note}; mean ± sd over N={n}", ours_sigma=sd,
                  fit="predicted", data="real")  # fmt: skip


def _keep_rows(stats: FfdRealStats, model: str) -> list[Target]:
    rows = []
    for ci, c in enumerate(stats.contexts):
        per_layer = stats.keep[:, ci].mean(axis=(0, 1, 3))
        rows.append(
            _row("w2_keep", f"W2 keep ratio, {model} decode, T={c}, delta={stats.delta:g} "
                 f"(base {stats.delta_base})", stats.keep_per_step(ci), "1",
                 f"attended / quantized 128-token blocks per (window, step), averaged over "
                 f"{len(stats.layers)} layers x KV heads; per layer {per_layer.min():.2f} .. "
                 f"{per_layer.max():.2f}")
        )  # fmt: skip
    return rows


def _error_rows(stats: FfdRealStats, model: str) -> list[Target]:
    rows = []
    for ci, c in enumerate(stats.contexts):
        sel = stats.sel_error[:, ci]
        rows.append(
            _row("w2_real_error", f"W2 selection error, {model}, T={c}", sel, "1",
                 f"||attention over kept blocks + tail - exact|| / ||exact|| per (window, step, "
                 f"layer), float64; median {np.median(sel):.3g}, max {sel.max():.3g}")
        )  # fmt: skip
        ke = stats.kernel_error[:, ci]
        if np.isfinite(ke).any():
            rows.append(
                _row("w2_real_error", f"W2 kernel error (2-bit scan + e4m3 residual), {model}, "
                     f"T={c}", ke, "1",
                     f"bf16 output of the whole FFD step against float64 dense attention, per "
                     f"(window, layer) at the first step; median {np.nanmedian(ke):.3g}")
            )  # fmt: skip
    return rows


def _ppl_rows(stats: FfdRealStats, model: str) -> list[Target]:
    d = stats.nll_delta
    if d.size == 0:
        return []
    c = stats.contexts[-1]
    m, _, n = spread(d)
    return [
        _row("w2_ppl", f"W2 NLL change (FFD selection - exact), {model} decode, T={c}", d,
             "nat/token", f"{d.shape[1]} teacher-forced decode steps in each of {d.shape[0]} "
             f"windows; keep ratio in the FFD runs {stats.ffd_run_keep:.3f}"),
        Target(group="w2_ppl", name=f"W2 perplexity ratio (FFD / exact), {model} decode, T={c}",
               ours=math.exp(m), paper=math.nan, unit="x", tolerance_pct=None, source=_REAL_SRC,
               note=f"exp(mean NLL change) over N={n} decode steps; exact perplexity "
               f"{math.exp(float(stats.nll_exact.mean())):.3g}", fit="predicted", data="real"),
    ]  # fmt: skip


def _speed_rows(
    stats: FfdRealStats, archs: Mapping[str, Any], bands: Mapping[str, Sequence[Any]],
    simulate: Callable[[Any, Any, str], Any], model: str, mode: str, launch_us: float | None,
    speed_gpus: Sequence[str],
) -> tuple[list[Target], list[str]]:  # fmt: skip
    """``w2_real``: the kernel speedup at each measured context with the measured keep ratio
    (beside the traffic bound), and at the paper's context with the keep ratio extrapolated
    from them (beside the paper's headline)."""
    from coaccel.models.gpu import DecodeShape, ffd_trace, traffic_bound_speedup
    from coaccel.targets.gpu.ffd import (
        graph_launch_us,
        keep_for_speedup,
        paper_speedup,
        w2_speedups,
    )

    lu = graph_launch_us() if launch_us is None else launch_us
    paper = paper_speedup()
    target = int(load_published("gpu")["ffd.context"].value)
    keeps = [float(stats.keep_per_step(ci).mean()) for ci in range(len(stats.contexts))]
    rho_x, expo = extrapolate_keep(stats.contexts, keeps, target)
    bound_src = "[DERIVED] 512 / (36 + 384 rho) B per token-head ([FFD-REPO] cache format)"
    rows = []
    points = [(c, k, False) for c, k in zip(stats.contexts, keeps, strict=True) if c >= 256]
    for c, rho, extrapolated in [*points, (target, rho_x, True)]:
        shape = DecodeShape(batch=1, context=c)
        tr = ffd_trace(shape, keep_ratio=rho, seed=0)
        kept = float(tr.meta["workload"]["metrics"]["keep_ratio"][0])
        for g in speed_gpus:
            sp, w1, w2 = w2_speedups(bands[g], simulate, mode, shape, tr, launch_us=lu)
            how = "extrapolated from the measured" if extrapolated else "measured"
            ref, unit, src = (
                (paper.value, paper.unit, paper.source) if extrapolated
                else (traffic_bound_speedup(kept), "x", bound_src)
            )  # fmt: skip
            rows.append(
                Target(group="w2_real", name=f"{g} W2/W1 kernel speedup, T={c}, keep {kept:.3f} "
                       f"({how} {model} keep)", ours=sp[0], paper=ref, unit=unit,
                       tolerance_pct=None, source=src,
                       note=f"W1 {w1 * 1e6:.1f} us, W2 {w2 * 1e6:.1f} us; one layer, B=1, the "
                       "authors' benchmark heads (32/8 x 128), seeded placement of the kept "
                       f"blocks; CUDA graph, {lu:g} us between kernels", fit="predicted",
                       ours_low=min(sp), ours_high=max(sp), data="real")
            )  # fmt: skip
    notes = [
        f"W2 on {model}: mean keep ratio "
        + ", ".join(f"{k:.3f} at {c}" for c, k in zip(stats.contexts, keeps, strict=True))
        + f" tokens falls as T^{expo:.2f}; extrapolated to {target} tokens: {rho_x:.3f} (the "
        f"paper's {paper.value:g}x needs {keep_for_speedup(paper.value):.3f} at the traffic "
        "bound); the model's own context ends at 8K, so the 256K row is an extrapolation",
    ]
    return rows, notes


def _worst_layer_notes(stats: FfdRealStats) -> list[str]:
    """Where the selection error comes from: the layers with the largest mean error and how
    far their threshold's reference lies above the exact one."""
    per_layer = stats.sel_error.mean(axis=(0, 1, 2))
    exc = np.nanmean(stats.threshold_excess, axis=(0, 1, 2))
    worst = np.argsort(-per_layer)[:3]
    rest = np.setdiff1d(np.arange(per_layer.size), worst)
    text = ", ".join(
        f"layer {stats.layers[i]}: error {per_layer[i]:.3f}, excess {exc[i]:+.1f}" for i in worst
    )
    return [
        "W2 selection error by layer (mean over windows, contexts and steps) and the threshold "
        "excess (best 2-bit approximate score of the 16 sink and 16 recent tokens minus their "
        f"best exact score, log2 units): {text}; the other layers: error "
        f"{per_layer[rest].mean():.3f}, excess {np.nanmean(exc[rest]):+.1f}. A positive excess "
        "lifts the threshold above blocks that hold attention (the symmetric 2-bit code has no "
        "zero level, so a key far smaller than its block's channel scales, such as the first "
        "token's, scores far above its exact score)"
    ]
