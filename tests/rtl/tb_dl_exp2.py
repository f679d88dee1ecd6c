"""cocotb testbench of ``rtl/deltallm/dl_exp2.v`` against ``coaccel.models.deltallm.exp2_neg_q15``.

The unit is combinational: every exponent ``E`` in ``[0, 2^EW)`` (all 4096 codes for EW = 12,
and with EW = 13 the codes past the reference's saturation, where ``n >= 16`` gives 0) is applied,
the simulator advances 1 ns and ``p`` is compared with the reference bit for bit. That covers all
256 LUT entries at every shift.
"""

from __future__ import annotations

import cocotb
import numpy as np
import rtlkit
from cocotb.triggers import Timer

from coaccel.models.deltallm import EXP2_LUT_Q15, exp2_neg_q15


@cocotb.test()
async def every_exponent(dut):
    """All 2^EW exponents: o_p equals the reference, never X/Z."""
    ew = int(dut.EW.value)
    assert ew == int(rtlkit.tb_config()["params"]["EW"])
    e = np.arange(1 << ew, dtype=np.int64)
    want = exp2_neg_q15(e)
    bad = []
    for x in e.tolist():
        dut.i_e.value = x
        await Timer(1, "ns")
        rtlkit.check_resolved(dut, ["o_p"], f"E={x}")
        if int(dut.o_p.value) != int(want[x]):
            bad.append((x, int(dut.o_p.value), int(want[x])))
    for x, got, exp in bad[:10]:
        dut._log.error(f"E={x}: RTL p={got}, reference {exp}")
    # the three check values of the format definition, independent of the reference code
    assert [int(EXP2_LUT_Q15[i]) for i in (0, 128, 255)] == [32768, 23170, 16428]
    rtlkit.write_results(
        {"vectors": int(e.size), "mismatches": len(bad), "latency_cycles": 0, "ii_cycles": 1}
    )
    assert not bad, f"{len(bad)} of {e.size} exponents differ"
