"""A generic event engine: records run on any number of named in-order queues.

A simulator turns a trace into a :class:`QueueProgram`: per record, the queue it runs on (a
DMA engine, a PE array, a vector unit, a host link...), how long it holds that queue, how long
after that its result is ready, and the one earlier record it waits for. :func:`run_program`
times every record:

* a queued record starts at ``max(cycle its queue is free, completion of its dependency)``,
  holds its queue ``occupancy_cycles`` and completes ``latency_cycles`` after that;
* a record on no queue (:data:`QUEUE_NONE`, e.g. an on-chip buffer access) starts and
  completes when its dependency completes (at cycle 0 without one).

Queues are in order: a record never overtakes an earlier record of its queue. Resource limits
that are not queues (buffer slots, double buffering) are expressed by the program's
dependencies.

The engine exists twice with identical results, record for record: a simpy process model (the
reference: one process per queue) and a numba loop over the same recurrence (the default,
fast). :func:`attribute_stalls` then explains the idle time of one chosen queue (the critical
resource) by cause, configured per simulator with a :class:`StallAttribution`.

Public names: :class:`Queues`, :class:`QueueProgram`, :func:`run_program`,
:class:`TransferCauses`, :class:`StallAttribution`, :class:`StallBreakdown`,
:func:`attribute_stalls`, :data:`QUEUE_NONE`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numba
import numpy as np
import numpy.typing as npt

from .program import QUEUE_NONE, effective_deps

__all__ = [
    "QUEUE_NONE",
    "QueueProgram",
    "Queues",
    "StallAttribution",
    "StallBreakdown",
    "TransferCauses",
    "attribute_stalls",
    "run_program",
]

Engine = Literal["fast", "simpy"]
_ENGINES = ("fast", "simpy")
_MAX_QUEUES = 127  # queue indices are int8


@dataclass(frozen=True)
class Queues:
    """The named in-order queues of a machine; a queue's index is its position in ``names``.

    Example: ``Queues(("dma", "pe_array", "vector")).index("pe_array") == 1``.

    Attributes:
        names: the queue names, unique, non-empty strings; at most 127 queues (indices are
            int8).
    """

    names: tuple[str, ...]

    def __post_init__(self) -> None:
        names = (self.names,) if isinstance(self.names, str) else tuple(self.names)
        object.__setattr__(self, "names", names)
        if not names:
            raise ValueError("Queues needs at least one queue name")
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad:
            raise ValueError(f"queue names must be non-empty strings; got {bad!r}")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"queue names must be unique; repeated: {dup}")
        if len(names) > _MAX_QUEUES:
            raise ValueError(f"{len(names)} queues; at most {_MAX_QUEUES} fit an int8 queue index")

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def index(self, name: str) -> int:
        """The index of a queue (what :attr:`QueueProgram.queue` holds for its records).

        Raises:
            ValueError: an unknown name; the message lists the valid ones.
        """
        if name not in self.names:
            raise ValueError(f"unknown queue {name!r}; valid choices: {', '.join(self.names)}")
        return self.names.index(name)


def _check_column(name: str, a: object, dtype: type, n: int | None) -> int:
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != dtype:
        got = getattr(a, "dtype", type(a).__name__)
        raise ValueError(
            f"QueueProgram.{name} must be a 1-D {np.dtype(dtype).name} array; got {got} with "
            f"shape {getattr(a, 'shape', None)}"
        )
    if n is not None and a.shape[0] != n:
        raise ValueError(
            f"QueueProgram.{name} has {a.shape[0]} records; queue has {n} (all columns have "
            "one entry per record)"
        )
    return a.shape[0]


@dataclass(frozen=True, eq=False)  # array columns: compare them with numpy
class QueueProgram:
    """Records in program order, as the engine runs them (columnar, one entry per record).

    The constructor checks dtypes, shapes and that every dependency points backwards; the
    queue indices are checked against the queues when the program runs.

    Attributes:
        queue: shape (N,) int8: index of the record's queue (:meth:`Queues.index`), or
            :data:`QUEUE_NONE` (-1): the record occupies no queue and completes with its
            dependency.
        occupancy_cycles: shape (N,) int64, >= 0: cycles the record holds its queue.
        latency_cycles: shape (N,) int64, >= 0: cycles from the end of its occupancy to its
            completion (when dependants may start).
        dep: shape (N,) int64: position of the record it waits for (``0 <= dep[i] < i``), or -1.
    """

    queue: npt.NDArray[np.int8]
    occupancy_cycles: npt.NDArray[np.int64]
    latency_cycles: npt.NDArray[np.int64]
    dep: npt.NDArray[np.int64]

    def __post_init__(self) -> None:
        n = _check_column("queue", self.queue, np.int8, None)
        _check_column("occupancy_cycles", self.occupancy_cycles, np.int64, n)
        _check_column("latency_cycles", self.latency_cycles, np.int64, n)
        _check_column("dep", self.dep, np.int64, n)
        if not n:
            return
        for name in ("occupancy_cycles", "latency_cycles"):
            a = getattr(self, name)
            if int(a.min()) < 0:
                i = int(np.flatnonzero(a < 0)[0])
                raise ValueError(f"QueueProgram.{name}[{i}] = {int(a[i])}; cycles must be >= 0")
        if int(self.dep.min()) < -1 or bool((self.dep >= np.arange(n)).any()):
            i = int(np.flatnonzero((self.dep < -1) | (self.dep >= np.arange(n)))[0])
            raise ValueError(
                f"QueueProgram.dep[{i}] = {int(self.dep[i])}; a record depends on an earlier "
                f"record (0 <= dep < {i}) or on none (-1)"
            )
        if int(self.queue.min()) < QUEUE_NONE:
            i = int(np.flatnonzero(self.queue < QUEUE_NONE)[0])
            raise ValueError(
                f"QueueProgram.queue[{i}] = {int(self.queue[i])}; valid: a queue index >= 0 or "
                f"{QUEUE_NONE} (no queue)"
            )

    @property
    def n_records(self) -> int:
        """The number of records N."""
        return int(self.queue.shape[0])


# ---------------------------------------------------------------------------------------------
# Engines


@numba.njit(cache=True)
def _run_fast(
    queue, occupancy_cycles, latency_cycles, dep, free
):  # pragma: no cover - compiled; equal to simpy (tested)
    n = queue.size
    start = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    for i in range(n):
        ready = done[dep[i]] if dep[i] >= 0 else 0
        q = queue[i]
        if q < 0:
            start[i] = ready
            done[i] = ready
            continue
        s = max(free[q], ready)
        start[i] = s
        free[q] = s + occupancy_cycles[i]
        done[i] = s + occupancy_cycles[i] + latency_cycles[i]
    return start, done


def _run_simpy(
    prog: QueueProgram, free: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    import simpy

    env = simpy.Environment()
    n = prog.n_records
    start = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    finished = [env.event() for _ in range(n)]
    queue, occupancy, latency, dep = (
        a.tolist() for a in (prog.queue, prog.occupancy_cycles, prog.latency_cycles, prog.dep)
    )
    records_of: list[list[int]] = [[] for _ in range(free.size)]
    for i, q in enumerate(queue):
        if q >= 0:
            records_of[q].append(i)

    def complete_later(i: int, delay_cycles: int):
        yield env.timeout(delay_cycles)
        done[i] = int(env.now)
        finished[i].succeed()

    def on_chip(i: int):
        if dep[i] >= 0:
            yield finished[dep[i]]
        start[i] = done[i] = int(env.now)
        finished[i].succeed()

    def run_queue(q: int):
        # The queue is busy until `free[q]` with work of earlier programs.
        yield env.timeout(int(free[q]))
        for i in records_of[q]:
            if dep[i] >= 0:
                yield finished[dep[i]]
            start[i] = int(env.now)
            yield env.timeout(occupancy[i])
            env.process(complete_later(i, latency[i]))
        free[q] = int(env.now)

    for i in range(n):
        if queue[i] == QUEUE_NONE:
            env.process(on_chip(i))
    for q in range(free.size):
        env.process(run_queue(q))
    env.run()
    return start, done


def run_program(
    prog: QueueProgram,
    *,
    queue_names: Queues | Sequence[str] | None = None,
    n_queues: int | None = None,
    engine: Engine = "fast",
    free: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run a program: each record's start and completion cycle (module docstring).

    Args:
        prog: the program.
        queue_names: the machine's queues (a :class:`Queues` or the names in index order).
            Give this or ``n_queues``.
        n_queues: the number of queues Q, when they need no names.
        engine: ``"fast"`` (numba) or ``"simpy"`` (the event-driven reference; the same
            results, much slower).
        free: shape (Q,) int64: the cycle each queue becomes free, for a program that continues
            earlier ones on the same timeline; updated in place to the cycle each queue is free
            after this program. None: every queue is free at cycle 0.

    Returns:
        ``(start, done)``, shape (N,) int64 each, cycles.

    Raises:
        ValueError: both or neither of ``queue_names`` and ``n_queues``; a queue index in the
            program outside ``-1 .. Q - 1``; a ``free`` of the wrong shape or dtype; an unknown
            engine.
    """
    if (queue_names is None) == (n_queues is None):
        raise ValueError("give exactly one of queue_names and n_queues")
    if queue_names is not None:
        queues = queue_names if isinstance(queue_names, Queues) else Queues(tuple(queue_names))
        n_q = len(queues)
        which = f" ({', '.join(queues.names)})"
    else:
        if isinstance(n_queues, bool) or not isinstance(n_queues, int | np.integer):
            raise ValueError(f"n_queues={n_queues!r}; expected an int in 1..{_MAX_QUEUES}")
        n_q = int(n_queues)
        if not 1 <= n_q <= _MAX_QUEUES:
            raise ValueError(f"n_queues={n_q}; valid: 1..{_MAX_QUEUES}")
        which = ""
    if engine not in _ENGINES:
        raise ValueError(f"engine={engine!r}; valid choices: 'fast', 'simpy'")
    state = np.zeros(n_q, dtype=np.int64) if free is None else free
    if not isinstance(state, np.ndarray) or state.shape != (n_q,) or state.dtype != np.int64:
        raise ValueError(
            f"free must be a shape ({n_q},) int64 array, one entry per queue{which}; got "
            f"{getattr(state, 'dtype', type(state).__name__)} with shape "
            f"{getattr(state, 'shape', None)}"
        )
    if prog.n_records and int(prog.queue.max()) >= n_q:
        i = int(np.flatnonzero(prog.queue >= n_q)[0])
        raise ValueError(
            f"record {i} is on queue {int(prog.queue[i])}, but there are {n_q} queues{which}: "
            f"valid indices 0..{n_q - 1} or {QUEUE_NONE} (no queue)"
        )
    if engine == "fast":
        return _run_fast(prog.queue, prog.occupancy_cycles, prog.latency_cycles, prog.dep, state)
    return _run_simpy(prog, state)


