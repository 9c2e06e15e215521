"""The transcendentals as calls of libdevice (NVIDIA's math library in LLVM bitcode,
`libdevice.10.bc` from the `nvidia-nvvm` wheel): `__nv_expf` for `EXP.f32`, `__nv_exp`
for `EXP.f64`. The code generator only declares the functions; ptx.py links libdevice
into a module that calls one, internalizes it, and LLVM's optimizer inlines what is used
and drops the rest (docs/gpu.md, "CUDA", for the expected accuracy of each).

f16 is computed in f32 and rounded once (what numpy does): an f32 result within 4 f32
ulp rounds to within 0.5 + 2**-11 f16 ulp.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType
from hologram.backend.llvm.ops import C_MATH

from .codegen_types import FLOAT, HALF, reg_type

LIBDEVICE = C_MATH  # libdevice names its functions as C99 does, after PREFIX (`__nv_expf`)
PREFIX = "__nv_"  # what every libdevice function's name starts with (ptx.py links on seeing one)


def libdevice_call(b: ir.IRBuilder, name: str, args: list[ir.Value], t: DType) -> ir.Value:
    """libdevice's `name` (an ISA opcode of LIBDEVICE) on `args` of float type `t`; f16
    widened to f32 and the result rounded back once."""
    if t is DType.F16:
        wide = [b.fpext(a, FLOAT) for a in args]
        return b.fptrunc(libdevice_call(b, name, wide, DType.F32), HALF)
    symbol = PREFIX + LIBDEVICE[name] + ("f" if t is DType.F32 else "")
    ty = reg_type(t)
    fn = b.module.globals.get(symbol)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), symbol)
    return b.call(fn, args)
