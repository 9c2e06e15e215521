"""Hypothesis strategies for test data, biased toward the values that break kernels.

Every strategy mixes ordinary values with each dtype's edge values: NaN, +-inf, -0.0,
subnormals, the largest finite value, the overflow thresholds of `exp`; for integers the
extremes, their neighbours, 0, +-1 and the shift-width boundaries; shapes include empty
and length-1 dimensions. `dtype` arguments accept a `DType`, a numpy dtype or its name.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hologram.core.types import DType

__all__ = ["as_dtype", "edge_values", "scalars", "arrays", "shapes", "dtypes"]

DTypeLike = DType | np.dtype | type | str


def as_dtype(dtype: DTypeLike) -> np.dtype:
    """The numpy dtype for a `DType`, a DSL type name (`f32`) or anything numpy accepts."""
    if isinstance(dtype, DType):
        return dtype.np
    if isinstance(dtype, str):
        try:
            return DType.parse(dtype).np
        except ValueError:
            pass
    return np.dtype(dtype)


@lru_cache(maxsize=None)
def _edges(dt: np.dtype) -> tuple[np.generic, ...]:
    t = dt.type
    if dt.kind == "b":
        return (t(False), t(True))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        bits = info.bits
        raw = {0, 1, 2, info.max, info.max - 1, info.min, info.min + 1, bits - 1, bits, bits + 1,
               95, 96, 127, 128, 255, 256, -1, -2, -bits}
        return tuple(t(v) for v in sorted(raw) if info.min <= v <= info.max)
    info = np.finfo(dt)
    tiny, big = float(info.tiny), float(info.max)
    sub = float(info.smallest_subnormal)
    exp_limit = math.log(big)  # exp overflows just above this
    raw = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, math.pi, float(info.eps), 1.0 + float(info.eps),
           1.0 - float(info.epsneg), tiny, -tiny, sub, -sub, tiny - sub, big, -big,
           exp_limit, -exp_limit, float("inf"), float("-inf"), float("nan")]
    return tuple(t(v) for v in raw)


def edge_values(dtype: DTypeLike) -> tuple[np.generic, ...]:
    """The edge values of `dtype`, as numpy scalars of that dtype."""
    return _edges(as_dtype(dtype))


def _elements(dt: np.dtype, edges: bool, allow_nan: bool, allow_infinity: bool,
              min_value: float | None, max_value: float | None) -> st.SearchStrategy:
    bounded = min_value is not None or max_value is not None
    if dt.kind == "f":
        base = hnp.from_dtype(dt, allow_nan=allow_nan and not bounded,
                              allow_infinity=allow_infinity and not bounded,
                              min_value=min_value, max_value=max_value)
    else:
        base = hnp.from_dtype(dt, min_value=min_value, max_value=max_value) if dt.kind != "b" else hnp.from_dtype(dt)
    if not edges:
        return base

    def keep(v: np.generic) -> bool:
        if dt.kind == "f":
            f = float(v)
            if math.isnan(f):
                return allow_nan and not bounded
            if math.isinf(f) and not allow_infinity:
                return False
        if dt.kind != "b":
            if min_value is not None and not v >= min_value:
                return False
            if max_value is not None and not v <= max_value:
                return False
        return True

    picks = [v for v in _edges(dt) if keep(v)]
    return st.one_of(st.sampled_from(picks), base) if picks else base


def scalars(dtype: DTypeLike, *, edges: bool = True, allow_nan: bool = True, allow_infinity: bool = True,
            min_value: float | None = None, max_value: float | None = None) -> st.SearchStrategy[np.generic]:
    """Numpy scalars of `dtype`; about half are edge values when `edges` is true."""
    dt = as_dtype(dtype)
    return _elements(dt, edges, allow_nan, allow_infinity, min_value, max_value).map(dt.type)


def arrays(dtype: DTypeLike, shape: int | Sequence[int] | st.SearchStrategy, *, edges: bool = True,
           allow_nan: bool = True, allow_infinity: bool = True, min_value: float | None = None,
           max_value: float | None = None) -> st.SearchStrategy[np.ndarray]:
    """C-contiguous arrays of `dtype` whose elements mix edge and ordinary values.

    `shape` is an int, a tuple or a strategy of tuples (e.g. `shapes()`).
    """
    dt = as_dtype(dtype)
    elements = _elements(dt, edges, allow_nan, allow_infinity, min_value, max_value)
    if isinstance(shape, int):
        shape = (shape,)
    shape_st = shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))
    return shape_st.flatmap(lambda s: hnp.arrays(dt, s, elements=elements, fill=st.nothing())).map(np.ascontiguousarray)


def shapes(*, min_dims: int = 0, max_dims: int = 2, min_side: int = 0, max_side: int = 6) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes; sides favour 0 and 1, the sizes that break index arithmetic."""
    small = [s for s in (0, 1) if min_side <= s <= max_side]
    side = st.integers(min_side, max_side)
    if small:
        side = st.one_of(st.sampled_from(small), side)
    return st.integers(min_dims, max_dims).flatmap(lambda r: st.tuples(*[side] * r))


_KINDS = {"b": DType.is_bool, "i": DType.is_signed, "u": DType.is_unsigned, "f": DType.is_float}


def dtypes(kinds: str = "biuf") -> st.SearchStrategy[DType]:
    """DSL dtypes whose kind letter (b bool, i signed, u unsigned, f float) is in `kinds`."""
    picks = [d for d in DType if any(_KINDS[k].fget(d) for k in kinds)]
    return st.sampled_from(picks)
