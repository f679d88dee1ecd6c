"""GPU architecture configs: shipped files load, figures match sources, bad files fail once."""

from __future__ import annotations

from pathlib import Path

import pytest

from coaccel.sim.gpu_mem import ARCH_NAMES, load_arch
from coaccel.sim.gpu_mem.config import arch_path
from coaccel.spine.config import ConfigError


def test_shipped_gpus() -> None:
    assert set(ARCH_NAMES) == {
        "a100_40g",
        "a100_80g",
        "gh200",
        "h100_sxm",
        "h200",
        "l40s",
        "rtx_a6000",
    }
    for name in ARCH_NAMES:
        cfg = load_arch(name)
        assert cfg.kind == "gpu" and cfg.name == name
        # every figure of the GPU block carries a source
        for key in ("sm.count", "sm.freq_mhz", "l2.capacity_mib", "l2.near_latency_cycles"):
            assert key in cfg.sources, (name, key)


def test_published_figures() -> None:
    h200 = load_arch("h200")
    # [NV-H200] 4.8 TB/s peak; [S12] 3.89 TB/s measured plateau = 81 %
    assert h200.dram.bw_gb_per_s == 4800.0
    assert abs(h200.dram.sustained_bw_gb_per_s - 3890) < 0.01 * 3890
    a100 = load_arch("a100_80g")
    assert abs(a100.dram.sustained_bw_gb_per_s - 1730) < 0.01 * 1730
    assert (a100.l2.near_latency_cycles, a100.l2.far_latency_cycles) == (211, 424)
    # dense BF16 peak from the per-SM figure: 312 TFLOPS ([NV-A100]) within 0.1 %
    peak = a100.sm.count * a100.sm.tensor_flop_per_cycle_per_sm * a100.sm.freq_mhz * 1e6
    assert abs(peak - 312e12) < 0.001 * 312e12
    gh = load_arch("gh200")
    assert gh.host_link.type == "nvlink_c2c" and gh.host_dram is not None
    assert gh.host_dram.type == "lpddr5x"
    # measured C2C plateaus ([GH200-KTH] 375 / 297 GB/s)
    h2d = gh.host_link.h2d_bw_gb_per_s * gh.host_link.efficiency[-1].efficiency
    assert abs(h2d - 375) < 1
    assert abs(h2d * gh.host_link.d2h_efficiency_factor - 297) < 1
    assert load_arch("rtx_a6000").dram.type == "gddr6"


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = arch_path("h200").read_text()
    assert old in text
    p = tmp_path / "bad.yaml"
    p.write_text(
        text.replace(old, new).replace(
            "dram/hbm3e_h200.yaml",
            str(arch_path("h200").parent.parent / "dram" / "hbm3e_h200.yaml"),
        )
    )
    return p


def test_unknown_key_names_file_key_and_choices(tmp_path: Path) -> None:
    p = _variant(tmp_path, "  ways: 16\n", "  wayz: 16\n")
    with pytest.raises(ConfigError) as e:
        load_arch(p)
    msg = str(e.value)
    assert str(p) in msg and "l2.wayz" in msg and "ways" in msg


def test_cross_field_rules_reported_together(tmp_path: Path) -> None:
    p = _variant(tmp_path, "effective_capacity_mib: 44 MiB", "effective_capacity_mib: 60 MiB")
    p.write_text(p.read_text().replace("far_latency_cycles: 475", "far_latency_cycles: 100"))
    with pytest.raises(ConfigError) as e:
        load_arch(p)
    keys = {pr.key for pr in e.value.problems}
    assert {"l2.effective_capacity_mib", "l2.far_latency_cycles"} <= keys


def test_bad_unit(tmp_path: Path) -> None:
    p = _variant(tmp_path, "freq_mhz: 1980 MHz", "freq_mhz: 1980 GB")
    with pytest.raises(ConfigError) as e:
        load_arch(p)
    assert "sm.freq_mhz" in str(e.value)


def test_source_keys_must_name_fields(tmp_path: Path) -> None:
    p = _variant(tmp_path, "  sm.count:", "  sm.cout:")
    with pytest.raises(ConfigError) as e:
        load_arch(p)
    assert "sources.sm.cout" in str(e.value)
