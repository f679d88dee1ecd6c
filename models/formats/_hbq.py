"""HBQ (hierarchical block quantization), specs/hbq.md §1.

(The quantizer itself is being written; the L2 tables below are the shared constants.)
"""

from __future__ import annotations

from types import MappingProxyType

L2_TABLES = MappingProxyType({
    # name: (integer multipliers for codes 0..3, fractional bits); value = int / 2**frac.
    # specs/hbq.md §1.4. Repo names: PoT, INT, SIG-1, FP-1 (= SIG_2), FP-10 (= SIG_3), FP-100.
    "pot": ((1, 2, 4, 8), 0),
    "int": ((1, 2, 3, 4), 0),
    "sig1": ((2, 3, 4, 5), 1),
    "sig2": ((4, 5, 6, 7), 2),
    "sig3": ((8, 9, 10, 11), 3),
    "sig4": ((16, 17, 18, 19), 4),
})
"""Level-2 multiplier tables. With ``l2_bits = n`` only codes ``0 .. 2**n - 1`` are used.
``"mix"`` (weights) is SIG_2 or SIG_3 chosen per L1 block by one scheme bit (0 = SIG_2)."""

L2_ALIASES = MappingProxyType({"fp-1": "sig2", "fp-10": "sig3", "fp-100": "sig4", "sig-1": "sig1"})
"""The HBQ repository's scheme names mapped to ours."""

__all__ = ["L2_TABLES", "L2_ALIASES"]
