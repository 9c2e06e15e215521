"""Indices beyond affine ones, as the analyzer reads them: gathers, sites, bounds warnings.

`Gathers` is a mixin of the analyzer's `_Kernel` (hologram.dsl.analyze), whose own
methods and state it uses (`eval`, `symbols`, `visible`, `kdef`, `outputs`):

- `is_affine_index(e)`: whether an index is written as an affine form (the analyzer's
  `affine` reads it: index variables, shape symbols, integer literals, `+ - *` by a
  constant); any other index is a gather, `gather_index` evaluates it as a value and
  gives it numpy's integer-array meaning (hologram.dsl.indexing);
- `site(span)`: the index of a source location in the kernel's site table
  (`KernelIR.sites`), which the loads and scatters it builds carry so a run-time error
  names the document line;
- `note_access` / `warn_out_of_bounds`: the compile-time warning for an access that is
  out of bounds at every size (hologram.dsl.outofbounds).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from hologram.core.errors import CompileError, Site, Span
from hologram.core.types import Affine, shape_str
from hologram.dsl import ast
from hologram.dsl.indexing import numpy_index
from hologram.dsl.outofbounds import Access, Target, always_out_of_bounds
from hologram.dsl.spellings import asks_shape
from hologram.ir import Expr, TensorDecl

Scope = Mapping[str, Any]  # index variable name -> the analyzer's Binding


class Gathers:
    """The analyzer's methods for gathers, sites and bounds warnings (module docstring)."""

    sites: dict[Site, int]
    accesses: list[tuple[TensorDecl, int, Affine, dict[str, Any], Span]]  # note_access's, this statement's

    # ------------------------------------------------------------ gathers
    def is_affine_index(self, e: ast.Expr, scope: Scope) -> bool:
        """Is `e` written as an affine index? Names that are not arrays (index variables,
        symbols, unknown names: `affine` says what is wrong with those) and integer
        literals, combined with + and -, and * when one side is a literal expression."""
        if isinstance(e, ast.Num) or asks_shape(e):
            return True
        if isinstance(e, ast.Name):
            return e.id in scope or e.id in self.symbols or e.id not in self.visible and e.id not in CONSTANT_NAMES
        if isinstance(e, ast.Unary) and e.op in "+-":
            return self.is_affine_index(e.operand, scope)
        if isinstance(e, ast.Binary) and e.op in ("+", "-"):
            return self.is_affine_index(e.left, scope) and self.is_affine_index(e.right, scope)
        if isinstance(e, ast.Binary) and e.op == "*":
            return (self.is_affine_index(e.left, scope) and self.is_affine_index(e.right, scope)
                    and (_literal(e.left) or _literal(e.right)))
        return False

    def gather_index(self, e: ast.Expr, decl: TensorDecl, k: int, scope: Scope) -> Expr:
        """The i64 index of dimension `k` of `decl` computed by `e`, with numpy's meaning
        of an integer index (negative values count from the end)."""
        val = self.eval(e, scope)
        if val.shape and isinstance(e, ast.Name):
            raise CompileError(f"'{e.id}' is an array ({shape_str(val.shape)}); an index is one integer per point",
                               e.span, hint=f"index it too, as in y[i] = {decl.name}[{e.id}[i]]")
        if val.shape:
            raise CompileError(f"an index is one integer per point; this one has shape {shape_str(val.shape)}",
                               e.span, hint="index the arrays in it, as in y[i] = x[idx[i]]")
        return numpy_index(val.expr, decl.shape[k], e.span).expr

    # ------------------------------------------------------------ sites
    def site(self, span: Span | None) -> int | None:
        """The index of `span`'s location in the kernel's site table (added once)."""
        if span is None:
            return None
        return self.sites.setdefault(Site.of(span), len(self.sites))

    # ------------------------------------------------------------ bounds warnings
    def note_access(self, decl: TensorDecl, k: int, a: Affine, by_ir: Mapping[str, Any], span: Span) -> None:
        """Remember an affine access for `warn_out_of_bounds` (ranges are read then)."""
        self.accesses.append((decl, k, a, dict(by_ir), span))

    def warn_out_of_bounds(self, st: ast.Assign, out: TensorDecl) -> None:
        """Warn about the statement's accesses that are out of bounds at every size
        (hologram.dsl.outofbounds), except those inside a branch of `where`."""
        guarded = _where_branches(st.value)
        found = []
        for decl, k, a, by_ir, span in self.accesses:
            if any(_inside(span, g) for g in guarded):
                continue
            ranges = {v: b.range for v, b in by_ir.items()}
            found.append(Access(decl.name, k, decl.shape, a, ranges, {v: b.name for v, b in by_ir.items()}, span))
        target = Target(out.name, out.dtype.value, out.shape, tuple(i.id for i in st.indices))
        for w in always_out_of_bounds(found, target):
            warnings.warn(w, stacklevel=2)

    def start_statement(self) -> None:
        self.accesses = []


CONSTANT_NAMES = frozenset({"pi", "e", "inf", "nan"})  # the constants: float values, never index variables


def _literal(e: ast.Expr) -> bool:
    """An integer literal, or arithmetic of them: a constant coefficient."""
    if isinstance(e, ast.Num):
        return isinstance(e.value, int)
    if isinstance(e, ast.Unary) and e.op in "+-":
        return _literal(e.operand)
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*"):
        return _literal(e.left) and _literal(e.right)
    return False


def _where_branches(value: ast.Expr) -> list[Span]:
    """The spans of the second and third arguments of every `where` in `value`."""
    return [a.span for n in ast.walk(value) if isinstance(n, ast.Call) and n.func.id == "where" and not n.method
            for a in n.args[1:3]]


def _inside(span: Span, outer: Span) -> bool:
    start, end = (span.line, span.col), (span.end_line or span.line, span.end_col or span.col)
    lo, hi = (outer.line, outer.col), (outer.end_line or outer.line, outer.end_col or outer.col)
    return lo <= start and end <= hi


__all__ = ["Gathers"]
