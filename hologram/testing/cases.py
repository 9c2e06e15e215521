"""Generated kernels with their expected answers: hypothesis strategies of `KernelCase`.

A `KernelCase` is a kernel document (TOML text), concrete input values, and for every
output the oracle's answer with its accuracy contract (a `bounds.Val`), or the runtime
errors one of which the kernel must raise. `hologram.testing.run.check_case` runs a case
on a backend and checks it; a new backend is tested by running these strategies on it.

    kernels(cfg)             any of the three below
    expression_kernels(cfg)  whole-array statements: every operator and function, casts,
                             weak literals, broadcasting ((m, n) with (1, n), (m, 1), (1,),
                             rank 3 and scalar parameters), full and axis reductions
                             (keepdims, negative axes), constant indices, shape symbols as
                             values, `x.T` and `a @ b` (stacks of matrices too),
                             temporaries, output casts and broadcasts
    index_kernels(cfg)       index notation (INDEX_TEMPLATES): 1-D and 2-D stencils with
                             affine offsets, reversed, strided and constant indices,
                             transposes, outer products and diagonals, index variables and
                             symbols as values, whole-array reductions inside index
                             notation, contractions and reductions over named index
                             variables, 1-D and 2-D windows with explicit ranges, `a @ b`
                             over stacks of matrices at the register tile's sizes, sums
                             along short rows at the sizes of the lowering's row blocks
                             (`X @ w`), an index-notation temporary consumed by a
                             whole-array statement
    atlas_kernels(cfg)       the Atlas functions, including resonance's 96-bin scatter-add
                             (with classes that may fall outside 0..95: a runtime error)
    gather_kernels(cfg), scatter_kernels(cfg)   (hologram.testing.gather_cases) gathers
                             `x[idx[i]]` and scatter-adds `h[b[i]] += w[i]`
    symbol_kernels(cfg)      shape symbols used as values (weak ints, numpy's len(x)) in
                             arithmetic, comparisons and where() with one dtype, every
                             dtype: `x - s / n` and the like, symbol-only parts (`n // m`,
                             `1 / n`), and sizes beyond i8/u8 (wrapping) and f16's integers

`cfg` is a `GenConfig` (dtypes, operations, reductions, depth, sizes). Sizes are small
(the reference interpreter runs one lane at a time) and `n` may be 0.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core import errors
from hologram.core.dims import derive, derived_closure
from hologram.core.errors import ArgumentError, ExecutionError, HologramError
from hologram.core.types import Affine, DType
from hologram.lower.contract import BLOCK, GROUP, TILE_ROWS, narrow_cols, tile_cols
from hologram.lower.rows import ROWS, SHORT_ROW
from hologram.testing import bounds, values
from hologram.testing.bounds import Val
from hologram.testing.exprgen import (Builder, Engine, Env, GenConfig, Node, contains, evaluate, infer, literal,
                                      matmul, reachable, reduce_dtype, render, strong, symbol)

__all__ = ["KernelCase", "Param", "Program", "INDEX_TEMPLATES", "kernels", "expression_kernels", "index_kernels", "atlas_kernels",
           "symbol_kernels", "render_document", "runtime_errors"]

Statement = tuple[str, str, "Node | Callable[[Env], Val]"]  # (target, body line, how to evaluate)


@attrs.frozen(eq=False)
class Param:
    """A declared input or output: name, dtype and dims (Affine in the shape symbols)."""

    name: str
    dtype: np.dtype
    dims: tuple[Affine, ...] = ()

    @property
    def type_text(self) -> str:
        d = DType.from_numpy(self.dtype)
        return f"{d}[{', '.join(map(str, self.dims))}]" if self.dims else str(d)

    def concrete(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The shape at these sizes (a derived dimension, `(n + 1)//2`, computed from them)."""
        names = [s for dim in self.dims for s in dim.symbols]
        sizes = derive(derived_closure(names), sizes)
        return tuple(dim.evaluate(sizes) for dim in self.dims)


@attrs.frozen(eq=False)
class Program:
    """How a generated case was built, kept so it can be evaluated again (`replay`):
    the symbol sizes, the statements (target, body line, node or evaluator), the outputs."""

    sizes: Mapping[str, int]
    statements: tuple[Statement, ...]
    outputs: tuple[Param, ...]


