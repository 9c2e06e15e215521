"""The exponential family in f64: exp exp2 expm1 sinh cosh tanh sigmoid.

One reduction serves them all: x = n ln2 + r with n = rint(x log2 e) and |r| <= ln2/2
(Cody-Waite: LN2_HI has 32 bits so n LN2_HI is exact and the first FMA cancels exactly),
then expm1(r) by its Taylor series (degree 13: the first dropped term is below 2**-60
relative), then a scale by 2**n built from exponent bits in two halves so subnormal
results are rounded once. `exp_f32` and `tanh_f32` are the cheaper variants for f32 results.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .vecmath_core import LN2, LN2_HI, LN2_LO, LOG2E, Em

# expm1(r) = r + r^2 * P(r), P(r) = sum_{k>=2} r^(k-2) / k!
EXPM1_TAIL = [1.0 / math.factorial(k) for k in range(2, 15)]
# expm1(r ln2) = r * Q(r), Q(r) = sum_{k>=1} ln2^k r^(k-1) / k!  (for exp2)
_EXP2M1 = [math.log(2) ** k / math.factorial(k) for k in range(1, 15)]


def expm1_reduced(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(n, expm1(r)) with x = n ln2 + r; x must be finite and |x| < 2**19."""
    nf = e.rint(e.mul(x, e.c(LOG2E)))
    r = e.fma(e.neg(nf), e.c(LN2_HI), x)  # exact
    r = e.fma(e.neg(nf), e.c(LN2_LO), r)
    return e.to_int(nf), e.fma(e.mul(r, r), e.horner(r, EXPM1_TAIL), r)


def exp(e: Em, x: ir.Value) -> ir.Value:
    xs = e.sel(e.isnan(x), e.c(0), e.clamp(x, -746.0, 710.0))  # beyond: 0 / inf anyway
    n, m = expm1_reduced(e, xs)
    return e.sel(e.isnan(x), x, e.scale(e.add(e.c(1), m), n))


# exp(r) on |r| <= ln2/2 to 2**-34 relative, for f32 results only: the coefficients of
# mpmath.chebyfit(mpmath.exp, [-ln2/2, ln2/2], 8) at 40 digits, rounded to doubles
# (plugins/cpu_llvm/tests/test_vecmath.py checks the bound in long double).
EXP_F32_POLY = [0.9999999999595618, 0.999999999995509, 0.5000000107729166, 0.16666666786308587,
                0.041666218319291945, 0.008333283538708528, 0.0013948578326459795, 0.00019907569310848288]


def exp_f32(e: Em, x: ir.Value) -> ir.Value:
    """exp of an f32 argument widened to f64, to be rounded to f32 once.

    An f32 result needs far less than the f64 algorithm: a relative error of 2**-34
    before the rounding adds at most 2**-10 ulp to the rounding's 0.5. So one FMA
    reduces (n <= 150, so n * ln2's double error stays below 2**-46 relative), a degree-7
    polynomial approximates, and one exact scale by 2**n rebuilds: for |x| <= 104 the
    value is a normal f64 (the f32 subnormals come from the final rounding)."""
    # Clamped (beyond: 0 / inf anyway) with NaN sent to the lower bound, so the integer
    # conversion below never sees a NaN: one max and one min instruction.
    xs = e.sel(e.b.fcmp_unordered("<", x, e.c(-104.0)), e.c(-104.0), x)
    xs = e.sel(e.cmp(">", xs, e.c(89.0)), e.c(89.0), xs)
    nf = e.rint(e.mul(xs, e.c(LOG2E)))
    r = e.fma(e.neg(nf), e.c(LN2), xs)
    return e.sel(e.isnan(x), x, e.mul(e.horner(r, EXP_F32_POLY), e.pow2(e.to_int(nf))))


def exp2(e: Em, x: ir.Value) -> ir.Value:
    xs = e.sel(e.isnan(x), e.c(0), e.clamp(x, -1080.0, 1025.0))
    nf = e.rint(xs)
    r = e.sub(xs, nf)  # exact, |r| <= 1/2
    m = e.mul(r, e.horner(r, _EXP2M1))
    return e.sel(e.isnan(x), x, e.scale(e.add(e.c(1), m), e.to_int(nf)))


def expm1(e: Em, x: ir.Value) -> ir.Value:
    xs = e.sel(e.isnan(x), e.c(0), e.clamp(x, -60.0, 710.0))
    n, m = expm1_reduced(e, xs)
    # 2^n (1 + m) - 1 = 2^n m + (2^n - 1): 2^n - 1 is exact for |n| <= 53, and beyond
    # that the -1 is below half an ulp of the result (or the result is -1).
    small_n = e.b.select(e.b.icmp_signed(">", n, e.i(60)), e.i(60), n)
    s = e.pow2(small_n)
    small = e.fma(s, m, e.sub(s, e.c(1)))
    big = e.scale(e.add(e.c(1), m), n)
    res = e.sel(e.b.icmp_signed(">", n, e.i(60)), big, small)
    res = e.sel(e.cmp("<", x, e.c(-40.0)), e.c(-1.0), res)
    return e.sel(e.bor(e.isnan(x), e.cmp("==", x, e.c(0))), x, res)  # keeps -0.0


