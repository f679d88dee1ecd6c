"""The store survives a process killed inside a write transaction: the database stays
readable, holds every committed batch and none of the interrupted one, and takes new writes.
Stores from before the stage/mode columns gain them on opening."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap

from coaccel.dse import Row, Store

CHILD = """\
import sys, time
from coaccel.dse import Row, Store

def row(i):
    return Row(f"{i:032x}", "m:s", {"a": i}, "d" * 64, "s" * 64, {"x": (i, "1")}, True,
               "ok", "e" * 2000, 0.0, 0.001, "0")

st = Store(sys.argv[1])
st.add([row(i) for i in range(50)])  # committed

def slow():
    for i in range(50, 8050):
        yield row(i)
    print("inside", flush=True)  # 8000 rows written into the open transaction
    time.sleep(120)

st.add(slow())
"""


def test_killed_inside_a_transaction(tmp_path):
    db = tmp_path / "k.sqlite"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"inside", line
    wal = db.with_name(db.name + "-wal")
    assert wal.stat().st_size > 4 * 2**20  # uncommitted pages did reach the file
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 50
    con.close()
    with Store(db) as st:
        assert [int(r.point_id, 16) for r in st.rows()] == list(range(50))
        r = st.get(f"{3:032x}")
        assert r is not None and r.params == {"a": 3}
        new = Row(f"{999:032x}", "m:s", {}, None, "s" * 64, {}, None, "failed", "boom", 0, 0, "0")
        assert st.add([new]) == 1 and len(st) == 51


def test_old_store_gains_stage_and_mode(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE points (point_id TEXT PRIMARY KEY, workload TEXT NOT NULL, params TEXT "
        "NOT NULL, config_digest TEXT, spec_digest TEXT NOT NULL, metrics TEXT, feasible "
        "INTEGER, status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), error TEXT, "
        "started_at REAL NOT NULL, elapsed_s REAL NOT NULL, version TEXT NOT NULL)"
    )
    con.execute(
        "INSERT INTO points VALUES ('a', 'm:s', '{}', NULL, 's', '{}', 1, 'ok', NULL, 0, 0, '0')"
    )
    con.commit()
    con.close()
    with Store(db) as st:
        (r,) = list(st.rows())
        assert (r.point_id, r.stage, r.mode) == ("a", None, None)
        st.add([Row("b", "m:s", {}, None, "s", {}, True, "ok", None, 0, 0, "0", "x", "cycle")])
        assert st.get("b").stage == "x" and st.get("b").mode == "cycle"
