"""Value-op emitters whose LLVM IR is the same on every target.

An emitter is `emit(b, t, args) -> value`: it emits `op.t` on SSA values already of the
operand types (`SEL`'s predicate is i1) and returns the result (type `t`, or i1 for
predicates). A backend builds its `VALUE_OPS` table from these and its own choices for
what differs by target: how f16 arithmetic is done (in f32 on a CPU, natively on a
GPU), where the transcendentals and fmod come from (libm, libdevice), where the Atlas
tables live (`atlas_ops(addrspace)`). Semantics are the interpreter's
(hologram_interp/semantics.py):

- integers wrap; DIV/REM are floor division and numpy's remainder, 0 for a zero divisor,
  and `MIN / -1` gives `MIN` (remainder 0) instead of LLVM's undefined behaviour;
- MIN/MAX propagate NaN, and for operands that compare equal return the second (numpy's
  `minimum`: `a < b or isnan(a) ? a : b`), which fixes the sign of zero; numpy's f16
  loops use `<=`, so there the first wins.

Everything here is branch-free selects and intrinsics, so a lane loop built from it
stays vectorizable.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hologram.core import atlas
from hologram.core.types import DType

from .types import I1, I8, I64, convert, intrinsic

Emit = Callable[[ir.IRBuilder, DType, list[ir.Value]], ir.Value]

# ISA opcode -> the C99 math function computing it in f64 (the f32 one adds `f`): what
# a math library (libm, libdevice's `__nv_` functions) is called by
C_MATH = {
    "EXP": "exp", "LOG": "log", "LOG2": "log2", "LOG10": "log10", "SIN": "sin", "COS": "cos", "TAN": "tan",
    "TANH": "tanh", "ASIN": "asin", "ACOS": "acos", "ATAN": "atan", "SINH": "sinh", "COSH": "cosh",
    "ASINH": "asinh", "ACOSH": "acosh", "ATANH": "atanh", "EXP2": "exp2", "EXPM1": "expm1", "LOG1P": "log1p",
    "ATAN2": "atan2", "HYPOT": "hypot", "FMOD": "fmod", "POW": "pow", "ERF": "erf", "ERFC": "erfc",
    "CBRT": "cbrt",
}


def _c(v: ir.Value, x) -> ir.Constant:
    """The constant `x` of `v`'s type."""
    return ir.Constant(v.type, x)


def arith(int_op: str, float_op: str) -> Emit:
    """ADD/SUB/MUL: the builder's integer or float instruction."""
    def emit(b, t, args):
        return getattr(b, float_op if t.is_float else int_op)(*args)
    return emit


