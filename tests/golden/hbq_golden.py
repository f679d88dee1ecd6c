"""Golden outputs of the HBQ ASIC simulator and ``coaccel validate hbq``.

The JSON files beside this module freeze what the HBQ vertical computes: for every shipped HBQ
architecture x a prefill and a decode scenario x both simulator modes, the cycles, MACs, stall
breakdown, buffer accesses, DRAM bytes (total and by tensor) and per-segment rows; and the
validation CSV. ``tests/unit/test_golden_hbq.py`` asserts them exactly.

Regenerate (only for an intentional change, with a commit message that says why)::

    python tests/golden/hbq_golden.py --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIM_FILE = HERE / "hbq_sim.json"
VALIDATE_FILE = HERE / "hbq_validation.csv"

ARCHS = (
    "hbq_a_28nm",
    "hbq_e_28nm",
    "nvfp4_28nm",
    "mxfp4_28nm",
    "mxfp_w4a8_28nm",
    "amove_28nm",
    "woq_w4a16_28nm",
)
WORKLOADS = ("llama-3.2-3b:prefill_1k", "llama-3.2-3b:decode_2k")
MODES = ("cycle", "analytical")


def case_key(arch: str, workload: str, mode: str) -> str:
    """The JSON key of one case."""
    return f"{arch}|{workload}|{mode}"


def sim_record(stats: Any) -> dict[str, Any]:
    """The frozen part of one simulation result (plain JSON numbers)."""
    d = stats.to_dict() if hasattr(stats, "to_dict") else dict(stats)
    return {
        "cycles": d["cycles"],
        "macs": d["macs"],
        "stall_cycles": d["stall_cycles"],
        "buffers": d["buffers"],
        "dram": d["dram"],
        "by_name": d["by_name"],
        "tiles": d["tiles"],
    }


def simulate_case(arch: str, workload: str, mode: str, engine: str = "fast") -> dict[str, Any]:
    """Run one case through the public simulator entry point."""
    from coaccel.sim.hbq_asic import simulate

    kw = {"engine": engine} if mode == "cycle" else {}
    return sim_record(simulate(arch, workload, mode=mode, **kw))


def all_cases() -> dict[str, dict[str, Any]]:
    """Every golden simulation case."""
    return {
        case_key(a, w, m): simulate_case(a, w, m) for a in ARCHS for w in WORKLOADS for m in MODES
    }


def validation_csv(out: Path) -> str:
    """The text of ``hbq_validation.csv`` written by ``coaccel validate hbq`` into ``out``."""
    from coaccel.targets.hbq_asic.report import write_validation_report
    from coaccel.targets.hbq_asic.validation import validate_hbq

    v = validate_hbq(mode="cycle", speedup_mode="analytical", system=True)
    paths = write_validation_report(v, out)
    csv = [p for p in paths if Path(p).name == "hbq_validation.csv"][0]
    return Path(csv).read_text()


def main(argv: list[str] | None = None) -> int:
    """Regenerate the golden files (``--write``) or report whether they still hold."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the golden files")
    a = ap.parse_args(argv)
    import tempfile

    cases = all_cases()
    with tempfile.TemporaryDirectory() as tmp:
        csv = validation_csv(Path(tmp))
    if a.write:
        SIM_FILE.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
        VALIDATE_FILE.write_text(csv)
        print(f"wrote {SIM_FILE} ({len(cases)} cases) and {VALIDATE_FILE}")
        return 0
    old = json.loads(SIM_FILE.read_text())
    bad = [k for k in cases if old.get(k) != cases[k]]
    same_csv = VALIDATE_FILE.read_text() == csv
    print(
        f"{len(cases) - len(bad)}/{len(cases)} cases identical; validation CSV "
        f"{'identical' if same_csv else 'DIFFERS'}"
    )
    for k in bad:
        print(f"differs: {k}")
    return 0 if not bad and same_csv else 1


if __name__ == "__main__":
    sys.exit(main())
