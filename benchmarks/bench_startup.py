"""Start-up time of the command line: ``coaccel --help`` and ``coaccel sim --list``.

Each command runs ``--repeat`` times as a fresh process; the benchmark prints the median and
the minimum wall time and the CPU time (user + system) of the median run, in seconds, and the
target figure. Wall time includes the interpreter's own start (``python -c pass`` is printed
beside it for reference); on a loaded machine the wall time grows while the CPU time does not,
so both are shown.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.3
"""The start-up time a user should not notice, seconds."""


def _time(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU (children's user + system) seconds of one run."""
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per command (default 7)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    exe = shutil.which("coaccel")
    base = [exe] if exe else [sys.executable, "-m", "coaccel.cli"]
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "coaccel --help": [*base, "--help"],
        "coaccel sim --list": [*base, "sim", "--list"],
    }
    rows = []
    for name, cmd in cases.items():
        _time(cmd)  # warm the file cache
        runs = sorted(_time(cmd) for _ in range(args.repeat))
        wall = [w for w, _ in runs]
        med = statistics.median(wall)
        cpu = runs[len(runs) // 2][1]
        target = None if name.startswith("python") else TARGET_S
        rows.append({"command": name, "median_s": med, "min_s": min(wall), "cpu_s": cpu,
                     "runs": args.repeat, "target_s": target})  # fmt: skip
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'cpu s':>7}  target")
    for r in rows:
        verdict = ""
        if r["target_s"] is not None:
            verdict = f"< {TARGET_S:g} s: " + ("met" if r["median_s"] < TARGET_S else "NOT met")
        print(f"{r['command']:<22} {r['median_s']:>9.3f} {r['min_s']:>7.3f} {r['cpu_s']:>7.3f}  "
              f"{verdict}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
