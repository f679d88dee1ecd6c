"""HBQ block GEMM with partial-sum modes (specs/hbq.md §1.8, §2.1, §2.2) and the GEMM trace.

Expected values: exact ``Fraction`` sums of the dequantized operands rounded by scalar oracles,
scalar K loops, the already-verified PE datapath (``block_dot``) and hand-derived trace totals.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from fp_oracle import oracle_round

from coaccel.models.formats import quantize, resolve
from coaccel.models.hbq import (
    _gemm,
    accumulate_psums,
    block_dot,
    block_gemm,
    fp16_add,
    fp16_round,
    gemm_trace,
    hbq_gemm,
    hbq_gemm_codes,
)
from coaccel.spine.trace import Trace


def exact_block_sums(qa, qw) -> list[list[list[Fraction]]]:
    """Σ ŵ·â per (m, n, K block) from the quantizer's exact dequantized values."""
    a = qa.dequantize_blocks()  # (M, nb, B) float64, exact
    w = qw.dequantize_blocks()
    return [
        [
            [
                sum(
                    (
                        Fraction(float(x)) * Fraction(float(y))
                        for x, y in zip(a[i, k], w[j, k], strict=True)
                    ),
                    Fraction(0),
                )
                for k in range(a.shape[1])
            ]
            for j in range(w.shape[0])
        ]
        for i in range(a.shape[0])
    ]


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(20)
    a = rng.standard_normal((3, 384)) * np.exp(rng.standard_normal((3, 384)))
    a[:, 5] = 40.0  # an outlier channel
    w = rng.standard_normal((5, 384)) * 0.05
    qa = quantize(a.astype(np.float32), "hbq-a", role="activation")
    qw = quantize(w.astype(np.float32), "hbq-a", role="weight")
    return qa, qw, exact_block_sums(qa, qw)


def test_fp32_psum_mode_equals_exact_block_results_summed_in_fp32(operands):
    qa, qw, exact = operands
    res = hbq_gemm(qa, qw, psum_mode="fp32", keep_p_total=True)
    assert res.y.shape == (3, 5) and res.bits.dtype == np.uint32 and res.F == 7
    for i in range(3):
        for j in range(5):
            acc = np.float32(0)
            for k, v in enumerate(exact[i][j]):
                # Each block result is the exact Σ ŵ·â rounded once to binary32.
                r = np.uint32(oracle_round(v, 24, 127, 254)).view(np.float32)
                acc = r if k == 0 else np.float32(acc + r)
            assert res.bits[i, j] == np.float32(acc).view(np.uint32), (i, j)
    assert np.array_equal(res.y.view(np.uint32), res.bits)


def test_fp16_psum_mode_equals_scalar_loop(operands):
    qa, qw, exact = operands
    res = hbq_gemm(qa, qw, psum_mode="fp16", out="fp16")
    assert res.bits.dtype == np.uint16
    for i in range(3):
        for j in range(5):
            acc = np.uint16(0)
            for v in exact[i][j]:
                acc = fp16_add(acc, np.uint16(oracle_round(v, 11, 15, 30)))
            assert int(res.bits[i, j]) == int(acc), (i, j)
    res32 = hbq_gemm(qa, qw, psum_mode="fp16", out="fp32")
    assert np.array_equal(res32.y, res.bits.view(np.float16).astype(np.float32))


