"""End to end: ``simulate`` in both modes, the statistics, and the analytical-vs-cycle agreement.

Expected values: a GEMM's timeline derived by hand from the documented rules; the reference's
traces (DRAM bytes must equal theirs); invariants of the statistics; the cycle-approximate mode
as the reference of the analytical one (within 5%, the issue's target).
"""

from __future__ import annotations

import json
import math

import pytest

from coaccel.cli import main as cli_main
from coaccel.models.hbq import TraceSegment, gemm_trace
from coaccel.sim.hbq_asic import (
    ARCH_NAMES,
    STALL_CAUSES,
    load_arch,
    load_workload,
    simulate,
    simulate_segments,
    workload_segments,
)
from coaccel.spine.config import ConfigError

TINY = """\
version: 1
name: tiny
model: {{hidden: 256, intermediate: 512, layers: {layers}, heads: 4, kv_heads: 2, head_dim: 64,
        vocab: 1000, max_position_embeddings: 4096}}
default_scenario: prefill
scenarios:
  prefill: {{phase: prefill, tokens: 200}}
  decode: {{phase: decode, tokens: 100, decode_steps: 2}}
  prefill_fp16_kv: {{phase: prefill, tokens: 200, kv_quant: false}}
"""


def _tiny(tmp_path, layers=2, scenario="prefill"):
    path = tmp_path / f"tiny{layers}.yaml"
    path.write_text(TINY.format(layers=layers))
    return load_workload(path, scenario)


def test_one_gemm_timeline_by_hand():
    arch = load_arch("hbq_e_28nm")
    # Y[512, 256] = A[512, 256] W^T: one token tile, one channel tile, two K tiles of 128.
    t = gemm_trace(512, 256, 256, arch_fmt("activation"), arch_fmt("weight"), tile_m=512,
                   tile_n=256, tile_k=128, order="mnk", n_buffers=2,
                   psum_mode="mxint8_running", out=arch_fmt("activation"))  # fmt: skip
    seg = TraceSegment("g", "linear", 1, 0, t)
    s = simulate_segments(arch, load_workload("llama-3-8b"), [seg])
    # DRAM: 25.6 GB/s x 0.7 at 500 MHz = 35.84 B/cycle, 100 ns = 50 cycles. A tile 512 x 128 at
    # 5.125 bits = 41984 B -> 1172 cycles; W tile 256 x 128 at 4.1328125 bits = 16928 B -> 473;
    # Y 512 x 256 at 5.125 bits = 83968 B -> 2343.
    # Reads A0 [0, 1172) W0 [1172, 1645) (data at 1695), A1, W1 [1645, 3290) (at 3340); tile 0
    # computes [1695, 6066) (4371 cycles: see test_hbq_sim_engine), tile 1 [6066, 10437), the
    # output write [10437, 12780).
    assert s.cycles == 12780
    assert s.stall_cycles["busy"] == 2 * 4096
    assert s.stall_cycles["weight_propagation"] == 2 * 256
    assert s.stall_cycles["pipeline_turnaround"] == 2 * 19
    assert s.stall_cycles["dram_bandwidth"] == 1645  # waiting for A0 and W0 to stream in
    assert s.stall_cycles["dram_latency"] == 50
    assert s.stall_cycles["drain"] == 2343
    assert sum(s.stall_cycles.values()) == s.cycles
    assert s.macs == 512 * 256 * 256
    assert s.dram.read_bytes == 2 * 41984 + 2 * 16928 and s.dram.write_bytes == 83968
    assert (s.dram.reads, s.dram.writes) == (4, 1)
    # Buffers: 512 tokens x 8 waves per tile read one 664-bit ACT word each; each tile's 256
    # weight vectors are read once from WGT (544-bit words); PSUM: 16 words (136 bits) per token
    # per tile written, read back by the second tile; fills in words of the port width.
    act, wgt, psum = s.buffers["ACT"], s.buffers["WGT"], s.buffers["PSUM"]
    assert (act.reads, act.read_bytes) == (2 * 512 * 8, 2 * 512 * 8 * 83)
    assert (act.writes, act.write_bytes) == (2 * math.ceil(41984 / 83), 2 * 41984)
    assert (wgt.reads, wgt.writes, wgt.write_bytes) == (512, 2 * math.ceil(16928 / 68), 2 * 16928)
    assert (psum.reads, psum.writes) == (512 * 16, 2 * 512 * 16)
    assert (psum.read_bytes, psum.write_bytes, psum.word_bits) == (8192 * 17, 16384 * 17, 136)


