"""Per-opcode emission: the value-computing opcodes this backend declares, as LLVM IR.

`VALUE_OPS[op](b, t, args)` emits `op.t` on SSA values already of the operand types
(`SEL`'s predicate is i1) and returns the result. The semantics are the interpreter's
(hologram_interp/semantics.py) and these emitters are cpu_llvm's (its codegen_ops.py)
but for the transcendentals, FMOD and float REM, which call libdevice (codegen_math.py;
NVPTX cannot lower `frem` itself). The Atlas lookup tables are `addrspace(4)`
(`.const`) globals here.

On NVPTX: `fdiv` is `div.rn`, `llvm.sqrt` `sqrt.rn`, `llvm.fma` `fma.rn` (no
fast-math flag is ever set, so every float operation is the correctly rounded one),
and the saturating conversions lower to `cvt.rzi.sat`-style sequences.

f16 is PTX's own type: `add/sub/mul/fma.rn.f16` round once, exactly the ISA's f16
results (an f16 FMA is a true fused multiply-add, as docs/isa.md asks, with no
software path); what PTX has no f16 instruction for (division, square root, the
libdevice functions) LLVM or codegen_math.py computes in f32 and rounds once, which
for + - * / sqrt is again the correctly rounded f16 result.
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from hologram.backend import DType, atlas

from .codegen_math import LIBDEVICE, libdevice_call
from .codegen_types import FLOAT, HALF, I1, I8, I64, convert, intrinsic

CONSTANT = 4  # NVPTX's constant address space: the Atlas tables, cached and broadcast

Emit = Callable[[ir.IRBuilder, DType, list[ir.Value]], ir.Value]


def _c(v: ir.Value, x) -> ir.Constant:
    return ir.Constant(v.type, x)


def _arith(int_op: str, float_op: str) -> Emit:
    return lambda b, t, args: getattr(b, float_op if t.is_float else int_op)(*args)


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


def _div(b, t, args):
    return b.fdiv(*args) if t.is_float else _int_divmod(b, t, *args)[0]


def _float_rem(b: ir.IRBuilder, t: DType, a: ir.Value, d: ir.Value) -> ir.Value:
    """numpy's remainder: fmod, moved into the divisor's sign; a zero takes its sign."""
    mod = libdevice_call(b, "FMOD", [a, d], t)
    zero = _c(mod, 0.0)
    differ = b.xor(b.fcmp_ordered("<", d, zero), b.fcmp_ordered("<", mod, zero))
    nonzero = b.fcmp_unordered("!=", mod, zero)  # NaN stays NaN through either arm
    fixed = b.select(b.and_(nonzero, differ), b.fadd(mod, d), mod)
    signed_zero = intrinsic(b, "copysign", mod.type, [zero, d])
    return b.select(nonzero, fixed, signed_zero)


def _rem(b, t, args):
    return _float_rem(b, t, *args) if t.is_float else _int_divmod(b, t, *args)[1]


def _minmax(less: bool) -> Emit:
    """numpy's minimum/maximum: NaN propagates; of operands that compare equal, the
    second (which fixes the sign of a zero), but the first for f16 (numpy's half loops
    compare with <= / >=)."""
    def emit(b, t, args):
        x, y = args
        if t.is_float:
            cmp = ("<" if less else ">") + ("=" if t is DType.F16 else "")
            pick = b.or_(b.fcmp_ordered(cmp, x, y), b.fcmp_unordered("uno", x, x))
        elif t.is_signed:
            pick = b.icmp_signed("<" if less else ">", x, y)
        else:
            pick = b.icmp_unsigned("<" if less else ">", x, y)
        return b.select(pick, x, y)
    return emit


def _abs(b, t, args):
    (x,) = args
    if t.is_float:
        return intrinsic(b, "fabs", x.type, [x])
    if t.is_unsigned:
        return x
    return b.select(b.icmp_signed("<", x, _c(x, 0)), b.neg(x), x)


def _neg(b, t, args):
    return b.fneg(args[0]) if t.is_float else b.neg(args[0])


def _not(b, t, args):
    (x,) = args
    return b.xor(x, ir.Constant(x.type, 1 if t is DType.BOOL else -1))


def _logic(op: str) -> Emit:
    return lambda b, t, args: getattr(b, op)(*args)


def _shift(left: bool) -> Emit:
    def emit(b, t, args):
        x, s = args
        s = b.and_(s, _c(s, t.bits - 1))  # the ISA masks the count to the type's width
        if left:
            return b.shl(x, s)
        return b.ashr(x, s) if t.is_signed else b.lshr(x, s)
    return emit


def _mad(b, t, args):
    a, c, d = args
    return VALUE_OPS["ADD"](b, t, [VALUE_OPS["MUL"](b, t, [a, c]), d])


def _fma(b, t, args):
    return intrinsic(b, "fma", args[0].type, list(args)) if t.is_float else _mad(b, t, args)


def _float1(name: str) -> Emit:
    return lambda b, t, args: intrinsic(b, name, args[0].type, list(args))


def _rsqrt(b, t, args):
    """1 / sqrt(x), two correctly rounded steps (docs/isa.md), not PTX's approximate rsqrt."""
    x = args[0]
    return b.fdiv(_c(x, 1.0), intrinsic(b, "sqrt", x.type, [x]))


