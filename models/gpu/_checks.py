"""Checks of the GPU references' parameter dataclasses (internal)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__: list[str] = []


def check_integer_fields(obj: object, names: Iterable[str], *, minimum: int = 1) -> None:
    """Raise ValueError unless each named attribute of ``obj`` is an integer (not a bool) of at
    least ``minimum`` (1: "a positive integer", 0: "a non-negative integer").

    Args:
        obj: the dataclass instance (its class name heads the message).
        names: the attributes to check, in order (the first bad one is reported).
        minimum: the smallest valid value, 0 or 1.
    """
    what = "a positive integer" if minimum == 1 else "a non-negative integer"
    for name in names:
        v = getattr(obj, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise ValueError(f"{type(obj).__name__}.{name}={v!r} must be {what}")
