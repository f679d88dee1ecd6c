"""The sweep specification: a YAML file (``version: 1``) loaded into frozen dataclasses.

A spec names a base architecture, the workloads, the architecture parameters to vary (dotted
config paths, each with a list of values or a range), constraints between parameters, how to
sample the space, the objectives and limits on the results, and the simulator mode::

    version: 1
    base: hbq_e_28nm
    workloads: [llama-3-8b:prefill_2k]
    mode: analytical
    parameters:
      pe_array.n_pes: [16, 32, 64]
      buffers.psum.size_kib: {start: 68, stop: 204, step: 68}
      buffers.act.size_kib: {log2: [5, 7]}
    constraints:
      - "buffers.psum.size_kib >= pe_array.n_pes * 2"
    strategy: {kind: grid}
    objectives:
      - {metric: edp_js, goal: minimize}
    limits:
      - "area_mm2 <= 2"

:func:`load_spec` reports every problem at once as one :class:`~coaccel.config.ConfigError`
naming the file, the dotted key, the value and what is valid: unknown keys, types, ranges, an
empty range, a parameter path the base architecture does not have, an unknown name in a
constraint or limit, constraints no point satisfies, and an objective no result computes.

The ``accuracy:`` block (:class:`AccuracySpec`, its metrics, its digest and its checks) lives in
the private :mod:`coaccel.dse._spec_accuracy`; its public names are re-exported here.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import operator
import os
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..spine.config import ConfigError, FrozenMap, Problem, config_digest, load_config, param
from ._spec_accuracy import (
    ACCURACY_ADDED,
    ACCURACY_METRICS,
    PERPLEXITY_METRICS,
    SQNR_METRICS,
    AccuracySpec,
    _check_accuracy,
    _check_variants,
    accuracy_digest,
    accuracy_metrics,
)

__all__ = [
    "ACCURACY_ADDED",
    "ACCURACY_METRICS",
    "AccuracySpec",
    "COST_METRICS",
    "ExecutorSpec",
    "Expr",
    "LoadedSpec",
    "Objective",
    "PERPLEXITY_METRICS",
    "ParamRange",
    "SQNR_METRICS",
    "Stage",
    "Strategy",
    "SweepSpec",
    "accuracy_digest",
    "accuracy_metrics",
    "is_scheduler_address",
    "load_spec",
    "parse_expr",
    "satisfiable",
    "spec_digest",
]

COST_METRICS: Mapping[str, str] = FrozenMap(
    {
        "energy_j": "J",
        "area_mm2": "mm2",
        "seconds": "s",
        "edp_js": "J*s",
    }
)
"""Metrics every point has besides its simulator's ``metrics()``: total energy of the run (J),
total area (mm²), run time (s) and the energy-delay product (J·s)."""

Scalar = int | float | bool | str


@dataclass(frozen=True)
class ParamRange:
    """A range of parameter values: ``{start, stop, step}`` or ``{log2: [a, b]}``.

    Attributes:
        start: first value.
        stop: last value, included when the steps land on it.
        step: increment (> 0).
        log2: ``[a, b]``: the powers of two ``2**a .. 2**b`` (integers, ``a <= b``).
    """

    start: int | float | None = None
    stop: int | float | None = None
    step: int | float | None = None
    log2: tuple[int, int] | None = None

    def validate(self) -> list[Problem | str]:
        arith = (self.start, self.stop, self.step)
        if self.log2 is not None:
            if any(v is not None for v in arith):
                return ["give either {start, stop, step} or {log2: [a, b]}, not both"]
            a, b = self.log2
            if a > b:
                return [Problem("", "log2", list(self.log2), f"empty range: {a} > {b}")]
            if b - a > 64:
                return [Problem("", "log2", list(self.log2), "at most 65 powers of two")]
            return []
        if any(v is None for v in arith):
            missing = [
                n for n, v in zip(("start", "stop", "step"), arith, strict=True) if v is None
            ]
            return [
                "a range needs start, stop and step (or log2: [a, b]); missing "
                + ", ".join(missing)
            ]
        if self.step <= 0:  # type: ignore[operator]
            return [Problem("", "step", self.step, f"{self.step} is out of range: must be > 0")]
        if self.stop < self.start:  # type: ignore[operator]
            return [
                Problem(
                    "", "stop", self.stop, f"empty range: stop {self.stop} < start {self.start}"
                )
            ]
        return []

    def values(self) -> tuple[int | float, ...]:
        """The values of the range, in increasing order.

        Returns:
            Integers when start, stop and step are integers (and for ``log2``), else floats.
        """
        if self.log2 is not None:
            a, b = self.log2
            return tuple(2**e for e in range(a, b + 1))
        start, stop, step = typing.cast(
            "tuple[float, float, float]", (self.start, self.stop, self.step)
        )
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        if all(isinstance(v, int) for v in (start, stop, step)):
            return tuple(start + i * step for i in range(n))
        return tuple(float(start + i * step) for i in range(n))


@dataclass(frozen=True)
class Strategy:
    """How the space is sampled.

    Attributes:
        kind: ``grid`` (every combination), ``random`` (``samples`` distinct combinations drawn
            uniformly), ``lhs`` (Latin hypercube: each parameter's values covered evenly) or
            ``nsga2`` (adaptive multi-objective search with Optuna's NSGA-II sampler:
            ``generations`` rounds of ``population`` proposals, each round bred from the best
            points evaluated so far).
        seed: random seed (required for ``random``, ``lhs`` and ``nsga2``).
        samples: number of combinations drawn (required for ``random`` and ``lhs``).
        population: proposals per generation (``nsga2``).
        generations: generations (``nsga2``); at most ``population * generations`` points
            are evaluated.
    """

    kind: Literal["grid", "random", "lhs", "nsga2"] = "grid"
    seed: int | None = param(default=None, ge=0)
    samples: int | None = param(default=None, ge=1)
    population: int | None = param(default=None, ge=2)
    generations: int | None = param(default=None, ge=1)

    def validate(self) -> list[Problem | str]:
        out: list[Problem | str] = []
        needs = {
            "grid": (),
            "random": ("seed", "samples"),
            "lhs": ("seed", "samples"),
            "nsga2": ("seed", "population", "generations"),
        }[self.kind]
        for k in ("seed", "samples", "population", "generations"):
            v = getattr(self, k)
            if k in needs and v is None:
                out.append(Problem("", k, None, f"{self.kind} needs {k}", "an integer"))
            elif k not in needs and v is not None:
                out.append(Problem("", k, v, f"{self.kind} takes no {k}"))
        return out


@dataclass(frozen=True)
class ExecutorSpec:
    """Where the points are evaluated.

    Attributes:
        kind: ``local`` (this machine: in this process or a process pool, ``--workers``),
            ``dask`` (a running Dask scheduler, named by the spec's ``scheduler:`` key or
            ``--scheduler``) or ``slurm`` (Dask workers started as Slurm jobs through
            ``dask-jobqueue``).
        jobs: Slurm jobs to start (``slurm``).
        cores: cores per Slurm job (``slurm``), one single-threaded Dask worker process each.
        memory_gib: memory per Slurm job, GiB (``slurm``).
        queue: Slurm partition (``slurm``; the cluster's default when absent).
        walltime_min: wall-time limit per Slurm job, minutes (``slurm``).
    """

    kind: Literal["local", "dask", "slurm"] = "local"
    jobs: int | None = param(default=None, ge=1)
    cores: int | None = param(default=None, ge=1)
    memory_gib: float | None = param(default=None, gt=0)
    queue: str | None = None
    walltime_min: int | None = param(default=None, ge=1)

    def validate(self) -> list[Problem | str]:
        out: list[Problem | str] = []
        slurm_keys = ("jobs", "cores", "memory_gib", "queue", "walltime_min")
        if self.kind == "slurm":
            for k in ("jobs", "cores", "memory_gib"):
                if getattr(self, k) is None:
                    out.append(Problem("", k, None, f"slurm needs {k}", "a number"))
        else:
            for k in slurm_keys:
                if getattr(self, k) is not None:
                    out.append(Problem("", k, getattr(self, k), f"only kind slurm takes {k}"))
        return out


@dataclass(frozen=True)
class Stage:
    """One fidelity stage of a sweep.

    The first stage evaluates the strategy's points; each later stage re-runs points that the
    stage before it found, in its own mode.

    Attributes:
        name: the stage's name, recorded in each of its rows.
        mode: simulator mode of the stage.
        select: which of the previous stage's feasible points to re-run: ``all``, ``front``
            (the Pareto front over the objectives, per workload, widened by ``margin``) or
            ``top_k`` (the ``top_k`` best by Pareto rank, then by the first objective). The
            first stage takes ``all``.
        margin: ``front``: also keep points that a relative improvement of ``margin`` in every
            objective would put on the front (0: the front itself).
        top_k: ``top_k``: points kept per workload.
    """

    name: str
    mode: Literal["analytical", "cycle"]
    select: Literal["all", "front", "top_k"] = "all"
    margin: float = param(default=0.0, ge=0)
    top_k: int | None = param(default=None, ge=1)

    def validate(self) -> list[Problem | str]:
        out: list[Problem | str] = []
        if self.select == "top_k" and self.top_k is None:
            out.append(Problem("", "top_k", None, "select top_k needs top_k", "an integer"))
        if self.select != "top_k" and self.top_k is not None:
            out.append(Problem("", "top_k", self.top_k, "only select top_k takes top_k"))
        if self.select != "front" and self.margin:
            out.append(Problem("", "margin", self.margin, "only select front takes margin"))
        return out


@dataclass(frozen=True)
class Objective:
    """One objective: a metric to minimize or maximize.

    Attributes:
        metric: a name of the simulator result's ``metrics()`` or of :data:`COST_METRICS`.
        goal: ``minimize`` or ``maximize``.
    """

    metric: str
    goal: Literal["minimize", "maximize"] = "minimize"


@dataclass(frozen=True)
class SweepSpec:
    """A design-space sweep (the schema of ``arch_configs/sweeps/*.yaml``).

    Attributes:
        base: the base architecture, a shipped name (``hbq_e_28nm``) or a YAML path (relative
            paths resolve against the spec's folder first).
        workloads: ``"model[:scenario]"`` names; every point runs on each.
        parameters: dotted architecture key -> a list of values or a :class:`ParamRange`.
        constraints: expressions over parameter names that a point must satisfy
            (``"buffers.psum.size_kib >= pe_array.n_pes * 2"``).
        strategy: how the space is sampled.
        objectives: what the sweep optimizes (names of computed metrics).
        limits: expressions over metric names a result must satisfy to count as feasible
            (``"area_mm2 <= 2"``); results outside are stored and marked infeasible.
        mode: simulator mode, ``analytical`` or ``cycle`` (with ``stages``: the first
            stage's mode).
        description: one line.
        scheduler: address of a running Dask scheduler (``tcp://host:port``) to evaluate on;
            implies ``executor.kind: dask``.
        executor: where points are evaluated (:class:`ExecutorSpec`).
        stages: fidelity stages (:class:`Stage`); none means one stage in ``mode``.
        accuracy: score each point's number formats (:class:`AccuracySpec`), adding
            :data:`ACCURACY_METRICS`.
    """

    VERSION: ClassVar[int] = 1
    base: str
    workloads: tuple[str, ...]
    parameters: Mapping[str, tuple[Scalar, ...] | ParamRange]
    constraints: tuple[str, ...] = ()
    strategy: Strategy = param(default=Strategy())
    objectives: tuple[Objective, ...] = ()
    limits: tuple[str, ...] = ()
    mode: Literal["analytical", "cycle"] = "analytical"
    description: str = ""
    scheduler: str | None = None
    executor: ExecutorSpec = param(default=ExecutorSpec())
    stages: tuple[Stage, ...] = ()
    accuracy: AccuracySpec | None = None

    def validate(self) -> list[Problem | str]:
        out: list[Problem | str] = []
        if not self.workloads:
            out.append(Problem("", "workloads", [], "at least one workload", "model[:scenario]"))
        if not self.parameters:
            out.append(Problem("", "parameters", {}, "at least one parameter to vary"))
        for path, v in self.parameters.items():
            if isinstance(v, tuple) and not v:
                out.append(Problem("", f"parameters.{path}", [], "empty list of values"))
        return out

    def values(self) -> dict[str, tuple[Any, ...]]:
        """Each parameter's values, ranges expanded, in spec order."""
        return {
            p: (v.values() if isinstance(v, ParamRange) else v) for p, v in self.parameters.items()
        }


# ---------------------------------------------------------------------------------------------
# Expressions (constraints and limits), parsed with ast and evaluated by a closed interpreter

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


@dataclass(frozen=True)
class Expr:
    """A parsed constraint or limit.

    Attributes:
        text: the expression as written.
        names: the dotted names it reads.
    """

    text: str
    names: tuple[str, ...]
    _fn: Callable[[Mapping[str, Any]], Any]

    def __call__(self, env: Mapping[str, Any]) -> bool:
        """Evaluate over ``env`` (dotted name -> value); True when the point satisfies it."""
        return bool(self._fn(env))


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def parse_expr(text: str) -> Expr:
    """Parse a constraint or limit safely (no ``eval``: a small interpreter over the ast).

    Accepted: numbers, dotted names, ``+ - * / // % **``, unary ``-``/``not``, comparisons
    (chained too), ``and``/``or``, parentheses.

    Args:
        text: e.g. ``"buffers.psum.size_kib >= pe_array.n_pes * 2"``.

    Returns:
        The :class:`Expr`.

    Raises:
        ValueError: syntax error or a construct outside the accepted set (the message says
            which).
    """
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not a valid expression: {e.msg}") from None
    names: list[str] = []

    def build(node: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
        name = _dotted(node)
        if name is not None:
            names.append(name)
            return lambda env: env[name]
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            value = node.value
            return lambda env: value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            f, a, b = _BINOPS[type(node.op)], build(node.left), build(node.right)
            return lambda env: f(a(env), b(env))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            a = build(node.operand)
            if isinstance(node.op, ast.USub):
                return lambda env: -a(env)
            if isinstance(node.op, ast.Not):
                return lambda env: not a(env)
            return a
        if isinstance(node, ast.BoolOp):
            parts = [build(v) for v in node.values]
            if isinstance(node.op, ast.And):
                return lambda env: all(p(env) for p in parts)
            return lambda env: any(p(env) for p in parts)
        if isinstance(node, ast.Compare) and all(type(o) in _CMPS for o in node.ops):
            terms = [build(node.left), *(build(c) for c in node.comparators)]
            ops = [_CMPS[type(o)] for o in node.ops]

            def cmp(env: Mapping[str, Any]) -> bool:
                vals = [t(env) for t in terms]
                return all(op(x, y) for op, x, y in zip(ops, vals, vals[1:], strict=False))

            return cmp
        what = type(node).__name__
        if isinstance(node, ast.Constant):
            what = f"constant {node.value!r}"
        raise ValueError(
            f"{what} is not allowed; use numbers, dotted names, + - * / // % **, "
            "comparisons, and/or/not"
        )

    fn = build(tree.body)
    return Expr(text, tuple(dict.fromkeys(names)), fn)


# ---------------------------------------------------------------------------------------------
# Loading


def spec_digest(base_digest: str, mode: str, accuracy: AccuracySpec | None = None) -> str:
    """The part of a point's identity that comes from the spec: what changes its result.

    Args:
        base_digest: :func:`~coaccel.config.config_digest` of the base architecture.
        mode: the simulator mode (of the point's stage).
        accuracy: the accuracy study settings (``data`` resolved), when the sweep scores
            accuracy: its rows carry more metrics, so they are other points.

    Returns:
        64 hex digits. Changing the sampling, the constraints, the objectives or the stages'
        selection keeps it, so a larger sweep over the same store reuses the points already
        evaluated.
    """
    doc: dict[str, Any] = {"base": base_digest, "mode": mode}
    if accuracy is not None:
        doc["accuracy"] = accuracy_digest(accuracy)
    text = json.dumps(doc, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with everything the driver needs resolved.

    Attributes:
        spec: the spec as written.
        source: the file it came from.
        base_path: the base architecture's resolved file (or shipped name).
        kind: the base architecture's simulator kind.
        base_digest: config digest of the base architecture.
        digest: :func:`spec_digest`.
        constraints: parsed constraints.
        limits: parsed limits.
        metric_units: every metric a point computes -> unit.
        stages: the stages (one in ``spec.mode`` when the spec lists none).
        accuracy: the accuracy settings with ``data`` resolved (``real`` or ``synthetic``),
            or None.
    """

    spec: SweepSpec
    source: str
    base_path: str
    kind: str
    base_digest: str
    digest: str
    constraints: tuple[Expr, ...]
    limits: tuple[Expr, ...]
    metric_units: Mapping[str, str]
    stages: tuple[Stage, ...] = ()
    accuracy: AccuracySpec | None = None

    def stage_digest(self, stage: Stage) -> str:
        """The spec digest of a stage's points (its mode, the accuracy settings)."""
        return spec_digest(self.base_digest, stage.mode, self.accuracy)


def load_spec(path: str | Path) -> LoadedSpec:
    """Load and fully check a sweep spec.

    Besides the schema, this loads the base architecture, checks every value of every
    parameter against its key's schema (type, unit, range: :func:`coaccel.config.check_value`)
    and each parameter path by applying :func:`coaccel.config.override` to the base once, loads
    every workload, runs one probe evaluation of the base to learn which metrics exist, parses
    constraints and limits, and checks that at least one point of the space satisfies the
    constraints. A value that fails only together with other values (a buffer too small for
    the tile another parameter sets) is not an error here: that point fails and is stored with
    its reason.

    Args:
        path: the YAML file.

    Returns:
        The :class:`LoadedSpec`.

    Raises:
        ConfigError: every problem found, each naming the file, dotted key, value and what is
            valid.
    """
    src = str(path)
    spec = load_config(path, SweepSpec)
    t, arch_path, base = _load_base(src, spec, path)
    problems: list[Problem] = []
    if spec.mode not in t.modes:
        problems.append(
            Problem(src, "mode", spec.mode, f"{t.kind} offers modes {', '.join(t.modes)}",
                    ", ".join(t.modes))
        )  # fmt: skip
    problems += _check_execution(src, spec, t.modes)
    if spec.strategy.kind == "nsga2" and not spec.objectives:
        problems.append(
            Problem(src, "objectives", [], "strategy nsga2 needs at least one objective")
        )
    accuracy = None
    if spec.accuracy is not None:
        accuracy, acc_problems = _check_accuracy(src, spec.accuracy, base)
        problems += acc_problems
    problems += _check_parameters(src, spec, base)
    problems += _check_strategy_size(src, spec)
    workloads, wl_problems = _load_workloads(src, spec, t)
    problems += wl_problems
    if accuracy is not None:
        problems += _check_variants(src, spec.workloads, t, base, accuracy, workloads)
    constraints, c_problems = _parse_constraints(src, spec)
    problems += c_problems
    metric_units: dict[str, str] = {}
    if not problems and workloads:
        metric_units = _probe_metrics(t, base, next(iter(workloads.values())), spec, accuracy)
    limits, l_problems = _parse_limits(src, spec, metric_units)
    problems += l_problems
    if not problems and constraints and not satisfiable(spec, constraints):
        problems.append(
            Problem(src, "constraints", list(spec.constraints),
                    "contradictory: no point of the space satisfies every constraint")
        )  # fmt: skip
    if problems:
        raise ConfigError(problems)
    bd = config_digest(base)
    stages = spec.stages or (Stage(name="main", mode=spec.mode),)
    return LoadedSpec(
        spec=spec,
        source=src,
        base_path=str(arch_path),
        kind=t.kind,
        base_digest=bd,
        digest=spec_digest(bd, spec.mode, accuracy),
        constraints=tuple(constraints),
        limits=tuple(limits),
        metric_units=FrozenMap(metric_units),
        stages=stages,
        accuracy=accuracy,
    )


def _load_base(src: str, spec: SweepSpec, path: str | Path) -> tuple[Any, Path, Any]:
    """The base architecture's target, file and config (a file next to the spec wins)."""
    from ..simulation import find_arch

    base_ref = spec.base
    cand = Path(path).parent / spec.base
    if spec.base.endswith((".yaml", ".yml")) and cand.is_file():
        base_ref = str(cand)
    try:
        t, arch_path = find_arch(base_ref)
        return t, arch_path, t.load_arch(arch_path)
    except ConfigError as e:
        raise ConfigError(
            [
                Problem(
                    src, "base", spec.base, p.message if p.file == "<simulate>" else str(p), p.valid
                )
                for p in e.problems
            ]
        ) from None


def _check_parameters(src: str, spec: SweepSpec, base: Any) -> list[Problem]:
    """Every value of every parameter against its key's schema, and each path once through a
    whole override of the base."""
    from ..spine.config import check_value, dump_config, override

    problems: list[Problem] = []
    dumped = dump_config(base)
    for p, values in spec.values().items():
        bad_value = False
        for i, v in enumerate(values):
            found = check_value(base, p, v)
            for q in found or ():
                bad_value = True
                problems.append(Problem(src, f"parameters.{p}[{i}]", v, q.message, q.valid))
        if bad_value:
            continue
        cur: Any = dumped
        for part in p.split("."):
            cur = cur.get(part, _MISSING) if isinstance(cur, dict) else _MISSING
        probe = values[0] if cur is _MISSING else cur
        try:
            override(base, {p: probe})
        except ConfigError as e:
            for q in e.problems:
                problems.append(
                    Problem(src, f"parameters.{p}", probe, f"{q.key}: {q.message}", q.valid)
                )
    return problems


def _check_strategy_size(src: str, spec: SweepSpec) -> list[Problem]:
    st = spec.strategy
    total = math.prod(len(v) for v in spec.values().values())
    if st.kind == "random" and st.samples is not None and st.samples > total:
        return [
            Problem(src, "strategy.samples", st.samples,
                    f"the space has only {total} combinations", f"1..{total}")
        ]  # fmt: skip
    return []


# Per-process cache: (id of a target, workload string) -> (target, loaded workload). The sweep's
# evaluation (:mod:`.evaluate`) takes its workloads from here, so a workload the spec's check
# loaded (a trace built, for a GPU) is not built again.
_WORKLOADS: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_MAX_WORKLOADS = 64


def loaded_workload(t: Any, name: str) -> Any:
    """``t.load_workload(name)``, once per process (at most 64 kept; errors are not kept; a
    workload read from a file is loaded again when the file changes).

    Args:
        t: the target (:class:`~coaccel.spine.target.SimTarget`).
        name: the workload string.

    Returns:
        The loaded workload.
    """
    key = (id(t), name, _file_stamp(name))
    hit = _WORKLOADS.get(key)
    if hit is None or hit[0] is not t:
        if len(_WORKLOADS) >= _MAX_WORKLOADS:
            _WORKLOADS.clear()
        hit = _WORKLOADS[key] = (t, t.load_workload(name))
    return hit[1]


def _file_stamp(name: str) -> tuple[int, int] | None:
    """Modification time and size of the file a workload string names (the whole string, or
    the part before its scenario), or None when it names none."""
    for cand in dict.fromkeys((name, name.split(":", 1)[0])):
        try:
            st = os.stat(cand)
        except (OSError, ValueError):
            continue
        return (st.st_mtime_ns, st.st_size)
    return None


def _load_workloads(src: str, spec: SweepSpec, t: Any) -> tuple[dict[str, Any], list[Problem]]:
    workloads, problems = {}, []
    for i, w in enumerate(spec.workloads):
        try:
            workloads[w] = loaded_workload(t, w)
        except ConfigError as e:
            problems.append(
                Problem(src, f"workloads[{i}]", w, e.problems[0].message, e.problems[0].valid)
            )
    return workloads, problems


def _parse_constraints(src: str, spec: SweepSpec) -> tuple[list[Any], list[Problem]]:
    param_names = list(spec.parameters)
    constraints, problems = [], []
    for i, c in enumerate(spec.constraints):
        try:
            ex = parse_expr(c)
        except ValueError as err:
            problems.append(Problem(src, f"constraints[{i}]", c, str(err)))
            continue
        bad = [n for n in ex.names if n not in spec.parameters]
        if bad:
            problems.append(
                Problem(src, f"constraints[{i}]", c,
                        f"unknown parameter {bad[0]!r}; constraints name parameters: "
                        f"{', '.join(param_names)}", ", ".join(param_names))
            )  # fmt: skip
            continue
        constraints.append(ex)
    return constraints, problems


def _probe_metrics(t: Any, base: Any, workload: Any, spec: SweepSpec, accuracy: Any) -> dict:
    """The metrics a point reports, with units: one run of the base on the first workload."""
    from ..cost import evaluate

    result = t.simulate(base, workload, mode=spec.mode)
    metric_units = {k: u for k, (_, u) in result.metrics().items()}
    if t.priced_components is not None:
        cb = evaluate(result, base)
        metric_units.update(COST_METRICS)
        if not cb.area_um2:  # priced by memory traffic alone: area does not apply
            metric_units.pop("area_mm2", None)
    if accuracy is not None:
        metric_units.update(accuracy_metrics(accuracy))
    return metric_units


def _parse_limits(
    src: str, spec: SweepSpec, metric_units: Mapping[str, str]
) -> tuple[list[Any], list[Problem]]:
    """The limits, and the objectives' metrics, against the metrics a point reports."""
    limits: list[Any] = []
    problems: list[Problem] = []
    if not metric_units:
        return limits, problems
    known = sorted(metric_units)
    for i, text in enumerate(spec.limits):
        try:
            ex = parse_expr(text)
        except ValueError as err:
            problems.append(Problem(src, f"limits[{i}]", text, str(err)))
            continue
        bad = [n for n in ex.names if n not in metric_units]
        if bad:
            problems.append(_unknown_metric(src, f"limits[{i}]", text, bad[0], known))
            continue
        limits.append(ex)
    for i, o in enumerate(spec.objectives):
        if o.metric not in metric_units:
            problems.append(
                _unknown_metric(src, f"objectives[{i}].metric", o.metric, o.metric, known)
            )
    return limits, problems


_MISSING = object()

_SCHEDULER = re.compile(r"^(tcp|tls|ucx|inproc)://[^\s/:]+(:\d{1,5})?/?$")


def is_scheduler_address(text: str) -> bool:
    """Whether ``text`` looks like a Dask scheduler address (``tcp://host:port``, ``tls://``...)."""
    return bool(_SCHEDULER.match(text))


def _check_execution(src: str, spec: SweepSpec, modes: typing.Sequence[str]) -> list[Problem]:
    """The scheduler, executor and stages keys."""
    out: list[Problem] = []
    if spec.scheduler is not None:
        if not is_scheduler_address(spec.scheduler):
            out.append(
                Problem(
                    src,
                    "scheduler",
                    spec.scheduler,
                    "not a Dask scheduler address",
                    "tcp://host:port (or tls://, ucx://)",
                )
            )
        if spec.executor.kind == "slurm":
            out.append(
                Problem(
                    src,
                    "scheduler",
                    spec.scheduler,
                    "executor.kind slurm starts its own scheduler; give one or the other",
                )
            )
    elif spec.executor.kind == "dask":
        out.append(
            Problem(
                src, "scheduler", None, "executor.kind dask needs a scheduler", "tcp://host:port"
            )
        )
    names: set[str] = set()
    for i, st in enumerate(spec.stages):
        if st.name in names:
            out.append(Problem(src, f"stages[{i}].name", st.name, "stage names must differ"))
        names.add(st.name)
        if st.mode not in modes:
            out.append(
                Problem(
                    src,
                    f"stages[{i}].mode",
                    st.mode,
                    f"the architecture offers modes {', '.join(modes)}",
                    ", ".join(modes),
                )
            )
        if i == 0 and st.select != "all":
            out.append(
                Problem(
                    src,
                    "stages[0].select",
                    st.select,
                    "the first stage evaluates the strategy's points",
                    "all",
                )
            )
        if i > 0 and st.select != "all" and not spec.objectives:
            out.append(
                Problem(
                    src,
                    f"stages[{i}].select",
                    st.select,
                    f"select {st.select} ranks points by the objectives; the spec has none",
                )
            )
    if spec.stages and spec.stages[0].mode != spec.mode:
        out.append(
            Problem(
                src,
                "stages[0].mode",
                spec.stages[0].mode,
                f"differs from mode ({spec.mode}); the first stage runs in the spec's mode",
                spec.mode,
            )
        )
    return out


def satisfiable(spec: SweepSpec, constraints: typing.Sequence[Expr]) -> bool:
    """Whether any combination of the full grid satisfies every constraint (stops at the first).

    Args:
        spec: the sweep.
        constraints: its parsed constraints.

    Returns:
        True when at least one combination satisfies them all.
    """
    values = spec.values()
    names = list(values)
    for combo in itertools.product(*values.values()):
        env = dict(zip(names, combo, strict=True))
        if all(c(env) for c in constraints):
            return True
    return False


def _unknown_metric(src: str, key: str, value: str, name: str, known: list[str]) -> Problem:
    import difflib

    msg = f"no result computes metric {name!r}"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    msg += f"; metrics: {', '.join(COST_METRICS)} and the simulator's metrics()"
    return Problem(src, key, value, msg, ", ".join(known))
