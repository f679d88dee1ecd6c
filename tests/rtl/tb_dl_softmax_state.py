"""cocotb testbench of ``rtl/deltallm/dl_softmax_state.v`` against the VSSOS reference.

Stimulus: query blocks of seeded attention problems run through
``coaccel.models.deltallm.attention`` (``deltallm_stim.attention_blocks``: hybrid scores, causal
lanes, several softmax sharpnesses, τ in {1, 2, 4, 8, ∞}, both denominator modes), plus the
committed corner columns ``tests/vectors/deltallm_softmax.npz`` (a growing max, saturated
exponents, ties, lanes that start late, no skipping) and columns of random scores at the 24-bit
extremes. Every vector's columns stream back to back (``i_first`` on each vector's first column).

Each output column is compared with ``deltallm_stim.vssos_steps`` (the reference's step, exposed):
running max, exponent E, p, α, the fine flags, the skip decision, PV issue and ℓ; the skip flags
also equal the reference ``attention``'s, and ``vssos_steps`` reproduces the reference's final
outputs for every attention block (so the accessor is the reference).
"""

from __future__ import annotations

import math
from pathlib import Path

import cocotb
import deltallm_stim as stim
import numpy as np
import rtlkit
from cocotb.triggers import FallingEdge, Timer

from coaccel.models.deltallm import log2_scale

OUTPUTS = (
    "o_valid",
    "o_first",
    "o_skip",
    "o_pv",
    "o_lane_valid",
    "o_small",
    "o_e",
    "o_p",
    "o_alpha",
    "o_m",
    "o_den",
    "o_started",
)
INPUTS = (
    "i_valid",
    "i_first",
    "i_lane_valid",
    "i_score",
    "i_mant",
    "i_sh",
    "i_tau_e",
    "i_no_skip",
    "i_denom_kept",
)
VECTORS = Path(rtlkit.REPO_ROOT) / "tests" / "vectors" / "deltallm_softmax.npz"


def _params(dut) -> dict[str, int]:
    names = ("PIPE", "L", "SW", "CW", "SHW", "EW", "TW", "LW")
    hdl = {k: int(getattr(dut, k).value) for k in names}
    for key, value in rtlkit.tb_config()["params"].items():
        assert hdl[key] == int(value), f"DUT {key}={hdl[key]}, launcher asked for {value}"
    return hdl


