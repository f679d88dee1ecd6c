"""Helpers shared by the tests (import as ``from testkit import require``).

Optional tools (an HDL simulator, Yosys, the real-model package, dask distributed) may be missing
on a user's laptop: tests that need one call :func:`require` and are skipped there. CI sets
``COACCEL_REQUIRE_TOOLS=1``, which turns every such skip into a failure, so CI cannot go green
by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

REQUIRE_ENV = "COACCEL_REQUIRE_TOOLS"


def tools_required() -> bool:
    """True when missing optional tools must fail tests (CI)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false", "no")


def require(what: str, available: bool, hint: str) -> None:
    """Skip (laptop) or fail (CI) when an optional component is missing.

    Args:
        what: the component, for the message.
        available: whether it was found.
        hint: how to install it.
    """
    if available:
        return
    msg = f"{what} is not available ({hint})"
    if tools_required():
        pytest.fail(f"{msg}; {REQUIRE_ENV} is set, so this is a failure, not a skip")
    pytest.skip(msg)


def require_module(module: str, hint: str) -> None:
    """:func:`require` for an importable Python module."""
    require(f"Python module {module!r}", importlib.util.find_spec(module) is not None, hint)


def require_program(program: str, hint: str) -> str:
    """:func:`require` for a program on PATH; returns its path."""
    path = shutil.which(program)
    require(f"program {program!r}", path is not None, hint)
    return path or ""


def quantize_asserting_range_warning(x, fmt, **kw):
    """``quantize(x, fmt, **kw)``, asserting its ``QuantizationRangeWarning``: expected exactly
    when some block lies outside the range its scale can represent (``clamped_blocks > 0``).

    The warning is given once per format and process, so which test sees it depends on the
    order tests run in: the call is repeated with the record of formats already warned about
    cleared, so that it warns (or not) whatever ran before. Returns the quantized tensor.
    """
    import re
    import warnings
    from unittest import mock

    from coaccel.models.formats import QuantizationRangeWarning, quantize
    from coaccel.models.formats import _quantized as quantized_module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizationRangeWarning)
        q = quantize(x, fmt, **kw)
    with mock.patch.object(quantized_module, "_WARNED", set()):
        if q.clamped_blocks:
            match = rf"^{re.escape(q.spec.name)}: {q.clamped_blocks} of {q.n_blocks} blocks"
            with pytest.warns(QuantizationRangeWarning, match=match):
                quantize(x, fmt, **kw)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error", QuantizationRangeWarning)
                quantize(x, fmt, **kw)
    return q
