"""LLVM types, constants and the CVT conversion table for the code generator.

Registers hold `bool` as `i1`; memory holds it as one byte (0/1, numpy's layout). `f16`
is LLVM `half`, but arithmetic on it is done in `float` and rounded back after every
operation (see codegen_ops.py): the host lowers `half` <-> `float` with F16C, whereas
`double -> half` would be a compiler-rt libcall the JIT cannot resolve, so that one
conversion is built here from `double -> float` rounded to odd, then `float -> half`.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from hologram.backend import DType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()


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


def byte_size(ty: ir.Type) -> int:
    """Bytes one element of `ty` takes in an array (an `i1` takes one)."""
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {HALF: 2, FLOAT: 4, DOUBLE: 8}[ty]


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


# ------------------------------------------------------------------------ constants
def _float_of_int(v: int, t: DType) -> float:
    """An integer rounded once into float type `t` (Python ints may exceed i64). For f32
    and f16 the double in between keeps a sticky bit, so it cannot round twice."""
    if t is DType.F64 or abs(v) < 1 << 53:
        try:
            wide = float(v)  # Python rounds int -> float once, correctly
        except OverflowError:
            return math.inf if v > 0 else -math.inf
        if t is DType.F64:
            return wide
    else:
        shift = abs(v).bit_length() - 53
        m = abs(v) >> shift | (1 if abs(v) & ((1 << shift) - 1) else 0)
        try:
            wide = math.ldexp(float(m), shift) * (1 if v > 0 else -1)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    with np.errstate(over="ignore"):
        return float(t.np.type(wide))


def const_value(value: bool | int | float, t: DType) -> bool | int | float:
    """An immediate typed by the instruction that reads it, exactly as the interpreter
    types it: ints wrap into integer types, round once into floats; floats convert as
    CVT from f64 (saturating, NaN -> 0); anything -> bool is `!= 0`."""
    if t is DType.BOOL:
        return bool(value != 0)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, (int, np.integer)):
        value = int(value)
        if t.is_int:
            span = 1 << t.bits
            return (value - t.min) % span + t.min
        return _float_of_int(value, t)
    value = float(value)
    if t.is_int:
        if value != value:
            return 0
        if math.isinf(value):
            return t.max if value > 0 else t.min
        return min(max(math.trunc(value), t.min), t.max)
    with np.errstate(over="ignore"):
        return float(t.np.type(value))


def const(value: bool | int | float, t: DType) -> ir.Constant:
    v = const_value(value, t)
    if t is DType.BOOL:
        return ir.Constant(I1, int(v))
    if t.is_int:
        return ir.Constant(reg_type(t), v & ((1 << t.bits) - 1))
    return ir.Constant(reg_type(t), v)


def zero(t: DType) -> ir.Constant:
    return const(0, t)


# ------------------------------------------------------------------ float rounding
def _intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def intrinsic(b: ir.IRBuilder, base: str, t: ir.Type, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
    """`llvm.<base>.<suffix of t>`, declared on first use."""
    suffix = {HALF: "f16", FLOAT: "f32", DOUBLE: "f64"}.get(t) or f"i{t.width}"
    return _intrinsic(b, f"llvm.{base}.{suffix}", ret or t, args)


def double_to_half(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 -> f16 rounded once: round to float with round-to-odd (an inexact result gets
    its last bit forced to 1), which carries the sticky information, then to half; a
    float has more than 11 + 2 bits, so the second rounding is the correct one."""
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


def fptrunc(b: ir.IRBuilder, x: ir.Value, to: DType) -> ir.Value:
    if to is DType.F16 and x.type == DOUBLE:
        return double_to_half(b, x)
    return b.fptrunc(x, reg_type(to))


# ------------------------------------------------------------------------ conversions
def convert(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """CVT semantics (docs/isa.md): anything -> bool is `!= 0` (NaN is true); bool ->
    number is 0/1; int -> int wraps; int -> float and float -> float round once to
    nearest even; float -> int truncates and saturates, NaN -> 0."""
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
        if dst is DType.F16:
            # Every integer below 2**24 is exact in float and every larger one is inf in
            # half, so going through float rounds once; i64 -> half is a libcall.
            f = b.sitofp(x, FLOAT) if src.is_signed else b.uitofp(x, FLOAT)
            return b.fptrunc(f, HALF)
        return b.sitofp(x, to) if src.is_signed else b.uitofp(x, to)
    if dst.is_int:  # float -> int: the saturating intrinsics define NaN -> 0
        if src is DType.F16:
            x = b.fpext(x, FLOAT)
        name = "fptosi.sat" if dst.is_signed else "fptoui.sat"
        fsuffix = "f32" if x.type == FLOAT else "f64"
        return _intrinsic(b, f"llvm.{name}.i{dst.bits}.{fsuffix}", to, [x])
    if dst.bits > src.bits:
        return b.fpext(x, to)
    return fptrunc(b, x, dst)


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


def define_half_runtime(module: ir.Module) -> None:
    """Define `__truncdfhf2` (f64 -> f16, compiler-rt's name) in the module.

    LLVM's x86 back end lowers f64 -> f16 (which it also forms by folding two adjacent
    truncations, e.g. f64 -> f32 -> f16) into a call to that compiler-rt routine, and
    the JIT has no compiler-rt to resolve it from. A weak definition survives the
    optimizer (nothing in the IR calls it yet) and lets several modules each carry one.
    The f16 <-> f32 conversions need no help: the backend is built for hosts with F16C."""
    if "__truncdfhf2" in module.globals:
        return
    fn = ir.Function(module, ir.FunctionType(HALF, [DOUBLE]), "__truncdfhf2")
    fn.linkage = "weak"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(double_to_half(b, fn.args[0]))


def at(b: ir.IRBuilder, base: ir.Value, index: ir.Value, ety: ir.Type, inbounds: bool = False) -> ir.Value:
    """The address of element `index` of type `ety` at `base`. llvmlite still types the
    pointers it creates (allocas, GEPs) while function arguments are opaque, so the GEP
    is spelled to fit; the printed IR is the same `ptr` to LLVM either way."""
    t = base.type
    if getattr(t, "is_opaque", False):
        return b.gep(base, [index], inbounds=inbounds, source_etype=ety)
    if isinstance(t.pointee, ir.ArrayType) and t.pointee.element == ety:
        return b.gep(base, [ir.Constant(I64, 0), index], inbounds=inbounds)
    if t.pointee != ety:
        base = b.bitcast(base, ir.PointerType(ety))
    return b.gep(base, [index], inbounds=inbounds)
