"""Trace of a tiled block-quantized GEMM (the contract of ``coaccel.trace``; docs/trace.md).

:func:`gemm_trace` walks the tiles of ``Y[M, N] = A[M, K] @ W[N, K]^T`` in a chosen loop order and
records, per tile, the operand reads, the GEMM work and the partial-sum traffic, with byte counts
taken from each operand format's effective bits per element (scales and side bits included).

Records are emitted in bulk (numpy columns, one pass per record kind), so a GEMM of a few
hundred thousand tiles takes well under a second. Two programs are available:

* the *plain* program (``n_buffers=None``, the default): per tile, reads, compute, writes, with
  the dependencies of a one-tile operand buffer and no explicit buffer slots;
* the *double-buffered* program (``n_buffers=b``): what the HBQ accelerator's controller runs
  (docs/hbq_sim.md): operand reads are issued ``b - 1`` tiles ahead of the compute that uses
  them, each read waits (``dep``) for the compute that frees its buffer slot, each compute waits
  for its newest operand read, and each DRAM record names the on-chip buffer it fills or drains
  in ``phase`` (``"act"``, ``"wgt"``, ``"out"``; partial sums ``"psum"``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.trace import (
    COMPUTE_DTYPE,
    EVENT_DTYPE,
    MEMORY_DTYPE,
    SPARSITY_DTYPE,
    TABLE_FIELDS,
    Trace,
    TraceBuilder,
)

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
_TABLE_OF = dict(TABLE_FIELDS)


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
    """Stored bits per partial sum in the PSUM buffer (specs/hbq.md §2.2).

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
    num, den = bits.numerator, bits.denominator * 8
    elems = rows[:, None] * cols[None, :]
    # ceil(elems * bits / 8) in exact integer arithmetic (no float rounding).
    nbytes = (elems * num + den - 1) // den
    flat = nbytes.ravel()
    offsets = (np.cumsum(flat) - flat).reshape(nbytes.shape)
    return nbytes.astype(np.int64), offsets.astype(np.int64)


