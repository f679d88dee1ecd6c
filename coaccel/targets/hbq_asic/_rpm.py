"""The paper's analytical system model ([R-PM] src/perf_model.py), restated term by term.

The recomputed system-energy and speedup targets come from this model; the validation compares our
*simulated* figures with them. Restating the model lets the report attribute every joule of a
difference: the simulator counts DRAM bytes from its traces, [R-PM] from four closed-form terms, and
the terms can be compared one for one (:func:`sim_dram_terms` sorts simulated traffic into the same
terms). Pure arithmetic on a model shape; no simulator, no I/O.

[R-PM]'s DRAM terms for a prefill of ``n`` tokens (elements, then x bytes/element x 32 pJ/B):

* ``weights``: every linear weight (projections, gated MLP, LM head) streamed once per token
  tile: ``weights x n / Tk``.
* ``qkvo``: the Q/K/V/O activation tiles: ``4·L·n·E`` times the per-output-tile share
  ``(q + o)·(h / 2(h+g))·E/To + (k + v)·(g / 2(h+g))·E·(g/h)/To`` (h query heads, g KV heads).
* ``kv``: the KV cache written and read: ``4·L·n·kv_dim x 1024/To`` at the KV width.
* ``mlp``: the E-wide slice of the MLP's ``L·n·(2E + 3M)`` activations once per ``M/To``
  output tile: ``E/(2E+M) x M/To x L·n·(2E+3M)``. This is (within 7 %) the gate/up inputs
  re-read once per output-channel tile; the down projection's input (``n x M``, re-read
  ``E/To`` times by an output-stationary schedule) has no term, nor have the LM head's
  activations.

core = J/MAC x (linear + attention MACs); SRAM = MACs / 4096 x (24.28 pJ + 29.2 pJ x 2 if
the partial sums are 16-bit else 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coaccel.spine.config import FrozenMap

__all__ = [
    "RPM_COMPONENTS",
    "rpm_energy_j",
    "rpm_energy_sigma_j",
    "RPM_DRAM_J_PER_BYTE",
    "RPM_PARAMS",
    "RPM_TERMS",
    "RpmArch",
    "rpm_dram_elems",
    "rpm_energy",
    "rpm_macs",
    "sim_dram_terms",
]

RPM_DRAM_J_PER_BYTE = 3.2e-11
"""[R-PM] src/perf_model.py DRAM energy, J/byte."""

_SRAM_ACT_J = 2.428e-11
_SRAM_PSUM_J = 2.92e-11
_LANES = 32 * 128
_TO = 256
"""[R-PM] output-channel tile To (= [R-ACC] TILE_PSUM)."""

RPM_TERMS = ("weights", "qkvo", "kv", "mlp")
"""[R-PM]'s DRAM terms, in its order."""


RPM_COMPONENTS = ("pe_array", "act_buffer", "psum_buffer", "dram")
"""The components the paper's system model ([R-PM] src/perf_model.py) counts: core, SRAM
(ACT + PSUM) and DRAM; a comparison with its figures compares these alone."""


def rpm_energy_j(cb: Any) -> float:
    """Energy of the components [R-PM] counts (:data:`RPM_COMPONENTS`) in a cost breakdown, J."""
    return float(sum(cb.energy_j.get(k, 0.0) for k in RPM_COMPONENTS))


def rpm_energy_sigma_j(cb: Any) -> float:
    """One-sigma uncertainty of :func:`rpm_energy_j` (independent components), J."""
    return math.sqrt(sum(cb.energy_sigma_j.get(k, 0.0) ** 2 for k in RPM_COMPONENTS))


@dataclass(frozen=True)
class RpmArch:
    """One column of the [R-PM] per-architecture parameters.

    Attributes:
        j_per_mac: core energy, J/MAC.
        act_bytes: activation bytes per element (scale bits included).
        wgt_bytes: weight bytes per element.
        kv_bytes: KV-cache bytes per element.
        tk: token tile depth Tk (weights are re-streamed ``n / Tk`` times).
        psum16: 16-bit partial sums (doubles the PSUM SRAM energy).
    """

    j_per_mac: float
    act_bytes: float
    wgt_bytes: float
    kv_bytes: float
    tk: int
    psum16: bool


RPM_PARAMS: Mapping[str, RpmArch] = FrozenMap(
    {
        "amove_28nm": RpmArch(5.04e-13, 4.25 / 8, 4.25 / 8, 5 / 8, 256, True),
        "mxfp_w4a8_28nm": RpmArch(1.50e-13, 8.25 / 8, 4.25 / 8, 8.25 / 8, 256, True),
        "nvfp4_28nm": RpmArch(1.68125e-13, 4.5 / 8, 4.5 / 8, 4.5 / 8, 256, True),
        "hbq_a_28nm": RpmArch(1.336e-13, 5.19 / 8, 4.25 / 8, 5.19 / 8, 512, False),
        "hbq_e_28nm": RpmArch(8.72e-14, 5.1 / 8, 4.125 / 8, 5.1 / 8, 512, False),
    }
)
"""[R-PM] src/perf_model.py parameters, by our architecture name (KV "act" = activation width)."""


