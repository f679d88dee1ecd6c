"""The DeltaLLM FPGA simulator's resource estimate against the Yosys rows of the KV260 table.

* DSP48E2: the estimate's per-unit counts follow from the RTL's product widths
  (:func:`dsp48e2_tiles`); they must equal Yosys's count of every synthesized unit and of the
  attention top exactly, at the KV260 configuration and at the smaller ``dl_scale`` points.
* LUTs and flip-flops: the shipped coefficients are the KV260 rows divided by the units' sizes
  (checked here, so a re-synthesized table with other counts flags the coefficients); the
  ``dl_scale`` rows, which no coefficient comes from, check how the estimate scales with L, M
  and d, within the band docs/synthesis.md §6.2 states.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coaccel.sim.deltallm_fpga import (
    dsp48e2_tiles,
    dsp_breakdown,
    load_arch,
    logic_breakdown,
)
from coaccel.sim.deltallm_fpga.resources import buffer_geometries, memory_cost
from coaccel.spine.config import override
from coaccel.targets.deltallm_fpga import synthesis as synth

ROOT = Path(__file__).resolve().parents[2]
ROWS = {
    (r["top"], r["params"]): r for r in synth.read_kv260_csv(ROOT / "rtl/synth/deltallm_kv260.csv")
}
LOGIC_BAND = 0.10
"""The estimate's stated accuracy on synthesized points it was not fitted to (LUTs, FFs)."""


def _params(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split(";"))}


@pytest.fixture(scope="module")
def kv260():
    return load_arch("kv260")


def _design(kv260, *, D: int = 128, L: int = 16, M: int = 16):  # noqa: N803
    return override(kv260, {"datapath.lanes": L, "datapath.macs_per_lane": M,
                            "buffers.max_head_dim": D})  # fmt: skip


def test_dsp48e2_tiles_closed_form():
    # 27 x 18 signed per slice; wider operands split into a signed top and 26 / 17-bit parts
    cases = [(17, 9, 1), (27, 18, 1), (18, 27, 1), (28, 18, 2), (27, 19, 2), (40, 17, 2),
             (25, 24, 2), (33, 17, 2), (40, 42, 6), (53, 18, 2), (54, 18, 3),
             (44, 35, 4)]  # fmt: skip
    assert [dsp48e2_tiles(a, b) for a, b, _ in cases] == [t for _, _, t in cases]


def test_dsp_estimate_equals_every_synthesized_unit(kv260):
    seen = 0
    for (top, params), row in ROWS.items():
        p = _params(params)
        want = int(row["fpga_dsps"])
        if top == "dl_mac_lanes":
            b = dsp_breakdown(_design(kv260, D=p["D"], L=p["L"], M=p["M"]))
            assert b["mac"] + b["rescale"] == want, params
        elif top == "dl_softmax_state":
            assert dsp_breakdown(_design(kv260, L=p["L"]))["softmax"] == want, params
        elif top == "dl_normalizer":
            assert dsp_breakdown(_design(kv260, L=p["L"], M=p["M"]))["normalizer"] == want
        elif top == "dl_attention_top":
            b = dsp_breakdown(_design(kv260, D=p["D"], L=p["L"], M=p["M"]))
            assert sum(b.values()) == want
        else:
            continue
        seen += 1
    assert seen >= 8  # the KV260 units, the top and the dl_scale points


