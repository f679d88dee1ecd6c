"""cocotb testbench of ``rtl/hbq/hbq_array.v`` against ``coaccel.models.hbq.hbq_gemm_codes``.

Runs inside the simulator (launched by ``test_hbq_array.py`` through ``rtlkit.run_cocotb``).
Configuration (``rtlkit.tb_config()``): ``params`` (HDL parameters), ``seed``, ``gemms`` (a list
of ``{"m", "n", "kb", "dist"}`` GEMM shapes and operand distributions), ``w_gap_prob`` (chance
that the weight stream holds ``i_w_valid`` low in a cycle) and ``timing`` (``{"m", "kb"}``: the
tile shape whose cycle counts are measured).

Tests:
    * ``reset_no_x``: data inputs undriven (Z), controls low: after reset no output is X/Z.
    * ``tile_timing``: one tile with an always-valid weight stream, then a second tile started
      as soon as ``o_busy`` falls: first-result latency, last-result latency, result spacing
      and tile initiation interval (all in cycles from the ``i_start`` sampling edge).
    * ``gemm_vs_reference``: each configured GEMM tiled over token tiles (``TOK_DEPTH`` tokens
      in the activation buffer) and channel tiles (``N_PE`` channels, the last one padded with
      zero weights), weight stream with random gaps; every streamed FP16 result must equal the
      reference bit for bit.
"""

from __future__ import annotations

import cocotb
import hbq_stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from hbq_stim import PeConfig

CLK_NS = 10
PSUM_MODES = {0: "fp16", 1: "mxint8_running"}
PSUM_ROUNDINGS = {0: "rne", 1: "trunc"}
OUTPUTS = ("o_busy", "o_w_ready", "o_y_valid", "o_y_tok", "o_y_data")


class ArrayConfig:
    """HDL parameters of one ``hbq_array`` build (defaults as in the RTL)."""

    def __init__(self, params: dict) -> None:
        p = {
            "N_PE": 4,
            "PSUM_MODE": 1,
            "PSUM_ROUNDING": 0,
            "TOK_DEPTH": 16,
            "KB_DEPTH": 4,
            **params,
        }
        self.pe = PeConfig.from_params(p)
        self.n_pe = int(p["N_PE"])
        self.psum_mode = PSUM_MODES[int(p["PSUM_MODE"])]
        self.psum_rounding = PSUM_ROUNDINGS[int(p["PSUM_ROUNDING"])]
        self.tok_depth = int(p["TOK_DEPTH"])
        self.kb_depth = int(p["KB_DEPTH"])


PARAMS = (
    "N_PE", "B", "UB", "ACT_BITS", "ACT_L2", "ACT_L2_BITS", "W_L2", "W_L2_BITS", "OUT_MODE",
    "PSUM_MODE", "PSUM_ROUNDING", "TOK_DEPTH", "KB_DEPTH",
)  # fmt: skip


def _config(dut) -> tuple[ArrayConfig, dict]:
    """The array configuration read back from the DUT (checked against the launcher's)."""
    tb = rtlkit.tb_config()
    hdl = {name: int(getattr(dut, name).value) for name in PARAMS}
    for name, value in tb.get("params", {}).items():
        assert hdl[name] == int(value), f"DUT parameter {name} = {hdl[name]}, launcher {value}"
    return ArrayConfig(hdl), tb


