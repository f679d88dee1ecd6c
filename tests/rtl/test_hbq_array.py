"""pytest launcher of the HBQ array testbench (``tb_hbq_array.py``), one build per parameter set.

Every case builds ``rtl/hbq/hbq_array.v`` (N_PE ``hbq_pe``, activation and partial-sum buffers,
the partial-sum unit of ``hbq_psum_unit.v`` or FP16 adders) in its own directory under
``tmp_path`` and checks tiled GEMMs against ``coaccel.models.hbq.hbq_gemm_codes`` bit for bit,
then the measured tile cycle counts against the closed-form schedule of ``rtl/hbq/README.md`` and
the committed ``rtl/hbq/cycles.csv``.
"""

from __future__ import annotations

import pytest
import rtlkit

ARRAY_SOURCES = (
    "hbq_array",
    "hbq_ram_1r1w",
    "hbq_pe",
    "hbq_mul",
    "hbq_adder_tree",
    "hbq_l1_convert",
    "hbq_psum_unit",
    "hbq_mxint8_quant",
    "hbq_mxint8_dequant",
    "hbq_fp16_add",
)
TIMING = {"m": 12, "kb": 3}
"""Tile shape (tokens, K blocks) of the cycle measurement."""


def expected_cycles(n_pe: int, psum_mode: int, m: int, kb: int) -> dict[str, int]:
    """Tile cycle counts of the documented schedule (rtl/hbq/README.md), weights always valid.

    Cycle 0 is the cycle in which ``i_start`` is sampled. LOAD takes N_PE cycles (1..N_PE),
    WAIT one, so the first token issues at N_PE + 2; a K block issues ``m`` tokens on
    consecutive cycles and the next K block's first issue follows ``m + 1 + max(N_PE, S_WB)``
    cycles after the previous one (weight load overlapped with the write-back drain; S_WB = 6
    for MXINT8 partial sums, 5 for FP16); a token's result appears S_WB + 1 cycles after its
    issue; o_busy falls one cycle after the last result has left the pipeline.

    Returns:
        ``first_out``, ``last_out`` (cycles of the first / last ``o_y_valid``) and ``tile_ii``
        (first cycle with ``o_busy`` low = the earliest next ``i_start``).
    """
    writeback_stage_cycles = 6 if psum_mode == 1 else 5
    result_stage_cycles = writeback_stage_cycles + 1
    first_issue = n_pe + 2
    period = m + 1 + max(n_pe, writeback_stage_cycles)
    last_pass_first = first_issue + (kb - 1) * period
    last_issue = last_pass_first + m - 1
    return {
        "first_out": last_pass_first + result_stage_cycles,
        "last_out": last_issue + result_stage_cycles,
        "tile_ii": last_issue + result_stage_cycles + 2,
    }


GEMMS_FULL = [
    {"m": 20, "n": 9, "kb": 3, "dist": "gauss"},
    {"m": 20, "n": 9, "kb": 3, "dist": "outlier"},
    {"m": 16, "n": 8, "kb": 4, "dist": "zero"},
    {"m": 16, "n": 8, "kb": 4, "dist": "codes"},
]
"""GEMM shapes per case: m tokens (two token tiles when m > TOK_DEPTH = 16), n channels (a
padded last channel tile when n is not a multiple of N_PE), kb K blocks of B = 128."""
GEMMS_LIGHT = [
    {"m": 18, "n": 9, "kb": 2, "dist": "wide"},
    {"m": 12, "n": 8, "kb": 3, "dist": "codes"},
]

# (case id, HDL parameters, GEMMs). Defaults: B 128, SIG-1 2-bit activations, Mix weights.
CASES = [
    ("hbq_e_mxint8", {"N_PE": 4, "UB": 32, "PSUM_MODE": 1}, GEMMS_FULL),
    ("hbq_a_fp16", {"N_PE": 4, "UB": 8, "PSUM_MODE": 0}, GEMMS_FULL),
    (
        "asic_pot1_compat_trunc",
        {
            "N_PE": 8,
            "UB": 32,
            "ACT_L2": 1,
            "ACT_L2_BITS": 1,
            "OUT_MODE": 1,
            "PSUM_MODE": 1,
            "PSUM_ROUNDING": 1,
        },
        GEMMS_LIGHT,
    ),
]
VERILATOR_SMOKE = frozenset({"hbq_e_mxint8"})
"""Cases also run under Verilator by default (CI); COACCEL_VERILATOR_FULL=1 adds the rest."""


@pytest.mark.rtl
@pytest.mark.parametrize(("sim", "overrides", "gemms"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE))
def test_hbq_array(sim: str, overrides: dict[str, int], gemms: list[dict], tmp_path) -> None:
    params = {"B": 128, "TOK_DEPTH": 16, "KB_DEPTH": 4, **overrides}
    results = rtlkit.run_cocotb(
        toplevel="hbq_array",
        sources=rtlkit.hbq_sources(*ARRAY_SOURCES),
        test_module="tb_hbq_array",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={
            "seed": 31337 + sum(ord(c) for c in str(sorted(params.items()))),
            "gemms": gemms,
            "w_gap_prob": 0.3,
            "timing": TIMING,
        },
    )
    assert results["results_checked"] == sum(g["m"] * g["n"] for g in gemms)
    want = expected_cycles(params["N_PE"], params["PSUM_MODE"], TIMING["m"], TIMING["kb"])
    got = {
        "first_out": results["first_out_cycles"],
        "last_out": results["last_out_cycles"],
        "tile_ii": results["tile_ii_cycles"],
    }
    assert got == want, f"measured tile cycles {got}, schedule predicts {want}"
    assert results["result_gap_cycles"] == 1
    table_params = {**params, "M": TIMING["m"], "KB": TIMING["kb"]}
    rtlkit.check_cycles("hbq_array", table_params, got["first_out"], 1, sim)
    rtlkit.check_cycles("hbq_array_tile", table_params, got["last_out"], got["tile_ii"], sim)
