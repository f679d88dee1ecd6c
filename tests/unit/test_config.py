"""coaccel.config: YAML -> frozen dataclasses, every problem at once, units, versions, digests."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

import numpy as np
import pytest
import yaml

from coaccel import arch_configs
from coaccel.spine.config import (
    ConfigError,
    DramConfig,
    FrozenMap,
    Problem,
    config_digest,
    dump_config,
    load_config,
    load_config_dict,
    override,
    param,
    parse_quantity,
)
from coaccel.spine.errors import CoaccelError
from coaccel.spine.units import unit_for_name

# ---------------------------------------------------------------------------------------------
# A small schema that exercises every supported type.


@dataclass(frozen=True)
class PeArray:
    macs_per_pe: int = param(ge=1)
    n_pes: int = param(ge=1, le=64)


@dataclass(frozen=True)
class Chip:
    VERSION: ClassVar[int] = 1

    pe_array: PeArray
    freq_mhz: float = param(gt=0)
    sram_kib: int = param(ge=0)
    mode: Literal["ws", "os"] = param(default="ws")
    name: str = param(default="chip")
    sizes: tuple[int, ...] = param(default=(), ge=0)
    pair: tuple[int, str] = param(default=(1, "a"))
    scale: Optional[float] = param(default=None)  # noqa: UP045 (typing.Optional on purpose)
    latency_ns: float | None = param(default=None, ge=0)
    table: Mapping[str, int] = param(default=FrozenMap())
    flag: bool = param(default=False)
    level: int = param(default=1, choices=(1, 2, 4))
    dram: DramConfig | None = param(default=None)

    def validate(self):
        out = []
        if self.pe_array.n_pes * self.pe_array.macs_per_pe > 8192:
            out.append("pe_array too large: n_pes * macs_per_pe must be <= 8192")
        if self.sram_kib == 13:
            out.append(Problem("", "sram_kib", 13, "13 KiB is unlucky"))
        return out


@dataclass(frozen=True)
class Node:
    VERSION: ClassVar[int] = 1
    child: Node | None = None


GOOD = {
    "version": 1,
    "pe_array": {"macs_per_pe": 128, "n_pes": 32},
    "freq_mhz": 500,
    "sram_kib": 64,
}


def write(tmp_path, text, name="chip.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def problems_of(excinfo) -> list[str]:
    return [str(p) for p in excinfo.value.problems]


def load_dict_problems(data, schema=Chip) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config_dict(data, schema, source="f.yaml")
    assert str(e.value) == "\n".join(problems_of(e))
    return problems_of(e)


def with_(**changes):
    d = json.loads(json.dumps(GOOD))
    d.update(changes)
    return d


# ---------------------------------------------------------------------------------------------
# Loading and conversion


def test_good_dict_loads_with_defaults_and_float_conversion():
    c = load_config_dict(GOOD, Chip)
    assert c == Chip(PeArray(128, 32), freq_mhz=500.0, sram_kib=64)
    assert type(c.freq_mhz) is float and type(c.sram_kib) is int
    assert c.sizes == () and c.table == {} and c.dram is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.freq_mhz = 1.0  # type: ignore[misc]


def test_load_from_file(tmp_path):
    p = write(tmp_path, yaml.safe_dump(GOOD))
    assert load_config(p, Chip) == load_config_dict(GOOD, Chip)


def test_containers_convert_to_immutable_types():
    c = load_config_dict(
        with_(sizes=[1, 2, 3], pair=[7, "x"], table={"a": 1, "b": 2}, scale=2), Chip
    )
    assert c.sizes == (1, 2, 3) and c.pair == (7, "x")
    assert isinstance(c.table, FrozenMap) and dict(c.table) == {"a": 1, "b": 2}
    assert c.scale == 2.0 and type(c.scale) is float
    hash(c)  # frozen all the way down


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("freq_mhz", "0.5 GHz", 500.0),
        ("freq_mhz", "500MHz", 500.0),
        ("freq_mhz", "250000 kHz", 250.0),
        ("sram_kib", "64 KiB", 64),
        ("sram_kib", "0.5 MiB", 512),
        ("sram_kib", "8192 bit", 1),
        ("latency_ns", "1 us", 1000.0),
        ("latency_ns", "250 ps", 0.25),
    ],
)
def test_unit_strings_convert_exactly(key, text, expected):
    c = load_config_dict(with_(**{key: text}), Chip)
    got = getattr(c, key)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        # 19.2 GB/s must stay exactly the float 19.2 (no 19.2e9 / 1e9 rounding).
        ("bw_gb_per_s", "19.2 GB/s", 19.2),
        ("bw_gb_per_s", "4.8 TB/s", 4800.0),
        ("bw_gb_per_s", "19200 MB/s", 19.2),
        ("bw_gb_per_s", "153.6 Gbit/s", 19.2),
        # [R-PM]'s 3.2e-11 J/byte is exactly 32 pJ/B; 4 pJ/bit is 32 pJ/B.
        ("energy_pj_per_byte", "3.2e-11 J/B", 32.0),
        ("energy_pj_per_byte", "4 pJ/bit", 32.0),
        ("energy_pj_per_byte", "3.9 pJ/bit", 31.2),
        ("latency_ns", "0.1 us", 100.0),
    ],
)
def test_dram_unit_strings(key, text, expected):
    base = yaml.safe_load(arch_configs.path("dram/ddr4_kv260.yaml").read_text())
    base[key] = text
    assert getattr(load_config_dict(base, DramConfig), key) == expected


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("freq_mhz", "MHz"),
        ("sram_kib", "KiB"),
        ("buf_mib", "MiB"),
        ("bw_gb_per_s", "GB/s"),
        ("bw_gib_per_s", "GiB/s"),
        ("energy_pj_per_byte", "pJ/B"),
        ("energy_pj_per_bit", "pJ/bit"),
        ("e_fj_per_mac", "fJ/MAC"),
        ("area_um2", "um2"),
        ("area_um2_per_mac", "um2/MAC"),
        ("power_mw", "mW"),
        ("latency_ns", "ns"),
        ("width_bits", "bit"),
        ("tokens_per_s", None),  # a rate of something that is not a unit: no unit, not "s"
        ("macs_per_pe", None),
        ("n_pes", None),
        ("latency_cycles", None),
        ("ns", None),
    ],
)
def test_unit_for_name(name, unit):
    assert unit_for_name(name) == unit


def test_param_unit_overrides_the_name():
    @dataclass(frozen=True)
    class S:
        VERSION: ClassVar[int] = 1
        clock: float = param(unit="MHz")
        plain_mhz: float = param(unit="")

    c = load_config_dict({"version": 1, "clock": "1 GHz", "plain_mhz": 3}, S)
    assert c.clock == 1000.0
    assert load_dict_problems({"version": 1, "clock": 1, "plain_mhz": "3 MHz"}, S) == [
        "f.yaml: plain_mhz: expected float, got str '3 MHz'"
    ]


def test_parse_quantity():
    assert parse_quantity("0.5 GHz", "MHz") == 500.0
    assert parse_quantity(250, "MHz") == 250.0
    with pytest.raises(ValueError):
        parse_quantity("3 W", "MHz")
    with pytest.raises(ValueError):
        parse_quantity(True, "MHz")
    for bad in (None, [1], b"1 MHz"):
        with pytest.raises(ValueError, match="expected a number or a quantity string"):
            parse_quantity(bad, "MHz")


def test_numpy_scalars_from_sweeps_are_numbers():
    c = load_config_dict(with_(sram_kib=np.int64(32), freq_mhz=np.float64(250.0)), Chip)
    assert c.sram_kib == 32 and type(c.sram_kib) is int and c.freq_mhz == 250.0


# ---------------------------------------------------------------------------------------------
# Exact error wording, one test per problem kind


def test_unknown_key_lists_valid_keys_and_suggests():
    d = with_(pe_array={"mac_per_pe": 128, "macs_per_pe": 128, "n_pes": 32})
    assert load_dict_problems(d) == [
        "f.yaml: pe_array.mac_per_pe: unknown key 'mac_per_pe'; valid keys: macs_per_pe, n_pes "
        "(did you mean 'macs_per_pe'?)"
    ]


def test_unknown_key_without_close_match_and_at_top_level():
    assert load_dict_problems(with_(zzz=1)) == [
        "f.yaml: zzz: unknown key 'zzz'; valid keys: version, pe_array, freq_mhz, sram_kib, "
        "mode, name, sizes, pair, scale, latency_ns, table, flag, level, dram"
    ]


def test_missing_required_keys():
    d = with_(pe_array={"macs_per_pe": 128})
    del d["freq_mhz"]
    assert load_dict_problems(d) == [
        "f.yaml: pe_array.n_pes: missing required key",
        "f.yaml: freq_mhz: missing required key",
    ]


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"sram_kib": "lots"},
            "sram_kib: expected int in KiB (or a string with a unit, e.g. '1 KiB'), got str 'lots'",
        ),
        (
            {"sram_kib": True},
            "sram_kib: expected int in KiB (or a string with a unit, e.g. '1 KiB'), got bool True",
        ),
        (
            {"sram_kib": 1.5},
            "sram_kib: expected int in KiB (or a string with a unit, e.g. '1 KiB'), got float 1.5",
        ),
        (
            {"freq_mhz": False},
            "freq_mhz: expected float in MHz (or a string with a unit, "
            "e.g. '1 MHz'), got bool False",
        ),
        (
            {"freq_mhz": None},
            "freq_mhz: expected float in MHz (or a string with a unit, e.g. '1 MHz'), got null",
        ),
        ({"name": 3}, "name: expected str, got int 3"),
        ({"name": 2.5}, "name: expected str, got float 2.5"),
        ({"flag": 1}, "flag: expected bool, got int 1"),
        ({"pe_array": [1, 2]}, "pe_array: expected a mapping (PeArray), got list [1, 2]"),
        ({"sizes": 3}, "sizes: expected a list of int, got int 3"),
        ({"sizes": [1, "x", 3]}, "sizes[1]: expected int, got str 'x'"),
        ({"pair": [1]}, "pair: expected a list of 2 (int, str), got a list of 1 items"),
        ({"table": {"a": "b"}}, "table.a: expected int, got str 'b'"),
        ({"table": [1]}, "table: expected a mapping of str to int, got list [1]"),
        ({"scale": "big"}, "scale: expected float, got str 'big'"),
    ],
)
def test_wrong_type_names_expected_type(changes, line):
    assert load_dict_problems(with_(**changes)) == ["f.yaml: " + line]


def test_out_of_range_names_the_bound():
    assert load_dict_problems(with_(freq_mhz=-3)) == [
        "f.yaml: freq_mhz: -3 is out of range: must be > 0"
    ]
    assert load_dict_problems(with_(pe_array={"macs_per_pe": 0, "n_pes": 65})) == [
        "f.yaml: pe_array.macs_per_pe: 0 is out of range: must be >= 1",
        "f.yaml: pe_array.n_pes: 65 is out of range: must be >= 1 and <= 64",
    ]
    assert load_dict_problems(with_(sizes=[1, -2])) == [
        "f.yaml: sizes[1]: -2 is out of range: must be >= 0"
    ]
    assert load_dict_problems(with_(freq_mhz="-0.5 GHz")) == [
        "f.yaml: freq_mhz: '-0.5 GHz' (= -500.0 MHz) is out of range: must be > 0"
    ]


def test_dram_out_of_range_example_from_the_brief():
    base = yaml.safe_load(arch_configs.path("dram/ddr4_kv260.yaml").read_text())
    base["bw_gb_per_s"] = -3
    base["efficiency"] = 1.5
    assert load_dict_problems(base, DramConfig) == [
        "f.yaml: bw_gb_per_s: -3 is out of range: must be > 0",
        "f.yaml: efficiency: 1.5 is out of range: must be > 0 and <= 1",
    ]


def test_not_in_choices_lists_them():
    assert load_dict_problems(with_(mode="wss")) == [
        "f.yaml: mode: 'wss' is not a valid choice; choices: ws, os (did you mean 'ws'?)"
    ]
    assert load_dict_problems(with_(level=3)) == [
        "f.yaml: level: 3 is not a valid choice; choices: 1, 2, 4"
    ]
    # Literal matches the type too: True is not the choice 1, "1" is not 1.
    assert load_dict_problems(with_(mode=1)) == [
        "f.yaml: mode: 1 is not a valid choice; choices: ws, os"
    ]


def test_bad_units_name_the_accepted_units():
    assert load_dict_problems(with_(freq_mhz="2 GB")) == [
        "f.yaml: freq_mhz: unit 'GB' in '2 GB' is a data size, but this key is a frequency in "
        "MHz; accepted units: Hz, kHz, MHz, GHz"
    ]
    assert load_dict_problems(with_(freq_mhz="2 GHZ")) == [
        "f.yaml: freq_mhz: unknown unit 'GHZ' in '2 GHZ'; accepted units: Hz, kHz, MHz, GHz"
    ]
    assert load_dict_problems(with_(latency_ns="1e3")) == [
        "f.yaml: latency_ns: '1e3' has no unit: write a plain number (in ns) or add a unit; "
        "accepted units: s, ms, us, ns, ps, µs"
    ]
    assert load_dict_problems(with_(sram_kib="1.5 KiB")) == [
        "f.yaml: sram_kib: '1.5 KiB' is not a whole number of KiB"
    ]


def test_bandwidth_unit_message_describes_ratio_units():
    base = yaml.safe_load(arch_configs.path("dram/ddr4_kv260.yaml").read_text())
    base["bw_gb_per_s"] = "19.2 GHz"
    (line,) = load_dict_problems(base, DramConfig)
    assert line == (
        "f.yaml: bw_gb_per_s: unit 'GHz' in '19.2 GHz' is a frequency, but this key is a "
        "bandwidth in GB/s; accepted units: X/Y with X one of B, kB, MB, GB, TB, KiB, MiB, GiB, "
        "TiB, bit, kbit, Mbit, Gbit, Kibit, Mibit and Y one of s, ms, us, ns, ps"
    )


def test_nan_and_float_overflow():
    assert load_dict_problems(with_(freq_mhz=float("nan"))) == [
        "f.yaml: freq_mhz: nan is not allowed (not a number)"
    ]
    (line,) = load_dict_problems(with_(freq_mhz=10**400))
    assert line.startswith("f.yaml: freq_mhz: ") and "too large for a float" in line


def test_version_missing_unsupported_wrong_type():
    d = dict(GOOD)
    del d["version"]
    assert load_dict_problems(d) == [
        "f.yaml: version: missing required key (the file must start with 'version: 1')"
    ]
    assert load_dict_problems(with_(version=2)) == [
        "f.yaml: version: unsupported version 2; this coaccel reads Chip version 1"
    ]
    assert load_dict_problems(with_(version="1")) == ["f.yaml: version: expected int, got str '1'"]


def test_document_not_a_mapping_or_empty(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "- 1\n- 2\n"), Chip)
    assert problems_of(e) == [
        f"{tmp_path / 'chip.yaml'}: expected a mapping with 'version: 1' and the keys of Chip, "
        "got list [1, 2]"
    ]
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "# nothing\n"), Chip)
    assert problems_of(e) == [
        f"{tmp_path / 'chip.yaml'}: the document is empty; expected a mapping with "
        "'version: 1' and the keys of Chip"
    ]


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    p = write(tmp_path, "version: 1\nfreq_mhz: 500\nsram_kib: [64\n")
    with pytest.raises(ConfigError) as e:
        load_config(p, Chip)
    (problem,) = e.value.problems
    assert problem.file == str(p) and problem.key == ""
    # PyYAML reports the end of the stream: line 4, column 1.
    assert str(problem).startswith(f"{p}: line 4, column 1: invalid YAML: ")


def test_duplicate_keys_are_problems(tmp_path):
    p = write(
        tmp_path,
        "version: 1\npe_array:\n  n_pes: 4\n  n_pes: 8\n  macs_per_pe: 2\n"
        "freq_mhz: 1\nsram_kib: 1\nfreq_mhz: 2\n",
    )
    with pytest.raises(ConfigError) as e:
        load_config(p, Chip)
    assert problems_of(e) == [
        f"{p}: pe_array.n_pes: duplicate key 'n_pes' (line 4; first at line 3)",
        f"{p}: freq_mhz: duplicate key 'freq_mhz' (line 8; first at line 6)",
    ]


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    p = write(
        tmp_path,
        "version: 1\ntable: {a: 1}\npe_array:\n  <<: {macs_per_pe: 2, n_pes: 4}\n  n_pes: 8\n"
        "freq_mhz: 1\nsram_kib: 1\n",
    )
    c = load_config(p, Chip)
    assert c.pe_array == PeArray(2, 8) and dict(c.table) == {"a": 1}


def test_unreadable_file():
    with pytest.raises(ConfigError) as e:
        load_config("/nonexistent/dir/x.yaml", Chip)
    assert problems_of(e) == ["/nonexistent/dir/x.yaml: cannot read: No such file or directory"]


# ---------------------------------------------------------------------------------------------
# All problems at once; cross-field rules


def test_every_problem_reported_at_once(tmp_path):
    p = write(
        tmp_path,
        "version: 3\n"
        "pe_array:\n  mac_per_pe: 2\n  n_pes: 100\n"
        "freq_mhz: 2 GB\n"
        "mode: xx\n"
        "sizes: [1, -1, a]\n"
        "bogus: 1\n",
    )
    with pytest.raises(ConfigError) as e:
        load_config(p, Chip)
    lines = str(e.value).splitlines()
    assert lines == problems_of(e)
    assert [(q.key, q.file) for q in e.value.problems] == [
        ("version", str(p)),
        ("pe_array.mac_per_pe", str(p)),
        ("pe_array.n_pes", str(p)),
        ("pe_array.macs_per_pe", str(p)),
        ("freq_mhz", str(p)),
        ("mode", str(p)),
        ("sizes[1]", str(p)),
        ("sizes[2]", str(p)),
        ("bogus", str(p)),
        ("sram_kib", str(p)),
    ]
    assert all(
        line.startswith(f"{p}: {q.key}: ") for line, q in zip(lines, e.value.problems, strict=True)
    )
    assert isinstance(e.value, CoaccelError)


def test_validate_runs_after_field_checks_with_keys_attached():
    big = with_(pe_array={"macs_per_pe": 1024, "n_pes": 16}, sram_kib=13)
    assert load_dict_problems(big) == [
        "f.yaml: pe_array too large: n_pes * macs_per_pe must be <= 8192",
        "f.yaml: sram_kib: 13 KiB is unlucky",
    ]
    # With a field problem present, the cross-field rules are not run (they could not be).
    big["freq_mhz"] = -1
    assert load_dict_problems(big) == ["f.yaml: freq_mhz: -1 is out of range: must be > 0"]


def test_nested_validate_gets_the_dotted_path():
    dram = yaml.safe_load(arch_configs.path("dram/ddr4_kv260.yaml").read_text())
    del dram["version"]
    dram["source"] = "  "
    dram["sources"] = {"bw_gb_per_sec": "x"}
    assert load_dict_problems(with_(dram=dram)) == [
        "f.yaml: dram.source: must say where the energy comes from",
        "f.yaml: dram.sources.bw_gb_per_sec: unknown figure 'bw_gb_per_sec'; figures: type, "
        "channels, bw_gb_per_s, efficiency, latency_ns, energy_pj_per_byte, uncertainty_pct, "
        "interleave_bytes, row_buffer_bytes, row_hit_penalty_ns, row_miss_penalty_ns "
        "(did you mean 'bw_gb_per_s'?)",
    ]


def test_config_error_pickles_with_its_problems():
    with pytest.raises(ConfigError) as e:
        load_config_dict(with_(freq_mhz=-1), Chip)
    again = pickle.loads(pickle.dumps(e.value))
    assert again.problems == e.value.problems and str(again) == str(e.value)


# ---------------------------------------------------------------------------------------------
# Includes


def test_include_relative_to_the_including_file(tmp_path):
    (tmp_path / "mem").mkdir()
    src = arch_configs.path("dram/ddr4_kv260.yaml").read_text()
    (tmp_path / "mem" / "d.yaml").write_text(src)
    p = write(tmp_path, yaml.safe_dump(with_(dram="mem/d.yaml")))
    c = load_config(p, Chip)
    assert c.dram == load_config(arch_configs.path("dram/ddr4_kv260.yaml"), DramConfig)
    # the dump inlines the included file; the digest depends on values, not on paths
    inline = with_(dram={k: v for k, v in dump_config(c.dram).items() if k != "version"})
    assert config_digest(c) == config_digest(load_config_dict(inline, Chip))


def test_include_falls_back_to_shipped_configs():
    c = load_config_dict(with_(dram="dram/hbm3e_h200.yaml"), Chip)
    assert c.dram is not None and c.dram.type == "hbm3e"


def test_include_problems_name_the_included_file(tmp_path):
    bad = tmp_path / "d.yaml"
    bad.write_text("version: 1\ntype: ddr9\n")
    p = write(tmp_path, yaml.safe_dump(with_(dram="d.yaml")))
    with pytest.raises(ConfigError) as e:
        load_config(p, Chip)
    assert [q.file for q in e.value.problems] == [str(bad)] * 8
    assert str(e.value.problems[0]) == (
        f"{bad}: type: 'ddr9' is not a valid choice; choices: ddr4, lpddr4, lpddr5, lpddr5x, "
        "gddr6, gddr6x, hbm2, hbm2e, hbm3, hbm3e (did you mean 'ddr4'?)"
    )


def test_include_missing_file_and_cycle(tmp_path):
    (line,) = load_dict_problems(with_(dram="nope/none.yaml"))
    assert line.startswith("f.yaml: dram: cannot include 'nope/none.yaml' as DramConfig: ")

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("version: 1\nchild: b.yaml\n")
    b.write_text("version: 1\nchild: a.yaml\n")
    with pytest.raises(ConfigError) as e:
        load_config(a, Node)
    (problem,) = e.value.problems
    assert problem.file == str(b) and problem.key == "child"
    assert problem.message.startswith("include cycle: ")


# ---------------------------------------------------------------------------------------------
# Round trips, digests, overrides


def full_chip() -> Chip:
    return load_config_dict(
        with_(
            sizes=[1, 2],
            pair=[3, "z"],
            scale=0.1,
            latency_ns="0.25 us",
            table={"x": 5},
            flag=True,
            level=4,
            dram="dram/lpddr4_28nm_asic.yaml",
        ),
        Chip,
    )


def test_round_trip_dump_load(tmp_path):
    c = full_chip()
    d = dump_config(c)
    assert d["version"] == 1 and d["sizes"] == [1, 2] and d["table"] == {"x": 5}
    assert load_config_dict(d, Chip) == c
    p = write(tmp_path, yaml.safe_dump(d))
    assert load_config(p, Chip) == c
    assert config_digest(load_config(p, Chip)) == config_digest(c)


@pytest.mark.parametrize(
    "name",
    ["lpddr4_28nm_asic", "ddr4_kv260", "hbm3e_h200", "hbm2e_a100_80g", "gddr6_rtx_a6000"],
)
def test_presets_round_trip(tmp_path, name):
    c = load_config(arch_configs.path(f"dram/{name}.yaml"), DramConfig)
    p = write(tmp_path, yaml.safe_dump(dump_config(c), allow_unicode=True), "d.yaml")
    assert load_config(p, DramConfig) == c


def test_digest_is_sha256_of_canonical_json():
    c = load_config_dict(GOOD, Chip)
    # Canonical JSON written by hand: keys sorted, no spaces, defaults included.
    text = (
        '{"dram":null,"flag":false,"freq_mhz":500.0,"latency_ns":null,"level":1,'
        '"mode":"ws","name":"chip","pair":[1,"a"],"pe_array":{"macs_per_pe":128,"n_pes":32},'
        '"scale":null,"sizes":[],"sram_kib":64,"table":{},"version":1}'
    )
    assert config_digest(c) == hashlib.sha256(text.encode()).hexdigest()


def test_digest_ignores_spelling_but_not_values(tmp_path):
    a = load_config(
        write(
            tmp_path,
            "version: 1\nfreq_mhz: 0.5 GHz\nsram_kib: 64 KiB\n"
            "pe_array: {n_pes: 32, macs_per_pe: 128}\n",
        ),
        Chip,
    )
    b = load_config_dict(GOOD, Chip)
    assert config_digest(a) == config_digest(b)
    assert config_digest(override(b, {"sram_kib": 65})) != config_digest(b)


def test_override_validates_like_the_loader():
    base = load_config_dict(GOOD, Chip)
    new = override(base, {"pe_array.n_pes": 16, "freq_mhz": "1 GHz", "table.k": 3})
    assert new.pe_array.n_pes == 16 and new.freq_mhz == 1000.0 and dict(new.table) == {"k": 3}
    assert base == load_config_dict(GOOD, Chip)  # unchanged
    with pytest.raises(ConfigError) as e:
        override(base, {"pe_array.n_pe": 16, "freq_mhz.x": 1})
    assert problems_of(e) == [
        "<override of Chip>: freq_mhz.x: cannot set 'freq_mhz.x': 'freq_mhz' holds float 500.0, "
        "not a section"
    ]
    with pytest.raises(ConfigError) as e:
        override(base, {"pe_array.n_pe": 16, "freq_mhz": -1})
    assert problems_of(e) == [
        "<override of Chip>: pe_array.n_pe: unknown key 'n_pe'; valid keys: macs_per_pe, n_pes "
        "(did you mean 'n_pes'?)",
        "<override of Chip>: freq_mhz: -1 is out of range: must be > 0",
    ]


def test_override_into_an_unset_optional_section():
    base = load_config_dict(GOOD, Chip)
    with pytest.raises(ConfigError) as e:
        override(base, {"dram.channels": 2})
    assert "<override of Chip>: dram.type: missing required key" in problems_of(e)
    new = override(base, {"dram": "dram/ddr4_kv260.yaml"})
    assert override(new, {"dram.channels": 2}).dram.channels == 2


def test_override_of_a_dram_preset():
    d = load_config(arch_configs.path("dram/ddr4_kv260.yaml"), DramConfig)
    assert override(d, {"bw_gb_per_s": "25.6 GB/s"}).bw_gb_per_s == 25.6
    assert dataclasses.replace(d, channels=2).channels == 2


# ---------------------------------------------------------------------------------------------
# Schemas and the DRAM presets


def test_schema_errors_are_programming_errors():
    @dataclass(frozen=True)
    class BadList:
        VERSION: ClassVar[int] = 1
        xs: list[int]

    @dataclass
    class NotFrozen:
        VERSION: ClassVar[int] = 1
        x: int

    @dataclass(frozen=True)
    class NoVersion:
        x: int

    with pytest.raises(TypeError, match="unsupported type"):
        load_config_dict({"version": 1, "xs": [1]}, BadList)
    with pytest.raises(TypeError, match="frozen"):
        load_config_dict({"version": 1, "x": 1}, NotFrozen)
    with pytest.raises(TypeError, match="VERSION"):
        load_config_dict({"x": 1}, NoVersion)
    with pytest.raises(ValueError, match="unknown unit"):
        param(unit="furlongs")


def test_dram_presets_match_their_sources():
    lp = load_config(arch_configs.path("dram/lpddr4_28nm_asic.yaml"), DramConfig)
    kv = load_config(arch_configs.path("dram/ddr4_kv260.yaml"), DramConfig)
    h2 = load_config(arch_configs.path("dram/hbm3e_h200.yaml"), DramConfig)
    a100 = load_config(arch_configs.path("dram/hbm2e_a100_80g.yaml"), DramConfig)
    a6k = load_config(arch_configs.path("dram/gddr6_rtx_a6000.yaml"), DramConfig)
    # [R-PM] src/perf_model.py: DRAM energy 3.2e-11 J/byte; one efficiency number (a flat curve)
    assert (lp.type, lp.energy_pj_per_byte, lp.efficiency) == ("lpddr4", 32.0, 0.7)
    # specs/deltallm.md §4: 2400 Mb/s x 64 bit / 8 = 19.2 GB/s; §2.4 efficiency 0.6-0.7
    assert (kv.type, kv.bw_gb_per_s, kv.channels) == ("ddr4", 2400 * 64 / 8 / 1000, 1)
    assert 0.6 <= kv.streaming_efficiency <= 0.7
    # specs/deltallm.md §2.4: 19.2 GB/s is 76.8 B/cycle at 250 MHz (peak)
    assert kv.sustained_bytes_per_cycle(250) == pytest.approx(
        76.8 * kv.streaming_efficiency, rel=1e-15
    )
    # specs/gpu.md §2: 4.8 TB/s peak, 3.89 TB/s measured plateau (81%)
    assert (h2.type, h2.bw_gb_per_s) == ("hbm3e", 4800.0)
    assert h2.streaming_efficiency == pytest.approx(3.89 / 4.8, abs=0.005)
    assert h2.sustained_bw_gb_per_s == pytest.approx(3888.0, rel=1e-12)
    # [NV-A100] datasheet: 2.039 TB/s peak; [S12] gpu-benches: 1.73 TB/s measured plateau (85%)
    assert (a100.type, a100.bw_gb_per_s) == ("hbm2e", 2039.0)
    assert a100.streaming_efficiency == pytest.approx(1.73 / 2.039, abs=0.005)
    # [NV-A6000] datasheet: GDDR6, 384 bit x 16 Gb/s = 768 GB/s, 12 channels of 32 bits
    assert (a6k.type, a6k.bw_gb_per_s, a6k.channels) == ("gddr6", 384 * 16 / 8, 384 // 32)
    for d in (kv, h2, a100, a6k):  # the size curves lose efficiency on short transfers
        effs = [p.efficiency for p in d.efficiency_curve]
        assert len(effs) > 1 and effs == sorted(effs) and effs[-1] == d.streaming_efficiency
    for name in ("lpddr4_28nm_asic", "ddr4_kv260", "hbm3e_h200", "hbm2e_a100_80g",
                 "gddr6_rtx_a6000"):  # fmt: skip
        path = arch_configs.path(f"dram/{name}.yaml")
        d = load_config(path, DramConfig)
        given = set(yaml.safe_load(path.read_text())) - {"version", "source", "sources"}
        # every figure in the file says where it comes from (the energy in ``source``)
        assert set(d.sources) == given - {"energy_pj_per_byte", "uncertainty_pct"}, name
        assert d.source.strip() and d.uncertainty_pct > 0
        assert d.row_buffer_bytes is None  # the open-row model is off in the presets
