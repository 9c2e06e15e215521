"""Symbolic integer intervals: the abstract values of the verifier's bounds analysis.

A bound is a `Poly`, a polynomial with integer coefficients over the program's shape
symbols (`n - 1`, `m*n - 1`), because the sizes a kernel indexes are products of symbolic
dimensions. An `Interval` says where a register's value lies: above every bound in `lo`
and below every bound in `hi`. Keeping a few bounds per side matters because symbolic
bounds do not always compare: after `if c >= 1` a counter set to `$k` is above both `k`
and `1`, and the loop that follows needs both. `Domain` decides inequalities between
bounds from what every launch guarantees (each declared dimension is >= 0 and a stage
that runs at all has every domain extent >= 1), so `[x + %i + 2]` on a domain of `n - 2`
lanes over `x: f32[n]` is proven because `(n - 3) + 2 <= n - 1`; and it implements the
arithmetic of intervals.

Machine integers wrap, mathematical ones do not. An interval is *exact* when the
register's actual value lies in it. Otherwise it is only *modular*: the value computed
with unbounded integers lies in it and the register holds that value modulo 2**bits.
`+ - *` commute with reduction modulo 2**bits, so a chain of them stays correct modulo;
and once a modular interval lies inside a type's range (say, a buffer's index range), the
register holds exactly that value. Operations that do not commute with wrapping (MIN,
DIV, SHR, comparisons) first forget a modular interval. This keeps the analysis sound
with one assumption about launches: every shape symbol is below 2**62 (SYMBOL_MAX).
"""

from __future__ import annotations

import itertools
import math
from typing import Iterable, Iterator, Mapping

import attrs

from hologram.core.types import Affine, DType

Monomial = tuple[str, ...]  # sorted symbol names, with repetition; () is the constant
# Launch contract: every shape symbol is below 2**62 (runtimes refuse larger bindings;
# no machine holds an array that large). It lets `n + 4` or `2*n` be proven free of
# i64 overflow, which clamps (MIN/MAX) after such arithmetic need.
SYMBOL_MAX = (1 << 62) - 1
# Limits that keep the analysis of any program cheap (docs/hasm.md, "Limits"). Ordinary
# kernels stay far below them (bounds of at most 4 terms, degree = the rank, about 1000
# bits in an unrolled integer power, prover work below 100 even at rank 64). Each gives
# up soundly: a bound past them is dropped or not proven, never trusted.
MAX_PROOF_WORK = 1 << 12  # (monomial, term) pairs the prover examines per bound
MAX_BOUND_TERMS = 32  # a bound with more terms, a higher degree or a wider coefficient is
MAX_BOUND_DEGREE = 64  # dropped from its interval: otherwise 30 squarings of `n + m + 1`
MAX_BOUND_BITS = 4096  # or of 3 would make a bound of 2**30 terms or bits


class TooComplex(Exception):
    """The analysis of a stage would exceed one of its work limits (the message says which)."""


class Meter:
    """The work one analysis may still do, in steps (a register copied, a prover term, a
    bound compared); `charge` raises TooComplex past the limit. Deterministic, so a
    program verifies or not regardless of the machine."""

    def __init__(self, limit: int):
        self.limit, self.spent = limit, 0

    def charge(self, steps: int) -> None:
        self.spent += steps
        if self.spent > self.limit:
            raise TooComplex(f"the bounds analysis needs more than {self.limit:,} steps")


