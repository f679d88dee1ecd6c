"""The trace builder: records added one at a time or in bulk, names interned, a checked trace.

Public: :class:`TraceBuilder` (the tensor map: :meth:`~TraceBuilder.allocate`; one record:
:meth:`~TraceBuilder.compute`, :meth:`~TraceBuilder.memory`, :meth:`~TraceBuilder.sparsity`,
:meth:`~TraceBuilder.event`, :meth:`~TraceBuilder.begin_kernel` /
:meth:`~TraceBuilder.end_kernel` / :meth:`~TraceBuilder.kernel`; columns:
:meth:`~TraceBuilder.compute_many`, :meth:`~TraceBuilder.memory_many`,
:meth:`~TraceBuilder.sparsity_many`, :meth:`~TraceBuilder.event_many`; the result:
:meth:`~TraceBuilder.build`).

Internal: :func:`_coaccel_version` (the installed version, written into every trace). How
records are stored, interned and put in seq order is :class:`~._store._RecordStore`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from importlib import metadata as _metadata
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import _check_tensor_map, _normalize_json
from ._records import (
    _FORMAT,
    TRACE_VERSION,
    UNITS,
    TraceError,
    _codes_of,
    _event_kind_code,
    _rw_code,
    _sparsity_kind_code,
)
from ._store import _RecordStore
from ._trace import Trace

__all__ = ["TraceBuilder"]


def _coaccel_version() -> str:
    try:
        return _metadata.version("coaccel")
    except _metadata.PackageNotFoundError:
        return "unknown"


class TraceBuilder(_RecordStore):
    """Collects records and builds a :class:`Trace`.

    Name-valued fields take strings, interned into the trace's tables. Records get increasing
    ``seq`` numbers in the order they are added, across all kinds; the ``add`` methods return
    them so that later records can name them in ``dep``.

    The bulk methods (``*_many``) may instead take the seq numbers of their records
    (``seq=``, one per record, unique across the whole trace, in any order): a program that
    knows its issue order can then add all reads, all computes and all writes as one column
    each. :meth:`build` puts every kind in seq order and lists each table's names in order of
    first use (by seq, then field), exactly as adding the records one at a time in seq order
    would; records added later without ``seq`` continue after the largest seq so far.

    Args:
        producer: what made the trace, e.g. ``"coaccel.models.hbq.gemm"``.
        workload: JSON data describing the workload (model shape, tokens, ...).
        config_digest: :func:`coaccel.config.config_digest` of the config used, or None.
        seed: the seed of the run, or None if nothing was random.
    """

    def __init__(
        self,
        *,
        producer: str,
        workload: Mapping[str, Any] | None = None,
        config_digest: str | None = None,
        seed: int | None = None,
    ) -> None:
        if not isinstance(producer, str) or not producer:
            raise TraceError("producer must be a non-empty string")
        if config_digest is not None and (not isinstance(config_digest, str) or not config_digest):
            raise TraceError(
                f"config_digest must be a non-empty string, or None when there is no config; "
                f"got {config_digest!r}"
            )
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TraceError(f"seed must be an integer or None, got {seed!r}")
            seed = int(seed)
        self._meta = {
            "format": _FORMAT,
            "version": TRACE_VERSION,
            "coaccel_version": _coaccel_version(),
            "producer": producer,
            "workload": _normalize_json(dict(workload or {}), "workload"),
            "config_digest": config_digest,
            "seed": seed,
            "units": dict(UNITS),
        }
        self._tensors: dict[str, dict[str, Any]] = {}
        self._next_kernel = 0
        super().__init__()

    # -- tensor map -----------------------------------------------------------------------

    def allocate(
        self,
        tensor: str,
        *,
        space: str,
        nbytes: int,
        base_addr: int | None = None,
        align_bytes: int = 256,
    ) -> int:
        """Place a tensor in a memory space (an entry of the trace's tensor map).

        Memory records of ``tensor`` in ``space`` then address bytes ``0 .. nbytes - 1`` of
        it (``addr`` is relative to the tensor); a simulator adds ``base_addr`` to hash an
        access to cache sets and memory channels. The trace checks that the tensors of one
        space do not overlap and that those records stay inside their tensor.

        Args:
            tensor: tensor name (as in the memory records).
            space: memory space of the allocation (``"HBM"``, ``"DRAM"``, ``"HOST"``, ...).
            nbytes: allocation size, B.
            base_addr: first byte address in ``space``, B; None places the tensor after the
                highest allocation of the space so far, rounded up to ``align_bytes``.
            align_bytes: alignment of an automatic ``base_addr``, B (>= 1).

        Returns:
            The tensor's base address, B.

        Raises:
            TraceError: a tensor allocated twice, bad sizes, or an overlap.
        """
        if not isinstance(tensor, str) or not tensor:
            raise TraceError(f"tensor must be a non-empty name, got {tensor!r}")
        if tensor in self._tensors:
            raise TraceError(f"tensor {tensor!r} is already allocated: {self._tensors[tensor]}")
        if isinstance(align_bytes, bool) or not isinstance(align_bytes, int) or align_bytes < 1:
            raise TraceError(f"align_bytes must be a positive integer, got {align_bytes!r}")
        if base_addr is None:
            same_space = (e for e in self._tensors.values() if e["space"] == space)
            end = max((e["base_addr"] + e["nbytes"] for e in same_space), default=0)
            base_addr = -(-end // align_bytes) * align_bytes
        entry: dict[str, Any] = {"space": space, "base_addr": base_addr, "nbytes": nbytes}
        for key in ("base_addr", "nbytes"):
            if isinstance(entry[key], np.integer):
                entry[key] = int(entry[key])
        _check_tensor_map({**self._tensors, tensor: entry})
        self._tensors[tensor] = entry
        return entry["base_addr"]

    # -- single records -------------------------------------------------------------------

    def compute(
        self,
        *,
        op: str,
        m: int = 0,
        n: int = 0,
        k: int = 0,
        macs: int | None = None,
        kernel: int = 0,
        cta: int = -1,
        unit: str = "",
        fmt_a: str = "",
        fmt_b: str = "",
        tile: int = -1,
        dep: int = -1,
        stream: int = 0,
    ) -> int:
        """Add one operation.

        Args:
            op: operation name (``"gemm"``, ``"dot"``, ``"quantize"``, ``"softmax"``, ...).
            m: rows of the ``m x k`` operand / output, elements.
            n: columns of the ``k x n`` operand / output, elements.
            k: reduction length, elements (0 for element-wise ops).
            macs: multiply-accumulates; default ``m * n * k``.
            kernel: kernel (launch) id.
            cta: CTA / thread block of the kernel that runs the operation, -1 for none
                (hardware without CTAs).
            unit: hardware unit name (``"pe_array"``, ``"softmax"``, ``"tensor_core"``).
            fmt_a: number format of the A operand (``"e2m1"``, ``"hbq-e"``, ``"int8"``).
            fmt_b: number format of the B operand.
            tile: tile index, -1 for none.
            dep: seq of a record this one waits for, -1 for none.
            stream: stream id.

        Returns:
            The record's seq.
        """
        if macs is None:
            macs = m * n * k
        if not op:
            raise TraceError("compute records need an op name")
        return self._add_one(
            "compute",
            dict(
                kernel=kernel,
                cta=cta,
                unit=unit,
                op=op,
                m=m,
                n=n,
                k=k,
                macs=macs,
                fmt_a=fmt_a,
                fmt_b=fmt_b,
                tile=tile,
                dep=dep,
                stream=stream,
            ),
        )

    def memory(
        self,
        *,
        space: str,
        rw: int | str,
        nbytes: int,
        tensor: str = "",
        addr: int = 0,
        stride: int | None = None,
        count: int = 1,
        kernel: int = 0,
        cta: int = 0,
        phase: str = "",
        dep: int = -1,
        stream: int = 0,
    ) -> int:
        """Add one logical access (or a strided run of ``count`` rows).

        Args:
            space: memory space name (``"DRAM"``, ``"HBM"``, ``"HOST"``, ``"L2"``, ``"SMEM"``,
                ``"REG"``, ``"ACT"``, ``"PSUM"``, ``"WGT"``, ``"URAM"``, ...).
            rw: 0 / ``"r"`` / ``"read"`` or 1 / ``"w"`` / ``"write"``.
            nbytes: bytes per row.
            tensor: tensor name (``"K"``, ``"V"``, ``"wq"``, ...).
            addr: byte offset of the first row within the tensor's allocation (B).
            stride: bytes between row starts; default ``nbytes`` (contiguous rows).
            count: number of rows.
            kernel: kernel (launch) id.
            cta: CTA / thread-block id within the kernel (0 where not applicable).
            phase: phase name within the kernel (``"load_q"``, ``"scan"``, ...).
            dep: seq of a record this one waits for, -1 for none.
            stream: stream id.

        Returns:
            The record's seq.
        """
        if not space:
            raise TraceError("memory records need a space name")
        return self._add_one(
            "memory",
            dict(
                kernel=kernel,
                cta=cta,
                phase=phase,
                tensor=tensor,
                space=space,
                rw=_rw_code(rw),
                addr=addr,
                nbytes=nbytes,
                stride=nbytes if stride is None else stride,
                count=count,
                dep=dep,
                stream=stream,
            ),
        )

    def sparsity(
        self,
        *,
        layer: int,
        head: int,
        qblock: int,
        column: int,
        kind: int | str,
        lanes: int,
        nnz: int = 0,
        kernel: int = 0,
    ) -> int:
        """Add one DeltaLLM column event.

        Args:
            layer: layer index.
            head: KV head index.
            qblock: query block index.
            column: key column j.
            kind: ``"exact"``, ``"delta"``, ``"mixed"``, optionally ``"+skipped"``
                (e.g. ``"delta+skipped"``), or the bit set (see :data:`SPARSITY_KIND_BITS`).
            lanes: bitmask of the valid lanes (bit i = lane i), < 2**64.
            nnz: nonzeros of the delta key (elements; 0 for exact-only columns).
            kernel: the kernel that does the column's work (0 where there are no kernels).

        Returns:
            The record's seq.
        """
        return self._add_one(
            "sparsity",
            dict(
                kernel=kernel,
                layer=layer,
                head=head,
                qblock=qblock,
                column=column,
                kind=_sparsity_kind_code(kind),
                nnz=nnz,
                lanes=lanes,
            ),
        )

    def event(
        self,
        kind: int | str,
        *,
        kernel: int = 0,
        name: str = "",
        stream: int = 0,
        dep: int = -1,
        ctas: int = 0,
        threads_per_cta: int = 0,
        smem_bytes_per_cta: int = 0,
        regs_per_thread: int = 0,
    ) -> int:
        """Add one control event.

        Args:
            kind: ``"kernel_begin"``, ``"kernel_end"``, ``"record"`` (mark a point in a stream),
                ``"wait"`` (``stream`` waits for the record ``dep``) or ``"sync"`` (all streams).
            kernel: kernel (launch) id.
            name: kernel name for begin/end (``"flash_decode"``, ``"memcpy_h2d"``).
            stream: stream id.
            dep: seq of the awaited record for ``"wait"``; -1 otherwise.
            ctas: grid size for ``"kernel_begin"``, CTAs (0 if unknown).
            threads_per_cta: threads per CTA for ``"kernel_begin"`` (0 if unknown).
            smem_bytes_per_cta: shared memory per CTA for ``"kernel_begin"``, B (0 if unknown).
            regs_per_thread: registers per thread for ``"kernel_begin"`` (0 if unknown).

        Returns:
            The record's seq.

        Raises:
            TraceError: launch geometry on an event other than ``"kernel_begin"``, or a bad
                value.
        """
        return self._add_one(
            "events",
            dict(
                kind=_event_kind_code(kind),
                kernel=kernel,
                name=name,
                stream=stream,
                dep=dep,
                ctas=ctas,
                threads_per_cta=threads_per_cta,
                smem_bytes_per_cta=smem_bytes_per_cta,
                regs_per_thread=regs_per_thread,
            ),
        )

    def begin_kernel(
        self,
        name: str,
        *,
        stream: int = 0,
        ctas: int = 0,
        threads_per_cta: int = 0,
        smem_bytes_per_cta: int = 0,
        regs_per_thread: int = 0,
    ) -> int:
        """Allocate the next kernel id and add its ``kernel_begin`` event.

        Args:
            name: kernel name.
            stream: stream the kernel runs on.
            ctas: grid size, CTAs (0 if unknown).
            threads_per_cta: threads per CTA (0 if unknown).
            smem_bytes_per_cta: shared memory per CTA, B (0 if unknown).
            regs_per_thread: registers per thread (0 if unknown).

        Returns:
            The new kernel id.
        """
        kid = self._next_kernel
        self.event(
            "kernel_begin",
            kernel=kid,
            name=name,
            stream=stream,
            ctas=ctas,
            threads_per_cta=threads_per_cta,
            smem_bytes_per_cta=smem_bytes_per_cta,
            regs_per_thread=regs_per_thread,
        )
        self._next_kernel += 1
        return kid

    def end_kernel(self, kernel: int, *, name: str = "", stream: int = 0) -> int:
        """Add a ``kernel_end`` event; returns its seq."""
        return self.event("kernel_end", kernel=kernel, name=name, stream=stream)

    @contextlib.contextmanager
    def kernel(self, name: str, *, stream: int = 0, **geometry: int) -> Iterator[int]:
        """``with builder.kernel("attn", stream=1, ctas=64) as kid:`` begin ... end around a
        block; ``geometry`` is the launch geometry of :meth:`begin_kernel`."""
        kid = self.begin_kernel(name, stream=stream, **geometry)
        yield kid
        self.end_kernel(kid, name=name, stream=stream)

    # -- bulk records ---------------------------------------------------------------------

    def compute_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N operations from columns (scalars broadcast; names as str or arrays of str).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: the fields of :meth:`compute` (``op`` required), each a scalar or a
                shape (N,) array; ``macs`` defaults to ``m * n * k``.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "macs" not in columns:
            columns["macs"] = (
                np.asarray(columns.get("m", 0), dtype=np.int64)
                * np.asarray(columns.get("n", 0), dtype=np.int64)
                * np.asarray(columns.get("k", 0), dtype=np.int64)
            )
        return self._add_many("compute", columns, seq)

    def memory_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N memory records from columns (the vectorized :meth:`memory`).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: the fields of :meth:`memory` (``space``, ``rw``, ``nbytes`` required),
                each a scalar or a shape (N,) array; ``rw`` may be names; ``stride`` defaults
                to ``nbytes``.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "rw" in columns:
            columns["rw"] = _codes_of(columns["rw"], _rw_code)
        if "stride" not in columns and "nbytes" in columns:
            columns["stride"] = columns["nbytes"]
        return self._add_many("memory", columns, seq)

    def sparsity_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N sparsity records from columns (the vectorized :meth:`sparsity`).

        Args:
            seq: shape (N,) integer seq numbers of the records (class docstring); None
                numbers them after every record so far.
            **columns: ``layer, head, qblock, column, kind, lanes`` (+ ``nnz``, ``kernel``),
                scalars or shape (N,) arrays; ``kind`` as bit sets or names; ``lanes`` as
                uint64.

        Returns:
            Shape (N,) int64 seq numbers (consecutive unless given).
        """
        if "kind" in columns:
            columns["kind"] = _codes_of(columns["kind"], _sparsity_kind_code)
        return self._add_many("sparsity", columns, seq)

    def event_many(self, *, seq: Any = None, **columns: Any) -> npt.NDArray[np.int64]:
        """Add N events from columns (the vectorized :meth:`event`; ``kind`` required).

        Kernel ids given here are the caller's: :meth:`begin_kernel` keeps counting from
        its own next id. ``seq`` as in :meth:`compute_many`.
        """
        if "kind" in columns:
            columns["kind"] = _codes_of(columns["kind"], _event_kind_code)
        return self._add_many("events", columns, seq)

    # -- result ---------------------------------------------------------------------------

    @property
    def n_records(self) -> int:
        """Records added so far (all kinds)."""
        return self._count

    @property
    def next_seq(self) -> int:
        """One past the largest seq so far: the seq the next record gets unless given."""
        return self._seq

    def build(self) -> Trace:
        """The trace of every record added so far (the builder stays usable).

        Raises:
            TraceError: seq numbers used twice, a ``dep`` on a later record, or a memory record
                outside its tensor's allocation (checked here, once all records are known).
        """
        arrays = self._finish()
        meta = dict(
            self._meta,
            tables={t: list(v) for t, v in self._tables.items()},
            tensors={t: dict(e) for t, e in self._tensors.items()},
        )
        return Trace(meta, **arrays)
