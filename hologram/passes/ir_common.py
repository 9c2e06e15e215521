"""What the IR passes share: walking a kernel's expressions, rewriting to a fixpoint,
and the facts about the IR's semantics the rewrite rules rely on.

The IR's typing rule (docs/lowering.md, section 4): an arithmetic node converts each
operand to its own dtype (as `CVT` converts) and computes in that dtype; comparisons
compare in the promoted type of their operands; WHERE converts its sides; CAST, ISNAN
and the Atlas ops have their own rules. A rule that replaces a node by one of its
operands therefore wraps the operand in a CAST when the dtypes differ (`as_dtype`).
"""

from __future__ import annotations

from typing import Callable

import attrs

from hologram.core.types import Affine, DType, convert_const
from hologram.ir import Compute, Expr, KernelIR, OnlineMaxSum, Scan, Statement, map_statement, statement_exprs

Rule = Callable[[Expr], "Expr | None"]
MAX_ROUNDS = 32  # rewrite rounds per expression; every rule shrinks or orders, so few are needed


def map_kernel(kir: KernelIR, fn: Callable[[Expr], Expr]) -> KernelIR:
    """`kir` with `fn` applied to every expression of every statement."""
    body = tuple(map_statement(st, fn) for st in kir.body)
    return kir if all(a is b for a, b in zip(body, kir.body)) else attrs.evolve(kir, body=body)


exprs = statement_exprs
__all__ = ["exprs", "map_statement"]  # re-exported for the passes


def rewrite(e: Expr, rule: Rule) -> Expr:
    """Apply `rule` bottom-up until no node changes (at most MAX_ROUNDS passes over the
    DAG). A rule returns a replacement or None; it must not return an equal node."""
    for _ in range(MAX_ROUNDS):
        changed = False

        def fn(node: Expr) -> Expr | None:
            nonlocal changed
            new = rule(node)
            if new is not None:
                changed = True
            return new

        e = e.replace(fn)
        if not changed:
            break
    return e


def first(*rules: Rule) -> Rule:
    """A rule trying `rules` in order."""
    def rule(node: Expr) -> Expr | None:
        for r in rules:
            new = r(node)
            if new is not None:
                return new
        return None
    return rule


def as_dtype(e: Expr, dtype: DType) -> Expr:
    """`e` converted to `dtype` as an operand of a `dtype` node would be."""
    if e.dtype is dtype:
        return e
    if e.op == "CONST":
        return Expr.const(convert_const(e.arg, dtype), dtype)
    return Expr("CAST", dtype, (e,))


def const_as(e: Expr, dtype: DType) -> bool | int | float | None:
    """The value of constant `e` as an operand of a `dtype` node sees it; None if not constant."""
    return convert_const(e.arg, dtype) if e.op == "CONST" else None


class Droppable:
    """Which expressions of one statement can be left unevaluated without changing what
    the kernel does: those that cannot raise. A load through an index that is not
    provably in range may raise ExecutionError, so a rule that would drop one does not
    fire. Provably in range (as the lowering decides it): an index variable ranging over
    exactly that dimension, or a constant below a constant dimension. A reduction never
    raises at run time (an empty min/max is rejected before launch, from the source IR)."""

    def __init__(self, kir: KernelIR, st: Statement):
        self.decls = {d.name: d for d in kir.params + kir.outputs + kir.temps}
        if isinstance(st, (Compute, Scan)):
            self.extents = dict(zip(st.vars, self.decls[st.target].shape))
        elif isinstance(st, OnlineMaxSum):
            self.extents = dict(st.axes)
        else:
            self.extents = dict(zip(st.vars, st.extents))
        for e in exprs(st):
            for n in e.walk():
                if n.op == "REDUCE":
                    self.extents.update(n.arg[1])

    def _in_range(self, ix: Expr, dim: Affine) -> bool:
        if ix.op == "IDX":
            return self.extents.get(ix.arg) == dim
        return ix.op == "CONST" and dim.is_const and 0 <= ix.arg < dim.const

    def __call__(self, e: Expr) -> bool:
        for n in e.walk():
            if n.op != "LOAD":
                continue
            d = self.decls.get(n.arg)
            if d is None or len(n.srcs) != len(d.shape):
                return False
            if d.kind != "scalar" and not all(self._in_range(ix, dim) for ix, dim in zip(n.srcs, d.shape)):
                return False
        return True


def never(e: Expr) -> bool:
    """The `Droppable` of a context that knows nothing: only constants-and-leaves."""
    return not any(n.op == "LOAD" for n in e.walk())


def map_statements(kir: KernelIR, make: Callable[[Statement], Callable[[Expr], Expr]]) -> KernelIR:
    """`kir` with `make(st)` applied to every expression of each statement `st`."""
    body = tuple(map_statement(st, make(st)) for st in kir.body)
    return kir if all(a is b for a, b in zip(body, kir.body)) else attrs.evolve(kir, body=body)


def exact_widening(frm: DType, to: DType) -> bool:
    """Does every value of `frm` convert to `to` exactly (so converting on from `to`
    gives what converting from `frm` directly gives)?"""
    if frm is to or frm.is_bool:
        return True
    if to.is_bool:
        return False
    if frm.is_float:
        return to.is_float and to.bits >= frm.bits
    if to.is_float:
        mantissa = {DType.F16: 11, DType.F32: 24, DType.F64: 53}[to]
        return frm.bits - frm.is_signed <= mantissa
    if frm.is_signed:
        return to.is_signed and to.bits >= frm.bits
    return to.bits > frm.bits if to.is_signed else to.bits >= frm.bits
