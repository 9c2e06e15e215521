"""The `online-softmax` pass: a max and the sum of exponentials after it, in one read.

Softmax's normalizer is two full reductions over the same values `v`:

    m = max[j<n](v(j))
    s = sum[k<n](exp(v(k) - m))

which, as written, read the data twice: the sum needs `m` before it starts. With the
kernel's opt-in to reassociation (`reassociate = true`), this pass turns the pair into one
`OnlineMaxSum` statement, which the lowering (lower/online.py) computes in one pass over
the data: each chunk of the input gets its own maximum `m_b` and sum `s_b = sum(exp(v -
m_b))` while it is in cache, and the chunks combine as `s = sum_b s_b * exp(m_b - m)`.
Softmax then reads its input twice in all (once here, once to write `y`) instead of three
times.

The result differs from the two-pass sum only by rounding (`exp(v - m_b) * exp(m_b - m)`
is `exp(v - m)` up to a few ulp, and the terms are added in another order): exactly the
licence `reassociate` gives. NaN, inf and -inf come out as the two-pass form gives them
(docs/passes.md, "online-softmax", lists the cases). Without the opt-in the pass does
nothing.

It matches after `fuse` (which is what brings `exp(x - m)` into the sum), on 0-d f32/f64
targets reduced over one axis; `v` is any expression (`x[j]`, `x[j] * t`, ...), compared
up to the name of the reduction variable.
"""

from __future__ import annotations

import attrs

from hologram.core.types import DType
from hologram.ir import Compute, Expr, KernelIR, OnlineMaxSum, Statement
from hologram.passes.api import Pass


def _single_axis_reduce(st: Statement, kind: str, kir: KernelIR) -> Expr | None:
    """`st`'s body when `st` is `t = kind[v<E](...)` over one axis into a 0-d f32/f64 `t`."""
    if not isinstance(st, Compute) or st.vars or st.body.op != "REDUCE":
        return None
    k, axes = st.body.arg
    d = kir.decl(st.target)
    if k != kind or len(axes) != 1 or d.shape != () or d.dtype not in (DType.F32, DType.F64):
        return None
    return st.body if st.body.dtype is d.dtype else None


def _rename(e: Expr, old: str, new: str) -> Expr:
    return e.replace(lambda n: Expr.idx(new) if n.op == "IDX" and n.arg == old else None)


def _shifted_exp_of(total: Expr, m: str, dtype: DType) -> Expr | None:
    """`v` (over `total`'s variable) when `total` is `sum(exp(v - m))`."""
    e = total.srcs[0]
    if e.op != "EXP" or e.dtype is not dtype:
        return None
    d = e.srcs[0]
    if d.op != "SUB" or d.dtype is not dtype:
        return None
    v, shift = d.srcs
    if shift != Expr.load(m, dtype, ()):
        return None
    return v


def online_softmax(kir: KernelIR) -> KernelIR:
    if not kir.reassociate:
        return kir
    body = list(kir.body)
    for i, st in enumerate(body):
        top = _single_axis_reduce(st, "max", kir)
        if top is None or top.srcs[0].dtype is not top.dtype:
            continue
        ((var, extent),) = top.arg[1]
        for j in range(i + 1, len(body)):
            total = _single_axis_reduce(body[j], "sum", kir)
            if total is None or total.dtype is not top.dtype or tuple(total.arg[1])[0][1] != extent:
                continue
            v = _shifted_exp_of(total, st.target, top.dtype)
            if v is None or _rename(v, tuple(total.arg[1])[0][0], var) != top.srcs[0]:
                continue
            # at m's place: the value reads only what m's statement read
            body[i] = OnlineMaxSum(body[j].target, st.target, ((var, extent),), top.srcs[0])
            del body[j]
            break
    out = attrs.evolve(kir, body=tuple(body))
    return kir if out == kir else out


PASSES = (
    Pass("online-softmax", "ir", online_softmax, after=("fuse", "dce"), pipelines=("O2",),
         summary="with reassociate = true: max(v) and sum(exp(v - max)) in one read of the data"),
)
