"""Launcher: ``rtl/deltallm/dl_attention_top.v`` (one KV head, one query block) under cocotb."""

from __future__ import annotations

import pytest
import rtlkit

SOURCES = ("dl_attention_top", "dl_mac_lanes", "dl_prio_enc", "dl_softmax_state", "dl_exp2",
           "dl_normalizer")  # fmt: skip
WIDTHS = {"TB": 12, "SW": 24, "CW": 24, "SHW": 6, "EW": 12, "TW": 13, "LW": 32, "OW": 40}
CASES = [
    ("d16l4m4", {"D": 16, "L": 4, "M": 4, "PQ": 2, **WIDTHS}, 8, 14, 50),
    ("d32l8m8", {"D": 32, "L": 8, "M": 8, "PQ": 4, **WIDTHS}, 3, 12, 9),
]
VERILATOR_SMOKE = frozenset({"d16l4m4"})


@pytest.mark.rtl
@pytest.mark.parametrize(
    ("sim", "params", "problems", "t_len", "min_blocks"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE)
)
def test_dl_attention_top(
    sim: str, params: dict, problems: int, t_len: int, min_blocks: int, tmp_path
) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_attention_top",
        sources=rtlkit.rtl_sources("deltallm", *SOURCES),
        test_module="tb_dl_attention_top",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 21, "problems": problems, "t_len": t_len, "stall_every": 3,
                "stall_prob": 0.3},
    )  # fmt: skip
    assert results["mismatches"] == 0
    assert len(results["fill_cycles"]) == 1
    # the FPGA simulator's query_block_cycles on the same event records (kind, nnz), with the
    # top's pipeline (no stages, M-wide q load and output write), differs from the measured
    # cycles by the same constant in every block: the committed FILL
    assert results["simulator_fill_cycles"] == results["fill_cycles"]
    assert results["blocks"] >= min_blocks and results["stalled_blocks"] >= min_blocks // 3
    assert results["skipped_columns"] >= 1
    # latency_cycles = the cycle model's per-block constant FILL (start, reciprocal, drain);
    # ii_cycles = the fewest cycles a column can take
    rtlkit.check_cycles(
        "dl_attention_top",
        params,
        results["latency_cycles"],
        results["ii_cycles"],
        sim,
        area="deltallm",
    )