def _random_codes(rng, m, n, nb, block, ub, a_bits, w_bits, a_l2_bits, w_l2_bits, a_elem=5):
    return dict(
        a_codes=rng.integers(0, 1 << a_elem, (m, nb, block)).astype(np.uint8),
        a_scale=(rng.integers(8, 22, (m, nb)) << 3 | rng.integers(0, 8, (m, nb))).astype(np.uint8),
        a_l2=rng.integers(0, 1 << a_l2_bits, (m, nb, block // ub)).astype(np.uint8),
        w_codes=rng.integers(0, 16, (n, nb, block)).astype(np.uint8),
        w_scale=(rng.integers(8, 22, (n, nb)) << 3 | rng.integers(0, 8, (n, nb))).astype(np.uint8),
        w_l2=rng.integers(0, 1 << w_l2_bits, (n, nb, block // ub)).astype(np.uint8),
        w_scheme=rng.integers(0, 2, (n, nb)).astype(np.uint8),
    )


@pytest.mark.parametrize(
    ("ub", "act_l2", "a_l2_bits", "weight_l2", "a_elem"),
    [
        (8, "sig1", 2, "mix", 5),
        (32, "pot", 1, "mix", 5),
        (16, None, 2, None, 5),
        (32, "sig1", 2, "sig1", 4),
        (4, "int", 2, "sig3", 5),
    ],
)
def test_gemm_codes_match_pe_datapath(ub, act_l2, a_l2_bits, weight_l2, a_elem, monkeypatch):
    """Every (token, channel, block) P_total and every psum mode equal block_dot + accumulate."""
    rng = np.random.default_rng(21 + ub)
    m, n, nb, block = 7, 37, 3, 128
    c = _random_codes(rng, m, n, nb, block, ub, a_elem, 4, a_l2_bits, 2, a_elem)
    kw = dict(
        ub=ub,
        act_l2=act_l2,
        act_l2_bits=a_l2_bits,
        weight_l2=weight_l2,
        weight_l2_bits=2,
        a_elem_bits=a_elem,
    )
    dot = {
        (out, mode): block_dot(
            c["w_codes"][None],
            c["w_scale"][None],
            c["w_l2"][None],
            c["w_scheme"][None],
            c["a_codes"][:, None],
            c["a_scale"][:, None],
            c["a_l2"][:, None],
            ub=ub,
            act_l2=act_l2,
            act_l2_bits=a_l2_bits,
            weight_l2=weight_l2,
            a_elem_bits=a_elem,
            out=out,
            mode=mode,
        )
        for out, mode in (("fp32", "exact"), ("fp16", "exact"), ("fp16", "rtl_compat"))
    }
    # (psum mode, conversion mode, block results' format, accumulator = output format)
    cases = [
        ("fp32", "exact", "fp32", "fp32"),
        ("mxint8_group", "exact", "fp32", "fp16"),
        ("fp16", "exact", "fp16", "fp16"),
        ("fp16", "rtl_compat", "fp16", "fp16"),
        ("mxint8_running", "exact", "fp16", "fp16"),
        ("mxint8_running", "rtl_compat", "fp16", "fp16"),
    ]
    for chunk in (1 << 16, 50):  # one chunk, and chunks of a single token row
        monkeypatch.setattr(_gemm, "_CHUNK_ELEMS", chunk)
        for psum_mode, mode, block_out, out in cases:
            res = hbq_gemm_codes(
                **c,
                **kw,
                psum_mode=psum_mode,
                mode=mode,
                out=out,
                sa_n=16,
                group_blocks=2,
                quant_block=32,
                keep_p_total=True,
            )
            d = dot[(block_out, "exact" if block_out == "fp32" else mode)]
            assert np.array_equal(res.p_total, d.p_total) and res.F == d.F
            want = accumulate_psums(
                np.moveaxis(d.bits, -1, 0),
                psum_mode=psum_mode,
                sa_n=16,
                group_blocks=2,
                quant_block=32,
            )
            assert res.bits.dtype == want.dtype and np.array_equal(res.bits, want), (
                psum_mode,
                mode,
                chunk,
            )
            if psum_mode == "fp32":
                assert np.array_equal(res.y.view(np.uint32), res.bits)
            else:
                assert np.array_equal(res.y, res.bits.view(np.float16).astype(np.float32))


def test_output_format_conversions(operands):
    qa, qw, _ = operands
    r32 = hbq_gemm(qa, qw, psum_mode="fp32")
    r16 = hbq_gemm(qa, qw, psum_mode="fp32", out="fp16")
    assert np.array_equal(r16.bits, fp16_round(r32.y))
    assert np.array_equal(r16.y, r16.bits.view(np.float16).astype(np.float32))
    g = hbq_gemm(qa, qw, psum_mode="mxint8_group", group_size=256)
    # The MXINT8 group mode accumulates in binary16; out="fp32" returns those values exactly.
    assert g.bits.dtype == np.uint32 and np.array_equal(g.y.view(np.uint32), g.bits)
    assert np.array_equal(g.y, g.y.astype(np.float16).astype(np.float32)) and g.y.any()


def test_hbq_gemm_is_close_to_float64_reference(operands):
    """fp32 accumulation of n_blocks exactly-rounded block results differs from the float64
    product rounded once by at most (n_blocks + 1) · 2^-24 · Σ_k |r_k| (+ float64 noise)."""
    qa, qw, exact = operands
    y = hbq_gemm(qa, qw).y.astype(np.float64)
    ref = block_gemm(qa, qw).astype(np.float64)
    for i in range(3):
        for j in range(5):
            mag = float(sum(abs(v) for v in exact[i][j]))
            bound = (len(exact[i][j]) + 1) * 2.0**-24 * mag + 1e-30
            assert abs(y[i, j] - ref[i, j]) <= bound
            assert abs(ref[i, j] - float(sum(exact[i][j]))) <= 2.0**-24 * mag + 2.0**-40 * mag


def test_leading_dimensions_and_hbq_e():
    rng = np.random.default_rng(22)
    a = rng.standard_normal((2, 3, 256)).astype(np.float32)
    w = rng.standard_normal((40, 256)).astype(np.float32)
    qa = quantize(a, "hbq-e", role="activation")
    qw = quantize(w, "hbq-e", role="weight")
    res = hbq_gemm(qa, qw, psum_mode="mxint8_running", keep_p_total=True)
    flat = hbq_gemm(
        quantize(a.reshape(6, 256), "hbq-e", role="activation"), qw, psum_mode="mxint8_running"
    )
    assert res.y.shape == (2, 3, 40) and res.p_total.shape == (2, 3, 40, 2)
    assert np.array_equal(res.bits.reshape(6, 40), flat.bits)


def test_asic_variant_and_l1_only():
    rng = np.random.default_rng(23)
    a = rng.standard_normal((4, 128)).astype(np.float32)
    w = rng.standard_normal((16, 128)).astype(np.float32)
    qa = quantize(a, "hbq-e", role="activation", variant="asic")  # PoT, 1 bit, μB 32
    qw = quantize(w, "hbq-e", role="weight", variant="asic")
    assert hbq_gemm(qa, qw).F == 6
    qa0 = quantize(a, "hbq-e", role="activation", l2="none")
    qw0 = quantize(w, "hbq-e", role="weight", l2="none")
    r = hbq_gemm(qa0, qw0, keep_p_total=True)
    assert r.F == 3
    # L1 only: P_total · 2^-3 · S1w · S1a is the dequantized dot product.
    want = qa0.dequantize(np.float64) @ qw0.dequantize(np.float64).T
    assert np.array_equal(r.y, want.astype(np.float32))


def test_hbq_gemm_input_checks():
    rng = np.random.default_rng(24)
    a = rng.standard_normal((2, 256)).astype(np.float32)
    w = rng.standard_normal((4, 256)).astype(np.float32)
    qa = quantize(a, "hbq-a", role="activation")
    qw = quantize(w, "hbq-a", role="weight")
    with pytest.raises(ValueError, match="K = 200 is not a multiple of the block size B = 128"):
        hbq_gemm(
            quantize(a[:, :200], "hbq-a", role="activation"),
            quantize(w[:, :200], "hbq-a", role="weight"),
        )
    with pytest.raises(ValueError, match="must share B and ub"):
        hbq_gemm(qa, quantize(w, "hbq-e", role="weight"))
    with pytest.raises(ValueError, match="K differs"):
        hbq_gemm(qa, quantize(w[:, :128], "hbq-a", role="weight"))
    with pytest.raises(ValueError, match="needs a binary16 psum mode"):
        hbq_gemm(qa, qw, psum_mode="fp32", mode="rtl_compat")
    with pytest.raises(ValueError, match="blocked along its last axis"):
        hbq_gemm(quantize(a.T.copy(), "hbq-a", role="activation", axis=0), qw)
    with pytest.raises(TypeError, match="HBQ-quantized operands"):
        hbq_gemm(quantize(a, "mxfp4"), qw)
    with pytest.raises(ValueError, match="group_size = 64"):
        hbq_gemm(qa, qw, psum_mode="mxint8_group", group_size=64)
    with pytest.raises(ValueError, match="psum_mode='int8'"):
        hbq_gemm(qa, qw, psum_mode="int8")


def test_block_gemm_any_format():
    rng = np.random.default_rng(25)
    a = rng.standard_normal((3, 64)).astype(np.float32)
    w = rng.standard_normal((6, 64)).astype(np.float32)
    for fmt in ("mxfp4", "nvfp4", "mxint8"):
        qa, qw = quantize(a, fmt), quantize(w, fmt)
        y = block_gemm(qa, qw)
        da, dw = qa.dequantize(np.float64), qw.dequantize(np.float64)
        assert y.dtype == np.float32 and y.shape == (3, 6)
        for i in range(3):
            for j in range(6):
                exact = sum(
                    (
                        Fraction(float(x)) * Fraction(float(v))
                        for x, v in zip(da[i], dw[j], strict=True)
                    ),
                    Fraction(0),
                )
                mag = float(
                    sum(
                        abs(Fraction(float(x)) * Fraction(float(v)))
                        for x, v in zip(da[i], dw[j], strict=True)
                    )
                )
                # One float32 rounding of a float64 sum of 64 terms.
                assert (
                    abs(float(y[i, j]) - float(exact))
                    <= 2.0**-24 * abs(float(exact)) + (64 * 2.0**-53 * mag * (1 + 2.0**-24)) + 1e-45
                )


# ---------------------------------------------------------------- GEMM trace


def test_gemm_trace_totals_and_roundtrip(tmp_path):
    m, n, k = 256, 512, 1024
    tm, tn, tk = 128, 256, 512
    trace = gemm_trace(
        m,
        n,
        k,
        "hbq-a",
        "hbq-a",
        tile_m=tm,
        tile_n=tn,
        tile_k=tk,
        psum_mode="mxint8_running",
        out="fp16",
    )
    # Hand-derived: HBQ-A activations 5 + (8 + 16·2)/128 = 5.3125 bits; weights
    # 4 + (8 + 16·2 + 1)/128 = 4.3203125 bits (Mix selector included).
    assert trace.total_macs() == m * n * k
    n_m, n_n, n_k = m // tm, n // tn, k // tk
    # Loop order n, k, m (weight-stationary): each weight tile is read once, the activations
    # once per output-channel tile pass.
    assert trace.total_bytes(tensor="W") == n * k * 4.3203125 / 8 == 283_136
    assert trace.total_bytes(tensor="A") == m * k * 5.3125 / 8 * n_n == 348_160
    # Partial sums: MXINT8 with 16 values per 136-bit word = 8.5 bits per value; read back for
    # every K tile but the first, written for every K tile but the last; the output (fp16) once.
    psum_bytes = m * n * 8.5 / 8
    assert trace.total_bytes(tensor="psum", rw="read") == psum_bytes * (n_k - 1)
    assert trace.total_bytes(tensor="psum", rw="write") == psum_bytes * (n_k - 1)
    assert trace.total_bytes(tensor="Y", rw="write") == m * n * 2
    assert trace.compute.size == n_m * n_n * n_k
    assert set(trace.decode("compute", "fmt_a")) == {"hbq-a"}
    assert trace.events.size == 0 and not trace.memory["kernel"].any()  # ASIC: no kernels
    # Each compute record waits for a read issued before it.
    assert (trace.compute["dep"] >= 0).all() and (trace.compute["dep"] < trace.compute["seq"]).all()
    path = tmp_path / "gemm.npz"
    trace.save(path)
    assert Trace.load(path).equals(trace)


def test_gemm_trace_ragged_tiles_and_orders():
    spec_a = resolve("mxfp4")
    bits = spec_a.bits_per_element()  # 4.25 (E2M1 + 8-bit scale per 32)
    assert bits == 4 + 8 / 32
    for order in ("mnk", "nkm", "kmn"):
        t = gemm_trace(
            100,
            70,
            96,
            "mxfp4",
            "mxfp4",
            tile_m=64,
            tile_n=32,
            tile_k=32,
            order=order,
            psum_mode="fp32",
            out="fp32",
        )
        assert t.total_macs() == 100 * 70 * 96
        n_tiles = 2 * 3 * 3
        assert t.compute.size == n_tiles
        assert int(t.compute["m"].max()) == 64 and int(t.compute["m"].min()) == 36
        assert int(t.compute["n"].min()) == 6
        y = t.total_bytes(tensor="Y", rw="write")
        assert y == 100 * 70 * 4
        a, w = t.total_bytes(tensor="A"), t.total_bytes(tensor="W")
        # Tiles are stored contiguously: a full A tile is 64·32·4.25/8 = 1088 bytes, the ragged
        # one 36·32·4.25/8 = 612; per pass the operand moves 100·96·4.25/8 = 5100 bytes.
        if order == "mnk":  # k innermost: no reuse of either operand
            assert a == 100 * 96 * 17 // 32 * 3 and w == 70 * 96 * 17 // 32 * 2
        if order == "nkm":  # weights stationary
            assert w == 70 * 96 * 17 // 32 and a == 100 * 96 * 17 // 32 * 3
        if order == "kmn":  # activations stationary
            assert a == 100 * 96 * 17 // 32 and w == 70 * 96 * 17 // 32 * 2
        # Every partial-sum read is preceded by a write of the same tile (fp32: 4 bytes).
        assert t.total_bytes(tensor="psum", rw="read") == 100 * 70 * 4 * 2
        assert t.total_bytes(tensor="psum", rw="write") == 100 * 70 * 4 * 2
    with pytest.raises(ValueError, match="order='mmk'"):
        gemm_trace(8, 8, 8, "mxfp4", "mxfp4", tile_m=8, tile_n=8, tile_k=8, order="mmk")
    with pytest.raises(ValueError, match="tile_k=0"):
        gemm_trace(8, 8, 8, "mxfp4", "mxfp4", tile_m=8, tile_n=8, tile_k=0)
