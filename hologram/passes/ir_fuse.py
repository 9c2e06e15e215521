"""The `fuse` pass: elementwise work runs inside its consumers, never through memory.

The lowering materializes every temporary it is given (one stage and a buffer each).
This pass decides which ones are not needed:

1. every temporary defined by a `Compute` with no `REDUCE` in its body (elementwise) is
   substituted into each of its loads, its index variables renamed to the load's index
   expressions (`e[k]` with `e[i] = exp(x[i] - m)` becomes `exp(x[k] - m)`), converted
   to the temporary's dtype when the body's differs (what the store would have done);
   its statement and declaration go away. Chains inline transitively; an expression is
   a DAG, so a temp used twice is one shared node, computed once per lane;
2. reductions are split out as the lowering would (`lower_plan.hoist_all`: a reduction
   not using every enclosing index variable gets a temporary of its own, bool
   reductions run on u8), so a temporary that was elementwise around a reduction
   (`mu = sum(x, axis=1) / n`) becomes elementwise;
3. step 1 again, for those.

Softmax (`m = max(x); e = exp(x - m); y = e / sum(e)`) becomes `m`, `y_sum =
sum(exp(x - m))` and `y = exp(x - m) / y_sum`: three stages, `e` never stored, `y`
written once. Without this pass (O0) it is four: `m`, `e`, `y_sum`, `y`.

Substitution recomputes an elementwise temp in every consumer (and in every iteration of
a reduction over it) instead of loading it: the trade the lowering always made, since
memory traffic, not arithmetic, bounds these kernels. Values are unchanged: each
consumer computes exactly the expression the temp stored, with the same conversion.
Errors can only go away: an element no consumer reads is no longer computed, so an
out-of-range load there no longer raises (docs/passes.md, "fuse").
"""

from __future__ import annotations

from typing import Sequence

import attrs

from ..core.ir import Compute, Expr, KernelIR, Statement, TensorDecl
from ..core.lower_plan import Names, bool_reductions, has_reduce, hoist_all
from .api import Pass
from .ir_common import map_statement


def inline_elementwise(body: Sequence[Statement], decls: dict[str, TensorDecl]) -> list[Statement]:
    """`body` with every elementwise temp substituted into its consumers (and dropped)."""
    inline: dict[str, Compute] = {}

    def sub(node: Expr) -> Expr | None:
        if node.op != "LOAD" or node.arg not in inline:
            return None
        d = inline[node.arg]
        env = dict(zip(d.vars, node.srcs))
        value = d.body.replace(lambda n: env.get(n.arg) if n.op == "IDX" else None)
        dtype = decls[d.target].dtype
        return value if value.dtype is dtype else Expr("CAST", dtype, (value,))

    out: list[Statement] = []
    for st in body:
        st = map_statement(st, lambda e: e.replace(sub))
        if isinstance(st, Compute) and decls[st.target].kind == "temp" and not has_reduce(st.body):
            inline[st.target] = st
        else:
            out.append(st)
    return out


def fuse(kir: KernelIR) -> KernelIR:
    decls = {d.name: d for d in kir.params + kir.outputs + kir.temps}
    body = inline_elementwise(kir.body, decls)
    body = [map_statement(st, bool_reductions) for st in body]
    body = inline_elementwise(hoist_all(body, decls, Names(decls)), decls)
    temps = tuple(decls[st.target] for st in body if decls[st.target].kind == "temp")
    out = attrs.evolve(kir, body=tuple(body), temps=temps)
    return kir if out == kir else out


PASSES = (
    Pass("fuse", "ir", fuse, after=("cse",),
         summary="elementwise temporaries are computed inside their consumers (softmax: 3 stages, e never stored)"),
)
