"""numpy's indexing in the body language: slices, `None`, `...`, integers and index arrays.

`x[1:-1, ::2]`, `m[:, 0]`, `v[:, None]`, `t[..., -1]`, `x[idx]`: the analyzer's `_Kernel`
hands every subscript that is not a plain element access (`x[i, j + 1]` in index
notation) to `NumpyIndexing.indexed`, which builds numpy's result as a `Val`: a LOAD of
the array whose index on each dimension is an expression of the result's own axes
(placeholders, hologram.dsl.shapes), so a slice is a view that fuses like anything else,
never a copy.

Lengths are numpy's, for every size: `x[1:]` of `x: f32[n]` has `max(n - 1, 0)`
elements, `x[::2]` has `(n + 1)//2`, `x[-3:]` has `min(n, 3)`. Where that is not affine
in the shape symbols it is a derived symbol (hologram.core.dims), simplified to an
affine form whenever the kernel's declared dimensions make that exact (`max(n - 1, 0)` is
`n - 1` in a kernel with an array of `n - 1` elements). Integer indices count from the
end when negative, as numpy's do; index arrays follow numpy's advanced indexing (their
shapes broadcast; the result's axes for them go where they stand when they are next to
each other, else first), a negative entry counting from the end and one out of range an
`ExecutionError` at run time. `NumpyIndexing` is a mixin of the analyzer's `_Kernel`
(like hologram.dsl.spellings): it uses the kernel's `affine`, `eval`, `dims`, `visible`
and `symbols`. docs/dsl.md, "Slicing and indexing".
"""

from __future__ import annotations

from typing import Any, Mapping

from hologram.core.dims import DimAlgebra, is_derived, within_lanes
from hologram.core.errors import CompileError
from hologram.core.types import Affine, DType, Shape, shape_str
from hologram.dsl import ast
from hologram.dsl.indexing import affine_index, numpy_index
from hologram.dsl.shapes import Val, align, axis, broadcast_shapes, index_expr
from hologram.dsl.typerules import coerce
from hologram.ir import Expr, TensorDecl

Scope = Mapping[str, Any]  # index variable name -> the analyzer's Binding
I64 = DType.I64
ZERO, ONE = Affine.of(0), Affine.of(1)


def is_basic_element(node: ast.Subscript, rank: int) -> bool:
    """Whether `node` is the element access index notation has always meant: one plain
    index (no slice, None or ...) per dimension."""
    return len(node.indices) == rank and not any(
        isinstance(i, (ast.Slice, ast.NoneIndex, ast.EllipsisIndex)) for i in node.indices)


