"""Speed of the sweep driver end to end, and the result store's cost per point.

Usage::

    .venv/bin/python benchmarks/bench_dse.py                 # table
    .venv/bin/python benchmarks/bench_dse.py --points 400 --json

What it measures:

* analytical points per second through the whole driver (spec expansion, the process pool,
  simulate + cost per point, rows written to a fresh SQLite store), with 1 and with 2 workers,
  on HBQ-E and a Llama-3-8B 2K-token prefill (clock x PSUM size x PE count; every point a
  distinct architecture). The stated target is 1000 points/s;
* the store's overhead per point (a batch of 64 rows written in one transaction, plus the
  lookup of those ids a resumed sweep does) when the store already holds 10 and 100,000 rows:
  it should stay flat, because the point id is the primary key (a B-tree).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from coaccel.dse import Row, Store, load_spec, run_sweep

TARGET_POINTS_PER_S = 1000.0

SPEC = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3-8b:prefill_2k]
mode: analytical
parameters:
  pe_array.n_pes: [16, 32]
  buffers.psum.size_kib: [68, 136]
  freq_mhz: {{start: 200, stop: {stop}, step: 1}}
"""


def _driver(tmp: Path, points: int, workers: int) -> dict:
    spec = tmp / f"bench_{points}.yaml"
    spec.write_text(SPEC.format(stop=200 + max(1, points // 4) - 1))
    ls = load_spec(spec)
    db = tmp / f"driver_{workers}.sqlite"
    t0 = time.perf_counter()
    s = run_sweep(ls, db, workers=workers)
    wall = time.perf_counter() - t0
    return {
        "workers": workers,
        "points": s.evaluated,
        "failed": s.failed,
        "wall_s": wall,
        "points_per_s": s.evaluated / wall,
    }


def _row(i: int) -> Row:
    return Row(f"{i:032x}", "llama-3-8b:prefill_2k", {"pe_array.n_pes": 32, "freq_mhz": i},
               "d" * 64, "s" * 64, {"cycles": (i, "cycle"), "energy_j": (0.5, "J")}, True, "ok",
               None, 0.0, 0.001, "0")  # fmt: skip


def _store(tmp: Path, prefill: int, batches: int = 30, batch: int = 64) -> dict:
    db = tmp / f"store_{prefill}.sqlite"
    with Store(db) as st:
        for i in range(0, prefill, 5000):
            st.add(_row(j) for j in range(i, min(prefill, i + 5000)))
        base = prefill + 10**9
        t0 = time.perf_counter()
        for b in range(batches):
            rows = [_row(base + b * batch + k) for k in range(batch)]
            st.done_ids(r.point_id for r in rows)
            st.add(rows)
        per_point = (time.perf_counter() - t0) / (batches * batch)
        return {"stored_rows": prefill, "us_per_point": per_point * 1e6, "rows_after": len(st)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=1000, help="points per driver run")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _driver(tmp, 8, 1)  # warm-up: imports, file loading, numba caches
        (tmp / "driver_1.sqlite").unlink()
        driver = [_driver(tmp, args.points, w) for w in (1, 2)]
        store = [_store(tmp, n) for n in (10, 100_000)]
    doc = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "target_points_per_s": TARGET_POINTS_PER_S,
        "driver": driver,
        "store": store,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"sweep driver, analytical, HBQ-E llama-3-8b prefill_2k ({os.cpu_count()} CPUs)")
    for r in driver:
        ok = "meets" if r["points_per_s"] >= TARGET_POINTS_PER_S else "below"
        print(
            f"  {r['workers']} worker(s): {r['points']} points in {r['wall_s']:.2f} s = "
            f"{r['points_per_s']:.0f} points/s ({ok} the {TARGET_POINTS_PER_S:.0f}/s target)"
        )
    print("result store, per point (64-row transactions + id lookup)")
    for r in store:
        print(f"  {r['stored_rows']:>7} rows stored: {r['us_per_point']:.1f} us/point")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
