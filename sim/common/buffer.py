"""On-chip SRAM buffer model shared by every simulator: capacity, banks, width, ports.

One meaning of width for every buffer: ``bank_width_bits`` is the word of **one bank**. A
buffer has ``banks`` banks, each ``bank_width_bits`` wide, and optionally a side-band register
file of ``sideband_bits`` read together with a full-width access. Hence

* a **bank word** is ``bank_width_bits`` (what one bank delivers per port per cycle);
* a **full-width access** reads one word from every bank at once plus the side band:
  ``access_width_bits = banks x bank_width_bits + sideband_bits``.

Why a separate side band: a block-scaled format keeps its per-block scales apart from the
element codes. In the HBQ accelerator's ACT buffer a token's 128 elements sit in 4 banks of 160
bits and their scales in a 24-bit register file (40 bits for HBQ-A) that is read in the same
cycle; it is not a fifth bank (it has another depth and no bank address), so folding it into the
bank width would misstate the bank macros, while leaving it out would understate what one access
delivers.

Banks are word-interleaved: bank-word address ``w`` lies in bank ``w % banks``. Each bank serves
``ports`` accesses per cycle (1: a single-port macro, where a read and a write to the same bank
conflict; 2: one read and one write, a 1R1W macro).

:class:`OnChipBuffer` is both the shared config schema (nest it in a target's YAML; the loader
checks it) and the model: :meth:`~OnChipBuffer.accesses_for_bytes`,
:meth:`~OnChipBuffer.bank_words_for_bytes`, :meth:`~OnChipBuffer.accesses_for_bits`,
:meth:`~OnChipBuffer.bank_of`, :meth:`~OnChipBuffer.conflict_cycles`,
:meth:`~OnChipBuffer.fits` and :meth:`~OnChipBuffer.check_fits`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from coaccel.spine.config import param

__all__ = ["OnChipBuffer"]


def _whole(x: npt.ArrayLike, what: str) -> npt.NDArray[np.int64]:
    a = np.asarray(x)
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.floor(a))):
        raise ValueError(f"{what} must be whole numbers, got dtype {a.dtype}")
    return a.astype(np.int64)


@functools.lru_cache(maxsize=4096)
def _kib_to_bytes(size_kib: float) -> int:
    return int(Fraction(size_kib) * 1024)


@dataclass(frozen=True)
class OnChipBuffer:
    """One on-chip SRAM buffer (module docstring: the meaning of every width).

    Attributes:
        size_kib: capacity, KiB (element data; the side-band register file is not counted).
        banks: independently addressed banks.
        bank_width_bits: bits of one bank word (per bank, per port, per cycle).
        sideband_bits: bits of a side-band register file read with every full-width access
            (per-block scales); 0 when there is none.
        ports: accesses per bank per cycle (1 = single-port, 2 = one read + one write).
    """

    size_kib: float = param(gt=0, doc="capacity")
    banks: int = param(ge=1, doc="banks")
    bank_width_bits: int = param(ge=1, doc="word width of one bank")
    sideband_bits: int = param(default=0, ge=0, doc="side-band bits read with a full access")
    ports: int = param(default=1, ge=1, le=2, doc="accesses per bank per cycle")

    @property
    def size_bytes(self) -> int:
        """Capacity in bytes (rounded down)."""
        return _kib_to_bytes(self.size_kib)

    @property
    def access_width_bits(self) -> int:
        """Bits one full-width access delivers: ``banks x bank_width_bits + sideband_bits``."""
        return self.banks * self.bank_width_bits + self.sideband_bits

    def accesses_for_bits(self, bits: int | Fraction) -> int:
        """Full-width accesses that move ``bits`` (exact, for fractional storage widths).

        Args:
            bits: bits to move, >= 0 (an int or an exact Fraction, e.g. 128 x 41/8).

        Returns:
            ``ceil(bits / access_width_bits)``.

        Raises:
            ValueError: negative ``bits``.
        """
        if bits < 0:
            raise ValueError(f"bits must be >= 0, got {bits}")
        return math.ceil(Fraction(bits) / self.access_width_bits)

    def accesses_for_bytes(self, nbytes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Full-width accesses that move each of ``nbytes``.

        Args:
            nbytes: bytes per transfer (any shape, whole numbers >= 0).

        Returns:
            int64 array of the same shape: ``ceil(8 x nbytes / access_width_bits)``.

        Raises:
            ValueError: negative or fractional byte counts.
        """
        n = self._bytes(nbytes)
        w = self.access_width_bits
        return (8 * n + w - 1) // w

    def bank_words_for_bytes(self, nbytes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Bank words that hold each of ``nbytes`` (one bank at a time, no side band).

        Args:
            nbytes: bytes (any shape, whole numbers >= 0).

        Returns:
            int64 array of the same shape: ``ceil(8 x nbytes / bank_width_bits)``.

        Raises:
            ValueError: negative or fractional byte counts.
        """
        n = self._bytes(nbytes)
        w = self.bank_width_bits
        return (8 * n + w - 1) // w

    def bank_of(self, word_addresses: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The bank of each bank-word address (word-interleaved banks).

        Args:
            word_addresses: bank-word addresses (any shape, whole numbers >= 0).

        Returns:
            int64 array of the same shape: ``address % banks``.

        Raises:
            ValueError: negative or fractional addresses.
        """
        a = _whole(word_addresses, "word_addresses")
        if a.size and a.min() < 0:
            raise ValueError(f"word_addresses must be >= 0, got minimum {int(a.min())}")
        return a % self.banks

    def conflict_cycles(self, word_addresses: npt.ArrayLike) -> npt.NDArray[np.int64] | int:
        """Extra cycles that bank conflicts add to accesses issued in the same cycle.

        Accesses to one bank beyond its ``ports`` wait for later cycles: a set of accesses
        takes ``max over banks of ceil(accesses to that bank / ports)`` cycles, one more than
        ideal for each conflict round. Two accesses to the same word count twice (a read and a
        write of one word still use two ports).

        Args:
            word_addresses: shape (n,) for one cycle, or (cycles, n) for many cycles at once;
                negative entries mark unused slots (rows with fewer accesses).

        Returns:
            An int for a 1-D input, else an int64 array of shape (cycles,): ``max(0,
            cycles needed - 1)`` per cycle (0 = conflict-free, also for no accesses).

        Raises:
            ValueError: more than 2 dimensions, or fractional addresses.
        """
        a = _whole(word_addresses, "word_addresses")
        if a.ndim not in (1, 2):
            raise ValueError(f"word_addresses must be 1-D or 2-D, got shape {a.shape}")
        rows = a.reshape(1, -1) if a.ndim == 1 else a
        used = rows >= 0
        bank = np.where(used, rows % self.banks, 0)
        counts = np.zeros((rows.shape[0], self.banks), dtype=np.int64)
        r_idx = np.broadcast_to(np.arange(rows.shape[0])[:, None], rows.shape)
        np.add.at(counts, (r_idx[used], bank[used]), 1)
        need = -(-counts.max(axis=1, initial=0) // self.ports)
        extra = np.maximum(need - 1, 0).astype(np.int64)
        return int(extra[0]) if a.ndim == 1 else extra

    def fits(self, nbytes: npt.ArrayLike, *, slots: int = 1) -> npt.NDArray[np.bool_] | bool:
        """Whether ``slots`` copies of ``nbytes`` fit the capacity (e.g. 2 for double buffering).

        Args:
            nbytes: bytes per slot (a number or an array of whole numbers >= 0).
            slots: slots the capacity is split into, >= 1.

        Returns:
            ``slots x nbytes <= size_bytes``: a bool for a scalar input, else a bool array.

        Raises:
            ValueError: ``slots < 1`` or negative or fractional byte counts.
        """
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        n = self._bytes(nbytes)
        ok = slots * n <= self.size_bytes
        return bool(ok) if np.ndim(ok) == 0 else ok

    def check_fits(self, nbytes: int, *, slots: int = 1, what: str = "data") -> None:
        """Raise a clear error when ``slots`` copies of ``nbytes`` do not fit.

        Args:
            nbytes: bytes per slot.
            slots: slots the capacity is split into.
            what: what is being stored, for the message (``"a 512 x 128 ACT tile"``).

        Raises:
            ValueError: it does not fit; the message gives the need and the capacity.
        """
        if not self.fits(nbytes, slots=slots):
            raise ValueError(
                f"{what} needs {slots} x {int(nbytes)} B = {slots * int(nbytes)} B, more than "
                f"the buffer's {self.size_bytes} B ({self.size_kib:g} KiB)"
            )

    @staticmethod
    def _bytes(nbytes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        n = _whole(nbytes, "nbytes")
        if n.size and n.min() < 0:
            raise ValueError(f"nbytes must be >= 0, got minimum {int(n.min())}")
        return n
