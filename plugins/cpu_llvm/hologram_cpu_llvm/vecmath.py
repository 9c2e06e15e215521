"""Vectorizable transcendental functions emitted as LLVM IR.

`emit_math(builder, name, args, dtype)` appends a branch-free instruction sequence that
computes the named function; no libm call is made, so a loop around it is widened by
LLVM's loop vectorizer. Every function is computed in f64 and rounded once to the
argument's type: f64 results are within 4 ulp of the correctly rounded value, f32 and
f16 ones within 1 ulp, everywhere (trig too: Payne-Hanek for large arguments), FMOD is exact
(measured bounds per function in docs/cpu-llvm-accuracy.md).
Special values (NaN, +-inf, +-0, subnormals, overflow, underflow) follow numpy / C99
Annex F.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hologram.backend import DType
from hologram.errors import CompileError

from . import vecmath_erf as R
from . import vecmath_exp as X
from . import vecmath_log as L
from . import vecmath_trig as T
from .vecmath_core import F, Em


def hypot(e: Em, x: ir.Value, y: ir.Value) -> ir.Value:
    # Scale both by 2**-exponent(max) so the squares neither overflow nor underflow; the
    # scaling is exact and the only roundings are y'^2, the FMA and the sqrt.
    ax, ay = e.abs(x), e.abs(y)
    big = e.sel(e.cmp(">=", ax, ay), ax, ay)
    small = e.sel(e.cmp(">=", ax, ay), ay, ax)
    ok = e.band(e.isfinite(big), e.cmp(">", big, e.c(0)))
    bs = e.sel(ok, big, e.c(1))
    ss = e.sel(ok, small, e.c(0))
    k, _ = e.ilogb(bs)
    k = e.b.select(e.b.icmp_signed("<", k, e.i(-1022)), e.i(-1022), k)
    k = e.b.select(e.b.icmp_signed(">", k, e.i(1022)), e.i(1022), k)
    inv = e.pow2(e.b.neg(k))
    xb, xs = e.mul(bs, inv), e.mul(ss, inv)
    h = e.scale(e.sqrt(e.fma(xb, xb, e.mul(xs, xs))), k)
    h = e.sel(e.cmp("==", big, e.c(0)), e.c(0), h)
    h = e.sel(e.bor(e.isnan(x), e.isnan(y)), e.c(float("nan")), h)
    return e.sel(e.bor(e.isinf(x), e.isinf(y)), e.c(float("inf")), h)


# cbrt on [1, 8): a degree-3 fit at Chebyshev nodes, relative error 0.0097 (~7 bits)
_CBRT_GUESS = [0.70416199485601, 0.34060036407212263, -0.03689713030919472, 0.0018302245528402268]


def cbrt(e: Em, x: ir.Value) -> ir.Value:
    """|x| = m 2^k, m in [1, 2); k = 3q + r with r in {0, 1, 2}, so cbrt|x| = cbrt(t) 2^q
    with t = m 2^r in [1, 8): a cubic guess (~7 bits), then four Newton steps
    y -= (y^3 - t) / (3 y^2), each doubling the bits (the residual y^2 y - t by one FMA),
    and an exact scale by 2^q. Zeros, infinities and NaN are themselves; the sign is x's."""
    a = e.abs(x)
    ok = e.band(e.isfinite(a), e.cmp(">", a, e.c(0)))
    k, m = e.ilogb(e.sel(ok, a, e.c(1)))
    q = e.b.sub(e.b.sdiv(e.b.add(k, e.i(3 * 400)), e.i(3)), e.i(400))  # floor(k / 3), k >= -1138
    t = e.mul(m, e.pow2(e.b.sub(k, e.b.mul(q, e.i(3)))))
    y = e.horner(t, _CBRT_GUESS)
    for _ in range(4):
        y2 = e.mul(y, y)
        y = e.sub(y, e.div(e.fma(y2, y, e.neg(t)), e.mul(e.c(3.0), y2)))
    out = e.sel(ok, e.mul(y, e.pow2(q)), a)  # |q| <= 380: one exact power of two
    return e.copysign(out, x)


