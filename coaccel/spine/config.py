"""Typed configurations: YAML on disk, frozen dataclasses in memory, every problem reported at once.

A schema is a frozen dataclass whose fields carry type hints (``int``, ``float``, ``bool``,
``str``, ``Literal[...]``, ``tuple[T, ...]``, ``tuple[A, B]``, ``Optional[T]`` / ``T | None``,
nested dataclasses, ``Mapping[str, T]``), optional bounds and documentation via :func:`param`,
and, at the top level, ``VERSION: ClassVar[int]``. :func:`load_config` reads a YAML file into
such a schema; every problem found (unknown or missing keys, wrong types, out-of-range values,
bad units, a missing or unsupported ``version``, cross-field rules from the schema's
``validate()``) is collected and raised as one :class:`ConfigError`, one line per problem::

    arch_configs/hbq_a.yaml: pe_array.mac_per_pe: unknown key 'mac_per_pe'; valid keys: \
macs_per_pe, n_pes (did you mean 'macs_per_pe'?)

Units live in key names (``freq_mhz``, ``sram_kib``, ``bw_gb_per_s``); a value is a number in
that unit or a string with its own unit (``"0.5 GHz"``). A nested-dataclass key may also name
another YAML file (``dram: dram/ddr4_kv260.yaml``), resolved next to the including file and
then among the shipped ``arch_configs/``; the file is loaded as a full config of that schema.

See ``docs/config.md`` for the full rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import functools
import hashlib
import json
import math
import numbers
import reprlib
import types
import typing
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml

from .errors import CoaccelError
from .units import UnitError, convert_quantity, parse_unit, unit_for_name

__all__ = [
    "MISSING",
    "ConfigError",
    "DramConfig",
    "EfficiencyPoint",
    "FrozenMap",
    "Problem",
    "config_digest",
    "dump_config",
    "load_config",
    "load_config_dict",
    "override",
    "param",
    "parse_quantity",
]

T = TypeVar("T")
V = TypeVar("V")

MISSING = dataclasses.MISSING
"""Sentinel for :func:`param` without a default (the key is required)."""

_META_KEY = "coaccel.config"


# ---------------------------------------------------------------------------------------------
# Public data types


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config.

    Attributes:
        file: the file (or ``"<dict>"`` / ``"<override of X>"``) the value came from.
        key: dotted path of the key, e.g. ``"pe_array.macs_per_pe"`` or ``"sizes[2]"``;
            ``""`` for problems with the whole document (YAML syntax, not a mapping).
        value: the offending value as given (None when the key is missing).
        message: what is wrong, one line.
        valid: what would be accepted (valid keys, bounds, choices, units, type), if known.
    """

    file: str
    key: str
    value: Any
    message: str
    valid: str | None = None

    def __str__(self) -> str:
        parts = [_printable(p) for p in (self.file, self.key) if p]
        return ": ".join([*parts, _printable(self.message)])


def _printable(text: str) -> str:
    # One problem, one line: a key such as "a\nb" is shown escaped.
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ConfigError(CoaccelError):
    """A config has problems; ``str()`` lists every one, one per line.

    Attributes:
        problems: every problem found, in document order.
    """

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __reduce__(self):  # keeps .problems across process pools (pickle)
        return (type(self), (self.problems,))


class FrozenMap(Mapping[str, V]):
    """An immutable, hashable mapping: what ``Mapping[str, T]`` fields hold after loading.

    Args:
        items: a mapping or an iterable of ``(key, value)`` pairs; values must be hashable.
    """

    __slots__ = ("_d", "__weakref__")

    def __init__(self, items: Mapping[str, V] | typing.Iterable[tuple[str, V]] = ()) -> None:
        self._d: dict[str, V] = dict(items)

    def __getitem__(self, key: str) -> V:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        return hash(frozenset(self._d.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._d!r})"


@dataclass(frozen=True)
class _Param:
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[Any, ...] | None = None
    doc: str = ""
    unit: str | None = None

    def bounds(self) -> list[str]:
        out = []
        for op, b in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt)):
            if b is not None:
                out.append(f"{op} {_show(b)}")
        return out

    def violates(self, x: float) -> bool:
        return (
            (self.ge is not None and not x >= self.ge)
            or (self.gt is not None and not x > self.gt)
            or (self.le is not None and not x <= self.le)
            or (self.lt is not None and not x < self.lt)
        )


