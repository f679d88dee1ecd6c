"""Where a sweep's batches of points run: this process, a local process pool, or Dask.

Every executor takes the same batches (the driver cuts them, whatever the executor) and hands
back each batch's rows as it finishes, in any order; the rows do not depend on the executor.

* :class:`InlineExecutor`: in the calling process (one worker).
* :class:`PoolExecutor`: a :class:`concurrent.futures.ProcessPoolExecutor`.
* :class:`DaskExecutor`: a Dask ``distributed`` cluster, reached through a scheduler address
  (``tcp://host:port``) or started as Slurm jobs by ``dask-jobqueue``.

Each keeps two batches per worker in flight, so workers never wait for work while the
scheduler is not flooded with millisecond tasks.

A local pool's workers die with the process that started them, however it ends (``kill -9``
included): on Linux the kernel sends them SIGKILL when their parent dies
(``prctl(PR_SET_PDEATHSIG)``), and everywhere a watchdog thread in each worker ends it within a
second of its parent's death. Workers ignore Ctrl-C (the terminal sends SIGINT to the whole
process group); the parent handles it and stops them. An executor left by an exception (Ctrl-C,
a store that cannot be written) stops its workers at once instead of finishing the batches in
flight.
"""

from __future__ import annotations

import abc
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from ..spine.errors import CoaccelError
from .spec import SweepSpec
from .store import Row

__all__ = [
    "DaskExecutor",
    "Executor",
    "InlineExecutor",
    "PoolExecutor",
    "open_executor",
]

BatchFn = Callable[..., list[Row]]


class Executor(abc.ABC):
    """Runs batches of points; a context manager that releases its workers on exit.

    Attributes:
        workers: how many batches run at once (sets the batch size).
    """

    workers: int = 1

    @abc.abstractmethod
    def run(
        self, fn: BatchFn, args: Sequence[Any], batches: Sequence[Sequence[Any]]
    ) -> Iterator[list[Row]]:
        """Evaluate ``fn(*args, batch)`` for every batch; yield each result as it finishes.

        Args:
            fn: the batch function (:func:`coaccel.dse.evaluate_points`).
            args: its leading arguments, the same for every batch.
            batches: the batches.

        Yields:
            The rows of one batch.
        """

    def close(self) -> None:  # noqa: B027 - a no-op where there are no workers to release
        """Release the workers (after the batches in flight end)."""

    def abort(self) -> None:
        """Release the workers at once, dropping the batches in flight (after an error)."""
        self.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class InlineExecutor(Executor):
    """Evaluate in the calling process, batch after batch."""

    def run(
        self, fn: BatchFn, args: Sequence[Any], batches: Sequence[Sequence[Any]]
    ) -> Iterator[list[Row]]:
        for b in batches:
            yield fn(*args, b)


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _watch_parent(parent_pid: int, ppid: int, interval_s: float) -> None:
    """End this worker when its parent is gone (reparented, or the pid no longer exists)."""
    while True:
        time.sleep(interval_s)
        if os.getppid() != ppid:
            os._exit(1)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except OSError:  # alive, but not ours to signal
            pass


