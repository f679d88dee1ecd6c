"""cocotb testbench of ``rtl/hbq/hbq_act_quant.v`` (online HBQ-E activation quantizer) against
``coaccel.models.formats.quantize(x, "hbq-e", role="activation", variant="asic",
l2_select="threshold", ...)``.

Every block is a row of B binary16 values; the RTL's element codes, E5M3 scale code and L2 codes
must equal the reference's bit for bit. Clocking and the latency count as in
``tb_hbq_psum_unit.py`` (a pipeline of L register stages has latency L).

Stimulus classes (seeded): Gaussian at scales 2^-12..2^12, outlier-heavy (a few values 10-1000x
the rest), heavy-tailed (Student t, 2 degrees of freedom), all-zero (with -0), tiny blocks
(subnormals, amax near the 14 * 2^-14 clip point), huge blocks (up to 65504), micro-block maxima
at exactly 7.5 * S1 and one ULP either side (the L2 threshold), amax at exact E5M3 rounding ties
of amax / 14 and one ULP either side, elements exactly on E2M2 rounding boundaries at L2
multiplier 1 and 2 (half-away vs nearest-even ties, the 0.875 promotion, the 6.5 saturation
edge), ±Inf elements, and uniformly random finite bit patterns (every exponent).

``replay_committed_vectors`` replays ``tests/vectors/scale_e5m3.npz`` (E5M3 scale of a value,
divisor 1: a block whose amax is 14 times the value) and ``tests/vectors/elem_e2m2.npz`` (E2M2
codes of x at scale S: a block with S1 = S), with the expected codes taken from the files.
"""

from __future__ import annotations

from pathlib import Path

import cocotb
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge

from coaccel.models.formats import quantize

ROUNDING = {0: "half_away", 1: "rne"}
SCALE_ROUNDING = {0: "half_up", 1: "ceil"}
BETA8 = np.array([1, 3, 5, 7, 9, 11, 13, 15, 18, 22, 26, 30, 36, 44, 52])
"""E2M2 rounding boundaries in eighths (0.125 ... 6.5)."""
CLASSES = (
    "gauss",
    "outlier",
    "heavy",
    "zero",
    "tiny",
    "huge",
    "l2_edge",
    "scale_tie",
    "elem_tie",
    "inf",
    "random",
)


