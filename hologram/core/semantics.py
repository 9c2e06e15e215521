"""numpy implementations of every DSL operator and function: the semantic oracle.

Where numpy defines the answer, these call numpy (NEP 50 promotion, Python scalars are
weak literals). Where numpy is platform-defined, warns, or has no function, the DSL
defines one answer and this module is its executable definition:

- integer `//`, `%` and `fmod` by zero give 0; `INT_MIN // -1` wraps to `INT_MIN`
- shift amounts are masked to the bit width of the result type (`b & (bits - 1)`)
- float `**` is C99 `pow` for every exponent (np.power special-cases scalar exponents);
  integer `**` wraps and a negative exponent gives the truncated `1 / a**-b` (numpy raises)
- float -> integer casts truncate and saturate to the target range, NaN -> 0
- `clip(x, lo, hi) = minimum(maximum(x, lo), hi)`, `rsqrt(x) = 1/sqrt(x)`,
  `sigmoid(x) = 1/(1 + exp(-x))` (evaluated stably, rounded once), `relu(x) = maximum(x, 0)`,
  each computed in x's dtype; `erf`, `erfc` are Python's `math.erf`/`math.erfc` (the C
  library's) in f64, rounded to np.exp's dtype for x; `gelu(x) = 0.5*x * erfc(-x / sqrt(2))`
  with every step in f64, rounded to np.tanh's dtype for x; `fma(a, b, c)` is `a*b + c`
  with one rounding
- min/max/argmin/argmax over an empty extent raise `ExecutionError`
- `cumsum`/`cumprod` (`scan`): float prefixes each rounded once from f64 (f64 sums
  compensated), as the float sums below, not numpy's running value in the input type
- float sums, products and means (and resonance's float bins) are the exact terms
  reduced in f64 and rounded once, not numpy's own arithmetic, which is not pairwise
  along a strided axis and multiplies in the input type (`_rounded_once`)
- the Atlas functions follow `hologram.core.atlas` (out-of-range classes give -1 / 0 /
  False; `resonance` rejects a class outside 0..95)
- a shape symbol used as a value is the Python int `len()` gives (weak); callers pass it
  as one. Where numpy raises OverflowError because it does not fit an integer operand,
  the DSL wraps it into that operand's type (compares exactly); `exprgen.evaluate`
  applies that rule, since these functions cannot tell a symbol from a literal

`ORACLE` maps each DSL spelling (operators as written, functions by name) to its
implementation (a function that is one instruction, from the op table, is numpy's
function of its name unless defined here); casts are `cast(x, dtype)` and reductions `reduce(kind, x, axis, keepdims)`.
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

from hologram.core import atlas
from hologram.core.errors import ExecutionError
from hologram.core.instructions import OPCODES

__all__ = ["ORACLE", "cast", "reduce", "fma", "resonance", "add_at", "scan", "REDUCTIONS", "SCANS"]

Arg = Any  # np.ndarray | np.generic | bool | int | float (Python scalars are weak)


def _quiet(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """numpy warnings (overflow, invalid, divide) are the DSL's defined answers, not errors;
    results are always arrays (0-d for scalars) so callers see one type."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> np.ndarray:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # e.g. "Mean of empty slice"
            return np.asarray(fn(*args, **kwargs))

    return wrapper


def _common(*args: Arg) -> np.dtype:
    return np.result_type(*args)


def _as(x: Arg, dt: np.dtype) -> np.ndarray:
    """`x` converted to `dt`; a Python literal that does not fit raises OverflowError, as numpy does."""
    if isinstance(x, (bool, int, float)):
        return np.asarray(x, dtype=dt)
    return np.asarray(x).astype(dt, copy=False)


def _by_zero_is_zero(ufunc: np.ufunc) -> Callable[[Arg, Arg], np.ndarray]:
    """An integer division-like ufunc whose answer for a zero divisor is 0 (floats: numpy's)."""

    def op(a: Arg, b: Arg) -> np.ndarray:
        dt = _common(a, b)
        if dt.kind not in "iu":
            return ufunc(a, b)
        a, b = _as(a, dt), _as(b, dt)
        zero = b == 0
        return np.where(zero, dt.type(0), ufunc(a, np.where(zero, dt.type(1), b)))

    return op


def _shift(left: bool) -> Callable[[Arg, Arg], np.ndarray]:
    def op(a: Arg, b: Arg) -> np.ndarray:
        dt = _common(a, b)
        if dt.kind not in "iu":
            raise TypeError(f"shifts need integer operands, got {dt}")
        a, b = _as(a, dt), _as(b, dt)
        amount = b & dt.type(dt.itemsize * 8 - 1)
        if left:  # shift the unsigned view: signed left-shift overflow is undefined in C
            u = np.dtype(f"u{dt.itemsize}")
            return (a.view(u) << amount.view(u)).view(dt)
        return a >> amount  # arithmetic on signed, logical on unsigned

    return op


