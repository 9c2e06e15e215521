"""Circuit text -> circuit values (circuit.py), every mistake a CompileError at its line
and column in the document the text came from.

The grammar is circuit.lark. Positions go through a `BodyOrigin` (hologram.dsl.document):
for a `.sigil` file it maps the file onto itself; for a `circuit = "..."` key it is the
one the schema built for the string, so an error points inside the string in the TOML,
YAML or JSON file, as body errors do.
"""

from __future__ import annotations

import functools
from pathlib import Path

import attrs
from lark import Lark, Token, Transformer_NonRecursive, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from hologram.translator import SEMVER, BodyOrigin, CompileError, DocumentError, Span, did_you_mean
from hologram_sigil.circuit import (
    CLASSES, DEFAULT_VARIANT, EXAMPLE, FORM, KINDS, MERGE_UNARY, VARIANTS, Gen, Node, Par, Pos, Seq,
    class_name, generators,
)

MAX_OPS = 4000  # generators in one circuit: each becomes at most one statement of a kernel body (4096 at most)
MAX_NESTING = 200  # parentheses inside parentheses

SPELLINGS = tuple(sorted({*KINDS, *(f"{k}_{v}" for k, vs in VARIANTS.items() for v in vs)} - {"reduce"}))
_WORDS = {"NAME": "a generator such as merge_add@c00[c01,c02]", "CLASS": "a class (c00 to c95)",
          "IDENTITY": "'id'", "KERNEL": "'kernel'", "VERSION": "a version such as 1.0.0",
          "STRING": 'a "summary"', "AT": "'@'", "ARROW": "'->'", "EXCHANGE": "'<->'", "THEN": "'.'",
          "PAR": "'||'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','",
          "$END": "the end of the circuit"}
_CHAR_HINTS = {
    ";": "compose generators with '.' (one after the other) or '||' (side by side)",
    ",": "compose generators with '.' (one after the other) or '||' (side by side)",
    "-": "'->' points from a source class to a target class: copy@c05->c06",
    "<": "swap exchanges two classes: swap@c01<->c02",
    "|": "'||' puts circuits side by side",
    "=": "a circuit is a composition of generators, such as copy@c05->c06 . mark@c21",
}


@functools.cache
def _lark() -> Lark:
    return Lark(Path(__file__).with_name("circuit.lark").read_text(), parser="lalr", lexer="contextual",
                start=["circuit", "file"], propagate_positions=True, maybe_placeholders=False)


@attrs.frozen
class KernelText:
    """One kernel of a `.sigil` file: its header (None for a bare circuit) and circuit."""

    name: str | None
    version: str | None
    summary: str
    circuit: Node
    span: Span | None


def parse_circuit(text: str, origin: BodyOrigin) -> Node:
    """The circuit `text` (a document's `circuit` value), checked."""
    node = _parse(text, origin, "circuit")
    check(node, origin)
    return node


def parse_file(text: str, origin: BodyOrigin) -> list[KernelText]:
    """The kernels of a `.sigil` file, each circuit checked."""
    result = _parse(text, origin, "file")
    kernels = result if isinstance(result, list) else [KernelText(None, None, "", result, None)]
    for k in kernels:
        check(k.circuit, origin)
    return kernels


def check(node: Node, origin: BodyOrigin) -> None:
    """What the grammar cannot say: a circuit has at most MAX_OPS generators, branches of
    `||` write different classes, and `evaluate@c` follows a `quote@c`."""
    for n, g in enumerate(generators(node)):
        if n == MAX_OPS:
            raise CompileError(f"the circuit has more than {MAX_OPS} generators; at most {MAX_OPS} make one kernel",
                               _span(origin, g.at), hint="split it into several kernels")
    _flow(node, frozenset(), origin)


def _flow(node: Node, quoted: frozenset[int], origin: BodyOrigin) -> frozenset[int]:
    """The quote slots filled after `node`, given those filled before it; raises on an
    `evaluate` of an empty slot and on two branches of `||` writing one resource."""
    if isinstance(node, Gen):
        c = node.classes[0]
        if node.kind == "evaluate" and c not in quoted:
            raise CompileError(f"evaluate@c{c:02d} restores the value quote@c{c:02d} saved, but no quote@c{c:02d} "
                               "comes before it", _span(origin, node.at),
                               hint=f"save the class first: quote@c{c:02d} . ... . evaluate@c{c:02d}")
        return quoted | {c} if node.kind == "quote" else quoted
    if isinstance(node, Seq):
        for step in node.steps:
            quoted = _flow(step, quoted, origin)
        return quoted
    written: dict[int, Gen] = {}
    after = set(quoted)
    for branch in node.branches:
        after |= _flow(branch, quoted, origin)
        mine = {}
        for g in generators(branch):
            for r in g.writes:
                mine.setdefault(r, g)
        for r, g in mine.items():
            if r in written:
                first = _span(origin, written[r].at)
                raise CompileError(f"{class_name(r)} is written by two branches of '||' (the other at line "
                                   f"{first.line}, column {first.col}); parallel branches write different classes",
                                   _span(origin, g.at), hint="to run one after the other, compose them with '.'")
        written.update(mine)
    return frozenset(after)


