"""``coaccel gpu-step MODEL --gpu NAME``: one whole decode step of a model on a GPU.

Times every kernel of one decode step of a model workload (a shipped name, a workload YAML or
one written by ``coaccel workload import``) for a batch of requests with the analytical kernel
model and the execution mode's host (:func:`coaccel.sim.gpu_mem.decode_step.decode_step`), and
prints time per output token, tokens/s, the host's share, DRAM traffic, DRAM energy per token
and the time and bytes per kernel class, then TPOT and tokens/s with the attention calibrated
on measured decode-attention ops and their 90 % intervals (only attention is calibrated; the
output says so).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coaccel.commands.args import comma_list, int_in

EPILOG = """\
examples:
  coaccel gpu-step llama-3.1-8b --gpu h200 --batch 16 --context 16384
  coaccel gpu-step llama-3.1-8b --gpu a100_80g --contexts 512,4096,16384 --mode all
  coaccel gpu-step my_model.yaml --gpu h100_sxm --batch 1 --context 2048 --json
  coaccel gpu-step llama-3.1-8b --gpu a100_80g --batch 16 --library vllm-0.14.0:vllm_flash_attn
"""

MODES = ("graph", "eager", "python")


def register(subparsers: Any) -> None:
    """Add the ``gpu-step`` sub-command.

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "gpu-step",
        help="time one whole decode step of a model on a GPU (TPOT, tokens/s, per kernel class)",
        description=(
            "Every kernel of one decode step of a model (projections, RoPE and KV append, "
            "split-K attention, MLP or MoE experts, norms, LM head, sampling) for a batch of "
            "requests, timed by the analytical kernel model behind the host that launches "
            "them: CUDA-graph replay, eager launch from a framework, or Python-eager "
            "(Hugging Face generate style). Host costs per kernel are assumptions, not fitted "
            "(see docs/gpu_step.md). Then TPOT and tokens/s with the attention calibrated on "
            "measured decode-attention ops, with 90 % intervals (only attention is "
            "calibrated; docs/gpu_measured.md)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="model workload: a shipped name (coaccel workload list) or YAML")
    p.add_argument("--gpu", required=True, help="GPU config: a shipped name or a YAML path")
    p.add_argument("--batch", type=int_in(1, 4096), default=None, metavar="B",
                   help="requests in the batch (default: the scenario's, else 1)")  # fmt: skip
    p.add_argument("--context", type=int_in(1, 2**24), default=None, metavar="T",
                   help="tokens in every request's KV cache (default: the scenario's, else "
                   "1024)")  # fmt: skip
    p.add_argument("--contexts", default=None, metavar="T,T,...",
                   help="each request's KV length instead of --batch/--context")  # fmt: skip
    p.add_argument("--mode", choices=(*MODES, "all"), default="graph",
                   help="execution mode (default graph; all: the three side by side)")  # fmt: skip
    p.add_argument("--weight-bytes", type=_weight_bytes, default=2.0, metavar="B",
                   help="bytes per weight element, 0.25..4 (2 bf16, 1 FP8, 0.5625 4-bit "
                   "with scales)")  # fmt: skip
    p.add_argument("--library", default=None, metavar="KEY",
                   help="calibrate the attention with this kernel library's fit and launch it "
                   "as that library does on the GPU (a library of the shipped calibration, "
                   "e.g. vllm-0.14.0:vllm_flash_attn; default: the pooled fit and the "
                   "package's launch; docs/gpu_step.md)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the steps as JSON")
    p.set_defaults(func=run, command="gpu-step")


def _weight_bytes(text: str) -> float:
    """``--weight-bytes``: a finite number of bytes per weight element in 0.25 .. 4."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.25 <= v <= 4:
        raise argparse.ArgumentTypeError(f"expected bytes per weight in 0.25..4, got {text!r}")
    return v


def _contexts(args: argparse.Namespace, scenario: Any) -> list[int]:
    from coaccel.spine.errors import CoaccelError

    if args.contexts is not None:
        if args.batch is not None or args.context is not None:
            raise CoaccelError("give --contexts, or --batch and --context, not both")
        out = []
        for t in comma_list(args.contexts, "--contexts"):
            try:
                v = int(t)
            except ValueError:
                v = 0
            if not 1 <= v <= 2**24:
                raise CoaccelError(f"--contexts entry {t!r} is not a token count in 1..16777216")
            out.append(v)
        return out
    decode = scenario is not None and scenario.phase == "decode"
    batch = args.batch or (scenario.batch if decode else 1)
    context = args.context or (scenario.tokens if decode else 1024)
    return [context] * batch


def _calibrated_doc(step: Any) -> dict[str, Any] | None:
    c = step.calibrated
    if c is None:
        return None
    tok = c.tokens_per_s
    att = c.attention_s
    return {
        "tpot_ms": c.step_s * 1e3, "tpot_ms_lower": c.step_lower_s * 1e3,
        "tpot_ms_upper": c.step_upper_s * 1e3, "tokens_per_s": tok[0],
        "tokens_per_s_lower": tok[1], "tokens_per_s_upper": tok[2],
        "attention_ms": att[0] * 1e3, "attention_ms_lower": att[1] * 1e3,
        "attention_ms_upper": att[2] * 1e3, "library": c.library or "(pooled)",
        "launch": c.launch,
        "half_widths": "in-fit" if c.gpu_config else "held-out",
        "attention": [
            {"layers": a.layers, "count": a.count, "regime": a.regime, "sim_us": a.sim_s * 1e6,
             "us": a.seconds * 1e6, "us_lower": a.lower_s * 1e6, "us_upper": a.upper_s * 1e6}
            for a in c.attention
        ],
    }  # fmt: skip


def _doc(step: Any) -> dict[str, Any]:
    return {
        "gpu": step.arch, "mode": step.mode, "batch": step.batch,
        "contexts": list(step.contexts), "tpot_ms": step.tpot_s * 1e3,
        "tokens_per_s": step.tokens_per_s, "device_ms": step.device_s * 1e3,
        "host_ms": step.host_s * 1e3, "dram_gb": step.dram_bytes / 1e9,
        "l2_hit_gb": step.l2_bytes / 1e9, "host_link_gb": step.host_bytes / 1e9,
        "dram_energy_mj_per_token": step.energy_j_per_token * 1e3,
        "by_class": {k: {"ms": s * 1e3, "dram_gb": b / 1e9} for k, (s, b) in
                     step.by_class().items()},
        "calibrated": _calibrated_doc(step), "calibration_note": step.calibration_note,
    }  # fmt: skip


def _calibrated_text(steps: list[Any]) -> list[str]:
    """TPOT and tokens/s with the attention calibrated, and their 90 % intervals."""
    import textwrap

    c = steps[0].calibrated
    if c is None:
        return ["", textwrap.fill(steps[0].calibration_note, 100)]
    where = (f"{c.gpu_config}, a GPU in the fit" if c.gpu_config
             else f"{steps[0].arch}, a GPU the fit did not see: held-out widths")  # fmt: skip
    regimes = "/".join(sorted({a.regime for a in c.attention}))
    head = (f"attention calibrated on measured ops ({c.library or 'pooled fit'}, launch "
            f"{c.launch}; {where}; regime {regimes}), 90 % intervals:")  # fmt: skip
    cols = f"{'mode':<8}{'TPOT ms [90 % interval]':>30}{'tokens/s [90 % interval]':>32}"
    lines = ["", *textwrap.wrap(head, 100), cols]
    for s in steps:
        k = s.calibrated
        tok = k.tokens_per_s
        tpot = f"{k.step_s * 1e3:.3f} [{k.step_lower_s * 1e3:.3f}, {k.step_upper_s * 1e3:.3f}]"
        tps = f"{tok[0]:.1f} [{tok[1]:.1f}, {tok[2]:.1f}]"
        lines.append(f"{s.mode:<8}{tpot:>30}{tps:>32}")
    att = c.attention_s
    lines.append(f"attention per step ({steps[0].mode}): {att[0] * 1e3:.3f} ms "
                 f"[{att[1] * 1e3:.3f}, {att[2] * 1e3:.3f}] (simulated "
                 f"{sum(a.count * a.sim_s for a in c.attention) * 1e3:.3f} ms with the "
                 "CUDA-graph gaps)")  # fmt: skip
    lines += textwrap.wrap(steps[0].calibration_note, 100)
    return lines


def _text(label: str, steps: list[Any]) -> str:
    lines = [label, ""]
    lines.append(f"{'mode':<8}{'TPOT ms':>10}{'tokens/s':>11}{'device ms':>11}{'host ms':>9}"
                 f"{'DRAM GB':>9}{'mJ/token':>10}")  # fmt: skip
    for s in steps:
        lines.append(
            f"{s.mode:<8}{s.tpot_s * 1e3:>10.3f}{s.tokens_per_s:>11.1f}{s.device_s * 1e3:>11.3f}"
            f"{s.host_s * 1e3:>9.3f}{s.dram_bytes / 1e9:>9.2f}{s.energy_j_per_token * 1e3:>10.2f}"
        )
    s = steps[0]
    lines += ["", f"per kernel class ({s.mode}; device time without gaps):",
              f"{'class':<11}{'ms':>9}{'share':>8}{'DRAM GB':>9}"]  # fmt: skip
    classes = s.by_class()
    total = sum(t for t, _ in classes.values()) or 1.0
    for k, (t, b) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{k:<11}{t * 1e3:>9.3f}{t / total:>8.1%}{b / 1e9:>9.2f}")
    lines.append("DRAM energy: the DRAM's pJ/B only (SMs and L2 carry no sourced figure).")
    lines += _calibrated_text(steps)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Time the step(s) and print them.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    from coaccel.sim.gpu_mem import load_arch
    from coaccel.sim.gpu_mem.decode_step import decode_step
    from coaccel.spine.workload import load_workload

    if args.library is not None:
        from coaccel.sim.gpu_mem.intervals import load_calibration
        from coaccel.spine.errors import CoaccelError

        try:
            load_calibration().fit(args.library)
        except ValueError as e:
            raise CoaccelError(f"--library: {e}") from None
    wl = load_workload(args.model)
    ctx = _contexts(args, wl.scenario)
    arch = load_arch(args.gpu)
    modes = MODES if args.mode == "all" else (args.mode,)
    steps = [decode_step(arch, wl.model, ctx, mode=m, weight_bytes=args.weight_bytes,
                         library=args.library) for m in modes]  # fmt: skip
    if args.json:
        json.dump({"model": wl.label, "steps": [_doc(s) for s in steps]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    shown = ctx if len(set(ctx)) > 1 else f"{len(ctx)} x {ctx[0]}"
    print(_text(f"{wl.label} on {arch.name}: batch {len(ctx)}, contexts {shown} tokens", steps))
    return 0
