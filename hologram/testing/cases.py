"""Generated kernels with their expected answers: hypothesis strategies of `KernelCase`.

A `KernelCase` is a kernel document (TOML text), concrete input values, and for every
output the oracle's answer with its accuracy contract (a `bounds.Val`), or the runtime
errors one of which the kernel must raise. `hologram.testing.run.check_case` runs a case
on a backend and checks it; a new backend is tested by running these strategies on it.

    kernels(cfg)             any of the three below
    expression_kernels(cfg)  whole-array statements: every operator and function, casts,
                             weak literals, broadcasting ((m, n) with (1, n), (m, 1), (1,)
                             and scalar parameters), full and axis reductions (keepdims,
                             negative axes), temporaries, output casts and broadcasts
    index_kernels(cfg)       index notation: 1-D and 2-D stencils with affine offsets,
                             reversed and strided loads, index variables as values,
                             contractions and reductions over named index variables, and
                             an index-notation temporary consumed by a whole-array statement
    atlas_kernels(cfg)       the Atlas functions, including resonance's 96-bin scatter-add
                             (with classes that may fall outside 0..95: a runtime error)

`cfg` is a `GenConfig` (dtypes, operations, reductions, depth, sizes). Sizes are small
(the reference interpreter runs one lane at a time) and `n` may be 0.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np
from hypothesis import strategies as st

from ..core import errors
from ..core.errors import ExecutionError, HologramError
from ..core.types import Affine, DType
from . import bounds, values
from .bounds import Val
from .exprgen import Builder, Engine, Env, GenConfig, Node, _reduce_dtype, contains, evaluate, infer, literal, reachable, render

__all__ = ["KernelCase", "Param", "kernels", "expression_kernels", "index_kernels", "atlas_kernels",
           "render_document", "runtime_errors"]

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
        return tuple(dim.evaluate(sizes) for dim in self.dims)


@attrs.frozen(eq=False)
class KernelCase:
    """A generated kernel: its document, input values, and what each output must be.

    inputs     (name, value) in declaration order: arrays, or numpy scalars for scalar params
    expected   (name, Val) per output in declaration order; empty when `error` is set
    error      HologramError subclasses one of which running the kernel must raise
    """

    source: str
    inputs: tuple[tuple[str, Any], ...]
    expected: tuple[tuple[str, Val], ...]
    error: tuple[type[HologramError], ...] = ()
    program: Any = attrs.field(default=None, repr=False)  # (sizes, statements, outputs) for replay

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.inputs)

    def describe(self) -> str:
        """The document and the inputs, for failure messages."""
        ins = "\n".join(f"  {k}: {np.asarray(v).dtype}{list(np.shape(v))} = "
                        f"{np.array2string(np.asarray(v), separator=', ', max_line_width=100, floatmode='unique')}"
                        for k, v in self.inputs)
        return f"--- kernel ---\n{self.source}--- inputs ---\n{ins}"

    def replay(self, engine: Engine) -> dict[str, np.ndarray]:
        """The outputs computed by evaluating the kernel again with another `Engine`
        (raises what the engine raises, e.g. ExecutionError)."""
        sizes, statements, outputs = self.program
        vals = _evaluate(statements, outputs, sizes, dict(self.inputs), engine)
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
        val = how(env) if callable(how) else evaluate(how, env)
        if target in declared:
            p = declared[target]
            results[target] = engine.apply("cast", [val], dtype=p.dtype).broadcast_to(p.concrete(sizes))
        env.names[target] = val
    return results


def _finish(draw: Callable, sizes: dict[str, int], inputs: Sequence[Param], statements: Sequence[Statement],
            outputs: Sequence[Param]) -> KernelCase:
    """Draw input values, evaluate the statements in order, and assemble the case."""
    given: dict[str, Any] = {}
    for p in inputs:
        given[p.name] = draw(values.arrays(p.dtype, p.concrete(sizes)) if p.dims else values.scalars(p.dtype))
    source = render_document("generated", inputs, outputs, [line for _, line, _ in statements])
    ins = tuple((p.name, given[p.name]) for p in inputs)
    program = (dict(sizes), tuple(statements), tuple(outputs))
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


# ------------------------------------------------------------------ whole-array kernels
_SHAPES = ((), ("1",), ("n",), ("m", "n"), ("m", "1"), ("1", "n"))


@st.composite
def expression_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Kernels of whole-array statements (see the module docs)."""
    inputs = [Param(f"a{k}", _dtype(draw, cfg), _dims(draw(st.sampled_from(_SHAPES))))
              for k in range(draw(st.integers(1, 4)))]
    sizes = {"n": draw(st.integers(0, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m))}
    leaves = [_leaf(p) for p in inputs]
    builder = Builder(draw, cfg, leaves)
    shapes = reachable([l.shape for l in leaves])
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
    rhs = " ".join(line.split("=", 1)[1] for _, line, _ in statements)
    for name, _, node in statements[:n_temps]:  # an unused temporary becomes an output
        if not _mentions(rhs, name):
            outputs.append(Param(name, node.dtype, _dims(node.shape)))
    return _finish(draw, sizes, inputs, statements, outputs)


