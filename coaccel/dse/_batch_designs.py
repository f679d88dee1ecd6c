"""The designs of a batch: variants of a base architecture built from shared, checked sections.

Internal to :mod:`coaccel.dse.batch`. :class:`_Designs` builds ``override(base, params)`` for
many points without rebuilding what they share: each distinct value of a root key is converted
once, each distinct change of a section (``buffers``, ``pe_array``...) is built and checked
once by :func:`coaccel.config.override` on that section, and a design is the base with those
sections replaced, checked by the architecture's own ``validate()`` (what ``override`` runs on
the root). Its digest is the SHA-256 of the canonical JSON :func:`coaccel.config.config_digest`
hashes (``dump_config``, keys sorted, separators ``","`` and ``":"``, ASCII), joined from the
kept text of each field; the first design of each base is checked against ``config_digest``
of a real ``override`` (a disagreement sends every design to the per-point path).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
from typing import Any

__all__: list[str] = []

_DUMP = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
_MAX_CACHED = 4096  # sections and values kept per base architecture and process
_MISSING = object()


def _text(v: Any) -> str:
    """Canonical JSON of a config value (``config_digest``'s text of a field)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        from ..spine.config import dump_config

        d = dump_config(v)
        if "version" not in {f.name for f in dataclasses.fields(v)}:
            d.pop("version", None)  # a section's text in its parent carries no version
        return _DUMP.encode(d)
    return _DUMP.encode(v)


def _value_key(v: Any) -> Any:
    """A hashable key of a parameter value that tells 1, 1.0 and True apart."""
    if type(v) in (int, float, str, bool) and not (type(v) is float and v == 0.0):
        return (type(v), v)  # (-0.0 == 0.0: zeros take the text below, sign included)
    return f"{type(v).__name__}:{json.dumps(v, sort_keys=True, default=repr)}"


class _Designs:
    """The designs of one base architecture, built from shared, checked sections.

    Args:
        base: the base config (loaded and validated).
    """

    def __init__(self, base: Any) -> None:
        from ..spine.config import dump_config

        self.base = base
        dumped = dump_config(base)
        self.fields = {f.name for f in dataclasses.fields(base)}
        # canonical JSON: keys sorted ("version" among them), each as '"key":'
        self.order = [(k, _DUMP.encode(k) + ":") for k in sorted(dumped)]
        self.base_texts = {k: _DUMP.encode(v) for k, v in dumped.items()}
        self.values: dict[tuple[str, str], Any] = {}  # (root key, value) -> converted value
        self.sections: dict[tuple[Any, ...], Any] = {}  # (section, keys, values) -> section
        self.texts: dict[int, tuple[Any, str]] = {}  # id(section) -> (section, its text)
        self.plans: dict[tuple[str, ...], Any] = {}  # parameter keys -> how designs are built
        self.checks: dict[tuple[int, ...], Any] = {}  # ids of VALIDATE_READS -> (them, problems)
        # the base's class builds no fields of its own: a design is a copy with fields set
        self.copyable = not hasattr(type(base), "__post_init__") and not hasattr(
            type(base), "__slots__"
        )
        self.leaf_ok: dict[str, bool] = {}  # root key -> its numbers convert as float()/int()
        self.checked = False
        self.broken = False  # the shortcut disagreed with override(): every design goes alone

    def _cached(self, table: dict[Any, Any], key: Any, make: Any) -> Any:
        """``make()`` once per key (its exception too), kept in ``table``."""
        got = table.get(key, _MISSING)
        if got is _MISSING:
            try:
                got = make()
            except Exception as e:  # noqa: BLE001 - the point is evaluated alone
                got = e
            if len(table) >= _MAX_CACHED:
                table.clear()
            table[key] = got
        if isinstance(got, Exception):
            raise got
        return got

    def _plan(self, keys: tuple[str, ...]) -> Any:
        """How a design with these keys is built: root values ``[(position, key)]`` and
        sections ``[(name, positions, their keys in the section)]``; None when the shortcut
        does not apply (an unknown key, a section both replaced and changed, a path through
        something that is not a section: the per-point path decides)."""
        if keys not in self.plans:
            leaves: list[tuple[int, str]] = []
            sections: dict[str, tuple[list[int], list[str]]] = {}
            for i, key in enumerate(keys):
                head, _, rest = key.partition(".")
                if rest:
                    sections.setdefault(head, ([], []))
                    sections[head][0].append(i)
                    sections[head][1].append(rest)
                else:
                    leaves.append((i, head))
            heads = [h for _, h in leaves] + list(sections)
            ok = len(set(heads)) == len(heads) and all(h in self.fields for h in heads)
            ok = ok and all(
                dataclasses.is_dataclass(getattr(self.base, h))
                and not isinstance(getattr(self.base, h), type)
                for h in sections
            )
            plan = (leaves, [(h, i, tuple(r)) for h, (i, r) in sections.items()]) if ok else None
            self.plans[keys] = plan
        return self.plans[keys]

    def _parts(self, params: tuple[tuple[str, Any], ...]) -> dict[str, Any] | None:
        """Root field -> its new value for a design's changes, or None (not a shortcut)."""
        from ..spine.config import override

        plan = self._plan(tuple(k for k, _ in params))
        if plan is None:
            return None
        leaves, sections = plan
        vals = [v for _, v in params]
        out: dict[str, Any] = {}
        for i, head in leaves:
            v = vals[i]
            lk = (head, _value_key(v))
            got = self.values.get(lk, _MISSING)
            if got is _MISSING or isinstance(got, Exception):  # made (or raised) by _cached
                got = self._cached(self.values, lk, lambda k=head, v=v: self._leaf(k, v))
            out[head] = got
        for head, idx, rests in sections:
            sk = (head, rests, tuple([_value_key(vals[i]) for i in idx]))
            got = self.sections.get(sk, _MISSING)
            if got is _MISSING or isinstance(got, Exception):
                make = None
                if got is _MISSING:
                    node = getattr(self.base, head)
                    changes = {r: vals[i] for r, i in zip(rests, idx, strict=True)}
                    make = lambda n=node, c=changes: override(n, c)  # noqa: E731
                got = self._cached(self.sections, sk, make)
            out[head] = got
        return out

    def _leaf(self, key: str, value: Any) -> Any:
        """A root-level value as ``override`` converts it: a number for a number field is
        checked by :func:`~coaccel.config.check_value` and converted as the loader does
        (``float`` / ``int``), which the first value of each key confirms against a whole
        ``override``; anything else is converted by ``override`` itself."""
        from ..spine.config import check_value, override

        cur = getattr(self.base, key)
        simple = type(cur) in (int, float) and type(value) in (int, float)
        if simple and self.leaf_ok.get(key, True):
            if check_value(self.base, key, value):
                raise ValueError(f"{key}: {value!r} fails its checks")
            conv = float(value) if type(cur) is float else value
            if type(conv) is type(cur) and key in self.leaf_ok:
                return conv
            full = getattr(override(self.base, {key: value}), key)
            self.leaf_ok[key] = type(full) is type(conv) and full == conv
            return full
        return getattr(override(self.base, {key: value}), key)

    def _validate(self, arch: Any) -> list[Any]:
        """``arch.validate()``, once per combination of the fields it reads where its class
        names them (``VALIDATE_READS``; a design's sections are shared objects, so they are
        told apart by identity, kept alive with the result)."""
        reads = getattr(type(arch), "VALIDATE_READS", None)
        if reads is None:
            return list(arch.validate())
        vals = (
            tuple(map(arch.__dict__.__getitem__, reads))
            if self.copyable
            else tuple([getattr(arch, f) for f in reads])
        )
        key = tuple(map(id, vals))
        hit = self.checks.get(key)
        if hit is None or not all(map(operator.is_, hit[0], vals)):
            if len(self.checks) >= _MAX_CACHED:
                self.checks.clear()
            hit = self.checks[key] = (vals, list(arch.validate()))
        return hit[1]

    def _section_text(self, v: Any) -> str:
        hit = self.texts.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        text = _text(v)
        if len(self.texts) >= _MAX_CACHED:
            self.texts.clear()
        self.texts[id(v)] = (v, text)
        return text

    def build(self, params: tuple[tuple[str, Any], ...]) -> tuple[Any, str] | None:
        """A design and its config digest, or None when the per-point path must build it.

        Args:
            params: the point's dotted key -> value pairs.

        Returns:
            ``(config, digest)`` equal to ``override(base, params)`` and its
            :func:`~coaccel.config.config_digest`; None for a design that fails a check (or
            that the shortcut does not build): the per-point path then decides.
        """
        if self.broken:
            return None
        try:
            parts = self._parts(params)
            if parts is None:
                return None
            if self.copyable:  # copy.copy without its dispatch: a new object, same fields
                arch = object.__new__(type(self.base))
                arch.__dict__.update(self.base.__dict__)
                arch.__dict__.update(parts)
            else:
                arch = dataclasses.replace(self.base, **parts)
            if self._validate(arch):
                return None
        except Exception:  # noqa: BLE001 - the per-point path gives the reason
            return None
        texts = dict(self.base_texts)
        for k, v in parts.items():
            texts[k] = self._section_text(v)
        body = ",".join([head + texts[k] for k, head in self.order])
        digest = hashlib.sha256(("{" + body + "}").encode("ascii")).hexdigest()
        if not self.checked:  # once per process and base: the shortcut equals override()
            from ..spine.config import config_digest, override

            self.checked = True
            try:
                same = config_digest(override(self.base, dict(params))) == digest
            except Exception:  # noqa: BLE001 - it built a design override() refuses
                same = False
            if not same:
                self.broken = True
                return None
        return arch, digest


_DESIGNS: dict[tuple[str, str], _Designs] = {}


def _designs(base_path: str, mode: str, base: Any) -> _Designs:
    d = _DESIGNS.get((base_path, mode))
    if d is None or d.base is not base:
        d = _DESIGNS[(base_path, mode)] = _Designs(base)
    return d
