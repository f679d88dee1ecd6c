"""Launcher: ``rtl/hbq/hbq_act_quant.v`` (online HBQ-E activation quantizer) under cocotb.

Parametrized over the HDL parameters: B = 128 with μB 32 (HBQ-E, the accelerator's quantizer)
gets the full vector set; μB 8, nearest-even element rounding and the ceil scale rounding run
lighter sets. Every case runs on Icarus; the HBQ-E case also on Verilator (CI smoke), the others
with ``COACCEL_VERILATOR_FULL=1`` (see ``rtlkit.sim_cases``).
"""

from __future__ import annotations

import pytest
import rtlkit

SOURCES = ("hbq_act_quant", "hbq_act_scale", "hbq_act_elem")
LATENCY_CYCLES = 2
"""Documented pipeline depth (hbq_act_quant.v header): amax + scale, then the elements."""
HBQ_E = {"B": 128, "UB": 32, "ROUNDING": 0, "SCALE_ROUNDING": 0}
CASES = [
    ("hbq_e", HBQ_E, 1650),
    ("ub8", {**HBQ_E, "UB": 8}, 330),
    ("rne", {**HBQ_E, "ROUNDING": 1}, 330),
    ("scale_ceil", {**HBQ_E, "SCALE_ROUNDING": 1}, 330),
]
VERILATOR_SMOKE = frozenset({"hbq_e"})


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params", "n_blocks"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_hbq_act_quant(sim: str, params: dict, n_blocks: int, tmp_path) -> None:
    seed = 5300 + params["UB"] + 2 * params["ROUNDING"] + 4 * params["SCALE_ROUNDING"]
    results = rtlkit.run_cocotb(
        toplevel="hbq_act_quant",
        sources=rtlkit.hbq_sources(*SOURCES),
        test_module="tb_hbq_act_quant",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": seed, "n_blocks": n_blocks},
    )
    assert results["blocks"] == n_blocks
    assert min(results["classes"].values()) >= n_blocks // 11
    assert results["replay_scale_blocks"] >= 400 and results["replay_elements"] >= 130
    assert results["latency_cycles"] == LATENCY_CYCLES and results["ii_cycles"] == 1
    rtlkit.check_cycles(
        "hbq_act_quant", params, results["latency_cycles"], results["ii_cycles"], sim
    )
