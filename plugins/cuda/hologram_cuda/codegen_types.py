"""LLVM types, constants and CVT for the NVPTX code generator.

Registers hold `bool` as `i1`, memory as one byte (numpy's layout). Global buffers are
`ptr addrspace(1)`, shared arrays `addrspace(3)` globals; registers are allocas (address
space 0, the local space), which SROA/mem2reg turn into PTX virtual registers.

The types, intrinsic calls and CVT are the SDK's (hologram.backend.llvm.types), shared
with cpu_llvm. f16 is LLVM's `half`: PTX converts between f16 and every other number
type in one `cvt` with one rounding (`cvt.rn.f16.f64`, `cvt.rn.f16.s64`, ...), so unlike
cpu_llvm no conversion needs a software path (`convert` without `soft_half`).
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType, convert_value
from hologram.backend.llvm.types import (  # noqa: F401  (the code generator's modules import them from here)
    DOUBLE, FLOAT, HALF, I1, I8, I32, I64, convert, declared_call, from_mem, i64, int_value, intrinsic, mem_type,
    reg_type, to_mem,
)

GLOBAL = 1  # NVPTX address spaces
SHARED = 3
GLOBAL_PTR = ir.PointerType(addrspace=GLOBAL)


def const(value: bool | int | float, t: DType) -> ir.Constant:
    """An immediate typed by the instruction that reads it (a verified program's are
    exactly representable, so the CVT rules of the SDK's `convert_value` type it)."""
    v = convert_value(value, t.np)
    if t is DType.BOOL:
        return ir.Constant(I1, int(bool(v)))
    if t.is_int:
        return ir.Constant(reg_type(t), int(v) & ((1 << t.bits) - 1))
    return ir.Constant(reg_type(t), float(v))


def element(b: ir.IRBuilder, base: ir.Value, index: ir.Value, ety: ir.Type) -> ir.Value:
    """The address of element `index` of type `ety` at `base` (a global pointer, or a
    shared array global)."""
    if getattr(base.type, "is_opaque", False):
        return b.gep(base, [index], inbounds=True, source_etype=ety)
    return b.gep(base, [i64(0), index], inbounds=True)
