"""Analytical mode of the HBQ ASIC simulator for a batch of designs at once: a sweep's fast path.

:func:`simulate_batch` evaluates one workload on many architectures with one numpy evaluation
per group of designs that share their number formats (:mod:`._batch_model`), instead of one
:func:`~.analytical.simulate_analytical` call each; it returns every design's
:meth:`~.stats.HbqSimStats.metrics` values (same names, order, units and Python types, equal to
the per-design model: a test compares every metric of every shipped sweep point) and the cost
model's input for every design, as :class:`~coaccel.sim.common.priced.PricedComponents` whose
run counts are arrays over the designs that share everything else (the cost model prices each
such group in one call).

A design whose tiles do not fit its buffers is left out (``None``): the caller evaluates it
alone, so that it fails with the per-design path's own reason.

Public: :func:`simulate_batch`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from coaccel.models.hbq import operand_storage, psum_bits_per_element
from coaccel.sim.common import offchip

from . import _batch_model as bm
from ._hw import hw_params
from .analytical import simulate_analytical
from .config import HbqArchConfig, operand_format
from .priced import priced_components
from .stats import BUFFERS, STALL_CAUSES
from .workload import Workload, workload_tiles

__all__ = ["simulate_batch"]

_TILE_KEYS = ("tile_m", "tile_n", "tile_k", "attn_rows", "attn_keys", "n_buffers", "act_resident")

# The metric names, units and Python types of a workload's result (the same for every design):
# workload digest -> (names, units, is_int). Bounded.
_LAYOUT: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]] = {}


def _layout(
    arch: HbqArchConfig, wl: Workload
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
    """Names, units and int-ness of the metrics, from one per-design run (once per workload)."""
    key = f"{wl.digest}:{wl.label}"
    got = _LAYOUT.get(key)
    if got is None:
        m = simulate_analytical(arch, wl).metrics()
        got = (
            tuple(m),
            tuple(u for _, u in m.values()),
            tuple(type(v) is int for v, _ in m.values()),
        )
        if len(_LAYOUT) > 64:
            _LAYOUT.clear()
        _LAYOUT[key] = got
    return got


def _formats(arch: HbqArchConfig, kv_quant: bool) -> tuple[Any, ...]:
    """(fa, bits_a, fw, bits_w, fkv, bits_kv, bits_p): format names and storage bits."""
    fa, bits_a = operand_storage(operand_format(arch, "activation"), "activation")
    fw, bits_w = operand_storage(operand_format(arch, "weight"), "weight")
    fkv, bits_kv = operand_storage(operand_format(arch, "kv", quantized=kv_quant), "kv")
    bits_p = psum_bits_per_element(arch.psum.mode, sa_n=arch.psum.block_elems)
    return fa, bits_a, fw, bits_w, fkv, bits_kv, bits_p


def _pe_side(arch: HbqArchConfig, fmts: tuple[Any, ...]) -> dict[str, Any]:
    """The PE-side constants of a design for its formats (clock and DRAM left out)."""
    hw = hw_params(arch)
    fa, _, fw, _, fkv, _, _ = fmts
    out: dict[str, Any] = {
        "n_pes": hw.n_pes, "kstep": hw.kstep, "sa_n": hw.sa_n, "fsm": hw.fsm_cycles,
        "wb": hw.writeback_stage_cycles, "rs": hw.result_stage_cycles,
        "shadow": hw.shadow_regs, "ii_np": hw.issue_ii(fa), "act_width": hw.act_width_bits,
        "wgt_width": hw.wgt_width_bits, "psum_word_bits": float(hw.psum_word_bits),
        "vec": hw.vector_elems_per_cycle, "vec_lat": hw.vector_latency_cycles,
        "peak": hw.peak_macs_per_cycle, "psum_word_int": int(round(float(hw.psum_word_bits))),
    }  # fmt: skip
    for fb in dict.fromkeys((fw, fkv)):
        out[f"ii:{fb}"] = hw.token_ii(fa, fb)
        out[f"prop:{fb}"] = hw.prop_cycles(fb)
        out[f"act_step:{fb}"] = hw.passes(fa, fb) * hw.act_words(fa)
        out[f"wgt_words:{fb}"] = hw.wgt_words(fb)
    return out


def _designs(archs: Sequence[HbqArchConfig], wl: Workload) -> list[dict[str, Any] | None]:
    """Each design's constants (None where its tiles do not fit: evaluated alone)."""
    kv_quant = wl.scenario.kv_quant
    fmt_c: dict[tuple[int, int], tuple[Any, ...]] = {}
    pe_c: dict[tuple[int, ...], dict[str, Any]] = {}
    clock_c: dict[tuple[int, float], tuple[float, int]] = {}
    tile_c: dict[tuple[int, ...], Any] = {}
    out: list[dict[str, Any] | None] = []
    for a in archs:
        try:
            fk = id(a.formats), id(a.psum)
            fmts = fmt_c.get(fk)
            if fmts is None:
                fmts = fmt_c[fk] = _formats(a, kv_quant)
            pk = (id(a.pe_array), id(a.psum), id(a.buffers), id(a.formats), id(a.vector_unit))
            pe = pe_c.get(pk)
            if pe is None:
                pe = pe_c[pk] = _pe_side(a, fmts)
            ck = (id(a.dram), a.freq_mhz)
            clock = clock_c.get(ck)
            if clock is None:
                bpc = float(offchip.sustained_bytes_per_cycle(a.dram, a.freq_mhz))
                clock = clock_c[ck] = (bpc, offchip.latency_cycles(a.dram, a.freq_mhz))
            tk = (id(a.pe_array), id(a.buffers), id(a.psum), id(a.formats), id(a.tiling))
            tiles = tile_c.get(tk)
            if tiles is None:
                tiles = tile_c[tk] = workload_tiles(a, wl)
        except Exception:  # noqa: BLE001 - evaluated alone, it fails with its own reason
            out.append(None)
            continue
        out.append({**pe, "fmts": fmts, "bpc": clock[0], "lat": clock[1], "tiles": tiles,
                    "freq_mhz": a.freq_mhz})  # fmt: skip
    return out


