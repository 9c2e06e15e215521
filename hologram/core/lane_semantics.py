"""The reference semantics of the Atlas instructions, one lane at a time.

Each value-computing instruction's entry in the op table (`hologram.core.instructions`)
points at a factory here, `semantics(dtype, mod) -> function`: the function computes the
instruction on numpy scalars of its operand types, so float arithmetic rounds exactly as
IEEE arithmetic in that type (f16 included) and integer arithmetic wraps. A factory
resolves the dtype-dependent choice (true vs floor division, bitwise vs logical NOT, the
comparison of SET) once per instruction, so the interpreter, which calls these under
`np.errstate(all="ignore")`, decides nothing per lane. The rules are specified in
docs/isa.md; this module is their executable form, and what every backend is held to.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from hologram.core import atlas
from hologram.core.types import DType

if TYPE_CHECKING:
    from fractions import Fraction

Fn = Callable[..., Any]
Semantics = Callable[..., Fn]  # (dtype, mod=None) -> the lane function


# ------------------------------------------------------------------------ conversions
def wrap_int(value: int, to: DType) -> np.generic:
    """A Python int reduced modulo 2**bits into the integer type `to` (two's complement)."""
    span = 1 << to.bits
    return to.np.type((value - to.min) % span + to.min)


def _float_to_int(x: float, to: DType) -> np.generic:
    # Saturating and NaN -> 0: numpy's own cast is undefined out of range.
    if x != x:
        return to.np.type(0)
    if math.isinf(x):
        return to.np.type(to.max if x > 0 else to.min)
    return to.np.type(min(max(math.trunc(x), to.min), to.max))


def convert(x: np.generic, to: DType) -> np.generic:
    """CVT: the numpy scalar `x` converted to `to`.

    anything -> bool is `x != 0`; float -> int truncates toward zero and saturates, NaN
    -> 0; everything else is numpy's cast (int -> int wraps, int -> float and
    float -> float round to nearest even, bool -> number is 0/1)."""
    if to is DType.BOOL:
        return np.bool_(x != 0)
    if to.is_int and x.dtype.kind == "f":
        return _float_to_int(float(x), to)
    return x.astype(to.np)


def const(value: bool | int | float, to: DType) -> np.generic:
    """An immediate (a Python literal) as a numpy scalar of `to`: integers wrap into
    integer types and round exactly (once) into float types; floats convert as CVT."""
    if to is DType.BOOL:
        return np.bool_(value != 0)
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value).astype(to.np)
    if isinstance(value, (int, np.integer)):
        if to.is_int:
            return wrap_int(int(value), to)
        from fractions import Fraction  # imported when first needed: ~3 ms of a bundle load
        return round_exact(Fraction(int(value)), to)
    return convert(np.float64(value), to)


# ------------------------------------------------------------------ exact rounding/FMA
# (precision incl. the implicit bit, minimum normal exponent, maximum exponent)
_FORMATS = {DType.F16: (11, -14, 15), DType.F32: (24, -126, 127), DType.F64: (53, -1022, 1023)}


def round_exact(q: "Fraction", to: DType) -> np.floating:
    """The rational `q` rounded once, to nearest with ties to even, into float type `to`
    (subnormals and overflow to infinity included). A positive zero for q == 0."""
    prec, emin, emax = _FORMATS[to]
    if q == 0:
        return to.np.type(0.0)
    neg, q = q < 0, abs(q)
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()  # 2**(e-1) < q < 2**(e+1)
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1  # now 2**e <= q < 2**(e+1)
    u = max(e, emin) - (prec - 1)  # exponent of one ulp at q (fixed below emin: subnormals)
    num, den = (n, d << u) if u >= 0 else (n << -u, d)
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):
        m += 1
    if m.bit_length() + u > emax + 1:  # m * 2**u >= 2**(emax+1)
        value = math.inf
    else:
        value = math.ldexp(m, u)  # exact: m has at most prec+1 bits
    return to.np.type(-value if neg else value)


def fma(a: np.floating, b: np.floating, c: np.floating) -> np.floating:
    """a*b + c rounded once, in the type of `a`.

    Python 3.11 has no math.fma, and computing in a wider type does not help in general:
    for f32, a*b is exact in f64 but `a*b + c` then rounds in f64 and again in f32, and a
    product sitting exactly on an f32 midpoint plus a tiny c rounds the wrong way. So the
    finite case is computed exactly with Fractions and rounded once by `round_exact`."""
    to = DType.from_numpy(a.dtype)
    fa, fb, fc = float(a), float(b), float(c)
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return a * b + c  # the product is +-inf or NaN exactly; one addition follows
    if not math.isfinite(fc):
        return c  # finite product (possibly beyond the type's range) plus inf/NaN
    from fractions import Fraction

    q = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if q == 0:
        # IEEE sum of exact zeros: -0 only when both addends are -0 (round to nearest).
        prod_neg = math.copysign(1.0, fa) * math.copysign(1.0, fb) < 0
        both_neg = (fa == 0 or fb == 0) and prod_neg and fc == 0 and math.copysign(1.0, fc) < 0
        return to.np.type(-0.0 if both_neg else 0.0)
    return round_exact(q, to)


