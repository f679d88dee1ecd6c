"""The sweep result store: one embedded SQLite database (WAL mode), one row per point.

Rows are written batch by batch, each batch in one transaction, so a sweep killed at any moment
leaves a readable database holding every batch that finished. The point id is the primary key:
rerunning a spec on the same store skips the finished points and never duplicates one.

Columns of ``points``: ``point_id`` (text, primary key), ``workload``, ``params`` (JSON object
of dotted key -> value), ``config_digest`` (the point's architecture), ``spec_digest``,
``metrics`` (JSON object of name -> [value, unit]), ``feasible`` (1 when every limit holds, 0
when one does not, NULL for a failed point), ``status`` (``ok`` / ``failed``), ``error`` (the
traceback of a failed point), ``started_at`` (Unix time, s), ``elapsed_s`` (evaluation time,
s), ``version`` (coaccel version), ``stage`` (the stage that evaluated it) and ``mode`` (its
simulator mode); stores written before those two columns existed gain them (NULL) on opening.

A second table, ``accuracy``, caches the accuracy study's score of each distinct number-format
setting (``key``: digest of the setting and the study settings; ``formats`` and ``settings``
as JSON; ``data`` the data it used; ``sqnr_db``; ``elapsed_s``; ``version``), so a rerun or a
larger sweep does not run the study again.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spine.errors import CoaccelError

__all__ = ["Row", "Store"]

_SCHEMA = """
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
    version TEXT NOT NULL
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
_ADDED = ("stage", "mode")  # columns added after the first schema: ALTER TABLE on opening


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
        error: traceback text of a failed point, else None.
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

    def _tuple(self) -> tuple[Any, ...]:
        return (
            self.point_id, self.workload, json.dumps(self.params, sort_keys=True),
            self.config_digest, self.spec_digest,
            json.dumps({k: list(v) for k, v in self.metrics.items()}),
            None if self.feasible is None else int(self.feasible), self.status, self.error,
            self.started_at, self.elapsed_s, self.version, self.stage, self.mode,
        )  # fmt: skip

    @classmethod
    def _from(cls, t: tuple[Any, ...]) -> Row:
        d = dict(zip(_COLUMNS, t, strict=True))
        d["params"] = json.loads(d["params"])
        d["metrics"] = {k: (v[0], v[1]) for k, v in json.loads(d["metrics"] or "{}").items()}
        d["feasible"] = None if d["feasible"] is None else bool(d["feasible"])
        return cls(**d)


class Store:
    """A sweep result database (SQLite, WAL journal).

    Args:
        path: the database file (created with its table if absent).

    Raises:
        CoaccelError: the file cannot be opened or is not a sweep store.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise CoaccelError(f"--store {str(self.path)!r} is a folder; give a file name")
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.execute(_ACCURACY_SCHEMA)
            have = {r[1] for r in self._db.execute("PRAGMA table_info(points)")}
            for col in _ADDED:
                if col not in have:
                    self._db.execute(f"ALTER TABLE points ADD COLUMN {col} TEXT")
        except sqlite3.DatabaseError as e:
            raise CoaccelError(f"store {str(self.path)!r}: not a sweep store: {e}") from None

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, rows: Iterable[Row]) -> int:
        """Write rows in one transaction; rows whose point id is stored already are skipped.

        Args:
            rows: evaluated points.

        Returns:
            How many rows were new.
        """
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            before = self._db.total_changes
            cur.executemany(
                f"INSERT OR IGNORE INTO points VALUES ({','.join('?' * len(_COLUMNS))})",
                (r._tuple() for r in rows),
            )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return self._db.total_changes - before

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

    def rows(self, status: str | None = None) -> Iterator[Row]:
        """Stored rows in insertion order (optionally only ``"ok"`` or ``"failed"`` ones)."""
        q = f"SELECT {','.join(_COLUMNS)} FROM points"
        args: tuple[str, ...] = ()
        if status is not None:
            q += " WHERE status = ?"
            args = (status,)
        for t in self._db.execute(q + " ORDER BY rowid", args):
            yield Row._from(t)

    def get(self, point_id: str) -> Row | None:
        """The stored row of a point, or None."""
        t = self._db.execute(
            f"SELECT {','.join(_COLUMNS)} FROM points WHERE point_id = ?", (point_id,)
        ).fetchone()
        return None if t is None else Row._from(t)

    def get_many(self, ids: Iterable[str]) -> dict[str, Row]:
        """The stored rows of the given point ids (ids not stored are left out)."""
        out: dict[str, Row] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = (
                f"SELECT {','.join(_COLUMNS)} FROM points "
                f"WHERE point_id IN ({','.join('?' * len(chunk))})"
            )
            for t in self._db.execute(q, chunk):
                r = Row._from(t)
                out[r.point_id] = r
        return out

    def accuracy(self, key: str) -> tuple[float, str] | None:
        """The cached accuracy score of a format setting: ``(sqnr_db, data)``, or None."""
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
        """
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

    # -- export ---------------------------------------------------------------------------

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
                "error": (r.error or "").strip().splitlines()[-1] if r.error else None,
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
        """
        import os
        import tempfile

        cols, records = self._flat()
        p = Path(path)
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
            CoaccelError: pyarrow is not installed.
        """
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise CoaccelError(
                "exporting to Parquet needs pyarrow: pip install 'coaccel[dse]' (or pyarrow)"
            ) from None
        import os
        import tempfile

        cols, records = self._flat()
        table = pa.Table.from_pylist(records)
        table = table.select([c for c in cols if c in table.column_names])
        p = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent or Path("."))
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return p