def power(a: Arg, b: Arg) -> np.ndarray:
    """numpy's power with C99 `pow` semantics for every exponent. np.power special-cases
    a scalar exponent (0.5 as sqrt, -1 as a reciprocal), which changes `(-inf)**0.5`
    (NaN instead of inf), `(-0.0)**0.5` (-0.0 instead of 0.0) and some last bits; the
    DSL defines one answer, the one numpy gives for an array of exponents."""
    dt = _common(a, b)
    a, b = np.broadcast_arrays(_as(a, dt), _as(b, dt))
    shape = a.shape  # real copies: numpy takes a zero-stride exponent for a scalar too
    a, b = np.array(a, ndmin=1), np.array(b, ndmin=1)
    if dt.kind not in "iu":
        return np.power(a, b).reshape(shape)
    # integers wrap; a negative exponent (numpy raises) gives the truncated 1 / a**-b
    negative = b < 0
    out = np.power(a, np.where(negative, 0, b).astype(dt))
    truncated = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(dt)
    return np.where(negative, truncated, out).reshape(shape)


def cast(x: Arg, dtype: np.dtype | type | str) -> np.ndarray:
    """The DSL's conversion `T(x)`: float -> int truncates and saturates (NaN -> 0);
    anything -> bool is `x != 0`; otherwise numpy's `astype` (integers wrap)."""
    dt = np.dtype(dtype)
    with np.errstate(all="ignore"):
        x = np.asarray(x)
        if dt.kind == "b":
            return x != 0
        if x.dtype.kind != "f" or dt.kind not in "iu":
            return x.astype(dt)
        info = np.iinfo(dt)
        t = np.trunc(x.astype(np.float64))
        hi, lo = float(info.max) + 1.0, float(info.min)  # 2**k is exact in float64
        over, under, nan = t >= hi, t < lo, np.isnan(t)
        inner = np.where(over | under | nan, 0.0, t).astype(dt)
        return np.where(over, dt.type(info.max), np.where(under, dt.type(info.min), inner))


def rsqrt(x: Arg) -> np.ndarray:
    return 1 / np.sqrt(x)


def sigmoid(x: Arg) -> np.ndarray:
    """The correctly rounded logistic function in exp's result dtype: evaluated stably in
    f64 (the naive formula overflows exp(-x) to inf and flushes a subnormal answer to 0)
    and rounded once. For f64 inputs the stable form in f64 is within 1-2 ULP."""
    dtype = np.exp(np.zeros((), dtype=np.asarray(x).dtype)).dtype
    w = np.asarray(x, dtype=np.float64)
    z = np.exp(-np.abs(w))
    out = np.where(w >= 0, 1 / (1 + z), z / (1 + z))
    return np.asarray(np.where(np.isnan(w), w, out)).astype(dtype)


def relu(x: Arg) -> np.ndarray:
    return np.maximum(x, 0)


def _via_f64(fn: Callable[[float], float]) -> Callable[[Arg], np.ndarray]:
    """A function numpy lacks: the C library's (Python's math), in f64, rounded once to the
    dtype np.exp gives the argument."""
    each = np.frompyfunc(fn, 1, 1)

    def f(x: Arg) -> np.ndarray:
        dtype = np.exp(np.zeros((), dtype=np.asarray(x).dtype)).dtype
        return np.asarray(each(np.asarray(x, dtype=np.float64)), dtype=np.float64).astype(dtype)

    return f


erf, erfc = _via_f64(math.erf), _via_f64(math.erfc)


def gelu(x: Arg) -> np.ndarray:
    """x * Phi(x) as `0.5*x * erfc(-x / sqrt(2))`, each step in f64, rounded once to the
    dtype np.tanh gives x."""
    dtype = np.tanh(np.zeros((), dtype=np.asarray(x).dtype)).dtype
    w = np.asarray(x, dtype=np.float64)
    return np.asarray(0.5 * w * erfc(-w / math.sqrt(2.0))).astype(dtype)


def fma(a: Arg, b: Arg, c: Arg) -> np.ndarray:
    """`a*b + c` rounded once, exactly (rational arithmetic), in the promoted float dtype."""
    dt = _common(a, b, c)
    if dt.kind != "f":
        raise TypeError(f"fma needs float operands, got {dt}")
    a, b, c = np.broadcast_arrays(_as(a, dt), _as(b, dt), _as(c, dt))
    out = np.empty(a.shape, dt)
    for idx in np.ndindex(a.shape):
        out[idx] = _fma1(float(a[idx]), float(b[idx]), float(c[idx]), dt)
    return out