class NumpyIndexing:
    """The analyzer's methods for numpy's indexing (see the module docstring)."""

    dims: DimAlgebra

    def indexed(self, node: ast.Subscript, decl: TensorDecl | None, scope: Scope, value: Val | None = None) -> Val:
        """`node` applied to the array `decl`, or to `value` (any array value: `(a + b)[1:]`)."""
        if value is not None:
            decl = TensorDecl(ast.spelling(node.base), value.dtype, value.shape, "value")
        items = self.expand(node, decl)
        parts: list[tuple] = []  # per item: ("none",), ("slice", k, length, first, step), (kind, k, value)
        k = 0
        for item in items:
            if isinstance(item, ast.NoneIndex):
                parts.append(("none",))
                continue
            if isinstance(item, ast.Slice):
                parts.append(("slice", k, *self.slice_axis(item, decl.shape[k])))
            else:
                kind, found = self.index_item(item, decl.shape[k], k, decl, scope)
                parts.append((kind, k, found))
            k += 1
        arrays = [p[2] for p in parts if p[0] == "array"]
        block: Shape = ()
        advanced: list[int] = []
        if arrays:
            found = broadcast_shapes(v.shape for v in arrays)
            if found is None:
                raise CompileError(f"the index arrays of '{decl.name}' have shapes "
                                   f"{' and '.join(shape_str(v.shape) for v in arrays)}, which do not broadcast",
                                   node.span, hint="numpy broadcasting: trailing dimensions must be equal or 1")
            block = found
            # with an index array, integers are advanced indices too: their result axes
            # (the broadcast block) go where they stand when they are adjacent, else first
            advanced = [i for i, p in enumerate(parts) if p[0] in ("int", "array")]
        together = advanced == list(range(advanced[0], advanced[0] + len(advanced))) if advanced else False
        shape: list[Affine] = []
        index: list[Expr | None] = [None] * len(decl.shape)
        block_at = 0
        if arrays and not together:
            shape.extend(block)
        for i, p in enumerate(parts):
            if arrays and together and i == advanced[0]:
                block_at = len(shape)
                shape.extend(block)
            if p[0] == "none":
                shape.append(ONE)
            elif p[0] == "slice":
                _, k, length, first, step = p
                var = axis(len(shape))
                shape.append(length)
                index[k] = in_range(index_expr(first + Affine.of(var) * step, {var}), decl.shape[k], length, first)
            elif p[0] == "int":
                index[p[1]] = p[2]
            else:
                _, k, val = p
                entries = align(Val(coerce(val, val.dtype), val.shape), block)
                moved = {axis(t): Expr.idx(axis(block_at + t)) for t in range(len(block)) if block_at}
                index[k] = numpy_index(_reindex(entries, moved), decl.shape[k], node.span).expr
        if value is not None:  # the value's own axes become the indices
            return Val(_reindex(value.expr, {axis(k): ix for k, ix in enumerate(index)}), tuple(shape), False,
                       node.span)
        return Val(Expr.load(decl.name, decl.dtype, tuple(index), self.site(node.span)), tuple(shape), False,
                   node.span)

    def expand(self, node: ast.Subscript, decl: TensorDecl) -> list:
        """The indices with `...` (or the dimensions left over) as whole slices."""
        items = list(node.indices)
        ellipses = [k for k, i in enumerate(items) if isinstance(i, ast.EllipsisIndex)]
        if len(ellipses) > 1:
            raise CompileError("an index can only have a single ellipsis ('...')", items[ellipses[1]].span)
        consuming = sum(1 for i in items if not isinstance(i, (ast.NoneIndex, ast.EllipsisIndex)))
        rank = len(decl.shape)
        if consuming > rank:
            raise CompileError(f"too many indices for '{decl.name}': it has {rank} dimension"
                               f"{'s' if rank != 1 else ''} ({shape_str(decl.shape)}) but {consuming} were given",
                               node.span)
        whole = [ast.Slice(None, None, None, node.span)] * (rank - consuming)
        if ellipses:
            return items[:ellipses[0]] + whole + items[ellipses[0] + 1:]
        return items + whole

    # ------------------------------------------------------------ one dimension
    def slice_axis(self, s: ast.Slice, dim: Affine) -> tuple[Affine, Affine, int]:
        """(length, index of the first element, step) of `start:stop:step` over `dim`,
        exactly numpy's for every size (the first index is used only when length > 0)."""
        step = 1
        if s.step is not None:
            value = self.bound(s.step)
            if not value.is_const:
                raise CompileError("a slice's step must be an integer literal", s.step.span)
            step = value.const
            if step == 0:
                raise CompileError("slice step cannot be zero", s.step.span)
        start = None if s.start is None else self.bound(s.start)
        stop = None if s.stop is None else self.bound(s.stop)
        d = self.dims
        if step > 0:
            first = ZERO if start is None else start if _literal_nonneg(start) else self.clamped(start, dim, 0)
            end = dim if stop is None else self.clamped(stop, dim, 0)
            if start is not None and start.is_const and start.const < 0 and stop is None:
                span = d.min(dim, Affine.of(-start.const))  # x[-3:]: the last min(n, 3)
            else:
                span = end - first
            return d.ceildiv(span, step), first, step
        # counting down: positions shifted by one, so every bound is >= 0
        top = dim if start is None else self.clamped(start, dim, 1)  # one past the first element
        bottom = ZERO if stop is None else self.clamped(stop, dim, 1)
        return d.ceildiv(top - bottom, -step), top - 1, step

    def clamped(self, v: Affine, dim: Affine, shift: int) -> Affine:
        """numpy's normalized slice bound plus `shift` (0 or 1), clamped to [0, dim]: a
        negative bound counts from the end. A bound with shape symbols whose sign is not
        known is normalized at launch, exactly: `v + dim*[v < 0]`, with `[v < 0]` as
        `1 - min(max(v + 1, 0), 1)`."""
        d = self.dims
        if v.is_const and v.const < 0:
            return d.clamp0(dim + v + shift)
        if d.nonneg(v):
            return d.min(v + shift, dim)
        negative = ONE - d.min(d.clamp0(v + 1), ONE)
        return d.min(d.clamp0(v + d.mul(dim, negative) + shift), dim)

    def bound(self, e: ast.Expr) -> Affine:
        """A slice bound or step: an integer known at launch (literals, shape symbols,
        `len(x)`, and `//` by a literal), as a dimension."""
        if isinstance(e, ast.Binary) and e.op == "//":
            num, den = self.bound(e.left), self.bound(e.right)
            if not den.is_const or den.const <= 0:
                raise CompileError("in a slice bound, '//' divides by a positive integer literal", e.right.span)
            if not self.dims.nonneg(num):
                raise CompileError("in a slice bound, '//' divides a quantity known to be non-negative (a "
                                   "size)", e.left.span)
            return self.dims.floordiv(num, den.const)
        try:
            return self.affine(e, {})
        except CompileError as exc:
            raise CompileError(f"a slice bound must be an integer known at launch (a literal, a shape symbol, "
                               f"len(x)); {exc.message}", exc.span,
                               hint="in index notation write the index itself: y[i] = x[i + 1]") from None

    def index_item(self, e: ast.Expr, dim: Affine, k: int, decl: TensorDecl, scope: Scope) -> tuple[str, Any]:
        """One non-slice index on dimension `k`: ('int', index expression) for a number
        (an index variable's affine form; an integer known at launch or computed from the
        data, a negative one counting from the end: hologram.dsl.indexing), ('array', Val)
        for an integer array, whose entries are normalized where they are read."""
        if self.is_affine_index(e, scope):
            a = self.affine(e, scope)
            if any(n in {b.ir for b in scope.values()} for n, _ in a.terms):
                return "int", self.variable_index(e, a, k, decl, scope)
            if a.is_const and dim.is_const and not -dim.const <= a.const < dim.const:
                raise CompileError(f"index {a.const} is out of bounds for axis {k} of '{decl.name}' with size "
                                   f"{dim.const}", e.span)
            # `x[n - 1]`: negative only when the axis is empty, where nothing is in bounds
            if a.is_const or self.dims.nonneg(a) or a + 1 == dim:
                return "int", affine_index(a, dim, ()).expr
            return "int", numpy_index(index_expr(a, frozenset()), dim, e.span).expr  # its sign is known at launch
        val = self.eval(e, scope)
        if not val.shape:
            if val.is_literal and not I64.min <= val.literal <= I64.max:
                raise CompileError(f"the index {val.literal} is too large for i64", e.span)
            return "int", numpy_index(val.expr if val.is_literal else coerce(val, val.dtype), dim, e.span).expr
        if scope:  # index notation: one element per point
            if isinstance(e, ast.Name):
                raise CompileError(f"'{e.id}' is an array ({shape_str(val.shape)}); an index is one integer per "
                                   f"point", e.span, hint=f"index it too, as in y[i] = {decl.name}[{e.id}[i]]")
            raise CompileError(f"an index is one integer per point; this one has shape {shape_str(val.shape)}",
                               e.span, hint="index the arrays in it, as in y[i] = x[idx[i]]")
        if val.dtype.is_bool:
            raise CompileError(f"'{decl.name}' is indexed by a bool array: boolean masks give a shape known only "
                               "from the data", e.span, hint="select with where(mask, x, 0), or count with sum(mask)")
        if not val.dtype.is_int:
            raise CompileError(f"array indices must be integers; this index is {val.dtype}", e.span)
        return "array", val

    def variable_index(self, e: ast.Expr, a: Affine, k: int, decl: TensorDecl, scope: Scope) -> Expr:
        """The index `a` (affine in index variables and shape symbols) on dimension `k` of
        `decl`; a variable indexing it plainly (or strided) learns its range from it, and
        the access is noted for the always-out-of-bounds warning (hologram.dsl.gathers)."""
        by_ir = {b.ir: b for b in scope.values()}
        where = f"dimension {k} of '{decl.name}', line {e.span.line}"
        if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 and a.terms[0][0] in by_ir:
            by_ir[a.terms[0][0]].note(decl.shape[k], where, e.span)
        elif len(used := [v for v, _ in a.terms if v in by_ir]) == 1:
            by_ir[used[0]].note_strided(decl.shape[k], a, where, e.span)
        if any(not I64.min <= c <= I64.max for c in (a.const, *(c for _, c in a.terms))):
            raise CompileError("the index is too large for i64", e.span)
        if decl.kind != "value":  # a named array's access, for the always-out-of-bounds warning
            self.note_access(decl, k, a, {v: b for v, b in by_ir.items() if v in a.symbols}, e.span)
        return affine_index(a, decl.shape[k], by_ir.keys()).expr


def in_range(index: Expr, dim: Affine, length: Affine, first: Affine) -> Expr:
    """A slice's element index, clamped to the dimension where the verifier could not see
    that it stays inside. It always does (the length is numpy's, exact): the clamp changes
    no value, and spares the access a run-time check, which would keep a backend from
    vectorizing it. Affine lengths and `max(A, 0)` ones (a stage's lanes may take that as
    `A`, hologram.core.dims.within_lanes) are provable without it."""
    derived = {n for a in (length, first) for n in a.symbols if is_derived(n)}
    if not derived or derived == set(within_lanes((length,))) and not any(is_derived(n) for n in first.symbols):
        return index
    low = Expr("MAX", I64, (index, Expr.const(0, I64)))
    return Expr("MIN", I64, (low, index_expr(dim - 1, frozenset())))


def _literal_nonneg(a: Affine) -> bool:
    return a.is_const and a.const >= 0


def _reindex(e: Expr, mapping: Mapping[str, Expr]) -> Expr:
    if not mapping:
        return e
    return e.replace(lambda n: mapping.get(n.arg) if n.op == "IDX" else None)