def _cols(ds: list[dict[str, Any]]) -> bm.Cols:
    """The :class:`~._batch_model.Cols` of a group of designs (same formats)."""
    fa, _, fw, _, fkv, _, _ = ds[0]["fmts"]

    def col(key: str, dtype: Any = np.int64) -> Any:
        return np.array([d[key] for d in ds], dtype=dtype)

    def tcol(name: str) -> Any:
        return np.array([getattr(d["tiles"], name) for d in ds], dtype=np.int64)

    fbs = dict.fromkeys((fw, fkv))
    res = [d["tiles"].act_resident_bits for d in ds]
    return bm.Cols(
        n_pes=col("n_pes"), kstep=col("kstep"), sa_n=col("sa_n"), fsm=col("fsm"),
        wb=col("wb"), rs=col("rs"), shadow=col("shadow", np.bool_), ii_np=col("ii_np"),
        ii={f: col(f"ii:{f}") for f in fbs}, prop={f: col(f"prop:{f}") for f in fbs},
        act_step={f: col(f"act_step:{f}") for f in fbs},
        wgt_words={f: col(f"wgt_words:{f}") for f in fbs},
        act_width=col("act_width"), wgt_width=col("wgt_width"),
        psum_word_bits=col("psum_word_bits", np.float64), vec=col("vec"),
        vec_lat=col("vec_lat"), bpc=col("bpc", np.float64), lat=col("lat"),
        tm=tcol("tile_m"), tn=tcol("tile_n"), tk=tcol("tile_k"), nb=tcol("n_buffers"),
        rows=tcol("attn_rows"), keys=tcol("attn_keys"),
        resident_bits=np.array([-1 if b is None else b for b in res], dtype=np.int64),
    )  # fmt: skip


