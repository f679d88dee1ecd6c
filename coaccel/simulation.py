"""One entry point for every target: :func:`simulate`, dispatching on ``kind:``, and the registry.

An architecture file says which target it is for (``kind: <name>``); shipped files live in
``arch_configs/<kind>/<name>.yaml`` and can be named by their stem. Targets are found through the
``coaccel.targets`` entry-point group (coaccel's own targets register there too, in its
``pyproject.toml``), or registered at run time with :func:`register_target`. Each publishes one
:class:`~coaccel.spine.target.SimTarget`; :func:`simulate` loads the architecture and workload
through it, applies overrides and runs the chosen mode. Sweeps, the cost model, reports,
validation, the demo and the command line reach targets only through :func:`kinds` and
:func:`target`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .spine.errors import CoaccelError
from .spine.target import SimTarget

if TYPE_CHECKING:  # the config machinery (and yaml) load on first use: a fast start-up
    from .spine.config import Problem

__all__ = [
    "ENTRY_POINT_GROUP",
    "find_arch",
    "broken",
    "kinds",
    "provider",
    "load_arch",
    "load_workload",
    "parse_overrides",
    "register_target",
    "simulate",
    "target",
    "targets",
]

ENTRY_POINT_GROUP = "coaccel.targets"
"""The entry-point group a package lists its targets in (name = kind, value = its
:class:`~coaccel.spine.target.SimTarget`)."""

_REGISTERED: dict[str, SimTarget] = {}
_ENTRY_POINTS: dict[str, Any] | None = None
_CLASHES: dict[str, list[str]] = {}
"""Kinds that more than one installed package registers: kind -> the entry points' values."""