def fmod_steps(dtype: DType) -> int:
    """Reduction steps fmod needs for `dtype` inputs: each removes >= 50 exponent bits
    from the largest possible exponent gap (f64 2098, f32 278, f16 40)."""
    gap = {DType.F64: 1023 + 1074, DType.F32: 127 + 149, DType.F16: 15 + 24}[dtype]
    return gap // 50 + 2


def fmod(e: Em, x: ir.Value, y: ir.Value, steps: int) -> ir.Value:
    """Exact C fmod, sign of x. Each step divides by y * 2**k with the exponent gap
    capped at 50, so the quotient q < 2**51 is an exact integer after trunc (at most one
    too large, which the select repairs) and a - q*y' is exact in one FMA."""
    bad = e.bor(e.bnot(e.isfinite(x)), e.isnan(y), e.cmp("==", y, e.c(0)))
    a = e.sel(bad, e.c(0), e.abs(x))
    b = e.sel(e.bor(bad, e.isinf(y)), e.c(1), e.abs(y))
    eb, _ = e.ilogb(b)
    for _ in range(steps):
        ea, _ = e.ilogb(e.sel(e.cmp("==", a, e.c(0)), b, a))
        k = e.b.sub(e.b.sub(ea, eb), e.i(50))
        k = e.b.select(e.b.icmp_signed("<", k, e.i(0)), e.i(0), k)
        bs = e.scale(b, k, parts=3)  # k <= 2047
        q = e.trunc(e.div(a, bs))
        r = e.fma(e.neg(q), bs, a)
        a = e.sel(e.cmp("<", r, e.c(0)), e.add(r, bs), r)
    a = e.sel(e.isinf(y), e.abs(x), a)
    return e.sel(bad, e.c(float("nan")), e.copysign(a, x))


UNARY: dict[str, Callable[[Em, ir.Value], ir.Value]] = {
    "EXP": X.exp, "EXP2": X.exp2, "EXPM1": X.expm1,
    "SINH": X.sinh, "COSH": X.cosh, "TANH": X.tanh, "SIGMOID": X.sigmoid,
    "LOG": L.log, "LOG2": L.log2, "LOG10": L.log10, "LOG1P": L.log1p,
    "ASINH": L.asinh, "ACOSH": L.acosh, "ATANH": L.atanh,
    "SIN": T.sin, "COS": T.cos, "TAN": T.tan,
    "ASIN": T.asin, "ACOS": T.acos, "ATAN": T.atan,
    "ERF": R.erf, "ERFC": R.erfc, "CBRT": cbrt,
}
BINARY: dict[str, Callable[[Em, ir.Value, ir.Value], ir.Value]] = {
    "ATAN2": T.atan2, "HYPOT": hypot, "POW": L.pow,
}
_F32_FORMS = {"EXP": X.exp_f32, "TANH": X.tanh_f32}
NAMES = frozenset(UNARY) | frozenset(BINARY) | {"FMOD"}

_LLVM_TYPE = {DType.F16: ir.HalfType(), DType.F32: ir.FloatType(), DType.F64: F}


