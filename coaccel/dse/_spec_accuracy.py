"""The ``accuracy:`` block of a sweep spec: its schema, its metrics, its digest and its checks.

A spec's ``accuracy:`` block scores each point's number formats (:class:`AccuracySpec`); this
module holds what belongs to that block alone. :mod:`coaccel.dse.spec` re-exports its public
names, which are imported from there.

Public: :class:`AccuracySpec`, :data:`SQNR_METRICS`, :data:`PERPLEXITY_METRICS`,
:data:`ACCURACY_METRICS`, :func:`accuracy_metrics`, :data:`ACCURACY_ADDED`,
:func:`accuracy_digest`.

Internal (called by :func:`coaccel.dse.spec.load_spec`): ``_check_accuracy`` (resolve ``data:
auto``, check the base architecture has formats to score), ``_check_perplexity`` (a perplexity
block's model and data) and ``_check_variants`` (a target's accuracy hook on every workload).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..spine.config import ConfigError, FrozenMap, Problem, param

__all__ = [
    "ACCURACY_ADDED",
    "ACCURACY_METRICS",
    "AccuracySpec",
    "PERPLEXITY_METRICS",
    "SQNR_METRICS",
    "accuracy_digest",
    "accuracy_metrics",
]

SQNR_METRICS: Mapping[str, str] = FrozenMap(
    {
        "accuracy_sqnr_db": "dB",
        "accuracy_loss_db": "dB",
    }
)
"""Metrics of an ``accuracy:`` block with ``measure: sqnr``: the SQNR of the quantized GEMM
outputs under the point's number formats (dB), and how many dB that is below the base
architecture's formats (positive: worse than the base)."""

PERPLEXITY_METRICS: Mapping[str, str] = FrozenMap(
    {
        "perplexity": "1",
        "perplexity_std": "1",
        "perplexity_increase_pct": "%",
        "perplexity_increase_pct_std": "%",
        "top1_agreement": "1",
    }
)
"""Metrics of an ``accuracy:`` block with ``measure: perplexity``: the real decoder's next-token
perplexity on a fixed text with the point's formats in its forward pass (pooled over every
scored token of the text windows), the standard deviation of the per-window perplexities (the
spread a report draws as the accuracy's uncertainty), the perplexity increase over the
unquantized model (%), and the fraction of positions whose top-1 next token equals the
unquantized model's."""

ACCURACY_METRICS: Mapping[str, str] = FrozenMap({**SQNR_METRICS, **PERPLEXITY_METRICS})
"""Every metric an ``accuracy:`` block can add (see :func:`accuracy_metrics` for one block)."""


def accuracy_metrics(acc: AccuracySpec) -> Mapping[str, str]:
    """The metrics (name -> unit) an accuracy block adds to every point.

    Args:
        acc: the block.

    Returns:
        :data:`SQNR_METRICS` or :data:`PERPLEXITY_METRICS`, by ``acc.measure``.
    """
    return PERPLEXITY_METRICS if acc.measure == "perplexity" else SQNR_METRICS


