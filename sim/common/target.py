"""Where a simulator target's shipped architecture files are, and its description type.

:class:`SimTarget` (what a target declares about itself) is defined in
:mod:`coaccel.spine.target` and re-exported here for the simulators that build one;
:func:`arch_file` resolves a shipped architecture name of a kind to its file.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from coaccel.spine.target import SimTarget

__all__ = ["SimTarget", "arch_file"]


def arch_file(
    kind: str, names: Collection[str], name: str | Path, package: str = "coaccel.arch_configs"
) -> Path:
    """The file of an architecture: a shipped name of its kind, or a path.

    Args:
        kind: the target's ``kind:`` (shipped files live in ``<package>/<kind>/``).
        names: the shipped architecture names of that kind (file stems).
        name: a shipped name (with or without ``.yaml``) or a file path; an existing file of
            that name wins over a shipped one.
        package: the data package that ships the files (a plug-in target passes its own).

    Returns:
        The path (it may not exist if a path was given).
    """
    from importlib.resources import files

    text = str(name)
    stem = text[:-5] if text.endswith(".yaml") else text
    if stem in names and not Path(text).exists():
        return Path(str(files(package).joinpath(kind).joinpath(f"{stem}.yaml")))
    return Path(text)
