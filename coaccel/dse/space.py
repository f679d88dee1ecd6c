"""Expanding a sweep's design space into points: grid, seeded random, Latin hypercube.

Every expansion is deterministic: the same spec (and seed) gives the same points in the same
order. Constraints filter the combinations; each surviving combination runs on every workload.

:func:`count_points` sizes a sweep without expanding it (a range is counted, not listed), and
:func:`kept_fraction` estimates the share of combinations the constraints keep from a seeded
sample, so that a sweep too large to run is refused before any work.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import operator
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..spine.config import ConfigError, Problem
from .spec import Expr, ParamRange, SweepSpec

__all__ = [
    "Point",
    "combinations",
    "count_combinations",
    "count_points",
    "expand",
    "iter_combinations",
    "kept_fraction",
    "point_id",
]


@dataclass(frozen=True)
class Point:
    """One design point on one workload.

    Attributes:
        point_id: stable id (:func:`point_id`), 32 hex digits.
        workload: ``"model[:scenario]"``.
        params: dotted architecture key -> value, in spec order.
    """

    point_id: str
    workload: str
    params: tuple[tuple[str, Any], ...]

    @property
    def overrides(self) -> dict[str, Any]:
        """The parameters as :func:`coaccel.config.override` changes."""
        return dict(self.params)


def point_id(params: Mapping[str, Any], workload: str, digest: str) -> str:
    """A point's stable id: SHA-256 of its parameters, workload and spec digest.

    Args:
        params: dotted key -> value.
        workload: ``"model[:scenario]"``.
        digest: :func:`coaccel.dse.spec.spec_digest` of the sweep.

    Returns:
        32 hex digits; independent of parameter order and process.
    """
    text = json.dumps(
        {"p": dict(params), "w": workload, "s": digest},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _grid(values: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    names = list(values)
    for combo in itertools.product(*(values[n] for n in names)):
        yield dict(zip(names, combo, strict=True))


def combinations(spec: SweepSpec, source: str = "<spec>") -> list[dict[str, Any]]:
    """The parameter combinations the strategy picks, before constraints.

    ``grid``: every combination, in spec order (the last parameter varies fastest).
    ``random``: ``samples`` distinct combinations drawn uniformly with ``numpy``'s
    ``default_rng(seed)``. ``lhs``: a Latin hypercube of ``samples`` rows: for each parameter,
    ``samples`` equal strata of [0, 1) each hit once in a seeded random order, mapped onto the
    parameter's values; repeated rows (a parameter with fewer values than samples) are kept
    once. ``nsga2``: the whole grid, the space the search explores (which of its points the
    search evaluates is decided as it runs: :func:`coaccel.dse.search.nsga2_points`).

    Args:
        spec: the sweep.
        source: the spec's file, for the message.

    Returns:
        Dicts of dotted key -> value.

    Raises:
        ConfigError: ``random`` asks for more samples than the space has combinations.
    """
    return list(iter_combinations(spec, source))


def iter_combinations(spec: SweepSpec, source: str = "<spec>") -> Iterator[dict[str, Any]]:
    """:func:`combinations`, one at a time (a grid is never held whole)."""
    values = spec.values()
    names = list(values)
    for row in _index_rows(spec, values, source):
        yield {n: values[n][i] for n, i in zip(names, row, strict=True)}


def _index_rows(
    spec: SweepSpec, values: Mapping[str, Sequence[Any]], source: str
) -> Iterator[tuple[int, ...]]:
    """The combinations :func:`combinations` picks, as the index of each parameter's value."""
    names = list(values)
    sizes = [len(values[n]) for n in names]
    st = spec.strategy
    if st.kind in ("grid", "nsga2"):
        yield from itertools.product(*(range(s) for s in sizes))
        return
    total = math.prod(sizes)
    samples = int(st.samples or 0)
    rng = np.random.default_rng(st.seed)
    if st.kind == "random":
        if samples > total:
            raise ConfigError(
                [
                    Problem(
                        source,
                        "strategy.samples",
                        samples,
                        f"the space has only {total} combinations",
                        f"1..{total}",
                    )
                ]
            )
        seen: dict[tuple[int, ...], None] = {}
        while len(seen) < samples:
            idx = tuple(int(rng.integers(0, s)) for s in sizes)
            seen.setdefault(idx, None)
        yield from seen
        return
    cols = []
    for s in sizes:
        u = (rng.permutation(samples) + rng.random(samples)) / samples
        cols.append(np.minimum((u * s).astype(np.int64), s - 1))
    yield from dict.fromkeys(tuple(int(c[i]) for c in cols) for i in range(samples))


def _n_values(v: tuple[Any, ...] | ParamRange) -> int:
    """How many values a parameter takes, without listing a range (as ``ParamRange.values``)."""
    if not isinstance(v, ParamRange):
        return len(v)
    if v.log2 is not None:
        return max(0, v.log2[1] - v.log2[0] + 1)
    start, stop, step = (float(x) for x in (v.start or 0, v.stop or 0, v.step or 1))
    return max(0, int(math.floor((stop - start) / step + 1e-9)) + 1)


def count_combinations(spec: SweepSpec) -> int:
    """How many combinations the strategy picks (before constraints), without listing them.

    ``grid`` and ``nsga2``: the product of the parameters' value counts (for ``nsga2`` the space
    it searches, not what it evaluates); ``random`` and ``lhs``: at most ``samples``.

    Args:
        spec: the sweep.

    Returns:
        The count.
    """
    total = math.prod(_n_values(v) for v in spec.parameters.values())
    if spec.strategy.kind in ("random", "lhs"):
        return min(total, int(spec.strategy.samples or 0))
    return total


