"""Evaluating a batch of design points at once: the sweep's fast path for analytical modes.

:func:`evaluate_batch` takes the same arguments and returns the same rows as
:func:`~coaccel.dse.evaluate.evaluate_points`, but instead of one simulation, one cost
evaluation and one config digest per point it does, per batch:

* the designs (:mod:`._batch_designs`): each distinct value of each swept key is converted once and
  each changed section (``buffers``, ``pe_array``...) is built and checked once
  (:func:`coaccel.config.override` on the section); a design is the base with its sections
  replaced, checked by the architecture's own ``validate()``. Its digest is the SHA-256 of the
  canonical JSON that :func:`coaccel.config.config_digest` hashes, joined from the kept texts
  of its sections;
* the simulation: the target's batch evaluator (``simulate_batch(archs, workload, *, mode)``,
  see :func:`batch_simulator`) on every design of a workload at once (numpy);
* the cost: :func:`coaccel.cost.price` once per group of designs that share their components,
  with the run counts (MACs, bytes, seconds) as arrays;
* the rows, with the limits checked point by point; :func:`evaluate_batch_records` returns them
  serialized as the store writes them (JSON text of the metrics by a template per metric
  layout), so that the process that stores them does nothing but insert them.

A point the fast path cannot take (a config the shortcut does not build or that fails its
checks, a design the target leaves out, a workload that does not load, a limit naming a missing
metric, a cost the model refuses) is evaluated alone by the per-point path, so that it fails, or
succeeds, with exactly that path's row. Rows equal the per-point path's apart from the timing
fields (``started_at``: the batch's start; ``elapsed_s``: the batch's time shared equally);
tests/unit/test_dse_batch.py checks every metric of every shipped analytical sweep.

Public: :func:`evaluate_batch`, :func:`evaluate_batch_records`, :func:`batch_simulator`,
:func:`supports`, :func:`warm_batch`; :func:`to_record`, :func:`from_record` and
:func:`add_records` (a row as the store's columns, and back; several written at once: the
store's public :meth:`~coaccel.dse.store.Row.record`, :meth:`~coaccel.dse.store.Row.from_record`
and :meth:`~coaccel.dse.store.Store.add_records` under the names the driver imports).

Internal: :class:`_Done` (an evaluated point before it becomes a row), :func:`_evaluate`,
:func:`_costs`, :func:`_metrics_json`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .. import __version__
from ._batch_designs import _designs
from .evaluate import _context, _evaluate_one, _parsed, evaluate_points
from .space import Point
from .store import Row, Store

__all__ = [
    "add_records",
    "batch_simulator",
    "evaluate_batch",
    "evaluate_batch_records",
    "from_record",
    "supports",
    "to_record",
    "warm_batch",
]


def batch_simulator(t: Any) -> Any:
    """The batch evaluator a target declares (its ``simulate_batch``), or None.

    ``simulate_batch(archs, workload, *, mode) -> dict | None`` (the return value is described
    in :func:`coaccel.sim.hbq_asic._batch.simulate_batch`).

    Args:
        t: a :class:`~coaccel.spine.target.SimTarget`.

    Returns:
        The callable, or None when the target has none.
    """
    return getattr(t, "simulate_batch", None)


def supports(base_path: str, mode: str) -> bool:
    """Whether points of this base architecture and mode take the batch path.

    Args:
        base_path: the base architecture (resolved file or shipped name).
        mode: the simulator mode.

    Returns:
        True when the target has a batch evaluator and ``mode`` is its analytical mode.
    """
    from ..simulation import find_arch

    key = (base_path, mode)
    got = _SUPPORTS.get(key)
    if got is None:
        try:
            t, _ = find_arch(base_path)
        except Exception:  # noqa: BLE001 - the per-point path reports it, point by point
            return False
        got = _SUPPORTS[key] = mode == "analytical" and batch_simulator(t) is not None
    return got


_SUPPORTS: dict[tuple[str, str], bool] = {}


def warm_batch(
    base_path: str,
    mode: str,
    workloads: Sequence[str],
    values: Mapping[str, Sequence[Any]] | None = None,
) -> None:
    """Fill this process's caches for the batch path (before a pool forks its workers).

    Runs the batch evaluator on the base design for each workload (its per-workload tables),
    and converts each value of each swept key once (a DRAM preset file is read here, not in
    every worker); failures are ignored (the points report them).

    Args:
        base_path: the base architecture. mode: the simulator mode.
        workloads: the sweep's workloads.
        values: each swept key's values (:meth:`~coaccel.dse.spec.SweepSpec.values`).
    """
    try:
        t, base, _ = _context(base_path, mode, workloads[0])
        fn = batch_simulator(t)
        if fn is None:
            return
        designs = _designs(base_path, mode, base)
        for key, vals in (values or {}).items():
            for v in vals:
                designs.build(((key, v),))
        for w in workloads:
            fn([base], _context(base_path, mode, w)[2], mode=mode)
    except Exception:  # noqa: BLE001 - the points report their own errors
        return


def _costs(t: Any, res: Mapping[str, Any], n: int) -> list[tuple[float, float | None] | None]:
    """Per design of a batch result: (energy, J; area, mm2 or None), or None (evaluated alone).

    Each priced group is one :func:`coaccel.cost.price` call with array run counts; its totals
    add the components in the order :class:`~coaccel.cost.CostBreakdown` does.
    """
    import numpy as np

    from ..cost import price

    out: list[tuple[float, float | None] | None] = [None] * n
    for pc, ids in res["priced"]:
        try:
            cb = price(pc)
            energy = np.broadcast_to(sum(cb.energy_j.values()), (len(ids),)).tolist()
            area: list[Any] = [None] * len(ids)
            if cb.area_um2:
                area = (np.broadcast_to(sum(cb.area_um2.values()), (len(ids),)) / 1e6).tolist()
        except Exception:  # noqa: BLE001 - evaluated alone, the point fails with its reason
            continue
        for i, e, a in zip(ids, energy, area, strict=True):
            out[i] = (float(e), a)
    return out


@dataclasses.dataclass
class _Done:
    """An evaluated point of the fast path, before it becomes a row or a record.

    Attributes:
        pt: the point. cfg_digest: its design's digest.
        names, units, vals: its simulation metrics (shared name and unit tuples).
        extra: the cost metrics, ``(name, value, unit)`` each (energy, area, EDP).
        feasible: every limit holds.
    """

    pt: Point
    cfg_digest: str
    names: tuple[str, ...]
    units: tuple[str, ...]
    vals: tuple[Any, ...]
    extra: tuple[tuple[str, float, str], ...]
    feasible: bool

    def metrics(self) -> dict[str, tuple[Any, str]]:
        """name -> (value, unit), in the per-point path's order."""
        out = dict(zip(self.names, zip(self.vals, self.units, strict=True), strict=True))
        for name, v, u in self.extra:
            out[name] = (v, u)
        return out