@dataclass(frozen=True)
class AccuracySpec:
    """The accuracy study run once per distinct number-format setting of the points.

    ``measure: sqnr`` scores each setting (the architecture's weight and activation formats)
    by :func:`coaccel.studies.quant.study_operand_formats`: the SQNR of the quantized GEMM
    outputs ``Q(A)·Q(W)ᵀ`` against float64, on all-MiniLM-L6-v2's 36 linear layers with
    activations from its float forward pass (``real``) or on one seeded synthetic problem
    (``synthetic``). ``measure: perplexity`` runs a real decoder (``model``) with the
    setting's weight, activation and KV-cache formats in its forward pass
    (:meth:`coaccel.models.nn.Decoder.with_numerics`, bit-exact quantize-dequantize) on
    ``windows`` consecutive windows of ``window_tokens`` tokens of the Python documentation
    text (:func:`coaccel.models.nn.pydoc_text`) and reports :data:`PERPLEXITY_METRICS`. A
    target that declares an accuracy hook (:attr:`coaccel.spine.target.SimTarget
    .accuracy_variant`) puts what its points change instead (the DeltaLLM datapath's
    attention, FFD's block selection in decode steps). Results are cached in the store, keyed
    by the setting and these settings, so a rerun, a resumed or a larger sweep does not score
    a setting again.

    Attributes:
        measure: ``sqnr`` (GEMM output SQNR) or ``perplexity`` (a real decoder).
        data: for ``sqnr``: ``real`` (needs the ``real`` extra), ``synthetic``, or ``auto``
            (``real`` when installed, else ``synthetic``; the sweep reports which it used).
            ``perplexity`` is always on real text (``auto`` resolves to ``real``).
        model: for ``perplexity``: the decoder (``smollm2-135m`` or ``gemma3-270m``; its
            weight package must be installed).
        windows: for ``perplexity``: text windows scored (their spread is the uncertainty).
        window_tokens: for ``perplexity``: tokens per window.
        kv: for ``perplexity``: also quantize the KV cache in the architecture's KV format
            (where it has one).
        decode_tokens: for ``perplexity`` with a hook that scores decode steps
            (:class:`~coaccel.spine.target.AccuracyVariant` ``mode="decode"``, the GPU
            target's FFD): the last tokens of each window, scored by teacher-forced decode
            steps after a prefill of the rest (less than ``window_tokens``); unused otherwise.
        n_sentences: sentences of the built-in corpus for ``real``.
        distribution: element distribution of the ``synthetic`` problem.
        tokens: activation rows of the ``synthetic`` problem.
        in_features: reduction dimension of the ``synthetic`` problem (a multiple of every
            HBQ block size swept).
        out_features: weight rows of the ``synthetic`` problem.
        seed: seed of the ``synthetic`` tensors.
        psum_mode: partial-sum accumulation of the HBQ GEMM (the paper's accuracy results use
            ``fp32``).
    """

    measure: Literal["sqnr", "perplexity"] = "sqnr"
    data: Literal["auto", "real", "synthetic"] = "auto"
    model: Literal["smollm2-135m", "gemma3-270m"] = "smollm2-135m"
    windows: int = param(default=4, ge=2, le=64)
    window_tokens: int = param(default=256, ge=16, le=4096)
    kv: bool = True
    decode_tokens: int = param(default=32, ge=1, le=4095)
    n_sentences: int = param(default=4, ge=1, le=64)
    distribution: Literal["gaussian", "laplace", "student_t"] = "student_t"
    tokens: int = param(default=64, ge=1)
    in_features: int = param(default=512, ge=1)
    out_features: int = param(default=256, ge=1)
    seed: int = param(default=0, ge=0)
    psum_mode: Literal["fp32", "fp16", "mxint8_running", "mxint8_group"] = "fp32"


ACCURACY_ADDED: Mapping[str, Any] = FrozenMap({"decode_tokens": 32})
"""Keys of the ``accuracy:`` block added after its first schema, with their defaults: they enter
:func:`accuracy_digest` (and the accuracy cache keys of the settings that do not use them) only
when set away from the default, so the points and scores of earlier stores keep their ids."""


