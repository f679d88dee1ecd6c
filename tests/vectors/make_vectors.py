"""Corner-case test vectors for the element, scale and block formats (replayed by RTL benches).

Usage (from the repository root)::

    .venv/bin/python tests/vectors/make_vectors.py               # check: exit 1 if files differ
    .venv/bin/python tests/vectors/make_vectors.py --regenerate  # rewrite the .npz files

Files (``numpy.savez``; every array is exact, codes are unsigned integers):

* ``elem_<fmt>.npz``: ``x`` (float64 inputs), ``scale`` (float64, one per input),
  ``codes_<mode>`` for ``rne``, ``half_away``, ``half_up`` (saturating), and ``values`` (the value
  of every code, NaN/±Inf where defined).
* ``scale_<fmt>.npz``: ``value``, ``divisor``, ``codes_<mode>`` for the five scale roundings.
* ``deltallm_delta.npz``: corner key sequences for the DeltaLLM Delta-Key encoder, ``keys`` (int8
  ``(n_seq, T, 16)``) with per-sequence ``theta``, ``naive``, ``refresh_period``, ``n_sink`` and
  the reference's ``mask``, ``deltas`` (int16) and ``keys_hat`` (int16).
* ``deltallm_softmax.npz``: corner score columns for the VSSOS softmax state unit, ``scores``
  (int32 ``(n_case, n_col, 4)``), ``valid`` (bool), ``mant``/``sh`` (int64 ``(n_case, 4)``),
  ``tau_e`` (int64, -1 = never skip); the testbench computes the expected per-column values
  with the reference's units.
* ``block_<fmt>[_<variant>].npz``: ``x`` (float32, ``(n_blocks, block)``), ``codes_<mode>``
  (``(n_blocks, block)``), ``scales_<mode>`` (``(n_blocks,)``), ``elements_<mode>`` (the packed
  per-block element vectors of :func:`coaccel.models.formats.pack_bits`, uint8), and for NVFP4
  ``tensor_scale`` (float32).

``tests/unit/test_vectors.py`` checks the committed files against the Fraction oracle and the
reference, and that this script would write the same arrays.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from coaccel.models.deltallm import encode_delta_keys, log2_scale
from coaccel.models.formats import (
    ELEMENT_FORMATS,
    SCALE_FORMATS,
    SCALE_ROUNDING_MODES,
    decode_scale,
    encode,
    encode_scale,
    pack_bits,
    quantize,
    resolve,
)

HERE = Path(__file__).resolve().parent
ELEM_MODES = ("rne", "half_away", "half_up")
MAX_FILE_BYTES = 200_000

BLOCK_CASES = {
    # file stem: (format name, options)
    "mxfp4": ("mxfp4", {}),
    "mxfp4_hbq_repo": ("mxfp4", {"variant": "hbq_repo"}),
    "mxfp6_e2m3": ("mxfp6_e2m3", {}),
    "mxfp6_e3m2": ("mxfp6_e3m2", {}),
    "mxfp8_e4m3": ("mxfp8_e4m3", {}),
    "mxfp8_e5m2": ("mxfp8_e5m2", {}),
    "mxint8": ("mxint8", {}),
    "mxint8_hbq_repo": ("mxint8", {"variant": "hbq_repo"}),
    "nvfp4": ("nvfp4", {}),
    "nvfp4_ceil": ("nvfp4", {"scale_rounding": "ceil"}),
    "nvfp4_e5m3": ("nvfp4_e5m3", {}),
    "bfp": ("bfp", {}),
    "int": ("int", {}),
    "int8_e5m3": ("int", {"bits": 8, "scale_format": "e5m3"}),
}


def _elem_inputs(name: str) -> tuple[np.ndarray, np.ndarray]:
    fmt = ELEMENT_FORMATS[name]
    vals = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())]))
    mids = (vals[:-1] + vals[1:]) / 2
    top = vals[-1] + (vals[-1] - vals[-2]) / 2
    base = np.concatenate([vals, mids, [top, vals[-1] * 2, vals[1] / 4]])
    base = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf)])
    base = np.concatenate([base, -base, [0.0, -0.0]])
    xs, ss = [], []
    for s in (1.0, 3.0 / 16):  # a power of two and a non power of two
        xs.append(base * s)
        ss.append(np.full(base.size, s))
    return np.concatenate(xs), np.concatenate(ss)


def elem_vectors(name: str) -> dict[str, np.ndarray]:
    """Vectors of one element format."""
    fmt = ELEMENT_FORMATS[name]
    x, s = _elem_inputs(name)
    out = {"x": x, "scale": s, "values": fmt.values()}
    for mode in ELEM_MODES:
        out[f"codes_{mode}"] = encode(x, fmt, rounding=mode, scale=s)
    return out


def scale_vectors(name: str) -> dict[str, np.ndarray]:
    """Vectors of one scale format: ties, neighbours, both ends, clamping."""
    fmt = SCALE_FORMATS[name]
    codes = np.arange(fmt.min_code, fmt.max_code + 1)
    if name == "fp16":
        codes = np.unique(np.concatenate([codes[:40], codes[::701], codes[-40:]]))
    vals = decode_scale(codes, fmt)
    mids = (vals[:-1] + vals[1:]) / 2
    core = np.concatenate([vals, mids, [0.0, vals[-1] * 2, vals[0] / 2]])
    base = np.concatenate([core, np.nextafter(core, np.inf), np.nextafter(core, 0), [np.inf]])
    values, divisors = [], []
    for d in (1.0, 10.5, 6.0):  # HBQ's 6 * 1.75, NVFP4-E5M3's 6
        values.append(base * d)
        divisors.append(np.full(base.size, d))
    out = {"value": np.concatenate(values), "divisor": np.concatenate(divisors)}
    for mode in SCALE_ROUNDING_MODES:
        out[f"codes_{mode}"] = encode_scale(
            out["value"], fmt, rounding=mode, divisor=out["divisor"]
        )
    return out


def _block_inputs(block: int, rng: np.random.Generator) -> np.ndarray:
    rows = [
        np.zeros(block),
        rng.standard_normal(block),
        rng.standard_normal(block) * 1e4,
        rng.laplace(size=block) * 1e-3,
        rng.standard_t(2, size=block),
        np.where(rng.random(block) < 0.5, -0.0, 0.0),
        rng.standard_normal(block) * 2.0**-140,  # float32 subnormals
    ]
    spike = np.zeros(block)
    spike[block // 3] = -7.0
    spike[block // 2] = 1e-3
    rows.append(spike)
    ties = rng.choice([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0], block)
    ties[0] = 7.5
    rows.append(ties * rng.choice([-1.0, 1.0], block))
    rows.append(ties * 3.0)  # ties at a non power-of-two amax
    ints = rng.integers(-130, 130, block) + 0.5
    rows.append(ints / 2.0**3)
    return np.stack(rows).astype(np.float32)


def block_vectors(stem: str) -> dict[str, np.ndarray]:
    """Vectors of one block format (one tensor: NVFP4's tensor scale covers all blocks)."""
    fmt, opt = BLOCK_CASES[stem]
    spec = resolve(fmt, **opt)
    rng = np.random.default_rng(sum(map(ord, stem)))
    x = _block_inputs(spec.block, rng)
    out: dict[str, np.ndarray] = {"x": x}
    for mode in ELEM_MODES:
        q = quantize(x, fmt, rounding=mode, backend="numpy", **opt)
        codes = q.codes.reshape(x.shape)  # one block per row
        out[f"codes_{mode}"] = codes
        out[f"scales_{mode}"] = q.scales.reshape(-1)
        out[f"elements_{mode}"] = pack_bits(codes, spec.element_bits)
        if q.tensor_scale is not None:
            out["tensor_scale"] = np.array([q.tensor_scale], dtype=np.float32)
    return out


DELTA_D = 16
"""Head dimension of the committed DeltaLLM encoder vectors (the small RTL configuration)."""


def deltallm_delta_vectors() -> dict[str, np.ndarray]:
    """Corner key sequences for the Delta-Key encoder and the reference's encoding of each."""
    rng = np.random.default_rng(2026)
    t_n, d = 12, DELTA_D
    extremes = np.where(np.arange(t_n)[:, None] % 2 == 0, 127, -128) * np.ones((1, d), int)
    cases = [
        # (keys [T, d], theta, naive, refresh_period, n_sink)
        (np.repeat(rng.integers(-128, 128, (1, d)), t_n, axis=0), 4, False, 0, 1),  # zero deltas
        (extremes, 0, False, 0, 1),  # |delta| = 255, the 9-bit extreme
        (extremes, 255, False, 0, 1),  # nothing passes: only the dense row 0
        (rng.integers(-128, 128, (t_n, d)), 1, False, 0, 1),  # theta 1 is exact
        (rng.integers(-128, 128, (t_n, d)), 0, False, 0, 1),  # theta 0 keeps every element
        (np.cumsum(rng.integers(-3, 4, (t_n, d)), axis=0), 2, True, 0, 1),  # naive form
        (np.cumsum(rng.integers(-9, 10, (t_n, d)), axis=0), 6, False, 4, 1),  # refresh rows
        (np.cumsum(rng.integers(-9, 10, (t_n, d)), axis=0), 6, False, 0, 3),  # three sinks
        (np.arange(t_n)[:, None] * np.ones((1, d), int) - 6, 2, True, 0, 1),  # naive never fires
        (np.arange(t_n)[:, None] * np.ones((1, d), int) - 6, 2, False, 0, 1),  # memory does
    ]
    keys = np.stack([np.clip(c[0], -128, 127) for c in cases]).astype(np.int8)
    out = {
        "keys": keys,
        "theta": np.array([c[1] for c in cases], dtype=np.int64),
        "naive": np.array([c[2] for c in cases], dtype=bool),
        "refresh_period": np.array([c[3] for c in cases], dtype=np.int64),
        "n_sink": np.array([c[4] for c in cases], dtype=np.int64),
    }
    masks, deltas, khat = [], [], []
    for i, c in enumerate(cases):
        dk = encode_delta_keys(
            keys[i][None],
            theta=c[1],
            delta_mode="naive" if c[2] else "memory",
            refresh_period=c[3],
            n_sink=c[4],
        )
        masks.append(dk.mask[0])
        deltas.append(dk.deltas[0])
        khat.append(dk.keys_hat[0])
    out["mask"] = np.stack(masks)
    out["deltas"] = np.stack(deltas).astype(np.int16)
    out["keys_hat"] = np.stack(khat).astype(np.int16)
    return out


def deltallm_softmax_vectors() -> dict[str, np.ndarray]:
    """Corner score columns for the VSSOS state unit: a growing max, saturated exponents, ties,
    masked lanes, all-skip and never-skip columns (inputs only)."""
    lanes, n_col = 4, 10
    big = 4 * 127 * 127 * 16  # near the largest score of d = 64
    cases = [
        # (scores [n_col, lanes], valid mask [n_col, lanes], c per lane, tau)
        (np.arange(n_col)[:, None] * np.array([1, 10, 100, 1000]), None, 0.01, 8.0),
        (np.array([[big, -big, 0, 5]] * n_col) * ((-1) ** np.arange(n_col))[:, None], None, 1.0, 4),
        (np.zeros((n_col, lanes), int), None, 0.5, 8.0),  # all ties: p = 1 every column
        (np.full((n_col, lanes), 7) - np.arange(n_col)[:, None] * 50, None, 0.02, 1.0),
        (np.arange(n_col * lanes).reshape(n_col, lanes) % 7 * 300, "tri", 0.003, 2.0),
        (-(np.arange(n_col)[:, None] * np.ones((1, lanes), int)) * 4000, None, 0.004, math.inf),
    ]
    scores = np.stack([c[0] for c in cases]).astype(np.int32)
    valid = np.ones(scores.shape, dtype=bool)
    valid[4] = np.arange(n_col)[:, None] >= np.arange(lanes)[None, :] * 2  # lanes start late
    mant = np.zeros((len(cases), lanes), dtype=np.int64)
    sh = np.zeros((len(cases), lanes), dtype=np.int64)
    for i, c in enumerate(cases):
        for lane in range(lanes):
            mant[i, lane], sh[i, lane] = log2_scale(c[2] * (1 + lane) / 3)
    tau_e = np.array(
        [-1 if math.isinf(c[3]) else math.floor(c[3] * 256 + 0.5) for c in cases], dtype=np.int64
    )
    return {"scores": scores, "valid": valid, "mant": mant, "sh": sh, "tau_e": tau_e}


def build_vectors() -> dict[str, dict[str, np.ndarray]]:
    """All vector files, by file name."""
    files = {f"elem_{n}.npz": elem_vectors(n) for n in ELEMENT_FORMATS}
    files.update({f"scale_{n}.npz": scale_vectors(n) for n in SCALE_FORMATS})
    files.update({f"block_{s}.npz": block_vectors(s) for s in BLOCK_CASES})
    files["deltallm_delta.npz"] = deltallm_delta_vectors()
    files["deltallm_softmax.npz"] = deltallm_softmax_vectors()
    return files


def differences(directory: Path = HERE) -> list[str]:
    """What regeneration would change in ``directory`` (empty when up to date)."""
    problems = []
    for fname, arrays in build_vectors().items():
        path = directory / fname
        if not path.exists():
            problems.append(f"{fname}: missing")
            continue
        with np.load(path) as old:
            if set(old.files) != set(arrays):
                problems.append(f"{fname}: keys {sorted(old.files)} != {sorted(arrays)}")
                continue
            for k, v in arrays.items():
                o = old[k]
                if o.dtype != v.dtype or not np.array_equal(o, v, equal_nan=o.dtype.kind == "f"):
                    problems.append(f"{fname}: array {k!r} differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regenerate", action="store_true", help="rewrite the .npz files")
    args = ap.parse_args(argv)
    if not args.regenerate:
        problems = differences()
        for p in problems:
            print(p)
        print("vectors up to date" if not problems else f"{len(problems)} difference(s)")
        return 1 if problems else 0
    for fname, arrays in build_vectors().items():
        path = HERE / fname
        np.savez(path, **arrays)
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SystemExit(f"{fname} is {size} bytes, above the {MAX_FILE_BYTES}-byte limit")
        print(f"wrote {path.relative_to(HERE.parent.parent)} ({size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
