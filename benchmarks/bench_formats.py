"""Speed of quantize + dequantize for every registered block format (single thread).

Usage::

    .venv/bin/python benchmarks/bench_formats.py                    # 16M elements, table
    .venv/bin/python benchmarks/bench_formats.py --elements 4M --json
    .venv/bin/python benchmarks/bench_formats.py --formats mxfp4,nvfp4 --backend numpy

For each format (HBQ formats once per role, ``role="weight"`` and ``role="activation"``) it times
``quantize(x, fmt)`` and ``.dequantize()`` of a float32 standard-normal tensor of shape
``(elements / 4096, 4096)``, blocked along the last axis, after a warm-up call that excludes JIT
compilation, and reports the best and the median of ``--repeat`` runs in elements per second,
wall clock and per CPU second (on a shared machine the wall clock also counts time spent waiting
for a core; pin the process, e.g. ``taskset -c 1``, to steady it), beside each format's target.
numba runs on one thread (``NUMBA_NUM_THREADS=1`` is set before numba is imported). When
``torch`` and ``torchao`` are importable, the same run also times torchao's MX and NVFP4
quantize + dequantize on one thread (``torch.set_num_threads(1)``) and prints, beside each of
our formats that has a torchao counterpart (MXFP4, MXFP8-E4M3, NVFP4), the ratio of our best
throughput to torchao's (above 1: ours is faster); otherwise it says so and goes on. It then
reports how the time scales with size (1M, 4M, 16M elements) for ``--scaling-formats``.
"""

from __future__ import annotations

import os

os.environ["NUMBA_NUM_THREADS"] = "1"  # before numba is imported (through coaccel)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from coaccel.models.formats import format_names, quantize  # noqa: E402

TARGETS_ELEMS_PER_S = {
    "bfp": 200e6,
    "int": 200e6,
    "mxfp4": 200e6,
    "mxfp6_e2m3": 200e6,
    "mxfp6_e3m2": 200e6,
    "mxfp8_e4m3": 200e6,
    "mxfp8_e5m2": 200e6,
    "mxint8": 200e6,
    "nvfp4": 200e6,
    "nvfp4_e5m3": 200e6,
    ("hbq-a", "weight"): 30e6,
}
"""Speed targets, quantize + dequantize of 16M float32 elements on one thread (wall clock, best
run). HBQ-A weights run the full MSE L2 search over both SIG tables."""


TORCHAO_COUNTERPARTS = {
    "mxfp4": "torchao mxfp4",
    "mxfp8_e4m3": "torchao mxfp8_e4m3",
    "nvfp4": "torchao nvfp4",
}
"""Our format -> the torchao row its throughput is compared with (same element and scale
formats, block size and, for NVFP4, a per-tensor scale from the tensor's amax)."""


def _count(text: str) -> int:
    """'16M' -> 16 * 2**20, '4k' -> 4096, '1000' -> 1000."""
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(float(t[:-1] if mult > 1 else t) * mult)


def _cases(names: list[str]) -> list[tuple[str, dict]]:
    cases = []
    for name in names:
        if name.startswith("hbq"):
            cases += [(name, {"role": "weight"}), (name, {"role": "activation"})]
        else:
            cases.append((name, {}))
    return cases