@attrs.frozen(order=True, cache_hash=True)
class Poly:
    """`sum(coeff * monomial)`, terms sorted, zero coefficients dropped (canonical).
    Also the symbolic counts of hologram.passes.stats."""

    terms: tuple[tuple[Monomial, int], ...] = ()

    @staticmethod
    def make(acc: Mapping[Monomial, int]) -> "Poly":
        # int(): a numpy integer from a program field must not bring fixed-width overflow
        return Poly(tuple(sorted((m, int(c)) for m, c in acc.items() if c)))

    @staticmethod
    def const(c: int) -> "Poly":
        return Poly((((), int(c)),) if c else ())

    @staticmethod
    def sym(name: str) -> "Poly":
        return Poly((((name,), 1),))

    @staticmethod
    def of(a: Affine | int) -> "Poly":
        if not isinstance(a, Affine):
            return Poly.const(a)
        acc: dict[Monomial, int] = {(): a.const}
        for n, c in a.terms:  # summed: a repeated symbol must mean what the runtimes evaluate
            acc[(n,)] = acc.get((n,), 0) + c
        return Poly.make(acc)

    def __add__(self, other: "Poly | int") -> "Poly":
        o = other if isinstance(other, Poly) else Poly.const(other)
        acc = dict(self.terms)
        for m, c in o.terms:
            acc[m] = acc.get(m, 0) + c
        return Poly.make(acc)

    __radd__ = __add__

    def __neg__(self) -> "Poly":
        return Poly(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: "Poly | int") -> "Poly":
        return self + -(other if isinstance(other, Poly) else Poly.const(other))

    def __mul__(self, other: "Poly | int") -> "Poly":
        o = other if isinstance(other, Poly) else Poly.const(other)
        acc: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in o.terms:
                m = tuple(sorted(m1 + m2))
                acc[m] = acc.get(m, 0) + c1 * c2
        return Poly.make(acc)

    __rmul__ = __mul__

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def value(self) -> int:
        """The constant term (the whole value when `is_const`)."""
        return dict(self.terms).get((), 0)

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for m, _ in self.terms for s in m)

    def bind(self, symbols: Mapping[str, int]) -> "Poly":
        """Substitute the given symbols (the others stay symbolic)."""
        acc: dict[Monomial, int] = {}
        for m, c in self.terms:
            for s in m:
                if s in symbols:
                    c *= int(symbols[s])
            rest = tuple(s for s in m if s not in symbols)
            acc[rest] = acc.get(rest, 0) + c
        return Poly.make(acc)

    def __repr__(self) -> str:
        return f"Poly({str(self)!r})"

    def __str__(self) -> str:
        return self.text(sorted(self.terms, key=lambda t: (-len(t[0]), t[0])))

    def text(self, terms: Iterable[tuple[Monomial, int]]) -> str:
        """`terms` (this polynomial's, in the order to print them) as `4*m*n - n + 8`."""
        out = ""
        for m, c in terms:
            mono = "*".join(s if k == 1 else f"{s}^{k}" for s, k in _powers(m))
            mag = str(abs(c)) if not mono else (mono if abs(c) == 1 else f"{abs(c)}*{mono}")
            out += (("-" if c < 0 else "") + mag) if not out else (" - " if c < 0 else " + ") + mag
        return out or "0"


Terms = list[tuple[dict[str, int], int]]  # ({symbol: power}, coefficient) per term


def _shifted_coefficient(terms: Terms, want: Mapping[str, int], lower: Mapping[str, int]) -> int:
    """The coefficient of the monomial `want` ({symbol: power}) in `p(s' + lower)`: each
    term of `p` containing `want` adds its coefficient times the ways to choose the
    kept copies times the dropped copies' bounds."""
    total = 0
    for pw, c in terms:
        if any(pw.get(s, 0) < j for s, j in want.items()):
            continue
        for s, k in pw.items():
            j = want.get(s, 0)
            c *= math.comb(k, j) * lower[s] ** (k - j)
        total += c
    return total


def _contains(big: dict[str, int], small: dict[str, int]) -> bool:
    return all(big.get(s, 0) >= k for s, k in small.items())


def _negative_leader(p: Poly) -> bool:
    """Does `p` have a negative term whose monomial divides no other term's? Shifting the
    symbols leaves that term's coefficient as it is (only terms containing a monomial add
    to it), so `p >= 0` is refuted at once: the common case of `b - a` for bounds that
    do not compare, often of high degree."""
    terms = [(dict(_powers(m)), c) for m, c in p.terms]
    return any(c < 0 and not any(q is not pw and _contains(q, pw) for q, _ in terms) for pw, c in terms)


