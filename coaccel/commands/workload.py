"""``coaccel workload``: workload files from other descriptions of a model.

Sub-commands:

* ``coaccel workload import CONFIG [--name NAME] [--out FILE] [--json] [--quiet]``: a Hugging
  Face ``config.json`` (:data:`coaccel.spine.hf_config.SUPPORTED_FAMILIES`) becomes a workload
  file (model shape, the shipped workloads' scenarios that fit the model's context, the source of
  every number: the config's path and SHA-256). It prints the total and per-token active
  parameter counts, the BF16 KV-cache bytes per token and the weight bytes per format; with
  ``--json`` one JSON object (``total_params``, ``active_params``, ``kv_bytes_per_token``, ...).

The workload file is written atomically to ``--out`` (default ``./<name>.yaml``), replacing a
file of that name as every command's outputs do; the config file itself is never written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .args import add_output_flags, in_file, out_file

EPILOG = """\
examples:
  coaccel workload import path/to/Meta-Llama-3-8B/config.json
  coaccel workload import config.json --name qwen3-8b --out workloads/qwen3-8b.yaml
  coaccel workload import config.json --json          # one JSON object (scripts)
  coaccel sim hbq_e_28nm --workload workloads/qwen3-8b.yaml:prefill_2k
see docs/workloads.md for the families, the counting rules and the weight formats
"""

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def register(subparsers: Any) -> None:
    """Add the ``workload`` sub-command (with ``import``).

    Args:
        subparsers: the ``add_subparsers()`` object of the top-level parser.
    """
    p = subparsers.add_parser(
        "workload",
        help="workload files from a Hugging Face config.json",
        description="Make workload files (arch_configs/workloads/*.yaml) from model configs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(title="workload commands", metavar="<what>")
    imp = sub.add_parser(
        "import",
        help="a Hugging Face config.json as a workload file, with its parameter counts",
        description=(
            "Read a Hugging Face config.json and write a workload file: the model shape, the "
            "usual scenarios that fit its context, and the source of every number (the "
            "config's path and SHA-256). Prints total and active (per token) parameters, the "
            "BF16 KV-cache bytes per token (all layers) and the weight bytes per format. "
            "Families: Llama, Mistral, Mixtral, Qwen2/2.5/3 dense and MoE, Gemma 1/2/3, Phi-3, "
            "DeepSeek-V2/V3, OLMoE, GPT-NeoX (an unknown model_type is refused with the list "
            "of supported model_type values)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("config", type=Path, metavar="CONFIG", help="the model's config.json")
    imp.add_argument(
        "--name",
        metavar="NAME",
        help="workload name (default: the config's folder name, or the file's stem)",
    )
    imp.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="workload file to write (default: ./<name>.yaml; a file of that name is replaced)",
    )
    add_output_flags(imp, "print the result as one JSON object")
    imp.set_defaults(func=run_import, command="workload import")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1], command="workload")


def _targets(args: argparse.Namespace) -> tuple[Path, str, Path]:
    """Check the input, the name and the output before any work: ``(config, name, out)``.

    Raises:
        CoaccelError: a config that is not a regular file, a name unfit for a file name, an
            output that cannot be written or that is the config itself.
    """
    from ..spine.errors import CoaccelError
    from ..spine.hf_config import default_name

    config = in_file(args.config, "CONFIG")
    name = args.name if args.name is not None else default_name(config)
    if not _NAME_RE.fullmatch(name):
        raise CoaccelError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (it names the workload "
            "and its default file)"
        )
    out = args.out if args.out is not None else Path(f"{name}.yaml")
    if out.exists() and out.resolve() == config.resolve():
        raise CoaccelError(f"--out {str(out)!r} is the config file itself; give another file")
    return config, name, out_file(out)


def run_import(args: argparse.Namespace) -> int:
    """Import a ``config.json`` as a workload file (module docstring).

    Args:
        args: the parsed command line.

    Returns:
        0 (errors raise ``CoaccelError``, which the CLI reports on one line).
    """
    from ..report.files import write_text
    from ..spine.hf_config import (
        hf_workload,
        load_hf_model,
        parameter_counts,
        parameter_tensors,
        weight_bytes,
    )
    from ..spine.workload import load_workload

    config, name, out = _targets(args)
    model = load_hf_model(config)
    doc, _ = hf_workload(model, name)
    result = _result(model, parameter_counts(model), weight_bytes(parameter_tensors(model)))
    result.update(name=name, out=str(out), default_scenario=doc["default_scenario"],
                  scenarios=list(doc["scenarios"]))  # fmt: skip
    write_text(out, _yaml_text(doc, model, result))
    load_workload(out)  # the file reads back as a valid workload
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_import(result))
    if not args.quiet:
        print(f"wrote {out}")
    return 0


def _result(model: Any, counts: Any, wbytes: dict[str, int]) -> dict[str, Any]:
    """The import's figures as JSON data (the ``--json`` object less name and file)."""
    from ..spine.hf_config import WEIGHT_FORMATS

    s = model.shape
    return {
        "family": model.family,
        "source": {"path": model.source.split(" (sha256 ")[0], "sha256": model.sha256},
        "total_params": counts.total,
        "active_params": counts.active,
        "active_params_without_input_embedding": counts.active_without_input_embedding,
        "non_embedding_params": counts.non_embedding,
        "embedding_params": counts.embedding,
        "lm_head_params": counts.lm_head,
        "mtp_params": counts.mtp,
        "kv_bytes_per_token": int(s.kv_bytes_per_token(16)),
        "kv_bytes_per_token_per_layer": int(s.kv_bytes_per_token_per_layer(16)),
        "kv_cache": _kv_words(s),
        "weight_bytes": wbytes,
        "weight_formats": dict(WEIGHT_FORMATS),
        "notes": list(model.notes),
    }


