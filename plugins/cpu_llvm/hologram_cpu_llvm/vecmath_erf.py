"""erf and erfc in f64, branch-free.

erf(x) for |x| < 1 is x + x Q(x^2), Q a polynomial (one FMA rounds the sum). Everywhere
else both come from erfc(a) for a = |x|, written as exp(-a^2) g(a) where
g(a) = erfc(a) exp(a^2) is smooth and slowly varying: a g(a) is a polynomial in
a - 0.75 on [0.5, 1] and in 1/a on three pieces up to 27.5 (erfc underflows to 0
beyond 27.3), the piece's coefficients chosen by selects so the code stays straight-line.
exp(-a^2) must not lose the low bits of a^2 (an error of a^2 e relative grows to 750 e
near the underflow): with a^2 = hi + lo exactly (FMA), exp(-a^2) = 2^n (1 + m) (1 - lo)
where exp(-hi) = 2^n (1 + m) comes from the shared reduction of vecmath_exp; the factor
1 - lo is folded into m and the product into one FMA before the exact scale by 2^n.
Then erfc(x) = 2 - erfc(-x) for x <= -0.84375, 1 - erf(x) for |x| < 0.84375 (with 1 - x
as an exact pair), and erf(x) = +-(1 - erfc(|x|)) for |x| >= 1.

Coefficients: plugins/cpu_llvm/scripts/fit_erf.py (mpmath.chebyfit at 50 digits, rounded
to doubles; it prints the error of each table). Measured bounds in docs/cpu-llvm-accuracy.md.
"""

from __future__ import annotations

from llvmlite import ir

from .vecmath_core import Em
from .vecmath_exp import expm1_reduced

# erf(x)/x - 1 on z = x*x in [0, 1]: absolute error 1.08e-17
ERF_Q = [
    0.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252,
    0.005223977625442175, -0.0008548327023449497, 0.00012055332981694495, -1.4925650353787866e-05,
    1.6462114205798046e-06, -1.6365840648222765e-07, 1.4807117719731329e-08,
    -1.2289529419960295e-09, 9.412558594992829e-11, -6.639294901316118e-12, 4.117309460970657e-13,
    -1.746609279318069e-14]

# (center, low part of the constant term, coefficients) of a*erfc(a)*exp(a^2) in
# u = v - center, v = a on the first piece and 1/a on the others
ERFCX_PIECES = [
    # x in [0.5, 1]: relative error 1.29e-17
    (0.75, 1.5493543465291086e-17, [
        0.3802032377198586, 0.2309581315512983, -0.19475409299232166, 0.13358108505513747,
        -0.07974315509920456, 0.04286759599780736, -0.021180363040229983, 0.009750549443029364,
        -0.004223304276640562, 0.001733753314650335, -0.0006784490642780263, 0.0002542348814504876,
        -9.157501514708721e-05, 3.180613191739838e-05, -1.0680663859941079e-05,
        3.4756755076941763e-06, -1.0982471462637695e-06, 3.3744392594101176e-07,
        -1.0104558090232076e-07, 3.030842647122462e-08, -8.638562386214021e-09]),
    # x in [1, 2]: relative error 6.83e-18
    (0.75, 2.2405427137640072e-17, [
        0.46817959203854037, -0.16908097778547482, 0.019347872628690175, 0.040293199742531975,
        -0.050465735252147266, 0.037688720011266, -0.018116937855262402, 0.0005608110503725641,
        0.011128915210473087, -0.016227456442334403, 0.015771739275268242, -0.011588180814476403,
        0.005640025891725786, 0.0003726336497046273, -0.005213582220963439, 0.00815532513186202,
        -0.009030235100484764, 0.008322182900980643, -0.0059838258528661275, 0.000633621876656076,
        0.0033898654796065686]),
    # x in [2, 4]: relative error 2.13e-18
    (0.375, 3.194630111311165e-17, [
        0.530860349316975, -0.1515855295741559, -0.09203998771159042, 0.17726803412603195,
        -0.11628192691538146, -0.03780807551873516, 0.19624233325428372, -0.25568449601817994,
        0.13611580517080926, 0.1702846835722452, -0.5550809021118924, 0.7810663257726871,
        -0.5348838598321909, -0.42707313186799806, 2.0393411600518263, -3.6533894468516057,
        3.8886202132113232, -0.8938262562788278, -7.139811094288048, 21.41211382711469,
        -29.803033857317892]),
    # x in [4, 27.5]: relative error 7.11e-19
    (0.140625, 1.3545520561317945e-17, [
        0.5587688652020621, -0.07495228694130146, -0.23739071037157322, 0.18876771227541392,
        0.18915955252834898, -0.4873347872612402, 0.08310389800913731, 1.1201012057827873,
        -1.6735978420548503, -1.1969551105121838, 7.7298409344949, -8.32449357918503,
        -17.044481952980014, 69.25827775327264, -59.11466651978234, -220.70998039034362,
        798.185038722838, -567.654669601496, -3145.870730788213, 8559.310847750694,
        -3315.903700677924]),
]
_BOUNDS = (1.0, 2.0, 4.0)  # where the pieces meet, in a
_SMALL = 0.84375  # erfc(x) below: 1 - erf(x), with erf(x)'s error at most 0.2 ulp of erfc(x)


