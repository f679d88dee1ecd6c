"""A sectored, set-associative, partitioned cache (a GPU L2), replayed over strided runs.

The cache has ``sets x ways`` lines of ``line_bytes``, each split into sectors of
``sector_bytes`` with their own valid and dirty bits (a read miss fetches only the missing
sector, as NVIDIA's L2 does). Replacement is LRU within a set. Lines are *homed* in one of
``partitions`` partitions; an access from a requester whose own partition is the line's home
is *near*, any other is *far* (the two L2 latency plateaus of A100/H100).

Policies ([OURS], docs/gpu_mem.md): reads allocate the sector on a miss (one DRAM sector read);
writes allocate without a fetch (write-validate: the written sector becomes valid and dirty);
evicting a line writes its dirty sectors back (DRAM sector writes).

Addresses map to sets through :func:`line_set`: ``"modulo"`` takes the line index modulo the
set count, ``"xor"`` folds higher address bits in first, so power-of-two strides spread over
the sets. The home partition is :func:`line_partition`.

The replay (:func:`replay`) walks every record's rows and sectors in issue order in a numba
loop (without materializing the sector stream); it also counts, for the DRAM behind the cache,
the sectors each channel moves and the row misses of an open-row model. :class:`ReferenceCache`
is a plain-Python model of the same cache, record for record equal to :func:`replay` (the tests
compare them on random traces).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt

__all__ = [
    "CacheGeometry",
    "CacheState",
    "ReferenceCache",
    "ReplayCounts",
    "dram_channel",
    "line_partition",
    "line_set",
    "replay",
]


@dataclass(frozen=True)
class CacheGeometry:
    """Shape of a sectored cache and of the DRAM channels behind it.

    Attributes:
        sets: sets (>= 1).
        ways: lines per set (>= 1).
        line_bytes: bytes per line, B.
        sector_bytes: bytes per sector, B (divides ``line_bytes``, at most 32 per line).
        partitions: home partitions (>= 1).
        set_hash: ``"xor"`` or ``"modulo"``.
        dram_channels: channels of the DRAM behind the cache (>= 1).
        dram_interleave_bytes: channel interleave granularity, B.
        dram_row_bytes: open row per channel, B; 0 turns the row model off.
        dram_channel_hash: ``"modulo"``: interleave chunk ``c`` lies in channel ``c %
            channels`` (the plain interleave of :mod:`coaccel.sim.common.offchip`);
            ``"rotate"``: each group of ``channels`` consecutive chunks is rotated by an offset
            hashed from the group index (:func:`dram_channel`), so strided streams spread over
            all channels while a contiguous stream still gives every channel contiguous local
            addresses.
    """

    sets: int
    ways: int
    line_bytes: int = 128
    sector_bytes: int = 32
    partitions: int = 1
    set_hash: Literal["xor", "modulo"] = "xor"
    dram_channels: int = 1
    dram_interleave_bytes: int = 256
    dram_row_bytes: int = 0
    dram_channel_hash: Literal["rotate", "modulo"] = "modulo"

    def __post_init__(self) -> None:
        if self.sets < 1 or self.ways < 1 or self.partitions < 1 or self.dram_channels < 1:
            raise ValueError(f"cache geometry counts must be >= 1: {self}")
        if self.line_bytes % self.sector_bytes or self.line_bytes // self.sector_bytes > 32:
            raise ValueError(
                f"sector_bytes={self.sector_bytes} must divide line_bytes={self.line_bytes} "
                "into at most 32 sectors"
            )
        if self.set_hash not in ("xor", "modulo"):
            raise ValueError(f"set_hash must be 'xor' or 'modulo', got {self.set_hash!r}")
        if self.dram_channel_hash not in ("rotate", "modulo"):
            raise ValueError(
                f"dram_channel_hash must be 'rotate' or 'modulo', got {self.dram_channel_hash!r}"
            )

    @property
    def capacity_bytes(self) -> int:
        """``sets x ways x line_bytes``, B."""
        return self.sets * self.ways * self.line_bytes


def line_set(line: int, sets: int, xor: bool) -> int:
    """Set of a line index (plain Python; the numba replay inlines the same arithmetic).

    Args:
        line: line index (address // line_bytes), >= 0.
        sets: sets.
        xor: fold higher bits in (``"xor"`` hash) or not (``"modulo"``).

    Returns:
        The set, in ``0 .. sets - 1``.
    """
    h = line ^ (line >> 7) ^ (line >> 17) if xor else line
    return h % sets


def dram_channel(g: CacheGeometry, addr: int) -> tuple[int, int]:
    """DRAM channel and channel-local address of a byte address (plain Python).

    Args:
        g: the geometry.
        addr: byte address, >= 0.

    Returns:
        ``(channel, local address)``; the local address is ``(chunk // channels) x
        interleave_bytes + addr % interleave_bytes`` under either hash.
    """
    il, n = g.dram_interleave_bytes, g.dram_channels
    chunk = addr // il
    grp = chunk // n
    if g.dram_channel_hash == "rotate":
        ch = (chunk + ((grp ^ (grp >> 4) ^ (grp >> 9)) * 13) % n) % n
    else:
        ch = chunk % n
    return ch, grp * il + addr % il


def line_partition(line: int, partitions: int) -> int:
    """Home partition of a line index: ``(line ^ (line >> 3) ^ (line >> 9)) % partitions``."""
    return (line ^ (line >> 3) ^ (line >> 9)) % partitions


@dataclass
class CacheState:
    """Contents of a cache between replays (mutable; one per simulation).

    Attributes:
        tags: int64 (sets, ways): line index held, -1 for empty.
        stamps: int64 (sets, ways): last use (LRU).
        valid: uint32 (sets, ways): valid-sector bit mask.
        dirty: uint32 (sets, ways): dirty-sector bit mask.
        clock: int64 (1,): use counter.
        open_rows: int64 (channels,): open DRAM row per channel, -1 for none.
        last_local: int64 (channels,): channel-local sector index of each channel's last
            DRAM transfer (-2 for none).
    """

    tags: npt.NDArray[np.int64]
    stamps: npt.NDArray[np.int64]
    valid: npt.NDArray[np.uint32]
    dirty: npt.NDArray[np.uint32]
    clock: npt.NDArray[np.int64]
    open_rows: npt.NDArray[np.int64]
    last_local: npt.NDArray[np.int64]

    @classmethod
    def empty(cls, g: CacheGeometry) -> CacheState:
        """An empty (cold) cache of geometry ``g``."""
        return cls(
            tags=np.full((g.sets, g.ways), -1, dtype=np.int64),
            stamps=np.zeros((g.sets, g.ways), dtype=np.int64),
            valid=np.zeros((g.sets, g.ways), dtype=np.uint32),
            dirty=np.zeros((g.sets, g.ways), dtype=np.uint32),
            clock=np.zeros(1, dtype=np.int64),
            open_rows=np.full(g.dram_channels, -1, dtype=np.int64),
            last_local=np.full(g.dram_channels, -2, dtype=np.int64),
        )


@dataclass(frozen=True, eq=False)
class ReplayCounts:
    """What a replay counted, per record and per (group, DRAM channel).

    Attributes:
        requests: int64 (N,): sector requests (distinct sectors of each record).
        hits: int64 (N,): requests that hit (read hits and write hits).
        near_hits: int64 (N,): hits in the requester's own partition.
        misses: int64 (N,): requests that missed (read misses fetch a sector from DRAM).
        writebacks: int64 (N,): dirty sectors written back by evictions the record caused.
        channel_sectors: int64 (groups, channels): DRAM sectors (fetches + write-backs) per
            channel, for the group (e.g. kernel) of the record that caused them.
        row_misses: int64 (groups, channels): DRAM sector transfers that opened another row
            (all zero when the row model is off).
        run_starts: int64 (groups, channels): DRAM sector transfers that did not continue
            their channel's previous transfer (channel-local address + 1 sector): the number
            of contiguous runs each channel served, so ``channel_sectors / run_starts`` is the
            mean run length the DRAM efficiency curve is read at.
    """

    requests: npt.NDArray[np.int64]
    hits: npt.NDArray[np.int64]
    near_hits: npt.NDArray[np.int64]
    misses: npt.NDArray[np.int64]
    writebacks: npt.NDArray[np.int64]
    channel_sectors: npt.NDArray[np.int64]
    row_misses: npt.NDArray[np.int64]
    run_starts: npt.NDArray[np.int64]


@numba.njit(cache=True, inline="always")
def _rotation(group: int, n_ch: int) -> int:  # pragma: no cover - compiled; see dram_channel
    return ((group ^ (group >> 4) ^ (group >> 9)) * 13) % n_ch


@numba.njit(cache=True, inline="always")
def _dram_touch(
    addr, sector_bytes, grp, n_ch, il, rot, row_bytes, open_rows, last_local, ch_sec, row_miss, runs
):  # pragma: no cover
    chunk = addr // il
    grp_c = chunk // n_ch
    ch = (chunk + _rotation(grp_c, n_ch)) % n_ch if rot else chunk % n_ch
    ch_sec[grp, ch] += 1
    local = grp_c * il + addr % il
    ls = local // sector_bytes
    if ls != last_local[ch] + 1:
        runs[grp, ch] += 1
    last_local[ch] = ls
    if row_bytes > 0:
        row = local // row_bytes
        if open_rows[ch] != row:
            row_miss[grp, ch] += 1
            open_rows[ch] = row


@numba.njit(cache=True, inline="always")
def _dram_line(
    line, mask, spl, sector_bytes, line_bytes, grp, n_ch, il, rot, row_bytes, open_rows, last_local,
    ch_sec, row_miss, runs,
):  # fmt: skip  # pragma: no cover
    # the sectors of ``mask`` in one line, in increasing order, as _dram_touch would count them
    # one by one; valid when a line lies inside one interleave chunk and one DRAM row
    addr0 = line * line_bytes
    chunk = addr0 // il
    grp_c = chunk // n_ch
    ch = (chunk + _rotation(grp_c, n_ch)) % n_ch if rot else chunk % n_ch
    local0 = grp_c * il + addr0 % il
    ls0 = local0 // sector_bytes
    prev = last_local[ch]
    cnt = 0
    for k in range(spl):
        if mask & (np.uint32(1) << np.uint32(k)):
            if ls0 + k != prev + 1:
                runs[grp, ch] += 1
            prev = ls0 + k
            cnt += 1
    last_local[ch] = prev
    ch_sec[grp, ch] += cnt
    if row_bytes > 0 and cnt > 0:
        row = local0 // row_bytes
        if open_rows[ch] != row:
            row_miss[grp, ch] += 1
            open_rows[ch] = row
    return cnt


@numba.njit(cache=True)
def _replay(
    starts, nbytes, strides, counts, rw, requester, group,
    tags, stamps, valid, dirty, clock, open_rows, last_local,
    sets, ways, line_bytes, sector_bytes, partitions, xor,
    n_ch, il, rot, row_bytes,
    req_o, hit_o, near_o, miss_o, wb_o, ch_sec, row_miss, runs,
):  # fmt: skip  # pragma: no cover - compiled; equal to ReferenceCache (tests)
    spl = line_bytes // sector_bytes
    by_line = il % line_bytes == 0 and (row_bytes == 0 or row_bytes % line_bytes == 0)
    t = clock[0]
    for r in range(starts.shape[0]):
        n = nbytes[r]
        c = counts[r]
        if n <= 0 or c <= 0:
            continue
        is_w = rw[r] == 1
        my_part = requester[r] % partitions
        grp = group[r]
        prev_last = -1
        cur_line = -1
        cur_set = 0
        cur_way = 0
        for i in range(c):
            s0 = starts[r] + i * strides[r]
            first = s0 // sector_bytes
            last = (s0 + n - 1) // sector_bytes
            if first <= prev_last:
                first = prev_last + 1
            # line by line: the row's sectors of one line share a lookup and an LRU update
            sec = first
            while sec <= last:
                line = sec // spl
                lo = sec - line * spl
                hi = min(last - line * spl, spl - 1)
                nsec = hi - lo + 1
                mask = ((np.uint32(1) << np.uint32(nsec)) - np.uint32(1)) << np.uint32(lo)
                req_o[r] += nsec
                t += nsec
                if line != cur_line:
                    h = line ^ (line >> 7) ^ (line >> 17) if xor else line
                    st = h % sets
                    # one pass: the line's way, else the LRU way (empty ways: stamp 0)
                    way = -1
                    victim = 0
                    best = stamps[st, 0]
                    for w in range(ways):
                        if tags[st, w] == line:
                            way = w
                            break
                        if stamps[st, w] < best:
                            best = stamps[st, w]
                            victim = w
                    if way < 0:
                        old = tags[st, victim]
                        d = dirty[st, victim]
                        if old >= 0 and d != 0:
                            if by_line:
                                wb_o[r] += _dram_line(old, d, spl, sector_bytes, line_bytes, grp,
                                                      n_ch, il, rot, row_bytes, open_rows,
                                                      last_local, ch_sec, row_miss,
                                                      runs)  # fmt: skip
                            else:
                                for k in range(spl):
                                    if d & (np.uint32(1) << np.uint32(k)):
                                        wb_o[r] += 1
                                        _dram_touch((old * spl + k) * sector_bytes, sector_bytes,
                                                    grp, n_ch, il, rot, row_bytes, open_rows,
                                                    last_local, ch_sec, row_miss, runs)  # fmt: skip
                        tags[st, victim] = line
                        valid[st, victim] = 0
                        dirty[st, victim] = 0
                        way = victim
                    cur_line = line
                    cur_set = st
                    cur_way = way
                stamps[cur_set, cur_way] = t
                v = valid[cur_set, cur_way]
                hit_mask = v & mask
                nh = 0
                if hit_mask:
                    x = hit_mask
                    while x:
                        x &= x - np.uint32(1)
                        nh += 1
                    hit_o[r] += nh
                    part = (line ^ (line >> 3) ^ (line >> 9)) % partitions
                    if part == my_part:
                        near_o[r] += nh
                miss_mask = mask & ~v
                if miss_mask:
                    valid[cur_set, cur_way] = v | miss_mask
                    miss_o[r] += nsec - nh
                    if not is_w:
                        if by_line:
                            _dram_line(line, miss_mask, spl, sector_bytes, line_bytes, grp, n_ch,
                                       il, rot, row_bytes, open_rows, last_local, ch_sec, row_miss,
                                       runs)  # fmt: skip
                        else:
                            for k in range(lo, hi + 1):
                                if miss_mask & (np.uint32(1) << np.uint32(k)):
                                    _dram_touch((line * spl + k) * sector_bytes, sector_bytes,
                                                grp, n_ch, il, rot, row_bytes, open_rows,
                                                last_local, ch_sec, row_miss, runs)  # fmt: skip
                if is_w:
                    dirty[cur_set, cur_way] |= mask
                sec = line * spl + hi + 1
            prev_last = last
    clock[0] = t


def _arr(a: npt.ArrayLike, n: int, name: str) -> npt.NDArray[np.int64]:
    out = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=np.int64), (n,)))
    if out.size and out.min() < 0:
        raise ValueError(f"{name} must be >= 0")
    return out


def replay(
    g: CacheGeometry,
    state: CacheState,
    starts: npt.ArrayLike,
    nbytes: npt.ArrayLike,
    strides: npt.ArrayLike,
    counts: npt.ArrayLike,
    rw: npt.ArrayLike,
    requester: npt.ArrayLike = 0,
    group: npt.ArrayLike = 0,
    n_groups: int = 1,
) -> ReplayCounts:
    """Replay strided runs through the cache, in order, updating ``state``.

    Args:
        g: the geometry.
        state: the cache contents (updated in place; start with :meth:`CacheState.empty`).
        starts: record start addresses, B, shape (N,).
        nbytes: bytes per row, shape (N,).
        strides: bytes between row starts, shape (N,).
        counts: rows, shape (N,).
        rw: 0 read, 1 write, shape (N,) (or a scalar).
        requester: requester id of each record (its SM); its partition is
            ``requester % partitions``.
        group: group of each record (its kernel) in ``0 .. n_groups - 1``, for the DRAM
            channel counters.
        n_groups: groups.

    Returns:
        :class:`ReplayCounts`.
    """
    s = np.ascontiguousarray(np.asarray(starts, dtype=np.int64))
    n = s.shape[0]
    nb, st, c = _arr(nbytes, n, "nbytes"), _arr(strides, n, "strides"), _arr(counts, n, "counts")
    rwa, req, grp = _arr(rw, n, "rw"), _arr(requester, n, "requester"), _arr(group, n, "group")
    if n and (s.min() < 0 or grp.max() >= n_groups):
        raise ValueError("starts must be >= 0 and groups < n_groups")
    z = [np.zeros(n, dtype=np.int64) for _ in range(5)]
    ch = np.zeros((n_groups, g.dram_channels), dtype=np.int64)
    rm = np.zeros((n_groups, g.dram_channels), dtype=np.int64)
    runs = np.zeros((n_groups, g.dram_channels), dtype=np.int64)
    run: Any = _replay  # numba dispatcher (its signature is not visible to type checkers)
    run(
        s, nb, st, c, rwa, req, grp,
        state.tags, state.stamps, state.valid, state.dirty, state.clock, state.open_rows,
        state.last_local,
        g.sets, g.ways, g.line_bytes, g.sector_bytes, g.partitions, g.set_hash == "xor",
        g.dram_channels, g.dram_interleave_bytes, g.dram_channel_hash == "rotate",
        g.dram_row_bytes,
        *z, ch, rm, runs,
    )  # fmt: skip
    return ReplayCounts(
        requests=z[0], hits=z[1], near_hits=z[2], misses=z[3], writebacks=z[4],
        channel_sectors=ch, row_misses=rm, run_starts=runs,
    )  # fmt: skip


class ReferenceCache:
    """The cache of :func:`replay` in plain Python, for checking it (small cases only).

    Args:
        g: the geometry.
        n_groups: groups of the DRAM channel counters.
    """

    def __init__(self, g: CacheGeometry, n_groups: int = 1) -> None:
        self.g = g
        self.sets: list[OrderedDict[int, list[int]]] = [OrderedDict() for _ in range(g.sets)]
        self.open_rows = [-1] * g.dram_channels
        self.last_local = [-2] * g.dram_channels
        self.channel_sectors = [[0] * g.dram_channels for _ in range(n_groups)]
        self.row_misses = [[0] * g.dram_channels for _ in range(n_groups)]
        self.run_starts = [[0] * g.dram_channels for _ in range(n_groups)]

    def _dram(self, addr: int, grp: int) -> None:
        g = self.g
        ch, local = dram_channel(g, addr)
        self.channel_sectors[grp][ch] += 1
        if local // g.sector_bytes != self.last_local[ch] + 1:
            self.run_starts[grp][ch] += 1
        self.last_local[ch] = local // g.sector_bytes
        if g.dram_row_bytes:
            row = local // g.dram_row_bytes
            if self.open_rows[ch] != row:
                self.row_misses[grp][ch] += 1
                self.open_rows[ch] = row

    def access(
        self, start: int, nbytes: int, stride: int, count: int, rw: int, requester: int = 0,
        group: int = 0,
    ) -> tuple[int, int, int, int, int]:  # fmt: skip
        """One record: returns ``(requests, hits, near_hits, misses, writebacks)``."""
        g = self.g
        spl = g.line_bytes // g.sector_bytes
        sectors: list[int] = []
        for i in range(count if nbytes > 0 else 0):
            s0 = start + i * stride
            for sec in range(s0 // g.sector_bytes, (s0 + nbytes - 1) // g.sector_bytes + 1):
                if not sectors or sec > sectors[-1]:
                    sectors.append(sec)
        req = hits = near = misses = wb = 0
        for sec in sectors:
            req += 1
            line, k = divmod(sec, spl)
            ways = self.sets[line_set(line, g.sets, g.set_hash == "xor")]
            if line in ways:
                ways.move_to_end(line)
            else:
                if len(ways) == g.ways:
                    old, (_, d) = ways.popitem(last=False)
                    for j in range(spl):
                        if d >> j & 1:
                            wb += 1
                            self._dram((old * spl + j) * g.sector_bytes, group)
                ways[line] = [0, 0]
            entry = ways[line]
            if entry[0] >> k & 1:
                hits += 1
                if line_partition(line, g.partitions) == requester % g.partitions:
                    near += 1
            else:
                misses += 1
                entry[0] |= 1 << k
                if rw == 0:
                    self._dram(sec * g.sector_bytes, group)
            if rw == 1:
                entry[1] |= 1 << k
        return req, hits, near, misses, wb
