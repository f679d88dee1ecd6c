"""cocotb testbench of ``rtl/hbq/hbq_psum_unit.v`` (MXINT8 dequantize -> FP16 add -> requantize)
against ``coaccel.models.hbq`` (``mxint8_dequantize``, ``fp16_add``, ``mxint8_quantize``,
``accumulate_psums(..., psum_mode="mxint8_running")``).

Clocking: inputs are driven and outputs sampled on the falling edge. Latency counts rising edges
as ``rtl/hbq/hbq_pe.v`` does: the edge that samples the input is the first, the edge that
registers the output the last, so a pipeline of L register stages has latency L; with an input
driven at falling edge ``t`` and its output first seen at falling edge ``u``, latency = ``u - t``.

Tests:
* ``reset_clears_outputs`` — after reset every output is 0 (no X/Z) before any input.
* ``steps_match_reference`` — thousands of independent read-modify-write steps streamed
  back-to-back (with bubbles): both the binary16 sums (``o_sum``) and the requantized block
  (``o_q``, ``o_x``) equal the reference bit for bit; latency and initiation interval measured.
* ``running_accumulation`` — several buffer words accumulated over many K steps through the RTL
  with the testbench as PSUM buffer (write-back of the RTL's own output); the final dequantized
  contents equal ``accumulate_psums(..., psum_mode="mxint8_running")``.
"""

from __future__ import annotations

import cocotb
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge

from coaccel.models.hbq import accumulate_psums, fp16_add, mxint8_dequantize, mxint8_quantize

ROUNDING = {0: "rne", 1: "trunc"}


def _fp16(x: np.ndarray) -> np.ndarray:
    """float values -> binary16 bit patterns (values beyond 65504 are clipped first)."""
    return np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)


def _tie_block(rng: np.random.Generator, n: int) -> np.ndarray:
    """A block whose smaller elements fall exactly on MXINT8 rounding ties (or near them)."""
    e_max = int(rng.integers(7, 31))
    bits = np.zeros(n, dtype=np.int64)
    bits[0] = (e_max << 10) | int(rng.integers(0, 1024))
    d = rng.integers(0, 7, n - 1)
    shift = 4 + d  # the element's significand is shifted right by 4 + (e_max - e)
    sig = ((rng.integers(1024, 2048, n - 1) >> shift) << shift) | (1 << (shift - 1))
    sig = sig + rng.integers(-1, 2, n - 1) * rng.integers(0, 2, n - 1)  # ties and neighbours
    sig = np.clip(sig, 1024, 2047)
    bits[1:] = ((e_max - d) << 10) | (sig & 1023)
    bits |= rng.integers(0, 2, n) << 15
    return rng.permutation(bits)