def _libdevice(name: str) -> Emit:
    return lambda b, t, args: libdevice_call(b, name, list(args), t)


def _sigmoid(b, t, args):
    """docs/isa.md's formula in type t (f16 in f32, rounded once): exp of a non-positive
    argument only, so it never overflows."""
    if t is DType.F16:
        return b.fptrunc(_sigmoid(b, DType.F32, [b.fpext(args[0], FLOAT)]), HALF)
    x = args[0]
    one = _c(x, 1.0)
    e = libdevice_call(b, "EXP", [b.fneg(intrinsic(b, "fabs", x.type, [x]))], t)
    nonneg = b.fcmp_ordered(">=", x, _c(x, 0.0))
    return b.select(nonneg, b.fdiv(one, b.fadd(one, e)), b.fdiv(e, b.fadd(one, e)))


# ------------------------------------------------------------------------- Atlas
def _table(b: ir.IRBuilder, name: str, values: list[int]) -> ir.GlobalVariable:
    """A constant i8 lookup table in constant memory, emitted once per module."""
    g = b.module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(I8, len(values))
        g = ir.GlobalVariable(b.module, ty, name, addrspace=CONSTANT)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, [v & 0xFF for v in values])
    return g


def _lookup(b: ir.IRBuilder, name: str, values: list[int], index: ir.Value, valid: ir.Value,
            fallback: int, t: DType) -> ir.Value:
    """values[index] (sign-extended bytes) where `valid`, else `fallback`, as type t."""
    g = _table(b, name, values)
    safe = b.select(valid, index, ir.Constant(I64, 0))  # never read past the table
    v = b.sext(b.load(b.gep(g, [ir.Constant(I64, 0), safe], inbounds=True), typ=I8), I64)
    return convert(b, b.select(valid, v, ir.Constant(I64, fallback)), DType.I64, t)


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
    """ISINF / ISFINITE on the bits: |x| against infinity's pattern. Integers and bool
    are finite."""
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


VALUE_OPS: dict[str, Emit] = {
    **{op: _libdevice(op) for op in LIBDEVICE}, "SIGMOID": _sigmoid,
    "MOV": lambda b, t, args: args[0], "MOV_IMM": lambda b, t, args: args[0],
    "ADD": _arith("add", "fadd"), "SUB": _arith("sub", "fsub"), "MUL": _arith("mul", "fmul"),
    "DIV": _div, "REM": _rem, "MIN": _minmax(True), "MAX": _minmax(False),
    "MAD": _mad, "FMA": _fma, "ABS": _abs, "NEG": _neg,
    "AND": _logic("and_"), "OR": _logic("or_"), "XOR": _logic("xor"), "NOT": _not,
    "SHL": _shift(True), "SHR": _shift(False),
    "SEL": lambda b, t, args: b.select(*args),
    "SQRT": _float1("sqrt"), "RSQRT": _rsqrt,
    "FLOOR": _float1("floor"), "CEIL": _float1("ceil"), "TRUNC": _float1("trunc"), "RINT": _float1("roundeven"),
    "COPYSIGN": lambda b, t, args: intrinsic(b, "copysign", args[0].type, list(args)),
    "ISINF": _class_test(True), "ISFINITE": _class_test(False),
    "ClsGet": _cls_get,
    "MIRROR": _atlas_unary("atlas.mirror", list(atlas.MIRROR), -1),
    "NbrCount": _atlas_unary("atlas.degree", [int(d) for d in atlas.DEGREE_TABLE], 0),
    "UnityTest": _unity, "NbrGet": _nbr_get, "BoundMap": _bound_map,
}
