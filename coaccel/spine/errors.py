"""Exceptions that the command line reports as one clear message (no traceback)."""


class CoaccelError(Exception):
    """Base class of user-facing errors (bad config, bad input file, missing optional tool)."""


class MissingDependencyError(CoaccelError):
    """An optional component (extra, simulator, Yosys, the real-model package) is not installed."""
