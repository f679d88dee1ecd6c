"""The open choices of the DeltaLLM datapath and their accuracy cost, on a real decoder's inputs.

The DeltaLLM paper ([DELTALLM]) does not publish its lane layout, its τ or its θ, and the
sparsities it reports move a lot with them. :func:`run_choice_table` varies one choice at a
time around a baseline setting (today's design: θ = 4 key LSBs, W = 16, τ = 8, the G query heads
of a KV group × 4 tokens per VSSOS vector) and measures, on the same real inputs
(SmolLM2-135M by default, :mod:`.real`):

* ``ρ_K`` and ``ρ_S`` (and ``ρ_fine``): micro-averages over every layer and KV head of
  ``sparsity.passages`` passages, with their spread (:class:`~.real.Spread`);
* the attention-output error: relative L2 error, pooled over the ``error`` sample's layers and
  passages, against the same datapath without approximation (θ = 0, W = T, τ = ∞) and
  against exact float64 softmax attention of the unquantized tensors;
* the perplexity change with the datapath in the forward pass (:mod:`.forward`), against the
  model's exact attention: in one prefill of each ``perplexity`` passage, and when the last
  ``decode_tokens`` tokens are decoded one at a time after a prefill of the rest (prefill +
  decode).

Two reference rows come first: exact attention, and the datapath without its approximations
(its INT8 and fixed-point cost alone).

Public: :class:`ChoiceConfig`, :class:`SparsitySample`, :class:`ErrorSample`,
:class:`PerplexitySample`, :class:`ChoiceRow`, :class:`ChoiceTable`, :func:`run_choice_table`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from coaccel.spine.config import Problem, param

from .forward import DeltaAttention, DeltaSetting, decode_perplexity, prefill_perplexity
from .real import Spread

__all__ = [
    "ChoiceConfig",
    "ChoiceRow",
    "ChoiceTable",
    "ErrorSample",
    "PerplexitySample",
    "SparsitySample",
    "run_choice_table",
]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class SparsitySample:
    """Passages of the ρ_K / ρ_S statistics (every layer).

    Attributes:
        passages: pydoc passages. tokens: tokens per passage.
    """

    passages: int = param(default=8, ge=2, le=40, doc="pydoc passages")
    tokens: int = param(default=512, ge=16, le=8192, doc="tokens per passage")


@dataclass(frozen=True)
class ErrorSample:
    """Passages and layers of the attention-output error.

    Attributes:
        passages: pydoc passages. tokens: tokens per passage. layers: decoder layers.
    """

    passages: int = param(default=2, ge=1, le=40, doc="pydoc passages")
    tokens: int = param(default=512, ge=16, le=8192, doc="tokens per passage")
    layers: tuple[int, ...] = param(default=(0, 10, 20, 29), ge=0, doc="decoder layers")


@dataclass(frozen=True)
class PerplexitySample:
    """Passages of the perplexity change.

    Attributes:
        passages: pydoc passages. tokens: tokens per passage.
        decode_tokens: the last tokens of each passage decoded one at a time (prefill + decode).
    """

    passages: int = param(default=4, ge=1, le=40, doc="pydoc passages")
    tokens: int = param(default=512, ge=16, le=8192, doc="tokens per passage")
    decode_tokens: int = param(default=64, ge=1, doc="tokens decoded one at a time")


@dataclass(frozen=True)
class ChoiceConfig:
    """The choice table's settings (``arch_configs/studies/deltallm_choices.yaml``).

    Attributes:
        model: decoder of the real inputs.
        theta: baseline Delta-Key threshold, key LSBs. window: exact window W.
        tau: baseline VSSOS threshold, log2 units.
        layout: baseline lane layout, ``"group:P"`` or ``"head:P"`` (P = ``P_q``).
        thetas: θ values of the θ rows. taus: τ values of the τ rows.
        layouts: lane layouts of the layout rows.
        sparsity, error, perplexity: the samples.
    """

    VERSION: ClassVar[int] = 1

    model: Literal["smollm2-135m", "gemma3-270m"] = param(default="smollm2-135m", doc="decoder")
    theta: int = param(default=4, ge=0, le=255, doc="baseline θ, key LSBs")
    window: int = param(default=16, ge=1, doc="exact window W")
    tau: float = param(default=8.0, ge=1 / 256, doc="baseline τ, log2 units")
    layout: str = param(default="group:4", doc="baseline lane layout")
    thetas: tuple[int, ...] = param(default=(2, 4, 8), ge=0, le=255, doc="θ rows")
    taus: tuple[float, ...] = param(default=(4.0, 6.0, 8.0), ge=1 / 256, doc="τ rows")
    layouts: tuple[str, ...] = param(default=("group:4", "group:1", "head:4"), doc="layout rows")
    sparsity: SparsitySample = param(default=SparsitySample(), doc="ρ_K / ρ_S sample")
    error: ErrorSample = param(default=ErrorSample(), doc="attention-error sample")
    perplexity: PerplexitySample = param(default=PerplexitySample(), doc="perplexity sample")

    def validate(self) -> list[Problem | str]:
        """Cross-field rules: layouts parse; decoded tokens leave a prompt."""
        out: list[Problem | str] = []
        named = [("layout", self.layout)]
        named += [(f"layouts[{i}]", x) for i, x in enumerate(self.layouts)]
        for key, val in named:
            try:
                parse_layout(val)
            except ValueError as exc:
                out.append(Problem("", key, val, str(exc), "group:P or head:P"))
        pp = self.perplexity
        if pp.decode_tokens >= pp.tokens:
            msg = f"must be < perplexity.tokens ({pp.tokens})"
            out.append(Problem("", "perplexity.decode_tokens", pp.decode_tokens, msg))
        return out

    def settings(self) -> list[tuple[str, DeltaSetting]]:
        """``(choice, setting)`` rows: the layouts, then τ, then θ, each around the baseline;
        a setting that equals an earlier one is not repeated."""
        lay, pq = parse_layout(self.layout)
        base = DeltaSetting(self.theta, self.window, self.tau, lay, pq)
        rows: list[tuple[str, DeltaSetting]] = []
        seen: set[DeltaSetting] = set()
        cands = [("lane layout", dataclasses.replace(base, lane_layout=a, query_block=b))
                 for a, b in map(parse_layout, self.layouts)]  # fmt: skip
        cands += [("tau", dataclasses.replace(base, tau=t)) for t in self.taus]
        cands += [("theta", dataclasses.replace(base, theta=t)) for t in self.thetas]
        for what, st in cands:
            if st not in seen:
                seen.add(st)
                rows.append((what, st))
        return rows


def parse_layout(text: str) -> tuple[str, int]:
    """``"group:4"`` -> ``("group", 4)``.

    Raises:
        ValueError: not ``group:P`` or ``head:P`` with an integer ``P >= 1``.
    """
    name, _, p = str(text).partition(":")
    if name not in ("group", "head") or not p.isdigit() or int(p) < 1:
        raise ValueError(f"lane layout {text!r}: expected group:P or head:P, P >= 1")
    return name, int(p)


@dataclass(frozen=True)
class ChoiceRow:
    """One setting's sparsity and accuracy cost.

    Attributes:
        choice: what the row varies (``reference``, ``lane layout``, ``tau``, ``theta``).
        setting: the datapath setting (None for exact attention).
        label: text of the setting.
        lanes: lanes per VSSOS vector.
        rho_k: ``ρ_K`` with its spread (None for the reference rows).
        rho_s: ``ρ_S`` with its spread (None for the reference rows).
        rho_fine: ``ρ_fine`` (NaN for the reference rows).
        rel_l2_dense: attention-output relative L2 error against the datapath without its
            approximations (pooled).
        rel_l2_exact: the same against exact float64 softmax attention.
        ppl_prefill: perplexity of each passage, one prefill.
        ppl_decode: perplexity of each passage's decoded tokens (prefill + decode).
        d_ppl_prefill_pct: mean over passages of ``100·(ppl / ppl_exact − 1)``, prefill.
        d_ppl_decode_pct: the same, prefill + decode.
        d_ppl_prefill_sd: sample standard deviation of the per-passage changes (NaN for one).
        d_ppl_decode_sd: the same, prefill + decode.
    """

    choice: str
    setting: DeltaSetting | None
    label: str
    lanes: int
    rho_k: Spread | None
    rho_s: Spread | None
    rho_fine: float
    rel_l2_dense: float
    rel_l2_exact: float
    ppl_prefill: tuple[float, ...]
    ppl_decode: tuple[float, ...]
    d_ppl_prefill_pct: float
    d_ppl_decode_pct: float
    d_ppl_prefill_sd: float = math.nan
    d_ppl_decode_sd: float = math.nan


@dataclass(frozen=True)
class ChoiceTable:
    """The choice table: its rows, configuration and what was measured on.

    Attributes:
        config: the configuration. rows: the :class:`ChoiceRow` s (reference rows first).
        notes: the inputs (model, passages, sizes) and the time taken.
    """

    config: ChoiceConfig
    rows: tuple[ChoiceRow, ...]
    notes: tuple[str, ...]


def _lanes(model: Any, st: DeltaSetting) -> int:
    g = int(model.config.num_heads) // int(model.config.num_kv_heads)
    return (g if st.lane_layout == "group" else 1) * st.query_block


def _sparsity(cfg: ChoiceConfig, settings: Sequence[DeltaSetting], say: Progress) -> Any:
    from .real import measure_real_sparsity

    s = cfg.sparsity
    return measure_real_sparsity(
        cfg.model, passages=s.passages, tokens=s.tokens,
        thetas=tuple(dict.fromkeys(int(x.theta) for x in settings)), window=cfg.window,
        taus=tuple(dict.fromkeys(float(x.tau) for x in settings)),
        layouts=tuple(dict.fromkeys((x.lane_layout, x.query_block) for x in settings)),
        progress=say,
    )  # fmt: skip


def _errors(
    model: Any, cfg: ChoiceConfig, settings: Sequence[DeltaSetting], say: Progress
) -> list[tuple[float, float]]:
    """Pooled relative L2 errors ``(vs dense datapath, vs exact float)`` per setting."""
    from coaccel.models import deltallm as dl
    from coaccel.models.nn import decoder_attention, decoder_passages

    from .study import dense_float_attention

    e = cfg.error
    bad = [x for x in e.layers if x >= int(model.config.num_layers)]
    if bad:
        raise ValueError(f"error.layers {bad}: {cfg.model} has {model.config.num_layers} layers")
    sig = np.zeros(2)
    noise = np.zeros((len(settings), 2))
    for p in decoder_passages(model, e.passages, e.tokens):
        say(f"attention error: passage {p.topic}, layers {list(e.layers)}")
        for t in decoder_attention(model, [p], layers=e.layers):
            sv = np.repeat(t.v_scale, t.group)[:, None, None] * 2.0**-8

            def run(st: DeltaSetting, t: Any = t, sv: np.ndarray = sv) -> np.ndarray:
                r = dl.attention_fixed_fast(
                    t.q_int8, t.k_int8, t.v_int8, theta=int(st.theta), window=st.window,
                    tau=st.tau, q_scale=t.q_scale, k_scale=t.k_scale,
                    query_block=st.query_block, lane_layout=st.lane_layout,
                )  # fmt: skip
                return r.output * sv

            refs = (run(DeltaSetting.dense(t.tokens)), dense_float_attention(t.q, t.k, t.v))
            sig += [float(np.sum(y * y)) for y in refs]
            for i, st in enumerate(settings):
                y = run(st)
                noise[i] += [float(np.sum((y - r) ** 2)) for r in refs]
    return [(math.sqrt(a / sig[0]), math.sqrt(b / sig[1])) for a, b in noise]


def _perplexities(
    model: Any, cfg: ChoiceConfig, settings: Sequence[DeltaSetting | None], say: Progress
) -> list[tuple[list[float], list[float]]]:
    """Per setting (None: exact attention), the prefill and decode perplexity of each passage."""
    from coaccel.models.nn import decoder_passages

    pp = cfg.perplexity
    passages = decoder_passages(model, pp.passages, pp.tokens)
    out = []
    for st in settings:
        pre, dec = [], []
        label = "exact attention" if st is None else st.label
        for p in passages:
            say(f"perplexity: {label}, passage {p.topic}")
            attn = None if st is None else DeltaAttention.for_model(model, st)
            pre.append(prefill_perplexity(model, p.ids, attn).perplexity)
            dec.append(decode_perplexity(model, p.ids, pp.tokens - pp.decode_tokens,
                                         attn).perplexity)  # fmt: skip
        out.append((pre, dec))
    return out


def _change(ppl: Sequence[float], ref: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation over passages of ``100·(ppl / ref − 1)``."""
    d = [100.0 * (a / b - 1.0) for a, b in zip(ppl, ref, strict=True)]
    return float(np.mean(d)), float(np.std(d, ddof=1)) if len(d) > 1 else math.nan