def rpm_macs(model: Any, tokens: int) -> tuple[int, int]:
    """MACs of a prefill by the [R-PM] src/perf_model.py formulas.

    linear = L·n·(E·q + 2E·kv + q·E + 3E·M) + n·E·V; attention = L·n²·(q + kv), with q the
    query width (heads x head_dim) and kv the key/value width (kv_heads x head_dim).

    Args:
        model: a model shape (``hidden``, ``intermediate``, ``layers``, ``heads``,
            ``kv_heads``, ``head_dim``, ``vocab``).
        tokens: prefill length n.

    Returns:
        ``(linear_macs, attention_macs)``.
    """
    e, m, n = model.hidden, model.intermediate, tokens
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    linear = model.layers * n * (e * q + 2 * e * kv + q * e + 3 * e * m) + n * e * model.vocab
    attention = model.layers * n * n * (q + kv)
    return linear, attention


def rpm_dram_elems(model: Any, tokens: int, tk: int) -> dict[str, float]:
    """[R-PM]'s DRAM traffic terms in elements (module docstring), before the byte widths.

    Args:
        model: a model shape (as :func:`rpm_macs`).
        tokens: prefill length n (also [R-PM]'s sequence tile T).
        tk: token tile depth Tk.

    Returns:
        ``{"weights", "qkvo", "kv", "mlp"}`` -> elements moved.
    """
    e, m, n, L = model.hidden, model.intermediate, tokens, model.layers
    h, g = model.heads, model.kv_heads
    q, kv = h * model.head_dim, g * model.head_dim
    weights = L * (e * q + 2 * e * kv + q * e + 3 * e * m) + e * model.vocab
    groups = 2 * (h + g)
    share = 2 * (h / groups) * e / _TO + 2 * (g / groups) * e * (g / h) / _TO
    return {
        "weights": weights * tokens / tk,
        "qkvo": 4 * L * n * e * share,
        "kv": 4 * L * n * kv * (1024 / _TO),
        "mlp": e / (2 * e + m) * (m / _TO) * L * n * (2 * e + 3 * m),
    }


def rpm_energy(model: Any, arch: str, tokens: int = 2048) -> dict[str, Any]:
    """The [R-PM] energy of a prefill on one of the five [R-PM] architectures.

    Args:
        model: a model shape (as :func:`rpm_macs`).
        arch: a key of :data:`RPM_PARAMS`.
        tokens: prefill length.

    Returns:
        ``dram``, ``core``, ``sram``, ``total`` in J, ``dram_bytes`` (term -> bytes) and
        ``macs`` (linear + attention).
    """
    p = RPM_PARAMS[arch]
    lin, att = rpm_macs(model, tokens)
    elems = rpm_dram_elems(model, tokens, p.tk)
    width = {"weights": p.wgt_bytes, "qkvo": p.act_bytes, "kv": p.kv_bytes, "mlp": p.act_bytes}
    dram_bytes = {k: elems[k] * width[k] for k in RPM_TERMS}
    dram = sum(dram_bytes.values()) * RPM_DRAM_J_PER_BYTE
    core = p.j_per_mac * (lin + att)
    sram = (lin + att) / _LANES * (_SRAM_ACT_J + _SRAM_PSUM_J * (2 if p.psum16 else 1))
    return {
        "dram": dram,
        "core": core,
        "sram": sram,
        "total": dram + core + sram,
        "dram_bytes": dram_bytes,
        "macs": lin + att,
    }


_QKVO_TENSORS = ("x", "q", "attn_out", "x2")
_KV_TENSORS = ("k_cache", "v_cache")
_MLP_TENSORS = ("x3", "h", "x4")
_LM_HEAD_TENSORS = ("x_final", "logits")


def sim_dram_terms(stats: Any) -> dict[str, int]:
    """Sort a simulated prefill's DRAM bytes into [R-PM]'s terms, plus what it has none for.

    Uses the trace tensor names of :func:`coaccel.models.hbq.iter_transformer_segments`:
    weights are the ``w*`` tensors; ``qkvo`` the projections' inputs and outputs other than the
    KV cache (``x``, ``q``, ``attn_out``, ``x2``); ``kv`` the K/V cache writes and reads;
    ``mlp`` the gate/up input re-reads, the ``h`` writes and the down projection's output.
    Not in [R-PM]: ``down_proj_input`` (the down projection's activation reads) and
    ``lm_head_acts`` (the LM head's input reads and logit writes); anything else is ``other``.

    Args:
        stats: an :class:`~coaccel.sim.hbq_asic.HbqSimStats` of a prefill.

    Returns:
        Term -> bytes; the values sum to ``stats.dram.total_bytes``.
    """
    by = dict(stats.dram.by_tensor)
    out = {k: 0 for k in (*RPM_TERMS, "down_proj_input", "lm_head_acts", "other")}
    down = stats.by_name.get("down_proj")
    if down is not None:
        out["down_proj_input"] = down.dram_read_bytes - by.get("w_down", 0)
    for name, nbytes in by.items():
        if name.startswith("w"):
            out["weights"] += nbytes
        elif name in _QKVO_TENSORS:
            out["qkvo"] += nbytes
        elif name in _KV_TENSORS:
            out["kv"] += nbytes
        elif name in _MLP_TENSORS:
            out["mlp"] += nbytes
        elif name in _LM_HEAD_TENSORS:
            out["lm_head_acts"] += nbytes
        else:
            out["other"] += nbytes
    out["mlp"] -= out["down_proj_input"]
    if out["mlp"] < 0:
        raise ValueError(
            f"down_proj reads {out['down_proj_input']} activation bytes but the MLP tensors "
            f"move only {out['mlp'] + out['down_proj_input']}: the trace's tensor names are "
            "not the ones sim_dram_terms knows"
        )
    return out
