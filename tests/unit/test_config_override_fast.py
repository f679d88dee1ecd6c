"""``override`` and ``config_digest`` of validated configs take shortcuts (re-checking only the
changed paths, remembering digests); their results must equal the plain definition exactly.

The oracle here is the definition itself, written out independently: dump the base, set the
changed keys in the plain data, load it with :func:`load_config_dict`; the digest is the SHA-256
of ``json.dumps`` of :func:`dump_config`. Random changes cover every scalar key of every shipped
HBQ architecture with valid values, out-of-range values, wrong types, unit strings and values
that break cross-field rules; the result (or every problem, in order) must be the same.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coaccel.sim.hbq_asic import load_arch
from coaccel.spine.config import (
    ConfigError,
    config_digest,
    dump_config,
    load_config_dict,
    override,
)

SHIPPED = Path(__file__).resolve().parents[2] / "arch_configs" / "hbq_asic"
ARCHS = sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def _plain_digest(obj: Any) -> str:
    text = json.dumps(dump_config(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _reference_override(obj: Any, changes: dict[str, Any]) -> Any:
    """The definition: set the keys in the dumped data and load it again."""
    data = dump_config(obj)
    source = f"<override of {type(obj).__name__}>"
    for dotted, value in changes.items():
        parts = dotted.split(".")
        cur = data
        for part in parts[:-1]:
            assert isinstance(cur.get(part), dict), "the random changes set existing leaves"
            cur = cur[part]
        cur[parts[-1]] = value
    return load_config_dict(data, type(obj), source=source)


def _typed(v: Any) -> Any:
    """The dump with every leaf's type kept (so 2 and 2.0 differ)."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_typed(x) for x in v]
    return (type(v).__name__, v)


def _leaves(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(v):
            out += _leaves(v, key + ".")
        elif isinstance(v, (bool, int, float, str)) or v is None:
            out.append((key, v))
    return out


def _random_value(rng: np.random.Generator, key: str, v: Any) -> Any:
    roll = rng.random()
    if roll < 0.08:
        return "not a number" if not isinstance(v, str) else 12
    if roll < 0.12:
        return None
    if isinstance(v, bool):
        return not v if rng.random() < 0.8 else 1
    if isinstance(v, int):
        if key.endswith("_mhz") and rng.random() < 0.3:
            return f"{int(rng.integers(1, 5)) / 10} GHz"
        if rng.random() < 0.5:
            return int(v + rng.integers(-3, 4))
        return int(v * float(rng.choice([0.25, 0.5, 2.0, 4.0])))
    if isinstance(v, float):
        if key.endswith("_mhz") and rng.random() < 0.3:
            return f"{int(rng.integers(1, 5)) / 10} GHz"
        return float(v * rng.choice([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0]))
    if isinstance(v, str):
        return v if rng.random() < 0.3 else v + "x"
    return v


@pytest.mark.parametrize("name", ARCHS)
def test_override_equals_its_definition_on_random_changes(name: str) -> None:
    base = load_arch(name)
    leaves = _leaves(base)
    rng = np.random.default_rng(sum(map(ord, name)))
    outcomes = {"ok": 0, "error": 0}
    for _ in range(120):
        n = int(rng.integers(1, 4))
        picks = rng.choice(len(leaves), size=n, replace=False)
        changes = {leaves[i][0]: _random_value(rng, *leaves[i]) for i in picks}
        try:
            want = _reference_override(base, changes)
        except ConfigError as e:
            with pytest.raises(ConfigError) as got:
                override(base, changes)
            assert [str(p) for p in got.value.problems] == [str(p) for p in e.problems], changes
            outcomes["error"] += 1
            continue
        got_cfg = override(base, changes)
        assert got_cfg == want, changes
        assert _typed(dump_config(got_cfg)) == _typed(dump_config(want)), changes
        assert config_digest(got_cfg) == _plain_digest(want), changes
        # a variant of a variant
        again = override(got_cfg, {"name": "variant"})
        assert config_digest(again) == _plain_digest(_reference_override(want, {"name": "variant"}))
        outcomes["ok"] += 1
    assert outcomes["ok"] >= 20 and outcomes["error"] >= 20, outcomes


def test_override_of_a_config_built_in_code_is_checked_in_full() -> None:
    # A config built by hand (not by the loader) may hold values the loader would convert or
    # reject anywhere; override then validates all of it, as the definition says.
    base = load_arch("hbq_e_28nm")
    hand = dataclasses.replace(base, freq_mhz=250)  # an int where the loader gives a float
    new = override(hand, {"name": "x"})
    assert isinstance(new.freq_mhz, float)
    assert config_digest(new) == _plain_digest(_reference_override(hand, {"name": "x"}))
    bad = dataclasses.replace(base, freq_mhz=-5.0)
    with pytest.raises(ConfigError, match="freq_mhz: -5.0 is out of range"):
        override(bad, {"name": "x"})


def test_digest_of_a_validated_config_is_remembered_and_correct() -> None:
    base = load_arch("hbq_a_28nm")
    assert config_digest(base) == _plain_digest(base)
    assert config_digest(base) == _plain_digest(base)  # the remembered value
    for k in range(5):
        v = override(base, {"freq_mhz": 300 + k, "pe_array.n_pes": 16})
        assert config_digest(v) == _plain_digest(v)
    hand = dataclasses.replace(base, name="by hand")  # not validated: computed each time
    assert config_digest(hand) == _plain_digest(hand)
