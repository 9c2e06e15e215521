"""LLVM types of the ISA's dtypes, intrinsic calls and CVT as IR, for LLVM backends.

Registers hold `bool` as `i1`; memory holds it as one byte (0/1, numpy's layout).

`convert` is docs/isa.md's CVT. With `soft_half` (a CPU without f16 arithmetic, where
`double -> half` would be a compiler-rt libcall a JIT cannot resolve) the f16
conversions go through `float` and f64 -> f16 is built from f64 -> f32 rounded to odd
(`double_to_half`), so it still rounds once; without it (NVPTX, whose `cvt` converts
between f16 and every number type with one rounding) they are LLVM's own.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.core.types import DType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def reg_type(t: DType) -> ir.Type:
    """The LLVM type of a register (and an SSA value) of dtype `t`."""
    if t is DType.BOOL:
        return I1
    if t.is_float:
        return {DType.F16: HALF, DType.F32: FLOAT, DType.F64: DOUBLE}[t]
    return ir.IntType(t.bits)


def mem_type(t: DType) -> ir.Type:
    """The LLVM type of one element of a buffer of dtype `t` (bool is a byte)."""
    return I8 if t is DType.BOOL else reg_type(t)


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM's intrinsics name `t` by (`f32`, `i64`)."""
    return {HALF: "f16", FLOAT: "f32", DOUBLE: "f64"}.get(t) or f"i{t.width}"


def declared_call(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    """A call of the function `name` (an LLVM intrinsic, a library function), declared
    in the module on first use."""
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def intrinsic(b: ir.IRBuilder, base: str, t: ir.Type, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
    """`llvm.<base>.<suffix of t>` (returning `t` unless `ret`), declared on first use."""
    return declared_call(b, f"llvm.{base}.{type_suffix(t)}", ret or t, args)


def double_to_half(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 -> f16 rounded once, in f32 arithmetic: round to float with round-to-odd (an
    inexact result gets its last bit forced to 1), which carries the sticky information,
    then to half; a float has more than 11 + 2 bits, so the second rounding is correct."""
    f = b.fptrunc(x, FLOAT)
    inexact = b.fcmp_ordered("!=", b.fpext(f, DOUBLE), x)  # false for NaN and exact results
    bits = b.bitcast(f, I32)
    # Step back one ulp toward zero when RNE rounded away from zero (the magnitude is the
    # low 31 bits, so that is `bits - 1` for either sign), then force the last bit on.
    rounded_up = b.fcmp_ordered(">", b.fpext(intrinsic(b, "fabs", FLOAT, [f]), DOUBLE),
                                intrinsic(b, "fabs", DOUBLE, [x]))
    base = b.select(rounded_up, b.sub(bits, ir.Constant(I32, 1)), bits)
    fixed = b.select(inexact, b.or_(base, ir.Constant(I32, 1)), bits)
    return b.fptrunc(b.bitcast(fixed, FLOAT), HALF)


def convert(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType, soft_half: bool = False) -> ir.Value:
    """CVT semantics (docs/isa.md): anything -> bool is `!= 0` (NaN is true); bool ->
    number is 0/1; int -> int wraps; int -> float and float -> float round once to
    nearest even; float -> int truncates and saturates, NaN -> 0 (LLVM's saturating
    intrinsics). `soft_half`: f16 conversions through f32 (the module docstring)."""
    if src is dst:
        return x
    if dst is DType.BOOL:
        if src.is_float:
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    to = reg_type(dst)
    if src is DType.BOOL:
        return b.uitofp(x, to) if dst.is_float else b.zext(x, to)
    if src.is_int and dst.is_int:
        if dst.bits < src.bits:
            return b.trunc(x, to)
        if dst.bits == src.bits:
            return x
        return b.sext(x, to) if src.is_signed else b.zext(x, to)
    if src.is_int:  # -> float
        if dst is DType.F16 and soft_half:
            # Every integer below 2**24 is exact in float and every larger one is inf in
            # half, so going through float rounds once; i64 -> half is a libcall.
            f = b.sitofp(x, FLOAT) if src.is_signed else b.uitofp(x, FLOAT)
            return b.fptrunc(f, HALF)
        return b.sitofp(x, to) if src.is_signed else b.uitofp(x, to)
    if dst.is_int:  # float -> int: the saturating intrinsics define NaN -> 0
        if src is DType.F16 and soft_half:
            x = b.fpext(x, FLOAT)
        name = "fptosi.sat" if dst.is_signed else "fptoui.sat"
        return declared_call(b, f"llvm.{name}.i{dst.bits}.{type_suffix(x.type)}", to, [x])
    if dst.bits > src.bits:
        return b.fpext(x, to)
    if dst is DType.F16 and x.type == DOUBLE and soft_half:
        return double_to_half(b, x)
    return b.fptrunc(x, to)


def int_value(b: ir.IRBuilder, x: ir.Value, src: DType) -> ir.Value:
    """An integer-like value as i64 holding its mathematical value (indices, handles,
    counts): signed types sign-extend, unsigned and bool zero-extend."""
    if x.type == I64:
        return x
    return b.sext(x, I64) if src.is_signed else b.zext(x, I64)


def to_mem(b: ir.IRBuilder, x: ir.Value, t: DType) -> ir.Value:
    return b.zext(x, I8) if t is DType.BOOL else x


def from_mem(b: ir.IRBuilder, x: ir.Value, t: DType) -> ir.Value:
    return b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) if t is DType.BOOL else x
