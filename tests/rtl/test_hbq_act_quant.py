"""Launcher: ``rtl/hbq/hbq_act_quant.v`` (online HBQ-E activation quantizer) under cocotb.

Parametrized over the HDL parameters: B = 128 with μB 32 (HBQ-E, the accelerator's quantizer)
gets the full vector set; μB 8, nearest-even element rounding and the ceil scale rounding run
lighter sets; Verilator runs a smoke subset of the HBQ-E case.
"""

from __future__ import annotations

import pytest
import rtlkit

SOURCES = ("hbq_act_quant", "hbq_act_scale", "hbq_act_elem")
HBQ_E = {"B": 128, "UB": 32, "ROUNDING": 0, "SCALE_ROUNDING": 0}
CASES = [
    pytest.param("icarus", HBQ_E, 1650, id="icarus-hbq_e"),
    pytest.param("icarus", {**HBQ_E, "UB": 8}, 330, id="icarus-ub8"),
    pytest.param("icarus", {**HBQ_E, "ROUNDING": 1}, 330, id="icarus-rne"),
    pytest.param("icarus", {**HBQ_E, "SCALE_ROUNDING": 1}, 330, id="icarus-scale_ceil"),
    pytest.param("verilator", HBQ_E, 220, id="verilator-hbq_e"),
]


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params", "n_blocks"), CASES)
def test_hbq_act_quant(sim: str, params: dict, n_blocks: int, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="hbq_act_quant",
        sources=rtlkit.hbq_sources(*SOURCES),
        test_module="tb_hbq_act_quant",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={
            "seed": 5300 + params["UB"] + 2 * params["ROUNDING"] + 4 * params["SCALE_ROUNDING"],
            "n_blocks": n_blocks,
        },
    )
    assert results["blocks"] == n_blocks
    assert min(results["classes"].values()) >= n_blocks // 11
    rtlkit.check_cycles(
        "hbq_act_quant", params, results["latency_cycles"], results["ii_cycles"], sim
    )
