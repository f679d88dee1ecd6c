"""Sweep specs: every validation error names its key; expansion is deterministic and sized."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from coaccel import arch_configs
from coaccel.dse import ParamRange, combinations, expand, load_spec, parse_expr, point_id
from coaccel.spine.config import ConfigError

BASE = """\
version: 1
base: hbq_e_28nm
workloads: [llama-3.2-1b:prefill_1024]
mode: analytical
"""


def _spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "sweep.yaml"
    p.write_text(BASE + textwrap.dedent(body))
    return p


def _problem(path: Path) -> tuple[str, str]:
    with pytest.raises(ConfigError) as ei:
        load_spec(path)
    return ei.value.problems[0].key, str(ei.value)


def test_shipped_specs_load():
    for name in ("hbq_pe_psum", "small_test"):
        ls = load_spec(arch_configs.path(f"sweeps/{name}.yaml"))
        assert ls.kind == "hbq_asic"
        assert "energy_j" in ls.metric_units and ls.metric_units["edp_js"] == "J*s"
    ls = load_spec(arch_configs.path("sweeps/hbq_pe_psum.yaml"))
    pts = expand(ls.spec, ls.constraints, ls.digest)
    # 4 x 4 x 3 = 48 combinations; the two constraints keep 29
    assert len(pts) == 29


def test_unknown_top_key(tmp_path):
    key, msg = _problem(_spec(tmp_path, "parameters: {pe_array.n_pes: [16]}\nobjective: []\n"))
    assert key == "objective"
    assert "sweep.yaml: objective: unknown key" in msg and "objectives" in msg


def test_unknown_parameter_path(tmp_path):
    key, msg = _problem(_spec(tmp_path, "parameters: {pe_array.n_pe: [16, 32]}\n"))
    assert key == "parameters.pe_array.n_pe"
    assert "unknown key 'n_pe'" in msg and "n_pes" in msg


def test_empty_range(tmp_path):
    body = "parameters:\n  buffers.psum.size_kib: {start: 200, stop: 68, step: 68}\n"
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "parameters.buffers.psum.size_kib.stop"
    assert "empty range" in msg


def test_empty_list(tmp_path):
    key, msg = _problem(_spec(tmp_path, "parameters: {pe_array.n_pes: []}\n"))
    assert key == "parameters.pe_array.n_pes" and "empty list" in msg


def test_bad_step(tmp_path):
    body = "parameters:\n  buffers.psum.size_kib: {start: 68, stop: 136, step: 0}\n"
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "parameters.buffers.psum.size_kib.step" and "must be > 0" in msg


def test_contradictory_constraints(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32], buffers.psum.size_kib: [68, 136]}
    constraints: ["pe_array.n_pes > 16", "buffers.psum.size_kib < pe_array.n_pes"]
    """
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "constraints" and "contradictory" in msg


def test_constraint_unknown_name_and_unsafe(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32]}
    constraints: ["pe_array.n_pe > 16", "__import__('os').system('true')"]
    """
    with pytest.raises(ConfigError) as ei:
        load_spec(_spec(tmp_path, body))
    keys = [p.key for p in ei.value.problems]
    assert keys == ["constraints[0]", "constraints[1]"]
    assert "unknown parameter 'pe_array.n_pe'" in str(ei.value)
    assert "Call is not allowed" in str(ei.value)


def test_objective_nobody_computes(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32]}
    objectives: [{metric: energy_jj, goal: minimize}]
    limits: ["area_mm3 <= 2"]
    """
    with pytest.raises(ConfigError) as ei:
        load_spec(_spec(tmp_path, body))
    keys = [p.key for p in ei.value.problems]
    assert keys == ["limits[0]", "objectives[0].metric"]
    assert "no result computes metric 'energy_jj' (did you mean 'energy_j'?)" in str(ei.value)


