"""HBQ ASIC simulator configs: architectures, workloads, tiles, and the RTL's cycle counts.

Expected values: hand-derived tile sizes (buffer bytes / bits per element), the published model
shapes (each model's Hugging Face ``config.json``, also in [R-PM] ``MODELS``), and the RTL's
measured cycle counts read from ``rtl/hbq/cycles.csv`` at test time.
"""

from __future__ import annotations

import csv
from fractions import Fraction
from pathlib import Path

import pytest

from coaccel.sim.hbq_asic import (
    ARCH_NAMES,
    HbqArchConfig,
    attention_tiles,
    load_arch,
    load_workload,
    tile_plan,
)
from coaccel.sim.hbq_asic._hw import hw_params
from coaccel.sim.hbq_asic.engine import pe_tile_closed_form, pe_tile_cycles
from coaccel.spine.config import ConfigError, dump_config, load_config, load_config_dict, override

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ARCH_NAMES)
def test_shipped_architectures_load_with_sources(name):
    a = load_arch(name)
    assert a.name == name
    assert a.pe_array.n_pes * a.pe_array.macs_per_pe == 4096 and a.freq_mhz == 500
    assert a.dram.energy_pj_per_byte == 32.0  # [R-PM] 3.2e-11 J/B
    for role in ("weight", "activation", "kv"):
        assert getattr(a.formats, role).source
    # Every figure a sweep changes says where it comes from.
    for key in ("freq_mhz", "pe_array.n_pes", "pe_array.latency_cycles", "psum.mode",
                "psum.unit_latency_cycles", "buffers.psum.size_kib", "buffers.act.size_kib",
                "tiling.tile_n_channels", "dram"):  # fmt: skip
        assert a.sources.get(key), (name, key)


def test_effective_bits_of_the_shipped_formats():
    # specs/hbq.md §1.5 and [R-PM]: bits per element = element + (scale + L2 codes [+1]) / B.
    want = {
        "hbq_e_28nm": (Fraction(4) + Fraction(17, 128), Fraction(5) + Fraction(16, 128)),
        "hbq_a_28nm": (Fraction(4) + Fraction(41, 128), Fraction(5) + Fraction(40, 128)),
        "nvfp4_28nm": (Fraction(9, 2), Fraction(9, 2)),
        "mxfp4_28nm": (Fraction(17, 4), Fraction(17, 4)),
        "mxfp_w4a8_28nm": (Fraction(17, 4), Fraction(33, 4)),
        "amove_28nm": (Fraction(17, 4), Fraction(17, 4)),
        "woq_w4a16_28nm": (Fraction(33, 8), Fraction(16)),
    }
    for name, (w, act) in want.items():
        a = load_arch(name)
        assert a.formats.weight.bits_per_element() == w, name
        assert a.formats.activation.bits_per_element() == act, name
    assert load_arch("amove_28nm").formats.kv.bits_per_element() == 5  # [R-PM] 5/8 B


def test_tiles_follow_the_buffers():
    # HBQ-E: 136 KiB of 8.5-bit partial sums = 131072 = 512 tokens x 256 channels.
    p = tile_plan(load_arch("hbq_e_28nm"))
    assert (p.tile_m, p.tile_n, p.psum_capacity_elems) == (512, 256, 131072)
    # One 48 KiB ACT slot holds 393216 / (512 * 5.125) = 149.9 -> 128 elements of K.
    assert (p.tile_k, p.n_buffers, p.kstep_elems) == (128, 2, 128)
    # FP16 partial sums: 69632 values = 272 tokens -> 256 (multiple of the 128-token granule):
    # partial-sum BQ doubles the tile depth (specs/hbq.md §2.2, [R-PM] Tk 512 vs 256).
    for name in ("nvfp4_28nm", "mxfp4_28nm", "mxfp_w4a8_28nm", "amove_28nm", "woq_w4a16_28nm"):
        assert tile_plan(load_arch(name)).tile_m == 256, name
    # Attention for Llama-3-8B (head_dim 128, 4 query heads per KV head) on HBQ-E: keys =
    # 327680 bits of WGT / (2 K + 2 V tiles x 128 x 4.125) = 155 -> 128 (multiple of 32 PEs);
    # rows = min(131072 / (128 + 128) = 512, 786432 / ((128 + 2 * 128) * 5.125) = 399) -> 396.
    assert attention_tiles(load_arch("hbq_e_28nm"), head_dim=128, group=4) == (396, 128)
    # An FP16 KV cache takes more room: 327680 / (4 * 128 * 16) = 40 -> 32 keys.
    assert (
        attention_tiles(load_arch("hbq_e_28nm"), head_dim=128, group=4, kv_quantized=False)[1] == 32
    )


