"""Workload strings: ``"<name>:<key>=<value>,..."``, a workload a registered function builds.

A target whose workloads are generated rather than read from a file (the GPU target's
``flashdecode:T=4096,B=8``) declares each as a :class:`StringWorkload`: the function that builds
it and every parameter (:class:`Param`) with its meaning, type, bounds and short aliases, and
the counts that decide the memory the build takes, with their limits (:class:`Size`).
:func:`parse_workload_string` checks a string against the declarations and lists every problem
in one :class:`~coaccel.config.ConfigError`, before anything is built:

* an unknown workload name or key (with the closest valid one, and the valid keys with their
  meaning);
* an entry that is not ``key=value``; a key given twice, alias or not (``T=4096,T=8192``,
  ``T=4096,context=8192``): never "the last one wins";
* a value of the wrong type (``T=4k``), NaN or infinity, or outside the declared bounds (the
  message states the limit and its unit);
* a required parameter missing (those without a default in the function's signature), naming
  it and listing the valid keys with their meaning;
* a build whose size is above its limit (``batch x kv_heads x ceil(context / block_n)`` K/V
  tiles), refused before anything is allocated.

:func:`build_workload_string` parses, then calls the function; a ``ValueError`` or
``MemoryError`` of the build becomes a ``ConfigError`` too. The limits are generous: far above
any real model (a context of 2^24 tokens, 1024 heads), only there so that a typo never asks for
terabytes.

Public: :class:`Param`, :class:`Size`, :class:`StringWorkload`, :func:`parse_workload_string`,
:func:`build_workload_string`, :func:`format_params`.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .config import ConfigError, Problem

__all__ = [
    "Param",
    "Size",
    "StringWorkload",
    "build_workload_string",
    "format_params",
    "parse_workload_string",
]

ParamKind = Literal["int", "float", "flag", "choice"]
_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@dataclass(frozen=True)
class Param:
    """One parameter of a workload string.

    Attributes:
        name: the keyword the build function takes (``"context"``).
        meaning: what it is, with its unit, for messages (``"tokens in the KV
            cache"``).
        kind: ``"int"`` (decimal, ``0x`` hex or an integral ``1e9``), ``"float"`` (finite),
            ``"flag"`` (``0``/``1``, ``true``/``false``, ``yes``/``no``; a bool) or
            ``"choice"`` (one of :attr:`choices`, a str).
        lo: smallest accepted value (int and float: required).
        hi: largest accepted value (int and float: required).
        unit: the unit of the bounds in messages (``"tokens"``; ``""``: none).
        aliases: short names also accepted (``("T",)``).
        choices: the accepted values of a ``"choice"``.
    """

    name: str
    meaning: str
    kind: ParamKind = "int"
    lo: float | None = None
    hi: float | None = None
    unit: str = ""
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind in ("int", "float") and (self.lo is None or self.hi is None):
            raise ValueError(f"Param {self.name!r}: a number needs both bounds (lo and hi)")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"Param {self.name!r}: a choice needs its choices")
        if self.kind not in ("int", "float", "flag", "choice"):
            raise ValueError(f"Param {self.name!r}: unknown kind {self.kind!r}")

    @property
    def label(self) -> str:
        """``"context (T)"``: the name and its aliases."""
        return f"{self.name} ({', '.join(self.aliases)})" if self.aliases else self.name

    @property
    def accepts(self) -> str:
        """What a valid value is, in words (``"an integer in 1..16,777,216 tokens"``)."""
        if self.kind == "flag":
            return "0 or 1"
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        what = "an integer" if self.kind == "int" else "a number"
        unit = f" {self.unit}" if self.unit else ""
        return f"{what} in {_num(self.lo)}..{_num(self.hi)}{unit}"

    def parse(self, text: str) -> Any:
        """The value of ``text``.

        Raises:
            ValueError: not a value of this kind, or outside the bounds; the message is a
                phrase that follows the value (``"is above the limit of 1,024 heads"``).
        """
        t = text.strip()
        if self.kind == "flag":
            if t.lower() not in _FLAGS:
                raise ValueError(f"is not a flag: expected {self.accepts}")
            return _FLAGS[t.lower()]
        if self.kind == "choice":
            if t not in self.choices:
                close = difflib.get_close_matches(t, self.choices, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"is not {self.accepts}{hint}")
            return t
        value = _parse_int(t) if self.kind == "int" else _parse_float(t)
        if value is None:
            kind = "an integer" if self.kind == "int" else "a finite number"
            raise ValueError(f"is not {kind}: expected {self.accepts}")
        lo = -math.inf if self.lo is None else self.lo  # both set: checked on construction
        hi = math.inf if self.hi is None else self.hi
        unit = f" {self.unit}" if self.unit else ""
        if value > hi:
            raise ValueError(f"is above the limit of {_num(hi)}{unit}{_pow2(hi)}")
        if value < lo:
            raise ValueError(f"is below the minimum of {_num(lo)}{unit}")
        return value


def _parse_int(text: str) -> int | None:
    t = text.replace("_", "")
    try:
        return int(t, 0)  # decimal, 0x.., 0o.., 0b..
    except ValueError:
        pass
    try:
        f = float(t)  # "1e9", "0100"
    except ValueError:
        return None
    if not math.isfinite(f) or f != math.floor(f):
        return None
    return int(f)


def _parse_float(text: str) -> float | None:
    try:
        f = float(text.replace("_", ""))
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:g}"
    return f"{int(x):,}"


def _pow2(x: float) -> str:
    n = int(x)
    if n == x and n >= 1024 and n & (n - 1) == 0:
        return f" (2^{n.bit_length() - 1})"
    return ""


@dataclass(frozen=True)
class Size:
    """A count that decides the memory a build takes, and its limit.

    Attributes:
        what: what it counts, with its formula, for the message (``"K/V tiles (batch x
            kv_heads x ceil(context / block_n))"``).
        count: ``count(values) -> int`` of every parameter's value (the defaults filled in).
        limit: the largest count built.
    """

    what: str
    count: Callable[[Mapping[str, Any]], int]
    limit: int

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"Size {self.what!r}: the limit must be >= 1")


@dataclass(frozen=True)
class StringWorkload:
    """A workload string's declaration: its name, build function and parameters.

    Attributes:
        name: the name before the ``:`` (``"flashdecode"``).
        build: ``build(**values)`` -> the workload; the parameters without a default in its
            signature are the required keys, the others keep their defaults when not given.
        params: every key it takes, in the order messages list them.
        summary: one line: what it builds.
        sizes: the counts that decide the memory the build takes (records, tiles, elements),
            each checked against its limit before anything is built.
    """

    name: str
    build: Callable[..., Any]
    params: tuple[Param, ...]
    summary: str = ""
    sizes: tuple[Size, ...] = ()

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        keys = names + [a for p in self.params for a in p.aliases]
        if len(set(keys)) != len(keys):
            raise ValueError(f"workload {self.name!r}: a parameter name or alias is repeated")
        sig = _signature(self.build)
        if sig is not None and not _takes_kwargs(sig):
            unknown = [n for n in names if n not in sig.parameters]
            if unknown:
                raise ValueError(
                    f"workload {self.name!r}: its build function takes no {', '.join(unknown)}"
                )
        if sig is not None:
            undeclared = [
                n
                for n, sp in sig.parameters.items()
                if sp.default is inspect.Parameter.empty
                and sp.kind not in (sp.VAR_POSITIONAL, sp.VAR_KEYWORD)
                and n not in names
            ]
            if undeclared:
                raise ValueError(
                    f"workload {self.name!r}: required parameters {', '.join(undeclared)} of its "
                    "build function are not declared"
                )

    def param(self, key: str) -> Param | None:
        """The parameter a key (name or alias) names, or None."""
        for p in self.params:
            if key == p.name or key in p.aliases:
                return p
        return None

    def defaults(self) -> dict[str, Any]:
        """The build function's keyword defaults, declared parameters or not (a size may
        depend on a default the string cannot change)."""
        sig = _signature(self.build)
        if sig is None:
            return {}
        return {
            n: sp.default
            for n, sp in sig.parameters.items()
            if sp.default is not inspect.Parameter.empty
        }

    def required(self) -> tuple[str, ...]:
        """The declared parameters the build function has no default for."""
        sig = _signature(self.build)
        if sig is None:
            return ()
        return tuple(
            p.name
            for p in self.params
            if p.name in sig.parameters
            and sig.parameters[p.name].default is inspect.Parameter.empty
        )


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _takes_kwargs(sig: inspect.Signature) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def format_params(w: StringWorkload) -> str:
    """The keys of a workload string with their meaning and range, on one line.

    ``"context (T): tokens in the KV cache, an integer in 1..16,777,216 tokens [required];
    batch (B): ..."``.
    """
    required = set(w.required())
    parts = []
    for p in w.params:
        mark = " [required]" if p.name in required else ""
        parts.append(f"{p.label}: {p.meaning}, {p.accepts}{mark}")
    return "; ".join(parts)


def parse_workload_string(
    text: str,
    workloads: Mapping[str, StringWorkload],
    *,
    otherwise: str = "",
) -> tuple[StringWorkload, dict[str, Any]]:
    """Check a workload string against the declarations and return its values.

    Args:
        text: ``"<name>:<key>=<value>,..."`` (``"flashdecode:T=4096,B=8"``); empty entries
            (a trailing comma) are ignored.
        workloads: name -> declaration.
        otherwise: what else the caller accepts, for the unknown-name message (``"a trace
            file (.npz)"``).

    Returns:
        ``(declaration, values)``: the values given, by parameter name (defaults not filled
        in).

    Raises:
        ConfigError: every problem of the string (module docstring), one per line.
    """
    where = f"workload {text!r}"
    name, _, rest = text.partition(":")
    name = name.strip()
    w = workloads.get(name)
    if w is None:
        valid = ", ".join(sorted(workloads))
        close = difflib.get_close_matches(name, list(workloads), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        alt = f", or {otherwise}" if otherwise else ""
        raise ConfigError(
            [
                Problem(
                    where, "", name, f"unknown workload {name!r}{hint}; valid: {valid}{alt}", valid
                )
            ]
        )
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    given: dict[str, list[str]] = {}
    keys = [k for p in w.params for k in (p.name, *p.aliases)]
    for item in (part.strip() for part in rest.split(",")):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            problems.append(
                Problem(
                    where,
                    "",
                    item,
                    f"expected key=value, got {item!r}; {name} takes: {format_params(w)}",
                    ", ".join(keys),
                )
            )
            continue
        p = w.param(key)
        if p is None:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                Problem(
                    where,
                    "",
                    raw,
                    f"unknown key {key!r} of {name}{hint}; valid keys: {format_params(w)}",
                    ", ".join(keys),
                )
            )
            continue
        given.setdefault(p.name, []).append(item)
        if len(given[p.name]) > 1:
            continue
        try:
            values[p.name] = p.parse(raw)
        except ValueError as e:
            problems.append(
                Problem(where, "", raw, f"{item} {e} for {p.name} ({p.meaning})", p.accepts)
            )
    for pname, items in given.items():
        if len(items) > 1:
            problems.append(
                Problem(
                    where,
                    "",
                    items,
                    f"{pname} given {len(items)} times ({', '.join(items)}); give each key once",
                )
            )
    # A malformed or unknown entry may be the missing key misspelled: that problem is enough.
    missing = [n for n in w.required() if n not in given]
    if missing and not problems:
        labels = ", ".join(p.label for p in w.params if p.name in missing)
        problems.append(
            Problem(
                where,
                "",
                None,
                f"missing {labels}: {name} needs {'it' if len(missing) == 1 else 'them'}; "
                f"{name} takes: {format_params(w)}",
                ", ".join(keys),
            )
        )
    if not problems:
        full = {**w.defaults(), **values}
        for size in w.sizes:
            n = size.count(full)
            if n > size.limit:
                problems.append(
                    Problem(
                        where,
                        "",
                        None,
                        f"{name} would build {n:,} {size.what}, above the limit of "
                        f"{size.limit:,}{_pow2(size.limit)}; ask for smaller sizes",
                    )
                )
    if problems:
        raise ConfigError(problems)
    return w, values


def build_workload_string(
    text: str, workloads: Mapping[str, StringWorkload], *, otherwise: str = ""
) -> Any:
    """Parse a workload string (:func:`parse_workload_string`) and build its workload.

    Args:
        text: the workload string.
        workloads: name -> declaration.
        otherwise: what else the caller accepts, for the unknown-name message.

    Returns:
        What the declaration's build function returns.

    Raises:
        ConfigError: a problem of the string, or a ``ValueError`` or ``MemoryError`` of the
            build (values the declaration cannot check alone, or a build too large for this
            machine).
    """
    w, values = parse_workload_string(text, workloads, otherwise=otherwise)
    where = f"workload {text!r}"
    try:
        return w.build(**values)
    except ValueError as e:
        raise ConfigError([Problem(where, "", None, " ".join(str(e).split()))]) from None
    except MemoryError:
        raise ConfigError(
            [
                Problem(
                    where,
                    "",
                    None,
                    "does not fit in this machine's memory; ask for smaller "
                    f"sizes ({format_params(w)})",
                )
            ]
        ) from None
