"""The committed corner-case vectors (tests/vectors/*.npz) against the Fraction oracle and the
reference, and against what make_vectors.py would write today."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from testkit import quantize_asserting_range_warning
from vectors import fraction_oracle as orc
from vectors import make_vectors as mv

from coaccel.models.formats import (
    SCALE_ROUNDING_MODES,
    QuantizationRangeWarning,
    encode,
    encode_scale,
    pack_bits,
    resolve,
)
from coaccel.models.formats import _quantized as quantized_module

VEC = Path(mv.__file__).resolve().parent
ELEM_FILES = sorted(VEC.glob("elem_*.npz"))
SCALE_FILES = sorted(VEC.glob("scale_*.npz"))
BLOCK_FILES = sorted(VEC.glob("block_*.npz"))
DELTALLM_FILES = sorted(VEC.glob("deltallm_*.npz"))


# The block vectors hold blocks outside the range a format's scale can represent (saturation
# and flush-to-zero corners), so building them warns for these formats. The warning is given
# once per format and process: the record of formats warned about is cleared first.
RANGE_WARNED = ("mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxint8", "nvfp4_e5m3", "bfp",
                "int")  # fmt: skip


def build_expecting_range_warnings(build):
    with mock.patch.object(quantized_module, "_WARNED", set()):
        with pytest.warns(QuantizationRangeWarning) as seen:
            out = build()
    warned = {str(w.message).split(":", 1)[0] for w in seen}
    assert warned == set(RANGE_WARNED)
    return out


def test_the_committed_files_are_what_the_generator_writes():
    assert build_expecting_range_warnings(mv.differences) == []
    names = {p.name for p in ELEM_FILES + SCALE_FILES + BLOCK_FILES + DELTALLM_FILES}
    assert names == set(build_expecting_range_warnings(mv.build_vectors))
    for p in VEC.glob("*.npz"):
        assert p.stat().st_size < mv.MAX_FILE_BYTES, p.name


def test_generator_check_mode_reports_a_changed_file(tmp_path):
    for name, arrays in build_expecting_range_warnings(mv.build_vectors).items():
        np.savez(tmp_path / name, **arrays)
    assert build_expecting_range_warnings(lambda: mv.differences(tmp_path)) == []
    with np.load(tmp_path / "elem_e2m1.npz") as f:
        arrays = {k: f[k] for k in f.files}
    arrays["codes_rne"] = arrays["codes_rne"].copy()
    arrays["codes_rne"][3] ^= 1
    np.savez(tmp_path / "elem_e2m1.npz", **arrays)
    diff = build_expecting_range_warnings(lambda: mv.differences(tmp_path))
    assert diff == ["elem_e2m1.npz: array 'codes_rne' differs"]


@pytest.mark.parametrize("path", ELEM_FILES, ids=lambda p: p.stem)
def test_element_vectors(path):
    name = path.stem.removeprefix("elem_")
    with np.load(path) as f:
        x, s = f["x"], f["scale"]
        want_values = [orc.to_float(orc.elem_code_value(name, c)) for c in range(len(f["values"]))]
        assert np.array_equal(f["values"], want_values, equal_nan=True)
        for mode in mv.ELEM_MODES:
            codes = f[f"codes_{mode}"]
            assert codes.dtype == np.uint8
            oracle = [
                orc.encode_elem(float(a), name, mode, float(b)) for a, b in zip(x, s, strict=True)
            ]
            assert codes.tolist() == oracle, mode
            assert np.array_equal(encode(x, name, rounding=mode, scale=s), codes), mode


@pytest.mark.parametrize("path", SCALE_FILES, ids=lambda p: p.stem)
def test_scale_vectors(path):
    name = path.stem.removeprefix("scale_")
    with np.load(path) as f:
        v, d = f["value"], f["divisor"]
        for mode in SCALE_ROUNDING_MODES:
            codes = f[f"codes_{mode}"]
            oracle = [
                orc.encode_scale(float(a), name, mode, float(b)) if np.isfinite(a)
                else orc.SCALES[name][5][-1]  # +Inf saturates to the largest code
                for a, b in zip(v, d, strict=True)
            ]  # fmt: skip
            assert codes.tolist() == oracle, mode
            assert np.array_equal(encode_scale(v, name, rounding=mode, divisor=d), codes), mode


def _oracle_block(stem: str, x: np.ndarray, mode: str):
    fmt, opt = mv.BLOCK_CASES[stem]
    rows = [list(map(float, r)) for r in x.astype(np.float64)]
    if fmt in orc.MX:
        f = orc.mx_hbq_repo_block if opt.get("variant") == "hbq_repo" else orc.mx_block
        return [f(r, fmt, mode) for r in rows]
    if fmt == "nvfp4":
        s_t = orc.nvfp4_tensor_scale(float(np.max(np.abs(x))))
        return [orc.nvfp4_block(r, s_t, mode, opt.get("scale_rounding", "rne")) for r in rows]
    if fmt == "nvfp4_e5m3":
        return [orc.nvfp4_e5m3_block(r, mode) for r in rows]
    if fmt == "bfp":
        return [orc.bfp_block(r, 8, mode) for r in rows]
    return [
        orc.int_block(r, opt.get("bits", 4), opt.get("scale_format", "fp16"), mode) for r in rows
    ]


@pytest.mark.parametrize("path", BLOCK_FILES, ids=lambda p: p.stem)
def test_block_vectors(path):
    stem = path.stem.removeprefix("block_")
    fmt, opt = mv.BLOCK_CASES[stem]
    spec = resolve(fmt, **opt)
    with np.load(path) as f:
        x = f["x"]
        assert x.dtype == np.float32 and x.shape[1] == spec.block
        for mode in mv.ELEM_MODES:
            codes, scales = f[f"codes_{mode}"], f[f"scales_{mode}"]
            oracle = _oracle_block(stem, x, mode)
            assert scales.tolist() == [o[0] for o in oracle], mode
            assert codes.tolist() == [o[1] for o in oracle], mode
            assert np.array_equal(f[f"elements_{mode}"], pack_bits(codes, spec.element_bits))
            for backend in ("numpy", "numba"):
                q = quantize_asserting_range_warning(x, fmt, rounding=mode, backend=backend, **opt)
                assert np.array_equal(q.codes.reshape(x.shape), codes)
                assert np.array_equal(q.scales.reshape(-1), scales)
        if fmt == "nvfp4":
            assert f["tensor_scale"][0] == orc.nvfp4_tensor_scale(float(np.max(np.abs(x))))


def _delta_oracle(keys, theta, naive, refresh, n_sink):
    """The Delta-Key rule element by element in plain Python integers (docs/deltallm.md §1)."""
    t_n, d = len(keys), len(keys[0])
    mem, prev = [0] * d, [0] * d
    masks, deltas, khat = [], [], []
    for t in range(t_n):
        dense = t < n_sink or (refresh > 0 and t % refresh == 0)
        m_row, d_row = [], []
        for c in range(d):
            k = int(keys[t][c])
            e = k - (prev[c] if naive and not dense else mem[c])
            keep = dense or abs(e) >= theta
            delta = (k - mem[c] if dense else e) if keep else 0
            mem[c] += delta
            m_row.append(keep)
            d_row.append(delta)
        prev = [int(x) for x in keys[t]]
        masks.append(m_row)
        deltas.append(d_row)
        khat.append(list(mem))
    return masks, deltas, khat


def test_deltallm_delta_vectors():
    """Committed Delta-Key corner sequences: the stored encoding equals a plain-integer oracle."""
    with np.load(VEC / "deltallm_delta.npz") as f:
        a = {k: f[k] for k in f.files}
    assert a["keys"].dtype == np.int8 and a["keys"].shape[2] == mv.DELTA_D
    for i in range(a["keys"].shape[0]):
        masks, deltas, khat = _delta_oracle(
            a["keys"][i].tolist(),
            int(a["theta"][i]),
            bool(a["naive"][i]),
            int(a["refresh_period"][i]),
            int(a["n_sink"][i]),
        )
        assert a["mask"][i].tolist() == masks
        assert a["deltas"][i].tolist() == deltas
        assert a["keys_hat"][i].tolist() == khat
    # the corners are there: an all-zero-delta sequence, the 9-bit extreme, theta 0 and 255
    assert not a["mask"][0, 1:].any() and int(np.abs(a["deltas"]).max()) == 255
    assert {0, 1, 255} <= set(a["theta"].tolist()) and a["naive"].any()


def test_deltallm_softmax_vectors():
    """Committed VSSOS corner columns fit the RTL formats (24-bit scores, C in [2^23, 2^24))."""
    with np.load(VEC / "deltallm_softmax.npz") as f:
        a = {k: f[k] for k in f.files}
    assert np.all(np.abs(a["scores"].astype(np.int64)) < 1 << 23)
    assert np.all((a["mant"] >= 1 << 23) & (a["mant"] < 1 << 24)) and np.all(a["sh"] >= 0)
    assert -1 in a["tau_e"].tolist() and not a["valid"].all()
