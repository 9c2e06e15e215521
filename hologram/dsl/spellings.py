"""numpy's spellings in the body language, as the analyzer reads them.

`len(x)`, `x.shape[k]`, `x.ndim` and `x.size` (shape values: weak ints, or affine forms in
indices), `x.T`, `a @ b` (numpy's matmul, compiled as the index-notation contraction),
`any`/`all` (as counts) and `d in range(a, b)` (a reduction variable's explicit range).
`NumpySpellings` is a mixin of the analyzer's `_Kernel` (hologram.dsl.analyze): its
methods use the kernel's own (`eval`, `statement`, `tensor`, `affine`, `constant`,
`unknown`, `names`, `visible`, `outputs`, `symbols`). docs/dsl.md, "numpy spellings".
"""

from __future__ import annotations

from typing import Any, Mapping

from hologram.core.errors import CompileError, Span, did_you_mean
from hologram.core.types import Affine, DType
from hologram.dsl import ast, reductions
from hologram.dsl.functions import FUNCTIONS
from hologram.dsl.shapes import ONE, Val, axes, axis, reindex
from hologram.dsl.typerules import BINARY, apply
from hologram.ir import Expr, TensorDecl

Scope = Mapping[str, Any]  # index variable name -> the analyzer's Binding
# numpy's dtype names (`np.float32(x)`, `x.astype(np.int64)`) -> this language's cast
NUMPY_TYPES = {**{d.np.name: d.value for d in DType}, "bool_": "bool"}


