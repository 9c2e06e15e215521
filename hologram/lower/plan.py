"""Lowering, part 1: rewrite a kernel's statements into the ones that become stages.

Pure IR -> IR rewrites, in this order (docs/lowering.md explains each with examples):

1. boolean  reductions of bool values run on u8 (the ISA reduces numbers only);
2. hoist    a REDUCE that does not use every enclosing index variable moves into its own
            temp indexed by the variables it does use (`sum(e)` in `y = e / sum(e)`
            becomes a 0-d temp computed by an earlier stage); in a 0-d statement every
            REDUCE but the top-level one moves out, so each full reduction gets a stage;
3. argext   a full argmin/argmax becomes two cross-lane reductions: the extreme value,
            then the smallest flat index holding it;
4. widen    a reduction whose combination order the backend picks (a full sum or
            product, a scatter-add) over a type too narrow to accumulate in
            accumulates in a wider temp, then one statement rounds it to the target
            type (WIDE_CROSS_LANE, WIDE_SCATTER);
5. dce      statements that no output depends on are dropped.

Every temporary left is materialized: one stage and a `temp` buffer each. Inlining
elementwise temporaries into their consumers is the optimizer's `fuse` pass
(hologram/passes/ir_fuse.py), which uses `hoist_all` and `bool_reductions` from here; at
`O0` nothing is inlined.

Also here: the i64 index arithmetic (`affine_expr`, `flat_index`) shared with codegen.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from hologram.core.errors import CompileError
from hologram.core.types import Affine, DType
from hologram.ir import (Accumulate, Compute, Expr, KernelIR, OnlineMaxSum, Scan, Statement, TensorDecl, defines,
                         map_statement, statement_exprs)

I64 = DType.I64
# bool reductions become u8 ones: or/and semantics for sum/prod, as numpy's logical reduce
_BOOL_KIND = {"sum": "max", "prod": "min", "min": "min", "max": "max"}

F16, F32, F64 = DType.F16, DType.F32, DType.F64
# The accumulator of a full (cross-lane) reduction, by (kind, type), where the type's own
# is too narrow: the contract bounds a sum of n terms by ~log2(n) roundings, which a
# blocked or pairwise sum in the type meets for f32 and f64 but a backend's f16 partials
# cannot (one f16 running sum stops growing at 2048 when its terms are below 1), and
# every rounding of a product reaches the result, so a product of n factors in its own
# type errs by ~sqrt(n) ulp, pairwise or not. f16 terms are exact in f32 and f32 factors
# in f64; the result is rounded once. (numpy sums f16 in f32 too.)
WIDE_CROSS_LANE = {("sum", F16): F32, ("prod", F16): F64, ("prod", F32): F64}
# A scatter-add's contributions to one element arrive in lane order; a backend may add
# them one at a time (cpu_llvm does), so f16 and f32 ones accumulate in f64, where n
# sequential additions of exact terms err by less than n * 2**-53 * sum|x|.
WIDE_SCATTER = {F16: F64, F32: F64}


# ------------------------------------------------------------------ index arithmetic
def const(v: int) -> Expr:
    return Expr.const(v, I64)


def add(a: Expr, b: Expr) -> Expr:
    """`a + b` on i64, folding constants so offsets end up as one trailing constant."""
    if a.op == "CONST" and b.op != "CONST":
        a, b = b, a
    if b.op == "CONST":
        if a.op == "CONST":
            return const(a.arg + b.arg)
        if b.arg == 0:
            return a
        if a.op == "ADD" and a.srcs[1].op == "CONST":
            return add(a.srcs[0], const(a.srcs[1].arg + b.arg))
    return Expr("ADD", I64, (a, b))


def mul(a: Expr, b: Expr) -> Expr:
    if a.op == "CONST" and b.op != "CONST":
        a, b = b, a
    if b.op == "CONST":
        if a.op == "CONST":
            return const(a.arg * b.arg)
        if b.arg == 0:
            return const(0)
        if b.arg == 1:
            return a
    return Expr("MUL", I64, (a, b))


def affine_expr(a: Affine) -> Expr:
    """An Affine dimension as an i64 expression over `SYM` leaves."""
    out = const(a.const)
    for name, c in a.terms:
        out = add(out, mul(Expr("SYM", I64, (), name), const(c)))
    return out


def flat_index(index: Sequence[Expr], shape: Sequence[Affine]) -> Expr:
    """Row-major element index, in Horner form so the outer part is loop-invariant."""
    if not index:
        return const(0)
    out = index[0]
    for ix, dim in zip(index[1:], shape[1:]):
        if ix.op == "ADD" and ix.dtype is I64 and "CONST" in (ix.srcs[0].op, ix.srcs[1].op):
            # `x[i, j + 1]`: the constant goes last, where an address takes it as its offset
            var, c = sorted(ix.srcs, key=lambda s: s.op == "CONST")
            out = add(add(mul(out, affine_expr(dim)), var), c)
        else:
            out = add(mul(out, affine_expr(dim)), ix)
    return out


def free_vars(e: Expr, memo: dict[Expr, frozenset[str]] | None = None) -> frozenset[str]:
    """Index variables `e` uses and does not bind. Computed children-first (no recursion,
    however deep `e` is); pass the same `memo` to share work across calls on one DAG."""
    memo = {} if memo is None else memo
    hit = memo.get(e)
    if hit is not None:
        return hit
    for n in e.walk():
        if n in memo:
            continue
        if n.op == "IDX":
            fv = frozenset((n.arg,))
        else:
            fv = frozenset().union(*(memo[s] for s in n.srcs))
            if n.op == "REDUCE":
                fv -= {v for v, _ in n.arg[1]}
        memo[n] = fv
    return memo[e]


def has_reduce(e: Expr) -> bool:
    return any(n.op == "REDUCE" for n in e.walk())


# ------------------------------------------------------------------------------ plan
@attrs.frozen
class Plan:
    """The statements to lower, in order, and every tensor they name.

    temps: the materialized temporaries (the kernel's own and the ones the plan made),
    in the order their defining statements run."""

    statements: tuple[Statement, ...]
    decls: dict[str, TensorDecl] = attrs.field(eq=False)
    temps: tuple[TensorDecl, ...]


def make_plan(kir: KernelIR) -> Plan:
    decls = {d.name: d for d in kir.params + kir.outputs + kir.temps}
    names = Names(decls)
    body = [map_statement(st, bool_reductions) for st in kir.body]
    split: list[Statement] = []
    for st in hoist_all(body, decls, names):
        for part in _split_argext(st, decls, names):
            split.extend(_widen(part, decls, names))
    kept = _dce(split, {d.name for d in kir.outputs})
    defined = [name for st in kept for name in defines(st)]
    for out in kir.outputs:
        if out.name not in defined:
            raise CompileError(f"kernel '{kir.name}': output '{out.name}' is never assigned")
    temps = tuple(decls[name] for name in defined if decls[name].kind == "temp")
    return Plan(tuple(kept), decls, temps)


class Names:
    """Fresh tensor names that collide with none of the kernel's."""

    def __init__(self, decls: dict[str, TensorDecl]):
        self.decls = decls

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.decls:
            name, n = f"{base}{n}", n + 1
        return name

    def temp(self, base: str, dtype: DType, shape: tuple[Affine, ...]) -> TensorDecl:
        d = TensorDecl(self.fresh(base), dtype, shape, "temp")
        self.decls[d.name] = d
        return d


def bool_reductions(e: Expr) -> Expr:
    """Every bool REDUCE of `e` as a u8 one: `REDUCE(k, bool, b)` -> `bool(REDUCE(k', u8, u8(b)))`."""
    def fix(n: Expr) -> Expr | None:
        if n.op != "REDUCE" or n.dtype is not DType.BOOL:
            return None
        kind, axes = n.arg
        body = Expr("CAST", DType.U8, (n.srcs[0],))
        return Expr("CAST", DType.BOOL, (Expr("REDUCE", DType.U8, (body,), (_BOOL_KIND[kind], axes)),))
    return e.replace(fix)


# ---------------------------------------------------------------------------- hoist
Scope = tuple[tuple[str, Affine], ...]


def hoist_all(body: Iterable[Statement], decls: dict[str, TensorDecl], names: Names) -> list[Statement]:
    """`body` with every hoistable reduction in a temp of its own (new temps are added
    to `decls`); identical reductions are hoisted once."""
    memo: dict[tuple, Expr] = {}
    out: list[Statement] = []
    for st in body:
        out.extend(_hoist(st, decls, names, memo))
    return out


def _hoist(st: Statement, decls: dict[str, TensorDecl], names: Names,
           memo: dict[tuple, Expr]) -> list[Statement]:
    """`st` with its hoistable reductions replaced by loads, preceded by their statements."""
    out: list[Statement] = []
    if isinstance(st, Compute):
        decl = decls[st.target]
        scope: Scope = tuple(zip(st.vars, decl.shape))
        # a 0-d statement that *is* a reduction is the cross-lane stage itself
        top = st.body if (not st.vars and st.body.op == "REDUCE" and st.body.dtype == decl.dtype) else None
    elif isinstance(st, Scan):
        scope, top = tuple(zip(st.vars, decls[st.target].shape)), None
    elif isinstance(st, OnlineMaxSum):
        scope, top = st.axes, None
    else:
        scope, top = tuple(zip(st.vars, st.extents)), None
    seen: dict[tuple[Expr, Scope], Expr] = {}
    fv_memo: dict[Expr, frozenset[str]] = {}

    def visit(root: Expr, scope: Scope) -> Expr:
        # an explicit stack, not recursion: kernels may hold very deep expressions
        stack = [(root, scope, False)]
        while stack:
            e, sc, expanded = stack.pop()
            inner = sc + tuple(e.arg[1]) if e.op == "REDUCE" else sc
            if expanded:
                srcs = tuple(seen[(s, inner)] for s in e.srcs)
                seen[(e, sc)] = e if srcs == e.srcs else attrs.evolve(e, srcs=srcs)
            elif (e, sc) in seen:
                continue
            elif e.op == "REDUCE" and e is not top and _hoistable(free_vars(e, fv_memo), sc):
                seen[(e, sc)] = lift(e, sc)
            elif not e.srcs:
                seen[(e, sc)] = e
            else:
                stack.append((e, sc, True))
                stack.extend((s, inner, False) for s in e.srcs)
        return seen[(root, scope)]

    def lift(e: Expr, scope: Scope) -> Expr:
        fv = free_vars(e, fv_memo)
        keep = tuple((v, x) for v, x in scope if v in fv)
        mkey = (e, keep)
        if mkey not in memo:
            d = names.temp(f"{st.target}_{e.arg[0]}", e.dtype, tuple(x for _, x in keep))
            out.extend(_hoist(Compute(d.name, tuple(v for v, _ in keep), e), decls, names, memo))
            memo[mkey] = Expr.load(d.name, e.dtype, tuple(Expr.idx(v) for v, _ in keep))
        return memo[mkey]

    out.append(map_statement(st, lambda e: visit(e, scope)))
    return out


def _hoistable(free: frozenset[str], scope: Scope) -> bool:
    vars_ = {v for v, _ in scope}
    return not vars_ or free < vars_


# -------------------------------------------------------------------------- argext
def _split_argext(st: Statement, decls: dict[str, TensorDecl], names: Names) -> list[Statement]:
    """A 0-d `t = argmax(body)` becomes `v = max(body); t = min(flat if body == v else
    count)`. NaN counts as the extreme (numpy): max/min propagate it, and `isnan(body) &
    isnan(v)` matches it, so t is the first NaN's index. Some element always matches (an
    empty argmax is refused before launch), so the `count` of elements, the first index
    past the end, never wins; a constant there (the i64 maximum) would let LLVM fold the min
    of the select into a select of the min, which its vectorizer does not recognize."""
    if not (isinstance(st, Compute) and not st.vars and st.body.op == "REDUCE"
            and st.body.arg[0] in ("argmin", "argmax") and st.body.dtype == decls[st.target].dtype):
        return [st]
    kind, axes = st.body.arg
    x = st.body.srcs[0]
    if x.dtype is DType.BOOL:
        x = Expr("CAST", DType.U8, (x,))
    v = names.temp(f"{st.target}_{kind[3:]}", x.dtype, ())
    vload = Expr.load(v.name, x.dtype, ())
    match = Expr("CMPEQ", DType.BOOL, (x, vload))
    if x.dtype.is_float:
        both_nan = Expr("AND", DType.BOOL, (Expr("ISNAN", DType.BOOL, (x,)), Expr("ISNAN", DType.BOOL, (vload,))))
        match = Expr("OR", DType.BOOL, (match, both_nan))
    flat = flat_index([Expr.idx(var) for var, _ in axes], [ext for _, ext in axes])
    count = const(1)
    for _, ext in axes:
        count = mul(count, affine_expr(ext))
    first = Expr("WHERE", I64, (match, flat, count))
    return [Compute(v.name, (), Expr("REDUCE", x.dtype, (x,), (kind[3:], axes))),
            Compute(st.target, (), Expr("REDUCE", I64, (first,), ("min", axes)))]


# --------------------------------------------------------------------------- widen
def _widen(st: Statement, decls: dict[str, TensorDecl], names: Names) -> list[Statement]:
    """A full sum or product, or a scatter-add, on a type WIDE_CROSS_LANE or WIDE_SCATTER
    widens: `t = sum(x)` over f16 becomes `t_acc = sum(f32(x)); t = f16(t_acc)`, and
    `t[key] += v` over f32 becomes `t_acc[key] += f64(v); t[z..] = f32(t_acc[z..])`."""
    if isinstance(st, Accumulate):
        decl = decls[st.target]
        wide = WIDE_SCATTER.get(decl.dtype)
        if wide is None:
            return [st]
        acc = names.temp(f"{st.target}_acc", wide, decl.shape)
        zs = tuple(f"z{k}" for k in range(len(decl.shape)))
        rounded = Expr("CAST", decl.dtype, (Expr.load(acc.name, wide, tuple(Expr.idx(z) for z in zs)),))
        return [attrs.evolve(st, target=acc.name, value=Expr("CAST", wide, (st.value,))),
                Compute(st.target, zs, rounded)]
    if not (isinstance(st, Compute) and not st.vars and st.body.op == "REDUCE"):
        return [st]
    decl = decls[st.target]
    kind, axes = st.body.arg
    wide = WIDE_CROSS_LANE.get((kind, st.body.dtype))
    if wide is None or st.body.dtype is not decl.dtype:
        return [st]
    acc = names.temp(f"{st.target}_acc", wide, ())
    terms = Expr("CAST", wide, (st.body.srcs[0],))
    return [Compute(acc.name, (), Expr("REDUCE", wide, (terms,), (kind, axes))),
            Compute(st.target, (), Expr("CAST", decl.dtype, (Expr.load(acc.name, wide, ()),)))]


# ------------------------------------------------------------------------------ dce
def _dce(body: Iterable[Statement], outputs: set[str]) -> list[Statement]:
    need = set(outputs)
    kept: list[Statement] = []
    for st in reversed(list(body)):
        if need.intersection(defines(st)):
            kept.append(st)
            for e in statement_exprs(st):
                need |= e.loads()
    return kept[::-1]