def _mentions(text: str, name: str) -> bool:
    import re

    return re.search(rf"\b{re.escape(name)}\b", text) is not None


# ----------------------------------------------------------------- index notation
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


def _indexed(node: Node, grids: dict[str, np.ndarray], target: tuple[str, ...]) -> Callable[[Env], Val]:
    """Evaluate an index-notation right-hand side over `grids`, shaped like its target
    (whose dims are the index variables `target`; the others were reduced away)."""
    shape = tuple(grids[v].size if v in target else 1 for v in grids)

    def run(env: Env) -> Val:
        env.grids = grids
        try:
            val = evaluate(node, env)
        finally:
            env.grids = {}
        return val.broadcast_to(np.broadcast_shapes(val.shape, shape)).reshape(tuple(grids[v].size for v in target))

    return run


@st.composite
def index_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """Kernels written in index notation (see the module docs)."""
    template = draw(st.sampled_from(("stencil", "stencil2d", "strided", "contract", "rows")))
    sizes = {"n": draw(st.integers(0, cfg.max_n)), "m": draw(st.integers(1, cfg.max_m)),
             "k": draw(st.integers(0, cfg.max_k))}
    n, m, k = sizes["n"], sizes["m"], sizes["k"]
    T = _dtype(draw, cfg)
    inputs: list[Param] = []
    scalar = Param("s", _dtype(draw, cfg)) if draw(st.booleans()) else None

    def value(name: str) -> Callable[[Env], np.ndarray]:
        return lambda env: env.names[name].v

    statements: list[Statement] = []
    outputs: list[Param] = []
    if template in ("stencil", "strided"):
        dom = ("i",)
        grids = _grids([("i", n)])
        # a temporary's range comes from the arrays its variable indexes plainly, so a
        # temporary stencil reads x only at offsets and takes its range from w[i]
        as_temp = template == "stencil" and draw(st.booleans())
        if template == "stencil":
            K = draw(st.integers(1, 2))
            inputs.append(Param("x", T, (Affine.of("n") + K,)))
            leaves = [_load("x[i]" if d == 0 else f"x[i + {d}]", T, dom, lambda env, d=d: value("x")(env)[env.grids["i"] + d])
                      for d in range(1 if as_temp else 0, K + 1)]
            back = "x[n - i]" if K == 1 else f"x[n + {K - 1} - i]"
            leaves.append(_load(back, T, dom, lambda env: value("x")(env)[env.sizes["n"] + K - 1 - env.grids["i"]]))
            if as_temp:
                inputs.append(Param("w", _dtype(draw, cfg), (Affine.of("n"),)))
                leaves.insert(0, _load("w[i]", inputs[-1].dtype, dom, lambda env: value("w")(env)[env.grids["i"]]))
        else:
            inputs += [Param("x", T, (Affine.of("n"),)), Param("z", _dtype(draw, cfg), (2 * Affine.of("n"),))]
            Z = inputs[-1].dtype
            leaves = [_load("x[i]", T, dom, lambda env: value("x")(env)[env.grids["i"]]),
                      _load("x[n - 1 - i]", T, dom, lambda env: value("x")(env)[env.sizes["n"] - 1 - env.grids["i"]]),
                      _load("z[2*i]", Z, dom, lambda env: value("z")(env)[2 * env.grids["i"]]),
                      _load("z[2*i + 1]", Z, dom, lambda env: value("z")(env)[2 * env.grids["i"] + 1])]
        leaves.append(_index("i", dom))
        if scalar:
            inputs.append(scalar)
            leaves.append(_leaf(scalar))
        builder = Builder(draw, cfg, leaves, index_mode=True)
        node = builder.require(builder.expr(dom, cfg.max_depth), leaves[0])
        target = "t" if as_temp else "y"
        statements.append((target, f"{target}[i] = {render(node)}", _indexed(node, grids, ("i",))))
        if as_temp:  # a whole-array statement consumes the index-notation temporary
            t = Node("input", node.dtype, ("n",), (), "t")
            pool = [t] + ([_leaf(scalar)] if scalar else [])
            rhs = Builder(draw, cfg, pool).expr(draw(st.sampled_from([("n",), ()])), max(cfg.max_depth - 1, 1))
            if not contains(rhs, t):
                rhs = t
            statements.append(("y", f"y = {render(rhs)}", rhs))
            outputs.append(Param("y", _out_dtype(draw, rhs.dtype), _dims(rhs.shape)))
        else:
            outputs.append(Param("y", _out_dtype(draw, node.dtype), (Affine.of("n"),)))
    elif template == "stencil2d":
        dom = ("i", "j")
        inputs.append(Param("a", T, (Affine.of("m") + 1, Affine.of("n") + 1)))
        leaves = [_load(f"a[{ti}, {tj}]", T, dom, lambda env, di=di, dj=dj: value("a")(env)[env.grids["i"] + di, env.grids["j"] + dj])
                  for di, ti in ((0, "i"), (1, "i + 1")) for dj, tj in ((0, "j"), (1, "j + 1"))]
        leaves += [_index("i", dom), _index("j", dom)]
        if scalar:
            inputs.append(scalar)
            leaves.append(_leaf(scalar))
        builder = Builder(draw, cfg, leaves, index_mode=True)
        node = builder.require(builder.expr(dom, cfg.max_depth), leaves[0])
        grids = _grids([("i", m), ("j", n)])
        statements.append(("y", f"y[i, j] = {render(node)}", _indexed(node, grids, ("i", "j"))))
        outputs.append(Param("y", _out_dtype(draw, node.dtype), (Affine.of("m"), Affine.of("n"))))
    elif template == "contract":
        inner_dom, dom = ("i", "j", "p"), ("i", "j")
        B = _dtype(draw, cfg)
        inputs += [Param("a", T, (Affine.of("m"), Affine.of("k"))), Param("b", B, (Affine.of("k"), Affine.of("n")))]
        inner_leaves = [_load("a[i, p]", T, inner_dom, lambda env: value("a")(env)[env.grids["i"], env.grids["p"]]),
                        _load("b[p, j]", B, inner_dom, lambda env: value("b")(env)[env.grids["p"], env.grids["j"]])]
        builder = Builder(draw, cfg, inner_leaves, index_mode=True)
        inner = builder.expr(inner_dom, max(cfg.max_depth - 1, 1))
        for leaf in inner_leaves:
            inner = builder.require(inner, leaf)
        kind = draw(st.sampled_from(cfg.reductions or ("sum",)))
        red = Node("ireduce", _reduce_dtype(kind, inner.dtype), dom, (inner,), (kind, ("p",)))
        leaves = [red, red, _index("i", dom), _index("j", dom)]
        if draw(st.booleans()):
            inputs.append(Param("c0", _dtype(draw, cfg), (Affine.of("m"), Affine.of("n"))))
            leaves.append(_load("c0[i, j]", inputs[-1].dtype, dom, lambda env: value("c0")(env)[env.grids["i"], env.grids["j"]]))
        if scalar:
            inputs.append(scalar)
            leaves.append(_leaf(scalar))
        outer = Builder(draw, cfg, leaves, index_mode=True).expr(dom, 2)
        if not contains(outer, red):
            outer = red
        grids = _grids([("i", m), ("j", n), ("p", k)])
        statements.append(("c", f"c[i, j] = {render(outer)}", _indexed(outer, grids, ("i", "j"))))
        outputs.append(Param("c", _out_dtype(draw, outer.dtype), (Affine.of("m"), Affine.of("n"))))
    else:  # rows: reduce over j per row, or over both variables to a scalar
        dom = ("i", "j")
        inputs.append(Param("a", T, (Affine.of("m"), Affine.of("n"))))
        leaves = [_load("a[i, j]", T, dom, lambda env: value("a")(env)[env.grids["i"], env.grids["j"]]),
                  _index("i", dom), _index("j", dom)]
        if scalar:
            inputs.append(scalar)
            leaves.append(_leaf(scalar))
        builder = Builder(draw, cfg, leaves, index_mode=True)
        inner = builder.require(builder.expr(dom, max(cfg.max_depth - 1, 1)), leaves[0])
        kind = draw(st.sampled_from(cfg.reductions or ("sum",)))
        grids = _grids([("i", m), ("j", n)])
        if draw(st.booleans()):
            red = Node("ireduce", _reduce_dtype(kind, inner.dtype), ("i",), (inner,), (kind, ("j",)))
            statements.append(("y", f"y[i] = {render(red)}", _indexed(red, grids, ("i",))))
            outputs.append(Param("y", _out_dtype(draw, red.dtype), (Affine.of("m"),)))
        else:
            red = Node("ireduce", _reduce_dtype(kind, inner.dtype), (), (inner,), (kind, ("i", "j")))
            statements.append(("y", f"y = {render(red)}", _indexed(red, grids, ())))
            outputs.append(Param("y", _out_dtype(draw, red.dtype), ()))
    return _finish(draw, sizes, inputs, statements, outputs)


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
    """Any generated kernel: mostly whole-array expressions, then index notation, then Atlas."""
    return st.one_of(expression_kernels(cfg), expression_kernels(cfg), index_kernels(cfg), atlas_kernels(cfg))