# ---------------------------------------------------------------------------------------------
# Stall attribution


@dataclass(frozen=True)
class TransferCauses:
    """How a wait on a record of a transfer queue (DMA, host link) splits into causes.

    The wait is cut at the transfer's start and at the end of its occupancy.

    Attributes:
        before_start: cause of the part before the transfer started, when it started late
            because its queue was busy with other transfers (when it waited for its own
            dependency instead, that dependency's cause applies: see :class:`StallAttribution`).
        during_transfer: cause of the part while it held its queue (bandwidth).
        latency: cause of the part after its occupancy, until it completed (latency).
    """

    before_start: str
    during_transfer: str
    latency: str


@dataclass(frozen=True)
class StallAttribution:
    """Which queue is the critical resource, and how its idle gaps map to causes.

    The gap before each record of the critical queue (from the cycle the queue became free to
    the record's start) is charged through the record's *effective* dependency (records on no
    queue skipped: :func:`~.program.effective_deps`), by the queue that dependency ran on:

    * a queue in ``wait_causes``: the whole gap to that queue's cause (e.g. waiting for the
      vector unit: ``"vector_unit"``; waiting for the critical queue itself: a pipeline cause);
    * a queue in ``transfers``: the gap is cut at the transfer's start and occupancy end
      (:class:`TransferCauses`). The part before the start goes, if the transfer was held back
      by its own effective dependency (it completed at or after the transfer's start), to that
      dependency's queue (its ``wait_causes`` entry, or its ``before_start`` cause for a
      transfer queue); otherwise (the transfer queue was busy) to the awaited transfer queue's
      ``before_start`` cause;
    * no dependency: the whole gap to ``no_dependency``.

    Every queue must be named exactly once, in ``wait_causes`` or in ``transfers``.

    Attributes:
        queues: the machine's queues.
        critical: the name of the queue whose idle time is explained.
        wait_causes: queue name -> cause name, for the queues whose records are waited for as
            a whole.
        transfers: queue name -> :class:`TransferCauses`, for transfer queues.
        no_dependency: cause of a gap before a record that waits for nothing queued.
    """

    queues: Queues
    critical: str
    wait_causes: Mapping[str, str]
    transfers: Mapping[str, TransferCauses] = field(default_factory=dict)
    no_dependency: str = "idle"

    def __post_init__(self) -> None:
        object.__setattr__(self, "wait_causes", MappingProxyType(dict(self.wait_causes)))
        object.__setattr__(self, "transfers", MappingProxyType(dict(self.transfers)))
        problems = []
        if self.critical not in self.queues:
            problems.append(f"critical queue {self.critical!r} is not one of the queues")
        both = sorted(set(self.wait_causes) & set(self.transfers))
        if both:
            problems.append(f"queue(s) {both} are in both wait_causes and transfers")
        unknown = sorted((set(self.wait_causes) | set(self.transfers)) - set(self.queues.names))
        if unknown:
            problems.append(f"unknown queue(s) {unknown}")
        missing = [
            q for q in self.queues.names if q not in self.wait_causes and q not in self.transfers
        ]
        if missing:
            problems.append(
                f"queue(s) {missing} have no cause (give them in wait_causes or transfers)"
            )
        for q, t in self.transfers.items():
            if not isinstance(t, TransferCauses):
                problems.append(f"transfers[{q!r}] must be a TransferCauses, got {t!r}")
        if problems:
            raise ValueError(
                "StallAttribution: " + "; ".join(problems) + f"; queues: {', '.join(self.queues)}"
            )

    @property
    def causes(self) -> tuple[str, ...]:
        """Every cause name this configuration can charge, each once, in first-mention order
        (``wait_causes``, then ``transfers``, then ``no_dependency``)."""
        names: list[str] = list(self.wait_causes.values())
        for t in self.transfers.values():
            names += [t.before_start, t.during_transfer, t.latency]
        names.append(self.no_dependency)
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True, eq=False)  # array columns: compare them with numpy
class StallBreakdown:
    """The idle gaps before the critical queue's records, split by cause.

    Attributes:
        positions: shape (R,) int64: positions in the program of the critical queue's records.
        gap_cycles: shape (R,) int64: idle cycles of the queue before each of them.
        by_cause: cause name -> shape (R,) int64: each record's share of its gap; summed over
            the causes it equals ``gap_cycles``. Every cause of the configuration is present.
        free_cycle: the cycle the critical queue is free after its last record here (its value
            before the program when it has no records here).
    """

    positions: npt.NDArray[np.int64]
    gap_cycles: npt.NDArray[np.int64]
    by_cause: Mapping[str, npt.NDArray[np.int64]]
    free_cycle: int

    def totals(self) -> dict[str, int]:
        """Cycles per cause, summed over the records."""
        return {c: int(v.sum()) for c, v in self.by_cause.items()}


