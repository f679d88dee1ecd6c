"""The command line never ends in a traceback: every failure is one line on stderr with exit
status 2 (130 for Ctrl-C), output locations are checked before any work, and defaults never
overwrite committed or installed files. Each case runs the real console entry point in a
subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("COACCEL_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "coaccel.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def _one_line_error(r: subprocess.CompletedProcess, status: int = 2) -> str:
    assert r.returncode == status, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["report", "hbq_e_28nm", "--area-only"],
        ["quant", "--data", "synthetic"],
        ["validate", "hbq", "--no-system"],
        ["validate", "deltallm"],
        ["validate", "gpu"],
        ["delta", "--data", "synthetic"],
        ["demo"],
    ],
)
def test_unwritable_out_fails_before_work(args: list[str], tmp_path: Path) -> None:
    a_file = tmp_path / "plain_file"
    a_file.write_text("x")
    t0 = time.perf_counter()
    line = _one_line_error(_run(*args, "--out", str(a_file)))
    assert "is a file, not a folder" in line
    line = _one_line_error(_run(*args, "--out", "/proc/coaccel-cannot-exist/out"))
    assert "cannot create the folder" in line
    # Checked before the work: both runs together take far less than any stage.
    assert time.perf_counter() - t0 < 60


def test_demo_negative_seed_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "demo_out"
    line = _one_line_error(_run("demo", "--seed", "-1", "--out", str(out)))
    assert "--seed" in line and "out of range" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["cost", "pe", "--pe-macs", "-5"], "--pe-macs"),
        (["cost", "pe", "--pe-macs", "0"], "--pe-macs"),
        (["cost", "pe", "--l2-bits", "-1"], "--l2-bits"),
        (["cost", "pe", "--l2-bits", "99"], "--l2-bits"),
        (["quant", "--formats", "hbq-a,,nvfp4"], "empty entry"),
        (
            ["sim", "hbq_e_28nm", "--workload", "llama-3.2-3b", "--set", "freq_mhz=500 GHz"],
            "freq_mhz",
        ),
        (["sim", "no_such_arch", "--workload", "llama-3.2-3b"], "no shipped architecture"),
        (["sim", "hbq_e_28nm", "--workload", "llama-3.2-3b:nope"], "no scenario"),
    ],
)
def test_bad_values_are_one_line_errors(args: list[str], needle: str, tmp_path: Path) -> None:
    line = _one_line_error(_run(*args, cwd=tmp_path))
    assert needle in line


def test_broken_pipe_is_quiet() -> None:
    env = dict(os.environ)
    p = subprocess.Popen(
        [sys.executable, "-m", "coaccel.cli", "sim", "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # the reader goes away, like `| head -1`
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert p.returncode == 0


def test_ctrl_c_exits_130_without_traceback(tmp_path: Path) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "coaccel.cli", "demo", "--out", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    p.stdout.readline()  # the demo has started its first stage
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err


def test_synth_default_out_is_not_the_committed_table() -> None:
    r = _run("synth", "--help")
    assert r.returncode == 0
    assert "default: reports/synth/hbq_area.csv" in " ".join(r.stdout.split())
    assert "--update-committed" in r.stdout


def test_cost_calibrate_default_out_is_a_working_folder(tmp_path: Path) -> None:
    from coaccel import arch_configs

    shipped = Path(arch_configs.__file__).resolve().parent / "cost" / "pe_calibration_synth.yaml"
    before = shipped.read_bytes()
    r = _run("cost", "calibrate", "--synth-csv", str(ROOT / "rtl/synth/hbq_area.csv"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = tmp_path / "reports" / "cost" / "pe_calibration_synth.yaml"
    assert written.is_file()
    assert shipped.read_bytes() == before


def test_usage_error_is_one_line() -> None:
    line = _one_line_error(_run("sim", "--no-such-flag"))
    assert "unrecognized arguments" in line


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["validate", "hbq", "--no-system", "--json"], "targets"),
        (["report", "hbq_e_28nm", "--area-only", "--json"], "rows"),
        (["cost", "calibrate", "--synth-csv", str(ROOT / "rtl/synth/hbq_area.csv"), "--json"],
         "points"),
        (["sim", "hbq_e_28nm", "--workload", "llama-3.2-1b:prefill_64", "--mode", "analytical",
          "--json"], "cycles"),
    ],
)  # fmt: skip
def test_json_output_is_one_document(args: list[str], key: str, tmp_path: Path) -> None:
    import json

    out = ["--out", str(tmp_path / "o")] if args[0] in ("validate", "report") else []
    if args[0] == "cost":
        out = ["--out", str(tmp_path / "cal.yaml")]
    r = _run(*args, *out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert key in json.loads(r.stdout)


def test_quiet_drops_informational_lines(tmp_path: Path) -> None:
    r = _run("report", "hbq_e_28nm", "--area-only", "--quiet", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "wrote" not in r.stdout and r.stderr.strip() == ""
    manifest = tmp_path / "o" / "manifest.json"
    assert manifest.is_file() and "cost_report.html" in manifest.read_text()


def test_scenario_past_the_model_positions_is_an_error(tmp_path: Path) -> None:
    import yaml

    src = yaml.safe_load((ROOT / "arch_configs/workloads/llama-3.2-1b.yaml").read_text())
    src["scenarios"]["too_long"] = {"phase": "prefill", "tokens": 200_000}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(src))
    line = _one_line_error(_run("sim", "hbq_e_28nm", "--workload", f"{path}:too_long"))
    assert "scenarios.too_long" in line and "131072" in line


def test_a_sweep_whose_every_point_fails_exits_2_also_with_json(tmp_path):
    """Every point failing is an error: one line on stderr and status 2, with the human summary
    and with ``--json`` (whose summary is still printed, whole, on stdout first)."""
    import json

    spec = tmp_path / "allfail.yaml"
    spec.write_text(
        "version: 1\nbase: hbq_e_28nm\nworkloads: [llama-3.2-1b:prefill_1024]\n"
        "mode: analytical\nparameters:\n  buffers.psum.size_kib: [1, 2]\n"
        "strategy: {kind: grid}\nobjectives:\n  - {metric: edp_js, goal: minimize}\n"
    )
    for extra in ((), ("--json",)):
        store = tmp_path / f"s{len(extra)}.sqlite"
        r = _run("sweep", str(spec), "--store", str(store), *extra)
        line = _one_line_error(r)
        assert "every one of the 2 points evaluated failed" in line
        if extra:
            doc = json.loads(r.stdout)
            assert (doc["evaluated"], doc["failed"]) == (2, 2)