# (id of a names tuple, the names an expression reads) -> (names, their positions in it)
_POSITIONS: dict[tuple[int, tuple[str, ...]], tuple[Any, tuple[int, ...]]] = {}


def _env(
    wanted: tuple[str, ...], names: tuple[str, ...], vals: tuple[Any, ...], extra: Any
) -> dict[str, Any]:
    """The values of the metrics ``wanted`` (a limit's names), from the simulation metrics
    ``names`` / ``vals`` and the cost metrics ``extra``.

    Raises:
        KeyError: a metric neither has.
    """
    key = (id(names), wanted)
    hit = _POSITIONS.get(key)
    if hit is None or hit[0] is not names:
        where = {n: i for i, n in enumerate(names)}
        pos = tuple(where.get(n, -1) for n in wanted)
        if len(_POSITIONS) >= 256:
            _POSITIONS.clear()
        hit = _POSITIONS[key] = (names, pos)
    out = {}
    for n, i in zip(wanted, hit[1], strict=True):
        if i >= 0:
            out[n] = vals[i]
        else:
            got = [v for m, v, _ in extra if m == n]
            if not got:
                raise KeyError(n)
            out[n] = got[0]
    return out


def _done_of_workload(
    fn: Any, t: Any, wl: Any, items: list[tuple[Point, Any, str]], mode: str,
    limits: Sequence[str],
) -> list[_Done | None]:  # fmt: skip
    """The points of one workload (``items``: point, design, design digest); None for a point
    to evaluate alone."""
    res = fn([a for _, a, _ in items], wl, mode=mode)
    if res is None:
        return [None] * len(items)
    priced = t.priced_components is not None
    costs = _costs(t, res, len(items)) if priced else None
    exprs = [_parsed(lim) for lim in limits]
    out: list[_Done | None] = []
    for i, ((pt, _, cfg_digest), got) in enumerate(zip(items, res["values"], strict=True)):
        cost = costs[i] if costs is not None else None
        if got is None or (priced and cost is None):
            out.append(None)
            continue
        names, units, vals = got
        extra: tuple[tuple[str, float, str], ...] = ()
        if cost is not None:
            energy, area = cost
            seconds = float(vals[names.index("seconds")])
            extra = ((("energy_j", energy, "J"),)
                     + ((("area_mm2", area, "mm2"),) if area is not None else ())
                     + (("edp_js", energy * seconds, "J*s"),))  # fmt: skip
        try:
            feasible = all(e(_env(e.names, names, vals, extra)) for e in exprs)
        except Exception:  # noqa: BLE001 - e.g. a limit on a missing metric: evaluated alone
            out.append(None)
            continue
        out.append(_Done(pt, cfg_digest, names, units, vals, extra, feasible))
    return out