def _cause_table(causes: Sequence[str], pick: Iterable[str | None]) -> npt.NDArray[np.int64]:
    """Index into ``causes`` of each picked cause name; -1 for None."""
    return np.asarray([causes.index(c) if c is not None else -1 for c in pick], dtype=np.int64)


def attribute_stalls(
    prog: QueueProgram,
    start: npt.NDArray[np.int64],
    done: npt.NDArray[np.int64],
    config: StallAttribution,
    *,
    free_before_cycle: int = 0,
) -> StallBreakdown:
    """Split the idle time of the critical queue by cause (rules: :class:`StallAttribution`).

    Args:
        prog: the program.
        start, done: shape (N,) int64: its timing from :func:`run_program`.
        config: the attribution rules (the queues must be the ones the program ran on).
        free_before_cycle: the cycle the critical queue became free before this program (its
            ``free`` entry before :func:`run_program`; 0 for a program that starts the
            timeline). The first record's gap starts there.

    Returns:
        The :class:`StallBreakdown`.

    Raises:
        ValueError: ``start``/``done`` not of the program's length.
    """
    n = prog.n_records
    for name, a in (("start", start), ("done", done)):
        if np.shape(a) != (n,):
            raise ValueError(f"{name} has shape {np.shape(a)}; the program has {n} records")
    causes = config.causes
    queues = config.queues
    crit = np.flatnonzero(prog.queue == queues.index(config.critical))
    if crit.size == 0:
        empty = {c: np.zeros(0, dtype=np.int64) for c in causes}
        return StallBreakdown(crit, np.zeros(0, np.int64), empty, int(free_before_cycle))
    occupancy = prog.occupancy_cycles
    free_after = start[crit] + occupancy[crit]
    gap_from = np.concatenate([[free_before_cycle], free_after[:-1]]).astype(np.int64)
    gap_to = start[crit]
    gap = gap_to - gap_from

    # Per queue (index q + 1; index 0 = no dependency), as indices into `causes`: the cause of
    # a whole-gap wait, and for transfer queues the causes of the three parts of a wait on a
    # transfer (0 for the other queues: their parts are empty).
    names = queues.names
    wait_of = _cause_table(
        causes, [config.no_dependency, *(config.wait_causes.get(q) for q in names)]
    )
    transfer = [config.transfers.get(q) for q in names]
    is_transfer_q = np.asarray([False] + [t is not None for t in transfer])
    before_of = _cause_table(causes, [None, *(t.before_start if t else None for t in transfer)])
    during_of = _cause_table(causes, [None, *(t.during_transfer if t else None for t in transfer)])
    latency_of = _cause_table(causes, [None, *(t.latency if t else None for t in transfer)])
    # The cause a transfer's late start goes to when its own dependency held it back.
    held_by = np.where(is_transfer_q, before_of, wait_of)

    d = effective_deps(prog.queue, prog.dep, crit)
    dd = np.maximum(d, 0)
    dq = np.where(d >= 0, prog.queue[dd].astype(np.int64) + 1, 0)
    on_transfer = is_transfer_q[dq]
    e = effective_deps(prog.queue, prog.dep, dd)
    ee = np.maximum(e, 0)
    eq = np.where(e >= 0, prog.queue[ee].astype(np.int64) + 1, 0)
    # A wait on anything but a transfer is one "before" part as long as the gap, charged to the
    # awaited queue's cause: its transfer window is put at the gap's end.
    xfer_start = np.where(on_transfer, start[dd], gap_to)
    xfer_end = np.where(on_transfer, xfer_start + occupancy[dd], gap_to)
    held = (e >= 0) & (done[ee] >= xfer_start)
    before_cause = np.where(on_transfer, np.where(held, held_by[eq], before_of[dq]), wait_of[dq])
    before_len = np.maximum(0, np.minimum(gap_to, xfer_start) - gap_from)
    during_len = np.maximum(0, np.minimum(gap_to, xfer_end) - np.maximum(gap_from, xfer_start))
    latency_len = np.maximum(0, gap_to - np.maximum(gap_from, xfer_end))

    # Each part of a record's gap goes to one cause: (cause, record) pairs are unique within a
    # part, so one fancy-indexed add per part is exact.
    r = crit.size
    table = np.zeros(len(causes) * r, dtype=np.int64)
    rec = np.arange(r)
    table[before_cause * r + rec] += before_len
    table[np.maximum(during_of[dq], 0) * r + rec] += during_len
    table[np.maximum(latency_of[dq], 0) * r + rec] += latency_len
    by_cause = {c: table[i * r : (i + 1) * r] for i, c in enumerate(causes)}
    return StallBreakdown(crit, gap, by_cause, int(free_after[-1]))
