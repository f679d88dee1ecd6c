"""cocotb testbench of ``rtl/hbq/hbq_pe.v`` against ``coaccel.models.hbq.block_dot``.

Runs inside the simulator (launched by ``test_hbq_pe.py`` through ``rtlkit.run_cocotb``). The
configuration comes from ``rtlkit.tb_config()``: ``params`` (the HDL parameters, also read back
from the DUT), ``seed``, ``gap_prob`` and ``counts`` (blocks per stimulus class: the raw-code
classes of ``hbq_stim.random_blocks``, ``boundary``, ``tie``, ``q_<dist>`` (tensors quantized by
the reference quantizer), ``pairs`` (every code pair) and ``vectors`` (``tests/vectors`` replay).

Tests:
    * ``reset_no_x``: with every data input undriven (Z) and ``i_valid`` low, after a synchronous
      reset every output is 0/1 (no X/Z) and stays so.
    * ``latency_throughput``: one isolated block (latency = cycles from the input sampling edge
      to ``o_valid``), then a back-to-back burst (initiation interval); both go to the results.
    * ``stream_vs_reference``: all stimulus classes streamed with random valid gaps; every
      output bit pattern and the exposed intermediates (micro-block sums, L2-scaled sums,
      P_total) must equal the reference exactly.
"""

from __future__ import annotations

import cocotb
import hbq_stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from hbq_stim import Blocks, PeConfig

CLK_NS = 10
OUTPUTS = (
    "o_valid",
    "o_fp16",
    "o_dbg_ub_valid",
    "o_dbg_ub_sums",
    "o_dbg_scaled",
    "o_dbg_pt_valid",
    "o_dbg_p_total",
)


PARAMS = ("B", "UB", "ACT_BITS", "ACT_L2", "ACT_L2_BITS", "W_L2", "W_L2_BITS", "OUT_MODE")


def _config(dut) -> tuple[PeConfig, dict]:
    """The PE configuration read back from the DUT's parameters (checked against the launcher's)."""
    tb = rtlkit.tb_config()
    hdl = {name: int(getattr(dut, name).value) for name in PARAMS}
    for name, value in tb.get("params", {}).items():
        assert hdl[name] == int(value), f"DUT parameter {name} = {hdl[name]}, launcher {value}"
    return PeConfig.from_params(hdl), tb


async def _start(dut, *, drive_data: bool = True) -> None:
    """Start the clock and apply a synchronous reset for 3 cycles."""
    data = ("i_w", "i_w_scale", "i_w_l2", "i_w_scheme", "i_a", "i_a_scale", "i_a_l2")
    await rtlkit.reset(dut, zero=("i_valid", *(data if drive_data else ())), period_ns=CLK_NS)


class _Driver:
    """Packs a :class:`Blocks` batch into port values once, then drives block ``i`` on demand."""

    def __init__(self, dut, cfg: PeConfig, blk: Blocks) -> None:
        self.dut = dut
        self.w = hbq_stim.pack_fields(blk.w_codes, hbq_stim.W_BITS)
        self.a = hbq_stim.pack_fields(blk.a_codes, cfg.act_bits)
        self.wl2 = hbq_stim.pack_fields(blk.w_l2, cfg.weight_l2_bits)
        self.al2 = hbq_stim.pack_fields(blk.a_l2, cfg.act_l2_bits)
        self.ws = [int(v) for v in blk.w_scale]
        self.asc = [int(v) for v in blk.a_scale]
        self.sch = [int(v) for v in blk.w_scheme]

    def drive(self, i: int) -> None:
        d = self.dut
        d.i_w.value = self.w[i]
        d.i_a.value = self.a[i]
        d.i_w_l2.value = self.wl2[i]
        d.i_a_l2.value = self.al2[i]
        d.i_w_scale.value = self.ws[i]
        d.i_a_scale.value = self.asc[i]
        d.i_w_scheme.value = self.sch[i]


def _stimulus(cfg: PeConfig, tb: dict) -> Blocks:
    """Every stimulus class of the run, in one batch (order shuffled)."""
    rng = np.random.default_rng(int(tb.get("seed", 1)))
    counts = tb.get("counts", {"uniform": 64})
    parts = []
    for kind, n in counts.items():
        if n <= 0:
            continue
        if kind == "boundary":
            parts.append(hbq_stim.boundary_blocks(cfg, n, rng))
        elif kind == "tie":
            parts.append(hbq_stim.tie_blocks(cfg, n, rng))
        elif kind == "pairs":
            parts.append(hbq_stim.pair_blocks(cfg, rng))
        elif kind == "vectors":
            parts.append(hbq_stim.vector_blocks(cfg, rng))
        elif kind.startswith("q_"):
            parts.append(hbq_stim.quantized_blocks(cfg, n, rng, kind[2:]))
        else:
            parts.append(hbq_stim.random_blocks(cfg, n, rng, kind))
    blk = Blocks.concat(parts)
    order = rng.permutation(len(blk))
    return Blocks(**{f: getattr(blk, f)[order] for f in Blocks.__dataclass_fields__})


@cocotb.test()
async def reset_no_x(dut):
    """After reset no output is X/Z, even with the data inputs left undriven."""
    await _start(dut, drive_data=False)
    for cycle in range(5):
        await RisingEdge(dut.i_clk)
        await ReadOnly()
        for name in OUTPUTS:
            value = getattr(dut, name).value
            assert rtlkit.resolvable(value), (
                f"{name} = {value} (not 0/1) {cycle + 1} cycles after reset"
            )
        assert int(dut.o_valid.value) == 0 and int(dut.o_dbg_pt_valid.value) == 0


