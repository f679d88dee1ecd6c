"""The real-input rows of ``coaccel validate gpu``: FFD and NOSA on a real decoder's decode steps.

:func:`real_input_rows` prefills real text into a small decoder once
(:func:`~coaccel.targets.gpu.real_inputs.collect_real_decode`) and derives from the same windows

* the W2 rows of :mod:`coaccel.targets.gpu.ffd_real` (keep ratio, selection and kernel error,
  perplexity change, kernel speedup with the measured keep ratios);
* the W3 rows of :mod:`coaccel.targets.gpu.nosa_real` (recall of the oracle blocks, attention
  mass held, host fetches per decode step, NOSA beside unconstrained top-k).

Without the model packages it returns no row and one note with the install command (the
:class:`~coaccel.spine.errors.MissingDependencyError` message).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coaccel.spine.errors import MissingDependencyError
from coaccel.validate.targets import Target

__all__ = ["DEFAULT_NOSA_CONTEXTS", "real_input_rows"]

DEFAULT_NOSA_CONTEXTS = 2
"""How many of the largest real contexts the NOSA replay covers ([OURS]: at a quarter of the
blocks, the smaller contexts leave the selectors too few slots to differ)."""


def real_input_rows(
    archs: Mapping[str, Any],
    bands: Mapping[str, Sequence[Any]],
    simulate: Callable[[Any, Any, str], Any],
    *,
    mode: str = "analytical",
    ffd: bool = True,
    nosa: bool = True,
    sizes: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Target], list[str]]:
    """The real-input W2 and W3 rows and notes (module docstring).

    Args:
        archs, bands: GPU configs and their band configs (the W2 speed rows).
        simulate: ``simulate(arch, workload, mode)``. mode: simulator mode.
        ffd: the W2 rows. nosa: the W3 rows.
        sizes: :func:`~coaccel.targets.gpu.real_inputs.collect_real_decode` keywords
            (``model``, ``contexts``, ``passages``, ``steps``) plus ``nosa_contexts``,
            ``nosa_keep_fraction``, ``delta`` and ``ppl_steps``; None: the defaults.
        progress: called with one line per step.

    Returns:
        (rows, notes).
    """
    from coaccel.targets.gpu.ffd_real import ffd_real_rows, ffd_real_stats
    from coaccel.targets.gpu.nosa_real import KEEP_FRACTION, nosa_real_rows, nosa_real_stats
    from coaccel.targets.gpu.real_inputs import DEFAULT_CONTEXTS, collect_real_decode

    say = progress or (lambda _m: None)
    kw = dict(sizes or {})
    nosa_ctx = kw.pop("nosa_contexts", None)
    keep_fraction = float(kw.pop("nosa_keep_fraction", KEEP_FRACTION))
    delta = float(kw.pop("delta", 5.0))
    ppl_steps = kw.pop("ppl_steps", None)
    contexts = tuple(sorted(kw.pop("contexts", DEFAULT_CONTEXTS)))
    if nosa_ctx is None:
        nosa_ctx = contexts[-DEFAULT_NOSA_CONTEXTS:]
    t0, c0 = time.perf_counter(), time.process_time()
    say(f"real-input rows: prefill of real text into {kw.get('model', 'smollm2-135m')}")
    try:
        sample = collect_real_decode(
            contexts=contexts, received_contexts=nosa_ctx if nosa else (), progress=say, **kw
        )
    except MissingDependencyError as e:
        return [], [f"real-input rows (FFD keep ratio, NOSA recall) left out: {e}"]
    name = sample.model.name
    rows: list[Target] = []
    notes = [
        f"real-input rows: {name}, {len(sample.passages)} windows of Python documentation prose "
        f"({', '.join(p.label for p in sample.passages)}), contexts "
        f"{', '.join(map(str, sample.contexts))}, {sample.steps} teacher-forced decode steps "
        "each (a prefill computes exactly the queries a decode step would)",
    ]
    if ffd:
        st = ffd_real_stats(sample, delta=delta, ppl_steps=ppl_steps, progress=say)
        say("W2 speed rows with the measured keep ratios")
        r, n = ffd_real_rows(st, archs, bands, simulate, model=name, mode=mode)
        rows += r
        notes += n
    if nosa:
        ns = nosa_real_stats(sample, nosa_ctx, keep_fraction=keep_fraction, progress=say)
        r, n = nosa_real_rows(ns, name)
        rows += r
        notes += n
    notes.append(
        f"real-input rows took {time.perf_counter() - t0:.0f} s ({time.process_time() - c0:.0f} s "
        "of CPU time)"
    )
    return rows, notes