def operands(cfg: ArrayConfig, m: int, n: int, kb: int, dist: str, rng: np.random.Generator):
    """Operands in ``hbq_gemm_codes`` layout: activations ``(m, kb, B)``, weights ``(n, kb, B)``.

    ``dist`` ``"codes"`` draws raw codes (uniform, sparse, zero, max, boundary classes and the
    ``tests/vectors`` replay blocks mixed);
    any :data:`hbq_stim.QUANT_DISTS` name quantizes float tensors with the reference quantizer.
    """
    pe = cfg.pe
    b = pe.block
    if dist == "codes":
        kinds = ["uniform", "uniform", "sparse", "zero", "max"]
        count = max(m, n) * kb
        blk = hbq_stim.Blocks.concat(
            [hbq_stim.random_blocks(pe, count, rng, k) for k in kinds]
            + [hbq_stim.boundary_blocks(pe, count, rng), hbq_stim.vector_blocks(pe, rng)]
        )
        ia = rng.choice(len(blk), m * kb, replace=False)
        iw = rng.choice(len(blk), n * kb, replace=False)
        return {
            "a_codes": blk.a_codes[ia].reshape(m, kb, b),
            "a_scale": blk.a_scale[ia].reshape(m, kb),
            "a_l2": blk.a_l2[ia].reshape(m, kb, pe.n_ub),
            "w_codes": blk.w_codes[iw].reshape(n, kb, b),
            "w_scale": blk.w_scale[iw].reshape(n, kb),
            "w_l2": blk.w_l2[iw].reshape(n, kb, pe.n_ub),
            "w_scheme": blk.w_scheme[iw].reshape(n, kb),
        }
    x_w = hbq_stim.real_tensor(n, kb * b, rng, "wide" if dist == "wide" else "gauss")
    x_a = hbq_stim.real_tensor(m, kb * b, rng, dist)
    q = hbq_stim.quantize_operands(pe, x_w, x_a)
    out = {}
    for side, rows in (("a", m), ("w", n)):
        out[f"{side}_codes"] = np.asarray(q[f"{side}_codes"]).reshape(rows, kb, b)
        out[f"{side}_scale"] = np.asarray(q[f"{side}_scale"]).reshape(rows, kb)
        l2 = q[f"{side}_l2"]
        out[f"{side}_l2"] = (
            np.zeros((rows, kb, pe.n_ub), np.uint8) if l2 is None else np.asarray(l2)
        ).reshape(rows, kb, pe.n_ub)
    scheme = q["w_scheme"]
    out["w_scheme"] = np.zeros((n, kb), np.uint8) if scheme is None else np.asarray(scheme)
    return out


def reference(cfg: ArrayConfig, ops: dict) -> np.ndarray:
    """Expected FP16 bit patterns ``(m, n)`` from ``hbq_gemm_codes``."""
    pe = cfg.pe
    res = hbq_stim.ref.hbq_gemm_codes(
        ops["a_codes"],
        ops["a_scale"],
        ops["a_l2"] if pe.act_l2 is not None else None,
        ops["w_codes"],
        ops["w_scale"],
        ops["w_l2"] if pe.weight_l2 is not None else None,
        ops["w_scheme"] if pe.weight_l2 == "mix" else None,
        ub=pe.ub,
        act_l2=pe.act_l2,
        act_l2_bits=pe.act_l2_bits,
        weight_l2=pe.weight_l2,
        weight_l2_bits=pe.weight_l2_bits,
        a_elem_bits=pe.act_bits,
        w_elem_bits=hbq_stim.W_BITS,
        psum_mode=cfg.psum_mode,
        mode=pe.mode,
        out="fp16",
        sa_n=cfg.n_pe,
        psum_rounding=cfg.psum_rounding,
    )
    return np.asarray(res.bits, dtype=np.int64)


async def _start(dut, *, drive_data: bool = True) -> None:
    data = (
        "i_act_waddr",
        "i_act_codes",
        "i_act_scale_word",
        "i_n_tok",
        "i_n_kb",
        "i_w_codes",
        "i_w_scale",
        "i_w_l2",
        "i_w_scheme",
    )
    control = ("i_act_we", "i_start", "i_w_valid")
    await rtlkit.reset(dut, zero=(*control, *(data if drive_data else ())), period_ns=CLK_NS)


async def _load_activations(dut, cfg: ArrayConfig, ops: dict, t0: int, n_tok: int) -> None:
    """Write tokens ``t0 .. t0+n_tok-1`` of every K block into the activation buffer."""
    pe = cfg.pe
    kb_count = ops["a_codes"].shape[1]
    for kb in range(kb_count):
        rows = slice(t0, t0 + n_tok)
        codes = hbq_stim.pack_fields(ops["a_codes"][rows, kb], pe.act_bits)
        l2 = hbq_stim.pack_fields(ops["a_l2"][rows, kb], pe.act_l2_bits)
        scales = ops["a_scale"][rows, kb]
        for t in range(n_tok):
            dut.i_act_we.value = 1
            dut.i_act_waddr.value = kb * cfg.tok_depth + t
            dut.i_act_codes.value = codes[t]
            dut.i_act_scale_word.value = int(scales[t]) | (l2[t] << 8)
            await FallingEdge(dut.i_clk)
    dut.i_act_we.value = 0