def count_points(spec: SweepSpec) -> int:
    """The most points the first stage of a sweep evaluates, counted without expanding it.

    Combinations (:func:`count_combinations`, before constraints) times workloads; for
    ``nsga2``, ``population x generations`` times workloads (what the search may evaluate).
    Later stages re-run a selection of these points.

    Args:
        spec: the sweep.

    Returns:
        The count.
    """
    st = spec.strategy
    if st.kind == "nsga2":
        combos = int(st.population or 0) * int(st.generations or 0)
    else:
        combos = count_combinations(spec)
    return combos * len(spec.workloads)


def _satisfies(constraints: Sequence[Expr]) -> Callable[[Mapping[str, Any]], bool]:
    """``all(c(combo) for c in constraints)``, each constraint evaluated once per distinct
    value of the parameters it reads (a grid repeats them in many combinations)."""
    memo: list[dict[tuple[Any, ...], bool]] = [{} for _ in constraints]
    # each constraint's names, fetched in one call (a 1-tuple for one name)
    getters = [
        (lambda d, n=c.names[0]: (d[n],)) if len(c.names) == 1 else operator.itemgetter(*c.names)
        for c in constraints
    ]

    def ok(combo: Mapping[str, Any]) -> bool:
        for c, seen, get in zip(constraints, memo, getters, strict=True):
            try:
                vals = get(combo) if c.names else ()
                # 1, 1.0 and True are equal keys, and so are 0.0 and -0.0: types tell the
                # first apart; a zero is evaluated each time
                key = None if 0 in vals else (tuple(map(type, vals)), vals)
                hit = seen.get(key) if key is not None else None
            except (KeyError, TypeError):  # a name it does not find, a value not hashable
                key, hit = None, None
            if hit is None:
                hit = c(combo)
                if key is not None and len(seen) < 65536:
                    seen[key] = hit
            if not hit:
                return False
        return True

    return ok


def kept_fraction(spec: SweepSpec, constraints: Sequence[Expr], samples: int = 2000) -> float:
    """The share of the grid's combinations that satisfy the constraints.

    Exact when the grid has at most ``samples`` combinations; else estimated from ``samples``
    combinations drawn uniformly (seeded, so the same spec gives the same estimate) without
    listing the grid.

    Args:
        spec: the sweep.
        constraints: its parsed constraints.
        samples: combinations to test at most.

    Returns:
        A fraction in [0, 1] (1 without constraints).
    """
    if not constraints:
        return 1.0
    values = spec.values()
    names = list(values)
    sizes = [len(values[n]) for n in names]
    total = math.prod(sizes)
    if total == 0:
        return 0.0
    if total <= samples:
        picks: Iterator[int] | range = range(total)
        n = total
    else:
        rng = random.Random(0)
        picks = (rng.randrange(total) for _ in range(samples))
        n = samples
    kept = 0
    ok = _satisfies(constraints)
    for index in picks:
        combo = {}
        for name, size in zip(reversed(names), reversed(sizes), strict=True):
            index, i = divmod(index, size)  # mixed radix: the last parameter varies fastest
            combo[name] = values[name][i]
        kept += ok(combo)
    return kept / n


def expand(
    spec: SweepSpec, constraints: Sequence[Expr], digest: str, source: str = "<spec>"
) -> list[Point]:
    """The points of a sweep: combinations that satisfy the constraints, times workloads.

    Args:
        spec: the sweep.
        constraints: its parsed constraints.
        digest: the spec digest that goes into each point id.
        source: the spec's file, for messages.

    Returns:
        Points ordered by combination, then workload.
    """
    values = spec.values()
    names = list(values)
    where = {n: i for i, n in enumerate(names)}
    cols = [values[n] for n in names]
    # point_id's text, '{"p":<params>,"s":<digest>,"w":<workload>}' (keys sorted, compact):
    # each parameter's '"name":value' text made once per value, the rest once per workload
    order = sorted(range(len(names)), key=names.__getitem__)
    pieces = [
        [json.dumps(names[i]) + ":" + _compact(v) for v in cols[i]] for i in order
    ]  # fmt: skip
    tails = [
        (w, ',"s":' + json.dumps(digest) + ',"w":' + json.dumps(w) + "}") for w in spec.workloads
    ]
    # (constraint, the positions it reads, its result by their indices); a constraint naming
    # something other than a parameter is evaluated each time (and fails with its message)
    checks: list[tuple[Expr, tuple[int, ...] | None, dict[tuple[int, ...], Any]]] = [
        (c, tuple(where[n] for n in c.names) if all(n in where for n in c.names) else None, {})
        for c in constraints
    ]
    out = []
    for idx in _index_rows(spec, values, source):
        keep = True
        for c, at, seen in checks:
            key = tuple([idx[j] for j in at]) if at is not None else None
            hit = seen.get(key) if key is not None else None
            if hit is None:
                hit = c({n: cols[i][idx[i]] for i, n in enumerate(names)})
                if key is not None and len(seen) < 65536:
                    seen[key] = hit
            if not hit:
                keep = False
                break
        if not keep:
            continue
        head = '{"p":{' + ",".join([p[idx[o]] for p, o in zip(pieces, order, strict=True)]) + "}"
        params = tuple(zip(names, [cols[i][k] for i, k in enumerate(idx)], strict=True))
        for w, tail in tails:
            pid = hashlib.sha256((head + tail).encode()).hexdigest()[:32]
            out.append(Point(pid, w, params))
    return out


def _compact(v: Any) -> str:
    """``json.dumps(v, sort_keys=True, separators=(",", ":"))``: a value's text in a point id."""
    return json.dumps(v, sort_keys=True, separators=(",", ":"))