def test_explicit_tiles_and_overrides():
    a = load_arch("hbq_e_28nm")
    b = override(a, {"tiling.tile_m_tokens": 256, "buffers.psum.size_kib": "68 KiB"})
    assert tile_plan(b).tile_m == 256
    with pytest.raises(ConfigError) as e:
        override(a, {"tiling.tile_m_tokens": 1024})
    assert "1024 tokens x 256 channels = 262144 partial sums do not fit the PSUM buffer" in str(
        e.value
    )
    # 512 x 256 activations at 5.125 bits, two slots: 1343488 bits = 164 KiB.
    with pytest.raises(ConfigError, match=r"a 512 x 256 tile at 5.125 bits needs 164 KiB of ACT"):
        override(a, {"tiling.tile_k_elems": 256, "buffers.act.size_kib": 64})


def test_bad_architecture_reports_every_problem(tmp_path):
    text = (ROOT / "arch_configs" / "hbq_asic" / "hbq_e_28nm.yaml").read_text()
    act = '    l2_bits: 2\n    l2_scheme: sig1\n    source: "[R-CFG] commit 12ea48a: E2M2'
    text = text.replace("    ub_elems: 32\n" + act, "    ub_elems: 24\n" + act)
    text = text.replace("  n_pes: 32\n", "  n_pes: 32\n  mac_per_pe: 1\n")
    text = text.replace("    size_kib: 136\n    banks: 8\n", "    size_kib: 136\n    banks: 1\n")
    (tmp_path / "dram").mkdir()
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "bad.yaml", HbqArchConfig)
    msg = str(e.value)
    assert "pe_array.mac_per_pe: unknown key 'mac_per_pe'" in msg
    # Type/key problems stop before the cross-field rules; fix that one and see the others.
    (tmp_path / "bad.yaml").write_text(text.replace("  mac_per_pe: 1\n", ""))
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "bad.yaml", HbqArchConfig)
    msg = str(e.value)
    assert "formats.activation.ub_elems: μB=24 must divide block_elems=128" in msg
    assert "buffers.psum.banks: each cycle the array reads and writes back 2 PSUM words" in msg
    assert len(e.value.problems) >= 3


def test_registry_formats_must_match_their_fields():
    a = load_arch("nvfp4_28nm")
    with pytest.raises(ConfigError, match="registered format 'nvfp4_e5m3' has 4.5 "):
        override(a, {"formats.weight.block_elems": 32})
    with pytest.raises(ConfigError, match="the registered format 'mxfp4' has 4-bit elements"):
        override(load_arch("mxfp4_28nm"), {"formats.activation.element_bits": 5})
    # A label that is not a registered format is described by its fields alone.
    b = override(
        a, {"formats.activation.format": "nvfp_w4a6", "formats.activation.element_bits": 6}
    )
    assert b.formats.activation.bits_per_element() == Fraction(13, 2)
    with pytest.raises(ConfigError, match="l2_scheme='sig1' with l2_bits=2 needs ub_elems > 0"):
        override(load_arch("hbq_e_28nm"), {"formats.activation.ub_elems": 0,
                                             "formats.activation.format": "x"})  # fmt: skip
    data = dump_config(load_arch("hbq_e_28nm"))
    data["sources"]["pe_array.npes"] = "typo"
    with pytest.raises(ConfigError, match="sources.pe_array.npes: 'pe_array.npes' is not a field"):
        load_config_dict(data, HbqArchConfig)


