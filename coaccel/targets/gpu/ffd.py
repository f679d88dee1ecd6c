"""W2 (FFD) rows of ``coaccel validate gpu``: speedup over W1 against keep ratio, and accuracy.

Pure computation. :func:`ffd_validation` returns shared validation rows
(:class:`~coaccel.validate.targets.Target`) and notes:

* group ``w2``: the simulated kernel speedup of one FFD decode step over one W1 FlashDecoding
  step (one layer, B = 1, both kernels and their reductions) at a long context for a list of
  keep ratios, each beside the bandwidth-bound traffic ratio of the cache format ([DERIVED]
  ``512 / (36 + 384 rho)`` B per token and KV head, [FFD-REPO] cache layout) — predicted,
  nothing of W2 was fitted; and the paper's headline ([FFD] abstract: up to 11.6x kernel-level
  speedup at 256K, figures ``ffd.speedup`` and ``ffd.context`` of
  ``arch_configs/validation/gpu.yaml``) beside our speedup at the keep ratio for which the
  traffic bound equals 11.6x (the abstract states neither the GPU nor the keep ratio, so that
  ratio is our assumption). Each is judged by the band rule of ``coaccel validate gpu``: ``ok``
  when the bound (or the paper's figure) lies inside our band;
* group ``w2_error``: the attention-output error of FFD against dense float64 attention
  (relative Frobenius norm over all heads) at each keep ratio — the top-delta rule at delta 5
  and 7 (keep ratio from the math) and forced ratios — on seeded peaked inputs
  (:func:`coaccel.models.gpu.make_peaked_inputs`), beside W1's own error (bf16 output
  rounding) on the same inputs. No published figure: ``paper`` is NaN.

Execution mode: the authors time their three kernels captured in one CUDA graph
([FFD-REPO] runner), so both steps are simulated with the gap between two kernels of a graph,
:func:`graph_launch_us` (figure ``cuda_graph.kernel_gap`` of the same file; a parameter,
``launch_us``), instead of the config's stream launch latency. The W2 traces of the speed rows
use a seeded synthetic keep mask (the keep decisions of real activations are data-dependent;
the speed depends on how many blocks are kept and, through DRAM rows, where). The rows of a
real model's keep decisions are :mod:`coaccel.targets.gpu.ffd_real`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coaccel.validate.published import PublishedFigure, load_published
from coaccel.validate.targets import Target

__all__ = [
    "ffd_validation",
    "graph_launch_us",
    "graph_mode",
    "keep_for_speedup",
    "paper_speedup",
    "w2_speedups",
]

Simulate = Callable[[Any, Any, str], Any]


def graph_launch_us() -> float:
    """Gap between two kernels of one CUDA graph, us: figure ``cuda_graph.kernel_gap`` of
    ``arch_configs/validation/gpu.yaml`` ([DERIVED] from [CUDAJL-GRAPHS]: 80 small kernels
    launched as one graph took 70 us, their own run time included, so an upper bound)."""
    f = load_published("gpu")["cuda_graph.kernel_gap"]
    if f.unit != "us":
        raise ValueError(f"cuda_graph.kernel_gap must be in us, got {f.unit!r}")
    return f.value


def paper_speedup() -> PublishedFigure:
    """The paper's headline: up to 11.6x kernel-level speedup over FlashDecoding at 256K
    ([FFD] abstract; figure ``ffd.speedup`` of ``arch_configs/validation/gpu.yaml``)."""
    return load_published("gpu")["ffd.speedup"]


def keep_for_speedup(speedup: float, *, head_dim: int = 128, block_tokens: int = 128) -> float:
    """Keep ratio at which the bandwidth-bound traffic ratio equals ``speedup`` (the inverse
    of :func:`coaccel.models.gpu.traffic_bound_speedup`)."""
    scan = head_dim / 4 + 4 * head_dim / block_tokens
    return (4 * head_dim / speedup - scan) / (3 * head_dim)


def graph_mode(arch: Any, launch_us: float | None) -> Any:
    """``arch`` with ``launch_us`` between kernels (None: the config's stream latency)."""
    from coaccel.spine.config import override

    return arch if launch_us is None else override(arch, {"launch_overhead_us": launch_us})


def w2_speedups(
    configs: Sequence[Any],
    simulate: Simulate,
    mode: str,
    shape: Any,
    w2_trace: Any,
    *,
    launch_us: float | None,
) -> tuple[list[float], float, float]:
    """W1 / W2 time of one decode step on each config.

    Args:
        configs: GPU configs (nominal first, then the band's).
        simulate: ``simulate(arch, workload, mode)``. mode: simulator mode.
        shape: the :class:`~coaccel.models.gpu.DecodeShape` of both steps.
        w2_trace: the W2 step's trace (:func:`coaccel.models.gpu.ffd_trace` of ``shape``).
        launch_us: gap between kernels, us (a CUDA graph's: :func:`graph_launch_us`; None:
            the config's stream launch latency).

    Returns:
        (speedup per config, W1 s and W2 s on the nominal config).
    """
    from coaccel.models.gpu import flash_decode_trace

    sp, w1_0, w2_0 = [], math.nan, math.nan
    for i, a in enumerate(configs):
        g = graph_mode(a, launch_us)
        w1 = float(simulate(g, flash_decode_trace(shape, n_sms=a.sm.count), mode).seconds)
        w2 = float(simulate(g, w2_trace, mode).seconds)
        sp.append(w1 / w2)
        if i == 0:
            w1_0, w2_0 = w1, w2
    return sp, w1_0, w2_0


def ffd_validation(
    archs: Mapping[str, Any],
    bands: Mapping[str, Sequence[Any]],
    simulate: Simulate,
    *,
    mode: str = "analytical",
    context: int | None = None,
    keep_ratios: Sequence[float] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5),
    error_context: int = 16384,
    error_keep_ratios: Sequence[float] = (0.01, 0.02, 0.05, 0.1, 0.2, 1.0),
    seed: int = 0,
    launch_us: float | None = None,
    cuda_graph: bool = True,
) -> tuple[list[Target], list[str]]:
    """The W2 anchors and notes on synthetic inputs (module docstring).

    Args:
        archs: GPU name -> config. bands: GPU name -> (nominal, low, high) configs.
        simulate: ``simulate(arch, workload, mode)``.
        mode: simulator mode of the speed rows.
        context: tokens of the speed rows (None: the paper's, 256K).
        keep_ratios: keep ratios of the speed rows.
        error_context: tokens of the accuracy rows (their numerics run in numpy).
        error_keep_ratios: forced keep ratios of the accuracy rows.
        seed: seed of the synthetic keep masks and inputs.
        launch_us: gap between two kernels of the CUDA graph, us (None:
            :func:`graph_launch_us`).
        cuda_graph: False: each kernel pays the config's stream launch latency instead.

    Returns:
        (rows, notes): the ``w2`` rows carry our band (``bands``), the ``w2_error`` rows none;
        every row's ``data`` is ``synthetic`` (seeded keep masks and inputs).
    """
    if context is None:
        context = int(load_published("gpu")["ffd.context"].value)
    if cuda_graph and launch_us is None:
        launch_us = graph_launch_us()
    elif not cuda_graph:
        launch_us = None
    rows = _speed_rows(archs, bands, simulate, mode, context, keep_ratios, seed, launch_us)
    notes = [
        "W2 speedup: the traffic bound assumes both steps stream at one bandwidth; the simulated "
        "W2 split kernel is DRAM-bound like W1's but at a lower efficiency (short strided runs: "
        "32-B code rows, kept 128-B residual and 256-B V rows), and the step pays a third "
        "kernel (the threshold kernel), which weighs most at small keep ratios",
        f"W2 speed rows: {_launch_text(launch_us)}",
    ]
    err_rows, err_note = _error_rows(error_context, error_keep_ratios, seed)
    return rows + err_rows, notes + [err_note]


