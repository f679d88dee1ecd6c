"""Someone else's file is never modified: a store is recognised by its own marker (or, for
stores of earlier coaccel versions, by exactly coaccel's schema, read without writing); any
other file is refused byte-identical, without SQLite side files; paths that are not regular
files are refused before they are read; a report opens its store read-only, WAL stores
included; a store that cannot be written fails with one line and loses nothing."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coaccel import arch_configs
from coaccel.cli import main
from coaccel.dse import Row, Store, inspect_store, load_spec, run_sweep
from coaccel.dse.store import APPLICATION_ID, FORMAT_VERSION
from coaccel.spine.errors import CoaccelError

SMALL = arch_configs.path("sweeps/small_test.yaml")

OLD_POINTS = (
    "CREATE TABLE points (point_id TEXT PRIMARY KEY, workload TEXT NOT NULL, params TEXT "
    "NOT NULL, config_digest TEXT, spec_digest TEXT NOT NULL, metrics TEXT, feasible "
    "INTEGER, status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), error TEXT, "
    "started_at REAL NOT NULL, elapsed_s REAL NOT NULL, version TEXT NOT NULL)"
)


def _files(folder: Path) -> dict[str, str]:
    """Every regular file of a folder with its SHA-256 (a FIFO is listed, never read)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "special"
        for p in folder.iterdir()
    }


def _db(path: Path, *sql: str, wal: bool = False) -> Path:
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return path


def _old_store(path: Path) -> Path:
    """A store as coaccel wrote it before the marker: WAL, 12 columns, no accuracy table."""
    return _db(
        path,
        OLD_POINTS,
        "INSERT INTO points VALUES ('a', 'm:s', '{}', NULL, 's', '{}', 1, 'ok', NULL, 0, 0, '0')",
        wal=True,
    )