# ------------------------------------------------------------------ workloads

# Published shapes of the [R-PM] models (Hugging Face config.json of each model; identical to
# [R-PM] MODELS):
# hidden, intermediate, layers, heads, kv_heads, head_dim, vocab.
PUBLISHED = {
    "llama-2-7b": (4096, 11008, 32, 32, 32, 128, 32000),
    "llama-3-8b": (4096, 14336, 32, 32, 8, 128, 128256),
    "llama-3.2-3b": (3072, 8192, 28, 24, 8, 128, 128256),
    "qwen2.5-3b": (2048, 11008, 36, 16, 2, 128, 151936),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 128, 152064),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_workloads_have_the_published_shapes(name):
    w = load_workload(name)
    m = w.model
    assert (m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.head_dim, m.vocab) == (
        PUBLISHED[name]
    )
    assert w.scenario_name == "prefill_2k" and w.scenario.tokens == 2048
    cfg_scen = {"prefill_1k": 1024, "prefill_2k": 2048, "prefill_4k": 4096, "prefill_16k": 16384}
    for scen, tokens in cfg_scen.items():
        s = load_workload(f"{name}:{scen}").scenario
        assert (s.phase, s.tokens) == ("prefill", tokens)
    d = load_workload(name, "decode_2k").scenario
    assert (d.phase, d.tokens, d.decode_steps) == ("decode", 2048, 4)


def test_unknown_scenario():
    with pytest.raises(ConfigError, match="no scenario 'prefill_3k' in workload 'llama-3-8b'"):
        load_workload("llama-3-8b", "prefill_3k")


# ------------------------------------------------------------------ the RTL's cycle counts


def _cycles_rows():
    with open(ROOT / "rtl" / "hbq" / "cycles.csv", newline="") as f:
        return list(csv.DictReader(f))


def _params(text):
    return dict(kv.split("=") for kv in text.split(";") if kv)


def test_shipped_pe_and_psum_latencies_equal_the_rtl():
    rows = _cycles_rows()
    pe = {(_params(r["params"])["UB"], r["simulator"]): r for r in rows if r["block"] == "hbq_pe"}
    psum16 = [r for r in rows if r["block"] == "hbq_psum_unit" and "SA_N=16" in r["params"]]
    add = [r for r in rows if r["block"] == "hbq_fp16_add"]
    assert pe and psum16 and add
    for name, ub in (("hbq_e_28nm", "32"), ("hbq_a_28nm", "8")):
        a = load_arch(name)
        for (u, _sim), r in pe.items():
            if u == ub:
                assert a.pe_array.latency_cycles == int(r["latency_cycles"]), name
                assert a.pe_array.ii_cycles == int(r["ii_cycles"]), name
        for r in psum16:
            assert a.psum.unit_latency_cycles == int(r["latency_cycles"])
            assert a.psum.unit_ii_cycles == int(r["ii_cycles"])
    # FP16 partial sums: the combinational FP16 adder plus the write-back register.
    for name in ARCH_NAMES:
        a = load_arch(name)
        if a.psum.mode == "fp16":
            assert a.psum.unit_latency_cycles == int(add[0]["latency_cycles"]) + 1, name


def _rtl_array_arch(n_pe: int, ub: int, psum_mode: int, pe_latency: int, unit_latency: int):
    """The shipped HBQ architecture with the RTL hbq_array's parameters: N_PE PEs, one MXINT8
    block per N_PE channels, no broadcast stages, one 1R1W partial-sum RAM."""
    base = load_arch("hbq_e_28nm" if ub == 32 else "hbq_a_28nm")
    return override(
        base,
        {
            "pe_array.n_pes": n_pe,
            "pe_array.latency_cycles": pe_latency,
            "pe_array.broadcast_stages": 0,
            "psum.block_elems": n_pe,
            "psum.mode": "mxint8_running" if psum_mode == 1 else "fp16",
            "psum.unit_latency_cycles": unit_latency,
            "buffers.psum.banks": 1,
            "buffers.psum.ports": 2,
            "buffers.psum.bank_width_bits": 16 * n_pe,
            "tiling.tile_n_channels": 8 * n_pe,
            "tiling.tile_m_tokens": 16,
        },
    )


