"""Regenerate tests/vectors/decoder_<model>_ref_logits.npz with llama.cpp, an independent decoder.

Usage (once, on a machine with llama-cpp-python; not part of CI)::

    pip install llama-cpp-python            # builds llama.cpp from source (about 10-40 min)
    .venv/bin/python benchmarks/decoder_reference_logits.py            # both models
    .venv/bin/python benchmarks/decoder_reference_logits.py --models gemma3-270m --check

For each model it reads the same GGUF file the numpy decoder reads (the packaged chunks of
Gemma 3 are joined into a temporary file) and runs llama.cpp twice on a fixed prompt (the start
of :func:`coaccel.models.nn.pydoc_text`), on one thread, all logits kept, float32 KV cache,
no flash attention:

* ``f32``: on a temporary copy of the file whose tensors are all dequantized to F32 (same
  metadata, same tensor layout). llama.cpp then multiplies float32 activations by float32
  weights, as the numpy decoder does: the two differ only by float32 rounding and by llama.cpp's
  own approximations (its GELU goes through a half-precision table), so this comparison is
  tight.
* ``native``: on the file as shipped. llama.cpp's CPU kernels then quantize every activation to
  8-bit blocks (Q8_0 / Q8_1 / Q8_K) before its product with a quantized weight, which moves the
  logits by a few tenths: a looser comparison that shows what running the shipped file in
  llama.cpp changes.

It stores

* ``prompt``, ``ids``: the prompt and llama.cpp's token ids for it (BOS as the file says);
* ``columns``: per position, the 50 highest-scoring vocabulary columns of the ``f32`` run plus
  16 columns drawn with a fixed seed (int32); ``values`` / ``values_native``: llama.cpp's
  logits there (float32), enough to compare logits without storing 262,144 per position;
* ``argmax`` / ``argmax_native``: llama.cpp's top-1 token per position; ``nll`` /
  ``nll_native``: its next-token negative log-likelihood over the whole vocabulary per position
  (float64, nats);
* ``token_texts``, ``token_ids``: llama.cpp's token ids of a few tokenizer test strings
  (rows padded with -1);
* ``implementation``: which reference and version made the file.

With ``--check`` it also loads the numpy decoder and prints the comparison the unit test makes
(max and mean absolute logit difference, top-1 agreement, mean NLL difference).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from coaccel.models.nn import MODELS, load_decoder, locate_model, pydoc_text

OUT_DIR = Path(__file__).resolve().parents[1] / "tests" / "vectors"
TOP_K = 50
RANDOM_COLUMNS = 16
PROMPT_CHARS = 240
TOKEN_TEXTS = (
    "Hello world!",
    "The year 2024's   weather\n\n\tis fine.",
    "def f(x):\n    return x**2  # square\n",
    "naïve café, Ünïcödé — 東京 and emoji 🙂",
    "don't DON'T we'll  (a+b)*c == 42",
    "  leading spaces and trailing  ",
)


def _llama(path: Path, n_ctx: int):
    from llama_cpp import Llama

    return Llama(
        model_path=str(path),
        n_ctx=n_ctx,
        n_batch=n_ctx,
        n_ubatch=n_ctx,
        n_threads=1,
        n_threads_batch=1,
        logits_all=True,
        verbose=False,
        seed=0,
        type_k=0,  # GGML_TYPE_F32: a float32 KV cache (the default is F16)
        type_v=0,
        flash_attn=False,
    )


def write_f32_copy(src: Path, dst: Path) -> None:
    """Copy a GGUF file with every tensor dequantized to F32 (metadata and layout unchanged)."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(str(dst), arch)
    for key, fld in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.alignment"):
            continue
        vtype = fld.types[0]
        sub = fld.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, fld.contents(), vtype, sub)
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        writer.add_tensor(t.name, np.ascontiguousarray(data.reshape(tuple(reversed(t.shape)))))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _run(path: Path, ids: list[int]) -> np.ndarray:
    llm = _llama(path, 256)
    llm.reset()
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float32)
    del llm
    return logits


def _nll(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    lg = logits.astype(np.float64)
    lse = lg.max(1) + np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1))
    return lse[:-1] - lg[np.arange(len(ids) - 1), ids[1:]]


