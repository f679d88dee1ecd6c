"""Validation of coaccel's models against published numbers (pure data; reports elsewhere).

* :mod:`.hbq`: the HBQ paper's PE, claim, system-energy and speedup targets
  (``coaccel validate hbq``).
"""
