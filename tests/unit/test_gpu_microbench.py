"""Microbenchmark traces: bytes and geometry by closed form; the GPU kind in the CLI and sweeps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coaccel.arch_configs import path as shipped
from coaccel.models.gpu import microbench as mb
from coaccel.sim.gpu_mem import load_workload


def test_splitk_traffic_bytes_and_grid() -> None:
    T, B = 5000, 2  # a partial last tile
    tr = mb.splitk_decode_traffic(T, batch=B, splits=4)
    # K and V: 2 x Hkv x D x 2 B = 4 KiB per token per sequence ([DERIVED] 8 x 128 x 2 x 2)
    k = tr.total_bytes(space="HBM", rw="r")
    kv = 4096 * T * B
    q = 4 * B * 32 * 128 * 2  # every split's CTA reads its query group
    parts = B * 32 * 4 * (128 * 4 + 8)  # fp32 partial O and (m, l) per split, read back
    assert k == kv + q + parts
    assert tr.total_bytes(space="HBM", rw="w") == parts + B * 32 * 128 * 2
    begins = tr.events[tr.events["kind"] == 0]
    assert begins["ctas"].tolist() == [4 * B * 8, B * 32]
    # every K row is one 256-B head row strided by Hkv x 256 B
    names = tr.table("tensor")
    krec = tr.memory[tr.memory["tensor"] == names.index("K")]
    assert set(krec["nbytes"].tolist()) == {256} and set(krec["stride"].tolist()) == {2048}
    assert int(krec["count"].sum()) == T * B * 8


def test_automatic_split_count() -> None:
    tr = mb.splitk_decode_traffic(131072, sms=132)
    grid = int(tr.events[tr.events["kind"] == 0]["ctas"][0])
    # ceil(2 x 132 / 8) = 33 splits asked; a split is a whole number of 128-token tiles:
    # ceil(1024 / 33) = 32 tiles each, so 1024 / 32 = 32 splits x 8 KV heads
    assert grid == 32 * 8


def test_pointer_chase_is_one_cycle() -> None:
    tr = mb.pointer_chase(64 * 128, steps=64, seed=3)
    mem = tr.memory
    warm = mem[mem["kernel"] == 0]
    addrs = warm["addr"] // 128
    assert sorted(addrs.tolist()) == list(range(64))  # a permutation: each line once
    chase = mem[mem["kernel"] == 1]
    assert chase["addr"].tolist() == warm["addr"].tolist()  # the same cycle again
    assert np.all(chase["dep"][1:] == chase["seq"][:-1]) and chase["dep"][0] == -1


def test_copies_and_zero_copy() -> None:
    tr = mb.host_copy(1 << 20, direction="d2h", pinned=False)
    assert tr.table("kernel_name")[1] == "memcpy_d2h_pageable"
    assert tr.total_bytes(space="HBM", rw="r") == tr.total_bytes(space="HOST", rw="w") == 1 << 20
    zc = mb.zero_copy_read(1 << 20, row_bytes=256, stride_bytes=2048)
    assert zc.total_bytes(space="HOST", rw="r") == 1 << 20
    with pytest.raises(ValueError):
        mb.host_copy(10, direction="sideways")


def test_specs_parse() -> None:
    wl = load_workload("splitk:T=2048,B=2,splits=4")
    assert wl.trace.meta["workload"]["context"] == 2048
    assert wl.trace.meta["workload"]["batch"] == 2
    assert load_workload("chase:working_set_bytes=1e6,steps=10,warm=0").trace.memory.size == 10


def test_cli_runs_the_gpu_kind() -> None:
    exe = Path(sys.executable).parent / "coaccel"
    ok = subprocess.run(
        [str(exe), "sim", "h200", "--workload", "splitk:T=2048", "--analytical", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert '"target": "gpu"' in ok.stdout
    bad = subprocess.run(
        [str(exe), "sim", "h200", "--workload", "splitk:T=-5"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_sweep_spec_runs(tmp_path: Path) -> None:
    from coaccel.dse import Store, run_sweep

    spec = shipped("sweeps/gpu_decode_context_batch_splits.yaml")
    s = run_sweep(spec, tmp_path / "s.sqlite")
    assert (s.total, s.failed) == (15 * 3 * 2, 0)
    rows = list(Store(tmp_path / "s.sqlite").rows())
    # at a fixed SM count, a faster memory system never slows a point down
    # (HBM2e 2.04 TB/s < HBM3 3.35 TB/s < HBM3e 4.8 TB/s)
    order = ["dram/hbm2e_a100_80g.yaml", "dram/hbm3_h100_sxm.yaml", "dram/hbm3e_h200.yaml"]
    by = {(r.workload, r.params["sm.count"], r.params["dram"]): r.metrics["seconds"][0]
          for r in rows}  # fmt: skip
    assert len(by) == 90
    # priced by its HBM traffic: energy present, area not applicable to a GPU
    assert all(r.metrics["energy_j"][0] > 0 and "area_mm2" not in r.metrics for r in rows)
    from coaccel.dse import load_spec
    from coaccel.dse.analysis import point_breakdown

    pb = point_breakdown(load_spec(spec), rows[0])
    assert pb.energy_matches and [(f.component, f.quantity) for f in pb.totals] == [
        ("total", "energy")
    ]
    for (w, sms, dram), sec in by.items():
        k = order.index(dram)
        if k + 1 < len(order):
            assert by[(w, sms, order[k + 1])] <= sec + 1e-15
