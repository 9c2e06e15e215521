"""Derived shape symbols: dimensions that are not affine in the bound symbols.

A slice `x[::2]` of `x: f32[n]` has `(n + 1)//2` elements, `x[1:]` has `max(n - 1, 0)`
(numpy clamps: it is empty, not negative, when `n` is 0), and `m` flattened over `k x n`
has `k*n`. Shapes stay tuples of `Affine`: such a dimension is an affine form over a
*derived symbol*, a symbol whose name is its own definition in canonical text:

    max(A, B)   min(A, B)   P//K   P*Q

with `A`, `B` affine texts (as `str(Affine)` prints them), `K >= 2` an integer literal,
and `P`, `Q` primaries: a bound symbol, a `max`/`min`, or a parenthesized affine text.
A symbol name that is an identifier is *bound* (solved from the arguments' shapes); any
other is derived and computed at launch from the symbols it mentions. The definition
travels in the name itself (`parse_derived`), so the IR, programs, their encoding and
bundles need no table of derived symbols, and a name cannot disagree with its meaning.
Every derived symbol is constructed to be >= 0 for every binding of its inputs, as the
launch contract requires of every symbol (floor divisions of a clamped numerator).

`DimAlgebra` builds derived dimensions and simplifies them where the answer is affine
for every size the call allows: `max(n - 1, 0)` is `n - 1` in a kernel that declares an
array of `n - 1` elements, since no call with `n = 0` gets past its arguments' check.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Mapping, Sequence

import attrs

from hologram.core.types import Affine

OPS = ("max", "min", "floordiv", "mul")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_derived(name: str) -> bool:
    """Whether a symbol name is derived (its name is a definition, not an identifier)."""
    return _IDENT.match(name) is None


@attrs.frozen
class Derived:
    """`op(a, b)`: max, min, floordiv (b a constant >= 2) or mul of two affine forms."""

    op: str
    a: Affine
    b: Affine

    @property
    def name(self) -> str:
        if self.op in ("max", "min"):
            return f"{self.op}({self.a}, {self.b})"
        if self.op == "floordiv":
            return f"{_primary(self.a)}//{self.b.const}"
        return f"{_primary(self.a)}*{_primary(self.b)}"

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        a, b = self.a.evaluate(bindings), self.b.evaluate(bindings)
        if self.op == "max":
            return max(a, b)
        if self.op == "min":
            return min(a, b)
        if self.op == "floordiv":
            return a // b
        return a * b

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbols the definition reads (bound or derived), in first-use order."""
        return tuple(dict.fromkeys((*self.a.symbols, *self.b.symbols)))


def _primary(a: Affine) -> str:
    """`a` as an operand of `//` or `*`: a lone symbol or max/min as it is, else in parentheses."""
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1:
        name = a.terms[0][0]
        # a lone max/min call as it is; a product that merely starts with one is parenthesized
        if not is_derived(name) or parse_derived(name).op in ("max", "min"):
            return name
    return f"({a})"


# ---------------------------------------------------------------------- parsing names
_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*(),]))")


