"""cocotb testbench of ``rtl/deltallm/dl_delta_encoder.v`` against
``coaccel.models.deltallm.encode_delta_keys`` (fixed mode).

Sequences of every class of ``deltallm_stim.KEY_CLASSES`` are streamed back to back, one key row
per cycle (``i_first`` on each sequence's row 0, ``i_dense`` on sink and refresh rows), over a
set of thresholds that includes θ = 0 and θ = 1 (exact) and θ = 255 (only dense rows store
anything). Every output row is compared with the reference: bitmask, delta values, the
reconstruction ``k̂`` (``keys_hat``), the stored-element count and the packed row (``o_packed``
against ``pack_delta_rows`` of the reference's deltas and mask, as one integer); the last ``k̂`` of
each sequence is the reference's encoder ``memory``. Also replays the committed corner vectors
``tests/vectors/deltallm_delta.npz`` and drives directed bitmasks that stress the packing network
(all, none, one or all but one stored at each end, alternating, the stage strides 2^k, a single
element at every position, random masks of every popcount 0..D).
"""

from __future__ import annotations

from pathlib import Path

import cocotb
import deltallm_stim as stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge

from coaccel.models.deltallm import encode_delta_keys, pack_delta_rows

OUTPUTS = ("o_valid", "o_mask", "o_delta", "o_khat", "o_nnz", "o_packed")
VECTORS = Path(rtlkit.REPO_ROOT) / "tests" / "vectors" / "deltallm_delta.npz"


def _params(dut) -> dict[str, int]:
    hdl = {k: int(getattr(dut, k).value) for k in ("D", "DW", "MW", "TW")}
    for key, value in rtlkit.tb_config()["params"].items():
        assert hdl[key] == int(value), f"DUT {key}={hdl[key]}, launcher asked for {value}"
    return hdl


async def _start(dut) -> dict[str, int]:
    await rtlkit.reset(dut, zero=("i_valid", "i_first", "i_dense", "i_key", "i_theta", "i_naive"))
    return _params(dut)


