"""The kernel body as written: frozen AST nodes, each carrying the file `Span` it came from.

The parser builds these from the lark tree; the analyzer reads them. Nodes hold file
spans (already mapped through the document's `BodyOrigin`), so any stage can point an
error at the exact text. `format_ast` prints a body as one s-expression per statement,
the form `hologram compile --emit ast` shows.
"""

from __future__ import annotations

from typing import Iterator, Union

import attrs

from hologram.core.errors import Span


@attrs.frozen
class Num:
    """An integer or float literal, as written (`text`) and as a Python value."""

    value: int | float
    text: str
    span: Span


@attrs.frozen
class Bool:
    value: bool
    span: Span


@attrs.frozen
class Name:
    id: str
    span: Span


@attrs.frozen
class NoneIndex:
    """`None` (or `np.newaxis`) in an index: a new axis of length 1."""

    span: Span


@attrs.frozen
class EllipsisIndex:
    """`...` in an index: as many whole axes as the other indices leave."""

    span: Span


@attrs.frozen
class Slice:
    """`start:stop:step` in an index, each part optional (None when absent)."""

    start: "Expr | None"
    stop: "Expr | None"
    step: "Expr | None"
    span: Span


@attrs.frozen
class Subscript:
    """`base[i, j + 1]` (an element, in index notation) or numpy's indexing, `x[1:, None]`,
    of an array name or of any value (`(a + b)[1:]`, `x[::2][1:]`)."""

    base: "Expr"
    indices: tuple["Expr | Slice | EllipsisIndex", ...]
    span: Span


@attrs.frozen
class Attribute:
    """`base.attr` or `base.attr[index]`: `x.shape[0]`, `x.ndim`, `x.size`, `(a @ b).T`."""

    base: "Expr"
    attr: str
    index: "Expr | None"
    span: Span


@attrs.frozen
class Keyword:
    """`name=value` in a call."""

    name: str
    value: "Expr"
    span: Span


@attrs.frozen
class Ranged:
    """`var in range(...)`: a reduction variable with its range written out."""

    var: Name
    over: "Expr"
    span: Span


@attrs.frozen
class Call:
    """`func(args)`; `np.func(args)` is the same call. `method` marks `x.func(args)`,
    whose first argument is then `x` (the analyzer accepts it for reductions only)."""

    func: Name
    args: tuple["Expr", ...]
    keywords: tuple[Keyword, ...]
    span: Span
    method: bool = False


@attrs.frozen
class Unary:
    """op: '-', '+', '~' or 'not'."""

    op: str
    operand: "Expr"
    span: Span


@attrs.frozen
class Binary:
    """op: an arithmetic, bitwise or comparison operator, or 'and' / 'or'."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


Expr = Union[Num, Bool, Name, Subscript, Attribute, Call, Unary, Binary, Ranged, NoneIndex]


@attrs.frozen
class Assign:
    """`target = value` (whole-array; `indices is None`) or `target[i, j] = value`."""

    target: Name
    indices: tuple[Name, ...] | None
    value: Expr
    span: Span


@attrs.frozen
class AugAssign:
    """`target[indices] += value`: a scatter-add (np.add.at); each index is any index
    expression. `target_span` covers `target[indices]`, which run-time errors point at."""

    target: Name
    indices: tuple[Expr, ...]
    op: str
    value: Expr
    span: Span
    target_span: Span


Statement = Union[Assign, AugAssign]


@attrs.frozen
class Body:
    statements: tuple[Statement, ...]


COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def children(node: Expr | Statement | Keyword | Slice) -> tuple:
    """The direct sub-expressions of a node, in source order."""
    if isinstance(node, Subscript):
        return (node.base, *node.indices)
    if isinstance(node, Attribute):
        return (node.base,) if node.index is None else (node.base, node.index)
    if isinstance(node, Call):
        return (node.func, *node.args, *(k.value for k in node.keywords))
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Keyword):
        return (node.value,)
    if isinstance(node, Ranged):
        return (node.var, node.over)
    if isinstance(node, Slice):
        return tuple(p for p in (node.start, node.stop, node.step) if p is not None)
    if isinstance(node, (Assign, AugAssign)):
        return (node.target, *(node.indices or ()), node.value)
    return ()


def walk(node: Expr | Statement) -> Iterator[Expr]:
    """Every node below (and including) `node`, parents first; iterative, so deep trees are fine."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def depth(node: Expr | Statement) -> int:
    """Nesting depth of an expression tree (a leaf has depth 1)."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in children(n))
    return best


# ------------------------------------------------------------------ text form
def format_expr(e: Expr | Slice | EllipsisIndex) -> str:
    """Fully parenthesized prefix form: `(* alpha (sum (* a[i, p] b[p, j]) p))`."""
    if isinstance(e, Num):
        return e.text
    if isinstance(e, Bool):
        return "true" if e.value else "false"
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Subscript):
        return f"{format_expr(e.base)}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, NoneIndex):
        return "None"
    if isinstance(e, EllipsisIndex):
        return "..."
    if isinstance(e, Slice):
        parts = ["" if p is None else format_expr(p) for p in (e.start, e.stop, e.step)]
        return ":".join(parts if e.step is not None else parts[:2])
    if isinstance(e, Attribute):
        return f"{format_expr(e.base)}.{e.attr}" + ("" if e.index is None else f"[{format_expr(e.index)}]")
    if isinstance(e, Call):
        parts = [e.func.id, *(format_expr(a) for a in e.args)]
        parts += [f":{k.name} {format_expr(k.value)}" for k in e.keywords]
        return f"({' '.join(parts)})"
    if isinstance(e, Ranged):
        return f"(in {e.var.id} {format_expr(e.over)})"
    if isinstance(e, Unary):
        return f"({e.op} {format_expr(e.operand)})"
    if isinstance(e, Binary):
        return f"({e.op} {format_expr(e.left)} {format_expr(e.right)})"
    raise TypeError(f"not an AST expression: {e!r}")


def spelling(node: Expr) -> str:
    """How `node` reads in the document, for messages: a name, or its source text when
    it is on one line, else `(...)`."""
    if isinstance(node, Name):
        return node.id
    s = node.span
    if s is not None and s.source is not None and s.end_col and s.end_line in (None, s.line):
        lines = s.source.splitlines()
        if 1 <= s.line <= len(lines):
            text = lines[s.line - 1][s.col - 1:s.end_col - 1]
            return f"({text})" if isinstance(node, (Binary, Unary)) else text
    return "(...)"


def format_statement(s: Statement) -> str:
    if isinstance(s, AugAssign):
        return f"({s.op}= {s.target.id}[{', '.join(format_expr(i) for i in s.indices)}] {format_expr(s.value)})"
    target = s.target.id if s.indices is None else f"{s.target.id}[{', '.join(i.id for i in s.indices)}]"
    return f"(= {target} {format_expr(s.value)})"


def format_ast(body: Body) -> str:
    """One statement per line, prefixed by its file line: `L3  (= y (exp (- x m)))`."""
    return "\n".join(f"L{s.span.line:<3} {format_statement(s)}" for s in body.statements)
