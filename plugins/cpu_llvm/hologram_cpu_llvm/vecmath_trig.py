"""Trigonometric functions in f64: sin cos tan asin acos atan atan2.

sin/cos/tan: Cody-Waite reduction x = q pi/2 + r with pi/2 split into three doubles and
FMA (the first product cancels exactly because q P1 and x share the ulp 2**-52 grid),
then Taylor polynomials on |r| <= pi/4 (sin to r^15, cos to r^16: dropped terms below
2**-56 relative). That reduction is accurate while |x| <= TRIG_LIMIT; beyond it, a
branch-free Payne-Hanek reduction takes over (f32 arguments: a 105-entry table of 96-bit
2/pi windows, for |x| >= 2**24; f64: a 994-entry table of 192-bit windows, multiplied
in 32-bit limbs so it vectorizes), so sin/cos/tan are accurate over the whole range.

atan: |x| > 1 folds to pi/2 - atan(1/|x|); then t in [0, 1] is reduced around the
nearest c = k/8 by atan(t) = atan(c) + atan((t - c) / (1 + t c)), |u| <= 1/16, with
atan(c) a double-double from a 9-entry select table.
"""

from __future__ import annotations

import decimal

from llvmlite import ir

from .vecmath_core import F, I64, Em, dd

_D = decimal.Context(prec=60)
_PI = decimal.Decimal("3.141592653589793238462643383279502884197169399375105820974944592307816")
_PIO2 = _D.divide(_PI, 2)
_P1 = float(_PIO2)
_P2 = float(_D.subtract(_PIO2, decimal.Decimal(_P1)))
_P3 = float(_D.subtract(_D.subtract(_PIO2, decimal.Decimal(_P1)), decimal.Decimal(_P2)))
PI = dd(_PI)
PIO2 = dd(_PIO2)
TWO_OVER_PI = float(_D.divide(2, _PI))
TRIG_LIMIT = 2.0 ** 30  # f64: Cody-Waite up to here (tested), Payne-Hanek beyond


def _fact(n: int) -> int:
    out = 1
    for k in range(2, n + 1):
        out *= k
    return out


def _datan(x: decimal.Decimal) -> decimal.Decimal:
    """atan by Euler's series, for the table (x in [0, 1])."""
    y = _D.divide(_D.multiply(x, x), _D.add(1, _D.multiply(x, x)))
    term = _D.divide(x, _D.add(1, _D.multiply(x, x)))
    total, n = decimal.Decimal(0), 0
    while term != 0 and n < 400:
        total = _D.add(total, term)
        n += 1
        term = _D.multiply(term, _D.divide(_D.multiply(2 * n, y), 2 * n + 1))
    return total


_SIN = [(-1) ** k / _fact(2 * k + 1) for k in range(1, 8)]  # r^3 .. r^15, as S(z)
_COS = [(-1) ** k / _fact(2 * k) for k in range(2, 9)]      # r^4 .. r^16, as C(z)
_ATAN = [(-1) ** k / (2 * k + 1) for k in range(1, 9)]      # u^3 .. u^17
_ATAN_TABLE = [dd(_datan(decimal.Decimal(k) / 8)) for k in range(9)]