@attrs.frozen(eq=False)
class KernelCase:
    """A generated kernel: its document, input values, and what each output must be.

    inputs     (name, value) in declaration order: arrays, or numpy scalars for scalar params
    expected   (name, Val) per output in declaration order; empty when `error` is set
    error      HologramError subclasses one of which running the kernel must raise
    mapped     the kernel is called with `.map` (loop dimensions, hologram.testing.view_cases)
    format     the translator `source` is written for: "toml", or "python" (hologram.testing.python_cases)
    stream     run through `hologram.stream` as this `StreamSpec` says (hologram.testing.stream_cases)
    dask       called with Dask arrays as this `DaskSpec` says (hologram.testing.dask_cases)
    """

    source: str
    inputs: tuple[tuple[str, Any], ...]
    expected: tuple[tuple[str, Val], ...]
    error: tuple[type[HologramError], ...] = ()
    program: "Program | None" = attrs.field(default=None, repr=False)
    mapped: bool = False  # called as `kernel.map(...)`: the inputs have loop dimensions
    format: str = "toml"
    stream: Any = None  # a hologram.testing.stream_cases.StreamSpec: run through hologram.stream
    dask: Any = None  # a hologram.testing.dask_cases.DaskSpec: called with Dask arrays

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.inputs)

    def describe(self) -> str:
        """The document and the inputs, for failure messages."""
        ins = "\n".join(f"  {k}: {np.asarray(v).dtype}{list(np.shape(v))} = "
                        f"{np.array2string(np.asarray(v), separator=', ', max_line_width=100, floatmode='unique')}"
                        for k, v in self.inputs)
        how = "" if self.stream is None else f"--- streamed: {self.stream} ---\n"
        how += "" if self.dask is None else f"--- called with Dask arrays: {self.dask} ---\n"
        return f"--- kernel ---\n{self.source}{how}--- inputs ---\n{ins}"

    def replay(self, engine: Engine) -> dict[str, np.ndarray]:
        """The outputs computed by evaluating the kernel again with another `Engine`
        (raises what the engine raises, e.g. ExecutionError)."""
        if self.program is None:
            raise ArgumentError("this case was not generated, so it has no program to replay")
        p = self.program
        vals = _evaluate(p.statements, p.outputs, p.sizes, dict(self.inputs), engine)
        return {name: val.v for name, val in vals.items()}

    def check(self, outputs: Mapping[str, np.ndarray]) -> None:
        """Assert that `outputs` (name -> array) are answers the contract allows."""
        for name, val in self.expected:
            if name not in outputs:
                raise AssertionError(f"output {name!r} missing from the results {sorted(outputs)}\n{self.describe()}")
            val.check(np.asarray(outputs[name]), name=name, context=self.describe())


def render_document(name: str, inputs: Sequence[Param], outputs: Sequence[Param], body: Sequence[str]) -> str:
    """A TOML kernel document."""
    def table(ps: Sequence[Param]) -> str:
        return "{ " + ", ".join(f'{p.name} = "{p.type_text}"' for p in ps) + " }" if ps else "{}"

    lines = "\n".join(body)
    return (f'[kernel]\nname = "{name}"\nversion = "1.0.0"\ninputs = {table(inputs)}\n'
            f'outputs = {table(outputs)}\nbody = """\n{lines}\n"""\n')


def runtime_errors() -> tuple[type[HologramError], ...]:
    """What a kernel raises for a runtime condition (min/max of an empty extent, a
    resonance class outside 0..95): ExecutionError, or the runtime's EmptyReductionError
    (checked before launch) where it exists."""
    extra = getattr(errors, "EmptyReductionError", None)
    return (ExecutionError,) + ((extra,) if extra else ())


def _evaluate(statements: Sequence[Statement], outputs: Sequence[Param], sizes: Mapping[str, int],
              given: Mapping[str, Any], engine: Engine) -> dict[str, Val]:
    """Run the statements in order with `engine`; each output cast and broadcast to its declaration."""
    env = Env({k: Val.exact(np.asarray(v)) for k, v in given.items()}, sizes, engine=engine)
    declared = {p.name: p for p in outputs}
    results: dict[str, Val] = {}
    for target, _, how in statements:
        val = strong(how(env) if callable(how) else evaluate(how, env))  # `t = n` holds an i64, as np.asarray(len(x))
        if target in declared:
            p = declared[target]
            results[target] = engine.apply("cast", [val], dtype=p.dtype).broadcast_to(p.concrete(sizes))
        env.names[target] = val
    return results


def _finish(draw: Callable, sizes: dict[str, int], inputs: Sequence[Param], statements: Sequence[Statement],
            outputs: Sequence[Param], given: Mapping[str, Any] | None = None) -> KernelCase:
    """Draw input values (those not `given`), evaluate the statements in order, and
    assemble the case."""
    given = dict(given or {})
    for p in inputs:
        if p.name not in given:
            given[p.name] = draw(values.arrays(p.dtype, p.concrete(sizes)) if p.dims else values.scalars(p.dtype))
    source = render_document("generated", inputs, outputs, [line for _, line, _ in statements])
    ins = tuple((p.name, given[p.name]) for p in inputs)
    program = Program(dict(sizes), tuple(statements), tuple(outputs))
    try:
        results = _evaluate(statements, outputs, sizes, given, bounds)
    except ExecutionError:
        return KernelCase(source, ins, (), runtime_errors(), program)
    return KernelCase(source, ins, tuple((p.name, results[p.name]) for p in outputs), (), program)


def _dims(shape: Sequence[str]) -> tuple[Affine, ...]:
    return tuple(Affine.of(int(d)) if d.isdigit() else Affine.of(d) for d in shape)


def _dtype(draw: Callable, cfg: GenConfig, kinds: str = "biuf") -> np.dtype:
    picks = [d for d in cfg.dtypes if values.as_dtype(d).kind in kinds] or [d.value for d in DType if d.np.kind in kinds]
    return values.as_dtype(draw(st.sampled_from(picks)))


