"""Analytical mode of the HBQ ASIC simulator: the same hardware model in closed form, without
traces (docs/hbq_sim.md, "Analytical mode").

Per GEMM, tiles fall into a handful of classes (full or edge along M, N, K; first K tile or not).
For each class the PE occupancy is :func:`~.engine.pe_tile_closed_form`, the DMA occupancy the
ceiling of its bytes over the sustained bandwidth, and with two buffer slots a tile costs
``max(compute, DMA)`` (one slot: their sum); every GEMM pays one pipeline bubble (its first
operand reads behind the previous GEMM's last write). Attention costs, per key tile, ``PV`` plus
the longer of ``QK^T`` and the softmax chain (scores -> softmax -> V read), or the DMA time of K
and V if longer. DRAM bytes are counted tile by tile exactly as the reference's traces count them,
so the two modes report the same traffic; cycles agree within a few percent (a test asserts 5%
on every shipped workload x architecture).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any, cast

from coaccel.models.hbq import operand_storage, psum_bits_per_element

from ._hw import HwParams, hw_params
from ._result import _notes, _stats
from .config import HbqArchConfig, operand_format
from .engine import TileCycles, pe_tile_closed_form
from .stats import STALL_CAUSES, BufferAccess, DramAccess, HbqSimStats, KindStats
from .workload import Workload, workload_tiles

__all__ = ["simulate_analytical"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _nbytes(elems: int, bits: Fraction) -> int:
    # storage_bytes(elems, bits) for a Python int count >= 0 and bits > 0 (both hold here):
    # ceil(elems * bits / 8) in exact integer arithmetic, without its argument checks.
    return -(-(elems * bits.numerator) // (8 * bits.denominator))


def _classes(total: int, tile: int) -> list[tuple[int, int]]:
    """(size, count) of the tiles along one dimension."""
    full, rest = divmod(total, tile)
    out = [(tile, full)] if full else []
    if rest:
        out.append((rest, 1))
    return out


@dataclass
class _Seg:
    """Accumulated estimate of one segment (one copy)."""

    name: str
    kind: str
    repeat: int
    cycles: float = 0.0
    stall: dict[str, float] = field(
        default_factory=lambda: {c: 0.0 for c in ("busy", *STALL_CAUSES)}
    )
    macs: int = 0
    dram_r: int = 0
    dram_w: int = 0
    n_r: int = 0
    n_w: int = 0
    tensors: dict[str, int] = field(default_factory=dict)
    act_reads: float = 0.0
    wgt_reads: float = 0.0
    psum_reads: float = 0.0
    psum_writes: float = 0.0
    act_fill: float = 0.0
    act_fill_n: float = 0.0
    wgt_fill: float = 0.0
    wgt_fill_n: float = 0.0
    act_vec_w: float = 0.0
    act_vec_w_n: float = 0.0
    psum_vec_r: float = 0.0
    psum_vec_r_n: float = 0.0

    def add_stall(self, cause: str, cycles: float, count: float = 1.0) -> None:
        self.stall[cause] += cycles * count
        self.cycles += cycles * count

    def add_tensor(self, name: str, nbytes: int) -> None:
        self.tensors[name] = self.tensors.get(name, 0) + nbytes


# Tile occupancies depend on the PE-side constants only (not on the clock or the DRAM), so
# design points that differ in those share them: {PE-side constants: small id}, and
# {(id, m, n, k, psum read, fmt_a, fmt_b): occupancy}, both bounded.
_CLOCK_SIDE = ("dram_bytes_per_cycle", "dram_latency_cycles", "freq_mhz")
_PE_SIDE = tuple(f.name for f in fields(HwParams) if f.name not in _CLOCK_SIDE)
_PE_IDS: dict[tuple[Any, ...], int] = {}
_TILES: dict[tuple[Any, ...], TileCycles] = {}
_MAX_SHARED = 1 << 16
_NEXT_ID = itertools.count()
_PE_IDS_LOCK = threading.Lock()


def _pe_side_id(hw: HwParams) -> int:
    key = tuple(
        tuple(sorted(v.items())) if isinstance(v, Mapping) else v
        for v in (getattr(hw, name) for name in _PE_SIDE)
    )
    with _PE_IDS_LOCK:  # ids must stay unique when threads (a Dask worker's) share the tables
        i = _PE_IDS.get(key)
        if i is None:
            if len(_PE_IDS) >= _MAX_SHARED:
                _PE_IDS.clear()
                _TILES.clear()
            i = _PE_IDS[key] = next(_NEXT_ID)
    return i


class _Model:
    """Closed-form costs on one architecture (cached tile occupancies)."""

    def __init__(self, hw: HwParams) -> None:
        self.hw = hw
        self._pe_id = _pe_side_id(hw)
        self._tiles: dict[tuple[Any, ...], TileCycles] = {}
        self._words: dict[tuple[str, str], int] = {}
        self._act_step: dict[tuple[str, str], int] = {}

    def tile(self, m: int, n: int, k: int, rd: bool, fa: str, fb: str) -> TileCycles:
        key = (m, n, k, rd, fa, fb)
        t = self._tiles.get(key)
        if t is None:
            shared = (self._pe_id, *key)
            t = _TILES.get(shared)
            if t is None:
                if len(_TILES) >= _MAX_SHARED:
                    _TILES.clear()
                t = pe_tile_closed_form(self.hw, m, n, k, has_psum_read=rd, fmt_a=fa, fmt_b=fb)
                _TILES[shared] = t
            self._tiles[key] = t
        return t

    def act_words(self, name: str) -> int:
        key = ("a", name)
        w = self._words.get(key)
        if w is None:
            w = self._words[key] = self.hw.act_words(name)
        return w

    def wgt_words(self, name: str) -> int:
        key = ("w", name)
        w = self._words.get(key)
        if w is None:
            w = self._words[key] = self.hw.wgt_words(name)
        return w

    def dma(self, nbytes: int) -> int:
        return self.hw.dram_cycles(nbytes)

    def compute(self, seg: _Seg, t: TileCycles, m: int, n: int, fa: str, fb: str, count: int):
        """Array-side buffer accesses and the tile's own stall components."""
        hw = self.hw
        stall = seg.stall
        stall["busy"] += t.ideal * count
        stall["weight_propagation"] += t.weight_propagation * count
        stall["issue_interval"] += t.issue_interval * count
        stall["operand_passes"] += t.operand_passes * count
        stall["pipeline_turnaround"] += t.pipeline_turnaround * count
        seg.cycles += t.occupancy * count
        ksteps = t.waves // _cdiv(n, hw.n_pes)
        words = self._act_step.get((fa, fb))
        if words is None:  # passes x ACT words of one step (the product is exact: ints)
            words = self._act_step[(fa, fb)] = hw.passes(fa, fb) * self.act_words(fa)
        seg.act_reads += m * t.waves * words * count
        seg.wgt_reads += n * ksteps * self.wgt_words(fb) * count
        seg.psum_reads += t.psum_reads * count
        seg.psum_writes += t.psum_writes * count