def run_choice_table(cfg: ChoiceConfig, *, progress: Progress | None = None) -> ChoiceTable:
    """Measure every row of the choice table (module docstring).

    Args:
        cfg: the configuration (validated again here).
        progress: receives one line per step.

    Returns:
        The :class:`ChoiceTable`.

    Raises:
        MissingDependencyError: the model package is missing (the message says how to install).
        ConfigError: a bad configuration.
    """
    import time

    from coaccel.spine.config import override

    from .real import load_real_model

    cfg = override(cfg, {})
    say = progress or (lambda _m: None)
    start = time.perf_counter()
    model = load_real_model(cfg.model)
    rows_in = cfg.settings()
    settings = [st for _, st in rows_in]
    counts = _sparsity(cfg, settings, say)
    errs = _errors(model, cfg, settings, say)
    dense = DeltaSetting.dense(max(cfg.perplexity.tokens, cfg.error.tokens))
    ppl = _perplexities(model, cfg, [None, dense, *settings], say)
    ex_pre, ex_dec = ppl[0]
    nan = math.nan
    (dp, dps), (dd, dds) = _change(ppl[1][0], ex_pre), _change(ppl[1][1], ex_dec)
    rows = [
        ChoiceRow("reference", None, "exact softmax attention (float32 model)", 0, None, None,
                  nan, nan, nan, tuple(ex_pre), tuple(ex_dec), 0.0, 0.0),
        ChoiceRow("reference", dense, "datapath without approximation (θ=0, W=T, τ=∞)", 0,
                  None, None, nan, 0.0, nan, tuple(ppl[1][0]), tuple(ppl[1][1]), dp, dd, dps,
                  dds),
    ]  # fmt: skip
    for (what, st), (e_dense, e_exact), (pre, dec) in zip(rows_in, errs, ppl[2:], strict=True):
        lay = (st.lane_layout, st.query_block)
        (dp, dps), (dd, dds) = _change(pre, ex_pre), _change(dec, ex_dec)
        rows.append(ChoiceRow(
            what, st, st.label, _lanes(model, st), counts.rho_k(int(st.theta)),
            counts.rho_s(int(st.theta), float(st.tau), lay),
            counts.rho_fine(int(st.theta), float(st.tau)).mean, e_dense, e_exact, tuple(pre),
            tuple(dec), dp, dd, dps, dds,
        ))  # fmt: skip
    notes = (
        f"{cfg.model}: ρ_K, ρ_S on {len(counts.topics)} passages x {counts.tokens} tokens "
        f"({', '.join(counts.topics)}), all {len(counts.layers)} layers; attention error on "
        f"{cfg.error.passages} passage(s) x {cfg.error.tokens} tokens, layers "
        f"{list(cfg.error.layers)}; perplexity on {cfg.perplexity.passages} passage(s) x "
        f"{cfg.perplexity.tokens} tokens (decode: the last {cfg.perplexity.decode_tokens} "
        "decoded one at a time, P_q = 1, k/v scales of the prefilled prompt)",
        f"run time {time.perf_counter() - start:.0f} s",
    )
    return ChoiceTable(cfg, tuple(rows), notes)
