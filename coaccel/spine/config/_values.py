"""Leaf values of a config: scalars of a declared type, numbers in the unit their key names.

A number may be given in the key's unit or as a string with its own unit (``"0.5 GHz"`` for
``freq_mhz``); it is converted exactly (through :class:`~fractions.Fraction`), then checked
against the field's choices and bounds.

Public: :func:`parse_quantity` (the same unit rule, for values read outside a schema).

Internal (used by the loader, :mod:`._loader`):

* :func:`_convert_scalar`: a ``bool``, ``int``, ``float`` or ``str`` field's value, converted
  and checked (:func:`_to_float`: no NaN, no overflow; :func:`_check_leaf`: choices, bounds).
* :func:`_not_a_choice`: the problem of a value outside its choices (with the closest one).
* :func:`_type_name`: how a message names a field's type (``"int in MHz (or a string...)"``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import types
import typing
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

from ..units import UnitError, convert_quantity
from ._problems import _BAD, _Bad, _Ctx, _got, _show
from ._schema import _SCALARS, _FieldInfo

__all__ = ["parse_quantity"]


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
    if unit is not None and isinstance(out, float) and math.isinf(out):
        # a physical quantity (a size, a rate, a time) is finite; unitless settings such as a
        # threshold may use infinity to mean "never"
        return ctx.add(key, value, f"{_show(value)} is not allowed (not finite)", "a finite number")
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