def _fma1(a: float, b: float, c: float, dt: np.dtype) -> float:
    if not all(map(math.isfinite, (a, b, c))):
        return a * b + c  # specials: the exact and the rounded computation agree
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # IEEE: the sum of a zero product and c is -0 only if both are -0
        product_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0 and a * b == 0
        return -0.0 if product_neg and math.copysign(1, c) < 0 else 0.0
    return _round_fraction(exact, dt)


def _round_fraction(q: Fraction, dt: np.dtype) -> float:
    """`q` correctly rounded to `dt` (round to nearest even, overflow to inf)."""
    try:
        r = float(q)  # correctly rounded to float64 (CPython divides exactly)
    except OverflowError:
        return math.inf if q > 0 else -math.inf
    if dt == np.float64 or Fraction(r) == q:
        return float(np.asarray(r).astype(dt))
    # round to odd in float64, then to the narrower type: exact because 53 >= p + 2
    if int(np.asarray(r).view(np.int64)) & 1 == 0:
        r = math.nextafter(r, math.inf if Fraction(r) < q else -math.inf)
    return float(np.asarray(r).astype(dt))


def clip(x: Arg, lo: Arg, hi: Arg) -> np.ndarray:
    """`minimum(maximum(x, lo), hi)`, the DSL's definition (docs/dsl.md, Decisions): equal to
    np.clip except for the sign of a zero, where np.clip disagrees with np.maximum."""
    return np.minimum(np.maximum(x, lo), hi)


# ------------------------------------------------------------------------------ Atlas
def _ints(x: Arg) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"Atlas functions take integers, got {x.dtype}")
    return x.astype(np.int64)  # u64 above 2**63 wraps negative: still out of range


def _valid(c: np.ndarray) -> np.ndarray:
    return (c >= 0) & (c < atlas.NUM_CLASSES)


def atlas_class(b: Arg) -> np.ndarray:
    low = _ints(b) & 0xFF  # two's complement low byte, also for negative values
    return atlas.BYTE_CLASS_TABLE[low].astype(np.int32)


def _table(table: np.ndarray, missing: Any, dt: type) -> Callable[[Arg], np.ndarray]:
    def op(c: Arg) -> np.ndarray:
        c = _ints(c)
        ok = _valid(c)
        return np.where(ok, table[np.where(ok, c, 0)], missing).astype(dt)

    return op


def neighbor(c: Arg, k: Arg) -> np.ndarray:
    c, k = np.broadcast_arrays(_ints(c), _ints(k))
    ok = _valid(c) & (k >= 0) & (k < atlas.NEIGHBOR_TABLE.shape[1])
    return np.where(ok, atlas.NEIGHBOR_TABLE[np.where(ok, c, 0), np.where(ok, k, 0)], -1).astype(np.int32)


def bound_map(c: Arg, page: Arg, byte: Arg) -> np.ndarray:
    return _ints(c) * atlas.CLASS_STRIDE + _ints(page) * atlas.BYTES_PER_PAGE + _ints(byte)


@_quiet
def resonance(classes: Arg, values: Arg) -> np.ndarray:
    """96 bins; bin c holds the sum of the values whose class is c (dtype: numpy's sum of values)."""
    c, v = np.broadcast_arrays(_ints(classes), np.asarray(values))
    bad = ~_valid(c)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ExecutionError(f"resonance: class {int(c[first])} at index {first} is outside 0..95")
    return add_at((atlas.NUM_CLASSES,), np.sum(np.zeros(0, v.dtype)).dtype, (c,), v)


