"""A target from another installed package: the systolic-array plug-in, end to end.

``tests/plugins/coaccel_systolic`` is a package of its own that registers a fourth target
(``kind: systolic``) through the ``coaccel.targets`` entry point; coaccel names it nowhere. The
session fixture builds and installs it into a temporary folder (``pip install --no-deps
--no-build-isolation --target``, from a copy of its sources so the build writes nothing into
the repository); the command-line tests run ``coaccel`` with that folder on ``PYTHONPATH``, so
``importlib.metadata`` finds the entry point exactly as it would for a user who installed the
package. The model tests import the installed package directly (without adding it to this
process's registry) and check the two fidelities against each other and the cost model's input.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SRC = ROOT / "tests" / "plugins" / "coaccel_systolic"
ARCHS = ("systolic_16x16", "systolic_32x32", "systolic_64x64")
PIP_FLAGS = (
    "--quiet",
    "--no-deps",
    "--no-index",
    "--no-build-isolation",
    "--disable-pip-version-check",
)


def _install(dest: Path) -> Path:
    """Build and install the plug-in into ``dest/site`` (once; a marker file says it is done)."""
    site = dest / "site"
    done = dest / "installed"
    if done.exists():
        return site
    src = dest / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(site, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    shutil.copytree(PLUGIN_SRC, src, ignore=ignore)
    cmd = [sys.executable, "-m", "pip", "install", *PIP_FLAGS, "--target", str(site), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"pip install of the plug-in failed:\n{r.stdout}\n{r.stderr}"
    done.write_text("ok\n")
    return site


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the plug-in is installed in (shared by the pytest-xdist workers)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker else base) / "coaccel_systolic_plugin"
    root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no POSIX locks: one installation per worker
        return _install(root / (worker or "main"))
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _install(root)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def sy(plugin_site: Path) -> SimpleNamespace:
    """The installed plug-in's modules, imported without registering its target here.

    The folder is on ``sys.path`` only while importing, so this process's registry (read from
    the entry points on ``sys.path``) never sees the plug-in; submodules the target's ``Ref``s
    name later are found through the package itself.
    """
    import importlib

    sys.path.insert(0, str(plugin_site))
    try:
        names = ("analytical", "config", "cycle", "priced", "schedule", "simulate", "workload")
        mods = {n: importlib.import_module(f"coaccel_systolic.{n}") for n in names}
        mods["package"] = importlib.import_module("coaccel_systolic")
    finally:
        sys.path.remove(str(plugin_site))
    return SimpleNamespace(**mods)


def _coaccel(
    site: Path, cwd: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess:
    """Run the real ``coaccel`` command line with the plug-in installed (on ``PYTHONPATH``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), env.get("PYTHONPATH"))))
    env.pop("COACCEL_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "coaccel.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


# ---------------------------------------------------------------------------------------------
# The command line finds the target through its entry point


def test_cli_lists_the_plugin(plugin_site: Path, tmp_path: Path) -> None:
    out = _ok(_coaccel(plugin_site, tmp_path, "sim", "--list"))
    block = out[out.index("systolic:") :]
    assert "weight-stationary systolic array" in block.splitlines()[0]
    assert "modes: analytical, cycle" in block
    assert "architectures: systolic_16x16 systolic_32x32 systolic_64x64" in block
    assert "option engine:" in block
    # coaccel's own targets are still there
    assert "hbq_asic:" in out and "gpu:" in out and "deltallm_fpga:" in out

    out = _ok(_coaccel(plugin_site, tmp_path, "validate", "--list"))
    rows = [line.split() for line in out.splitlines()]
    assert ["systolic", "systolic"] in [r[:2] for r in rows]

    out = _ok(_coaccel(plugin_site, tmp_path, "sweep", "--knobs", "systolic"))
    for key in ("array.rows", "array.cols", "sram.act_kib", "sram.weight_kib", "freq_mhz"):
        assert key in out


def test_cli_sim_both_modes(plugin_site: Path, tmp_path: Path) -> None:
    args = ("sim", "systolic_32x32", "--workload", "llama-3.2-1b:prefill_256")
    text = _ok(_coaccel(plugin_site, tmp_path, *args, "--mode", "analytical"))
    assert text.splitlines()[0] == (
        "systolic | systolic_32x32 | llama-3.2-1b:prefill_256 | analytical mode"
    )
    assert "lm_head" in text and "DRAM:" in text
    docs = {}
    for mode in ("analytical", "cycle"):
        docs[mode] = json.loads(
            _ok(_coaccel(plugin_site, tmp_path, *args, "--mode", mode, "--json"))
        )
    a, c = docs["analytical"], docs["cycle"]
    assert (a["target"], a["arch"], a["mode"], c["mode"]) == (
        "systolic",
        "systolic_32x32",
        "analytical",
        "cycle",
    )
    assert a["macs"] == c["macs"] == 316_351_184_896  # 16 layers x 6 GEMMs + the LM head
    assert a["offchip"] == c["offchip"] and a["buffers"] == c["buffers"]
    assert a["cycles"] <= c["cycles"] <= a["cycles"] * 1.005
    for doc in (a, c):
        assert sum(doc["resources"]["pe_array"].values()) == doc["cycles"]


def test_cli_reports_bad_workloads_in_one_line(plugin_site: Path, tmp_path: Path) -> None:
    r = _coaccel(plugin_site, tmp_path, "sim", "systolic_32x32", "--workload", "gemm:M=8,K=32")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "coaccel sim: error: gemm:M=8,K=32: gemm: missing N: write gemm:M=..,K=..,N=.."
    )


