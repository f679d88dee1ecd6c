"""NOSA's and FFD's headlines as whole-model decode throughput (coaccel.targets.gpu.e2e)."""

import dataclasses

import pytest

from coaccel.sim.gpu_mem import load_arch
from coaccel.sim.gpu_mem.decode_step import decode_step
from coaccel.spine.workload import load_workload
from coaccel.targets.gpu.e2e import (
    _cold_mean_step,
    e2e_rows,
    ffd_attention,
    ffd_throughput,
    nosa_throughput,
)
from coaccel.validate.published import load_published


@pytest.fixture(scope="module")
def h100():
    return load_arch("h100_sxm")


def test_ffd_attention_reads_less_as_it_keeps_less(h100):
    m = load_workload("llama-3.1-8b").model
    att = {k: decode_step(h100, m, 65536, 1, attention=ffd_attention(k)).by_class()["attention"]
           for k in (1.0, 0.25, 0.05)}  # fmt: skip
    dense = decode_step(h100, m, 65536, 1).by_class()["attention"]
    # keeping every block: V, the 2-bit key codes and the 8-bit key residual (FFD's key
    # storage, 10 of dense's 16 bits per key element)
    assert dense[1] * 0.75 < att[1.0][1] < dense[1] * 0.85
    assert att[1.0][1] > att[0.25][1] > att[0.05][1]
    assert att[0.05][0] < dense[0] / 4


def test_ffd_end_to_end_is_bounded_by_the_attention_share(h100):
    f = ffd_throughput(h100, 262144, 0.02, mode="graph")
    assert 1.0 < f["ratio"] < f["attention_ratio"]
    # the host-bound python mode gains less than graph replay from the same kernels
    p = ffd_throughput(h100, 262144, 0.02, mode="python")
    assert p["ratio"] < f["ratio"]
    assert p["attention_ratio"] == pytest.approx(f["attention_ratio"])


def test_nosa_paper_ratio_includes_the_batch():
    n = nosa_throughput(load_arch("a100_80g"), steps=12)
    assert n["paper_ratio"] == pytest.approx(n["nosi_tps"] / n["full_tps"])
    assert n["same_batch_ratio"] == pytest.approx(n["nosi_tps"] / n["full_same_batch_tps"])
    # a 4x larger batch buys most of the paper's ratio on a weight-bound step
    assert n["paper_ratio"] > 1.5 * n["same_batch_ratio"]
    assert n["nosi_attention_s"] > 0 and n["full_attention_s"] > 0
    assert n["nosi_host_gb"] > 0 == n["full_host_gb"]  # NOSI fetches missed blocks over PCIe


def test_cold_mean_step_averages_host_traffic_and_shares_occasional_kernels():
    from coaccel.sim.gpu_mem.decode_step import _traffic

    a = load_arch("a100_80g")
    k = _traffic(a, "fetch", ctas=10, dram_read=1000, dram_write=0, l2_hit_bytes=0,
                 run_bytes=128, tile_bytes=128)  # fmt: skip
    warm = dataclasses.replace(k, dram_read_bytes=0, ctas=30, host_bytes=300)
    tail = _traffic(a, "tail", ctas=4, dram_read=400, dram_write=0, l2_hit_bytes=0,
                    run_bytes=128, tile_bytes=128)  # fmt: skip
    out = _cold_mean_step([dataclasses.replace(k, host_bytes=100), tail, warm], 2)
    fetch, t = out
    assert fetch.dram_read_bytes == 1000 and fetch.host_bytes == 200 and fetch.ctas == 20
    assert t.dram_read_bytes == 200  # once in two steps


def test_rows_say_predicted_and_synthetic():
    rows, notes = e2e_rows(load_published("gpu"), quick=True)
    assert {r.group for r in rows} == {"e2e"}
    assert all(r.fit == "predicted" and r.data == "synthetic" for r in rows)
    assert any("batch 16 vs FullAttn batch 4" in r.name and r.paper == 5.04 for r in rows)
    assert any("FFD" in r.name and r.paper == 2.37 for r in rows)
    assert notes
