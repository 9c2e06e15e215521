"""Generated gathers and scatter-adds in index notation, with the oracle's answers.

    gather_kernels(cfg)    y[i] = f(x[g], ...) over x: T[n], the row gather
                           y[i, j] = f(a[g, j], ...) over a: T[n, m] and the column gather
                           y[i, j] = f(a[i, g], ...) over a: T[m, n], where the index g is
                           computed from an index array idx: I[k] of any integer dtype
                           (`idx[i]`, `idx[i] + 1`, `idx[i] - 2`, `n - 1 - idx[i]`,
                           `idx[i] % n`) or from the index variable alone (`(3*i + 1) % n`)
    scatter_kernels(cfg)   h[g] += v and h[g, j] += v into an output of 1 to 4 bins (so
                           indices repeat: duplicates accumulate), g computed from b: I[n] as
                           above, v an expression over w: T[n] (or T[n, m]), the index
                           variables and literals; T is f16 one time in three, where a
                           running f16 sum would lose what the f64 accumulator keeps

The index values mix negative ones (which count from the end, as numpy's), duplicates and
the edges -dim, -1, 0, dim - 1, drawn so that the computed index lands inside the
dimension; `idx[i] % n` takes any value of the dtype, edges included. One case in
`OUT_OF_RANGE_EVERY` plants an index outside (or an unsigned one above the i64 maximum):
the oracle then raises where numpy raises IndexError and the case expects an
ExecutionError, the error path every backend must take without a crash or a wrong read.
The oracle is numpy's fancy indexing and `np.add.at` (hologram.core.semantics.add_at)
with the contract of sums (hologram.testing.bounds.scatter_add).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from hologram.core.errors import ExecutionError
from hologram.core.types import Affine
from hologram.testing import values
from hologram.testing.bounds import Val
from hologram.testing.cases import (KernelCase, Param, Statement, _finish, _grids, _indexed, _load,
                                    _out_dtype, _value)
from hologram.testing.exprgen import Builder, Env, GenConfig, Node, evaluate, infer, literal, render, strong, symbol

__all__ = ["OUT_OF_RANGE_EVERY", "gather_kernels", "scatter_kernels", "numpy_positions"]

OUT_OF_RANGE_EVERY = 10
INT_KINDS = "iu"
# How the index array's value s becomes the index (`_index_node` writes it): by form, the
# s to store for a wanted index v in a dimension n, or None when any s will do.
FORMS: dict[str, Callable[[int, int], int] | None] = {
    "plain": lambda v, n: v,                 # idx[i]
    "plus": lambda v, n: v - 1,              # idx[i] + 1
    "minus": lambda v, n: v + 2,             # idx[i] - 2
    "reversed": lambda v, n: n - 1 - v,      # n - 1 - idx[i]
    "remainder": None,                       # idx[i] % n
}


def numpy_positions(index: np.ndarray, dim: int) -> np.ndarray:
    """numpy's integer-array indexing along a dimension of `dim`: a negative index counts
    from the end; one still outside (or an unsigned one beyond the i64 maximum) raises
    ExecutionError, where numpy raises IndexError."""
    index = np.asarray(index)
    if index.dtype == np.uint64 and index.size and int(index.max()) > np.iinfo(np.int64).max:
        raise ExecutionError(f"index {int(index.max())} is out of bounds for a dimension of {dim}")
    v = index.astype(np.int64)
    outside = (v < -dim) | (v >= dim)
    if outside.any():
        raise ExecutionError(f"index {int(v[outside][0])} is out of bounds for a dimension of {dim}")
    return np.where(v < 0, v + dim, v)


class _Indexed:
    """One gather or scatter kernel under construction: sizes, inputs, given values."""

    def __init__(self, draw: Callable, cfg: GenConfig):
        self.draw, self.cfg = draw, cfg
        self.sizes = {"n": draw(st.integers(1, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m)),
                      "k": draw(st.integers(0, cfg.max_k + 2))}
        self.inputs: list[Param] = []
        self.given: dict[str, Any] = {}
        self.statements: list[Statement] = []
        self.outputs: list[Param] = []

    def dtype(self, kinds: str) -> np.dtype:
        picks = [d for d in self.cfg.dtypes if values.as_dtype(d).kind in kinds] or ["i32"]
        return values.as_dtype(self.draw(st.sampled_from(picks)))

    def input(self, name: str, *dims: Affine | str | int, dtype: np.dtype | None = None) -> Param:
        p = Param(name, dtype if dtype is not None else self.dtype("biuf"), tuple(map(Affine.of, dims)))
        self.inputs.append(p)
        return p

    def index(self, array: str, length: str, var: str, dom: tuple[str, ...], dim: int,
              dim_text: str) -> Node:
        """An index computed from `array`: I[length] at `var`, landing in a dimension of
        `dim` (spelled `dim_text`), its stored values drawn for that (see the module docs)."""
        draw = self.draw
        dt = self.dtype(INT_KINDS)
        self.input(array, length, dtype=dt)
        count = self.sizes[length]
        form = draw(st.sampled_from(sorted(FORMS)))
        stored = FORMS[form]
        info = np.iinfo(dt)
        lo = -dim if dt.kind == "i" else 0
        if stored is None:  # a remainder: any value of the dtype lands inside, edges included
            data = draw(values.arrays(dt, count))
        else:
            edges = sorted({lo, -1, 0, dim - 1} & set(range(lo, dim)))
            wanted = draw(st.lists(st.sampled_from(edges) | st.integers(lo, dim - 1), min_size=count,
                                   max_size=count))
            raw = [stored(v, dim) for v in wanted]
            if not all(info.min <= r <= info.max for r in raw):  # the form does not fit the dtype here
                form, raw = "plain", wanted
            data = np.array(raw, dtype=np.int64).astype(dt)
        if count and draw(st.integers(0, OUT_OF_RANGE_EVERY - 1)) == 0:  # the error path
            data[draw(st.integers(0, count - 1))] = info.max if dt == np.uint64 else min(info.max, dim + 2)
        self.given[array] = data
        load = _load(f"{array}[{var}]", dt, dom, lambda env: _value(array)(env)[env.grids[var]])
        return _index_node(form, load, dim_text)

    def assign(self, target: str, lhs: str, node: Node, grids: dict[str, np.ndarray], vars_: tuple[str, ...],
               dims: tuple[Affine | str | int, ...]) -> None:
        self.statements.append((target, f"{lhs} = {render(node)}", _indexed(node, grids, vars_)))
        self.outputs.append(Param(target, _out_dtype(self.draw, node.dtype), tuple(map(Affine.of, dims))))

    def case(self) -> KernelCase:
        return _finish(self.draw, self.sizes, self.inputs, self.statements, self.outputs, self.given)


def _index_node(form: str, load: Node, dim_text: str) -> Node:
    """The index of FORMS' `form` over the index load, typed by numpy's rules."""
    if form == "plain":
        return load
    if form == "plus":
        return Node("+", infer("+", [load, literal(1)]), load.shape, (load, literal(1)))
    if form == "minus":
        return Node("-", infer("-", [load, literal(2)]), load.shape, (load, literal(2)))
    dim = symbol(dim_text) if not dim_text.isdigit() else literal(int(dim_text))
    if form == "remainder":
        return Node("%", infer("%", [load, dim]), load.shape, (load, dim))
    first = Node("-", np.dtype(np.int64), (), (dim, literal(1)), weak=True) if dim.op == "sym" else literal(
        int(dim_text) - 1)
    return Node("-", infer("-", [first, load]), load.shape, (first, load))


def _gathered(source: str, index: Node, axis: int, other: str | None) -> Callable[[Env], np.ndarray]:
    """The values a gather reads: numpy's fancy indexing of `source` along `axis` by the
    index expression, the other axis (if any) indexed by the variable `other`."""
    def read(env: Env) -> np.ndarray:
        a = _value(source)(env)
        where = numpy_positions(strong(evaluate(index, env)).v, a.shape[axis])
        if a.ndim == 1:
            return a[where]
        return a[where, env.grids[other]] if axis == 0 else a[env.grids[other], where]
    return read


# ------------------------------------------------------------------------- gathers
@st.composite
def gather_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Gathers in index notation (see the module docs)."""
    g = _Indexed(draw, cfg)
    n = g.sizes["n"]
    template = draw(st.sampled_from(("vector", "vector", "rows", "columns", "computed")))
    if template in ("vector", "computed"):
        dom, grids = ("i",), _grids([("i", g.sizes["k"])])
        x = g.input("x", "n")
        if template == "vector":
            index = g.index("idx", "k", "i", dom, n, "n")
            text = f"x[{render(index)}]"
        else:
            a, b = draw(st.integers(1, 5)), draw(st.integers(0, 3))
            i64 = np.dtype(np.int64)
            grid = _load("i", i64, dom, lambda env: env.grids["i"])
            index = Node("%", i64, dom, (Node("+", i64, dom, (Node("*", i64, dom, (literal(a), grid)), literal(b))),
                                        symbol("n")))
            text = f"x[({a}*i + {b}) % n]"
        leaf = _load(text, x.dtype, dom, _gathered("x", index, 0, None))
        extra = [_load("i", np.dtype(np.int64), dom, lambda env: env.grids["i"])]
        if template == "vector":
            extra.append(_load("idx[i]", g.given["idx"].dtype, dom, lambda env: _value("idx")(env)[env.grids["i"]]))
        w = g.input("w", "k")
        extra.append(_load("w[i]", w.dtype, dom, lambda env: _value("w")(env)[env.grids["i"]]))
        node = _body(draw, cfg, [leaf, *extra], dom, leaf)
        g.assign("y", "y[i]", node, grids, dom, ("k",))
    else:
        rows = template == "rows"
        dom = ("i", "j")
        a = g.input("a", *(("n", "m") if rows else ("m", "n")))
        if rows:
            grids = _grids([("i", g.sizes["k"]), ("j", g.sizes["m"])])
            index = g.index("idx", "k", "i", dom, n, "n")
            leaf = _load(f"a[{render(index)}, j]", a.dtype, dom, _gathered("a", index, 0, "j"))
            shape = ("k", "m")
        else:
            grids = _grids([("i", g.sizes["m"]), ("j", g.sizes["k"])])
            index = g.index("idx", "k", "j", dom, n, "n")
            leaf = _load(f"a[i, {render(index)}]", a.dtype, dom, _gathered("a", index, 1, "i"))
            shape = ("m", "k")
        extra = [_load(v, np.dtype(np.int64), dom, lambda env, v=v: env.grids[v]) for v in dom]
        node = _body(draw, cfg, [leaf, *extra], dom, leaf)
        g.assign("y", "y[i, j]", node, grids, dom, shape)
    return g.case()


