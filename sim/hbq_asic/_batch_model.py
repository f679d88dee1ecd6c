"""The analytical model's GEMM and attention over a batch of designs at once (numpy).

Internal to :mod:`._batch`. Each function here is the column form of its namesake in
:mod:`.analytical`: the same closed forms, evaluated for every design of a batch in one numpy
expression. Where the scalar model branches on a tile class or a query tile, the batch form
evaluates every class of the largest structure and masks the ones a design does not have (their
terms are exact zeros), so each design sees the very same terms as the scalar model.

Exactness (tests/unit/test_dse_batch.py checks every metric of every shipped sweep point):
integer quantities (MACs, bytes, accesses, tile occupancies, attention cycles) are summed in
int64 and are exact; the two accumulators that take fractional terms, a GEMM's cycles and its
``dram_bandwidth`` stall (the DMA time of a tile spread over ``count`` tiles), are added term by
term in the scalar model's order, so their floating-point results are bit-identical too.

Internal: :class:`Cols` (per-design constants), :func:`gemm`, :func:`attention`, :class:`Seg`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from .stats import STALL_CAUSES

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_INT_KEYS = (
    "macs", "dram_r", "dram_w", "n_r", "n_w", "act_reads", "wgt_reads", "psum_reads",
    "psum_writes", "act_fill", "act_fill_n", "wgt_fill", "wgt_fill_n", "act_vec_w",
    "act_vec_w_n", "psum_vec_r", "psum_vec_r_n",
)  # fmt: skip
"""The integer-valued totals of a segment (the scalar model's ``_assemble`` keys)."""


@dataclass
class Cols:
    """Per-design constants of one batch group, shape (N,) each (cycles unless stated).

    Attributes:
        n_pes, kstep, sa_n, fsm, wb (write-back stage), rs (result stage = wb + 1): PE array.
        shadow: weight shadow registers (bool).
        ii_np: token issue interval without passes (activation format of the group).
        ii, prop, act_step, wgt_words: per W-operand format name: token issue interval,
            weight propagation cycles, passes x ACT words of one step, WGT words of one step.
        act_width, wgt_width: buffer access widths, bits. psum_word_bits: PSUM word, bits
            (float, as the scalar model divides by it).
        vec, vec_lat: softmax unit elements per cycle and latency.
        bpc: sustained DRAM bytes per cycle (float). lat: DRAM latency.
        tm, tn, tk, nb, rows, keys: linear tile sizes, buffer slots, attention tile.
        resident_bits: ACT residency capacity, bits (-1: residency off).
    """

    n_pes: I64
    kstep: I64
    sa_n: I64
    fsm: I64
    wb: I64
    rs: I64
    shadow: npt.NDArray[np.bool_]
    ii_np: I64
    ii: dict[str, I64]
    prop: dict[str, I64]
    act_step: dict[str, I64]
    wgt_words: dict[str, I64]
    act_width: I64
    wgt_width: I64
    psum_word_bits: F64
    vec: I64
    vec_lat: I64
    bpc: F64
    lat: I64
    tm: I64
    tn: I64
    tk: I64
    nb: I64
    rows: I64
    keys: I64
    resident_bits: I64

    def dma(self, nbytes: I64) -> I64:
        """DRAM cycles of ``nbytes`` per design (``HwParams.dram_cycles``), broadcasting."""
        c = np.ceil(nbytes / self.bpc).astype(np.int64)
        return np.where(nbytes > 0, c, 0)


@dataclass
class Seg:
    """One segment's accumulated estimate for every design (the scalar ``_Seg``).

    Attributes:
        name, kind, repeat: as the scalar segment.
        cycles: float cycles, accumulated in the scalar model's order.
        stall: cycles by cause; ``dram_bandwidth`` float in order, the others exact.
        ints: the integer totals (:data:`_INT_KEYS`).
        tensors: DRAM bytes by tensor name.
    """

    name: str
    kind: str
    repeat: int
    n: int
    cycles: F64 = field(init=False)
    stall: dict[str, F64] = field(init=False)
    ints: dict[str, I64] = field(init=False)
    tensors: dict[str, I64] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cycles = np.zeros(self.n)
        self.stall = {c: np.zeros(self.n) for c in ("busy", *STALL_CAUSES)}
        self.ints = {k: np.zeros(self.n, dtype=np.int64) for k in _INT_KEYS}

    def add(self, key: str, x: Any) -> None:
        """Add an integer total (summed over a leading class axis when ``x`` has one)."""
        x = np.asarray(x, dtype=np.int64)
        self.ints[key] += x.sum(axis=0) if x.ndim > 1 else x

    def add_tensor(self, name: str, x: Any) -> None:
        """Add DRAM bytes of a tensor (summed over a leading class axis)."""
        x = np.asarray(x, dtype=np.int64)
        x = x.sum(axis=0) if x.ndim > 1 else x
        self.tensors[name] = self.tensors[name] + x if name in self.tensors else x

    def add_stall_int(self, cause: str, x: Any) -> None:
        """An integer-valued stall (exact in any order): to the cause and to the cycles."""
        x = np.asarray(x, dtype=np.int64)
        x = x.sum(axis=0) if x.ndim > 1 else x
        self.stall[cause] = self.stall[cause] + x
        self.cycles = self.cycles + x


def nbytes(elems: Any, bits: Fraction) -> I64:
    """``ceil(elems * bits / 8)`` in exact integer arithmetic (the scalar ``_nbytes``)."""
    e = np.asarray(elems, dtype=np.int64)
    return -(-(e * bits.numerator) // (8 * bits.denominator))


def _cdiv(a: Any, b: Any) -> Any:
    return -(-a // b)


@dataclass
class Tile:
    """A PE tile's closed form (``pe_tile_closed_form``) for arrays of shapes."""

    occ: I64
    ideal: I64
    prop_x: I64
    issue_x: I64
    passes_x: I64
    turn: I64
    waves: I64
    ksteps: I64
    psum_reads: I64
    psum_writes: I64


def tile(c: Cols, m: Any, n: Any, k: Any, rd: Any, fb: str) -> Tile:
    """The closed-form tile occupancy of ``m x n x k`` tiles, W operand format ``fb``.

    Args:
        c: the designs' constants (arrays of shape (N,), broadcast against the shapes).
        m, n, k: tile sizes (int arrays broadcasting to (..., N); > 0).
        rd: the tile reads partial sums back (bool or int array).
        fb: the W operand's format name.

    Returns:
        The :class:`Tile` fields as int64 arrays, cycles (``psum_*``: accesses).
    """
    ii, ii_np, prop = c.ii[fb], c.ii_np, c.prop[fb]
    ksteps = _cdiv(k, c.kstep)
    groups = _cdiv(n, c.n_pes)
    waves = ksteps * groups
    stream = 1 + (m - 1) * ii
    exposed = np.where(c.shadow, np.maximum(0, prop - stream), prop)
    turn = c.fsm + np.maximum(exposed, c.wb) - 1
    last_issue = c.fsm + prop + waves * stream - 1 + (waves - 1) * turn
    occ = last_issue + c.rs + c.fsm
    rem = n % c.n_pes
    words = (n // c.n_pes) * _cdiv(c.n_pes, c.sa_n) + np.where(rem > 0, _cdiv(rem, c.sa_n), 0)
    tokens = m * waves
    prop_x = prop + (waves - 1) * exposed
    issue_x = waves * (m - 1) * (ii_np - 1)
    passes_x = waves * (m - 1) * (ii - ii_np)
    return Tile(
        occ=occ,
        ideal=tokens,
        prop_x=prop_x,
        issue_x=issue_x,
        passes_x=passes_x,
        turn=occ - tokens - prop_x - issue_x - passes_x,
        waves=waves,
        ksteps=ksteps,
        psum_reads=m * words * (ksteps - 1 + np.asarray(rd, dtype=np.int64)),
        psum_writes=m * words * ksteps,
    )


def compute(seg: Seg, c: Cols, t: Tile, m: Any, n: Any, fb: str, count: Any) -> None:
    """Array-side buffer accesses and the tile's own stalls (``_Model.compute``), without the
    tile's cycles (the caller adds those in the scalar model's order)."""
    for cause, x in (
        ("busy", t.ideal),
        ("weight_propagation", t.prop_x),
        ("issue_interval", t.issue_x),
        ("operand_passes", t.passes_x),
        ("pipeline_turnaround", t.turn),
    ):
        y = np.asarray(x * count, dtype=np.int64)
        seg.stall[cause] = seg.stall[cause] + (y.sum(axis=0) if y.ndim > 1 else y)
    seg.add("act_reads", m * t.waves * c.act_step[fb] * count)
    seg.add("wgt_reads", n * t.ksteps * c.wgt_words[fb] * count)
    seg.add("psum_reads", t.psum_reads * count)
    seg.add("psum_writes", t.psum_writes * count)


_MI = np.repeat(np.arange(2), 9)
_NI = np.tile(np.repeat(np.arange(3), 3), 2)
_KJ = np.tile(np.arange(3), 6)
"""Tile classes of a GEMM in the scalar model's loop order: M class (full, rest) outer, then N
class (first channel tile, the other full ones, rest), then K class (first, middle, last)."""


def _gemm_classes(c: Cols, m: int, n: int, k: int, resident: Any) -> dict[str, Any]:
    """Every tile class of an ``m x n x k`` GEMM, shape (18, N): sizes, counts, flags."""
    z = np.zeros_like(c.tm)
    fm, rm = m // c.tm, m % c.tm
    fn, rn = n // c.tn, n % c.tn
    split = resident & (fn > 1)  # a resident slab: the first channel tile is a class alone
    n_k = _cdiv(k, c.tk)
    msize, mcount = np.stack([c.tm, rm]), np.stack([fm, (rm > 0).astype(np.int64)])
    mfirst = np.stack([fm > 0, fm == 0])
    nsize = np.stack([c.tn, c.tn, rn])
    ncount = np.stack([np.where(split, 1, fn), np.where(split, fn - 1, 0), (rn > 0) + z])
    nfirst = np.stack([fn > 0, z > 0, fn == 0])
    ksize = np.stack([np.where(n_k == 1, k, c.tk), c.tk, k - (n_k - 1) * c.tk])
    kcount = np.stack([z + 1, np.maximum(n_k - 2, 0), (n_k > 1) + z])
    klast = np.stack([n_k == 1, z > 0, z == 0])
    count = mcount[_MI] * ncount[_NI] * kcount[_KJ]
    # Classes no design of the group has are dropped (the others keep their order).
    keep = np.flatnonzero((count > 0).any(axis=1))
    mi, ni, kj = _MI[keep], _NI[keep], _KJ[keep]
    count = count[keep]
    return {
        "ms": np.maximum(msize[mi], 1), "ns": np.maximum(nsize[ni], 1),
        "ks": np.maximum(ksize[kj], 1), "rd": (kj > 0)[:, None] + z,
        "count": count, "ex": count > 0, "mcount": mcount[mi], "mfirst": mfirst[mi],
        "nfirst": nfirst[ni], "last": klast[kj], "n_k": n_k,
    }  # fmt: skip


def _ordered(acc: F64, terms: F64) -> F64:
    """``acc`` plus each row of ``terms`` in turn (the scalar model's order of float adds)."""
    for row in terms:
        acc = acc + row
    return acc


def gemm(
    c: Cols,
    seg: Seg,
    *,
    m: int,
    n: int,
    k: int,
    bits_a: Fraction,
    fb: str,
    bits_w: Fraction,
    bits_y: Fraction,
    tensors: tuple[str, str, str],
) -> None:
    """One GEMM for every design (the scalar ``_gemm``: loop order m, n, k).

    Args:
        c: the designs' constants.
        seg: the segment to add to.
        m, n, k: GEMM shape (tokens, output channels, reduction).
        bits_a, bits_w, bits_y: storage bits per element of A, W and the output.
        fb: the W operand's format name.
        tensors: names of A, W and the output, for the DRAM bytes by tensor.
    """
    resident = (c.resident_bits >= 0) & (
        c.nb * _slab_bits(m, k, c.tm, c.tk, bits_a) <= c.resident_bits
    )
    cl = _gemm_classes(c, m, n, k, resident)
    ms, ns, ks, count, ex = cl["ms"], cl["ns"], cl["ks"], cl["count"], cl["ex"]
    t = tile(c, ms, ns, ks, cl["rd"], fb)
    compute(seg, c, t, ms, ns, fb, count)
    a_b, w_b = nbytes(ms * ks, bits_a), nbytes(ns * ks, bits_w)
    n_n = _cdiv(n, c.tn)
    several_k = cl["n_k"] > 1
    a_reads = np.where(several_k, count, np.where(cl["nfirst"], cl["mcount"], 0))
    w_reads = np.where(several_k | (n_n > 1), count, cl["mfirst"].astype(np.int64))
    a_reads = np.where(resident, np.where(cl["nfirst"], count, 0), a_reads) * ex
    w_reads = w_reads * ex
    last = cl["last"] & ex
    y_b = np.where(last, nbytes(ms * ns, bits_y), 0)
    d_a, d_w, d_y = c.dma(a_b), c.dma(w_b), c.dma(y_b)
    d = (d_a * a_reads + d_w * w_reads) / np.maximum(count, 1) + d_y
    extra = np.where(c.nb >= 2, np.maximum(0.0, d - t.occ), d)
    extra_n = np.where(ex, extra * count, 0.0)
    # cycles: per class its occupancy, then its DRAM wait, in the scalar order (floats)
    both = np.empty((2 * ms.shape[0], ms.shape[1]))
    both[0::2], both[1::2] = t.occ * count, extra_n
    seg.cycles = _ordered(seg.cycles, both)
    seg.stall["dram_bandwidth"] = _ordered(seg.stall["dram_bandwidth"], extra_n)
    seg.add("macs", np.full_like(c.tm, m * n * k))
    seg.add("dram_r", a_b * a_reads + w_b * w_reads)
    seg.add("n_r", a_reads + w_reads)
    seg.add("act_fill", a_b * a_reads)
    seg.add("wgt_fill", w_b * w_reads)
    seg.add("act_fill_n", np.ceil(a_b * 8 / c.act_width).astype(np.int64) * a_reads)
    seg.add("wgt_fill_n", np.ceil(w_b * 8 / c.wgt_width).astype(np.int64) * w_reads)
    seg.add("dram_w", y_b * count)
    seg.add("n_w", last * count)
    t_a, t_w, t_y = tensors
    seg.add_tensor(t_a, a_b * a_reads)
    seg.add_tensor(t_w, w_b * w_reads)
    seg.add_tensor(t_y, y_b * count)
    _bubble(c, seg, m, n_n, cl["n_k"], t.occ, d, d_a + d_w, d_y, ex, last)


def _slab_bits(m: int, k: int, tm: I64, tk: I64, bits: Fraction) -> I64:
    """``act_slab_bits`` per design: one token tile's activations, every K tile in whole bytes."""
    rows = np.minimum(m, tm)
    full, rest = k // tk, k % tk
    return 8 * (full * nbytes(rows * tk, bits) + np.where(rest > 0, nbytes(rows * rest, bits), 0))


def _bubble(
    c: Cols, seg: Seg, m: int, n_n: I64, n_k: I64, occ: I64, d: F64, reads: I64, d_y: I64,
    ex: Any, last: Any,
) -> None:  # fmt: skip
    """The pipeline bubble between GEMMs and the DRAM latency (end of the scalar ``_gemm``)."""
    cols = np.arange(occ.shape[1])
    i0 = np.argmax(ex, axis=0)  # the first tile class each design has
    il = occ.shape[0] - 1 - np.argmax(last[::-1], axis=0)  # its last class with the last K
    c0, d0, reads0 = occ[i0, cols], d[i0, cols], reads[i0, cols]
    cl, dl, write_l = occ[il, cols], d[il, cols], d_y[il, cols]
    double = c.nb >= 2
    several = double & (_cdiv(m, c.tm) * n_n * n_k != 1)
    b1 = np.where(several, np.maximum(c0, d0 - reads0) - np.maximum(c0, d0), 0.0)
    b2 = np.where(several, np.maximum(cl, dl - write_l) - np.maximum(cl, dl), 0.0)
    b3 = np.where(double, reads0 + write_l, 0).astype(np.float64)
    terms = np.stack([b1, b2, b3])
    seg.cycles = _ordered(seg.cycles, terms)
    seg.stall["dram_bandwidth"] = _ordered(seg.stall["dram_bandwidth"], terms)
    seg.stall["dram_latency"] = seg.stall["dram_latency"] + c.lat
    seg.cycles = seg.cycles + c.lat


def _key_tiles(c: Cols, r: I64, keys: I64, hd: int, fb: str, bits_kv: Fraction) -> tuple:
    """The QK and PV tiles of key tiles of ``r`` rows x ``keys``, and their (QK, PV, softmax
    chain, K + V DMA) cycles (the scalar ``key_tile``)."""
    qk = tile(c, r, keys, hd, False, fb)
    pv = tile(c, r, hd, keys, False, fb)
    d_kv = c.dma(nbytes(keys * hd, bits_kv))
    chain = _cdiv(r * keys, c.vec) + c.vec_lat + d_kv + c.lat
    return qk, pv, (qk.occ, pv.occ, chain, 2 * d_kv)


def _attention_work(
    c: Cols, seg: Seg, r: I64, keys: I64, hd: int, count: I64, fb: str, bits: tuple, tiles: tuple
) -> None:
    """Work, traffic and buffer accesses of ``count`` key tiles of ``r`` rows x ``keys``
    (``tiles``: their QK and PV tiles)."""
    bits_a, bits_kv, bits_p = bits
    qk, pv = tiles
    compute(seg, c, qk, r, keys, fb, count)
    compute(seg, c, pv, r, hd, fb, count)
    seg.cycles = seg.cycles + (qk.occ * count + pv.occ * count).sum(axis=0)
    kv_b = nbytes(keys * hd, bits_kv)
    seg.add("macs", 2 * r * keys * hd * count)
    seg.add("dram_r", 2 * kv_b * count)
    seg.add("n_r", 2 * count)
    seg.add_tensor("k_cache", kv_b * count)
    seg.add_tensor("v_cache", kv_b * count)
    seg.add("wgt_fill", 2 * kv_b * count)
    seg.add("wgt_fill_n", 2 * np.ceil(kv_b * 8 / c.wgt_width).astype(np.int64) * count)
    s_b, p_b = nbytes(r * keys, bits_p), nbytes(r * keys, bits_a)
    seg.add("psum_vec_r", s_b * count)
    seg.add("psum_vec_r_n", np.ceil(s_b * 8 / c.psum_word_bits).astype(np.int64) * count)
    seg.add("act_vec_w", p_b * count)
    seg.add("act_vec_w_n", np.ceil(p_b * 8 / c.act_width).astype(np.int64) * count)


def attention(
    c: Cols,
    seg: Seg,
    *,
    kv_heads: int,
    group: int,
    head_dim: int,
    q_tokens: int,
    q_start: int,
    n_keys: int,
    causal: bool,
    fb: str,
    bits: tuple[Fraction, Fraction, Fraction],
) -> None:
    """The fused attention for every design (the scalar ``_attention``), query tile by query
    tile as a (query tiles, designs) array; every term is an integer, so sums are exact.

    Args:
        c: the designs' constants. seg: the segment to add to.
        kv_heads, group, head_dim: KV heads, query heads per KV head, elements per head.
        q_tokens, q_start, n_keys: query tokens, the first one's position, keys in all.
        causal: skip key tiles wholly hidden by the causal mask.
        fb: the KV cache's format name.
        bits: storage bits per element of activations, the KV cache and partial sums.
    """
    bits_a, bits_kv, _ = bits
    tpt = c.rows // group
    n_qt = _cdiv(q_tokens, tpt)
    i = np.arange(int(n_qt.max()))[:, None]
    valid = (i < n_qt).astype(np.int64)
    t0 = q_start + i * tpt
    t1 = np.minimum(t0 + tpt, q_start + q_tokens)
    r = np.maximum((t1 - t0) * group, 1)
    j = _cdiv(t1 if causal else np.full_like(t1, n_keys), c.keys)
    lk = np.minimum(c.keys, n_keys - (j - 1) * c.keys)
    q_b = nbytes(r * head_dim, bits_a)
    many = j > 1
    keys = np.broadcast_to(c.keys, r.shape)
    qk_f, pv_f, full = _key_tiles(c, r, keys, head_dim, fb, bits_kv)
    qk_l, pv_l, (l0, l1, l2, l3) = _key_tiles(c, r, lk, head_dim, fb, bits_kv)
    f0, f1, f2, f3 = (np.where(many, x, 0) for x in full)
    busy = (j - 1) * (f0 + f1) + l0 + l1
    wait = np.maximum(0, f2 - np.where(j == 2, l0, f0))
    wait = wait + np.where(j > 2, (j - 2) * np.maximum(0, f2 - f0 - f1), 0)
    wait = wait + np.maximum(0, l2 - f1)
    wait = np.where(j == 1, l2, wait)
    wait = np.where(c.nb < 2, (j - 1) * (f2 + c.lat) + l2 + c.lat, wait)
    dma = (j - 1) * f3 + l3
    over = np.maximum(busy + wait, dma) - busy
    vec_part = np.where(busy + wait >= dma, np.minimum(over, wait), 0)
    heads = kv_heads * valid
    seg.add_stall_int("vector_unit", vec_part * heads)
    seg.add_stall_int("dram_bandwidth", (over - vec_part) * heads)
    words = _cdiv(head_dim, c.n_pes) * _cdiv(np.minimum(c.n_pes, head_dim), c.sa_n)
    seg.add("psum_reads", r * words * (j - 1) * heads)
    for key in ("dram_r", "dram_w", "act_fill"):
        seg.add(key, q_b * heads)
    seg.add("n_r", heads)
    seg.add("n_w", heads)
    seg.add_tensor("q", q_b * heads)
    seg.add_tensor("attn_out", q_b * heads)
    seg.add("act_fill_n", np.ceil(q_b * 8 / c.act_width).astype(np.int64) * heads)
    first_kv = nbytes(np.minimum(c.keys, n_keys) * head_dim, bits_kv)
    first_q = c.dma(q_b[0]) + c.dma(first_kv)
    last_o = c.dma(q_b[n_qt - 1, np.arange(q_b.shape[1])])
    seg.add_stall_int("dram_bandwidth", first_q + last_o)
    seg.add_stall_int("dram_latency", c.lat)
    _attention_work(c, seg, r, keys, head_dim, (j - 1) * heads, fb, bits, (qk_f, pv_f))
    _attention_work(c, seg, r, lk, head_dim, heads, fb, bits, (qk_l, pv_l))
