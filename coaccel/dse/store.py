"""The sweep result store: one embedded SQLite database (WAL mode), one row per point.

Rows are written batch by batch, each batch in one transaction, so a sweep killed at any moment
leaves a readable database holding every batch that finished. The point id is the primary key:
rerunning a spec on the same store skips the finished points and never duplicates one.

Columns of ``points``: ``point_id`` (text, primary key), ``workload``, ``params`` (JSON object
of dotted key -> value), ``config_digest`` (the point's architecture), ``spec_digest``,
``metrics`` (JSON object of name -> [value, unit]), ``feasible`` (1 when every limit holds, 0
when one does not, NULL for a failed point), ``status`` (``ok`` / ``failed``), ``error`` (the
one-line reason of a failed point: exception type and message), ``started_at`` (Unix time, s),
``elapsed_s`` (evaluation time, s), ``version`` (coaccel version), ``stage`` (the stage that
evaluated it) and ``mode`` (its simulator mode). A row's *record* (:meth:`Row.record`) is its
values in that column order (:data:`COLUMNS`), ``params`` and ``metrics`` as JSON text;
:meth:`Row.from_record` reads one back and :meth:`Store.add_records` writes many in one
transaction, so a worker can serialize rows where it evaluates them.

A second table, ``accuracy``, caches the accuracy study's score of each distinct number-format
setting (``key``: digest of the setting and the study settings; ``formats`` and ``settings``
as JSON; ``data`` the data it used; ``sqnr_db``; ``elapsed_s``; ``version``), so a rerun or a
larger sweep does not run the study again.

A store carries a marker of its own in the SQLite header: ``PRAGMA application_id`` is
:data:`APPLICATION_ID` and ``PRAGMA user_version`` its format (:data:`FORMAT_VERSION`).
:func:`inspect_store` recognises a store before anything is opened for writing; any other file
(not SQLite, another application's database, a FIFO or a device) is refused and left untouched.
Stores written by earlier coaccel versions carry no marker; they are recognised by their schema,
read without writing (SQLite's ``immutable`` mode): exactly the tables ``points`` (with exactly
coaccel's 12 or 14 columns, in order) and optionally ``accuracy`` (exactly its 7 columns), no
other table, index, view or trigger, and ``user_version`` 0. Opened for writing, such a store
gains the ``stage`` and ``mode`` columns, the ``accuracy`` table and the marker, in one
transaction.

A sweep writing to a store holds an advisory lock on ``<store>.lock`` beside it
(:func:`writer_lock`, ``fcntl.flock``); a second sweep on the same store is refused while the
first runs. The kernel releases the lock when its process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import socket
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spine.errors import CoaccelError
from ..spine.trace import not_regular  # one definition for every reader: re-exported here

__all__ = [
    "APPLICATION_ID",
    "COLUMNS",
    "FORMAT_VERSION",
    "Row",
    "Store",
    "check_writable",
    "inspect_store",
    "not_regular",
    "writer_lock",
]

APPLICATION_ID = 0x636F6163
"""``PRAGMA application_id`` of a sweep store (the bytes ``coac``)."""

PAGE_SIZE = 16384
"""SQLite page size of a new store, B."""

FORMAT_VERSION = 1
"""``PRAGMA user_version`` of the stores this coaccel writes (0: a store of an earlier coaccel,
recognised by its schema)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"

_POINTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    point_id TEXT PRIMARY KEY,
    workload TEXT NOT NULL,
    params TEXT NOT NULL,
    config_digest TEXT,
    spec_digest TEXT NOT NULL,
    metrics TEXT,
    feasible INTEGER,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    started_at REAL NOT NULL,
    elapsed_s REAL NOT NULL,
    version TEXT NOT NULL,
    stage TEXT,
    mode TEXT
)
"""
_ACCURACY_SCHEMA = """
CREATE TABLE IF NOT EXISTS accuracy (
    key TEXT PRIMARY KEY,
    formats TEXT NOT NULL,
    settings TEXT NOT NULL,
    data TEXT NOT NULL,
    sqnr_db REAL NOT NULL,
    elapsed_s REAL NOT NULL,
    version TEXT NOT NULL
)
"""
_COLUMNS = (
    "point_id", "workload", "params", "config_digest", "spec_digest", "metrics", "feasible",
    "status", "error", "started_at", "elapsed_s", "version", "stage", "mode",
)  # fmt: skip
COLUMNS: tuple[str, ...] = _COLUMNS
"""The columns of a row record (:meth:`Row.record`, :meth:`Store.add_records`), in order."""
# Only a stored point id is skipped (not ``INSERT OR IGNORE``, which would also drop a record
# breaking a column's rule without a word); SQLite >= 3.24 (2018) knows this upsert clause.
_INSERT = (
    f"INSERT INTO points VALUES ({','.join('?' * len(_COLUMNS))}) ON CONFLICT(point_id) DO NOTHING"
)
_ADDED = ("stage", "mode")  # columns added after the first schema
_ACCURACY_COLUMNS = ("key", "formats", "settings", "data", "sqnr_db", "elapsed_s", "version")
# What an earlier coaccel's store may hold: these tables (with these columns) and the indexes
# SQLite makes for their primary keys, nothing else.
_LEGACY_POINTS = (_COLUMNS[: -len(_ADDED)], _COLUMNS)
_LEGACY_OBJECTS = {
    ("table", "points"),
    ("table", "accuracy"),
    ("index", "sqlite_autoindex_points_1"),
    ("index", "sqlite_autoindex_accuracy_1"),
}


def _uri(path: Path, query: str) -> str:
    """An SQLite URI for a file (every special character of the path escaped)."""
    return "file:" + urllib.parse.quote(str(path.absolute())) + "?" + query


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _foreign(path: Path, why: str) -> CoaccelError:
    return CoaccelError(
        f"store {str(path)!r} is not a sweep store ({why}); coaccel left it untouched"
    )


def _schema(con: sqlite3.Connection) -> tuple[set[tuple[str, str]], dict[str, tuple[str, ...]]]:
    objects = {(str(t), str(n)) for t, n in con.execute("SELECT type, name FROM sqlite_master")}
    columns = {
        name: tuple(str(r[1]) for r in con.execute(f"PRAGMA table_info({name})"))
        for kind, name in objects
        if kind == "table" and name in ("points", "accuracy")
    }
    return objects, columns


def _legacy(path: Path) -> bool:
    """Whether an SQLite file without the marker is a store of an earlier coaccel.

    Read with ``immutable=1`` (no lock, no journal, nothing written); when that view holds no
    table but a ``-wal`` file exists (a store whose first batches never reached the main file),
    read again through the WAL, read-only.

    Raises:
        CoaccelError: it is not (naming its tables), or it cannot be read.
    """
    queries = ["immutable=1"]
    if _wal(path).is_file() and _wal(path).stat().st_size > 0:
        queries.append("mode=ro")
    objects: set[tuple[str, str]] = set()
    columns: dict[str, tuple[str, ...]] = {}
    version = 0
    for q in queries:
        try:
            con = sqlite3.connect(_uri(path, q), uri=True, timeout=5.0)
            try:
                objects, columns = _schema(con)
                version = int(con.execute("PRAGMA user_version").fetchone()[0])
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            raise _foreign(path, f"an SQLite database coaccel cannot read: {e}") from None
        if objects:
            break
    tables = sorted(n for k, n in objects if k == "table")
    ok = (
        ("table", "points") in objects
        and objects <= _LEGACY_OBJECTS
        and version == 0
        and columns.get("points") in _LEGACY_POINTS
        and columns.get("accuracy", _ACCURACY_COLUMNS) == _ACCURACY_COLUMNS
    )
    if ok:
        return True
    what = f"tables: {', '.join(tables)}" if tables else "no tables"
    raise _foreign(path, f"an SQLite database without coaccel's store marker; {what}")


def inspect_store(path: str | Path) -> str:
    """Recognise a sweep store without writing anything.

    Args:
        path: the store's path.

    Returns:
        ``"missing"`` (no such file), ``"empty"`` (a file of 0 bytes), ``"store"`` (a store
        with the marker) or ``"legacy"`` (a store of an earlier coaccel: see the module's
        docstring).

    Raises:
        CoaccelError: a folder, a FIFO, a device; a file that is not SQLite; another
            application's SQLite database; a file that cannot be read.
    """
    p = Path(path)
    kind = not_regular(p)
    if kind == "a folder":
        raise CoaccelError(f"store {str(p)!r} is a folder; give a file name")
    if kind is not None:
        raise CoaccelError(f"store {str(p)!r} is {kind}, not a regular file")
    try:
        with open(p, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:
        above = next((q for q in reversed(p.parents) if q.exists() and not q.is_dir()), p.parent)
        raise CoaccelError(
            f"store {str(p)!r}: cannot create it: {str(above)!r} is a file, not a folder"
        ) from None
    except OSError as e:
        raise CoaccelError(f"store {str(p)!r}: cannot read: {e.strerror or e}") from None
    if not head:
        return "empty"
    if not head.startswith(_SQLITE_MAGIC) or len(head) < 100:
        raise _foreign(p, "not an SQLite database")
    app = int.from_bytes(head[68:72], "big")
    if app == APPLICATION_ID:
        return "store"
    if app != 0:
        raise _foreign(p, f"an SQLite database of another application: application_id {app:#x}")
    _legacy(p)
    return "legacy"


def check_writable(path: str | Path) -> None:
    """Check that an existing store can be written, without writing to it.

    Opens the file for writing (and closes it) and, when SQLite will have to create the store's
    ``-wal`` and ``-shm`` files, creates and removes a file in its folder; the file system's
    answer is the reason given (a read-only file system, no permission), as the user running
    the command gets it.

    Args:
        path: the store.

    Raises:
        CoaccelError: it cannot be written, with the reason.
    """
    path = Path(path)
    where = path.parent if str(path.parent) else Path(".")
    try:
        os.close(os.open(path, os.O_RDWR))
        if not _wal(path).exists():  # SQLite creates the -wal and -shm files beside the store
            probe = where / f".{path.name}.write-test-{os.getpid()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
    except OSError as e:
        raise CoaccelError(f"store {str(path)!r}: cannot write: {e.strerror or e}") from None


def _write_error(path: Path, e: sqlite3.Error) -> CoaccelError:
    return CoaccelError(
        f"store {str(path)!r}: cannot write: {e}; the rows stored before are intact (rerun to "
        "resume once it can be written)"
    )


@contextlib.contextmanager
def writer_lock(path: str | Path) -> Iterator[None]:
    """Hold the advisory lock of a store for a sweep (``<store>.lock``, ``fcntl.flock``).

    The lock file records who holds it (pid, host, start time); it stays in place after the
    sweep. The lock itself dies with the process that holds it. Where ``fcntl`` does not exist
    (Windows) nothing is locked.

    Args:
        path: the store's path.

    Raises:
        CoaccelError: another sweep holds the lock (who, since when), or the lock file cannot
            be created.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: concurrent sweeps are not detected
        yield
        return
    p = Path(path)
    lock = p.with_name(p.name + ".lock")
    kind = not_regular(lock)
    if kind is not None:
        raise CoaccelError(f"store {str(p)!r}: its lock file {str(lock)!r} is {kind}")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise CoaccelError(
            f"store {str(p)!r}: cannot create its lock file {str(lock)!r}: {e.strerror or e}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another process"
            raise CoaccelError(
                f"store {str(p)!r} is in use by another sweep ({holder}); wait for it to end, "
                "then rerun (the points it stored are not evaluated again), or give another store"
            ) from None
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {since}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class Row:
    """One evaluated point.

    Attributes:
        point_id: the point's stable id.
        workload: ``"model[:scenario]"``.
        params: dotted key -> value.
        config_digest: digest of the point's architecture (None when it failed before that).
        spec_digest: digest of the spec parts that fix the result.
        metrics: name -> (value, unit); empty for a failed point.
        feasible: every limit holds (None for a failed point).
        status: ``"ok"`` or ``"failed"``.
        error: the one-line reason of a failed point (``"ConfigError: ..."``), else None;
            stores of earlier coaccel versions hold a whole traceback here.
        started_at: Unix time the evaluation started, s.
        elapsed_s: evaluation time, s.
        version: coaccel version that computed it.
        stage: name of the sweep stage that evaluated it (None in stores from before stages).
        mode: simulator mode it ran in (None in stores from before stages).
    """

    point_id: str
    workload: str
    params: dict[str, Any]
    config_digest: str | None
    spec_digest: str
    metrics: dict[str, tuple[Any, str]]
    feasible: bool | None
    status: str
    error: str | None
    started_at: float
    elapsed_s: float
    version: str
    stage: str | None = None
    mode: str | None = None

    def record(self) -> tuple[Any, ...]:
        """This row as the store writes it: one value per column of :data:`COLUMNS`.

        ``params`` becomes JSON text with sorted keys, ``metrics`` JSON text of name ->
        ``[value, unit]`` (in the row's order), ``feasible`` 1 / 0 / None; every other field
        is stored as it is. :meth:`from_record` inverts it, and :meth:`Store.add_records`
        writes such records without building rows (a worker can serialize its rows where it
        evaluates them).

        Returns:
            A tuple of ``len(COLUMNS)`` values (str, int, float or None).
        """
        return (
            self.point_id, self.workload, json.dumps(self.params, sort_keys=True),
            self.config_digest, self.spec_digest,
            json.dumps({k: list(v) for k, v in self.metrics.items()}),
            None if self.feasible is None else int(self.feasible), self.status, self.error,
            self.started_at, self.elapsed_s, self.version, self.stage, self.mode,
        )  # fmt: skip

    @property
    def reason(self) -> str | None:
        """The one-line reason of a failed point (the last line of an old store's traceback)."""
        if not self.error or not self.error.strip():
            return None
        return self.error.strip().splitlines()[-1]

    @classmethod
    def from_record(cls, record: Sequence[Any]) -> Row:
        """The row of a record (:meth:`record`, or a ``SELECT`` of :data:`COLUMNS`).

        Args:
            record: ``len(COLUMNS)`` values in :data:`COLUMNS` order.

        Returns:
            The row. ``Row.from_record(row.record()) == row`` whenever the parameter and
            metric values are JSON values (str, int, float but NaN, bool, None, lists
            and dicts of those); a tuple among the parameters comes back as a list.

        Raises:
            ValueError: a record of another length.
        """
        d = dict(zip(_COLUMNS, record, strict=True))
        d["params"] = json.loads(d["params"])
        d["metrics"] = {k: (v[0], v[1]) for k, v in json.loads(d["metrics"] or "{}").items()}
        d["feasible"] = None if d["feasible"] is None else bool(d["feasible"])
        return cls(**d)


class Store:
    """A sweep result database (SQLite, WAL journal).

    Opening checks what the file is first (:func:`inspect_store`): anything but a sweep store
    (or a path that does not exist yet, or an empty file) is refused and left untouched.

    Args:
        path: the database file (created with its tables if absent, unless ``readonly``).
        readonly: open for reading only (``mode=ro``): nothing is ever written to the store, a
            store of an earlier coaccel is read as it is, and a store on a read-only file
            system is read without the ``-shm`` file SQLite would create. Reading a WAL store
            in a writable folder may leave the empty ``-wal`` and ``-shm`` files SQLite's
            readers need; the database file itself is not written.

    Raises:
        CoaccelError: not a sweep store; a store written by a newer coaccel; a store that
            cannot be read, or (not ``readonly``) written, with the reason.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        kind = inspect_store(self.path)
        if readonly:
            if kind in ("missing", "empty"):
                why = "no such file" if kind == "missing" else "an empty file, not a sweep store"
                raise CoaccelError(f"store {str(self.path)!r}: {why}")
            self._db = self._open_readonly()
        else:
            self._db = self._open_writable(kind)
        try:
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            objects, columns = _schema(self._db)
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise CoaccelError(f"store {str(self.path)!r}: cannot read: {e}") from None
        if version > FORMAT_VERSION:
            self._db.close()
            raise CoaccelError(
                f"store {str(self.path)!r} was written by a newer coaccel (store format "
                f"{version}; this one knows formats up to {FORMAT_VERSION}): upgrade coaccel"
            )
        have = set(columns.get("points", ()))
        # A store of an earlier coaccel read as it is: columns it lacks read as NULL.
        self._select = ",".join(c if c in have else f"NULL AS {c}" for c in _COLUMNS)
        self._has_accuracy = ("table", "accuracy") in objects

    def _open_readonly(self) -> sqlite3.Connection:
        try:
            con = sqlite3.connect(_uri(self.path, "mode=ro"), uri=True, timeout=30.0)
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            con.execute("PRAGMA query_only=1")
            return con
        except sqlite3.OperationalError as e:
            if _wal(self.path).exists():
                raise CoaccelError(f"store {str(self.path)!r}: cannot read: {e}") from None
        # No -wal file: no writer has the store open, and the folder cannot take the -shm
        # file a WAL reader needs (a read-only file system): read the file as it is.
        try:
            con = sqlite3.connect(_uri(self.path, "immutable=1"), uri=True)
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            con.execute("PRAGMA query_only=1")
            return con
        except sqlite3.DatabaseError as e:
            raise CoaccelError(f"store {str(self.path)!r}: cannot read: {e}") from None

    def _open_writable(self, kind: str) -> sqlite3.Connection:
        p = self.path
        if kind in ("store", "legacy"):
            check_writable(p)
        try:
            con = sqlite3.connect(p, timeout=30.0, isolation_level=None)
        except sqlite3.Error as e:
            raise CoaccelError(f"store {str(p)!r}: cannot open: {e}") from None
        try:
            # A new file takes 16 KiB pages: a row's metrics text (kilobytes for a design with
            # many components) then fits one page instead of an overflow chain, which makes
            # inserts about a third cheaper. An existing store keeps its page size.
            con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            con.execute("BEGIN IMMEDIATE")
            app = int(con.execute("PRAGMA application_id").fetchone()[0])
            n_objects = int(con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0])
            if app != APPLICATION_ID and (kind != "legacy" and n_objects):
                # Another program filled the file between the check and now.
                con.execute("ROLLBACK")
                raise _foreign(p, "an SQLite database without coaccel's store marker")
            if app != APPLICATION_ID:
                # A new store (still in rollback-journal mode, so the marker lands in the main
                # file at once) or one of an earlier coaccel, upgraded in this transaction.
                con.execute(_POINTS_SCHEMA)
                have = {r[1] for r in con.execute("PRAGMA table_info(points)")}
                for col in _ADDED:
                    if col not in have:
                        con.execute(f"ALTER TABLE points ADD COLUMN {col} TEXT")
                con.execute(_ACCURACY_SCHEMA)
                con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                con.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            con.execute("COMMIT")
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            if con.in_transaction:
                con.execute("ROLLBACK")
            con.close()
            raise _write_error(p, e) from None
        except BaseException:
            con.close()
            raise
        return con

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _writing(self) -> None:
        if self.readonly:
            raise CoaccelError(f"store {str(self.path)!r} is open read-only")

    def add(self, rows: Iterable[Row]) -> int:
        """Write rows in one transaction; rows whose point id is stored already are skipped.

        Args:
            rows: evaluated points.

        Returns:
            How many rows were new.

        Raises:
            CoaccelError: the store cannot be written (a full disk, a read-only file system);
                nothing of this call is stored, everything stored before is intact.
        """
        return self.add_records(r.record() for r in rows)

    def add_records(self, records: Iterable[Sequence[Any]]) -> int:
        """Write serialized rows (:meth:`Row.record`) in one transaction (one ``executemany``);
        records whose point id is stored already are skipped.

        The fast path of a sweep: a worker serializes its rows where it evaluates them
        (:func:`coaccel.dse.batch.evaluate_batch_records`) and the process holding the store
        only inserts them. The records are written as given: nothing checks that their JSON
        text is what :meth:`Row.record` would make.

        Args:
            records: ``len(COLUMNS)`` values each, in :data:`COLUMNS` order.

        Returns:
            How many rows were new.

        Raises:
            CoaccelError: the store cannot be written (a full disk, a read-only file system)
                or SQLite refuses a record (wrong length, a status other than ``ok`` /
                ``failed``, None in a required column), with SQLite's reason; nothing of this
                call is stored, everything stored before is intact.
        """
        self._writing()
        cur = self._db.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            before = self._db.total_changes
            cur.executemany(_INSERT, records)
            cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise _write_error(self.path, e) from None
        except BaseException:
            self._rollback()
            raise
        return self._db.total_changes - before

    def _rollback(self) -> None:
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def done_ids(self, ids: Iterable[str] | None = None) -> set[str]:
        """Ids of stored points (of ``ids`` only, when given)."""
        if ids is None:
            return {r[0] for r in self._db.execute("SELECT point_id FROM points")}
        out: set[str] = set()
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = f"SELECT point_id FROM points WHERE point_id IN ({','.join('?' * len(chunk))})"
            out.update(r[0] for r in self._db.execute(q, chunk))
        return out

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM points").fetchone()[0])

    def count(self, spec_digest: str) -> int:
        """How many stored rows carry a spec digest (the points of one stage of a sweep, and of
        any other sweep over the same base architecture and mode)."""
        q = "SELECT COUNT(*) FROM points WHERE spec_digest = ?"
        return int(self._db.execute(q, (spec_digest,)).fetchone()[0])

    def elapsed(self, spec_digest: str, limit: int = 1000) -> list[float]:
        """Evaluation times (s) of up to ``limit`` stored ``ok`` rows of a spec digest."""
        q = "SELECT elapsed_s FROM points WHERE spec_digest = ? AND status = 'ok' LIMIT ?"
        return [float(r[0]) for r in self._db.execute(q, (spec_digest, limit))]

    def rows(self, status: str | None = None) -> Iterator[Row]:
        """Stored rows in insertion order (optionally only ``"ok"`` or ``"failed"`` ones)."""
        q = f"SELECT {self._select} FROM points"
        args: tuple[str, ...] = ()
        if status is not None:
            q += " WHERE status = ?"
            args = (status,)
        for t in self._db.execute(q + " ORDER BY rowid", args):
            yield Row.from_record(t)

    def get(self, point_id: str) -> Row | None:
        """The stored row of a point, or None."""
        t = self._db.execute(
            f"SELECT {self._select} FROM points WHERE point_id = ?", (point_id,)
        ).fetchone()
        return None if t is None else Row.from_record(t)

    def get_many(self, ids: Iterable[str]) -> dict[str, Row]:
        """The stored rows of the given point ids (ids not stored are left out)."""
        out: dict[str, Row] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = (
                f"SELECT {self._select} FROM points "
                f"WHERE point_id IN ({','.join('?' * len(chunk))})"
            )
            for t in self._db.execute(q, chunk):
                r = Row.from_record(t)
                out[r.point_id] = r
        return out

    def accuracy(self, key: str) -> tuple[float, str] | None:
        """The cached accuracy score of a format setting: ``(sqnr_db, data)``, or None."""
        if not self._has_accuracy:
            return None
        t = self._db.execute("SELECT sqnr_db, data FROM accuracy WHERE key = ?", (key,)).fetchone()
        return None if t is None else (float(t[0]), str(t[1]))

    def add_accuracy(
        self,
        key: str,
        formats: dict[str, Any],
        settings: dict[str, Any],
        data: str,
        sqnr_db: float,
        elapsed_s: float,
        version: str,
    ) -> None:
        """Cache the accuracy score of a format setting (kept if the key is stored already).

        Args:
            key: digest of the format setting and the study settings.
            formats: the format setting (JSON-able).
            settings: the study settings (JSON-able).
            data: the data the study used (``real`` or ``synthetic``).
            sqnr_db: the score, dB.
            elapsed_s: study time, s.
            version: coaccel version.

        Raises:
            CoaccelError: the store cannot be written.
        """
        self._writing()
        try:
            self._db.execute(
                "INSERT OR IGNORE INTO accuracy VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    json.dumps(formats, sort_keys=True),
                    json.dumps(settings, sort_keys=True),
                    data,
                    sqnr_db,
                    elapsed_s,
                    version,
                ),
            )
        except sqlite3.Error as e:
            raise _write_error(self.path, e) from None

    # -- export ---------------------------------------------------------------------------

    def _export_target(self, path: str | Path) -> Path:
        """An export's destination: a regular file (or a new one), never the store itself."""
        p = Path(path)
        kind = not_regular(p)
        if kind is not None:
            raise CoaccelError(f"export {str(p)!r} is {kind}, not a regular file")
        if p.exists() and os.path.samefile(p, self.path):
            raise CoaccelError(f"export {str(p)!r} is the store itself; give another file")
        return p

    def _flat(self) -> tuple[list[str], list[dict[str, Any]]]:
        """Flat records: fixed columns, ``param.<key>``, ``<metric> [unit]``."""
        records = []
        params: dict[str, None] = {}
        metrics: dict[str, None] = {}
        for r in self.rows():
            rec: dict[str, Any] = {
                "point_id": r.point_id, "workload": r.workload, "status": r.status,
                "feasible": r.feasible, "config_digest": r.config_digest,
                "elapsed_s": r.elapsed_s, "version": r.version, "stage": r.stage,
                "mode": r.mode,
                "error": r.reason,
            }  # fmt: skip
            for k, v in r.params.items():
                params.setdefault(f"param.{k}")
                rec[f"param.{k}"] = v
            for k, (v, unit) in r.metrics.items():
                col = f"{k} [{unit}]" if unit and unit != "1" else k
                metrics.setdefault(col)
                rec[col] = v
            records.append(rec)
        fixed = ["point_id", "workload", "status", "feasible", "config_digest", "elapsed_s",
                 "version", "stage", "mode", "error"]  # fmt: skip
        return [*fixed, *params, *metrics], records

    def to_csv(self, path: str | Path) -> Path:
        """Write every row as CSV: fixed columns, ``param.<key>``, ``<metric> [unit]``.

        Args:
            path: destination (written atomically: a temporary name, then renamed).

        Returns:
            The path.

        Raises:
            CoaccelError: ``path`` is not a regular file (a FIFO, a device), or is the store.
        """
        import tempfile

        p = self._export_target(path)
        cols, records = self._flat()
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent or Path("."))
        try:
            with os.fdopen(fd, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols)
                w.writeheader()
                w.writerows(records)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return p

    def to_dataframe(self) -> Any:
        """Every row as a pandas DataFrame (columns as :meth:`to_csv`).

        Raises:
            CoaccelError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise CoaccelError(
                "exporting to a DataFrame needs pandas: pip install pandas"
            ) from None
        cols, records = self._flat()
        return pd.DataFrame.from_records(records, columns=cols)

    def to_parquet(self, path: str | Path) -> Path:
        """Write every row as Parquet (columns as :meth:`to_csv`).

        Raises:
            CoaccelError: pyarrow is not installed; ``path`` is not a regular file, or is the
                store.
        """
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise CoaccelError(
                "exporting to Parquet needs pyarrow: pip install 'coaccel[dse]' (or pyarrow)"
            ) from None
        import tempfile

        p = self._export_target(path)
        cols, records = self._flat()
        table = pa.Table.from_pylist(records)
        table = table.select([c for c in cols if c in table.column_names])
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent or Path("."))
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return p
