"""Array values during analysis, numpy broadcasting, and affine index expressions.

While the analyzer walks an expression it produces `Val`s: a scalar IR expression plus
the array shape it describes. The expression refers to the value's own axes through
*axis placeholders* (`IDX @0`, `IDX @1`, ...; `@` never appears in a DSL name), so
broadcasting is a renaming of placeholders (a size-1 axis becomes `CONST 0`), an axis
reduction binds one placeholder to a fresh reduction variable, and a statement finally
substitutes its index variables for the placeholders. Values stay plain frozen data.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import attrs

from hologram.core.errors import Span
from hologram.core.types import Affine, DType, Shape
from hologram.ir import Expr

PLACEHOLDER = "@"
I64 = DType.I64
ONE = Affine.of(1)


def axis(k: int) -> str:
    """The placeholder name of a value's k-th axis."""
    return f"{PLACEHOLDER}{k}"


def axes(rank: int) -> tuple[Expr, ...]:
    return tuple(Expr.idx(axis(k)) for k in range(rank))


def kind_dtype(value: bool | int | float) -> DType:
    """The dtype a Python scalar stands for before NEP 50 gives it a context."""
    if isinstance(value, bool):
        return DType.BOOL
    return DType.I64 if isinstance(value, int) else DType.F64


@attrs.frozen
class Val:
    """An array value: `expr` gives the element at the placeholder index `(@0, @1, ...)`.

    `weak` marks a Python scalar in NEP 50's sense: it takes the other operand's dtype.
    Its dtype records its kind (bool, i64 for int, f64 for float). A *literal* (a
    literal, a constant like `pi`, or arithmetic on those) has a `CONST` expr whose `arg`
    is the exact Python value, not yet converted to any dtype (it may not fit one;
    `typerules.coerce` converts it). A weak value that is not a literal is a shape symbol
    used as a value, or arithmetic on symbols (`n // 2`, `1 / n`), like `len(x)` in
    numpy: its expr computes it at run time in its kind's dtype (i64 wrapping, f64).
    """

    expr: Expr
    shape: Shape = ()
    weak: bool = False
    span: Span | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.expr.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_literal(self) -> bool:
        """A weak value known at compile time (its expr is the Python value)."""
        return self.weak and self.expr.op == "CONST"

    @property
    def literal(self) -> bool | int | float:
        assert self.is_literal, "not a literal"
        return self.expr.arg

    @staticmethod
    def of_literal(value: bool | int | float, span: Span | None = None) -> "Val":
        return Val(Expr.const(value, kind_dtype(value)), (), True, span)


# ------------------------------------------------------------------ placeholders
def reindex(expr: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """`expr` with each `IDX name` in `mapping` replaced."""
    if not mapping:
        return expr
    return expr.replace(lambda n: mapping.get(n.arg) if n.op == "IDX" else None)


def at(val: Val, index: Sequence[Expr]) -> Expr:
    """The element of `val` at `index` (one i64 expression per axis)."""
    assert len(index) == val.rank
    return reindex(val.expr, {axis(k): e for k, e in enumerate(index) if not _is_axis(e, k)})


def _is_axis(e: Expr, k: int) -> bool:
    return e.op == "IDX" and e.arg == axis(k)


# ------------------------------------------------------------------ broadcasting
def broadcast_shapes(shapes: Iterable[Shape]) -> Shape | None:
    """numpy's broadcast of symbolic shapes, or None when they do not broadcast.

    Dims are compared as affine expressions: equal, or one of them the literal 1. A
    symbol is never assumed to be 1, so `[n]` and `[m]` do not broadcast.
    """
    out: list[Affine] = []
    for shape in shapes:
        if len(shape) > len(out):
            out = [ONE] * (len(shape) - len(out)) + out
        for k, d in enumerate(shape, start=len(out) - len(shape)):
            if out[k] == ONE:
                out[k] = d
            elif d != ONE and d != out[k]:
                return None
    return tuple(out)


def broadcasts_to(shape: Shape, target: Shape) -> bool:
    return len(shape) <= len(target) and broadcast_shapes((shape, target)) == target


def align(val: Val, shape: Shape) -> Expr:
    """`val`'s element expression re-indexed by the axes of the broadcast `shape`:
    trailing axes line up, a size-1 axis that was stretched is indexed by 0."""
    lead = len(shape) - val.rank
    mapping: dict[str, Expr] = {}
    for k, d in enumerate(val.shape):
        if d == ONE and shape[k + lead] != ONE:
            mapping[axis(k)] = Expr.const(0, I64)
        elif lead:
            mapping[axis(k)] = Expr.idx(axis(k + lead))
    return reindex(val.expr, mapping)


# ------------------------------------------------------------------ affine indices
def linear(const: int, terms: Sequence[tuple[Expr, int]]) -> Expr:
    """`const + sum(coef * leaf)` as an i64 IR expression, positive terms first so that
    `n - 1 - i` reads `sub(sub(n, i), 1)` rather than starting from a negation."""
    ordered = sorted(terms, key=lambda t: t[1] < 0)
    acc: Expr | None = None
    for leaf, coef in ordered:
        mag = abs(coef)
        term = leaf if mag == 1 else Expr("MUL", I64, (Expr.const(mag, I64), leaf))
        if acc is None:
            acc = term if coef > 0 else Expr("NEG", I64, (term,))
        else:
            acc = Expr("ADD" if coef > 0 else "SUB", I64, (acc, term))
    if acc is None:
        return Expr.const(const, I64)
    if const:
        acc = Expr("ADD" if const > 0 else "SUB", I64, (acc, Expr.const(abs(const), I64)))
    return acc


def index_expr(a: Affine, variables: frozenset[str] | set[str]) -> Expr:
    """An affine index over index variables (`IDX`) and shape symbols (`SYM`)."""
    leaves = [(Expr.idx(n) if n in variables else Expr("SYM", I64, (), n), c) for n, c in a.terms]
    return linear(a.const, leaves)


def dim_expr(d: Affine) -> Expr:
    """A dimension (affine in shape symbols) as an i64 expression."""
    return index_expr(d, frozenset())


def count_expr(dims: Sequence[Affine]) -> Expr:
    """The number of elements of a domain, as an i64 expression (folded when constant)."""
    const = 1
    parts: list[Expr] = []
    for d in dims:
        if d.is_const:
            const *= d.const
        else:
            parts.append(dim_expr(d))
    acc: Expr | None = None
    for p in parts:
        acc = p if acc is None else Expr("MUL", I64, (acc, p))
    if acc is None:
        return Expr.const(const, I64)
    return acc if const == 1 else Expr("MUL", I64, (acc, Expr.const(const, I64)))