def _kv_words(s: Any) -> str:
    """How the KV-cache figure is counted, in words."""
    what = (
        f"MLA latent: kv_lora_rank {s.kv_lora_rank} + qk_rope_head_dim {s.qk_rope_head_dim} "
        "elements per layer"
        if s.is_mla
        else f"K and V: 2 x {s.kv_heads} KV heads x {s.head_dim} elements per layer"
    )
    text = f"BF16, all {s.layers} layers; {what}"
    if s.sliding_window_tokens:
        text += (
            f"; the {len(s.sliding_window_layers)} sliding-window layers "
            f"({s.sliding_window_tokens} tokens) count per token in full, as if the window "
            "did not bound their cache"
        )
    return text


def _gb(n: int) -> str:
    return f"{n / 1e9:,.2f} GB"


def format_import(r: dict[str, Any]) -> str:
    """The text ``coaccel workload import`` prints for a result of :func:`run_import`."""
    lines = [
        f"{r['name']}: {r['family']} from {r['source']['path']} (sha256 {r['source']['sha256']})",
        f"  parameters, total            {r['total_params']:>18,}  "
        f"({r['total_params'] / 1e9:.2f} B)",
        f"  parameters, active per token {r['active_params']:>18,}  "
        f"({r['active_params'] / 1e9:.2f} B; the input embedding counted)",
        f"    without the input embedding {r['active_params_without_input_embedding']:>17,}",
        f"  non-embedding parameters     {r['non_embedding_params']:>18,}",
    ]
    if r["mtp_params"]:
        lines.append(f"  MTP module (not in the total) {r['mtp_params']:>17,}")
    lines.append(
        f"  KV cache per token           {r['kv_bytes_per_token']:>18,} B  ({r['kv_cache']})"
    )
    lines.append("  weights:  " + ", ".join(f"{k} {_gb(v)}" for k, v in r["weight_bytes"].items()))
    lines.append(f"  scenarios: {', '.join(r['scenarios'])} (default {r['default_scenario']})")
    lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)


def _yaml_text(doc: dict[str, Any], model: Any, r: dict[str, Any]) -> str:
    """The workload file: a comment header (source, counts, notes) and the document."""
    import yaml

    head = [
        f"{doc['name']}: imported by `coaccel workload import` from {r['source']['path']}",
        f"(sha256 {r['source']['sha256']}); model_type {model.family}.",
        f"Parameters: total {r['total_params']:,}; active per token {r['active_params']:,} "
        f"({r['active_params_without_input_embedding']:,} without the input embedding);",
        f"non-embedding {r['non_embedding_params']:,}"
        + (f"; MTP module, not in the total, {r['mtp_params']:,}." if r["mtp_params"] else "."),
        f"KV cache: {r['kv_bytes_per_token']:,} B per token ({r['kv_cache']}).",
        "Scenarios: batch 1, those of the shipped workloads that fit max_position_embeddings.",
        *[f"Note: {n}." for n in r["notes"]],
    ]
    body = yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=False)
    return "".join(f"# {ln}\n" for ln in head) + body
