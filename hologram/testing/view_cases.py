"""Generated kernels over numpy's indexing and loop dimensions, with their oracle.

    view_kernels(cfg)      whole-array statements over slices (`x[1:]`, `x[:-1]`, `x[::2]`,
                           `x[::-1]`, `a[:, 1:]`, `a[::-1]`), integer indices that drop an
                           axis (`a[0]`, `a[:, -1]`), new axes (`x[:, None]`), `...`, and
                           index arrays with negative entries and repeats (`x[idx]`,
                           `a[:, idx]`); outputs declared `n - 1`, `(n + 1) // 2`; `n` may
                           be 0, where numpy's slices are empty (a reduction of one is 0)
    looped(cases)          any generated case called with loop dimensions (`kernel.map`): some inputs
                           (scalar parameters too) get the whole loop shape, some a
                           broadcast part of it, some none; the oracle is the kernel's
                           own oracle per item, as a numpy gufunc is defined

The module adds to hologram.testing.cases (whose `kernels` draws these too).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core.errors import ExecutionError
from hologram.core.types import Affine
from hologram.testing import values
from hologram.testing.bounds import Val
from hologram.testing.cases import (KernelCase, Param, Statement, _dtype, _evaluate, _finish, _leaf, _load, _out_dtype,
                                    runtime_errors)
from hologram.testing.exprgen import Builder, GenConfig, _fits_in, reachable, render

__all__ = ["view_kernels", "looped"]

# shape labels of slices, and the dimension each stands for (an output declares it)
DIMS = {"n": Affine.of("n"), "m": Affine.of("m"), "k": Affine.of("k"), "1": Affine.of(1),
        "n1": Affine.of("n") - 1, "h": Affine.of("(n + 1)//2"), "n2": Affine.of("n//2")}


def _get(name: str) -> Callable[[Any], np.ndarray]:
    return lambda env: env.names[name].v


def _views(x: Param, a: Param, idx: Param, ia: Param) -> list[tuple[str, tuple[str, ...], Callable]]:
    """(text, shape labels, numpy's value) of each indexing form over x: [n], a: [m, n],
    idx: int[k] (entries in -n .. n-1) and ia: int[k] (entries in -m .. m-1)."""
    X, A, I, J = _get(x.name), _get(a.name), _get(idx.name), _get(ia.name)
    return [
        ("x[1:]", ("n1",), lambda e: X(e)[1:]), ("x[:-1]", ("n1",), lambda e: X(e)[:-1]),
        ("x[::2]", ("h",), lambda e: X(e)[::2]), ("x[::-2]", ("h",), lambda e: X(e)[::-2]),
        ("x[::-1]", ("n",), lambda e: X(e)[::-1]), ("x[...]", ("n",), lambda e: X(e)[...]),
        ("a[:, 1:]", ("m", "n1"), lambda e: A(e)[:, 1:]), ("a[::-1, :-1]", ("m", "n1"), lambda e: A(e)[::-1, :-1]),
        ("a[:, ::2]", ("m", "h"), lambda e: A(e)[:, ::2]), ("a[0]", ("n",), lambda e: A(e)[0]),
        ("a[-1, ::-1]", ("n",), lambda e: A(e)[-1, ::-1]), ("a[..., 1:]", ("m", "n1"), lambda e: A(e)[..., 1:]),
        ("x[:, None]", ("n", "1"), lambda e: X(e)[:, None]), ("x[None, 1:]", ("1", "n1"), lambda e: X(e)[None, 1:]),
        ("x[idx]", ("k",), lambda e: X(e)[I(e)]), ("a[ia]", ("k", "n"), lambda e: A(e)[J(e)]),
        ("a[:, idx]", ("m", "k"), lambda e: A(e)[:, I(e)]), ("a[ia, idx]", ("k",), lambda e: A(e)[J(e), I(e)]),
        ("a[ia, 1:]", ("k", "n1"), lambda e: A(e)[J(e), 1:]),
        # chained, and indices of values
        ("x[1:][::2]", ("n2",), lambda e: X(e)[1:][::2]), ("x[::-1][1:]", ("n1",), lambda e: X(e)[::-1][1:]),
        ("a[:, ::-1].T", ("n", "m"), lambda e: A(e)[:, ::-1].T), ("(x + x)[:-1]", ("n1",), lambda e: (X(e) + X(e))[:-1]),
        ("a.T[::2].T", ("m", "h"), lambda e: A(e).T[::2].T),
    ]


@st.composite
def view_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Whole-array statements over numpy's indexing (see the module docs)."""
    sizes = {"n": draw(st.integers(0, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m)), "k": draw(st.integers(0, 4))}
    dt = _dtype(draw, cfg)
    x, a = Param("x", dt, (DIMS["n"],)), Param("a", _dtype(draw, cfg), (DIMS["m"], DIMS["n"]))
    index_dtypes = [np.dtype(t) for t in (np.int8, np.int32, np.int64)]
    idx = Param("idx", draw(st.sampled_from(index_dtypes)), (DIMS["k"],))
    ia = Param("ia", draw(st.sampled_from(index_dtypes)), (DIMS["k"],))
    inputs = [x, a, idx, ia]
    forms = _views(x, a, idx, ia)
    if sizes["n"] == 0:  # no index array can point into an empty x (ia's rows are fine)
        sizes["k"] = 0
    chosen = draw(st.lists(st.sampled_from(forms), min_size=1, max_size=3, unique_by=lambda f: f[0]))
    leaves = [_load(text, p_dtype(text, x, a), shape, fn) for text, shape, fn in chosen]
    leaves += [_leaf(x), _leaf(a)] if draw(st.booleans()) else []
    first = leaves[0].shape  # the statement uses the first view, so its shape must broadcast into the result's
    shapes = [s for s in reachable([l.shape for l in leaves]) if _fits_in(first, s)]
    builder = Builder(draw, cfg, leaves)
    node = builder.expr(draw(st.sampled_from(shapes)), max(cfg.max_depth - 1, 1))
    node = builder.require(node, leaves[0])
    statements: list[Statement] = [("y", f"y = {render(node)}", node)]
    outputs = [Param("y", _out_dtype(draw, node.dtype), tuple(DIMS[d] for d in node.shape))]
    if any(d == "n1" for d in node.shape) and sizes["n"] == 0:
        sizes["n"] = 1  # an output of n - 1 elements asks for n >= 1 (n = 0 is covered by reductions)
        sizes["k"] = min(sizes["k"], 4)
    given = {idx.name: _indices(draw, idx.dtype, sizes["k"], sizes["n"]),
             ia.name: _indices(draw, ia.dtype, sizes["k"], sizes["m"])}
    return _finish(draw, sizes, inputs, statements, outputs, given=given)


def p_dtype(text: str, x: Param, a: Param) -> np.dtype:
    return x.dtype if text.lstrip("(").startswith("x") else a.dtype


def _indices(draw: Callable, dtype: np.dtype, count: int, extent: int) -> np.ndarray:
    """`count` valid indices into an axis of `extent`, negative ones counting from the end."""
    if extent == 0:
        return np.zeros(count, dtype)
    lo = max(-extent, int(np.iinfo(dtype).min))
    hi = min(extent - 1, int(np.iinfo(dtype).max))
    return np.array(draw(st.lists(st.integers(lo, hi), min_size=count, max_size=count)), dtype)


# ------------------------------------------------------------------ loop dimensions
@st.composite
def looped(draw: Callable, cases: st.SearchStrategy[KernelCase]) -> KernelCase:
    """A case called with loop dimensions (see the module docs); its program's oracle per item."""
    case = draw(cases)
    if case.error or case.program is None:
        return case
    shape = tuple(draw(st.lists(st.integers(0, 3) | st.just(1), min_size=1, max_size=2)))
    program = case.program
    inputs: list[tuple[str, Any]] = []
    owns: list[tuple[int, ...]] = []
    for name, value in case.inputs:
        mode = draw(st.sampled_from(["full", "part", "none"]))
        own = shape if mode == "full" else tuple(d if draw(st.booleans()) else 1 for d in shape)[
            draw(st.integers(0, len(shape) - 1)):] if mode == "part" else ()
        if not own:
            inputs.append((name, value))
            continue
        owns.append(own)
        arr = np.asarray(value)
        count = int(np.prod(own))
        if arr.ndim == 0:  # a scalar parameter given an array: new values per item
            items = [np.asarray(draw(values.scalars(arr.dtype))) for _ in range(count)]
        else:  # the case's own values, shuffled per item (indices and classes stay valid)
            flat = arr.reshape(-1)
            items = [flat[np.asarray(draw(st.permutations(range(flat.size))), np.int64)].reshape(arr.shape)
                     for _ in range(count)]
        inputs.append((name, np.stack(items).reshape(own + arr.shape) if items else np.zeros(own + arr.shape, arr.dtype)))
    if not owns:
        return case
    shape = np.broadcast_shapes(*owns)  # the call's loop shape
    expected: dict[str, list[Val]] = {p.name: [] for p in program.outputs}
    for item in itertools.product(*(range(d) for d in shape)):
        given = {name: _item(np.asarray(v), np.asarray(dict(case.inputs)[name]).ndim, item) for name, v in inputs}
        try:
            results = _evaluate(program.statements, program.outputs, program.sizes, given, _bounds())
        except ExecutionError:
            return attrs.evolve(case, inputs=tuple(inputs), expected=(), error=runtime_errors(), program=None,
                                mapped=True)
        for name, val in results.items():
            expected[name].append(val)
    stacked = tuple((p.name, _stack(expected[p.name], shape, p.concrete(program.sizes), p.dtype))
                    for p in program.outputs)
    return attrs.evolve(case, inputs=tuple(inputs), expected=stacked, program=None, mapped=True)


def _bounds():
    from hologram.testing import bounds

    return bounds


def _item(value: np.ndarray, core_rank: int, item: tuple[int, ...]) -> np.ndarray:
    """An argument's value for one item of the loop shape (its loop dimensions broadcast)."""
    lead = value.ndim - core_rank
    if lead <= 0:
        return value[()] if value.ndim == 0 else value
    index = tuple(0 if d == 1 else i for d, i in zip(value.shape[:lead], item[len(item) - lead:]))
    out = value[index]
    return out[()] if out.ndim == 0 else out


def _stack(vals: list[Val], shape: tuple[int, ...], core: tuple[int, ...], dtype: np.dtype) -> Val:
    """Per-item oracle values as one value of the loop shape."""
    if not vals:
        return Val.exact(np.zeros(shape + core, dtype))
    return Val(*(np.stack([getattr(v, f) for v in vals]).reshape(shape + vals[0].shape)
                 for f in ("v", "err", "ulps", "fuzzy")))