def _dominated(terms: Terms, lower: Mapping[str, int]) -> bool:
    """Is every negative term paid for by positive terms that contain it? With bounds
    >= 0, a term `C*M` adds at least `C * lb(M/m)` times what `c*m` takes from each
    coefficient of the shifted polynomial (binomials only grow), so if the positive
    terms' coefficients can be shared out to cover every negative one, no coefficient is
    negative. A sufficient test (greedy), exact when it says yes: `(d0 - 1)*d1*...*dk`
    is proven here in k steps where listing its 2**k shifted monomials would not be."""
    if any(lower[s] < 0 for pw, _ in terms for s in pw):
        return False
    left = [c for _, c in terms]  # what each positive term can still pay
    for pw, c in terms:
        need = -c
        for k, (big, _) in enumerate(terms):
            if need <= 0:
                break
            if left[k] > 0 and big is not pw and _contains(big, pw):
                rate = math.prod(lower[s] ** (j - pw.get(s, 0)) for s, j in big.items())
                if rate:
                    units = min(left[k], -(-need // rate))
                    left[k] -= units
                    need -= units * rate
        if need > 0:
            return False
    return True


def _powers(m: Monomial) -> list[tuple[str, int]]:
    """`('m', 'n', 'n')` -> `[('m', 1), ('n', 2)]` (a monomial is sorted)."""
    out: list[tuple[str, int]] = []
    for s in m:
        if out and out[-1][0] == s:
            out[-1] = (s, out[-1][1] + 1)
        else:
            out.append((s, 1))
    return out


Bounds = tuple[Poly, ...]  # sorted, no bound implied by another, at most MAX_BOUNDS
MAX_BOUNDS = 3


@attrs.frozen(cache_hash=True)
class Interval:
    """`max(lo) <= value <= min(hi)` (see the module docstring for `exact`)."""

    lo: Bounds
    hi: Bounds
    exact: bool = True

    @staticmethod
    def point(v: Poly | int) -> "Interval":
        p = v if isinstance(v, Poly) else Poly.const(v)
        return Interval((p,), (p,))

    @staticmethod
    def range(lo: Poly | int, hi: Poly | int) -> "Interval":
        as_poly = lambda v: v if isinstance(v, Poly) else Poly.const(v)  # noqa: E731
        return Interval((as_poly(lo),), (as_poly(hi),))

    @staticmethod
    def top(t: DType) -> "Interval":
        """Every value of integer type `t`."""
        return Interval.range(int(t.min), int(t.max))

    @property
    def const(self) -> int | None:
        """The value, when the interval is one known integer."""
        if len(self.lo) == len(self.hi) == 1 and self.lo == self.hi and self.lo[0].is_const:
            return self.lo[0].value
        return None

    def __str__(self) -> str:
        show = lambda b, f: str(b[0]) if len(b) == 1 else f"{f}({', '.join(map(str, b))})"  # noqa: E731
        return f"[{show(self.lo, 'max')}, {show(self.hi, 'min')}]"


def _within_limits(p: Poly) -> bool:
    """Is `p` small enough to keep as a bound (MAX_BOUND_TERMS, _DEGREE, _BITS)?"""
    return len(p.terms) <= MAX_BOUND_TERMS and all(
        len(m) <= MAX_BOUND_DEGREE and abs(c).bit_length() <= MAX_BOUND_BITS for m, c in p.terms)


def _rank(p: Poly) -> tuple:
    """Simpler bounds first: they are the ones later comparisons can use."""
    return (max((len(m) for m, _ in p.terms), default=0), len(p.terms), p.terms)


@attrs.frozen
class _Shifted:
    """What the prover needs of `q(s') = p(s' + lb)`, the bound `p` with every symbol
    moved to its lower bound (so every s' >= 0): q's constant term, its negative
    non-constant terms, and its value at the largest symbols (every s = SYMBOL_MAX)."""

    const: int
    negative: tuple[tuple[Monomial, int], ...]
    top: int


class Domain:
    """Shape-symbol facts of one stage, the prover over them, and interval arithmetic.

    `nonneg(p)` decides `p >= 0` soundly (never true when it may fail): it substitutes
    `s = s' + lb(s)` for every symbol with a known lower bound and checks that every
    coefficient is non-negative, which proves it because every `s' >= 0`.

    The substituted polynomial q has up to 2**degree terms per term of `p` (a rank-16
    index bound expands to 65536), so the prover never builds it; it gives the same
    answers from `p` directly. A negative term of `p` that no other term contains is a
    term of q (refuted at once). With every lower bound >= 0, a positive term adds a
    non-negative amount to every coefficient of q, so when the positive terms can pay for
    the negative ones they contain (`_dominated`) every coefficient is >= 0 (proven at
    once); otherwise only the monomials a negative term shrinks to can be negative, and
    the prover computes those coefficients one by one. With a negative lower bound (a
    dimension `n + 3`) every monomial is such a candidate. The prover examines at most
    MAX_PROOF_WORK (monomial, term) pairs per bound; past that the bound is simply not
    proven (sound), and `gave_up` records it for the error message."""

    def __init__(self, lower: Mapping[str, int], meter: Meter | None = None):
        self.lower = dict(lower)
        self.meter = meter  # charged for the prover's work and the bounds compared
        self._cache: dict[Poly, _Shifted | None] = {}
        self._decided: dict[Poly, bool] = {}
        self._empty: dict[Interval, bool] = {}
        self._spent: dict[Poly, int] = {}
        self.work = 0  # (monomial, term) pairs examined: linear in a bound's size, not 2**degree
        self.gave_up = False  # some bound was past MAX_PROOF_WORK

    @staticmethod
    def from_dims(dims: Iterable[Affine], domain: Iterable[Affine], meter: Meter | None = None) -> "Domain":
        """Lower bounds from `dim >= 0` for every declared dimension and `extent >= 1` for
        the stage's domain, wherever a dimension is `c*s + k` with c > 0."""
        lower: dict[str, int] = {}
        for d, least in [(d, 0) for d in dims] + [(d, 1) for d in domain]:
            if isinstance(d, Affine) and len(d.terms) == 1 and d.terms[0][1] > 0:
                (s, c), k = d.terms[0], d.const
                lb = -((k - least) // c)  # ceil((least - k) / c)
                lower[s] = max(lower.get(s, lb), lb)
        return Domain(lower, meter)

    # ------------------------------------------------------------------- the prover
    def nonneg(self, p: Poly) -> bool:
        if p.is_const:
            return p.value >= 0
        if p not in self._decided:
            self._decided[p] = self._decide(p)
        return self._decided[p]

    def le(self, a: Poly, b: Poly) -> bool:
        return self.nonneg(b - a)

    def extremes(self, p: Poly) -> tuple[int, int] | None:
        """(min, max) of p over every symbol value between its lower bound and
        SYMBOL_MAX, bounded term by term over the shifted symbols (each in
        [0, SYMBOL_MAX - lb]), or None when p mentions an unbounded symbol."""
        if p.is_const:
            return p.value, p.value
        q = self._shifted(p)
        if q is None:
            return None
        # the negative terms at their largest; the rest of q (const and the positive
        # terms at their largest) is its value at the top, less those
        low = sum(c * math.prod(SYMBOL_MAX - self.lower[s] for s in m) for m, c in q.negative)
        return q.const + low, q.top - low

    def _decide(self, p: Poly) -> bool:
        """Does every coefficient of the shifted `p` come out >= 0? The cheap answers
        first, then candidate by candidate, stopping at the first negative one."""
        if self.meter is not None:
            self.meter.charge(len(p.terms) ** 2)  # the leader and domination tests
        if p in self._cache:
            q = self._cache[p]
            return q is not None and q.const >= 0 and not q.negative
        if _negative_leader(p):
            return False
        terms = self._terms(p)
        if terms is None:
            return False
        if _dominated(terms, self.lower):
            return True
        if _shifted_coefficient(terms, {}, self.lower) < 0:
            return False
        for want in self._candidates(terms):
            if not self._spend(p, len(terms)) or _shifted_coefficient(terms, want, self.lower) < 0:
                return False
        return True

    def _shifted(self, p: Poly) -> _Shifted | None:
        """What `extremes` needs of the shifted `p`, or None when p mentions a symbol
        with no known lower bound or is past the prover's budget."""
        if p not in self._cache:
            self._cache[p] = None
            terms = self._terms(p)
            if terms is None:
                return None
            negative: dict[tuple, int] = {}
            if not _dominated(terms, self.lower):
                for want in self._candidates(terms):
                    key = tuple(sorted(want.items()))
                    if want and key not in negative:
                        if not self._spend(p, len(terms)):
                            return None
                        negative[key] = _shifted_coefficient(terms, want, self.lower)
            self._cache[p] = _Shifted(
                const=_shifted_coefficient(terms, {}, self.lower),
                negative=tuple(sorted((tuple(s for s, j in key for _ in range(j)), c)
                                      for key, c in negative.items() if c < 0)),
                top=sum(c * SYMBOL_MAX ** len(m) for m, c in p.terms))  # q at every s' = SYMBOL_MAX - lb
        return self._cache[p]

    def _terms(self, p: Poly) -> Terms | None:
        """`p`'s terms as ({symbol: power}, coefficient), or None when it mentions a
        symbol with no known lower bound."""
        if any(s not in self.lower for m, _ in p.terms for s in m):
            return None
        return [(dict(_powers(m)), c) for m, c in p.terms]

    def _candidates(self, terms: Terms) -> Iterator[dict[str, int]]:
        """The monomials ({symbol: power}) of the shifted polynomial whose coefficient
        may be negative, highest degree first for each source term (with repeats)."""
        lower = self.lower
        # a positive term adds c * binomials * bounds >= 0 everywhere when no bound is negative
        signed = all(lower[s] >= 0 for pw, _ in terms for s in pw)
        for pw, c in terms:
            if c < 0 or not signed:
                # a symbol at lower bound 0 keeps all its copies (else the term is 0 * ...)
                choices = [range(k, -1, -1) if lower[s] else (k,) for s, k in pw.items()]
                for keep in itertools.product(*choices):
                    yield {s: j for s, j in zip(pw, keep) if j}

    def _spend(self, p: Poly, pairs: int) -> bool:
        """Charge `pairs` (monomial, term) pairs for `p`; False past MAX_PROOF_WORK."""
        self._spent[p] = self._spent.get(p, 0) + pairs
        self.work += pairs
        if self.meter is not None:
            self.meter.charge(pairs)
        if self._spent[p] > MAX_PROOF_WORK:
            self.gave_up = True
            return False
        return True

    def fits(self, lo: Bounds, hi: Bounds, t: DType) -> bool:
        """True when every value the bounds allow is a value of type `t`."""
        return any((e := self.extremes(p)) is not None and e[0] >= t.min for p in lo) and \
            any((e := self.extremes(p)) is not None and e[1] <= t.max for p in hi)

    def above(self, iv: Interval, p: Poly) -> bool:
        """Is every value of `iv` >= p?"""
        return any(self.le(p, b) for b in iv.lo)

    def below(self, iv: Interval, p: Poly) -> bool:
        """Is every value of `iv` <= p?"""
        return any(self.le(b, p) for b in iv.hi)

    def empty(self, iv: Interval) -> bool:
        """Provably no value lies in `iv` (a path that narrowing showed impossible)."""
        if iv not in self._empty:  # asked of every register at every branch: remembered
            self._empty[iv] = iv.exact and any(self.le(h + 1, lo) for lo in iv.lo for h in iv.hi)
        return self._empty[iv]

    # ---------------------------------------------------------------- bound sets
    def lows(self, bounds: Iterable[Poly]) -> Bounds:
        """Lower bounds without those another implies (a larger one), simplest first."""
        return self._prune(bounds, lambda a, b: self.le(a, b))

    def highs(self, bounds: Iterable[Poly]) -> Bounds:
        return self._prune(bounds, lambda a, b: self.le(b, a))

    def _prune(self, bounds: Iterable[Poly], implied_by) -> Bounds:
        uniq = sorted({p for p in bounds if _within_limits(p)}, key=_rank)
        if self.meter is not None:
            self.meter.charge(len(uniq) ** 2 + sum(len(p.terms) for p in uniq))
        keep = [p for k, p in enumerate(uniq)
                if not any(implied_by(p, q) and (not implied_by(q, p) or j < k) for j, q in enumerate(uniq) if j != k)]
        return tuple(keep[:MAX_BOUNDS])

    def make(self, lo: Iterable[Poly], hi: Iterable[Poly], t: DType, exact: bool) -> Interval:
        """An interval of type `t`; a modular one that provably fits `t` is exact, and a
        side with no bound left gets the type's limit (valid only for exact values)."""
        lo, hi = self.lows(lo), self.highs(hi)
        if not exact and lo and hi and self.fits(lo, hi, t):
            exact = True
        if not (lo and hi) and not exact:
            return Interval.top(t)
        return Interval(lo or (Poly.const(int(t.min)),), hi or (Poly.const(int(t.max)),), exact)

    # ------------------------------------------------------------------ arithmetic
    def exact(self, v: object, t: DType) -> Interval:
        """`v` if it bounds the actual value, else everything type `t` holds."""
        return v if isinstance(v, Interval) and v.exact else Interval.top(t)

    def hull(self, a: Interval, b: Interval, t: DType) -> Interval:
        """Holds both (the join of two paths): the bounds of each side the other obeys."""
        if a == b:
            return a
        lo = [p for p in a.lo if self.above(b, p)] + [q for q in b.lo if self.above(a, q)]
        hi = [p for p in a.hi if self.below(b, p)] + [q for q in b.hi if self.below(a, q)]
        if not lo and a.exact and b.exact:  # the least value both sides provably exceed
            floors = [max((e[0] for p in x.lo if (e := self.extremes(p))), default=None) for x in (a, b)]
            if None not in floors:
                lo = [Poly.const(min(floors))]
        return self.make(lo, hi, t, a.exact and b.exact)

    def widen(self, old: Interval, new: Interval, t: DType) -> Interval:
        """Keep only the bounds that survived a round around a loop (so the iteration
        stops): a bound in `new` not also in `old` is dropped. A lower bound that keeps
        falling stops at 1 or 0 when both rounds are above it: a loop counter counts down
        to 1 (LOOP's test), and indices stop at 0."""
        if old == new:
            return new
        lo = [p for p in new.lo if p in old.lo]
        if not lo and old.exact and new.exact:
            lo = next(([Poly.const(c)] for c in (1, 0) if self.above(new, Poly.const(c))
                       and self.above(old, Poly.const(c))), [])
        return self.make(lo, [p for p in new.hi if p in old.hi], t, old.exact and new.exact)

    def add(self, a: Interval, b: Interval, t: DType) -> Interval:
        return self.make([x + y for x in a.lo for y in b.lo], [x + y for x in a.hi for y in b.hi], t, False)

    def neg(self, a: Interval, t: DType) -> Interval:
        return self.make([-p for p in a.hi], [-p for p in a.lo], t, False)

    def sub(self, a: Interval, b: Interval, t: DType) -> Interval:
        return self.add(a, Interval(tuple(-p for p in b.hi), tuple(-p for p in b.lo), b.exact), t)

    def mul(self, a: Interval, b: Interval, t: DType) -> Interval:
        for x, y in ((a, b), (b, a)):
            k = y.const
            if k is not None:
                lo, hi = (x.lo, x.hi) if k >= 0 else (x.hi, x.lo)
                return self.make([p * k for p in lo], [p * k for p in hi], t, False)
        cl = lambda b, pick: [pick(p.value for p in b if p.is_const)] if any(p.is_const for p in b) else []  # noqa
        alo, ahi, blo, bhi = cl(a.lo, max), cl(a.hi, min), cl(b.lo, max), cl(b.hi, min)
        if alo and ahi and blo and bhi:
            corners = [x * y for x in (alo[0], ahi[0]) for y in (blo[0], bhi[0])]
            return self.make([Poly.const(min(corners))], [Poly.const(max(corners))], t, False)
        alo_nn = [p for p in a.lo if self.nonneg(p)]
        blo_nn = [p for p in b.lo if self.nonneg(p)]
        if alo_nn and blo_nn:  # both sides >= 0: bounds multiply
            return self.make([x * y for x in alo_nn for y in blo_nn], [x * y for x in a.hi for y in b.hi], t, False)
        return Interval.top(t)

    def narrow(self, x: Interval, mod: str, other: Interval, t: DType) -> Interval:
        """`x` on a path where `x <mod> other` held, both compared as actual values (so
        a modular `x` learns nothing, but stays true)."""
        if isinstance(x, Interval) and not x.exact:
            return x
        x, o = self.exact(x, t), self.exact(other, t)
        lo, hi = list(x.lo), list(x.hi)
        if mod in ("lt", "le", "eq"):
            hi += [p - (1 if mod == "lt" else 0) for p in o.hi]
        if mod in ("gt", "ge", "eq"):
            lo += [p + (1 if mod == "gt" else 0) for p in o.lo]
        return self.make(lo, hi, t, True)