class _Program:
    """Collects interleaved memory and compute records with explicit seq numbers.

    The caller decides each record's seq (program order); :meth:`trace` assembles the records
    column by column in seq order and builds the :class:`~coaccel.trace.Trace` through its
    validating constructor. String tables hold the used names in order of first use, as a
    :class:`~coaccel.trace.TraceBuilder` fed record by record would intern them.
    """

    def __init__(self) -> None:
        self.tables: dict[str, list[str]] = {
            t: [""] for t in ("unit", "op", "fmt", "phase", "tensor", "space", "kernel_name")
        }
        self._index: dict[str, dict[str, int]] = {t: {"": 0} for t in self.tables}
        self.memory: list[dict[str, np.ndarray]] = []
        self.compute: list[dict[str, np.ndarray]] = []

    def code(self, table: str, name: str) -> int:
        idx = self._index[table].get(name)
        if idx is None:
            idx = len(self.tables[table])
            self.tables[table].append(name)
            self._index[table][name] = idx
        return idx

    def _names(self, table: str, v: Any) -> Any:
        if isinstance(v, str):
            return self.code(table, v)
        arr = np.asarray(v)
        if arr.dtype.kind == "U":
            uniq, inv = np.unique(arr, return_inverse=True)
            codes = np.asarray([self.code(table, str(u)) for u in uniq], dtype=np.int32)
            return codes[inv]
        return arr

    def add_memory(self, seq: npt.NDArray[np.int64], **cols: Any) -> None:
        n = np.size(seq)
        out = {"seq": np.asarray(seq, dtype=np.int64)}
        for name, v in cols.items():
            if name in ("phase", "tensor", "space"):
                v = self._names(name, v)
            out[name] = np.broadcast_to(np.asarray(v), (n,))
        out.setdefault("count", np.ones(n, dtype=np.int64))
        out.setdefault("dep", np.full(n, -1, dtype=np.int64))
        if "stride" not in out:
            out["stride"] = out.get("nbytes", np.zeros(n, dtype=np.int64))
        self.memory.append(out)

    def add_compute(self, seq: npt.NDArray[np.int64], **cols: Any) -> None:
        n = np.size(seq)
        out = {"seq": np.asarray(seq, dtype=np.int64)}
        for name, v in cols.items():
            if name in ("unit", "op"):
                v = self._names(name, v)
            elif name in ("fmt_a", "fmt_b"):
                v = self._names("fmt", v)
            out[name] = np.broadcast_to(np.asarray(v), (n,))
        out.setdefault("dep", np.full(n, -1, dtype=np.int64))
        out.setdefault("tile", np.full(n, -1, dtype=np.int64))
        if "macs" not in out:
            zero = np.zeros(n, dtype=np.int64)
            out["macs"] = (
                out.get("m", zero).astype(np.int64)
                * out.get("n", zero).astype(np.int64)
                * out.get("k", zero).astype(np.int64)
            )
        self.compute.append(out)

    @staticmethod
    def _assemble(
        chunks: list[dict[str, np.ndarray]], dtype: np.dtype, dest: npt.NDArray[np.int64]
    ) -> np.ndarray:
        """One structured array of all chunks; row ``i`` of the chunks goes to ``dest[i]``."""
        out = np.zeros(dest.size, dtype=dtype)
        order = np.empty(dest.size, dtype=np.int64)
        order[dest] = np.arange(dest.size, dtype=np.int64)
        for name in dtype.names:
            parts = [
                c[name] if name in c else np.zeros(c["seq"].size, dtype=dtype[name]) for c in chunks
            ]
            if parts:
                # A gather into a contiguous column, then one strided copy (faster than a
                # scatter into the structured array).
                out[name] = np.concatenate(parts)[order]
        return out

    def _destinations(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Row positions of the memory and compute records in seq order (each kind sorted)."""
        seq_m = np.concatenate([c["seq"] for c in self.memory] or [np.zeros(0, np.int64)])
        seq_c = np.concatenate([c["seq"] for c in self.compute] or [np.zeros(0, np.int64)])
        n = seq_m.size + seq_c.size
        both = np.concatenate([seq_m, seq_c])
        if n and both.min() == 0 and both.max() == n - 1 and np.bincount(both).max() == 1:
            # The usual case: seq numbers 0 .. n-1, each used once: ranks by counting, no sort.
            is_mem = np.zeros(n, dtype=np.int64)
            is_mem[seq_m] = 1
            return (np.cumsum(is_mem) - 1)[seq_m], (np.cumsum(1 - is_mem) - 1)[seq_c]
        dest = []
        for seq in (seq_m, seq_c):
            d = np.empty(seq.size, dtype=np.int64)
            d[np.argsort(seq, kind="stable")] = np.arange(seq.size, dtype=np.int64)
            dest.append(d)
        return dest[0], dest[1]

    def _renumber(self, arrays: dict[str, np.ndarray]) -> dict[str, list[str]]:
        """Renumber table codes to first-use order (seq, then field order); drop unused names."""
        out = {}
        for table, names in self.tables.items():
            fields = [
                (kind, pos, f)
                for kind, a in arrays.items()
                for pos, f in enumerate(a.dtype.names)
                if _TABLE_OF.get((kind, f)) == table and a.size
            ]
            remap = np.zeros(len(names), dtype=np.int32)
            new_names = [""]
            if fields:
                # Records are in seq order: a code's first row is its first use. Tables are
                # short, so one comparison pass per name beats a sort of the column.
                first = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
                for kind, pos, f in fields:
                    col = arrays[kind][f]
                    seq = arrays[kind]["seq"]
                    for c in range(1, len(names)):
                        hit = col == c
                        if hit.any():
                            first[c] = min(first[c], int(seq[int(np.argmax(hit))]) * 16 + pos)
                used = np.flatnonzero(first[1:] < np.iinfo(np.int64).max) + 1
                ordered = used[np.argsort(first[used], kind="stable")]
                remap[ordered] = np.arange(1, ordered.size + 1, dtype=np.int32)
                new_names += [names[i] for i in ordered.tolist()]
                for kind, _, f in fields:
                    arrays[kind][f] = remap[arrays[kind][f]]
            out[table] = new_names
        return out

    def trace(self, producer: str, workload: Mapping[str, Any]) -> Trace:
        dest_m, dest_c = self._destinations()
        arrays = {
            "memory": self._assemble(self.memory, MEMORY_DTYPE, dest_m),
            "compute": self._assemble(self.compute, COMPUTE_DTYPE, dest_c),
        }
        # The column chunks are no longer needed; free them before the trace is validated.
        self.memory, self.compute = [], []
        tables = self._renumber(arrays)
        meta = TraceBuilder(producer=producer, workload=workload).build().meta
        meta = dict(meta, tables=tables)
        for a in arrays.values():
            a.flags.writeable = False  # ours alone: the trace need not copy them
        return Trace(
            meta,
            compute=arrays["compute"],
            memory=arrays["memory"],
            sparsity=np.zeros(0, dtype=SPARSITY_DTYPE),
            events=np.zeros(0, dtype=EVENT_DTYPE),
        )


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
) -> Trace:
    """Trace of the tiled GEMM ``Y[M, N] = A[M, K] @ W[N, K]^T``.

    The loops run over tiles in ``order`` (outermost first; default ``"nkm"``, the
    weight-stationary order of the HBQ accelerator: output-channel tile, K tile, token tile).
    Per tile, in issue order:

    1. a read of the A tile (``tensor="A"``) unless the previous tile used the same A tile, and
       likewise for the W tile (``tensor="W"``): a one-tile operand buffer, so the operand that
       the innermost loop does not index is read once per pass;
    2. a ``"gemm"`` compute record (``m, n, k`` of the tile, ``macs = m·n·k``, the two format
       names, ``tile`` = ``(mi·n_tiles_n + ni)·n_tiles_k + ki``), depending on the latest
       operand read;
    3. a read of the partial-sum tile (``tensor="psum"``) for every K tile but the first, and a
       write of it for every K tile but the last, or else a write of the output tile
       (``tensor="Y"``).

    With ``a_resident=True`` (loop order ``"mnk"`` only) the activation buffer keeps every K
    tile of the current token tile (the ``tile_m x K`` slab) across the output-channel tiles:
    each A tile is read once per token tile, at the first channel tile, instead of once per
    channel tile. The caller checks that the slab fits (``n_buffers`` slabs for the pipelined
    program).

    With ``n_buffers=b`` (the double-buffered program, ``b=2``), the reads of step 1 are issued
    ``b - 1`` tiles early (all reads of the first ``b`` tiles come first), each operand read
    depends on the compute that last used the buffer slot it overwrites (``b`` reads of that
    operand earlier; ``b`` slabs, i.e. ``b x K-tiles`` reads, for a resident A), each compute
    depends on its own newest operand read (-1 when it reuses both operands), each partial-sum
    read on the partial-sum write it reads back, and the DRAM
    records carry ``phase`` ``"act"``, ``"wgt"``, ``"out"`` (``"psum"`` for partial sums).

    Bytes: A and W tiles use the formats' effective bits per element
    (``FormatSpec.bits_per_element()``, side information included; HBQ names are resolved with
    ``role="activation"`` for A and ``"weight"`` for W), PSUM tiles
    :func:`psum_bits_per_element`, Y tiles the ``out`` format's bits. Each tensor is stored
    tile-major (every tile contiguous, tiles in row-major tile order), so each tile access is one
    contiguous record of ``ceil(elements · bits / 8)`` bytes at its tile's byte offset. Edge
    tiles are smaller when a dimension is not a multiple of its tile size.

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
            pipelined program described above.
        a_resident: keep the token tile's activation slab on chip across channel tiles (above).
        tensors: the tensor names of A, W, the partial sums and Y.
        workload: extra JSON metadata merged into the trace's ``workload``.

    Returns:
        The :class:`coaccel.trace.Trace` (no kernels or events: ``kernel`` stays 0, the
        docs/trace.md convention for the ASIC).
    """
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
    ratio = Fraction(out_cols_per_n)
    if ratio <= 0 or ratio > 1:
        raise ValueError(f"out_cols_per_n={out_cols_per_n} must be in (0, 1]")
    if len(tensors) != 4 or not all(isinstance(t, str) and t for t in tensors):
        raise ValueError(f"tensors={tensors!r} must be 4 non-empty names (A, W, psum, Y)")
    name_a, bits_a = operand_storage(fmt_a, "activation")
    name_w, bits_w = operand_storage(fmt_w, "weight")
    name_y, bits_y = operand_storage(out, "activation")
    bits_p = psum_bits_per_element(psum_mode, sa_n=sa_n)

    sizes = {"m": _tile_sizes(m, tile_m), "n": _tile_sizes(n, tile_n), "k": _tile_sizes(k, tile_k)}
    n_tiles = {d: len(s) for d, s in sizes.items()}
    a_bytes, a_addr = _tile_bytes(sizes["m"], sizes["k"], bits_a)
    w_bytes, w_addr = _tile_bytes(sizes["n"], sizes["k"], bits_w)
    p_bytes, p_addr = _tile_bytes(sizes["m"], sizes["n"], bits_p)
    y_bytes, y_addr = _tile_bytes(sizes["m"], sizes["n"], bits_y * ratio)

    meta = {
        "op": "gemm",
        "m": int(m),
        "n": int(n),
        "k": int(k),
        "tile_m": int(tile_m),
        "tile_n": int(tile_n),
        "tile_k": int(tile_k),
        "order": order,
        "fmt_a": name_a,
        "fmt_w": name_w,
        "bits_a": float(bits_a),
        "bits_w": float(bits_w),
        "psum_mode": psum_mode,
        "psum_bits": float(bits_p),
        "out": name_y,
        **dict(workload or {}),
    }
    if a_resident:
        meta["a_resident"] = True
    if n_buffers is not None:
        meta["n_buffers"] = int(n_buffers)
        meta["bits_out"] = float(bits_y)
        if ratio != 1:
            meta["out_cols_per_n"] = str(ratio)

    # Tile indices in loop order (outermost first), as flat arrays.
    grids = np.meshgrid(*(np.arange(n_tiles[d]) for d in order), indexing="ij")
    idx = {d: g.ravel().astype(np.int64) for d, g in zip(order, grids, strict=True)}
    mi, ni, ki = idx["m"], idx["n"], idx["k"]
    n_t = mi.size
    last_k = n_tiles["k"] - 1
    new_a = np.ones(n_t, dtype=bool)
    new_a[1:] = (mi[1:] != mi[:-1]) | (ki[1:] != ki[:-1])
    if a_resident:
        new_a &= ni == 0  # the slab is read at the token tile's first channel tile
    new_w = np.ones(n_t, dtype=bool)
    new_w[1:] = (ni[1:] != ni[:-1]) | (ki[1:] != ki[:-1])
    psum_rd = ki > 0
    psum_wr = ki < last_k

    prog = _Program()
    t_a, t_w, t_p, t_y = tensors
    # Everything the two emitters need, by name.
    v = dict(
        mi=mi, ni=ni, ki=ki, n_t=n_t, new_a=new_a, new_w=new_w, psum_rd=psum_rd,
        psum_wr=psum_wr, sizes=sizes, n_tiles=n_tiles, n_buffers=n_buffers,
        a_bytes=a_bytes, a_addr=a_addr, w_bytes=w_bytes, w_addr=w_addr, p_bytes=p_bytes,
        p_addr=p_addr, y_bytes=y_bytes, y_addr=y_addr, a_space=a_space, w_space=w_space,
        psum_space=psum_space, out_space=out_space, unit=unit, name_a=name_a, name_w=name_w,
        t_a=t_a, t_w=t_w, t_p=t_p, t_y=t_y, a_resident=a_resident,
    )  # fmt: skip
    if n_buffers is None:
        _plain_program(prog, v)
    else:
        _pipelined_program(prog, v)
    return prog.trace("coaccel.models.hbq.gemm", meta)


def _plain_program(prog: _Program, v: dict[str, Any]) -> None:
    """Per tile: [A read] [W read] [psum read] compute, psum write or Y write (no slots)."""
    mi, ni, ki = v["mi"], v["ni"], v["ki"]
    new_a, new_w, psum_rd, psum_wr = v["new_a"], v["new_w"], v["psum_rd"], v["psum_wr"]
    counts = new_a.astype(np.int64) + new_w + psum_rd + 2
    base = np.cumsum(counts) - counts
    s_a = base
    s_w = base + new_a
    s_pr = s_w + new_w
    s_c = s_pr + psum_rd
    s_wr = s_c + 1
    # The compute depends on the latest read issued so far (this tile's or an earlier one's).
    last = np.where(psum_rd, s_pr, np.where(new_w, s_w, np.where(new_a, s_a, -1)))
    dep_c = np.maximum.accumulate(last)
    sizes, n_tiles = v["sizes"], v["n_tiles"]
    a_space, w_space, p_space, o_space = v["a_space"], v["w_space"], v["psum_space"], v["out_space"]
    prog.add_memory(
        s_a[new_a],
        space=a_space,
        rw=0,
        tensor=v["t_a"],
        nbytes=v["a_bytes"][mi, ki][new_a],
        addr=v["a_addr"][mi, ki][new_a],
    )
    prog.add_memory(
        s_w[new_w],
        space=w_space,
        rw=0,
        tensor=v["t_w"],
        nbytes=v["w_bytes"][ni, ki][new_w],
        addr=v["w_addr"][ni, ki][new_w],
    )
    prog.add_memory(
        s_pr[psum_rd],
        space=p_space,
        rw=0,
        tensor=v["t_p"],
        nbytes=v["p_bytes"][mi, ni][psum_rd],
        addr=v["p_addr"][mi, ni][psum_rd],
    )
    prog.add_compute(
        s_c,
        op="gemm",
        unit=v["unit"],
        m=sizes["m"][mi],
        n=sizes["n"][ni],
        k=sizes["k"][ki],
        fmt_a=v["name_a"],
        fmt_b=v["name_w"],
        tile=(mi * n_tiles["n"] + ni) * n_tiles["k"] + ki,
        dep=dep_c,
    )
    prog.add_memory(
        s_wr[psum_wr],
        space=p_space,
        rw=1,
        tensor=v["t_p"],
        dep=s_c[psum_wr],
        nbytes=v["p_bytes"][mi, ni][psum_wr],
        addr=v["p_addr"][mi, ni][psum_wr],
    )
    y = ~psum_wr
    prog.add_memory(
        s_wr[y],
        space=o_space,
        rw=1,
        tensor=v["t_y"],
        dep=s_c[y],
        nbytes=v["y_bytes"][mi, ni][y],
        addr=v["y_addr"][mi, ni][y],
    )


def _pipelined_program(prog: _Program, v: dict[str, Any]) -> None:
    """Reads issued ``n_buffers - 1`` tiles ahead, with buffer-slot dependencies."""
    mi, ni, ki, n_t = v["mi"], v["ni"], v["ki"], v["n_t"]
    new_a, new_w, psum_rd, psum_wr = v["new_a"], v["new_w"], v["psum_rd"], v["psum_wr"]
    nb = int(v["n_buffers"])
    ahead = nb - 1
    tiles = np.arange(n_t, dtype=np.int64)
    # Position (in compute order) at which each tile's reads are issued.
    pos = np.maximum(tiles - ahead, 0)
    reads_at = np.zeros(n_t, dtype=np.int64)
    np.add.at(reads_at, pos, new_a.astype(np.int64) + new_w)
    counts = reads_at + psum_rd + 2
    base = np.cumsum(counts) - counts
    # Reads of the tiles issued at one position, in tile order, A before W.
    n_reads = new_a.astype(np.int64) + new_w
    before = np.cumsum(n_reads) - n_reads  # reads of earlier tiles (all positions)
    first_at_pos = np.cumsum(reads_at) - reads_at  # reads issued at earlier positions
    s_a = base[pos] + (before - first_at_pos[pos])
    s_w = s_a + new_a
    s_pr = base + reads_at
    s_c = s_pr + psum_rd
    s_wr = s_c + 1

    def slot_deps(new: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        # Read j of an operand overwrites the slot of read j - nb, which the computes up to
        # (the tile of read j - nb + 1) - 1 use.
        t_of = tiles[new]
        dep = np.full(t_of.size, -1, dtype=np.int64)
        if t_of.size > nb - 1 and nb >= 1:
            j = np.arange(nb, t_of.size)
            dep[nb:] = s_c[t_of[j - nb + 1] - 1]
        return dep

    def slab_deps() -> npt.NDArray[np.int64]:
        # Resident A: nb slabs of n_k tiles. Read j (tile (mi, 0, ki)) overwrites the slot of
        # read j - nb*n_k, A(mi - nb, ki), which the computes up to its token tile's last
        # channel tile, (mi - nb, n_n - 1, ki), use (order mnk: tile index = flat index).
        n_n, n_k = v["n_tiles"]["n"], v["n_tiles"]["k"]
        t_of = tiles[new_a]
        slots = nb * n_k
        dep = np.full(t_of.size, -1, dtype=np.int64)
        if t_of.size > slots:
            old = t_of[: t_of.size - slots]
            last_use = (mi[old] * n_n + n_n - 1) * n_k + ki[old]
            dep[slots:] = s_c[last_use]
        return dep

    dep_a = slab_deps() if v["a_resident"] else slot_deps(new_a)
    dep_w = slot_deps(new_w)
    dep_c = np.where(new_w, s_w, np.where(new_a, s_a, -1))
    # Partial-sum read of (mi, ni, ki) reads back the write of (mi, ni, ki - 1).
    n_tiles = v["n_tiles"]
    flat = (mi * n_tiles["n"] + ni) * n_tiles["k"] + ki
    where = np.empty(n_t, dtype=np.int64)
    where[flat] = tiles
    prev = where[np.maximum(flat - 1, 0)]
    dep_pr = s_wr[prev][psum_rd]

    sizes = v["sizes"]
    prog.add_memory(
        s_a[new_a],
        space=v["a_space"],
        phase="act",
        rw=0,
        tensor=v["t_a"],
        dep=dep_a,
        nbytes=v["a_bytes"][mi, ki][new_a],
        addr=v["a_addr"][mi, ki][new_a],
    )
    prog.add_memory(
        s_w[new_w],
        space=v["w_space"],
        phase="wgt",
        rw=0,
        tensor=v["t_w"],
        dep=dep_w,
        nbytes=v["w_bytes"][ni, ki][new_w],
        addr=v["w_addr"][ni, ki][new_w],
    )
    prog.add_memory(
        s_pr[psum_rd],
        space=v["psum_space"],
        phase="psum",
        rw=0,
        tensor=v["t_p"],
        dep=dep_pr,
        nbytes=v["p_bytes"][mi, ni][psum_rd],
        addr=v["p_addr"][mi, ni][psum_rd],
    )
    prog.add_compute(
        s_c,
        op="gemm",
        unit=v["unit"],
        m=sizes["m"][mi],
        n=sizes["n"][ni],
        k=sizes["k"][ki],
        fmt_a=v["name_a"],
        fmt_b=v["name_w"],
        tile=flat,
        dep=dep_c,
    )
    prog.add_memory(
        s_wr[psum_wr],
        space=v["psum_space"],
        phase="psum",
        rw=1,
        tensor=v["t_p"],
        dep=s_c[psum_wr],
        nbytes=v["p_bytes"][mi, ni][psum_wr],
        addr=v["p_addr"][mi, ni][psum_wr],
    )
    y = ~psum_wr
    prog.add_memory(
        s_wr[y],
        space=v["out_space"],
        phase="out",
        rw=1,
        tensor=v["t_y"],
        dep=s_c[y],
        nbytes=v["y_bytes"][mi, ni][y],
        addr=v["y_addr"][mi, ni][y],
    )