def _segments(c: bm.Cols, wl: Workload, fmts: tuple[Any, ...]) -> list[bm.Seg]:
    """Every segment of the workload for a group of designs (``simulate_analytical``'s loop)."""
    fa, bits_a, fw, bits_w, fkv, bits_kv, bits_p = fmts
    sc, sh, n = wl.scenario, wl.model, c.tm.shape[0]
    e, mlp, v = sh.hidden, sh.intermediate, sh.vocab
    q_dim, kv_dim = sh.heads * sh.head_dim, sh.kv_heads * sh.head_dim
    segs: list[bm.Seg] = []
    for step in range(sc.decode_steps) if sc.phase == "decode" else range(1):
        n_q = sc.tokens if sc.phase == "prefill" else 1
        q_start = 0 if sc.phase == "prefill" else sc.tokens + step

        def lin(name: str, nn: int, k: int, bits_y: Fraction, tensors: tuple[str, str, str],
                kind: str = "linear", repeat: int = sh.layers, m: int = n_q) -> None:  # fmt: skip
            s = bm.Seg(name, kind, repeat, n)
            bm.gemm(c, s, m=m, n=nn, k=k, bits_a=bits_a, fb=fw, bits_w=bits_w, bits_y=bits_y,
                    tensors=tensors)  # fmt: skip
            segs.append(s)

        lin("q_proj", q_dim, e, bits_a, ("x", "wq", "q"))
        lin("k_proj", kv_dim, e, bits_kv, ("x", "wk", "k_cache"))
        lin("v_proj", kv_dim, e, bits_kv, ("x", "wv", "v_cache"))
        s = bm.Seg("attention", "attention", sh.layers, n)
        bm.attention(c, s, kv_heads=sh.kv_heads, group=sh.heads // sh.kv_heads,
                     head_dim=sh.head_dim, q_tokens=n_q, q_start=q_start, n_keys=q_start + n_q,
                     causal=sc.causal_tile_skip, fb=fkv,
                     bits=(bits_a, bits_kv, bits_p))  # fmt: skip
        segs.append(s)
        lin("o_proj", e, q_dim, bits_a, ("attn_out", "wo", "x2"))
        lin("gate_up_proj", 2 * mlp, e, bits_a / 2, ("x3", "w_gate_up", "h"))
        lin("down_proj", e, mlp, bits_a, ("h", "w_down", "x4"))
        if sc.lm_head != "none":
            n_lm = n_q if sc.lm_head == "all_tokens" else 1
            lin("lm_head", v, e, Fraction(16), ("x_final", "w_lm_head", "logits"),
                kind="lm_head", repeat=1, m=n_lm)  # fmt: skip
    return segs


def _rint(x: Any) -> Any:
    """``int(round(x))`` elementwise (round half to even, as Python's ``round``)."""
    return np.rint(x).astype(np.int64)