class _NameParser:
    """Recursive descent over Python-like dimension text: sums of terms, terms products
    (`2*n`, `m*n`) and floor divisions (`n//2`), primaries symbols, integers, max/min
    calls and parentheses. Returns None (not an exception) for anything else."""

    def __init__(self, text: str):
        self.toks: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(text)
            kind = m.lastgroup or ""
            self.toks.append((kind, m.group(kind)))
            pos = m.end()
        self.k = 0
        self.built: dict[str, Derived] = {}  # every derived symbol read, by name

    def derived(self, d: Derived) -> Affine:
        self.built[d.name] = d
        return Affine.of(d.name)

    def peek(self) -> str:
        return self.toks[self.k][1] if self.k < len(self.toks) else ""

    def take(self) -> tuple[str, str]:
        if self.k >= len(self.toks):
            raise ValueError("end")
        self.k += 1
        return self.toks[self.k - 1]

    def expect(self, text: str) -> None:
        if self.take()[1] != text:
            raise ValueError(text)

    def sum(self) -> Affine:
        negate = self.peek() == "-" and bool(self.take())
        value = self.term()
        value = -value if negate else value
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> Affine:
        value = self.primary()
        while self.peek() in ("*", "//"):
            op = self.take()[1]
            if op == "//":
                kind, k = self.take()
                if kind != "int" or int(k) < 2:
                    raise ValueError(k)
                value = self.derived(Derived("floordiv", value, Affine.of(int(k))))
                continue
            rhs = self.primary()
            if value.is_const or rhs.is_const:
                value = value * rhs.const if rhs.is_const else rhs * value.const
            else:
                value = self.derived(Derived("mul", *sorted((value, rhs), key=str)))
        return value

    def primary(self) -> Affine:
        kind, text = self.take()
        if kind == "int":
            return Affine.of(int(text))
        if kind == "name" and text in ("max", "min") and self.peek() == "(":
            self.take()
            a = self.sum()
            self.expect(",")
            b = self.sum()
            self.expect(")")
            return self.derived(Derived(text, a, b))
        if kind == "name":
            return Affine.of(text)
        if text == "(":
            value = self.sum()
            self.expect(")")
            return value
        raise ValueError(text)


@functools.lru_cache(maxsize=4096)
def parse_derived(name: str) -> Derived | None:
    """The definition a derived symbol's name spells, or None when `name` is not the
    canonical text of one (an identifier, or text this module would not print).
    Cached by name: a name has exactly one meaning."""
    if not is_derived(name):
        return None
    try:
        p = _NameParser(name)
        whole = p.sum()
    except (ValueError, IndexError, RecursionError):
        return None
    if p.k != len(p.toks) or whole.const or len(whole.terms) != 1 or whole.terms[0][1] != 1:
        return None
    return p.built.get(name) if whole.terms[0][0] == name else None


def derive(symbols: Sequence[str], bindings: Mapping[str, int]) -> dict[str, int]:
    """`bindings` (the bound symbols' values) completed with every derived symbol among
    `symbols`, in order (a derived symbol reads only symbols listed before it). A name
    that is neither bound nor a derived definition raises KeyError."""
    out = dict(bindings)
    for s in symbols:
        if s in out and not is_derived(s):
            continue
        d = parse_derived(s)
        if d is None:
            raise KeyError(s)
        out[s] = d.evaluate(out)
    return out


def derived_closure(names: Iterable[str]) -> list[str]:
    """The derived symbols among `names` and every derived symbol they read, each after
    the ones it reads (a valid order for `derive`)."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or not is_derived(name):
            return
        seen.add(name)
        d = parse_derived(name)
        if d is None:
            raise ValueError(f"{name!r} is not a derived symbol")
        for s in d.symbols:
            visit(s)
        order.append(name)

    for n in names:
        visit(n)
    return order


def substitute(a: Affine, values: Mapping[str, Affine]) -> Affine:
    """`a` with each symbol in `values` replaced by its affine value."""
    if not any(n in values for n, _ in a.terms):
        return a
    out = Affine.of(a.const)
    for name, c in a.terms:
        out = out + (values[name] * c if name in values else Affine.of(name) * c)
    return out


def within_lanes(domain: Sequence[Affine]) -> dict[str, Affine]:
    """What a stage's lanes may assume of its domain's derived extents: a lane exists only
    where every extent is >= 1, and an extent `max(A, 0)` that is >= 1 is `A` (`x[1:]`'s
    `max(n - 1, 0)` is `n - 1` inside its lanes). Sound for code that runs per lane, not
    for a stage's `.init`s, which run even when the domain is empty."""
    out: dict[str, Affine] = {}
    for d in domain:
        inner = _clamped(d)
        if inner is not None:
            out[d.terms[0][0]] = inner
    return out


def remainder_symbol(name: str, k: int) -> str:
    """The name of `name`'s remainder modulo `k`, a symbol in [0, k) only the verifier
    uses (`divided_lanes`); like a derived symbol's, it is no identifier."""
    return f"{name}%{k}"


