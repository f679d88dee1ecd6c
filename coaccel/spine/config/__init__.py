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

Modules (each lists its public and internal functions):

* :mod:`._problems`: :class:`Problem`, :class:`ConfigError` and the wording of messages.
* :mod:`._schema`: :func:`param`, :class:`FrozenMap`, schema introspection,
  :func:`field_paths`, :func:`source_key_problems`.
* :mod:`._values`: scalars, units, bounds and choices; :func:`parse_quantity`.
* :mod:`._loader`: :func:`load_config`, :func:`load_config_dict` (YAML, includes, versions,
  cross-field rules).
* :mod:`._digest`: :func:`dump_config`, :func:`config_digest`, the configs known to be valid.
* :mod:`._override`: :func:`override`, :func:`check_value`.
* :mod:`._dram`: :class:`DramConfig`, :class:`EfficiencyPoint`.

Import from this package (or its public alias ``coaccel.config``), never from the modules.
"""

from ._digest import config_digest, dump_config
from ._dram import DramConfig, DramType, EfficiencyPoint
from ._loader import load_config, load_config_dict
from ._override import check_value, override
from ._problems import ConfigError, Problem
from ._schema import MISSING, FrozenMap, field_paths, param, source_key_problems
from ._values import parse_quantity

__all__ = [
    "MISSING",
    "ConfigError",
    "DramConfig",
    "DramType",
    "EfficiencyPoint",
    "FrozenMap",
    "Problem",
    "config_digest",
    "dump_config",
    "field_paths",
    "load_config",
    "load_config_dict",
    "check_value",
    "override",
    "param",
    "parse_quantity",
    "source_key_problems",
]
