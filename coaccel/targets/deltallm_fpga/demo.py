"""DeltaLLM's stage of ``coaccel demo``: reference -> event trace -> KV260 simulator, and one
row on real keys (SmolLM2-135M)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from coaccel.report.files import write_text

__all__ = ["stage_deltallm"]


def stage_deltallm(out: Path, rng: np.random.Generator) -> None:
    """DeltaLLM attention in fixed point on synthetic Llama-3.2-1B keys, its event trace, the
    KV260 vector-processor simulator against TeLLMe-v2, and ρ_K / ρ_S on real keys."""
    from coaccel.models import deltallm as dl
    from coaccel.models.nn import synthetic_attention
    from coaccel.simulation import load_arch, simulate
    from coaccel.spine.config import override

    t = synthetic_attention(rng, "llama-3.2-1b", tokens=64, kv_heads=2).tensors
    res = dl.attention(t.q_int8, t.k_int8, t.v_int8, theta=4, window=16, tau=8,
                       q_scale=t.q_scale, k_scale=t.k_scale)  # fmt: skip
    st = res.stats
    print(f"  reference: llama-3.2-1b shapes, T=64, 2 KV heads: rho_K {st.delta_sparsity:.1%}, "
          f"rho_S {st.structured_sparsity:.1%}, {st.skipped_columns} of {st.visited_columns} "
          "columns skipped")  # fmt: skip
    trace = dl.delta_trace(dl.delta_events(res, query_block=4), workload={"tokens": 64})
    path = out / "deltallm_trace.npz"
    trace.save(path)
    print(f"  event trace: {trace.sparsity.shape[0]} sparsity records, "
          f"{trace.memory.shape[0]} DRAM records -> {path}")  # fmt: skip
    _, arch = load_arch("kv260")
    arch = override(arch, {"keys.layers_simulated": 1})
    wl = "llama-3.2-1b:prefill_64"
    cyc = simulate(arch, wl, mode="cycle")
    ana = simulate(arch, wl, mode="analytical")
    base = simulate("tellme_v2", wl)
    err = (ana.attention_cycles - cyc.attention_cycles) / cyc.attention_cycles
    print(f"  KV260 vector processor, {wl}: attention {cyc.attention_cycles:,} cycles "
          f"({cyc.attention_cycles / cyc.freq_mhz / 1e3:.2f} ms; analytical {err:+.2%}), TTFT "
          f"{cyc.seconds:.3f} s")  # fmt: skip
    slower = base.attention_cycles / cyc.attention_cycles
    print(f"  TeLLMe-v2 baseline: attention {slower:.1f}x slower, TTFT {base.seconds:.3f} s "
          f"(end-to-end {base.seconds / cyc.seconds:.2f}x)")  # fmt: skip
    p = out / "deltallm_sim.json"
    write_text(p, json.dumps({"cycle": cyc.to_dict(), "analytical": ana.to_dict(),
                             "tellme_v2": base.to_dict()}, indent=1, default=str))  # fmt: skip
    print(f"  results -> {p}")
    _real_row()


def _real_row(passages: int = 2, tokens: int = 128) -> None:
    """ρ_K and ρ_S on SmolLM2-135M's real post-RoPE keys (a few seconds), or how to get them."""
    from coaccel.spine.errors import MissingDependencyError

    from .real import measure_real_sparsity

    try:
        rc = measure_real_sparsity(passages=passages, tokens=tokens, thetas=(4,), taus=(8.0,))
    except MissingDependencyError as exc:
        print(f"  real keys: left out ({exc})")
        return
    k, s = rc.rho_k(4), rc.rho_s(4, 8.0, rc.layouts[0])
    print(f"  real keys ({rc.model}, {passages} pydoc passages x {tokens} tokens, all "
          f"{len(rc.layers)} layers): rho_K {k.mean:.1%} (per passage {k.passage_std:.1%} sd) "
          f"at theta 4, rho_S {s.mean:.1%} (per passage {s.passage_std:.1%} sd) at tau 8; "
          "coaccel validate deltallm has the full statistics")  # fmt: skip