def _init_worker(parent_pid: int, interval_s: float = 1.0) -> None:
    """Pool worker start: ignore Ctrl-C, and die with the parent process.

    Args:
        parent_pid: the pid of the process that owns the pool.
        interval_s: how often the watchdog thread checks the parent, s.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    ppid = os.getppid()
    if ppid != parent_pid:  # forked by a fork server, or the parent died already
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except OSError:
            pass
    threading.Thread(
        target=_watch_parent,
        args=(parent_pid, ppid, interval_s),
        name="coaccel-parent-watchdog",
        daemon=True,
    ).start()


class PoolExecutor(Executor):
    """A local process pool of ``workers`` processes (started on first use).

    Its workers ignore SIGINT and die with this process (see the module's docstring).

    Args:
        workers: processes (at most the machine's CPU count).
    """

    def __init__(self, workers: int) -> None:
        self.workers = max(1, min(workers, os.cpu_count() or workers))
        self._pool: ProcessPoolExecutor | None = None

    def run(
        self, fn: BatchFn, args: Sequence[Any], batches: Sequence[Sequence[Any]]
    ) -> Iterator[list[Row]]:
        if len(batches) <= 1:  # not worth a pool
            yield from InlineExecutor().run(fn, args, batches)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, initializer=_init_worker, initargs=(os.getpid(),)
            )
        ex = self._pool
        pending: set[Future[list[Row]]] = set()
        it = iter(batches)
        for b in it:  # keep two tasks per worker in flight
            pending.add(ex.submit(fn, *args, b))
            if len(pending) >= 2 * self.workers:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                nxt = next(it, None)
                if nxt is not None:
                    pending.add(ex.submit(fn, *args, nxt))
                yield f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def abort(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # The pool keeps its processes in a private mapping; without it, shutdown still ends
        # them once their batches finish.
        processes = list(dict(getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            with contextlib.suppress(OSError, ValueError):
                proc.kill()
        for proc in processes:
            with contextlib.suppress(OSError, ValueError):
                proc.join(5.0)


class DaskExecutor(Executor):
    """A Dask ``distributed`` cluster.

    Args:
        address: the scheduler's address (``tcp://host:port``), or None with ``cluster``.
        cluster: a cluster object (``distributed.LocalCluster``, ``dask_jobqueue.SLURMCluster``)
            to connect to, closed with the executor when ``own_cluster``.
        own_cluster: close ``cluster`` on exit.
        timeout_s: how long to wait for the scheduler and for the first worker, s.

    Raises:
        CoaccelError: ``distributed`` is not installed, or the scheduler cannot be reached.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        cluster: Any = None,
        own_cluster: bool = False,
        timeout_s: float = 60.0,
    ) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise CoaccelError(
                "a Dask scheduler needs the 'distributed' package: pip install 'coaccel[dist]'"
            ) from None
        self._cluster = cluster if own_cluster else None
        self._client: Any = None
        target = cluster if cluster is not None else address
        try:
            self._client = Client(target, timeout=timeout_s)
        except (OSError, TimeoutError) as e:
            self.close()
            raise CoaccelError(f"scheduler {address!r}: cannot connect: {e}") from None
        try:
            self._client.wait_for_workers(1, timeout=timeout_s)
        except TimeoutError:
            self.close()
            where = address or "the cluster"
            raise CoaccelError(f"{where}: no Dask worker joined within {timeout_s:g} s") from None
        self.workers = max(1, self._nthreads())

    def _nthreads(self) -> int:
        info = self._client.scheduler_info()
        return int(sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    def run(
        self, fn: BatchFn, args: Sequence[Any], batches: Sequence[Sequence[Any]]
    ) -> Iterator[list[Row]]:
        from distributed import as_completed

        if not batches:
            return
        self.workers = max(1, self._nthreads())
        it = iter(batches)
        first = []
        for b in it:
            first.append(self._client.submit(fn, *args, b, pure=False))
            if len(first) >= 2 * self.workers:
                break
        ac = as_completed(first)
        for f in ac:
            nxt = next(it, None)
            if nxt is not None:
                ac.add(self._client.submit(fn, *args, nxt, pure=False))
            rows = f.result()
            f.release()
            yield rows

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _slurm_cluster(spec: SweepSpec) -> Any:
    """Start the spec's Slurm jobs through dask-jobqueue (imported only here)."""
    try:
        import dask_jobqueue
    except ImportError:
        raise CoaccelError(
            "executor.kind slurm needs dask-jobqueue: pip install dask-jobqueue"
        ) from None
    ex = spec.executor
    # One single-threaded worker process per core: a point holds the GIL while it runs.
    kwargs: dict[str, Any] = {
        "cores": ex.cores,
        "processes": ex.cores,
        "memory": f"{ex.memory_gib:g}GiB",
    }
    if ex.queue is not None:
        kwargs["queue"] = ex.queue
    if ex.walltime_min is not None:
        h, m = divmod(int(ex.walltime_min), 60)
        kwargs["walltime"] = f"{h:02d}:{m:02d}:00"
    cluster = dask_jobqueue.SLURMCluster(**kwargs)
    cluster.scale(jobs=ex.jobs)
    return cluster


def open_executor(spec: SweepSpec, workers: int = 1, scheduler: str | None = None) -> Executor:
    """The executor a sweep runs on.

    ``scheduler`` (the ``--scheduler`` option) wins over the spec's ``scheduler:`` key; with
    neither, ``executor.kind: slurm`` starts Slurm jobs, else the points run locally on
    ``workers`` processes (in this process when 1).

    Args:
        spec: the sweep.
        workers: local processes.
        scheduler: a Dask scheduler address, or None.

    Returns:
        An :class:`Executor` (use it as a context manager).

    Raises:
        CoaccelError: a Dask or Slurm executor whose package is missing or whose scheduler
            cannot be reached.
    """
    address = scheduler or spec.scheduler
    if address is not None:
        return DaskExecutor(address)
    if spec.executor.kind == "slurm":
        return DaskExecutor(cluster=_slurm_cluster(spec), own_cluster=True, timeout_s=600.0)
    if workers <= 1:
        return InlineExecutor()
    return PoolExecutor(workers)
