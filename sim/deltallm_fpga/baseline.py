"""Calibration of the TeLLMe-v2 baseline to its published time to first token ([TELLME2]).

TeLLMe-v2 reports a TTFT of 0.45 s for a 64-token and 0.96 s for a 128-token prompt on the
KV260, for the BitNet b1.58 model its public code targets (``bitnet-b1.58-large``). Our model of
that prefill (:func:`._simulate.simulate` with ``engine: tellme_v2``) is

``TTFT(T)·f = layers·T·MACs_lin / r + layers·pairs(T)·(hidden/16 + 8·heads·II)``

with two unknowns, the linear engine's sustained ternary MACs per cycle ``r`` and the softmax
/ PV loop's cycles per (query, head) ``II``. Both enter linearly (as ``1/r`` and ``II``), so
the two published points fix them exactly: :func:`calibrate_tellme` solves the 2 x 2 system.
With two points and two parameters there is no residual to report; the fit is a calibration,
not a validation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from coaccel.spine.workload import ModelShape

from ._simulate import linear_macs_per_token
from .config import DeltaFpgaConfig

__all__ = ["TELLME_V2_TTFT_S", "TellmeCalibration", "calibrate_tellme"]

TELLME_V2_TTFT_S: tuple[tuple[int, float], ...] = ((64, 0.45), (128, 0.96))
"""[TELLME2] abstract: TTFT 0.45-0.96 s for 64-128-token prompts, (tokens, seconds)."""


@dataclasses.dataclass(frozen=True)
class TellmeCalibration:
    """The fitted TeLLMe-v2 parameters.

    Attributes:
        ternary_macs_per_cycle: ``r``, the linear engine's MACs per cycle.
        softmax_ii_cycles: ``II``, cycles per (query, head) of the attention loop.
        points: the (tokens, TTFT seconds) fitted.
    """

    ternary_macs_per_cycle: float
    softmax_ii_cycles: float
    points: tuple[tuple[int, float], ...]


def calibrate_tellme(
    arch: DeltaFpgaConfig,
    model: ModelShape,
    points: Sequence[tuple[int, float]] = TELLME_V2_TTFT_S,
) -> TellmeCalibration:
    """Fit ``r`` and ``II`` of a TeLLMe-v2 design to two (tokens, TTFT) points.

    Args:
        arch: a ``tellme_v2`` design (its clock, ``tellme.query_parallel``,
            ``tellme.qk_elems_per_cycle`` and ``linear.layer_overhead_cycles`` are kept).
        model: the model the TTFT was measured on.
        points: two ``(tokens, seconds)`` pairs.

    Returns:
        The :class:`TellmeCalibration`.

    Raises:
        ValueError: not a tellme_v2 design, not two points, or a fit that is not positive.
    """
    tm = arch.tellme
    if tm is None or len(points) != 2:
        raise ValueError("calibrate_tellme needs a tellme_v2 design and two points")
    f = arch.freq_mhz * 1e6
    qp = tm.query_parallel
    rows, rhs = [], []
    for t_n, sec in points:
        nb = -(-t_n // qp)
        pairs = sum(t_n - qp * b for b in range(nb))
        a = model.layers * t_n * linear_macs_per_token(model)
        b = model.layers * pairs * qp * model.heads
        c = model.layers * (pairs * model.hidden / tm.qk_elems_per_cycle
                            + arch.linear.layer_overhead_cycles)  # fmt: skip
        rows.append([a, b])
        rhs.append(sec * f - c)
    inv_r, ii = np.linalg.solve(np.array(rows, dtype=np.float64), np.array(rhs))
    if not (inv_r > 0 and ii > 0):
        raise ValueError(f"the fit is not physical: 1/r = {inv_r}, II = {ii}")
    return TellmeCalibration(float(1.0 / inv_r), float(ii), tuple(points))
