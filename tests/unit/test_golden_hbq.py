"""The HBQ vertical's frozen outputs (tests/golden/): every shipped HBQ architecture x a prefill
and a decode scenario x both simulator modes, and the ``coaccel validate hbq`` CSV, must stay
identical. An intentional change regenerates them with ``python tests/golden/hbq_golden.py
--write`` and says why in its commit message."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parents[1] / "golden" / "hbq_golden.py"
_spec = importlib.util.spec_from_file_location("hbq_golden", _HERE)
assert _spec is not None and _spec.loader is not None
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

_CASES = json.loads(golden.SIM_FILE.read_text())
_PARAMS = [(a, w, m) for a in golden.ARCHS for w in golden.WORKLOADS for m in golden.MODES]


def test_golden_cover_every_case() -> None:
    assert sorted(_CASES) == sorted(golden.case_key(*p) for p in _PARAMS)


@pytest.mark.parametrize(("arch", "workload", "mode"), _PARAMS)
def test_golden_sim(arch: str, workload: str, mode: str) -> None:
    got = golden.simulate_case(arch, workload, mode)
    assert got == _CASES[golden.case_key(arch, workload, mode)]


@pytest.mark.parametrize("workload", golden.WORKLOADS)
@pytest.mark.parametrize("arch", ["hbq_e_28nm", "nvfp4_28nm"])
def test_golden_sim_simpy_engine(arch: str, workload: str) -> None:
    """The simpy reference engine gives the same frozen numbers as the numba engine."""
    got = golden.simulate_case(arch, workload, "cycle", engine="simpy")
    assert got == _CASES[golden.case_key(arch, workload, "cycle")]


def test_golden_validation_csv(tmp_path: Path) -> None:
    assert golden.validation_csv(tmp_path) == golden.VALIDATE_FILE.read_text()