def add_at(shape: tuple[int, ...], dtype: np.dtype, index: tuple[Arg, ...], values: Arg) -> np.ndarray:
    """The DSL's scatter-add `h[index] += values` into `h = zeros(shape, dtype)`:
    `np.add.at` with numpy's integer-array indexing (negative indices count from the
    end; one outside raises ExecutionError), duplicates accumulating. Values are cast to
    `dtype` first; integers wrap; floats are the exact sum in f64 of the cast terms,
    rounded once (numpy's add.at adds in dtype one value at a time: an f16 bin stalls at 2048)."""
    dtype = np.dtype(dtype)
    ix = tuple(np.asarray(i) for i in index)
    arrays = np.broadcast_arrays(*ix, np.asarray(values))
    ix, v = tuple(a.ravel() for a in arrays[:-1]), arrays[-1].ravel()
    for k, (i, dim) in enumerate(zip(ix, shape)):
        if i.dtype.kind not in "iu":
            raise TypeError(f"scatter indices are integers, got {i.dtype}")
        if i.dtype == np.uint64 and i.size and int(i.max()) > np.iinfo(np.int64).max:
            bad = int(i.max())
        else:
            wide = i.astype(np.int64)
            outside = (wide < -dim) | (wide >= dim)
            bad = int(wide[outside][0]) if outside.any() else None
        if bad is not None:
            raise ExecutionError(f"scatter: index {bad} is out of bounds for dimension {k} of size {dim}")
    with np.errstate(all="ignore"):
        terms = v.astype(dtype)
        if dtype.kind == "f":
            wide_out = np.zeros(shape, np.float64)
            np.add.at(wide_out, tuple(i.astype(np.int64) for i in ix), terms.astype(np.float64))
            return wide_out.astype(dtype)
        out = np.zeros(shape, dtype)
        np.add.at(out, tuple(i.astype(np.int64) for i in ix), terms)
        return out


# ------------------------------------------------------------------------- reductions
REDUCTIONS = ("sum", "prod", "min", "max", "mean", "argmin", "argmax", "any", "all")
_NO_IDENTITY = {"min": "minimum", "max": "maximum", "argmin": "argmin", "argmax": "argmax"}