def _entry_points() -> dict[str, Any]:
    """Kind -> entry point of every installed target (read once)."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        from importlib.metadata import entry_points

        found: dict[str, Any] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            have = found.get(ep.name)
            if have is not None and have.value != ep.value:
                _CLASHES.setdefault(ep.name, [have.value]).append(ep.value)
            found.setdefault(ep.name, ep)
        _ENTRY_POINTS = found
    return _ENTRY_POINTS


def provider(kind: str) -> str:
    """The installed package that provides a kind (its distribution name), or ``""``."""
    ep = _entry_points().get(kind)
    dist = getattr(ep, "dist", None)
    return str(getattr(dist, "name", "") or "")


def register_target(t: SimTarget) -> None:
    """Register a target at run time (beside those found through entry points).

    Args:
        t: the target description.

    Raises:
        ValueError: the kind is already registered to another target.
    """
    have = _REGISTERED.get(t.kind)
    if have is not None and have is not t:
        raise ValueError(f"target kind {t.kind!r} is already registered")
    _REGISTERED[t.kind] = t


def kinds() -> tuple[str, ...]:
    """Every registered target kind, sorted (nothing is imported to list them)."""
    return tuple(sorted(set(_entry_points()) | set(_REGISTERED)))


def target(kind: str) -> SimTarget:
    """The target registered for a kind.

    Args:
        kind: a registered kind (:func:`kinds`).

    Returns:
        Its :class:`SimTarget`.

    Raises:
        ConfigError: no such kind (the message lists the registered ones).
        CoaccelError: the entry point does not load or is not a target of that kind.
    """
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    ep = _entry_points().get(kind)
    if ep is None:
        from .spine.config import ConfigError

        raise ConfigError([_unknown_kind("<simulate>", kind)])
    if kind in _CLASHES:
        raise CoaccelError(
            f"target kind {kind!r} is registered by more than one installed package "
            f"({', '.join(_CLASHES[kind])}, group {ENTRY_POINT_GROUP!r}): uninstall one"
        )
    try:
        t = ep.load()
    except Exception as e:  # a broken plug-in: name it, do not crash the command
        raise CoaccelError(
            f"target {kind!r} (entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r}) "
            f"does not load: {type(e).__name__}: {e}"
        ) from e
    if not isinstance(t, SimTarget) or t.kind != kind:
        raise CoaccelError(
            f"entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r} is not the target of "
            f"kind {kind!r} (got {type(t).__name__} "
            f"{getattr(t, 'kind', '')!r}): it must name a coaccel.spine.target.SimTarget"
        )
    _REGISTERED[kind] = t
    return t


def targets() -> tuple[SimTarget, ...]:
    """Every target that loads, in kind order.

    A target that does not load (a broken plug-in, a kind two packages claim) is left out here,
    so that every other command keeps working; :func:`broken` says which and why, and
    :func:`target` raises its error where the kind is asked for by name.
    """
    out = []
    for k in kinds():
        try:
            out.append(target(k))
        except CoaccelError as e:
            _BROKEN[k] = str(e)
    return tuple(out)


_BROKEN: dict[str, str] = {}


def broken() -> dict[str, str]:
    """Kinds whose target did not load in :func:`targets`, with the reason."""
    targets()
    return dict(_BROKEN)


def _unknown_kind(where: str, kind: Any) -> Problem:
    from .spine.config import Problem

    valid = ", ".join(kinds())
    msg = f"unknown simulator kind {kind!r}; valid kinds: {valid}"
    close = difflib.get_close_matches(str(kind), kinds(), n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    return Problem(where, "kind", kind, msg, valid)


def _refuse_special(path: Path, what: str) -> None:
    """Refuse, before anything opens it, a path that is a folder, FIFO, device or socket
    (reading a FIFO blocks; a device never ends)."""
    from .spine.config import ConfigError, Problem
    from .spine.trace import not_regular

    kind = not_regular(path)
    if kind is not None:
        raise ConfigError([Problem(str(path), "", None, f"not {what}: it is {kind}")])


def _kind_of_file(path: Path) -> str:
    """The ``kind:`` of an architecture file, read before the full schema check."""
    import yaml

    from .spine.config import ConfigError, Problem
    from .spine.trace import is_trace_file

    _refuse_special(path, "an architecture file")
    if is_trace_file(path):
        raise ConfigError(
            [Problem(str(path), "", None, "a trace file (.npz), not an architecture YAML file")]
        )
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise ConfigError(
            [Problem(str(path), "", None, f"cannot read: {e.strerror or e}")]
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(
            [Problem(str(path), "", None, "not an architecture YAML file: not UTF-8 text")]
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(
            [Problem(str(path), "", None, f"not valid YAML: {' '.join(str(e).split())}")]
        ) from None
    except RecursionError:
        raise ConfigError(
            [Problem(str(path), "", None, "not an architecture file: nested too deeply")]
        ) from None
    if not isinstance(data, Mapping):
        got = "an empty document" if data is None else f"a {type(data).__name__}"
        raise ConfigError(
            [
                Problem(
                    str(path),
                    "",
                    None,
                    f"not an architecture file: expected a YAML mapping with a 'kind:' key, "
                    f"got {got}",
                )
            ]
        )
    if "kind" not in data:
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
    from .spine.config import ConfigError, Problem

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
        return matches[0], _shipped_file(matches[0], short)
    if len(matches) > 1:
        both = ", ".join(f"{t.kind}/{short}" for t in matches)
        raise ConfigError(
            [Problem("<simulate>", "arch", text, f"ambiguous name; use one of {both}")]
        )
    if p.exists():  # a file (or a FIFO, a folder) of that name without the YAML suffix
        return target(_kind_of_file(p)), p
    names = sorted(n for k in kinds() for n in target(k).arch_names)
    msg = f"no architecture file {text!r} and no shipped architecture of that name"
    close = difflib.get_close_matches(short, names, n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    raise ConfigError([Problem("<simulate>", "arch", text, msg, ", ".join(names))])


def _shipped_file(t: SimTarget, name: str) -> Path:
    """The file of a shipped architecture name of a target."""
    if t.arch_file is not None:
        return Path(t.arch_file(name))
    from .arch_configs import path as shipped

    return shipped(f"{t.kind}/{name}.yaml")


_OVERRIDES = (
    "overrides must be a mapping of dotted key -> value ({'freq_mhz': 400}), a list of "
    "'key=value' strings (as --set takes them, each value read as YAML) or one such string"
)


def parse_overrides(
    overrides: Any, flag: str = "overrides", source: str = "<simulate>"
) -> dict[str, Any]:
    """Architecture overrides as a dict, from any of the forms users write them in.

    Args:
        overrides: None; a mapping of dotted key -> value (``{"freq_mhz": 400}``); a sequence
            of ``"key=value"`` strings (``["freq_mhz=400", "pe_array.n_pes=64"]``, as
            ``--set`` takes them: each value is read as YAML, so ``400`` is an int); or one
            such string.
        flag: how the user gave them (``"--set"``), for messages.
        source: where they came from (``"command line"``), for messages.

    Returns:
        Dotted key -> value.

    Raises:
        ConfigError: another type, an entry that is not ``key=value``, a value that is not
            YAML, or a key given twice; every problem listed.
    """
    import yaml

    from .spine.config import ConfigError, Problem

    if overrides is None:
        return {}
    if isinstance(overrides, Mapping):
        bad = [k for k in overrides if not isinstance(k, str) or not k.strip()]
        if bad:
            raise ConfigError(
                [Problem(source, flag, k, f"key {k!r} is not a dotted key; {_OVERRIDES}")
                 for k in bad]
            )  # fmt: skip
        return dict(overrides)
    if isinstance(overrides, (str, bytes)):
        items: list[Any] = [overrides]
    elif isinstance(overrides, (list, tuple)):
        items = list(overrides)
    else:
        raise ConfigError(
            [Problem(source, flag, overrides,
                     f"got {type(overrides).__name__} {overrides!r}; {_OVERRIDES}")]
        )  # fmt: skip
    out: dict[str, Any] = {}
    problems = []
    for item in items:
        if not isinstance(item, str):
            problems.append(
                Problem(source, flag, item,
                        f"entry {item!r} is a {type(item).__name__}; {_OVERRIDES}")
            )  # fmt: skip
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(Problem(source, flag, item, f"expected KEY=VALUE, got {item!r}"))
            continue
        if key in out:
            problems.append(Problem(source, flag, item, f"{key} is given twice"))
            continue
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            problems.append(
                Problem(source, key, value,
                        f"{value!r} is not a YAML value: {' '.join(str(e).split())}")
            )  # fmt: skip
    if problems:
        raise ConfigError(problems)
    return out


def load_arch(arch: Any, overrides: Any = None) -> tuple[SimTarget, Any]:
    """Load an architecture of any kind.

    Args:
        arch: a loaded config (any registered ``config_type``), a shipped name or a YAML path.
        overrides: dotted key -> value changes (:func:`coaccel.config.override`), in any form
            :func:`parse_overrides` takes.

    Returns:
        ``(target, config)``.

    Raises:
        ConfigError: a bad file, name, kind or override.
    """
    from .spine.config import override

    kind = getattr(arch, "kind", None)
    if isinstance(kind, str) and not isinstance(arch, (str, Path)):
        t = target(kind)
        cfg = arch
    else:
        t, path = find_arch(arch)
        cfg = t.load_arch(path)
    changes = parse_overrides(overrides)
    if changes:
        cfg = override(cfg, changes)
    return t, cfg


def load_workload(t: SimTarget, workload: Any) -> Any:
    """Load a workload for a target through its loader, after the checks every target shares.

    Args:
        t: the target.
        workload: what the user named (``"llama-3-8b:prefill_2k"``, a path, a workload
            string), or an object the target's loader returned (passed through).

    Returns:
        The target's workload object.

    Raises:
        ConfigError: a path that is a folder, FIFO, device or socket (refused before anything
            opens it), or what the target's loader refuses.
    """
    if not isinstance(workload, (str, Path)):
        return workload
    _refuse_special(Path(workload), "a workload file")
    return t.load_workload(workload)


def simulate(
    arch: Any,
    workload: Any,
    *,
    mode: str = "analytical",
    overrides: Any = None,
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
        overrides: changes to the architecture, validated like the file: a mapping of dotted
            key -> value (``{"pe_array.n_pes": 64}``), a list of ``"key=value"`` strings (as
            ``--set`` takes them) or one such string (:func:`parse_overrides`).
        **options: target-specific options (:attr:`~coaccel.sim.common.SimTarget.options`,
            e.g. ``engine="simpy"`` for the HBQ ASIC's cycle mode).

    Returns:
        The target's result (a :class:`~coaccel.sim.common.result.SimResult`; its
        ``metrics()`` is the same flat name -> (value, unit) mapping for every kind).

    Raises:
        ConfigError: bad architecture, workload, overrides, mode or option.
    """
    from .spine.config import ConfigError, Problem

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
    return t.simulate(cfg, load_workload(t, workload), mode=mode, **options)
