"""The HBQ ASIC engine: the PE-tile micro-model and the program engine (numba vs simpy).

Expected values: schedules derived by hand from the documented rules (docs/hbq_sim.md), the
closed form (an independent formula) wherever the banking is conflict-free, and the simpy
process model as the reference of the numba recurrence.
"""

from __future__ import annotations

import numpy as np
import pytest

from coaccel.sim.hbq_asic import ARCH_NAMES, load_arch
from coaccel.sim.hbq_asic._hw import hw_params
from coaccel.sim.hbq_asic.engine import (
    QUEUE_DMA,
    QUEUE_NONE,
    QUEUE_PE,
    QUEUE_VECTOR,
    Program,
    pe_tile_closed_form,
    pe_tile_cycles,
    run_program,
)
from coaccel.spine.config import override


def _fmts(hw):
    a = (
        next(f for f in hw.act_formats if f not in ("fp16", "bf16", "fp32"))
        if any(f not in ("fp16", "bf16", "fp32") for f in hw.act_formats)
        else "fp16"
    )
    w = next(f for f in hw.wgt_formats if f not in ("fp16", "bf16", "fp32"))
    return a, w


@pytest.mark.parametrize("name", ARCH_NAMES)
@pytest.mark.parametrize("shadow", [False, True])
def test_micro_model_equals_closed_form_without_conflicts(name, shadow):
    arch = override(load_arch(name), {"pe_array.weight_shadow_regs": shadow})
    hw = hw_params(arch)
    fa, fw = _fmts(hw)
    for m in (1, 3, 17, 128, 396):
        for n in (1, 16, 33, 128, 256):
            for k in (1, 128, 129, 384):
                for rd in (False, True):
                    for fb in (fw, "fp16"):
                        a = pe_tile_cycles(hw, m, n, k, has_psum_read=rd, fmt_a=fa, fmt_b=fb)
                        b = pe_tile_closed_form(hw, m, n, k, has_psum_read=rd, fmt_a=fa, fmt_b=fb)
                        assert a == b, (name, m, n, k, rd, fb)
                        assert a.occupancy == (
                            a.ideal + a.weight_propagation + a.issue_interval + a.operand_passes
                            + a.psum_bank_conflict + a.pipeline_turnaround
                        )  # fmt: skip


def test_hbq_e_tile_by_hand():
    hw = hw_params(load_arch("hbq_e_28nm"))
    # 32 PEs shift one 529-bit weight word (<= 544-bit port) each: 32 cycles; issue to
    # write-back = 1 (ACT read) + 2 (broadcast) + 3 (PE) + 2 (accumulate) = 8, result + 1 = 9.
    assert (
        hw.prop_cycles("hbq-e"),
        hw.writeback_stage_cycles,
        hw.result_stage_cycles,
        hw.fsm_cycles,
    ) == (32, 8, 9, 2)
    t = pe_tile_cycles(hw, 512, 256, 128, has_psum_read=True, fmt_a="hbq-e", fmt_b="hbq-e")
    # 8 waves (8 groups of 32 channels): 2 + 32 cycles before the first issue, 8 x 512 issue
    # cycles, 7 gaps of 2 + max(32, 8) - 1 = 33 cycles, and after the last issue the result
    # (9 cycles later) plus 2 state-machine cycles: 8 + 2 more.
    assert t.occupancy == 2 + 32 + 8 * 512 + 7 * 33 + 8 + 2 == 4371
    assert t.last_result == 4371 - 2 and t.first_result == 34 + 9
    assert (t.ideal, t.weight_propagation, t.pipeline_turnaround) == (4096, 256, 19)
    # Every token reads and writes two 16-channel MXINT8 words per wave.
    assert (t.psum_reads, t.psum_writes) == (512 * 16, 512 * 16)
    t0 = pe_tile_cycles(hw, 512, 256, 128, has_psum_read=False, fmt_a="hbq-e", fmt_b="hbq-e")
    assert (t0.psum_reads, t0.psum_writes, t0.occupancy) == (0, 512 * 16, 4371)
    # An FP16 K operand on the 4-bit weight port: 4 passes per token, and 4 x 32 cycles of
    # weight shift (2048 bits of FP16 weights per PE over a 544-bit port).
    t16 = pe_tile_cycles(hw, 4, 32, 128, has_psum_read=False, fmt_a="hbq-e", fmt_b="fp16")
    assert t16.weight_propagation == 128 and t16.operand_passes == 3 * 3
    assert t16.occupancy == 2 + 128 + (1 + 3 * 4) + 8 + 2