def _gemm(
    model: _Model,
    seg: _Seg,
    *,
    m: int,
    n: int,
    k: int,
    tiles: Any,
    fa: str,
    bits_a: Fraction,
    fb: str,
    bits_w: Fraction,
    bits_y: Fraction,
    tensors: tuple[str, str, str],
) -> None:
    """One GEMM, loop order m (outer), n, k (inner), as gemm_trace(order="mnk") emits it."""
    hw = model.hw
    tm, tn, tk, nb = tiles.tile_m, tiles.tile_n, tiles.tile_k, tiles.n_buffers
    mc, nc = _classes(m, tm), _classes(n, tn)
    n_m_tiles, n_n, n_k = _cdiv(m, tm), _cdiv(n, tn), _cdiv(k, tk)
    resident = tiles.a_resident(m, k, bits_a)
    if resident and nc[0][1] > 1:
        # the first channel tile reads the slab: a class of its own
        nc = [(nc[0][0], 1), (nc[0][0], nc[0][1] - 1), *nc[1:]]
    # K tiles in order: (size, has partial-sum read, count, last).
    if n_k == 1:
        k_seq = [(k, False, 1, True)]
    else:
        k_seq = [(tk, False, 1, False)]
        if n_k > 2:
            k_seq.append((tk, True, n_k - 2, False))
        k_seq.append((k - (n_k - 1) * tk, True, 1, True))
    t_a, t_w, t_y = tensors
    first_reads = None
    # (PE occupancy, DMA occupancy) of the first / last tile
    first_tile: tuple[int, float] = (0, 0)
    last_tile: tuple[int, float] = (0, 0)
    last_write = 0
    seg.macs += m * n * k
    for mi_cls, (ms, mcount) in enumerate(mc):
        for ni_cls, (ns, ncount) in enumerate(nc):
            count_mn = mcount * ncount
            for ks, rd, kcount, is_last in k_seq:
                count = count_mn * kcount
                t = model.tile(ms, ns, ks, rd, fa, fb)
                model.compute(seg, t, ms, ns, fa, fb, count)
                a_b = _nbytes(ms * ks, bits_a)
                w_b = _nbytes(ns * ks, bits_w)
                # Loop order m, n, k: with several K tiles both operands change every tile; with
                # one, A changes with the M tile (read at its first N tile) and W with the N
                # tile (read once in all if there is one N tile). A resident A slab is read at
                # the token tile's first N tile only.
                if n_k > 1:
                    a_reads = w_reads = count
                else:
                    a_reads = mcount if ni_cls == 0 else 0
                    w_reads = count if n_n > 1 else (1 if mi_cls == 0 else 0)
                if resident:
                    a_reads = count if ni_cls == 0 else 0
                y_b = _nbytes(ms * ns, bits_y) if is_last else 0
                d = (model.dma(a_b) * a_reads + model.dma(w_b) * w_reads) / count + model.dma(y_b)
                extra = max(0.0, d - t.occupancy) if nb >= 2 else d
                seg.add_stall("dram_bandwidth", extra, count)
                seg.dram_r += a_b * a_reads + w_b * w_reads
                seg.n_r += a_reads + w_reads
                seg.add_tensor(t_a, a_b * a_reads)
                seg.add_tensor(t_w, w_b * w_reads)
                seg.act_fill += a_b * a_reads
                seg.wgt_fill += w_b * w_reads
                seg.act_fill_n += math.ceil(a_b * 8 / hw.act_width_bits) * a_reads
                seg.wgt_fill_n += math.ceil(w_b * 8 / hw.wgt_width_bits) * w_reads
                if is_last:
                    seg.dram_w += y_b * count
                    seg.n_w += count
                    seg.add_tensor(t_y, y_b * count)
                    last_write = model.dma(y_b)
                    last_tile = (t.occupancy, d)
                if first_reads is None:
                    first_reads = model.dma(a_b) + model.dma(w_b)
                    first_tile = (t.occupancy, d)
    # The pipeline bubble between GEMMs: the first tile's reads happen before any compute (and
    # queue behind the previous GEMM's last write), the last tile's output is written after the
    # last compute. Each tile's window above overlapped them with its compute; take them out of
    # those windows and pay them in full.
    if nb >= 2:
        c0, d0 = first_tile
        cl, dl = last_tile
        single = n_m_tiles * n_n * n_k == 1
        if single:
            seg.add_stall("dram_bandwidth", max(0.0, c0 - max(c0, d0)))
        else:
            # Set at the first tile: every GEMM here has at least one (m, n, k >= 1).
            reads0 = cast(int, first_reads)
            seg.add_stall("dram_bandwidth", max(c0, d0 - reads0) - max(c0, d0))
            seg.add_stall("dram_bandwidth", max(cl, dl - last_write) - max(cl, dl))
        seg.add_stall("dram_bandwidth", (first_reads or 0) + last_write)
    seg.add_stall("dram_latency", hw.dram_latency_cycles)


