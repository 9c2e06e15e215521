"""Sigil circuits as values: generators, sequences, parallel blocks; what each reads and
writes; the text form.

A circuit acts on the class buffer, 96 classes of WIDTH f32 elements, plus one quote
slot per class (what `quote` saves and `evaluate` restores). Both are *resources*:
class k is resource k, its slot is resource SLOTS + k. The meaning of every generator
is in docs/sigil.md; model.py runs it on numpy arrays, lower.py writes it as a kernel.
"""

from __future__ import annotations

from typing import Iterator, Union

import attrs

CLASSES = 96
WIDTH = 3072  # f32 elements per class: 12,288 bytes, 48 pages of 256 bytes (docs/atlas.md)
SLOTS = CLASSES  # resource SLOTS + k is the quote slot of class k

# The generator families and their variants, each variant named by the numpy operation
# it applies (hologram.core.semantics.ORACLE, the DSL's oracle). merge combines, split
# takes apart; a unary variant reads one class.
MERGE_BINARY = {"add": "+", "mul": "*", "min": "minimum", "max": "maximum"}
MERGE_UNARY = {"abs": "abs", "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "sigmoid": "sigmoid",
               "tanh": "tanh", "relu": "relu"}
SPLIT_BINARY = {"sub": "-", "div": "/"}
REDUCTIONS = ("sum", "prod", "min", "max", "mean")
VARIANTS = {"merge": {**MERGE_BINARY, **MERGE_UNARY}, "split": SPLIT_BINARY, "reduce": {r: r for r in REDUCTIONS}}
DEFAULT_VARIANT = {"merge": "add", "split": "sub"}  # the seeds' plain `merge@...` adds, `split@...` subtracts
COMMUTATIVE = frozenset({"add", "mul"})  # exactly, in IEEE arithmetic; min and max are not (signed zeros)
KINDS = ("mark", "copy", "swap", "merge", "split", "reduce", "quote", "evaluate")  # also the canonical order

# Operand forms: the shape of what follows `@`.
FORM = {"mark": "one", "quote": "one", "evaluate": "one", "copy": "arrow", "reduce": "arrow", "swap": "exchange",
        "merge": "apply", "split": "apply"}
EXAMPLE = {"mark": "mark@c21", "quote": "quote@c05", "evaluate": "evaluate@c05", "copy": "copy@c05->c06",
           "reduce": "reduce_sum@c00->c01", "swap": "swap@c01<->c02", "merge": "merge_add@c00[c01,c02]",
           "split": "split_sub@c00[c01,c02]"}

Pos = tuple[int, int, int]  # (line, column, end column) in the circuit's text, 1-based, end exclusive


@attrs.frozen
class Gen:
    """One generator. `classes` in the order written: mark/quote/evaluate (c,), copy and
    reduce (source, target), swap (a, b), merge and split (target, *sources)."""

    kind: str
    variant: str
    classes: tuple[int, ...]
    at: Pos | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def arity(self) -> int:
        return 1 if self.variant in MERGE_UNARY else 2

    @property
    def op(self) -> str:
        """The numpy operation (an ORACLE name, or a reduction kind) this generator applies."""
        return "neg" if self.kind == "mark" else VARIANTS.get(self.kind, {}).get(self.variant, "")

    @property
    def reads(self) -> frozenset[int]:
        k, c = self.kind, self.classes
        if k == "copy" or k == "reduce":
            return frozenset({c[0]})
        if k in ("merge", "split"):
            return frozenset(c[1:])
        if k == "evaluate":
            return frozenset({SLOTS + c[0]})
        return frozenset(c)  # mark, swap, quote

    @property
    def writes(self) -> frozenset[int]:
        k, c = self.kind, self.classes
        if k in ("copy", "reduce"):
            return frozenset({c[1]})
        if k in ("merge", "split", "mark", "evaluate"):
            return frozenset({c[0]})
        if k == "quote":
            return frozenset({SLOTS + c[0]})
        return frozenset(c)  # swap

    def text(self) -> str:
        name = self.kind if not self.variant else f"{self.kind}_{self.variant}"
        c = [f"c{k:02d}" for k in self.classes]
        form = FORM[self.kind]
        if form == "one":
            return f"{name}@{c[0]}"
        if form == "arrow":
            return f"{name}@{c[0]}->{c[1]}"
        if form == "exchange":
            return f"{name}@{c[0]}<->{c[1]}"
        return f"{name}@{c[0]}[{','.join(c[1:])}]"


@attrs.frozen
class Seq:
    """`a . b . c`: each step runs on what the previous one left; no steps is `id`."""

    steps: tuple["Node", ...]
    at: Pos | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Par:
    """`a || b`: every branch runs on the same state; each resource written takes the
    value its (only) writer left, the others keep theirs."""

    branches: tuple["Node", ...]
    at: Pos | None = attrs.field(default=None, eq=False, repr=False)


Node = Union[Gen, Seq, Par]


def generators(node: Node) -> Iterator[Gen]:
    """Every generator of `node`, in text order."""
    if isinstance(node, Gen):
        yield node
    else:
        for child in node.steps if isinstance(node, Seq) else node.branches:
            yield from generators(child)


def count_ops(node: Node) -> int:
    """The circuit's size: its generators (`id`, sequencing and parallel blocks are free)."""
    return sum(1 for _ in generators(node))


def reads(node: Node) -> frozenset[int]:
    return frozenset().union(*(g.reads for g in generators(node)))


def writes(node: Node) -> frozenset[int]:
    return frozenset().union(*(g.writes for g in generators(node)))


def independent(a: Node, b: Node) -> bool:
    """Whether `a . b` equals `b . a`: neither writes what the other reads or writes."""
    wa, wb = writes(a), writes(b)
    return not (wa & (reads(b) | wb)) and not (wb & reads(a))


def format_circuit(node: Node) -> str:
    """The circuit's text: generators in their canonical spelling (`merge_add`, not
    `merge`; classes with two digits), ` . ` and ` || `, parentheses where needed."""
    if isinstance(node, Gen):
        return node.text()
    if isinstance(node, Seq):
        if not node.steps:
            return "id"
        return " . ".join(f"({format_circuit(s)})" if isinstance(s, Par) else format_circuit(s) for s in node.steps)
    return " || ".join(format_circuit(b) for b in node.branches)


def class_name(k: int) -> str:
    return f"c{k:02d}" if k < SLOTS else f"the quote slot of c{k - SLOTS:02d}"
