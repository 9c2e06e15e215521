"""Straight-line f64 building blocks for the vectorizable math library.

Everything here emits branch-free LLVM IR (selects, never branches) using only
instructions and intrinsics that lower to machine instructions on any x86-64/AArch64
host: fma, fabs, floor, trunc, rint, sqrt, copysign, bitcasts and integer ops. No libm
call can appear, so the loop vectorizer widens a loop that uses these functions. (The
f32 trig reduction also loads from a small constant table, which becomes a gather.)

All approximations are computed in f64 (`F`); f32 and f16 arguments are widened, computed
in f64 and rounded once at the end (see docs/cpu-llvm-accuracy.md for why that is exact
enough).
"""

from __future__ import annotations

import decimal
import math

from llvmlite import ir

F = ir.DoubleType()
I64 = ir.IntType(64)

_D = decimal.Context(prec=60)


def dd(v: decimal.Decimal) -> tuple[float, float]:
    """A constant as a double-double hi + lo (hi correctly rounded)."""
    hi = float(v)
    return hi, float(_D.subtract(v, decimal.Decimal(hi)))


def short(v: decimal.Decimal, bits: int) -> tuple[float, float]:
    """hi with `bits` significant bits (so n * hi is exact for small integers n) + lo."""
    m, ex = math.frexp(float(v))
    hi = math.ldexp(math.floor(m * 2.0 ** bits), ex - bits)
    return hi, float(_D.subtract(v, decimal.Decimal(hi)))


_LN2 = _D.ln(decimal.Decimal(2))
_LN10 = _D.ln(decimal.Decimal(10))
LN2_HI, LN2_LO = short(_LN2, 32)
LN2 = float(_LN2)
LOG2E = float(_D.divide(1, _LN2))
INVLN2 = dd(_D.divide(1, _LN2))
INVLN10 = dd(_D.divide(1, _LN10))
LOG10_2_HI, LOG10_2_LO = short(_D.divide(_LN2, _LN10), 32)
TWO_THIRDS = dd(_D.divide(2, 3))


class Em:
    """A thin f64 vocabulary over an IRBuilder: every method appends instructions."""

    def __init__(self, b: ir.IRBuilder) -> None:
        self.b = b
        self.module = b.module

    # -- constants and intrinsics
    def c(self, v: float) -> ir.Constant:
        return ir.Constant(F, float(v))

    def i(self, v: int) -> ir.Constant:
        return ir.Constant(I64, int(v))

    def _intr(self, name: str, *args: ir.Value) -> ir.Value:
        # Declared by hand: llvmlite's declare_intrinsic only knows some signatures.
        full = f"{name}.f64"
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(F, [F] * len(args)), name=full)
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._intr("llvm.fma", a, x, y)

    def abs(self, x: ir.Value) -> ir.Value:
        return self._intr("llvm.fabs", x)

    def floor(self, x: ir.Value) -> ir.Value:
        return self._intr("llvm.floor", x)

    def trunc(self, x: ir.Value) -> ir.Value:
        return self._intr("llvm.trunc", x)

    def rint(self, x: ir.Value) -> ir.Value:
        return self._intr("llvm.rint", x)

    def sqrt(self, x: ir.Value) -> ir.Value:
        return self._intr("llvm.sqrt", x)

    def copysign(self, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return self._intr("llvm.copysign", mag, sign)

    # -- arithmetic (plain IEEE; no fast-math flags, so nothing is reassociated)
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    # -- comparisons and selection
    def cmp(self, op: str, a, b) -> ir.Value:
        return self.b.fcmp_ordered(op, a, b)

    def isnan(self, x) -> ir.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def isinf(self, x) -> ir.Value:
        return self.cmp("==", self.abs(x), self.c(float("inf")))

    def isfinite(self, x) -> ir.Value:
        return self.cmp("<", self.abs(x), self.c(float("inf")))

    def sel(self, cond, a, b) -> ir.Value:
        return self.b.select(cond, a, b)

    def band(self, *conds) -> ir.Value:
        out = conds[0]
        for c in conds[1:]:
            out = self.b.and_(out, c)
        return out

    def bor(self, *conds) -> ir.Value:
        out = conds[0]
        for c in conds[1:]:
            out = self.b.or_(out, c)
        return out

    def bnot(self, c) -> ir.Value:
        return self.b.not_(c)

    def signbit(self, x) -> ir.Value:
        return self.b.icmp_signed("<", self.to_bits(x), self.i(0))

    def clamp(self, x, lo: float, hi: float) -> ir.Value:
        """Clamp by ordered compares: NaN passes through unchanged."""
        x = self.sel(self.cmp("<", x, self.c(lo)), self.c(lo), x)
        return self.sel(self.cmp(">", x, self.c(hi)), self.c(hi), x)

    # -- bit-level
    def to_bits(self, x) -> ir.Value:
        return self.b.bitcast(x, I64)

    def from_bits(self, n) -> ir.Value:
        return self.b.bitcast(n, F)

    def to_int(self, x) -> ir.Value:
        """fptosi of a value the caller has made finite and in range (no poison)."""
        return self.b.fptosi(x, I64)

    def to_float(self, n) -> ir.Value:
        return self.b.sitofp(n, F)

    def pow2(self, n) -> ir.Value:
        """2**n as an f64 for an integer n in [-1022, 1023]: built from the exponent bits."""
        return self.from_bits(self.b.shl(self.b.add(n, self.i(1023)), self.i(52)))

    def scale(self, x, n, parts: int = 2) -> ir.Value:
        """x * 2**n for |n| <= 1022 * parts, in `parts` exact-power steps so the only
        rounding is the final one (into the subnormals or to inf)."""
        for left in range(parts, 1, -1):
            step = self.b.sdiv(n, self.i(left))
            x = self.mul(x, self.pow2(step))
            n = self.b.sub(n, step)
        return self.mul(x, self.pow2(n))

    def ilogb(self, x) -> tuple[ir.Value, ir.Value]:
        """(e, m) with |x| = m * 2**e, m in [1, 2), for finite nonzero x (subnormals too)."""
        tiny = self.cmp("<", self.abs(x), self.c(2.0 ** -1022))
        xs = self.sel(tiny, self.mul(x, self.c(2.0 ** 64)), x)
        bits = self.to_bits(xs)
        e = self.b.sub(self.b.and_(self.b.lshr(bits, self.i(52)), self.i(0x7FF)), self.i(1023))
        e = self.sel(tiny, self.b.sub(e, self.i(64)), e)
        m = self.from_bits(self.b.or_(self.b.and_(bits, self.i((1 << 52) - 1)), self.i(1023 << 52)))
        return e, m

    # -- polynomials and compensated sums
    def horner(self, x, coeffs: list[float]) -> ir.Value:
        """coeffs[0] + coeffs[1] x + ... by FMA Horner."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def two_sum(self, a, b) -> tuple[ir.Value, ir.Value]:
        """s + t == a + b exactly (Knuth), whatever the magnitudes."""
        s = self.add(a, b)
        bp = self.sub(s, a)
        ap = self.sub(s, bp)
        return s, self.add(self.sub(a, ap), self.sub(b, bp))

    def fast_two_sum(self, a, b) -> tuple[ir.Value, ir.Value]:
        """s + t == a + b exactly, when |a| >= |b| (Dekker)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))
