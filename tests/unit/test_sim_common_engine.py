"""The shared event engine and program view (``coaccel.sim.common``).

Expected values: schedules worked out by hand from the documented semantics (each step is in a
comment), the simpy process model as the reference of the numba recurrence, and a cycle-by-cycle
re-statement of the stall attribution rules as the reference of the vectorized attribution.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from coaccel.sim.common import (
    QUEUE_NONE,
    QueueProgram,
    Queues,
    StallAttribution,
    TransferCauses,
    attribute_stalls,
    distinct_rows,
    effective_deps,
    merge_records,
    run_program,
    table_code,
)
from coaccel.sim.hbq_asic.engine import HBQ_QUEUES, STALL_ATTRIBUTION
from coaccel.sim.hbq_asic.stats import STALL_CAUSES
from coaccel.spine.trace import TraceBuilder


def _prog(queue, occ, lat, dep) -> QueueProgram:
    return QueueProgram(
        queue=np.asarray(queue, np.int8),
        occupancy_cycles=np.asarray(occ, np.int64),
        latency_cycles=np.asarray(lat, np.int64),
        dep=np.asarray(dep, np.int64),
    )


def _random_prog(rng: np.random.Generator, n_queues: int, n: int) -> QueueProgram:
    queue = rng.integers(-1, n_queues, size=n)
    # Zero occupancies and latencies are frequent: ties at one cycle are the delicate cases.
    occ = rng.integers(0, 30, size=n) * (rng.random(n) < 0.8)
    lat = rng.integers(0, 12, size=n) * (rng.random(n) < 0.6)
    dep = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
    return _prog(queue, occ, lat, dep)


# ------------------------------------------------------------------ the engine


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_four_queues_by_hand(engine):
    q = Queues(("dma", "pe", "vec", "link"))
    dma, pe, vec, link = (q.index(n) for n in q.names)
    p = _prog(
        [dma, link, pe, QUEUE_NONE, vec, pe, dma, link, QUEUE_NONE, pe],
        [10, 3, 20, 0, 4, 6, 2, 1, 0, 1],
        [5, 2, 0, 0, 1, 0, 5, 0, 0, 0],
        [-1, -1, 0, 1, 3, 4, 5, -1, -1, 8],
    )
    start, done = run_program(p, queue_names=q, engine=engine)
    # 0 dma: 0 .. 10 busy, done 15.  1 link: 0 .. 3, done 5.  2 pe after 0: 15 .. 35.
    # 3 no queue after 1: 5.  4 vec after 3: 5 .. 9, done 10.  5 pe after 4, behind 2: 35 .. 41.
    # 6 dma after 5: 41 .. 43, done 48.  7 link, behind 1: 3 .. 4.  8 no queue, no dep: 0.
    # 9 pe after 8, behind 5: 41 .. 42.
    assert start.tolist() == [0, 0, 15, 5, 5, 35, 41, 3, 0, 41]
    assert done.tolist() == [15, 5, 35, 5, 10, 41, 48, 4, 0, 42]

    free = np.array([100, 0, 0, 50], np.int64)
    start, done = run_program(p, queue_names=q.names, engine=engine, free=free)
    # 0 dma from 100: done 115.  1 link from 50: 50 .. 53, done 55.  2 pe: 115 .. 135.
    # 3: 55.  4 vec: 55 .. 59, done 60.  5 pe: 135 .. 141.  6 dma: 141 .. 143, done 148.
    # 7 link: 53 .. 54.  8: 0.  9 pe: 141 .. 142.
    assert start.tolist() == [100, 50, 115, 55, 55, 135, 141, 53, 0, 141]
    assert done.tolist() == [115, 55, 135, 55, 60, 141, 148, 54, 0, 142]
    assert free.tolist() == [143, 142, 59, 54]


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_queues_are_in_order(engine):
    # Record 1 on queue b waits for record 0 (done 15); record 2, also on b, has no dependency
    # but cannot overtake record 1: it starts when b is free again, at 16.
    p = _prog([0, 1, 1], [5, 1, 1], [10, 0, 0], [-1, 0, -1])
    start, done = run_program(p, n_queues=2, engine=engine)
    assert start.tolist() == [0, 15, 16] and done.tolist() == [15, 16, 17]


@pytest.mark.parametrize("n_queues", [1, 2, 3, 4, 5, 6])
def test_fast_engine_equals_simpy_on_random_programs(n_queues):
    rng = np.random.default_rng(100 + n_queues)
    names = tuple(f"q{i}" for i in range(n_queues))
    for trial in range(25):
        p = _random_prog(rng, n_queues, int(rng.integers(1, 80)))
        f1 = rng.integers(0, 50, size=n_queues).astype(np.int64)
        f2 = f1.copy()
        a = run_program(p, queue_names=names, engine="fast", free=f1)
        b = run_program(p, queue_names=names, engine="simpy", free=f2)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), trial
        assert np.array_equal(f1, f2), trial


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_programs_continue_through_free(engine):
    # Running P1 then P2 (dependencies inside each) on one timeline equals running P1 + P2.
    rng = np.random.default_rng(5)
    for trial in range(15):
        nq = int(rng.integers(1, 7))
        p1 = _random_prog(rng, nq, int(rng.integers(1, 40)))
        p2 = _random_prog(rng, nq, int(rng.integers(1, 40)))
        k = p1.n_records
        whole = QueueProgram(
            np.concatenate([p1.queue, p2.queue]),
            np.concatenate([p1.occupancy_cycles, p2.occupancy_cycles]),
            np.concatenate([p1.latency_cycles, p2.latency_cycles]),
            np.concatenate([p1.dep, np.where(p2.dep >= 0, p2.dep + k, -1)]),
        )
        free = np.zeros(nq, np.int64)
        s1, d1 = run_program(p1, n_queues=nq, engine=engine, free=free)
        s2, d2 = run_program(p2, n_queues=nq, engine=engine, free=free)
        free_whole = np.zeros(nq, np.int64)
        s, d = run_program(whole, n_queues=nq, engine=engine, free=free_whole)
        assert np.array_equal(s, np.concatenate([s1, s2])), trial
        assert np.array_equal(d, np.concatenate([d1, d2])), trial
        assert np.array_equal(free, free_whole), trial


def test_empty_program_leaves_free_alone():
    free = np.array([4, 7], np.int64)
    for engine in ("fast", "simpy"):
        start, done = run_program(_prog([], [], [], []), n_queues=2, engine=engine, free=free)
        assert start.shape == done.shape == (0,) and free.tolist() == [4, 7]


def test_bad_programs_are_rejected():
    with pytest.raises(
        ValueError,
        match=re.escape("QueueProgram.queue must be a 1-D int8 array; got int64 with shape (2,)"),
    ):
        QueueProgram(np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64),
                     np.full(2, -1, np.int64))  # fmt: skip
    with pytest.raises(ValueError, match=re.escape("QueueProgram.dep must be a 1-D int64 array")):
        QueueProgram(np.zeros(2, np.int8), np.zeros(2, np.int64), np.zeros(2, np.int64),
                     np.full((2, 1), -1, np.int64))  # fmt: skip
    with pytest.raises(
        ValueError, match=re.escape("QueueProgram.latency_cycles has 3 records; queue has 2")
    ):
        QueueProgram(np.zeros(2, np.int8), np.zeros(2, np.int64), np.zeros(3, np.int64),
                     np.full(2, -1, np.int64))  # fmt: skip
    with pytest.raises(
        ValueError,
        match=re.escape(
            "QueueProgram.dep[1] = 1; a record depends on an earlier record (0 <= dep < 1) or on "
            "none (-1)"
        ),
    ):
        _prog([0, 0], [1, 1], [0, 0], [-1, 1])
    with pytest.raises(ValueError, match=re.escape("QueueProgram.dep[0] = -2")):
        _prog([0], [1], [0], [-2])
    with pytest.raises(
        ValueError, match=re.escape("QueueProgram.occupancy_cycles[1] = -3; cycles must be >= 0")
    ):
        _prog([0, 0], [1, -3], [0, 0], [-1, -1])
    with pytest.raises(
        ValueError,
        match=re.escape("QueueProgram.queue[0] = -2; valid: a queue index >= 0 or -1 (no queue)"),
    ):
        _prog([-2], [1], [0], [-1])


def test_bad_run_arguments_are_rejected():
    p = _prog([0, 3], [1, 1], [0, 0], [-1, -1])
    with pytest.raises(
        ValueError,
        match=re.escape(
            "record 1 is on queue 3, but there are 3 queues (dma, pe_array, vector): valid "
            "indices 0..2 or -1 (no queue)"
        ),
    ):
        run_program(p, queue_names=HBQ_QUEUES)
    with pytest.raises(
        ValueError, match=re.escape("record 1 is on queue 3, but there are 2 queues:")
    ):
        run_program(p, n_queues=2)
    ok = _prog([0], [1], [0], [-1])
    with pytest.raises(ValueError, match="give exactly one of queue_names and n_queues"):
        run_program(ok)
    with pytest.raises(ValueError, match="give exactly one of queue_names and n_queues"):
        run_program(ok, queue_names=("a",), n_queues=1)
    with pytest.raises(ValueError, match=re.escape("n_queues=0; valid: 1..127")):
        run_program(ok, n_queues=0)
    with pytest.raises(ValueError, match=re.escape("n_queues='2'; expected an int in 1..127")):
        run_program(ok, n_queues="2")
    with pytest.raises(ValueError, match=re.escape("engine='gpu'; valid choices: 'fast', 'simpy'")):
        run_program(ok, n_queues=1, engine="gpu")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "free must be a shape (2,) int64 array, one entry per queue (a, b); got int32 with "
            "shape (2,)"
        ),
    ):
        run_program(ok, queue_names=("a", "b"), free=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match=re.escape("free must be a shape (1,) int64 array")):
        run_program(ok, n_queues=1, free=np.zeros(2, np.int64))


def test_queues():
    q = Queues(("dma", "pe_array", "vector"))
    assert len(q) == 3 and list(q) == ["dma", "pe_array", "vector"] and "vector" in q
    assert q.index("pe_array") == 1
    assert Queues(["a", "b"]).names == ("a", "b")
    with pytest.raises(
        ValueError, match=re.escape("unknown queue 'pe'; valid choices: dma, pe_array, vector")
    ):
        q.index("pe")
    with pytest.raises(ValueError, match=re.escape("queue names must be unique; repeated: ['a']")):
        Queues(("a", "b", "a"))
    with pytest.raises(ValueError, match="at least one queue name"):
        Queues(())
    with pytest.raises(ValueError, match=re.escape("non-empty strings; got ['', 3]")):
        Queues(("", 3))
    with pytest.raises(ValueError, match="128 queues; at most 127"):
        Queues(tuple(f"q{i}" for i in range(128)))


# ------------------------------------------------------------------ stall attribution

_QUEUES = Queues(("dma", "pe", "vec"))
_RULES = StallAttribution(
    queues=_QUEUES,
    critical="pe",
    wait_causes={"pe": "pipeline", "vec": "softmax"},
    transfers={"dma": TransferCauses("queued", "transfer", "latency")},
    no_dependency="start",
)


def test_stall_attribution_by_hand():
    dma, pe, vec = 0, 1, 2
    p = _prog(
        [dma, QUEUE_NONE, pe, vec, dma, pe, dma, dma, pe, pe, vec, pe, QUEUE_NONE, pe],
        [10, 0, 4, 6, 8, 3, 20, 4, 2, 5, 3, 1, 0, 2],
        [5, 0, 0, 2, 5, 0, 0, 5, 0, 3, 4, 6, 0, 0],
        [-1, 0, 1, 2, 3, 4, -1, -1, 7, 8, 9, 10, 11, 12],
    )
    free = np.array([0, 3, 0], np.int64)
    start, done = run_program(p, queue_names=_QUEUES, free=free)
    # 0 dma 0..10, done 15. 1 on-chip: 15. 2 pe from max(3, 15) = 15 .. 19. 3 vec 19..25,
    # done 27. 4 dma from max(10, 27) = 27 .. 35, done 40. 5 pe from 40 .. 43.
    # 6 dma 35..55. 7 dma 55..59, done 64. 8 pe from 64 .. 66. 9 pe 66..71, done 74.
    # 10 vec from 74 .. 77, done 81. 11 pe from 81 .. 82, done 88. 12 on-chip: 88. 13 pe 88..90.
    assert start.tolist() == [0, 15, 15, 19, 27, 40, 35, 55, 64, 66, 74, 81, 88, 88]
    assert done.tolist() == [15, 15, 19, 27, 40, 43, 55, 64, 66, 74, 81, 88, 88, 90]
    b = attribute_stalls(p, start, done, _RULES, free_before_cycle=3)
    assert b.positions.tolist() == [2, 5, 8, 9, 11, 13]
    # Gaps: 3..15, 19..40, 43..64, 66..66, 71..81, 82..88.
    assert b.gap_cycles.tolist() == [12, 21, 21, 0, 10, 6]
    assert tuple(b.by_cause) == ("pipeline", "softmax", "queued", "transfer", "latency", "start")
    # 2 waits (through the on-chip record 1) for DMA 0: 3..10 transfer, 10..15 latency.
    # 5 waits for DMA 4, which waited for the softmax 3 until 27: 19..27 softmax, 27..35
    #   transfer, 35..40 latency.
    # 8 waits for DMA 7, queued behind DMA 6 until 55: 43..55 queued, 55..59 transfer,
    #   59..64 latency.
    # 11 waits for the softmax 10: 71..81.  13 waits (through 12) for PE record 11: 82..88.
    assert b.by_cause["transfer"].tolist() == [7, 8, 4, 0, 0, 0]
    assert b.by_cause["latency"].tolist() == [5, 5, 5, 0, 0, 0]
    assert b.by_cause["softmax"].tolist() == [0, 8, 0, 0, 10, 0]
    assert b.by_cause["queued"].tolist() == [0, 0, 12, 0, 0, 0]
    assert b.by_cause["pipeline"].tolist() == [0, 0, 0, 0, 0, 6]
    assert b.by_cause["start"].tolist() == [0] * 6
    assert b.totals() == {
        "pipeline": 6, "softmax": 18, "queued": 12, "transfer": 19, "latency": 15, "start": 0
    }  # fmt: skip
    assert b.free_cycle == 90 == free[pe]


def _attribution_oracle(p, start, done, rules, free_before):
    """The rules of StallAttribution, restated cycle by cycle with scalar loops."""
    names = rules.queues.names

    def eff(i):
        j = int(p.dep[i])
        while j >= 0 and p.queue[j] < 0:
            j = int(p.dep[j])
        return j

    def held_cause(qname):
        if qname in rules.wait_causes:
            return rules.wait_causes[qname]
        return rules.transfers[qname].before_start

    crit = rules.queues.index(rules.critical)
    rows = []
    free = free_before
    for i in range(p.n_records):
        if p.queue[i] != crit:
            continue
        row = dict.fromkeys(rules.causes, 0)
        d = eff(i)
        for cycle in range(free, int(start[i])):
            if d < 0:
                cause = rules.no_dependency
            elif names[p.queue[d]] in rules.wait_causes:
                cause = rules.wait_causes[names[p.queue[d]]]
            else:
                t = rules.transfers[names[p.queue[d]]]
                if cycle < start[d]:
                    e = eff(d)
                    held = e >= 0 and done[e] >= start[d]
                    cause = held_cause(names[p.queue[e]]) if held else t.before_start
                elif cycle < start[d] + p.occupancy_cycles[d]:
                    cause = t.during_transfer
                else:
                    cause = t.latency
            row[cause] += 1
        rows.append(row)
        free = int(start[i] + p.occupancy_cycles[i])
    return rows, free


_TWO_LINKS = StallAttribution(
    queues=Queues(("hbm", "sm", "host", "copy", "epilogue", "misc")),
    critical="sm",
    wait_causes={"sm": "sm_pipeline", "epilogue": "epilogue", "misc": "misc"},
    transfers={
        "hbm": TransferCauses("hbm_queue", "hbm_bandwidth", "hbm_latency"),
        "host": TransferCauses("link_queue", "link_bandwidth", "link_latency"),
        "copy": TransferCauses("hbm_queue", "copy_bandwidth", "hbm_latency"),
    },
    no_dependency="idle",
)


@pytest.mark.parametrize("rules", [_RULES, _TWO_LINKS, STALL_ATTRIBUTION], ids=lambda r: r.critical)
def test_stall_attribution_equals_the_rules_cycle_by_cycle(rules):
    rng = np.random.default_rng(len(rules.queues))
    nq = len(rules.queues)
    for trial in range(30):
        p = _random_prog(rng, nq, int(rng.integers(1, 70)))
        free = rng.integers(0, 40, size=nq).astype(np.int64)
        before = int(free[rules.queues.index(rules.critical)])
        start, done = run_program(p, queue_names=rules.queues, free=free)
        b = attribute_stalls(p, start, done, rules, free_before_cycle=before)
        rows, free_after = _attribution_oracle(p, start, done, rules, before)
        assert len(rows) == b.positions.size, trial
        for c in rules.causes:
            assert b.by_cause[c].tolist() == [r[c] for r in rows], (trial, c)
        total = sum(b.by_cause.values())
        assert np.array_equal(total, b.gap_cycles), trial
        assert b.free_cycle == free_after == free[rules.queues.index(rules.critical)], trial


def test_hbq_attribution_is_a_configuration_of_the_shared_one():
    assert STALL_ATTRIBUTION.queues == HBQ_QUEUES
    assert set(STALL_ATTRIBUTION.causes) == {
        "pipeline_latency", "vector_unit", "dram_bandwidth", "dram_latency"
    }  # fmt: skip
    assert set(STALL_ATTRIBUTION.causes) <= set(STALL_CAUSES)


def test_stall_attribution_without_critical_records():
    p = _prog([0, QUEUE_NONE], [4, 0], [1, 0], [-1, 0])
    start, done = run_program(p, queue_names=_QUEUES)
    b = attribute_stalls(p, start, done, _RULES, free_before_cycle=17)
    assert b.positions.size == 0 and b.free_cycle == 17
    assert all(v.shape == (0,) for v in b.by_cause.values()) and set(b.by_cause) == set(
        _RULES.causes
    )


def test_bad_stall_attributions_are_rejected():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "StallAttribution: critical queue 'gpu' is not one of the queues; queue(s) ['vec'] "
            "have no cause (give them in wait_causes or transfers); queues: dma, pe, vec"
        ),
    ):
        StallAttribution(_QUEUES, "gpu", {"pe": "x"}, {"dma": TransferCauses("a", "b", "c")})
    with pytest.raises(
        ValueError,
        match=re.escape(
            "StallAttribution: queue(s) ['dma'] are in both wait_causes and transfers; unknown "
            "queue(s) ['hbm']"
        ),
    ):
        StallAttribution(
            _QUEUES, "pe", {"pe": "x", "vec": "y", "dma": "z", "hbm": "w"},
            {"dma": TransferCauses("a", "b", "c")},
        )  # fmt: skip
    with pytest.raises(ValueError, match=re.escape("transfers['dma'] must be a TransferCauses")):
        StallAttribution(_QUEUES, "pe", {"pe": "x", "vec": "y"}, {"dma": ("a", "b", "c")})
    p = _prog([1], [1], [0], [-1])
    with pytest.raises(
        ValueError, match=re.escape("done has shape (2,); the program has 1 records")
    ):
        attribute_stalls(p, np.zeros(1, np.int64), np.zeros(2, np.int64), _RULES)


# ------------------------------------------------------------------ program view


def _small_trace(with_event: bool = False):
    b = TraceBuilder(producer="test")
    s0 = b.memory(space="DRAM", rw="r", nbytes=64, tensor="A")
    s1 = b.compute(op="gemm", m=2, n=2, k=2, unit="pe_array", dep=s0)
    ev = b.event("sync") if with_event else -1
    s2 = b.memory(space="PSUM", rw="w", nbytes=8, dep=s1)
    b.compute(op="softmax", m=1, n=4, unit="vector", dep=s2)
    if with_event:
        b.memory(space="DRAM", rw="w", nbytes=4, dep=ev)
    return b.build()


def test_merge_records_in_seq_order():
    tr = _small_trace()
    v = merge_records(tr)
    assert v.kinds == ("memory", "compute")
    assert v.kind.tolist() == [0, 1, 0, 1] and v.index.tolist() == [0, 0, 1, 1]
    assert v.dep.tolist() == [-1, 0, 1, 2]
    assert v.positions("compute").tolist() == [1, 3]
    w = merge_records(tr, ("compute", "memory"))
    assert w.kind.tolist() == [1, 0, 1, 0] and w.dep.tolist() == [-1, 0, 1, 2]
    with pytest.raises(ValueError, match=re.escape("record kind 'events' is not in this view")):
        v.positions("events")


def test_merge_records_with_gaps_in_seq_and_other_kinds():
    tr = _small_trace(with_event=True)  # seq: 0 mem, 1 comp, 2 event, 3 mem, 4 comp, 5 mem
    v = merge_records(tr, ("memory", "compute", "events"))
    assert v.kind.tolist() == [0, 1, 2, 0, 1, 0] and v.index.tolist() == [0, 0, 0, 1, 1, 2]
    assert v.dep.tolist() == [-1, 0, -1, 1, 3, 2]
    with pytest.raises(
        ValueError,
        match=re.escape(
            "memory record seq 5 depends on seq 2, which is not a record of the merged kinds "
            "('memory', 'compute'); merge its kind too"
        ),
    ):
        merge_records(tr)
    b = TraceBuilder(producer="test")
    b.memory(space="DRAM", rw="r", nbytes=4)
    b.sparsity(layer=0, head=0, qblock=0, column=3, kind="delta", lanes=1, nnz=2)
    b.memory(space="DRAM", rw="r", nbytes=4, dep=0)
    s = merge_records(b.build(), ("sparsity", "memory"))
    assert s.kind.tolist() == [1, 0, 1] and s.dep.tolist() == [-1, -1, 0]
    with pytest.raises(ValueError, match=re.escape("kinds=('memory', 'memory')")):
        merge_records(tr, ("memory", "memory"))
    with pytest.raises(
        ValueError, match=re.escape("valid choices: ('memory', 'compute', 'sparsity'")
    ):
        merge_records(tr, ("tiles",))


def test_table_code():
    tr = _small_trace()
    assert tr.table("space")[table_code(tr, "space", "PSUM")] == "PSUM"
    assert table_code(tr, "space", "HBM") == -1
    assert int((tr.memory["space"] == table_code(tr, "space", "DRAM")).sum()) == 1


def test_effective_deps():
    n = QUEUE_NONE
    eff = effective_deps(np.array([0, n, n, 1, n, 2], np.int8), np.array([-1, 0, 1, 2, -1, 4]))
    # 1 -> 0; 2 -> 1 (none) -> 0; 3 -> 2 -> 1 -> 0; 4 none; 5 -> 4 (none, no dep) -> none.
    assert eff.tolist() == [-1, 0, 0, 0, -1, -1]
    # A long chain of on-chip records resolves to its head.
    queue = np.full(1000, n, np.int8)
    queue[0] = 0
    eff = effective_deps(queue, np.arange(-1, 999))
    assert eff.tolist() == [-1] + [0] * 999
    # For some positions only: the same answers, for short and long chains.
    assert effective_deps(queue, np.arange(-1, 999), np.array([999, 3, 0])).tolist() == [0, 0, -1]
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = _random_prog(rng, 2, 200)
        pos = rng.integers(0, 200, size=30)
        assert np.array_equal(
            effective_deps(p.queue, p.dep, pos), effective_deps(p.queue, p.dep)[pos]
        )


def test_distinct_rows():
    inv, rows = distinct_rows([np.array([3, 1, 3, 2]), np.array([0, 5, 0, 5])])
    assert rows.tolist() == [[1, 5], [2, 5], [3, 0]] and inv.tolist() == [2, 0, 2, 1]
    # Negative values and values too wide to pack take the general path: the same answer.
    inv, rows = distinct_rows([np.array([-1, 1, -1]), np.array([2, 2, 2], np.int32)])
    assert rows.tolist() == [[-1, 2], [1, 2]] and inv.tolist() == [0, 1, 0]
    big = np.array([2**40, 2**40, 1])
    inv, rows = distinct_rows([big, np.array([2**30, 2**30, 7])])
    assert rows.tolist() == [[1, 7], [2**40, 2**30]] and inv.tolist() == [1, 1, 0]
    inv, rows = distinct_rows([np.zeros(0, np.int64), np.zeros(0, np.int64)])
    assert inv.shape == (0,) and rows.shape == (0, 2)
    with pytest.raises(ValueError, match="at least one key column"):
        distinct_rows([])
    with pytest.raises(
        ValueError,
        match=re.escape(
            "key column 1: expected a 1-D integer array of length 2, got dtype float64"
        ),
    ):
        distinct_rows([np.zeros(2, np.int64), np.zeros(2)])


def test_distinct_columns_equal_numpy_unique_over_columns():
    """Same first occurrences, order and inverse as ``np.unique(axis=1)`` on columns of small,
    negative, 63-bit-wide and constant values, alone and together."""
    from coaccel.sim.common.program import distinct_columns

    rng = np.random.default_rng(3)
    n = 5000
    kinds = [
        lambda: rng.integers(0, 4, n),
        lambda: rng.integers(-3, 3, n),
        lambda: rng.integers(-(2**62), 2**62, n) // rng.choice([1, 2**40], n),
        lambda: np.full(n, 7),
        lambda: rng.integers(0, 2**40, n) // 2**38 * 2**38,
        lambda: rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, endpoint=True),
    ]
    for trial in range(60):
        picks = rng.integers(0, len(kinds), rng.integers(1, 8))
        cols = [kinds[int(k)]().astype(np.int64) for k in picks]
        if trial % 3 == 0:  # repeated rows
            pick = rng.integers(0, n // 10, n)
            cols = [c[pick] for c in cols]
        first, inv = distinct_columns(cols)
        _, want_first, want_inv = np.unique(
            np.stack(cols), axis=1, return_index=True, return_inverse=True
        )
        np.testing.assert_array_equal(first, want_first)
        np.testing.assert_array_equal(inv, want_inv.reshape(-1))
