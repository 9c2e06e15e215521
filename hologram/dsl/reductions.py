"""Reductions (`sum prod min max mean argmin argmax`) as IR `REDUCE` nodes.

Three ways to say what is reduced, one construction underneath:
- everything (`sum(x)`): one fresh variable per axis of the value;
- an axis (`sum(x, axis=1)`, negative axes count from the end, `keepdims=true`);
- named index variables (`sum(a[i, p] * b[p, j], p)`), bound by the analyzer.
Result dtypes are numpy's (asked of numpy once per dtype): sum/prod of bool and signed
integers accumulate in i64, unsigned in u64, floats keep their type; mean of integers
is f64 (f16 accumulates in f32, as numpy does); argmin/argmax give i64.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from hologram.core.errors import CompileError, Span
from hologram.core.types import Affine, DType, Shape, shape_str
from hologram.dsl.shapes import ONE, Val, axis, count_expr, reindex
from hologram.dsl.typerules import coerce, strengthen
from hologram.ir import Expr

KINDS = ("sum", "prod", "min", "max", "mean", "argmin", "argmax")
_NUMPY = {"sum": np.sum, "prod": np.prod, "mean": np.mean}


@functools.lru_cache(maxsize=None)
def result_dtype(kind: str, dtype: DType) -> DType:
    """numpy's result dtype of reduction `kind` over an array of `dtype`."""
    if kind in ("argmin", "argmax"):
        return DType.I64
    if kind in ("min", "max"):
        return dtype
    return DType.from_numpy(_NUMPY[kind](np.zeros(1, dtype.np)).dtype)


def reduce_expr(kind: str, body: Expr, domain: Sequence[tuple[str, Affine]]) -> Expr:
    """`kind` of the scalar `body` over `domain` ((variable, extent) pairs)."""
    d = body.dtype
    domain = tuple(domain)
    if kind == "mean":
        m = result_dtype("mean", d)
        acc = DType.F32 if m is DType.F16 else m
        if not domain:
            return coerce(Val(body), m)
        total = reduce_expr("sum", coerce(Val(body), acc), domain)
        count = count_expr([e for _, e in domain])
        count = coerce(Val.of_literal(count.arg) if count.op == "CONST" else Val(count), acc)
        mean = Expr("DIV", acc, (total, count))
        return mean if acc is m else Expr("CAST", m, (mean,))
    out = result_dtype(kind, d)
    if not domain:
        if kind.startswith("arg"):
            # the index of a 0-d value is 0, but its operand must still be computed: it may
            # hold a reduction that raises (argmin(max(a)) with `a` empty), as in numpy
            return Expr("MUL", out, (Expr.const(0, out), Expr("CAST", out, (body,))))
        return coerce(Val(body), out)
    if kind in ("sum", "prod"):
        body = coerce(Val(body), out)
    elif d is DType.BOOL:
        # the ISA's reductions are numeric: order bools as u8 (False < True)
        body = Expr("CAST", DType.U8, (body,))
        if kind in ("min", "max"):
            return Expr("CAST", DType.BOOL, (Expr("REDUCE", DType.U8, (body,), (kind, domain)),))
    return Expr("REDUCE", out, (body,), (kind, domain))


def over_axes(kind: str, val: Val, axis_arg: int | None, keepdims: bool,
              fresh: Callable[[], str], span: Span | None) -> Val:
    """A full reduction (`axis_arg is None`) or one along `axis_arg`."""
    val = strengthen(val)
    if axis_arg is None:
        reduced = list(range(val.rank))
    else:
        if not -val.rank <= axis_arg < val.rank:
            what = "a scalar" if not val.rank else f"an array of {val.rank} dimension{'s' * (val.rank != 1)} (shape {shape_str(val.shape)})"
            raise CompileError(f"axis {axis_arg} is out of range for {what}", span,
                               hint=f"axes run from {-val.rank} to {val.rank - 1}" if val.rank else None)
        reduced = [axis_arg % val.rank]
    mapping: dict[str, Expr] = {}
    domain: list[tuple[str, Affine]] = []
    kept = 0
    for k, dim in enumerate(val.shape):
        if k in reduced:
            var = fresh()
            mapping[axis(k)] = Expr.idx(var)
            domain.append((var, dim))
        else:
            if kept != k and not keepdims:
                mapping[axis(k)] = Expr.idx(axis(kept))
            kept += 1
    shape: Shape = tuple(ONE if k in reduced else d for k, d in enumerate(val.shape)) if keepdims \
        else tuple(d for k, d in enumerate(val.shape) if k not in reduced)
    body = reindex(val.expr, mapping)
    return Val(reduce_expr(kind, body, domain), shape, False, span)


def over_vars(kind: str, val: Val, domain: Sequence[tuple[str, Affine]], span: Span | None) -> Val:
    """A reduction over named index variables; the value keeps its own shape (each
    element is reduced separately)."""
    val = strengthen(val)
    return Val(reduce_expr(kind, val.expr, domain), val.shape, False, span)
