"""The analytical model's byte count is :func:`coaccel.trace.storage_bytes` exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from coaccel.sim.hbq_asic.analytical import _nbytes
from coaccel.trace import storage_bytes


def test_nbytes_equals_storage_bytes() -> None:
    rng = np.random.default_rng(7)
    bits = [Fraction(16), Fraction(33, 8), Fraction(17, 2), Fraction(4321, 1000), 4, 1]
    bits += [Fraction(int(rng.integers(1, 200)), int(rng.integers(1, 64))) for _ in range(50)]
    for b in bits:
        for elems in [0, 1, 7, 8, 9, *map(int, rng.integers(0, 10**12, size=40))]:
            assert _nbytes(elems, Fraction(b)) == storage_bytes(elems, b), (elems, b)
