"""A kernel's IR with one shape symbol moved to the front of every array that has it.

The streaming planner (hologram.streaming.plan) splits a kernel along a symbol that is
the first dimension of every array with it: the rows of a stream. A Dask array can be
split along any axis, so to split gemm's `a: f32[m, k]` along `k` (a contraction) or
`x: f32[m, n]` along `n` (a reduction along rows), the IR is rewritten with `k` (`n`)
first: each such array's dimensions reordered, every access to it and every statement
over it with its indices reordered the same way. The rewritten kernel computes the same
values on the transposed arrays; hologram.dask transposes the Dask arrays going in
(`x.transpose(perm)`, lazy) and the outputs coming out.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from hologram.core.types import Affine
from hologram.ir import Accumulate, Compute, Expr, KernelIR, OnlineMaxSum, Scan, TensorDecl, map_statement
from hologram.streaming.plan import base_symbols


@attrs.frozen
class Leading:
    """`kir` with `symbol` first: `perms` maps each array reordered to its old axes in
    their new order (`kir`'s shape k is the old shape's `perm[k]`)."""

    kir: KernelIR
    perms: Mapping[str, tuple[int, ...]]


def lead_with(kir: KernelIR, symbol: str) -> Leading | None:
    """`kir` rewritten with `symbol` the first dimension of every array that has it; None
    when some array has it other than once as a plain dimension, or a scatter writes an
    array it would reorder (its key is a flat index)."""
    lead = Affine.of(symbol)
    perms: dict[str, tuple[int, ...]] = {}
    for d in (*kir.params, *kir.outputs, *kir.temps):
        at = [k for k, x in enumerate(d.shape) if symbol in base_symbols(Affine.of(x))]
        if not at:
            continue
        if len(at) > 1 or Affine.of(d.shape[at[0]]) != lead:
            return None
        if at[0] != 0:
            perms[d.name] = (at[0], *(k for k in range(len(d.shape)) if k != at[0]))
    if not perms:
        return Leading(kir, {})
    if any(isinstance(st, (Accumulate, OnlineMaxSum)) and st.target in perms for st in kir.body):
        return None

    def decl(d: TensorDecl) -> TensorDecl:
        perm = perms.get(d.name)
        return d if perm is None else attrs.evolve(d, shape=tuple(d.shape[k] for k in perm))

    def access(n: Expr) -> Expr | None:
        perm = perms.get(n.arg) if n.op == "LOAD" else None
        return None if perm is None else attrs.evolve(n, srcs=tuple(n.srcs[k] for k in perm))

    body = []
    for st in kir.body:
        st = map_statement(st, lambda e: e.replace(access))
        perm = perms.get(st.target)
        if perm is not None and isinstance(st, (Compute, Scan)):
            st = attrs.evolve(st, vars=tuple(st.vars[k] for k in perm))
        body.append(st)
    rewritten = attrs.evolve(kir, params=tuple(map(decl, kir.params)), outputs=tuple(map(decl, kir.outputs)),
                             temps=tuple(map(decl, kir.temps)), body=tuple(body))
    return Leading(rewritten, perms)


def inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation undoing `perm`."""
    out = [0] * len(perm)
    for k, p in enumerate(perm):
        out[p] = k
    return tuple(out)