def _out_dtype(draw: Callable, dt: np.dtype) -> np.dtype:
    """The expression's dtype, or sometimes another that numpy's same_kind casting allows
    (the DSL casts an assignment to a declared output the same way)."""
    if draw(st.integers(0, 4)) == 0:
        others = [d.np for d in DType if d.np != dt and np.can_cast(dt, d.np, "same_kind")]
        if others:
            return draw(st.sampled_from(others))
    return dt


def _leaf(p: Param, shape: tuple[str, ...] | None = None) -> Node:
    return Node("input", p.dtype, tuple(str(d) for d in p.dims) if shape is None else shape, (), p.name)


# ------------------------------------------------------------------------ leaves
def _grids(extents: Sequence[tuple[str, int]]) -> dict[str, np.ndarray]:
    """Open index grids: variable k varies along axis k (numpy's ogrid)."""
    r = len(extents)
    return {v: np.arange(e, dtype=np.int64).reshape([e if a == k else 1 for a in range(r)])
            for k, (v, e) in enumerate(extents)}


def _load(text: str, dtype: np.dtype, domain: tuple[str, ...], fn: Callable[[Env], np.ndarray]) -> Node:
    return Node("load", np.dtype(dtype), domain, (), (text.split("[")[0], text, fn))


def _index(name: str, domain: tuple[str, ...]) -> Node:
    """An index variable used as a value (i64)."""
    return _load(name, np.int64, domain, lambda env: env.grids[name])


def _symbol(draw: Callable, name: str, arrays: Sequence[Param]) -> Node:
    """A shape symbol used as a value: a weak int, as numpy's `len(x)`; spelled by its
    name or, where an array has it as a dimension, as numpy would: `len(x)` (the first),
    `x.shape[k]`, `x.shape[k - rank]`, `x.size` (a vector)."""
    spellings = [name]
    for p in arrays:
        dims = [str(d) for d in p.dims]
        for k, d in enumerate(dims):
            if d == name:
                spellings += [f"{p.name}.shape[{k}]", f"{p.name}.shape[{k - len(dims)}]"]
                spellings += [f"len({p.name})"] if k == 0 else []
                spellings += [f"{p.name}.size"] if len(dims) == 1 else []
    text = draw(st.sampled_from(spellings))
    return symbol(name, None if text == name else text)


def _matrix_leaves(draw: Callable, arrays: list[Node]) -> list[Node]:
    """Sometimes `x.T` of a matrix input, and `a @ b` of two operands (inputs or
    transposes) whose shapes chain, as numpy's matmul takes them: a stack of matrices
    `(2, m, n)` multiplies batch by batch, or every batch by one matrix."""
    symbolic = [a for a in arrays if a.shape and all(d in ("m", "n") for d in a.shape) and len(a.shape) <= 2]
    transposes = [Node("transpose", a.dtype, a.shape[::-1], (a,)) for a in symbolic if len(a.shape) == 2]
    out = [t for t in transposes if draw(st.booleans())]
    stacks = [a for a in arrays if len(a.shape) == 3 and all(d in ("m", "n") for d in a.shape[1:])]
    operands = symbolic + transposes + stacks
    pairs = [node for a in operands for b in operands if (node := matmul(a, b)) is not None]
    if pairs and draw(st.booleans()):
        out.append(draw(st.sampled_from(pairs)))
    return out


def _value(name: str) -> Callable[[Env], np.ndarray]:
    return lambda env: env.names[name].v


# ------------------------------------------------------------------ whole-array kernels
_SHAPES = ((), ("1",), ("n",), ("m", "n"), ("m", "1"), ("1", "n"), ("2", "m", "n"))


