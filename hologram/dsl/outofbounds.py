"""The compile-time warning for an access out of bounds at every size (docs/dsl.md, decision 15).

`y[i] = x[i + 1]` over `x, y: f32[n]` reads `x[n]` at the last `i` whatever `n` is. It
cannot be an error: such a kernel runs at `n = 0` (nothing is read), and a fused
temporary may be computed over a range whose out-of-bounds end is never used. So it is a
`CompileWarning` naming the line and the fix, which the analyzer raises for an
index-notation statement into a declared output: for an affine access whose variables all
have known ranges, the largest and the smallest index over the domain are affine in the
shape symbols, and the warning fires when the index leaves the dimension at every size at
which the domain is not empty. The analyzer leaves out accesses inside a `where` branch
(guarded: the lowering evaluates only the chosen side).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from hologram.core.errors import CompileWarning, Span
from hologram.core.types import Affine


@attrs.frozen
class Access:
    """An affine access: `index` on dimension `axis` of `array` (of `shape`). `ranges`
    holds each index variable in `index` (by IR name) with its range, None when unknown;
    the other terms of `index` are shape symbols. `written` names the variables as written."""

    array: str
    axis: int
    shape: tuple[Affine, ...]
    index: Affine
    ranges: Mapping[str, Affine | None]
    written: Mapping[str, str]
    span: Span


@attrs.frozen
class Target:
    """The statement's output: name, dtype (text), shape and its variables (IR names)."""

    name: str
    dtype: str
    shape: tuple[Affine, ...]
    vars: tuple[str, ...]


def always_out_of_bounds(accesses: Sequence[Access], target: Target) -> list[CompileWarning]:
    """A warning for each access of `accesses` (of one statement into `target`) that is
    out of bounds at every size at which the statement runs."""
    out: list[CompileWarning] = []
    for a in accesses:
        variables = [(v, c) for v, c in a.index.terms if v in a.ranges]
        if not variables or any(a.ranges[v] is None for v, _ in variables):
            continue
        ranges = {v: a.ranges[v] for v, _ in variables}
        lower = _lower_bounds(list(ranges.values()))
        rest = a.index - _sum(Affine.of(v) * c for v, c in variables)
        high = rest + _sum((ranges[v] - 1) * c for v, c in variables if c > 0)
        low = rest + _sum((ranges[v] - 1) * c for v, c in variables if c < 0)
        over, under = high - a.shape[a.axis], -low - 1
        if _always_nonnegative(over, lower):
            out.append(_past_end(a, variables, ranges, over, target))
        elif _always_nonnegative(under, lower):
            out.append(_before_start(a, variables, ranges))
    return out


def _sum(terms) -> Affine:
    total = Affine.of(0)
    for t in terms:
        total = total + t
    return total


def _always_nonnegative(f: Affine, lower: Mapping[str, int]) -> bool:
    """Is `f >= 0` at every size with each symbol at least its lower bound? (sufficient:
    no negative coefficient, so `f` is least at the lower bounds)."""
    if any(c < 0 for _, c in f.terms):
        return False
    return f.const + sum(c * lower.get(s, 0) for s, c in f.terms) >= 0


def _lower_bounds(extents: Sequence[Affine]) -> dict[str, int]:
    """The least value of each symbol at which every extent of one symbol is >= 1
    (`c*s + k >= 1`); the statement runs only there. Other symbols: 0."""
    lower: dict[str, int] = {}
    for e in extents:
        if len(e.terms) == 1 and e.terms[0][1] > 0:
            s, c = e.terms[0]
            lower[s] = max(lower.get(s, 0), -((e.const - 1) // c))  # ceil((1 - k) / c)
    return lower


def _at(a: Access, variables: Sequence[tuple[str, int]], ranges: Mapping[str, Affine], last: bool) -> str:
    return ", ".join(f"{a.written[v]} = {ranges[v] - 1 if (c > 0) == last else 0}" for v, c in variables)


def _past_end(a: Access, variables: Sequence[tuple[str, int]], ranges: Mapping[str, Affine], over: Affine,
              target: Target) -> CompileWarning:
    hint = "guard the access with where(...), or make the output smaller"
    positive = [(v, c) for v, c in variables if c > 0 and v in target.vars]
    if len(positive) == 1:  # fewer values of that target variable: the others stay at their largest
        v, c = positive[0]
        fewer = (over + c).floordiv(c)  # the last `fewer` values of v read past the end
        if fewer is not None:
            k = target.vars.index(v)
            shape = target.shape[:k] + (target.shape[k] - fewer,) + target.shape[k + 1:]
            hint = (f"declare {target.name}: {target.dtype}[{', '.join(map(str, shape))}], or guard the access "
                    f"with where(...)")
    return CompileWarning(
        f"'{a.array}' is indexed past its end at {_at(a, variables, ranges, True)} for every size: the index "
        f"reaches {a.shape[a.axis] + over} on dimension {a.axis} of '{a.array}' ({a.shape[a.axis]}), so a call "
        f"that runs this statement raises an ExecutionError", a.span, hint)


def _before_start(a: Access, variables: Sequence[tuple[str, int]], ranges: Mapping[str, Affine]) -> CompileWarning:
    return CompileWarning(
        f"'{a.array}' is indexed before its start at {_at(a, variables, ranges, False)} for every size (an index "
        f"with variables never wraps; only a constant like -1 counts from the end), so a call that runs this "
        f"statement raises an ExecutionError", a.span, "shift the index to start at 0, or guard the access with "
                                                       "where(...)")


__all__ = ["Access", "Target", "always_out_of_bounds"]
