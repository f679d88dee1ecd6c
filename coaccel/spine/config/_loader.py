"""The loader: a YAML document (or parsed data) checked against a schema into a frozen config.

The document is walked along the schema; every problem (YAML syntax, duplicate keys, a missing
or unsupported ``version``, unknown or missing keys, wrong types, values out of range, bad units,
the schemas' own ``validate()`` rules, unreadable or cyclic includes) is recorded, and the load
fails once, with one :class:`~._problems.ConfigError` that lists them all.

Public: :func:`load_config` (a YAML file), :func:`load_config_dict` (a parsed mapping).

Internal (also used by :mod:`._override`):

* :func:`_convert`: any value against any supported type (unions, literals, nested schemas
  and includes, tuples, mappings; scalars through :func:`~._values._convert_scalar`), with
  :func:`_convert_dataclass`, :func:`_convert_tuple` and :func:`_same_shape` (which
  alternative of a union takes a value).
* :func:`_load_data`: a whole document (``version``, fields, cross-field rules); the config is
  then marked validated (:func:`~._digest._mark_validated`). :func:`_validate_tree`: every
  ``validate()`` of a config tree, bottom-up.
* :func:`_parse_yaml` (with :func:`_check_duplicates`) and :func:`_load_text`: YAML text to a
  checked config.
* :func:`_include`: a nested schema given as the path of another YAML file (next to the
  including file, then among the shipped configs: :func:`_shipped_root`; :func:`_is_file`).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from ._digest import _mark_validated
from ._problems import _BAD, ConfigError, Problem, _Ctx, _got, _join, _one_line, _show
from ._schema import _SCALARS, FrozenMap, _FieldInfo, _schema_fields, _version_of
from ._values import _convert_scalar, _not_a_choice, _type_name

__all__ = ["load_config", "load_config_dict"]

T = TypeVar("T")


def load_config(path: str | Path, schema: type[T]) -> T:
    """Load and validate a YAML config file into a frozen dataclass.

    Args:
        path: the YAML file; it must start with ``version: <schema.VERSION>``.
        schema: the frozen dataclass schema (with ``VERSION: ClassVar[int]``).

    Returns:
        The config, an instance of ``schema``; numbers are in the units their key names say.

    Raises:
        ConfigError: every problem found (unreadable file, YAML syntax with line and column,
            duplicate keys, unknown/missing keys, types, ranges, choices, units, version,
            the schema's ``validate()`` rules), one per line.
        TypeError: ``schema`` is not a valid schema (a programming error, not a config error).
    """
    p = Path(path)
    ctx = _Ctx(str(path), p.parent, [])
    try:
        raw = p.read_bytes()
        ctx.includes = (str(p.resolve()),)
    except OSError as e:
        raise ConfigError(
            [Problem(str(path), "", None, f"cannot read: {e.strerror or e}")]
        ) from None
    obj = _load_text(raw, schema, ctx)
    if ctx.problems:
        raise ConfigError(ctx.problems)
    return obj


def load_config_dict(data: Mapping[str, Any], schema: type[T], *, source: str = "<dict>") -> T:
    """Validate an already-parsed mapping (e.g. from a sweep) into a frozen dataclass.

    Args:
        data: the document, as ``yaml.safe_load`` would return it (lists or tuples for lists);
            it must contain ``version``. Relative includes resolve among the shipped configs.
        schema: the frozen dataclass schema.
        source: the name problems report in place of a file name.

    Returns:
        The config, an instance of ``schema``.

    Raises:
        ConfigError: every problem found, one per line.
        TypeError: ``schema`` is not a valid schema.
    """
    ctx = _Ctx(source, None, [])
    obj = _load_data(data, schema, ctx)
    if ctx.problems:
        raise ConfigError(ctx.problems)
    return obj


# ---------------------------------------------------------------------------------------------
# Values against types


def _convert(value: Any, tp: Any, key: str, info: _FieldInfo, ctx: _Ctx) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if value is None and type(None) in args:
            return None
        if len(others) == 1:
            return _convert(value, others[0], key, info, ctx)
        fits = [a for a in others if _same_shape(value, a)]
        if len(fits) == 1:  # one alternative takes this kind of value: report its problems
            return _convert(value, fits[0], key, info, ctx)
        first_of_its_type = None
        for a in others:
            trial = _Ctx(ctx.file, ctx.base_dir, [], ctx.includes, ctx.validated)
            converted = _convert(value, a, key, info, trial)
            if not trial.problems:
                return converted
            if first_of_its_type is None and isinstance(a, type) and type(value) is a:
                first_of_its_type = trial.problems  # the alternative of the value's own type
        if first_of_its_type:  # e.g. a float that is NaN or infinite: say that, not its type
            ctx.problems.extend(first_of_its_type)
            return _BAD
        name = _type_name(tp, info.unit)
        return ctx.add(key, value, f"expected {name}, got {_got(value)}", name)
    if origin is Literal:
        for c in args:
            if type(value) is type(c) and value == c:
                return value
        return _not_a_choice(value, args, key, ctx)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, str) and _version_of(tp) is not None:
            return _include(value, tp, key, ctx)
        if not isinstance(value, Mapping):
            name = _type_name(tp)
            return ctx.add(key, value, f"expected {name}, got {_got(value)}", name)
        return _convert_dataclass(value, tp, key, ctx)
    if origin is tuple:
        return _convert_tuple(value, tp, args, key, info, ctx)
    if origin is Mapping:
        if not isinstance(value, Mapping):
            name = _type_name(tp, info.unit)
            return ctx.add(key, value, f"expected {name}, got {_got(value)}", name)
        out: dict[str, Any] = {}
        bad = False
        for k, v in value.items():
            if not isinstance(k, str):
                ctx.add(key, k, f"mapping key {_show(k)} is not a string", "str")
                bad = True
                continue
            r = _convert(v, args[1], _join(key, k), info, ctx)
            bad = bad or r is _BAD
            out[k] = r
        return _BAD if bad else FrozenMap(out)
    return _convert_scalar(value, tp, key, info, ctx)


def _same_shape(value: Any, tp: Any) -> bool:
    """Whether ``tp`` takes values of this kind (a list, a mapping, or a scalar)."""
    origin = typing.get_origin(tp)
    is_dc = isinstance(tp, type) and dataclasses.is_dataclass(tp)
    if isinstance(value, (list, tuple)):
        return origin is tuple
    if isinstance(value, Mapping):
        return is_dc or origin is Mapping
    if is_dc:
        return isinstance(value, str) and _version_of(tp) is not None
    return tp in _SCALARS or origin is Literal


def _convert_tuple(value, tp, args, key, info, ctx):
    name = _type_name(tp, info.unit)
    if not isinstance(value, (list, tuple)):
        return ctx.add(key, value, f"expected {name}, got {_got(value)}", name)
    if len(args) == 2 and args[1] is Ellipsis:
        item_types = [args[0]] * len(value)
    else:
        item_types = list(args)
        if len(value) != len(args):
            return ctx.add(key, value, f"expected {name}, got a list of {len(value)} items", name)
    pairs = enumerate(zip(value, item_types, strict=True))
    out = [_convert(v, t, f"{key}[{i}]", info, ctx) for i, (v, t) in pairs]
    return _BAD if any(r is _BAD for r in out) else tuple(out)


def _convert_dataclass(data: Mapping, cls: type, prefix: str, ctx: _Ctx, root: bool = False):
    infos = _schema_fields(cls)
    by_name = {i.name: i for i in infos}
    valid = (["version"] if root else []) + list(by_name)
    kwargs: dict[str, Any] = {}
    bad = False
    for k, v in data.items():
        if root and k == "version":
            continue
        if not isinstance(k, str):
            ctx.add(prefix, k, f"key {_show(k)} is not a string; valid keys: {', '.join(valid)}")
            bad = True
            continue
        info = by_name.get(k)
        if info is None:
            msg = f"unknown key {k!r}; valid keys: {', '.join(valid)}"
            close = difflib.get_close_matches(k, valid, n=1)
            if close:
                msg += f" (did you mean {close[0]!r}?)"
            ctx.add(_join(prefix, k), v, msg, ", ".join(valid))
            bad = True
            continue
        r = _convert(v, info.tp, _join(prefix, k), info, ctx)
        if r is _BAD:
            bad = True
        else:
            kwargs[k] = r
    for info in infos:
        if info.required and info.name not in data:
            name = _type_name(info.tp, info.unit)
            ctx.add(_join(prefix, info.name), None, "missing required key", name)
            bad = True
    return _BAD if bad else cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# Documents: version, cross-field rules, YAML, includes


def _load_data(data: Any, cls: type, ctx: _Ctx) -> Any:
    version = _version_of(cls)
    if version is None:
        raise TypeError(f"config schema {cls.__name__} declares no VERSION: ClassVar[int]")
    n_before = len(ctx.problems)
    head = f"a mapping with 'version: {version}' and the keys of {cls.__name__}"
    if data is None:
        return ctx.add("", None, f"the document is empty; expected {head}", head)
    if not isinstance(data, Mapping):
        return ctx.add("", data, f"expected {head}, got {_got(data)}", head)
    if "version" not in data:
        ctx.add(
            "version",
            None,
            f"missing required key (the file must start with 'version: {version}')",
            str(version),
        )
    else:
        v = data["version"]
        if isinstance(v, bool) or not isinstance(v, int):
            ctx.add("version", v, f"expected int, got {_got(v)}", str(version))
        elif v != version:
            ctx.add(
                "version",
                v,
                f"unsupported version {v}; this coaccel reads {cls.__name__} version {version}",
                str(version),
            )
    obj = _convert_dataclass(data, cls, "", ctx, root=True)
    if obj is _BAD or len(ctx.problems) > n_before:
        return _BAD
    _validate_tree(obj, "", ctx)
    if len(ctx.problems) > n_before:
        return _BAD
    ctx.validated.add(id(obj))
    _mark_validated(obj)
    return obj


def _validate_tree(obj: Any, path: str, ctx: _Ctx) -> None:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if id(obj) in ctx.validated:  # an included file, already validated with its own name
            return
        for f in dataclasses.fields(obj):
            _validate_tree(getattr(obj, f.name), _join(path, f.name), ctx)
        check = getattr(obj, "validate", None)
        if check is None:
            return
        for item in check():
            if isinstance(item, str):
                ctx.add(path, None, _one_line(item))
            elif isinstance(item, Problem):
                ctx.problems.append(
                    Problem(
                        item.file or ctx.file,
                        _join(path, item.key),
                        item.value,
                        _one_line(item.message),
                        item.valid,
                    )
                )
            else:
                raise TypeError(
                    f"{type(obj).__name__}.validate() must return Problem or str items, "
                    f"got {type(item).__name__}"
                )
    elif isinstance(obj, tuple):
        for i, v in enumerate(obj):
            _validate_tree(v, f"{path}[{i}]", ctx)
    elif isinstance(obj, FrozenMap):
        for k, v in obj.items():
            _validate_tree(v, _join(path, k), ctx)


def _check_duplicates(node: yaml.Node, path: str, ctx: _Ctx, seen: set[int]) -> None:
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: dict[tuple[str, str], int] = {}
        for knode, vnode in node.value:
            if knode.tag == "tag:yaml.org,2002:merge":
                continue
            if isinstance(knode, yaml.ScalarNode):
                ident = (knode.tag, knode.value)
                sub = _join(path, knode.value)
                if ident in keys:
                    ctx.add(
                        sub,
                        knode.value,
                        f"duplicate key {knode.value!r} (line {knode.start_mark.line + 1}; "
                        f"first at line {keys[ident]})",
                    )
                else:
                    keys[ident] = knode.start_mark.line + 1
            else:
                sub = path
            _check_duplicates(vnode, sub, ctx, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{i}]", ctx, seen)


# libyaml's parser when PyYAML was built with it (about 8x faster, same documents and marks)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(text: bytes | str, ctx: _Ctx) -> tuple[Any, bool]:
    n_before = len(ctx.problems)
    try:
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            data = None
            if node is not None:
                _check_duplicates(node, "", ctx, set())
                data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = "; ".join(_one_line(x) for x in (e.context, e.problem) if x)
        return ctx.add("", None, f"{where}invalid YAML: {what}"), False
    except yaml.YAMLError as e:
        return ctx.add("", None, f"invalid YAML: {_one_line(str(e))}"), False
    except RecursionError:
        return ctx.add("", None, "invalid YAML: nested too deeply"), False
    except (ValueError, TypeError, OverflowError) as e:
        # PyYAML's constructors raise these for e.g. a timestamp with month 13.
        return ctx.add("", None, f"invalid YAML value: {_one_line(str(e))}"), False
    return data, len(ctx.problems) == n_before


def _load_text(text: bytes | str, cls: type, ctx: _Ctx) -> Any:
    data, ok = _parse_yaml(text, ctx)
    if not ok:
        return _BAD
    return _load_data(data, cls, ctx)


def _shipped_root() -> Path:
    from importlib.resources import files

    return Path(str(files("coaccel.arch_configs")))


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL byte
        return False


def _include(ref: str, cls: type, key: str, ctx: _Ctx) -> Any:
    candidates = []
    if Path(ref).is_absolute():
        candidates.append(Path(ref))
    else:
        if ctx.base_dir is not None:
            candidates.append(ctx.base_dir / ref)
        candidates.append(_shipped_root() / ref)
    path = next((c for c in candidates if _is_file(c)), None)
    if path is None:
        looked = ", ".join(str(c) for c in candidates)
        return ctx.add(
            key,
            ref,
            f"cannot include {ref!r} as {cls.__name__}: no such file (looked for {looked})",
            f"a mapping ({cls.__name__}) or the path of a {cls.__name__} YAML file",
        )
    resolved = str(path.resolve())
    if resolved in ctx.includes:
        chain = " -> ".join([*ctx.includes, resolved])
        return ctx.add(key, ref, f"include cycle: {chain}")
    try:
        raw = path.read_bytes()
    except OSError as e:
        return ctx.add(key, ref, f"cannot read included file {str(path)!r}: {e.strerror or e}")
    sub = _Ctx(str(path), path.parent, ctx.problems, (*ctx.includes, resolved), ctx.validated)
    return _load_text(raw, cls, sub)
