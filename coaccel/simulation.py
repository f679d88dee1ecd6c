"""One entry point for every simulator target: :func:`simulate`, dispatching on ``kind:``.

An architecture file says which simulator it is for (``kind: hbq_asic``); shipped files live in
``arch_configs/<kind>/<name>.yaml`` and can be named by their stem (``"hbq_e_28nm"``). The
registry maps each kind to the :class:`~coaccel.sim.common.SimTarget` its simulator package
exposes as ``TARGET``; :func:`simulate` loads the architecture and workload through it, applies
overrides and runs the chosen mode. Sweeps, ``coaccel sim`` and the cost model use only this
module and the target descriptions, never a simulator's internals.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .sim.common import SimTarget
from .spine.config import ConfigError, Problem, override

__all__ = [
    "BUILTIN_TARGETS",
    "find_arch",
    "kinds",
    "load_arch",
    "register_target",
    "simulate",
    "target",
]

BUILTIN_TARGETS: Mapping[str, str] = {
    "hbq_asic": "coaccel.sim.hbq_asic",
    "deltallm_fpga": "coaccel.sim.deltallm_fpga",
    "gpu": "coaccel.sim.gpu_mem",
}
"""Kind -> the module whose ``TARGET`` describes it (imported on first use)."""

_REGISTERED: dict[str, SimTarget] = {}


def register_target(t: SimTarget) -> None:
    """Register a simulator target that is not built in (a plug-in).

    Args:
        t: the target description.

    Raises:
        ValueError: the kind is already registered to another target.
    """
    have = _REGISTERED.get(t.kind)
    if have is not None and have is not t:
        raise ValueError(f"simulator kind {t.kind!r} is already registered")
    _REGISTERED[t.kind] = t


def kinds() -> tuple[str, ...]:
    """Every registered simulator kind, sorted."""
    return tuple(sorted(set(BUILTIN_TARGETS) | set(_REGISTERED)))


def target(kind: str) -> SimTarget:
    """The target registered for a kind.

    Args:
        kind: ``"hbq_asic"``, ...

    Returns:
        Its :class:`SimTarget`.

    Raises:
        ConfigError: no such kind (the message lists the registered ones).
    """
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    mod = BUILTIN_TARGETS.get(kind)
    if mod is None:
        raise ConfigError([_unknown_kind("<simulate>", kind)])
    t = importlib.import_module(mod).TARGET
    _REGISTERED[kind] = t
    return t


def _unknown_kind(where: str, kind: Any) -> Problem:
    valid = ", ".join(kinds())
    msg = f"unknown simulator kind {kind!r}; valid kinds: {valid}"
    close = difflib.get_close_matches(str(kind), kinds(), n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    return Problem(where, "kind", kind, msg, valid)


def _kind_of_file(path: Path) -> str:
    """The ``kind:`` of an architecture file, read before the full schema check."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(
            [Problem(str(path), "", None, f"cannot read: {e.strerror or e}")]
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError([Problem(str(path), "", None, f"not valid YAML: {e}")]) from None
    if not isinstance(data, Mapping) or "kind" not in data:
        raise ConfigError(
            [
                Problem(
                    str(path),
                    "kind",
                    None,
                    "missing key 'kind': an architecture file must say which simulator it is "
                    f"for; valid kinds: {', '.join(kinds())}",
                    ", ".join(kinds()),
                )
            ]
        )
    kind = data["kind"]
    if kind not in kinds():
        raise ConfigError([_unknown_kind(str(path), kind)])
    return str(kind)


