"""Reductions carried across chunks: init, accumulate, combine, finalize.

A full reduction over the streamed dimension is computed in four parts:

| part | where | what |
|---|---|---|
| init | here | the state before any chunk (sum 0, prod 1; min, max, argmin, argmax and the online pair have no identity: their first chunk's partial is their state) |
| accumulate | the pass kernel, on the backend | one chunk's partial (`Reduction.partials`), over the chunk's rows in the pool |
| combine | here, in chunk order | the state merged with a chunk's partial |
| finalize | here | the state as the reduction's dtype |

A scan along the streamed dimension (`cumsum`, `cumprod`) keeps the same state, but its
use is the *carry*: the state before a chunk, which the pass kernel adds to (multiplies
into) that chunk's own scan; it finalizes to nothing.

Combining in chunk order makes the result a function of the chunk boundaries alone,
which `pool_bytes` fixes: the same pool gives the same bits. Floating sums combine in
f64 with Neumaier's compensation (the chunks' partials are f64 sums already), so the
combination adds no error the in-memory sum would not have, whatever the number of
chunks: a sum of 10^9 f32 values in chunks of 10^6 is within the accuracy contract
where adding the chunk sums in f32 would not be. Products combine in f64, integers in
their own dtype (wrapping, as the kernel's integer arithmetic does), min and max as
numpy's `minimum`/`maximum` (NaN propagates). argmin/argmax keep the first index of the
best value over the whole call, a chunk's index offset by the elements before it
(`first_row * scale`), a NaN winning as numpy's does. The online pair keeps the max `M`
and `S = sum(exp(v - M))`, rescaling both sides to the larger max as a chunk arrives:
`S = S * exp(M - M') + s_c * exp(m_c - M')`, where a side whose max is -inf (every value
-inf) contributes nothing once the max is finite, as `exp(-inf - M')` is 0 in the
in-memory form.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from hologram.streaming.plan import Reduction


class Reducer(ABC):
    """One reduction's state across the chunks of a pass (module docstring)."""

    def __init__(self, red: Reduction, shape: tuple[int, ...], scale: int = 1):
        self.red, self.shape, self.scale = red, shape, scale
        self.seen = False
        self.state: list[np.ndarray] = []

    def combine(self, partials: Sequence[np.ndarray], first_row: int) -> None:
        with np.errstate(all="ignore"):
            if not self.seen:
                self.state = self.first([np.array(p, copy=True) for p in partials], first_row)
                self.seen = True
            else:
                self.merge([np.asarray(p) for p in partials], first_row)

    def first(self, partials: list[np.ndarray], first_row: int) -> list[np.ndarray]:
        return partials

    @abstractmethod
    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        """Combine the state with one more chunk's partials (in chunk order)."""

    def absorb(self, later: "Reducer") -> None:
        """Combine the state with `later`'s, the state of the chunks after this one's (a
        tree of merges, hologram.dask: in chunk order, so the result is a function of the
        chunks alone). A side that saw no chunk is nothing to add."""
        if not later.seen:
            return
        if not self.seen:
            self.state, self.seen = later.state, True
            return
        with np.errstate(all="ignore"):
            self.join(later.state)

    def join(self, later: list[np.ndarray]) -> None:
        """`absorb` of two seen states: for most kinds, a state is a chunk's partials."""
        self.merge(later, 0)

    def finalize(self) -> dict[str, np.ndarray]:
        """The reduction's value (and its companion's, for the online pair), as the
        target's dtype; the identity when no chunk came (sum and prod only: the others
        are refused before the pass, as numpy refuses an empty max)."""
        with np.errstate(all="ignore"):
            return self.result()

    def result(self) -> dict[str, np.ndarray]:
        return {self.red.target: self.state[0].astype(self.red.dtype.np)}


