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
from hologram.isa.opcodes import OPCODES, ir_ops
from hologram.passes.api import Pass
from hologram.passes.ir_common import map_kernel, rewrite

# IR op -> oracle name, for ops that convert every operand to the node's dtype: the
# operators, and the DSL functions that are one instruction (the op table's)
_SAME_TYPE = {
    "ADD": "+", "SUB": "-", "MUL": "*", "FLOORDIV": "//", "MOD": "%", "XOR": "^", "SHL": "<<", "SHR": ">>",
    "NEG": "neg", "SIGN": "sign", "FMA": "fma",
    **{spec.name: spec.dsl[0].name for spec in OPCODES.values() if spec.dsl and spec.result == "same"},
}
# IR op -> oracle name, for tests of their operand's value (a bool of the operand's type)
_TESTS = {spec.name: spec.dsl[0].name for spec in OPCODES.values() if spec.dsl and spec.result == "bool"}
_COMPARE = {"CMPEQ": "==", "CMPNE": "!=", "CMPLT": "<", "CMPLE": "<=", "CMPGT": ">", "CMPGE": ">="}
_ATLAS = {"ATLAS_CLASS": "atlas_class", "MIRROR": "mirror", "DEGREE": "degree", "NEIGHBOR": "neighbor",
          "IS_UNITY": "is_unity", "BOUND_MAP": "bound_map"}
# ops on float types only: IR DIV (true division) and FMA, and the float-only instructions
# but those the IR defines on integers too (the lowering expands them: FMOD, POW, and the
# roundings, which are the integer itself)
_FLOAT_ONLY = frozenset({"DIV", "FMA"} | {op for op, spec in ir_ops().items() if spec.types == "float"
                                         and spec.result == "same"} - {"FMOD", "POW", "FLOOR", "CEIL", "TRUNC", "RINT"})


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
    if op in _TESTS:
        return _scalar(ORACLE[_TESTS[op]](_arr(vals[0], srcs[0].dtype)), dt)
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