def _vectors(rng: np.random.Generator, p: dict[str, int], cfg: dict) -> list[dict]:
    """Vectors: (scores, valid, mant, sh, tau_e, denom_mode, reference skip or None)."""
    lanes = p["L"]
    g = 2 if lanes % 2 == 0 else 1
    out = []
    n_att = cfg["attention_problems"]
    taus = [1.0, 2.0, 4.0, 8.0, math.inf]
    for i in range(n_att):
        blocks = stim.attention_blocks(
            rng,
            d=16,
            t_n=cfg["t_len"],
            g=g,
            p_q=lanes // g,
            theta=int(rng.integers(0, 8)),
            window=int(rng.choice([1, 4, 16])),
            tau=taus[i % len(taus)],
            denom_mode=("full", "kept")[(i // len(taus)) % 2],
            q_scale=float(rng.choice([0.01, 0.1, 0.5, 2.0])),
        )
        for b in blocks:
            steps = stim.vssos_steps(
                b.scores, b.valid, b.v[: len(b.scores)], b.mant, b.sh, b.tau_e, b.denom_mode
            )
            assert np.array_equal(stim.normalise(steps.o, steps.den[-1], steps.started), b.output)
            out.append(
                {
                    "scores": b.scores,
                    "valid": b.valid,
                    "mant": b.mant,
                    "sh": b.sh,
                    "tau_e": b.tau_e,
                    "denom_mode": b.denom_mode,
                    "ref_skip": b.skipped,
                    "kind": "attention",
                }
            )
    with np.load(VECTORS) as f:
        vec = {k: f[k] for k in f.files}
    reps = -(-lanes // vec["scores"].shape[2])
    for i in range(vec["scores"].shape[0]):
        t = int(vec["tau_e"][i])
        out.append(
            {
                "scores": np.tile(vec["scores"][i], reps)[:, :lanes],
                "valid": np.tile(vec["valid"][i], reps)[:, :lanes],
                "mant": np.tile(vec["mant"][i], reps)[:lanes],
                "sh": np.tile(vec["sh"][i], reps)[:lanes],
                "tau_e": None if t < 0 else t,
                "denom_mode": "full",
                "ref_skip": None,
                "kind": "vectors",
            }
        )
    smax = (1 << (p["SW"] - 1)) - 1
    for _ in range(cfg["extreme_vectors"]):
        n_col = int(rng.integers(1, 12))
        scores = rng.choice(np.array([-smax - 1, -smax, -1, 0, 1, smax]), (n_col, lanes))
        valid = rng.random((n_col, lanes)) < 0.8
        enc = [log2_scale(float(c)) for c in 10.0 ** rng.uniform(-6, 1, lanes)]
        out.append(
            {
                "scores": scores.astype(np.int64),
                "valid": valid,
                "mant": np.array([e[0] for e in enc]),
                "sh": np.array([e[1] for e in enc]),
                "tau_e": int(rng.integers(1, 4096)),
                "denom_mode": "full",
                "ref_skip": None,
                "kind": "extremes",
            }
        )
    return out


def _drive(dut, vec: dict, c: int, sw: int) -> None:
    """Present column ``c`` of a vector (past the end: no column)."""
    if c < len(vec["scores"]):
        dut.i_valid.value = 1
        dut.i_first.value = int(c == 0)
        dut.i_lane_valid.value = rtlkit.pack_lanes(vec["valid"][c], 1)
        dut.i_score.value = rtlkit.pack_lanes(vec["scores"][c], sw)
    else:
        dut.i_valid.value = 0


async def _run(dut, p: dict[str, int], vectors: list[dict]) -> dict:
    """Stream all vectors back to back; returns counts. Config inputs change with each vector,
    so a vector starts only once the previous one has left the pipeline (4 idle cycles with
    PIPE = 1; with PIPE = 0 each column is sampled before the edge that updates the state)."""
    sw, ew, lw = p["SW"], p["EW"], p["LW"]
    cols = bad = skips = 0
    latency = set()
    for vi, vec in enumerate(vectors):
        st = stim.vssos_steps(
            vec["scores"],
            vec["valid"],
            np.zeros((len(vec["scores"]), 1), np.int8),
            vec["mant"],
            vec["sh"],
            vec["tau_e"],
            vec["denom_mode"],
        )
        if vec["ref_skip"] is not None:
            assert np.array_equal(st.skip, vec["ref_skip"])
        dut.i_mant.value = rtlkit.pack_lanes(vec["mant"], p["CW"])
        dut.i_sh.value = rtlkit.pack_lanes(vec["sh"], p["SHW"])
        dut.i_tau_e.value = 0 if vec["tau_e"] is None else vec["tau_e"]
        dut.i_no_skip.value = int(vec["tau_e"] is None)
        dut.i_denom_kept.value = int(vec["denom_mode"] == "kept")
        n = len(vec["scores"])
        got = 0
        comb = p["PIPE"] == 0
        for c in range(n + (0 if comb else 4)):
            if comb:  # outputs follow the inputs within the cycle: drive, settle, sample
                _drive(dut, vec, c, sw)
                await Timer(1, "ns")
            else:
                await FallingEdge(dut.i_clk)
            rtlkit.check_resolved(dut, OUTPUTS, f"vector {vi} cycle {c}")
            if int(dut.o_valid.value):
                latency.add(c - got)
                t = got
                want = {
                    "o_first": int(t == 0),
                    "o_skip": int(st.skip[t]),
                    "o_pv": int(not st.skip[t] and vec["valid"][t].any()),
                    "o_lane_valid": rtlkit.pack_lanes(vec["valid"][t], 1),
                    "o_small": rtlkit.pack_lanes(st.small[t], 1),
                    "o_e": rtlkit.pack_lanes(st.e[t], ew),
                    "o_p": rtlkit.pack_lanes(st.p[t], 16),
                    "o_alpha": rtlkit.pack_lanes(st.alpha[t], 16),
                    "o_m": rtlkit.pack_lanes(st.m[t], sw),
                    "o_den": rtlkit.pack_lanes(st.den[t], lw),
                    "o_started": rtlkit.pack_lanes(vec["valid"][: t + 1].any(axis=0), 1),
                }
                diff = [k for k, w in want.items() if int(getattr(dut, k).value) != w]
                if diff:
                    bad += 1
                    if bad <= 8:
                        dut._log.error(f"vector {vi} ({vec['kind']}) column {t}: {diff} differ")
                skips += int(st.skip[t])
                got += 1
            if comb:
                await FallingEdge(dut.i_clk)
                dut.i_valid.value = 0
            else:
                _drive(dut, vec, c, sw)
        assert got == n, f"vector {vi}: {n} columns in, {got} out"
        cols += n
    return {
        "columns": cols,
        "mismatches": bad,
        "skipped_columns": skips,
        "latency": sorted(latency),
    }


@cocotb.test()
async def reset_clears_outputs(dut):
    """After reset and before any input, every output is a resolved 0."""
    await rtlkit.reset(dut, zero=INPUTS)
    for _ in range(4):
        await FallingEdge(dut.i_clk)
        rtlkit.check_resolved(dut, OUTPUTS, "after reset")
    for name in OUTPUTS:
        assert int(getattr(dut, name).value) == 0, f"{name} is not 0 after reset"


@cocotb.test()
async def columns_match_reference(dut):
    """Attention blocks, corner vectors and extremes: every output of every column equal."""
    await rtlkit.reset(dut, zero=INPUTS)
    p = _params(dut)
    cfg = rtlkit.tb_config()
    rng = np.random.default_rng(cfg["seed"])
    vectors = _vectors(rng, p, cfg)
    r = await _run(dut, p, vectors)
    kinds = {
        k: sum(len(v["scores"]) for v in vectors if v["kind"] == k)
        for k in ("attention", "vectors", "extremes")
    }
    rtlkit.write_results({**r, "kinds": kinds, "latency_cycles": r["latency"][-1], "ii_cycles": 1})
    assert r["mismatches"] == 0, f"{r['mismatches']} of {r['columns']} columns differ"
    assert len(r["latency"]) == 1, f"latency varies: {r['latency']}"