def find_arch(name: str | Path) -> tuple[SimTarget, Path]:
    """Resolve an architecture name or path to its target and file.

    Args:
        name: a shipped name (``"hbq_e_28nm"``, found under ``arch_configs/<kind>/``), a
            ``"<kind>/<name>"`` pair, or a YAML path.

    Returns:
        ``(target, path)``.

    Raises:
        ConfigError: no such file or shipped name, or a file without a valid ``kind:``.
    """
    text = str(name)
    p = Path(text)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return target(_kind_of_file(p)), p
    stem = text[:-5] if text.endswith(".yaml") else text
    kind_hint, _, short = stem.rpartition("/")
    matches = []
    for k in kinds():
        if kind_hint and k != kind_hint:
            continue
        t = target(k)
        if short in t.arch_names:
            matches.append(t)
    if len(matches) == 1:
        from .arch_configs import path as shipped

        return matches[0], shipped(f"{matches[0].kind}/{short}.yaml")
    if len(matches) > 1:
        both = ", ".join(f"{t.kind}/{short}" for t in matches)
        raise ConfigError(
            [Problem("<simulate>", "arch", text, f"ambiguous name; use one of {both}")]
        )
    names = sorted(n for k in kinds() for n in target(k).arch_names)
    msg = f"no architecture file {text!r} and no shipped architecture of that name"
    close = difflib.get_close_matches(short, names, n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    raise ConfigError([Problem("<simulate>", "arch", text, msg, ", ".join(names))])


def load_arch(arch: Any, overrides: Mapping[str, Any] | None = None) -> tuple[SimTarget, Any]:
    """Load an architecture of any kind.

    Args:
        arch: a loaded config (any registered ``config_type``), a shipped name or a YAML path.
        overrides: dotted key -> value changes (:func:`coaccel.config.override`).

    Returns:
        ``(target, config)``.

    Raises:
        ConfigError: a bad file, name, kind or override.
    """
    kind = getattr(arch, "kind", None)
    if isinstance(kind, str) and not isinstance(arch, (str, Path)):
        t = target(kind)
        cfg = arch
    else:
        t, path = find_arch(arch)
        cfg = t.load_arch(path)
    if overrides:
        cfg = override(cfg, dict(overrides))
    return t, cfg


def simulate(
    arch: Any,
    workload: Any,
    *,
    mode: str = "analytical",
    overrides: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Simulate a workload on an architecture of any registered kind.

    Args:
        arch: a loaded architecture config, a shipped name (``"hbq_e_28nm"``) or a YAML path;
            its ``kind:`` picks the simulator.
        workload: ``"<model>[:<scenario>]"`` (``"llama-3-8b:prefill_2k"``), a workload YAML
            path, or a workload object the target's loader returned.
        mode: ``"analytical"`` (closed form, for sweeps) or ``"cycle"`` (trace-driven,
            cycle-approximate); the target's :attr:`~coaccel.sim.common.SimTarget.modes`.
        overrides: dotted key -> value changes to the architecture
            (``{"pe_array.n_pes": 64}``), validated like the file.
        **options: target-specific options (:attr:`~coaccel.sim.common.SimTarget.options`,
            e.g. ``engine="simpy"`` for the HBQ ASIC's cycle mode).

    Returns:
        The target's result (a :class:`~coaccel.sim.common.result.SimResult`; its
        ``metrics()`` is the same flat name -> (value, unit) mapping for every kind).

    Raises:
        ConfigError: bad architecture, workload, overrides, mode or option.
    """
    t, cfg = load_arch(arch, overrides)
    problems = []
    if mode not in t.modes:
        problems.append(
            Problem("<simulate>", "mode", mode, f"{t.kind} offers modes {', '.join(t.modes)}",
                    ", ".join(t.modes))
        )  # fmt: skip
    valid_opts = [n for n, _ in t.options]
    for k in options:
        if k not in valid_opts:
            problems.append(
                Problem("<simulate>", k, options[k], f"{t.kind} has no option {k!r}",
                        ", ".join(valid_opts) or "none")
            )  # fmt: skip
    if problems:
        raise ConfigError(problems)
    wl = t.load_workload(workload) if isinstance(workload, (str, Path)) else workload
    return t.simulate(cfg, wl, mode=mode, **options)
