"""Host link, occupancy / Little's law and the stream scheduler against closed forms."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from coaccel.sim.common.hostlink import copy_seconds, link_efficiency, zero_copy_bytes
from coaccel.sim.common.streams import Task, schedule, task_prerequisites
from coaccel.sim.gpu_mem import load_arch
from coaccel.sim.gpu_mem.occupancy import mlp_bytes_per_s, resident_ctas, wave_sizes

H200 = load_arch("h200")
LINK = H200.host_link


def test_copy_time_is_fixed_cost_plus_bandwidth() -> None:
    n = np.array([0, 4096, 1 << 20, 256 << 20])
    t = copy_seconds(LINK, n, "h2d")
    eff = link_efficiency(LINK, n)
    want = LINK.copy_fixed_us * 1e-6 + n / (LINK.h2d_bw_gb_per_s * 1e9 * eff)
    np.testing.assert_allclose(t, want, rtol=1e-12)
    # the plateau: 16 MiB and up at 55.7 GB/s ([NVBANDWIDTH] 55.63), within the fixed cost
    big = 256 << 20
    assert abs(big / (t[-1] - 10e-6) - 55.68e9) < 0.05e9
    # pageable halves the bandwidth term; D2H scales by its factor
    tp = copy_seconds(LINK, big, "h2d", pinned=False)
    assert math.isclose(tp - 10e-6, 2 * (t[-1] - 10e-6), rel_tol=1e-12)
    gh = load_arch("gh200").host_link
    th, td = copy_seconds(gh, big, "h2d"), copy_seconds(gh, big, "d2h")
    assert math.isclose((td - 5e-6) * gh.d2h_efficiency_factor, th - 5e-6, rel_tol=1e-12)


def test_copy_curve_shape() -> None:
    # latency-bound at small sizes, bandwidth-bound at large: bandwidth rises monotonically
    n = 2.0 ** np.arange(10, 29)
    bw = n / copy_seconds(LINK, n, "h2d")
    assert np.all(np.diff(bw) > 0)
    assert bw[0] < 0.01 * bw[-1]


def test_zero_copy_rounds_to_requests() -> None:
    assert zero_copy_bytes(LINK, [1, 128, 129, 256]).tolist() == [128, 128, 256, 256]


def test_resident_ctas_is_the_tightest_limit() -> None:
    # CUDA's occupancy rule for compute capability 9.0 written out: 32 blocks, 2048 threads,
    # 228 KiB shared memory with 1 KiB reserved per block, 64 K registers given per warp in
    # units of 256
    sm = H200.sm
    for threads, smem, regs in itertools.product(
        (0, 64, 96, 256, 1024), (0, 16384, 100000), (0, 32, 33, 128, 255)
    ):
        want = [32]
        warps = -(-threads // 32)
        if threads:
            want.append(2048 // (warps * 32))
        if smem:
            want.append(228 * 1024 // (smem + 1024))
        if regs and threads:
            want.append(65536 // (warps * (-(-(regs * 32) // 256) * 256)))
        assert resident_ctas(sm, threads, smem, regs) == min(want)
    assert resident_ctas(sm, 1024, 300 * 1024, 0) == 0  # does not fit
    # the granularities bind: 64 threads x 33 registers is 2 warps of 1280 (not 1056)
    # registers, 25 CTAs (31 without the rounding); 76 KiB of shared memory is 2 CTAs with
    # the reserved 1 KiB per CTA (3 without)
    assert resident_ctas(sm, 64, 0, 33) == 25
    assert resident_ctas(sm, 128, 76 * 1024, 0) == 2


def test_flash_decoding_cta_occupancy() -> None:
    # a W1 split CTA: 4 warps, q tile 16 x 128 bf16 (4 KiB) + one K and one V tile of
    # 128 x 128 bf16 (2 x 32 KiB) = 68 KiB, 128 registers per thread
    from coaccel.models.gpu import DecodeShape, plan_split_k

    one = plan_split_k(DecodeShape(batch=1, context=131072), num_splits=16)
    two = plan_split_k(DecodeShape(batch=1, context=131072), num_splits=16, n_stages=2)
    assert one.smem_bytes_per_cta == 68 * 1024 and two.smem_bytes_per_cta == 132 * 1024
    a100 = load_arch("a100_80g").sm
    for sm, smem_kib in ((H200.sm, 228), (a100, 164)):
        by_regs = 65536 // (4 * 128 * 32)  # 4: 128 x 32 is already a multiple of 256
        for plan in (one, two):
            want = min(32, 2048 // 128, smem_kib // (plan.smem_bytes_per_cta // 1024 + 1), by_regs)
            got = resident_ctas(sm, plan.threads_per_cta, plan.smem_bytes_per_cta,
                                plan.regs_per_thread)  # fmt: skip
            assert got == want
    # H200: 3 single-stage CTAs per SM (228 // 69), one double-buffered (228 // 133)
    assert resident_ctas(H200.sm, 128, one.smem_bytes_per_cta, 128) == 3
    assert resident_ctas(H200.sm, 128, two.smem_bytes_per_cta, 128) == 1


def test_waves_and_littles_law() -> None:
    assert wave_sizes(300, 132, 1) == [132, 132, 36]
    assert wave_sizes(264, 132, 2) == [264]
    assert wave_sizes(0, 132, 2) == []
    sm = H200.sm
    lat = 500e-9
    # 64 CTAs on 64 SMs with 16 KiB each in flight: 64 x 16 KiB / 500 ns
    assert math.isclose(mlp_bytes_per_s(sm, 64, 16384, lat), 64 * 16384 / lat)
    # capped per SM at max_inflight_per_sm
    cap = sm.max_inflight_per_sm_kib * 1024
    assert math.isclose(mlp_bytes_per_s(sm, 264, 1 << 20, lat), 132 * cap / lat)


def _t(name: str, stream: int, s: float, mem: float = 0.0, engine: str = "sm", after=()) -> Task:
    return Task(name, stream, engine, s, mem, tuple(after))


def test_prerequisites_from_events() -> None:
    items = [
        ("task", 0, 0),  # 0
        ("record", 0, 10),
        ("task", 1, 0),  # 1: no wait yet
        ("wait", 1, 10),
        ("task", 1, 0),  # 2: waits for 0 and its stream predecessor 1
        ("task", 0, 0),  # 3
        ("sync", 0, 0),
        ("task", 2, 0),  # 4: waits for every stream's last task
    ]
    assert task_prerequisites(items) == [(), (), (0, 1), (0,), (2, 3)]
    # a wait on the kernel that issues an ordinary record
    items = [("task", 0, 0), ("task", 1, 0), ("wait_task", 1, 0), ("task", 1, 0)]
    assert task_prerequisites(items) == [(), (), (0, 1)]
    with pytest.raises(ValueError, match="unknown item kind"):
        task_prerequisites([("bogus", 0, 0)])


def test_schedule_streams_engines_and_bandwidth_sharing() -> None:
    engines = {"sm": 1, "h2d": 1, "d2h": 1}
    bw = 1e12
    # same engine: serial; different engines, no memory contention: overlapped
    s = schedule([_t("a", 0, 1.0), _t("b", 1, 2.0)], mem_bytes_per_s=bw, engines=engines)
    assert s.end == (1.0, 3.0)
    s = schedule(
        [_t("a", 0, 1.0), _t("c", 1, 2.0, engine="h2d")], mem_bytes_per_s=bw, engines=engines
    )
    assert s.end == (1.0, 2.0)
    # two tasks that each need the full bandwidth share it: both take twice as long together
    a = _t("k", 0, 1.0, mem=bw * 1.0)
    c = _t("c", 1, 1.0, mem=bw * 1.0, engine="h2d")
    s = schedule([a, c], mem_bytes_per_s=bw, engines=engines)
    assert s.end == pytest.approx((2.0, 2.0))
    # a half-demand copy beside a full-demand kernel: 1.5x the bandwidth asked, so both run
    # at 2/3 speed and finish their 1 s of work at 1.5 s
    c2 = _t("c", 1, 1.0, mem=bw * 0.5, engine="h2d")
    s = schedule([a, c2], mem_bytes_per_s=bw, engines=engines)
    assert s.end == pytest.approx((1.5, 1.5))
    # prerequisite and launch gap
    t2 = dataclasses.replace(_t("b", 0, 1.0, after=(0,)), gap_seconds=0.25)
    s = schedule([_t("a", 0, 1.0), t2], mem_bytes_per_s=bw, engines=engines)
    assert s.start[1] == pytest.approx(1.25) and s.makespan == pytest.approx(2.25)
    # two copy engines per direction let two copies run at once
    cc = [_t("x", 1, 1.0, engine="h2d"), _t("y", 2, 1.0, engine="h2d")]
    assert schedule(cc, mem_bytes_per_s=bw, engines={"h2d": 2}).makespan == 1.0
    assert schedule(cc, mem_bytes_per_s=bw, engines={"h2d": 1}).makespan == 2.0


def test_a_chain_of_tasks_is_scheduled_as_the_event_loop_does_bit_for_bit() -> None:
    """One stream (each task after the one before) takes a loop without events; its starts and
    ends equal the event loop's exactly, gaps, zero-length tasks and bandwidth-bound ones
    included."""
    from coaccel.sim.common.streams import _events

    rng = np.random.default_rng(7)
    engines = {"sm": 1, "h2d": 2, "d2h": 2}
    for trial in range(300):
        n = int(rng.integers(1, 9))
        tasks = [
            Task(
                name=f"k{i}",
                stream=0,
                engine=str(rng.choice(["sm", "h2d", "d2h"])),
                seconds=float(rng.choice([0.0, rng.uniform(1e-7, 1e-3), rng.uniform(1e-12, 1e-9)])),
                mem_bytes=float(rng.choice([0.0, rng.uniform(1, 1e8)])),
                after=(i - 1,) if i else (),
                gap_seconds=float(rng.choice([0.0, 1e-19, rng.uniform(1e-7, 1e-5)])),
            )
            for i in range(n)
        ]
        bw = float(rng.uniform(1e9, 1e12))
        fast = schedule(tasks, mem_bytes_per_s=bw, engines=engines)
        slow = _events(tasks, bw, engines)
        assert fast.start == slow.start and fast.end == slow.end, trial
