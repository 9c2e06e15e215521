"""Scans, numpy's `cumsum` and `cumprod`, as the analyzer reads them.

    cumsum(x)            over the flattened array (numpy's default), a 1-D result
    cumsum(x, axis=k)    along axis k (negative axes count from the end), x's shape
    x.cumsum(axis=1), np.cumprod(x), cumsum(x * 2), y = x - cumsum(x) / n

The result dtype is numpy's (that of `sum`/`prod`: bool and signed integers give i64,
unsigned u64, floats keep their type). A scan becomes an IR `Scan` statement: straight
into the target when a statement is nothing but the scan (`y = cumsum(x)`, y of that
dtype and shape), otherwise into a hidden temporary computed first, as `a @ b` is
(hologram.dsl.spellings). `Scans` is a mixin of the analyzer's `_Kernel`
(hologram.dsl.analyze); its methods use the kernel's own (`eval`, `names`, `outputs`,
`declare_temp`, `prelude`, `constant`, `whole_array`). docs/dsl.md, "Scans".

Flattening a k-D array gives a dimension of the product of its dimensions, which must be
affine in the shape symbols (as every dimension is): at most one of them symbolic
(`f32[m, 3]` flattens to `3*m`; `f32[m, n]` is refused with a hint to scan along an
axis). Element f of the flattened array is `x[f // s0, f // s1 % d1, ..., f % dk]`.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from hologram.core.errors import CompileError, Span
from hologram.core.types import Affine, DType, Shape, shape_str
from hologram.dsl import ast, reductions
from hologram.dsl.functions import FUNCTIONS, Function
from hologram.dsl.shapes import PLACEHOLDER, Val, at, count_expr
from hologram.dsl.typerules import coerce, strengthen
from hologram.ir import Expr, Scan, Statement

Scope = Mapping[str, Any]  # index variable name -> the analyzer's Binding
SCANS = ("cumsum", "cumprod")
I64 = DType.I64
# numpy's keywords this language leaves out, and what to write instead
_REFUSED = {
    "dtype": "the result has numpy's default dtype (i64 for integers and bool, u64 for unsigned, floats keep "
             "theirs); cast the argument or the result instead, e.g. {f}(f64(x))",
    "out": "the result is a value; assign it, e.g. y = {f}(x)",
}


class Scans:
    """The analyzer's methods for cumsum and cumprod (see the module docstring)."""

    def scan_statement(self, st: ast.Assign) -> Statement | None:
        """`y = cumsum(...)`: the scan written straight into `y` when `y` is a temporary or
        an output of the scan's dtype and shape; otherwise (an output of another dtype, or
        one the result broadcasts to) the scan into a hidden temporary and `y` assigned
        from it. None when the statement is not a scan."""
        call = st.value
        if not (isinstance(call, ast.Call) and call.func.id in SCANS):
            return None
        val = self.scan_value(call, {})
        out = self.outputs.get(st.target.id)
        if out is not None and (out.dtype is not val.dtype or out.shape != val.shape):
            return self.whole_array(st, val)
        scan = self.prelude.pop()
        self.temps = [t for t in self.temps if t.name != scan.target]
        if out is None:
            self.declare_temp(st.target.id, val.dtype, val.shape)
        return attrs.evolve(scan, target=st.target.id)

    def scan_value(self, call: ast.Call, scope: Scope) -> Val:
        """A scan's value: its statement goes into a hidden temporary computed before the
        current statement, and the value loads that temporary."""
        fn = FUNCTIONS[call.func.id]
        axis = self.scan_axis(fn, call)
        if scope:
            raise CompileError(f"{fn.name}() scans whole arrays; in index notation assign it to a name first",
                               call.span, hint=f"c = {fn.name}(x) on its own line, then use c[i]")
        val = strengthen(self.eval(call.args[0], scope))
        bound = sorted(v for v in val.expr.free_vars() if not v.startswith(PLACEHOLDER))
        if bound:
            raise CompileError(f"{fn.name}() scans whole arrays; its argument cannot use index variables "
                               f"({', '.join(bound)})", call.args[0].span,
                               hint="compute the argument in a statement of its own first")
        dtype = reductions.result_dtype(fn.op, val.dtype)
        elem = Val(coerce(val, dtype), val.shape, False, val.span)
        shape, variables, var, value = self.scan_layout(fn, elem, axis, call.span)
        name = self.names.fresh(fn.name)
        self.declare_temp(name, dtype, shape)
        self.prelude.append(Scan(name, variables, var, fn.op, value, site=self.site(call.span)))
        return Val(Expr.load(name, dtype, tuple(Expr.idx(f"{PLACEHOLDER}{k}") for k in range(len(shape)))),
                   shape, False, call.span)

    def scan_axis(self, fn: Function, call: ast.Call) -> int | None:
        """The `axis=` of a scan call (None: flattened), after checking its arguments."""
        base = ast.spelling(call.args[0]) if call.method else None
        for k in call.keywords:
            if k.name in _REFUSED:
                raise CompileError(f"{fn.name}() takes no {k.name}= argument", k.span,
                                   hint=_REFUSED[k.name].format(f=fn.name))
        if len(call.args) > 1:
            form = f"{base}.{fn.name}(axis=...)" if base else f"{fn.name}(x, axis=...)"
            raise CompileError(f"{fn.name}() takes the axis as a keyword argument, as in {form}",
                               call.args[1].span)
        self.check_call(fn, call)
        kw = {k.name: k.value for k in call.keywords}
        if "axis" not in kw:
            return None
        return self.constant(kw["axis"], int, "axis must be an integer literal")

    def scan_layout(self, fn: Function, val: Val, axis: int | None, span: Span
                    ) -> tuple[Shape, tuple[str, ...], str, Expr]:
        """(result shape, its index variables, the scanned one, the element scanned at
        those variables) of `fn` along `axis` of `val` (None: the flattened array)."""
        rank = val.rank
        if axis is not None and rank and not -rank <= axis < rank:
            raise CompileError(f"axis {axis} is out of range for an array of {rank} dimension{'s' * (rank != 1)} "
                               f"(shape {shape_str(val.shape)})", span, hint=f"axes run from {-rank} to {rank - 1}")
        if axis is not None and not rank and axis not in (0, -1):
            raise CompileError(f"axis {axis} is out of range for a scalar", span,
                               hint="a scalar scans as a 1-element array: axis 0 (or -1), or no axis")
        if axis is not None and rank:
            variables = self.names.statement_vars(rank)
            return val.shape, variables, variables[axis % rank], at(val, tuple(Expr.idx(v) for v in variables))
        (f,) = self.names.statement_vars(1)
        if rank <= 1:  # a scalar is one element; a vector is its own flattening
            return (val.shape or (Affine.of(1),)), (f,), f, at(val, (Expr.idx(f),) * rank)
        size = self.dims.product(val.shape)  # m*n is a derived dimension (hologram.core.dims)
        return (size,), (f,), f, at(val, _unflatten(Expr.idx(f), val.shape))


def _unflatten(f: Expr, shape: Shape) -> tuple[Expr, ...]:
    """The row-major index of flat element `f` of an array of `shape`: along axis k,
    `f // (product of the later dimensions) % d_k` (no `//` for the last axis, no `%` for
    the first: f is below the size)."""
    out = []
    for k, d in enumerate(shape):
        if d == Affine.of(1):
            out.append(Expr.const(0, I64))
            continue
        stride = count_expr(shape[k + 1:])
        e = f if stride.op == "CONST" and stride.arg == 1 else Expr("FLOORDIV", I64, (f, stride))
        if k:
            e = Expr("MOD", I64, (e, count_expr((d,))))
        out.append(e)
    return tuple(out)


__all__ = ["SCANS", "Scans"]
