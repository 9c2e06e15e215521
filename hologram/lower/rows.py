"""Lowering, part 3c: sums along short rows, a block of rows per lane.

`t[.., i] = F(sum(body(i, p), p))` where the sum runs along rows (every array read with
`p` has it in its last, contiguous index, and `i` before it: `X @ w`, `x.sum(axis=1)`,
a row's mean) is one lane per output in the plain form: each lane's loop over the row
sets up, runs `d` steps and reduces its vector partial sums horizontally. For short rows
(`X @ w` over `f32[1e6, 16]`) that setup and the horizontal step cost more than the
row. Here a block of the launch is `ROWS` consecutive outputs and its first lane
computes all of them: one loop over `p` whose body adds the terms of the `ROWS` rows
into `ROWS` accumulators, so the loop's setup, the zero-trip test and the cancel poll
come once per `ROWS` rows, and the backend vectorizes along `p` (each row's run is
contiguous) with `ROWS` independent vector partial sums in flight.

Accuracy is the in-lane sum's (loops.py): each f16/f32 term is rounded to its type as
the IR says, then accumulated exactly in f64 with `ADD.reassoc.f64`, and rounded once.

Bounds. The block's rows are `i0 + r`, `r < ROWS`, with `i0` the lead lane's `gid.x`
moved back inside the array (`MIN(gid.x, n - ROWS)`, on the path taken when `n >=
ROWS`): a last block overlapping its neighbour computes the shared rows again by the
same instructions in the same order, so both store the same bits. Every index of the
sum's body is a plain variable over exactly its dimension (`match_rows` checks), so the
verifier proves `(i0 + r) * d + p <= n * d - 1` and no access is checked. With fewer
than `ROWS` rows there is one block, and its lead lane computes the rows one at a
time with the in-lane sum.
"""

from __future__ import annotations

from typing import Mapping

from hologram.core.names import fresh_name
from hologram.core.types import Affine, DType
from hologram.ir import Compute, Expr, TensorDecl
from hologram.isa.builder import ProgramBuilder
from hologram.isa.program import AXES, REASSOC, Operand, Special
from hologram.lower.expr import ExprGen
from hologram.lower.loops import loop_nest, reduce_in_lane, zero_trip
from hologram.lower.window import window_points
from hologram.lower.plan import I64, add, affine_expr, const

ROWS = 16  # rows per block: one 512-bit vector of f32 outputs
SHORT_ROW = 48  # longer rows are summed one at a time (measured: docs/lowering.md)
F64 = DType.F64


def match_rows(st: Compute, decls: Mapping[str, TensorDecl]) -> Expr | None:
    """The REDUCE of `st` to compute a block of rows at a time (module docstring), or None."""
    target = decls[st.target]
    if not 1 <= len(st.vars) <= 3 or len(target.shape) != len(st.vars) or len(set(st.vars)) != len(st.vars):
        return None
    reduces = [e for e in st.body.walk() if e.op == "REDUCE"]
    if len(reduces) != 1 or _under_where(st.body, reduces[0]):
        return None
    (red,) = reduces
    kind, axes = red.arg
    axes = tuple(axes)
    if kind != "sum" or red.dtype not in (DType.F16, DType.F32) or len(axes) != 1:
        return None
    (p, ext), i = axes[0], st.vars[-1]
    if p in st.vars or (ext.is_const and (ext.const > SHORT_ROW or window_points(red) is not None)):
        return None  # a long constant row keeps its lane; a short one is a window (window.py)
    extents = dict(zip(st.vars, target.shape))
    extents[p] = ext
    row_read = False
    for n in red.srcs[0].walk():
        if n.op in ("REDUCE", "WHERE"):
            return None
        if n.op != "LOAD" or decls[n.arg].kind == "scalar":
            continue
        # every index a plain variable over exactly its dimension: proven, never checked,
        # so no access of the block can fail (its rows' order of evaluation differs)
        if not all(ix.op == "IDX" and extents.get(ix.arg) == dim for ix, dim in zip(n.srcs, decls[n.arg].shape)):
            return None
        names = [ix.arg for ix in n.srcs]
        if p in names[:-1]:
            return None  # read across rows, not along them
        row_read = row_read or (bool(names) and names[-1] == p and i in names[:-1])
    return red if row_read else None