# ------------------------------------------------------------------------ factories
# Each is `(dtype, mod=None) -> lane function`, the shape the op table's `semantics` has.
def same(fn: Fn) -> Semantics:
    """The numpy function `fn` itself, whatever the type (numpy picks the loop of the
    scalars' own dtype)."""
    return lambda t, mod=None: fn


def via_f64(f: Callable[[float], float]) -> Semantics:
    """A function numpy lacks: the C library's (Python's math), in double, rounded once
    to the type."""
    return lambda t, mod=None: (lambda x: t.np.type(f(float(x))))


def array_loop(fn: Fn) -> Fn:
    """numpy's array loop of `fn`. Its scalar path special-cases some arguments
    (power(x, 0.5) is sqrt(x), so power(-0.0, 0.5) = -0.0); the ISA means the array
    loop, which is what a kernel over arrays computes."""
    return lambda a, b: fn(a.reshape(1), b.reshape(1))[0]


def identity(t: DType, mod: str | None = None) -> Fn:
    return lambda x: x


def convert_to(t: DType, mod: str | None = None) -> Fn:
    """CVT.t: the operand (already read as its source type) converted to t."""
    return lambda x: convert(x, t)


def rsqrt(t: DType, mod: str | None = None) -> Fn:
    one = t.np.type(1)
    return lambda x: one / np.sqrt(x)


def sigmoid(t: DType, mod: str | None = None) -> Fn:
    one = t.np.type(1)

    def lane(x):
        # exp of a non-positive argument only, so it never overflows.
        if x >= 0:
            return one / (one + np.exp(-x))
        e = np.exp(x)
        return e / (one + e)

    return lane


def div(t: DType, mod: str | None = None) -> Fn:
    if t.is_float:
        return operator.truediv
    zero = t.np.type(0)
    return lambda a, b: a // b if b else zero  # floor division; by zero is 0 (defined)


def rem(t: DType, mod: str | None = None) -> Fn:
    if t.is_float:
        return np.remainder
    zero = t.np.type(0)
    return lambda a, b: a % b if b else zero  # sign of the divisor; by zero is 0


def shift(op: Fn) -> Semantics:
    """A shift whose amount is masked to the bit width (numpy: arithmetic iff signed)."""
    def make(t: DType, mod: str | None = None) -> Fn:
        mask = t.np.type(t.bits - 1)
        return lambda a, b: op(a, b & mask)

    return make


COMPARE: dict[str, Fn] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


def compare(t: DType, mod: str | None = None) -> Fn:
    """SET.mod.t: IEEE comparisons (every one with a NaN is false but `ne`)."""
    if mod not in COMPARE:
        raise ValueError(f"SET needs a comparison ({', '.join(COMPARE)}), got {mod!r}")
    return COMPARE[mod]


def fused(t: DType, mod: str | None = None) -> Fn:
    # Integer arithmetic wraps, which is exact modulo 2**bits: fused and unfused agree.
    return fma if t.is_float else (lambda a, b, c: a * b + c)


def select(t: DType, mod: str | None = None) -> Fn:
    return lambda p, a, b: a if p else b


def atlas_unary(f: Callable[[int], int]) -> Semantics:
    """An Atlas table lookup on the integer operand, its answer wrapped into t."""
    return lambda t, mod=None: (lambda x: wrap_int(f(int(x)), t))


def unity_test(t: DType, mod: str | None = None) -> Fn:
    return lambda x: np.bool_(atlas.is_unity(int(x)))


def neighbor(t: DType, mod: str | None = None) -> Fn:
    return lambda c, k: wrap_int(atlas.neighbor(int(c), int(k)), t)


def bound_map(t: DType, mod: str | None = None) -> Fn:
    return lambda c, p, b: wrap_int(atlas.bound_map(int(c), int(p), int(b)), t)


def byte_class(c: int) -> int:
    return atlas.byte_class(c & 0xFF)  # the low byte, two's complement for negative c


def pairwise(combine: Fn, values: list) -> Any:
    """Combine a non-empty list as a balanced tree: adjacent pairs, level by level, so
    rounding error grows with log2(n) as in numpy's pairwise summation."""
    while len(values) > 1:
        paired = [combine(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
    return values[0]