def divided_lanes(domain: Sequence[Affine], symbols: Sequence[str]) -> dict[str, Affine]:
    """For each symbol `s//k` among `symbols` (a split reduction's slices,
    hologram/lower/split.py) of a bound symbol `s` that `domain` does not mention, `s` as
    `k*(s//k) + s%k`: an identity, which lets a prover that knows only lower bounds of
    symbols see `k*(s//k) <= s` (the remainder symbol is >= 0). Sound everywhere; not
    used where the domain has `s` (it would hide the lanes' `s >= 1`)."""
    mentioned = {n for d in domain for n in d.symbols}
    out: dict[str, Affine] = {}
    for name in symbols:
        f = parse_derived(name) if is_derived(name) else None
        if f is not None and f.op == "floordiv" and len(f.a.terms) == 1 and f.a.const == 0 \
                and f.a.terms[0][1] == 1 and not is_derived(f.a.terms[0][0]) and f.a.terms[0][0] not in mentioned:
            s, k = f.a.terms[0][0], f.b.const
            out.setdefault(s, Affine.of(name) * k + Affine.of(remainder_symbol(s, k)))
    return out


def lane_facts(domain: Sequence[Affine]) -> list[Affine]:
    """Forms that are >= 1 wherever a lane of a stage over `domain` exists, read off its
    derived extents: `A//k >= 1` means `A >= k`, `min(A, B) >= 1` means both are, and so
    does `A*B >= 1` when both are sizes (non-negative forms), `max(A, 0) >= 1` means `A`
    is. (For lane code only, as `within_lanes`.)"""
    out: list[Affine] = []
    pending = [d for d in domain if d.const == 0 and len(d.terms) == 1 and d.terms[0][1] == 1]
    while pending:
        d = parse_derived(pending.pop().terms[0][0])
        if d is None:
            continue
        if d.op == "floordiv":
            found = [d.a - (d.b.const - 1)]
        elif d.op == "min":
            found = [d.a, d.b]
        elif d.op == "mul":  # a product >= 1 of factors >= 0 (sizes): each is >= 1
            found = [d.a, d.b] if _plainly_nonneg(d.a) and _plainly_nonneg(d.b) else []
        elif d.op == "max" and d.b == Affine.of(0):
            found = [d.a]
        else:
            found = []
        out += found
        pending += [f for f in found if f.const == 0 and len(f.terms) == 1 and f.terms[0][1] == 1]
    return out


