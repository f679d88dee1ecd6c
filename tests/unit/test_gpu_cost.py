"""The cost model on a GPU: priced by its memory traffic alone (no MAC array, no ASIC leakage)."""

from __future__ import annotations

import pytest

import coaccel
from coaccel.cost import evaluate, price
from coaccel.models.gpu import microbench as mb
from coaccel.sim.gpu_mem import load_arch, priced_components
from coaccel.simulation import target

MiB = 1 << 20


def test_a_gpu_is_priced_by_its_dram_bytes() -> None:
    h200 = load_arch("h200")
    ws = 64 * MiB
    # one cold pass reads every byte of the set from HBM once: ws bytes at the HBM3E figure
    # of its config (3.9 pJ/bit, 8 bit per byte)
    r = coaccel.simulate(h200, mb.streaming_read(ws, passes=1), mode="analytical")
    cb = price(priced_components(h200, r))
    assert set(cb.energy_j) == {"dram"}  # no leakage: no priced silicon
    assert cb.energy_j["dram"] == pytest.approx(ws * 3.9 * 8 * 1e-12, rel=1e-12)
    assert cb.energy_sigma_j["dram"] == pytest.approx(
        cb.energy_j["dram"] * h200.dram.uncertainty_pct / 100, rel=1e-12
    )
    assert not cb.area_um2 and cb.pe is None and cb.total_area_um2 == 0.0
    # the registered target prices the same way through coaccel.cost.evaluate
    assert target("gpu").priced_components(h200, r) == priced_components(h200, r)
    assert evaluate(r, h200).energy_j == cb.energy_j


def test_design_alone_has_no_energy() -> None:
    cb = price(priced_components(load_arch("a100_80g"), None))
    assert not cb.energy_j and not cb.area_um2 and cb.pe is None
