"""The batch path of analytical sweeps (coaccel.dse.batch) equals the per-point path.

Equality is exact: every stored column of every row (metrics as the store's JSON text, so
values, Python types, units and their order; the config digest; feasibility; status and
failure reason) apart from the two timing fields ``started_at`` and ``elapsed_s``. The HBQ
batch model keeps the per-design model's order of floating-point additions and sums its
integer quantities exactly (int64), so no tolerance is needed anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from coaccel import arch_configs
from coaccel.dse import Store, driver, expand, load_spec, run_sweep
from coaccel.dse import batch as batch_mod
from coaccel.dse.batch import evaluate_batch, evaluate_batch_records, to_record
from coaccel.dse.evaluate import evaluate_points
from coaccel.dse.spec import ACCURACY_METRICS

TIMING = (9, 10)  # started_at, elapsed_s: the only columns that may differ

HBQ_SWEEPS = [
    "hbq_pe_psum.yaml",
    "hbq_format_block_array_psum.yaml",
    "hbq_two_stage.yaml",
    "demo_buffers.yaml",
    "small_test.yaml",
]
# The GPU sweeps' workloads run their references (FFD, NOSA) when loaded: minutes in all.
SLOW_SWEEPS = [
    "gpu_offload_keep_context_link.yaml",
    "gpu_ffd_keep_context.yaml",
    "gpu_decode_context_batch_splits.yaml",
    "hbq_search_space.yaml",
]


def _cols(record: tuple) -> tuple:
    return tuple(x for i, x in enumerate(record) if i not in TIMING)


def _args(ls):
    # the limits the driver checks in the workers (accuracy limits are checked after scoring)
    limits = [e.text for e in ls.limits if not set(ACCURACY_METRICS) & set(e.names)]
    return (ls.base_path, ls.spec.mode, ls.digest, limits)


def _check_equal(spec: Path, monkeypatch) -> None:
    """Every point of ``spec``: the batch rows (and records) equal the per-point rows, and
    only the points that fail went the per-point way."""
    ls = load_spec(spec)
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    alone: list[str] = []
    real = batch_mod._evaluate_one

    def counting(*args):
        alone.append(args[-1].point_id)
        return real(*args)

    monkeypatch.setattr(batch_mod, "_evaluate_one", counting)
    fast = evaluate_batch(*_args(ls), points)
    records = evaluate_batch_records(*_args(ls), "main", points)
    slow = evaluate_points(*_args(ls), points)
    assert len(fast) == len(slow) == len(points)
    for f, r, s in zip(fast, records, slow, strict=True):
        assert _cols(f.record()) == _cols(s.record()), s.point_id
        want = dataclasses.replace(s, stage="main", mode=ls.spec.mode).record()
        assert _cols(r) == _cols(want)
    failed = sorted(s.point_id for s in slow if s.status == "failed")
    # each failing point twice (rows and records); every other point took the batch path
    assert sorted(alone) == sorted(failed * 2)
    assert len(failed) < len(points)


@pytest.mark.parametrize("name", HBQ_SWEEPS)
def test_shipped_sweeps_batch_equals_per_point(name, monkeypatch):
    _check_equal(arch_configs.path(f"sweeps/{name}"), monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_SWEEPS)
def test_large_shipped_sweeps_batch_equals_per_point(name, monkeypatch):
    _check_equal(arch_configs.path(f"sweeps/{name}"), monkeypatch)


VARIANTS = """\
version: 1
base: {base}
workloads: [llama-3.2-1b:prefill_256, llama-3.2-1b:decode_1k]
mode: analytical
parameters:
  tiling.act_resident: [true, false]
  buffers.act.double_buffered: [true, false]
  pe_array.weight_shadow_regs: [true, false]
  pe_array.n_pes: [16, 24, 64]
  buffers.act.size_kib: [48, 400]
  freq_mhz: [333, 500]
