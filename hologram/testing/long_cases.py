"""Long reductions: generated kernels whose reductions combine enough terms for a narrow
type's precision to run out.

`cases.kernels()` draws sizes up to ~6, where every summation order is accurate: a
backend that accumulates an f16 sum in f16 (its running sum stops growing at 2048 once
the terms are below 1) or multiplies f32 factors one at a time in f32 passes all of
them. `long_reduction_kernels(cfg)` draws one reduction over many terms, cheaply:

- f16 (5 cases in 8), and f64 (1 in 8: enough terms for a split reduction's slices and
  tail, hologram/lower/split.py, in the type whose in-lane sums are compensated):
  8192..12288 terms per output, values from numpy's generator
  seeded by a drawn integer (drawing thousands of values through hypothesis would be
  slow, and its edge values would make every sum inf or NaN): sums and means of terms
  in [scale/2, scale), whose running sum passes 2048 * scale (where an f16 accumulator
  of such terms stalls) whatever the term expression (`x * w` is at least scale**2/4);
  products of factors within 2**-7 of 1, which stay finite and show every f16 rounding
  of a running product; min/max/argmin/argmax of values in [-1, 1);
- f32 (2 cases in 8): 2**24..2**24 + 64 terms of one constant with up to three other
  values planted at drawn positions: an f32 running sum of ones stalls at 2**24, and
  an f32 running product of 1 + 2**-23 reaches 3 where the product is e**2. The input
  costs one `np.full`, and the oracle counts instead of adding: the answer and its
  contract come from the distinct values and their multiplicities (`_ConstantArray`,
  the formulas of `bounds.reduce` and `bounds.resonance` for exact terms), where the
  generic oracle makes ~20 passes over 2**24 float64s (seconds);

Each case is one statement `y = R(e)`: R from cfg.reductions (a sum three times as
often as each other kind: it is the common one), e a small expression over the long
inputs drawn by `exprgen.Builder` from `TERM_OPS` (terms keep their sign and size; an
f32 case reduces its input itself), written one of five ways (m and k are 1..2, so the
reference interpreter, one lane at a time, runs an f16 case in well under a second;
f32 cases have one input, m = k = 1 and no contraction):

    whole     y = R(e(x, w))                      x, w: T[n]
    axis      y = R(e(x), axis=a[, keepdims])     x: T[n, m] (a = 0 or -2), T[m, n] (1, -1)
    named     y = R(e(x[i, j]), i, j)  or  y[i] = R(e(x[i, j]), j)      x: T[m, n]
    contract  c[i, j] = R(e(a[i, p], b[p, j]), p)                       a: T[m, n], b: T[n, k]
    scatter   h = resonance(c, e(x))              c: u8[n] in one to three classes (sums)
    add_at    h[c[i]] += e(x[i])                  c: i32[n] in -2..1 or -1..0, h: f16[2] or [1] (f16 sums)
    scan      y = cumsum(e(x, w))  or  y = cumsum(e(x), axis=a)  (f16 sums and products:
              every prefix is held to the contract, and crosses many of the lowering's
              chunks)                             x, w: T[n]; x: T[m, n] (a = 1, -1), T[n, m] (0, -2)

The reference interpreter runs ~1e5 lanes a second, so the differential harness runs a
case whose inputs hold more than `difftest.INTERP_MAX_ELEMENTS` elements (the f32 ones)
on the other backends only. `kernels_with_long_reductions(cfg)` is `generated.kernels(cfg)`
with one case in `LONG_EVERY` drawn here, what `hologram diff-test` generates.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np
from hypothesis import strategies as st

from hologram.core.types import Affine
from hologram.testing import bounds
from hologram.testing.cases import (KernelCase, Param, Program, Statement, _evaluate, _grids, _indexed, _leaf, _load,
                                    _value, render_document)
from hologram.testing.contract import reduction_tolerance, spacing
from hologram.testing.exprgen import Builder, Env, GenConfig, Node, contains, evaluate, reduce_dtype, render
from hologram.testing.generated import kernels
from hologram.testing.stream_cases import StreamSpec

__all__ = ["LONG_EVERY", "TERM_OPS", "long_reduction_kernels", "kernels_with_long_reductions"]

LONG_EVERY = 4  # one generated kernel in this many is a long reduction (diff-test's mix)
TERM_OPS = frozenset({"+", "*", "minimum", "maximum", "abs", "sqrt"})
F16_TERMS = (8192, 12288)
F32_TERMS = (1 << 24, (1 << 24) + 64)
# how often each form is drawn: the whole-array and all-variable ones reduce across lanes,
# where a backend picks the combination order (and an f16 one once stalled)
FORMS = {"whole": 3, "named": 2, "axis": 1, "contract": 1, "scatter": 1, "add_at": 1, "scan": 2}
_EXTREMES = ("min", "max", "argmin", "argmax")


@attrs.frozen
class _Values:
    """How the inputs of one case are filled: f16 from a seeded generator, f32 as a
    constant with planted values."""

    kind: str
    dtype: np.dtype
    seed: int
    scale: float = 1.0
    constant: float = 1.0
    plants: tuple[tuple[int, float], ...] = ()  # (flat position, value), f32 only

    def array(self, shape: tuple[int, ...], salt: int) -> np.ndarray:
        if self.dtype == np.float32:
            a = np.full(shape, self.constant, np.float32)
            flat = a.reshape(-1)
            for pos, v in self.plants:
                flat[pos % flat.size] = v
            return a
        rng = np.random.default_rng((self.seed, salt))
        if self.kind == "prod":
            return (1 + rng.uniform(-2.0 ** -7, 2.0 ** -7, shape)).astype(self.dtype)
        if self.kind in _EXTREMES:
            return rng.uniform(-1.0, 1.0, shape).astype(self.dtype)
        return (rng.uniform(0.5, 1.0, shape) * self.scale).astype(self.dtype)


class _ConstantArray:
    """The f32 input `_Values.array` makes, as its distinct values: `values[d]` occurs
    `counts[d]` times, first at flat position `firsts[d]` (the constant, then each
    planted position, a later plant replacing an earlier one there)."""

    def __init__(self, fill: _Values, size: int):
        planted: dict[int, float] = {}
        for pos, v in fill.plants:
            planted[pos % size] = v
        free = next(p for p in range(len(planted) + 1) if p not in planted)  # the constant's first position
        spots = sorted(planted)
        self.values = np.array([fill.constant] + [planted[p] for p in spots], np.float32)
        self.counts = np.array([size - len(spots)] + [1] * len(spots), np.int64)
        self.firsts = np.array([free] + spots, np.int64)
        self.spots, self.size = spots, size

    def reduce(self, kind: str, out_dtype: np.dtype) -> bounds.Val:
        """`kind` over the whole array, with its contract, as `bounds.reduce` gives it for
        exact terms: sums and means within the log2(n) allowance of sum|x| plus the last
        rounding, products of |product|, the exact kinds exactly."""
        x, counts, n = self.values.astype(np.float64), self.counts, self.size
        nan = np.isnan(x) & (counts > 0)
        err, fuzzy = 0.0, False
        with np.errstate(all="ignore"):
            if kind in _EXTREMES:
                pick = np.nanmin if kind in ("min", "argmin") else np.nanmax
                best = np.nan if nan.any() else pick(x[counts > 0])
                hits = nan if nan.any() else (x == best) & (counts > 0)
                v = np.asarray(self.firsts[hits].min() if kind.startswith("arg") else best)
            elif kind == "prod":
                exact = np.prod(x ** counts)
                grow = np.prod(np.maximum(np.abs(x), 1.0) ** counts)
                shrink = np.prod(np.minimum(np.abs(x), 1.0) ** counts)
                info = np.finfo(out_dtype)
                fuzzy = not nan.any() and (grow > float(info.max) or (shrink < float(info.tiny) and not (x == 0).any()))
                v = np.asarray(exact)
                err = reduction_tolerance(n, out_dtype) * abs(exact)
            else:  # sum, mean
                scale = 1.0 / n if kind == "mean" else 1.0
                exact, mag = np.sum(x * counts) * scale, np.sum(np.abs(x) * counts)
                fuzzy = not nan.any() and mag > float(np.finfo(out_dtype).max)
                v = np.asarray(exact)
                err = reduction_tolerance(n, out_dtype) * mag * scale
            v = v.astype(out_dtype)
        if kind not in _EXTREMES:  # and the rounding of the answer
            err = err + spacing(np.where(np.isfinite(v), v, 0.0), out_dtype)
        return bounds.Val.settled(v, np.asarray(err, np.float64), np.zeros((), np.int64), np.asarray(fuzzy, bool))

    def resonance(self, classes: np.ndarray) -> bounds.Val:
        """resonance(classes, this array) with its contract, as `bounds.resonance` gives
        it for exact values: per bin a sum of the values whose class it is."""
        bins = np.bincount(classes.reshape(-1), minlength=96).astype(np.int64)
        total, mag = bins * float(self.values[0]), bins * abs(float(self.values[0]))
        for spot, value in zip(self.spots, self.values[1:].astype(np.float64)):
            b = classes.reshape(-1)[spot]
            total[b] += value - float(self.values[0])
            mag[b] += abs(value) - abs(float(self.values[0]))
        with np.errstate(all="ignore"):
            v = total.astype(np.float32)
            tol = np.array([reduction_tolerance(max(int(k), 1), np.float32) for k in bins])
            err = tol * mag + spacing(np.where(np.isfinite(v), v, 0.0), np.float32)
        return bounds.Val.settled(v, err, np.zeros(96, np.int64), mag > float(np.finfo(np.float32).max))


def _values(draw: Callable, kind: str, dtype: np.dtype, total: int) -> _Values:
    seed = draw(st.integers(0, 2**32 - 1))
    if dtype != np.float32:
        return _Values(kind, dtype, seed, scale=draw(st.sampled_from((1.0, 0.25))))
    if kind == "prod":  # c**n stays within f32's range for n near 2**24
        constant = draw(st.sampled_from((1 + 2.0 ** -23, 1 + 2.0 ** -22, 1 - 2.0 ** -24, 1 - 2.0 ** -23)))
        planted = (2.0, 0.5, 1 + 2.0 ** -10)
    elif kind in _EXTREMES:
        constant, planted = draw(st.sampled_from((1.0, -2.0))), (5.0, -5.0, 0.0, float("nan"))
    else:
        constant, planted = draw(st.sampled_from((1.0, 0.1, 3.0))), (1000.0, -5.0, 0.0)
    plants = tuple((draw(st.integers(0, total - 1)), draw(st.sampled_from(planted)))
                   for _ in range(draw(st.integers(0, 3))))
    return _Values(kind, dtype, seed, constant=constant, plants=plants)


def _terms(draw: Callable, kind: str, leaves: list[Node], shape: tuple[str, ...], required: int = 1) -> Node:
    """A small expression over `leaves` (of one float dtype) that uses the first
    `required` of them. Factors of a product are not added (a sum of two factors near
    1 is near 2, and 8192 of those overflow)."""
    ops = TERM_OPS - {"+"} if kind == "prod" else TERM_OPS
    cfg = GenConfig(ops=ops, reductions=(), scans=(), max_depth=2, literals=False, casts=False)
    builder = Builder(draw, cfg, leaves, index_mode=leaves[0].op == "load")
    node = builder.expr(shape, cfg.max_depth)
    for leaf in leaves[:required]:
        if not contains(node, leaf):
            node = builder.combine(draw(st.sampled_from(sorted(ops & {"+", "*", "minimum", "maximum"}))), [node, leaf])
    return node


class _Long:
    """One long-reduction kernel under construction."""

    def __init__(self, draw: Callable, cfg: GenConfig):
        self.draw = draw
        # any and all only count truth values: no precision to run out of
        kinds = [k for k in cfg.reductions if k not in ("any", "all") for _ in range(3 if k == "sum" else 1)] or ["sum"]
        self.kind = draw(st.sampled_from(kinds))
        roll = draw(st.integers(0, 7))
        self.dtype = np.dtype(np.float32 if roll < 2 else np.float64 if roll == 2 else np.float16)
        wide = self.dtype == np.float32
        scans = () if wide else tuple(k for k in cfg.scans if k == self.kind)  # an f32 scan: 2**24 checks
        forms = [f for f, weight in FORMS.items() for _ in range(weight)
                 if not (wide and f in ("contract", "add_at")) and (f not in ("scatter", "add_at") or self.kind == "sum")
                 and (f != "scan" or scans)]
        self.form = draw(st.sampled_from(forms))
        lo, hi = F32_TERMS if wide else F16_TERMS
        side = 1 if wide else 2  # an f16 case's inputs hold at most 4 * 12288 elements
        self.sizes = {"n": draw(st.integers(lo, hi)), "m": draw(st.integers(1, side)), "k": draw(st.integers(1, side))}
        total = self.sizes["n"] * max(self.sizes["m"], self.sizes["k"])
        self.fill = _values(draw, self.kind, self.dtype, total)
        self.inputs: list[Param] = []
        self.given: dict[str, Any] = {}

    def input(self, name: str, *dims: str, dtype: np.dtype | None = None, values: Any = None) -> Param:
        p = Param(name, self.dtype if dtype is None else dtype, tuple(Affine.of(d) for d in dims))
        self.inputs.append(p)
        shape = p.concrete(self.sizes)
        self.given[name] = self.fill.array(shape, len(self.inputs)) if values is None else values(shape)
        return p

    def out_dtype(self, terms: Node) -> np.dtype:
        return reduce_dtype(self.kind, terms.dtype)

    def terms(self, leaves: list[Node], shape: tuple[str, ...], required: int = 1) -> Node:
        """The reduced expression: drawn over the leaves, or for an f32 case the first
        leaf itself (what the counting oracle knows)."""
        if self.dtype == np.float32:
            return leaves[0]
        return _terms(self.draw, self.kind, leaves, shape, required)

    def counted(self, generic: "Node | Callable[[Env], bounds.Val]", out: Param) -> Callable[[Env], bounds.Val]:
        """The oracle of an f32 case's statement: by multiplicity with the default engine,
        `generic` (the statement's node or evaluator) with any other (`KernelCase.replay`)."""
        array = _ConstantArray(self.fill, self.sizes["n"])
        kind, classes = self.kind, self.given.get("c")

        def run(env: Env) -> bounds.Val:
            if env.engine is not bounds:
                return generic(env) if callable(generic) else evaluate(generic, env)
            if self.form == "scatter":
                return array.resonance(classes)
            return array.reduce(kind, out.dtype).reshape(out.concrete(self.sizes))

        return run

    def case(self) -> KernelCase:
        draw, kind = self.draw, self.kind
        statements: list[Statement]
        if self.form == "whole":
            leaves = [_leaf(self.input("x", "n"))] + ([] if self.dtype == np.float32 else [_leaf(self.input("w", "n"))])
            terms = self.terms(leaves, ("n",))
            node = Node("reduce", self.out_dtype(terms), (), (terms,), (kind, None, False))
            statements, outputs = [("y", f"y = {render(node)}", node)], [Param("y", node.dtype)]
        elif self.form == "axis":
            rows = draw(st.booleans())  # x: [m, n] reduced along its last axis, else x: [n, m] along its first
            shape = ("m", "n") if rows else ("n", "m")
            terms = self.terms([_leaf(self.input("x", *shape))], shape)
            axis = draw(st.sampled_from((1, -1) if rows else (0, -2)))
            keep = draw(st.booleans())
            out = ("m", "1") if rows and keep else ("1", "m") if keep else ("m",)
            node = Node("reduce", self.out_dtype(terms), out, (terms,), (kind, axis, keep))
            statements, outputs = [("y", f"y = {render(node)}", node)], [Param("y", node.dtype, _affine(out))]
        elif self.form == "named":
            self.input("x", "m", "n")
            dom = ("i", "j")
            x = _load("x[i, j]", self.dtype, dom, lambda env: _value("x")(env)[env.grids["i"], env.grids["j"]])
            terms = self.terms([x], dom)
            per_row = draw(st.integers(0, 2)) == 0
            target = ("i",) if per_row else ()
            node = Node("ireduce", self.out_dtype(terms), target, (terms,), (kind, ("j",) if per_row else dom))
            lhs = "y[i]" if per_row else "y"
            grids = _grids([("i", self.sizes["m"]), ("j", self.sizes["n"])])
            statements = [("y", f"{lhs} = {render(node)}", _indexed(node, grids, target))]
            outputs = [Param("y", node.dtype, (Affine.of("m"),) if per_row else ())]
        elif self.form == "contract":
            self.input("a", "m", "n")
            self.input("b", "n", "k")
            dom = ("i", "j", "p")
            a = _load("a[i, p]", self.dtype, dom, lambda env: _value("a")(env)[env.grids["i"], env.grids["p"]])
            b = _load("b[p, j]", self.dtype, dom, lambda env: _value("b")(env)[env.grids["p"], env.grids["j"]])
            terms = self.terms([a, b], dom, required=2)
            node = Node("ireduce", self.out_dtype(terms), ("i", "j"), (terms,), (kind, ("p",)))
            grids = _grids([("i", self.sizes["m"]), ("j", self.sizes["k"]), ("p", self.sizes["n"])])
            statements = [("c", f"c[i, j] = {render(node)}", _indexed(node, grids, ("i", "j")))]
            outputs = [Param("c", node.dtype, (Affine.of("m"), Affine.of("k")))]
        elif self.form == "add_at":
            bins = draw(st.integers(1, 2))  # 4096+ terms a bin: an f16 running sum would stall
            seed = self.fill.seed
            self.input("c", "n", dtype=np.dtype(np.int32),
                       values=lambda shape: np.random.default_rng(seed).integers(-bins, bins, shape).astype(np.int32))
            self.input("x", "n")
            dom = ("i",)
            x = _load("x[i]", self.dtype, dom, lambda env: _value("x")(env)[env.grids["i"]])
            c = _load("c[i]", np.dtype(np.int32), dom, lambda env: _value("c")(env)[env.grids["i"]])
            terms = self.terms([x], dom)
            grids = _grids([("i", self.sizes["n"])])

            def scatter(env: Env) -> bounds.Val:
                env.grids = grids
                try:
                    return env.engine.scatter_add((bins,), terms.dtype, (evaluate(c, env),), evaluate(terms, env))
                finally:
                    env.grids = {}
            statements = [("h", f"h[c[i]] += {render(terms)}", scatter)]
            outputs = [Param("h", terms.dtype, (Affine.of(bins),))]
        elif self.form == "scan":
            axis = draw(st.sampled_from((None, 1, -1, 0, -2)))
            shape = ("n",) if axis is None else ("m", "n") if axis in (1, -1) else ("n", "m")
            leaves = [_leaf(self.input("x", *shape))] + ([_leaf(self.input("w", "n"))] if axis is None else [])
            terms = self.terms(leaves, shape)
            out = ("n",) if axis is None else shape
            node = Node("scan", self.out_dtype(terms), out, (terms,), (kind, axis), text=draw(st.sampled_from(("dsl", "np"))))
            statements, outputs = [("y", f"y = {render(node)}", node)], [Param("y", node.dtype, _affine(out))]
        else:  # scatter
            classes = draw(st.lists(st.integers(0, 95), min_size=1, max_size=3, unique=True))
            seed = self.fill.seed
            self.input("c", "n", dtype=np.dtype(np.uint8),
                       values=lambda shape: np.random.default_rng(seed).choice(classes, shape).astype(np.uint8))
            terms = self.terms([_leaf(self.input("x", "n"))], ("n",))
            c = _leaf(self.inputs[0])
            hist: Callable[[Env], bounds.Val] = \
                lambda env: env.engine.resonance(evaluate(c, env), evaluate(terms, env))  # noqa: E731
            statements = [("h", f"h = resonance(c, {render(terms)})", hist)]
            outputs = [Param("h", terms.dtype, (Affine.of(96),))]
        if self.dtype == np.float32:
            statements = [(target, line, self.counted(how, out))
                          for (target, line, how), out in zip(statements, outputs)]
        return _assemble(self.sizes, self.inputs, self.given, statements, outputs)


def _affine(shape: tuple[str, ...]) -> tuple[Affine, ...]:
    return tuple(Affine.of(int(d)) if d.isdigit() else Affine.of(d) for d in shape)


def _assemble(sizes: dict[str, int], inputs: list[Param], given: dict[str, Any], statements: list[Statement],
            outputs: list[Param]) -> KernelCase:
    """The case: the document, the inputs and the oracle's answers (no runtime error can
    arise: every extent is long)."""
    source = render_document("generated", inputs, outputs, [line for _, line, _ in statements])
    results = _evaluate(statements, outputs, sizes, given, bounds)
    return KernelCase(source, tuple((p.name, given[p.name]) for p in inputs),
                      tuple((p.name, results[p.name]) for p in outputs), (),
                      Program(dict(sizes), tuple(statements), tuple(outputs)))


@st.composite
def long_reduction_kernels(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """One reduction over thousands (f16) or ~2**24 (f32) terms (see the module docs)."""
    return _Long(draw, cfg).case()


@st.composite
def kernels_with_long_reductions(draw: Callable, cfg: GenConfig = GenConfig()) -> KernelCase:
    """`generated.kernels(cfg)`, with about one case in LONG_EVERY a long reduction, one of
    those in four run through `hologram.stream` with a pool of 64 KiB to 1 MiB, its input
    in memory or in a file (read in place in windows, on a backend with a fault guard). (Not
    `st.one_of` with `kernels` repeated: one_of flattens its branches and drops repeats.)"""
    if draw(st.integers(0, LONG_EVERY - 1)) == 0:
        case = draw(long_reduction_kernels(cfg))
        if draw(st.integers(0, 3)) == 0:  # streamed: up to thousands of chunks, whose combination must keep the contract
            case = attrs.evolve(case, stream=StreamSpec(draw(st.sampled_from((1 << 16, 1 << 18, 1 << 20))),
                                                        from_file=draw(st.booleans())))
        return case
    return draw(kernels(cfg))
