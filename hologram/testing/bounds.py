"""Error propagation: what a conforming backend may answer for a composed expression.

The oracle evaluates an expression step by step with numpy, in the dtypes numpy picks.
Next to each step's value `v` it keeps the set of answers the accuracy contract allows a
backend, as a `Val`:

    v      numpy's answer (the node's dtype)
    ulps   allowed ULP distance from v for a step whose inputs were exact
    err    absolute bound on |answer - v| propagated from inexact inputs (float64)
    fuzzy  the contract does not pin this element down (see below)

A step with exact inputs may differ from numpy by its operation's contract (`OP_ULPS`:
0 for `+ - * /`, sqrt, casts, rounding and all integer work; 4 for transcendentals).
A step whose inputs carry error is bounded by interval evaluation: every input is
widened to the interval its own contract allows, the operation is evaluated in float64
at the interval corners (plus the interior extrema of non-monotonic functions, such as
sin at pi/2), and the spread of those values, plus a rounding slack of
`(2*ulps + 2)` ULPs of the largest magnitude, bounds the step. This is sound for the
monotonic and piecewise-monotonic functions of the DSL and never depends on the
condition number being small: cancellation after a transcendental shows up as a wide
interval, not as a false failure.

An element is *fuzzy* when conforming backends may legitimately disagree beyond any
bound: a discontinuous function (floor, `//`, a comparison, a float->int cast, the sign
of copysign) whose input interval straddles a jump; copysign from a NaN (a NaN's sign is
not specified); an interval that may overflow or
leave the function's domain (NaN on one side); a reduction whose summation order can
overflow or underflow. Fuzziness propagates to every dependent element; those elements
are not compared. Exact inputs never make an element fuzzy, so integer, bool and
`+ - * /`-only expressions are always compared bitwise.

Reductions (`sum prod mean`), and each prefix of a scan (`cumsum cumprod`), are bounded
by the contract's `log2(n)` rule against the sum of the magnitudes of their terms; `min max` by the largest input error;
`argmin argmax` are exact unless an inexact input could change the winner.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Callable, Sequence

import attrs
import numpy as np

from hologram.core import semantics as oracle
from hologram.isa.opcodes import OPCODES
from hologram.testing.contract import assert_close, reduction_tolerance, spacing, ulp_step
from hologram.testing.values import DTypeLike, as_dtype

__all__ = ["Val", "OP_ULPS", "CONTRACT_ULPS", "TRANSCENDENTAL", "apply", "reduce", "scan", "resonance", "scatter_add",
           "lift",
           "gelu_steps"]

CONTRACT_ULPS = 4  # transcendentals, per DESIGN.md

# The functions of the approximated instructions (the op table's ≈); `**` and rsqrt are
# held to their bound too (DESIGN.md's contract: only + - * / and sqrt are exact)
TRANSCENDENTAL = frozenset({"**", "rsqrt"} | {f.name for spec in OPCODES.values() if spec.approx for f in spec.dsl})
OP_ULPS: dict[str, int] = {name: (CONTRACT_ULPS if name in TRANSCENDENTAL else 0) for name in oracle.ORACLE}
OP_ULPS["cast"] = 0

Scalar = bool | int | float


@attrs.frozen(eq=False)
class Val:
    """An oracle value and the answers the accuracy contract allows (see module docs)."""

    v: np.ndarray
    err: np.ndarray
    ulps: np.ndarray
    fuzzy: np.ndarray

    @staticmethod
    def exact(v: np.ndarray | np.generic) -> "Val":
        v = np.asarray(v)
        return Val(v, np.zeros(v.shape), np.zeros(v.shape, np.int64), np.zeros(v.shape, bool))

    @staticmethod
    def settled(v: np.ndarray, err: np.ndarray, ulps: np.ndarray, fuzzy: np.ndarray) -> "Val":
        """A Val whose bound is meaningful wherever it is used: an element whose bound came
        out NaN (inf - inf in a propagation) is left open rather than trusted."""
        v = np.asarray(v)
        with np.errstate(invalid="ignore"):
            nan_v = np.isnan(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool)
        fuzzy = np.asarray(fuzzy) | (np.isnan(err) & ~nan_v)
        err = np.where(fuzzy | nan_v | np.isnan(err), 0.0, err)
        return Val(v, err, np.asarray(ulps, np.int64), fuzzy)

    @property
    def dtype(self) -> np.dtype:
        return self.v.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.v.shape

    def broadcast_to(self, shape: tuple[int, ...]) -> "Val":
        return Val(*(np.array(np.broadcast_to(f, shape)) for f in (self.v, self.err, self.ulps, self.fuzzy)))

    def reshape(self, shape: tuple[int, ...]) -> "Val":
        return Val(*(np.reshape(f, shape) for f in (self.v, self.err, self.ulps, self.fuzzy)))

    def check(self, actual: np.ndarray, *, name: str = "value", context: str = "") -> None:
        """Assert that `actual` is an answer this value allows (`assert_close` semantics)."""
        if self.v.dtype.kind == "f":
            assert_close(actual, self.v, ulps=self.ulps, bound=self.err, where=~self.fuzzy, name=name, context=context)
        else:
            assert_close(actual, self.v, where=~self.fuzzy, name=name, context=context)


def lift(x: "Val | Scalar", dtype: np.dtype) -> "Val":
    """A weak Python literal as the exact value numpy computes with (converted to `dtype`)."""
    if isinstance(x, Val):
        return x
    with np.errstate(all="ignore"):  # 1e10 as f16 is inf, as numpy computes it
        return Val.exact(np.asarray(x, dtype=dtype))


# ------------------------------------------------------------------ per-op knowledge
def _periodic(offset: float, period: float) -> Callable[[np.ndarray, np.ndarray], list[np.ndarray]]:
    """Interior extrema at offset + k*period: the first two inside [lo, hi] (or NaN)."""

    def points(lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            k = np.ceil((lo - offset) / period)
        first = offset + k * period
        return [np.where(p <= hi, p, np.nan) for p in (first, first + period)]

    return points


def _at(*points: float) -> Callable[[np.ndarray, np.ndarray], list[np.ndarray]]:
    def inside(lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        return [np.where((lo < p) & (p < hi), p, np.nan) for p in points]

    return inside


# Extra evaluation points per argument position, for functions that are not monotonic
# in that argument (the corners of the input box miss their interior extrema).
CRITICAL: dict[str, tuple] = {
    "abs": (_at(0.0),), "cosh": (_at(0.0),), "sin": (_periodic(math.pi / 2, math.pi),),
    "cos": (_periodic(0.0, math.pi),), "rsqrt": (_at(0.0),), "/": (None, _at(0.0)),
    "hypot": (_at(0.0), _at(0.0)), "power": (_at(0.0), None), "**": (_at(0.0), None),
    "copysign": (_at(0.0), None), "*": (_at(0.0), _at(0.0)),
}


def _sign_of(b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(b), np.nan, np.signbit(b).astype(np.float64))


# Branch labels of discontinuous functions: within one label the function is continuous
# and monotone in each argument; if the corners disagree on the label, the element is fuzzy.
BRANCH: dict[str, Callable[..., np.ndarray]] = {
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "round": np.round,
    "sign": np.sign, "//": lambda a, b: np.floor(a / b), "%": lambda a, b: np.floor(a / b),
    "fmod": lambda a, b: np.trunc(a / b), "copysign": lambda a, b: _sign_of(b),
    "/": lambda a, b: _sign_of(b), "tan": lambda x: np.floor(x / math.pi + 0.5),
    "arctan2": lambda y, x: np.where(x < 0, 1.0 + _sign_of(y), 0.0),
    "power": lambda x, y: _sign_of(x), "**": lambda x, y: _sign_of(x),
}

# Functions whose zero result may carry either sign when the operands hold zeros of both
# signs: numpy's own choice depends on the code path (SIMD or scalar loop).
ZERO_SIGN_FREE = frozenset({"minimum", "maximum", "clip", "relu"})


# ------------------------------------------------------------------------- spans
def _span(a: Val) -> tuple[np.ndarray, np.ndarray]:
    """The interval [lo, hi] (float64) of answers `a` allows; beyond the dtype's range: inf."""
    x = a.v.astype(np.float64)
    if a.v.dtype.kind != "f":
        return x, x
    if not a.ulps.any():  # no ULP allowance: skip ulp_step, ~10 passes over a long input
        lo, hi = x - a.err, x + a.err
    else:
        lo = ulp_step(a.v, -a.ulps).astype(np.float64) - a.err
        hi = ulp_step(a.v, a.ulps).astype(np.float64) + a.err
    big = float(np.finfo(a.v.dtype).max)
    lo = np.where(lo < -big, -np.inf, lo)
    hi = np.where(hi > big, np.inf, hi)
    return lo, hi


