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

from .codegen_types import FLOAT, HALF, reg_type

# ISA opcode -> libdevice's f64 name (the f32 one adds `f`): C99's math functions
LIBDEVICE = {
    "EXP": "exp", "LOG": "log", "LOG2": "log2", "LOG10": "log10", "SIN": "sin", "COS": "cos", "TAN": "tan",
    "TANH": "tanh", "ASIN": "asin", "ACOS": "acos", "ATAN": "atan", "SINH": "sinh", "COSH": "cosh",
    "ASINH": "asinh", "ACOSH": "acosh", "ATANH": "atanh", "EXP2": "exp2", "EXPM1": "expm1", "LOG1P": "log1p",
    "ATAN2": "atan2", "HYPOT": "hypot", "FMOD": "fmod", "POW": "pow", "ERF": "erf", "ERFC": "erfc",
    "CBRT": "cbrt",
}
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
