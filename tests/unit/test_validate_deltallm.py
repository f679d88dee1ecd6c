"""`coaccel validate deltallm`: rows, their provenance, the shared Target rows and the CLI."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

import coaccel
from coaccel.targets.deltallm_fpga.validation import PUBLISHED, validate_deltallm
from coaccel.targets.deltallm_fpga.validation_report import format_deltallm_validation
from coaccel.targets.hbq_asic import validation as hbq
from coaccel.validate import targets
from coaccel.validate.published import load_published


@pytest.fixture(scope="module")
def small():
    return validate_deltallm(tokens=(64,), layers_simulated=1)


def test_shared_target_machinery():
    assert hbq.Target is targets.Target and hbq.Validation is targets.Validation


def test_rows_and_roles(small):
    groups = [t.group for t in small.targets]
    assert groups.count("calibration") == 2
    assert groups.count("sparsity") == 4 and groups.count("speedup") == 4
    assert groups.count("resources") == 2
    for t in small.targets:
        assert t.fit == ("fitted" if t.group == "calibration" else "predicted")
        assert t.source.startswith("[")
    for t in small.select("calibration"):
        assert t.status == "ok"
    fig = load_published(PUBLISHED)
    paper = {t.paper for t in small.select("speedup")}
    assert paper == {fig["speedup_vs_tellme_v2"].value} == {1.62}
    sp = {t.paper for t in small.select("sparsity")}
    assert sp == {fig["delta_key_sparsity"].value, fig["structured_score_sparsity"].value}
    assert [t.paper for t in small.select("calibration")] == [0.45, 0.96]
    assert {t.source for t in small.select("calibration")} == {
        fig["tellme_v2.ttft_64_tokens"].source
    }


def test_rows_say_their_keys_are_synthetic(small):
    """Sparsity and speedup follow the design's keys (the seeded generator): ``data``
    synthetic; the baseline's calibration and the resources do not depend on them."""
    for t in small.targets:
        want = "synthetic" if t.group in ("sparsity", "speedup") else ""
        assert t.data == want, t.name


def test_text_ends_with_the_summary_line(small):
    text = format_deltallm_validation(small)
    last = text.splitlines()[-1]
    assert last.startswith("targets: predicted: ") and "; fitted (in sample): 2 ok" in last
    assert "note: Baseline: TeLLMe-v2 calibrated" in text


def test_values_are_the_simulators(small):
    ours = coaccel.simulate("kv260", "llama-3.2-1b:prefill_64", mode="analytical",
                            overrides={"keys.layers_simulated": 1})  # fmt: skip
    base = coaccel.simulate("tellme_v2", "llama-3.2-1b:prefill_64")
    by_name = {t.name: t for t in small.targets}
    assert by_name["Delta-Key sparsity ρ_K, llama-3.2-1b, T=64"].ours == ours.delta_sparsity
    att = by_name["attention speedup vs TeLLMe-v2, llama-3.2-1b, T=64"].ours
    assert att == base.attention_cycles / ours.attention_cycles
    e2e = by_name["end-to-end prefill speedup vs TeLLMe-v2, llama-3.2-1b, T=64"].ours
    assert e2e == base.seconds / ours.seconds


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "coaccel.cli", "validate", "deltallm", *args],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_cli_writes_csv_and_json(tmp_path):
    p = _cli("--tokens", "64", "--layers", "1", "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["targets"]) == 12
    rows = list(csv.DictReader((tmp_path / "deltallm_validation.csv").open()))
    assert [r["target"] for r in rows] == [t["target"] for t in doc["targets"]]
    assert {r["data"] for r in rows} == {"", "synthetic"} and all(r["status"] for r in rows)
    assert (tmp_path / "deltallm_validation.md").read_text().startswith("# DeltaLLM validation")


def test_cli_bad_tokens_is_one_line(tmp_path):
    p = _cli("--tokens", "100", "--out", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "valid: 64 128 256 512 1024" in p.stderr
