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
from ..common.sectors import absolute_starts, run_bytes, sector_counts
from .config import GpuArchConfig

__all__ = [
    "DEVICE_SPACES",
    "HOST_SPACES",
    "KernelTraffic",
    "cache_geometry",
    "kernel_traffic",
]

DEVICE_SPACES = ("HBM", "DRAM", "L2", "GMEM")
"""Memory spaces that are device memory behind the L2."""
HOST_SPACES = ("HOST",)
"""Memory spaces in host memory (reached over the host link)."""

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


def cache_geometry(arch: GpuArchConfig) -> CacheGeometry:
    """The L2 and DRAM channels of a GPU as a :class:`CacheGeometry`."""
    l2 = arch.l2
    return CacheGeometry(
        sets=l2.sets,
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


def _analytical_hits(
    trace: Trace, arch: GpuArchConfig, dev: npt.NDArray[np.bool_], req: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Sector hits per record of the analytical rule (first touch misses in fitting tensors)."""
    mem = trace.memory
    hits = np.zeros(mem.size, dtype=np.int64)
    cap = arch.l2.effective_capacity_mib * 2**20
    sb = arch.l2.sector_bytes
    names = trace.table("tensor")
    tensors = trace.meta.get("tensors", {})
    idx = np.flatnonzero(dev)
    if not idx.size:
        return hits
    tcode = mem["tensor"][idx]
    for code in np.unique(tcode):
        rows = idx[tcode == code]
        r = req[rows]
        name = names[code]
        # footprint: the sectors of its distinct records (a re-read record adds nothing),
        # at most the tensor's allocation
        keys = np.stack(
            [mem[f][rows].astype(np.int64) for f in ("addr", "nbytes", "stride", "count")]
        )
        _, first = np.unique(keys, axis=1, return_index=True)
        foot = int(r[first].sum())
        if name in tensors:
            foot = min(foot, -(-int(tensors[name]["nbytes"]) // sb))
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
    pairs = np.unique(np.stack([kidx[idx], mem["tensor"][idx].astype(np.int64)]), axis=1)
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
    keys = np.stack(cols)
    _, first = np.unique(keys, axis=1, return_index=True)
    grp = np.stack(cols[:2])
    ug, inv = np.unique(grp, axis=1, return_inverse=True)
    inv = inv.ravel()
    foot = np.zeros(ug.shape[1])
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
    kids: list[int],
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
    mem = trace.memory
    ev = trace.events
    names = trace.table("kernel_name")
    begins = ev[ev["kind"] == 0]
    kids = [int(k) for k in begins["kernel"]]
    mem_k = mem["kernel"].astype(np.int64)
    extra = sorted(set(np.unique(mem_k).tolist()) - set(kids))
    comp = trace.compute
    extra = sorted(set(extra) | (set(np.unique(comp["kernel"]).tolist()) - set(kids)))
    n_k = len(kids) + len(extra)
    order_ids = np.asarray(kids + extra, dtype=np.int64)
    sort = np.argsort(order_ids, kind="stable")

    def to_index(ids: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        # kernel id -> position in issue order (every id is present: begins + extra)
        return sort[np.searchsorted(order_ids[sort], ids.astype(np.int64))].astype(np.int64)

    kidx = to_index(mem_k) if mem.size else mem_k
    kname = [names[int(b["name"])] for b in begins] + ["kernel"] * len(extra)
    kinds: list[KernelKind] = []
    for nm in kname:
        kinds.append(
            "h2d"
            if nm.startswith("memcpy_h2d")
            else "d2h"
            if nm.startswith("memcpy_d2h")
            else "compute"
        )
    is_copy = np.array([k != "compute" for k in kinds], dtype=np.bool_)

    dev = _codes(trace, "space", DEVICE_SPACES)
    host = _codes(trace, "space", HOST_SPACES)
    rec_copy = is_copy[kidx] if mem.size else np.zeros(0, dtype=np.bool_)
    dev_c = dev & ~rec_copy  # device records of compute kernels (through the L2)
    starts = absolute_starts(trace)
    nb = mem["nbytes"].astype(np.int64)
    st = mem["stride"].astype(np.int64)
    cnt = mem["count"].astype(np.int64)
    rw = mem["rw"].astype(np.int64)
    sb = arch.l2.sector_bytes
    sms = arch.sm.count
    req = sector_counts(starts, nb, st, cnt, sb)
    hits = np.zeros(mem.size, dtype=np.int64)
    near = np.zeros(mem.size, dtype=np.int64)
    wb = np.zeros(mem.size, dtype=np.int64)
    geom = cache_geometry(arch)
    ch_sec = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    row_miss = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    runs_ch = np.zeros((n_k, geom.dram_channels), dtype=np.int64)
    sel = np.flatnonzero(dev_c)
    if fidelity == "cycle" and sel.size:
        sel = sel[_issue_order(mem, sel, kidx, begins, kids, n_k, arch)]
        state = CacheState.empty(geom)
        out = replay(
            geom, state, starts[sel], nb[sel], st[sel], cnt[sel], rw[sel],
            mem["cta"][sel].astype(np.int64) % sms, kidx[sel], n_k,
        )  # fmt: skip
        hits[sel], near[sel], wb[sel] = out.hits, out.near_hits, out.writebacks
        ch_sec, row_miss, runs_ch = out.channel_sectors, out.row_misses, out.run_starts
    elif sel.size:
        h = _analytical_hits(trace, arch, dev_c, req)
        hits[sel] = h[sel]
        near[sel] = h[sel] // arch.l2.partitions
    if sel.size:
        near_k = _fits_one_partition(trace, arch, mem, dev_c, kidx, n_k)
        near = np.where(dev_c & near_k[kidx], hits, 0)
    misses = np.where(dev_c, req - hits, 0)
    if fidelity == "analytical":
        # a fitting tensor's writes stay in L2; a larger one's are written back
        cap = arch.l2.effective_capacity_mib * 2**20
        tmap = trace.meta.get("tensors", {})
        tn = trace.table("tensor")
        big = np.array(
            [tmap.get(t, {}).get("nbytes", 0) > cap for t in tn], dtype=np.bool_
        )  # fmt: skip
        wb = np.where(dev_c & (rw == 1) & big[mem["tensor"]], req, 0)
    read_fill = np.where(rw == 0, misses, 0)
    dram_bytes_rec = (read_fill + wb) * sb
    # copies: their HOST bytes cross the link; their device side is written (h2d) or read
    rec_bytes = nb * cnt
    copy_host = np.where(rec_copy & host, rec_bytes, 0)
    zc = np.where(host & ~rec_copy, req * sb, 0)

    def per_k(x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        if not mem.size:
            return np.zeros(n_k)
        return np.bincount(kidx, weights=x, minlength=n_k).astype(np.float64)

    k_req, k_hits, k_near = per_k(np.where(dev_c, req, 0)), per_k(hits), per_k(near)
    k_miss, k_fill, k_wb = per_k(misses), per_k(read_fill * sb), per_k(wb * sb)
    k_zc, k_copy = per_k(zc), per_k(copy_host)
    bw = arch.dram.bw_gb_per_s * 1e9
    if fidelity == "cycle":
        # each channel serves its sectors at the efficiency of its mean contiguous run, plus
        # its open-row penalties; the kernel waits for the busiest channel
        ch_bytes = ch_sec * sb
        mean_run = np.where(runs_ch > 0, ch_bytes // np.maximum(runs_ch, 1), 0)
        ch_eff = offchip.efficiency(arch.dram, mean_run)
        ch_s = ch_bytes / (bw / geom.dram_channels * ch_eff)
        if geom.dram_row_bytes:
            hit_ns, miss_ns = arch.dram.row_hit_penalty_ns, arch.dram.row_miss_penalty_ns
            ch_s = ch_s + (row_miss * miss_ns + (ch_sec - row_miss) * hit_ns) * 1e-9
        k_dram_s = ch_s.max(axis=1) if n_k else np.zeros(0)
    else:
        # each record at the efficiency of its contiguous runs; records of a (kernel, tensor)
        # that together cover their span densely are one stream (concurrent CTAs fill the gaps)
        runs = _stream_runs(mem, dev_c, kidx, req * sb, run_bytes(nb, st, cnt), starts)
        eff = offchip.efficiency(arch.dram, np.maximum(runs, 1))
        k_dram_s = per_k(dram_bytes_rec / (bw * eff))
    # per-record latency for dependent chains
    f = arch.sm.freq_mhz * 1e6
    lat = np.zeros(mem.size)
    far = hits - near
    lat = np.where(dev_c & (near > 0), arch.l2.near_latency_cycles / f, lat)
    lat = np.where(dev_c & (far > 0), arch.l2.far_latency_cycles / f, lat)
    lat = np.where(dev_c & (misses > 0), arch.dram.latency_ns * 1e-9, lat)
    if arch.sm.l1_cache_kib is not None and mem.size:
        # L1: a hit of a CTA whose distinct accesses fit the L1 is served there (reads)
        # the L1 holds whole lines: a CTA's footprint is the lines of its distinct records
        lb = arch.l2.line_bytes
        line_bytes_rec = sector_counts(starts, nb, st, cnt, lb) * lb
        l1_fit = _cta_fits(mem, dev_c, kidx, line_bytes_rec, arch.sm.l1_cache_kib * 1024)
        l1 = dev_c & (hits == req) & (req > 0) & (rw == 0) & l1_fit
        lat = np.where(l1, arch.sm.l1_latency_cycles / f, lat)
    else:
        l1 = np.zeros(mem.size, dtype=np.bool_)
    lat = np.where(host & ~rec_copy, arch.host_link.zero_copy_latency_ns * 1e-9, lat)
    dep_pos = np.searchsorted(mem["seq"], mem["dep"])
    dep_ok = (mem["dep"] >= 0) & (dep_pos < mem.size)
    dep_ok[dep_ok] &= mem["seq"][dep_pos[dep_ok]] == mem["dep"][dep_ok]
    dep_pos = np.where(dep_ok, dep_pos, -1).astype(np.int64)
    chains = _chains(dep_pos, lat, kidx, n_k) if mem.size else np.zeros(n_k)
    k_l1 = per_k(np.where(l1, req, 0))
    # compute
    ops = trace.table("op")
    tensor_codes = [ops.index(o) for o in TENSOR_OPS if o in ops]
    flop = 2.0 * comp["macs"].astype(np.float64)
    flop = np.where(comp["k"] == 0, comp["m"] * np.maximum(comp["n"], 1), flop)
    is_tc = np.isin(comp["op"], tensor_codes)
    ckidx = to_index(comp["kernel"]) if comp.size else np.zeros(0, dtype=np.int64)
    k_tc = (
        np.bincount(ckidx, weights=np.where(is_tc, flop, 0), minlength=n_k)
        if comp.size
        else np.zeros(n_k)
    )
    k_fp = (
        np.bincount(ckidx, weights=np.where(is_tc, 0, flop), minlength=n_k)
        if comp.size
        else np.zeros(n_k)
    )
    # tile bytes: mean sector bytes of a read record of device or host memory
    rd = (dev_c | (host & ~rec_copy)) & (rw == 0)
    k_rd_n = per_k(rd.astype(np.int64))
    k_rd_b = per_k(np.where(rd, req * sb, 0))
    # by tensor
    tnames = trace.table("tensor")
    by_t: list[dict[str, int]] = [{} for _ in range(n_k)]
    nz = np.flatnonzero(dram_bytes_rec)
    if nz.size:
        key = kidx[nz] * (len(tnames) + 1) + mem["tensor"][nz]
        u, inv = np.unique(key, return_inverse=True)
        s = np.bincount(inv, weights=dram_bytes_rec[nz])
        for kk, v in zip(u, s, strict=True):
            ki, ti = divmod(int(kk), len(tnames) + 1)
            by_t[ki][tnames[ti] or "(unnamed)"] = int(v)
    # distinct CTAs for kernels without geometry
    out_list: list[KernelTraffic] = []
    geo = {int(b["kernel"]): b for b in begins}
    begin_seq = {int(b["kernel"]): int(b["seq"]) for b in begins}
    for i, k in enumerate(kids + extra):
        b = geo.get(k)
        ctas = int(b["ctas"]) if b is not None else 0
        if ctas <= 0:
            m = mem["cta"][kidx == i]
            ctas = int(np.unique(m).size) if m.size else 1
        kind = kinds[i]
        dram_read, dram_write = float(k_fill[i]), float(k_wb[i])
        if kind != "compute":
            # the device side of a copy: written by H2D, read by D2H
            if kind == "h2d":
                dram_write += float(k_copy[i])
            else:
                dram_read += float(k_copy[i])
        out_list.append(
            KernelTraffic(
                kernel=k,
                name=kname[i],
                stream=int(b["stream"]) if b is not None else 0,
                seq=begin_seq.get(k, -1),
                kind=kind,
                pinned="pageable" not in kname[i],
                ctas=ctas,
                threads_per_cta=int(b["threads_per_cta"]) if b is not None else 0,
                smem_bytes_per_cta=int(b["smem_bytes_per_cta"]) if b is not None else 0,
                regs_per_thread=int(b["regs_per_thread"]) if b is not None else 0,
                sector_requests=int(k_req[i]),
                l2_hits=int(k_hits[i]),
                l2_near_hits=int(k_near[i]),
                l2_misses=int(k_miss[i]),
                dram_read_bytes=int(dram_read),
                dram_write_bytes=int(dram_write),
                dram_seconds=float(k_dram_s[i]),
                host_bytes=int(k_copy[i] if kind != "compute" else k_zc[i]),
                tensor_flop=float(k_tc[i]),
                fp32_flop=float(k_fp[i]),
                tile_bytes=float(k_rd_b[i] / k_rd_n[i]) if k_rd_n[i] else 0.0,
                chain_seconds=float(chains[i]),
                l1_hits=int(k_l1[i]),
                by_tensor=FrozenMap(by_t[i]),
            )
        )
    out_list.sort(key=lambda kt: (kt.seq, kt.kernel))
    return out_list
