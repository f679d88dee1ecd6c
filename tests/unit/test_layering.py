"""The package's layers and its target seam, enforced on the source (docs/architecture.md).

Imports go down only: spine (``coaccel.spine``: config, units, errors, trace, workload, the target
contract; shipped configs) <- references (``coaccel.models``) <- simulators (``coaccel.sim``) <-
evaluation (``coaccel.simulate``, cost, validate, studies, dse, synthesis) <- presentation
(report, cli, commands) <- targets (``coaccel.targets.<kind>``, found only through entry points).
Every import counts, also those inside functions. No import cycle between modules, and no module
uses another package's private (``_name``) modules or names.

The target seam: outside a target's own folders (its simulator package and its target folder,
both read from the registered target itself), no module imports a target's package or names a
target's kind in code; targets do not import each other.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
PACKAGE_DIRS = {"coaccel": ROOT / "coaccel", "coaccel.models": ROOT / "models",
                "coaccel.sim": ROOT / "sim"}  # fmt: skip

# Longest prefix wins. Lower number = lower layer.
LAYERS: dict[str, int] = {
    "coaccel.spine": 0,
    "coaccel.config": 0,
    "coaccel.errors": 0,
    "coaccel.trace": 0,
    "coaccel.workload": 0,
    "coaccel.arch_configs": 0,
    "coaccel.models": 1,
    "coaccel.sim": 2,
    "coaccel.simulation": 3,
    "coaccel.cost": 3,
    "coaccel.validate": 3,
    "coaccel.studies": 3,
    "coaccel.dse": 3,
    "coaccel.synth": 3,
    "coaccel.report": 4,
    "coaccel.cli": 4,
    "coaccel.commands": 4,
    "coaccel.targets": 5,
}
LAYER_NAMES = ("spine", "references", "simulators", "evaluation", "presentation", "targets")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, folder in PACKAGE_DIRS.items():
        for f in folder.rglob("*.py"):
            rel = f.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if pkg == "coaccel" and parts and parts[0] in ("models", "sim"):
                continue
            out[name] = f
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _layer(name: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (name == prefix or name.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, layer)
    return None if best is None else best[1]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) of every import in a module."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:
                    out.append((sub, None, node.lineno))
                else:
                    out.append((target, a.name, node.lineno))
    return [(m, n, ln) for m, n, ln in out if m == "coaccel" or m.startswith("coaccel.")]


GRAPH = {m: _imports(m) for m in MODULES}


def _owner(module: str) -> str:
    """The package a module belongs to (itself, for a package's ``__init__``)."""
    return module if _is_package(module) else module.rpartition(".")[0]


def test_modules_found() -> None:
    assert "coaccel.config" in MODULES and "coaccel.sim.hbq_asic.engine" in MODULES
    assert all(_layer(m) is not None or m == "coaccel" for m in MODULES), [
        m for m in MODULES if _layer(m) is None and m != "coaccel"
    ]


def test_imports_go_down_only() -> None:
    bad = []
    for m, imps in GRAPH.items():
        lm = _layer(m)
        if lm is None:
            continue
        for target, _, line in imps:
            lt = _layer(target)
            if lt is not None and lt > lm:
                bad.append(
                    f"{MODULES[m].relative_to(ROOT)}:{line}: {m} ({LAYER_NAMES[lm]}) imports "
                    f"{target} ({LAYER_NAMES[lt]})"
                )
    assert not bad, "imports that go up a layer:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over module -> module edges."""
    edges = {m: sorted({t for t, _, _ in GRAPH[m] if t in MODULES and t != m}) for m in MODULES}
    # A package's __init__ re-exporting its own submodules is not a cycle with them: drop
    # edges from a submodule to its own (parent) packages.
    for m in edges:
        edges[m] = [t for t in edges[m] if not (_is_package(t) and m.startswith(t + "."))]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_private_imports_across_packages() -> None:
    bad = []
    for m, imps in GRAPH.items():
        for target, name, line in imps:
            private_mod = any(p.startswith("_") for p in target.split(".")[1:])
            private_name = name is not None and name.startswith("_")
            if not (private_mod or private_name):
                continue
            # Where the private thing lives: the package owning the private module or name.
            parts = target.split(".")
            first_private = next(
                (i for i, p in enumerate(parts) if i > 0 and p.startswith("_")), len(parts)
            )
            home = ".".join(parts[:first_private])
            if home in MODULES and not _is_package(home):
                home = _owner(home)
            if _owner(m) == home or _owner(m).startswith(home + "."):
                continue
            what = f"{target}.{name}" if name else target
            bad.append(f"{MODULES[m].relative_to(ROOT)}:{line}: {m} uses private {what}")
    assert not bad, "private names used outside their package:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("coaccel.trace", 0),
        ("coaccel.spine.trace", 0),
        ("coaccel.models.hbq", 1),
        ("coaccel.sim.common.target", 2),
        ("coaccel.cost._system", 3),
        ("coaccel.commands.sim", 4),
        ("coaccel.spine.target", 0),
        ("coaccel.targets.hbq_asic.validation", 5),
    ],  # fmt: skip
)
def test_layer_table(module: str, layer: int) -> None:
    assert _layer(module) == layer