limits:
  - "area_mm2 <= 1.5"
"""


@pytest.mark.parametrize("base", ["hbq_e_28nm", "mxfp4_28nm", "woq_w4a16_28nm"])
def test_model_variants_batch_equals_per_point(base, tmp_path, monkeypatch):
    # residency, single buffering, shadow registers, decode steps, invalid designs (24 PEs),
    # tiles that do not fit (48 KiB of ACT), other number formats and cost models
    spec = tmp_path / "v.yaml"
    spec.write_text(VARIANTS.format(base=base))
    _check_equal(spec, monkeypatch)


def _stored(path: Path) -> dict[str, tuple]:
    with Store(path, readonly=True) as st:
        return {r.point_id: _cols(r.record()) for r in st.rows()}


FAILING = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_256, llama-3.2-1b:prefill_1024]
mode: analytical
parameters:
  pe_array.n_pes: [16, 24, 32]
  buffers.psum.size_kib: [68, 204]
  freq_mhz: [400, 450, 500]
limits:
  - "area_mm2 <= 1.1"
"""


def test_store_of_batch_run_equals_per_point_run(tmp_path, monkeypatch):
    spec = tmp_path / "f.yaml"
    spec.write_text(FAILING)
    a = run_sweep(spec, tmp_path / "batch.sqlite", workers=2, batch_size=5)
    with monkeypatch.context() as m:
        m.setattr(driver, "supports", lambda *_: False)
        b = run_sweep(spec, tmp_path / "point.sqlite", workers=1)
    assert (a.evaluated, a.failed) == (b.evaluated, b.failed) == (36, 24)
    batch, point = _stored(tmp_path / "batch.sqlite"), _stored(tmp_path / "point.sqlite")
    assert batch == point
    # a design whose config is invalid fails alone, with its one-line reason
    reasons = {r[8] for r in batch.values() if r[7] == "failed"}
    assert reasons == {
        "ConfigError: <override of HbqArchConfig>: buffers.act.size_kib: one ACT buffer slot "
        "(of 2) does not hold one PE step of 128 elements for a 768 x 256 tile (needs 123 KiB)",
        "ConfigError: <override of HbqArchConfig>: psum.block_elems: pe_array.n_pes=24 must be "
        "a multiple of psum.block_elems=16 (each cycle the array writes whole PSUM words); "
        "<override of HbqArchConfig>: tiling.tile_n_channels: must be a multiple of "
        "pe_array.n_pes=24",
    }
    assert sum(r[6] == 1 for r in batch.values()) == 6  # feasible under the area limit


def test_resume_after_interruption_keeps_finished_points(tmp_path, monkeypatch):
    spec = tmp_path / "f.yaml"
    spec.write_text(FAILING)
    db = tmp_path / "r.sqlite"

    def stop(p):
        if p.done >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, db, batch_size=5, progress=stop)
    first = {}
    with Store(db, readonly=True) as st:
        first = {r.point_id: r.record() for r in st.rows()}
    assert len(first) == 10
    sent: list[str] = []
    real = batch_mod.evaluate_batch_records

    def spy(*args):
        sent.extend(p.point_id for p in args[-1])
        return real(*args)

    monkeypatch.setattr(driver, "evaluate_batch_records", spy)
    s = run_sweep(spec, db, batch_size=5)
    assert (s.skipped, s.evaluated) == (10, 26)
    assert not set(sent) & set(first)  # nothing evaluated again
    with Store(db, readonly=True) as st:
        again = {r.point_id: r.record() for r in st.rows()}
    assert all(again[k] == v for k, v in first.items())  # kept as they were, timing included
    with monkeypatch.context() as m:
        m.setattr(driver, "supports", lambda *_: False)
        run_sweep(spec, tmp_path / "point.sqlite")
    assert _stored(db) == _stored(tmp_path / "point.sqlite")


