"""The reference's workload traces for the HBQ ASIC simulator (models/hbq/_trace.py, _workload.py).

Oracles: the original record-by-record ``gemm_trace`` (kept here, written with one
``TraceBuilder`` call per record) for the plain program; hand-derived orders, dependencies and byte
counts for the double-buffered program and the attention; brute-force loops over query tokens and
key tiles for the attention work; the [R-PM] MAC formulas for whole layers.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from coaccel.models.formats import resolve
from coaccel.models.hbq import (
    OperandStorage,
    WorkloadTiles,
    act_slab_bits,
    attention_trace,
    gemm_trace,
    iter_transformer_segments,
    operand_storage,
    psum_bits_per_element,
    transformer_segments,
)
from coaccel.spine.trace import Trace, TraceBuilder
from coaccel.spine.workload import ModelShape

# ------------------------------------------------------------------ the original gemm_trace


def _fmt(fmt, role):
    plain = {"fp32": 32, "fp16": 16, "bf16": 16}
    if isinstance(fmt, str) and fmt.lower() in plain:
        return fmt.lower(), Fraction(plain[fmt.lower()])
    spec = resolve(fmt)
    if isinstance(fmt, str) and getattr(spec, "role", role) != role:
        spec = resolve(fmt, role=role)
    return spec.name, Fraction(spec.bits_per_element())


def _sizes(total, tile):
    full, rest = divmod(total, tile)
    return [tile] * full + ([rest] if rest else [])


def _bytes(rows, cols, bits):
    nbytes = [[math.ceil(r * c * bits / 8) for c in cols] for r in rows]
    flat = [b for row in nbytes for b in row]
    offs = list(itertools.accumulate([0, *flat[:-1]]))
    addr = [offs[i * len(cols) : (i + 1) * len(cols)] for i in range(len(rows))]
    return nbytes, addr


def reference_gemm_trace(m, n, k, fmt_a, fmt_w, *, tile_m, tile_n, tile_k, order, psum_mode,
                         out, sa_n=16):  # fmt: skip
    """The first implementation of gemm_trace: one builder call per record."""
    name_a, bits_a = _fmt(fmt_a, "activation")
    name_w, bits_w = _fmt(fmt_w, "weight")
    bits_p = psum_bits_per_element(psum_mode, sa_n=sa_n)
    bits_y = Fraction(16 if out == "fp16" else 32)
    sizes = {"m": _sizes(m, tile_m), "n": _sizes(n, tile_n), "k": _sizes(k, tile_k)}
    nt = {d: len(s) for d, s in sizes.items()}
    a_b, a_a = _bytes(sizes["m"], sizes["k"], bits_a)
    w_b, w_a = _bytes(sizes["n"], sizes["k"], bits_w)
    p_b, p_a = _bytes(sizes["m"], sizes["n"], bits_p)
    y_b, y_a = _bytes(sizes["m"], sizes["n"], bits_y)
    meta = {
        "op": "gemm", "m": m, "n": n, "k": k, "tile_m": tile_m, "tile_n": tile_n,
        "tile_k": tile_k, "order": order, "fmt_a": name_a, "fmt_w": name_w,
        "bits_a": float(bits_a), "bits_w": float(bits_w), "psum_mode": psum_mode,
        "psum_bits": float(bits_p), "out": out,
    }  # fmt: skip
    b = TraceBuilder(producer="coaccel.models.hbq.gemm", workload=meta)
    prev_a = prev_w = None
    read_seq = -1
    for idx in itertools.product(*(range(nt[d]) for d in order)):
        t = dict(zip(order, idx, strict=True))
        mi, ni, ki = t["m"], t["n"], t["k"]
        if (mi, ki) != prev_a:
            read_seq = b.memory(space="DRAM", rw="read", tensor="A", nbytes=a_b[mi][ki],
                                addr=a_a[mi][ki])  # fmt: skip
            prev_a = (mi, ki)
        if (ni, ki) != prev_w:
            read_seq = b.memory(space="DRAM", rw="read", tensor="W", nbytes=w_b[ni][ki],
                                addr=w_a[ni][ki])  # fmt: skip
            prev_w = (ni, ki)
        if ki > 0:
            read_seq = b.memory(space="PSUM", rw="read", tensor="psum", nbytes=p_b[mi][ni],
                                addr=p_a[mi][ni])  # fmt: skip
        c = b.compute(op="gemm", unit="pe_array", m=sizes["m"][mi], n=sizes["n"][ni],
                      k=sizes["k"][ki], fmt_a=name_a, fmt_b=name_w,
                      tile=(mi * nt["n"] + ni) * nt["k"] + ki, dep=read_seq)  # fmt: skip
        if ki < nt["k"] - 1:
            b.memory(space="PSUM", rw="write", tensor="psum", dep=c, nbytes=p_b[mi][ni],
                     addr=p_a[mi][ni])  # fmt: skip
        else:
            b.memory(space="DRAM", rw="write", tensor="Y", dep=c, nbytes=y_b[mi][ni],
                     addr=y_a[mi][ni])  # fmt: skip
    return b.build()


@pytest.mark.parametrize("order", ["mnk", "mkn", "nmk", "nkm", "kmn", "knm"])
def test_plain_program_equals_the_record_by_record_original(order):
    cases = [
        (100, 70, 96, 64, 32, 32, "mxfp4", "nvfp4", "fp32", "fp32"),
        (256, 512, 1024, 128, 256, 512, "hbq-a", "hbq-a", "mxint8_running", "fp16"),
        (33, 17, 65, 8, 16, 32, "fp16", "hbq-e", "mxint8_group", "fp16"),
        (1, 300, 256, 1, 64, 128, "hbq-e", "hbq-e", "fp16", "fp32"),
        (8, 8, 8, 8, 8, 8, "mxfp4", "mxfp4", "fp32", "fp16"),
    ]
    for m, n, k, tm, tn, tk, fa, fw, pm, out in cases:
        want = reference_gemm_trace(m, n, k, fa, fw, tile_m=tm, tile_n=tn, tile_k=tk,
                                    order=order, psum_mode=pm, out=out)  # fmt: skip
        got = gemm_trace(m, n, k, fa, fw, tile_m=tm, tile_n=tn, tile_k=tk, order=order,
                         psum_mode=pm, out=out)  # fmt: skip
        assert got.equals(want), (m, n, k, order, fa, fw)


# ------------------------------------------------------------------ double-buffered program


def _records(t: Trace) -> list[tuple]:
    """(seq, kind, details) in program order."""
    sp, ph, te = t.table("space"), t.table("phase"), t.table("tensor")
    out = [
        (int(r["seq"]), "M", sp[r["space"]], ph[r["phase"]], te[r["tensor"]], int(r["rw"]),
         int(r["dep"]), int(r["nbytes"]))
        for r in t.memory
    ]  # fmt: skip
    out += [
        (int(r["seq"]), "C", int(r["m"]), int(r["n"]), int(r["k"]), int(r["tile"]), int(r["dep"]))
        for r in t.compute
    ]
    return sorted(out)


def test_double_buffered_program_by_hand():
    # M=4, N=4, K=8 in 2x1x2 tiles (order m, n, k) of 2x4x4; HBQ-E operands and outputs.
    t = gemm_trace(4, 4, 8, "hbq-e", "hbq-e", tile_m=2, tile_n=4, tile_k=4, order="mnk",
                   n_buffers=2, psum_mode="mxint8_running", out="hbq-e")  # fmt: skip
    # A tile 2x4 at 5.125 bits = 41 bits -> 6 B; W 4x4 at 4.1328125 bits -> 9 B (ceil 8.27);
    # psum 2x4 at 8.5 bits -> 9 B (8.5); Y 2x4 at 5.125 bits -> 6 B.
    want = [
        (0, "M", "DRAM", "act", "A", 0, -1, 6),   # reads of tile 0 ...
        (1, "M", "DRAM", "wgt", "W", 0, -1, 9),
        (2, "M", "DRAM", "act", "A", 0, -1, 6),   # ... and of tile 1, issued before compute 0
        (3, "M", "DRAM", "wgt", "W", 0, -1, 9),
        (4, "C", 2, 4, 4, 0, 1),                  # compute 0 waits for its newest read
        (5, "M", "PSUM", "psum", "psum", 1, 4, 9),
        (6, "M", "DRAM", "act", "A", 0, 4, 6),    # tile 2 reuses tile 0's slots: waits for C0
        (7, "M", "DRAM", "wgt", "W", 0, 4, 9),
        (8, "M", "PSUM", "psum", "psum", 0, 5, 9),  # reads back the write of tile 0
        (9, "C", 2, 4, 4, 1, 3),
        (10, "M", "DRAM", "out", "Y", 1, 9, 6),
        (11, "M", "DRAM", "act", "A", 0, 9, 6),
        (12, "M", "DRAM", "wgt", "W", 0, 9, 9),
        (13, "C", 2, 4, 4, 2, 7),
        (14, "M", "PSUM", "psum", "psum", 1, 13, 9),
        (15, "M", "PSUM", "psum", "psum", 0, 14, 9),
        (16, "C", 2, 4, 4, 3, 12),
        (17, "M", "DRAM", "out", "Y", 1, 16, 6),
    ]  # fmt: skip
    assert _records(t) == want


def test_single_buffer_program_waits_for_the_previous_compute():
    t = gemm_trace(4, 4, 8, "mxfp4", "mxfp4", tile_m=4, tile_n=4, tile_k=4, order="mnk",
                   n_buffers=1, psum_mode="fp16", out="fp16")  # fmt: skip
    recs = _records(t)
    # Tile 1's reads come after compute 0 and wait for it (one slot).
    assert [r[:2] for r in recs] == [
        (0, "M"), (1, "M"), (2, "C"), (3, "M"), (4, "M"), (5, "M"), (6, "M"), (7, "C"), (8, "M"),
    ]  # fmt: skip
    assert recs[3][2:5] == ("PSUM", "psum", "psum") and recs[3][6] == 2  # written by C0
    assert recs[4][4] == "A" and recs[4][6] == 2  # tile 1's A read reuses C0's slot
    assert recs[5][4] == "W" and recs[5][6] == 2
    assert recs[6][2] == "PSUM" and recs[6][6] == 3  # reads back what C0 wrote
    assert recs[7][6] == 5  # compute 1 waits for its newest read (W of tile 1)


@pytest.mark.parametrize("nb", [1, 2, 3])
def test_double_buffered_program_invariants(nb):
    m, n, k = 300, 200, 640
    t = gemm_trace(m, n, k, "hbq-a", "hbq-a", tile_m=128, tile_n=64, tile_k=128, order="mnk",
                   n_buffers=nb, psum_mode="mxint8_running", out="hbq-a")  # fmt: skip
    comp = t.compute
    assert t.total_macs() == m * n * k
    # Every compute's reads: the order m, n, k re-reads A once per N tile and W once per M tile.
    n_mt, n_nt = 3, 4
    bits_a = Fraction(5) + Fraction(40, 128)  # HBQ-A activation: 5 + (8 + 16*2) / 128
    bits_w = Fraction(4) + Fraction(41, 128)  # weight: + the Mix selector bit
    a_once = sum(math.ceil(r * c * bits_a / 8) for r in (128, 128, 44) for c in (128,) * 5)
    w_once = sum(math.ceil(r * c * bits_w / 8) for r in (64, 64, 64, 8) for c in (128,) * 5)
    assert t.total_bytes(space="DRAM", rw="read", tensor="A") == a_once * n_nt
    assert t.total_bytes(space="DRAM", rw="read", tensor="W") == w_once * n_mt
    # Reads of operand j wait for the compute of tile j - nb (their buffer slot).
    mem = t.memory
    c_seq = comp["seq"]
    for tensor in ("A", "W"):
        code = t.table("tensor").index(tensor)
        deps = mem["dep"][
            (mem["tensor"] == code) & (mem["space"] == t.table("space").index("DRAM"))
        ]
        assert (deps[:nb] == -1).all()
        assert (deps[nb:] == c_seq[: len(deps) - nb]).all()
    # A read is issued at most nb - 1 computes ahead of the compute that uses it.
    reads = mem["seq"][mem["tensor"] == t.table("tensor").index("A")]
    before = np.searchsorted(c_seq, reads)  # computes issued before each read
    assert (np.arange(reads.size) - before <= nb - 1).all()
    assert set(t.decode("memory", "phase")) == {"act", "wgt", "psum", "out"}


@pytest.mark.parametrize("nb", [1, 2])
def test_resident_activation_slab(nb):
    m, n, k = 300, 200, 640
    n_mt, n_nt, n_kt = 3, 4, 5
    kw = dict(tile_m=128, tile_n=64, tile_k=128, order="mnk", n_buffers=nb,
              psum_mode="mxint8_running", out="hbq-a")  # fmt: skip
    t = gemm_trace(m, n, k, "hbq-a", "hbq-a", a_resident=True, **kw)
    streamed = gemm_trace(m, n, k, "hbq-a", "hbq-a", **kw)
    assert t.meta["workload"]["a_resident"] is True
    assert "a_resident" not in streamed.meta["workload"]
    bits_a = Fraction(5) + Fraction(40, 128)
    a_once = sum(math.ceil(r * c * bits_a / 8) for r in (128, 128, 44) for c in (128,) * 5)
    # each A tile read once (at its token tile's first channel tile), W as before
    assert t.total_bytes(space="DRAM", rw="read", tensor="A") == a_once
    assert t.total_bytes(space="DRAM", rw="read", tensor="W") == streamed.total_bytes(
        space="DRAM", rw="read", tensor="W"
    )
    assert t.total_macs() == streamed.total_macs() == m * n * k
    assert np.array_equal(t.compute["tile"], streamed.compute["tile"])
    mem, c_seq = t.memory, t.compute["seq"]
    is_a = (mem["tensor"] == t.table("tensor").index("A")) & (
        mem["space"] == t.table("space").index("DRAM")
    )
    a_seq, a_dep = mem["seq"][is_a], mem["dep"][is_a]
    assert a_seq.size == n_mt * n_kt
    # read j = A(j // 5, j % 5); the first nb slabs have free slots, then read j overwrites
    # A(mi - nb, ki), last used by the compute of tile (mi - nb, last channel tile, ki)
    slots = nb * n_kt
    assert (a_dep[:slots] == -1).all()
    for j in range(slots, a_seq.size):
        mi, ki = divmod(j, n_kt)
        assert a_dep[j] == c_seq[((mi - nb) * n_nt + n_nt - 1) * n_kt + ki]
        assert a_dep[j] < a_seq[j]
    # every compute comes after the read of its A tile
    tiles = np.arange(n_mt * n_nt * n_kt)
    mi, ki = tiles // (n_nt * n_kt), tiles % n_kt
    assert (a_seq[mi * n_kt + ki] < c_seq).all()
    with pytest.raises(ValueError, match="a_resident=True needs order='mnk'"):
        gemm_trace(m, n, k, "hbq-a", "hbq-a", a_resident=True, **(kw | {"order": "nkm"}))


def test_act_slab_bits_and_the_residency_rule():
    bits = Fraction(5) + Fraction(40, 128)  # HBQ-A activation
    # 128 x 640 in five 128 x 128 tiles of ceil(128 * 128 * 5.3125 / 8) = 10880 B
    assert act_slab_bits(300, 640, 128, 128, bits) == 5 * 10880 * 8
    # fewer tokens than a tile: the slab has the tokens there are (1 x 640: 5 x 85 B)
    assert act_slab_bits(1, 640, 128, 128, bits) == 5 * 85 * 8
    tiles = WorkloadTiles(128, 64, 128, 2, 64, 64, "mxint8_running")
    assert not tiles.a_resident(300, 640, bits)  # residency off
    on = WorkloadTiles(128, 64, 128, 2, 64, 64, "mxint8_running", act_resident_bits=2 * 435200)
    assert on.a_resident(300, 640, bits)  # two slabs fit exactly
    assert not on.a_resident(300, 768, bits)  # one more K tile does not


def test_swiglu_epilogue_halves_the_output():
    t = gemm_trace(64, 512, 256, "hbq-e", "hbq-e", tile_m=64, tile_n=256, tile_k=128,
                   order="mnk", n_buffers=2, psum_mode="mxint8_running", out="hbq-e",
                   out_cols_per_n=Fraction(1, 2))  # fmt: skip
    # 64 tokens x 256 outputs (of 512 columns) at 5.125 bits, per 64 x 256-column tile:
    # 64 * 128 * 5.125 / 8 = 5248 B each.
    assert t.total_bytes(tensor="Y") == 2 * 5248 == 64 * 256 * 5.125 / 8


def test_operand_storage_formats():
    fmt = OperandStorage("mxfp8_e2m5", Fraction(33, 4))
    assert operand_storage(fmt, "activation") == ("mxfp8_e2m5", Fraction(33, 4))
    assert operand_storage("fp16", "kv") == ("fp16", Fraction(16))
    assert operand_storage("hbq-e", "kv") == ("hbq-e", Fraction(4) + Fraction(16, 128))
    t = gemm_trace(32, 32, 64, fmt, "mxfp4", tile_m=32, tile_n=32, tile_k=64, n_buffers=2,
                   order="mnk", out=fmt)  # fmt: skip
    assert t.total_bytes(tensor="A") == 32 * 64 * 33 // 4 // 8
    with pytest.raises(ValueError, match="bits=0 must be positive"):
        OperandStorage("x", Fraction(0))


# ------------------------------------------------------------------ attention


def _tiles(**kw):
    base = dict(tile_m=64, tile_n=64, tile_k=64, n_buffers=2, attn_rows=8, attn_keys=16,
                psum_mode="mxint8_running", sa_n=16)  # fmt: skip
    base.update(kw)
    return WorkloadTiles(**base)


def _attention_work_brute_force(kv_heads, group, hd, q_tokens, q_start, n_keys, causal, rows_t,
                                keys_t):  # fmt: skip
    """(QK MACs + PV MACs, key tiles) by walking every query tile and every key tile."""
    macs = tiles = 0
    per = rows_t // group
    for _h in range(kv_heads):
        t = q_start
        while t < q_start + q_tokens:
            t_end = min(t + per, q_start + q_tokens)
            rows = (t_end - t) * group
            for k0 in range(0, n_keys, keys_t):
                if causal and k0 > t_end - 1:
                    break  # every key of this tile is after every query of the tile
                keys = min(keys_t, n_keys - k0)
                macs += 2 * rows * keys * hd
                tiles += 1
            t = t_end
    return macs, tiles


@pytest.mark.parametrize(
    "kv_heads,group,q_tokens,q_start,causal,nb",
    [
        (2, 4, 37, 0, True, 2),
        (1, 2, 50, 0, False, 2),
        (3, 1, 1, 70, True, 2),
        (2, 4, 37, 0, True, 1),
    ],
)
def test_attention_work_and_traffic(kv_heads, group, q_tokens, q_start, causal, nb):
    hd, rows_t, keys_t = 32, 8, 16
    n_keys = q_start + q_tokens
    tiles = _tiles(n_buffers=nb, attn_rows=rows_t, attn_keys=keys_t)
    t = attention_trace(kv_heads=kv_heads, group=group, head_dim=hd, q_tokens=q_tokens,
                        q_start=q_start, n_keys=n_keys, causal=causal, fmt_act="hbq-e",
                        fmt_kv="hbq-e", tiles=tiles)  # fmt: skip
    macs, n_kt = _attention_work_brute_force(kv_heads, group, hd, q_tokens, q_start, n_keys,
                                             causal, rows_t, keys_t)  # fmt: skip
    assert t.total_macs() == macs
    ops = t.decode("compute", "op")
    assert (ops == "gemm").sum() == 2 * n_kt and (ops == "softmax").sum() == n_kt
    # K and V bytes: every key tile read once for its query tile, at 4.125 bits (HBQ-E KV).
    kv_bits = Fraction(4) + Fraction(16, 128)
    kv_bytes = 0
    per = rows_t // group
    for _h in range(kv_heads):
        for t0 in range(q_start, q_start + q_tokens, per):
            t1 = min(t0 + per, q_start + q_tokens)
            for k0 in range(0, n_keys, keys_t):
                if causal and k0 > t1 - 1:
                    break
                kv_bytes += math.ceil(min(keys_t, n_keys - k0) * hd * kv_bits / 8)
    assert t.total_bytes(tensor="k_cache") == kv_bytes == t.total_bytes(tensor="v_cache")
    # Q read and output written once per query row.
    q_bits = Fraction(5) + Fraction(16, 128)
    n_qt = math.ceil(q_tokens / per)
    q_bytes = kv_heads * sum(
        math.ceil(min(per, q_tokens - i * per) * group * hd * q_bits / 8) for i in range(n_qt)
    )
    assert t.total_bytes(tensor="q") == q_bytes == t.total_bytes(tensor="attn_out", rw="write")


def test_attention_dependencies():
    t = attention_trace(kv_heads=1, group=2, head_dim=32, q_tokens=4, q_start=0, n_keys=40,
                        causal=False, fmt_act="hbq-e", fmt_kv="hbq-e",
                        tiles=_tiles(attn_rows=8, attn_keys=16))  # fmt: skip
    recs = {r[0]: r for r in _records(t)}
    by_seq = sorted(recs)
    units = dict(zip(t.compute["seq"].tolist(), t.decode("compute", "unit").tolist(), strict=True))
    qk = [s for s in by_seq if recs[s][1] == "C" and units[s] == "pe_array" and recs[s][4] == 32]
    pv = [s for s in by_seq if recs[s][1] == "C" and units[s] == "pe_array" and recs[s][3] == 32]
    sm = [s for s in by_seq if recs[s][1] == "C" and units[s] == "vector"]
    assert len(qk) == len(pv) == len(sm) == 3  # 40 keys in tiles of 16, 16, 8
    k_reads = [s for s in by_seq if recs[s][1] == "M" and recs[s][4] == "k_cache"]
    v_reads = [s for s in by_seq if recs[s][1] == "M" and recs[s][4] == "v_cache"]
    for j in range(3):
        assert recs[qk[j]][-1] == k_reads[j]  # QK waits for its K tile
        assert recs[sm[j]][-1] == qk[j]  # softmax waits for the scores
        assert recs[v_reads[j]][6] == sm[j]  # V is read after the softmax
        assert recs[pv[j]][-1] == v_reads[j]  # PV waits for V
    # One tile of lookahead: QK of the next key tile before PV of this one.
    assert qk[0] < qk[1] < pv[0] < qk[2] < pv[1] < pv[2]
    assert recs[k_reads[2]][6] == qk[0]  # K slot reuse (two slots)
    out = [s for s in by_seq if recs[s][1] == "M" and recs[s][4] == "attn_out"]
    assert len(out) == 1 and recs[out[0]][6] == pv[2]


# ------------------------------------------------------------------ one record at a time


def _rebuilt_one_by_one(t: Trace) -> Trace:
    """The trace rebuilt with one builder call per record, in seq order: the definition of the
    record order and of the string tables (names in order of first use)."""
    b = TraceBuilder(producer=t.meta["producer"], workload=t.meta["workload"],
                     config_digest=t.meta["config_digest"], seed=t.meta["seed"])  # fmt: skip
    names = {f: t.decode(kind, f) for kind, f in (("memory", "space"), ("memory", "tensor"),
             ("memory", "phase"), ("compute", "op"), ("compute", "unit"), ("compute", "fmt_a"),
             ("compute", "fmt_b"))}  # fmt: skip
    rows = [(int(s), "memory", i) for i, s in enumerate(t.memory["seq"])]
    rows += [(int(s), "compute", i) for i, s in enumerate(t.compute["seq"])]
    for _, kind, i in sorted(rows):
        r = getattr(t, kind)[i]
        if kind == "memory":
            b.memory(space=names["space"][i], tensor=names["tensor"][i], phase=names["phase"][i],
                     rw=int(r["rw"]), addr=int(r["addr"]), nbytes=int(r["nbytes"]),
                     stride=int(r["stride"]), count=int(r["count"]), dep=int(r["dep"]),
                     kernel=int(r["kernel"]), cta=int(r["cta"]),
                     stream=int(r["stream"]))  # fmt: skip
        else:
            b.compute(op=names["op"][i], unit=names["unit"][i], fmt_a=names["fmt_a"][i],
                      fmt_b=names["fmt_b"][i], m=int(r["m"]), n=int(r["n"]), k=int(r["k"]),
                      macs=int(r["macs"]), tile=int(r["tile"]), dep=int(r["dep"]),
                      kernel=int(r["kernel"]), cta=int(r["cta"]),
                      stream=int(r["stream"]))  # fmt: skip
    return b.build()


@pytest.mark.parametrize("nb", [None, 1, 2, 3])
def test_bulk_traces_equal_one_record_at_a_time(nb):
    kw = {} if nb is None else {"n_buffers": nb, "out": "hbq-e"}
    for order in ("nkm", "mnk", "kmn"):
        t = gemm_trace(70, 50, 300, "hbq-e", "mxfp4", tile_m=32, tile_n=16, tile_k=128,
                       order=order, psum_mode="mxint8_running", **kw)  # fmt: skip
        assert t.equals(_rebuilt_one_by_one(t)), order
        assert (t.compute["cta"] == -1).all() and t.meta["tensors"] == {}
        assert t.sparsity.size == 0 and t.events.size == 0
    if nb is not None:
        for causal, q_start in ((True, 0), (False, 5)):
            a = attention_trace(kv_heads=2, group=2, head_dim=32, q_tokens=21, q_start=q_start,
                                n_keys=40, causal=causal, fmt_act="hbq-e", fmt_kv="hbq-e",
                                tiles=_tiles(n_buffers=nb, attn_rows=8, attn_keys=16))  # fmt: skip
            assert a.equals(_rebuilt_one_by_one(a)), causal


def test_traces_are_stamped_with_config_digest_and_seed():
    digest = "ab" * 32
    g = gemm_trace(8, 8, 8, "mxfp4", "mxfp4", tile_m=8, tile_n=8, tile_k=8, psum_mode="fp32",
                   config_digest=digest, seed=11)  # fmt: skip
    a = attention_trace(kv_heads=1, group=2, head_dim=16, q_tokens=4, q_start=0, n_keys=4,
                        causal=True, fmt_act="hbq-e", fmt_kv="hbq-e", tiles=_tiles(),
                        config_digest=digest, seed=12)  # fmt: skip
    assert (g.meta["config_digest"], g.meta["seed"]) == (digest, 11)
    assert (a.meta["config_digest"], a.meta["seed"]) == (digest, 12)
    plain = gemm_trace(8, 8, 8, "mxfp4", "mxfp4", tile_m=8, tile_n=8, tile_k=8, psum_mode="fp32")
    assert plain.meta["config_digest"] is None and plain.meta["seed"] is None


# ------------------------------------------------------------------ whole workloads

SHAPE = ModelShape(hidden=256, intermediate=512, layers=3, heads=4, kv_heads=2, head_dim=64,
                   vocab=1000, max_position_embeddings=4096)  # fmt: skip
TILES = WorkloadTiles(tile_m=64, tile_n=64, tile_k=128, n_buffers=2, attn_rows=32, attn_keys=32,
                      psum_mode="mxint8_running", sa_n=16)  # fmt: skip


def test_prefill_segments_match_the_rpm_mac_formula():
    n = 100
    segs = transformer_segments(SHAPE, phase="prefill", tokens=n, fmt_weight="hbq-e",
                                fmt_act="hbq-e", fmt_kv="hbq-e", tiles=TILES)  # fmt: skip
    names = [s.name for s in segs]
    assert names == ["q_proj", "k_proj", "v_proj", "attention", "o_proj", "gate_up_proj",
                     "down_proj", "lm_head"]  # fmt: skip
    assert [s.repeat for s in segs] == [3] * 7 + [1]
    e, m, q, kv = 256, 512, 4 * 64, 2 * 64
    # [R-PM] prefill_macs: linear = L*n*(E*q + 2E*kv + q*E + 3E*M) + n*E*V.
    linear = sum(s.trace.total_macs() * s.repeat for s in segs if s.kind != "attention")
    assert linear == 3 * n * (e * q + 2 * e * kv + q * e + 3 * e * m) + n * e * 1000
    att = next(s for s in segs if s.name == "attention").trace.total_macs()
    assert att == _attention_work_brute_force(2, 2, 64, n, 0, n, True, 32, 32)[0]
    # k_proj writes the KV cache in the HBQ-E KV format (4.125 bits): 100 tokens in tiles of 64
    # and 36, 128 channels in two tiles of 64: 2 * (64*64 + 36*64) * 4.125 / 8 = 6600 B, every
    # tile a whole number of bytes.
    assert segs[1].trace.total_bytes(tensor="k_cache", rw="write") == 6600


def test_decode_segments_grow_with_the_context():
    segs = list(iter_transformer_segments(SHAPE, phase="decode", tokens=70, decode_steps=3,
                                          fmt_weight="hbq-e", fmt_act="hbq-e", fmt_kv="fp16",
                                          tiles=TILES))  # fmt: skip
    assert [s.step for s in segs] == [0] * 8 + [1] * 8 + [2] * 8
    att = [s.trace for s in segs if s.name == "attention"]
    for step, t in enumerate(att):
        keys = 70 + step + 1
        # One query token: 2 (group) rows x keys x head_dim for QK and PV, per KV head.
        assert t.total_macs() == 2 * 2 * (2 * keys * 64)
        assert t.total_bytes(tensor="k_cache") == 2 * keys * 64 * 2  # FP16 cache
    lm = [s.trace for s in segs if s.name == "lm_head"]
    assert all(t.total_macs() == 256 * 1000 for t in lm)


def test_segment_argument_errors():
    with pytest.raises(ValueError, match="phase='train'"):
        iter_transformer_segments(SHAPE, phase="train", tokens=8, fmt_weight="hbq-e",
                                  fmt_act="hbq-e", fmt_kv="hbq-e", tiles=TILES)  # fmt: skip
    with pytest.raises(ValueError, match="heads=6 must be a multiple of kv_heads=4"):
        transformer_segments(ModelShape(64, 64, 1, 6, 4, 16, 10, 128), phase="prefill",
                             tokens=8, fmt_weight="hbq-e", fmt_act="hbq-e", fmt_kv="hbq-e",
                             tiles=TILES)  # fmt: skip
    with pytest.raises(ValueError, match="attn_rows=3 must be a positive multiple of group=2"):
        attention_trace(kv_heads=1, group=2, head_dim=16, q_tokens=4, q_start=0, n_keys=4,
                        causal=True, fmt_act="hbq-e", fmt_kv="hbq-e",
                        tiles=_tiles(attn_rows=3))  # fmt: skip


def test_simulator_traces_carry_the_architecture_digest():
    from coaccel.sim.hbq_asic import load_arch, load_workload
    from coaccel.sim.hbq_asic.workload import iter_workload_segments
    from coaccel.spine.config import config_digest

    arch = load_arch("hbq_e_28nm")
    segs = list(iter_workload_segments(arch, load_workload("llama-3.2-1b:decode_1k")))
    assert segs and all(s.trace.meta["config_digest"] == config_digest(arch) for s in segs)
