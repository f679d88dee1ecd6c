"""Launcher: ``rtl/deltallm/dl_exp2.v`` (256-entry exp2 LUT with shift) under cocotb."""

from __future__ import annotations

import pytest
import rtlkit

CASES = [("ew12", {"EW": 12}), ("ew13", {"EW": 13})]
VERILATOR_SMOKE = frozenset({"ew12"})


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_dl_exp2(sim: str, params: dict, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_exp2",
        sources=rtlkit.rtl_sources("deltallm", "dl_exp2"),
        test_module="tb_dl_exp2",
        params=params,
        build_root=tmp_path,
        sim=sim,
    )
    assert results["mismatches"] == 0
    assert results["vectors"] == 1 << params["EW"]
    rtlkit.check_cycles(
        "dl_exp2", params, results["latency_cycles"], results["ii_cycles"], sim, area="deltallm"
    )
