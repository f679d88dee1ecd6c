"""Calibration: the script's CSV schema, the CSV reader, and the closed-form fit of a GPU
config on the committed example CSVs (published gpu-benches series, [S12])."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from coaccel.sim.gpu_mem import load_arch
from coaccel.spine.errors import CoaccelError
from coaccel.targets.gpu import fit as gpu_fit
from coaccel.targets.gpu.fit import fit_parameters, read_calibration_csv

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "arch_configs" / "gpu" / "measured"
A100_CSV = DATA / "a100_80g_gpu_benches.csv"
H200_CSV = DATA / "h200_gpu_benches.csv"


def _script():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(
        "gpu_calibration", ROOT / "benchmarks" / "gpu_calibration.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_and_reader_share_one_schema() -> None:
    mod = _script()
    assert mod.CSV_COLUMNS == gpu_fit.CSV_COLUMNS
    assert mod.EXPERIMENTS == gpu_fit.EXPERIMENTS
    assert mod.CSV_SCHEMA_VERSION == gpu_fit.CSV_SCHEMA_VERSION
    assert gpu_fit.row_fields() == gpu_fit.CSV_COLUMNS


def test_script_stops_with_one_line_without_cuda(tmp_path, capsys) -> None:  # noqa: ANN001
    mod = _script()
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present: the guard is not reachable")
    except ImportError:
        pass
    assert mod.run(["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpu_calibration: error: ")
    assert "PyTorch is not installed" in err[0] or "no CUDA device" in err[0]
    assert mod.run(["--out", str(tmp_path), "--sections", "stream,bogus"]) == 2
    assert "unknown section(s) bogus; valid: stream, latency, host, decode, overlap" in (
        capsys.readouterr().err
    )


def test_reader_rejects_bad_files_naming_line_and_column(tmp_path) -> None:  # noqa: ANN001
    good = A100_CSV.read_text().splitlines()
    p = tmp_path / "c.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(CoaccelError, match="line 1: header .* is not the calibration CSV"):
        read_calibration_csv(p)
    p.write_text("\n".join([good[0], good[1].replace("stream_read", "stream_reed", 1)]) + "\n")
    with pytest.raises(CoaccelError, match="line 2: experiment 'stream_reed' is unknown; valid:"):
        read_calibration_csv(p)
    cells = good[1].split(",")
    cells[2] = "-5"
    p.write_text("\n".join([good[0], ",".join(cells)]) + "\n")
    with pytest.raises(CoaccelError, match="line 2: size_bytes = -5 must be >= 0"):
        read_calibration_csv(p)
    cells = good[1].split(",")
    cells[9] = "fast"
    p.write_text("\n".join([good[0], ",".join(cells)]) + "\n")
    with pytest.raises(CoaccelError, match="line 2: time_s = 'fast' is not a number"):
        read_calibration_csv(p)
    with pytest.raises(CoaccelError, match="no such calibration CSV"):
        read_calibration_csv(tmp_path / "missing.csv")


def test_example_rows_all_cite_a_source() -> None:
    for path in (A100_CSV, H200_CSV):
        rows = read_calibration_csv(path)
        assert rows and all(r.source.startswith("[S12] ") for r in rows)


def _fitted(csv: Path, gpu: str) -> dict[str, gpu_fit.FittedParam]:
    _, params, _ = fit_parameters(load_arch(gpu), read_calibration_csv(csv))
    return {p.key: p for p in params}


def test_a100_fit_recovers_the_published_anchors() -> None:
    """Expected values are the figures gpu-benches publishes for the A100-SXM4-80GB ([S12]):
    DRAM read plateau 1.73 TB/s of 2.039 peak, L2 ~5.4 TB/s falling after ~28 MB, pointer
    chase L1 36 / near L2 211 / far L2 ~424 / DRAM ~570 cycles at 1410 MHz; and the V100 PCIe
    cudaMemcpy curve of its README: ~30 us per call, 12.35 GB/s plateau."""
    p = _fitted(A100_CSV, "a100_80g")
    assert p["dram.efficiency"].after == pytest.approx(1730 / 2039, rel=0.01)
    assert p["l2.hit_bw_gb_per_s"].after == pytest.approx(5400, rel=0.01)
    assert p["l2.effective_capacity_mib"].after == 28160 / 1024  # last row before the fall
    assert p["sm.l1_latency_cycles"].after == 36
    assert p["l2.near_latency_cycles"].after == 211
    assert p["l2.far_latency_cycles"].after == 424
    assert p["dram.latency_ns"].after == pytest.approx(570 / 1.41, rel=0.005)
    assert 25 <= p["host_link.copy_fixed_us"].after <= 35
    eff = p["host_link.efficiency"].after
    assert eff * load_arch("a100_80g").host_link.h2d_bw_gb_per_s == pytest.approx(12.35, rel=0.02)


def test_h200_fit_plateaus_and_analog_latencies() -> None:
    """H200 series of [S12] gpu-l2-cache/h200.txt: 3.89 TB/s DRAM (81 % of 4.8), L2 9.7-10.2
    TB/s, knee after ~44 MB; latencies from the H100 PCIe analog (151 ns near L2 = 265 cycles
    at 1755 MHz) converted at the H200 config's 1980 MHz."""
    p = _fitted(H200_CSV, "h200")
    assert p["dram.efficiency"].after == pytest.approx(3888 / 4800, rel=0.002)
    assert 9700 <= p["l2.hit_bw_gb_per_s"].after <= 10200
    assert p["l2.effective_capacity_mib"].after == 44032 / 1024
    near_ns = 265.5 / 1.755
    assert p["l2.near_latency_cycles"].after == round(near_ns * 1.98)
    assert "host_link.copy_fixed_us" not in p  # no link rows in this CSV


def test_fitted_config_loads_back_and_keeps_rules(tmp_path) -> None:  # noqa: ANN001
    import yaml

    from coaccel.sim.gpu_mem import GpuArchConfig
    from coaccel.spine.config import dump_config, load_config

    arch = load_arch("a100_80g")
    changes, params, _ = fit_parameters(arch, read_calibration_csv(A100_CSV))
    from coaccel.spine.config import override

    fitted = override(arch, changes)
    path = tmp_path / "a100_fitted.yaml"
    path.write_text(yaml.safe_dump(dump_config(fitted), sort_keys=False))
    again = load_config(path, GpuArchConfig)
    assert again == fitted
    assert math.isclose(again.l2.effective_capacity_mib, 27.5)