def reference(name: str, workdir: Path) -> dict[str, np.ndarray]:
    """Run llama.cpp on ``name``'s GGUF file and build the vectors (see the module docstring)."""
    import llama_cpp

    parts = locate_model(name)
    if len(parts) == 1:
        path = parts[0]
    else:
        path = workdir / f"{name}.gguf"
        with path.open("wb") as out:
            for p in parts:
                with p.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 24)
    f32_path = workdir / f"{name}.f32.gguf"
    write_f32_copy(path, f32_path)
    prompt = pydoc_text(PROMPT_CHARS)
    tok = _llama(path, 256)
    ids = np.array(tok.tokenize(prompt.encode("utf-8"), add_bos=True, special=False), np.int64)
    tok_rows = [tok.tokenize(t.encode("utf-8"), add_bos=True, special=False) for t in TOKEN_TEXTS]
    del tok
    native = _run(path, ids.tolist())
    f32 = _run(f32_path, ids.tolist())
    f32_path.unlink()
    vocab = f32.shape[1]
    rng = np.random.default_rng(0)
    top = np.argsort(-f32, axis=1, kind="stable")[:, :TOP_K]
    extra = np.stack([rng.choice(vocab, RANDOM_COLUMNS, replace=False) for _ in ids])
    columns = np.concatenate([top, extra], axis=1).astype(np.int32)
    width = max(len(r) for r in tok_rows)
    token_ids = np.full((len(tok_rows), width), -1, dtype=np.int32)
    for i, r in enumerate(tok_rows):
        token_ids[i, : len(r)] = r
    source = parts[0].name if len(parts) == 1 else f"{parts[0].name} + {len(parts) - 1} chunks"
    impl = (
        f"llama.cpp via llama-cpp-python {llama_cpp.__version__} (CPU, 1 thread, float32 KV "
        f"cache, {platform.machine()}), file {source}; values: F32 copy of the file, "
        "values_native: the file as shipped"
    )
    cols = columns.astype(np.int64)
    return {
        "prompt": np.array(prompt),
        "ids": ids,
        "columns": columns,
        "values": np.take_along_axis(f32, cols, axis=1),
        "values_native": np.take_along_axis(native, cols, axis=1),
        "argmax": f32.argmax(axis=1).astype(np.int64),
        "argmax_native": native.argmax(axis=1).astype(np.int64),
        "nll": _nll(f32, ids),
        "nll_native": _nll(native, ids),
        "token_texts": np.array(TOKEN_TEXTS),
        "token_ids": token_ids,
        "implementation": np.array(impl),
    }


def compare(name: str, ref: dict[str, np.ndarray]) -> dict[str, object]:
    """The unit test's comparison of the numpy decoder with the stored reference."""
    model = load_decoder(name)
    ids = ref["ids"]
    logits = model.logits(ids)
    ours = np.take_along_axis(logits, ref["columns"].astype(np.int64), 1)
    nll = _nll(logits, ids)
    out: dict[str, object] = {
        "tokens": len(ids),
        "same_prompt_tokens": model.tokenize(str(ref["prompt"])).tolist() == ids.tolist(),
        "same_test_tokens": all(
            model.tokenize(str(t)).tolist() == [int(i) for i in r if i >= 0]
            for t, r in zip(ref["token_texts"], ref["token_ids"], strict=True)
        ),
        "mean_nll_ours": float(nll.mean()),
    }
    for run in ("", "_native"):
        diff = np.abs(ours - ref["values" + run])
        out[f"max_abs_logit_diff{run}"] = float(diff.max())
        out[f"mean_abs_logit_diff{run}"] = float(diff.mean())
        out[f"top1_agreement{run}"] = float((logits.argmax(1) == ref["argmax" + run]).mean())
        out[f"mean_nll_reference{run}"] = float(ref["nll" + run].mean())
        out[f"max_abs_nll_diff{run}"] = float(np.abs(nll - ref["nll" + run]).max())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="store llama.cpp reference logits for the decoders")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR, help="where the .npz files go")
    ap.add_argument("--check", action="store_true", help="also compare the numpy decoder")
    args = ap.parse_args(argv)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python is not installed: pip install llama-cpp-python", file=sys.stderr)
        return 2
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="decoder_ref_") as tmp:
        for name in [m for m in args.models.split(",") if m]:
            print(f"[decoder_reference_logits] {name} ...", file=sys.stderr, flush=True)
            ref = reference(name, Path(tmp))
            out = args.out_dir / f"decoder_{name}_ref_logits.npz"
            np.savez_compressed(out, **ref)
            print(f"{out}: {out.stat().st_size} bytes, {ref['implementation']}")
            if args.check:
                for k, v in compare(name, ref).items():
                    print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
