"""Launcher: ``rtl/hbq/hbq_fp16_add.v`` (combinational binary16 adder) under cocotb.

One parameter set (the adder has no HDL parameters); the same vector set runs on Icarus and on
Verilator (CI smoke, see ``rtlkit.sim_cases``).
"""

from __future__ import annotations

import pytest
import rtlkit

CASES = [("all_classes", 3.0)]
VERILATOR_SMOKE = frozenset({"all_classes"})


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "scale"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_hbq_fp16_add(sim: str, scale: float, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="hbq_fp16_add",
        sources=rtlkit.hbq_sources("hbq_fp16_add"),
        test_module="tb_hbq_fp16_add",
        params={},
        build_root=tmp_path,
        sim=sim,
        config={"seed": 20260, "scale": scale},
    )
    assert results["mismatches"] == 0
    assert results["vectors"] >= 55000
    assert min(results["classes"].values()) >= 1225  # every special pair; 6000 per other class
    # Combinational: the sum is right without a clock edge (latency 0, a new pair every cycle).
    assert results["latency_cycles"] == 0 and results["ii_cycles"] == 1
    rtlkit.check_cycles("hbq_fp16_add", {}, results["latency_cycles"], results["ii_cycles"], sim)
