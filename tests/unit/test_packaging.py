"""Packaging and layering: the wheel ships one top-level package, layers depend downward only."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (whl,) = out.glob("coaccel-*.whl")
    with zipfile.ZipFile(whl) as z:
        return z.namelist()


def test_wheel_has_only_the_coaccel_package(wheel_names):
    tops = {n.split("/")[0] for n in wheel_names}
    tops = {t for t in tops if not t.endswith(".dist-info")}
    assert tops == {"coaccel"}
    for forbidden in ("sim/", "models/", "tests/", "utils/"):
        assert not any(n.startswith(forbidden) for n in wheel_names), forbidden


def test_wheel_maps_models_sim_and_configs(wheel_names):
    assert "coaccel/models/formats/__init__.py" in wheel_names
    assert "coaccel/models/formats/_quantized.py" in wheel_names
    assert "coaccel/sim/__init__.py" in wheel_names
    assert "coaccel/arch_configs/__init__.py" in wheel_names
    shipped_yaml = {
        n for n in wheel_names if n.startswith("coaccel/arch_configs/") and n.endswith(".yaml")
    }
    in_tree = {
        "coaccel/arch_configs/" + p.relative_to(ROOT / "arch_configs").as_posix()
        for p in (ROOT / "arch_configs").rglob("*.yaml")
    }
    assert shipped_yaml == in_tree


def test_console_script_help():
    exe = Path(sys.executable).with_name("coaccel")
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    assert "usage: coaccel" in res.stdout
    for cmd in ("demo", "quant"):
        assert cmd in res.stdout


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    pkg = ".".join(("coaccel",) + path.relative_to(ROOT).parent.parts)
    pkg = pkg.replace("coaccel.coaccel", "coaccel")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the installed package name
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                names.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                names.add(node.module)
    return names


def _files(sub: str) -> list[Path]:
    return sorted((ROOT / sub).rglob("*.py"))


SPINE = ("coaccel.config", "coaccel.errors", "coaccel.trace", "coaccel.workload")
"""The bottom layer: what the references may import of coaccel."""


def test_models_import_nothing_of_coaccel_but_the_spine():
    for f in _files("models"):
        for name in _imports(f):
            if name.startswith("coaccel") and not name.startswith("coaccel.models"):
                spine = name in SPINE or name.startswith("coaccel.spine")
                assert spine, f"{f.relative_to(ROOT)} imports {name}"


def test_only_the_presentation_layer_imports_report():
    """The report package is imported by the command line and by targets' own report and
    command pieces (the targets' folders sit above presentation), nothing else."""
    above = ("coaccel/commands/", "coaccel/report/", "coaccel/targets/")
    for sub in ("models", "sim", "coaccel"):
        for f in _files(sub):
            rel = f.relative_to(ROOT).as_posix()
            if rel.startswith(above) or rel == "coaccel/cli.py":
                continue
            bad = [n for n in _imports(f) if n.startswith("coaccel.report")]
            assert not bad, f"{rel} imports {bad}"


def test_sim_does_not_import_cli_or_commands():
    for f in _files("sim"):
        bad = [n for n in _imports(f) if n.startswith(("coaccel.cli", "coaccel.commands"))]
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_installed_wheel_imports_and_quantizes(tmp_path, wheel_names):
    """The built wheel, installed on its own (not the editable tree), imports and works."""
    out = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True)  # fmt: skip
    (whl,) = out.glob("coaccel-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(whl)],
        check=True, capture_output=True, text=True)  # fmt: skip
    code = (
        "import coaccel, numpy as np\n"
        "from coaccel.models.formats import quantize\n"
        "from coaccel.arch_configs import path\n"
        "q = quantize(np.linspace(-3, 3, 256, dtype=np.float32), 'hbq-e', role='activation')\n"
        "print(coaccel.__file__); print(path('hbq_asic/hbq_e_28nm.yaml')); print(q.codes.sum())\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    lines = res.stdout.splitlines()
    assert lines[0].startswith(str(target)), lines[0]
    assert lines[1].startswith(str(target)), lines[1]


@pytest.mark.parametrize("args", [["--help"], ["sim", "--list"], ["validate", "--help"]])
def test_the_command_line_starts_without_the_numerics(args):
    """Help and listings import neither numpy nor a target's numerics (start-up time: what is
    imported is the figure that does not swing with the machine's load)."""
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from coaccel.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({args!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'numba', 'scipy'))\n"
        "print(','.join(heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported at start-up: {r.stdout.strip()[:300]}"