def test_cli_validate_systolic(plugin_site: Path, tmp_path: Path) -> None:
    out = _ok(_coaccel(plugin_site, tmp_path, "validate", "systolic"))
    assert "12/12 rows as expected (architecture systolic_32x32)" in out
    rows = json.loads(_ok(_coaccel(plugin_site, tmp_path, "validate", "systolic", "--json")))
    assert len(rows) == 12 and all(r["ok"] for r in rows)
    assert {r["expected"] for r in rows} == {"equal", "lower bound"}


def test_cost_model_prices_it_through_the_registry(plugin_site: Path, tmp_path: Path) -> None:
    script = (
        "import json, coaccel\n"
        "from coaccel.cost import arch_area, evaluate\n"
        "from coaccel.simulation import load_arch\n"
        "t, a = load_arch('systolic_32x32')\n"
        "r = coaccel.simulate(a, 'llama-3.2-1b:prefill_256', mode='analytical')\n"
        "cb, ar = evaluate(r, a), arch_area(a)\n"
        "print(json.dumps({'kind': t.kind, 'area': dict(ar.area_um2), 'energy': "
        "dict(cb.energy_j), 'sources': dict(cb.sources), 'run_area': dict(cb.area_um2)}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(plugin_site))
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
    )
    doc = json.loads(_ok(r))
    assert doc["kind"] == "systolic"
    assert set(doc["area"]) == {"pe_array", "act_sram", "weight_sram", "out_sram"}
    assert doc["area"] == doc["run_area"]
    assert set(doc["energy"]) == {*doc["area"], "dram", "leakage"}
    for comp, e in doc["energy"].items():
        assert math.isfinite(e) and e > 0, comp
        assert doc["sources"][comp].strip(), comp


