"""The `fuse` pass: elementwise work runs inside its consumers, never through memory.

The lowering materializes every temporary it is given (one stage and a buffer each).
This pass decides which ones are not needed:

1. every temporary defined by a `Compute` with no `REDUCE` in its body (elementwise) is
   substituted into each of its loads, its index variables renamed to the load's index
   expressions (`e[k]` with `e[i] = exp(x[i] - m)` becomes `exp(x[k] - m)`), converted
   to the temporary's dtype when the body's differs (what the store would have done);
   its statement and declaration go away. Chains inline transitively; an expression is
   a DAG, so a temp used twice is one shared node, computed once per lane;
2. reductions are split out as the lowering would (`lower.plan.hoist_all`: a
   reduction not using every enclosing index variable gets a temporary of its own, bool
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

from hologram.ir import Compute, Expr, KernelIR, Statement, TensorDecl
from hologram.lower.plan import Names, bool_reductions, free_vars, has_reduce, hoist_all
from hologram.passes.api import Pass
from hologram.passes.ir_common import map_statement

# A temporary whose substituted expression would have more nodes than this stays a
# stage of its own: recomputing it in every consumer stops paying long before, and
# bounding it keeps the fused expressions, the compile and the lowered stages linear in
# the kernel (a chain `t_k[i] = t_(k-1)[n - 1 - i] + x[i]` renames a whole expression
# per statement). docs/dsl.md, "Limits". The largest in the stdlib and the tests has 44.
MAX_FUSED_NODES = 1 << 8


def inline_elementwise(body: Sequence[Statement], decls: dict[str, TensorDecl]) -> list[Statement]:
    """`body` with every elementwise temp substituted into its consumers (and dropped),
    unless its substituted expression would pass MAX_FUSED_NODES nodes.

    Linear in the number of statements: a load at the temp's own index variables (the
    common case: `t2 = t1 + 1`) is the temp's substituted expression itself, shared, not
    a copy; a load at other indices renames it once per load; a statement written
    without REDUCE has none after substitution either (what is substituted has none),
    so only the others are searched again; and an expression's size is counted as it is
    built (an upper bound: its own nodes and those of the temps it takes in)."""
    inline: dict[str, Compute] = {}
    size: dict[str, int] = {}  # inlined temp -> (at most) the nodes of its expression
    kept = _recomputed_per_output(body, decls)
    renamed: dict[tuple, tuple[tuple[Expr, ...], Expr]] = {}  # by identity: equal DAGs may compare slowly

    def value_at(load: Expr) -> Expr:
        d = inline[load.arg]
        if all(s.op == "IDX" and s.arg == v for s, v in zip(load.srcs, d.vars)):
            return d.body
        key = (load.arg, tuple(map(id, load.srcs)), load.site)
        if key not in renamed:  # the indices are kept alive with it, so their ids stay theirs
            env = dict(zip(d.vars, load.srcs))
            body = d.body if load.site is None else _at_site(d.body, frozenset(d.vars), load.site)
            renamed[key] = load.srcs, body.replace(lambda n: env.get(n.arg) if n.op == "IDX" else None)
        return renamed[key][1]

    out: list[Statement] = []
    for st in body:
        reduces = isinstance(st, Compute) and has_reduce(st.body)  # as written
        nodes, taken = 0, {}

        def sub(node: Expr) -> Expr | None:
            nonlocal nodes
            nodes += 1
            if node.op != "LOAD" or node.arg not in inline:
                return None
            value = value_at(node)
            taken[id(value)] = size[node.arg]
            dtype = decls[node.arg].dtype
            return value if value.dtype is dtype else Expr("CAST", dtype, (value,))

        st = map_statement(st, lambda e: e.replace(sub))
        estimate = nodes + sum(taken.values())
        if isinstance(st, Compute) and decls[st.target].kind == "temp" and not (reduces and has_reduce(st.body)) \
                and estimate <= MAX_FUSED_NODES and not (st.target in kept and _costly(st.body)):
            inline[st.target] = st
            size[st.target] = estimate
        else:
            out.append(st)
    return out


# What an elementwise temp may hold and still be recomputed wherever it is read: arithmetic
# a load or two costs as much as; a transcendental or a division does not.
CHEAP_OPS = frozenset({"LOAD", "CAST", "IDX", "CONST", "SYM", "SCALAR", "ADD", "SUB", "MUL", "NEG", "FMA", "MIN",
                       "MAX", "ABS", "WHERE", "CMPEQ", "CMPNE", "CMPLT", "CMPLE", "CMPGT", "CMPGE", "AND", "OR",
                       "NOT"})


def _costly(e: Expr) -> bool:
    return any(n.op not in CHEAP_OPS for n in e.walk())


def _recomputed_per_output(body: Sequence[Statement], decls: dict[str, TensorDecl]) -> set[str]:
    """Temps some statement reads inside a reduction at an index that none of the
    statement's own variables reach (`g[j] = sum(x[i, j] * p[i], i)` reads `p[i]` once per
    output `j`): substituted there, the temp would be computed once per output, not once.
    Such a temp stays a stage of its own when it is costly. (A reduction that does not
    use every variable of its statement is hoisted into a temp of its own by step 2 and
    computed once: `y = e / sum(e)` is not such a read.)"""
    out: set[str] = set()
    for st in body:
        if not isinstance(st, Compute) or not st.vars:
            continue
        outputs = set(st.vars)
        # a reduction using fewer than all of them is hoisted into its own temp (step 2)
        for red in (n for n in st.body.walk() if n.op == "REDUCE" and outputs <= free_vars(n)):
            for n in red.srcs[0].walk():
                if n.op == "LOAD" and decls[n.arg].kind == "temp" and \
                        not any(m.op == "IDX" and m.arg in outputs for s in n.srcs for m in s.walk()):
                    out.add(n.arg)
    return out


def _at_site(body: Expr, variables: frozenset[str], site: int) -> Expr:
    """`body` with the loads indexed by `variables` pointing at `site`: a temporary
    substituted at another load's indices (`t[idx[i]]`) reads where that load read, so a
    failed check there is that load's, on its line (docs/isa.md, "Sites")."""
    uses: dict[int, bool] = {}  # by identity: `replace` keeps every node it passes alive

    def mark(n: Expr) -> Expr | None:
        used = n.op == "IDX" and n.arg in variables or any(uses.get(id(s), False) for s in n.srcs)
        out = attrs.evolve(n, site=site) if used and n.op == "LOAD" and n.site != site else None
        uses[id(n)] = uses[id(out if out is not None else n)] = used
        return out

    return body.replace(mark)


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
