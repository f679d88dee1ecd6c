"""A slow, exact oracle for the element and scale formats, written independently of coaccel.

Everything here is plain Python on :class:`fractions.Fraction`: format values are computed from
the bit fields as the specification states them (``specs/hbq.md`` §1.2, §1.3, §5.1-§5.4), and
rounding picks the nearest representable value by comparing exact distances. It shares no code
with ``coaccel.models.formats`` (no midpoint tables, no float quotients), so agreement between
the two is evidence, not tautology. Used by the unit tests and by ``tests/vectors``.
"""

from __future__ import annotations

import bisect
import functools
import math
from fractions import Fraction

# name: (ebits, mbits, bias, special) with special in {"none", "ieee", "all_ones"}.
FP_ELEMENTS = {
    "e2m1": (2, 1, 1, "none"),
    "e2m2": (2, 2, 1, "none"),
    "e2m3": (2, 3, 1, "none"),
    "e3m2": (3, 2, 3, "none"),
    "e4m3": (4, 3, 7, "all_ones"),
    "e5m2": (5, 2, 15, "ieee"),
}
# name: (bits, symmetric)
INT_ELEMENTS = {"int4": (4, True), "int8": (8, True)}

# name: (ebits, mbits, bias, code width, has subnormals, valid codes, NaN code or None)
SCALES = {
    "e8m0": (8, 0, 127, 8, False, range(0, 255), 255),
    "ue4m3": (4, 3, 7, 8, True, range(0, 0x7F), 0x7F),
    "e5m3": (5, 3, 15, 8, False, range(8, 248), None),
    "fp16": (5, 10, 15, 16, True, range(0, 0x7C00), None),
}

NAN = "nan"
POS_INF = "+inf"
NEG_INF = "-inf"


def fp_code_value(code: int, ebits: int, mbits: int, bias: int, special: str):
    """Exact value of a sign-magnitude minifloat code: a Fraction, or NAN / POS_INF / NEG_INF."""
    bits = 1 + ebits + mbits
    s = (code >> (bits - 1)) & 1
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    e_all_ones = e == (1 << ebits) - 1
    if special == "ieee" and e_all_ones:
        if m == 0:
            return NEG_INF if s else POS_INF
        return NAN
    if special == "all_ones" and e_all_ones and m == (1 << mbits) - 1:
        return NAN
    if e == 0:
        mag = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias)
    else:
        mag = (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)
    return -mag if s else mag


def elem_code_value(name: str, code: int):
    """Exact value of an element code (Fraction, or one of the NaN/Inf markers)."""
    if name in INT_ELEMENTS:
        bits, _ = INT_ELEMENTS[name]
        return Fraction(code - (1 << bits) if code >= 1 << (bits - 1) else code)
    return fp_code_value(code, *FP_ELEMENTS[name])


def elem_n_codes(name: str) -> int:
    if name in INT_ELEMENTS:
        return 1 << INT_ELEMENTS[name][0]
    ebits, mbits, _, _ = FP_ELEMENTS[name]
    return 1 << (1 + ebits + mbits)


def scale_code_value(name: str, code: int):
    """Exact value of a scale code (Fraction or NAN); raises ValueError for reserved codes."""
    ebits, mbits, bias, _, sub, valid, nan = SCALES[name]
    if code == nan:
        return NAN
    if code not in valid:
        raise ValueError(f"reserved {name} code {code}")
    e = code >> mbits
    m = code & ((1 << mbits) - 1)
    if e == 0 and sub:
        return Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias)
    return (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)


