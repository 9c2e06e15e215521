"""Kernel body text -> `ast.Body`, with every node's span mapped into the document.

The grammar (grammar.lark) is LALR(1); a small post-lexer gives it one `_NL` per
statement (newlines inside brackets continue the line, blank lines and comments
vanish). Syntax errors become `CompileError`s that point at the offending token and say
in words what could have come instead ("expected an expression or ')'"), with a hint
when a bracket was left open.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Iterator

import attrs
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.visitors import Transformer_NonRecursive

from hologram.core.errors import CompileError, Span
from hologram.dsl import ast
from hologram.dsl.document import KernelDef
from hologram.dsl.schema import MAX_RANK

MAX_DEPTH = 100  # expression nesting; deeper bodies are refused rather than overflowing the stack
# statements in one kernel body: several passes take time quadratic in it (docs/dsl.md, "Limits")
MAX_STATEMENTS = 4096

_OPEN = {"LPAR": "RPAR", "LSQB": "RSQB"}
NUMPY_PREFIXES = frozenset({"np", "numpy"})  # `np.exp(x)` means `exp(x)` (docs/dsl.md, "numpy spellings")
NUMPY_CONSTANTS = frozenset({"pi", "e", "inf", "nan"})  # `np.pi` means `pi`
_CLOSE = frozenset(_OPEN.values())


class _Lines:
    """Post-lexer: newlines inside brackets are whitespace; one `_NL` ends each statement."""

    always_accept = ("_NL",)  # lark asks every post-lexer which terminals it must always see

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        last: Token | None = None
        for tok in stream:
            if tok.type == "_NL":
                if depth == 0 and last is not None and last.type != "_NL":
                    last = tok
                    yield tok
                continue
            if tok.type in _OPEN:
                depth += 1
            elif tok.type in _CLOSE:
                depth = max(depth - 1, 0)
            last = tok
            yield tok
        if last is not None and last.type != "_NL":
            # a synthetic end of input; empty text tells the error reporter so
            yield Token("_NL", "", last.end_pos, last.end_line, last.end_column, last.end_line,
                        last.end_column + 1, last.end_pos)


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(Path(__file__).with_name("grammar.lark").read_text(), parser="lalr", lexer="basic",
                postlex=_Lines(), propagate_positions=True, maybe_placeholders=False)


# ------------------------------------------------------------------ tree -> AST
class _ToAst(Transformer_NonRecursive):
    """Builds AST nodes bottom-up; non-recursive, so deeply nested input cannot overflow."""

    def __init__(self, kdef: KernelDef):
        super().__init__()
        self.origin = kdef.origin

    def _span(self, node: Tree | Token) -> Span | None:
        m = node if isinstance(node, Token) else node.meta
        if getattr(m, "empty", False):  # an empty body: nothing to point at
            return None
        return self.origin.span(m.line, m.column, m.end_column, m.end_line)

    def _call_userfunc(self, tree: Tree, new_children=None):
        # every rule method gets the node's span and its children without brackets;
        # overriding this hook also lets our CompileErrors through unwrapped
        children = tree.children if new_children is None else new_children
        kept = [c for c in children if not _is_punct(c)]
        if tree.data == "accumulate_indexed":  # its target's span ends at the target's own ']'
            close = next(c for c in children if isinstance(c, Token) and c.type == "RSQB")
            return self.accumulate_indexed(self._span(tree), kept, close)
        return getattr(self, tree.data)(self._span(tree), kept)

    # statements
    def start(self, span, children):
        return ast.Body(tuple(children))

    def assign(self, span, c):
        return ast.Assign(self._name(c[0]), None, c[1], span)

    def assign_indexed(self, span, c):
        target, *indices, value = c
        names = []
        for i in indices:
            if not isinstance(i, ast.Name):
                raise CompileError(f"the target's indices must be index variable names, like {target}[i, j]",
                                   i.span, hint="shifted or computed indices can only appear on the right-hand side")
            names.append(i)
        return ast.Assign(self._name(target), tuple(names), value, span)

    def accumulate_indexed(self, span, c, close: Token):
        target, *indices, op, value = c
        name = self._name(target)
        end = self.origin.span(close.line, close.column, close.end_column, close.end_line)
        target_span = attrs.evolve(name.span, end_line=end.end_line, end_col=end.end_col)
        return ast.AugAssign(name, tuple(indices), str(op)[:-1], value, span, target_span)

    # expressions
    def name(self, span, c):
        return self._name(c[0])

    def number(self, span, c):
        return ast.Num(_number(c[0], span), str(c[0]), span)

    def true(self, span, c):
        return ast.Bool(True, span)

    def false(self, span, c):
        return ast.Bool(False, span)

    def paren(self, span, c):
        return c[0]

    def subscript(self, span, c):
        base = self._name(c[0]) if isinstance(c[0], Token) else c[0]
        if isinstance(base, ast.Attribute) and base.attr == "shape" and base.index is None and len(c) == 2 \
                and not isinstance(c[1], (ast.Slice, ast.EllipsisIndex, ast.NoneIndex)):
            return ast.Attribute(base.base, "shape", c[1], span)  # x.shape[0]: a dimension
        return ast.Subscript(base, tuple(c[1:]), span)

    def slice(self, span, c):
        parts: list = [None, None, None]
        k = 0
        for child in c:  # the colons say which of start, stop and step each expression is
            if isinstance(child, Token) and child.type == "COLON":
                k += 1
            else:
                parts[k] = child
        return ast.Slice(*parts, span)

    def ellipsis(self, span, c):
        return ast.EllipsisIndex(span)

    def none(self, span, c):
        return ast.NoneIndex(span)

    def keyword(self, span, c):
        return ast.Keyword(str(c[0]), c[1], span)

    def ranged(self, span, c):
        return ast.Ranged(self._name(c[0]), c[2], span)

    def call(self, span, c, method: bool = False):
        args, keywords = [], []
        for a in c[1:]:
            if isinstance(a, ast.Keyword):
                if any(k.name == a.name for k in keywords):
                    raise CompileError(f"keyword argument '{a.name}' is given twice", a.span)
                keywords.append(a)
            elif keywords:
                raise CompileError("a positional argument cannot follow a keyword argument", a.span)
            else:
                args.append(a)
        return ast.Call(self._name(c[0]), tuple(args), tuple(keywords), span, method)

    def dotted_call(self, span, c):
        base, func = (self._name(c[0]) if isinstance(c[0], Token) else c[0]), self._name(c[1])
        if isinstance(base, ast.Name) and base.id in NUMPY_PREFIXES:  # np.exp(x) is exp(x): accepted
            return self.call(span, [func, *c[2:]])
        return self.call(span, [func, base, *c[2:]], method=True)  # x.sum(axis=1) is sum(x, axis=1)

    def attribute(self, span, c):
        base = self._name(c[0]) if isinstance(c[0], Token) else c[0]
        if isinstance(base, ast.Name) and base.id in NUMPY_PREFIXES:
            if str(c[1]) == "newaxis":  # np.newaxis is None
                return ast.NoneIndex(span)
            if str(c[1]) in NUMPY_CONSTANTS:  # np.pi is pi
                return ast.Name(str(c[1]), span)
        return ast.Attribute(base, str(c[1]), None, span)

    def unary(self, span, c):
        return ast.Unary(str(c[0]), c[1], span)

    def binary(self, span, c):
        return ast.Binary(str(c[1]), c[0], c[2], span)

    def compare(self, span, c):
        if len(c) > 3:
            raise CompileError("comparisons cannot be chained", span,
                               hint=f"write each comparison separately, e.g. (a {c[1]} b) and (b {c[3]} c)")
        return ast.Binary(str(c[1]), c[0], c[2], span)

    def _name(self, tok: Token | ast.Name) -> ast.Name:
        return tok if isinstance(tok, ast.Name) else ast.Name(str(tok), self._span(tok))


def _is_punct(c) -> bool:
    return isinstance(c, Token) and c.type in ("LPAR", "RPAR", "LSQB", "RSQB", "DOT")


def _number(tok: Token, span: Span) -> int | float:
    text = tok.replace("_", "")
    try:
        if text[:2].lower() in ("0x", "0b"):
            return int(text, 0)
        if any(ch in text for ch in ".eE"):
            return float(text)
        return int(text)
    except ValueError:
        raise CompileError(f"the number {tok} is too long", span) from None


# ------------------------------------------------------------------ errors
_EXPRESSION_START = frozenset({"NAME", "NUMBER", "LPAR", "MINUS", "PLUS", "TILDE", "NOT", "TRUE", "FALSE", "PY_TRUE",
                               "PY_FALSE"})
_OPERATORS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE", "BAR", "CARET", "AMP", "SHL", "SHR", "PLUS", "MINUS", "STAR", "SLASH",
                        "DSLASH", "PERCENT", "POW", "AND", "OR", "AT"})
_WORDS = {"NAME": "a name", "NUMBER": "a number", "_NL": "end of line", "$END": "end of input",
          "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "EQUAL": "'='"}
_ORDER = ("NAME", "NUMBER", "EQUAL", "LSQB", "LPAR", "COMMA", "RPAR", "RSQB", "_NL", "$END")
_CHAR_HINTS = {
    "!": "use 'not' for logical negation ('!=' compares)",
    ";": "write one statement per line",
    ":": "a slice start:stop:step is written inside an index, as in x[1:-1]",
    '"': "strings are not part of the body language", "'": "strings are not part of the body language",
    ".": "attributes and methods follow a value: x.shape[0], x.T, x[1:].sum(axis=0), (x - m).max(), np.exp(x)",
}


def _describe_expected(expected: set[str]) -> str:
    parts: list[str] = []
    rest = set(expected)
    if "NUMBER" in rest:
        parts.append("an expression")
        rest -= _EXPRESSION_START
    if len(rest & _OPERATORS) >= 3:
        parts.append("an operator")
        rest -= _OPERATORS | {"LPAR", "LSQB", "DOT", "IN"}  # after an operand: a call, an attribute, a range
    parts += [_WORDS[t] for t in _ORDER if t in rest]
    parts += sorted(repr(_lark().get_terminal(t).pattern.value) for t in rest if t not in _WORDS)
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"


def _describe_token(tok: Token) -> str:
    if tok.type == "_NL":
        return "end of input" if tok.value == "" else "end of line"
    if tok.type == "$END":
        return "end of input"
    if tok.type == "NAME":
        return f"name '{tok}'"
    if tok.type == "NUMBER":
        return f"number {tok}"
    return f"'{tok}'"


def _unclosed(text: str, upto: int) -> Token | None:
    """The innermost bracket still open before offset `upto`, if any."""
    stack: list[Token] = []
    try:
        for tok in _lark().lex(text):
            if tok.start_pos is None or tok.start_pos >= upto:
                break
            if tok.type in _OPEN:
                stack.append(tok)
            elif tok.type in _CLOSE and stack:
                stack.pop()
    except UnexpectedInput:
        pass
    return stack[-1] if stack else None


def _syntax_error(exc: UnexpectedInput, text: str, kdef: KernelDef) -> CompileError:
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        span = kdef.origin.span(exc.line, exc.column, exc.column + 1)
        return CompileError(f"unexpected character {char!r}", span, hint=_CHAR_HINTS.get(char))
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    expected = set(exc.accepts or exc.expected)
    line, col = tok.line or 1, tok.column or 1
    end = tok.end_column if tok.end_line in (None, line) and tok.end_column else col + 1
    span = kdef.origin.span(line, col, max(end, col + 1))
    message = f"unexpected {_describe_token(tok)}"
    if wanted := _describe_expected(expected):
        message += f"; expected {wanted}"
    hint = _python_hint(text, tok)
    opener = _unclosed(text, tok.start_pos if tok.start_pos is not None else len(text))
    if hint is not None:
        pass
    elif opener is not None and (tok.type == "_NL" or opener.line != line):
        closer = ")" if opener.type == "LPAR" else "]"
        hint = f"the '{opener}' at line {kdef.origin.span(opener.line, opener.column).line}, " \
               f"column {kdef.origin.span(opener.line, opener.column).col} is never closed with '{closer}'"
    elif tok.type == "DOT":
        hint = "attributes and methods follow a value: x.shape[0], x.T, x[1:].sum(axis=0), (x - m).max(), np.exp(x)"
    elif tok.type == "EQUAL" and "EQ" in expected:
        hint = "'=' assigns and only once per line; compare with '=='"
    elif "EQUAL" in expected and tok.type != "EQUAL" and len(expected) <= 2:
        hint = "each statement is `name = expression` or `name[i, j] = expression`"
    return CompileError(message, span, hint=hint)


STATEMENT_HINTS = {  # Python statements a numpy user may write, and this language's form of them
    "for": "there are no loops: a statement applies to whole arrays (y = exp(x)) or, in index notation, to "
           "every index (y[i] = x[n - 1 - i]); a sum over an index is sum(x[i, k], k)",
    "while": "there are no loops: a statement applies to whole arrays, or to every index in index notation",
    "if": "there are no if statements: select elementwise with where(condition, a, b)",
    "elif": "there are no if statements: nest where(c1, a, where(c2, b, c))",
    "else": "there are no if statements: select elementwise with where(condition, a, b)",
    "def": "a kernel is one document's body; write another [[kernels]] entry for another kernel",
    "return": "outputs are assigned by name: write `y = ...` for an output y",
    "import": "nothing is imported: the functions are built in (np.exp(x) and exp(x) are the same)",
}


def _python_hint(text: str, tok: Token) -> str | None:
    """A hint when the unexpected text is Python rather than this language: a statement
    keyword, a conditional expression, an augmented assignment."""
    if tok.start_pos is None:
        return None
    start = text.rfind("\n", 0, tok.start_pos) + 1
    first = text[start:].split(None, 1)[0] if text[start:].strip() else ""
    if first in STATEMENT_HINTS:
        return STATEMENT_HINTS[first]
    if tok.type == "NAME" and tok.value == "if":  # `a if c else b`
        return "a conditional expression is where(condition, a, b)"
    if tok.type == "PLUS_ASSIGN":  # `y += x` on a whole array (index notation has `h[b[i]] += w[i]`)
        return ("there is no '+=' on whole arrays: each name is assigned once; write a new name (y2 = y + x), or "
                "scatter-add in index notation, h[b[i]] += w[i] (numpy's np.add.at)")
    if tok.type in ("PLUS", "MINUS", "STAR", "SLASH", "DSLASH", "PERCENT", "POW", "BAR", "AMP", "CARET", "SHL", "SHR") \
            and text.startswith("=", tok.end_pos or 0):  # `y -= x`
        return (f"there is no '{tok.value}=': each name is assigned once; write a new name (y2 = y {tok.value} x), "
                "or the whole expression at once")
    return None


# ------------------------------------------------------------------ entry point
def parse_body(kdef: KernelDef) -> ast.Body:
    """Parse `kdef.body` into an AST whose spans point into the kernel's document."""
    text = kdef.body.replace("\r\n", "\n")
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, kdef) from None
    body = _ToAst(kdef).transform(tree)
    if len(body.statements) > MAX_STATEMENTS:
        raise CompileError(f"the kernel body has {len(body.statements)} statements; Hologram supports at most "
                           f"{MAX_STATEMENTS} in one kernel", body.statements[MAX_STATEMENTS].span,
                           hint="split the kernel into several kernels")
    for st in body.statements:
        if ast.depth(st.value) > MAX_DEPTH:
            raise CompileError(f"the expression is nested too deeply (more than {MAX_DEPTH} levels)", st.value.span,
                               hint="split it into several statements")
        if st.indices is not None and len(st.indices) > MAX_RANK:
            raise CompileError(f"{st.target.id!r} has {len(st.indices)} index variables; an array has at most "
                               f"{MAX_RANK} dimensions", st.indices[MAX_RANK].span)
        for index in st.indices if isinstance(st, ast.AugAssign) else ():
            if ast.depth(index) > MAX_DEPTH:
                raise CompileError(f"the index is nested too deeply (more than {MAX_DEPTH} levels)", index.span,
                                   hint="compute it in a statement of its own")
    return body
