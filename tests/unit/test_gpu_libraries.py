"""What public kernel libraries launch for a decode step (coaccel.models.gpu._libraries):
FlashAttention-2's and FlashAttention-3's split heuristics against cases worked by hand from
their definitions ([FA2-REPO] ``num_splits_heuristic``, [FA3-REPO] ``heuristics.h`` and
``flash_prepare_scheduler.cu``), FlashAttention-3's Ampere/Ada tile table, the launch plans,
FlashAttention-2's serial combine in the trace and the simulator, and which library launches
what (coaccel.targets.gpu.measured)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from coaccel.models.gpu import (
    DecodeShape,
    fa2_num_splits,
    fa3_dynamic_num_splits,
    fa3_num_splits,
    fa3_sm8x_tile,
    fa3_sm90_tile,
    plan_library_launch,
    sequence_launches,
    split_k_trace,
    with_context,
)
from coaccel.sim.gpu_mem import load_arch, simulate
from coaccel.targets.gpu import measured as mm

# -- FlashAttention-2 --------------------------------------------------------------------------


def test_fa2_fills_the_gpu_without_splitting() -> None:
    # 64 sequences x 8 KV heads = 512 CTAs >= 0.8 x 216: one split
    assert fa2_num_splits(512, 216, 2) == 1
    assert fa2_num_splits(173, 216, 1000) == 1  # 173 >= 172.8
    assert fa2_num_splits(172, 216, 1000) > 1


@pytest.mark.parametrize(
    ("ctas", "n_blocks", "want"),
    [
        # one (sequence, KV head), 16K tokens in 128 tiles, 2 x 108 SMs: efficiency s / 216,
        # best 128 / 216 = 0.593 at s = 128; 85 % of it needs s >= 109, and from 64 to 127
        # splits every split holds two tiles (only s = 64 is counted), so s = 128
        (1, 128, 128),
        # 1024 tiles: s = 109 .. 113 give ceil(1024 / s) = 10 like s - 1 (not counted); 114
        # gives 9: the first counted s at or above 108.8
        (1, 1024, 114),
        # 4 CTAs per split: 43 splits fill 172 / 216 = 0.796 of a wave, the best (128 splits:
        # 2.37 waves, 0.790); 85 % is 0.677 and no counted s below 43 reaches it
        (4, 128, 43),
        # 4K tokens (32 tiles): only 32 reaches 85 % of 32 / 216
        (1, 32, 32),
    ],
)
def test_fa2_hand_worked_cases(ctas: int, n_blocks: int, want: int) -> None:
    assert fa2_num_splits(ctas, 216, n_blocks) == want


def test_fa2_skips_split_counts_that_do_not_change_the_tiles() -> None:
    # 10 CTAs per split, 100 SMs, 64 tiles: 9 splits would fill 0.9 of a wave but hold
    # ceil(64 / 9) = 8 tiles each, like 8 splits, so 9 is not counted; 10 (7 tiles) is
    assert fa2_num_splits(10, 100, 64) == 10
    # without that rule the answer would be 9: the first s with 10 s / 100 >= 0.85
    assert math.ceil(64 / 9) == math.ceil(64 / 8)


def test_fa2_launch_plans() -> None:
    # vLLM's varlen call splits only when the query heads are swapped in (GQA)
    mha = plan_library_launch(DecodeShape(1, 16384, 32, 32), "fa2_varlen", n_sms=108)
    assert (mha.plan.num_splits, mha.combine) == (1, "none")
    kv = plan_library_launch(DecodeShape(1, 16384, 32, 32), "fa2_kvcache", n_sms=108)
    assert kv.plan.num_splits == fa2_num_splits(32, 216, 128) > 1
    gqa = plan_library_launch(DecodeShape(1, 16384, 8, 1), "fa2_varlen", n_sms=108)
    p = gqa.plan
    assert (p.num_splits, p.block_n, p.mma_m, p.threads_per_cta) == (128, 128, 64, 128)
    assert (gqa.combine, gqa.combine_rows_per_cta) == ("serial", 4)
    assert p.smem_bytes_per_cta == 64 * 128 * 2 + 2 * 128 * 128 * 2  # Q, K and V tiles
    # head dimension 64: 256-token tiles; 256: 64-token tiles
    assert plan_library_launch(DecodeShape(1, 4096, 8, 1, 64), "fa2_varlen",
                               n_sms=108).plan.block_n == 256  # fmt: skip
    assert plan_library_launch(DecodeShape(1, 4096, 8, 1, 256), "fa2_varlen",
                               n_sms=108).plan.block_n == 64  # fmt: skip


def test_fa2_serial_combine_trace_and_time() -> None:
    """The combine CTA loads one split after the other: its time is a chain of ``splits``
    L2-latency loads (the partials were just written), not its bytes."""
    arch = load_arch("a100_80g")
    launch = plan_library_launch(DecodeShape(1, 16384, 8, 1), "fa2_varlen", n_sms=108)
    ns = launch.plan.num_splits
    tr = split_k_trace(launch.plan, combine="serial", combine_rows_per_cta=4)
    res = simulate(arch, tr)
    assert [k.name for k in res.kernels] == ["flash_decode_split", "flash_decode_combine"]
    mem = tr.memory[tr.memory["kernel"] == 1]
    reads = mem[mem["rw"] == 0]  # 0: read
    assert reads.size == 2 * (1 + ns)  # 8 rows / 4 per CTA = 2 CTAs: (m, l), then each split
    for cta in (0, 1):
        r = reads[reads["cta"] == cta]
        assert np.array_equal(r["dep"][1:], r["seq"][:-1])  # each load waits for the one before
    comb = res.kernels[1]
    f = arch.sm.freq_mhz * 1e6
    assert comb.bound == "chain"
    assert ns * arch.l2.near_latency_cycles / f <= comb.standalone_s
    assert comb.standalone_s <= (ns + 1) * arch.l2.far_latency_cycles / f
    # the package's reduction of the same partials loads every split at once
    rows = simulate(arch, split_k_trace(launch.plan))
    assert rows.kernels[1].standalone_s < comb.standalone_s / 10


def test_one_split_launches_no_combine() -> None:
    launch = plan_library_launch(DecodeShape(64, 256, 32, 8), "fa2_varlen", n_sms=108)
    assert launch.plan.num_splits == 1 and launch.combine == "none"
    tr = split_k_trace(launch.plan, combine="none")
    assert set(tr.memory["kernel"].tolist()) == {0}
    assert [k.name for k in simulate(load_arch("a100_80g"), tr).kernels] == ["flash_decode_split"]
    with pytest.raises(ValueError, match="combine='none' needs one split"):
        split_k_trace(plan_library_launch(DecodeShape(1, 16384, 8, 1), "fa2_varlen",
                                          n_sms=108).plan, combine="none")  # fmt: skip


# -- FlashAttention-3 --------------------------------------------------------------------------


def test_fa3_static_hand_worked_cases() -> None:
    # 8 KV heads (batch taken as 1), 37 tiles of 112 tokens (4096), 108 SMs: 8 s / 108 reaches
    # a full wave at s = 27 (efficiency 1); 85 % first at s = 12 (96 / 108 = 0.889; 11: 0.815)
    assert fa3_num_splits(8, 108, 37, 1, 4096 * 256 * 2) == 12
    assert fa3_num_splits(8, 108, 4, 1, 448 * 256 * 2) == 1  # at most 4 tiles: never split
    # enough CTAs: one split, unless a KV head exceeds 50 MiB and there are 2 x SMs query tiles
    mib = 1 << 20
    assert fa3_num_splits(100, 108, 1000, 1, 120 * mib) == 1
    assert fa3_num_splits(100, 108, 1000, 216, 120 * mib) == 3
    assert fa3_num_splits(100, 108, 1000, 216, 120 * mib, causal_or_local=True) == 1


@pytest.mark.parametrize(
    ("batch", "want"),
    [
        # 16 x 37 = 592 tiles: ceil(592 x 1.1 x 8 / 108) = 49 per SM > 37 tiles: no split
        (16, 1),
        # 4 x 37 = 148: ceil(12.06) = 13 per SM, ceil(37 / 13) = 3
        (4, 3),
        # 37: ceil(3.01) = 4 per SM, ceil(37 / 4) = 10 (under the static bound 12)
        (1, 10),
    ],
)
def test_fa3_dynamic_hand_worked_cases(batch: int, want: int) -> None:
    assert fa3_dynamic_num_splits(37, batch * 37, 8, 108, 12) == want


def test_fa3_dynamic_is_bounded_by_the_static_count() -> None:
    assert fa3_dynamic_num_splits(1000, 1000, 1, 108, 7) == 7
    assert fa3_dynamic_num_splits(1, 10**6, 64, 108, 12) == 1


def test_fa3_sm8x_tile_table() -> None:
    assert fa3_sm8x_tile(128, sm86_or_89=False, varlen_and_split=True) == (128, 112, 8, 1)
    assert fa3_sm8x_tile(128, sm86_or_89=False, varlen_and_split=False) == (128, 64, 4, 1)
    assert fa3_sm8x_tile(128, sm86_or_89=True, varlen_and_split=False) == (128, 128, 8, 1)
    assert fa3_sm8x_tile(64, sm86_or_89=False, varlen_and_split=True) == (128, 80, 4, 1)
    assert fa3_sm8x_tile(192, sm86_or_89=False, varlen_and_split=False) == (128, 64, 8, 2)
    assert fa3_sm8x_tile(256, sm86_or_89=True, varlen_and_split=True) == (128, 48, 8, 1)
    assert fa3_sm8x_tile(256, sm86_or_89=False, varlen_and_split=False) == (128, 96, 8, 1)


def test_fa3_sm8x_launch_plans() -> None:
    a100 = load_arch("a100_80g")
    # the split template (static bound 12 > 1) with one split per sequence: 128-row query
    # tiles of 8 warps on 112-token K/V tiles, 88 KiB of shared memory: one CTA per A100 SM,
    # so 128 CTAs take two waves
    one = plan_library_launch(DecodeShape(16, 4096, 32, 8), "fa3_sm8x", n_sms=108)
    p = one.plan
    assert (one.static_splits, p.num_splits, one.combine) == (12, 1, "none")
    assert (p.block_n, p.mma_m, p.threads_per_cta, p.n_ctas) == (112, 128, 256, 128)
    assert p.smem_bytes_per_cta == 128 * 128 * 2 + 2 * 112 * 128 * 2
    k = simulate(a100, split_k_trace(p, combine="none")).kernels[0]
    assert (k.resident_ctas_per_sm, k.waves) == (1, 2)
    few = plan_library_launch(DecodeShape(4, 4096, 32, 8), "fa3_sm8x", n_sms=108)
    assert (few.plan.num_splits, few.combine, few.plan.n_ctas) == (3, "pipelined", 96)
    assert (few.combine_rows_per_cta, few.combine_stages) == (8, 4)
    # 256 tokens: at most 4 tiles, no split: the 4-warp tile of 64 tokens
    small = plan_library_launch(DecodeShape(1, 256, 32, 8), "fa3_sm8x", n_sms=108)
    assert (small.static_splits, small.plan.block_n, small.plan.threads_per_cta) == (1, 64, 128)
    with pytest.raises(ValueError, match="compute capability 90 is not 8.x"):
        plan_library_launch(DecodeShape(1, 256), "fa3_sm8x", n_sms=132, compute_capability=90)
    with pytest.raises(ValueError, match="compute capability 80 is not 9.0"):
        plan_library_launch(DecodeShape(1, 256), "fa3_sm90", n_sms=108, compute_capability=80)
    with pytest.raises(ValueError, match="launch kind 'xqa'; valid: flashdecode, fa2_varlen"):
        plan_library_launch(DecodeShape(1, 256), "xqa", n_sms=108)  # type: ignore[arg-type]


def test_fa3_pipelined_combine_trace_and_time() -> None:
    """FlashAttention-3's combine walks the splits with 4 loads in flight: load s waits for
    load s - 4 (load 3 for the (m, l) read, loads 0-2 for nothing). Its time is at least a
    chain of splits / 4 L2 latencies; with 8 rows of partials per load, the few loads in
    flight (the simulator's latency bound) take longer than that chain, but about half of
    FlashAttention-2's one-at-a-time walk."""
    arch = load_arch("a100_80g")
    f = arch.sm.freq_mhz * 1e6
    launch = plan_library_launch(DecodeShape(1, 16384, 8, 1), "fa3_sm8x", n_sms=108)
    ns = launch.plan.num_splits
    assert (launch.combine, launch.combine_rows_per_cta, launch.combine_stages) == (
        "pipelined", 8, 4)  # fmt: skip
    assert ns > 40
    tr = split_k_trace(launch.plan, combine="pipelined", combine_rows_per_cta=8,
                       combine_stages=4)  # fmt: skip
    assert tr.meta["workload"]["combine_stages"] == 4
    reads = tr.memory[(tr.memory["kernel"] == 1) & (tr.memory["rw"] == 0)]
    assert reads.size == 1 + ns  # 8 rows: one CTA; (m, l), then each split
    ml, loads = reads[0], reads[1:]
    assert np.array_equal(loads["dep"][:3], [-1, -1, -1])
    assert loads["dep"][3] == ml["seq"]
    assert np.array_equal(loads["dep"][4:], loads["seq"][:-4])
    comb = simulate(arch, tr).kernels[1]
    assert comb.bound in ("chain", "latency")
    assert -(-ns // 4) * arch.l2.near_latency_cycles / f <= comb.standalone_s
    serial = simulate(arch, split_k_trace(launch.plan, combine="serial",
                                          combine_rows_per_cta=8)).kernels[1]  # fmt: skip
    assert serial.bound == "chain"
    assert 0.3 * serial.standalone_s < comb.standalone_s < 0.7 * serial.standalone_s
    # one stage is FlashAttention-2's serial walk, record for record
    one = split_k_trace(launch.plan, combine="pipelined", combine_rows_per_cta=8,
                        combine_stages=1)  # fmt: skip
    two = split_k_trace(launch.plan, combine="serial", combine_rows_per_cta=8)
    assert np.array_equal(one.memory, two.memory)
    with pytest.raises(ValueError, match="stages=0 must be >= 1"):
        split_k_trace(launch.plan, combine="pipelined", combine_stages=0)


def test_fa3_sm90_tile_table() -> None:
    # tile_size_fwd_sm90 with paged_kv_non_TMA: (kBlockM, kBlockN); threads: a producer
    # warpgroup plus one MMA warpgroup per 64 rows; two stages on Hopper
    assert fa3_sm90_tile(64) == (192, 160, 512, 2)
    assert fa3_sm90_tile(96) == (192, 128, 512, 2)
    assert fa3_sm90_tile(128) == (128, 128, 384, 2)
    assert fa3_sm90_tile(192) == (128, 96, 384, 2)
    assert fa3_sm90_tile(256) == (128, 80, 384, 2)


def test_fa3_sm90_launch_plans() -> None:
    h100 = load_arch("h100_sxm")
    n = h100.sm.count  # 132
    # batch 1, 8 KV heads (G = 4), 16K tokens: 128 tiles of 128 tokens; 8 CTAs per split, so
    # the heuristic splits: the smallest s whose 8 s / 132 waves are within 85 % of the best
    # wave efficiency (1 at s = 33): s = 15 (120 / 132 = 0.91; 14: 112 / 132 = 0.848)
    one = plan_library_launch(DecodeShape(1, 16384, 32, 8), "fa3_sm90", n_sms=n,
                              compute_capability=90)  # fmt: skip
    want = fa3_num_splits(8, n, 128, 1, 16384 * 256 * 2)
    assert one.static_splits == want == 15
    # one sequence: its dynamic count is bounded by the static one
    assert one.plan.num_splits == fa3_dynamic_num_splits(128, 128, 8, n, want)
    p = one.plan
    assert (p.block_n, p.mma_m, p.threads_per_cta, p.n_stages) == (128, 128, 384, 2)
    assert p.smem_bytes_per_cta == 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2  # Q, 2 x (K, V)
    assert (one.combine, one.combine_rows_per_cta, one.combine_stages) == ("pipelined", 8, 4)
    k = simulate(h100, split_k_trace(p, combine="pipelined", combine_rows_per_cta=8)).kernels[0]
    assert k.resident_ctas_per_sm == 1
    # batch 64, 4096 tokens (32 tiles): the static bound takes the batch as 1 (8 CTAs per
    # split; the best efficiency 128 / 132 = 0.97 at s = 16, and s = 14 is the first within
    # 85 %: 112 / 132 = 0.848 >= 0.824), but the sequences share
    # 64 x 32 tiles: ceil(2048 x 1.1 x 8 / 132) = 137 tiles per SM, so each sequence takes one
    # split and the combine's CTAs have nothing to do (not simulated)
    big = plan_library_launch(DecodeShape(64, 4096, 32, 8), "fa3_sm90", n_sms=n,
                              compute_capability=90)  # fmt: skip
    assert (big.static_splits, big.plan.num_splits, big.combine) == (14, 1, "none")


def test_sequence_launches_of_a_mixed_batch() -> None:
    kinds = (("fa2_varlen", 80, 108), ("fa2_kvcache", 80, 108), ("fa3_sm8x", 80, 108),
             ("fa3_sm90", 90, 132), ("flashdecode", 80, 108))  # fmt: skip
    for kind, cc, n in kinds:
        # one context: every sequence is the batch's launch
        batch = plan_library_launch(DecodeShape(16, 4096, 32, 8), kind, n_sms=n,  # type: ignore[arg-type]
                                    compute_capability=cc)  # fmt: skip
        (one,) = sequence_launches(kind, [4096] * 16, 32, 8, 128, n_sms=n,  # type: ignore[arg-type]
                                   compute_capability=cc).values()  # fmt: skip
        p, q = one.plan, batch.plan
        assert (p.num_splits, p.split_tokens, p.block_n, p.mma_m, p.threads_per_cta) == (
            q.num_splits, q.split_tokens, q.block_n, q.mma_m, q.threads_per_cta)  # fmt: skip
        assert one.combine == batch.combine and p.shape.batch == 1
    # FlashAttention-3: each sequence its own split count over the batch's tiles; the
    # static bound takes the longest context (64 tiles of 128 at 8K, 8 CTAs per split: 15)
    ctx = [512, 2048, 8192]
    got = sequence_launches("fa3_sm90", ctx, 32, 8, 128, n_sms=132, compute_capability=90)
    total = sum(-(-c // 128) for c in ctx)  # 4 + 16 + 64 tiles, one query tile each
    static = fa3_num_splits(8, 132, 64, 1, 8192 * 256 * 2)
    for c in ctx:
        want = fa3_dynamic_num_splits(-(-c // 128), total, 8, 132, static)
        assert got[c].plan.num_splits == min(want, -(-c // 128))
        assert got[c].combine == ("pipelined" if got[c].plan.num_splits > 1 else "none")
    assert got[512].plan.num_splits < got[8192].plan.num_splits
    # FlashAttention-2: the batch's split count over each sequence's own tiles
    fa2 = sequence_launches("fa2_varlen", ctx, 32, 8, 128, n_sms=108)
    b = plan_library_launch(DecodeShape(3, 8192, 32, 8), "fa2_varlen", n_sms=108)
    assert fa2[8192].plan.num_splits == b.plan.num_splits
    assert b.plan.num_splits >= 4 and fa2[512].plan.num_splits == 4  # its own 4 tiles
    # the package's rule always ends with its reduction, even with one split
    pkg = sequence_launches("flashdecode", [64], 32, 8, 128, n_sms=108)[64]
    assert (pkg.plan.num_splits, pkg.combine) == (1, "rows")
    # a launch for a shorter sequence keeps tile and CTA; one split drops the combine
    short = with_context(got[8192], 128)
    assert (short.plan.num_splits, short.combine, short.plan.block_n) == (1, "none", 128)
    with pytest.raises(ValueError, match="at least one context"):
        sequence_launches("fa2_varlen", [], 32, 8, 128, n_sms=108)


# -- which library launches what ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("library", "config", "kind"),
    [
        ("vllm-0.14.0:vllm_flash_attn", "a100_80g", "fa2_varlen"),
        ("vllm-0.14.0:vllm_flash_attn", "h200", "fa3_sm90"),
        ("sglang-0.5.10:flash_attention", "a100_80g", "fa3_sm8x"),
        ("sglang-0.5.10:flash_attention", "l40s", "fa3_sm8x"),
        ("sglang-0.5.10:flash_attention", "h100_sxm", "fa3_sm90"),
        ("vidur-sarathi-flash_attention", "a100_80g", "fa2_kvcache"),
        ("vidur-sarathi-flash_attention", "h200", "fa2_kvcache"),
        ("trtllm-1.3.0rc20:torch_flow", "h200", "flashdecode"),
        ("vllm-0.14.0:vllm_flash_attn", "rtx_a6000", "flashdecode"),  # no compute capability
        ("trtllm-1.3.0rc20:torch_flow", "l40s", "flashdecode"),
        ("flashinfer", "a100_80g", "flashdecode"),
    ],
)
def test_library_launch_kind(library: str, config: str, kind: str) -> None:
    assert mm.library_launch_kind(library, config) == kind


def test_measured_rows_are_simulated_as_their_library_launches() -> None:
    row = mm.MeasuredRow(line=2, fields=(), gpu="A100-SXM4-80GB",
                         kernel="vllm-0.14.0:vllm_flash_attn", dtype="bf16", batch=1,
                         n_q_heads=8, n_kv_heads=1, head_dim=128, context_len=16384,
                         measured_us=1.0)  # fmt: skip
    arch = load_arch("a100_80g")
    lib = mm.simulate_row(row, arch, kind="fa2_varlen")
    own = mm.simulate_row(row, arch)
    assert (lib.launch, lib.num_splits, own.launch) == ("fa2_varlen", 128, "flashdecode")
    # the package's rule asks for 108 splits of whole 128-token tiles: 64 of 2 tiles
    assert own.num_splits == 64
    # 128 splits merged one after the other: the library's op takes longer
    assert lib.sim_us > own.sim_us + 10
    # on Hopper vLLM runs FlashAttention-3: its own launch there, simulated end to end
    h200 = load_arch("h200")
    hop = dataclasses.replace(row, gpu="H200")
    kind = mm.library_launch_kind(hop.library, "h200")
    sim = mm.simulate_row(hop, h200, kind=kind, compute_capability=mm.COMPUTE_CAPABILITY["h200"])
    want = plan_library_launch(DecodeShape(1, 16384, 8, 1), "fa3_sm90", n_sms=h200.sm.count,
                               compute_capability=90)  # fmt: skip
    assert (sim.launch, sim.num_splits, sim.block_n) == (
        "fa3_sm90", want.plan.num_splits, 128)  # fmt: skip
    assert sim.sim_us > 0
