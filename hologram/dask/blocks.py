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

from typing import Mapping

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


# ------------------------------------------------------------------------- windows
def window_reach(kir: KernelIR, symbol: str, symbols: Mapping[str, int]) -> tuple[int, int] | None:
    """(before, after) when `kir` is a *window* in `symbol` at these symbol values, else None.

    A window is blockwise but for constant offsets: every array with `symbol` has it once,
    as `symbol + c` (`c` 0 for the inputs: `y: f32[n - 2]` from `x: f32[n]`), and an
    element at position `t` of an output reads the inputs at `t - before` to `t + after`
    only, through accesses `x[i + d]` whose offsets (`d` a constant, a symbol or a
    reduction's variable, `sum(x[i + d] * w[d], d)`) are bounded at the call's sizes. Such a
    kernel on a piece of the inputs widened by `before` and `after` rows (its *halo*)
    computes the piece's rows of every output exactly as on the whole arrays. `after`
    also covers an output shorter than the inputs (`y: f32[n - 2]`: at least 2), so a
    piece's rows of it are all in its widened run."""
    position: dict[str, int] = {}
    shift: dict[str, int] = {}  # each array's extent along `symbol`, less `symbol`
    for d in (*kir.params, *kir.outputs, *kir.temps):
        at = [k for k, x in enumerate(d.shape) if _has(x, symbol)]
        if not at:
            if d.kind == "output":
                return None
            continue
        shift[d.name] = shift_of(Affine.of(d.shape[at[0]]), symbol, symbols)
        if len(at) > 1 or shift[d.name] is None or (d.kind == "input" and shift[d.name] != 0):
            return None
        position[d.name] = at[0]
    reach: dict[str, tuple[int, int]] = {o.name: (0, 0) for o in kir.outputs}
    for st in reversed(kir.body):
        if isinstance(st, (Accumulate, OnlineMaxSum)) or st.target not in position:
            if st.target in position or any(_mentions(e, symbol, position) for e in statement_exprs(st)):
                return None
            continue
        var = st.vars[position[st.target]]
        if isinstance(st, Scan) and st.var == var:
            return None
        found = _offsets(statement_exprs(st), var, symbol, position, symbols)
        if found is None:
            return None
        here = reach.get(st.target)
        if here is None:  # computed, never read by an output
            continue
        for name, (lo, hi) in found.items():
            old = reach.get(name, (here[0] + lo, here[1] + hi))
            reach[name] = (min(old[0], here[0] + lo), max(old[1], here[1] + hi))
    inputs = [reach[p.name] for p in kir.params if p.name in position and p.name in reach]
    before = max([0] + [-lo for lo, _ in inputs])
    shrink = max([0] + [-shift[o.name] for o in kir.outputs])
    after = max([0, shrink] + [hi for _, hi in inputs])
    return before, after


def shift_of(a: Affine, symbol: str, symbols: Mapping[str, int]) -> int | None:
    """`a - symbol` at the call's sizes, when `a` is `symbol` plus terms without it."""
    if dict(a.terms).get(symbol) != 1:
        return None
    rest = [(name, coef) for name, coef in a.terms if name != symbol]
    if any(_has(name, symbol) for name, _ in rest):
        return None
    return a.const + sum(coef * Affine.of(name).evaluate(symbols) for name, coef in rest)


def _offsets(exprs: tuple[Expr, ...], var: str, symbol: str, position: dict[str, int],
             symbols: Mapping[str, int]) -> dict[str, tuple[int, int]] | None:
    """Per array with `symbol` read in `exprs`, the range of (its row read - `var`); None
    when `var` is used otherwise than so, or a row read is no bounded offset of it."""
    ranges: dict[str, tuple[int, int]] = {}
    for e in exprs:
        for n in e.walk():
            if n.op == "SYM" and _has(n.arg, symbol):
                return None
            if n.op == "REDUCE":
                if any(_has(x, symbol) for _, x in n.arg[1]):
                    return None
                for v, x in n.arg[1]:
                    ranges[v] = (0, Affine.of(x).evaluate(symbols) - 1)
    found: dict[str, tuple[int, int]] = {}
    seen: set[int] = set()
    stack = list(exprs)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op == "IDX" and n.arg == var:
            return None  # the position as a value: it differs between a piece and the whole
        q = position.get(n.arg) if n.op == "LOAD" else None
        for k, src in enumerate(n.srcs):
            if k != q:
                stack.append(src)
                continue
            off = _linear(src, var, ranges, symbols)
            if off is None or off[0] != 1:
                return None
            old = found.get(n.arg, off[1:])
            found[n.arg] = (min(old[0], off[1]), max(old[1], off[2]))
    return found


def _linear(e: Expr, var: str, ranges: Mapping[str, tuple[int, int]],
            symbols: Mapping[str, int]) -> tuple[int, int, int] | None:
    """`e` as `coef * var + r` with `r` in [lo, hi]: (coef, lo, hi); None when `e` is not
    such a sum of the variable, reduction variables, constants and symbols."""
    if e.op == "IDX":
        if e.arg == var:
            return 1, 0, 0
        lo, hi = ranges.get(e.arg, (None, None))
        return None if lo is None else (0, lo, hi)
    if e.op == "CONST" and isinstance(e.arg, int) and not isinstance(e.arg, bool):
        return 0, e.arg, e.arg
    if e.op == "SYM":
        v = Affine.of(e.arg).evaluate(symbols)
        return 0, v, v
    if e.op in ("ADD", "SUB") and len(e.srcs) == 2:
        a, b = (_linear(s, var, ranges, symbols) for s in e.srcs)
        if a is None or b is None:
            return None
        if e.op == "ADD":
            return a[0] + b[0], a[1] + b[1], a[2] + b[2]
        return a[0] - b[0], a[1] - b[2], a[2] - b[1]
    if e.op == "NEG":
        a = _linear(e.srcs[0], var, ranges, symbols)
        return None if a is None else (-a[0], -a[2], -a[1])
    return None