def test_tile_model_reproduces_the_rtl_array_cycles():
    rows = _cycles_rows()
    pe_lat = {int(r["latency_cycles"]) for r in rows if r["block"] == "hbq_pe"}
    (pe_latency,) = pe_lat
    unit = {
        1: int(next(r for r in rows if r["block"] == "hbq_psum_unit")["latency_cycles"]),
        0: int(next(r for r in rows if r["block"] == "hbq_fp16_add")["latency_cycles"]) + 1,
    }
    first = {r["params"]: r for r in rows if r["block"] == "hbq_array"}
    tile = {r["params"]: r for r in rows if r["block"] == "hbq_array_tile"}
    assert first and set(first) == set(tile)
    for params, r in first.items():
        p = _params(params)
        n_pe, ub, mode = int(p["N_PE"]), int(p["UB"]), int(p["PSUM_MODE"])
        m, kb = int(p["M"]), int(p["KB"])
        assert int(p["B"]) == 128 and int(p.get("TOK_DEPTH", m)) >= m
        a = _rtl_array_arch(n_pe, ub, mode, pe_latency, unit[mode])
        hw = hw_params(a)
        fa = next(f for f in hw.act_formats if f.startswith("hbq"))
        for model in (pe_tile_cycles, pe_tile_closed_form):
            t = model(hw, m, n_pe, kb * 128, has_psum_read=False, fmt_a=fa, fmt_b=fa)
            assert t.first_result == int(r["latency_cycles"]), (params, model.__name__)
            assert t.last_result == int(tile[params]["latency_cycles"]), (params, model.__name__)
            assert t.occupancy == int(tile[params]["ii_cycles"]), (params, model.__name__)
        # Results leave one per cycle (hbq_array ii): the last comes m - 1 after the first.
        assert t.last_result - t.first_result == (m - 1) * int(r["ii_cycles"])


def test_validate_reads_only_the_fields_it_declares():
    """``VALIDATE_READS`` lets a sweep share one check among designs that differ elsewhere
    (the clock, the DRAM): on every shipped design, and on designs that fail its rules,
    ``validate()`` reads no other field."""
    import copy
    import dataclasses

    from coaccel.sim.hbq_asic.config import HbqArchConfig, _shipped_arch_names

    fields = {f.name for f in dataclasses.fields(HbqArchConfig)}
    seen: set[str] = set()

    class Recording(HbqArchConfig):
        def __getattribute__(self, name: str):
            if name in fields:
                seen.add(name)
            return object.__getattribute__(self, name)

    def with_(cfg, section, **kw):
        return dataclasses.replace(
            cfg, **{section: dataclasses.replace(getattr(cfg, section), **kw)}
        )

    base = load_arch("hbq_e_28nm")
    broken = [
        with_(base, "psum", block_elems=3),
        with_(base, "tiling", tile_n_channels=24),
        with_(base, "buffers", psum=dataclasses.replace(base.buffers.psum, banks=1)),
        with_(base, "buffers", psum=dataclasses.replace(base.buffers.psum, size_kib=1)),
    ]
    for i, cfg in enumerate([load_arch(n) for n in _shipped_arch_names()] + broken):
        rec = copy.copy(cfg)
        object.__setattr__(rec, "__class__", Recording)
        want = cfg.validate()
        assert [str(p) for p in rec.validate()] == [str(p) for p in want]
        if cfg in broken:
            assert want, i  # it breaks a rule: the checks after it ran too
    assert seen and seen <= set(HbqArchConfig.VALIDATE_READS), seen