def _sequences(rng: np.random.Generator, d: int, n_seq: int, t_n: int) -> list[dict]:
    """Seeded sequences with their encoder options, covering every class and option."""
    thetas = [0, 1, 2, 4, 8, 16, 255]
    seqs = []
    for i in range(n_seq):
        kind = stim.KEY_CLASSES[i % len(stim.KEY_CLASSES)]
        seqs.append(
            {
                "keys": stim.key_sequence(rng, kind, t_n, d),
                "kind": kind,
                "theta": thetas[i % len(thetas)],
                "naive": (i // len(stim.KEY_CLASSES)) % 3 == 2,
                "refresh": [0, 0, 5][i % 3],
                "n_sink": [1, 1, 1, 3][i % 4],
            }
        )
    return seqs


async def _stream(dut, p: dict[str, int], seqs: list[dict]) -> tuple[int, int, int, list[int]]:
    """Stream every sequence back to back; compare each output row.

    Returns:
        (rows, mismatching rows (any output), rows whose ``o_packed`` differs, latency of each
        row in cycles from the edge that samples it).
    """
    d, dw, mw = p["D"], p["DW"], p["MW"]
    expected = []
    rows = []
    for s in seqs:
        dk = encode_delta_keys(
            s["keys"][None],
            theta=s["theta"],
            delta_mode="naive" if s["naive"] else "memory",
            refresh_period=s["refresh"],
            n_sink=s["n_sink"],
        )
        lim_m, lim_d = 1 << (mw - 1), 1 << (dw - 1)
        fits = np.all(np.abs(dk.keys_hat + 0.5) < lim_m) and np.all(np.abs(dk.deltas + 0.5) < lim_d)
        if not fits:
            # The naive form's drift left the RTL's documented contract (|k̂| < 2^(MW-1), deltas
            # in DW bits): this sequence runs in the memory form instead, which always fits.
            assert s["naive"], "a memory-form sequence must always fit the RTL widths"
            s["naive"] = False
            dk = encode_delta_keys(
                s["keys"][None],
                theta=s["theta"],
                refresh_period=s["refresh"],
                n_sink=s["n_sink"],
            )
        t_n = s["keys"].shape[0]
        for t in range(t_n):
            dense = t < s["n_sink"] or (s["refresh"] > 0 and t % s["refresh"] == 0)
            rows.append(
                {
                    "i_first": int(t == 0),
                    "i_dense": int(dense),
                    "i_key": rtlkit.pack_lanes(s["keys"][t], 8),
                    "i_theta": s["theta"],
                    "i_naive": int(s["naive"]),
                }
            )
            packed, _ = pack_delta_rows(dk.deltas[0, t], dk.mask[0, t])
            expected.append(
                (
                    dk.mask[0, t],
                    dk.deltas[0, t],
                    dk.keys_hat[0, t],
                    dk.memory[0] if t == t_n - 1 else None,
                    rtlkit.pack_lanes(packed, dw),
                    s["kind"],
                )
            )
    mismatches = 0
    packed_mismatches = 0
    got_i = 0
    latency: list[int] = []
    for i in range(len(rows) + 2):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, f"row {i}")
        if int(dut.o_valid.value):
            mask, delta, khat, memory, packed, kind = expected[got_i]
            g_mask = rtlkit.unpack_lanes(int(dut.o_mask.value), 1, d).astype(bool)
            g_delta = rtlkit.unpack_lanes(int(dut.o_delta.value), dw, d, signed=True)
            g_khat = rtlkit.unpack_lanes(int(dut.o_khat.value), mw, d, signed=True)
            packed_ok = int(dut.o_packed.value) == packed
            ok = (
                np.array_equal(g_mask, mask)
                and np.array_equal(g_delta, delta)
                and np.array_equal(g_khat, khat)
                and int(dut.o_nnz.value) == int(mask.sum())
                and (memory is None or np.array_equal(g_khat, memory))
                and packed_ok
            )
            if not packed_ok:
                packed_mismatches += 1
            if not ok:
                mismatches += 1
                if mismatches <= 5:
                    bad = np.flatnonzero((g_delta != delta) | (g_mask != mask) | (g_khat != khat))
                    g_packed = rtlkit.unpack_lanes(int(dut.o_packed.value), dw, d, signed=True)
                    r_packed = rtlkit.unpack_lanes(packed, dw, d, signed=True)
                    bad_p = np.flatnonzero(g_packed != r_packed)
                    what = []
                    if bad.size:
                        what.append(
                            f"elements {bad[:8]} rtl delta {g_delta[bad[:8]]} ref {delta[bad[:8]]}"
                            f" rtl khat {g_khat[bad[:8]]} ref {khat[bad[:8]]}"
                        )
                    if bad_p.size:
                        what.append(
                            f"packed slots {bad_p[:8]} rtl {g_packed[bad_p[:8]]}"
                            f" ref {r_packed[bad_p[:8]]}"
                        )
                    dut._log.error(
                        f"row {got_i} ({kind}, nnz {int(mask.sum())}): "
                        + ("; ".join(what) or f"nnz {int(dut.o_nnz.value)} or memory differs")
                    )
            latency.append(i - got_i)  # row got_i was driven before falling edge got_i + 1
            got_i += 1
        if i < len(rows):
            for name, value in rows[i].items():
                getattr(dut, name).value = value
            dut.i_valid.value = 1
        else:
            dut.i_valid.value = 0
    assert got_i == len(rows), f"{len(rows)} rows in, {got_i} out"
    return len(rows), mismatches, packed_mismatches, latency


def _directed_masks(rng: np.random.Generator, d: int) -> list[np.ndarray]:
    """Bitmasks that stress the packing network, ``[d]`` bool each.

    All, none, one stored at either end and all but one at either end, both alternations, the
    two halves, every stage's stride (element c stored where bit k of c is set, k < log2 d), a
    single stored element at every position, and three random masks of every popcount 0..d.
    """
    c = np.arange(d)
    masks = [
        np.ones(d, bool),
        np.zeros(d, bool),
        c == 0,
        c == d - 1,
        c != 0,
        c != d - 1,
        c % 2 == 0,
        c % 2 == 1,
        c < d // 2,
        c >= d // 2,
    ]
    masks += [((c >> k) & 1).astype(bool) for k in range(d.bit_length() - 1)]
    masks += [c == i for i in range(d)]
    for n in range(d + 1):
        for _ in range(3):
            m = np.zeros(d, bool)
            m[rng.choice(d, size=n, replace=False)] = True
            masks.append(m)
    return masks