def _body(draw: Callable, cfg: GenConfig, leaves: list[Node], dom: tuple[str, ...], required: Node) -> Node:
    builder = Builder(draw, cfg, leaves, index_mode=True)
    return builder.require(builder.expr(dom, max(cfg.max_depth - 1, 1)), required)


# ------------------------------------------------------------------------ scatters
@st.composite
def scatter_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Scatter-adds in index notation (see the module docs)."""
    g = _Indexed(draw, cfg)
    g.sizes["n"] = draw(st.integers(0, cfg.max_n))  # an empty domain leaves the output zero
    bins = draw(st.integers(1, 4))
    two_d = draw(st.integers(0, 2)) == 0
    dom = ("i", "j") if two_d else ("i",)
    grids = _grids([("i", g.sizes["n"])] + ([("j", g.sizes["m"])] if two_d else []))
    index = g.index("b", "n", "i", dom, bins, str(bins))
    f16 = draw(st.integers(0, 2)) == 0
    w = g.input("w", *(("n", "m") if two_d else ("n",)), dtype=np.dtype(np.float16) if f16 else None)
    wl = _load("w[i, j]" if two_d else "w[i]", w.dtype, dom,
               lambda env: _value("w")(env)[(env.grids["i"], env.grids["j"]) if two_d else env.grids["i"]])
    leaves = [wl, wl, _load("i", np.dtype(np.int64), dom, lambda env: env.grids["i"])]
    if draw(st.integers(0, 3)) == 0:
        value = literal(draw(st.sampled_from((1, 2, -1))) if draw(st.booleans()) else 0.5)
    else:
        value = Builder(draw, cfg.without("compare", "logic"), leaves, index_mode=True).expr(dom, 2)
    dtype = _target_dtype(draw, value)
    shape = (bins, g.sizes["m"]) if two_d else (bins,)
    lhs = f"h[{render(index)}, j]" if two_d else f"h[{render(index)}]"

    def run(env: Env):
        env.grids = grids
        try:
            full = np.broadcast_shapes(*(v.shape for v in grids.values()))
            keys = [strong(evaluate(index, env)).broadcast_to(full)]
            if two_d:
                keys.append(strong(env.grids["j"]).broadcast_to(full))
            val = evaluate(value, env)
            val = val.broadcast_to(full) if isinstance(val, Val) else val  # a literal stays weak
            return env.engine.scatter_add(shape, dtype, tuple(keys), val)
        finally:
            env.grids = {}

    g.statements.append(("h", f"{lhs} += {render(value)}", run))
    g.outputs.append(Param("h", dtype, tuple(map(Affine.of, shape if not two_d else (bins, "m")))))
    return g.case()


def _target_dtype(draw: Callable, value: Node) -> np.dtype:
    """A numeric output dtype the value casts to (same kind, as an output assignment)."""
    if value.is_literal:
        v = value.attr[0]
        picks = ["f16", "f32", "f64"] + ([] if isinstance(v, float) else ["i8", "i32", "i64"] + (["u8"] if v >= 0 else []))
        return values.as_dtype(draw(st.sampled_from(picks)))
    return _out_dtype(draw, np.dtype(np.int64) if value.dtype.kind == "b" else value.dtype)