FOREIGN = {
    "points_table": lambda p: _db(p, "CREATE TABLE points (a)", "INSERT INTO points VALUES (1)"),
    "unrelated_wal": lambda p: _db(p, "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)", wal=True),
    "empty_schema_db": lambda p: _db(p, "PRAGMA user_version = 7"),
    "other_app_id": lambda p: _db(p, OLD_POINTS, "PRAGMA application_id = 1234"),
    "old_plus_table": lambda p: _db(p, OLD_POINTS, "CREATE TABLE mine (x)"),
    "old_plus_index": lambda p: _db(p, OLD_POINTS, "CREATE INDEX i ON points (workload)"),
    "old_plus_column": lambda p: _db(p, OLD_POINTS, "ALTER TABLE points ADD COLUMN z TEXT"),
    "text_file": lambda p: p.write_text("not a database, just text " * 100),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_foreign_files_refused_untouched(tmp_path, kind, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "x.db"
    FOREIGN[kind](path)
    before = _files(folder)
    with pytest.raises(CoaccelError, match="is not a sweep store"):
        Store(path)
    with pytest.raises(CoaccelError, match="is not a sweep store"):
        Store(path, readonly=True)
    rc = main(["sweep", str(SMALL), "--store", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "left it untouched" in err
    assert "internal error" not in err
    rc = main(["sweep-report", str(path), "--spec", str(SMALL), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "is not a sweep store" in err
    assert _files(folder) == before  # byte-identical, and no -wal, -shm or lock file


def test_proc_file_gets_the_real_reason(capsys):
    if not Path("/proc/version").exists():
        pytest.skip("no /proc")
    rc = main(["sweep", str(SMALL), "--store", "/proc/version"])
    err = capsys.readouterr().err
    assert rc == 2 and err == (
        "coaccel sweep: error: store '/proc/version' is not a sweep store (not an SQLite "
        "database); coaccel left it untouched\n"
    )


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


def test_special_files_refused_before_reading(tmp_path, fifo, capsys):
    db = tmp_path / "s.sqlite"
    run_sweep(SMALL, db)
    f, d, spec = str(fifo), str(db), str(SMALL)
    cases = [
        (["sweep", spec, "--store", f], f"store '{f}' is a named pipe (FIFO)"),
        (["sweep", spec, "--store", "/dev/zero"], "store '/dev/zero' is a character device"),
        (["sweep", f, "--store", d], f"SPEC '{f}' is a named pipe (FIFO)"),
        (["sweep", "/dev/zero", "--store", d], "SPEC '/dev/zero' is a character device"),
        (["sweep", spec, "--store", d, "--export", "csv", f], f"--export '{f}' is a named pipe"),
        (["sweep", spec, "--store", d, "--export", "csv", "/dev/null"], "'/dev/null' is a char"),
        (["sweep", spec, "--store", d, "--export", "csv", d], "is the store itself"),
        (["sweep-report", f, "--spec", spec], f"STORE '{f}' is a named pipe"),
        (["sweep-report", "/dev/zero", "--spec", spec], "STORE '/dev/zero' is a character"),
        (["sweep-report", d, "--spec", f], f"--spec '{f}' is a named pipe"),
        (["sweep-report", d, "--spec", "/dev/zero"], "--spec '/dev/zero' is a character"),
    ]
    before = _files(tmp_path)
    for argv, message in cases:
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and message in err and len(err.splitlines()) == 1, (argv, err)
    assert Path("/dev/null").is_char_device()
    assert _files(tmp_path) == before
    with Store(db) as st:  # the library refuses them too
        with pytest.raises(CoaccelError, match="not a regular file"):
            st.to_csv(fifo)
        with pytest.raises(CoaccelError, match="is the store itself"):
            st.to_csv(db)
    with pytest.raises(CoaccelError, match="spec .* is a named pipe"):
        run_sweep(fifo, db)


def test_new_store_carries_the_marker(tmp_path):
    db = tmp_path / "n.sqlite"
    assert inspect_store(db) == "missing"
    run_sweep(SMALL, db)
    head = db.read_bytes()[:100]  # in the main file's header, not only in the WAL
    assert int.from_bytes(head[68:72], "big") == APPLICATION_ID
    assert int.from_bytes(head[60:64], "big") == FORMAT_VERSION
    assert inspect_store(db) == "store"
    empty = tmp_path / "e.sqlite"
    empty.touch()  # a file of 0 bytes holds nothing to damage: it becomes a store
    assert inspect_store(empty) == "empty"
    with Store(empty) as st:
        assert len(st) == 0
    assert inspect_store(empty) == "store"


def test_newer_store_format_refused(tmp_path):
    db = tmp_path / "n.sqlite"
    Store(db).close()
    _db(db, f"PRAGMA user_version = {FORMAT_VERSION + 1}")
    with pytest.raises(CoaccelError, match="written by a newer coaccel"):
        Store(db)
    with pytest.raises(CoaccelError, match="written by a newer coaccel"):
        Store(db, readonly=True)


def test_old_store_read_as_it_is_then_upgraded(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    db = _old_store(folder / "old.sqlite")
    assert inspect_store(db) == "legacy"
    before = _files(folder)
    with Store(db, readonly=True) as st:  # read as it is: missing columns read as NULL
        (r,) = list(st.rows())
        assert (r.point_id, r.stage, r.mode) == ("a", None, None)
        assert st.accuracy("k") is None
        with pytest.raises(CoaccelError, match="open read-only"):
            st.add([r])
    assert {k: v for k, v in _files(folder).items() if k == "old.sqlite"} == {
        "old.sqlite": before["old.sqlite"]
    }
    with Store(db) as st:  # opened for writing: columns, accuracy table and marker added
        st.add([Row("b", "m:s", {}, None, "s", {}, True, "ok", None, 0, 0, "0", "x", "cycle")])
        st.add_accuracy("k", {}, {}, "synthetic", 1.0, 0.1, "0")
        assert st.get("b").mode == "cycle" and st.accuracy("k") == (1.0, "synthetic")
    assert inspect_store(db) == "store"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    con.close()


def test_old_store_killed_before_its_first_checkpoint(tmp_path):
    """An old store whose tables are still only in its -wal file is recognised through it."""
    src = tmp_path / "src"
    src.mkdir()
    con = sqlite3.connect(src / "old.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute(OLD_POINTS)
    dst = tmp_path / "dst"
    dst.mkdir()
    for name in ("old.sqlite", "old.sqlite-wal"):  # what a SIGKILL leaves
        shutil.copy(src / name, dst / name)
    con.close()
    assert inspect_store(dst / "old.sqlite") == "legacy"


def test_report_reads_a_wal_store_without_writing(tmp_path):
    db = tmp_path / "w.sqlite"
    ls = load_spec(SMALL)
    run_sweep(ls, db)
    # A writer holds the store open with committed rows only in the -wal file.
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(
        "INSERT INTO points (point_id, workload, params, spec_digest, status, started_at, "
        "elapsed_s, version) VALUES ('zz', 'm:s', '{}', 's', 'failed', 0, 0, '0')"
    )
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size > 0
    before = {p: p.read_bytes() for p in (db, wal)}
    with Store(db, readonly=True) as st:
        assert len(st) == 7 and st.get("zz") is not None  # sees the rows in the WAL
    from coaccel.dse.analysis import analyze

    with Store(db, readonly=True) as st:
        a = analyze(ls, st)
    assert sum(len(fa.rows) + len(fa.failed) for fa in a.fronts) == 6
    assert {p: p.read_bytes() for p in (db, wal)} == before
    writer.close()


def test_report_command_opens_the_store_read_only(tmp_path, monkeypatch):
    import coaccel.dse.analysis as analysis

    db = tmp_path / "r.sqlite"
    run_sweep(SMALL, db)
    seen = []

    def fake_analyze(spec, store, **kw):
        seen.append((store.readonly, store._db.execute("PRAGMA query_only").fetchone()))
        raise CoaccelError("stop here")

    monkeypatch.setattr(analysis, "analyze", fake_analyze)
    before = db.read_bytes()
    rc = main(["sweep-report", str(db), "--spec", str(SMALL), "--out", str(tmp_path / "o")])
    assert rc == 2 and seen == [(True, (1,))]
    assert db.read_bytes() == before


class _FailingDb:
    """A connection whose n-th COMMIT fails as a full disk does (SQLite's own message)."""

    def __init__(self, con: sqlite3.Connection, fail_at: int, message: str) -> None:
        self._con, self._left, self._message = con, fail_at, message

    def __getattr__(self, name):
        return getattr(self._con, name)

    def cursor(self):
        outer = self
        cur = self._con.cursor()

        class Cursor:
            def execute(self, sql, *a):
                if sql == "COMMIT":
                    outer._left -= 1
                    if outer._left == 0:
                        raise sqlite3.OperationalError(outer._message)
                return cur.execute(sql, *a)

            def executemany(self, sql, rows):
                return cur.executemany(sql, rows)

        return Cursor()


@pytest.mark.parametrize(
    "message", ["database or disk is full", "attempt to write a readonly database"]
)
def test_write_failure_loses_nothing(tmp_path, message):
    ls = load_spec(SMALL)
    db = tmp_path / "f.sqlite"
    st = Store(db)
    st._db = _FailingDb(st._db, 2, message)  # type: ignore[assignment]
    with pytest.raises(CoaccelError) as e:
        run_sweep(ls, st, batch_size=2)
    assert str(e.value) == (
        f"store '{db}': cannot write: {message}; the rows stored before are intact (rerun to "
        "resume once it can be written)"
    )
    st.close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with Store(db) as st2:
        before = {r.point_id: r for r in st2.rows()}
    assert len(before) == 2  # the first batch; nothing of the failed one
    s = run_sweep(ls, db, batch_size=2)
    assert (s.skipped, s.evaluated) == (2, 4)
    with Store(db) as st2:
        assert len(st2) == 6 and all(st2.get(k) == r for k, r in before.items())


def _namespace_ok(tmp_path: Path) -> bool:
    """Whether this machine lets a test mount in a private mount namespace (root, unshare)."""
    if shutil.which("unshare") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs -o size=64k tmpfs {probe}"],
        capture_output=True,
    )  # fmt: skip
    return r.returncode == 0


def _in_namespace(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_read_only_file_system(tmp_path):
    if not _namespace_ok(tmp_path):
        pytest.skip("cannot mount a read-only bind in a private mount namespace here")
    ro = tmp_path / "ro"
    ro.mkdir()
    run_sweep(SMALL, ro / "s.sqlite")
    (ro / "s.sqlite.lock").unlink()
    before = _files(ro)
    py = sys.executable
    spec = tmp_path / "more.yaml"
    spec.write_text(SMALL.read_text().replace("[16, 32]", "[16, 32, 64]"))
    r = _in_namespace(
        f"mount --bind ro ro && mount -o remount,bind,ro ro && "
        f"{py} -m coaccel.cli sweep {spec} --store ro/s.sqlite; echo rc=$?; "
        f"{py} -m coaccel.cli sweep {spec} --store ro/new.sqlite; echo rc=$?; "
        f"{py} -c \"from coaccel.dse import Store; print('rows', len(Store('ro/s.sqlite', "
        f'readonly=True)))"',
        tmp_path,
    )
    assert r.stdout.split() == ["rc=2", "rc=2", "rows", "6"], (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        "coaccel sweep: error: store 'ro/s.sqlite': cannot write: Read-only file system",
        "coaccel sweep: error: --store 'ro': cannot write there: Read-only file system",
    ]
    assert _files(ro) == before


def test_full_file_system(tmp_path):
    if not _namespace_ok(tmp_path):
        pytest.skip("cannot mount a small tmpfs in a private mount namespace here")
    full = tmp_path / "full"
    full.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nbase: hbq_e_28nm\nworkloads: [llama-3.2-1b:prefill_64]\nparameters:\n"
        "  pe_array.n_pes: [16, 32, 64]\n  freq_mhz: {start: 300, stop: 700, step: 4}\n"
    )
    r = _in_namespace(
        f"mount -t tmpfs -o size=256k tmpfs full && {sys.executable} -m coaccel.cli sweep "
        f"{spec} --store full/x.sqlite --batch-size 4; echo rc=$?; cp full/x.sqlite* out/",
        tmp_path,
    )
    assert r.stdout.strip() == "rc=2", (r.stdout, r.stderr)
    last = r.stderr.splitlines()[-1]
    assert last == (
        "coaccel sweep: error: store 'full/x.sqlite': cannot write: database or disk is full; "
        "the rows stored before are intact (rerun to resume once it can be written)"
    )
    assert "Traceback" not in r.stderr and "warning: the store grows by about" in r.stderr
    db = out / "x.sqlite"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    con.close()
    assert 4 <= n < 303 and n % 4 == 0  # whole batches only
    s = run_sweep(spec, db, batch_size=4)  # room again: it resumes
    assert (s.skipped, s.evaluated) == (n, 303 - n)
