"""The published figures of the validations (coaccel.validate.published).

Every shipped file (arch_configs/validation/*.yaml) loads through the typed config loader, every
figure has a unit and a source whose reference keys resolve in docs/references.md, and a bad
file fails once, with every problem in one ConfigError.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coaccel.spine.config import ConfigError
from coaccel.spine.errors import CoaccelError
from coaccel.validate.published import (
    COUNT_UNITS,
    PublishedFigure,
    load_published,
    published_names,
    read_published,
)

ROOT = Path(__file__).resolve().parents[2]
KEYS = frozenset(
    re.findall(
        r"^### \[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]\s*$",
        (ROOT / "docs" / "references.md").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
)
TAG = re.compile(r"\[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]")


def test_every_validation_set_ships_its_figures() -> None:
    assert published_names() == ("deltallm", "gpu", "hbq")
    sizes = {n: len(load_published(n)) for n in published_names()}
    assert sizes == {"deltallm": 11, "gpu": 15, "hbq": 47}


@pytest.mark.parametrize("name", ["deltallm", "gpu", "hbq"])
def test_every_figure_has_a_unit_and_a_resolvable_source(name: str) -> None:
    for key, fig in load_published(name).items():
        assert isinstance(fig, PublishedFigure) and isinstance(fig.value, float), key
        assert fig.unit, key
        tags = TAG.findall(fig.source)
        assert tags and set(tags) <= KEYS, (key, fig.source)


def test_figures_are_the_ones_the_code_cited() -> None:
    gpu = load_published("gpu")
    assert gpu["h200.dram_read_plateau"].value == 3.89e12
    assert [gpu[f"a100_80g.chase_{k}"].value for k in ("l1_hit", "near_l2", "far_l2", "dram")] == [
        36,
        211,
        424,
        570,
    ]
    assert gpu["a100_80g.chase_far_l2"].unit == "cycles"
    assert gpu["ffd.context"].value == 262144 and gpu["ffd.context"].unit == "tokens"
    hbq = load_published("hbq")
    assert hbq["system_energy.llama-3-8b.amove_28nm"].value == 10.288
    assert hbq["breakdown.llama-2-7b.hbq_e_28nm.sram"].value == 0.191
    assert hbq["speedup.nvfp4_28nm.16384_tokens"].value == 1.24
    assert load_published("deltallm")["structured_score_sparsity"].value == 0.63


def test_an_unknown_file_lists_the_shipped_ones() -> None:
    with pytest.raises(
        CoaccelError, match=r"no published figures named 'hbq2'.*deltallm, gpu, hbq"
    ):
        load_published("hbq2")


def test_a_bad_file_is_one_config_error(tmp_path: Path) -> None:
    """An unknown key, a missing unit and a value that is not a number: one ConfigError, one
    line each; an unknown unit and a source without a reference key likewise."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\n"
        "description: broken on purpose\n"
        "figures:\n"
        "  a:\n"
        "    value: 1.5\n"
        "    unit: x\n"
        "    source: '[HBQ] abstract'\n"
        "    sourse: typo\n"
        "  b:\n"
        "    value: 2.0\n"
        "    source: '[HBQ] abstract'\n"
        "  d:\n"
        "    value: many\n"
        "    unit: x\n"
        "    source: the abstract\n"
    )
    with pytest.raises(ConfigError) as err:
        read_published(bad)
    lines = str(err.value).splitlines()
    text = "\n".join(lines)
    assert "figures.a.sourse: unknown key 'sourse'; valid keys: value, unit, source, note" in text
    assert "(did you mean 'source'?)" in text
    assert "figures.b.unit: missing required key" in text
    assert "figures.d.value: expected float" in text
    assert len([ln for ln in lines if "bad.yaml" in ln]) == 3
    # the rules of a figure (unit, citation) run once the keys and types are right
    only_rules = tmp_path / "rules.yaml"
    only_rules.write_text(
        "version: 1\ndescription: d\nfigures:\n"
        "  c:\n    value: 3.0\n    unit: furlongs\n    source: the abstract\n"
    )
    with pytest.raises(ConfigError) as err:
        read_published(only_rules)
    text = str(err.value)
    assert "figures.c: unit: unknown unit 'furlongs'" in text
    assert "figures.c: source: 'the abstract' cites no reference key" in text
    assert COUNT_UNITS >= {"x", "1", "%", "cycles", "tokens"}


def test_a_missing_version_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "v.yaml"
    p.write_text("description: d\nfigures: {}\n")
    with pytest.raises(ConfigError, match="version: missing required key"):
        read_published(p)
