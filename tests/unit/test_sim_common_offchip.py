"""The shared off-chip memory model (coaccel.sim.common.offchip) and its DramConfig schema."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coaccel import arch_configs
from coaccel.sim.common import offchip
from coaccel.sim.hbq_asic import load_arch
from coaccel.sim.hbq_asic._hw import hw_params
from coaccel.spine.config import ConfigError, DramConfig, dump_config, load_config, load_config_dict

BASE = {
    "version": 1,
    "type": "ddr4",
    "channels": 4,
    "bw_gb_per_s": 25.6,
    "efficiency": 0.5,
    "latency_ns": 100,
    "energy_pj_per_byte": 20,
    "uncertainty_pct": 10,
    "source": "test figures",
}


def dram(**over) -> DramConfig:
    return load_config_dict({**BASE, **over}, DramConfig, source="t.yaml")


def problems(**over) -> list[str]:
    with pytest.raises(ConfigError) as e:
        dram(**over)
    return [str(p) for p in e.value.problems]


def preset(name: str) -> DramConfig:
    return load_config(arch_configs.path(f"dram/{name}.yaml"), DramConfig)


SIZES = np.array([0, 1, 31, 32, 64, 100, 4096, 10**6, 2**40], dtype=np.int64)


# ---- a flat curve is exactly the old single efficiency ------------------------------------


def test_flat_curve_is_the_single_number_exactly():
    d = preset("lpddr4_28nm_asic")
    assert d.efficiency == 0.7 and d.efficiency_curve[0].efficiency == 0.7
    assert np.all(offchip.efficiency(d, SIZES) == 0.7)
    bpc = offchip.sustained_bytes_per_cycle(d, 500.0, SIZES)
    assert np.all(bpc == 25.6 * 0.7 * 1e3 / 500.0)
    assert offchip.sustained_bytes_per_cycle(d, 500.0) == d.sustained_bytes_per_cycle(500.0)


def test_hbq_timing_constants_come_from_the_shared_model_unchanged():
    arch = load_arch("hbq_e_28nm")
    hw = hw_params(arch)
    assert hw.dram_bytes_per_cycle == 25.6 * 0.7 * 1e3 / 500.0  # the formula HBQ always used
    assert hw.dram_latency_cycles == math.ceil(100 * 500 / 1000.0) == 50
    sizes = np.arange(0, 20_000, 37, dtype=np.int64)
    got = offchip.transfer_cycles(arch.dram, arch.freq_mhz, sizes)
    assert got.tolist() == [hw.dram_cycles(int(n)) for n in sizes]


# ---- the size curve ------------------------------------------------------------------------


def test_curve_points_are_exact_and_interpolated_in_log2_size():
    d = preset("ddr4_kv260")
    pts = d.efficiency_curve
    sizes = np.array([p.transfer_bytes for p in pts])
    assert offchip.efficiency(d, sizes).tolist() == [p.efficiency for p in pts]
    # 128 B lies halfway between 64 B and 256 B in log2: the mean of 0.2 and 0.4
    assert offchip.efficiency(d, 128) == pytest.approx(0.3, rel=1e-15)
    # 512 B is halfway from 256 B (0.4) to 1 KiB (0.55)
    assert offchip.efficiency(d, 512) == pytest.approx(0.475, rel=1e-15)
    # held flat beyond both ends
    assert offchip.efficiency(d, [1, 8, 64]).tolist() == [0.2, 0.2, 0.2]
    assert offchip.efficiency(d, [4096, 2**30]).tolist() == [0.65, 0.65]
    effs = offchip.efficiency(d, np.arange(1, 10_000))
    assert np.all(np.diff(effs) >= 0)


def test_transfer_cycles_by_hand_on_the_kv260_curve():
    d = preset("ddr4_kv260")
    # 64 B at 0.2 of 19.2 GB/s, 250 MHz: 15.36 B/cycle -> ceil(4.17) = 5
    # 4 KiB at 0.65: 49.92 B/cycle -> ceil(82.05) = 83; 1 MiB: ceil(21005.1) = 21006
    got = offchip.transfer_cycles(d, 250.0, [0, 64, 4096, 2**20])
    assert got.tolist() == [0, 5, 83, 21006]
    assert got.dtype == np.int64
    # a short transfer is slower per byte than a long one
    per_byte = offchip.transfer_cycles(d, 250.0, [64, 4096]) / np.array([64, 4096])
    assert per_byte[0] > per_byte[1]
    grid = offchip.transfer_cycles(d, 250.0, np.array([[64, 128], [256, 512]]))
    assert grid.shape == (2, 2)


def test_latency_cycles_rounds_up():
    d = dram(latency_ns=100)
    assert offchip.latency_cycles(d, 500) == 50
    assert offchip.latency_cycles(d, 333) == math.ceil(33.3)
    assert offchip.latency_cycles(dram(latency_ns=0), 1000) == 0


@pytest.mark.parametrize(
    ("call", "msg"),
    [
        (lambda d: offchip.efficiency(d, [-1]), "transfer_bytes must be >= 0"),
        (lambda d: offchip.efficiency(d, [1.5]), "transfer_bytes must be whole numbers"),
        (lambda d: offchip.transfer_cycles(d, 0, [64]), "freq_mhz must be > 0"),
        (lambda d: offchip.sustained_bytes_per_cycle(d, -5.0), "freq_mhz must be > 0"),
        (lambda d: offchip.channel_of(d, [-256]), "addresses must be >= 0"),
        (lambda d: offchip.row_of(d, [0]), "the open-row model is off"),
        (lambda d: offchip.row_hits(d, [0]), "the open-row model is off"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, msg):
    with pytest.raises(ValueError, match=msg):
        call(dram())


# ---- channels and open rows ----------------------------------------------------------------


def test_channel_interleave():
    d = dram(channels=4, interleave_bytes=256)
    addrs = [0, 255, 256, 511, 512, 1023, 1024, 1280]
    assert offchip.channel_of(d, addrs).tolist() == [0, 0, 1, 1, 2, 3, 0, 1]
    assert offchip.channel_of(dram(channels=1), [0, 10**12]).tolist() == [0, 0]


def test_open_rows_hit_and_miss_per_channel():
    d = dram(
        channels=2,
        interleave_bytes=256,
        row_buffer_bytes=1024,
        row_hit_penalty_ns=2,
        row_miss_penalty_ns=30,
    )
    # channel-local address = (a // 512) * 256 + a % 256; row = local // 1024
    assert offchip.row_of(d, [0, 256, 512, 2047, 2048, 4096]).tolist() == [0, 0, 0, 0, 1, 2]
    seq = [0, 256, 100, 2048, 300, 868, 2304]
    # ch:  0    1    0    0     1    1    1
    # row: 0    0    0    1     0    0    1
    hits = offchip.row_hits(d, seq)
    assert hits.tolist() == [False, False, True, False, True, True, False]
    pen = offchip.row_penalty_cycles(d, 1000.0, seq)  # 1 GHz: 2 and 30 cycles
    assert pen.tolist() == [30, 30, 2, 30, 2, 2, 30]
    assert offchip.row_hits(d, np.array([], dtype=np.int64)).tolist() == []
    with pytest.raises(ValueError, match="1-D"):
        offchip.row_hits(d, [[0, 1]])


# ---- the schema ----------------------------------------------------------------------------


def test_curve_round_trips_and_accepts_units():
    d = dram(
        efficiency=[
            {"transfer_bytes": "64 B", "efficiency": 0.3},
            {"transfer_bytes": "1 KiB", "efficiency": 0.9},
        ]
    )
    assert [(p.transfer_bytes, p.efficiency) for p in d.efficiency_curve] == [
        (64, 0.3),
        (1024, 0.9),
    ]
    assert d.streaming_efficiency == 0.9
    assert load_config_dict(dump_config(d), DramConfig) == d


def test_curve_problems_are_reported_together():
    got = problems(
        efficiency=[
            {"transfer_bytes": 256, "efficiency": 0.5},
            {"transfer_bytes": 64, "efficiency": 0.7},
            {"transfer_bytes": 64, "efficiency": 0.8},
        ],
        row_miss_penalty_ns=20,
    )
    assert got == [
        "t.yaml: efficiency[1].transfer_bytes: transfer sizes must increase strictly: 64 B after "
        "256 B",
        "t.yaml: efficiency[2].transfer_bytes: transfer sizes must increase strictly: 64 B after "
        "64 B",
        "t.yaml: row_miss_penalty_ns: row_miss_penalty_ns needs row_buffer_bytes (the open-row "
        "model is off without it)",
    ]


def test_curve_point_out_of_range_names_the_point():
    got = problems(
        efficiency=[
            {"transfer_bytes": 64, "efficiency": 0.5},
            {"transfer_bytes": 128, "efficiency": 1.5},
        ]
    )
    assert got == ["t.yaml: efficiency[1].efficiency: 1.5 is out of range: must be > 0 and <= 1"]
    assert problems(efficiency=[]) == [
        "t.yaml: efficiency: an efficiency curve needs at least one point"
    ]
    typo, missing = problems(efficiency=[{"transfer_bytes": 64, "efficency": 0.5}])
    assert typo.startswith("t.yaml: efficiency[0].efficency: unknown key 'efficency'")
    assert missing == "t.yaml: efficiency[0].efficiency: missing required key"
    # a single number is checked as a number (not as a failed curve)
    assert problems(efficiency=0) == ["t.yaml: efficiency: 0 is out of range: must be > 0 and <= 1"]


def test_new_dram_types_and_fields_load():
    for t in ("gddr6", "gddr6x", "lpddr5x"):
        assert dram(type=t).type == t
    d = dram(interleave_bytes="4 KiB", row_buffer_bytes="2 KiB", row_miss_penalty_ns="0.03 us")
    assert (d.interleave_bytes, d.row_buffer_bytes, d.row_miss_penalty_ns) == (4096, 2048, 30.0)
    d0 = dram()
    assert (d0.interleave_bytes, d0.row_buffer_bytes) == (256, None)
