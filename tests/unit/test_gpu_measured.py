"""``coaccel validate gpu --measured``: the measured decode-attention CSV, the warm-L2 switch, the
per-library calibration, the conformal intervals and the command line.

Most cases run the fit on a stand-in simulator (a row's KV bytes over a fixed bandwidth) so that
they take milliseconds; the warm-L2 and command-line cases run the real analytical simulator on
small shapes."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coaccel.cli import main
from coaccel.spine.errors import CoaccelError
from coaccel.targets.gpu import measured as mm
from coaccel.targets.gpu.measured_report import PREDICTED_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "arch_configs" / "gpu" / "measured" / "decode_attention_measured.csv"
HEADER = ",".join(mm.MEASURED_COLUMNS)

# stand-in simulator: KV bytes / bandwidth (B/us), regime by size, the configs' SM clocks
_BW = {"a100_80g": 1.7e6, "l40s": 0.8e6, "h100_sxm": 3.0e6, "h200": 3.9e6}
_MHZ = {"a100_80g": 1410.0, "l40s": 2520.0, "h100_sxm": 1980.0, "h200": 1980.0}


def _fake_sim(row: mm.MeasuredRow, arch: str) -> mm.RowSim:
    l2 = row.kv_bytes < 20e6
    return mm.RowSim(sim_us=row.kv_bytes / _BW[arch] + 2.0, regime="l2" if l2 else "dram",
                     l2_hit_fraction=1.0 if l2 else 0.0, num_splits=1, ctas=row.batch,
                     block_n=128, bound="dram", freq_mhz=_MHZ[arch])  # fmt: skip


def _line(
    gpu: str = "A100-SXM4-80GB",
    kernel: str = "libA",
    dtype: str = "bf16",
    batch: object = 4,
    hq: int = 32,
    hkv: int = 8,
    d: int = 128,
    t: int = 1024,
    us: object = 20.0,
) -> str:
    return f"src,{gpu},{kernel},{dtype},{batch},{hq},{hkv},{d},{t},{us},note"


def _write(tmp_path: Path, lines: list[str], name: str = "m.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _evaluate(table: mm.MeasuredTable) -> mm.MeasuredValidation:
    return mm.evaluate_measured(table, simulate=_fake_sim, load_arch=lambda c: c)


# -- the CSV -----------------------------------------------------------------------------------


def test_shipped_csv_reads() -> None:
    t = mm.read_measured_csv(SHIPPED)
    with SHIPPED.open(newline="", encoding="utf-8") as f:
        raw = list(csv.reader(f))
    assert t.header == tuple(raw[0]) and len(t.rows) == len(raw) - 1
    assert [v for _, v in t.rows[0].fields] == raw[1]  # every field kept as written
    assert {mm.gpu_config(r.gpu) for r in t.rows} == {"a100_80g", "l40s"}
    r = t.rows[0]
    assert r.library == r.kernel.lower() and r.measured_us == float(raw[1][9])


@pytest.mark.parametrize(
    ("lines", "expect"),
    [
        (
            [
                "source,gpu,kernel,batch,n_q_heads,n_kv_heads,head_dim,context_len,measured_us,notes",
                "s,L40S,k,1,8,1,128,256,9.0,n",
            ],
            ["line 1", "missing column dtype"],
        ),
        ([HEADER, _line(batch="x")], ["line 2", "column batch", "'x'", "not an integer"]),
        ([HEADER, _line(), _line(t=0)], ["line 3", "column context_len", "'0'", ">= 1"]),
        ([HEADER, _line(us="fast")], ["line 2", "column measured_us", "'fast'", "not a number"]),
        ([HEADER, _line(us=-3.0)], ["line 2", "column measured_us", "'-3.0'", "> 0"]),
        ([HEADER, _line(us="nan")], ["line 2", "column measured_us", "'nan'"]),
        ([HEADER, _line(dtype="fp8")], ["line 2", "column dtype", "'fp8'", "valid: bf16, fp16"]),
        ([HEADER, _line(hq=12, hkv=8)], ["line 2", "column n_q_heads", "'12'", "n_kv_heads=8"]),
        ([HEADER, _line(gpu=" ")], ["line 2", "column gpu", "is empty"]),
        ([HEADER, _line() + ",extra"], ["line 2", "12 fields, expected 11"]),
        ([HEADER], ["no data rows"]),
    ],
)
def test_csv_errors_name_file_line_column_value(
    tmp_path: Path, lines: list[str], expect: list[str]
) -> None:
    p = _write(tmp_path, lines)
    with pytest.raises(CoaccelError) as e:
        mm.read_measured_csv(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p))
    for part in expect:
        assert part in msg, (part, msg)


def test_csv_extra_columns_and_order_are_kept(tmp_path: Path) -> None:
    cols = ["extra", *reversed(mm.MEASURED_COLUMNS)]
    rec = {"extra": "x1", "source": "s", "gpu": "l40s", "kernel": "K", "dtype": "FP16",
           "batch": "2", "n_q_heads": "8", "n_kv_heads": "2", "head_dim": "64",
           "context_len": "300", "measured_us": "12.5", "notes": "a, b"}  # fmt: skip
    p = tmp_path / "m.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow(rec)
    t = mm.read_measured_csv(p)
    (r,) = t.rows
    assert t.header == tuple(cols) and dict(r.fields) == rec
    assert (r.dtype, r.batch, r.n_q_heads, r.n_kv_heads, r.head_dim, r.context_len) == (
        "fp16", 2, 8, 2, 64, 300)  # fmt: skip
    assert r.kv_bytes == 2 * 2 * 300 * 2 * 64 * 2


# -- GPU names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "config"),
    [("A100-SXM4-80GB", "a100_80g"), ("a100-sxm4-80gb", "a100_80g"), ("A100-SXM4-40GB", "a100_40g"),
     ("H100-SXM", "h100_sxm"),
     ("H100-SXM5-80GB", "h100_sxm"), ("h200-sxm", "h200"), ("H200", "h200"), (" L40S ", "l40s"),
     ("L40", None), ("MI300X", None), ("A100-PCIE-40GB", None)],
)  # fmt: skip
def test_gpu_names(name: str, config: str | None) -> None:
    assert mm.gpu_config(name) == config


def test_every_mapped_config_is_shipped() -> None:
    from coaccel.sim.gpu_mem import ARCH_NAMES

    assert set(mm.GPU_CONFIGS.values()) <= set(ARCH_NAMES)
    assert mm.NEVER_FITTED <= set(mm.GPU_CONFIGS.values())


def test_unknown_gpu_is_skipped_not_simulated(tmp_path: Path) -> None:
    lines = [HEADER] + [_line(batch=b, us=20.0 + b) for b in (1, 2, 4, 8)]
    lines.append(_line(gpu="MI300X", batch=3, us=50.0))
    t = mm.read_measured_csv(_write(tmp_path, lines))
    seen: list[str] = []

    def sim(row: mm.MeasuredRow, arch: str) -> mm.RowSim:
        seen.append(row.gpu)
        return _fake_sim(row, arch)

    v = mm.evaluate_measured(t, simulate=sim, load_arch=lambda c: c)
    last = v.predictions[-1]
    assert last.fit_role == "skipped" and last.gpu_config == "" and last.sim is None
    assert math.isnan(last.predicted_us) and "MI300X" not in seen
    assert any("'MI300X'" in n and "skipped" in n for n in v.notes)
    assert all(p.fit_role == "calibration" for p in v.predictions[:-1])


def test_oversized_op_is_refused_before_simulation(tmp_path: Path) -> None:
    lines = [HEADER, _line(batch=1, t=256), _line(batch=4096, hq=64, hkv=64, t=131072)]
    t = mm.read_measured_csv(_write(tmp_path, lines))
    with pytest.raises(CoaccelError, match=r"line 3: 268435456 K/V tiles .* at most 2097152"):
        mm.evaluate_measured(t)


# -- the warm-L2 switch (real simulator) -------------------------------------------------------


def _row(batch: int, context: int, hq: int = 32, hkv: int = 8) -> mm.MeasuredRow:
    return mm.MeasuredRow(line=2, fields=(), gpu="A100-SXM4-80GB", kernel="k", dtype="bf16",
                          batch=batch, n_q_heads=hq, n_kv_heads=hkv, head_dim=128,
                          context_len=context, measured_us=1.0)  # fmt: skip


def test_warm_l2_changes_time_only_when_the_kv_fits() -> None:
    from coaccel.sim.gpu_mem import load_arch, simulate
    from coaccel.targets.gpu.ffd import graph_mode

    arch = load_arch("a100_80g")
    cap = arch.l2.effective_capacity_mib * 2**20
    small, big = _row(1, 1024), _row(4, 4096)
    assert small.kv_bytes < cap / 4 and big.kv_bytes > 2 * cap
    for row, fits in ((small, True), (big, False)):
        a = graph_mode(arch, 1.0)
        cold = simulate(a, mm.decode_trace(row, a, replayed=False))
        warm = simulate(a, mm.decode_trace(row, a, replayed=True))
        k_cold, k_warm = cold.kernels[0], warm.kernels[0]
        assert k_cold.sector_requests == k_warm.sector_requests
        if fits:  # every sector hits; nothing is read from DRAM
            assert k_warm.l2_hits == k_warm.sector_requests > k_cold.l2_hits
            assert warm.offchip.read_bytes == 0 < cold.offchip.read_bytes
            assert warm.seconds < cold.seconds
        else:
            assert warm.seconds == cold.seconds
            assert warm.offchip.read_bytes == cold.offchip.read_bytes >= row.kv_bytes
    s_small = mm.simulate_row(small, arch)
    s_big = mm.simulate_row(big, arch)
    assert (s_small.regime, s_big.regime) == ("l2", "dram")
    assert s_small.freq_mhz == arch.sm.freq_mhz


def test_warm_l2_cycle_tier_agrees_with_analytical() -> None:
    from coaccel.sim.gpu_mem import load_arch, simulate

    arch = load_arch("a100_80g")
    row = _row(1, 1024)
    for replayed in (False, True):
        trace = mm.decode_trace(row, arch, replayed=replayed)
        a, c = (simulate(arch, trace, mode=m) for m in ("analytical", "cycle"))
        assert c.kernels[0].l2_hits == a.kernels[0].l2_hits
        assert c.offchip.read_bytes == a.offchip.read_bytes
        assert c.seconds == pytest.approx(a.seconds, rel=0.05)
        assert (c.offchip.read_bytes == 0) is replayed  # the second replay reads no DRAM


def test_block_n_fits_shared_memory() -> None:
    from coaccel.sim.gpu_mem import load_arch

    arch = load_arch("l40s")
    row = mm.MeasuredRow(line=2, fields=(), gpu="L40S", kernel="k", dtype="bf16", batch=1,
                         n_q_heads=16, n_kv_heads=8, head_dim=256, context_len=512,
                         measured_us=1.0)  # fmt: skip
    tr = mm.decode_trace(row, arch)
    wl = tr.meta["workload"]
    assert wl["block_n"] == 64 and wl["replayed"] is True and wl["kv_page_tokens"] == 64
    assert mm.simulate_row(row, arch).sim_us > 0  # the CTA fits an L40S SM


# -- the calibration ---------------------------------------------------------------------------


def test_fit_recovers_known_floor_and_efficiency() -> None:
    rows = [_row(b, t) for b in (1, 4, 16) for t in (256, 2048, 8192)]
    floor_kcyc, eff = 21.5, 0.83
    sims = [_fake_sim(r, g) for r in rows for g in ("a100_80g", "l40s")]
    meas = [floor_kcyc * 1000 / s.freq_mhz + s.sim_us / eff for s in sims]
    p = mm.fit_library("x", meas, sims)
    assert p.floor_kcycles == pytest.approx(floor_kcyc, rel=1e-9)
    assert p.efficiency == pytest.approx(eff, rel=1e-9)
    assert p.predict_us(sims[3]) == pytest.approx(meas[3], rel=1e-9)
    # a negative floor is not physical: the fit keeps it at 0
    q = mm.fit_library("y", [s.sim_us / 0.9 - 1.0 for s in sims], sims)
    assert q.floor_kcycles == 0.0 and q.efficiency > 0


def test_fit_recovers_per_regime_efficiencies() -> None:
    rows = [_row(b, t) for b in (1, 4, 16) for t in (256, 2048, 8192)]
    sims = [_fake_sim(r, g) for r in rows for g in ("a100_80g", "l40s")]
    assert {s.regime for s in sims} == {"dram", "l2"}
    eff = {"dram": 0.85, "l2": 0.6}
    meas = [20.0 * 1000 / s.freq_mhz + s.sim_us / eff[s.regime] for s in sims]
    p = mm.fit_library("x", meas, sims, efficiency_form="regime")
    assert p.floor_kcycles == pytest.approx(20.0, rel=1e-9)
    assert (p.efficiency, p.efficiency_l2) == (pytest.approx(0.85, rel=1e-9),
                                               pytest.approx(0.6, rel=1e-9))  # fmt: skip
    assert all(
        p.predict_us(s) == pytest.approx(m, rel=1e-9) for s, m in zip(sims, meas, strict=True)
    )
    # one efficiency cannot fit both regimes
    assert mm.fit_library("x", meas, sims).predict_us(sims[0]) != pytest.approx(meas[0])
    # a library whose rows are of one regime: both regimes take its one efficiency
    dram = [i for i, s in enumerate(sims) if s.regime == "dram"]
    q = mm.fit_library("y", [meas[i] for i in dram], [sims[i] for i in dram],
                       efficiency_form="regime")  # fmt: skip
    assert q.efficiency_l2 == q.efficiency == pytest.approx(0.85, rel=1e-9)
    with pytest.raises(ValueError, match="efficiency_form='both'; valid: single, regime"):
        mm.fit_library("z", meas, sims, efficiency_form="both")  # type: ignore[arg-type]


def test_evaluation_forms(tmp_path: Path) -> None:
    t = _two_gpu_table(tmp_path)
    v = _evaluate(t)
    assert (v.launch, v.efficiency_form) == (mm.DEFAULT_LAUNCH, mm.DEFAULT_EFFICIENCY_FORM)
    assert v.calibration is not None and v.calibration.pooled.efficiency_l2 is not None
    one = mm.evaluate_measured(t, simulate=_fake_sim, load_arch=lambda c: c,
                               efficiency_form="single")  # fmt: skip
    assert one.calibration is not None and one.calibration.pooled.efficiency_l2 is None
    with pytest.raises(ValueError, match="launch='xqa'; valid: library, flashdecode"):
        mm.evaluate_measured(t, launch="xqa")  # type: ignore[arg-type]


def test_held_out_rows_of_another_launch_are_noted(tmp_path: Path) -> None:
    vllm = "vllm-0.14.0:vllm_flash_attn"
    extra = [_line(gpu=g, kernel=vllm, batch=b, us=20.0 + b)
             for g in ("A100-SXM4-80GB", "H100-SXM") for b in (1, 2, 4)]  # fmt: skip
    v = _evaluate(_two_gpu_table(tmp_path, extra))
    assert (f"held-out rows of {vllm} on h100_sxm: launch fa3_sm90 (its kernels on that GPU); "
            "its fit was made on fa2_varlen") in v.notes  # fmt: skip
    trt = "trtllm-1.3.0rc20:torch_flow"
    extra = [_line(gpu=g, kernel=trt, batch=b, us=20.0 + b)
             for g in ("L40S", "H100-SXM") for b in (1, 2, 4)]  # fmt: skip
    v = _evaluate(_two_gpu_table(tmp_path, extra))
    assert not [n for n in v.notes if f"held-out rows of {trt}" in n]  # the same launch
    flash = "flashinfer-0.2:decode"  # the package's rule on both GPUs
    extra = [_line(gpu=g, kernel=flash, batch=b, us=20.0 + b)
             for g in ("A100-SXM4-80GB", "H100-SXM") for b in (1, 2, 4)]  # fmt: skip
    v = _evaluate(_two_gpu_table(tmp_path, extra))
    assert not [n for n in v.notes if f"held-out rows of {flash}" in n]
    assert not [n for n in _evaluate(_two_gpu_table(tmp_path)).notes if "held-out rows" in n]


def _two_gpu_table(tmp_path: Path, extra: list[str] = ()) -> mm.MeasuredTable:  # type: ignore[assignment]
    lines = [HEADER]
    rng = np.random.default_rng(0)
    for gpu, kernel, floor_us, eff, bw in (("A100-SXM4-80GB", "libA", 18.0, 0.85, 1.7e6),
                                           ("L40S", "libB", 9.0, 0.8, 0.8e6)):  # fmt: skip
        for b, t, hkv in itertools.product((1, 4, 16, 64), (256, 1024, 4096, 16384), (1, 8)):
            kv = 2 * b * t * hkv * 128 * 2
            us = (floor_us + (kv / bw + 2.0) / eff) * math.exp(rng.normal(0, 0.05))
            lines.append(_line(gpu=gpu, kernel=kernel, batch=b, hq=8 * hkv, hkv=hkv, t=t,
                               us=round(us, 4)))  # fmt: skip
    return mm.read_measured_csv(_write(tmp_path, lines + list(extra)))


def test_intervals_contain_prediction_and_coverage_is_measured(tmp_path: Path) -> None:
    v = _evaluate(_two_gpu_table(tmp_path))
    cal = [p for p in v.predictions if p.fit_role == "calibration"]
    assert len(cal) == 64 and v.calibration is not None
    for p in cal:
        assert 0 < p.lower_us <= p.predicted_us <= p.upper_us < math.inf
        q = v.halfwidths[p.sim.regime]  # type: ignore[union-attr]
        assert p.upper_us == pytest.approx(p.predicted_us * math.exp(q))
        assert 0 < p.logo_lower_us <= p.logo_us <= p.logo_upper_us
        assert p.params == "library" and p.logo_params == "pooled"
    # 5 % log-normal noise: in-sample error small, the LOO coverage near the target
    s = v.in_sample["all"]
    assert s.rows == 64 and s.mape_pct < 8 and 0.75 <= s.coverage <= 1.0
    assert set(v.logo) == {"a100_80g", "l40s", "all"}
    assert set(v.logo_fits) == {"a100_80g", "l40s"}
    assert any("libb" in n and "pooled" in n for n in v.notes)


def test_hopper_rows_are_never_fitted(tmp_path: Path) -> None:
    hopper = [_line(gpu="H100-SXM", kernel="libA", batch=b, us=1e6) for b in (1, 2, 4)]
    v0 = _evaluate(_two_gpu_table(tmp_path))
    v1 = _evaluate(_two_gpu_table(tmp_path, hopper))
    assert v0.calibration == v1.calibration  # absurd Hopper times change nothing
    held = [p for p in v1.predictions if p.fit_role == "held-out"]
    assert len(held) == 3 and all(p.gpu_config == "h100_sxm" for p in held)
    for p in held:
        assert 0 < p.lower_us <= p.predicted_us <= p.upper_us
        assert p.params == "library"  # libA was fitted on the A100
    assert set(v1.held_out) == {"h100_sxm", "all"} and v1.held_out["all"].bias_pct < -99


def test_conformal_halfwidth_is_the_rank_statistic() -> None:
    scores = [(-1) ** k * (k + 1) * 0.01 for k in range(19)]  # |s| = 0.01 .. 0.19
    # (n + 1) * 0.9 = 18: the 18th smallest |score|
    assert mm.conformal_halfwidth(scores, 0.9) == pytest.approx(0.18)
    assert mm.conformal_halfwidth(scores[:5], 0.9) == math.inf  # too few for 90 %


def _tau_b(x: list[float], y: list[float]) -> float:
    conc = disc = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                tx += 1
                ty += 1
            elif dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif dx * dy > 0:
                conc += 1
            else:
                disc += 1
    n0 = len(x) * (len(x) - 1) // 2
    return (conc - disc) / math.sqrt((n0 - tx) * (n0 - ty))


def test_kendall_tau_b() -> None:
    x = [1.0, 2.0, 2.0, 3.0, 5.0, 4.0, 7.0]
    y = [2.0, 1.0, 3.0, 3.0, 6.0, 6.0, 9.0]
    assert mm.kendall_tau(x, y) == pytest.approx(_tau_b(x, y))
    assert mm.kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert mm.kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isnan(mm.kendall_tau([1.0], [2.0]))


def test_error_summary() -> None:
    s = mm.error_summary([10.0, 20.0, 40.0], [11.0, 18.0, 40.0], [9, 19, 41], [12, 21, 50])
    assert s.rows == 3
    assert s.mape_pct == pytest.approx((10 + 10 + 0) / 3)
    assert s.bias_pct == pytest.approx((10 - 10 + 0) / 3)
    assert s.max_ape_pct == pytest.approx(10) and s.median_ape_pct == pytest.approx(10)
    assert s.coverage == pytest.approx(2 / 3) and s.kendall_tau == 1.0


# -- the command line --------------------------------------------------------------------------


def test_cli_writes_predictions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [HEADER]
    for b, t in ((1, 256), (2, 512), (4, 256), (1, 1024)):
        lines.append(_line(gpu="A100-SXM4-80GB", kernel="vllm", batch=b, t=t, us=18 + b + t / 512))
        lines.append(_line(gpu="L40S", kernel="trt", batch=b, t=t, us=9 + b + t / 1024))
    lines.append(_line(gpu="TPU-v5e", batch=1, t=256, us=30.0))
    src = _write(tmp_path, lines, "ops.csv")
    out = tmp_path / "out"
    assert main(["validate", "gpu", "--measured", str(src), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "Fitted per kernel library" in text and "leave one GPU out" in text
    dest = out / "ops_predicted.csv"
    with dest.open(newline="", encoding="utf-8") as f:
        got = list(csv.reader(f))
    assert got[0] == [*mm.MEASURED_COLUMNS, *PREDICTED_COLUMNS]
    assert len(got) == len(lines)
    assert [r[:11] for r in got[1:]] == [next(csv.reader([ln])) for ln in lines[1:]]
    col = {c: i for i, c in enumerate(got[0])}
    for r in got[1:-1]:
        assert r[col["fit_role"]] == "calibration" and r[col["gpu_config"]] in ("a100_80g", "l40s")
        lo, p, hi = (float(r[col[c]]) for c in ("lower_us", "predicted_us", "upper_us"))
        assert lo <= p <= hi and p > 0
    last = got[-1]
    assert last[col["fit_role"]] == "skipped" and last[col["predicted_us"]] == ""
    assert src.read_text(encoding="utf-8") == "\n".join(lines) + "\n"  # input untouched


def test_cold_l2_simulates_a_gpus_rows_without_warm_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cold-l2 a100_80g``: the A100 rows whose KV fits the L2 read it from DRAM (regime
    ``dram``, slower); the L40S rows keep their warm replays."""
    lines = [HEADER]
    for b in (1, 4, 16):  # 0.5-8 MB of KV: every row fits both GPUs' L2
        lines.append(_line(gpu="A100-SXM4-80GB", kernel="vllm", batch=b, t=256, us=18.0 + b))
        lines.append(_line(gpu="L40S", kernel="trt", batch=b, t=256, us=9.0 + b))
    t = mm.read_measured_csv(_write(tmp_path, lines, "ops.csv"))
    warm = mm.evaluate_measured(t)
    cold = mm.evaluate_measured(t, cold_l2=["a100_80g"])
    assert (warm.cold_l2, cold.cold_l2) == ((), ("a100_80g",))
    for w, c in zip(warm.predictions, cold.predictions, strict=True):
        assert w.sim is not None and c.sim is not None and w.sim.regime == "l2"
        if c.gpu_config == "a100_80g":
            assert c.sim.regime == "dram" and c.sim.sim_us > w.sim.sim_us
        else:
            assert c.sim == w.sim
    with pytest.raises(ValueError, match="cold_l2: a100 not a GPU config; valid: a100_40g"):
        mm.evaluate_measured(t, cold_l2=["a100"])
    src = _write(tmp_path, lines, "cli.csv")
    out = tmp_path / "out"
    args = ["validate", "gpu", "--measured", str(src), "--out", str(out), "--quiet"]
    assert main([*args, "--cold-l2", "a100_80g", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cold_l2"] == ["a100_80g"]
    for extra, msg in ((["--cold-l2", "a100,tpu"], "a100, tpu not a GPU config; valid: a100_40g"),
                       (["--cold-l2", "a100_80g", "--write-calibration", str(tmp_path / "c.yaml")],
                        "--cold-l2 is a diagnostic of the measured rows")):  # fmt: skip
        try:
            rc = main([*args, *extra])
        except SystemExit as e:  # argparse refuses a bad option value
            rc = e.code
        assert rc == 2
        assert msg in capsys.readouterr().err
    assert not (tmp_path / "c.yaml").exists()


def test_cli_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    src = _write(tmp_path, [HEADER, _line()], "ops.csv")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(src, out / "ops_predicted.csv")
    with pytest.raises(CoaccelError, match="never writes to a file it was given to read"):
        from coaccel.cli import build_parser
        from coaccel.targets.gpu.commands import run_measured

        run_measured(build_parser().parse_args(
            ["validate", "gpu", "--measured", str(src), "--out", str(out), "--quiet"]))  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_cli_refuses_a_fifo(tmp_path: Path) -> None:
    from coaccel.cli import build_parser
    from coaccel.targets.gpu.commands import run_measured

    fifo = tmp_path / "ops.csv"
    os.mkfifo(fifo)
    args = build_parser().parse_args(
        ["validate", "gpu", "--measured", str(fifo), "--out", str(tmp_path / "o")]
    )
    with pytest.raises(CoaccelError, match=r"is a named pipe \(FIFO\), not a regular file"):
        run_measured(args)
    assert not (tmp_path / "o").exists()  # refused before the output folder is made


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ([HEADER, _line(dtype="fp8")], ["line 2", "column dtype", "'fp8'"]),
        (["gpu,kernel", "x,y"], ["line 1", "missing columns"]),
        (None, ["--measured", "no such file"]),
    ],
)
def test_cli_bad_csv_exits_2_with_one_line(
    tmp_path: Path, content: list[str] | None, expect: list[str]
) -> None:
    src = tmp_path / "bad.csv" if content is None else _write(tmp_path, content, "bad.csv")
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("COACCEL_DEBUG", None)
    r = subprocess.run(
        [sys.executable, "-m", "coaccel.cli", "validate", "gpu", "--measured", str(src),
         "--out", str(out)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, lines
    for part in expect:
        assert part in lines[0], (part, lines[0])
    assert not (out / "bad_predicted.csv").exists()