def _assemble(segs: list[bm.Seg], c: bm.Cols) -> dict[str, Any]:
    """Every metric column of a group (the scalar ``_assemble`` + ``HbqSimStats.metrics``),
    by metric name; ``utilisation`` and ``seconds`` are left to the caller."""
    n = c.tm.shape[0]
    cycles = np.zeros(n)
    stall = {cause: np.zeros(n) for cause in ("busy", *STALL_CAUSES)}
    tot = {k: np.zeros(n, dtype=np.int64) for k in bm._INT_KEYS}
    tensors: dict[str, Any] = {}
    by_name: dict[str, list[Any]] = {}
    for s in segs:
        r = s.repeat
        cycles = cycles + s.cycles * r
        for cause, x in s.stall.items():
            stall[cause] = stall[cause] + x * r
        for key in tot:
            tot[key] = tot[key] + s.ints[key] * r
        for name, b in s.tensors.items():
            tensors[name] = tensors.get(name, 0) + b * r
        row = by_name.setdefault(s.name, [0, np.zeros(n), 0, 0, 0])
        row[0] += r
        row[1] = row[1] + s.cycles * r
        row[2] = row[2] + s.ints["macs"] * r
        row[3] = row[3] + s.ints["dram_r"] * r
        row[4] = row[4] + s.ints["dram_w"] * r
    out: dict[str, Any] = {"cycles": _rint(cycles)}
    for cause, x in stall.items():
        out[f"resource.pe_array.{cause}"] = _rint(x)
    psum_wb = c.psum_word_bits / 8
    bufs = {
        "ACT": (tot["act_reads"], tot["act_fill_n"] + tot["act_vec_w_n"],
                _rint(tot["act_reads"] * (c.act_width / 8)), tot["act_fill"] + tot["act_vec_w"]),
        "WGT": (tot["wgt_reads"], tot["wgt_fill_n"], _rint(tot["wgt_reads"] * (c.wgt_width / 8)),
                tot["wgt_fill"]),
        "PSUM": (tot["psum_reads"] + tot["psum_vec_r_n"], tot["psum_writes"],
                 _rint(tot["psum_reads"] * psum_wb + tot["psum_vec_r"]),
                 _rint(tot["psum_writes"] * psum_wb)),
    }  # fmt: skip
    for buf in BUFFERS:
        for k, x in zip(("reads", "writes", "read_bytes", "write_bytes"), bufs[buf], strict=True):
            out[f"buffer.{buf}.{k}"] = x
    out["offchip.reads"], out["offchip.writes"] = tot["n_r"], tot["n_w"]
    out["offchip.read_bytes"], out["offchip.write_bytes"] = tot["dram_r"], tot["dram_w"]
    out["offchip.total_bytes"] = tot["dram_r"] + tot["dram_w"]
    for name, b in tensors.items():
        out[f"offchip.tensor.{name}"] = b
    out["macs"] = tot["macs"]
    for name, (count, cyc, macs, rd, wr) in by_name.items():
        seg = f"segment.{name}."
        out[seg + "count"] = np.full(n, count, dtype=np.int64)
        out[seg + "cycles"], out[seg + "macs"] = _rint(cyc), macs
        out[seg + "offchip.read_bytes"], out[seg + "offchip.write_bytes"] = rd, wr
    return out


def _group_columns(ds: list[dict[str, Any]], wl: Workload) -> dict[str, Any]:
    """Every metric column of a group of designs that share their formats."""
    c = _cols(ds)
    out = _assemble(_segments(c, wl, ds[0]["fmts"]), c)
    freq = np.array([d["freq_mhz"] for d in ds], dtype=np.float64)
    out["freq_mhz"] = freq
    out["seconds"] = out["cycles"] / (freq * 1e6)
    peak = [d["peak"] for d in ds]
    out["peak_macs_per_cycle"] = np.array(peak, dtype=np.int64)
    cyc, macs = out["cycles"].tolist(), out["macs"].tolist()
    # Python ints: exact however large cycles x peak gets (as the per-design path)
    out["utilisation"] = np.array(
        [m / (cy * p) if cy else 0.0 for m, cy, p in zip(macs, cyc, peak, strict=True)]
    )
    for b, key in (("ACT", "act_width"), ("WGT", "wgt_width"), ("PSUM", "psum_word_int")):
        out[f"buffer.{b}.word_bits"] = np.array([d[key] for d in ds], dtype=np.int64)
    out["layers"] = np.full(len(ds), wl.model.layers, dtype=np.int64)
    out["layers_simulated"] = np.ones(len(ds), dtype=np.int64)
    for k in _TILE_KEYS:
        vals = [
            int(d["tiles"].act_resident_bits is not None)
            if k == "act_resident"
            else getattr(d["tiles"], k)
            for d in ds
        ]
        out[f"tile.{k}"] = np.array(vals, dtype=np.int64)
    return out


