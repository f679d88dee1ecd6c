"""cocotb testbench of ``rtl/deltallm/dl_mac_lanes.v`` (with ``dl_prio_enc.v``) against the
hybrid scores and the VSSOS PV update of ``coaccel.models.deltallm``.

Query blocks of seeded attention problems (``deltallm_stim.attention_blocks``: every key class,
θ in {0, 1, 4, 12} with all-zero delta rows, W in {1, 3, 8}, skipping on and off) are run through
the array column by column, as the attention top schedules them:

* exact columns: D/M ``OP_EXACT`` cycles over the key row (a sink column also restarts the chain);
* the query loads element-major (element i of M lanes per cycle, D·ceil(L/M) cycles);
* delta columns: ``OP_DELTA`` cycles over the bitmask until the priority encoder has consumed it,
  which must take exactly ceil(nnz/M) cycles; the row is the stored form (``pack_delta_rows``:
  the kept deltas packed in index order), cycle c reading packed chunk c;
* after each column, every valid lane's score (exact or chain, by region) must equal the
  reference ``attention(...).scores``;
* kept columns (the reference's skip decision): D/M ``OP_PV`` cycles with p and α of the
  reference step; after the block, every lane's o (read port) must equal the reference
  accumulator (``deltallm_stim.vssos_steps``, whose normalised o is the reference's output).
"""

from __future__ import annotations

import math

import cocotb
import deltallm_stim as stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge, ReadOnly

from coaccel.models.deltallm import pack_delta_rows

OP_EXACT, OP_DELTA, OP_PV = 0, 1, 2
INPUTS = ("i_q_we", "i_q_elem", "i_q_group", "i_q_data", "i_valid", "i_op", "i_clear",
          "i_load_chain", "i_chunk", "i_row", "i_mask", "i_p", "i_alpha", "i_clear_o",
          "i_rd_lane")  # fmt: skip
OUTPUTS = ("o_mask_rest", "o_exact", "o_chain", "o_rd")


class _Array:
    def __init__(self, dut, p: dict[str, int]):
        self.dut, self.p = dut, p
        self.cycles = 0

    async def op(self, **ports: int) -> None:
        """Drive one operation for one rising edge (values hold until changed)."""
        d = self.dut
        for name, value in ports.items():
            getattr(d, name).value = value
        d.i_valid.value = 1
        await FallingEdge(d.i_clk)
        d.i_valid.value = 0
        self.cycles += 1
        rtlkit.check_resolved(d, OUTPUTS, f"cycle {self.cycles}")


