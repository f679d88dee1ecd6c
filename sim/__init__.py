"""Cycle-approximate simulators (installed as ``coaccel.sim``). They consume traces and configs
and return statistics as data; they never print or write files."""
