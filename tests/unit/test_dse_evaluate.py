"""The sweep's per-point evaluation equals the plain per-point definition exactly.

``evaluate_points`` reuses what design points share (validated sub-blocks, tile plans, format
lookups, per-MAC cost figures, digests). The oracle here recomputes every point from scratch by
the definition: the override as "dump the base, set the keys, load it again", then
:func:`coaccel.simulate` and :func:`coaccel.cost.evaluate`, with every cache emptied before each
point so no point can borrow anything from another. Every metric must be equal, of the same
type, with the same unit; the config digest is the SHA-256 of the dumped config's canonical JSON;
points the definition rejects must fail with the same error.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from typing import Any

import pytest

import coaccel
from coaccel.cost import _sram as cost_sram
from coaccel.cost import _system as cost_system
from coaccel.dse import expand, load_spec
from coaccel.dse.evaluate import evaluate_points
from coaccel.dse.spec import parse_expr
from coaccel.sim.common import buffer as common_buffer
from coaccel.sim.hbq_asic import analytical
from coaccel.sim.hbq_asic import config as hbq_config
from coaccel.simulation import find_arch
from coaccel.spine.config import ConfigError, dump_config, load_config_dict

# Random samples over keys the analytical model and the cost model read (clock, PE count,
# every buffer, double buffering, the softmax unit, DRAM): some combinations are
# invalid architectures (tiles that do not fit, PE counts that do not divide the channel
# tile), and those must fail the same way.
SPEC = """\
version: 1
base: {base}
workloads: [llama-3.2-1b:prefill_1024, llama-3.2-1b:decode_1k]
mode: analytical
parameters:
  freq_mhz: {{start: 150, stop: 1000, step: 50}}
  pe_array.n_pes: [8, 16, 32, 64]
  buffers.psum.size_kib: [34, 68, 102, 136, 272]
  buffers.act.size_kib: [32, 96, 192]
  buffers.wgt.size_kib: [20, 40, 80]
  buffers.act.double_buffered: [true, false]
  vector_unit.elems_per_cycle: [16, 32, 64]
  dram.bw_gb_per_s: [6.4, 12.8, 25.6]
strategy: {{kind: random, seed: {seed}, samples: {samples}}}
limits:
  - "area_mm2 <= 3"
  - "seconds < 0.5"
"""


def _clear_caches() -> None:
    for f in (
        hbq_config._plan_of,
        hbq_config._registry_check_of,
        hbq_config._bits_per_element,
        hbq_config._psum_bits,
        common_buffer._kib_to_bytes,
        cost_system._mac_point,
        cost_sram._sram_cost,
    ):
        f.cache_clear()
    analytical._TILES.clear()
    analytical._PE_IDS.clear()


def _definition(base: Any, changes: dict[str, Any]) -> Any:
    data = dump_config(base)
    for dotted, value in changes.items():
        *head, last = dotted.split(".")
        cur = data
        for part in head:
            cur = cur[part]
        cur[last] = value
    return load_config_dict(data, type(base), source=f"<override of {type(base).__name__}>")


def _digest(cfg: Any) -> str:
    text = json.dumps(dump_config(cfg), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _typed(metrics: dict[str, tuple[Any, str]]) -> dict[str, tuple[str, Any, str]]:
    return {k: (type(v).__name__, v, u) for k, (v, u) in metrics.items()}


@pytest.mark.parametrize(
    ("base", "seed"), [("hbq_e_28nm", 1), ("hbq_a_28nm", 2), ("woq_w4a16_28nm", 3)]
)
def test_evaluate_points_equals_simulate_plus_cost(tmp_path, base: str, seed: int) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(textwrap.dedent(SPEC.format(base=base, seed=seed, samples=30)))
    ls = load_spec(spec)
    points = expand(ls.spec, ls.constraints, ls.digest, ls.source)
    limits = [e.text for e in ls.limits]
    rows = evaluate_points(ls.base_path, "analytical", ls.digest, limits, points)
    assert len(rows) == len(points) == 60
    t, path = find_arch(ls.base_path)
    ok = failed = 0
    for pt, row in zip(points, rows, strict=True):
        _clear_caches()
        base_cfg = t.load_arch(path)
        wl = t.load_workload(pt.workload)
        try:
            arch = _definition(base_cfg, dict(pt.overrides))
            res = coaccel.simulate(arch, wl, mode="analytical")
        except ConfigError as e:
            assert row.status == "failed", pt.params
            assert row.error is not None and row.error.rstrip().endswith(str(e)), pt.params
            failed += 1
            continue
        assert row.status == "ok", (pt.params, row.error)
        cb = coaccel.cost.evaluate(res, arch)
        want = dict(res.metrics())
        want["energy_j"] = (cb.total_energy_j, "J")
        want["area_mm2"] = (cb.total_area_um2 / 1e6, "mm2")
        want["edp_js"] = (cb.total_energy_j * float(want["seconds"][0]), "J*s")
        assert _typed(row.metrics) == _typed(want), pt.params
        assert row.config_digest == _digest(arch)
        env = {k: v for k, (v, _) in want.items()}
        assert row.feasible == all(parse_expr(lim)(env) for lim in limits)
        assert row.params == dict(pt.params) and row.workload == pt.workload
        ok += 1
    assert ok >= 10 and failed >= 3, (ok, failed)
