"""Analysis of a finished sweep: fronts, the selected design, and cost breakdowns with provenance.

Pure computation (no files, no plots): :mod:`coaccel.report.sweep` formats the result.

* :func:`analyze` reads a store through :class:`~coaccel.dse.Store`, groups the rows by
  workload (objectives of different workloads are not comparable), extracts each group's Pareto
  front over the objectives (:func:`~coaccel.dse.pareto.pareto_mask`, feasible points only),
  measures it (:func:`~coaccel.dse.pareto.hypervolume`) and picks one selected design.
* :func:`select_index` is the default selection rule: the front point closest (Euclidean) to
  the ideal point after scaling every objective to [0, 1] over the front.
* :func:`objective_spreads` finds each objective's uncertainty per point, for the report's error
  bars and ``value ± spread`` cells: a companion ``<metric>_std`` metric (one standard
  deviation, symmetric; :data:`SPREAD_METRICS` names the companion where it is not that) or a
  ``<metric>_lower`` / ``<metric>_upper`` pair (an interval, asymmetric), stored with each
  point; :attr:`FrontAnalysis.spreads` holds them.
* :func:`point_breakdown` re-runs :func:`coaccel.simulate` and :func:`coaccel.cost.evaluate`
  for one stored point and lists every component's area and energy with unit, one-sigma
  uncertainty and source, plus whether the model behind the figure was fitted on that very
  design (``fitted``), predicts it (``predicted``) or is a published figure used as is
  (``published``), with the validation error from :mod:`coaccel.validate.pe` and the target's
  system-energy validation. It and :func:`component_figures`, :class:`ComponentFigure`,
  :class:`PointBreakdown` and :data:`ROLES` live in the private
  :mod:`coaccel.dse._breakdown` and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..spine.config import FrozenMap
from ..spine.errors import CoaccelError
from ._breakdown import (
    ROLES,
    ComponentFigure,
    PointBreakdown,
    component_figures,
    point_breakdown,
)
from .pareto import hypervolume, pareto_mask, to_minimization
from .space import expand
from .spec import LoadedSpec, load_spec
from .store import Row, Store

__all__ = [
    "DEFAULT_OBJECTIVES",
    "ROLES",
    "ComponentFigure",
    "FrontAnalysis",
    "PointBreakdown",
    "ReportObjective",
    "SPREAD_METRICS",
    "Spread",
    "SweepAnalysis",
    "analyze",
    "component_figures",
    "group_rows",
    "objective_spreads",
    "parse_objectives",
    "point_breakdown",
    "report_objectives",
    "select_index",
]

DEFAULT_OBJECTIVES: tuple[tuple[str, str], ...] = (
    ("energy_j", "min"),
    ("seconds", "min"),
    ("area_mm2", "min"),
)
"""Objectives added (in this order, skipping those present) when a spec names fewer than two:
energy of the run (J), its time (s) and the area (mm²), all minimized."""


SPREAD_METRICS: Mapping[str, str] = FrozenMap({"perplexity": "perplexity_std"})
"""Objective metric -> the stored metric that is its one-standard-deviation spread, where that
is named otherwise than by the generic rule (any metric ``m`` with a stored ``m_std`` has one):
the report draws ``±`` that spread as error bars and prints ``value ± spread``. An objective
with both ``m_lower`` and ``m_upper`` stored instead gets an interval (asymmetric bars from the
lower to the upper value); a standard deviation wins where both are stored."""

_SPREAD_SUFFIX = "_std"
_INTERVAL_SUFFIXES = ("_lower", "_upper")


def _perplexity_note(ls: LoadedSpec | None) -> tuple[str, str]:
    acc = None if ls is None else ls.accuracy
    if acc is None or acc.measure != "perplexity":
        return (
            "one standard deviation of the per-window perplexities (stored metric perplexity_std)",
            "±1 σ over text windows",
        )
    return (
        f"one standard deviation of the per-window perplexities over the {acc.windows} text "
        f"windows of {acc.window_tokens} tokens that {acc.model} scores (stored metric "
        "perplexity_std; the perplexity itself is pooled over every scored token; the "
        f"standard error of that mean is about σ/√{acc.windows})",
        f"±1 σ over {acc.windows} windows",
    )


_SPREAD_NOTES: Mapping[str, Any] = FrozenMap({"perplexity_std": _perplexity_note})
"""Spread metric -> ``f(loaded spec or None) -> (sentence, short label)`` saying what the
spread is over (e.g. how many text windows), where the spec knows it."""


@dataclass(frozen=True)
class Spread:
    """The uncertainty of one objective, per point, as error bars draw it.

    Attributes:
        metric: the objective's metric.
        kind: ``"std"`` (symmetric: value ± the spread metric) or ``"interval"``
            (asymmetric: from the ``_lower`` to the ``_upper`` metric).
        sources: the stored metrics it comes from: ``(m_std,)`` or ``(m_lower, m_upper)``.
        below: float64 ``(n_rows,)``: how far the bar reaches below the value, in the
            objective's unit; NaN where a row lacks the spread or it is not finite or negative
            (no bar drawn there).
        above: float64 ``(n_rows,)``: how far it reaches above the value; NaN likewise.
        low: float64 ``(n_rows,)``: the stored spread as the table prints it: the standard
            deviation (``std``) or the lower value (``interval``); NaN where a row lacks it.
        high: float64 ``(n_rows,)``: the upper value (``interval``); NaN for ``std``.
        what: one sentence for captions: what a bar is and, where known, over how many
            samples.
        short: a few words for a legend or an axis title (``"±1 σ over 4 windows"``).
    """

    metric: str
    kind: str
    sources: tuple[str, ...]
    below: npt.NDArray[np.float64]
    above: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    what: str
    short: str

    def cell(self, value: float, k: int, fmt: Any) -> str:
        """The table cell of row ``k``: ``value ± std`` or ``value [lower, upper]`` (the
        value alone where the row has no spread).

        Args:
            value: the objective's value of row ``k``.
            k: the row's index.
            fmt: ``fmt(float) -> str``, the report's number format.
        """
        if self.kind == "std":
            return fmt(value) if math.isnan(self.low[k]) else f"{fmt(value)} ± {fmt(self.low[k])}"
        if math.isnan(self.low[k]) or math.isnan(self.high[k]):
            return fmt(value)
        return f"{fmt(value)} [{fmt(self.low[k])}, {fmt(self.high[k])}]"


def _column(rows: Sequence[Row], metric: str) -> npt.NDArray[np.float64]:
    out = np.full(len(rows), np.nan)
    for i, r in enumerate(rows):
        got = r.metrics.get(metric)
        if got is not None and isinstance(got[0], (int, float)) and not isinstance(got[0], bool):
            out[i] = float(got[0])
    return out


def _bar(d: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Bar lengths: NaN (no bar) where not finite or negative."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(d) & (d >= 0), d, np.nan)


def objective_spreads(
    rows: Sequence[Row],
    metrics: Sequence[str],
    values: npt.ArrayLike,
    spec: LoadedSpec | None = None,
) -> tuple[Spread | None, ...]:
    """Each objective's uncertainty per point, from the metrics stored with the points.

    For objective ``m``: the standard deviation ``SPREAD_METRICS.get(m, m + "_std")`` when
    any row stores it (bars ``±`` it), else the interval ``m_lower`` .. ``m_upper`` when any
    row stores both (bars from the lower to the upper value), else None. The captions say
    what the spread is over where the spec knows it (:data:`SPREAD_METRICS`; the perplexity's
    text windows from the spec's ``accuracy:`` block).

    Args:
        rows: the rows, in the order of ``values``.
        metrics: the objectives' metric names.
        values: float64 ``(len(rows), len(metrics))``, the objective values.
        spec: the loaded spec, for the notes (None: generic notes).

    Returns:
        One :class:`Spread` or None per objective.
    """
    v = np.asarray(values, dtype=np.float64).reshape(len(rows), len(metrics))
    stored = {k for r in rows for k in r.metrics}
    out: list[Spread | None] = []
    for j, m in enumerate(metrics):
        std = SPREAD_METRICS.get(m, m + _SPREAD_SUFFIX)
        lo_name, hi_name = (m + s for s in _INTERVAL_SUFFIXES)
        if std in stored and std != m:
            sd = _column(rows, std)
            note = _SPREAD_NOTES.get(std)
            what, short = (
                note(spec) if note is not None
                else (f"one standard deviation (stored metric {std})", "±1 σ")
            )  # fmt: skip
            bar = _bar(sd)
            out.append(Spread(m, "std", (std,), bar, bar, sd, np.full(len(rows), np.nan),
                              what, short))  # fmt: skip
        elif lo_name in stored and hi_name in stored:
            lo, hi = _column(rows, lo_name), _column(rows, hi_name)
            with np.errstate(invalid="ignore"):
                out.append(Spread(
                    m, "interval", (lo_name, hi_name), _bar(v[:, j] - lo), _bar(hi - v[:, j]),
                    lo, hi,
                    f"the interval from {lo_name} to {hi_name} stored with each point",
                    "lower .. upper interval",
                ))  # fmt: skip
        else:
            out.append(None)
    return tuple(out)


@dataclass(frozen=True)
class ReportObjective:
    """One objective of the report.

    Attributes:
        metric: metric name (a key of the rows' metrics).
        sense: ``"min"`` or ``"max"``.
        unit: the metric's unit (from the rows).
    """

    metric: str
    sense: str
    unit: str = ""

    @property
    def label(self) -> str:
        """``metric [unit]`` (the unit left out when dimensionless)."""
        return f"{self.metric} [{self.unit}]" if self.unit and self.unit != "1" else self.metric


def parse_objectives(text: str) -> list[tuple[str, str]]:
    """Parse ``"metric[:min|max],..."`` (default ``min``).

    Args:
        text: e.g. ``"edp_js,area_mm2:min,accuracy_sqnr_db:max"``.

    Returns:
        ``[(metric, sense), ...]``.

    Raises:
        CoaccelError: an empty entry or an unknown sense.
    """
    out: list[tuple[str, str]] = []
    for part in text.split(","):
        name, _, sense = part.strip().partition(":")
        sense = sense.strip() or "min"
        sense = {"minimize": "min", "maximize": "max"}.get(sense, sense)
        if not name.strip():
            raise CoaccelError(f"objectives {text!r}: empty entry in the comma-separated list")
        if sense not in ("min", "max"):
            raise CoaccelError(
                f"objective {part.strip()!r}: unknown sense {sense!r}; valid: min, max"
            )
        out.append((name.strip(), sense))
    return out


def report_objectives(
    spec: LoadedSpec, given: Sequence[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """The objectives a report uses.

    Args:
        spec: the loaded spec.
        given: explicit ``(metric, sense)`` pairs; when None, the spec's objectives, completed
            from :data:`DEFAULT_OBJECTIVES` up to three when the spec names fewer than two.

    Returns:
        ``[(metric, sense), ...]`` without repeats.
    """
    if given:
        objs = list(dict.fromkeys((m, s) for m, s in given))
    else:
        objs = [(o.metric, "min" if o.goal == "minimize" else "max") for o in spec.spec.objectives]
        if len(objs) < 2:
            for m, s in DEFAULT_OBJECTIVES:
                if len(objs) >= 3:
                    break
                if m not in {o for o, _ in objs} and m in spec.metric_units:
                    objs.append((m, s))
    return objs


def select_index(values: npt.ArrayLike, senses: Sequence[str], front: npt.ArrayLike) -> int:
    """The default selection rule: the front point closest to the ideal point.

    Every objective is turned into a minimization and scaled to [0, 1] over the front points
    (0 = the best front value, 1 = the worst; an objective constant over the front scales to
    0); the selected point has the smallest Euclidean distance to the origin (the ideal point).
    Ties go to the lowest index.

    Args:
        values: ``(n_points, n_objectives)``.
        senses: ``"min"`` or ``"max"`` per column.
        front: bool ``(n_points,)``, the front mask (at least one True).

    Returns:
        The index of the selected point (into ``values``).

    Raises:
        ValueError: an empty front.
    """
    v = to_minimization(values, senses)
    mask = np.asarray(front, dtype=bool)
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        raise ValueError("the front is empty: nothing to select")
    f = v[idx]
    lo, hi = f.min(axis=0), f.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    d = np.sqrt((((f - lo) / span) ** 2).sum(axis=1))
    return int(idx[int(np.argmin(d))])


@dataclass(frozen=True)
class FrontAnalysis:
    """One workload's points, their front and the selected design.

    Attributes:
        workload: ``"model[:scenario]"``.
        stage: the sweep stage whose rows these are (None for a sweep without stages).
        mode: the simulator mode of those rows.
        objectives: the objectives (metric, sense, unit).
        rows: the workload's evaluated (``ok``) rows, in store order.
        values: float64 ``(len(rows), n_objectives)`` objective values (NaN where a row lacks
            a metric).
        feasible: bool ``(len(rows),)``: every limit holds and every objective is present.
        front: bool ``(len(rows),)``: on the Pareto front of the feasible rows.
        selected: index into ``rows`` of the selected design, or None without a feasible row.
        selection: how it was selected (the rule, or the user's choice).
        hypervolume: the front's hypervolume (product of the objectives' units), NaN without
            a front.
        reference: the hypervolume's reference point, per objective (its own sense and unit).
        failed: the workload's failed rows.
        spreads: per objective, its uncertainty per row (:func:`objective_spreads`) or None;
            empty for an analysis built without them.
    """

    workload: str
    stage: str | None
    mode: str
    objectives: tuple[ReportObjective, ...]
    rows: tuple[Row, ...]
    values: npt.NDArray[np.float64]
    feasible: npt.NDArray[np.bool_]
    front: npt.NDArray[np.bool_]
    selected: int | None
    selection: str
    hypervolume: float
    reference: tuple[float, ...]
    failed: tuple[Row, ...]
    spreads: tuple[Spread | None, ...] = ()

    def spread(self, j: int) -> Spread | None:
        """The uncertainty of objective ``j`` (None where it has none)."""
        return self.spreads[j] if j < len(self.spreads) else None

    @property
    def title(self) -> str:
        """The workload, and the stage with its mode when the sweep has stages."""
        if self.stage is None:
            return self.workload
        return f"{self.workload}, stage {self.stage} ({self.mode})"

    def ranked_front(self) -> list[int]:
        """Front indices, the selected one first, then by distance to the ideal point."""
        idx = [int(i) for i in np.flatnonzero(self.front)]
        if not idx:
            return []
        v = to_minimization(self.values[idx], [o.sense for o in self.objectives])
        lo, hi = v.min(axis=0), v.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        d = np.sqrt((((v - lo) / span) ** 2).sum(axis=1))
        ranked = [idx[i] for i in np.argsort(d, kind="stable")]
        if self.selected is not None:
            ranked = [self.selected] + [i for i in ranked if i != self.selected]
        return ranked


@dataclass(frozen=True)
class SweepAnalysis:
    """Everything a sweep report shows.

    Attributes:
        spec: the loaded spec.
        spec_text: the spec file's text.
        store_path: the store file.
        fronts: one :class:`FrontAnalysis` per workload, in spec order.
        breakdowns: re-evaluated points by point id (the selected and front points).
        n_rows: rows in the store.
        n_foreign: stored rows that are not points of this spec (another sweep's), left out.
        versions: coaccel versions that computed the rows.
    """

    spec: LoadedSpec
    spec_text: str
    store_path: str
    fronts: tuple[FrontAnalysis, ...]
    breakdowns: Mapping[str, PointBreakdown]
    n_rows: int
    n_foreign: int
    versions: tuple[str, ...]


def _reference(v_min: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Hypervolume reference in minimization space: the worst value plus 10 % of the range
    (plus 10 % of its magnitude, or 1, when the range is zero)."""
    worst, best = v_min.max(axis=0), v_min.min(axis=0)
    span = worst - best
    pad = np.where(span > 0, 0.1 * span, np.where(worst != 0, 0.1 * np.abs(worst), 1.0))
    return worst + pad


def _front(
    workload: str,
    stage: str | None,
    mode: str,
    rows: list[Row],
    failed: list[Row],
    objs: list[ReportObjective],
    select: str | None,
    rule: str,
    spec: LoadedSpec | None = None,
) -> FrontAnalysis:
    senses = [o.sense for o in objs]
    values = np.full((len(rows), len(objs)), np.nan)
    for i, r in enumerate(rows):
        for j, o in enumerate(objs):
            if o.metric in r.metrics:
                values[i, j] = float(r.metrics[o.metric][0])
    feasible = np.array([bool(r.feasible) for r in rows], dtype=bool)
    if len(rows):
        feasible &= ~np.isnan(values).any(axis=1)
    front = np.zeros(len(rows), dtype=bool)
    hv, ref = math.nan, tuple(math.nan for _ in objs)
    selected: int | None = None
    selection = "no feasible point"
    fi = np.flatnonzero(feasible)
    if fi.size:
        front[fi] = pareto_mask(values[fi], senses)
        sign = np.array([1.0 if s == "min" else -1.0 for s in senses])
        ref_min = _reference(to_minimization(values[fi], senses))
        ref = tuple(float(x) for x in ref_min * sign)
        hv = hypervolume(values[front], senses, ref)
        if rule == "ideal":
            selected = select_index(values, senses, front)
            selection = (
                "closest to the ideal point: each objective scaled to [0, 1] over the front, "
                "smallest Euclidean distance"
            )
        else:
            metric = rule.partition(":")[2]
            j = [o.metric for o in objs].index(metric)
            col = values[fi, j] if senses[j] == "min" else -values[fi, j]
            # The best feasible value; among ties, the front point closest to the ideal.
            best = fi[col == col.min()]
            tie = np.zeros(len(rows), dtype=bool)
            tie[best] = True
            tie &= front
            selected = select_index(values, senses, tie if tie.any() else front)
            selection = f"best {metric} ({senses[j]}imum) among feasible points"
    if select is not None:
        hits = [i for i, r in enumerate(rows) if r.point_id.startswith(select)]
        if len(hits) == 1:
            selected = hits[0]
            on = "on" if front[selected] else "off"
            selection = f"chosen by the user (--select {select}; {on} the front)"
    return FrontAnalysis(
        workload=workload,
        stage=stage,
        mode=mode,
        objectives=tuple(objs),
        rows=tuple(rows),
        values=values,
        feasible=feasible,
        front=front,
        selected=selected,
        selection=selection,
        hypervolume=hv,
        reference=ref,
        failed=tuple(failed),
        spreads=objective_spreads(rows, [o.metric for o in objs], values, spec),
    )


def _digests(ls: LoadedSpec) -> list[str]:
    """The spec digest and, for a sweep with stages, each stage's (its rows carry those)."""
    out = [ls.digest]
    stage_digest = getattr(ls, "stage_digest", None)
    for stage in getattr(ls, "stages", ()) or ():
        if stage_digest is not None:
            out.append(stage_digest(stage))
    return list(dict.fromkeys(out))


def group_rows(
    rows: Sequence[Row], workloads: Sequence[str], stages: Sequence[str | None] = ()
) -> dict[tuple[str, str | None], list[Row]]:
    """Rows grouped by workload and sweep stage, each group getting its own front.

    Objectives of different workloads do not compare, nor do those of different simulator
    fidelities: a sweep with stages (an analytical screen, then a cycle-level re-run of its
    front) gets one front per stage. When the rows come from one stage only (a sweep without
    stages), there is one group per workload and its stage is None.

    Args:
        rows: stored rows.
        workloads: the spec's workloads (their order is the groups' order; others follow).
        stages: stage names in run order (groups of a workload follow it; others follow).

    Returns:
        ``{(workload, stage): rows}`` in that order, rows in store order.
    """
    split = len({getattr(r, "stage", None) for r in rows}) > 1
    groups: dict[tuple[str, str | None], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.workload, getattr(r, "stage", None) if split else None), []).append(r)
    w_rank = {w: i for i, w in enumerate(workloads)}
    s_rank = {s: i for i, s in enumerate(stages)}
    first = {k: i for i, k in enumerate(groups)}

    def rank(k: tuple[str, str | None]) -> tuple[int, int, int]:
        return (w_rank.get(k[0], len(w_rank)), s_rank.get(k[1], len(s_rank)), first[k])

    return {k: groups[k] for k in sorted(groups, key=rank)}


def analyze(
    spec: str | Path | LoadedSpec,
    store: str | Path | Store,
    *,
    objectives: Sequence[tuple[str, str]] | None = None,
    select: str | None = None,
    rule: str = "ideal",
    max_breakdowns: int = 6,
) -> SweepAnalysis:
    """Analyse a sweep: per workload, the front, the selected design and cost breakdowns.

    Only the rows of the points this spec expands to count; other rows of a shared store
    (another sweep's points) are left out and counted in :attr:`SweepAnalysis.n_foreign`.

    Args:
        spec: the spec file or its :func:`~coaccel.dse.load_spec` result.
        store: the store path or an open :class:`~coaccel.dse.Store`.
        objectives: ``(metric, sense)`` pairs (default :func:`report_objectives`).
        select: a point id (or a unique prefix of one) to select instead of the rule.
        rule: ``"ideal"`` (:func:`select_index`) or ``"best:<metric>"`` (the best feasible
            value of one objective).
        max_breakdowns: how many points per workload get a cost breakdown: the selected one
            and the front points closest to the ideal point (at least 1).

    Returns:
        The :class:`SweepAnalysis`.

    Raises:
        CoaccelError: the store holds no row of this spec; an objective no row computes; a
            bad rule; a ``select`` id that matches no row or several.
    """
    ls = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    all_rows, store_path = _read_store(store)
    mine = _spec_rows(ls, all_rows, store_path)
    ok = [r for r in mine if r.status == "ok"]
    objs = _resolve_objectives(ls, ok, objectives, rule, select)
    fronts = _fronts(ls, mine, objs, select, rule)
    return SweepAnalysis(
        spec=ls,
        spec_text=Path(ls.source).read_text(encoding="utf-8"),
        store_path=store_path,
        fronts=tuple(fronts),
        breakdowns=_breakdowns(ls, fronts, max_breakdowns),
        n_rows=len(all_rows),
        n_foreign=len(all_rows) - len(mine),
        versions=tuple(sorted({r.version for r in mine})),
    )


def _read_store(store: str | Path | Store) -> tuple[list[Row], str]:
    """Every row of a store and its path (a store opened here is closed again)."""
    st = store if isinstance(store, Store) else Store(store, readonly=True)
    try:
        return list(st.rows()), str(st.path)
    finally:
        if not isinstance(store, Store):
            st.close()


def _spec_rows(ls: LoadedSpec, all_rows: Sequence[Row], store_path: str) -> list[Row]:
    """The rows of the points the spec expands to (any stage); raises when there are none."""
    ids = {p.point_id for d in _digests(ls) for p in expand(ls.spec, ls.constraints, d, ls.source)}
    mine = [r for r in all_rows if r.point_id in ids]
    if not mine:
        raise CoaccelError(
            f"store {store_path!r} holds no point of spec {ls.source!r} "
            f"({len(all_rows)} rows of other sweeps); run: coaccel sweep {ls.source} "
            f"--store {store_path}"
        )
    return mine


def _resolve_objectives(
    ls: LoadedSpec,
    ok: Sequence[Row],
    objectives: Sequence[tuple[str, str]] | None,
    rule: str,
    select: str | None,
) -> list[ReportObjective]:
    """The report's objectives with units, after checking them, the rule and ``select``."""
    units: dict[str, str] = dict(ls.metric_units)
    for r in ok:
        for k, (_, u) in r.metrics.items():
            units.setdefault(k, u)
    pairs = report_objectives(ls, objectives)
    unknown = [m for m, _ in pairs if m not in units]
    if unknown:
        import difflib

        hints = [difflib.get_close_matches(m, list(units), n=1) for m in unknown]
        raise CoaccelError(
            "objective(s) no stored point computes: "
            + ", ".join(
                f"{m!r}" + (f" (did you mean {h[0]!r}?)" if h else "")
                for m, h in zip(unknown, hints, strict=True)
            )
        )
    if not pairs:
        raise CoaccelError("no objective: name some with --objectives metric[:min|max],...")
    if rule != "ideal":
        kind, _, metric = rule.partition(":")
        if kind != "best" or metric not in {m for m, _ in pairs}:
            raise CoaccelError(
                f"selection rule {rule!r}: valid: ideal, or best:<objective> with an objective "
                f"of {', '.join(m for m, _ in pairs)}"
            )
    if select is not None:
        hits = [r for r in ok if r.point_id.startswith(select)]
        if len(hits) != 1:
            what = "no evaluated point" if not hits else f"{len(hits)} points"
            raise CoaccelError(f"--select {select!r}: {what} of this sweep has that id")
    return [ReportObjective(m, s, units[m]) for m, s in pairs]


def _fronts(
    ls: LoadedSpec,
    mine: Sequence[Row],
    objs: list[ReportObjective],
    select: str | None,
    rule: str,
) -> list[FrontAnalysis]:
    """One front per workload (and stage), in :func:`group_rows` order."""
    stage_names = [getattr(st_, "name", None) for st_ in getattr(ls, "stages", ()) or ()]
    fronts = []
    for (w, stage), group in group_rows(mine, ls.spec.workloads, stage_names).items():
        g_ok = [r for r in group if r.status == "ok"]
        g_failed = [r for r in group if r.status != "ok"]
        mode = next((m for r in group if (m := getattr(r, "mode", None))), ls.spec.mode)
        sel = select if select is not None and any(
            r.point_id.startswith(select) for r in g_ok
        ) else None  # fmt: skip
        fronts.append(_front(w, stage, mode, g_ok, g_failed, objs, sel, rule, ls))
    return fronts


def _breakdowns(
    ls: LoadedSpec, fronts: Sequence[FrontAnalysis], max_breakdowns: int
) -> dict[str, PointBreakdown]:
    """Cost breakdowns of each front's selected point and the front points nearest the ideal."""
    breakdowns: dict[str, PointBreakdown] = {}
    for fa in fronts:
        picks = fa.ranked_front()
        if fa.selected is not None and fa.selected not in picks:
            picks = [fa.selected, *picks]
        for i in picks[: max(1, max_breakdowns)]:
            r = fa.rows[i]
            breakdowns[r.point_id] = point_breakdown(ls, r)
    return breakdowns
