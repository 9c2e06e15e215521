"""LLVM types, constants and the CVT conversion table for the code generator.

Registers hold `bool` as `i1`; memory holds it as one byte (0/1, numpy's layout). `f16`
is LLVM `half`, but arithmetic on it is done in `float` and rounded back after every
operation (see codegen_ops.py): the host lowers `half` <-> `float` with F16C, whereas
`double -> half` would be a compiler-rt libcall the JIT cannot resolve, so that one
conversion is built from `double -> float` rounded to odd, then `float -> half`.

The types, intrinsic calls and CVT are the SDK's (hologram.backend.llvm.types, shared
with cuda; `convert` here is its soft-f16 form); the immediates' typing, the runtime's
`__truncdfhf2` and addressing are this backend's.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from hologram.backend import DType
from hologram.backend.llvm import types as llvm_types
from hologram.backend.llvm.types import (  # noqa: F401  (the code generator's modules import them from here)
    DOUBLE, FLOAT, HALF, I1, I8, I32, I64, double_to_half, from_mem, i64, int_value, intrinsic,
    mem_type, reg_type, to_mem,
)

PTR = ir.PointerType()


def byte_size(ty: ir.Type) -> int:
    """Bytes one element of `ty` takes in an array (an `i1` takes one)."""
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {HALF: 2, FLOAT: 4, DOUBLE: 8}[ty]


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


# ------------------------------------------------------------------------ conversions
def convert(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """CVT semantics (docs/isa.md), the SDK's (hologram.backend.llvm.types.convert) with
    the f16 conversions in f32: the host lowers `half` <-> `float` with F16C only."""
    return llvm_types.convert(b, x, src, dst, soft_half=True)


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