def test_bad_goal_and_strategy(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32]}
    objectives: [{metric: energy_j, goal: minimise}]
    """
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "objectives[0].goal" and "did you mean 'minimize'" in msg
    body = """\
    parameters: {pe_array.n_pes: [16, 32]}
    strategy: {kind: random, samples: 2}
    """
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "strategy.seed" and "random needs seed" in msg


def test_random_more_samples_than_space(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32]}
    strategy: {kind: random, seed: 1, samples: 3}
    """
    key, msg = _problem(_spec(tmp_path, body))
    assert key == "strategy.samples" and "only 2 combinations" in msg


def test_unknown_base_and_workload(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(BASE.replace("hbq_e_28nm", "hbq_e_28") + "parameters: {pe_array.n_pes: [16]}\n")
    key, msg = _problem(p)
    assert key == "base" and "did you mean 'hbq_e_28nm'" in msg
    p.write_text(
        BASE.replace("prefill_1024", "prefill_1k") + "parameters: {pe_array.n_pes: [16]}\n"
    )
    key, msg = _problem(p)
    assert key == "workloads[0]" and "prefill_1024" in msg


def test_ranges():
    assert ParamRange(start=68, stop=272, step=68).values() == (68, 136, 204, 272)
    assert ParamRange(start=68, stop=271, step=68).values() == (68, 136, 204)
    assert ParamRange(start=0.5, stop=1.0, step=0.25).values() == (0.5, 0.75, 1.0)
    assert ParamRange(log2=(4, 7)).values() == (16, 32, 64, 128)


def test_expr():
    e = parse_expr("a.b >= c * 2 and not (c == 3) or a.b ** 2 < 0")
    assert e.names == ("a.b", "c")
    assert e({"a.b": 4, "c": 2}) is True
    assert e({"a.b": 3, "c": 2}) is False
    assert e({"a.b": 9, "c": 3}) is False
    assert parse_expr("1 < a <= 3")({"a": 3}) is True
    for bad in ("a(1)", "a[0]", "'x' == a", "lambda: 1", "a if b else c", "a +"):
        with pytest.raises(ValueError):
            parse_expr(bad)


def _grid_spec(tmp_path, strategy: str, n_pes="[16, 32, 64]", psum="[68, 136, 204, 272]"):
    body = f"""\
    parameters:
      pe_array.n_pes: {n_pes}
      buffers.psum.size_kib: {psum}
      buffers.act.size_kib: {{log2: [6, 9]}}
    strategy: {strategy}
    """
    return load_spec(_spec(tmp_path, body))


def test_grid_order_and_size(tmp_path):
    ls = _grid_spec(tmp_path, "{kind: grid}")
    combos = combinations(ls.spec)
    assert len(combos) == 3 * 4 * 4
    assert combos[0] == {
        "pe_array.n_pes": 16,
        "buffers.psum.size_kib": 68,
        "buffers.act.size_kib": 64,
    }
    assert combos[1]["buffers.act.size_kib"] == 128  # last parameter varies fastest
    assert len({tuple(c.values()) for c in combos}) == 48


def test_random_deterministic_distinct(tmp_path):
    ls = _grid_spec(tmp_path, "{kind: random, seed: 7, samples: 20}")
    a, b = combinations(ls.spec), combinations(ls.spec)
    assert a == b and len(a) == 20 and len({tuple(c.values()) for c in a}) == 20
    other = _grid_spec(tmp_path, "{kind: random, seed: 8, samples: 20}")
    assert combinations(other.spec) != a
    full = _grid_spec(tmp_path, "{kind: random, seed: 7, samples: 48}")
    assert len({tuple(c.values()) for c in combinations(full.spec)}) == 48


def test_lhs_covers_each_value(tmp_path):
    four = "[16, 32, 64, 128]"
    ls = _grid_spec(tmp_path, "{kind: lhs, seed: 3, samples: 4}", n_pes=four)
    a = combinations(ls.spec)
    assert a == combinations(ls.spec) and len(a) == 4
    # 4 samples over 4 values: every value of every parameter appears exactly once
    for name, vals in ls.spec.values().items():
        assert sorted(c[name] for c in a) == sorted(vals)
    big = _grid_spec(tmp_path, "{kind: lhs, seed: 3, samples: 40}")
    rows = combinations(big.spec)
    assert len(rows) <= 40 and len({tuple(c.values()) for c in rows}) == len(rows)
    for name, vals in big.spec.values().items():  # strata: each value hit 40/len(vals) times
        counts = [sum(c[name] == v for c in rows) for v in vals]
        assert max(counts) - min(counts) <= 40 // len(vals)


def test_constraints_filter_and_ids(tmp_path):
    body = """\
    parameters: {pe_array.n_pes: [16, 32, 64], buffers.psum.size_kib: [68, 136]}
    constraints: ["buffers.psum.size_kib >= pe_array.n_pes * 2"]
    """
    p = _spec(tmp_path, body.replace("mode: analytical", ""))
    p.write_text(
        p.read_text().replace(
            "[llama-3.2-1b:prefill_1024]", "[llama-3.2-1b:prefill_1024, llama-3.2-1b:prefill_512]"
        )
    )
    ls = load_spec(p)
    pts = expand(ls.spec, ls.constraints, ls.digest)
    kept = {
        (dict(pt.params)["pe_array.n_pes"], dict(pt.params)["buffers.psum.size_kib"]) for pt in pts
    }
    assert kept == {(16, 68), (16, 136), (32, 68), (32, 136), (64, 136)}
    assert len(pts) == 10 and len({pt.point_id for pt in pts}) == 10
    pt = pts[0]
    assert pt.point_id == point_id(dict(reversed(pt.params)), pt.workload, ls.digest)
    assert point_id(dict(pt.params), pt.workload, "0" * 64) != pt.point_id


@pytest.mark.parametrize("strategy", ["grid", "random", "lhs"])
def test_expansion_equals_its_definition(tmp_path, strategy):
    """Every point is a combination the strategy picks that satisfies every constraint, in the
    strategy's order, times the workloads; its id is :func:`point_id` of its parameters (values
    of several types: ints, floats equal to them, a zero, a list)."""
    kind = strategy
    strategy = "{kind: grid}" if kind == "grid" else f"{{kind: {kind}, samples: 40, seed: 3}}"
    body = f"""\
    parameters:
      pe_array.n_pes: [16, 32, 64]
      buffers.psum.size_kib: [68, 68.0, 136, 272]
      freq_mhz: {{start: 400, stop: 700, step: 100}}
      dram.latency_ns: [0.0, 40, 80.5]
    constraints:
      - "buffers.psum.size_kib >= pe_array.n_pes * 2"
      - "freq_mhz * (dram.latency_ns + 1) < 40000"
    strategy: {strategy}
    """
    p = _spec(tmp_path, body)
    p.write_text(
        p.read_text().replace(
            "[llama-3.2-1b:prefill_1024]", "[llama-3.2-1b:prefill_1024, llama-3.2-1b:prefill_512]"
        )
    )
    ls = load_spec(p)
    want = [
        (dict(combo), w)
        for combo in combinations(ls.spec)
        if all(c(combo) for c in ls.constraints)
        for w in ls.spec.workloads
    ]
    pts = expand(ls.spec, ls.constraints, ls.digest)
    assert [(dict(pt.params), pt.workload) for pt in pts] == want
    assert all(type(dict(pt.params)["buffers.psum.size_kib"]) in (int, float) for pt in pts)
    assert [pt.point_id for pt in pts] == [point_id(c, w, ls.digest) for c, w in want]
    assert 0 < len(pts) < 2 * 3 * 4 * 4 * 3


@pytest.mark.parametrize(
    "name",
    ["demo_buffers", "gpu_decode_context_batch_splits", "hbq_format_block_array_psum",
     "hbq_pe_psum", "hbq_search_space", "hbq_two_stage", "small_test"],
)  # fmt: skip
def test_shipped_sweeps_expand_to_their_definition(name):
    ls = load_spec(arch_configs.path(f"sweeps/{name}.yaml"))
    want = [
        (c, w)
        for c in combinations(ls.spec)
        if all(e(c) for e in ls.constraints)
        for w in ls.spec.workloads
    ]
    pts = expand(ls.spec, ls.constraints, ls.digest)
    assert [pt.point_id for pt in pts] == [point_id(c, w, ls.digest) for c, w in want]
