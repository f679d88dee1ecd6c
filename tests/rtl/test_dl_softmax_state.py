"""Launcher: ``rtl/deltallm/dl_softmax_state.v`` (VSSOS online-softmax state) under cocotb.

Pipelined (PIPE = 1, latency 3) and combinational (PIPE = 0, the attention top's form) builds.
"""

from __future__ import annotations

import pytest
import rtlkit

BASE = {"SW": 24, "CW": 24, "SHW": 6, "EW": 12, "TW": 13, "LW": 32}
CASES = [
    ("l4", {"PIPE": 1, "L": 4, **BASE}),
    ("l16", {"PIPE": 1, "L": 16, **BASE}),
    ("l16_comb", {"PIPE": 0, "L": 16, **BASE}),
]
VERILATOR_SMOKE: frozenset[str] = frozenset()  # inside the top's Verilator smoke build


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_dl_softmax_state(sim: str, params: dict, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_softmax_state",
        sources=rtlkit.rtl_sources("deltallm", "dl_softmax_state", "dl_exp2"),
        test_module="tb_dl_softmax_state",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 7, "attention_problems": 30, "t_len": 24, "extreme_vectors": 120},
    )
    assert results["mismatches"] == 0
    assert results["columns"] >= 2000
    kept = results["columns"] - results["skipped_columns"]
    assert results["skipped_columns"] >= 50 and kept >= 100
    assert min(results["kinds"].values()) >= 60
    rtlkit.check_cycles(
        "dl_softmax_state",
        params,
        results["latency_cycles"],
        results["ii_cycles"],
        sim,
        area="deltallm",
    )