@functools.cache
def _nonneg_points(name: str) -> tuple[tuple[Fraction, int], ...]:
    """Sorted (value, code) of the non-negative finite element values (sign bit clear)."""
    pts = []
    for code in range(elem_n_codes(name) // 2):
        v = elem_code_value(name, code)
        if isinstance(v, Fraction):
            pts.append((v, code))
    return tuple(sorted(pts))


@functools.cache
def _scale_points(name: str) -> tuple[tuple[tuple[Fraction, int], ...], list[Fraction]]:
    _, _, _, _, _, valid, _ = SCALES[name]
    pts = tuple(sorted((scale_code_value(name, c), c) for c in valid))
    return pts, [p[0] for p in pts]


def _pick(a: Fraction, lo, hi, mode: str, negative: bool):
    """Nearest of two neighbours (value, code) to a, with the tie rule of ``mode``."""
    dlo, dhi = a - lo[0], hi[0] - a
    if dlo < dhi:
        return lo
    if dhi < dlo:
        return hi
    if mode == "rne":
        return lo if lo[1] % 2 == 0 else hi
    if mode == "half_away":
        return hi
    if mode == "half_up":  # toward +inf on the signed value
        return lo if negative else hi
    raise ValueError(mode)


def _nearest(a: Fraction, pts, mode: str, negative: bool):
    vals = [p[0] for p in pts]  # short lists (at most 128 points)
    i = bisect.bisect_left(vals, a)
    if i < len(pts) and vals[i] == a:
        return pts[i]
    if i == 0:
        return pts[0]
    if i == len(pts):
        return pts[-1]
    return _pick(a, pts[i - 1], pts[i], mode, negative)


OVERFLOW = "overflow"


def encode_elem(x: float, name: str, mode: str, scale: float = 1.0, saturate: bool = True):
    """Expected element code of the exact real x/scale, or OVERFLOW (non-saturating overflow).

    NaN and Inf inputs are not handled here (the tests state those rules directly).
    """
    r = Fraction(x) / Fraction(scale)
    negative = r < 0
    a = abs(r)
    if name in INT_ELEMENTS:
        bits, sym = INT_ELEMENTS[name]
        kpos = (1 << (bits - 1)) - 1
        kneg = kpos + (0 if sym else 1)
        lo = math.floor(a)
        pts = [(Fraction(lo), lo), (Fraction(lo + 1), lo + 1)]
        n = _pick(a, pts[0], pts[1], mode, negative)[1] if a != lo else lo
        limit = kneg if negative else kpos
        if n > limit:
            if not saturate:
                return OVERFLOW
            n = limit
        return (-n if negative else n) % (1 << bits)
    pts = _nonneg_points(name)
    ebits, mbits, bias, _ = FP_ELEMENTS[name]
    top = pts[-1]
    if not saturate:
        # One step past the largest finite value, at the top binade's spacing; its code parity
        # is that of the next code (IEEE rounding to overflow).
        e_top = (top[1] >> mbits) - bias
        pts = pts + ((top[0] + Fraction(2) ** (e_top - mbits), top[1] + 1),)
    v, code = _nearest(a, pts, mode, negative)
    if not saturate and code == top[1] + 1:
        return OVERFLOW
    if v == 0:
        return 0
    bits = 1 + ebits + mbits
    return code | ((1 << (bits - 1)) if negative else 0)


def encode_scale(value: float, name: str, mode: str, divisor: float = 1.0) -> int:
    """Expected scale code of the exact real value/divisor (clamped into the format's range)."""
    r = Fraction(value) / Fraction(divisor)
    pts, vals = _scale_points(name)
    if r <= vals[0]:
        return pts[0][1]
    if r >= vals[-1]:
        return pts[-1][1]
    i = bisect.bisect_left(vals, r)
    if vals[i] == r:
        return pts[i][1]
    lo, hi = pts[i - 1], pts[i]
    if mode == "ceil":
        return hi[1]
    if mode == "floor":
        return lo[1]
    if mode == "half_up":
        mode = "half_away"  # positive values: ties toward +inf are ties away from zero
    return _pick(r, lo, hi, mode, False)[1]


def to_float(v) -> float:
    """A Fraction or marker as a Python float (NaN / ±inf for the markers)."""
    if v == NAN:
        return math.nan
    if v == POS_INF:
        return math.inf
    if v == NEG_INF:
        return -math.inf
    return float(v)


# ----------------------------------------------------------------------------------------------
# Block formats, one block at a time (specs/hbq.md §5.2-§5.5), on top of the exact encoders above.


def floor_log2(v: Fraction) -> int:
    """floor(log2 v) of a positive Fraction, exactly."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** e > v:
        e -= 1
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    return e


# name: (element format, emax_elem, element exponent offset), §5.2 step 2 and §5.3.
MX = {
    "mxfp4": ("e2m1", 2, 0),
    "mxfp6_e2m3": ("e2m3", 2, 0),
    "mxfp6_e3m2": ("e3m2", 4, 0),
    "mxfp8_e4m3": ("e4m3", 8, 0),
    "mxfp8_e5m2": ("e5m2", 15, 0),
    "mxint8": ("int8", 0, -6),
}


def mx_block(xs: list[float], fmt: str, mode: str) -> tuple[int, list[int]]:
    """OCP MX block: (E8M0 scale code, element codes) of finite inputs; ValueError if X > 127."""
    elem, emax, shift = MX[fmt]
    amax = max(abs(Fraction(x)) for x in xs)
    if amax == 0:
        amax = Fraction(2) ** -126
    x_exp = floor_log2(amax) - emax
    if x_exp > 127:
        raise ValueError("shared exponent above 127")
    x_exp = max(x_exp, -127)
    scale = float(Fraction(2) ** (x_exp + shift))
    return x_exp + 127, [encode_elem(x, elem, mode, scale) for x in xs]


def mx_hbq_repo_block(xs: list[float], fmt: str, mode: str) -> tuple[int, list[int]]:
    """The HBQ repo's MXFP4 / MXINT8 (§5.3): X clipped to [-14, 15], code X + 15."""
    amax = max(abs(Fraction(x)) for x in xs)
    emax = 2 if fmt == "mxfp4" else 6
    x_exp = -14 if amax == 0 else min(max(floor_log2(amax) - emax, -14), 15)
    scale = float(Fraction(2) ** x_exp)
    if fmt == "mxfp4":
        return x_exp + 15, [encode_elem(x, "e2m1", mode, scale) for x in xs]
    codes = []
    for x in xs:  # INT8 clipped to [-128, 127]: round on the real line, then clip
        r = Fraction(x) / Fraction(scale)
        n = math.floor(r)
        d = r - n
        if d > Fraction(1, 2) or (d == Fraction(1, 2) and _tie_up(n, r < 0, mode)):
            n += 1
        codes.append(min(max(n, -128), 127) % 256)
    return x_exp + 15, codes


def _tie_up(n: int, negative: bool, mode: str) -> bool:
    """Whether a tie between the integers n and n + 1 goes to n + 1 (signed line)."""
    if mode == "rne":
        return n % 2 == 1
    if mode == "half_away":
        return not negative
    return True  # half_up: toward +inf


def bfp_block(xs: list[float], bits: int, mode: str) -> tuple[int, list[int]]:
    """BFP: E8M0 X = floor(log2 amax) - (bits - 2); INT``bits`` elements, symmetric clip."""
    amax = max(abs(Fraction(x)) for x in xs)
    if amax == 0:
        amax = Fraction(2) ** -126
    x_exp = max(floor_log2(amax) - (bits - 2), -127)
    if x_exp > 127:
        raise ValueError("shared exponent above 127")
    qmax = (1 << (bits - 1)) - 1
    codes = []
    for x in xs:
        r = Fraction(x) / Fraction(2) ** x_exp
        n = math.floor(r)
        if r - n > Fraction(1, 2) or (r - n == Fraction(1, 2) and _tie_up(n, r < 0, mode)):
            n += 1
        codes.append(min(max(n, -qmax), qmax) % (1 << bits))
    return x_exp + 127, codes


def nvfp4_tensor_scale(amax_tensor: float):
    """s_t = float32(amax) / float32(2688), in float32 (1 when amax or the quotient is 0)."""
    import numpy as np  # float32 arithmetic is part of the definition (ModelOpt)

    s_t = np.float32(amax_tensor) / np.float32(6 * 448)
    return s_t if s_t > 0 else np.float32(1.0)


def nvfp4_block(xs: list[float], s_t, mode: str, scale_mode: str = "rne") -> tuple[int, list[int]]:
    """NVFP4 block (§5.4): UE4M3(float32(amax) / float32(6 s_t)); code 0 -> 0x38; E2M1 of
    x / (s_b s_t) exactly."""
    import numpy as np

    amax = max(abs(x) for x in xs)
    ratio = np.float32(amax) / (np.float32(6) * s_t)
    code = encode_scale(float(ratio), "ue4m3", scale_mode)
    if code == 0:
        code = 0x38
    s = scale_code_value("ue4m3", code) * Fraction(float(s_t))
    return code, [encode_elem(x, "e2m1", mode, float(s)) for x in xs]


def nvfp4_e5m3_block(xs: list[float], mode: str, scale_mode: str = "half_up"):
    """The HBQ repo's NVFP4: E5M3(amax / 6) exactly, E2M1 of x / s."""
    amax = max(abs(x) for x in xs)
    code = encode_scale(amax, "e5m3", scale_mode, 6.0)
    s = float(scale_code_value("e5m3", code))
    return code, [encode_elem(x, "e2m1", mode, s) for x in xs]


def int_block(xs: list[float], bits: int, scale_fmt: str, mode: str, scale_mode: str = "rne"):
    """INT``bits`` with scale = amax / qmax rounded into ``scale_fmt``; a 0 scale gives 0 codes."""
    qmax = (1 << (bits - 1)) - 1
    amax = max(abs(x) for x in xs)
    code = encode_scale(amax, scale_fmt, scale_mode, float(qmax))
    s = scale_code_value(scale_fmt, code)
    if s == 0:
        return code, [0] * len(xs)
    out = []
    for x in xs:
        r = Fraction(x) / s
        n = math.floor(r)
        if r - n > Fraction(1, 2) or (r - n == Fraction(1, 2) and _tie_up(n, r < 0, mode)):
            n += 1
        out.append(min(max(n, -qmax), qmax) % (1 << bits))
    return code, out