def _evaluate(
    base_path: str, mode: str, limits: Sequence[str], points: Sequence[Point]
) -> list[_Done | None] | None:
    """The fast path's results for ``points`` (None for each point to evaluate alone), or
    None when the target has no batch evaluator for the mode."""
    try:
        t, base, _ = _context(base_path, mode, points[0].workload)
        fn = batch_simulator(t) if mode == "analytical" else None
    except Exception:  # noqa: BLE001 - the per-point path reports it
        fn = None
    if fn is None:
        return None
    designs = _designs(base_path, mode, base)
    built: dict[tuple[tuple[str, Any], ...], Any] = {}
    by_wl: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        if p.params not in built:
            built[p.params] = designs.build(p.params)
        if built[p.params] is not None:
            by_wl.setdefault(p.workload, []).append(i)
    out: list[_Done | None] = [None] * len(points)
    for w, idx in by_wl.items():
        try:
            wl = _context(base_path, mode, w)[2]
            items = [(points[i], *built[points[i].params]) for i in idx]
            got = _done_of_workload(fn, t, wl, items, mode, limits)
        except Exception:  # noqa: BLE001 - a workload that does not load: point by point
            continue
        for i, d in zip(idx, got, strict=True):
            out[i] = d
    return out


def evaluate_batch(
    base_path: str, mode: str, digest: str, limits: Sequence[str], points: Sequence[Point]
) -> list[Row]:
    """Evaluate a batch of points at once (module docstring); the per-point path's rows.

    Args:
        base_path: the base architecture (resolved file or shipped name).
        mode: simulator mode (a target without a batch evaluator for it: the per-point path).
        digest: the spec digest recorded in each row.
        limits: limit expressions; a row is feasible when all hold.
        points: the batch.

    Returns:
        One row per point, in order, equal to :func:`~coaccel.dse.evaluate.evaluate_points`'s
        apart from ``started_at`` and ``elapsed_s`` (for the points evaluated together: the
        batch's start, and its time shared equally).
    """
    if not points:
        return []
    started, t0 = time.time(), time.perf_counter()
    done = _evaluate(base_path, mode, limits, points)
    if done is None:
        return evaluate_points(base_path, mode, digest, limits, points)
    each = (time.perf_counter() - t0) / max(1, sum(d is not None for d in done))
    return [
        Row(
            d.pt.point_id,
            d.pt.workload,
            dict(d.pt.params),
            d.cfg_digest,
            digest,
            d.metrics(),
            d.feasible,
            "ok",
            None,
            started,
            each,
            __version__,
        )  # fmt: skip
        if d is not None
        else _evaluate_one(base_path, mode, digest, limits, points[i])
        for i, d in enumerate(done)
    ]


# ---------------------------------------------------------------------------------------------
# Rows as the store writes them: serialized where they are evaluated


def to_record(row: Row) -> tuple[Any, ...]:
    """A row as the store's columns: :meth:`~coaccel.dse.store.Row.record`."""
    return row.record()


def from_record(record: Sequence[Any]) -> Row:
    """The row of a record (:func:`to_record`): :meth:`~coaccel.dse.store.Row.from_record`."""
    return Row.from_record(record)


def add_records(st: Store, records: Sequence[tuple[Any, ...]]) -> int:
    """Write serialized rows to a store in one transaction
    (:meth:`~coaccel.dse.store.Store.add_records`); rows whose point id is stored already are
    skipped.

    Returns:
        How many rows were new.
    """
    return st.add_records(records)


# (id of the names tuple, id of the units tuple, cost names) -> (names, units, %-template)
_TEMPLATES: dict[tuple[Any, ...], tuple[Any, Any, str]] = {}


