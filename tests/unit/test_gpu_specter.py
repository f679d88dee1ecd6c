"""W4 Specter: routing generator, planner and LRU slot cache, transfers overlapped with compute."""

import numpy as np
import pytest

from coaccel.models.gpu.specter import (
    MoEShape,
    SpecterModel,
    routing_trace,
    specter_baseline,
    specter_decode,
)
from coaccel.sim.gpu_mem import load_arch, load_workload, simulate
from coaccel.spine.config import ConfigError

SMALL = MoEShape(moe_layers=4)


def test_expert_sizes_of_deepseek_v2_lite():
    s = MoEShape()
    assert s.expert_bytes == 3 * 2048 * 1408 * 2 == 17_301_504  # the ~17.3 MB class
    assert s.draft_expert_bytes == 3 * 2048 * 1408 // 2 + 3 * 2048 * 1408 // 128 * 2


def test_routes_distinct_seeded_and_skewed():
    m = SpecterModel(persistence=0.0, zipf=1.2)
    r1, pop = routing_trace(SMALL, m, 400, np.random.default_rng(5))
    r2, _ = routing_trace(SMALL, m, 400, np.random.default_rng(5))
    assert np.array_equal(r1, r2)
    assert all(len(set(row)) == SMALL.top_k for row in r1.reshape(-1, SMALL.top_k).tolist())
    # the most popular expert of a layer is chosen far more often than the least popular
    counts = np.bincount(r1[:, 0].ravel(), minlength=SMALL.experts)
    assert counts[np.argmax(pop[0])] > 5 * max(1, counts[np.argmin(pop[0])])
    still, _ = routing_trace(SMALL, SpecterModel(persistence=1.0), 20, np.random.default_rng(1))
    assert np.all(still == still[0])


def test_deterministic_and_link_bytes_are_the_copies():
    m = SpecterModel(slots=8)
    r = specter_decode(SMALL, m, tokens=12, seed=2)
    again = specter_decode(SMALL, m, tokens=12, seed=2)
    assert r.trace.equals(again.trace)
    assert r.tokens >= 12
    assert r.tokens == int(r.accepted.sum()) + r.accepted.size
    res = simulate(load_arch("a100_80g"), r.trace)
    assert res.link.h2d_bytes == r.h2d_bytes == (r.prefetched + r.demand_misses) * 17_301_504
    assert r.prefetch_used <= r.prefetched


def test_prefetch_overlaps_the_draft():
    r = specter_decode(SMALL, SpecterModel(slots=8), tokens=12, seed=2)
    res = simulate(load_arch("a100_80g"), r.trace)
    drafts = [k for k in res.kernels if k.name == "specter_draft_step"]
    copies = [k for k in res.kernels if k.name == "memcpy_h2d_expert_prefetch"]
    assert copies
    overlap = sum(
        max(0.0, min(c.end_s, d.end_s) - max(c.start_s, d.start_s)) for c in copies for d in drafts
    )
    assert overlap > 0


def test_recall_drives_prefetch_precision():
    lo = specter_decode(SMALL, SpecterModel(slots=8, recall=0.25), tokens=24, seed=3)
    hi = specter_decode(SMALL, SpecterModel(slots=8, recall=1.0), tokens=24, seed=3)
    assert hi.prefetch_used / hi.prefetched > lo.prefetch_used / lo.prefetched


def test_everything_resident_moves_nothing():
    m = SpecterModel(slots=SMALL.experts)
    for run in (specter_decode, specter_baseline):
        r = run(SMALL, m, tokens=6, seed=0)
        assert r.demand_misses == 0 and r.prefetched == 0


def test_baseline_misses_by_brute_force_lru():
    m = SpecterModel(slots=8, persistence=0.5)
    r = specter_baseline(SMALL, m, tokens=10, seed=4)
    routes, pop = routing_trace(SMALL, m, 10, np.random.default_rng(4))
    misses = 0
    for layer in range(SMALL.moe_layers):
        warm = list(np.argsort(-pop[layer], kind="stable")[:8])
        lru = warm[::-1]  # least recent first: the least popular of the warm set
        for t in range(10):
            need = sorted(routes[t, layer].tolist())
            for e in need:
                if e in lru:
                    lru.remove(e)
                    lru.append(e)
            for e in need:
                if e not in lru:
                    misses += 1
                    if len(lru) >= 8:
                        lru.pop(0)
                    lru.append(e)
    assert r.demand_misses == misses


def test_workload_spec():
    w = load_workload("specter:tokens=4,K=4,slots=8,recall=0.5,seed=1")
    assert w.trace.meta["workload"]["mode"] == "specter"
    b = load_workload("specter:tokens=4,slots=8,mode=baseline")
    assert b.trace.meta["workload"]["metrics"]["prefetched_experts"][0] == 0
    for bad in ("specter:mode=oracle", "specter:recall=2", "specter:slots=100"):
        with pytest.raises(ConfigError):
            load_workload(bad)