@st.composite
def expression_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Kernels of whole-array statements (see the module docs)."""
    inputs = [Param(f"a{k}", _dtype(draw, cfg), _dims(draw(st.sampled_from(_SHAPES))))
              for k in range(draw(st.integers(1, 4)))]
    sizes = {"n": draw(st.integers(0, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m))}
    leaves = [_leaf(p) for p in inputs]
    leaves += _matrix_leaves(draw, leaves)  # before the shapes: their results may be outputs
    shapes = reachable([l.shape for l in leaves])
    for p in inputs:  # constant indices that are always in range, and symbols as values
        dims = tuple(map(str, p.dims))
        if dims == ("1",):
            leaves.append(_load(f"{p.name}[0]", p.dtype, (), lambda env, p=p: _value(p.name)(env)[0]))
        elif dims == ("m", "1"):
            leaves.append(_load(f"{p.name}[m - 1, 0]", p.dtype, (), lambda env, p=p: _value(p.name)(env)[env.sizes["m"] - 1, 0]))
    bound = sorted({str(d) for p in inputs for d in p.dims} & {"n", "m"})
    leaves += [_symbol(draw, sym, inputs) for sym in bound if draw(st.integers(0, 2)) == 0]
    builder = Builder(draw, cfg, leaves)
    statements: list[Statement] = []
    outputs: list[Param] = []
    n_temps = draw(st.integers(0, cfg.max_temps))
    for k in range(n_temps + draw(st.integers(1, 2))):
        node = builder.expr(draw(st.sampled_from(shapes)), cfg.max_depth)
        name = f"t{k}" if k < n_temps else f"y{k - n_temps}"
        statements.append((name, f"{name} = {render(node)}", node))
        if k < n_temps:
            leaves.append(Node("input", node.dtype, node.shape, (), name))
            continue
        out_shape = node.shape
        if out_shape == () and any("n" in l.shape for l in leaves) and draw(st.integers(0, 5)) == 0:
            out_shape = ("n",)  # a scalar result broadcast into an array output
        outputs.append(Param(name, _out_dtype(draw, node.dtype), _dims(out_shape)))
    for k, (name, _, node) in enumerate(statements[:n_temps]):  # an unused temporary becomes an output
        ref = Node("input", node.dtype, node.shape, (), name)
        if not any(contains(later, ref) for _, _, later in statements[k + 1:]):
            outputs.append(Param(name, node.dtype, _dims(node.shape)))
    return _finish(draw, sizes, inputs, statements, outputs)


def _indexed(node: Node, grids: dict[str, np.ndarray], target: tuple[str, ...]) -> Callable[[Env], Val]:
    """Evaluate an index-notation right-hand side over `grids`, shaped like its target
    (whose dims are the index variables `target`; the others were reduced away)."""
    shape = tuple(grids[v].size if v in target else 1 for v in grids)

    def run(env: Env) -> Val:
        env.grids = grids
        try:
            val = strong(evaluate(node, env))
        finally:
            env.grids = {}
        return val.broadcast_to(np.broadcast_shapes(val.shape, shape)).reshape(tuple(grids[v].size for v in target))

    return run


class _Index:
    """One index-notation kernel under construction: inputs, statements, outputs."""

    def __init__(self, draw: Callable, cfg: GenConfig):
        self.draw, self.cfg = draw, cfg
        self.sizes = {"n": draw(st.integers(0, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m)),
                      "k": draw(st.integers(0, cfg.max_k))}
        self.inputs: list[Param] = []
        self.statements: list[Statement] = []
        self.outputs: list[Param] = []

    def input(self, name: str, *dims: Affine | str | int, dtype: np.dtype | None = None) -> Param:
        p = Param(name, dtype if dtype is not None else _dtype(self.draw, self.cfg), tuple(map(Affine.of, dims)))
        self.inputs.append(p)
        return p

    def extras(self, dom: tuple[str, ...], arrays: Sequence[Param]) -> list[Node]:
        """Optional leaves: a scalar parameter, index variables and shape symbols as values,
        and a whole-array reduction of an input (a scalar inside index notation)."""
        draw = self.draw
        out = [_index(v, dom) for v in dom]
        if draw(st.booleans()):
            out.append(_leaf(self.input("s")))
        if draw(st.booleans()):
            out.append(_symbol(draw, draw(st.sampled_from(sorted({str(s) for p in arrays for d in p.dims
                                                                for s in d.symbols}))), arrays))
        if self.cfg.reductions and draw(st.booleans()):
            p = draw(st.sampled_from(list(arrays)))
            out.append(Builder(draw, self.cfg, [_leaf(p)])._reduce(draw(st.sampled_from(self.cfg.reductions)),
                                                                    _leaf(p), None, False))
        return out

    def body(self, leaves: list[Node], dom: tuple[str, ...], required: Sequence[Node], depth: int) -> Node:
        builder = Builder(self.draw, self.cfg, leaves, index_mode=True)
        node = builder.expr(dom, depth)
        for leaf in required:
            node = builder.require(node, leaf)
        return node

    def assign(self, target: str, vars: tuple[str, ...], node: Node, grids: dict[str, np.ndarray],
               dims: Sequence[Affine | str], temp: bool = False) -> None:
        lhs = f"{target}[{', '.join(vars)}]" if vars else target
        self.statements.append((target, f"{lhs} = {render(node)}", _indexed(node, grids, vars)))
        if not temp:
            self.outputs.append(Param(target, _out_dtype(self.draw, node.dtype), tuple(map(Affine.of, dims))))

    def grids(self, *extents: tuple[str, str]) -> dict[str, np.ndarray]:
        return _grids([(v, self.sizes[sym]) for v, sym in extents])

    def case(self) -> KernelCase:
        return _finish(self.draw, self.sizes, self.inputs, self.statements, self.outputs)


def _stencil(k: _Index) -> None:
    """y[i] = f(x[i], x[i + 1], .., x[n + K - 1 - i], x[0], ...) over x: T[n + K]; or the same into
    a temporary t (its range then comes from w[i]) consumed by a whole-array statement."""
    dom, draw = ("i",), k.draw
    K = draw(st.integers(1, 2))
    as_temp = draw(st.booleans())
    x = k.input("x", Affine.of("n") + K)
    # a temporary's range comes from the arrays its variable indexes plainly, so a
    # temporary stencil reads x only at offsets and takes its range from w[i]
    leaves = [_load("x[i]" if d == 0 else f"x[i + {d}]", x.dtype, dom,
                    lambda env, d=d: _value("x")(env)[env.grids["i"] + d]) for d in range(1 if as_temp else 0, K + 1)]
    back = "x[n - i]" if K == 1 else f"x[n + {K - 1} - i]"
    leaves.append(_load(back, x.dtype, dom, lambda env: _value("x")(env)[env.sizes["n"] + K - 1 - env.grids["i"]]))
    last = "x[n]" if K == 1 else f"x[n + {K - 1}]"
    leaves += [_load("x[0]", x.dtype, (), lambda env: _value("x")(env)[0]),
               _load(last, x.dtype, (), lambda env: _value("x")(env)[env.sizes["n"] + K - 1])]
    if as_temp:
        w = k.input("w", "n")
        leaves.insert(0, _load("w[i]", w.dtype, dom, lambda env: _value("w")(env)[env.grids["i"]]))
    leaves += k.extras(dom, k.inputs[:])
    node = k.body(leaves, dom, leaves[:1], k.cfg.max_depth)
    k.assign("t" if as_temp else "y", ("i",), node, k.grids(("i", "n")), ("n",), temp=as_temp)
    if as_temp:  # a whole-array statement consumes the index-notation temporary
        t = Node("input", node.dtype, ("n",), (), "t")
        pool = [t] + [_leaf(p) for p in k.inputs if not p.dims]
        rhs = Builder(draw, k.cfg, pool).expr(draw(st.sampled_from([("n",), ()])), max(k.cfg.max_depth - 1, 1))
        rhs = rhs if contains(rhs, t) else t
        k.statements.append(("y", f"y = {render(rhs)}", rhs))
        k.outputs.append(Param("y", _out_dtype(draw, rhs.dtype), _dims(rhs.shape)))


def _strided(k: _Index) -> None:
    """y[i] = f(x[i], x[n - 1 - i], z[2*i], z[2*i + 1]) with z: T[2*n]."""
    dom = ("i",)
    x, z = k.input("x", "n"), k.input("z", 2 * Affine.of("n"))
    leaves = [_load("x[i]", x.dtype, dom, lambda env: _value("x")(env)[env.grids["i"]]),
              _load("x[n - 1 - i]", x.dtype, dom, lambda env: _value("x")(env)[env.sizes["n"] - 1 - env.grids["i"]]),
              _load("z[2*i]", z.dtype, dom, lambda env: _value("z")(env)[2 * env.grids["i"]]),
              _load("z[2*i + 1]", z.dtype, dom, lambda env: _value("z")(env)[2 * env.grids["i"] + 1])]
    leaves += k.extras(dom, [x, z])
    k.assign("y", ("i",), k.body(leaves, dom, leaves[:1], k.cfg.max_depth), k.grids(("i", "n")), ("n",))


def _stencil2d(k: _Index) -> None:
    """y[i, j] = f(a[i, j], a[i + 1, j], a[i, j + 1], a[i + 1, j + 1]) with a: T[m + 1, n + 1]."""
    dom = ("i", "j")
    a = k.input("a", Affine.of("m") + 1, Affine.of("n") + 1)
    leaves = [_load(f"a[{ti}, {tj}]", a.dtype, dom,
                    lambda env, di=di, dj=dj: _value("a")(env)[env.grids["i"] + di, env.grids["j"] + dj])
              for di, ti in ((0, "i"), (1, "i + 1")) for dj, tj in ((0, "j"), (1, "j + 1"))]
    leaves += k.extras(dom, [a])
    k.assign("y", dom, k.body(leaves, dom, leaves[:1], k.cfg.max_depth), k.grids(("i", "m"), ("j", "n")), ("m", "n"))


def _transpose(k: _Index) -> None:
    """t[j, i] = f(a[i, j], x[j], y[i], q[j, j]): transposes, outer products, diagonals."""
    dom = ("j", "i")
    a, x, y, q = k.input("a", "m", "n"), k.input("x", "n"), k.input("y", "m"), k.input("q", "n", "n")
    leaves = [_load("a[i, j]", a.dtype, dom, lambda env: _value("a")(env)[env.grids["i"], env.grids["j"]]),
              _load("x[j]", x.dtype, dom, lambda env: _value("x")(env)[env.grids["j"]]),
              _load("y[i]", y.dtype, dom, lambda env: _value("y")(env)[env.grids["i"]]),
              _load("q[j, j]", q.dtype, dom, lambda env: _value("q")(env)[env.grids["j"], env.grids["j"]])]
    leaves += k.extras(dom, [a])
    node = k.body(leaves, dom, leaves[:1], k.cfg.max_depth)
    k.assign("t", dom, node, k.grids(("j", "n"), ("i", "m")), ("n", "m"))


def _contract(k: _Index) -> None:
    """c[i, j] = f(R(g(a[i, p], b[p, j]), p), c0[i, j], ...): matmul-like contractions."""
    inner_dom, dom = ("i", "j", "p"), ("i", "j")
    a, b = k.input("a", "m", "k"), k.input("b", "k", "n")
    inner_leaves = [_load("a[i, p]", a.dtype, inner_dom, lambda env: _value("a")(env)[env.grids["i"], env.grids["p"]]),
                    _load("b[p, j]", b.dtype, inner_dom, lambda env: _value("b")(env)[env.grids["p"], env.grids["j"]])]
    inner = k.body(inner_leaves, inner_dom, inner_leaves, max(k.cfg.max_depth - 1, 1))
    kind = k.draw(st.sampled_from(k.cfg.reductions or ("sum",)))
    red = Node("ireduce", reduce_dtype(kind, inner.dtype), dom, (inner,), (kind, ("p",)))
    leaves = [red, red, _index("i", dom), _index("j", dom)]
    if k.draw(st.booleans()):
        c0 = k.input("c0", "m", "n")
        leaves.append(_load("c0[i, j]", c0.dtype, dom, lambda env: _value("c0")(env)[env.grids["i"], env.grids["j"]]))
    outer = k.body(leaves, dom, [red], 2)
    k.assign("c", dom, outer, k.grids(("i", "m"), ("j", "n"), ("p", "k")), ("m", "n"))


def _rows(k: _Index) -> None:
    """y[i] = R(f(a[i, j]), j) per row, or y = R(f(a[i, j]), i, j) over everything."""
    dom = ("i", "j")
    a = k.input("a", "m", "n")
    leaves = [_load("a[i, j]", a.dtype, dom, lambda env: _value("a")(env)[env.grids["i"], env.grids["j"]])]
    leaves += k.extras(dom, [a])
    inner = k.body(leaves, dom, leaves[:1], max(k.cfg.max_depth - 1, 1))
    kind = k.draw(st.sampled_from(k.cfg.reductions or ("sum",)))
    per_row = k.draw(st.booleans())
    reduced = ("j",) if per_row else ("i", "j")
    red = Node("ireduce", reduce_dtype(kind, inner.dtype), ("i",) if per_row else (), (inner,), (kind, reduced))
    k.assign("y", ("i",) if per_row else (), red, k.grids(("i", "m"), ("j", "n")), ("m",) if per_row else ())


def _window(k: _Index) -> None:
    """y[i] = R(f(x[i + d], d), d in range(a, a + K)) over x: T[n + a + K - 1]: a window of
    K elements starting a after i (a sliding sum, a stencil with explicit ranges)."""
    draw = k.draw
    start, width = draw(st.integers(0, 2)), draw(st.integers(1, 3))
    x = k.input("x", Affine.of("n") + start + width - 1)
    inner_dom, dom = ("i", "d"), ("i",)
    inner_leaves = [_load("x[i + d]", x.dtype, inner_dom,
                          lambda env: _value("x")(env)[env.grids["i"] + env.grids["d"] + start]),
                    _load("d", np.int64, inner_dom, lambda env: env.grids["d"] + start)]
    inner = k.body(inner_leaves, inner_dom, inner_leaves[:1], max(k.cfg.max_depth - 1, 1))
    kind = draw(st.sampled_from(k.cfg.reductions or ("sum",)))
    spelled = f"d in range({width})" if start == 0 else f"d in range({start}, {start + width})"
    red = Node("ireduce", reduce_dtype(kind, inner.dtype), dom, (inner,), (kind, ("d",)), text=spelled)
    k.assign("y", dom, red, _grids([("i", k.sizes["n"]), ("d", width)]), ("n",))


def _window2d(k: _Index) -> None:
    """y[i, j] = R(f(x[i + di, j + dj], di, dj), di in range(a, a + K), dj in range(b, b +
    L)) over x: T[m + a + K - 1, n + b + L - 1]: a 2-D window with explicit ranges (a box
    blur). The lowering unrolls a window of up to WINDOW_POINTS points into straight-line
    code; a wider one (dj over 12 values, 3 rows) stays a loop."""
    draw = k.draw
    (a, rows), (b, cols) = ((draw(st.integers(0, 2)), draw(st.integers(1, 3))),
                            (draw(st.integers(0, 1)), draw(st.sampled_from([1, 2, 3, 3, 12]))))
    x = k.input("x", Affine.of("m") + a + rows - 1, Affine.of("n") + b + cols - 1)
    inner_dom, dom = ("i", "j", "di", "dj"), ("i", "j")
    g = lambda env, v: env.grids[v]  # noqa: E731
    inner_leaves = [_load("x[i + di, j + dj]", x.dtype, inner_dom,
                          lambda env: _value("x")(env)[g(env, "i") + g(env, "di") + a, g(env, "j") + g(env, "dj") + b]),
                    _load("di", np.int64, inner_dom, lambda env: g(env, "di") + a),
                    _load("dj", np.int64, inner_dom, lambda env: g(env, "dj") + b)]
    inner = k.body(inner_leaves, inner_dom, inner_leaves[:1], max(k.cfg.max_depth - 1, 1))
    kind = draw(st.sampled_from(k.cfg.reductions or ("sum",)))
    spelled = ", ".join(f"{v} in range({w})" if s == 0 else f"{v} in range({s}, {s + w})"
                        for v, s, w in (("di", a, rows), ("dj", b, cols)))
    red = Node("ireduce", reduce_dtype(kind, inner.dtype), dom, (inner,), (kind, ("di", "dj")), text=spelled)
    outer = k.body([red, red] + k.extras(dom, [x]), dom, [red], 1) if draw(st.booleans()) else red
    k.assign("y", dom, outer, _grids([("i", k.sizes["m"]), ("j", k.sizes["n"]), ("di", rows), ("dj", cols)]),
             ("m", "n"))


def _matmul_tiles(k: _Index) -> None:
    """c = f(a @ b) over a: T[B, m, k] and b: T[B, k, n] (either may be one matrix every
    batch shares) at sizes around the register tile of f32 and f64 contractions
    (lower/contract.py: TILE_ROWS x tile_cols(T) outputs per tile over b's packed panels,
    edge tiles moved back inside, sums in blocks of BLOCK and groups of GROUP; a matrix
    narrower or shorter than a tile: narrow tiles of narrow_cols(T), rows and columns
    clamped), mostly in f32 or f64, which take that path."""
    draw = k.draw
    tiled = [t for t in ("f32", "f64") if t in k.cfg.dtypes]
    t = draw(st.sampled_from(tiled)) if tiled and draw(st.integers(0, 3)) > 0 else None
    cols, narrow = tile_cols(DType(t or "f32")), narrow_cols(DType(t or "f32"))
    # n around both tiles' widths (the narrow tile's: a matrix narrower or shorter than a
    # tile), or any width up to 40
    k.sizes.update(m=draw(st.sampled_from([1, 2, TILE_ROWS - 1, TILE_ROWS, TILE_ROWS + 1, 2 * TILE_ROWS + 1])),
                   n=draw(st.sampled_from([1, narrow - 1, narrow, narrow + 1, cols - 1, cols, cols + 1, cols + 7,
                                           2 * cols + 1]) | st.integers(1, 40)),
                   k=draw(st.sampled_from([0, 1, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK * GROUP + 1])))
    batches = draw(st.sampled_from(["1", "2", "3"]))
    shared = draw(st.sampled_from(["", "", "a", "b"]))
    dt = lambda: values.as_dtype(t) if t else _dtype(draw, k.cfg)  # noqa: E731
    a = k.input("a", *(() if shared == "a" else (int(batches),)), "m", "k", dtype=dt())
    b = k.input("b", *(() if shared == "b" else (int(batches),)), "k", "n", dtype=dt())
    product = matmul(_leaf(a), _leaf(b))
    assert product is not None
    node = product
    if draw(st.booleans()):  # an expression around the product: fused into the tile's stores
        builder = Builder(draw, k.cfg, [product, product] + [_leaf(k.input("s"))])
        node = builder.require(builder.expr(product.shape, 1), product)
    k.statements.append(("c", f"c = {render(node)}", node))
    k.outputs.append(Param("c", _out_dtype(draw, node.dtype), _dims(node.shape)))


def _row_blocks(k: _Index) -> None:
    """y[i] = f(sum(g(a[i, j], w[j]), j), ...) or y[z, i] over a batch of matrices (`X @ w`
    and row sums with an expression around them), at sizes around the lowering's row
    blocks (lower/rows.py: ROWS rows per lead lane, the last block moved back inside the
    array, fewer rows or rows longer than SHORT_ROW one at a time): rows 1..33 long and
    around SHORT_ROW, row counts around multiples of ROWS, mostly f32 and f16 (which take
    the path; f64 keeps its compensated loop)."""
    draw = k.draw
    short = [t for t in ("f32", "f16", "f64") if t in k.cfg.dtypes]
    t = draw(st.sampled_from(short)) if short and draw(st.integers(0, 3)) > 0 else None
    k.sizes.update(m=draw(st.sampled_from([1, ROWS - 1, ROWS, ROWS + 1, 2 * ROWS - 1, 3 * ROWS + 5])),
                   n=draw(st.one_of(st.integers(1, 2 * ROWS + 1), st.sampled_from([0, SHORT_ROW, SHORT_ROW + 1]))))
    batch = draw(st.sampled_from([None, None, None, 2, 3]))
    dt = lambda: values.as_dtype(t) if t else _dtype(draw, k.cfg)  # noqa: E731
    a = k.input("a", *(() if batch is None else (batch,)), "m", "n", dtype=dt())
    w = k.input("w", "n", dtype=dt())
    lead = () if batch is None else ("z",)
    inner_dom, dom = (*lead, "i", "j"), (*lead, "i")
    at = lambda env: tuple(env.grids[v] for v in inner_dom)  # noqa: E731
    inner_leaves = [_load(f"a[{', '.join(inner_dom)}]", a.dtype, inner_dom, lambda env: _value("a")(env)[at(env)]),
                    _load("w[j]", w.dtype, inner_dom, lambda env: _value("w")(env)[env.grids["j"]])]
    inner = k.body(inner_leaves, inner_dom, inner_leaves[:1] if draw(st.booleans()) else inner_leaves,
                   max(k.cfg.max_depth - 1, 1))
    red = Node("ireduce", reduce_dtype("sum", inner.dtype), dom, (inner,), ("sum", ("j",)))
    node = red
    if draw(st.booleans()):  # an expression around the sum, evaluated per row after it
        v = k.input("v", *(() if batch is None else (batch,)), "m", dtype=dt())
        outer = [red, red, _load(f"v[{', '.join(dom)}]", v.dtype, dom, lambda env: _value("v")(env)[
            tuple(env.grids[x] for x in dom)]), _index("i", dom)]
        node = k.body(outer + k.extras(dom, [a]), dom, [red], 2)
    extents = [("z", batch)] if batch is not None else []
    k.assign("y", dom, node, _grids([*extents, ("i", k.sizes["m"]), ("j", k.sizes["n"])]),
             (*(() if batch is None else (batch,)), "m"))


INDEX_TEMPLATES: dict[str, Callable[[_Index], None]] = {
    "stencil": _stencil, "row_blocks": _row_blocks, "strided": _strided, "stencil2d": _stencil2d, "transpose": _transpose,
    "contract": _contract, "rows": _rows, "window": _window, "window2d": _window2d, "matmul": _matmul_tiles,
}


@st.composite
def index_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Kernels written in index notation (see the module docs and INDEX_TEMPLATES)."""
    k = _Index(draw, cfg)
    INDEX_TEMPLATES[draw(st.sampled_from(sorted(INDEX_TEMPLATES)))](k)
    return k.case()


