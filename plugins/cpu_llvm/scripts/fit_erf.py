"""Fit the polynomials of vecmath_erf.py (a development tool: needs mpmath, not shipped).

    python plugins/cpu_llvm/scripts/fit_erf.py

prints the coefficient tables as Python source, and for each the largest error of the
polynomial with its coefficients rounded to doubles (evaluated exactly, at 50 digits)
relative to the function it approximates, over 4001 points of its interval:

- ERF_Q: erf(x)/x - 1 as a polynomial in z = x*x on [0, 1] (absolute error);
- ERFCX_PIECES: x * erfc(x) * exp(x*x), one polynomial per piece, in u = v - center
  where v = x on [0.5, 1] and v = 1/x on [1/2, 1], [1/4, 1/2], [1/27.5, 1/4]; the
  constant term is a pair of doubles (its rounding alone would cost half an ulp).
"""

import mpmath as mp

mp.mp.dps = 50


def _fit(f, lo, hi, center, n):
    """(c0's low part, coefficients constant term first as Em.horner takes them, error)."""
    poly = mp.chebyfit(lambda u: f(u + center), [lo - center, hi - center], n)
    coeffs = [float(c) for c in reversed(poly)]
    c0_lo = float(poly[-1] - mp.mpf(coeffs[0]))
    worst = mp.mpf(0)
    for k in range(4001):
        v = lo + (hi - lo) * k / 4000
        u = v - center
        approx = c0_lo + mp.fsum(mp.mpf(c) * u ** j for j, c in enumerate(coeffs))
        worst = max(worst, abs(approx - f(v)) / max(abs(f(v)), mp.mpf(1) if f is _erf_q else 0))
    return c0_lo, coeffs, worst


def _erf_q(z):
    if z == 0:
        return 2 / mp.sqrt(mp.pi) - 1
    x = mp.sqrt(z)
    return mp.erf(x) / x - 1


def _h_of_x(x):
    return x * mp.erfc(x) * mp.exp(x * x)


def _h_of_t(t):
    return _h_of_x(1 / t)


PIECES = [  # (name, function of v, lo, hi, center)
    ("x in [0.5, 1]", _h_of_x, mp.mpf(0.5), mp.mpf(1), 0.75),
    ("x in [1, 2]", _h_of_t, mp.mpf(0.5), mp.mpf(1), 0.75),
    ("x in [2, 4]", _h_of_t, mp.mpf(0.25), mp.mpf(0.5), 0.375),
    ("x in [4, 27.5]", _h_of_t, 1 / mp.mpf(27.5), mp.mpf(0.25), 0.140625),
]


def main() -> None:
    _, coeffs, worst = _fit(_erf_q, mp.mpf(0), mp.mpf(1), 0.0, 16)
    print(f"# erf(x)/x - 1 on z = x*x in [0, 1]: absolute error {mp.nstr(worst, 3)}")
    print(f"ERF_Q = {coeffs!r}")
    print("ERFCX_PIECES = [")
    for name, f, lo, hi, center in PIECES:
        c0_lo, coeffs, worst = _fit(f, lo, hi, center, 21)
        print(f"    # {name}: relative error {mp.nstr(worst, 3)}")
        print(f"    ({center!r}, {c0_lo!r}, {coeffs!r}),")
    print("]")


if __name__ == "__main__":
    main()