def test_probe_rows_are_not_evaluated_again_on_the_batch_path(tmp_path, monkeypatch):
    sent: list[str] = []
    real = batch_mod.evaluate_batch_records

    def spy(*args):
        sent.extend(p.point_id for p in args[-1])
        return real(*args)

    monkeypatch.setattr(driver, "evaluate_batch_records", spy)
    s = run_sweep(arch_configs.path("sweeps/small_test.yaml"), tmp_path / "p.sqlite")
    assert s.evaluated == 6 and len(sent) == len(set(sent)) == 5  # the probe did one


def test_modes_without_a_batch_evaluator_take_the_per_point_path(monkeypatch):
    ls = load_spec(arch_configs.path("sweeps/small_test.yaml"))
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)[:1]
    called = []
    monkeypatch.setattr(batch_mod, "evaluate_points", lambda *a: called.append(a) or [])
    evaluate_batch(ls.base_path, "cycle", ls.digest, [], points)
    assert len(called) == 1 and not batch_mod.supports(ls.base_path, "cycle")
    assert batch_mod.supports(ls.base_path, "analytical")


def test_gpu_kernels_equal_kernel_traffic():
    from coaccel.sim.gpu_mem import _batch as gb
    from coaccel.sim.gpu_mem import load_workload
    from coaccel.sim.gpu_mem.traffic import kernel_traffic
    from coaccel.simulation import load_arch
    from coaccel.spine.config import override

    _, base = load_arch("gpu/gh200")
    w = load_workload("nosa:T=8192,slots=64,steps=16")
    for changes in ({}, {"dram": "dram/hbm3_h100_sxm.yaml"}, {"sm.count": 100},
                    {"host_link.h2d_bw_gb_per_s": 64, "sm.freq_mhz": 1500}):  # fmt: skip
        arch = override(base, changes)
        assert gb._cached_kernels(w.trace, arch) == kernel_traffic(
            w.trace, arch, fidelity="analytical"
        )


def test_metrics_json_is_json_dumps():
    d = batch_mod._Done(
        pt=None,  # type: ignore[arg-type]
        cfg_digest="",
        names=("a", 'b"%s%', "c"),
        units=("cycle", "%", "1"),
        vals=(3, 0.1, float("inf")),
        extra=(("energy_j", 2.5e-7, "J"),),
        feasible=True,
    )
    want = json.dumps({k: list(v) for k, v in d.metrics().items()})
    assert batch_mod._metrics_json(d) == want and "Infinity" in want
    d = dataclasses.replace(d, vals=(3, 0.1, -2))
    assert batch_mod._metrics_json(d) == json.dumps({k: list(v) for k, v in d.metrics().items()})
    assert math.isfinite(d.vals[1])


def test_records_round_trip():
    ls = load_spec(arch_configs.path("sweeps/small_test.yaml"))
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)[:2]
    (rec, _) = evaluate_batch_records(*_args(ls), "main", points)
    row = batch_mod.from_record(rec)
    assert to_record(row) == rec and row.stage == "main" and row.status == "ok"


IDS = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_256, "llama-3.2-1b:prefill_1024"]
mode: analytical
parameters:
  freq_mhz: [400, 412.5, "450 MHz"]
  pe_array.weight_shadow_regs: [true, false]
  buffers.psum.size_kib: [68, 136.0]
constraints:
  - "buffers.psum.size_kib >= 2 * 34"
"""


@pytest.mark.parametrize("name", [*HBQ_SWEEPS, None])
def test_expanded_point_ids_are_point_id(name, tmp_path):
    # expand() builds the ids' JSON text in parts; they are point_id()'s, whatever the values
    from coaccel.dse.space import point_id

    spec = tmp_path / "ids.yaml"
    spec.write_text(IDS)
    ls = load_spec(arch_configs.path(f"sweeps/{name}") if name else spec)
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    assert points and all(
        p.point_id == point_id(dict(p.params), p.workload, ls.digest) for p in points
    )
