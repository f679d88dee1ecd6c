"""The plain-data form of a config, its digest, and the configs known to be valid.

A config that came out of the loader (or out of :func:`~._override.override`) passed every
check and holds only immutable values (frozen dataclasses, tuples, :class:`~._schema.FrozenMap`,
scalars), so its digest can be kept and a variant of it needs checking only along the paths
that changed. Such configs are remembered by ``id`` with a weak reference, so a reused id never
matches a dead config.

Public: :func:`dump_config` (a config as plain YAML/JSON data), :func:`config_digest` (SHA-256
of its canonical JSON).

Internal:

* :func:`_mark_validated` (the loader and override mark what they return) and
  :func:`_valid_entry` (the remembered entry of a validated config: its weak reference and
  its digest once computed); :func:`_forget` drops an entry when its config dies.
* :func:`_canonical` and :func:`_canonical_fields`: the canonical JSON of a validated config,
  built from the kept texts of its unchanged sub-blocks (:func:`_forget_text`), equal to
  ``json.dumps`` of :func:`dump_config` byte for byte.
* :func:`_dump`: the recursive step of :func:`dump_config`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import weakref
from collections.abc import Mapping
from typing import Any

from ._schema import FrozenMap, _version_of

__all__ = ["config_digest", "dump_config"]


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


def _dump(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _dump(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, tuple):
        return [_dump(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _dump(x) for k, x in v.items()}
    return v


# ---------------------------------------------------------------------------------------------
# Configs known to be valid, and their digests

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
