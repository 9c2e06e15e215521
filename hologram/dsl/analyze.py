"""Semantic analysis: a kernel's AST -> Kernel IR in index form.

`to_ir` resolves names, types every operation as numpy would (NEP 50; see typerules),
checks and broadcasts shapes, and writes every statement as `Compute(target, vars,
body)` with one index variable per target dimension: `y = exp(x - m)` becomes
`y[i0] = exp(x[i0] - m)`, `c[i, j] = sum(a[i, p] * b[p, j], p)` keeps its variables,
and `resonance(...)` and a scatter-add `h[b[i]] += w[i]` (scatters.py) become an
`Accumulate`. An index that is not affine is a gather (gathers.py, indexing.py). Nothing
is fused or optimized here.

Index variables are introduced by an index-notation target (`y[i, j] = ...`) or by a
reduction (`sum(x[k], k)`). A declared output gives its target variables their ranges;
otherwise a variable's range is the dimension of every array it indexes at a plain
position (`x[k]`, not `x[k + 1]`), and those must agree. A variable with no plain use
takes the largest range that keeps its affine uses in bounds (`x[2*k + 1]` over `x` of
`2*n` gives `n`), when that is affine in the shape symbols; again they must agree.
Reduction variables get names unique in the kernel (renamed when the same name is used
twice), since the lowering tells reductions apart by variable name.
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping

import attrs

from hologram.core.dims import DimAlgebra, derived_closure, is_derived, parse_derived
from hologram.core.errors import CompileError, Span, did_you_mean
from hologram.core.types import Affine, DType, Shape, shape_str, type_str
from hologram.dsl import ast, reductions
from hologram.dsl.document import KernelDef, ParamSpec
from hologram.dsl.functions import FUNCTIONS, Function
from hologram.dsl.gathers import Gathers
from hologram.dsl.parser import parse_body
from hologram.dsl.scatters import Scatters
from hologram.dsl.spellings import (
    LOGICAL_REDUCTIONS, METHODS, NUMPY_TYPES, NumpySpellings, affine_ast, asks_shape, logical_reduction, plural,
)
from hologram.dsl.scans import Scans
from hologram.dsl.shapes import PLACEHOLDER, Val, align, at, axes, broadcast_shapes, broadcasts_to
from hologram.dsl.slicing import NumpyIndexing
from hologram.dsl.typerules import BINARY, UNARY, apply, can_assign, coerce, describe, strengthen
from hologram.dsl.unused import unused_temporaries
from hologram.ir import Accumulate, Compute, Expr, KernelIR, Statement, TensorDecl

CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
RESONANCE_BINS = Affine.of(96)
I64 = DType.I64


def to_ir(kdef: KernelDef, body: ast.Body | None = None) -> KernelIR:
    """Check a kernel and translate its body (`parse_body(kdef)` unless given) to Kernel
    IR (raises CompileError)."""
    body = parse_body(kdef) if body is None else body
    try:
        return _Kernel(kdef, body).build()
    except RecursionError:
        raise CompileError("the kernel body is nested too deeply to analyze", kdef.span,
                           hint="split long expressions into several statements") from None


@attrs.define
class Binding:
    """An index variable in scope, and what is known of its range so far."""

    name: str  # as written
    ir: str  # as named in the IR
    span: Span
    range: Affine | None = None
    fixed: bool = False  # the range is a declared output's dimension
    origin: str = ""  # where the range came from, for messages
    used: bool = False
    strided: list[tuple[Affine, str, Span]] = attrs.field(factory=list)  # ranges from `x[2*k + 1]`-like uses
    offset: Affine = Affine.of(0)  # `d in range(a, b)`: d is the IR variable plus a

    def note(self, dim: Affine, where: str, span: Span) -> None:
        """This variable indexes a dimension `dim` at a plain position."""
        if self.fixed:
            return
        if self.range is None:
            self.range, self.origin = dim, where
        elif self.range != dim:
            raise CompileError(
                f"index variable '{self.name}' has conflicting ranges: {self.range} ({self.origin}) "
                f"and {dim} ({where})", span, hint="an index variable must range over equal dimensions")

    def note_strided(self, dim: Affine, index: Affine, where: str, span: Span) -> None:
        """This variable indexes `dim` as `index` = `c*var + rest` (not plainly): the largest range
        keeping every such access in bounds, used only when no plain use gives one."""
        c = dict(index.terms)[self.ir]
        rest = index - Affine.of(self.ir) * c  # shape symbols and a constant
        starts_inside = rest.const >= 0 and all(q > 0 for _, q in rest.terms)
        last = (dim - 1 - rest).floordiv(c)  # the largest k with c*k + rest <= dim - 1
        if c >= 1 and starts_inside and last is not None:
            self.strided.append((last + 1, where, span))

    def settle(self) -> None:
        """Take the range from strided uses when no plain use gave one (they must agree)."""
        if self.range is not None or not self.strided:
            return
        (first, where, _), *others = self.strided
        for dim, other, span in others:
            if dim != first:
                raise CompileError(
                    f"index variable '{self.name}' has conflicting ranges: {first} ({where}) and {dim} ({other})",
                    span, hint="an index variable must range over equal dimensions")
        if first.is_const and first.const < 0:
            return
        self.range, self.origin = first, where


Scope = Mapping[str, Binding]


class _Namer:
    """Fresh IR names that collide with nothing written in the kernel."""

    def __init__(self, taken: set[str], target_vars: set[str]):
        self.taken = set(taken)
        self.outer = set(target_vars)  # names used as statement (outer) variables anywhere
        self.reduction_vars: set[str] = set()
        self.statement_var_names: list[str] = []

    def fresh(self, base: str, start: int = 0) -> str:
        k = start
        while f"{base}{k}" in self.taken:
            k += 1
        self.taken.add(name := f"{base}{k}")
        return name

    def statement_vars(self, rank: int) -> tuple[str, ...]:
        """`i0, i1, ...`: the variables of whole-array statements, shared by all of them."""
        while len(self.statement_var_names) < rank:
            name = self.fresh("i", len(self.statement_var_names))
            self.outer.add(name)
            self.statement_var_names.append(name)
        return tuple(self.statement_var_names[:rank])

    def reduction_var(self, written: str | None) -> str:
        if written is not None and written not in self.outer and written not in self.reduction_vars:
            name = written
        else:
            name = self.fresh(f"{written}_", 1) if written else self.fresh("r")
        self.reduction_vars.add(name)
        return name


class _Kernel(NumpySpellings, NumpyIndexing, Gathers, Scatters, Scans):
    def __init__(self, kdef: KernelDef, body: ast.Body):
        self.kdef, self.body = kdef, body
        self.params = tuple(_param_decl(p) for p in kdef.inputs)
        self.outputs = {p.name: TensorDecl(p.name, p.dtype, p.shape, "output") for p in kdef.outputs}
        self.specs: dict[str, ParamSpec] = {p.name: p for p in kdef.inputs + kdef.outputs}
        self.symbols = _symbols(kdef)
        self.dims = DimAlgebra(tuple(d for p in kdef.inputs + kdef.outputs for d in p.shape))
        self.visible: dict[str, TensorDecl] = {d.name: d for d in self.params}  # readable now
        self.temps: list[TensorDecl] = []
        self.statements: list[Statement] = []
        self.prelude: list[Statement] = []  # hidden statements the current one needs first
        self.assigned_at: dict[str, int] = {}
        self.assigned_later: dict[str, int] = {}
        for st in body.statements:
            self.assigned_later.setdefault(st.target.id, st.span.line)
        names = {n.id for st in body.statements for n in ast.walk(st) if isinstance(n, ast.Name)}
        target_vars = {n.id for st in body.statements for i in st.indices or () for n in ast.walk(i)
                       if isinstance(n, ast.Name)}
        self.names = _Namer(names | set(self.specs) | set(self.symbols), target_vars)
        self.sites: dict = {}  # Site -> its index in KernelIR.sites (gathers.py)
        self.accesses: list = []

    # ------------------------------------------------------------ kernel
    def build(self) -> KernelIR:
        for st in self.body.statements:
            self.statement(st)
        for name in self.outputs:
            if name not in self.assigned_at:
                raise CompileError(f"output '{name}' is never assigned", self.specs[name].span,
                                   hint=f"add a statement `{name} = ...` to the body")
        for w in unused_temporaries(self.body, self.outputs) if self.kdef.authored_temporaries else ():
            warnings.warn(w, stacklevel=3)
        return KernelIR(self.kdef.name, self.kdef.version, self.params, tuple(self.outputs.values()),
                        tuple(self.temps), tuple(self.statements), self.symbols, self.kdef.reassociate,
                        tuple(self.sites))

    def statement(self, st: ast.Statement) -> None:
        name = st.target.id
        self.check_target(st)
        self.start_statement()
        if st.indices is None and isinstance(st.value, ast.Binary) and st.value.op == "@":
            st = self.matmul_statement(st.target, st.value)  # `y = a @ b`: the contraction straight into y
        if isinstance(st, ast.AugAssign):
            stmt = self.scatter_statement(st, Binding)
        elif st.indices is None:
            stmt = self.accumulate_statement(st) or self.scan_statement(st) or self.whole_array(st)
        else:
            stmt = self.index_notation(st)
        site = self.site(st.span)  # a hidden statement without a site of its own is this one's
        self.statements += [s if getattr(s, "site", 0) is not None else attrs.evolve(s, site=site)
                            for s in (*self.prelude, stmt)]
        self.prelude = []
        self.assigned_at[name] = st.span.line
        self.visible[name] = self.outputs.get(name) or next(t for t in self.temps if t.name == name)

    def check_target(self, st: ast.Assign) -> None:
        name, span = st.target.id, st.target.span
        decl = self.visible.get(name)
        if decl is not None and decl.kind in ("input", "scalar"):
            raise CompileError(f"cannot assign to input '{name}'; inputs are read-only", span,
                               hint=f"assign the result to a new name, e.g. {name}2 = ...")
        if name in self.assigned_at:
            raise CompileError(f"'{name}' is assigned twice (first on line {self.assigned_at[name]})", span,
                               hint="each name is assigned exactly once; use a new name")
        if name in self.symbols:
            raise CompileError(f"'{name}' is a shape symbol and cannot be assigned", span,
                               hint=f"'{name}' is a dimension of the inputs; give the temporary another name, "
                                    f"e.g. {name}_")
        if name in FUNCTIONS or name == "len" or name in LOGICAL_REDUCTIONS:
            raise CompileError(f"'{name}' is the name of a function and cannot name a temporary", span,
                               hint="function, reduction and type names are reserved; choose another name")

    def declare_temp(self, name: str, dtype: DType, shape: Shape) -> None:
        self.temps.append(TensorDecl(name, dtype, shape, "temp"))

    def finish(self, st: ast.Assign, val: Val, shape: Shape) -> Expr:
        """The value's expression in the target's dtype (declared outputs: a same-kind cast)."""
        out = self.outputs.get(st.target.id)
        if out is None:
            val = strengthen(val)
            self.declare_temp(st.target.id, val.dtype, shape)
            return val.expr
        if not can_assign(val, out.dtype):
            what = describe(val) if val.weak else f"a {val.dtype} value"
            raise CompileError(f"cannot assign {what} to output '{out.name}' of type {out.dtype} without an unsafe cast",
                               st.value.span, hint=f"convert explicitly: {out.name} = {out.dtype}(...)")
        return coerce(val, out.dtype)

    def whole_array(self, st: ast.Assign, val: Val | None = None) -> Compute:
        val = self.eval(st.value, {}) if val is None else val
        out = self.outputs.get(st.target.id)
        shape = val.shape if out is None else out.shape
        if out is not None and not broadcasts_to(val.shape, shape):
            raise CompileError(
                f"shape mismatch: output '{out.name}' is declared {type_str(out.dtype, out.shape)} but the value "
                f"has shape {shape_str(val.shape)}", st.value.span,
                hint="the value must have the output's shape or broadcast to it")
        expr = self.finish(st, val, shape)
        variables = self.names.statement_vars(len(shape))
        element = at(Val(align(Val(expr, val.shape), shape), shape), tuple(Expr.idx(v) for v in variables))
        return Compute(st.target.id, variables, element)

    def index_notation(self, st: ast.Assign) -> Compute:
        name, out = st.target.id, self.outputs.get(st.target.id)
        if out is not None and len(st.indices) != len(out.shape):
            raise CompileError(
                f"output '{name}' has {plural(len(out.shape), 'dimension')} ({type_str(out.dtype, out.shape)}) "
                f"but the target names {plural(len(st.indices), 'index variable')}", st.target.span)
        scope: dict[str, Binding] = {}
        for k, i in enumerate(st.indices):
            self.check_new_variable(i, scope)
            scope[i.id] = Binding(i.id, i.id, i.span)
            if out is not None:
                scope[i.id].range, scope[i.id].fixed = out.shape[k], True
        val = self.eval(st.value, scope)
        if val.shape:
            raise CompileError(
                f"the right-hand side of an index-notation statement must be one value per point; "
                f"it has shape {shape_str(val.shape)}", st.value.span, hint="index every array, e.g. x[i] rather than x")
        for b in scope.values():
            if not b.used:
                raise CompileError(f"index variable '{b.name}' of the target is not used on the right-hand side",
                                   b.span, hint="every target index variable must appear in the expression")
            self.require_range(b)
        shape = out.shape if out is not None else tuple(b.range for b in scope.values())
        if out is not None:
            self.warn_out_of_bounds(st, out)
        return Compute(name, tuple(i.id for i in st.indices), self.finish(st, val, shape))

    # ------------------------------------------------------------ resonance
    def accumulate_statement(self, st: ast.Assign) -> Accumulate | None:
        """`r = resonance(c, v)` straight into `r` when no conversion is needed."""
        call = st.value
        if not (isinstance(call, ast.Call) and call.func.id == "resonance"):
            return None
        self.check_call(FUNCTIONS["resonance"], call)
        dtype, acc = self.resonance(call, {})
        out = self.outputs.get(st.target.id)
        if out is None:
            self.declare_temp(st.target.id, dtype, (RESONANCE_BINS,))
        elif out.dtype is not dtype or out.shape != (RESONANCE_BINS,):
            return None
        return attrs.evolve(acc, target=st.target.id)

    def resonance(self, call: ast.Call, scope: Scope) -> tuple[DType, Accumulate]:
        classes, values = (self.eval(a, scope) for a in call.args)
        for v in (classes, values):
            bound = [x for x in v.expr.free_vars() if not x.startswith(PLACEHOLDER)]
            if bound:
                raise CompileError("resonance() scatters whole arrays; its arguments cannot use index variables",
                                   v.span, hint="compute the arguments in statements of their own first")
        if not classes.dtype.is_int:
            raise CompileError(f"resonance() needs integer classes; got {classes.dtype}", classes.span,
                               hint="classes are integers 0..95, e.g. from atlas_class(byte)")
        shape = broadcast_shapes((classes.shape, values.shape))
        if shape is None:
            raise CompileError(f"the classes ({shape_str(classes.shape)}) and values ({shape_str(values.shape)}) "
                               "of resonance() do not broadcast", call.span)
        dtype = reductions.result_dtype("sum", strengthen(values).dtype)
        variables = self.names.statement_vars(len(shape))
        index = tuple(Expr.idx(v) for v in variables)

        def element(v: Val, d: DType) -> Expr:
            return at(Val(align(Val(coerce(v, d), v.shape), shape), shape), index)

        return dtype, Accumulate("", variables, shape, element(classes, I64), element(values, dtype), resonance=True,
                                 site=self.site(call.span))

    def resonance_value(self, call: ast.Call, scope: Scope) -> Val:
        """A resonance inside a larger expression: computed into a hidden temporary first."""
        dtype, acc = self.resonance(call, scope)
        name = self.names.fresh("resonance")
        self.declare_temp(name, dtype, (RESONANCE_BINS,))
        self.prelude.append(attrs.evolve(acc, target=name))
        return Val(Expr.load(name, dtype, axes(1)), (RESONANCE_BINS,), False, call.span)

    # ------------------------------------------------------------ expressions
    def eval(self, node: ast.Expr, scope: Scope) -> Val:
        if isinstance(node, (ast.Num, ast.Bool)):
            return Val.of_literal(node.value, node.span)
        if isinstance(node, ast.Name):
            return attrs.evolve(self.name_value(node, scope), span=node.span)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, scope)
        if isinstance(node, ast.Attribute) and node.attr == "T" and node.index is None:
            return self.transposed(node, scope)
        if asks_shape(node):
            return self.eval(affine_ast(self.shape_value(node, scope), node.span), scope)
        if isinstance(node, ast.Unary):
            return apply(UNARY[node.op], (self.eval(node.operand, scope),), node.span)
        if isinstance(node, ast.Binary) and node.op == "@":
            if scope:
                raise CompileError("'@' multiplies whole arrays; in index notation write the sum", node.span,
                                   hint="c[i, j] = sum(a[i, p] * b[p, j], p)")
            tmp = self.names.fresh("matmul")
            self.statement(self.matmul_statement(ast.Name(tmp, node.span), node))
            return self.eval(ast.Name(tmp, node.span), scope)
        if isinstance(node, ast.Binary):
            return apply(BINARY[node.op], (self.eval(node.left, scope), self.eval(node.right, scope)), node.span)
        if isinstance(node, ast.Call):
            return attrs.evolve(self.call(node, scope), span=node.span)
        raise TypeError(f"not an expression node: {node!r}")

    def name_value(self, node: ast.Name, scope: Scope) -> Val:
        n = node.id
        if n in scope:
            b = scope[n]
            b.used = True
            if b.offset == Affine.of(0):
                return Val(Expr.idx(b.ir))
            return apply(BINARY["+"], (Val(Expr.idx(b.ir)), self.eval(affine_ast(b.offset, node.span), {})), node.span)
        if n in self.visible:
            decl = self.visible[n]
            if decl.kind == "scalar":
                return Val(Expr("SCALAR", decl.dtype, (), n))
            return Val(Expr.load(n, decl.dtype, axes(len(decl.shape))), decl.shape)
        if n in self.symbols or is_derived(n):  # a weak int, as len(x) is a Python int in numpy
            return Val(Expr("SYM", I64, (), n), (), True)
        if n in CONSTANTS and n not in self.assigned_later:
            return Val.of_literal(CONSTANTS[n])
        raise self.unknown(node, scope)

    def tensor(self, node: ast.Name, scope: Scope) -> TensorDecl:
        if node.id in scope:
            raise CompileError(f"'{node.id}' is an index variable; it cannot be indexed", node.span)
        decl = self.visible.get(node.id)
        if decl is None:
            raise self.unknown(node, scope)
        return decl

    def unknown(self, node: ast.Name, scope: Scope) -> CompileError:
        n = node.id
        if n in self.assigned_later:
            return CompileError(f"'{n}' is used before it is assigned (on line {self.assigned_later[n]})", node.span,
                                hint="statements run in order; move the assignment up")
        if n in self.outputs:
            return CompileError(f"output '{n}' is used but never assigned", node.span)
        candidates = [*self.visible, *scope, *self.symbols, *CONSTANTS, "true", "false"]
        return CompileError(f"unknown name '{n}'{did_you_mean(n, candidates)}", node.span)

    def subscript(self, node: ast.Subscript, scope: Scope) -> Val:
        if isinstance(node.base, ast.Name):
            return self.element(self.tensor(node.base, scope), node, scope)
        return self.indexed(node, None, scope, self.eval(node.base, scope))  # (a + b)[1:], x[::2][1:]

    def element(self, decl: TensorDecl, node: ast.Subscript, scope: Scope) -> Val:
        n, rank = decl.name, len(decl.shape)
        if decl.kind == "scalar":
            raise CompileError(f"'{n}' is a scalar parameter; it cannot be indexed", node.span)
        plain = not any(isinstance(i, (ast.Slice, ast.NoneIndex, ast.EllipsisIndex)) for i in node.indices)
        if rank == 0 and plain:
            raise CompileError(f"'{n}' is a scalar (0-dimensional); use it without an index", node.span)
        if plain and (len(node.indices) > rank or scope and len(node.indices) != rank):
            raise CompileError(
                f"'{n}' has {plural(rank, 'dimension')} ({type_str(decl.dtype, decl.shape)}) but "
                f"{plural(len(node.indices), 'index')} {'is' if len(node.indices) == 1 else 'are'} given", node.span)
        return self.indexed(node, decl, scope)

    def affine(self, e: ast.Expr, scope: Scope) -> Affine:
        """An index expression as an affine form over IR variable names and shape symbols."""
        if isinstance(e, ast.Num) and isinstance(e.value, int):
            return Affine.of(e.value)
        if asks_shape(e):
            value = self.shape_value(e, scope)
            if isinstance(value, Affine):
                return value
            size = Affine.of(1)
            for d in value:  # x.size: affine when at most one dimension is symbolic
                if not (d.is_const or size.is_const):
                    raise CompileError("indices must be affine; this size is a product of shape symbols", e.span)
                size = d * size.const if size.is_const else size * d.const
            return size
        if isinstance(e, ast.Name):
            if e.id in scope:
                scope[e.id].used = True
                return Affine.of(scope[e.id].ir) + scope[e.id].offset
            if e.id in self.symbols:
                return Affine.of(e.id)
            if e.id in self.visible:
                raise CompileError(f"'{e.id}' is an array, and indices can only use index variables, shape symbols "
                                   "and integer literals", e.span, hint="indexing by array values is not supported")
            hint = "index variables come from the target (y[i] = ...) or a reduction (sum(x[k], k))"
            raise CompileError(f"unknown index variable '{e.id}'{did_you_mean(e.id, [*scope, *self.symbols])}",
                               e.span, hint=hint)
        if isinstance(e, ast.Unary) and e.op in "+-":
            a = self.affine(e.operand, scope)
            return -a if e.op == "-" else a
        if isinstance(e, ast.Binary) and e.op in ("+", "-", "*"):
            left, right = self.affine(e.left, scope), self.affine(e.right, scope)
            if e.op == "+":
                return left + right
            if e.op == "-":
                return left - right
            if left.is_const or right.is_const:
                return right * left.const if left.is_const else left * right.const
        if isinstance(e, ast.Num):
            raise CompileError(f"array indices must be integers; got {e.text}", e.span)
        if isinstance(e, ast.Subscript):
            raise CompileError(f"indices cannot be array elements such as {e.base.id}[...]", e.span,
                               hint="indexing by array values is not supported")
        raise CompileError("indices must be affine in index variables and shape symbols", e.span,
                           hint="like i, i + 1, n - 1 - i or 2*i")

    # ------------------------------------------------------------ calls
    def call(self, node: ast.Call, scope: Scope) -> Val:
        if node.func.id in LOGICAL_REDUCTIONS:
            return self.eval(logical_reduction(node), scope)
        if node.method and node.func.id == "astype" or not node.method and node.func.id in NUMPY_TYPES \
                and node.func.id not in FUNCTIONS and node.func.id not in self.visible:
            return self.eval(self.numpy_cast(node), scope)
        fn = FUNCTIONS.get(node.func.id)
        if node.method:
            base = ast.spelling(node.args[0])
            if fn is None or fn.kind not in ("reduce", "scan"):
                more = ", ..." if fn is not None and len(fn.params) > 1 else ""
                form = f"{node.func.id}({base}{more})" if fn is not None else f"a function of {base}"
                raise CompileError(f"'{base}.{node.func.id}()': of numpy's array methods, only the reductions "
                                   f"and scans ({', '.join(METHODS)}) and astype are accepted", node.span,
                                   hint=f"write {form}")
            if len(node.args) > 1 and fn.kind == "reduce":
                raise CompileError(f"'{base}.{node.func.id}()' takes keyword arguments only (axis=, keepdims=)",
                                   node.args[1].span)
        if fn is None:
            n = node.func.id
            if n in self.visible or n in scope or n in self.symbols:
                raise CompileError(f"'{n}' is not a function", node.func.span)
            raise CompileError(f"unknown function '{n}'{did_you_mean(n, [*FUNCTIONS, 'len', *LOGICAL_REDUCTIONS])}",
                               node.func.span)
        if fn.kind == "scan":
            return self.scan_value(node, scope)
        self.check_call(fn, node)
        if fn.kind == "reduce":
            return self.reduction(fn, node, scope)
        if fn.kind == "resonance":
            return self.resonance_value(node, scope)
        return fn.build([self.eval(a, scope) for a in node.args], node.span)

    def check_call(self, fn: Function, node: ast.Call) -> None:
        for k in node.keywords:
            if k.name not in fn.keywords:
                raise CompileError(f"{fn.name}() has no keyword argument '{k.name}'"
                                   f"{did_you_mean(k.name, fn.keywords)}", k.span, hint=f"usage: {fn.signature}")
        n, want = len(node.args), len(fn.params)
        if n < want or (n > want and not fn.variadic):
            hint = "round() rounds to an integer; it has no decimals argument" if fn.name == "round" else None
            raise CompileError(f"{fn.name}() takes {plural(want, 'argument')} ({fn.signature}) but {n} "
                               f"{'was' if n == 1 else 'were'} given", node.span, hint=hint or f"usage: {fn.signature}")

    def reduction(self, fn: Function, node: ast.Call, scope: Scope) -> Val:
        keywords = {k.name: k.value for k in node.keywords}
        axis = self.constant(keywords["axis"], int, "axis must be an integer literal") if "axis" in keywords else None
        keepdims = self.constant(keywords["keepdims"], bool, "keepdims must be true or false") \
            if "keepdims" in keywords else False
        named = node.args[1:]
        if not named:
            val = self.eval(node.args[0], scope)
            return reductions.over_axes(fn.op, val, axis, keepdims, lambda: self.names.reduction_var(None), node.span)
        if axis is not None or "keepdims" in keywords:
            raise CompileError(f"{fn.name}() over index variables takes no axis= or keepdims=", node.span,
                               hint=f"either {fn.name}(x, axis=1) or {fn.name}(x[i, k], k)")
        inner = dict(scope)
        bindings = []
        for a in named:
            if isinstance(a, ast.Ranged):
                self.check_new_variable(a.var, inner)
                start, stop = self.range_bounds(a)
                inner[a.var.id] = Binding(a.var.id, self.names.reduction_var(a.var.id), a.var.span, range=stop - start,
                                          fixed=True, origin=f"range() on line {a.span.line}", offset=start)
                bindings.append(inner[a.var.id])
                continue
            if not isinstance(a, ast.Name) or a.id in self.visible or a.id in self.symbols:
                hint = f"to reduce along an axis write {fn.name}(x, axis=1)"
                if fn.name in ("min", "max"):
                    hint = f"{fn.name}() reduces; for the elementwise {fn.name}imum of two values use " \
                           f"{fn.name}imum(a, b)"
                raise CompileError(f"the arguments of {fn.name}() after the first must be index variable names",
                                   a.span, hint=hint)
            self.check_new_variable(a, inner)
            inner[a.id] = Binding(a.id, self.names.reduction_var(a.id), a.span)
            bindings.append(inner[a.id])
        val = self.eval(node.args[0], inner)
        for b in bindings:
            if not b.used:
                raise CompileError(f"{fn.name}() reduces over '{b.name}', which does not appear in the reduced expression",
                                   b.span)
            self.require_range(b)
        return reductions.over_vars(fn.op, val, [(b.ir, b.range) for b in bindings], node.span)

    def constant(self, node: ast.Expr, kind: type, message: str) -> bool | int:
        val = self.eval(node, {})
        if not val.is_literal or type(val.literal) is not kind:
            raise CompileError(message, node.span)
        return val.literal

    # ------------------------------------------------------------ index variables
    def check_new_variable(self, name: ast.Name, scope: Scope) -> None:
        n = name.id
        if n in scope:
            raise CompileError(f"index variable '{n}' is already bound here", name.span, hint="use a different name")
        if n in self.visible or n in self.outputs or n in self.assigned_later:
            raise CompileError(f"'{n}' names an array; choose another name for the index variable", name.span)
        if n in self.symbols:
            raise CompileError(f"'{n}' is a shape symbol; choose another name for the index variable", name.span)

    @staticmethod
    def require_range(b: Binding) -> None:
        b.settle()
        if b.range is None:
            raise CompileError(f"cannot infer the range of index variable '{b.name}'", b.span,
                               hint=f"index an array with it on the right-hand side, like x[{b.name}] (or x[2*{b.name}] "
                                    f"when x's dimension is a multiple of 2, like 2*n)")


# ------------------------------------------------------------------ declarations
def _param_decl(p: ParamSpec) -> TensorDecl:
    return TensorDecl(p.name, p.dtype, p.shape, "input" if p.shape else "scalar")


def _symbols(kdef: KernelDef) -> tuple[str, ...]:
    """Shape symbols in first-appearance order; each must be bindable from an input."""
    seen: dict[str, ParamSpec] = {}
    names: set[str] = set()
    for p in kdef.inputs + kdef.outputs:
        if p.name in names:
            raise CompileError(f"'{p.name}' is declared twice", p.span)
        names.add(p.name)
        for d in p.shape:
            derived = [s for s in d.symbols if is_derived(s)]
            if derived and p in kdef.inputs:
                raise CompileError(f"input '{p.name}' has the dimension {d}, which is not affine; the shape "
                                   f"symbols are solved from the inputs' dimensions", p.span,
                                   hint="declare the input with its own symbols (f32[m, n]); products and '//' "
                                        "are for outputs")
            for s in derived_closure(derived):
                for base in parse_derived(s).symbols:
                    if not is_derived(base):
                        seen.setdefault(base, p)
            for s in d.symbols:
                if not is_derived(s):
                    seen.setdefault(s, p)
    bindable = {d.terms[0][0] for p in kdef.inputs for d in p.shape if len(d.terms) == 1}
    for s, p in seen.items():
        if s not in bindable:
            raise CompileError(f"shape symbol '{s}' of '{p.name}' cannot be bound from the inputs", p.span,
                               hint=f"some input's shape must have '{s}' as a dimension on its own, like f32[{s}]")
        if s in names:
            raise CompileError(f"'{s}' is both a shape symbol and a parameter name", p.span)
    return tuple(seen)
