"""What each kernel of a GPU trace moves, in both fidelities.

:func:`kernel_traffic` reads a trace (docs/trace.md: kernels with launch geometry, strided
memory runs, a tensor map) into one :class:`KernelTraffic` per kernel:

* **cycle** fidelity replays every device-memory sector through the sectored L2
  (:mod:`coaccel.sim.common.cache`, numba) with the DRAM channels and open rows behind it, and
  takes each kernel's dependent-load chain (pointer chasing) from the per-record hit levels;
* **analytical** fidelity counts sectors by the closed form
  (:func:`coaccel.sim.common.sectors.sector_counts`) and decides hits per tensor: a tensor the
  effective L2 holds misses only on its first touch of each sector, a larger one always misses.

Near or far, in both fidelities: the L2 partition next to an SM keeps copies of the lines that
SM reads while the data a kernel touches fits one partition (nominal capacity / partitions), so
every hit of such a kernel is *near*; a kernel whose device tensors exceed one partition has
its hits served by the far partition. This is the shape of the measured pointer-chase curves
([S12] cuda-latency/a100_80.txt: the near plateau up to ~18-20 MB of 40, then the far plateau
up to the L2 size, not an even mix of the two), [OURS] as a rule.

Capacity: SMs on both sides reading the same lines keep a copy in each partition, so a kernel
whose CTAs run on many SMs finds only the effective capacity (``l2.effective_capacity_mib``,
the knee of the measured streaming-bandwidth curve: 28 of 40 MiB on the A100); a trace whose
kernels each read from one CTA (one SM, as a pointer chase) replicates nothing and finds the
nominal capacity: near hits while its footprint fits one partition, far hits up to the whole
L2, DRAM beyond ([S12] cuda-latency/a100_80.txt: the far plateau holds to ~40 MB while the
streaming bandwidth falls past ~28 MB), [OURS] as a rule.

Replayed steps (warm L2): a trace whose workload metadata sets ``replayed: true``
(:data:`REPLAYED_KEY`) is one of many back-to-back replays of the same step with nothing else
touching the L2 in between (a CUDA graph replayed in a timing loop, as the decode-attention
collectors of [AIC-REPO] time one op). Its L2 is in the steady state the previous replay left:
the cycle fidelity replays the trace once to warm the cache and counts the second replay; the
analytical fidelity lets every device access hit when the device tensors the trace touches fit
the effective L2 together (their footprints as in the first-touch rule), and otherwise applies
the first-touch rule unchanged (a streamed working set larger than the L2 evicts itself before
the next replay). Without the key (or with ``false``) the L2 starts cold, as before.

Host-memory records of compute kernels are zero-copy loads over the host link; kernels named
``memcpy_h2d*`` / ``memcpy_d2h*`` are copy-engine transfers of their ``HOST`` bytes (pageable
when the name contains ``pageable``, pinned otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt

from coaccel.spine.config import FrozenMap
from coaccel.spine.trace import Trace

from ..common import offchip
from ..common.cache import CacheGeometry, CacheState, replay
from ..common.program import distinct_columns
from ..common.sectors import absolute_starts, run_bytes, sector_counts
from .config import GpuArchConfig

__all__ = [
    "DEVICE_SPACES",
    "HOST_SPACES",
    "REPLAYED_KEY",
    "KernelTraffic",
    "cache_geometry",
    "kernel_traffic",
    "replayed",
]

DEVICE_SPACES = ("HBM", "DRAM", "L2", "GMEM")
"""Memory spaces that are device memory behind the L2."""
HOST_SPACES = ("HOST",)
"""Memory spaces in host memory (reached over the host link)."""

REPLAYED_KEY = "replayed"
"""Workload-metadata key of a trace that is one of back-to-back replays of the same step (the L2
starts warm; module docstring)."""

TENSOR_OPS = ("gemm", "dot", "mma")
"""Compute ops that run on the tensor cores; others run on the FP32 lanes."""

KernelKind = Literal["compute", "h2d", "d2h"]


@dataclass(frozen=True)
class KernelTraffic:
    """One kernel's launch geometry and traffic.

    Attributes:
        kernel: kernel id in the trace.
        name: kernel name.
        stream: stream id.
        seq: seq of its ``kernel_begin`` (issue order).
        kind: ``"compute"``, ``"h2d"`` or ``"d2h"`` (copy-engine transfer).
        pinned: host memory of a copy is pinned (False: pageable).
        ctas: grid size, CTAs.
        threads_per_cta: threads per CTA (0: unknown).
        smem_bytes_per_cta: shared memory per CTA, B (0: unknown).
        regs_per_thread: registers per thread (0: unknown).
        sector_requests: device-memory sector transactions, sector.
        l2_hits: sector requests that hit in L2, sector.
        l2_near_hits: hits in the requesting SM's own partition, sector.
        l2_misses: sector requests that missed, sector.
        dram_read_bytes: device-memory bytes read (sector fills), B.
        dram_write_bytes: device-memory bytes written (write-backs; copies' device side), B.
        dram_seconds: time the DRAM needs for this traffic at its efficiency curve, channel
            balance and open rows, alone, s.
        host_bytes: bytes over the host link (zero-copy loads or the copy), B.
        tensor_flop: tensor-core FLOP.
        fp32_flop: FP32 FLOP.
        tile_bytes: mean bytes of one device read record (a CTA's tile), B.
        chain_seconds: longest chain of dependent loads (each at its level's latency), s.
        l1_hits: of the L2 hits, those a repeated load of a CTA finds in its SM's L1, sector.
        by_tensor: device-memory bytes by tensor name, B.
    """

    kernel: int
    name: str
    stream: int
    seq: int
    kind: KernelKind
    pinned: bool
    ctas: int
    threads_per_cta: int
    smem_bytes_per_cta: int
    regs_per_thread: int
    sector_requests: int
    l2_hits: int
    l2_near_hits: int
    l2_misses: int
    dram_read_bytes: int
    dram_write_bytes: int
    dram_seconds: float
    host_bytes: int
    tensor_flop: float
    fp32_flop: float
    tile_bytes: float
    chain_seconds: float
    l1_hits: int = 0
    by_tensor: Mapping[str, int] = field(default_factory=FrozenMap)


def cache_geometry(arch: GpuArchConfig, *, replicated: bool = True) -> CacheGeometry:
    """The L2 and DRAM channels of a GPU as a :class:`CacheGeometry`.

    Args:
        arch: the GPU.
        replicated: readers on both sides of a partitioned L2 (the L2 holds the effective
            capacity); False: one SM reads everything (the nominal capacity; module
            docstring).
    """
    l2 = arch.l2
    sets = l2.sets
    if not replicated:
        sets = max(1, int(l2.capacity_mib * 2**20) // (l2.line_bytes * l2.ways))
    return CacheGeometry(
        sets=sets,
        ways=l2.ways,
        line_bytes=l2.line_bytes,
        sector_bytes=l2.sector_bytes,
        partitions=l2.partitions,
        set_hash=l2.set_hash,
        dram_channels=arch.dram.channels,
        dram_interleave_bytes=arch.dram.interleave_bytes,
        dram_row_bytes=arch.dram.row_buffer_bytes or 0,
        dram_channel_hash=l2.dram_channel_hash,
    )


@numba.njit(cache=True)
def _chains(dep_pos, lat, kidx, n_k):  # pragma: no cover - compiled
    finish = np.zeros(lat.shape[0])
    out = np.zeros(n_k)
    for r in range(lat.shape[0]):
        d = dep_pos[r]
        f = lat[r]
        if d >= 0 and kidx[d] == kidx[r]:
            f += finish[d]
        finish[r] = f
        if f > out[kidx[r]]:
            out[kidx[r]] = f
    return out


def _codes(trace: Trace, table: str, names: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    have = trace.table(table)
    col = trace.memory[table]
    codes = [have.index(n) for n in names if n in have]
    return np.isin(col, codes) if codes else np.zeros(col.shape, dtype=np.bool_)


def replayed(trace: Trace) -> bool:
    """Is the trace one of back-to-back replays of the same step (workload metadata
    :data:`REPLAYED_KEY` true; module docstring)?"""
    wl = trace.meta.get("workload", {})
    return isinstance(wl, Mapping) and wl.get(REPLAYED_KEY) is True


def _analytical_hits(
    trace: Trace,
    arch: GpuArchConfig,
    dev: npt.NDArray[np.bool_],
    req: npt.NDArray[np.int64],
    *,
    warm: bool = False,
    cap_mib: float | None = None,
) -> npt.NDArray[np.int64]:
    """Sector hits per record of the analytical rule (first touch misses in fitting tensors;
    with ``warm``, every access hits when all touched tensors fit the L2 together); the L2
    holds ``cap_mib`` (default: its effective capacity)."""
    mem = trace.memory
    hits = np.zeros(mem.size, dtype=np.int64)
    cap = (arch.l2.effective_capacity_mib if cap_mib is None else cap_mib) * 2**20
    sb = arch.l2.sector_bytes
    names = trace.table("tensor")
    tensors = trace.meta.get("tensors", {})
    idx = np.flatnonzero(dev)
    if not idx.size:
        return hits
    tcode = mem["tensor"][idx]
    groups = []
    for code in np.unique(tcode):
        rows = idx[tcode == code]
        r = req[rows]
        name = names[code]
        # footprint: the sectors of its distinct records (a re-read record adds nothing),
        # at most the tensor's allocation
        first, _ = distinct_columns(
            [mem[f][rows].astype(np.int64) for f in ("addr", "nbytes", "stride", "count")]
        )
        foot = int(r[first].sum())
        if name in tensors:
            foot = min(foot, -(-int(tensors[name]["nbytes"]) // sb))
        groups.append((rows, r, foot))
    if warm and sum(foot for _, _, foot in groups) * sb <= cap:
        hits[idx] = req[idx]
        return hits
    for rows, r, foot in groups:
        if foot * sb > cap:
            continue
        before = np.cumsum(r) - r
        new = np.clip(foot - before, 0, r)
        hits[rows] = r - new
    return hits


DENSE_FRACTION = 0.9
"""A (kernel, tensor) group whose records' sectors cover at least this share of their address
span is streamed as one contiguous run (analytical mode)."""


def _stream_runs(
    mem: np.ndarray,
    dev: npt.NDArray[np.bool_],
    kidx: npt.NDArray[np.int64],
    sector_bytes_rec: npt.NDArray[np.int64],
    runs: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Run length per record for the DRAM efficiency curve (analytical mode)."""
    out = runs.copy()
    idx = np.flatnonzero(dev & (sector_bytes_rec > 0))
    if not idx.size:
        return out
    key = kidx[idx] * (int(mem["tensor"].max()) + 1) + mem["tensor"][idx]
    u, inv = np.unique(key, return_inverse=True)
    ends = starts[idx] + (mem["count"][idx] - 1) * mem["stride"][idx] + mem["nbytes"][idx]
    lo = np.full(u.size, np.iinfo(np.int64).max)
    hi = np.zeros(u.size, dtype=np.int64)
    np.minimum.at(lo, inv, starts[idx])
    np.maximum.at(hi, inv, ends)
    covered = np.bincount(inv, weights=sector_bytes_rec[idx], minlength=u.size)
    span = np.maximum(hi - lo, 1)
    dense = covered >= DENSE_FRACTION * span
    out[idx] = np.where(dense[inv], span[inv], runs[idx])
    return out


def _single_reader(trace: Trace, rec: _Records) -> bool:
    """Does every kernel read device memory from one CTA only (one SM: a pointer chase)?
    Module docstring: nothing is then replicated across the L2 partitions."""
    sel = np.flatnonzero(rec.dev)
    if not sel.size:
        return False
    pairs, _ = distinct_columns([rec.kidx[sel], trace.memory["cta"][sel].astype(np.int64)])
    return pairs.size == np.unique(rec.kidx[sel]).size


def _fits_one_partition(
    trace: Trace,
    arch: GpuArchConfig,
    mem: np.ndarray,
    dev: npt.NDArray[np.bool_],
    kidx: npt.NDArray[np.int64],
    n_k: int,
) -> npt.NDArray[np.bool_]:
    """Per kernel: do the device tensors it touches (their sizes in the tensor map; a tensor
    not in the map counts its records' bytes) fit one L2 partition (nominal capacity /
    partitions)? Module docstring: such a kernel's hits are all near."""
    out = np.zeros(n_k, dtype=np.bool_)
    idx = np.flatnonzero(dev)
    if not idx.size:
        return out
    names = trace.table("tensor")
    tmap = trace.meta.get("tensors", {})
    rec_bytes = mem["nbytes"].astype(np.int64) * np.maximum(mem["count"].astype(np.int64), 1)
    foot = np.zeros(n_k)
    cols = np.stack([kidx[idx], mem["tensor"][idx].astype(np.int64)])
    pairs = cols[:, distinct_columns(list(cols))[0]]  # in order, as np.unique(axis=1)
    for k, t in pairs.T:
        name = names[int(t)]
        if name in tmap:
            foot[k] += int(tmap[name]["nbytes"])
        else:
            sel = idx[(kidx[idx] == k) & (mem["tensor"][idx] == t)]
            foot[k] += float(rec_bytes[sel].sum())
    part = arch.l2.capacity_mib * 2**20 / arch.l2.partitions
    out[:] = foot <= part
    return out


def _cta_fits(
    mem: np.ndarray,
    dev: npt.NDArray[np.bool_],
    kidx: npt.NDArray[np.int64],
    sector_bytes_rec: npt.NDArray[np.int64],
    capacity_bytes: float,
) -> npt.NDArray[np.bool_]:
    """Per record: is it a repeat of an earlier record of its (kernel, CTA), and do that CTA's
    distinct records cover at most ``capacity_bytes`` (``sector_bytes_rec``: each record's
    footprint, B), so that the repeat finds its data in L1?"""
    out = np.zeros(mem.size, dtype=np.bool_)
    idx = np.flatnonzero(dev)
    if not idx.size:
        return out
    cols = [kidx[idx], mem["cta"][idx].astype(np.int64)]
    cols += [mem[f][idx].astype(np.int64) for f in ("addr", "tensor", "nbytes", "stride", "count")]
    first, _ = distinct_columns(cols)
    gfirst, inv = distinct_columns(cols[:2])
    foot = np.zeros(gfirst.size)
    np.add.at(foot, inv[first], sector_bytes_rec[idx][first])
    repeat = np.ones(idx.size, dtype=np.bool_)
    repeat[first] = False
    out[idx] = (foot[inv] <= capacity_bytes) & repeat
    return out


def _issue_order(
    mem: np.ndarray,
    sel: npt.NDArray[np.int64],
    kidx: npt.NDArray[np.int64],
    begins: np.ndarray,
    n_k: int,
    arch: GpuArchConfig,
) -> npt.NDArray[np.int64]:
    """Order in which the L2 sees the selected records: kernel by kernel; within a kernel,
    wave by wave, and inside a wave the resident CTAs take turns (each CTA's k-th access
    before any CTA's (k+1)-th), as concurrent CTAs interleave on the GPU."""
    from .occupancy import resident_ctas

    per_wave = np.full(n_k, np.iinfo(np.int64).max // 4, dtype=np.int64)
    for i, b in enumerate(begins):
        r = resident_ctas(arch.sm, int(b["threads_per_cta"]), int(b["smem_bytes_per_cta"]),
                          int(b["regs_per_thread"]))  # fmt: skip
        per_wave[i] = max(r, 1) * arch.sm.count
    k = kidx[sel]
    cta = mem["cta"][sel].astype(np.int64)
    # ordinal of each record within its (kernel, CTA), in seq order
    grp = np.lexsort((np.arange(sel.size), cta, k))
    gk, gc = k[grp], cta[grp]
    new = np.ones(sel.size, dtype=np.bool_)
    new[1:] = (gk[1:] != gk[:-1]) | (gc[1:] != gc[:-1])
    first = np.flatnonzero(new)
    ordinal = np.empty(sel.size, dtype=np.int64)
    ordinal[grp] = np.arange(sel.size) - np.repeat(first, np.diff(np.append(first, sel.size)))
    wave = cta // per_wave[k]
    return np.lexsort((cta, ordinal, wave, k))


def kernel_traffic(
    trace: Trace, arch: GpuArchConfig, *, fidelity: Literal["cycle", "analytical"] = "cycle"
) -> list[KernelTraffic]:
    """One :class:`KernelTraffic` per kernel of a trace, in issue order.

    Args:
        trace: a GPU trace (kernels with launch geometry; a trace without ``kernel_begin``
            events is one kernel whose grid is its distinct CTAs).
        arch: the GPU.
        fidelity: ``"cycle"`` (L2 replay) or ``"analytical"`` (closed forms).

    Returns:
        The kernels, ordered by their ``kernel_begin`` seq.

    Raises:
        ValueError: an unknown fidelity.
    """
    if fidelity not in ("cycle", "analytical"):
        raise ValueError(f"fidelity must be 'cycle' or 'analytical', got {fidelity!r}")
    kernels = _KernelIndex.of(trace)
    rec = _Records.of(trace, arch, kernels)
    geom = cache_geometry(arch, replicated=not _single_reader(trace, rec))
    l2 = _l2_traffic(trace, arch, geom, kernels, rec, fidelity)
    sb = arch.l2.sector_bytes
    read_fill = np.where(rec.rw == 0, l2.misses, 0)
    dram_bytes_rec = (read_fill + l2.writebacks) * sb
    per_k = rec.per_kernel
    if fidelity == "cycle":
        dram_s = _channel_seconds(arch, geom, l2, kernels.n)
    else:
        dram_s = per_k(dram_bytes_rec / (arch.dram.bw_gb_per_s * 1e9 * _stream_efficiency(
            trace.memory, arch, rec)))  # fmt: skip
    chain_s = _chain_seconds(trace.memory, arch, rec, l2, kernels.n)
    totals = _kernel_totals(trace, kernels, rec, l2, sb, dram_s, chain_s)
    by_tensor = _bytes_by_tensor(trace, rec, dram_bytes_rec, kernels.n)
    out = [_kernel_record(trace, kernels, rec, totals, by_tensor, i) for i in range(kernels.n)]
    out.sort(key=lambda kt: (kt.seq, kt.kernel))
    return out


def _kernel_totals(
    trace: Trace,
    kernels: _KernelIndex,
    rec: _Records,
    l2: Any,
    sb: int,
    dram_s: np.ndarray,
    chain_s: np.ndarray,
) -> _Totals:
    """Per-kernel sums of a trace's traffic (``dram_s``/``chain_s``: the DRAM and dependent-chain
    seconds per kernel, which depend on the DRAM and latencies; the rest does not)."""
    per_k = rec.per_kernel
    read_fill = np.where(rec.rw == 0, l2.misses, 0)
    tensor_flop, fp32_flop = _flop(trace, kernels)
    # tile bytes: mean sector bytes of a read record of device or host memory
    rd = (rec.dev | rec.zero_copy) & (rec.rw == 0)
    return _Totals(
        requests=per_k(np.where(rec.dev, rec.req, 0)),
        hits=per_k(l2.hits),
        near_hits=per_k(l2.near),
        misses=per_k(l2.misses),
        fill_bytes=per_k(read_fill * sb),
        writeback_bytes=per_k(l2.writebacks * sb),
        zero_copy_bytes=per_k(np.where(rec.zero_copy, rec.req * sb, 0)),
        # copies: their HOST bytes cross the link; their device side is written (h2d) or read
        copy_bytes=per_k(np.where(rec.copy_host, rec.nbytes * rec.count, 0)),
        dram_seconds=dram_s,
        chain_seconds=chain_s,
        l1_hits=per_k(np.where(l2.l1, rec.req, 0)),
        tensor_flop=tensor_flop,
        fp32_flop=fp32_flop,
        read_records=per_k(rd.astype(np.int64)),
        read_bytes=per_k(np.where(rd, rec.req * sb, 0)),
    )


@dataclass(frozen=True)
class _KernelIndex:
    """The kernels of a trace: those with a ``kernel_begin`` event in its order, then any other
    kernel id a record names (ascending), as positions ``0 .. n - 1``.

    Attributes:
        begins: the ``kernel_begin`` events.
        ids: kernel id at each position.
        names: kernel name at each position (``"kernel"`` for one without a begin event).
        kinds: ``"h2d"`` / ``"d2h"`` for ``memcpy_h2d*`` / ``memcpy_d2h*``, else ``"compute"``.
    """

    begins: np.ndarray
    ids: list[int]
    names: list[str]
    kinds: list[KernelKind]

    @classmethod
    def of(cls, trace: Trace) -> _KernelIndex:
        """The kernels of ``trace``."""
        table = trace.table("kernel_name")
        ev = trace.events
        begins = ev[ev["kind"] == 0]
        kids = [int(k) for k in begins["kernel"]]
        extra = sorted(set(np.unique(trace.memory["kernel"].astype(np.int64)).tolist()) - set(kids))
        extra = sorted(set(extra) | (set(np.unique(trace.compute["kernel"]).tolist()) - set(kids)))
        names = [table[int(b["name"])] for b in begins] + ["kernel"] * len(extra)
        kinds: list[KernelKind] = [
            "h2d" if nm.startswith("memcpy_h2d") else "d2h" if nm.startswith("memcpy_d2h")
            else "compute"
            for nm in names
        ]  # fmt: skip
        return cls(begins, kids + extra, names, kinds)

    @property
    def n(self) -> int:
        """Kernels."""
        return len(self.ids)

    def position(self, ids: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        """Position of each kernel id (every id is one of :attr:`ids`)."""
        order_ids = np.asarray(self.ids, dtype=np.int64)
        sort = np.argsort(order_ids, kind="stable")
        return sort[np.searchsorted(order_ids[sort], ids.astype(np.int64))].astype(np.int64)


@dataclass(frozen=True)
class _Records:
    """The memory records of a trace (in seq order) as the traffic model sees them.

    Attributes:
        kidx: kernel position of each record.
        n_kernels: kernels of the trace.
        dev: a device-memory record of a compute kernel (goes through the L2).
        zero_copy: a host-memory record of a compute kernel (a zero-copy load).
        copy_host: the host side of a copy-engine transfer.
        starts: absolute byte address of each record's first row.
        nbytes, stride, count, rw: the record's columns, int64.
        req: device sector requests of each record (any space), sector.
    """

    kidx: npt.NDArray[np.int64]
    n_kernels: int
    dev: npt.NDArray[np.bool_]
    zero_copy: npt.NDArray[np.bool_]
    copy_host: npt.NDArray[np.bool_]
    starts: npt.NDArray[np.int64]
    nbytes: npt.NDArray[np.int64]
    stride: npt.NDArray[np.int64]
    count: npt.NDArray[np.int64]
    rw: npt.NDArray[np.int64]
    req: npt.NDArray[np.int64]

    @classmethod
    def of(cls, trace: Trace, arch: GpuArchConfig, kernels: _KernelIndex) -> _Records:
        """The records of ``trace``."""
        mem = trace.memory
        mem_k = mem["kernel"].astype(np.int64)
        kidx = kernels.position(mem_k) if mem.size else mem_k
        is_copy = np.array([k != "compute" for k in kernels.kinds], dtype=np.bool_)
        rec_copy = is_copy[kidx] if mem.size else np.zeros(0, dtype=np.bool_)
        host = _codes(trace, "space", HOST_SPACES)
        starts = absolute_starts(trace)
        nb = mem["nbytes"].astype(np.int64)
        st = mem["stride"].astype(np.int64)
        cnt = mem["count"].astype(np.int64)
        return cls(
            kidx=kidx,
            n_kernels=kernels.n,
            dev=_codes(trace, "space", DEVICE_SPACES) & ~rec_copy,
            zero_copy=host & ~rec_copy,
            copy_host=rec_copy & host,
            starts=starts,
            nbytes=nb,
            stride=st,
            count=cnt,
            rw=mem["rw"].astype(np.int64),
            req=sector_counts(starts, nb, st, cnt, arch.l2.sector_bytes),
        )

    def per_kernel(self, x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """Sum of a per-record quantity per kernel."""
        if not self.kidx.size:
            return np.zeros(self.n_kernels)
        return np.bincount(self.kidx, weights=x, minlength=self.n_kernels).astype(np.float64)


@dataclass(frozen=True)
class _L2Traffic:
    """What the L2 does with the device records of compute kernels.

    Attributes:
        hits, near, misses, writebacks: per record, sector (``near``: hits in the requesting
            SM's own partition; ``writebacks``: sectors written back to DRAM).
        l1: per record, a hit its CTA finds in the SM's L1.
        channel_sectors, row_misses, run_starts: ``[kernels, DRAM channels]`` sectors, open-row
            misses and contiguous runs per channel (cycle fidelity; zeros in analytical).
    """

    hits: npt.NDArray[np.int64]
    near: npt.NDArray[np.int64]
    misses: npt.NDArray[np.int64]
    writebacks: npt.NDArray[np.int64]
    l1: npt.NDArray[np.bool_]
    channel_sectors: npt.NDArray[np.int64]
    row_misses: npt.NDArray[np.int64]
    run_starts: npt.NDArray[np.int64]


def _l2_traffic(
    trace: Trace,
    arch: GpuArchConfig,
    geom: CacheGeometry,
    kernels: _KernelIndex,
    rec: _Records,
    fidelity: str,
) -> _L2Traffic:
    """Hits, near hits, misses and write-backs per record: the sectored L2 replay (cycle) or
    the first-touch rule (analytical); near or far by the one-partition rule (module
    docstring)."""
    mem, n_k, dev, req = trace.memory, kernels.n, rec.dev, rec.req
    hits = np.zeros(mem.size, dtype=np.int64)
    near = np.zeros(mem.size, dtype=np.int64)
    wb = np.zeros(mem.size, dtype=np.int64)
    ch_sec = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    row_miss = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    runs_ch = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    sel = np.flatnonzero(dev)
    warm = replayed(trace)
    if fidelity == "cycle" and sel.size:
        sel = sel[_issue_order(mem, sel, rec.kidx, kernels.begins, n_k, arch)]
        state = CacheState.empty(geom)
        args = (
            rec.starts[sel], rec.nbytes[sel], rec.stride[sel], rec.count[sel], rec.rw[sel],
            mem["cta"][sel].astype(np.int64) % arch.sm.count, rec.kidx[sel], n_k,
        )  # fmt: skip
        if warm:  # the previous replay leaves the cache as it ends
            replay(geom, state, *args)
        out = replay(geom, state, *args)
        hits[sel], near[sel], wb[sel] = out.hits, out.near_hits, out.writebacks
        ch_sec, row_miss, runs_ch = out.channel_sectors, out.row_misses, out.run_starts
    elif sel.size:
        cap_mib = arch.l2.effective_capacity_mib if geom.sets == arch.l2.sets else (
            arch.l2.capacity_mib)  # fmt: skip
        h = _analytical_hits(trace, arch, dev, req, warm=warm, cap_mib=cap_mib)
        hits[sel] = h[sel]
        near[sel] = h[sel] // arch.l2.partitions
    if sel.size:
        near_k = _fits_one_partition(trace, arch, mem, dev, rec.kidx, n_k)
        near = np.where(dev & near_k[rec.kidx], hits, 0)
    if fidelity == "analytical":
        wb = _analytical_writebacks(trace, arch, rec)
    return _L2Traffic(
        hits=hits,
        near=near,
        misses=np.where(dev, req - hits, 0),
        writebacks=wb,
        l1=_l1_hits(trace.memory, arch, rec, hits),
        channel_sectors=ch_sec,
        row_misses=row_miss,
        run_starts=runs_ch,
    )


def _analytical_writebacks(trace: Trace, arch: GpuArchConfig, rec: _Records) -> np.ndarray:
    """Write-back sectors per record (analytical): a tensor that fits the effective L2 keeps
    its writes there; a larger one's are written back."""
    cap = arch.l2.effective_capacity_mib * 2**20
    tmap = trace.meta.get("tensors", {})
    big = np.array(
        [tmap.get(t, {}).get("nbytes", 0) > cap for t in trace.table("tensor")], dtype=np.bool_
    )
    return np.where(rec.dev & (rec.rw == 1) & big[trace.memory["tensor"]], rec.req, 0)


def _l1_hits(
    mem: np.ndarray, arch: GpuArchConfig, rec: _Records, hits: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Per record: a read whose every sector hits and whose CTA's distinct accesses fit the
    SM's L1 is served there (the L1 holds whole lines: a CTA's footprint is the lines of its
    distinct records). None without an L1 size."""
    if arch.sm.l1_cache_kib is None or not mem.size:
        return np.zeros(mem.size, dtype=np.bool_)
    lb = arch.l2.line_bytes
    line_bytes_rec = sector_counts(rec.starts, rec.nbytes, rec.stride, rec.count, lb) * lb
    l1_fit = _cta_fits(mem, rec.dev, rec.kidx, line_bytes_rec, arch.sm.l1_cache_kib * 1024)
    return rec.dev & (hits == rec.req) & (rec.req > 0) & (rec.rw == 0) & l1_fit


def _channel_seconds(
    arch: GpuArchConfig, geom: CacheGeometry, l2: _L2Traffic, n_k: int
) -> npt.NDArray[np.float64]:
    """DRAM time per kernel (cycle): each channel serves its sectors at the efficiency of its
    mean contiguous run, plus its open-row penalties; the kernel waits for the busiest
    channel."""
    ch_sec, row_miss, runs_ch = l2.channel_sectors, l2.row_misses, l2.run_starts
    ch_bytes = ch_sec * arch.l2.sector_bytes
    mean_run = np.where(runs_ch > 0, ch_bytes // np.maximum(runs_ch, 1), 0)
    ch_eff = offchip.efficiency(arch.dram, mean_run)
    ch_s = ch_bytes / (arch.dram.bw_gb_per_s * 1e9 / geom.dram_channels * ch_eff)
    if geom.dram_row_bytes:
        hit_ns, miss_ns = arch.dram.row_hit_penalty_ns, arch.dram.row_miss_penalty_ns
        ch_s = ch_s + (row_miss * miss_ns + (ch_sec - row_miss) * hit_ns) * 1e-9
    return ch_s.max(axis=1) if n_k else np.zeros(0)


def _stream_efficiency(mem: np.ndarray, arch: GpuArchConfig, rec: _Records) -> np.ndarray:
    """DRAM efficiency per record (analytical): at its contiguous runs; the records of a
    (kernel, tensor) that together cover their span densely are one stream (concurrent CTAs
    fill the gaps)."""
    runs = _stream_runs(
        mem, rec.dev, rec.kidx, rec.req * arch.l2.sector_bytes,
        run_bytes(rec.nbytes, rec.stride, rec.count), rec.starts,
    )  # fmt: skip
    return offchip.efficiency(arch.dram, np.maximum(runs, 1))


def _chain_seconds(
    mem: np.ndarray, arch: GpuArchConfig, rec: _Records, l2: _L2Traffic, n_k: int
) -> npt.NDArray[np.float64]:
    """Longest chain of dependent loads per kernel, each load at the latency of the level that
    serves it (L1, near or far L2, DRAM, or the host link for a zero-copy load), s."""
    f = arch.sm.freq_mhz * 1e6
    dev = rec.dev
    lat = np.zeros(mem.size)
    far = l2.hits - l2.near
    lat = np.where(dev & (l2.near > 0), arch.l2.near_latency_cycles / f, lat)
    lat = np.where(dev & (far > 0), arch.l2.far_latency_cycles / f, lat)
    lat = np.where(dev & (l2.misses > 0), arch.dram.latency_ns * 1e-9, lat)
    lat = np.where(l2.l1, arch.sm.l1_latency_cycles / f, lat)
    lat = np.where(rec.zero_copy, arch.host_link.zero_copy_latency_ns * 1e-9, lat)
    if not mem.size:
        return np.zeros(n_k)
    dep_pos = np.searchsorted(mem["seq"], mem["dep"])
    dep_ok = (mem["dep"] >= 0) & (dep_pos < mem.size)
    dep_ok[dep_ok] &= mem["seq"][dep_pos[dep_ok]] == mem["dep"][dep_ok]
    dep_pos = np.where(dep_ok, dep_pos, -1).astype(np.int64)
    return _chains(dep_pos, lat, rec.kidx, n_k)


def _flop(trace: Trace, kernels: _KernelIndex) -> tuple[np.ndarray, np.ndarray]:
    """Tensor-core and FP32 FLOP per kernel (an op of :data:`TENSOR_OPS` runs on the tensor
    cores; a record with ``k = 0`` counts ``m x max(n, 1)`` FLOP)."""
    comp, n_k = trace.compute, kernels.n
    if not comp.size:
        return np.zeros(n_k), np.zeros(n_k)
    ops = trace.table("op")
    tensor_codes = [ops.index(o) for o in TENSOR_OPS if o in ops]
    flop = 2.0 * comp["macs"].astype(np.float64)
    flop = np.where(comp["k"] == 0, comp["m"] * np.maximum(comp["n"], 1), flop)
    is_tc = np.isin(comp["op"], tensor_codes)
    ckidx = kernels.position(comp["kernel"])
    return (
        np.bincount(ckidx, weights=np.where(is_tc, flop, 0), minlength=n_k),
        np.bincount(ckidx, weights=np.where(is_tc, 0, flop), minlength=n_k),
    )


def _bytes_by_tensor(
    trace: Trace, rec: _Records, dram_bytes_rec: npt.NDArray[np.int64], n_k: int
) -> list[dict[str, int]]:
    """Device-memory bytes per kernel and tensor name, B."""
    tnames = trace.table("tensor")
    by_t: list[dict[str, int]] = [{} for _ in range(n_k)]
    nz = np.flatnonzero(dram_bytes_rec)
    if nz.size:
        key = rec.kidx[nz] * (len(tnames) + 1) + trace.memory["tensor"][nz]
        u, inv = np.unique(key, return_inverse=True)
        s = np.bincount(inv, weights=dram_bytes_rec[nz])
        for kk, v in zip(u, s, strict=True):
            ki, ti = divmod(int(kk), len(tnames) + 1)
            by_t[ki][tnames[ti] or "(unnamed)"] = int(v)
    return by_t


@dataclass(frozen=True)
class _Totals:
    """Per-kernel sums (arrays over kernel positions): sector requests, L2 hits, near hits
    and misses (sector); DRAM fill and write-back bytes, zero-copy and copy bytes (B); DRAM
    and dependent-chain time (s); L1 hits (sector); tensor-core and FP32 FLOP; device or host
    read records and their sector bytes (B)."""

    requests: npt.NDArray[np.float64]
    hits: npt.NDArray[np.float64]
    near_hits: npt.NDArray[np.float64]
    misses: npt.NDArray[np.float64]
    fill_bytes: npt.NDArray[np.float64]
    writeback_bytes: npt.NDArray[np.float64]
    zero_copy_bytes: npt.NDArray[np.float64]
    copy_bytes: npt.NDArray[np.float64]
    dram_seconds: npt.NDArray[np.float64]
    chain_seconds: npt.NDArray[np.float64]
    l1_hits: npt.NDArray[np.float64]
    tensor_flop: npt.NDArray[np.float64]
    fp32_flop: npt.NDArray[np.float64]
    read_records: npt.NDArray[np.float64]
    read_bytes: npt.NDArray[np.float64]


def _kernel_record(
    trace: Trace,
    kernels: _KernelIndex,
    rec: _Records,
    t: _Totals,
    by_tensor: list[dict[str, int]],
    i: int,
) -> KernelTraffic:
    """The :class:`KernelTraffic` of the kernel at position ``i``: its launch geometry (a
    kernel without one has as many CTAs as its records name) and its sums."""
    k = kernels.ids[i]
    b = kernels.begins[i] if i < kernels.begins.size else None
    ctas = int(b["ctas"]) if b is not None else 0
    if ctas <= 0:
        m = trace.memory["cta"][rec.kidx == i]
        ctas = int(np.unique(m).size) if m.size else 1
    kind, name = kernels.kinds[i], kernels.names[i]
    dram_read, dram_write = float(t.fill_bytes[i]), float(t.writeback_bytes[i])
    # the device side of a copy: written by H2D, read by D2H
    if kind == "h2d":
        dram_write += float(t.copy_bytes[i])
    elif kind == "d2h":
        dram_read += float(t.copy_bytes[i])
    return KernelTraffic(
        kernel=k,
        name=name,
        stream=int(b["stream"]) if b is not None else 0,
        seq=int(b["seq"]) if b is not None else -1,
        kind=kind,
        pinned="pageable" not in name,
        ctas=ctas,
        threads_per_cta=int(b["threads_per_cta"]) if b is not None else 0,
        smem_bytes_per_cta=int(b["smem_bytes_per_cta"]) if b is not None else 0,
        regs_per_thread=int(b["regs_per_thread"]) if b is not None else 0,
        sector_requests=int(t.requests[i]),
        l2_hits=int(t.hits[i]),
        l2_near_hits=int(t.near_hits[i]),
        l2_misses=int(t.misses[i]),
        dram_read_bytes=int(dram_read),
        dram_write_bytes=int(dram_write),
        dram_seconds=float(t.dram_seconds[i]),
        host_bytes=int(t.copy_bytes[i] if kind != "compute" else t.zero_copy_bytes[i]),
        tensor_flop=float(t.tensor_flop[i]),
        fp32_flop=float(t.fp32_flop[i]),
        tile_bytes=float(t.read_bytes[i] / t.read_records[i]) if t.read_records[i] else 0.0,
        chain_seconds=float(t.chain_seconds[i]),
        l1_hits=int(t.l1_hits[i]),
        by_tensor=FrozenMap(by_tensor[i]),
    )