def arch_fmt(role):
    from coaccel.sim.hbq_asic.config import operand_format

    return operand_format(load_arch("hbq_e_28nm"), role)


@pytest.mark.parametrize("name", ["hbq_e_28nm", "nvfp4_28nm", "mxfp_w4a8_28nm", "woq_w4a16_28nm"])
@pytest.mark.parametrize("scenario", ["prefill", "decode", "prefill_fp16_kv"])
def test_statistics_invariants(tmp_path, name, scenario):
    arch = load_arch(name)
    w = _tiny(tmp_path, scenario=scenario)
    segs = workload_segments(arch, w)
    c = simulate(arch, w)
    a = simulate(arch, w, mode="analytical")
    for s in (c, a):
        assert set(s.stall_cycles) == {"busy", *STALL_CAUSES}
        assert sum(s.stall_cycles.values()) == s.cycles
        assert s.utilisation == pytest.approx(s.macs / (s.cycles * 4096))
        assert s.seconds == pytest.approx(s.cycles / 500e6)
        assert sum(k.cycles for k in s.by_name.values()) == s.cycles
        assert sum(k.macs for k in s.by_name.values()) == s.macs
        assert s.layers == 2 and s.layers_simulated == 1
    # The DRAM traffic is the simulated traces', times the copies; the analytical mode counts
    # the same bytes without the traces.
    read = sum(x.trace.total_bytes(space="DRAM", rw="read") * x.repeat for x in segs)
    write = sum(x.trace.total_bytes(space="DRAM", rw="write") * x.repeat for x in segs)
    assert (c.dram.read_bytes, c.dram.write_bytes) == (read, write)
    assert (a.dram.read_bytes, a.dram.write_bytes) == (read, write)
    assert c.dram.by_tensor == a.dram.by_tensor
    assert sum(c.dram.by_tensor.values()) == read + write
    assert c.macs == a.macs == sum(x.trace.total_macs() * x.repeat for x in segs)
    for b in ("ACT", "WGT", "PSUM"):
        assert c.buffers[b] == a.buffers[b], b
    assert abs(a.cycles / c.cycles - 1) < 0.05


def test_identical_layers_are_simulated_once_and_scaled(tmp_path):
    arch = load_arch("hbq_a_28nm")
    s2 = simulate(arch, _tiny(tmp_path, layers=2))
    s4 = simulate(arch, _tiny(tmp_path, layers=4))
    for name, k in s2.by_name.items():
        if k.kind != "lm_head":
            assert s4.by_name[name].cycles == 2 * k.cycles
            assert s4.by_name[name].dram_read_bytes == 2 * k.dram_read_bytes
    assert s4.by_name["lm_head"] == s2.by_name["lm_head"]
    assert any("scaled by 4" in n for n in s4.notes)


def test_simpy_engine_gives_the_same_statistics(tmp_path):
    arch = load_arch("mxfp4_28nm")
    w = _tiny(tmp_path, scenario="decode")
    fast = simulate(arch, w, engine="fast")
    ref = simulate(arch, w, engine="simpy")
    assert fast.to_dict() | {"notes": None} == ref.to_dict() | {"notes": None}


