"""The body grammar and parser: AST shape, precedence, spans, and syntax errors."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl_helpers import make_def
from hologram.core.errors import CompileError
from hologram.dsl import ast
from hologram.dsl.ast import format_ast, format_expr
from hologram.dsl.parser import MAX_DEPTH, parse_body


def parse(body: str, **kw) -> ast.Body:
    return parse_body(make_def(body, **kw))


def expr(text: str) -> str:
    """The s-expression of `y = <text>`."""
    (st_,) = parse(f"y = {text}").statements
    return format_expr(st_.value)


def error(body: str, **kw) -> CompileError:
    with pytest.raises(CompileError) as info:
        parse(body, **kw)
    return info.value


# ----------------------------------------------------------------------- statements
def test_statement_forms():
    body = parse("m = max(x)\nc[i, j] = alpha * sum(a[i, p] * b[p, j], p)")
    whole, indexed = body.statements
    assert whole.target.id == "m" and whole.indices is None
    assert [i.id for i in indexed.indices] == ["i", "j"]
    assert format_ast(body) == "L1   (= m (max x))\nL2   (= c[i, j] (* alpha (sum (* a[i, p] b[p, j]) p)))"


def test_comments_blank_lines_continuations_and_crlf():
    body = parse("\n# leading comment\n\ny = exp(x -   # inside parentheses\n        m)\n\n"
                 "z = w[i,\n      j]  # trailing\r\nq = 1\n")
    assert [s.target.id for s in body.statements] == ["y", "z", "q"]
    assert [s.span.line for s in body.statements] == [4, 7, 9]
    assert format_expr(body.statements[0].value) == "(exp (- x m))"
    assert format_expr(body.statements[1].value) == "w[i, j]"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment", "  \n # c\n"])
def test_empty_bodies(text):
    assert parse(text).statements == ()


PRECEDENCE = [
    ("a + b * c", "(+ a (* b c))"),
    ("a - b - c", "(- (- a b) c)"),
    ("a / b // c % d", "(% (// (/ a b) c) d)"),
    ("a ** b ** c", "(** a (** b c))"),
    ("-x ** 2", "(- (** x 2))"),
    ("2 ** -x", "(** 2 (- x))"),
    ("-+~x", "(- (+ (~ x)))"),
    ("a << b + c", "(<< a (+ b c))"),
    ("a >> 1 << 2", "(<< (>> a 1) 2)"),
    ("x | y ^ z & w", "(| x (^ y (& z w)))"),
    ("a & b == c", "(== (& a b) c)"),
    ("a < b", "(< a b)"),
    ("a <= b", "(<= a b)"),
    ("a != b", "(!= a b)"),
    ("not a and b or c", "(or (and (not a) b) c)"),
    ("a or b and not c", "(or a (and b (not c)))"),
    ("not a == b", "(not (== a b))"),
    ("(a + b) * c", "(* (+ a b) c)"),
    ("(a < b) < c", "(< (< a b) c)"),
    ("x[i + 1, n - 1 - i]", "x[(+ i 1), (- (- n 1) i)]"),
    ("f(x, y,)", "(f x y)"),
    ("sum(x, axis=-1, keepdims=true)", "(sum x :axis (- 1) :keepdims true)"),
    ("g()", "(g)"),
    ("true and false", "(and true false)"),
    ("android + notable + order", "(+ (+ android notable) order)"),
]


@pytest.mark.parametrize("text, sexpr", PRECEDENCE, ids=[p[0] for p in PRECEDENCE])
def test_precedence_and_associativity(text, sexpr):
    assert expr(text) == sexpr


@pytest.mark.parametrize("text, value", [
    ("42", 42), ("1_000", 1000), ("0x1F", 31), ("0b101", 5), ("1.5", 1.5), (".5", 0.5), ("3.", 3.0),
    ("1e-3", 1e-3), ("2.5E+4", 25000.0), ("007", 7), ("1e999", float("inf")),
])
def test_number_literals(text, value):
    node = parse(f"y = {text}").statements[0].value
    assert isinstance(node, ast.Num) and node.value == value and type(node.value) is type(value)
    assert node.text == text


def test_bools_are_keywords():
    node = parse("y = true").statements[0].value
    assert isinstance(node, ast.Bool) and node.value is True
    assert parse("y = True").statements[0].value.value is True  # Python's spelling too
    assert parse("y = False").statements[0].value.value is False
    assert isinstance(parse("y = Truex").statements[0].value, ast.Name)


# ----------------------------------------------------------------------- spans
def test_spans_map_into_the_document():
    body = parse("y = exp(x)\nz = a[i + 1] * 2", line_offset=10, col_offset=4)
    call = body.statements[0].value
    assert (call.span.line, call.span.col, call.span.end_col) == (11, 9, 15)
    assert (call.func.span.col, call.func.span.end_col) == (9, 12)
    prod = body.statements[1].value
    assert (prod.span.line, prod.span.col, prod.span.end_col) == (12, 9, 21)
    index = prod.left.indices[0]
    assert (index.span.col, index.span.end_col) == (11, 16)
    assert body.statements[1].target.span.col == 5


def test_multi_line_spans():
    value = parse("y = (a +\n     b)").statements[0].value
    assert (value.span.line, value.span.end_line) == (1, 2)


# ----------------------------------------------------------------------- errors
SYNTAX_ERRORS = [
    ("y = x +", 1, 8, r"unexpected end of input; expected an expression"),
    ("y = x x", 1, 7, r"unexpected name 'x'; expected an operator or end of line"),
    ("y = x +\nz = 1", 1, 8, r"unexpected end of line; expected an expression"),
    ("y = (x +", 1, 9, r"unexpected end of input; expected an expression"),
    ("y = f(x\nz = 2", 2, 1, r"unexpected name 'z'; expected an operator, '=', ',' or '\)'"),
    ("y = x)", 1, 6, r"unexpected '\)'; expected end of line"),
    ("y = x[]", 1, 7, r"unexpected '\]'; expected an expression"),
    ("3 = x", 1, 1, r"unexpected number 3; expected a name"),
    ("exp(x)", 1, 4, r"unexpected '\('; expected '=' or '\['"),
    ("y = $", 1, 5, r"unexpected character '\$'"),
    ("y = x ! 1", 1, 7, r"unexpected character '!'"),
    ("y = a < b < c", 1, 5, r"comparisons cannot be chained"),
    ("y = a == b != c", 1, 5, r"comparisons cannot be chained"),
    ("y[i + 1] = x", 1, 3, r"the target's indices must be index variable names"),
    ("y[2] = x", 1, 3, r"the target's indices must be index variable names"),
    ("y = f(a=1, 2)", 1, 12, r"a positional argument cannot follow a keyword argument"),
    ("y = f(a=1, a=2)", 1, 12, r"keyword argument 'a' is given twice"),
    ("y = 1\n\n  z = = 2", 3, 7, r"unexpected '='; expected an expression"),
    ("y = 1" + "0" * 5000, 1, 5, r"the number 1000.* is too long"),
]


@pytest.mark.parametrize("body, line, col, message", SYNTAX_ERRORS, ids=[e[0][:20] for e in SYNTAX_ERRORS])
def test_syntax_errors_point_at_the_offending_text(body, line, col, message):
    e = error(body)
    assert (e.span.line, e.span.col) == (line, col)
    assert re.search(message, e.message), e.message
    assert f"<test>:{line}:{col}: error:" in str(e)


def test_error_positions_follow_the_origin():
    e = error("y = 1\nz = x +", line_offset=6, col_offset=3)
    assert (e.span.line, e.span.col) == (8, 11)
    assert "   8 |    z = x +\n" in str(e) and str(e).rstrip().endswith("^")


@pytest.mark.parametrize("body, hint", [
    ("y = (x +\n", r"the '\(' at line 1, column 5 is never closed with '\)'"),
    ("y = a[i,\n   j\nz = 1", r"the '\[' at line 1, column 6 is never closed with '\]'"),
    ("y = a = b", r"compare with '=='"),
    ("exp(x)", r"each statement is `name = expression`"),
    ("y = a ; z = b", r"one statement per line"),
    ("y = x;", r"one statement per line"),
    ("y = x..sum()", r"attributes and methods follow a value"),
    ("for i in range(n):\n    y[i] = x[i]", r"there are no loops"),
    ("if x > 0:\n    y = x", r"where\(condition, a, b\)"),
    ("y = x if x > 0 else 0.0", r"a conditional expression is where"),
    ("y = x\ny += x", r"there is no '\+='"),
    ("y[i] *= x[i]", r"there is no '\*='"),
    ("return x", r"outputs are assigned by name"),
    ("y = a < b < c", r"\(a < b\) and \(b < c\)"),
])
def test_error_hints(body, hint):
    e = error(body)
    assert e.hint and re.search(hint, e.hint), e.hint


def test_underline_covers_the_token():
    e = error("y = x\ny = a b")
    assert str(e).endswith("   2 | y = a b\n     |       ^")


def test_nesting_is_limited_without_crashing():
    deep = "exp(" * (MAX_DEPTH + 5) + "x" + ")" * (MAX_DEPTH + 5)
    assert "nested too deeply" in error(f"y = {deep}").message
    parens = "(" * 5000 + "x" + ")" * 5000  # parentheses leave no trace in the AST
    assert format_expr(parse(f"y = {parens}").statements[0].value) == "x"
    chain = " + ".join(["x"] * (MAX_DEPTH + 5))
    assert "nested too deeply" in error(f"y = {chain}").message
    very_deep = "-" * 20000 + "x"
    assert "nested too deeply" in error(f"y = {very_deep}").message
    ok = " + ".join(["x"] * (MAX_DEPTH - 2))
    assert len(parse(f"y = {ok}").statements) == 1


# ----------------------------------------------------------------------- robustness
TOKENS = ["y", "x", "i", "=", "+", "-", "*", "**", "/", "//", "(", ")", "[", "]", ",", "<", "<<", "==",
          "and", "not", "true", "1", "2.5", "sum", "axis", "\n", " ", "#c\n", "\t", "@", "!", ".", "0x"]


@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_token_soup_parses_or_raises_compile_error(text):
    try:
        body = parse(text)
    except CompileError as e:
        assert e.span is not None and e.span.line >= 1 and e.span.col >= 1
        return
    format_ast(body)


@given(st.text(max_size=60))
def test_any_text_parses_or_raises_compile_error(text):
    try:
        parse(text)
    except CompileError:
        pass
