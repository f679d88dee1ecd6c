"""cocotb testbench of ``rtl/deltallm/dl_attention_top.v`` against
``coaccel.models.deltallm.attention`` (one KV head, one query block per run).

A memory model in the testbench serves the top's five valid/ready streams from the reference's
own tensors: the query block (element-major), the exact key rows, the Delta-Key rows in their
stored form (bitmask + the 9-bit kept values packed in index order, ``pack_delta_rows``)
and the value rows, and takes the output beats. Every block of seeded attention problems (every
key class, θ including 0 and values that leave whole delta rows empty, W from 1 to beyond T,
τ finite and infinite, both denominator modes) runs twice:

* without stalls: every output beat equals the reference output, and the block's cycle count
  equals the cycle model ``FILL + D·ceil(L/M) + L·D/M + Σ_j max(1, qk_j + pv_j)`` (q load, output
  beats, columns) with
  ``qk_j = D/M·[exact lane] + ceil(nnz_j/M)·[delta lane]`` and ``pv_j = D/M·[kept]`` (the
  reference's skip decisions), with a single constant ``FILL`` for all blocks;
* with seeded random stalls on every input stream and back-pressure on the output: the same
  output bits.
"""

from __future__ import annotations

import math

import cocotb
import deltallm_stim as stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from coaccel.models.deltallm import pack_delta_rows

CONTROL = ("i_start", "i_q_valid", "i_k_valid", "i_dl_valid", "i_v_valid", "i_y_ready")
DATA = ("i_i0", "i_n_tok", "i_window", "i_n_sink", "i_mant", "i_sh", "i_tau_e", "i_no_skip",
        "i_denom_kept", "i_q_data", "i_k_data", "i_dl_mask", "i_dl_data", "i_v_data")  # fmt: skip
OUTPUTS = ("o_busy", "o_done", "o_q_ready", "o_k_ready", "o_dl_ready", "o_v_ready", "o_y_valid",
           "o_y_data")  # fmt: skip
NAMES = ("D", "L", "M", "PQ", "TB", "SW", "CW", "SHW", "EW", "TW", "LW", "OW")


STAGES = ("bitmask_decode", "operand_mux", "multiply", "adder_tree", "window_select",
          "max_exponent", "exp2", "skip_reduce", "rescale_issue")  # fmt: skip


def simulator_arch(p: dict[str, int]):
    """The FPGA simulator's KV260 design with this build's L and M, q loaded and outputs written
    M elements per cycle, and no pipeline stages: the top computes each column's score and
    softmax step in one cycle, so its whole per-block constant is ``FILL`` (cycles.csv)."""
    from coaccel.sim.deltallm_fpga import load_arch
    from coaccel.spine.config import override

    changes = {f"pipeline.{s}_cycles": 0 for s in STAGES}
    changes.update(
        {
            "datapath.lanes": p["L"],
            "datapath.macs_per_lane": p["M"],
            "pipeline.q_load_elems_per_cycle": p["M"],
            "pipeline.out_write_elems_per_cycle": p["M"],
        }
    )
    return override(load_arch("kv260"), changes)


def simulator_cycles(b: stim.BlockCase, p: dict[str, int], arch) -> int:
    """``query_block_cycles`` of the FPGA simulator for the block's event records."""
    from coaccel.sim.deltallm_fpga import (
        KIND_DELTA,
        KIND_EXACT,
        KIND_SKIPPED,
        query_block_cycles,
    )

    ex = b.exact.any(axis=1)
    de = (b.valid & ~b.exact).any(axis=1)
    kind = ex * KIND_EXACT + de * KIND_DELTA + b.skipped * KIND_SKIPPED
    nnz = b.mask[: len(b.scores)].sum(axis=1)
    return query_block_cycles(kind.astype(np.uint8), nnz, arch, head_dim=p["D"])