def _launch_text(launch_us: float | None) -> str:
    if launch_us is None:
        return "each kernel pays the config's stream launch latency (no CUDA graph)"
    return (
        f"the three kernels of a step run in one CUDA graph as the authors time them, "
        f"{launch_us:g} us between kernels (launch_us; [DERIVED] [CUDAJL-GRAPHS])"
    )


def _speed_rows(
    archs: Mapping[str, Any], bands: Mapping[str, Sequence[Any]], simulate: Simulate, mode: str,
    context: int, keep_ratios: Sequence[float], seed: int, launch_us: float | None,
) -> list[Target]:  # fmt: skip
    """The ``w2`` rows: speedup at each keep ratio beside the traffic bound, and at the keep
    ratio whose bound is the paper's headline beside the headline."""
    from coaccel.models.gpu import DecodeShape, ffd_trace, traffic_bound_speedup

    paper = paper_speedup()
    shape = DecodeShape(batch=1, context=context)
    bound_src = "[DERIVED] 512 / (36 + 384 rho) B per token-head ([FFD-REPO] cache format)"
    rho_paper = keep_for_speedup(paper.value)
    rows: dict[str, list[Target]] = {g: [] for g in archs}
    for rho in (*keep_ratios, rho_paper):
        tr = ffd_trace(shape, keep_ratio=rho, seed=seed)
        kept = float(tr.meta["workload"]["metrics"]["keep_ratio"][0])
        for g in archs:
            sp, w1, w2 = w2_speedups(bands[g], simulate, mode, shape, tr, launch_us=launch_us)
            name = f"{g} W2/W1 speedup, T={context}, keep={kept:.4f}"
            if rho is rho_paper:
                ref, unit, src = paper.value, paper.unit, paper.source
                note = (
                    f"at the keep ratio whose traffic bound is {paper.value:g}x "
                    f"({rho_paper:.2%}, our assumption)"
                )
            else:
                ref, unit, src = traffic_bound_speedup(kept), "x", bound_src
                note = (
                    f"W1 {w1 * 1e6:.1f} us, W2 {w2 * 1e6:.1f} us (one layer, B=1, seeded keep "
                    "mask, 128 splits)"
                )
            rows[g].append(
                Target(group="w2", name=name, ours=sp[0], paper=ref, unit=unit,
                       tolerance_pct=None, source=src, note=note, fit="predicted",
                       ours_low=min(sp), ours_high=max(sp), data="synthetic")
            )  # fmt: skip
    return [t for g in archs for t in rows[g]]


