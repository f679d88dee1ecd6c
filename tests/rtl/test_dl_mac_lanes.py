"""Launcher: ``rtl/deltallm/dl_mac_lanes.v`` (broadcast MAC lanes + priority encoder)."""

from __future__ import annotations

import pytest
import rtlkit

CASES = [
    ("d16l4m4", {"D": 16, "L": 4, "M": 4, "RW": 9, "SW": 24, "OW": 40}, 15, 24),
    ("d64l8m16", {"D": 64, "L": 8, "M": 16, "RW": 9, "SW": 24, "OW": 40}, 5, 24),
]
VERILATOR_SMOKE: frozenset[str] = frozenset()  # inside the top's Verilator smoke build


@pytest.mark.rtl
@pytest.mark.parametrize(
    ("sim", "params", "problems", "t_len"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE)
)
def test_dl_mac_lanes(sim: str, params: dict, problems: int, t_len: int, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_mac_lanes",
        sources=rtlkit.rtl_sources("deltallm", "dl_mac_lanes", "dl_prio_enc"),
        test_module="tb_dl_mac_lanes",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 9, "problems": problems, "t_len": t_len},
    )
    assert results["bad_scores"] == 0 and results["bad_o"] == 0
    assert results["bad_delta_cycles"] == 0  # ceil(nnz / M) cycles per delta row
    assert results["columns"] >= 300
    assert results["delta_pairs"] >= 1000 and results["zero_delta_rows"] >= 10
    assert results["pv_columns"] >= 100
