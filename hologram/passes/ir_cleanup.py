"""The `cse` and `dce` passes: whole statements.

Within one expression there is nothing to do: an `Expr` is a hash-consed DAG and the
lowering value-numbers it, so a repeated subexpression is computed once per lane. Across
statements, two temporaries computing the same array are two stages; `cse` keeps the
first. `dce` drops statements no output depends on.

Tensors are assigned once (the front end rejects a second assignment), so a temporary's
value is fixed by its statement: equal statements (up to the names of their index
variables) over equal declarations hold equal arrays.
"""

from __future__ import annotations

import attrs

from hologram.ir import Accumulate, Expr, KernelIR, OnlineMaxSum, Scan, Statement, defines
from hologram.passes.api import Pass
from hologram.passes.ir_common import exprs, map_statement


def _rename(e: Expr, names: dict[str, str]) -> Expr:
    def fn(n: Expr) -> Expr | None:
        if n.op == "IDX" and n.arg in names:
            return Expr.idx(names[n.arg])
        if n.op == "REDUCE" and any(v in names for v, _ in n.arg[1]):
            kind, axes = n.arg
            return Expr("REDUCE", n.dtype, n.srcs, (kind, tuple((names.get(v, v), x) for v, x in axes)))
        return None
    return e.replace(fn)


def _shape_key(kir: KernelIR, st: Statement) -> tuple:
    """What `st` computes, independent of its target's name and its variables' names."""
    names: dict[str, str] = {v: f"%v{k}" for k, v in enumerate(st.vars)}
    for e in exprs(st):
        for n in e.walk():
            if n.op == "REDUCE":
                for v, _ in n.arg[1]:
                    names.setdefault(v, f"%v{len(names)}")
    d = kir.decl(st.target)
    body = tuple(_rename(e, names) for e in exprs(st))
    extents = st.extents if isinstance(st, Accumulate) else ()
    scanned = (st.kind, names[st.var]) if isinstance(st, Scan) else ()
    return (type(st).__name__, d.dtype, d.shape, extents, scanned, body)


def _redirect(st: Statement, alias: dict[str, str]) -> Statement:
    def fn(n: Expr) -> Expr | None:
        return attrs.evolve(n, arg=alias[n.arg]) if n.op == "LOAD" and n.arg in alias else None
    return map_statement(st, lambda e: e.replace(fn))


def cse(kir: KernelIR) -> KernelIR:
    """A temporary whose statement equals an earlier temporary's is replaced by it."""
    temps = {d.name for d in kir.temps}
    seen: dict[tuple, str] = {}
    alias: dict[str, str] = {}
    body: list[Statement] = []
    for st in kir.body:
        st = _redirect(st, alias) if alias else st
        if st.target in temps and not isinstance(st, OnlineMaxSum):
            key = _shape_key(kir, st)
            if key in seen:
                alias[st.target] = seen[key]
                continue
            seen[key] = st.target
        body.append(st)
    if not alias:
        return kir
    return attrs.evolve(kir, body=tuple(body), temps=tuple(d for d in kir.temps if d.name not in alias))


def dce(kir: KernelIR) -> KernelIR:
    """Statements (and temporaries) that no output depends on are dropped; every output
    is kept."""
    need = {d.name for d in kir.outputs}
    kept: list[Statement] = []
    for st in reversed(kir.body):
        if need.intersection(defines(st)):
            kept.append(st)
            for e in exprs(st):
                need |= e.loads()
    if len(kept) == len(kir.body):
        return kir
    defined = {name for st in kept for name in defines(st)}
    return attrs.evolve(kir, body=tuple(reversed(kept)), temps=tuple(d for d in kir.temps if d.name in defined))


PASSES = (
    Pass("cse", "ir", cse, after=("strength", "canonicalize"), before=("fuse",),
         summary="temporaries computing the same array are computed once"),
    Pass("dce", "ir", dce, after=("fuse", "cse"),
         summary="statements no output depends on are dropped"),
)
