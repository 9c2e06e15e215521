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

An in-lane REDUCE keeps an accumulator register seeded with the identity; argmin/argmax
track (best value, flat index) with numpy's first-occurrence and NaN rules.

A float sum is the one that must be both accurate (the contract's pairwise bound, which
a sequential sum in the summed type exceeds) and fast (a row of a matrix-vector product):

- f16 and f32 terms accumulate in f64 with `ADD.reassoc.f64` and round once. Each term
  is exact in f64, so in any association the sum errs by less than n * 2**-53 * sum|x|
  (far inside the contract for n < 2**29; inf and NaN terms give numpy's inf and NaN),
  and the modifier lets the backend keep vector partial sums;
- f64 terms use Kahan's compensated sum (error ~2 eps * sum|x|) with a plain sum
  alongside that replaces the result when it is not finite (an inf term turns the
  compensation into NaN). Compensation must not be reassociated, so the innermost loop
  is unrolled into K = 8 independent accumulators instead, which run side by side:

        rem = n % K ; v = 0
    rem:                                the first n % K terms, into accumulator 0
        ... v = v + 1 ; LOOP
        SET.lt p, n, K ; @p BRA done    (so n - K >= 0 below)
        blocks = n // K
    block:
        b = MIN(MAX(v, 0), n - K)       = v; the clamp proves b + K - 1 < n to the verifier
        <body at b + 0> -> acc0 ... <body at b + K-1> -> acc(K-1)
        v = v + K ; LOOP blocks, block
    done:                               the accumulators added pairwise

  (error ~(2 + log2 K) eps * sum|x|). A body that holds a reduction or a `where` of its
  own, or is large, is not unrolled (K = 1).

A float product cannot be made accurate by reordering: each multiplication's rounding
reaches the result, so n factors multiplied in their own type err by ~sqrt(n) ulp (and
up to n), pairwise or not, where the contract allows ~log2(n). f16 and f32 factors are
exact in f64, so they multiply in f64 (error below n * 2**-53 relative) and the product
is rounded once; f64 products multiply in f64. (Full reductions widen the same way,
plan.py's WIDE_CROSS_LANE.)
"""

from __future__ import annotations

from typing import Callable, Sequence

from hologram.core.types import Affine, DType, convert_const
from hologram.ir import LEAF_OPS, Expr
from hologram.isa.program import REASSOC, Operand
from hologram.lower.expr import ExprGen
from hologram.lower.plan import I64, affine_expr
from hologram.lower.window import unrolled_reduce, window_points

ACCUMULATE = {"sum": "ADD", "prod": "MUL", "min": "MIN", "max": "MAX"}
UNROLL = 8  # Kahan accumulators of an in-lane f64 sum
UNROLL_MAX_OPS = 24  # a larger body (its non-leaf IR nodes) is summed one term at a time
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
              roots: Sequence[Expr] = (),
              innermost: Callable[[str, Affine, Operand], None] | None = None) -> None:
    """Run `body` for every point of `axes` (row-major: the last axis innermost), binding
    each variable to a fresh i64 register. `roots` are the expressions the body computes,
    whose invariant parts are hoisted out of each level. `innermost(var, extent, count)`,
    when given, emits the innermost loop instead (its count is known positive)."""
    sb = gen.sb
    if any(ext.is_const and ext.const <= 0 for _, ext in axes):
        return  # statically empty: the body never runs
    counts: list[Operand] = [gen.value(affine_expr(ext)) for _, ext in axes]
    gen.extents.update(axes)  # known before the registers exist, for in-range proofs
    guards = [gen.reg(gen.value(zero_trip(ext)), DType.BOOL) for _, ext in axes if not ext.is_const]
    done = sb.label("done") if guards else None
    for p in guards:
        sb.bra(done, pred=p)
    gen.push()

    def level(k: int) -> None:
        variant = {v for v, _ in axes[k:]}
        for r in roots:
            gen.prefetch(r, variant)
        var, ext = axes[k]
        if k + 1 == len(axes) and innermost is not None:
            innermost(var, ext, counts[k])
            return
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
    if done is not None:
        sb.place(done)


def zero_trip(extent: Affine) -> Expr:
    """`extent <= 0`, the guard of a loop over `extent`: an expression, so value
    numbering shares it between loops and code around a loop may compute it first
    (contract.py does, so no guard is left in its loop for an optimizer to hoist)."""
    return Expr("CMPLE", DType.BOOL, (affine_expr(extent), Expr.const(0, I64)))


def unrolled_loop_nest(gen: ExprGen, axes: Sequence[tuple[str, Affine]], body: Callable[[int], None], k: int,
                       roots: Sequence[Expr] = ()) -> None:
    """`loop_nest` with its innermost loop unrolled by `k` (the module docstring):
    `body(slot)` runs once per point, `slot` in [0, k) naming which of k independent
    accumulators it adds to."""
    if k == 1:
        loop_nest(gen, axes, lambda: body(0), roots)
        return

    def innermost(var: str, ext: Affine, count: Operand) -> None:
        sb = gen.sb
        whole = ext.is_const and ext.const % k == 0  # a constant run of blocks (a split's slice): no remainder
        v = sb.mov(I64, 0, hint=var)
        blocks_done = sb.label("blocks_done")
        if whole:
            last = sb.mov(I64, ext.const - k, hint=f"{var}_last")
            blocks = sb.mov(I64, ext.const // k, hint=f"{var}_blocks")
        else:
            n = gen.reg(count, I64)
            rem_done = sb.label("rem_done")
            rem = sb.alu("REM", I64, n, k, hint=f"{var}_rem")
            sb.bra(rem_done, pred=gen.setp("le", I64, rem, 0))
            top = sb.label(f"rem_{var}")
            sb.place(top)
            gen.push()
            gen.bind(var, v, ext)
            body(0)
            gen.pop()
            sb.alu("ADD", I64, v, 1, dst=v)
            sb.loop(rem, top)
            sb.place(rem_done)
            sb.bra(blocks_done, pred=gen.setp("lt", I64, n, k))
            last = sb.alu("SUB", I64, n, k, hint=f"{var}_last")
            blocks = sb.alu("DIV", I64, n, k, hint=f"{var}_blocks")
        top = sb.label(f"block_{var}")
        sb.place(top)
        # = v; the verifier's bound for v (v0 + k * trips) may wrap, the clamp is exact
        base = sb.alu("MIN", I64, sb.alu("MAX", I64, v, 0), last, hint=f"{var}_at")
        for slot in range(k):
            gen.push()
            gen.bind(var, sb.alu("ADD", I64, base, slot, hint=var) if slot else base, ext)
            body(slot)
            gen.pop()
        sb.alu("ADD", I64, v, k, dst=v)
        sb.loop(blocks, top)
        sb.place(blocks_done)

    loop_nest(gen, axes, lambda: body(0), roots, innermost)


def reduce_in_lane(gen: ExprGen, e: Expr) -> Operand:
    """A REDUCE computed by one lane: a loop nest folding into an accumulator, or, over
    a small window of constant extents, straight-line code (window.py)."""
    points = window_points(e)
    if points is not None:
        return unrolled_reduce(gen, e, points)
    kind, axes = e.arg
    return (_arg_extreme if kind in ("argmin", "argmax") else _fold)(gen, kind, tuple(axes), e.srcs[0], e.dtype)


def _fold(gen: ExprGen, kind: str, axes: tuple, body: Expr, dtype: DType) -> Operand:
    if kind == "sum" and dtype.is_float:
        return _float_sum(gen, axes, body, dtype)
    if kind == "prod" and dtype in (DType.F16, DType.F32):
        return _narrow_float_product(gen, axes, body, dtype)
    acc = gen.sb.mov(dtype, identity(kind, dtype), hint="acc")
    op = ACCUMULATE[kind]

    def step() -> None:
        gen.isa(_bool_op(op) if dtype.is_bool else op, dtype, acc, gen.value_as(body, dtype), dst=acc)

    loop_nest(gen, axes, step, (body,))
    return acc


def _narrow_float_product(gen: ExprGen, axes: tuple, body: Expr, dtype: DType) -> Operand:
    """An f16/f32 product in one lane: the factors multiply in f64 and the product is
    rounded once (the module docstring)."""
    F64 = DType.F64
    acc = gen.sb.mov(F64, 1.0, hint="acc")

    def step() -> None:
        gen.isa("MUL", F64, acc, gen.convert(gen.value_as(body, dtype), dtype, F64), dst=acc)

    loop_nest(gen, axes, step, (body,))
    return gen.convert(acc, F64, dtype)


def _float_sum(gen: ExprGen, axes: tuple, body: Expr, dtype: DType) -> Operand:
    """A float sum in one lane, accurate to the contract's pairwise bound and fast (the
    module docstring)."""
    sb = gen.sb
    F64 = DType.F64
    if dtype is not F64:  # every term is exact in f64: any association of the sum will do
        acc = sb.mov(F64, 0.0, hint="acc")

        def add() -> None:
            sb.emit("ADD", F64, acc, gen.convert(gen.value_as(body, dtype), dtype, F64), dst=acc, mod=REASSOC)

        loop_nest(gen, axes, add, (body,))
        return gen.convert(acc, F64, dtype)
    k = UNROLL if _unrollable(body) else 1
    accs, comps, plains = ([sb.mov(F64, 0.0, hint=h) for _ in range(k)] for h in ("acc", "comp", "plain"))

    def kahan(slot: int) -> None:
        acc, comp, plain = accs[slot], comps[slot], plains[slot]
        x = gen.value_as(body, F64)
        y = gen.isa("SUB", F64, x, comp)
        t = gen.isa("ADD", F64, acc, y)
        gen.isa("SUB", F64, gen.isa("SUB", F64, t, acc), y, dst=comp)
        sb.mov(F64, t, dst=acc)
        gen.isa("ADD", F64, plain, x, dst=plain)

    unrolled_loop_nest(gen, axes, kahan, k, (body,))
    total, plain = _pairwise(gen, accs), _pairwise(gen, plains)
    finite = gen.setp("eq", F64, gen.isa("SUB", F64, plain, plain), 0.0)
    return gen.sel(F64, finite, total, plain)


def _unrollable(body: Expr) -> bool:
    nodes = [n for n in body.walk() if n.op not in LEAF_OPS]
    return len(nodes) <= UNROLL_MAX_OPS and not any(n.op in ("REDUCE", "WHERE") for n in nodes)


def _pairwise(gen: ExprGen, values: list[Operand]) -> Operand:
    """values[0] + values[1] + ..., added as a balanced tree (f64) that folds the upper
    half onto the lower one (len(values) is a power of two, UNROLL or 1)."""
    while len(values) > 1:
        half = len(values) // 2
        values = [gen.isa("ADD", DType.F64, values[i], values[i + half]) for i in range(half)]
    return values[0]


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
