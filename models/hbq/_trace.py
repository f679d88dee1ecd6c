"""Trace of a tiled block-quantized GEMM (the contract of ``coaccel.trace``; docs/trace.md).

:func:`gemm_trace` walks the tiles of ``Y[M, N] = A[M, K] @ W[N, K]^T`` in a chosen loop order and
records, per tile, the operand reads, the GEMM work and the partial-sum traffic, with byte counts
taken from each operand format's effective bits per element (scales and side bits included).

The walk is computed as numpy arrays (:class:`_TileWalk`: the tiles in loop order and what each
moves; :class:`_GemmLayout`: bytes and offsets of every tile of every tensor), a *schedule*
gives every record its ``seq`` number (issue order) and dependencies (:class:`_Schedule`), and
:func:`_emit_gemm` adds each kind of record as one column to a
:class:`~coaccel.trace.TraceBuilder` with those seq numbers, so a GEMM of a few hundred
thousand tiles takes well under a second. Two programs are available:

* the *plain* program (``n_buffers=None``, the default): per tile, in issue order,

  1. a read of the A tile (``tensor="A"``) unless the previous tile used the same A tile, and
     likewise for the W tile (``tensor="W"``): a one-tile operand buffer, so the operand that
     the innermost loop does not index is read once per pass;
  2. a ``"gemm"`` compute record (``m, n, k`` of the tile, ``macs = m·n·k``, the two format
     names, ``tile`` = ``(mi·n_tiles_n + ni)·n_tiles_k + ki``), depending on the latest
     operand read;
  3. a read of the partial-sum tile (``tensor="psum"``) for every K tile but the first, and a
     write of it for every K tile but the last, or else a write of the output tile
     (``tensor="Y"``);

* the *double-buffered* program (``n_buffers=b``; ``b=2`` is what the HBQ accelerator's
  controller runs, docs/hbq_sim.md): the same records, with the reads of step 1 issued
  ``b - 1`` tiles early (all reads of the first ``b`` tiles come first). Each operand read
  waits (``dep``) for the compute that last used the buffer slot it overwrites (``b`` reads of
  that operand earlier; ``b`` slabs, i.e. ``b x K-tiles`` reads, for a resident A), each
  compute for its own newest operand read (-1 when it reuses both operands), each partial-sum
  read for the partial-sum write it reads back, and each DRAM record names the on-chip buffer
  it fills or drains in ``phase`` (``"act"``, ``"wgt"``, ``"out"``; partial sums ``"psum"``).

With ``a_resident=True`` (loop order ``"mnk"`` only) the activation buffer keeps every K tile of
the current token tile (the ``tile_m x K`` slab) across the output-channel tiles: each A tile is
read once per token tile, at the first channel tile, instead of once per channel tile. The
caller checks that the slab fits (``n_buffers`` slabs for the pipelined program).

Bytes: A and W tiles use the formats' effective bits per element
(``FormatSpec.bits_per_element()``, side information included; HBQ names are resolved with
``role="activation"`` for A and ``"weight"`` for W), PSUM tiles :func:`psum_bits_per_element`,
Y tiles the ``out`` format's bits. Each tensor is stored tile-major (every tile contiguous, tiles
in row-major tile order), so each tile access is one contiguous record of
``ceil(elements · bits / 8)`` bytes at its tile's byte offset. Edge tiles are smaller when a
dimension is not a multiple of its tile size.

The fused attention program of ``_workload.attention_trace`` is built here the same way, in
parts: :func:`_attention_tiles` (blocks and key tiles), :func:`_attention_seqs` (issue order),
:func:`_attention_bytes` (record sizes and offsets) and :func:`_emit_attention`.

Byte counts of fractional bits per element go through :func:`coaccel.trace.storage_bytes`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.trace import Trace, TraceBuilder, storage_bytes

from ..formats import FormatSpec, resolve
from ._psum import PSUM_MODES

__all__ = [
    "PLAIN_FORMAT_BITS",
    "OperandStorage",
    "act_slab_bits",
    "gemm_trace",
    "operand_storage",
    "psum_bits_per_element",
]

PLAIN_FORMAT_BITS: Mapping[str, int] = {"fp32": 32, "fp16": 16, "bf16": 16}
"""Unquantized operand formats (not in the block-format registry) and their bits per element."""

_ORDERS = tuple("".join(p) for p in itertools.permutations("mnk"))


@dataclass(frozen=True)
class OperandStorage:
    """An operand format known only by its name and storage cost (e.g. a published format that
    the block-format registry does not implement, such as MXFP8 E2M5 or Amove's data type).

    Attributes:
        name: the format name written into traces (``fmt`` table).
        bits: effective storage bits per element, side information included (exact).
    """

    name: str
    bits: Fraction

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("OperandStorage.name must be a non-empty string")
        bits = Fraction(self.bits)
        if bits <= 0:
            raise ValueError(f"OperandStorage {self.name!r}: bits={self.bits} must be positive")
        object.__setattr__(self, "bits", bits)

    def bits_per_element(self) -> Fraction:
        """Effective storage bits per element (exact)."""
        return self.bits


def psum_bits_per_element(psum_mode: str, *, sa_n: int = 16) -> Fraction:
    """Stored bits per partial sum in the PSUM buffer ([R-ACC] ``buffer.sv``: 136-bit words).

    ``"fp32"`` 32; ``"fp16"`` 16; ``"mxint8_running"`` ``8 + 8 / sa_n`` (one 8-bit shared
    exponent per ``sa_n`` values: 136 bits per 16); ``"mxint8_group"`` 16 (the running
    accumulator of [R-EXT] is FP16; only the per-group contributions are MXINT8).
    """
    if psum_mode not in PSUM_MODES:
        raise ValueError(f"psum_mode={psum_mode!r}; valid choices: {', '.join(PSUM_MODES)}")
    if sa_n < 1:
        raise ValueError(f"sa_n={sa_n} must be positive")
    return {
        "fp32": Fraction(32),
        "fp16": Fraction(16),
        "mxint8_group": Fraction(16),
        "mxint8_running": 8 + Fraction(8, sa_n),
    }[psum_mode]


def operand_storage(fmt: str | FormatSpec | OperandStorage, role: str) -> tuple[str, Fraction]:
    """(name, exact bits per element) of an operand format.

    Args:
        fmt: a registered format name or spec, an :class:`OperandStorage`, or ``"fp16"``,
            ``"bf16"``, ``"fp32"``.
        role: ``"activation"``, ``"weight"`` or ``"kv"``: HBQ names given as strings are
            resolved with this role (their L2 scheme depends on it).

    Returns:
        The format's name and its effective bits per element as a ``Fraction``.
    """
    if isinstance(fmt, str) and fmt.lower() in PLAIN_FORMAT_BITS:
        return fmt.lower(), Fraction(PLAIN_FORMAT_BITS[fmt.lower()])
    if isinstance(fmt, OperandStorage):
        return fmt.name, fmt.bits
    spec = resolve(fmt)
    if isinstance(fmt, str) and getattr(spec, "role", role) != role:
        spec = resolve(fmt, role=role)
    return spec.name, Fraction(spec.bits_per_element())


def _tile_sizes(total: int, tile: int) -> npt.NDArray[np.int64]:
    full, rest = divmod(total, tile)
    return np.array([tile] * full + ([rest] if rest else []), dtype=np.int64)


def act_slab_bits(m: int, k: int, tile_m: int, tile_k: int, bits: Fraction) -> int:
    """Bits of one token tile's activation slab (all its K tiles, each rounded up to whole
    bytes as :func:`gemm_trace` stores them): what a resident A (``a_resident=True``) keeps in
    one activation-buffer slot.

    Args:
        m: tokens. k: reduction length. tile_m: tokens per tile. tile_k: K per tile.
        bits: activation bits per element.

    Returns:
        The bits of the largest slab (the first token tile's).
    """
    _check_positive(m=m, k=k, tile_m=tile_m, tile_k=tile_k)
    nbytes, _ = _tile_bytes(_tile_sizes(min(m, tile_m), tile_m), _tile_sizes(k, tile_k), bits)
    return int(nbytes.sum()) * 8


def _tile_bytes(
    rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64], bits: Fraction
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Bytes of each (row tile, col tile) block, rounded up, and their tile-major offsets."""
    nbytes = storage_bytes(rows[:, None] * cols[None, :], bits)
    flat = nbytes.ravel()
    offsets = (np.cumsum(flat) - flat).reshape(nbytes.shape)
    return nbytes, offsets.astype(np.int64)


def _check_positive(**values: Any) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")


def gemm_trace(
    m: int,
    n: int,
    k: int,
    fmt_a: str | FormatSpec | OperandStorage,
    fmt_w: str | FormatSpec | OperandStorage,
    *,
    tile_m: int,
    tile_n: int,
    tile_k: int,
    order: str = "nkm",
    psum_mode: str = "fp32",
    sa_n: int = 16,
    out: str | FormatSpec | OperandStorage = "fp32",
    out_cols_per_n: Fraction | int = 1,
    a_space: str = "DRAM",
    w_space: str = "DRAM",
    psum_space: str = "PSUM",
    out_space: str = "DRAM",
    unit: str = "pe_array",
    n_buffers: int | None = None,
    a_resident: bool = False,
    tensors: Sequence[str] = ("A", "W", "psum", "Y"),
    workload: Mapping[str, Any] | None = None,
    config_digest: str | None = None,
    seed: int | None = None,
) -> Trace:
    """Trace of the tiled GEMM ``Y[M, N] = A[M, K] @ W[N, K]^T``.

    The loops run over tiles in ``order`` (outermost first; default ``"nkm"``, the
    weight-stationary order of the HBQ accelerator: output-channel tile, K tile, token tile).
    Per tile it records the operand reads, one ``"gemm"`` compute record and the partial-sum or
    output traffic, in the plain or the double-buffered program; the module docstring
    (:mod:`coaccel.models.hbq._trace`) gives each record, its dependencies and its bytes.

    Args:
        m: rows of A and Y (tokens). n: rows of W, columns of Y (output channels).
        k: the reduction length.
        fmt_a: activation format: a registered format name or spec, an
            :class:`OperandStorage`, or ``"fp16"``, ``"bf16"``, ``"fp32"``.
        fmt_w: weight format, likewise.
        tile_m: tile size along M. tile_n: along N. tile_k: along K.
        order: loop order, a permutation of ``"mnk"`` (outermost first).
        psum_mode: partial-sum storage (:data:`~._psum.PSUM_MODES`).
        sa_n: values per MXINT8 block (``"mxint8_running"``).
        out: output format, like ``fmt_a`` (quantized outputs: the accelerator's output
            quantizer writes the next layer's activation format).
        out_cols_per_n: output columns per GEMM column: 1, or ``Fraction(1, 2)`` for a fused
            SwiGLU epilogue (gate and up channels interleaved; one output per pair).
        a_space: memory space of A. w_space: of W. psum_space: of the partial sums.
        out_space: memory space of Y.
        unit: the compute unit name of the compute records.
        n_buffers: None for the plain program; 1 or 2 (or more) operand buffer slots for the
            double-buffered program (module docstring).
        a_resident: keep the token tile's activation slab on chip across channel tiles (module
            docstring; the caller checks that it fits).
        tensors: the tensor names of A, W, the partial sums and Y.
        workload: extra JSON metadata merged into the trace's ``workload``.
        config_digest: :func:`coaccel.config.config_digest` of the configuration the tiles
            come from, stamped into the trace (None: none).
        seed: the seed of the run, stamped into the trace (None: nothing random).

    Returns:
        The :class:`coaccel.trace.Trace` (no kernels or events: ``kernel`` stays 0 and ``cta``
        -1, the docs/trace.md convention for the ASIC; an empty tensor map).
    """
    _check_gemm_args(m, n, k, tile_m, tile_n, tile_k, order, out, n_buffers, a_resident, tensors)
    ratio = Fraction(out_cols_per_n)
    if ratio <= 0 or ratio > 1:
        raise ValueError(f"out_cols_per_n={out_cols_per_n} must be in (0, 1]")
    name_a, bits_a = operand_storage(fmt_a, "activation")
    name_w, bits_w = operand_storage(fmt_w, "weight")
    name_y, bits_y = operand_storage(out, "activation")
    bits_p = psum_bits_per_element(psum_mode, sa_n=sa_n)
    meta = _gemm_meta(
        (m, n, k, tile_m, tile_n, tile_k), order,
        OperandStorage(name_a, bits_a), OperandStorage(name_w, bits_w), psum_mode, bits_p,
        name_y, workload,
    )  # fmt: skip
    meta.update(_program_meta(a_resident, n_buffers, bits_y, ratio))
    walk = _walk_tiles(
        (m, n, k), (tile_m, tile_n, tile_k), order, a_resident=a_resident, n_buffers=n_buffers
    )
    layout = _GemmLayout.of(
        walk, bits_a, bits_w, bits_p, bits_y * ratio, fmt_a=name_a, fmt_w=name_w, unit=unit,
        spaces=(a_space, w_space, psum_space, out_space), tensors=tensors,
    )  # fmt: skip
    b = TraceBuilder(
        producer="coaccel.models.hbq.gemm", workload=meta, config_digest=config_digest, seed=seed
    )
    if n_buffers is None:
        _emit_gemm(b, walk, layout, _plain_schedule(walk), phases=False)
    else:
        _emit_gemm(b, walk, layout, _pipelined_schedule(walk, n_buffers), phases=True)
    return b.build()


def _gemm_meta(
    dims: tuple[int, int, int, int, int, int],
    order: str,
    a: OperandStorage,
    w: OperandStorage,
    psum_mode: str,
    psum_bits: Fraction,
    out: str,
    workload: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The trace's workload metadata: shape ``(m, n, k)`` and tiles, loop order, operand and
    partial-sum formats and bits, output format, then the caller's ``workload``."""
    m, n, k, tile_m, tile_n, tile_k = dims
    return {
        "op": "gemm",
        "m": int(m),
        "n": int(n),
        "k": int(k),
        "tile_m": int(tile_m),
        "tile_n": int(tile_n),
        "tile_k": int(tile_k),
        "order": order,
        "fmt_a": a.name,
        "fmt_w": w.name,
        "bits_a": float(a.bits),
        "bits_w": float(w.bits),
        "psum_mode": psum_mode,
        "psum_bits": float(psum_bits),
        "out": out,
        **dict(workload or {}),
    }


def _program_meta(
    a_resident: bool, n_buffers: int | None, bits_y: Fraction, ratio: Fraction
) -> dict[str, Any]:
    """Metadata of the program's options: a resident activation slab; for the pipelined
    program its buffer slots, output bits and (when not 1) output columns per GEMM column."""
    meta: dict[str, Any] = {"a_resident": True} if a_resident else {}
    if n_buffers is not None:
        meta["n_buffers"] = int(n_buffers)
        meta["bits_out"] = float(bits_y)
        if ratio != 1:
            meta["out_cols_per_n"] = str(ratio)
    return meta


def _check_gemm_args(
    m: int,
    n: int,
    k: int,
    tile_m: int,
    tile_n: int,
    tile_k: int,
    order: str,
    out: Any,
    n_buffers: int | None,
    a_resident: bool,
    tensors: Sequence[str],
) -> None:
    _check_positive(m=m, n=n, k=k, tile_m=tile_m, tile_n=tile_n, tile_k=tile_k)
    if order not in _ORDERS:
        raise ValueError(f"order={order!r}; valid choices: {', '.join(_ORDERS)}")
    if isinstance(out, str) and out.lower() not in ("fp16", "fp32") and n_buffers is None:
        raise ValueError(f"out={out!r}; valid choices: 'fp16', 'fp32'")
    if n_buffers is not None:
        _check_positive(n_buffers=n_buffers)
    if a_resident and order != "mnk":
        raise ValueError(
            f"a_resident=True needs order='mnk' (token tiles outermost), got {order!r}"
        )
    if len(tensors) != 4 or not all(isinstance(t, str) and t for t in tensors):
        raise ValueError(f"tensors={tensors!r} must be 4 non-empty names (A, W, psum, Y)")


@dataclass(frozen=True)
class _TileWalk:
    """The tiles of a GEMM in loop order (one *step* per tile) and what each step moves.

    Attributes:
        m_tile, n_tile, k_tile: shape (steps,) int64: the step's token, channel and K tile.
        tiles_m, tiles_n, tiles_k: tiles along each dimension.
        elems_m, elems_n, elems_k: shape (tiles_d,) int64: elements of each tile along the
            dimension (the last one smaller when the tile does not divide it).
        reads_a, reads_w: shape (steps,) bool: the step reads a new A (W) tile.
        reads_psum, writes_psum: shape (steps,) bool: the step reads back (writes) partial
            sums; a step that does not write them writes its output tile.
        a_resident: A slabs stay on chip across channel tiles.
    """

    m_tile: npt.NDArray[np.int64]
    n_tile: npt.NDArray[np.int64]
    k_tile: npt.NDArray[np.int64]
    tiles_m: int
    tiles_n: int
    tiles_k: int
    elems_m: npt.NDArray[np.int64]
    elems_n: npt.NDArray[np.int64]
    elems_k: npt.NDArray[np.int64]
    reads_a: npt.NDArray[np.bool_]
    reads_w: npt.NDArray[np.bool_]
    reads_psum: npt.NDArray[np.bool_]
    writes_psum: npt.NDArray[np.bool_]
    a_resident: bool

    @property
    def steps(self) -> int:
        """Tiles in the walk."""
        return int(self.m_tile.size)

    @property
    def tile_index(self) -> npt.NDArray[np.int64]:
        """Shape (steps,): each step's tile number, ``(m_tile·tiles_n + n_tile)·tiles_k +
        k_tile``."""
        return (self.m_tile * self.tiles_n + self.n_tile) * self.tiles_k + self.k_tile


def _walk_tiles(
    dims: tuple[int, int, int],
    tile_dims: tuple[int, int, int],
    order: str,
    *,
    a_resident: bool,
    n_buffers: int | None,
) -> _TileWalk:
    """The steps of the loop nest ``order`` over ``dims = (m, n, k)`` in tiles of
    ``tile_dims``, with a one-tile operand buffer (an operand that the innermost loop does not
    index is read once per pass; a resident A once per token tile)."""
    elems = {d: _tile_sizes(total, t) for d, total, t in zip("mnk", dims, tile_dims, strict=True)}
    counts = {d: len(e) for d, e in elems.items()}
    grids = np.meshgrid(*(np.arange(counts[d]) for d in order), indexing="ij")
    idx = {d: g.ravel().astype(np.int64) for d, g in zip(order, grids, strict=True)}
    mi, ni, ki = idx["m"], idx["n"], idx["k"]
    reads_a = np.ones(mi.size, dtype=bool)
    reads_a[1:] = (mi[1:] != mi[:-1]) | (ki[1:] != ki[:-1])
    if a_resident:
        reads_a &= ni == 0  # the slab is read at the token tile's first channel tile
    reads_w = np.ones(mi.size, dtype=bool)
    reads_w[1:] = (ni[1:] != ni[:-1]) | (ki[1:] != ki[:-1])
    return _TileWalk(
        m_tile=mi, n_tile=ni, k_tile=ki, tiles_m=counts["m"], tiles_n=counts["n"],
        tiles_k=counts["k"], elems_m=elems["m"], elems_n=elems["n"], elems_k=elems["k"],
        reads_a=reads_a, reads_w=reads_w, reads_psum=ki > 0, writes_psum=ki < counts["k"] - 1,
        a_resident=a_resident,
    )  # fmt: skip


@dataclass(frozen=True)
class _GemmLayout:
    """Where each tile of each tensor lives and what the records are called.

    Every tensor is stored tile-major: ``*_tile_bytes[i, j]`` is the size of tile (i, j) in
    B (``ceil(elements · bits / 8)``) and ``*_tile_addr_bytes[i, j]`` its byte offset in the
    tensor. A tiles are indexed (m, k), W tiles (n, k), partial-sum and Y tiles (m, n).

    Attributes:
        a_tile_bytes, a_tile_addr_bytes: the activation operand's tiles.
        w_tile_bytes, w_tile_addr_bytes: the weight operand's tiles.
        psum_tile_bytes, psum_tile_addr_bytes: the partial-sum tiles.
        y_tile_bytes, y_tile_addr_bytes: the output tiles.
        fmt_a, fmt_w: format names of the compute records.
        unit: compute unit name.
        space_a, space_w, space_psum, space_y: memory spaces of the four tensors.
        tensor_a, tensor_w, tensor_psum, tensor_y: their tensor names.
    """

    a_tile_bytes: npt.NDArray[np.int64]
    a_tile_addr_bytes: npt.NDArray[np.int64]
    w_tile_bytes: npt.NDArray[np.int64]
    w_tile_addr_bytes: npt.NDArray[np.int64]
    psum_tile_bytes: npt.NDArray[np.int64]
    psum_tile_addr_bytes: npt.NDArray[np.int64]
    y_tile_bytes: npt.NDArray[np.int64]
    y_tile_addr_bytes: npt.NDArray[np.int64]
    fmt_a: str
    fmt_w: str
    unit: str
    space_a: str
    space_w: str
    space_psum: str
    space_y: str
    tensor_a: str
    tensor_w: str
    tensor_psum: str
    tensor_y: str

    @classmethod
    def of(
        cls,
        walk: _TileWalk,
        bits_a: Fraction,
        bits_w: Fraction,
        bits_psum: Fraction,
        bits_y: Fraction,
        *,
        fmt_a: str,
        fmt_w: str,
        unit: str,
        spaces: Sequence[str],
        tensors: Sequence[str],
    ) -> _GemmLayout:
        """The layout of a walk's tensors at the given bits per element (exact)."""
        a = _tile_bytes(walk.elems_m, walk.elems_k, bits_a)
        w = _tile_bytes(walk.elems_n, walk.elems_k, bits_w)
        p = _tile_bytes(walk.elems_m, walk.elems_n, bits_psum)
        y = _tile_bytes(walk.elems_m, walk.elems_n, bits_y)
        return cls(
            *a, *w, *p, *y, fmt_a=fmt_a, fmt_w=fmt_w, unit=unit, space_a=spaces[0],
            space_w=spaces[1], space_psum=spaces[2], space_y=spaces[3], tensor_a=tensors[0],
            tensor_w=tensors[1], tensor_psum=tensors[2], tensor_y=tensors[3],
        )  # fmt: skip


@dataclass(frozen=True)
class _Schedule:
    """Issue order (seq) and dependencies of a walk's records.

    Attributes:
        seq_a, seq_w, seq_psum_read: shape (steps,) int64: seq of each step's A, W and
            partial-sum read (meaningful where the walk's ``reads_*`` mask is set).
        seq_compute: shape (steps,): seq of each step's GEMM.
        seq_write: shape (steps,): seq of each step's partial-sum or output write.
        dep_a, dep_w, dep_psum_read: one entry per read issued (the masked steps, in step
            order): the seq it waits for, or -1.
        dep_compute: shape (steps,): the read each GEMM waits for, or -1.
    """

    seq_a: npt.NDArray[np.int64]
    seq_w: npt.NDArray[np.int64]
    seq_psum_read: npt.NDArray[np.int64]
    seq_compute: npt.NDArray[np.int64]
    seq_write: npt.NDArray[np.int64]
    dep_a: npt.NDArray[np.int64] | int
    dep_w: npt.NDArray[np.int64] | int
    dep_psum_read: npt.NDArray[np.int64] | int
    dep_compute: npt.NDArray[np.int64]


def _plain_schedule(walk: _TileWalk) -> _Schedule:
    """Per tile: [A read] [W read] [psum read] compute, psum write or Y write (no slots)."""
    reads_a, reads_w, reads_psum = walk.reads_a, walk.reads_w, walk.reads_psum
    records = reads_a.astype(np.int64) + reads_w + reads_psum + 2
    seq_a = np.cumsum(records) - records
    seq_w = seq_a + reads_a
    seq_psum_read = seq_w + reads_w
    seq_compute = seq_psum_read + reads_psum
    # The compute depends on the latest read issued so far (this tile's or an earlier one's).
    last = np.where(
        reads_psum, seq_psum_read, np.where(reads_w, seq_w, np.where(reads_a, seq_a, -1))
    )
    return _Schedule(
        seq_a=seq_a, seq_w=seq_w, seq_psum_read=seq_psum_read, seq_compute=seq_compute,
        seq_write=seq_compute + 1, dep_a=-1, dep_w=-1, dep_psum_read=-1,
        dep_compute=np.maximum.accumulate(last),
    )  # fmt: skip


def _pipelined_schedule(walk: _TileWalk, n_buffers: int) -> _Schedule:
    """Reads issued ``n_buffers - 1`` tiles ahead, with buffer-slot dependencies."""
    reads_a, reads_w, reads_psum = walk.reads_a, walk.reads_w, walk.reads_psum
    steps = np.arange(walk.steps, dtype=np.int64)
    # Position (in compute order) at which each tile's reads are issued.
    issue_at = np.maximum(steps - (n_buffers - 1), 0)
    operand_reads = reads_a.astype(np.int64) + reads_w
    reads_at = np.zeros(walk.steps, dtype=np.int64)
    np.add.at(reads_at, issue_at, operand_reads)
    records = reads_at + reads_psum + 2
    base = np.cumsum(records) - records
    # Reads of the tiles issued at one position, in tile order, A before W.
    reads_before = np.cumsum(operand_reads) - operand_reads  # of earlier tiles, anywhere
    reads_before_pos = np.cumsum(reads_at) - reads_at  # issued at earlier positions
    seq_a = base[issue_at] + (reads_before - reads_before_pos[issue_at])
    seq_w = seq_a + reads_a
    seq_psum_read = base + reads_at
    seq_compute = seq_psum_read + reads_psum
    seq_write = seq_compute + 1
    if walk.a_resident:
        dep_a = _slab_deps(walk, seq_compute, n_buffers)
    else:
        dep_a = _slot_deps(reads_a, seq_compute, n_buffers)
    # Partial-sum read of (mi, ni, ki) reads back the write of (mi, ni, ki - 1).
    flat = walk.tile_index
    step_of_tile = np.empty(walk.steps, dtype=np.int64)
    step_of_tile[flat] = steps
    previous_k = step_of_tile[np.maximum(flat - 1, 0)]
    return _Schedule(
        seq_a=seq_a, seq_w=seq_w, seq_psum_read=seq_psum_read, seq_compute=seq_compute,
        seq_write=seq_write, dep_a=dep_a, dep_w=_slot_deps(reads_w, seq_compute, n_buffers),
        dep_psum_read=seq_write[previous_k][reads_psum],
        dep_compute=np.where(reads_w, seq_w, np.where(reads_a, seq_a, -1)),
    )  # fmt: skip


def _slot_deps(
    reads: npt.NDArray[np.bool_], seq_compute: npt.NDArray[np.int64], n_buffers: int
) -> npt.NDArray[np.int64]:
    """Read j of an operand overwrites the slot of read j - n_buffers, which the computes up
    to (the step of read j - n_buffers + 1) - 1 use: it waits for the last of them."""
    step_of_read = np.flatnonzero(reads)
    dep = np.full(step_of_read.size, -1, dtype=np.int64)
    if step_of_read.size > n_buffers - 1:
        j = np.arange(n_buffers, step_of_read.size)
        dep[n_buffers:] = seq_compute[step_of_read[j - n_buffers + 1] - 1]
    return dep


def _slab_deps(
    walk: _TileWalk, seq_compute: npt.NDArray[np.int64], n_buffers: int
) -> npt.NDArray[np.int64]:
    """Resident A: ``n_buffers`` slabs of ``tiles_k`` tiles. Read j (tile (mi, 0, ki))
    overwrites the slot of read j - n_buffers·tiles_k, A(mi - n_buffers, ki), which the
    computes up to its token tile's last channel tile, (mi - n_buffers, tiles_n - 1, ki), use
    (order mnk: tile index = step)."""
    n_n, n_k = walk.tiles_n, walk.tiles_k
    step_of_read = np.flatnonzero(walk.reads_a)
    slots = n_buffers * n_k
    dep = np.full(step_of_read.size, -1, dtype=np.int64)
    if step_of_read.size > slots:
        old = step_of_read[: step_of_read.size - slots]
        last_use = (walk.m_tile[old] * n_n + n_n - 1) * n_k + walk.k_tile[old]
        dep[slots:] = seq_compute[last_use]
    return dep


def _emit_gemm(
    b: TraceBuilder, walk: _TileWalk, lay: _GemmLayout, sched: _Schedule, *, phases: bool
) -> None:
    """Add a walk's records to ``b`` at the schedule's seq numbers. With ``phases`` the
    records name the buffer they fill or drain (``act``, ``wgt``, ``psum``, ``out``)."""
    mi, ni, ki = walk.m_tile, walk.n_tile, walk.k_tile
    ra, rw, rp, wp = walk.reads_a, walk.reads_w, walk.reads_psum, walk.writes_psum
    wy = ~wp
    act, wgt, psum, out = ("act", "wgt", "psum", "out") if phases else ("", "", "", "")
    b.memory_many(
        seq=sched.seq_a[ra], space=lay.space_a, phase=act, rw=0, tensor=lay.tensor_a,
        dep=sched.dep_a, nbytes=lay.a_tile_bytes[mi, ki][ra],
        addr=lay.a_tile_addr_bytes[mi, ki][ra],
    )  # fmt: skip
    b.memory_many(
        seq=sched.seq_w[rw], space=lay.space_w, phase=wgt, rw=0, tensor=lay.tensor_w,
        dep=sched.dep_w, nbytes=lay.w_tile_bytes[ni, ki][rw],
        addr=lay.w_tile_addr_bytes[ni, ki][rw],
    )  # fmt: skip
    psum_bytes, psum_addr = lay.psum_tile_bytes[mi, ni], lay.psum_tile_addr_bytes[mi, ni]
    b.memory_many(
        seq=sched.seq_psum_read[rp], space=lay.space_psum, phase=psum, rw=0,
        tensor=lay.tensor_psum, dep=sched.dep_psum_read, nbytes=psum_bytes[rp],
        addr=psum_addr[rp],
    )  # fmt: skip
    b.compute_many(
        seq=sched.seq_compute, op="gemm", unit=lay.unit, m=walk.elems_m[mi], n=walk.elems_n[ni],
        k=walk.elems_k[ki], fmt_a=lay.fmt_a, fmt_b=lay.fmt_w, tile=walk.tile_index,
        dep=sched.dep_compute,
    )  # fmt: skip
    b.memory_many(
        seq=sched.seq_write[wp], space=lay.space_psum, phase=psum, rw=1,
        tensor=lay.tensor_psum, dep=sched.seq_compute[wp], nbytes=psum_bytes[wp],
        addr=psum_addr[wp],
    )  # fmt: skip
    b.memory_many(
        seq=sched.seq_write[wy], space=lay.space_y, phase=out, rw=1, tensor=lay.tensor_y,
        dep=sched.seq_compute[wy], nbytes=lay.y_tile_bytes[mi, ni][wy],
        addr=lay.y_tile_addr_bytes[mi, ni][wy],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The fused attention program (emitted by ``_workload.attention_trace``)


@dataclass(frozen=True)
class _AttentionTiles:
    """The work of a fused attention in blocks (KV head x query tile) and key tiles.

    Attributes:
        block_head: shape (blocks,) int64: the block's KV head (blocks are head-major).
        block_rows: shape (blocks,): query rows, tokens x the GQA group (token-major).
        block_first_token: shape (blocks,): position of the block's first query token.
        block_key_tiles: shape (blocks,): key tiles the block computes.
        block_first_tile: shape (blocks,): index of the block's first key tile.
        tile_block: shape (tiles,) int64: the key tile's block (tiles are block-major).
        tile_in_block: shape (tiles,): the key tile's index j within its block.
        tile_keys: shape (tiles,): keys in the tile (the last tile of the cache is smaller).
        tile_is_last: shape (tiles,) bool: the block's last key tile.
    """

    block_head: npt.NDArray[np.int64]
    block_rows: npt.NDArray[np.int64]
    block_first_token: npt.NDArray[np.int64]
    block_key_tiles: npt.NDArray[np.int64]
    block_first_tile: npt.NDArray[np.int64]
    tile_block: npt.NDArray[np.int64]
    tile_in_block: npt.NDArray[np.int64]
    tile_keys: npt.NDArray[np.int64]
    tile_is_last: npt.NDArray[np.bool_]

    @property
    def blocks(self) -> int:
        """(KV head, query tile) blocks."""
        return int(self.block_head.size)

    @property
    def tiles(self) -> int:
        """Key tiles, all blocks."""
        return int(self.tile_block.size)


def _attention_tiles(
    *,
    kv_heads: int,
    group: int,
    q_tokens: int,
    q_start: int,
    n_keys: int,
    causal: bool,
    rows_per_tile: int,
    keys_per_tile: int,
) -> _AttentionTiles:
    """Blocks and key tiles of the fused attention: query tiles of ``rows_per_tile / group``
    tokens per KV head; per block the key tiles holding any key its tokens attend."""
    tokens_per_tile = rows_per_tile // group
    n_qt = -(-q_tokens // tokens_per_tile)
    first_token = q_start + np.arange(n_qt, dtype=np.int64) * tokens_per_tile
    end_token = np.minimum(first_token + tokens_per_tile, q_start + q_tokens)
    keys_end = end_token if causal else np.full(n_qt, n_keys, dtype=np.int64)
    key_tiles = (keys_end + keys_per_tile - 1) // keys_per_tile
    block_key_tiles = np.tile(key_tiles, kv_heads)
    n_blk = block_key_tiles.size
    tile_block = np.repeat(np.arange(n_blk, dtype=np.int64), block_key_tiles)
    block_first_tile = np.cumsum(block_key_tiles) - block_key_tiles
    tile_in_block = np.arange(tile_block.size, dtype=np.int64) - block_first_tile[tile_block]
    return _AttentionTiles(
        block_head=np.repeat(np.arange(kv_heads, dtype=np.int64), n_qt),
        block_rows=np.tile((end_token - first_token) * group, kv_heads),
        block_first_token=np.tile(first_token, kv_heads),
        block_key_tiles=block_key_tiles,
        block_first_tile=block_first_tile,
        tile_block=tile_block,
        tile_in_block=tile_in_block,
        tile_keys=np.minimum(keys_per_tile, n_keys - tile_in_block * keys_per_tile),
        tile_is_last=tile_in_block == block_key_tiles[tile_block] - 1,
    )


@dataclass(frozen=True)
class _AttentionSeqs:
    """Issue order of the attention records (shape (blocks,) or (tiles,) int64 each).

    Attributes:
        q: per block, the Q read. out_write: per block, the output write.
        k, qk, softmax, s, p: per key tile, the K read, ``QK^T``, the softmax, the score
            read (PSUM) and the probability write (ACT).
        v, psum_read, pv, write: per key tile, the V read, the output partial-sum read back
            (tiles after the first), ``PV``, and the partial-sum write (the block's output
            write on its last tile).
    """

    q: npt.NDArray[np.int64]
    out_write: npt.NDArray[np.int64]
    k: npt.NDArray[np.int64]
    qk: npt.NDArray[np.int64]
    softmax: npt.NDArray[np.int64]
    s: npt.NDArray[np.int64]
    p: npt.NDArray[np.int64]
    v: npt.NDArray[np.int64]
    psum_read: npt.NDArray[np.int64]
    pv: npt.NDArray[np.int64]
    write: npt.NDArray[np.int64]


def _attention_seqs(t: _AttentionTiles, n_buffers: int) -> _AttentionSeqs:
    """Program order, per block: Q (key 0), F(i) (key 4i + 2), B(j) (key 4j + 4 without
    lookahead, 4j + 8 with one tile of it: F0 F1 B0 F2 B1 ... B(J-2) B(J-1)). F(i) is the
    front half of key tile i (K, QK, softmax, S, P), B(j) the back half (V, [O psum read],
    PV, [O psum write]). The block's output write is its own part, issued after the next
    block's Q and first K reads (key 3 of the next block; after everything for the last
    block) so that an in-order DMA queue prefetches the next block while the array finishes
    this one."""
    n_blk, nkt, kj = t.blocks, t.tiles, t.tile_in_block
    ahead = 1 if n_buffers >= 2 else 0
    blocks = np.arange(n_blk, dtype=np.int64)
    front_size = np.full(nkt, 5, dtype=np.int64)
    back_size = 2 + (kj > 0).astype(np.int64) + (~t.tile_is_last)
    write_block = np.minimum(blocks + 1, n_blk - 1)
    write_key = np.where(blocks < n_blk - 1, 3, 4 * int(t.block_key_tiles.max()) + 16)
    part_block = np.concatenate([blocks, t.tile_block, t.tile_block, write_block])
    part_key = np.concatenate(
        [np.zeros(n_blk, dtype=np.int64), 4 * kj + 2, 4 * kj + 4 + 4 * ahead, write_key]
    )
    part_size = np.concatenate(
        [np.ones(n_blk, dtype=np.int64), front_size, back_size, np.ones(n_blk, dtype=np.int64)]
    )
    order = np.lexsort((part_key, part_block))
    base = np.empty(part_size.size, dtype=np.int64)
    sizes_sorted = part_size[order]
    base[order] = np.cumsum(sizes_sorted) - sizes_sorted
    front = base[n_blk : n_blk + nkt]
    back = base[n_blk + nkt : n_blk + 2 * nkt]
    out_write = base[n_blk + 2 * nkt :]
    pv = back + 1 + (kj > 0)
    return _AttentionSeqs(
        q=base[:n_blk], out_write=out_write, k=front, qk=front + 1, softmax=front + 2,
        s=front + 3, p=front + 4, v=back, psum_read=back + 1, pv=pv,
        write=np.where(t.tile_is_last, out_write[t.tile_block], pv + 1),
    )  # fmt: skip


@dataclass(frozen=True)
class _AttentionBytes:
    """Sizes and offsets of the attention's DRAM records, B.

    The K and V caches hold, per KV head, ``n_keys x head_dim`` elements; Q and the output,
    per KV head, the ``q_tokens x group`` rows; a tile's slice starts at its first key (token).

    Attributes:
        kv_tile_bytes, kv_tile_addr_bytes: shape (tiles,): each key tile's K (and V) slice.
        q_block_bytes, q_block_addr_bytes: shape (blocks,): each block's Q (and output) rows.
    """

    kv_tile_bytes: npt.NDArray[np.int64]
    kv_tile_addr_bytes: npt.NDArray[np.int64]
    q_block_bytes: npt.NDArray[np.int64]
    q_block_addr_bytes: npt.NDArray[np.int64]


def _attention_bytes(
    t: _AttentionTiles,
    *,
    group: int,
    head_dim: int,
    q_tokens: int,
    q_start: int,
    n_keys: int,
    keys_per_tile: int,
    bits_act: Fraction,
    bits_kv: Fraction,
) -> _AttentionBytes:
    """Byte sizes and addresses of the Q, K, V and output records (exact, rounded up)."""
    head_kv_bytes = storage_bytes(n_keys * head_dim, bits_kv)
    head_q_bytes = storage_bytes(q_tokens * group * head_dim, bits_act)
    first_key = t.tile_in_block * keys_per_tile
    first_row = (t.block_first_token - q_start) * group
    return _AttentionBytes(
        kv_tile_bytes=storage_bytes(t.tile_keys * head_dim, bits_kv),
        kv_tile_addr_bytes=t.block_head[t.tile_block] * head_kv_bytes
        + storage_bytes(first_key * head_dim, bits_kv),
        q_block_bytes=storage_bytes(t.block_rows * head_dim, bits_act),
        q_block_addr_bytes=t.block_head * head_q_bytes
        + storage_bytes(first_row * head_dim, bits_act),
    )


def _emit_attention(
    b: TraceBuilder,
    t: _AttentionTiles,
    seqs: _AttentionSeqs,
    by: _AttentionBytes,
    *,
    n_buffers: int,
    head_dim: int,
    fmt_act: tuple[str, Fraction],
    fmt_kv: str,
    bits_psum: Fraction,
) -> None:
    """Add the attention's records to ``b`` at their seq numbers, with their dependencies:
    a K read waits for the ``QK^T`` that frees its slot (``n_buffers`` K reads earlier), a Q
    read for the previous block's last ``QK^T``, each step for the one before it, an output
    partial-sum read for the previous tile's write."""
    name_a, bits_a = fmt_act
    kb, kj, keys, last = t.tile_block, t.tile_in_block, t.tile_keys, t.tile_is_last
    nkt, s = t.tiles, seqs
    dep_k = np.full(nkt, -1, dtype=np.int64)
    if nkt > n_buffers:
        dep_k[n_buffers:] = s.qk[: nkt - n_buffers]  # K slot reused n_buffers K reads later
    dep_q = np.full(t.blocks, -1, dtype=np.int64)
    dep_q[1:] = s.qk[t.block_first_tile + t.block_key_tiles - 1][:-1]
    prev_write = np.roll(s.write, 1)  # O partial-sum write of the previous key tile
    rows = t.block_rows[kb]
    tile = np.arange(nkt)
    b.memory_many(
        seq=s.q, space="DRAM", phase="act", rw=0, tensor="q", dep=dep_q,
        nbytes=by.q_block_bytes, addr=by.q_block_addr_bytes,
    )  # fmt: skip
    b.memory_many(
        seq=s.k, space="DRAM", phase="wgt", rw=0, tensor="k_cache", dep=dep_k,
        nbytes=by.kv_tile_bytes, addr=by.kv_tile_addr_bytes,
    )  # fmt: skip
    b.compute_many(
        seq=s.qk, op="gemm", unit="pe_array", m=rows, n=keys, k=head_dim, fmt_a=name_a,
        fmt_b=fmt_kv, tile=tile, dep=s.k,
    )  # fmt: skip
    b.compute_many(
        seq=s.softmax, op="softmax", unit="vector", m=rows, n=keys, k=0, macs=0, fmt_a="fp16",
        tile=tile, dep=s.qk,
    )  # fmt: skip
    b.memory_many(
        seq=s.s, space="PSUM", phase="psum", rw=0, tensor="S", dep=s.softmax,
        nbytes=storage_bytes(rows * keys, bits_psum),
    )  # fmt: skip
    b.memory_many(
        seq=s.p, space="ACT", phase="act", rw=1, tensor="P", dep=s.softmax,
        nbytes=storage_bytes(rows * keys, bits_a),
    )  # fmt: skip
    b.memory_many(
        seq=s.v, space="DRAM", phase="wgt", rw=0, tensor="v_cache", dep=s.softmax,
        nbytes=by.kv_tile_bytes, addr=by.kv_tile_addr_bytes,
    )  # fmt: skip
    rd, mid = kj > 0, ~last
    o_psum_bytes = storage_bytes(rows * head_dim, bits_psum)
    b.memory_many(
        seq=s.psum_read[rd], space="PSUM", phase="psum", rw=0, tensor="o_psum",
        dep=prev_write[rd], nbytes=o_psum_bytes[rd],
    )  # fmt: skip
    b.compute_many(
        seq=s.pv, op="gemm", unit="pe_array", m=rows, n=head_dim, k=keys, fmt_a=name_a,
        fmt_b=fmt_kv, tile=tile, dep=s.v,
    )  # fmt: skip
    b.memory_many(
        seq=s.write[mid], space="PSUM", phase="psum", rw=1, tensor="o_psum", dep=s.pv[mid],
        nbytes=o_psum_bytes[mid],
    )  # fmt: skip
    b.memory_many(
        seq=s.write[last], space="DRAM", phase="out", rw=1, tensor="attn_out",
        dep=s.pv[last], nbytes=by.q_block_bytes[kb[last]], addr=by.q_block_addr_bytes[kb[last]],
    )  # fmt: skip