@cocotb.test()
async def latency_throughput(dut):
    """Latency of one block and the initiation interval of a back-to-back burst."""
    cfg, tb = _config(dut)
    await _start(dut)
    blk = hbq_stim.random_blocks(cfg, 16, np.random.default_rng(7), "uniform")
    drv = _Driver(dut, cfg, blk)

    # One block: driven after edge `t0`, so sampled by edge t0 + 1.
    cycle = 0
    drv.drive(0)
    dut.i_valid.value = 1
    t0 = cycle
    await RisingEdge(dut.i_clk)
    cycle += 1
    await FallingEdge(dut.i_clk)
    dut.i_valid.value = 0
    latency = None
    for _ in range(20):
        await ReadOnly()
        if int(dut.o_valid.value):
            latency = cycle - t0
            break
        await RisingEdge(dut.i_clk)
        cycle += 1
    assert latency is not None, "o_valid never rose"
    for _ in range(4):
        await RisingEdge(dut.i_clk)

    # Burst of len(blk) back-to-back blocks.
    out_cycles = []
    await FallingEdge(dut.i_clk)
    for i in range(len(blk) + 10):
        if i < len(blk):
            drv.drive(i)
        dut.i_valid.value = int(i < len(blk))
        await RisingEdge(dut.i_clk)
        await ReadOnly()
        if int(dut.o_valid.value):
            out_cycles.append(i)
        await FallingEdge(dut.i_clk)
    assert len(out_cycles) == len(blk), f"{len(out_cycles)} outputs for {len(blk)} blocks"
    ii = (out_cycles[-1] - out_cycles[0]) / (len(blk) - 1)
    assert np.all(np.diff(out_cycles) == 1), f"outputs not back to back: {out_cycles}"
    declared = int(dut.LATENCY.value)
    assert latency == declared, f"measured latency {latency}, hbq_pe declares LATENCY {declared}"
    rtlkit.write_results({"latency_cycles": latency, "ii_cycles": ii})
    dut._log.info("latency %d cycles, initiation interval %g cycles", latency, ii)


@cocotb.test()
async def stream_vs_reference(dut):
    """Stream every stimulus class (random gaps) and compare outputs and intermediates."""
    cfg, tb = _config(dut)
    blk = _stimulus(cfg, tb)
    expect = hbq_stim.reference(cfg, blk)
    assert int(dut.F.value) == expect.F, f"hbq_pe F = {int(dut.F.value)}, reference F = {expect.F}"
    drv = _Driver(dut, cfg, blk)
    gap_rng = np.random.default_rng(int(tb.get("seed", 1)) + 1)
    gap_prob = float(tb.get("gap_prob", 0.2))
    await _start(dut)

    got_fp16: list[int] = []
    got_sums: list[int] = []
    got_scaled: list[int] = []
    got_pt: list[int] = []
    sent = 0
    n = len(blk)
    idle = 0
    while len(got_fp16) < n:
        give = sent < n and gap_rng.random() >= gap_prob
        if give:
            drv.drive(sent)
            sent += 1
        dut.i_valid.value = int(give)
        await RisingEdge(dut.i_clk)
        await ReadOnly()
        if int(dut.o_dbg_ub_valid.value):
            got_sums.append(int(dut.o_dbg_ub_sums.value))
            got_scaled.append(int(dut.o_dbg_scaled.value))
        if int(dut.o_dbg_pt_valid.value):
            got_pt.append(int(dut.o_dbg_p_total.value))
        if int(dut.o_valid.value):
            got_fp16.append(int(dut.o_fp16.value))
        idle = 0 if give or sent < n else idle + 1
        assert idle < 20, f"pipeline stalled: {len(got_fp16)} of {n} outputs"
        await FallingEdge(dut.i_clk)
    dut.i_valid.value = 0

    nub = cfg.n_ub
    ubw = len(dut.o_dbg_ub_sums) // nub
    sw = len(dut.o_dbg_scaled) // nub
    ptw = len(dut.o_dbg_p_total)
    checks = {
        "ub_sums": (hbq_stim.unpack_fields(got_sums, ubw, nub, signed=True), expect.ub_sums),
        "scaled": (hbq_stim.unpack_fields(got_scaled, sw, nub, signed=True), expect.scaled),
        "p_total": (
            hbq_stim.unpack_fields(got_pt, ptw, 1, signed=True)[:, 0],
            expect.p_total,
        ),
        "fp16": (np.asarray(got_fp16, dtype=np.int64), expect.bits.astype(np.int64)),
    }
    failures = []
    for name, (got, want) in checks.items():
        want = np.asarray(want, dtype=np.int64)
        assert got.shape == want.shape, f"{name}: got shape {got.shape}, expected {want.shape}"
        bad = np.flatnonzero(np.any((got != want).reshape(len(got), -1), axis=1))
        for i in bad[:5]:
            failures.append(
                f"{name} block {i} ({blk.kind[i]}): rtl {got[i].tolist()} ref {want[i].tolist()}"
            )
        if bad.size:
            failures.append(f"{name}: {bad.size} of {len(got)} blocks differ")
    assert not failures, "\n".join(failures)

    kinds, counts = np.unique(blk.kind, return_counts=True)
    rtlkit.write_results(
        {
            "blocks_checked": n,
            "blocks_by_kind": {str(k): int(c) for k, c in zip(kinds, counts, strict=True)},
            "F": int(expect.F),
            "widths": {"UBW": ubw, "SW": sw, "PTW": ptw},
        }
    )
    dut._log.info("%d blocks equal the reference (F = %d)", n, expect.F)
