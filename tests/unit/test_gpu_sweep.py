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


def test_ffd_sweep_spec_trades_output_error_against_decode_time(tmp_path) -> None:  # noqa: ANN001
    import numpy as np
    import yaml

    from coaccel.dse import run_sweep
    from coaccel.dse.pareto import pareto_mask
    from coaccel.dse.store import Store

    path = shipped("sweeps/gpu_ffd_keep_context.yaml")
    spec = load_spec(path).spec
    assert all(w.startswith("ffd:") for w in spec.workloads)
    contexts = {w.split("context=")[1].split(",")[0] for w in spec.workloads}
    keeps = {w.split("keep=")[1] for w in spec.workloads if "keep=" in w}
    assert contexts == {"4096", "16384"} and {"0.02", "1"} <= keeps
    assert [o.metric for o in spec.objectives] == ["seconds", "workload.attn_out_rel_err"]
    # a small copy of the spec: 4K context, one GPU, three keep ratios
    doc = yaml.safe_load(path.read_text())
    doc["workloads"] = [
        "ffd:context=4096,keep=0.02", "ffd:context=4096,keep=0.25", "ffd:context=4096,keep=1"
    ]  # fmt: skip
    doc["parameters"] = {"sm.count": [132]}
    small = tmp_path / "ffd.yaml"
    small.write_text(yaml.safe_dump(doc))
    run_sweep(small, tmp_path / "runs.sqlite")
    with Store(tmp_path / "runs.sqlite") as st:
        rows = [r for r in st.rows() if r.status == "ok"]
    assert len(rows) == 3
    vals = np.array([[r.metrics["seconds"][0], r.metrics["workload.attn_out_rel_err"][0]]
                     for r in rows])  # fmt: skip
    front = pareto_mask(vals, ["min", "min"])
    assert front.sum() == 3  # more kept blocks: slower and more accurate
    order = np.argsort(vals[:, 0])
    assert np.all(np.diff(vals[order, 1]) < 0)
