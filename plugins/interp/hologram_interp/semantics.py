"""Scalar semantics of every value-computing Atlas ISA opcode.

Values are numpy scalars of the operation's dtype, so float arithmetic rounds exactly as
IEEE arithmetic in that type (f16 included) and integer arithmetic wraps; the machine
runs everything under `np.errstate(all="ignore")`. Each table maps an opcode to a
factory `dtype -> function`, so the decoder resolves the dtype-dependent choice (true
vs floor division, bitwise vs logical NOT) once per instruction, not once per lane.
The rules themselves are specified in docs/isa.md; this module is their executable form.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from hologram.backend import DType, atlas

Fn = Callable[..., Any]


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
        return wrap_int(int(value), to) if to.is_int else round_exact(Fraction(int(value)), to)
    return convert(np.float64(value), to)


# ------------------------------------------------------------------ exact rounding/FMA
# (precision incl. the implicit bit, minimum normal exponent, maximum exponent)
_FORMATS = {DType.F16: (11, -14, 15), DType.F32: (24, -126, 127), DType.F64: (53, -1022, 1023)}


def round_exact(q: Fraction, to: DType) -> np.floating:
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
    q = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if q == 0:
        # IEEE sum of exact zeros: -0 only when both addends are -0 (round to nearest).
        prod_neg = math.copysign(1.0, fa) * math.copysign(1.0, fb) < 0
        both_neg = (fa == 0 or fb == 0) and prod_neg and fc == 0 and math.copysign(1.0, fc) < 0
        return to.np.type(-0.0 if both_neg else 0.0)
    return round_exact(q, to)


# --------------------------------------------------------------------- unary opcodes
def _rsqrt(t: DType) -> Fn:
    one = t.np.type(1)
    return lambda x: one / np.sqrt(x)


def _sigmoid(t: DType) -> Fn:
    one = t.np.type(1)

    def sigmoid(x):
        # exp of a non-positive argument only, so it never overflows.
        if x >= 0:
            return one / (one + np.exp(-x))
        e = np.exp(x)
        return e / (one + e)

    return sigmoid


def _via_f64(f: Callable[[float], float]) -> Callable[[DType], Fn]:
    # functions numpy lacks: the C library's, in double, rounded once to the type
    return lambda t: (lambda x: t.np.type(f(float(x))))


def _atlas1(f: Callable[[int], int]) -> Callable[[DType], Fn]:
    return lambda t: (lambda x: wrap_int(f(int(x)), t))


def _same(fn: Fn) -> Callable[[DType], Fn]:
    return lambda t: fn


def _array_loop(fn: Fn) -> Fn:
    # numpy's scalar path special-cases some arguments (power(x, 0.5) is sqrt(x), so
    # power(-0.0, 0.5) = -0.0); the ISA means the array loop, which is what a kernel
    # over arrays computes.
    return lambda a, b: fn(a.reshape(1), b.reshape(1))[0]


UNARY: dict[str, Callable[[DType], Fn]] = {
    "MOV": _same(lambda x: x),
    "ABS": _same(np.absolute),
    "NEG": _same(np.negative),
    "NOT": _same(np.invert),  # bitwise on integers, logical on bool
    "EXP": _same(np.exp), "LOG": _same(np.log), "LOG2": _same(np.log2), "LOG10": _same(np.log10),
    "SQRT": _same(np.sqrt), "RSQRT": _rsqrt,
    "SIN": _same(np.sin), "COS": _same(np.cos), "TAN": _same(np.tan), "TANH": _same(np.tanh),
    "SIGMOID": _sigmoid,
    "ASIN": _same(np.arcsin), "ACOS": _same(np.arccos), "ATAN": _same(np.arctan),
    "SINH": _same(np.sinh), "COSH": _same(np.cosh),
    "ASINH": _same(np.arcsinh), "ACOSH": _same(np.arccosh), "ATANH": _same(np.arctanh),
    "EXP2": _same(np.exp2), "EXPM1": _same(np.expm1), "LOG1P": _same(np.log1p), "CBRT": _same(np.cbrt),
    "ERF": _via_f64(math.erf), "ERFC": _via_f64(math.erfc),
    "FLOOR": _same(np.floor), "CEIL": _same(np.ceil), "TRUNC": _same(np.trunc), "RINT": _same(np.rint),
    "ClsGet": _atlas1(lambda c: atlas.byte_class(c & 0xFF)),
    "MIRROR": _atlas1(atlas.mirror),
    "NbrCount": _atlas1(atlas.degree),
    "UnityTest": lambda t: (lambda x: np.bool_(atlas.is_unity(int(x)))),
}


# -------------------------------------------------------------------- binary opcodes
def _div(t: DType) -> Fn:
    if t.is_float:
        return operator.truediv
    zero = t.np.type(0)
    return lambda a, b: a // b if b else zero  # floor division; by zero is 0 (defined)


def _rem(t: DType) -> Fn:
    if t.is_float:
        return np.remainder
    zero = t.np.type(0)
    return lambda a, b: a % b if b else zero  # sign of the divisor; by zero is 0


def _shift(op: Fn) -> Callable[[DType], Fn]:
    def make(t: DType) -> Fn:
        mask = t.np.type(t.bits - 1)
        return lambda a, b: op(a, b & mask)

    return make


BINARY: dict[str, Callable[[DType], Fn]] = {
    "ADD": _same(operator.add), "SUB": _same(operator.sub), "MUL": _same(operator.mul),
    "DIV": _div, "REM": _rem,
    "MIN": _same(np.minimum), "MAX": _same(np.maximum),  # NaN propagates
    "AND": _same(operator.and_), "OR": _same(operator.or_), "XOR": _same(operator.xor),
    "SHL": _shift(operator.lshift), "SHR": _shift(operator.rshift),  # numpy: arithmetic iff signed
    "ATAN2": _same(np.arctan2), "HYPOT": _same(np.hypot), "FMOD": _same(np.fmod),
    "COPYSIGN": _same(np.copysign), "POW": _same(_array_loop(np.power)),
    "NbrGet": lambda t: (lambda c, k: wrap_int(atlas.neighbor(int(c), int(k)), t)),
}

COMPARE: dict[str, Fn] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


# ------------------------------------------------------------------- ternary opcodes
def _fma(t: DType) -> Fn:
    # Integer arithmetic wraps, which is exact modulo 2**bits: fused and unfused agree.
    return fma if t.is_float else (lambda a, b, c: a * b + c)


TERNARY: dict[str, Callable[[DType], Fn]] = {
    "MAD": _same(lambda a, b, c: a * b + c),  # two roundings
    "FMA": _fma,
    "SEL": _same(lambda p, a, b: a if p else b),
    "BoundMap": lambda t: (lambda c, p, b: wrap_int(atlas.bound_map(int(c), int(p), int(b)), t)),
}


# ---------------------------------------------------------------------- reductions
REDUCE: dict[str, Fn] = {
    "ReduceAdd": operator.add, "ResAccum": operator.add, "ReduceMul": operator.mul,
    "ReduceMin": np.minimum, "ReduceMax": np.maximum,
}


def pairwise(combine: Fn, values: list) -> Any:
    """Combine a non-empty list as a balanced tree: adjacent pairs, level by level, so
    rounding error grows with log2(n) as in numpy's pairwise summation."""
    while len(values) > 1:
        paired = [combine(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
    return values[0]
