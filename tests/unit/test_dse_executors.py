"""Executors: a real Dask LocalCluster gives exactly the local pool's rows; the Slurm path
goes through dask-jobqueue (imported only then) and says so when it is missing; bad scheduler
and executor keys are ConfigErrors naming the key."""

from __future__ import annotations

import sys
import types

import pytest
from testkit import require_module

from coaccel import arch_configs
from coaccel.cli import main
from coaccel.dse import DaskExecutor, Store, load_spec, open_executor, run_sweep
from coaccel.spine.config import ConfigError
from coaccel.spine.errors import CoaccelError

SMALL = arch_configs.path("sweeps/small_test.yaml")

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_256, llama-3.2-1b:prefill_1024]
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136, 204]
  freq_mhz: [400, 500]
EXTRA
"""


def _rows(db):
    with Store(db) as st:
        return {r.point_id: r for r in st.rows()}


def _assert_same_rows(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        assert (
            x.workload, x.params, x.config_digest, x.spec_digest, x.metrics, x.feasible,
            x.status, x.stage, x.mode, x.version,
        ) == (
            y.workload, y.params, y.config_digest, y.spec_digest, y.metrics, y.feasible,
            y.status, y.stage, y.mode, y.version,
        )  # fmt: skip
        if x.error:
            assert x.error.splitlines()[-1] == y.error.splitlines()[-1]


@pytest.fixture(scope="module")
def cluster():
    require_module("distributed", "pip install -e '.[dist]'")
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


@pytest.mark.dist
def test_dask_local_cluster_equals_local_pool(tmp_path, cluster):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("EXTRA", ""))
    ls = load_spec(spec)
    pool = run_sweep(ls, tmp_path / "pool.sqlite", workers=2)
    dask = run_sweep(ls, tmp_path / "dask.sqlite", scheduler=cluster.scheduler_address)
    # the spec's scheduler: key works the same, and a resumed run has nothing to do
    spec2 = tmp_path / "s2.yaml"
    spec2.write_text(SPEC.replace("EXTRA", f"scheduler: {cluster.scheduler_address}"))
    again = run_sweep(spec2, tmp_path / "dask.sqlite")
    assert (pool.total, pool.evaluated, pool.failed) == (dask.total, dask.evaluated, dask.failed)
    assert pool.total == 36 and pool.failed > 0  # PSUM 204 KiB with a 96 KiB ACT: refused
    _assert_same_rows(_rows(tmp_path / "pool.sqlite"), _rows(tmp_path / "dask.sqlite"))
    assert (again.evaluated, again.skipped) == (0, 36)


@pytest.mark.dist
def test_dask_batches_like_the_pool(tmp_path, monkeypatch, cluster):
    from coaccel.dse import driver

    # Per-point batches (the batch path sends designs in larger tasks, test_dse_batch.py).
    monkeypatch.setattr(driver, "supports", lambda *_: False)
    seen: list[int] = []
    import coaccel.dse.executors as ex_mod

    real_run = ex_mod.DaskExecutor.run

    def spy(self, fn, args, batches):
        seen.extend(len(b) for b in batches)
        return real_run(self, fn, args, batches)

    monkeypatch.setattr(ex_mod.DaskExecutor, "run", spy)
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("EXTRA", ""))
    run_sweep(spec, tmp_path / "d.sqlite", scheduler=cluster.scheduler_address)
    # 36 points, 2 workers: ceil(36 / 16) = 3 points per batch, as on the process pool; the
    # size estimate's probe evaluated the first design's 2 points already, so the first batch
    # sends the third only
    assert seen == [1] + [3] * 11


def test_unreachable_scheduler(tmp_path):
    require_module("distributed", "pip install -e '.[dist]'")
    with pytest.raises(CoaccelError, match=r"scheduler 'tcp://127.0.0.1:9': cannot connect"):
        DaskExecutor("tcp://127.0.0.1:9", timeout_s=1.0)


class _FakeSlurmCluster:
    """Stands in for dask_jobqueue.SLURMCluster: records its arguments and its scale call, and
    hands out the scheduler of a running local cluster (the test's) as its own."""

    made: list[dict] = []
    local = None
    closed = 0

    def __init__(self, **kwargs):
        type(self).made.append(kwargs)
        self.scheduler_address = type(self).local.scheduler_address
        self.scale_calls: list[dict] = []

    def scale(self, **kw):
        self.scale_calls.append(kw)
        type(self).made.append({"scale": kw})

    def __getattr__(self, name):  # the rest of the cluster interface, for Client(cluster)
        return getattr(type(self).local, name)

    def close(self):
        type(self).closed += 1  # the test's cluster stays up


@pytest.mark.dist
def test_slurm_executor_through_dask_jobqueue(tmp_path, monkeypatch, cluster):
    fake = types.ModuleType("dask_jobqueue")
    fake.SLURMCluster = _FakeSlurmCluster
    monkeypatch.setitem(sys.modules, "dask_jobqueue", fake)
    _FakeSlurmCluster.made.clear()
    _FakeSlurmCluster.local = cluster
    _FakeSlurmCluster.closed = 0
    spec = tmp_path / "s.yaml"
    spec.write_text(
        SPEC.replace(
            "EXTRA",
            "executor: {kind: slurm, jobs: 2, cores: 1, memory_gib: 2, queue: short, "
            "walltime_min: 90}",
        )
    )
    local = tmp_path / "l.sqlite"
    plain = tmp_path / "plain.yaml"
    plain.write_text(SPEC.replace("EXTRA", ""))
    run_sweep(load_spec(plain), local)
    s = run_sweep(load_spec(spec), tmp_path / "s.sqlite", workers=1)
    assert _FakeSlurmCluster.made == [
        {
            "cores": 1,
            "processes": 1,  # one worker process per core
            "memory": "2GiB",
            "queue": "short",
            "walltime": "01:30:00",
        },
        {"scale": {"jobs": 2}},
    ]
    assert _FakeSlurmCluster.closed == 1  # the jobs are released when the sweep ends
    assert s.evaluated == 36 and s.skipped == 0
    _assert_same_rows(_rows(local), _rows(tmp_path / "s.sqlite"))


def test_slurm_without_dask_jobqueue(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        SPEC.replace("EXTRA", "executor: {kind: slurm, jobs: 1, cores: 1, memory_gib: 1}")
    )
    ls = load_spec(spec)
    with pytest.raises(CoaccelError, match="executor.kind slurm needs dask-jobqueue: pip install"):
        open_executor(ls.spec)
    rc = main(["sweep", str(spec), "--store", str(tmp_path / "x.sqlite")])
    assert rc == 2


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ("scheduler: localhost:8786", "scheduler", "not a Dask scheduler address"),
        ("scheduler: tcp://h:1\nexecutor: {kind: slurm, jobs: 1, cores: 1, memory_gib: 1}",
         "scheduler", "give one or the other"),
        ("executor: {kind: dask}", "scheduler", "needs a scheduler"),
        ("executor: {kind: slurm, jobs: 1, cores: 1}", "executor.memory_gib", "slurm needs"),
        ("executor: {kind: local, cores: 2}", "executor.cores", "only kind slurm"),
        ("executor: {kind: mpi}", "executor.kind", "slurm"),
        ("executor: {kind: slurm, jobs: 0, cores: 1, memory_gib: 1}", "executor.jobs", ">= 1"),
        ("executor: {kind: slurm, jobs: 1, cores: 1, memory_gb: 1}", "executor.memory_gb",
         "unknown key"),
        ("scheduler: 8786", "scheduler", "str"),
    ],
)  # fmt: skip
def test_bad_executor_keys(tmp_path, extra, key, message):
    spec = tmp_path / "b.yaml"
    spec.write_text(SPEC.replace("EXTRA", extra))
    with pytest.raises(ConfigError) as e:
        load_spec(spec)
    assert any(q.key == key and message in str(q) for q in e.value.problems), str(e.value)


def test_cli_bad_scheduler(tmp_path, capsys):
    db = tmp_path / "c.sqlite"
    rc = main(["sweep", str(SMALL), "--store", str(db), "--scheduler", "localhost:8786"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "--scheduler 'localhost:8786': not a Dask scheduler address" in err
    assert not db.exists()  # checked before any work
