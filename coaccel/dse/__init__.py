"""Design-space exploration: sweep specs, executors, search, and a resumable result store.

* :func:`load_spec` reads a sweep spec (``arch_configs/sweeps/*.yaml``, schema
  :class:`SweepSpec`) and checks it against the base architecture.
* :func:`expand` turns it into :class:`Point` s (grid, seeded random, Latin hypercube; filtered
  by constraints); :func:`nsga2_points` searches the same space adaptively (NSGA-II).
* :func:`run_sweep` evaluates the points not stored yet (simulate + cost, and the accuracy of
  each distinct number format), stage by stage, in this process, on a local process pool or on
  a Dask cluster (:func:`open_executor`), and writes each batch to a :class:`Store` (SQLite),
  which exports CSV, Parquet and pandas DataFrames.

* :func:`pareto_mask` and :func:`hypervolume` extract the non-dominated points of any number
  of objectives and measure the front.

* :mod:`coaccel.dse.analysis` turns a finished sweep into fronts per workload, a selected
  design and per-component cost breakdowns with provenance (``coaccel sweep-report``).

``docs/dse.md`` describes the spec format, the store, the ``coaccel sweep`` command and the
sweep report.
"""

from .driver import Progress, StageSummary, SweepSummary, evaluate_points, run_sweep
from .executors import DaskExecutor, Executor, InlineExecutor, PoolExecutor, open_executor
from .pareto import (
    front_with_margin,
    hypervolume,
    pareto_mask,
    pareto_ranks,
    to_minimization,
    top_k_by_rank,
)
from .search import nsga2_points
from .space import Point, combinations, expand, point_id
from .spec import (
    ACCURACY_METRICS,
    COST_METRICS,
    AccuracySpec,
    ExecutorSpec,
    Expr,
    LoadedSpec,
    Objective,
    ParamRange,
    Stage,
    Strategy,
    SweepSpec,
    load_spec,
    parse_expr,
    satisfiable,
    spec_digest,
)
from .store import Row, Store

__all__ = [
    "ACCURACY_METRICS",
    "COST_METRICS",
    "AccuracySpec",
    "DaskExecutor",
    "Executor",
    "ExecutorSpec",
    "Expr",
    "InlineExecutor",
    "LoadedSpec",
    "Objective",
    "ParamRange",
    "Point",
    "PoolExecutor",
    "Progress",
    "Row",
    "Stage",
    "StageSummary",
    "Store",
    "Strategy",
    "SweepSpec",
    "SweepSummary",
    "combinations",
    "evaluate_points",
    "expand",
    "front_with_margin",
    "hypervolume",
    "load_spec",
    "nsga2_points",
    "open_executor",
    "pareto_mask",
    "pareto_ranks",
    "parse_expr",
    "point_id",
    "run_sweep",
    "satisfiable",
    "spec_digest",
    "to_minimization",
    "top_k_by_rank",
]