def expected_cycles(b: stim.BlockCase, p: dict[str, int]) -> int:
    """The cycle model without the constant: D·ceil(L/M) + L·D/M + Σ_j max(1, qk_j + pv_j)."""
    nc = p["D"] // p["M"]
    total = p["D"] * -(-p["L"] // p["M"]) + p["L"] * nc
    for j in range(len(b.scores)):
        ex = bool(b.exact[j].any())
        de = bool((b.valid[j] & ~b.exact[j]).any())
        qk = nc * ex + (-(-int(b.mask[j].sum()) // p["M"])) * de
        pv = 0 if b.skipped[j] else nc
        total += max(1, qk + pv)
    return total


async def _run_block(dut, p, b: stim.BlockCase, rng, stall: float) -> tuple[np.ndarray, int]:
    """One block through the top; returns (output [L, D] int16, cycles start -> o_done)."""
    d_n, lanes, m_n = p["D"], p["L"], p["M"]
    nc = d_n // m_n
    n = len(b.scores)
    srcs = {
        "i_q": [{"i_q_data": rtlkit.pack_lanes(b.q[grp * m_n : (grp + 1) * m_n, e], 8)}
                for grp in range(-(-lanes // m_n)) for e in range(d_n)],
        "i_k": [{"i_k_data": rtlkit.pack_lanes(b.k[j], 8)} for j in range(n) if b.exact[j].any()],
        "i_dl": [{"i_dl_mask": rtlkit.pack_lanes(b.mask[j], 1),
                  "i_dl_data": rtlkit.pack_lanes(pack_delta_rows(b.deltas[j], b.mask[j])[0], 9)}
                 for j in range(n) if (b.valid[j] & ~b.exact[j]).any()],
        "i_v": [{"i_v_data": rtlkit.pack_lanes(b.v[j], 8)} for j in range(n)],
    }  # fmt: skip
    n_tok = int((b.tokens >= 0).sum() // (lanes // p["PQ"]))
    dut.i_i0.value = b.i0
    dut.i_n_tok.value = n_tok
    dut.i_window.value = b.window
    dut.i_n_sink.value = 1
    dut.i_mant.value = rtlkit.pack_lanes(b.mant, p["CW"])
    dut.i_sh.value = rtlkit.pack_lanes(b.sh, p["SHW"])
    dut.i_tau_e.value = 0 if b.tau_e is None else b.tau_e
    dut.i_no_skip.value = int(b.tau_e is None)
    dut.i_denom_kept.value = int(b.denom_mode == "kept")
    sources = []
    for prefix, beats in srcs.items():
        ready = "o" + prefix[1:] + "_ready"
        s = rtlkit.StreamSource(dut, prefix, rng if stall else None, stall, ready=ready)
        s.send(beats)
        sources.append(s)
        cocotb.start_soon(s.run())
    sink = rtlkit.StreamSink(
        dut, "o_y", ["o_y_data"], rng if stall else None, stall, ready="i_y_ready"
    )
    sink_task = cocotb.start_soon(sink.run())
    await FallingEdge(dut.i_clk)
    dut.i_start.value = 1
    await RisingEdge(dut.i_clk)
    await FallingEdge(dut.i_clk)
    dut.i_start.value = 0
    cycles = 1
    while True:
        await RisingEdge(dut.i_clk)
        await ReadOnly()
        cycles += 1
        rtlkit.check_resolved(dut, OUTPUTS, f"block i0={b.i0} cycle {cycles}")
        if int(dut.o_done.value):
            break
        if cycles > 20000:
            raise AssertionError(
                f"the top did not finish: state {int(dut.state.value)} column {int(dut.j.value)}"
                f" chunk {int(dut.chunk.value)} lane {int(dut.lane.value)}; beats taken "
                + ", ".join(f"{s.prefix} {s.sent}/{len(s.beats)}" for s in sources)
            )
    await FallingEdge(dut.i_clk)
    sink_task.cancel()
    dut.i_y_ready.value = 0
    for s in sources:
        assert s.sent == len(s.beats), f"{s.prefix}: {s.sent} of {len(s.beats)} beats taken"
    words = [bt["o_y_data"] for bt in sink.beats]
    assert len(words) == lanes * nc, f"{len(words)} output beats, expected {lanes * nc}"
    y = np.concatenate([rtlkit.unpack_lanes(w, 16, m_n, signed=True) for w in words])
    return y.reshape(lanes, d_n), cycles


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    await rtlkit.reset(dut, zero=CONTROL + DATA)
    for _ in range(3):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, "after reset")
    for name in OUTPUTS:
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def blocks_match_reference(dut):
    """Every block: output equal to the reference (with and without stalls), cycles = model."""
    await rtlkit.reset(dut, zero=CONTROL + DATA)
    p = {k: int(getattr(dut, k).value) for k in NAMES}
    cfg = rtlkit.tb_config()
    for key, value in cfg["params"].items():
        assert p[key] == int(value)
    rng = np.random.default_rng(cfg["seed"])
    g = p["L"] // p["PQ"]
    fills, bad, blocks_run, stalled, rows = set(), 0, 0, 0, []
    arch = simulator_arch(p)
    sim_fills = set()
    skipped = columns = 0
    for i in range(cfg["problems"]):
        t_n = cfg["t_len"]
        blocks = stim.attention_blocks(
            rng,
            d=p["D"],
            t_n=t_n,
            g=g,
            p_q=p["PQ"],
            theta=[0, 2, 6, 40][i % 4],
            window=[1, 3, 8, t_n + 1][i % 4],
            tau=[2.0, 6.0, math.inf][i % 3],
            key_kind=stim.KEY_CLASSES[i % len(stim.KEY_CLASSES)],
            denom_mode=("full", "kept")[(i // 3) % 2],
            q_scale=float(rng.choice([0.05, 0.5, 2.0])),
        )
        for b in blocks:
            y, cyc = await _run_block(dut, p, b, rng, 0.0)
            fills.add(cyc - expected_cycles(b, p))
            sim_fills.add(cyc - simulator_cycles(b, p, arch))
            rows.append((b.i0, len(b.scores), cyc))
            bad += not np.array_equal(y, b.output)
            if not np.array_equal(y, b.output):
                dut._log.error(f"problem {i} i0={b.i0}: output differs at "
                               f"{np.argwhere(y != b.output)[:4].tolist()}")  # fmt: skip
            blocks_run += 1
            skipped += int(b.skipped.sum())
            columns += len(b.scores)
            if blocks_run % cfg["stall_every"] == 0:
                y2, _ = await _run_block(dut, p, b, rng, cfg["stall_prob"])
                bad += not np.array_equal(y2, b.output)
                stalled += 1
    rtlkit.write_results(
        {
            "blocks": blocks_run,
            "stalled_blocks": stalled,
            "columns": columns,
            "skipped_columns": skipped,
            "mismatches": bad,
            "fill_cycles": sorted(fills),
            "simulator_fill_cycles": sorted(sim_fills),
            "latency_cycles": sorted(fills)[0],
            "ii_cycles": 1,
        }
    )
    assert bad == 0, f"{bad} block outputs differ"
    assert len(fills) == 1, f"the cycle model's constant varies: {sorted(fills)}"
