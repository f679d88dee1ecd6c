"""Streams, events and shared-bandwidth scheduling of tasks (kernels and copies).

A GPU program is a sequence of tasks issued to streams: work on one stream runs in order, work
on different streams may overlap, and events order streams against each other (CUDA
semantics: a ``record`` marks a point of a stream, a ``wait`` makes another stream wait for it,
a ``sync`` waits for everything issued so far). Tasks also need an *engine*: compute kernels
run on the SMs (one kernel at a time here: [OURS] concurrent kernels do not share SMs), copies
on a copy engine of their direction (a number of engines per direction).

Running tasks share the device memory bandwidth: each task has a standalone duration and the
device-memory bytes it moves; while the tasks that run at once ask for more than
``mem_bytes_per_s`` together, every one of them progresses slower by the same factor (fluid
proportional sharing, [OURS]). This is how DMA traffic contends with kernels for HBM.

Public: :class:`Task`, :class:`Scheduled`, :func:`task_prerequisites`, :func:`schedule`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Scheduled", "Task", "schedule", "task_prerequisites"]


@dataclass(frozen=True)
class Task:
    """One unit of work on a stream.

    Attributes:
        name: label (kernel name).
        stream: stream id.
        engine: the engine it needs: ``"sm"``, ``"h2d"``, ``"d2h"`` (or any name with a
            capacity in :func:`schedule`).
        seconds: standalone duration (alone on the machine), s (>= 0).
        mem_bytes: device-memory bytes it moves in that time, B (>= 0).
        after: indices of tasks that must finish before it starts (its stream predecessor
            and awaited events; :func:`task_prerequisites`).
        gap_seconds: delay between its prerequisites finishing and its start (launch
            latency), s.
    """

    name: str
    stream: int
    engine: str
    seconds: float
    mem_bytes: float = 0.0
    after: tuple[int, ...] = ()
    gap_seconds: float = 0.0


@dataclass(frozen=True)
class Scheduled:
    """Start and end of every task, s, in task order; ``makespan`` is the last end."""

    start: tuple[float, ...]
    end: tuple[float, ...]

    @property
    def makespan(self) -> float:
        """End of the last task, s (0 for none)."""
        return max(self.end, default=0.0)


def task_prerequisites(
    items: Sequence[tuple[str, int, int]],
) -> list[tuple[int, ...]]:
    """Prerequisites of tasks from the issue order of tasks and events.

    Args:
        items: in issue (seq) order, ``(kind, stream, ref)`` with kind ``"task"`` (``ref``:
            unused), ``"record"`` (``ref``: the event's own seq), ``"wait"`` (``ref``: the seq
            of the awaited record), ``"wait_task"`` (``ref``: the index of an earlier task to
            wait for, e.g. the kernel holding a record a ``wait`` names) or ``"sync"``.

    Returns:
        For each task in order, the indices of the tasks it waits for: the previous task of
        its stream, the last task of the recorded stream at each awaited record, and, after
        a ``sync``, the last task of every stream.
    """
    last: dict[int, int] = {}
    recorded: dict[int, int] = {}
    pending: dict[int, set[int]] = {}
    sync_all: set[int] = set()
    out: list[tuple[int, ...]] = []
    for kind, stream, ref in items:
        if kind == "task":
            deps = set(pending.pop(stream, set())) | sync_all
            if stream in last:
                deps.add(last[stream])
            last[stream] = len(out)
            out.append(tuple(sorted(deps)))
        elif kind == "record":
            if stream in last:
                recorded[ref] = last[stream]
        elif kind == "wait":
            if ref in recorded:
                pending.setdefault(stream, set()).add(recorded[ref])
        elif kind == "wait_task":
            if 0 <= ref < len(out):
                pending.setdefault(stream, set()).add(ref)
        elif kind == "sync":
            sync_all = set(last.values())
        else:
            raise ValueError(
                f"unknown item kind {kind!r}; valid: task, record, wait, wait_task, sync"
            )
    return out


def schedule(
    tasks: Sequence[Task],
    *,
    mem_bytes_per_s: float,
    engines: Mapping[str, int],
) -> Scheduled:
    """Run tasks on their engines with shared device-memory bandwidth.

    A task starts when its prerequisites have finished (plus its gap) and an engine of its
    kind is free (ties go to the lower task index). While running, a task advances at
    ``1 / seconds`` of its work per second, scaled down by ``mem_bytes_per_s / demand`` when
    the running tasks' memory demand (sum of ``mem_bytes / seconds``) exceeds the bandwidth.

    Args:
        tasks: the tasks (prerequisites must point to earlier tasks).
        mem_bytes_per_s: the sustained device-memory bandwidth, B/s (> 0).
        engines: engine name -> how many tasks of that engine run at once.

    Returns:
        :class:`Scheduled`.

    Raises:
        ValueError: an engine without a capacity or a prerequisite that is not earlier.
    """
    chain = True  # each task waits for the one before it: one runs at a time
    for i, t in enumerate(tasks):
        if t.engine not in engines:
            raise ValueError(
                f"task {t.name!r} needs engine {t.engine!r}; engines: {sorted(engines)}"
            )
        if any(j >= i or j < 0 for j in t.after):
            raise ValueError(f"task {i} ({t.name!r}) has a prerequisite that is not earlier")
        chain = chain and t.after == ((i - 1,) if i else ()) and engines[t.engine] >= 1
    if chain:
        return _chain(tasks, mem_bytes_per_s)
    return _events(tasks, mem_bytes_per_s, engines)


def _events(tasks: Sequence[Task], mem_bytes_per_s: float, engines: Mapping[str, int]) -> Scheduled:
    """:func:`schedule`'s event loop (any prerequisites, engines and sharing)."""
    n = len(tasks)
    start = [0.0] * n
    end = [0.0] * n
    done = [False] * n
    begun = [False] * n
    remaining = [1.0] * n  # fraction of the work left
    busy = dict.fromkeys(engines, 0)
    running: list[int] = []
    now = 0.0
    eps = 1e-18
    while not all(done):
        # start every ready task an engine allows
        started = True
        while started:
            started = False
            for i, t in enumerate(tasks):
                if begun[i] or busy[t.engine] >= engines[t.engine]:
                    continue
                if not all(done[j] for j in t.after):
                    continue
                ready = max((end[j] for j in t.after), default=0.0) + t.gap_seconds
                if ready > now + eps:
                    continue
                begun[i] = True
                start[i] = now
                busy[t.engine] += 1
                if t.seconds <= 0:
                    done[i] = True
                    end[i] = now
                    busy[t.engine] -= 1
                else:
                    running.append(i)
                started = True
        if all(done):
            break
        # next instant: a running task finishes or a waiting task becomes ready
        demand = sum(tasks[i].mem_bytes / tasks[i].seconds for i in running)
        speed = 1.0 if demand <= mem_bytes_per_s else mem_bytes_per_s / demand
        t_next = float("inf")
        for i in running:
            t_next = min(t_next, now + remaining[i] * tasks[i].seconds / speed)
        for i, t in enumerate(tasks):
            if not begun[i] and all(done[j] for j in t.after):
                ready = max((end[j] for j in t.after), default=0.0) + t.gap_seconds
                if ready > now + eps:
                    t_next = min(t_next, ready)
        if t_next == float("inf"):
            raise ValueError("tasks wait for an engine that never frees (a cycle)")
        dt = t_next - now
        for i in list(running):
            # a task whose own finish time defines t_next is done, even when rounding in
            # dt (an ulp of a late ``now`` against a short task) leaves a sliver of its work
            finish = now + remaining[i] * tasks[i].seconds / speed
            remaining[i] -= dt * speed / tasks[i].seconds
            if remaining[i] <= 1e-12 or finish <= t_next:
                running.remove(i)
                done[i] = True
                end[i] = t_next
                busy[tasks[i].engine] -= 1
        now = t_next
    return Scheduled(tuple(start), tuple(end))


def _chain(tasks: Sequence[Task], mem_bytes_per_s: float) -> Scheduled:
    """:func:`schedule` of tasks that each wait for the one before (a single stream): the
    same steps and the same floating-point operations, without the event loop (one task runs
    at a time, so its speed is its own bandwidth demand against ``mem_bytes_per_s``)."""
    start: list[float] = []
    end: list[float] = []
    now = 0.0
    eps = 1e-18
    for i, t in enumerate(tasks):
        ready = (end[i - 1] if i else 0.0) + t.gap_seconds
        if ready > now + eps:
            now = ready
        start.append(now)
        if t.seconds > 0:
            demand = t.mem_bytes / t.seconds
            speed = 1.0 if demand <= mem_bytes_per_s else mem_bytes_per_s / demand
            now = now + 1.0 * t.seconds / speed
        end.append(now)
    return Scheduled(tuple(start), tuple(end))
