"""Scatter-accumulation in index notation, as the analyzer reads it: `h[b[i]] += w[i]`.

`Scatters` is a mixin of the analyzer's `_Kernel` (hologram.dsl.analyze), whose own
methods and state it uses (`element`, `eval`, `require_range`, `outputs`, `visible`,
`symbols`, `assigned_later`). The statement means numpy's `np.add.at(h, (b,), w)` on
`h = np.zeros(...)` (docs/dsl.md, "Scatter-add"):

- the target is a declared output (its shape must come from somewhere; an output's is
  declared), not bool; it starts at zero and every point of the domain adds its value
  at its index, duplicates accumulating;
- the domain's index variables are the names in the target's indices that name nothing
  else (`i` in `h[b[i]]`, `i` and `j` in `h[b[i], j]`); their ranges come from the arrays
  they index, in the target's indices and on the right, as a reduction's do;
- each target index means what it means in a load (hologram.dsl.indexing): a gathered
  one counts from the end when negative and fails at run time when outside, naming
  the line; the value is cast to the target's dtype as an output assignment is
  (same-kind), and f16/f32 targets accumulate in f64 (docs/lowering.md).

It becomes an IR `Accumulate` whose key is the flat element index (`indexing.flat_key`).
"""

from __future__ import annotations

from typing import Any, Callable

from hologram.core.errors import CompileError
from hologram.core.types import shape_str, type_str
from hologram.dsl import ast
from hologram.dsl.functions import FUNCTIONS
from hologram.dsl.gathers import CONSTANT_NAMES
from hologram.dsl.indexing import flat_key
from hologram.dsl.spellings import LOGICAL_REDUCTIONS, plural
from hologram.dsl.typerules import can_assign, coerce, describe
from hologram.ir import Accumulate

class Scatters:
    """The analyzer's `+=` statement (see the module docstring)."""

    def scatter_statement(self, st: ast.AugAssign, binding: Callable[..., Any]) -> Accumulate:
        """`target[indices] += value` as an Accumulate; `binding(name, ir, span)` makes
        the analyzer's binding of a domain variable."""
        name = st.target.id
        out = self.outputs.get(name)
        if out is None:
            raise CompileError(f"'{name}' is not a declared output; the target of '+=' must be one", st.target.span,
                               hint=f"declare it with its shape, e.g. outputs = {{ {name} = \"i64[256]\" }}: it "
                                    f"starts at zero, as np.add.at on np.zeros does")
        if out.dtype.is_bool:
            raise CompileError(f"cannot scatter-add into '{name}' of type bool; expected a numeric output", st.span,
                               hint=f"count in an integer output, e.g. {name} = \"i64[...]\"")
        if len(st.indices) != len(out.shape):
            raise CompileError(f"output '{name}' has {plural(len(out.shape), 'dimension')} "
                               f"({type_str(out.dtype, out.shape)}) but the target has "
                               f"{plural(len(st.indices), 'index')}", st.target.span)
        scope = {v.id: binding(v.id, v.id, v.span) for v in self.domain_variables(st.indices)}
        target = ast.Subscript(st.target, st.indices, st.target_span)
        load = self.element(out, target, scope).expr
        val = self.eval(st.value, scope)
        if val.shape:
            raise CompileError(f"the right-hand side of '+=' must be one value per point; it has shape "
                               f"{shape_str(val.shape)}", st.value.span,
                               hint="index every array, e.g. h[b[i]] += w[i]")
        for b in scope.values():
            self.require_range(b)
        if not can_assign(val, out.dtype):
            what = describe(val) if val.weak else f"a {val.dtype} value"
            raise CompileError(f"cannot add {what} into output '{name}' of type {out.dtype} without an unsafe cast",
                               st.value.span, hint=f"convert explicitly: {name}[...] += {out.dtype}(...)")
        return Accumulate(name, tuple(b.ir for b in scope.values()), tuple(b.range for b in scope.values()),
                          flat_key(load.srcs, out.shape), coerce(val, out.dtype), site=load.site)

    def domain_variables(self, indices: tuple[ast.Expr, ...]) -> list[ast.Name]:
        """The names in `indices` that name nothing else (not an array, scalar, symbol or
        constant, not bound by a reduction inside), in order of first appearance."""
        found: dict[str, ast.Name] = {}
        stack: list[tuple[ast.Expr, frozenset[str]]] = [(e, frozenset()) for e in reversed(indices)]
        while stack:
            node, bound = stack.pop()
            if isinstance(node, ast.Name):
                if node.id not in bound and not self.names_something(node.id):
                    found.setdefault(node.id, node)
            elif isinstance(node, ast.Call):
                args = list(node.args)
                if (node.func.id in LOGICAL_REDUCTIONS or getattr(FUNCTIONS.get(node.func.id), "kind", "") == "reduce") \
                        and len(args) > 1 and not node.method:
                    named = args[1:]
                    inner = bound | {a.var.id if isinstance(a, ast.Ranged) else getattr(a, "id", "") for a in named}
                    stack += [(a.over, bound) for a in reversed(named) if isinstance(a, ast.Ranged)]
                    stack.append((args[0], inner))
                else:
                    stack += [(a, bound) for a in reversed(args)]
                stack += [(k.value, bound) for k in node.keywords]
            elif isinstance(node, ast.Subscript):
                stack += [(i, bound) for i in reversed(node.indices)]
            elif isinstance(node, ast.Attribute):
                stack += [] if node.index is None else [(node.index, bound)]
            else:
                stack += [(c, bound) for c in reversed(ast.children(node))]
        return list(found.values())

    def names_something(self, n: str) -> bool:
        return (n in self.visible or n in self.outputs or n in self.symbols or n in self.assigned_later
                or n in CONSTANT_NAMES or n in FUNCTIONS)


__all__ = ["Scatters"]
