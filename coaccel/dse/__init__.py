"""Design-space exploration: sweep specs, executors, search, and a resumable result store.

* :func:`load_spec` reads a sweep spec (``arch_configs/sweeps/*.yaml``, schema
  :class:`SweepSpec`) and checks it against the base architecture.
* :func:`expand` turns it into :class:`Point` s (grid, seeded random, Latin hypercube; filtered
  by constraints); :func:`nsga2_points` searches the same space adaptively (NSGA-II).
* :func:`run_sweep` evaluates the points not stored yet (simulate + cost, and the accuracy of
  each distinct number format), stage by stage, in this process, on a local process pool or on
  a Dask cluster (:func:`open_executor`), and writes each batch to a :class:`Store` (SQLite),
  which exports CSV, Parquet and pandas DataFrames. :func:`estimate_sweep` sizes a sweep first
  (:func:`count_points` counts it without expanding it); one too large is refused
  (:class:`SweepTooLarge`). A store is recognised by its own marker (:func:`inspect_store`);
  anything else is refused untouched.

* :func:`pareto_mask` and :func:`hypervolume` extract the non-dominated points of any number
  of objectives and measure the front.

* :mod:`coaccel.dse.analysis` turns a finished sweep into fronts per workload, a selected
  design and per-component cost breakdowns with provenance (``coaccel sweep-report``).

``docs/dse.md`` describes the spec format, the store, the ``coaccel sweep`` command and the
sweep report.
"""

from .driver import (
    DEFAULT_MAX_POINTS,
    DEFAULT_MAX_STORE_BYTES,
    Progress,
    StageSummary,
    SweepEstimate,
    SweepSummary,
    SweepTooLarge,
    estimate_sweep,
    evaluate_points,
    run_sweep,
)
from .evaluate import failure_reason
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
from .space import (
    Point,
    combinations,
    count_combinations,
    count_points,
    expand,
    iter_combinations,
    kept_fraction,
    point_id,
)
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
from .store import Row, Store, inspect_store

__all__ = [
    "ACCURACY_METRICS",
    "COST_METRICS",
    "DEFAULT_MAX_POINTS",
    "DEFAULT_MAX_STORE_BYTES",
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
    "SweepEstimate",
    "SweepSpec",
    "SweepSummary",
    "SweepTooLarge",
    "combinations",
    "count_combinations",
    "count_points",
    "estimate_sweep",
    "evaluate_points",
    "expand",
    "failure_reason",
    "front_with_margin",
    "hypervolume",
    "inspect_store",
    "iter_combinations",
    "kept_fraction",
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