def param(
    default: Any = MISSING,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: typing.Iterable[Any] | None = None,
    doc: str = "",
    unit: str | None = None,
) -> Any:
    """Declare a schema field with bounds, choices, documentation and unit.

    Bounds and choices apply to each scalar value of the field: the value itself, each item of
    a tuple, each value of a mapping (never to ``None`` of an ``Optional``).

    Args:
        default: the default value; omitted means the key is required. Must be immutable
            (tuples, :class:`FrozenMap`, frozen dataclasses).
        ge: value must be >= this (numbers, in the field's unit).
        gt: value must be > this.
        le: value must be <= this.
        lt: value must be < this.
        choices: the allowed values (for ``str``/``int`` fields; prefer ``Literal`` types).
        doc: one line for ``docs/`` and error messages.
        unit: the field's unit symbol (``"MHz"``, ``"GB/s"``, ``"pJ/B"``); None derives it from
            the name's suffix, ``""`` declares the field unitless.

    Returns:
        A ``dataclasses.Field`` for the schema's class body.

    Raises:
        ValueError: an unknown unit symbol.
    """
    if unit and parse_unit(unit) is None:
        raise ValueError(f"param(unit={unit!r}): unknown unit")
    spec = _Param(ge, gt, le, lt, None if choices is None else tuple(choices), doc, unit)
    return dataclasses.field(default=default, metadata={_META_KEY: spec})


# ---------------------------------------------------------------------------------------------
# Schema introspection


@dataclass(frozen=True)
class _FieldInfo:
    name: str
    tp: Any
    spec: _Param
    unit: str | None
    required: bool


_SCALARS = (bool, int, float, str)


def _check_type(tp: Any, where: str) -> None:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _SCALARS or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return
    if origin is Literal:
        return
    if origin in (typing.Union, types.UnionType):
        for a in args:
            if a is not type(None):
                _check_type(a, where)
        return
    if origin is tuple and args:
        for a in args:
            if a is not Ellipsis:
                _check_type(a, where)
        return
    if origin is Mapping and len(args) == 2 and args[0] is str:
        _check_type(args[1], where)
        return
    raise TypeError(
        f"{where}: unsupported type {tp!r} in a config schema (use int, float, bool, str, "
        "Literal, tuple[T, ...], Optional[T], Mapping[str, T] or a frozen dataclass)"
    )


@functools.cache
def _schema_fields(cls: type) -> tuple[_FieldInfo, ...]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass schema")
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"config schema {cls.__name__} must be a frozen dataclass")
    try:
        hints = typing.get_type_hints(cls)
    except NameError as e:
        raise TypeError(f"cannot resolve the type hints of schema {cls.__name__}: {e}") from None
    infos = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        _check_type(tp, f"{cls.__name__}.{f.name}")
        spec = f.metadata.get(_META_KEY, _Param())
        unit = spec.unit if spec.unit is not None else unit_for_name(f.name)
        required = f.default is MISSING and f.default_factory is MISSING
        infos.append(_FieldInfo(f.name, tp, spec, unit or None, required))
    return tuple(infos)


def _version_of(cls: type) -> int | None:
    v = getattr(cls, "VERSION", None)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# ---------------------------------------------------------------------------------------------
# Messages

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = 6
_repr.maxtuple = 6
_repr.maxdict = 6
_repr.maxlevel = 3


def _show(value: Any) -> str:
    if value is None:
        return "null"
    return _repr.repr(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return "date"
    if isinstance(value, bytes):
        return "binary"
    return type(value).__name__


def _got(value: Any) -> str:
    return "null" if value is None else f"{_kind(value)} {_show(value)}"


def _type_name(tp: Any, unit: str | None = None) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in (int, float) and unit:
        return f"{tp.__name__} in {unit} (or a string with a unit, e.g. '1 {unit}')"
    if tp in _SCALARS:
        return tp.__name__
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__})"
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a, unit) for a in args if a is not type(None)]
        if type(None) in args:
            names.append("null")
        return " or ".join(names)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_type_name(args[0], unit)}"
        return f"a list of {len(args)} ({', '.join(_type_name(a, unit) for a in args)})"
    if origin is Mapping:
        return f"a mapping of str to {_type_name(args[1], unit)}"
    return repr(tp)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# Conversion


class _Bad:
    """Marker for a value that produced a problem (the problem is already recorded)."""


_BAD = _Bad()