def test_shipped_coefficients_are_the_synthesized_rows(kv260):
    rm = kv260.resource_model
    mac = ROWS[("dl_mac_lanes", "D=128;L=16;M=16")]
    prio = ROWS[("dl_prio_enc", "D=128;M=16")]
    soft = ROWS[("dl_softmax_state", "PIPE=1;L=16")]
    top = ROWS[("dl_attention_top", "D=128;L=16;M=16;PQ=4")]
    n16, n4 = ROWS[("dl_normalizer", "L=16;M=16")], ROWS[("dl_normalizer", "L=4;M=8")]

    def near(coef, value):
        assert coef == pytest.approx(value, abs=0.01)

    near(rm.prio_luts_per_bit, int(prio["fpga_luts"]) / (128 * 16))
    near(rm.luts_per_mac, (int(mac["fpga_luts"]) - int(prio["fpga_luts"])) / 256)
    near(rm.luts_per_lane_softmax, int(soft["fpga_luts"]) / 16)
    near(rm.ffs_per_lane_softmax, int(soft["fpga_ffs"]) / 16)
    # the normaliser: a per-lane divider and a per-product term, from its two rows
    terms = (("fpga_luts", rm.luts_per_lane_normalizer, rm.luts_per_elem_normalizer),
             ("fpga_ffs", rm.ffs_per_lane_normalizer, rm.ffs_per_elem_normalizer))  # fmt: skip
    for col, lane, elem in terms:
        near(16 * lane + 16 * elem, int(n16[col]))
        near(4 * lane + 8 * elem, int(n4[col]))
    # the MAC array's flip-flops are its lanes' accumulators and o-word flags, exactly
    assert logic_breakdown(kv260, "ffs")["mac"] == int(mac["fpga_ffs"])
    # the top's control: what the top has beyond its units' estimate
    units = logic_breakdown(kv260, "luts")
    rest = int(top["fpga_luts"]) - sum(units[k] for k in ("mac", "prio", "softmax", "normalizer"))
    assert rm.control_luts == rest


def _rel(est: float, got: float) -> float:
    return abs(est - got) / got


def test_logic_estimate_scales_to_the_points_it_was_not_fitted_on(kv260):
    """The dl_scale rows no coefficient comes from: logic LUTs and FFs within the band."""
    checked = []
    for (top, params), row in ROWS.items():
        if row["group"] != "dl_scale" or (top, params) == ("dl_normalizer", "L=4;M=8"):
            continue
        p = _params(params)
        if top == "dl_mac_lanes":
            cfg, parts = _design(kv260, D=p["D"], L=p["L"], M=p["M"]), ("mac", "prio")
        elif top == "dl_softmax_state":
            cfg, parts = _design(kv260, L=p["L"]), ("softmax",)
        else:
            cfg, parts = _design(kv260, L=p["L"], M=p["M"]), ("normalizer",)
        luts, ffs = logic_breakdown(cfg, "luts"), logic_breakdown(cfg, "ffs")
        assert _rel(sum(luts[k] for k in parts), int(row["fpga_luts"])) <= LOGIC_BAND, params
        assert _rel(sum(ffs[k] for k in parts), int(row["fpga_ffs"])) <= LOGIC_BAND, params
        checked.append(top)
    assert sorted(checked) == ["dl_mac_lanes", "dl_mac_lanes", "dl_normalizer", "dl_softmax_state"]


def test_lutram_estimate_against_the_mac_arrays(kv260):
    """o in LUTRAM: two bits per LUT at d/M <= 32 words, as Yosys maps it (RAM32M16); q: one LUT
    per bit per 64 words and read port ([UG574]), half of what Yosys 0.23 uses (RAM64M8)."""
    for (top, params), row in ROWS.items():
        if top != "dl_mac_lanes":
            continue
        p = _params(params)
        cfg = _design(kv260, D=p["D"], L=p["L"], M=p["M"])
        cost = {g.name: memory_cost("lutram", g.width_bits, g.depth)[2] * g.copies
                for g, _ in buffer_geometries(cfg) if g.name in ("lane_q", "out_acc")}  # fmt: skip
        macs, nc = p["L"] * p["M"], p["D"] // p["M"]
        assert cost["out_acc"] == p["L"] * (40 * p["M"] // 2) * -(-nc // 32)
        assert cost["lane_q"] == macs * 8 * -(-p["D"] // 64)
        yosys = int(row["fpga_lutram_luts"])
        assert cost["out_acc"] + cost["lane_q"] <= yosys <= cost["out_acc"] + 2 * cost["lane_q"]
