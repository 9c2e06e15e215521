"""The logarithm family in f64: log log2 log10 log1p asinh acosh atanh pow.

x = 2**k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f), and
log(m) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R(s^2))) (fdlibm's arrangement, so the
large terms are exact), R the atanh series truncated at s^24 (|s| <= 0.1716: the first
dropped term is below 2**-60 relative). pow needs log(x) to ~2**-64 relative, so its
log keeps 2s and (2/3)s^3 as double-doubles.
"""

from __future__ import annotations

from llvmlite import ir

from .vecmath_core import INVLN2, INVLN10, LN2_HI, LN2_LO, LOG2E, LOG10_2_HI, LOG10_2_LO, TWO_THIRDS, Em
from .vecmath_exp import EXPM1_TAIL

_SQRT2 = 1.4142135623730951
# R(z) / z = 2/3 + 2/5 z + 2/7 z^2 + ...  (z = s^2)
_ATANH = [2.0 / (2 * i + 1) for i in range(1, 13)]
_INF = float("inf")
_NAN = float("nan")


def _split(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(k as f64, m) with x = 2**k m, m in [sqrt(1/2), sqrt(2)); x finite, > 0."""
    k, m = e.ilogb(x)
    hi = e.cmp(">", m, e.c(_SQRT2))
    m = e.sel(hi, e.mul(m, e.c(0.5)), m)
    k = e.b.select(hi, e.b.add(k, e.i(1)), k)
    return e.to_float(k), m


def _log1p_f(e: Em, f: ir.Value) -> ir.Value:
    """log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1], f exact."""
    s = e.div(f, e.add(e.c(2.0), f))
    z = e.mul(s, s)
    r = e.mul(z, e.horner(z, _ATANH))
    hfsq = e.mul(e.c(0.5), e.mul(f, f))
    return e.sub(f, e.sub(hfsq, e.mul(s, e.add(hfsq, r))))


def _log_specials(e: Em, x: ir.Value, res: ir.Value) -> ir.Value:
    """C99 log specials: NaN, x < 0 -> NaN, +-0 -> -inf, +inf -> inf."""
    res = e.sel(e.cmp("==", x, e.c(0)), e.c(-_INF), res)
    res = e.sel(e.cmp("==", x, e.c(_INF)), x, res)
    return e.sel(e.b.fcmp_unordered("<", x, e.c(0)), e.c(_NAN), res)


def _sanitized(e: Em, x: ir.Value) -> ir.Value:
    return e.sel(e.band(e.cmp(">", x, e.c(0)), e.isfinite(x)), x, e.c(1.0))


def _log_base(e: Em, x: ir.Value, c_hi: float, c_lo: float, scale: tuple[float, float] | None) -> ir.Value:
    k, m = _split(e, _sanitized(e, x))
    lm = _log1p_f(e, e.sub(m, e.c(1.0)))
    if scale is not None:  # log_b(m) = log(m) * (1/ln b), the constant as hi + lo
        lm = e.fma(lm, e.c(scale[0]), e.mul(lm, e.c(scale[1])))
    res = e.fma(k, e.c(c_hi), e.fma(k, e.c(c_lo), lm))
    return _log_specials(e, x, res)


def log(e: Em, x: ir.Value) -> ir.Value:
    return _log_base(e, x, LN2_HI, LN2_LO, None)


def log2(e: Em, x: ir.Value) -> ir.Value:
    return _log_base(e, x, 1.0, 0.0, INVLN2)


def log10(e: Em, x: ir.Value) -> ir.Value:
    return _log_base(e, x, LOG10_2_HI, LOG10_2_LO, INVLN10)


def log1p(e: Em, x: ir.Value) -> ir.Value:
    # u = 1 + x rounded, c the rounding error (2Sum); log1p(x) = log(u) + c/u.
    xs = e.sel(e.band(e.cmp(">", x, e.c(-1.0)), e.isfinite(x)), x, e.c(0.0))
    u, c = e.two_sum(e.c(1.0), xs)
    k, m = _split(e, u)
    lm = e.add(_log1p_f(e, e.sub(m, e.c(1.0))), e.div(c, u))
    res = e.fma(k, e.c(LN2_HI), e.fma(k, e.c(LN2_LO), lm))
    res = e.sel(e.cmp("==", x, e.c(-1.0)), e.c(-_INF), res)
    res = e.sel(e.cmp("==", x, e.c(_INF)), x, res)
    res = e.sel(e.b.fcmp_unordered("<", x, e.c(-1.0)), e.c(_NAN), res)
    return e.sel(e.cmp("==", x, e.c(0)), x, res)  # keeps -0.0


def asinh(e: Em, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    big = e.cmp(">", a, e.c(2.0 ** 28))  # sqrt(x^2 + 1) == |x| to double precision
    ac = e.sel(big, e.c(1.0), a)
    aa = e.mul(ac, ac)
    small = log1p(e, e.add(ac, e.div(aa, e.add(e.c(1.0), e.sqrt(e.add(e.c(1.0), aa))))))
    large = e.add(log(e, e.sel(big, a, e.c(1.0))), e.c(LN2_HI + LN2_LO))
    res = e.copysign(e.sel(big, large, small), x)
    return e.sel(e.bor(e.isnan(x), e.cmp("==", x, e.c(0)), e.isinf(x)), x, res)


def acosh(e: Em, x: ir.Value) -> ir.Value:
    big = e.cmp(">", x, e.c(2.0 ** 28))
    t = e.sub(e.sel(e.band(e.cmp(">=", x, e.c(1.0)), e.bnot(big)), x, e.c(1.0)), e.c(1.0))  # exact near 1
    small = log1p(e, e.add(t, e.sqrt(e.fma(t, t, e.add(t, t)))))
    large = e.add(log(e, e.sel(big, x, e.c(1.0))), e.c(LN2_HI + LN2_LO))
    res = e.sel(big, large, small)
    res = e.sel(e.cmp("==", x, e.c(_INF)), x, res)
    return e.sel(e.b.fcmp_unordered("<", x, e.c(1.0)), e.c(_NAN), res)


def atanh(e: Em, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    ac = e.sel(e.cmp("<", a, e.c(1.0)), a, e.c(0.0))
    t = e.add(ac, ac)
    d = e.sub(e.c(1.0), ac)  # exact for a >= 1/2
    arg = e.sel(e.cmp("<", ac, e.c(0.5)), e.add(t, e.div(e.mul(t, ac), d)), e.div(t, d))
    res = e.mul(e.c(0.5), log1p(e, arg))
    res = e.sel(e.cmp("==", a, e.c(1.0)), e.c(_INF), res)
    res = e.copysign(res, x)
    res = e.sel(e.b.fcmp_unordered(">", a, e.c(1.0)), e.c(_NAN), res)
    return e.sel(e.cmp("==", x, e.c(0)), x, res)


def _log_dd(e: Em, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """log(x) as hi + lo with ~2**-64 relative error, for finite x > 0."""
    k, m = _split(e, x)
    f = e.sub(m, e.c(1.0))
    dh, dl = e.fast_two_sum(e.c(2.0), f)
    s = e.div(f, dh)
    sl = e.div(e.sub(e.fma(e.neg(s), dh, f), e.mul(s, dl)), dh)
    zh = e.mul(s, s)
    zl = e.fma(s, s, e.neg(zh))
    s3h = e.mul(zh, s)
    s3l = e.add(e.fma(zh, s, e.neg(s3h)), e.fma(zl, s, e.mul(e.mul(e.c(3.0), zh), sl)))
    t3h = e.mul(s3h, e.c(TWO_THIRDS[0]))
    t3l = e.add(e.fma(s3h, e.c(TWO_THIRDS[0]), e.neg(t3h)),
                e.fma(s3l, e.c(TWO_THIRDS[0]), e.mul(s3h, e.c(TWO_THIRDS[1]))))
    rest = e.mul(e.mul(s3h, zh), e.horner(zh, _ATANH[1:]))  # (2/5) s^5 + ...
    h, l1 = e.two_sum(e.mul(k, e.c(LN2_HI)), e.add(s, s))
    h, l2 = e.two_sum(h, t3h)
    lo = e.add(e.add(l1, l2), e.add(e.add(e.add(sl, sl), t3l), e.fma(k, e.c(LN2_LO), rest)))
    return e.fast_two_sum(h, lo)




def pow(e: Em, x: ir.Value, y: ir.Value) -> ir.Value:
    """C pow: exp(y log|x|) with log and the product as double-doubles, plus C99's
    table of special cases (applied last, by selects, in precedence order)."""
    ax = e.abs(x)
    regular = e.band(e.isfinite(ax), e.cmp(">", ax, e.c(0)), e.isfinite(y))
    axs = e.sel(regular, ax, e.c(1.0))
    ys = e.sel(regular, y, e.c(0.0))
    lh, ll = _log_dd(e, axs)
    ph = e.mul(ys, lh)
    pl = e.fma(ys, ll, e.fma(ys, lh, e.neg(ph)))
    inrange = e.cmp("<", e.abs(ph), e.c(1100.0))
    ph = e.clamp(ph, -1100.0, 1100.0)
    pl = e.sel(inrange, pl, e.c(0.0))
    nf = e.rint(e.mul(ph, e.c(LOG2E)))
    r = e.fma(e.neg(nf), e.c(LN2_HI), ph)
    r = e.add(e.fma(e.neg(nf), e.c(LN2_LO), r), pl)
    m = e.fma(e.mul(r, r), e.horner(r, EXPM1_TAIL), r)
    mag = e.scale(e.add(e.c(1.0), m), e.to_int(nf))

    ay = e.abs(y)
    yint = e.cmp("==", e.trunc(y), y)  # false for NaN and inf
    half = e.mul(y, e.c(0.5))
    yodd = e.band(yint, e.cmp("!=", e.trunc(half), half))
    neg_y = e.cmp("<", y, e.c(0))
    inf, zero = e.c(_INF), e.c(0.0)
    mag = e.sel(e.cmp("==", ax, e.c(0)), e.sel(neg_y, inf, zero), mag)
    mag = e.sel(e.isinf(ax), e.sel(neg_y, zero, inf), mag)
    y_inf = e.cmp("==", ay, inf)
    inf_case = e.sel(e.cmp("==", ax, e.c(1.0)), e.c(1.0),
                     e.sel(e.b.icmp_unsigned("==", e.cmp("<", ax, e.c(1.0)), neg_y), inf, zero))
    mag = e.sel(y_inf, inf_case, mag)
    res = e.sel(e.band(e.signbit(x), yodd), e.neg(mag), mag)
    negx_frac = e.band(e.cmp("<", x, zero), e.isfinite(x), e.bnot(yint), e.isfinite(y))
    res = e.sel(e.bor(negx_frac, e.isnan(x), e.isnan(y)), e.c(_NAN), res)
    return e.sel(e.bor(e.cmp("==", y, zero), e.cmp("==", x, e.c(1.0))), e.c(1.0), res)
