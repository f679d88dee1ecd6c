"""Delta-Key construction along the sequence axis ([DELTALLM]; delta-network rule [DELTANET]).

Per KV head, each post-RoPE key ``k_t`` is compared with a memory ``k̂_{t-1}`` element by
element; a difference is kept (and copied into the memory) only where ``|difference| >= theta``.
Row 0 is dense (``Δ_0 = k_0``), so the attention-sink token is exact. With the memory form the
reconstruction error stays below ``theta`` in every element and never drifts; the naive form
(threshold the raw step ``k_t - k_{t-1}`` and sum the kept steps) is offered for ablation.

Public: :class:`DeltaKeys`, :func:`encode_delta_keys`, :func:`encode_delta_row`, and
:func:`pack_delta_rows` / :func:`unpack_delta_rows`, the stored form of a delta row (bitmask plus
the kept values packed in index order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["DELTA_MODES", "DeltaKeys", "encode_delta_keys", "encode_delta_row", "pack_delta_rows",
           "unpack_delta_rows"]  # fmt: skip

#: Valid values of ``delta_mode``.
DELTA_MODES = ("memory", "naive")


@dataclass(frozen=True)
class DeltaKeys:
    """The Delta-Key cache of one layer: sparse deltas, their bitmask and the encoder state.

    Attributes:
        deltas: ``[H, T, d]`` delta values; row 0 is the dense first key. int32 in fixed mode
            (memory form: every value in ``[-254, 254]``, 9 bits signed), float64 in float mode.
        mask: ``[H, T, d]`` bool bitmask of stored elements; row 0 and dense rows are all True.
        keys_hat: ``[H, T, d]`` reconstruction ``k̂_t = Σ_{s<=t} Δ_s``; int32 or float64.
        memory: ``[H, d]`` encoder memory ``k̂_{T-1}``, needed to continue encoding in decode.
        prev_key: ``[H, d]`` last raw key ``k_{T-1}`` (the naive form's reference).
        theta: the threshold, in key LSBs (fixed) or key units (float).
        delta_mode: ``"memory"`` or ``"naive"``.
        refresh_period: every ``refresh_period``-th row is dense (0: never).
        n_sink: the first ``n_sink`` rows are dense.
    """

    deltas: np.ndarray
    mask: np.ndarray
    keys_hat: np.ndarray
    memory: np.ndarray
    prev_key: np.ndarray
    theta: float
    delta_mode: str
    refresh_period: int
    n_sink: int

    @property
    def sparsity(self) -> float:
        """Delta-Key sparsity ``ρ_K = 1 - nnz(Δ_1..T-1) / ((T-1)·H·d)``.

        Row 0 is dense by construction and excluded; 0.0 when ``T = 1``.
        """
        rest = self.mask[:, 1:, :]
        return 1.0 - float(np.count_nonzero(rest)) / rest.size if rest.size else 0.0


def _is_dense_row(t: int, refresh_period: int, n_sink: int) -> bool:
    """True for rows stored dense: the sinks and every ``refresh_period``-th row."""
    return t < n_sink or (refresh_period > 0 and t % refresh_period == 0)


def encode_delta_row(
    key: np.ndarray,
    memory: np.ndarray,
    prev_key: np.ndarray,
    *,
    t: int,
    theta: float,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Encode key row ``t`` of every head: one step of the Delta-Key encoder (prefill or decode).

    Memory form: ``e = k_t - k̂_{t-1}``. Naive form: ``e = k_t - k_{t-1}``. In both,
    ``keep = |e| >= theta``, ``Δ_t = e·keep`` and ``k̂_t = k̂_{t-1} + Δ_t``. A dense row (a sink
    or a refresh row) keeps every element with ``Δ_t = k_t - k̂_{t-1}``, which resets the memory
    to ``k_t``. Before row 0 the memory and the previous key are zero, so ``Δ_0 = k_0``.

    Args:
        key: ``[H, d]`` key row ``k_t`` (int8 in fixed mode, float64 in float mode).
        memory: ``[H, d]`` memory ``k̂_{t-1}`` (zeros for ``t = 0``).
        prev_key: ``[H, d]`` previous raw key ``k_{t-1}`` (zeros for ``t = 0``).
        t: token index of ``key``.
        theta: threshold (same units as ``key``), ``>= 0``.
        delta_mode: ``"memory"`` (default) or ``"naive"``.
        refresh_period: dense row every ``refresh_period`` tokens; 0 disables.
        n_sink: number of leading dense rows, ``>= 1``.

    Returns:
        ``(delta, keep, new_memory)``, each ``[H, d]``; ``delta`` and ``new_memory`` have the
        dtype of ``memory``, ``keep`` is bool.
    """
    k = key.astype(memory.dtype)
    if _is_dense_row(t, refresh_period, n_sink):
        delta = k - memory
        return delta, np.ones(k.shape, dtype=bool), memory + delta
    e = k - memory if delta_mode == "memory" else k - prev_key.astype(memory.dtype)
    keep = np.abs(e) >= theta
    delta = np.where(keep, e, 0).astype(memory.dtype)
    return delta, keep, memory + delta


def _check_encoder_args(theta: float, delta_mode: str, refresh_period: int, n_sink: int) -> None:
    """Raise ValueError for a bad encoder option."""
    if delta_mode not in DELTA_MODES:
        raise ValueError(
            f"delta_mode: unknown value {delta_mode!r}; valid: {', '.join(DELTA_MODES)}"
        )
    if not (np.isfinite(theta) and theta >= 0):
        raise ValueError(f"theta: must be finite and >= 0, got {theta!r}")
    if int(refresh_period) != refresh_period or refresh_period < 0:
        raise ValueError(f"refresh_period: must be an integer >= 0, got {refresh_period!r}")
    if int(n_sink) != n_sink or n_sink < 1:
        raise ValueError(f"n_sink: must be an integer >= 1, got {n_sink!r}")


def encode_delta_keys(
    keys: npt.ArrayLike,
    *,
    theta: float,
    delta_mode: str = "memory",
    refresh_period: int = 0,
    n_sink: int = 1,
) -> DeltaKeys:
    """Delta-encode a post-RoPE key sequence per KV head.

    Args:
        keys: ``[H, T, d]`` keys; int8 selects the fixed-point encoder (integer ``theta``, key
            LSBs), a float dtype selects the float64 encoder.
        theta: threshold ``>= 0``; an integer in fixed mode. ``theta`` in ``{0, 1}`` reconstructs
            int8 keys exactly.
        delta_mode: ``"memory"`` (default, bounded error ``|k - k̂| < theta``) or ``"naive"``.
        refresh_period: every ``refresh_period``-th row is stored dense and resets the memory;
            0 (default) disables.
        n_sink: number of leading rows stored dense (default 1: row 0 only).

    Returns:
        The :class:`DeltaKeys` of the sequence.

    Raises:
        TypeError: integer keys that are not int8, or a non-integer ``theta`` with int8 keys.
        ValueError: keys not 3-D or empty, NaN/Inf in float keys, or a bad option.
    """
    k = np.asarray(keys)
    if k.ndim != 3 or k.size == 0:
        raise ValueError(f"keys: expected a non-empty [H, T, d] array, got shape {k.shape}")
    _check_encoder_args(theta, delta_mode, refresh_period, n_sink)
    if np.issubdtype(k.dtype, np.floating):
        if not np.all(np.isfinite(k)):
            raise ValueError("keys: float keys hold NaN or Inf")
        k = k.astype(np.float64)
        acc_dtype: type[np.generic] = np.float64
    elif k.dtype == np.int8:
        if int(theta) != theta:
            raise TypeError(f"theta: must be an integer with int8 keys, got {theta!r}")
        acc_dtype = np.int32
    else:
        raise TypeError(f"keys: dtype must be int8 (fixed) or float (float mode), got {k.dtype}")
    h, t_len, d = k.shape
    deltas = np.zeros((h, t_len, d), dtype=acc_dtype)
    mask = np.zeros((h, t_len, d), dtype=bool)
    keys_hat = np.zeros((h, t_len, d), dtype=acc_dtype)
    memory = np.zeros((h, d), dtype=acc_dtype)
    prev = np.zeros((h, d), dtype=acc_dtype)
    for t in range(t_len):
        deltas[:, t], mask[:, t], memory = encode_delta_row(
            k[:, t],
            memory,
            prev,
            t=t,
            theta=theta,
            delta_mode=delta_mode,
            refresh_period=int(refresh_period),
            n_sink=int(n_sink),
        )
        keys_hat[:, t] = memory
        prev = k[:, t].astype(acc_dtype)
    return DeltaKeys(
        deltas=deltas,
        mask=mask,
        keys_hat=keys_hat,
        memory=memory.copy(),
        prev_key=prev.copy(),
        theta=theta,
        delta_mode=delta_mode,
        refresh_period=int(refresh_period),
        n_sink=int(n_sink),
    )


def _rows_and_mask(
    rows: npt.ArrayLike, mask: npt.ArrayLike, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` and ``mask`` as arrays of one shape with a row axis, the mask bool."""
    r_arr = np.asarray(rows)
    m_arr = np.asarray(mask)
    if r_arr.ndim < 1 or r_arr.shape != m_arr.shape:
        raise ValueError(
            f"{name} {r_arr.shape} and mask {m_arr.shape} must have the same shape, with a row axis"
        )
    if m_arr.dtype != bool:
        raise ValueError(f"mask must be bool, got {m_arr.dtype}")
    return r_arr, m_arr


def pack_delta_rows(deltas: npt.ArrayLike, mask: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The stored form of delta rows: the kept values packed to the front, in index order.

    This is the Δ-buffer layout the hardware reads: a ``d``-bit bitmask and the row's ``nnz``
    stored values, value ``s`` being the element of the ``s``-th lowest set bit of the mask, so
    that a reader taking the M lowest set bits per cycle (a priority encoder) finds their values
    at packed positions ``c·M .. c·M + M - 1`` in its cycle ``c``.

    Args:
        deltas: ``[..., d]`` delta values (any integer or float dtype).
        mask: ``[..., d]`` bool bitmask of stored elements, the shape of ``deltas``.

    Returns:
        ``(packed, nnz)``: ``packed`` has the shape and dtype of ``deltas`` with positions
        ``>= nnz`` of each row zero; ``nnz`` is ``[...]`` int64, the stored count per row.

    Raises:
        ValueError: the shapes differ, ``mask`` is not bool, or the arrays have no row axis.
    """
    d_arr, m_arr = _rows_and_mask(deltas, mask, "deltas")
    # a stable sort on "not stored" moves the stored elements to the front in index order
    order = np.argsort(~m_arr, axis=-1, kind="stable")
    packed = np.take_along_axis(np.where(m_arr, d_arr, 0).astype(d_arr.dtype), order, axis=-1)
    return packed, np.count_nonzero(m_arr, axis=-1).astype(np.int64)


def unpack_delta_rows(packed: npt.ArrayLike, mask: npt.ArrayLike) -> np.ndarray:
    """Inverse of :func:`pack_delta_rows`: scatter packed values back to their bitmask positions.

    Args:
        packed: ``[..., d]`` packed rows (positions ``>= nnz`` are ignored).
        mask: ``[..., d]`` bool bitmask.

    Returns:
        ``[..., d]`` deltas, zero where the mask is clear; dtype of ``packed``.

    Raises:
        ValueError: the shapes differ or ``mask`` is not bool.
    """
    p_arr, m_arr = _rows_and_mask(packed, mask, "packed")
    # element i of a row is the packed value at its rank among the set bits before it
    rank = np.cumsum(m_arr, axis=-1) - 1
    vals = np.take_along_axis(p_arr, np.clip(rank, 0, None), axis=-1)
    return np.where(m_arr, vals, 0).astype(p_arr.dtype)
