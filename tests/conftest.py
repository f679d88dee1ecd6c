"""pytest configuration.

- Shows the optional-tool policy in the report header (``COACCEL_REQUIRE_TOOLS``).
- Limits BLAS to one thread per test process: pytest-xdist already runs one worker per core, and
  OpenBLAS threads on top of that oversubscribe the cores and slow small batched matmuls (the
  HBQ GEMM) by an order of magnitude.
"""

from testkit import REQUIRE_ENV, tools_required

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - the dev extra installs it
    threadpool_limits = None


def pytest_configure(config):
    if threadpool_limits is not None:
        config._coaccel_blas_limit = threadpool_limits(limits=1, user_api="blas")


def pytest_report_header(config):
    state = "missing tools FAIL" if tools_required() else "missing tools skip"
    return f"coaccel: {REQUIRE_ENV}={'1' if tools_required() else 'unset'} ({state})"