# ------------------------------------------------------------------- division
def int_divmod(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> tuple[ir.Value, ir.Value]:
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


def div(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    return b.fdiv(*args) if t.is_float else int_divmod(b, t, *args)[0]


def float_remainder(b: ir.IRBuilder, mod: ir.Value, d: ir.Value) -> ir.Value:
    """numpy's remainder from `mod` = fmod(a, d): moved into the divisor's sign; a zero
    takes its sign."""
    zero = _c(mod, 0.0)
    differ = b.xor(b.fcmp_ordered("<", d, zero), b.fcmp_ordered("<", mod, zero))
    nonzero = b.fcmp_unordered("!=", mod, zero)  # NaN stays NaN through either arm
    fixed = b.select(b.and_(nonzero, differ), b.fadd(mod, d), mod)
    signed_zero = intrinsic(b, "copysign", mod.type, [zero, d])
    return b.select(nonzero, fixed, signed_zero)


def rem(fmod: Callable[[ir.IRBuilder, DType, ir.Value, ir.Value], ir.Value]) -> Emit:
    """REM, with `fmod(b, t, a, d)` the target's C fmod (LLVM's `frem`, a library call)."""
    def emit(b, t, args):
        if not t.is_float:
            return int_divmod(b, t, *args)[1]
        return float_remainder(b, fmod(b, t, *args), args[1])
    return emit


# ---------------------------------------------------------------- min / max / abs
def minmax(less: bool) -> Emit:
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


def abs_(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    (x,) = args
    if t.is_float:
        return intrinsic(b, "fabs", x.type, [x])
    if t.is_unsigned:
        return x
    return b.select(b.icmp_signed("<", x, _c(x, 0)), b.neg(x), x)


def neg(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    return b.fneg(args[0]) if t.is_float else b.neg(args[0])


def not_(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    (x,) = args
    return b.xor(x, ir.Constant(x.type, 1 if t is DType.BOOL else -1))


def logic(op: str) -> Emit:
    return lambda b, t, args: getattr(b, op)(*args)


def shift(left: bool) -> Emit:
    def emit(b, t, args):
        x, s = args
        s = b.and_(s, _c(s, t.bits - 1))  # the ISA masks the count to the type's width
        if left:
            return b.shl(x, s)
        return b.ashr(x, s) if t.is_signed else b.lshr(x, s)
    return emit


def select(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    return b.select(*args)


def float1(intrinsic_name: str) -> Emit:
    """A one-to-one float intrinsic (`sqrt`, `floor`, ...), in the operand's type."""
    def emit(b, t, args):
        return intrinsic(b, intrinsic_name, args[0].type, list(args))
    return emit


def copysign(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    return intrinsic(b, "copysign", args[0].type, list(args))


def rsqrt(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    """1 / sqrt(x), two correctly rounded steps (docs/isa.md), not an approximate rsqrt."""
    x = args[0]
    return b.fdiv(_c(x, 1.0), intrinsic(b, "sqrt", x.type, [x]))


def sigmoid(exp: Callable[[ir.IRBuilder, DType, ir.Value], ir.Value]) -> Emit:
    """docs/isa.md's formula, with `exp(b, t, x)` the target's exp: of a non-positive
    argument only, so it never overflows (as the interpreter)."""
    def emit(b, t, args):
        x = args[0]
        one = _c(x, 1.0)
        e = exp(b, t, b.fneg(intrinsic(b, "fabs", x.type, [x])))
        nonneg = b.fcmp_ordered(">=", x, _c(x, 0.0))
        return b.select(nonneg, b.fdiv(one, b.fadd(one, e)), b.fdiv(e, b.fadd(one, e)))
    return emit


# ------------------------------------------------------------------ value tests
_INFINITY_BITS = {DType.F16: 0x7C00, DType.F32: 0x7F800000, DType.F64: 0x7FF0000000000000}


def class_test(infinite: bool) -> Emit:
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


_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def compare(b: ir.IRBuilder, mod: str, t: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """SET.mod.t: IEEE comparisons (NaN is unordered: only `ne` holds)."""
    if t.is_float:
        if mod == "ne":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_ICMP[mod], x, y)
    if t.is_signed:
        return b.icmp_signed(_ICMP[mod], x, y)
    return b.icmp_unsigned(_ICMP[mod], x, y)


# ------------------------------------------------------------------------- Atlas
def table(b: ir.IRBuilder, name: str, values: list[int], addrspace: int = 0) -> ir.GlobalVariable:
    """A constant i8 lookup table in `addrspace`, emitted once per module."""
    g = b.module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(I8, len(values))
        g = ir.GlobalVariable(b.module, ty, name, addrspace=addrspace)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, [v & 0xFF for v in values])
    return g


def _as_i64(b: ir.IRBuilder, t: DType, x: ir.Value) -> ir.Value:
    return convert(b, x, t, DType.I64) if t.is_signed else b.zext(x, I64) if t.bits < 64 else x


def _class_valid(b: ir.IRBuilder, cls: ir.Value) -> ir.Value:
    # Unsigned compare: negative signed values and huge u64 values are both out.
    return b.icmp_unsigned("<", cls, ir.Constant(I64, atlas.NUM_CLASSES))


def bound_map(b: ir.IRBuilder, t: DType, args: list[ir.Value]) -> ir.Value:
    # Wrapping arithmetic in t is exact modulo 2**bits, which is what wrapping the
    # mathematical c*12288 + p*256 + byte into t means.
    cls, page, byte = args
    return b.add(b.add(b.mul(cls, _c(cls, atlas.CLASS_STRIDE)), b.mul(page, _c(page, atlas.BYTES_PER_PAGE))), byte)


def atlas_ops(addrspace: int = 0, soft_half: bool = False) -> dict[str, Emit]:
    """The Atlas opcodes (docs/isa.md, "Atlas"), their tables constant globals in
    `addrspace` (a GPU's constant memory), results converted as `convert(soft_half=)`."""

    def lookup(b: ir.IRBuilder, name: str, values: list[int], index: ir.Value, valid: ir.Value,
               fallback: int, t: DType) -> ir.Value:
        """values[index] (sign-extended bytes) where `valid`, else `fallback`, as type t."""
        g = table(b, name, values, addrspace)
        safe = b.select(valid, index, ir.Constant(I64, 0))  # never read past the table
        v = b.sext(b.load(b.gep(g, [ir.Constant(I64, 0), safe], inbounds=True), typ=I8), I64)
        return convert(b, b.select(valid, v, ir.Constant(I64, fallback)), DType.I64, t, soft_half)

    def cls_get(b, t, args):
        byte = b.and_(_as_i64(b, t, args[0]), ir.Constant(I64, 0xFF))
        return lookup(b, "atlas.byte_class", list(atlas.BYTE_CLASS), byte, ir.Constant(I1, 1), 0, t)

    def unary(name: str, values: list[int], fallback: int) -> Emit:
        def emit(b, t, args):
            cls = _as_i64(b, t, args[0])
            return lookup(b, name, values, cls, _class_valid(b, cls), fallback, t)
        return emit

    def unity(b, t, args):
        cls = _as_i64(b, t, args[0])
        v = lookup(b, "atlas.unity", [int(u) for u in atlas.UNITY_TABLE], cls, _class_valid(b, cls), 0, DType.I64)
        return b.icmp_unsigned("!=", v, ir.Constant(I64, 0))

    def nbr_get(b, t, args):
        cls, k = (_as_i64(b, t, a) for a in args)
        # The table pads degree-5 classes with -1, which is also the out-of-range answer.
        valid = b.and_(_class_valid(b, cls), b.icmp_unsigned("<", k, ir.Constant(I64, 6)))
        index = b.add(b.mul(cls, ir.Constant(I64, 6)), k)
        return lookup(b, "atlas.neighbors", [int(v) for v in atlas.NEIGHBOR_TABLE.reshape(-1)], index, valid, -1, t)

    return {
        "ClsGet": cls_get,
        "MIRROR": unary("atlas.mirror", list(atlas.MIRROR), -1),
        "NbrCount": unary("atlas.degree", [int(d) for d in atlas.DEGREE_TABLE], 0),
        "UnityTest": unity, "NbrGet": nbr_get, "BoundMap": bound_map,
    }


def common_ops() -> dict[str, Emit]:
    """The table entries that are the same on every target (no float arithmetic that
    f16 could change): moves, select, the bitwise ops, shifts, the value tests."""
    return {
        "MOV": lambda b, t, args: args[0], "MOV_IMM": lambda b, t, args: args[0],
        "AND": logic("and_"), "OR": logic("or_"), "XOR": logic("xor"), "NOT": not_,
        "SHL": shift(True), "SHR": shift(False), "SEL": select,
        "ISINF": class_test(True), "ISFINITE": class_test(False),
    }
