"""Calibrated decode-attention times with 90 % intervals (coaccel.sim.gpu_mem.intervals): the
shipped calibration file and its generator, the calibrated value against the measured fit's own
predictions, the simulator's metrics on both paths, the sweep report's error bars and
``--write-calibration``.

The regeneration of the shipped file from the whole measured CSV takes about 30 s (``slow``);
the other cases simulate a few small ops."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from coaccel import arch_configs
from coaccel.cli import main
from coaccel.sim.gpu_mem import intervals as iv
from coaccel.sim.gpu_mem import load_arch, simulate
from coaccel.spine.config import ConfigError, override
from coaccel.spine.errors import CoaccelError
from coaccel.targets.gpu import measured as mm
from coaccel.targets.gpu.measured_calibration import csv_sha256

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_YAML = ROOT / "arch_configs" / iv.CALIBRATION_FILE
CALIBRATED = ("seconds_calibrated", "seconds_calibrated_lower", "seconds_calibrated_upper")


@pytest.fixture(scope="module")
def cal() -> iv.MeasuredCalibration:
    return iv.load_calibration()


def _rows() -> list[mm.MeasuredRow]:
    """Rows of the shipped CSV: an A100 row served by the warm L2, an A100 row streamed from
    HBM, an L40S row (three libraries)."""
    t = mm.read_measured_csv(mm.shipped_measured_csv())
    a100 = [r for r in t.rows if mm.gpu_config(r.gpu) == "a100_80g"]
    small = min(a100, key=lambda r: r.kv_bytes)
    big = max((r for r in a100 if r.library != small.library), key=lambda r: r.kv_bytes)
    l40s = next(r for r in t.rows if mm.gpu_config(r.gpu) == "l40s" and r.batch == 4)
    return [small, big, l40s]


# -- the file ----------------------------------------------------------------------------------


def test_shipped_file_belongs_to_the_shipped_csv(cal: iv.MeasuredCalibration) -> None:
    assert iv.calibration_path() == SHIPPED_YAML
    assert cal.measured_csv == mm.shipped_measured_csv().name
    assert cal.measured_csv_sha256 == csv_sha256(mm.shipped_measured_csv())
    assert cal.fitted_configs == ("a100_80g", "l40s")
    assert not set(cal.fitted_configs) & mm.NEVER_FITTED
    assert cal.target_coverage == mm.COVERAGE
    assert cal.graph_gap_us == pytest.approx(0.875)
    for hw in (cal.log_half_width.in_fit, cal.log_half_width.held_out):
        assert all(0 < getattr(hw, r) < 1 for r in iv.REGIMES)
    # a GPU no fit saw gets wider intervals than one in the fit
    assert cal.log_half_width.held_out.dram > cal.log_half_width.in_fit.dram
    assert set(cal.libraries) == {r.library for r in mm.read_measured_csv(
        mm.shipped_measured_csv()).rows}  # fmt: skip


def test_loader_rejects_an_unknown_key(tmp_path: Path) -> None:
    good = yaml.safe_load(SHIPPED_YAML.read_text(encoding="utf-8"))
    msgs = []
    for k, (edit, fix) in enumerate(((("pooled", "flor_kcycles"), 1.0),
                                     ((None, "measured_csv_sha256"), "XYZ"))):  # fmt: skip
        doc = yaml.safe_load(yaml.safe_dump(good))
        (doc[edit[0]] if edit[0] else doc)[edit[1]] = fix
        p = tmp_path / f"c{k}.yaml"
        p.write_text(yaml.safe_dump(doc), encoding="utf-8")
        with pytest.raises(ConfigError) as e:
            iv.load_calibration(p)
        msgs.append(str(e.value))
    assert "pooled.flor_kcycles: unknown key 'flor_kcycles'" in msgs[0]
    assert "valid keys: floor_kcycles, efficiency, rows, efficiency_l2, launch" in msgs[0]
    assert "measured_csv_sha256" in msgs[1] and "64 lower-case hex digits" in msgs[1]


def _equal_docs(a: object, b: object, where: str = "") -> None:
    """Parsed YAML documents equal: keys, strings and integers exactly, floats to 1e-9 (a
    least-squares fit may differ in the last bits between BLAS builds)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _equal_docs(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _equal_docs(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-12), where
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def evaluation() -> mm.MeasuredValidation:
    return mm.evaluate_measured(mm.read_measured_csv(mm.shipped_measured_csv()))


@pytest.mark.slow
def test_shipped_file_equals_a_fresh_derivation(evaluation: mm.MeasuredValidation) -> None:
    from coaccel.targets.gpu.measured_calibration import derive_calibration
    from coaccel.targets.gpu.measured_report import calibration_yaml

    fresh = calibration_yaml(derive_calibration(evaluation))
    shipped = SHIPPED_YAML.read_text(encoding="utf-8")
    head = [ln for ln in shipped.splitlines() if ln.startswith("#")]
    assert head == [ln for ln in fresh.splitlines() if ln.startswith("#")]
    _equal_docs(yaml.safe_load(fresh), yaml.safe_load(shipped))


@pytest.mark.slow
def test_calibrated_equals_every_prediction_of_the_fit(
    evaluation: mm.MeasuredValidation, cal: iv.MeasuredCalibration
) -> None:
    """Every calibration row: ``calibrated`` with the row's library gives the fit's own
    prediction and interval (in-fit widths); the pooled fit its pooled prediction."""
    preds = [p for p in evaluation.predictions if p.fit_role == "calibration"]
    assert len(preds) == 221
    sims = [p.sim for p in preds]
    t = np.array([s.sim_us for s in sims]) * 1e-6
    mhz = np.array([s.freq_mhz for s in sims])
    reg = np.array([s.regime for s in sims])
    cfg = np.array([p.gpu_config for p in preds])
    for lib in sorted({p.row.library for p in preds}):
        m = np.array([p.row.library == lib for p in preds])
        s, lo, hi = iv.calibrated(t[m], mhz[m], reg[m], cfg[m], lib, calibration=cal)
        want = [p for p, k in zip(preds, m, strict=True) if k]
        np.testing.assert_allclose(s * 1e6, [p.predicted_us for p in want], rtol=1e-9)
        np.testing.assert_allclose(lo * 1e6, [p.lower_us for p in want], rtol=1e-9)
        np.testing.assert_allclose(hi * 1e6, [p.upper_us for p in want], rtol=1e-9)
    pooled = evaluation.calibration.pooled  # type: ignore[union-attr]
    s, _, _ = iv.calibrated(t, mhz, reg, cfg, calibration=cal)
    np.testing.assert_allclose(s * 1e6, [pooled.predict_us(x) for x in sims], rtol=1e-9)


# -- the value ---------------------------------------------------------------------------------


def _params(name: str, fit: iv.LibraryFit) -> mm.LibraryParams:
    """The fit code's parameters of a fit read from the file."""
    return mm.LibraryParams(name, fit.floor_kcycles, fit.efficiency, fit.rows, fit.efficiency_l2)


def test_simulator_reproduces_the_fits_prediction_of_measured_rows(
    cal: iv.MeasuredCalibration,
) -> None:
    """A measured row's trace (launched as its library launches it, as the fit simulated it)
    through the plain simulator (the config's stream launch latency, not the graph gap):
    ``seconds_calibrated`` is the fit code's prediction of that row from the shipped
    parameters, its interval the in-fit one of the row's regime."""
    assert cal.launch_form == mm.DEFAULT_LAUNCH == "library"
    assert cal.efficiency_form == mm.DEFAULT_EFFICIENCY_FORM
    regimes = []
    for row in _rows():
        cfg = mm.gpu_config(row.gpu)
        arch = load_arch(cfg)
        kind = mm.library_launch_kind(row.library, cfg)
        cc = mm.COMPUTE_CAPABILITY[cfg]
        assert cal.libraries[row.library].launch == kind
        # the fit's simulation: graph gap, analytical
        sim = mm.simulate_row(row, arch, kind=kind, compute_capability=cc)
        res = simulate(arch, mm.decode_trace(row, arch, kind=kind, compute_capability=cc))
        c = res.calibrated
        assert c is not None and (c.regime, c.gpu_config) == (sim.regime, cfg)
        assert c.sim_s * 1e6 == pytest.approx(sim.sim_us, rel=1e-12)
        pooled = _params("(pooled)", cal.pooled)
        assert c.seconds * 1e6 == pytest.approx(pooled.predict_us(sim), rel=1e-12)
        q = getattr(cal.log_half_width.in_fit, sim.regime)
        assert c.lower_s == pytest.approx(c.seconds * math.exp(-q), rel=1e-12)
        assert c.upper_s == pytest.approx(c.seconds * math.exp(q), rel=1e-12)
        m = res.metrics()
        assert [m[k] for k in CALIBRATED] == [(c.seconds, "s"), (c.lower_s, "s"), (c.upper_s, "s")]
        own = _params(row.library, cal.libraries[row.library])
        s, _, _ = iv.calibrated(c.sim_s, arch.sm.freq_mhz, c.regime, cfg, row.kernel)
        assert s * 1e6 == pytest.approx(own.predict_us(sim), rel=1e-12)
        regimes.append(c.regime)
    assert regimes == ["l2", "dram", regimes[2]]


def test_bounds_order_and_vectorized_equals_scalar(cal: iv.MeasuredCalibration) -> None:
    rng = np.random.default_rng(0)
    n = 64
    t = rng.uniform(1e-6, 1e-3, n)
    mhz = rng.choice([1410.0, 1980.0, 2520.0], n)
    reg = rng.choice(list(iv.REGIMES), n)
    cfg = rng.choice(["a100_80g", "l40s", "h200", ""], n)
    s, lo, hi = iv.calibrated(t, mhz, reg, cfg)
    assert s.shape == lo.shape == hi.shape == (n,)
    assert np.all((0 < lo) & (lo <= s) & (s <= hi))
    for i in range(n):  # bit for bit: the batch path must equal the per-point path
        one = iv.calibrated(float(t[i]), float(mhz[i]), str(reg[i]), str(cfg[i]))
        assert all(isinstance(x, float) for x in one)
        assert one == (s[i], lo[i], hi[i])
    ratio = hi / s
    in_fit = np.isin(cfg, cal.fitted_configs)
    for r in iv.REGIMES:
        for fit, hw in ((True, cal.log_half_width.in_fit), (False, cal.log_half_width.held_out)):
            m = (reg == r) & (in_fit == fit)
            np.testing.assert_allclose(ratio[m], math.exp(getattr(hw, r)), rtol=1e-12)
    # the floor counts SM cycles: at a higher clock it takes fewer microseconds
    a, _, _ = iv.calibrated(0.0, 1000.0, "dram", "")
    b, _, _ = iv.calibrated(0.0, 2000.0, "dram", "")
    assert a == pytest.approx(2 * b) and a == pytest.approx(cal.pooled.floor_kcycles * 1e-6)


def test_each_regime_takes_its_efficiency(cal: iv.MeasuredCalibration) -> None:
    """With the per-regime form an ``l2`` op is divided by ``efficiency_l2``, a ``dram`` op by
    ``efficiency``; a file of the single form (the defaults) divides both by ``efficiency``."""
    t, f = np.array([2e-5, 2e-5]), 1410.0
    for lib in (None, *sorted(cal.libraries)):
        p = cal.fit(lib)
        assert p.efficiency_l2 is not None
        s, _, _ = iv.calibrated(t, f, ["dram", "l2"], "a100_80g", lib, calibration=cal)
        floor = p.floor_kcycles * 1000.0 / f * 1e-6
        assert s[0] == floor + t[0] / p.efficiency and s[1] == floor + t[1] / p.efficiency_l2
    single = dataclasses.replace(
        cal,
        pooled=dataclasses.replace(cal.pooled, efficiency_l2=None),
        libraries={},
        efficiency_form="single",
    )
    assert not single.validate()
    s, _, _ = iv.calibrated(t, f, ["dram", "l2"], "a100_80g", calibration=single)
    assert s[0] == s[1]
    bad = dataclasses.replace(single, efficiency_form="regime")
    assert any("efficiency_l2" in str(p) for p in bad.validate())


def test_bad_regime_and_library() -> None:
    with pytest.raises(ValueError, match="regime 'hbm'; valid: dram, l2"):
        iv.calibrated([1e-5, 1e-5], 1410.0, ["dram", "hbm"], "a100_80g")
    with pytest.raises(ValueError, match="no calibrated kernel library 'flashinfer'.*vllm"):
        iv.calibrated(1e-5, 1410.0, "dram", "a100_80g", "flashinfer")


def test_which_designs_are_in_the_fit(cal: iv.MeasuredCalibration) -> None:
    a100 = load_arch("a100_80g")
    assert iv.fitted_config(a100) == "a100_80g" and iv.fitted_config(load_arch("h200")) == ""
    # the launch latency and the name do not matter (T_sim uses the graph gap) ...
    assert iv.fitted_config(override(a100, {"launch_overhead_us": 1.0})) == "a100_80g"
    # ... a variant of the SMs or the memory is another GPU
    assert iv.fitted_config(override(a100, {"sm.count": 100})) == ""
    assert iv.fitted_config(override(a100, {"dram": "dram/hbm3_h100_sxm.yaml"})) == ""


def test_only_dense_decode_attention_is_calibrated() -> None:
    arch = load_arch("h200")
    dense = simulate(arch, "flashdecode:context=4096,batch=8")
    assert dense.calibrated is not None and dense.calibrated.regime == "dram"  # a cold trace
    assert dense.calibrated.gpu_config == ""  # Hopper: held-out widths
    assert set(CALIBRATED) <= set(dense.metrics())
    for spec in ("stream:working_set_bytes=1048576,ctas=132,tile_bytes=4096,passes=1",
                 "ffd:context=4096,keep=0.5,ref=0"):  # fmt: skip
        r = simulate(arch, spec)
        assert r.calibrated is None and not set(CALIBRATED) & set(r.metrics())


# -- sweeps ------------------------------------------------------------------------------------


def _small_gpu_spec(tmp_path: Path) -> Path:
    """The shipped W1 GPU sweep with two of its workloads (every memory system and SM count)."""
    doc = yaml.safe_load(arch_configs.path("sweeps/gpu_decode_context_batch_splits.yaml")
                         .read_text(encoding="utf-8"))  # fmt: skip
    doc["workloads"] = doc["workloads"][:2]
    p = tmp_path / "gpu_w1.yaml"
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return p


def test_batch_equals_per_point_for_the_calibrated_metrics(tmp_path: Path) -> None:
    from coaccel.dse import expand, load_spec
    from coaccel.dse.batch import evaluate_batch
    from coaccel.dse.evaluate import evaluate_points

    ls = load_spec(_small_gpu_spec(tmp_path))
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    args = (ls.base_path, ls.spec.mode, ls.digest, [])
    fast, slow = evaluate_batch(*args, points), evaluate_points(*args, points)
    assert len(fast) == len(slow) == 12
    for f, s in zip(fast, slow, strict=True):
        assert s.status == "ok" and list(f.metrics) == list(s.metrics)
        assert f.metrics == s.metrics, s.point_id  # values, units and order
        lo, v, hi = (
            s.metrics[k][0]
            for k in ("seconds_calibrated_lower", "seconds_calibrated", "seconds_calibrated_upper")
        )
        assert 0 < lo <= v <= hi and v > s.metrics["seconds"][0] / 2  # fmt: skip


def test_gpu_sweep_report_draws_the_calibrated_interval(tmp_path: Path) -> None:
    from coaccel.dse import load_spec, run_sweep
    from coaccel.dse.analysis import analyze
    from coaccel.report.sweep import write_sweep_report

    spec = _small_gpu_spec(tmp_path)
    run_sweep(spec, tmp_path / "s.sqlite")
    a = analyze(load_spec(spec), tmp_path / "s.sqlite", max_breakdowns=1)
    assert a.fronts
    for fa in a.fronts:
        sp = fa.spreads[0]
        assert sp is not None and sp.kind == "interval"
        assert sp.sources == ("seconds_calibrated_lower", "seconds_calibrated_upper")
        assert np.all(np.isfinite(sp.below) & (sp.below > 0) & np.isfinite(sp.above))
        assert fa.spreads[1] is None  # energy: no spread stored
    paths = {p.name: p for p in write_sweep_report(a, tmp_path / "rep")}
    md = paths["sweep_report.md"].read_text(encoding="utf-8")
    assert "uncertainty of seconds_calibrated: error bars in the charts and value [lower, " \
           "upper]" in md  # fmt: skip
    with paths["sweep_points.csv"].open(encoding="utf-8") as f:
        rec = next(csv.DictReader(f))
    lo, hi = float(rec["seconds_calibrated_lower [s]"]), float(rec["seconds_calibrated_upper [s]"])
    assert lo < float(rec["seconds_calibrated [s]"]) < hi


# -- --write-calibration -----------------------------------------------------------------------


HEADER = ",".join(mm.MEASURED_COLUMNS)


def _csv(tmp_path: Path, gpus: tuple[str, ...] = ("A100-SXM4-80GB", "L40S")) -> Path:
    lines = [HEADER]
    for g in gpus:
        for k, (b, t) in enumerate(((1, 256), (2, 512), (4, 256), (1, 1024), (2, 2048))):
            us = (18 if g.startswith("A100") else 9) + b + t / 512 + 0.3 * (-1) ** k
            lines.append(f"s,{g},lib,bf16,{b},32,8,128,{t},{us},n")
    p = tmp_path / "ops.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_cli_writes_a_calibration_the_simulator_reads(tmp_path: Path) -> None:
    src = _csv(tmp_path)
    dest = tmp_path / "cal" / "ops_calibration.yaml"
    assert main(["validate", "gpu", "--measured", str(src), "--out", str(tmp_path / "o"),
                 "--write-calibration", str(dest), "--quiet"]) == 0  # fmt: skip
    c = iv.load_calibration(dest)
    assert c.measured_csv == "ops.csv" and c.measured_csv_sha256 == csv_sha256(src)
    assert (c.measured_rows, c.calibration_rows) == (10, 10)
    assert c.fitted_configs == ("a100_80g", "l40s") and set(c.libraries) == {"lib"}
    assert "shipped set" not in c.sources["measured_csv"]  # its rows cite their own sources
    s, lo, hi = iv.calibrated(1e-5, 1410.0, "dram", "a100_80g", "LIB", calibration=c)
    assert lo < s < hi
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # atomic


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COACCEL_DEBUG"}
    return subprocess.run([sys.executable, "-m", "coaccel.cli", "validate", "gpu", *args],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("one_gpu", "calibration rows of 1 GPU(s) (a100_80g); the held-out half-widths need two"),
        ("no_measured", "--write-calibration needs --measured FILE.csv"),
        ("onto_input", "is the --measured file itself; a command never writes to a file it"),
    ],
)
def test_cli_write_calibration_errors(tmp_path: Path, case: str, expect: str) -> None:
    src = _csv(tmp_path, ("A100-SXM4-80GB",) if case == "one_gpu" else ("A100-SXM4-80GB", "L40S"))
    dest = src if case == "onto_input" else tmp_path / "c.yaml"
    args = ["--write-calibration", str(dest), "--out", str(tmp_path / "o")]
    if case != "no_measured":
        args = ["--measured", str(src), *args]
    before = src.read_bytes()
    if case == "one_gpu":  # the whole command: one line on stderr, exit 2, nothing written
        r = _run(*args)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and expect in lines[0], r.stderr
        assert not (tmp_path / "o").exists()
    else:
        from coaccel.cli import build_parser

        parsed = build_parser().parse_args(["validate", "gpu", *args])
        with pytest.raises(CoaccelError, match=expect.replace("(", r"\(").replace(")", r"\)")):
            parsed.func(parsed)
    assert not (tmp_path / "c.yaml").exists() and src.read_bytes() == before
