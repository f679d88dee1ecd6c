"""Make the RTL test helpers (``rtlkit``, ``hbq_stim``) importable by the launchers, and give
the session's Verilator builds one shared object cache.

pytest runs with ``--import-mode=importlib`` and ``pythonpath = ["tests"]``, which does not put
``tests/rtl/`` on ``sys.path``; the launchers ``import rtlkit``, and ``rtlkit.run_cocotb`` hands
this ``sys.path`` to the simulator, where the testbench modules are imported by name.

The object cache (``objcache.py``; ``rtlkit.OBJCACHE_ENV``) lives beside the session's
temporary directories, in the folder that pytest-xdist's workers share, so that Verilator's
runtime compiles once per test run instead of once per build. A cache directory already named
in the environment is kept (e.g. one that outlives the run, for local iterations).
"""

import os
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import rtlkit  # noqa: E402  (importable only after the path insertion above)


@pytest.fixture(scope="session", autouse=True)
def _verilator_object_cache(tmp_path_factory):
    """Point ``COACCEL_OBJCACHE_DIR`` at a folder shared by this run's xdist workers."""
    if os.environ.get(rtlkit.OBJCACHE_ENV):
        yield
        return
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # <basetemp>/popen-gwN: the parent is the run's, shared
    os.environ[rtlkit.OBJCACHE_ENV] = str(base / "verilator-objcache")
    yield
    os.environ.pop(rtlkit.OBJCACHE_ENV, None)
