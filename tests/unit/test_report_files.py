"""Atomic report writes: contents, no temporary files left, and ordinary file modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from coaccel.report.files import atomic_open, write_bytes, write_text


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_written_files_get_the_mode_open_would_give(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    ref = tmp_path / "ref.txt"
    with open(ref, "w") as f:  # what a plain open() gives under this umask
        f.write("x")
    a = write_text(tmp_path / "a.txt", "hello")
    b = write_bytes(tmp_path / "b.bin", b"\x00\x01")
    with atomic_open(tmp_path / "c.csv") as f:
        f.write("x,y\n")
    for p in (a, b, tmp_path / "c.csv"):
        assert _mode(p) == _mode(ref)
    assert a.read_text() == "hello"
    assert b.read_bytes() == b"\x00\x01"
    assert (tmp_path / "c.csv").read_text() == "x,y\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.csv", "ref.txt"]


def test_failed_block_leaves_nothing(tmp_path: Path) -> None:
    try:
        with atomic_open(tmp_path / "d.csv") as f:
            f.write("partial")
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
