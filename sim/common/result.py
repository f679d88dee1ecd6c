"""The result every simulator returns, whatever its target: a frozen record of plain numbers.

:class:`SimResult` holds what sweeps and reports compare across targets (HBQ ASIC, DeltaLLM
FPGA, GPU memory hierarchy): the target kind, architecture, workload, mode, clock, cycles and
seconds, busy and stall cycles per resource, on-chip buffer and off-chip accesses, notes and the
config digest. A target's own result subclasses it and adds its fields and metrics.

:meth:`SimResult.metrics` flattens a result into ``name -> (value, unit)``, so a sweep or a
report reads ``"cycles"``, ``"seconds"``, ``"offchip.read_bytes"`` or ``"buffer.ACT.reads"``
without knowing the target; :meth:`SimResult.to_dict` gives JSON-ready data.

Units of the metrics: ``cycle`` (cycles of the result's clock), ``s``, ``MHz``, ``B`` (bytes),
``access`` (buffer accesses of the buffer's ``word_bits``), ``transfer`` (off-chip transfers),
``bit`` and ``1`` (a dimensionless ratio).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BufferAccess", "Metric", "OffchipAccess", "SimResult", "plain"]

Metric = tuple[float, str]
"""One metric: ``(value, unit)``, e.g. ``(1_000_000, "cycle")`` or ``(2.5e9, "B")``."""


@dataclass(frozen=True)
class BufferAccess:
    """Accesses of one on-chip buffer.

    Attributes:
        reads: read accesses (words of ``word_bits``).
        writes: write accesses (words).
        read_bytes: bytes read, B.
        write_bytes: bytes written, B.
        word_bits: bits per access (e.g. a full-width ACT/WGT access, a PSUM bank word).
    """

    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    word_bits: int


@dataclass(frozen=True)
class OffchipAccess:
    """Off-chip (DRAM) traffic.

    Attributes:
        reads: read transfers. writes: write transfers.
        read_bytes: bytes read, B. write_bytes: bytes written, B.
        by_tensor: bytes per tensor name (``wq``, ``x``, ``k_cache``, ...), read + write, B.
    """

    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    by_tensor: Mapping[str, int]

    @property
    def total_bytes(self) -> int:
        """Read + write bytes, B."""
        return self.read_bytes + self.write_bytes


@dataclass(frozen=True, kw_only=True)
class SimResult:
    """One simulation of one workload on one architecture of any target, as data.

    Construct with keywords only. Subclasses add a target's own fields and extend
    :meth:`metrics`.

    Attributes:
        target: target kind, as the architecture file's ``kind:`` (``"hbq_asic"``,
            ``"deltallm_fpga"``, ``"gpu_mem"``).
        arch: architecture name.
        workload: workload label (``"<model>:<scenario>"``).
        mode: fidelity (``"cycle"``, ``"analytical"``, ...).
        config_digest: :func:`coaccel.config.config_digest` of the architecture.
        freq_mhz: the clock ``cycles`` count, MHz.
        cycles: total cycles.
        seconds: ``cycles / freq``, s.
        resources: resource -> state -> cycles, e.g. ``{"pe_array": {"busy": 900,
            "dram_bandwidth": 100}}``; each resource's states are where its cycles went
            (``busy`` plus stall causes).
        buffers: buffer name -> :class:`BufferAccess`.
        offchip: :class:`OffchipAccess`.
        notes: how the numbers were obtained (scaling, approximations).
    """

    target: str
    arch: str
    workload: str
    mode: str
    config_digest: str
    freq_mhz: float
    cycles: int
    seconds: float
    resources: Mapping[str, Mapping[str, int]]
    buffers: Mapping[str, BufferAccess]
    offchip: OffchipAccess
    notes: tuple[str, ...]

    def metrics(self) -> dict[str, Metric]:
        """Every number of the result, flat: ``name -> (value, unit)``.

        Names: ``cycles``, ``seconds``, ``freq_mhz``; ``resource.<r>.<state>`` (cycle);
        ``buffer.<B>.reads`` / ``.writes`` (access), ``.read_bytes`` / ``.write_bytes`` (B),
        ``.word_bits`` (bit); ``offchip.reads`` / ``.writes`` (transfer), ``.read_bytes`` /
        ``.write_bytes`` / ``.total_bytes`` (B), ``offchip.tensor.<name>`` (B).

        Returns:
            A new dict in that order.
        """
        out: dict[str, Metric] = {
            "cycles": (self.cycles, "cycle"),
            "seconds": (self.seconds, "s"),
            "freq_mhz": (self.freq_mhz, "MHz"),
        }
        for r, states in self.resources.items():
            for state, c in states.items():
                out[f"resource.{r}.{state}"] = (c, "cycle")
        for b, acc in self.buffers.items():
            out[f"buffer.{b}.reads"] = (acc.reads, "access")
            out[f"buffer.{b}.writes"] = (acc.writes, "access")
            out[f"buffer.{b}.read_bytes"] = (acc.read_bytes, "B")
            out[f"buffer.{b}.write_bytes"] = (acc.write_bytes, "B")
            out[f"buffer.{b}.word_bits"] = (acc.word_bits, "bit")
        o = self.offchip
        out["offchip.reads"] = (o.reads, "transfer")
        out["offchip.writes"] = (o.writes, "transfer")
        out["offchip.read_bytes"] = (o.read_bytes, "B")
        out["offchip.write_bytes"] = (o.write_bytes, "B")
        out["offchip.total_bytes"] = (o.total_bytes, "B")
        for t, nbytes in o.by_tensor.items():
            out[f"offchip.tensor.{t}"] = (nbytes, "B")
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (dicts, lists, numbers, strings) of every field."""
        return plain(self)


def plain(v: Any) -> Any:
    """Plain JSON data of a result or any part of it (dataclasses, mappings, tuples).

    Args:
        v: a value.

    Returns:
        Dataclasses and mappings as dicts (keys as strings), tuples and lists as lists, other
        values unchanged.
    """
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [plain(x) for x in v]
    return v
