"""The query-block cycle model of the DeltaLLM FPGA simulator and its resource estimate.

The oracle is a scalar transcription of the cycle rule written in docs/deltallm_fpga.md (per
column: exact keys d/M, delta keys ceil(nnz/M), kept columns dv/M, at least one softmax cycle;
per block: fill + q load + output write), evaluated column by column in Python integers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel.sim.deltallm_fpga import (
    blocks_cycles,
    estimate_resources,
    load_arch,
    mux_luts,
    query_block_cycles,
)
from coaccel.spine.config import ConfigError, override


def _oracle(kinds, nnzs, *, d, dv, m, lanes, fill, q_load, out_write, softmax=1):
    total = fill + math.ceil(lanes * d / q_load) + math.ceil(lanes * dv / out_write)
    for kind, nnz in zip(kinds, nnzs, strict=True):
        qk = 0
        if kind & 1:
            qk += math.ceil(d / m)
        if kind & 2:
            qk += math.ceil(nnz / m)
        pv = 0 if kind & 4 else math.ceil(dv / m)
        total += max(softmax, qk + pv)
    return total


@pytest.fixture(scope="module")
def kv260():
    return load_arch("kv260")


def test_fill_is_the_stage_sum(kv260):
    # bitmask 2 + mux 1 + multiply 3 + adder tree 5 + select 1 + the softmax unit's 3 stages
    assert kv260.pipeline.fill_cycles == 2 + 1 + 3 + 5 + 1 + 3


def test_softmax_stages_equal_the_rtl_measurement(kv260):
    """The softmax unit's latency and II are the RTL's measured ones (rtl/deltallm/cycles.csv)."""
    import csv
    from pathlib import Path

    rows = list(csv.DictReader((Path(__file__).parents[2] / "rtl/deltallm/cycles.csv").open()))
    lanes = kv260.datapath.lanes
    want = [r for r in rows if r["block"] == "dl_softmax_state"
            and {"PIPE=1", f"L={lanes}"} <= set(r["params"].split(";"))]  # fmt: skip
    # one measurement per HDL simulator (Icarus, Verilator): every one must agree with the model
    assert {r["simulator"] for r in want} >= {"icarus"}
    assert len(want) == len({r["simulator"] for r in want})
    p = kv260.pipeline
    stages = p.max_exponent_cycles + p.exp2_cycles + p.skip_reduce_cycles + p.rescale_issue_cycles
    assert {int(r["latency_cycles"]) for r in want} == {stages}
    assert {int(r["ii_cycles"]) for r in want} == {p.softmax_cycles_per_column}


@pytest.mark.parametrize("d,dv", [(128, 128), (64, 64), (96, 80)])
def test_block_cycles_equal_the_scalar_rule(kv260, d, dv):
    rng = np.random.default_rng(d + dv)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        kinds = rng.choice(np.array([1, 2, 3, 5, 6, 7], dtype=np.uint8), size=n)
        nnz = rng.integers(0, d + 1, size=n)
        got = query_block_cycles(kinds, nnz, kv260, head_dim=d, value_dim=dv)
        want = _oracle(kinds.tolist(), nnz.tolist(), d=d, dv=dv, m=16, lanes=16, fill=15,
                       q_load=16, out_write=16)  # fmt: skip
        assert got == want


def test_hand_example(kv260):
    # d = 128, M = 16: an exact column 8 + PV 8 = 16; a delta column with 17 nonzeros 2 + 8 = 10;
    # a skipped delta column with 0 nonzeros max(1, 0) = 1; a mixed skipped column 8 + 1 = 9.
    # Block overhead 15 + 16·128/16 + 16·128/16 = 271.
    got = query_block_cycles([1, 2, 6, 7], [0, 17, 0, 5], kv260, head_dim=128)
    assert got == 271 + 16 + 10 + 1 + 9


def test_pipeline_constants_are_config_keys(kv260):
    arch = override(kv260, {"pipeline.multiply_cycles": 6, "pipeline.softmax_cycles_per_column": 4})
    got = query_block_cycles([6], [0], arch, head_dim=128)
    assert got == (15 + 3) + 128 + 128 + 4


def test_many_blocks_equal_one_block(kv260):
    rng = np.random.default_rng(5)
    t, nb, d = 97, 25, 64
    kind = rng.choice(np.array([0, 1, 2, 3, 5, 6, 7], dtype=np.uint8), size=(nb, t))
    kind[3] = 0
    nnz = rng.integers(0, d + 1, size=t)
    many = blocks_cycles(kind, nnz, kv260, head_dim=d)
    for b in range(nb):
        cols = np.flatnonzero(kind[b])
        one = query_block_cycles(kind[b, cols], nnz[cols], kv260, head_dim=d) if cols.size else 0
        assert many[b] == one


def test_bad_records_raise(kv260):
    with pytest.raises(ValueError, match="exact"):
        query_block_cycles([4], [0], kv260, head_dim=64)
    with pytest.raises(ValueError, match="1-D"):
        query_block_cycles([1, 2], [0], kv260, head_dim=64)


def test_mux_luts_closed_form():
    # a LUT6 is a 4:1 mux; F7/F8/F9 join 8 LUTs into 32:1; beyond that a tree of 4:1 LUTs
    assert [mux_luts(n) for n in (1, 2, 4, 5, 16, 32, 33, 64, 128, 129)] == [
        0, 1, 1, 2, 4, 8, 9 + 1, 16 + 1, 32 + 1, 33 + 2,
    ]  # fmt: skip


def test_kv260_resources_by_hand(kv260):
    r = estimate_resources(kv260)
    # 256 shared QK/PV multipliers (17 x 9: one tile) + 256 o * alpha (40 x 17: two tiles)
    # + 16 lanes x 6 softmax tiles + 16 normaliser products x 6 tiles (40 x 42)
    assert r.dsps == 256 + 256 * 2 + 16 * 6 + 16 * 6 == 960
    # logic: 256 x 175.36 per MAC, 3.433 x 128 x 16 priority encoder, 16 x 1010.38 softmax,
    # 16 x 152.875 + 16 x 240.6875 normaliser, 5060 control, 8000 system; LUTRAM: q 256 copies x
    # 8 bits x 2 (128 words), o 16 lanes x 640 bits / 2 (8 words)
    logic = (round(256 * 175.36) + round(3.433 * 128 * 16) + round(16 * 1010.38)
             + round(16 * 152.875 + 16 * 240.6875) + 5060 + 8000)  # fmt: skip
    assert r.luts == logic + 256 * 8 * 2 + 16 * 640 // 2
    # URAM: Δ mask 128 b x 1024 (2 x 1) + Δ values 144 b x 8192 (2 x 2) + V 128 b x 8192 (2 x 2),
    # all double-buffered: 2 x (2 + 4 + 4)
    assert r.urams == 20
    assert r.dsps <= 1248 and r.bram36 <= 144 and r.urams <= 64 and r.luts <= 117120


def test_q_in_registers_pays_a_mux_per_mac(kv260):
    ff = override(kv260, {"buffers.lane_q.memory": "ff", "limits.luts": 10**6})
    # the d:1 mux (33 LUTs per bit at d = 128) replaces the LUTRAM copies; q takes 16 x 1024 FFs
    assert estimate_resources(ff).luts == (
        estimate_resources(kv260).luts + 256 * 8 * 33 - 256 * 8 * 2
    )
    assert estimate_resources(ff).ffs == estimate_resources(kv260).ffs + 16 * 128 * 8


def test_design_that_does_not_fit_names_the_resource(kv260):
    with pytest.raises(ConfigError, match="LUT: the design needs"):
        override(kv260, {"datapath.lanes": 32})
    with pytest.raises(ConfigError, match="DSP48E2: the design needs 7008"):
        override(kv260, {"datapath.macs_per_lane": 128, "buffers.max_head_dim": 4})
    with pytest.raises(ConfigError, match="URAM288"):
        override(kv260, {"buffers.max_tokens": 4096})