def reference(x16: np.ndarray, params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes (R, B), scale codes (R,), L2 codes (R, B/UB)) of float16 blocks (R, B)."""
    q = quantize(
        x16,
        "hbq-e",
        role="activation",
        variant="asic",
        l2_select="threshold",
        block=params["B"],
        ub=params["UB"],
        rounding=ROUNDING[params["ROUNDING"]],
        scale_rounding=SCALE_ROUNDING[params["SCALE_ROUNDING"]],
        backend="numpy",
    )
    return q.codes[:, 0, :], q.scales[:, 0], q.l2_codes[:, 0, :]


def _scale_value(code: int) -> float:
    return 2.0 ** ((code >> 3) - 15) * (1 + (code & 7) / 8)


def _f16(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -65504, 65504).astype(np.float16)


def make_blocks(rng: np.random.Generator, n: int, params: dict) -> tuple[np.ndarray, list[str]]:
    """``n`` float16 blocks of B values, cycling through :data:`CLASSES`."""
    b = params["B"]
    blocks = np.zeros((n, b), dtype=np.float16)
    labels = []
    for r in range(n):
        cls = CLASSES[r % len(CLASSES)]
        sigma = 2.0 ** rng.integers(-12, 13)
        if cls == "gauss":
            x = rng.standard_normal(b) * sigma
        elif cls == "outlier":
            x = rng.standard_normal(b) * sigma
            idx = rng.choice(b, size=int(rng.integers(1, 4)), replace=False)
            x[idx] *= 10.0 ** rng.uniform(1, 3, idx.size)
        elif cls == "heavy":
            x = rng.standard_t(2, b) * sigma
        elif cls == "zero":
            x = np.where(rng.random(b) < 0.5, -0.0, 0.0)
        elif cls == "tiny":
            x = rng.standard_normal(b) * 2.0 ** rng.integers(-24, -9)
            if rng.random() < 0.5:  # amax right at the clip point 14 * 2^-14 (and around it)
                x[rng.integers(b)] = 14 * 2.0**-14 * (1 + rng.integers(-2, 3) * 2.0**-10)
        elif cls == "huge":
            x = rng.standard_normal(b) * 2.0**13
            x[rng.integers(b)] = rng.choice([-65504.0, 65504.0])
        else:
            x = rng.standard_normal(b) * sigma
        x16 = _f16(x)
        if cls in ("l2_edge", "elem_tie"):
            x16 = _edge_block(rng, x16, cls, params)
        elif cls == "scale_tie":
            # amax / 14 exactly halfway between E5M3 neighbours: amax = 7 * (17 + 2m) / 8 * 2^e.
            m = int(rng.integers(0, 8))
            e = int(rng.integers(-10, 10))
            amax = np.float16(7 * (17 + 2 * m) / 8 * 2.0**e)
            bits = int(amax.view(np.uint16)) + int(rng.integers(-1, 2))
            x16 = _f16(rng.uniform(-1, 1, b) * float(amax) * 0.9)
            x16[rng.integers(b)] = np.uint16(bits).view(np.float16) * rng.choice([-1, 1])
        elif cls == "inf":
            x16[rng.choice(b, size=int(rng.integers(1, 4)), replace=False)] = rng.choice(
                [-np.inf, np.inf]
            )
        elif cls == "random":
            bits = (rng.integers(0, 2, b) << 15) | (rng.integers(0, 31, b) << 10)
            bits |= rng.integers(0, 1024, b)
            x16 = bits.astype(np.uint16).view(np.float16)
        blocks[r] = x16
        labels.append(cls)
    return blocks, labels


def _edge_block(rng: np.random.Generator, x16: np.ndarray, cls: str, params: dict) -> np.ndarray:
    """Place values exactly on (or one ULP off) the block's own decision boundaries."""
    b, ub = params["B"], params["UB"]
    x16 = x16.copy()
    amax_pos = int(rng.integers(b))
    x16[amax_pos] = np.float16(abs(float(x16[amax_pos])) + 1.0) * 2  # a clear maximum
    keep = np.abs(x16.astype(np.float64)) <= abs(float(x16[amax_pos]))
    x16 = np.where(keep, x16, np.float16(0))
    _, scale, _ = reference(x16[None, :], params)
    s1 = _scale_value(int(scale[0]))
    out = x16.copy()
    for j in range(b // ub):
        lanes = [i for i in range(j * ub, (j + 1) * ub) if i != amax_pos]
        if cls == "l2_edge":
            # The micro-block maximum at 7.5 * S1 exactly, one ULP below, or one ULP above.
            edge = np.float16(7.5 * s1)
            step = int(rng.integers(-1, 2))
            v = np.uint16(int(edge.view(np.uint16)) + step).view(np.float16)
            i = int(rng.choice(lanes))
            out[lanes] = _f16(out[lanes].astype(np.float64) * 0.5)
            out[i] = v * rng.choice([-1, 1])
        else:
            # Boundaries beta * S1 * multiplier for both multipliers (the micro-block's own
            # multiplier is decided by its maximum, so some land on live ties).
            mult = float(rng.choice([1.0, 2.0]))
            k = rng.integers(0, len(BETA8), len(lanes))
            v = BETA8[k] / 8 * s1 * mult
            v = _f16(v * rng.choice([-1, 1], len(lanes)))
            out[lanes] = v
    return out


async def start(dut) -> dict:
    cfg = rtlkit.tb_config()
    params = {
        "B": int(dut.B.value),
        "UB": int(dut.UB.value),
        "ROUNDING": int(dut.ROUNDING.value),
        "SCALE_ROUNDING": int(dut.SCALE_ROUNDING.value),
    }
    for key, value in cfg["params"].items():
        if params[key] != int(value):
            raise AssertionError(f"DUT {key}={params[key]}, launcher asked for {value}")
    await rtlkit.reset(dut, zero=("i_valid", "i_x"))
    return {"cfg": cfg, "params": params}


OUTPUTS = ("o_valid", "o_codes", "o_scale", "o_l2")
VECTORS = Path(rtlkit.REPO_ROOT) / "tests" / "vectors"


async def stream(dut, words: list[int], rng: np.random.Generator | None = None) -> list[tuple]:
    """Drive blocks back to back (random bubbles after the first 64 when ``rng`` is given).

    Returns:
        Per block in input order: (latency in cycles, codes, scale code, L2 codes).
    """
    b = int(dut.B.value)
    nub = b // int(dut.UB.value)
    cycle = 0
    issued: list[int] = []
    got: list[tuple[int, np.ndarray, int, np.ndarray]] = []

    async def tick(word: int | None) -> None:
        nonlocal cycle
        await FallingEdge(dut.i_clk)
        cycle += 1
        for name in OUTPUTS:
            if not rtlkit.resolvable(getattr(dut, name).value):
                raise AssertionError(f"cycle {cycle}: {name} is not 0/1")
        if int(dut.o_valid.value):
            got.append(
                (
                    cycle,
                    rtlkit.unpack_lanes(int(dut.o_codes.value), 5, b),
                    int(dut.o_scale.value),
                    rtlkit.unpack_lanes(int(dut.o_l2.value), 1, nub),
                )
            )
        if word is None:
            dut.i_valid.value = 0
        else:
            dut.i_valid.value = 1
            dut.i_x.value = word
            issued.append(cycle)  # the next rising edge samples it (edge 1)

    for i, word in enumerate(words):
        if rng is not None and i >= 64 and rng.random() < 0.1:
            await tick(None)
        await tick(word)
    for _ in range(4):
        await tick(None)
    assert len(got) == len(words), f"{len(words)} blocks in, {len(got)} out"
    return [(got[i][0] - issued[i], *got[i][1:]) for i in range(len(words))]


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    await start(dut)
    for _ in range(3):
        await FallingEdge(dut.i_clk)
        for name in OUTPUTS:
            value = getattr(dut, name).value
            assert rtlkit.resolvable(value) and int(value) == 0, f"{name} = {value} after reset"


@cocotb.test()
async def blocks_match_reference(dut):
    """Seeded blocks of every class, streamed with bubbles: codes, scale, L2 are bit-exact."""
    st = await start(dut)
    cfg, params = st["cfg"], st["params"]
    rng = np.random.default_rng(cfg.get("seed", 1))
    blocks, labels = make_blocks(rng, int(cfg.get("n_blocks", 1000)), params)
    codes, scales, l2 = reference(blocks, params)
    words = [rtlkit.pack_lanes(row.view(np.uint16), 16) for row in blocks]
    got = await stream(dut, words, rng)
    bad = []
    for i in range(len(words)):
        _, c, s, l = got[i]
        if not (np.array_equal(c, codes[i]) and s == int(scales[i]) and np.array_equal(l, l2[i])):
            bad.append(i)
    for i in bad[:10]:
        _, c, s, l = got[i]
        diff = np.nonzero(c != codes[i])[0][:8]
        dut._log.error(
            f"block {i} ({labels[i]}): scale RTL {s:#04x} ref {int(scales[i]):#04x}; L2 RTL "
            f"{l.tolist()} ref {l2[i].tolist()}; codes differ at {diff.tolist()}: RTL "
            f"{c[diff].tolist()} ref {codes[i][diff].tolist()} x {blocks[i][diff].tolist()}"
        )
    assert not bad, f"{len(bad)} of {len(words)} blocks differ from the reference"
    latency = {g[0] for g in got}
    assert len(latency) == 1, latency
    # Initiation interval: the first 64 blocks go in back to back and come out back to back.
    out_cycles = [lat + i for i, (lat, _, _, _) in enumerate(got[:64])]
    ii = (out_cycles[-1] - out_cycles[0]) / (len(out_cycles) - 1)
    counts = {cls: labels.count(cls) for cls in CLASSES}
    rtlkit.write_results(
        {
            "blocks": len(words),
            "classes": counts,
            "latency_cycles": latency.pop(),
            "ii_cycles": ii,
            "l2_ones": int(l2.sum()),
            "scales_distinct": len(set(scales.tolist())),
        }
    )


@cocotb.test()
async def replay_committed_vectors(dut):
    """The committed scale and element vectors, with the expected codes taken from the files."""
    st = await start(dut)
    params = st["params"]
    b, ub = params["B"], params["UB"]
    nub = b // ub
    # Scale: value v with divisor 1 -> a block whose amax is 14 v (exact in binary16).
    z = np.load(VECTORS / "scale_e5m3.npz")
    v, div = z["value"], z["divisor"]
    want = z["codes_ceil" if params["SCALE_ROUNDING"] else "codes_half_up"]
    with np.errstate(all="ignore"):
        amax = 14.0 * v
        ok = (div == 1) & np.isfinite(v) & (v >= 0) & (amax <= 65504)
        ok &= amax.astype(np.float16).astype(np.float64) == amax
    scale_words, scale_want = [], []
    for a, code in zip(amax[ok], want[ok], strict=True):
        row = np.zeros(b, dtype=np.float16)
        row[0] = a
        scale_words.append(rtlkit.pack_lanes(row.view(np.uint16), 16))
        scale_want.append(int(code))
    got = await stream(dut, scale_words)
    bad_scale = [i for i, g in enumerate(got) if g[2] != scale_want[i]]
    if bad_scale:
        i = bad_scale[0]
        raise AssertionError(
            f"{len(bad_scale)} of {len(got)} replayed scales differ, e.g. amax {amax[ok][i]}: "
            f"RTL {got[i][2]:#04x}, file {scale_want[i]:#04x}"
        )
    # Elements: x at scale S -> S1 = S from an amax of 14 S in micro-block 0 (whose multiplier
    # is then 2), the x values in the other micro-blocks, which keep multiplier 1 when every
    # |x| < 7.5 S.
    z = np.load(VECTORS / "elem_e2m2.npz")
    x, scale = z["x"], z["scale"]
    codes = z["codes_rne" if params["ROUNDING"] else "codes_half_away"]
    with np.errstate(all="ignore"):
        exact = np.isfinite(x) & (x.astype(np.float16).astype(np.float64) == x)
    lanes = [i for i in range(ub, b)]
    elem_words, elem_want = [], []
    n_elements = 0
    for s1 in np.unique(scale):
        sel = np.nonzero(exact & (scale == s1) & (np.abs(x) < 7.5 * s1))[0]
        for first in range(0, len(sel), len(lanes)):
            part = sel[first : first + len(lanes)]
            row = np.zeros(b, dtype=np.float16)
            row[0] = 14 * s1
            expect = np.zeros(b, dtype=np.int64)
            expect[0] = 15  # 14 S / (2 S) = 7.0, the E2M2 maximum {0, 11, 11}
            row[lanes[: len(part)]] = x[part]
            expect[lanes[: len(part)]] = codes[part]
            e = int(np.floor(np.log2(s1)))
            m = int(round((s1 / 2.0**e - 1) * 8))
            elem_words.append(rtlkit.pack_lanes(row.view(np.uint16), 16))
            elem_want.append((expect, ((e + 15) << 3) | m))
            n_elements += len(part)
    got = await stream(dut, elem_words)
    for i, (_, c, sc, l2) in enumerate(got):
        expect, sc_want = elem_want[i]
        assert sc == sc_want, f"element replay block {i}: scale {sc:#04x}, want {sc_want:#04x}"
        assert l2.tolist() == [1] + [0] * (nub - 1), f"element replay block {i}: L2 {l2}"
        diff = np.nonzero(c != expect)[0]
        assert diff.size == 0, (
            f"element replay block {i}: lanes {diff[:8].tolist()} RTL {c[diff[:8]].tolist()} "
            f"file {expect[diff[:8]].tolist()}"
        )
    rtlkit.write_results(
        {
            "replay_scale_blocks": len(scale_words),
            "replay_elements": n_elements,
            "replay_element_blocks": len(elem_words),
        }
    )