def _tensor(n: int, rng: np.random.Generator) -> np.ndarray:
    cols = 4096 if n >= 4096 else n
    return rng.standard_normal((n // cols, cols), dtype=np.float32)


def _time_runs(quant, dequant, repeat: int) -> dict[str, float]:
    """Best and median seconds of ``repeat`` runs of ``dequant(quant())``.

    ``total_s`` / ``median_total_s`` are wall-clock times; ``cpu_s`` / ``median_cpu_s`` the
    process CPU time of the same runs.
    """
    runs = []
    for _ in range(repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        q = quant()
        t1 = time.perf_counter()
        dequant(q)
        t2 = time.perf_counter()
        c2 = time.process_time()
        runs.append((t1 - t0, t2 - t1, t2 - t0, c2 - c0))
    cols = list(zip(*runs, strict=True))
    return {
        "quantize_s": min(cols[0]),
        "dequantize_s": min(cols[1]),
        "total_s": min(cols[2]),
        "cpu_s": min(cols[3]),
        "median_total_s": statistics.median(cols[2]),
        "median_cpu_s": statistics.median(cols[3]),
    }


def time_case(x: np.ndarray, name: str, opt: dict, backend: str, repeat: int) -> dict[str, float]:
    """Best and median seconds for quantize, dequantize and both, on ``x`` (see
    :func:`_time_runs`), after a warm-up call that compiles the kernels."""
    quantize(x[:1, :1024] if x.shape[1] >= 1024 else x[:1], name, backend=backend, **opt)
    return _time_runs(
        lambda: quantize(x, name, backend=backend, **opt), lambda q: q.dequantize(), repeat
    )


def torchao_cases(x: np.ndarray, repeat: int) -> tuple[list[dict], str]:
    """Time torchao's MX and NVFP4 quantize + dequantize on ``x`` (one thread).

    Returns:
        (rows, note): one row per torchao format that ran, and a note saying what was not
        available (``"torchao not installed"`` when torch or torchao cannot be imported).
    """
    try:
        import torch
        import torchao  # noqa: F401
    except ImportError:
        return [], "torchao not installed"
    torch.set_num_threads(1)
    xt = torch.from_numpy(x)

    def dequant(q):
        # torchao renamed MXTensor/NVFP4Tensor.to_dtype to dequantize; take whichever it has.
        to_dtype = getattr(type(q), "to_dtype", None)
        return to_dtype(q, xt.dtype) if to_dtype is not None else q.dequantize(xt.dtype)

    cases = []
    notes = []
    try:
        from torchao.prototype.mx_formats.mx_tensor import MXTensor

        for label, dtype in (
            ("torchao mxfp4", getattr(torch, "float4_e2m1fn_x2", None)),
            ("torchao mxfp8_e4m3", torch.float8_e4m3fn),
        ):
            if dtype is not None:
                cases.append((label, lambda d=dtype: MXTensor.to_mx(xt, d, 32), dequant))
    except ImportError as e:
        notes.append(f"torchao MX unavailable ({e})")
    try:
        from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

        try:  # two-level scaling like ours: the tensor's amax sets an FP32 per-tensor scale
            from torchao.prototype.mx_formats.nvfp4_tensor import per_tensor_amax_to_scale

            def nvfp4():
                s_t = per_tensor_amax_to_scale(torch.max(torch.abs(xt)))
                return NVFP4Tensor.to_nvfp4(xt, per_tensor_scale=s_t)
        except ImportError:
            notes.append("torchao nvfp4 runs without a per-tensor scale")

            def nvfp4():
                return NVFP4Tensor.to_nvfp4(xt)

        cases.append(("torchao nvfp4", nvfp4, dequant))
    except ImportError as e:
        notes.append(f"torchao NVFP4 unavailable ({e})")
    rows = []
    for label, quant, dequant in cases:
        try:
            dequant(quant())  # warm-up
            t = _time_runs(quant, dequant, repeat)
        except Exception as e:  # an API this torchao version lacks: report it, go on
            notes.append(f"{label} failed ({type(e).__name__}: {e})")
            continue
        rows.append({"format": label, "elements": int(x.size), "backend": "torchao", **t,
                     "elements_per_s": x.size / t["total_s"],
                     "median_elements_per_s": x.size / t["median_total_s"],
                     "elements_per_cpu_s": x.size / t["cpu_s"],
                     "target_elements_per_s": None})  # fmt: skip
    return rows, "; ".join(notes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="quantize + dequantize speed of each format")
    ap.add_argument("--elements", default="16M", help="tensor size, e.g. 16M, 4M, 1000000")
    ap.add_argument("--formats", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--backend", default="numba", choices=("numba", "numpy"))
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per case; the best and the median are reported")  # fmt: skip
    ap.add_argument("--scaling-formats", default="mxfp4,nvfp4",
                    help="formats timed at 1M, 4M and 16M elements ('' to skip)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)

    names = [f for f in args.formats.split(",") if f] or list(format_names())
    unknown = sorted(set(names) - set(format_names()))
    if unknown:
        ap.error(f"unknown format(s) {', '.join(unknown)}; valid: {', '.join(format_names())}")
    rng = np.random.default_rng(0)
    n = _count(args.elements)
    x = _tensor(n, rng)
    rows = []
    for name, opt in _cases(names):
        t = time_case(x, name, opt, args.backend, args.repeat)
        rows.append({
            "format": name, **opt, "elements": int(x.size), "backend": args.backend,
            **t, "elements_per_s": x.size / t["total_s"],
            "median_elements_per_s": x.size / t["median_total_s"],
            "elements_per_cpu_s": x.size / t["cpu_s"],
            "target_elements_per_s": TARGETS_ELEMS_PER_S.get(
                (name, opt["role"]) if "role" in opt else name
            ),
        })  # fmt: skip
    ref_rows, ref_note = torchao_cases(x, args.repeat)
    ref_speed = {r["format"]: r["elements_per_s"] for r in ref_rows}
    for r in rows:
        ref = ref_speed.get(TORCHAO_COUNTERPARTS.get(r["format"], ""))
        r["torchao_ratio"] = None if ref is None or "role" in r else r["elements_per_s"] / ref
    rows += ref_rows
    scaling = []
    for name in [f for f in args.scaling_formats.split(",") if f]:
        for size in (1 << 20, 4 << 20, 16 << 20):
            xs = _tensor(size, rng)
            t = time_case(xs, name, {}, args.backend, args.repeat)
            scaling.append({"format": name, "elements": size, **t,
                            "elements_per_s": size / t["total_s"],
                            "elements_per_cpu_s": size / t["cpu_s"]})  # fmt: skip
    doc = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "numba_num_threads": os.environ["NUMBA_NUM_THREADS"],
        "results": rows,
        "torchao_note": ref_note,
        "scaling": scaling,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    print(f"quantize + dequantize, {x.size} float32 elements, backend={args.backend}, 1 thread, "
          f"best and median of {args.repeat} runs; {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}, numpy {np.__version__}")  # fmt: skip
    print("target: PASS when the best run reaches it, MISS otherwise")
    print(f"{'format':<26}{'quant ms':>10}{'dequant ms':>12}{'best M/s':>10}{'median M/s':>12}"
          f"{'M/cpu-s':>10}{'vs torchao':>12}  target")  # fmt: skip
    for r in rows:
        label = r["format"] + (f" ({r['role']})" if "role" in r else "")
        tgt = r["target_elements_per_s"]
        mark = "" if tgt is None else f"{tgt / 1e6:.0f}M " + (
            "PASS" if r["elements_per_s"] >= tgt else "MISS")  # fmt: skip
        ratio = r.get("torchao_ratio")
        vs = "" if ratio is None else f"{ratio:.2f}x"
        print(f"{label:<26}{r['quantize_s'] * 1e3:>10.1f}{r['dequantize_s'] * 1e3:>12.1f}"
              f"{r['elements_per_s'] / 1e6:>10.1f}{r['median_elements_per_s'] / 1e6:>12.1f}"
              f"{r['elements_per_cpu_s'] / 1e6:>10.1f}{vs:>12}  {mark}")  # fmt: skip
    if ref_note:
        print(ref_note)
    if scaling:
        print("\nscaling with size")
        print(f"{'format':<12}{'elements':>10}{'M elem/s':>10}{'M/cpu-s':>10}")
        for r in scaling:
            print(f"{r['format']:<12}{r['elements']:>10}{r['elements_per_s'] / 1e6:>10.1f}"
                  f"{r['elements_per_cpu_s'] / 1e6:>10.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
