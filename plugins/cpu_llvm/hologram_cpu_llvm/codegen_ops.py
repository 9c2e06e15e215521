"""Per-opcode emission: the value-computing Atlas ISA opcodes as LLVM IR.

`VALUE_OPS[op](b, t, args)` emits `op.t` on SSA values already converted to the operand
types (`SEL`'s predicate is i1) and returns the result (type `t`, or i1 for predicates).
Everything here is branch-free selects and intrinsics, so a lane loop built from it
stays vectorizable. Semantics are the interpreter's (hologram_interp/semantics.py):

- integers wrap; DIV/REM are floor division and numpy's remainder, 0 for a zero divisor,
  and `MIN / -1` gives `MIN` (remainder 0) instead of LLVM's undefined behaviour;
- f16 computes in f32 and rounds back after every operation. For + - * / sqrt that is
  exactly the correctly rounded f16 result (f32 has more than 2*11 + 2 bits); it is what
  numpy does for every other function too. FMA is the exception, handled separately;
- MIN/MAX propagate NaN, and for operands that compare equal return the second (numpy's
  `minimum`: `a < b or isnan(a) ? a : b`), which fixes the sign of zero; numpy's f16
  loops use `<=`, so there the first wins.

The emitters that are the same on every target are the SDK's (hologram.backend.llvm.ops,
shared with cuda); this module wraps the float ones in `_widen` for f16, and has what is
this backend's: libm, `frem`, the f16 FMA, and the `.reassociate` forms.
"""

from __future__ import annotations

import math

from llvmlite import ir

from hologram.backend import DType
from hologram.backend.llvm import ops
from hologram.backend.llvm.ops import Emit

from .codegen_math import FUNCTIONS as MATH_FUNCTIONS, math_call
from .codegen_types import DOUBLE, FLOAT, HALF, I64, double_to_half, intrinsic