@pytest.mark.slow
def test_cli_sweep_over_its_knobs(plugin_site: Path, tmp_path: Path) -> None:
    spec = tmp_path / "systolic_sweep.yaml"
    spec.write_text(
        "version: 1\n"
        "description: systolic rows x activation SRAM, Llama-3.2-1B 256-token prefill\n"
        "base: systolic_32x32\n"
        "workloads: [llama-3.2-1b:prefill_256]\n"
        "mode: analytical\n"
        "parameters:\n"
        "  array.rows: [16, 32]\n"
        "  sram.act_kib: [128, 256]\n"
        "strategy: {kind: grid}\n"
        "objectives:\n"
        "  - {metric: edp_js, goal: minimize}\n"
        "limits:\n"
        '  - "area_mm2 <= 2.5"\n'
    )
    out = _ok(
        _coaccel(
            plugin_site,
            tmp_path,
            "sweep",
            str(spec),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--export",
            "csv",
            str(tmp_path / "s.csv"),
        )
    )
    assert "4 points: 0 already stored, 4 evaluated (0 failed)" in out
    with open(tmp_path / "s.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    by = {(int(r["param.array.rows"]), int(r["param.sram.act_kib"])): r for r in rows}
    for r in rows:
        for col in ("energy_j [J]", "area_mm2 [mm2]", "edp_js [J*s]", "utilization"):
            assert float(r[col]) > 0, col
    # a larger activation SRAM: a longer token tile, fewer fill/drain cycles, more area
    assert float(by[32, 256]["cycles [cycle]"]) < float(by[32, 128]["cycles [cycle]"])
    assert float(by[32, 256]["area_mm2 [mm2]"]) > float(by[32, 128]["area_mm2 [mm2]"])
    assert by[32, 256]["feasible"] == "False" and by[16, 128]["feasible"] == "True"


@pytest.mark.slow
def test_cli_report(plugin_site: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "rep"
    _ok(_coaccel(plugin_site, tmp_path, "report", "systolic_32x32", "--out", str(out_dir)))
    names = {p.name for p in out_dir.iterdir()}
    assert {"cost_report.csv", "cost_report.md", "cost_report.html"} <= names
    with open(out_dir / "cost_report.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "systolic"]
    area = {r["component"]: r for r in rows if r["quantity"] == "area"}
    energy = {r["component"]: r for r in rows if r["quantity"] == "energy"}
    assert set(area) == {"pe_array", "act_sram", "weight_sram", "out_sram", "total"}
    assert set(energy) == {
        "pe_array",
        "act_sram",
        "weight_sram",
        "out_sram",
        "dram",
        "leakage",
        "total",
    }
    for r in [*area.values(), *energy.values()]:
        assert r["unit"] == ("um2" if r["quantity"] == "area" else "J")
        assert float(r["value"]) > 0 and r["source"].strip()
        assert r["arch"] == "systolic_32x32" and r["node_nm"] == "28"
    assert {r["workload"] for r in energy.values()} == {"llama-3.2-1b:prefill_256"}
    parts = [float(r["value"]) for c, r in area.items() if c != "total"]
    assert float(area["total"]["value"]) == pytest.approx(sum(parts), rel=1e-5)
    md = (out_dir / "cost_report.md").read_text()
    assert "## Systolic array: area and energy" in md


# ---------------------------------------------------------------------------------------------
# The two fidelities


def _both(sy: SimpleNamespace, arch, gemm):
    plan = sy.schedule.plan_gemm(arch, gemm)
    return plan, sy.analytical.gemm_timing(arch, plan), sy.cycle.gemm_timing(arch, plan)


def test_one_tile_by_hand(sy: SimpleNamespace) -> None:
    """One 8 x 32 x 32 GEMM on the 32 x 32 array, counted by hand.

    LPDDR4 preset at 500 MHz: 25.6 GB/s x 0.7 = 35.84 B/cycle, latency 100 ns = 50 cycles.
    Slab 8 x 32 B: 8 cycles; weight tile 1024 B: 29; output tile 8 x 32 x 4 B: 29.
    Prologue 8 + 29 + 50 = 87, the tile 8 + 32 + 32 - 2 = 70, epilogue 29 + 50 = 79: 236.
    """
    arch = sy.config.load_arch("systolic_32x32")
    plan, a, c = _both(sy, arch, sy.workload.Gemm("g", 8, 32, 32))
    assert (plan.t_m, plan.t_n, plan.t_k, plan.m_tile) == (1, 1, 1, 8)
    for t in (a, c):
        assert (t.prologue, t.busy, t.fill_drain, t.dram_stall, t.epilogue) == (87, 8, 62, 0, 79)
        assert t.cycles == 236 and t.dma_busy == 8 + 29 + 29


def test_fidelities_agree_where_they_should(sy: SimpleNamespace) -> None:
    """Random GEMMs on the three arrays at 1x and 4x their clock (4x: transfers matter).

    The closed form is a lower bound of the cycle-approximate schedule, and equal to it
    wherever that never stalls the array on a transfer.
    """
    import dataclasses

    rng = np.random.default_rng(7)
    exact = stalled = 0
    for name in ARCHS:
        base = sy.config.load_arch(name)
        for factor in (1, 4):
            arch = dataclasses.replace(base, freq_mhz=base.freq_mhz * factor)
            for _ in range(40):
                m, k, n = (int(rng.integers(1, hi)) for hi in (400, 3000, 3000))
                _, a, c = _both(sy, arch, sy.workload.Gemm("g", m, k, n))
                assert a.cycles <= c.cycles, (name, factor, m, k, n)
                assert (a.prologue, a.busy, a.fill_drain, a.epilogue, a.dma_busy) == (
                    c.prologue,
                    c.busy,
                    c.fill_drain,
                    c.epilogue,
                    c.dma_busy,
                )
                if c.dram_stall == 0:
                    assert a.cycles == c.cycles, (name, factor, m, k, n)
                    exact += 1
                else:
                    stalled += 1
    assert exact > 50 and stalled > 50  # both regimes were exercised


@pytest.mark.parametrize(
    "arch_name",
    ["systolic_32x32", "systolic_64x64", pytest.param("systolic_16x16", marks=pytest.mark.slow)],
)
def test_fidelities_agree_on_llm_workloads(sy: SimpleNamespace, arch_name: str) -> None:
    """Llama-3.2-1B's dense GEMMs: decode exactly, prefill within 2 % per GEMM, 0.5 % total.

    Decode streams one row per array tile, so weight prefetch always keeps up and nothing
    stalls. In prefill, the in-order DMA engine loads the next token tile's activation slab
    (up to 1 MiB) in one transfer; the weight tiles queued behind it arrive late for a few
    array tiles, which the closed form does not see.
    """
    arch = sy.config.load_arch(arch_name)
    for wl, per_gemm, total in (("decode_1k", 0.0, 0.0), ("prefill_256", 0.02, 0.005)):
        ra = sy.simulate.simulate(arch, f"llama-3.2-1b:{wl}", mode="analytical")
        rc = sy.simulate.simulate(arch, f"llama-3.2-1b:{wl}", mode="cycle")
        assert ra.cycles <= rc.cycles <= ra.cycles * (1 + total), wl
        for ga, gc in zip(ra.gemms, rc.gemms, strict=True):
            assert ga.cycles <= gc.cycles <= ga.cycles * (1 + per_gemm), (wl, ga.name)
        assert ra.buffers == rc.buffers and ra.offchip == rc.offchip


@pytest.mark.parametrize(
    "mkn", [(8, 32, 32), (5, 100, 70), (300, 700, 90), (1, 513, 257), (130, 64, 1000)]
)
def test_event_engine_equals_tile_loop(sy: SimpleNamespace, mkn: tuple[int, int, int]) -> None:
    """The numba tile loop and the same schedule on coaccel's event engine (simpy), tile for
    tile, also at a clock where transfers stall the array."""
    import dataclasses

    base = sy.config.load_arch("systolic_16x16")
    for freq in (500.0, 2000.0):
        arch = dataclasses.replace(base, freq_mhz=freq)
        plan = sy.schedule.plan_gemm(arch, sy.workload.Gemm("g", *mkn))
        done = {}
        timing = {}
        for engine in ("fast", "simpy"):
            done[engine] = np.zeros(plan.tiles, dtype=np.int64)
            timing[engine] = sy.cycle.gemm_timing(arch, plan, engine=engine, tile_done=done[engine])
        assert timing["fast"] == timing["simpy"]
        np.testing.assert_array_equal(done["fast"], done["simpy"])
        assert done["fast"][-1] + timing["fast"].epilogue <= timing["fast"].cycles


def test_traffic_and_accesses_by_hand(sy: SimpleNamespace) -> None:
    """DRAM bytes and SRAM accesses of one GEMM with ragged edges, from the schedule's rules."""
    arch = sy.config.load_arch("systolic_32x32")
    m, k, n = 100, 1000, 3000
    r = sy.simulate.simulate(arch, f"gemm:M={m},K={k},N={n}", mode="analytical")
    plan = sy.schedule.plan_gemm(arch, sy.workload.Gemm("gemm", m, k, n))
    # act SRAM 256 KiB / (2 x 1000 B) = 131 rows >= M: one token tile
    assert (plan.m_tile, plan.t_m, plan.t_n, plan.t_k) == (100, 1, 94, 32)
    assert r.offchip.by_tensor == {"activations": m * k, "weights": k * n, "outputs": 4 * m * n}
    assert r.offchip.read_bytes == m * k + k * n and r.offchip.write_bytes == 4 * m * n
    act, wgt, out = r.buffers["ACT"], r.buffers["WGT"], r.buffers["OUT"]
    assert (act.read_bytes, act.word_bits) == (94 * m * k, 32 * 8)
    assert act.reads == out.writes == out.reads == 94 * 32 * m
    assert wgt.reads == wgt.writes == 94 * k and wgt.read_bytes == k * n
    assert out.write_bytes == out.read_bytes == 32 * m * n * 4
    metrics = r.metrics()
    assert metrics["macs"] == (m * k * n, "MAC")
    assert metrics["gemm.gemm.cycles"] == (r.cycles, "cycle")
    assert metrics["utilization"][1] == "1" and 0 < metrics["utilization"][0] < 1


# ---------------------------------------------------------------------------------------------
# Cost model input, configs and workloads


def test_priced_components(sy: SimpleNamespace) -> None:
    from coaccel.cost import pe_cost, price

    arch = sy.config.load_arch("systolic_32x32")
    r = sy.simulate.simulate(arch, "llama-3.2-1b:prefill_256", mode="analytical")
    pc = sy.priced.priced_components(arch, r)
    assert pc.kind == "systolic" and pc.workload == "llama-3.2-1b:prefill_256"
    (mac,) = pc.macs
    assert (mac.units, mac.macs, mac.cost_model) == (1024, r.macs, "pe_model")
    assert (mac.fmt.weight, mac.fmt.act, mac.fmt.block, mac.fmt.accum) == (
        "int8",
        "int8",
        32,
        "fp32",
    )
    assert {b.name: (b.banks, b.depth_words, b.bank_width_bits) for b in pc.buffers} == {
        "act_sram": (64, 256, 128),  # 256 KiB: 8192 rows of 256 b, 2 macros wide x 32 deep
        "weight_sram": (4, 256, 128),
        "out_sram": (16, 256, 128),
    }
    cb = price(pc)
    assert cb.total_area_um2 > 0 and cb.total_energy_j > 0
    for comp in (*cb.area_um2, *cb.energy_j):
        v = cb.energy_j.get(comp, cb.area_um2.get(comp))
        assert math.isfinite(v) and v > 0 and cb.sources[comp].strip(), comp
    assert cb.energy_j["dram"] == pytest.approx(
        (r.offchip.read_bytes + r.offchip.write_bytes) * 32e-12
    )
    per_mac = pe_cost(weight="int8", act="int8", block=32, scale="pot", accum="fp32", pe_macs=32)
    assert cb.area_um2["pe_array"] == pytest.approx(1024 * per_mac.area_um2_per_mac)
    assert cb.energy_j["pe_array"] == pytest.approx(r.macs * per_mac.energy_fj_per_mac * 1e-15)
    area_only = price(sy.priced.priced_components(arch))
    assert dict(area_only.area_um2) == dict(cb.area_um2) and not area_only.energy_j


def test_config_errors(sy: SimpleNamespace, tmp_path: Path) -> None:
    from coaccel.spine.config import ConfigError

    text = sy.config.arch_file("systolic_32x32").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text.replace("  rows: 32", "  row: 32").replace("weight_kib: 16", "weight_kib: 1")
    )
    with pytest.raises(ConfigError) as e:
        sy.config.load_arch(bad)
    msg = str(e.value)
    assert "array.row: unknown key 'row'; valid keys: rows, cols (did you mean 'rows'?)" in msg
    assert "array.rows: missing required key" in msg
    small = tmp_path / "small.yaml"
    small.write_text(text.replace("weight_kib: 16", "weight_kib: 1"))
    with pytest.raises(ConfigError, match=r"sram.weight_kib: .*at least 2 KiB"):
        sy.config.load_arch(small)
    tiny_act = tmp_path / "tiny_act.yaml"
    tiny_act.write_text(text.replace("act_kib: 256", "act_kib: 4"))
    arch = sy.config.load_arch(tiny_act)
    with pytest.raises(ConfigError, match=r"down_proj \(K=8192\) needs .* at least 16 KiB"):
        sy.simulate.simulate(arch, "llama-3.2-1b:prefill_256", mode="analytical")
    big = sy.config.load_arch("systolic_32x32")
    with pytest.raises(ConfigError, match=r"gate_up_proj has 131,072 array tiles; the simpy"):
        sy.simulate.simulate(big, "llama-3.2-1b:prefill_256", mode="cycle", engine="simpy")


def test_workloads(sy: SimpleNamespace) -> None:
    from coaccel.spine.config import ConfigError

    wl = sy.workload.load_workload("llama-3.2-1b:decode_1k")
    shapes = {g.name: (g.m, g.k, g.n, g.repeat) for g in wl.gemms}
    assert shapes == {
        "q_proj": (1, 2048, 2048, 64),  # 16 layers x 4 decode steps
        "k_proj": (1, 2048, 512, 64),
        "v_proj": (1, 2048, 512, 64),
        "o_proj": (1, 2048, 2048, 64),
        "gate_up_proj": (1, 2048, 16384, 64),
        "down_proj": (1, 8192, 2048, 64),
        "lm_head": (1, 2048, 128256, 4),
    }
    assert sy.workload.load_workload("gemm:n=3, k=2 ,M=1").label == "gemm:M=1,K=2,N=3"
    with pytest.raises(ConfigError, match="K given twice"):
        sy.workload.load_workload("gemm:M=1,K=2,K=3,N=4")
    with pytest.raises(ConfigError, match=r"gemm\.M: must be an integer in 1\.\.16,777,216"):
        sy.workload.load_workload("gemm:M=1000000000,K=128,N=16")
    with pytest.raises(ConfigError, match=r"above the limit of 1,099,511,627,776 \(2\^40\)"):
        sy.workload.load_workload("gemm:M=1000000,K=1280,N=1000000")
    with pytest.raises(ConfigError, match="runs dense models only"):
        sy.workload.load_workload("qwen1.5-moe-a2.7b")


def test_target_declaration(sy: SimpleNamespace) -> None:
    """What the entry point publishes: cheap references, names and paths of this package."""
    from coaccel.spine.target import Ref, SimTarget

    t = sy.package.TARGET
    assert isinstance(t, SimTarget) and t.kind == "systolic"
    assert t.arch_names == ARCHS
    for role in (t.load_arch, t.load_workload, t.simulate, t.arch_file, t.priced_components):
        assert isinstance(role, Ref) and role.path.startswith("coaccel_systolic.")
    path = t.arch_file("systolic_64x64")
    assert path.is_file() and path.parts[-3:] == ("arch_configs", "systolic", "systolic_64x64.yaml")
    assert t.load_arch(path).dram.type == "lpddr4"  # coaccel's shipped DRAM preset
