"""Launcher: ``rtl/hbq/hbq_fp16_add.v`` (combinational binary16 adder) under cocotb.

The full vector set runs under Icarus; Verilator runs a reduced (smoke) set of the same classes.
"""

from __future__ import annotations

import pytest
import rtlkit

CASES = [
    pytest.param("icarus", 1.0, id="icarus"),
    pytest.param("verilator", 0.1, id="verilator-smoke"),
]


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "scale"), CASES)
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
    assert results["vectors"] >= (19000 if scale == 1.0 else 3000)
    rtlkit.check_cycles("hbq_fp16_add", {}, results["latency_cycles"], results["ii_cycles"], sim)