class NumpySpellings:
    """The analyzer's methods for numpy's spellings (see the module docstring)."""

    # ------------------------------------------------------------ shapes as values
    def shape_value(self, node: ast.Attribute | ast.Call, scope: Scope) -> Affine | tuple[Affine, ...]:
        """What `len(x)`, `x.shape[k]`, `x.ndim` and `x.size` stand for: a dimension (an
        affine form in the shape symbols), or for `size` the dimensions to multiply. Each
        is a weak int where it is used, exactly as a shape symbol is (numpy: a Python int)."""
        if isinstance(node, ast.Call):  # len(x): numpy's len, the first dimension
            if node.keywords or len(node.args) != 1:
                raise CompileError("len() takes one array, as in len(x)", node.span)
            decl = self.shaped(node.args[0], scope)
            if not decl.shape:
                raise CompileError(f"len() of '{decl.name}', which has no dimensions (numpy: len() of unsized "
                                   f"object)", node.span, hint=f"'{decl.name}' is a scalar; its size is 1")
            return decl.shape[0]
        decl = self.shaped(node.base, scope)
        rank = len(decl.shape)
        if node.attr not in ATTRIBUTES:
            raise CompileError(f"arrays have no attribute '{node.attr}'{did_you_mean(node.attr, ATTRIBUTES)}",
                               node.span, hint=f"the attributes: {', '.join(ATTRIBUTES)}")
        if node.attr == "shape":
            if node.index is None:
                raise CompileError(f"'{decl.name}.shape' is a tuple; use one dimension of it", node.span,
                                   hint=f"{decl.name}.shape[0]" + (f" ... {decl.name}.shape[{rank - 1}]" if rank > 1
                                                                   else ""))
            k = self.constant(node.index, int, f"the index of '{decl.name}.shape' must be an integer literal")
            if not -rank <= k < rank:
                raise CompileError(f"'{decl.name}' has {plural(rank, 'dimension')}; {decl.name}.shape[{k}] does not "
                                   f"exist", node.index.span)
            return decl.shape[k]
        if node.index is not None:
            raise CompileError(f"'{decl.name}.{node.attr}' cannot be indexed", node.span)
        if node.attr == "ndim":
            return Affine.of(rank)
        if node.attr == "size":
            return tuple(decl.shape)
        raise CompileError(f"'{decl.name}.T' is an array, not a number", node.span,
                           hint=f"its dimensions are {decl.name}.shape[k] in reverse")

    def transposed(self, node: ast.Attribute, scope: Scope) -> Val:
        """`x.T`: x with its axes reversed (numpy's; a 0-d or 1-D array is itself); of an
        array name or of any value (`(a @ b).T`, `x[:, 1:].T`)."""
        base = ast.spelling(node.base)
        if scope:
            raise CompileError(f"'{base}.T' in index notation: index '{base}' itself", node.span,
                               hint=f"{base}[j, i] is the transpose's element [i, j]")
        if not isinstance(node.base, ast.Name):
            val = self.eval(node.base, scope)
            flip = {axis(k): Expr.idx(axis(val.rank - 1 - k)) for k in range(val.rank)}
            return Val(reindex(val.expr, flip), tuple(reversed(val.shape)), val.weak, node.span)
        decl = self.tensor(node.base, scope)
        if decl.kind == "scalar":
            return Val(Expr("SCALAR", decl.dtype, (), decl.name), (), False, node.span)
        rank = len(decl.shape)
        return Val(Expr.load(decl.name, decl.dtype, axes(rank)[::-1]), tuple(reversed(decl.shape)), False, node.span)

    # ------------------------------------------------------------ matmul
    def matmul_statement(self, target: ast.Name, node: ast.Binary) -> ast.Assign:
        """`target = a @ b` as index notation, numpy's matmul: for 2-D operands
        `target[i, j] = sum(a[i, p] * b[p, j], p)` (the contraction the tiled gemm lowering
        takes), a 1-D operand a vector (its dimension dropped from the result), leading
        dimensions batches, broadcast as numpy does (equal, missing, or 1). Operands that
        are not array names are first assigned to hidden temporaries. The sum is cast to
        the operands' promoted dtype, as numpy's matmul keeps it (an i32 product wraps)."""
        span = node.span
        a, b = (self.matmul_operand(side, span) for side in (node.left, node.right))
        A, B = a.shape, b.shape
        if not A or not B:
            raise CompileError("matmul: an operand of '@' is a scalar (numpy raises too)", span, hint="use '*'")
        inner_a, inner_b = A[-1], B[-2] if len(B) >= 2 else B[-1]
        if inner_a != inner_b:
            raise CompileError(f"matmul: '{a.name}' has {inner_a} columns but '{b.name}' has {inner_b} rows", span,
                               hint="declare the contracted dimensions with the same shape symbol")
        fresh = self.names.fresh
        p = fresh("mm_p")
        batch_a, batch_b = A[:-2], B[:-2]
        width = max(len(batch_a), len(batch_b))
        target_idx, idx_a, idx_b = [], [], []
        for k in range(width):
            da = batch_a[k - width + len(batch_a)] if k - width + len(batch_a) >= 0 else None
            db = batch_b[k - width + len(batch_b)] if k - width + len(batch_b) >= 0 else None
            if da is not None and db is not None and da != db and ONE not in (da, db):
                raise CompileError(f"matmul: batch dimensions {da} of '{a.name}' and {db} of '{b.name}' do not "
                                   f"broadcast", span, hint="give them the same shape symbol, or make one 1")
            z = fresh("mm_z")
            target_idx.append(z)
            if da is not None:
                idx_a.append(z if da != ONE or db in (None, ONE) else "0")
            if db is not None:
                idx_b.append(z if db != ONE or da in (None, ONE) else "0")
        if len(A) >= 2:
            i = fresh("mm_i")
            target_idx.append(i)
            idx_a.append(i)
        idx_a.append(p)
        idx_b.append(p)
        if len(B) >= 2:
            j = fresh("mm_j")
            target_idx.append(j)
            idx_b.append(j)

        def ref(decl: TensorDecl, names: list[str]) -> ast.Subscript:
            return ast.Subscript(ast.Name(decl.name, span), tuple(
                ast.Num(0, "0", span) if n == "0" else ast.Name(n, span) for n in names), span)

        product = ast.Binary("*", ref(a, idx_a), ref(b, idx_b), span)
        value: ast.Expr = ast.Call(ast.Name("sum", span), (product, ast.Name(p, span)), (), span)
        promoted = apply(BINARY["*"], (Val(Expr.load(a.name, a.dtype, ()), ()), Val(Expr.load(b.name, b.dtype, ()), ())),
                         span).dtype
        if reductions.result_dtype("sum", promoted) is not promoted:
            value = ast.Call(ast.Name(promoted.value, span), (value,), (), span)
        indices = tuple(ast.Name(n, span) for n in target_idx) if target_idx else None
        return ast.Assign(target, indices, value, span)

    def matmul_operand(self, node: ast.Expr, span: Span) -> TensorDecl:
        """The array an operand of '@' names, or a hidden temporary holding its value (an
        unknown or unassigned name fails there, with the analyzer's own message)."""
        if isinstance(node, ast.Name) and node.id in self.visible:
            return self.visible[node.id]
        tmp = self.names.fresh("matmul_arg")
        self.statement(ast.Assign(ast.Name(tmp, node.span), None, node, node.span))  # its site: the operand's words
        return self.visible[tmp]

    def shaped(self, node: ast.Expr, scope: Scope) -> TensorDecl:
        """The declaration whose shape `node` asks about: an input, an output (declared,
        assigned or not) or a temporary already assigned; or a value's (`x[1:].shape[0]`,
        `len(a @ b)`) as a declaration named as it is written."""
        if not isinstance(node, ast.Name):
            val = self.eval(node, scope)
            return TensorDecl(ast.spelling(node), val.dtype, val.shape, "value")
        if node.id in scope:
            raise CompileError(f"'{node.id}' is an index variable; it has no shape", node.span)
        decl = self.visible.get(node.id) or self.outputs.get(node.id)
        if decl is None:
            raise self.unknown(node, scope)
        return decl

    def numpy_cast(self, node: ast.Call) -> ast.Call:
        """`np.float32(x)` and `x.astype(np.float32)` (or `x.astype(f32)`) as `f32(x)`."""
        if not node.method:
            return ast.Call(ast.Name(NUMPY_TYPES[node.func.id], node.func.span), node.args, node.keywords, node.span)
        base = node.args[0]
        text = ast.spelling(base)
        if len(node.args) != 2 or node.keywords:
            raise CompileError(f"'{text}.astype()' takes one type, as in {text}.astype(np.float32)", node.span)
        t = node.args[1]
        prefixed = isinstance(t, ast.Attribute) and isinstance(t.base, ast.Name) and t.base.id in ("np", "numpy")
        name = t.attr if prefixed and t.index is None else t.id if isinstance(t, ast.Name) else None
        name = NUMPY_TYPES.get(name, name)
        if name not in {d.value for d in DType}:
            raise CompileError(f"'{text}.astype()' takes a type such as np.float32 or f32", t.span,
                               hint=f"the types: {', '.join(d.value for d in DType)} (or numpy's names)")
        return ast.Call(ast.Name(name, node.func.span), (base,), (), node.span)

    def range_bounds(self, node: ast.Ranged) -> tuple[Affine, Affine]:
        """(start, stop) of `var in range(stop)` or `range(start, stop)`: affine in the
        shape symbols; a range that is empty or negative for every size is an error."""
        over = node.over
        if not (isinstance(over, ast.Call) and over.func.id == "range" and not over.keywords
                and 1 <= len(over.args) <= 2):
            raise CompileError(f"'{node.var.id} in ...' takes range(stop) or range(start, stop)", over.span,
                               hint=f"sum(x[i + {node.var.id}], {node.var.id} in range(3))")
        try:
            bounds = [self.affine(a, {}) for a in over.args]
        except CompileError as exc:
            raise CompileError(f"the bounds of range() must be affine in the shape symbols ({exc.message})",
                               exc.span, hint="like range(3), range(1, n) or range(n - 1)") from None
        start, stop = (Affine.of(0), bounds[0]) if len(bounds) == 1 else bounds
        extent = stop - start
        if extent.is_const and extent.const <= 0:
            raise CompileError(f"range({', '.join(str(b) for b in bounds)}) is empty", over.span)
        return start, stop


