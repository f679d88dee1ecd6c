"""Bad inputs end in one clear message: one line on stderr with status 2 from the command line,
or one CoaccelError from the Python API; never a traceback, a Python or numpy internal message,
a blocked read or a silently wrong result.

One test (or a few) per class of bad input: workload strings (repeated, missing, unknown and
out-of-bounds keys, builds too large), traces of another kind, trace files given where a
workload YAML is expected, files that are not traces, architecture overrides of the wrong type,
and paths that are FIFOs, devices, folders or on file systems where nothing can be written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coaccel.cli import main
from coaccel.spine.config import ConfigError
from coaccel.spine.errors import CoaccelError
from coaccel.spine.trace import Trace, TraceBuilder, TraceError, is_trace_file, trace_kind
from coaccel.spine.workload import load_workload
from coaccel.spine.workload_string import (
    Param,
    Size,
    StringWorkload,
    build_workload_string,
    parse_workload_string,
)

ROOT = Path(__file__).resolve().parents[2]


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command line in this process; it must fail with one line on stderr."""
    status = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, err
    assert len(lines) == 1, lines
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def cli_error_in_subprocess(*args: str, timeout: float = 60) -> str:
    """The same in a subprocess with a time limit: for inputs that would block a read."""
    env = dict(os.environ)
    env.pop("COACCEL_DEBUG", None)
    r = subprocess.run(
        [sys.executable, "-m", "coaccel.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1, lines
    assert "Traceback" not in r.stderr, r.stderr
    return lines[0]


def save_trace(path: Path, producer: str) -> Path:
    TraceBuilder(producer=producer).build().save(path)
    return path


# ---------------------------------------------------------------------------------------------
# 1. Workload strings


def _toy_build(context: int, batch: int = 1, rate: float = 0.5, mode: str = "a",
               warm: bool = True) -> tuple:  # fmt: skip
    return (context, batch, rate, mode, warm)


TOY = {
    "toy": StringWorkload(
        "toy",
        _toy_build,
        (
            Param(
                "context", "tokens in the KV cache", lo=1, hi=2**24, unit="tokens", aliases=("T",)
            ),
            Param("batch", "sequences", lo=1, hi=64, unit="sequences", aliases=("B",)),
            Param("rate", "a share", kind="float", lo=0, hi=1),
            Param("mode", "the mode", kind="choice", choices=("alpha", "beta")),
            Param("warm", "warm up first", kind="flag"),
        ),
        sizes=(Size("tiles (batch x context)", lambda v: v["batch"] * v["context"], 2**20),),
    )  # fmt: skip
}


def parse_error(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_workload_string(text, TOY)
    assert "\n" not in str(e.value), str(e.value)
    return str(e.value)


def test_workload_string_refuses_a_repeated_key_naming_it():
    msg = parse_error("toy:T=4096,T=8192,B=1")
    assert msg == "workload 'toy:T=4096,T=8192,B=1': context given 2 times (T=4096, T=8192); " \
        "give each key once"  # fmt: skip
    # an alias and the full name are the same key
    assert "context given 2 times (T=4096, context=8192)" in parse_error("toy:T=4096,context=8192")


def test_workload_string_names_the_missing_parameter_and_the_valid_ones():
    msg = parse_error("toy:")
    assert msg.startswith("workload 'toy:': missing context (T): toy needs it; toy takes: ")
    assert (
        "context (T): tokens in the KV cache, an integer in 1..16,777,216 tokens [required]" in msg
    )
    assert "batch (B): sequences, an integer in 1..64 sequences" in msg
    assert "mode: the mode, one of alpha, beta" in msg
    assert "required positional argument" not in msg


def test_workload_string_bounds_every_value_with_the_limit_in_the_message():
    msg = parse_error("toy:T=1000000000000")
    assert msg == (
        "workload 'toy:T=1000000000000': T=1000000000000 is above the limit of 16,777,216 "
        "tokens (2^24) for context (tokens in the KV cache)"
    )
    assert "is below the minimum of 1 sequences" in parse_error("toy:T=4,B=0")
    assert "rate=2 is above the limit of 1" in parse_error("toy:T=4,rate=2")
    for bad in ("nan", "inf", "-inf", "1e400"):
        assert f"rate={bad} is not a finite number" in parse_error(f"toy:T=4,rate={bad}")
    assert "T=4k is not an integer: expected an integer in 1..16,777,216 tokens" in parse_error(
        "toy:T=4k"
    )
    assert "T=1.5 is not an integer" in parse_error("toy:T=1.5")
    assert "warm=maybe is not a flag: expected 0 or 1" in parse_error("toy:T=4,warm=maybe")
    assert "mode=alpah is not one of alpha, beta (did you mean 'alpha'?)" in parse_error(
        "toy:T=4,mode=alpah"
    )


def test_workload_string_refuses_a_build_too_large_before_building_it():
    def explode(**kw):
        raise AssertionError("built")

    w = {"toy": StringWorkload("toy", explode, TOY["toy"].params, sizes=TOY["toy"].sizes)}
    with pytest.raises(ConfigError) as e:
        build_workload_string("toy:T=16777216,B=64", w)
    assert str(e.value) == (
        "workload 'toy:T=16777216,B=64': toy would build 1,073,741,824 tiles (batch x context), "
        "above the limit of 1,048,576 (2^20); ask for smaller sizes"
    )


def test_workload_string_unknown_key_and_name_suggest_the_closest():
    msg = parse_error("toy:T=4,btach=2")
    assert "unknown key 'btach' of toy (did you mean 'batch'?); valid keys: context (T): " in msg
    msg = parse_error("toy:T4")
    assert "expected key=value, got 'T4'; toy takes: context (T)" in msg
    msg = parse_error("tyo:T=4")
    assert msg == "workload 'tyo:T=4': unknown workload 'tyo' (did you mean 'toy'?); valid: toy"


def test_workload_string_values_and_defaults():
    w, values = parse_workload_string("toy:T=0x10,B=2,rate=0.25,mode=beta,warm=no", TOY)
    assert values == {"context": 16, "batch": 2, "rate": 0.25, "mode": "beta", "warm": False}
    assert build_workload_string("toy:T=1e3", TOY) == (1000, 1, 0.5, "a", True)
    assert w.required() == ("context",)


def test_workload_string_build_errors_become_config_errors():
    def picky(context: int) -> None:
        raise ValueError("context must be a multiple of 64")

    def greedy(context: int) -> None:
        raise MemoryError

    p = (TOY["toy"].params[0],)
    with pytest.raises(ConfigError, match=r"^workload 'a:T=3': context must be a multiple of 64$"):
        build_workload_string("a:T=3", {"a": StringWorkload("a", picky, p)})
    with pytest.raises(ConfigError, match="does not fit in this machine's memory"):
        build_workload_string("g:T=3", {"g": StringWorkload("g", greedy, p)})


def test_workload_string_declarations_are_checked():
    with pytest.raises(ValueError, match="a number needs both bounds"):
        Param("context", "tokens")
    with pytest.raises(ValueError, match="required parameters context of its build"):
        StringWorkload("x", _toy_build, (Param("batch", "b", lo=1, hi=2),))
    with pytest.raises(ValueError, match="its build function takes no nope"):
        StringWorkload("x", _toy_build, (Param("context", "c", lo=1, hi=2),
                                         Param("nope", "n", lo=1, hi=2)))  # fmt: skip


def test_a_workload_file_bounds_its_scenario_sizes(tmp_path):
    import yaml

    from coaccel import arch_configs

    doc = yaml.safe_load(arch_configs.path("workloads/llama-3.2-1b.yaml").read_text())
    name = next(iter(doc["scenarios"]))
    doc["scenarios"][name].update(tokens=10**12, batch=10**6, beyond_max_positions=True)
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_workload(path, name)
    assert f"scenarios.{name}.tokens: 1000000000000 is out of range: must be >= 1 and <= " \
        "16777216" in str(e.value)  # fmt: skip
    assert f"scenarios.{name}.batch: 1000000 is out of range: must be >= 1 and <= 65536" in str(
        e.value
    )


def test_a_workload_file_bounds_its_model_shape(tmp_path):
    """Every model dimension has an upper bound far above any published model: a typo is one
    problem per key, before any simulator sizes its work by it."""
    import yaml

    from coaccel import arch_configs

    doc = yaml.safe_load(arch_configs.path("workloads/llama-3.2-1b.yaml").read_text())
    doc["model"].update(hidden=10**12, layers=10**6, vocab=2**30, experts=10**9)
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_workload(path)
    text = str(e.value)
    for key, value, limit in (("hidden", 10**12, 2**20), ("layers", 10**6, 2**12),
                              ("vocab", 2**30, 2**24), ("experts", 10**9, 2**14)):  # fmt: skip
        assert f"model.{key}: {value} is out of range: must be >= " in text
        assert f"<= {limit}" in text


def _gpu_strings():
    from coaccel.sim.gpu_mem import workload as gpu

    return getattr(gpu, "WORKLOAD_STRINGS", None)


def test_every_gpu_workload_string_is_declared_with_bounds(capsys):
    strings = _gpu_strings()
    assert strings, "no workload strings"
    for name, w in strings.items():
        assert isinstance(w, StringWorkload), name
        for p in w.params:
            assert p.meaning, (name, p.name)
        with pytest.raises(ConfigError) as e:
            parse_workload_string(f"{name}:no_such_key=1", strings)
        assert "valid keys: " in str(e.value)
        if w.required():
            with pytest.raises(ConfigError, match=f"missing .*: {name} needs"):
                parse_workload_string(f"{name}:", strings)


@pytest.mark.parametrize(
    "workload, wanted",
    [
        ("flashdecode:T=4096,T=8192,B=1", "context given 2 times (T=4096, T=8192)"),
        ("flashdecode:", "missing context (T): flashdecode needs it; flashdecode takes: context"),
        ("flashdecode:T=1000000000000", "is above the limit of 16,777,216 tokens (2^24)"),
        ("flashdecode:T=16777216,B=65536", "K/V tiles (batch x kv_heads x ceil(context / "),
        ("ffd:T=65536,B=64", "K/V elements the reference computes on"),
        ("flashdecode:Q=3,T=10", "unknown key 'Q' of flashdecode"),
        ("chase:working_set_bytes=1e6,warm=maybe", "warm=maybe is not a flag"),
    ],
)
def test_gpu_workload_strings_on_the_command_line(workload, wanted, capsys):
    line = cli_error(["sim", "h200", "--workload", workload, "--mode", "analytical"], capsys)
    assert line.startswith(f"coaccel sim: error: workload {workload!r}: ")
    assert wanted in line


# ---------------------------------------------------------------------------------------------
# 2-4. Traces: another kind, given for a YAML workload, not a trace at all


def test_trace_kind_of_producers():
    assert trace_kind("coaccel.models.gpu.flash_decode") == "gpu"
    assert trace_kind("coaccel.models.hbq.gemm") == "hbq"
    assert trace_kind("coaccel.models.hbq.gemm+coaccel.models.hbq.attention") == "hbq"
    assert trace_kind("coaccel_systolic.gemm") == "coaccel_systolic"


def test_a_trace_of_another_kind_is_refused_naming_both_kinds(tmp_path):
    path = save_trace(tmp_path / "hbq_gemm_trace.npz", "coaccel.models.hbq.gemm")
    with pytest.raises(TraceError) as e:
        Trace.load(path, producers=("coaccel.models.gpu.",), reader="the gpu target")
    assert str(e.value) == (
        f"{path}: a 'hbq' trace (producer 'coaccel.models.hbq.gemm'); the gpu target reads "
        "only 'gpu' traces (producer coaccel.models.gpu.*)"
    )
    assert isinstance(e.value, CoaccelError)
    gpu = save_trace(tmp_path / "gpu.npz", "coaccel.models.gpu.flash_decode")
    assert Trace.load(gpu, producers=("coaccel.models.gpu.",)).kind == "gpu"


def test_the_gpu_target_refuses_a_trace_of_another_kind(tmp_path, capsys):
    path = save_trace(tmp_path / "hbq_gemm_trace.npz", "coaccel.models.hbq.gemm")
    line = cli_error(["sim", "h200", "--workload", str(path), "--mode", "analytical"], capsys)
    assert "a 'hbq' trace (producer 'coaccel.models.hbq.gemm'); the gpu target reads only " \
        "'gpu' traces" in line  # fmt: skip


@pytest.mark.parametrize("arch", ["kv260", "hbq_e_28nm"])
@pytest.mark.parametrize("name", ["trace.npz", "trace.bin"])
def test_a_trace_given_for_a_workload_yaml_is_refused_saying_what_is_accepted(
    arch, name, tmp_path, capsys
):
    path = save_trace(tmp_path / name, "coaccel.models.deltallm.delta_trace")
    assert is_trace_file(path)  # found by its first bytes, whatever its suffix
    line = cli_error(["sim", arch, "--workload", str(path)], capsys)
    assert line.startswith(
        f"coaccel sim: error: {path}: a 'deltallm' trace file (producer "
        "'coaccel.models.deltallm.delta_trace'), not a workload: this simulator builds its own "
        "traces from a model and scenario; give a model name with an optional :scenario, or a "
        "workload YAML file (shipped models: "
    )
    assert "unacceptable character" not in line


@pytest.mark.parametrize("content", [b"abcde", b"", b"\x93NUMPY\x01\x00", b"PK\x03\x04junk"])
def test_a_file_that_is_not_a_trace_is_refused_without_numpy_advice(content, tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(content)
    with pytest.raises(TraceError) as e:
        Trace.load(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: not a trace file: ")
    assert "pickle" not in msg and "allow_pickle" not in msg
    assert "\n" not in msg


def test_a_short_npz_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "x.npz"
    path.write_bytes(b"abcde")
    line = cli_error(["sim", "h200", "--workload", str(path), "--mode", "analytical"], capsys)
    assert "not a trace file: it is not an .npz archive: it does not start with the zip " \
        "signature" in line  # fmt: skip
    assert "pickle" not in line
    line = cli_error(["sim", "kv260", "--workload", str(path)], capsys)
    assert "neither a workload file nor a trace file (it is not an .npz archive" in line


def test_a_trace_holding_python_objects_is_never_unpickled(tmp_path):
    import json

    import numpy as np

    t = TraceBuilder(producer="coaccel.models.gpu.x").build()
    arrays = {k: getattr(t, k) for k in ("compute", "memory", "sparsity", "events")}
    arrays["events"] = np.array([object()], dtype=object)
    path = tmp_path / "p.npz"
    with open(path, "wb") as f:
        np.savez(f, meta=np.asarray(json.dumps(t.meta)), **arrays)
    with pytest.raises(TraceError, match="array 'events' holds Python objects, which coaccel "
                       "never loads"):  # fmt: skip
        Trace.load(path)


# ---------------------------------------------------------------------------------------------
# 5. Architecture overrides


@pytest.mark.parametrize(
    "overrides",
    ["freq_mhz=400", ["freq_mhz=400"], ("freq_mhz=400",), {"freq_mhz": 400}],
)
def test_overrides_take_a_mapping_or_key_value_strings(overrides):
    from coaccel.simulation import load_arch

    _, cfg = load_arch("kv260", overrides)
    assert cfg.freq_mhz == 400


@pytest.mark.parametrize(
    "overrides, wanted",
    [
        (5, "overrides: got int 5; overrides must be a mapping of dotted key -> value"),
        ([3], "entry 3 is a int; overrides must be a mapping"),
        ({1: 2}, "key 1 is not a dotted key; overrides must be a mapping"),
        (["freq_mhz"], "expected KEY=VALUE, got 'freq_mhz'"),
        (["freq_mhz=1", "freq_mhz=2"], "freq_mhz is given twice"),
        ("freq_mhz=[", "'[' is not a YAML value"),
    ],
)
def test_overrides_of_another_form_raise_config_error(overrides, wanted):
    import coaccel

    with pytest.raises(ConfigError) as e:
        coaccel.simulate("kv260", "llama-3.2-1b:prefill_64", overrides=overrides)
    assert wanted in str(e.value)
    assert "dictionary update sequence" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# 6. Paths: FIFOs, devices, folders, file systems where nothing is written


@pytest.fixture
def fifo(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


def test_a_fifo_is_never_opened_by_a_reader(fifo):
    from coaccel.commands.args import in_file
    from coaccel.simulation import find_arch

    with pytest.raises(CoaccelError, match=r"SPEC '.*fifo.yaml' is a named pipe \(FIFO\), not a "
                       "regular file"):  # fmt: skip
        in_file(fifo, "SPEC")
    with pytest.raises(ConfigError, match=r"not an architecture file: it is a named pipe \(FIFO\)"):
        find_arch(fifo)
    with pytest.raises(ConfigError, match=r"not a workload file: it is a named pipe \(FIFO\)"):
        load_workload(fifo)
    with pytest.raises(TraceError, match=r"not a trace file: it is a named pipe \(FIFO\)"):
        Trace.load(fifo)


@pytest.mark.parametrize("where", ["arch", "workload", "trace"])
def test_a_fifo_on_the_command_line_does_not_block(where, fifo):
    args = {
        "arch": ["sim", str(fifo), "--workload", "llama-3-8b"],
        "workload": ["sim", "hbq_e_28nm", "--workload", str(fifo)],
        "trace": ["sim", "h200", "--workload", str(fifo)],
    }[where]
    line = cli_error_in_subprocess(*args)
    assert "is a named pipe (FIFO)" in line or "it is a named pipe (FIFO)" in line


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
def test_a_device_is_refused_for_input_and_output(tmp_path):
    from coaccel.commands.args import in_file, out_dir, out_file

    dev = Path("/dev/null")
    with pytest.raises(CoaccelError, match="'/dev/null' is a character device, not a regular file"):
        in_file(dev, "--spec")
    with pytest.raises(CoaccelError, match="'/dev/null' is a character device, not a regular file"):
        out_file(dev, "--export")
    with pytest.raises(CoaccelError, match="'/dev/null' is a character device, not a folder"):
        out_dir(dev)
    with pytest.raises(ConfigError, match="not a workload file: it is a character device"):
        load_workload(dev)


def test_folders_and_missing_parents_get_their_own_message(tmp_path):
    from coaccel.commands.args import in_file, out_dir, out_file

    with pytest.raises(CoaccelError, match="is a folder, not a regular file"):
        in_file(tmp_path, "--spec")
    with pytest.raises(CoaccelError, match="is a folder; give a file name"):
        out_file(tmp_path, "--export")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(CoaccelError, match=rf"no such file \('{a_file}' is a file, not a folder\)"):
        in_file(a_file / "x.yaml", "--spec")
    with pytest.raises(CoaccelError, match=rf"cannot create the folder: '{a_file}' is a file"):
        out_dir(a_file / "sub")
    with pytest.raises(ConfigError, match="not a workload file: it is a folder"):
        load_workload(tmp_path)


def test_sweep_report_of_a_folder_says_it_is_a_folder(tmp_path, capsys):
    spec = ROOT / "arch_configs" / "sweeps" / "small_test.yaml"
    line = cli_error(["sweep-report", str(tmp_path), "--spec", str(spec)], capsys)
    assert "is a folder" in line and "no such file" not in line


def _proc_is_procfs() -> bool:
    try:
        return any(ln.split()[1:3] == ["/proc", "proc"] for ln in open("/proc/self/mounts"))
    except OSError:
        return False


@pytest.mark.skipif(not _proc_is_procfs(), reason="no proc file system at /proc")
def test_an_output_on_a_virtual_file_system_names_the_real_reason(tmp_path, capsys):
    spec = ROOT / "arch_configs" / "sweeps" / "small_test.yaml"
    line = cli_error(["sweep", str(spec), "--store", "/proc/coaccel-store.db"], capsys)
    assert line == (
        "coaccel sweep: error: --store '/proc': cannot write there: it is on the proc file "
        "system (mounted at /proc), a view of the kernel's state where files cannot be created"
    )
    assert "No such file or directory" not in line
    line = cli_error(["sweep", str(spec), "--store", "/proc/version/x.db"], capsys)
    assert "'/proc/version' is a file, not a folder" in line
