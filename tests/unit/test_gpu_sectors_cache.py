"""Sector coalescing and the sectored L2: closed forms and brute force.

The numba replay must equal the plain-Python :class:`ReferenceCache` exactly (every counter of
every record), and sector counts must equal a brute-force set of touched sectors.
"""

from __future__ import annotations

import numpy as np
import pytest

from coaccel.sim.common.cache import CacheGeometry, CacheState, ReferenceCache, replay
from coaccel.sim.common.sectors import run_bytes, sector_counts


def _brute_sectors(s: int, n: int, st: int, c: int, S: int = 32) -> int:
    secs: set[int] = set()
    for i in range(c if n > 0 else 0):
        a = s + i * st
        secs.update(range(a // S, (a + n - 1) // S + 1))
    return len(secs)


def test_sector_counts_match_brute_force() -> None:
    rng = np.random.default_rng(1)
    n = 3000
    s = rng.integers(0, 5000, n)
    nb = rng.integers(0, 300, n)
    # strides: multiples of 32 (closed form) and arbitrary (row expansion), incl. overlaps
    st = np.where(rng.random(n) < 0.5, rng.integers(0, 12, n) * 32, rng.integers(0, 400, n))
    c = rng.integers(0, 9, n)
    got = sector_counts(s, nb, st, c)
    want = [_brute_sectors(*map(int, x)) for x in zip(s, nb, st, c, strict=True)]
    assert got.tolist() == want


def test_sector_counts_closed_forms() -> None:
    # a 256-B K row strided by 2 KiB (token-major, 8 KV heads): 8 sectors per row
    assert sector_counts([0], [256], [2048], [128]).tolist() == [128 * 8]
    # one FFD 2-bit code row per token-head: exactly one sector, stride 256 B
    assert sector_counts([0], [32], [256], [128]).tolist() == [128]
    # misaligned 32-B rows straddle two sectors each
    assert sector_counts([16], [32], [256], [10]).tolist() == [20]
    # 8-B rows packed in one sector share it
    assert sector_counts([0], [8], [8], [4]).tolist() == [1]
    assert run_bytes([256, 256], [2048, 256], [4, 4]).tolist() == [256, 1024]


@pytest.mark.parametrize("trial", range(8))
def test_replay_equals_reference(trial: int) -> None:
    rng = np.random.default_rng(100 + trial)
    g = CacheGeometry(
        sets=int(rng.integers(1, 9)),
        ways=int(rng.integers(1, 5)),
        partitions=int(rng.integers(1, 4)),
        set_hash=("xor", "modulo")[trial % 2],
        dram_channels=int(rng.integers(1, 6)),
        dram_interleave_bytes=(64, 256)[trial % 2],
        dram_row_bytes=(0, 512, 2048)[trial % 3],
        dram_channel_hash=("rotate", "modulo")[trial // 4],
    )
    n = 300
    starts = rng.integers(0, 16384, n)
    nb = rng.integers(0, 300, n)
    st = rng.integers(0, 400, n)
    c = rng.integers(0, 6, n)
    rw = rng.integers(0, 2, n)
    req = rng.integers(0, 8, n)
    grp = rng.integers(0, 3, n)
    out = replay(g, CacheState.empty(g), starts, nb, st, c, rw, req, grp, 3)
    ref = ReferenceCache(g, 3)
    want = np.array(
        [ref.access(*map(int, x)) for x in zip(starts, nb, st, c, rw, req, grp, strict=True)]
    )
    got = np.stack([out.requests, out.hits, out.near_hits, out.misses, out.writebacks], 1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(out.channel_sectors, ref.channel_sectors)
    np.testing.assert_array_equal(out.row_misses, ref.row_misses)
    np.testing.assert_array_equal(out.run_starts, ref.run_starts)
    np.testing.assert_array_equal(out.requests, sector_counts(starts, nb, st, c))


def test_capacity_closed_forms() -> None:
    g = CacheGeometry(sets=64, ways=4, partitions=1, set_hash="modulo")
    lines = g.capacity_bytes // g.line_bytes
    # a working set that fits: the second sweep hits every sector
    s = CacheState.empty(g)
    ws = g.capacity_bytes
    first = replay(g, s, [0], [ws], [ws], [1], [0])
    second = replay(g, s, [0], [ws], [ws], [1], [0])
    assert first.misses.tolist() == [ws // 32] and second.hits.tolist() == [ws // 32]
    # one line more than a set holds, swept cyclically under LRU: never a hit
    s = CacheState.empty(g)
    stride = g.sets * g.line_bytes  # all in set 0
    for _ in range(3):
        out = replay(g, s, [0], [128], [stride], [g.ways + 1], [0])
        assert out.hits.tolist() == [0]
    # write-validate: writes fetch nothing; evicting them writes every dirty sector back
    s = CacheState.empty(g)
    w = replay(g, s, [0], [ws], [ws], [1], [1])
    assert w.channel_sectors.sum() == 0
    ev = replay(g, s, [ws], [ws], [ws], [1], [0])
    assert ev.writebacks.tolist() == [ws // 32] and lines == ws // 128


def test_dram_runs_follow_channel_interleave() -> None:
    # a contiguous stream is one run per channel; a 256-B row every 2 KiB over 8 channels
    # of 256 B lands every row in the same channel, contiguous in its local space
    g = CacheGeometry(sets=1024, ways=16, dram_channels=8, dram_interleave_bytes=256)
    out = replay(g, CacheState.empty(g), [0], [1 << 20], [1 << 20], [1], [0])
    assert out.run_starts.sum() == 8
    # rotated channel groups: still one run per channel for a contiguous stream, and a
    # 256-B row every 2 KiB now reaches every channel, not one in eight
    gr = CacheGeometry(sets=1024, ways=16, dram_channels=8, dram_channel_hash="rotate")
    out = replay(gr, CacheState.empty(gr), [0], [1 << 20], [1 << 20], [1], [0])
    assert out.run_starts.sum() == 8 and np.all(out.channel_sectors == (1 << 20) // 32 // 8)
    out = replay(gr, CacheState.empty(gr), [0], [256], [2048], [4096], [0])
    assert np.count_nonzero(out.channel_sectors) == 8
    g4 = CacheGeometry(sets=1024, ways=16, dram_channels=4, dram_interleave_bytes=256)
    out = replay(g4, CacheState.empty(g4), [0], [256], [2048], [64], [0])
    # rows at chunk 8k go to channel 0, local chunks 2k: never adjacent -> one run per row
    assert out.channel_sectors[0, 0] == 64 * 8 and out.run_starts[0, 0] == 64


def test_tensor_map_places_records() -> None:
    from coaccel.sim.common.sectors import absolute_starts
    from coaccel.spine.trace import TraceBuilder

    b = TraceBuilder(producer="test", workload={}, config_digest=None, seed=None)
    b.allocate("A", space="HBM", nbytes=4096)
    base_b = b.allocate("B", space="HBM", nbytes=4096, base_addr=1 << 20)
    b.memory(space="HBM", rw="r", tensor="A", addr=64, nbytes=32)
    b.memory(space="HBM", rw="r", tensor="B", addr=64, nbytes=32)
    b.memory(space="SMEM", rw="w", tensor="B", addr=64, nbytes=32)  # on-chip copy: no base
    b.memory(space="HBM", rw="r", tensor="C", addr=96, nbytes=32)  # not placed
    assert absolute_starts(b.build()).tolist() == [64, base_b + 64, 64, 96]
