"""Variants of a config: some dotted keys changed, the result checked like a loaded file.

Public: :func:`override`, :func:`check_value`.

Internal: :func:`_override_fast`, the shortcut for a validated base: only the changed values
and the dataclasses on their paths are converted and checked again (a base that was not
validated, a path through a mapping or an unset section, overlapping paths or any problem fall
back to the plain definition: dump, change, load, which reports every problem).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from ._digest import _mark_validated, _valid_entry, dump_config
from ._loader import _convert, _convert_dataclass, _validate_tree, load_config_dict
from ._problems import ConfigError, Problem, _Ctx, _got
from ._schema import _field_info, _version_of

__all__ = ["check_value", "override"]

T = TypeVar("T")


def override(obj: T, changes: Mapping[str, Any]) -> T:
    """A variant of a config with some keys changed, validated like a loaded file.

    Args:
        obj: the base config (unchanged: configs are frozen).
        changes: dotted key -> new value, e.g. ``{"dram.bw_gb_per_s": "25.6 GB/s",
            "pe_array.n_pes": 16}``; values are given as in YAML (numbers, unit strings,
            lists, mappings).

    Returns:
        A new config of the same type.

    Raises:
        ConfigError: every problem, with dotted keys, the file shown as
            ``<override of SchemaName>``.
    """
    source = f"<override of {type(obj).__name__}>"
    fast = _override_fast(obj, changes, source)
    if fast is not None:
        return fast
    data = dump_config(obj)
    problems = []
    for dotted, value in changes.items():
        parts = dotted.split(".")
        cur: Any = data
        for i, part in enumerate(parts[:-1]):
            nxt = cur.get(part) if isinstance(cur, dict) else None
            if nxt is None:
                # absent (the loader will name an unknown key) or an unset Optional section
                nxt = cur[part] = {}
            elif not isinstance(nxt, dict):
                where = ".".join(parts[: i + 1])
                problems.append(
                    Problem(
                        source,
                        dotted,
                        value,
                        f"cannot set {dotted!r}: {where!r} holds {_got(nxt)}, not a section",
                    )
                )
                break
            cur = nxt
        else:
            cur[parts[-1]] = value
    if problems:
        raise ConfigError(problems)
    cls = type(obj)
    if _version_of(cls) is None:
        ctx = _Ctx(source, None, [])
        new = _convert_dataclass(data, cls, "", ctx)
        if not ctx.problems:
            _validate_tree(new, "", ctx)
        if ctx.problems:
            raise ConfigError(ctx.problems)
        _mark_validated(new)
        return new
    return load_config_dict(data, cls, source=source)


def _override_fast(obj: Any, changes: Mapping[str, Any], source: str) -> Any:
    """:func:`override` of a validated config without re-validating what did not change.

    Returns the new config, or None when the slow path must decide (the base was not validated,
    a path does not lead through dataclass fields, two paths overlap, or any check fails: the
    slow path then reports every problem exactly as it always has). Sub-blocks off the changed
    paths are kept as they are: their ``validate()`` rules see only their own fields, which did
    not change; every new value and every dataclass on a changed path is checked.
    """
    if _valid_entry(obj) is None:
        return None
    tree: dict[str, Any] = {}
    ctx = _Ctx(source, None, [])
    leaf = object()
    for dotted, value in changes.items():
        parts = dotted.split(".")
        node, sub = obj, tree
        for part in parts[:-1]:
            cls: type = type(node)
            if _field_info(cls, part) is None:
                return None
            node = getattr(node, part)
            if not (dataclasses.is_dataclass(node) and not isinstance(node, type)):
                return None  # an unset Optional section, a mapping, a list: the slow path
            nxt = sub.setdefault(part, {})
            if not isinstance(nxt, dict):
                return None  # overlaps a shorter path
            sub = nxt
        owner: type = type(node)
        info = _field_info(owner, parts[-1])
        if info is None or parts[-1] in sub:
            return None  # an unknown key, or overlapping paths
        converted = _convert(value, info.tp, dotted, info, ctx)
        if ctx.problems:
            return None
        _validate_tree(converted, dotted, ctx)
        if ctx.problems:
            return None
        sub[parts[-1]] = (leaf, converted)

    def rebuild(node: Any, sub: dict[str, Any]) -> Any:
        kwargs = {}
        for name, x in sub.items():
            if isinstance(x, tuple) and x and x[0] is leaf:
                kwargs[name] = x[1]
            else:
                kwargs[name] = rebuild(getattr(node, name), x)
                if kwargs[name] is None:
                    return None
        new = dataclasses.replace(node, **kwargs)
        check = getattr(new, "validate", None)
        if check is not None and check():
            return None
        return new

    new = rebuild(obj, tree)
    if new is not None:
        _mark_validated(new)
    return new


def check_value(obj: Any, dotted: str, value: Any) -> list[Problem] | None:
    """The problems of one value for one key, by the key's own schema (type, unit, bounds,
    choices; a whole section by its own rules), without the cross-field rules of the sections
    that hold it.

    A sweep checks every value of every parameter with this before it runs anything: a value
    that no combination could make valid (``-16`` PEs, ``"sixteen"``, ``16.5`` for an integer,
    an infinite size) is an error of the spec, while a value that fails only together with
    other values (a buffer too small for the tile another parameter sets) is a failed point.

    Args:
        obj: a config (its schema gives the key's type).
        dotted: the key (``"pe_array.n_pes"``).
        value: the value as YAML gives it.

    Returns:
        The problems (empty: the value is valid for the key), or None when the key does not
        lead through dataclass fields to a field (a mapping entry, an unset optional section):
        then only a whole override can tell.
    """
    source = f"<override of {type(obj).__name__}>"
    node: Any = obj
    parts = dotted.split(".")
    for part in parts[:-1]:
        owner: type = type(node)
        if _field_info(owner, part) is None:
            return None
        node = getattr(node, part)
        if not (dataclasses.is_dataclass(node) and not isinstance(node, type)):
            return None
    leaf_owner: type = type(node)
    info = _field_info(leaf_owner, parts[-1])
    if info is None:
        return None
    ctx = _Ctx(source, None, [])
    converted = _convert(value, info.tp, dotted, info, ctx)
    if not ctx.problems:
        _validate_tree(converted, dotted, ctx)
    return list(ctx.problems)
