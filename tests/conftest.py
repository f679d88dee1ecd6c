"""pytest configuration: makes the optional-tool policy visible in the report header."""

from testkit import REQUIRE_ENV, tools_required


def pytest_report_header(config):
    state = "missing tools FAIL" if tools_required() else "missing tools skip"
    return f"coaccel: {REQUIRE_ENV}={'1' if tools_required() else 'unset'} ({state})"
