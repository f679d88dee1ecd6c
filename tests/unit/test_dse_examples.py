"""Every shipped sweep spec loads, and the example specs describe the sweeps they say."""

from __future__ import annotations

import pytest

from coaccel import arch_configs
from coaccel.dse import combinations, expand, load_spec

SWEEPS = sorted(arch_configs.path("sweeps/small_test.yaml").parent.glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_shipped_spec_loads(path):
    ls = load_spec(path)
    assert ls.spec.description and ls.stages
    assert expand(ls.spec, ls.constraints, ls.digest)


def test_format_block_array_psum_example():
    ls = load_spec(arch_configs.path("sweeps/hbq_format_block_array_psum.yaml"))
    assert ls.accuracy is not None and ls.accuracy.data in ("real", "synthetic")
    assert {"accuracy_sqnr_db", "accuracy_loss_db"} <= set(ls.metric_units)
    pts = expand(ls.spec, ls.constraints, ls.digest)
    # 2 uB x 2 blocks x 4 PE counts x 3 PSUM x 2 ACT, less the constrained-out combinations
    combos = [dict(p.params) for p in pts]
    assert all(c["formats.weight.ub_elems"] == c["formats.activation.ub_elems"] for c in combos)
    assert {(c["formats.weight.ub_elems"], c["formats.weight.block_elems"]) for c in combos} == {
        (8, 64), (8, 128), (32, 64), (32, 128)
    }  # fmt: skip
    assert len(pts) == 72


def test_two_stage_and_search_examples():
    two = load_spec(arch_configs.path("sweeps/hbq_two_stage.yaml"))
    assert [(s.name, s.mode, s.select) for s in two.stages] == [
        ("screen", "analytical", "all"),
        ("front", "cycle", "front"),
    ]
    search = load_spec(arch_configs.path("sweeps/hbq_search_space.yaml"))
    st = search.spec.strategy
    assert st.kind == "nsga2"
    n = len(expand(search.spec, search.constraints, search.digest))
    assert n == len([c for c in combinations(search.spec) if all(e(c) for e in search.constraints)])
    assert n == 3696 and (st.population, st.generations) == (20, 16)
