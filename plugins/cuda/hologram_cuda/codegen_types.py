"""LLVM types, constants and CVT for the NVPTX code generator.

Registers hold `bool` as `i1`, memory as one byte (numpy's layout). Global buffers are
`ptr addrspace(1)`, shared arrays `addrspace(3)` globals; registers are allocas (address
space 0, the local space), which SROA/mem2reg turn into PTX virtual registers.

The CVT rules are docs/isa.md's and the same as cpu_llvm's (codegen_types.convert there).
f16 is LLVM's `half`: PTX converts between f16 and every other number type in one
`cvt` with one rounding (`cvt.rn.f16.f64`, `cvt.rn.f16.s64`, ...), so unlike cpu_llvm
no conversion needs a software path.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType, convert_value

from .targets import DTYPES

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()
GLOBAL = 1  # NVPTX address spaces
SHARED = 3
GLOBAL_PTR = ir.PointerType(addrspace=GLOBAL)


def reg_type(t: DType) -> ir.Type:
    """The LLVM type of a register of dtype `t`."""
    if t is DType.BOOL:
        return I1
    if t is DType.F16:
        return HALF
    if t is DType.F32:
        return FLOAT
    if t is DType.F64:
        return DOUBLE
    if t.is_int:
        return ir.IntType(t.bits)
    raise TypeError(f"cuda: no register type for {t} (the code generator emits {', '.join(map(str, DTYPES))})")


def mem_type(t: DType) -> ir.Type:
    """The LLVM type of one element of an array of dtype `t` (bool is a byte)."""
    return I8 if t is DType.BOOL else reg_type(t)


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def const(value: bool | int | float, t: DType) -> ir.Constant:
    """An immediate typed by the instruction that reads it (a verified program's are
    exactly representable, so the CVT rules of the SDK's `convert_value` type it)."""
    v = convert_value(value, t.np)
    if t is DType.BOOL:
        return ir.Constant(I1, int(bool(v)))
    if t.is_int:
        return ir.Constant(reg_type(t), int(v) & ((1 << t.bits) - 1))
    return ir.Constant(reg_type(t), float(v))


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    """A call of `name` (an LLVM intrinsic), declared on first use."""
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def typed_intrinsic(b: ir.IRBuilder, base: str, t: ir.Type, args: list[ir.Value]) -> ir.Value:
    """`llvm.<base>.<suffix of t>` returning `t`."""
    return intrinsic(b, f"llvm.{base}.{type_suffix(t)}", t, args)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM's intrinsics name `t` by (`f32`, `i64`)."""
    return {HALF: "f16", FLOAT: "f32", DOUBLE: "f64"}.get(t) or f"i{t.width}"


def convert(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """CVT (docs/isa.md): anything -> bool is `!= 0` (NaN is true); bool -> number is
    0/1; int -> int wraps; int -> float and float -> float round once to nearest even;
    float -> int truncates and saturates, NaN -> 0 (LLVM's saturating intrinsics)."""
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
    if src.is_int:
        return b.sitofp(x, to) if src.is_signed else b.uitofp(x, to)
    if dst.is_int:
        name = "fptosi.sat" if dst.is_signed else "fptoui.sat"
        return intrinsic(b, f"llvm.{name}.i{dst.bits}.{type_suffix(x.type)}", to, [x])
    return b.fpext(x, to) if dst.bits > src.bits else b.fptrunc(x, to)


def int_value(b: ir.IRBuilder, x: ir.Value, src: DType) -> ir.Value:
    """An integer-like value as the i64 holding its mathematical value (indices, counts)."""
    if x.type == I64:
        return x
    return b.sext(x, I64) if src.is_signed else b.zext(x, I64)


def to_mem(b: ir.IRBuilder, x: ir.Value, t: DType) -> ir.Value:
    return b.zext(x, I8) if t is DType.BOOL else x


def from_mem(b: ir.IRBuilder, x: ir.Value, t: DType) -> ir.Value:
    return b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) if t is DType.BOOL else x


def element(b: ir.IRBuilder, base: ir.Value, index: ir.Value, ety: ir.Type) -> ir.Value:
    """The address of element `index` of type `ety` at `base` (a global pointer, or a
    shared array global)."""
    if getattr(base.type, "is_opaque", False):
        return b.gep(base, [index], inbounds=True, source_etype=ety)
    return b.gep(base, [i64(0), index], inbounds=True)