async def _block(arr: _Array, b: stim.BlockCase) -> dict:
    dut, p = arr.dut, arr.p
    d_n, lanes, m_n, rw, sw, ow = p["D"], p["L"], p["M"], p["RW"], p["SW"], p["OW"]
    nc = d_n // m_n
    # query load, element-major (element i of M lanes per cycle), and o cleared
    dut.i_clear_o.value = 1
    for grp in range(-(-lanes // m_n)):
        for e in range(d_n):
            dut.i_q_we.value = 1
            dut.i_q_elem.value = e
            dut.i_q_group.value = grp
            dut.i_q_data.value = rtlkit.pack_lanes(b.q[grp * m_n : (grp + 1) * m_n, e], 8)
            await FallingEdge(dut.i_clk)
            dut.i_clear_o.value = 0
    dut.i_q_we.value = 0
    n = len(b.scores)
    st = stim.vssos_steps(b.scores, b.valid, b.v[:n], b.mant, b.sh, b.tau_e, b.denom_mode)
    bad_scores = delta_cycles_bad = 0
    for j in range(n):
        ex_any = bool(b.exact[j].any())
        de_any = bool((b.valid[j] & ~b.exact[j]).any())
        sink = j == 0
        if ex_any:
            row = rtlkit.pack_lanes(b.k[j].astype(np.int64), rw)
            for c in range(nc):
                await arr.op(i_op=OP_EXACT, i_chunk=c, i_row=row, i_clear=int(c == 0),
                             i_load_chain=int(sink))  # fmt: skip
        if de_any:
            rem = rtlkit.pack_lanes(b.mask[j], 1)
            packed, _ = pack_delta_rows(b.deltas[j], b.mask[j])
            row = rtlkit.pack_lanes(packed, rw)
            steps = 0
            while rem:
                dut.i_mask.value = rem
                dut.i_row.value = row
                await ReadOnly()
                nxt = int(dut.o_mask_rest.value)
                await FallingEdge(dut.i_clk)
                await arr.op(i_op=OP_DELTA, i_chunk=steps, i_clear=0, i_load_chain=0)
                rem, steps = nxt, steps + 1
            delta_cycles_bad += steps != -(-int(b.mask[j].sum()) // m_n)
        e_got = rtlkit.unpack_lanes(int(dut.o_exact.value), sw, lanes, signed=True)
        a_got = rtlkit.unpack_lanes(int(dut.o_chain.value), sw, lanes, signed=True)
        got = np.where(b.exact[j], e_got, a_got)
        if not np.array_equal(np.where(b.valid[j], got, 0), b.scores[j]):
            bad_scores += 1
            if bad_scores <= 4:
                dut._log.error(f"i0={b.i0} column {j}: RTL {got} reference {b.scores[j]}")
        if b.valid[j].any() and not b.skipped[j]:
            row = rtlkit.pack_lanes(b.v[j].astype(np.int64), rw)
            for c in range(nc):
                await arr.op(i_op=OP_PV, i_chunk=c, i_row=row,
                             i_p=rtlkit.pack_lanes(st.p[j], 16),
                             i_alpha=rtlkit.pack_lanes(st.alpha[j], 16))  # fmt: skip
    o_got = np.zeros((lanes, d_n), dtype=np.int64)
    for lane in range(lanes):
        for c in range(nc):
            dut.i_rd_lane.value = lane
            dut.i_chunk.value = c
            await ReadOnly()
            o_got[lane, c * m_n : (c + 1) * m_n] = rtlkit.unpack_lanes(
                int(dut.o_rd.value), ow, m_n, signed=True
            )
            await FallingEdge(dut.i_clk)
    o_bad = not np.array_equal(o_got, st.o)
    if o_bad:
        dut._log.error(f"i0={b.i0}: o differs at {np.argwhere(o_got != st.o)[:4].tolist()}")
    return {"columns": n, "bad_scores": bad_scores, "bad_o": int(o_bad),
            "bad_delta_cycles": int(delta_cycles_bad),
            "delta_pairs": int(sum(b.mask[j].sum() for j in range(1, n))),
            "zero_delta_rows": int(sum(1 for j in range(1, n) if not b.mask[j].any())),
            "pv_columns": int(sum(1 for j in range(n) if not b.skipped[j]))}  # fmt: skip


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset, every output is a resolved 0 (o read port included)."""
    await rtlkit.reset(dut, zero=INPUTS)
    for _ in range(2):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, "after reset")
    for name in ("o_exact", "o_chain", "o_rd"):
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def blocks_match_reference(dut):
    """Scores after every column and o after every block equal the reference."""
    await rtlkit.reset(dut, zero=INPUTS)
    p = {k: int(getattr(dut, k).value) for k in ("D", "L", "M", "RW", "SW", "OW")}
    cfg = rtlkit.tb_config()
    for key, value in cfg["params"].items():
        assert p[key] == int(value)
    rng = np.random.default_rng(cfg["seed"])
    arr = _Array(dut, p)
    g = 2 if p["L"] % 2 == 0 else 1
    totals: dict[str, int] = {}
    for i in range(cfg["problems"]):
        blocks = stim.attention_blocks(
            rng,
            d=p["D"],
            t_n=cfg["t_len"],
            g=g,
            p_q=p["L"] // g,
            theta=[0, 1, 4, 12][i % 4],
            window=[1, 3, 8][i % 3],
            tau=[4.0, math.inf][i % 2],
            key_kind=stim.KEY_CLASSES[i % len(stim.KEY_CLASSES)],
            q_scale=float(rng.choice([0.05, 0.5])),
        )
        for b in blocks:
            r = await _block(arr, b)
            for k, v in r.items():
                totals[k] = totals.get(k, 0) + v
    rtlkit.write_results(totals)
    assert totals["bad_scores"] == 0 and totals["bad_o"] == 0
    assert totals["bad_delta_cycles"] == 0