def step_vectors(rng: np.random.Generator, n_steps: int, n: int) -> list[dict]:
    """Independent read-modify-write steps of every stimulus class (``n`` lanes each)."""
    classes = (
        "gauss",
        "outlier",
        "zero_old",
        "zero_new",
        "all_zero",
        "first",
        "ties",
        "clamp",
        "saturate",
        "raw_codes",
        "subnormal",
    )
    steps = []
    for k in range(n_steps):
        cls = classes[k % len(classes)]
        mag = 2.0 ** rng.integers(-16, 14)
        old_v = rng.standard_normal(n) * mag
        new_v = rng.standard_normal(n) * mag * 2.0 ** rng.integers(-4, 5)
        first = 0
        if cls == "outlier":
            old_v[rng.integers(n)] *= 2.0 ** rng.integers(4, 10)
            new_v[rng.integers(n)] *= 2.0 ** rng.integers(4, 10)
        elif cls == "zero_old":
            old_v[:] = 0.0
        elif cls == "zero_new":
            new_v[:] = 0.0
        elif cls == "all_zero":
            old_v[:] = 0.0
            new_v[:] = 0.0
        elif cls == "saturate":
            old_v = np.sign(rng.standard_normal(n)) * rng.uniform(30000, 65504, n)
            new_v = np.sign(old_v) * rng.uniform(30000, 65504, n)
        new_bits = _fp16(new_v)
        old = mxint8_quantize(_fp16(old_v), block=n)
        old_q, old_x = old.q.astype(np.int64), int(old.x_code[0])
        if cls in ("first", "ties", "clamp"):
            first = 1  # the sum is the new value itself: drives the quantizer directly
            old_q = rng.integers(-127, 128, n)  # ignored by the RTL on the first pass
            old_x = int(rng.integers(0, 256))
            if cls == "ties":
                new_bits = _tie_block(rng, n).astype(np.uint16)
            elif cls == "clamp":
                new_bits = new_bits.copy()
                new_bits[0] = (int(rng.integers(1, 31)) << 10) | int(rng.integers(1016, 1024))
                new_bits[1:] &= 0x83FF  # smaller exponents so that lane 0 holds the maximum
                new_bits[1:] |= 0x0400
        elif cls == "raw_codes":
            old_q = rng.integers(-127, 128, n)
            old_x = int(rng.integers(0, 256))  # includes flush-to-zero and saturating scales
            e = rng.integers(0, 31, n)
            new_bits = (rng.integers(0, 2, n) << 15) | (e << 10) | rng.integers(0, 1024, n)
            new_bits = new_bits.astype(np.uint16)
        elif cls == "subnormal":
            new_bits = (rng.integers(0, 2, n) << 15) | rng.integers(0, 1024, n)
            new_bits[: n // 2] = _fp16(new_v[: n // 2])
            new_bits = new_bits.astype(np.uint16)
        steps.append(
            {
                "cls": cls,
                "first": first,
                "old_q": np.asarray(old_q, dtype=np.int64),
                "old_x": old_x,
                "new": np.asarray(new_bits, dtype=np.uint16),
            }
        )
    return steps


def reference_step(step: dict, n: int, rounding: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(sum bits, q, x_code) of one read-modify-write step, from the reference functions."""
    if step["first"]:
        old = np.zeros(n, dtype=np.uint16)
    else:
        old = mxint8_dequantize(step["old_q"].astype(np.int8), np.uint8(step["old_x"]), block=n)
    total = fp16_add(old, step["new"])
    stored = mxint8_quantize(total, block=n, rounding=rounding)
    return total, stored.q.astype(np.int64), int(stored.x_code[0])


class Harness:
    """Drives the unit on falling edges and records everything it outputs.

    Each driven step carries a tag; outputs leave in input order, so every recorded output is
    paired with the tag of the step it belongs to.
    """

    def __init__(self, dut, n: int):
        self.dut = dut
        self.n = n
        self.cycle = 0
        self.sums: list[tuple[int, np.ndarray]] = []
        self.blocks: list[tuple[int, np.ndarray, int, object]] = []
        self._tags: list[object] = []

    def _resolvable(self) -> None:
        for name in ("o_sum_valid", "o_sum", "o_valid", "o_q", "o_x"):
            value = getattr(self.dut, name).value
            if not rtlkit.resolvable(value):
                raise AssertionError(f"cycle {self.cycle}: {name} = {value} is not 0/1")

    async def sample(self) -> None:
        """Wait for the falling edge and record the outputs of the last rising edge."""
        await FallingEdge(self.dut.i_clk)
        self.cycle += 1
        self._resolvable()
        d = self.dut
        if int(d.o_sum_valid.value):
            self.sums.append((self.cycle, rtlkit.unpack_lanes(int(d.o_sum.value), 16, self.n)))
        if int(d.o_valid.value):
            q = rtlkit.unpack_lanes(int(d.o_q.value), 8, self.n)
            q = np.where(q >= 128, q - 256, q)
            self.blocks.append((self.cycle, q, int(d.o_x.value), self._tags.pop(0)))

    def drive(self, step: dict | None, tag: object = None) -> None:
        """Present ``step`` (None = bubble) for the next rising edge."""
        d = self.dut
        if step is None:
            d.i_valid.value = 0
            return
        self._tags.append(tag)
        d.i_valid.value = 1
        d.i_first.value = step["first"]
        d.i_old_q.value = rtlkit.pack_lanes(step["old_q"] & 0xFF, 8)
        d.i_old_x.value = step["old_x"]
        d.i_psum.value = rtlkit.pack_lanes(step["new"], 16)

    async def tick(self, step: dict | None, tag: object = None) -> None:
        await self.sample()
        self.drive(step, tag)


async def start(dut) -> tuple[Harness, dict]:
    cfg = rtlkit.tb_config()
    n = int(dut.SA_N.value)
    if n != int(cfg["params"].get("SA_N", 16)):
        raise AssertionError(f"DUT SA_N={n}, launcher asked for {cfg['params']}")
    await rtlkit.reset(dut, zero=("i_valid", "i_first", "i_old_q", "i_old_x", "i_psum"))
    return Harness(dut, n), cfg


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    h, _ = await start(dut)
    for _ in range(3):
        await h.tick(None)
    for name in ("o_sum_valid", "o_sum", "o_valid", "o_q", "o_x"):
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def steps_match_reference(dut):
    """Independent steps, back-to-back with bubbles: sums and MXINT8 blocks are bit-exact."""
    h, cfg = await start(dut)
    rounding = ROUNDING[int(cfg["params"].get("ROUNDING", 0))]
    rng = np.random.default_rng(cfg.get("seed", 1))
    steps = step_vectors(rng, int(cfg.get("n_steps", 2000)), h.n)
    issue_cycle = []
    for i, step in enumerate(steps):
        # A burst of 64 back-to-back inputs, then bubbles at random.
        if i >= 64 and rng.random() < 0.1:
            await h.tick(None)
        issue_cycle.append(h.cycle + 1)  # taken at the next rising edge
        await h.tick(step, tag=i)
    for _ in range(4):
        await h.tick(None)
    assert len(h.sums) == len(steps) and len(h.blocks) == len(steps), (
        f"{len(steps)} inputs gave {len(h.sums)} sums and {len(h.blocks)} blocks"
    )
    bad = []
    for i, step in enumerate(steps):
        total, q, x = reference_step(step, h.n, rounding)
        if not np.array_equal(h.sums[i][1], total.astype(np.int64)):
            bad.append((i, step["cls"], "o_sum", h.sums[i][1], total))
        if not np.array_equal(h.blocks[i][1], q) or h.blocks[i][2] != x:
            bad.append((i, step["cls"], "o_q/o_x", (h.blocks[i][1], h.blocks[i][2]), (q, x)))
    for i, cls, what, got, exp in bad[:10]:
        dut._log.error(f"step {i} ({cls}) {what}: RTL {got}, reference {exp}")
    assert not bad, f"{len(bad)} mismatches in {len(steps)} steps"
    sum_latency = {h.sums[i][0] - issue_cycle[i] for i in range(len(steps))}
    latency = {h.blocks[i][0] - issue_cycle[i] for i in range(len(steps))}
    assert len(latency) == 1 and len(sum_latency) == 1, (latency, sum_latency)
    # Initiation interval: output spacing over the initial back-to-back burst.
    burst = [c for c, _, _, _ in h.blocks[:64]]
    ii = (burst[-1] - burst[0]) / (len(burst) - 1)
    classes = sorted({s["cls"] for s in steps})
    rtlkit.write_results(
        {
            "steps": len(steps),
            "latency_cycles": latency.pop(),
            "sum_latency_cycles": sum_latency.pop(),
            "ii_cycles": ii,
            "classes": classes,
        }
    )


@cocotb.test()
async def running_accumulation(dut):
    """Buffer words accumulated over K steps with the RTL's own write-back equal the reference."""
    h, cfg = await start(dut)
    rounding = ROUNDING[int(cfg["params"].get("ROUNDING", 0))]
    rng = np.random.default_rng(cfg.get("seed", 1) + 1)
    n_words = int(cfg.get("n_words", 6))  # >= 3: a word is reread after its write-back landed
    n_k = int(cfg.get("n_k", 24))
    # Per word a magnitude drift over K, outliers in some words, all-zero K blocks in others.
    base = 2.0 ** rng.integers(-12, 8, n_words)
    new = rng.standard_normal((n_k, n_words, h.n)) * base[None, :, None]
    new *= 2.0 ** rng.integers(-3, 4, (n_k, n_words, 1))
    new[:, 1, 0] *= 300.0
    new[rng.integers(n_k), 2, :] = 0.0
    new[:, 3, :] = np.abs(new[:, 3, :])  # one word only grows (exercises saturation late)
    new[:, 3, :] *= 2.0**6
    new_bits = _fp16(new)
    buffer: dict[int, tuple[np.ndarray, int]] = {}
    taken = 0

    def write_back() -> None:
        nonlocal taken
        for _, q, x, word in h.blocks[taken:]:
            buffer[word] = (q, x)
        taken = len(h.blocks)

    for k in range(n_k):
        for w in range(n_words):
            await h.sample()
            write_back()
            if k and w not in buffer:
                raise AssertionError("write-back not back in time: raise n_words")
            old_q, old_x = buffer.pop(w) if k else (np.zeros(h.n, dtype=np.int64), 0)
            h.drive(
                {"first": int(k == 0), "old_q": old_q, "old_x": old_x, "new": new_bits[k, w]}, tag=w
            )
    for _ in range(4):
        await h.tick(None)
        write_back()
    assert sorted(buffer) == list(range(n_words))
    expected = accumulate_psums(
        new_bits.reshape(n_k, n_words * h.n),
        psum_mode="mxint8_running",
        sa_n=h.n,
        rounding=rounding,
    )
    got = np.concatenate(
        [
            mxint8_dequantize(buffer[w][0].astype(np.int8), np.uint8(buffer[w][1]), block=h.n)
            for w in range(n_words)
        ]
    )
    assert np.array_equal(got, expected), (
        f"final buffer differs in {int(np.sum(got != expected))} of {got.size} channels"
    )
    rtlkit.write_results({"running_words": n_words, "running_k": n_k})
