"""Lowering, part 1b: a long reduction into few outputs, split into slices that run in
parallel.

A statement `t[v] = F(REDUCE(k, body, ((i, n), *rest)))` (k a sum, product, min or max;
one or two target variables) lowers to one lane per output, each folding all `n` of
its terms in a loop. When the outputs are few and `n` is long (`x.T @ v` over a
`[1e6, 16]` matrix, `x.sum(axis=0)`, a histogram's row of bins) that is a handful of
lanes doing everything, one block on one thread. So the plan splits `i` into
`S = n // SLICE` slices of `SLICE` rows and a tail of `n - SLICE * S` rows:

    t_part[s, v] = REDUCE(k, acc(body[i := SLICE*s + ii]), ((ii, SLICE), *rest))
    t[v] = F(cast(REDUCE(k, t_part[s, v], ((s, S),))  (+)  REDUCE(k, acc(body[i := SLICE*S + r]),
                                                                     ((r, n - SLICE*S), *rest))))

The first statement is a stage over `[S, *v]` lanes, which the backends spread across
their threads (or a GPU's blocks); the second combines each output's `S` partials in
order and folds the tail. Nothing depends on the thread count, so the result is the
same on every backend and machine for given shapes. The form follows the shapes at
launch: below `SLICE` rows `S` is 0, the first stage has no lanes and the second is the
one-lane-per-output loop it replaces.

Accuracy. The partials have the type a full reduction accumulates in (plan.py's
`WIDE_CROSS_LANE`: an f16 sum in f32, an f16 or f32 product in f64, else the reduced
type), each slice folded by the accurate in-lane loop (loops.py) and rounded once. An
f32 sum thus errs by at most `u sum|slice|` per partial, the partials and the tail are
summed in f64 and rounded twice more: `3 u sum|x|` in all, inside the contract's
`2 (log2 n + 1) u sum|x|` for every `n` that splits (`>= SLICE`). Integer sums wrap and
min/max are exact in any order.

Not split: a statement the register-tiled contraction takes (contract.py), more than
one reduction in a statement, argmin/argmax (their partials would need the index), a
reduction of a constant extent below two slices (small windows and short rows),
statements with three or more target variables (the slice axis would be a fourth, which
loops inside the lane instead of spreading), two target variables that no array is read
with together (a matrix product `a[i, p] * b[p, j]`: its outputs are as many as both
extents, plenty of lanes), and reductions along rows (every array
read with the reduced variable has it in its last index only: `x.sum(axis=1)`, `A @ x`):
their lanes, one per row, already read contiguous runs, and the split's second stage
would cost a small call (many short rows, the common case) more than it saves. A few
very long rows stay on one lane each.
"""

from __future__ import annotations

import attrs

from hologram.core.dims import DimAlgebra
from hologram.core.names import fresh_name
from hologram.core.types import Affine
from hologram.ir import Compute, Expr, Statement, defines
from hologram.lower.contract import match_contraction
from hologram.lower.plan import WIDE_CROSS_LANE, Names, Plan, add, affine_expr, const, mul

SLICE = 4096  # rows per partial: a lane's loop long enough to amortize, short enough to spread
COMBINE = {"sum": "ADD", "prod": "MUL", "min": "MIN", "max": "MAX"}


def split_reductions(plan: Plan) -> Plan:
    """`plan` with every long reduction into few outputs split (the module docstring);
    new temporaries are added to `plan.decls`."""
    names = Names(plan.decls)
    statements: list[Statement] = []
    for st in plan.statements:
        statements.extend(_split(st, plan, names))
    if len(statements) == len(plan.statements):
        return plan
    defined = [name for st in statements for name in defines(st)]
    temps = tuple(plan.decls[n] for n in defined if plan.decls[n].kind == "temp")
    return Plan(tuple(statements), plan.decls, temps)


def _split(st: Statement, plan: Plan, names: Names) -> list[Statement]:
    red = _long_reduction(st, plan)
    if red is None:
        return [st]
    kind, ((i, n), *rest) = red.arg
    rest = tuple(rest)
    taken = set(st.vars) | {v for node in st.body.walk() if node.op == "REDUCE" for v, _ in node.arg[1]}
    s, ii, r = (fresh_name(base, taken) for base in ("slice", f"{i}_in", f"{i}_tail"))
    slices = DimAlgebra().floordiv(n, SLICE)
    acc = WIDE_CROSS_LANE.get((kind, red.dtype), red.dtype)
    target = plan.decls[st.target]
    part = names.temp(f"{st.target}_part", acc, (slices, *target.shape))

    def terms(row: Expr) -> Expr:
        body = red.srcs[0].replace(lambda e: row if e.op == "IDX" and e.arg == i else None)
        return body if acc is red.dtype else Expr("CAST", acc, (body,))

    sliced = Expr("REDUCE", acc, (terms(add(mul(Expr.idx(s), const(SLICE)), Expr.idx(ii))),),
                  (kind, ((ii, Affine.of(SLICE)), *rest)))
    index = tuple(Expr.idx(v) for v in st.vars)
    partials = Expr("REDUCE", acc, (Expr.load(part.name, acc, (Expr.idx(s), *index)),), (kind, ((s, slices),)))
    done = slices * SLICE
    tail = Expr("REDUCE", acc, (terms(add(affine_expr(done), Expr.idx(r))),), (kind, ((r, n - done), *rest)))
    whole = Expr(COMBINE[kind], acc, (partials, tail))
    if acc is not red.dtype:
        whole = Expr("CAST", red.dtype, (whole,))
    body = st.body.replace(lambda e: whole if e is red else None)  # nothing below it changes
    return [Compute(part.name, (s, *st.vars), sliced), attrs.evolve(st, body=body)]


def _long_reduction(st: Statement, plan: Plan) -> Expr | None:
    """The one reduction of `st` worth splitting, or None (the module docstring)."""
    if not isinstance(st, Compute) or len(st.vars) not in (1, 2) or len(set(st.vars)) != len(st.vars):
        return None
    reduces = [e for e in st.body.walk() if e.op == "REDUCE"]
    if len(reduces) != 1:
        return None
    (red,) = reduces
    kind, axes = red.arg
    if kind not in COMBINE or red.dtype.is_bool or not axes:
        return None
    (i, n), *_ = axes
    if i in st.vars or (n.is_const and n.const < 2 * SLICE):
        return None
    if match_contraction(st, plan.decls) is not None or _along_rows(red.srcs[0], i):
        return None
    if len(st.vars) == 2 and not any(n.op == "LOAD" and set(st.vars) <= _index_vars(n) for n in red.srcs[0].walk()):
        return None  # a matrix product's outputs (a[i, p] * b[p, j]): as many as both extents
    return red


def _index_vars(load: Expr) -> set[str]:
    return {m.arg for ix in load.srcs for m in ix.walk() if m.op == "IDX"}


def _along_rows(body: Expr, var: str) -> bool:
    """Whether every array `body` reads with `var` has it in its last (contiguous) index
    only: a reduction along rows, whose lanes (one per row) each read contiguous runs."""
    def uses(e: Expr) -> bool:
        return any(m.op == "IDX" and m.arg == var for m in e.walk())
    return all(not any(uses(ix) for ix in n.srcs[:-1])
               for n in body.walk() if n.op == "LOAD" and n.srcs and uses(n))


__all__ = ["SLICE", "split_reductions"]