def test_psum_bank_conflicts_by_hand():
    # Two single-port banks, two words per token (32 PEs / 16): every read of a token takes
    # both banks, and so does every write-back, d = writeback - read stage = 3 issue slots
    # later.
    arch = override(load_arch("hbq_e_28nm"), {"buffers.psum.banks": 2})
    hw = hw_params(arch)
    t = pe_tile_cycles(hw, 6, 32, 128, has_psum_read=True, fmt_a="hbq-e", fmt_b="hbq-e")
    # Issues at F, F+1, F+2; F+3..F+5 carry the write-backs of those three, so the 4th token
    # waits until F+6; then F+7, F+8. F = 2 + 32.
    assert t.psum_bank_conflict == 3
    assert t.last_result == 34 + 8 + 9 and t.occupancy == 34 + 8 + 9 + 2
    # Without partial-sum reads (first K step) nothing collides; with two ports neither.
    t0 = pe_tile_cycles(hw, 6, 32, 128, has_psum_read=False, fmt_a="hbq-e", fmt_b="hbq-e")
    assert t0.psum_bank_conflict == 0
    hw2 = hw_params(override(arch, {"buffers.psum.ports": 2}))
    t2 = pe_tile_cycles(hw2, 6, 32, 128, has_psum_read=True, fmt_a="hbq-e", fmt_b="hbq-e")
    assert t2.psum_bank_conflict == 0
    # The shipped 8 banks interleave reads and write-backs without a conflict.
    t8 = pe_tile_cycles(hw_params(load_arch("hbq_e_28nm")), 512, 256, 384, has_psum_read=True,
                        fmt_a="hbq-e", fmt_b="hbq-e")  # fmt: skip
    assert t8.psum_bank_conflict == 0


# ------------------------------------------------------------------ program engine


def _prog(queue, occ, lat, dep):
    n = len(queue)
    return Program(
        queue=np.asarray(queue, np.int8),
        occupancy_cycles=np.asarray(occ, np.int64),
        latency_cycles=np.asarray(lat, np.int64),
        dep=np.asarray(dep, np.int64),
        segment=np.zeros(n, np.int32),
        kind=np.zeros(n, np.int8),
        index=np.arange(n, dtype=np.int64),
        tile_id=np.full(n, -1, np.int64),
        tiles=(),
    )


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_program_semantics_by_hand(engine):
    # read A (10 busy, 5 latency), read B (4, 5), compute on A|B, on-chip record after the
    # compute, vector op after it, write after the vector op.
    p = _prog(
        [QUEUE_DMA, QUEUE_DMA, QUEUE_PE, QUEUE_NONE, QUEUE_VECTOR, QUEUE_DMA],
        [10, 4, 20, 0, 6, 3],
        [5, 5, 0, 0, 2, 0],
        [-1, -1, 1, 2, 3, 4],
    )
    start, done = run_program(p, engine=engine)
    assert start.tolist() == [0, 10, 19, 39, 39, 47]
    assert done.tolist() == [15, 19, 39, 39, 47, 50]
    # Continuing after earlier work: the DMA queue is busy until 100, the PE until 7.
    free = np.array([100, 7, 0], np.int64)
    start, done = run_program(p, engine=engine, free=free)
    assert start.tolist() == [100, 110, 119, 139, 139, 147]
    assert free.tolist() == [150, 139, 145]


def test_fast_engine_equals_simpy_on_random_programs():
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 60))
        queue = rng.choice([QUEUE_NONE, QUEUE_DMA, QUEUE_PE, QUEUE_VECTOR], size=n)
        occ = rng.integers(0, 30, size=n) * (queue != QUEUE_NONE)
        lat = rng.integers(0, 12, size=n) * (queue != QUEUE_NONE)
        dep = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
        p = _prog(queue, occ, lat, dep)
        f1 = rng.integers(0, 50, size=3).astype(np.int64)
        f2 = f1.copy()
        a = run_program(p, engine="fast", free=f1)
        b = run_program(p, engine="simpy", free=f2)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), trial
        assert np.array_equal(f1, f2), trial


def test_run_program_rejects_bad_arguments():
    p = _prog([QUEUE_PE], [1], [0], [-1])
    with pytest.raises(ValueError, match="engine='gpu'"):
        run_program(p, engine="gpu")
    with pytest.raises(ValueError, match="free must be a shape"):
        run_program(p, free=np.zeros(2, np.int64))
