"""One whole decode step of a model on a GPU (coaccel.sim.gpu_mem.decode_step, coaccel gpu-step)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coaccel.sim.gpu_mem import load_arch
from coaccel.sim.gpu_mem.decode_step import EXEC_MODES, decode_step
from coaccel.spine.hf_config import load_hf_model, parameter_counts

HF = Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def _model(name: str):
    return load_hf_model(next((HF / name).glob("*.json")))


@pytest.fixture(scope="module")
def a100():
    return load_arch("a100_80g")


def _bytes(step, *classes):
    return sum(k.dram_bytes * k.count for k in step.kernels if k.cls in classes)


def test_dense_step_reads_every_weight_once(a100):
    """At batch 1 the projections read the parameters the published count has, once."""
    hf = _model("meta-llama-3-8b")
    c = parameter_counts(hf)
    step = decode_step(a100, hf.shape, 1024, 1)
    weights = 2 * c.active_without_input_embedding  # bf16; the norms are 0.003 % of it
    assert weights <= _bytes(step, "gemm") <= weights * 1.001


def test_kv_reads_are_the_cache_of_every_request(a100):
    m = _model("meta-llama-3-8b").shape
    ctx = [300, 5000, 12000]
    step = decode_step(a100, m, ctx)
    kv = sum(t + 1 for t in ctx) * m.layers * 2 * m.kv_heads * m.head_dim * 2
    got = _bytes(step, "attention")
    assert kv <= got <= kv * 1.02  # plus q, partial outputs and the reduction's traffic
    assert step.contexts == tuple(ctx) and step.batch == 3


def test_moe_reads_the_experts_a_token_uses(a100):
    """DeepSeek-V2-Lite at batch 1: MLA and 6 of 64 routed experts plus 2 shared ones."""
    hf = _model("deepseek-v2-lite")
    c = parameter_counts(hf)
    step = decode_step(a100, hf.shape, 512, 1)
    active = 2 * c.active_without_input_embedding
    assert active * 0.999 <= _bytes(step, "gemm", "moe_route") <= active * 1.002
    # MLA's cache: one latent of kv_lora_rank + rope elements per token and layer
    m = hf.shape
    latent = 513 * m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * 2
    assert latent <= _bytes(step, "attention") <= latent * 1.05
    # a large batch touches every expert: the whole model is read once, plus the batch's
    # activations in and out of each GEMM (about 2 % at 128 tokens)
    big = _bytes(decode_step(a100, hf.shape, 16, 128), "gemm", "moe_route")
    assert 2 * (c.total - c.embedding) <= big <= 2 * (c.total - c.embedding) * 1.05


def test_sliding_window_layers_read_at_most_the_window(a100):
    m = _model("gemma-2-2b-it").shape
    long = decode_step(a100, m, 32000, 1)
    full = m.layers * 2 * m.kv_heads * m.head_dim * 2
    windowed = len(m.sliding_window_layers)
    expect = ((m.layers - windowed) * 32001 + windowed * m.sliding_window_tokens) * full
    assert expect / m.layers <= _bytes(long, "attention") <= expect / m.layers * 1.02


def test_modes_order_and_host_time(a100):
    m = _model("meta-llama-3-8b").shape
    steps = {name: decode_step(a100, m, 512, 1, mode=name) for name in EXEC_MODES}
    assert steps["graph"].step_s < steps["eager"].step_s < steps["python"].step_s
    for name, s in steps.items():
        mode = EXEC_MODES[name]
        n = sum(k.count for k in s.kernels)
        assert s.host_s == pytest.approx(mode.step_host_us * 1e-6 + n * mode.host_us_per_kernel
                                         * 1e-6)  # fmt: skip
        assert s.step_s >= max(s.host_s, s.device_s) - 1e-12
    # unfused operators: more kernels in python mode, the same weights
    n_graph = sum(k.count for k in steps["graph"].kernels)
    assert sum(k.count for k in steps["python"].kernels) > 2 * n_graph
    assert _bytes(steps["python"], "gemm") == _bytes(steps["graph"], "gemm")


def test_uniform_batch_and_order_do_not_matter(a100):
    m = _model("meta-llama-3-8b").shape
    a = decode_step(a100, m, 2048, 4)
    b = decode_step(a100, m, [2048] * 4)
    assert a.step_s == b.step_s and a.dram_bytes == b.dram_bytes
    c = decode_step(a100, m, [100, 7000, 3000])
    d = decode_step(a100, m, [3000, 100, 7000])
    assert c.step_s == d.step_s
    assert decode_step(a100, m, 8000, 8).step_s > decode_step(a100, m, 1000, 8).step_s
    assert decode_step(a100, m, 1000, 1).tokens_per_s < decode_step(a100, m, 1000, 8).tokens_per_s


def test_faster_memory_is_faster_and_energy_is_dram_bytes(a100):
    m = _model("meta-llama-3-8b").shape
    h200 = load_arch("h200")
    s1, s2 = decode_step(a100, m, 4096, 16), decode_step(h200, m, 4096, 16)
    assert s2.step_s < s1.step_s
    assert s1.energy_j == pytest.approx(s1.dram_bytes * a100.dram.energy_pj_per_byte * 1e-12)


def test_bad_inputs(a100):
    m = _model("meta-llama-3-8b").shape
    with pytest.raises(ValueError, match="at least one request"):
        decode_step(a100, m, [])
    with pytest.raises(ValueError, match="context >= 1"):
        decode_step(a100, m, [0])
    with pytest.raises(ValueError, match="valid choices"):
        decode_step(a100, m, 10, 1, mode="turbo")
    with pytest.raises(ValueError, match="batch=2 but 3"):
        decode_step(a100, m, [1, 2, 3], 2)


def test_calibrated_attention_interval(a100):
    """Attention calibrated on measured ops: the interval holds the calibrated TPOT, and the
    rest of the step (GEMMs, norms, RoPE, sampling, host) is the point estimate, unchanged."""
    from coaccel.sim.gpu_mem import intervals as iv

    m = _model("meta-llama-3-8b").shape
    for arch in (a100, load_arch("h200")):
        for mode in EXEC_MODES:
            s = decode_step(arch, m, [1000, 7000], mode=mode)
            c = s.calibrated
            assert c is not None and "Only attention is calibrated" in s.calibration_note
            assert c.step_lower_s <= c.step_s <= c.step_upper_s
            tok = c.tokens_per_s
            assert tok[1] <= tok[0] <= tok[2] and tok[0] == pytest.approx(2 / c.step_s)
            (op,) = c.attention  # one layer kind
            assert op.count == m.layers and op.lower_s <= op.seconds <= op.upper_s
            # T_sim: the attention kernels with the CUDA-graph gap before each
            att = [k for k in s.kernels if k.cls == "attention"]
            gap = iv.load_calibration().graph_gap_us * 1e-6
            assert op.sim_s == pytest.approx(sum(k.seconds + gap for k in att))
            want = iv.calibrated(op.sim_s, arch.sm.freq_mhz, op.regime, iv.fitted_config(arch))
            assert (op.seconds, op.lower_s, op.upper_s) == want
            if mode == "graph":  # no host in the way: exactly attention's bounds summed
                rest = s.step_s - op.count * op.sim_s
                for step, per_op in ((c.step_s, op.seconds), (c.step_lower_s, op.lower_s),
                                     (c.step_upper_s, op.upper_s)):  # fmt: skip
                    assert step - op.count * per_op == pytest.approx(rest, rel=1e-12)
        assert c.gpu_config == ("a100_80g" if arch is a100 else "")
        assert op.regime == "dram"  # a step's KV cache is cold
    # a custom attention and MLA are not what was measured
    from coaccel.sim.gpu_mem.decode_step import flash_attention

    custom = decode_step(a100, m, 512, 1, attention=flash_attention)
    assert custom.calibrated is None and "custom attention" in custom.calibration_note
    mla = decode_step(a100, _model("deepseek-v2-lite").shape, 512, 1)
    assert mla.calibrated is None and "MLA" in mla.calibration_note
    # a library's own fit; an unknown one is refused
    lib = decode_step(a100, m, 512, 1, library="vllm-0.14.0:vllm_flash_attn").calibrated
    assert lib.library == "vllm-0.14.0:vllm_flash_attn" and lib.step_s != c.step_s
    with pytest.raises(ValueError, match="no calibrated kernel library 'xformers'"):
        decode_step(a100, m, 512, 1, library="xformers")


def test_a_library_is_launched_as_it_launches(a100):
    """``library=``: the attention is that library's launch on the GPU (the one its fit was
    made on), the pooled fit keeps the package's; the requests' kernels equal the batch's
    launch traced whole."""
    from coaccel.models.gpu import DecodeShape, plan_library_launch, split_k_trace
    from coaccel.sim.gpu_mem.decode_step import library_attention
    from coaccel.sim.gpu_mem.traffic import kernel_traffic

    m = _model("meta-llama-3-8b").shape
    h200 = load_arch("h200")
    want = {
        (a100, "vllm-0.14.0:vllm_flash_attn"): "fa2_varlen",
        (a100, "sglang-0.5.10:flash_attention"): "fa3_sm8x",
        (h200, "vllm-0.14.0:vllm_flash_attn"): "fa3_sm90",
        (a100, "trtllm-1.3.0rc20:torch_flow"): "flashdecode",  # its kernels: not modelled
        (a100, None): "flashdecode",
    }
    for (arch, lib), kind in want.items():
        s = decode_step(arch, m, 4096, 16, library=lib)
        assert s.calibrated is not None and s.calibrated.launch == kind
        names = [k.name for k in s.kernels if k.cls == "attention"]
        assert names[0] == "attention_flash_decode_split"
    # the package's launch has its reduction kernel; FlashAttention-3's batch 16 x 4K: one
    # split per sequence, so no combine kernel
    sgl = decode_step(a100, m, 4096, 16, library="sglang-0.5.10:flash_attention")
    assert [k.name for k in sgl.kernels if k.cls == "attention"] == ["attention_flash_decode_split"]
    # the traced requests add up to the batch's launch traced whole (below the traced length)
    for kind in ("fa2_varlen", "fa3_sm8x", "fa2_kvcache"):
        launch = plan_library_launch(DecodeShape(4, 1024, 32, 8), kind, n_sms=108)
        whole = kernel_traffic(split_k_trace(launch.plan, combine=launch.combine,
                                             combine_rows_per_cta=launch.combine_rows_per_cta,
                                             combine_stages=max(launch.combine_stages, 1)),
                               a100, fidelity="analytical")  # fmt: skip
        got = library_attention(kind, 80)(a100, 32, 8, 128, (1024,) * 4)
        assert len(got) == len(whole)
        for w, g in zip(whole, got, strict=True):
            for f in ("ctas", "sector_requests", "l2_hits", "dram_read_bytes", "dram_write_bytes",
                      "tensor_flop", "chain_seconds"):  # fmt: skip
                assert getattr(g, f) == pytest.approx(getattr(w, f), rel=1e-12), (kind, f)
    with pytest.raises(ValueError, match="kind='flashdecode'; valid: fa2_varlen"):
        library_attention("flashdecode", 80)


def test_parallel_requests_do_not_lengthen_a_ctas_chain(a100):
    """n requests of one context run their CTAs side by side: the reduction's chain of
    dependent loads is one request's, not n times it."""
    from coaccel.sim.gpu_mem.decode_step import flash_attention

    one = flash_attention(a100, 32, 8, 128, (1024,))
    many = flash_attention(a100, 32, 8, 128, (1024,) * 16)
    assert [k.chain_seconds for k in many] == [k.chain_seconds for k in one]
    assert many[1].ctas == 16 * one[1].ctas  # ... though 16 times its CTAs


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COACCEL_DEBUG"}
    return subprocess.run([sys.executable, "-m", "coaccel.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


def test_command():
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--batch", "2", "--context",
                "4096", "--mode", "all", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [s["mode"] for s in doc["steps"]] == ["graph", "eager", "python"]
    assert doc["steps"][0]["contexts"] == [4096, 4096]
    assert doc["steps"][0]["tpot_ms"] < doc["steps"][2]["tpot_ms"]
    for st in doc["steps"]:
        cal = st["calibrated"]
        assert cal["tpot_ms_lower"] <= cal["tpot_ms"] <= cal["tpot_ms_upper"]
        assert cal["tokens_per_s_lower"] <= cal["tokens_per_s"] <= cal["tokens_per_s_upper"]
        assert cal["half_widths"] == "held-out" and cal["library"] == "(pooled)"
        assert "Only attention is calibrated" in st["calibration_note"]
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "a100_80g", "--batch", "2", "--context",
                "4096")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "TPOT ms [90 % interval]" in out and "tokens/s [90 % interval]" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("graph") and "[" in ln)
    nums = [float(x) for x in re.findall(r"[\d.]+", line)]
    tpot, tps = nums[:3], nums[3:]  # value [lower, upper] twice
    assert tpot[1] <= tpot[0] <= tpot[2] and tps[1] <= tps[0] <= tps[2]
    assert tps[0] == pytest.approx(2 / tpot[0] * 1e3, rel=1e-3)
    assert "a100_80g, a GPU in the fit" in out and "Only attention is calibrated" in out
    assert "point estimates" in out
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--contexts", "5,x")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--contexts" in r.stderr
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--contexts", "5", "--batch", "2")
    assert r.returncode == 2 and "not both" in r.stderr
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--weight-bytes", "nan")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "0.25..4" in r.stderr
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--batch", "2", "--library",
                "VLLM-0.14.0:vllm_flash_attn", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)["steps"][0]["calibrated"]
    assert (cal["library"], cal["launch"]) == ("vllm-0.14.0:vllm_flash_attn", "fa3_sm90")
    r = run_cli("gpu-step", "llama-3.1-8b", "--gpu", "h200", "--library", "xformers")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--library: no calibrated kernel library 'xformers'" in r.stderr