def _error_rows(
    error_context: int, error_keep_ratios: Sequence[float], seed: int
) -> tuple[list[Target], str]:
    """The ``w2_error`` rows on seeded peaked inputs, and their note."""
    from coaccel.models.gpu import (
        DecodeShape,
        bf16_bits_to_f32,
        dense_attention_f64,
        ffd_decode,
        flash_decode,
        make_peaked_inputs,
        quantize_keys,
    )

    eshape = DecodeShape(batch=1, context=error_context)
    inputs = make_peaked_inputs(eshape, seed)
    cache = quantize_keys(inputs.k, 128)
    dense = dense_attention_f64(inputs, eshape)
    w1o = bf16_bits_to_f32(flash_decode(eshape, inputs=inputs, num_splits=128).out)
    w1_err = float(math.dist(w1o.ravel(), dense.ravel()) / float((dense**2).sum() ** 0.5))
    src = "no published figure; dense float64 attention of the same bf16 inputs"
    runs: list[tuple[str, dict[str, Any]]] = [
        (f"top-delta delta={d:g}", {"delta": d}) for d in (5.0, 7.0)
    ] + [(f"forced keep={r:g}", {"keep_ratio": r}) for r in error_keep_ratios]
    rows = []
    for label, kw in runs:
        r = ffd_decode(eshape, inputs=inputs, cache=cache, num_splits=128, **kw)
        rows.append(
            Target(group="w2_error",
                   name=f"W2 output error, T={error_context}, {label}, keep={r.keep_ratio:.4f}",
                   ours=r.rel_error, paper=math.nan, unit="1", tolerance_pct=None, source=src,
                   note=f"relative Frobenius error; W1 on the same inputs: {w1_err:.2e}",
                   fit="predicted", data="synthetic")
        )  # fmt: skip
    note = (
        f"W2 accuracy on seeded peaked inputs (sink, recent and sparse needle tokens score "
        f"high; T={error_context}); the error at keep 1.0 is the key cache's own (2-bit codes "
        f"+ e4m3 residual), W1's is {w1_err:.2e}"
    )
    return rows, note
