"""Launcher: ``rtl/deltallm/dl_normalizer.v`` (reciprocal and final scaling) under cocotb."""

from __future__ import annotations

import pytest
import rtlkit

CASES = [
    ("l4m4", {"L": 4, "M": 4, "LW": 32, "OW": 40}),
    ("l16m16", {"L": 16, "M": 16, "LW": 32, "OW": 40}),
]
VERILATOR_SMOKE: frozenset[str] = frozenset()  # inside the top's Verilator smoke build


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "params"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_dl_normalizer(sim: str, params: dict, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_normalizer",
        sources=rtlkit.rtl_sources("deltallm", "dl_normalizer"),
        test_module="tb_dl_normalizer",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 5, "attention_problems": 6, "t_len": 16, "extreme_cases": 40},
    )
    assert results["mismatches"] == 0
    assert results["elements"] >= 2000
    assert min(results["kinds"].values()) >= 10
    assert results["clamped"] >= 100  # both int16 clamps
    assert results["recip_cycles"] == [41]  # one quotient bit of 2^40 / l per cycle
    rtlkit.check_cycles(
        "dl_normalizer",
        params,
        results["latency_cycles"],
        results["ii_cycles"],
        sim,
        area="deltallm",
    )