def reduced_axes(x: np.ndarray, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    """The sorted, non-negative axes a reduction over `axis` removes."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % x.ndim for a in axes))


@_quiet
def reduce(kind: str, x: Arg, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> np.ndarray:
    """numpy's reduction `kind` over `axis` (None: everything; a tuple: several axes).

    argmin/argmax over several axes (or everything) give the flat row-major index within
    the reduced axes, first occurrence, NaN counting as the extreme (numpy's rules).
    """
    x = np.asarray(x)
    axes = reduced_axes(x, axis)
    extent = math.prod(x.shape[a] for a in axes)
    if kind in _NO_IDENTITY and extent == 0:
        raise ExecutionError(f"zero-size array to reduction operation {_NO_IDENTITY[kind]} which has no identity")
    if kind in ("argmin", "argmax"):
        kept = [a for a in range(x.ndim) if a not in axes]
        flat = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [extent])
        idx = getattr(np, kind)(flat, axis=-1).astype(np.int64)
        if keepdims:
            idx = np.expand_dims(idx, axes)
        return idx
    fn = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "mean": np.mean, "any": np.any,
          "all": np.all}[kind]
    if kind in ("sum", "prod", "mean") and x.dtype.kind == "f":
        return _rounded_once(fn, x, axes, keepdims)
    return fn(x, axis=None if axis is None else axes, keepdims=keepdims)


def _rounded_once(fn: Callable[..., Any], x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> Any:
    """`fn` (np.sum, np.prod or np.mean) of the float array `x` over `axes`, in numpy's
    result dtype: the terms in f64, reduced along one contiguous axis, rounded once.

    numpy's own answer is not always within the contract: it sums pairwise only along a
    contiguous axis (an f16 column sum adds one row at a time and stops growing at 2048)
    and multiplies f32 factors one at a time in f32 (~1000 ulp off after 2**20 factors
    near 1). f16 and f32 terms are exact in f64, and a pairwise f64 sum or an f64
    product of them errs far less than one rounding to their type."""
    out_dtype = fn(np.zeros(1, x.dtype)).dtype
    kept = [a for a in range(x.ndim) if a not in axes]
    extent = math.prod(x.shape[a] for a in axes)
    rows = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [extent])
    out = fn(rows.astype(np.float64), axis=-1)
    if keepdims:
        out = np.expand_dims(out, axes)
    return out.astype(out_dtype)


# ------------------------------------------------------------------------------ scans
SCANS = {"cumsum": "sum", "cumprod": "prod"}


@_quiet
def scan(kind: str, x: Arg, axis: int | None = None) -> np.ndarray:
    """numpy's `cumsum` (kind "sum") or `cumprod` ("prod") over the flattened array (`axis`
    None; a scalar is one element) or along `axis`, in numpy's result dtype; integers wrap.

    Float prefixes are each rounded once from a more accurate value, not numpy's running
    value in the input type (which, like its f16 sum, stalls at 2048): f16 and f32 terms
    accumulated in f64 (exact terms, so every prefix errs far less than one rounding to
    their type), f64 sums compensated (`_compensated_prefix`); f64 products are numpy's."""
    x = np.asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    out_dtype = getattr(np, f"cum{kind}")(np.zeros(1, x.dtype)).dtype
    fn = np.cumsum if kind == "sum" else np.cumprod
    if out_dtype.kind != "f":
        return fn(x, axis=axis, dtype=out_dtype)
    if out_dtype != np.float64:
        return fn(x.astype(np.float64), axis=axis).astype(out_dtype)
    if kind == "prod":
        return fn(x, axis=axis)
    rows = np.moveaxis(x, axis, -1)
    flat = rows.reshape(math.prod(rows.shape[:-1]), rows.shape[-1])
    return np.moveaxis(_compensated_prefix(flat).reshape(rows.shape), -1, axis)


def _compensated_prefix(x: np.ndarray) -> np.ndarray:
    """The running sums of each row of the f64 matrix `x`, each within a few eps * sum|x|
    of the exact prefix, in O(sqrt(n)) numpy steps: Neumaier's compensated sum along
    blocks of about sqrt(n) values (all blocks side by side), then along the block totals
    for each block's offset. Where numpy's plain running sum is inf or NaN (an inf or NaN
    term, or an overflow) it is the answer, as the compensation is then meaningless; so
    is its zero, whose sign is numpy's."""
    rows, n = x.shape
    if n == 0 or rows == 0:
        return x.copy()
    size = max(1, math.isqrt(n))
    blocks = -(-n // size)
    padded = np.zeros((rows, blocks * size))
    padded[:, :n] = x
    local = _neumaier(padded.reshape(rows, blocks, size))  # (sum, compensation) in each block
    totals = (local[0][..., -1], local[1][..., -1])
    # offsets: the totals of the blocks before each, compensated in turn
    hi, lo = _neumaier(np.stack([totals[0], totals[1]], -1).reshape(rows, 2 * blocks))
    off_hi = np.concatenate([np.zeros((rows, 1)), hi[:, 1::2][:, :-1]], 1)
    off_lo = np.concatenate([np.zeros((rows, 1)), lo[:, 1::2][:, :-1]], 1)
    a, b = off_hi[..., None], local[0]
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)  # TwoSum: s + err is a + b exactly
    out = (s + (err + off_lo[..., None] + local[1])).reshape(rows, -1)[:, :n]
    plain = np.cumsum(x, axis=-1)
    # numpy's running sum also gives the sign of a zero (-0.0 while every term is -0.0)
    return np.where(~np.isfinite(plain) | ((out == 0) & (plain == 0)), plain, out)


def _neumaier(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(running sum, running compensation) along the last axis: the prefix is their sum."""
    s, c = np.zeros(x.shape), np.zeros(x.shape)
    acc, comp = np.zeros(x.shape[:-1]), np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        v = x[..., k]
        t = acc + v
        comp = comp + np.where(np.abs(acc) >= np.abs(v), (acc - t) + v, (v - t) + acc)
        acc = t
        s[..., k], c[..., k] = acc, comp
    return s, c


# ------------------------------------------------------------------------------ table
def _instruction_functions() -> dict[str, Callable[..., Any]]:
    """The DSL functions that are one instruction (the op table's), each numpy's function
    of its name; the table below defines those numpy lacks or answers otherwise."""
    return {f.name: getattr(np, f.name) for spec in OPCODES.values() for f in spec.dsl if hasattr(np, f.name)}


ORACLE: dict[str, Callable[..., np.ndarray]] = {name: _quiet(fn) for name, fn in {
    **_instruction_functions(),
    # operators, as written in the DSL
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "//": _by_zero_is_zero(np.floor_divide), "%": _by_zero_is_zero(np.remainder), "**": power,
    "neg": np.negative, "pos": np.positive,
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
    "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor, "~": np.invert,
    "<<": _shift(True), ">>": _shift(False),
    # numpy functions that are no instruction, or that the DSL defines where numpy does not
    "round": np.round, "sign": np.sign, "isnan": np.isnan, "fmod": _by_zero_is_zero(np.fmod), "power": power,
    "clip": clip, "where": np.where,
    # the DSL's own
    "rsqrt": rsqrt, "sigmoid": sigmoid, "relu": relu, "gelu": gelu, "fma": fma, "erf": erf, "erfc": erfc,
    # Atlas
    "atlas_class": atlas_class, "mirror": _table(atlas.MIRROR_TABLE, -1, np.int32),
    "degree": _table(atlas.DEGREE_TABLE, 0, np.int32), "is_unity": _table(atlas.UNITY_TABLE, False, np.bool_),
    "neighbor": neighbor, "bound_map": bound_map, "resonance": resonance,
}.items()}
