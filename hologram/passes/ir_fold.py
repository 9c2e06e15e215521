"""The `fold` pass: constant folding with the oracle's exact semantics.

A node whose operands are all constants is computed now, with numpy in the node's dtype
through `hologram.core.semantics` (the semantic reference every backend is checked
against): integer division and remainder by zero give 0, integer overflow wraps, shift
amounts are masked to the bit width, float->int conversion saturates (NaN -> 0), float
`**` is C99 `pow`. Operands are first converted to the node's dtype exactly as the
lowering converts them (`convert_const`, i.e. as `CVT` does).

Transcendental functions are folded too, to numpy's value: that is the value the oracle
defines, and the backends compute the same function under the accuracy contract, so a
folded `exp(1.0)` may differ from an unfolded one in the last bit, never by more than the
contract allows. An op on a type it does not take (`-` on bool) is left for the
lowering to report.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from hologram.core.semantics import ORACLE, power
from hologram.core.types import DType, convert_const, promote
from hologram.ir import ATLAS_OPS, COMPARISONS, Expr, KernelIR
from hologram.passes.api import Pass
from hologram.passes.ir_common import map_kernel, rewrite

# IR op -> oracle name, for ops that convert every operand to the node's dtype
_SAME_TYPE = {
    "ADD": "+", "SUB": "-", "MUL": "*", "FLOORDIV": "//", "MOD": "%", "MIN": "minimum", "MAX": "maximum",
    "ATAN2": "arctan2", "HYPOT": "hypot", "FMOD": "fmod", "COPYSIGN": "copysign", "XOR": "^",
    "SHL": "<<", "SHR": ">>", "NEG": "neg", "ABS": "abs", "SQRT": "sqrt", "RSQRT": "rsqrt", "EXP": "exp",
    "EXP2": "exp2", "EXPM1": "expm1", "LOG": "log", "LOG2": "log2", "LOG10": "log10", "LOG1P": "log1p",
    "SIN": "sin", "COS": "cos", "TAN": "tan", "ASIN": "arcsin", "ACOS": "arccos", "ATAN": "arctan",
    "SINH": "sinh", "COSH": "cosh", "TANH": "tanh", "ASINH": "arcsinh", "ACOSH": "arccosh",
    "ATANH": "arctanh", "FLOOR": "floor", "CEIL": "ceil", "TRUNC": "trunc", "RINT": "rint",
    "SIGN": "sign", "SIGMOID": "sigmoid", "FMA": "fma", "ERF": "erf", "ERFC": "erfc", "CBRT": "cbrt",
}
_COMPARE = {"CMPEQ": "==", "CMPNE": "!=", "CMPLT": "<", "CMPLE": "<=", "CMPGT": ">", "CMPGE": ">="}
_ATLAS = {"ATLAS_CLASS": "atlas_class", "MIRROR": "mirror", "DEGREE": "degree", "NEIGHBOR": "neighbor",
          "IS_UNITY": "is_unity", "BOUND_MAP": "bound_map"}
_FLOAT_ONLY = frozenset({"DIV", "SQRT", "RSQRT", "EXP", "EXP2", "EXPM1", "LOG", "LOG2", "LOG10", "LOG1P",
                         "SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN", "SINH", "COSH", "TANH", "ASINH",
                         "ACOSH", "ATANH", "ERF", "ERFC", "CBRT", "SIGMOID", "ATAN2", "HYPOT", "COPYSIGN", "FMA"})


def _arr(value: Any, dtype: DType) -> np.ndarray:
    return np.asarray(convert_const(value, dtype), dtype=dtype.np)


def _scalar(result: Any, dtype: DType) -> bool | int | float:
    """A numpy result as the Python constant of `dtype` (converted as CVT would, in case
    numpy computed in a wider type)."""
    v = np.asarray(result).reshape(())
    if v.dtype.kind == "f" and dtype.is_float:
        return float(v.astype(dtype.np))
    if v.dtype.kind == "f":
        return convert_const(float(v), dtype)
    return convert_const(bool(v) if v.dtype.kind == "b" else int(v), dtype)


def _int_power(a: int, b: int, dtype: DType) -> int:
    """Integer `**`, wrapping; a negative exponent gives the truncated `1 / a**-b` (the
    DSL's answer, as the lowering computes it)."""
    if b < 0:
        return 1 if a == 1 else (1 if b % 2 == 0 else -1) if a == -1 and dtype.is_signed else 0
    return convert_const(pow(a, b, 1 << dtype.bits), dtype)


def evaluate(node: Expr) -> Expr | None:
    """`node` computed, when all its operands are constants and its op is known here."""
    if not node.srcs or any(s.op != "CONST" for s in node.srcs):
        return None
    op, dt = node.op, node.dtype
    vals = [s.arg for s in node.srcs]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = _compute(op, dt, node.srcs, vals)
    except (ArithmeticError, ValueError, TypeError):
        return None  # e.g. an op on a type it does not take: leave it to the lowering's error
    return None if value is None else Expr.const(value, dt)


def _compute(op: str, dt: DType, srcs: tuple[Expr, ...], vals: list[Any]) -> bool | int | float | None:
    if op == "CAST":
        return convert_const(vals[0], dt)
    if op in _FLOAT_ONLY and not dt.is_float:
        return None
    if op in COMPARISONS:
        a, b = srcs
        t = a.dtype if a.dtype is b.dtype else promote(a.dtype, b.dtype)
        return _scalar(ORACLE[_COMPARE[op]](_arr(vals[0], t), _arr(vals[1], t)), dt)
    if op == "ISNAN":
        return convert_const(isinstance(vals[0], float) and math.isnan(vals[0]) and srcs[0].dtype.is_float, dt)
    if op in ATLAS_OPS:
        args = [_arr(v, DType.I64) for v in vals]
        out = ORACLE[_ATLAS[op]](*args)
        return _scalar(out, dt)
    if op == "WHERE":
        return convert_const(vals[1] if convert_const(vals[0], DType.BOOL) else vals[2], dt)
    args = [_arr(v, dt) for v in vals]
    if op == "DIV":
        return _scalar(ORACLE["/"](*args), dt)
    if op == "POW":
        if dt.is_float:
            return _scalar(power(*args), dt)
        return _int_power(int(args[0]), int(args[1]), dt)
    if op in ("AND", "OR", "NOT"):
        if dt.is_bool:
            fn = {"AND": "and", "OR": "or", "NOT": "not"}[op]
        else:
            fn = {"AND": "&", "OR": "|", "NOT": "~"}[op]
        return _scalar(ORACLE[fn](*args), dt)
    if op in ("FLOOR", "CEIL", "TRUNC", "RINT") and not dt.is_float:
        return convert_const(vals[0], dt)  # the value itself, as the lowering does
    if op in ("ABS", "SIGN") and dt.is_bool:
        return convert_const(vals[0], dt)
    if op == "NEG" and dt.is_bool:
        return None  # no such instruction: the lowering reports it
    name = _SAME_TYPE.get(op)
    if name is None:
        return None
    return _scalar(ORACLE[name](*args), dt)


def fold_expr(e: Expr) -> Expr:
    return rewrite(e, evaluate)


def fold(kir: KernelIR) -> KernelIR:
    return map_kernel(kir, fold_expr)


PASSES = (
    Pass("fold", "ir", fold, before=("canonicalize",),
         summary="constant folding with the oracle's exact semantics (numpy in the node's dtype)"),
)