# ------------------------------------------------------------------ symbols as values
# sizes where a symbol does not fit i8 / u8 (the DSL wraps it, numpy raises) or is not an
# f16 integer (2049 rounds to 2048)
_WIDE_SIZES = (127, 128, 255, 256, 300, 2049)


@st.composite
def symbol_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """`y = f(x, s, n, m)` over x: T[n], s: T, z: T[m] with the symbol n used as a value
    (see the module docs): one dtype T per kernel, drawn from all of cfg's."""
    dt = _dtype(draw, cfg)
    sizes = {"n": draw(st.integers(0, cfg.max_n) | st.sampled_from(_WIDE_SIZES)), "m": draw(st.integers(1, cfg.max_m))}
    x, s, z = Param("x", dt, (Affine.of("n"),)), Param("s", dt), Param("z", dt, (Affine.of("m"),))
    n = symbol("n")
    groups = ("arith", "compare", "select", "bitwise")
    builder = Builder(draw, attrs.evolve(cfg.only(*groups), reductions=(), scans=()), [_leaf(x), _leaf(s), n, symbol("m")])
    node = builder.require(builder.expr(draw(st.sampled_from([("n",), ()])), cfg.max_depth), n)
    statements: list[Statement] = [("y", f"y = {render(node)}", node)]
    outputs = [Param("y", _out_dtype(draw, node.dtype), _dims(node.shape))]
    return _finish(draw, sizes, [x, s, z], statements, outputs)


