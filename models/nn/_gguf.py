"""Read GGUF model files: metadata, tensor index and dequantized tensors.

GGUF is llama.cpp's single-file container [GGUF]: a header (magic ``GGUF``, version, counts),
typed key/value metadata (architecture hyperparameters and the tokenizer), a tensor index (name,
dimensions, ggml type, offset) and the aligned tensor data. This module parses the container
itself and hands each tensor's bytes to the ``gguf`` package's numpy dequantizers
(``gguf.quants.dequantize``). Parsing the container here, rather than with ``gguf.GGUFReader``,
buys three things:

* a model shipped as consecutive chunk files (Gemma 3 270M's PyPI packages) is read in place,
  without writing the joined file anywhere;
* the 262,144-entry Gemma vocabulary parses in a fraction of a second (``GGUFReader`` builds one
  numpy array per string and takes about 16 s);
* every malformed, truncated or unsupported byte range ends in one :class:`ModelFileError` that
  names the file.

Public (to the package): :class:`ModelFileError`, :class:`UnsupportedModelError`,
:class:`GGUFFile`, :class:`TensorInfo`, :func:`read_gguf`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from coaccel.spine.errors import CoaccelError, MissingDependencyError

from ._dequant import dequantize_blocks_fast

__all__ = [
    "GGUFFile",
    "ModelFileError",
    "TensorInfo",
    "UnsupportedModelError",
    "read_gguf",
]

GGUF_HINT = "pip install 'gguf>=0.19' (or the real-model extra: pip install 'coaccel[real]')"

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
_MAX_DIMS = 4
# Sanity bounds that stop a corrupt count from allocating without end.
_MAX_COUNT = 1 << 24

# GGUF metadata value types: id -> struct format (little endian) of a scalar.
_SCALAR = {
    0: "<B",  # uint8
    1: "<b",  # int8
    2: "<H",  # uint16
    3: "<h",  # int16
    4: "<I",  # uint32
    5: "<i",  # int32
    6: "<f",  # float32
    7: "<?",  # bool
    10: "<Q",  # uint64
    11: "<q",  # int64
    12: "<d",  # float64
}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?"}
_NUMPY.update({10: "<u8", 11: "<i8", 12: "<f8"})
_STRING, _ARRAY = 8, 9


class ModelFileError(CoaccelError, ValueError):
    """A model file is missing, truncated or malformed; the message names the file and the fix."""


class UnsupportedModelError(ModelFileError):
    """A well-formed model file uses an architecture, tokenizer or tensor type coaccel does not
    implement; the message says what is supported."""


class _Short(Exception):
    """Internal: the parse ran past the end of the bytes it was given."""


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor index.

    Attributes:
        name: tensor name (``blk.0.attn_q.weight``).
        shape: numpy shape, slowest axis first (the reverse of GGUF's ``ne`` order), so a linear
            weight is ``(out_features, in_features)``.
        ggml_type: ggml type id (``gguf.GGMLQuantizationType``).
        offset_bytes: start of the data, from the start of the file.
        nbytes: size of the data in bytes.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset_bytes: int
    nbytes: int

    @property
    def type_name(self) -> str:
        """ggml type name (``Q4_K``), or ``type <id>`` for an id the ``gguf`` package lacks."""
        try:
            from gguf.constants import GGMLQuantizationType

            return GGMLQuantizationType(self.ggml_type).name
        except (ImportError, ValueError):
            return f"type {self.ggml_type}"


class _Bytes:
    """The file's bytes: one memory map, or consecutive chunk files read as one."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self.maps: list[np.ndarray] = []
        self.starts: list[int] = []
        total = 0
        for p in self.paths:
            size = p.stat().st_size
            self.starts.append(total)
            # An empty file cannot be memory-mapped; it holds nothing to map anyway.
            self.maps.append(
                np.memmap(p, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
            )
            total += size
        self.nbytes = total

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        """``nbytes`` bytes from ``offset`` (uint8); zero-copy when they lie in one file."""
        out: list[np.ndarray] = []
        end = offset + nbytes
        for start, mm in zip(self.starts, self.maps, strict=True):
            lo, hi = max(offset, start), min(end, start + mm.shape[0])
            if lo < hi:
                out.append(mm[lo - start : hi - start])
        if len(out) == 1:
            return out[0]
        return np.concatenate(out) if out else np.zeros(0, np.uint8)


class _Cursor:
    """Sequential little-endian reader over a byte buffer; raises :class:`_Short` at its end."""

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.off = 0

    def _need(self, n: int) -> None:
        if self.off + n > len(self.buf):
            raise _Short

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._need(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.off)
        self.off += size
        return value

    def string(self) -> str:
        n = self.scalar("<Q")
        self._need(n)
        raw = self.buf[self.off : self.off + n]
        self.off += n
        return str(raw, "utf-8")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.scalar("<I")
            count = self.scalar("<Q")
            if count > _MAX_COUNT * 4:
                raise ValueError(f"array of {count} elements")
            if etype in _NUMPY:
                dt = np.dtype(_NUMPY[etype])
                self._need(count * dt.itemsize)
                arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.off).copy()
                self.off += count * dt.itemsize
                return arr
            if etype == _STRING:
                return [self.string() for _ in range(count)]
            if etype == _ARRAY:
                return [self.value(_ARRAY) for _ in range(count)]
            raise ValueError(f"unknown array element type {etype}")
        raise ValueError(f"unknown metadata value type {vtype}")


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF file (or chunk set): metadata and tensor index; data read on demand.

    Attributes:
        label: how messages name the file (its path, or the first chunk's path and the count).
        version: GGUF version (2 or 3).
        metadata: key -> value; numeric arrays are numpy arrays, string arrays lists of str.
        tensors: tensor name -> :class:`TensorInfo`, in file order.
        nbytes: total size of the file(s) in bytes.
    """

    label: str
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    nbytes: int
    _bytes: _Bytes

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        """The stored bytes of tensor ``name`` (uint8, flat)."""
        info = self.tensors[name]
        return self._bytes.view(info.offset_bytes, info.nbytes)

    def tensor(self, name: str, dtype: npt.DTypeLike = np.float32) -> npt.NDArray[np.floating]:
        """Tensor ``name`` dequantized by the ``gguf`` package, as a new C-contiguous array.

        The 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) go through the numba kernels
        of ``_dequant`` (equal to the ``gguf`` package's values bit for bit), all other types
        through ``gguf.quants.dequantize``.

        Args:
            name: tensor name.
            dtype: result dtype (float32 or float64; the dequantizers compute float32).

        Returns:
            Array of ``TensorInfo.shape`` (numpy order, ``(out, in)`` for a linear weight).

        Raises:
            UnsupportedModelError: the tensor's ggml type has no numpy dequantizer in ``gguf``.
            MissingDependencyError: the ``gguf`` package is not installed.
        """
        info = self.tensors[name]
        raw = self.raw(name)
        fast = dequantize_blocks_fast(raw, info.ggml_type)
        if fast is not None:
            return np.ascontiguousarray(fast.reshape(info.shape), dtype=dtype)
        gquants, qtypes = _gguf_modules()
        try:
            qtype = qtypes(info.ggml_type)
        except ValueError:
            raise UnsupportedModelError(
                f"{self.label}: tensor {name!r} has ggml type id {info.ggml_type}, unknown to "
                "the installed gguf package; upgrade it (pip install -U gguf)"
            ) from None
        rows = int(np.prod(info.shape[:-1], dtype=np.int64))
        try:
            out = gquants.dequantize(raw.reshape(rows, -1), qtype)
        except NotImplementedError:
            raise UnsupportedModelError(
                f"{self.label}: tensor {name!r} is stored as {qtype.name}, which the gguf "
                "package cannot dequantize in numpy; re-quantize the model to a supported type "
                "(F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)"
            ) from None
        return np.array(out.reshape(info.shape), dtype=dtype, order="C", copy=True)


def _gguf_modules() -> tuple[Any, Any]:
    try:
        from gguf import quants
        from gguf.constants import GGMLQuantizationType
    except ImportError as exc:
        raise MissingDependencyError(
            f"reading GGUF tensors needs the Python package 'gguf'; {GGUF_HINT}"
        ) from exc
    return quants, GGMLQuantizationType


def _block_sizes() -> dict[int, tuple[int, int]]:
    """ggml type id -> (elements per block, bytes per block)."""
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError as exc:
        raise MissingDependencyError(
            f"reading GGUF files needs the Python package 'gguf'; {GGUF_HINT}"
        ) from exc
    return {int(k): (int(v[0]), int(v[1])) for k, v in GGML_QUANT_SIZES.items()}


def read_gguf(paths: str | Path | Sequence[str | Path]) -> GGUFFile:
    """Parse a GGUF file, or a GGUF file split into consecutive chunk files.

    Args:
        paths: the ``.gguf`` path, or the chunk paths in order (their concatenation is the file).

    Returns:
        The parsed :class:`GGUFFile`; tensor data stays memory-mapped until dequantized.

    Raises:
        ModelFileError: a file is missing, is not GGUF, is truncated, or its header is corrupt.
        UnsupportedModelError: GGUF version or a tensor's type is unknown.
        MissingDependencyError: the ``gguf`` package is not installed.
    """
    plist = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not plist:
        raise ValueError("read_gguf needs at least one path")
    label = str(plist[0]) if len(plist) == 1 else f"{plist[0]} (+{len(plist) - 1} chunk files)"
    for p in plist:
        if not p.is_file():
            raise ModelFileError(f"{p}: model file not found")
    sizes = _block_sizes()
    data = _Bytes(plist)
    # The header nearly always lies in the first chunk; if not, parse over the joined bytes.
    first = data.maps[0]
    try:
        return _parse(first.data, data, label, sizes)
    except _Short:
        if len(plist) == 1 or first.shape[0] == data.nbytes:
            raise ModelFileError(
                f"{label}: the file is truncated inside its header ({data.nbytes} bytes); "
                "reinstall the package or download the file again"
            ) from None
    try:
        return _parse(data.view(0, data.nbytes).data, data, label, sizes)
    except _Short:
        raise ModelFileError(
            f"{label}: the file is truncated inside its header ({data.nbytes} bytes); "
            "reinstall the package or download the file again"
        ) from None


def _parse(
    buf: memoryview, data: _Bytes, label: str, sizes: dict[int, tuple[int, int]]
) -> GGUFFile:
    cur = _Cursor(buf)
    if len(buf) < 4 or bytes(buf[:4]) != _MAGIC:
        head = bytes(buf[:4])
        if len(buf) < 4 and data.nbytes < 4:
            raise ModelFileError(f"{label}: not a GGUF file (only {data.nbytes} bytes)")
        raise ModelFileError(f"{label}: not a GGUF file (starts with {head!r}, not b'GGUF')")
    cur.off = 4
    version = cur.scalar("<I")
    if version not in _VERSIONS:
        raise UnsupportedModelError(
            f"{label}: GGUF version {version} is not supported (supported: 2, 3)"
        )
    n_tensors = cur.scalar("<Q")
    n_kv = cur.scalar("<Q")
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise ModelFileError(f"{label}: corrupt header ({n_tensors} tensors, {n_kv} metadata keys)")
    metadata: dict[str, Any] = {}
    try:
        for _ in range(n_kv):
            key = cur.string()
            metadata[key] = cur.value(cur.scalar("<I"))
        raw_index = []
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.scalar("<I")
            if not 1 <= n_dims <= _MAX_DIMS:
                raise ValueError(f"tensor {name!r} has {n_dims} dimensions")
            ne = [cur.scalar("<Q") for _ in range(n_dims)]
            raw_index.append((name, ne, cur.scalar("<I"), cur.scalar("<Q")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{label}: corrupt header ({exc})") from None
    alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
    if alignment <= 0 or alignment & (alignment - 1):
        raise ModelFileError(f"{label}: corrupt header (alignment {alignment})")
    data_start = -(-cur.off // alignment) * alignment
    tensors: dict[str, TensorInfo] = {}
    for name, ne, gtype, rel in raw_index:
        if gtype not in sizes:
            raise UnsupportedModelError(
                f"{label}: tensor {name!r} has the unknown ggml type id {gtype}; upgrade the "
                "gguf package (pip install -U gguf) or re-quantize the model"
            )
        block, type_bytes = sizes[gtype]
        if ne[0] % block:
            raise ModelFileError(
                f"{label}: corrupt tensor index: {name!r} has a row of {ne[0]} elements, not a "
                f"multiple of its type's block of {block}"
            )
        count = int(np.prod(ne, dtype=np.int64))
        nbytes = count // block * type_bytes
        start = data_start + rel
        if start + nbytes > data.nbytes:
            raise ModelFileError(
                f"{label}: the file is truncated: tensor {name!r} needs bytes "
                f"{start}..{start + nbytes} but the file has {data.nbytes}; reinstall the "
                "package or download the file again"
            )
        if name in tensors:
            raise ModelFileError(f"{label}: corrupt tensor index: {name!r} appears twice")
        tensors[name] = TensorInfo(name, tuple(int(d) for d in reversed(ne)), gtype, start, nbytes)
    return GGUFFile(label, version, metadata, tensors, data.nbytes, data)