def _priced(
    archs: Sequence[HbqArchConfig], idx: list[int], cols: dict[str, Any], label: str
) -> list[tuple[Any, list[int]]]:
    """The cost model's input for designs ``idx`` of a group (positions in ``cols``): one
    :class:`PricedComponents` per set of designs with the same components, whose run counts
    (MACs, bytes, partial-sum updates, seconds) are arrays over those designs."""
    by_design: dict[tuple[Any, ...], list[int]] = {}
    for k, i in enumerate(idx):
        a = archs[i]
        key = (id(a.pe_array), id(a.buffers), id(a.formats), id(a.psum), id(a.dram), a.name)
        by_design.setdefault(key, []).append(k)
    out = []
    for pos in by_design.values():
        a = archs[idx[pos[0]]]
        pc0 = priced_components(a, None)
        sel = np.array(pos)

        def c(name: str, _sel: Any = sel) -> Any:
            return cols[name][_sel]

        rename = {"act_buffer": "ACT", "wgt_buffer": "WGT", "psum_buffer": "PSUM"}
        buffers = tuple(
            dataclasses.replace(b, read_bytes=c(f"buffer.{rename[b.name]}.read_bytes"),
                                write_bytes=c(f"buffer.{rename[b.name]}.write_bytes"))
            for b in pc0.buffers
        )  # fmt: skip
        updates = 8 * c("buffer.PSUM.write_bytes") / float(a.psum.bits_per_element)
        pc = dataclasses.replace(
            pc0,
            workload=label,
            mode="analytical",
            seconds=c("seconds"),
            macs=tuple(dataclasses.replace(m, macs=c("macs")) for m in pc0.macs),
            buffers=buffers,
            logic=tuple(dataclasses.replace(g, operations=updates) for g in pc0.logic),
            offchip=tuple(
                dataclasses.replace(d, read_bytes=c("offchip.read_bytes"),
                                    write_bytes=c("offchip.write_bytes"))
                for d in pc0.offchip
            ),
        )  # fmt: skip
        out.append((pc, [idx[p] for p in pos]))
    return out


def simulate_batch(
    archs: Sequence[HbqArchConfig], workload: Workload, *, mode: str = "analytical"
) -> dict[str, Any] | None:
    """Analytical estimates of one workload on many architectures (module docstring).

    Args:
        archs: the designs (loaded, validated configs).
        workload: the workload (:func:`~.workload.load_workload`).
        mode: only ``"analytical"`` is batched.

    Returns:
        None for another mode; else a dict: ``values``, per design ``(names, units,
        values)`` of its :meth:`~.stats.HbqSimStats.metrics` (names in that order, values as
        Python ints and floats), or None for a design to evaluate alone; and ``priced``, a
        list of ``(PricedComponents with array run counts, design indices)``.
    """
    if mode != "analytical" or not archs:
        return None
    ds = _designs(archs, workload)
    good = [i for i, d in enumerate(ds) if d is not None]
    values: list[tuple[Any, ...] | None] = [None] * len(archs)
    if not good:
        return {"values": values, "priced": []}
    names, units, is_int = _layout(archs[good[0]], workload)
    groups: dict[int, list[int]] = {}
    for i in good:  # the formats tuples are shared (cached per formats section): by identity
        groups.setdefault(id(ds[i]["fmts"]), []).append(i)  # type: ignore[index]
    priced = []
    for idx in groups.values():
        cols = _group_columns([ds[i] for i in idx], workload)  # type: ignore[misc]
        lists = [
            np.asarray(cols[n], dtype=np.int64 if whole else np.float64).tolist()
            for n, whole in zip(names, is_int, strict=True)
        ]
        for i, row in zip(idx, zip(*lists, strict=True), strict=True):
            values[i] = (names, units, row)
        priced += _priced(archs, idx, cols, workload.label)
    return {"values": values, "priced": priced}
