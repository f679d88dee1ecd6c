"""Validation of coaccel's models against published numbers (pure data; reports elsewhere).

* :mod:`.targets`: the rows every ``coaccel validate NAME`` produces (:class:`~.targets.Target`,
  :class:`~.targets.Validation`): our value with its one sigma or band, the published figure,
  the rule a row is judged by, its status, fitted or predicted, real or synthetic inputs.
* :mod:`.published`: the published figures the validations compare against, read from
  ``arch_configs/validation/<name>.yaml`` (:func:`~.published.load_published`).
* :mod:`.pe`: the PE cost model against the published per-MAC figures (``pe_area``,
  ``pe_energy`` rows).

Each target's own validation set lives in its folder (``coaccel/targets/<kind>/validation.py``).
"""
