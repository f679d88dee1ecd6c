"""Launcher: ``rtl/hbq/hbq_psum_unit.v`` (MXINT8 partial-sum read-modify-write) under cocotb.

Parametrized over the HDL parameters ``SA_N`` (channels per MXINT8 block) and ``ROUNDING``
(0 = RNE, 1 = truncation); the accelerator's SA_N = 16 with RNE gets the full vector set. Every
case runs on Icarus; the SA_N = 16 RNE case also on Verilator (CI smoke), the others with
``COACCEL_VERILATOR_FULL=1`` (see ``rtlkit.sim_cases``).
"""

from __future__ import annotations

import pytest
import rtlkit

SOURCES = ("hbq_psum_unit", "hbq_mxint8_dequant", "hbq_mxint8_quant", "hbq_fp16_add")
LATENCY_CYCLES = 2
"""Documented pipeline depth (hbq_psum_unit.v header): dequantize + add, then requantize."""
CASES = [
    ("SA_N16-rne", {"SA_N": 16, "ROUNDING": 0}, 2200),
    ("SA_N16-trunc", {"SA_N": 16, "ROUNDING": 1}, 660),
    ("SA_N4-rne", {"SA_N": 4, "ROUNDING": 0}, 660),
]
VERILATOR_SMOKE = frozenset({"SA_N16-rne"})


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params", "n_steps"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_hbq_psum_unit(sim: str, params: dict, n_steps: int, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="hbq_psum_unit",
        sources=rtlkit.hbq_sources(*SOURCES),
        test_module="tb_hbq_psum_unit",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={
            "seed": 7100 + params["SA_N"] + params["ROUNDING"],
            "n_steps": n_steps,
            "n_words": 6,
            "n_k": 24,
        },
    )
    assert results["steps"] == n_steps
    assert results["running_words"] * results["running_k"] == 6 * 24
    assert results["latency_cycles"] == LATENCY_CYCLES and results["ii_cycles"] == 1
    # The binary16 sums are registered one cycle before the requantized block.
    assert results["sum_latency_cycles"] == LATENCY_CYCLES - 1
    rtlkit.check_cycles(
        "hbq_psum_unit", params, results["latency_cycles"], results["ii_cycles"], sim
    )