def accuracy_digest(acc: AccuracySpec) -> str:
    """The digest of an accuracy block, as a point's spec digest includes it.

    It is :func:`~coaccel.config.config_digest` of the block, without the keys of
    :data:`ACCURACY_ADDED` that hold their default (so it equals the digest earlier versions
    computed for the same block).

    Args:
        acc: the accuracy settings (``data`` resolved).

    Returns:
        64 hex digits.
    """
    from ..spine.config import dump_config

    d = dump_config(acc)
    for key, default in ACCURACY_ADDED.items():
        if d.get(key) == default:
            del d[key]
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _check_accuracy(
    src: str, acc: AccuracySpec, base: Any
) -> tuple[AccuracySpec | None, list[Problem]]:
    """Resolve ``data: auto`` and check the architecture has formats the study can score (or,
    for ``perplexity``, an accuracy hook: its points are checked by :func:`_check_variants`)."""
    import dataclasses

    from ..models.nn.minilm import model_dir
    from ..simulation import target

    out: list[Problem] = []
    kind = getattr(base, "kind", type(base).__name__)
    t = target(kind) if isinstance(kind, str) else None
    if acc.measure == "perplexity" and t is not None and t.accuracy_variant is not None:
        return _check_perplexity(src, acc, base, out)
    operand_format = None if t is None else t.operand_format
    if operand_format is None:
        if acc.measure == "perplexity":
            return None, [
                Problem(
                    src,
                    "accuracy.measure",
                    "perplexity",
                    f"the {kind} target declares no accuracy hook (accuracy_variant) and no "
                    "operand formats: nothing of its points changes a decoder's numerics",
                )
            ]
        msg = f"the {kind} architecture has no operand formats (weight / activation) to score"
        if t is not None and t.accuracy_variant is not None:
            msg += "; measure perplexity scores what its points change in a real decoder"
        return None, [Problem(src, "accuracy", "...", msg)]
    for role in ("weight", "activation"):
        try:
            fmt = operand_format(base, role)
        except (TypeError, ValueError, AttributeError) as e:
            fmt, why = None, str(e)
        else:
            why = ""
        if not hasattr(fmt, "quantize_blocks"):
            name = getattr(getattr(getattr(base, "formats", None), role, None), "format", "?")
            out.append(
                Problem(
                    src,
                    "accuracy",
                    "...",
                    f"the base architecture's formats.{role} ({name!r}) is not a registered "
                    f"block format the accuracy study can quantize{': ' + why if why else ''}",
                )
            )
    if acc.measure == "perplexity":
        return _check_perplexity(src, acc, base, out)
    try:
        model_dir()
        have_real = True
    except (ModuleNotFoundError, FileNotFoundError):
        have_real = False
    data = acc.data
    if data == "auto":
        data = "real" if have_real else "synthetic"
    elif data == "real" and not have_real:
        out.append(
            Problem(
                src,
                "accuracy.data",
                "real",
                "the real model needs the 'real' extra: pip install 'coaccel[real]'",
                "synthetic, auto",
            )
        )
    return dataclasses.replace(acc, data=data), out


def _check_perplexity(
    src: str, acc: AccuracySpec, base: Any, out: list[Problem]
) -> tuple[AccuracySpec | None, list[Problem]]:
    """A perplexity block: real text only, and the decoder's weight package installed."""
    import dataclasses

    from ..models.nn import locate_model
    from ..spine.errors import CoaccelError

    if acc.data == "synthetic":
        out.append(
            Problem(src, "accuracy.data", "synthetic",
                    "measure perplexity runs a real decoder on real text", "real, auto")
        )  # fmt: skip
    try:
        locate_model(acc.model)
    except CoaccelError as e:
        out.append(Problem(src, "accuracy.model", acc.model, str(e)))
    return dataclasses.replace(acc, data="real"), out


def _check_variants(
    src: str,
    names: Sequence[str],
    t: Any,
    base: Any,
    acc: AccuracySpec,
    workloads: Mapping[str, Any],
) -> list[Problem]:
    """A perplexity block on a target with an accuracy hook: the hook accepts the base
    architecture on every workload that loaded, and a decode-mode variant's windows leave it a
    prompt to act on.

    ``names`` are the spec's ``workloads:`` entries, in order (their index names the key of a
    problem); ``workloads`` holds those that loaded."""
    if acc.measure != "perplexity" or t.accuracy_variant is None:
        return []
    out: list[Problem] = []
    modes: dict[str, int] = {}
    for i, w in enumerate(names):
        if w not in workloads:
            continue  # its load problem is reported already
        try:
            v = t.accuracy_variant(base, w)
        except (ValueError, ConfigError) as e:
            out.append(Problem(src, f"workloads[{i}]", w, str(e)))
            continue
        modes[v.mode] = max(modes.get(v.mode, 0), int(v.min_prompt_tokens))
    if "decode" in modes:
        prompt = acc.window_tokens - acc.decode_tokens
        if prompt < 1:
            out.append(
                Problem(src, "accuracy.decode_tokens", acc.decode_tokens,
                        f"must be less than accuracy.window_tokens ({acc.window_tokens}): the "
                        "rest of each window is the prefilled prompt",
                        f"1 to {acc.window_tokens - 1}")
            )  # fmt: skip
        elif prompt < modes["decode"]:
            out.append(
                Problem(src, "accuracy.window_tokens", acc.window_tokens,
                        f"leaves a prompt of {prompt} tokens before the {acc.decode_tokens} "
                        f"decoded ones; the {t.kind} accuracy hook acts only after "
                        f"{modes['decode']} (a shorter prompt would score exact attention)",
                        f"at least {modes['decode'] + acc.decode_tokens}")
            )  # fmt: skip
    return out