def test_partial_sum_bq_halves_the_weight_traffic():
    # MXINT8 partial sums double the token tile (512 vs 256), so HBQ streams the weights half
    # as often as an FP16-partial-sum design with the same formats (specs/hbq.md §2.2).
    hbq = load_arch("hbq_e_28nm")
    from coaccel.spine.config import override

    fp16 = override(hbq, {"psum.mode": "fp16", "psum.unit_latency_cycles": 1,
                          "buffers.psum.bank_width_bits": 256})  # fmt: skip
    w = load_workload("qwen2.5-3b", "prefill_2k")
    a = simulate(hbq, w, mode="analytical")
    b = simulate(fp16, w, mode="analytical")
    weights = [t for t in a.dram.by_tensor if t.startswith("w")]
    assert sum(b.dram.by_tensor[t] for t in weights) == 2 * sum(
        a.dram.by_tensor[t] for t in weights
    )


def _resident(name="hbq_e_28nm", act_kib=None):
    from coaccel.spine.config import override

    arch = load_arch(name)
    over = {"tiling.act_resident": True}
    if act_kib is not None:
        over["buffers.act.size_kib"] = act_kib
    return override(arch, over)


@pytest.mark.parametrize("scenario", ["prefill", "decode"])
def test_resident_activations_read_once_per_token_tile(tmp_path, scenario):
    # tiny model, 96 KiB ACT (two 48 KiB slots): a 200 x 256 slab at 5.125 b (32.8 KB) fits
    # a slot, the down projection's 200 x 512 one (65.6 KB) does not and streams.
    w = _tiny(tmp_path, scenario=scenario)
    base, res = load_arch("hbq_e_28nm"), _resident()
    b, r = simulate(base, w), simulate(res, w)
    assert r.tiles["act_resident"] == 1 and b.tiles["act_resident"] == 0
    n_q = 200 if scenario == "prefill" else 1
    slab = -(-n_q * 256 * 41 // 64)  # bytes of the 256-wide input at 5.125 bits
    steps = 1 if scenario == "prefill" else 2
    # gate/up: 2 x 512 outputs = 4 channel tiles of 256, so streaming reads x3 four times;
    # resident, once. x3 also carries nothing else (the MLP input is only read).
    assert b.dram.by_tensor["x3"] == 2 * 4 * slab * steps
    assert r.dram.by_tensor["x3"] == 2 * 1 * slab * steps
    # LM head: 1000 outputs = 4 channel tiles (3 x 256 + 232); one read of x_final resident
    n_lm = n_q
    assert r.dram.by_tensor["x_final"] == -(-n_lm * 256 * 41 // 64) * steps
    assert b.dram.by_tensor["x_final"] == 4 * r.dram.by_tensor["x_final"]
    # the down projection (one channel tile) and the weights are unchanged
    for t in ("h", "w_gate_up", "w_down", "wq"):
        assert r.dram.by_tensor[t] == b.dram.by_tensor[t], t
    assert r.macs == b.macs
    # analytical == cycle on the traffic and buffers, within 5 % on cycles; numba == simpy
    a = simulate(res, w, mode="analytical")
    assert (a.dram.read_bytes, a.dram.write_bytes) == (r.dram.read_bytes, r.dram.write_bytes)
    assert a.dram.by_tensor == r.dram.by_tensor
    for buf in ("ACT", "WGT", "PSUM"):
        assert a.buffers[buf] == r.buffers[buf], buf
    assert abs(a.cycles / r.cycles - 1) < 0.05
    ref = simulate(res, w, engine="simpy")
    assert r.to_dict() | {"notes": None} == ref.to_dict() | {"notes": None}


def test_resident_activations_cut_llama_traffic_when_the_buffer_holds_the_slabs():
    # 7200 KiB: two 512 x 11008 slabs at 5.125 b (7.22 MB) fit, so every linear layer's input
    # is read once per 512-token tile; the weights are unchanged (the K/V traffic is not: the
    # larger ACT buffer also holds larger attention query tiles).
    w = load_workload("llama-2-7b", "prefill_2k")
    b = simulate(load_arch("hbq_e_28nm"), w, mode="analytical")
    r = simulate(_resident(act_kib=7200), w, mode="analytical")
    e = 4096
    # q/k/v each read x (2048 x 4096 at 5.125 b) once instead of 16 times (4096 / 256)
    x_once = 32 * 2048 * e * 41 // 64
    assert b.dram.by_tensor["x"] == 3 * 16 * x_once
    assert r.dram.by_tensor["x"] == 3 * x_once
    for t in ("wq", "w_gate_up", "w_down", "w_lm_head"):
        assert r.dram.by_tensor[t] == b.dram.by_tensor[t]
    assert r.dram.total_bytes < 0.4 * b.dram.total_bytes


# ------------------------------------------------------------------ analytical vs cycle


def _agreement(archs, workloads):
    rows = []
    for spec in archs:
        arch = load_arch(spec) if isinstance(spec, str) else spec
        name = arch.name
        for wl in workloads:
            w = load_workload(wl)
            c = simulate(arch, w)
            a = simulate(arch, w, mode="analytical")
            assert (a.dram.read_bytes, a.dram.write_bytes) == (
                c.dram.read_bytes,
                c.dram.write_bytes,
            )
            rows.append((name, w.label, c.cycles, a.cycles, a.cycles / c.cycles - 1))
    print("\narch              workload                      cycle cycles   analytical   error")
    for name, label, cc, ac, err in rows:
        print(f"{name:<17} {label:<27} {cc:>15,} {ac:>15,} {100 * err:+7.2f}%")
    worst = max(rows, key=lambda r: abs(r[4]))
    assert abs(worst[4]) < 0.05, worst
    return rows


def test_analytical_agrees_within_5_percent_llama3_8b():
    _agreement(ARCH_NAMES, ["llama-3-8b:prefill_2k", "llama-3-8b:decode_2k"])


def test_analytical_agrees_within_5_percent_with_resident_activations():
    _agreement(
        [_resident(act_kib=kib) for kib in (96, 2048, 7200)],
        ["llama-3-8b:prefill_2k", "qwen2.5-3b:prefill_1k", "llama-3.2-3b:decode_2k"],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    ["llama-2-7b", "llama-3-8b", "llama-3.2-3b", "qwen2.5-3b", "qwen2.5-7b"],  # [R-PM]
)
def test_analytical_agrees_within_5_percent_every_rpm_workload(model):
    # one case per model, so that parallel workers share the 30 workloads x every architecture
    scenarios = ("prefill_1k", "prefill_2k", "prefill_4k", "prefill_16k", "decode_2k",
                 "decode_16k")  # fmt: skip
    _agreement(ARCH_NAMES, [f"{model}:{s}" for s in scenarios])


# ------------------------------------------------------------------ errors and command line


def test_errors():
    with pytest.raises(ValueError, match="mode='rtl'"):
        simulate("hbq_e_28nm", "llama-3-8b", mode="rtl")
    with pytest.raises(ConfigError, match="no scenario"):
        simulate("hbq_e_28nm", "llama-3-8b:prefill_9k")


def test_command_line(capsys, tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(layers=2))
    rc = cli_main(["sim", "hbq_e_28nm", "--workload", f"{path}", "--analytical", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "analytical" and d["workload"] == "tiny:prefill"
    assert sum(d["stall_cycles"].values()) == d["cycles"]
    rc = cli_main(["sim", "nvfp4_28nm", "--workload", f"{path}", "--scenario", "decode"])
    out = capsys.readouterr().out
    assert rc == 0 and "nvfp4_28nm | tiny:decode | cycle mode" in out and "lm_head" in out
    rc = cli_main(["sim", "hbq_e_28nm", "--workload", f"{path}", "--set", "pe_array.n_pes=24"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "tiling.tile_n_channels: must be a multiple of pe_array.n_pes=24" in err