def _attention(
    model: _Model,
    seg: _Seg,
    *,
    kv_heads: int,
    group: int,
    head_dim: int,
    q_tokens: int,
    q_start: int,
    n_keys: int,
    causal: bool,
    tiles: Any,
    fa: str,
    bits_a: Fraction,
    fb: str,
    bits_kv: Fraction,
    bits_p: Fraction,
) -> None:
    """The fused attention of attention_trace, block (KV head x query tile) by block."""
    hw = model.hw
    rows_t, keys_t, nb = tiles.attn_rows, tiles.attn_keys, tiles.n_buffers
    tpt = rows_t // group
    n_qt = _cdiv(q_tokens, tpt)
    vec = hw.vector_elems_per_cycle
    dram_latency_cycles = hw.dram_latency_cycles
    words = _cdiv(head_dim, hw.n_pes) * _cdiv(min(hw.n_pes, head_dim), hw.sa_n)

    timing: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    counts: dict[tuple[int, int], int] = {}

    def key_tile(r: int, keys: int, count: int) -> tuple[int, int, int, int]:
        """(QK, PV, softmax chain, K + V DMA) of one key tile (cached); counts it ``count``
        times for the work accounting below."""
        counts[(r, keys)] = counts.get((r, keys), 0) + count
        t = timing.get((r, keys))
        if t is None:
            qk = model.tile(r, keys, head_dim, False, fa, fb)
            pv = model.tile(r, head_dim, keys, False, fa, fb)
            d_kv = model.dma(_nbytes(keys * head_dim, bits_kv))
            # QK done -> softmax -> V read (after it) -> PV may start.
            chain = _cdiv(r * keys, vec) + hw.vector_latency_cycles + d_kv + dram_latency_cycles
            t = timing[(r, keys)] = (qk.occupancy, pv.occupancy, chain, 2 * d_kv)
        return t

    first_q = 0
    last_o = 0
    for i in range(n_qt):
        t0 = q_start + i * tpt
        t1 = min(t0 + tpt, q_start + q_tokens)
        r = (t1 - t0) * group
        j = _cdiv(t1 if causal else n_keys, keys_t)
        lk = min(keys_t, n_keys - (j - 1) * keys_t)
        q_b = _nbytes(r * head_dim, bits_a)
        full = key_tile(r, keys_t, (j - 1) * kv_heads) if j > 1 else (0, 0, 0, 0)
        last = key_tile(r, lk, kv_heads)
        # PE order QK0 QK1 PV0 QK2 PV1 ... QK(J-1) PV(J-2) PV(J-1): the chain that feeds PV(j)
        # hides behind what the array runs between QK(j) and PV(j).
        busy = (j - 1) * (full[0] + full[1]) + last[0] + last[1]
        if nb < 2:
            wait = (
                (j - 1) * (full[2] + dram_latency_cycles) + last[2] + dram_latency_cycles
            )  # K read, then the chain, serially
        elif j == 1:
            wait = last[2]
        else:
            wait = max(0, full[2] - (last[0] if j == 2 else full[0]))  # behind QK1
            wait += (j - 2) * max(0, full[2] - full[0] - full[1]) if j > 2 else 0
            wait += max(0, last[2] - full[1])  # behind PV(J-2)
        dma = (j - 1) * full[3] + last[3]
        t_block = max(busy + wait, dma)
        over = t_block - busy
        vec_part = min(over, wait) if busy + wait >= dma else 0
        seg.add_stall("vector_unit", vec_part, kv_heads)
        seg.add_stall("dram_bandwidth", over - vec_part, kv_heads)
        # PV reads back its partial sums on every key tile but the block's first.
        seg.psum_reads += r * words * (j - 1) * kv_heads
        seg.dram_r += q_b * kv_heads
        seg.dram_w += q_b * kv_heads
        seg.n_r += kv_heads
        seg.n_w += kv_heads
        seg.add_tensor("q", q_b * kv_heads)
        seg.add_tensor("attn_out", q_b * kv_heads)
        seg.act_fill += q_b * kv_heads
        seg.act_fill_n += math.ceil(q_b * 8 / hw.act_width_bits) * kv_heads
        if i == 0:
            first_q = model.dma(q_b) + model.dma(_nbytes(min(keys_t, n_keys) * head_dim, bits_kv))
        last_o = model.dma(q_b)
    # The next block's Q and first K reads overlap this block's last tiles; the first block's
    # are exposed, and the last block's output is written after its last tile.
    seg.add_stall("dram_bandwidth", first_q + last_o)
    seg.add_stall("dram_latency", dram_latency_cycles)
    # Work, traffic and buffer accesses of every key tile, once per shape.
    for (r, keys), count in counts.items():
        if count == 0:
            continue
        qk = model.tile(r, keys, head_dim, False, fa, fb)
        pv = model.tile(r, head_dim, keys, False, fa, fb)
        model.compute(seg, qk, r, keys, fa, fb, count)
        model.compute(seg, pv, r, head_dim, fa, fb, count)
        kv_b = _nbytes(keys * head_dim, bits_kv)
        seg.macs += 2 * r * keys * head_dim * count
        seg.dram_r += 2 * kv_b * count
        seg.n_r += 2 * count
        seg.add_tensor("k_cache", kv_b * count)
        seg.add_tensor("v_cache", kv_b * count)
        seg.wgt_fill += 2 * kv_b * count
        seg.wgt_fill_n += 2 * math.ceil(kv_b * 8 / hw.wgt_width_bits) * count
        s_b, p_b = _nbytes(r * keys, bits_p), _nbytes(r * keys, bits_a)
        seg.psum_vec_r += s_b * count
        seg.psum_vec_r_n += math.ceil(s_b * 8 / float(hw.psum_word_bits)) * count
        seg.act_vec_w += p_b * count
        seg.act_vec_w_n += math.ceil(p_b * 8 / hw.act_width_bits) * count


