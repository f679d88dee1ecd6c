"""cocotb testbench of ``rtl/hbq/hbq_fp16_add.v`` against ``coaccel.models.hbq.fp16_add``.

The adder is combinational: each vector is applied, the simulator advances 1 ns (no clock edge)
and the sum is compared bit for bit with the reference. Vector classes (seeded, all built from bit
patterns so every special class is hit on purpose):

* every pair of a special-value set (signed zeros, subnormals, the normal range ends, 1.0 and its
  neighbours, 65504, Inf, quiet/signalling NaN of both signs);
* rounding ties (the smaller operand's dropped bits are exactly one half ULP of the larger);
* overflow (sums at and above 65520 saturate to 65504);
* cancellation (operands of opposite sign within a few ULPs, and one binade apart);
* underflow (small normals whose sum falls below 2^-14 and is flushed);
* subnormal operands (read as zero) against every exponent;
* operands with every exponent distance 0..16, and uniformly random bit patterns.
"""

from __future__ import annotations

import cocotb
import numpy as np
import rtlkit
from cocotb.triggers import Timer

from coaccel.models.hbq import fp16_add

SPECIALS = (
    0x0000,
    0x8000,  # signed zeros
    0x0001,
    0x8001,
    0x0200,
    0x03FF,
    0x83FF,  # subnormals (read as zero)
    0x0400,
    0x8400,
    0x0401,
    0x0402,
    0x0800,
    0x07FF,
    0x87FF,  # smallest normals
    0x1400,
    0x2C00,
    0x3555,  # assorted
    0x3BFF,
    0x3C00,
    0xBC00,
    0x3C01,
    0xBC01,
    0x4000,
    0x3E00,  # around 1.0
    0x7800,
    0x7BFE,
    0x7BFF,
    0xFBFF,
    0x7BF0,  # largest finite values
    0x7C00,
    0xFC00,  # infinities
    0x7E00,
    0xFE00,
    0x7C01,
    0x7FFF,  # NaNs (quiet, negative, signalling)
)


def _normal(rng: np.random.Generator, n: int, e_lo: int = 1, e_hi: int = 30) -> np.ndarray:
    """Random normal binary16 bit patterns with biased exponents in [e_lo, e_hi], random sign."""
    e = rng.integers(e_lo, e_hi + 1, n)
    m = rng.integers(0, 1024, n)
    s = rng.integers(0, 2, n)
    return (s << 15) | (e << 10) | m


def vectors(rng: np.random.Generator, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operand pairs (uint16 a, uint16 b) and their class labels."""
    parts: list[tuple[str, np.ndarray, np.ndarray]] = []
    sp = np.array(SPECIALS, dtype=np.int64)
    aa, bb = np.meshgrid(sp, sp, indexing="ij")
    parts.append(("specials", aa.ravel(), bb.ravel()))

    n = max(int(2000 * scale), 50)
    # Ties: b's bits below a's LSB are exactly 100..0 (half an ULP), for every distance 1..11.
    a = _normal(rng, n, 12, 30)
    d = rng.integers(1, 12, n)
    eb = ((a >> 10) & 31) - d
    sig_b = ((rng.integers(0, 2048, n) >> d) << d) | (1 << (d - 1)) | 1024
    sig_b &= 2047
    sig_b |= 1024
    b = (rng.integers(0, 2, n) << 15) | (eb << 10) | (sig_b & 1023)
    parts.append(("ties", a, b))
    # Overflow: large operands of one sign.
    a = _normal(rng, n, 29, 30) & 0x7FFF
    b = _normal(rng, n, 28, 30) & 0x7FFF
    sign = rng.integers(0, 2, n) << 15
    parts.append(("overflow", a | sign, b | sign))
    # Cancellation: b = -(a + k) for small k in bit-pattern space, and one binade apart.
    a = _normal(rng, n, 1, 30)
    k = rng.integers(-6, 7, n)
    b = np.clip((a & 0x7FFF) + k, 0x0400, 0x7BFF) | ((~a) & 0x8000)
    parts.append(("cancel", a, b))
    a = _normal(rng, n, 2, 30)
    b = (((a & 0x7FFF) - 1024 + rng.integers(-4, 5, n)) & 0x7FFF) | ((~a) & 0x8000)
    parts.append(("cancel_binade", a, b))
    # Underflow: small normals with opposite signs (sums below 2^-14 flush to +0).
    a = _normal(rng, n, 1, 3)
    b = (_normal(rng, n, 1, 3) & 0x7FFF) | ((~a) & 0x8000)
    parts.append(("underflow", a, b))
    # Subnormal operands against every exponent.
    a = rng.integers(0, 1024, n) | (rng.integers(0, 2, n) << 15)
    b = _normal(rng, n)
    parts.append(("subnormal", a, b))
    # Every alignment distance 0..16.
    a = _normal(rng, n, 17, 30)
    b = (_normal(rng, n) & 0x83FF) | ((((a >> 10) & 31) - rng.integers(0, 17, n)) << 10)
    parts.append(("distance", a, b))
    # Uniform random bit patterns (includes every class at its natural frequency).
    parts.append(("random", rng.integers(0, 65536, 2 * n), rng.integers(0, 65536, 2 * n)))

    labels = np.concatenate([np.full(len(p[1]), p[0]) for p in parts])
    a_all = np.concatenate([p[1] for p in parts]).astype(np.uint16)
    b_all = np.concatenate([p[2] for p in parts]).astype(np.uint16)
    return a_all, b_all, labels


@cocotb.test()
async def add_matches_reference(dut):
    """Every vector: the RTL sum equals fp16_add bit for bit, and is never X/Z."""
    cfg = rtlkit.tb_config()
    rng = np.random.default_rng(cfg.get("seed", 1))
    a, b, labels = vectors(rng, cfg.get("scale", 1.0))
    expected = fp16_add(a, b)
    mismatches = []
    for i in range(len(a)):
        dut.i_a.value = int(a[i])
        dut.i_b.value = int(b[i])
        await Timer(1, "ns")
        out = dut.o_sum.value
        if not rtlkit.resolvable(out):
            raise AssertionError(f"o_sum is {out} for a={a[i]:#06x} b={b[i]:#06x}")
        got = int(out)
        if got != int(expected[i]):
            mismatches.append((labels[i], int(a[i]), int(b[i]), got, int(expected[i])))
    for lab, x, y, got, exp in mismatches[:20]:
        dut._log.error(f"{lab}: {x:#06x} + {y:#06x} -> RTL {got:#06x}, reference {exp:#06x}")
    counts = {str(k): int(v) for k, v in zip(*np.unique(labels, return_counts=True), strict=True)}
    rtlkit.write_results(
        {
            "vectors": len(a),
            "classes": counts,
            "mismatches": len(mismatches),
            # Combinational: the sum is correct without any clock edge.
            "latency_cycles": 0,
            "ii_cycles": 1,
        }
    )
    assert not mismatches, f"{len(mismatches)} of {len(a)} sums differ from the reference"
