"""Lowering, part 3: counted loops inside a lane, and the reductions built on them.

A loop nest over index variables `v0 < e0, v1 < e1, ...` is emitted as

        n0 = e0 ...                     extents, evaluated once
        SET.le p, n0, 0 ; @p BRA done   zero-trip guard (LOOP runs its body at least once)
        <invariants of the body>        loop-invariant code motion, under the guard
        v0 = 0 ; c0 = n0
    loop_v0:
        <body>                          (inner levels nest here)
        v0 = v0 + 1
        LOOP c0, loop_v0                c0 -= 1; if c0 > 0 goto loop_v0
    done:

An in-lane REDUCE keeps an accumulator register seeded with the identity (float sums are
compensated, to stay within the accuracy contract's pairwise bound); argmin/argmax track
(best value, flat index) with numpy's first-occurrence and NaN rules.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .ir import Expr
from .isa import Operand
from .lower_expr import ExprGen, convert_const
from .lower_plan import I64, affine_expr
from .types import Affine, DType

ACCUMULATE = {"sum": "ADD", "prod": "MUL", "min": "MIN", "max": "MAX"}
CROSS_LANE = {"sum": "ReduceAdd", "prod": "ReduceMul", "min": "ReduceMin", "max": "ReduceMax"}


def identity(kind: str, dtype: DType) -> bool | int | float:
    """The value a reduction starts from: 0, 1, +inf / type max (min), -inf / type min (max)."""
    if kind in ("sum", "prod"):
        return convert_const(int(kind == "prod"), dtype)
    big = float("inf") if dtype.is_float else dtype.max
    if kind in ("min", "argmin"):
        return convert_const(big, dtype)
    return convert_const(-big if dtype.is_float else dtype.min, dtype)


def loop_nest(gen: ExprGen, axes: Sequence[tuple[str, Affine]], body: Callable[[], None],
              roots: Sequence[Expr] = ()) -> None:
    """Run `body` for every point of `axes` (row-major: the last axis innermost), binding
    each variable to a fresh i64 register. `roots` are the expressions the body computes,
    whose invariant parts are hoisted out of each level."""
    sb = gen.sb
    if any(ext.is_const and ext.const <= 0 for _, ext in axes):
        return  # statically empty: the body never runs
    counts: list[Operand] = [gen.value(affine_expr(ext)) for _, ext in axes]
    gen.extents.update(axes)  # known before the registers exist, for in-range proofs
    done = sb.label("done")
    for (_, ext), n in zip(axes, counts):
        if not ext.is_const:
            sb.bra(done, pred=gen.setp("le", I64, n, 0))
    gen.push()

    def level(k: int) -> None:
        variant = {v for v, _ in axes[k:]}
        for r in roots:
            gen.prefetch(r, variant)
        var, ext = axes[k]
        iv, count = sb.mov(I64, 0, hint=var), sb.mov(I64, counts[k], hint=f"{var}_n")
        gen.bind(var, iv, ext)
        top = sb.label(f"loop_{var}")
        sb.place(top)
        gen.push()
        if k + 1 < len(axes):
            level(k + 1)
        else:
            body()
        gen.pop()
        sb.alu("ADD", I64, iv, 1, dst=iv)
        sb.loop(count, top)

    level(0)
    gen.pop()
    sb.place(done)


def reduce_in_lane(gen: ExprGen, e: Expr) -> Operand:
    """A REDUCE computed by one lane: a loop nest folding into an accumulator."""
    kind, axes = e.arg
    return (_arg_extreme if kind in ("argmin", "argmax") else _fold)(gen, kind, tuple(axes), e.srcs[0], e.dtype)


def _fold(gen: ExprGen, kind: str, axes: tuple, body: Expr, dtype: DType) -> Operand:
    if kind == "sum" and dtype.is_float:
        return _float_sum(gen, axes, body, dtype)
    acc = gen.sb.mov(dtype, identity(kind, dtype), hint="acc")
    op = ACCUMULATE[kind]

    def step() -> None:
        gen.isa(_bool_op(op) if dtype.is_bool else op, dtype, acc, gen.value_as(body, dtype), dst=acc)

    loop_nest(gen, axes, step, (body,))
    return acc


def _float_sum(gen: ExprGen, axes: tuple, body: Expr, dtype: DType) -> Operand:
    """A float sum in one lane, accurate to the accuracy contract's pairwise bound
    (~log2(n) eps * sum|x|) however long the loop: a sequential sum errs by up to n eps.

    f16 accumulates in f32 (as numpy does) and rounds once. f32/f64 use Kahan's
    compensated sum (error ~2 eps * sum|x|), with a plain sum alongside that replaces
    it when not finite: an inf or NaN term turns Kahan's compensation into NaN, while
    the plain sum is then inf or NaN exactly as numpy's."""
    sb = gen.sb
    if dtype is DType.F16:
        acc = sb.mov(DType.F32, 0.0, hint="acc")
        loop_nest(gen, axes, lambda: gen.isa("ADD", DType.F32, acc, gen.value_as(body, DType.F32), dst=acc),
                  (body,))
        return gen.convert(acc, DType.F32, dtype)
    acc, comp, plain = (sb.mov(dtype, 0.0, hint=h) for h in ("acc", "comp", "plain"))

    def step() -> None:
        x = gen.value_as(body, dtype)
        y = gen.isa("SUB", dtype, x, comp)
        t = gen.isa("ADD", dtype, acc, y)
        gen.isa("SUB", dtype, gen.isa("SUB", dtype, t, acc), y, dst=comp)
        sb.mov(dtype, t, dst=acc)
        gen.isa("ADD", dtype, plain, x, dst=plain)

    loop_nest(gen, axes, step, (body,))
    finite = gen.setp("eq", dtype, gen.isa("SUB", dtype, plain, plain), 0.0)
    return gen.sel(dtype, finite, acc, plain)


def _bool_op(op: str) -> str:
    return {"ADD": "OR", "MUL": "AND", "MIN": "AND", "MAX": "OR"}[op]


def _arg_extreme(gen: ExprGen, kind: str, axes: tuple, body: Expr, dtype: DType) -> Operand:
    """First flat index of the extreme; a NaN beats everything and the first NaN wins
    (numpy). Strict comparison keeps the first of equal values."""
    sb = gen.sb
    ct = DType.U8 if body.dtype.is_bool else body.dtype
    best = sb.mov(ct, identity(kind, ct), hint="best")
    where = sb.mov(I64, 0, hint="arg")
    flat = sb.mov(I64, 0, hint="k") if len(axes) > 1 else None

    def step() -> None:
        x = gen.value_as(body, ct)
        better = gen.setp("gt" if kind == "argmax" else "lt", ct, x, best)
        if ct.is_float:
            first_nan = gen.isa("AND", DType.BOOL, gen.setp("ne", ct, x, x),
                                gen.setp("eq", ct, best, best))
            better = gen.isa("OR", DType.BOOL, better, first_nan)
        gen.sel(ct, better, x, best, dst=best)
        gen.sel(I64, better, flat if flat is not None else gen.env[axes[0][0]], where, dst=where)
        if flat is not None:
            sb.alu("ADD", I64, flat, 1, dst=flat)

    loop_nest(gen, axes, step, (body,))
    return gen.convert(where, I64, dtype)
