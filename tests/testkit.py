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
