"""Transcendental functions for the code generator: one entry point, `math_call`.

When `vecmath.py` (polynomial implementations emitted as IR, so loops containing them
vectorize) provides a function it is used; otherwise the C library's function is
declared and called (the JIT resolves `expf`, `atan2` ... from the process). Either way
the result is within the 4-ULP contract; f16 is computed in f32 and rounded once, as
numpy does.
"""

from __future__ import annotations

from llvmlite import ir

from hologram.backend import DType
from hologram.backend.llvm.ops import C_MATH

from .codegen_types import reg_type

try:  # written in parallel; absent or partial, the C library serves
    from . import vecmath as _vecmath
except ImportError:  # pragma: no cover - depends on the checkout
    _vecmath = None

LIBM = C_MATH  # the C library's names


# Every function `math_call` emits: vecmath's (one entry there adds a function to the
# code generator), and the C library's where vecmath is absent
FUNCTIONS = frozenset(getattr(_vecmath, "NAMES", ())) | frozenset(LIBM)


def _vector_math(name: str, t: DType):
    emit = getattr(_vecmath, "emit_math", None)
    supported = getattr(_vecmath, "NAMES", None)
    if emit is None or (supported is not None and name not in supported):
        return None
    return emit


def libm_call(b: ir.IRBuilder, name: str, args: list[ir.Value], t: DType) -> ir.Value:
    """The C library's `name` (`exp`/`expf`) on f32 or f64 arguments."""
    symbol = LIBM[name] + ("f" if t is DType.F32 else "")
    ty = reg_type(t)
    fn = b.module.globals.get(symbol)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), symbol)
        fn.attributes.add("nounwind")
    return b.call(fn, args)


def math_call(b: ir.IRBuilder, name: str, args: list[ir.Value], t: DType) -> ir.Value:
    """`name` (an ISA opcode from LIBM) applied to `args` of float type `t` (f32/f64;
    the caller widens f16)."""
    emit = _vector_math(name, t)
    if emit is not None:
        return emit(b, name, list(args), t)
    return libm_call(b, name, args, t)
