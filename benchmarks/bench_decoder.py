"""Speed of the numpy decoders (SmolLM2-135M, Gemma-3-270M): prefill and KV-cached decoding.

Usage::

    .venv/bin/python benchmarks/bench_decoder.py                       # both models, table
    .venv/bin/python benchmarks/bench_decoder.py --models smollm2-135m --json
    .venv/bin/python benchmarks/bench_decoder.py --prefill 128,512 --decode 64,512 --repeat 1

Everything runs on one thread: ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS`` and ``NUMBA_NUM_THREADS`` are set to 1 before numpy is imported (pass
``--threads N`` for more). The tokens come from :func:`coaccel.models.nn.pydoc_text`. For each
model it reports the load time (GGUF parse and dequantization of every weight to float32), then

* prefill: one forward pass over T tokens with all T x vocab logits, for each ``--prefill``
  length, in tokens per second (best and median of ``--repeat`` runs, wall clock and per CPU
  second);
* decode: ``--steps`` single-token steps after a cached prefix of L tokens, for each
  ``--decode`` length L, in tokens per second;
* the one-thread 512-token prefill time against its 10 s target (judged on CPU seconds, see
  :data:`PREFILL_TARGET_S`).

On a shared machine the wall clock also counts time spent waiting for a core; the CPU-second
columns do not (pin the process, e.g. ``taskset -c 1``, to steady the wall clock).
"""

from __future__ import annotations

import os
import sys


def _threads(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


_N_THREADS = _threads(sys.argv[1:])
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = _N_THREADS  # before numpy (and numba, through coaccel) is imported

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from coaccel.models.nn import MODELS, Decoder, load_decoder, pydoc_text  # noqa: E402

PREFILL_TARGET_S = 10.0
"""Target: a 512-token prefill on one thread within 10 s, judged on the CPU time of the best run
(the time spent on the core; on an idle core it equals the wall clock, on a shared machine the
wall clock also counts the waits for a core)."""


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _time(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Best and median wall seconds and best CPU seconds of ``repeat`` calls of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"best_s": min(wall), "median_s": statistics.median(wall), "cpu_s": min(cpu)}


def bench_model(
    name: str, prefill: list[int], decode: list[int], steps: int, repeat: int
) -> dict[str, object]:
    """Load one model and time its prefill and decode cases."""
    c0, t0 = time.process_time(), time.perf_counter()
    model: Decoder = load_decoder(name)
    load = {"load_s": time.perf_counter() - t0, "load_cpu_s": time.process_time() - c0}
    need = max([*prefill, *(n + steps for n in decode), 512])
    ids = model.tokenize(pydoc_text(max(24000, 8 * need)))
    if ids.size < need:
        raise SystemExit(f"{name}: the text has {ids.size} tokens, {need} needed")
    model.logits(ids[:8])  # warm-up: numba kernels, RoPE tables
    rows = []
    for n in prefill:
        t = _time(lambda n=n: model.logits(ids[:n]), repeat)
        rows.append({"tokens": n, **t, "tokens_per_s": n / t["best_s"],
                     "median_tokens_per_s": n / t["median_s"],
                     "tokens_per_cpu_s": n / t["cpu_s"]})  # fmt: skip
    drows = []
    for n in decode:
        cache = model.new_cache(n + steps)

        def run(n: int = n, cache=cache) -> None:
            cache.length = n
            for tok in ids[n : n + steps]:
                model.decode_step(int(tok), cache)

        model.forward(ids[:n], cache)
        t = _time(run, repeat)
        drows.append({"context": n, "steps": steps, **t, "tokens_per_s": steps / t["best_s"],
                      "median_tokens_per_s": steps / t["median_s"],
                      "tokens_per_cpu_s": steps / t["cpu_s"]})  # fmt: skip
    t512 = next((r for r in rows if r["tokens"] == 512), None)
    if t512 is None:
        t = _time(lambda: model.logits(ids[:512]), repeat)
        t512 = {"tokens": 512, **t}
    c = model.config
    return {
        "model": name,
        "config": {
            "layers": c.num_layers,
            "hidden": c.hidden_size,
            "heads": c.num_heads,
            "kv_heads": c.num_kv_heads,
            "vocab": c.vocab_size,
        },
        **load,
        "prefill": rows,
        "decode": drows,
        "prefill_512": {
            "best_s": t512["best_s"],
            "cpu_s": t512["cpu_s"],
            "target_s": PREFILL_TARGET_S,
            "pass": t512["cpu_s"] <= PREFILL_TARGET_S,
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="prefill and decode speed of the numpy decoders")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    ap.add_argument("--prefill", default="64,128,256,512", help="prefill lengths, tokens")
    ap.add_argument("--decode", default="16,128,512", help="cached prefix lengths for decoding")
    ap.add_argument("--steps", type=int, default=16, help="decode steps timed per case")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (best and median)")
    ap.add_argument("--threads", default="1", help="BLAS/numba threads (set before import)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; valid: {', '.join(MODELS)}")
    results = []
    for name in names:
        print(f"[bench_decoder] {name} ...", file=sys.stderr, flush=True)
        results.append(
            bench_model(name, _ints(args.prefill), _ints(args.decode), args.steps, args.repeat)
        )
    doc = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "threads": _N_THREADS,
        "repeat": args.repeat,
        "results": results,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    print(f"numpy decoders, {_N_THREADS} thread(s), best and median of {args.repeat} runs; "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
          f"numpy {np.__version__}")  # fmt: skip
    for r in results:
        print(f"\n{r['model']}: load {r['load_s']:.1f} s (cpu {r['load_cpu_s']:.1f} s)")
        print(f"  {'prefill T':>10}{'best s':>9}{'tok/s':>9}{'median tok/s':>14}{'tok/cpu-s':>11}")
        for p in r["prefill"]:
            print(f"  {p['tokens']:>10}{p['best_s']:>9.2f}{p['tokens_per_s']:>9.1f}"
                  f"{p['median_tokens_per_s']:>14.1f}{p['tokens_per_cpu_s']:>11.1f}")  # fmt: skip
        print(f"  {'decode @L':>10}{'s/tok':>9}{'tok/s':>9}{'median tok/s':>14}{'tok/cpu-s':>11}")
        for d in r["decode"]:
            print(f"  {d['context']:>10}{d['best_s'] / d['steps']:>9.3f}{d['tokens_per_s']:>9.1f}"
                  f"{d['median_tokens_per_s']:>14.1f}{d['tokens_per_cpu_s']:>11.1f}")  # fmt: skip
        p5 = r["prefill_512"]
        verdict = "PASS" if p5["pass"] else "MISS"
        print(f"  512-token prefill, {_N_THREADS} thread(s): {p5['cpu_s']:.2f} s CPU "
              f"({p5['best_s']:.2f} s wall), target {p5['target_s']:.0f} s CPU: "
              f"{verdict}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