def _neumaier(s: np.ndarray, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`s + x` with the rounding error added into the compensation `c` (where the sum is
    finite; an inf or NaN sum carries no meaningful error and needs none)."""
    t = s + x
    err = np.where(np.abs(s) >= np.abs(x), (s - t) + x, (x - t) + s)
    return t, c + np.where(np.isfinite(t), err, 0.0)


class Sum(Reducer):
    """Float sums (f64 partials, compensated) and integer sums (wrapping); scatter-adds too."""

    def __init__(self, red: Reduction, shape: tuple[int, ...], scale: int = 1):
        super().__init__(red, shape, scale)
        wide = np.float64 if red.dtype.is_float else red.dtype.np
        self.state = [np.zeros(shape, wide), np.zeros(shape, wide)]
        self.seen = True  # the identity is the state

    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        s, c = self.state
        if self.red.dtype.is_float:
            self.state = list(_neumaier(s, c, partials[0]))
        else:
            self.state = [s + partials[0].astype(s.dtype), c]

    def join(self, later: list[np.ndarray]) -> None:
        s, c = self.state
        if self.red.dtype.is_float:
            s, c = _neumaier(s, c, later[0])
            self.state = [s, c + later[1]]
        else:
            self.state = [s + later[0], c]

    def result(self) -> dict[str, np.ndarray]:
        s, c = self.state
        total = s + c if self.red.dtype.is_float else s
        return {self.red.target: np.asarray(total).astype(self.red.dtype.np)}


class Prod(Reducer):
    def __init__(self, red: Reduction, shape: tuple[int, ...], scale: int = 1):
        super().__init__(red, shape, scale)
        self.state = [np.ones(shape, np.float64 if red.dtype.is_float else red.dtype.np)]
        self.seen = True

    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        self.state = [self.state[0] * partials[0].astype(self.state[0].dtype)]


class MinMax(Reducer):
    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        pick = np.maximum if self.red.kind == "max" else np.minimum
        self.state = [pick(self.state[0], partials[0])]


class Arg(Reducer):
    """argmin/argmax: (flat index over the whole call, the value there)."""

    def first(self, partials: list[np.ndarray], first_row: int) -> list[np.ndarray]:
        return [partials[0] + np.int64(first_row) * self.scale, partials[1]]

    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        index, value = self.state
        at, v = partials
        better = v > value if self.red.kind == "argmax" else v < value
        if value.dtype.kind == "f":  # the first NaN wins, as in numpy
            better = better | (np.isnan(v) & ~np.isnan(value))
        self.state = [np.where(better, at + np.int64(first_row) * self.scale, index), np.where(better, v, value)]


class Online(Reducer):
    """The online max-and-sum: (M, S, compensation) with S = sum(exp(v - M)) in f64."""

    def first(self, partials: list[np.ndarray], first_row: int) -> list[np.ndarray]:
        m, s = partials
        return [m, s.astype(np.float64), np.zeros(s.shape, np.float64)]

    def merge(self, partials: list[np.ndarray], first_row: int) -> None:
        m, s = partials
        self.join([m, s.astype(np.float64), np.zeros(s.shape, np.float64)])

    def join(self, later: list[np.ndarray]) -> None:
        big, total, comp = self.state
        m, s, c = later
        top = np.maximum(big, m)
        wide = top.astype(np.float64)
        finite = wide > -np.inf

        def rescaled(x: np.ndarray, own: np.ndarray) -> np.ndarray:
            own = own.astype(np.float64)
            return np.where((own == -np.inf) & finite, 0.0, x * np.exp(own - wide))

        total, comp = rescaled(total, big), rescaled(comp, big)
        total, comp = _neumaier(total, comp, rescaled(s, m))
        self.state = [top, total, comp + rescaled(c, m)]

    def result(self) -> dict[str, np.ndarray]:
        big, total, comp = self.state
        assert self.red.companion is not None
        return {self.red.companion: np.asarray(big).astype(self.red.dtype.np),
                self.red.target: np.asarray(total + comp).astype(self.red.dtype.np)}


class CarrySum(Sum):
    """A scan's carry (`cumsum` along the streamed dimension): the sum of every chunk
    before the next one, compensated in f64 for floats; nothing small at the end."""

    def carry(self) -> np.ndarray:
        s, c = self.state
        return np.asarray(s + c if self.red.dtype.is_float else s).astype(self.red.dtype.np)

    def result(self) -> dict[str, np.ndarray]:
        return {}


class CarryProd(Prod):
    """A `cumprod`'s carry: the product of every chunk before the next one."""

    def carry(self) -> np.ndarray:
        return np.asarray(self.state[0]).astype(self.red.dtype.np)

    def result(self) -> dict[str, np.ndarray]:
        return {}


KINDS: dict[str, type[Reducer]] = {"sum": Sum, "scatter": Sum, "prod": Prod, "min": MinMax, "max": MinMax,
                                   "argmin": Arg, "argmax": Arg, "online": Online,
                                   "cumsum": CarrySum, "cumprod": CarryProd}
CARRIES = frozenset({"cumsum", "cumprod"})  # the kinds whose state feeds the next chunk (a scan's carry)


def reducer(red: Reduction, shape: tuple[int, ...], scale: int = 1) -> Reducer:
    """The state of `red` before any chunk, for a target of `shape`."""
    return KINDS[red.kind](red, shape, scale)
