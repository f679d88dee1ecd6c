"""``coaccel validate systolic``: the analytical fidelity beside the cycle-approximate one.

The systolic target has no published measurements to compare with; what it can check is its
two fidelities against each other. For each GEMM of :data:`CASES` (synthetic shapes, nothing
fitted), on one architecture at its own clock and at four times its clock (the same DRAM then
delivers a quarter of the bytes per cycle, so transfers start to matter), a row gives both
cycle counts, their difference, the cycle mode's DRAM stall and what is expected:

* ``equal``: the cycle mode never stalls on a transfer, so the closed form is exact;
* ``lower bound``: it does, and the closed form (the larger of the compute path and the DMA
  engine's busy time) must not exceed it.

A row fails when ``analytical > cycle``, or when an ``equal`` row differs.

Public: :data:`CASES`, :class:`AgreementRow`, :func:`agreement_rows`, :func:`format_rows`,
:func:`register`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

__all__ = ["CASES", "AgreementRow", "agreement_rows", "format_rows", "register"]

CASES = (
    ("prefill q_proj", 256, 2048, 2048),
    ("prefill k_proj", 256, 2048, 512),
    ("prefill down_proj", 256, 8192, 2048),
    ("decode gate_up", 1, 2048, 16384),
    ("ragged edges", 100, 1000, 3000),
    ("one tile", 8, 32, 32),
)
"""``(label, M, K, N)`` of the GEMMs compared (Llama-3.2-1B shapes, ragged and tiny ones)."""


@dataclass(frozen=True)
class AgreementRow:
    """One GEMM in both fidelities.

    Attributes:
        case: the GEMM's label. arch: architecture name. freq_mhz: clock, MHz.
        m: rows. k: reduction. n: output channels.
        analytical_cycles: closed form, cycles. cycle_cycles: tile by tile, cycles.
        dram_stall_cycles: the cycle mode's DRAM stall, cycles.
        expected: ``"equal"`` or ``"lower bound"``.
        ok: the row holds what is expected.
    """

    case: str
    arch: str
    freq_mhz: float
    m: int
    k: int
    n: int
    analytical_cycles: int
    cycle_cycles: int
    dram_stall_cycles: int
    expected: str
    ok: bool

    @property
    def error_pct(self) -> float:
        """``(analytical - cycle) / cycle``, percent (<= 0)."""
        return 100.0 * (self.analytical_cycles - self.cycle_cycles) / self.cycle_cycles


def agreement_rows(arch: Any, clock_factors: tuple[float, ...] = (1.0, 4.0)) -> list[AgreementRow]:
    """Both fidelities on every GEMM of :data:`CASES` (module docstring).

    Args:
        arch: a loaded architecture (or a shipped name or path).
        clock_factors: clocks to run at, as multiples of the architecture's.

    Returns:
        One row per case and clock.
    """
    import dataclasses

    from . import analytical, cycle
    from .config import SystolicArchConfig, load_arch
    from .schedule import plan_gemm
    from .workload import Gemm

    base = arch if isinstance(arch, SystolicArchConfig) else load_arch(arch)
    rows = []
    for factor in clock_factors:
        a = dataclasses.replace(base, freq_mhz=base.freq_mhz * factor)
        for label, m, k, n in CASES:
            plan = plan_gemm(a, Gemm(label, m, k, n))
            ta = analytical.gemm_timing(a, plan)
            tc = cycle.gemm_timing(a, plan)
            expected = "equal" if tc.dram_stall == 0 else "lower bound"
            ok = ta.cycles <= tc.cycles and (expected != "equal" or ta.cycles == tc.cycles)
            rows.append(
                AgreementRow(
                    label,
                    a.name,
                    a.freq_mhz,
                    m,
                    k,
                    n,
                    ta.cycles,
                    tc.cycles,
                    tc.dram_stall,
                    expected,
                    ok,
                )
            )
    return rows


def format_rows(rows: list[AgreementRow]) -> str:
    """The table ``coaccel validate systolic`` prints."""
    head = (
        f"{'GEMM':<18s}{'MHz':>6s}{'M':>6s}{'K':>6s}{'N':>7s}{'analytical':>13s}"
        f"{'cycle':>13s}{'error %':>9s}{'stall %':>9s}  {'expected':<12s}verdict"
    )
    lines = [
        "Analytical vs cycle-approximate cycles per GEMM (synthetic shapes, predicted, no fit)",
        head,
    ]
    for r in rows:
        stall = 100.0 * r.dram_stall_cycles / r.cycle_cycles
        lines.append(
            f"{r.case:<18s}{r.freq_mhz:>6g}{r.m:>6d}{r.k:>6d}{r.n:>7d}"
            f"{r.analytical_cycles:>13,d}{r.cycle_cycles:>13,d}{r.error_pct:>9.3f}{stall:>9.2f}"
            f"  {r.expected:<12s}{'pass' if r.ok else 'FAIL'}"
        )
    n_ok = sum(r.ok for r in rows)
    lines.append(f"{n_ok}/{len(rows)} rows as expected (architecture {rows[0].arch})")
    return "\n".join(lines)


def register(sub: Any) -> None:
    """Add ``coaccel validate systolic``.

    Args:
        sub: the ``add_subparsers()`` object of ``coaccel validate``.
    """
    p = sub.add_parser(
        "systolic",
        help="systolic array: analytical vs cycle-approximate cycles on a set of GEMMs",
        description=(
            "Run each GEMM of a fixed set (Llama-3.2-1B shapes, ragged and tiny ones) in both "
            "fidelities, at the architecture's clock and at four times it, and print both "
            "cycle counts, their difference and the cycle mode's DRAM stall. The closed form "
            "must equal the cycle mode where that never stalls, and never exceed it."
        ),
    )
    p.add_argument(
        "--arch",
        default="systolic_32x32",
        metavar="ARCH",
        help="shipped systolic architecture or YAML path (default systolic_32x32)",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run, command="validate systolic")


def run(args: argparse.Namespace) -> int:
    """Print the agreement table (or JSON); exit status 1 when a row fails.

    Args:
        args: the parsed command line.

    Returns:
        0 when every row holds what it expects, else 1.
    """
    import dataclasses
    import json
    import sys

    rows = agreement_rows(args.arch)
    if args.json:
        doc = [dataclasses.asdict(r) | {"error_pct": r.error_pct} for r in rows]
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_rows(rows))
    return 0 if all(r.ok for r in rows) else 1
