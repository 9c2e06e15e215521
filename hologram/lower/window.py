"""Lowering, part 3b: in-lane reductions over small constant extents, unrolled.

A reduction whose variables all have small constant extents, the window of a stencil
(`sum(img[i + di, j + dj], di in range(3), dj in range(3))`), is not a loop: its body is
emitted once per point of the window, with each variable replaced by its constant value,
and the terms are combined in straight-line code. So there is no loop and no zero-trip
guard in the lane, the backend sees one basic block it can vectorize across lanes, and
the indices become `i + 1`, `j + 2`: sums of the lane's variables and constants, which
the lowering proves in range (ExprGen.in_range) and the verifier proves in bounds, so
the loads need no check. Value numbering shares what points have in common (the row
offset `(i + di) * w` of a row of the window).

How the terms combine (`sum prod min max`; argmin and argmax keep their loop):

- a float sum is a balanced pairwise tree, so each term passes through at most
  `ceil(log2 n)` roundings: within the contract's pairwise bound for every n.
  f16 terms are added in f32 (where they are exact, and an f16 running sum of
  terms below 1 would stop growing at 2048) and rounded once; f32 and f64 terms are
  added in their own type (docs/lowering.md, section 3, says why f32 is enough here);
- a product of f16/f32 factors multiplies in f64 and rounds once, as the loop does;
- everything else (integer sums and products, min, max) combines in order, in the
  reduction's type, exactly what the loop computes.

The first term starts each combination (no identity), so a sum of `-0.0` terms is
`-0.0`, as numpy's `add.reduce`.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping

from hologram.core.types import DType
from hologram.ir import LEAF_OPS, Expr
from hologram.isa.program import Operand
from hologram.lower.expr import BOOL_ALIAS, ExprGen
from hologram.lower.plan import I64, add, const, mul

WINDOW_POINTS = 32  # at most this many terms are unrolled
WINDOW_OPS = 512  # and at most this many operations (terms x the body's)
COMBINE = {"sum": "ADD", "prod": "MUL", "min": "MIN", "max": "MAX"}
F16, F32, F64 = DType.F16, DType.F32, DType.F64
# The type a float sum adds its terms in, and a float product multiplies them in.
SUM_IN = {F16: F32, F32: F32, F64: F64}
PRODUCT_IN = {F16: F64, F32: F64, F64: F64}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def window_points(e: Expr) -> list[dict[str, int]] | None:
    """The points of REDUCE `e`, row-major (the last variable fastest), when it is a
    small window to unroll; None when it stays a loop."""
    kind, axes = e.arg
    if kind not in COMBINE or not axes or not all(ext.is_const and ext.const > 0 for _, ext in axes):
        return None
    n = math.prod(ext.const for _, ext in axes)
    ops = sum(1 for node in e.srcs[0].walk() if node.op not in LEAF_OPS)
    if n > WINDOW_POINTS or n * max(ops, 1) > WINDOW_OPS:
        return None
    names = [v for v, _ in axes]
    return [dict(zip(names, p)) for p in itertools.product(*(range(ext.const) for _, ext in axes))]


def at_point(body: Expr, point: Mapping[str, int]) -> Expr:
    """`body` with each variable of `point` replaced by its value, and the i64 index
    arithmetic around it folded (`add(di, i)` at di = 2 is `add(i, 2)`), so an address
    takes the constant as its offset and `ExprGen.in_range` sees a variable plus a
    constant."""

    def fold(n: Expr) -> Expr | None:
        if n.op == "IDX" and n.arg in point:
            return const(point[n.arg])
        if n.dtype is not I64 or n.op not in ("ADD", "SUB", "MUL") or "CONST" not in (s.op for s in n.srcs):
            return None
        a, b = n.srcs
        if n.op == "SUB":
            if b.op != "CONST":
                return None
            b = const(-b.arg)
        folded = (mul if n.op == "MUL" else add)(a, b)
        # constants beyond i64 would not wrap here as they do at run time: leave those
        return folded if all(_I64_MIN <= c.arg <= _I64_MAX for c in folded.walk() if c.op == "CONST") else None

    return body.replace(fold)


def unrolled_reduce(gen: ExprGen, e: Expr, points: list[dict[str, int]]) -> Operand:
    """REDUCE `e` over `points` (window_points), in straight-line code."""
    kind, _ = e.arg
    dtype, body = e.dtype, e.srcs[0]
    terms = [at_point(body, p) for p in points]
    if kind == "sum" and dtype.is_float:
        acc = SUM_IN[dtype]
        values = [gen.convert(gen.value_as(t, dtype), dtype, acc) for t in terms]
        while len(values) > 1:  # a balanced tree: neighbours first, an odd one carried up
            pairs = [gen.isa("ADD", acc, values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
            values = pairs + values[len(values) - len(values) % 2:]
        return gen.convert(values[0], acc, dtype)
    ct = PRODUCT_IN[dtype] if kind == "prod" and dtype.is_float else dtype
    op = COMBINE[kind]
    op = BOOL_ALIAS.get(op, op) if ct.is_bool else op
    total = gen.convert(gen.value_as(terms[0], dtype), dtype, ct)
    for t in terms[1:]:
        total = gen.isa(op, ct, total, gen.convert(gen.value_as(t, dtype), dtype, ct))
    return gen.convert(total, ct, dtype)


__all__ = ["WINDOW_OPS", "WINDOW_POINTS", "at_point", "unrolled_reduce", "window_points"]