def emit_math(builder: ir.IRBuilder, name: str, args: list[ir.Value], dtype: DType) -> ir.Value:
    """Emit `name(*args)` for scalar float `args` of `dtype`; returns a value of that type.

    The sequence is straight-line (no basic blocks are added), so it may be emitted
    anywhere, including inside a loop body the vectorizer should widen."""
    if dtype not in _LLVM_TYPE:
        raise CompileError(f"emit_math: {name} needs a float dtype (f16, f32, f64), got {dtype.value}")
    arity = 1 if name in UNARY else 2 if name in NAMES else 0
    if not arity:
        raise CompileError(f"emit_math: unknown function {name!r}; expected one of {', '.join(sorted(NAMES))}")
    if len(args) != arity:
        raise CompileError(f"emit_math: {name} takes {arity} argument(s), got {len(args)}")
    ty = _LLVM_TYPE[dtype]
    for a in args:
        if a.type != ty:
            raise CompileError(f"emit_math: {name} argument has LLVM type {a.type}, expected {ty} for {dtype.value}")
    e = Em(builder)
    if dtype is DType.F64:
        wide = list(args)
    elif dtype is DType.F32:
        wide = [builder.fpext(a, F) for a in args]
    else:
        wide = [half_to_f64(e, a) for a in args]
    if name == "FMOD":
        out = fmod(e, *wide, steps=fmod_steps(dtype))
    elif name in _F32_FORMS and dtype is DType.F32:
        out = _F32_FORMS[name](e, wide[0])  # shorter polynomials: the result is rounded to f32
    elif name in ("SIN", "COS", "TAN"):
        out = UNARY[name](e, wide[0], f32=dtype is DType.F32)  # f32: full-range reduction
    elif arity == 1:
        out = UNARY[name](e, wide[0])
    else:
        out = BINARY[name](e, *wide)
    if dtype is DType.F64:
        return out
    if dtype is DType.F32:
        return builder.fptrunc(out, ty)
    return f64_to_half(e, out)


# f16 conversions by integer ops: LLVM lowers f64 <-> f16 (and f32 <-> f16 on hosts
# without F16C) to compiler-rt calls (__truncdfhf2, __extendhfsf2) that a JIT may not
# resolve. These are exact (widening) and correctly rounded (narrowing, one rounding).
_I16 = ir.IntType(16)


def half_to_f64(e: Em, h: ir.Value) -> ir.Value:
    bits = e.b.zext(e.b.bitcast(h, _I16), ir.IntType(64))
    exp = e.b.and_(e.b.lshr(bits, e.i(10)), e.i(0x1F))
    man = e.b.and_(bits, e.i(0x3FF))
    sub = e.b.icmp_unsigned("==", exp, e.i(0))
    sig = e.b.uitofp(e.b.select(sub, man, e.b.or_(man, e.i(0x400))), F)
    val = e.mul(sig, e.pow2(e.b.sub(e.b.select(sub, e.i(1), exp), e.i(25))))
    special = e.sel(e.b.icmp_unsigned("==", man, e.i(0)), e.c(float("inf")), e.c(float("nan")))
    val = e.sel(e.b.icmp_unsigned("==", exp, e.i(0x1F)), special, val)
    neg = e.b.icmp_unsigned("!=", e.b.and_(bits, e.i(0x8000)), e.i(0))
    return e.sel(neg, e.neg(val), val)


def f64_to_half(e: Em, d: ir.Value) -> ir.Value:
    a = e.abs(d)
    fin = e.cmp("<", a, e.c(65536.0))
    ac = e.sel(fin, a, e.c(1.0))
    k, _ = e.ilogb(e.sel(e.cmp("==", ac, e.c(0)), e.c(2.0 ** -20), ac))
    k = e.b.select(e.b.icmp_signed("<", k, e.i(-14)), e.i(-14), k)
    m = e.to_int(e.rint(e.mul(ac, e.pow2(e.b.sub(e.i(10), k)))))  # 11-bit significand, rounded once
    # (k + 15) << 10 plus m - 1024: a carry out of the significand (m == 2048) bumps the
    # exponent, and k == -14 with m < 1024 encodes the subnormals; both fall out.
    bits = e.b.add(e.b.shl(e.b.add(k, e.i(15)), e.i(10)), e.b.sub(m, e.i(1024)))
    bits = e.b.select(e.b.icmp_signed(">", bits, e.i(0x7C00)), e.i(0x7C00), bits)
    bits = e.b.select(fin, bits, e.i(0x7C00))
    bits = e.b.select(e.isnan(d), e.i(0x7E00), bits)
    bits = e.b.or_(bits, e.b.select(e.signbit(d), e.i(0x8000), e.i(0)))
    return e.b.bitcast(e.b.trunc(bits, _I16), ir.HalfType())