def _reduce(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(q mod 4 as i64, r, rr) for finite x = q pi/2 + r + rr, |r| <= pi/4 (Cody-Waite,
    the remainder kept as a double-double so tan's quotient starts from < 0.5 ulp)."""
    q = e.rint(e.mul(x, e.c(TWO_OVER_PI)))
    t1 = e.fma(e.neg(q), e.c(_P1), x)  # exact
    ph = e.mul(q, e.c(_P2))
    pl = e.fma(q, e.c(_P2), e.neg(ph))
    t2, err = e.two_sum(t1, e.neg(ph))
    r, rr = e.two_sum(t2, e.sub(e.sub(err, pl), e.mul(q, e.c(_P3))))
    ok = e.cmp("<=", e.abs(r), e.c(0.8))  # false only beyond TRIG_LIMIT
    quad = e.to_int(e.sub(q, e.mul(e.c(4.0), e.floor(e.mul(q, e.c(0.25))))))
    return quad, e.clamp(r, -0.8, 0.8), e.sel(ok, rr, e.c(0.0))


# Payne-Hanek for f32 arguments (held in an f64): x = M 2**E with a 24-bit integer M and
# E <= 104, so x 2/pi mod 4 = (M * W(E) mod 2**96) 2**-94 where W(E) is the 96-bit window
# of 2/pi's bits starting at bit E - 1; the bits before the window only add multiples of
# 4. A 62-bit fraction survives the worst cancellation of any f32 (about 2**-30).
_E_MAX = 104
_TWO_OVER_PI_BITS = int(_D.divide(2 * 2 ** (_E_MAX + 94 + 8), _PI).to_integral_value(rounding=decimal.ROUND_FLOOR))
_WINDOWS = [(_TWO_OVER_PI_BITS >> (_E_MAX - k + 8)) % 2 ** 96 for k in range(_E_MAX + 1)]
_I128 = ir.IntType(128)


def _table(e: Em, name: str, values: list[int]) -> ir.GlobalVariable:
    g = e.module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(ir.IntType(64), len(values))
        g = ir.GlobalVariable(e.module, ty, name=name)
        g.initializer = ir.Constant(ty, values)
        g.global_constant = True
        g.linkage = "internal"
    return g


def _reduce_f32_big(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(q mod 4, r) for an f32 value x (in f64) with |x| >= 2**24; others give garbage."""
    bits = e.to_bits(x)
    big_e = e.b.sub(e.b.and_(e.b.lshr(bits, e.i(52)), e.i(0x7FF)), e.i(1023 + 23))
    big_e = e.b.select(e.b.icmp_signed("<", big_e, e.i(0)), e.i(0), big_e)
    big_e = e.b.select(e.b.icmp_signed(">", big_e, e.i(_E_MAX)), e.i(_E_MAX), big_e)
    m = e.b.lshr(e.b.or_(e.b.and_(bits, e.i((1 << 52) - 1)), e.i(1 << 52)), e.i(29))
    hi_tab = _table(e, "hologram.vecmath.two_over_pi_hi", [w >> 32 for w in _WINDOWS])
    lo_tab = _table(e, "hologram.vecmath.two_over_pi_lo", [w & 0xFFFFFFFF for w in _WINDOWS])
    zero = ir.Constant(ir.IntType(64), 0)
    w_hi = e.b.load(e.b.gep(hi_tab, [zero, big_e], inbounds=True))
    w_lo = e.b.load(e.b.gep(lo_tab, [zero, big_e], inbounds=True))
    m128 = e.b.zext(m, _I128)
    p = e.b.add(e.b.shl(e.b.mul(m128, e.b.zext(w_hi, _I128)), ir.Constant(_I128, 32)),
                e.b.mul(m128, e.b.zext(w_lo, _I128)))
    top = e.b.shl(p, ir.Constant(_I128, 32))  # the 96 bits at the top: 2 quadrant bits, then the fraction
    frac = e.b.shl(top, ir.Constant(_I128, 2))  # signed: the fraction rounded to [-1/2, 1/2)
    quad = e.b.trunc(e.b.lshr(top, ir.Constant(_I128, 126)), I64)
    quad = e.b.add(quad, e.b.zext(e.b.icmp_signed("<", frac, ir.Constant(_I128, 0)), I64))
    hi = e.b.trunc(e.b.ashr(frac, ir.Constant(_I128, 64)), I64)
    lo = e.b.trunc(frac, I64)
    d = e.fma(e.b.sitofp(hi, F), e.c(2.0 ** -64), e.mul(e.b.uitofp(lo, F), e.c(2.0 ** -128)))
    r = e.fma(d, e.c(PIO2[0]), e.mul(d, e.c(PIO2[1])))
    neg = e.signbit(x)  # the window gave |x| = q pi/2 + r, so x = -q pi/2 - r
    return e.b.and_(e.b.select(neg, e.b.neg(quad), quad), e.i(3)), e.sel(neg, e.neg(r), r)


# Payne-Hanek for f64 arguments above TRIG_LIMIT: x = M 2**e with a 53-bit integer M, and
# x 2/pi mod 4 = (M * W(s) mod 2**192) 2**-190 where W(s) is the 192-bit window of 2/pi's
# bits from bit s = e - 1 after the point (bits before it add multiples of 4 M). The
# window's truncation errs by under 2**-137 of a quadrant; the nearest a double comes to
# a multiple of pi/2 is about 2**-61, so a normalized 128-bit fraction keeps 67 bits or
# more. The table holds W(s) for s = -23 (|x| = 2**30) to 970 (the largest doubles).
_WIDE_BITS = 192
_S_MIN, _S_MAX = -23, 970
_TWO_OVER_PI_WIDE = None  # computed on first use: a few thousand bits of 2/pi


def _two_over_pi_bits(nbits: int) -> int:
    """floor(2/pi * 2**nbits), from Machin's formula in integers (exact to the last bit
    with 64 guard bits)."""
    guard = nbits + 64

    def arctan_inv(k: int) -> int:  # atan(1/k) * 2**guard
        total, term, n, sign = 0, (1 << guard) // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n, sign = n + 2, -sign
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)  # pi * 2**guard
    return (2 << (guard + nbits)) // pi


def _wide_windows() -> list[int]:
    global _TWO_OVER_PI_WIDE
    if _TWO_OVER_PI_WIDE is None:
        top = _S_MAX - 1 + _WIDE_BITS + 64
        bits = _two_over_pi_bits(top)
        _TWO_OVER_PI_WIDE = [(bits >> (top - (s - 1 + _WIDE_BITS))) % 2 ** _WIDE_BITS
                             for s in range(_S_MIN, _S_MAX + 1)]
    return _TWO_OVER_PI_WIDE


def _reduce_f64_big(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(q mod 4, r, rr) with x = q pi/2 + r + rr, |r| <= pi/4, for |x| > TRIG_LIMIT
    (finite); other arguments give garbage. Only i64 operations on 32-bit limbs (products
    of two limbs fit), so the loop vectorizer keeps the whole reduction in vector
    registers: an i128 product would be split per lane."""
    b = e.b
    m32 = e.i(0xFFFFFFFF)
    lo32 = lambda v: b.and_(v, m32)  # noqa: E731
    hi32 = lambda v: b.lshr(v, e.i(32))  # noqa: E731
    bits = e.to_bits(x)
    biased = b.and_(b.lshr(bits, e.i(52)), e.i(0x7FF))
    idx = b.sub(biased, e.i(1076 + _S_MIN))  # s - S_MIN, s = e - 1 = biased - 1076
    idx = b.select(b.icmp_signed("<", idx, e.i(0)), e.i(0), idx)
    idx = b.select(b.icmp_signed(">", idx, e.i(_S_MAX - _S_MIN)), e.i(_S_MAX - _S_MIN), idx)
    m = b.or_(b.and_(bits, e.i((1 << 52) - 1)), e.i(1 << 52))
    windows = _wide_windows()
    zero = ir.Constant(I64, 0)
    w: list[ir.Value] = []  # W's 32-bit limbs, least significant first
    for k in range(3):
        tab = _table(e, f"hologram.vecmath.two_over_pi_w{k}", [(v >> (64 * k)) & (2 ** 64 - 1) for v in windows])
        word = b.load(b.gep(tab, [zero, idx], inbounds=True))
        w += [lo32(word), hi32(word)]
    m0, m1 = lo32(m), hi32(m)
    p0 = [b.mul(m0, v) for v in w]  # < 2**64
    p1 = [b.mul(m1, v) for v in w]  # < 2**53
    r, carry = [], e.i(0)  # M W mod 2**192, in 32-bit limbs
    for k in range(6):
        col = lo32(p0[k])
        if k >= 1:
            col = b.add(b.add(col, hi32(p0[k - 1])), lo32(p1[k - 1]))
        if k >= 2:
            col = b.add(col, hi32(p1[k - 2]))
        t = b.add(col, carry)
        r.append(lo32(t))
        carry = hi32(t)
    quad = b.lshr(r[5], e.i(30))
    # the fraction (R 4 mod 2**192) as a signed number in [-1/2, 1/2): its magnitude
    f = [b.or_(lo32(b.shl(r[k], e.i(2))), b.lshr(r[k - 1], e.i(30))) if k else lo32(b.shl(r[0], e.i(2)))
         for k in range(6)]
    neg_frac = b.icmp_unsigned("!=", b.lshr(f[5], e.i(31)), e.i(0))
    g, carry = [], e.i(1)
    for k in range(6):  # two's complement negation
        t = b.add(b.xor(f[k], m32), carry)
        g.append(b.select(neg_frac, lo32(t), f[k]))
        carry = hi32(t)
    quad = b.add(quad, b.zext(neg_frac, I64))
    hi, lo = e.c(0.0), e.c(0.0)
    for k in range(6):  # exact terms, all >= 0 and rising: a double-double of the magnitude
        hi, err = e.two_sum(hi, e.mul(e.to_float(g[k]), e.c(2.0 ** (32 * k - 192))))
        lo = e.add(lo, err)
    a_hi, a_lo = e.fast_two_sum(hi, lo)
    # (a_hi + a_lo) pi/2 as a double-double
    rh = e.mul(a_hi, e.c(PIO2[0]))
    rl = e.add(e.fma(a_hi, e.c(PIO2[0]), e.neg(rh)), e.fma(a_hi, e.c(PIO2[1]), e.mul(a_lo, e.c(PIO2[0]))))
    r0, r1 = e.fast_two_sum(rh, rl)
    flip = b.xor(neg_frac, e.signbit(x))  # |x| = q pi/2 + r; a negative fraction or x flips r
    neg = e.signbit(x)
    quad = b.and_(b.select(neg, b.neg(quad), quad), e.i(3))
    return quad, e.sel(flip, e.neg(r0), r0), e.sel(flip, e.neg(r1), r1)


def _reduced(e: Em, x: ir.Value, f32: bool) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(q mod 4, sin r, cos r) for finite x; `f32`: x is an f32 value of any magnitude."""
    quad, r, rr = _reduce(e, x)
    if f32:
        big = e.cmp(">=", e.abs(x), e.c(2.0 ** 24))
        bq, br = _reduce_f32_big(e, e.sel(big, x, e.c(2.0 ** 24)))
        quad, r, rr = e.b.select(big, bq, quad), e.sel(big, br, r), e.sel(big, e.c(0.0), rr)
    else:
        big = e.cmp(">", e.abs(x), e.c(TRIG_LIMIT))
        bq, br, brr = _reduce_f64_big(e, e.sel(big, x, e.c(2.0 * TRIG_LIMIT)))
        quad, r, rr = e.b.select(big, bq, quad), e.sel(big, br, r), e.sel(big, brr, rr)
    # sin(r + rr) = sin r + rr cos r, cos(r + rr) = cos r - rr sin r, to first order
    z = e.mul(r, r)
    s = e.add(r, e.fma(e.mul(r, z), e.horner(z, _SIN), rr))
    hz = e.mul(e.c(0.5), z)
    w = e.sub(e.c(1.0), hz)
    tail = e.fma(e.mul(z, z), e.horner(z, _COS), e.fma(e.neg(r), rr, e.sub(e.sub(e.c(1.0), w), hz)))
    return quad, s, e.add(w, tail)


def _finite_or_zero(e: Em, x: ir.Value) -> ir.Value:
    return e.sel(e.isfinite(x), x, e.c(0.0))


def _sincos(e: Em, x: ir.Value, shift: int, f32: bool) -> ir.Value:
    quad, s, c = _reduced(e, _finite_or_zero(e, x), f32)
    quad = e.b.add(quad, e.i(shift))
    odd = e.b.icmp_signed("!=", e.b.and_(quad, e.i(1)), e.i(0))
    flip = e.b.icmp_signed("!=", e.b.and_(quad, e.i(2)), e.i(0))
    v = e.sel(odd, c, s)
    v = e.sel(flip, e.neg(v), v)
    return e.sel(e.isfinite(x), v, e.c(float("nan")))


def sin(e: Em, x: ir.Value, f32: bool = False) -> ir.Value:
    return e.sel(e.cmp("==", x, e.c(0.0)), x, _sincos(e, x, 0, f32))


def cos(e: Em, x: ir.Value, f32: bool = False) -> ir.Value:
    return _sincos(e, x, 1, f32)


def tan(e: Em, x: ir.Value, f32: bool = False) -> ir.Value:
    quad, s, c = _reduced(e, _finite_or_zero(e, x), f32)
    odd = e.b.icmp_signed("!=", e.b.and_(quad, e.i(1)), e.i(0))
    v = e.sel(odd, e.div(e.neg(c), s), e.div(s, c))
    v = e.sel(e.isfinite(x), v, e.c(float("nan")))
    return e.sel(e.cmp("==", x, e.c(0.0)), x, v)


def _atan01(e: Em, t: ir.Value) -> ir.Value:
    """atan(t) for t in [0, 1] (NaN-free)."""
    k = e.to_int(e.rint(e.mul(t, e.c(8.0))))
    c = e.mul(e.to_float(k), e.c(0.125))
    u = e.div(e.sub(t, c), e.fma(t, c, e.c(1.0)))  # t - c is exact (Sterbenz)
    z = e.mul(u, u)
    au = e.fma(e.mul(u, z), e.horner(z, _ATAN), u)
    hi, lo = e.c(0.0), e.c(0.0)
    for j, (h, l) in enumerate(_ATAN_TABLE[1:], start=1):
        hit = e.b.icmp_signed("==", k, e.i(j))
        hi, lo = e.sel(hit, e.c(h), hi), e.sel(hit, e.c(l), lo)
    return e.add(hi, e.add(lo, au))


def _atan_pos(e: Em, a: ir.Value) -> ir.Value:
    """atan(a) for a >= 0 or +inf (NaN-free)."""
    inv = e.cmp(">", a, e.c(1.0))
    r = _atan01(e, e.sel(inv, e.div(e.c(1.0), a), a))
    return e.sel(inv, e.sub(e.c(PIO2[0]), e.sub(r, e.c(PIO2[1]))), r)


def atan(e: Em, x: ir.Value) -> ir.Value:
    a = e.sel(e.isnan(x), e.c(0.0), e.abs(x))
    return e.sel(e.isnan(x), x, e.copysign(_atan_pos(e, a), x))


def asin(e: Em, x: ir.Value) -> ir.Value:
    # asin(a) = atan(a / sqrt(1 - a^2)); the FMA rounds 1 - a^2 once.
    a = e.abs(x)
    ok = e.cmp("<=", a, e.c(1.0))
    ac = e.sel(ok, a, e.c(0.0))
    w = e.div(ac, e.sqrt(e.fma(e.neg(ac), ac, e.c(1.0))))
    return e.sel(ok, e.copysign(_atan_pos(e, w), x), e.c(float("nan")))


def acos(e: Em, x: ir.Value) -> ir.Value:
    # acos(x) = 2 atan(sqrt((1 - x) / (1 + x))); 1 - x is exact near 1, 1 + x near -1.
    ok = e.cmp("<=", e.abs(x), e.c(1.0))
    xc = e.sel(ok, x, e.c(0.0))
    w = e.sqrt(e.div(e.sub(e.c(1.0), xc), e.add(e.c(1.0), xc)))
    return e.sel(ok, e.mul(e.c(2.0), _atan_pos(e, w)), e.c(float("nan")))


def atan2(e: Em, y: ir.Value, x: ir.Value) -> ir.Value:
    # atan(min/max) in [0, pi/4], then fold: swap -> pi/2 - r, x < 0 (sign bit) -> pi - r,
    # sign of y. 0/0 is taken as 0 and inf/inf as 1, which gives C99's signed-zero and
    # infinite cases by the same folds.
    ay, ax = e.abs(y), e.abs(x)
    swap = e.cmp(">", ay, ax)
    num, den = e.sel(swap, ax, ay), e.sel(swap, ay, ax)
    t = e.div(num, den)
    t = e.sel(e.cmp("==", den, e.c(0.0)), e.c(0.0), t)
    t = e.sel(e.band(e.isinf(ax), e.isinf(ay)), e.c(1.0), t)
    t = e.sel(e.isnan(t), e.c(0.0), t)
    r = _atan01(e, t)
    r = e.sel(swap, e.sub(e.c(PIO2[0]), e.sub(r, e.c(PIO2[1]))), r)
    r = e.sel(e.signbit(x), e.sub(e.c(PI[0]), e.sub(r, e.c(PI[1]))), r)
    r = e.copysign(r, y)
    return e.sel(e.bor(e.isnan(x), e.isnan(y)), e.c(float("nan")), r)
