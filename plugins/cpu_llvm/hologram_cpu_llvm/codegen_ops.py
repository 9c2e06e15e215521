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
"""

from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from hologram.backend import DType, atlas

from .codegen_math import FUNCTIONS as MATH_FUNCTIONS, math_call
from .codegen_types import DOUBLE, FLOAT, HALF, I1, I64, convert, double_to_half, intrinsic

Emit = Callable[[ir.IRBuilder, DType, list[ir.Value]], ir.Value]


def _widen(fn: Emit) -> Emit:
    """Run a float emitter on f16 in f32, rounding the result back to half once."""
    def emit(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
        if t is not DType.F16:
            return fn(b, t, args)
        wide = [b.fpext(a, FLOAT) if a.type == HALF else a for a in args]
        out = fn(b, DType.F32, wide)
        return b.fptrunc(out, HALF) if out.type == FLOAT else out
    return emit


def _arith(int_op: str, float_op: str) -> Emit:
    @_widen
    def emit(b, t, args):
        return getattr(b, float_op if t.is_float else int_op)(*args)
    return emit


def _c(v: ir.Value, x) -> ir.Constant:
    return ir.Constant(v.type, x)


# ------------------------------------------------------------------- division
def _int_divmod(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Floor quotient and remainder with the sign of the divisor; (0, 0) for d == 0."""
    zero = _c(d, 0)
    is_zero = b.icmp_unsigned("==", d, zero)
    if not t.is_signed:
        safe = b.select(is_zero, _c(d, 1), d)
        return b.select(is_zero, zero, b.udiv(a, safe)), b.select(is_zero, zero, b.urem(a, safe))
    # d == -1 is done as negation: sdiv(MIN, -1) is undefined, the answer wraps to MIN.
    minus1 = b.icmp_signed("==", d, _c(d, -1))
    trivial = b.or_(is_zero, minus1)
    safe = b.select(trivial, _c(d, 1), d)
    q, r = b.sdiv(a, safe), b.srem(a, safe)
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, d), zero))
    q = b.select(adjust, b.sub(q, _c(q, 1)), q)
    r = b.select(adjust, b.add(r, d), r)
    q = b.select(is_zero, zero, b.select(minus1, b.neg(a), q))
    return q, b.select(trivial, zero, r)


