"""One index of one dimension, numpy style: the IR index expression and how it is checked.

An index is one of three things (docs/dsl.md, "Indices"; decision 15):

- a **constant** (`x[2]`, `m[i, -1]`): a negative one counts from the end, as in numpy,
  so `-1` on a dimension `n` is `n - 1`; checked at run time unless provably inside;
- **affine** in index variables and shape symbols (`x[i + 1]`, `x[n - 1 - i]`): never
  wraps (`x[i - 1]` at `i = 0` is out of bounds), checked by the access;
- anything else is a **fancy index** (computed: `x[idx[i]]`, `x[b[i] + 1]`, `x[i % 3]`):
  numpy's integer-array indexing, so a negative value counts from the end (`v + dim`
  when `v < 0`) and a value still outside `0 .. dim-1` makes the access fail at run time
  (an ExecutionError naming the document line). Its dtype must be an integer; unsigned
  values above the i64 maximum are out of range.

`numpy_index` and `affine_index` give an `Index`; `flat_key` combines the indices of a
scatter target into the one flat element index an `Accumulate` takes. The lowering
decides its run-time checks from the IR alone (hologram.lower.expr `address`: an index
that depends on data is checked against its own dimension); `Index.check` says the same
for a front end that needs to know (the slicing code's whole-array `x[idx]` reuses this).
"""

from __future__ import annotations

import enum
from typing import Iterable, Sequence

import attrs

from hologram.core.errors import MISSED_DIMENSION, CompileError, Span
from hologram.core.types import Affine, DType, Shape
from hologram.dsl.shapes import dim_expr, index_expr
from hologram.ir import Expr

I64 = DType.I64


class Check(enum.Enum):
    NONE = "none"  # provably inside its dimension: no run-time check
    BOUNDS = "bounds"  # a constant or affine index: the access is checked (never wraps)
    OWN = "own"  # a fancy index: checked at run time against its own dimension


@attrs.frozen
class Index:
    expr: Expr  # i64: the position along the dimension (when inside it)
    check: Check


def constant_index(value: int, dim: Affine) -> Index:
    """`x[c]`: a negative constant counts from the end (`x[-1]` is `x[dim - 1]`)."""
    pos = dim + value if value < 0 else Affine.of(value)
    inside = pos.is_const and dim.is_const and 0 <= pos.const < dim.const
    return Index(dim_expr(pos), Check.NONE if inside else Check.BOUNDS)


def affine_index(a: Affine, dim: Affine, variables: Iterable[str]) -> Index:
    """An affine index over IR index variables and shape symbols; a constant one may be
    negative and then counts from the end, any other never wraps."""
    if a.is_const:
        return constant_index(a.const, dim)
    return Index(index_expr(a, frozenset(variables)), Check.BOUNDS)


def numpy_index(value: Expr | int, dim: Affine, span: Span | None = None) -> Index:
    """Dimension `dim` indexed by `value` with numpy's meaning: a constant (a Python int
    or CONST) by `constant_index`, any other integer expression as a fancy index. Bool
    and float values are CompileErrors at `span` (a bool array is a mask, not an index)."""
    if isinstance(value, Expr) and value.op == "CONST" and value.dtype.is_int:
        value = int(value.arg)
    if isinstance(value, int) and not isinstance(value, bool):
        if not I64.min <= value <= I64.max:
            raise CompileError(f"the index {value} is too large for i64", span)
        return constant_index(value, dim)
    t = value.dtype
    if t.is_bool:
        raise CompileError("an index must be an integer; this one is a bool", span,
                           hint="a boolean mask selects elements: write where(mask, x, 0) (numpy's x[mask] has a "
                                "data-dependent shape), or index by i64(...) of it")
    if not t.is_int:
        raise CompileError(f"an index must be an integer; this one is {t}", span,
                           hint="convert it explicitly, e.g. x[i64(...)] (numpy refuses float indices)")
    v = value if t is I64 else Expr("CAST", I64, (value,))
    negative = Expr("CMPLT", DType.BOOL, (v, Expr.const(0, I64)))
    if t is DType.U64:  # above the i64 maximum: wrapped negative by the cast, out of range
        return Index(Expr("WHERE", I64, (negative, Expr.const(MISSED_DIMENSION, I64), v)), Check.OWN)
    if t.is_unsigned:
        return Index(v, Check.OWN)
    return Index(Expr("WHERE", I64, (negative, Expr("ADD", I64, (v, dim_expr(dim))), v)), Check.OWN)


def flat_key(index: Sequence[Expr], shape: Shape) -> Expr:
    """The flat (row-major) element index of `index` (one i64 expression per dimension)
    into an array of `shape`, for a checked scatter. A dimension's index that may be
    outside it makes the key MISSED_DIMENSION when it is, out of range for the checked access rather
    than a wrap into another row: every index but an index variable (whose range the
    analyzer took from this dimension) and a constant inside a constant dimension; on
    dim 0 only one computed from data, whose product with the stride could overflow."""
    if len(index) == 1:
        return index[0]
    flat: Expr | None = None
    ok: Expr | None = None
    for k, (ix, dim) in enumerate(zip(index, shape)):
        flat = ix if flat is None else Expr("ADD", I64, (Expr("MUL", I64, (flat, dim_expr(dim))), ix))
        inside = ix.op == "IDX" or ix.op == "CONST" and dim.is_const and 0 <= ix.arg < dim.const
        if inside or k == 0 and not any(n.op in ("LOAD", "SCALAR") for n in ix.walk()):
            continue
        test = Expr("AND", DType.BOOL, (Expr("CMPGE", DType.BOOL, (ix, Expr.const(0, I64))),
                                        Expr("CMPLT", DType.BOOL, (ix, dim_expr(dim)))))
        ok = test if ok is None else Expr("AND", DType.BOOL, (ok, test))
    assert flat is not None
    return flat if ok is None else Expr("WHERE", I64, (ok, flat, Expr.const(MISSED_DIMENSION, I64)))


__all__ = ["Check", "Index", "affine_index", "constant_index", "flat_key", "numpy_index"]
