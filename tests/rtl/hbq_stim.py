"""HBQ stimulus, bit packing and reference wrappers shared by the HBQ PE / array testbenches.

Plain numpy (no cocotb): the testbenches (``tb_hbq_pe.py``, ``tb_hbq_array.py``) import it inside
the simulator process. Everything is seeded through ``rng: np.random.Generator`` arguments.

The HDL parameter encoding of the level-2 schemes (``ACT_L2`` / ``W_L2`` of ``rtl/hbq/hbq_pe.v``)
maps to the reference's scheme names through :data:`L2_SCHEMES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from coaccel.models import hbq as ref
from coaccel.models.formats import pack_bits, quantize

L2_SCHEMES: dict[int, str | None] = {
    0: None,
    1: "pot",
    2: "int",
    3: "sig1",
    4: "sig2",
    5: "sig3",
    6: "sig4",
    7: "mix",
}
"""``ACT_L2`` / ``W_L2`` parameter value -> reference L2 scheme name (None = no L2)."""
L2_CODES = {name: code for code, name in L2_SCHEMES.items()}
"""Reference scheme name -> HDL parameter value."""
OUT_MODES = {0: "exact", 1: "rtl_compat"}
"""``OUT_MODE`` parameter value -> reference ``l1_convert`` mode."""
W_BITS = 4
"""Weight element width (E2M1)."""
VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"
"""The committed corner-case vectors (``tests/vectors/``, written by ``make_vectors.py``)."""
ELEM_VECTOR_FILES = {4: "elem_e2m1.npz", 5: "elem_e2m2.npz", 6: "elem_e2m3.npz"}
"""Element-vector file per element width (HBQ's E2Mm formats are bias 1 with subnormals, the
same code tables as the E2M1 / E2M2 / E2M3 files)."""


@dataclass(frozen=True)
class PeConfig:
    """The HDL parameters of one ``hbq_pe`` build, in the reference's terms.

    Attributes:
        block: L1 block length ``B``.
        ub: micro-block length ``UB``.
        act_bits: activation element width (``ACT_BITS``).
        act_l2: activation L2 scheme name (None = no L2).
        act_l2_bits: activation L2 code width.
        weight_l2: weight L2 scheme name (None = no L2, ``"mix"`` = SIG_2/SIG_3 per block).
        weight_l2_bits: weight L2 code width.
        mode: ``"exact"`` or ``"rtl_compat"``.
    """

    block: int
    ub: int
    act_bits: int
    act_l2: str | None
    act_l2_bits: int
    weight_l2: str | None
    weight_l2_bits: int
    mode: str

    @property
    def n_ub(self) -> int:
        """Micro-blocks per L1 block."""
        return self.block // self.ub

    @classmethod
    def from_params(cls, params: Mapping[str, int]) -> PeConfig:
        """Build from an HDL parameter dict (missing keys take the ``hbq_pe`` defaults).

        Args:
            params: ``B, UB, ACT_BITS, ACT_L2, ACT_L2_BITS, W_L2, W_L2_BITS, OUT_MODE``.

        Returns:
            The configuration.
        """
        p = {
            "B": 128,
            "UB": 32,
            "ACT_BITS": 5,
            "ACT_L2": 3,
            "ACT_L2_BITS": 2,
            "W_L2": 7,
            "W_L2_BITS": 2,
            "OUT_MODE": 0,
            **params,
        }
        return cls(
            block=int(p["B"]),
            ub=int(p["UB"]),
            act_bits=int(p["ACT_BITS"]),
            act_l2=L2_SCHEMES[int(p["ACT_L2"])],
            act_l2_bits=int(p["ACT_L2_BITS"]),
            weight_l2=L2_SCHEMES[int(p["W_L2"])],
            weight_l2_bits=int(p["W_L2_BITS"]),
            mode=OUT_MODES[int(p["OUT_MODE"])],
        )


@dataclass
class Blocks:
    """A batch of ``n`` weight/activation L1 block pairs as raw codes (what the PE ports take).

    Attributes:
        w_codes: ``(n, B)`` uint8 E2M1 codes.
        w_scale: ``(n,)`` uint8 E5M3 codes.
        w_l2: ``(n, B/UB)`` uint8 weight L2 codes.
        w_scheme: ``(n,)`` uint8 Mix selectors (0 = SIG_2, 1 = SIG_3).
        a_codes: ``(n, B)`` uint8 activation codes.
        a_scale: ``(n,)`` uint8 E5M3 codes.
        a_l2: ``(n, B/UB)`` uint8 activation L2 codes.
        kind: ``(n,)`` stimulus class label per block (for failure messages).
    """

    w_codes: npt.NDArray[np.uint8]
    w_scale: npt.NDArray[np.uint8]
    w_l2: npt.NDArray[np.uint8]
    w_scheme: npt.NDArray[np.uint8]
    a_codes: npt.NDArray[np.uint8]
    a_scale: npt.NDArray[np.uint8]
    a_l2: npt.NDArray[np.uint8]
    kind: npt.NDArray[np.str_]

    def __len__(self) -> int:
        return int(self.w_codes.shape[0])

    @staticmethod
    def concat(parts: list[Blocks]) -> Blocks:
        """Concatenate batches along the block axis."""
        fields = Blocks.__dataclass_fields__
        return Blocks(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in fields})


def _e5m3(e: npt.NDArray[np.int64], m: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
    return ((e << 3) | m).astype(np.uint8)


def random_blocks(cfg: PeConfig, n: int, rng: np.random.Generator, kind: str = "uniform") -> Blocks:
    """Random raw-code blocks of one stimulus class.

    Classes:
        ``uniform``: every element code equally likely (all 16 E2M1 / 2^ACT_BITS codes, -0
        included), uniform L2 codes and scheme bits; scale exponents mostly in 5..20 (results in
        the normal FP16 range), a quarter over the full 1..30 (saturation and flush).
        ``sparse``: 1 to 4 nonzero elements, the rest +0 or -0 codes (small ``P_total``: the
        converters' left-normalization path and rounding ties).
        ``zero``: all weights or all activations zero (+0 / -0 codes mixed).
        ``max``: every element at ±max magnitude with one common sign pattern per block and
        every L2 code at its maximum (the accumulator-width worst case), full-range scales.
        ``cancel``: each micro-block holds pairs ``(w, a), (w, -a)``: sums cancel to zero.

    Args:
        cfg: the PE configuration.
        n: number of blocks.
        rng: random generator.
        kind: the class name above.

    Returns:
        The :class:`Blocks` (``kind`` labels set to ``kind``).
    """
    b, nub = cfg.block, cfg.n_ub
    ab = cfg.act_bits
    w = rng.integers(0, 1 << W_BITS, (n, b))
    a = rng.integers(0, 1 << ab, (n, b))
    wl2 = rng.integers(0, 1 << cfg.weight_l2_bits, (n, nub))
    al2 = rng.integers(0, 1 << cfg.act_l2_bits, (n, nub))
    sch = rng.integers(0, 2, n)
    centered = rng.random(n) < 0.75
    ew = np.where(centered, rng.integers(5, 21, n), rng.integers(1, 31, n))
    ex = np.where(centered, rng.integers(5, 21, n), rng.integers(1, 31, n))
    mw, mx = rng.integers(0, 8, n), rng.integers(0, 8, n)
    w_sign, a_sign = 1 << (W_BITS - 1), 1 << (ab - 1)
    if kind == "uniform":
        pass
    elif kind == "sparse":
        keep = np.zeros((n, b), dtype=bool)
        for i in range(n):
            keep[i, rng.choice(b, size=int(rng.integers(1, 5)), replace=False)] = True
        w = np.where(keep, w, rng.integers(0, 2, (n, b)) * w_sign)
        a = np.where(keep, a, rng.integers(0, 2, (n, b)) * a_sign)
    elif kind == "zero":
        zero_w = rng.random(n) < 0.5
        zeros_w = rng.integers(0, 2, (n, b)) * w_sign
        zeros_a = rng.integers(0, 2, (n, b)) * a_sign
        w = np.where(zero_w[:, None], zeros_w, w)
        a = np.where(zero_w[:, None], a, zeros_a)
    elif kind == "max":
        w_max, a_max = w_sign - 1, a_sign - 1
        pattern = rng.integers(0, 4, n)  # all +, all -, w sign random, alternating
        sw = np.zeros((n, b), dtype=np.int64)
        sa = np.zeros((n, b), dtype=np.int64)
        sw[pattern == 1] = 1
        rnd = rng.integers(0, 2, (n, b))
        sw = np.where((pattern == 2)[:, None], rnd, sw)
        sa = np.where((pattern == 2)[:, None], rnd, sa)  # same sign: every product positive
        alt = np.arange(b) % 2
        sw = np.where((pattern == 3)[:, None], alt, sw)
        w = sw * w_sign + w_max
        a = sa * a_sign + a_max
        wl2[:] = (1 << cfg.weight_l2_bits) - 1
        al2[:] = (1 << cfg.act_l2_bits) - 1
        sch = rng.integers(0, 2, n)
        ew, ex = rng.integers(1, 31, n), rng.integers(1, 31, n)
    elif kind == "cancel":
        half = b // 2
        a[:, half:] = a[:, :half] ^ a_sign
        w[:, half:] = w[:, :half]
        if cfg.ub < b:
            # Keep each pair inside one micro-block: interleave (x, -x) pairs within micro-blocks.
            order = np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)
            w, a = w[:, order], a[:, order]
    else:
        raise ValueError(f"unknown stimulus kind {kind!r}")
    return Blocks(
        w_codes=w.astype(np.uint8),
        w_scale=_e5m3(ew, mw),
        w_l2=wl2.astype(np.uint8),
        w_scheme=sch.astype(np.uint8),
        a_codes=a.astype(np.uint8),
        a_scale=_e5m3(ex, mx),
        a_l2=al2.astype(np.uint8),
        kind=np.full(n, kind),
    )


REFERENCE_ACT_BITS = (4, 5)
"""Activation widths the reference datapath (``coaccel.models.hbq.products``) decodes."""


@dataclass(frozen=True)
class Expected:
    """Expected PE outputs of a batch (the fields of ``DotResult`` the RTL exposes)."""

    ub_sums: npt.NDArray[np.int64]
    scaled: npt.NDArray[np.int64]
    p_total: npt.NDArray[np.int64]
    F: int  # noqa: N815  (the spec's name)
    bits: npt.NDArray[np.uint16]


def element_units(codes: npt.NDArray[np.uint8], bits: int) -> npt.NDArray[np.int64]:
    """Element values in units of ``2**-(bits - 3)``, from the spec's value table (§1.2).

    Written from the format definition (sign-magnitude, 2 exponent bits, bias 1, subnormals:
    ``e = 0`` gives ``m / 2^mb``, else ``(1 + m / 2^mb) · 2^(e - 1)``) with exact fractions, for
    element widths the reference's integer view does not cover (E2M3 .. E2M5).

    Args:
        codes: element codes, any shape.
        bits: element width, 4..8.

    Returns:
        int64 values times ``2**(bits - 3)`` (exact integers), shape of ``codes``.
    """
    mb = bits - 3
    table = []
    for code in range(1 << bits):
        s, e, m = code >> (bits - 1), (code >> mb) & 3, code & ((1 << mb) - 1)
        frac = Fraction(m, 1 << mb)
        value = frac if e == 0 else (1 + frac) * 2 ** (e - 1)
        units = value * (1 << mb) * (-1 if s else 1)
        if units.denominator != 1:
            raise AssertionError(f"E2M{mb} code {code} is not a multiple of 2^-{mb}")
        table.append(int(units))
    return np.asarray(table, dtype=np.int64)[np.asarray(codes, dtype=np.int64)]


def reference(cfg: PeConfig, blk: Blocks) -> Expected:
    """Expected FP16 outputs and intermediates of a batch.

    For ``ACT_BITS`` 4 and 5 this is :func:`coaccel.models.hbq.block_dot`. For wider activations
    (which the reference's element decoder does not accept) the products come from
    :func:`element_units` and the remaining stages from the reference's width-agnostic
    :func:`~coaccel.models.hbq.l2_scale`, :func:`~coaccel.models.hbq.l2_sum` and
    :func:`~coaccel.models.hbq.l1_convert`.

    Args:
        cfg: the PE configuration.
        blk: the blocks.

    Returns:
        The :class:`Expected` values (``ub_sums``, ``scaled``, ``p_total``, ``F``, ``bits``).
    """
    mix = cfg.weight_l2 == "mix"
    w_l2 = blk.w_l2 if cfg.weight_l2 is not None else None
    w_scheme = blk.w_scheme if mix else None
    a_l2 = blk.a_l2 if cfg.act_l2 is not None else None
    l2 = {
        "act_l2": cfg.act_l2,
        "act_l2_bits": cfg.act_l2_bits,
        "weight_l2": cfg.weight_l2,
        "weight_l2_bits": cfg.weight_l2_bits,
    }
    if cfg.act_bits in REFERENCE_ACT_BITS:
        r = ref.block_dot(
            blk.w_codes,
            blk.w_scale,
            w_l2,
            w_scheme,
            blk.a_codes,
            blk.a_scale,
            a_l2,
            ub=cfg.ub,
            w_elem_bits=W_BITS,
            a_elem_bits=cfg.act_bits,
            out="fp16",
            mode=cfg.mode,
            **l2,
        )
        return Expected(r.ub_sums, r.scaled, r.p_total, int(r.F), r.bits)
    pf = (W_BITS - 3) + (cfg.act_bits - 3)
    p = element_units(blk.w_codes, W_BITS) * element_units(blk.a_codes, cfg.act_bits)
    ub_sums = p.reshape(len(blk), cfg.n_ub, cfg.ub).sum(-1).astype(np.int32)
    scaled, f = ref.l2_scale(ub_sums, w_l2, w_scheme, a_l2, product_frac=pf, **l2)
    p_total = ref.l2_sum(scaled)
    bits, _ = ref.l1_convert(p_total, f, blk.w_scale, blk.a_scale, out="fp16", mode=cfg.mode)
    return Expected(ub_sums, scaled, p_total, int(f), bits)


def boundary_blocks(cfg: PeConfig, n: int, rng: np.random.Generator) -> Blocks:
    """Blocks whose scale exponents put the FP16 result at the flush / saturation boundaries.

    Random blocks get ``Ex + Ew`` chosen (from the reference's ``P_total`` and the leading-one
    position of ``|P_total|·(8+Mx)(8+Mw)``) so that the biased result exponent before rounding is
    one of -1, 0, 1, 2, 29, 30, 31, 32; that covers results that round up to the smallest normal,
    flush to +0, round up to 2^16 and saturate.

    Args:
        cfg: the PE configuration.
        n: number of blocks (blocks whose ``P_total`` is zero are replaced by sparse ones).
        rng: random generator.

    Returns:
        The :class:`Blocks`, labelled ``"boundary"``.
    """
    blk = Blocks.concat(
        [random_blocks(cfg, n - n // 2, rng, "uniform"), random_blocks(cfg, n // 2, rng, "sparse")]
    )
    res = reference(cfg, blk)
    s = (8 + (blk.w_scale.astype(np.int64) & 7)) * (8 + (blk.a_scale.astype(np.int64) & 7))
    q = np.abs(res.p_total.astype(np.int64)) * s
    k = np.frexp(q.astype(np.float64))[1] - 1  # leading-one index (q < 2^53)
    target = rng.choice(np.array([-1, 0, 1, 2, 29, 30, 31, 32]), size=len(blk))
    esum = np.clip(target - k + 21 + res.F, 2, 60)  # E = k + Ex + Ew - 21 - F (exact mode)
    ex = np.clip(esum // 2, 1, 30)
    ew = np.clip(esum - ex, 1, 30)
    ex = np.clip(esum - ew, 1, 30)
    blk.a_scale = _e5m3(ex, blk.a_scale.astype(np.int64) & 7)
    blk.w_scale = _e5m3(ew, blk.w_scale.astype(np.int64) & 7)
    blk.kind = np.full(len(blk), "boundary")
    return blk


def tie_blocks(cfg: PeConfig, n: int, rng: np.random.Generator) -> Blocks:
    """Blocks whose exact-mode rounding is a tie (guard bit 1, sticky bits 0), odd and even.

    Sparse random blocks are filtered on ``q = |P_total|·(8+Mx)(8+Mw)``: a tie needs ``q``
    with more than 11 significant bits whose dropped low bits are exactly ``100...0``.

    Args:
        cfg: the PE configuration.
        n: number of blocks wanted.
        rng: random generator.

    Returns:
        Up to ``n`` :class:`Blocks` labelled ``"tie"`` (fewer only if the search gives up).
    """
    found: list[Blocks] = []
    total = 0
    for _ in range(200):
        cand = random_blocks(cfg, 4096, rng, "sparse")
        res = reference(cfg, cand)
        s = (8 + (cand.w_scale.astype(np.int64) & 7)) * (8 + (cand.a_scale.astype(np.int64) & 7))
        q = np.abs(res.p_total.astype(np.int64)) * s
        nbits = np.frexp(q.astype(np.float64))[1]
        drop = np.clip(nbits - 11, 0, 62)
        rem = q & ((np.int64(1) << drop) - 1)
        tie = (drop > 0) & (rem == (np.int64(1) << drop) >> 1)
        idx = np.flatnonzero(tie)[: n - total]
        if idx.size:
            part = Blocks(**{f: getattr(cand, f)[idx] for f in Blocks.__dataclass_fields__})
            # Keep the results in the normal range so the tie decides the output bits.
            part.w_scale = _e5m3(np.full(idx.size, 15), part.w_scale.astype(np.int64) & 7)
            part.a_scale = _e5m3(np.full(idx.size, 15), part.a_scale.astype(np.int64) & 7)
            found.append(part)
            total += idx.size
        if total >= n:
            break
    blk = Blocks.concat(found) if found else random_blocks(cfg, 0, rng)
    blk.kind = np.full(len(blk), "tie")
    return blk


QUANT_DISTS = ("gauss", "outlier", "zero", "wide")
"""Float-tensor distributions of :func:`real_tensor`."""


def real_tensor(
    rows: int, cols: int, rng: np.random.Generator, dist: str
) -> npt.NDArray[np.float32]:
    """A float32 test tensor ``(rows, cols)`` of one distribution.

    ``gauss``: standard normal. ``outlier``: normal plus, in each row, 1 to 4 outliers of 20 to
    500 standard deviations (the activation-outlier pattern that L2 scales address).
    ``zero``: normal with a third of the rows all zero and random 8-element runs zeroed
    elsewhere (all-zero L1 blocks and micro-blocks). ``wide``: normal rows times ``2**u``,
    ``u`` uniform in [-14, 12] per row (L1 scales over most of the E5M3 range, clipping at both
    ends included).

    Args:
        rows: rows (each row is one or more L1 blocks along ``cols``).
        cols: columns.
        rng: random generator.
        dist: one of :data:`QUANT_DISTS`.

    Returns:
        float32 array.
    """
    x = rng.standard_normal((rows, cols))
    if dist == "gauss":
        pass
    elif dist == "outlier":
        for r in range(rows):
            idx = rng.choice(cols, size=int(rng.integers(1, 5)), replace=False)
            x[r, idx] *= rng.uniform(20.0, 500.0, idx.size)
    elif dist == "zero":
        x[rng.random(rows) < 1 / 3] = 0.0
        for r in range(rows):
            start = int(rng.integers(0, max(1, cols - 8)))
            x[r, start : start + 8] = 0.0
    elif dist == "wide":
        x *= 2.0 ** rng.uniform(-14.0, 12.0, (rows, 1))
    else:
        raise ValueError(f"unknown distribution {dist!r}; valid: {', '.join(QUANT_DISTS)}")
    return x.astype(np.float32)


def quantize_operands(
    cfg: PeConfig, x_w: npt.NDArray[np.float32], x_a: npt.NDArray[np.float32]
) -> dict[str, npt.NDArray | None]:
    """Quantize weights and activations with the HBQ reference quantizer for a PE configuration.

    Weights use ``role="weight"`` (E2M1, the configuration's weight L2 scheme); activations use
    ``role="activation"`` (E2M2) or, for ``ACT_BITS = 4``, ``role="kv"`` (E2M1 elements with
    activation L2 settings). Both are blocked along the last axis with ``B`` and ``UB``.

    Args:
        cfg: the PE configuration (``act_bits`` 4 or 5: the quantizer's element formats).
        x_w: weights ``(N, K)``, ``K`` a multiple of ``B``.
        x_a: activations ``(M, K)``.

    Returns:
        Code arrays in :func:`coaccel.models.hbq.hbq_gemm_codes` layout: ``w_codes (N, nb, B)``,
        ``w_scale (N, nb)``, ``w_l2 (N, nb, B/UB)`` or None, ``w_scheme (N, nb)`` or None, and
        the ``a_*`` counterparts.
    """
    if cfg.act_bits not in (4, 5):
        raise ValueError(f"the HBQ quantizer has no E2M{cfg.act_bits - 3} activation format")
    common = {"block": cfg.block, "ub": cfg.ub}
    qw = quantize(
        x_w,
        "hbq-e",
        role="weight",
        l2=cfg.weight_l2 or "none",
        l2_bits=cfg.weight_l2_bits if cfg.weight_l2 else 0,
        **common,
    )
    qa = quantize(
        x_a,
        "hbq-e",
        role="kv" if cfg.act_bits == 4 else "activation",
        l2=cfg.act_l2 or "none",
        l2_bits=cfg.act_l2_bits if cfg.act_l2 else 0,
        **common,
    )
    return {
        "w_codes": qw.codes,
        "w_scale": qw.scales,
        "w_l2": qw.l2_codes,
        "w_scheme": qw.scheme,
        "a_codes": qa.codes,
        "a_scale": qa.scales,
        "a_l2": qa.l2_codes,
    }


def quantized_blocks(cfg: PeConfig, n: int, rng: np.random.Generator, dist: str) -> Blocks:
    """Block pairs quantized from real float tensors by the reference quantizer.

    Args:
        cfg: the PE configuration (``act_bits`` 4 or 5).
        n: number of block pairs.
        rng: random generator.
        dist: weight/activation distribution (:data:`QUANT_DISTS`); weights are drawn from
            ``gauss`` or ``wide``, activations from ``dist``.

    Returns:
        The :class:`Blocks`, labelled ``"q_<dist>"``.
    """
    x_w = real_tensor(n, cfg.block, rng, "wide" if dist == "wide" else "gauss")
    if dist == "zero":
        x_w[rng.random(n) < 0.2] = 0.0
    x_a = real_tensor(n, cfg.block, rng, dist)
    q = quantize_operands(cfg, x_w, x_a)
    zeros_ub = np.zeros((n, cfg.n_ub), dtype=np.uint8)

    def rows(a: npt.NDArray | None, fallback: npt.NDArray) -> npt.NDArray:
        return fallback if a is None else np.asarray(a).reshape(n, *fallback.shape[1:])

    return Blocks(
        w_codes=rows(q["w_codes"], np.zeros((n, cfg.block), np.uint8)).astype(np.uint8),
        w_scale=rows(q["w_scale"], np.zeros(n, np.uint8)).astype(np.uint8),
        w_l2=rows(q["w_l2"], zeros_ub).astype(np.uint8),
        w_scheme=rows(q["w_scheme"], np.zeros(n, np.uint8)).astype(np.uint8),
        a_codes=rows(q["a_codes"], np.zeros((n, cfg.block), np.uint8)).astype(np.uint8),
        a_scale=rows(q["a_scale"], np.zeros(n, np.uint8)).astype(np.uint8),
        a_l2=rows(q["a_l2"], zeros_ub).astype(np.uint8),
        kind=np.full(n, f"q_{dist}"),
    )


def pair_blocks(cfg: PeConfig, rng: np.random.Generator, max_blocks: int = 512) -> Blocks:
    """Every (weight code, activation code) pair, isolated so each product is observable.

    Each pair sits at a random position of its own micro-block, the rest of which holds zero
    codes (+0 or -0), so the stage-1 micro-block sums (``o_dbg_ub_sums``) are the individual
    products. With more pairs than ``max_blocks · B/UB`` several pairs share a micro-block.

    Args:
        cfg: the PE configuration.
        rng: random generator (positions, zero signs, scales, L2 codes).
        max_blocks: cap on the number of blocks.

    Returns:
        The :class:`Blocks`, labelled ``"pairs"``.
    """
    nw, na = 1 << W_BITS, 1 << cfg.act_bits
    w_all, a_all = np.meshgrid(np.arange(nw), np.arange(na), indexing="ij")
    w_all, a_all = w_all.ravel(), a_all.ravel()
    slots = max_blocks * cfg.n_ub
    per_ub = -(-w_all.size // slots)
    n = -(-w_all.size // (cfg.n_ub * per_ub))
    blk = random_blocks(cfg, n, rng, "uniform")
    w = rng.integers(0, 2, (n, cfg.block)) << (W_BITS - 1)
    a = rng.integers(0, 2, (n, cfg.block)) << (cfg.act_bits - 1)
    for k in range(w_all.size):
        slot, within = divmod(k, per_ub)
        b, j = divmod(slot, cfg.n_ub)
        pos = j * cfg.ub + (within if per_ub > 1 else int(rng.integers(0, cfg.ub)))
        w[b, pos], a[b, pos] = w_all[k], a_all[k]
    blk.w_codes, blk.a_codes = w.astype(np.uint8), a.astype(np.uint8)
    blk.w_scale = _e5m3(np.full(n, 15), rng.integers(0, 8, n))
    blk.a_scale = _e5m3(np.full(n, 15), rng.integers(0, 8, n))
    blk.kind = np.full(n, "pairs")
    return blk


def vector_blocks(cfg: PeConfig, rng: np.random.Generator) -> Blocks:
    """Replay of the committed corner-case vectors of ``tests/vectors/``.

    Element codes: the E2M1 vector codes (``elem_e2m1.npz``, HBQ rounding ``half_away``) as
    weights and the activation format's vector codes as activations, cycled into blocks. Scale
    codes: every distinct E5M3 code of ``scale_e5m3.npz`` (``half_up``, HBQ's scale rounding)
    appears at least once as a weight scale and once as an activation scale. L2 codes random.

    Args:
        cfg: the PE configuration.
        rng: random generator (scale pairing, L2 codes).

    Returns:
        The :class:`Blocks`, labelled ``"vectors"`` (one block per distinct scale code).
    """
    w_vec = np.load(VECTORS_DIR / ELEM_VECTOR_FILES[W_BITS])["codes_half_away"]
    a_file = ELEM_VECTOR_FILES.get(cfg.act_bits)
    scales = np.unique(np.load(VECTORS_DIR / "scale_e5m3.npz")["codes_half_up"])
    n = scales.size
    blk = random_blocks(cfg, n, rng, "uniform")
    blk.w_codes = np.resize(w_vec, (n, cfg.block)).astype(np.uint8)
    if a_file is not None:
        a_vec = np.load(VECTORS_DIR / a_file)["codes_half_away"]
        blk.a_codes = np.resize(a_vec, (n, cfg.block)).astype(np.uint8)
    blk.w_scale = scales.astype(np.uint8)
    blk.a_scale = rng.permutation(scales).astype(np.uint8)
    blk.kind = np.full(n, "vectors")
    return blk


def pack_fields(values: npt.ArrayLike, width: int) -> list[int]:
    """HDL port values of rows of codes: :func:`coaccel.models.formats.pack_bits` as integers.

    The bit layout is the shared one of specs/hbq.md §1.9 (code ``g`` at ``[width*g +: width]``,
    little-endian), so the testbenches drive exactly what the packing reference defines.

    Args:
        values: ``(n, k)`` (or ``(n,)``: one field per row) codes below ``2**width``.
        width: field width in bits (1..16).

    Returns:
        ``n`` Python integers.
    """
    v = np.asarray(values)
    if v.ndim == 1:
        v = v[:, None]
    return [int.from_bytes(row.tobytes(), "little") for row in pack_bits(v, width)]


def unpack_fields(
    words: list[int], width: int, count: int, *, signed: bool
) -> npt.NDArray[np.int64]:
    """Inverse of :func:`pack_fields`: ``count`` fields of ``width`` bits per integer.

    Args:
        words: Python integers read from the HDL.
        width: field width in bits (<= 62).
        count: fields per word.
        signed: interpret each field as two's complement.

    Returns:
        ``(len(words), count)`` int64 array.
    """
    n_bytes = (width * count + 7) // 8
    raw = np.frombuffer(b"".join(w.to_bytes(n_bytes, "little") for w in words), dtype=np.uint8)
    bits = np.unpackbits(raw.reshape(len(words), n_bytes), axis=1, bitorder="little")
    bits = bits[:, : width * count].reshape(len(words), count, width).astype(np.int64)
    vals = (bits << np.arange(width, dtype=np.int64)).sum(-1)
    if signed:
        vals = np.where(vals >= 1 << (width - 1), vals - (1 << width), vals)
    return vals