def _span(origin: BodyOrigin, at: Pos | None) -> Span:
    if at is None:
        return origin.span(1, 1)
    line, col, end = at
    return origin.span(line, col, end)


# ----------------------------------------------------------------------------- parsing
def _parse(text: str, origin: BodyOrigin, start: str) -> Node | list[KernelText]:
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, origin) from None
    _check_nesting(tree, origin)
    try:
        return _Build(origin).transform(tree)
    except VisitError as exc:  # our own errors, raised inside the transformer
        if isinstance(exc.orig_exc, (CompileError, DocumentError)):
            raise exc.orig_exc from None
        raise


def _check_nesting(tree: Tree, origin: BodyOrigin) -> None:
    """Refuse parentheses nested more than MAX_NESTING deep (the tree is walked without
    recursion, so any depth is measured safely)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data == "group":
            depth += 1
            if depth > MAX_NESTING:
                tok = node.children[0]
                raise CompileError(f"parentheses are nested more than {MAX_NESTING} deep", origin.span(
                    tok.line, tok.column, tok.column + 1))
        stack.extend((c, depth) for c in node.children if isinstance(c, Tree))


def _syntax_error(exc: UnexpectedInput, text: str, origin: BodyOrigin) -> CompileError:
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        span = origin.span(exc.line, exc.column, exc.column + 1)
        return CompileError(f"unexpected character {char!r} in the circuit", span, hint=_CHAR_HINTS.get(char))
    if isinstance(exc, UnexpectedEOF):
        return _too_early(text, origin, set(exc.expected))
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    expected = set(exc.accepts or exc.expected)
    if tok.type == "$END":
        return _too_early(text, origin, expected)
    line, col = tok.line or 1, tok.column or 1
    end = tok.end_column if tok.end_line in (None, line) and tok.end_column else col + 1
    what = f"class {tok}" if tok.type == "CLASS" else repr(str(tok))
    hint = _hint(expected)
    if str(tok) in _CHAR_HINTS and tok.type not in expected:
        hint = _CHAR_HINTS[str(tok)]
    elif tok.type == "NAME" and "AT" not in expected and "THEN" in expected:
        hint = "compose generators with '.' (one after the other) or '||' (side by side)"
    elif tok.type == "NAME" and "CLASS" in expected:
        hint = "classes are written c00 to c95, in lower case"
    return CompileError(f"unexpected {what}; expected {_expected(expected)}", origin.span(line, col, max(end, col + 1)),
                        hint=hint)


def _too_early(text: str, origin: BodyOrigin, expected: set[str]) -> CompileError:
    lines = text.splitlines() or [""]
    end = len(lines[-1]) + 1
    return CompileError(f"the circuit ends too early; expected {_expected(expected)}",
                        origin.span(len(lines), end, end + 1), hint=_hint(expected))


def _expected(expected: set[str]) -> str:
    order = list(_WORDS)
    parts = [_WORDS[t] for t in sorted(expected, key=lambda t: order.index(t) if t in order else len(order))
             if t in _WORDS]
    if not parts:
        return "more of the circuit"
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"


def _hint(expected: set[str]) -> str | None:
    if "AT" in expected:
        return "a generator is NAME@operands: mark@c21, copy@c05->c06, merge_add@c00[c01,c02]"
    if expected & {"ARROW", "EXCHANGE", "LSQB"}:
        return "operands: one class (mark@c21), source->target (copy@c05->c06), a<->b (swap@c01<->c02) or " \
               "target[sources] (merge_add@c00[c01,c02])"
    return None


# ------------------------------------------------------------------ tree -> values
def _pos(first: Token, last: Token) -> Pos:
    end = last.end_column if last.end_line == first.line and last.end_column else first.end_column
    return (first.line, first.column, end)


class _Build(Transformer_NonRecursive):
    """Parse tree -> circuit values, checking each generator against its family."""

    def __init__(self, origin: BodyOrigin):
        super().__init__()
        self.origin = origin

    def fail(self, message: str, first: Token, last: Token | None = None, hint: str | None = None) -> CompileError:
        line, col, end = _pos(first, last or first)
        return CompileError(message, self.origin.span(line, col, end), hint=hint)

    # operands: (form, class tokens)
    # operands: (form, class tokens, first token, last token)
    def one(self, c):
        return ("one", [t for t in c if t.type == "CLASS"], c[0], c[-1])

    def arrow(self, c):
        return ("arrow", [t for t in c if t.type == "CLASS"], c[0], c[-1])

    def exchange(self, c):
        return ("exchange", [t for t in c if t.type == "CLASS"], c[0], c[-1])

    def apply(self, c):
        return ("apply", [t for t in c if t.type == "CLASS"], c[0], c[-1])

    def generator(self, c):
        name = c[0]
        form, tokens, first, last = c[-1]
        kind, variant = self.spelling(name)
        if FORM[kind] != form:
            raise self.fail(f"{name} takes {_FORM_WORDS[FORM[kind]]}: {_example(kind, variant)}", first, last,
                            hint=f"{_FORM_WORDS[form]} is how {_FORM_USERS[form]} are written")
        if form == "apply":
            arity = 1 if variant in MERGE_UNARY else 2
            if len(tokens) != arity + 1:
                raise self.fail(f"{name} reads {'one class' if arity == 1 else 'two classes'} into its target, got "
                                f"{len(tokens) - 1}: {_example(kind, variant)}", first, last)
        classes = tuple(self.class_index(t) for t in tokens)
        return Gen(kind, variant, classes, _pos(name, last))

    def spelling(self, name: Token) -> tuple[str, str]:
        text = str(name)
        if text in ("mark", "copy", "swap", "quote", "evaluate"):
            return text, ""
        if text in DEFAULT_VARIANT:
            return text, DEFAULT_VARIANT[text]
        family, _, variant = text.partition("_")
        if family in VARIANTS and variant in VARIANTS[family]:
            return family, variant
        if family in VARIANTS and variant:
            owner = next((k for k, vs in VARIANTS.items() if variant in vs), None)
            also = f"; {variant} is a variant of {owner}: {owner}_{variant}" if owner else ""
            raise self.fail(f"{family} has no variant {variant!r}{also}", name,
                            hint=f"{family}_VARIANT with VARIANT one of {', '.join(VARIANTS[family])}")
        if text == "reduce":
            raise self.fail("reduce needs a variant: " + ", ".join(f"reduce_{r}" for r in VARIANTS["reduce"]), name,
                            hint="reduce_sum@c00->c01 writes the sum of c00 into every element of c01")
        raise self.fail(f"unknown generator {text!r}{did_you_mean(text, SPELLINGS)}", name,
                        hint="generators: mark, copy, swap, merge_*, split_*, reduce_*, quote, evaluate "
                             "(docs/sigil.md)")

    def class_index(self, tok: Token) -> int:
        k = int(str(tok)[1:])
        if k >= CLASSES:
            raise self.fail(f"there is no class {tok}: the classes are c00 to c{CLASSES - 1}", tok)
        return k

    # composition
    def sequence(self, c):
        steps = tuple(x for x in c if not isinstance(x, Token))
        return Seq(steps, _first_at(steps))

    def parallel(self, c):
        branches = tuple(x for x in c if not isinstance(x, Token))
        return Par(branches, _first_at(branches))

    def group(self, c):
        return next(x for x in c if not isinstance(x, Token))

    def identity(self, c):
        return Seq((), _pos(c[0], c[0]))

    # files
    def bare(self, c):
        return c[0]

    def kernels(self, c):
        return list(c)

    def kernel(self, c):
        head = [x for x in c if isinstance(x, Token)]
        circuit = next(x for x in c if not isinstance(x, Token))
        name = next(t for t in head if t.type == "NAME")
        version = next((t for t in head if t.type == "VERSION"), None)
        summary = next((t for t in head if t.type == "STRING"), None)
        if version is not None and not SEMVER.match(str(version)):
            line, col, end = _pos(version, version)
            raise DocumentError(f"invalid version {str(version)!r} for kernel {str(name)!r}: expected a semantic "
                                "version MAJOR.MINOR.PATCH such as 1.0.0", self.origin.span(line, col, end),
                                hint="a pre-release may follow a hyphen: 1.0.0-rc.1; numbers have no leading zeros")
        line, col, end = _pos(head[0], head[-1])
        return KernelText(str(name), None if version is None else str(version),
                          "" if summary is None else str(summary)[1:-1], circuit, self.origin.span(line, col, end))


_FORM_WORDS = {"one": "one class", "arrow": "a source and a target", "exchange": "two classes to exchange",
               "apply": "a target and its sources"}
_FORM_USERS = {"one": "mark, quote and evaluate", "arrow": "copy and the reductions", "exchange": "swap's operands",
               "apply": "merge and split"}


def _example(kind: str, variant: str) -> str:
    if kind in ("merge", "split"):
        return f"{kind}_{variant}@c00{'[c01]' if variant in MERGE_UNARY else '[c01,c02]'}"
    if kind == "reduce":
        return f"reduce_{variant}@c00->c01"
    return EXAMPLE[kind]


def _first_at(nodes: tuple[Node, ...]) -> Pos | None:
    return next((n.at for n in nodes if n.at is not None), None)