def test_no_package_cycles() -> None:
    """Sibling packages do not import each other both ways (directly or through others)."""
    pkgs = sorted({_owner(m) for m in MODULES})
    edges: dict[str, set[str]] = {p: set() for p in pkgs}
    for m, imps in GRAPH.items():
        src = _owner(m)
        for target, _, _ in imps:
            if target not in MODULES:
                continue
            dst = _owner(target)
            related = src == dst or src.startswith(dst + ".") or dst.startswith(src + ".")
            if not related:
                edges[src].add(dst)

    def reach(a: str) -> set[str]:
        seen: set[str] = set()
        todo = [a]
        while todo:
            for b in edges[todo.pop()]:
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    both = sorted(
        {tuple(sorted((a, b))) for a in pkgs for b in reach(a) if a != b and a in reach(b)}
    )
    assert not both, "package cycles:\n" + "\n".join(f"{a} <-> {b}" for a, b in both)


# ---------------------------------------------------------------------------------------------
# The target seam


def _builtin_targets() -> list[tuple[str, str, str]]:
    """(kind, target folder package, simulator package) of every target coaccel itself ships,
    read from the registry (entry points), not from a list kept here."""
    from coaccel.simulation import kinds, target
    from coaccel.spine.target import Ref

    out = []
    for k in kinds():
        t = target(k)
        sim = t.simulate.path.partition(":")[0] if isinstance(t.simulate, Ref) else ""
        folder = ""
        for mod, path in MODULES.items():
            if mod.startswith("coaccel.targets.") and path.name == "__init__.py":
                if getattr(__import__(mod, fromlist=["TARGET"]), "TARGET", None) is t:
                    folder = mod
        if folder and sim:
            out.append((k, folder, sim))
    return out


TARGETS = _builtin_targets()


def _owned_by(module: str) -> str | None:
    """The kind whose folders hold a module (None: a module of coaccel's own)."""
    for kind, folder, sim in TARGETS:
        for root in (folder, sim):
            if module == root or module.startswith(root + "."):
                return kind
    return None


def _code_strings(path: Path) -> list[tuple[str, int]]:
    """String constants of a module's code (docstrings left out), with their lines."""
    tree = ast.parse(path.read_text(), str(path))
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        # attribute docstrings: a bare string right after an assignment
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for a, b in zip(block, block[1:], strict=False):
                    if (isinstance(a, (ast.Assign, ast.AnnAssign)) and isinstance(b, ast.Expr)
                            and isinstance(b.value, ast.Constant)):  # fmt: skip
                        docs.add(id(b.value))
    return [
        (n.value, n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_every_builtin_target_has_its_folders() -> None:
    assert len(TARGETS) >= 3, TARGETS
    for kind, folder, sim in TARGETS:
        assert folder in MODULES and sim in MODULES, (kind, folder, sim)


def test_no_module_outside_a_target_imports_it() -> None:
    bad = []
    for m, imps in GRAPH.items():
        mine = _owned_by(m)
        for target_mod, _, line in imps:
            owner = _owned_by(target_mod)
            if owner is not None and owner != mine:
                who = f"target {mine!r}" if mine else "coaccel's own code"
                bad.append(
                    f"{MODULES[m].relative_to(ROOT)}:{line}: {m} ({who}) imports {target_mod} "
                    f"(target {owner!r})"
                )
    assert not bad, "imports across the target seam:\n" + "\n".join(bad)


def test_no_module_outside_a_target_names_it() -> None:
    """No code outside a target's folders tests or uses a kind's name (docstrings may
    mention it), nor the name of its packages."""
    names = {}
    for kind, folder, sim in TARGETS:
        for n in (kind, folder.rpartition(".")[2], sim.rpartition(".")[2], folder, sim):
            names[n] = kind
    bad = []
    for m, path in MODULES.items():
        mine = _owned_by(m)
        for text, line in _code_strings(path):
            kind = names.get(text)
            if kind is not None and kind != mine:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {m} names {text!r} (target {kind!r})")
    assert not bad, "target names outside their folders:\n" + "\n".join(bad)


def test_seam_test_catches_a_violation(tmp_path: Path) -> None:
    """The two seam checks fail on a module that imports or names a target."""
    kind, folder, sim = TARGETS[0]
    src = f"from {sim} import simulate\nKIND = {kind!r}\n"
    f = tmp_path / "bad.py"
    f.write_text(src)
    assert (kind, 2) in _code_strings(f)
    tree = ast.parse(src)
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert _owned_by(imported[0]) == kind and _owned_by("coaccel.dse.spec") is None