def _float_rem(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> ir.Value:
    """numpy's remainder: fmod, moved into the divisor's sign; a zero takes its sign."""
    mod = b.frem(a, d)
    zero = _c(mod, 0.0)
    differ = b.xor(b.fcmp_ordered("<", d, zero), b.fcmp_ordered("<", mod, zero))
    nonzero = b.fcmp_unordered("!=", mod, zero)  # NaN stays NaN through either arm
    fixed = b.select(b.and_(nonzero, differ), b.fadd(mod, d), mod)
    signed_zero = intrinsic(b, "copysign", mod.type, [zero, d])
    return b.select(nonzero, fixed, signed_zero)


@_widen
def _div(b, t, args):
    return b.fdiv(*args) if t.is_float else _int_divmod(b, t, *args)[0]


@_widen
def _rem(b, t, args):
    return _float_rem(b, t, *args) if t.is_float else _int_divmod(b, t, *args)[1]


# ---------------------------------------------------------------- min / max / abs
def _minmax(less: bool) -> Emit:
    def emit(b, t, args):
        x, y = args
        if t.is_float:
            # numpy's half loops compare with <= / >=, so equal f16 operands give the
            # first one; the f32/f64 loops give the second.
            cmp = ("<" if less else ">") + ("=" if t is DType.F16 else "")
            pick = b.fcmp_ordered(cmp, x, y)
            pick = b.or_(pick, b.fcmp_unordered("uno", x, x))
        elif t.is_signed:
            pick = b.icmp_signed("<" if less else ">", x, y)
        else:
            pick = b.icmp_unsigned("<" if less else ">", x, y)
        return b.select(pick, x, y)
    return emit


@_widen
def _abs(b, t, args):
    (x,) = args
    if t.is_float:
        return intrinsic(b, "fabs", x.type, [x])
    if t.is_unsigned:
        return x
    return b.select(b.icmp_signed("<", x, _c(x, 0)), b.neg(x), x)


@_widen
def _neg(b, t, args):
    return b.fneg(args[0]) if t.is_float else b.neg(args[0])


def _not(b, t, args):
    (x,) = args
    return b.xor(x, ir.Constant(x.type, 1 if t is DType.BOOL else -1))


def _logic(op: str) -> Emit:
    return lambda b, t, args: getattr(b, op)(*args)


def _shift(b: ir.IRBuilder, t: DType, args: list[ir.Value], left: bool) -> ir.Value:
    x, s = args
    s = b.and_(s, _c(s, t.bits - 1))
    if left:
        return b.shl(x, s)
    return b.ashr(x, s) if t.is_signed else b.lshr(x, s)


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


def _sel(b, t, args):
    return b.select(*args)


# ------------------------------------------------------------------ float math
def _float1(intrinsic_name: str) -> Emit:
    @_widen
    def emit(b, t, args):
        return intrinsic(b, intrinsic_name, args[0].type, list(args))
    return emit


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
    return b.fdiv(_c(x, 1.0), intrinsic(b, "sqrt", x.type, [x]))


@_widen
def _sigmoid(b, t, args):
    # exp of a non-positive argument only, so it never overflows (as the interpreter).
    x = args[0]
    one = _c(x, 1.0)
    e = math_call(b, "EXP", [b.fneg(intrinsic(b, "fabs", x.type, [x]))], t)
    nonneg = b.fcmp_ordered(">=", x, _c(x, 0.0))
    return b.select(nonneg, b.fdiv(one, b.fadd(one, e)), b.fdiv(e, b.fadd(one, e)))


@_widen
def _fmod(b, t, args):
    return b.frem(*args)


# ------------------------------------------------------------------------- Atlas
def table(b: ir.IRBuilder, name: str, values: list[int]) -> ir.GlobalVariable:
    """A constant i8 lookup table, emitted once per module."""
    g = b.module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(ir.IntType(8), len(values))
        g = ir.GlobalVariable(b.module, ty, name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, [v & 0xFF for v in values])
    return g


def _lookup(b: ir.IRBuilder, name: str, values: list[int], index: ir.Value, valid: ir.Value,
            fallback: int, t: DType) -> ir.Value:
    """values[index] (sign-extended bytes) where `valid`, else `fallback`, as type t."""
    g = table(b, name, values)
    safe = b.select(valid, index, ir.Constant(I64, 0))  # never read past the table
    v = b.sext(b.load(b.gep(g, [ir.Constant(I64, 0), safe], inbounds=True)), I64)
    out = b.select(valid, v, ir.Constant(I64, fallback))
    return convert(b, out, DType.I64, t)


def _as_i64(b: ir.IRBuilder, t: DType, x: ir.Value) -> ir.Value:
    return convert(b, x, t, DType.I64) if t.is_signed else b.zext(x, I64) if t.bits < 64 else x


def _class_valid(b: ir.IRBuilder, c: ir.Value) -> ir.Value:
    # Unsigned compare: negative signed values and huge u64 values are both out.
    return b.icmp_unsigned("<", c, ir.Constant(I64, atlas.NUM_CLASSES))


def _cls_get(b, t, args):
    byte = b.and_(_as_i64(b, t, args[0]), ir.Constant(I64, 0xFF))
    return _lookup(b, "atlas.byte_class", list(atlas.BYTE_CLASS), byte, ir.Constant(I1, 1), 0, t)


def _atlas_unary(name: str, values: list[int], fallback: int) -> Emit:
    def emit(b, t, args):
        c = _as_i64(b, t, args[0])
        return _lookup(b, name, values, c, _class_valid(b, c), fallback, t)
    return emit


def _unity(b, t, args):
    c = _as_i64(b, t, args[0])
    v = _lookup(b, "atlas.unity", [int(u) for u in atlas.UNITY_TABLE], c, _class_valid(b, c), 0, DType.I64)
    return b.icmp_unsigned("!=", v, ir.Constant(I64, 0))


def _nbr_get(b, t, args):
    c, k = (_as_i64(b, t, a) for a in args)
    # The table pads degree-5 classes with -1, which is also the out-of-range answer.
    valid = b.and_(_class_valid(b, c), b.icmp_unsigned("<", k, ir.Constant(I64, 6)))
    index = b.add(b.mul(c, ir.Constant(I64, 6)), k)
    return _lookup(b, "atlas.neighbors", [int(v) for v in atlas.NEIGHBOR_TABLE.reshape(-1)], index, valid, -1, t)


def _bound_map(b, t, args):
    # Wrapping arithmetic in t is exact modulo 2**bits, which is what wrapping the
    # mathematical c*12288 + p*256 + byte into t means.
    c, p, y = args
    return b.add(b.add(b.mul(c, _c(c, atlas.CLASS_STRIDE)), b.mul(p, _c(p, atlas.BYTES_PER_PAGE))), y)


# ------------------------------------------------------------------ value tests
_INFINITY_BITS = {DType.F16: 0x7C00, DType.F32: 0x7F800000, DType.F64: 0x7FF0000000000000}


def _class_test(infinite: bool) -> Emit:
    """ISINF (`infinite`) / ISFINITE: on the bits, |x| (the sign cleared) against the
    pattern of infinity, so f16 needs no conversion and a lane loop stays vectorizable.
    Integers and bool are finite."""
    def emit(b, t, args):
        if not t.is_float:
            return ir.Constant(I1, int(not infinite))
        ity = ir.IntType(t.bits)
        magnitude = b.and_(b.bitcast(args[0], ity), ir.Constant(ity, (1 << (t.bits - 1)) - 1))
        return b.icmp_unsigned("==" if infinite else "<", magnitude, ir.Constant(ity, _INFINITY_BITS[t]))
    return emit


# ----------------------------------------------------------------------- compare
_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def compare(b: ir.IRBuilder, mod: str, t: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """SET.mod.t: IEEE comparisons (NaN is unordered: only `ne` holds)."""
    if t.is_float:
        if t is DType.F16:  # exact in float
            x, y = b.fpext(x, FLOAT), b.fpext(y, FLOAT)
        if mod == "ne":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_ICMP[mod], x, y)
    if t.is_signed:
        return b.icmp_signed(_ICMP[mod], x, y)
    return b.icmp_unsigned(_ICMP[mod], x, y)


VALUE_OPS: dict[str, Emit] = {
    **{op: _libm(op) for op in sorted(MATH_FUNCTIONS)},  # the entries below replace some (FMOD, SIGMOID)
    "MOV": lambda b, t, args: args[0], "MOV_IMM": lambda b, t, args: args[0],
    "ADD": _arith("add", "fadd"), "SUB": _arith("sub", "fsub"), "MUL": _arith("mul", "fmul"),
    "DIV": _div, "REM": _rem, "MIN": _minmax(True), "MAX": _minmax(False),
    "MAD": _mad, "FMA": _fma, "ABS": _abs, "NEG": _neg,
    "AND": _logic("and_"), "OR": _logic("or_"), "XOR": _logic("xor"), "NOT": _not,
    "SHL": lambda b, t, args: _shift(b, t, args, True), "SHR": lambda b, t, args: _shift(b, t, args, False),
    "SEL": _sel,
    "SQRT": _float1("sqrt"), "RSQRT": _rsqrt, "SIGMOID": _sigmoid,
    "FLOOR": _float1("floor"), "CEIL": _float1("ceil"), "TRUNC": _float1("trunc"), "RINT": _float1("roundeven"),
    "COPYSIGN": _widen(lambda b, t, args: intrinsic(b, "copysign", args[0].type, list(args))),
    "FMOD": _fmod,
    "ClsGet": _cls_get,
    "MIRROR": _atlas_unary("atlas.mirror", list(atlas.MIRROR), -1),
    "NbrCount": _atlas_unary("atlas.degree", [int(d) for d in atlas.DEGREE_TABLE], 0),
    "UnityTest": _unity, "NbrGet": _nbr_get, "BoundMap": _bound_map,
    "ISINF": _class_test(True), "ISFINITE": _class_test(False),
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
