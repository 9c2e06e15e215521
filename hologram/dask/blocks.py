"""Which shape symbols a kernel computes block by block, read from its IR.

A symbol `s` is *blockwise* in a kernel when splitting every array along `s` into the
same pieces and running the kernel on each piece gives the pieces of its outputs: each
output element at position `t` along `s` reads elements at position `t` of the inputs
and of the temporaries, and nothing else that depends on `s`. In the IR that is:

- every array that has `s` in its shape has it once, as a plain dimension (`f32[n, d]`,
  not `f32[n - 2]` nor `f32[n, n]`), and every output has it;
- every statement whose target has `s` (at position `k`, its variable `v`) reads every
  array with `s` (at position `q`) at index `v` exactly (`x[v, ...]`: not `x[v + 1]`,
  not `x[idx[v]]`), uses `v` nowhere else (not as a value: `f32(i)` differs per piece),
  and is no scan along `v`;
- no statement reduces over `s`, reads an array with `s` without having `s` itself (a
  reduction), or uses the size `s` as a value (`f32(n)`: a piece's `n` is its own).

Elementwise and broadcasting statements are blockwise in every symbol; a row-wise
kernel (layernorm over `f32[m, d]`) in its rows `m`; a contraction (`a @ b`) in its free
indices, not in the contracted one. hologram.dask runs blockwise symbols as Dask's
blockwise does, and everything else through the streaming planner or whole.
"""

from __future__ import annotations

from hologram.core.types import Affine
from hologram.ir import Accumulate, Compute, Expr, KernelIR, OnlineMaxSum, Scan, Statement, statement_exprs
from hologram.streaming.plan import base_symbols


def blockwise_symbols(kir: KernelIR) -> frozenset[str]:
    """The shape symbols `kir` is blockwise in (module docstring)."""
    return frozenset(s for s in kir.symbols if s.isidentifier() and why_not_blockwise(kir, s) is None)


def why_not_blockwise(kir: KernelIR, symbol: str) -> Statement | str | None:
    """None when `kir` is blockwise in `symbol`; else the statement that is not (or, when
    a declaration is at fault, the name of the array)."""
    lead = Affine.of(symbol)
    position: dict[str, int] = {}
    lacking = None
    for d in (*kir.params, *kir.outputs, *kir.temps):
        at = [k for k, x in enumerate(d.shape) if _has(x, symbol)]
        if not at:
            lacking = lacking or (d.name if d.kind == "output" else None)
            continue
        if len(at) > 1 or Affine.of(d.shape[at[0]]) != lead:
            return d.name
        position[d.name] = at[0]
    for st in kir.body:
        if not _blockwise_statement(st, symbol, position):
            return st
    return lacking  # an output without the symbol: every block would compute all of it


def _blockwise_statement(st: Statement, symbol: str, position: dict[str, int]) -> bool:
    if isinstance(st, (Accumulate, OnlineMaxSum)):  # scatters and fused online pairs: reductions
        return not any(_mentions(e, symbol, position) for e in statement_exprs(st)) and st.target not in position \
            and not any(_has(x, symbol) for x in getattr(st, "extents", ()))
    assert isinstance(st, (Compute, Scan))
    exprs = statement_exprs(st)
    if st.target not in position:
        return not any(_mentions(e, symbol, position) for e in exprs)
    var = st.vars[position[st.target]]
    if isinstance(st, Scan) and st.var == var:
        return False
    for e in exprs:
        for n in e.walk():
            if n.op == "SYM" and _has(n.arg, symbol):
                return False
            if n.op == "REDUCE" and any(_has(x, symbol) for _, x in n.arg[1]):
                return False
            for k, src in enumerate(n.srcs):
                indexing = n.op == "LOAD" and position.get(n.arg) == k
                if indexing and src != Expr.idx(var):
                    return False
                if not indexing and src.op == "IDX" and src.arg == var:
                    return False  # the position used as a value: it differs per piece
    return not (exprs and exprs[0].op == "IDX" and exprs[0].arg == var)


def _mentions(e: Expr, symbol: str, position: dict[str, int]) -> bool:
    """Whether `e` reads an array with `symbol` in its shape, reduces over it or uses it."""
    for n in e.walk():
        if n.op == "LOAD" and n.arg in position:
            return True
        if n.op == "SYM" and _has(n.arg, symbol):
            return True
        if n.op == "REDUCE" and any(_has(x, symbol) for _, x in n.arg[1]):
            return True
    return False


def _has(dim: object, symbol: str) -> bool:
    return symbol in base_symbols(Affine.of(dim))