def simulate_analytical(arch: HbqArchConfig, workload: Workload) -> HbqSimStats:
    """The analytical estimate of ``workload`` on ``arch`` (module docstring).

    Args:
        arch: the architecture.
        workload: the workload.

    Returns:
        The :class:`~.stats.HbqSimStats` (``mode="analytical"``).
    """
    hw = hw_params(arch)
    model = _Model(hw)
    tiles = workload_tiles(arch, workload)
    sc = workload.scenario
    sh = workload.model
    fa, bits_a = operand_storage(operand_format(arch, "activation"), "activation")
    fw, bits_w = operand_storage(operand_format(arch, "weight"), "weight")
    fkv, bits_kv = operand_storage(operand_format(arch, "kv", quantized=sc.kv_quant), "kv")
    bits_p = psum_bits_per_element(tiles.psum_mode, sa_n=tiles.sa_n)
    e, mlp, v = sh.hidden, sh.intermediate, sh.vocab
    q_dim, kv_dim = sh.heads * sh.head_dim, sh.kv_heads * sh.head_dim
    segs: list[_Seg] = []
    steps = range(sc.decode_steps) if sc.phase == "decode" else range(1)
    for step in steps:
        n_q = sc.tokens if sc.phase == "prefill" else 1
        q_start = 0 if sc.phase == "prefill" else sc.tokens + step
        L = sh.layers

        def lin(name, n, k, bits_y, tensors, kind="linear", repeat=L, m=n_q, fmt_w=fw,
                bw=bits_w):  # fmt: skip
            s = _Seg(name, kind, repeat)
            _gemm(model, s, m=m, n=n, k=k, tiles=tiles, fa=fa, bits_a=bits_a, fb=fmt_w,
                  bits_w=bw, bits_y=bits_y, tensors=tensors)  # fmt: skip
            segs.append(s)

        lin("q_proj", q_dim, e, bits_a, ("x", "wq", "q"))
        lin("k_proj", kv_dim, e, bits_kv, ("x", "wk", "k_cache"))
        lin("v_proj", kv_dim, e, bits_kv, ("x", "wv", "v_cache"))
        s = _Seg("attention", "attention", L)
        _attention(model, s, kv_heads=sh.kv_heads, group=sh.heads // sh.kv_heads,
                   head_dim=sh.head_dim, q_tokens=n_q, q_start=q_start, n_keys=q_start + n_q,
                   causal=sc.causal_tile_skip, tiles=tiles, fa=fa, bits_a=bits_a, fb=fkv,
                   bits_kv=bits_kv, bits_p=bits_p)  # fmt: skip
        segs.append(s)
        lin("o_proj", e, q_dim, bits_a, ("attn_out", "wo", "x2"))
        lin("gate_up_proj", 2 * mlp, e, bits_a / 2, ("x3", "w_gate_up", "h"))
        lin("down_proj", e, mlp, bits_a, ("h", "w_down", "x4"))
        if sc.lm_head != "none":
            n_lm = n_q if sc.lm_head == "all_tokens" else 1
            lin("lm_head", v, e, Fraction(16), ("x_final", "w_lm_head", "logits"),
                kind="lm_head", repeat=1, m=n_lm)  # fmt: skip
    # Each GEMM's bubble above already holds its last write: nothing drains after the last one.
    return _assemble(arch, workload, hw, segs, 0, _notes, functools.partial(_stats, tiles=tiles))