def _keys_for_masks(rng: np.random.Generator, masks: list[np.ndarray]) -> np.ndarray:
    """A key sequence ``[len(masks) + 1, d]`` int8 whose delta rows at θ = 1 have these masks.

    Row 0 is the sequence's dense first row; row t + 1 gives exactly the elements of
    ``masks[t]`` another int8 value (a delta in ±1..255, every bit of the 9-bit values used).
    With θ = 1 an element is stored iff its key changed, in the memory form (k̂ then equals
    the previous key) and in the naive form alike.
    """
    d = masks[0].shape[0]
    keys = [rng.integers(-128, 128, size=d)]
    for m in masks:
        k = keys[-1].copy()
        other = (k + 128 + rng.integers(1, 256, size=d)) % 256 - 128
        k[m] = other[m]
        keys.append(k)
    return np.stack(keys).astype(np.int8)


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    await _start(dut)
    for _ in range(3):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, "after reset")
    for name in OUTPUTS:
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def rows_match_reference(dut):
    """Seeded sequences of every class and option, back to back: every output bit equal."""
    p = await _start(dut)
    cfg = rtlkit.tb_config()
    rng = np.random.default_rng(cfg["seed"])
    seqs = _sequences(rng, p["D"], cfg["n_seq"], cfg["t_len"])
    n, bad, bad_packed, lat = await _stream(dut, p, seqs)
    classes = {k: sum(s["keys"].shape[0] for s in seqs if s["kind"] == k) for k in stim.KEY_CLASSES}
    naive_rows = sum(s["keys"].shape[0] for s in seqs if s["naive"])
    rtlkit.write_results(
        {
            "rows": n,
            "naive_rows": naive_rows,
            "mismatches": bad,
            "packed_mismatches": bad_packed,
            "classes": classes,
            "latency_cycles": max(lat),
            "ii_cycles": 1,
        }
    )
    assert bad == 0, f"{bad} of {n} rows differ from the reference"
    assert min(lat) == max(lat), f"latency varies: {min(lat)}..{max(lat)}"


@cocotb.test()
async def replay_committed_vectors(dut):
    """The committed corner sequences (tests/vectors/deltallm_delta.npz), when D matches."""
    p = await _start(dut)
    with np.load(VECTORS) as f:
        keys, theta = f["keys"], f["theta"]
        naive, refresh, n_sink = f["naive"], f["refresh_period"], f["n_sink"]
    if keys.shape[2] != p["D"]:
        rtlkit.write_results({"vector_rows": 0})
        return
    seqs = [
        {
            "keys": keys[i],
            "kind": "vector",
            "theta": int(theta[i]),
            "naive": bool(naive[i]),
            "refresh": int(refresh[i]),
            "n_sink": int(n_sink[i]),
        }
        for i in range(keys.shape[0])
    ]
    n, bad, bad_packed, _ = await _stream(dut, p, seqs)
    rtlkit.write_results(
        {"vector_rows": n, "vector_mismatches": bad, "vector_packed_mismatches": bad_packed}
    )
    assert bad == 0, f"{bad} of {n} committed vector rows differ"


@cocotb.test()
async def packing_directed_masks(dut):
    """Directed bitmasks (every popcount 0..D) in both forms: every output bit equal."""
    p = await _start(dut)
    d = p["D"]
    rng = np.random.default_rng(rtlkit.tb_config()["seed"] + 1)
    masks = _directed_masks(rng, d)
    seqs = []
    for naive in (False, True):
        keys = _keys_for_masks(rng, masks)
        dk = encode_delta_keys(keys[None], theta=1, delta_mode="naive" if naive else "memory")
        assert np.array_equal(dk.mask[0, 1:], np.stack(masks)), "stimulus missed its masks"
        seqs.append(
            {
                "keys": keys,
                "kind": "directed",
                "theta": 1,
                "naive": naive,
                "refresh": 0,
                "n_sink": 1,
            }
        )
    n, bad, bad_packed, _ = await _stream(dut, p, seqs)
    assert seqs[1]["naive"], "the naive-form directed sequence left the widths' contract"
    rtlkit.write_results(
        {
            "directed_rows": n,
            "directed_mismatches": bad,
            "directed_packed_mismatches": bad_packed,
            "directed_popcounts": len({int(m.sum()) for m in masks}),
        }
    )
    assert bad == 0, f"{bad} of {n} directed rows differ ({bad_packed} in o_packed)"