ATTRIBUTES = ("shape", "ndim", "size", "T")
LOGICAL_REDUCTIONS = ("any", "all")
METHODS = tuple(sorted([*(n for n, f in FUNCTIONS.items() if f.kind in ("reduce", "scan")), *LOGICAL_REDUCTIONS]))


def logical_reduction(node: ast.Call) -> ast.Expr:
    """`any(x, ...)` as `sum(bool(x), ...) != 0` and `all(x, ...)` as `sum(bool(x) == false,
    ...) == 0`: numpy's any and all (truthiness, so NaN is true; False and True over an
    empty extent), every form sum takes (axis=, keepdims=, index variables, a method),
    counting rather than branching, so it vectorizes as a sum does."""
    if not node.args:
        raise CompileError(f"{node.func.id}() takes the array to test, as in {node.func.id}(x > 0)", node.span)
    span = node.span
    truth: ast.Expr = ast.Call(ast.Name("bool", span), (node.args[0],), (), span)
    if node.func.id == "all":
        truth = ast.Binary("==", truth, ast.Bool(False, span), span)
    count = ast.Call(ast.Name("sum", node.func.span), (truth, *node.args[1:]), node.keywords, span)
    return ast.Binary("!=" if node.func.id == "any" else "==", count, ast.Num(0, "0", span), span)


def affine_ast(value: Affine | tuple[Affine, ...], span: Span) -> ast.Expr:
    """`2*n + 1` (or, for a tuple, the product of its dimensions) as body syntax, so it is
    typed exactly as the same text would be: symbols and literals are weak ints."""
    if isinstance(value, tuple):
        product: ast.Expr = ast.Num(1, "1", span)
        for d in value:
            product = ast.Binary("*", product, affine_ast(d, span), span)
        return product
    parts: list[ast.Expr] = []
    for name, coeff in value.terms:
        term: ast.Expr = ast.Name(name, span)
        parts.append(term if coeff == 1 else ast.Binary("*", ast.Num(coeff, str(coeff), span), term, span))
    if value.const or not parts:
        parts.append(ast.Num(value.const, str(value.const), span))
    total = parts[0]
    for part in parts[1:]:
        total = ast.Binary("+", total, part, span)
    return total


def asks_shape(node: ast.Expr) -> bool:
    """Whether `node` is `len(x)` or an attribute of an array (`x.shape[k]`, `x.size`...)."""
    return isinstance(node, ast.Attribute) or isinstance(node, ast.Call) and node.func.id == "len" and not node.method


def plural(n: int, word: str) -> str:
    """`1 dimension`, `2 dimensions`, `3 indices`."""
    many = {"index": "indices"}.get(word, word + "s")
    return f"{n} {word if n == 1 else many}"
