"""Design-space exploration: sweep specs, a process-pool driver and a resumable result store.

* :func:`load_spec` reads a sweep spec (``arch_configs/sweeps/*.yaml``, schema
  :class:`SweepSpec`) and checks it against the base architecture.
* :func:`expand` turns it into :class:`Point` s (grid, seeded random, Latin hypercube; filtered
  by constraints).
* :func:`run_sweep` evaluates the points not stored yet (simulate + cost) on a local process
  pool and writes each batch to a :class:`Store` (SQLite), which exports CSV, Parquet and
  pandas DataFrames.

* :func:`pareto_mask` and :func:`hypervolume` extract the non-dominated points of any number
  of objectives and measure the front.

* :mod:`coaccel.dse.analysis` turns a finished sweep into fronts per workload, a selected
  design and per-component cost breakdowns with provenance (``coaccel sweep-report``).

``docs/dse.md`` describes the spec format, the store, the ``coaccel sweep`` command and the
sweep report.
"""

from .driver import Progress, SweepSummary, evaluate_points, run_sweep
from .pareto import hypervolume, pareto_mask, to_minimization
from .space import Point, combinations, expand, point_id
from .spec import (
    COST_METRICS,
    Expr,
    LoadedSpec,
    Objective,
    ParamRange,
    Strategy,
    SweepSpec,
    load_spec,
    parse_expr,
    satisfiable,
    spec_digest,
)
from .store import Row, Store

__all__ = [
    "COST_METRICS",
    "Expr",
    "LoadedSpec",
    "Objective",
    "ParamRange",
    "Point",
    "Progress",
    "Row",
    "Store",
    "Strategy",
    "SweepSpec",
    "SweepSummary",
    "combinations",
    "evaluate_points",
    "expand",
    "hypervolume",
    "load_spec",
    "pareto_mask",
    "parse_expr",
    "point_id",
    "run_sweep",
    "satisfiable",
    "spec_digest",
    "to_minimization",
]
