"""What a simulator target declares about itself.

Every target package under ``coaccel.sim`` (``hbq_asic``, ...) exposes one module-level
``TARGET`` (:class:`SimTarget`). The evaluation layer (:func:`coaccel.simulate`, ``coaccel sim``,
sweeps, the cost model) reads only this description, so a new target plugs in without any change
to their code: it ships ``arch_configs/<kind>/*.yaml`` files whose ``kind:`` is its
:attr:`SimTarget.kind`, and lists itself in :data:`coaccel.simulation.BUILTIN_TARGETS` (or calls
:func:`coaccel.simulation.register_target`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SimTarget", "arch_file"]


@dataclass(frozen=True)
class SimTarget:
    """A simulator target: its architecture kind and how to load and run it.

    Attributes:
        kind: the ``kind:`` value of its architecture files (``"hbq_asic"``); shipped files live
            in ``arch_configs/<kind>/``.
        description: one line for ``coaccel sim --list``.
        config_type: the frozen dataclass schema of its architecture files.
        modes: simulation modes it offers, fastest first (``("analytical", "cycle")``).
        arch_names: the shipped architecture names (file stems under ``arch_configs/<kind>/``).
        load_arch: ``load_arch(name_or_path) -> config``; raises ``ConfigError``.
        load_workload: ``load_workload("<model>[:<scenario>]" | path) -> workload``; raises
            ``ConfigError``.
        simulate: ``simulate(arch_config, workload, *, mode, **options) -> result`` where the
            result is a :class:`~coaccel.sim.common.result.SimResult`.
        priced_components: ``priced_components(arch_config, result | None)`` -> the typed input
            of the cost model (:class:`~coaccel.sim.common.priced.PricedComponents`): what the
            design contains and, given a result, what the run did. None when the target has no
            cost model.
        options: extra keyword options ``simulate`` accepts, name -> one-line help.
    """

    kind: str
    description: str
    config_type: type
    modes: tuple[str, ...]
    arch_names: tuple[str, ...]
    load_arch: Callable[[str | Path], Any]
    load_workload: Callable[[Any], Any]
    simulate: Callable[..., Any]
    priced_components: Callable[[Any, Any], Any] | None = None
    options: tuple[tuple[str, str], ...] = ()


def arch_file(kind: str, names: Collection[str], name: str | Path) -> Path:
    """The file of an architecture: a shipped name of its kind, or a path.

    Args:
        kind: the target's ``kind:`` (shipped files live in ``arch_configs/<kind>/``).
        names: the shipped architecture names of that kind (file stems).
        name: a shipped name (with or without ``.yaml``) or a file path; an existing file of
            that name wins over a shipped one.

    Returns:
        The path (it may not exist if a path was given).
    """
    from coaccel.arch_configs import path as shipped

    text = str(name)
    stem = text[:-5] if text.endswith(".yaml") else text
    if stem in names and not Path(text).exists():
        return shipped(f"{kind}/{stem}.yaml")
    return Path(text)