def _metrics_json(d: _Done) -> str:
    """``json.dumps`` of the row's metrics (as the store writes them), by a template per metric
    layout: numbers print as ``json`` prints them (``repr``), names and units are encoded once.
    Anything but finite ints and floats takes ``json.dumps`` itself."""
    key = (id(d.names), id(d.units), tuple((n, u) for n, _, u in d.extra))
    hit = _TEMPLATES.get(key)
    if hit is None or hit[0] is not d.names or hit[1] is not d.units:
        pairs = [*zip(d.names, d.units, strict=True), *key[2]]
        body = ", ".join(
            json.dumps(n).replace("%", "%%") + ": [%s, " + json.dumps(u).replace("%", "%%") + "]"
            for n, u in pairs
        )
        if len(_TEMPLATES) >= 256:
            _TEMPLATES.clear()
        hit = _TEMPLATES[key] = (d.names, d.units, "{" + body + "}")
    vals = d.vals + tuple([v for _, v, _ in d.extra])
    # numbers only, all finite (an infinity or NaN makes the sum one): else json.dumps itself
    if not set(map(type, vals)) <= _NUMBERS or not math.isfinite(sum(vals)):
        return json.dumps({k: list(x) for k, x in d.metrics().items()})
    return hit[2] % vals


_NUMBERS = {int, float}

# parameter names (in the point's order) -> (their sorted positions, %-template)
_PARAM_TEMPLATES: dict[tuple[str, ...], tuple[tuple[int, ...], str]] = {}
_VALUE_TEXTS: dict[tuple[type, Any], str] = {}  # (type, scalar) -> its JSON text
_SCALARS = (int, float, str, bool, type(None))


def _value_json(v: Any) -> str:
    """``json.dumps(v, sort_keys=True)``, kept per scalar value."""
    if type(v) not in _SCALARS or (type(v) is float and v == 0.0):  # -0.0 == 0.0 as keys
        return json.dumps(v, sort_keys=True)
    key = (type(v), v)
    got = _VALUE_TEXTS.get(key)
    if got is None:
        if len(_VALUE_TEXTS) >= 65536:
            _VALUE_TEXTS.clear()
        got = _VALUE_TEXTS[key] = json.dumps(v)
    return got


def _params_json(params: tuple[tuple[str, Any], ...]) -> str:
    """``json.dumps(dict(params), sort_keys=True)``: names encoded once per layout, values
    once per distinct scalar."""
    keys = tuple([k for k, _ in params])
    hit = _PARAM_TEMPLATES.get(keys)
    if hit is None:
        if len(set(keys)) != len(keys):  # a repeated name: the dict keeps the last value
            return json.dumps(dict(params), sort_keys=True)
        order = tuple(sorted(range(len(keys)), key=keys.__getitem__))
        body = ", ".join(json.dumps(keys[i]).replace("%", "%%") + ": %s" for i in order)
        if len(_PARAM_TEMPLATES) >= 256:
            _PARAM_TEMPLATES.clear()
        hit = _PARAM_TEMPLATES[keys] = (order, "{" + body + "}")
    return hit[1] % tuple([_value_json(params[i][1]) for i in hit[0]])


def evaluate_batch_records(
    base_path: str,
    mode: str,
    digest: str,
    limits: Sequence[str],
    stage: str,
    points: Sequence[Point],
) -> list[tuple[Any, ...]]:
    """:func:`evaluate_batch`, as the store's records of ``stage`` (what a worker sends back:
    serialized here, a row costs the process that stores it only its insert).

    Args:
        base_path, mode, digest, limits, points: as :func:`evaluate_batch`.
        stage: the stage's name, recorded in each row (with ``mode``).

    Returns:
        One record per point (:func:`to_record` of the row with its stage and mode).
    """
    if not points:
        return []
    started, t0 = time.time(), time.perf_counter()
    done = _evaluate(base_path, mode, limits, points)
    if done is None:
        rows = evaluate_points(base_path, mode, digest, limits, points)
        return [to_record(r)[:-2] + (stage, mode) for r in rows]
    each = (time.perf_counter() - t0) / max(1, sum(d is not None for d in done))
    params: dict[Any, str] = {}
    out = []
    for i, d in enumerate(done):
        if d is None:
            row = _evaluate_one(base_path, mode, digest, limits, points[i])
            out.append(to_record(row)[:-2] + (stage, mode))
            continue
        pt = d.pt
        ptext = params.get(pt.params)
        if ptext is None:
            ptext = params[pt.params] = _params_json(pt.params)
        out.append((pt.point_id, pt.workload, ptext, d.cfg_digest, digest, _metrics_json(d),
                    int(d.feasible), "ok", None, started, each, __version__, stage,
                    mode))  # fmt: skip
    return out