def _half_exp_abs(e: Em, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """For a = |x| (finite, clamped): (exp(a)/2 without premature overflow, expm1(a)
    accurate for a < 1)."""
    n, m = expm1_reduced(e, a)
    half = e.scale(e.add(e.c(1), m), e.b.sub(n, e.i(1)))
    s = e.pow2(e.b.select(e.b.icmp_signed(">", n, e.i(60)), e.i(60), n))
    return half, e.fma(s, m, e.sub(s, e.c(1)))


def sinh(e: Em, x: ir.Value) -> ir.Value:
    a = e.clamp(e.sel(e.isnan(x), e.c(0), e.abs(x)), 0.0, 711.0)
    h, em1 = _half_exp_abs(e, a)
    # |x| < 1: (em1 + em1 / (em1 + 1)) / 2 has no cancellation; above, e/2 - 1/(2e) loses
    # at most a factor 1.15.
    small = e.mul(e.c(0.5), e.add(em1, e.div(em1, e.add(em1, e.c(1)))))
    big = e.sub(h, e.div(e.c(0.25), h))
    res = e.copysign(e.sel(e.cmp("<", a, e.c(1.0)), small, big), x)
    return e.sel(e.bor(e.isnan(x), e.cmp("==", x, e.c(0))), x, res)


def cosh(e: Em, x: ir.Value) -> ir.Value:
    a = e.clamp(e.sel(e.isnan(x), e.c(0), e.abs(x)), 0.0, 711.0)
    h, _ = _half_exp_abs(e, a)
    return e.sel(e.isnan(x), x, e.add(h, e.div(e.c(0.25), h)))


def tanh(e: Em, x: ir.Value) -> ir.Value:
    # tanh|x| = -y / (y + 2) with y = expm1(-2|x|) in (-1, 0]: no overflow, no cancellation.
    a = e.clamp(e.sel(e.isnan(x), e.c(0), e.abs(x)), 0.0, 40.0)
    y = expm1(e, e.mul(e.c(-2.0), a))
    res = e.copysign(e.div(e.neg(y), e.add(y, e.c(2.0))), x)
    return e.sel(e.bor(e.isnan(x), e.cmp("==", x, e.c(0))), x, res)


# expm1(r) = r + r^2 * P(r) to degree 9 (P: 1/k! for k = 2..9): on |r| <= ln2/2 the first
# dropped term is below 2**-35 of |r|, all an f32 result needs (test_vecmath checks it)
EXPM1_F32_TAIL = EXPM1_TAIL[:8]


def tanh_f32(e: Em, x: ir.Value) -> ir.Value:
    """tanh of an f32 argument widened to f64, to be rounded to f32 once: `tanh`'s
    -y / (y + 2) with y = expm1(-2|x|), but y only to 2**-35 relative (a degree-9
    expm1 after a one-constant reduction; n >= -28, so 2^n - 1 is exact), and |x|
    clamped at 9.5, beyond which tanh rounds to 1 in f32. The quotient's sensitivity to
    y is at most 2, so the result is within 2**-33 relative before its rounding: at most
    0.5 + 2**-10 ulp. Half the polynomial of the f64 path, no overflow handling."""
    a = e.sel(e.b.fcmp_unordered(">", e.abs(x), e.c(9.5)), e.c(9.5), e.abs(x))  # NaN too: restored below
    t = e.mul(e.c(-2.0), a)  # exact
    nf = e.rint(e.mul(t, e.c(LOG2E)))
    r = e.fma(e.neg(nf), e.c(LN2), t)  # |nf| <= 28: n ln2's error stays below 2**-48
    m = e.fma(e.mul(r, r), e.horner(r, EXPM1_F32_TAIL), r)
    s = e.pow2(e.to_int(nf))
    y = e.fma(s, m, e.sub(s, e.c(1)))
    res = e.copysign(e.div(e.neg(y), e.add(y, e.c(2.0))), x)  # keeps -0.0: y is 0 there
    return e.sel(e.isnan(x), x, res)


def sigmoid(e: Em, x: ir.Value) -> ir.Value:
    # With t = exp(-|x|) in (0, 1]: 1/(1+t) for x >= 0, t/(1+t) below; exp never overflows.
    t = exp(e, e.neg(e.abs(x)))
    d = e.add(e.c(1), t)
    res = e.sel(e.cmp(">=", x, e.c(0)), e.div(e.c(1), d), e.div(t, d))
    return e.sel(e.isnan(x), x, res)