@dataclass
class _Ctx:
    file: str
    base_dir: Path | None
    problems: list[Problem]
    includes: tuple[str, ...] = ()
    validated: set[int] = dataclasses.field(default_factory=set)

    def add(self, key: str, value: Any, message: str, valid: str | None = None) -> _Bad:
        self.problems.append(Problem(self.file, key, value, message, valid))
        return _BAD


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
        for a in others:
            trial = _Ctx(ctx.file, ctx.base_dir, [], ctx.includes, ctx.validated)
            converted = _convert(value, a, key, info, trial)
            if not trial.problems:
                return converted
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


def _not_a_choice(value: Any, choices: tuple[Any, ...], key: str, ctx: _Ctx) -> _Bad:
    listed = ", ".join(str(c) for c in choices)
    msg = f"{_show(value)} is not a valid choice; choices: {listed}"
    if isinstance(value, str):
        close = difflib.get_close_matches(value, [str(c) for c in choices], n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
    return ctx.add(key, value, msg, listed)


def _convert_scalar(value: Any, tp: type, key: str, info: _FieldInfo, ctx: _Ctx) -> Any:
    unit = info.unit if tp in (int, float) else None
    name = _type_name(tp, unit)
    wrong = f"expected {name}, got {_got(value)}"
    out: Any
    if tp is bool:
        if not isinstance(value, bool):
            return ctx.add(key, value, wrong, name)
        return value
    if tp is str:
        if not isinstance(value, str):
            return ctx.add(key, value, wrong, name)
        out = value
    elif isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        return ctx.add(key, value, wrong, name)
    elif isinstance(value, str):
        if unit is None:
            return ctx.add(key, value, wrong, name)
        try:
            exact = convert_quantity(value, unit)
        except UnitError as e:
            if e.kind == "syntax":
                return ctx.add(key, value, wrong, name)
            return ctx.add(key, value, str(e), e.accepted)
        if tp is int:
            if exact.denominator != 1:
                return ctx.add(
                    key, value, f"{_show(value)} is not a whole number of {unit}", f"int in {unit}"
                )
            out = int(exact)
        else:
            out = _to_float(exact, value, key, ctx)
    elif tp is int:
        if not isinstance(value, numbers.Integral):
            return ctx.add(key, value, wrong, name)
        out = int(value)
    else:
        out = _to_float(value, value, key, ctx)
    if out is _BAD:
        return _BAD
    return _check_leaf(out, value, key, info, ctx)


def _to_float(x: Fraction | numbers.Real, raw: Any, key: str, ctx: _Ctx) -> Any:
    try:
        out = float(x)
    except OverflowError:
        return ctx.add(key, raw, f"{_show(raw)} is out of range: too large for a float", "a float")
    if math.isnan(out):
        return ctx.add(key, raw, f"{_show(raw)} is not allowed (not a number)", "a number")
    return out


def _check_leaf(out: Any, raw: Any, key: str, info: _FieldInfo, ctx: _Ctx) -> Any:
    spec = info.spec
    if spec.choices is not None and out not in spec.choices:
        return _not_a_choice(raw, spec.choices, key, ctx)
    if isinstance(out, (int, float)) and spec.violates(out):
        shown = _show(raw)
        if isinstance(raw, str):
            shown += f" (= {_show(out)} {info.unit})"
        bounds = " and ".join(spec.bounds())
        return ctx.add(key, raw, f"{shown} is out of range: must be {bounds}", bounds)
    return out


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


def _parse_yaml(text: bytes | str, ctx: _Ctx) -> tuple[Any, bool]:
    n_before = len(ctx.problems)
    try:
        loader = yaml.SafeLoader(text)
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


# ---------------------------------------------------------------------------------------------
# Configs known to be valid, and their digests
#
# A config that came out of the loader (or out of :func:`override`) passed every check and holds
# only immutable values (frozen dataclasses, tuples, FrozenMap, scalars), so its digest can be
# kept and a variant of it needs checking only along the paths that changed. Entries are keyed
# by ``id`` and hold a weak reference, so a reused id never matches a dead config.

_VALID: dict[int, list[Any]] = {}  # id -> [weakref to the config, its digest or None]


def _forget(key: int, ref: weakref.ref) -> None:
    entry = _VALID.get(key)
    if entry is not None and entry[0] is ref:
        del _VALID[key]


def _mark_validated(obj: Any) -> None:
    key = id(obj)
    try:
        ref = weakref.ref(obj, functools.partial(_forget, key))
    except TypeError:  # a schema without __weakref__ (slots): not remembered
        return
    _VALID[key] = [ref, None]


def _valid_entry(obj: Any) -> list[Any] | None:
    entry = _VALID.get(id(obj))
    if entry is None or entry[0]() is not obj:
        return None
    return entry


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
_json_str = json.encoder.encode_basestring_ascii  # what json.dumps(ensure_ascii=True) uses
_TEXTS: dict[int, tuple[weakref.ref, str]] = {}  # id -> (weakref, canonical JSON of a sub-block)


def _forget_text(key: int, ref: weakref.ref) -> None:
    entry = _TEXTS.get(key)
    if entry is not None and entry[0] is ref:
        del _TEXTS[key]


def _canonical_fields(obj: Any, head: list[tuple[str, str]]) -> str:
    items = head + [(f.name, _canonical(getattr(obj, f.name))) for f in dataclasses.fields(obj)]
    items.sort(key=lambda kv: kv[0])
    return "{" + ",".join(_json_str(k) + ":" + t for k, t in items) + "}"


def _canonical(v: Any) -> str:
    """The canonical JSON of a part of a validated config (exactly ``json.dumps`` of its dump,
    keys sorted); each nested dataclass's and FrozenMap's text is kept, so a variant that shares
    sub-blocks with its base re-encodes only the blocks on its changed paths."""
    tp = type(v)
    if tp is str:
        return _json_str(v)
    if tp is int:
        return int.__repr__(v)
    if tp is float and math.isfinite(v):
        return float.__repr__(v)
    if v is None:
        return "null"
    if tp is bool:
        return "true" if v else "false"
    frozen_map = tp is FrozenMap
    if frozen_map or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
        key = id(v)
        hit = _TEXTS.get(key)
        if hit is not None and hit[0]() is v:
            return hit[1]
        if frozen_map:
            pairs = sorted((k, _canonical(x)) for k, x in v.items())
            text = "{" + ",".join(_JSON.encode(k) + ":" + t for k, t in pairs) + "}"
        else:
            text = _canonical_fields(v, [])
        try:
            ref = weakref.ref(v, functools.partial(_forget_text, key))
        except TypeError:
            return text
        _TEXTS[key] = (ref, text)
        return text
    if isinstance(v, tuple):
        return "[" + ",".join(_canonical(x) for x in v) + "]"
    if isinstance(v, Mapping):
        pairs = sorted((k, _canonical(x)) for k, x in v.items())
        return "{" + ",".join(_JSON.encode(k) + ":" + t for k, t in pairs) + "}"
    return _JSON.encode(v)


@functools.cache
def _field_info(cls: type, name: str) -> _FieldInfo | None:
    return next((i for i in _schema_fields(cls) if i.name == name), None)


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


# ---------------------------------------------------------------------------------------------
# Public functions


@functools.cache
def field_paths(schema: type) -> frozenset[str]:
    """Every dotted key of a schema: its fields and, through nested dataclasses, theirs.

    Args:
        schema: a frozen-dataclass schema (``HbqArchConfig``, ...).

    Returns:
        ``{"pe_array", "pe_array.n_pes", ...}``; a field typed ``T | None`` with a dataclass
        ``T`` contributes ``T``'s keys too.
    """
    out: set[str] = set()
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        out.add(f.name)
        t = hints[f.name]
        for a in typing.get_args(t) or (t,):
            if dataclasses.is_dataclass(a) and isinstance(a, type):
                out |= {f"{f.name}.{k}" for k in field_paths(a)}
    return frozenset(out)


def source_key_problems(obj: Any, sources: Mapping[str, Any]) -> list[Problem]:
    """Problems of a ``sources:`` block whose keys must name fields of the config.

    Shipped architectures cite a reference key per value under ``sources: {dotted.key: text}``;
    a key that names no field (a typo, a renamed key) would cite nothing.

    Args:
        obj: the config (an instance of its schema).
        sources: its ``sources`` mapping.

    Returns:
        One :class:`Problem` per key that is not a field path of the config's schema.
    """
    schema: type = type(obj)
    valid = field_paths(schema)
    return [
        Problem("", f"sources.{key}", key, f"{key!r} is not a field of {type(obj).__name__}")
        for key in sources
        if key not in valid
    ]


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


def _dump(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _dump(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, tuple):
        return [_dump(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _dump(x) for k, x in v.items()}
    return v


def dump_config(obj: Any) -> dict[str, Any]:
    """The plain-data form of a config: the inverse of :func:`load_config_dict`.

    Args:
        obj: a config (an instance of a schema).

    Returns:
        A dict of plain YAML/JSON data (dicts, lists, numbers in the key's unit, str, bool,
        None), headed by ``version`` when the schema declares ``VERSION``; included files
        appear inline. ``load_config_dict(dump_config(c), type(c)) == c``.

    Raises:
        TypeError: ``obj`` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"dump_config expects a config instance, got {type(obj).__name__}")
    out = _dump(obj)
    version = _version_of(type(obj))
    return out if version is None else {"version": version, **out}


def config_digest(obj: Any) -> str:
    """A stable fingerprint of a config, for trace metadata and result stores.

    It is the SHA-256 of the canonical JSON of :func:`dump_config` (keys sorted, separators
    ``","`` and ``":"``, ASCII only; floats as Python's shortest round-trip repr), so equal
    configs give equal digests whatever their key order, comments or unit spellings on disk.

    Args:
        obj: a config instance.

    Returns:
        64 lower-case hex digits.
    """
    entry = _valid_entry(obj)
    if entry is None:
        text = json.dumps(
            dump_config(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True
        )
        return hashlib.sha256(text.encode("ascii")).hexdigest()
    if entry[1] is None:  # a validated config is immutable: its digest cannot change
        version = _version_of(type(obj))
        head = [] if version is None else [("version", _JSON.encode(version))]
        text = _canonical_fields(obj, head)
        entry[1] = hashlib.sha256(text.encode("ascii")).hexdigest()
    return entry[1]


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


def parse_quantity(text: str | float, unit: str) -> float:
    """Read a number or a quantity string in a given unit (the rule config values follow).

    Args:
        text: a number (already in ``unit``) or a string such as ``"0.5 GHz"``.
        unit: the target unit, e.g. ``"MHz"``.

    Returns:
        The value in ``unit`` (``parse_quantity("0.5 GHz", "MHz") == 500.0``).

    Raises:
        ValueError: not a number, an unknown unit or a unit of another dimension.
    """
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"expected a number or a quantity string, got {text!r}")
    return float(convert_quantity(text, unit))


# ---------------------------------------------------------------------------------------------
# The DRAM block every simulator shares

DramType = Literal[
    "ddr4", "lpddr4", "lpddr5", "lpddr5x", "gddr6", "gddr6x", "hbm2e", "hbm3", "hbm3e"
]


@dataclass(frozen=True)
class EfficiencyPoint:
    """One point of a DRAM efficiency curve: sustained / peak bandwidth at one transfer size.

    Attributes:
        transfer_bytes: bytes moved by one transfer (one request stream of that size), B.
        efficiency: sustained / peak bandwidth for transfers of that size, in (0, 1].
    """

    transfer_bytes: int = param(ge=1, doc="bytes per transfer")
    efficiency: float = param(gt=0, le=1, doc="sustained / peak bandwidth at that size")


@dataclass(frozen=True)
class DramConfig:
    """Off-chip DRAM as the HBQ ASIC, DeltaLLM FPGA and GPU simulators see it.

    Shipped presets: ``arch_configs/dram/*.yaml``. The model that turns these figures into
    cycles is :mod:`coaccel.sim.common.offchip` (docs/config.md, "DRAM").

    Attributes:
        type: DRAM standard.
        channels: independent channels (pseudo-channels for HBM) the simulator may interleave.
        bw_gb_per_s: peak bandwidth, all channels together, GB/s (1e9 B/s).
        efficiency: sustained / peak bandwidth, in (0, 1]: one number for every transfer size
            (a flat curve), or a curve of :class:`EfficiencyPoint` (strictly increasing
            ``transfer_bytes``) interpolated piecewise-linearly in log2 of the transfer size
            and held constant beyond its first and last points.
        latency_ns: first-access (idle load-to-use) latency seen by the accelerator, ns.
        energy_pj_per_byte: access energy per byte moved (device + interface), pJ/B.
        uncertainty_pct: relative uncertainty of ``energy_pj_per_byte``, percent.
        source: where ``energy_pj_per_byte`` comes from (and its uncertainty).
        interleave_bytes: bytes of consecutive addresses mapped to one channel before the next
            channel takes over (address interleave granularity), B.
        row_buffer_bytes: bytes of one open row per channel (page size); None (the default)
            turns the open-row model off, so every transfer costs only its bandwidth time.
        row_hit_penalty_ns: extra time of a transfer that starts in the row its channel has
            open, ns (used only with ``row_buffer_bytes``).
        row_miss_penalty_ns: extra time of a transfer that must open another row first
            (precharge + activate), ns (used only with ``row_buffer_bytes``).
        sources: where each other figure comes from, keyed by field name.
    """

    VERSION: ClassVar[int] = 1

    type: DramType = param(doc="DRAM standard")
    channels: int = param(ge=1, doc="independent channels / pseudo-channels")
    bw_gb_per_s: float = param(gt=0, doc="peak bandwidth, all channels")
    efficiency: float | tuple[EfficiencyPoint, ...] = param(
        gt=0, le=1, doc="sustained / peak bandwidth: a number, or a curve over transfer size"
    )
    latency_ns: float = param(ge=0, doc="first-access (idle load-to-use) latency")
    energy_pj_per_byte: float = param(gt=0, doc="access energy per byte moved")
    uncertainty_pct: float = param(ge=0, doc="relative uncertainty of the energy figure")
    source: str = param(doc="provenance of energy_pj_per_byte")
    interleave_bytes: int = param(default=256, ge=1, doc="channel interleave granularity")
    row_buffer_bytes: int | None = param(
        default=None, ge=1, doc="open row per channel; null = no open-row model"
    )
    row_hit_penalty_ns: float = param(default=0.0, ge=0, doc="extra time of a row hit")
    row_miss_penalty_ns: float = param(default=0.0, ge=0, doc="extra time of a row miss")
    sources: Mapping[str, str] = param(
        default=FrozenMap(), doc="provenance of the other figures, by field name"
    )

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: provenance for known fields only; a well-formed curve; row model.

        A curve has at least one point and strictly increasing transfer sizes; row penalties
        need ``row_buffer_bytes``.
        """
        out: list[Problem | str] = []
        if not self.source.strip():
            out.append(Problem("", "source", self.source, "must say where the energy comes from"))
        figures = [f.name for f in dataclasses.fields(self) if f.name not in ("source", "sources")]
        for k in self.sources:
            if k not in figures:
                msg = f"unknown figure {k!r}; figures: {', '.join(figures)}"
                close = difflib.get_close_matches(k, figures, n=1)
                if close:
                    msg += f" (did you mean {close[0]!r}?)"
                out.append(Problem("", f"sources.{k}", k, msg, ", ".join(figures)))
        if isinstance(self.efficiency, tuple):
            if not self.efficiency:
                out.append(
                    Problem(
                        "",
                        "efficiency",
                        [],
                        "an efficiency curve needs at least one point",
                        "a number in (0, 1] or a list of {transfer_bytes, efficiency}",
                    )
                )
            sizes = [p.transfer_bytes for p in self.efficiency]
            for i in range(1, len(sizes)):
                if sizes[i] <= sizes[i - 1]:
                    out.append(
                        Problem(
                            "",
                            f"efficiency[{i}].transfer_bytes",
                            sizes[i],
                            f"transfer sizes must increase strictly: {sizes[i]} B after "
                            f"{sizes[i - 1]} B",
                        )
                    )
        if self.row_buffer_bytes is None:
            for k in ("row_hit_penalty_ns", "row_miss_penalty_ns"):
                if getattr(self, k):
                    out.append(
                        Problem(
                            "",
                            k,
                            getattr(self, k),
                            f"{k} needs row_buffer_bytes (the open-row model is off without it)",
                        )
                    )
        return out

    @property
    def efficiency_curve(self) -> tuple[EfficiencyPoint, ...]:
        """The efficiency as a curve (a single number is one point at 1 B: a flat curve)."""
        if isinstance(self.efficiency, tuple):
            return self.efficiency
        return (EfficiencyPoint(1, self.efficiency),)

    @property
    def streaming_efficiency(self) -> float:
        """Efficiency of long streaming transfers: the curve's last point (or the number)."""
        if isinstance(self.efficiency, tuple):
            return self.efficiency[-1].efficiency
        return self.efficiency

    @property
    def sustained_bw_gb_per_s(self) -> float:
        """Peak bandwidth times the streaming efficiency, GB/s."""
        return self.bw_gb_per_s * self.streaming_efficiency

    def sustained_bytes_per_cycle(self, freq_mhz: float) -> float:
        """Sustained streaming bandwidth in bytes per cycle of a clock.

        Per transfer size, see :func:`coaccel.sim.common.offchip.sustained_bytes_per_cycle`.

        Args:
            freq_mhz: the consumer's clock, MHz (e.g. 250 for the KV260 design).

        Returns:
            Bytes per cycle (19.2 GB/s at 250 MHz is 76.8 B/cycle peak, times the streaming
            efficiency).
        """
        return self.bw_gb_per_s * self.streaming_efficiency * 1e3 / freq_mhz