def _under_where(body: Expr, red: Expr) -> bool:
    """Is `red` inside a side of a WHERE (which might not evaluate it)?"""
    stack = [body]
    while stack:
        e = stack.pop()
        if e.op == "WHERE" and any(red is n for side in e.srcs[1:] for n in side.walk()):
            return True
        if e is not red:
            stack.extend(e.srcs)
    return False


def rows_stage(pb: ProgramBuilder, name: str, st: Compute, decls: dict[str, TensorDecl], red: Expr) -> None:
    """The stage computing `st` a block of ROWS rows per lead lane (module docstring)."""
    target = decls[st.target]
    dims = tuple(reversed(target.shape))
    sb = pb.stage(name, dims, (ROWS, *(1 for _ in dims[1:])))
    gen = ExprGen(sb, decls, reduce_in_lane)
    end, one_by_one = sb.label("end"), sb.label("one_by_one")
    # the block's first lane computes all of it; the others leave at once, before anything
    # else, so a backend may skip them (isa.program.lead_lane_axes)
    sb.bra(end, pred=sb.setp("ne", I64, Special("tid.x"), 0))
    *outer, i = st.vars
    n_dim = target.shape[-1]
    for axis, var, ext in zip(AXES[1:], reversed(outer), reversed(target.shape[:-1])):
        gen.bind(var, sb.mov(I64, Special(f"gid.{axis}"), hint=var), ext)
    kind, ((p, ext),) = red.arg
    n, d = gen.value(affine_expr(n_dim)), gen.value(affine_expr(ext))
    sb.bra(one_by_one, pred=sb.setp("lt", I64, n, ROWS))
    if not ext.is_const:
        sb.bra(one_by_one, pred=sb.setp("gt", I64, d, SHORT_ROW))
    taken = {e.arg for e in st.body.walk() if e.op == "IDX"} | set(st.vars) | {p}
    base, at = fresh_name(f"{i}_block", taken), fresh_name(f"{i}_at", taken)
    index = [Expr.idx(v) for v in st.vars]

    def store(row: Operand, total: Operand | None) -> None:
        gen.push()
        gen.bind(i, row, n_dim)
        if total is not None:
            gen.scopes[-1][red] = total
        gen.store(target, index, gen.value_as(st.body, target.dtype))
        gen.pop()

    gen.push()  # nothing the block computes is reused by the other path
    # the block's rows i0 .. i0 + ROWS - 1, a last block moved back inside the array
    i0 = sb.alu("MIN", I64, Special("gid.x"), sb.alu("SUB", I64, n, ROWS), hint=f"{i}0")
    gen.bind(base, i0, n_dim - (ROWS - 1))
    dtype = red.dtype
    terms = [red.srcs[0].replace(lambda e: add(Expr.idx(base), const(r)) if e.op == "IDX" and e.arg == i else None)
             for r in range(ROWS)]
    accs = [sb.mov(F64, 0.0, hint="acc") for _ in range(ROWS)]

    def step() -> None:
        for acc, term in zip(accs, terms):
            sb.emit("ADD", F64, acc, gen.convert(gen.value_as(term, dtype), dtype, F64), dst=acc, mod=REASSOC)

    loop_nest(gen, ((p, ext),), step, terms)
    for r, acc in enumerate(accs):
        store(sb.alu("ADD", I64, i0, r, hint=i) if r else i0, gen.convert(acc, F64, dtype))
    gen.pop()
    sb.bra(end)
    sb.place(one_by_one)

    # fewer rows than a block, or long rows: the lead lane computes its block's rows that
    # lie inside the array one at a time, each with the in-lane sum (loops.py)
    def one_row() -> None:
        skip = sb.label("outside")
        row = sb.alu("ADD", I64, Special("gid.x"), gen.env[at], hint=i)
        sb.bra(skip, pred=sb.setp("ge", I64, row, n))
        store(row, None)
        sb.place(skip)

    if not ext.is_const:  # the sum's zero-trip guard, computed once for the block's rows
        gen.value(zero_trip(ext))
    loop_nest(gen, ((at, Affine(ROWS)),), one_row)
    sb.place(end)


__all__ = ["ROWS", "SHORT_ROW", "match_rows", "rows_stage"]