class _Tile:
    """Runs one output tile: start pulse, weight stream (with gaps), result collection."""

    def __init__(self, dut, cfg: ArrayConfig, ops: dict, ch0: int, n_tok: int, rng, gap_prob):
        self.dut, self.cfg = dut, cfg
        pe = cfg.pe
        n_all, kb_count = ops["w_codes"].shape[:2]
        self.n_tok, self.kb_count = n_tok, kb_count
        # Beats per K block: channel ch0 + N_PE - 1 first, ch0 last; missing channels are zero.
        beats = []
        for kb in range(kb_count):
            for i in reversed(range(cfg.n_pe)):
                ch = ch0 + i
                if ch < n_all:
                    beats.append(
                        (
                            hbq_stim.pack_fields(ops["w_codes"][ch, kb][None], hbq_stim.W_BITS)[0],
                            int(ops["w_scale"][ch, kb]),
                            hbq_stim.pack_fields(ops["w_l2"][ch, kb][None], pe.weight_l2_bits)[0],
                            int(ops["w_scheme"][ch, kb]),
                        )
                    )
                else:
                    beats.append((0, 8, 0, 0))  # zero codes, smallest valid scale 2^-14
        self.beats = beats
        self.rng, self.gap_prob = rng, gap_prob

    async def run(self, *, start_cycle_log: list | None = None) -> tuple[dict, dict]:
        """Start the tile (after the current falling edge) and run it until o_busy falls.

        Returns:
            ``(results, timing)``: results ``{token: data int}``; timing in cycles from the
            ``i_start`` sampling edge: ``first_out``, ``last_out``, ``gaps`` (between results),
            ``busy_low`` (first cycle with o_busy low).
        """
        dut = self.dut
        dut.i_start.value = 1
        dut.i_n_tok.value = self.n_tok
        dut.i_n_kb.value = self.kb_count
        results: dict[int, int] = {}
        out_cycles: list[int] = []
        beat = 0
        cycle = 0
        busy_low = None
        valid = self._drive_beat(beat)
        while True:
            # o_w_ready is registered state: sampled mid-cycle it tells whether the beat on the
            # bus is taken at the coming edge.
            took = valid and int(dut.o_w_ready.value)
            await RisingEdge(dut.i_clk)
            cycle += 1
            beat += int(took)
            await ReadOnly()
            if int(dut.o_y_valid.value):
                tok = int(dut.o_y_tok.value)
                assert tok not in results, f"token {tok} streamed twice"
                results[tok] = int(dut.o_y_data.value)
                out_cycles.append(cycle)
            if cycle > 1 and not int(dut.o_busy.value):
                busy_low = cycle
                break
            assert cycle < 100_000, "tile never finished"
            await FallingEdge(dut.i_clk)
            dut.i_start.value = 0
            valid = self._drive_beat(beat)
        await FallingEdge(dut.i_clk)
        dut.i_w_valid.value = 0
        assert beat == len(self.beats), (
            f"array took {beat} weight beats, expected {len(self.beats)}"
        )
        gaps = np.diff(out_cycles).tolist() if len(out_cycles) > 1 else []
        timing = {
            "first_out": out_cycles[0] if out_cycles else None,
            "last_out": out_cycles[-1] if out_cycles else None,
            "gaps": gaps,
            "busy_low": busy_low,
        }
        return results, timing

    def _drive_beat(self, beat: int) -> bool:
        """Put beat ``beat`` on the weight bus, or a gap; returns i_w_valid."""
        dut = self.dut
        if beat >= len(self.beats) or self.rng.random() < self.gap_prob:
            dut.i_w_valid.value = 0
            return False
        codes, scale, l2, scheme = self.beats[beat]
        dut.i_w_valid.value = 1
        dut.i_w_codes.value = codes
        dut.i_w_scale.value = scale
        dut.i_w_l2.value = l2
        dut.i_w_scheme.value = scheme
        return True


def _unpack_y(cfg: ArrayConfig, data: int) -> list[int]:
    return [(data >> (16 * i)) & 0xFFFF for i in range(cfg.n_pe)]


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
        assert int(dut.o_busy.value) == 0 and int(dut.o_y_valid.value) == 0


