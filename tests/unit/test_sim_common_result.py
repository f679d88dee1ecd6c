"""The target-independent result base (coaccel.sim.common.result) and HbqSimStats built on it."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from coaccel.sim.common import BufferAccess, OffchipAccess, SimResult
from coaccel.sim.hbq_asic import HbqSimStats, simulate
from coaccel.sim.hbq_asic.stats import DramAccess

ROOT = Path(__file__).resolve().parents[2]


def generic() -> SimResult:
    return SimResult(
        target="deltallm_fpga",
        arch="kv260_vp",
        workload="toy:decode",
        mode="cycle",
        config_digest="0" * 64,
        freq_mhz=250.0,
        cycles=1000,
        seconds=4e-6,
        resources={"lanes": {"busy": 700, "dram_bandwidth": 300}, "dma": {"busy": 900}},
        buffers={"KV": BufferAccess(10, 2, 640, 128, 512)},
        offchip=OffchipAccess(3, 1, 4096, 512, {"k": 3000, "v": 1608}),
        notes=("a note",),
    )


def test_metrics_are_flat_with_units():
    m = generic().metrics()
    assert list(m) == [
        "cycles",
        "seconds",
        "freq_mhz",
        "resource.lanes.busy",
        "resource.lanes.dram_bandwidth",
        "resource.dma.busy",
        "buffer.KV.reads",
        "buffer.KV.writes",
        "buffer.KV.read_bytes",
        "buffer.KV.write_bytes",
        "buffer.KV.word_bits",
        "offchip.reads",
        "offchip.writes",
        "offchip.read_bytes",
        "offchip.write_bytes",
        "offchip.total_bytes",
        "offchip.tensor.k",
        "offchip.tensor.v",
    ]
    assert m["cycles"] == (1000, "cycle")
    assert m["seconds"] == (4e-6, "s")
    assert m["freq_mhz"] == (250.0, "MHz")
    assert m["resource.lanes.dram_bandwidth"] == (300, "cycle")
    assert m["buffer.KV.reads"] == (10, "access")
    assert m["buffer.KV.write_bytes"] == (128, "B")
    assert m["offchip.read_bytes"] == (4096, "B")
    assert m["offchip.total_bytes"] == (4608, "B")
    assert m["offchip.reads"] == (3, "transfer")


def test_to_dict_is_json_and_the_record_is_frozen():
    r = generic()
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["target"] == "deltallm_fpga" and d["offchip"]["by_tensor"] == {"k": 3000, "v": 1608}
    assert d["buffers"]["KV"]["word_bits"] == 512 and d["notes"] == ["a note"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.cycles = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        SimResult("x")  # type: ignore[misc]  # keywords only


# ---- HbqSimStats on the base ---------------------------------------------------------------

OLD_KEYS = {
    "arch", "workload", "mode", "config_digest", "workload_digest", "freq_mhz", "cycles",
    "seconds", "macs", "peak_macs_per_cycle", "utilisation", "stall_cycles", "buffers", "dram",
    "by_name", "tiles", "layers", "layers_simulated", "notes",
}  # fmt: skip


@pytest.fixture(scope="module")
def hbq() -> HbqSimStats:
    return simulate("hbq_e_28nm", "llama-3.2-3b:decode_2k", mode="analytical")


def test_hbq_stats_is_a_sim_result(hbq):
    assert isinstance(hbq, SimResult)
    assert hbq.target == "hbq_asic"
    assert hbq.resources == {"pe_array": hbq.stall_cycles}
    assert hbq.offchip is hbq.dram and DramAccess is OffchipAccess
    d = hbq.to_dict()
    assert OLD_KEYS <= set(d) and set(d) - OLD_KEYS == {"target", "resources", "offchip"}
    assert d["offchip"] == d["dram"] and d["resources"] == {"pe_array": d["stall_cycles"]}
    assert json.loads(json.dumps(d)) == d


def test_hbq_metrics_agree_with_the_fields(hbq):
    m = hbq.metrics()
    assert m["cycles"] == (hbq.cycles, "cycle")
    assert m["seconds"] == (hbq.seconds, "s")
    assert m["macs"] == (hbq.macs, "MAC")
    assert m["utilisation"] == (hbq.utilisation, "1")
    assert m["offchip.read_bytes"] == (hbq.dram.read_bytes, "B")
    assert m["buffer.ACT.reads"] == (hbq.buffers["ACT"].reads, "access")
    busy = [v for k, (v, u) in m.items() if k.startswith("resource.pe_array.")]
    assert sum(busy) == hbq.cycles
    for name, k in hbq.by_name.items():
        assert m[f"segment.{name}.cycles"] == (k.cycles, "cycle")
        assert m[f"segment.{name}.offchip.read_bytes"] == (k.dram_read_bytes, "B")
    assert m["tile.tile_m"] == (hbq.tiles["tile_m"], "token")
    for key, (value, unit) in m.items():
        assert isinstance(value, (int, float)) and not isinstance(value, bool), key
        assert isinstance(unit, str) and unit, key


def test_hbq_stats_build_from_the_old_keywords_and_reject_a_second_offchip(hbq):
    kw = {f.name: getattr(hbq, f.name) for f in dataclasses.fields(hbq)}
    old = {k: v for k, v in kw.items() if k in OLD_KEYS}
    assert HbqSimStats(**old) == hbq
    other = OffchipAccess(0, 0, 0, 0, {})
    with pytest.raises(ValueError, match="offchip and dram must be the same record"):
        HbqSimStats(**old, offchip=other)


def test_no_import_cycle_between_simulate_and_analytical():
    def imports(name: str) -> set[str]:
        tree = ast.parse((ROOT / "sim" / "hbq_asic" / name).read_text())
        return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}

    assert "_simulate" not in imports("analytical.py")
    assert "_simulate" not in imports("_result.py") and "analytical" not in imports("_result.py")
    assert {"_result", "analytical"} <= imports("_simulate.py")
