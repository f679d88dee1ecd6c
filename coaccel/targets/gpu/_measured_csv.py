"""The measured decode-attention CSV of ``coaccel validate gpu --measured``: its columns, its
rows as :class:`MeasuredRow`, and the GPU names it may use.

Internal to :mod:`coaccel.targets.gpu.measured`, which re-exports these names (the module
docstring there describes the file and what is done with it).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coaccel.spine.errors import CoaccelError

__all__: list[str] = []

MEASURED_COLUMNS = (
    "source", "gpu", "kernel", "dtype", "batch", "n_q_heads", "n_kv_heads", "head_dim",
    "context_len", "measured_us", "notes",
)  # fmt: skip
"""Columns a measured CSV must have (others are kept and written back unchanged)."""

_INT_COLUMNS = ("batch", "n_q_heads", "n_kv_heads", "head_dim", "context_len")

DTYPES: Mapping[str, int] = {"bf16": 2, "fp16": 2}
"""dtypes of q and KV the decode trace models -> bytes per element."""

GPU_CONFIGS: Mapping[str, str] = {
    "a100-sxm4-40gb": "a100_40g",
    "a100-sxm4-80gb": "a100_80g",
    "h100-sxm": "h100_sxm",
    "h100-sxm5-80gb": "h100_sxm",
    "h200-sxm": "h200",
    "h200": "h200",
    "l40s": "l40s",
}
"""GPU name of a CSV (lower case) -> shipped config (``arch_configs/gpu/<name>.yaml``)."""

MEASURED_DIR = "gpu/measured"
MEASURED_FILE = "decode_attention_measured.csv"

# -- the CSV -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredRow:
    """One measured decode-attention op.

    Attributes:
        line: line in the CSV (the header is line 1).
        fields: every column of the row as read (also the extra ones), in file order.
        gpu: GPU name as written. kernel: kernel library as written. dtype: ``bf16``/``fp16``.
        batch: sequences B. n_q_heads: query heads Hq. n_kv_heads: KV heads Hkv.
        head_dim: D. context_len: KV tokens each sequence attends to.
        measured_us: measured time of one op, µs.
    """

    line: int
    fields: tuple[tuple[str, str], ...]
    gpu: str
    kernel: str
    dtype: str
    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    context_len: int
    measured_us: float

    @property
    def library(self) -> str:
        """The kernel library's key: the ``kernel`` column, stripped, lower case."""
        return self.kernel.strip().lower()

    @property
    def kv_bytes(self) -> int:
        """Bytes of the K and V caches the op reads, B."""
        return (
            2 * self.batch * self.context_len * self.n_kv_heads * self.head_dim * DTYPES[self.dtype]
        )


@dataclass(frozen=True)
class MeasuredTable:
    """A measured CSV: its path, header and rows."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[MeasuredRow, ...]


def shipped_measured_csv() -> Path:
    """The shipped measured set, ``arch_configs/gpu/measured/decode_attention_measured.csv``."""
    from importlib.resources import files

    return Path(str(files("coaccel.arch_configs"))) / MEASURED_DIR / MEASURED_FILE


def read_measured_csv(path: str | Path) -> MeasuredTable:
    """Read and check a measured decode-attention CSV, every row before any work.

    Args:
        path: the CSV file (UTF-8; header row of column names, :data:`MEASURED_COLUMNS` among
            them in any order).

    Returns:
        The :class:`MeasuredTable`.

    Raises:
        CoaccelError: one line naming the file, line, column and value: a missing column, a
            row with too few or too many fields, an integer or number that is not one (or not
            positive, or heads that do not divide), an unknown dtype, an empty gpu or kernel,
            no data rows.
    """
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise CoaccelError(f"{p}: empty file; expected a header with the columns "
                                   f"{', '.join(MEASURED_COLUMNS)}")  # fmt: skip
            header = [h.strip() for h in header]
            missing = [c for c in MEASURED_COLUMNS if c not in header]
            if missing:
                raise CoaccelError(
                    f"{p}: line 1: missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; a measured CSV has the columns "
                    f"{', '.join(MEASURED_COLUMNS)}"
                )
            dup = sorted({h for h in header if header.count(h) > 1})
            if dup:
                raise CoaccelError(f"{p}: line 1: column {dup[0]!r} appears twice")
            rows = []
            for rec in reader:
                lineno = reader.line_num
                if not rec or all(not c.strip() for c in rec):
                    continue
                if len(rec) != len(header):
                    raise CoaccelError(
                        f"{p}: line {lineno}: {len(rec)} fields, expected {len(header)} "
                        f"({', '.join(header)})"
                    )
                rows.append(_parse_row(p, lineno, tuple(zip(header, rec, strict=True))))
    except UnicodeDecodeError as e:
        raise CoaccelError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise CoaccelError(f"{p}: not a readable CSV: {e}") from None
    if not rows:
        raise CoaccelError(f"{p}: no data rows")
    return MeasuredTable(path=p, header=tuple(header), rows=tuple(rows))


def _parse_row(p: Path, lineno: int, fields: tuple[tuple[str, str], ...]) -> MeasuredRow:
    rec = dict(fields)

    def bad(col: str, why: str) -> CoaccelError:
        return CoaccelError(f"{p}: line {lineno}: column {col}: {rec[col]!r} {why}")

    ints: dict[str, int] = {}
    for col in _INT_COLUMNS:
        text = rec[col].strip()
        try:
            v = int(text)
        except ValueError:
            raise bad(col, "is not an integer") from None
        if v < 1:
            raise bad(col, "must be >= 1")
        ints[col] = v
    if ints["n_q_heads"] % ints["n_kv_heads"]:
        raise bad("n_q_heads", f"is not a multiple of n_kv_heads={ints['n_kv_heads']}")
    text = rec["measured_us"].strip()
    try:
        t = float(text)
    except ValueError:
        raise bad("measured_us", "is not a number") from None
    if not math.isfinite(t) or t <= 0:
        raise bad("measured_us", "must be a finite number > 0 (µs)")
    dtype = rec["dtype"].strip().lower()
    if dtype not in DTYPES:
        raise bad("dtype", f"is not a supported dtype; valid: {', '.join(DTYPES)}")
    for col in ("gpu", "kernel"):
        if not rec[col].strip():
            raise bad(col, "is empty")
    return MeasuredRow(
        line=lineno,
        fields=fields,
        gpu=rec["gpu"].strip(),
        kernel=rec["kernel"].strip(),
        dtype=dtype,
        measured_us=t,
        **ints,
    )


def gpu_config(gpu: str) -> str | None:
    """The shipped config of a CSV GPU name (:data:`GPU_CONFIGS`, case-insensitive).

    Args:
        gpu: the name as written (``"A100-SXM4-80GB"``).

    Returns:
        The config name (``"a100_80g"``), or None for a GPU without one (its rows are skipped).
    """
    return GPU_CONFIGS.get(gpu.strip().lower())


# -- simulation of one row ---------------------------------------------------------------------
