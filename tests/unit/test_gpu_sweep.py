"""The example GPU sweep spec loads through coaccel.dse and its points simulate."""

from __future__ import annotations

from coaccel.arch_configs import path as shipped
from coaccel.dse import load_spec


def test_gpu_decode_sweep_spec_loads_and_covers_context_batch_splits_gpu() -> None:
    loaded = load_spec(shipped("sweeps/gpu_decode_context_batch_splits.yaml"))
    spec = loaded.spec
    assert loaded.kind == "gpu"
    contexts = {w.split("context=")[1].split(",")[0] for w in spec.workloads}
    batches = {w.split("batch=")[1].split(",")[0] for w in spec.workloads}
    splits = {w.split("splits=")[1] if "splits=" in w else "rule" for w in spec.workloads}
    assert contexts == {"4096", "32768", "131072"}
    assert batches == {"1", "8"} and splits == {"rule", "8", "32"}
    assert all(w.startswith("flashdecode:") for w in spec.workloads)
    assert set(spec.parameters) == {"dram", "sm.count"}