# -------------------------------------------------------------------------- Atlas
@st.composite
def atlas_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Kernels over the Atlas functions (see the module docs)."""
    sizes = {"n": draw(st.integers(0, cfg.max_n))}
    x = Param("x", _dtype(draw, cfg, "iu"), (Affine.of("n"),))
    v = Param("v", _dtype(draw, cfg, "biuf"), (Affine.of("n"),))
    kk = Param("k", _dtype(draw, cfg, "iu"), (Affine.of("n"),))
    inputs = [x, v, kk]
    c = Node("input", np.dtype(np.int32), ("n",), (), "c")
    statements: list[Statement] = [("c", "c = atlas_class(x)", Node("atlas_class", np.dtype(np.int32), ("n",), (_leaf(x),)))]
    atlas_cfg = cfg.only("atlas", "arith", "compare", "bitwise")
    y = Builder(draw, atlas_cfg, [c, c, _leaf(x), _leaf(kk)]).expr(("n",), 2)
    statements.append(("y", f"y = {render(y)}", y))
    outputs = [Param("y", _out_dtype(draw, y.dtype), _dims(y.shape))]
    classes = draw(st.sampled_from([
        c, Node("mirror", np.dtype(np.int32), ("n",), (c,)), _leaf(x),
        Node("neighbor", np.dtype(np.int32), ("n",), (c, literal(draw(st.integers(0, 5))))),
    ]))
    doubled = (_leaf(v), literal(2))
    weights = draw(st.sampled_from([_leaf(v), literal(1)] +
                                   ([Node("*", infer("*", doubled), ("n",), doubled)] if v.dtype.kind != "b" else [])))
    hist = lambda env: env.engine.resonance(evaluate(classes, env), evaluate(weights, env))
    res_dtype = np.sum(np.zeros(0, np.asarray(1).dtype if weights.is_literal else weights.dtype)).dtype
    statements.append(("h", f"h = resonance({render(classes)}, {render(weights)})", hist))
    outputs.append(Param("h", res_dtype, (Affine.of(96),)))
    if not (contains(y, c) or contains(classes, c)):  # an unused temporary becomes an output
        outputs.append(Param("c", np.dtype(np.int32), (Affine.of("n"),)))
    return _finish(draw, sizes, inputs, statements, outputs)


def kernels(cfg: GenConfig = GenConfig()) -> st.SearchStrategy[KernelCase]:
    """A kernel of this module's families: mostly whole-array expressions, then index
    notation, Atlas and shape symbols as values (hologram.testing.generated mixes in the
    other modules' families)."""
    return st.one_of(expression_kernels(cfg), expression_kernels(cfg), index_kernels(cfg), atlas_kernels(cfg),
                     symbol_kernels(cfg))
