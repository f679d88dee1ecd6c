"""Evaluating design points: one point is a simulation plus its cost, as one store row.

Each point is :func:`coaccel.simulate` on the base architecture with the point's overrides,
then :func:`coaccel.cost.evaluate`; its row holds every ``metrics()`` entry plus ``energy_j``,
``area_mm2`` and ``edp_js``, each with its unit. :func:`evaluate_points` is what each pool
worker runs on a batch; each process loads the base architecture and the workloads once. A point
that raises becomes a ``failed`` row whose ``error`` is :func:`failure_reason` of the exception:
one line, no traceback.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

from .. import __version__
from .space import Point
from .spec import Expr, loaded_workload, parse_expr
from .store import Row

__all__ = ["REASON_CHARS", "evaluate_points", "failure_reason", "warm"]

REASON_CHARS = 600
"""The longest failure reason stored in full, in characters (a longer one keeps its first two
thirds and last quarter, and says how many characters it left out between them)."""


def failure_reason(exc: BaseException) -> str:
    """A failed point's reason: one line, the exception's type and message, no traceback.

    A message of several lines (a ``ConfigError`` lists one problem a line) is joined with
    ``"; "``; characters that are not printable are escaped. A reason longer than
    :data:`REASON_CHARS` keeps its beginning (the type and the first problem, where the key
    and value are) and its end, and says how many characters it left out between them.

    Args:
        exc: the exception the point raised.

    Returns:
        ``"<ExceptionType>: <message>"`` (``"<ExceptionType>"`` for an empty message).
    """
    lines = [" ".join(line.split()) for line in str(exc).splitlines()]
    message = "; ".join(line for line in lines if line)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) <= REASON_CHARS:
        return text
    head, tail = REASON_CHARS * 2 // 3, REASON_CHARS // 4
    return f"{text[:head]} [... {len(text) - head - tail} characters ...] {text[-tail:]}"


# Per-process cache: (base path, mode) -> (target, base config, {workload: loaded workload}).
_CONTEXT: dict[tuple[str, str], tuple[Any, Any, dict[str, Any]]] = {}


# Per-process cache of the latest designs: (base path, params) -> (config, its digest). Points
# are ordered by combination, then workload, so one design's workloads share one override.
_ARCHS: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Any, str]] = {}


def _context(base_path: str, mode: str, workload: str) -> tuple[Any, Any, Any]:
    from ..simulation import find_arch

    key = (base_path, mode)
    if key not in _CONTEXT:
        t, path = find_arch(base_path)
        _CONTEXT[key] = (t, t.load_arch(path), {})
    t, base, wls = _CONTEXT[key]
    if workload not in wls:
        wls[workload] = loaded_workload(t, workload)
    return t, base, wls[workload]


def warm(base_path: str, mode: str, workloads: Sequence[str]) -> None:
    """Fill this process's caches with what every point of a sweep shares.

    Loads the base architecture and each workload, and prices the base design once (which builds
    the cost model's fitted tables). Called before a local process pool starts, so that forked
    workers inherit the loaded state instead of each rebuilding it. A failure here is ignored:
    every point that meets the same problem records it with its own reason.

    Args:
        base_path: the base architecture (resolved file or shipped name).
        mode: simulator mode of the points.
        workloads: the sweep's workloads.
    """
    from ..cost import evaluate

    try:
        t = base = wl = None
        for name in workloads:
            t, base, wl = _context(base_path, mode, name)
        if t is not None and t.priced_components is not None:
            evaluate(t.simulate(base, wl, mode=t.modes[0]), base)
    except Exception:  # noqa: BLE001 - the points report their own errors
        return


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> Expr:
    """A limit expression, parsed once per process (every point of a sweep checks the same)."""
    return parse_expr(text)


def _evaluate_one(base_path: str, mode: str, digest: str, limits: Sequence[str], pt: Point) -> Row:
    from ..cost import evaluate
    from ..spine.config import config_digest, override

    started = time.time()
    t0 = time.perf_counter()
    cfg_digest = None
    try:
        t, base, wl = _context(base_path, mode, pt.workload)
        key = (base_path, pt.params)
        if key in _ARCHS:  # the same design on the next workload: validated already
            arch, cfg_digest = _ARCHS[key]
        else:
            arch = override(base, pt.overrides)
            cfg_digest = config_digest(arch)
            if len(_ARCHS) >= 256:
                _ARCHS.pop(next(iter(_ARCHS)))
            _ARCHS[key] = (arch, cfg_digest)
        result = t.simulate(arch, wl, mode=mode)
        metrics = {k: (v, u) for k, (v, u) in result.metrics().items()}
        if t.priced_components is not None:
            cb = evaluate(result, arch)
            seconds = float(metrics["seconds"][0])
            metrics["energy_j"] = (cb.total_energy_j, "J")
            if cb.area_um2:  # a design priced by its memory traffic alone has no area
                metrics["area_mm2"] = (cb.total_area_um2 / 1e6, "mm2")
            metrics["edp_js"] = (cb.total_energy_j * seconds, "J*s")
        env = {k: v for k, (v, _) in metrics.items()}
        feasible = all(_parsed(lim)(env) for lim in limits)
        return Row(
            pt.point_id,
            pt.workload,
            dict(pt.params),
            cfg_digest,
            digest,
            metrics,
            feasible,
            "ok",
            None,
            started,
            time.perf_counter() - t0,
            __version__,
        )
    except Exception as exc:  # noqa: BLE001 - a failing point is recorded and the sweep goes on
        return Row(
            pt.point_id,
            pt.workload,
            dict(pt.params),
            cfg_digest,
            digest,
            {},
            None,
            "failed",
            failure_reason(exc),
            started,
            time.perf_counter() - t0,
            __version__,
        )


def evaluate_points(
    base_path: str, mode: str, digest: str, limits: Sequence[str], points: Sequence[Point]
) -> list[Row]:
    """Evaluate a batch of points in this process (what each pool worker runs).

    Args:
        base_path: the base architecture (resolved file or shipped name).
        mode: simulator mode.
        digest: the spec digest recorded in each row.
        limits: limit expressions; a row is feasible when all hold.
        points: the batch.

    Returns:
        One row per point, in order; a point that raised is a ``failed`` row with its
        one-line reason (:func:`failure_reason`).
    """
    return [_evaluate_one(base_path, mode, digest, limits, p) for p in points]
