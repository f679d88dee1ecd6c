"""The trace contract between the bit-exact references (``models/``) and the simulators (``sim/``).

A :class:`Trace` is four columnar numpy structured arrays plus a JSON metadata header:

* ``compute``: operations (GEMM tiles, dot products, quantize, softmax, exp, ...) with shapes
  and the CTA that runs them;
* ``memory``: logical accesses, each possibly a strided run (``count`` rows of ``nbytes``
  spaced ``stride`` bytes) in a named memory space (DRAM, HBM, HOST, L2, SMEM, REG, ACT,
  PSUM, WGT, URAM, ...);
* ``sparsity``: DeltaLLM per-column events (exact / delta / mixed, skipped or not), each in
  the kernel that does its work;
* ``events``: kernel begin/end (with the launch geometry), stream record/wait, sync.

Every record has a ``seq`` number, unique across the four arrays and increasing in issue order;
``dep`` names the ``seq`` of an earlier record (or -1). Name-valued fields (``op``, ``space``,
``tensor`` ...) are int32 indices into string tables kept in the metadata; index 0 of every
table is ``""`` (none); the builder lists names in order of first use. The metadata also carries
a tensor map (tensor name -> memory space, base address, bytes) that places the tensors in
their address spaces, and the config digest and seed of the run.

:class:`TraceBuilder` interns names as records are added, one at a time or in bulk from arrays;
bulk adds may give their own seq numbers, in any order, and the builder sorts at the end.
``Trace.save`` / ``Trace.load`` use one ``.npz`` file without pickles; ``load`` also reads
version-1 files and upgrades them. :func:`storage_bytes` is the one byte count of elements
stored at a fractional number of bits. The exact dtypes and conventions are in
``docs/trace.md``.

Modules (each lists its public and internal functions):

* :mod:`._records`: record dtypes, string tables, kinds, units, :class:`TraceError`.
* :mod:`._storage`: :func:`storage_bytes`.
* :mod:`._checks`: the checks every trace passes.
* :mod:`._trace`: :class:`Trace`, :func:`trace_kind`, :func:`read_trace_meta`; :mod:`._io`: its
  ``.npz`` files, :func:`is_trace_file` and :func:`not_regular` (readers refuse a FIFO or a
  device before opening it).
* :mod:`._builder`: :class:`TraceBuilder`; :mod:`._store`: how it keeps records.

This package depends on numpy only: ``coaccel.models`` imports it. Import from it (or its public
alias ``coaccel.trace``), never from the modules.
"""

from ._builder import TraceBuilder
from ._io import is_trace_file, not_regular
from ._records import (
    COMPUTE_DTYPE,
    EVENT_DTYPE,
    EVENT_KINDS,
    MEMORY_DTYPE,
    SPARSITY_DTYPE,
    SPARSITY_KIND_BITS,
    TABLE_FIELDS,
    TRACE_VERSION,
    UNITS,
    TraceError,
)
from ._storage import storage_bytes
from ._trace import Trace, read_trace_meta, trace_kind

__all__ = [
    "COMPUTE_DTYPE",
    "EVENT_DTYPE",
    "EVENT_KINDS",
    "MEMORY_DTYPE",
    "SPARSITY_DTYPE",
    "SPARSITY_KIND_BITS",
    "TABLE_FIELDS",
    "TRACE_VERSION",
    "UNITS",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "is_trace_file",
    "not_regular",
    "read_trace_meta",
    "storage_bytes",
    "trace_kind",
]