def _width(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How far from `x` its interval reaches (inf from an infinity that may turn finite)."""
    with np.errstate(invalid="ignore"):
        w = np.fmax(x - lo, hi - x)  # inf - inf is NaN: the other side decides
    return np.where(np.isnan(w), 0.0, w)


def _inexact(a: Val) -> np.ndarray:
    if a.v.dtype.kind != "f":
        return np.zeros(a.shape, bool)
    return ((a.err > 0) | (a.ulps > 0)) & ~np.isnan(a.v)


# ------------------------------------------------------------------------- apply
def apply(name: str, args: Sequence["Val | Scalar"], *, dtype: DTypeLike | None = None) -> Val:
    """The oracle's answer for DSL operation `name` on `args` (Vals or weak literals),
    with its contract. `dtype` is the target of `cast` (`"i32"`, a DType or numpy dtype)."""
    if dtype is not None:
        dtype = as_dtype(dtype)
    if name == "gelu":
        return gelu_steps(args[0], apply)
    if name == "where":
        return _where(*args)
    fn = functools.partial(oracle.cast, dtype=dtype) if name == "cast" else oracle.ORACLE[name]
    raw = [a.v if isinstance(a, Val) else a for a in args]
    with np.errstate(all="ignore"):
        v = np.asarray(fn(*raw))
        compute = np.result_type(*raw)
    vals = [lift(a, compute) for a in args]
    shape = v.shape
    fuzzy = np.zeros(shape, bool)
    inexact = np.zeros(shape, bool)
    for a in vals:
        fuzzy |= np.broadcast_to(a.fuzzy, shape)
        inexact |= np.broadcast_to(_inexact(a), shape)
    u = OP_ULPS[name]
    float_out = v.dtype.kind == "f"
    ulps = np.where(inexact, 0, u if float_out else 0).astype(np.int64)
    err = np.zeros(shape)
    if name in ZERO_SIGN_FREE and float_out:
        zeros = [np.broadcast_to(a.v, shape) for a in vals if a.v.dtype.kind == "f"]
        both = np.any([(z == 0) & np.signbit(z) for z in zeros], axis=0) & np.any(
            [(z == 0) & ~np.signbit(z) for z in zeros], axis=0)
        ulps = np.where(both & (v == 0), np.maximum(ulps, 1), ulps)
    if name == "copysign" and float_out:
        # the sign of a NaN an operation produces is not specified (docs/isa.md, Numeric
        # model): numpy's own differs by function and dtype (arccos: negative in f32/f64,
        # positive in f16), so the sign it copies is not pinned down
        fuzzy |= np.broadcast_to(np.isnan(vals[1].v.astype(np.float64)), shape)
    if inexact.any():
        spread_err, unsure = _corners(name, fn, vals, v, u, shape)
        fuzzy |= inexact & unsure
        err = np.where(inexact & ~fuzzy, spread_err, 0.0)
    return Val.settled(v, err, ulps, fuzzy)


def _corners(name: str, fn: Callable, vals: list[Val], v: np.ndarray, u: int,
             shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate `fn` in float64 over the corners (and critical points) of the input box:
    (error bound, unsure mask)."""
    crit = CRITICAL.get(name, ())
    axes = []
    for pos, a in enumerate(vals):
        lo, hi = (np.broadcast_to(s, shape) for s in _span(a))
        x = np.broadcast_to(a.v.astype(np.float64), shape)
        points = [lo, x, hi]
        if pos < len(crit) and crit[pos] is not None:
            points += [np.where(np.isnan(p), x, p) for p in crit[pos](lo, hi)]
        axes.append(points)
    combos = list(itertools.product(*axes))
    center = [p[1] for p in axes]
    v64 = v.astype(np.float64)
    with np.errstate(all="ignore"):
        cands = np.stack([np.broadcast_to(np.asarray(fn(*c)).astype(np.float64), shape) for c in combos])
        unsure = np.any(np.isnan(cands) != np.isnan(v64), axis=0)
        if name in BRANCH:
            ref = np.broadcast_to(BRANCH[name](*center), shape)
            for c in combos:
                label = np.broadcast_to(BRANCH[name](*c), shape)
                unsure |= (label != ref) & ~(np.isnan(label) & np.isnan(ref))
        if name in ("==", "!="):  # equality can hold inside overlapping intervals
            (alo, ahi), (blo, bhi) = (_span(a) for a in vals)
            unsure |= np.broadcast_to((alo <= bhi) & (blo <= ahi), shape)
        if v.dtype.kind != "f":
            unsure |= np.any((cands != v64) & ~(np.isnan(cands) & np.isnan(v64)), axis=0)
            return np.zeros(shape), unsure
        big = float(np.finfo(v.dtype).max)
        finite_v = np.isfinite(v64)
        unsure |= finite_v & np.any(np.abs(cands) > big, axis=0)
        unsure |= ~finite_v & ~np.isnan(v64) & np.any(cands != v64, axis=0)
        known = ~np.isnan(cands)
        dev = np.where(known, np.abs(cands - v64), 0.0).max(axis=0)
        mag = np.maximum(np.where(known, np.abs(cands), 0.0).max(axis=0), np.abs(v64))
        err = dev + (2 * u + 2) * spacing(np.where(np.isfinite(mag), mag, 0.0), v.dtype)
    return err, unsure


def _where(c: "Val | Scalar", a: "Val | Scalar", b: "Val | Scalar") -> Val:
    raw = [x.v if isinstance(x, Val) else x for x in (a, b)]
    dt = np.result_type(*raw)
    a, b = (apply("cast", [lift(x, dt)], dtype=dt) for x in (a, b))
    c = lift(c, np.dtype(bool))
    shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
    c, a, b = (x.broadcast_to(shape) for x in (c, a, b))
    pick = c.v.astype(bool)
    return Val(np.where(pick, a.v, b.v), np.where(pick, a.err, b.err), np.where(pick, a.ulps, b.ulps),
               c.fuzzy | np.where(pick, a.fuzzy, b.fuzzy))


def gelu_steps(x: Val, apply: Callable[..., Val]) -> Val:
    """gelu as its defining formula, one `apply` per step: each step's contract applies
    (erfc's 4 ULP at an argument that is itself rounded), and the steps compute exactly
    what oracle.gelu computes."""
    dtype = np.tanh(np.zeros((), dtype=x.v.dtype)).dtype
    w = apply("cast", [x], dtype=np.float64)
    out = apply("*", [apply("*", [0.5, w]), apply("erfc", [apply("/", [apply("neg", [w]), math.sqrt(2.0)])])])
    return out if dtype == np.float64 else apply("cast", [out], dtype=dtype)


# ---------------------------------------------------------------------- reductions
def _move(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`x` with the reduced axes flattened into one last axis."""
    kept = [a for a in range(x.ndim) if a not in axes]
    extent = math.prod(x.shape[a] for a in axes)
    return np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [extent])


def reduce(kind: str, a: Val, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Val:
    """The oracle's reduction with its contract; raises ExecutionError where the DSL does."""
    v = oracle.reduce(kind, a.v, axis, keepdims)
    axes = oracle.reduced_axes(a.v, axis)
    n = math.prod(a.shape[i] for i in axes)
    flat_v = (np.squeeze(v, axis=axes) if keepdims and axes else v).astype(np.float64)

    def back(flat: np.ndarray) -> np.ndarray:  # the (kept...) layout -> v's shape
        return np.expand_dims(flat, axes) if keepdims else np.reshape(flat, v.shape)

    fuzzy = back(np.any(_move(a.fuzzy, axes), axis=-1))
    zero = np.zeros(v.shape)
    if kind in ("any", "all"):  # truth values: unsure where an inexact element may be zero or not
        lo, hi = (_move(np.broadcast_to(s, a.shape), axes) for s in _span(a))
        maybe_zero = _move(np.broadcast_to(_inexact(a), a.shape), axes) & (lo <= 0) & (hi >= 0)
        return Val(v, zero, zero.astype(np.int64), fuzzy | back(np.any(maybe_zero, axis=-1)))
    if a.v.dtype.kind != "f" and kind != "mean":  # integer reductions are exact in any order
        return Val(v, zero, zero.astype(np.int64), fuzzy)
    x = _move(a.v.astype(np.float64), axes)
    lo, hi = (_move(np.broadcast_to(s, a.shape), axes) for s in _span(a))
    with np.errstate(all="ignore"):
        e = _width(x, lo, hi)
        inexact = _move(np.broadcast_to(_inexact(a), a.shape), axes)
        any_inexact = np.any(inexact, axis=-1)
        has_nan = np.any(np.isnan(x), axis=-1)
        if kind in ("argmin", "argmax"):
            w = flat_v.astype(np.int64)[..., None]
            if kind == "argmin":
                rival = lo <= np.take_along_axis(hi, w, -1)
            else:
                rival = hi >= np.take_along_axis(lo, w, -1)
            others = np.arange(x.shape[-1]) != w
            involved = inexact | np.take_along_axis(inexact, w, -1)
            winner_nan = np.isnan(np.take_along_axis(x, w, -1)[..., 0]) if x.shape[-1] else has_nan
            unsure = np.any(rival & others & involved, axis=-1) & ~winner_nan
            return Val(v, zero, zero.astype(np.int64), fuzzy | back(unsure))
        big, tiny = float(np.finfo(v.dtype).max), float(np.finfo(v.dtype).tiny)
        last_ulp = spacing(np.where(np.isfinite(flat_v), flat_v, 0.0), v.dtype)
        ulps = np.zeros(flat_v.shape, np.int64)
        if kind in ("min", "max"):
            pick = np.min if kind == "min" else np.max
            err = np.maximum(flat_v - pick(lo, axis=-1), pick(hi, axis=-1) - flat_v)
            err = np.where(any_inexact & ~np.isnan(flat_v), err, 0.0)
            unsure = np.isfinite(flat_v) & ~np.isfinite(err)
            both = np.any((x == 0) & np.signbit(x), axis=-1) & np.any((x == 0) & ~np.signbit(x), axis=-1)
            ulps = np.where(both & (flat_v == 0), 1, 0)  # which zero wins depends on the order
        elif kind in ("sum", "mean"):
            fin = np.isfinite(x)
            mag = np.sum(np.where(fin, np.abs(x) + e, 0.0), axis=-1)
            esum = np.sum(np.where(fin, e, 0.0), axis=-1)
            shaky = np.any(np.isinf(e) | (~fin & inexact), axis=-1)
            unsure = ~has_nan & ((mag > big) | shaky)  # some summation order may overflow
            scale = 1.0 / n if kind == "mean" and n else 1.0
            err = (esum + reduction_tolerance(max(n, 1), v.dtype) * mag) * scale + last_ulp
        else:  # prod
            ax = np.abs(x)
            upper = np.prod(ax + e, axis=-1)
            grow = np.prod(np.maximum(ax + e, 1.0), axis=-1)
            shrink = np.prod(np.minimum(np.maximum(ax - e, 0.0), 1.0), axis=-1)
            exact_zero = np.any((x == 0) & ~inexact, axis=-1)
            # some multiplication order may overflow, or underflow to a lost subnormal
            unsure = ~has_nan & ((grow > big) | ((shrink < tiny) & ~exact_zero))
            err = (upper - np.prod(ax, axis=-1)) + reduction_tolerance(max(n, 1), v.dtype) * upper + last_ulp
            ulps = np.where(exact_zero & any_inexact, 1, 0)  # the sign of that zero is open
    return Val.settled(v, back(err), back(ulps), fuzzy | back(unsure))


def scan(kind: str, a: Val, axis: int | None = None) -> Val:
    """The oracle's cumsum (`kind` "sum") or cumprod ("prod") over the flattened array
    (`axis` None) or along `axis`, with its contract: each prefix is a reduction of its
    terms (the `log2(k)` rule of `reduce` for the k terms up to it, against their
    magnitudes), and what makes a prefix fuzzy makes every later one fuzzy."""
    v = oracle.scan(kind, a.v, axis)
    if axis is None:
        a, axis = a.broadcast_to(a.shape).reshape((-1,)), 0
    axis %= max(a.v.ndim, 1)
    if not a.v.ndim:
        a = a.reshape((1,))
    fuzzy = np.logical_or.accumulate(np.broadcast_to(a.fuzzy, a.shape), axis=axis) if v.size else v == 0
    zero = np.zeros(v.shape)
    if v.dtype.kind != "f":
        return Val(v, zero, zero.astype(np.int64), fuzzy)
    x = a.v.astype(np.float64)
    lo, hi = (np.broadcast_to(s, a.shape) for s in _span(a))
    count = np.arange(1, v.shape[axis] + 1).reshape([-1 if d == axis else 1 for d in range(v.ndim)])
    depth = np.ceil(np.log2(np.maximum(count, 1)))
    tol = 2.0 * (depth + 1) * float(np.finfo(v.dtype).eps)  # contract.reduction_tolerance, per prefix

    def running(f: Callable[..., np.ndarray], part: np.ndarray) -> np.ndarray:
        return f(part, axis=axis) if v.size else part

    with np.errstate(all="ignore"):
        e = _width(x, lo, hi)
        inexact = np.broadcast_to(_inexact(a), a.shape)
        has_nan = running(np.logical_or.accumulate, np.isnan(x))
        big, tiny = float(np.finfo(v.dtype).max), float(np.finfo(v.dtype).tiny)
        last_ulp = spacing(np.where(np.isfinite(v), v, 0.0), v.dtype)
        ulps = np.zeros(v.shape, np.int64)
        if kind == "sum":
            fin = np.isfinite(x)
            mag = running(np.cumsum, np.where(fin, np.abs(x) + e, 0.0))
            shaky = running(np.logical_or.accumulate, np.isinf(e) | (~fin & inexact))
            unsure = ~has_nan & ((mag > big) | shaky)  # some summation order may overflow
            err = running(np.cumsum, np.where(fin, e, 0.0)) + tol * mag + last_ulp
        else:
            ax = np.abs(x)
            upper = running(np.cumprod, ax + e)
            grow = running(np.cumprod, np.maximum(ax + e, 1.0))
            shrink = running(np.cumprod, np.minimum(np.maximum(ax - e, 0.0), 1.0))
            exact_zero = running(np.logical_or.accumulate, (x == 0) & ~inexact)
            # some multiplication order may overflow, or underflow to a lost subnormal
            unsure = ~has_nan & ((grow > big) | ((shrink < tiny) & ~exact_zero))
            err = (upper - running(np.cumprod, ax)) + tol * upper + last_ulp
            ulps = np.where(exact_zero & running(np.logical_or.accumulate, inexact), 1, 0)  # the sign of that zero
    return Val.settled(v, err, ulps, fuzzy | unsure)


def resonance(classes: Val, values: "Val | Scalar") -> Val:
    """The oracle's resonance (96-bin scatter-add) with its contract: per bin a sum."""
    raw = values.v if isinstance(values, Val) else values
    oracle.ORACLE["resonance"](classes.v, raw)  # raises for a class outside 0..95
    dtype = np.sum(np.zeros(0, np.asarray(raw).dtype)).dtype
    return scatter_add((96,), dtype, (classes,), values)


def scatter_add(shape: tuple[int, ...], dtype: np.dtype, index: "tuple[Val, ...]", values: "Val | Scalar") -> Val:
    """The oracle's `h[index] += values` into zeros of `shape` and `dtype` (numpy's
    np.add.at; hologram.core.semantics.add_at) with its contract: per element a sum of
    the values cast to `dtype`. Raises ExecutionError for an index out of range."""
    raw = values.v if isinstance(values, Val) else values
    v = oracle.add_at(shape, dtype, tuple(i.v for i in index), raw)
    terms = apply("cast", [values], dtype=dtype) if isinstance(values, Val) else lift(values, np.dtype(dtype))
    arrays = np.broadcast_arrays(*(i.v.astype(np.int64) for i in index), terms.v)
    every = arrays[-1].shape
    # the flat element of each term (a negative index counts from the end, as numpy's)
    c = np.ravel_multi_index(tuple(np.where(a < 0, a + d, a).ravel() for a, d in zip(arrays[:-1], shape)), shape) \
        if arrays[-1].size else np.zeros(0, np.int64)
    size = int(np.prod(shape))
    fz = np.zeros(size, bool)
    fz |= bool(any(np.any(i.fuzzy) for i in index))
    np.logical_or.at(fz, c, np.broadcast_to(terms.fuzzy, every).ravel())
    if v.dtype.kind != "f":
        return Val(v, np.zeros(v.shape), np.zeros(v.shape, np.int64), fz.reshape(v.shape))
    lo, hi = (np.broadcast_to(b, every).ravel() for b in _span(terms))
    x = np.broadcast_to(terms.v, every).ravel().astype(np.float64)
    with np.errstate(all="ignore"):
        e = _width(x, lo, hi)
        fin = np.isfinite(x)
        shaky = np.isinf(e) | (~fin & (e > 0))  # an infinity that may turn finite, or back
        mag, esum, count, nan, wobbly = (np.zeros(size) for _ in range(5))
        for acc, part in ((mag, np.where(fin, np.abs(x) + e, 0.0)), (esum, np.where(fin, e, 0.0)),
                          (count, np.ones(x.shape)), (nan, np.isnan(x)), (wobbly, shaky)):
            np.add.at(acc, c, part.astype(np.float64))
        big = float(np.finfo(v.dtype).max)
        tol = np.array([reduction_tolerance(max(int(k), 1), v.dtype) for k in count])
        flat_v = v.ravel()
        err = esum + tol * mag + spacing(np.where(np.isfinite(flat_v), flat_v, 0.0), v.dtype)
        unsure = (nan == 0) & ((mag > big) | (wobbly > 0))
    return Val.settled(v, err.reshape(v.shape), np.zeros(v.shape, np.int64), (fz | unsure).reshape(v.shape))