def _erf_q(e: Em, x: ir.Value) -> ir.Value:
    """Q(x^2), with erf(x) = x + x Q(x^2) for |x| < 1. The rounding of x^2 would cost up
    to 0.4 ulp of erfc near 0.84: its low part enters through Q's slope."""
    hi = e.mul(x, x)
    lo = e.fma(x, x, e.neg(hi))
    slope = e.horner(hi, [k * c for k, c in enumerate(ERF_Q)][1:])
    return e.fma(slope, lo, e.horner(hi, ERF_Q))


def _erfc_big(e: Em, a: ir.Value) -> ir.Value:
    """erfc(a) for a in [0.5, 28] (finite, clamped by the caller; 0 from 27.3 on)."""
    first = e.cmp("<", a, e.c(_BOUNDS[0]))
    t = e.div(e.c(1.0), a)
    piece = [first] + [e.cmp("<", a, e.c(b)) for b in _BOUNDS[1:]]

    def pick(values: list[float]) -> ir.Value:
        # piece 0 if a < 1, else 1 if a < 2, else 2 if a < 4, else 3
        out = e.c(values[3])
        for k in (2, 1, 0):
            out = e.sel(piece[k], e.c(values[k]), out)
        return out

    u = e.sub(e.sel(first, a, t), pick([c for c, _, _ in ERFCX_PIECES]))
    degree = len(ERFCX_PIECES[0][2])
    acc = pick([coeffs[degree - 1] for _, _, coeffs in ERFCX_PIECES])
    for k in range(degree - 2, 0, -1):
        acc = e.fma(acc, u, pick([coeffs[k] for _, _, coeffs in ERFCX_PIECES]))
    # the constant term as a pair: its low part joins the small rest, one rounding adds its high part
    rest = e.fma(acc, u, pick([lo for _, lo, _ in ERFCX_PIECES]))
    acc = e.add(rest, pick([coeffs[0] for _, _, coeffs in ERFCX_PIECES]))
    g = e.div(acc, a)  # erfc(a) exp(a^2)
    hi = e.mul(a, a)
    lo = e.fma(a, a, e.neg(hi))  # a^2 = hi + lo exactly
    n, m = expm1_reduced(e, e.neg(hi))  # exp(-hi) = 2^n (1 + m)
    m = e.fma(e.neg(lo), e.add(e.c(1.0), m), m)  # exp(-hi - lo) = 2^n (1 + m) (1 - lo), to far below an ulp
    return e.scale(e.fma(m, g, g), n)


def erf(e: Em, x: ir.Value) -> ir.Value:
    a = e.sel(e.isnan(x), e.c(0), e.abs(x))
    xs = e.sel(e.cmp("<", a, e.c(1.0)), x, e.c(0))
    small = e.fma(xs, _erf_q(e, xs), xs)  # keeps -0.0 and rounds tiny x once
    big = e.copysign(e.sub(e.c(1.0), _erfc_big(e, e.clamp(a, 1.0, 6.0))), x)
    res = e.sel(e.cmp("<", a, e.c(1.0)), small, big)
    return e.sel(e.isnan(x), x, res)


def erfc(e: Em, x: ir.Value) -> ir.Value:
    a = e.sel(e.isnan(x), e.c(0), e.abs(x))
    xs = e.sel(e.cmp("<", a, e.c(_SMALL)), x, e.c(0))
    one_minus_x, err = e.two_sum(e.c(1.0), e.neg(xs))  # 1 - x exactly, as a pair
    small = e.add(one_minus_x, e.fma(e.neg(xs), _erf_q(e, xs), err))  # the small parts first: one rounding
    big = _erfc_big(e, e.clamp(a, _SMALL, 28.0))
    big = e.sel(e.signbit(x), e.sub(e.c(2.0), big), big)
    res = e.sel(e.cmp("<", a, e.c(_SMALL)), small, big)
    return e.sel(e.isnan(x), x, res)
