"""pytest configuration.

- Shows the optional-tool policy in the report header (``COACCEL_REQUIRE_TOOLS``).
- Limits BLAS to one thread per test process: pytest-xdist already runs one worker per core, and
  OpenBLAS threads on top of that oversubscribe the cores and slow small batched matmuls (the
  HBQ GEMM) by an order of magnitude.
- Does the same for every process a test starts (the CLI run as a subprocess, notebook kernels,
  the cocotb simulators, sweep executors): :data:`SINGLE_THREAD_ENV` goes into the environment
  they inherit. On a loaded machine an idle OpenBLAS thread spins, so a CLI sweep of the
  DeltaLLM spec took 20 s of CPU with the default thread count and 8 s with one. A value already
  set in the environment is kept.
"""

import os

from testkit import REQUIRE_ENV, tools_required

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - the dev extra installs it
    threadpool_limits = None

SINGLE_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
"""BLAS thread-count variables set to 1 for the processes the tests start."""


def pytest_configure(config):
    for name in SINGLE_THREAD_ENV:
        os.environ.setdefault(name, "1")
    if threadpool_limits is not None:
        config._coaccel_blas_limit = threadpool_limits(limits=1, user_api="blas")


def pytest_report_header(config):
    state = "missing tools FAIL" if tools_required() else "missing tools skip"
    return f"coaccel: {REQUIRE_ENV}={'1' if tools_required() else 'unset'} ({state})"