# ---------------------------------------------------------------------- the algebra
@attrs.frozen
class DimAlgebra:
    """Builds dimensions, derived where they must be, affine where that is exact.

    `facts` are affine forms known to be >= 0 at every call: the declared dimensions of
    a kernel's arrays (a call whose arguments make one negative is refused before it
    runs). Every symbol is >= 0 too, so a form with non-negative coefficients and
    constant is >= 0, and so is one that exceeds a fact by such a form."""

    facts: tuple[Affine, ...] = ()

    def nonneg(self, a: Affine) -> bool:
        """Whether `a >= 0` at every call: after replacing each derived symbol by a bound
        in the direction that matters (an upper bound where it is subtracted), `a` exceeds
        0 or a fact by non-negative coefficients."""
        for bounded in _bounded(a):
            if any(_plainly_nonneg(bounded - f) for f in (Affine.of(0), *self.facts)):
                return True
        return False

    def max(self, a: Affine, b: Affine) -> Affine:
        if self.nonneg(a - b):
            return a
        if self.nonneg(b - a):
            return b
        lo, hi = sorted((a, b), key=_order)
        return Affine.of(Derived("max", lo, hi).name)

    def min(self, a: Affine, b: Affine) -> Affine:
        if self.nonneg(b - a):
            return a
        if self.nonneg(a - b):
            return b
        lo, hi = sorted((a, b), key=_order)
        return Affine.of(Derived("min", lo, hi).name)

    def clamp0(self, a: Affine) -> Affine:
        """max(a, 0); `max(max(A, 0) - c, 0)` is `max(A - c, 0)` for c >= 0."""
        if a.const <= 0 and (inner := _clamped(a - a.const)) is not None:
            return self.clamp0(inner + a.const)
        return self.max(a, Affine.of(0))

    def floordiv(self, a: Affine, k: int) -> Affine:
        """`a // k` for `a >= 0` (the caller clamps first), `k >= 1`."""
        if k == 1:
            return a
        exact = a.floordiv(k)
        if exact is not None:
            return exact
        return Affine.of(Derived("floordiv", a, Affine.of(k)).name)

    def ceildiv(self, a: Affine, k: int) -> Affine:
        """`ceil(max(a, 0) / k)`: the number of steps of `k` that cover `a` (no clamp
        needed when `a >= 1 - k`: then `(a + k - 1)//k` is already 0 for `a <= 0`)."""
        a = self.difference(a)
        if k == 1:
            return self.clamp0(a)
        inner = _clamped(a)  # ceil(max(A, 0) / k) is (A + k - 1)//k when A >= 1 - k
        if inner is not None and self.nonneg(inner + (k - 1)):
            a = inner
        if self.nonneg(a + (k - 1)):
            return self.floordiv(a + (k - 1), k)
        return self.floordiv(self.clamp0(a) + (k - 1), k)

    def difference(self, a: Affine) -> Affine:
        """`X - max(Y, 0)` as `min(X, c)` when `X - Y` is a constant `c >= 0` and `X >= 0`
        (the length of `x[-3:]`-like ranges, `n - max(n - 3, 0)`, is `min(n, 3)`)."""
        for name, c in a.terms:
            d = parse_derived(name)
            if c == -1 and d is not None and d.op == "max" and d.b == Affine.of(0):
                rest = a + Affine.of(name)
                gap = rest - d.a
                if gap.is_const and gap.const >= 0 and self.nonneg(rest):
                    return self.min(rest, gap)
        return a

    def mul(self, a: Affine, b: Affine) -> Affine:
        if a.is_const or b.is_const:
            return a * b.const if b.is_const else b * a.const
        lo, hi = sorted((a, b), key=str)
        return Affine.of(Derived("mul", lo, hi).name)

    def product(self, dims: Iterable[Affine]) -> Affine:
        out = Affine.of(1)
        for d in dims:
            out = self.mul(out, d)
        return out


def _bounds(d: Derived) -> tuple[list[Affine], list[Affine]]:
    """(lower, upper) affine bounds of a derived symbol that hold for every binding (its
    arguments' symbolic parts are sizes, so >= 0 where that is used)."""
    lower: list[Affine] = [Affine.of(0)]  # every derived symbol is built >= 0
    upper: list[Affine] = []
    a, b = d.a, d.b
    if d.op == "max":
        lower += [a, b]
        for x, c in ((a, b), (b, a)):  # max(S + k, c) <= S + max(k, c) when S >= 0
            if c.is_const and _plainly_nonneg(x - x.const):
                upper.append(x - x.const + max(x.const, c.const))
    elif d.op == "min":
        upper += [a, b]
    elif d.op == "floordiv":
        upper.append(a)  # a // k <= a for a >= 0
    return lower, upper


def _bounded(a: Affine) -> list[Affine]:
    """`a` itself, then with its derived symbols replaced by bounds: lower ones where
    the coefficient is positive, upper ones where it is negative (so each result is <= a)."""
    out = [a]
    for name, c in a.terms:
        d = parse_derived(name)
        if d is None:
            continue
        lower, upper = _bounds(d)
        options = [b * c for b in (lower if c > 0 else upper)]
        if d.op == "floordiv" and c < 0 and c % d.b.const == 0:  # k*(a//k) <= a
            options.append(d.a * (c // d.b.const))
        out += [x - Affine.of(name) * c + b for x in out for b in options]
        if len(out) > 64:
            break
    return out


def _clamped(a: Affine) -> Affine | None:
    """`A` when `a` is exactly `max(A, 0)`, else None."""
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1:
        d = parse_derived(a.terms[0][0])
        if d is not None and d.op == "max" and d.b == Affine.of(0):
            return d.a
    return None


def _plainly_nonneg(a: Affine) -> bool:
    return a.const >= 0 and all(c > 0 for _, c in a.terms)


def _order(a: Affine) -> tuple[bool, str]:
    """Canonical argument order of max/min: symbolic forms first, then by text."""
    return a.is_const, str(a)
