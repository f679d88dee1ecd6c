"""Schemas: frozen dataclasses whose fields carry types, bounds, choices, units and documentation.

A schema field is declared with :func:`param`; the loader reads each schema once through
:func:`_schema_fields` (type hints checked against the supported types, the unit taken from
:func:`param` or from the name's suffix, whether the key is required).

Public: :func:`param` (and :data:`MISSING`), :class:`FrozenMap` (what ``Mapping[str, T]``
fields hold), :func:`field_paths` (every dotted key of a schema), :func:`source_key_problems`
(keys of a ``sources:`` block that name no field).

Internal (shared by the modules of :mod:`coaccel.spine.config`):

* :class:`_Param`: the bounds, choices, unit and doc :func:`param` attaches to a field;
  :class:`_FieldInfo`: a field as the loader sees it.
* :func:`_schema_fields` (cached per schema) and :func:`_field_info` (one field by name);
  :func:`_check_type`: a field's type hint is one the loader can convert;
  :func:`_version_of`: a schema's ``VERSION`` (None if it declares none).
* :data:`_SCALARS`: the scalar types a field may have.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ..units import parse_unit, unit_for_name
from ._problems import Problem, _show

__all__ = ["MISSING", "FrozenMap", "field_paths", "param", "source_key_problems"]

V = TypeVar("V")

MISSING = dataclasses.MISSING
"""Sentinel for :func:`param` without a default (the key is required)."""

_META_KEY = "coaccel.config"


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


@functools.cache
def _field_info(cls: type, name: str) -> _FieldInfo | None:
    return next((i for i in _schema_fields(cls) if i.name == name), None)


# ---------------------------------------------------------------------------------------------
# Dotted keys


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
