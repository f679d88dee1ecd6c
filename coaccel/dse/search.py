"""Adaptive multi-objective search over a sweep's discrete space: Optuna's NSGA-II.

The strategy ``{kind: nsga2, seed, population, generations}`` runs ``generations`` rounds; each
round asks NSGA-II's sampler for ``population`` combinations (the first round at random, the
later ones bred from the best points so far by crossover and mutation), evaluates them through
the sweep driver and store as one batch, and tells the sampler their objectives. Each
parameter is a categorical choice among its listed values, so proposals stay in the space.

* A combination that breaks a constraint is told as failed without being evaluated; so is a
  point whose evaluation failed. Neither counts towards a generation's population.
* A point outside a limit is evaluated and told with a constraint violation of 1 (Optuna's
  constrained domination: feasible points rank before infeasible ones).
* With several workloads, a combination's objective is the mean over its workloads.
* A combination evaluated before (in this run or stored by an earlier one) is read from the
  store, not recomputed. The sampler is seeded and every result it is told comes from the
  store's values, so a resumed run proposes exactly what the interrupted one did and ends
  with the same points.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..spine.errors import CoaccelError
from .space import Point, point_id
from .spec import LoadedSpec
from .store import Row

__all__ = ["nsga2_points"]


def _violation(trial: Any) -> Sequence[float]:
    return list(trial.user_attrs.get("violation", [0.0]))


def nsga2_points(
    ls: LoadedSpec,
    digest: str,
    evaluate: Callable[[Sequence[Point]], Mapping[str, Row]],
) -> list[Point]:
    """Run the NSGA-II search of a spec.

    Args:
        ls: the loaded spec (strategy ``nsga2``; at least one objective).
        digest: the spec digest of the search's points.
        evaluate: evaluates (or looks up) a batch of points; returns their rows by point id.

    Returns:
        The distinct points proposed (constraint-satisfying), in proposal order.

    Raises:
        CoaccelError: Optuna is not installed.
    """
    try:
        import optuna
    except ImportError:
        raise CoaccelError(
            "strategy nsga2 needs optuna: pip install 'coaccel[dse]' (or optuna)"
        ) from None
    spec = ls.spec
    st = spec.strategy
    values = spec.values()
    names = list(values)
    objectives = spec.objectives
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Optuna 5 reads constraints set on the trial; older releases take a constraints_func.
    per_trial = hasattr(optuna.trial.Trial, "set_constraint")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.NSGAIISampler(
            population_size=int(st.population or 2),
            seed=st.seed,
            constraints_func=None if per_trial else _violation,
        )
    study = optuna.create_study(
        directions=[o.goal for o in objectives],
        sampler=sampler,
    )
    seen: dict[str, Point] = {}
    for _ in range(int(st.generations or 1)):
        trials = [study.ask() for _ in range(int(st.population or 2))]
        plan: list[list[Point] | None] = []
        batch: list[Point] = []
        for t in trials:
            combo = {n: t.suggest_categorical(n, list(values[n])) for n in names}
            if not all(c(combo) for c in ls.constraints):
                plan.append(None)
                continue
            pts = [
                Point(point_id(combo, w, digest), w, tuple(combo.items())) for w in spec.workloads
            ]
            plan.append(pts)
            batch += pts
            for p in pts:
                seen.setdefault(p.point_id, p)
        rows = evaluate(batch)
        for t, planned in zip(trials, plan, strict=True):
            if planned is None:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                continue
            rs = [rows[p.point_id] for p in planned]
            if any(r.status != "ok" for r in rs):
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                continue
            vals = [sum(float(r.metrics[o.metric][0]) for r in rs) / len(rs) for o in objectives]
            violation = 0.0 if all(r.feasible for r in rs) else 1.0
            if per_trial:
                t.set_constraint("limits", violation)
            else:
                t.set_user_attr("violation", [violation])
            study.tell(t, vals)
    return list(seen.values())
