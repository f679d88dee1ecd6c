"""cocotb testbench of ``rtl/deltallm/dl_normalizer.v`` against the reference's final scaling.

Cases (each: one ``i_start`` for L lanes, then every lane's o streamed M elements per cycle):

* ``attention``: the final ``ℓ`` and ``o`` of query blocks of seeded attention problems
  (``deltallm_stim.vssos_steps`` of ``attention_blocks``); the RTL output must equal the
  reference ``attention(...).output`` itself, padding lanes (never started) included;
* ``extremes``: ℓ at 0 (lane never started), 1, 2^15, 2^LW − 1 and random, o at ±(2^(OW−1) − 1),
  0, ±1 and random, so that every clamp and the floor shift of negative products are hit;
  expected values from ``deltallm_stim.normalise`` (the same formula, checked equal to the
  reference on the attention cases).

The divider's busy time is measured (reciprocal latency), and the scaling latency.
"""

from __future__ import annotations

import math

import cocotb
import deltallm_stim as stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge

OUTPUTS = ("o_busy", "o_recip", "o_valid", "o_y")
INPUTS = ("i_start", "i_den", "i_started", "i_valid", "i_lane", "i_o")


def _cases(rng: np.random.Generator, p: dict[str, int], cfg: dict) -> list[dict]:
    lanes, ow, lw = p["L"], p["OW"], p["LW"]
    d = 2 * p["M"]
    g = 2 if lanes % 2 == 0 else 1
    out = []
    for i in range(cfg["attention_problems"]):
        for b in stim.attention_blocks(
            rng,
            d=d,
            t_n=cfg["t_len"],
            g=g,
            p_q=lanes // g,
            theta=int(rng.integers(0, 6)),
            window=int(rng.choice([1, 8])),
            tau=[2.0, 8.0, math.inf][i % 3],
            q_scale=float(rng.choice([0.01, 0.1, 1.0])),
        ):
            n = len(b.scores)
            st = stim.vssos_steps(b.scores, b.valid, b.v[:n], b.mant, b.sh, b.tau_e, b.denom_mode)
            out.append(
                {"den": st.den[-1], "started": st.started, "o": st.o, "want": b.output,
                 "kind": "attention"}
            )  # fmt: skip
    omax = (1 << (ow - 1)) - 1
    for _ in range(cfg["extreme_cases"]):
        den = rng.choice(np.array([0, 1, 2, 1 << 15, (1 << lw) - 1, 12345, 99999]), lanes)
        den = np.where(rng.random(lanes) < 0.5, rng.integers(1 << 15, 1 << 30, lanes), den)
        started = (den > 0) | (rng.random(lanes) < 0.1)
        # o relative to l (|o / l| up to 300: past the int16 clamp both ways), at the OW limit,
        # and small; bounded so that o * r stays inside the reference's int64 (|o·r| < 2^62).
        ratio = rng.uniform(-300, 300, (lanes, d))
        o = np.round(ratio * np.maximum(den, 1)[:, None]).astype(np.int64)
        o = np.where(rng.random((lanes, d)) < 0.2, rng.integers(-2, 3, (lanes, d)), o)
        recip = np.where(started, (1 << 40) // np.maximum(den, 1), 1)
        lim = np.minimum(omax, (1 << 62) // np.maximum(recip, 1))[:, None]
        o = np.where(rng.random((lanes, d)) < 0.1, np.where(o < 0, -lim, lim), o)
        o = np.clip(o, -lim, lim)
        out.append(
            {"den": den, "started": started, "o": o,
             "want": stim.normalise(o, den, started), "kind": "extremes"}
        )  # fmt: skip
    return out


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    await rtlkit.reset(dut, zero=INPUTS)
    for _ in range(3):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, "after reset")
    for name in OUTPUTS:
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def lanes_match_reference(dut):
    """Reciprocal + scaling of every case: every output element equal to the reference."""
    await rtlkit.reset(dut, zero=INPUTS)
    p = {k: int(getattr(dut, k).value) for k in ("L", "M", "LW", "OW")}
    cfg = rtlkit.tb_config()
    for key, value in cfg["params"].items():
        assert p[key] == int(value)
    rng = np.random.default_rng(cfg["seed"])
    cases = _cases(rng, p, cfg)
    lanes, m, ow = p["L"], p["M"], p["OW"]
    bad = elements = 0
    busy_cycles, scale_lat = set(), set()
    for ci, case in enumerate(cases):
        d = case["o"].shape[1]
        dut.i_den.value = rtlkit.pack_lanes(case["den"], p["LW"])
        dut.i_started.value = rtlkit.pack_lanes(case["started"], 1)
        dut.i_start.value = 1
        await FallingEdge(dut.i_clk)
        dut.i_start.value = 0
        n = 0
        while int(dut.o_busy.value):
            await FallingEdge(dut.i_clk)
            n += 1
        busy_cycles.add(n)
        beats = [(lane, c) for lane in range(lanes) for c in range(0, d, m)]
        got = []
        for bi in range(len(beats) + 2):
            if bi < len(beats):
                lane, c = beats[bi]
                dut.i_valid.value = 1
                dut.i_lane.value = lane
                dut.i_o.value = rtlkit.pack_lanes(case["o"][lane, c : c + m], ow)
            else:
                dut.i_valid.value = 0
            await FallingEdge(dut.i_clk)
            rtlkit.check_resolved(dut, OUTPUTS, f"case {ci}")
            if int(dut.o_valid.value):
                scale_lat.add(bi + 1 - len(got))
                got.append(rtlkit.unpack_lanes(int(dut.o_y.value), 16, m, signed=True))
        assert len(got) == len(beats)
        y = np.concatenate(got).reshape(lanes, d)
        elements += y.size
        if not np.array_equal(y, case["want"]):
            bad += 1
            if bad <= 5:
                idx = np.argwhere(y != case["want"])[:4]
                rtl, ref = y[tuple(idx.T)], case["want"][tuple(idx.T)]
                dut._log.error(f"case {ci}: at {idx.tolist()} RTL {rtl} reference {ref}")
    kinds = {k: sum(c["kind"] == k for c in cases) for k in ("attention", "extremes")}
    clamped = sum(int(np.count_nonzero(np.abs(c["want"].astype(int) + 0.5) > 32767)) for c in cases)
    rtlkit.write_results(
        {
            "cases": len(cases),
            "elements": elements,
            "mismatches": bad,
            "kinds": kinds,
            "clamped": clamped,
            "recip_cycles": sorted(busy_cycles),
            "latency_cycles": sorted(scale_lat)[-1],
            "ii_cycles": 1,
        }
    )
    assert bad == 0, f"{bad} of {len(cases)} cases differ"
    assert len(busy_cycles) == 1 and len(scale_lat) == 1
