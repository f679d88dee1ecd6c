"""Sweeps as real processes: pool workers die with their parent (kill -9 included, through
PR_SET_PDEATHSIG and through the watchdog alone), Ctrl-C ends a sweep with status 130 and one
line, a second sweep on a store in use is refused (the lock dies with its holder), and a sweep
killed several times at different points loses, duplicates and re-evaluates nothing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coaccel.dse import Store, expand, load_spec, run_sweep
from coaccel.dse.store import writer_lock
from coaccel.spine.errors import CoaccelError

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# About 14,000 analytical points: a sweep that is still running when the tests stop it.
LONG_SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_64, llama-3.2-1b:prefill_128, llama-3.2-1b:prefill_256,
            llama-3.2-1b:prefill_512, llama-3.2-1b:prefill_1024, llama-3.2-1b:prefill_2k]
parameters:
  pe_array.n_pes: [16, 32, 64]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {start: 300, stop: 700, step: 1}
"""

KILL_SPEC = LONG_SPEC.replace("step: 1}", "step: 25}")  # 612 points


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # state, ppid, ...


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None and int(st[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is not)."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _count(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM points").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:  # not created yet
        return 0


def _sweep(spec: Path, db: Path, *extra: str, **kw) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "coaccel.cli", "sweep", str(spec), "--store", str(db), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _wait_for(proc: subprocess.Popen[bytes], db: Path, rows: int, workers: int = 0) -> None:
    """Until the sweep has stored ``rows`` rows and started ``workers`` pool workers."""
    deadline = time.monotonic() + 120
    while _count(db) < rows or len(_children(proc.pid)) < workers:
        assert proc.poll() is None, "the sweep ended before the test could stop it"
        assert time.monotonic() < deadline
        time.sleep(0.005)


@pytest.fixture
def long_spec(tmp_path):
    p = tmp_path / "long.yaml"
    p.write_text(LONG_SPEC)
    return p


def test_workers_die_with_a_killed_sweep(tmp_path, long_spec):
    db = tmp_path / "w.sqlite"
    proc = _sweep(long_spec, db, "--workers", "2")
    _wait_for(proc, db, rows=1, workers=2)
    workers = _children(proc.pid)
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert _gone_within(workers, 5.0), "pool workers outlived their parent"
    _lock_freed_within(db, 10.0)  # the kernel released the dead sweep's lock


def _holders(path: Path) -> list[str]:
    """Every process with ``path`` open: pid, state, parent pid and command line."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fds = [os.readlink(f) for f in (d / "fd").iterdir()]
            if str(path) in fds:
                st = _stat(int(d.name)) or ["?", "?"]
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"pid {d.name} state {st[0]} ppid {st[1]}: {cmd[:120]}")
        except OSError:
            continue
    return out


def _lock_freed_within(db: Path, seconds: float) -> None:
    """Take the store's lock once its holders are gone; fail naming whoever still holds it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with writer_lock(db):
                return
        except CoaccelError:
            if time.monotonic() > deadline:
                lock = db.with_name(db.name + ".lock")
                pytest.fail(f"the lock outlived the sweep; open by: {_holders(lock)}")
            time.sleep(0.05)


WATCHDOG = """\
import multiprocessing as mp, os, sys, time
import coaccel.dse.executors as ex

def child(parent):
    sys.platform = "darwin"  # no prctl: the watchdog thread alone
    ex._init_worker(parent, 0.05)
    print("ready", flush=True)
    time.sleep(60)

if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=child, args=(os.getpid(),))
    p.start()
    print(p.pid, flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), 9)
"""


def test_watchdog_alone_ends_an_orphaned_worker(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(WATCHDOG)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "ready"
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert _gone_within([child], 3.0), "the watchdog did not end the orphaned worker"


PDEATHSIG = """\
import ctypes, multiprocessing as mp, os, signal
import coaccel.dse.executors as ex

def child(parent, q):
    ex._init_worker(parent)
    sig = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
    q.put((sig.value, signal.getsignal(signal.SIGINT) is signal.SIG_IGN))

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(os.getpid(), q))
    p.start()
    print(*q.get(timeout=30))
    p.join()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_worker_asks_the_kernel_to_die_with_its_parent(tmp_path):
    script = tmp_path / "p.py"
    script.write_text(PDEATHSIG)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == [str(int(signal.SIGKILL)), "True"], r.stderr


def test_ctrl_c_ends_cleanly(tmp_path, long_spec):
    db = tmp_path / "c.sqlite"
    proc = _sweep(long_spec, db, "--workers", "2", start_new_session=True)
    _wait_for(proc, db, rows=1, workers=2)
    workers = _children(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole group
    out, err = proc.communicate(timeout=30)
    lines = err.decode().splitlines()
    assert proc.returncode == 130
    assert lines[-1] == "coaccel sweep: error: interrupted"
    assert (
        all(line.startswith("coaccel sweep: ") for line in lines)
        and "Traceback" not in err.decode()
    )
    assert out == b""
    assert _gone_within(workers, 5.0)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_second_sweep_on_a_store_in_use_is_refused(tmp_path, long_spec):
    db = tmp_path / "l.sqlite"
    first = _sweep(long_spec, db)
    _wait_for(first, db, rows=1)
    second = subprocess.run(
        [sys.executable, "-m", "coaccel.cli", "sweep", str(long_spec), "--store", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2
    assert len(second.stderr.splitlines()) == 1
    assert f"store '{db}' is in use by another sweep (pid {first.pid} on " in second.stderr
    assert "wait for it to end, then rerun" in second.stderr
    assert first.poll() is None  # the first goes on undisturbed
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    with writer_lock(db):  # a dead holder's lock is free at once
        pass


def test_lock_in_one_process(tmp_path):
    db = tmp_path / "x.sqlite"
    with writer_lock(db):
        with pytest.raises(CoaccelError, match=f"in use by another sweep \\(pid {os.getpid()} on"):
            with writer_lock(db):
                pass
        with pytest.raises(CoaccelError, match="in use by another sweep"):
            run_sweep(Path(__file__).parents[2] / "arch_configs/sweeps/small_test.yaml", db)
    with writer_lock(db):
        pass


def test_killed_several_times_then_resumed(tmp_path):
    spec = tmp_path / "kill.yaml"
    spec.write_text(textwrap.dedent(KILL_SPEC))
    db = tmp_path / "kill.sqlite"
    ls = load_spec(spec)
    ids = {p.point_id for p in expand(ls.spec, ls.constraints, ls.digest)}
    assert len(ids) == 612
    kept: dict[str, object] = {}
    # Killed at different points: early, mid-sweep with a pool, later.
    for rows, extra in ((10, ()), (150, ("--workers", "2")), (350, ())):
        proc = _sweep(spec, db, "--batch-size", "2", *extra)
        _wait_for(proc, db, rows=rows)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        with Store(db) as st:
            now = {r.point_id: r for r in st.rows()}
        assert rows <= len(now) < 612 and set(now) <= ids
        assert all(now[k] == r for k, r in kept.items())  # nothing lost or evaluated again
        kept = now
    s = run_sweep(ls, db)
    assert (s.skipped, s.evaluated) == (len(kept), 612 - len(kept))
    with Store(db) as st:
        final = list(st.rows())
        assert len(final) == len({r.point_id for r in final}) == 612
        assert {r.point_id for r in final} == ids
        assert all(st.get(k) == r for k, r in kept.items())
