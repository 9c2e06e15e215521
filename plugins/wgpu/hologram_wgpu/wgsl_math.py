"""The ISA's float math in WGSL, for f32 and for f16 held in f32 registers: exact `FMA`,
`FMOD` and `REM` through integer arithmetic on the significands, and the
transcendentals with cpu_llvm's algorithms (hologram_cpu_llvm.vecmath*: the same
reductions, series and arrangements) evaluated in f32, within the ISA's 4-ulp contract
(docs/gpu.md, "What wgpu declares", has the measured errors).

WGSL has no f64, so where cpu_llvm widens an f32 argument to f64 and rounds once, these
work in f32 and keep the steps that lose accuracy exact: Cody-Waite constants with
trailing zeros (so `n * HI` is exact and `x - n * HI` cancels exactly), scaling by 2**n
in two exact-then-rounded steps (subnormal results rounded once), argument bits read
with bitcasts (NaN, signs, subnormal inputs). Every step is exact or merely rounded
whether or not a driver contracts `a * b + c` into an fma, and nothing relies on the
driver keeping subnormals in an intermediate. WGSL's own `exp`, `log`, `sin`, `fma`
and `%` are never used: drivers answer them far outside the contract.

f16 functions are the f32 ones rounded to f16 (`f16_round`): the f32 result is within
a few f32 ulp, 2**-13 of an f16 ulp, so rounding it once more is as numpy computes f16
(in f32, then rounded), except for `FMA`, whose exact sum is rounded to f16 directly.
Each function is a helper in `MATH_HELPERS`, emitted only when a shader calls it."""

from __future__ import annotations

from . import wgsl_math_exp, wgsl_math_trig  # noqa: F401  (they register their helpers)
from .wgsl_math_core import MATH_HELPERS

__all__ = ["MATH_HELPERS", "MATH_UNARY", "MATH_BINARY", "math_call"]

MATH_UNARY = frozenset({"EXP", "EXP2", "EXPM1", "TANH", "SIGMOID", "SINH", "COSH", "LOG", "LOG2", "LOG10", "LOG1P",
                        "SIN", "COS", "TAN", "ATAN", "ASIN", "ACOS", "ASINH", "ACOSH", "ATANH", "CBRT",
                        "ERF", "ERFC"})
MATH_BINARY = frozenset({"FMOD", "REM", "ATAN2", "HYPOT", "POW"})


def math_call(op: str, is_f16: bool, *args: str) -> str:
    """The WGSL value of the float op `op` (FMA, or one of MATH_UNARY / MATH_BINARY) at
    f32, or at f16 when `is_f16` (registers hold f16 values as f32)."""
    if op == "FMA":
        return f"{'f16' if is_f16 else 'f32'}_fma({', '.join(args)})"
    value = f"f32_{op.lower()}({', '.join(args)})"
    return f"f16_round({value})" if is_f16 else value