def _assemble(arch, workload, hw, segs, drain, notes_fn, stats_fn) -> HbqSimStats:
    stall = {c: 0.0 for c in ("busy", *STALL_CAUSES)}
    by_name: dict[str, list] = {}
    cycles = 0.0
    tensors: dict[str, int] = {}
    tot = dict.fromkeys(
        ("macs", "dram_r", "dram_w", "n_r", "n_w", "act_reads", "wgt_reads", "psum_reads",
         "psum_writes", "act_fill", "act_fill_n", "wgt_fill", "wgt_fill_n", "act_vec_w",
         "act_vec_w_n", "psum_vec_r", "psum_vec_r_n"), 0.0,
    )  # fmt: skip
    for s in segs:
        r = s.repeat
        cycles += s.cycles * r
        for c, x in s.stall.items():
            stall[c] += x * r
        for key in tot:
            tot[key] += getattr(s, key) * r
        for t, b in s.tensors.items():
            tensors[t] = tensors.get(t, 0) + b * r
        row = by_name.setdefault(s.name, [s.kind, 0, 0.0, 0, 0, 0])
        row[1] += r
        row[2] += s.cycles * r
        row[3] += s.macs * r
        row[4] += s.dram_r * r
        row[5] += s.dram_w * r
    cycles += drain
    stall["drain"] += drain
    if by_name:
        last = segs[-1].name
        by_name[last][2] += drain
    stall_i = {c: int(round(x)) for c, x in stall.items()}
    cycles_i = int(round(cycles))
    act_wb, wgt_wb = hw.act_width_bits / 8, hw.wgt_width_bits / 8
    psum_wb = float(hw.psum_word_bits) / 8
    buffers = {
        "ACT": BufferAccess(
            int(round(tot["act_reads"])), int(round(tot["act_fill_n"] + tot["act_vec_w_n"])),
            int(round(tot["act_reads"] * act_wb)), int(round(tot["act_fill"] + tot["act_vec_w"])),
            hw.act_width_bits,
        ),
        "WGT": BufferAccess(
            int(round(tot["wgt_reads"])), int(round(tot["wgt_fill_n"])),
            int(round(tot["wgt_reads"] * wgt_wb)), int(round(tot["wgt_fill"])), hw.wgt_width_bits,
        ),
        "PSUM": BufferAccess(
            int(round(tot["psum_reads"] + tot["psum_vec_r_n"])), int(round(tot["psum_writes"])),
            int(round(tot["psum_reads"] * psum_wb + tot["psum_vec_r"])),
            int(round(tot["psum_writes"] * psum_wb)), int(round(float(hw.psum_word_bits))),
        ),
    }  # fmt: skip
    dram = DramAccess(
        int(round(tot["n_r"])), int(round(tot["n_w"])), int(round(tot["dram_r"])),
        int(round(tot["dram_w"])), dict(sorted(tensors.items())),
    )  # fmt: skip
    kinds = {
        k: KindStats(v[0], v[1], int(round(v[2])), int(v[3]), int(v[4]), int(v[5]))
        for k, v in by_name.items()
    }
    notes = ("analytical (closed form)", *notes_fn(workload, engine="")[1:])
    return stats_fn(arch, workload, hw, "analytical", cycles_i, int(round(tot["macs"])), stall_i,
                    buffers, dram, kinds, notes)  # fmt: skip