# --- the routing generator fitted to Mixtral's published repetition shares ---------------------


def test_exact_repetitions_are_random_assignment_without_locality():
    from coaccel.models.gpu._routing_fit import generator_repetitions

    first, either = generator_repetitions(0.0, 0.0)
    # the reference values of [MIXTRAL] Table 5's caption: 1/8 and 1 - 6/8 * 5/7
    assert first == pytest.approx(1 / 8, abs=1e-12)
    assert either == pytest.approx(1 - 6 / 8 * 5 / 7, abs=1e-12)
    assert generator_repetitions(1.0, 0.0) == pytest.approx((1.0, 1.0), abs=1e-9)


def test_exact_repetitions_equal_the_sampled_generator():
    """The Markov-chain statistics equal those of routes the generator draws (top-2 of 8)."""
    from coaccel.models.gpu._routing_fit import generator_repetitions, repetition_stats

    shape = MoEShape(moe_layers=2, experts=8, top_k=2)
    for p, z in ((0.15, 0.5), (0.05, 0.0)):
        routes, _ = routing_trace(shape, SpecterModel(persistence=p, zipf=z), 6000,
                                  np.random.default_rng(3))  # fmt: skip
        first, either = repetition_stats(routes)
        exact = generator_repetitions(p, z)
        # binomial standard error of 2 x 6000 pairs is below 0.007; 4 sigma
        assert abs(first.mean() - exact[0]) < 0.025
        assert abs(either.mean() - exact[1]) < 0.025


def test_routing_profile_is_the_fit_to_mixtral_table5():
    from coaccel.models.gpu._routing_fit import MIXTRAL_TABLE5, fit_mixtral_table5
    from coaccel.models.gpu.specter import ROUTING_PROFILE

    fits = fit_mixtral_table5()
    assert [f.layer for f in fits] == sorted(MIXTRAL_TABLE5)
    for f, (depth, p, z) in zip(fits, ROUTING_PROFILE, strict=True):
        assert (f.depth, f.persistence, f.zipf) == pytest.approx((depth, p, z), abs=1e-9)
    # layers 0 and 15 are reproduced within the spread over domains; layer 31's first-choice
    # share exceeds what one per-slot persistence gives with its either share (documented)
    for f in fits[:2]:
        for got, pub, sd in zip(f.fitted, f.published, f.spread, strict=True):
            assert abs(got - pub) <= sd
    for f in fits:
        for got, pub, sd in zip(f.fitted, f.published, f.spread, strict=True):
            assert abs(got - pub) <= 2 * sd


def test_default_routes_follow_the_depth_profile():
    from coaccel.models.gpu._routing_fit import repetition_stats

    m = SpecterModel()
    assert m.routing_fitted and not SpecterModel(persistence=0.5).routing_fitted
    p, z = m.layer_knobs(26)
    assert p[0] == pytest.approx(0.018) and p[-1] == pytest.approx(0.082)
    assert np.argmax(p) in (12, 13) and z[0] == 0.0 == z[-1]
    shape = MoEShape(moe_layers=3, experts=8, top_k=2)
    routes, _ = routing_trace(shape, m, 4000, np.random.default_rng(0))
    first, _ = repetition_stats(routes)
    assert first[1] > first[2] > first[0]  # mid-depth layers repeat most, as in Mixtral
    with pytest.raises(ValueError, match=r"must be three-dimensional|\[tokens"):
        repetition_stats(routes[:1])


def test_authors_baselines_on_their_metric():
    """Speedup = baseline mean TPOT / Specter mean TPOT, residencies of the artifact's table."""
    from coaccel.targets.gpu.specter_compare import CASES, specter_cases

    assert CASES == {
        "high": {"specter": 16, "specmoeoff": 12, "mixtral_offloading": 32},
        "low": {"specter": 4, "specmoeoff": 2, "mixtral_offloading": 20},
    }
    a = load_arch("a100_40g")
    c = specter_cases([a], tokens=8, cases=("high",))["high"][0]
    assert c.speedup("specmoeoff") == c.tpot_s["specmoeoff"] / c.tpot_s["specter"]
    assert c.accepted["mixtral_offloading"] == 0.0 < c.accepted["specmoeoff"]
    # a window of K + 1 = 17 verified tokens needs more distinct experts than one of 4 or 1
    d = c.distinct_per_window
    assert d["specter"] > d["specmoeoff"] > d["mixtral_offloading"] == pytest.approx(6.0)
    # a better acceptance shortens Specter's TPOT on the same routes
    hi = specter_cases([a], tokens=8, cases=("high",), knobs={"accept": 0.98})["high"][0]
    assert hi.tpot_s["specter"] < c.tpot_s["specter"]
