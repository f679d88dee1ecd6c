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
    return validate_deltallm(tokens=(64,), layers_simulated=1, real=None)


def test_shared_target_machinery():
    assert hbq.Target is targets.Target and hbq.Validation is targets.Validation


def test_rows_and_roles(small):
    groups = [t.group for t in small.targets]
    assert groups.count("baseline") == 4
    assert groups.count("sparsity") == 4 and groups.count("speedup") == 4
    assert groups.count("resources") == 2
    fitted = [t for t in small.targets if t.fit == "fitted"]
    assert [t.name for t in fitted] == [t.name for t in small.select("baseline")
                                        if "calibrated" in t.name]  # fmt: skip
    for t in small.targets:
        assert t.source.startswith("[")
    for t in fitted:
        assert t.status == "ok"
    fig = load_published(PUBLISHED)
    paper = {t.paper for t in small.select("speedup")}
    assert paper == {fig["speedup_vs_tellme_v2"].value} == {1.62}
    sp = {t.paper for t in small.select("sparsity")}
    assert sp == {fig["delta_key_sparsity"].value, fig["structured_score_sparsity"].value}
    assert [t.paper for t in small.select("baseline")] == [0.45, 0.96, 0.45, 0.96]
    assert {t.source for t in small.select("baseline")} == {fig["tellme_v2.ttft_64_tokens"].source}


def test_rows_say_their_keys_are_synthetic(small):
    """Sparsity and speedup follow the design's keys (the seeded generator, without the real
    rows): ``data`` synthetic; the baseline and the resources do not depend on them."""
    for t in small.targets:
        want = "synthetic" if t.group in ("sparsity", "speedup") else ""
        assert t.data == want, t.name


def test_text_ends_with_the_summary_line(small):
    text = format_deltallm_validation(small)
    last = text.splitlines()[-1]
    assert last.startswith("targets: predicted: ") and "; fitted (in sample): 2 ok" in last
    assert "note: Baseline: TeLLMe-v2's attention and both designs' linear layers" in text


def test_values_are_the_simulators(small):
    from coaccel.spine.workload import load_workload
    from coaccel.targets.deltallm_fpga.tellme_loops import TellmeLoops

    ours = coaccel.simulate("kv260", "llama-3.2-1b:prefill_64", mode="analytical",
                            overrides={"keys.layers_simulated": 1})  # fmt: skip
    loops = TellmeLoops.from_published(load_published(PUBLISHED))
    att_b, lin = loops.prefill_cycles(load_workload("llama-3.2-1b").model, 64)
    by_name = {t.name: t for t in small.targets}
    assert by_name["Delta-Key sparsity ρ_K, llama-3.2-1b, T=64"].ours == ours.delta_sparsity
    att = by_name["attention speedup vs TeLLMe-v2, llama-3.2-1b, T=64"].ours
    assert att == att_b / ours.attention_cycles
    e2e = by_name["end-to-end prefill speedup vs TeLLMe-v2, llama-3.2-1b, T=64"].ours
    assert e2e == (lin + att_b) / (lin + ours.attention_cycles)
    base = coaccel.simulate("tellme_v2", "bitnet-b1.58-large:prefill_64")
    fitted = by_name["TeLLMe-v2 TTFT, calibrated design, bitnet-b1.58-large, T=64"]
    assert fitted.ours == base.seconds and fitted.fit == "fitted"
    loops_row = by_name["TeLLMe-v2 TTFT from its HLS loops (II = 1), bitnet-b1.58-large, T=64"]
    assert loops_row.fit == "predicted" and loops_row.tolerance_pct == 10.0


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "coaccel.cli", "validate", "deltallm", *args],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_cli_writes_csv_and_json(tmp_path):
    p = _cli("--tokens", "64", "--layers", "1", "--no-real", "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["targets"]) == 14
    rows = list(csv.DictReader((tmp_path / "deltallm_validation.csv").open()))
    assert [r["target"] for r in rows] == [t["target"] for t in doc["targets"]]
    assert {r["data"] for r in rows} == {"", "synthetic"} and all(r["status"] for r in rows)
    assert (tmp_path / "deltallm_validation.md").read_text().startswith("# DeltaLLM validation")


def test_cli_bad_tokens_is_one_line(tmp_path):
    p = _cli("--tokens", "100", "--out", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "valid: 64 128 256 512 1024" in p.stderr
