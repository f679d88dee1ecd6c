"""Fuzzing the config loader: whatever the input, it returns a config or raises ConfigError.

(a) random text (often not YAML at all) and random YAML documents of nested dicts, lists and
scalars; (b) mutations of the shipped DRAM presets (deleted, renamed, retyped keys, random
values, unit strings). Any exception other than ConfigError is a loader bug.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coaccel import arch_configs
from coaccel.spine.config import (
    ConfigError,
    DramConfig,
    Problem,
    load_config,
    load_config_dict,
    param,
)

PRESETS = ["lpddr4_28nm_asic", "ddr4_kv260", "hbm3e_h200", "hbm2e_a100_80g", "gddr6_rtx_a6000"]
PRESET_DATA = {n: yaml.safe_load(arch_configs.path(f"dram/{n}.yaml").read_text()) for n in PRESETS}
FIELDS = [f.name for f in dataclasses.fields(DramConfig)]


@dataclass(frozen=True)
class Sub:
    macs_per_pe: int = param(ge=1)
    freq_mhz: float = param(default=500.0, gt=0)


@dataclass(frozen=True)
class Outer:
    VERSION: ClassVar[int] = 1
    sub: Sub
    dram: DramConfig | None = None
    sizes: tuple[int, ...] = ()
    names: tuple[str, str] = ("a", "b")

    def validate(self):
        return ["too many"] if len(self.sizes) > 3 else []


# No example database: tests write only under tmp_path. The same file in tmp_path is rewritten
# by each example, which is why the function-scoped fixture is fine here.
FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "1 GHz",
            "64 KiB",
            "19.2 GB/s",
            "3.2e-11 J/B",
            "4 pJ/bit",
            "1e3",
            "5 furlongs",
            "-1 ns",
            "1e400 GB/s",
            "ddr4",
            "hbm3e",
            "dram/ddr4_kv260.yaml",
            "nope.yaml",
            "\x00",
            "",
        ]
    ),
)
keys = st.one_of(
    st.sampled_from([*FIELDS, "version", "sub", "macs_per_pe", "sizes"]), st.text(max_size=8)
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=20,
)


def check(load) -> None:
    """The loader's whole contract: a config of the right type, or a ConfigError."""
    try:
        load()
    except ConfigError as e:
        assert e.problems and all(isinstance(p, Problem) for p in e.problems)
        text = str(e)
        assert text.count("\n") == len(e.problems) - 1  # one line per problem
    except Exception as e:  # noqa: BLE001 — the point of the test
        raise AssertionError(f"loader raised {type(e).__name__}: {e}") from e


@FUZZ
@given(text=st.text(max_size=200))
def test_random_text(tmp_path, text):
    p = tmp_path / "x.yaml"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    check(lambda: load_config(p, DramConfig))
    check(lambda: load_config(p, Outer))


@FUZZ
@given(raw=st.binary(max_size=120))
def test_random_bytes(tmp_path, raw):
    p = tmp_path / "x.yaml"
    p.write_bytes(raw)
    check(lambda: load_config(p, DramConfig))


@FUZZ
@given(doc=documents, with_version=st.booleans())
def test_random_yaml_documents(tmp_path, doc, with_version):
    if with_version and isinstance(doc, dict):
        doc = {"version": 1, **doc}
    p = tmp_path / "x.yaml"
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    for schema in (DramConfig, Outer):
        check(lambda schema=schema: load_config(p, schema))
        if isinstance(doc, dict):
            check(lambda schema=schema: load_config_dict(doc, schema))


mutation = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(FIELDS + ["version"])),
    st.tuples(st.just("rename"), st.sampled_from(FIELDS + ["version"]), keys),
    st.tuples(st.just("set"), st.sampled_from(FIELDS + ["version"]), documents),
    st.tuples(st.just("add"), keys, documents),
)


@FUZZ
@given(
    name=st.sampled_from(PRESETS),
    mutations=st.lists(mutation, min_size=1, max_size=4),
    via_file=st.booleans(),
)
def test_mutated_presets(tmp_path, name, mutations, via_file):
    data = dict(PRESET_DATA[name])
    for m in mutations:
        if m[0] == "delete":
            data.pop(m[1], None)
        elif m[0] == "rename":
            if m[1] in data:
                data[m[2]] = data.pop(m[1])
        else:
            data[m[1]] = m[2]
    if via_file:
        p = tmp_path / "d.yaml"
        try:
            p.write_text(yaml.safe_dump(data, allow_unicode=True), errors="surrogatepass")
        except yaml.YAMLError:
            return
        check(lambda: load_config(p, DramConfig))
    else:
        check(lambda: load_config_dict(data, DramConfig))


def test_unmutated_presets_load():
    # the fuzz above would pass vacuously if every preset were broken
    for name in PRESETS:
        assert isinstance(load_config_dict(PRESET_DATA[name], DramConfig), DramConfig)
