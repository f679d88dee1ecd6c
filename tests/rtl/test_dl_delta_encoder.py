"""Launcher: ``rtl/deltallm/dl_delta_encoder.v`` (Delta-Key encoder) under cocotb.

Parameter sets: the small configuration of the committed vectors (D = 16, with 10-bit memory
and deltas so that more naive-form drift fits) and the KV260 head dimension of BitNet-2B-4T
(D = 128, the memory form's minimal widths). Each streams thousands of key rows through the encoder
and the directed bitmasks of the packing network (every popcount 0..D, both forms); every row's
``o_packed`` is compared with ``pack_delta_rows`` like the other outputs.
"""

from __future__ import annotations

import pytest
import rtlkit

CASES = [
    ("d16", {"D": 16, "DW": 10, "MW": 10, "TW": 9}, 200, 24),
    ("d128", {"D": 128, "DW": 9, "MW": 8, "TW": 9}, 35, 40),
]
VERILATOR_SMOKE = frozenset({"d16"})


@pytest.mark.rtl
@pytest.mark.parametrize(
    ("sim", "params", "n_seq", "t_len"), rtlkit.sim_cases(CASES, VERILATOR_SMOKE)
)
def test_dl_delta_encoder(sim: str, params: dict, n_seq: int, t_len: int, tmp_path) -> None:
    results = rtlkit.run_cocotb(
        toplevel="dl_delta_encoder",
        sources=rtlkit.rtl_sources("deltallm", "dl_delta_encoder", "dl_pack"),
        test_module="tb_dl_delta_encoder",
        params=params,
        build_root=tmp_path,
        sim=sim,
        config={"seed": 12, "n_seq": n_seq, "t_len": t_len},
    )
    assert results["mismatches"] == 0 and results["packed_mismatches"] == 0
    assert results["rows"] == n_seq * t_len >= 1400
    assert min(results["classes"].values()) >= 280
    assert results["naive_rows"] >= 80  # the naive form inside the widths' contract
    if params["D"] == 16:
        assert results["vector_rows"] == 120 and results["vector_mismatches"] == 0
        assert results["vector_packed_mismatches"] == 0
    d = params["D"]
    # both forms: the first row plus 10 fixed masks, log2(D) strides, D single elements and
    # 3 random masks per popcount 0..D
    assert results["directed_rows"] == 2 * (1 + 10 + d.bit_length() - 1 + d + 3 * (d + 1))
    assert results["directed_popcounts"] == d + 1
    assert results["directed_mismatches"] == 0 and results["directed_packed_mismatches"] == 0
    rtlkit.check_cycles(
        "dl_delta_encoder",
        params,
        results["latency_cycles"],
        results["ii_cycles"],
        sim,
        area="deltallm",
    )
