"""The store's public record API: a row as its columns (``Row.record``), back
(``Row.from_record``), and many records written in one transaction (``Store.add_records``), as
the batch path of a sweep writes them."""

from __future__ import annotations

import math

import pytest

from coaccel import arch_configs
from coaccel.dse import Row, Store, expand, load_spec
from coaccel.dse.batch import add_records, evaluate_batch, evaluate_batch_records
from coaccel.dse.store import COLUMNS
from coaccel.spine.errors import CoaccelError


def _row(i: int, **kw) -> Row:
    fields = dict(
        point_id=f"{i:032x}",
        workload="llama-3.2-1b:prefill_1024",
        params={"pe_array.n_pes": 16 * (i + 1), "buffers.psum.size_kib": 68},
        config_digest="d" * 64,
        spec_digest="s" * 64,
        metrics={"energy_j": (1.5e-3 * (i + 1), "J"), "seconds": (0.25, "s"),
                 "perplexity": (12.5, "1"), "perplexity_std": (float("inf"), "1")},
        feasible=True,
        status="ok",
        error=None,
        started_at=1.7e9,
        elapsed_s=0.01,
        version="0.1",
        stage="main",
        mode="analytical",
    )  # fmt: skip
    fields.update(kw)
    return Row(**fields)


ROWS = [
    _row(0),
    _row(1, feasible=False, stage=None, mode=None),
    _row(
        2, metrics={}, feasible=None, status="failed", error="ConfigError: bad", config_digest=None
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=["ok", "infeasible-no-stage", "failed"])
def test_record_round_trip(row):
    rec = row.record()
    assert len(rec) == len(COLUMNS)
    assert all(v is None or type(v) in (str, int, float) for v in rec)  # what SQLite binds
    assert Row.from_record(rec) == row
    assert Row.from_record(list(rec)) == row  # any sequence


def test_from_record_refuses_another_length():
    with pytest.raises(ValueError):
        Row.from_record(ROWS[0].record()[:-1])


def test_add_records_writes_what_rows_read_back(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        assert st.add_records(r.record() for r in ROWS) == 3  # any iterable
        assert list(st.rows()) == ROWS
        assert st.add_records([r.record() for r in ROWS]) == 0  # stored ids are skipped
        assert len(st) == 3
    with Store(tmp_path / "s.sqlite", readonly=True) as st:
        assert st.get(ROWS[2].point_id) == ROWS[2]
        with pytest.raises(CoaccelError, match="open read-only"):
            st.add_records([_row(9).record()])


def test_add_and_add_records_store_the_same_bytes(tmp_path):
    with Store(tmp_path / "a.sqlite") as a, Store(tmp_path / "b.sqlite") as b:
        a.add(ROWS)
        b.add_records([r.record() for r in ROWS])
        cols = ",".join(COLUMNS)
        q = f"SELECT {cols} FROM points ORDER BY rowid"
        assert a._db.execute(q).fetchall() == b._db.execute(q).fetchall()


@pytest.mark.parametrize(
    "bad",
    [_row(5, status="done").record(), _row(5).record()[:-1], _row(5, workload=None).record()],
    ids=["status-outside-ok-failed", "short-record", "no-workload"],
)
def test_add_records_is_one_transaction(tmp_path, bad):
    """A record SQLite refuses fails the whole call (it is not skipped as a stored id is) and
    stores nothing of it; what was stored before stays, and the store takes new writes."""
    with Store(tmp_path / "s.sqlite") as st:
        st.add_records([ROWS[0].record()])
        with pytest.raises(CoaccelError, match="cannot write"):
            st.add_records([ROWS[1].record(), bad, ROWS[2].record()])
        assert [r.point_id for r in st.rows()] == [ROWS[0].point_id]
        assert st.add_records([ROWS[1].record()]) == 1


def test_batch_records_through_the_public_api(tmp_path):
    """The batch path's records, written by ``Store.add_records``, read back as the rows
    ``evaluate_batch`` returns (timing fields aside)."""
    ls = load_spec(arch_configs.path("sweeps/small_test.yaml"))
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    args = (ls.base_path, ls.spec.mode, ls.digest, ls.spec.limits)
    recs = evaluate_batch_records(*args, "main", points)
    rows = evaluate_batch(*args, points)
    with Store(tmp_path / "s.sqlite") as st:
        assert add_records(st, recs) == len(points)
        got = {r.point_id: r for r in st.rows()}
    assert [Row.from_record(r) for r in recs] == [got[p.point_id] for p in points]
    for r in rows:
        g = got[r.point_id]
        assert (g.stage, g.mode) == ("main", ls.spec.mode)
        assert g.metrics.keys() == r.metrics.keys()
        for k, (v, u) in r.metrics.items():
            assert g.metrics[k][1] == u
            assert g.metrics[k][0] == v or (math.isnan(v) and math.isnan(g.metrics[k][0]))
        assert (g.params, g.feasible, g.status) == (r.params, r.feasible, r.status)
