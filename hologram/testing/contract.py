"""The accuracy contract: how close a backend's answer must be to numpy's.

One function, `assert_close`, is used by every test that compares numbers:

- integers and bool: bitwise equal.
- floats, `ulps=0` and no other allowance: bitwise equal, so NaN positions and the signs
  of zeros must match (NaN matches NaN whatever its payload).
- floats with an allowance: an element passes when it is bitwise equal, or its ULP
  distance to the expected value is at most `ulps`, or `|actual - expected|` is at most
  the absolute allowance (`bound` plus the reduction allowance). With any allowance,
  +0 and -0 are equal. The ULP metric counts representable values between the two, so
  infinity is one ULP past the largest finite value: an exp that overflows one ULP early
  is within 4 ULP, as it should be.

Reductions combine `n` terms in an order the backend chooses (pairwise, per-thread
partials). A blocked or pairwise sum of n terms errs by at most about
`ceil(log2 n) * eps * sum|x_i|`, and numpy's own answer carries a similar error, so two
conforming answers differ by at most `reduction_tolerance(n, dtype) * sum|x_i|`. The
caller passes `sum|x_i|` per output element as `magnitude` (it defaults to |expected|,
which is right for products and for sums of terms of one sign).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from hologram.core.errors import ArgumentError, HologramError

__all__ = ["AccuracyError", "assert_close", "reduction_tolerance", "ulp_distance", "ulp_step", "spacing"]

_MAX_REPORTED = 5


class AccuracyError(HologramError, AssertionError):
    """Values violate the accuracy contract (an AssertionError, so pytest reports it as a failure)."""


def ulp_distance(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Number of representable floats between `a` and `b` (same float dtype), as uint64.

    +0 and -0 are 0 apart; infinity is one past the largest finite value. NaN inputs give
    meaningless distances: test for NaN first.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise ArgumentError(f"ulp_distance needs two arrays of one float dtype, got {a.dtype} and {b.dtype}")
    oa, ob = _ordered(a), _ordered(b)
    # the true difference is below 2**64, so unsigned wrap-around subtraction is exact
    with np.errstate(over="ignore"):
        return np.maximum(oa, ob).astype(np.uint64) - np.minimum(oa, ob).astype(np.uint64)


def _ordered(x: np.ndarray) -> np.ndarray:
    """Map float bit patterns onto int64 so that adjacent floats are adjacent integers."""
    bits = x.dtype.itemsize * 8
    raw = np.array(x, order="C").view(f"i{x.dtype.itemsize}").astype(np.int64)
    mag = raw & ((1 << (bits - 1)) - 1)
    return np.where(raw < 0, -mag, mag)


def ulp_step(x: ArrayLike, k: int | ArrayLike) -> np.ndarray:
    """The float `k` ULPs above `x` (below for negative `k`), in x's dtype, stopping at +-inf.

    Steps walk the ordered line of representable values, so from +0 one step down is the
    smallest negative subnormal and from the largest finite value one step up is inf.
    """
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise ArgumentError(f"ulp_step needs a float array, got {x.dtype}")
    bits = x.dtype.itemsize * 8
    top = int(_ordered(np.asarray(np.inf, x.dtype)))
    o = np.clip(_ordered(x) + np.asarray(k, np.int64), -top, top)
    mag = np.abs(o).astype(np.uint64)
    raw = np.where(o < 0, mag | np.uint64(1 << (bits - 1)), mag).astype(f"u{x.dtype.itemsize}")
    out = raw.view(x.dtype).reshape(np.broadcast(x, np.asarray(k)).shape)
    return np.where(np.isnan(x), x, out)


def spacing(x: ArrayLike, dtype: np.dtype | type | str) -> np.ndarray:
    """The ULP of `|x|` in `dtype`, as float64 (the gap to the next value away from zero).

    Values beyond `dtype`'s range get the spacing of its largest value; NaN stays NaN.
    """
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    mag = np.minimum(np.abs(np.asarray(x, dtype=np.float64)), float(info.max))
    with np.errstate(all="ignore"):
        return np.spacing(mag.astype(dt)).astype(np.float64)


def reduction_tolerance(n: int, dtype: np.dtype | type | str) -> float:
    """Relative allowance (times sum|x_i|) for a reduction of `n` terms in `dtype`.

    `2 * (ceil(log2 n) + 1) * eps`: the pairwise-summation bound for each of two
    conforming answers, plus one rounding of the result.
    """
    eps = float(np.finfo(np.dtype(dtype)).eps)
    depth = math.ceil(math.log2(n)) if n > 1 else 0
    return 2.0 * (depth + 1) * eps


def assert_close(actual: ArrayLike, expected: ArrayLike, *, ulps: int | ArrayLike = 0,
                 reduction_n: int | None = None, magnitude: ArrayLike | None = None,
                 bound: float | ArrayLike | None = None, where: ArrayLike | None = None,
                 name: str = "value", context: str = "") -> None:
    """Raise `AccuracyError` unless `actual` meets the accuracy contract against `expected`.

    actual, expected  arrays (or scalars) of the same dtype and shape
    ulps          allowed ULP distance, a number or one per element (float dtypes only)
    reduction_n   the values are reductions of this many terms: adds
                  `reduction_tolerance(reduction_n, dtype) * magnitude` to the allowance
    magnitude     per-element `sum|x_i|` of the reduced terms (default |expected|)
    bound         absolute allowance per element (from error propagation), float64
    where         elements to compare; False marks values the contract leaves open
    name, context name the value and add text (e.g. the kernel source) to a failure
    """
    a, e = np.asarray(actual), np.asarray(expected)
    label = f"assert_close({name})"
    if a.shape != e.shape:
        _fail(f"{label}: shape {a.shape} differs from the expected shape {e.shape}", context)
    if a.dtype != e.dtype:
        _fail(f"{label}: dtype {a.dtype} differs from the expected dtype {e.dtype}", context)
    care = np.ones(e.shape, bool) if where is None else np.broadcast_to(np.asarray(where, bool), e.shape)
    if e.dtype.kind != "f":
        if ulps is not None and np.any(np.asarray(ulps) != 0) or bound is not None or reduction_n is not None:
            raise ArgumentError(f"{label}: integer and bool values are compared exactly; "
                                f"ulps, bound and reduction_n apply to floats only")
        bad = (a != e) & care
        if bad.any():
            _report(label, a, e, bad, np.where(bad, 1.0, 0.0), lambda idx: "", "exact", context)
        return
    ulp_allow = np.broadcast_to(np.asarray(ulps), e.shape)
    if ulp_allow.dtype.kind not in "iu" or np.any(ulp_allow < 0):
        raise ArgumentError(f"{label}: ulps must be non-negative integers, got {ulps!r}")
    abs_allow = np.zeros(e.shape)
    if bound is not None:
        abs_allow = abs_allow + np.broadcast_to(np.asarray(bound, np.float64), e.shape)
        if np.any(np.isnan(abs_allow)) or np.any(abs_allow < 0):
            raise ArgumentError(f"{label}: bound must be non-negative, got {bound!r}")
    if reduction_n is not None:
        if reduction_n < 0:
            raise ArgumentError(f"{label}: reduction_n must be >= 0, got {reduction_n}")
        mag = np.abs(e.astype(np.float64)) if magnitude is None else np.abs(np.asarray(magnitude, np.float64))
        abs_allow = abs_allow + reduction_tolerance(reduction_n, e.dtype) * np.broadcast_to(mag, e.shape)
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    same_bits = _ordered(a) == _ordered(e)
    same_bits &= np.signbit(a) == np.signbit(e)  # _ordered folds -0 onto +0
    loose = (ulp_allow > 0) | (abs_allow > 0)
    with np.errstate(all="ignore"):
        dist = ulp_distance(np.where(a_nan, 0, a).astype(e.dtype), np.where(e_nan, 0, e).astype(e.dtype))
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    ok = (a_nan & e_nan) | (~a_nan & ~e_nan & (same_bits | (loose & ((dist <= ulp_allow) | (diff <= abs_allow)))))
    bad = ~ok & care
    if not bad.any():
        return
    severity = np.where(a_nan != e_nan, np.inf, dist.astype(np.float64))

    def detail(idx: tuple[int, ...]) -> str:
        if a_nan[idx] != e_nan[idx]:
            return "NaN mismatch"
        if not loose[idx]:
            return f"not bitwise equal (ULP distance {int(dist[idx])})"
        return (f"ULP distance {int(dist[idx])} > {int(ulp_allow[idx])}, "
                f"|diff| {diff[idx]:.6g} > allowed {abs_allow[idx]:.6g}")

    rule = _describe(ulp_allow, abs_allow, reduction_n)
    _report(label, a, e, bad, severity, detail, rule, context)


def _describe(ulp_allow: np.ndarray, abs_allow: np.ndarray, reduction_n: int | None) -> str:
    parts = []
    if ulp_allow.size and ulp_allow.max() > 0:
        parts.append(f"<= {int(ulp_allow.max())} ulps")
    if reduction_n is not None:
        parts.append(f"reduction of {reduction_n} terms")
    if abs_allow.size and abs_allow.max() > 0 and reduction_n is None:
        parts.append("propagated error bound")
    return ", ".join(parts) or "bitwise"


def _fmt(x: Any) -> str:
    if isinstance(x, np.floating):
        bits = np.asarray(x).view(f"u{x.dtype.itemsize}")
        return f"{float(x)!r} (0x{int(bits):0{2 * x.dtype.itemsize}x})"
    return str(x.item() if isinstance(x, np.generic) else x)


def _report(label: str, a: np.ndarray, e: np.ndarray, bad: np.ndarray, severity: np.ndarray,
            detail: Any, rule: str, context: str) -> None:
    count, total = int(bad.sum()), bad.size
    order = np.argsort(np.where(bad, -severity, np.inf), axis=None, kind="stable")[:min(count, _MAX_REPORTED)]
    lines = [f"{label}: {count} of {total} elements differ (dtype {e.dtype}, shape {e.shape}; tolerance: {rule})"]
    for rank, flat in enumerate(order):
        idx = np.unravel_index(flat, e.shape) if e.shape else ()
        idx = tuple(int(i) for i in idx)
        why = detail(idx)
        head = "worst at" if rank == 0 else "     at"
        lines.append(f"  {head} index {idx}: actual {_fmt(a[idx])}, expected {_fmt(e[idx])}"
                     + (f" ({why})" if why else ""))
    _fail("\n".join(lines), context)


def _fail(message: str, context: str) -> None:
    raise AccuracyError(message + (f"\n{context}" if context else ""))
