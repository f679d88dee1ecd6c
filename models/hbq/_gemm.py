"""Block GEMM on quantized tensors (the [R-ACC] datapath; docs/hbq_datapath.md).

:func:`hbq_gemm` computes ``Y = Q(A) @ Q(W)^T`` for HBQ operands exactly as the accelerator does:
one exact integer ``P_total`` per (token, output channel, K block) (the PE datapath of
:mod:`._datapath`), one L1 conversion per block, then the partial-sum accumulation mode of
:mod:`._psum` in K order. :func:`block_gemm` is the plain float64 reference for any registered
format (used by the accuracy studies for the non-HBQ baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..formats import HBQSpec, QuantizedTensor
from ._datapath import (
    _l2_factor,
    element_int,
    l1_convert,
    p_total_bound,
    product_frac_bits,
    scale_fields,
)
from ._fp import fp16_round
from ._psum import PSUM_MODES, accumulate_psums

__all__ = ["GemmResult", "block_gemm", "hbq_gemm", "hbq_gemm_codes"]

_CHUNK_ELEMS = 1 << 16


@dataclass(frozen=True, eq=False)
class GemmResult:
    """The output of :func:`hbq_gemm` / :func:`hbq_gemm_codes`.

    Attributes:
        y: float32 outputs ``(..., N)`` (exactly the values of ``bits``).
        bits: the outputs' bit patterns, uint16 (``out="fp16"``) or uint32 (``out="fp32"``).
        out: ``"fp16"`` or ``"fp32"``.
        psum_mode: the partial-sum accumulation mode used.
        mode: the L1 conversion mode used (``"exact"`` or ``"rtl_compat"``).
        F: fractional bits of ``p_total``.
        p_total: int32 ``(..., N, n_blocks)`` per-block integer sums (only with
            ``keep_p_total=True``), in units of ``2**-F``.
    """

    y: npt.NDArray[np.float32]
    bits: npt.NDArray[np.unsignedinteger]
    out: str
    psum_mode: str
    mode: str
    F: int  # the spec's name for the fractional bits
    p_total: npt.NDArray[np.int32] | None = None


def _signed_ints(codes: npt.NDArray[Any], elem_bits: int) -> npt.NDArray[np.int64]:
    """Element values as integers in units of ``2**-(elem_bits - 3)``: ``M << sh``."""
    m, sh = element_int(codes, elem_bits)
    return m.astype(np.int64) << sh.astype(np.int64)


def hbq_gemm_codes(
    a_codes: npt.ArrayLike,
    a_scale: npt.ArrayLike,
    a_l2: npt.ArrayLike | None,
    w_codes: npt.ArrayLike,
    w_scale: npt.ArrayLike,
    w_l2: npt.ArrayLike | None,
    w_scheme: npt.ArrayLike | None,
    *,
    ub: int,
    act_l2: str | None,
    act_l2_bits: int,
    weight_l2: str | None = "mix",
    weight_l2_bits: int = 2,
    a_elem_bits: int = 5,
    w_elem_bits: int = 4,
    psum_mode: str = "fp32",
    mode: str = "exact",
    out: str = "fp32",
    sa_n: int = 16,
    group_blocks: int = 1,
    quant_block: int = 32,
    psum_rounding: str = "rne",
    keep_p_total: bool = False,
) -> GemmResult:
    """HBQ GEMM on raw code arrays: ``Y[m, n] = Σ_k dot(A[m, k-block], W[n, k-block])``.

    Per block the integer ``P_total`` equals the PE datapath's (:func:`~._datapath.block_dot`):
    since integer addition is associative, the micro-block L2 multipliers are folded into the
    element integers and the block sums are formed by one float64 batched matmul, exact because
    every partial sum is an integer below :func:`~._datapath.p_total_bound` (< 2^31, checked).

    Args:
        a_codes: activation element codes ``(M, n_blocks, B)``.
        a_scale: activation E5M3 codes ``(M, n_blocks)``.
        a_l2: activation L2 codes ``(M, n_blocks, B // ub)`` (None without activation L2).
        w_codes: weight element codes ``(N, n_blocks, B)``.
        w_scale: weight E5M3 codes ``(N, n_blocks)``.
        w_l2: weight L2 codes ``(N, n_blocks, B // ub)`` (None without weight L2).
        w_scheme: weight Mix selectors ``(N, n_blocks)`` (None unless ``weight_l2="mix"``).
        ub: micro-block length.
        act_l2: activation L2 scheme or None; act_l2_bits: its code width.
        weight_l2: weight L2 scheme or None; weight_l2_bits: its code width.
        a_elem_bits: activation element width (5 = E2M2, 4 = E2M1).
        w_elem_bits: weight element width.
        psum_mode: one of :data:`~._psum.PSUM_MODES`.
        mode: L1 conversion mode, ``"exact"`` or ``"rtl_compat"`` (binary16 psum modes only).
        out: output format, ``"fp32"`` or ``"fp16"``. ``"fp16"``, ``"mxint8_running"`` and
            ``"mxint8_group"`` accumulate in binary16 (returned exactly as float32 with
            ``out="fp32"``); ``"fp32"`` results are rounded once more by
            :func:`~._fp.fp16_round` for ``out="fp16"``.
        sa_n: output channels per MXINT8 block (``"mxint8_running"``).
        group_blocks: K blocks per FP32 group (``"mxint8_group"``).
        quant_block: output channels per scale (``"mxint8_group"``).
        psum_rounding: MXINT8 element rounding, ``"rne"`` or ``"trunc"``.
        keep_p_total: also return the per-block ``P_total``.

    Returns:
        The :class:`GemmResult` with ``y`` of shape ``(M, N)``.
    """
    acc32 = _check_modes(psum_mode, mode, out)
    wide = psum_mode in ("fp32", "mxint8_group")
    ac, wc = np.asarray(a_codes), np.asarray(w_codes)
    a_s, w_s = np.asarray(a_scale), np.asarray(w_scale)
    n_blocks, block = _check_operands(ac, wc, a_s, w_s, ub)
    fa, frac_a = _l2_factor(a_l2, act_l2, act_l2_bits, None, "activation")
    fw, frac_w = _l2_factor(w_l2, weight_l2, weight_l2_bits, w_scheme, "weight")
    frac_bits = product_frac_bits(w_elem_bits, a_elem_bits) + frac_a + frac_w
    bound = p_total_bound(
        block,
        act_l2=act_l2,
        act_l2_bits=act_l2_bits,
        weight_l2=weight_l2,
        weight_l2_bits=weight_l2_bits,
        w_elem_bits=w_elem_bits,
        a_elem_bits=a_elem_bits,
    )
    if bound >= 1 << 31:
        raise ValueError(f"block length {block} can overflow the 32-bit P_total (bound {bound})")
    # (n_blocks, M, B) and (n_blocks, B, N) matrices of element integers x L2 multipliers.
    a_mat = _weighted_ints(ac, a_elem_bits, fa, ub).transpose(1, 0, 2).astype(np.float64)
    w_mat = _weighted_ints(wc, w_elem_bits, fw, ub).transpose(1, 2, 0).astype(np.float64)
    acc, p_keep = _accumulate_rows(
        a_mat,
        w_mat,
        a_s,
        w_s,
        frac_bits=frac_bits,
        wide=wide,
        acc32=acc32,
        mode=mode,
        keep_p_total=keep_p_total,
        psum_kwargs={
            "psum_mode": psum_mode,
            "sa_n": sa_n,
            "group_blocks": group_blocks,
            "quant_block": quant_block,
            "rounding": psum_rounding,
        },
    )
    y, bits = _output(acc, acc32=acc32, out=out)
    return GemmResult(
        y=y,
        bits=bits,
        out=out,
        psum_mode=psum_mode,
        mode=mode,
        F=frac_bits,
        p_total=None if p_keep is None else p_keep.transpose(1, 2, 0),
    )


def _check_modes(psum_mode: str, mode: str, out: str) -> bool:
    """Validate the mode arguments; True when the accumulator is binary32 (``"fp32"`` mode).

    Block results are binary32 for the modes that add them in FP32 first (``"fp32"``,
    ``"mxint8_group"``); the MXINT8 modes and ``"fp16"`` accumulate in binary16.
    """
    if psum_mode not in PSUM_MODES:
        raise ValueError(f"psum_mode={psum_mode!r}; valid choices: {', '.join(PSUM_MODES)}")
    if out not in ("fp16", "fp32"):
        raise ValueError(f"out={out!r}; valid choices: 'fp16', 'fp32'")
    if psum_mode in ("fp32", "mxint8_group") and mode != "exact":
        raise ValueError(
            f"mode={mode!r} needs a binary16 psum mode ('fp16', 'mxint8_running'); "
            f"psum_mode={psum_mode!r} takes exact binary32 block results"
        )
    return psum_mode == "fp32"


def _check_operands(
    ac: npt.NDArray[Any],
    wc: npt.NDArray[Any],
    a_s: npt.NDArray[Any],
    w_s: npt.NDArray[Any],
    ub: int,
) -> tuple[int, int]:
    """Validate code and scale shapes and the scale codes; returns ``(n_blocks, B)``."""
    if ac.ndim != 3 or wc.ndim != 3 or ac.shape[1:] != wc.shape[1:]:
        raise ValueError(
            f"code arrays must be (M, n_blocks, B) and (N, n_blocks, B) with the same "
            f"n_blocks and B, got {ac.shape} and {wc.shape}"
        )
    m_rows, n_blocks, block = ac.shape
    if ub < 1 or block % ub:
        raise ValueError(f"micro-block length {ub} does not divide the block length {block}")
    if a_s.shape != (m_rows, n_blocks) or w_s.shape != (wc.shape[0], n_blocks):
        raise ValueError(
            f"scale arrays must be (M, n_blocks) and (N, n_blocks), got {a_s.shape} and {w_s.shape}"
        )
    scale_fields(a_s)  # validates the codes once, with a clear message
    scale_fields(w_s)
    return n_blocks, block


def _weighted_ints(
    codes: npt.NDArray[Any], elem_bits: int, l2_factor: Any, ub: int
) -> npt.NDArray[np.int64]:
    """Element integers times their micro-block's L2 multiplier, shape ``(rows, n_blocks, B)``.

    Integer addition is associative, so folding the L2 multipliers into the elements gives the
    PE datapath's per-block sum.
    """
    rows, n_blocks, block = codes.shape
    n_ub = block // ub
    ints = _signed_ints(codes, elem_bits).reshape(rows, n_blocks, n_ub, ub)
    factor = np.broadcast_to(l2_factor, (rows, n_blocks, n_ub))[..., None]
    return (ints * factor).reshape(codes.shape)


def _accumulate_rows(
    a_mat: npt.NDArray[np.float64],
    w_mat: npt.NDArray[np.float64],
    a_s: npt.NDArray[Any],
    w_s: npt.NDArray[Any],
    *,
    frac_bits: int,
    wide: bool,
    acc32: bool,
    mode: str,
    keep_p_total: bool,
    psum_kwargs: dict[str, Any],
) -> tuple[npt.NDArray[np.unsignedinteger], npt.NDArray[np.int32] | None]:
    """Per-block integer sums, L1 conversion and partial-sum accumulation, in row chunks.

    Token rows are independent in every psum mode; chunks of rows keep the temporaries of the
    integer conversion small (cache-resident) instead of touching fresh pages per operation.

    Returns:
        The accumulator bit patterns ``(M, N)`` (uint32 for binary32, uint16 for binary16) and,
        with ``keep_p_total``, the int32 ``P_total`` of shape ``(n_blocks, M, N)``.
    """
    n_blocks, m_rows, _ = a_mat.shape
    n_cols = w_mat.shape[2]
    w_sc = w_s.T[:, None, :]
    acc = np.empty((m_rows, n_cols), dtype=np.uint32 if acc32 else np.uint16)
    p_keep = np.empty((n_blocks, m_rows, n_cols), dtype=np.int32) if keep_p_total else None
    step = max(1, _CHUNK_ELEMS // max(1, n_cols * n_blocks))
    for r0 in range(0, m_rows, step):
        r1 = min(r0 + step, m_rows)
        # (n_blocks, rows, B) @ (n_blocks, B, N): exact in float64, as every product and partial
        # sum is an integer of magnitude at most p_total_bound < 2^31.
        p_total = np.matmul(a_mat[:, r0:r1], w_mat).astype(np.int64)
        if p_keep is not None:
            p_keep[:, r0:r1] = p_total
        block_bits, _ = l1_convert(
            p_total,
            frac_bits,
            w_sc,
            a_s[r0:r1].T[:, :, None],
            out="fp32" if wide else "fp16",
            mode=mode,
        )
        acc[r0:r1] = accumulate_psums(block_bits, **psum_kwargs)
    return acc, p_keep


def _output(
    acc: npt.NDArray[np.unsignedinteger], *, acc32: bool, out: str
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.unsignedinteger]]:
    """The outputs as float32 values and as bit patterns of the ``out`` format."""
    if acc32:
        y = acc.view(np.float32)
        bits = acc if out == "fp32" else fp16_round(y)
        if out == "fp16":
            y = bits.view(np.float16).astype(np.float32)
    else:
        y = acc.view(np.float16).astype(np.float32)
        bits = y.view(np.uint32) if out == "fp32" else acc
    return y, bits


def _hbq_side(q: QuantizedTensor, what: str) -> dict[str, Any]:
    """The datapath parameters of an HBQ operand, read from its spec."""
    spec = q.spec
    if not isinstance(spec, HBQSpec):
        raise TypeError(
            f"hbq_gemm needs HBQ-quantized operands; the {what} has format "
            f"{q.format!r} (use block_gemm for other formats)"
        )
    return {
        "ub": spec.ub,
        "l2": spec.l2,
        "l2_bits": spec.l2_bits,
        "elem_bits": spec.element_bits,
        "block": spec.block,
    }


def _k_operand(q: QuantizedTensor, what: str) -> int:
    """Check that ``q`` is blocked along its last axis; return K."""
    if q.axis != len(q.shape) - 1:
        raise ValueError(
            f"the {what} must be blocked along its last axis (K); it was blocked "
            f"along axis {q.axis} of shape {q.shape}"
        )
    return q.shape[-1]


def hbq_gemm(
    qa: QuantizedTensor,
    qw: QuantizedTensor,
    *,
    psum_mode: str = "fp32",
    mode: str = "exact",
    out: str = "fp32",
    sa_n: int = 16,
    group_size: int = 128,
    quant_block: int = 32,
    psum_rounding: str = "rne",
    keep_p_total: bool = False,
) -> GemmResult:
    """``Y = Q(A) @ Q(W)^T`` through the HBQ datapath and a partial-sum mode.

    Args:
        qa: HBQ activations ``A [..., K]``, blocked along K (the last axis).
        qw: HBQ weights ``W [N, K]``, blocked along K, same ``B`` and ``ub`` as ``qa``.
        psum_mode: ``"fp32"`` (default, the paper's accuracy runs), ``"fp16"``,
            ``"mxint8_running"`` (the accelerator) or ``"mxint8_group"`` ([R-EXT]).
        mode: L1 conversion, ``"exact"`` or ``"rtl_compat"`` (binary16 psum modes only).
        out: ``"fp32"`` or ``"fp16"`` (see :func:`hbq_gemm_codes`).
        sa_n: output channels per MXINT8 block in ``"mxint8_running"``.
        group_size: K elements per FP32 group in ``"mxint8_group"`` (a multiple of B).
        quant_block: output channels per scale in ``"mxint8_group"``.
        psum_rounding: MXINT8 element rounding, ``"rne"`` or ``"trunc"``.
        keep_p_total: also return the per-block integer sums.

    Returns:
        The :class:`GemmResult`; ``y`` has shape ``(..., N)``.

    Raises:
        ValueError: K not a multiple of B, mismatched K / B / ub, operands not blocked along K.
        TypeError: an operand that is not HBQ-quantized.
    """
    sa, sw = _hbq_side(qa, "activation operand"), _hbq_side(qw, "weight operand")
    ka, kw = _k_operand(qa, "activation operand"), _k_operand(qw, "weight operand")
    if len(qw.shape) != 2:
        raise ValueError(f"the weights must be 2-D [N, K], got shape {qw.shape}")
    if ka != kw:
        raise ValueError(f"K differs: activations have K = {ka}, weights K = {kw}")
    if sa["block"] != sw["block"] or sa["ub"] != sw["ub"]:
        raise ValueError(
            f"activations (B={sa['block']}, ub={sa['ub']}) and weights "
            f"(B={sw['block']}, ub={sw['ub']}) must share B and ub"
        )
    block = sa["block"]
    if ka % block:
        raise ValueError(f"K = {ka} is not a multiple of the block size B = {block}")
    if group_size < block or group_size % block:
        raise ValueError(f"group_size = {group_size} must be a multiple of B = {block}")
    lead = qa.shape[:-1]
    n_blocks = ka // block

    def flat(a: npt.NDArray[Any], tail: tuple[int, ...]) -> npt.NDArray[Any]:
        return np.asarray(a).reshape((-1, *tail))

    res = hbq_gemm_codes(
        flat(qa.codes, (n_blocks, block)),
        flat(qa.scales, (n_blocks,)),
        None if qa.l2_codes is None else flat(qa.l2_codes, (n_blocks, block // sa["ub"])),
        qw.codes,
        qw.scales,
        qw.l2_codes,
        qw.scheme,
        ub=sa["ub"],
        act_l2=sa["l2"],
        act_l2_bits=sa["l2_bits"],
        weight_l2=sw["l2"],
        weight_l2_bits=sw["l2_bits"],
        a_elem_bits=sa["elem_bits"],
        w_elem_bits=sw["elem_bits"],
        psum_mode=psum_mode,
        mode=mode,
        out=out,
        sa_n=sa_n,
        group_blocks=group_size // block,
        quant_block=quant_block,
        psum_rounding=psum_rounding,
        keep_p_total=keep_p_total,
    )
    n = qw.shape[0]
    return GemmResult(
        y=res.y.reshape((*lead, n)),
        bits=res.bits.reshape((*lead, n)),
        out=res.out,
        psum_mode=res.psum_mode,
        mode=res.mode,
        F=res.F,
        p_total=None if res.p_total is None else res.p_total.reshape((*lead, n, n_blocks)),
    )


def block_gemm(qa: QuantizedTensor, qw: QuantizedTensor) -> npt.NDArray[np.float32]:
    """``Q(A) @ Q(W)^T`` for any registered format: exact dequantization, float64 matmul, float32.

    Not bit-exact to any hardware: the float64 dot products round (far below float32's
    precision) and the result is rounded once to float32. Use :func:`hbq_gemm` for the HBQ
    datapath.

    Args:
        qa: quantized activations ``A [..., K]`` blocked along K (the last axis).
        qw: quantized weights ``W [N, K]`` blocked along K.

    Returns:
        float32 ``(..., N)``.
    """
    ka, kw = _k_operand(qa, "activation operand"), _k_operand(qw, "weight operand")
    if len(qw.shape) != 2:
        raise ValueError(f"the weights must be 2-D [N, K], got shape {qw.shape}")
    if ka != kw:
        raise ValueError(f"K differs: activations have K = {ka}, weights K = {kw}")
    a = qa.dequantize(np.float64)
    w = qw.dequantize(np.float64)
    return (a @ w.T).astype(np.float32)
