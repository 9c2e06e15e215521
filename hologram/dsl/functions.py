"""The function vocabulary of the body language: one table, `FUNCTIONS`.

Each entry says how a call is checked (positional parameters, keywords), typed and
built. The analyzer looks a call up here, checks its arity and keywords against the
entry, evaluates the arguments and hands them to `build`; only reductions (whose extra
arguments bind index variables) and `resonance` (a statement of its own) need the
analyzer's help, and their entries say so by `kind`.

kinds:
    elementwise  numpy ufunc `ufunc` types it (NEP 50), IR op `op`
    composite    `build` expands it into other operations (relu, gelu, clip, fma, ...)
    cast         `f32(x)`: convert to `result`
    atlas        an Atlas function: integer arguments (as i64), IR op `op`, dtype `result`
    reduce       `op` is the reduction kind; extra arguments name index variables
    scan         `cumsum`/`cumprod`: `op` is the kind (sum, prod); hologram.dsl.scans builds it
    resonance    a 96-bin scatter-add, built as an IR `Accumulate`
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import attrs
import numpy as np

from hologram.core.errors import CompileError, Span
from hologram.core.instructions import OPCODES
from hologram.core.types import ALL_TYPES, DType
from hologram.dsl.reductions import KINDS as REDUCTION_KINDS
from hologram.dsl.shapes import Val, align, broadcast_shapes
from hologram.dsl.typerules import BINARY, UNARY, Elementwise, apply, cast, coerce, resolve, strengthen
from hologram.ir import Expr

Builder = Callable[["Function", Sequence[Val], Span], Val]


@attrs.frozen
class Function:
    name: str
    params: tuple[str, ...]
    kind: str
    summary: str
    op: str | None = None
    ufunc: np.ufunc | None = None
    result: DType | None = None
    keywords: tuple[str, ...] = ()
    expand: Callable[[Sequence[Val], Span], Val] | None = None

    @property
    def variadic(self) -> bool:
        """Reductions take any number of index-variable names after the value."""
        return self.kind == "reduce"

    @property
    def signature(self) -> str:
        extra = [", i, ..."] if self.variadic else []
        kws = [f", {k}=..." for k in self.keywords]
        return f"{self.name}({', '.join(self.params)}{''.join(extra + kws)})"

    def build(self, args: Sequence[Val], span: Span) -> Val:
        """The value of this call on evaluated arguments (not for reduce/resonance)."""
        return _BUILDERS[self.kind](self, args, span)


# ------------------------------------------------------------------ builders
def _elementwise(fn: Function, args: Sequence[Val], span: Span) -> Val:
    return apply(Elementwise(fn.name, fn.ufunc, fn.op), args, span)


def _composite(fn: Function, args: Sequence[Val], span: Span) -> Val:
    return attrs.evolve(fn.expand(args, span), span=span)


def _cast(fn: Function, args: Sequence[Val], span: Span) -> Val:
    return cast(args[0], fn.result, span)


def _atlas(fn: Function, args: Sequence[Val], span: Span) -> Val:
    for v in args:
        if v.dtype.is_float:
            raise CompileError(f"{fn.name}() needs integer arguments; got {v.dtype}", v.span or span,
                               hint="Atlas functions take classes, pages and bytes as integers, e.g. i32(x)")
    shape = broadcast_shapes(v.shape for v in args)
    if shape is None:
        raise CompileError(f"the arguments of {fn.name}() do not broadcast", span)
    # every Atlas op reads its operands as i64; that conversion keeps the low bits
    # atlas_class needs and sends any value outside the domain outside 0..95
    srcs = tuple(align(Val(coerce(v, DType.I64), v.shape), shape) for v in args)
    return Val(Expr(fn.op, fn.result, srcs), shape, False, span)


# reductions and resonance bind index variables or add statements: the analyzer builds them
_BUILDERS: dict[str, Builder] = {"elementwise": _elementwise, "composite": _composite, "cast": _cast, "atlas": _atlas}

_MUL, _ADD = BINARY["*"], BINARY["+"]
_MINIMUM = Elementwise("minimum", np.minimum, "MIN")
_MAXIMUM = Elementwise("maximum", np.maximum, "MAX")
_ERFC = Elementwise("erfc", np.exp, "ERFC")


def _lit(value: float) -> Val:
    return Val.of_literal(value)


def _relu(args: Sequence[Val], span: Span) -> Val:
    return apply(_MAXIMUM, (args[0], _lit(0)), span)


def _clip(args: Sequence[Val], span: Span) -> Val:
    x, lo, hi = args
    return apply(_MINIMUM, (apply(_MAXIMUM, (x, lo), span), hi), span)


def _gelu(args: Sequence[Val], span: Span) -> Val:
    # GELU's exact form x * Phi(x), written as a numpy user would with erfc (which, unlike
    # 1 + erf(x/sqrt(2)), does not cancel for x << 0): 0.5*x * erfc(-x / sqrt(2)), every
    # step in f64 and the result rounded once to the dtype np.tanh would give x.
    x = args[0]
    loop = resolve(np.tanh, (x,))
    if loop is None:
        raise CompileError(f"gelu() is not defined for {x.dtype}", x.span or span)
    x64 = Val(coerce(x, DType.F64), x.shape, False, x.span)
    scaled = apply(BINARY["/"], (apply(UNARY["-"], (x64,), span), _lit(math.sqrt(2.0))), span)
    out = apply(_MUL, (apply(_MUL, (_lit(0.5), x64), span), apply(_ERFC, (scaled,), span)), span)
    return Val(coerce(out, loop[1]), out.shape, False, span)


def _fma(args: Sequence[Val], span: Span) -> Val:
    # typed as numpy types a*b + c; fused (one rounding) only where there is rounding
    a, b, c = args
    unfused = apply(Elementwise("fma", np.add, "ADD"), (apply(Elementwise("fma", np.multiply, "MUL"), (a, b), span), c), span)
    t = unfused.dtype
    if not t.is_float:
        return unfused
    srcs = tuple(align(Val(coerce(v, t), v.shape), unfused.shape) for v in args)
    return Val(Expr("FMA", t, srcs), unfused.shape, False, span)


def _where(args: Sequence[Val], span: Span) -> Val:
    # np.where's dtype is np.result_type(a, b), literals and shape-symbol values weak
    # (np.where(c, len(x), x) has x's dtype, and wraps a len() that does not fit it, as
    # the CAST does); a non-bool condition is refused rather than silently truthy
    c, a, b = args
    if c.dtype is not DType.BOOL:
        raise CompileError(f"the condition of where() must be bool; got {c.dtype}", c.span or span,
                           hint="compare first, e.g. where(x != 0, a, b)")
    shape = broadcast_shapes(v.shape for v in args)
    if shape is None:
        raise CompileError("the arguments of where() do not broadcast", span)
    t = DType.from_numpy(np.result_type(*(_weak_stand_in(v) if v.weak else v.dtype.np for v in (a, b))))
    srcs = tuple(align(Val(coerce(v, d), v.shape), shape) for v, d in ((c, DType.BOOL), (a, t), (b, t)))
    return Val(Expr("WHERE", t, srcs), shape, False, span)


def _weak_stand_in(v: Val) -> bool | int | float:
    """A Python scalar that np.result_type types as it types `v`: the literal itself, or
    for a shape-symbol value a Python scalar of its kind."""
    if v.is_literal:
        return v.literal
    return 0 if v.dtype.is_int else 0.0


def _round(args: Sequence[Val], span: Span) -> Val:
    # np.round: half to even; integers round to themselves (bool becomes f16, as numpy)
    x = strengthen(args[0])
    t = DType.from_numpy(np.round(np.zeros(1, x.dtype.np)).dtype)
    if not x.dtype.is_float:
        return Val(coerce(x, t), x.shape, False, span)
    return Val(Expr("RINT", t, (coerce(x, t),)), x.shape, False, span)


# ------------------------------------------------------------------ the table
def _table() -> dict[str, Function]:
    fns: list[Function] = []

    def ew(name: str, ufunc: np.ufunc, op: str, summary: str, params: tuple[str, ...] = ("x",)) -> None:
        fns.append(Function(name, params, "elementwise", summary, op=op, ufunc=ufunc))

    for spec in OPCODES.values():  # the functions that are one instruction, elementwise
        for f in spec.dsl:
            ew(f.name, f.ufunc, spec.name, f.summary, ("x",) if spec.arity == 1 else ("a", "b", "c")[:spec.arity])
    ew("sign", np.sign, "SIGN", "-1, 0 or 1 (NaN for NaN)")
    ew("isnan", np.isnan, "ISNAN", "true where x is NaN")

    for name, params, expand, summary in (
        ("round", ("x",), _round, "round half to even (no decimals argument)"),
        ("relu", ("x",), _relu, "maximum(x, 0)"),
        ("gelu", ("x",), _gelu, "x * Phi(x) = 0.5*x*erfc(-x/sqrt(2)), computed in f64"),
        ("clip", ("x", "lo", "hi"), _clip, "minimum(maximum(x, lo), hi)"),
        ("fma", ("a", "b", "c"), _fma, "a*b + c with one rounding"),
        ("where", ("cond", "a", "b"), _where, "a where cond is true, else b"),
    ):
        fns.append(Function(name, params, "composite", summary, expand=expand))

    for d in ALL_TYPES:
        fns.append(Function(str(d), ("x",), "cast", f"convert to {d}", result=d))

    for name, op, params, result, summary in (
        ("atlas_class", "ATLAS_CLASS", ("byte",), DType.I32, "resonance class (0..95) of the low 8 bits"),
        ("mirror", "MIRROR", ("c",), DType.I32, "mirror class of c (-1 outside 0..95)"),
        ("degree", "DEGREE", ("c",), DType.I32, "number of neighbours of class c (0 outside 0..95)"),
        ("neighbor", "NEIGHBOR", ("c", "k"), DType.I32, "k-th neighbour of c in ascending order, or -1"),
        ("is_unity", "IS_UNITY", ("c",), DType.BOOL, "true for the two unity classes"),
        ("bound_map", "BOUND_MAP", ("class", "page", "byte"), DType.I64, "class*12288 + page*256 + byte"),
    ):
        fns.append(Function(name, params, "atlas", summary, op=op, result=result))

    for kind in REDUCTION_KINDS:
        fns.append(Function(kind, ("x",), "reduce", f"{kind} over everything, an axis or index variables",
                            op=kind, keywords=("axis", "keepdims")))
    for name, kind in (("cumsum", "sum"), ("cumprod", "prod")):
        fns.append(Function(name, ("x",), "scan", f"running {kind} over the flattened array or along an axis",
                            op=kind, keywords=("axis",)))
    fns.append(Function("resonance", ("classes", "values"), "resonance",
                        "96-bin scatter-add of values into the bins named by classes"))
    return {f.name: f for f in fns}


FUNCTIONS: dict[str, Function] = _table()
