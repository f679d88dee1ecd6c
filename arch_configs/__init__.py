"""YAML architecture, workload and study configurations shipped with coaccel.

Installed as the data package ``coaccel.arch_configs``; :func:`path` finds a shipped file.
"""

from importlib.resources import files
from pathlib import Path


def path(name: str) -> Path:
    """Return the filesystem path of a shipped config file.

    Args:
        name: path relative to ``arch_configs/``, e.g. ``"studies/quant_default.yaml"``.

    Returns:
        The file's path.

    Raises:
        FileNotFoundError: if no such file is shipped.
    """
    p = Path(str(files(__name__).joinpath(name)))
    if not p.is_file():
        raise FileNotFoundError(f"no shipped config named {name!r} under {files(__name__)}")
    return p