@cocotb.test()
async def tile_timing(dut):
    """Cycle counts of one tile (weights always valid) and of back-to-back tiles."""
    cfg, tb = _config(dut)
    timing_cfg = tb.get("timing", {"m": 8, "kb": 2})
    m, kb = int(timing_cfg["m"]), int(timing_cfg["kb"])
    rng = np.random.default_rng(int(tb.get("seed", 1)) + 5)
    ops = operands(cfg, m, cfg.n_pe, kb, "codes", rng)
    expect = reference(cfg, ops)
    await _start(dut)
    await _load_activations(dut, cfg, ops, 0, m)
    tile = _Tile(dut, cfg, ops, 0, m, rng, gap_prob=0.0)
    results, first = await tile.run()
    # Second tile, started in the first cycle o_busy is low (it is still low now).
    results2, second = await tile.run()
    for res in (results, results2):
        got = np.array([_unpack_y(cfg, res[t]) for t in range(m)], dtype=np.int64)
        assert np.array_equal(got, expect), "timing tile results differ from the reference"
    assert set(first["gaps"]) == {1}, f"results not on consecutive cycles: {first['gaps']}"
    assert second == first, f"back-to-back tile timing {second} differs from the first {first}"
    # The second start was driven in the cycle after o_busy was seen low: busy_low + 0.
    tile_ii = first["busy_low"]
    rtlkit.write_results(
        {
            "first_out_cycles": first["first_out"],
            "last_out_cycles": first["last_out"],
            "result_gap_cycles": 1,
            "tile_ii_cycles": tile_ii,
        }
    )
    dut._log.info(
        "tile m=%d kb=%d: first result %d, last %d, o_busy low at %d cycles after i_start",
        m,
        kb,
        first["first_out"],
        first["last_out"],
        first["busy_low"],
    )


@cocotb.test()
async def gemm_vs_reference(dut):
    """Tiled GEMMs (token tiles x channel tiles) against hbq_gemm_codes, bit for bit."""
    cfg, tb = _config(dut)
    rng = np.random.default_rng(int(tb.get("seed", 1)))
    gap_prob = float(tb.get("w_gap_prob", 0.3))
    await _start(dut)
    checked = 0
    blocks = 0
    for spec in tb.get("gemms", [{"m": 8, "n": cfg.n_pe, "kb": 2, "dist": "gauss"}]):
        m, n, kb, dist = int(spec["m"]), int(spec["n"]), int(spec["kb"]), str(spec["dist"])
        if kb > cfg.kb_depth:
            raise ValueError(f"kb={kb} exceeds KB_DEPTH={cfg.kb_depth}")
        ops = operands(cfg, m, n, kb, dist, rng)
        expect = reference(cfg, ops)
        got = np.full((m, n), -1, dtype=np.int64)
        for t0 in range(0, m, cfg.tok_depth):
            n_tok = min(cfg.tok_depth, m - t0)
            await _load_activations(dut, cfg, ops, t0, n_tok)
            for ch0 in range(0, n, cfg.n_pe):
                tile = _Tile(dut, cfg, ops, ch0, n_tok, rng, gap_prob)
                results, _ = await tile.run()
                assert sorted(results) == list(range(n_tok)), f"tokens streamed: {sorted(results)}"
                for t, data in results.items():
                    vals = _unpack_y(cfg, data)
                    for i in range(cfg.n_pe):
                        if ch0 + i < n:
                            got[t0 + t, ch0 + i] = vals[i]
        bad = np.argwhere(got != expect)
        msg = [
            f"{dist} m={m} n={n} kb={kb}: y[{t},{c}] rtl {got[t, c]:#06x} ref {expect[t, c]:#06x}"
            for t, c in bad[:8]
        ]
        assert bad.size == 0, f"{len(bad)} of {m * n} results differ:\n" + "\n".join(msg)
        checked += m * n
        blocks += m * n * kb
        dut._log.info(
            "GEMM %s m=%d n=%d kb=%d: %d results equal the reference", dist, m, n, kb, m * n
        )
    rtlkit.write_results({"results_checked": checked, "block_dots_checked": blocks})