def _widen(fn: Emit) -> Emit:
    """Run a float emitter on f16 in f32, rounding the result back to half once."""
    def emit(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
        if t is not DType.F16:
            return fn(b, t, args)
        wide = [b.fpext(a, FLOAT) if a.type == HALF else a for a in args]
        out = fn(b, DType.F32, wide)
        return b.fptrunc(out, HALF) if out.type == FLOAT else out
    return emit


# -------------------------------------------------------------------- MAD / FMA
def _mad(b, t, args):
    a, c, d = args
    return VALUE_OPS["ADD"](b, t, [VALUE_OPS["MUL"](b, t, [a, c]), d])


def _fma(b, t, args):
    if not t.is_float:
        return _mad(b, t, args)
    if t is not DType.F16:
        return intrinsic(b, "fma", args[0].type, list(args))
    # In f64, a*b of two halves is exact, so fma64 rounds once; its error (TwoSum, exact)
    # tells whether that rounding was inexact, and double_to_half's round-to-odd needs
    # only that: fold the error's sign into the sticky bit by nudging toward it.
    a, c, d = (b.fpext(x, DOUBLE) for x in args)
    p = b.fmul(a, c)
    s = b.fadd(p, d)
    bp = b.fsub(s, d)
    err = b.fadd(b.fsub(p, bp), b.fsub(d, b.fsub(s, bp)))
    finite = b.fcmp_ordered("<", intrinsic(b, "fabs", DOUBLE, [s]), ir.Constant(DOUBLE, math.inf))
    inexact = b.and_(finite, b.fcmp_ordered("!=", err, ir.Constant(DOUBLE, 0.0)))
    # s +/- one f64 ulp toward the exact value keeps every half rounding decision intact
    # (s is a double, the halves' midpoints are too) except exact ties, which it breaks
    # the right way.
    bits = b.bitcast(s, I64)
    toward_zero = b.xor(b.fcmp_ordered("<", err, ir.Constant(DOUBLE, 0.0)),
                        b.fcmp_ordered("<", s, ir.Constant(DOUBLE, 0.0)))
    step = b.select(toward_zero, ir.Constant(I64, -1), ir.Constant(I64, 1))
    nudged = b.bitcast(b.add(bits, step), DOUBLE)
    nonzero = b.fcmp_ordered("!=", s, ir.Constant(DOUBLE, 0.0))
    return double_to_half(b, b.select(b.and_(inexact, nonzero), nudged, s))


# ------------------------------------------------------------------ float math
def _libm(name: str) -> Emit:
    @_widen
    def emit(b, t, args):
        return math_call(b, name, list(args), t)
    return emit


def _rsqrt(b, t, args):
    """1 / sqrt(x) with two roundings (docs/isa.md): an f16 square root is rounded to
    half before the division, as `_widen`'s one rounding at the end would not."""
    x = args[0]
    if t is DType.F16:
        root = b.fpext(b.fptrunc(intrinsic(b, "sqrt", FLOAT, [b.fpext(x, FLOAT)]), HALF), FLOAT)
        return b.fptrunc(b.fdiv(ir.Constant(FLOAT, 1.0), root), HALF)
    return ops.rsqrt(b, t, args)


def _frem(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> ir.Value:
    return b.frem(a, d)


def compare(b: ir.IRBuilder, mod: str, t: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """SET.mod.t: IEEE comparisons (NaN is unordered: only `ne` holds); f16 in f32."""
    if t is DType.F16:  # exact in float
        x, y = b.fpext(x, FLOAT), b.fpext(y, FLOAT)
    return ops.compare(b, mod, t, x, y)


VALUE_OPS: dict[str, Emit] = {
    **{op: _libm(op) for op in sorted(MATH_FUNCTIONS)},  # the entries below replace some (FMOD, SIGMOID)
    **ops.common_ops(), **ops.atlas_ops(soft_half=True),
    "ADD": _widen(ops.arith("add", "fadd")), "SUB": _widen(ops.arith("sub", "fsub")),
    "MUL": _widen(ops.arith("mul", "fmul")),
    "DIV": _widen(ops.div), "REM": _widen(ops.rem(_frem)), "MIN": ops.minmax(True), "MAX": ops.minmax(False),
    "MAD": _mad, "FMA": _fma, "ABS": _widen(ops.abs_), "NEG": _widen(ops.neg),
    "SQRT": _widen(ops.float1("sqrt")), "RSQRT": _rsqrt,
    "SIGMOID": _widen(ops.sigmoid(lambda b, t, x: math_call(b, "EXP", [x], t))),
    "FLOOR": _widen(ops.float1("floor")), "CEIL": _widen(ops.float1("ceil")), "TRUNC": _widen(ops.float1("trunc")),
    "RINT": _widen(ops.float1("roundeven")),
    "COPYSIGN": _widen(ops.copysign),
    "FMOD": _widen(lambda b, t, args: _frem(b, t, *args)),
}


def _reassoc(float_op: str) -> Emit:
    return lambda b, t, args: getattr(b, float_op)(*args, flags=("reassoc",))


def _ieee_minmax(name: str) -> Emit:
    # NaN-propagating like the select form; only a tie of -0.0 and +0.0 differs (-0.0 <
    # +0.0 here), which the licence allows. The loop vectorizer turns a loop-carried
    # llvm.maximum into vector partials; it cannot do that with the select form.
    return lambda b, t, args: intrinsic(b, name, args[0].type, list(args))


# What a program with `.reassociate` (docs/isa.md, "Program flags") computes differently,
# for f32/f64 operands: + - * may be reassociated, and MIN/MAX ties of zeros go either way.
REASSOCIATED_OPS: dict[str, Emit] = {
    "ADD": _reassoc("fadd"), "SUB": _reassoc("fsub"), "MUL": _reassoc("fmul"),
    "MIN": _ieee_minmax("minimum"), "MAX": _ieee_minmax("maximum"),
}
