"""Pathological inputs stay cheap: the prover, the bounds analysis, the verifier's loop
checks and the fuse pass are near-linear, or stop at a documented limit with a clear
error (docs/hasm.md, "Limits"; docs/dsl.md, "Limits"). No timing: the tests count work."""

from __future__ import annotations

import random

import pytest

from hologram.core.intervals import MAX_BOUND_BITS, MAX_BOUND_TERMS, MAX_PROOF_WORK, SYMBOL_MAX, Domain, Interval, Poly
from hologram.core.types import DType


# ============================================================================ the prover
def _expanded(p: Poly, lower: dict[str, int]) -> Poly | None:
    """The prover's reference: `p` with every symbol s replaced by `s + lower[s]`, fully
    expanded (2**degree terms per term), as the prover computed it before it got linear."""
    out = Poly()
    for m, c in p.terms:
        if any(s not in lower for s in m):
            return None
        term = Poly.const(c)
        for s in m:
            term = term * (Poly.sym(s) + lower[s])
        out = out + term
    return out


def _reference_nonneg(p: Poly, lower: dict[str, int]) -> bool:
    if p.is_const:
        return p.value >= 0
    q = _expanded(p, lower)
    return q is not None and all(c >= 0 for _, c in q.terms)


def _reference_extremes(p: Poly, lower: dict[str, int]) -> tuple[int, int] | None:
    if p.is_const:
        return p.value, p.value
    q = _expanded(p, lower)
    if q is None:
        return None
    lo = hi = 0
    for m, c in q.terms:
        big = 1
        for s in m:
            big *= SYMBOL_MAX - lower[s]
        if not m:
            lo, hi = lo + c, hi + c
        elif c > 0:
            hi += c * big
        else:
            lo += c * big
    return lo, hi


def _random_poly(rng: random.Random, symbols: list[str]) -> Poly:
    acc: dict[tuple[str, ...], int] = {}
    for _ in range(rng.randint(1, 5)):
        m = tuple(sorted(rng.choice(symbols) for _ in range(rng.randint(0, 4))))
        acc[m] = acc.get(m, 0) + rng.randint(-4, 4)
    return Poly.make(acc)


def test_prover_decides_exactly_as_the_full_expansion_did():
    rng = random.Random(11)
    symbols = ["a", "b", "c", "d"]
    proven = 0
    for _ in range(3000):
        # lower bounds of every sign (a dimension n + 3 gives -3), some symbols unbounded
        lower = {s: rng.choice([-2, -1, 0, 0, 1, 1, 2, 3]) for s in symbols if rng.random() < 0.9}
        p = _random_poly(rng, symbols)
        expected = _reference_nonneg(p, lower), _reference_extremes(p, lower)
        assert (Domain(lower).nonneg(p), Domain(lower).extremes(p)) == expected, (p, lower)
        d = Domain(lower)  # the other order: extremes first fills the cache nonneg then reads
        assert (d.extremes(p), d.nonneg(p)) == expected[::-1], (p, lower)
        proven += expected[0]
    assert 300 < proven < 2700  # both answers were exercised


def _rank_bounds(rank: int) -> tuple[list[Poly], list[Poly]]:
    """Bounds the analysis of a rank-`rank` elementwise kernel compares (proven, refuted):
    the element count `D = d0*d1*...*d(r-1)` against the last index, the outermost
    index's share `(d0 - 1)*d1*...`. Shifted to the symbols' lower bound 1, each has
    2**rank terms, which the prover used to list."""
    dims = [Poly.sym(f"d{k}") for k in range(rank)]
    whole, inner = Poly.const(1), Poly.const(1)
    for d in dims:
        whole = whole * d
    for d in dims[1:]:
        inner = inner * d
    proven = [whole - 1, whole - inner, 3 * whole - dims[-1] * dims[-2] + 3 * dims[-1] - 1]
    refuted = [2 * inner - whole, whole - 2 * inner, inner - whole + 1]
    return proven, refuted


@pytest.mark.parametrize("rank", [4, 10])
def test_prover_at_ranks_the_reference_can_expand(rank):
    proven, refuted = _rank_bounds(rank)
    lower = {f"d{k}": 1 for k in range(rank)}
    for p in proven + refuted:
        d = Domain(lower)
        assert (d.nonneg(p), d.extremes(p)) == (_reference_nonneg(p, lower), _reference_extremes(p, lower)), p
        assert d.nonneg(p) == (p in proven)


@pytest.mark.parametrize("rank", [16, 40, 64])
def test_prover_work_does_not_grow_with_the_rank(rank):
    proven, refuted = _rank_bounds(rank)
    d = Domain({f"d{k}": 1 for k in range(rank)})
    assert all(d.nonneg(p) for p in proven) and not any(d.nonneg(p) for p in refuted)
    assert d.extremes(proven[0]) == (0, SYMBOL_MAX ** rank - 1)
    # the shifted polynomials have 2**rank terms; the prover examines a handful
    assert d.work <= 8 and not d.gave_up


def test_prover_gives_up_soundly_past_its_budget():
    # (s0 - 1)(s1 - 1)...(s13 - 1) over symbols >= 1 is a product of non-negative
    # factors, but its expansion has 2**14 terms, half of them negative and none
    # dominated: proving it would take 2**14 * 2**14 steps, past MAX_PROOF_WORK
    p = Poly.const(1)
    for k in range(14):
        p = p * (Poly.sym(f"s{k}") - 1)
    d = Domain({f"s{k}": 1 for k in range(14)})
    assert not d.nonneg(p) and d.gave_up and d.work <= MAX_PROOF_WORK + len(p.terms)
    assert d.extremes(p) is None
    q = Poly.const(1)
    for k in range(4):
        q = q * (Poly.sym(f"s{k}") - 1)
    small = Domain({f"s{k}": 1 for k in range(4)})
    assert small.nonneg(q) and _reference_nonneg(q, small.lower) and not small.gave_up


def _within_limits(iv: Interval) -> bool:
    return all(len(p.terms) <= MAX_BOUND_TERMS and all(abs(c).bit_length() <= MAX_BOUND_BITS for _, c in p.terms)
               for p in iv.lo + iv.hi)


@pytest.mark.parametrize("start", [Poly.const(3), Poly.sym("n") + Poly.sym("m") + 1])
def test_oversized_bounds_are_dropped_from_intervals(start):
    # 30 squarings would make a 2**30-bit number of 3, a polynomial of 2**59 terms of n + m + 1
    d = Domain({"n": 0, "m": 0})
    x = Interval.point(start)
    for _ in range(30):
        x = d.mul(x, x, DType.I64)
        assert _within_limits(x)
